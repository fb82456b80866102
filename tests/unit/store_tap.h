/* tests/unit/store_tap.h - the object-store tests' one-object put and compare (bucket "b"). */
#ifndef OL_TEST_STORE_TAP_H
#define OL_TEST_STORE_TAP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/config.h"
#include "store/store.h"

/* *cfg: the defaults with n drives root/d0..d(n-1) in one set of n, 2 parity, no fsync,
 * inline up to 4 KiB, 64 KiB blocks (the missed-write, heal and undecided tests' store) */
static inline void
store_tap_cfg(struct ol_config *cfg, const char *root, int n)
{
	ol_config_default(cfg);
	cfg->n_data_dirs = n;
	for (int i = 0; i < n; i++)
		snprintf(cfg->data_dirs[i], sizeof(cfg->data_dirs[i]), "%s/d%d", root, i);
	cfg->set_drive_count = n;
	cfg->default_parity_count = 2;
	cfg->fsync = false;
	cfg->inline_threshold = 4096;
	cfg->block_size = 64 * 1024;
}

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
