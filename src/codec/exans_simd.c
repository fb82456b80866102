/* codec/exans_simd.c - AVX2 and AVX-512 rANS decode (target attributes per function, so the
 * build needs no -mavx2; exans.c calls them only when the CPU has the features). They consume
 * words in exactly the scalar order: within a group, lanes 0..31 that need a word take the
 * next ones in lane order. */
#include <errno.h>
#include <immintrin.h>

#include "codec/exans_impl.h"

#define AVX2_T	 __attribute__((target("avx2,popcnt")))
#define AVX512_T __attribute__((target("avx512f,avx2,popcnt")))

/* avx2_perm[m]: lane l takes word k if l is the k-th set lane of m (AVX2 has no expand).
 * avx2_cperm[m]: the set lanes of m moved, in order, to the top slots 8-popcount(m)..7 (a
 * right-aligned compress, for the encoder's downward word stack). */
static uint32_t avx2_perm[256][8];
static uint32_t avx2_cperm[256][8];

__attribute__((constructor)) static void
avx2_perm_init(void)
{
	for (int m = 0; m < 256; m++) {
		int k = 0, c = __builtin_popcount((unsigned)m);
		memset(avx2_cperm[m], 0, sizeof(avx2_cperm[m]));
		for (int l = 0; l < 8; l++) {
			avx2_perm[m][l] = (m >> l) & 1 ? (uint32_t)k : 0;
			if ((m >> l) & 1)
				avx2_cperm[m][8 - c + k++] = (uint32_t)l;
		}
	}
}

AVX2_T static inline __m256i
avx2_step(__m256i x, const uint32_t *tbl, const uint8_t **wpp, __m256i *sym)
{
	const __m256i mask12 = _mm256_set1_epi32(OL_EXANS_PROB_SCALE - 1);
	__m256i e = _mm256_i32gather_epi32((const int *)tbl, _mm256_and_si256(x, mask12), 4);
	__m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), mask12);
	x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, OL_EXANS_PROB_BITS)),
			     _mm256_srli_epi32(e, 20));
	*sym = _mm256_and_si256(e, _mm256_set1_epi32(0xff));
	__m256i need = _mm256_cmpgt_epi32(_mm256_set1_epi32(OL_EXANS_RANS_L), x);
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
	__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)*wpp));
	w = _mm256_permutevar8x32_epi32(w, _mm256_loadu_si256((const __m256i *)avx2_perm[m]));
	__m256i xn = _mm256_or_si256(_mm256_slli_epi32(x, 16), w);
	*wpp += 2 * __builtin_popcount(m);
	return _mm256_blendv_epi8(x, xn, need);
}

/* BF16 of 8 lanes: exponents in s (u32), sign+mantissa bytes from sm. */
AVX2_T static inline __m256i
avx2_join(__m256i s, const uint8_t *sm)
{
	__m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sm));
	__m256i v =
	    _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 8),
			    _mm256_slli_epi32(s, 7));
	return _mm256_or_si256(v, _mm256_and_si256(b, _mm256_set1_epi32(0x7f)));
}

/* 32 values of one group to out (64 bytes). */
AVX2_T static inline void
avx2_store_group(uint8_t *out, const uint8_t *sm, const __m256i s[4])
{
	for (int k = 0; k < 4; k += 2) {
		__m256i v = _mm256_packus_epi32(avx2_join(s[k], sm + 8 * k),
						avx2_join(s[k + 1], sm + 8 * k + 8));
		_mm256_storeu_si256((__m256i *)(out + 16 * k), _mm256_permute4x64_epi64(v, 0xd8));
	}
}

AVX2_T int
ol_exans_dec_groups_avx2(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, size_t ngroups)
{
	__m256i x[4], s[4];
	const uint8_t *wp = d->wp;
	for (int k = 0; k < 4; k++)
		x[k] = _mm256_loadu_si256((const __m256i *)(d->x + 8 * k));
	size_t g = 0;
	/* 32 words is the most one group takes; 16 bytes are loaded per step of 8 lanes */
	for (; g < ngroups && d->wend - wp >= 2 * OL_EXANS_LANES + 16; g++) {
		for (int k = 0; k < 4; k++)
			x[k] = avx2_step(x[k], d->tbl, &wp, &s[k]);
		avx2_store_group(out + 64 * g, sm + 32 * g, s);
	}
	for (int k = 0; k < 4; k++)
		_mm256_storeu_si256((__m256i *)(d->x + 8 * k), x[k]);
	d->wp = wp;
	for (; g < ngroups; g++)
		if (ol_exans_dec_lanes(d, out + 64 * g, sm + 32 * g, OL_EXANS_LANES) != 0)
			return -EBADMSG;
	return 0;
}

AVX512_T static inline __m512i
avx512_step(__m512i x, const uint32_t *tbl, const uint8_t **wpp, __m512i *sym)
{
	const __m512i mask12 = _mm512_set1_epi32(OL_EXANS_PROB_SCALE - 1);
	__m512i e = _mm512_i32gather_epi32(_mm512_and_si512(x, mask12), (const int *)tbl, 4);
	__m512i f = _mm512_and_si512(_mm512_srli_epi32(e, 8), mask12);
	x = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(x, OL_EXANS_PROB_BITS)),
			     _mm512_srli_epi32(e, 20));
	*sym = e;
	__mmask16 need = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(OL_EXANS_RANS_L));
	__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)*wpp));
	w = _mm512_maskz_expand_epi32(need, w);
	*wpp += 2 * __builtin_popcount((unsigned)need);
	return _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), w);
}

/* 16 values to out (32 bytes): table entries e (symbol in the low byte), sm bytes. */
AVX512_T static inline void
avx512_store16(uint8_t *out, const uint8_t *sm, __m512i e)
{
	__m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sm));
	__m512i v = _mm512_slli_epi32(_mm512_and_si512(e, _mm512_set1_epi32(0xff)), 7);
	v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 8));
	v = _mm512_or_si512(v, _mm512_and_si512(b, _mm512_set1_epi32(0x7f)));
	_mm256_storeu_si256((__m256i *)out, _mm512_cvtepi32_epi16(v));
}

AVX512_T int
ol_exans_dec_groups_avx512(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, size_t ngroups)
{
	const uint8_t *wp = d->wp;
	__m512i x0 = _mm512_loadu_si512(d->x), x1 = _mm512_loadu_si512(d->x + 16), s0, s1;
	size_t g = 0;
	for (; g < ngroups && d->wend - wp >= 2 * OL_EXANS_LANES + 32; g++) {
		x0 = avx512_step(x0, d->tbl, &wp, &s0);
		x1 = avx512_step(x1, d->tbl, &wp, &s1);
		avx512_store16(out + 64 * g, sm + 32 * g, s0);
		avx512_store16(out + 64 * g + 32, sm + 32 * g + 16, s1);
	}
	_mm512_storeu_si512(d->x, x0);
	_mm512_storeu_si512(d->x + 16, x1);
	d->wp = wp;
	for (; g < ngroups; g++)
		if (ol_exans_dec_lanes(d, out + 64 * g, sm + 32 * g, OL_EXANS_LANES) != 0)
			return -EBADMSG;
	return 0;
}

/* Two blocks in lockstep while both streams have room; the rest one at a time. */
AVX2_T int
ol_exans_dec_groups2_avx2(struct ol_exans_dec *d0, struct ol_exans_dec *d1, uint8_t *o0,
			  uint8_t *o1, const uint8_t *sm0, const uint8_t *sm1, size_t ngroups)
{
	__m256i x[8], s[8];
	const uint8_t *wp0 = d0->wp, *wp1 = d1->wp;
	for (int k = 0; k < 4; k++) {
		x[k] = _mm256_loadu_si256((const __m256i *)(d0->x + 8 * k));
		x[4 + k] = _mm256_loadu_si256((const __m256i *)(d1->x + 8 * k));
	}
	size_t g = 0;
	for (; g < ngroups && d0->wend - wp0 >= 2 * OL_EXANS_LANES + 16 &&
	       d1->wend - wp1 >= 2 * OL_EXANS_LANES + 16;
	     g++) {
		for (int k = 0; k < 4; k++) {
			x[k] = avx2_step(x[k], d0->tbl, &wp0, &s[k]);
			x[4 + k] = avx2_step(x[4 + k], d1->tbl, &wp1, &s[4 + k]);
		}
		avx2_store_group(o0 + 64 * g, sm0 + 32 * g, s);
		avx2_store_group(o1 + 64 * g, sm1 + 32 * g, s + 4);
	}
	for (int k = 0; k < 4; k++) {
		_mm256_storeu_si256((__m256i *)(d0->x + 8 * k), x[k]);
		_mm256_storeu_si256((__m256i *)(d1->x + 8 * k), x[4 + k]);
	}
	d0->wp = wp0;
	d1->wp = wp1;
	if (ol_exans_dec_groups_avx2(d0, o0 + 64 * g, sm0 + 32 * g, ngroups - g) != 0 ||
	    ol_exans_dec_groups_avx2(d1, o1 + 64 * g, sm1 + 32 * g, ngroups - g) != 0)
		return -EBADMSG;
	return 0;
}

AVX512_T int
ol_exans_dec_groups2_avx512(struct ol_exans_dec *d0, struct ol_exans_dec *d1, uint8_t *o0,
			    uint8_t *o1, const uint8_t *sm0, const uint8_t *sm1, size_t ngroups)
{
	const uint8_t *wp0 = d0->wp, *wp1 = d1->wp;
	__m512i a0 = _mm512_loadu_si512(d0->x), a1 = _mm512_loadu_si512(d0->x + 16);
	__m512i b0 = _mm512_loadu_si512(d1->x), b1 = _mm512_loadu_si512(d1->x + 16);
	__m512i sa0, sa1, sb0, sb1;
	size_t g = 0;
	for (; g < ngroups && d0->wend - wp0 >= 2 * OL_EXANS_LANES + 32 &&
	       d1->wend - wp1 >= 2 * OL_EXANS_LANES + 32;
	     g++) {
		a0 = avx512_step(a0, d0->tbl, &wp0, &sa0);
		b0 = avx512_step(b0, d1->tbl, &wp1, &sb0);
		a1 = avx512_step(a1, d0->tbl, &wp0, &sa1);
		b1 = avx512_step(b1, d1->tbl, &wp1, &sb1);
		avx512_store16(o0 + 64 * g, sm0 + 32 * g, sa0);
		avx512_store16(o0 + 64 * g + 32, sm0 + 32 * g + 16, sa1);
		avx512_store16(o1 + 64 * g, sm1 + 32 * g, sb0);
		avx512_store16(o1 + 64 * g + 32, sm1 + 32 * g + 16, sb1);
	}
	_mm512_storeu_si512(d0->x, a0);
	_mm512_storeu_si512(d0->x + 16, a1);
	_mm512_storeu_si512(d1->x, b0);
	_mm512_storeu_si512(d1->x + 16, b1);
	d0->wp = wp0;
	d1->wp = wp1;
	if (ol_exans_dec_groups_avx512(d0, o0 + 64 * g, sm0 + 32 * g, ngroups - g) != 0 ||
	    ol_exans_dec_groups_avx512(d1, o1 + 64 * g, sm1 + 32 * g, ngroups - g) != 0)
		return -EBADMSG;
	return 0;
}

/* One vector of 16 lanes of the encoder (exans.c enc_range, vectorised): its emitted words
 * go below *wpp, lowest lane lowest, as the scalar pushes of lanes 15..0 would put them. */
AVX512_T static inline __m512i
avx512_enc_vec(__m512i x, const uint8_t *src, uint8_t *sm, uint8_t **wpp,
	       const struct ol_exans_enc *e, const __m512i tab[4])
{
	__m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)src));
	__m512i s = _mm512_and_si512(_mm512_srli_epi32(v, 7), _mm512_set1_epi32(0xff));
	__m512i a, b;
	if (e->narrow) {
		__m512i idx = _mm512_sub_epi32(s, _mm512_set1_epi32(e->lo));
		a = _mm512_permutex2var_epi32(tab[0], idx, tab[1]);
		b = _mm512_permutex2var_epi32(tab[2], idx, tab[3]);
	} else {
		a = _mm512_i32gather_epi32(s, (const int *)e->a, 4);
		b = _mm512_i32gather_epi32(s, (const int *)e->b, 4);
	}
	__m512i f = _mm512_and_si512(a, _mm512_set1_epi32(0xfff));
	__mmask16 emit = _mm512_cmpge_epu32_mask(x, _mm512_slli_epi32(f, 19));
	unsigned cnt = (unsigned)__builtin_popcount((unsigned)emit);
	*wpp -= 2 * cnt;
	_mm512_mask_cvtepi32_storeu_epi16(*wpp, (__mmask16)((1u << cnt) - 1),
					  _mm512_maskz_compress_epi32(emit, x));
	x = _mm512_mask_srli_epi32(x, emit, x, 16);
	__m512i pe = _mm512_mul_epu32(x, b); /* q = mulhi(x, rcp) >> shift */
	__m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(b, 32));
	__m512i q = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(pe, 32), po);
	q = _mm512_srlv_epi32(q, _mm512_srli_epi32(a, 25));
	__m512i bias = _mm512_and_si512(_mm512_srli_epi32(a, 12), _mm512_set1_epi32(0x1fff));
	__m512i cmpl = _mm512_sub_epi32(_mm512_set1_epi32(OL_EXANS_PROB_SCALE), f);
	x = _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_mullo_epi32(q, cmpl));
	__m512i smv =
	    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v, 8), _mm512_set1_epi32(0x80)),
			    _mm512_and_si512(v, _mm512_set1_epi32(0x7f)));
	_mm_storeu_si128((__m128i *)sm, _mm512_cvtepi32_epi8(smv));
	return x;
}

AVX512_T int
ol_exans_enc_groups_avx512(struct ol_exans_enc *e, const uint8_t *src, uint8_t *sm, size_t ngroups)
{
	__m512i x0 = _mm512_loadu_si512(e->x), x1 = _mm512_loadu_si512(e->x + 16), tab[4];
	tab[0] = _mm512_loadu_si512(e->a + e->lo);
	tab[1] = _mm512_loadu_si512(e->a + e->lo + 16);
	tab[2] = _mm512_loadu_si512(e->b + e->lo);
	tab[3] = _mm512_loadu_si512(e->b + e->lo + 16);
	uint8_t *wp = e->wp;
	for (size_t g = ngroups; g-- > 0;) {
		if (wp - e->floor < 2 * OL_EXANS_LANES)
			return -ENOSPC;
		const uint8_t *s = src + 2 * OL_EXANS_LANES * g;
		uint8_t *m = sm + OL_EXANS_LANES * g;
		x1 = avx512_enc_vec(x1, s + 32, m + 16, &wp, e, tab); /* lanes 31..16 first */
		x0 = avx512_enc_vec(x0, s, m, &wp, e, tab);
	}
	_mm512_storeu_si512(e->x, x0);
	_mm512_storeu_si512(e->x + 16, x1);
	e->wp = wp;
	return 0;
}

/* 8 lanes of the encoder with AVX2 (see avx512_enc_vec). */
AVX2_T static inline __m256i
avx2_enc_vec(__m256i x, const uint8_t *src, uint8_t **wpp, const struct ol_exans_enc *e)
{
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)src));
	__m256i s = _mm256_and_si256(_mm256_srli_epi32(v, 7), _mm256_set1_epi32(0xff));
	__m256i a = _mm256_i32gather_epi32((const int *)e->a, s, 4);
	__m256i b = _mm256_i32gather_epi32((const int *)e->b, s, 4);
	__m256i f = _mm256_and_si256(a, _mm256_set1_epi32(0xfff));
	/* states and bounds are below 2^31: a signed compare is exact */
	__m256i emit =
	    _mm256_cmpgt_epi32(x, _mm256_sub_epi32(_mm256_slli_epi32(f, 19), _mm256_set1_epi32(1)));
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(emit));
	__m256i w = _mm256_and_si256(x, _mm256_set1_epi32(0xffff));
	w = _mm256_permutevar8x32_epi32(w, _mm256_loadu_si256((const __m256i *)avx2_cperm[m]));
	w = _mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0xd8);
	_mm_storeu_si128((__m128i *)(*wpp - 16), _mm256_castsi256_si128(w));
	*wpp -= 2 * __builtin_popcount(m);
	x = _mm256_blendv_epi8(x, _mm256_srli_epi32(x, 16), emit);
	__m256i pe = _mm256_mul_epu32(x, b);
	__m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(b, 32));
	__m256i q = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xaa);
	q = _mm256_srlv_epi32(q, _mm256_srli_epi32(a, 25));
	__m256i bias = _mm256_and_si256(_mm256_srli_epi32(a, 12), _mm256_set1_epi32(0x1fff));
	__m256i cmpl = _mm256_sub_epi32(_mm256_set1_epi32(OL_EXANS_PROB_SCALE), f);
	return _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_mullo_epi32(q, cmpl));
}

/* sign+mantissa bytes of 32 values. */
AVX2_T static inline void
avx2_sm32(uint8_t *sm, const uint8_t *src)
{
	__m256i r[2];
	for (int k = 0; k < 2; k++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(src + 32 * k));
		r[k] = _mm256_or_si256(
		    _mm256_and_si256(_mm256_srli_epi16(v, 8), _mm256_set1_epi16(0x80)),
		    _mm256_and_si256(v, _mm256_set1_epi16(0x7f)));
	}
	__m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi16(r[0], r[1]), 0xd8);
	_mm256_storeu_si256((__m256i *)sm, p);
}

AVX2_T int
ol_exans_enc_groups_avx2(struct ol_exans_enc *e, const uint8_t *src, uint8_t *sm, size_t ngroups)
{
	__m256i x[4];
	for (int k = 0; k < 4; k++)
		x[k] = _mm256_loadu_si256((const __m256i *)(e->x + 8 * k));
	uint8_t *wp = e->wp;
	for (size_t g = ngroups; g-- > 0;) {
		if (wp - e->floor < 2 * OL_EXANS_LANES)
			return -ENOSPC; /* each vector below stores 16 bytes under wp */
		const uint8_t *s = src + 2 * OL_EXANS_LANES * g;
		for (int k = 3; k >= 0; k--) /* lanes 31..0 */
			x[k] = avx2_enc_vec(x[k], s + 16 * k, &wp, e);
		avx2_sm32(sm + OL_EXANS_LANES * g, s);
	}
	for (int k = 0; k < 4; k++)
		_mm256_storeu_si256((__m256i *)(e->x + 8 * k), x[k]);
	e->wp = wp;
	return 0;
}
