/* s3/auth/awschunked.c - aws-chunked body decoder with chunk and trailer signature checks. */
#include "s3/auth/awschunked.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "base/hex.h"
#include "s3/auth/sigv4int.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define TNAME_MAX    64
#define TVAL_MAX     256

enum st { ST_HDR, ST_DATA, ST_DATA_END, ST_TRAILER, ST_DONE, ST_FAIL };

struct ol_awschunked {
	enum ol_sigv4_payload mode;
	int is_signed;
	enum st st;
	int err;
	char line[OL_AWSCHUNKED_LINE_MAX + 2];
	size_t line_len;
	uint64_t left, decoded;
	int64_t expect;
	uint8_t key[32];
	char scope[128], date[17];
	char prev_sig[65], chunk_sig[65], trailer_sig[65];
	EVP_MD_CTX *sha;  /* current chunk */
	EVP_MD_CTX *tsha; /* canonical trailers */
	int trailer_lines, skipped_blank, have_tsig;
	size_t n_trailers;
	char tname[OL_AWSCHUNKED_MAX_TRAILERS][TNAME_MAX];
	char tval[OL_AWSCHUNKED_MAX_TRAILERS][TVAL_MAX];
	char msg[160];
};

int
ol_awschunked_new(const struct ol_sigv4_result *auth, int64_t decoded_length,
		  struct ol_awschunked **out)
{
	*out = NULL;
	if (auth->payload != OL_SIGV4_PAYLOAD_STREAMING_SIGNED &&
	    auth->payload != OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER &&
	    auth->payload != OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER)
		return -EINVAL;
	struct ol_awschunked *d = calloc(1, sizeof(*d));
	if (!d)
		return OL_AWSCHUNKED_ERR_NOMEM;
	d->mode = auth->payload;
	d->is_signed = auth->payload != OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
	d->expect = decoded_length;
	memcpy(d->key, auth->signing_key, 32);
	snprintf(d->scope, sizeof(d->scope), "%s", auth->scope);
	snprintf(d->date, sizeof(d->date), "%s", auth->amz_date);
	snprintf(d->prev_sig, sizeof(d->prev_sig), "%s", auth->seed_signature);
	d->sha = EVP_MD_CTX_new();
	d->tsha = EVP_MD_CTX_new();
	if (!d->sha || !d->tsha || EVP_DigestInit_ex(d->tsha, sv4_sha256(), NULL) != 1) {
		ol_awschunked_free(d);
		return OL_AWSCHUNKED_ERR_NOMEM;
	}
	*out = d;
	return 0;
}

void
ol_awschunked_free(struct ol_awschunked *d)
{
	if (!d)
		return;
	EVP_MD_CTX_free(d->sha);
	EVP_MD_CTX_free(d->tsha);
	OPENSSL_cleanse(d->key, sizeof(d->key));
	free(d);
}

static int
fail(struct ol_awschunked *d, int err, const char *msg)
{
	d->st = ST_FAIL;
	d->err = err;
	snprintf(d->msg, sizeof(d->msg), "%s", msg);
	return err;
}

/* HMAC(key, kind "\n" date "\n" scope "\n" prev "\n" tail) against want; chains prev_sig. */
static int
check_sig(struct ol_awschunked *d, const char *kind, const char *tail, const char *want)
{
	char sts[512];
	int n = snprintf(sts, sizeof(sts), "%s\n%s\n%s\n%s\n%s", kind, d->date, d->scope,
			 d->prev_sig, tail);
	if (n < 0 || (size_t)n >= sizeof(sts))
		return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "string to sign too long");
	uint8_t mac[32];
	char got[65];
	if (sv4_hmac(d->key, 32, sts, (size_t)n, mac)) /* the digest fetched once, per chunk */
		return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "HMAC failed");
	ol_hex_encode(mac, 32, got);
	if (strlen(want) != 64 || CRYPTO_memcmp(got, want, 64) != 0)
		return fail(d, OL_AWSCHUNKED_ERR_SIGNATURE,
			    "The request signature we calculated does not match the signature you "
			    "provided.");
	memcpy(d->prev_sig, got, 65);
	return 0;
}

static int
check_chunk_sig(struct ol_awschunked *d, int empty)
{
	char tail[140], h[65];
	uint8_t dig[32];
	unsigned int len = 32;
	if (!d->is_signed)
		return 0;
	if (empty) {
		memcpy(h, EMPTY_SHA256, 65);
	} else {
		if (EVP_DigestFinal_ex(d->sha, dig, &len) != 1)
			return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "SHA256 failed");
		ol_hex_encode(dig, 32, h);
	}
	snprintf(tail, sizeof(tail), "%s\n%s", EMPTY_SHA256, h);
	return check_sig(d, "AWS4-HMAC-SHA256-PAYLOAD", tail, d->chunk_sig);
}

static int
hexnib(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* "hex[;chunk-signature=SIG][;ext...]" */
static int
parse_chunk_header(struct ol_awschunked *d, uint64_t *size)
{
	const char *p = d->line;
	uint64_t v = 0;
	int nd = 0;
	for (; hexnib(*p) >= 0; p++, nd++) {
		if (nd == 16 || v > OL_AWSCHUNKED_MAX_CHUNK)
			return fail(d, OL_AWSCHUNKED_ERR_TOO_LONG, "chunk size too large");
		v = v * 16 + (uint64_t)hexnib(*p);
	}
	if (nd == 0 || (*p && *p != ';'))
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "malformed chunk size");
	if (v > OL_AWSCHUNKED_MAX_CHUNK)
		return fail(d, OL_AWSCHUNKED_ERR_TOO_LONG, "chunk size too large");
	d->chunk_sig[0] = 0;
	static const char key[] = ";chunk-signature=";
	const char *s = strstr(p, key);
	if (s) {
		s += sizeof(key) - 1;
		size_t n = strcspn(s, ";");
		if (n != 64)
			return fail(d, OL_AWSCHUNKED_ERR_SIGNATURE, "malformed chunk signature");
		memcpy(d->chunk_sig, s, 64);
		d->chunk_sig[64] = 0;
	}
	if (d->is_signed && !d->chunk_sig[0])
		return fail(d, OL_AWSCHUNKED_ERR_SIGNATURE, "missing chunk-signature");
	*size = v;
	return 0;
}

static int
on_header(struct ol_awschunked *d)
{
	uint64_t size = 0;
	int rc = parse_chunk_header(d, &size);
	if (rc)
		return rc;
	if (size == 0) {
		rc = check_chunk_sig(d, 1);
		if (rc)
			return rc;
		d->st = ST_TRAILER;
		return 0;
	}
	if (d->is_signed && EVP_DigestInit_ex(d->sha, sv4_sha256(), NULL) != 1)
		return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "SHA256 failed");
	d->left = size;
	d->st = ST_DATA;
	return 0;
}

static int
finish(struct ol_awschunked *d)
{
	if (d->mode == OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER) {
		if (!d->have_tsig)
			return fail(d, OL_AWSCHUNKED_ERR_SIGNATURE,
				    "missing x-amz-trailer-signature");
		uint8_t dig[32];
		unsigned int len = 32;
		char tail[65];
		if (EVP_DigestFinal_ex(d->tsha, dig, &len) != 1)
			return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "SHA256 failed");
		ol_hex_encode(dig, 32, tail);
		int rc = check_sig(d, "AWS4-HMAC-SHA256-TRAILER", tail, d->trailer_sig);
		if (rc)
			return rc;
	}
	if (d->expect >= 0 && d->decoded != (uint64_t)d->expect)
		return fail(d, OL_AWSCHUNKED_ERR_LENGTH,
			    "decoded size differs from x-amz-decoded-content-length");
	d->st = ST_DONE;
	return 0;
}

/* Split "name:value", lowercase the name, trim both. */
static int
split_trailer(struct ol_awschunked *d, char *name, char *val)
{
	char *colon = strchr(d->line, ':');
	if (!colon || colon == d->line)
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "malformed trailer");
	size_t nl = (size_t)(colon - d->line);
	while (nl && isspace((unsigned char)d->line[nl - 1]))
		nl--;
	const char *v = colon + 1;
	while (*v && isspace((unsigned char)*v))
		v++;
	size_t vl = strlen(v);
	while (vl && isspace((unsigned char)v[vl - 1]))
		vl--;
	if (nl == 0 || nl >= TNAME_MAX || vl >= TVAL_MAX)
		return fail(d, OL_AWSCHUNKED_ERR_TOO_LONG, "trailer too long");
	for (size_t i = 0; i < nl; i++)
		name[i] = (char)tolower((unsigned char)d->line[i]);
	name[nl] = 0;
	memcpy(val, v, vl);
	val[vl] = 0;
	return 0;
}

static int
on_trailer_line(struct ol_awschunked *d)
{
	char name[TNAME_MAX], val[TVAL_MAX];
	if (d->mode == OL_SIGV4_PAYLOAD_STREAMING_SIGNED)
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "trailer in a payload without trailers");
	if (d->have_tsig)
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "trailer after x-amz-trailer-signature");
	int rc = split_trailer(d, name, val);
	if (rc)
		return rc;
	d->trailer_lines++;
	if (strcmp(name, "x-amz-trailer-signature") == 0) {
		if (!d->is_signed)
			return 0; /* nothing to check it against: ignored */
		if (strlen(val) != 64)
			return fail(d, OL_AWSCHUNKED_ERR_SIGNATURE, "malformed trailer signature");
		memcpy(d->trailer_sig, val, 65);
		d->have_tsig = 1;
		return 0;
	}
	if (d->n_trailers == OL_AWSCHUNKED_MAX_TRAILERS)
		return fail(d, OL_AWSCHUNKED_ERR_TOO_LONG, "too many trailers");
	memcpy(d->tname[d->n_trailers], name, sizeof(name));
	memcpy(d->tval[d->n_trailers], val, sizeof(val));
	d->n_trailers++;
	if (EVP_DigestUpdate(d->tsha, name, strlen(name)) != 1 ||
	    EVP_DigestUpdate(d->tsha, ":", 1) != 1 ||
	    EVP_DigestUpdate(d->tsha, val, strlen(val)) != 1 ||
	    EVP_DigestUpdate(d->tsha, "\n", 1) != 1)
		return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "SHA256 failed");
	return 0;
}

static int
on_trailer(struct ol_awschunked *d)
{
	if (d->line_len)
		return on_trailer_line(d);
	/* The signed-trailer form may put the empty chunk's CRLF before its trailers. */
	if (d->mode == OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER && d->trailer_lines == 0 &&
	    !d->skipped_blank) {
		d->skipped_blank = 1;
		return 0;
	}
	return finish(d);
}

static int
on_line(struct ol_awschunked *d)
{
	switch (d->st) {
	case ST_HDR:
		return on_header(d);
	case ST_DATA_END:
		if (d->line_len)
			return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "chunk data not followed by CRLF");
		d->st = ST_HDR;
		return check_chunk_sig(d, 0);
	case ST_TRAILER:
		return on_trailer(d);
	default:
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "internal state");
	}
}

/* Accumulate a CRLF-terminated line. Returns 1 complete (d->line without CRLF), 0 need more,
 * or an error. *used: bytes taken from in. */
static int
read_line(struct ol_awschunked *d, const uint8_t *in, size_t len, size_t *used)
{
	const uint8_t *nl = memchr(in, '\n', len);
	size_t take = nl ? (size_t)(nl - in) + 1 : len;
	*used = take;
	if (d->line_len + take > OL_AWSCHUNKED_LINE_MAX + 2)
		return fail(d, OL_AWSCHUNKED_ERR_TOO_LONG, "chunk header or trailer line too long");
	memcpy(d->line + d->line_len, in, take);
	d->line_len += take;
	if (!nl)
		return 0;
	if (d->line_len < 2 || d->line[d->line_len - 2] != '\r')
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "line not terminated by CRLF");
	d->line_len -= 2;
	d->line[d->line_len] = 0;
	if (memchr(d->line, 0, d->line_len))
		return fail(d, OL_AWSCHUNKED_ERR_FORMAT, "NUL byte in a chunk header");
	return 1;
}

static int
take_data(struct ol_awschunked *d, const uint8_t *in, size_t len, const uint8_t **data,
	  size_t *data_len)
{
	size_t n = d->left < len ? (size_t)d->left : len;
	if (d->is_signed && EVP_DigestUpdate(d->sha, in, n) != 1)
		return fail(d, OL_AWSCHUNKED_ERR_NOMEM, "SHA256 failed");
	d->left -= n;
	d->decoded += n;
	if (d->expect >= 0 && d->decoded > (uint64_t)d->expect)
		return fail(d, OL_AWSCHUNKED_ERR_LENGTH,
			    "decoded size exceeds x-amz-decoded-content-length");
	if (d->left == 0)
		d->st = ST_DATA_END;
	*data = in;
	*data_len = n;
	return (int)0;
}

int
ol_awschunked_feed(struct ol_awschunked *d, const uint8_t *in, size_t len, size_t *consumed,
		   const uint8_t **data, size_t *data_len)
{
	size_t pos = 0;
	*consumed = 0;
	*data = NULL;
	*data_len = 0;
	while (pos < len && d->st != ST_DONE && d->st != ST_FAIL) {
		if (d->st == ST_DATA) {
			size_t before = d->left;
			int rc = take_data(d, in + pos, len - pos, data, data_len);
			if (rc)
				return rc;
			*consumed = pos + (size_t)(before - d->left);
			return OL_AWSCHUNKED_MORE;
		}
		size_t used;
		int rc = read_line(d, in + pos, len - pos, &used);
		pos += used;
		if (rc < 0)
			return rc;
		if (rc == 1) {
			rc = on_line(d);
			d->line_len = 0;
			if (rc)
				return rc;
		}
	}
	*consumed = pos;
	if (d->st == ST_FAIL)
		return d->err;
	return d->st == ST_DONE ? OL_AWSCHUNKED_DONE : OL_AWSCHUNKED_MORE;
}

uint64_t
ol_awschunked_decoded(const struct ol_awschunked *d)
{
	return d->decoded;
}

size_t
ol_awschunked_trailer_count(const struct ol_awschunked *d)
{
	return d->st == ST_DONE ? d->n_trailers : 0;
}

int
ol_awschunked_trailer(const struct ol_awschunked *d, size_t i, const char **name,
		      const char **value)
{
	if (d->st != ST_DONE || i >= d->n_trailers)
		return -ENOENT;
	*name = d->tname[i];
	*value = d->tval[i];
	return 0;
}

const char *
ol_awschunked_trailer_get(const struct ol_awschunked *d, const char *name)
{
	for (size_t i = 0; d->st == ST_DONE && i < d->n_trailers; i++)
		if (strcasecmp(d->tname[i], name) == 0)
			return d->tval[i];
	return NULL;
}

const char *
ol_awschunked_message(const struct ol_awschunked *d)
{
	return d->msg;
}
