/* s3/rules.c - object lock and lifecycle documents, object lock entries, ISO dates (pure;
 * see rules.h). The XML walk is xmlparse.c's (s3/xp.h): each parser collects what it sees by
 * element path, then checks the whole as AWS does. */
#include "s3/rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "s3/xp.h"

/* ---- dates ---- */

static int
digits(const char *s, size_t n, size_t at, size_t cnt, int *out)
{
	int v = 0;
	if (at + cnt > n)
		return -EINVAL;
	for (size_t i = at; i < at + cnt; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int
ol_s3_parse_iso_date(const char *s, size_t n, int64_t *ms)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0, frac = 0;
	size_t i = 19;
	struct tm tm = {0};
	if (n < 20 || digits(s, n, 0, 4, &y) || s[4] != '-' || digits(s, n, 5, 2, &mo) ||
	    s[7] != '-' || digits(s, n, 8, 2, &d) || s[10] != 'T' || digits(s, n, 11, 2, &h) ||
	    s[13] != ':' || digits(s, n, 14, 2, &mi) || s[16] != ':' || digits(s, n, 17, 2, &sec))
		return -EINVAL;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	if (s[i] == '.') {
		size_t nd = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, nd++)
			if (nd < 3)
				frac = frac * 10 + (s[i] - '0');
		if (nd == 0 || nd > 9)
			return -EINVAL;
		for (; nd < 3; nd++)
			frac *= 10;
	}
	if (i < n && s[i] == 'Z') {
		i++;
	} else if (i < n && (s[i] == '+' || s[i] == '-')) {
		if (digits(s, n, i + 1, 2, &oh) || i + 3 >= n || s[i + 3] != ':' ||
		    digits(s, n, i + 4, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		if (s[i] == '-')
			oh = -oh, om = -om;
		i += 6;
	} else {
		return -EINVAL;
	}
	if (i != n)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ms = ((int64_t)t - (int64_t)oh * 3600 - (int64_t)om * 60) * 1000 + frac;
	return 0;
}

/* ---- small helpers ---- */

/* The element path below the root joined by '/' ("Rule/Filter/And/Tag/Key"). */
static void
path_of(const struct xp *x, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	for (int i = 1; i < x->depth && o < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%s", i > 1 ? "/" : "", x->path[i]);
}

static bool
text_is(const char *t, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(t, want, n) == 0;
}

/* A decimal count: digits only, <= max. 0, or -EINVAL. */
static int
count_of(const char *t, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 19)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(t[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int
ol_s3_lock_mode_parse(const char *s, size_t n)
{
	if (text_is(s, n, "GOVERNANCE"))
		return OL_LOCK_GOVERNANCE;
	if (text_is(s, n, "COMPLIANCE"))
		return OL_LOCK_COMPLIANCE;
	return -EINVAL;
}

const char *
ol_s3_lock_mode_name(int mode)
{
	return mode == OL_LOCK_GOVERNANCE   ? "GOVERNANCE"
	       : mode == OL_LOCK_COMPLIANCE ? "COMPLIANCE"
					    : "";
}

/* ---- ObjectLockConfiguration ---- */

struct lockcfg_ctx {
	struct ol_s3_lock_cfg *c;
	bool rule, mode_seen, bad;
	int days_seen, years_seen;
	int64_t days, years; /* -1: not a positive integer */
};

static int
lockcfg_end(struct xp *x, const char *t, size_t n)
{
	struct lockcfg_ctx *c = x->arg;
	char p[128];
	uint64_t v;
	if (x->depth == 1)
		return strcmp(x->path[0], "ObjectLockConfiguration") == 0 ? 0 : -1;
	path_of(x, p, sizeof(p));
	if (strcmp(p, "ObjectLockEnabled") == 0) {
		c->c->enabled = text_is(t, n, "Enabled");
		c->bad |= !c->c->enabled;
	} else if (strcmp(p, "Rule") == 0) {
		c->rule = true;
	} else if (strcmp(p, "Rule/DefaultRetention/Mode") == 0) {
		c->c->mode = ol_s3_lock_mode_parse(t, n);
		c->mode_seen = true;
		c->bad |= c->c->mode < 0;
	} else if (strcmp(p, "Rule/DefaultRetention/Days") == 0) {
		c->days_seen++;
		c->days = count_of(t, n, 36500, &v) == 0 && v > 0 ? (int64_t)v : -1;
	} else if (strcmp(p, "Rule/DefaultRetention/Years") == 0) {
		c->years_seen++;
		c->years = count_of(t, n, 100, &v) == 0 && v > 0 ? (int64_t)v : -1;
	}
	return 0;
}

int
ol_s3_parse_lock_cfg(const char *xml, size_t n, struct ol_s3_lock_cfg *out, const char **why)
{
	struct lockcfg_ctx c = {.c = out};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	int rc;
	memset(out, 0, sizeof(*out));
	*why = NULL;
	x->on_end = lockcfg_end;
	x->arg = &c;
	rc = ol_s3_xp_run(x, xml, n);
	free(x);
	if (rc == 0 && (c.bad || (c.rule && (!c.mode_seen || c.days_seen + c.years_seen != 1))))
		rc = -EBADMSG;
	if (rc == 0 && (c.days < 0 || c.years < 0)) {
		*why = c.days < 0 ? "Default retention period must be a positive integer value for "
				    "'Days'"
				  : "Default retention period must be a positive integer value for "
				    "'Years'";
		rc = -EINVAL;
	}
	if (rc == 0 && !c.rule)
		out->mode = OL_LOCK_NONE;
	out->days = (unsigned)(c.days > 0 ? c.days : 0);
	out->years = (unsigned)(c.years > 0 ? c.years : 0);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

void
ol_s3_lock_cfg_encode(const struct ol_s3_lock_cfg *c, struct ol_buf *out)
{
	if (c->mode == OL_LOCK_NONE)
		return;
	ol_buf_addf(out, "%c:%c:%u", c->mode == OL_LOCK_COMPLIANCE ? 'C' : 'G',
		    c->years ? 'Y' : 'D', c->years ? c->years : c->days);
}

int
ol_s3_lock_cfg_decode(const char *s, size_t n, struct ol_s3_lock_cfg *c)
{
	uint64_t v;
	memset(c, 0, sizeof(*c));
	c->enabled = true;
	if (n == 0)
		return 0;
	if (n < 5 || (s[0] != 'C' && s[0] != 'G') || s[1] != ':' || (s[2] != 'Y' && s[2] != 'D') ||
	    s[3] != ':' || count_of(s + 4, n - 4, 36500, &v) < 0 || v == 0)
		return -EINVAL;
	c->mode = s[0] == 'C' ? OL_LOCK_COMPLIANCE : OL_LOCK_GOVERNANCE;
	if (s[2] == 'Y')
		c->years = (unsigned)v;
	else
		c->days = (unsigned)v;
	return 0;
}

void
ol_s3_lock_cfg_xml(const struct ol_s3_lock_cfg *c, struct ol_buf *x)
{
	ol_s3_xml_open_root(x, "ObjectLockConfiguration");
	ol_s3_xml_elem(x, "ObjectLockEnabled", "Enabled");
	if (c->mode != OL_LOCK_NONE) {
		ol_buf_adds(x, "<Rule><DefaultRetention>");
		ol_s3_xml_elem(x, "Mode", ol_s3_lock_mode_name(c->mode));
		ol_s3_xml_elemu(x, c->years ? "Years" : "Days", c->years ? c->years : c->days);
		ol_buf_adds(x, "</DefaultRetention></Rule>");
	}
	ol_buf_adds(x, "</ObjectLockConfiguration>");
}

/* ---- Retention, LegalHold ---- */

struct ret_ctx {
	struct ol_s3_retention *r;
	bool mode, date, bad;
};

static int
ret_end(struct xp *x, const char *t, size_t n)
{
	struct ret_ctx *c = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "Retention") == 0 ? 0 : -1;
	if (x->depth != 2)
		return 0;
	if (strcmp(x->path[1], "Mode") == 0) {
		c->r->mode = ol_s3_lock_mode_parse(t, n);
		c->mode = true;
		c->bad |= c->r->mode < 0;
	} else if (strcmp(x->path[1], "RetainUntilDate") == 0) {
		c->date = true;
		c->bad |= ol_s3_parse_iso_date(t, n, &c->r->until_ms) < 0;
	}
	return 0;
}

int
ol_s3_parse_retention(const char *xml, size_t n, struct ol_s3_retention *r)
{
	struct ret_ctx c = {.r = r};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	int rc;
	memset(r, 0, sizeof(*r));
	x->on_end = ret_end;
	x->arg = &c;
	rc = ol_s3_xp_run(x, xml, n);
	free(x);
	if (rc == 0 && (c.bad || c.mode != c.date))
		rc = -EBADMSG;
	if (rc < 0)
		memset(r, 0, sizeof(*r));
	return rc;
}

struct hold_ctx {
	int on; /* -1 none seen, -2 bad */
};

static int
hold_end(struct xp *x, const char *t, size_t n)
{
	struct hold_ctx *c = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "LegalHold") == 0 ? 0 : -1;
	if (x->depth == 2 && strcmp(x->path[1], "Status") == 0)
		c->on = text_is(t, n, "ON") ? 1 : text_is(t, n, "OFF") ? 0 : -2;
	return 0;
}

int
ol_s3_parse_legal_hold(const char *xml, size_t n, int *on)
{
	struct hold_ctx c = {-1};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	int rc;
	x->on_end = hold_end;
	x->arg = &c;
	rc = ol_s3_xp_run(x, xml, n);
	free(x);
	if (rc == 0 && c.on < 0)
		rc = -EBADMSG;
	*on = rc == 0 ? c.on : 0;
	return rc;
}

/* ---- lock entries of a metadata blob ---- */

void
ol_s3_obj_lock_get(const char *meta, size_t n, struct ol_s3_obj_lock *l)
{
	const char *v;
	long vl;
	uint64_t u;
	memset(l, 0, sizeof(*l));
	l->hold = -1;
	vl = ol_s3_meta_get(meta, n, OL_S3_META_LOCK_MODE, &v);
	if (vl > 0) {
		int m = ol_s3_lock_mode_parse(v, (size_t)vl);
		l->mode = m > 0 ? m : OL_LOCK_NONE;
	}
	vl = ol_s3_meta_get(meta, n, OL_S3_META_LOCK_UNTIL, &v);
	if (vl > 0 && count_of(v, (size_t)vl, INT64_MAX, &u) == 0)
		l->until_ms = (int64_t)u;
	else
		l->mode = OL_LOCK_NONE;
	vl = ol_s3_meta_get(meta, n, OL_S3_META_LEGAL_HOLD, &v);
	if (vl > 0)
		l->hold = text_is(v, (size_t)vl, "ON");
}

static bool
is_lock_entry(const struct ol_s3_meta_kv *kv)
{
	static const char *const names[] = {OL_S3_META_LOCK_MODE, OL_S3_META_LOCK_UNTIL,
					    OL_S3_META_LEGAL_HOLD};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (kv->name_len == strlen(names[i]) && !memcmp(kv->name, names[i], kv->name_len))
			return true;
	return false;
}

void
ol_s3_obj_lock_set(const char *meta, size_t n, const struct ol_s3_obj_lock *l, struct ol_buf *out)
{
	struct ol_s3_meta_kv kv;
	size_t pos = 0;
	char num[24];
	while (meta && ol_s3_meta_next(meta, n, &pos, &kv)) {
		if (is_lock_entry(&kv))
			continue;
		ol_buf_add(out, kv.name, kv.name_len);
		ol_buf_add(out, ": ", 2);
		ol_buf_add(out, kv.value, kv.value_len);
		ol_buf_add(out, "\n", 1);
	}
	if (l->mode != OL_LOCK_NONE) {
		snprintf(num, sizeof(num), "%lld", (long long)l->until_ms);
		ol_s3_meta_add(out, OL_S3_META_LOCK_MODE, ol_s3_lock_mode_name(l->mode));
		ol_s3_meta_add(out, OL_S3_META_LOCK_UNTIL, num);
	}
	if (l->hold >= 0)
		ol_s3_meta_add(out, OL_S3_META_LEGAL_HOLD, l->hold ? "ON" : "OFF");
}

int
ol_s3_obj_lock_blocks(const struct ol_s3_obj_lock *l, int64_t now_ms)
{
	if (l->hold == 1)
		return 2;
	if (l->mode == OL_LOCK_NONE || l->until_ms <= now_ms)
		return 0;
	return l->mode == OL_LOCK_COMPLIANCE ? 2 : 1;
}

/* ---- LifecycleConfiguration ---- */

struct lc_ctx {
	struct ol_s3_lc *lc;
	struct ol_s3_lc_rule cur;
	unsigned cap;
	const char *why; /* first semantic error found while collecting */
	int err;	 /* its code */
	char tkey[OL_S3_TAG_BYTES + 1], tval[OL_S3_TAG_BYTES + 1];
	bool tkey_seen, status_seen, filter, filter_prefix;
	unsigned filter_kids, exp_kids;
	bool exp_days_date;
};

static void
lc_fail(struct lc_ctx *c, int err, const char *why)
{
	if (!c->err) {
		c->err = err;
		c->why = why;
	}
}

/* A count element of a rule: positive (or zero where allowed), else the error why. */
static void
lc_count(struct lc_ctx *c, const char *t, size_t n, uint64_t max, bool zero_ok, unsigned *out,
	 const char *why)
{
	uint64_t v;
	if (count_of(t, n, max, &v) < 0 || (!zero_ok && v == 0)) {
		lc_fail(c, -EINVAL, why);
		return;
	}
	*out = (unsigned)v;
}

static int
lc_filter(struct lc_ctx *c, const char *p, const char *t, size_t n)
{
	const char *leaf = strrchr(p, '/') + 1, *rest = p + 12; /* after "Rule/Filter/" */
	uint64_t v;
	if (!strchr(rest, '/'))
		c->filter_kids++; /* Prefix, Tag, And or a size: one of them */
	if (strcmp(rest, "And") == 0)
		return 0;
	if (strcmp(leaf, "Prefix") == 0) {
		if (n > OL_S3_MAX_KEY)
			return -1;
		memcpy(c->cur.prefix, t, n);
		c->cur.prefix_len = n;
	} else if (strcmp(leaf, "Key") == 0) {
		if (n > OL_S3_TAG_BYTES)
			return -1;
		memcpy(c->tkey, t, n);
		c->tkey[n] = '\0';
		c->tkey_seen = true;
	} else if (strcmp(leaf, "Value") == 0) {
		if (n > OL_S3_TAG_BYTES)
			return -1;
		memcpy(c->tval, t, n);
		c->tval[n] = '\0';
	} else if (strcmp(leaf, "Tag") == 0) {
		if (!c->tkey_seen || ol_s3_tags_add(&c->cur.tags, c->tkey, strlen(c->tkey), c->tval,
						    strlen(c->tval)) < 0)
			return -1;
		c->tkey_seen = false;
		c->tval[0] = '\0';
	} else if (strcmp(leaf, "ObjectSizeGreaterThan") == 0 ||
		   strcmp(leaf, "ObjectSizeLessThan") == 0) {
		if (count_of(t, n, UINT64_MAX / 2, &v) < 0)
			lc_fail(c, -EINVAL, "Object size must be a non-negative integer");
		else if (leaf[10] == 'G')
			c->cur.size_gt = v;
		else
			c->cur.size_lt = v;
	}
	return 0;
}

static void
lc_expiration(struct lc_ctx *c, const char *leaf, const char *t, size_t n)
{
	int64_t ms;
	c->exp_kids++;
	if (strcmp(leaf, "Days") == 0) {
		lc_count(c, t, n, 1000000, false, &c->cur.exp_days,
			 "'Days' for Expiration action must be a positive integer");
		c->exp_days_date = true;
	} else if (strcmp(leaf, "Date") == 0) {
		c->exp_days_date = true;
		if (ol_s3_parse_iso_date(t, n, &ms) < 0 || ms <= 0)
			lc_fail(c, -EINVAL, "Invalid date in Expiration action");
		else if (ms % 86400000 != 0)
			lc_fail(c, -EINVAL, "'Date' must be at midnight GMT");
		else
			c->cur.exp_date_ms = ms;
	} else if (strcmp(leaf, "ExpiredObjectDeleteMarker") == 0) {
		if (text_is(t, n, "true"))
			c->cur.exp_marker = true;
		else if (!text_is(t, n, "false"))
			lc_fail(c, -EBADMSG, NULL);
	}
}

static int
lc_end(struct xp *x, const char *t, size_t n)
{
	struct lc_ctx *c = x->arg;
	char p[160];
	if (x->depth == 1)
		return strcmp(x->path[0], "LifecycleConfiguration") == 0 ? 0 : -1;
	if (strcmp(x->path[1], "Rule") != 0)
		return -1;
	path_of(x, p, sizeof(p));
	const char *leaf = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
	if (strcmp(p, "Rule") == 0)
		return 1; /* the caller ends the rule */
	if (strcmp(p, "Rule/ID") == 0) {
		if (n > OL_S3_LC_ID_MAX)
			lc_fail(c, -EINVAL, "ID length should not exceed allowed limit of 255");
		else
			memcpy(c->cur.id, t, n);
	} else if (strcmp(p, "Rule/Status") == 0) {
		c->status_seen = true;
		c->cur.enabled = text_is(t, n, "Enabled");
		if (!c->cur.enabled && !text_is(t, n, "Disabled"))
			lc_fail(c, -EBADMSG, NULL);
	} else if (strcmp(p, "Rule/Prefix") == 0) {
		if (n > OL_S3_MAX_KEY)
			return -1;
		memcpy(c->cur.prefix, t, n);
		c->cur.prefix_len = n;
		c->cur.legacy_prefix = true;
	} else if (strcmp(p, "Rule/Filter") == 0) {
		c->filter = true;
	} else if (strncmp(p, "Rule/Filter/", 12) == 0) {
		return lc_filter(c, p, t, n);
	} else if (strncmp(p, "Rule/Expiration/", 16) == 0) {
		lc_expiration(c, leaf, t, n);
	} else if (strcmp(p, "Rule/NoncurrentVersionExpiration/NoncurrentDays") == 0) {
		lc_count(c, t, n, 1000000, false, &c->cur.nc_days,
			 "'NoncurrentDays' for NoncurrentVersionExpiration action must be a "
			 "positive integer");
	} else if (strcmp(p, "Rule/NoncurrentVersionExpiration/NewerNoncurrentVersions") == 0) {
		lc_count(c, t, n, 100, false, &c->cur.nc_newer,
			 "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must "
			 "be a positive integer up to 100");
	} else if (strcmp(p, "Rule/AbortIncompleteMultipartUpload/DaysAfterInitiation") == 0) {
		lc_count(c, t, n, 1000000, false, &c->cur.abort_days,
			 "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be "
			 "a positive integer");
	} else if (strncmp(p, "Rule/Transition", 15) == 0 ||
		   strncmp(p, "Rule/NoncurrentVersionTransition", 32) == 0) {
		lc_fail(c, -ENOTSUP,
			"Transition actions are not supported: there is one storage "
			"class");
	}
	return 0;
}

/* The rule just ended: its checks, then into the list. 0 or -1 (malformed). */
static int
lc_rule_done(struct lc_ctx *c)
{
	struct ol_s3_lc_rule *r = &c->cur;
	bool has_exp = r->exp_days || r->exp_date_ms || r->exp_marker;
	int rc = 0;
	if (!c->status_seen || (c->filter && r->legacy_prefix) ||
	    (!c->filter && !r->legacy_prefix) || c->filter_kids > 1 ||
	    (r->exp_marker && c->exp_days_date) || (r->exp_days && r->exp_date_ms) ||
	    (c->exp_kids && !has_exp && !c->err))
		rc = -1;
	else if (!has_exp && !r->nc_days && !r->abort_days)
		lc_fail(c, -EPROTO, "At least one action needs to be specified in a rule");
	else if (r->nc_newer && !r->nc_days)
		rc = -1;
	else if (r->size_lt && r->size_gt >= r->size_lt)
		lc_fail(c, -EINVAL, "ObjectSizeGreaterThan must be less than ObjectSizeLessThan");
	else if (r->tags.n && r->exp_marker)
		lc_fail(c, -EPROTO,
			"ExpiredObjectDeleteMarker cannot be specified with a tag-based "
			"filter");
	else if (r->tags.n && r->abort_days)
		lc_fail(c, -EPROTO,
			"AbortIncompleteMultipartUpload cannot be specified with Tags.");
	for (unsigned i = 0; i < c->lc->n && rc == 0 && r->id[0]; i++)
		if (strcmp(c->lc->rules[i].id, r->id) == 0)
			lc_fail(c, -EINVAL,
				"Rule ID must be unique. Found same ID for more than one rule");
	if (rc == 0 && c->lc->n >= OL_S3_LC_MAX_RULES)
		rc = -1;
	if (rc < 0) {
		ol_s3_tags_free(&r->tags);
	} else {
		if (c->lc->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 4;
			c->lc->rules = ol_xrealloc(c->lc->rules, c->cap * sizeof(*c->lc->rules));
		}
		c->lc->rules[c->lc->n++] = *r;
	}
	memset(r, 0, sizeof(*r));
	c->status_seen = c->filter = c->tkey_seen = c->exp_days_date = false;
	c->filter_kids = c->exp_kids = 0;
	return rc;
}

static int
lc_end_rule(struct xp *x, const char *t, size_t n)
{
	int rc = lc_end(x, t, n);
	if (rc == 1)
		return lc_rule_done(x->arg);
	return rc;
}

int
ol_s3_parse_lifecycle(const char *xml, size_t n, struct ol_s3_lc *lc, const char **why)
{
	struct lc_ctx *c = ol_xcalloc(1, sizeof(*c));
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	int rc;
	memset(lc, 0, sizeof(*lc));
	c->lc = lc;
	x->on_end = lc_end_rule;
	x->arg = c;
	rc = ol_s3_xp_run(x, xml, n);
	free(x);
	if (rc == 0 && c->err)
		rc = c->err;
	if (rc == 0 && lc->n == 0)
		rc = -EBADMSG;
	*why = rc < 0 && rc != -EBADMSG ? c->why : NULL;
	if (rc < 0) {
		ol_s3_tags_free(&c->cur.tags);
		ol_s3_lc_free(lc);
	}
	free(c);
	return rc;
}

void
ol_s3_lc_free(struct ol_s3_lc *lc)
{
	for (unsigned i = 0; i < lc->n; i++)
		ol_s3_tags_free(&lc->rules[i].tags);
	free(lc->rules);
	memset(lc, 0, sizeof(*lc));
}

static void
lc_tag_xml(struct ol_buf *x, const struct ol_s3_tags *t, unsigned i)
{
	ol_buf_adds(x, "<Tag>");
	ol_s3_xml_elem(x, "Key", t->key[i]);
	ol_s3_xml_elem(x, "Value", t->val[i]);
	ol_buf_adds(x, "</Tag>");
}

static void
lc_filter_xml(struct ol_buf *x, const struct ol_s3_lc_rule *r)
{
	unsigned parts = (r->prefix_len > 0) + r->tags.n + (r->size_gt > 0) + (r->size_lt > 0);
	if (r->legacy_prefix) {
		ol_s3_xml_elemn(x, "Prefix", r->prefix, r->prefix_len);
		return;
	}
	ol_buf_adds(x, parts > 1 ? "<Filter><And>" : "<Filter>");
	if (r->prefix_len || parts == 0)
		ol_s3_xml_elemn(x, "Prefix", r->prefix, r->prefix_len);
	for (unsigned i = 0; i < r->tags.n; i++)
		lc_tag_xml(x, &r->tags, i);
	if (r->size_gt)
		ol_s3_xml_elemu(x, "ObjectSizeGreaterThan", r->size_gt);
	if (r->size_lt)
		ol_s3_xml_elemu(x, "ObjectSizeLessThan", r->size_lt);
	ol_buf_adds(x, parts > 1 ? "</And></Filter>" : "</Filter>");
}

void
ol_s3_lc_xml(const struct ol_s3_lc *lc, struct ol_buf *x)
{
	char date[32];
	ol_s3_xml_open_root(x, "LifecycleConfiguration");
	for (unsigned i = 0; i < lc->n; i++) {
		const struct ol_s3_lc_rule *r = &lc->rules[i];
		ol_buf_adds(x, "<Rule>");
		if (r->id[0])
			ol_s3_xml_elem(x, "ID", r->id);
		lc_filter_xml(x, r);
		ol_s3_xml_elem(x, "Status", r->enabled ? "Enabled" : "Disabled");
		if (r->exp_days || r->exp_date_ms || r->exp_marker) {
			ol_buf_adds(x, "<Expiration>");
			if (r->exp_days)
				ol_s3_xml_elemu(x, "Days", r->exp_days);
			if (r->exp_date_ms) {
				ol_s3_iso_date(r->exp_date_ms, date);
				ol_s3_xml_elem(x, "Date", date);
			}
			if (r->exp_marker)
				ol_s3_xml_elem(x, "ExpiredObjectDeleteMarker", "true");
			ol_buf_adds(x, "</Expiration>");
		}
		if (r->nc_days) {
			ol_buf_adds(x, "<NoncurrentVersionExpiration>");
			ol_s3_xml_elemu(x, "NoncurrentDays", r->nc_days);
			if (r->nc_newer)
				ol_s3_xml_elemu(x, "NewerNoncurrentVersions", r->nc_newer);
			ol_buf_adds(x, "</NoncurrentVersionExpiration>");
		}
		if (r->abort_days) {
			ol_buf_adds(x, "<AbortIncompleteMultipartUpload>");
			ol_s3_xml_elemu(x, "DaysAfterInitiation", r->abort_days);
			ol_buf_adds(x, "</AbortIncompleteMultipartUpload>");
		}
		ol_buf_adds(x, "</Rule>");
	}
	ol_buf_adds(x, "</LifecycleConfiguration>");
}

bool
ol_s3_lc_match(const struct ol_s3_lc_rule *r, const char *key, size_t kl, uint64_t size,
	       const char *tags, size_t tags_len)
{
	struct ol_s3_tags have;
	bool ok = true;
	if (!r->enabled || kl < r->prefix_len || memcmp(key, r->prefix, r->prefix_len) != 0)
		return false;
	if ((r->size_gt && size <= r->size_gt) || (r->size_lt && size >= r->size_lt))
		return false;
	if (r->tags.n == 0)
		return true;
	if (!tags || ol_s3_tags_parse_query(tags, tags_len, &have) < 0)
		return false;
	for (unsigned i = 0; i < r->tags.n && ok; i++) {
		bool found = false;
		for (unsigned j = 0; j < have.n && !found; j++)
			found = strcmp(have.key[j], r->tags.key[i]) == 0 &&
				strcmp(have.val[j], r->tags.val[i]) == 0;
		ok = found;
	}
	ol_s3_tags_free(&have);
	return ok;
}

int64_t
ol_s3_lc_due(int64_t start_ms, unsigned days, int64_t day_ms)
{
	int64_t t = start_ms + (int64_t)days * day_ms;
	if (day_ms <= 0)
		return t;
	return (t + day_ms - 1) / day_ms * day_ms;
}
