/* s3/auth/sigv4.c - AWS Signature V4 (S3 flavour): parsing both auth forms, checks, verify,
 * deferred body hash, sign. Canonicalization lives in canonical.c. */
#include "s3/auth/sigv4.h"
#include "s3/auth/sigv4int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include "base/hex.h"

/* ---- parsing the two auth forms ---- */

struct auth {
	char access_key[129];
	char date8[9];
	char region[64];
	char service[16];
	char signed_list[1024];
	char signature[80];
	char amz_date[17];
	char payload_hash[80];
	time_t t;
	long expires;
	int pending; /* no x-amz-content-sha256 and a body: hash known only after reading it */
};

static int
fail(struct ol_sigv4_result *out, int err, const char *fmt, const char *arg)
{
	snprintf(out->message, sizeof(out->message), fmt, arg ? arg : "");
	return err;
}

/* Copy [s, s+n) NUL-terminated into out (cap). Returns 0 or -1 when it does not fit. */
static int
copy_field(char *out, size_t cap, const char *s, size_t n)
{
	if (n + 1 > cap)
		return -1;
	memcpy(out, s, n);
	out[n] = 0;
	return 0;
}

/* "AKID/YYYYMMDD/region/service/aws4_request" (the key itself may hold no '/'). */
static int
parse_credential(const char *cred, struct auth *a)
{
	const char *sl[4];
	const char *p = cred;
	for (int i = 0; i < 4; i++) {
		sl[i] = strchr(p, '/');
		if (!sl[i])
			return -1;
		p = sl[i] + 1;
	}
	if (strchr(p, '/') || strcmp(p, "aws4_request") != 0)
		return -1;
	if (sl[0] == cred ||
	    copy_field(a->access_key, sizeof(a->access_key), cred, (size_t)(sl[0] - cred)))
		return -1;
	if (sl[1] - sl[0] - 1 != 8 ||
	    copy_field(a->date8, sizeof(a->date8), sl[0] + 1, (size_t)(sl[1] - sl[0] - 1)))
		return -1;
	if (copy_field(a->region, sizeof(a->region), sl[1] + 1, (size_t)(sl[2] - sl[1] - 1)))
		return -1;
	return copy_field(a->service, sizeof(a->service), sl[2] + 1, (size_t)(sl[3] - sl[2] - 1));
}

/* "YYYYMMDDTHHMMSSZ" -> time_t. */
static int
parse_amz_date(const char *s, time_t *t)
{
	if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return -1;
	int v[6], idx[6][2] = {{0, 4}, {4, 2}, {6, 2}, {9, 2}, {11, 2}, {13, 2}};
	for (int i = 0; i < 6; i++) {
		v[i] = 0;
		for (int j = 0; j < idx[i][1]; j++) {
			char c = s[idx[i][0] + j];
			if (c < '0' || c > '9')
				return -1;
			v[i] = v[i] * 10 + (c - '0');
		}
	}
	if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60)
		return -1;
	struct tm tm = {.tm_year = v[0] - 1900,
			.tm_mon = v[1] - 1,
			.tm_mday = v[2],
			.tm_hour = v[3],
			.tm_min = v[4],
			.tm_sec = v[5]};
	*t = timegm(&tm);
	return 0;
}

/* Signed header list: lowercase names separated by ';', must contain "host". */
static int
check_signed_list(const char *list)
{
	int n = 0, host = 0;
	const char *s = list;
	if (!*s)
		return -1;
	while (*s) {
		const char *e = strchr(s, ';');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 0 || ++n > MAX_SIGNED)
			return -1;
		if (len == 4 && memcmp(s, "host", 4) == 0)
			host = 1;
		s += len;
		if (*s == ';')
			s++;
	}
	return host ? 0 : -2;
}

/* One "Key=Value" item of the Authorization header into a. */
static int
auth_item(const char *k, size_t klen, const char *v, size_t vlen, struct auth *a, char *cred,
	  int *seen)
{
	if (klen == 10 && memcmp(k, "Credential", 10) == 0) {
		*seen |= 1;
		return copy_field(cred, MAX_FIELD, v, vlen);
	}
	if (klen == 13 && memcmp(k, "SignedHeaders", 13) == 0) {
		*seen |= 2;
		return copy_field(a->signed_list, sizeof(a->signed_list), v, vlen);
	}
	if (klen == 9 && memcmp(k, "Signature", 9) == 0) {
		*seen |= 4;
		return copy_field(a->signature, sizeof(a->signature), v, vlen);
	}
	return 0; /* unknown items are ignored */
}

static int
parse_auth_header(const char *h, struct auth *a, char *cred, struct ol_sigv4_result *out)
{
	const char *sp = h;
	while (*sp && *sp != ' ')
		sp++;
	if ((size_t)(sp - h) != strlen(ALG) || memcmp(h, ALG, (size_t)(sp - h)) != 0)
		return fail(out, OL_SIGV4_ERR_UNSUPPORTED_ALG, "Unsupported Authorization Type%s",
			    NULL);
	int seen = 0;
	const char *p = sp;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = p;
		while (*e && *e != ',')
			e++;
		const char *eq = memchr(p, '=', (size_t)(e - p));
		size_t end = (size_t)(e - p);
		while (end && p[end - 1] == ' ')
			end--;
		if (eq && auth_item(p, (size_t)(eq - p), eq + 1, end - (size_t)(eq + 1 - p), a,
				    cred, &seen))
			return fail(out, OL_SIGV4_ERR_MALFORMED,
				    "The authorization header is malformed; a field is too long%s",
				    NULL);
		p = e;
	}
	if (seen != 7)
		return fail(out, OL_SIGV4_ERR_MALFORMED,
			    "The authorization header is malformed; missing Credential, "
			    "SignedHeaders or Signature%s",
			    NULL);
	return 0;
}

static const char *
query_of(const struct ol_sigv4_request *req, size_t *len)
{
	*len = req->query ? req->query_len : 0;
	return req->query ? req->query : "";
}

static int
qget(const struct ol_sigv4_request *req, const char *name, char *out, size_t cap)
{
	size_t ql;
	const char *q = query_of(req, &ql);
	long n = sv4_query_get(q, ql, name, out, cap);
	return n < 0 ? (int)n : 0;
}

static int
parse_expires(const char *s, long *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-' || *s == '+')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < 1 || v > OL_SIGV4_MAX_EXPIRES)
		return -1;
	*out = (long)v;
	return 0;
}

static int
parse_presigned(const struct ol_sigv4_request *req, struct auth *a, char *cred,
		struct ol_sigv4_result *out)
{
	char alg[64], exp[32];
	const int E = OL_SIGV4_ERR_MALFORMED;
	if (qget(req, "X-Amz-Algorithm", alg, sizeof(alg)) < 0 || strcmp(alg, ALG) != 0)
		return fail(out, OL_SIGV4_ERR_UNSUPPORTED_ALG,
			    "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"%s", NULL);
	if (qget(req, "X-Amz-Credential", cred, MAX_FIELD) < 0)
		return fail(out, E, "Query-string authentication requires X-Amz-Credential%s",
			    NULL);
	if (qget(req, "X-Amz-Date", a->amz_date, sizeof(a->amz_date)) < 0 ||
	    parse_amz_date(a->amz_date, &a->t))
		return fail(out, E,
			    "X-Amz-Date must be in the ISO8601 Long Format "
			    "\"yyyyMMdd'T'HHmmss'Z'\"%s",
			    NULL);
	if (qget(req, "X-Amz-Expires", exp, sizeof(exp)) < 0 || parse_expires(exp, &a->expires))
		return fail(out, E,
			    "X-Amz-Expires must be a number of seconds between 1 and "
			    "604800%s",
			    NULL);
	if (qget(req, "X-Amz-SignedHeaders", a->signed_list, sizeof(a->signed_list)) < 0)
		return fail(out, E, "Query-string authentication requires X-Amz-SignedHeaders%s",
			    NULL);
	if (qget(req, "X-Amz-Signature", a->signature, sizeof(a->signature)) < 0)
		return fail(out, E, "Query-string authentication requires X-Amz-Signature%s", NULL);
	if (qget(req, "X-Amz-Content-Sha256", a->payload_hash, sizeof(a->payload_hash)) < 0)
		snprintf(a->payload_hash, sizeof(a->payload_hash), "UNSIGNED-PAYLOAD");
	return 0;
}

/* Plain SigV4 (curl): empty body -> its hash; else the hash comes after the body. */
static int
no_content_sha256(const struct ol_sigv4_request *req, struct auth *a)
{
	char v[32];
	size_t from = 0;
	long n = sv4_header_get(req, "content-length", v, sizeof(v));
	int body = sv4_find_header(req, "transfer-encoding", 17, &from) != NULL ||
		   (n != -ENOENT && !(n == 1 && v[0] == '0'));
	if (body)
		a->pending = 1;
	else
		snprintf(a->payload_hash, sizeof(a->payload_hash), "%s", EMPTY_SHA256);
	return 0;
}

static int
parse_header_form(const struct ol_sigv4_request *req, struct auth *a, char *cred,
		  struct ol_sigv4_result *out)
{
	char h[4096];
	if (sv4_header_get(req, "authorization", h, sizeof(h)) < 0)
		return fail(out, OL_SIGV4_ERR_MALFORMED, "Authorization header too long%s", NULL);
	int rc = parse_auth_header(h, a, cred, out);
	if (rc)
		return rc;
	if (sv4_header_get(req, "x-amz-date", a->amz_date, sizeof(a->amz_date)) < 0 ||
	    parse_amz_date(a->amz_date, &a->t))
		return fail(out, OL_SIGV4_ERR_MALFORMED,
			    "AWS authentication requires a valid X-Amz-Date header%s", NULL);
	long n =
	    sv4_header_get(req, "x-amz-content-sha256", a->payload_hash, sizeof(a->payload_hash));
	if (n == -ENOENT)
		return no_content_sha256(req, a);
	if (n < 0)
		return fail(out, OL_SIGV4_ERR_BAD_CONTENT_SHA256, "x-amz-content-sha256 too long%s",
			    NULL);
	return 0;
}

/* ---- checks ---- */

static int
payload_mode(const char *v, struct ol_sigv4_result *out)
{
	static const struct {
		const char *name;
		enum ol_sigv4_payload mode;
	} modes[] = {
	    {"UNSIGNED-PAYLOAD", OL_SIGV4_PAYLOAD_UNSIGNED},
	    {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", OL_SIGV4_PAYLOAD_STREAMING_SIGNED},
	    {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
	     OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER},
	    {"STREAMING-UNSIGNED-PAYLOAD-TRAILER", OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER},
	};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(v, modes[i].name) == 0) {
			out->payload = modes[i].mode;
			return 0;
		}
	if (strlen(v) != 64)
		return -1;
	for (int i = 0; i < 32; i++) {
		int hi = ol_hex_val(v[2 * i]), lo = ol_hex_val(v[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out->payload_sha256[i] = (uint8_t)(hi * 16 + lo);
	}
	out->payload = OL_SIGV4_PAYLOAD_SHA256;
	out->has_payload_sha256 = 1;
	return 0;
}

static int
check_scope(const struct auth *a, const char *region, int presigned, struct ol_sigv4_result *out)
{
	const char *what = presigned ? "Error parsing the X-Amz-Credential parameter"
				     : "The authorization header is malformed";
	char msg[300];
	if (strncmp(a->amz_date, a->date8, 8) != 0) {
		snprintf(msg, sizeof(msg), "%s; the credential date does not match X-Amz-Date",
			 what);
		return fail(out, OL_SIGV4_ERR_MALFORMED, "%s", msg);
	}
	if (strcmp(a->service, "s3") != 0) {
		snprintf(msg, sizeof(msg),
			 "%s; incorrect service \"%.20s\". This endpoint "
			 "belongs to \"s3\".",
			 what, a->service);
		return fail(out, OL_SIGV4_ERR_MALFORMED, "%s", msg);
	}
	if (strcmp(a->region, region) != 0) {
		snprintf(msg, sizeof(msg), "%s; the region '%.64s' is wrong; expecting '%.64s'",
			 what, a->region, region);
		return fail(out, OL_SIGV4_ERR_WRONG_REGION, "%s", msg);
	}
	return 0;
}

static int
check_time(const struct auth *a, int presigned, time_t now, struct ol_sigv4_result *out)
{
	if (presigned) {
		if (a->t > now + OL_SIGV4_MAX_SKEW)
			return fail(out, OL_SIGV4_ERR_EXPIRED, "Request is not valid yet%s", NULL);
		if (now > a->t + a->expires)
			return fail(out, OL_SIGV4_ERR_EXPIRED, "Request has expired%s", NULL);
		return 0;
	}
	if (a->t > now + OL_SIGV4_MAX_SKEW || a->t < now - OL_SIGV4_MAX_SKEW)
		return fail(out, OL_SIGV4_ERR_SKEWED,
			    "The difference between the request time and the current time is "
			    "too large.%s",
			    NULL);
	return 0;
}

/* Canonical request, string to sign and signature of req under key. */
static int
compute(const struct ol_sigv4_request *req, const struct auth *a, const char *scope,
	const uint8_t key[32], int presigned, struct sbuf *creq, struct sbuf *sts, char sig[65])
{
	int rc = sv4_canonical_request(req, a->signed_list, a->payload_hash, presigned, creq);
	if (rc == -E2BIG)
		return OL_SIGV4_ERR_MALFORMED;
	if (rc)
		return OL_SIGV4_ERR_NOMEM;
	sv4_string_to_sign(a->amz_date, scope, creq, sts);
	if (sts->oom)
		return OL_SIGV4_ERR_NOMEM;
	uint8_t mac[32];
	rc = sv4_hmac(key, 32, sts->p, sts->len, mac);
	if (rc)
		return rc;
	ol_hex_encode(mac, 32, sig);
	return 0;
}

static int
parse_any(const struct ol_sigv4_request *req, int presigned, struct auth *a,
	  struct ol_sigv4_result *out)
{
	char cred[MAX_FIELD];
	int rc =
	    presigned ? parse_presigned(req, a, cred, out) : parse_header_form(req, a, cred, out);
	if (rc)
		return rc;
	if (parse_credential(cred, a))
		return fail(out, OL_SIGV4_ERR_MALFORMED,
			    "%s; the Credential is mal-formed; expecting "
			    "\"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".",
			    presigned ? "Error parsing the X-Amz-Credential parameter"
				      : "The authorization header is malformed");
	rc = check_signed_list(a->signed_list);
	if (rc == -2)
		return fail(out, OL_SIGV4_ERR_MALFORMED,
			    "The host header must be signed (SignedHeaders lacks host)%s", NULL);
	if (rc)
		return fail(out, OL_SIGV4_ERR_MALFORMED, "SignedHeaders is malformed%s", NULL);
	return 0;
}

/* name (nlen bytes, any case) is one of the ';'-separated lowercase names of list. */
static int
in_signed_list(const char *list, const char *name, size_t nlen)
{
	const char *s = list;
	while (*s) {
		const char *e = strchr(s, ';');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == nlen && strncasecmp(s, name, nlen) == 0)
			return 1;
		s += len;
		if (*s == ';')
			s++;
	}
	return 0;
}

/* Append the lowercase name to the ", "-separated list of out (once; whole names only). */
static void
note_unsigned(char *out, size_t cap, const char *name, size_t nlen)
{
	char lc[64];
	size_t o = strlen(out), need = nlen + (o ? 2 : 0);
	if (nlen >= sizeof(lc) || o + need + 1 > cap)
		return;
	for (size_t i = 0; i < nlen; i++)
		lc[i] = (char)tolower((unsigned char)name[i]);
	lc[nlen] = 0;
	for (const char *p = strstr(out, lc); p; p = strstr(p + 1, lc))
		if ((p == out || p[-1] == ' ') && (p[nlen] == ',' || !p[nlen]))
			return;
	snprintf(out + o, cap - o, "%s%s", o ? ", " : "", lc);
}

/* Every x-amz-* header must be signed, as on AWS: an unsigned one (x-amz-copy-source,
 * x-amz-meta-*, x-amz-acl, ...) would otherwise change what a signed request does. The header
 * form's x-amz-date and x-amz-content-sha256 are covered by the signature in any case. */
static int
check_unsigned(const struct ol_sigv4_request *req, const char *list, int presigned,
	       struct ol_sigv4_result *out)
{
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct ol_sigv4_header *h = &req->headers[i];
		if (h->name_len < 6 || strncasecmp(h->name, "x-amz-", 6) != 0)
			continue;
		if (!presigned &&
		    ((h->name_len == 10 && strncasecmp(h->name, "x-amz-date", 10) == 0) ||
		     (h->name_len == 20 && strncasecmp(h->name, "x-amz-content-sha256", 20) == 0)))
			continue;
		if (!in_signed_list(list, h->name, h->name_len)) {
			/* a name too long to list still fails the request */
			if (!out->unsigned_headers[0] && h->name_len >= 64)
				snprintf(out->unsigned_headers, sizeof(out->unsigned_headers),
					 "%.60s...", h->name);
			note_unsigned(out->unsigned_headers, sizeof(out->unsigned_headers), h->name,
				      h->name_len);
		}
	}
	if (!out->unsigned_headers[0])
		return 0;
	return fail(out, OL_SIGV4_ERR_UNSIGNED_HEADERS,
		    "There were headers present in the request which were not signed%s", NULL);
}

static int
sig_equal(const char *computed, const char *given)
{
	return strlen(given) == 64 && CRYPTO_memcmp(computed, given, 64) == 0;
}

/* Second try with the path and query as sent, unsorted and not re-encoded: curl 7.x
 * (Debian 12) signs them so. The signature still covers every byte of the request. */
static int
raw_retry(const struct ol_sigv4_request *req, const struct auth *a,
	  const struct ol_sigv4_result *out, char sig[65])
{
	struct sbuf creq = {0}, sts = {0};
	char alt[65];
	int rc = compute(req, a, out->scope, out->signing_key, CANON_RAW, &creq, &sts, alt);
	if (!rc && sig_equal(alt, a->signature))
		memcpy(sig, alt, 65);
	free(creq.p);
	free(sts.p);
	return rc;
}

/* Keep the canonical request minus its payload hash for ol_sigv4_verify_body(). */
static int
defer(const struct ol_sigv4_request *req, const struct auth *a, struct ol_sigv4_result *out)
{
	struct sbuf creq = {0};
	int rc = sv4_canonical_request(req, a->signed_list, "", 0, &creq);
	sv4_sb_addc(&creq, 0); /* the raw form follows the standard one, after its NUL */
	if (!rc)
		rc = sv4_canonical_request(req, a->signed_list, "", CANON_RAW, &creq);
	if (!rc && creq.oom)
		rc = -ENOMEM;
	if (rc) {
		free(creq.p);
		OPENSSL_cleanse(out->signing_key, sizeof(out->signing_key));
		return fail(out, rc == -E2BIG ? OL_SIGV4_ERR_MALFORMED : OL_SIGV4_ERR_NOMEM,
			    "cannot build the canonical request%s", NULL);
	}
	out->pending_canonical = creq.p;
	/* a signature of any other length can never match: keep "" then */
	out->pending_signature[0] = 0;
	if (strlen(a->signature) == 64)
		memcpy(out->pending_signature, a->signature, 65);
	out->body_hash_pending = 1;
	out->payload = OL_SIGV4_PAYLOAD_SHA256;
	return OL_SIGV4_ERR_NEED_BODY_HASH;
}

static int
pending_sig(const struct ol_sigv4_result *r, const char *prefix, const uint8_t sha[32],
	    struct sbuf *creq, struct sbuf *sts, char sig[65])
{
	char hx[65];
	uint8_t mac[32];
	ol_hex_encode(sha, 32, hx);
	sv4_sb_adds(creq, prefix);
	sv4_sb_adds(creq, hx);
	if (!creq->oom)
		sv4_string_to_sign(r->amz_date, r->scope, creq, sts);
	if (creq->oom || sts->oom)
		return OL_SIGV4_ERR_NOMEM;
	int rc = sv4_hmac(r->signing_key, 32, sts->p, sts->len, mac);
	if (!rc)
		ol_hex_encode(mac, 32, sig);
	return rc;
}

int
ol_sigv4_verify_body(struct ol_sigv4_result *r, const uint8_t body_sha256[32])
{
	if (!r->body_hash_pending || !r->pending_canonical)
		return -EINVAL;
	struct sbuf creq = {0}, sts = {0};
	char sig[65];
	int rc = pending_sig(r, r->pending_canonical, body_sha256, &creq, &sts, sig);
	if (!rc && !sig_equal(sig, r->pending_signature)) {
		struct sbuf c2 = {0}, s2 = {0};
		const char *raw = r->pending_canonical + strlen(r->pending_canonical) + 1;
		rc = pending_sig(r, raw, body_sha256, &c2, &s2, sig);
		free(c2.p);
		free(s2.p);
	}
	free(r->pending_canonical);
	r->pending_canonical = NULL;
	r->body_hash_pending = 0;
	if (!rc) {
		if (!sig_equal(sig, r->pending_signature)) {
			rc =
			    fail(r, OL_SIGV4_ERR_SIGNATURE_MISMATCH,
				 "The request signature we calculated does not match the signature "
				 "you provided. Check your key and signing method.%s",
				 NULL);
			r->canonical_request = creq.p;
			r->string_to_sign = sts.p;
			creq.p = sts.p = NULL;
		} else {
			memcpy(r->seed_signature, sig, 65);
			memcpy(r->payload_sha256, body_sha256, 32);
			r->has_payload_sha256 = 1;
		}
	}
	free(creq.p);
	free(sts.p);
	return rc;
}

static int
finish_verify(const struct ol_sigv4_request *req, const struct auth *a, const char *secret,
	      int presigned, struct ol_sigv4_result *out)
{
	struct sbuf creq = {0}, sts = {0};
	char sig[65];
	int rc = sv4_cached_signing_key(secret, a->date8, a->region, out->signing_key);
	if (!rc && a->pending)
		return defer(req, a, out);
	if (!rc)
		rc = compute(req, a, out->scope, out->signing_key, presigned, &creq, &sts, sig);
	if (rc) {
		fail(out, rc, "cannot compute the signature%s", NULL);
		goto done;
	}
	if (!sig_equal(sig, a->signature) && !presigned)
		rc = raw_retry(req, a, out, sig);
	if (rc) {
		fail(out, rc, "cannot compute the signature%s", NULL);
		goto done;
	}
	if (!sig_equal(sig, a->signature)) {
		rc = fail(out, OL_SIGV4_ERR_SIGNATURE_MISMATCH,
			  "The request signature we calculated does not match the signature you "
			  "provided. Check your key and signing method.%s",
			  NULL);
		out->canonical_request = creq.p;
		out->string_to_sign = sts.p;
		creq.p = sts.p = NULL;
		goto done;
	}
	memcpy(out->seed_signature, sig, 65);
done:
	free(creq.p);
	free(sts.p);
	if (rc)
		OPENSSL_cleanse(out->signing_key, sizeof(out->signing_key));
	return rc;
}

int
ol_sigv4_verify(const struct ol_sigv4_request *req, const char *region, time_t now,
		ol_sigv4_secret_fn secret_for, void *arg, struct ol_sigv4_result *out)
{
	struct auth a;
	memset(out, 0, sizeof(*out));
	if (ol_sigv4_is_anonymous(req)) { /* a policy may allow it: the caller decides, often */
		static const char m[] = "Access Denied";
		memcpy(out->message, m, sizeof(m));
		return OL_SIGV4_ERR_MISSING;
	}
	memset(&a, 0, sizeof(a));
	char tmp[8];
	size_t from = 0;
	int has_hdr = sv4_find_header(req, "authorization", 13, &from) != NULL;
	int presigned = qget(req, "X-Amz-Algorithm", tmp, sizeof(tmp)) != -ENOENT ||
			qget(req, "X-Amz-Credential", tmp, sizeof(tmp)) != -ENOENT ||
			qget(req, "X-Amz-Signature", tmp, sizeof(tmp)) != -ENOENT;
	if (has_hdr && presigned)
		return fail(out, OL_SIGV4_ERR_MALFORMED, "Only one auth mechanism allowed%s", NULL);
	out->presigned = presigned;
	int rc = parse_any(req, presigned, &a, out);
	if (!rc)
		rc = check_scope(&a, region, presigned, out);
	if (rc)
		return rc;
	snprintf(out->access_key, sizeof(out->access_key), "%s", a.access_key);
	snprintf(out->amz_date, sizeof(out->amz_date), "%s", a.amz_date);
	snprintf(out->scope, sizeof(out->scope), "%s/%s/s3/aws4_request", a.date8, a.region);
	const char *secret = secret_for(a.access_key, arg);
	if (!secret)
		return fail(out, OL_SIGV4_ERR_INVALID_ACCESS_KEY,
			    "The AWS Access Key Id you provided does not exist in our records.%s",
			    NULL);
	rc = check_time(&a, presigned, now, out);
	if (rc)
		return rc;
	if (!a.pending && payload_mode(a.payload_hash, out))
		return fail(out, OL_SIGV4_ERR_BAD_CONTENT_SHA256,
			    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
			    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, or a valid sha256 value.%s",
			    NULL);
	rc = check_unsigned(req, a.signed_list, presigned, out);
	if (rc)
		return rc;
	return finish_verify(req, &a, secret, presigned, out);
}

void
ol_sigv4_result_fini(struct ol_sigv4_result *r)
{
	free(r->string_to_sign);
	free(r->canonical_request);
	free(r->pending_canonical);
	r->string_to_sign = r->canonical_request = r->pending_canonical = NULL;
	r->body_hash_pending = 0;
	OPENSSL_cleanse(r->signing_key, sizeof(r->signing_key));
}

int
ol_sigv4_is_anonymous(const struct ol_sigv4_request *req)
{
	size_t from = 0, ql;
	if (sv4_find_header(req, "authorization", 13, &from))
		return 0;
	const char *q = query_of(req, &ql);
	size_t pos = 0;
	struct qparam p;
	while (sv4_next_param(q, ql, &pos, &p))
		if (sv4_param_is(&p, "X-Amz-Algorithm") || sv4_param_is(&p, "X-Amz-Credential") ||
		    sv4_param_is(&p, "X-Amz-Signature"))
			return 0;
	return 1;
}

const char *
ol_sigv4_s3_code(int err, int presigned)
{
	switch (err) {
	case OL_SIGV4_ERR_SIGNATURE_MISMATCH:
		return "SignatureDoesNotMatch";
	case OL_SIGV4_ERR_INVALID_ACCESS_KEY:
		return "InvalidAccessKeyId";
	case OL_SIGV4_ERR_SKEWED:
		return "RequestTimeTooSkewed";
	case OL_SIGV4_ERR_EXPIRED:
	case OL_SIGV4_ERR_MISSING:
	case OL_SIGV4_ERR_UNSIGNED_HEADERS:
		return "AccessDenied";
	case OL_SIGV4_ERR_MALFORMED:
	case OL_SIGV4_ERR_WRONG_REGION:
		return presigned ? "AuthorizationQueryParametersError"
				 : "AuthorizationHeaderMalformed";
	case OL_SIGV4_ERR_UNSUPPORTED_ALG:
		return presigned ? "AuthorizationQueryParametersError" : "InvalidArgument";
	case OL_SIGV4_ERR_BAD_CONTENT_SHA256:
		return "InvalidArgument";
	case OL_SIGV4_ERR_NO_CONTENT_SHA256:
	case OL_SIGV4_ERR_NEED_BODY_HASH:
		return "InvalidRequest";
	default:
		return "InternalError";
	}
}

int
ol_sigv4_http_status(int err)
{
	switch (err) {
	case OL_SIGV4_ERR_SIGNATURE_MISMATCH:
	case OL_SIGV4_ERR_INVALID_ACCESS_KEY:
	case OL_SIGV4_ERR_SKEWED:
	case OL_SIGV4_ERR_EXPIRED:
	case OL_SIGV4_ERR_MISSING:
	case OL_SIGV4_ERR_UNSIGNED_HEADERS:
		return 403;
	case OL_SIGV4_ERR_MALFORMED:
	case OL_SIGV4_ERR_WRONG_REGION:
	case OL_SIGV4_ERR_UNSUPPORTED_ALG:
	case OL_SIGV4_ERR_BAD_CONTENT_SHA256:
	case OL_SIGV4_ERR_NO_CONTENT_SHA256:
	case OL_SIGV4_ERR_NEED_BODY_HASH:
		return 400;
	default:
		return 500;
	}
}

/* ---- signing ---- */

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted unique lowercase names of req's headers, ';'-joined, into out. */
static int
signed_list_of(const struct ol_sigv4_request *req, char *out, size_t cap)
{
	char names[MAX_SIGNED][64], *ptr[MAX_SIGNED];
	size_t n = 0;
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct ol_sigv4_header *h = &req->headers[i];
		if (h->name_len == 0 || h->name_len >= 64)
			return OL_SIGV4_ERR_MALFORMED;
		char lc[64];
		for (size_t j = 0; j < h->name_len; j++)
			lc[j] = (char)tolower((unsigned char)h->name[j]);
		lc[h->name_len] = 0;
		size_t k = 0;
		while (k < n && strcmp(names[k], lc) != 0)
			k++;
		if (k < n)
			continue;
		if (n == MAX_SIGNED)
			return OL_SIGV4_ERR_MALFORMED;
		memcpy(names[n], lc, h->name_len + 1);
		ptr[n] = names[n];
		n++;
	}
	qsort(ptr, n, sizeof(ptr[0]), name_cmp);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int k = snprintf(out + o, cap - o, "%s%s", i ? ";" : "", ptr[i]);
		if (k < 0 || (size_t)k >= cap - o)
			return -ENOSPC;
		o += (size_t)k;
	}
	return 0;
}

int
ol_sigv4_sign(const struct ol_sigv4_request *req, const char *access_key, const char *secret,
	      const char *region, const char *amz_date, const char *payload_hash, char *out,
	      size_t cap)
{
	struct auth a;
	memset(&a, 0, sizeof(a));
	if (strlen(amz_date) != 16 || strlen(payload_hash) >= sizeof(a.payload_hash))
		return OL_SIGV4_ERR_MALFORMED;
	memcpy(a.amz_date, amz_date, 17);
	memcpy(a.date8, amz_date, 8);
	snprintf(a.payload_hash, sizeof(a.payload_hash), "%s", payload_hash);
	int rc = signed_list_of(req, a.signed_list, sizeof(a.signed_list));
	if (rc)
		return rc;
	char scope[128];
	uint8_t key[32];
	snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", a.date8, region);
	rc = ol_sigv4_signing_key(secret, a.date8, region, "s3", key);
	struct sbuf creq = {0}, sts = {0};
	char sig[65];
	if (!rc)
		rc = compute(req, &a, scope, key, 0, &creq, &sts, sig);
	free(creq.p);
	free(sts.p);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	int k = snprintf(out, cap, ALG " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
			 access_key, scope, a.signed_list, sig);
	return (k < 0 || (size_t)k >= cap) ? -ENOSPC : 0;
}
