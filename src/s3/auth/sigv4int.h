/* s3/auth/sigv4int.h - internals shared by sigv4.c (verify/sign) and canonical.c
 * (canonical request, encoding, HMAC). Not part of the public API. */
#ifndef OL_S3_AUTH_SIGV4INT_H
#define OL_S3_AUTH_SIGV4INT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

#include "s3/auth/sigv4.h"

#define ALG	     "AWS4-HMAC-SHA256"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_SIGNED   64	  /* headers in SignedHeaders */
#define MAX_PARAMS   1024 /* query parameters */
#define MAX_FIELD    1024 /* decoded auth query value / header parameter */

#define CANON_PRESIGNED 1 /* drop X-Amz-Signature from the query */
#define CANON_RAW	2 /* path and query exactly as on the wire (curl 7.x signs so) */

/* growable NUL-terminated buffer; oom is sticky */
struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};
void sv4_sb_add(struct sbuf *b, const void *s, size_t n);
void sv4_sb_adds(struct sbuf *b, const char *s);
void sv4_sb_addc(struct sbuf *b, char c);

/* one raw "name=value" of a query string */
struct qparam {
	const char *name, *val;
	size_t nlen, vlen;
};
/* Next '&'-separated non-empty parameter from q at *pos. Returns 1 or 0 at the end. */
int sv4_next_param(const char *q, size_t qlen, size_t *pos, struct qparam *p);
/* Decoded name of p equals lit exactly. */
int sv4_param_is(const struct qparam *p, const char *lit);
/* Decoded value of the first parameter named lit. Returns length, -ENOENT, -E2BIG. */
long sv4_query_get(const char *q, size_t qlen, const char *lit, char *out, size_t cap);

/* Header name (nlen bytes, any case) from index *from on; advances *from. */
const struct ol_sigv4_header *sv4_find_header(const struct ol_sigv4_request *req, const char *name,
					      size_t nlen, size_t *from);
/* Trimmed first value of header name. Returns length, -ENOENT, -E2BIG. */
long sv4_header_get(const struct ol_sigv4_request *req, const char *name, char *out, size_t cap);

/* Canonical request with CANON_* flags. Returns 0, -E2BIG or -ENOMEM. */
int sv4_canonical_request(const struct ol_sigv4_request *req, const char *signed_list,
			  const char *payload_hash, int flags, struct sbuf *out);
void sv4_string_to_sign(const char *amz_date, const char *scope, const struct sbuf *creq,
			struct sbuf *out);
/* SHA-256, fetched once per process (any thread; never freed). */
const EVP_MD *sv4_sha256(void);
/* HMAC-SHA256 (any key length). Returns 0 or OL_SIGV4_ERR_NOMEM. */
int sv4_hmac(const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32]);
/* ol_sigv4_signing_key for service s3 with a per-thread one-entry cache. */
int sv4_cached_signing_key(const char *secret, const char *date8, const char *region,
			   uint8_t key[32]);

#endif
