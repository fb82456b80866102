/* Fuzz target: everything the etcd client reads from the network - the HTTP response head,
 * chunked framing, every gateway answer decoder, watch stream lines - the layout JSON and
 * the serving leader's offline drives. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cluster/etcd_json.h"
#include "cluster/httpc.h"
#include "cluster/layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b = (const char *)data;
	int st;
	int64_t cl, id, ttl, rev, del;
	bool ch;
	(void)ol_httpc_parse_head(b, size, &st, &cl, &ch);
	size_t pos = 0, off, dl;
	long n;
	while (pos < size && (n = ol_httpc_chunk(b + pos, size - pos, &off, &dl)) > 0)
		pos += (size_t)n;

	struct ol_etcd_range_result r;
	if (ol_etcd_dec_range(b, size, &r) == 0)
		ol_etcd_range_result_fini(&r);
	struct ol_etcd_txn_result t;
	if (ol_etcd_dec_txn(b, size, &t) == 0)
		ol_etcd_txn_result_fini(&t);
	(void)ol_etcd_dec_lease(b, size, &id, &ttl);
	(void)ol_etcd_dec_write(b, size, &rev, &del);
	(void)ol_etcd_json_error(b, size, NULL, NULL, 0);

	pos = 0;
	for (;;) {
		struct ol_etcd_watch_msg m;
		n = ol_etcd_watch_parse(b + pos, size - pos, &m);
		if (n <= 0)
			break;
		ol_etcd_watch_msg_fini(&m);
		pos += (size_t)n;
	}
	struct ol_layout l;
	if (ol_layout_from_json(b, size, &l) == 0) {
		free(ol_layout_to_json(&l));
		ol_layout_fini(&l);
	}
	struct ol_offline o;
	if (ol_offline_decode(b, size, &o) == 0)
		ol_offline_fini(&o);
	return 0;
}
