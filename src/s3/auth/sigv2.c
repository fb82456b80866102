/* s3/auth/sigv2.c - AWS Signature Version 2 verification (sigv4.h, "Signature Version 2").
 *
 * Older SDKs and tools still sign this way, and boto3 presigns with it by default for a
 * custom endpoint: StringToSign = Verb \n Content-MD5 \n Content-Type \n Date \n
 * CanonicalizedAmzHeaders CanonicalizedResource, signed with HMAC-SHA1 of the secret, base64.
 * Date is the Date header (empty when x-amz-date is sent: that header is in the amz headers
 * then) or, presigned, the Expires parameter. The body is never signed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "s3/auth/sigv4int.h"

#define V2_MAX_AMZ 64 /* x-amz-* headers a V2 request may carry */

/* Sub-resources that are part of the canonical resource: exactly what botocore's HmacV1Auth
 * keeps (the signer most V2 clients follow), in byte order for the binary search below. */
static const char *const subres[] = {
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};

static int
is_subres(const char *name, size_t n)
{
	size_t lo = 0, hi = sizeof(subres) / sizeof(subres[0]);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strncmp(subres[mid], name, n);
		if (!c && subres[mid][n])
			c = 1;
		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* value trimmed of spaces and tabs at both ends */
static void
trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

int
ol_sigv2_present(const struct ol_sigv4_request *req)
{
	size_t from = 0;
	const struct ol_sigv4_header *h = sv4_find_header(req, "authorization", 13, &from);
	if (h) {
		const char *v = h->value;
		size_t n = h->value_len;
		trim(&v, &n);
		return n > 4 && strncmp(v, "AWS ", 4) == 0;
	}
	char t[256];
	return req->query &&
	       sv4_query_get(req->query, req->query_len, "AWSAccessKeyId", t, sizeof(t)) !=
		   -ENOENT &&
	       sv4_query_get(req->query, req->query_len, "Signature", t, sizeof(t)) != -ENOENT;
}

struct amz {
	char name[64];
	const char *val;
	size_t vlen;
};

static int
amz_cmp(const void *a, const void *b)
{
	return strcmp(((const struct amz *)a)->name, ((const struct amz *)b)->name);
}

/* "name:v1,v2\n" for every x-amz-* header, names lowercased and sorted */
static int
amz_headers(const struct ol_sigv4_request *req, struct sbuf *out)
{
	struct amz a[V2_MAX_AMZ];
	size_t n = 0;
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct ol_sigv4_header *h = &req->headers[i];
		if (h->name_len < 6 || strncasecmp(h->name, "x-amz-", 6))
			continue;
		if (n == V2_MAX_AMZ || h->name_len >= sizeof(a[0].name))
			return OL_SIGV4_ERR_MALFORMED;
		for (size_t j = 0; j < h->name_len; j++)
			a[n].name[j] =
			    (char)(h->name[j] >= 'A' && h->name[j] <= 'Z' ? h->name[j] + 32
									  : h->name[j]);
		a[n].name[h->name_len] = 0;
		a[n].val = h->value;
		a[n].vlen = h->value_len;
		trim(&a[n].val, &a[n].vlen);
		n++;
	}
	/* a stable order for equal names keeps their values in request order */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && amz_cmp(&a[j - 1], &a[j]) > 0; j--) {
			struct amz t = a[j];
			a[j] = a[j - 1];
			a[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		if (i && !strcmp(a[i].name, a[i - 1].name)) {
			out->len--; /* the previous "\n" */
			sv4_sb_addc(out, ',');
		} else {
			sv4_sb_adds(out, a[i].name);
			sv4_sb_addc(out, ':');
		}
		sv4_sb_add(out, a[i].val, a[i].vlen);
		sv4_sb_addc(out, '\n');
	}
	return 0;
}

static int
qp_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
	int c = memcmp(x->name, y->name, n);
	return c ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

/* the raw path, then "?" and the sub-resources sorted, values decoded */
static int
resource(const struct ol_sigv4_request *req, struct sbuf *out)
{
	struct qparam ps[64];
	size_t n = 0, pos = 0;
	struct qparam p;
	sv4_sb_add(out, req->path, req->path_len);
	/* a bucket's resource is "/bucket/" even when the request line says "/bucket" */
	if (req->path_len > 1 && !memchr(req->path + 1, '/', req->path_len - 1))
		sv4_sb_addc(out, '/');
	while (req->query && sv4_next_param(req->query, req->query_len, &pos, &p)) {
		const char *eq = memchr(p.name, '=', p.nlen);
		size_t nl = eq ? (size_t)(eq - p.name) : p.nlen;
		if (!is_subres(p.name, nl))
			continue;
		if (n == sizeof(ps) / sizeof(ps[0]))
			return OL_SIGV4_ERR_MALFORMED;
		ps[n++] = (struct qparam){p.name, p.val, nl, p.vlen};
	}
	qsort(ps, n, sizeof(ps[0]), qp_cmp);
	for (size_t i = 0; i < n; i++) {
		char name[64], val[MAX_FIELD];
		memcpy(name, ps[i].name, ps[i].nlen);
		name[ps[i].nlen] = 0;
		long vl = sv4_query_get(req->query, req->query_len, name, val, sizeof(val));
		if (vl < 0 && vl != -ENOENT)
			return OL_SIGV4_ERR_MALFORMED;
		sv4_sb_addc(out, i ? '&' : '?');
		sv4_sb_adds(out, name);
		/* "?uploads" has no value; "?versionId=" an empty one: both as sent */
		if (ps[i].val == ps[i].name + ps[i].nlen + 1) {
			sv4_sb_addc(out, '=');
			sv4_sb_add(out, val, vl > 0 ? (size_t)vl : 0);
		}
	}
	return 0;
}

static void
add_header(const struct ol_sigv4_request *req, const char *name, struct sbuf *out)
{
	char v[MAX_FIELD];
	long n = sv4_header_get(req, name, v, sizeof(v));
	if (n > 0)
		sv4_sb_add(out, v, (size_t)n);
	sv4_sb_addc(out, '\n');
}

/* RFC 1123 ("Tue, 27 Mar 2007 19:36:42 GMT" or "+0000"), also as x-amz-date; -1 when not */
static time_t
http_date(const char *s)
{
	struct tm tm = {0};
	const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S", &tm);
	if (!end)
		return -1;
	while (*end == ' ')
		end++;
	if (*end && strcmp(end, "GMT") && strcmp(end, "+0000") && strcmp(end, "UTC") &&
	    strcmp(end, "Z"))
		return -1;
	return timegm(&tm);
}

/* The form's fields: access key and base64 signature. Returns 0 or _MALFORMED. */
static int
credentials(const struct ol_sigv4_request *req, int presigned, struct ol_sigv4_result *out,
	    char *sig, size_t cap)
{
	char v[MAX_FIELD];
	long n;
	if (presigned) {
		n = sv4_query_get(req->query, req->query_len, "AWSAccessKeyId", out->access_key,
				  sizeof(out->access_key));
		long s = sv4_query_get(req->query, req->query_len, "Signature", sig, cap);
		return n > 0 && s > 0 ? 0 : OL_SIGV4_ERR_MALFORMED;
	}
	n = sv4_header_get(req, "authorization", v, sizeof(v));
	const char *colon = n > 4 ? memchr(v + 4, ':', (size_t)n - 4) : NULL;
	if (!colon)
		return OL_SIGV4_ERR_MALFORMED;
	size_t kl = (size_t)(colon - v - 4), sl = (size_t)(v + n - colon - 1);
	if (!kl || kl >= sizeof(out->access_key) || !sl || sl >= cap)
		return OL_SIGV4_ERR_MALFORMED;
	memcpy(out->access_key, v + 4, kl);
	out->access_key[kl] = 0;
	memcpy(sig, colon + 1, sl);
	sig[sl] = 0;
	return 0;
}

/* The Date line of the string to sign, and the time checks of each form. */
static int
date_line(const struct ol_sigv4_request *req, int presigned, time_t now, struct sbuf *sts,
	  struct ol_sigv4_result *out)
{
	char v[128];
	if (presigned) {
		char *end;
		long n = sv4_query_get(req->query, req->query_len, "Expires", v, sizeof(v));
		unsigned long long exp = n > 0 ? strtoull(v, &end, 10) : 0;
		if (n <= 0 || *end) {
			snprintf(out->message, sizeof(out->message),
				 "Expires must be a number of seconds since the epoch");
			return OL_SIGV4_ERR_MALFORMED;
		}
		if ((time_t)exp < now) {
			snprintf(out->message, sizeof(out->message), "Request has expired");
			return OL_SIGV4_ERR_EXPIRED;
		}
		sv4_sb_adds(sts, v);
		sv4_sb_addc(sts, '\n');
		return 0;
	}
	int amz = sv4_header_get(req, "x-amz-date", v, sizeof(v)) > 0;
	if (!amz && sv4_header_get(req, "date", v, sizeof(v)) <= 0) {
		snprintf(out->message, sizeof(out->message),
			 "AWS authentication requires a valid Date or x-amz-date header");
		return OL_SIGV4_ERR_MISSING;
	}
	time_t t = http_date(v);
	if (t < 0 || t > now + OL_SIGV4_MAX_SKEW || t < now - OL_SIGV4_MAX_SKEW) {
		snprintf(out->message, sizeof(out->message),
			 "The difference between the request time and the current time is too "
			 "large.");
		return OL_SIGV4_ERR_SKEWED;
	}
	if (!amz)
		sv4_sb_adds(sts, v);
	sv4_sb_addc(sts, '\n');
	return 0;
}

int
ol_sigv2_string_to_sign(const struct ol_sigv4_request *req, const char *date, char **out)
{
	struct sbuf s = {0};
	sv4_sb_adds(&s, req->method);
	sv4_sb_addc(&s, '\n');
	add_header(req, "content-md5", &s);
	add_header(req, "content-type", &s);
	sv4_sb_adds(&s, date);
	sv4_sb_addc(&s, '\n');
	int rc = amz_headers(req, &s);
	if (!rc)
		rc = resource(req, &s);
	if (!rc && s.oom)
		rc = OL_SIGV4_ERR_NOMEM;
	if (rc) {
		free(s.p);
		return rc;
	}
	*out = s.p ? s.p : strdup("");
	return *out ? 0 : OL_SIGV4_ERR_NOMEM;
}

int
ol_sigv2_sign(const char *secret, const char *string_to_sign, char *out, size_t cap)
{
	uint8_t mac[20];
	unsigned ml = 0;
	if (cap < 29)
		return -ENOSPC;
	if (!HMAC(EVP_sha1(), secret, (int)strlen(secret), (const uint8_t *)string_to_sign,
		  strlen(string_to_sign), mac, &ml) ||
	    ml != sizeof(mac))
		return OL_SIGV4_ERR_NOMEM;
	EVP_EncodeBlock((unsigned char *)out, mac, sizeof(mac));
	return 0;
}

int
ol_sigv2_verify(const struct ol_sigv4_request *req, time_t now, ol_sigv4_secret_fn secret_for,
		void *arg, struct ol_sigv4_result *out)
{
	char sig[64], want[32];
	struct sbuf sts = {0};
	memset(out, 0, sizeof(*out));
	out->payload = OL_SIGV4_PAYLOAD_UNSIGNED;
	size_t from = 0;
	int presigned = !sv4_find_header(req, "authorization", 13, &from);
	out->presigned = presigned;
	int rc = credentials(req, presigned, out, sig, sizeof(sig));
	if (rc) {
		snprintf(out->message, sizeof(out->message),
			 "The Signature Version 2 %s is malformed",
			 presigned ? "query (AWSAccessKeyId, Signature, Expires)"
				   : "Authorization header (AWS AccessKeyId:Signature)");
		return rc;
	}
	const char *secret = secret_for(out->access_key, arg);
	if (!secret) {
		snprintf(out->message, sizeof(out->message),
			 "The AWS Access Key Id you provided does not exist in our records.");
		return OL_SIGV4_ERR_INVALID_ACCESS_KEY;
	}
	rc = date_line(req, presigned, now, &sts, out);
	if (!rc && sts.oom)
		rc = OL_SIGV4_ERR_NOMEM;
	if (rc)
		goto out;
	/* the string to sign with the date line just built */
	char *s = NULL;
	sts.p[sts.len - 1] = 0;
	rc = ol_sigv2_string_to_sign(req, sts.p, &s);
	if (rc)
		goto out;
	rc = ol_sigv2_sign(secret, s, want, sizeof(want));
	if (!rc && (strlen(sig) != strlen(want) || CRYPTO_memcmp(sig, want, strlen(want)))) {
		rc = OL_SIGV4_ERR_SIGNATURE_MISMATCH;
		out->string_to_sign = s;
		s = NULL;
	}
	free(s);
out:
	free(sts.p);
	if (rc == OL_SIGV4_ERR_MALFORMED && !out->message[0])
		snprintf(out->message, sizeof(out->message),
			 "Too many or too long x-amz-* headers or sub-resources to sign");
	else if (rc == OL_SIGV4_ERR_NOMEM && !out->message[0])
		snprintf(out->message, sizeof(out->message), "Out of memory");
	return rc;
}
