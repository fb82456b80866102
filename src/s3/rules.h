/* s3/rules.h - the pure parts of S3 object lock and lifecycle (rules.c): their XML documents,
 * the lock entries of an object's metadata blob, ISO 8601 dates and the lifecycle rule match.
 * No store, no sockets, no clock (callers pass the time): hostile input safe and fuzzed
 * (tests/fuzz/fuzz_s3rules.c). */
#ifndef OL_S3_RULES_H
#define OL_S3_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "s3/s3util.h"

/* "2026-12-05T00:00:00Z", an optional fraction of a second, "Z" or a "+hh:mm" / "-hh:mm"
 * offset (AWS and botocore write the first two forms). 0 and *ms (Unix ms), or -EINVAL. */
int ol_s3_parse_iso_date(const char *s, size_t n, int64_t *ms);

/* ---- object lock ---- */
enum { OL_LOCK_NONE = 0, OL_LOCK_GOVERNANCE = 1, OL_LOCK_COMPLIANCE = 2 };
/* "GOVERNANCE" / "COMPLIANCE" (exact, as AWS): the mode, or -EINVAL. */
int ol_s3_lock_mode_parse(const char *s, size_t n);
const char *ol_s3_lock_mode_name(int mode); /* "" for none */

/* ObjectLockConfiguration: enabled (ObjectLockEnabled = Enabled), and the default retention
 * of its Rule (mode NONE: no rule). */
struct ol_s3_lock_cfg {
	bool enabled;
	int mode;
	unsigned days, years; /* exactly one of them > 0 when mode is set */
};
/* 0; -EBADMSG MalformedXML (not that document, ObjectLockEnabled other than Enabled, a Rule
 * without DefaultRetention or Mode, both Days and Years or neither, an unknown mode);
 * -EINVAL (Days or Years not a positive integer: InvalidArgument, *why says so). */
int ol_s3_parse_lock_cfg(const char *xml, size_t n, struct ol_s3_lock_cfg *c, const char **why);
/* The stored form ("G:D:30", "C:Y:1"; "" for lock enabled without a rule) and back (-EINVAL). */
void ol_s3_lock_cfg_encode(const struct ol_s3_lock_cfg *c, struct ol_buf *out);
int ol_s3_lock_cfg_decode(const char *s, size_t n, struct ol_s3_lock_cfg *c);
/* The GET ?object-lock document. */
void ol_s3_lock_cfg_xml(const struct ol_s3_lock_cfg *c, struct ol_buf *x);

/* Retention body: mode and date both set, or neither (an empty Retention: removal). 0,
 * -EBADMSG (not that document, bad mode, bad date, only one of the two). */
struct ol_s3_retention {
	int mode;	  /* OL_LOCK_NONE: removal */
	int64_t until_ms; /* Unix ms */
};
int ol_s3_parse_retention(const char *xml, size_t n, struct ol_s3_retention *r);
/* LegalHold body: *on 1 (ON) or 0 (OFF). 0, -EBADMSG. */
int ol_s3_parse_legal_hold(const char *xml, size_t n, int *on);

/* An object version's lock, from the entries of its metadata blob (ol-lock-mode,
 * ol-lock-until in Unix ms, ol-legal-hold). Absent entries: NONE, 0, false. */
#define OL_S3_META_LOCK_MODE  "ol-lock-mode"
#define OL_S3_META_LOCK_UNTIL "ol-lock-until"
#define OL_S3_META_LEGAL_HOLD "ol-legal-hold"
struct ol_s3_obj_lock {
	int mode;
	int64_t until_ms;
	int hold; /* -1 never set, 0 OFF, 1 ON */
};
void ol_s3_obj_lock_get(const char *meta, size_t n, struct ol_s3_obj_lock *l);
/* meta (n bytes) less its lock entries, plus l's (mode NONE / hold -1: none), into out. */
void ol_s3_obj_lock_set(const char *meta, size_t n, const struct ol_s3_obj_lock *l,
			struct ol_buf *out);
/* Does the lock keep the version from being deleted at now_ms? 2: a legal hold or
 * COMPLIANCE retention (nobody may); 1: GOVERNANCE retention (a bypass may); 0: free. */
int ol_s3_obj_lock_blocks(const struct ol_s3_obj_lock *l, int64_t now_ms);

/* ---- lifecycle ---- */
#define OL_S3_LC_MAX_RULES 1000
#define OL_S3_LC_ID_MAX	   255
struct ol_s3_lc_rule {
	char id[OL_S3_LC_ID_MAX + 1];
	bool enabled;
	char prefix[OL_S3_MAX_KEY + 1]; /* "" matches every key */
	size_t prefix_len;
	struct ol_s3_tags tags;	    /* every one must be on the object */
	uint64_t size_gt, size_lt;  /* ObjectSizeGreaterThan / LessThan (0: none) */
	bool legacy_prefix;	    /* <Prefix> directly in the Rule (no Filter) */
	unsigned exp_days;	    /* Expiration: Days (0: none) */
	int64_t exp_date_ms;	    /* Expiration: Date (0: none) */
	bool exp_marker;	    /* Expiration: ExpiredObjectDeleteMarker */
	unsigned nc_days, nc_newer; /* NoncurrentVersionExpiration */
	unsigned abort_days;	    /* AbortIncompleteMultipartUpload */
};
struct ol_s3_lc {
	struct ol_s3_lc_rule *rules; /* malloc'd */
	unsigned n;
};
/* A LifecycleConfiguration, checked as AWS checks it. 0 (free lc with ol_s3_lc_free), or with
 * lc freed and *why the message: -EBADMSG MalformedXML, -EINVAL InvalidArgument, -EPROTO
 * InvalidRequest, -ENOTSUP NotImplemented (transitions: there are no other storage classes). */
int ol_s3_parse_lifecycle(const char *xml, size_t n, struct ol_s3_lc *lc, const char **why);
void ol_s3_lc_free(struct ol_s3_lc *lc);
/* The GET ?lifecycle document. */
void ol_s3_lc_xml(const struct ol_s3_lc *lc, struct ol_buf *x);
/* Does an enabled rule's filter take this object? tags: its stored x-amz-tagging form. */
bool ol_s3_lc_match(const struct ol_s3_lc_rule *r, const char *key, size_t kl, uint64_t size,
		    const char *tags, size_t tags_len);
/* When something that started at start_ms is due after days lifecycle days of day_ms each: as
 * AWS, start + days, rounded up to the next day boundary (midnight UTC for real days). */
int64_t ol_s3_lc_due(int64_t start_ms, unsigned days, int64_t day_ms);

#endif
