/* tests/unit/test_sigv4.c - SigV4 verify/sign against botocore vectors, aws-chunked decoding
 * (AWS documented example + generated bodies), hostile inputs. TAP.
 * Usage: test_sigv4 PATH/TO/vectors.txt */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/auth/awschunked.h"
#include "s3/auth/checksum.h"
#include "s3/auth/sigv4.h"
#include "s3/auth/sigv4int.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

static int n_test, n_fail;

static void
ok(int cond, const char *fmt, const char *arg)
{
	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - ", cond ? "" : "not ", n_test);
	printf(fmt, arg);
	printf("\n");
}

/* ---- credentials ---- */

static char g_access[64], g_secret[128], g_region[64];

static const char *
secret_for(const char *ak, void *arg)
{
	if (arg) /* a test's override: every key maps to this secret */
		return arg;
	if (strcmp(ak, g_access) == 0)
		return g_secret;
	if (strcmp(ak, "AKIAIOSFODNN7EXAMPLE") == 0)
		return "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
	return NULL;
}

/* ---- one vector ---- */

#define MAXH 32

struct vec {
	char name[128], method[16], path[512], query[1024], expect[64], payload[32];
	char seed[80], sha256[80], bodyexpect[64], unsigned_names[256];
	uint8_t *rawbody;
	size_t rawbody_len;
	long long now;
	char *hline[MAXH];
	struct ol_sigv4_header h[MAXH];
	size_t nh;
	uint8_t *body, *decoded;
	size_t body_len, decoded_len;
	char trailer[4][300];
	int ntrailer;
};

static const struct {
	const char *name;
	int err;
} errs[] = {
    {"ok", 0},
    {"SIGNATURE_MISMATCH", OL_SIGV4_ERR_SIGNATURE_MISMATCH},
    {"INVALID_ACCESS_KEY", OL_SIGV4_ERR_INVALID_ACCESS_KEY},
    {"SKEWED", OL_SIGV4_ERR_SKEWED},
    {"EXPIRED", OL_SIGV4_ERR_EXPIRED},
    {"MALFORMED", OL_SIGV4_ERR_MALFORMED},
    {"MISSING", OL_SIGV4_ERR_MISSING},
    {"UNSUPPORTED_ALG", OL_SIGV4_ERR_UNSUPPORTED_ALG},
    {"BAD_CONTENT_SHA256", OL_SIGV4_ERR_BAD_CONTENT_SHA256},
    {"NO_CONTENT_SHA256", OL_SIGV4_ERR_NO_CONTENT_SHA256},
    {"WRONG_REGION", OL_SIGV4_ERR_WRONG_REGION},
    {"NEED_BODY_HASH", OL_SIGV4_ERR_NEED_BODY_HASH},
    {"UNSIGNED_HEADERS", OL_SIGV4_ERR_UNSIGNED_HEADERS},
};

static int
err_of(const char *name)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (strcmp(errs[i].name, name) == 0)
			return errs[i].err;
	return 1; /* never returned by verify */
}

static uint8_t *
unhex(const char *s, size_t *n)
{
	size_t len = strlen(s) / 2;
	uint8_t *out = malloc(len ? len : 1);
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	*n = len;
	return out;
}

static void
vec_free(struct vec *v)
{
	for (size_t i = 0; i < v->nh; i++)
		free(v->hline[i]);
	free(v->body);
	free(v->decoded);
	free(v->rawbody);
	memset(v, 0, sizeof(*v));
}

static void
set(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

static void
vec_line(struct vec *v, const char *k, const char *val)
{
	if (!strcmp(k, "test"))
		set(v->name, sizeof(v->name), val);
	else if (!strcmp(k, "now"))
		v->now = strtoll(val, NULL, 10);
	else if (!strcmp(k, "method"))
		set(v->method, sizeof(v->method), val);
	else if (!strcmp(k, "path"))
		set(v->path, sizeof(v->path), val);
	else if (!strcmp(k, "query"))
		set(v->query, sizeof(v->query), val);
	else if (!strcmp(k, "expect"))
		set(v->expect, sizeof(v->expect), val);
	else if (!strcmp(k, "payload"))
		set(v->payload, sizeof(v->payload), val);
	else if (!strcmp(k, "seed"))
		set(v->seed, sizeof(v->seed), val);
	else if (!strcmp(k, "sha256"))
		set(v->sha256, sizeof(v->sha256), val);
	else if (!strcmp(k, "body"))
		v->body = unhex(val, &v->body_len);
	else if (!strcmp(k, "rawbody"))
		v->rawbody = unhex(val, &v->rawbody_len);
	else if (!strcmp(k, "unsigned"))
		set(v->unsigned_names, sizeof(v->unsigned_names), val);
	else if (!strcmp(k, "bodyexpect"))
		set(v->bodyexpect, sizeof(v->bodyexpect), val);
	else if (!strcmp(k, "decoded"))
		v->decoded = unhex(val, &v->decoded_len);
	else if (!strcmp(k, "trailer") && v->ntrailer < 4)
		set(v->trailer[v->ntrailer++], sizeof(v->trailer[0]), val);
	else if (!strcmp(k, "header") && v->nh < MAXH) {
		char *line = strdup(val);
		char *colon = strchr(line, ':');
		v->hline[v->nh] = line;
		v->h[v->nh] = (struct ol_sigv4_header){line, (size_t)(colon - line), colon + 1,
						       strlen(colon + 1)};
		v->nh++;
	}
}

static struct ol_sigv4_request
req_of(const struct vec *v)
{
	return (struct ol_sigv4_request){
	    v->method, v->path, strlen(v->path), v->query, strlen(v->query), v->h, v->nh};
}

/* ---- aws-chunked decoding with a given split pattern ---- */

/* step 0: all at once; 1: byte by byte; k: pseudo-random pieces up to k bytes */
static int
decode(struct ol_awschunked *d, const uint8_t *in, size_t len, size_t step, uint8_t *out,
       size_t cap, size_t *out_len)
{
	size_t pos = 0, o = 0;
	unsigned seed = 7;
	int rc = OL_AWSCHUNKED_MORE;
	while (pos < len && rc == OL_AWSCHUNKED_MORE) {
		size_t n = len - pos;
		if (step == 1)
			n = 1;
		else if (step > 1) {
			seed = seed * 1103515245 + 12345;
			size_t r = 1 + (seed >> 8) % step;
			n = r < n ? r : n;
		}
		size_t off = 0;
		while (off < n && rc == OL_AWSCHUNKED_MORE) {
			size_t used, dl;
			const uint8_t *data;
			rc = ol_awschunked_feed(d, in + pos + off, n - off, &used, &data, &dl);
			if (rc < 0)
				return rc;
			if (used == 0 && rc == OL_AWSCHUNKED_MORE)
				return -999; /* no progress: contract broken */
			if (dl) {
				if (o + dl > cap)
					return -998;
				memcpy(out + o, data, dl);
				o += dl;
			}
			off += used;
		}
		pos += off;
	}
	*out_len = o;
	return rc;
}

static void
check_streaming(const struct vec *v, const struct ol_sigv4_result *res)
{
	static const size_t steps[] = {0, 1, 5, 64, 333};
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct ol_awschunked *d = NULL;
		uint8_t out[4096];
		size_t olen = 0;
		int good = ol_awschunked_new(res, (int64_t)v->decoded_len, &d) == 0;
		int rc =
		    good ? decode(d, v->body, v->body_len, steps[s], out, sizeof(out), &olen) : -1;
		good = rc == OL_AWSCHUNKED_DONE && olen == v->decoded_len &&
		       memcmp(out, v->decoded, olen) == 0;
		good = good && (int)ol_awschunked_trailer_count(d) == v->ntrailer;
		for (int t = 0; good && t < v->ntrailer; t++) {
			const char *name, *val;
			char both[600];
			good = ol_awschunked_trailer(d, (size_t)t, &name, &val) == 0;
			snprintf(both, sizeof(both), "%s:%s", name, val);
			good = good && strcmp(both, v->trailer[t]) == 0;
		}
		char what[300];
		snprintf(what, sizeof(what), "%s: body decodes with split %zu", v->name, steps[s]);
		if (!good)
			printf("# rc=%d olen=%zu msg=%s\n", rc, olen,
			       d ? ol_awschunked_message(d) : "");
		ok(good, "%s", what);
		ol_awschunked_free(d);
	}
}

/* Flip one byte at off of the body: decoding must fail (before DONE). */
static void
check_tamper(const struct vec *v, const struct ol_sigv4_result *res, size_t off, int want,
	     const char *what)
{
	uint8_t *b = malloc(v->body_len), out[4096];
	size_t olen;
	memcpy(b, v->body, v->body_len);
	b[off] ^= 0x01;
	struct ol_awschunked *d;
	ol_awschunked_new(res, (int64_t)v->decoded_len, &d);
	int rc = decode(d, b, v->body_len, 0, out, sizeof(out), &olen);
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: %s fails (rc %d)", v->name, what, rc);
	ok(rc == want, "%s", msg);
	ol_awschunked_free(d);
	free(b);
}

static void
check_vector(struct vec *v)
{
	struct ol_sigv4_request req = req_of(v);
	struct ol_sigv4_result res;
	int want = err_of(v->expect);
	int rc = ol_sigv4_verify(&req, g_region, (time_t)v->now, secret_for, NULL, &res);
	char what[300];
	snprintf(what, sizeof(what), "%s: verify -> %s", v->name, v->expect);
	if (rc != want)
		printf("# got %d (%s)\n", rc, res.message);
	ok(rc == want, "%s", what);
	if (rc == OL_SIGV4_ERR_NEED_BODY_HASH && v->rawbody) {
		uint8_t sha[OL_CKSUM_MAX_RAW];
		ol_cksum_compute(OL_CKSUM_SHA256, v->rawbody, v->rawbody_len, sha);
		int bwant = v->bodyexpect[0] ? err_of(v->bodyexpect) : 0;
		int brc = ol_sigv4_verify_body(&res, sha);
		ok(res.body_hash_pending == 0 && brc == bwant &&
		       (brc != 0 || (res.has_payload_sha256 && res.seed_signature[0])),
		   "%s: verify_body over the body", v->name);
		ok(ol_sigv4_verify_body(&res, sha) == -EINVAL, "%s: verify_body only once",
		   v->name);
		if (brc)
			want = brc;
	}
	if (want == OL_SIGV4_ERR_SIGNATURE_MISMATCH)
		ok(res.canonical_request && res.string_to_sign &&
		       !strncmp(res.string_to_sign, "AWS4-HMAC-SHA256\n", 17),
		   "%s: mismatch carries StringToSign and CanonicalRequest", v->name);
	if (rc == OL_SIGV4_ERR_UNSIGNED_HEADERS) {
		if (strcmp(res.unsigned_headers, v->unsigned_names))
			printf("# listed \"%s\"\n", res.unsigned_headers);
		ok(!strcmp(res.unsigned_headers, v->unsigned_names) &&
		       !strcmp(ol_sigv4_s3_code(rc, res.presigned), "AccessDenied") &&
		       ol_sigv4_http_status(rc) == 403,
		   "%s: AccessDenied 403 naming the unsigned headers", v->name);
	}
	if (rc == 0 && v->seed[0])
		ok(!strcmp(res.seed_signature, v->seed), "%s: seed signature", v->name);
	if (rc == 0 && !strcmp(v->payload, "UNSIGNED"))
		ok(res.payload == OL_SIGV4_PAYLOAD_UNSIGNED && !res.has_payload_sha256,
		   "%s: payload UNSIGNED-PAYLOAD", v->name);
	if (rc == 0 && v->sha256[0]) {
		char hx[65];
		for (int i = 0; i < 32; i++)
			snprintf(hx + 2 * i, 3, "%02x", res.payload_sha256[i]);
		ok(res.has_payload_sha256 && !strcmp(hx, v->sha256),
		   "%s: expected body sha256 returned", v->name);
	}
	if (rc == 0 && v->body) {
		check_streaming(v, &res);
		if (res.payload != OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER) {
			/* a data byte of the first chunk (after its header line) */
			size_t off =
			    (size_t)((uint8_t *)memchr(v->body, '\n', v->body_len) - v->body) + 5;
			check_tamper(v, &res, off, OL_AWSCHUNKED_ERR_SIGNATURE, "tampered data");
		}
		if (res.payload == OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER)
			check_tamper(v, &res, v->body_len - 60, OL_AWSCHUNKED_ERR_SIGNATURE,
				     "tampered trailer signature");
		/* the decoded length header is checked */
		struct ol_awschunked *d;
		uint8_t out[4096];
		size_t olen;
		ol_awschunked_new(&res, (int64_t)v->decoded_len + 1, &d);
		ok(decode(d, v->body, v->body_len, 0, out, sizeof(out), &olen) ==
		       OL_AWSCHUNKED_ERR_LENGTH,
		   "%s: wrong x-amz-decoded-content-length fails", v->name);
		ol_awschunked_free(d);
	}
	ol_sigv4_result_fini(&res);
}

/* ol_sigv4_sign over the same headers (Authorization removed) gives botocore's value. */
static void
check_sign(struct vec *v)
{
	struct vec copy = *v;
	const char *auth = NULL;
	copy.nh = 0;
	for (size_t i = 0; i < v->nh; i++) {
		if (v->h[i].name_len == 13 && !strncasecmp(v->h[i].name, "authorization", 13))
			auth = v->h[i].value;
		else
			copy.h[copy.nh++] = v->h[i];
	}
	struct ol_sigv4_request req = req_of(&copy);
	char out[512], date[17] = "", sha[80] = "";
	for (size_t i = 0; i < copy.nh; i++) {
		if (copy.h[i].name_len == 10 && !strncasecmp(copy.h[i].name, "x-amz-date", 10))
			snprintf(date, sizeof(date), "%.*s", (int)copy.h[i].value_len,
				 copy.h[i].value);
		if (copy.h[i].name_len == 20 &&
		    !strncasecmp(copy.h[i].name, "x-amz-content-sha256", 20))
			snprintf(sha, sizeof(sha), "%.*s", (int)copy.h[i].value_len,
				 copy.h[i].value);
	}
	if (!sha[0]) /* plain SigV4 without body: the empty-body hash is signed */
		snprintf(sha, sizeof(sha), "%s",
			 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	int rc = ol_sigv4_sign(&req, g_access, g_secret, g_region, date, sha, out, sizeof(out));
	if (rc || !auth || strcmp(out, auth))
		printf("# rc=%d\n# got  %s\n# want %s\n", rc, out, auth ? auth : "");
	ok(rc == 0 && auth && !strcmp(out, auth), "%s: ol_sigv4_sign == botocore", v->name);
}

static void
run_vectors(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("not ok 1 - cannot open %s\n1..1\n", path);
		exit(1);
	}
	static char line[65536];
	struct vec v;
	memset(&v, 0, sizeof(v));
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		char *sp = strchr(line, ' ');
		const char *val = sp ? sp + 1 : "";
		if (sp)
			*sp = 0;
		if (!strcmp(line, "access"))
			set(g_access, sizeof(g_access), val);
		else if (!strcmp(line, "secret"))
			set(g_secret, sizeof(g_secret), val);
		else if (!strcmp(line, "region"))
			set(g_region, sizeof(g_region), val);
		else if (!strcmp(line, "end")) {
			check_vector(&v);
			if (!strcmp(v.expect, "ok") && !strstr(v.name, "presigned") &&
			    !strstr(v.name, "literal") && !strstr(v.name, "curl"))
				check_sign(&v);
			vec_free(&v);
		} else
			vec_line(&v, line, val);
	}
	fclose(f);
}

/* ---- the AWS documented chunked-upload example (sigv4-streaming) ---- */

#define AWS_SEED "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define AWS_SIG1 "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
#define AWS_SIG2 "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
#define AWS_SIG3 "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"

static void
hdr(struct ol_sigv4_header *h, const char *n, const char *v)
{
	*h = (struct ol_sigv4_header){n, strlen(n), v, strlen(v)};
}

static size_t
aws_body(uint8_t *b)
{
	size_t o = 0;
	o += (size_t)snprintf((char *)b + o, 70000 - o, "10000;chunk-signature=" AWS_SIG1 "\r\n");
	memset(b + o, 'a', 65536);
	o += 65536;
	o += (size_t)snprintf((char *)b + o, 70000 - o, "\r\n400;chunk-signature=" AWS_SIG2 "\r\n");
	memset(b + o, 'a', 1024);
	o += 1024;
	o += (size_t)snprintf((char *)b + o, 70000 - o,
			      "\r\n0;chunk-signature=" AWS_SIG3 "\r\n\r\n");
	return o;
}

static void
run_aws_example(void)
{
	struct ol_sigv4_header h[8];
	hdr(&h[0], "Host", "s3.amazonaws.com");
	hdr(&h[1], "x-amz-date", "20130524T000000Z");
	hdr(&h[2], "x-amz-storage-class", "REDUCED_REDUNDANCY");
	hdr(&h[3], "Authorization",
	    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
	    "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
	    "x-amz-decoded-content-length;x-amz-storage-class,Signature=" AWS_SEED);
	hdr(&h[4], "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
	hdr(&h[5], "Content-Encoding", "aws-chunked");
	hdr(&h[6], "x-amz-decoded-content-length", "66560");
	hdr(&h[7], "Content-Length", "66824");
	struct ol_sigv4_request req = {"PUT", "/examplebucket/chunkObject.txt", 30, NULL, 0, h, 8};
	struct ol_sigv4_result res;
	int rc = ol_sigv4_verify(&req, "us-east-1", 1369353600, secret_for, NULL, &res);
	ok(rc == 0 && !strcmp(res.seed_signature, AWS_SEED) &&
	       res.payload == OL_SIGV4_PAYLOAD_STREAMING_SIGNED &&
	       !strcmp(res.scope, "20130524/us-east-1/s3/aws4_request"),
	   "AWS example: seed signature verifies%s", "");
	uint8_t *body = malloc(70000), *out = malloc(70000);
	size_t blen = aws_body(body), olen = 0;
	ok(blen == 66824, "AWS example: body is Content-Length bytes%s", "");
	static const size_t steps[] = {0, 3, 4096, 70000};
	for (size_t s = 0; s < 4; s++) {
		struct ol_awschunked *d;
		ol_awschunked_new(&res, 66560, &d);
		rc = decode(d, body, blen, steps[s], out, 70000, &olen);
		int good = rc == OL_AWSCHUNKED_DONE && olen == 66560;
		for (size_t i = 0; good && i < olen; i++)
			good = out[i] == 'a';
		char what[100];
		snprintf(what, sizeof(what), "AWS example: chunk signatures chain, split %zu",
			 steps[s]);
		ok(good, "%s", what);
		ol_awschunked_free(d);
	}
	/* second chunk's signature replaced by the first's: fails at the end of chunk 2 */
	memcpy(body + 86 + 65536 + 2 + 22, AWS_SIG1, 64);
	struct ol_awschunked *d;
	ol_awschunked_new(&res, 66560, &d);
	rc = decode(d, body, blen, 0, out, 70000, &olen);
	ok(rc == OL_AWSCHUNKED_ERR_SIGNATURE, "AWS example: swapped chunk signature fails%s", "");
	ol_awschunked_free(d);
	ol_sigv4_result_fini(&res);
	free(body);
	free(out);
}

/* ---- hostile and edge inputs for the decoder ---- */

static int
feed_all(enum ol_sigv4_payload mode, const char *body, size_t len, int64_t dlen, char *out,
	 size_t *olen, struct ol_awschunked **keep)
{
	struct ol_sigv4_result res;
	memset(&res, 0, sizeof(res));
	res.payload = mode;
	snprintf(res.seed_signature, sizeof(res.seed_signature), "%064d", 0);
	struct ol_awschunked *d;
	if (ol_awschunked_new(&res, dlen, &d))
		return -1000;
	int rc = decode(d, (const uint8_t *)body, len, 0, (uint8_t *)out, 4096, olen);
	if (keep)
		*keep = d;
	else
		ol_awschunked_free(d);
	return rc;
}

static void
run_hostile(void)
{
	const enum ol_sigv4_payload U = OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
	const enum ol_sigv4_payload S = OL_SIGV4_PAYLOAD_STREAMING_SIGNED;
	char out[4096], *big = malloc(100000);
	size_t olen;
	struct ol_awschunked *d;
	const char *b = "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\nEXTRA";
	int rc = feed_all(U, b, strlen(b), 5, out, &olen, &d);
	ok(rc == OL_AWSCHUNKED_DONE && olen == 5 && !memcmp(out, "hello", 5) &&
	       !strcmp(ol_awschunked_trailer_get(d, "X-Amz-Checksum-CRC32"), "NhCmhg=="),
	   "unsigned trailer body decodes, trailer found%s", "");
	ol_awschunked_free(d);
	/* the decoder stops at the end of the body: EXTRA is left unconsumed */
	struct ol_sigv4_result res;
	memset(&res, 0, sizeof(res));
	res.payload = U;
	ol_awschunked_new(&res, -1, &d);
	size_t used = 0, total = 0, dl;
	const uint8_t *data;
	rc = OL_AWSCHUNKED_MORE;
	while (rc == OL_AWSCHUNKED_MORE && total < strlen(b)) {
		rc = ol_awschunked_feed(d, (const uint8_t *)b + total, strlen(b) - total, &used,
					&data, &dl);
		total += used;
	}
	ok(rc == OL_AWSCHUNKED_DONE && total == strlen(b) - 5, "bytes after the body are left%s",
	   "");
	ol_awschunked_free(d);

	b = "0\r\n\r\n";
	ok(feed_all(U, b, strlen(b), 0, out, &olen, NULL) == OL_AWSCHUNKED_DONE,
	   "empty unsigned body%s", "");
	memset(big, 'f', 100000);
	ok(feed_all(U, big, 100000, -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_TOO_LONG,
	   "endless chunk-size line is capped%s", "");
	b = "fffffffffffffffffff\r\n";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_TOO_LONG,
	   "huge chunk size refused%s", "");
	b = "200000000\r\n";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_TOO_LONG,
	   "chunk over 4 GiB refused%s", "");
	b = "zz\r\n";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_FORMAT,
	   "non-hex chunk size%s", "");
	b = "5\nhello\r\n0\r\n\r\n";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_FORMAT,
	   "bare LF refused%s", "");
	b = "5\r\nhelloXX0\r\n\r\n";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_FORMAT,
	   "data not followed by CRLF%s", "");
	b = "5\r\nhello\r\n0\r\n\r\n";
	ok(feed_all(U, b, strlen(b), 4, out, &olen, NULL) == OL_AWSCHUNKED_ERR_LENGTH,
	   "more data than x-amz-decoded-content-length%s", "");
	b = "5\r\nhel";
	ok(feed_all(U, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_MORE,
	   "truncated body is not done%s", "");
	size_t o = (size_t)snprintf(big, 100000, "0\r\n");
	for (int i = 0; i < OL_AWSCHUNKED_MAX_TRAILERS + 1; i++)
		o += (size_t)snprintf(big + o, 100000 - o, "x-t%d:v\r\n", i);
	o += (size_t)snprintf(big + o, 100000 - o, "\r\n");
	ok(feed_all(U, big, o, -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_TOO_LONG,
	   "too many trailers refused%s", "");
	b = "5;chunk-signature=abc\r\nhello\r\n";
	ok(feed_all(S, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_SIGNATURE,
	   "short chunk signature refused%s", "");
	b = "5\r\nhello\r\n";
	ok(feed_all(S, b, strlen(b), -1, out, &olen, NULL) == OL_AWSCHUNKED_ERR_SIGNATURE,
	   "signed mode requires chunk-signature%s", "");
	memset(&res, 0, sizeof(res));
	res.payload = OL_SIGV4_PAYLOAD_UNSIGNED;
	ok(ol_awschunked_new(&res, -1, &d) == -EINVAL, "non-streaming payload refused%s", "");
	free(big);

	struct ol_sigv4_header hh[3];
	hdr(&hh[0], "host", "h");
	hdr(&hh[1], "x-amz-date", "20261201T183000Z");
	hdr(&hh[2], "Transfer-Encoding", "chunked");
	struct ol_sigv4_request rq = {"GET", "/b", 2, "X-Amz-Credential=x", 18, hh, 2};
	ok(!ol_sigv4_is_anonymous(&rq), "X-Amz-Credential alone is not anonymous%s", "");
	rq.query = "x-amz-credential=x&a";
	rq.query_len = strlen(rq.query);
	ok(ol_sigv4_is_anonymous(&rq), "auth query names are case-sensitive%s", "");
	char small[20];
	ok(ol_sigv4_sign(&rq, "AK", "SK", "us-east-1", "20261201T183000Z", "UNSIGNED-PAYLOAD",
			 small, sizeof(small)) == -ENOSPC,
	   "sign reports a short buffer%s", "");
	/* curl-style PUT with a chunked body and no x-amz-content-sha256: hash deferred */
	char auth[300];
	rq.n_headers = 3;
	rq.query = NULL;
	rq.query_len = 0;
	rq.method = "PUT";
	ol_sigv4_sign(&rq, g_access, g_secret, "us-east-1", "20261201T183000Z",
		      "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", auth,
		      sizeof(auth));
	struct ol_sigv4_header h4[4] = {hh[0], hh[1], hh[2]};
	hdr(&h4[3], "Authorization", auth);
	struct ol_sigv4_request rq4 = {"PUT", "/b", 2, NULL, 0, h4, 4};
	rc = ol_sigv4_verify(&rq4, "us-east-1", 1796149800, secret_for, NULL, &res);
	uint8_t sha[OL_CKSUM_MAX_RAW];
	ol_cksum_compute(OL_CKSUM_SHA256, "hello", 5, sha);
	ok(rc == OL_SIGV4_ERR_NEED_BODY_HASH && ol_sigv4_verify_body(&res, sha) == 0,
	   "Transfer-Encoding body without x-amz-content-sha256: deferred, then verified%s", "");
	ol_sigv4_result_fini(&res);
	rc = ol_sigv4_verify(&rq4, "us-east-1", 1796149800, secret_for, NULL, &res);
	ol_cksum_compute(OL_CKSUM_SHA256, "hellO", 5, sha);
	ok(rc == OL_SIGV4_ERR_NEED_BODY_HASH &&
	       ol_sigv4_verify_body(&res, sha) == OL_SIGV4_ERR_SIGNATURE_MISMATCH,
	   "deferred hash of another body fails%s", "");
	ol_sigv4_result_fini(&res);

	/* the per-thread signing-key cache is keyed by secret too */
	int r1 = ol_sigv4_verify(&rq4, "us-east-1", 1796149800, secret_for, NULL, &res);
	ol_sigv4_result_fini(&res);
	int r2 = ol_sigv4_verify(&rq4, "us-east-1", 1796149800, secret_for, "other-secret", &res);
	ol_sigv4_result_fini(&res);
	int r3 = ol_sigv4_verify(&rq4, "us-east-1", 1796149800, secret_for, NULL, &res);
	ol_sigv4_result_fini(&res);
	ok(r1 == OL_SIGV4_ERR_NEED_BODY_HASH && r2 == OL_SIGV4_ERR_NEED_BODY_HASH &&
	       r3 == OL_SIGV4_ERR_NEED_BODY_HASH,
	   "deferred verify with any secret%s", "");
	struct ol_sigv4_header h5[3] = {hh[0], hh[1]};
	rq.n_headers = 2;
	rq.method = "GET";
	ol_sigv4_sign(&rq, g_access, g_secret, "us-east-1", "20261201T183000Z", "UNSIGNED-PAYLOAD",
		      auth, sizeof(auth));
	hdr(&h5[2], "Authorization", auth);
	struct ol_sigv4_header h6[4] = {h5[0], h5[1], h5[2]};
	hdr(&h6[3], "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
	struct ol_sigv4_request rq6 = {"GET", "/b", 2, NULL, 0, h6, 4};
	r1 = ol_sigv4_verify(&rq6, "us-east-1", 1796149800, secret_for, NULL, &res);
	ol_sigv4_result_fini(&res);
	r2 = ol_sigv4_verify(&rq6, "us-east-1", 1796149800, secret_for, "other-secret", &res);
	ol_sigv4_result_fini(&res);
	r3 = ol_sigv4_verify(&rq6, "us-east-1", 1796149800, secret_for, NULL, &res);
	ol_sigv4_result_fini(&res);
	ok(r1 == 0 && r2 == OL_SIGV4_ERR_SIGNATURE_MISMATCH && r3 == 0,
	   "cached signing key never serves another secret%s", "");

	ok(!strcmp(ol_sigv4_s3_code(OL_SIGV4_ERR_WRONG_REGION, 0),
		   "AuthorizationHeaderMalformed") &&
	       !strcmp(ol_sigv4_s3_code(OL_SIGV4_ERR_WRONG_REGION, 1),
		       "AuthorizationQueryParametersError") &&
	       ol_sigv4_http_status(OL_SIGV4_ERR_SKEWED) == 403 &&
	       ol_sigv4_http_status(OL_SIGV4_ERR_MALFORMED) == 400 &&
	       !strcmp(ol_sigv4_s3_code(OL_SIGV4_ERR_EXPIRED, 1), "AccessDenied"),
	   "error code mapping%s", "");
}

/* Signature Version 2 (sigv2.c): AWS's documented example, then the presigned form and what
 * must fail. */
static void
run_v2(void)
{
	/* the S3 developer guide's V2 GET example, path-style */
	struct ol_sigv4_header h[4];
	hdr(&h[0], "Host", "s3.amazonaws.com");
	hdr(&h[1], "Date", "Tue, 27 Mar 2007 19:36:42 +0000");
	hdr(&h[2], "Authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
	struct ol_sigv4_request req = {"GET", "/johnsmith/photos/puppy.jpg", 27, NULL, 0, h, 3};
	struct ol_sigv4_result res;
	time_t t = 1175024202; /* the example's Date */
	ok(ol_sigv2_present(&req) == 1, "V2: an AWS Authorization header is V2%s", "");
	int rc = ol_sigv2_verify(&req, t, secret_for, NULL, &res);
	ok(rc == 0 && !strcmp(res.access_key, "AKIAIOSFODNN7EXAMPLE") && !res.presigned &&
	       res.payload == OL_SIGV4_PAYLOAD_UNSIGNED,
	   "V2: AWS's example verifies%s", "");
	ol_sigv4_result_fini(&res);
	rc = ol_sigv2_verify(&req, t + 3600, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_SKEWED, "V2: an hour later the Date is skewed%s", "");
	ol_sigv4_result_fini(&res);
	hdr(&h[2], "Authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMV=");
	rc = ol_sigv2_verify(&req, t, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_SIGNATURE_MISMATCH && res.string_to_sign &&
	       !strcmp(res.string_to_sign,
		       "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg"),
	   "V2: one bit off is a mismatch, with the string to sign%s", "");
	ol_sigv4_result_fini(&res);
	/* x-amz-* headers and sub-resources are signed: sign a request here, verify it, then
	 * change a header and a sub-resource */
	hdr(&h[1], "x-amz-date", "Tue, 27 Mar 2007 19:36:42 GMT");
	hdr(&h[2], "X-Amz-Meta-B", " two ");
	hdr(&h[3], "x-amz-meta-a", "one");
	const char *q = "uploadId=u%2B1&partNumber=2&x-id=UploadPart";
	struct ol_sigv4_request put = {"PUT", "/b/k%20x", 8, q, strlen(q), h, 4};
	char *sts = NULL, sig[32], auth[96];
	rc = ol_sigv2_string_to_sign(&put, "", &sts);
	ok(rc == 0 && !strcmp(sts, "PUT\n\n\n\nx-amz-date:Tue, 27 Mar 2007 19:36:42 GMT\n"
				   "x-amz-meta-a:one\nx-amz-meta-b:two\n"
				   "/b/k%20x?partNumber=2&uploadId=u+1"),
	   "V2: amz headers sorted and lowercased, sub-resources sorted and decoded%s",
	   rc == 0 ? "" : ": no string to sign"); /* the string's lines would break TAP */
	ok(ol_sigv2_sign("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", sts, sig, sizeof(sig)) == 0,
	   "V2: signed%s", "");
	free(sts);
	snprintf(auth, sizeof(auth), "AWS AKIAIOSFODNN7EXAMPLE:%s", sig);
	struct ol_sigv4_header h5[5];
	memcpy(h5, h, sizeof(h));
	hdr(&h5[4], "Authorization", auth);
	put.headers = h5;
	put.n_headers = 5;
	rc = ol_sigv2_verify(&put, t, secret_for, NULL, &res);
	ok(rc == 0, "V2: a request with amz headers and sub-resources verifies%s", "");
	ol_sigv4_result_fini(&res);
	hdr(&h5[3], "x-amz-meta-a", "changed");
	rc = ol_sigv2_verify(&put, t, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_SIGNATURE_MISMATCH, "V2: a changed x-amz header is a mismatch%s", "");
	ol_sigv4_result_fini(&res);
	hdr(&h5[3], "x-amz-meta-a", "one");
	put.query = "uploadId=u%2B1&partNumber=3";
	put.query_len = strlen(put.query);
	rc = ol_sigv2_verify(&put, t, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_SIGNATURE_MISMATCH, "V2: another partNumber is a mismatch%s", "");
	ol_sigv4_result_fini(&res);
	/* presigned: Expires is the date line; past it, expired; unknown key */
	struct ol_sigv4_request g = {"GET", "/b/k", 4, NULL, 0, h, 0};
	rc = ol_sigv2_string_to_sign(&g, "1175027802", &sts);
	ok(rc == 0 && ol_sigv2_sign("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", sts, sig,
				    sizeof(sig)) == 0,
	   "V2: presigned string signed%s", "");
	free(sts);
	char qs[256], esc[64];
	size_t e = 0;
	for (const char *c = sig; *c; c++)
		e += (size_t)snprintf(esc + e, sizeof(esc) - e,
				      *c == '+' || *c == '/' || *c == '=' ? "%%%02X" : "%c", *c);
	snprintf(qs, sizeof(qs),
		 "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175027802&Signature=%s", esc);
	g.query = qs;
	g.query_len = strlen(qs);
	ok(ol_sigv2_present(&g) == 1, "V2: AWSAccessKeyId + Signature in the query is V2%s", "");
	rc = ol_sigv2_verify(&g, t, secret_for, NULL, &res);
	ok(rc == 0 && res.presigned, "V2: a presigned GET verifies%s", "");
	ol_sigv4_result_fini(&res);
	rc = ol_sigv2_verify(&g, 1175027803, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_EXPIRED, "V2: a second past Expires it has expired%s", "");
	ol_sigv4_result_fini(&res);
	snprintf(qs, sizeof(qs), "AWSAccessKeyId=NOSUCHKEY&Expires=1175027802&Signature=%s", esc);
	g.query_len = strlen(qs);
	rc = ol_sigv2_verify(&g, t, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_INVALID_ACCESS_KEY, "V2: an unknown key%s", "");
	ol_sigv4_result_fini(&res);
	hdr(&h[0], "Authorization", "AWS nocolon");
	struct ol_sigv4_request bad = {"GET", "/b/k", 4, NULL, 0, h, 1};
	rc = ol_sigv2_verify(&bad, t, secret_for, NULL, &res);
	ok(rc == OL_SIGV4_ERR_MALFORMED, "V2: a header without ':' is malformed%s", "");
	ol_sigv4_result_fini(&res);
	hdr(&h[0], "Authorization", "AWS4-HMAC-SHA256 Credential=x");
	ok(ol_sigv2_present(&bad) == 0, "V2: a V4 header is not V2%s", "");
}

/* sv4_hmac (its own RFC 2104 construction on a digest fetched once) against OpenSSL's
 * HMAC(): every key length across the 64-byte block boundary, short and long messages, and
 * RFC 4231 test case 2. */
static void
run_hmac(void)
{
	uint8_t key[200], msg[300], a[32], b[32];
	unsigned int bl = 32;
	int bad = 0;
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 13 + 5);
	for (size_t kl = 0; kl <= sizeof(key); kl++)
		for (size_t ml = 0; ml <= sizeof(msg); ml += kl % 3 ? 149 : 37)
			if (sv4_hmac(key, kl, msg, ml, a) ||
			    !HMAC(EVP_sha256(), key, (int)kl, msg, ml, b, &bl) || memcmp(a, b, 32))
				bad++;
	ok(bad == 0, "sv4_hmac == OpenSSL HMAC() for keys of 0..200 bytes%s", "");
	static const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
					 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
					 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
					 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
	ok(sv4_hmac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28, a) == 0 &&
	       memcmp(a, want, 32) == 0,
	   "sv4_hmac: RFC 4231 test case 2%s", "");
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		printf("1..0 # SKIP no vectors file given\n");
		return 77;
	}
	run_vectors(argv[1]);
	run_aws_example();
	run_hostile();
	run_v2();
	run_hmac();
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
