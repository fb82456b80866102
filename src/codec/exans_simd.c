/* codec/exans_simd.c - AVX2 and AVX-512 rANS decode (target attributes per function, so the
 * build needs no -mavx2; exans.c calls them only when the CPU has the features). They consume
 * words in exactly the scalar order: within a group, lanes 0..31 that need a word take the
 * next ones in lane order. */
#include <errno.h>
#include <immintrin.h>

#include "codec/exans_impl.h"

#define AVX2_T	 __attribute__((target("avx2,popcnt")))
#define AVX512_T __attribute__((target("avx512f,avx2,popcnt")))

/* avx2_cperm[m]: the set lanes of m moved, in order, to the top slots 8-popcount(m)..7 (a
 * right-aligned compress, for the encoder's downward word stack). */
static uint32_t avx2_cperm[256][8];

__attribute__((constructor)) static void
avx2_perm_init(void)
{
	for (int m = 0; m < 256; m++) {
		int k = 0, c = __builtin_popcount((unsigned)m);
		memset(avx2_cperm[m], 0, sizeof(avx2_cperm[m]));
		for (int l = 0; l < 8; l++) {
			if ((m >> l) & 1)
				avx2_cperm[m][8 - c + k++] = (uint32_t)l;
		}
	}
}

/* avx2_wshuf[m]: vpshufb control that, on the 8 words at wp broadcast to both 128-bit
 * halves, puts word k into the low half of lane l if l is the k-th set lane of m, zeros in
 * every other byte (so unset lanes get 0). */
static uint8_t avx2_wshuf[256][32] __attribute__((aligned(32)));

__attribute__((constructor)) static void
avx2_wshuf_init(void)
{
	for (int m = 0; m < 256; m++) {
		int k = 0;
		memset(avx2_wshuf[m], 0x80, sizeof(avx2_wshuf[m]));
		for (int l = 0; l < 8; l++)
			if ((m >> l) & 1) {
				avx2_wshuf[m][4 * l] = (uint8_t)(2 * k);
				avx2_wshuf[m][4 * l + 1] = (uint8_t)(2 * k + 1);
				k++;
			}
	}
}

/* tbl[slot] of 8 lanes with scalar loads: on AMD Zen 4/5 vpgatherdd is microcoded (measured
 * here: one ymm gather every ~13 cycles against ~5 for this), and on Intel parts with the
 * Gather Data Sampling fix it is slow too. */
AVX2_T static inline __m256i
avx2_lookup(const uint32_t *tbl, __m256i slot)
{
	__m128i a = _mm256_castsi256_si128(slot), b = _mm256_extracti128_si256(slot, 1);
	uint64_t q0 = (uint64_t)_mm_cvtsi128_si64(a), q1 = (uint64_t)_mm_extract_epi64(a, 1);
	uint64_t q2 = (uint64_t)_mm_cvtsi128_si64(b), q3 = (uint64_t)_mm_extract_epi64(b, 1);
	__m128i r0 = _mm_cvtsi32_si128((int)tbl[(uint32_t)q0]);
	__m128i r1 = _mm_cvtsi32_si128((int)tbl[(uint32_t)q2]);
	r0 = _mm_insert_epi32(r0, (int)tbl[q0 >> 32], 1);
	r1 = _mm_insert_epi32(r1, (int)tbl[q2 >> 32], 1);
	r0 = _mm_insert_epi32(r0, (int)tbl[(uint32_t)q1], 2);
	r1 = _mm_insert_epi32(r1, (int)tbl[(uint32_t)q3], 2);
	r0 = _mm_insert_epi32(r0, (int)tbl[q1 >> 32], 3);
	r1 = _mm_insert_epi32(r1, (int)tbl[q3 >> 32], 3);
	return _mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1);
}

/* ta[idx] and tb[idx] of 8 lanes (the encoder's two tables), as avx2_lookup. */
AVX2_T static inline void
avx2_lookup2(const uint32_t *ta, const uint32_t *tb, __m256i idx, __m256i *a, __m256i *b)
{
	uint32_t i[8] __attribute__((aligned(32)));
	_mm256_store_si256((__m256i *)i, idx);
	*a = _mm256_setr_epi32((int)ta[i[0]], (int)ta[i[1]], (int)ta[i[2]], (int)ta[i[3]],
			       (int)ta[i[4]], (int)ta[i[5]], (int)ta[i[6]], (int)ta[i[7]]);
	*b = _mm256_setr_epi32((int)tb[i[0]], (int)tb[i[1]], (int)tb[i[2]], (int)tb[i[3]],
			       (int)tb[i[4]], (int)tb[i[5]], (int)tb[i[6]], (int)tb[i[7]]);
}

/* One decode step of 8 lanes. Returns the new states; the table entries go to *e. */
AVX2_T static inline __m256i
avx2_step(__m256i x, const uint32_t *tbl, const uint8_t **wpp, __m256i *e)
{
	const __m256i mask12 = _mm256_set1_epi32(OL_EXANS_PROB_SCALE - 1);
	*e = avx2_lookup(tbl, _mm256_and_si256(x, mask12));
	__m256i f = _mm256_and_si256(_mm256_srli_epi32(*e, 8), mask12);
	x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, OL_EXANS_PROB_BITS)),
			     _mm256_srli_epi32(*e, 20));
	__m256i need = _mm256_cmpgt_epi32(_mm256_set1_epi32(OL_EXANS_RANS_L), x);
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
	__m256i w = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)*wpp));
	w = _mm256_shuffle_epi8(w, _mm256_load_si256((const __m256i *)avx2_wshuf[m]));
	*wpp += 2 * __builtin_popcount(m);
	return _mm256_or_si256(_mm256_blendv_epi8(x, _mm256_slli_epi32(x, 16), need), w);
}

/* BF16 of the 32 values of one group to out (64 bytes), from the table entries of lanes
 * 8k..8k+7 in e[k] (rotated exponent r in the low byte, see exans_impl.h) and the 32
 * sign+mantissa bytes at sm. Works on bytes: lo = m&0x7f | r&0x80, hi = m&0x80 | r&0x7f. */
AVX2_T static inline void
avx2_store_group(uint8_t *out, const uint8_t *sm, const __m256i e[4])
{
	/* byte 0 of dword i of each 128-bit half to byte 4k + i: halves hold values
	 * 0-3,8-11,16-19,24-27 | 4-7,12-15,20-23,28-31 */
	const int b = 0x0c080400, z = -1;
	__m256i r = _mm256_or_si256(
	    _mm256_or_si256(_mm256_shuffle_epi8(e[0], _mm256_setr_epi32(b, z, z, z, b, z, z, z)),
			    _mm256_shuffle_epi8(e[1], _mm256_setr_epi32(z, b, z, z, z, b, z, z))),
	    _mm256_or_si256(_mm256_shuffle_epi8(e[2], _mm256_setr_epi32(z, z, b, z, z, z, b, z)),
			    _mm256_shuffle_epi8(e[3], _mm256_setr_epi32(z, z, z, b, z, z, z, b))));
	/* reorder to values 0-7,16-23 | 8-15,24-31 so that unpacklo/hi_epi8 yield 0-15, 16-31 */
	r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7));
	__m256i m = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)sm), 0xd8);
	__m256i t = _mm256_and_si256(_mm256_xor_si256(m, r), _mm256_set1_epi8(0x7f));
	__m256i lo = _mm256_xor_si256(r, t), hi = _mm256_xor_si256(m, t);
	_mm256_storeu_si256((__m256i *)out, _mm256_unpacklo_epi8(lo, hi));
	_mm256_storeu_si256((__m256i *)(out + 32), _mm256_unpackhi_epi8(lo, hi));
}

/* One group of 32 lanes: 4 steps, then the 64 output bytes. */
AVX2_T static inline void
avx2_group(__m256i x[4], const uint32_t *tbl, const uint8_t **wpp, uint8_t *out, const uint8_t *sm)
{
	__m256i e[4];
	x[0] = avx2_step(x[0], tbl, wpp, &e[0]);
	x[1] = avx2_step(x[1], tbl, wpp, &e[1]);
	x[2] = avx2_step(x[2], tbl, wpp, &e[2]);
	x[3] = avx2_step(x[3], tbl, wpp, &e[3]);
	avx2_store_group(out, sm, e);
}

AVX2_T int
ol_exans_dec_groups_avx2(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, size_t ngroups)
{
	__m256i x[4];
	const uint8_t *wp = d->wp;
	for (int k = 0; k < 4; k++)
		x[k] = _mm256_loadu_si256((const __m256i *)(d->x + 8 * k));
	size_t g = 0;
	/* 32 words is the most one group takes; 16 bytes are loaded per step of 8 lanes */
	for (; g < ngroups && d->wend - wp >= 2 * OL_EXANS_LANES + 16; g++)
		avx2_group(x, d->tbl, &wp, out + 64 * g, sm + 32 * g);
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
	__m512i slot = _mm512_and_si512(x, mask12);
	__m512i e = _mm512_inserti64x4(
	    _mm512_castsi256_si512(avx2_lookup(tbl, _mm512_castsi512_si256(slot))),
	    avx2_lookup(tbl, _mm512_extracti64x4_epi64(slot, 1)), 1);
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

/* 16 values to out (32 bytes): table entries e (rotated exponent in the low byte), sm
 * bytes; byte-wise join as in avx2_store_group. */
AVX512_T static inline void
avx512_store16(uint8_t *out, const uint8_t *sm, __m512i e)
{
	__m128i r = _mm512_cvtepi32_epi8(e);
	__m128i m = _mm_loadu_si128((const __m128i *)sm);
	__m128i t = _mm_and_si128(_mm_xor_si128(m, r), _mm_set1_epi8(0x7f));
	__m128i lo = _mm_xor_si128(r, t), hi = _mm_xor_si128(m, t);
	_mm_storeu_si128((__m128i *)out, _mm_unpacklo_epi8(lo, hi));
	_mm_storeu_si128((__m128i *)(out + 16), _mm_unpackhi_epi8(lo, hi));
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
	__m256i x[4], y[4];
	const uint8_t *wp0 = d0->wp, *wp1 = d1->wp;
	for (int k = 0; k < 4; k++) {
		x[k] = _mm256_loadu_si256((const __m256i *)(d0->x + 8 * k));
		y[k] = _mm256_loadu_si256((const __m256i *)(d1->x + 8 * k));
	}
	size_t g = 0;
	for (; g < ngroups && d0->wend - wp0 >= 2 * OL_EXANS_LANES + 16 &&
	       d1->wend - wp1 >= 2 * OL_EXANS_LANES + 16;
	     g++) {
		avx2_group(x, d0->tbl, &wp0, o0 + 64 * g, sm0 + 32 * g);
		avx2_group(y, d1->tbl, &wp1, o1 + 64 * g, sm1 + 32 * g);
	}
	for (int k = 0; k < 4; k++) {
		_mm256_storeu_si256((__m256i *)(d0->x + 8 * k), x[k]);
		_mm256_storeu_si256((__m256i *)(d1->x + 8 * k), y[k]);
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
		__m256i a0, a1, b0, b1; /* no vpgatherdd: see avx2_lookup */
		avx2_lookup2(e->a, e->b, _mm512_castsi512_si256(s), &a0, &b0);
		avx2_lookup2(e->a, e->b, _mm512_extracti64x4_epi64(s, 1), &a1, &b1);
		a = _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
		b = _mm512_inserti64x4(_mm512_castsi256_si512(b0), b1, 1);
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
	__m256i a, b;
	avx2_lookup2(e->a, e->b, s, &a, &b);
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
