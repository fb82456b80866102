/* tests/unit/test_md5mb.c - the lanes' MD5 (s3/auth/md5mb) against OpenSSL's, alone and with
 * many threads sharing the engine, on every instruction set this CPU runs. TAP. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "s3/auth/md5mb.h"
#include "tap.h"

static void
ref_md5(const uint8_t *p, size_t n, uint8_t out[16])
{
	unsigned int len = 16;
	EVP_Digest(p, n, out, &len, EVP_md5(), NULL);
}

/* Hash p in pieces cut by a xorshift of seed (some under a block, some over the engine's
 * 16 KiB; some left in the engine by ol_md5mb_update_async, waited for now and then or by
 * the next update), compare with OpenSSL. */
static int
pieces_match(const uint8_t *p, size_t n, uint64_t seed)
{
	struct ol_md5mb c;
	uint8_t got[16], want[16];
	uint64_t x = seed | 1;

	ol_md5mb_init(&c);
	for (size_t off = 0; off < n;) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t take = (x & 1) ? x % 100 : x % (3u << 20);
		if (take > n - off)
			take = n - off;
		if ((x >> 5) & 1) {
			ol_md5mb_update_async(&c, p + off, take);
			if ((x >> 6) & 1)
				ol_md5mb_wait(&c);
		} else {
			ol_md5mb_update(&c, p + off, take);
		}
		off += take;
	}
	ol_md5mb_final(&c, got);
	ref_md5(p, n, want);
	return memcmp(got, want, 16) == 0;
}

static int
hex_is(const char *s, const char *want)
{
	struct ol_md5mb c;
	uint8_t d[16];
	char hx[33];

	ol_md5mb_init(&c);
	ol_md5mb_update(&c, s, strlen(s));
	ol_md5mb_final(&c, d);
	for (int i = 0; i < 16; i++)
		snprintf(hx + 2 * i, 3, "%02x", d[i]);
	return strcmp(hx, want) == 0;
}

#define BIG (5u << 20)
static uint8_t *data;

struct worker {
	unsigned id;
	int bad;
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	for (unsigned r = 0; r < 6; r++) {
		size_t off = (w->id * 7919u + r * 131u) % 4096;
		size_t n = (16u << 10) + ((w->id * 2654435761u + r * 40503u) % (3u << 20));
		if (!pieces_match(data + off, n, w->id * 100 + r + 1))
			w->bad++;
	}
	return NULL;
}

/* One piece, queued while the engine holds (see held_lanes). */
static void *
held_main(void *arg)
{
	struct worker *w = arg;
	size_t off = w->id * 64 + 5, n = (1u << 20) + w->id * 4099u;
	struct ol_md5mb c;
	uint8_t got[16], want[16];

	ol_md5mb_init(&c);
	ol_md5mb_update(&c, data + off, n);
	ol_md5mb_final(&c, got);
	ref_md5(data + off, n, want);
	w->bad = memcmp(got, want, 16) != 0;
	return NULL;
}

/* However many CPUs this machine has: nt pieces queued while no combiner may start, then one
 * combiner takes them 16 lanes at a time (24: a pass of all 16, then of 8 and fewer; 5: one
 * pass of 5, which AVX2 runs in 8 lanes with 3 idle). */
static void
held_lanes(const char *isa, unsigned nt)
{
	enum { NT_MAX = 24 };
	unsigned NT = nt < NT_MAX ? nt : NT_MAX;
	pthread_t t[NT_MAX];
	struct worker w[NT_MAX];
	struct ol_md5mb_stats s0, s1;

	ol_md5mb_set_combiners(0);
	ol_md5mb_stats(&s0);
	for (unsigned i = 0; i < NT; i++) {
		w[i] = (struct worker){.id = i};
		if (pthread_create(&t[i], NULL, held_main, &w[i]) != 0)
			abort();
	}
	struct timespec ts = {0, 2000000};
	unsigned queued = 0;
	for (unsigned ms = 0; ms < 120000 && queued < NT; ms += 2) {
		nanosleep(&ts, NULL);
		ol_md5mb_stats(&s1);
		queued = s1.queued;
	}
	ok(queued == NT, "%s: %u pieces held in the queue", isa, queued);
	ol_md5mb_set_combiners(1);
	int bad = 0;
	for (unsigned i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
	}
	ol_md5mb_set_combiners(-1);
	ol_md5mb_stats(&s1);
	ok(bad == 0, "%s: %u pieces hashed in shared lanes match OpenSSL", isa, NT);
	ok(s1.lanes - s0.lanes > s1.runs - s0.runs, "%s: passes had several lanes busy (%.1f)", isa,
	   (double)(s1.lanes - s0.lanes) / (double)(s1.runs - s0.runs));
}

static void
check_isa(const char *isa)
{
	int rc = ol_md5mb_force(isa);
	if (rc == -ENOTSUP) {
		printf("# %s: not on this CPU\n", isa);
		return;
	}
	ok(rc == 0, "%s: chosen", isa);
	ok(hex_is("", "d41d8cd98f00b204e9800998ecf8427e"), "%s: RFC 1321 \"\"", isa);
	ok(hex_is("abc", "900150983cd24fb0d6963f7d28e17f72"), "%s: RFC 1321 \"abc\"", isa);
	ok(hex_is(
	       "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
	       "57edf4a22be3c955ac49da2e2107b67a"),
	   "%s: RFC 1321 80 digits", isa);

	static const size_t sizes[] = {1,
				       55,
				       56,
				       63,
				       64,
				       65,
				       119,
				       120,
				       128,
				       (16u << 10) - 1,
				       16u << 10,
				       (16u << 10) + 1,
				       (16u << 10) + 64,
				       1u << 20,
				       (1u << 20) + 37,
				       16u << 18,
				       BIG};
	int bad = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct ol_md5mb c;
		uint8_t got[16], want[16];
		ol_md5mb_init(&c);
		ol_md5mb_update(&c, data + 3, sizes[i]);
		ol_md5mb_final(&c, got);
		ref_md5(data + 3, sizes[i], want);
		bad += memcmp(got, want, 16) != 0;
		bad += !pieces_match(data + 1, sizes[i], i + 1);
	}
	ok(bad == 0, "%s: one thread, 17 sizes whole and in pieces match OpenSSL", isa);

	struct ol_md5mb_stats s0, s1;
	ol_md5mb_stats(&s0);
	enum { NT = 24 };
	pthread_t t[NT];
	struct worker w[NT];
	for (unsigned i = 0; i < NT; i++) {
		w[i] = (struct worker){.id = i};
		if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0)
			abort();
	}
	bad = 0;
	for (unsigned i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
	}
	ol_md5mb_stats(&s1);
	ok(bad == 0, "%s: %d threads x 6 streams match OpenSSL", isa, NT);
	ok(s1.runs > s0.runs, "%s: the engine ran", isa);
	printf("# %s: %.1f lanes busy per pass over %llu passes\n", isa,
	       (double)(s1.lanes - s0.lanes) / (double)(s1.runs - s0.runs),
	       (unsigned long long)(s1.runs - s0.runs));
	held_lanes(isa, 24);
	held_lanes(isa, 5);
}

int
main(void)
{
	const char *best = ol_md5mb_isa();
	data = malloc(BIG + 4096);
	if (!data)
		abort();
	tap_fill(data, BIG + 4096, 7);
	printf("# this CPU: %s\n", best);
	check_isa("generic");
	check_isa("avx2");
	check_isa("avx512");
	ok(ol_md5mb_force("sse9") == -EINVAL, "an unknown instruction set is refused");
	ok(ol_md5mb_force(best) == 0, "back to %s", best);
	free(data);
	tap_done();
}
