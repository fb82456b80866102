/* s3/postform.h - browser POST uploads: the multipart/form-data head (every field before the
 * file's bytes) and the POST policy document with its conditions. Pure code over buffers,
 * fuzzed by tests/fuzz/fuzz_postform.c. */
#ifndef OL_S3_POSTFORM_H
#define OL_S3_POSTFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_FORM_MAX_FIELDS 64
#define OL_FORM_MAX_HEAD   (64 * 1024) /* fields before the file */

struct ol_form_field {
	char name[128]; /* as sent */
	char *value;	/* malloc'd, NUL-terminated */
	size_t len;
};

struct ol_form {
	struct ol_form_field f[OL_FORM_MAX_FIELDS];
	unsigned n;
	char filename[256]; /* of the file part */
	char file_type[128];
};

/* The boundary parameter of a multipart/form-data Content-Type. 0, or -EINVAL. */
int ol_form_boundary(const char *content_type, char *out, size_t cap);
/* Parse buf (the body's first len bytes) up to the start of the file part's content: the
 * fields before it into out. Returns the offset of the file's first byte, 0 when more bytes
 * are needed, -EBADMSG (malformed, or no file part), -E2BIG (too many fields). Free out with
 * ol_form_free, whatever the result. */
long ol_form_parse_head(const char *buf, size_t len, const char *boundary, struct ol_form *out);
void ol_form_free(struct ol_form *f);
/* A field's value by name (ASCII case-insensitive), or NULL. */
const char *ol_form_get(const struct ol_form *f, const char *name);

/* Check the POST policy (JSON, already base64-decoded) against the form: not expired at now
 * (seconds), every condition met (exact match, starts-with, eq, content-length-range) and
 * every field covered by a condition (except policy, x-amz-signature, file, x-ignore-*, and
 * the SigV2 AWSAccessKeyId and signature).
 * bucket and key (after ${filename}) are the request's. *min_len / *max_len get the
 * content-length-range (0 / INT64_MAX without one). 0, or -EACCES with msg (AWS's words), or
 * -EINVAL (the policy is not a valid document). */
int ol_post_policy_check(const char *json, size_t n, const struct ol_form *f, const char *bucket,
			 const char *key, int64_t now, int64_t *min_len, int64_t *max_len,
			 char *msg, size_t cap);

#endif
