/* store/record.c - binary records kept in the per-drive index, and the quorum read rule.
 *
 * Version record (object or part), little-endian, crc32c of everything before the last 4
 * bytes at the end:
 *   0 magic "OLv1" | 4 k | 5 p | 6 shard index | 7 checksum alg | 8 flags u16 | 10 tail u16
 *   12 block size u32 | 16 size u64 | 24 mtime ns i64 | 32 version id [16] | 48 n_parts u32
 *   52 etag len | 56 meta len | 60 inline shard len | 64 inline shard crc | 68 prev len
 *   72 parts (n_parts x {uuid[16], size u64, part_no u32}) | etag | meta | inline | key tail
 *   | prev | crc
 * prev is the previous version's record of this drive (without its own prev): it keeps the
 * old version readable until the new one is on a quorum (see docs/storage-format.md). */
#include <errno.h>
#include <isa-l/crc.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/log.h"
#include "store/store_int.h"

#define REC_MAGIC 0x31764c4fu
#define REC_HDR	  72
#define PART_SZ	  28

void
ol_put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

void
ol_put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

uint32_t
ol_get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

uint64_t
ol_get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

uint32_t
ol_crc32c(const void *buf, size_t len, uint32_t seed)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, seed);
}

/* Seeded with the block number, so a block written at the wrong place does not verify. */
uint64_t
ol_block_sum(int ck, const void *buf, size_t len, uint64_t block)
{
	if (ck == OL_CK_XXH3)
		return XXH3_64bits_withSeed(buf, len, block);
	return ol_crc32c(buf, len, 0xffffffffu ^ (uint32_t)block);
}

uint8_t *
ol_rec_encode(const struct ol_rec_build *b, size_t *len)
{
	size_t el = b->etag ? strnlen(b->etag, OL_STORE_ETAG_MAX - 1) : 0;
	size_t n = REC_HDR + (size_t)b->n_parts * PART_SZ + el + b->meta_len + b->inl_len +
		   b->tail_len + b->prev_len + 4;
	uint8_t *r = ol_xcalloc(1, n), *q = r + REC_HDR;

	ol_put_u32(r, REC_MAGIC);
	r[4] = (uint8_t)b->st->k;
	r[5] = (uint8_t)b->st->p;
	r[6] = (uint8_t)b->idx;
	r[7] = (uint8_t)b->st->ck;
	memcpy(r + 8, &b->flags, 2);
	memcpy(r + 10, &b->tail_len, 2);
	ol_put_u32(r + 12, b->st->bs);
	ol_put_u64(r + 16, b->size);
	ol_put_u64(r + 24, (uint64_t)b->mtime);
	memcpy(r + 32, b->vid, OL_UUID);
	ol_put_u32(r + 48, b->n_parts);
	ol_put_u32(r + 52, (uint32_t)el);
	ol_put_u32(r + 56, b->meta_len);
	ol_put_u32(r + 60, b->inl_len);
	ol_put_u32(r + 64, b->inl_len ? ol_crc32c(b->inl, b->inl_len, 0) : 0);
	ol_put_u32(r + 68, b->prev_len);
	for (uint32_t i = 0; i < b->n_parts; i++, q += PART_SZ) {
		memcpy(q, b->parts[i].uuid, OL_UUID);
		ol_put_u64(q + 16, b->parts[i].size);
		ol_put_u32(q + 24, b->parts[i].part_no);
	}
	memcpy(q, b->etag, el);
	q += el;
	if (b->meta_len)
		memcpy(q, b->meta, b->meta_len);
	q += b->meta_len;
	if (b->inl_len)
		memcpy(q, b->inl, b->inl_len);
	q += b->inl_len;
	if (b->tail_len)
		memcpy(q, b->tail, b->tail_len);
	q += b->tail_len;
	if (b->prev_len)
		memcpy(q, b->prev, b->prev_len);
	q += b->prev_len;
	ol_put_u32(q, ol_crc32c(r, n - 4, 0));
	*len = n;
	return r;
}

static int
rec_layout(const uint8_t *p, size_t len, struct ol_rec *r)
{
	uint64_t need;

	if (len < REC_HDR + 4 || ol_get_u32(p) != REC_MAGIC)
		return -EINVAL;
	r->k = p[4];
	r->p = p[5];
	r->idx = p[6];
	r->ck = p[7];
	memcpy(&r->flags, p + 8, 2);
	memcpy(&r->tail_len, p + 10, 2);
	r->bs = ol_get_u32(p + 12);
	r->size = ol_get_u64(p + 16);
	r->mtime = (int64_t)ol_get_u64(p + 24);
	memcpy(r->vid, p + 32, OL_UUID);
	r->n_parts = ol_get_u32(p + 48);
	r->etag_len = ol_get_u32(p + 52);
	r->meta_len = ol_get_u32(p + 56);
	r->inl_len = ol_get_u32(p + 60);
	r->inl_crc = ol_get_u32(p + 64);
	r->prev_len = ol_get_u32(p + 68);
	need = REC_HDR + (uint64_t)r->n_parts * PART_SZ + r->etag_len + r->meta_len + r->inl_len +
	       r->tail_len + r->prev_len + 4;
	if (need != len || r->k == 0 || r->etag_len >= OL_STORE_ETAG_MAX)
		return -EINVAL;
	return 0;
}

/* Decode a record; its checksum checked (check) or not: a prev inside a record whose own
 * checksum held is covered by it. */
static int
rec_decode(const void *buf, size_t len, struct ol_rec *r, bool check)
{
	const uint8_t *p = buf;

	if (rec_layout(p, len, r))
		return -EINVAL;
	if (check && ol_crc32c(p, len - 4, 0) != ol_get_u32(p + len - 4))
		return -EIO;
	r->parts = p + REC_HDR;
	r->etag = (const char *)r->parts + (size_t)r->n_parts * PART_SZ;
	r->meta = (const uint8_t *)r->etag + r->etag_len;
	r->inl = r->meta + r->meta_len;
	r->tail = r->inl + r->inl_len;
	r->prev = r->tail + r->tail_len;
	return 0;
}

int
ol_rec_decode(const void *buf, size_t len, struct ol_rec *r)
{
	return rec_decode(buf, len, r, true);
}

void
ol_rec_part(const struct ol_rec *r, uint32_t i, struct ol_rpart *out)
{
	const uint8_t *q = r->parts + (size_t)i * PART_SZ;

	memcpy(out->uuid, q, OL_UUID);
	out->size = ol_get_u64(q + 16);
	out->part_no = ol_get_u32(q + 24);
}

uint8_t *
ol_rec_strip(const void *buf, size_t len, size_t *out_len)
{
	struct ol_rec r;
	uint8_t *o;
	size_t n;

	if (ol_rec_decode(buf, len, &r))
		return NULL;
	n = len - r.prev_len;
	o = ol_xmalloc(n);
	memcpy(o, buf, n - 4);
	ol_put_u32(o + 68, 0);
	ol_put_u32(o + n - 4, ol_crc32c(o, n - 4, 0));
	*out_len = n;
	return o;
}

uint8_t *
ol_rec_with_meta(const void *buf, size_t len, const void *meta, uint32_t mlen, size_t *out_len)
{
	struct ol_rec r;
	const uint8_t *p = buf;
	size_t at, rest, n;
	uint8_t *o;

	if (ol_rec_decode(buf, len, &r))
		return NULL;
	at = REC_HDR + (size_t)r.n_parts * PART_SZ + r.etag_len;
	rest = len - 4 - at - r.meta_len;
	n = len - r.meta_len + mlen;
	o = ol_xmalloc(n);
	memcpy(o, p, at);
	ol_put_u32(o + 56, mlen);
	if (mlen)
		memcpy(o + at, meta, mlen);
	memcpy(o + at + mlen, p + at + r.meta_len, rest);
	ol_put_u32(o + n - 4, ol_crc32c(o, n - 4, 0));
	*out_len = n;
	return o;
}

static int
newer(const struct ol_rec *a, const struct ol_rec *b)
{
	if (a->mtime != b->mtime)
		return a->mtime > b->mtime;
	return memcmp(a->vid, b->vid, OL_UUID) > 0;
}

/* The records of a set's drives as candidates: c[d][0] drive d's current version, c[d][1] its
 * prev (have[][] says which decoded). */
struct cands {
	struct ol_rec c[OL_MAX_DRIVES][2];
	bool have[OL_MAX_DRIVES][2];
};

/* Decode raw[d] of the n drives into cs; bad[d] (when given) marks a record that did not
 * decode (left out). The count of records present (raw[d] set). */
static int
cands_decode(int n, const void *const *raw, const size_t *lens, struct cands *cs, bool *bad,
	     uint32_t *sound)
{
	int held = 0;

	memset(cs->have, 0, sizeof(cs->have));
	for (int d = 0; d < n; d++) {
		bool known = sound && (*sound >> d & 1); /* its checksum held at a decode before */

		if (bad)
			bad[d] = false;
		if (!raw[d])
			continue;
		held++;
		if (rec_decode(raw[d], lens[d], &cs->c[d][0], !known)) {
			if (bad)
				bad[d] = true;
			continue;
		}
		if (sound)
			*sound |= 1u << d;
		cs->have[d][0] = true;
		cs->have[d][1] =
		    cs->c[d][0].prev_len &&
		    !rec_decode(cs->c[d][0].prev, cs->c[d][0].prev_len, &cs->c[d][1], false);
	}
	return held;
}

/* Drives holding version vid (as current or prev). */
static int
cands_votes(int n, const struct cands *cs, const uint8_t *vid)
{
	int votes = 0;

	for (int e = 0; e < n; e++)
		for (int i = 0; i < 2; i++)
			if (cs->have[e][i] && !memcmp(cs->c[e][i].vid, vid, OL_UUID)) {
				votes++;
				break;
			}
	return votes;
}

/* Is a version newer than best (a current record or a prev) held by so many drives, counting
 * the unanswered ones as holding it, that it may have reached the write quorum: see
 * store_int.h. */
bool
ol_rec_doubt(const struct ol_store *st, const void *const *raw, const size_t *lens,
	     const struct ol_rec *best, int unanswered)
{
	struct cands cs;

	cands_decode(st->n, raw, lens, &cs, NULL, NULL);
	for (int d = 0; d < st->n; d++)
		for (int j = 0; j < 2; j++)
			if (cs.have[d][j] && newer(&cs.c[d][j], best) &&
			    cands_votes(st->n, &cs, cs.c[d][j].vid) + unanswered >= st->w)
				return true;
	return false;
}

int
ol_rec_resolve(const struct ol_store *st, const void *const *raw, const size_t *lens,
	       struct ol_rec *win, bool *valid)
{
	return ol_rec_resolve_sound(st, raw, lens, NULL, win, valid);
}

int
ol_rec_resolve_sound(const struct ol_store *st, const void *const *raw, const size_t *lens,
		     uint32_t *sound, struct ol_rec *win, bool *valid)
{
	struct cands cs;
	struct ol_rec best;
	bool bad[OL_MAX_DRIVES], found = false;

	cands_decode(st->n, raw, lens, &cs, bad, sound);
	for (int d = 0; d < st->n; d++)
		if (bad[d]) /* LMDB writes a value whole: a record failing its checksum means the
			     * drive's index is damaged */
			ol_drive_offline((struct ol_store *)st, d, NULL, true,
					 "a metadata record failed its checksum");
	for (int d = 0; d < st->n; d++)
		for (int j = 0; j < 2; j++) {
			const struct ol_rec *c = &cs.c[d][j];
			int votes;

			if (!cs.have[d][j] || (found && !newer(c, &best)))
				continue;
			votes = cands_votes(st->n, &cs, c->vid);
			if (votes >= st->k && votes >= c->k) {
				best = *c;
				found = true;
			}
		}
	if (!found)
		return 0;
	for (int d = 0; d < st->n; d++) {
		valid[d] = false;
		for (int i = 0; i < 2 && !valid[d]; i++)
			if (cs.have[d][i] && !memcmp(cs.c[d][i].vid, best.vid, OL_UUID)) {
				win[d] = cs.c[d][i];
				valid[d] = true;
			}
	}
	return 1;
}

/* The newest version among the answers so far, when it wins: see store_int.h. */
int
ol_rec_decide(int n, int k, const void *const *raw, const size_t *lens, int pending, int unanswered)
{
	return ol_rec_decide_sound(n, k, raw, lens, pending, unanswered, NULL);
}

int
ol_rec_decide_sound(int n, int k, const void *const *raw, const size_t *lens, int pending,
		    int unanswered, uint32_t *sound)
{
	struct cands cs;
	struct ol_rec best;
	bool bad[OL_MAX_DRIVES], any = false;
	int votes, held = cands_decode(n, raw, lens, &cs, bad, sound);

	for (int d = 0; d < n; d++)
		if (bad[d])
			return OL_DECIDE_WAIT; /* the full read takes that drive out: wait for it */
	if (ol_presence_decide(held, unanswered, k) == OL_DECIDE_ABSENT)
		return OL_DECIDE_ABSENT;
	if (pending >= k)
		return OL_DECIDE_WAIT; /* a version only the unanswered hold could still win */
	for (int d = 0; d < n; d++)
		for (int j = 0; j < 2; j++)
			if (cs.have[d][j] && (!any || newer(&cs.c[d][j], &best))) {
				best = cs.c[d][j];
				any = true;
			}
	votes = any ? cands_votes(n, &cs, best.vid) : 0;
	return any && votes >= k && votes >= best.k ? OL_DECIDE_FOUND : OL_DECIDE_WAIT;
}

size_t
ol_brec_encode(uint8_t out[16], int64_t created)
{
	ol_put_u64(out, (uint64_t)created);
	ol_put_u32(out + 8, 0x31624c4fu);
	ol_put_u32(out + 12, ol_crc32c(out, 12, 0));
	return 16;
}

int
ol_brec_decode(const void *buf, size_t len, int64_t *created)
{
	const uint8_t *p = buf;

	if (len != 16 || ol_get_u32(p + 8) != 0x31624c4fu ||
	    ol_crc32c(p, 12, 0) != ol_get_u32(p + 12))
		return -EIO;
	*created = (int64_t)ol_get_u64(p);
	return 0;
}

/* Upload record: init ns u64 | key len u32 | meta len u32 | key | meta | crc32c. */
uint8_t *
ol_urec_encode(int64_t init, const char *key, size_t klen, const void *meta, size_t mlen,
	       size_t *len)
{
	size_t n = 16 + klen + mlen + 4;
	uint8_t *r = ol_xmalloc(n);

	ol_put_u64(r, (uint64_t)init);
	ol_put_u32(r + 8, (uint32_t)klen);
	ol_put_u32(r + 12, (uint32_t)mlen);
	memcpy(r + 16, key, klen);
	if (mlen)
		memcpy(r + 16 + klen, meta, mlen);
	ol_put_u32(r + n - 4, ol_crc32c(r, n - 4, 0));
	*len = n;
	return r;
}

int
ol_urec_decode(const void *buf, size_t len, int64_t *init, const char **key, size_t *klen,
	       const void **meta, size_t *mlen)
{
	const uint8_t *p = buf;

	if (len < 20)
		return -EIO;
	*klen = ol_get_u32(p + 8);
	*mlen = ol_get_u32(p + 12);
	if (16 + (uint64_t)*klen + *mlen + 4 != len ||
	    ol_crc32c(p, len - 4, 0) != ol_get_u32(p + len - 4))
		return -EIO;
	*init = (int64_t)ol_get_u64(p);
	*key = (const char *)p + 16;
	*meta = p + 16 + *klen;
	return 0;
}
