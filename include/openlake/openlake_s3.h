/* openlake/openlake_s3.h - libopenlake's S3 client: any S3 endpoint (OpenLake's or another).
 *
 * A handle holds the endpoint, region and credentials and a pool of keep-alive HTTP/1.1
 * connections (TCP, or TLS for "https://" endpoints: the server's certificate is verified
 * against opts.ca_file / AWS_CA_BUNDLE / the profile's ca_bundle, else the system's store,
 * and for the endpoint's host name or IP address). Large
 * objects move over several connections at once: a PUT larger than one part becomes a
 * multipart upload whose parts go up in parallel, a GET becomes parallel ranged GETs that land
 * straight in the caller's memory (a scatter list, no extra copy). Every request is signed
 * with SigV4; bodies carry x-amz-checksum-crc32c and a checksum the server sends back is
 * checked. Failed requests (connection refused/reset, timeout, 500, 502, 503, 504) are
 * retried with exponential backoff and jitter up to opts.retries attempts; every operation
 * here is idempotent, parts of a multipart upload included (CompleteMultipartUpload too:
 * a retry that finds the upload already completed checks the object instead).
 *
 * Configuration is read where AWS tools read it; a field set in ol_s3_opts wins:
 *   endpoint  AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, profile's endpoint_url
 *   region    AWS_REGION, AWS_DEFAULT_REGION, profile's region, "us-east-1"
 *   keys      AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
 *             profile in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), else in
 *             AWS_CONFIG_FILE (~/.aws/config, section "[profile NAME]" or "[default]")
 *   profile   opts.profile, AWS_PROFILE, "default"
 *   CA bundle opts.ca_file, AWS_CA_BUNDLE, profile's ca_bundle, the system's store (https)
 *
 * Calls return 0 or -errno, or an OL_S3_E* code below -4096. The library never prints and
 * never aborts; the reason of the last failure on the calling thread (S3 error code and
 * message, status, attempts) is in ol_s3_last_error(). Every call is thread-safe on one
 * handle. The caller owns every buffer it passes; the library keeps no pointer after a call
 * returns. Exported symbols are listed in client/openlake.map. */
#ifndef OPENLAKE_OPENLAKE_S3_H
#define OPENLAKE_OPENLAKE_S3_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "openlake.h" /* struct ol_iov */

#ifdef __cplusplus
extern "C" {
#endif

/* Project error codes (negative errno values are system errors: -ECONNREFUSED...). */
#define OL_S3_ENOTFOUND -4097 /* 404: NoSuchKey, NoSuchBucket, NoSuchUpload */
#define OL_S3_EDENIED	-4098 /* 403: bad keys, signature, policy */
#define OL_S3_ECLIENT	-4099 /* another 4xx answer (see ol_s3_last_error) */
#define OL_S3_ESERVER	-4100 /* 5xx still after the last retry */
#define OL_S3_ECHECKSUM -4101 /* CRC32C or ETag of data differs from what the server says */
#define OL_S3_EPROTO	-4102 /* the answer is not HTTP/S3 as expected */
#define OL_S3_ECONFIG	-4103 /* no endpoint or keys, bad config file, unknown profile */

#define OL_S3_MIN_PART	 (8ull << 20) /* part sizes the client picks: >= 8 MiB, */
#define OL_S3_MAX_PARTS	 10000	      /* <= 10000 parts per object */
#define OL_S3_MAX_OBJECT (5ull << 40) /* S3's limit: 5 TiB */

struct ol_s3; /* opaque */

struct ol_s3_opts {
	size_t size;		/* sizeof(struct ol_s3_opts): lets the struct grow */
	const char *endpoint;	/* "http://host:port"; NULL = from the environment/profile */
	const char *region;	/* NULL = from the environment/profile, else "us-east-1" */
	const char *access_key; /* NULL = from the environment/profile (both or neither) */
	const char *secret_key;
	const char *session_token; /* NULL = AWS_SESSION_TOKEN / profile's aws_session_token */
	const char *profile;	   /* NULL = AWS_PROFILE, else "default" */
	unsigned conns;		   /* parallel connections per transfer; 0 = 8, at most 256 */
	unsigned retries;	   /* attempts per request; 0 = 5 */
	unsigned timeout_ms;	   /* connect and per-read/write silence limit; 0 = 30000 */
	unsigned backoff_ms;	   /* first retry delay (doubles, jittered, at most 5 s); 0 = 100 */
	uint64_t part_size;	   /* multipart part/GET range size; 0 = chosen from the size */
	uint64_t max_bytes_per_sec; /* upload throttle over all connections; 0 = none */
	void (*log)(int level, const char *msg, void *arg); /* optional: retries, errors */
	void *log_arg;
	/* appended fields (a caller whose size ends before one gets its default): */
	const char *ca_file; /* PEM CA bundle for https endpoints; NULL = see above */
};

/* Resolve the configuration and create a handle (no connection yet). 0 and *out, -EINVAL (bad
 * options, endpoint), OL_S3_ECONFIG (no endpoint, no keys, unknown profile, unreadable file or
 * CA bundle: ol_s3_last_error says which), -ENOMEM. A certificate that fails verification
 * makes requests fail with -EACCES (not retried). */
int ol_s3_new(const struct ol_s3_opts *o, struct ol_s3 **out);
/* Close connections. No call may be running on s. NULL is a no-op. */
void ol_s3_free(struct ol_s3 *s);
/* The endpoint, region and access key in use (for messages). Lives as long as s. */
const char *ol_s3_endpoint(const struct ol_s3 *s);
const char *ol_s3_region(const struct ol_s3 *s);
const char *ol_s3_access_key(const struct ol_s3 *s);

/* Progress: called from transfer threads (one at a time) with the bytes done so far and the
 * total; return nonzero to cancel the transfer (it then fails with -ECANCELED). */
typedef int (*ol_s3_progress_fn)(uint64_t done, uint64_t total, void *arg);

enum ol_s3_put_flags {
	OL_S3_PUT_RESUME = 1,	  /* continue an upload in progress for this key: parts already
				     there with the size and MD5 ETag of ours are kept */
	OL_S3_PUT_KEEP_FAILED = 2 /* leave a failed multipart upload in place (to resume it);
				     default: abort it */
};

/* Store the bytes of iov[0..n) as bucket/key. Up to one part: a single PUT; larger: a multipart
 * upload with the part size of ol_s3_part_size(), parts in parallel. etag (optional, cap >= 80)
 * receives the object's ETag. *resumed_parts (optional) = parts kept by OL_S3_PUT_RESUME. */
int ol_s3_put(struct ol_s3 *s, const char *bucket, const char *key, const struct ol_iov *iov,
	      size_t n, unsigned flags, ol_s3_progress_fn progress, void *arg, char *etag,
	      size_t cap, unsigned *resumed_parts);

enum ol_s3_get_flags {
	OL_S3_GET_WHOLE = 1 /* iov holds the whole object (off = 0): a small one is read by one
			       GET without Range and checked against its full-object CRC32C;
			       -ERANGE when the object's size is not sum(iov.len) */
};

/* Read bytes [off, off + sum(iov.len)) of bucket/key into iov[0..n) with parallel ranged GETs
 * (one Range GET when they fit in one part; else ranges that end on multiples of the part
 * size ol_s3_part_size gives for the object's size, so reads from an offset ask for the parts
 * a PUT of it wrote). When the read covers the whole object and the
 * server keeps a full-object CRC32C for it (a single PUT with a checksum), the data is checked
 * against it (OL_S3_ECHECKSUM). -ERANGE when the object is shorter than the range. */
int ol_s3_get(struct ol_s3 *s, const char *bucket, const char *key, uint64_t off,
	      const struct ol_iov *iov, size_t n, unsigned flags, ol_s3_progress_fn progress,
	      void *arg);

/* HEAD: *size and (optional) etag (cap >= 80). OL_S3_ENOTFOUND when absent. */
int ol_s3_head(struct ol_s3 *s, const char *bucket, const char *key, uint64_t *size, char *etag,
	       size_t cap);
/* DELETE (0 also when the key did not exist). */
int ol_s3_delete(struct ol_s3 *s, const char *bucket, const char *key);
/* CreateBucket (0 also when this account owns it already). */
int ol_s3_create_bucket(struct ol_s3 *s, const char *bucket);

/* Every key under prefix in key order (ListObjectsV2, all pages): fn(key, size, arg) per key;
 * a nonzero return from fn stops the listing and is returned. */
typedef int (*ol_s3_list_fn)(const char *key, uint64_t size, void *arg);
int ol_s3_list(struct ol_s3 *s, const char *bucket, const char *prefix, ol_s3_list_fn fn,
	       void *arg);

/* The part size used for an object of total bytes: opts.part_size if set (raised to what
 * 10000 parts need), else the smallest power of two >= 8 MiB that keeps it under 10000 parts
 * and gives at least opts.conns parts when the object allows. */
uint64_t ol_s3_part_size(const struct ol_s3 *s, uint64_t total);

/* The calling thread's last failure, "" when none. Valid until its next call. */
const char *ol_s3_last_error(void);
/* "not found", "access denied"... for an OL_S3_E* code, strerror() text for -errno. */
const char *ol_s3_strerror(int rc);

/* --- the SigV4 signer (shared with the openlake CLI) --- */
#define OL_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct ol_s3_signer {
	const char *access_key, *secret_key, *region; /* borrowed, must outlive the signer */
	const char *session_token;		      /* optional (NULL = none), borrowed */
	char key_date[9];			      /* day of key[] ("" = none yet) */
	unsigned char key[32];			      /* signing key, cached for key_date */
};

/* The header lines "x-amz-date: D\r\nx-amz-content-sha256: H\r\n[x-amz-security-token..]
 * Authorization: ...\r\n" that sign METHOD path?query with the given Host at time now.
 * path: URI-encoded (ol_s3_uri_encode); query: canonical (names and values encoded, sorted by
 * name; "" for none); payload_hash: hex SHA-256 of the body or "UNSIGNED-PAYLOAD"; xh: n_xh
 * more headers "name:value" (lower-case names, any order) that are signed as well (the caller
 * sends them). Writes a NUL-terminated string into out; returns its length, 0 when it does not
 * fit. Not thread-safe per signer. */
size_t ol_s3_sign(struct ol_s3_signer *s, const char *method, const char *path, const char *query,
		  const char *host, const char *payload_hash, const char *const *xh, size_t n_xh,
		  time_t now, char *out, size_t cap);
/* S3 URI encoding: unreserved characters stay, and '/' when keep_slash; the rest is %XX.
 * 0 or -ENAMETOOLONG when out (cap bytes) is too small. */
int ol_s3_uri_encode(const char *in, int keep_slash, char *out, size_t cap);

/* --- the shared config/credentials file reader (pure; exported for tools and the fuzzer) --- */
/* Find key in section of the INI text buf[0..len) (AWS's format: "[section]" lines,
 * "key = value" lines, '#' and ';' comments, indented continuation lines ignored, names
 * case-sensitive, surrounding blanks trimmed). Copies the value NUL-terminated into out.
 * Returns its length, -ENOENT when absent, -ENAMETOOLONG when it does not fit, -EINVAL on a
 * malformed line in that section or a value holding a NUL byte. */
int ol_s3_ini_get(const char *buf, size_t len, const char *section, const char *key, char *out,
		  size_t cap);

#ifdef __cplusplus
}
#endif
#endif
