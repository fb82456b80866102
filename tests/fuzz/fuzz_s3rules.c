/* Fuzz target: the object lock and lifecycle parsers of s3/rules.c (untrusted request bodies
 * and headers). The first byte selects one: 0 LifecycleConfiguration (then its XML written
 * back and each rule matched), 1 ObjectLockConfiguration (and its stored form back), 2
 * Retention and LegalHold, 3 an ISO date, 4 the lock entries of a metadata blob. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
lifecycle(const char *body, size_t n)
{
	struct ol_s3_lc lc;
	struct ol_buf x = {0};
	const char *why;
	if (ol_s3_parse_lifecycle(body, n, &lc, &why) != 0)
		return;
	ol_s3_lc_xml(&lc, &x);
	for (unsigned i = 0; i < lc.n; i++) {
		(void)ol_s3_lc_match(&lc.rules[i], body, n < 64 ? n : 64, n, "k=v&a=b", 7);
		(void)ol_s3_lc_due(1000, lc.rules[i].exp_days, 86400000);
	}
	ol_buf_free(&x);
	ol_s3_lc_free(&lc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;
	switch (data[0] % 5) {
	case 0:
		lifecycle(body, n);
		break;
	case 1: {
		struct ol_s3_lock_cfg c, c2;
		struct ol_buf b = {0};
		const char *why;
		if (ol_s3_parse_lock_cfg(body, n, &c, &why) == 0) {
			ol_s3_lock_cfg_encode(&c, &b);
			(void)ol_s3_lock_cfg_decode(b.p ? b.p : "", b.len, &c2);
			ol_s3_lock_cfg_xml(&c, &b);
		}
		(void)ol_s3_lock_cfg_decode(body, n, &c2);
		ol_buf_free(&b);
		break;
	}
	case 2: {
		struct ol_s3_retention r;
		int on;
		(void)ol_s3_parse_retention(body, n, &r);
		(void)ol_s3_parse_legal_hold(body, n, &on);
		break;
	}
	case 3: {
		int64_t ms;
		(void)ol_s3_parse_iso_date(body, n, &ms);
		break;
	}
	default: {
		struct ol_s3_obj_lock l;
		struct ol_buf b = {0};
		ol_s3_obj_lock_get(body, n, &l);
		ol_s3_obj_lock_set(body, n, &l, &b);
		(void)ol_s3_obj_lock_blocks(&l, 1000);
		ol_buf_free(&b);
	}
	}
	return 0;
}
