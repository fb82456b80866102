/* s3/objlock.c - S3 object lock: buckets created with it (kept in the bucket's attrs as
 * "lock", its value the default retention in ol_s3_lock_cfg_encode form, "" for none; such a
 * bucket is versioned for good), PUT/GET ?object-lock, PUT/GET ?retention and ?legal-hold of
 * a version (kept in the version's metadata blob, changed in place by ol_store_set_meta), the
 * x-amz-object-lock-* headers of writes and reads, and the check every permanent delete of a
 * version passes (DeleteObject with a versionId, DeleteObjects, lifecycle). */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/log.h"
#include "s3/rules.h"

#define DAY_MS		 86400000LL
#define LOCKED_MSG	 "Access Denied because object protected by object lock."
#define NO_BUCKET_LOCK	 "Bucket is missing Object Lock Configuration"
#define RETAIN_FUTURE	 "The retain until date must be in the future!"
#define MISSING_CHECKSUM "Missing required header for this request: Content-MD5"

int64_t
s3_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
s3_lock_enabled(const struct s3_req *r)
{
	const char *v;
	return r->ba.blob && ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "lock", &v) >= 0;
}

/* The bucket's lock configuration (enabled false when it has none). */
static void
bucket_lock_cfg(const struct s3_req *r, struct ol_s3_lock_cfg *c)
{
	const char *v;
	long n = r->ba.blob ? ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "lock", &v) : -ENOENT;
	memset(c, 0, sizeof(*c));
	if (n >= 0 && ol_s3_lock_cfg_decode(v, (size_t)n, c) < 0)
		c->enabled = true; /* a rule we cannot read: enabled, no default */
}

/* ---- PUT / GET ?object-lock ---- */

/* Read a small XML body that AWS wants a checksum on: 0 with *body (malloc'd), or -1 with the
 * error sent. */
static int
checked_body(struct s3_req *r, char **body, size_t *len)
{
	struct s3_body b;
	int rc = -1;
	*body = NULL;
	if (!s3_has_checksum(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST, MISSING_CHECKSUM);
		return -1;
	}
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return -1;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, body, len, &b) < 0)
		s3_error(r, b.err, b.errmsg);
	else
		rc = 0;
	s3_body_fini(&b);
	return rc;
}

void
s3_put_object_lock(struct s3_req *r)
{
	struct ol_s3_lock_cfg c;
	struct ol_buf enc = {0};
	const char *why;
	char *body;
	size_t len;
	int rc;
	r->op = "PutObjectLockConfiguration";
	if (checked_body(r, &body, &len) < 0)
		return;
	rc = ol_s3_parse_lock_cfg(body, len, &c, &why);
	if (rc == -EINVAL) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, why);
	} else if (rc < 0 || !c.enabled) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	} else if (!s3_lock_enabled(r) && s3_vmode(r) != OL_STORE_VER_ON) {
		s3_error_code(r, "InvalidBucketState", 409,
			      "Versioning must be 'Enabled' on the bucket to apply a Object Lock "
			      "configuration",
			      NULL);
	} else {
		ol_s3_lock_cfg_encode(&c, &enc);
		s3_attr_stored(
		    r, s3_bucket_attr_store(r, "lock", enc.p ? enc.p : "", (long)enc.len), 200);
	}
	ol_buf_free(&enc);
	free(body);
}

void
s3_get_object_lock(struct s3_req *r)
{
	struct ol_s3_lock_cfg c;
	struct ol_buf x = {0};
	r->op = "GetObjectLockConfiguration";
	bucket_lock_cfg(r, &c);
	if (!c.enabled) {
		s3_error_code(r, "ObjectLockConfigurationNotFoundError", 404,
			      "Object Lock configuration does not exist for this bucket", NULL);
		return;
	}
	ol_s3_lock_cfg_xml(&c, &x);
	s3_send_xml(r, 200, &x);
}

/* ---- the headers of writes ---- */

int
s3_lock_write_check(struct s3_req *r, bool need_checksum)
{
	const char *mode = ol_http_header(r->h, "x-amz-object-lock-mode");
	const char *date = ol_http_header(r->h, "x-amz-object-lock-retain-until-date");
	const char *hold = ol_http_header(r->h, "x-amz-object-lock-legal-hold");
	int64_t until;
	if (!mode && !date && !hold)
		return 0;
	if (!s3_lock_enabled(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST, "Bucket is missing ObjectLockConfiguration");
		return -1;
	}
	if (!mode != !date) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must "
			 "both be supplied");
		return -1;
	}
	if (mode && ol_s3_lock_mode_parse(mode, strlen(mode)) < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Unknown wormMode directive.");
		return -1;
	}
	if (date && ol_s3_parse_iso_date(date, strlen(date), &until) < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "The retain until date must be an ISO 8601 date-time "
			 "(2030-01-01T00:00:00Z)");
		return -1;
	}
	if (date && until <= s3_now_ms()) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, RETAIN_FUTURE);
		return -1;
	}
	if (hold && strcmp(hold, "ON") != 0 && strcmp(hold, "OFF") != 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Legal Hold must be either of 'ON' or 'OFF'");
		return -1;
	}
	if (need_checksum && !s3_has_checksum(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object "
			 "requests with Object Lock parameters");
		return -1;
	}
	return 0;
}

void
s3_lock_write_meta(struct s3_req *r, struct ol_buf *meta)
{
	const char *mode = ol_http_header(r->h, "x-amz-object-lock-mode");
	const char *date = ol_http_header(r->h, "x-amz-object-lock-retain-until-date");
	const char *hold = ol_http_header(r->h, "x-amz-object-lock-legal-hold");
	struct ol_s3_obj_lock l = {OL_LOCK_NONE, 0, -1};
	struct ol_s3_lock_cfg c;
	struct ol_buf out = {0};
	bucket_lock_cfg(r, &c);
	if (mode && date && c.enabled) { /* checked by s3_lock_write_check */
		l.mode = ol_s3_lock_mode_parse(mode, strlen(mode));
		if (l.mode < 0 || ol_s3_parse_iso_date(date, strlen(date), &l.until_ms) < 0)
			l.mode = OL_LOCK_NONE;
	} else if (c.mode != OL_LOCK_NONE) {
		l.mode = c.mode;
		l.until_ms = s3_now_ms() + (c.years ? (int64_t)c.years * 365 : c.days) * DAY_MS;
	}
	if (hold && c.enabled)
		l.hold = strcmp(hold, "ON") == 0;
	ol_s3_obj_lock_set(meta->p, meta->len, &l, &out);
	ol_buf_free(meta);
	*meta = out;
}

/* ---- the headers of reads ---- */

size_t
s3_lock_headers(const void *meta, size_t len, const char *name[3], char val[3][40])
{
	struct ol_s3_obj_lock l;
	size_t n = 0;
	ol_s3_obj_lock_get(meta, len, &l);
	if (l.mode != OL_LOCK_NONE) {
		name[n] = "x-amz-object-lock-mode";
		snprintf(val[n++], 40, "%s", ol_s3_lock_mode_name(l.mode));
		name[n] = "x-amz-object-lock-retain-until-date";
		ol_s3_iso_date(l.until_ms, val[n++]);
	}
	if (l.hold >= 0) {
		name[n] = "x-amz-object-lock-legal-hold";
		snprintf(val[n++], 40, "%s", l.hold ? "ON" : "OFF");
	}
	return n;
}

/* ---- deletes ---- */

static bool
bypass_asked(const struct s3_req *r)
{
	const char *b = ol_http_header(r->h, "x-amz-bypass-governance-retention");
	return b && strcasecmp(b, "true") == 0;
}

int
s3_lock_delete_check(struct s3_req *r, const char *key, size_t kl, const char *vid)
{
	struct ol_obj_info in;
	struct ol_s3_obj_lock l;
	char *buf;
	int rc, b;
	if (!vid || !s3_lock_enabled(r))
		return 0;
	buf = ol_xmalloc(OL_STORE_MAX_META);
	rc = ol_store_head_ver(r->srv->st, r->rt.bucket, key, kl, vid, &in, buf, OL_STORE_MAX_META);
	if (rc < 0 || in.meta_len > OL_STORE_MAX_META) {
		free(buf);
		return 0; /* the delete itself answers (no such version, a marker, ...) */
	}
	ol_s3_obj_lock_get(buf, in.meta_len, &l);
	free(buf);
	b = ol_s3_obj_lock_blocks(&l, s3_now_ms());
	if (b == 0 || (b == 1 && bypass_asked(r) && s3_may_bypass_governance(r, key, kl)))
		return 0;
	ol_debug("s3 %s delete of %s/%.*s version %s refused: %s", r->reqid, r->rt.bucket,
		 (int)(kl > 200 ? 200 : kl), key, vid,
		 l.hold == 1 ? "legal hold" : ol_s3_lock_mode_name(l.mode));
	return -EPERM;
}

void
s3_lock_denied(struct s3_req *r)
{
	s3_error(r, OL_S3E_ACCESS_DENIED, LOCKED_MSG);
}

const char *
s3_lock_denied_message(void)
{
	return LOCKED_MSG;
}

/* ---- ?retention and ?legal-hold of a version ---- */

/* The version's metadata into buf: 0, or -1 with the error sent. */
static int
version_meta(struct s3_req *r, const char *vid, struct ol_obj_info *in, char *buf)
{
	int rc = ol_store_head_ver(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, vid, in, buf,
				   OL_STORE_MAX_META);
	if (rc < 0 && s3_version_error(r, rc, in, vid != NULL))
		return -1;
	if (rc == -ENOENT) {
		s3_missing_key(r, OL_S3E_NO_SUCH_KEY);
		return -1;
	}
	if (rc < 0 || in->meta_len > OL_STORE_MAX_META) {
		s3_store_error(r, rc < 0 ? rc : -EIO, OL_S3E_NO_SUCH_KEY);
		return -1;
	}
	return 0;
}

/* May the retention l become n? 0, or -1 with AccessDenied sent. */
static int
retention_change_ok(struct s3_req *r, const struct ol_s3_obj_lock *l,
		    const struct ol_s3_retention *n)
{
	bool active = l->mode != OL_LOCK_NONE && l->until_ms > s3_now_ms();
	bool weaker = n->mode == OL_LOCK_NONE || n->until_ms < l->until_ms;
	if (!active)
		return 0;
	if (l->mode == OL_LOCK_COMPLIANCE && (weaker || n->mode != OL_LOCK_COMPLIANCE)) {
		s3_lock_denied(r);
		return -1;
	}
	if (l->mode == OL_LOCK_GOVERNANCE && weaker &&
	    !(bypass_asked(r) && s3_may_bypass_governance(r, r->rt.key, r->rt.key_len))) {
		s3_lock_denied(r);
		return -1;
	}
	return 0;
}

static void
no_lock_config(struct s3_req *r)
{
	s3_error_code(r, "NoSuchObjectLockConfiguration", 404,
		      "The specified object does not have a ObjectLock configuration", NULL);
}

static void
get_lock_doc(struct s3_req *r, bool retention, const struct ol_s3_obj_lock *l,
	     const struct ol_http_header *h, size_t hn)
{
	struct ol_buf x = {0};
	char date[32];
	if (retention ? l->mode == OL_LOCK_NONE : l->hold < 0) {
		no_lock_config(r);
		return;
	}
	ol_s3_xml_open_root(&x, retention ? "Retention" : "LegalHold");
	if (retention) {
		ol_s3_iso_date(l->until_ms, date);
		ol_s3_xml_elem(&x, "Mode", ol_s3_lock_mode_name(l->mode));
		ol_s3_xml_elem(&x, "RetainUntilDate", date);
		ol_buf_adds(&x, "</Retention>");
	} else {
		ol_s3_xml_elem(&x, "Status", l->hold ? "ON" : "OFF");
		ol_buf_adds(&x, "</LegalHold>");
	}
	s3_send(r, 200, h, hn, x.p, x.len);
	ol_buf_free(&x);
}

/* The new lock from a PUT body: 0, or -1 with the error sent. */
static int
put_lock_doc(struct s3_req *r, bool retention, struct ol_s3_obj_lock *l)
{
	struct ol_s3_retention ret;
	char *body;
	size_t len;
	int on, rc;
	if (checked_body(r, &body, &len) < 0)
		return -1;
	rc = retention ? ol_s3_parse_retention(body, len, &ret)
		       : ol_s3_parse_legal_hold(body, len, &on);
	free(body);
	if (rc < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		return -1;
	}
	if (!retention) {
		l->hold = on;
		return 0;
	}
	if (ret.mode != OL_LOCK_NONE && ret.until_ms <= s3_now_ms()) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, RETAIN_FUTURE);
		return -1;
	}
	if (retention_change_ok(r, l, &ret) < 0)
		return -1;
	l->mode = ret.mode;
	l->until_ms = ret.until_ms;
	return 0;
}

/* GET/PUT ?retention (retention) or ?legal-hold of the request's object version. */
static void
object_lock_doc(struct s3_req *r, bool retention)
{
	bool get = r->h->method[0] == 'G';
	char vb[OL_S3_MAX_VID + 1], *buf = NULL;
	const char *vid;
	struct ol_obj_info in;
	struct ol_s3_obj_lock l;
	struct ol_buf meta = {0};
	struct ol_http_header h[2];
	size_t hn;
	int rc;
	r->op = retention ? (get ? "GetObjectRetention" : "PutObjectRetention")
			  : (get ? "GetObjectLegalHold" : "PutObjectLegalHold");
	if (!s3_lock_enabled(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST, NO_BUCKET_LOCK);
		return;
	}
	buf = ol_xmalloc(OL_STORE_MAX_META);
	if (s3_version_param(r, vb, &vid) < 0 || version_meta(r, vid, &in, buf) < 0)
		goto out;
	hn = s3_version_headers(r, &in, h, 0);
	ol_s3_obj_lock_get(buf, in.meta_len, &l);
	if (get) {
		get_lock_doc(r, retention, &l, h, hn);
		goto out;
	}
	if (put_lock_doc(r, retention, &l) < 0)
		goto out;
	ol_s3_obj_lock_set(buf, in.meta_len, &l, &meta);
	/* only this version's blob changes: same data, ETag and version id */
	rc = ol_store_set_meta(r->srv->st, r->rt.bucket, r->rt.key, r->rt.key_len, in.version_id,
			       meta.p, meta.len);
	if (rc < 0 && !s3_version_error(r, rc, &in, true))
		s3_store_error(r, rc, OL_S3E_NO_SUCH_KEY);
	else if (rc == 0)
		s3_send(r, 200, h, hn, NULL, 0);
out:
	ol_buf_free(&meta);
	free(buf);
}

void
s3_object_retention(struct s3_req *r)
{
	object_lock_doc(r, true);
}

void
s3_object_legal_hold(struct s3_req *r)
{
	object_lock_doc(r, false);
}
