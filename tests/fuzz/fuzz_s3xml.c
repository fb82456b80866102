/* Fuzz target: the S3 parsers of untrusted bytes. The first byte selects one: 0-2 the XML
 * request bodies (CompleteMultipartUpload, DeleteObjects, CreateBucketConfiguration,
 * VersioningConfiguration, Tagging and the x-amz-tagging form), 3 the
 * router (Host NUL path), 4 query lookup, 5 Range, 6 the metadata blob, 7 HTTP dates,
 * and, for a first byte >= 0xf0 (odd/even), 8 the bucket documents (AccessControlPolicy,
 * CORSConfiguration, PublicAccessBlockConfiguration, OwnershipControls), 9 the stored ACL
 * form, grant headers and the bucket attribute blob. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3/acl.h"
#include "s3/cors.h"
#include "s3/s3util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;
	char *z = malloc(n + 1); /* NUL-terminated copy for the string parsers */
	memcpy(z, body, n);
	z[n] = '\0';
	switch (data[0] >= 0xf0 ? 8 + (data[0] & 1) : data[0] % 8) {
	case 0: {
		struct ol_s3_complete_req c;
		if (ol_s3_parse_complete(body, n, &c) == 0) {
			for (unsigned i = 0; i < c.n_parts; i++)
				(void)strlen(c.parts[i].etag);
			ol_s3_complete_free(&c);
		}
		break;
	}
	case 1: {
		struct ol_s3_delete_req d;
		if (ol_s3_parse_delete(body, n, &d) == 0) {
			for (unsigned i = 0; i < d.n_keys; i++)
				(void)(strlen(d.keys[i]) + (d.vids[i] ? strlen(d.vids[i]) : 0));
			ol_s3_delete_free(&d);
		}
		break;
	}
	case 2: {
		char loc[64];
		int vs;
		(void)ol_s3_parse_create_bucket(body, n, loc, sizeof(loc));
		(void)ol_s3_parse_versioning(body, n, &vs);
		struct ol_s3_tags tg;
		const char *why;
		if (ol_s3_parse_tagging(body, n, &tg) == 0) {
			(void)ol_s3_tags_check(&tg, OL_S3_MAX_TAGS, &why);
			ol_s3_tags_free(&tg);
		}
		if (ol_s3_tags_parse_query(body, n, &tg) == 0) {
			struct ol_buf enc = {0};
			(void)ol_s3_tags_check(&tg, OL_S3_MAX_OBJ_TAGS, &why);
			ol_s3_tags_encode(&tg, &enc);
			ol_buf_free(&enc);
			ol_s3_tags_free(&tg);
		}
		break;
	}
	case 3: {
		static struct ol_s3_route r;
		size_t hl = strlen(z);
		(void)ol_s3_route(z, "store.example", hl < n ? z + hl + 1 : "", &r);
		(void)ol_s3_bucket_name_ok(z);
		break;
	}
	case 4: {
		char v[256];
		(void)ol_s3_query_get(z, "prefix", v, sizeof(v));
		(void)ol_s3_query_has(z, "uploads");
		break;
	}
	case 5: {
		uint64_t off, len;
		(void)ol_s3_range_parse(z, 1000, &off, &len);
		(void)ol_s3_range_parse(z, 0, &off, &len);
		break;
	}
	case 6: {
		size_t pos = 0;
		struct ol_s3_meta_kv kv;
		const char *val;
		while (ol_s3_meta_next(body, n, &pos, &kv))
			;
		(void)ol_s3_meta_get(body, n, "content-type", &val);
		break;
	}
	case 8: {
		struct ol_acl a;
		struct ol_buf x = {0};
		struct ol_cors c;
		struct ol_pab pab;
		char own[32];
		if (ol_acl_parse_xml(body, n, &a) == 0) {
			ol_acl_xml(&a, &x);
			(void)ol_acl_perms(&a, "bob");
		}
		ol_buf_free(&x);
		if (ol_cors_parse(body, n, &c) == 0)
			(void)ol_cors_match(&c, "https://a.example", "GET", "x-amz-date, a");
		ol_cors_free(&c);
		(void)ol_pab_parse(body, n, &pab);
		(void)ol_ownership_parse(body, n, own, sizeof(own));
		break;
	}
	case 9: {
		struct ol_acl a;
		struct ol_buf x = {0};
		const char *v;
		if (ol_acl_decode(body, n, &a) == 0)
			ol_acl_encode(&a, &x);
		memset(&a, 0, sizeof(a));
		(void)ol_acl_add_header(&a, OL_ACL_READ, z);
		(void)ol_s3_attr_get(body, n, "policy", &v);
		ol_s3_attr_set(&x, body, n, "owner", "alice", 5);
		ol_buf_free(&x);
		break;
	}
	default: {
		int64_t secs;
		(void)ol_s3_parse_http_date(z, &secs);
	}
	}
	free(z);
	return 0;
}
