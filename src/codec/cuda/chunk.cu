/* codec/cuda/chunk.cu - the two kernels around ExANS that the connector's GPU codec needs:
 * the gather of a container's encoded blocks out of their slots (one launch per value instead
 * of one copy per block), and XXH3-64 of a chunk's plain bytes (the checksum libopenlake and
 * the connector put in a chunk's trailer), so a chunk saved on the GPU carries the same
 * checksum as one saved on a CPU: one value per launch, or a whole batch of values (one warp
 * each, any length) in one launch. exans_emu.cpp runs both on CPU threads as a test. */
#include <errno.h>

#ifndef OL_EXANS_CUDA_EMU
#include <cuda_runtime.h>
#endif

#include "codec/cuda/exans_cuda.h"
#include "codec/exans_fmt.h"

#define GATHER_THREADS 256

/* Block i of the grid moves encoded block i: its offset is base + the lengths before it,
 * summed by the whole CUDA block (a few thousand entries at most), then the bytes. */
__global__ static void
gather_kernel(const uint8_t *slots, const uint32_t *lens, uint32_t blk, uint8_t *out, uint64_t base)
{
	__shared__ uint64_t part[GATHER_THREADS];
	unsigned t = threadIdx.x, nt = blockDim.x, b = blockIdx.x;
	uint64_t s = 0;
	for (unsigned j = t; j < b; j += nt)
		s += lens[j];
	part[t] = s;
	__syncthreads();
	uint64_t off = base;
	for (unsigned j = 0; j < nt; j++)
		off += part[j];
	const uint8_t *src = slots + (uint64_t)b * (blk + OL_EXANS_BHDR_BYTES);
	uint8_t *dst = out + off;
	for (uint32_t i = t; i < lens[b]; i += nt)
		dst[i] = src[i];
}

/* XXH3-64 for inputs over 240 bytes with the default 192-byte secret: 16 stripes of 64 bytes
 * per 1 KiB block, the accumulators scrambled after each block, the last (partial) block's
 * stripes, the input's last 64 bytes, then the merge. The eight 64-bit accumulators are
 * threads 0-7 of the warp: lane l adds input word l ^ 1 and the product of the halves of
 * (input word l XOR secret word l), so no lane needs another's accumulator until the merge.
 * Written from the format's description (xxhash.h), checked against libxxhash. */
#define XXH_P32_1  0x9E3779B1u
#define XXH_P32_2  0x85EBCA77u
#define XXH_P32_3  0xC2B2AE3Du
#define XXH_P64_1  0x9E3779B185EBCA87ull
#define XXH_P64_2  0xC2B2AE3D27D4EB4Full
#define XXH_P64_3  0x165667B19E3779F9ull
#define XXH_P64_4  0x85EBCA77C2B2AE63ull
#define XXH_P64_5  0x27D4EB2F165667C5ull
#define XXH_STRIPE 64
#define XXH_BLOCK  1024 /* (192 - 64) / 8 = 16 stripes */

__device__ static uint64_t
ld64(const uint8_t *p)
{
	if (((uintptr_t)p & 7) == 0)
		return *(const uint64_t *)p;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

__device__ static uint64_t
xxh_stripe(uint64_t acc, const uint8_t *p, uint64_t key, unsigned lane)
{
	uint64_t v = ld64(p + 8 * lane), k = v ^ key;
	return acc + ld64(p + 8 * (lane ^ 1)) + (uint64_t)(uint32_t)k * (k >> 32);
}

__device__ static uint64_t
xxh_mul_fold(uint64_t a, uint64_t b)
{
#ifdef OL_EXANS_CUDA_EMU
	unsigned __int128 m = (unsigned __int128)a * b;
	return (uint64_t)m ^ (uint64_t)(m >> 64);
#else
	return a * b ^ __umul64hi(a, b);
#endif
}

__device__ static uint64_t
xxh_merge(const uint64_t *acc, const uint8_t *secret, uint64_t n)
{
	uint64_t h = n * XXH_P64_1;
	for (int i = 0; i < 4; i++)
		h += xxh_mul_fold(acc[2 * i] ^ ld64(secret + 11 + 16 * i),
				  acc[2 * i + 1] ^ ld64(secret + 11 + 16 * i + 8));
	h ^= h >> 37;
	h *= 0x165667919E3779F9ull;
	return h ^ h >> 32;
}

/* XXH3's formulas for n <= 240 (one lane: a few multiplies), seed 0. */
__device__ static uint64_t
xxh_avalanche(uint64_t h)
{
	h ^= h >> 37;
	h *= 0x165667919E3779F9ull;
	return h ^ h >> 32;
}

__device__ static uint64_t
xxh_mix16(const uint8_t *p, const uint8_t *s)
{
	return xxh_mul_fold(ld64(p) ^ ld64(s), ld64(p + 8) ^ ld64(s + 8));
}

__device__ static uint64_t
bswap64(uint64_t v)
{
	uint64_t r = 0;
	for (int i = 0; i < 8; i++, v >>= 8)
		r = r << 8 | (v & 0xff);
	return r;
}

__device__ static uint64_t
xxh_upto16(const uint8_t *p, uint64_t n, const uint8_t *s)
{
	uint64_t h;
	if (n > 8) {
		uint64_t lo = ld64(p) ^ (ld64(s + 24) ^ ld64(s + 32));
		uint64_t hi = ld64(p + n - 8) ^ (ld64(s + 40) ^ ld64(s + 48));
		return xxh_avalanche(n + bswap64(lo) + hi + xxh_mul_fold(lo, hi));
	}
	if (n >= 4) { /* rrmxmx */
		h = (ol_exans_ld32(p + n - 4) + ((uint64_t)ol_exans_ld32(p) << 32)) ^
		    (ld64(s + 8) ^ ld64(s + 16));
		h ^= (h << 49 | h >> 15) ^ (h << 24 | h >> 40);
		h *= 0x9FB21C651E98DF25ull;
		h ^= (h >> 35) + n;
		h *= 0x9FB21C651E98DF25ull;
		return h ^ h >> 28;
	}
	if (n)
		h = ((uint32_t)p[0] << 16 | (uint32_t)p[n >> 1] << 24 | (uint32_t)p[n - 1] |
		     (uint32_t)n << 8) ^
		    (uint64_t)(ol_exans_ld32(s) ^ ol_exans_ld32(s + 4));
	else
		h = ld64(s + 56) ^ ld64(s + 64);
	h ^= h >> 33; /* XXH64's avalanche */
	h *= XXH_P64_2;
	h ^= h >> 29;
	h *= XXH_P64_3;
	return h ^ h >> 32;
}

__device__ static uint64_t
xxh_short(const uint8_t *p, uint64_t n, const uint8_t *s)
{
	if (n <= 16)
		return xxh_upto16(p, n, s);
	uint64_t h = n * XXH_P64_1;
	if (n <= 128) {
		for (uint64_t i = 0; i < 4 && (i == 0 || n > 32 * i); i++) /* ends inwards */
			h += xxh_mix16(p + 16 * i, s + 32 * i) +
			     xxh_mix16(p + n - 16 * (i + 1), s + 32 * i + 16);
		return xxh_avalanche(h);
	}
	for (int i = 0; i < 8; i++)
		h += xxh_mix16(p + 16 * i, s + 16 * i);
	h = xxh_avalanche(h);
	for (uint64_t i = 8; i < n / 16; i++)
		h += xxh_mix16(p + 16 * i, s + 16 * (i - 8) + 3);
	h += xxh_mix16(p + n - 16, s + 136 - 17);
	return xxh_avalanche(h);
}

/* XXH3-64 of src[0..n) by one warp (every lane calls it), its low 32 bits to out by lane 0. */
__device__ static void
xxh3_warp(const uint8_t *src, uint64_t n, const uint8_t *secret, uint8_t *out)
{
	__shared__ uint64_t acc8[8];
	unsigned lane = threadIdx.x;
	if (n <= OL_EXANS_CUDA_XXH3_MIN) {
		if (lane == 0)
			ol_exans_st32(out, (uint32_t)xxh_short(src, n, secret));
		return;
	}
	if (lane < 8) {
		const uint64_t init[8] = {XXH_P32_3, XXH_P64_1, XXH_P64_2, XXH_P64_3,
					  XXH_P64_4, XXH_P32_2, XXH_P64_5, XXH_P32_1};
		uint64_t key[16], acc = init[lane];
		for (int s = 0; s < 16; s++)
			key[s] = ld64(secret + 8 * s + 8 * lane);
		uint64_t scr = ld64(secret + 192 - 64 + 8 * lane);
		uint64_t nb = (n - 1) / XXH_BLOCK;
		for (uint64_t b = 0; b < nb; b++) {
			const uint8_t *p = src + b * XXH_BLOCK;
#ifndef OL_EXANS_CUDA_EMU
#pragma unroll
#endif
			for (int s = 0; s < 16; s++)
				acc = xxh_stripe(acc, p + s * XXH_STRIPE, key[s], lane);
			acc ^= acc >> 47;
			acc ^= scr;
			acc *= XXH_P32_1;
		}
		uint64_t ns = (n - 1 - nb * XXH_BLOCK) / XXH_STRIPE;
		for (uint64_t s = 0; s < ns; s++)
			acc = xxh_stripe(acc, src + nb * XXH_BLOCK + s * XXH_STRIPE, key[s], lane);
		acc = xxh_stripe(acc, src + n - XXH_STRIPE, ld64(secret + 192 - 64 - 7 + 8 * lane),
				 lane);
		acc8[lane] = acc;
	}
	__syncwarp();
	if (lane == 0)
		ol_exans_st32(out, (uint32_t)xxh_merge(acc8, secret, n));
}

__global__ static void
xxh3_kernel(const uint8_t *src, uint64_t n, struct ol_exans_cuda_secret sec, uint8_t *out)
{
	xxh3_warp(src, n, sec.b, out);
}

/* One warp (one CUDA block) per value of the table: a batch of chunks in one launch. */
__global__ static void
xxh3_batch_kernel(const struct ol_exans_cuda_sum *tab, uint32_t count,
		  struct ol_exans_cuda_secret sec)
{
	if (blockIdx.x < count)
		xxh3_warp(tab[blockIdx.x].src, tab[blockIdx.x].n, sec.b, tab[blockIdx.x].out);
}

#ifndef OL_EXANS_CUDA_EMU
extern "C" int
ol_exans_cuda_gather(const uint8_t *d_slots, const uint32_t *d_len, uint32_t nblk,
		     uint32_t blk_bytes, uint8_t *d_out, uint64_t base, void *stream)
{
	if (nblk == 0)
		return 0;
	gather_kernel<<<nblk, GATHER_THREADS, 0, (cudaStream_t)stream>>>(d_slots, d_len, blk_bytes,
									 d_out, base);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}

extern "C" int
ol_exans_cuda_xxh3(const uint8_t *d_src, uint64_t n, const struct ol_exans_cuda_secret *secret,
		   uint8_t *d_out, void *stream)
{
	if (n <= OL_EXANS_CUDA_XXH3_MIN)
		return -EINVAL;
	xxh3_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(d_src, n, *secret, d_out);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}

extern "C" int
ol_exans_cuda_xxh3_batch(const struct ol_exans_cuda_sum *d_tab, uint32_t count,
			 const struct ol_exans_cuda_secret *secret, void *stream)
{
	if (count == 0)
		return 0;
	xxh3_batch_kernel<<<count, 32, 0, (cudaStream_t)stream>>>(d_tab, count, *secret);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}
#endif
