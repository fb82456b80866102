/* s3/policy.c - the bucket policy of a request: kept in the bucket's attrs as the JSON the
 * owner sent, parsed once and cached by content (bpolicy.c), evaluated with the request's
 * condition keys. Also the ?policy and ?policyStatus handlers. */
#include "s3/s3int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "s3/bpolicy.h"

/* ---- per-thread cache of parsed policies ----
 * Keyed by (bucket, policy id): the id is a hash of the document computed once when it is
 * stored, so a lookup compares a few bytes, takes no lock and parses nothing. Each request
 * thread keeps its own few entries (freed when the thread ends). */

#define PCACHE 8

struct pentry {
	char bucket[64];
	char id[24];
	struct ol_policy *p;
	unsigned long long used;
};

struct pcache {
	struct pentry e[PCACHE];
	unsigned long long tick;
};

static pthread_key_t pcache_key;
static pthread_once_t pcache_once = PTHREAD_ONCE_INIT;

static void
pcache_free(void *arg)
{
	struct pcache *c = arg;
	for (int i = 0; i < PCACHE; i++)
		ol_policy_free(c->e[i].p);
	free(c);
}

static void
pcache_init(void)
{
	if (pthread_key_create(&pcache_key, pcache_free) != 0)
		ol_die("s3: pthread_key_create failed");
}

static uint64_t
fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

/* Policy id of a document: its length and hash, as stored beside it. */
static void
policy_id(const char *text, size_t n, char out[24])
{
	snprintf(out, 24, "%zx-%016llx", n & 0xffff, (unsigned long long)fnv(text, n));
}

/* The parsed policy of the loaded bucket (owned by the thread's cache), or NULL. */
static struct ol_policy *
policy_get(struct s3_req *r, const char *text, size_t n)
{
	const char *idv;
	char id[24];
	long il = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "policy-id", &idv);
	if (il > 0 && (size_t)il < sizeof(id)) {
		memcpy(id, idv, (size_t)il);
		id[il] = '\0';
	} else {
		policy_id(text, n, id);
	}
	pthread_once(&pcache_once, pcache_init);
	struct pcache *c = pthread_getspecific(pcache_key);
	if (!c) {
		c = ol_xcalloc(1, sizeof(*c));
		pthread_setspecific(pcache_key, c);
	}
	struct pentry *victim = &c->e[0];
	c->tick++;
	for (int i = 0; i < PCACHE; i++) {
		struct pentry *e = &c->e[i];
		if (e->p && strcmp(e->id, id) == 0 && strcmp(e->bucket, r->rt.bucket) == 0) {
			e->used = c->tick;
			return e->p;
		}
		if (!e->p || e->used < victim->used)
			victim = e;
	}
	struct ol_policy *p;
	char msg[8];
	if (ol_policy_parse(text, n, r->rt.bucket, &p, msg, 0) < 0)
		return NULL;
	ol_policy_free(victim->p);
	victim->p = p;
	victim->used = c->tick;
	snprintf(victim->bucket, sizeof(victim->bucket), "%s", r->rt.bucket);
	memcpy(victim->id, id, sizeof(id));
	return p;
}

/* ---- condition keys ---- */

struct keyctx {
	struct s3_req *r;
	const void *meta; /* the object's metadata blob: s3_policy_verdict_obj only */
	size_t meta_len;
	char buf[1100];
};

#define EXISTING_TAG "s3:existingobjecttag/"

/* s3:ExistingObjectTag/<tag key>: the value of that tag of the object the request acts on
 * (NULL without it, or before the object is read). The condition key arrives lowercased, so
 * the tag key matches without regard to case. */
static const char *
existing_tag(struct keyctx *k, const char *tag)
{
	const char *v;
	struct ol_s3_tags t;
	const char *out = NULL;
	long n = k->meta ? ol_s3_meta_get(k->meta, k->meta_len, "ol-tags", &v) : -1;
	if (n <= 0 || ol_s3_tags_parse_query(v, (size_t)n, &t) < 0)
		return NULL;
	for (unsigned i = 0; i < t.n && !out; i++)
		if (strcasecmp(t.key[i], tag) == 0 && strlen(t.val[i]) < sizeof(k->buf)) {
			memcpy(k->buf, t.val[i], strlen(t.val[i]) + 1);
			out = k->buf;
		}
	ol_s3_tags_free(&t);
	return out;
}

static const char *
query_key(struct keyctx *k, const char *name)
{
	long n = ol_s3_query_get(k->r->query, name, k->buf, sizeof(k->buf));
	return n >= 0 ? k->buf : NULL;
}

static const char *
source_ip(struct keyctx *k)
{
	const char *p = k->r->h->peer;
	if (!p)
		return NULL;
	const char *s = p[0] == '[' ? p + 1 : p;
	const char *e = p[0] == '[' ? strchr(s, ']') : strrchr(s, ':');
	size_t n = e ? (size_t)(e - s) : strlen(s);
	if (n >= sizeof(k->buf))
		return NULL;
	memcpy(k->buf, s, n);
	k->buf[n] = '\0';
	return k->buf;
}

static const char *
key_value(const char *name, void *arg)
{
	struct keyctx *k = arg;
	struct s3_req *r = k->r;
	if (strcmp(name, "aws:sourceip") == 0)
		return source_ip(k);
	if (strcmp(name, "aws:securetransport") == 0)
		return r->h->tls ? "true" : "false";
	if (strcmp(name, "aws:username") == 0 || strcmp(name, "aws:userid") == 0)
		return r->user;
	if (strcmp(name, "aws:principaltype") == 0)
		return r->user ? "User" : "Anonymous";
	if (strcmp(name, "aws:referer") == 0)
		return ol_http_header(r->h, "referer");
	if (strcmp(name, "aws:useragent") == 0)
		return ol_http_header(r->h, "user-agent");
	if (strcmp(name, "s3:prefix") == 0)
		return query_key(k, "prefix");
	if (strcmp(name, "s3:delimiter") == 0)
		return query_key(k, "delimiter");
	if (strcmp(name, "s3:max-keys") == 0)
		return query_key(k, "max-keys");
	if (strcmp(name, "s3:signatureversion") == 0)
		return r->user ? "AWS4-HMAC-SHA256" : NULL;
	if (strcmp(name, "s3:authtype") == 0)
		return !r->user ? NULL : r->auth.presigned ? "REST-QUERY-STRING" : "REST-HEADER";
	if (strncmp(name, "s3:x-amz-", 9) == 0)
		return ol_http_header(r->h, name + 3);
	if (strncmp(name, EXISTING_TAG, strlen(EXISTING_TAG)) == 0)
		return existing_tag(k, name + strlen(EXISTING_TAG));
	return NULL;
}

static bool
object_action(const char *a)
{
	static const char *const objs[] = {"s3:GetObject",
					   "s3:PutObject",
					   "s3:DeleteObject",
					   "s3:GetObjectAcl",
					   "s3:PutObjectAcl",
					   "s3:AbortMultipartUpload",
					   "s3:ListMultipartUploadParts",
					   "s3:GetObjectVersion",
					   "s3:DeleteObjectVersion",
					   "s3:GetObjectVersionAcl",
					   "s3:GetObjectTagging",
					   "s3:PutObjectTagging",
					   "s3:DeleteObjectTagging",
					   "s3:GetObjectVersionTagging",
					   "s3:PutObjectVersionTagging",
					   "s3:DeleteObjectVersionTagging",
					   "s3:GetObjectRetention",
					   "s3:PutObjectRetention",
					   "s3:GetObjectLegalHold",
					   "s3:PutObjectLegalHold",
					   "s3:BypassGovernanceRetention",
					   "s3:GetObjectAttributes",
					   "s3:GetObjectVersionAttributes"};
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		if (strcmp(a, objs[i]) == 0)
			return true;
	return false;
}

/* "arn:aws:s3:::bucket" or, with a key, "arn:aws:s3:::bucket/key" into out. */
static void
res_arn(char *out, const char *bucket, const char *key, size_t kl)
{
	size_t bl = strlen(bucket);
	memcpy(out, "arn:aws:s3:::", 13);
	memcpy(out + 13, bucket, bl);
	out[13 + bl] = '\0';
	if (kl) {
		out[13 + bl] = '/';
		memcpy(out + 14 + bl, key, kl);
		out[14 + bl + kl] = '\0';
	}
}

static int
verdict(struct s3_req *r, const char *action, const char *key, size_t key_len, const void *meta,
	size_t meta_len)
{
	const char *text;
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "policy", &text);
	int v;
	if (n <= 0)
		return 0;
	struct ol_policy *p = policy_get(r, text, (size_t)n);
	if (!p)
		return 0;
	struct keyctx k;
	char res[16 + sizeof(r->rt.bucket) + OL_S3_MAX_KEY];
	res_arn(res, r->rt.bucket, key, object_action(action) ? key_len : 0);
	k.r = r;
	k.meta = meta;
	k.meta_len = meta_len;
	struct ol_policy_req q = {r->user, action, res, key_value, &k};
	v = ol_policy_eval(p, &q);
	if (v > 0 && r->ba.pab.restrict_public_buckets && ol_policy_is_public(p) &&
	    !(r->user && strcmp(r->user, s3_bucket_owner(r)) == 0)) {
		ol_debug("s3 %s policy of %s is public: RestrictPublicBuckets ignores its allow",
			 r->reqid, r->rt.bucket);
		v = 0;
	}
	ol_debug("s3 %s policy of %s: %s on %s by %s -> %s", r->reqid, r->rt.bucket, action, res,
		 r->user ? r->user : "(anonymous)",
		 v > 0	 ? "allow"
		 : v < 0 ? "deny"
			 : "no match");
	return v;
}

int
s3_policy_verdict_key(struct s3_req *r, const char *action, const char *key, size_t key_len)
{
	return verdict(r, action, key, key_len, NULL, 0);
}

int
s3_policy_verdict_obj(struct s3_req *r, const char *action, const void *meta, size_t meta_len)
{
	return verdict(r, action, r->rt.key, r->rt.key_len, meta, meta_len);
}

bool
s3_policy_uses_object_tags(struct s3_req *r)
{
	const char *text;
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "policy", &text);
	struct ol_policy *p = n > 0 ? policy_get(r, text, (size_t)n) : NULL;
	return p && ol_policy_uses_key(p, EXISTING_TAG);
}

int
s3_policy_verdict(struct s3_req *r, const char *action)
{
	return s3_policy_verdict_key(r, action, r->rt.key, r->rt.key_len);
}

/* ---- ?policy, ?policyStatus ---- */

static int
principal_known(const char *user, void *arg)
{
	return s3_user_known(arg, user) ? 0 : -ENOENT;
}

void
s3_put_policy(struct s3_req *r)
{
	struct s3_body b;
	struct ol_policy *p = NULL;
	char *body = NULL, msg[160];
	size_t len;
	r->op = "PutBucketPolicy";
	if (s3_length_check(r, OL_POLICY_MAX_BYTES) < 0)
		return;
	if (s3_body_slurp(r, OL_POLICY_MAX_BYTES, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (ol_policy_parse(body, len, r->rt.bucket, &p, msg, sizeof(msg)) < 0) {
		ol_debug("s3 %s PutBucketPolicy %s refused: %s", r->reqid, r->rt.bucket, msg);
		s3_error_code(r, "MalformedPolicy", 400, msg, NULL);
		goto out;
	}
	if (ol_policy_each_principal(p, principal_known, r) != 0) {
		s3_error_code(r, "MalformedPolicy", 400, "Invalid principal in policy", NULL);
		goto out;
	}
	if (s3_public_policy_blocked(r, ol_policy_is_public(p)))
		goto out;
	char id[24];
	policy_id(body, len, id);
	int rc =
	    s3_bucket_attr_store2(r, "policy", body, (long)len, "policy-id", id, (long)strlen(id));
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	s3_send(r, 204, NULL, 0, NULL, 0);
out:
	ol_policy_free(p);
	free(body);
	s3_body_fini(&b);
}

void
s3_get_policy(struct s3_req *r)
{
	const char *text;
	r->op = "GetBucketPolicy";
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "policy", &text);
	if (n <= 0) {
		s3_error_code(r, "NoSuchBucketPolicy", 404, "The bucket policy does not exist",
			      NULL);
		return;
	}
	struct ol_http_header h[1] = {{"Content-Type", "application/json"}};
	s3_send(r, 200, h, 1, text, (size_t)n);
}

void
s3_delete_policy(struct s3_req *r)
{
	r->op = "DeleteBucketPolicy";
	int rc = s3_bucket_attr_store2(r, "policy", NULL, -1, "policy-id", NULL, -1);
	if (rc < 0) {
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
		return;
	}
	s3_send(r, 204, NULL, 0, NULL, 0);
}

void
s3_get_policy_status(struct s3_req *r)
{
	const char *text;
	struct ol_policy *p = NULL;
	struct ol_buf x = {0};
	char msg[8];
	r->op = "GetBucketPolicyStatus";
	/* public: a policy open to everyone, or (as RGW and S3's Access Analyzer see it) a
	 * bucket ACL granting AllUsers or AuthenticatedUsers */
	bool pub = s3_bucket_acl_public(r);
	long n = ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "policy", &text);
	if (n > 0 && ol_policy_parse(text, (size_t)n, r->rt.bucket, &p, msg, 0) == 0)
		pub = pub || ol_policy_is_public(p);
	ol_policy_free(p);
	ol_s3_xml_open_root(&x, "PolicyStatus");
	ol_s3_xml_elem(&x, "IsPublic", pub ? "true" : "false");
	ol_buf_adds(&x, "</PolicyStatus>");
	s3_send_xml(r, 200, &x);
}
