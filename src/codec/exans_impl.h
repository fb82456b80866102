/* codec/exans_impl.h - internal: the per-ISA decode kernels behind exans.c. */
#ifndef OL_CODEC_EXANS_IMPL_H
#define OL_CODEC_EXANS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec/exans.h"
#include "codec/exans_fmt.h"

/* Decoder state of one block. tbl[slot] = r | freq << 8 | (slot - cum) << 20, with r the
 * symbol rotated right by one bit (ol_exans_rot), so that the BF16 bytes are a bit select:
 * low = sm&0x7f | r&0x80, high = sm&0x80 | r&0x7f (ol_exans_join_rot). Words are read from
 * wp forward; wend bounds them. */
struct ol_exans_dec {
	uint32_t x[OL_EXANS_LANES];
	const uint8_t *wp;
	const uint8_t *wend;
	const uint32_t *tbl;
};

/* Decode ngroups full groups of 32 values: BF16 value i (i < 32 * ngroups) goes to
 * out[2i..2i+1], joined from its decoded exponent and sm[i]. 0 or -EBADMSG (stream overrun).
 * Every implementation consumes exactly the same words and yields the same states. */
int ol_exans_dec_groups_scalar(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm,
			       size_t ngroups);
int ol_exans_dec_groups_avx2(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm,
			     size_t ngroups);
int ol_exans_dec_groups_avx512(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm,
			       size_t ngroups);
/* The same on two independent blocks at once (interleaved for latency). */
int ol_exans_dec_groups2_avx2(struct ol_exans_dec *d0, struct ol_exans_dec *d1, uint8_t *o0,
			      uint8_t *o1, const uint8_t *sm0, const uint8_t *sm1, size_t ngroups);
int ol_exans_dec_groups2_avx512(struct ol_exans_dec *d0, struct ol_exans_dec *d1, uint8_t *o0,
				uint8_t *o1, const uint8_t *sm0, const uint8_t *sm1,
				size_t ngroups);
/* Lanes 0..nl-1 of one group, bounds-checked word by word (stream tails, partial groups). */
int ol_exans_dec_lanes(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, unsigned nl);

/* Encoder state of one block for the SIMD encoders: a[s] = f | bias << 12 | shift << 25,
 * b[s] = rcp (the reciprocal form of exans.c's struct esym); symbols lie in [lo, lo + 32)
 * when narrow. Words are pushed down from wp, never below floor. */
struct ol_exans_enc {
	uint32_t x[OL_EXANS_LANES];
	uint8_t *wp;
	const uint8_t *floor;
	int lo;
	int narrow;
	uint32_t a[256 + 32];
	uint32_t b[256 + 32];
};

/* Encode full groups ngroups-1 .. 0 (values 32g..32g+31 of src, sm bytes into sm).
 * 0, or -ENOSPC when fewer than 64 bytes are left above floor before a group. */
int ol_exans_enc_groups_avx512(struct ol_exans_enc *e, const uint8_t *src, uint8_t *sm,
			       size_t ngroups);
int ol_exans_enc_groups_avx2(struct ol_exans_enc *e, const uint8_t *src, uint8_t *sm,
			     size_t ngroups);

/* Block encode with a given impl (canonical bytes when cap >= n + 12). */
ssize_t ol_exans_block_encode_impl(const void *src, size_t n, void *dst, size_t cap,
				   enum ol_exans_impl impl);
/* Rows mode (exans_rows.c). Encode: writes bytes [12, size) of a rows block into dst if it
 * is smaller than best and fits cap; returns its size, 0 if not, or -ENOMEM. Decode: the
 * block of n bytes into dst[0..dlen); 0 or -EBADMSG (the caller checks the CRC). */
ssize_t ol_exans_rows_encode(const uint8_t *src, size_t n, uint32_t R, uint8_t *dst, size_t cap,
			     size_t best, enum ol_exans_impl impl);
int ol_exans_rows_decode(const uint8_t *p, size_t n, uint8_t *dst, size_t dlen,
			 enum ol_exans_impl impl);

static inline uint8_t
ol_exans_rot(uint8_t sym)
{
	return (uint8_t)(sym >> 1 | sym << 7);
}

/* The two bytes of a BF16 value from the rotated exponent r and the sign+mantissa byte sm. */
static inline void
ol_exans_join_rot(uint8_t *out, uint8_t r, uint8_t sm)
{
	uint8_t t = (r ^ sm) & 0x7f;
	out[0] = r ^ t;
	out[1] = sm ^ t;
}

static inline uint16_t
ol_exans_ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v; /* little-endian hosts only (x86-64, aarch64) */
}

#endif
