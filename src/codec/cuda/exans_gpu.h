/* codec/cuda/exans_gpu.h - whole values on the GPU: the host API the vLLM connector loads with
 * ctypes (libol_exans_gpu.so, built when nvcc and cudart are found), and its CPU twin
 * (libol_exans_twin.so, always built) where "device" pointers are host memory and the
 * kernels' block coders are the CPU's. Both write and read exactly the values libopenlake
 * stores with opts.compress = 1 (client/compress.h): a 16-byte "OLZ1" header and an ExANS
 * container of 64 KiB blocks, or the plain value when that does not shrink it (a plain value
 * starting with the magic raw-wrapped). So a block saved on a GPU loads on a CPU node and
 * back.
 *
 * Pointers named d_* are device memory (twin: host memory); h_* host memory. `stream` is a
 * cudaStream_t (NULL: the default stream; the twin ignores it). Calls return with their work
 * queued on the stream: later work on that stream sees their results, and the host must
 * synchronise the stream (or an event recorded after the call) before it reads d_out /
 * d_dst itself. Encode and decode synchronise the stream once inside, where the host needs a
 * result (the encoded lengths; the blocks' statuses); their _start / _finish halves leave
 * that one wait to the caller, once for a whole batch; nothing else waits. No allocation:
 * d_work is the caller's, of ol_exans_gpu_work_bytes(n) bytes, 16-byte aligned, reusable by
 * the next call on the same stream at once (the stream orders them). Any thread; calls on
 * one d_work from different streams must not overlap. Errors: -EINVAL (bad argument), -E2BIG
 * (more than OL_EXANS_GPU_MAX_BLOCKS blocks), -ENOSPC (cap too small), -EBADMSG (corrupt
 * value), -EIO (a CUDA call failed, e.g. no GPU). */
#ifndef OL_CODEC_EXANS_GPU_H
#define OL_CODEC_EXANS_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OL_EXANS_GPU_BLOCK	(64u << 10) /* libopenlake's container block size */
#define OL_EXANS_GPU_MAX_BLOCKS 4096	    /* values up to 256 MiB */

/* Work memory for a value of n plain bytes, and the largest stored form of one. */
uint64_t ol_exans_gpu_work_bytes(uint64_t n);
uint64_t ol_exans_gpu_bound(uint64_t n);

/* The stored form of the n plain bytes at d_src, written to d_out[0..cap). Returns its
 * length (> 0; n for a value stored plain, 0 for n = 0) or -errno. */
int64_t ol_exans_gpu_encode(const void *d_src, uint64_t n, void *d_out, uint64_t cap, void *d_work,
			    void *stream);

/* The same encode in two halves, so that a batch of values waits once for all their
 * encoded lengths: _start queues the value's block encode into d_work and the copies of
 * what the host needs (its first bytes and the blocks' lengths) into h_state (host memory
 * of ol_exans_gpu_state_bytes(n) bytes, 4-byte aligned; pinned, or the copies synchronise),
 * and waits for nothing. Once the stream is synchronised (one wait after the _start of every
 * value of a batch), _finish with the same d_src, n, d_work and h_state queues the stored
 * form into d_out[0..cap) and returns its length (as ol_exans_gpu_encode). Each value of a
 * batch has its own d_work and h_state until its _finish; one d_out may serve them in turn
 * (the stream orders a copy of one value's stored form before the next _finish). */
uint64_t ol_exans_gpu_state_bytes(uint64_t n);
int ol_exans_gpu_encode_start(const void *d_src, uint64_t n, void *d_work, void *h_state,
			      void *stream);
int64_t ol_exans_gpu_encode_finish(const void *d_src, uint64_t n, void *d_out, uint64_t cap,
				   void *d_work, const void *h_state, void *stream);

/* Decode a stored value of len bytes, present both on the host (h_val: parsed there) and on
 * the device (d_val: the blocks are read there), into d_dst[0..cap). Returns the plain length
 * or -errno (-EBADMSG: a bad header, index or block CRC). */
int64_t ol_exans_gpu_decode(const void *h_val, const void *d_val, uint64_t len, void *d_dst,
			    uint64_t cap, void *d_work, void *stream);

/* The same decode in two halves, so that a batch of values waits once for all their blocks'
 * statuses: _start queues the copy or the blocks' decode into d_dst and the copy of their
 * statuses into h_state (host memory of ol_exans_gpu_state_bytes(cap) bytes, 4-byte
 * aligned; pinned, or the copy synchronises) and returns the plain length or -errno (a bad
 * header or index: -EBADMSG now); nothing waits. Values of a batch may share d_work and
 * d_val's buffer (the stream orders the next value's copies after this one's decode), each
 * has its own h_state. Once the stream is synchronised, _finish(h_state) returns 0, or
 * -EBADMSG when a block failed its CRC or length (d_dst then holds garbage). */
int64_t ol_exans_gpu_decode_start(const void *h_val, const void *d_val, uint64_t len, void *d_dst,
				  uint64_t cap, void *d_work, void *h_state, void *stream);
int ol_exans_gpu_decode_finish(const void *h_state);

/* The checksum libopenlake and the connector put in a value's trailer: the low 32 bits of
 * XXH3-64 (seed 0) of the n bytes at d_src, stored little-endian at d_out (device memory,
 * any alignment: e.g. the checksum field of a trailer packed behind the bytes on the
 * device). Queued on the stream (n <= 240, XXH3's short formulas: hashed on the host through
 * a copy, which synchronises). Returns 0 or -errno. */
int ol_exans_gpu_xxh3(const void *d_src, uint64_t n, void *d_out, void *stream);

/* The same checksum for a batch of values in one launch (one warp per value) and nothing
 * else: no synchronisation, no host hashing (short values, n <= 240 included, are hashed on
 * the device). h_tab[i] (host memory, read before the call returns) names value i by device
 * addresses; d_work (ol_exans_gpu_xxh3_work_bytes(count) bytes, 8-byte aligned, reusable by
 * the next call on the same stream at once) receives the table for the kernel. count may be
 * 0 (nothing queued). Returns 0 or -EINVAL / -E2BIG (count > OL_EXANS_GPU_MAX_SUMS) / -EIO;
 * the sums are at their out addresses once the stream is synchronised. */
#define OL_EXANS_GPU_MAX_SUMS 65536
struct ol_exans_gpu_sum {
	uint64_t src; /* device address of the value's n bytes */
	uint64_t n;
	uint64_t out; /* device address of its sum's 4 bytes (any alignment) */
};
uint64_t ol_exans_gpu_xxh3_work_bytes(uint32_t count);
int ol_exans_gpu_xxh3_batch(const struct ol_exans_gpu_sum *h_tab, uint32_t count, void *d_work,
			    void *stream);

/* 1 for the CUDA library, 0 for the CPU twin. */
int ol_exans_gpu_is_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
