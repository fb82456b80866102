/* tests/unit/tap.h - minimal TAP helpers shared by the C unit tests. */
#ifndef OL_TEST_TAP_H
#define OL_TEST_TAP_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_c_ = !!(cond);                                                              \
		printf("%s %d - ", ok_c_ ? "ok" : "not ok", ++tap_n);                              \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!ok_c_) {                                                                      \
			tap_failed++;                                                              \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                       \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)

#define tap_done()                                                                                 \
	do {                                                                                       \
		printf("1..%d\n", tap_n);                                                          \
		return tap_failed ? 1 : 0;                                                         \
	} while (0)

#define tap_skip_all(why)                                                                          \
	do {                                                                                       \
		printf("1..0 # SKIP %s\n", why);                                                   \
		return 77;                                                                         \
	} while (0)

/* Deterministic test bytes (xorshift64 from seed): the store tests' objects. */
static inline void
tap_fill(uint8_t *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 32);
	}
}

#endif
