/* kv/test_tap.h - minimal TAP helpers for the kv and client tests. */
#ifndef KV_TAP_H
#define KV_TAP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_fail;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_c_ = !!(cond);                                                              \
		printf("%s %d - ", ok_c_ ? "ok" : "not ok", ++tap_n);                              \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!ok_c_) {                                                                      \
			tap_fail++;                                                                \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                       \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)

static int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_fail ? 1 : 0;
}

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
