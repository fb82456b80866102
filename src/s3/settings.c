/* s3/settings.c - bucket settings kept in the bucket's attrs: public access block, object
 * ownership controls, CORS (configuration, preflight OPTIONS, response headers). */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

/* Read a small XML body; NULL with the error sent. */
static char *
small_body(struct s3_req *r, size_t *len)
{
	struct s3_body b;
	char *body = NULL;
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return NULL;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		free(body);
		body = NULL;
	}
	s3_body_fini(&b);
	return body;
}

/* ---- public access block ---- */

void
s3_put_pab(struct s3_req *r)
{
	struct ol_pab p;
	size_t len;
	char enc[5];
	r->op = "PutPublicAccessBlock";
	char *body = small_body(r, &len);
	if (!body)
		return;
	if (ol_pab_parse(body, len, &p) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	} else {
		ol_pab_encode(&p, enc);
		s3_attr_stored(r, s3_bucket_attr_store(r, "pab", enc, 4), 200);
	}
	free(body);
}

void
s3_get_pab(struct s3_req *r)
{
	const char *v;
	struct ol_buf x = {0};
	r->op = "GetPublicAccessBlock";
	if (ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "pab", &v) < 0) {
		s3_error_code(r, "NoSuchPublicAccessBlockConfiguration", 404,
			      "The public access block configuration was not found", NULL);
		return;
	}
	const struct ol_pab *p = &r->ba.pab;
	ol_s3_xml_open_root(&x, "PublicAccessBlockConfiguration");
	ol_s3_xml_elem(&x, "BlockPublicAcls", p->block_public_acls ? "true" : "false");
	ol_s3_xml_elem(&x, "IgnorePublicAcls", p->ignore_public_acls ? "true" : "false");
	ol_s3_xml_elem(&x, "BlockPublicPolicy", p->block_public_policy ? "true" : "false");
	ol_s3_xml_elem(&x, "RestrictPublicBuckets", p->restrict_public_buckets ? "true" : "false");
	ol_buf_adds(&x, "</PublicAccessBlockConfiguration>");
	s3_send_xml(r, 200, &x);
}

/* ---- object ownership ---- */

void
s3_put_ownership(struct s3_req *r)
{
	char v[32];
	size_t len;
	r->op = "PutBucketOwnershipControls";
	char *body = small_body(r, &len);
	if (!body)
		return;
	int rc = ol_ownership_parse(body, len, v, sizeof(v));
	free(body);
	if (rc < 0) {
		s3_error(r, rc == -EINVAL ? OL_S3E_INVALID_ARGUMENT : OL_S3E_MALFORMED_XML,
			 rc == -EINVAL ? "Invalid ObjectOwnership" : NULL);
		return;
	}
	if (strcmp(v, "BucketOwnerEnforced") == 0 && !s3_bucket_acl_private(r)) {
		s3_error_code(r, "InvalidBucketAclWithObjectOwnership", 400,
			      "Bucket cannot have ACLs set with ObjectOwnership's "
			      "BucketOwnerEnforced setting",
			      NULL);
		return;
	}
	s3_attr_stored(r, s3_bucket_attr_store(r, "ownership", v, (long)strlen(v)), 200);
}

void
s3_get_ownership(struct s3_req *r)
{
	struct ol_buf x = {0};
	r->op = "GetBucketOwnershipControls";
	if (!r->ba.ownership[0]) {
		s3_error_code(r, "OwnershipControlsNotFoundError", 404,
			      "The bucket ownership controls were not found", NULL);
		return;
	}
	ol_s3_xml_open_root(&x, "OwnershipControls");
	ol_buf_adds(&x, "<Rule>");
	ol_s3_xml_elem(&x, "ObjectOwnership", r->ba.ownership);
	ol_buf_adds(&x, "</Rule></OwnershipControls>");
	s3_send_xml(r, 200, &x);
}

/* ---- CORS ---- */

void
s3_put_cors(struct s3_req *r)
{
	struct ol_cors c;
	size_t len;
	r->op = "PutBucketCors";
	char *body = small_body(r, &len);
	if (!body)
		return;
	int rc = ol_cors_parse(body, len, &c);
	ol_cors_free(&c);
	if (rc == -EINVAL)
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Each CORSRule needs an AllowedOrigin and an AllowedMethod of GET, PUT, "
			 "POST, DELETE or HEAD");
	else if (rc < 0)
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	else
		s3_attr_stored(r, s3_bucket_attr_store(r, "cors", body, (long)len), 200);
	free(body);
}

void
s3_get_cors(struct s3_req *r)
{
	const char *v;
	r->op = "GetBucketCors";
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "cors", &v);
	if (n <= 0) {
		s3_error_code(r, "NoSuchCORSConfiguration", 404,
			      "The CORS configuration does not exist", NULL);
		return;
	}
	s3_send(r, 200, NULL, 0, v, (size_t)n);
}

/* Join a list with ", " into out (cut at cap). */
static void
join(char *const *l, unsigned n, char *out, size_t cap)
{
	size_t pos = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < n && pos + 1 < cap; i++)
		pos += (size_t)snprintf(out + pos, cap - pos, "%s%s", i ? ", " : "", l[i]);
	if (pos >= cap)
		out[cap - 1] = '\0';
}

/* The rule for this request's Origin (and method), copied into r->cors; false if none. */
static bool
cors_lookup(struct s3_req *r, const char *method, const char *req_headers)
{
	const char *v, *origin = ol_http_header(r->h, "origin");
	struct ol_cors c;
	bool found = false;
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "cors", &v);
	if (!origin || n <= 0 || ol_cors_parse(v, (size_t)n, &c) < 0)
		return false;
	const struct ol_cors_rule *rule = ol_cors_match(&c, origin, method, req_headers);
	if (rule) {
		bool star = rule->n_origins == 1 && strcmp(rule->origins[0], "*") == 0;
		snprintf(r->cors.origin, sizeof(r->cors.origin), "%s", star ? "*" : origin);
		join(rule->methods, rule->n_methods, r->cors.methods, sizeof(r->cors.methods));
		join(rule->expose, rule->n_expose, r->cors.expose, sizeof(r->cors.expose));
		r->cors.max_age = rule->max_age;
		r->cors.on = found = true;
	}
	ol_cors_free(&c);
	return found;
}

void
s3_cors_request(struct s3_req *r)
{
	if (r->ba.loaded && r->ba.exists && ol_http_header(r->h, "origin"))
		cors_lookup(r, r->h->method, NULL);
}

size_t
s3_cors_headers(struct s3_req *r, struct ol_http_header *h, size_t n)
{
	if (!r->cors.on)
		return n;
	h[n++] = (struct ol_http_header){"Access-Control-Allow-Origin", r->cors.origin};
	h[n++] = (struct ol_http_header){"Access-Control-Allow-Methods", r->cors.methods};
	if (r->cors.expose[0])
		h[n++] = (struct ol_http_header){"Access-Control-Expose-Headers", r->cors.expose};
	h[n++] = (struct ol_http_header){"Vary", "Origin, Access-Control-Request-Headers, "
						 "Access-Control-Request-Method"};
	return n;
}

void
s3_cors_preflight(struct s3_req *r)
{
	const char *origin = ol_http_header(r->h, "origin");
	const char *method = ol_http_header(r->h, "access-control-request-method");
	const char *hdrs = ol_http_header(r->h, "access-control-request-headers");
	char age[24];
	r->op = "PreflightCors";
	if (!origin || !method) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Insufficient information. Origin request header needed.");
		return;
	}
	if (!r->rt.bucket[0] || !ol_s3_bucket_name_ok(r->rt.bucket)) {
		s3_error(r, OL_S3E_ACCESS_DENIED,
			 "CORSResponse: This CORS request is not allowed. This is usually "
			 "because the evalution of Origin, request method / "
			 "Access-Control-Request-Method or Access-Control-Request-Headers are not "
			 "whitelisted by the resource's CORS spec.");
		return;
	}
	s3_bucket_load(r);
	if (!r->ba.exists) {
		s3_store_error(r, r->ba.rc == -ENOENT ? -ENXIO : r->ba.rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	const char *v;
	if (ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "cors", &v) <= 0) {
		ol_debug("s3 %s preflight %s: no CORS configuration", r->reqid, r->rt.bucket);
		s3_error(r, OL_S3E_ACCESS_DENIED,
			 "CORSResponse: CORS is not enabled for this bucket.");
		return;
	}
	if (!cors_lookup(r, method, hdrs)) {
		ol_debug("s3 %s preflight %s: no rule allows %s from %s", r->reqid, r->rt.bucket,
			 method, origin);
		s3_error(r, OL_S3E_ACCESS_DENIED,
			 "CORSResponse: This CORS request is not allowed. This is usually "
			 "because the evalution of Origin, request method / "
			 "Access-Control-Request-Method or Access-Control-Request-Headers are not "
			 "whitelisted by the resource's CORS spec.");
		return;
	}
	struct ol_http_header h[2];
	size_t n = 0;
	if (hdrs && hdrs[0])
		h[n++] = (struct ol_http_header){"Access-Control-Allow-Headers", hdrs};
	if (r->cors.max_age >= 0) {
		snprintf(age, sizeof(age), "%ld", r->cors.max_age);
		h[n++] = (struct ol_http_header){"Access-Control-Max-Age", age};
	}
	s3_send(r, 200, h, n, NULL, 0);
}

static void
delete_setting(struct s3_req *r, const char *attr)
{
	r->op = "DeleteBucketSetting";
	s3_attr_stored(r, s3_bucket_attr_store(r, attr, NULL, -1), 204);
}

void
s3_delete_pab(struct s3_req *r)
{
	delete_setting(r, "pab");
}

void
s3_delete_ownership(struct s3_req *r)
{
	delete_setting(r, "ownership");
}

void
s3_delete_cors(struct s3_req *r)
{
	delete_setting(r, "cors");
}
