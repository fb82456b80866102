/* s3/access.c - who is asking, what they ask for, and whether they may: bucket owners,
 * ACLs (bucket and object) and the bucket policy, evaluated for every request, anonymous
 * ones included. Every decision is logged at debug level with its reason and counted. */
#include "s3/s3int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/keyring.h"
#include "base/log.h"
#include "base/metrics.h"

#define ADMIN_USER "admin"

/* ---- decisions: reasons, metrics, log ---- */

enum why {
	WHY_ADMIN,
	WHY_OWNER,
	WHY_ACL,
	WHY_POLICY_ALLOW,
	WHY_POLICY_DENY,
	WHY_NOT_OWNER,
	WHY_NO_GRANT,
	WHY_ANONYMOUS,
	WHY_OWNERSHIP_ENFORCED,
	WHY_N
};
static const char *const why_name[WHY_N] = {"admin",	    "owner",	   "acl_grant",
					    "policy_allow", "policy_deny", "not_owner",
					    "no_grant",	    "anonymous",   "ownership_enforced"};
static uint64_t why_count[WHY_N];

void
s3_access_metrics_render(struct ol_strbuf *out, void *arg)
{
	(void)arg;
	ol_strbuf_printf(out, "# HELP openlake_s3_access_decisions_total Access decisions by "
			      "outcome and reason.\n"
			      "# TYPE openlake_s3_access_decisions_total counter\n");
	for (int i = 0; i < WHY_N; i++) {
		bool allow = i <= WHY_POLICY_ALLOW;
		ol_strbuf_printf(
		    out,
		    "openlake_s3_access_decisions_total{decision=\"%s\",reason=\"%s\"} "
		    "%llu\n",
		    allow ? "allow" : "deny", why_name[i],
		    (unsigned long long)ol_counter_get(&why_count[i]));
	}
}

static bool
decide(struct s3_req *r, enum why w)
{
	bool allow = w <= WHY_POLICY_ALLOW;
	ol_counter_add(&why_count[w], 1);
	ol_debug("s3 %s access %s %s by %s on %s/%.*s: %s", r->reqid, r->act.name,
		 allow ? "allowed" : "denied", r->user ? r->user : "(anonymous)", r->rt.bucket,
		 (int)(r->rt.key_len > 200 ? 200 : r->rt.key_len), r->rt.key, why_name[w]);
	return allow;
}

/* ---- identity ---- */

void
s3_identity(struct s3_req *r, bool anonymous)
{
	const struct ol_config *cfg = r->srv->cfg;
	r->user = NULL;
	r->admin = false;
	if (anonymous)
		return;
	const char *user = "";
	bool admin = false;
	/* verified, so the key was known: a config key, or a run-time one (base/keyring.h).
	 * A run-time key removed since the signature was checked is served as anonymous, never
	 * as anyone's. */
	if (ol_keyring_lookup(cfg, r->auth.access_key, &user, &admin))
		return;
	r->user = user[0] ? user : ADMIN_USER;
	r->admin = admin;
}

/* ---- bucket attributes ---- */

static void
attrs_parse(struct s3_req *r)
{
	struct s3_bucket_attrs *ba = &r->ba;
	const char *v;
	long n = ol_s3_attr_get(ba->blob, ba->blob_len, "owner", &v);
	char owner[OL_ACL_ID_MAX] = ADMIN_USER;
	if (n > 0 && ol_acl_id_ok(v, (size_t)n)) {
		memcpy(owner, v, (size_t)n);
		owner[n] = '\0';
	}
	n = ol_s3_attr_get(ba->blob, ba->blob_len, "acl", &v);
	if (n <= 0 || ol_acl_decode(v, (size_t)n, &ba->acl) < 0 || !ba->acl.owner[0])
		ol_acl_canned(&ba->acl, "private", owner, NULL);
	snprintf(ba->acl.owner, sizeof(ba->acl.owner), "%s", owner);
	memset(&ba->pab, 0, sizeof(ba->pab));
	n = ol_s3_attr_get(ba->blob, ba->blob_len, "pab", &v);
	if (n > 0)
		ol_pab_decode(v, (size_t)n, &ba->pab);
	n = ol_s3_attr_get(ba->blob, ba->blob_len, "ownership", &v);
	ba->ownership[0] = '\0';
	if (n > 0 && (size_t)n < sizeof(ba->ownership)) {
		memcpy(ba->ownership, v, (size_t)n);
		ba->ownership[n] = '\0';
	}
}

/* ---- per-thread cache of bucket attrs ----
 * A GET needs its bucket's attrs (owner, ACL, policy): a quorum read of N records each time
 * cost ~10% of a 4 KiB GET. Each request thread keeps the attrs of a few buckets, valid while
 * the generation below is unchanged. The process that writes a bucket record bumps it after
 * each write (and tells the server's bucket hook: in a cluster the serving leader then tells
 * the other nodes through etcd); a node that reads a store another process writes (a cluster
 * node serving reads, docs/cluster.md "Serving and forwarding") bumps it when told of a change
 * (ol_s3_buckets_changed), and ol_s3_set_store bumps it when the leadership comes back. */

#define BCACHE 8

static _Atomic uint64_t bucket_gen = 1;

struct bentry {
	char bucket[64];
	uint64_t gen;
	char *blob;
	size_t len;
	unsigned long long used;
	/* what attrs_parse makes of blob, kept with it (its ACL's grants, up to acl.n) */
	struct ol_acl acl;
	struct ol_pab pab;
	char ownership[32];
};

struct bcache {
	struct bentry e[BCACHE];
	unsigned long long tick;
};

static pthread_key_t bcache_key;
static pthread_once_t bcache_once = PTHREAD_ONCE_INIT;

static void
bcache_free(void *arg)
{
	struct bcache *c = arg;
	for (int i = 0; i < BCACHE; i++)
		free(c->e[i].blob);
	free(c);
}

static void
bcache_init(void)
{
	if (pthread_key_create(&bcache_key, bcache_free) != 0)
		ol_die("s3: pthread_key_create failed");
}

static struct bcache *
bcache_get(void)
{
	pthread_once(&bcache_once, bcache_init);
	struct bcache *c = pthread_getspecific(bcache_key);
	if (!c) {
		c = ol_xcalloc(1, sizeof(*c));
		pthread_setspecific(bcache_key, c);
	}
	return c;
}

void
s3_bucket_changed(void)
{
	atomic_fetch_add(&bucket_gen, 1);
}

void
ol_s3_buckets_changed(void)
{
	s3_bucket_changed();
}

void
s3_bucket_written(struct ol_s3_server *s)
{
	s3_bucket_changed();
	if (s->bucket_hook)
		s->bucket_hook(s->bucket_hook_arg);
}

void
ol_s3_set_bucket_hook(struct ol_s3_server *s, void (*fn)(void *arg), void *arg)
{
	s->bucket_hook_arg = arg;
	s->bucket_hook = fn;
}

/* An ACL's owner, count and the grants it holds (not the unused rest of the array). */
static void
acl_copy(struct ol_acl *to, const struct ol_acl *from)
{
	unsigned n = from->n < OL_ACL_MAX_GRANTS ? from->n : OL_ACL_MAX_GRANTS;

	memcpy(to->owner, from->owner, sizeof(to->owner));
	to->n = n;
	memcpy(to->g, from->g, n * sizeof(to->g[0]));
}

/* A copy of the cached attrs of bucket at generation gen into r->ba, parsed; false on a
 * miss. */
static bool
bcache_lookup(struct bcache *c, struct s3_req *r, uint64_t gen)
{
	c->tick++;
	for (int i = 0; i < BCACHE; i++) {
		struct bentry *e = &c->e[i];
		if (!e->blob || e->gen != gen || strcmp(e->bucket, r->rt.bucket) != 0)
			continue;
		e->used = c->tick;
		r->ba.blob = ol_xmalloc(e->len + 1);
		memcpy(r->ba.blob, e->blob, e->len + 1);
		r->ba.blob_len = e->len;
		acl_copy(&r->ba.acl, &e->acl);
		r->ba.pab = e->pab;
		memcpy(r->ba.ownership, e->ownership, sizeof(r->ba.ownership));
		return true;
	}
	return false;
}

static void
bcache_insert(struct bcache *c, const struct s3_req *r, uint64_t gen)
{
	struct bentry *v = &c->e[0];
	if (strlen(r->rt.bucket) >= sizeof(v->bucket))
		return;
	for (int i = 1; i < BCACHE; i++)
		if (!c->e[i].blob || c->e[i].used < v->used)
			v = &c->e[i];
	free(v->blob);
	v->blob = ol_xmalloc(r->ba.blob_len + 1);
	memcpy(v->blob, r->ba.blob, r->ba.blob_len + 1);
	v->len = r->ba.blob_len;
	acl_copy(&v->acl, &r->ba.acl);
	v->pab = r->ba.pab;
	memcpy(v->ownership, r->ba.ownership, sizeof(v->ownership));
	v->gen = gen;
	v->used = c->tick;
	snprintf(v->bucket, sizeof(v->bucket), "%s", r->rt.bucket);
}

void
s3_bucket_load(struct s3_req *r)
{
	struct s3_bucket_attrs *ba = &r->ba;
	void *blob = NULL;
	size_t len = 0;
	if (ba->loaded)
		return;
	ba->loaded = true;
	struct bcache *c = bcache_get();
	uint64_t gen = atomic_load(&bucket_gen); /* before the read: see s3_bucket_changed */
	if (bcache_lookup(c, r, gen)) {
		ba->exists = true;
		return;
	}
	int rc = ol_store_bucket_attrs(r->srv->st, r->rt.bucket, &blob, &len);
	ba->exists = rc == 0;
	ba->rc = rc;
	ba->blob = blob;
	ba->blob_len = len;
	attrs_parse(r);
	if (rc == 0)
		bcache_insert(c, r, gen);
}

const char *
s3_bucket_owner(const struct s3_req *r)
{
	return r->ba.acl.owner;
}

void
s3_attr_stored(struct s3_req *r, int rc, int status)
{
	if (rc < 0)
		s3_store_error(r, rc, OL_S3E_NO_SUCH_BUCKET);
	else
		s3_send(r, status, NULL, 0, NULL, 0);
}

int
s3_bucket_attr_store(struct s3_req *r, const char *name, const char *val, long vl)
{
	return s3_bucket_attr_store2(r, name, val, vl, NULL, NULL, -1);
}

int
s3_bucket_attr_store2(struct s3_req *r, const char *name, const char *val, long vl,
		      const char *name2, const char *val2, long vl2)
{
	struct ol_buf b = {0}, t = {0};
	ol_s3_attr_set(&t, r->ba.blob, r->ba.blob_len, name, val, vl);
	if (name2)
		ol_s3_attr_set(&b, t.p, t.len, name2, val2, vl2);
	else
		b = t, t = (struct ol_buf){0};
	ol_buf_free(&t);
	int rc = ol_store_bucket_set_attrs(r->srv->st, r->rt.bucket, b.p ? b.p : "", b.len);
	s3_bucket_written(r->srv);
	if (rc == 0) {
		free(r->ba.blob);
		r->ba.blob = b.p ? b.p : ol_xmalloc(1);
		r->ba.blob_len = b.len;
		attrs_parse(r);
	} else {
		ol_buf_free(&b);
	}
	return rc;
}

void
s3_access_fini(struct s3_req *r)
{
	free(r->ba.blob);
	r->ba.blob = NULL;
}

/* ---- what the request asks for ---- */

struct act_row {
	char method; /* first letter: G(ET) H(EAD) P(UT) p(OST) D(ELETE) */
	const char *sub;
	struct s3_action act;
};

/* Bucket requests, first match wins (sub NULL: any). */
static const struct act_row bucket_acts[] = {
    {'P', "acl", {"s3:PutBucketAcl", OL_ACL_WRITE_ACP, false}},
    {'G', "acl", {"s3:GetBucketAcl", OL_ACL_READ_ACP, false}},
    {'P', "policy", {"s3:PutBucketPolicy", 0, false}},
    {'G', "policyStatus", {"s3:GetBucketPolicyStatus", 0, false}},
    {'G', "policy", {"s3:GetBucketPolicy", 0, false}},
    {'D', "policy", {"s3:DeleteBucketPolicy", 0, false}},
    {'P', "cors", {"s3:PutBucketCORS", 0, false}},
    {'G', "cors", {"s3:GetBucketCORS", 0, false}},
    {'D', "cors", {"s3:PutBucketCORS", 0, false}},
    {'P', "publicAccessBlock", {"s3:PutBucketPublicAccessBlock", 0, false}},
    {'G', "publicAccessBlock", {"s3:GetBucketPublicAccessBlock", 0, false}},
    {'D', "publicAccessBlock", {"s3:PutBucketPublicAccessBlock", 0, false}},
    {'P', "ownershipControls", {"s3:PutBucketOwnershipControls", 0, false}},
    {'G', "ownershipControls", {"s3:GetBucketOwnershipControls", 0, false}},
    {'D', "ownershipControls", {"s3:PutBucketOwnershipControls", 0, false}},
    {'G', "location", {"s3:GetBucketLocation", 0, false}},
    {'G', "versioning", {"s3:GetBucketVersioning", 0, false}},
    {'P', "versioning", {"s3:PutBucketVersioning", 0, false}},
    {'P', "tagging", {"s3:PutBucketTagging", 0, false}},
    {'G', "tagging", {"s3:GetBucketTagging", 0, false}},
    {'D', "tagging", {"s3:PutBucketTagging", 0, false}},
    {'P', "object-lock", {"s3:PutBucketObjectLockConfiguration", 0, false}},
    {'G', "object-lock", {"s3:GetBucketObjectLockConfiguration", 0, false}},
    {'P', "lifecycle", {"s3:PutLifecycleConfiguration", 0, false}},
    {'G', "lifecycle", {"s3:GetLifecycleConfiguration", 0, false}},
    {'D', "lifecycle", {"s3:PutLifecycleConfiguration", 0, false}},
    {'P', "encryption", {"s3:PutEncryptionConfiguration", 0, false}},
    {'G', "encryption", {"s3:GetEncryptionConfiguration", 0, false}},
    {'D', "encryption", {"s3:PutEncryptionConfiguration", 0, false}},
    {'G', "uploads", {"s3:ListBucketMultipartUploads", OL_ACL_READ, false}},
    {'G', "versions", {"s3:ListBucketVersions", OL_ACL_READ, false}},
    {'p', "delete", {"s3:DeleteObject", OL_ACL_WRITE, true}}, /* per key: s3_key_delete_ok */
    {'G', NULL, {"s3:ListBucket", OL_ACL_READ, false}},
    {'H', NULL, {"s3:ListBucket", OL_ACL_READ, false}},
    {'D', NULL, {"s3:DeleteBucket", 0, false}},
    {'P', NULL, {"s3:CreateBucket", 0, false}},
};

static const struct act_row object_acts[] = {
    {'P', "acl", {"s3:PutObjectAcl", OL_ACL_WRITE_ACP, true}},
    {'G', "acl", {"s3:GetObjectAcl", OL_ACL_READ_ACP, true}},
    {'P', "tagging", {"s3:PutObjectTagging", OL_ACL_WRITE, false}},
    {'G', "tagging", {"s3:GetObjectTagging", OL_ACL_READ, true}},
    {'D', "tagging", {"s3:DeleteObjectTagging", OL_ACL_WRITE, false}},
    {'P', "retention", {"s3:PutObjectRetention", 0, false}},
    {'G', "retention", {"s3:GetObjectRetention", 0, false}},
    {'P', "legal-hold", {"s3:PutObjectLegalHold", 0, false}},
    {'G', "legal-hold", {"s3:GetObjectLegalHold", 0, false}},
    {'P', NULL, {"s3:PutObject", OL_ACL_WRITE, false}},
    {'p', NULL, {"s3:PutObject", OL_ACL_WRITE, false}},
    {'G', "uploadId", {"s3:ListMultipartUploadParts", OL_ACL_READ, false}},
    {'G', "attributes", {"s3:GetObjectAttributes", OL_ACL_READ, true}},
    {'G', NULL, {"s3:GetObject", OL_ACL_READ, true}},
    {'H', NULL, {"s3:GetObject", OL_ACL_READ, true}},
    {'D', "uploadId", {"s3:AbortMultipartUpload", OL_ACL_WRITE, false}},
    {'D', NULL, {"s3:DeleteObject", OL_ACL_WRITE, false}},
};

static char
method_letter(const char *m)
{
	if (strcmp(m, "POST") == 0)
		return 'p';
	return m[0];
}

/* A request naming one version (?versionId=) is its own action for policies, as in AWS. */
static void
version_action(struct s3_req *r)
{
	static const char *const map[][2] = {
	    {"s3:GetObject", "s3:GetObjectVersion"},
	    {"s3:DeleteObject", "s3:DeleteObjectVersion"},
	    {"s3:GetObjectAcl", "s3:GetObjectVersionAcl"},
	    {"s3:GetObjectTagging", "s3:GetObjectVersionTagging"},
	    {"s3:PutObjectTagging", "s3:PutObjectVersionTagging"},
	    {"s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging"},
	    {"s3:GetObjectAttributes", "s3:GetObjectVersionAttributes"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(r->act.name, map[i][0]) == 0) {
			r->act.name = map[i][1];
			return;
		}
}

static void
classify(struct s3_req *r)
{
	static const struct s3_action other = {"s3:Other", 0, false};
	bool obj = r->rt.key_len > 0;
	const struct act_row *t = obj ? object_acts : bucket_acts;
	size_t n = obj ? sizeof(object_acts) / sizeof(object_acts[0])
		       : sizeof(bucket_acts) / sizeof(bucket_acts[0]);
	char m = method_letter(r->h->method);
	r->act = other;
	for (size_t i = 0; i < n; i++) {
		if (t[i].method != m || (t[i].sub && !ol_s3_query_has(r->query, t[i].sub)))
			continue;
		r->act = t[i].act;
		break;
	}
	if (obj && ol_s3_query_has(r->query, "versionId"))
		version_action(r);
}

/* ---- public access block ---- */

static bool
acl_public(const struct ol_acl *a)
{
	for (unsigned i = 0; i < a->n; i++)
		if (a->g[i].type == OL_ACL_ALL_USERS || a->g[i].type == OL_ACL_AUTH_USERS)
			return true;
	return false;
}

/* What an ACL gives the requester, public grants left out under IgnorePublicAcls. */
static unsigned
acl_perms(const struct s3_req *r, const struct ol_acl *a)
{
	if (!r->ba.pab.ignore_public_acls || !acl_public(a))
		return ol_acl_perms(a, r->user);
	struct ol_acl *p = ol_xmalloc(sizeof(*p));
	*p = *a;
	p->n = 0;
	for (unsigned i = 0; i < a->n; i++)
		if (a->g[i].type == OL_ACL_USER)
			p->g[p->n++] = a->g[i];
	unsigned perms = ol_acl_perms(p, r->user);
	free(p);
	return perms;
}

/* BlockPublicAcls: a public ACL in a request is refused (true: 403 sent). */
static bool
public_acl_blocked(struct s3_req *r, const struct ol_acl *a)
{
	if (!r->ba.pab.block_public_acls || !acl_public(a))
		return false;
	ol_debug("s3 %s %s: public ACL refused by the bucket's BlockPublicAcls", r->reqid,
		 r->act.name);
	s3_error(r, OL_S3E_ACCESS_DENIED, NULL);
	return true;
}

bool
s3_public_policy_blocked(struct s3_req *r, bool is_public)
{
	if (!r->ba.pab.block_public_policy || !is_public)
		return false;
	ol_debug("s3 %s PutBucketPolicy %s: public policy refused by BlockPublicPolicy", r->reqid,
		 r->rt.bucket);
	s3_error(r, OL_S3E_ACCESS_DENIED, NULL);
	return true;
}

bool
s3_bucket_acl_public(const struct s3_req *r)
{
	return acl_public(&r->ba.acl);
}

bool
s3_bucket_acl_private(const struct s3_req *r)
{
	const struct ol_acl *a = &r->ba.acl;
	for (unsigned i = 0; i < a->n; i++)
		if (a->g[i].type != OL_ACL_USER || strcmp(a->g[i].id, a->owner) != 0)
			return false;
	return true;
}

/* ---- ACL from request headers ---- */

static bool
takes_acl_headers(const struct s3_req *r)
{
	const char *a = r->act.name;
	if (strcmp(a, "s3:PutObject") == 0)
		return !ol_s3_query_has(r->query, "uploadId") &&
		       !ol_s3_query_has(r->query, "partNumber");
	return strcmp(a, "s3:CreateBucket") == 0 || strcmp(a, "s3:PutBucketAcl") == 0 ||
	       strcmp(a, "s3:PutObjectAcl") == 0;
}

/* Owner of what this request creates: the writer (anonymous: the bucket owner), or the
 * bucket owner where the bucket enforces its ownership. */
static const char *
new_owner(const struct s3_req *r)
{
	if (strcmp(r->act.name, "s3:CreateBucket") == 0)
		return r->user;
	if (!r->user || strcmp(r->ba.ownership, "BucketOwnerEnforced") == 0)
		return s3_bucket_owner(r);
	const char *canned = ol_http_header(r->h, "x-amz-acl");
	if (strcmp(r->ba.ownership, "BucketOwnerPreferred") == 0 && canned &&
	    strcmp(canned, "bucket-owner-full-control") == 0)
		return s3_bucket_owner(r);
	return r->user;
}

static const char *const grant_hdrs[] = {"x-amz-grant-read", "x-amz-grant-write",
					 "x-amz-grant-read-acp", "x-amz-grant-write-acp",
					 "x-amz-grant-full-control"};
static const unsigned grant_perms[] = {OL_ACL_READ, OL_ACL_WRITE, OL_ACL_READ_ACP, OL_ACL_WRITE_ACP,
				       OL_ACL_FULL};

/* Canned ACLs that grant the owner alone, which a BucketOwnerEnforced bucket still takes. */
static bool
owner_only_canned(const char *c)
{
	return strcmp(c, "bucket-owner-full-control") == 0 || strcmp(c, "private") == 0;
}

/* Parse x-amz-acl / x-amz-grant-* into r->req_acl. 0, or -1 with a 400 sent. */
static int
req_acl_parse(struct s3_req *r)
{
	const char *canned = ol_http_header(r->h, "x-amz-acl");
	const char *owner = new_owner(r);
	bool grants = false;
	int rc = 0;
	memset(&r->req_acl, 0, sizeof(r->req_acl));
	snprintf(r->req_acl.owner, sizeof(r->req_acl.owner), "%s", owner);
	for (size_t i = 0; i < 5 && rc == 0; i++) {
		const char *v = ol_http_header(r->h, grant_hdrs[i]);
		if (!v)
			continue;
		grants = true;
		rc = ol_acl_add_header(&r->req_acl, grant_perms[i], v);
	}
	if (canned && grants) {
		s3_error(r, OL_S3E_INVALID_REQUEST,
			 "Specifying both Canned ACLs and Header Grants is not allowed");
		return -1;
	}
	if (canned)
		rc = ol_acl_canned(&r->req_acl, canned, owner, s3_bucket_owner(r));
	if (rc == -ENOTSUP) {
		s3_error_code(r, "UnresolvableGrantByEmailAddress", 400,
			      "The e-mail address you provided does not match any account on "
			      "record.",
			      NULL);
		return -1;
	}
	if (rc < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 canned ? "Invalid canned ACL" : "Invalid grant in x-amz-grant-* header");
		return -1;
	}
	r->has_req_acl = canned || grants;
	if (r->has_req_acl && public_acl_blocked(r, &r->req_acl))
		return -1;
	if (r->has_req_acl && r->ba.ownership[0] &&
	    strcmp(r->ba.ownership, "BucketOwnerEnforced") == 0 &&
	    !(canned && owner_only_canned(canned))) {
		s3_error_code(r, "AccessControlListNotSupported", 400,
			      "The bucket does not allow ACLs", NULL);
		return -1;
	}
	return 0;
}

/* ---- checks ---- */

static bool
enforced(const struct s3_req *r)
{
	return strcmp(r->ba.ownership, "BucketOwnerEnforced") == 0;
}

static bool
is_bucket_owner(const struct s3_req *r)
{
	return r->user && strcmp(r->user, s3_bucket_owner(r)) == 0;
}

/* Put/DeleteObjectTagging (any version): their handler reads the object and calls
 * s3_object_access, so their decision may wait for the object's tags. */
static bool
object_tagging(const struct s3_req *r)
{
	return r->rt.key_len && r->h->method[0] != 'G' && ol_s3_query_has(r->query, "tagging");
}

/* Bucket-level decision (no object needed). */
static bool
bucket_decision(struct s3_req *r)
{
	if (r->admin)
		return decide(r, WHY_ADMIN);
	if (r->pol < 0)
		return decide(r, WHY_POLICY_DENY);
	if (r->pol > 0)
		return decide(r, WHY_POLICY_ALLOW);
	/* owner-only operations, and every one where ACLs are off, go to the owner; else the
	 * bucket's ACL decides, for its owner too (who always keeps READ_ACP and WRITE_ACP) */
	if (r->act.perm == 0 || enforced(r)) {
		if (is_bucket_owner(r))
			return decide(r, WHY_OWNER);
		return decide(r, !r->user	    ? WHY_ANONYMOUS
				 : r->act.perm == 0 ? WHY_NOT_OWNER
						    : WHY_OWNERSHIP_ENFORCED);
	}
	if ((acl_perms(r, &r->ba.acl) & r->act.perm) == r->act.perm)
		return decide(r, is_bucket_owner(r) ? WHY_OWNER : WHY_ACL);
	return decide(r, r->user ? WHY_NO_GRANT : WHY_ANONYMOUS);
}

static void
deny(struct s3_req *r)
{
	s3_error(r, OL_S3E_ACCESS_DENIED, NULL);
}

bool
s3_access_check(struct s3_req *r)
{
	if (!r->rt.bucket[0]) {
		r->act = (struct s3_action){"s3:ListAllMyBuckets", 0, false};
		if (r->user)
			return true;
		decide(r, WHY_ANONYMOUS);
		deny(r);
		return false;
	}
	classify(r);
	if (!ol_s3_bucket_name_ok(r->rt.bucket))
		return true; /* the handler answers InvalidBucketName / NoSuchBucket */
	if (s3_is_post_upload(r)) {
		s3_bucket_load(r);
		if (r->ba.exists)
			return true; /* identity and key come with the form: s3_access_post */
		s3_store_error(r, r->ba.rc == -ENOENT ? -ENXIO : r->ba.rc, OL_S3E_NO_SUCH_BUCKET);
		return false;
	}
	if (strcmp(r->act.name, "s3:CreateBucket") == 0) {
		if (!r->user) {
			decide(r, WHY_ANONYMOUS);
			deny(r);
			return false;
		}
		return req_acl_parse(r) == 0;
	}
	s3_bucket_load(r);
	if (!r->ba.exists) {
		s3_store_error(r, r->ba.rc == -ENOENT ? -ENXIO : r->ba.rc, OL_S3E_NO_SUCH_BUCKET);
		return false;
	}
	/* x-amz-expected-bucket-owner: a bucket owned by anyone else is 403 AccessDenied, as
	 * AWS answers it (a client's guard against writing into a look-alike bucket). */
	const char *eo = ol_http_header(r->h, "x-amz-expected-bucket-owner");
	if (eo && strcmp(eo, s3_bucket_owner(r)) != 0) {
		s3_error(r, OL_S3E_ACCESS_DENIED,
			 "The bucket is not owned by the account given in "
			 "x-amz-expected-bucket-owner");
		return false;
	}
	r->pol = s3_policy_verdict(r, r->act.name);
	if (takes_acl_headers(r) && req_acl_parse(r) < 0)
		return false;
	if (r->act.object_acl)
		return true; /* s3_object_access once the object is read */
	if (object_tagging(r) && s3_policy_uses_object_tags(r)) {
		r->pol_obj = true; /* s3_object_access, with the object's tags */
		return true;
	}
	if (bucket_decision(r))
		return true;
	deny(r);
	return false;
}

void
s3_object_acl(struct s3_req *r, const void *meta, size_t meta_len, struct ol_acl *a)
{
	const char *v;
	long n = ol_s3_meta_get(meta, meta_len, "ol-acl", &v);
	if (n > 0 && ol_acl_decode(v, (size_t)n, a) == 0 && a->owner[0])
		return;
	char owner[OL_ACL_ID_MAX];
	n = ol_s3_meta_get(meta, meta_len, "ol-owner", &v);
	if (n > 0 && ol_acl_id_ok(v, (size_t)n)) {
		memcpy(owner, v, (size_t)n);
		owner[n] = '\0';
	} else {
		snprintf(owner, sizeof(owner), "%s", s3_bucket_owner(r));
	}
	ol_acl_canned(a, "private", owner, NULL);
}

static bool
object_decision(struct s3_req *r, const void *meta, size_t meta_len)
{
	struct ol_acl a;
	bool ok;
	if (r->admin)
		ok = decide(r, WHY_ADMIN);
	else if (r->pol < 0)
		ok = decide(r, WHY_POLICY_DENY);
	else if (r->pol > 0)
		ok = decide(r, WHY_POLICY_ALLOW);
	else if (enforced(r))
		ok = decide(r, is_bucket_owner(r) ? WHY_OWNER : WHY_OWNERSHIP_ENFORCED);
	else {
		s3_object_acl(r, meta, meta_len, &a);
		if ((acl_perms(r, &a) & r->act.perm) == r->act.perm)
			ok = decide(r,
				    r->user && strcmp(r->user, a.owner) == 0 ? WHY_OWNER : WHY_ACL);
		else
			ok = decide(r, r->user ? WHY_NO_GRANT : WHY_ANONYMOUS);
	}
	return ok;
}

bool
s3_object_access(struct s3_req *r, const void *meta, size_t meta_len)
{
	if (r->act.object_acl || r->pol_obj) {
		/* a condition on s3:ExistingObjectTag/<key> can hold only now */
		if (s3_policy_uses_object_tags(r))
			r->pol = s3_policy_verdict_obj(r, r->act.name, meta, meta_len);
	}
	if (r->pol_obj && !r->act.object_acl) {
		if (bucket_decision(r))
			return true;
		deny(r);
		return false;
	}
	if (object_decision(r, meta, meta_len))
		return true;
	deny(r);
	return false;
}

void
s3_missing_key(struct s3_req *r, enum ol_s3_err enoent)
{
	bool may_list = r->admin || (enforced(r) && is_bucket_owner(r));
	if (!may_list) {
		int pol = s3_policy_verdict(r, "s3:ListBucket");
		may_list = pol > 0 || (pol == 0 && !enforced(r) &&
				       (acl_perms(r, &r->ba.acl) & OL_ACL_READ) != 0);
	}
	if (may_list)
		s3_error(r, enoent, NULL);
	else
		deny(r);
}

void
s3_meta_add_owner(struct s3_req *r, struct ol_buf *meta)
{
	ol_s3_meta_add(meta, "ol-owner", new_owner(r));
	if (r->has_req_acl) {
		struct ol_buf b = {0};
		ol_acl_encode(&r->req_acl, &b);
		ol_s3_meta_add(meta, "ol-acl", ol_buf_cstr(&b));
		ol_buf_free(&b);
	}
}

bool
s3_source_access(struct s3_req *r, const char *sb, const char *sk, size_t skl, const void *meta,
		 size_t meta_len)
{
	struct s3_req *s = ol_xmalloc(sizeof(*s));
	bool ok;
	*s = *r;
	memset(&s->ba, 0, sizeof(s->ba));
	snprintf(s->rt.bucket, sizeof(s->rt.bucket), "%s", sb);
	memcpy(s->rt.key, sk, skl);
	s->rt.key_len = skl;
	s->act = (struct s3_action){"s3:GetObject", OL_ACL_READ, true};
	s->responded = false;
	s3_bucket_load(s);
	s->pol = s3_policy_verdict(s, s->act.name);
	ok = object_decision(s, meta, meta_len);
	s3_access_fini(s);
	if (!ok)
		deny(r);
	free(s);
	return ok;
}

bool
s3_user_known(const struct s3_req *r, const char *id)
{
	const struct ol_config *cfg = r->srv->cfg;
	for (unsigned i = 0; i < cfg->n_creds; i++) {
		const char *u = cfg->creds[i].user[0] ? cfg->creds[i].user : ADMIN_USER;
		if (strcmp(u, id) == 0)
			return true;
	}
	return ol_keyring_has_user(id); /* a user with run-time keys only */
}

int
s3_acl_from_request(struct s3_req *r, const char *owner, struct ol_acl *out)
{
	struct s3_body b;
	char *body = NULL;
	size_t len;
	int ret = -1, rc;
	if (r->has_req_acl) {
		*out = r->req_acl;
		snprintf(out->owner, sizeof(out->owner), "%s", owner);
		ret = 0;
		goto check;
	}
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	if (len == 0) {
		s3_error(r, OL_S3E_MISSING_SECURITY_HEADER, NULL);
		goto out;
	}
	rc = ol_acl_parse_xml(body, len, out);
	if (rc == -ENOTSUP) {
		s3_error_code(r, "UnresolvableGrantByEmailAddress", 400,
			      "The e-mail address you provided does not match any account on "
			      "record.",
			      NULL);
		goto out;
	}
	if (rc == -EINVAL || rc == -E2BIG) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid grant in AccessControlPolicy");
		goto out;
	}
	if (rc < 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	if (out->owner[0] && strcmp(out->owner, owner) != 0) {
		deny(r);
		goto out;
	}
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	if (public_acl_blocked(r, out))
		goto out;
	if (enforced(r)) {
		s3_error_code(r, "AccessControlListNotSupported", 400,
			      "The bucket does not allow ACLs", NULL);
		goto out;
	}
	ret = 0;
check:
	for (unsigned i = 0; i < out->n && ret == 0; i++) {
		if (out->g[i].type == OL_ACL_USER && !s3_user_known(r, out->g[i].id)) {
			s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid id");
			ret = -1;
		}
	}
out:
	free(body);
	if (!r->has_req_acl)
		s3_body_fini(&b);
	return ret;
}

bool
s3_key_delete_ok(struct s3_req *r, const char *key, size_t key_len)
{
	if (r->admin)
		return decide(r, WHY_ADMIN);
	int pol = s3_policy_verdict_key(r, "s3:DeleteObject", key, key_len);
	if (pol < 0)
		return decide(r, WHY_POLICY_DENY);
	if (pol > 0)
		return decide(r, WHY_POLICY_ALLOW);
	r->pol = 0;
	return bucket_decision(r);
}

bool
s3_may_bypass_governance(struct s3_req *r, const char *key, size_t kl)
{
	int pol;
	if (r->admin)
		return true;
	pol = s3_policy_verdict_key(r, "s3:BypassGovernanceRetention", key, kl);
	if (pol != 0)
		return pol > 0;
	return is_bucket_owner(r);
}

bool
s3_is_post_upload(const struct s3_req *r)
{
	const char *ct = ol_http_header(r->h, "content-type");
	return r->rt.key_len == 0 && strcmp(r->h->method, "POST") == 0 &&
	       !ol_s3_query_has(r->query, "delete") && ct &&
	       strncasecmp(ct, "multipart/form-data", 19) == 0;
}

bool
s3_access_post(struct s3_req *r, const char *acl)
{
	r->act = (struct s3_action){"s3:PutObject", OL_ACL_WRITE, false};
	r->has_req_acl = false;
	if (acl && acl[0]) {
		int rc = ol_acl_canned(&r->req_acl, acl, new_owner(r), s3_bucket_owner(r));
		if (rc < 0) {
			s3_error(r, OL_S3E_INVALID_ARGUMENT, "Invalid canned ACL");
			return false;
		}
		r->has_req_acl = true;
		if (public_acl_blocked(r, &r->req_acl))
			return false;
		if (enforced(r) && !owner_only_canned(acl)) {
			s3_error_code(r, "AccessControlListNotSupported", 400,
				      "The bucket does not allow ACLs", NULL);
			return false;
		}
	}
	r->pol = s3_policy_verdict(r, r->act.name);
	if (bucket_decision(r))
		return true;
	deny(r);
	return false;
}
