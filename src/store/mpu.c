/* store/mpu.c - multipart uploads: an upload record plus part records (each part stored
 * erasure-coded like an object); complete writes one object record that lists the parts'
 * shard files, so no data is copied. Abort removes only the upload. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

/* bucket '\0' upload id; parts add '\0' part_no (big-endian, so they sort by number) */
static int
ukey(char *buf, const char *bucket, const char *upload_id)
{
	size_t bl = strlen(bucket);

	if (strlen(upload_id) != 32 || bl > 63)
		return -ENOENT;
	memcpy(buf, bucket, bl + 1);
	memcpy(buf + bl + 1, upload_id, 32);
	return (int)(bl + 33);
}

static size_t
pkey(char *buf, int ul, unsigned part_no)
{
	buf[ul] = 0;
	buf[ul + 1] = (char)(part_no >> 24);
	buf[ul + 2] = (char)(part_no >> 16);
	buf[ul + 3] = (char)(part_no >> 8);
	buf[ul + 4] = (char)part_no;
	return (size_t)ul + 5;
}

/* The upload record agreed by >= k drives: 0, *r owns the bytes. Seen on fewer: -ENOENT when
 * the drives that did not answer could not make k with it (surely gone: NoSuchUpload), else
 * -EIO, undecided (a drive away beside one that missed the upload's commit): the client
 * retries instead of abandoning an upload whose parts are stored. */
static int
upload_read(struct ol_store *st, const char *k, size_t kl, struct ol_reads *r, int *drive)
{
	int votes = 0, rc;

	ol_reads_get(st, OL_META_UPLOADS, k, kl, NULL, r);
	*drive = -1;
	for (int d = 0; d < st->n; d++) {
		int64_t init;
		const char *key;
		size_t klen, mlen;
		const void *meta;

		if (r->raw[d] &&
		    !ol_urec_decode(r->raw[d], r->len[d], &init, &key, &klen, &meta, &mlen)) {
			votes++;
			if (*drive < 0)
				*drive = d;
		}
	}
	if (votes >= st->k)
		return 0;
	rc = votes + st->n - r->answered >= st->k ? -EIO : -ENOENT;
	ol_reads_free(r);
	return rc;
}

int
ol_upload_check(struct ol_store *st, const char *k, size_t kl)
{
	struct ol_reads r;
	int d, rc = upload_read(st, k, kl, &r, &d);

	if (!rc)
		ol_reads_free(&r);
	return rc;
}

int
ol_set_mpu_create(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  const void *meta, size_t meta_len, char upload_id[64])
{
	uint8_t u[OL_UUID], *rec, *raw[OL_MAX_DRIVES];
	size_t len, lens[OL_MAX_DRIVES];
	char k[OL_KEYBUF];
	struct ol_commit c = {.db = OL_META_UPLOADS, .k = k, .raw = raw, .raw_len = lens};
	int rc;

	if (key_len == 0 || key_len > OL_STORE_MAX_KEY || meta_len > OL_STORE_MAX_META)
		return -EINVAL;
	rc = ol_bucket_check(st, bucket); /* -EIO undecided: not NoSuchBucket */
	if (rc)
		return rc;
	ol_uuid(u);
	if (st->upl_tag >= 0) /* a set of several: the id names its set (sets.c) */
		u[0] = (uint8_t)st->upl_tag;
	for (int i = 0; i < OL_UUID; i++)
		snprintf(upload_id + 2 * i, 3, "%02x", u[i]);
	c.kl = (size_t)ukey(k, bucket, upload_id);
	rec = ol_urec_encode(ol_now_ns(st), key, key_len, meta, meta_len, &len);
	for (int d = 0; d < st->n; d++) {
		raw[d] = rec;
		lens[d] = len;
	}
	pthread_rwlock_rdlock(&st->bucket_lock);
	rc = ol_bucket_check(st, bucket);
	if (!rc)
		rc = ol_commit_all(st, &c) >= st->w ? 0 : ol_commit_err(&c);
	pthread_rwlock_unlock(&st->bucket_lock);
	free(rec);
	ol_commit_free(&c);
	return rc;
}

int
ol_set_mpu_part_begin(struct ol_store *st, const char *bucket, const char *upload_id,
		      unsigned part_no, struct ol_put **out)
{
	char k[OL_KEYBUF];
	struct ol_reads r;
	int d, rc, ul = ukey(k, bucket, upload_id);

	if (ul < 0)
		return ul;
	if (part_no < 1 || part_no > OL_STORE_MAX_PARTS)
		return -EINVAL;
	rc = upload_read(st, k, (size_t)ul, &r, &d);
	if (rc)
		return rc;
	ol_reads_free(&r);
	*out = ol_put_new(st, bucket, k, pkey(k, ul, part_no), true);
	ol_put_set_part(*out, upload_id, part_no);
	return 0;
}

/* Calls fn for each part (resolved by quorum), in part order. */
static int
each_part(struct ol_store *st, const char *k, int ul, int (*fn)(const struct ol_rec *r, void *arg),
	  void *arg)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *key;
	size_t lens[OL_MAX_DRIVES], kl;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	char pre[OL_KEYBUF];
	int rc;

	memcpy(pre, k, (size_t)ul);
	pre[ul] = 0;
	rc = ol_merge_open(st, OL_META_PARTS, pre, (size_t)ul + 1, &m);
	while (!rc && ol_merge_next(&m, &key, &kl, vals, lens) == 1) {
		if (kl != 4 || !ol_rec_resolve(st, vals, lens, win, valid))
			continue;
		for (int d = 0; d < st->n; d++)
			if (valid[d]) {
				rc = fn(&win[d], arg);
				break;
			}
	}
	ol_merge_close(&m);
	return rc;
}

struct part_list {
	struct ol_mpu_part *v;
	size_t n;
};

static int
add_part(const struct ol_rec *r, void *arg)
{
	struct part_list *l = arg;
	struct ol_mpu_part *p;
	struct ol_rpart rp;

	if (r->n_parts != 1)
		return 0;
	ol_rec_part(r, 0, &rp);
	l->v = ol_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	p = &l->v[l->n++];
	p->part_no = rp.part_no;
	p->size = r->size;
	p->mtime_ns = r->mtime;
	memcpy(p->etag, r->etag, r->etag_len);
	p->etag[r->etag_len] = 0;
	return 0;
}

int
ol_set_mpu_list_parts(struct ol_store *st, const char *bucket, const char *upload_id,
		      struct ol_mpu_part **parts, size_t *n)
{
	char k[OL_KEYBUF];
	struct ol_reads r;
	struct part_list l = {0};
	int d, rc, ul = ukey(k, bucket, upload_id);

	if (ul < 0)
		return ul;
	rc = upload_read(st, k, (size_t)ul, &r, &d);
	if (rc)
		return rc;
	ol_reads_free(&r);
	rc = each_part(st, k, ul, add_part, &l);
	if (rc) {
		free(l.v);
		return rc;
	}
	*parts = l.v;
	*n = l.n;
	return 0;
}

/* The listed parts, resolved; -EINVAL when one is missing or out of order. */
static int
gather_parts(struct ol_store *st, char *k, int ul, const unsigned *nos, size_t n,
	     struct ol_rpart *out, uint64_t *size)
{
	*size = 0;
	for (size_t i = 0; i < n; i++) {
		struct ol_reads r;
		struct ol_rec win[OL_MAX_DRIVES];
		bool valid[OL_MAX_DRIVES];
		size_t kl = pkey(k, ul, nos[i]);
		int found, d;

		if (i && nos[i] <= nos[i - 1])
			return -EINVAL;
		ol_reads_get(st, OL_META_PARTS, k, kl, NULL, &r);
		found = ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid);
		for (d = 0; found && !valid[d]; d++)
			;
		if (found && win[d].n_parts == 1 && win[d].k == st->k && win[d].bs == st->bs) {
			ol_rec_part(&win[d], 0, &out[i]);
			*size += out[i].size;
		}
		ol_reads_free(&r);
		if (!found)
			return -EINVAL;
	}
	return 0;
}

struct complete {
	struct ol_store *st;
	char uk[OL_KEYBUF];
	int ul;
	const char *key;
	size_t klen;
	const void *meta;
	size_t mlen;
	int vmode;
};

static int
complete_locked(struct complete *x, const unsigned *nos, size_t n, const char *etag,
		struct ol_obj_info *out)
{
	struct ol_store *st = x->st;
	struct ol_rpart *parts = ol_xcalloc(n ? n : 1, sizeof(*parts));
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rec keep;
	char okey[OL_KEYBUF], pre[OL_KEYBUF], pk[OL_KEYBUF];
	struct ol_commit c = {.db = OL_META_OBJECTS,
			      .k = okey,
			      .b = b,
			      .del_key = x->uk,
			      .del_kl = (size_t)x->ul,
			      .del_prefix = pre,
			      .del_plen = (size_t)x->ul + 1};
	uint8_t vid[OL_UUID], vis[OL_UUID], *enc = NULL;
	uint64_t size;
	size_t el;
	int rc;

	memcpy(pk, x->uk, (size_t)x->ul);
	memcpy(pre, x->uk, (size_t)x->ul);
	pre[x->ul] = 0;
	rc = gather_parts(st, pk, x->ul, nos, n, parts, &size);
	if (rc || n == 0)
		goto out;
	c.kl = ol_okey(okey, x->uk, x->key, x->klen);
	if (ol_import_cur)
		memcpy(vid, ol_import_cur->vid, OL_UUID);
	else
		ol_uuid(vid);
	for (int d = 0; d < st->n; d++)
		b[d] = (struct ol_rec_build){.st = st,
					     .flags = OL_REC_MULTIPART,
					     .size = size,
					     .mtime = ol_import_cur ? ol_import_cur->mtime
								    : ol_now_ns(st),
					     .vid = vid,
					     .parts = parts,
					     .n_parts = (uint32_t)n,
					     .etag = etag,
					     .meta = x->meta,
					     .meta_len = (uint32_t)x->mlen,
					     .idx = d};
	for (int d = 0; d < st->n; d++) {
		b[d].mtime = b[0].mtime;
		ol_key_tail(&b[d], x->key, x->klen);
	}
	if (ol_visible_vid(st, OL_META_OBJECTS, okey, c.kl, vis))
		c.prev_vid = vis;
	c.vmode = x->vmode;
	for (int d = 0; d < st->n && x->vmode == OL_STORE_VER_ON; d++)
		b[d].flags |= OL_REC_VERSIONED;
	rc = ol_commit_all(st, &c) >= st->w ? 0 : ol_commit_err(&c);
	enc = ol_rec_encode(&b[0], &el);
	if (!rc && !ol_rec_decode(enc, el, &keep))
		ol_commit_reclaim(st, &c, &keep);
	if (!rc && out) {
		memset(out, 0, sizeof(*out));
		out->size = size;
		out->mtime_ns = b[0].mtime;
		out->n_parts = (unsigned)n;
		snprintf(out->etag, sizeof(out->etag), "%s", etag ? etag : "");
		ol_ver_id_raw(b[0].flags, b[0].mtime, vid, out->version_id);
	}
out:
	if (n == 0 && !rc)
		rc = -EINVAL;
	free(enc);
	free(parts);
	ol_commit_free(&c);
	return rc;
}

int
ol_set_mpu_complete(struct ol_store *st, const char *bucket, const char *upload_id,
		    const unsigned *part_nos, size_t n, const char *final_etag,
		    struct ol_obj_info *out)
{
	return ol_set_mpu_complete_cond(st, bucket, upload_id, part_nos, n, final_etag, NULL, out);
}

int
ol_set_mpu_complete_cond(struct ol_store *st, const char *bucket, const char *upload_id,
			 const unsigned *part_nos, size_t n, const char *final_etag,
			 const struct ol_store_cond *cond, struct ol_obj_info *out)
{
	return ol_set_mpu_complete_ver(st, bucket, upload_id, part_nos, n, final_etag, cond,
				       OL_STORE_VER_OFF, out);
}

int
ol_set_mpu_complete_ver(struct ol_store *st, const char *bucket, const char *upload_id,
			const unsigned *part_nos, size_t n, const char *final_etag,
			const struct ol_store_cond *cond, int vmode, struct ol_obj_info *out)
{
	return ol_set_mpu_complete_meta(st, bucket, upload_id, part_nos, n, final_etag, cond, vmode,
					NULL, 0, out);
}

int
ol_set_mpu_complete_meta(struct ol_store *st, const char *bucket, const char *upload_id,
			 const unsigned *part_nos, size_t n, const char *final_etag,
			 const struct ol_store_cond *cond, int vmode, const void *meta,
			 size_t meta_len, struct ol_obj_info *out)
{
	char okey[OL_KEYBUF];
	struct complete x = {.st = st, .vmode = vmode};
	struct ol_reads r;
	int64_t init;
	unsigned li, ui;
	int d, rc;

	x.ul = ukey(x.uk, bucket, upload_id);
	if (x.ul < 0)
		return x.ul;
	rc = upload_read(st, x.uk, (size_t)x.ul, &r, &d);
	if (rc)
		return rc;
	ol_urec_decode(r.raw[d], r.len[d], &init, &x.key, &x.klen, &x.meta, &x.mlen);
	if (meta) {
		if (meta_len > OL_STORE_MAX_META) {
			ol_reads_free(&r);
			return -EINVAL;
		}
		x.meta = meta;
		x.mlen = meta_len;
	}
	li = ol_lock_idx(bucket, x.key, x.klen);
	ui = ol_lock_idx(bucket, x.uk, (size_t)x.ul);
	pthread_rwlock_rdlock(&st->bucket_lock);
	pthread_rwlock_wrlock(&st->obj_rw[li]);
	pthread_mutex_lock(&st->upl_locks[ui]);
	{
		struct ol_reads again;
		int d2;

		rc = upload_read(st, x.uk, (size_t)x.ul, &again, &d2); /* not completed meanwhile */
		if (!rc) {
			ol_reads_free(&again);
			rc = ol_cond_check(st, okey, ol_okey(okey, bucket, x.key, x.klen), cond);
		}
		if (!rc)
			rc = complete_locked(&x, part_nos, n, final_etag, out);
	}
	pthread_mutex_unlock(&st->upl_locks[ui]);
	pthread_rwlock_unlock(&st->obj_rw[li]);
	pthread_rwlock_unlock(&st->bucket_lock);
	ol_reads_free(&r);
	return rc;
}

int
ol_set_mpu_abort(struct ol_store *st, const char *bucket, const char *upload_id)
{
	char k[OL_KEYBUF], pre[OL_KEYBUF];
	struct ol_reads r;
	struct ol_commit c = {.db = OL_META_UPLOADS, .k = k, .del_prefix = pre};
	int d, rc, ul = ukey(k, bucket, upload_id);
	unsigned ui;

	if (ul < 0)
		return ul;
	c.kl = (size_t)ul;
	memcpy(pre, k, (size_t)ul);
	pre[ul] = 0;
	c.del_plen = (size_t)ul + 1;
	ui = ol_lock_idx(bucket, k, (size_t)ul);
	pthread_mutex_lock(&st->upl_locks[ui]);
	rc = upload_read(st, k, (size_t)ul, &r, &d);
	if (!rc) {
		ol_reads_free(&r);
		rc = ol_commit_all(st, &c) >= st->w ? 0 : ol_commit_err(&c);
	}
	pthread_mutex_unlock(&st->upl_locks[ui]);
	if (!rc)
		ol_commit_reclaim(st, &c, NULL);
	ol_commit_free(&c);
	return rc;
}

struct upl {
	char *key; /* the key, then the metadata blob, in one allocation */
	size_t klen, mlen;
	char id[33];
	int64_t init;
};

static int
upl_cmp(const void *a, const void *b)
{
	const struct upl *x = a, *y = b;
	size_t l = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, l);

	if (!c)
		c = (x->klen > y->klen) - (x->klen < y->klen);
	return c ? c : strcmp(x->id, y->id);
}

static int
collect_uploads(struct ol_store *st, const char *bucket, struct upl **out, size_t *n)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	char pre[80];
	int rc = ol_merge_open(st, OL_META_UPLOADS, pre, ol_okey(pre, bucket, "", 0), &m);

	*out = NULL;
	*n = 0;
	while (!rc && ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		int votes = 0, first = -1;
		struct upl u = {0};
		const char *key;
		const void *meta;
		size_t mlen;

		for (int d = 0; d < st->n; d++)
			if (vals[d] && !ol_urec_decode(vals[d], lens[d], &u.init, &key, &u.klen,
						       &meta, &mlen)) {
				votes++;
				first = first < 0 ? d : first;
			}
		if (votes < st->k || kl != 32)
			continue;
		ol_urec_decode(vals[first], lens[first], &u.init, &key, &u.klen, &meta, &mlen);
		u.key = ol_xmalloc(u.klen + mlen + 1);
		memcpy(u.key, key, u.klen);
		memcpy(u.key + u.klen, meta, mlen);
		u.mlen = mlen;
		memcpy(u.id, k, 32);
		*out = ol_xrealloc(*out, (*n + 1) * sizeof(**out));
		(*out)[(*n)++] = u;
	}
	ol_merge_close(&m);
	return rc;
}

int
ol_set_mpu_list(struct ol_store *st, const char *bucket, ol_store_mpu_cb cb, void *arg)
{
	struct upl *v;
	size_t n;
	int rc;

	rc = ol_bucket_check(st, bucket); /* -EIO undecided: not NoSuchBucket */
	if (rc)
		return rc;
	rc = collect_uploads(st, bucket, &v, &n);
	if (!rc && n)
		qsort(v, n, sizeof(*v), upl_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = cb(v[i].key, v[i].klen, v[i].id, v[i].init, v[i].key + v[i].klen,
				v[i].mlen, arg);
		free(v[i].key);
	}
	free(v);
	return rc;
}

int
ol_set_mpu_stat(struct ol_store *st, const char *bucket, const char *upload_id, char *key,
		size_t *key_len, void *meta_buf, size_t meta_cap, size_t *meta_len)
{
	char k[OL_KEYBUF];
	struct ol_reads r;
	int64_t init;
	const char *kp;
	const void *mp;
	int d, rc, ul = ukey(k, bucket, upload_id);

	if (ul < 0)
		return ul;
	rc = upload_read(st, k, (size_t)ul, &r, &d);
	if (rc)
		return rc;
	ol_urec_decode(r.raw[d], r.len[d], &init, &kp, key_len, &mp, meta_len);
	memcpy(key, kp, *key_len);
	if (meta_buf)
		memcpy(meta_buf, mp, *meta_len < meta_cap ? *meta_len : meta_cap);
	ol_reads_free(&r);
	return 0;
}
