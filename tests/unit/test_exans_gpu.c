/* tests/unit/test_exans_gpu.c - the CPU twin of libol_exans_gpu (src/codec/cuda/exans_gpu.c):
 * the stored form of every kind of value against the one built from ol_exans_compress with
 * libopenlake's rules (client/compress.h), decode round trips, corruption, bad arguments.
 * (test_vllm_gpupath.py also checks it against what libopenlake really stores.) */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "codec/cuda/exans_gpu.h"
#include "codec/exans.h"
#include "codec/exans_fmt.h"
#include "tap.h"

static uint8_t src[5 * 65536 + 777], out[sizeof(src) * 2], ref[sizeof(src) * 2];
static uint8_t dec[sizeof(src)], work[(6 + 1) * (65536 + 12) + 6 * 16 + 16];

/* BF16 with a peaked exponent distribution: compresses. */
static void
fill_kv(uint8_t *p, size_t n, uint64_t seed)
{
	tap_fill(p, n, seed);
	for (size_t i = 1; i < n; i += 2)
		p[i] = (uint8_t)((p[i] & 0x80) | 0x3c | (p[i] & 1));
}

/* libopenlake's stored form of src[0..n) (compress.c pack_one, default options). */
static size_t
reference(const uint8_t *s, size_t n, uint8_t *r)
{
	if (n >= 64) {
		ssize_t c = ol_exans_compress(s, n, r + 16, sizeof(ref) - 16, NULL);
		if (c > 0 && (size_t)c + 16 < n) {
			memcpy(r, "OLZ1\1\0\0\0", 8);
			for (int i = 0; i < 8; i++)
				r[8 + i] = (uint8_t)((uint64_t)n >> (8 * i));
			return (size_t)c + 16;
		}
	}
	if (n >= 4 && memcmp(s, "OLZ1", 4) == 0) {
		memcpy(r, "OLZ1\0\0\0\0", 8);
		for (int i = 0; i < 8; i++)
			r[8 + i] = (uint8_t)((uint64_t)n >> (8 * i));
		memcpy(r + 16, s, n);
		return n + 16;
	}
	memcpy(r, s, n);
	return n;
}

static void
check(const char *what, size_t n)
{
	size_t rn = reference(src, n, ref);
	int64_t r = ol_exans_gpu_encode(src, n, out, sizeof(out), work, NULL);
	ok(r == (int64_t)rn && memcmp(out, ref, rn) == 0,
	   "%s (%zu bytes): stored form = "
	   "libopenlake's (%lld vs %zu)",
	   what, n, (long long)r, rn);
	ok(ol_exans_gpu_work_bytes(n) <= sizeof(work) && ol_exans_gpu_bound(n) >= rn,
	   "%s: work and bound", what);
	memset(dec, 0xaa, sizeof(dec));
	int64_t d = ol_exans_gpu_decode(out, out, (uint64_t)(r < 0 ? 0 : r), dec, n, work, NULL);
	ok(d == (int64_t)n && memcmp(dec, src, n) == 0, "%s: decodes", what);
}

/* The trailer checksum: XXH3-64's low 32 bits, little-endian, at any address. */
static void
check_xxh3(void)
{
	static const uint64_t lens[] = {0, 10, 240, 241, 1025, 100000};
	int same = 1;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t at[7] = {0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a};
		uint32_t want = (uint32_t)XXH3_64bits(src + 1, (size_t)lens[i]);
		same &= ol_exans_gpu_xxh3(src + 1, lens[i], at + 1, NULL) == 0;
		same &= at[0] == 0x5a && at[5] == 0x5a && at[1] == (uint8_t)want &&
			at[2] == (uint8_t)(want >> 8) && at[3] == (uint8_t)(want >> 16) &&
			at[4] == (uint8_t)(want >> 24);
	}
	ok(same, "xxh3: libxxhash's XXH3_64bits, low 32 bits little-endian, unaligned");
	ok(ol_exans_gpu_xxh3(NULL, 10, out, NULL) == -EINVAL &&
	       ol_exans_gpu_xxh3(src, 10, NULL, NULL) == -EINVAL,
	   "xxh3: NULL pointers");
}

/* A batch encoded in halves: every value started (each its own work and state), then each
 * finished in turn into one output: each the stored form libopenlake writes. */
static void
check_encode_batch(void)
{
	static const struct {
		size_t at, n;
	} v[] = {{0, 200000}, {1, 65536}, {7, 100}, {3, 10}, {0, 0}, {5, 65536 * 3 + 1}};
	enum { NV = sizeof(v) / sizeof(v[0]) };
	uint8_t *w[NV];
	uint32_t *st[NV];
	int good = 1;
	for (size_t i = 0; i < NV; i++) {
		w[i] = malloc(ol_exans_gpu_work_bytes(v[i].n));
		st[i] = malloc(ol_exans_gpu_state_bytes(v[i].n));
		good &= w[i] && st[i] &&
			ol_exans_gpu_encode_start(src + v[i].at, v[i].n, w[i], st[i], NULL) == 0;
	}
	for (size_t i = 0; i < NV; i++) {
		int64_t r = ol_exans_gpu_encode_finish(src + v[i].at, v[i].n, out, sizeof(out),
						       w[i], st[i], NULL);
		size_t rn = reference(src + v[i].at, v[i].n, ref);
		good &= r == (int64_t)rn && memcmp(out, ref, rn) == 0;
		good &= ol_exans_gpu_state_bytes(v[i].n) == 8 + 4 * ((v[i].n + 65535) / 65536);
	}
	ok(good, "encode in halves: %d values started, then finished: libopenlake's bytes", NV);
	ok(ol_exans_gpu_encode_start(src, 100, w[0], (uint8_t *)st[0] + 1, NULL) == -EINVAL &&
	       ol_exans_gpu_encode_start(src, 100, w[0], NULL, NULL) == -EINVAL &&
	       ol_exans_gpu_encode_finish(src, 100, NULL, 1000, w[0], st[0], NULL) == -EINVAL,
	   "encode in halves: bad arguments");
	for (size_t i = 0; i < NV; i++) {
		free(w[i]);
		free(st[i]);
	}
}

/* A batch decoded in halves: every value started (one work area, its own state), then each
 * finished: the values back; a corrupt block caught by its value's finish only. */
static void
check_decode_batch(void)
{
	static uint8_t stored[3][sizeof(src) + 64], plain[3][sizeof(src)];
	static uint32_t st[3][(8 + 4 * 8) / 4];
	static const size_t n[3] = {200000, 100, 65536 * 2 + 5};
	int64_t len[3], got[3];
	int good = 1;
	for (int i = 0; i < 3; i++)
		len[i] =
		    ol_exans_gpu_encode(src + i, n[i], stored[i], sizeof(stored[i]), work, NULL);
	good &= len[0] > 0 && len[1] > 0 && len[2] > 0 && memcmp(stored[2], "OLZ1\1", 5) == 0;
	stored[2][len[2] - 5] ^= 0x20; /* in the last block of the third value */
	for (int i = 0; i < 3; i++)
		got[i] = ol_exans_gpu_decode_start(stored[i], stored[i], (uint64_t)len[i], plain[i],
						   n[i], work, st[i], NULL);
	for (int i = 0; i < 3; i++)
		good &= got[i] == (int64_t)n[i];
	good &= ol_exans_gpu_decode_finish(st[0]) == 0 && memcmp(plain[0], src, n[0]) == 0;
	good &= ol_exans_gpu_decode_finish(st[1]) == 0 && memcmp(plain[1], src + 1, n[1]) == 0;
	ok(good && ol_exans_gpu_decode_finish(st[2]) == -EBADMSG,
	   "decode in halves: 3 values started, then finished; the corrupt one alone fails");
	ok(ol_exans_gpu_decode_start(stored[0], stored[0], (uint64_t)len[0], plain[0], n[0], work,
				     NULL, NULL) == -EINVAL &&
	       ol_exans_gpu_decode_finish((uint8_t *)st[0] + 2) == -EINVAL,
	   "decode in halves: bad arguments");
}

/* The batched checksum: every value its own sum, lengths 0..260 and long ones, odd
 * addresses; a guard byte around each sum untouched; the argument checks. */
static void
check_xxh3_batch(void)
{
	static struct ol_exans_gpu_sum tab[270];
	static uint8_t sums[5 * 270 + 1];
	uint8_t tw[8];
	uint32_t k = 0;
	memset(sums, 0x5a, sizeof(sums));
	for (uint64_t len = 0; len <= 260; len++, k++)
		tab[k] = (struct ol_exans_gpu_sum){(uintptr_t)(src + len % 5), len,
						   (uintptr_t)(sums + 5 * k + 1)};
	for (uint64_t len = 1023; len < 1023 + 9 * 4099; len += 4099, k++)
		tab[k] = (struct ol_exans_gpu_sum){(uintptr_t)(src + 3), len,
						   (uintptr_t)(sums + 5 * k + 1)};
	int same = ol_exans_gpu_xxh3_batch(tab, k, work, NULL) == 0;
	for (uint32_t i = 0; i < k; i++) {
		const uint8_t *at = sums + 5 * i + 1;
		uint32_t want =
		    (uint32_t)XXH3_64bits((const void *)(uintptr_t)tab[i].src, (size_t)tab[i].n);
		same &= ol_exans_ld32(at) == want && at[-1] == 0x5a;
	}
	ok(same && k == 270, "xxh3 batch: %u values, each libxxhash's sum", k);
	ok(ol_exans_gpu_xxh3_work_bytes(k) == 24 * (uint64_t)k, "xxh3 batch: work bytes");
	ok(ol_exans_gpu_xxh3_batch(NULL, 0, NULL, NULL) == 0, "xxh3 batch: empty");
	tab[0] = (struct ol_exans_gpu_sum){(uintptr_t)src, 10, 0};
	ok(ol_exans_gpu_xxh3_batch(tab, 1, work, NULL) == -EINVAL &&
	       ol_exans_gpu_xxh3_batch(tab, 1, NULL, NULL) == -EINVAL &&
	       ol_exans_gpu_xxh3_batch(tab, OL_EXANS_GPU_MAX_SUMS + 1, tw, NULL) == -E2BIG,
	   "xxh3 batch: bad arguments");
}

int
main(void)
{
	ok(ol_exans_gpu_is_cuda() == 0, "the CPU twin");
	check("empty", 0);
	memcpy(src, "OLZ1", 4);
	check("short with the magic", 10);
	fill_kv(src, sizeof(src), 1);
	check("KV, 5 blocks and a part", sizeof(src));
	check("KV, one block", 65536);
	check("KV, 100 bytes", 100);
	tap_fill(src, sizeof(src), 2);
	check("random", 200000);
	memcpy(src, "OLZ1", 4);
	check("random with the magic", 70000);

	check_xxh3();
	check_xxh3_batch();
	fill_kv(src, sizeof(src), 3);
	check_encode_batch();
	check_decode_batch();
	fill_kv(src, sizeof(src), 3);
	int64_t n = ol_exans_gpu_encode(src, sizeof(src), out, sizeof(out), work, NULL);
	ok(n > 0 && (size_t)n < sizeof(src) && memcmp(out, "OLZ1\1", 5) == 0, "compressed");
	size_t pos[] = {17, 16 + 9, 16 + 20, 16 + 24 + 2, (size_t)n / 2, (size_t)n - 3};
	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
		memcpy(ref, out, (size_t)n);
		ref[pos[i]] ^= 0x20;
		int64_t d =
		    ol_exans_gpu_decode(ref, ref, (uint64_t)n, dec, sizeof(src), work, NULL);
		ok(d == -EBADMSG, "a flipped bit at %zu: %lld", pos[i], (long long)d);
	}
	ok(ol_exans_gpu_decode(out, out, (uint64_t)n, dec, sizeof(src) - 1, work, NULL) == -ENOSPC,
	   "decode into too small a buffer");
	ok(ol_exans_gpu_decode(out, out, (uint64_t)n - 1, dec, sizeof(src), work, NULL) == -EBADMSG,
	   "a truncated value");
	ok(ol_exans_gpu_encode(src, sizeof(src), out, 1000, work, NULL) == -ENOSPC,
	   "encode into too small a buffer");
	ok(ol_exans_gpu_encode(NULL, 10, out, sizeof(out), work, NULL) == -EINVAL, "NULL source");
	ok(ol_exans_gpu_encode(src, (uint64_t)OL_EXANS_GPU_MAX_BLOCKS * 65536 + 1, out, 1, work,
			       NULL) == -E2BIG,
	   "too many blocks");
	tap_done();
}
