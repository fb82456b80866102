/* store/heal.c - heal on read: a drive that is online but lacks the version a reader
 * resolved (wiped, replaced, or down during the commit) gets the record back; its shard
 * files are then recreated block by block as reads rebuild them (get.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

static int
same_winner(struct ol_store *st, enum ol_meta_db db, const char *okey, size_t kl,
	    const struct ol_rec *w, bool *valid)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	int found, d;

	ol_reads_get(st, db, okey, kl, NULL, &r);
	found = ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid);
	for (d = 0; found && !valid[d]; d++)
		;
	found = found && !memcmp(win[d].vid, w->vid, OL_UUID);
	ol_reads_free(&r);
	return found;
}

/* Inline: shard d of the body (data shards contiguous in body, k x bl). */
static uint8_t *
inline_shard(struct ol_store *st, const struct ol_rec *w, const uint8_t *body, int d, uint32_t *bl)
{
	uint8_t *buf, *sh[OL_EC_MAX_SHARDS];

	*bl = (uint32_t)((w->size + st->k - 1) / st->k);
	buf = ol_xcalloc((size_t)st->n, *bl ? *bl : 1);
	memcpy(buf, body, (size_t)st->k * *bl);
	for (int i = 0; i < st->n; i++)
		sh[i] = buf + (size_t)i * *bl;
	ol_ec_encode(&st->ec, *bl, sh, sh + st->k);
	memmove(buf, sh[d], *bl);
	return buf;
}

/* Is w's prev (the version it replaced) garbage, not a version of a versioned key that
 * lives on? Not when either is a version or any drive holding w lists versions of the key:
 * when in doubt, the files are kept. */
static bool
prev_is_garbage(struct ol_store *st, const bool *valid, const char *okey, size_t kl,
		const struct ol_rec *w)
{
	struct ol_rec pr;

	if (!w->prev_len || (w->flags & OL_REC_VERSIONED) ||
	    ol_rec_decode(w->prev, w->prev_len, &pr) || (pr.flags & OL_REC_VERSIONED) ||
	    !memcmp(pr.vid, w->vid, OL_UUID))
		return false;
	for (int d = 0; d < st->n; d++) {
		struct ol_meta *m = atomic_load(&st->d[d].meta);
		struct ol_meta_txn *t = NULL;
		bool has;

		if (!valid[d] || !m)
			continue;
		if (ol_meta_begin(m, false, &t))
			return false;
		has = ol_ver_has(t, okey, kl);
		ol_meta_abort(t);
		if (has)
			return false;
	}
	return true;
}

static void
heal_drives(struct ol_store *st, enum ol_meta_db db, const char *okey, size_t kl,
	    const struct ol_rec *w, const bool *valid, const uint8_t *body)
{
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rpart *parts = ol_xcalloc(w->n_parts ? w->n_parts : 1, sizeof(*parts));
	uint8_t *shard[OL_MAX_DRIVES] = {NULL};
	bool skip[OL_MAX_DRIVES];
	char etag[OL_STORE_ETAG_MAX];
	struct ol_commit c = {.db = db, .k = okey, .kl = kl, .b = b, .skip = skip};
	int n;

	for (uint32_t i = 0; i < w->n_parts; i++)
		ol_rec_part(w, i, &parts[i]);
	memcpy(etag, w->etag, w->etag_len);
	etag[w->etag_len] = 0;
	for (int d = 0; d < st->n; d++) {
		uint32_t bl = 0;

		skip[d] = valid[d] || !st->d[d].meta;
		if (!skip[d] && (w->flags & OL_REC_INLINE))
			shard[d] = inline_shard(st, w, body, d, &bl);
		b[d] = (struct ol_rec_build){.st = st,
					     .flags = w->flags,
					     .size = w->size,
					     .mtime = w->mtime,
					     .vid = w->vid,
					     .parts = parts,
					     .n_parts = w->n_parts,
					     .etag = etag,
					     .meta = w->meta,
					     .meta_len = w->meta_len,
					     .idx = d,
					     .inl = shard[d],
					     .inl_len = bl,
					     .tail = w->tail,
					     .tail_len = w->tail_len};
	}
	n = ol_commit_all(st, &c);
	if (n > 0) {
		struct ol_rec keep = *w;

		ol_commit_reclaim(st, &c, &keep);
		/* The version w replaced (its prev) is garbage on a drive that gets w only now:
		 * the others dropped its files when w was committed. A drive that kept its old
		 * record has them reclaimed above; one whose index was lost (moved aside, a new
		 * disk) has no record of them, and the sweep cannot tell them from the files of
		 * a live version, since the prev of w names them on k drives. */
		if (db == OL_META_OBJECTS && prev_is_garbage(st, valid, okey, kl, w))
			for (int d = 0; d < st->n; d++)
				if (c.done[d])
					ol_reclaim(st, d, w->prev, w->prev_len, &keep);
		ol_info("store: healed the metadata record of an object on %d drive(s)", n);
	}
	ol_commit_free(&c);
	for (int d = 0; d < st->n; d++)
		free(shard[d]);
	free(parts);
}

void
ol_heal_record(struct ol_store *st, const char *bucket, const char *key, size_t klen,
	       const struct ol_rec *w, const uint8_t *body)
{
	char okey[OL_KEYBUF];
	size_t kl = ol_okey(okey, bucket, key, klen);
	unsigned li = ol_lock_idx(bucket, key, klen);

	ol_heal_record_at(st, OL_META_OBJECTS, okey, kl, li, w, body);
}

void
ol_heal_record_at(struct ol_store *st, enum ol_meta_db db, const char *ik, size_t ikl, unsigned li,
		  const struct ol_rec *w, const uint8_t *body)
{
	bool valid[OL_MAX_DRIVES];

	pthread_rwlock_rdlock(&st->bucket_lock);
	pthread_rwlock_wrlock(&st->obj_rw[li]);
	if (same_winner(st, db, ik, ikl, w, valid))
		heal_drives(st, db, ik, ikl, w, valid, body);
	pthread_rwlock_unlock(&st->obj_rw[li]);
	pthread_rwlock_unlock(&st->bucket_lock);
}
