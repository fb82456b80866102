/* codec/exans.c - ExANS blocks and container (format: docs/exans-format.md). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef OL_EXANS_NO_ISAL
#include <isa-l/crc.h>
#endif

#include "codec/exans.h"
#include "codec/exans_impl.h"

#define MIN_RANS_VALUES 32

/* Encoder view of one symbol (ryg's reciprocal form; exact for states < 2^31). */
struct esym {
	uint32_t xmax;
	uint32_t rcp;
	uint32_t bias;
	uint16_t cmpl;
	uint16_t shift;
};

#ifdef OL_EXANS_NO_ISAL
/* Software CRC-32C for machines without ISA-L (bench/gpu_check.sh on a bare GPU host). */
static uint32_t crc_tab[256];

__attribute__((constructor)) static void
crc_tab_init(void)
{
	ol_exans_crc_table(crc_tab);
}

static uint32_t
crc32c(const void *p, size_t n)
{
	return ol_exans_crc_sw(0, p, n, crc_tab);
}
#else
static uint32_t
crc32c(const void *p, size_t n)
{
	uint32_t crc = 0;
	const uint8_t *b = p;
	while (n) { /* crc32_iscsi takes an int length */
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		crc = ~crc32_iscsi((unsigned char *)b, (int)k, ~crc);
		b += k;
		n -= k;
	}
	return crc;
}
#endif

int
ol_exans_impl_supported(enum ol_exans_impl impl)
{
	__builtin_cpu_init();
	switch (impl) {
	case OL_EXANS_AUTO:
	case OL_EXANS_SCALAR:
		return 1;
	case OL_EXANS_AVX2:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
	case OL_EXANS_AVX512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
	}
	return 0;
}

static enum ol_exans_impl
resolve(enum ol_exans_impl impl)
{
	if (impl != OL_EXANS_AUTO)
		return ol_exans_impl_supported(impl) ? impl : OL_EXANS_SCALAR;
	if (ol_exans_impl_supported(OL_EXANS_AVX512))
		return OL_EXANS_AVX512;
	if (ol_exans_impl_supported(OL_EXANS_AVX2))
		return OL_EXANS_AVX2;
	return OL_EXANS_SCALAR;
}

const char *
ol_exans_impl_name(enum ol_exans_impl impl)
{
	switch (resolve(impl)) {
	case OL_EXANS_AVX2:
		return "avx2";
	case OL_EXANS_AVX512:
		return "avx512";
	default:
		return "scalar";
	}
}

/* ---- block encoder ---- */

/* Exponent counts. KV data has few distinct exponents, so increments of one counter would
 * wait on each other through memory: 8 sub-histograms, 4 values per 64-bit load. */
static void
histogram(const uint8_t *src, size_t nv, uint32_t cnt[256])
{
	uint32_t h[8][256];
	memset(h, 0, sizeof(h));
	size_t i = 0;
	for (; i + 8 <= nv; i += 8) {
		uint64_t a, b;
		memcpy(&a, src + 2 * i, 8);
		memcpy(&b, src + 2 * i + 8, 8);
		h[0][(a >> 7) & 0xff]++;
		h[1][(a >> 23) & 0xff]++;
		h[2][(a >> 39) & 0xff]++;
		h[3][(a >> 55) & 0xff]++;
		h[4][(b >> 7) & 0xff]++;
		h[5][(b >> 23) & 0xff]++;
		h[6][(b >> 39) & 0xff]++;
		h[7][(b >> 55) & 0xff]++;
	}
	for (; i < nv; i++)
		h[0][ol_exans_exp(ol_exans_ld16(src + 2 * i))]++;
	for (int s = 0; s < 256; s++) {
		uint32_t c = 0;
		for (int k = 0; k < 8; k++)
			c += h[k][s];
		cnt[s] = c;
	}
}

static void
esyms_init(const uint32_t f[256], struct esym es[256])
{
	uint32_t cum = 0;
	for (int s = 0; s < 256; s++) {
		uint32_t fr = f[s];
		memset(&es[s], 0, sizeof(es[s]));
		if (!fr)
			continue;
		es[s].xmax = ((OL_EXANS_RANS_L >> OL_EXANS_PROB_BITS) << 16) * fr;
		es[s].cmpl = (uint16_t)(OL_EXANS_PROB_SCALE - fr);
		if (fr < 2) {
			es[s].rcp = ~0u;
			es[s].shift = 0;
			es[s].bias = cum + OL_EXANS_PROB_SCALE - 1;
		} else {
			uint32_t sh = 0;
			while (fr > (1u << sh))
				sh++;
			es[s].rcp = (uint32_t)(((1ull << (sh + 31)) + fr - 1) / fr);
			es[s].shift = (uint16_t)(sh - 1);
			es[s].bias = cum;
		}
		cum += fr;
	}
}

/* Encode values [i0, i1) of lanes i % 32, from the last to the first, pushing words
 * downward from *wpp. The caller guarantees room for one word per value. */
static void
enc_range(const uint8_t *src, size_t i0, size_t i1, const struct esym *es, uint32_t *x, uint8_t *sm,
	  uint8_t **wpp)
{
	uint8_t *wp = *wpp;
	for (size_t i = i1; i-- > i0;) {
		uint16_t v = ol_exans_ld16(src + 2 * i);
		const struct esym *e = &es[ol_exans_exp(v)];
		unsigned l = i % OL_EXANS_LANES;
		uint32_t s = x[l];
		sm[i] = ol_exans_sm(v);
		uint32_t emit = s >= e->xmax;
		uint16_t w = (uint16_t)s;
		memcpy(wp - 2, &w, 2);
		wp -= emit * 2;
		s >>= emit * 16; /* unpredictable: no branch */
		uint32_t q = (uint32_t)(((uint64_t)s * e->rcp) >> 32) >> e->shift;
		x[l] = s + e->bias + q * e->cmpl;
	}
	*wpp = wp;
}

static void
enc_simd_init(struct ol_exans_enc *se, const uint32_t f[256], const struct esym *es)
{
	int lo = 0, hi = 255;
	while (!f[lo])
		lo++;
	while (!f[hi])
		hi--;
	memset(se->a, 0, sizeof(se->a));
	memset(se->b, 0, sizeof(se->b));
	for (int s = lo; s <= hi; s++) {
		se->a[s] = f[s] | es[s].bias << 12 | (uint32_t)es[s].shift << 25;
		se->b[s] = es[s].rcp;
	}
	se->lo = lo;
	se->narrow = hi - lo < 32;
}

/* Groups g-1 .. 0 (all full). 0, or -ENOSPC when the block does not fit. */
static int
enc_groups(const uint8_t *src, size_t g, const uint32_t f[256], const struct esym *es, uint32_t *x,
	   uint8_t *sm, uint8_t **wpp, const uint8_t *floor, enum ol_exans_impl impl)
{
	if ((impl == OL_EXANS_AVX512 || impl == OL_EXANS_AVX2) && g > 0) {
		struct ol_exans_enc se;
		enc_simd_init(&se, f, es);
		memcpy(se.x, x, sizeof(se.x));
		se.wp = *wpp;
		se.floor = floor;
		int r = impl == OL_EXANS_AVX512 ? ol_exans_enc_groups_avx512(&se, src, sm, g)
						: ol_exans_enc_groups_avx2(&se, src, sm, g);
		if (r != 0)
			return -ENOSPC;
		memcpy(x, se.x, sizeof(se.x));
		*wpp = se.wp;
		return 0;
	}
	while (g-- > 0) {
		if (*wpp - floor < 2 * OL_EXANS_LANES)
			return -ENOSPC;
		enc_range(src, g * OL_EXANS_LANES, (g + 1) * OL_EXANS_LANES, es, x, sm, wpp);
	}
	return 0;
}

/* rANS block into dst[0..limit). Returns its size, or 0 if it does not fit in limit. */
static size_t
enc_rans(const uint8_t *src, size_t n, uint8_t *dst, size_t limit, enum ol_exans_impl impl)
{
	size_t nv = n / 2;
	uint32_t cnt[256], f[256], x[OL_EXANS_LANES];
	struct esym es[256];
	uint8_t table[OL_EXANS_TABLE_MAX];
	histogram(src, nv, cnt);
	ol_exans_quantise(cnt, nv, f);
	size_t tlen = ol_exans_table_write(f, table);
	size_t st_off = OL_EXANS_BHDR_BYTES + tlen;
	size_t sm_off = st_off + 4 * OL_EXANS_LANES;
	size_t w_off = sm_off + nv + (n & 1);
	if (w_off + 2 * OL_EXANS_LANES > limit)
		return 0;
	memcpy(dst + OL_EXANS_BHDR_BYTES, table, tlen);
	esyms_init(f, es);
	for (unsigned l = 0; l < OL_EXANS_LANES; l++)
		x[l] = OL_EXANS_RANS_L;
	uint8_t *wp = dst + limit;
	size_t g = (nv - 1) / OL_EXANS_LANES; /* the top group, maybe partial: scalar */
	enc_range(src, g * OL_EXANS_LANES, nv, es, x, dst + sm_off, &wp);
	if (enc_groups(src, g, f, es, x, dst + sm_off, &wp, dst + w_off, impl) != 0)
		return 0;
	size_t wbytes = (size_t)(dst + limit - wp);
	memmove(dst + w_off, wp, wbytes);
	for (unsigned l = 0; l < OL_EXANS_LANES; l++)
		ol_exans_st32(dst + st_off + 4 * l, x[l]);
	if (n & 1)
		dst[sm_off + nv] = src[n - 1];
	return w_off + wbytes;
}

static void
put_bhdr(uint8_t *dst, uint32_t crc, size_t n, int mode)
{
	ol_exans_st32(dst, crc);
	ol_exans_st32(dst + 4, (uint32_t)n);
	dst[8] = (uint8_t)mode;
	dst[9] = dst[10] = dst[11] = 0;
}

size_t
ol_exans_block_bound(size_t n)
{
	return n + OL_EXANS_BHDR_BYTES;
}

static ssize_t
block_encode(const void *src, size_t n, void *dst, size_t cap, enum ol_exans_impl impl,
	     uint32_t row_bytes)
{
	if (n > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EINVAL;
	size_t raw = n + OL_EXANS_BHDR_BYTES;
	uint32_t crc = crc32c(src, n);
	ssize_t r = -ENOSPC;
	if (n / 2 >= MIN_RANS_VALUES) {
		size_t k = enc_rans(src, n, dst, cap < raw ? cap : raw - 1, impl);
		if (k) {
			put_bhdr(dst, crc, n, OL_EXANS_MODE_RANS);
			r = (ssize_t)k;
		}
	}
	if (r < 0 && cap >= raw) {
		put_bhdr(dst, crc, n, OL_EXANS_MODE_RAW);
		memcpy((uint8_t *)dst + OL_EXANS_BHDR_BYTES, src, n);
		r = (ssize_t)raw;
	}
	if (row_bytes) { /* opt-in: keep the rows block only if it is smaller */
		ssize_t q = ol_exans_rows_encode(src, n, row_bytes, dst, cap,
						 r > 0 ? (size_t)r : SIZE_MAX, impl);
		if (q < 0)
			return q;
		if (q > 0) {
			put_bhdr(dst, crc, n, OL_EXANS_MODE_ROWS);
			r = q;
		}
	}
	return r;
}

ssize_t
ol_exans_block_encode_impl(const void *src, size_t n, void *dst, size_t cap,
			   enum ol_exans_impl impl)
{
	return block_encode(src, n, dst, cap, impl, 0);
}

ssize_t
ol_exans_block_encode(const void *src, size_t n, void *dst, size_t cap)
{
	return block_encode(src, n, dst, cap, resolve(OL_EXANS_AUTO), 0);
}

/* ---- block decoder ---- */

/* One rANS block being decoded. */
struct bdec {
	struct ol_exans_dec d;
	const uint8_t *sm; /* sign+mantissa bytes */
	size_t nv;
	size_t dlen;
	uint32_t tbl[OL_EXANS_PROB_SCALE];
};

static void
dec_table(const uint32_t f[256], uint32_t *tbl)
{
	uint32_t cum = 0;
	for (uint32_t s = 0; s < 256; s++) {
		for (uint32_t j = 0; j < f[s]; j++)
			tbl[cum + j] = ol_exans_rot((uint8_t)s) | f[s] << 8 | j << 20;
		cum += f[s];
	}
}

/* Parse the rANS payload of a block of n bytes decoding to dlen. 0 or -EBADMSG. */
static int
dec_setup(const uint8_t *src, size_t n, size_t dlen, struct bdec *b)
{
	uint32_t f[256];
	size_t nv = dlen / 2;
	size_t tlen = ol_exans_table_read(src + OL_EXANS_BHDR_BYTES, n - OL_EXANS_BHDR_BYTES, f);
	if (!tlen || nv == 0)
		return -EBADMSG;
	size_t st_off = OL_EXANS_BHDR_BYTES + tlen, sm_off = st_off + 4 * OL_EXANS_LANES;
	size_t w_off = sm_off + nv + (dlen & 1);
	if (w_off > n || ((n - w_off) & 1))
		return -EBADMSG;
	for (unsigned l = 0; l < OL_EXANS_LANES; l++) {
		b->d.x[l] = ol_exans_ld32(src + st_off + 4 * l);
		if (b->d.x[l] < OL_EXANS_RANS_L || b->d.x[l] >= (1u << 31))
			return -EBADMSG;
	}
	dec_table(f, b->tbl);
	b->d.tbl = b->tbl;
	b->d.wp = src + w_off;
	b->d.wend = src + n;
	b->sm = src + sm_off;
	b->nv = nv;
	b->dlen = dlen;
	return 0;
}

/* All words used, every lane back at L; then the odd tail byte. 0 or -EBADMSG. */
static int
dec_finish(const struct bdec *b, uint8_t *dst)
{
	if (b->d.wp != b->d.wend)
		return -EBADMSG;
	for (unsigned l = 0; l < OL_EXANS_LANES; l++)
		if (b->d.x[l] != OL_EXANS_RANS_L)
			return -EBADMSG;
	if (b->dlen & 1)
		dst[b->dlen - 1] = b->sm[b->nv];
	return 0;
}

static int
dec_groups(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, size_t ng,
	   enum ol_exans_impl impl)
{
	switch (impl) {
	case OL_EXANS_AVX512:
		return ol_exans_dec_groups_avx512(d, out, sm, ng);
	case OL_EXANS_AVX2:
		return ol_exans_dec_groups_avx2(d, out, sm, ng);
	default:
		return ol_exans_dec_groups_scalar(d, out, sm, ng);
	}
}

static int
dec_rans(const uint8_t *src, size_t n, uint8_t *dst, size_t dlen, enum ol_exans_impl impl)
{
	struct bdec b;
	if (dec_setup(src, n, dlen, &b) != 0)
		return -EBADMSG;
	size_t ng = b.nv / OL_EXANS_LANES, i = ng * OL_EXANS_LANES;
	if (dec_groups(&b.d, dst, b.sm, ng, impl) != 0 ||
	    ol_exans_dec_lanes(&b.d, dst + 2 * i, b.sm + i, b.nv % OL_EXANS_LANES) != 0)
		return -EBADMSG;
	return dec_finish(&b, dst);
}

/* Two rANS blocks of the same length at once: their lanes are independent, so the SIMD
 * kernels interleave them to hide the gather and word-load latency of one block. */
static int
dec_rans2(const uint8_t *s0, size_t n0, uint8_t *d0, const uint8_t *s1, size_t n1, uint8_t *d1,
	  size_t dlen, enum ol_exans_impl impl)
{
	struct bdec b[2];
	if (dec_setup(s0, n0, dlen, &b[0]) != 0 || dec_setup(s1, n1, dlen, &b[1]) != 0)
		return -EBADMSG;
	size_t ng = b[0].nv / OL_EXANS_LANES, i = ng * OL_EXANS_LANES;
	int r = impl == OL_EXANS_AVX512
		    ? ol_exans_dec_groups2_avx512(&b[0].d, &b[1].d, d0, d1, b[0].sm, b[1].sm, ng)
		    : ol_exans_dec_groups2_avx2(&b[0].d, &b[1].d, d0, d1, b[0].sm, b[1].sm, ng);
	if (r != 0 ||
	    ol_exans_dec_lanes(&b[0].d, d0 + 2 * i, b[0].sm + i, b[0].nv % OL_EXANS_LANES) != 0 ||
	    ol_exans_dec_lanes(&b[1].d, d1 + 2 * i, b[1].sm + i, b[1].nv % OL_EXANS_LANES) != 0)
		return -EBADMSG;
	return dec_finish(&b[0], d0) | dec_finish(&b[1], d1);
}

/* Header of a block: 0, -EBADMSG, or -ENOSPC if it decodes to more than cap. */
static int
bhdr_check(const uint8_t *s, size_t n, size_t cap, uint32_t *crc, size_t *dlen)
{
	if (n < OL_EXANS_BHDR_BYTES || s[9] || s[10] || s[11])
		return -EBADMSG;
	*crc = ol_exans_ld32(s);
	*dlen = ol_exans_ld32(s + 4);
	if (*dlen > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EBADMSG;
	if (s[8] == OL_EXANS_MODE_RAW && n != *dlen + OL_EXANS_BHDR_BYTES)
		return -EBADMSG;
	if (s[8] > OL_EXANS_MODE_ROWS)
		return -EBADMSG;
	return *dlen > cap ? -ENOSPC : 0;
}

static ssize_t
block_decode(const uint8_t *s, size_t n, uint8_t *dst, size_t cap, enum ol_exans_impl impl)
{
	uint32_t crc;
	size_t dlen;
	int r = bhdr_check(s, n, cap, &crc, &dlen);
	if (r)
		return r;
	if (s[8] == OL_EXANS_MODE_RAW)
		memcpy(dst, s + OL_EXANS_BHDR_BYTES, dlen);
	else if (s[8] == OL_EXANS_MODE_ROWS)
		r = ol_exans_rows_decode(s, n, dst, dlen, impl);
	else
		r = dec_rans(s, n, dst, dlen, impl);
	if (r != 0)
		return -EBADMSG;
	return crc32c(dst, dlen) == crc ? (ssize_t)dlen : -EBADMSG;
}

ssize_t
ol_exans_block_decode(const void *src, size_t n, void *dst, size_t cap, enum ol_exans_impl impl)
{
	return block_decode(src, n, dst, cap, resolve(impl));
}

/* Decode two blocks that must each decode to exactly want bytes; pairs them when both are
 * rANS and the impl is SIMD. 0 or -EBADMSG. */
static int
block_decode2(const uint8_t *s0, size_t n0, uint8_t *d0, const uint8_t *s1, size_t n1, uint8_t *d1,
	      size_t want, enum ol_exans_impl impl)
{
	uint32_t c0, c1;
	size_t l0, l1;
	if (impl == OL_EXANS_SCALAR || bhdr_check(s0, n0, want, &c0, &l0) != 0 ||
	    bhdr_check(s1, n1, want, &c1, &l1) != 0 || l0 != want || l1 != want ||
	    s0[8] != OL_EXANS_MODE_RANS || s1[8] != OL_EXANS_MODE_RANS) {
		if (block_decode(s0, n0, d0, want, impl) != (ssize_t)want ||
		    block_decode(s1, n1, d1, want, impl) != (ssize_t)want)
			return -EBADMSG;
		return 0;
	}
	if (dec_rans2(s0, n0, d0, s1, n1, d1, want, impl) != 0)
		return -EBADMSG;
	return crc32c(d0, want) == c0 && crc32c(d1, want) == c1 ? 0 : -EBADMSG;
}

/* ---- container ---- */

struct hdr {
	uint64_t len;
	uint32_t nblocks;
	uint32_t blk;
	size_t data_off; /* first block */
};

static int
blk_log2(uint32_t b)
{
	if (b == 0)
		return OL_EXANS_DEF_LOG2_BLK;
	for (int k = OL_EXANS_MIN_LOG2_BLK; k <= OL_EXANS_MAX_LOG2_BLK; k++)
		if (b == 1u << k)
			return k;
	return -1;
}

size_t
ol_exans_bound(size_t n, uint32_t block_bytes)
{
	int lg = blk_log2(block_bytes);
	size_t b = (size_t)1 << (lg < 0 ? OL_EXANS_MIN_LOG2_BLK : lg);
	size_t nb = (n + b - 1) / b;
	return OL_EXANS_HDR_BYTES + nb * (4 + OL_EXANS_BHDR_BYTES) + n;
}

static uint32_t
hdr_crc(const uint8_t *p, uint32_t nblocks)
{
	uint32_t t = crc32c(p, 20);
	uint32_t i = crc32c(p + OL_EXANS_HDR_BYTES, (size_t)nblocks * 4);
	return ol_exans_crc_combine(t, i, (uint64_t)nblocks * 4);
}

ssize_t
ol_exans_compress(const void *src, size_t n, void *dst, size_t cap, const struct ol_exans_opts *o)
{
	int lg = blk_log2(o ? o->block_bytes : 0);
	if (lg < 0)
		return -EINVAL;
	size_t b = (size_t)1 << lg, nb = (n + b - 1) / b;
	if (nb > UINT32_MAX)
		return -EINVAL;
	uint8_t *d = dst;
	size_t off = OL_EXANS_HDR_BYTES + 4 * nb;
	enum ol_exans_impl impl = resolve(o ? o->impl : OL_EXANS_AUTO);
	if (cap < off)
		return -ENOSPC;
	for (size_t i = 0; i < nb; i++) {
		size_t len = n - i * b < b ? n - i * b : b;
		ssize_t r = block_encode((const uint8_t *)src + i * b, len, d + off, cap - off,
					 impl, o ? o->row_bytes : 0);
		if (r < 0)
			return r;
		ol_exans_st32(d + OL_EXANS_HDR_BYTES + 4 * i, (uint32_t)r);
		off += (size_t)r;
	}
	ol_exans_st32(d, OL_EXANS_MAGIC);
	d[4] = OL_EXANS_VERSION;
	d[5] = 0;
	d[6] = (uint8_t)lg;
	d[7] = 0;
	ol_exans_st32(d + 8, (uint32_t)n);
	ol_exans_st32(d + 12, (uint32_t)((uint64_t)n >> 32));
	ol_exans_st32(d + 16, (uint32_t)nb);
	ol_exans_st32(d + 20, hdr_crc(d, (uint32_t)nb));
	return (ssize_t)off;
}

static int
parse_hdr(const uint8_t *p, size_t n, struct hdr *h)
{
	if (n < OL_EXANS_HDR_BYTES || ol_exans_ld32(p) != OL_EXANS_MAGIC ||
	    p[4] != OL_EXANS_VERSION || p[5] || p[7] || p[6] < OL_EXANS_MIN_LOG2_BLK ||
	    p[6] > OL_EXANS_MAX_LOG2_BLK)
		return -EBADMSG;
	h->blk = 1u << p[6];
	h->len = ol_exans_ld32(p + 8) | (uint64_t)ol_exans_ld32(p + 12) << 32;
	h->nblocks = ol_exans_ld32(p + 16);
	if (h->nblocks != (h->len + h->blk - 1) / h->blk ||
	    h->nblocks > (n - OL_EXANS_HDR_BYTES) / 4)
		return -EBADMSG;
	h->data_off = OL_EXANS_HDR_BYTES + (size_t)h->nblocks * 4;
	if (hdr_crc(p, h->nblocks) != ol_exans_ld32(p + 20))
		return -EBADMSG;
	uint64_t tot = h->data_off; /* the blocks must fill the rest exactly */
	for (uint32_t i = 0; i < h->nblocks; i++)
		tot += ol_exans_ld32(p + OL_EXANS_HDR_BYTES + 4 * i);
	return tot == n ? 0 : -EBADMSG;
}

int
ol_exans_decoded_size(const void *src, size_t n, uint64_t *out)
{
	struct hdr h;
	int r = parse_hdr(src, n, &h);
	if (r == 0)
		*out = h.len;
	return r;
}

int
ol_exans_block_count(const void *src, size_t n, uint32_t *out)
{
	struct hdr h;
	int r = parse_hdr(src, n, &h);
	if (r == 0)
		*out = h.nblocks;
	return r;
}

int
ol_exans_block_locate(const void *src, size_t n, uint32_t i, struct ol_exans_block_ref *r)
{
	struct hdr h;
	const uint8_t *p = src;
	int e = parse_hdr(p, n, &h);
	if (e)
		return e;
	if (i >= h.nblocks)
		return -ERANGE;
	size_t off = h.data_off;
	for (uint32_t k = 0; k < i; k++)
		off += ol_exans_ld32(p + OL_EXANS_HDR_BYTES + 4 * k);
	r->off = off;
	r->len = ol_exans_ld32(p + OL_EXANS_HDR_BYTES + 4 * i);
	r->dec_off = (uint64_t)i * h.blk;
	r->dec_len = h.len - r->dec_off < h.blk ? (size_t)(h.len - r->dec_off) : h.blk;
	return 0;
}

ssize_t
ol_exans_decompress_opts(const void *src, size_t n, void *dst, size_t cap,
			 const struct ol_exans_opts *o)
{
	struct hdr h;
	const uint8_t *p = src;
	enum ol_exans_impl impl = resolve(o ? o->impl : OL_EXANS_AUTO);
	if (parse_hdr(p, n, &h) != 0)
		return -EBADMSG;
	if (h.len > cap)
		return -ENOSPC;
	size_t off = h.data_off;
	uint8_t *d = dst;
	for (uint32_t i = 0; i < h.nblocks;) {
		const uint8_t *ix = p + OL_EXANS_HDR_BYTES + 4 * (size_t)i;
		size_t len = ol_exans_ld32(ix);
		uint64_t doff = (uint64_t)i * h.blk;
		if (h.len - doff >= 2 * (uint64_t)h.blk) { /* two full blocks */
			size_t len1 = ol_exans_ld32(ix + 4);
			if (block_decode2(p + off, len, d + doff, p + off + len, len1,
					  d + doff + h.blk, h.blk, impl) != 0)
				return -EBADMSG;
			off += len + len1;
			i += 2;
			continue;
		}
		size_t want = h.len - doff < h.blk ? (size_t)(h.len - doff) : h.blk;
		if (block_decode(p + off, len, d + doff, want, impl) != (ssize_t)want)
			return -EBADMSG;
		off += len;
		i++;
	}
	return (ssize_t)h.len;
}

ssize_t
ol_exans_decompress(const void *src, size_t n, void *dst, size_t cap)
{
	return ol_exans_decompress_opts(src, n, dst, cap, NULL);
}

double
ol_exans_exp_entropy(const void *src, size_t n, double *bound_bytes)
{
	uint32_t cnt[256];
	size_t nv = n / 2;
	histogram(src, nv, cnt);
	double h = 0;
	for (int s = 0; s < 256; s++)
		if (cnt[s])
			h -= (double)cnt[s] / (double)nv * log2((double)cnt[s] / (double)nv);
	if (bound_bytes)
		*bound_bytes = h * (double)nv / 8 + (double)(n - nv);
	return h;
}
