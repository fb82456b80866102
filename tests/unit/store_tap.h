/* tests/unit/store_tap.h - the object-store tests' one-object put and compare (bucket "b"). */
#ifndef OL_TEST_STORE_TAP_H
#define OL_TEST_STORE_TAP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "store/store.h"

/* key k of bucket "b" = d[0..n); 0 or -errno */
static inline int
put_obj(struct ol_store *st, const char *k, const uint8_t *d, size_t n)
{
	struct ol_put *p;
	int rc = ol_store_put_begin(st, "b", k, strlen(k), (int64_t)n, &p);

	if (!rc)
		rc = ol_store_put_write(p, d, n);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, "\"e\"", "m", 1, NULL);
}

/* 1 same bytes, 0 different, -errno */
static inline int
get_eq(struct ol_store *st, const char *k, const uint8_t *d, size_t n)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t *buf = malloc(n + 1);
	int rc = ol_store_get_open(st, "b", k, strlen(k), &g, &info);
	ssize_t r = 0;

	if (!rc) {
		r = ol_store_get_read(g, 0, buf, n);
		ol_store_get_close(g);
	}
	rc = rc ? rc : r < 0 ? (int)r : (r == (ssize_t)n && info.size == n && !memcmp(buf, d, n));
	free(buf);
	return rc;
}

#endif
