/* s3/s3int.h - internals shared by the S3 handler files (not a public API). */
#ifndef OL_S3_S3INT_H
#define OL_S3_S3INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "http/http.h"
#include "s3/auth/awschunked.h"
#include "s3/auth/checksum.h"
#include "s3/auth/sigv4.h"
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
	struct ol_http_server *http;
	char endpoint_host[OL_CFG_STR];
	uint64_t max_object_size;
};

struct s3_req {
	struct ol_s3_server *srv;
	struct ol_http_req *h;
	const char *query;
	struct ol_s3_route rt;
	struct ol_sigv4_result auth;
	char reqid[20];
	const char *op;
	int status;
	bool responded;
};

/* Body reader: de-frames aws-chunked, feeds MD5 / SHA-256 / x-amz-checksum-* and checks them
 * (with Content-MD5 and the decoded length) when the body ends. */
struct s3_body {
	struct s3_req *r;
	struct ol_awschunked *dec;
	uint8_t *buf;
	size_t cap, pos, len;
	bool eof, done;
	uint64_t got, max;
	int64_t expect; /* decoded length or -1 */
	struct ol_cksum md5, sha256, ck;
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
void s3_send_xml(struct s3_req *r, int status, struct ol_s3_buf *b);
/* Adds x-amz-request-id / x-amz-id-2 to h (room for 2 more entries at h[n]); returns new n. */
size_t s3_common_headers(struct s3_req *r, struct ol_http_header *h, size_t n);
/* Check the bucket exists (sends NoSuchBucket / InvalidBucketName and returns false). */
bool s3_bucket_exists(struct s3_req *r);

/* metrics.c */
void s3_metrics_record(const char *op, int status, uint64_t us);
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
void s3_meta_from_headers(struct s3_req *r, struct ol_s3_buf *meta);
int s3_length_check(struct s3_req *r, uint64_t max);
/* User metadata (x-amz-meta-* names without the prefix, plus values) within
 * S3_MAX_USER_META: 0, or -1 with MetadataTooLarge sent. */
int s3_user_meta_check(struct s3_req *r);

/* object.c */
void s3_object(struct s3_req *r);
/* If-Match / If-None-Match of a write into c (if_match points into etag); checks them once
 * against the current object. 0, or -1 with the error sent (412, 404, 501). */
int s3_write_cond(struct s3_req *r, struct ol_store_cond *c, char etag[OL_STORE_ETAG_MAX]);
/* s3_store_error, plus -ECANCELED -> 412 PreconditionFailed, -ENODATA -> 404 NoSuchKey. */
void s3_write_error(struct s3_req *r, int rc, enum ol_s3_err enoent);
void s3_canned_acl(struct s3_req *r);
/* UploadPartCopy into the open part writer p (consumes p). */
void s3_mpu_part_copy(struct s3_req *r, struct ol_put *p);
/* bucket.c */
void s3_service(struct s3_req *r);
void s3_bucket(struct s3_req *r);
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

#endif
