/* store/version.c - S3 versioning in the engine: the versions index (OL_META_VERSIONS), version
 * ids, delete markers, removal of one version, and the version iterator.
 *
 * Every version of a key written in a versioned bucket has a record under
 *   bucket '\0' key '\0' ~mtime (BE64) vid[16]
 * (the key part is the object index key, long keys as head + hash), so a key's versions are
 * one range, newest first, and a bucket's versions are one ordered range scan. The current
 * version also stays in OL_META_OBJECTS, with the same commit protocol (prev) as before: a
 * crash between drives leaves the old or the new current, and each drive's versions index is
 * changed in the same LMDB txn as its current record. A version id is "null" (records without
 * OL_REC_VERSIONED) or the hex of ~mtime and vid: a point lookup needs no scan. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

size_t
ol_vkey(char *buf, const void *okey, size_t okl, int64_t mtime, const uint8_t *vid)
{
	uint64_t inv = ~(uint64_t)mtime;

	memcpy(buf, okey, okl);
	buf[okl] = 0;
	for (int i = 0; i < 8; i++)
		buf[okl + 1 + i] = (char)(uint8_t)(inv >> (56 - 8 * i));
	memcpy(buf + okl + 9, vid, OL_UUID);
	return okl + OL_VSUFFIX;
}

void
ol_ver_id_raw(uint16_t flags, int64_t mtime, const uint8_t *vid, char *out)
{
	static const char hx[] = "0123456789abcdef";
	uint8_t raw[8 + OL_UUID];
	uint64_t inv = ~(uint64_t)mtime;

	if (!(flags & OL_REC_VERSIONED)) {
		memcpy(out, "null", 5);
		return;
	}
	for (int i = 0; i < 8; i++)
		raw[i] = (uint8_t)(inv >> (56 - 8 * i));
	memcpy(raw + 8, vid, OL_UUID);
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hx[raw[i] >> 4];
		out[2 * i + 1] = hx[raw[i] & 15];
	}
	out[OL_STORE_VID_LEN] = 0;
}

void
ol_ver_id(const struct ol_rec *r, char *out)
{
	ol_ver_id_raw(r->flags, r->mtime, r->vid, out);
}

static int
unhex1(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 1: "null"; 0: an id (mtime, vid); -EINVAL: neither. */
static int
parse_id(const char *s, int64_t *mtime, uint8_t *vid)
{
	uint8_t raw[8 + OL_UUID];
	uint64_t inv = 0;

	if (!strcmp(s, "null"))
		return 1;
	if (strlen(s) != OL_STORE_VID_LEN)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(raw); i++) {
		int h = unhex1(s[2 * i]), l = unhex1(s[2 * i + 1]);

		if (h < 0 || l < 0)
			return -EINVAL;
		raw[i] = (uint8_t)(h << 4 | l);
	}
	for (int i = 0; i < 8; i++)
		inv = inv << 8 | raw[i];
	*mtime = (int64_t)~inv;
	memcpy(vid, raw + 8, OL_UUID);
	return 0;
}

int
ol_ver_parse(const char *id, int64_t *mtime, uint8_t *vid)
{
	return parse_id(id, mtime, vid);
}

/* An entry of the versions db belongs to object index key ok (not to a longer key). */
static bool
of_key(const void *k, size_t kl, const void *ok, size_t okl)
{
	return kl == okl + OL_VSUFFIX && !memcmp(k, ok, okl) && ((const char *)k)[okl] == 0;
}

/* Does object index key okey have any version in this drive's versions index? */
bool
ol_ver_has(struct ol_meta_txn *t, const void *okey, size_t okl)
{
	char pre[OL_KEYBUF + 1];
	struct ol_meta_cursor *cur;
	const void *k, *v;
	size_t kl, vl;
	bool has = true; /* when in doubt, keep the data */

	if (ol_meta_cursor_open(t, OL_META_VERSIONS, &cur))
		return true;
	memcpy(pre, okey, okl);
	pre[okl] = 0;
	switch (ol_meta_cursor_seek(cur, pre, okl + 1, &k, &kl, &v, &vl)) {
	case 1:
		has = kl == okl + OL_VSUFFIX && !memcmp(k, pre, okl + 1);
		break;
	case 0:
		has = false;
		break;
	}
	ol_meta_cursor_close(cur);
	return has;
}

/* Remove key c->k's null versions from drive d's versions index (into gone); *seen when one
 * of them is version v. */
static int
drop_nulls(struct ol_meta_txn *t, struct ol_commit *c, int d, const struct ol_rec *v, bool *seen)
{
	char pre[OL_KEYBUF + OL_VSUFFIX];
	struct ol_meta_cursor *cur;
	const void *k, *val;
	size_t kl, vl;
	int rc = ol_meta_cursor_open(t, OL_META_VERSIONS, &cur);
	bool again = true;

	if (rc)
		return rc;
	memcpy(pre, c->k, c->kl);
	pre[c->kl] = 0;
	while (again && !rc) {
		again = false;
		for (rc = ol_meta_cursor_seek(cur, pre, c->kl + 1, &k, &kl, &val, &vl);
		     rc == 1 && kl >= c->kl + 1 && !memcmp(k, pre, c->kl + 1);
		     rc = ol_meta_cursor_next(cur, &k, &kl, &val, &vl)) {
			struct ol_rec r;

			if (kl != c->kl + OL_VSUFFIX || ol_rec_decode(val, vl, &r) ||
			    (r.flags & OL_REC_VERSIONED))
				continue;
			if (v && !memcmp(r.vid, v->vid, OL_UUID))
				*seen = true;
			ol_commit_gone(c, d, val, vl);
			rc = ol_meta_cursor_del(cur);
			again = !rc;
			break;
		}
		if (rc == 1)
			rc = 0;
	}
	ol_meta_cursor_close(cur);
	return rc < 0 ? rc : 0;
}

static int
put_version(struct ol_meta_txn *t, const struct ol_commit *c, const void *raw, size_t len)
{
	char vk[OL_KEYBUF + OL_VSUFFIX];
	struct ol_rec r;

	if (ol_rec_decode(raw, len, &r))
		return -EINVAL;
	return ol_meta_put(t, OL_META_VERSIONS, vk, ol_vkey(vk, c->k, c->kl, r.mtime, r.vid), raw,
			   len);
}

int
ol_ver_apply(struct ol_meta_txn *t, struct ol_commit *c, int d, const uint8_t *rec, size_t rl,
	     const uint8_t *strip, size_t sl)
{
	struct ol_rec v;
	bool have_v = strip && !ol_rec_decode(strip, sl, &v), seen = false;
	uint8_t *mine;
	size_t ml;
	int rc = 0;

	if (c->vmode == OL_STORE_VER_SUSP)
		rc = drop_nulls(t, c, d, have_v ? &v : NULL, &seen);
	if (!rc && have_v && ((v.flags & OL_REC_VERSIONED) || c->vmode == OL_STORE_VER_ON))
		rc = put_version(t, c, strip, sl); /* kept (and a pre-versioning one indexed) */
	else if (!rc && have_v && !seen)
		ol_commit_gone(c, d, strip, sl); /* the null version replaced: reclaimed */
	mine = ol_rec_strip(rec, rl, &ml);
	if (!rc)
		rc = mine ? put_version(t, c, mine, ml) : -EINVAL;
	free(mine);
	/* the replaced records stay (as versions) or went to gone: never reclaim old[] */
	free(c->old[d]);
	c->old[d] = NULL;
	c->old_len[d] = 0;
	return rc;
}

int
ol_ver_del_one(struct ol_meta_txn *t, struct ol_commit *c, int d)
{
	const uint8_t *vid = (const uint8_t *)c->vdel_k + c->vdel_kl - OL_UUID;
	char pre[OL_KEYBUF + OL_VSUFFIX];
	struct ol_meta_cursor *cur;
	const void *v, *k;
	size_t vl, kl;
	struct ol_rec r;
	uint8_t *next = NULL;
	size_t nl = 0;
	int rc = 0;

	if (ol_meta_get(t, OL_META_VERSIONS, c->vdel_k, c->vdel_kl, &v, &vl) == 0) {
		ol_commit_gone(c, d, v, vl);
		rc = ol_meta_del(t, OL_META_VERSIONS, c->vdel_k, c->vdel_kl);
	}
	if (rc || ol_meta_get(t, OL_META_OBJECTS, c->k, c->kl, &v, &vl) != 0 ||
	    ol_rec_decode(v, vl, &r) || memcmp(r.vid, vid, OL_UUID))
		return rc == -ENOENT ? 0 : rc;
	/* the current version went: the next newest becomes current (or none is left) */
	rc = ol_meta_cursor_open(t, OL_META_VERSIONS, &cur);
	if (rc)
		return rc;
	memcpy(pre, c->k, c->kl);
	pre[c->kl] = 0;
	rc = ol_meta_cursor_seek(cur, pre, c->kl + 1, &k, &kl, &v, &vl);
	if (rc == 1 && of_key(k, kl, c->k, c->kl)) {
		next = ol_xmalloc(vl);
		memcpy(next, v, vl);
		nl = vl;
	}
	ol_meta_cursor_close(cur);
	if (rc < 0)
		return rc;
	if (next)
		rc = ol_meta_put(t, OL_META_OBJECTS, c->k, c->kl, next, nl);
	else
		rc = ol_meta_del(t, OL_META_OBJECTS, c->k, c->kl);
	free(next);
	return rc == -ENOENT ? 0 : rc;
}

/* The versions index key of version_id of an object (okey): 0 and vk; 1: "null" and no null
 * version is in the versions index (the current record may be one); -ENOENT, -EINVAL. */
static int
locate(struct ol_store *st, const char *okey, size_t okl, const char *version_id, char *vk,
       size_t *vkl)
{
	struct ol_merge m;
	const void *k, *vals[OL_MAX_DRIVES];
	size_t kl, lens[OL_MAX_DRIVES];
	uint8_t vid[OL_UUID];
	int64_t mtime;
	int rc = parse_id(version_id, &mtime, vid);
	char pre[OL_KEYBUF + 1];

	if (rc == 0) {
		*vkl = ol_vkey(vk, okey, okl, mtime, vid);
		return 0;
	}
	if (rc < 0)
		return rc;
	memcpy(pre, okey, okl);
	pre[okl] = 0;
	rc = ol_merge_open(st, OL_META_VERSIONS, pre, okl + 1, &m);
	if (rc)
		return rc;
	rc = 1;
	while (rc == 1 && ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		struct ol_rec win[OL_MAX_DRIVES];
		bool valid[OL_MAX_DRIVES];
		int d;

		if (kl != OL_VSUFFIX - 1 || !ol_rec_resolve(st, vals, lens, win, valid))
			continue;
		for (d = 0; !valid[d]; d++)
			;
		if (win[d].flags & OL_REC_VERSIONED)
			continue;
		memcpy(vk, pre, okl + 1);
		memcpy(vk + okl + 1, k, kl);
		*vkl = okl + 1 + kl;
		rc = 0;
	}
	ol_merge_close(&m);
	return rc;
}

int
ol_store_ver_locate(struct ol_store *st, const char *bucket, const char *key, size_t klen,
		    const char *version_id, char *vk, size_t *vkl)
{
	char okey[OL_KEYBUF];

	if (klen == 0 || klen > OL_STORE_MAX_KEY)
		return -EINVAL;
	return locate(st, okey, ol_okey(okey, bucket, key, klen), version_id, vk, vkl);
}

static void
lock(struct ol_store *st, unsigned li, bool on)
{
	if (on) {
		pthread_rwlock_rdlock(&st->bucket_lock);
		pthread_rwlock_wrlock(&st->obj_rw[li]);
	} else {
		pthread_rwlock_unlock(&st->obj_rw[li]);
		pthread_rwlock_unlock(&st->bucket_lock);
	}
}

/* A delete marker as the current version (lock held). */
static int
add_marker(struct ol_store *st, const char *bucket, const char *key, size_t klen, int vmode,
	   const char *okey, size_t okl, struct ol_obj_info *out)
{
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_commit c = {.db = OL_META_OBJECTS, .k = okey, .kl = okl, .b = b, .vmode = vmode};
	uint8_t vid[OL_UUID], vis[OL_UUID];
	uint16_t flags = OL_REC_INLINE | OL_REC_DELMARK;
	int64_t now = ol_import_cur ? ol_import_cur->mtime : ol_now_ns(st);
	int rc = 0;

	if (vmode == OL_STORE_VER_ON)
		flags |= OL_REC_VERSIONED;
	if (ol_import_cur)
		memcpy(vid, ol_import_cur->vid, OL_UUID);
	else
		ol_uuid(vid);
	for (int d = 0; d < st->n; d++) {
		b[d] = (struct ol_rec_build){
		    .st = st, .flags = flags, .mtime = now, .vid = vid, .etag = "", .idx = d};
		ol_key_tail(&b[d], key, klen);
	}
	rc = ol_bucket_check(st, bucket); /* -EIO undecided: not NoSuchBucket */
	if (rc)
		return rc == -ENOENT ? -ENXIO : rc;
	if (ol_visible_vid(st, OL_META_OBJECTS, okey, okl, vis))
		c.prev_vid = vis;
	if (ol_commit_all(st, &c) < st->w)
		rc = ol_commit_err(&c);
	else
		ol_commit_reclaim(st, &c, NULL);
	ol_commit_free(&c);
	if (!rc && out) {
		memset(out, 0, sizeof(*out));
		out->mtime_ns = now;
		out->delete_marker = 1;
		ol_ver_id_raw(flags, now, vid, out->version_id);
	}
	return rc;
}

/* Remove version vk for good (lock held). */
static int
drop_version(struct ol_store *st, const char *okey, size_t okl, const char *vk, size_t vkl,
	     struct ol_obj_info *out)
{
	struct ol_commit c = {
	    .db = OL_META_OBJECTS, .k = okey, .kl = okl, .vdel_k = vk, .vdel_kl = vkl};
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES], any = false;
	int rc = 0, d;

	ol_reads_get(st, OL_META_VERSIONS, vk, vkl, NULL, &r);
	for (d = 0; d < st->n; d++)
		any |= r.raw[d] != NULL;
	if (!ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid))
		rc = -ENOENT;
	else if (out) {
		for (d = 0; !valid[d]; d++)
			;
		ol_rec_info(&win[d], out);
		out->meta = NULL;
		out->meta_len = 0;
	}
	/* also a version on fewer than k drives (a write cut short) goes */
	if (any && ol_commit_all(st, &c) < st->w)
		rc = ol_commit_err(&c);
	else if (any)
		ol_commit_reclaim(st, &c, NULL);
	ol_reads_free(&r);
	ol_commit_free(&c);
	return rc;
}

int
ol_set_delete_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  int vmode, const char *version_id, struct ol_obj_info *out)
{
	char okey[OL_KEYBUF], vk[OL_KEYBUF + OL_VSUFFIX];
	size_t okl, vkl;
	unsigned li;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if (key_len == 0 || key_len > OL_STORE_MAX_KEY)
		return -EINVAL;
	if (!version_id && vmode == OL_STORE_VER_OFF)
		return ol_set_delete(st, bucket, key, key_len);
	okl = ol_okey(okey, bucket, key, key_len);
	li = ol_lock_idx(bucket, key, key_len);
	lock(st, li, true);
	if (!version_id) {
		rc = add_marker(st, bucket, key, key_len, vmode, okey, okl, out);
		lock(st, li, false);
		return rc;
	}
	rc = locate(st, okey, okl, version_id, vk, &vkl);
	if (rc == 0)
		rc = drop_version(st, okey, okl, vk, vkl, out);
	lock(st, li, false);
	if (rc == 1) { /* "null": the current record, written before versioning, if null */
		struct ol_obj_info cur;

		rc = ol_set_head(st, bucket, key, key_len, &cur, NULL, 0);
		if (rc == 0 && strcmp(cur.version_id, "null"))
			rc = -ENOENT;
		if (rc == 0)
			rc = ol_set_delete(st, bucket, key, key_len);
		if (rc == 0 && out)
			memcpy(out->version_id, "null", 5);
	}
	if (rc == 0 && out)
		out->meta = NULL;
	return rc;
}

static int
with_meta(struct ol_meta_txn *t, const struct ol_commit *c, enum ol_meta_db db, const void *k,
	  size_t kl)
{
	const void *v;
	size_t vl, nl;
	struct ol_rec r;
	uint8_t *n;
	int rc;

	if (ol_meta_get(t, db, k, kl, &v, &vl) || ol_rec_decode(v, vl, &r) ||
	    memcmp(r.vid, c->set_vid, OL_UUID))
		return 0;
	n = ol_rec_with_meta(v, vl, c->set_meta, c->set_meta_len, &nl);
	rc = n ? ol_meta_put(t, db, k, kl, n, nl) : -EINVAL;
	free(n);
	return rc;
}

int
ol_ver_meta_one(struct ol_meta_txn *t, struct ol_commit *c, int d)
{
	int rc = with_meta(t, c, OL_META_OBJECTS, c->k, c->kl);

	(void)d;
	if (!rc && c->set_vk)
		rc = with_meta(t, c, OL_META_VERSIONS, c->set_vk, c->set_vkl);
	return rc;
}

/* The resolved record of index key ik in db into *w (raw kept in r): 0, -ENOENT,
 * OL_STORE_EDELMARK. */
static int
resolve_at(struct ol_store *st, enum ol_meta_db db, const void *ik, size_t ikl, struct ol_reads *r,
	   struct ol_rec *w)
{
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	int d;

	ol_reads_get(st, db, ik, ikl, NULL, r);
	if (!ol_rec_resolve(st, (const void *const *)r->raw, r->len, win, valid))
		return -ENOENT;
	for (d = 0; !valid[d]; d++)
		;
	*w = win[d];
	return (w->flags & OL_REC_DELMARK) ? OL_STORE_EDELMARK : 0;
}

int
ol_set_set_meta(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		const char *version_id, int64_t expect_mtime, const void *meta, size_t meta_len)
{
	char okey[OL_KEYBUF], vk[OL_KEYBUF + OL_VSUFFIX];
	struct ol_commit c = {.db = OL_META_OBJECTS, .k = okey, .set_meta = meta};
	struct ol_reads r = {0};
	struct ol_rec w;
	uint8_t vid[OL_UUID];
	size_t vkl = 0;
	unsigned li;
	int rc;

	if (key_len == 0 || key_len > OL_STORE_MAX_KEY || meta_len > OL_STORE_MAX_META)
		return -EINVAL;
	rc = ol_bucket_check(st, bucket); /* -EIO undecided: not NoSuchBucket */
	if (rc)
		return rc == -ENOENT ? -ENXIO : rc;
	c.kl = ol_okey(okey, bucket, key, key_len);
	c.set_meta_len = (uint32_t)meta_len;
	li = ol_lock_idx(bucket, key, key_len);
	lock(st, li, true);
	rc = version_id ? locate(st, okey, c.kl, version_id, vk, &vkl) : 1;
	if (rc == 0) {
		rc = resolve_at(st, OL_META_VERSIONS, vk, vkl, &r, &w);
	} else if (rc == 1) { /* the current record (for "null": if it is the null one) */
		rc = resolve_at(st, OL_META_OBJECTS, okey, c.kl, &r, &w);
		if (rc == 0 && version_id && (w.flags & OL_REC_VERSIONED))
			rc = -ENOENT;
		if (rc == 0)
			vkl = ol_vkey(vk, okey, c.kl, w.mtime, w.vid);
	}
	if (rc == 0 && expect_mtime && w.mtime != expect_mtime)
		rc = -ECANCELED; /* replaced since the caller read it (under the key's lock) */
	if (rc == 0) {
		memcpy(vid, w.vid, OL_UUID);
		c.set_vid = vid;
		c.set_vk = vk;
		c.set_vkl = vkl;
		if (ol_commit_all(st, &c) < st->w)
			rc = ol_commit_err(&c);
	}
	lock(st, li, false);
	ol_reads_free(&r);
	ol_commit_free(&c);
	return rc;
}

/* ---- the version iterator: the current records (ol_iter, delete markers included) merged
 * with the versions index; a key's current version comes first (is_latest), then its other
 * versions newest first. A version written before versioning is only current. ---- */

struct ol_viter {
	struct ol_kmerge *km; /* a version iterator over several sets (sets.c): only this used */
	struct ol_store *st;
	struct ol_iter *cur;
	struct ol_merge m;
	size_t plen; /* bucket '\0' */
	/* lookahead of each stream */
	int c_ok, v_ok;
	const char *c_key;
	size_t c_kl;
	struct ol_obj_info c_info;
	char v_key[OL_STORE_MAX_KEY];
	size_t v_kl;
	struct ol_obj_info v_info;
	/* the key being returned */
	char key[OL_STORE_MAX_KEY];
	size_t kl;
	bool in_key, latest_given;
	char latest_id[OL_STORE_VID_MAX];
};

struct ol_viter *
ol_viter_shell(struct ol_kmerge *km)
{
	struct ol_viter *it = ol_xcalloc(1, sizeof(*it));

	it->km = km;
	return it;
}

struct ol_kmerge *
ol_viter_km(const struct ol_viter *it)
{
	return it->km;
}

/* The next versions entry with a quorum: its full key and info. */
static int
v_fetch(struct ol_viter *it)
{
	const void *k, *vals[OL_MAX_DRIVES];
	size_t kl, lens[OL_MAX_DRIVES];

	while (ol_merge_next(&it->m, &k, &kl, vals, lens) == 1) {
		struct ol_rec win[OL_MAX_DRIVES];
		bool valid[OL_MAX_DRIVES];
		size_t hl;
		int d;

		if (kl < OL_VSUFFIX || !ol_rec_resolve(it->st, vals, lens, win, valid))
			continue;
		for (d = 0; !valid[d]; d++)
			;
		hl = kl - OL_VSUFFIX;
		if (hl > OL_KEY_HEAD) {
			memcpy(it->v_key, k, OL_KEY_HEAD);
			memcpy(it->v_key + OL_KEY_HEAD, win[d].tail, win[d].tail_len);
			it->v_kl = OL_KEY_HEAD + win[d].tail_len;
		} else {
			memcpy(it->v_key, k, hl);
			it->v_kl = hl;
		}
		ol_rec_info(&win[d], &it->v_info);
		return 1;
	}
	return 0;
}

static int
c_fetch(struct ol_viter *it)
{
	int rc = ol_set_iter_next(it->cur, &it->c_key, &it->c_kl, &it->c_info);

	return rc == 1;
}

int
ol_set_viter_open(struct ol_store *st, const char *bucket, struct ol_viter **out)
{
	struct ol_viter *it;
	char pre[OL_KEYBUF];
	int rc;

	it = ol_xcalloc(1, sizeof(*it));
	it->st = st;
	rc = ol_set_iter_open(st, bucket, &it->cur);
	if (rc) {
		free(it);
		return rc;
	}
	ol_iter_markers(it->cur);
	it->plen = ol_okey(pre, bucket, "", 0);
	rc = ol_merge_open(st, OL_META_VERSIONS, pre, it->plen, &it->m);
	if (rc) {
		ol_set_iter_close(it->cur);
		free(it);
		return rc;
	}
	it->c_ok = c_fetch(it);
	it->v_ok = v_fetch(it);
	*out = it;
	return 0;
}

int
ol_set_viter_seek(struct ol_viter *it, const char *key, size_t key_len)
{
	int rc = ol_set_iter_seek(it->cur, key, key_len);

	if (rc)
		return rc;
	ol_merge_seek(&it->m, key, key_len < OL_KEY_HEAD ? key_len : OL_KEY_HEAD);
	it->in_key = false;
	it->c_ok = c_fetch(it);
	it->v_ok = v_fetch(it);
	/* long keys share a head: drop versions of keys below the target */
	while (it->v_ok) {
		int c = memcmp(it->v_key, key, it->v_kl < key_len ? it->v_kl : key_len);

		if (c > 0 || (c == 0 && it->v_kl >= key_len))
			break;
		it->v_ok = v_fetch(it);
	}
	return 0;
}

static int
kcmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

int
ol_set_viter_next(struct ol_viter *it, const char **key, size_t *key_len, struct ol_obj_info *info)
{
	for (;;) {
		if (it->in_key && it->v_ok && !kcmp(it->v_key, it->v_kl, it->key, it->kl)) {
			*info = it->v_info;
			it->v_ok = v_fetch(it);
			if (it->latest_given && !strcmp(info->version_id, it->latest_id))
				continue; /* the current one, already given */
			info->is_latest = !it->latest_given;
			it->latest_given = true;
			*key = it->key;
			*key_len = it->kl;
			return 1;
		}
		it->in_key = false;
		if (!it->c_ok && !it->v_ok)
			return 0;
		if (it->c_ok &&
		    (!it->v_ok || kcmp(it->c_key, it->c_kl, it->v_key, it->v_kl) <= 0)) {
			memcpy(it->key, it->c_key, it->c_kl);
			it->kl = it->c_kl;
			it->in_key = true;
			*info = it->c_info;
			info->is_latest = 1;
			it->latest_given = true;
			memcpy(it->latest_id, info->version_id, OL_STORE_VID_MAX);
			it->c_ok = c_fetch(it);
			*key = it->key;
			*key_len = it->kl;
			return 1;
		}
		memcpy(it->key, it->v_key, it->v_kl);
		it->kl = it->v_kl;
		it->in_key = true;
		it->latest_given = false;
	}
}

void
ol_set_viter_close(struct ol_viter *it)
{
	if (!it)
		return;
	ol_merge_close(&it->m);
	ol_set_iter_close(it->cur);
	free(it);
}
