/* s3/tagging.c - tags: ?tagging on buckets (kept in the bucket's attrs as "tags") and on
 * objects (kept in the object's metadata blob as "ol-tags", changed in place by
 * ol_store_set_meta: the data, ETag and version stay), and the x-amz-tagging header of
 * PutObject, CopyObject (with x-amz-tagging-directive) and CreateMultipartUpload. Both keep
 * the tags in their x-amz-tagging form ("k=v&k2=v2", URL-encoded). */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

#define TAGS_META "ol-tags"

static void
invalid_tag(struct s3_req *r, const char *why)
{
	s3_error_code(r, "InvalidTag", 400, why, NULL);
}

/* The request's Tagging body, checked against max tags. 0, or -1 with the error sent. */
static int
body_tags(struct s3_req *r, unsigned max, struct ol_s3_tags *t)
{
	struct s3_body b;
	char *body = NULL;
	size_t len;
	const char *why;
	int rc = -1;

	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return -1;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
	} else if (ol_s3_parse_tagging(body, len, t) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	} else if (ol_s3_tags_check(t, max, &why) < 0) {
		invalid_tag(r, why);
		ol_s3_tags_free(t);
	} else {
		rc = 0;
	}
	free(body);
	s3_body_fini(&b);
	return rc;
}

void
s3_bucket_tagging(struct s3_req *r)
{
	const char *m = r->h->method, *v;
	struct ol_s3_tags t;
	struct ol_buf x = {0};
	long n;
	int rc;

	if (m[0] == 'G') {
		r->op = "GetBucketTagging";
		n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "tags", &v);
		if (n < 0) {
			s3_error_code(r, "NoSuchTagSet", 404, "The TagSet does not exist", NULL);
			return;
		}
		if (ol_s3_tags_parse_query(v, (size_t)n, &t) < 0)
			memset(&t, 0, sizeof(t));
		ol_s3_tags_xml(&t, &x);
		ol_s3_tags_free(&t);
		s3_send_xml(r, 200, &x);
		return;
	}
	if (m[0] == 'D') {
		r->op = "DeleteBucketTagging";
		rc = s3_bucket_attr_store(r, "tags", NULL, -1);
	} else {
		r->op = "PutBucketTagging";
		if (body_tags(r, OL_S3_MAX_TAGS, &t) < 0)
			return;
		ol_s3_tags_encode(&t, &x);
		ol_s3_tags_free(&t);
		rc = s3_bucket_attr_store(r, "tags", x.p ? x.p : "", (long)x.len);
		ol_buf_free(&x);
	}
	if (rc < 0)
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
	else
		s3_send(r, 204, NULL, 0, NULL, 0);
}

size_t
s3_tag_count(const void *meta, size_t len)
{
	const char *v;
	long n = ol_s3_meta_get(meta, len, TAGS_META, &v);
	size_t c = n > 0 ? 1 : 0;

	for (long i = 0; i < n; i++)
		c += v[i] == '&';
	return c;
}

/* The blob less its tags, plus tags t (none: no entry). */
static void
meta_with_tags(const void *meta, size_t len, const struct ol_s3_tags *t, struct ol_buf *out)
{
	struct ol_s3_meta_kv kv;
	size_t pos = 0;

	while (ol_s3_meta_next(meta, len, &pos, &kv)) {
		if (kv.name_len == strlen(TAGS_META) && !memcmp(kv.name, TAGS_META, kv.name_len))
			continue;
		ol_buf_add(out, kv.name, kv.name_len);
		ol_buf_add(out, ": ", 2);
		ol_buf_add(out, kv.value, kv.value_len);
		ol_buf_add(out, "\n", 1);
	}
	if (t && t->n) {
		struct ol_buf enc = {0};

		ol_s3_tags_encode(t, &enc);
		ol_s3_meta_add(out, TAGS_META, ol_buf_cstr(&enc));
		ol_buf_free(&enc);
	}
}

int
s3_tagging_header(struct s3_req *r, struct ol_buf *meta, bool replace)
{
	const char *h = ol_http_header(r->h, "x-amz-tagging"), *why;
	struct ol_s3_tags t;
	struct ol_buf out = {0};

	if (!h && replace && meta) { /* REPLACE without tags: none */
		meta_with_tags(meta->p, meta->len, NULL, &out);
		ol_buf_free(meta);
		*meta = out;
	}
	if (!h)
		return 0;
	if (ol_s3_tags_parse_query(h, strlen(h), &t) < 0) {
		invalid_tag(r, "The header 'x-amz-tagging' shall be encoded as UTF-8 then "
			       "URLEncoded URL query parameters without tag name duplicates.");
		return -1;
	}
	if (ol_s3_tags_check(&t, OL_S3_MAX_OBJ_TAGS, &why) < 0) {
		ol_s3_tags_free(&t);
		invalid_tag(r, why);
		return -1;
	}
	if (meta) {
		meta_with_tags(replace ? meta->p : NULL, replace ? meta->len : 0, &t, &out);
		if (replace) {
			ol_buf_free(meta);
			*meta = out;
		} else {
			ol_buf_add(meta, out.p, out.len);
			ol_buf_free(&out);
		}
	}
	ol_s3_tags_free(&t);
	return 0;
}

int
s3_tagging_xml_meta(struct s3_req *r, const char *xml, struct ol_buf *meta)
{
	struct ol_s3_tags t;
	const char *why;

	if (ol_s3_parse_tagging(xml, strlen(xml), &t) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		return -1;
	}
	if (ol_s3_tags_check(&t, OL_S3_MAX_OBJ_TAGS, &why) < 0) {
		ol_s3_tags_free(&t);
		invalid_tag(r, why);
		return -1;
	}
	meta_with_tags(NULL, 0, &t, meta);
	ol_s3_tags_free(&t);
	return 0;
}

void
s3_tags_copy(const void *src, size_t len, struct ol_buf *meta)
{
	const char *v;
	long n = ol_s3_meta_get(src, len, TAGS_META, &v);
	char *z;

	if (n <= 0)
		return;
	z = ol_xmalloc((size_t)n + 1);
	memcpy(z, v, (size_t)n);
	z[n] = '\0';
	ol_s3_meta_add(meta, TAGS_META, z);
	free(z);
}

/* The object's metadata (the version asked for): 0, or -1 with the error sent. */
static int
object_meta(struct s3_req *r, const char *vid, struct ol_obj_info *in, char *buf)
{
	int rc = ol_store_head_ver(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, vid, in, buf,
				   OL_STORE_MAX_META);

	if (rc < 0 && s3_version_error(r, rc, in, vid != NULL))
		return -1;
	if (rc == -ENOENT) {
		s3_missing_key(r, OL_S3E_NO_SUCH_KEY);
		return -1;
	}
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		return -1;
	}
	if (in->meta_len > OL_STORE_MAX_META) {
		s3_error(r, OL_S3E_INTERNAL, NULL);
		return -1;
	}
	return s3_object_access(r, buf, in->meta_len) ? 0 : -1;
}

void
s3_object_tagging(struct s3_req *r)
{
	const char *m = r->h->method, *vid, *v;
	char vb[OL_S3_MAX_VID + 1], *buf = ol_xmalloc(OL_STORE_MAX_META);
	struct ol_obj_info in;
	struct ol_s3_tags t = {0};
	struct ol_buf x = {0};
	struct ol_http_header h[2];
	size_t hn;
	int rc;

	r->op = m[0] == 'G'   ? "GetObjectTagging"
		: m[0] == 'D' ? "DeleteObjectTagging"
			      : "PutObjectTagging";
	if (s3_version_param(r, vb, &vid) < 0 || (m[0] == 'P' && body_tags(r, 10, &t) < 0) ||
	    object_meta(r, vid, &in, buf) < 0)
		goto out;
	hn = s3_version_headers(r, &in, h, 0);
	if (m[0] == 'G') {
		long n = ol_s3_meta_get(buf, in.meta_len, TAGS_META, &v);

		if (n < 0 || ol_s3_tags_parse_query(v, (size_t)n, &t) < 0)
			memset(&t, 0, sizeof(t));
		ol_s3_tags_xml(&t, &x);
		s3_send(r, 200, h, hn, x.p, x.len);
		goto out;
	}
	meta_with_tags(buf, in.meta_len, &t, &x);
	rc = ol_store_set_meta(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, vid, x.p, x.len);
	if (rc < 0 && !s3_version_error(r, rc, &in, vid != NULL))
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
	else if (rc == 0)
		s3_send(r, m[0] == 'D' ? 204 : 200, h, hn, NULL, 0);
out:
	ol_s3_tags_free(&t);
	ol_buf_free(&x);
	free(buf);
}
