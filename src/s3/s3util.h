/* s3/s3util.h - pure helpers of the S3 layer (no sockets, no store): routing, key and query
 * decoding, bucket-name rules, Range parsing, dates, the growable buffer and the XML writer,
 * the XML request-body parsers, the error table and the object metadata blob.
 * Everything here is deterministic and unit-tested in tests/unit/test_s3.c. */
#ifndef OL_S3_S3UTIL_H
#define OL_S3_S3UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/buf.h"

#define OL_S3_MAX_KEY	      1024
#define OL_S3_MAX_XML_BODY    (1u << 20) /* CompleteMultipartUpload / DeleteObjects body cap */
#define OL_S3_MAX_DELETE_KEYS 1000
#define OL_S3_MAX_PARTS	      10000

/* the growable byte buffer is base/buf.h (struct ol_buf) */

/* ---- XML writer ---- */
/* Append s (n bytes) escaped for XML text/attributes: & < > " ' and control characters. */
void ol_s3_xml_esc(struct ol_buf *b, const char *s, size_t n);
/* <name>escaped value</name> */
void ol_s3_xml_elem(struct ol_buf *b, const char *name, const char *value);
void ol_s3_xml_elemn(struct ol_buf *b, const char *name, const char *value, size_t n);
void ol_s3_xml_elemu(struct ol_buf *b, const char *name, unsigned long long v);
/* <?xml ...?> declaration followed by <name xmlns="http://s3.amazonaws.com/doc/2006-03-01/"> */
void ol_s3_xml_open_root(struct ol_buf *b, const char *name);

/* URL-encode for encoding-type=url (AWS style): keep A-Za-z0-9 - _ . ~ and '/', %XX the rest. */
void ol_s3_url_encode(struct ol_buf *b, const char *s, size_t n);
/* <name>value</name>, the value URL-encoded first when url (a listing's encoding-type=url) */
void ol_s3_xml_elem_url(struct ol_buf *b, bool url, const char *name, const char *value, size_t n);

/* ---- routing ---- */
struct ol_s3_route {
	char bucket[256]; /* "" for the service (ListBuckets); not yet validated */
	char key[OL_S3_MAX_KEY + 1];
	size_t key_len; /* 0 when the request addresses the bucket */
	bool vhost;	/* bucket came from the Host header */
};
/* The endpoint names ol_s3_route takes: s3_addr's host, then the [s3] domains
 * ("host,name,..."), into out (OL_S3_ENDPOINT_NAMES bytes). */
#define OL_S3_ENDPOINT_NAMES 1280
void ol_s3_endpoint_names(const char *s3_addr, const char *domains, char *out, size_t cap);

/* Resolve bucket and key from Host and the raw (still percent-encoded) path.
 * endpoint_host: the endpoint's names, comma-separated (ol_s3_endpoint_names: s3_addr's
 * host, which may be "" or an IP, and the [s3] domains). Virtual-host style when Host is
 * "<bucket>.<base>" with base one of: localhost, s3.amazonaws.com, s3.<region>.amazonaws.com,
 * s3-<region>.amazonaws.com, or one of endpoint_host's names that is not an IP address (the
 * longest base wins: the bucket is what precedes the first dot that leaves a base). An IP
 * Host or one equal to a base is path style.
 * Returns 0, -EINVAL (bad escape, NUL byte, not UTF-8), -ENAMETOOLONG (key > 1024). */
int ol_s3_route(const char *host, const char *endpoint_host, const char *path,
		struct ol_s3_route *r);

/* Percent-decode src[0..n) into dst (capacity cap, NUL-terminated). plus_space: '+' -> ' '
 * (query strings). Returns decoded length, -EINVAL on a bad escape or %00, -ENAMETOOLONG. */
long ol_s3_pct_decode(const char *src, size_t n, char *dst, size_t cap, bool plus_space);
bool ol_s3_utf8_valid(const char *s, size_t n);

/* Find query parameter name in the raw query string q ("a=1&b&c=x%20y").
 * Returns decoded length of its value into val (cap incl. NUL; "" for a bare name),
 * -ENOENT if absent, -EINVAL/-ENAMETOOLONG on a bad value. */
long ol_s3_query_get(const char *q, const char *name, char *val, size_t cap);
bool ol_s3_query_has(const char *q, const char *name);
/* A count query parameter (max-keys, max-uploads, max-parts, part-number-marker) as AWS takes
 * it: decimal digits only, no sign, <= 2147483647. 0 and *out, or -EINVAL. */
int ol_s3_parse_count(const char *s, unsigned *out);

/* ---- names ---- */
/* S3 bucket naming rules: 3-63 chars of [a-z0-9.-], first and last alnum, no "..", ".-",
 * "-.", not an IPv4 dotted quad, no "xn--" prefix, no "-s3alias" suffix. */
bool ol_s3_bucket_name_ok(const char *name);
bool ol_s3_is_ip(const char *host);

/* ---- Range ---- */
/* Parse a Range header against an object of size bytes.
 * Returns 1 with *off and *len for a satisfiable single range, 0 when the header must be ignored
 * (absent, malformed, multi-range, last < first), -ERANGE when unsatisfiable (416). */
int ol_s3_range_parse(const char *h, uint64_t size, uint64_t *off, uint64_t *len);

/* ---- dates ---- */
/* "Tue, 01 Dec 2026 18:33:39 GMT" (30 bytes incl. NUL) */
void ol_s3_http_date(int64_t ms, char out[32]);
/* "2026-12-01T18:33:39.123Z" */
void ol_s3_iso_date(int64_t ms, char out[32]);
/* Parse RFC 1123 / RFC 850 / asctime dates (HTTP-date). Returns 0 and seconds, or -EINVAL. */
int ol_s3_parse_http_date(const char *s, int64_t *secs);

/* ---- XML request bodies (expat) ---- */
struct ol_s3_part_ref {
	unsigned number;
	char etag[72];	   /* without quotes, lowercase */
	char ck_name[16];  /* "SHA256" of a <ChecksumSHA256> given for the part, "" = none */
	char checksum[64]; /* its value (base64) */
};
struct ol_s3_complete_req {
	struct ol_s3_part_ref *parts; /* malloc'd */
	unsigned n_parts;
};
/* Parse a CompleteMultipartUpload body. Returns 0, -EBADMSG (MalformedXML: not XML, wrong
 * root, missing PartNumber/ETag, > 10000 parts, no part). Order is not checked here. */
int ol_s3_parse_complete(const char *xml, size_t n, struct ol_s3_complete_req *out);
void ol_s3_complete_free(struct ol_s3_complete_req *c);

struct ol_s3_delete_req {
	char **keys; /* malloc'd array of NUL-terminated keys (malloc'd) */
	size_t *key_lens;
	unsigned n_keys;
	bool quiet;
	bool has_version; /* some <VersionId> other than "null" was given */
	char **vids;	  /* per key: its <VersionId> (malloc'd) or NULL */
};
/* Parse a DeleteObjects body: 1..1000 <Object><Key>, optional <Quiet>.
 * Returns 0 or -EBADMSG (MalformedXML). */
int ol_s3_parse_delete(const char *xml, size_t n, struct ol_s3_delete_req *out);
void ol_s3_delete_free(struct ol_s3_delete_req *d);

/* Parse a VersioningConfiguration body: *status 1 Enabled, 2 Suspended. 0, -EBADMSG (not
 * XML of that root), -EINVAL (Status missing or another value), -ENOTSUP (MfaDelete
 * Enabled: not supported). */
#define OL_S3_MAX_VID 64
int ol_s3_parse_versioning(const char *xml, size_t n, int *status);

/* ---- tags (tags.c; the Tagging body parser is in xmlparse.c) ---- */
#define OL_S3_MAX_TAGS	    50 /* a bucket's; an object's is OL_S3_MAX_OBJ_TAGS */
#define OL_S3_MAX_OBJ_TAGS  10
#define OL_S3_TAG_KEY_MAX   128 /* Unicode characters */
#define OL_S3_TAG_VALUE_MAX 256
#define OL_S3_TAG_BYTES	    1024 /* longest key or value in bytes accepted by the parsers */
struct ol_s3_tags {
	unsigned n; /* up to OL_S3_MAX_TAGS + 1 (one over: the check names the limit) */
	char *key[OL_S3_MAX_TAGS + 1], *val[OL_S3_MAX_TAGS + 1]; /* malloc'd, NUL-terminated */
};
void ol_s3_tags_free(struct ol_s3_tags *t);
/* Append one tag (copied). 0 or -E2BIG. */
int ol_s3_tags_add(struct ol_s3_tags *t, const char *k, size_t kl, const char *v, size_t vl);
/* The x-amz-tagging header / stored form "k1=v1&k2=v2" (URL-encoded). t is set up here (free
 * it with ol_s3_tags_free on 0). 0, -EINVAL (bad escape), -E2BIG (too many). */
int ol_s3_tags_parse_query(const char *s, size_t n, struct ol_s3_tags *t);
/* AWS's rules: at most max tags, keys 1..128 and values 0..256 characters of printable
 * UTF-8, unique keys, no "aws:" prefix. 0, or -EINVAL with *why the InvalidTag message. */
int ol_s3_tags_check(const struct ol_s3_tags *t, unsigned max, const char **why);
/* The stored form (appended to out) and the Tagging XML document. */
void ol_s3_tags_encode(const struct ol_s3_tags *t, struct ol_buf *out);
void ol_s3_tags_xml(const struct ol_s3_tags *t, struct ol_buf *x);
/* Parse a Tagging body (<Tagging><TagSet><Tag><Key/><Value/></Tag>...). 0, -EBADMSG
 * (MalformedXML: not that document, a Tag without Key, too many tags or too long). */
int ol_s3_parse_tagging(const char *xml, size_t n, struct ol_s3_tags *t);

/* Parse a CreateBucketConfiguration body (may be empty). loc is given LocationConstraint ("" if
 * none). Returns 0 or -EBADMSG. */
int ol_s3_parse_create_bucket(const char *xml, size_t n, char *loc, size_t cap);

/* ---- errors ---- */
enum ol_s3_err {
	OL_S3E_NONE = 0,
	OL_S3E_ACCESS_DENIED,
	OL_S3E_AUTH_HEADER_MALFORMED,
	OL_S3E_AUTH_QUERY_ERROR,
	OL_S3E_BAD_DIGEST,
	OL_S3E_BUCKET_EXISTS_OWNED,
	OL_S3E_BUCKET_NOT_EMPTY,
	OL_S3E_ENTITY_TOO_LARGE,
	OL_S3E_ENTITY_TOO_SMALL,
	OL_S3E_INCOMPLETE_BODY,
	OL_S3E_INTERNAL,
	OL_S3E_INVALID_ACCESS_KEY,
	OL_S3E_INVALID_ARGUMENT,
	OL_S3E_INVALID_BUCKET_NAME,
	OL_S3E_INVALID_DIGEST,
	OL_S3E_INVALID_PART,
	OL_S3E_INVALID_PART_ORDER,
	OL_S3E_INVALID_RANGE,
	OL_S3E_INVALID_REQUEST,
	OL_S3E_INVALID_URI,
	OL_S3E_KEY_TOO_LONG,
	OL_S3E_MALFORMED_XML,
	OL_S3E_METHOD_NOT_ALLOWED,
	OL_S3E_MISSING_CONTENT_LENGTH,
	OL_S3E_NO_SUCH_BUCKET,
	OL_S3E_NO_SUCH_KEY,
	OL_S3E_NO_SUCH_UPLOAD,
	OL_S3E_NOT_IMPLEMENTED,
	OL_S3E_PRECONDITION_FAILED,
	OL_S3E_REQUEST_TIME_SKEWED,
	OL_S3E_SERVICE_UNAVAILABLE,
	OL_S3E_SIGNATURE_MISMATCH,
	OL_S3E_SHA256_MISMATCH,
	OL_S3E_ILLEGAL_LOCATION,
	OL_S3E_MISSING_SECURITY_HEADER,
	OL_S3E_INVALID_STORAGE_CLASS,
	OL_S3E_STORAGE_FULL,
	OL_S3E_SLOW_DOWN,
	OL_S3E__COUNT
};
struct ol_s3_errinfo {
	const char *code;
	int status;
	const char *message;
};
const struct ol_s3_errinfo *ol_s3_errinfo(enum ol_s3_err e);
/* The S3 error for an object-store result rc (< 0), from one table (errors.c). -ENOENT is
 * enoent (what is missing depends on the call: NoSuchKey, NoSuchBucket, NoSuchUpload); write
 * adds the results of conditional writes (-ECANCELED: PreconditionFailed, -ENODATA: NoSuchKey)
 * and of commits sent to a cluster's leader (-EAGAIN, -ETIMEDOUT: SlowDown, 503).
 * *msg is the message to send (NULL: the error's own). An rc the table does not know is
 * OL_S3E_INTERNAL with *msg NULL (the caller names the errno). Pure. */
enum ol_s3_err ol_s3_errno_err(int rc, bool write, enum ol_s3_err enoent, const char **msg);
/* Full error document into b (message NULL = the table's). extra: pre-escaped XML elements
 * inserted before <Resource> (may be NULL). */
void ol_s3_error_xml(struct ol_buf *b, const char *code, const char *message, const char *resource,
		     const char *request_id, const char *extra);

/* ---- object metadata blob (stored opaque by the store) ----
 * Text, one "name: value\n" line per entry: standard headers under their lowercase HTTP names
 * (content-type, cache-control, content-disposition, content-encoding, content-language,
 * expires), user metadata as x-amz-meta-*, checksums as x-amz-checksum-<alg>, and internal
 * entries starting with "ol-". Values never hold '\n'. */
struct ol_s3_meta_kv {
	const char *name, *value; /* point into the blob copy */
	size_t name_len, value_len;
};
/* Append one entry (rejects names/values holding CR/LF by dropping them). */
void ol_s3_meta_add(struct ol_buf *b, const char *name, const char *value);
/* Look up name in blob (n bytes). Returns value length and *val, or -ENOENT. */
long ol_s3_meta_get(const char *blob, size_t n, const char *name, const char **val);
/* Iterate: *pos starts at 0; returns 1 with kv filled, 0 at the end. */
int ol_s3_meta_next(const char *blob, size_t n, size_t *pos, struct ol_s3_meta_kv *kv);

#endif
