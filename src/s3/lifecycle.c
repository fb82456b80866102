/* s3/lifecycle.c - bucket lifecycle rules: PUT/GET/DELETE ?lifecycle (the checked document
 * kept in the bucket's attrs as "lc"), the x-amz-expiration header, and the scanner: one
 * thread that, every [s3] lifecycle_interval_secs, walks the versions of each bucket with
 * rules and applies them through the store calls S3 requests use (a delete marker in a
 * versioned bucket, a delete in an unversioned one, a version removed for good only when its
 * object lock allows: a locked version is skipped and counted, never unlocked), paced to
 * [s3] lifecycle_ops_per_sec. A lifecycle "day" is [s3] lifecycle_day_secs (tests: 1). */
#include "s3/s3int.h"

#include <errno.h>
#include <sys/random.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hex.h"
#include "base/log.h"
#include "base/metrics.h"
#include "s3/rules.h"

#define LC_ATTR	    "lc"
#define TAGS_META   "ol-tags"
#define BATCH	    256	  /* versions read per iterator pass */
#define MAX_UPLOADS 10000 /* uploads looked at per bucket per scan */

/* ---- PUT / GET / DELETE ?lifecycle ---- */

/* The loaded bucket's rules: 0 (free lc), -ENOENT none, -EINVAL unreadable. */
static int
bucket_rules(const struct s3_req *r, struct ol_s3_lc *lc)
{
	const char *v, *why;
	long n = r->ba.blob ? ol_s3_attr_get(r->ba.blob, r->ba.blob_len, LC_ATTR, &v) : -ENOENT;
	if (n < 0)
		return -ENOENT;
	return ol_s3_parse_lifecycle(v, (size_t)n, lc, &why) < 0 ? -EINVAL : 0;
}

/* Rules sent without an ID are given one, as AWS does (a random one, kept): the document
 * is stored as GET renders it, with the IDs. 0 with *out set, or -1 when every rule had an
 * ID (the body is stored as sent) or the rendering would not parse back the same rules. */
static int
name_rules(struct ol_s3_lc *lc, struct ol_buf *out)
{
	struct ol_s3_lc back;
	const char *why;
	unsigned char raw[16];
	bool named = false;
	for (unsigned i = 0; i < lc->n; i++) {
		if (lc->rules[i].id[0])
			continue;
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			return -1;
		ol_hex_encode(raw, sizeof(raw), lc->rules[i].id); /* 32 < OL_S3_LC_ID_MAX */
		lc->rules[i].id[32] = '\0';
		named = true;
	}
	if (!named)
		return -1;
	ol_s3_lc_xml(lc, out);
	if (ol_s3_parse_lifecycle(out->p, out->len, &back, &why) < 0) {
		ol_buf_free(out);
		return -1;
	}
	bool same = back.n == lc->n;
	ol_s3_lc_free(&back);
	if (!same)
		ol_buf_free(out);
	return same ? 0 : -1;
}

static void
put_lifecycle(struct s3_req *r)
{
	struct s3_body b;
	struct ol_s3_lc lc;
	const char *why;
	char *body = NULL;
	size_t len;
	int rc;
	if (!s3_has_checksum(r)) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Missing required header for this request: Content-MD5");
		return;
	}
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	rc = ol_s3_parse_lifecycle(body, len, &lc, &why);
	if (rc == -EINVAL)
		s3_error(r, OL_S3E_INVALID_ARGUMENT, why);
	else if (rc == -EPROTO)
		s3_error(r, OL_S3E_INVALID_REQUEST, why);
	else if (rc == -ENOTSUP)
		s3_error(r, OL_S3E_NOT_IMPLEMENTED, why);
	else if (rc < 0)
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
	if (rc < 0)
		goto out;
	struct ol_buf named = {0};
	if (name_rules(&lc, &named) == 0) { /* stored with the IDs given */
		free(body);
		body = named.p, len = named.len;
	}
	ol_s3_lc_free(&lc);
	s3_attr_stored(r, s3_bucket_attr_store(r, LC_ATTR, body, (long)len), 200);
out:
	free(body);
	s3_body_fini(&b);
}

void
s3_bucket_lifecycle(struct s3_req *r)
{
	struct ol_s3_lc lc;
	struct ol_buf x = {0};
	switch (r->h->method[0]) {
	case 'P':
		r->op = "PutBucketLifecycleConfiguration";
		put_lifecycle(r);
		return;
	case 'D':
		r->op = "DeleteBucketLifecycle";
		s3_attr_stored(r, s3_bucket_attr_store(r, LC_ATTR, NULL, -1), 204);
		return;
	default:
		r->op = "GetBucketLifecycleConfiguration";
		if (bucket_rules(r, &lc) < 0) {
			s3_error_code(r, "NoSuchLifecycleConfiguration", 404,
				      "The lifecycle configuration does not exist", NULL);
			return;
		}
		ol_s3_lc_xml(&lc, &x);
		ol_s3_lc_free(&lc);
		s3_send_xml(r, 200, &x);
	}
}

static int64_t
day_ms(const struct ol_config *cfg)
{
	return (int64_t)(cfg->s3_lc_day_secs ? cfg->s3_lc_day_secs : 86400) * 1000;
}

/* Does rule r take this version (tags from its metadata blob)? */
static bool
rule_takes(const struct ol_s3_lc_rule *r, const char *key, size_t kl, uint64_t size,
	   const void *meta, size_t meta_len)
{
	const char *tags = NULL;
	long tl = meta ? ol_s3_meta_get(meta, meta_len, TAGS_META, &tags) : -ENOENT;
	return ol_s3_lc_match(r, key, kl, size, tl > 0 ? tags : NULL, tl > 0 ? (size_t)tl : 0);
}

/* When Expiration of rule r is due for a version written at mtime_ms (0: the rule has none). */
static int64_t
expiry_of(const struct ol_s3_lc_rule *r, int64_t mtime_ms, int64_t dms)
{
	if (r->exp_days)
		return ol_s3_lc_due(mtime_ms, r->exp_days, dms);
	return r->exp_date_ms;
}

/* ---- per-thread cache of parsed rules ----
 * x-amz-expiration needs the bucket's rules on every GET, HEAD and PUT of a bucket that has
 * some: an expat parse of up to 1000 rules each time. Each request thread keeps the last few
 * documents it parsed, keyed by their exact text (a memcmp of the stored copy). */

#define LC_CACHE 4

struct lc_entry {
	char *text;
	size_t len;
	struct ol_s3_lc lc;
	unsigned long long used;
};

struct lc_cache {
	struct lc_entry e[LC_CACHE];
	unsigned long long tick;
};

static pthread_key_t lc_key;
static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

static void
lc_cache_free(void *arg)
{
	struct lc_cache *c = arg;
	for (int i = 0; i < LC_CACHE; i++) {
		free(c->e[i].text);
		ol_s3_lc_free(&c->e[i].lc);
	}
	free(c);
}

static void
lc_cache_init(void)
{
	if (pthread_key_create(&lc_key, lc_cache_free) != 0)
		ol_die("s3: pthread_key_create failed");
}

/* The parsed rules of text (valid until this thread's next call), or NULL when they do not
 * parse. */
static const struct ol_s3_lc *
cached_rules(const char *text, size_t len)
{
	struct lc_cache *c;
	struct lc_entry *v;
	const char *why;
	pthread_once(&lc_once, lc_cache_init);
	c = pthread_getspecific(lc_key);
	if (!c) {
		c = ol_xcalloc(1, sizeof(*c));
		pthread_setspecific(lc_key, c);
	}
	c->tick++;
	for (int i = 0; i < LC_CACHE; i++) {
		struct lc_entry *e = &c->e[i];
		if (e->text && e->len == len && memcmp(e->text, text, len) == 0) {
			e->used = c->tick;
			return e->lc.n ? &e->lc : NULL;
		}
	}
	v = &c->e[0];
	for (int i = 1; i < LC_CACHE; i++)
		if (!c->e[i].text || c->e[i].used < v->used)
			v = &c->e[i];
	free(v->text);
	ol_s3_lc_free(&v->lc);
	v->text = ol_xmalloc(len + 1);
	memcpy(v->text, text, len);
	v->len = len;
	v->used = c->tick;
	if (ol_s3_parse_lifecycle(text, len, &v->lc, &why) < 0)
		memset(&v->lc, 0, sizeof(v->lc));
	return v->lc.n ? &v->lc : NULL;
}

bool
s3_lc_expiration(struct s3_req *r, const char *key, size_t kl, const struct ol_obj_info *in,
		 const void *meta, size_t meta_len, char out[400])
{
	const struct ol_s3_lc *lc;
	const char *v;
	char date[32];
	long n = r->ba.blob ? ol_s3_attr_get(r->ba.blob, r->ba.blob_len, LC_ATTR, &v) : -ENOENT;
	if (n < 0 || !(lc = cached_rules(v, (size_t)n)))
		return false;
	for (unsigned i = 0; i < lc->n; i++) {
		const struct ol_s3_lc_rule *rl = &lc->rules[i];
		int64_t due = expiry_of(rl, in->mtime_ns / 1000000, day_ms(r->srv->cfg));
		struct ol_obj_info sz = *in; /* in->meta may be stale (a PUT's commit info) */
		sz.meta = meta;
		sz.meta_len = meta_len;
		if (!due || !rule_takes(rl, key, kl, s3_obj_size(&sz), meta, meta_len))
			continue;
		ol_s3_http_date(due, date);
		snprintf(out, 400, "expiry-date=\"%s\", rule-id=\"%.255s\"", date, rl->id);
		return true;
	}
	return false;
}

/* ---- the scanner ---- */

enum { ACT_EXPIRE, ACT_NONCURRENT, ACT_MARKER, ACT_ABORT, ACT_N };
static const char *const act_name[ACT_N] = {"expiration", "noncurrent_expiration",
					    "expired_delete_marker", "abort_multipart_upload"};

struct s3_lc_scanner {
	struct ol_s3_server *srv;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	uint64_t window_start_us, window_ops; /* pacing */
	uint64_t scans, actions[ACT_N], skipped_locked, errors, last_us;
};

static void
lc_metrics(struct ol_strbuf *out, void *arg)
{
	struct s3_lc_scanner *s = arg;
	ol_strbuf_printf(out,
			 "# HELP openlake_lifecycle_scans_total Lifecycle scans of every bucket "
			 "with rules, completed.\n"
			 "# TYPE openlake_lifecycle_scans_total counter\n"
			 "openlake_lifecycle_scans_total %llu\n"
			 "# HELP openlake_lifecycle_actions_total Lifecycle actions applied, by "
			 "action.\n"
			 "# TYPE openlake_lifecycle_actions_total counter\n",
			 (unsigned long long)ol_counter_get(&s->scans));
	for (int i = 0; i < ACT_N; i++)
		ol_strbuf_printf(out, "openlake_lifecycle_actions_total{action=\"%s\"} %llu\n",
				 act_name[i], (unsigned long long)ol_counter_get(&s->actions[i]));
	ol_strbuf_printf(out,
			 "# HELP openlake_lifecycle_skipped_locked_total Versions a rule made due "
			 "that object lock kept.\n"
			 "# TYPE openlake_lifecycle_skipped_locked_total counter\n"
			 "openlake_lifecycle_skipped_locked_total %llu\n"
			 "# HELP openlake_lifecycle_errors_total Lifecycle actions that failed "
			 "(retried at the next scan).\n"
			 "# TYPE openlake_lifecycle_errors_total counter\n"
			 "openlake_lifecycle_errors_total %llu\n"
			 "# HELP openlake_lifecycle_last_scan_duration_seconds Length of the last "
			 "completed scan.\n"
			 "# TYPE openlake_lifecycle_last_scan_duration_seconds gauge\n"
			 "openlake_lifecycle_last_scan_duration_seconds %.6f\n",
			 (unsigned long long)ol_counter_get(&s->skipped_locked),
			 (unsigned long long)ol_counter_get(&s->errors),
			 (double)ol_counter_get(&s->last_us) / 1e6);
}

/* Wait up to us microseconds unless asked to stop: true when stopping. */
static bool
lc_wait(struct s3_lc_scanner *s, uint64_t us)
{
	struct timespec ts;
	bool stop;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(us / 1000000);
	ts.tv_nsec += (long)(us % 1000000) * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->mu);
	while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
		;
	stop = s->stop;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* Count n operations against the rate cap, sleeping when ahead of it: true when stopping. */
static bool
lc_pace(struct s3_lc_scanner *s, unsigned n)
{
	unsigned rate = s->srv->cfg->s3_lc_ops_per_sec;
	uint64_t now = ol_now_us(), due;
	if (!rate)
		return __atomic_load_n(&s->stop, __ATOMIC_RELAXED);
	if (now - s->window_start_us > 1000000) {
		s->window_start_us = now;
		s->window_ops = 0;
	}
	s->window_ops += n;
	due = s->window_start_us + s->window_ops * 1000000 / rate;
	if (due > now)
		return lc_wait(s, due - now);
	return __atomic_load_n(&s->stop, __ATOMIC_RELAXED);
}

/* One version read from the iterator (meta kept for its tags and lock). */
struct ver {
	char *key;
	size_t kl;
	char vid[OL_STORE_VID_MAX];
	int64_t mtime_ms;
	uint64_t size;
	bool marker, latest;
	char *meta;
	size_t meta_len;
};

struct bucket_scan {
	struct s3_lc_scanner *s;
	const char *bucket;
	int vmode;
	struct ol_s3_lc lc;
	int64_t now, dms;
	struct ver *v;
	size_t n, cap;
};

static void
vers_clear(struct bucket_scan *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].key);
		free(b->v[i].meta);
	}
	b->n = 0;
}

/* Read the versions of whole keys from the first key >= cursor (skipping cursor itself when
 * skip): about BATCH versions. 1 read some, 0 at the end, -errno. */
static int
read_batch(struct bucket_scan *b, const char *cursor, size_t cl, bool skip)
{
	struct ol_viter *it = NULL;
	struct ol_obj_info in;
	const char *key;
	size_t kl;
	int rc = ol_store_viter_open(b->s->srv->st, b->bucket, &it);
	if (rc == 0)
		rc = ol_store_viter_seek(it, cursor, cl);
	while (rc == 0 && (rc = ol_store_viter_next(it, &key, &kl, &in)) == 1) {
		if (skip && kl == cl && memcmp(key, cursor, kl) == 0) {
			rc = 0;
			continue;
		}
		if (b->n >= BATCH &&
		    (kl != b->v[b->n - 1].kl || memcmp(key, b->v[b->n - 1].key, kl)))
			break;
		if (b->n == b->cap) {
			b->cap = b->cap ? b->cap * 2 : BATCH + 16;
			b->v = ol_xrealloc(b->v, b->cap * sizeof(*b->v));
		}
		struct ver *v = &b->v[b->n++];
		v->key = ol_xmalloc(kl + 1);
		memcpy(v->key, key, kl);
		v->kl = kl;
		memcpy(v->vid, in.version_id, sizeof(v->vid));
		v->mtime_ms = in.mtime_ns / 1000000;
		v->size = s3_obj_size(&in);
		v->marker = in.delete_marker;
		v->latest = in.is_latest;
		v->meta_len = in.meta && in.meta_len <= OL_STORE_MAX_META ? in.meta_len : 0;
		v->meta = ol_xmalloc(v->meta_len + 1);
		memcpy(v->meta, in.meta ? in.meta : "", v->meta_len);
		rc = 0;
	}
	ol_store_viter_close(it);
	if (rc < 0)
		return rc;
	return b->n > 0;
}

static void
count(struct s3_lc_scanner *s, int act, int rc, const char *bucket, const struct ver *v)
{
	if (rc == 0 || rc == -ENOENT) {
		ol_counter_add(&s->actions[act], rc == 0);
		ol_debug("lifecycle %s: %s/%.*s version %s", act_name[act], bucket,
			 (int)(v->kl > 200 ? 200 : v->kl), v->key, v->vid);
		return;
	}
	ol_counter_add(&s->errors, 1);
	ol_warn("lifecycle %s of %s/%.*s version %s failed: %s", act_name[act], bucket,
		(int)(v->kl > 200 ? 200 : v->kl), v->key, v->vid, strerror(-rc));
}

/* Expiration of the current version v: a delete marker (versioned) or a delete. */
static void
expire_current(struct bucket_scan *b, const struct ver *v)
{
	struct ol_obj_info in, out;
	bool due = false;
	int rc;
	for (unsigned i = 0; i < b->lc.n && !due; i++) {
		int64_t t = expiry_of(&b->lc.rules[i], v->mtime_ms, b->dms);
		due = t && b->now >= t &&
		      rule_takes(&b->lc.rules[i], v->key, v->kl, v->size, v->meta, v->meta_len);
	}
	if (!due)
		return;
	/* still the same current version? (a PUT since the read is not expired) */
	rc = ol_store_head(b->s->srv->st, b->bucket, v->key, v->kl, &in, NULL, 0);
	if (rc < 0 || strcmp(in.version_id, v->vid) != 0 || in.mtime_ns / 1000000 != v->mtime_ms)
		return;
	if (b->vmode == OL_STORE_VER_OFF) {
		struct ol_s3_obj_lock l;
		ol_s3_obj_lock_get(v->meta, v->meta_len, &l);
		if (ol_s3_obj_lock_blocks(&l, b->now)) {
			ol_counter_add(&b->s->skipped_locked, 1);
			return;
		}
	}
	rc = ol_store_delete_ver(b->s->srv->st, b->bucket, v->key, v->kl, b->vmode, NULL, &out);
	count(b->s, ACT_EXPIRE, rc, b->bucket, v);
}

/* Remove version v for good (act) unless its lock keeps it: 0 removed, -1 kept or failed. */
static int
remove_version(struct bucket_scan *b, const struct ver *v, int act)
{
	struct ol_s3_obj_lock l;
	struct ol_obj_info out;
	int rc;
	ol_s3_obj_lock_get(v->meta, v->meta_len, &l);
	if (!v->marker && ol_s3_obj_lock_blocks(&l, b->now)) { /* even GOVERNANCE: no bypass */
		ol_counter_add(&b->s->skipped_locked, 1);
		return -1;
	}
	rc = ol_store_delete_ver(b->s->srv->st, b->bucket, v->key, v->kl, b->vmode, v->vid, &out);
	count(b->s, act, rc, b->bucket, v);
	return rc == 0 ? 0 : -1;
}

/* Is noncurrent version v (idx-th noncurrent, 0 = newest, noncurrent since `since`) due? */
static bool
noncurrent_due(struct bucket_scan *b, const struct ver *v, unsigned idx, int64_t since)
{
	for (unsigned i = 0; i < b->lc.n; i++) {
		const struct ol_s3_lc_rule *r = &b->lc.rules[i];
		if (!r->nc_days || idx < r->nc_newer ||
		    b->now < ol_s3_lc_due(since, r->nc_days, b->dms))
			continue;
		if (rule_takes(r, v->key, v->kl, v->marker ? 0 : v->size,
			       v->marker ? NULL : v->meta, v->meta_len))
			return true;
	}
	return false;
}

/* A current delete marker with no other version left: does a rule expire it? */
static bool
marker_rule(struct bucket_scan *b, const struct ver *v)
{
	for (unsigned i = 0; i < b->lc.n; i++) {
		const struct ol_s3_lc_rule *r = &b->lc.rules[i];
		if (r->exp_marker && rule_takes(r, v->key, v->kl, 0, NULL, 0))
			return true;
	}
	return false;
}

/* The versions v[0..n) of one key, newest first. */
static bool
scan_key(struct bucket_scan *b, struct ver *v, size_t n)
{
	size_t left = n;
	unsigned nc = 0;
	if (v[0].latest && !v[0].marker)
		expire_current(b, &v[0]);
	for (size_t i = 1; i < n && b->vmode != OL_STORE_VER_OFF; i++, nc++) {
		if (noncurrent_due(b, &v[i], nc, v[i - 1].mtime_ms) &&
		    remove_version(b, &v[i], ACT_NONCURRENT) == 0)
			left--;
		if (lc_pace(b->s, 1))
			return true;
	}
	if (v[0].latest && v[0].marker && left == 1 && marker_rule(b, &v[0]))
		remove_version(b, &v[0], ACT_MARKER);
	return lc_pace(b->s, 1);
}

static bool
scan_versions(struct bucket_scan *b)
{
	char *cursor = NULL;
	size_t cl = 0;
	bool stop = false;
	int rc;
	while (!stop && (rc = read_batch(b, cursor ? cursor : "", cl, cursor != NULL)) == 1) {
		size_t i = 0;
		while (i < b->n && !stop) {
			size_t j = i + 1;
			while (j < b->n && b->v[j].kl == b->v[i].kl &&
			       memcmp(b->v[j].key, b->v[i].key, b->v[i].kl) == 0)
				j++;
			stop = scan_key(b, &b->v[i], j - i);
			i = j;
		}
		free(cursor);
		cl = b->v[b->n - 1].kl;
		cursor = ol_xmalloc(cl + 1);
		memcpy(cursor, b->v[b->n - 1].key, cl);
		vers_clear(b);
	}
	if (rc < 0 && !stop)
		ol_warn("lifecycle: reading the versions of %s failed: %s", b->bucket,
			strerror(-rc));
	free(cursor);
	vers_clear(b);
	return stop;
}

struct upload {
	char *key;
	size_t kl;
	char id[64];
	int64_t init_ms;
};
struct uploads {
	struct upload *u;
	size_t n;
};

static int
upload_cb(const char *key, size_t kl, const char *upload_id, int64_t init_ns, const void *meta,
	  size_t meta_len, void *arg)
{
	struct uploads *us = arg;
	struct upload *u;
	if (us->n >= MAX_UPLOADS)
		return 1;
	us->u = ol_xrealloc(us->u, (us->n + 1) * sizeof(*us->u));
	u = &us->u[us->n++];
	u->key = ol_xmalloc(kl + 1);
	memcpy(u->key, key, kl);
	u->kl = kl;
	snprintf(u->id, sizeof(u->id), "%s", upload_id);
	u->init_ms = init_ns / 1000000;
	return 0;
}

static bool
abort_uploads(struct bucket_scan *b)
{
	struct uploads us = {0};
	bool stop = false, any = false;
	for (unsigned i = 0; i < b->lc.n; i++)
		any |= b->lc.rules[i].enabled && b->lc.rules[i].abort_days;
	if (!any)
		return false;
	(void)ol_store_mpu_list(b->s->srv->st, b->bucket, upload_cb, &us);
	for (size_t k = 0; k < us.n && !stop; k++) {
		struct upload *u = &us.u[k];
		for (unsigned i = 0; i < b->lc.n; i++) {
			const struct ol_s3_lc_rule *r = &b->lc.rules[i];
			struct ver v = {.key = u->key, .kl = u->kl};
			if (!r->abort_days ||
			    b->now < ol_s3_lc_due(u->init_ms, r->abort_days, b->dms) ||
			    !ol_s3_lc_match(r, u->key, u->kl, 0, NULL, 0))
				continue;
			snprintf(v.vid, sizeof(v.vid), "%.*s", (int)sizeof(v.vid) - 1, u->id);
			count(b->s, ACT_ABORT, ol_store_mpu_abort(b->s->srv->st, b->bucket, u->id),
			      b->bucket, &v);
			break;
		}
		stop = lc_pace(b->s, 1);
	}
	for (size_t k = 0; k < us.n; k++)
		free(us.u[k].key);
	free(us.u);
	return stop;
}

/* A bucket with rules, copied out of the bucket list. */
struct lc_bucket {
	char name[256];
	char *rules, *attrs;
	size_t rules_len, attrs_len;
};
struct lc_buckets {
	struct lc_bucket *b;
	size_t n;
};

static int
bucket_cb(const char *bucket, int64_t created_ns, const void *attrs, size_t len, void *arg)
{
	struct lc_buckets *bs = arg;
	const char *v;
	long n = ol_s3_attr_get(attrs, len, LC_ATTR, &v);
	struct lc_bucket *b;
	(void)created_ns;
	if (n < 0)
		return 0;
	bs->b = ol_xrealloc(bs->b, (bs->n + 1) * sizeof(*bs->b));
	b = &bs->b[bs->n++];
	snprintf(b->name, sizeof(b->name), "%s", bucket);
	b->rules = ol_xmalloc((size_t)n + 1);
	memcpy(b->rules, v, (size_t)n);
	b->rules_len = (size_t)n;
	b->attrs = ol_xmalloc(len + 1);
	memcpy(b->attrs, attrs, len);
	b->attrs_len = len;
	return 0;
}

static int
vmode_of(const char *attrs, size_t len)
{
	const char *v;
	if (ol_s3_attr_get(attrs, len, "ver", &v) != 1)
		return OL_STORE_VER_OFF;
	return v[0] == 'E' ? OL_STORE_VER_ON : v[0] == 'S' ? OL_STORE_VER_SUSP : OL_STORE_VER_OFF;
}

static bool
scan_bucket(struct s3_lc_scanner *s, const struct lc_bucket *lb)
{
	struct bucket_scan b = {.s = s, .bucket = lb->name};
	const char *why;
	bool stop;
	if (ol_s3_parse_lifecycle(lb->rules, lb->rules_len, &b.lc, &why) < 0)
		return false;
	b.vmode = vmode_of(lb->attrs, lb->attrs_len);
	b.now = s3_now_ms();
	b.dms = day_ms(s->srv->cfg);
	stop = scan_versions(&b) || abort_uploads(&b);
	free(b.v);
	ol_s3_lc_free(&b.lc);
	return stop;
}

static bool
scan_all(struct s3_lc_scanner *s)
{
	struct lc_buckets bs = {0};
	bool stop = false;
	uint64_t t0 = ol_now_us();
	int rc = ol_store_bucket_list_attrs(s->srv->st, bucket_cb, &bs);
	if (rc < 0)
		ol_warn("lifecycle: listing the buckets failed: %s", strerror(-rc));
	for (size_t i = 0; i < bs.n && !stop; i++)
		stop = scan_bucket(s, &bs.b[i]);
	for (size_t i = 0; i < bs.n; i++) {
		free(bs.b[i].rules);
		free(bs.b[i].attrs);
	}
	free(bs.b);
	if (!stop) {
		__atomic_store_n(&s->last_us, ol_now_us() - t0, __ATOMIC_RELAXED);
		ol_counter_add(&s->scans, 1);
	}
	return stop;
}

static void *
lc_main(void *arg)
{
	struct s3_lc_scanner *s = arg;
	uint64_t interval = (uint64_t)(s->srv->cfg->s3_lc_interval_secs ?: 3600) * 1000000;
	while (!lc_wait(s, interval) && !scan_all(s))
		;
	return NULL;
}

void
s3_lc_start(struct ol_s3_server *srv)
{
	struct s3_lc_scanner *s = ol_xcalloc(1, sizeof(*s));
	pthread_condattr_t ca;
	s->srv = srv;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->thread, NULL, lc_main, s) != 0)
		ol_die("lifecycle: cannot start the scanner thread");
	pthread_setname_np(s->thread, "ol-lifecycle");
	ol_metrics_register(lc_metrics, s);
	srv->lc = s;
}

void
s3_lc_stop(struct ol_s3_server *srv)
{
	struct s3_lc_scanner *s = srv->lc;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	ol_metrics_unregister(lc_metrics, s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	srv->lc = NULL;
}
