/* s3/auth/canonical.c - SigV4 canonical request (S3 rules), URI encoding, query and header
 * canonicalization, HMAC and the signing key. */
#include "s3/auth/sigv4int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include "base/hex.h"

/* ---- growable buffer (malloc: the code also serves the client side) ---- */

void
sv4_sb_add(struct sbuf *b, const void *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void
sv4_sb_adds(struct sbuf *b, const char *s)
{
	sv4_sb_add(b, s, strlen(s));
}

void
sv4_sb_addc(struct sbuf *b, char c)
{
	sv4_sb_add(b, &c, 1);
}

/* ---- URI encoding: decode once (bad escapes stay literal), encode with the AWS set ---- */

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

static void
enc_byte(struct sbuf *b, unsigned char c, int keep_slash)
{
	if (unreserved(c) || (keep_slash && c == '/')) {
		sv4_sb_addc(b, (char)c);
		return;
	}
	char e[3] = {'%', ol_hex_digit(c >> 4, true), ol_hex_digit(c, true)};
	sv4_sb_add(b, e, 3);
}

static void
reencode(struct sbuf *b, const char *s, size_t n, int keep_slash)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%' && i + 2 < n && ol_hex_val(s[i + 1]) >= 0 &&
		    ol_hex_val(s[i + 2]) >= 0) {
			c = (unsigned char)(ol_hex_val(s[i + 1]) * 16 + ol_hex_val(s[i + 2]));
			i += 2;
		}
		enc_byte(b, c, keep_slash);
	}
}

/* Decode s[0..n) into out (cap incl. NUL). Returns length or -1 when too long. */
static long
pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%' && i + 2 < n && ol_hex_val(s[i + 1]) >= 0 &&
		    ol_hex_val(s[i + 2]) >= 0) {
			c = (char)(ol_hex_val(s[i + 1]) * 16 + ol_hex_val(s[i + 2]));
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	out[o] = 0;
	return (long)o;
}

/* ---- query parameters ---- */

/* Next '&'-separated non-empty parameter from q at *pos. Returns 1 or 0 at the end. */
int
sv4_next_param(const char *q, size_t qlen, size_t *pos, struct qparam *p)
{
	while (*pos < qlen) {
		size_t s = *pos, e = s;
		while (e < qlen && q[e] != '&')
			e++;
		*pos = e < qlen ? e + 1 : e;
		if (e == s)
			continue;
		const char *eq = memchr(q + s, '=', e - s);
		p->name = q + s;
		p->nlen = eq ? (size_t)(eq - (q + s)) : e - s;
		p->val = eq ? eq + 1 : q + e;
		p->vlen = eq ? (size_t)(q + e - (eq + 1)) : 0;
		return 1;
	}
	return 0;
}

/* Decoded name of p equals lit exactly. */
int
sv4_param_is(const struct qparam *p, const char *lit)
{
	char tmp[64];
	long n = pct_decode(p->name, p->nlen, tmp, sizeof(tmp));
	return n >= 0 && strcmp(tmp, lit) == 0;
}

/* Decoded value of the first parameter named lit into out. Returns length, -ENOENT, or
 * -E2BIG. */
long
sv4_query_get(const char *q, size_t qlen, const char *lit, char *out, size_t cap)
{
	size_t pos = 0;
	struct qparam p;
	while (sv4_next_param(q, qlen, &pos, &p)) {
		if (!sv4_param_is(&p, lit))
			continue;
		long n = pct_decode(p.val, p.vlen, out, cap);
		return n < 0 ? -E2BIG : n;
	}
	return -ENOENT;
}

struct encparam {
	size_t name_off, name_len, val_off, val_len;
	const char *base;
};

static int
encparam_cmp(const void *a, const void *b)
{
	const struct encparam *x = a, *y = b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->base + x->name_off, y->base + y->name_off, n);
	if (c || x->name_len != y->name_len)
		return c ? c : (x->name_len < y->name_len ? -1 : 1);
	n = x->val_len < y->val_len ? x->val_len : y->val_len;
	c = memcmp(x->base + x->val_off, y->base + y->val_off, n);
	if (c || x->val_len == y->val_len)
		return c;
	return x->val_len < y->val_len ? -1 : 1;
}

/* Upper bound of the parameters of q (capped at MAX_PARAMS). */
static size_t
count_params(const char *q, size_t qlen)
{
	size_t n = 1;
	for (size_t i = 0; i < qlen && n < MAX_PARAMS; i++)
		n += q[i] == '&';
	return n;
}

/* Append the canonical query string of q to out. Returns 0, -E2BIG or -ENOMEM. */
static int
canonical_query(const char *q, size_t qlen, int presigned, struct sbuf *out)
{
	struct sbuf enc = {0};
	struct encparam *ps = NULL;
	size_t n = 0, pos = 0;
	struct qparam p;
	int rc = 0;
	while (sv4_next_param(q, qlen, &pos, &p)) {
		if (presigned && sv4_param_is(&p, "X-Amz-Signature"))
			continue;
		if (n == MAX_PARAMS) {
			rc = -E2BIG;
			goto out;
		}
		if (!ps && !(ps = calloc(count_params(q, qlen), sizeof(*ps)))) {
			rc = -ENOMEM;
			goto out;
		}
		ps[n].name_off = enc.len;
		reencode(&enc, p.name, p.nlen, 0);
		ps[n].name_len = enc.len - ps[n].name_off;
		ps[n].val_off = enc.len;
		reencode(&enc, p.val, p.vlen, 0);
		ps[n].val_len = enc.len - ps[n].val_off;
		n++;
	}
	if (enc.oom) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ps[i].base = enc.p;
	if (n)
		qsort(ps, n, sizeof(*ps), encparam_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i)
			sv4_sb_addc(out, '&');
		sv4_sb_add(out, enc.p + ps[i].name_off, ps[i].name_len);
		sv4_sb_addc(out, '=');
		sv4_sb_add(out, enc.p + ps[i].val_off, ps[i].val_len);
	}
out:
	free(ps);
	free(enc.p);
	return rc;
}

/* ---- headers ---- */

const struct ol_sigv4_header *
sv4_find_header(const struct ol_sigv4_request *req, const char *name, size_t nlen, size_t *from)
{
	for (size_t i = *from; i < req->n_headers; i++) {
		const struct ol_sigv4_header *h = &req->headers[i];
		if (h->name_len == nlen && strncasecmp(h->name, name, nlen) == 0) {
			*from = i + 1;
			return h;
		}
	}
	return NULL;
}

/* NUL-terminated copy of header name's first value (trimmed) into out; -ENOENT / -E2BIG. */
long
sv4_header_get(const struct ol_sigv4_request *req, const char *name, char *out, size_t cap)
{
	size_t from = 0;
	const struct ol_sigv4_header *h = sv4_find_header(req, name, strlen(name), &from);
	if (!h)
		return -ENOENT;
	const char *v = h->value;
	size_t n = h->value_len;
	while (n && isspace((unsigned char)*v))
		v++, n--;
	while (n && isspace((unsigned char)v[n - 1]))
		n--;
	if (n + 1 > cap)
		return -E2BIG;
	memcpy(out, v, n);
	out[n] = 0;
	return (long)n;
}

/* Value trimmed, inner whitespace runs collapsed to one space. */
static void
add_header_value(struct sbuf *b, const char *v, size_t n)
{
	size_t i = 0;
	while (i < n && isspace((unsigned char)v[i]))
		i++;
	while (n > i && isspace((unsigned char)v[n - 1]))
		n--;
	int sp = 0;
	for (; i < n; i++) {
		if (isspace((unsigned char)v[i])) {
			sp = 1;
			continue;
		}
		if (sp)
			sv4_sb_addc(b, ' ');
		sp = 0;
		sv4_sb_addc(b, v[i]);
	}
}

/* "name:v1,v2\n" for each name of the ';'-separated lowercase list. */
static void
canonical_headers(const struct ol_sigv4_request *req, const char *list, struct sbuf *out)
{
	const char *s = list;
	while (*s) {
		const char *e = strchr(s, ';');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		sv4_sb_add(out, s, n);
		sv4_sb_addc(out, ':');
		size_t from = 0;
		int first = 1;
		const struct ol_sigv4_header *h;
		while ((h = sv4_find_header(req, s, n, &from))) {
			if (!first)
				sv4_sb_addc(out, ',');
			first = 0;
			add_header_value(out, h->value, h->value_len);
		}
		sv4_sb_addc(out, '\n');
		s += n;
		if (*s == ';')
			s++;
	}
}

/* Build the canonical request into out. presigned: CANON_* flags. Returns 0, -E2BIG or -ENOMEM. */
int
sv4_canonical_request(const struct ol_sigv4_request *req, const char *signed_list,
		      const char *payload_hash, int presigned, struct sbuf *out)
{
	int rc = 0;
	sv4_sb_adds(out, req->method);
	sv4_sb_addc(out, '\n');
	if (req->path_len == 0)
		sv4_sb_addc(out, '/');
	if (presigned & CANON_RAW)
		sv4_sb_add(out, req->path, req->path_len);
	else
		reencode(out, req->path, req->path_len, 1);
	sv4_sb_addc(out, '\n');
	if (presigned & CANON_RAW)
		sv4_sb_add(out, req->query ? req->query : "", req->query ? req->query_len : 0);
	else
		rc = canonical_query(req->query ? req->query : "", req->query ? req->query_len : 0,
				     presigned & CANON_PRESIGNED, out);
	if (rc < 0)
		return rc;
	sv4_sb_addc(out, '\n');
	canonical_headers(req, signed_list, out);
	sv4_sb_addc(out, '\n');
	sv4_sb_adds(out, signed_list);
	sv4_sb_addc(out, '\n');
	sv4_sb_adds(out, payload_hash);
	return out->oom ? -ENOMEM : 0;
}

static int sha256_of(const void *buf, size_t len, uint8_t out[32]);

void
sv4_string_to_sign(const char *amz_date, const char *scope, const struct sbuf *creq,
		   struct sbuf *out)
{
	uint8_t h[32];
	char hx[65];
	if (sha256_of(creq->p, creq->len, h)) {
		out->oom = 1; /* the caller reports -ENOMEM */
		return;
	}
	ol_hex_encode(h, 32, hx);
	sv4_sb_adds(out, ALG "\n");
	sv4_sb_adds(out, amz_date);
	sv4_sb_addc(out, '\n');
	sv4_sb_adds(out, scope);
	sv4_sb_addc(out, '\n');
	sv4_sb_adds(out, hx);
}

/* SHA-256 fetched once. OpenSSL 3 looks an algorithm up by name on every SHA256(), HMAC()
 * and EVP_DigestInit with EVP_sha256(): those look-ups (locks, a hash table, reference
 * counts) cost more than hashing the few hundred bytes of a string to sign. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void
sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

const EVP_MD *
sv4_sha256(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256_md ? sha256_md : EVP_sha256();
}

/* A digest context per thread, for the few small digests of one signature: EVP_MD_CTX_new and
 * _free per digest cost more than hashing a string to sign. Freed when its thread exits. */
static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void
ctx_free(void *ctx)
{
	EVP_MD_CTX_free(ctx);
}

static void
ctx_key_make(void)
{
	(void)pthread_key_create(&ctx_key, ctx_free);
}

static EVP_MD_CTX *
thread_ctx(void)
{
	EVP_MD_CTX *ctx;

	pthread_once(&ctx_once, ctx_key_make);
	ctx = pthread_getspecific(ctx_key);
	if (!ctx && (ctx = EVP_MD_CTX_new()) && pthread_setspecific(ctx_key, ctx)) {
		EVP_MD_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* SHA-256 of buf on this thread's context. 0, or -1. */
static int
sha256_of(const void *buf, size_t len, uint8_t out[32])
{
	EVP_MD_CTX *ctx = thread_ctx();

	return ctx && EVP_DigestInit_ex2(ctx, sv4_sha256(), NULL) == 1 &&
		       EVP_DigestUpdate(ctx, buf, len) == 1 &&
		       EVP_DigestFinal_ex(ctx, out, NULL) == 1
		   ? 0
		   : -1;
}

/* One pass of HMAC (RFC 2104): SHA-256 over (64-byte key block XOR pad) || m. */
static int
hmac_pass(EVP_MD_CTX *ctx, const uint8_t kb[64], uint8_t pad, const void *m, size_t len,
	  uint8_t out[32])
{
	uint8_t x[64];
	int ok;
	for (int i = 0; i < 64; i++)
		x[i] = kb[i] ^ pad;
	ok = EVP_DigestInit_ex2(ctx, sv4_sha256(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, x, 64) == 1 && EVP_DigestUpdate(ctx, m, len) == 1 &&
	     EVP_DigestFinal_ex(ctx, out, NULL) == 1;
	OPENSSL_cleanse(x, sizeof(x));
	return ok ? 0 : OL_SIGV4_ERR_NOMEM;
}

/* HMAC-SHA256 on the fetched digest (HMAC() would fetch both the MAC and the digest). */
int
sv4_hmac(const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32])
{
	uint8_t kb[64] = {0}, inner[32];
	EVP_MD_CTX *ctx = thread_ctx();
	int rc = OL_SIGV4_ERR_NOMEM;
	if (!ctx)
		return rc;
	if (klen > sizeof(kb)) { /* a long key is hashed first */
		if (sha256_of(key, klen, kb))
			goto out;
	} else if (klen) {
		memcpy(kb, key, klen);
	}
	rc = hmac_pass(ctx, kb, 0x36, msg, mlen, inner);
	if (!rc)
		rc = hmac_pass(ctx, kb, 0x5c, inner, sizeof(inner), out);
out:
	OPENSSL_cleanse(kb, sizeof(kb));
	OPENSSL_cleanse(inner, sizeof(inner));
	return rc;
}

int
ol_sigv4_signing_key(const char *secret, const char *date8, const char *region, const char *service,
		     uint8_t key[32])
{
	struct sbuf k = {0};
	sv4_sb_adds(&k, "AWS4");
	sv4_sb_adds(&k, secret);
	if (k.oom)
		return OL_SIGV4_ERR_NOMEM;
	int rc = sv4_hmac((uint8_t *)k.p, k.len, date8, strlen(date8), key);
	OPENSSL_cleanse(k.p, k.len);
	free(k.p);
	if (!rc)
		rc = sv4_hmac(key, 32, region, strlen(region), key);
	if (!rc)
		rc = sv4_hmac(key, 32, service, strlen(service), key);
	if (!rc)
		rc = sv4_hmac(key, 32, "aws4_request", 12, key);
	return rc;
}

/* The signing key changes once a day per credential: keep the last one per thread
 * (4 HMACs saved on every request). */
int
sv4_cached_signing_key(const char *secret, const char *date8, const char *region, uint8_t key[32])
{
	static __thread struct {
		int valid;
		char secret[128], date8[9], region[64];
		uint8_t key[32];
	} c;
	if (c.valid && strcmp(c.secret, secret) == 0 && strcmp(c.date8, date8) == 0 &&
	    strcmp(c.region, region) == 0) {
		memcpy(key, c.key, 32);
		return 0;
	}
	int rc = ol_sigv4_signing_key(secret, date8, region, "s3", key);
	if (rc || strlen(secret) >= sizeof(c.secret) || strlen(region) >= sizeof(c.region))
		return rc;
	memcpy(c.secret, secret, strlen(secret) + 1);
	memcpy(c.date8, date8, 9);
	memcpy(c.region, region, strlen(region) + 1);
	memcpy(c.key, key, 32);
	c.valid = 1;
	return 0;
}
