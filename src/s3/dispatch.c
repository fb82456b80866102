/* s3/dispatch.c - every S3 operation in one table: (method, resource kind, sub-resource query
 * key, checks, handler). The first row that matches a request serves it. */
#include "s3/s3int.h"

#include <string.h>

enum kind { SERVICE, BUCKET, OBJECT };

/* checks, in this order, before the handler runs */
enum {
	NEED_BUCKET = 1 << 0, /* the bucket exists (else NoSuchBucket / InvalidBucketName) */
	/* an object GET/HEAD/DELETE: the store tells a missing bucket (-ENXIO) itself, so the hot
	 * path does one lookup, not two; sub-resources (uploadId, acl) and bad names check first */
	OBJ_BUCKET = 1 << 1,
	SETTING = 1 << 2,   /* matches only a bucket the access check found (r->ba) */
	BUCKET_NI = 1 << 3, /* bucket sub-resources not built: 501 NotImplemented */
	OBJECT_NI = 1 << 4, /* object sub-resources not built: 501 NotImplemented */
	PREAUTH = 1 << 5,   /* served before SigV4 and the access check (CORS preflight) */
};

struct op {
	const char *method; /* NULL: any */
	enum kind kind;
	const char *sub;		      /* query key that selects the row; NULL: any */
	bool (*when)(const struct s3_req *r); /* a further condition; NULL: none */
	unsigned checks;
	void (*serve)(struct s3_req *r);
};

static void
not_allowed(struct s3_req *r)
{
	s3_error(r, OL_S3E_METHOD_NOT_ALLOWED, NULL);
}

static bool
copy_source(const struct s3_req *r)
{
	return ol_http_header(r->h, "x-amz-copy-source") != NULL;
}

static bool
post_upload(const struct s3_req *r)
{
	return s3_is_post_upload(r);
}

#define ANY NULL

static const struct op ops[] = {
    {"OPTIONS", SERVICE, ANY, NULL, PREAUTH, s3_cors_preflight},
    {"OPTIONS", BUCKET, ANY, NULL, PREAUTH, s3_cors_preflight},
    {"OPTIONS", OBJECT, ANY, NULL, PREAUTH, s3_cors_preflight},

    {ANY, SERVICE, ANY, NULL, 0, s3_service}, /* ListBuckets; 405 for other methods */

    {"PUT", BUCKET, "publicAccessBlock", NULL, SETTING, s3_put_pab},
    {"GET", BUCKET, "publicAccessBlock", NULL, SETTING, s3_get_pab},
    {"DELETE", BUCKET, "publicAccessBlock", NULL, SETTING, s3_delete_pab},
    {ANY, BUCKET, "publicAccessBlock", NULL, SETTING, not_allowed},
    {"PUT", BUCKET, "ownershipControls", NULL, SETTING, s3_put_ownership},
    {"GET", BUCKET, "ownershipControls", NULL, SETTING, s3_get_ownership},
    {"DELETE", BUCKET, "ownershipControls", NULL, SETTING, s3_delete_ownership},
    {ANY, BUCKET, "ownershipControls", NULL, SETTING, not_allowed},
    {"PUT", BUCKET, "cors", NULL, SETTING, s3_put_cors},
    {"GET", BUCKET, "cors", NULL, SETTING, s3_get_cors},
    {"DELETE", BUCKET, "cors", NULL, SETTING, s3_delete_cors},
    {ANY, BUCKET, "cors", NULL, SETTING, not_allowed},
    {"PUT", BUCKET, "acl", NULL, NEED_BUCKET, s3_put_bucket_acl},
    {"PUT", BUCKET, "policy", NULL, NEED_BUCKET, s3_put_policy},
    {"PUT", BUCKET, "versioning", NULL, NEED_BUCKET, s3_put_versioning},
    {"PUT", BUCKET, "tagging", NULL, NEED_BUCKET, s3_bucket_tagging},
    {"PUT", BUCKET, "object-lock", NULL, NEED_BUCKET, s3_put_object_lock},
    {"PUT", BUCKET, "lifecycle", NULL, NEED_BUCKET, s3_bucket_lifecycle},
    {"PUT", BUCKET, "encryption", NULL, NEED_BUCKET, s3_bucket_encryption},
    {"GET", BUCKET, "encryption", NULL, NEED_BUCKET, s3_bucket_encryption},
    {"DELETE", BUCKET, "encryption", NULL, NEED_BUCKET, s3_bucket_encryption},
    {"PUT", BUCKET, ANY, NULL, BUCKET_NI, s3_create_bucket},
    {"HEAD", BUCKET, ANY, NULL, NEED_BUCKET, s3_head_bucket},
    {"GET", BUCKET, "location", NULL, NEED_BUCKET, s3_get_location},
    {"GET", BUCKET, "versioning", NULL, NEED_BUCKET, s3_get_versioning},
    {"GET", BUCKET, "acl", NULL, NEED_BUCKET, s3_get_bucket_acl},
    {"GET", BUCKET, "policyStatus", NULL, NEED_BUCKET, s3_get_policy_status},
    {"GET", BUCKET, "policy", NULL, NEED_BUCKET, s3_get_policy},
    {"GET", BUCKET, "uploads", NULL, NEED_BUCKET, s3_mpu_list},
    {"GET", BUCKET, "versions", NULL, NEED_BUCKET, s3_list_versions},
    {"GET", BUCKET, "tagging", NULL, NEED_BUCKET, s3_bucket_tagging},
    {"GET", BUCKET, "object-lock", NULL, NEED_BUCKET, s3_get_object_lock},
    {"GET", BUCKET, "lifecycle", NULL, NEED_BUCKET, s3_bucket_lifecycle},
    {"GET", BUCKET, ANY, NULL, NEED_BUCKET | BUCKET_NI, s3_list_bucket},
    {"DELETE", BUCKET, "policy", NULL, NEED_BUCKET, s3_delete_policy},
    {"DELETE", BUCKET, "tagging", NULL, NEED_BUCKET, s3_bucket_tagging},
    {"DELETE", BUCKET, "lifecycle", NULL, NEED_BUCKET, s3_bucket_lifecycle},
    {"DELETE", BUCKET, ANY, NULL, NEED_BUCKET | BUCKET_NI, s3_delete_bucket},
    {"POST", BUCKET, "delete", NULL, NEED_BUCKET, s3_delete_objects},
    {ANY, BUCKET, ANY, post_upload, NEED_BUCKET, s3_post_object},
    {ANY, BUCKET, ANY, NULL, NEED_BUCKET, not_allowed},

    {"PUT", OBJECT, "uploadId", NULL, 0, s3_mpu_part},
    {"PUT", OBJECT, "partNumber", NULL, 0, s3_mpu_part},
    {"PUT", OBJECT, "acl", NULL, 0, s3_put_object_acl},
    {"PUT", OBJECT, "tagging", NULL, 0, s3_object_tagging},
    {"PUT", OBJECT, "retention", NULL, 0, s3_object_retention},
    {"PUT", OBJECT, "legal-hold", NULL, 0, s3_object_legal_hold},
    {"PUT", OBJECT, ANY, copy_source, OBJECT_NI, s3_copy_object},
    {"PUT", OBJECT, ANY, NULL, OBJECT_NI, s3_put_object},
    {"POST", OBJECT, "uploads", NULL, 0, s3_mpu_create},
    {"POST", OBJECT, "uploadId", NULL, 0, s3_mpu_complete},
    {"POST", OBJECT, ANY, NULL, 0, not_allowed},
    {"GET", OBJECT, "uploadId", NULL, OBJ_BUCKET, s3_mpu_list_parts},
    {"GET", OBJECT, "acl", NULL, OBJ_BUCKET, s3_get_object_acl},
    {"GET", OBJECT, "tagging", NULL, OBJ_BUCKET, s3_object_tagging},
    {"GET", OBJECT, "retention", NULL, OBJ_BUCKET, s3_object_retention},
    {"GET", OBJECT, "attributes", NULL, OBJ_BUCKET, s3_get_object_attributes},
    {"GET", OBJECT, "legal-hold", NULL, OBJ_BUCKET, s3_object_legal_hold},
    {"GET", OBJECT, ANY, NULL, OBJ_BUCKET | OBJECT_NI, s3_get_object},
    {"HEAD", OBJECT, ANY, NULL, OBJ_BUCKET | OBJECT_NI, s3_head_object},
    {"DELETE", OBJECT, "uploadId", NULL, OBJ_BUCKET, s3_mpu_abort},
    {"DELETE", OBJECT, "tagging", NULL, OBJ_BUCKET, s3_object_tagging},
    {"DELETE", OBJECT, ANY, NULL, OBJ_BUCKET | OBJECT_NI, s3_delete_object},
    {ANY, OBJECT, ANY, NULL, OBJ_BUCKET, not_allowed},
};

static const struct op *
find(const struct s3_req *r, enum kind kind, bool preauth)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const struct op *o = &ops[i];
		if (o->kind != kind || (o->method && strcmp(o->method, r->h->method) != 0) ||
		    (o->sub && !ol_s3_query_has(r->query, o->sub)) || (o->when && !o->when(r)))
			continue;
		if (o->checks & SETTING && !(r->ba.loaded && r->ba.exists))
			continue;
		if (preauth != !!(o->checks & PREAUTH))
			return NULL;
		return o;
	}
	return NULL; /* not reached: each kind ends with a row for any method */
}

/* The row's checks; true when the handler may run (else the error was sent). */
static bool
checks_pass(struct s3_req *r, unsigned c)
{
	if (c & NEED_BUCKET && !s3_bucket_exists(r))
		return false;
	if (c & OBJ_BUCKET &&
	    (ol_s3_query_has(r->query, "uploadId") || ol_s3_query_has(r->query, "acl") ||
	     ol_s3_query_has(r->query, "tagging") || !ol_s3_bucket_name_ok(r->rt.bucket)) &&
	    !s3_bucket_exists(r))
		return false;
	if (c & BUCKET_NI && s3_bucket_sub_unsupported(r))
		return false;
	if (c & OBJECT_NI && s3_object_sub_unsupported(r))
		return false;
	return true;
}

static enum kind
kind_of(const struct s3_req *r)
{
	if (!r->rt.bucket[0])
		return SERVICE;
	return r->rt.key_len == 0 ? BUCKET : OBJECT;
}

bool
s3_dispatch_preauth(struct s3_req *r)
{
	const struct op *o = find(r, kind_of(r), true);
	if (!o)
		return false;
	o->serve(r);
	return true;
}

void
s3_dispatch(struct s3_req *r)
{
	enum kind k = kind_of(r);
	if (k == OBJECT && r->rt.key_len > OL_S3_MAX_KEY) {
		s3_error(r, OL_S3E_KEY_TOO_LONG, NULL);
		return;
	}
	const struct op *o = find(r, k, false);
	if (!o)
		s3_error(r, OL_S3E_METHOD_NOT_ALLOWED, NULL);
	else if (checks_pass(r, o->checks))
		o->serve(r);
}
