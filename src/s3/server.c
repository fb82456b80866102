/* s3/server.c - S3 entry point: request ids, routing, SigV4, dispatch, error documents. */
#include "s3/s3int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "base/hex.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/clock.h"
#include "base/keyring.h"

static _Atomic uint64_t req_counter;
static atomic_flag metrics_registered = ATOMIC_FLAG_INIT; /* a server renders the counters */
static uint64_t req_seed;

static void
make_reqid(struct s3_req *r)
{
	uint64_t n = atomic_fetch_add(&req_counter, 1) + req_seed;
	for (int i = 15; i >= 0; i--, n >>= 4) /* "%016llX", without printf's cost */
		r->reqid[i] = ol_hex_digit(n & 15, true);
	r->reqid[16] = '\0';
}

size_t
s3_common_headers(struct s3_req *r, struct ol_http_header *h, size_t n)
{
	h[n++] = (struct ol_http_header){"x-amz-request-id", r->reqid};
	h[n++] = (struct ol_http_header){"x-amz-id-2", r->reqid};
	return s3_cors_headers(r, h, n);
}

void
s3_send(struct s3_req *r, int status, const struct ol_http_header *hin, size_t nin,
	const char *body, size_t len)
{
	struct ol_http_header h[48];
	size_t n = 0;
	for (size_t i = 0; i < nin && n < 40; i++)
		h[n++] = hin[i];
	if (r->may_decline && (status == 404 || status >= 500)) {
		/* a read-only view that did not find the object (or could not read it) may be
		 * behind its writer: the caller asks the writer instead (ol_s3_handle_read) */
		r->declined = r->responded = true;
		r->status = status;
		return;
	}
	n = s3_common_headers(r, h, n);
	bool typed = false;
	for (size_t i = 0; i < nin; i++)
		typed |= strcasecmp(hin[i].name, "Content-Type") == 0;
	if (len && !typed)
		h[n++] = (struct ol_http_header){"Content-Type", "application/xml"};
	r->status = status;
	r->responded = true;
	if (ol_http_respond(r->h, status, h, n, (int64_t)len) == 0) {
		if (len)
			ol_http_write(r->h, body, len);
		ol_http_finish(r->h);
	}
}

void
s3_send_xml(struct s3_req *r, int status, struct ol_buf *b)
{
	s3_send(r, status, NULL, 0, b->p, b->len);
	ol_buf_free(b);
}

static _Atomic int64_t err_window;
static _Atomic int err_count;

static void
log_error_limited(struct s3_req *r, const char *code, int status, const char *msg)
{
	int64_t now = (int64_t)time(NULL);
	int64_t w = atomic_load(&err_window);
	if (w != now && atomic_compare_exchange_strong(&err_window, &w, now))
		atomic_store(&err_count, 0);
	if (atomic_fetch_add(&err_count, 1) < 10)
		ol_warn("s3 %s %s %s -> %d %s: %s", r->reqid, r->h->method, r->h->target, status,
			code, msg ? msg : "");
}

void
s3_error_code(struct s3_req *r, const char *code, int status, const char *msg, const char *extra)
{
	struct ol_buf b = {0};
	struct ol_buf res = {0};
	if (r->responded)
		return;
	if (status >= 500)
		log_error_limited(r, code, status, msg);
	ol_buf_adds(&res, "/");
	ol_buf_adds(&res, r->rt.bucket);
	if (r->rt.key_len) {
		ol_buf_adds(&res, "/");
		ol_buf_add(&res, r->rt.key, r->rt.key_len);
	}
	ol_s3_error_xml(&b, code, msg, ol_buf_cstr(&res), r->reqid, extra);
	ol_buf_free(&res);
	s3_send_xml(r, status, &b);
}

void
s3_error(struct s3_req *r, enum ol_s3_err e, const char *msg)
{
	const struct ol_s3_errinfo *ei = ol_s3_errinfo(e);
	s3_error_code(r, ei->code, ei->status, msg && msg[0] ? msg : ei->message, NULL);
}

static void
store_error(struct s3_req *r, int rc, bool write, enum ol_s3_err enoent)
{
	const char *msg;
	enum ol_s3_err e = ol_s3_errno_err(rc, write, enoent, &msg);
	char buf[96];
	if (e == OL_S3E_INTERNAL && !msg) {
		snprintf(buf, sizeof(buf), "store error %d (%s)", rc, strerror(-rc));
		msg = buf;
	}
	s3_error(r, e, msg);
}

void
s3_store_error(struct s3_req *r, int rc, enum ol_s3_err enoent)
{
	store_error(r, rc, false, enoent);
}

void
s3_write_error(struct s3_req *r, int rc, enum ol_s3_err enoent)
{
	store_error(r, rc, true, enoent);
}

bool
s3_bucket_exists(struct s3_req *r)
{
	if (!ol_s3_bucket_name_ok(r->rt.bucket)) {
		s3_error(r, OL_S3E_INVALID_BUCKET_NAME, NULL);
		return false;
	}
	if (r->ba.loaded && r->ba.exists)
		return true;
	int64_t created;
	int rc = ol_store_bucket_stat(r->srv->st, r->rt.bucket, &created);
	if (rc == 0)
		return true;
	s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
	return false;
}

/* ---- authentication ---- */

static enum ol_s3_err
auth_err(int rc, bool presigned)
{
	switch (rc) {
	case OL_SIGV4_ERR_SIGNATURE_MISMATCH:
		return OL_S3E_SIGNATURE_MISMATCH;
	case OL_SIGV4_ERR_INVALID_ACCESS_KEY:
		return OL_S3E_INVALID_ACCESS_KEY;
	case OL_SIGV4_ERR_SKEWED:
		return OL_S3E_REQUEST_TIME_SKEWED;
	case OL_SIGV4_ERR_EXPIRED:
	case OL_SIGV4_ERR_MISSING:
	case OL_SIGV4_ERR_UNSIGNED_HEADERS:
		return OL_S3E_ACCESS_DENIED;
	case OL_SIGV4_ERR_MALFORMED:
	case OL_SIGV4_ERR_WRONG_REGION:
		return presigned ? OL_S3E_AUTH_QUERY_ERROR : OL_S3E_AUTH_HEADER_MALFORMED;
	case OL_SIGV4_ERR_UNSUPPORTED_ALG:
		return presigned ? OL_S3E_AUTH_QUERY_ERROR : OL_S3E_INVALID_ARGUMENT;
	case OL_SIGV4_ERR_BAD_CONTENT_SHA256:
		return OL_S3E_INVALID_ARGUMENT;
	case OL_SIGV4_ERR_NO_CONTENT_SHA256:
		return OL_S3E_INVALID_REQUEST;
	default:
		return OL_S3E_INTERNAL;
	}
}

static void
mismatch_extra(struct s3_req *r, struct ol_buf *x)
{
	if (r->auth.string_to_sign)
		ol_s3_xml_elem(x, "StringToSign", r->auth.string_to_sign);
	if (r->auth.canonical_request)
		ol_s3_xml_elem(x, "CanonicalRequest", r->auth.canonical_request);
}

static int
authenticate(struct s3_req *r)
{
	static const char empty_sha[] =
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	struct ol_sigv4_header hs[OL_HTTP_MAX_HEADERS + 1];
	size_t n = r->h->n_headers < OL_HTTP_MAX_HEADERS ? r->h->n_headers : OL_HTTP_MAX_HEADERS;
	for (size_t i = 0; i < n; i++)
		hs[i] = (struct ol_sigv4_header){
		    r->h->headers[i].name,
		    r->h->header_name_lens ? r->h->header_name_lens[i]
					   : strlen(r->h->headers[i].name),
		    r->h->headers[i].value, strlen(r->h->headers[i].value)};
	struct ol_sigv4_request sr = {
	    r->h->method, r->h->path, strlen(r->h->path), r->query, strlen(r->query), hs, n};
	/* A CORS preflight is answered before authentication, as on AWS: a browser sends it
	 * unsigned, and the query of a presigned URL signs the URL's own method, never OPTIONS
	 * (checking it would refuse every preflight of a presigned URL). OPTIONS only reads
	 * the bucket's CORS rules. */
	if (strcmp(r->h->method, "OPTIONS") == 0) {
		s3_identity(r, true);
		return 0;
	}
	bool v2 = ol_sigv2_present(&sr);
	/* curl --aws-sigv4 (7.88) signs the empty-payload hash without sending
	 * x-amz-content-sha256: take that hash (unsigned header, so the signature is unchanged;
	 * a non-empty body then fails the payload check, as it must). */
	if (!v2 && ol_http_header(r->h, "authorization") &&
	    !ol_http_header(r->h, "x-amz-content-sha256"))
		hs[sr.n_headers++] =
		    (struct ol_sigv4_header){"x-amz-content-sha256", 20, empty_sha, 64};
	int rc = v2 ? ol_sigv2_verify(&sr, time(NULL), ol_keyring_secret_for, (void *)r->srv->cfg,
				      &r->auth)
		    : ol_sigv4_verify(&sr, r->srv->cfg->region, time(NULL), ol_keyring_secret_for,
				      (void *)r->srv->cfg, &r->auth);
	if (rc == 0 || (!v2 && rc == OL_SIGV4_ERR_MISSING)) {
		/* no signature at all: an anonymous request, which ACLs and policies judge */
		s3_identity(r, rc != 0);
		return 0;
	}
	bool pre = v2 ? r->auth.presigned : strstr(r->query, "X-Amz-Signature") != NULL;
	enum ol_s3_err e = auth_err(rc, pre);
	const char *msg = r->auth.message[0] ? r->auth.message : NULL;
	if (e == OL_S3E_SIGNATURE_MISMATCH) {
		struct ol_buf x = {0};
		mismatch_extra(r, &x);
		s3_error_code(r, "SignatureDoesNotMatch", 403, ol_s3_errinfo(e)->message, x.p);
		ol_buf_free(&x);
	} else if (rc == OL_SIGV4_ERR_UNSIGNED_HEADERS) {
		struct ol_buf x = {0};
		ol_s3_xml_elem(&x, "HeadersNotSigned", r->auth.unsigned_headers);
		s3_error_code(r, "AccessDenied", 403, msg, x.p);
		ol_buf_free(&x);
	} else {
		s3_error(r, e, msg);
	}
	return -1;
}

/* ---- dispatch ---- */

/* Server-side encryption headers are honoured by the object reads and writes (sse.c): PUT
 * (object, part, copy), POST (multipart create and complete), GET and HEAD of an object. Any
 * other request that carries them is refused, never served as if it were encrypted. Returns
 * true when the error was sent. */
static bool
refuse_sse(struct s3_req *r)
{
	const char *m = r->h->method;
	if (r->rt.key_len > 0 && (strcmp(m, "PUT") == 0 || strcmp(m, "GET") == 0 ||
				  strcmp(m, "HEAD") == 0 || strcmp(m, "POST") == 0))
		return false;
	static const char *const prefixes[] = {"x-amz-server-side-encryption",
					       "x-amz-copy-source-server-side-encryption"};
	for (size_t i = 0; i < r->h->n_headers; i++) {
		const char *n = r->h->headers[i].name;
		for (size_t j = 0; j < sizeof(prefixes) / sizeof(prefixes[0]); j++) {
			if (strncasecmp(n, prefixes[j], strlen(prefixes[j])) != 0)
				continue;
			char msg[200];
			struct ol_buf x = {0};
			snprintf(
			    msg, sizeof(msg),
			    "Server-side encryption applies to object reads and writes only: the "
			    "header %.80s cannot be honoured here; send the request without it",
			    n);
			ol_s3_xml_elem(&x, "Header", n);
			s3_error_code(r, "NotImplemented", 501, msg, x.p);
			ol_buf_free(&x);
			return true;
		}
	}
	return false;
}

static void
dispatch(struct s3_req *r)
{
	if (s3_dispatch_preauth(r))
		return;
	if (refuse_sse(r) || !s3_access_check(r))
		return;
	s3_cors_request(r);
	s3_dispatch(r);
}

/* one request; may_decline: a 404 or 5xx answer is not sent (returns true) */
static bool
handle(struct ol_http_req *h, struct ol_s3_server *s, bool may_decline)
{
	struct s3_req r = {
	    .srv = s, .h = h, .query = h->query ? h->query : "", .may_decline = may_decline};
	uint64_t t0 = ol_clock_ns();
	make_reqid(&r);
	int rc = ol_s3_route(ol_http_header(h, "host"), r.srv->endpoint_host, h->path, &r.rt);
	if (rc == -ENAMETOOLONG)
		s3_error(&r, OL_S3E_KEY_TOO_LONG, NULL);
	else if (rc < 0)
		s3_error(&r, OL_S3E_INVALID_URI, NULL);
	else if (authenticate(&r) == 0)
		dispatch(&r);
	if (!r.responded)
		s3_error(&r, OL_S3E_INTERNAL, "no response");
	ol_sigv4_result_fini(&r.auth);
	s3_access_fini(&r);
	uint64_t ns = ol_clock_ns() - t0;
	if (!r.op) /* refused before its handler named it (no such bucket, access denied...) */
		r.op = s3_metrics_op(h->method, r.query, r.rt.bucket[0], r.rt.key_len,
				     ol_http_header(h, "x-amz-copy-source"));
	if (!r.declined) /* a declined one is counted where it is answered */
		s3_metrics_record(r.op, r.status, ns / 1000);
	ol_debug("s3 %s %s %s %s -> %d%s %.3fms", r.reqid, r.op ? r.op : "-", h->method, h->target,
		 r.status, r.declined ? " (declined)" : "", (double)ns / 1e6);
	return r.declined;
}

void
ol_s3_handle(struct ol_http_req *h, void *arg)
{
	(void)handle(h, arg, false);
}

bool
ol_s3_handle_read(struct ol_http_req *h, struct ol_s3_server *s)
{
	return !handle(h, s, true);
}

/* The HTTP server's own errors (bad head, timeout, over a limit) as S3 error documents. */
void
ol_s3_http_error(struct ol_http_error *e, void *arg)
{
	static const char *const codes[] = {
	    [OL_HTTP_ERR_BAD_REQUEST] = "BadRequest",
	    [OL_HTTP_ERR_HEADER_TOO_LARGE] = "RequestHeaderSectionTooLarge",
	    [OL_HTTP_ERR_TIMEOUT] = "RequestTimeout",
	    [OL_HTTP_ERR_BODY_TOO_LARGE] = "EntityTooLarge",
	    [OL_HTTP_ERR_BUSY] = "SlowDown",
	    [OL_HTTP_ERR_VERSION] = "HttpVersionNotSupported",
	    [OL_HTTP_ERR_NOT_IMPLEMENTED] = "NotImplemented",
	    [OL_HTTP_ERR_TLS_REQUIRED] = "BadRequest",
	};
	struct ol_buf b = {0};
	char reqid[24];
	(void)arg;
	if ((size_t)e->kind >= sizeof(codes) / sizeof(codes[0]) || !codes[e->kind])
		return;
	if (e->kind == OL_HTTP_ERR_HEADER_TOO_LARGE)
		e->status = 400; /* as AWS answers it */
	snprintf(reqid, sizeof(reqid), "%016llX",
		 (unsigned long long)(atomic_fetch_add(&req_counter, 1) + req_seed));
	ol_s3_error_xml(&b, codes[e->kind], e->message, "", reqid, NULL);
	const char *x = ol_buf_cstr(&b);
	size_t n = strlen(x);
	if (n <= e->body_cap) {
		memcpy(e->body, x, n);
		e->body_len = n;
		e->content_type = "application/xml";
	}
	ol_buf_free(&b);
}

int
ol_s3_new(const struct ol_config *cfg, struct ol_store *st, struct ol_s3_server **out)
{
	if (!cfg || !out || cfg->n_creds == 0)
		return -EINVAL;
	struct ol_s3_server *s = ol_xcalloc(1, sizeof(*s));
	s->cfg = cfg;
	s->st = st;
	s->max_object_size = cfg->max_object_size ? cfg->max_object_size : (5ull << 30);
	ol_s3_endpoint_names(cfg->s3_addr, cfg->s3_domains, s->endpoint_host,
			     sizeof(s->endpoint_host));
	if (s3_sse_load_master(s) < 0) {
		free(s);
		return -EINVAL;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	req_seed = ((uint64_t)ts.tv_sec << 24) ^ (uint64_t)ts.tv_nsec;
	/* the counters are the process's: one renderer, whichever server counted */
	s->metrics = !atomic_flag_test_and_set(&metrics_registered);
	if (s->metrics) {
		ol_metrics_register(s3_metrics_render, s);
		ol_metrics_register(s3_access_metrics_render, s);
	}
	/* a cluster node without the set's leadership has no store to scan; a read-only store
	 * is never scanned (the scanner deletes) */
	if (st && !ol_store_readonly(st))
		s3_lc_start(s);
	*out = s;
	return 0;
}

void
ol_s3_set_store(struct ol_s3_server *s, struct ol_store *st)
{
	/* the lifecycle scanner acts on the store: it stops (joined) before the store goes and
	 * starts again with the new one */
	s3_lc_stop(s);
	s->st = st;
	/* the bucket records may have changed while another node served them */
	s3_bucket_changed();
	if (st && !ol_store_readonly(st))
		s3_lc_start(s);
}

void
ol_s3_set_http(struct ol_s3_server *s, const struct ol_http_server *http)
{
	atomic_store(&s->http, http);
}

void
ol_s3_free(struct ol_s3_server *s)
{
	if (!s)
		return;
	s3_lc_stop(s);
	if (s->metrics) {
		ol_metrics_unregister(s3_metrics_render, s);
		ol_metrics_unregister(s3_access_metrics_render, s);
		atomic_flag_clear(&metrics_registered);
	}
	OPENSSL_cleanse(s->sse_master, sizeof(s->sse_master));
	free(s);
}
