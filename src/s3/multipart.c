/* s3/multipart.c - CreateMultipartUpload, UploadPart(Copy), CompleteMultipartUpload,
 * AbortMultipartUpload, ListParts, ListMultipartUploads. */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/hex.h"

#include <openssl/crypto.h>

static int
upload_id(struct s3_req *r, char *id, size_t cap)
{
	long n = ol_s3_query_get(r->query, "uploadId", id, cap);
	if (n <= 0) {
		s3_error(r, OL_S3E_NO_SUCH_UPLOAD, NULL);
		return -1;
	}
	return 0;
}

/* The upload must exist and belong to this key. meta (may be NULL): its metadata blob,
 * malloc'd (the caller frees). 0, or -1 with the error sent. */
static int
upload_find(struct s3_req *r, const char *id, char **meta, size_t *mlen, bool gone_quiet)
{
	char key[OL_STORE_MAX_KEY + 1];
	size_t kl = 0, ml = 0;
	char *buf = meta ? ol_xmalloc(OL_STORE_MAX_META + 1) : NULL;
	int rc = ol_store_mpu_stat(r->srv->st, r->rt.bucket, id, key, &kl, buf,
				   buf ? OL_STORE_MAX_META : 0, &ml);
	if (rc < 0) {
		free(buf);
		if (rc == -ENOENT && gone_quiet)
			return -ENOENT;
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		return -1;
	}
	if (kl != r->rt.key_len || memcmp(key, r->rt.key, kl) != 0) {
		free(buf);
		s3_error(r, OL_S3E_NO_SUCH_UPLOAD, NULL);
		return -1;
	}
	if (meta) {
		*meta = buf;
		*mlen = ml < OL_STORE_MAX_META ? ml : OL_STORE_MAX_META;
	}
	return 0;
}

static int
upload_check_meta(struct s3_req *r, const char *id, char **meta, size_t *mlen)
{
	return upload_find(r, id, meta, mlen, false);
}

static int
upload_check(struct s3_req *r, const char *id)
{
	return upload_check_meta(r, id, NULL, NULL);
}

/* The object a completed upload became names the upload (not copied by CopyObject), so that a
 * CompleteMultipartUpload sent again is answered as the first one was. */
#define MPU_ID_META "ol-mpu-id"

/* Flexible checksums of an upload: its algorithm (CreateMultipartUpload's
 * x-amz-checksum-algorithm) is kept in its meta; each part's checksum follows the part's MD5
 * ETag in the part's stored ETag, after a space ("<md5 hex> <base64>"): the store keeps no
 * other per-part metadata. */
#define CK_ALG_META "ol-ck-alg"

static enum ol_cksum_alg
upload_ck_alg(const char *meta, size_t len)
{
	const char *v;
	char name[16];
	long n = meta ? ol_s3_meta_get(meta, len, CK_ALG_META, &v) : -ENOENT;
	if (n <= 0 || n >= (long)sizeof(name))
		return OL_CKSUM_NONE;
	memcpy(name, v, (size_t)n);
	name[n] = '\0';
	return ol_cksum_from_name(name);
}

/* Length of the ETag part of a stored part ETag; *ck: its checksum ("" when none). */
static size_t
part_etag_len(const char *stored, const char **ck)
{
	size_t l = strcspn(stored, " ");
	*ck = stored[l] ? stored + l + 1 : "";
	return l;
}

/* <Initiator> and <Owner> of an upload: the user who started it (the ol-owner of its blob,
 * which the object complete makes keeps; none: the bucket's owner). */
static void
initiator_xml(struct ol_buf *x, struct s3_req *r, const char *meta, size_t len)
{
	const char *v = NULL;
	long n = meta ? ol_s3_meta_get(meta, len, "ol-owner", &v) : -1;
	if (n <= 0) {
		v = s3_bucket_owner(r);
		n = (long)strlen(v);
	}
	for (int i = 0; i < 2; i++) {
		ol_buf_adds(x, i ? "<Owner><ID>" : "<Initiator><ID>");
		ol_s3_xml_esc(x, v, (size_t)n);
		ol_buf_adds(x, "</ID><DisplayName>");
		ol_s3_xml_esc(x, v, (size_t)n);
		ol_buf_adds(x, i ? "</DisplayName></Owner>" : "</DisplayName></Initiator>");
	}
}

static void
result_head(struct ol_buf *x, struct s3_req *r, const char *root)
{
	ol_s3_xml_open_root(x, root);
	ol_s3_xml_elem(x, "Bucket", r->rt.bucket);
	ol_s3_xml_elemn(x, "Key", r->rt.key, r->rt.key_len);
}

void
s3_mpu_create(struct s3_req *r)
{
	struct ol_buf meta = {0}, x = {0};
	char id[64];
	struct s3_sse_req q;
	struct s3_sse e = {0};
	r->op = "CreateMultipartUpload";
	if (s3_sse_parse(r, false, &q) < 0)
		return;
	if (s3_user_meta_check(r) < 0 || !s3_bucket_exists(r) || s3_lock_write_check(r, false) < 0)
		goto out;
	s3_meta_from_headers(r, &meta);
	if (s3_tagging_header(r, &meta, false) < 0 || s3_sse_new(r, &q, &e, &meta) < 0)
		goto out;
	s3_lock_write_meta(r, &meta);
	const char *alg = ol_http_header(r->h, "x-amz-checksum-algorithm");
	enum ol_cksum_alg ca = alg ? ol_cksum_from_name(alg) : OL_CKSUM_NONE;
	if (alg && ca == OL_CKSUM_NONE) {
		s3_error(r, OL_S3E_INVALID_REQUEST, "Checksum algorithm provided is unsupported.");
		goto out;
	}
	if (ca != OL_CKSUM_NONE) /* every part carries one; complete makes the composite */
		ol_s3_meta_add(&meta, CK_ALG_META, ol_cksum_alg_name(ca));
	int rc = ol_store_mpu_create(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, meta.p,
				     meta.len, id);
	if (rc < 0) {
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	result_head(&x, r, "InitiateMultipartUploadResult");
	ol_s3_xml_elem(&x, "UploadId", id);
	ol_buf_adds(&x, "</InitiateMultipartUploadResult>");
	struct ol_http_header h[3];
	size_t nh = s3_sse_headers(&e, h, 0);
	if (ca != OL_CKSUM_NONE)
		h[nh++] =
		    (struct ol_http_header){"x-amz-checksum-algorithm", ol_cksum_alg_name(ca)};
	s3_send(r, 200, h, nh, x.p, x.len);
	ol_buf_free(&x);
out:
	ol_buf_free(&meta);
	s3_sse_fini(&e);
	s3_sse_req_fini(&q);
}

static int
part_number(struct s3_req *r, unsigned *pn)
{
	char v[16], *end;
	if (ol_s3_query_get(r->query, "partNumber", v, sizeof(v)) <= 0)
		goto bad;
	unsigned long n = strtoul(v, &end, 10);
	if (*end || n < 1 || n > OL_S3_MAX_PARTS)
		goto bad;
	*pn = (unsigned)n;
	return 0;
bad:
	s3_error(r, OL_S3E_INVALID_ARGUMENT,
		 "Part number must be an integer between 1 and "
		 "10000, inclusive");
	return -1;
}

static void
part_upload(struct s3_req *r, struct ol_put *p, const struct s3_sse *e, enum ol_cksum_alg ca)
{
	struct s3_body b;
	const uint8_t *d;
	size_t n;
	char etag[40], q[44], stored[OL_STORE_ETAG_MAX];
	int rc;
	struct s3_sse_w w;
	s3_sse_w_init(&w, e, p);
	if (s3_body_init(&b, r, S3_MAX_PART_SIZE) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (ca != OL_CKSUM_NONE && b.alg == OL_CKSUM_NONE) { /* computed here when not sent */
		b.alg = ca;
		if (ol_cksum_init(&b.ck, ca) < 0) {
			s3_error(r, OL_S3E_INTERNAL, NULL);
			goto out;
		}
	} else if (ca != OL_CKSUM_NONE && b.alg != ca) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "Checksum Type mismatch occurred, expected checksum Type: %s, actual "
			 "checksum Type: %s",
			 ol_cksum_alg_name(ca), ol_cksum_alg_name(b.alg));
		s3_error(r, OL_S3E_INVALID_REQUEST, msg);
		goto out;
	}
	while ((rc = s3_body_next(&b, &d, &n)) > 0) {
		int wr = s3_sse_w_write(&w, d, n);
		if (wr < 0) {
			s3_store_error(r, wr, OL_S3E_NO_SUCH_UPLOAD);
			goto out;
		}
	}
	if (rc < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if ((rc = s3_sse_w_finish(&w)) < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	s3_sse_etag(e, b.md5_raw, etag);
	snprintf(stored, sizeof(stored), "%s%s%s", etag, ca != OL_CKSUM_NONE ? " " : "",
		 ca != OL_CKSUM_NONE ? b.ck_b64 : "");
	rc = ol_store_put_commit(p, stored, NULL, 0, NULL);
	p = NULL;
	if (rc < 0) { /* a write: a commit the cluster's leader did not take is SlowDown */
		s3_write_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	snprintf(q, sizeof(q), "\"%s\"", etag);
	struct ol_http_header h[4] = {{"ETag", q}};
	size_t nh = 1;
	if (b.alg != OL_CKSUM_NONE)
		h[nh++] = (struct ol_http_header){ol_cksum_header_name(b.alg), b.ck_b64};
	nh = s3_sse_headers(e, h, nh);
	s3_send(r, 200, h, nh, NULL, 0);
out:
	ol_store_put_abort(p);
	s3_body_fini(&b);
	s3_sse_w_fini(&w);
}

void
s3_mpu_part(struct s3_req *r)
{
	char id[128], *um = NULL;
	size_t uml = 0;
	unsigned pn;
	struct ol_put *p = NULL;
	struct s3_sse_req q;
	struct s3_sse e = {0};
	r->op = "UploadPart";
	if (s3_sse_parse(r, false, &q) < 0)
		return;
	if (!s3_bucket_exists(r) || upload_id(r, id, sizeof(id)) < 0 || part_number(r, &pn) < 0)
		goto out;
	bool copy = ol_http_header(r->h, "x-amz-copy-source") != NULL;
	if (!copy && s3_length_check(r, S3_MAX_PART_SIZE) < 0)
		goto out;
	/* the part is encrypted as the upload is: its key (SSE-C: the same customer key) */
	if (upload_check_meta(r, id, &um, &uml) < 0 || s3_sse_open(r, um, uml, &q, &e) < 0)
		goto out;
	int rc = ol_store_mpu_part_begin(r->srv->st, r->rt.bucket, id, pn, &p);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	if (copy)
		s3_mpu_part_copy(r, p, &e, upload_ck_alg(um, uml));
	else
		part_upload(r, p, &e, upload_ck_alg(um, uml));
out:
	free(um);
	s3_sse_fini(&e);
	s3_sse_req_fini(&q);
}

/* Validate the Complete list against the uploaded parts; computes the final ETag. */
/* The multipart ETag of the parts c lists ("<md5 of their MD5s>-N") into etag, from the ETags
 * the request gives. 0, or -1 when one is not an MD5's 32 hex digits. */
static int
listed_etag(const struct ol_s3_complete_req *c, char etag[64])
{
	struct ol_cksum md5;
	uint8_t raw[OL_CKSUM_MAX_RAW];
	ol_cksum_init(&md5, OL_CKSUM_MD5);
	for (unsigned i = 0; i < c->n_parts; i++) {
		if (strlen(c->parts[i].etag) != 32 || ol_hex_decode(c->parts[i].etag, 16, raw)) {
			ol_cksum_fini(&md5);
			return -1;
		}
		ol_cksum_update(&md5, raw, 16);
	}
	ol_cksum_final(&md5, raw);
	ol_hex_encode(raw, 16, etag);
	snprintf(etag + 32, 32, "-%u", c->n_parts);
	return 0;
}

static int
complete_check(struct s3_req *r, const struct ol_s3_complete_req *c,
	       const struct ol_mpu_part *parts, size_t np, unsigned *nums, char etag[64])
{
	size_t j = 0;
	for (unsigned i = 1; i < c->n_parts; i++) {
		if (c->parts[i].number <= c->parts[i - 1].number) {
			s3_error(r, OL_S3E_INVALID_PART_ORDER, NULL);
			return -1;
		}
	}
	for (unsigned i = 0; i < c->n_parts; i++) {
		const struct ol_s3_part_ref *pr = &c->parts[i];
		while (j < np && parts[j].part_no < pr->number)
			j++;
		const char *ck = "";
		size_t el = j < np ? part_etag_len(parts[j].etag, &ck) : 0;
		if (j == np || parts[j].part_no != pr->number || strlen(pr->etag) != el ||
		    strncasecmp(parts[j].etag, pr->etag, el) != 0 || el != 32 ||
		    (pr->ck_name[0] && strcmp(pr->checksum, ck) != 0)) {
			s3_error(r, OL_S3E_INVALID_PART, NULL);
			return -1;
		}
		if (i + 1 < c->n_parts && parts[j].size < S3_MIN_PART_SIZE) {
			s3_error(r, OL_S3E_ENTITY_TOO_SMALL, NULL);
			return -1;
		}
		nums[i] = pr->number;
	}
	/* the listed ETags are the stored parts' (checked above) */
	if (listed_etag(c, etag) < 0) {
		s3_error(r, OL_S3E_INVALID_PART, NULL);
		return -1;
	}
	return 0;
}

static void
complete_respond(struct s3_req *r, const char *etag, const struct ol_obj_info *out,
		 const struct s3_sse *e, enum ol_cksum_alg ca, const char *cks)
{
	struct ol_buf x = {0}, loc = {0};
	struct ol_http_header h[4];
	size_t n = s3_write_version_headers(out, h, 0);
	n = s3_sse_headers(e, h, n);
	ol_s3_xml_open_root(&x, "CompleteMultipartUploadResult");
	ol_buf_addf(&loc, "/%s/", r->rt.bucket);
	ol_s3_url_encode(&loc, r->rt.key, r->rt.key_len);
	ol_s3_xml_elem(&x, "Location", ol_buf_cstr(&loc));
	ol_s3_xml_elem(&x, "Bucket", r->rt.bucket);
	ol_s3_xml_elemn(&x, "Key", r->rt.key, r->rt.key_len);
	ol_buf_addf(&x, "<ETag>&quot;%s&quot;</ETag>", etag);
	if (cks[0]) {
		char el[32];
		snprintf(el, sizeof(el), "Checksum%s", ol_cksum_alg_name(ca));
		ol_s3_xml_elem(&x, el, cks);
	}
	ol_buf_adds(&x, "</CompleteMultipartUploadResult>");
	ol_buf_free(&loc);
	s3_send(r, 200, h, n, x.p, x.len);
	ol_buf_free(&x);
}

/* The composite checksum of the completed parts ("BASE64-N": alg over their raw checksums)
 * into out; "" when a part has none (uploaded before the algorithm was known: not possible
 * today, kept for safety). 0, or -1 with the error sent. */
static int
composite(struct s3_req *r, enum ol_cksum_alg ca, const struct ol_s3_complete_req *c,
	  const struct ol_mpu_part *parts, size_t np, char out[OL_CKSUM_MAX_B64])
{
	struct ol_cksum_composite cc;
	uint8_t raw[OL_CKSUM_MAX_RAW];
	out[0] = '\0';
	if (ol_cksum_composite_init(&cc, ca) < 0)
		goto fail;
	for (unsigned i = 0, j = 0; i < c->n_parts; i++) {
		const char *ck;
		while (j < np && parts[j].part_no != c->parts[i].number)
			j++;
		if (j == np)
			break;
		part_etag_len(parts[j].etag, &ck);
		int n = ol_cksum_b64_decode(ck, strlen(ck), raw, sizeof(raw));
		if (!ck[0] || n != (int)ol_cksum_len(ca)) {
			ol_cksum_fini(&cc.c);
			return 0;
		}
		if (ol_cksum_composite_add(&cc, raw, (size_t)n) < 0) {
			ol_cksum_fini(&cc.c);
			goto fail;
		}
	}
	if (ol_cksum_composite_final(&cc, out, OL_CKSUM_MAX_B64) < 0)
		goto fail;
	return 0;
fail:
	out[0] = '\0';
	s3_error(r, OL_S3E_INTERNAL, NULL);
	return -1;
}

/* The parts' checksums in part order, for GetObjectAttributes: "ol-part-cks: b64,b64,...",
 * left out when the list would pass PART_CKS_MAX (some 360 SHA-256 parts): the metadata blob
 * is capped at 64 KiB. */
#define PART_CKS_MAX (16u * 1024)
static void
part_checksums_meta(const struct ol_s3_complete_req *c, const struct ol_mpu_part *parts, size_t np,
		    struct ol_buf *meta)
{
	struct ol_buf l = {0};
	for (unsigned i = 0, j = 0; i < c->n_parts && l.len <= PART_CKS_MAX; i++) {
		const char *ck;
		while (j < np && parts[j].part_no != c->parts[i].number)
			j++;
		if (j == np)
			break;
		part_etag_len(parts[j].etag, &ck);
		ol_buf_addf(&l, "%s%s", i ? "," : "", ck);
	}
	if (l.len && l.len <= PART_CKS_MAX)
		ol_s3_meta_add(meta, "ol-part-cks", ol_buf_cstr(&l));
	ol_buf_free(&l);
}

/* The key-MD5 an SSE-C upload's complete answers with: the request's key-MD5 header, else the
 * MD5 of its key header (older SDKs send the key without its MD5 on this call; AWS needs the
 * key here only for uploads with checksums, and the parts were checked with it). 0 or -1. */
static int
complete_key_md5(struct s3_req *r, char out[32])
{
	const char *m = ol_http_header(r->h, "x-amz-server-side-encryption-customer-key-md5");
	const char *k = ol_http_header(r->h, "x-amz-server-side-encryption-customer-key");
	uint8_t raw[48], dg[OL_CKSUM_MAX_RAW];
	if (m && strlen(m) < 32) {
		snprintf(out, 32, "%s", m);
		return 0;
	}
	if (!k || ol_cksum_b64_decode(k, strlen(k), raw, sizeof(raw)) != 32)
		return -1;
	ol_cksum_compute(OL_CKSUM_MD5, raw, 32, dg);
	OPENSSL_cleanse(raw, sizeof(raw));
	return ol_cksum_b64_encode(dg, 16, out, 32) < 0 ? -1 : 0;
}

/* CompleteMultipartUpload of an upload that is gone: S3 answers one sent again after a success
 * (an SDK retries when the first answer was lost) as it answered the first, where saying
 * NoSuchUpload would fail an upload that landed. The key's current version came from this
 * upload (its MPU_ID_META) and the request lists the same parts (their multipart ETag is the
 * object's): answer 200 as complete_respond did (ETag, version id, checksum, SSE headers), and
 * return true; else false with nothing sent. req: the request's part list when it was read
 * (NULL: read it now). Conditions (If-Match, If-None-Match) are not looked at again: the first
 * call passed them. */
static bool
complete_again(struct s3_req *r, const char *id, const struct ol_s3_complete_req *req)
{
	struct ol_obj_info info;
	char *mb = ol_xmalloc(OL_STORE_MAX_META + 1), *body = NULL, etag[64];
	const char *v;
	size_t len;
	struct s3_body b;
	struct ol_s3_complete_req c = {0};
	struct s3_sse e = {0};
	bool done = false;
	memset(&b, 0, sizeof(b));
	if (ol_store_head(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, &info, mb,
			  OL_STORE_MAX_META) < 0 ||
	    info.delete_marker)
		goto out;
	size_t ml = info.meta_len < OL_STORE_MAX_META ? info.meta_len : OL_STORE_MAX_META;
	long n = ol_s3_meta_get(mb, ml, MPU_ID_META, &v);
	if (n < 0 || (size_t)n != strlen(id) || memcmp(v, id, (size_t)n) != 0)
		goto out;
	if (!req && (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0 ||
		     ol_s3_parse_complete(body, len, &c) < 0))
		goto out;
	if (listed_etag(req ? req : &c, etag) < 0 || strcasecmp(etag, info.etag) != 0)
		goto out;
	enum ol_cksum_alg ca = upload_ck_alg(mb, ml);
	char cks[OL_CKSUM_MAX_B64] = "";
	if (ca != OL_CKSUM_NONE && (n = ol_s3_meta_get(mb, ml, ol_cksum_header_name(ca), &v)) > 0 &&
	    (size_t)n < sizeof(cks))
		snprintf(cks, sizeof(cks), "%.*s", (int)n, v);
	s3_sse_meta_info(mb, ml, &e);
	if (e.mode == S3_SSE_C && complete_key_md5(r, e.ckey_md5) < 0)
		e.mode = S3_SSE_NONE;
	complete_respond(r, info.etag, &info, &e, ca, cks);
	done = true;
out:
	s3_sse_fini(&e);
	ol_s3_complete_free(&c);
	free(body);
	s3_body_fini(&b);
	free(mb);
	return done;
}

void
s3_mpu_complete(struct s3_req *r)
{
	char id[128], etag[64], *body = NULL, if_etag[OL_STORE_ETAG_MAX], *um = NULL;
	char cks[OL_CKSUM_MAX_B64] = "";
	size_t len, np = 0, uml = 0;
	struct ol_buf meta = {0};
	struct s3_sse e = {0};
	struct s3_body b;
	struct ol_s3_complete_req c = {0};
	struct ol_mpu_part *parts = NULL;
	struct ol_obj_info done;
	struct ol_store_cond cond;
	unsigned *nums = NULL;
	r->op = "CompleteMultipartUpload";
	memset(&b, 0, sizeof(b));
	if (!s3_bucket_exists(r) || upload_id(r, id, sizeof(id)) < 0)
		goto out;
	int rc = upload_find(r, id, &um, &uml, true);
	if (rc == -ENOENT && !complete_again(r, id, NULL))
		s3_error(r, OL_S3E_NO_SUCH_UPLOAD, NULL);
	if (rc < 0 || s3_write_cond(r, &cond, if_etag) < 0)
		goto out;
	s3_sse_meta_info(um, uml, &e);
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (ol_s3_parse_complete(body, len, &c) < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	rc = ol_store_mpu_list_parts(r->srv->st, r->rt.bucket, id, &parts, &np);
	if (rc < 0) {
		if (!(rc == -ENOENT && complete_again(r, id, &c))) /* completed meanwhile */
			s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	for (size_t i = 0; e.mode && i < np; i++) /* sizes as S3 shows them: the plaintext's */
		parts[i].size = s3_sse_plain_len(parts[i].size);
	nums = ol_xcalloc(c.n_parts, sizeof(unsigned));
	if (complete_check(r, &c, parts, np, nums, etag) < 0)
		goto out;
	enum ol_cksum_alg ca = upload_ck_alg(um, uml);
	if (ca != OL_CKSUM_NONE && composite(r, ca, &c, parts, np, cks) < 0)
		goto out;
	ol_buf_add(&meta, um, uml); /* the object's meta: the upload's plus what complete adds */
	ol_s3_meta_add(&meta, MPU_ID_META, id);
	if (cks[0]) {
		ol_s3_meta_add(&meta, ol_cksum_header_name(ca), cks);
		part_checksums_meta(&c, parts, np, &meta);
	}
	if (e.mode) {
		/* the plaintext size */
		uint64_t total = 0;
		for (size_t i = 0, j = 0; i < c.n_parts; i++) {
			while (parts[j].part_no != nums[i])
				j++;
			total += parts[j].size;
		}
		ol_buf_addf(&meta, "ol-sse-size: %llu\n", (unsigned long long)total);
		if (e.mode == S3_SSE_C && complete_key_md5(r, e.ckey_md5) < 0)
			e.mode = S3_SSE_NONE; /* no key sent: the SSE-C headers are left out */
	}
	rc = ol_store_mpu_complete_meta(r->srv->st, r->rt.bucket, id, nums, c.n_parts, etag, &cond,
					s3_vmode(r), meta.len ? meta.p : NULL, meta.len, &done);
	/* -ENOENT: another call of the same upload completed it meanwhile (a retry sent while
	 * the first was still at work): answered as that one when it is that one's */
	if (rc < 0 && !(rc == -ENOENT && complete_again(r, id, &c))) {
		s3_write_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		goto out;
	}
	if (rc >= 0)
		complete_respond(r, etag, &done, &e, ca, cks);
out:
	free(um);
	ol_buf_free(&meta);
	s3_sse_fini(&e);
	free(nums);
	free(parts);
	ol_s3_complete_free(&c);
	free(body);
	s3_body_fini(&b);
}

void
s3_mpu_abort(struct s3_req *r)
{
	char id[128];
	r->op = "AbortMultipartUpload";
	if (upload_id(r, id, sizeof(id)) < 0 || upload_check(r, id) < 0)
		return;
	int rc = ol_store_mpu_abort(r->srv->st, r->rt.bucket, id);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		return;
	}
	s3_send(r, 204, NULL, 0, NULL, 0);
}

/* A count parameter into *out (dflt when absent, capped at max): 0, or -1 with
 * InvalidArgument sent for anything but a non-negative integer (as AWS answers). */
static int
query_uint(struct s3_req *r, const char *name, unsigned dflt, unsigned max, unsigned *out)
{
	char v[16], msg[160];
	unsigned n;
	long l = ol_s3_query_get(r->query, name, v, sizeof(v));
	*out = dflt;
	if (l == -ENOENT)
		return 0;
	if (l < 0 || ol_s3_parse_count(v, &n) < 0) {
		snprintf(msg, sizeof(msg),
			 "Provided %s not an integer or within integer range: give a whole number "
			 "from 0 to 2147483647",
			 name);
		s3_error(r, OL_S3E_INVALID_ARGUMENT, msg);
		return -1;
	}
	*out = n > max ? max : n;
	return 0;
}

void
s3_mpu_list_parts(struct s3_req *r)
{
	char id[128], date[32];
	struct ol_mpu_part *parts = NULL;
	size_t np = 0, i;
	struct ol_buf x = {0};
	char *um = NULL;
	size_t uml = 0;
	r->op = "ListParts";
	if (upload_id(r, id, sizeof(id)) < 0 || upload_check_meta(r, id, &um, &uml) < 0)
		return;
	bool enc = s3_sse_meta_mode(um, uml) != 0;
	enum ol_cksum_alg ca = upload_ck_alg(um, uml);
	struct ol_buf who = {0};
	initiator_xml(&who, r, um, uml);
	free(um);
	unsigned max, marker;
	if (query_uint(r, "max-parts", 1000, 1000, &max) < 0 ||
	    query_uint(r, "part-number-marker", 0, OL_S3_MAX_PARTS, &marker) < 0) {
		ol_buf_free(&who);
		return;
	}
	int rc = ol_store_mpu_list_parts(r->srv->st, r->rt.bucket, id, &parts, &np);
	if (rc < 0) {
		ol_buf_free(&who);
		s3_store_error(r, rc, OL_S3E_NO_SUCH_UPLOAD);
		return;
	}
	result_head(&x, r, "ListPartsResult");
	ol_s3_xml_elem(&x, "UploadId", id);
	ol_s3_xml_elemu(&x, "PartNumberMarker", marker);
	struct ol_buf body = {0};
	unsigned count = 0, last = 0;
	for (i = 0; i < np && count < max; i++) {
		if (parts[i].part_no <= marker)
			continue;
		ol_s3_iso_date(parts[i].mtime_ns / 1000000, date);
		ol_buf_addf(&body, "<Part><PartNumber>%u</PartNumber>", parts[i].part_no);
		ol_s3_xml_elem(&body, "LastModified", date);
		const char *ck;
		size_t el = part_etag_len(parts[i].etag, &ck);
		ol_buf_addf(&body, "<ETag>&quot;%.*s&quot;</ETag>", (int)el, parts[i].etag);
		if (ca != OL_CKSUM_NONE && ck[0])
			ol_buf_addf(&body, "<Checksum%s>%s</Checksum%s>", ol_cksum_alg_name(ca), ck,
				    ol_cksum_alg_name(ca));
		ol_buf_addf(
		    &body, "<Size>%llu</Size></Part>",
		    (unsigned long long)(enc ? s3_sse_plain_len(parts[i].size) : parts[i].size));
		count++;
		last = parts[i].part_no;
	}
	bool trunc = false;
	for (; i < np; i++)
		trunc |= parts[i].part_no > last;
	ol_s3_xml_elemu(&x, "NextPartNumberMarker", last);
	ol_s3_xml_elemu(&x, "MaxParts", max);
	ol_s3_xml_elem(&x, "IsTruncated", trunc ? "true" : "false");
	ol_buf_add(&x, who.p, who.len);
	ol_buf_free(&who);
	ol_buf_adds(&x, "<StorageClass>STANDARD</StorageClass>");
	if (body.len)
		ol_buf_add(&x, body.p, body.len);
	ol_buf_free(&body);
	ol_buf_adds(&x, "</ListPartsResult>");
	free(parts);
	s3_send_xml(r, 200, &x);
}

/* ListMultipartUploads: uploads in (key, upload id) order after the markers (key-marker
 * alone: keys above it; with upload-id-marker: that key's uploads above the id too), keys
 * holding the delimiter after the prefix rolled into CommonPrefixes (one entry each, and one
 * not above key-marker is skipped: a NextKeyMarker that named a common prefix), up to
 * max-uploads entries of either kind; encoding-type=url encodes the keys and prefixes. */
struct mpu_list_ctx {
	struct s3_req *r;
	struct ol_buf *x, *cps;
	const char *prefix, *delim, *kmark, *imark;
	size_t prefix_len, delim_len, kmark_len;
	unsigned count, max;
	bool truncated, url;
	char last[OL_S3_MAX_KEY + 1]; /* the last entry listed: key or common prefix */
	size_t last_len;
	char last_id[128]; /* its upload id ("" for a common prefix) */
};

_Static_assert(OL_S3_MAX_KEY >= OL_STORE_MAX_KEY, "a listed upload's key fits mpu_list_ctx.last");

static int
cmp_key(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

/* one more entry fits (else truncated: stop) */
static bool
mpu_room(struct mpu_list_ctx *c)
{
	if (c->count < c->max)
		return true;
	c->truncated = true;
	return false;
}

static int
mpu_cb(const char *key, size_t kl, const char *id, int64_t init_ns, const void *meta, size_t ml,
       void *arg)
{
	struct mpu_list_ctx *c = arg;
	char date[32];
	if (kl < c->prefix_len || memcmp(key, c->prefix, c->prefix_len) != 0)
		return 0;
	int mk = cmp_key(key, kl, c->kmark, c->kmark_len);
	if (mk < 0 || (mk == 0 && (!c->imark[0] || strcmp(id, c->imark) <= 0)))
		return 0;
	if (c->delim_len) {
		const char *d =
		    memmem(key + c->prefix_len, kl - c->prefix_len, c->delim, c->delim_len);
		if (d) {
			size_t el = (size_t)(d - key) + c->delim_len;
			if (cmp_key(key, el, c->kmark, c->kmark_len) <= 0 ||
			    (c->last_len == el && !c->last_id[0] && !memcmp(c->last, key, el)))
				return 0; /* listed before, on this page or an earlier one */
			if (!mpu_room(c))
				return 1;
			c->count++;
			ol_buf_adds(c->cps, "<CommonPrefixes>");
			ol_s3_xml_elem_url(c->cps, c->url, "Prefix", key, el);
			ol_buf_adds(c->cps, "</CommonPrefixes>");
			memcpy(c->last, key, el);
			c->last_len = el;
			c->last_id[0] = '\0';
			return 0;
		}
	}
	if (!mpu_room(c))
		return 1;
	c->count++;
	memcpy(c->last, key, kl);
	c->last_len = kl;
	snprintf(c->last_id, sizeof(c->last_id), "%s", id);
	ol_s3_iso_date(init_ns / 1000000, date);
	ol_buf_adds(c->x, "<Upload>");
	ol_s3_xml_elem_url(c->x, c->url, "Key", key, kl);
	ol_s3_xml_elem(c->x, "UploadId", id);
	initiator_xml(c->x, c->r, meta, ml);
	ol_buf_adds(c->x, "<StorageClass>STANDARD</StorageClass>");
	ol_s3_xml_elem(c->x, "Initiated", date);
	ol_buf_adds(c->x, "</Upload>");
	return 0;
}

void
s3_mpu_list(struct s3_req *r)
{
	struct ol_buf x = {0}, ups = {0}, cps = {0};
	char prefix[OL_S3_MAX_KEY + 1], kmark[OL_S3_MAX_KEY + 1], imark[128], delim[64], enc[16];
	size_t pl, kl, dl;
	bool url = false;
	unsigned max;
	r->op = "ListMultipartUploads";
	if (query_uint(r, "max-uploads", 1000, 1000, &max) < 0)
		return;
	if (s3_query_param(r, "prefix", prefix, sizeof(prefix), &pl, NULL) < 0 ||
	    s3_query_param(r, "key-marker", kmark, sizeof(kmark), &kl, NULL) < 0 ||
	    s3_query_param(r, "upload-id-marker", imark, sizeof(imark), NULL, NULL) < 0 ||
	    s3_query_param(r, "delimiter", delim, sizeof(delim), &dl, NULL) < 0 ||
	    s3_query_param(r, "encoding-type", enc, sizeof(enc), NULL, &url) < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "A prefix, key-marker, upload-id-marker, delimiter or encoding-type "
			 "parameter is too long or not valid URL encoding.");
		return;
	}
	if (url && strcmp(enc, "url") != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "Invalid Encoding Method specified in Request");
		return;
	}
	/* AWS: an upload-id-marker without a key-marker is ignored */
	if (!kl)
		imark[0] = '\0';
	struct mpu_list_ctx c = {.r = r,
				 .x = &ups,
				 .cps = &cps,
				 .prefix = prefix,
				 .delim = delim,
				 .kmark = kmark,
				 .imark = imark,
				 .prefix_len = pl,
				 .delim_len = dl,
				 .kmark_len = kl,
				 .max = max,
				 .url = url};
	int rc = ol_store_mpu_list(r->srv->st, r->rt.bucket, mpu_cb, &c);
	if (rc < 0) {
		ol_buf_free(&ups);
		ol_buf_free(&cps);
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	ol_s3_xml_open_root(&x, "ListMultipartUploadsResult");
	ol_s3_xml_elem(&x, "Bucket", r->rt.bucket);
	ol_s3_xml_elem_url(&x, c.url, "KeyMarker", kmark, kl);
	ol_s3_xml_elem(&x, "UploadIdMarker", imark);
	if (c.truncated) {
		ol_s3_xml_elem_url(&x, c.url, "NextKeyMarker", c.last, c.last_len);
		ol_s3_xml_elem(&x, "NextUploadIdMarker", c.last_id);
	}
	ol_s3_xml_elem_url(&x, c.url, "Prefix", prefix, pl);
	if (dl)
		ol_s3_xml_elem_url(&x, c.url, "Delimiter", delim, dl);
	ol_s3_xml_elemu(&x, "MaxUploads", c.max);
	ol_s3_xml_elem(&x, "IsTruncated", c.truncated ? "true" : "false");
	if (ups.len)
		ol_buf_add(&x, ups.p, ups.len);
	if (cps.len)
		ol_buf_add(&x, cps.p, cps.len);
	if (c.url)
		ol_s3_xml_elem(&x, "EncodingType", "url");
	ol_buf_free(&ups);
	ol_buf_free(&cps);
	ol_buf_adds(&x, "</ListMultipartUploadsResult>");
	s3_send_xml(r, 200, &x);
}
