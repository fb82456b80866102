/* s3/auth/sigv4.h - AWS Signature Version 4 verification for S3 (pure, no sockets).
 *
 * Both forms are handled: the Authorization header ("AWS4-HMAC-SHA256 Credential=...,
 * SignedHeaders=..., Signature=...") and the presigned query (X-Amz-Algorithm, X-Amz-Credential,
 * X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature).
 *
 * All functions are thread-safe and keep no global state. Error codes are negative and live
 * below -4096 (project range); ol_sigv4_s3_code()/ol_sigv4_http_status() map them to the S3
 * error a real S3 returns. */
#ifndef OL_S3_AUTH_SIGV4_H
#define OL_S3_AUTH_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Errors of ol_sigv4_verify(); the S3 error each maps to is in ol_sigv4_s3_code(). */
enum ol_sigv4_err {
	OL_SIGV4_ERR_SIGNATURE_MISMATCH = -4300, /* SignatureDoesNotMatch 403 */
	OL_SIGV4_ERR_INVALID_ACCESS_KEY = -4301, /* InvalidAccessKeyId 403 */
	OL_SIGV4_ERR_SKEWED = -4302,		 /* RequestTimeTooSkewed 403 */
	OL_SIGV4_ERR_EXPIRED = -4303,		 /* AccessDenied 403 "Request has expired" */
	OL_SIGV4_ERR_MALFORMED = -4304,		 /* AuthorizationHeaderMalformed 400 (header),
						    AuthorizationQueryParametersError (query) */
	OL_SIGV4_ERR_MISSING = -4305,		 /* AccessDenied 403 (anonymous request) */
	OL_SIGV4_ERR_UNSUPPORTED_ALG = -4306,	 /* InvalidArgument 400 (header),
						    AuthorizationQueryParametersError (query) */
	OL_SIGV4_ERR_BAD_CONTENT_SHA256 = -4307, /* InvalidArgument 400 */
	OL_SIGV4_ERR_NO_CONTENT_SHA256 = -4308,	 /* InvalidRequest 400; no longer returned by
						    verify (see _NEED_BODY_HASH) */
	OL_SIGV4_ERR_WRONG_REGION = -4309,	 /* AuthorizationHeaderMalformed 400 (header),
						    AuthorizationQueryParametersError (query) */
	OL_SIGV4_ERR_NOMEM = -4310,		 /* InternalError 500 */
	OL_SIGV4_ERR_NEED_BODY_HASH = -4311,	 /* no answer yet: see ol_sigv4_verify_body();
						    InvalidRequest 400 for a caller without it */
	OL_SIGV4_ERR_UNSIGNED_HEADERS = -4312,	 /* AccessDenied 403 "There were headers present
						    in the request which were not signed";
						    names in unsigned_headers */
};

/* One request header; name and value need not be NUL-terminated. Name compared
 * case-insensitively; value is trimmed and inner runs of spaces collapsed as SigV4 requires. */
struct ol_sigv4_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* The request as received. path and query are raw (as on the wire, still percent-encoded);
 * query excludes the '?', and may be NULL/0. headers: every header of the request (duplicates
 * are joined with ',' as SigV4 says). Nothing is copied; all pointers are borrowed. */
struct ol_sigv4_request {
	const char *method; /* NUL-terminated: "GET", "PUT", ... */
	const char *path;
	size_t path_len;
	const char *query;
	size_t query_len;
	const struct ol_sigv4_header *headers;
	size_t n_headers;
};

/* Secret for an access key, NUL-terminated, or NULL when the key is unknown. The returned
 * pointer must stay valid until ol_sigv4_verify() returns. */
typedef const char *(*ol_sigv4_secret_fn)(const char *access_key, void *arg);

enum ol_sigv4_payload {
	OL_SIGV4_PAYLOAD_SHA256 = 0,		   /* hex sha256 signed: caller checks the body */
	OL_SIGV4_PAYLOAD_UNSIGNED,		   /* UNSIGNED-PAYLOAD (and every presigned URL) */
	OL_SIGV4_PAYLOAD_STREAMING_SIGNED,	   /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
	OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER, /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
	OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

#define OL_SIGV4_MAX_SKEW    (15 * 60) /* seconds either side of now */
#define OL_SIGV4_MAX_EXPIRES 604800    /* presigned X-Amz-Expires upper bound (7 days) */

/* What a verified request carries; everything the aws-chunked decoder needs. */
struct ol_sigv4_result {
	char access_key[129];
	enum ol_sigv4_payload payload;
	int presigned;		    /* 1: query form, 0: Authorization header */
	int has_payload_sha256;	    /* payload == OL_SIGV4_PAYLOAD_SHA256 */
	uint8_t payload_sha256[32]; /* raw digest the body must have when has_payload_sha256 */
	uint8_t signing_key[32];    /* HMAC chain key for date/region/s3/aws4_request */
	char seed_signature[65];    /* lowercase hex signature of the request */
	char scope[128];	    /* "20130524/us-east-1/s3/aws4_request" */
	char amz_date[17];	    /* "20130524T000000Z" */
	char message[320];	    /* human-readable reason on error, "" on success */
	/* On OL_SIGV4_ERR_UNSIGNED_HEADERS: the lowercase names of the x-amz-* headers present
	 * but not signed, ", "-separated (as AWS lists them in <HeadersNotSigned>), cut at a
	 * name boundary when they do not all fit. */
	char unsigned_headers[256];
	/* On OL_SIGV4_ERR_SIGNATURE_MISMATCH only: malloc'd NUL-terminated copies, for the
	 * <StringToSign> and <CanonicalRequest> elements of the error XML. Freed by
	 * ol_sigv4_result_fini(). NULL otherwise. */
	char *string_to_sign;
	char *canonical_request;
	/* On OL_SIGV4_ERR_NEED_BODY_HASH: 1, and the private state below holds the canonical
	 * request without its payload hash until ol_sigv4_verify_body(). */
	int body_hash_pending;
	char *pending_canonical;
	char pending_signature[65];
};

/* Verify req. region: the configured server region ("us-east-1"). now: the server clock.
 * secret_for/arg: credential lookup. out is always initialised (also on error, with
 * out->message set); call ol_sigv4_result_fini(out) afterwards in every case.
 * Returns 0 when the signature is valid, else a negative enum ol_sigv4_err:
 *   _MISSING (anonymous: no Authorization header and no X-Amz-* auth query),
 *   _MALFORMED, _UNSUPPORTED_ALG, _WRONG_REGION, _SKEWED, _EXPIRED, _INVALID_ACCESS_KEY,
 *   _BAD_CONTENT_SHA256, _UNSIGNED_HEADERS, _SIGNATURE_MISMATCH, _NOMEM,
 *   _NEED_BODY_HASH (below).
 * Rules: algorithm AWS4-HMAC-SHA256; credential scope date == X-Amz-Date's day; scope region ==
 * region; service "s3"; X-Amz-Date within OL_SIGV4_MAX_SKEW of now (header form; presigned: not
 * in the future by more than the skew, and now <= date + X-Amz-Expires); SignedHeaders must
 * contain "host". Signatures are compared in constant time. Canonical URI and query are the
 * path and query decoded once and re-encoded with the AWS unreserved set (so "+" means a
 * literal plus, %2B), the query sorted; when that does not match, the header form is retried
 * once with path and query exactly as sent (what curl 7.x signs), which still covers every
 * byte. Every x-amz-* header present must be signed (in SignedHeaders / X-Amz-SignedHeaders),
 * else _UNSIGNED_HEADERS, checked before the signature; in the header form x-amz-date and
 * x-amz-content-sha256 are exempt because the signature covers them anyway (the string to
 * sign carries the date, the canonical request the payload hash). */
int ol_sigv4_verify(const struct ol_sigv4_request *req, const char *region, time_t now,
		    ol_sigv4_secret_fn secret_for, void *arg, struct ol_sigv4_result *out);

/* Header form without x-amz-content-sha256 (curl 7.88 --aws-sigv4, Debian 12, signs the SHA-256 of
 * the body as plain SigV4 does): when the request has no body (no Transfer-Encoding and
 * Content-Length absent or 0) verify() uses the empty-body hash and answers at once. With a
 * body it checks everything else (scope, region, key, time) and returns
 * OL_SIGV4_ERR_NEED_BODY_HASH with r->body_hash_pending = 1: the caller hashes the WHOLE body
 * with SHA-256 (before acting on the request or committing anything) and calls this.
 * Returns 0 (then r is as after a successful verify, has_payload_sha256 = 1), or
 * OL_SIGV4_ERR_SIGNATURE_MISMATCH (string_to_sign / canonical_request set), -EINVAL when
 * nothing is pending, _NOMEM. A caller that does not support this treats _NEED_BODY_HASH as
 * an error (ol_sigv4_s3_code gives InvalidRequest). */
int ol_sigv4_verify_body(struct ol_sigv4_result *r, const uint8_t body_sha256[32]);

/* Free what ol_sigv4_verify() allocated in r (safe to call twice, and on a zeroed r). */
void ol_sigv4_result_fini(struct ol_sigv4_result *r);

/* 1 when the request carries no SigV4 at all (no Authorization header, no X-Amz-Algorithm /
 * X-Amz-Credential / X-Amz-Signature in the query): the caller serves it as anonymous, which
 * this server answers with AccessDenied. 0 otherwise. */
int ol_sigv4_is_anonymous(const struct ol_sigv4_request *req);

/* S3 error code ("SignatureDoesNotMatch", ...) and HTTP status for a verify() error.
 * presigned selects AuthorizationQueryParametersError where S3 uses it. Unknown -> InternalError.
 */
const char *ol_sigv4_s3_code(int err, int presigned);
int ol_sigv4_http_status(int err);

/* ---- Signature Version 2 (sigv2.c) ----
 *
 * The older scheme some SDKs and tools still use, and boto3's default for presigned URLs to a
 * custom endpoint: "Authorization: AWS <access key>:<base64 HMAC-SHA1>" with a Date (or
 * x-amz-date) header within OL_SIGV4_MAX_SKEW, or the query AWSAccessKeyId, Signature and
 * Expires (epoch seconds, not passed). The string to sign is the method, Content-MD5,
 * Content-Type, the date (Expires when presigned; empty when x-amz-date is sent), every
 * x-amz-* header (lowercased, sorted, values trimmed, repeats joined with ','), and the path
 * as sent with the sub-resources of the query (acl, uploadId, versionId, response-*, ...;
 * sorted, values decoded). Path-style only: a virtual-host request signs "/bucket" + path,
 * which this does not rebuild. The body is not signed (out->payload is UNSIGNED). */

/* 1 when req carries a V2 signature (an "AWS " Authorization header, or AWSAccessKeyId and
 * Signature in the query), 0 otherwise. */
int ol_sigv2_present(const struct ol_sigv4_request *req);
/* As ol_sigv4_verify for V2: 0, or _MALFORMED, _MISSING (no date), _SKEWED, _EXPIRED,
 * _INVALID_ACCESS_KEY, _SIGNATURE_MISMATCH (string_to_sign set), _NOMEM. out->access_key and
 * out->presigned are set; call ol_sigv4_result_fini(out) in every case. */
int ol_sigv2_verify(const struct ol_sigv4_request *req, time_t now, ol_sigv4_secret_fn secret_for,
		    void *arg, struct ol_sigv4_result *out);
/* The string to sign of req with its date line `date`, malloc'd into *out. 0, _MALFORMED,
 * _NOMEM. */
int ol_sigv2_string_to_sign(const struct ol_sigv4_request *req, const char *date, char **out);
/* base64 HMAC-SHA1 of string_to_sign under secret into out (29 bytes with the NUL).
 * 0, -ENOSPC, _NOMEM. */
int ol_sigv2_sign(const char *secret, const char *string_to_sign, char *out, size_t cap);

/* ---- signing side (for the C client, bench and tests) ---- */

/* key = HMAC chain over "AWS4"+secret, date8 ("20130524"), region, service, "aws4_request".
 * Returns 0 or _NOMEM. */
int ol_sigv4_signing_key(const char *secret, const char *date8, const char *region,
			 const char *service, uint8_t key[32]);

/* Compute the Authorization header value for req, signing every header in req->headers
 * (which must include host, x-amz-date and, for S3, x-amz-content-sha256 = payload_hash).
 * amz_date: "YYYYMMDDTHHMMSSZ". Writes a NUL-terminated value into out (cap bytes).
 * Returns 0, -ENOSPC, _MALFORMED or _NOMEM. */
int ol_sigv4_sign(const struct ol_sigv4_request *req, const char *access_key, const char *secret,
		  const char *region, const char *amz_date, const char *payload_hash, char *out,
		  size_t cap);

#endif
