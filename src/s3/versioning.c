/* s3/versioning.c - bucket versioning: PUT/GET ?versioning (kept in the bucket's attrs as
 * "ver" = "E" Enabled or "S" Suspended; absent: never versioned), the mode every write of a
 * bucket passes to the store, the versionId query parameter, and the answers for delete
 * markers and missing versions (x-amz-delete-marker, x-amz-version-id). */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
s3_vmode(const struct s3_req *r)
{
	const char *v;
	long n = r->ba.blob ? ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "ver", &v) : -ENOENT;

	if (n != 1)
		return OL_STORE_VER_OFF;
	return v[0] == 'E' ? OL_STORE_VER_ON : v[0] == 'S' ? OL_STORE_VER_SUSP : OL_STORE_VER_OFF;
}

int
s3_version_param(struct s3_req *r, char buf[OL_S3_MAX_VID + 1], const char **vid)
{
	long n = ol_s3_query_get(r->query, "versionId", buf, OL_S3_MAX_VID + 1);

	*vid = NULL;
	if (n == -ENOENT)
		return 0;
	if (n <= 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid version id specified");
		return -1;
	}
	*vid = buf;
	return 0;
}

size_t
s3_version_headers(const struct s3_req *r, const struct ol_obj_info *in, struct ol_http_header *h,
		   size_t n)
{
	/* x-amz-version-id once the bucket was ever versioned, or for a real version */
	if (s3_vmode(r) != OL_STORE_VER_OFF || strcmp(in->version_id, "null") != 0)
		h[n++] = (struct ol_http_header){"x-amz-version-id", in->version_id};
	if (in->delete_marker)
		h[n++] = (struct ol_http_header){"x-amz-delete-marker", "true"};
	return n;
}

size_t
s3_write_version_headers(const struct ol_obj_info *in, struct ol_http_header *h, size_t n)
{
	if (strcmp(in->version_id, "null") != 0)
		h[n++] = (struct ol_http_header){"x-amz-version-id", in->version_id};
	return n;
}

/* An error answer with the version headers of in. */
static void
error_with(struct s3_req *r, enum ol_s3_err e, const char *msg, const struct ol_obj_info *in)
{
	const struct ol_s3_errinfo *ei = ol_s3_errinfo(e);
	struct ol_buf b = {0}, res = {0};
	struct ol_http_header h[4];
	char lm[32];
	size_t n = s3_version_headers(r, in, h, 0);

	if (in->delete_marker && e == OL_S3E_METHOD_NOT_ALLOWED) {
		ol_s3_http_date(in->mtime_ns / 1000000, lm);
		h[n++] = (struct ol_http_header){"Last-Modified", lm};
		h[n++] = (struct ol_http_header){"Allow", "DELETE"};
	}
	ol_buf_adds(&res, "/");
	ol_buf_adds(&res, r->rt.bucket);
	ol_buf_adds(&res, "/");
	ol_buf_add(&res, r->rt.key, r->rt.key_len);
	ol_s3_error_xml(&b, ei->code, msg ? msg : ei->message, ol_buf_cstr(&res), r->reqid, NULL);
	ol_buf_free(&res);
	s3_send(r, ei->status, h, n, b.p, b.len);
	ol_buf_free(&b);
}

bool
s3_version_error(struct s3_req *r, int rc, const struct ol_obj_info *in, bool asked)
{
	if (rc == OL_STORE_EDELMARK) { /* GET/HEAD ?versionId= of a marker */
		error_with(r, OL_S3E_METHOD_NOT_ALLOWED,
			   "The specified method is not allowed against this resource.", in);
		return true;
	}
	if (rc == -ENOENT && in->delete_marker) { /* the current version is a marker */
		error_with(r, OL_S3E_NO_SUCH_KEY, NULL, in);
		return true;
	}
	if (rc == -EINVAL && asked) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid version id specified");
		return true;
	}
	if (rc == -ENOENT && asked) {
		s3_error_code(r, "NoSuchVersion", 404, "The specified version does not exist.",
			      NULL);
		return true;
	}
	return false;
}

void
s3_put_versioning(struct s3_req *r)
{
	struct s3_body b;
	char *body = NULL;
	size_t len;
	int status, rc;

	r->op = "PutBucketVersioning";
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	rc = ol_s3_parse_versioning(body, len, &status);
	if (rc == -ENOTSUP) {
		s3_error(r, OL_S3E_NOT_IMPLEMENTED, "MfaDelete is not supported");
	} else if (rc == -EINVAL) {
		s3_error_code(r, "IllegalVersioningConfigurationException", 400,
			      "The versioning configuration specified in the request is invalid: "
			      "Status must be Enabled or Suspended (a versioned bucket cannot go "
			      "back to unversioned).",
			      NULL);
	} else if (rc < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	} else if (status != 1 && s3_lock_enabled(r)) {
		s3_error_code(r, "InvalidBucketState", 409,
			      "An Object Lock configuration is present on this bucket, so the "
			      "versioning state cannot be changed.",
			      NULL);
	} else {
		s3_attr_stored(r, s3_bucket_attr_store(r, "ver", status == 1 ? "E" : "S", 1), 200);
	}
out:
	free(body);
	s3_body_fini(&b);
}

void
s3_get_versioning(struct s3_req *r)
{
	struct ol_buf x = {0};
	int m = s3_vmode(r);

	r->op = "GetBucketVersioning";
	ol_s3_xml_open_root(&x, "VersioningConfiguration");
	if (m != OL_STORE_VER_OFF)
		ol_s3_xml_elem(&x, "Status", m == OL_STORE_VER_ON ? "Enabled" : "Suspended");
	ol_buf_adds(&x, "</VersioningConfiguration>");
	s3_send_xml(r, 200, &x);
}

int
ol_s3_commit_remote(struct ol_s3_server *s, const void *req, size_t len, struct ol_obj_info *out)
{
	struct s3_req r = {.srv = s};
	bool part = false;
	int rc = ol_store_commit_req_bucket(req, len, r.rt.bucket, &part);
	if (rc)
		return rc;
	if (!s->st)
		return -ESTALE; /* serves no store now: the writer's client retries */
	/* a part's commit takes no versioning mode; an object's takes the bucket's as this
	 * server knows it (the attrs it wrote itself, read through its per-thread cache) */
	int vmode = OL_STORE_VER_OFF;
	if (!part) {
		s3_bucket_load(&r);
		vmode = s3_vmode(&r);
		s3_access_fini(&r);
	}
	return ol_store_commit_remote(s->st, req, len, vmode, out);
}
