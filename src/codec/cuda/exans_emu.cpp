/* codec/cuda/exans_emu.cpp - runs the CUDA kernels of exans.cu on the CPU, one thread per
 * warp lane, with the warp collectives (__syncwarp, __ballot_sync, __shfl_sync, __any_sync)
 * emulated by a barrier. This checks the kernels' logic (GPU bytes == CPU bytes, decode,
 * corruption) on machines without a GPU; timing needs the real GPU (bench/gpu_check.sh).
 * TAP output. argv[1]: the kv-bf16 data dir (optional). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>
#include <vector>

#define OL_EXANS_CUDA_EMU 1
#define __global__
#define __device__
#define __shared__ static

struct emu_dim {
	unsigned x;
};
static thread_local emu_dim threadIdx, blockIdx;
static const emu_dim blockDim = {32}; /* every kernel runs as one warp here */
static pthread_barrier_t emu_bar;
static uint32_t emu_slot[32];

static inline uint32_t
min(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static inline uint64_t
min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void
__syncwarp(unsigned = 0xffffffffu)
{
	pthread_barrier_wait(&emu_bar);
}

static void
__syncthreads(void)
{
	pthread_barrier_wait(&emu_bar);
}

static uint32_t
__ballot_sync(uint32_t, int pred)
{
	emu_slot[threadIdx.x] = pred ? 1 : 0;
	__syncwarp();
	uint32_t m = 0;
	for (unsigned k = 0; k < 32; k++)
		m |= emu_slot[k] << k;
	__syncwarp();
	return m;
}

static uint32_t
__shfl_sync(uint32_t, uint32_t v, int src)
{
	emu_slot[threadIdx.x] = v;
	__syncwarp();
	uint32_t r = emu_slot[src];
	__syncwarp();
	return r;
}

static int
__any_sync(uint32_t, int pred)
{
	return __ballot_sync(0xffffffffu, pred) != 0;
}

static int
__popc(uint32_t v)
{
	return __builtin_popcount(v);
}

static uint32_t
atomicAdd(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

#include "codec/cuda/exans.cu"
#include "codec/cuda/chunk.cu"

extern "C" {
#include "codec/exans.h"
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
}

template <typename F>
static void
run_warp(unsigned block, F body)
{
	std::vector<std::thread> th;
	for (unsigned l = 0; l < 32; l++)
		th.emplace_back([=] {
			threadIdx.x = l;
			blockIdx.x = block;
			body();
		});
	for (auto &t : th)
		t.join();
}

static int tap_n, tap_bad;

static void
ok(int c, const char *what, const char *name)
{
	printf("%s %d - %s (%s)\n", c ? "ok" : "not ok", ++tap_n, what, name);
	tap_bad += !c;
}

/* Encode n bytes in blocks of blk on the emulated GPU and on the CPU; compare; decode the
 * CPU blocks on the emulated GPU; corrupt each block once and expect -EBADMSG. */
static void
check(const char *name, const uint8_t *in, size_t n, uint32_t blk)
{
	uint32_t nb = (uint32_t)((n + blk - 1) / blk), slot = blk + OL_EXANS_BHDR_BYTES;
	std::vector<uint8_t> g((size_t)nb * slot), c((size_t)nb * slot), out((size_t)nb * blk);
	std::vector<uint32_t> glen(nb), clen(nb);
	std::vector<uint64_t> off(nb);
	std::vector<int32_t> st(nb);
	int same = 1, dec = 1, bad = 1, rans = 0;
	for (uint32_t b = 0; b < nb; b++) {
		size_t len = n - (size_t)b * blk < blk ? n - (size_t)b * blk : blk;
		clen[b] = (uint32_t)ol_exans_block_encode(in + (size_t)b * blk, len,
							  c.data() + (size_t)b * slot, slot);
		run_warp(b, [&] { enc_kernel(in, n, blk, g.data(), glen.data()); });
		same &= glen[b] == clen[b] &&
			memcmp(g.data() + (size_t)b * slot, c.data() + (size_t)b * slot, clen[b]) == 0;
		rans += c[(size_t)b * slot + 8] == OL_EXANS_MODE_RANS;
		off[b] = (uint64_t)b * slot;
	}
	for (uint32_t b = 0; b < nb; b++) {
		run_warp(b, [&] {
			dec_kernel(c.data(), off.data(), clen.data(), nb, out.data(), blk, st.data());
		});
		size_t len = n - (size_t)b * blk < blk ? n - (size_t)b * blk : blk;
		dec &= st[b] == (int32_t)len &&
		       memcmp(out.data() + (size_t)b * blk, in + (size_t)b * blk, len) == 0;
		uint8_t *p = c.data() + (size_t)b * slot + (b * 7919u + 13) % clen[b];
		*p ^= 0x04;
		run_warp(b, [&] {
			dec_kernel(c.data(), off.data(), clen.data(), nb, out.data(), blk, st.data());
		});
		bad &= st[b] == -EBADMSG;
		*p ^= 0x04;
	}
	printf("# %s: %u blocks, %d rANS\n", name, nb, rans);
	ok(same, "GPU kernel encode == CPU encode, every block", name);
	ok(dec, "GPU kernel decode of CPU blocks == input", name);
	ok(bad, "GPU kernel decode of a corrupted block == -EBADMSG", name);
}

/* The gather kernel puts every encoded block end to end behind a header of base bytes. */
static void
check_gather(const uint8_t *in, size_t n, uint32_t blk)
{
	uint32_t nb = (uint32_t)((n + blk - 1) / blk), slot = blk + OL_EXANS_BHDR_BYTES;
	std::vector<uint8_t> c((size_t)nb * slot), want(100), got(100 + (size_t)nb * slot, 0xa5);
	std::vector<uint32_t> len(nb);
	for (uint32_t b = 0; b < nb; b++) {
		size_t l = n - (size_t)b * blk < blk ? n - (size_t)b * blk : blk;
		len[b] = (uint32_t)ol_exans_block_encode(in + (size_t)b * blk, l,
							 c.data() + (size_t)b * slot, slot);
		want.insert(want.end(), c.begin() + (size_t)b * slot,
			    c.begin() + (size_t)b * slot + len[b]);
	}
	memset(want.data(), 0xa5, 100);
	for (uint32_t b = 0; b < nb; b++)
		run_warp(b, [&] { gather_kernel(c.data(), len.data(), blk, got.data(), 100); });
	ok(memcmp(got.data(), want.data(), want.size()) == 0 && got[want.size()] == 0xa5,
	   "gather kernel: blocks end to end behind the header, nothing past them", "gather");
}

/* The XXH3 kernel against libxxhash: lengths around every boundary of the long path (a
 * stripe, a 1 KiB block, the last stripe overlapping), at an odd address too. */
static void
check_xxh3(const uint8_t *in, size_t n)
{
	static const size_t lens[] = {241, 255, 256, 257, 1023, 1024, 1025, 1087, 1088, 2048,
				      4096 + 63, 65536, 200001};
	struct ol_exans_cuda_secret sec;
	XXH3_generateSecret_fromSeed(sec.b, 0);
	int same = 1, cases = 0;
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		for (size_t at = 0; at < 2 && lens[k] + at <= n; at++) {
			uint8_t out[5] = {0, 0, 0, 0, 0x5a};
			run_warp(0, [&] { xxh3_kernel(in + at, lens[k], sec, out); });
			uint32_t want = (uint32_t)XXH3_64bits(in + at, lens[k]);
			same &= ol_exans_ld32(out) == want && out[4] == 0x5a;
			cases++;
		}
	printf("# xxh3: %d lengths and offsets\n", cases);
	ok(same && cases > 20, "XXH3 kernel == libxxhash's XXH3_64bits, low 32 bits", "xxh3");
}

/* The batched XXH3 kernel against libxxhash: every length 0..300 (XXH3's short formulas on
 * one lane, their boundaries at 3, 8, 16, 128, 240, then the long path) and a few long ones,
 * at odd addresses, each value run as its CUDA block of the one launch. */
static void
check_xxh3_batch(const uint8_t *in, size_t n)
{
	std::vector<ol_exans_cuda_sum> tab;
	std::vector<uint8_t> out(4 * 400 + 1, 0x5a);
	static const size_t longer[] = {1024, 1025, 65536 + 7, 100003};
	for (size_t len = 0; len <= 300; len++)
		tab.push_back({in + len % 7, len, nullptr});
	for (size_t len : longer)
		tab.push_back({in + 3, len, nullptr});
	for (size_t i = 0; i < tab.size(); i++)
		tab[i].out = out.data() + 4 * i + 1; /* unaligned */
	struct ol_exans_cuda_secret sec;
	XXH3_generateSecret_fromSeed(sec.b, 0);
	for (unsigned b = 0; b < tab.size(); b++)
		run_warp(b, [&] { xxh3_batch_kernel(tab.data(), (uint32_t)tab.size(), sec); });
	int same = out[0] == 0x5a && tab.back().src + tab.back().n <= in + n; /* out[0]: a guard */
	for (size_t i = 0; i < tab.size(); i++)
		same &= ol_exans_ld32(tab[i].out) == (uint32_t)XXH3_64bits(tab[i].src, tab[i].n);
	printf("# xxh3 batch: %zu values in one launch\n", tab.size());
	ok(same, "batched XXH3 kernel == libxxhash per value, lengths 0..300 and long", "xxh3");
}

/* Rows blocks (mode 2) are written by the CPU only; the GPU decoder must read them. */
static void
check_rows(const uint8_t *in, size_t n, uint32_t row)
{
	struct ol_exans_opts o = {0, OL_EXANS_AUTO, row};
	std::vector<uint8_t> c(ol_exans_bound(n, 0)), out(n + 65536);
	ssize_t m = ol_exans_compress(in, n, c.data(), c.size(), &o);
	uint32_t nb = 0;
	int dec = m > 0 && ol_exans_block_count(c.data(), (size_t)m, &nb) == 0, rows = 0, bad = 1;
	std::vector<uint64_t> off(nb);
	std::vector<uint32_t> len(nb);
	std::vector<int32_t> st(nb);
	for (uint32_t b = 0; dec && b < nb; b++) {
		struct ol_exans_block_ref r;
		dec &= ol_exans_block_locate(c.data(), (size_t)m, b, &r) == 0;
		off[b] = r.off;
		len[b] = (uint32_t)r.len;
		rows += c[r.off + 8] == OL_EXANS_MODE_ROWS;
	}
	for (uint32_t b = 0; dec && b < nb; b++) {
		run_warp(b, [&] {
			dec_kernel(c.data(), off.data(), len.data(), nb, out.data(), 65536, st.data());
		});
		size_t want = n - (size_t)b * 65536 < 65536 ? n - (size_t)b * 65536 : 65536;
		dec &= st[b] == (int32_t)want &&
		       memcmp(out.data() + (size_t)b * 65536, in + (size_t)b * 65536, want) == 0;
		uint8_t *p = c.data() + off[b] + (b * 7919u + 29) % len[b];
		*p ^= 0x10;
		run_warp(b, [&] {
			dec_kernel(c.data(), off.data(), len.data(), nb, out.data(), 65536, st.data());
		});
		bad &= st[b] == -EBADMSG;
		*p ^= 0x10;
	}
	printf("# rows mode: %u blocks, %d rows blocks\n", nb, rows);
	ok(dec && rows > 0, "GPU kernel decode of CPU rows blocks == input", "rows");
	ok(bad, "GPU kernel decode of a corrupted rows block == -EBADMSG", "rows");
}

static uint64_t rng = 0x1234567887654321ull;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void
synth(uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2) {
		int e = 127;
		while (rnd() % 3 == 0)
			e += rnd() & 1 ? 1 : -1;
		uint32_t v = (rnd() & 0x807f) | (uint32_t)(e & 0xff) << 7;
		p[i] = (uint8_t)v;
		p[i + 1] = (uint8_t)(v >> 8);
	}
	if (n & 1)
		p[n - 1] = (uint8_t)rnd();
}

int
main(int argc, char **argv)
{
	pthread_barrier_init(&emu_bar, NULL, 32);
	std::vector<uint8_t> buf(300000);
	synth(buf.data(), 200001);
	check("synthetic BF16, 64 KiB blocks, odd tail", buf.data(), 200001, 65536);
	check("synthetic BF16, 1 KiB blocks", buf.data(), 5000, 1024);
	for (size_t i = 0; i < 70000; i++)
		buf[i] = (uint8_t)rnd();
	check("random bytes (raw blocks)", buf.data(), 70000, 65536);
	for (size_t i = 0; i < 4096; i += 2) { /* every exponent, one constant run */
		buf[i] = (uint8_t)rnd();
		buf[i + 1] = i < 1024 ? (uint8_t)(i / 4) : 0x3f;
	}
	check("all exponents then a constant", buf.data(), 4096, 1024);
	check("tiny blocks (raw, n < 64)", buf.data(), 63, 1024);
	synth(buf.data(), 200001);
	check_gather(buf.data(), 200001, 65536);
	check_gather(buf.data(), 5000, 1024);
	check_xxh3(buf.data(), 200002);
	check_xxh3_batch(buf.data(), 200002);
	synth(buf.data(), 140001); /* rows of 64 bytes, most repeating an earlier one */
	for (size_t r = 1; r < 140001 / 64; r++)
		if (rnd() % 4)
			memcpy(buf.data() + r * 64, buf.data() + (rnd() % r) * 64, 64);
	check_rows(buf.data(), 140001, 64);
	char path[4096];
	snprintf(path, sizeof(path), "%s/stories260K/seq05.v.bf16", argc > 1 ? argv[1] : ".");
	FILE *f = fopen(path, "rb");
	if (f) {
		size_t n = fread(buf.data(), 1, buf.size(), f);
		fclose(f);
		check("real KV dump seq05.v", buf.data(), n, 65536);
	} else {
		printf("ok %d # SKIP real KV dump absent (%s)\n", ++tap_n, path);
	}
	printf("1..%d\n", tap_n);
	return tap_bad ? 1 : 0;
}
