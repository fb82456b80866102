/* s3/bucket.c - service and bucket handlers: ListBuckets, Create/Head/Delete bucket,
 * GetBucketLocation, sub-resources, DeleteObjects. */
#include "s3/s3int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct list_ctx {
	struct ol_buf *x;
	const char *user;
	const char *after, *prefix; /* continuation-token (the last name given), prefix */
	unsigned max, count;
	char last[64];
	bool truncated;
};

static int
bucket_cb(const char *bucket, int64_t created_ns, const void *attrs, size_t alen, void *arg)
{
	struct list_ctx *lc = arg;
	struct ol_buf *x = lc->x;
	const char *owner;
	if (!ol_s3_bucket_name_ok(bucket))
		return 0; /* the daemon's own (admin/'s "openlake_sys"): not S3's to show */
	long n = ol_s3_attr_get(attrs, alen, "owner", &owner);
	if (n <= 0) {
		owner = "admin";
		n = 5;
	}
	if ((size_t)n != strlen(lc->user) || memcmp(owner, lc->user, (size_t)n) != 0)
		return 0;
	if (strncmp(bucket, lc->prefix, strlen(lc->prefix)) != 0 || strcmp(bucket, lc->after) <= 0)
		return 0;
	if (lc->count == lc->max) { /* one more: the page is truncated */
		lc->truncated = true;
		return 1;
	}
	lc->count++;
	snprintf(lc->last, sizeof(lc->last), "%s", bucket);
	char date[32];
	ol_s3_iso_date(created_ns / 1000000, date);
	ol_buf_adds(x, "<Bucket>");
	ol_s3_xml_elem(x, "Name", bucket);
	ol_s3_xml_elem(x, "CreationDate", date);
	ol_buf_adds(x, "</Bucket>");
	return 0;
}

void
s3_service(struct s3_req *r)
{
	struct ol_buf x = {0};
	r->op = "ListBuckets";
	if (strcmp(r->h->method, "GET") != 0) {
		s3_error(r, OL_S3E_METHOD_NOT_ALLOWED, NULL);
		return;
	}
	/* max-buckets (1..10000), continuation-token, prefix: ListBuckets pages as AWS's do, in
	 * name order; the token is the last name of the page before */
	char mb[16], token[64] = "", prefix[256] = "";
	unsigned max = 10000;
	long ml = ol_s3_query_get(r->query, "max-buckets", mb, sizeof(mb));
	if (ml != -ENOENT &&
	    (ml < 0 || ol_s3_parse_count(mb, &max) < 0 || max < 1 || max > 10000)) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "max-buckets must be a whole number from 1 to 10000");
		return;
	}
	long tl = ol_s3_query_get(r->query, "continuation-token", token, sizeof(token));
	if (tl != -ENOENT && (tl < 0 || (tl > 0 && !ol_s3_bucket_name_ok(token)))) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "The continuation token provided is incorrect");
		return;
	}
	long pl = ol_s3_query_get(r->query, "prefix", prefix, sizeof(prefix));
	if (pl < 0 && pl != -ENOENT) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "The prefix is too long for a bucket name");
		return;
	}
	if (pl < 0)
		prefix[0] = '\0';
	struct list_ctx lc = {&x, r->user, token, prefix, max, 0, "", false};
	ol_s3_xml_open_root(&x, "ListAllMyBucketsResult");
	ol_buf_adds(&x, "<Owner>");
	ol_s3_xml_elem(&x, "ID", r->user);
	ol_s3_xml_elem(&x, "DisplayName", r->user);
	ol_buf_adds(&x, "</Owner><Buckets>");
	int rc = ol_store_bucket_list_attrs(r->srv->st, bucket_cb, &lc);
	if (rc < 0) {
		ol_buf_free(&x);
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	ol_buf_adds(&x, "</Buckets>");
	if (lc.truncated)
		ol_s3_xml_elem(&x, "ContinuationToken", lc.last);
	if (prefix[0])
		ol_s3_xml_elem(&x, "Prefix", prefix);
	ol_buf_adds(&x, "</ListAllMyBucketsResult>");
	s3_send_xml(r, 200, &x);
}

/* CreateBucket of a bucket that exists: another's is BucketAlreadyExists; one's own is
 * BucketAlreadyOwnedByYou, except in us-east-1 where S3 (legacy behaviour) answers 200 and
 * resets the bucket's ACL. 0 (answer 200, or an error already sent) or -errno. */
static int
bucket_exists_answer(struct s3_req *r, const struct ol_buf *acl)
{
	s3_bucket_load(r);
	if (!r->ba.exists)
		return r->ba.rc == -ENOENT ? -EIO : r->ba.rc;
	if (strcmp(s3_bucket_owner(r), r->user) != 0) {
		ol_debug("s3 %s CreateBucket %s: owned by another user", r->reqid, r->rt.bucket);
		s3_error_code(r, "BucketAlreadyExists", 409,
			      "The requested bucket name is not available. The bucket namespace is "
			      "shared by all users of the system. Please select a different name "
			      "and try again.",
			      NULL);
		return 0;
	}
	if (strcmp(r->srv->cfg->region, "us-east-1") != 0) {
		s3_error(r, OL_S3E_BUCKET_EXISTS_OWNED, NULL);
		return 0;
	}
	return s3_bucket_attr_store(r, "acl", acl->p, acl->len ? (long)acl->len : -1);
}

void
s3_create_bucket(struct s3_req *r)
{
	struct s3_body b;
	char *body = NULL, loc[128];
	size_t len;
	r->op = "CreateBucket";
	if (!ol_s3_bucket_name_ok(r->rt.bucket)) {
		s3_error(r, OL_S3E_INVALID_BUCKET_NAME, NULL);
		return;
	}
	if (s3_body_slurp(r, 64 * 1024, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (ol_s3_parse_create_bucket(body, len, loc, sizeof(loc)) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	if (loc[0] && strcmp(loc, r->srv->cfg->region) != 0 && strcmp(loc, "US") != 0) {
		s3_error(r, OL_S3E_ILLEGAL_LOCATION, NULL);
		goto out;
	}
	const char *lock = ol_http_header(r->h, "x-amz-bucket-object-lock-enabled");
	if (lock && strcasecmp(lock, "true") != 0 && strcasecmp(lock, "false") != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "x-amz-bucket-object-lock-enabled must be true or false");
		goto out;
	}
	struct ol_buf attrs = {0}, acl = {0};
	ol_s3_attr_set(&attrs, NULL, 0, "owner", r->user, (long)strlen(r->user));
	if (lock && strcasecmp(lock, "true") == 0) { /* object lock: versioned for good */
		struct ol_buf t = {0}, t2 = {0};
		ol_s3_attr_set(&t, attrs.p, attrs.len, "ver", "E", 1);
		ol_s3_attr_set(&t2, t.p, t.len, "lock", "", 0);
		ol_buf_free(&attrs);
		ol_buf_free(&t);
		attrs = t2;
	}
	if (r->has_req_acl) {
		struct ol_buf t = {0};
		ol_acl_encode(&r->req_acl, &acl);
		ol_s3_attr_set(&t, attrs.p, attrs.len, "acl", acl.p, (long)acl.len);
		ol_buf_free(&attrs);
		attrs = t;
	}
	const char *own = ol_http_header(r->h, "x-amz-object-ownership");
	if (own) {
		struct ol_buf t = {0};
		if (!ol_ownership_ok(own)) {
			ol_buf_free(&attrs);
			ol_buf_free(&acl);
			s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid x-amz-object-ownership");
			goto out;
		}
		ol_s3_attr_set(&t, attrs.p, attrs.len, "ownership", own, (long)strlen(own));
		ol_buf_free(&attrs);
		attrs = t;
	}
	int rc = ol_store_bucket_create_attrs(r->srv->st, r->rt.bucket, attrs.p, attrs.len);
	s3_bucket_written(r->srv);
	ol_buf_free(&attrs);
	if (rc == -EEXIST)
		rc = bucket_exists_answer(r, &acl);
	ol_buf_free(&acl);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	if (r->responded)
		goto out;
	char where[300];
	snprintf(where, sizeof(where), "/%s", r->rt.bucket);
	struct ol_http_header h[1] = {{"Location", where}};
	s3_send(r, 200, h, 1, NULL, 0);
out:
	free(body);
	s3_body_fini(&b);
}

/* 1 when the bucket holds an object, a version or a delete marker, 0 when none, -errno. */
static int
bucket_has_data(struct s3_req *r)
{
	struct ol_iter *it;
	struct ol_viter *vit;
	struct ol_obj_info info;
	const char *k;
	size_t kl;
	int rc = ol_store_iter_open(r->srv->st, r->rt.bucket, &it);
	if (rc < 0)
		return rc;
	rc = ol_store_iter_next(it, &k, &kl, &info);
	ol_store_iter_close(it);
	if (rc != 0)
		return rc;
	rc = ol_store_viter_open(r->srv->st, r->rt.bucket, &vit);
	if (rc < 0)
		return rc;
	rc = ol_store_viter_next(vit, &k, &kl, &info);
	ol_store_viter_close(vit);
	return rc;
}

struct upload_ids {
	char (*id)[64]; /* ol_store_mpu_create's upload_id size */
	size_t n, cap;
};

static int
upload_id_cb(const char *key, size_t kl, const char *id, int64_t init_ns, const void *meta,
	     size_t meta_len, void *arg)
{
	struct upload_ids *u = arg;
	(void)key, (void)kl, (void)init_ns;
	if (u->n == u->cap) {
		u->cap = u->cap ? u->cap * 2 : 16;
		u->id = ol_xrealloc(u->id, u->cap * sizeof(*u->id));
	}
	snprintf(u->id[u->n++], sizeof(u->id[0]), "%s", id);
	return 0;
}

/* DeleteBucket of a bucket whose only content is in-progress multipart uploads: AWS deletes
 * it (the uploads go with it); the store refuses any bucket with uploads (-ENOTEMPTY), so
 * they are aborted here and the delete tried once more. A bucket with any object, version
 * or delete marker keeps its uploads and answers BucketNotEmpty. */
static int
delete_with_uploads(struct s3_req *r)
{
	struct upload_ids u = {0};
	int rc = bucket_has_data(r);
	if (rc != 0)
		return rc < 0 ? rc : -ENOTEMPTY;
	rc = ol_store_mpu_list(r->srv->st, r->rt.bucket, upload_id_cb, &u);
	for (size_t i = 0; rc == 0 && i < u.n; i++) {
		rc = ol_store_mpu_abort(r->srv->st, r->rt.bucket, u.id[i]);
		if (rc == -ENOENT) /* aborted or completed meanwhile */
			rc = 0;
	}
	free(u.id);
	if (rc < 0)
		return rc;
	ol_info("s3 %s DeleteBucket %s: aborted %zu in-progress multipart upload(s)", r->reqid,
		r->rt.bucket, u.n);
	return ol_store_bucket_delete(r->srv->st, r->rt.bucket);
}

void
s3_delete_bucket(struct s3_req *r)
{
	r->op = "DeleteBucket";
	int rc = ol_store_bucket_delete(r->srv->st, r->rt.bucket);
	if (rc == -ENOTEMPTY)
		rc = delete_with_uploads(r);
	s3_bucket_written(r->srv);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	s3_send(r, 204, NULL, 0, NULL, 0);
}

void
s3_get_location(struct s3_req *r)
{
	struct ol_buf x = {0};
	const char *reg = r->srv->cfg->region;
	r->op = "GetBucketLocation";
	ol_buf_adds(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
			"xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	if (strcmp(reg, "us-east-1") != 0)
		ol_s3_xml_esc(&x, reg, strlen(reg));
	ol_buf_adds(&x, "</LocationConstraint>");
	s3_send_xml(r, 200, &x);
}

/* ---- ACL ---- */

void
s3_get_bucket_acl(struct s3_req *r)
{
	struct ol_buf x = {0};
	r->op = "GetAcl";
	ol_acl_xml(&r->ba.acl, &x);
	s3_send_xml(r, 200, &x);
}

void
s3_put_bucket_acl(struct s3_req *r)
{
	struct ol_acl a;
	struct ol_buf enc = {0};
	r->op = "PutAcl";
	if (s3_acl_from_request(r, s3_bucket_owner(r), &a) < 0)
		return;
	ol_acl_encode(&a, &enc);
	int rc = s3_bucket_attr_store(r, "acl", enc.p, (long)enc.len);
	ol_buf_free(&enc);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	s3_send(r, 200, NULL, 0, NULL, 0);
}

/* ---- DeleteObjects ---- */

/* A <Deleted> entry's version elements: the version asked for, or the marker added. */
static void
deleted_version(struct ol_buf *x, const char *asked, const struct ol_obj_info *o)
{
	if (asked)
		ol_s3_xml_elem(x, "VersionId", asked);
	if (o && o->delete_marker) {
		ol_s3_xml_elem(x, "DeleteMarker", "true");
		if (!asked)
			ol_s3_xml_elem(x, "DeleteMarkerVersionId", o->version_id);
		else
			ol_s3_xml_elem(x, "DeleteMarkerVersionId", asked);
	}
}

static void
delete_result(struct s3_req *r, const struct ol_s3_delete_req *d, const int *rcs,
	      const struct ol_obj_info *outs)
{
	struct ol_buf x = {0};
	ol_s3_xml_open_root(&x, "DeleteResult");
	for (unsigned i = 0; i < d->n_keys; i++) {
		int rc = rcs[i];
		if (rc == 0 || rc == -ENOENT) {
			if (d->quiet)
				continue;
			ol_buf_adds(&x, "<Deleted>");
			ol_s3_xml_elemn(&x, "Key", d->keys[i], d->key_lens[i]);
			deleted_version(&x, d->vids[i], rc == 0 ? &outs[i] : NULL);
			ol_buf_adds(&x, "</Deleted>");
			continue;
		}
		const char *code = rc == -EACCES || rc == -EPERM ? "AccessDenied"
				   : rc == -EINVAL		 ? "InvalidArgument"
				   : rc == -EIO			 ? "ServiceUnavailable"
				   : rc == -ENXIO		 ? "NoSuchBucket"
								 : "InternalError";
		ol_buf_adds(&x, "<Error>");
		ol_s3_xml_elemn(&x, "Key", d->keys[i], d->key_lens[i]);
		if (d->vids[i]) /* as AWS: the version the entry asked for */
			ol_s3_xml_elem(&x, "VersionId", d->vids[i]);
		ol_s3_xml_elem(&x, "Code", code);
		ol_s3_xml_elem(&x, "Message",
			       rc == -EPERM ? s3_lock_denied_message() : strerror(-rc));
		ol_buf_adds(&x, "</Error>");
	}
	ol_buf_adds(&x, "</DeleteResult>");
	s3_send_xml(r, 200, &x);
}

bool
s3_has_checksum(struct s3_req *r)
{
	static const char *const hs[] = {"content-md5",		  "x-amz-checksum-crc32",
					 "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
					 "x-amz-checksum-sha1",	  "x-amz-checksum-sha256",
					 "x-amz-trailer"};
	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
		if (ol_http_header(r->h, hs[i]))
			return true;
	return false;
}

void
s3_delete_objects(struct s3_req *r)
{
	struct s3_body b;
	struct ol_s3_delete_req d = {0};
	char *body = NULL;
	size_t len;
	int *rcs = NULL;
	struct ol_obj_info *outs = NULL;
	r->op = "DeleteObjects";
	if (!s3_has_checksum(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Missing required header for this request: Content-MD5");
		return;
	}
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (ol_s3_parse_delete(body, len, &d) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	rcs = ol_xcalloc(d.n_keys, sizeof(int));
	outs = ol_xcalloc(d.n_keys, sizeof(*outs));
	for (unsigned i = 0; i < d.n_keys; i++) {
		if (!s3_key_delete_ok(r, d.keys[i], d.key_lens[i]))
			rcs[i] = -EACCES;
		else
			rcs[i] = s3_lock_delete_check(r, d.keys[i], d.key_lens[i], d.vids[i]);
		if (rcs[i] == 0)
			rcs[i] =
			    ol_store_delete_ver(r->srv->st, r->rt.bucket, d.keys[i], d.key_lens[i],
						s3_vmode(r), d.vids[i], &outs[i]);
	}
	delete_result(r, &d, rcs, outs);
out:
	free(rcs);
	free(outs);
	ol_s3_delete_free(&d);
	free(body);
	s3_body_fini(&b);
}

/* ---- sub-resources (dispatch.c routes the requests) ---- */

bool
s3_bucket_sub_unsupported(struct s3_req *r)
{
	/* versioning and tagging have their own rows in dispatch.c, before the rows that ask */
	static const char *const subs[] = {"logging",	     "notification", "replication",
					   "website",	     "accelerate",   "analytics",
					   "inventory",	     "metrics",	     "intelligent-tiering",
					   "requestPayment", "versions"};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (ol_s3_query_has(r->query, subs[i])) {
			s3_error(r, OL_S3E_NOT_IMPLEMENTED, NULL);
			return true;
		}
	}
	return false;
}

void
s3_list_bucket(struct s3_req *r)
{
	char lt[8];
	long n = ol_s3_query_get(r->query, "list-type", lt, sizeof(lt));
	bool v2 = n >= 0 && strcmp(lt, "2") == 0;
	if (n != -ENOENT && !v2 && (n < 0 || strcmp(lt, "1") != 0))
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "Invalid list-type: use list-type=2 (ListObjectsV2) or leave it "
			 "out (ListObjects)");
	else
		s3_list_objects(r, v2 ? 2 : 1);
}

void
s3_list_versions(struct s3_req *r)
{
	s3_list_objects(r, 3);
}

void
s3_head_bucket(struct s3_req *r)
{
	r->op = "HeadBucket";
	char reg[80];
	snprintf(reg, sizeof(reg), "%s", r->srv->cfg->region);
	struct ol_http_header h[1] = {{"x-amz-bucket-region", reg}};
	s3_send(r, 200, h, 1, NULL, 0);
}
