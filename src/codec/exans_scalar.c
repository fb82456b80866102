/* codec/exans_scalar.c - portable rANS decode kernels (the reference the SIMD paths match). */
#include <errno.h>

#include "codec/exans_impl.h"

static inline uint32_t
dec_one(uint32_t x, uint32_t e)
{
	return ((e >> 8) & 0xfff) * (x >> OL_EXANS_PROB_BITS) + (e >> 20);
}

static inline void
put16(uint8_t *out, uint32_t e, uint8_t sm)
{
	ol_exans_join_rot(out, (uint8_t)e, sm);
}

int
ol_exans_dec_lanes(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, unsigned nl)
{
	for (unsigned l = 0; l < nl; l++) {
		uint32_t x = d->x[l];
		uint32_t e = d->tbl[x & (OL_EXANS_PROB_SCALE - 1)];
		put16(out + 2 * l, e, sm[l]);
		x = dec_one(x, e);
		if (x < OL_EXANS_RANS_L) {
			if (d->wend - d->wp < 2)
				return -EBADMSG;
			x = x << 16 | ol_exans_ld16(d->wp);
			d->wp += 2;
		}
		d->x[l] = x;
	}
	return 0;
}

int
ol_exans_dec_groups_scalar(struct ol_exans_dec *d, uint8_t *out, const uint8_t *sm, size_t ngroups)
{
	const uint32_t *tbl = d->tbl;
	const uint8_t *wp = d->wp;
	uint32_t x[OL_EXANS_LANES];
	memcpy(x, d->x, sizeof(x));
	size_t g = 0;
	for (; g < ngroups && d->wend - wp >= 2 * OL_EXANS_LANES; g++) {
		for (unsigned l = 0; l < OL_EXANS_LANES; l++) {
			size_t i = g * OL_EXANS_LANES + l;
			uint32_t e = tbl[x[l] & (OL_EXANS_PROB_SCALE - 1)];
			put16(out + 2 * i, e, sm[i]);
			uint32_t v = dec_one(x[l], e);
			uint32_t need = v < OL_EXANS_RANS_L; /* unpredictable: no branch */
			uint32_t w = ol_exans_ld16(wp);
			x[l] = v << (need * 16) | (w & (0u - need));
			wp += need * 2;
		}
	}
	memcpy(d->x, x, sizeof(x));
	d->wp = wp;
	for (; g < ngroups; g++) { /* near the end of the stream: check every read */
		size_t i = g * OL_EXANS_LANES;
		if (ol_exans_dec_lanes(d, out + 2 * i, sm + i, OL_EXANS_LANES) != 0)
			return -EBADMSG;
	}
	return 0;
}
