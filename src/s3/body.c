/* s3/body.c - request body reader with aws-chunked de-framing and digest checks. */
#include "s3/s3int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static const char *const ck_headers[] = {"x-amz-checksum-crc32", "x-amz-checksum-crc32c",
					 "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
					 "x-amz-checksum-sha256"};

static bool
is_streaming(enum ol_sigv4_payload p)
{
	return p == OL_SIGV4_PAYLOAD_STREAMING_SIGNED ||
	       p == OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER ||
	       p == OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
}

static int64_t
decoded_length(struct s3_req *r)
{
	if (!is_streaming(r->auth.payload))
		return r->h->content_length;
	const char *v = ol_http_header(r->h, "x-amz-decoded-content-length");
	if (!v || !isdigit((unsigned char)v[0]))
		return -1;
	char *end;
	unsigned long long n = strtoull(v, &end, 10);
	return (*end || n > (1ull << 62)) ? -1 : (int64_t)n;
}

int
s3_length_check(struct s3_req *r, uint64_t max)
{
	int64_t n = decoded_length(r);
	if (n < 0 && !r->h->chunked && r->h->content_length < 0) {
		s3_error(r, OL_S3E_MISSING_CONTENT_LENGTH, NULL);
		return -1;
	}
	if (n >= 0 && (uint64_t)n > max) {
		s3_error(r, OL_S3E_ENTITY_TOO_LARGE, NULL);
		return -1;
	}
	return 0;
}

static int
body_fail(struct s3_body *b, enum ol_s3_err e, const char *msg)
{
	b->err = e;
	b->errmsg = msg;
	return -1;
}

/* Which x-amz-checksum-* applies: header value, trailer, or algorithm only. */
static int
checksum_setup(struct s3_body *b)
{
	struct s3_req *r = b->r;
	for (size_t i = 0; i < sizeof(ck_headers) / sizeof(ck_headers[0]); i++) {
		const char *v = ol_http_header(r->h, ck_headers[i]);
		if (!v)
			continue;
		if (b->alg != OL_CKSUM_NONE)
			return body_fail(b, OL_S3E_INVALID_REQUEST,
					 "Expecting a single x-amz-checksum- header");
		b->alg = ol_cksum_from_header(ck_headers[i]);
		if (strlen(v) >= sizeof(b->ck_expect))
			return body_fail(b, OL_S3E_INVALID_DIGEST, NULL);
		memcpy(b->ck_expect, v, strlen(v) + 1);
	}
	const char *tr = ol_http_header(r->h, "x-amz-trailer");
	if (b->alg == OL_CKSUM_NONE && tr && b->dec) {
		b->alg = ol_cksum_from_header(tr);
		if (b->alg == OL_CKSUM_NONE)
			return body_fail(b, OL_S3E_INVALID_REQUEST, "unsupported x-amz-trailer");
		b->ck_trailer = ol_cksum_header_name(b->alg);
	}
	const char *an = ol_http_header(r->h, "x-amz-sdk-checksum-algorithm");
	if (b->alg == OL_CKSUM_NONE && an) {
		b->alg = ol_cksum_from_name(an);
		if (b->alg == OL_CKSUM_NONE)
			return body_fail(b, OL_S3E_INVALID_REQUEST,
					 "unsupported checksum algorithm");
	}
	if (b->alg != OL_CKSUM_NONE && ol_cksum_init(&b->ck, b->alg) < 0)
		return body_fail(b, OL_S3E_INTERNAL, NULL);
	return 0;
}

/* Large bodies are read in whole stripes of the store (k x block), so it codes and writes
 * them from this buffer without copying them first; 1 MiB when the stripe is odd or huge. */
static size_t
body_cap(const struct ol_config *cfg)
{
	uint64_t n = cfg->set_drive_count ? cfg->set_drive_count : cfg->n_data_dirs;
	uint64_t bs = cfg->block_size ? cfg->block_size : (1u << 20);
	uint64_t sd = n > cfg->default_parity_count ? (n - cfg->default_parity_count) * bs : 0;

	if (sd == 0 || sd > (16u << 20))
		return S3_IO_BUF;
	return (size_t)(sd * ((S3_IO_BUF + sd - 1) / sd));
}

int
s3_body_init(struct s3_body *b, struct s3_req *r, uint64_t max)
{
	memset(b, 0, sizeof(*b));
	b->r = r;
	b->max = max;
	b->expect = decoded_length(r);
	/* small bodies get a small buffer (no 1 MiB mmap per 4 KiB PUT) */
	b->cap = body_cap(r->srv->cfg);
	b->pooled = true;
	if (b->expect >= 0 && (uint64_t)b->expect + 4096 < S3_IO_BUF) {
		b->cap = (size_t)b->expect + 4096 < 16384 ? 16384 : (size_t)b->expect + 4096;
		b->pooled = false;
	}
	/* large: a cached buffer, not megabytes mapped and faulted in per request */
	b->buf = b->pooled ? ol_store_buf_get(b->cap) : ol_xmalloc(b->cap);
	ol_md5mb_init(&b->md5);
	if (r->auth.has_payload_sha256) {
		b->want_sha256 = true;
		if (ol_cksum_init(&b->sha256, OL_CKSUM_SHA256) < 0)
			return body_fail(b, OL_S3E_INTERNAL, NULL);
	}
	if (is_streaming(r->auth.payload)) {
		const char *ce = ol_http_header(r->h, "content-encoding");
		(void)ce; /* S3 accepts a missing aws-chunked token too */
		if (ol_awschunked_new(&r->auth, b->expect, &b->dec) < 0)
			return body_fail(b, OL_S3E_INTERNAL, NULL);
	}
	return checksum_setup(b);
}

void
s3_body_fini(struct s3_body *b)
{
	ol_md5mb_wait(&b->md5); /* a piece still hashing reads the buffer */
	ol_awschunked_free(b->dec);
	b->dec = NULL;
	ol_cksum_fini(&b->sha256);
	ol_cksum_fini(&b->ck);
	if (b->pooled)
		ol_store_buf_put(b->buf, b->cap);
	else
		free(b->buf);
	b->buf = NULL;
}

static int
content_md5_check(struct s3_body *b)
{
	const char *v = ol_http_header(b->r->h, "content-md5");
	if (!v)
		return 0;
	uint8_t want[OL_CKSUM_MAX_RAW];
	int n = ol_cksum_b64_decode(v, strlen(v), want, sizeof(want));
	if (n != 16)
		return body_fail(b, OL_S3E_INVALID_DIGEST, NULL);
	if (memcmp(want, b->md5_raw, 16) != 0)
		return body_fail(b, OL_S3E_BAD_DIGEST, NULL);
	return 0;
}

static int
checksum_check(struct s3_body *b)
{
	uint8_t raw[OL_CKSUM_MAX_RAW];
	if (b->alg == OL_CKSUM_NONE)
		return 0;
	int n = ol_cksum_final(&b->ck, raw);
	if (n < 0 || ol_cksum_b64_encode(raw, (size_t)n, b->ck_b64, sizeof(b->ck_b64)) < 0)
		return body_fail(b, OL_S3E_INTERNAL, NULL);
	const char *want = b->ck_expect[0] ? b->ck_expect : NULL;
	if (!want && b->ck_trailer) {
		want = ol_awschunked_trailer_get(b->dec, b->ck_trailer);
		if (!want)
			return body_fail(b, OL_S3E_INVALID_REQUEST,
					 "The trailing checksum was not sent");
	}
	if (want && strcmp(want, b->ck_b64) != 0) {
		uint8_t tmp[OL_CKSUM_MAX_RAW];
		int wl = ol_cksum_b64_decode(want, strlen(want), tmp, sizeof(tmp));
		if (wl != n)
			return body_fail(b, OL_S3E_INVALID_REQUEST,
					 "Value for x-amz-checksum header is invalid.");
		return body_fail(b, OL_S3E_BAD_DIGEST,
				 "The checksum you specified did not match the calculated "
				 "checksum.");
	}
	return 0;
}

static int
body_finish(struct s3_body *b)
{
	uint8_t sha[OL_CKSUM_MAX_RAW];
	if (b->expect >= 0 && b->got != (uint64_t)b->expect)
		return body_fail(b, OL_S3E_INCOMPLETE_BODY, NULL);
	ol_md5mb_final(&b->md5, b->md5_raw);
	if (b->want_sha256) {
		if (ol_cksum_final(&b->sha256, sha) != 32)
			return body_fail(b, OL_S3E_INTERNAL, NULL);
		if (memcmp(sha, b->r->auth.payload_sha256, 32) != 0)
			return body_fail(b, OL_S3E_SHA256_MISMATCH, NULL);
	}
	if (content_md5_check(b) < 0 || checksum_check(b) < 0)
		return -1;
	b->done = true;
	return 0;
}

static int
account(struct s3_body *b, const uint8_t *p, size_t n)
{
	b->got += n;
	if (b->got > b->max)
		return body_fail(b, OL_S3E_ENTITY_TOO_LARGE, NULL);
	/* the ETag: in lanes shared with other requests, which may hash this piece while the
	 * store codes and writes it; read_raw waits before it reads into the buffer again */
	ol_md5mb_update_async(&b->md5, p, n);
	if ((b->want_sha256 && ol_cksum_update(&b->sha256, p, n) < 0) ||
	    (b->alg != OL_CKSUM_NONE && ol_cksum_update(&b->ck, p, n) < 0))
		return body_fail(b, OL_S3E_INTERNAL, NULL);
	return 0;
}

/* Fill the buffer (fewer, whole-stripe pieces downstream), or up to the body's end. */
static int
read_raw(struct s3_body *b)
{
	size_t got = 0;
	ol_md5mb_wait(&b->md5); /* the piece before may still be hashing in the buffer */
	while (got < b->cap) {
		ssize_t n = ol_http_body_read(b->r->h, b->buf + got, b->cap - got);
		if (n < 0)
			return body_fail(b, OL_S3E_INCOMPLETE_BODY,
					 "error reading the request body");
		if (n == 0)
			break;
		got += (size_t)n;
	}
	b->pos = 0;
	b->len = got;
	if (got == 0)
		b->eof = true;
	return 0;
}

static int
dec_error(struct s3_body *b, int rc)
{
	if (rc == OL_AWSCHUNKED_ERR_SIGNATURE)
		return body_fail(b, OL_S3E_SIGNATURE_MISMATCH,
				 "The chunk signature does not match");
	if (rc == OL_AWSCHUNKED_ERR_NOMEM)
		return body_fail(b, OL_S3E_INTERNAL, NULL);
	return body_fail(b, OL_S3E_INCOMPLETE_BODY, ol_awschunked_message(b->dec));
}

static int
next_chunked(struct s3_body *b, const uint8_t **data, size_t *n)
{
	for (;;) {
		if (b->pos == b->len) {
			if (b->eof)
				return body_fail(b, OL_S3E_INCOMPLETE_BODY, NULL);
			if (read_raw(b) < 0)
				return -1;
			continue;
		}
		size_t used = 0;
		const uint8_t *d = NULL;
		size_t dl = 0;
		int rc =
		    ol_awschunked_feed(b->dec, b->buf + b->pos, b->len - b->pos, &used, &d, &dl);
		if (rc < 0)
			return dec_error(b, rc);
		b->pos += used;
		if (dl) {
			if (account(b, d, dl) < 0)
				return -1;
			*data = d;
			*n = dl;
			return 1;
		}
		if (rc == OL_AWSCHUNKED_DONE)
			return body_finish(b);
	}
}

int
s3_body_next(struct s3_body *b, const uint8_t **data, size_t *n)
{
	if (b->err)
		return -1;
	if (b->done)
		return 0;
	if (b->dec)
		return next_chunked(b, data, n);
	if (read_raw(b) < 0)
		return -1;
	if (b->eof)
		return body_finish(b);
	if (account(b, b->buf, b->len) < 0)
		return -1;
	*data = b->buf;
	*n = b->len;
	return 1;
}

int
s3_body_slurp(struct s3_req *r, size_t cap, char **out, size_t *len, struct s3_body *b)
{
	struct ol_buf acc = {0};
	const uint8_t *d;
	size_t n;
	int rc;
	*out = NULL;
	*len = 0;
	if (s3_body_init(b, r, cap) < 0)
		return -1;
	while ((rc = s3_body_next(b, &d, &n)) > 0)
		ol_buf_add(&acc, d, n);
	if (rc < 0) {
		ol_buf_free(&acc);
		return -1;
	}
	*out = ol_buf_cstr(&acc);
	*len = acc.len;
	return 0;
}

static void
meta_std(struct s3_req *r, struct ol_buf *meta, const char *name)
{
	const char *v = ol_http_header(r->h, name);
	if (v)
		ol_s3_meta_add(meta, name, v);
}

static void
meta_encoding(struct s3_req *r, struct ol_buf *meta)
{
	const char *v = ol_http_header(r->h, "content-encoding");
	if (!v)
		return;
	if (!strcasestr(v, "aws-chunked")) { /* kept as sent, as AWS returns it */
		ol_s3_meta_add(meta, "content-encoding", v);
		return;
	}
	struct ol_buf out = {0};
	const char *p = v;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = p;
		while (*e && *e != ',')
			e++;
		size_t n = (size_t)(e - p);
		while (n && p[n - 1] == ' ')
			n--;
		if (n && !(n == 11 && strncasecmp(p, "aws-chunked", 11) == 0)) {
			if (out.len)
				ol_buf_adds(&out, ", ");
			ol_buf_add(&out, p, n);
		}
		p = e;
	}
	if (out.len)
		ol_s3_meta_add(meta, "content-encoding", ol_buf_cstr(&out));
	ol_buf_free(&out);
}

void
s3_meta_from_headers(struct s3_req *r, struct ol_buf *meta)
{
	const char *ct = ol_http_header(r->h, "content-type");
	ol_s3_meta_add(meta, "content-type", ct && ct[0] ? ct : "binary/octet-stream");
	meta_std(r, meta, "cache-control");
	meta_std(r, meta, "content-disposition");
	meta_std(r, meta, "content-language");
	meta_std(r, meta, "expires");
	meta_encoding(r, meta);
	for (size_t i = 0; i < r->h->n_headers; i++) {
		const char *n = r->h->headers[i].name;
		if (strncasecmp(n, "x-amz-meta-", 11) != 0 || strlen(n) >= 256)
			continue;
		char low[256];
		size_t k = 0;
		for (; n[k]; k++)
			low[k] = (char)tolower((unsigned char)n[k]);
		low[k] = '\0';
		ol_s3_meta_add(meta, low, r->h->headers[i].value);
	}
	s3_meta_add_owner(r, meta);
}

int
s3_user_meta_check(struct s3_req *r)
{
	size_t total = 0;
	for (size_t i = 0; i < r->h->n_headers; i++) {
		const char *n = r->h->headers[i].name;
		if (strncasecmp(n, "x-amz-meta-", 11) == 0)
			total += strlen(n) - 11 + strlen(r->h->headers[i].value);
	}
	if (total <= S3_MAX_USER_META)
		return 0;
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "Your metadata headers exceed the maximum allowed metadata size: the x-amz-meta-* "
		 "names and values add up to %zu bytes, at most %u are allowed",
		 total, S3_MAX_USER_META);
	s3_error_code(r, "MetadataTooLarge", 400, msg, NULL);
	return -1;
}
