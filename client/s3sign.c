/* client/s3sign.c - SigV4 request signing (header form, service "s3") and S3 URI encoding:
 * the one signer of libopenlake's S3 client and of the openlake CLI. */
#include <errno.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openlake/openlake_s3.h"

#define OL_API __attribute__((visibility("default")))
#define MAX_XH 8

static void
hex(const unsigned char *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = 0;
}

static void
hmac256(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int len = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

static void
signing_key(struct ol_s3_signer *s, const char *date)
{
	char k0[300];
	unsigned char k1[32], k2[32], k3[32];
	if (strcmp(s->key_date, date) == 0)
		return;
	snprintf(k0, sizeof(k0), "AWS4%s", s->secret_key);
	hmac256(k0, strlen(k0), date, k1);
	hmac256(k1, 32, s->region, k2);
	hmac256(k2, 32, "s3", k3);
	hmac256(k3, 32, "aws4_request", s->key);
	memcpy(s->key_date, date, 9);
}

OL_API int
ol_s3_uri_encode(const char *in, int keep_slash, char *out, size_t cap)
{
	static const char hx[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (o + 4 >= cap)
			return -ENAMETOOLONG;
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (*p == '/' && keep_slash)) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hx[*p >> 4];
			out[o++] = hx[*p & 15];
		}
	}
	if (o >= cap)
		return -ENAMETOOLONG;
	out[o] = 0;
	return 0;
}

struct hdr {
	const char *name; /* "name:value" */
	size_t nlen;
};

static int
hdr_cmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
	int c = memcmp(x->name, y->name, n);
	return c ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

/* "name:value\n" lines of every signed header (sorted) and the ';'-joined names */
static int
canonical_headers(const char *const *xh, size_t n_xh, const char *host, const char *amz,
		  const char *phash, const char *token, char *lines, size_t lcap, char *names,
		  size_t ncap)
{
	char hv[300], cv[100], dv[40], tv[2100];
	struct hdr h[MAX_XH + 4];
	size_t n = 0, lo = 0, no = 0;
	const char *fixed[4] = {hv, cv, dv, token ? tv : NULL};
	if (n_xh > MAX_XH)
		return -E2BIG;
	snprintf(hv, sizeof(hv), "host:%s", host);
	snprintf(cv, sizeof(cv), "x-amz-content-sha256:%s", phash);
	snprintf(dv, sizeof(dv), "x-amz-date:%s", amz);
	if (token && snprintf(tv, sizeof(tv), "x-amz-security-token:%s", token) >= (int)sizeof(tv))
		return -E2BIG;
	for (size_t i = 0; i < 4 + n_xh; i++) {
		const char *e = i < 4 ? fixed[i] : xh[i - 4];
		const char *c = e ? strchr(e, ':') : NULL;
		if (!e)
			continue;
		if (!c)
			return -EINVAL;
		h[n].name = e;
		h[n++].nlen = (size_t)(c - e);
	}
	qsort(h, n, sizeof(h[0]), hdr_cmp);
	for (size_t i = 0; i < n; i++) {
		int a = snprintf(lines + lo, lcap - lo, "%s\n", h[i].name);
		int b = snprintf(names + no, ncap - no, "%s%.*s", i ? ";" : "", (int)h[i].nlen,
				 h[i].name);
		if (a < 0 || b < 0 || (size_t)a >= lcap - lo || (size_t)b >= ncap - no)
			return -E2BIG;
		lo += (size_t)a;
		no += (size_t)b;
	}
	return 0;
}

OL_API size_t
ol_s3_sign(struct ol_s3_signer *s, const char *method, const char *path, const char *query,
	   const char *host, const char *payload_hash, const char *const *xh, size_t n_xh,
	   time_t now, char *out, size_t cap)
{
	char amz[17], date[9], lines[4096], names[512], creq[8192], sts[512], hh[65], sig[65];
	unsigned char h[32], mac[32];
	struct tm tm;
	int n;

	gmtime_r(&now, &tm);
	strftime(amz, sizeof(amz), "%Y%m%dT%H%M%SZ", &tm);
	memcpy(date, amz, 8);
	date[8] = 0;
	if (canonical_headers(xh, n_xh, host, amz, payload_hash, s->session_token, lines,
			      sizeof(lines), names, sizeof(names)))
		return 0;
	n = snprintf(creq, sizeof(creq), "%s\n%s\n%s\n%s\n%s\n%s", method, path, query, lines,
		     names, payload_hash);
	if (n < 0 || (size_t)n >= sizeof(creq))
		return 0;
	SHA256((const unsigned char *)creq, (size_t)n, h);
	hex(h, 32, hh);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", amz, date,
		 s->region, hh);
	signing_key(s, date);
	hmac256(s->key, 32, sts, mac);
	hex(mac, 32, sig);
	n = snprintf(out, cap,
		     "x-amz-date: %s\r\nx-amz-content-sha256: %s\r\n%s%s%s"
		     "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, "
		     "SignedHeaders=%s, Signature=%s\r\n",
		     amz, payload_hash, s->session_token ? "x-amz-security-token: " : "",
		     s->session_token ? s->session_token : "", s->session_token ? "\r\n" : "",
		     s->access_key, date, s->region, names, sig);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
