/* Unit tests of s3/rules.c: ISO dates, the object lock documents and metadata entries, the
 * lock decision, the lifecycle parser's checks (each error class AWS answers), its match and
 * its due times. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3/rules.h"
#include "tap.h"

#define S(x) x, strlen(x)

static void
test_dates(void)
{
	int64_t ms;
	ok(ol_s3_parse_iso_date(S("2030-01-02T03:04:05Z"), &ms) == 0 && ms == 1893553445000LL,
	   "Z date");
	ok(ol_s3_parse_iso_date(S("2030-01-02T03:04:05.250Z"), &ms) == 0 && ms == 1893553445250LL,
	   "fraction kept to the ms");
	ok(ol_s3_parse_iso_date(S("2030-01-02T04:04:05+01:00"), &ms) == 0 && ms == 1893553445000LL,
	   "offset applied");
	ok(ol_s3_parse_iso_date(S("2030-01-02T03:04:05"), &ms) == -EINVAL, "no zone refused");
	ok(ol_s3_parse_iso_date(S("2030-13-02T03:04:05Z"), &ms) == -EINVAL, "month 13 refused");
	ok(ol_s3_parse_iso_date(S("2030-01-02T03:04:05Zjunk"), &ms) == -EINVAL, "trailing junk");
	ok(ol_s3_parse_iso_date(S("2030-01-02T03:04:05.Z"), &ms) == -EINVAL, "empty fraction");
	ok(ol_s3_parse_iso_date("2030-01-02T03:04", 16, &ms) == -EINVAL, "short");
}

static void
test_lock_docs(void)
{
	struct ol_s3_lock_cfg c;
	struct ol_s3_retention r;
	struct ol_buf b = {0};
	const char *why;
	int on;
	const char *cfg = "<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled>"
			  "<Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Years>2</Years>"
			  "</DefaultRetention></Rule></ObjectLockConfiguration>";
	ok(ol_s3_parse_lock_cfg(S(cfg), &c, &why) == 0 && c.enabled &&
	       c.mode == OL_LOCK_COMPLIANCE && c.years == 2 && c.days == 0,
	   "lock configuration with a rule");
	ol_s3_lock_cfg_encode(&c, &b);
	ok(strcmp(ol_buf_cstr(&b), "C:Y:2") == 0, "stored form");
	ok(ol_s3_lock_cfg_decode(b.p, b.len, &c) == 0 && c.years == 2 &&
	       c.mode == OL_LOCK_COMPLIANCE,
	   "and back");
	ol_buf_free(&b);
	ok(ol_s3_lock_cfg_decode("", 0, &c) == 0 && c.enabled && c.mode == OL_LOCK_NONE,
	   "empty: enabled, no rule");
	ok(ol_s3_parse_lock_cfg(S("<ObjectLockConfiguration><ObjectLockEnabled>Enabled"
				  "</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE"
				  "</Mode><Days>1</Days><Years>1</Years></DefaultRetention></Rule>"
				  "</ObjectLockConfiguration>"),
				&c, &why) == -EBADMSG,
	   "Days and Years: malformed");
	ok(ol_s3_parse_lock_cfg(S("<ObjectLockConfiguration><ObjectLockEnabled>Enabled"
				  "</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE"
				  "</Mode><Days>0</Days></DefaultRetention></Rule>"
				  "</ObjectLockConfiguration>"),
				&c, &why) == -EINVAL &&
	       why && strstr(why, "Days"),
	   "Days 0: InvalidArgument naming Days");
	ok(ol_s3_parse_lock_cfg(S("<Other/>"), &c, &why) == -EBADMSG, "wrong root");
	ok(ol_s3_parse_retention(S("<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>"
				   "2030-01-01T00:00:00Z</RetainUntilDate></Retention>"),
				 &r) == 0 &&
	       r.mode == OL_LOCK_GOVERNANCE && r.until_ms == 1893456000000LL,
	   "retention");
	ok(ol_s3_parse_retention(S("<Retention/>"), &r) == 0 && r.mode == OL_LOCK_NONE,
	   "empty retention: removal");
	ok(ol_s3_parse_retention(S("<Retention><Mode>GOVERNANCE</Mode></Retention>"), &r) ==
	       -EBADMSG,
	   "mode without a date");
	ok(ol_s3_parse_retention(S("<Retention><Mode>governance</Mode><RetainUntilDate>"
				   "2030-01-01T00:00:00Z</RetainUntilDate></Retention>"),
				 &r) == -EBADMSG,
	   "modes are upper case");
	ok(ol_s3_parse_legal_hold(S("<LegalHold><Status>ON</Status></LegalHold>"), &on) == 0 &&
	       on == 1,
	   "legal hold ON");
	ok(ol_s3_parse_legal_hold(S("<LegalHold><Status>on</Status></LegalHold>"), &on) == -EBADMSG,
	   "legal hold on: malformed");
}

static void
test_lock_entries(void)
{
	struct ol_s3_obj_lock l = {OL_LOCK_GOVERNANCE, 5000, 1}, g;
	struct ol_buf b = {0}, b2 = {0};
	const char *meta = "content-type: text/plain\nol-lock-mode: COMPLIANCE\n";
	ol_s3_obj_lock_set(meta, strlen(meta), &l, &b);
	ok(strstr(ol_buf_cstr(&b), "content-type: text/plain\n") &&
	       !strstr(ol_buf_cstr(&b), "COMPLIANCE"),
	   "old lock entries replaced, others kept");
	ol_s3_obj_lock_get(b.p, b.len, &g);
	ok(g.mode == OL_LOCK_GOVERNANCE && g.until_ms == 5000 && g.hold == 1, "read back");
	ok(ol_s3_obj_lock_blocks(&g, 1000) == 2, "a legal hold blocks everyone");
	g.hold = 0;
	ok(ol_s3_obj_lock_blocks(&g, 1000) == 1, "GOVERNANCE: a bypass may");
	ok(ol_s3_obj_lock_blocks(&g, 5000) == 0, "expired retention blocks nothing");
	g.mode = OL_LOCK_COMPLIANCE;
	ok(ol_s3_obj_lock_blocks(&g, 4999) == 2, "COMPLIANCE: nobody may");
	l = (struct ol_s3_obj_lock){OL_LOCK_NONE, 0, -1};
	ol_s3_obj_lock_set(b.p, b.len, &l, &b2);
	ol_s3_obj_lock_get(b2.p, b2.len, &g);
	ok(g.mode == OL_LOCK_NONE && g.hold == -1 &&
	       strcmp(ol_buf_cstr(&b2), "content-type: text/plain\n") == 0,
	   "none: entries removed");
	ol_s3_obj_lock_get(S("ol-lock-mode: GOVERNANCE\nol-lock-until: x\n"), &g);
	ok(g.mode == OL_LOCK_NONE, "a mode without a readable date is no lock");
	ol_buf_free(&b);
	ol_buf_free(&b2);
}

#define RULE(body) "<LifecycleConfiguration><Rule>" body "</Rule></LifecycleConfiguration>"

static int
lc(const char *xml, const char **why)
{
	struct ol_s3_lc l;
	int rc = ol_s3_parse_lifecycle(xml, strlen(xml), &l, why);
	if (rc == 0)
		ol_s3_lc_free(&l);
	return rc;
}

static void
test_lifecycle_parse(void)
{
	struct ol_s3_lc l;
	struct ol_buf x = {0};
	const char *why;
	const char *good =
	    "<LifecycleConfiguration><Rule><ID>a</ID><Status>Enabled</Status><Filter><And>"
	    "<Prefix>logs/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag>"
	    "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter>"
	    "<Expiration><Days>3</Days></Expiration><NoncurrentVersionExpiration>"
	    "<NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>1"
	    "</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>"
	    "<Rule><Status>Disabled</Status><Prefix>x</Prefix><AbortIncompleteMultipartUpload>"
	    "<DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>"
	    "</Rule></LifecycleConfiguration>";
	ok(ol_s3_parse_lifecycle(S(good), &l, &why) == 0 && l.n == 2, "two rules");
	if (l.n == 2) {
		const struct ol_s3_lc_rule *r = &l.rules[0];
		ok(r->enabled && r->prefix_len == 5 && r->tags.n == 1 && r->size_gt == 10 &&
		       r->exp_days == 3 && r->nc_days == 2 && r->nc_newer == 1,
		   "rule 1 fields");
		ok(!l.rules[1].enabled && l.rules[1].legacy_prefix && l.rules[1].abort_days == 1,
		   "rule 2: legacy prefix, disabled");
		ok(ol_s3_lc_match(r, S("logs/a"), 11, S("k=v&z=1")), "match");
		ok(!ol_s3_lc_match(r, S("logs/a"), 10, S("k=v")), "size is strictly greater");
		ok(!ol_s3_lc_match(r, S("logs/a"), 11, S("k=w")), "tag value differs");
		ok(!ol_s3_lc_match(r, S("log/a"), 11, S("k=v")), "prefix differs");
		ok(!ol_s3_lc_match(&l.rules[1], S("x"), 1, NULL, 0), "disabled never matches");
		ol_s3_lc_xml(&l, &x);
		ok(strstr(ol_buf_cstr(&x), "<And><Prefix>logs/</Prefix><Tag><Key>k</Key>") &&
		       strstr(ol_buf_cstr(&x), "<Prefix>x</Prefix><Status>Disabled</Status>"),
		   "document written back");
		ol_buf_free(&x);
		ol_s3_lc_free(&l);
	}
	ok(lc(RULE("<Status>Enabled</Status><Filter/><Expiration><Days>0</Days></Expiration>"),
	      &why) == -EINVAL &&
	       strstr(why, "Days"),
	   "Days 0: InvalidArgument");
	ok(lc(RULE("<Status>Enabled</Status><Filter/>"), &why) == -EPROTO, "no action");
	ok(lc(RULE("<Status>On</Status><Filter/><Expiration><Days>1</Days></Expiration>"), &why) ==
	       -EBADMSG,
	   "bad status");
	ok(lc(RULE("<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>"), &why) ==
	       -EBADMSG,
	   "neither Filter nor Prefix");
	ok(lc(RULE("<Status>Enabled</Status><Prefix/><Filter/><Expiration><Days>1</Days>"
		   "</Expiration>"),
	      &why) == -EBADMSG,
	   "Filter and Prefix");
	ok(lc(RULE("<Status>Enabled</Status><Filter><Prefix>a</Prefix><Tag><Key>k</Key></Tag>"
		   "</Filter><Expiration><Days>1</Days></Expiration>"),
	      &why) == -EBADMSG,
	   "two filters without And");
	ok(lc(RULE("<Status>Enabled</Status><Filter/><Expiration><Days>1</Days><Date>"
		   "2030-01-01T00:00:00Z</Date></Expiration>"),
	      &why) == -EBADMSG,
	   "Days and Date");
	ok(lc(RULE("<Status>Enabled</Status><Filter/><Expiration><Date>2030-01-01T01:00:00Z"
		   "</Date></Expiration>"),
	      &why) == -EINVAL &&
	       strstr(why, "midnight"),
	   "Date not at midnight");
	ok(lc(RULE("<Status>Enabled</Status><Filter/><Transition><Days>1</Days></Transition>"),
	      &why) == -ENOTSUP,
	   "transitions: not implemented");
	ok(lc("<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Filter/>"
	      "<Expiration><Days>1</Days></Expiration></Rule><Rule><ID>x</ID><Status>Enabled"
	      "</Status><Filter/><Expiration><Days>1</Days></Expiration></Rule>"
	      "</LifecycleConfiguration>",
	      &why) == -EINVAL &&
	       strstr(why, "unique"),
	   "duplicate ids");
	ok(lc("<LifecycleConfiguration/>", &why) == -EBADMSG, "no rule");
	ok(lc(RULE("<Status>Enabled</Status><Filter/><NoncurrentVersionExpiration>"
		   "<NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>101"
		   "</NewerNoncurrentVersions></NoncurrentVersionExpiration>"),
	      &why) == -EINVAL,
	   "NewerNoncurrentVersions over 100");
}

static void
test_due(void)
{
	ok(ol_s3_lc_due(0, 1, 86400000) == 86400000, "day 1 of the epoch");
	ok(ol_s3_lc_due(1000, 1, 86400000) == 2 * 86400000LL, "rounded up to midnight");
	ok(ol_s3_lc_due(1500, 2, 1000) == 4000, "test clock: whole seconds");
}

int
main(void)
{
	test_dates();
	test_lock_docs();
	test_lock_entries();
	test_lifecycle_parse();
	test_due();
	tap_done();
}
