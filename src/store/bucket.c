/* store/bucket.c - bucket records, replicated on every drive like object records.
 *
 * Record v1 (16 bytes): created ns u64 | magic "OLb1" u32 | crc32c u32.
 * Record v2: created ns u64 | magic "OLb2" u32 | updated ns u64 | attrs len u32 | attrs |
 * crc32c u32 over all before. attrs is the caller's opaque blob (S3: owner, ACL, policy).
 * A v1 record reads as a bucket with no attrs. Of the records that decode, the one updated
 * last wins (an attrs change commits on a write quorum). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

#define BREC2_MAGIC 0x32624c4fu
#define BREC2_HDR   24

static uint8_t *
brec2_encode(int64_t created, int64_t updated, const void *attrs, size_t alen, size_t *len)
{
	size_t n = BREC2_HDR + alen + 4;
	uint8_t *r = ol_xmalloc(n);

	ol_put_u64(r, (uint64_t)created);
	ol_put_u32(r + 8, BREC2_MAGIC);
	ol_put_u64(r + 12, (uint64_t)updated);
	ol_put_u32(r + 20, (uint32_t)alen);
	if (alen)
		memcpy(r + BREC2_HDR, attrs, alen);
	ol_put_u32(r + n - 4, ol_crc32c(r, n - 4, 0));
	*len = n;
	return r;
}

/* Either version: 0 with created, updated (v1: created) and attrs (v1: none), or -EIO. */
static int
brec_decode_any(const void *buf, size_t len, int64_t *created, int64_t *updated,
		const uint8_t **attrs, size_t *alen)
{
	const uint8_t *p = buf;

	*attrs = NULL;
	*alen = 0;
	if (len == 16) {
		if (ol_brec_decode(buf, len, created) < 0)
			return -EIO;
		*updated = *created;
		return 0;
	}
	if (len < BREC2_HDR + 4 || ol_get_u32(p + 8) != BREC2_MAGIC ||
	    ol_get_u32(p + 20) != len - BREC2_HDR - 4 ||
	    ol_crc32c(p, len - 4, 0) != ol_get_u32(p + len - 4))
		return -EIO;
	*created = (int64_t)ol_get_u64(p);
	*updated = (int64_t)ol_get_u64(p + 12);
	*attrs = p + BREC2_HDR;
	*alen = len - BREC2_HDR - 4;
	return 0;
}

int
ol_brec_check(const void *buf, size_t len)
{
	int64_t c, u;
	const uint8_t *a;
	size_t al;

	return brec_decode_any(buf, len, &c, &u, &a, &al);
}

static int
bucket_write(struct ol_store *st, const char *bucket, bool del, int64_t created, const void *attrs,
	     size_t alen)
{
	uint8_t *raw[OL_MAX_DRIVES];
	size_t len[OL_MAX_DRIVES], rl = 0;
	struct ol_commit c = {.db = OL_META_BUCKETS, .k = bucket, .kl = strlen(bucket)};
	uint8_t *rec = NULL;
	int ok;

	if (!del) {
		rec = brec2_encode(created ? created : ol_now_ns(st), ol_now_ns(st), attrs, alen,
				   &rl);
		for (int d = 0; d < st->n; d++) {
			raw[d] = rec;
			len[d] = rl;
		}
		c.raw = raw;
		c.raw_len = len;
	}
	ok = ol_commit_all(st, &c);
	ok = ok >= st->w ? 0 : ol_commit_err(&c);
	ol_commit_free(&c);
	free(rec);
	return ok;
}

int
ol_set_bucket_create_attrs(struct ol_store *st, const char *bucket, const void *attrs, size_t len)
{
	int rc;

	if (!bucket[0] || strlen(bucket) > 63 || len > OL_STORE_MAX_BATTRS)
		return -EINVAL;
	pthread_rwlock_wrlock(&st->bucket_lock);
	/* Written only when surely absent. Undecided (-EIO: the record on some of the drives
	 * that answered, too few answered to tell) is answered as is, a 503 the client retries:
	 * writing would replace the created time and the attrs (owner, ACL, policy) of a bucket
	 * that may well exist on the drives away, and -EEXIST (BucketAlreadyExists or
	 * AlreadyOwnedByYou) would claim what no quorum has said. */
	rc = ol_bucket_check(st, bucket);
	if (rc == 0)
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = bucket_write(st, bucket, false, 0, attrs, len);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

int
ol_set_bucket_copy(struct ol_store *st, const char *bucket, int64_t created, const void *attrs,
		   size_t len)
{
	int rc;

	if (!bucket[0] || strlen(bucket) > 63 || len > OL_STORE_MAX_BATTRS)
		return -EINVAL;
	pthread_rwlock_wrlock(&st->bucket_lock);
	rc = bucket_write(st, bucket, false, created, attrs, len);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

int
ol_set_bucket_create(struct ol_store *st, const char *bucket)
{
	return ol_set_bucket_create_attrs(st, bucket, NULL, 0);
}

static int
has_upload(const char *key, size_t key_len, const char *upload_id, int64_t init_ns,
	   const void *meta, size_t meta_len, void *arg)
{
	return 1;
}

/* Any version or delete marker keeps a versioned bucket. */
static int
versions_left(struct ol_store *st, const char *bucket)
{
	struct ol_merge m;
	char pre[OL_KEYBUF];
	const void *k, *vals[OL_MAX_DRIVES];
	size_t kl, lens[OL_MAX_DRIVES];
	int rc = ol_merge_open(st, OL_META_VERSIONS, pre, ol_okey(pre, bucket, "", 0), &m);

	if (rc)
		return rc;
	rc = 0;
	while (!rc && ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		struct ol_rec win[OL_MAX_DRIVES];
		bool valid[OL_MAX_DRIVES];

		/* a version on fewer than k drives (a write cut short) is no version */
		if (ol_rec_resolve(st, vals, lens, win, valid))
			rc = -ENOTEMPTY;
	}
	ol_merge_close(&m);
	return rc;
}

int
ol_set_bucket_empty(struct ol_store *st, const char *bucket)
{
	struct ol_iter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	int rc = ol_set_iter_open(st, bucket, &it);

	if (rc)
		return rc;
	rc = ol_set_iter_next(it, &k, &kl, &info);
	ol_set_iter_close(it);
	if (rc)
		return rc < 0 ? rc : -ENOTEMPTY;
	rc = versions_left(st, bucket);
	if (rc)
		return rc;
	rc = ol_set_mpu_list(st, bucket, has_upload, NULL);
	return rc == 1 ? -ENOTEMPTY : rc;
}

int
ol_set_bucket_delete(struct ol_store *st, const char *bucket)
{
	int rc;

	pthread_rwlock_wrlock(&st->bucket_lock);
	/* -ENOENT only when surely gone; undecided (-EIO) deletes nothing on a minority */
	rc = ol_bucket_check(st, bucket);
	if (!rc)
		rc = ol_set_bucket_empty(st, bucket);
	if (!rc)
		rc = bucket_write(st, bucket, true, 0, NULL, 0);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

/* The winning record of >= k decodable ones: created (oldest), attrs of the newest update. */
struct bvote {
	int64_t created, updated;
	const uint8_t *attrs;
	size_t alen;
};

static int
bucket_votes(struct ol_store *st, const void *const *vals, const size_t *lens, struct bvote *v)
{
	int votes = 0;

	for (int d = 0; d < st->n; d++) {
		int64_t c, u;
		const uint8_t *a;
		size_t al;

		if (!vals[d] || brec_decode_any(vals[d], lens[d], &c, &u, &a, &al) < 0)
			continue;
		if (!votes || c < v->created)
			v->created = c;
		if (!votes || u > v->updated) {
			v->updated = u;
			v->attrs = a;
			v->alen = al;
		}
		votes++;
	}
	return votes >= st->k;
}

int
ol_set_bucket_get(struct ol_store *st, const char *bucket, int64_t *created_ns, void *buf,
		  size_t cap, size_t *len)
{
	struct ol_reads r;
	struct bvote v = {0};
	int ok;

	ol_reads_get_as(st, OL_META_BUCKETS, bucket, strlen(bucket), NULL, &r, OL_READS_ATTRS);
	ok = bucket_votes(st, (const void *const *)r.raw, r.len, &v);
	if (ok) {
		if (created_ns)
			*created_ns = v.created;
		if (buf && cap)
			memcpy(buf, v.attrs, v.alen < cap ? v.alen : cap);
		if (len)
			*len = v.alen;
	}
	if (!ok)
		ok = ol_reads_absent(st, &r);
	ol_reads_free(&r);
	return ok > 0 ? 0 : ok;
}

int
ol_set_bucket_attrs(struct ol_store *st, const char *bucket, void **out, size_t *len)
{
	struct ol_reads r;
	struct bvote v = {0};
	int ok;

	*out = NULL;
	*len = 0;
	ol_reads_get_as(st, OL_META_BUCKETS, bucket, strlen(bucket), NULL, &r, OL_READS_ATTRS);
	ok = bucket_votes(st, (const void *const *)r.raw, r.len, &v);
	if (ok) {
		*out = ol_xmalloc(v.alen + 1);
		memcpy(*out, v.attrs, v.alen);
		((char *)*out)[v.alen] = '\0';
		*len = v.alen;
	}
	if (!ok)
		ok = ol_reads_absent(st, &r);
	ol_reads_free(&r);
	return ok > 0 ? 0 : ok;
}

int
ol_set_bucket_stat(struct ol_store *st, const char *bucket, int64_t *created_ns)
{
	return ol_set_bucket_get(st, bucket, created_ns, NULL, 0, NULL);
}

int
ol_set_bucket_set_attrs(struct ol_store *st, const char *bucket, const void *attrs, size_t len)
{
	int64_t created;
	int rc;

	if (len > OL_STORE_MAX_BATTRS)
		return -EINVAL;
	pthread_rwlock_wrlock(&st->bucket_lock);
	rc = ol_set_bucket_get(st, bucket, &created, NULL, 0, NULL);
	if (!rc)
		rc = bucket_write(st, bucket, false, created, attrs, len);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

int
ol_set_bucket_list_attrs(struct ol_store *st, ol_store_bucket_attrs_cb cb, void *arg)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	char name[80];
	int rc = ol_merge_open(st, OL_META_BUCKETS, "", 0, &m);

	while (!rc && ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		struct bvote v = {0};

		if (kl >= sizeof(name) || !bucket_votes(st, vals, lens, &v))
			continue;
		memcpy(name, k, kl);
		name[kl] = 0;
		rc = cb(name, v.created, v.attrs, v.alen, arg);
	}
	ol_merge_close(&m);
	return rc;
}

struct list_plain {
	ol_store_bucket_cb cb;
	void *arg;
};

static int
list_plain_cb(const char *bucket, int64_t created_ns, const void *attrs, size_t len, void *arg)
{
	struct list_plain *lp = arg;

	return lp->cb(bucket, created_ns, lp->arg);
}

int
ol_set_bucket_list(struct ol_store *st, ol_store_bucket_cb cb, void *arg)
{
	struct list_plain lp = {cb, arg};

	return ol_set_bucket_list_attrs(st, list_plain_cb, &lp);
}
