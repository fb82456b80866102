/* codec/exans_fmt.h - ExANS format constants and the encoder decisions that every
 * implementation (C scalar/SIMD, CUDA) must make identically: frequency quantisation, table
 * serialisation, CRC-32C. Header-only and free of libc calls so nvcc can compile it for the
 * device (OL_EXANS_HD). The format itself is specified in docs/exans-format.md. */
#ifndef OL_CODEC_EXANS_FMT_H
#define OL_CODEC_EXANS_FMT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OL_EXANS_HD __host__ __device__
#else
#define OL_EXANS_HD
#endif

#define OL_EXANS_MAGIC	      0x4e415845u /* "EXAN" little-endian */
#define OL_EXANS_VERSION      1
#define OL_EXANS_HDR_BYTES    24 /* container header before the block index */
#define OL_EXANS_BHDR_BYTES   12 /* block header */
#define OL_EXANS_LANES	      32 /* interleaved rANS states per block */
#define OL_EXANS_PROB_BITS    12 /* frequencies sum to 1 << 12 */
#define OL_EXANS_PROB_SCALE   (1u << OL_EXANS_PROB_BITS)
#define OL_EXANS_RANS_L	      (1u << 15) /* state lower bound; states live in [L, 2^31) */
#define OL_EXANS_MODE_RAW     0
#define OL_EXANS_MODE_RANS    1
#define OL_EXANS_MODE_ROWS    2 /* repeated rows removed, the rest an inner raw/rANS block */
#define OL_EXANS_MIN_LOG2_BLK 10
#define OL_EXANS_MAX_LOG2_BLK 24
#define OL_EXANS_DEF_LOG2_BLK 16 /* 64 KiB of BF16 per block, chosen by measurement */
#define OL_EXANS_TABLE_MAX    (2 + 256 * 2)
#define OL_EXANS_CRC_POLY     0x82f63b78u /* CRC-32C (Castagnoli), reflected */

static inline OL_EXANS_HD uint32_t
ol_exans_ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline OL_EXANS_HD void
ol_exans_st32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Exponent and sign+mantissa byte of a BF16 value, and back. */
static inline OL_EXANS_HD uint8_t
ol_exans_exp(uint16_t v)
{
	return (uint8_t)(v >> 7);
}

static inline OL_EXANS_HD uint8_t
ol_exans_sm(uint16_t v)
{
	return (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
}

static inline OL_EXANS_HD uint16_t
ol_exans_join(uint8_t e, uint8_t sm)
{
	return (uint16_t)(((sm & 0x80u) << 8) | ((uint32_t)e << 7) | (sm & 0x7fu));
}

/* Lowest symbol with the largest frequency. */
static inline OL_EXANS_HD int
ol_exans_argmax(const uint32_t f[256])
{
	int best = 0;
	for (int s = 1; s < 256; s++)
		if (f[s] > f[best])
			best = s;
	return best;
}

/* Quantise counts (total n > 0) to frequencies summing to 4096, each <= 4095, every present
 * symbol >= 1. Deterministic; the format depends on it (docs/exans-format.md, "Table"). */
static inline OL_EXANS_HD void
ol_exans_quantise(const uint32_t cnt[256], uint64_t n, uint32_t f[256])
{
	uint32_t sum = 0;
	for (int s = 0; s < 256; s++) {
		f[s] = 0;
		if (cnt[s]) {
			uint64_t q = ((uint64_t)cnt[s] * OL_EXANS_PROB_SCALE + n / 2) / n;
			f[s] = q ? (uint32_t)q : 1;
		}
		sum += f[s];
	}
	while (sum > OL_EXANS_PROB_SCALE) {
		int s = ol_exans_argmax(f);
		uint32_t d = sum - OL_EXANS_PROB_SCALE;
		if (d > f[s] - 1)
			d = f[s] - 1;
		f[s] -= d;
		sum -= d;
	}
	if (sum < OL_EXANS_PROB_SCALE)
		f[ol_exans_argmax(f)] += OL_EXANS_PROB_SCALE - sum;
	int m = ol_exans_argmax(f);
	if (f[m] == OL_EXANS_PROB_SCALE) { /* one symbol: keep f < 4096 so states fit 31 bits */
		f[m] = OL_EXANS_PROB_SCALE - 1;
		f[(m + 1) & 255] = 1;
	}
}

/* Serialise: lo, hi, then for s = lo..hi one varint (f < 128: 1 byte; else 0x80|(f&127),
 * f>>7). Returns the byte count (<= OL_EXANS_TABLE_MAX). */
static inline OL_EXANS_HD size_t
ol_exans_table_write(const uint32_t f[256], uint8_t *out)
{
	int lo = 0, hi = 255;
	while (f[lo] == 0)
		lo++;
	while (f[hi] == 0)
		hi--;
	size_t k = 0;
	out[k++] = (uint8_t)lo;
	out[k++] = (uint8_t)hi;
	for (int s = lo; s <= hi; s++) {
		if (f[s] < 128) {
			out[k++] = (uint8_t)f[s];
		} else {
			out[k++] = (uint8_t)(0x80 | (f[s] & 0x7f));
			out[k++] = (uint8_t)(f[s] >> 7);
		}
	}
	return k;
}

/* Parse a table from at most len bytes. Returns bytes used, or 0 if it is malformed
 * (truncated, non-canonical, f > 4095, sum != 4096, zero at lo or hi). */
static inline OL_EXANS_HD size_t
ol_exans_table_read(const uint8_t *p, size_t len, uint32_t f[256])
{
	for (int s = 0; s < 256; s++)
		f[s] = 0;
	if (len < 2 || p[0] > p[1])
		return 0;
	size_t k = 2;
	uint32_t sum = 0;
	for (int s = p[0]; s <= p[1]; s++) {
		if (k >= len)
			return 0;
		uint32_t v = p[k++];
		if (v & 0x80) {
			if (k >= len || p[k] == 0 || p[k] > 31)
				return 0;
			v = (v & 0x7f) | (uint32_t)p[k++] << 7;
		}
		f[s] = v;
		sum += v;
	}
	if (sum != OL_EXANS_PROB_SCALE || f[p[0]] == 0 || f[p[1]] == 0)
		return 0;
	return k;
}

/* Rows block (mode 2): after the block header, u16 R (row bytes), u16 0, u32 U (unique
 * rows), a bitmap of the nrows = dlen / R rows (bit set: the row repeats an earlier one),
 * one u16 per repeated row (the unique row it equals, numbered in order of appearance),
 * then an inner mode 0/1 block of the unique rows and the dlen % R tail bytes. */
struct ol_exans_rows {
	uint32_t R, U, nrows, nrep;
	uint32_t bitmap_off, refs_off, inner_off;
};

/* Parse and validate a rows payload of a block of n bytes decoding to dlen: 0 or -1. */
static inline OL_EXANS_HD int
ol_exans_rows_parse(const uint8_t *p, size_t n, size_t dlen, struct ol_exans_rows *r)
{
	size_t o = OL_EXANS_BHDR_BYTES;
	if (n < o + 8 || p[o + 2] || p[o + 3])
		return -1;
	r->R = (uint32_t)p[o] | (uint32_t)p[o + 1] << 8;
	r->U = ol_exans_ld32(p + o + 4);
	if (r->R < 4 || (r->R & 1) || dlen / r->R < 2 || dlen / r->R > 65536)
		return -1;
	r->nrows = (uint32_t)(dlen / r->R);
	r->bitmap_off = (uint32_t)o + 8;
	uint32_t nb = (r->nrows + 7) / 8, nrep = 0;
	if (n < (size_t)r->bitmap_off + nb)
		return -1;
	const uint8_t *bm = p + r->bitmap_off;
	for (uint32_t i = 0; i < nb; i++)
		for (int b = 0; b < 8; b++)
			nrep += (bm[i] >> b) & 1;
	if ((r->nrows & 7) && (bm[nb - 1] >> (r->nrows & 7)))
		return -1; /* bits past the last row */
	r->nrep = nrep;
	r->refs_off = r->bitmap_off + nb;
	r->inner_off = r->refs_off + 2 * nrep;
	if (nrep == 0 || r->U != r->nrows - nrep || r->inner_off > n)
		return -1;
	uint32_t u = 0, k = 0; /* a row may only repeat a unique row seen before it */
	for (uint32_t row = 0; row < r->nrows; row++) {
		if ((bm[row >> 3] >> (row & 7)) & 1) {
			const uint8_t *q = p + r->refs_off + 2 * k++;
			if (((uint32_t)q[0] | (uint32_t)q[1] << 8) >= u)
				return -1;
		} else {
			u++;
		}
	}
	return 0;
}

/* Software CRC-32C: table of 256 entries for the reflected polynomial. */
static inline OL_EXANS_HD void
ol_exans_crc_table(uint32_t t[256])
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (OL_EXANS_CRC_POLY & (0u - (c & 1)));
		t[i] = c;
	}
}

/* Standard CRC-32C (init ~0, final xor ~0) continued from crc (0 for a fresh one). */
static inline OL_EXANS_HD uint32_t
ol_exans_crc_sw(uint32_t crc, const uint8_t *p, size_t n, const uint32_t t[256])
{
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* a * b mod P over GF(2), reflected (zlib's multmodp). */
static inline OL_EXANS_HD uint32_t
ol_exans_crc_mulmod(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;
	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ OL_EXANS_CRC_POLY : b >> 1;
	}
	return p;
}

/* x^(8 * len) mod P: the operator that appends len zero bytes (zlib's x2nmodp). */
static inline OL_EXANS_HD uint32_t
ol_exans_crc_xpow(uint64_t len)
{
	uint32_t xp = 1u << 31; /* x^0 */
	uint32_t sq = 1u << 30; /* x^1, squared each round: x^(2^k) */
	uint64_t bits = len * 8;
	while (bits) {
		if (bits & 1)
			xp = ol_exans_crc_mulmod(sq, xp);
		sq = ol_exans_crc_mulmod(sq, sq);
		bits >>= 1;
	}
	return xp;
}

/* crc(A || B) from crc(A), crc(B) and |B| (zlib's crc32_combine, for CRC-32C). */
static inline OL_EXANS_HD uint32_t
ol_exans_crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return ol_exans_crc_mulmod(ol_exans_crc_xpow(len_b), crc_a) ^ crc_b;
}

#endif
