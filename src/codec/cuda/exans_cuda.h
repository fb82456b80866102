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

#ifdef __cplusplus
}
#endif

#endif
