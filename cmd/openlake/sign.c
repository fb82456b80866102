/* cmd/openlake/sign.c - the CLI's SigV4 signer (see sign.h). */
#include "sign.h"

#include <errno.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include "base/hex.h"

static void
hmac256(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int len = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

static void
signing_key(struct ol_cli_signer *s, const char *date)
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

int
ol_cli_uri_encode(const char *in, char *out, size_t cap)
{
	static const char hx[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (o + 4 >= cap)
			return -ENAMETOOLONG;
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hx[*p >> 4];
			out[o++] = hx[*p & 15];
		}
	}
	out[o] = 0;
	return 0;
}

size_t
ol_cli_sign(struct ol_cli_signer *s, const char *method, const char *path, const char *query,
	    const char *host, const char *payload_hash, time_t now, char *out, size_t cap)
{
	char amz[17], date[9], creq[4096], sts[512], hh[65], sig[65];
	unsigned char h[32], mac[32];
	struct tm tm;
	int n;

	gmtime_r(&now, &tm);
	strftime(amz, sizeof(amz), "%Y%m%dT%H%M%SZ", &tm);
	memcpy(date, amz, 8);
	date[8] = 0;
	n = snprintf(creq, sizeof(creq),
		     "%s\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n\n"
		     "host;x-amz-content-sha256;x-amz-date\n%s",
		     method, path, query, host, payload_hash, amz, payload_hash);
	if (n < 0 || (size_t)n >= sizeof(creq))
		return 0;
	SHA256((const unsigned char *)creq, (size_t)n, h);
	ol_hex_encode(h, 32, hh);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", amz, date,
		 s->region, hh);
	signing_key(s, date);
	hmac256(s->key, 32, sts, mac);
	ol_hex_encode(mac, 32, sig);
	n = snprintf(
	    out, cap,
	    "x-amz-date: %s\r\nx-amz-content-sha256: %s\r\nAuthorization: AWS4-HMAC-SHA256 "
	    "Credential=%s/%s/%s/s3/aws4_request, "
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=%s\r\n",
	    amz, payload_hash, s->access_key, date, s->region, sig);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
