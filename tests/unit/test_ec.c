/* test_ec.c - ISA-L Reed-Solomon checked against a naive GF(2^8) coder written here
 * (polynomial 0x11d, shift-and-add multiply, Cauchy rows 1/(i ^ j)), and decode for every
 * erasure pattern of up to P lost shards. TAP output. */
#include "store/ec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_test, n_fail;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_ = !!(cond);                                                                \
		n_test++;                                                                          \
		if (!ok_)                                                                          \
			n_fail++;                                                                  \
		printf("%s %d - ", ok_ ? "ok" : "not ok", n_test);                                 \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

/* Reference GF(2^8) arithmetic: no tables. */
static uint8_t
ref_mul(uint8_t a, uint8_t b)
{
	unsigned r = 0, x = a;

	for (; b; b >>= 1) {
		if (b & 1)
			r ^= x;
		x <<= 1;
		if (x & 0x100)
			x ^= 0x11d;
	}
	return (uint8_t)r;
}

static uint8_t
ref_inv(uint8_t a)
{
	for (unsigned b = 1; b < 256; b++)
		if (ref_mul(a, (uint8_t)b) == 1)
			return (uint8_t)b;
	return 0;
}

/* The (k+p) x k matrix: identity, then Cauchy rows a[i][j] = 1 / (i ^ j). */
static void
ref_matrix(uint8_t *m, int k, int p)
{
	for (int i = 0; i < k + p; i++)
		for (int j = 0; j < k; j++)
			m[i * k + j] = i < k ? (i == j) : ref_inv((uint8_t)(i ^ j));
}

static void
ref_encode(const uint8_t *m, int k, int p, size_t len, uint8_t **data, uint8_t **par)
{
	for (int r = 0; r < p; r++)
		for (size_t b = 0; b < len; b++) {
			uint8_t s = 0;

			for (int j = 0; j < k; j++)
				s ^= ref_mul(m[(k + r) * k + j], data[j][b]);
			par[r][b] = s;
		}
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint8_t
rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 24);
}

struct shards {
	int n;
	size_t len;
	uint8_t *orig[OL_EC_MAX_SHARDS], *work[OL_EC_MAX_SHARDS];
};

/* Every subset of n shards of size 1..p (bitmask), lost, rebuilt, compared. */
static int
all_patterns(const struct ol_ec *ec, struct shards *s, int *patterns)
{
	int n = s->n, bad = 0;

	for (unsigned mask = 1; mask < (1u << n); mask++) {
		bool present[OL_EC_MAX_SHARDS];
		int lost = __builtin_popcount(mask);

		if (lost > ec->p)
			continue;
		for (int i = 0; i < n; i++) {
			present[i] = !(mask & (1u << i));
			memcpy(s->work[i], s->orig[i], s->len);
			if (!present[i])
				memset(s->work[i], 0xa5, s->len);
		}
		if (ol_ec_decode(ec, s->len, s->work, present, NULL))
			bad++;
		for (int i = 0; i < n; i++)
			if (memcmp(s->work[i], s->orig[i], s->len))
				bad++;
		(*patterns)++;
	}
	return bad;
}

static void
check(int k, int p, size_t len)
{
	struct ol_ec ec;
	struct shards s = {.n = k + p, .len = len};
	uint8_t *ref_par[OL_EC_MAX_SHARDS], m[OL_EC_MAX_SHARDS * OL_EC_MAX_SHARDS];
	bool present[OL_EC_MAX_SHARDS];
	int patterns = 0, bad;

	ok(ol_ec_init(&ec, k, p) == 0, "init k=%d p=%d", k, p);
	ref_matrix(m, k, p);
	ok(!memcmp(m, ec.matrix, (size_t)(k + p) * k), "(%d,%d) matrix equals the reference", k, p);
	for (int i = 0; i < s.n; i++) {
		s.orig[i] = malloc(len);
		s.work[i] = malloc(len);
		for (size_t b = 0; b < len && i < k; b++)
			s.orig[i][b] = rnd8();
	}
	for (int r = 0; r < p; r++)
		ref_par[r] = malloc(len);
	ol_ec_encode(&ec, len, s.orig, s.orig + k);
	ref_encode(m, k, p, len, s.orig, ref_par);
	bad = 0;
	for (int r = 0; r < p; r++)
		bad += memcmp(ref_par[r], s.orig[k + r], len) != 0;
	ok(bad == 0, "(%d,%d) len %zu: ISA-L parity equals the naive coder", k, p, len);
	bad = all_patterns(&ec, &s, &patterns);
	ok(bad == 0, "(%d,%d) len %zu: %d erasure patterns rebuilt exactly", k, p, len, patterns);
	for (int i = 0; i < s.n; i++)
		present[i] = i > p; /* p + 1 lost */
	ok(ol_ec_decode(&ec, len, s.work, present, NULL) == -EIO, "(%d,%d): p+1 lost is -EIO", k,
	   p);
	for (int i = 0; i < s.n; i++) {
		free(s.orig[i]);
		free(s.work[i]);
	}
	for (int r = 0; r < p; r++)
		free(ref_par[r]);
	ol_ec_fini(&ec);
}

int
main(void)
{
	static const int kp[][2] = {{2, 1}, {3, 1}, {2, 2}, {4, 2}, {3, 3}, {8, 4}, {1, 1}};
	static const size_t lens[] = {1, 33, 4097};
	struct ol_ec ec;

	for (size_t i = 0; i < sizeof(kp) / sizeof(kp[0]); i++)
		for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++)
			check(kp[i][0], kp[i][1], lens[j]);
	ok(ol_ec_init(&ec, 0, 1) == -EINVAL, "k=0 refused");
	ok(ol_ec_init(&ec, 30, 3) == -EINVAL, "k+p > max refused");
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
