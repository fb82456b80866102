/* s3/object.c - object handlers: PUT (and CopyObject), GET, HEAD, DELETE, sub-resources. */
#include "s3/s3int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/hex.h"

static const char *const std_headers[][2] = {
    {"content-type", "Content-Type"},
    {"cache-control", "Cache-Control"},
    {"content-disposition", "Content-Disposition"},
    {"content-encoding", "Content-Encoding"},
    {"content-language", "Content-Language"},
    {"expires", "Expires"},
};

static void
etag_quoted(const char *etag, char *out, size_t cap)
{
	size_t n = strlen(etag);
	if (cap < 3)
		return;
	if (n > cap - 3)
		n = cap - 3;
	out[0] = '"';
	memcpy(out + 1, etag, n);
	out[n + 1] = '"';
	out[n + 2] = '\0';
}

static bool
etag_match(const char *list, const char *etag)
{
	const char *p = list;
	size_t el = strlen(etag);
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		if (*p == '"')
			p++;
		if (strncmp(p, etag, el) == 0 &&
		    (p[el] == '"' || p[el] == ',' || !p[el] || p[el] == ' '))
			return true;
		while (*p && *p != ',')
			p++;
	}
	return false;
}

/* 0 = go on, else the status to answer (304 / 412). copy: the copy-source conditions
 * (x-amz-copy-source-if-...) rather than a GET's or HEAD's. */
static int
conditionals(struct s3_req *r, const struct ol_obj_info *in, bool copy)
{
	static const char *const names[2][4] = {
	    {"if-match", "if-none-match", "if-modified-since", "if-unmodified-since"},
	    {"x-amz-copy-source-if-match", "x-amz-copy-source-if-none-match",
	     "x-amz-copy-source-if-modified-since", "x-amz-copy-source-if-unmodified-since"}};
	const char *v[4];
	for (int i = 0; i < 4; i++)
		v[i] = ol_http_header(r->h, names[copy][i]);
	int64_t secs, mt = in->mtime_ns / 1000000000;
	if (v[0] && !etag_match(v[0], in->etag))
		return 412;
	if (!v[0] && v[3] && ol_s3_parse_http_date(v[3], &secs) == 0 && mt > secs)
		return 412;
	if (v[1] && etag_match(v[1], in->etag))
		return 304;
	if (!v[1] && v[2] && ol_s3_parse_http_date(v[2], &secs) == 0 && mt <= secs)
		return 304;
	return 0;
}

/* GET streams in 1 MiB steps: whole blocks are read by the store straight into this buffer
 * and sent from it (no copy in between). Bigger steps (4 MiB) measured ~15% slower: the
 * socket sits idle longer while each step is read; the kernel's per-file readahead keeps
 * the drives busy between steps. */
#define S3_GET_BUF (1u << 20)

/* ---- PUT ---- */

static int
put_stream(struct s3_req *r, struct s3_sse_w *w, struct s3_body *b)
{
	const uint8_t *d;
	size_t n;
	int rc;
	while ((rc = s3_body_next(b, &d, &n)) > 0) {
		int wr = s3_sse_w_write(w, d, n);
		if (wr < 0) {
			s3_store_error(r, wr, OL_S3E_NO_SUCH_BUCKET);
			return -1;
		}
	}
	if (rc < 0) {
		s3_error(r, b->err, b->errmsg);
		return -1;
	}
	if ((rc = s3_sse_w_finish(w)) < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		return -1;
	}
	return 0;
}

static void
put_respond(struct s3_req *r, const char *etag, const struct s3_body *b,
	    const struct ol_obj_info *in, const struct ol_buf *meta, const struct s3_sse *e)
{
	char q[OL_STORE_ETAG_MAX + 4];
	char hn[40], exp[400];
	struct ol_http_header h[8];
	size_t n = s3_write_version_headers(in, h, 0);
	n = s3_sse_headers(e, h, n);
	etag_quoted(etag, q, sizeof(q));
	h[n++] = (struct ol_http_header){"ETag", q};
	if (s3_lc_expiration(r, r->rt.key, r->rt.key_len, in, meta->p, meta->len, exp))
		h[n++] = (struct ol_http_header){"x-amz-expiration", exp};
	if (b && b->alg != OL_CKSUM_NONE && b->ck_b64[0]) {
		snprintf(hn, sizeof(hn), "%s", ol_cksum_header_name(b->alg));
		h[n++] = (struct ol_http_header){hn, b->ck_b64};
	}
	s3_send(r, 200, h, n, NULL, 0);
}

/* Conditional write headers (PutObject, CopyObject's destination, CompleteMultipartUpload), as
 * AWS takes them: If-None-Match: * (the key must not exist) and If-Match: "<etag>" (the key's
 * current ETag; a missing key is NoSuchKey). Any other If-None-Match is NotImplemented. The
 * store checks c again under the key's lock at commit (ol_store_cond), so this early check
 * only saves reading a body that cannot be stored. 0, or -1 with the error sent. */
int
s3_write_cond(struct s3_req *r, struct ol_store_cond *c, char etag[OL_STORE_ETAG_MAX])
{
	const char *inm = ol_http_header(r->h, "if-none-match");
	const char *im = ol_http_header(r->h, "if-match");
	struct ol_obj_info in;
	memset(c, 0, sizeof(*c));
	if (inm && strcmp(inm, "*") != 0) {
		s3_error_code(r, "NotImplemented", 501,
			      "If-None-Match on a write takes only \"*\" (create if absent); "
			      "use If-Match: \"<etag>\" to replace a known version",
			      "<Header>If-None-Match</Header>");
		return -1;
	}
	c->if_none_match = inm != NULL;
	if (im) {
		size_t l = strlen(im);
		if (l >= 2 && im[0] == '"' && im[l - 1] == '"')
			im++, l -= 2;
		snprintf(etag, OL_STORE_ETAG_MAX, "%.*s", (int)(l < OL_STORE_ETAG_MAX ? l : 0), im);
		if (l >= OL_STORE_ETAG_MAX)
			snprintf(etag, OL_STORE_ETAG_MAX, "-"); /* matches no stored ETag */
		c->if_match = etag;
	}
	if (!c->if_match && !c->if_none_match)
		return 0;
	int rc = ol_store_head(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, &in, NULL, 0);
	if (rc == 0 && c->if_none_match)
		rc = -ECANCELED;
	else if (rc == -ENOENT)
		rc = c->if_match ? -ENODATA : 0;
	else if (rc == 0 && strcmp(etag, "*") != 0 && strcasecmp(etag, in.etag) != 0)
		rc = -ECANCELED;
	if (rc == 0)
		return 0;
	s3_write_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
	return -1;
}

void
s3_put_object(struct s3_req *r)
{
	struct ol_buf meta = {0};
	struct s3_body b;
	struct ol_put *p = NULL;
	char etag[40], if_etag[OL_STORE_ETAG_MAX];
	struct ol_store_cond cond;
	struct ol_obj_info done;
	struct s3_sse_req q;
	struct s3_sse e = {0};
	struct s3_sse_w w = {0};
	struct ol_buf smeta = {0};
	r->op = "PutObject";
	memset(&b, 0, sizeof(b));
	if (s3_length_check(r, r->srv->max_object_size) < 0 || s3_user_meta_check(r) < 0 ||
	    s3_tagging_header(r, NULL, false) < 0 || s3_sse_parse(r, false, &q) < 0)
		return;
	if (!s3_bucket_exists(r) || s3_lock_write_check(r, true) < 0 ||
	    s3_write_cond(r, &cond, if_etag) < 0 || s3_sse_new(r, &q, &e, &smeta) < 0)
		goto out;
	if (s3_body_init(&b, r, r->srv->max_object_size) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	int rc =
	    ol_store_put_begin(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, b.expect, &p);
	if (rc < 0) {
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	s3_sse_w_init(&w, &e, p);
	if (put_stream(r, &w, &b) < 0)
		goto out;
	s3_meta_from_headers(r, &meta);
	s3_tagging_header(r, &meta, false); /* checked above */
	if (e.mode) {
		ol_buf_add(&meta, smeta.p, smeta.len);
		ol_buf_addf(&meta, "ol-sse-size: %llu\n", (unsigned long long)w.plain);
	}
	if (b.alg != OL_CKSUM_NONE)
		ol_s3_meta_add(&meta, ol_cksum_header_name(b.alg), b.ck_b64);
	s3_lock_write_meta(r, &meta);
	if (meta.len > OL_STORE_MAX_META - 64) {
		s3_error_code(r, "MetadataTooLarge", 400,
			      "Your metadata headers exceed the maximum allowed metadata size.",
			      NULL);
		goto out;
	}
	s3_sse_etag(&e, b.md5_raw, etag);
	ol_store_put_set_cond(p, &cond);
	ol_store_put_set_vmode(p, s3_vmode(r));
	rc = ol_store_put_commit(p, etag, meta.p, meta.len, &done);
	p = NULL;
	if (rc < 0) {
		s3_write_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	put_respond(r, etag, &b, &done, &meta, &e);
out:
	ol_store_put_abort(p);
	s3_body_fini(&b);
	ol_buf_free(&meta);
	ol_buf_free(&smeta);
	s3_sse_w_fini(&w);
	s3_sse_fini(&e);
	s3_sse_req_fini(&q);
}

/* ---- CopyObject ---- */

int
s3_copy_source(struct s3_req *r, char *bucket, size_t bcap, char *key, size_t *klen)
{
	const char *src = ol_http_header(r->h, "x-amz-copy-source");
	char dec[OL_S3_MAX_KEY + 300];
	const char *q = strstr(src, "?versionId=");
	size_t sl = q ? (size_t)(q - src) : strlen(src);
	long n = ol_s3_pct_decode(src, sl, dec, sizeof(dec), false);
	if (q && (strlen(q + 11) == 0 || strlen(q + 11) > OL_S3_MAX_VID)) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid version id specified");
		return -1;
	}
	if (n < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid copy source encoding");
		return -1;
	}
	const char *s = dec[0] == '/' ? dec + 1 : dec;
	const char *slash = strchr(s, '/');
	size_t bl = slash ? (size_t)(slash - s) : 0;
	size_t kl = slash ? strlen(slash + 1) : 0;
	if (!slash || bl == 0 || bl >= bcap || kl == 0 || kl > OL_S3_MAX_KEY) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "Copy Source must mention the source bucket "
			 "and key: sourcebucket/sourcekey");
		return -1;
	}
	memcpy(bucket, s, bl);
	bucket[bl] = '\0';
	memcpy(key, slash + 1, kl);
	key[kl] = '\0';
	*klen = kl;
	return 0;
}

/* The versionId of x-amz-copy-source into buf (NULL: none; checked by s3_copy_source). */
static const char *
copy_source_version(struct s3_req *r, char buf[OL_S3_MAX_VID + 1])
{
	const char *q = strstr(ol_http_header(r->h, "x-amz-copy-source"), "?versionId=");

	if (!q)
		return NULL;
	snprintf(buf, OL_S3_MAX_VID + 1, "%s", q + 11);
	return buf;
}

/* Open a copy source (its version if asked): false with the error sent. */
static bool
copy_source_open(struct s3_req *r, const char *sb, const char *sk, size_t skl, const char *sv,
		 struct ol_get **g, struct ol_obj_info *si)
{
	int rc = ol_store_get_open_ver(r->srv->st, sb, sk, skl, sv, g, si);

	if (rc == OL_STORE_EDELMARK || (rc == -ENOENT && si->delete_marker && !sv)) {
		/* AWS: a delete marker as source is 404 NoSuchKey, asked by id 400 */
		s3_error(r, sv ? OL_S3E_INVALID_REQUEST : OL_S3E_NO_SUCH_KEY,
			 sv ? "The source of a copy request may not specifically refer to a "
			      "delete marker by version id."
			    : NULL);
		return false;
	}
	if (rc == -EINVAL && sv) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid version id specified");
		return false;
	}
	if (rc == -ENOENT && sv) {
		s3_error_code(r, "NoSuchVersion", 404, "The specified version does not exist.",
			      NULL);
		return false;
	}
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		return false;
	}
	return true;
}

/* Copy the checksum entries of a source blob into meta (kept under REPLACE too). */
static void
meta_keep_checksums(const struct ol_obj_info *si, struct ol_buf *meta)
{
	size_t pos = 0;
	struct ol_s3_meta_kv kv;
	while (ol_s3_meta_next(si->meta, si->meta_len, &pos, &kv)) {
		if (kv.name_len > 15 && strncmp(kv.name, "x-amz-checksum-", 15) == 0)
			ol_buf_addf(meta, "%.*s: %.*s\n", (int)kv.name_len, kv.name,
				    (int)kv.value_len, kv.value);
	}
}

int
s3_copy_stream(struct s3_req *r, struct s3_sse_rd *g, uint64_t off, uint64_t len,
	       struct s3_sse_w *p, uint8_t md5[OL_CKSUM_MAX_RAW], struct ol_cksum *ck)
{
	struct ol_md5mb c;
	uint8_t *buf = ol_xmalloc(S3_IO_BUF);
	int ret = -1;
	ol_md5mb_init(&c);
	while (len > 0) {
		size_t want = len < S3_IO_BUF ? (size_t)len : S3_IO_BUF;
		ssize_t n = s3_sse_read(g, off, buf, want);
		if (n <= 0) {
			s3_store_error(r, n < 0 ? (int)n : -EIO, OL_S3E_NO_SUCH_KEY);
			goto out;
		}
		int rc = s3_sse_w_write(p, buf, (size_t)n);
		if (rc < 0) {
			s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
			goto out;
		}
		ol_md5mb_update(&c, buf, (size_t)n);
		if (ck)
			ol_cksum_update(ck, buf, (size_t)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	int rc = s3_sse_w_finish(p);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		goto out;
	}
	ol_md5mb_final(&c, md5);
	ret = 0;
out:
	free(buf);
	return ret;
}

void
s3_copy_respond(struct s3_req *r, const char *root, const char *etag, int64_t mtime_ns,
		const struct ol_obj_info *di, const struct ol_obj_info *si, const struct s3_sse *e,
		const char *ck_elem, const char *ck_val)
{
	struct ol_buf x = {0};
	struct ol_http_header h[5];
	size_t n = di ? s3_write_version_headers(di, h, 0) : 0;
	n = s3_sse_headers(e, h, n);
	char date[32], q[OL_STORE_ETAG_MAX + 4];
	ol_s3_iso_date(mtime_ns / 1000000, date);
	etag_quoted(etag, q, sizeof(q));
	ol_s3_xml_open_root(&x, root);
	ol_s3_xml_elem(&x, "LastModified", date);
	ol_s3_xml_elem(&x, "ETag", q);
	if (ck_elem)
		ol_s3_xml_elem(&x, ck_elem, ck_val);
	ol_buf_addf(&x, "</%s>", root);
	if (si && strcmp(si->version_id, "null") != 0)
		h[n++] = (struct ol_http_header){"x-amz-copy-source-version-id", si->version_id};
	s3_send(r, 200, h, n, x.p, x.len);
	ol_buf_free(&x);
}

/* The entries of a source blob into meta, less its owner and ACL (the copy is given its own),
 * the upload it came from (a copy is no upload's result), and its encryption entries unless
 * keep_sse (the same ciphertext is written again). */
static void
meta_copy_unowned(const struct ol_obj_info *si, struct ol_buf *meta, bool keep_sse)
{
	size_t pos = 0;
	struct ol_s3_meta_kv kv;
	while (ol_s3_meta_next(si->meta, si->meta_len, &pos, &kv)) {
		if ((kv.name_len == 8 && memcmp(kv.name, "ol-owner", 8) == 0) ||
		    (kv.name_len == 6 && memcmp(kv.name, "ol-acl", 6) == 0) ||
		    (kv.name_len == 9 && memcmp(kv.name, "ol-mpu-id", 9) == 0) ||
		    (!keep_sse && kv.name_len >= 6 && memcmp(kv.name, "ol-sse", 6) == 0))
			continue;
		ol_buf_add(meta, kv.name, kv.name_len);
		ol_buf_add(meta, ": ", 2);
		ol_buf_add(meta, kv.value, kv.value_len);
		ol_buf_add(meta, "\n", 1);
	}
}

/* 1 REPLACE, 0 COPY, -1 (error sent): unknown directive or a copy onto itself without
 * REPLACE. */
static int
copy_directive(struct s3_req *r, const char *sb, const char *sk, size_t skl, bool sse)
{
	const char *dir = ol_http_header(r->h, "x-amz-metadata-directive");
	bool replace = dir && strcasecmp(dir, "REPLACE") == 0;
	if (dir && !replace && strcasecmp(dir, "COPY") != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Unknown metadata directive.");
		return -1;
	}
	if (!replace && !sse && strcmp(sb, r->rt.bucket) == 0 && skl == r->rt.key_len &&
	    memcmp(sk, r->rt.key, skl) == 0) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "This copy request is illegal because it is trying to copy an object to "
			 "itself without changing the object's metadata, storage class, website "
			 "redirect location or encryption attributes.");
		return -1;
	}
	return replace;
}

void
s3_copy_object(struct s3_req *r)
{
	char sb[256], sk[OL_S3_MAX_KEY + 1], etag[40], if_etag[OL_STORE_ETAG_MAX];
	char sv[OL_S3_MAX_VID + 1];
	size_t skl;
	struct ol_get *g = NULL;
	struct ol_put *p = NULL;
	struct ol_obj_info si, di;
	struct ol_buf meta = {0};
	struct ol_store_cond cond;
	uint8_t md5[OL_CKSUM_MAX_RAW];
	struct s3_sse_req q, sq;
	struct s3_sse e = {0}, se = {0};
	struct s3_sse_rd rd = {0};
	struct s3_sse_w w = {0};
	r->op = "CopyObject";
	if (s3_sse_parse(r, false, &q) < 0)
		return;
	if (s3_sse_parse(r, true, &sq) < 0)
		goto out0;
	if (s3_copy_source(r, sb, sizeof(sb), sk, &skl) < 0 || !s3_bucket_exists(r) ||
	    s3_lock_write_check(r, false) < 0 || s3_write_cond(r, &cond, if_etag) < 0)
		goto out0;
	int replace = copy_directive(r, sb, sk, skl, q.mode != 0);
	if (replace < 0 || (replace && s3_user_meta_check(r) < 0))
		goto out0;
	si.delete_marker = 0;
	if (!copy_source_open(r, sb, sk, skl, copy_source_version(r, sv), &g, &si))
		goto out0;
	int rc;
	if (!s3_source_access(r, sb, sk, skl, si.meta, si.meta_len))
		goto out;
	if (conditionals(r, &si, true) != 0) {
		s3_error(r, OL_S3E_PRECONDITION_FAILED, NULL);
		goto out;
	}
	if (s3_sse_open(r, si.meta, si.meta_len, &sq, &se) < 0)
		goto out;
	s3_sse_rd_init(&rd, &se, g, si.size);
	si.size = rd.size;
	if (si.size > r->srv->max_object_size) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "The specified copy source is larger than the "
			 "maximum allowable size for a copy source");
		goto out;
	}
	if (replace) {
		s3_meta_from_headers(r, &meta);
		meta_keep_checksums(&si, &meta);
	} else {
		meta_copy_unowned(&si, &meta, false);
		s3_meta_add_owner(r, &meta);
	}
	const char *td = ol_http_header(r->h, "x-amz-tagging-directive");
	if (td && strcasecmp(td, "COPY") != 0 && strcasecmp(td, "REPLACE") != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Unknown tagging directive.");
		goto out;
	}
	if (td && strcasecmp(td, "REPLACE") == 0) {
		if (s3_tagging_header(r, &meta, true) < 0)
			goto out;
	} else if (replace) {
		s3_tags_copy(si.meta, si.meta_len, &meta); /* tags follow their own directive */
	}
	s3_lock_write_meta(r, &meta);	      /* the destination's own lock, never the source's */
	if (s3_sse_new(r, &q, &e, &meta) < 0) /* the request's or the bucket's, not the source's */
		goto out;
	if (e.mode)
		ol_buf_addf(&meta, "ol-sse-size: %llu\n", (unsigned long long)si.size);
	rc = ol_store_put_begin(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len,
				(int64_t)si.size, &p);
	if (rc < 0) {
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	s3_sse_w_init(&w, &e, p);
	if (s3_copy_stream(r, &rd, 0, si.size, &w, md5, NULL) < 0)
		goto out;
	s3_sse_etag(&e, md5, etag);
	ol_store_put_set_cond(p, &cond);
	ol_store_put_set_vmode(p, s3_vmode(r));
	rc = ol_store_put_commit(p, etag, meta.p, meta.len, &di);
	p = NULL;
	if (rc < 0) {
		s3_write_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	s3_copy_respond(r, "CopyObjectResult", etag, di.mtime_ns, &di, &si, &e, NULL, NULL);
out:
	ol_store_put_abort(p);
	ol_store_get_close(g);
	ol_buf_free(&meta);
	s3_sse_w_fini(&w);
	s3_sse_rd_fini(&rd);
	s3_sse_fini(&e);
	s3_sse_fini(&se);
out0:
	s3_sse_req_fini(&q);
	s3_sse_req_fini(&sq);
}

/* x-amz-copy-source-range: "bytes=first-last", both given, inside the source (a copy range is
 * never clamped to the object's end as a GET Range is). 0, or -1 with the error sent: a
 * malformed range 400 InvalidArgument, one past the source's end 416 InvalidRange. */
static int
copy_range(struct s3_req *r, const char *range, uint64_t size, uint64_t *off, uint64_t *len)
{
	char *end;
	const char *p = strncmp(range, "bytes=", 6) == 0 ? range + 6 : NULL;
	unsigned long long first = 0, last = 0;
	bool ok = p && *p >= '0' && *p <= '9';
	if (ok) {
		errno = 0;
		first = strtoull(p, &end, 10);
		ok = errno == 0 && *end == '-' && end[1] >= '0' && end[1] <= '9';
	}
	if (ok) {
		last = strtoull(end + 1, &end, 10);
		ok = errno == 0 && *end == '\0' && last >= first;
	}
	if (!ok) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "The x-amz-copy-source-range value must be of the form bytes=first-last "
			 "where first and last are the zero-based offsets of the first and last "
			 "bytes to copy");
		return -1;
	}
	if (last >= size) {
		struct ol_buf x = {0};
		char v[24];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)size);
		ol_s3_xml_elem(&x, "RangeRequested", range);
		ol_s3_xml_elem(&x, "ActualObjectSize", v);
		s3_error_code(r, "InvalidRange", 416, "The requested range is not satisfiable",
			      x.p);
		ol_buf_free(&x);
		return -1;
	}
	*off = first;
	*len = last - first + 1;
	return 0;
}

/* UploadPartCopy: x-amz-copy-source (+ x-amz-copy-source-range) into a part, encrypted as
 * the upload is (e). */
void
s3_mpu_part_copy(struct s3_req *r, struct ol_put *p, const struct s3_sse *e, enum ol_cksum_alg ca)
{
	char sb[256], sk[OL_S3_MAX_KEY + 1], etag[40], sv[OL_S3_MAX_VID + 1];
	size_t skl;
	struct ol_get *g = NULL;
	struct ol_obj_info si, di;
	uint8_t md5[OL_CKSUM_MAX_RAW];
	uint64_t off = 0, len;
	struct s3_sse_req sq = {0};
	struct s3_sse se = {0};
	struct s3_sse_rd rd = {0};
	struct s3_sse_w w = {0};
	struct ol_cksum ck = {0};
	char stored[OL_STORE_ETAG_MAX], ckb[OL_CKSUM_MAX_B64] = "", ckel[32] = "";
	r->op = "UploadPartCopy";
	if (s3_copy_source(r, sb, sizeof(sb), sk, &skl) < 0 || s3_sse_parse(r, true, &sq) < 0)
		goto out;
	si.delete_marker = 0;
	if (!copy_source_open(r, sb, sk, skl, copy_source_version(r, sv), &g, &si))
		goto out;
	int rc;
	if (!s3_source_access(r, sb, sk, skl, si.meta, si.meta_len) ||
	    s3_sse_open(r, si.meta, si.meta_len, &sq, &se) < 0)
		goto out;
	s3_sse_rd_init(&rd, &se, g, si.size);
	si.size = rd.size;
	len = si.size;
	const char *range = ol_http_header(r->h, "x-amz-copy-source-range");
	if (range && copy_range(r, range, si.size, &off, &len) < 0)
		goto out;
	if (len > S3_MAX_PART_SIZE) {
		s3_error(r, OL_S3E_ENTITY_TOO_LARGE, NULL);
		goto out;
	}
	s3_sse_w_init(&w, e, p);
	if (ca != OL_CKSUM_NONE && ol_cksum_init(&ck, ca) < 0) {
		s3_error(r, OL_S3E_INTERNAL, NULL);
		goto out;
	}
	if (s3_copy_stream(r, &rd, off, len, &w, md5, ca != OL_CKSUM_NONE ? &ck : NULL) < 0)
		goto out;
	s3_sse_etag(e, md5, etag);
	snprintf(stored, sizeof(stored), "%s", etag);
	if (ca != OL_CKSUM_NONE) { /* the upload's checksum of the part, after its ETag */
		uint8_t raw[OL_CKSUM_MAX_RAW];
		int cl = ol_cksum_final(&ck, raw);
		if (cl < 0 || ol_cksum_b64_encode(raw, (size_t)cl, ckb, sizeof(ckb)) < 0) {
			s3_error(r, OL_S3E_INTERNAL, NULL);
			goto out;
		}
		snprintf(stored, sizeof(stored), "%s %s", etag, ckb);
		snprintf(ckel, sizeof(ckel), "Checksum%s", ol_cksum_alg_name(ca));
	}
	rc = ol_store_put_commit(p, stored, NULL, 0, &di);
	p = NULL;
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	s3_copy_respond(r, "CopyPartResult", etag, di.mtime_ns, NULL, &si, e, ckel[0] ? ckel : NULL,
			ckb);
out:
	ol_cksum_fini(&ck);
	ol_store_put_abort(p);
	ol_store_get_close(g);
	s3_sse_w_fini(&w);
	s3_sse_rd_fini(&rd);
	s3_sse_fini(&se);
	s3_sse_req_fini(&sq);
}

/* ---- GET / HEAD ---- */

struct obj_headers {
	struct ol_http_header h[64];
	size_t n;
	char etag[OL_STORE_ETAG_MAX + 4], date[32], crange[80], names[32][64];
	struct ol_buf vals; /* NUL-separated copies of values */
	size_t voff[64];
	size_t nv;
};

static void
oh_add(struct obj_headers *o, const char *name, const char *v, size_t vl)
{
	if (o->n >= 56 || o->nv >= 64)
		return;
	o->voff[o->nv++] = o->vals.len;
	ol_buf_add(&o->vals, v, vl);
	ol_buf_add(&o->vals, "", 1);
	o->h[o->n++] = (struct ol_http_header){name, NULL};
}

/* Resolve value pointers once the value buffer no longer moves. */
static void
oh_fix(struct obj_headers *o)
{
	size_t vi = 0;
	for (size_t i = 0; i < o->n; i++)
		if (!o->h[i].value)
			o->h[i].value = o->vals.p + o->voff[vi++];
}

static const char *
std_name(const char *n, size_t nl)
{
	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++)
		if (strlen(std_headers[i][0]) == nl && strncmp(std_headers[i][0], n, nl) == 0)
			return std_headers[i][1];
	return NULL;
}

static const char *
response_override(struct s3_req *r, const char *std, char *buf, size_t cap)
{
	char qn[64];
	if (!r->query || !r->query[0])
		return NULL; /* most GETs: no query, so no response-* override */
	snprintf(qn, sizeof(qn), "response-%s", std);
	for (char *c = qn; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return ol_s3_query_get(r->query, qn, buf, cap) >= 0 ? buf : NULL;
}

static void
meta_headers(struct s3_req *r, const struct ol_obj_info *in, struct obj_headers *o, bool full)
{
	size_t pos = 0;
	struct ol_s3_meta_kv kv;
	bool cks = full && ol_http_header(r->h, "x-amz-checksum-mode") &&
		   strcasecmp(ol_http_header(r->h, "x-amz-checksum-mode"), "ENABLED") == 0;
	unsigned nn = 0;
	while (ol_s3_meta_next(in->meta, in->meta_len, &pos, &kv) && nn < 32) {
		const char *sn = std_name(kv.name, kv.name_len);
		bool user = kv.name_len > 11 && strncmp(kv.name, "x-amz-meta-", 11) == 0;
		bool ck = kv.name_len > 15 && strncmp(kv.name, "x-amz-checksum-", 15) == 0;
		if (!sn && !user && !(ck && cks))
			continue;
		char ov[1024];
		if (sn && response_override(r, sn, ov, sizeof(ov)))
			continue;
		if (!sn) {
			size_t l = kv.name_len < 63 ? kv.name_len : 63;
			memcpy(o->names[nn], kv.name, l);
			o->names[nn][l] = '\0';
			sn = o->names[nn++];
		}
		oh_add(o, sn, kv.value, kv.value_len);
	}
	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++) {
		char ov[1024];
		if (response_override(r, std_headers[i][1], ov, sizeof(ov)))
			oh_add(o, std_headers[i][1], ov, strlen(ov));
	}
}

static void
obj_headers_build(struct s3_req *r, const struct ol_obj_info *in, struct obj_headers *o, bool full)
{
	memset(o, 0, sizeof(*o));
	etag_quoted(in->etag, o->etag, sizeof(o->etag));
	ol_s3_http_date(in->mtime_ns / 1000000, o->date);
	o->h[o->n++] = (struct ol_http_header){"ETag", o->etag};
	o->h[o->n++] = (struct ol_http_header){"Last-Modified", o->date};
	o->h[o->n++] = (struct ol_http_header){"Accept-Ranges", "bytes"};
	struct ol_http_header vh[2];
	for (size_t i = 0, vn = s3_version_headers(r, in, vh, 0); i < vn; i++)
		oh_add(o, vh[i].name, vh[i].value, strlen(vh[i].value));
	size_t tc = s3_tag_count(in->meta, in->meta_len);
	if (tc) {
		char tcs[16];
		snprintf(tcs, sizeof(tcs), "%zu", tc);
		oh_add(o, "x-amz-tagging-count", tcs, strlen(tcs));
	}
	if (in->n_parts) {
		char pc[16];
		snprintf(pc, sizeof(pc), "%u", in->n_parts);
		oh_add(o, "x-amz-mp-parts-count", pc, strlen(pc));
	}
	const char *ln[3];
	char lv[3][40], exp[400];
	for (size_t i = 0, k = s3_lock_headers(in->meta, in->meta_len, ln, lv); i < k; i++)
		oh_add(o, ln[i], lv[i], strlen(lv[i]));
	if (!in->delete_marker &&
	    s3_lc_expiration(r, r->rt.key, r->rt.key_len, in, in->meta, in->meta_len, exp))
		oh_add(o, "x-amz-expiration", exp, strlen(exp));
	meta_headers(r, in, o, full);
}

static void
send_range_error(struct s3_req *r, uint64_t size)
{
	char cr[64];
	struct ol_buf b = {0}, res = {0};
	snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
	struct ol_http_header h[1] = {{"Content-Range", cr}};
	ol_buf_addf(&res, "/%s/%.*s", r->rt.bucket, (int)r->rt.key_len, r->rt.key);
	ol_s3_error_xml(&b, "InvalidRange", "The requested range is not satisfiable",
			ol_buf_cstr(&res), r->reqid, NULL);
	ol_buf_free(&res);
	s3_send(r, 416, h, 1, b.p, b.len);
	ol_buf_free(&b);
}

/* The next read of a GET body: at most S3_GET_BUF, ending on a shard block boundary when
 * one is in reach (the store then reads whole blocks straight into buf). SSE objects read
 * through their cipher blocks: as many bytes as fit. */
static size_t
get_step(const struct s3_sse_rd *g, uint64_t off, uint64_t len)
{
	size_t max = len < S3_GET_BUF ? (size_t)len : S3_GET_BUF;
	return g->e ? max : ol_store_get_step(g->g, off, max);
}

static int
stream_body(struct s3_req *r, struct s3_sse_rd *g, uint64_t off, uint64_t len, uint8_t *buf,
	    size_t first)
{
	int rc = ol_http_write(r->h, buf, first);
	off += first;
	len -= first;
	while (rc == 0 && len > 0) {
		size_t want = get_step(g, off, len);
		ssize_t n = s3_sse_read(g, off, buf, want);
		if (n <= 0) {
			ol_err("s3 %s: read of %s at %llu failed (%zd): closing", r->reqid,
			       r->h->target, (unsigned long long)off, n);
			return -1; /* short body: the http layer closes the connection */
		}
		rc = ol_http_write(r->h, buf, (size_t)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return rc;
}

/* Read the first block before the head goes out, so a store failure is still an S3 error
 * (503) rather than a cut-off 200; then stream the rest. 0 answered; -EAGAIN (retry) nothing
 * sent: a read-only store found the version reclaimed (overwritten or deleted meanwhile), and
 * the caller resolves the key again. */
static int
get_send(struct s3_req *r, struct s3_sse_rd *g, const struct ol_obj_info *in, struct obj_headers *o,
	 bool partial, uint64_t off, uint64_t len, bool head, bool retry)
{
	uint8_t *buf = NULL;
	size_t first = 0;
	if (!head && len > 0) {
		size_t bl = get_step(g, off, len);
		buf = ol_store_buf_get(S3_GET_BUF);
		ssize_t n = s3_sse_read(g, off, buf, bl);
		if (n <= 0) {
			ol_store_buf_put(buf, S3_GET_BUF);
			if (n == -EAGAIN && retry)
				return -EAGAIN;
			s3_store_error(r, n < 0 ? (int)n : -EIO, OL_S3E_NO_SUCH_KEY);
			return 0;
		}
		first = (size_t)n;
	}
	if (partial) {
		snprintf(o->crange, sizeof(o->crange), "bytes %llu-%llu/%llu",
			 (unsigned long long)off, (unsigned long long)(off + len - 1),
			 (unsigned long long)in->size);
		o->h[o->n++] = (struct ol_http_header){"Content-Range", o->crange};
	}
	oh_fix(o);
	o->n = s3_common_headers(r, o->h, o->n);
	r->status = partial ? 206 : 200;
	r->responded = true;
	if (ol_http_respond(r->h, r->status, o->h, o->n, (int64_t)len) == 0) {
		if (!head && len > 0)
			stream_body(r, g, off, len, buf, first);
		ol_http_finish(r->h);
	}
	ol_store_buf_put(buf, S3_GET_BUF);
	return 0;
}

/* s3_open_object; with retry, -EAGAIN (nothing sent) when the store found the version it
 * resolved reclaimed (a read-only store: overwritten or deleted meanwhile) */
static int
open_object(struct s3_req *r, struct ol_get **g, struct ol_obj_info *in, bool retry)
{
	char vb[OL_S3_MAX_VID + 1];
	const char *vid;
	if (s3_version_param(r, vb, &vid) < 0)
		return 0;
	in->delete_marker = 0;
	int rc =
	    ol_store_get_open_ver(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, vid, g, in);
	if (rc == -EAGAIN && retry)
		return -EAGAIN;
	if (rc < 0 && s3_version_error(r, rc, in, vid != NULL))
		return false;
	if (rc == -ENOENT) {
		s3_missing_key(r, OL_S3E_NO_SUCH_KEY);
		return 0;
	}
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		return 0;
	}
	if (!s3_object_access(r, in->meta, in->meta_len)) {
		ol_store_get_close(*g);
		*g = NULL;
		return 0;
	}
	return 1;
}

bool
s3_open_object(struct s3_req *r, struct ol_get **g, struct ol_obj_info *in)
{
	return open_object(r, g, in, false) == 1;
}

/* ?partNumber=N of a GET/HEAD: that part as a range (a plain object has one part, the whole
 * object). 1 with *off, *len; 0 the whole (empty) object; -2 answered (400 InvalidArgument for
 * a bad number, InvalidRequest with a Range too, InvalidPart past the last part); -3 no
 * partNumber. */
static int
part_range(struct s3_req *r, struct s3_sse_rd *g, const struct ol_obj_info *in, uint64_t *off,
	   uint64_t *len)
{
	char v[16];
	unsigned pn, n;
	uint64_t *sizes;
	if (ol_s3_query_get(r->query, "partNumber", v, sizeof(v)) == -ENOENT)
		return -3;
	if (ol_s3_parse_count(v, &pn) < 0 || pn < 1 || pn > OL_S3_MAX_PARTS) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "Part number must be an integer between 1 and 10000, inclusive");
		return -2;
	}
	if (ol_http_header(r->h, "range")) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Cannot specify both Range header and partNumber query parameter");
		return -2;
	}
	sizes = ol_xmalloc(OL_S3_MAX_PARTS * sizeof(*sizes));
	n = s3_sse_rd_parts(g, sizes, OL_S3_MAX_PARTS);
	if (pn > n || n > OL_S3_MAX_PARTS) {
		free(sizes);
		s3_error(r, OL_S3E_INVALID_PART, NULL);
		return -2;
	}
	*off = 0;
	for (unsigned i = 0; i + 1 < pn; i++)
		*off += sizes[i];
	*len = sizes[pn - 1];
	free(sizes);
	return *len > 0 ? 1 : 0;
}

/* One try of a GET or HEAD: 0 answered, -EAGAIN (retry) nothing sent (see get_send). */
static int
get_object_try(struct s3_req *r, bool head, bool retry)
{
	int ret = 0;
	struct ol_get *g = NULL;
	struct ol_obj_info in;
	struct obj_headers *o = NULL;
	uint64_t off = 0, len;
	struct s3_sse_req q;
	struct s3_sse e = {0};
	struct s3_sse_rd rd = {0};
	r->op = head ? "HeadObject" : "GetObject";
	if (s3_sse_parse(r, false, &q) < 0)
		return 0;
	if (q.mode == S3_SSE_S3 || q.mode == S3_SSE_KMS) {
		/* AWS: x-amz-server-side-encryption belongs to writes; a GET or HEAD carrying it
		 * is 400 (an SSE-S3 or SSE-KMS object is decrypted without any header) */
		struct ol_buf x = {0};
		ol_s3_xml_elem(&x, "ArgumentName", "x-amz-server-side-encryption");
		s3_error_code(
		    r, "InvalidArgument", 400,
		    "x-amz-server-side-encryption is not allowed on a GET or HEAD: an "
		    "SSE-S3 or SSE-KMS object is read without it; send the request without the "
		    "header",
		    x.p);
		ol_buf_free(&x);
		s3_sse_req_fini(&q);
		return 0;
	}
	/* the key is checked first: an SSE-C object tells nothing (not even a 304) without it */
	ret = open_object(r, &g, &in, retry);
	if (ret != 1 || s3_sse_open(r, in.meta, in.meta_len, &q, &e) < 0)
		goto out;
	ret = 0;
	int cond = conditionals(r, &in, false);
	if (cond == 412) {
		s3_error(r, OL_S3E_PRECONDITION_FAILED, NULL);
		goto out;
	}
	s3_sse_rd_init(&rd, &e, g, in.size);
	in.size = rd.size;
	int rr = part_range(r, &rd, &in, &off, &len);
	if (rr == -2)
		goto out; /* answered */
	if (rr == -3)
		rr = ol_s3_range_parse(ol_http_header(r->h, "range"), in.size, &off, &len);
	if (rr == 0)
		len = in.size;
	o = ol_xmalloc(sizeof(*o));
	obj_headers_build(r, &in, o, rr == 0);
	struct ol_http_header sh[2];
	for (size_t i = 0, sn = s3_sse_headers(&e, sh, 0); i < sn; i++)
		oh_add(o, sh[i].name, sh[i].value, strlen(sh[i].value));
	if (cond == 304) {
		oh_fix(o);
		s3_send(r, 304, o->h, o->n, NULL, 0);
		goto out;
	}
	if (rr < 0) {
		send_range_error(r, in.size);
		goto out;
	}
	ret = get_send(r, &rd, &in, o, rr == 1, off, len, head, retry);
out:
	if (o)
		ol_buf_free(&o->vals);
	free(o);
	s3_sse_rd_fini(&rd);
	ol_store_get_close(g);
	s3_sse_fini(&e);
	s3_sse_req_fini(&q);
	return ret == -EAGAIN ? -EAGAIN : 0;
}

/* A read-only store's version reclaimed before the first byte went out: the key is resolved
 * once more (its new version, or its absence); a second miss answers 503. */
static void
get_object(struct s3_req *r, bool head)
{
	if (get_object_try(r, head, true) == -EAGAIN)
		(void)get_object_try(r, head, false);
}

void
s3_head_object(struct s3_req *r)
{
	get_object(r, true);
}

/* ---- DELETE ---- */

void
s3_delete_object(struct s3_req *r)
{
	char vb[OL_S3_MAX_VID + 1];
	const char *vid;
	struct ol_obj_info out;
	struct ol_http_header h[2];
	size_t n = 0;
	r->op = "DeleteObject";
	if (s3_version_param(r, vb, &vid) < 0)
		return;
	if (s3_lock_delete_check(r, r->rt.key, r->rt.key_len, vid) < 0) {
		s3_lock_denied(r);
		return;
	}
	int rc = ol_store_delete_ver(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len,
				     s3_vmode(r), vid, &out);
	if (rc == -EINVAL && vid) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid version id specified");
		return;
	}
	if (rc < 0 && rc != -ENOENT) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		return;
	}
	if (rc == 0 && vid && !out.delete_marker)
		h[n++] = (struct ol_http_header){"x-amz-version-id", vid};
	else if (rc == 0 && (vid || out.delete_marker))
		n = s3_version_headers(r, &out, h, 0);
	s3_send(r, 204, h, n, NULL, 0);
}

/* ---- ACL ---- */

void
s3_get_object_acl(struct s3_req *r)
{
	struct ol_get *g = NULL;
	struct ol_obj_info in;
	struct ol_acl a;
	struct ol_buf x = {0};
	r->op = "GetAcl";
	if (!s3_open_object(r, &g, &in))
		return;
	s3_object_acl(r, in.meta, in.meta_len, &a);
	ol_acl_xml(&a, &x);
	s3_send_xml(r, 200, &x);
	ol_store_get_close(g);
}

/* The ACL of one version (versionId, else the current one) replaced in its metadata blob in
 * place, as AWS changes it: the data, ETag, version id and Last-Modified stay, and a versioned
 * bucket is given no new version. The blob is written only if the version read is still there
 * (its mtime, under the key's lock): one rewritten meanwhile answers 409 OperationAborted. */
void
s3_put_object_acl(struct s3_req *r)
{
	struct ol_get *g = NULL;
	struct ol_obj_info in;
	struct ol_acl old, a;
	struct ol_buf meta = {0}, enc = {0};
	char vb[OL_S3_MAX_VID + 1];
	const char *vid;
	r->op = "PutAcl";
	if (s3_version_param(r, vb, &vid) < 0 || !s3_open_object(r, &g, &in))
		return;
	s3_object_acl(r, in.meta, in.meta_len, &old);
	if (s3_acl_from_request(r, old.owner, &a) < 0)
		goto out;
	meta_copy_unowned(&in, &meta, true);
	ol_s3_meta_add(&meta, "ol-owner", old.owner);
	ol_acl_encode(&a, &enc);
	ol_s3_meta_add(&meta, "ol-acl", ol_buf_cstr(&enc));
	int rc = ol_store_set_meta_if(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, vid,
				      in.mtime_ns, meta.p, meta.len);
	if (rc == -ECANCELED) {
		s3_error_code(
		    r, "OperationAborted", 409,
		    "A conflicting conditional operation is currently in progress against "
		    "this resource. Please try again.",
		    NULL);
		goto out;
	}
	if (rc < 0) {
		if (!s3_version_error(r, rc, &in, vid != NULL))
			s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
		goto out;
	}
	struct ol_http_header h[2];
	s3_send(r, 200, h, s3_version_headers(r, &in, h, 0), NULL, 0);
out:
	ol_store_get_close(g);
	ol_buf_free(&meta);
	ol_buf_free(&enc);
}

bool
s3_object_sub_unsupported(struct s3_req *r)
{
	static const char *const subs[] = {"torrent", "restore", "select"};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (!ol_s3_query_has(r->query, subs[i]))
			continue;
		s3_error(r, OL_S3E_NOT_IMPLEMENTED, NULL);
		return true;
	}
	return false;
}

void
s3_get_object(struct s3_req *r)
{
	get_object(r, false);
}
