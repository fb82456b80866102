/* Unit tests of the S3 layer's pure helpers: routing, key decoding, query, bucket names,
 * Range, dates, XML writer escaping, URL encoding for listings, XML body parsers, meta blob,
 * error documents. */
#include <errno.h>
#include <string.h>

#include "s3/acl.h"
#include "s3/bpolicy.h"
#include "s3/cors.h"
#include "s3/s3util.h"
#include "tap.h"

static void
test_route(void)
{
	struct ol_s3_route r;
	ok(ol_s3_route("127.0.0.1:9000", "127.0.0.1", "/bkt/a%2Fb/c", &r) == 0 &&
	       strcmp(r.bucket, "bkt") == 0 && strcmp(r.key, "a/b/c") == 0 && !r.vhost,
	   "path style, %%2F decoded in key");
	ok(ol_s3_route("127.0.0.1:9000", "", "/bkt/a//b", &r) == 0 && strcmp(r.key, "a//b") == 0,
	   "a//b kept");
	ok(ol_s3_route("localhost:9000", "", "/bkt/p/", &r) == 0 && strcmp(r.key, "p/") == 0 &&
	       r.key_len == 2,
	   "p/ kept with trailing slash");
	ok(ol_s3_route("h", "", "/bkt/../x", &r) == 0 && strcmp(r.key, "../x") == 0,
	   "../x is a plain key");
	ok(ol_s3_route("h", "", "/bkt/a+b%20c%25", &r) == 0 && strcmp(r.key, "a+b c%") == 0,
	   "+ literal in path, %%20 space, %%25 percent");
	ok(ol_s3_route("h", "", "/bkt/%2541", &r) == 0 && strcmp(r.key, "%41") == 0,
	   "decoded exactly once");
	ok(ol_s3_route("h", "", "/bkt", &r) == 0 && strcmp(r.bucket, "bkt") == 0 && r.key_len == 0,
	   "bucket only");
	ok(ol_s3_route("h", "", "/bkt/", &r) == 0 && r.key_len == 0, "bucket with slash");
	ok(ol_s3_route("h", "", "/", &r) == 0 && r.bucket[0] == 0, "service");
	ok(ol_s3_route("mybkt.localhost:9000", "127.0.0.1", "/k/x", &r) == 0 && r.vhost &&
	       strcmp(r.bucket, "mybkt") == 0 && strcmp(r.key, "k/x") == 0,
	   "virtual host on localhost");
	ok(ol_s3_route("my.dotted.bkt.s3.amazonaws.com", "", "/k", &r) == 0 && r.vhost &&
	       strcmp(r.bucket, "my.dotted.bkt") == 0,
	   "virtual host s3.amazonaws.com with dots");
	ok(ol_s3_route("b1.s3.us-west-2.amazonaws.com", "", "/", &r) == 0 && r.vhost &&
	       strcmp(r.bucket, "b1") == 0 && r.key_len == 0,
	   "virtual host regional");
	ok(ol_s3_route("b2.store.example:9000", "store.example", "/k", &r) == 0 && r.vhost &&
	       strcmp(r.bucket, "b2") == 0,
	   "virtual host under configured endpoint name");
	/* [s3] domains: s3_addr's host and the names, comma-separated */
	char names[OL_S3_ENDPOINT_NAMES];
	ol_s3_endpoint_names("127.0.0.1:9000", "s3.example.test,Example.ORG", names, sizeof(names));
	ok(!strcmp(names, "127.0.0.1,s3.example.test,Example.ORG"), "endpoint names: %s", names);
	ok(ol_s3_route("b7.s3.example.test:9000", names, "/k", &r) == 0 && r.vhost &&
	       !strcmp(r.bucket, "b7") && !strcmp(r.key, "k"),
	   "virtual host under an [s3] domain");
	ok(ol_s3_route("B8.EXAMPLE.org", names, "/k", &r) == 0 && r.vhost &&
	       !strcmp(r.bucket, "b8"),
	   "under the last domain, case-insensitive");
	ok(ol_s3_route("s3.example.test", names, "/b9/k", &r) == 0 && !r.vhost &&
	       !strcmp(r.bucket, "b9") && !strcmp(r.key, "k"),
	   "a domain itself is path style");
	ok(ol_s3_route("my.b.s3.example.test", names, "/", &r) == 0 && r.vhost &&
	       !strcmp(r.bucket, "my.b"),
	   "a dotted bucket under a domain");
	ok(ol_s3_route("b10.other.test", names, "/b11/k", &r) == 0 && !r.vhost &&
	       !strcmp(r.bucket, "b11"),
	   "a name no domain covers is path style");
	ol_s3_endpoint_names("store.example:9000", "", names, sizeof(names));
	ok(!strcmp(names, "store.example"), "no domains: s3_addr's host alone (%s)", names);
	ol_s3_endpoint_names("0.0.0.0:9000", "s3.a.test", names, sizeof(names));
	ok(ol_s3_route("b12.0.0.0.0", names, "/b13/k", &r) == 0 && !r.vhost &&
	       ol_s3_route("b14.s3.a.test", names, "/k", &r) == 0 && r.vhost,
	   "an IP s3_addr names no bucket, the domain does");
	ok(ol_s3_route("s3.amazonaws.com", "", "/b3/k", &r) == 0 && !r.vhost &&
	       strcmp(r.bucket, "b3") == 0,
	   "base host is path style");
	ok(ol_s3_route("[::1]:9000", "", "/b4/k", &r) == 0 && !r.vhost &&
	       strcmp(r.bucket, "b4") == 0,
	   "IPv6 host is path style");
	ok(ol_s3_route("10.0.0.1", "", "/b5/k", &r) == 0 && !r.vhost, "IPv4 host path style");
	ok(ol_s3_route(NULL, "", "/b6/k", &r) == 0 && strcmp(r.bucket, "b6") == 0, "no Host");
	ok(ol_s3_route("h", "", "/b/%zz", &r) == -EINVAL, "bad escape");
	ok(ol_s3_route("h", "", "/b/%4", &r) == -EINVAL, "truncated escape");
	ok(ol_s3_route("h", "", "/b/a%00b", &r) == -EINVAL, "NUL rejected");
	ok(ol_s3_route("h", "", "/b/%ff%fe", &r) == -EINVAL, "invalid UTF-8 rejected");
	ok(ol_s3_route("h", "", "/b/%E2%82%AC", &r) == 0 && r.key_len == 3, "UTF-8 euro ok");
	char path[2200] = "/b/";
	memset(path + 3, 'k', 1024);
	path[3 + 1024] = 0;
	ok(ol_s3_route("h", "", path, &r) == 0 && r.key_len == 1024, "1024-byte key ok");
	path[3 + 1024] = 'k';
	path[3 + 1025] = 0;
	ok(ol_s3_route("h", "", path, &r) == -ENAMETOOLONG, "1025-byte key too long");
}

static void
test_query(void)
{
	char v[64];
	const char *q = "list-type=2&prefix=a%2Fb+c&delimiter=%2F&uploads&max-keys=";
	ok(ol_s3_query_get(q, "prefix", v, sizeof(v)) == 5 && strcmp(v, "a/b c") == 0,
	   "query value decoded, + is space");
	ok(ol_s3_query_get(q, "uploads", v, sizeof(v)) == 0 && v[0] == 0, "bare name");
	ok(ol_s3_query_get(q, "max-keys", v, sizeof(v)) == 0, "empty value");
	ok(ol_s3_query_get(q, "prefi", v, sizeof(v)) == -ENOENT, "no prefix match of names");
	ok(ol_s3_query_has(q, "delimiter") && !ol_s3_query_has(q, "acl"), "has");
	ok(ol_s3_query_get("a=%zz", "a", v, sizeof(v)) == -EINVAL, "bad escape in value");
	ok(!ol_s3_query_has("", "x"), "empty query");
}

static void
test_counts(void)
{
	unsigned v = 7;
	ok(ol_s3_parse_count("0", &v) == 0 && v == 0, "count 0");
	ok(ol_s3_parse_count("1000", &v) == 0 && v == 1000, "count 1000");
	ok(ol_s3_parse_count("2147483647", &v) == 0 && v == 2147483647u, "count INT32_MAX");
	v = 7;
	ok(ol_s3_parse_count("2147483648", &v) == -EINVAL && v == 7, "count past INT32_MAX");
	ok(ol_s3_parse_count("99999999999999999999999", &v) == -EINVAL, "count overflow");
	ok(ol_s3_parse_count("-5", &v) == -EINVAL, "negative count");
	ok(ol_s3_parse_count("+5", &v) == -EINVAL, "signed count");
	ok(ol_s3_parse_count("", &v) == -EINVAL && ol_s3_parse_count(NULL, &v) == -EINVAL,
	   "empty count");
	ok(ol_s3_parse_count("1.5", &v) == -EINVAL && ol_s3_parse_count("ten", &v) == -EINVAL &&
	       ol_s3_parse_count(" 5", &v) == -EINVAL && ol_s3_parse_count("5 ", &v) == -EINVAL,
	   "non-numeric counts");
}

static void
test_bucket_names(void)
{
	const char *good[] = {"abc",
			      "my-bucket",
			      "my.bucket.name",
			      "a1b2c3",
			      "123",
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	const char *bad[] = {"ab",
			     "ABC",
			     "my_bucket",
			     "-abc",
			     "abc-",
			     "a..b",
			     "a.-b",
			     "a-.b",
			     "192.168.1.1",
			     "xn--abc",
			     "abc-s3alias",
			     "a b c",
			     ".abc",
			     "abc.",
			     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(ol_s3_bucket_name_ok(good[i]), "valid bucket name %s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!ol_s3_bucket_name_ok(bad[i]), "invalid bucket name '%s'", bad[i]);
	ok(ol_s3_is_ip("1.2.3.4") && !ol_s3_is_ip("1.2.3") && !ol_s3_is_ip("1.2.3.256") &&
	       !ol_s3_is_ip("a.b.c.d") && ol_s3_is_ip("[::1]"),
	   "IP detection");
}

static void
test_range(void)
{
	uint64_t o = 0, l = 0;
	ok(ol_s3_range_parse("bytes=0-9", 100, &o, &l) == 1 && o == 0 && l == 10, "a-b");
	ok(ol_s3_range_parse("bytes=90-200", 100, &o, &l) == 1 && o == 90 && l == 10,
	   "end clamped");
	ok(ol_s3_range_parse("bytes=10-", 100, &o, &l) == 1 && o == 10 && l == 90, "a-");
	ok(ol_s3_range_parse("bytes=-10", 100, &o, &l) == 1 && o == 90 && l == 10, "-n");
	ok(ol_s3_range_parse("bytes=-500", 100, &o, &l) == 1 && o == 0 && l == 100,
	   "-n larger than size");
	ok(ol_s3_range_parse("bytes=100-", 100, &o, &l) == -ERANGE, "start at size: 416");
	ok(ol_s3_range_parse("bytes=-0", 100, &o, &l) == -ERANGE, "-0: 416");
	ok(ol_s3_range_parse("bytes=0-0", 0, &o, &l) == -ERANGE, "empty object: 416");
	ok(ol_s3_range_parse("bytes=5-2", 100, &o, &l) == 0, "last < first ignored");
	ok(ol_s3_range_parse("bytes=0-1,5-6", 100, &o, &l) == 0, "multi-range ignored");
	ok(ol_s3_range_parse("items=0-1", 100, &o, &l) == 0, "other unit ignored");
	ok(ol_s3_range_parse("bytes=x-1", 100, &o, &l) == 0, "garbage ignored");
	ok(ol_s3_range_parse(NULL, 100, &o, &l) == 0, "absent");
	ok(ol_s3_range_parse("bytes=0-18446744073709551615", 10, &o, &l) == 1 && l == 10,
	   "huge end");
}

static void
test_dates(void)
{
	char d[32];
	ol_s3_http_date(1764614019123LL, d);
	ok(strcmp(d, "Mon, 01 Dec 2025 18:33:39 GMT") == 0, "RFC 1123: %s", d);
	ol_s3_iso_date(1764614019123LL, d);
	ok(strcmp(d, "2025-12-01T18:33:39.123Z") == 0, "ISO 8601 ms: %s", d);
	int64_t s;
	ok(ol_s3_parse_http_date("Mon, 01 Dec 2025 18:33:39 GMT", &s) == 0 && s == 1764614019,
	   "parse RFC 1123");
	ok(ol_s3_parse_http_date("Monday, 01-Dec-25 18:33:39 GMT", &s) == 0 && s == 1764614019,
	   "parse RFC 850");
	ok(ol_s3_parse_http_date("yesterday", &s) == -EINVAL, "reject garbage date");
}

static void
test_xml_writer(void)
{
	struct ol_buf b = {0};
	ol_s3_xml_elem(&b, "Key", "a<b>&\"c'\x01");
	ok(strcmp(ol_buf_cstr(&b), "<Key>a&lt;b&gt;&amp;&quot;c&apos;&#x1;</Key>") == 0,
	   "escaping: %s", b.p);
	ol_buf_free(&b);
	ol_s3_xml_elemu(&b, "Size", 18446744073709551615ull);
	ok(strcmp(ol_buf_cstr(&b), "<Size>18446744073709551615</Size>") == 0, "u64 elem");
	ol_buf_free(&b);
	ol_s3_url_encode(&b, "a b+c/d%e~f\xe2\x82\xac", 14);
	ok(strcmp(ol_buf_cstr(&b), "a%20b%2Bc/d%25e~f%E2%82%AC") == 0, "url encode: %s", b.p);
	ol_buf_free(&b);
	ol_s3_error_xml(&b, "NoSuchKey", "The <key>", "/b/k&", "REQ1", NULL);
	ok(strstr(b.p, "<Code>NoSuchKey</Code>") && strstr(b.p, "<Message>The &lt;key&gt;") &&
	       strstr(b.p, "<Resource>/b/k&amp;</Resource>") &&
	       strstr(b.p, "<RequestId>REQ1</RequestId>"),
	   "error document");
	ol_buf_free(&b);
	const struct ol_s3_errinfo *e = ol_s3_errinfo(OL_S3E_INVALID_RANGE);
	ok(e->status == 416 && strcmp(e->code, "InvalidRange") == 0, "error table 416");
	ok(ol_s3_errinfo(OL_S3E_MISSING_CONTENT_LENGTH)->status == 411, "error table 411");
	ok(ol_s3_errinfo(OL_S3E_SHA256_MISMATCH)->status == 400, "sha mismatch 400");
	int all = 1;
	for (int i = 1; i < OL_S3E__COUNT; i++)
		all &= ol_s3_errinfo(i)->code && ol_s3_errinfo(i)->status >= 400;
	ok(all, "every error has a code and a 4xx/5xx status");
}

static void
test_parsers(void)
{
	struct ol_s3_complete_req c;
	const char *x = "<?xml version=\"1.0\"?><CompleteMultipartUpload xmlns=\"http://s3."
			"amazonaws.com/doc/2006-03-01/\"><Part><ETag>\"ABCDEF\"</ETag><PartNumber>"
			"1</PartNumber></Part><Part><PartNumber>3</PartNumber><ETag>&quot;0a&quot;"
			"</ETag></Part></CompleteMultipartUpload>";
	ok(ol_s3_parse_complete(x, strlen(x), &c) == 0 && c.n_parts == 2 &&
	       c.parts[0].number == 1 && strcmp(c.parts[0].etag, "abcdef") == 0 &&
	       c.parts[1].number == 3 && strcmp(c.parts[1].etag, "0a") == 0,
	   "complete parsed, quotes stripped, lowercased");
	ok(c.parts[0].ck_name[0] == '\0' && c.parts[1].checksum[0] == '\0', "no part checksums");
	ol_s3_complete_free(&c);
	const char *xc = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
			 "<ChecksumSHA256> Kq5sNclPz7QV2+lfQIuc6R7oRu0= </ChecksumSHA256></Part>"
			 "<Part><PartNumber>2</PartNumber><ChecksumCRC32C>AAAAAA==</ChecksumCRC32C>"
			 "<ETag>b</ETag></Part></CompleteMultipartUpload>";
	ok(ol_s3_parse_complete(xc, strlen(xc), &c) == 0 && c.n_parts == 2 &&
	       strcmp(c.parts[0].ck_name, "SHA256") == 0 &&
	       strcmp(c.parts[0].checksum, "Kq5sNclPz7QV2+lfQIuc6R7oRu0=") == 0 &&
	       strcmp(c.parts[1].ck_name, "CRC32C") == 0 &&
	       strcmp(c.parts[1].checksum, "AAAAAA==") == 0,
	   "complete: per-part checksums parsed (trimmed), with their algorithm");
	ol_s3_complete_free(&c);
	const char *bad[] = {
	    "",
	    "<CompleteMultipartUpload/>",
	    "<Foo><Part></Part></Foo>",
	    "<CompleteMultipartUpload><Part><PartNumber>x</PartNumber><ETag>a"
	    "</ETag></Part></CompleteMultipartUpload>",
	    "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
	    "</CompleteMultipartUpload>",
	    "<CompleteMultipartUpload><Part>",
	    "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
	    "<ChecksumSHA1></ChecksumSHA1></Part></CompleteMultipartUpload>"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(ol_s3_parse_complete(bad[i], strlen(bad[i]), &c) == -EBADMSG,
		   "malformed complete %zu", i);
	const char *dtd = "<!DOCTYPE a [<!ENTITY e \"x\">]><CompleteMultipartUpload><Part>"
			  "<PartNumber>1</PartNumber><ETag>&e;</ETag></Part>"
			  "</CompleteMultipartUpload>";
	ok(ol_s3_parse_complete(dtd, strlen(dtd), &c) == -EBADMSG, "DTD refused");

	struct ol_s3_delete_req d;
	const char *dx = "<Delete><Quiet>true</Quiet><Object><Key>a&amp;b</Key></Object><Object>"
			 "<Key>p/</Key><VersionId>null</VersionId></Object></Delete>";
	ok(ol_s3_parse_delete(dx, strlen(dx), &d) == 0 && d.n_keys == 2 && d.quiet &&
	       strcmp(d.keys[0], "a&b") == 0 && strcmp(d.keys[1], "p/") == 0 && !d.has_version,
	   "delete parsed");
	ol_s3_delete_free(&d);
	const char *dv = "<Delete><Object><Key>a</Key><VersionId>abc</VersionId></Object></Delete>";
	ok(ol_s3_parse_delete(dv, strlen(dv), &d) == 0 && d.has_version && !d.quiet &&
	       strcmp(d.vids[0], "abc") == 0,
	   "version flagged and kept");
	ol_s3_delete_free(&d);
	const char *d2 = "<Delete><Object><VersionId>v1</VersionId><Key>a</Key></Object>"
			 "<Object><Key>b</Key></Object></Delete>";
	ok(ol_s3_parse_delete(d2, strlen(d2), &d) == 0 && d.n_keys == 2 &&
	       strcmp(d.vids[0], "v1") == 0 && d.vids[1] == NULL,
	   "version before the key; a key without one");
	ol_s3_delete_free(&d);
	struct ol_buf lv = {0};
	ol_buf_adds(&lv, "<Delete><Object><Key>a</Key><VersionId>");
	for (int i = 0; i < 65; i++)
		ol_buf_adds(&lv, "a");
	ol_buf_adds(&lv, "</VersionId></Object></Delete>");
	ok(ol_s3_parse_delete(lv.p, lv.len, &d) == -EBADMSG, "a 65-char version id refused");
	ol_buf_free(&lv);
	int vs;
	const char *ven =
	    "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<Status>Enabled</Status></VersioningConfiguration>";
	ok(ol_s3_parse_versioning(ven, strlen(ven), &vs) == 0 && vs == 1, "versioning Enabled");
	const char *vsu = "<VersioningConfiguration><MfaDelete>Disabled</MfaDelete>"
			  "<Status>Suspended</Status></VersioningConfiguration>";
	ok(ol_s3_parse_versioning(vsu, strlen(vsu), &vs) == 0 && vs == 2, "versioning Suspended");
	const char *vbad =
	    "<VersioningConfiguration><Status>Off</Status></VersioningConfiguration>";
	ok(ol_s3_parse_versioning(vbad, strlen(vbad), &vs) == -EINVAL &&
	       ol_s3_parse_versioning("<VersioningConfiguration/>", 26, &vs) == -EINVAL,
	   "versioning: another Status or none: -EINVAL");
	const char *vmfa = "<VersioningConfiguration><Status>Enabled</Status><MfaDelete>Enabled"
			   "</MfaDelete></VersioningConfiguration>";
	ok(ol_s3_parse_versioning(vmfa, strlen(vmfa), &vs) == -ENOTSUP, "MfaDelete: -ENOTSUP");
	struct ol_s3_tags tg;
	const char *why = NULL;
	const char *tq = "k1=v1&k%202=v%262&empty=&&solo";
	ok(ol_s3_tags_parse_query(tq, strlen(tq), &tg) == 0 && tg.n == 4 &&
	       !strcmp(tg.key[1], "k 2") && !strcmp(tg.val[1], "v&2") && !strcmp(tg.val[2], "") &&
	       !strcmp(tg.key[3], "solo") && ol_s3_tags_check(&tg, 10, &why) == 0,
	   "x-amz-tagging form parsed");
	struct ol_buf te = {0};
	ol_s3_tags_encode(&tg, &te);
	ok(!strcmp(ol_buf_cstr(&te), "k1=v1&k%202=v%262&empty=&solo="), "tags encoded (%s)",
	   ol_buf_cstr(&te));
	ol_buf_free(&te);
	ol_s3_tags_free(&tg);
	ok(ol_s3_tags_parse_query("a=%zz", 5, &tg) == -EINVAL, "bad escape: -EINVAL");
	ok(ol_s3_tags_parse_query("a=1&a=2", 7, &tg) == 0 && ol_s3_tags_check(&tg, 10, &why) &&
	       strstr(why, "same key"),
	   "duplicate keys refused");
	ol_s3_tags_free(&tg);
	ok(ol_s3_tags_parse_query("aws:x=1", 7, &tg) == 0 && ol_s3_tags_check(&tg, 10, &why) &&
	       strstr(why, "aws:"),
	   "aws: prefix refused");
	ol_s3_tags_free(&tg);
	const char *tx = "<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Value>2"
			 "</Value><Key>b</Key></Tag><Tag><Key>c</Key></Tag></TagSet></Tagging>";
	ok(ol_s3_parse_tagging(tx, strlen(tx), &tg) == 0 && tg.n == 3 && !strcmp(tg.val[1], "2") &&
	       !strcmp(tg.key[1], "b") && !strcmp(tg.val[2], ""),
	   "Tagging body parsed");
	ol_s3_tags_free(&tg);
	const char *tnk = "<Tagging><TagSet><Tag><Value>1</Value></Tag></TagSet></Tagging>";
	ok(ol_s3_parse_tagging(tnk, strlen(tnk), &tg) == -EBADMSG, "a Tag without Key: malformed");
	struct ol_buf many_t = {0};
	ol_buf_adds(&many_t, "<Tagging><TagSet>");
	for (int i = 0; i < 60; i++)
		ol_buf_addf(&many_t, "<Tag><Key>k%d</Key><Value>v</Value></Tag>", i);
	ol_buf_adds(&many_t, "</TagSet></Tagging>");
	ok(ol_s3_parse_tagging(many_t.p, many_t.len, &tg) == -EBADMSG, "60 tags: malformed");
	ol_buf_free(&many_t);
	struct ol_buf lk = {0};
	ol_buf_adds(&lk, "<Tagging><TagSet><Tag><Key>");
	for (int i = 0; i < 129; i++)
		ol_buf_adds(&lk, "\xc3\xa9");
	ol_buf_adds(&lk, "</Key></Tag></TagSet></Tagging>");
	ok(ol_s3_parse_tagging(lk.p, lk.len, &tg) == 0 && ol_s3_tags_check(&tg, 50, &why) &&
	       strstr(why, "TagKey"),
	   "a 129-character key (258 bytes) refused by the check");
	ol_s3_tags_free(&tg);
	ol_buf_free(&lk);
	ok(ol_s3_parse_versioning("<Other><Status>Enabled</Status></Other>", 39, &vs) == -EBADMSG &&
	       ol_s3_parse_versioning("<Versioning", 11, &vs) == -EBADMSG,
	   "versioning: other root or bad XML: -EBADMSG");
	const char *de = "<Delete></Delete>";
	ok(ol_s3_parse_delete(de, strlen(de), &d) == -EBADMSG, "empty delete malformed");
	struct ol_buf many = {0};
	ol_buf_adds(&many, "<Delete>");
	for (int i = 0; i < 1001; i++)
		ol_buf_addf(&many, "<Object><Key>k%d</Key></Object>", i);
	ol_buf_adds(&many, "</Delete>");
	ok(ol_s3_parse_delete(many.p, many.len, &d) == -EBADMSG, "1001 keys refused");
	ol_buf_free(&many);

	char loc[32];
	const char *cb = "<CreateBucketConfiguration><LocationConstraint>eu-west-1"
			 "</LocationConstraint></CreateBucketConfiguration>";
	ok(ol_s3_parse_create_bucket(cb, strlen(cb), loc, sizeof(loc)) == 0 &&
	       strcmp(loc, "eu-west-1") == 0,
	   "location parsed");
	ok(ol_s3_parse_create_bucket(" \n", 2, loc, sizeof(loc)) == 0 && loc[0] == 0,
	   "empty body ok");
	ok(ol_s3_parse_create_bucket("<x", 2, loc, sizeof(loc)) == -EBADMSG, "bad xml");
}

static void
test_meta(void)
{
	struct ol_buf b = {0};
	const char *v;
	ol_s3_meta_add(&b, "content-type", "text/plain");
	ol_s3_meta_add(&b, "x-amz-meta-a", "");
	ol_s3_meta_add(&b, "x-amz-meta-bad", "x\ny");
	ol_s3_meta_add(&b, "x-amz-meta-b", "v: w");
	ok(ol_s3_meta_get(b.p, b.len, "content-type", &v) == 10 && memcmp(v, "text/plain", 10) == 0,
	   "meta get");
	ok(ol_s3_meta_get(b.p, b.len, "x-amz-meta-a", &v) == 0, "empty value");
	ok(ol_s3_meta_get(b.p, b.len, "x-amz-meta-bad", &v) == -ENOENT, "newline value dropped");
	ok(ol_s3_meta_get(b.p, b.len, "x-amz-meta-b", &v) == 4 && memcmp(v, "v: w", 4) == 0,
	   "value with colon");
	size_t pos = 0;
	int n = 0;
	struct ol_s3_meta_kv kv;
	while (ol_s3_meta_next(b.p, b.len, &pos, &kv))
		n++;
	ok(n == 3, "iterate 3 entries");
	ol_buf_free(&b);
}

static void
test_acl(void)
{
	struct ol_acl a, b;
	struct ol_buf x = {0};
	ok(ol_acl_canned(&a, "public-read", "alice", NULL) == 0 && a.n == 2, "canned public-read");
	ok(ol_acl_perms(&a, NULL) == OL_ACL_READ, "anonymous reads public-read");
	ok(ol_acl_perms(&a, "alice") == OL_ACL_FULL, "owner has full control");
	ok(ol_acl_canned(&a, "authenticated-read", "alice", NULL) == 0 &&
	       ol_acl_perms(&a, NULL) == 0 && ol_acl_perms(&a, "bob") == OL_ACL_READ,
	   "authenticated-read: users, not anonymous");
	ok(ol_acl_canned(&a, "bucket-owner-full-control", "bob", "alice") == 0 &&
	       ol_acl_perms(&a, "alice") == OL_ACL_FULL,
	   "bucket-owner-full-control grants the bucket owner");
	ok(ol_acl_canned(&a, "nope", "alice", NULL) == -EINVAL, "unknown canned ACL refused");
	memset(&a, 0, sizeof(a));
	snprintf(a.owner, sizeof(a.owner), "%s", "alice");
	ok(ol_acl_add_header(
	       &a, OL_ACL_READ,
	       "id=\"bob\", uri=\"http://acs.amazonaws.com/groups/global/AllUsers\"") == 0 &&
	       a.n == 2,
	   "grant header with two grantees");
	ok(ol_acl_add_header(&a, OL_ACL_READ, "emailAddress=\"x@y\"") == -ENOTSUP,
	   "e-mail grantee is not resolvable");
	ok(ol_acl_add_header(&a, OL_ACL_READ, "id=\"a b\"") == -EINVAL, "bad id refused");
	ok(ol_acl_add_header(&a, OL_ACL_READ, "uri=\"http://x/\"") == -EINVAL, "bad uri refused");
	ol_acl_encode(&a, &x);
	ok(ol_acl_decode(x.p, x.len, &b) == 0 && b.n == a.n && strcmp(b.owner, "alice") == 0 &&
	       ol_acl_perms(&b, "bob") == OL_ACL_READ,
	   "stored form round-trips");
	ok(ol_acl_decode("alice Zfbob", 11, &b) < 0 && ol_acl_decode("alice U", 7, &b) < 0 &&
	       ol_acl_decode("alice A1x", 9, &b) < 0,
	   "bad stored forms refused");
	ol_buf_free(&x);
	ol_acl_xml(&a, &x);
	ok(ol_acl_parse_xml(x.p, x.len, &b) == 0 && b.n == 2 && strcmp(b.owner, "alice") == 0 &&
	       ol_acl_perms(&b, NULL) == OL_ACL_READ,
	   "AccessControlPolicy document round-trips");
	ol_buf_free(&x);
	const char *bad = "<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>bob</ID>"
			  "</Grantee><Permission>ALL</Permission></Grant></AccessControlList>"
			  "</AccessControlPolicy>";
	ok(ol_acl_parse_xml(bad, strlen(bad), &b) == -EINVAL, "unknown permission is -EINVAL");
	const char *mail = "<AccessControlPolicy><AccessControlList><Grant><Grantee><EmailAddress>"
			   "a@b</EmailAddress></Grantee><Permission>READ</Permission></Grant>"
			   "</AccessControlList></AccessControlPolicy>";
	ok(ol_acl_parse_xml(mail, strlen(mail), &b) == -ENOTSUP, "e-mail grantee is -ENOTSUP");
	ok(ol_acl_parse_xml("<x/>", 4, &b) == -EBADMSG, "wrong root is malformed");
}

static void
test_attrs(void)
{
	struct ol_buf a = {0}, b = {0};
	const char *v;
	ol_s3_attr_set(&a, NULL, 0, "owner", "alice", 5);
	ol_s3_attr_set(&b, a.p, a.len, "policy", "{\n}", 3);
	ok(ol_s3_attr_get(b.p, b.len, "owner", &v) == 5 && memcmp(v, "alice", 5) == 0 &&
	       ol_s3_attr_get(b.p, b.len, "policy", &v) == 3 && memcmp(v, "{\n}", 3) == 0,
	   "attrs set and get (values may hold newlines)");
	ol_buf_free(&a);
	ol_s3_attr_set(&a, b.p, b.len, "owner", NULL, -1);
	ok(ol_s3_attr_get(a.p, a.len, "owner", &v) == -ENOENT &&
	       ol_s3_attr_get(a.p, a.len, "policy", &v) == 3,
	   "attr removed, others kept");
	ok(ol_s3_attr_get("owner=99:x\n", 11, "owner", &v) == -ENOENT, "truncated attr refused");
	ok(ol_s3_attr_get("", 0, "owner", &v) == -ENOENT, "empty blob (old bucket record)");
	ol_buf_free(&a);
	ol_buf_free(&b);
}

static const char *
pkey(const char *name, void *arg)
{
	const char *const *kv = arg;
	for (; kv && kv[0]; kv += 2)
		if (strcmp(kv[0], name) == 0)
			return kv[1];
	return NULL;
}

static int
peval(const struct ol_policy *p, const char *user, const char *action, const char *res,
      const char **kv)
{
	struct ol_policy_req q = {user, action, res, pkey, (void *)kv};
	return ol_policy_eval(p, &q);
}

static void
test_policy(void)
{
	struct ol_policy *p;
	char msg[160];
	const char *doc =
	    "{\"Version\":\"2012-10-17\",\"Statement\":["
	    "{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
	    "\"Resource\":\"arn:aws:s3:::b/pub/*\"},"
	    "{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"arn:aws:iam:::user/bob\"},"
	    "\"Action\":[\"s3:List*\",\"s3:PutObject\"],\"Resource\":[\"arn:aws:s3:::b\","
	    "\"arn:aws:s3:::b/bob/*\"],\"Condition\":{\"StringLike\":{\"s3:prefix\":"
	    "\"bob/*\"},\"IpAddress\":{\"aws:SourceIp\":\"127.0.0.0/8\"}}},"
	    "{\"Effect\":\"Deny\",\"Principal\":\"*\",\"Action\":\"s3:*\","
	    "\"Resource\":\"arn:aws:s3:::b/pub/secret*\"},"
	    "{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"carol\"},\"Action\":"
	    "\"s3:ListBucket\",\"Resource\":\"arn:aws:s3:::b\",\"Condition\":"
	    "{\"NumericLessThanEquals\":{\"s3:max-keys\":\"10\"}}}]}";
	ok(ol_policy_parse(doc, strlen(doc), "b", &p, msg, sizeof(msg)) == 0, "policy parses: %s",
	   msg);
	const char *local[] = {"aws:sourceip", "127.0.0.1", "s3:prefix", "bob/x", NULL};
	const char *remote[] = {"aws:sourceip", "10.0.0.1", "s3:prefix", "bob/x", NULL};
	const char *keys5[] = {"s3:max-keys", "5", NULL};
	const char *keys50[] = {"s3:max-keys", "50", NULL};
	ok(peval(p, NULL, "s3:GetObject", "arn:aws:s3:::b/pub/a", NULL) == 1,
	   "anonymous GET of pub/* allowed");
	ok(peval(p, NULL, "s3:GetObject", "arn:aws:s3:::b/priv/a", NULL) == 0,
	   "outside the resource: no verdict");
	ok(peval(p, NULL, "s3:PutObject", "arn:aws:s3:::b/pub/a", NULL) == 0,
	   "another action: no verdict");
	ok(peval(p, "alice", "s3:GetObject", "arn:aws:s3:::b/pub/secret.txt", NULL) == -1,
	   "explicit deny wins over allow");
	ok(peval(p, "bob", "s3:ListBucket", "arn:aws:s3:::b", local) == 1,
	   "bob lists with prefix from 127/8");
	ok(peval(p, "bob", "s3:ListBucket", "arn:aws:s3:::b", remote) == 0,
	   "aws:SourceIp outside the range");
	ok(peval(p, "bob", "s3:ListBucket", "arn:aws:s3:::b", NULL) == 0,
	   "condition keys absent: no match");
	ok(peval(p, "alice", "s3:ListBucket", "arn:aws:s3:::b", local) == 0,
	   "principal names bob only");
	ok(peval(p, "bob", "S3:putobject", "arn:aws:s3:::b/bob/k", local) == 1,
	   "actions are case-insensitive");
	ok(peval(p, "carol", "s3:ListBucket", "arn:aws:s3:::b", keys5) == 1 &&
	       peval(p, "carol", "s3:ListBucket", "arn:aws:s3:::b", keys50) == 0,
	   "numeric condition");
	ok(ol_policy_is_public(p), "principal * without narrowing is public");
	ok(ol_policy_uses_key(p, "aws:sourceip") && !ol_policy_uses_key(p, "s3:existingobjecttag/"),
	   "ol_policy_uses_key finds a condition key by its lowercase prefix");
	ol_policy_free(p);
	static const char *const bad[] = {
	    "",
	    "[1]",
	    "{\"Statement\":[]}",
	    "{\"Statement\":{\"Effect\":\"Maybe\",\"Principal\":\"*\",\"Action\":\"s3:*\","
	    "\"Resource\":\"*\"}}",
	    "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
	    "\"Resource\":\"arn:aws:s3:::other/*\"}}",
	    "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"ec2:*\","
	    "\"Resource\":\"*\"}}",
	    "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
	    "\"Resource\":\"*\",\"Condition\":{\"Foo\":{\"a:b\":\"c\"}}}}",
	    "{\"Statement\":{\"Effect\":\"Allow\",\"Action\":\"s3:*\",\"Resource\":\"*\"}}",
	    "{\"Version\":\"1999\",\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\","
	    "\"Action\":\"s3:*\",\"Resource\":\"*\"}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = NULL;
		ok(ol_policy_parse(bad[i], strlen(bad[i]), "b", &p, msg, sizeof(msg)) == -EINVAL &&
		       !p && msg[0],
		   "malformed policy %zu refused: %s", i, msg);
	}
	ok(ol_policy_glob("a*b?c", "axxbyc", false) && !ol_policy_glob("a*b?c", "axxbc", false) &&
	       ol_policy_glob("*", "", false) && ol_policy_glob("S3:Get*", "s3:getobject", true),
	   "glob");
}

static void
test_cors(void)
{
	struct ol_cors c;
	struct ol_pab p;
	char own[32];
	const char *x =
	    "<CORSConfiguration><CORSRule><AllowedOrigin>https://*.a.com</AllowedOrigin>"
	    "<AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader>"
	    "</CORSRule><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
	    "</AllowedMethod><MaxAgeSeconds>5</MaxAgeSeconds></CORSRule>"
	    "</CORSConfiguration>";
	ok(ol_cors_parse(x, strlen(x), &c) == 0 && c.n == 2, "CORS configuration parses");
	ok(ol_cors_match(&c, "https://w.a.com", "PUT", "X-Amz-Date, x-amz-meta-q") == &c.rules[0],
	   "origin wildcard, header wildcard (any case)");
	ok(!ol_cors_match(&c, "https://w.a.com", "PUT", "authorization"), "unlisted header");
	ok(!ol_cors_match(&c, "https://b.com", "PUT", NULL), "unlisted origin");
	ok(ol_cors_match(&c, "https://b.com", "GET", NULL) == &c.rules[1] &&
	       c.rules[1].max_age == 5,
	   "second rule");
	ol_cors_free(&c);
	const char *bad = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
			  "<AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>";
	ok(ol_cors_parse(bad, strlen(bad), &c) == -EINVAL, "unknown method refused");
	ol_cors_free(&c);
	const char *pab = "<PublicAccessBlockConfiguration><BlockPublicAcls>true</BlockPublicAcls>"
			  "<RestrictPublicBuckets>true</RestrictPublicBuckets>"
			  "</PublicAccessBlockConfiguration>";
	ok(ol_pab_parse(pab, strlen(pab), &p) == 0 && p.block_public_acls &&
	       !p.ignore_public_acls && p.restrict_public_buckets,
	   "public access block parses");
	const char *o = "<OwnershipControls><Rule><ObjectOwnership>ObjectWriter</ObjectOwnership>"
			"</Rule></OwnershipControls>";
	ok(ol_ownership_parse(o, strlen(o), own, sizeof(own)) == 0 &&
	       strcmp(own, "ObjectWriter") == 0,
	   "ownership controls parse");
}

/* errno -> S3 error: one table (errors.c) for every handler */
static void
test_errno_map(void)
{
	static const struct {
		int rc;
		bool write;
		const char *code;
		int status;
	} t[] = {
	    {-ENOENT, false, "NoSuchUpload", 404},
	    {-ENXIO, false, "NoSuchBucket", 404},
	    {-EEXIST, false, "BucketAlreadyOwnedByYou", 409},
	    {-ENOTEMPTY, false, "BucketNotEmpty", 409},
	    {-EINVAL, false, "InvalidArgument", 400},
	    {-EIO, false, "ServiceUnavailable", 503},
	    {-EBADMSG, false, "InternalError", 500},
	    {-ENOSPC, true, "XOpenLakeStorageFull", 507},
	    {-ECANCELED, true, "PreconditionFailed", 412},
	    {-ENODATA, true, "NoSuchKey", 404},
	    {-ECANCELED, false, "InternalError", 500}, /* a read is not conditional */
	    /* a commit a cluster's leader did not take, or did not answer: retried by SDKs */
	    {-EAGAIN, true, "SlowDown", 503},
	    {-ETIMEDOUT, true, "SlowDown", 503},
	    {-EAGAIN, false, "ServiceUnavailable", 503}, /* a read meeting a reclaim */
	    {-EPERM, false, "InternalError", 500},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *msg = "x";
		enum ol_s3_err e =
		    ol_s3_errno_err(t[i].rc, t[i].write, OL_S3E_NO_SUCH_UPLOAD, &msg);
		const struct ol_s3_errinfo *ei = ol_s3_errinfo(e);
		ok(strcmp(ei->code, t[i].code) == 0 && ei->status == t[i].status,
		   "errno %d (%s) -> %s %d (got %s %d)", -t[i].rc, t[i].write ? "write" : "read",
		   t[i].code, t[i].status, ei->code, ei->status);
	}
	const char *msg = NULL;
	ol_s3_errno_err(-EBADMSG, false, OL_S3E_NO_SUCH_KEY, &msg);
	ok(msg && strstr(msg, "checksums"), "corrupt data names the checksums");
	ol_s3_errno_err(-EPERM, false, OL_S3E_NO_SUCH_KEY, &msg);
	ok(msg == NULL, "an unknown errno leaves the message to the caller");
}

int
main(void)
{
	test_errno_map();
	test_cors();
	test_policy();
	test_acl();
	test_attrs();
	test_route();
	test_query();
	test_counts();
	test_bucket_names();
	test_range();
	test_dates();
	test_xml_writer();
	test_parsers();
	test_meta();
	tap_done();
}
