/* tests/unit/kv_data.h - deterministic block contents and keys for the kv and client tests. */
#ifndef OL_TEST_KV_DATA_H
#define OL_TEST_KV_DATA_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* Deterministic content: value bytes are a function of (seed, i). */
static inline void
fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)(seed + i);
}

static inline int
check_pattern(const uint8_t *p, size_t len, uint64_t seed)
{
	uint8_t *q = malloc(len ? len : 1);
	fill_pattern(q, len, seed);
	int r = memcmp(p, q, len) == 0;
	free(q);
	return r;
}

static inline void
make_key(uint8_t key[32], uint64_t id)
{
	memset(key, 0, 32);
	memcpy(key, &id, 8);
	key[31] = 0x5a;
}

#endif
