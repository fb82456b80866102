/* cmd/openlake/sign.h - SigV4 signing of the CLI's HTTP requests, one signer for every
 * sub-command (`bench s3`, and the admin calls of `node`, `disk`, `cluster`, `heal`).
 * Header form, service "s3", signed headers host;x-amz-content-sha256;x-amz-date. Not
 * thread-safe per signer: give each thread its own (bench: one per connection). */
#ifndef OL_CMD_OPENLAKE_SIGN_H
#define OL_CMD_OPENLAKE_SIGN_H

#include <stddef.h>
#include <time.h>

#define OL_CLI_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct ol_cli_signer {
	const char *access_key, *secret_key, *region; /* borrowed, must outlive the signer */
	char key_date[9];			      /* day of key[] ("" = none yet) */
	unsigned char key[32];			      /* signing key, cached for key_date */
};

/* The three header lines "x-amz-date: D\r\nx-amz-content-sha256: H\r\nAuthorization: ...\r\n"
 * that sign METHOD path?query with the given Host value at time now. path: already
 * URI-encoded (ol_cli_uri_encode); query: canonical (names and values encoded, sorted by
 * name; "" for none); payload_hash: hex SHA-256 of the body, or "UNSIGNED-PAYLOAD".
 * Writes a NUL-terminated string into out; returns its length, 0 when it does not fit. */
size_t ol_cli_sign(struct ol_cli_signer *s, const char *method, const char *path, const char *query,
		   const char *host, const char *payload_hash, time_t now, char *out, size_t cap);

/* S3 URI encoding of a path: unreserved characters and '/' stay, the rest is %XX.
 * 0 or -ENAMETOOLONG when out (cap bytes) is too small. */
int ol_cli_uri_encode(const char *in, char *out, size_t cap);

#endif
