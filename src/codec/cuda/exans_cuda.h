/* codec/cuda/exans_cuda.h - ExANS on the GPU: one CUDA block (one warp, its 32 threads being
 * the 32 rANS lanes) per ExANS block. Same format as the CPU, byte for byte
 * (docs/exans-format.md). All pointers named d_* are device memory; calls are asynchronous
 * on `stream` (a cudaStream_t, NULL = default stream). Return 0 or -EINVAL / -EIO (launch
 * failure). Per-block results are in d_status / d_len once the stream is synchronised. */
#ifndef OL_CODEC_EXANS_CUDA_H
#define OL_CODEC_EXANS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Decode nblk blocks: block i is d_len[i] bytes at d_src + d_off[i] and decodes to
 * d_dst + i * blk_bytes (blk_bytes: the container's block size; every block but the last of
 * a container decodes to exactly that). d_status[i] = decoded length, or -EBADMSG (74). */
int ol_exans_cuda_decode(const uint8_t *d_src, const uint64_t *d_off, const uint32_t *d_len,
			 uint32_t nblk, uint8_t *d_dst, uint32_t blk_bytes, int32_t *d_status,
			 void *stream);

/* Encode n bytes from d_src as ceil(n / blk_bytes) blocks. Block i is written to
 * d_out + i * (blk_bytes + 12) (its slot) and its encoded length to d_len[i]; the bytes are
 * those ol_exans_block_encode() produces on the CPU. */
int ol_exans_cuda_encode(const uint8_t *d_src, uint64_t n, uint32_t blk_bytes, uint8_t *d_out,
			 uint32_t *d_len, void *stream);

/* Move the nblk encoded blocks of ol_exans_cuda_encode (block i: d_len[i] bytes in its slot
 * at d_slots + i * (blk_bytes + 12)) end to end to d_out + base: block i lands at base + the
 * sum of d_len[0..i). One launch for a whole value. */
int ol_exans_cuda_gather(const uint8_t *d_slots, const uint32_t *d_len, uint32_t nblk,
			 uint32_t blk_bytes, uint8_t *d_out, uint64_t base, void *stream);

/* XXH3-64 with seed 0 of the n bytes at d_src, for n > OL_EXANS_CUDA_XXH3_MIN (shorter inputs
 * take other formulas: hash them on the host); its low 32 bits are stored little-endian at
 * d_out (device, any alignment). secret: XXH3's default secret, as
 * XXH3_generateSecret_fromSeed(secret, 0) writes it (passed by value to the kernel). One warp
 * per value (the algorithm is sequential over the input: 8 lanes of accumulators). */
#define OL_EXANS_CUDA_XXH3_MIN 240
struct ol_exans_cuda_secret {
	uint8_t b[192];
};
int ol_exans_cuda_xxh3(const uint8_t *d_src, uint64_t n, const struct ol_exans_cuda_secret *secret,
		       uint8_t *d_out, void *stream);

/* The same sum for count values in one launch (one warp per value, CUDA block i: value i):
 * value i is d_tab[i].n bytes at d_tab[i].src, any length (0 and the short formulas of
 * n <= 240 included, taken by one lane), its low 32 bits stored little-endian at
 * d_tab[i].out. d_tab (device memory, 8-byte aligned) is read by the kernel. */
struct ol_exans_cuda_sum {
	const uint8_t *src;
	uint64_t n;
	uint8_t *out;
};
int ol_exans_cuda_xxh3_batch(const struct ol_exans_cuda_sum *d_tab, uint32_t count,
			     const struct ol_exans_cuda_secret *secret, void *stream);

#ifdef __cplusplus
}
#endif

#endif
