/* s3/s3int.h - internals shared by the S3 handler files (not a public API). */
#ifndef OL_S3_S3INT_H
#define OL_S3_S3INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "http/http.h"
#include "s3/auth/awschunked.h"
#include "s3/auth/checksum.h"
#include "s3/auth/md5mb.h"
#include "s3/acl.h"
#include "s3/auth/sigv4.h"
#include "s3/cors.h"
#include "s3/s3.h"
#include "s3/s3util.h"
#include "store/store.h"

#define S3_IO_BUF	 (1u << 20) /* body / read chunk */
#define S3_MIN_PART_SIZE (5ull << 20)
#define S3_MAX_PART_SIZE (5ull << 30)
#define S3_MAX_USER_META 2048u /* x-amz-meta-* names (less the prefix) + values, as AWS */

struct ol_s3_server {
	const struct ol_config *cfg;
	struct ol_store *st;
	const struct ol_http_server *_Atomic http; /* serving us, for its counters (metrics.c) */
	char endpoint_host[OL_S3_ENDPOINT_NAMES];  /* ol_s3_endpoint_names */
	uint64_t max_object_size;
	struct s3_lc_scanner *lc; /* lifecycle.c; NULL when not started */
	bool sse_master_set;	  /* sse.c: [s3] sse_master_key_file loaded */
	uint8_t sse_master[32];
	char sse_kid[17]; /* id of the master key (kept with each SSE-S3 object) */
	bool metrics;	  /* its renderers are registered (the process's first server only) */
	void (*bucket_hook)(void *arg); /* ol_s3_set_bucket_hook */
	void *bucket_hook_arg;
};

/* A bucket's access attributes, loaded from its record (access.c). */
struct s3_bucket_attrs {
	bool loaded, exists;
	int rc;	    /* store error when !exists */
	char *blob; /* raw attrs (malloc'd), blob_len bytes */
	size_t blob_len;
	struct ol_acl acl;  /* stored ACL, or owner FULL_CONTROL */
	char ownership[32]; /* ObjectOwnership ("" = ObjectWriter) */
	struct ol_pab pab;  /* public access block (all false = none) */
};

/* What a request asks for, as an access check sees it (access.c). */
struct s3_action {
	const char *name; /* IAM action: "s3:GetObject" */
	unsigned perm;	  /* ACL permission it needs (OL_ACL_*), 0 = owner only */
	bool object_acl;  /* checked against the object's ACL (else the bucket's) */
};

struct s3_req {
	struct ol_s3_server *srv;
	struct ol_http_req *h;
	const char *query;
	struct ol_s3_route rt;
	struct ol_sigv4_result auth;
	char reqid[20];
	const char *user; /* requester's user name; NULL: anonymous */
	bool admin;	  /* the administrator: every access allowed */
	struct s3_bucket_attrs ba;
	struct s3_action act;
	int pol;	  /* bucket policy verdict for act: 1 allow, -1 deny, 0 none */
	bool pol_obj;	  /* the policy tests the object's tags: pol is judged again, and the
			   * access decided, once the object is read (s3_object_access) */
	bool has_req_acl; /* x-amz-acl / x-amz-grant-* given: req_acl holds it */
	struct ol_acl req_acl;
	struct {
		bool on; /* a CORS rule matched the request's Origin: headers go out */
		char origin[256], methods[64], expose[512];
		long max_age;
	} cors;
	const char *op;
	int status;
	bool responded;
	bool may_decline; /* ol_s3_handle_read: a 404 or 5xx is not sent ... */
	bool declined;	  /* ... and was not: the caller answers the request */
};

/* Body reader: de-frames aws-chunked, feeds MD5 / SHA-256 / x-amz-checksum-* and checks them
 * (with Content-MD5 and the decoded length) when the body ends. */
struct s3_body {
	struct s3_req *r;
	struct ol_awschunked *dec;
	uint8_t *buf;
	size_t cap, pos, len;
	bool pooled; /* buf is the store's cached stripe buffer (ol_store_buf_get) */
	bool eof, done;
	uint64_t got, max;
	int64_t expect; /* decoded length or -1 */
	struct ol_md5mb md5;
	struct ol_cksum sha256, ck;
	bool want_sha256;
	enum ol_cksum_alg alg;
	char ck_expect[OL_CKSUM_MAX_B64]; /* from the header; "" = trailer or none */
	const char *ck_trailer;		  /* trailer name expected ("x-amz-checksum-crc32") */
	uint8_t md5_raw[OL_CKSUM_MAX_RAW];
	char ck_b64[OL_CKSUM_MAX_B64]; /* computed, set when done */
	enum ol_s3_err err;
	const char *errmsg;
};

/* server.c */
void s3_error(struct s3_req *r, enum ol_s3_err e, const char *msg);
void s3_error_code(struct s3_req *r, const char *code, int status, const char *msg,
		   const char *extra);
/* Map a store errno to an S3 error (nokey/nobucket: what -ENOENT / -ENXIO mean here). */
void s3_store_error(struct s3_req *r, int rc, enum ol_s3_err enoent);
/* Send status with the common headers plus h[0..n) and body (content type XML if body). */
void s3_send(struct s3_req *r, int status, const struct ol_http_header *h, size_t n,
	     const char *body, size_t len);
void s3_send_xml(struct s3_req *r, int status, struct ol_buf *b);
/* Adds x-amz-request-id / x-amz-id-2 to h (room for 2 more entries at h[n]); returns new n. */
size_t s3_common_headers(struct s3_req *r, struct ol_http_header *h, size_t n);
/* Check the bucket exists (sends NoSuchBucket / InvalidBucketName and returns false). */
bool s3_bucket_exists(struct s3_req *r);

/* access.c */
struct ol_strbuf;
/* Requester identity from r->auth (or anonymous). */
void s3_identity(struct s3_req *r, bool anonymous);
/* Load r->ba for r->rt.bucket once (any request naming a bucket). */
void s3_bucket_load(struct s3_req *r);
/* Call after every write of a bucket record (create, delete, attrs): the per-thread caches of
 * bucket attrs that s3_bucket_load keeps are then reread. */
void s3_bucket_changed(void);
/* The same after a bucket record write of server s (create, delete, attrs): also calls its
 * bucket hook (ol_s3_set_bucket_hook), on the request's thread. */
void s3_bucket_written(struct ol_s3_server *s);
/* Owner of the loaded bucket ("admin" for buckets without one). */
const char *s3_bucket_owner(const struct s3_req *r);
/* Store the loaded bucket's attrs with name set to val (vl < 0: removed). 0 or -errno. */
/* Query parameter name of r into buf (cap bytes, decoded), its length into len and true into
 * has when present (each may be NULL); absent: "" and 0. 0, or -1 when too long or not valid
 * URL encoding (nothing sent). listing.c. */
int s3_query_param(struct s3_req *r, const char *name, char *buf, size_t cap, size_t *len,
		   bool *has);
int s3_bucket_attr_store(struct s3_req *r, const char *name, const char *val, long vl);
/* Answer a bucket-setting write: status with no body when rc is 0, else the store error
 * (NoSuchBucket for -ENOENT). */
void s3_attr_stored(struct s3_req *r, int rc, int status);
/* Two attrs in one record write (name2 may be NULL). */
int s3_bucket_attr_store2(struct s3_req *r, const char *name, const char *val, long vl,
			  const char *name2, const char *val2, long vl2);
/* Classify the request, evaluate the bucket policy and check what can be checked before the
 * object is read. false with the error sent (AccessDenied, NoSuchBucket, 400 for bad ACL
 * headers). */
bool s3_access_check(struct s3_req *r);
/* Object-level check for GetObject/HeadObject/Get|PutObjectAcl: meta is the object's blob.
 * false with AccessDenied sent. */
bool s3_object_access(struct s3_req *r, const void *meta, size_t meta_len);
/* The object does not exist: 404 (enoent) to those who may list the bucket, else 403. */
void s3_missing_key(struct s3_req *r, enum ol_s3_err enoent);
/* The object's ACL (stored, or owner FULL_CONTROL) from its metadata blob. */
void s3_object_acl(struct s3_req *r, const void *meta, size_t meta_len, struct ol_acl *a);
/* Append ol-owner / ol-acl entries for a new object written by this request. */
void s3_meta_add_owner(struct s3_req *r, struct ol_buf *meta);
/* Read access to a copy source (bucket sb, object meta si): false with the error sent. */
bool s3_source_access(struct s3_req *r, const char *sb, const char *sk, size_t skl,
		      const void *meta, size_t meta_len);
void s3_access_fini(struct s3_req *r);
/* DeleteObjects: may the requester delete this key of the bucket? (logged and counted) */
bool s3_key_delete_ok(struct s3_req *r, const char *key, size_t key_len);
/* Is id a configured user (or "admin")? */
bool s3_user_known(const struct s3_req *r, const char *id);
/* The ACL a PUT ?acl asks for: its x-amz-acl / x-amz-grant-* headers, else its
 * AccessControlPolicy body; owner is the resource's. 0, or -1 with the error sent. */
int s3_acl_from_request(struct s3_req *r, const char *owner, struct ol_acl *out);
/* policy.c: the loaded bucket's policy for action on the request's resource:
 * 1 allowed, -1 explicitly denied, 0 not mentioned (no policy). */
int s3_policy_verdict(struct s3_req *r, const char *action);
/* The same for another key of the request's bucket (DeleteObjects). */
int s3_policy_verdict_key(struct s3_req *r, const char *action, const char *key, size_t key_len);
/* The verdict with the object read (meta: its blob), for s3:ExistingObjectTag/<key>. */
int s3_policy_verdict_obj(struct s3_req *r, const char *action, const void *meta, size_t meta_len);
/* Does the loaded bucket's policy have an s3:ExistingObjectTag condition? */
bool s3_policy_uses_object_tags(struct s3_req *r);
/* Bucket policy handlers (the bucket is loaded and the access checked). */
void s3_put_policy(struct s3_req *r);
void s3_get_policy(struct s3_req *r);
void s3_delete_policy(struct s3_req *r);
void s3_get_policy_status(struct s3_req *r);
/* Public access block: PUT of a public policy refused (true: 403 AccessDenied sent). */
bool s3_public_policy_blocked(struct s3_req *r, bool is_public);
void s3_access_metrics_render(struct ol_strbuf *out, void *arg);

/* post.c: POST of a multipart/form-data body to a bucket (browser upload). */
void s3_post_object(struct s3_req *r);
/* access.c: PutObject by a POST upload (identity set, key in r->rt): canned acl field may be
 * NULL. false with the error sent. */
bool s3_access_post(struct s3_req *r, const char *acl);
/* Is this a browser POST upload (POST to a bucket with a form body)? */
bool s3_is_post_upload(const struct s3_req *r);

/* settings.c */
/* PUT/GET/DELETE ?publicAccessBlock, ?ownershipControls, ?cors (routed by dispatch.c) */
void s3_put_pab(struct s3_req *r);
void s3_get_pab(struct s3_req *r);
void s3_delete_pab(struct s3_req *r);
void s3_put_ownership(struct s3_req *r);
void s3_get_ownership(struct s3_req *r);
void s3_delete_ownership(struct s3_req *r);
void s3_put_cors(struct s3_req *r);
void s3_get_cors(struct s3_req *r);
void s3_delete_cors(struct s3_req *r);
/* OPTIONS: a CORS preflight, answered from the bucket's rules (no signature needed). */
void s3_cors_preflight(struct s3_req *r);
/* A request with Origin on a bucket with CORS rules: note the headers to send. */
void s3_cors_request(struct s3_req *r);
/* Append the noted CORS headers (up to 4) to h[n..]; returns the new n. */
size_t s3_cors_headers(struct s3_req *r, struct ol_http_header *h, size_t n);
/* access.c: is the loaded bucket's ACL the owner's FULL_CONTROL alone? */
bool s3_bucket_acl_private(const struct s3_req *r);
/* Does it grant AllUsers or AuthenticatedUsers anything? */
bool s3_bucket_acl_public(const struct s3_req *r);

/* versioning.c */
/* The loaded bucket's versioning mode (OL_STORE_VER_*) for the store. */
int s3_vmode(const struct s3_req *r);
/* The versionId query parameter: *vid NULL when absent. 0, or -1 with the error sent. */
int s3_version_param(struct s3_req *r, char buf[OL_S3_MAX_VID + 1], const char **vid);
/* Append x-amz-version-id (versioned bucket or a real version) and x-amz-delete-marker to
 * h[n..] (room for 2); returns the new n. */
size_t s3_version_headers(const struct s3_req *r, const struct ol_obj_info *in,
			  struct ol_http_header *h, size_t n);
/* The answer of a write (PutObject, CopyObject, CompleteMultipartUpload) that made version in:
 * x-amz-version-id with its id, none for the null version (versioning suspended or never on),
 * as AWS's PutObject answers in a suspended bucket (room for 1). */
size_t s3_write_version_headers(const struct ol_obj_info *in, struct ol_http_header *h, size_t n);
/* Answer a store error of a versioned read: delete marker (404 with the marker headers, 405
 * for one asked by id), NoSuchVersion / bad id (asked: a versionId was given). true when
 * answered. */
bool s3_version_error(struct s3_req *r, int rc, const struct ol_obj_info *in, bool asked);
void s3_put_versioning(struct s3_req *r);
void s3_get_versioning(struct s3_req *r);

/* tagging.c */
/* PUT/GET/DELETE ?tagging of the loaded bucket, of the request's object. */
void s3_bucket_tagging(struct s3_req *r);
void s3_object_tagging(struct s3_req *r);
/* x-amz-tagging: checked (meta NULL: only that), then added to meta; replace: meta's own
 * tags go first (and without the header none are left). 0, or -1 with InvalidTag sent. */
int s3_tagging_header(struct s3_req *r, struct ol_buf *meta, bool replace);
/* A Tagging XML document (a POST upload's "tagging" field) appended to meta as the object's
 * tags: 0, or -1 with 400 MalformedXML / InvalidTag sent. */
int s3_tagging_xml_meta(struct s3_req *r, const char *xml, struct ol_buf *meta);
/* Tags of a metadata blob: their count (x-amz-tagging-count); copy them into meta. */
size_t s3_tag_count(const void *meta, size_t len);
void s3_tags_copy(const void *src, size_t len, struct ol_buf *meta);

/* objlock.c: object lock (the pure parts are in rules.h) */
int64_t s3_now_ms(void); /* CLOCK_REALTIME in ms */
/* Was the loaded bucket created with (or given) object lock? */
bool s3_lock_enabled(const struct s3_req *r);
void s3_put_object_lock(struct s3_req *r); /* PUT/GET ?object-lock of the loaded bucket */
void s3_get_object_lock(struct s3_req *r);
void s3_object_retention(struct s3_req *r);  /* GET/PUT ?retention of an object version */
void s3_object_legal_hold(struct s3_req *r); /* GET/PUT ?legal-hold */
/* The x-amz-object-lock-* headers of a PUT, copy or CreateMultipartUpload, checked (a PUT
 * with them needs Content-MD5 or a checksum: need_checksum). 0, or -1 with the error sent. */
int s3_lock_write_check(struct s3_req *r, bool need_checksum);
/* Replace the lock entries of a new version's meta: from the checked headers, else the
 * bucket's default retention, else none (a copy never takes its source's lock). */
void s3_lock_write_meta(struct s3_req *r, struct ol_buf *meta);
/* The lock headers of a version for GET/HEAD: names and values (up to 3); the count. */
size_t s3_lock_headers(const void *meta, size_t len, const char *name[3], char val[3][40]);
/* May version vid of key (in the request's bucket) be removed for good? 0 (vid NULL, no lock
 * on the bucket, no such version, not locked, or a GOVERNANCE lock with the bypass header and
 * permission), or -EPERM (locked: answer s3_lock_denied). */
int s3_lock_delete_check(struct s3_req *r, const char *key, size_t kl, const char *vid);
void s3_lock_denied(struct s3_req *r); /* 403 AccessDenied, "protected by object lock" */
const char *s3_lock_denied_message(void);
/* access.c: may the requester bypass GOVERNANCE retention of key (s3:BypassGovernanceRetention:
 * the administrator, a policy that allows it, or the bucket owner unless a policy denies)? */
bool s3_may_bypass_governance(struct s3_req *r, const char *key, size_t kl);
/* bucket.c: does the request carry Content-MD5 or an x-amz-checksum-* (header or trailer)? */
bool s3_has_checksum(struct s3_req *r);

/* lifecycle.c: PUT/GET/DELETE ?lifecycle, the x-amz-expiration header, the scanner */
void s3_bucket_lifecycle(struct s3_req *r);
/* x-amz-expiration for an object (key, size, mtime, tags from meta) of the loaded bucket that
 * an Expiration rule matches: true with out set ('expiry-date="...", rule-id="..."'). */
bool s3_lc_expiration(struct s3_req *r, const char *key, size_t kl, const struct ol_obj_info *in,
		      const void *meta, size_t meta_len, char out[400]);
/* Start / stop the background scanner of the server's buckets (its own thread). */
void s3_lc_start(struct ol_s3_server *s);
void s3_lc_stop(struct ol_s3_server *s);

/* metrics.c */
void s3_metrics_record(const char *op, int status, uint64_t us);
/* The operation a request asks for, from its method, query, route (bucket / key present) and
 * whether it names a copy source: for counting a request refused before its handler named it
 * (a missing bucket, access denied). Pure; returns a static string, "Other" when none fits. */
const char *s3_metrics_op(const char *method, const char *query, bool bucket, bool key, bool copy);
struct ol_strbuf;
void s3_metrics_render(struct ol_strbuf *out, void *arg);

/* body.c */
int s3_body_init(struct s3_body *b, struct s3_req *r, uint64_t max);
/* 1 + span, 0 when the body ended and every check passed, -1 with b->err set. */
int s3_body_next(struct s3_body *b, const uint8_t **data, size_t *n);
void s3_body_fini(struct s3_body *b);
/* Read a whole small body (<= cap) through the checks into a malloc'd buffer. */
int s3_body_slurp(struct s3_req *r, size_t cap, char **out, size_t *len, struct s3_body *b);
/* Build the metadata blob from request headers (standard + x-amz-meta-*). */
void s3_meta_from_headers(struct s3_req *r, struct ol_buf *meta);
int s3_length_check(struct s3_req *r, uint64_t max);
/* User metadata (x-amz-meta-* names without the prefix, plus values) within
 * S3_MAX_USER_META: 0, or -1 with MetadataTooLarge sent. */
int s3_user_meta_check(struct s3_req *r);

/* dispatch.c: the table of S3 operations. preauth serves what needs no signature (a CORS
 * preflight): true when it answered. s3_dispatch serves the rest, after the access check. */
bool s3_dispatch_preauth(struct s3_req *r);
void s3_dispatch(struct s3_req *r);

/* object.c: the object operations (routed by dispatch.c) */
void s3_put_object(struct s3_req *r);
void s3_copy_object(struct s3_req *r);
void s3_get_object(struct s3_req *r);
void s3_head_object(struct s3_req *r);
void s3_delete_object(struct s3_req *r);
void s3_get_object_acl(struct s3_req *r);
void s3_put_object_acl(struct s3_req *r);
/* Open the request's object (its versionId) for a reader that may see it: true with *g open
 * (the caller closes it), false with the error answered (missing key or version, a delete
 * marker, store error, access denied). */
bool s3_open_object(struct s3_req *r, struct ol_get **g, struct ol_obj_info *in);
/* attributes.c: GET ?attributes (GetObjectAttributes) */
void s3_get_object_attributes(struct s3_req *r);
/* An object sub-resource that is not built (tagging, retention, ...): true with 501 sent. */
bool s3_object_sub_unsupported(struct s3_req *r);
/* If-Match / If-None-Match of a write into c (if_match points into etag); checks them once
 * against the current object. 0, or -1 with the error sent (412, 404, 501). */
int s3_write_cond(struct s3_req *r, struct ol_store_cond *c, char etag[OL_STORE_ETAG_MAX]);
/* s3_store_error, plus -ECANCELED -> 412 PreconditionFailed, -ENODATA -> 404 NoSuchKey. */
void s3_write_error(struct s3_req *r, int rc, enum ol_s3_err enoent);
/* UploadPartCopy into the open part writer p (consumes p), encrypted as e (the upload's), with
 * the checksum of the upload's algorithm ca (OL_CKSUM_NONE: none) kept after its ETag. */
struct s3_sse;
void s3_mpu_part_copy(struct s3_req *r, struct ol_put *p, const struct s3_sse *e,
		      enum ol_cksum_alg ca);
/* bucket.c: the service and bucket operations (routed by dispatch.c) */
void s3_service(struct s3_req *r);
void s3_create_bucket(struct s3_req *r);
void s3_delete_bucket(struct s3_req *r);
void s3_head_bucket(struct s3_req *r);
void s3_list_bucket(struct s3_req *r); /* ListObjects or ListObjectsV2 (list-type) */
void s3_list_versions(struct s3_req *r);
void s3_get_location(struct s3_req *r);
void s3_get_versioning(struct s3_req *r);
void s3_get_bucket_acl(struct s3_req *r);
void s3_put_bucket_acl(struct s3_req *r);
void s3_delete_objects(struct s3_req *r);
/* A bucket sub-resource that is not built (lifecycle, tagging, ...): true with 501 sent. */
bool s3_bucket_sub_unsupported(struct s3_req *r);
/* listing.c */
/* kind: 1 ListObjects, 2 ListObjectsV2, 3 ListObjectVersions (every version is "null") */
void s3_list_objects(struct s3_req *r, int kind);
/* multipart.c */
void s3_mpu_create(struct s3_req *r);
void s3_mpu_part(struct s3_req *r);
void s3_mpu_complete(struct s3_req *r);
void s3_mpu_abort(struct s3_req *r);
void s3_mpu_list_parts(struct s3_req *r);
void s3_mpu_list(struct s3_req *r);
/* copy source "/b/k" into bucket/key/len; 0 or -1 with the error sent. */
int s3_copy_source(struct s3_req *r, char *bucket, size_t bcap, char *key, size_t *klen);

/* object.c: copy len bytes at off of g into w (finished), the plaintext's MD5 into md5 (and
 * into ck when not NULL). 0, or -1 with the error sent. */
struct s3_sse_rd;
struct s3_sse_w;
int s3_copy_stream(struct s3_req *r, struct s3_sse_rd *g, uint64_t off, uint64_t len,
		   struct s3_sse_w *w, uint8_t md5[OL_CKSUM_MAX_RAW], struct ol_cksum *ck);
/* The CopyObjectResult / CopyPartResult answer; ck_elem (may be NULL): a checksum element
 * (ChecksumSHA256) with value ck_val. */
void s3_copy_respond(struct s3_req *r, const char *root, const char *etag, int64_t mtime_ns,
		     const struct ol_obj_info *di, const struct ol_obj_info *si,
		     const struct s3_sse *e, const char *ck_elem, const char *ck_val);

/* sse.c: server-side encryption (SSE-S3, SSE-C); the layout is described there */
#define S3_SSE_BLOCK (64u * 1024) /* plaintext bytes per AES-256-GCM block */
#define S3_SSE_TAG   16u
#define S3_SSE_HDR   8u /* random nonce prefix at the start of each segment (object or part) */
enum { S3_SSE_NONE = 0, S3_SSE_S3 = 1, S3_SSE_C = 2, S3_SSE_KMS = 3 };
#define S3_KMS_ID_MAX 256 /* a key id of [s3] sse_kms_keys, NUL included */
/* What a request's headers ask for (or its copy source's). */
struct s3_sse_req {
	int mode;
	uint8_t ckey[32];	    /* SSE-C customer key */
	char ckey_md5[32];	    /* its MD5, base64 */
	char kms_id[S3_KMS_ID_MAX]; /* SSE-KMS: the key id, resolved ("" = the bucket's) */
};
/* One object's encryption. */
struct s3_sse {
	int mode;
	uint8_t dkey[32];
	char ckey_md5[32];
	char kms_id[S3_KMS_ID_MAX]; /* SSE-KMS: the key id its data key is wrapped with */
};
/* Load [s3] sse_master_key_file (none: SSE-S3 refused). 0 or -EINVAL (logged). */
int s3_sse_load_master(struct ol_s3_server *s);
/* The SSE headers of the request (source: the x-amz-copy-source-...-customer-* ones): checked
 * as AWS does (aws:kms: 501). 0, or -1 with the error sent. */
int s3_sse_parse(struct s3_req *r, bool source, struct s3_sse_req *q);
void s3_sse_req_fini(struct s3_sse_req *q);
void s3_sse_fini(struct s3_sse *e);
/* A new object (or upload): q's mode, else the bucket's default; a fresh data key whose
 * wrapped form goes into meta. 0, or -1 with the error sent (no master key). */
int s3_sse_new(struct s3_req *r, const struct s3_sse_req *q, struct s3_sse *e, struct ol_buf *meta);
/* An existing object (or upload) with metadata blob meta, read with the keys of q: 0 with e
 * set (mode 0: not encrypted), or -1 with the error sent (missing or wrong SSE-C key, SSE-C
 * headers for an object that has none, master key not the one it was written with). */
int s3_sse_open(struct s3_req *r, const void *meta, size_t len, const struct s3_sse_req *q,
		struct s3_sse *e);
int s3_sse_meta_mode(const void *meta, size_t len); /* S3_SSE_* of a blob */
/* e's mode and KMS key id from a blob, no key (for response headers) */
void s3_sse_meta_info(const void *meta, size_t len, struct s3_sse *e);
/* SSE-KMS with key id (NULL or "": the first of [s3] sse_kms_keys) into q: 0, or -1 with the
 * error sent (501 no KMS configured, 400 KMS.NotFoundException an id it does not hold). */
int s3_sse_kms_pick(struct s3_req *r, const char *id, struct s3_sse_req *q);
/* Append the response headers of e (up to 2) to h[n..]; the new n. */
size_t s3_sse_headers(const struct s3_sse *e, struct ol_http_header *h, size_t n);
/* The ETag of plaintext with MD5 md5 (SSE-C: keyed, not the MD5). */
void s3_sse_etag(const struct s3_sse *e, const uint8_t md5[16], char etag[33]);
/* Plaintext length of an encrypted segment of clen stored bytes. */
uint64_t s3_sse_plain_len(uint64_t clen);
/* An object's size as S3 shows it: ol-sse-size of an encrypted one, else in->size. */
uint64_t s3_obj_size(const struct ol_obj_info *in);
/* BucketEncryption: PUT/GET/DELETE ?encryption of the loaded bucket. */
void s3_bucket_encryption(struct s3_req *r);
/* Writer: plaintext in, (encrypted) bytes to p; e NULL or mode 0 passes through. */
struct s3_sse_w {
	struct ol_put *p;
	const struct s3_sse *e;
	uint8_t prefix[S3_SSE_HDR];
	uint32_t blk;
	void *ctx; /* EVP_CIPHER_CTX keyed once */
	uint8_t *pbuf, *obuf;
	size_t plen, olen;
	uint64_t plain; /* plaintext bytes written */
};
int s3_sse_w_init(struct s3_sse_w *w, const struct s3_sse *e, struct ol_put *p);
int s3_sse_w_write(struct s3_sse_w *w, const void *d, size_t n); /* 0 or the store's -errno */
int s3_sse_w_finish(struct s3_sse_w *w);			 /* before put_commit */
void s3_sse_w_fini(struct s3_sse_w *w);
/* Reader: plaintext at plaintext offsets (decrypting only the blocks a read touches). */
struct s3_sse_seg {
	uint64_t cstart, clen, pstart, plen;
	uint8_t prefix[S3_SSE_HDR];
	bool have_prefix;
};
struct s3_sse_rd {
	struct ol_get *g;
	const struct s3_sse *e;
	uint64_t size; /* plaintext size */
	struct s3_sse_seg *seg;
	unsigned nseg;
	void *ctx; /* EVP_CIPHER_CTX keyed once */
	uint8_t *cbuf, *pbuf;
};
/* size: the store's size (used when not encrypted). */
int s3_sse_rd_init(struct s3_sse_rd *rd, const struct s3_sse *e, struct ol_get *g, uint64_t size);
/* As ol_store_get_read (a count, short only at the end, or -errno; OL_STORE_ECORRUPT when a
 * block fails its tag). */
ssize_t s3_sse_read(struct s3_sse_rd *rd, uint64_t off, void *buf, size_t len);
/* Plaintext part sizes, as ol_store_get_part_sizes. */
unsigned s3_sse_rd_parts(struct s3_sse_rd *rd, uint64_t *sizes, unsigned cap);
void s3_sse_rd_fini(struct s3_sse_rd *rd);

#endif
