/* store/bucket.c - bucket records, replicated on every drive like object records. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

static int
bucket_write(struct ol_store *st, const char *bucket, bool del)
{
	uint8_t rec[16];
	uint8_t *raw[OL_MAX_DRIVES];
	size_t len[OL_MAX_DRIVES];
	struct ol_commit c = {.db = OL_META_BUCKETS, .k = bucket, .kl = strlen(bucket)};
	int ok;

	ol_brec_encode(rec, ol_now_ns(st));
	for (int d = 0; d < st->n; d++) {
		raw[d] = rec;
		len[d] = sizeof(rec);
	}
	if (!del) {
		c.raw = raw;
		c.raw_len = len;
	}
	ok = ol_commit_all(st, &c);
	ol_commit_free(&c);
	return ok >= st->w ? 0 : -EIO;
}

int
ol_store_bucket_create(struct ol_store *st, const char *bucket)
{
	int rc;

	if (!bucket[0] || strlen(bucket) > 63)
		return -EINVAL;
	pthread_rwlock_wrlock(&st->bucket_lock);
	rc = ol_bucket_ok(st, bucket) ? -EEXIST : bucket_write(st, bucket, false);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

static int
has_upload(const char *key, size_t key_len, const char *upload_id, int64_t init_ns, void *arg)
{
	return 1;
}

static int
bucket_empty(struct ol_store *st, const char *bucket)
{
	struct ol_iter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	int rc = ol_store_iter_open(st, bucket, &it);

	if (rc)
		return rc;
	rc = ol_store_iter_next(it, &k, &kl, &info);
	ol_store_iter_close(it);
	if (rc)
		return rc < 0 ? rc : -ENOTEMPTY;
	rc = ol_store_mpu_list(st, bucket, has_upload, NULL);
	return rc == 1 ? -ENOTEMPTY : rc;
}

int
ol_store_bucket_delete(struct ol_store *st, const char *bucket)
{
	int rc;

	pthread_rwlock_wrlock(&st->bucket_lock);
	rc = ol_bucket_ok(st, bucket) ? bucket_empty(st, bucket) : -ENOENT;
	if (!rc)
		rc = bucket_write(st, bucket, true);
	pthread_rwlock_unlock(&st->bucket_lock);
	return rc;
}

static int
bucket_votes(struct ol_store *st, const void *const *vals, const size_t *lens, int64_t *created)
{
	int votes = 0;

	for (int d = 0; d < st->n; d++) {
		int64_t c;

		if (vals[d] && ol_brec_decode(vals[d], lens[d], &c) == 0) {
			if (!votes || c < *created)
				*created = c;
			votes++;
		}
	}
	return votes >= st->k;
}

int
ol_store_bucket_stat(struct ol_store *st, const char *bucket, int64_t *created_ns)
{
	struct ol_reads r;
	int64_t c = 0;
	int ok;

	ol_reads_get(st, OL_META_BUCKETS, bucket, strlen(bucket), NULL, &r);
	ok = bucket_votes(st, (const void *const *)r.raw, r.len, &c);
	ol_reads_free(&r);
	if (!ok)
		return -ENOENT;
	if (created_ns)
		*created_ns = c;
	return 0;
}

int
ol_store_bucket_list(struct ol_store *st, ol_store_bucket_cb cb, void *arg)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	char name[80];
	int rc = ol_merge_open(st, OL_META_BUCKETS, "", 0, &m);

	while (!rc && ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		int64_t c = 0;

		if (kl >= sizeof(name) || !bucket_votes(st, vals, lens, &c))
			continue;
		memcpy(name, k, kl);
		name[kl] = 0;
		rc = cb(name, c, arg);
	}
	ol_merge_close(&m);
	return rc;
}
