/* codec/exans_rows.c - block mode 2: exact repeats of earlier rows (e.g. the tokens of a KV
 * page whose values depend on the token only) are stored as 2-byte references; the unique
 * rows go into an ordinary inner block. Opt-in (ol_exans_opts.row_bytes); the encoder then
 * keeps it only when it beats the plain block. */
#include <errno.h>
#include <stdlib.h>

#include "codec/exans.h"
#include "codec/exans_impl.h"

static uint32_t
row_hash(const uint8_t *p, uint32_t R)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (uint32_t i = 0; i < R; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Mark repeats: rep[row] = unique index it repeats, or -1 when new (uid[row] then set).
 * Returns the number of unique rows, or -ENOMEM. */
static long
find_repeats(const uint8_t *src, uint32_t R, uint32_t nrows, int32_t *rep)
{
	size_t hs = 1;
	while (hs < 2 * (size_t)nrows)
		hs <<= 1;
	uint32_t *ht = calloc(hs, sizeof(*ht)), *uid = malloc(nrows * sizeof(*uid));
	long u = -ENOMEM;
	if (!ht || !uid)
		goto out;
	u = 0;
	for (uint32_t row = 0; row < nrows; row++) {
		const uint8_t *p = src + (size_t)row * R;
		size_t slot = row_hash(p, R) & (hs - 1);
		rep[row] = -1;
		for (; ht[slot]; slot = (slot + 1) & (hs - 1)) {
			uint32_t q = ht[slot] - 1;
			if (memcmp(src + (size_t)q * R, p, R) == 0) {
				rep[row] = (int32_t)uid[q];
				break;
			}
		}
		if (rep[row] < 0) {
			ht[slot] = row + 1;
			uid[row] = (uint32_t)u++;
		}
	}
out:
	free(ht);
	free(uid);
	return u;
}

/* Payload [12, size) of a rows block into out (cap bytes). Returns size, 0, or -errno. */
static ssize_t
rows_payload(const uint8_t *src, size_t n, uint32_t R, uint32_t nrows, const int32_t *rep,
	     uint32_t U, uint8_t *out, size_t cap, enum ol_exans_impl impl)
{
	uint32_t nb = (nrows + 7) / 8, nrep = nrows - U, k = 0;
	size_t rem = n - (size_t)nrows * R, m = (size_t)U * R + rem;
	size_t inner_off = OL_EXANS_BHDR_BYTES + 8 + nb + 2 * (size_t)nrep;
	uint8_t *uniq = malloc(m ? m : 1);
	if (!uniq)
		return -ENOMEM;
	if (inner_off + ol_exans_block_bound(m) > cap) {
		free(uniq);
		return 0;
	}
	uint8_t *h = out + OL_EXANS_BHDR_BYTES, *bm = h + 8, *refs = bm + nb;
	h[0] = (uint8_t)R;
	h[1] = (uint8_t)(R >> 8);
	h[2] = h[3] = 0;
	ol_exans_st32(h + 4, U);
	memset(bm, 0, nb);
	for (uint32_t row = 0, u = 0; row < nrows; row++) {
		if (rep[row] >= 0) {
			bm[row >> 3] |= (uint8_t)(1u << (row & 7));
			refs[2 * k] = (uint8_t)rep[row];
			refs[2 * k++ + 1] = (uint8_t)(rep[row] >> 8);
		} else {
			memcpy(uniq + (size_t)u++ * R, src + (size_t)row * R, R);
		}
	}
	memcpy(uniq + (size_t)U * R, src + (size_t)nrows * R, rem);
	ssize_t r = ol_exans_block_encode_impl(uniq, m, out + inner_off, cap - inner_off, impl);
	free(uniq);
	return r < 0 ? r : (ssize_t)inner_off + r;
}

ssize_t
ol_exans_rows_encode(const uint8_t *src, size_t n, uint32_t R, uint8_t *dst, size_t cap,
		     size_t best, enum ol_exans_impl impl)
{
	if (R < 4 || (R & 1) || R > 65535 || n / R < 2 || n / R > 65536)
		return 0;
	uint32_t nrows = (uint32_t)(n / R);
	int32_t *rep = malloc(nrows * sizeof(*rep));
	/* room for the map and an inner block of every row raw: the most it can take */
	size_t tcap =
	    OL_EXANS_BHDR_BYTES + 8 + (nrows + 7) / 8 + 2 * (size_t)nrows + ol_exans_block_bound(n);
	uint8_t *tmp = malloc(tcap);
	ssize_t r = -ENOMEM;
	long U = rep ? find_repeats(src, R, nrows, rep) : -ENOMEM;
	if (U < 0 || !tmp)
		goto out;
	r = 0;
	if ((uint32_t)U == nrows)
		goto out; /* nothing repeats */
	r = rows_payload(src, n, R, nrows, rep, (uint32_t)U, tmp, tcap, impl);
	if (r > 0 && (size_t)r < best && (size_t)r <= cap)
		memcpy(dst + OL_EXANS_BHDR_BYTES, tmp + OL_EXANS_BHDR_BYTES,
		       (size_t)r - OL_EXANS_BHDR_BYTES);
	else if (r > 0)
		r = 0;
out:
	free(rep);
	free(tmp);
	return r;
}

int
ol_exans_rows_decode(const uint8_t *p, size_t n, uint8_t *dst, size_t dlen, enum ol_exans_impl impl)
{
	struct ol_exans_rows r;
	if (ol_exans_rows_parse(p, n, dlen, &r) != 0)
		return -EBADMSG;
	const uint8_t *in = p + r.inner_off, *bm = p + r.bitmap_off, *refs = p + r.refs_off;
	size_t ilen = n - r.inner_off, R = r.R, rem = dlen - (size_t)r.nrows * R;
	size_t m = (size_t)r.U * R + rem;
	if (ilen < OL_EXANS_BHDR_BYTES || in[8] == OL_EXANS_MODE_ROWS ||
	    ol_exans_block_decode(in, ilen, dst, m, impl) != (ssize_t)m)
		return -EBADMSG;
	memmove(dst + (size_t)r.nrows * R, dst + (size_t)r.U * R, rem);
	uint32_t u = r.U, k = r.nrep;
	for (uint32_t row = r.nrows; row-- > 0;) { /* from the top: sources lie below */
		uint32_t from;
		if ((bm[row >> 3] >> (row & 7)) & 1) {
			k--;
			from = (uint32_t)refs[2 * k] | (uint32_t)refs[2 * k + 1] << 8;
		} else {
			from = --u;
		}
		if (from != row)
			memcpy(dst + (size_t)row * R, dst + (size_t)from * R, R);
	}
	return 0;
}
