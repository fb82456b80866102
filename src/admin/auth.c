/* admin/auth.c - who may use the admin API: the request's SigV4 signature (s3/auth, a pure leaf
 * library) checked against the config's [[credentials]], then the admin flag of the key.
 * Refusals are S3-style XML error documents, as an S3 client expects from this port. */
#include "adminint.h"

#include "base/keyring.h"
#include "base/log.h"
#include "base/metrics.h"
#include "s3/auth/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint64_t admin_reqs;

static void
xml_text(struct ol_strbuf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			ol_strbuf_printf(b, "&lt;");
			break;
		case '>':
			ol_strbuf_printf(b, "&gt;");
			break;
		case '&':
			ol_strbuf_printf(b, "&amp;");
			break;
		case '"':
			ol_strbuf_printf(b, "&quot;");
			break;
		default:
			ol_strbuf_printf(b, "%c", *s);
		}
	}
}

static void
xml_elem(struct ol_strbuf *b, const char *name, const char *text)
{
	ol_strbuf_printf(b, "<%s>", name);
	xml_text(b, text);
	ol_strbuf_printf(b, "</%s>", name);
}

/* Answer status with <Error><Code>code</Code>... (string_to_sign / canonical may be NULL). */
static void
send_error(struct ol_http_req *r, int status, const char *code, const char *msg,
	   const struct ol_sigv4_result *res)
{
	struct ol_strbuf b = {0};
	char reqid[24];
	snprintf(reqid, sizeof(reqid), "A%015llX",
		 (unsigned long long)atomic_fetch_add(&admin_reqs, 1) + 1);
	ol_strbuf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>");
	xml_elem(&b, "Code", code);
	xml_elem(&b, "Message", msg);
	xml_elem(&b, "Resource", r->path);
	xml_elem(&b, "RequestId", reqid);
	if (res && res->string_to_sign)
		xml_elem(&b, "StringToSign", res->string_to_sign);
	if (res && res->canonical_request)
		xml_elem(&b, "CanonicalRequest", res->canonical_request);
	ol_strbuf_printf(&b, "</Error>\n");
	ol_debug("admin %s %s from %s -> %d %s", r->method, r->path, r->peer ? r->peer : "?",
		 status, code);
	struct ol_http_header h[] = {{"Content-Type", "application/xml"},
				     {"Cache-Control", "no-store"},
				     {"x-amz-request-id", reqid}};
	if (ol_http_respond(r, status, h, 3, (int64_t)b.len) == 0)
		ol_http_write(r, b.p, b.len);
	ol_http_finish(r);
	ol_strbuf_free(&b);
}

int
ol_admin_request_signed(const struct ol_http_req *r)
{
	return ol_http_header(r, "authorization") || strstr(r->query, "X-Amz-Credential=") ||
	       strstr(r->query, "X-Amz-Signature=");
}

static void
sha256(const struct ol_buf *b, uint8_t out[32])
{
	unsigned n = 0;
	if (!EVP_Digest(b->p ? b->p : "", b->len, out, &n, EVP_sha256(), NULL))
		ol_die("admin: SHA-256 failed");
}

/* The signed payload hash (or the one curl signs without sending it) against body. 0, or
 * the answer was sent and -EACCES returned. */
static int
verify_payload(struct ol_http_req *r, int rc, const struct ol_buf *body,
	       struct ol_sigv4_result *res)
{
	uint8_t h[32];
	if (rc == OL_SIGV4_ERR_NEED_BODY_HASH) {
		sha256(body, h);
		return ol_sigv4_verify_body(res, h);
	}
	if (rc == 0 && res->has_payload_sha256) {
		sha256(body, h);
		if (CRYPTO_memcmp(h, res->payload_sha256, 32) != 0) {
			send_error(r, 400, "XAmzContentSHA256Mismatch",
				   "The provided 'x-amz-content-sha256' header does not match what "
				   "was computed.",
				   NULL);
			return -EACCES;
		}
	}
	if (rc == 0 && res->payload != OL_SIGV4_PAYLOAD_SHA256 &&
	    res->payload != OL_SIGV4_PAYLOAD_UNSIGNED) {
		send_error(r, 400, "InvalidRequest",
			   "admin requests take a plain body (no aws-chunked encoding)", NULL);
		return -EACCES;
	}
	return rc;
}

/* Verify r's signature (and the body's hash when body is given; without, a request with a
 * body that needs its hash is refused). 0 with res filled, else the answer was sent and
 * -EACCES returned. */
static int
verify(struct ol_http_req *r, const struct ol_config *cfg, const struct ol_buf *body,
       struct ol_sigv4_result *res)
{
	struct ol_sigv4_header hs[OL_HTTP_MAX_HEADERS];
	size_t n = r->n_headers < OL_HTTP_MAX_HEADERS ? r->n_headers : OL_HTTP_MAX_HEADERS;
	for (size_t i = 0; i < n; i++)
		hs[i] = (struct ol_sigv4_header){r->headers[i].name, strlen(r->headers[i].name),
						 r->headers[i].value, strlen(r->headers[i].value)};
	struct ol_sigv4_request sr = {
	    r->method, r->path, strlen(r->path), r->query, strlen(r->query), hs, n};
	int rc =
	    ol_sigv4_verify(&sr, cfg->region, time(NULL), ol_keyring_secret_for, (void *)cfg, res);
	if (body && (rc == 0 || rc == OL_SIGV4_ERR_NEED_BODY_HASH)) {
		rc = verify_payload(r, rc, body, res);
		if (rc == -EACCES)
			return rc;
	}
	if (rc == 0)
		return 0;
	if (rc == OL_SIGV4_ERR_NEED_BODY_HASH) {
		send_error(r, 400, "InvalidRequest", "admin requests take no body", NULL);
		return -EACCES;
	}
	const char *msg = res->message[0] ? res->message : "the request signature is not valid";
	if (rc == OL_SIGV4_ERR_SIGNATURE_MISMATCH)
		msg = "The request signature we calculated does not match the signature you "
		      "provided. Check your key and signing method.";
	send_error(r, ol_sigv4_http_status(rc), ol_sigv4_s3_code(rc, res->presigned), msg, res);
	return -EACCES;
}

static int
authorize(struct ol_http_req *r, const struct ol_config *cfg, bool required,
	  const struct ol_buf *body)
{
	struct ol_sigv4_result res;
	char msg[OL_CFG_STR * 2 + 96];
	int rc = 0;

	if (!ol_admin_request_signed(r)) {
		if (!required)
			return 0;
		send_error(
		    r, 403, "AccessDenied",
		    "admin requests must be SigV4-signed by an admin user (a [[credentials]] "
		    "entry without user, or with admin = true)",
		    NULL);
		return -EACCES;
	}
	if (!cfg) {
		send_error(r, 503, "ServiceUnavailable", "the admin API is not configured", NULL);
		return -EACCES;
	}
	rc = verify(r, cfg, body, &res);
	if (rc == 0) {
		const char *user = "";
		bool admin = false;
		if (ol_keyring_lookup(cfg, res.access_key, &user, &admin) || !admin) {
			snprintf(msg, sizeof(msg),
				 "access key %s (user \"%s\") is not an admin: sign with an admin "
				 "key, or set admin = true on its [[credentials]] entry",
				 res.access_key, user);
			send_error(r, 403, "AccessDenied", msg, NULL);
			rc = -EACCES;
		} else if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
			ol_info("admin: %s %s by access key %s from %s", r->method, r->path,
				res.access_key, r->peer ? r->peer : "?");
		}
	}
	ol_sigv4_result_fini(&res);
	return rc;
}

int
ol_admin_authorize(struct ol_http_req *r, const struct ol_config *cfg, bool required)
{
	return authorize(r, cfg, required, NULL);
}

/* The whole body into b: 0, -EMSGSIZE over cap, or the reader's -errno. */
static int
read_body(struct ol_http_req *r, struct ol_buf *b, size_t cap)
{
	char tmp[4096];
	if (r->content_length > (int64_t)cap)
		return -EMSGSIZE;
	for (;;) {
		ssize_t n = ol_http_body_read(r, tmp, sizeof(tmp));
		if (n < 0)
			return (int)n;
		if (n == 0)
			return 0;
		if (b->len + (size_t)n > cap)
			return -EMSGSIZE;
		ol_buf_add(b, tmp, (size_t)n);
	}
}

int
ol_admin_authorize_body(struct ol_http_req *r, const struct ol_config *cfg, struct ol_buf *body,
			size_t cap)
{
	char msg[96];
	int rc = read_body(r, body, cap);
	if (rc == -EMSGSIZE) {
		snprintf(msg, sizeof(msg), "the request body is over %zu bytes", cap);
		send_error(r, 400, "EntityTooLarge", msg, NULL);
		return -EACCES;
	}
	if (rc) {
		send_error(r, 400, "IncompleteBody", "the request body could not be read", NULL);
		return -EACCES;
	}
	ol_buf_cstr(body);
	return authorize(r, cfg, true, body);
}
