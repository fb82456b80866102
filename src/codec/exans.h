/* codec/exans.h - ExANS: lossless codec for BF16 tensors (KV-cache blocks).
 *
 * Each BF16 value is split into its 8-bit exponent, entropy-coded with 32-lane interleaved
 * rANS under a per-block frequency table, and its sign+mantissa byte, stored as is. Input is
 * cut into fixed-size independent blocks (64 KiB default), each with a CRC-32C of its decoded
 * bytes; a block that would not shrink is stored raw. Format: docs/exans-format.md.
 *
 * All functions are pure (no global state except the CPU-feature probe and constant tables
 * set up at load time), never allocate (except the encoder in the opt-in rows mode, which
 * may return -ENOMEM), and may be called from any thread. Input may be any length;
 * an odd trailing byte is stored raw. Decoders validate everything: hostile input returns
 * -EBADMSG and never causes a read or write outside [src, src+n) and [dst, dst+cap). On an
 * error, the contents of dst are unspecified. */
#ifndef OL_CODEC_EXANS_H
#define OL_CODEC_EXANS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Which code runs. AUTO picks the best the CPU supports (AVX-512 > AVX2 > scalar); an
 * unsupported choice falls back to scalar. All encoders write identical bytes and all
 * decoders accept the same inputs (tested). */
enum ol_exans_impl {
	OL_EXANS_AUTO = 0,
	OL_EXANS_SCALAR = 1,
	OL_EXANS_AVX2 = 2,
	OL_EXANS_AVX512 = 3,
};

struct ol_exans_opts {
	uint32_t block_bytes;	 /* power of two in [1 KiB, 16 MiB]; 0 = 64 KiB */
	enum ol_exans_impl impl; /* which code runs (encode and decode); output is the same */
	/* Rows mode (opt-in, 0 = off): row size in bytes (even, >= 4; e.g. heads * head_dim * 2
	 * for a token-major KV page). A block whose rows repeat exactly is stored with 2-byte
	 * references when that is smaller. CPU only so far: the CUDA decoder reads it, the CUDA
	 * encoder never writes it. */
	uint32_t row_bytes;
};

/* 1 if impl can run on this CPU (AUTO and SCALAR always), else 0. */
int ol_exans_impl_supported(enum ol_exans_impl impl);
/* "scalar", "avx2", "avx512" (AUTO resolves to the one it picks). */
const char *ol_exans_impl_name(enum ol_exans_impl impl);

/* Largest possible compressed size of n bytes with the given block size (0 = default). */
size_t ol_exans_bound(size_t n, uint32_t block_bytes);

/* Compress n bytes into dst. o may be NULL (defaults). Returns the compressed size, -EINVAL
 * for a bad block size, -ENOSPC if cap is too small (cap >= ol_exans_bound() never fails,
 * except -ENOMEM in rows mode). */
ssize_t ol_exans_compress(const void *src, size_t n, void *dst, size_t cap,
			  const struct ol_exans_opts *o);

/* Decompress a whole container. Returns the decoded size, -EBADMSG if the input is corrupt
 * or truncated or has trailing bytes (including a CRC mismatch), -ENOSPC if cap is smaller
 * than the decoded size. */
ssize_t ol_exans_decompress(const void *src, size_t n, void *dst, size_t cap);
ssize_t ol_exans_decompress_opts(const void *src, size_t n, void *dst, size_t cap,
				 const struct ol_exans_opts *o);

/* Decoded size from the container header (validates the header and index). 0 or -EBADMSG. */
int ol_exans_decoded_size(const void *src, size_t n, uint64_t *out);

/* Random access: block count, and where block i lies inside the container, with the
 * decoded offset/length it covers. 0 or -EBADMSG / -ERANGE (i out of range). */
struct ol_exans_block_ref {
	size_t off;	  /* byte offset of the encoded block in the container */
	size_t len;	  /* encoded length */
	uint64_t dec_off; /* decoded offset */
	size_t dec_len;	  /* decoded length */
};
int ol_exans_block_count(const void *src, size_t n, uint32_t *out);
int ol_exans_block_locate(const void *src, size_t n, uint32_t i, struct ol_exans_block_ref *r);

/* One block alone (the unit the GPU codes). n <= 16 MiB. Bound: n + OL_EXANS_BHDR_BYTES. */
size_t ol_exans_block_bound(size_t n);
/* Encode n bytes as one block (AUTO impl). Returns the encoded size or -ENOSPC / -EINVAL.
 * With cap >= ol_exans_block_bound(n) the bytes are the canonical ones every encoder
 * (CPU or GPU) writes; a smaller cap may turn a block raw that would have fit. */
ssize_t ol_exans_block_encode(const void *src, size_t n, void *dst, size_t cap);
/* Decode one block of exactly n encoded bytes. Returns the decoded size, -EBADMSG or -ENOSPC. */
ssize_t ol_exans_block_decode(const void *src, size_t n, void *dst, size_t cap,
			      enum ol_exans_impl impl);

/* Statistics of one block's exponent stream, for tools: Shannon entropy in bits per value of
 * the exponents of src[0..n), and the byte bound "exponents at entropy + the rest raw". */
double ol_exans_exp_entropy(const void *src, size_t n, double *bound_bytes);

#endif
