/* store/ec.h - Reed-Solomon erasure coding over GF(2^8) with ISA-L (Cauchy matrix).
 *
 * Shards 0..k-1 are the data, k..k+p-1 the parity. Any k of the k+p shards rebuild the rest.
 * An ol_ec is immutable after ol_ec_init: any number of threads may encode/decode with it. */
#ifndef OL_STORE_EC_H
#define OL_STORE_EC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_EC_MAX_SHARDS 32

struct ol_ec {
	int k, p;
	uint8_t *matrix; /* (k+p) x k encode matrix: identity on top, Cauchy rows below */
	uint8_t *tbls;	 /* ec_init_tables of the parity rows */
};

/* 1 <= k, 0 <= p, k + p <= OL_EC_MAX_SHARDS. Returns 0 or -EINVAL. */
int ol_ec_init(struct ol_ec *ec, int k, int p);
void ol_ec_fini(struct ol_ec *ec);
/* parity[0..p-1] = code of data[0..k-1], each len bytes. */
void ol_ec_encode(const struct ol_ec *ec, size_t len, uint8_t *const *data, uint8_t *const *parity);
/* shards[0..k+p-1] each len bytes; present[i] says which hold valid bytes. Rebuilds every
 * shard i with !present[i] && want[i] (want NULL: all missing). Returns 0, or -EIO when fewer
 * than k shards are present. */
int ol_ec_decode(const struct ol_ec *ec, size_t len, uint8_t *const *shards, const bool *present,
		 const bool *want);

#endif
