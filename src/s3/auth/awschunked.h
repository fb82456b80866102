/* s3/auth/awschunked.h - streaming decoder for "Content-Encoding: aws-chunked" request bodies.
 *
 * Handles the three aws-chunked payload modes of x-amz-content-sha256:
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD          "hex;chunk-signature=SIG\r\n" data "\r\n" ...
 *                                               "0;chunk-signature=SIG\r\n\r\n"
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER  as above, then after the 0 chunk header:
 *                                               "name:value\r\n"...
 * "x-amz-trailer-signature:SIG\r\n"
 *                                               "\r\n"
 *   STREAMING-UNSIGNED-PAYLOAD-TRAILER          "hex\r\n" data "\r\n" ... "0\r\n"
 *                                               "name:value\r\n"... "\r\n"
 * Chunk signatures are verified as each chunk ends (chained from the seed signature), so a
 * tampered chunk fails before the caller has seen the end of the body: the caller must not
 * commit the object until ol_awschunked_feed() returns OL_AWSCHUNKED_DONE.
 *
 * Lines (chunk headers, trailers) are capped at OL_AWSCHUNKED_LINE_MAX bytes and at most
 * OL_AWSCHUNKED_MAX_TRAILERS trailers are kept: a hostile body is a clean error, never a big
 * allocation or a loop. One decoder per request; not thread-safe (one thread at a time). */
#ifndef OL_S3_AUTH_AWSCHUNKED_H
#define OL_S3_AUTH_AWSCHUNKED_H

#include <stddef.h>
#include <stdint.h>

#include "s3/auth/sigv4.h"

#define OL_AWSCHUNKED_LINE_MAX	   512
#define OL_AWSCHUNKED_MAX_TRAILERS 8
#define OL_AWSCHUNKED_MAX_CHUNK	   ((uint64_t)1 << 32) /* a chunk size above this is an error */

enum ol_awschunked_status {
	OL_AWSCHUNKED_MORE = 0, /* call again (with the rest of the input, or with more input) */
	OL_AWSCHUNKED_DONE = 1, /* body complete and verified; trailers available */
};

enum ol_awschunked_err {
	OL_AWSCHUNKED_ERR_FORMAT = -4320,    /* malformed framing: IncompleteBody / 400 */
	OL_AWSCHUNKED_ERR_SIGNATURE = -4321, /* chunk or trailer signature: SignatureDoesNotMatch */
	OL_AWSCHUNKED_ERR_LENGTH = -4322,    /* decoded size != x-amz-decoded-content-length */
	OL_AWSCHUNKED_ERR_TOO_LONG = -4323,  /* line over OL_AWSCHUNKED_LINE_MAX, or too many
						trailers, or chunk over OL_AWSCHUNKED_MAX_CHUNK */
	OL_AWSCHUNKED_ERR_NOMEM = -4324,
};

struct ol_awschunked;

/* Create a decoder for auth->payload (one of the three STREAMING modes; anything else is
 * -EINVAL). auth is copied (signing key, seed signature, scope, date): it need not outlive the
 * decoder. decoded_length: the x-amz-decoded-content-length header value, or -1 when absent
 * (then no length check). Returns 0 and *out, -EINVAL or OL_AWSCHUNKED_ERR_NOMEM. */
int ol_awschunked_new(const struct ol_sigv4_result *auth, int64_t decoded_length,
		      struct ol_awschunked **out);

/* Free d (NULL is a no-op). */
void ol_awschunked_free(struct ol_awschunked *d);

/* Feed in[0..len). Sets *consumed (bytes of in used, <= len) and, when payload bytes were
 * decoded, *data and *data_len pointing INTO in (zero-copy; *data_len may be 0). At most one data
 * span per call: loop while bytes remain. Each call with len > 0 consumes at least one byte
 * unless it returns DONE or an error. Bytes after the end of the body are not consumed.
 * Returns OL_AWSCHUNKED_MORE, OL_AWSCHUNKED_DONE, or a negative enum ol_awschunked_err (the
 * decoder then stays failed). Data returned before an error must be discarded by the caller. */
int ol_awschunked_feed(struct ol_awschunked *d, const uint8_t *in, size_t len, size_t *consumed,
		       const uint8_t **data, size_t *data_len);

/* Payload bytes decoded so far. */
uint64_t ol_awschunked_decoded(const struct ol_awschunked *d);

/* After DONE: number of trailers (x-amz-trailer-signature excluded) and the i-th one, name
 * lowercased, value trimmed, both NUL-terminated and owned by d. Returns 0 or -ENOENT. */
size_t ol_awschunked_trailer_count(const struct ol_awschunked *d);
int ol_awschunked_trailer(const struct ol_awschunked *d, size_t i, const char **name,
			  const char **value);
/* Value of trailer name (case-insensitive), or NULL. */
const char *ol_awschunked_trailer_get(const struct ol_awschunked *d, const char *name);

/* Human-readable reason for the last error ("" if none). */
const char *ol_awschunked_message(const struct ol_awschunked *d);

#endif
