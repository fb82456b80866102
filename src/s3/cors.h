/* s3/cors.h - bucket CORS configuration and the small bucket settings documents
 * (PublicAccessBlockConfiguration, OwnershipControls): pure parsers over buffers (expat,
 * in xmlparse.c) and the CORS rule match. Fuzzed by tests/fuzz/fuzz_s3xml.c.
 * Return codes: 0, -EBADMSG malformed XML, -EINVAL a value S3 refuses. */
#ifndef OL_S3_CORS_H
#define OL_S3_CORS_H

#include <stdbool.h>
#include <stddef.h>

#define OL_CORS_MAX_RULES 100
#define OL_CORS_MAX_ITEMS 64 /* per list in a rule */

struct ol_cors_rule {
	char **origins, **methods, **headers, **expose; /* malloc'd lists */
	unsigned n_origins, n_methods, n_headers, n_expose;
	long max_age; /* -1 none */
};

struct ol_cors {
	struct ol_cors_rule *rules;
	unsigned n;
};

/* CORSConfiguration: 1..100 CORSRule, each with >= 1 AllowedOrigin and AllowedMethod (GET,
 * PUT, POST, DELETE, HEAD: else -EINVAL). Free with ol_cors_free (also after an error). */
int ol_cors_parse(const char *xml, size_t n, struct ol_cors *out);
void ol_cors_free(struct ol_cors *c);
/* The first rule allowing origin and method (and every header of the comma-separated
 * req_headers, may be NULL), or NULL. Origins and headers may hold one '*'. */
const struct ol_cors_rule *ol_cors_match(const struct ol_cors *c, const char *origin,
					 const char *method, const char *req_headers);

/* PublicAccessBlockConfiguration: four booleans (absent = false). */
struct ol_pab {
	bool block_public_acls, ignore_public_acls, block_public_policy, restrict_public_buckets;
};
int ol_pab_parse(const char *xml, size_t n, struct ol_pab *out);
/* Stored form: four '0'/'1' characters in the order above. */
void ol_pab_encode(const struct ol_pab *p, char out[5]);
void ol_pab_decode(const char *s, size_t n, struct ol_pab *out);

/* OwnershipControls with one Rule/ObjectOwnership: BucketOwnerEnforced, BucketOwnerPreferred
 * or ObjectWriter (else -EINVAL) into out (cap >= 32). */
int ol_ownership_parse(const char *xml, size_t n, char *out, size_t cap);
bool ol_ownership_ok(const char *v);

#endif
