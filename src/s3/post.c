/* s3/post.c - browser POST uploads (PostObject): a multipart/form-data body whose fields carry
 * the key, a base64 POST policy signed with SigV4 (x-amz-credential, x-amz-date,
 * x-amz-signature), an ACL, metadata and success_action_*, and then the file. */
#include "s3/s3int.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/keyring.h"
#include "base/log.h"
#include "s3/postform.h"
#include "base/hex.h"

#define POST_BUF (1u << 20)

struct post {
	struct s3_req *r;
	struct s3_body b;
	struct ol_form form;
	char boundary[80], delim[84];
	size_t dl;
	char *buf; /* bytes read and not yet consumed: buf[0..len) */
	size_t len, cap;
	bool eof;
};

/* Append the body's next span to p->buf; 1 got some, 0 end, -1 error (sent). */
static int
fill(struct post *p)
{
	const uint8_t *d;
	size_t n;
	if (p->eof)
		return 0;
	int rc = s3_body_next(&p->b, &d, &n);
	if (rc < 0) {
		s3_error(p->r, p->b.err, p->b.errmsg);
		return -1;
	}
	if (rc == 0) {
		p->eof = true;
		return 0;
	}
	if (p->len + n > p->cap) {
		p->cap = p->len + n + POST_BUF;
		p->buf = ol_xrealloc(p->buf, p->cap);
	}
	memcpy(p->buf + p->len, d, n);
	p->len += n;
	return 1;
}

static void
bad_form(struct s3_req *r, const char *msg)
{
	s3_error_code(r, "MalformedPOSTRequest", 400, msg, NULL);
}

/* Read until every field before the file is parsed; the file's first byte moves to buf[0]. */
static int
read_head(struct post *p)
{
	for (;;) {
		long off = ol_form_parse_head(p->buf, p->len, p->boundary, &p->form);
		if (off > 0) {
			memmove(p->buf, p->buf + off, p->len - (size_t)off);
			p->len -= (size_t)off;
			return 0;
		}
		if (off < 0 || p->len > OL_FORM_MAX_HEAD + 8192) {
			bad_form(p->r, off == -E2BIG ? "Too many form fields"
						     : "The body of your POST request is not "
						       "well-formed multipart/form-data.");
			return -1;
		}
		ol_form_free(&p->form);
		int rc = fill(p);
		if (rc <= 0) {
			if (rc == 0)
				bad_form(p->r, "The body of your POST request is not well-formed "
					       "multipart/form-data.");
			return -1;
		}
	}
}

static int
auth_ok(struct post *p, const char *ak)
{
	snprintf(p->r->auth.access_key, sizeof(p->r->auth.access_key), "%s", ak);
	s3_identity(p->r, false);
	return 0;
}

/* SigV2 form (AWSAccessKeyId, signature = base64 HMAC-SHA1 of the policy), which S3 still
 * takes for POST uploads and older SDKs and test suites send. */
static int
post_auth_v2(struct post *p, const char *policy, const char *ak, const char *sig)
{
	struct s3_req *r = p->r;
	char b64[40];
	const char *secret = ol_keyring_secret_for(ak, (void *)r->srv->cfg);
	if (!secret) {
		s3_error(r, OL_S3E_INVALID_ACCESS_KEY, NULL);
		return -1;
	}
	if (ol_sigv2_sign(secret, policy, b64, sizeof(b64)))
		ol_die("s3: HMAC failed");
	if (strlen(sig) != strlen(b64) || CRYPTO_memcmp(b64, sig, strlen(b64)) != 0) {
		ol_debug("s3 %s PostObject: SigV2 policy signature mismatch for key %s", r->reqid,
			 ak);
		s3_error(r, OL_S3E_SIGNATURE_MISMATCH, NULL);
		return -1;
	}
	return auth_ok(p, ak);
}

/* SigV4 of the policy field: sets the requester's identity. 0 or -1 (error sent). */
static int
post_auth(struct post *p, const char *policy)
{
	struct s3_req *r = p->r;
	const struct ol_form *f = &p->form;
	const char *alg = ol_form_get(f, "x-amz-algorithm");
	const char *cred = ol_form_get(f, "x-amz-credential");
	const char *sig = ol_form_get(f, "x-amz-signature");
	const char *ak2 = ol_form_get(f, "AWSAccessKeyId"), *sig2 = ol_form_get(f, "signature");
	char ak[129], date8[9], region[64], svc[16], term[16];
	if (!alg && ak2 && sig2)
		return post_auth_v2(p, policy, ak2, sig2);
	uint8_t key[32], mac[32];
	unsigned ml = 0;
	char hex[65];
	if (!alg || strcmp(alg, "AWS4-HMAC-SHA256") != 0 || !cred || !sig ||
	    !ol_form_get(f, "x-amz-date")) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "Bucket POST with a policy must contain x-amz-algorithm=AWS4-HMAC-SHA256, "
			 "x-amz-credential, x-amz-date and x-amz-signature fields");
		return -1;
	}
	if (sscanf(cred, "%128[^/]/%8[0-9]/%63[^/]/%15[^/]/%15s", ak, date8, region, svc, term) !=
		5 ||
	    strcmp(svc, "s3") != 0 || strcmp(term, "aws4_request") != 0 ||
	    strcmp(region, r->srv->cfg->region) != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid x-amz-credential");
		return -1;
	}
	const char *secret = ol_keyring_secret_for(ak, (void *)r->srv->cfg);
	if (!secret) {
		s3_error(r, OL_S3E_INVALID_ACCESS_KEY, NULL);
		return -1;
	}
	if (ol_sigv4_signing_key(secret, date8, region, "s3", key) != 0 ||
	    !HMAC(EVP_sha256(), key, 32, (const uint8_t *)policy, strlen(policy), mac, &ml))
		ol_die("s3: HMAC failed");
	ol_hex_encode(mac, 32, hex);
	OPENSSL_cleanse(key, sizeof(key));
	if (strlen(sig) != 64 || CRYPTO_memcmp(hex, sig, 64) != 0) {
		ol_debug("s3 %s PostObject: policy signature mismatch for key %s", r->reqid, ak);
		s3_error(r, OL_S3E_SIGNATURE_MISMATCH, NULL);
		return -1;
	}
	return auth_ok(p, ak);
}

/* Key with ${filename} replaced. false when missing or too long (error sent). */
static bool
post_key(struct post *p)
{
	struct s3_req *r = p->r;
	const char *k = ol_form_get(&p->form, "key");
	struct ol_buf b = {0};
	if (!k || !k[0]) {
		s3_error(
		    r, OL_S3E_INVALID_ARGUMENT,
		    "Bucket POST must contain a field named 'key'.  If it is specified, please "
		    "check the order of the fields.");
		return false;
	}
	const char *s = strstr(k, "${filename}");
	if (s) {
		ol_buf_add(&b, k, (size_t)(s - k));
		ol_buf_adds(&b, p->form.filename);
		ol_buf_adds(&b, s + 11);
	} else {
		ol_buf_adds(&b, k);
	}
	bool ok = b.len > 0 && b.len <= OL_S3_MAX_KEY && !memchr(b.p, 0, b.len);
	if (ok) {
		memcpy(r->rt.key, b.p, b.len);
		r->rt.key[b.len] = '\0';
		r->rt.key_len = b.len;
	} else {
		s3_error(r, OL_S3E_KEY_TOO_LONG, NULL);
	}
	ol_buf_free(&b);
	return ok;
}

/* The policy: decoded and checked. 0 or -1 (error sent). */
static int
post_policy(struct post *p, const char *b64, int64_t *min_len, int64_t *max_len)
{
	struct s3_req *r = p->r;
	size_t n = strlen(b64);
	char *json = ol_xmalloc(n + 1), msg[200];
	int dn = ol_cksum_b64_decode(b64, n, (uint8_t *)json, n);
	int rc = -1;
	if (dn < 0) {
		s3_error_code(r, "InvalidPolicyDocument", 400,
			      "Invalid Policy: Invalid Simple-Policy Base64 Encoding", NULL);
		goto out;
	}
	rc = ol_post_policy_check(json, (size_t)dn, &p->form, r->rt.bucket, r->rt.key,
				  (int64_t)time(NULL), min_len, max_len, msg, sizeof(msg));
	if (rc == -EINVAL)
		s3_error_code(r, "InvalidPolicyDocument", 400, msg, NULL);
	else if (rc < 0)
		s3_error(r, OL_S3E_ACCESS_DENIED, msg);
	ol_debug("s3 %s PostObject %s/%s policy: %s", r->reqid, r->rt.bucket, r->rt.key,
		 rc ? msg : "conditions met");
	rc = rc ? -1 : 0;
out:
	free(json);
	return rc;
}

/* Stream the file part into w until the closing delimiter. Returns the size or -1 (sent). */
static int64_t
post_stream(struct post *p, struct s3_sse_w *w, struct ol_md5mb *md5, int64_t max_len)
{
	int64_t total = 0;
	for (;;) {
		const char *e = memmem(p->buf, p->len, p->delim, p->dl);
		size_t take = e ? (size_t)(e - p->buf) : (p->len >= p->dl ? p->len - p->dl + 1 : 0);
		if (take) {
			total += (int64_t)take;
			if (total > max_len) {
				s3_error(p->r, OL_S3E_ENTITY_TOO_LARGE,
					 "Your proposed upload exceeds the maximum allowed size");
				return -1;
			}
			int rc = s3_sse_w_write(w, p->buf, take);
			if (rc < 0) {
				s3_store_error(p->r, rc, OL_S3E_NO_SUCH_BUCKET);
				return -1;
			}
			ol_md5mb_update(md5, p->buf, take);
			memmove(p->buf, p->buf + take, p->len - take);
			p->len -= take;
		}
		if (e)
			return total;
		int rc = fill(p);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			bad_form(p->r, "The body of your POST request is not well-formed "
				       "multipart/form-data: the file part does not end.");
			return -1;
		}
	}
}

static void
post_meta(struct post *p, struct ol_buf *meta)
{
	const char *ct = ol_form_get(&p->form, "Content-Type");
	if (!ct || !ct[0])
		ct = p->form.file_type[0] ? p->form.file_type : "binary/octet-stream";
	ol_s3_meta_add(meta, "content-type", ct);
	for (unsigned i = 0; i < p->form.n; i++) {
		const struct ol_form_field *f = &p->form.f[i];
		if (strncasecmp(f->name, "x-amz-meta-", 11) != 0)
			continue;
		char low[128];
		size_t k = 0;
		for (; f->name[k] && k < sizeof(low) - 1; k++)
			low[k] = (char)((f->name[k] >= 'A' && f->name[k] <= 'Z') ? f->name[k] + 32
										 : f->name[k]);
		low[k] = '\0';
		ol_s3_meta_add(meta, low, f->value);
	}
	s3_meta_add_owner(p->r, meta);
}

static void
post_respond(struct post *p, const char *etag_hex, const struct s3_sse *e)
{
	struct s3_req *r = p->r;
	char etag[48], loc[2300];
	const char *redir = ol_form_get(&p->form, "success_action_redirect");
	const char *status = ol_form_get(&p->form, "success_action_status");
	snprintf(etag, sizeof(etag), "\"%s\"", etag_hex);
	snprintf(loc, sizeof(loc), "/%s/%s", r->rt.bucket, r->rt.key);
	if (redir && redir[0]) {
		struct ol_buf u = {0};
		ol_buf_adds(&u, redir);
		ol_buf_adds(&u, strchr(redir, '?') ? "&bucket=" : "?bucket=");
		ol_buf_adds(&u, r->rt.bucket);
		ol_buf_adds(&u, "&key=");
		ol_s3_url_encode(&u, r->rt.key, r->rt.key_len);
		ol_buf_adds(&u, "&etag=%22");
		ol_buf_adds(&u, etag_hex);
		ol_buf_adds(&u, "%22");
		struct ol_http_header h[4] = {{"Location", ol_buf_cstr(&u)}, {"ETag", etag}};
		s3_send(r, 303, h, s3_sse_headers(e, h, 2), NULL, 0);
		ol_buf_free(&u);
		return;
	}
	struct ol_http_header h[4] = {{"ETag", etag}, {"Location", loc}};
	size_t nh = s3_sse_headers(e, h, 2);
	if (status && strcmp(status, "201") == 0) {
		struct ol_buf x = {0};
		/* no xmlns: AWS's PostResponse has none, and clients look up <Key> unqualified */
		ol_buf_adds(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse>");
		ol_s3_xml_elem(&x, "Location", loc);
		ol_s3_xml_elem(&x, "Bucket", r->rt.bucket);
		ol_s3_xml_elemn(&x, "Key", r->rt.key, r->rt.key_len);
		ol_s3_xml_elem(&x, "ETag", etag);
		ol_buf_adds(&x, "</PostResponse>");
		s3_send(r, 201, h, nh, x.p, x.len);
		ol_buf_free(&x);
		return;
	}
	s3_send(r, status && strcmp(status, "200") == 0 ? 200 : 204, h, nh, NULL, 0);
}

/* The form's encryption fields: x-amz-server-side-encryption = AES256 (SSE-S3) or aws:kms
 * (SSE-KMS, with x-amz-server-side-encryption-aws-kms-key-id or the default key) into q; the
 * SSE-C fields are 501 NotImplemented naming the field (never stored in plaintext as if
 * encrypted). 0, or -1 with the error sent. */
static int
post_sse(struct post *p, struct s3_sse_req *q)
{
	static const char kid_field[] = "x-amz-server-side-encryption-aws-kms-key-id";
	struct s3_req *r = p->r;
	const char *kid = NULL;
	bool kms = false;
	memset(q, 0, sizeof(*q));
	for (unsigned i = 0; i < p->form.n; i++) {
		const struct ol_form_field *f = &p->form.f[i];
		kms |= strcasecmp(f->name, "x-amz-server-side-encryption") == 0 &&
		       strcmp(f->value, "aws:kms") == 0;
		if (strcasecmp(f->name, kid_field) == 0)
			kid = f->value;
	}
	for (unsigned i = 0; i < p->form.n; i++) {
		const struct ol_form_field *f = &p->form.f[i];
		if (strncasecmp(f->name, "x-amz-server-side-encryption", 28) != 0)
			continue;
		if (f->name[28] == '\0' && strcmp(f->value, "AES256") == 0) {
			q->mode = S3_SSE_S3;
			continue;
		}
		if (f->name[28] == '\0' && kms) {
			if (s3_sse_kms_pick(r, kid, q) < 0)
				return -1;
			continue;
		}
		if (kms && strcasecmp(f->name, kid_field) == 0)
			continue;
		char msg[200];
		struct ol_buf x = {0};
		snprintf(msg, sizeof(msg),
			 "A browser POST upload takes x-amz-server-side-encryption = AES256 or "
			 "aws:kms (and its key id); the field %.60s cannot be honoured",
			 f->name);
		ol_s3_xml_elem(&x, "Header", f->name);
		s3_error_code(r, "NotImplemented", 501, msg, x.p);
		ol_buf_free(&x);
		return -1;
	}
	return 0;
}

/* After the head: identity, key, policy, access; then the file; then the answer. */
static void
post_body(struct post *p)
{
	struct s3_req *r = p->r;
	struct ol_put *w = NULL;
	struct ol_md5mb md5;
	struct ol_buf meta = {0}, smeta = {0}, tmeta = {0};
	struct s3_sse_req q = {0};
	struct s3_sse e = {0};
	struct s3_sse_w sw = {0};
	int64_t min_len = 0, max_len = INT64_MAX;
	uint8_t raw[OL_CKSUM_MAX_RAW];
	char etag[40];
	const char *policy = ol_form_get(&p->form, "policy");
	ol_md5mb_init(&md5);
	if ((policy && post_auth(p, policy) < 0) || !post_key(p) ||
	    (policy && post_policy(p, policy, &min_len, &max_len) < 0) ||
	    !s3_access_post(r, ol_form_get(&p->form, "acl")) || post_sse(p, &q) < 0 ||
	    s3_sse_new(r, &q, &e, &smeta) < 0)
		goto out;
	const char *tagging = ol_form_get(&p->form, "tagging"); /* a Tagging XML document */
	if (tagging && s3_tagging_xml_meta(r, tagging, &tmeta) < 0)
		goto out;
	int rc = ol_store_put_begin(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, -1, &w);
	if (rc < 0) {
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	ol_store_put_set_vmode(w, s3_vmode(r));
	s3_sse_w_init(&sw, &e, w);
	int64_t size = post_stream(p, &sw, &md5, max_len);
	if (size < 0)
		goto out;
	if ((rc = s3_sse_w_finish(&sw)) < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	if (size < min_len) {
		s3_error(r, OL_S3E_ENTITY_TOO_SMALL,
			 "Your proposed upload is smaller than the minimum allowed size");
		goto out;
	}
	while (!p->eof && fill(p) > 0)
		p->len = 0; /* the parts after the file are ignored, as S3 does */
	if (p->b.err) {
		s3_error(r, p->b.err, p->b.errmsg);
		goto out;
	}
	ol_md5mb_final(&md5, raw);
	ol_hex_encode(raw, 16, etag);
	post_meta(p, &meta);
	if (tmeta.len)
		ol_buf_add(&meta, tmeta.p, tmeta.len);
	s3_lock_write_meta(r, &meta); /* the bucket's default retention, as for a PUT */
	if (e.mode) {
		ol_buf_add(&meta, smeta.p, smeta.len);
		ol_buf_addf(&meta, "ol-sse-size: %llu\n", (unsigned long long)sw.plain);
	}
	rc = ol_store_put_commit(w, etag, meta.p, meta.len, NULL);
	w = NULL;
	if (rc < 0) {
		s3_write_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	post_respond(p, etag, &e);
out:
	ol_store_put_abort(w);
	ol_buf_free(&meta);
	ol_buf_free(&smeta);
	ol_buf_free(&tmeta);
	s3_sse_w_fini(&sw);
	s3_sse_fini(&e);
}

void
s3_post_object(struct s3_req *r)
{
	struct post *p = ol_xcalloc(1, sizeof(*p));
	p->r = r;
	r->op = "PostObject";
	if (ol_form_boundary(ol_http_header(r->h, "content-type"), p->boundary,
			     sizeof(p->boundary)) < 0) {
		bad_form(r,
			 "The body of your POST request is not well-formed multipart/form-data.");
		free(p);
		return;
	}
	p->dl = (size_t)snprintf(p->delim, sizeof(p->delim), "\r\n--%s", p->boundary);
	if (s3_length_check(r, r->srv->max_object_size + OL_FORM_MAX_HEAD) < 0 ||
	    s3_body_init(&p->b, r, r->srv->max_object_size + OL_FORM_MAX_HEAD) < 0) {
		if (!r->responded)
			s3_error(r, p->b.err, p->b.errmsg);
		free(p);
		return;
	}
	if (read_head(p) == 0)
		post_body(p);
	ol_form_free(&p->form);
	s3_body_fini(&p->b);
	free(p->buf);
	free(p);
}
