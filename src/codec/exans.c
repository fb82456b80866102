/* codec/exans.c - ExANS blocks and container (format: docs/exans-format.md). */
#include <errno.h>
#include <math.h>
#include <string.h>

#ifndef OL_EXANS_NO_ISAL
#include <isa-l/crc.h>
#endif

#include "codec/exans.h"
#include "codec/exans_impl.h"

#define CHUNK_VALUES	4096 /* exponents decoded per pass before joining */
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

static void
histogram(const uint8_t *src, size_t nv, uint32_t cnt[256])
{
	uint32_t h[4][256];
	memset(h, 0, sizeof(h));
	size_t i = 0;
	for (; i + 4 <= nv; i += 4)
		for (int k = 0; k < 4; k++)
			h[k][ol_exans_exp(ol_exans_ld16(src + 2 * (i + k)))]++;
	for (; i < nv; i++)
		h[0][ol_exans_exp(ol_exans_ld16(src + 2 * i))]++;
	for (int s = 0; s < 256; s++)
		cnt[s] = h[0][s] + h[1][s] + h[2][s] + h[3][s];
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
		s = emit ? s >> 16 : s;
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
	if (impl == OL_EXANS_AVX512 && g > 0) {
		struct ol_exans_enc se;
		enc_simd_init(&se, f, es);
		memcpy(se.x, x, sizeof(se.x));
		se.wp = *wpp;
		se.floor = floor;
		if (ol_exans_enc_groups_avx512(&se, src, sm, g) != 0)
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
block_encode(const void *src, size_t n, void *dst, size_t cap, enum ol_exans_impl impl)
{
	if (n > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EINVAL;
	size_t raw = n + OL_EXANS_BHDR_BYTES;
	uint32_t crc = crc32c(src, n);
	if (n / 2 >= MIN_RANS_VALUES) {
		size_t r = enc_rans(src, n, dst, cap < raw ? cap : raw - 1, impl);
		if (r) {
			put_bhdr(dst, crc, n, OL_EXANS_MODE_RANS);
			return (ssize_t)r;
		}
	}
	if (cap < raw)
		return -ENOSPC;
	put_bhdr(dst, crc, n, OL_EXANS_MODE_RAW);
	memcpy((uint8_t *)dst + OL_EXANS_BHDR_BYTES, src, n);
	return (ssize_t)raw;
}

ssize_t
ol_exans_block_encode(const void *src, size_t n, void *dst, size_t cap)
{
	return block_encode(src, n, dst, cap, resolve(OL_EXANS_AUTO));
}

/* ---- block decoder ---- */

static void
dec_table(const uint32_t f[256], uint32_t *tbl)
{
	uint32_t cum = 0;
	for (uint32_t s = 0; s < 256; s++) {
		for (uint32_t j = 0; j < f[s]; j++)
			tbl[cum + j] = s | f[s] << 8 | j << 20;
		cum += f[s];
	}
}

static int
dec_run(struct ol_exans_dec *d, uint8_t *exps, size_t nv, enum ol_exans_impl impl)
{
	size_t ng = nv / OL_EXANS_LANES;
	switch (impl) {
	case OL_EXANS_AVX512:
		if (ol_exans_dec_groups_avx512(d, exps, ng) != 0)
			return -EBADMSG;
		break;
	case OL_EXANS_AVX2:
		if (ol_exans_dec_groups_avx2(d, exps, ng) != 0)
			return -EBADMSG;
		break;
	default:
		if (ol_exans_dec_groups_scalar(d, exps, ng) != 0)
			return -EBADMSG;
	}
	return ol_exans_dec_lanes(d, exps + ng * OL_EXANS_LANES, nv % OL_EXANS_LANES);
}

static int
dec_rans(const uint8_t *src, size_t n, uint8_t *dst, size_t dlen, enum ol_exans_impl impl)
{
	uint32_t f[256], tbl[OL_EXANS_PROB_SCALE];
	uint8_t exps[CHUNK_VALUES];
	struct ol_exans_dec d;
	size_t nv = dlen / 2;
	size_t tlen = ol_exans_table_read(src + OL_EXANS_BHDR_BYTES, n - OL_EXANS_BHDR_BYTES, f);
	if (!tlen || nv == 0)
		return -EBADMSG;
	size_t st_off = OL_EXANS_BHDR_BYTES + tlen, sm_off = st_off + 4 * OL_EXANS_LANES;
	size_t w_off = sm_off + nv + (dlen & 1);
	if (w_off > n || ((n - w_off) & 1))
		return -EBADMSG;
	for (unsigned l = 0; l < OL_EXANS_LANES; l++) {
		d.x[l] = ol_exans_ld32(src + st_off + 4 * l);
		if (d.x[l] < OL_EXANS_RANS_L || d.x[l] >= (1u << 31))
			return -EBADMSG;
	}
	dec_table(f, tbl);
	d.tbl = tbl;
	d.wp = src + w_off;
	d.wend = src + n;
	void (*join)(uint8_t *, const uint8_t *, const uint8_t *, size_t) =
	    impl == OL_EXANS_SCALAR ? ol_exans_join_scalar : ol_exans_join_avx2;
	for (size_t i = 0; i < nv; i += CHUNK_VALUES) {
		size_t k = nv - i < CHUNK_VALUES ? nv - i : CHUNK_VALUES;
		if (dec_run(&d, exps, k, impl) != 0)
			return -EBADMSG;
		join(dst + 2 * i, exps, src + sm_off + i, k);
	}
	if (d.wp != d.wend)
		return -EBADMSG;
	for (unsigned l = 0; l < OL_EXANS_LANES; l++)
		if (d.x[l] != OL_EXANS_RANS_L)
			return -EBADMSG;
	if (dlen & 1)
		dst[dlen - 1] = src[sm_off + nv];
	return 0;
}

ssize_t
ol_exans_block_decode(const void *src, size_t n, void *dst, size_t cap, enum ol_exans_impl impl)
{
	const uint8_t *s = src;
	if (n < OL_EXANS_BHDR_BYTES || s[9] || s[10] || s[11])
		return -EBADMSG;
	uint32_t crc = ol_exans_ld32(s);
	size_t dlen = ol_exans_ld32(s + 4);
	if (dlen > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EBADMSG;
	if (dlen > cap)
		return -ENOSPC;
	impl = resolve(impl);
	if (s[8] == OL_EXANS_MODE_RAW) {
		if (n != dlen + OL_EXANS_BHDR_BYTES)
			return -EBADMSG;
		memcpy(dst, s + OL_EXANS_BHDR_BYTES, dlen);
	} else if (s[8] == OL_EXANS_MODE_RANS) {
		if (dec_rans(s, n, dst, dlen, impl) != 0)
			return -EBADMSG;
	} else {
		return -EBADMSG;
	}
	return crc32c(dst, dlen) == crc ? (ssize_t)dlen : -EBADMSG;
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
		ssize_t r =
		    block_encode((const uint8_t *)src + i * b, len, d + off, cap - off, impl);
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
	for (uint32_t i = 0; i < h.nblocks; i++) {
		size_t len = ol_exans_ld32(p + OL_EXANS_HDR_BYTES + 4 * i);
		uint64_t doff = (uint64_t)i * h.blk;
		size_t want = h.len - doff < h.blk ? (size_t)(h.len - doff) : h.blk;
		ssize_t r = ol_exans_block_decode(p + off, len, (uint8_t *)dst + doff, want, impl);
		if (r != (ssize_t)want)
			return -EBADMSG;
		off += len;
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
