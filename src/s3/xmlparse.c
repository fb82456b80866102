/* s3/xmlparse.c - bounded expat parsers for S3 request bodies (Complete, Delete,
 * CreateBucketConfiguration). No DTDs, no entities beyond the predefined ones. */
#include "s3/acl.h"
#include "s3/cors.h"
#include "s3/s3util.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "s3/xp.h"

static const char *
local_name(const char *n)
{
	const char *c = strrchr(n, ':');
	return c ? c + 1 : n;
}

static void
xp_fail(struct xp *x, int err)
{
	if (!x->err)
		x->err = err;
	XML_StopParser(x->p, XML_FALSE);
}

static void XMLCALL
xp_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct xp *x = ud;
	(void)attrs;
	if (x->depth >= XP_DEPTH) {
		xp_fail(x, -EBADMSG);
		return;
	}
	const char *ln = local_name(name);
	size_t n = strlen(ln);
	if (n >= sizeof(x->names[0]))
		n = sizeof(x->names[0]) - 1;
	memcpy(x->names[x->depth], ln, n);
	x->names[x->depth][n] = '\0';
	x->path[x->depth] = x->names[x->depth];
	x->depth++;
	x->text_len = 0;
}

static void XMLCALL
xp_end(void *ud, const XML_Char *name)
{
	struct xp *x = ud;
	(void)name;
	x->text[x->text_len] = '\0';
	if (x->on_end && x->on_end(x, x->text, x->text_len) < 0) {
		xp_fail(x, -EBADMSG);
		return;
	}
	x->depth--;
	x->text_len = 0;
}

static void XMLCALL
xp_chars(void *ud, const XML_Char *s, int len)
{
	struct xp *x = ud;
	if (x->text_len + (size_t)len >= sizeof(x->text)) {
		xp_fail(x, -EBADMSG);
		return;
	}
	memcpy(x->text + x->text_len, s, (size_t)len);
	x->text_len += (size_t)len;
}

static void XMLCALL
xp_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
	   int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	xp_fail(ud, -EBADMSG);
}

/* Is the element stack exactly (root, a, b...)? */
static bool
at(const struct xp *x, int depth, const char *a, const char *b, const char *c)
{
	const char *want[3] = {a, b, c};
	if (x->depth != depth)
		return false;
	for (int i = 0; i < depth && i < 3; i++)
		if (strcmp(x->path[i], want[i]) != 0)
			return false;
	return true;
}

static int
xp_run(struct xp *x, const char *xml, size_t n)
{
	if (n > OL_S3_MAX_XML_BODY)
		return -EBADMSG;
	x->p = XML_ParserCreate("UTF-8");
	if (!x->p)
		ol_die("expat: out of memory");
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, xp_start, xp_end);
	XML_SetCharacterDataHandler(x->p, xp_chars);
	XML_SetStartDoctypeDeclHandler(x->p, xp_doctype);
	enum XML_Status st = XML_Parse(x->p, xml, (int)n, XML_TRUE);
	XML_ParserFree(x->p);
	if (x->err)
		return x->err;
	return st == XML_STATUS_OK ? 0 : -EBADMSG;
}

int
ol_s3_xp_run(struct xp *x, const char *xml, size_t n)
{
	return xp_run(x, xml, n);
}

/* ---- CompleteMultipartUpload ---- */

struct complete_ctx {
	struct ol_s3_complete_req *out;
	unsigned cap;
	struct ol_s3_part_ref cur;
	bool have_num, have_etag;
};

static int
parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	unsigned long v = strtoul(s, &end, 10);
	while (*end == ' ' || *end == '\n' || *end == '\t' || *end == '\r')
		end++;
	if (*end || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int
etag_norm(const char *s, size_t n, char *out, size_t cap)
{
	while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r' || *s == '"'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
		     s[n - 1] == '"'))
		n--;
	if (n == 0 || n >= cap)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
	out[n] = '\0';
	return 0;
}

static int
complete_end(struct xp *x, const char *t, size_t n)
{
	struct complete_ctx *c = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "CompleteMultipartUpload") == 0 ? 0 : -1;
	if (at(x, 3, "CompleteMultipartUpload", "Part", "PartNumber")) {
		c->have_num = true;
		return parse_uint(t, 1000000, &c->cur.number);
	}
	if (at(x, 3, "CompleteMultipartUpload", "Part", "ETag")) {
		c->have_etag = true;
		return etag_norm(t, n, c->cur.etag, sizeof(c->cur.etag));
	}
	static const char *const cks[] = {"CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"};
	for (size_t i = 0; x->depth == 3 && i < sizeof(cks) / sizeof(cks[0]); i++) {
		char el[24];
		snprintf(el, sizeof(el), "Checksum%s", cks[i]);
		if (!at(x, 3, "CompleteMultipartUpload", "Part", el))
			continue;
		while (n && (*t == ' ' || *t == '\n' || *t == '\t' || *t == '\r'))
			t++, n--;
		while (n && (t[n - 1] == ' ' || t[n - 1] == '\n' || t[n - 1] == '\t' ||
			     t[n - 1] == '\r'))
			n--;
		if (n == 0 || n >= sizeof(c->cur.checksum))
			return -1;
		snprintf(c->cur.ck_name, sizeof(c->cur.ck_name), "%s", cks[i]);
		memcpy(c->cur.checksum, t, n);
		c->cur.checksum[n] = '\0';
		return 0;
	}
	if (!at(x, 2, "CompleteMultipartUpload", "Part", NULL))
		return 0;
	if (!c->have_num || !c->have_etag || c->out->n_parts >= OL_S3_MAX_PARTS)
		return -1;
	if (c->out->n_parts == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->out->parts = ol_xrealloc(c->out->parts, c->cap * sizeof(*c->out->parts));
	}
	c->out->parts[c->out->n_parts++] = c->cur;
	memset(&c->cur, 0, sizeof(c->cur));
	c->have_num = c->have_etag = false;
	return 0;
}

int
ol_s3_parse_complete(const char *xml, size_t n, struct ol_s3_complete_req *out)
{
	struct complete_ctx c = {.out = out};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(out, 0, sizeof(*out));
	x->on_end = complete_end;
	x->arg = &c;
	int rc = xp_run(x, xml, n);
	free(x);
	if (rc == 0 && out->n_parts == 0)
		rc = -EBADMSG;
	if (rc < 0)
		ol_s3_complete_free(out);
	return rc;
}

void
ol_s3_complete_free(struct ol_s3_complete_req *c)
{
	free(c->parts);
	c->parts = NULL;
	c->n_parts = 0;
}

/* ---- DeleteObjects ---- */

struct delete_ctx {
	struct ol_s3_delete_req *out;
	unsigned cap;
	char *key;
	size_t key_len;
	char vid[OL_S3_MAX_VID + 1]; /* <VersionId> of the current <Object>, "" none */
};

static int
delete_object_end(struct delete_ctx *d)
{
	if (!d->key || d->out->n_keys >= OL_S3_MAX_DELETE_KEYS)
		return -1;
	if (d->out->n_keys == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->out->keys = ol_xrealloc(d->out->keys, d->cap * sizeof(char *));
		d->out->key_lens = ol_xrealloc(d->out->key_lens, d->cap * sizeof(size_t));
		d->out->vids = ol_xrealloc(d->out->vids, d->cap * sizeof(char *));
	}
	d->out->vids[d->out->n_keys] = NULL;
	if (d->vid[0]) {
		d->out->vids[d->out->n_keys] = ol_xmalloc(strlen(d->vid) + 1);
		memcpy(d->out->vids[d->out->n_keys], d->vid, strlen(d->vid) + 1);
		d->vid[0] = '\0';
	}
	d->out->keys[d->out->n_keys] = d->key;
	d->out->key_lens[d->out->n_keys++] = d->key_len;
	d->key = NULL;
	return 0;
}

static int
delete_end(struct xp *x, const char *t, size_t n)
{
	struct delete_ctx *d = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "Delete") == 0 ? 0 : -1;
	if (at(x, 2, "Delete", "Quiet", NULL)) {
		d->out->quiet = (n == 4 && strncasecmp(t, "true", 4) == 0);
		return 0;
	}
	if (at(x, 3, "Delete", "Object", "Key")) {
		if (n == 0 || n > OL_S3_MAX_KEY || memchr(t, 0, n) || d->key)
			return -1;
		d->key = ol_xmalloc(n + 1);
		memcpy(d->key, t, n);
		d->key[n] = '\0';
		d->key_len = n;
		return 0;
	}
	if (at(x, 3, "Delete", "Object", "VersionId")) {
		if (n > OL_S3_MAX_VID || memchr(t, 0, n))
			return -1;
		if (!(n == 0 || (n == 4 && memcmp(t, "null", 4) == 0)))
			d->out->has_version = true;
		memcpy(d->vid, t, n);
		d->vid[n] = '\0';
		return 0;
	}
	if (at(x, 2, "Delete", "Object", NULL))
		return delete_object_end(d);
	return 0;
}

int
ol_s3_parse_delete(const char *xml, size_t n, struct ol_s3_delete_req *out)
{
	struct delete_ctx d = {.out = out};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(out, 0, sizeof(*out));
	x->on_end = delete_end;
	x->arg = &d;
	int rc = xp_run(x, xml, n);
	free(x);
	free(d.key);
	if (rc == 0 && out->n_keys == 0)
		rc = -EBADMSG;
	if (rc < 0)
		ol_s3_delete_free(out);
	return rc;
}

void
ol_s3_delete_free(struct ol_s3_delete_req *d)
{
	for (unsigned i = 0; i < d->n_keys; i++) {
		free(d->keys[i]);
		if (d->vids)
			free(d->vids[i]);
	}
	free(d->vids);
	free(d->keys);
	free(d->key_lens);
	memset(d, 0, sizeof(*d));
}

/* ---- CreateBucketConfiguration ---- */

struct loc_ctx {
	char *loc;
	size_t cap;
};

static int
loc_end(struct xp *x, const char *t, size_t n)
{
	struct loc_ctx *l = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "CreateBucketConfiguration") == 0 ? 0 : -1;
	if (at(x, 2, "CreateBucketConfiguration", "LocationConstraint", NULL)) {
		if (n >= l->cap)
			return -1;
		memcpy(l->loc, t, n);
		l->loc[n] = '\0';
	}
	return 0;
}

int
ol_s3_parse_create_bucket(const char *xml, size_t n, char *loc, size_t cap)
{
	size_t i = 0;
	loc[0] = '\0';
	while (i < n && (xml[i] == ' ' || xml[i] == '\n' || xml[i] == '\r' || xml[i] == '\t'))
		i++;
	if (i == n)
		return 0;
	struct loc_ctx l = {loc, cap};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	x->on_end = loc_end;
	x->arg = &l;
	int rc = xp_run(x, xml, n);
	free(x);
	return rc;
}

/* ---- VersioningConfiguration ---- */

struct ver_ctx {
	int status; /* 0 none seen, 1 Enabled, 2 Suspended, -1 another value */
	int mfa;    /* MfaDelete: 0 absent/Disabled, 1 Enabled */
};

static int
ver_end(struct xp *x, const char *t, size_t n)
{
	struct ver_ctx *v = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "VersioningConfiguration") == 0 ? 0 : -1;
	if (at(x, 2, "VersioningConfiguration", "Status", NULL)) {
		if (n == 7 && memcmp(t, "Enabled", 7) == 0)
			v->status = 1;
		else if (n == 9 && memcmp(t, "Suspended", 9) == 0)
			v->status = 2;
		else
			v->status = -1;
	} else if (at(x, 2, "VersioningConfiguration", "MfaDelete", NULL)) {
		v->mfa = n == 7 && memcmp(t, "Enabled", 7) == 0;
	}
	return 0;
}

int
ol_s3_parse_versioning(const char *xml, size_t n, int *status)
{
	struct ver_ctx v = {0};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	x->on_end = ver_end;
	x->arg = &v;
	int rc = xp_run(x, xml, n);
	free(x);
	*status = v.status;
	if (rc == 0 && v.mfa)
		rc = -ENOTSUP;
	else if (rc == 0 && v.status <= 0)
		rc = -EINVAL;
	return rc;
}

/* ---- Tagging ---- */

struct tag_ctx {
	struct ol_s3_tags *t;
	char key[OL_S3_TAG_BYTES + 1], val[OL_S3_TAG_BYTES + 1];
	bool has_key;
};

static int
tag_end(struct xp *x, const char *t, size_t n)
{
	struct tag_ctx *c = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "Tagging") == 0 ? 0 : -1;
	if (at(x, 4, "Tagging", "TagSet", "Tag") && x->depth == 4) {
		const char *leaf = x->path[3];
		if (n > OL_S3_TAG_BYTES || memchr(t, 0, n))
			return -1;
		if (strcmp(leaf, "Key") == 0) {
			memcpy(c->key, t, n);
			c->key[n] = '\0';
			c->has_key = true;
		} else if (strcmp(leaf, "Value") == 0) {
			memcpy(c->val, t, n);
			c->val[n] = '\0';
		}
		return 0;
	}
	if (at(x, 3, "Tagging", "TagSet", "Tag")) {
		int rc = c->has_key
			     ? ol_s3_tags_add(c->t, c->key, strlen(c->key), c->val, strlen(c->val))
			     : -1;
		c->has_key = false;
		c->val[0] = '\0';
		return rc < 0 ? -1 : 0;
	}
	return 0;
}

int
ol_s3_parse_tagging(const char *xml, size_t n, struct ol_s3_tags *t)
{
	struct tag_ctx *c = ol_xcalloc(1, sizeof(*c));
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(t, 0, sizeof(*t));
	c->t = t;
	x->on_end = tag_end;
	x->arg = c;
	int rc = xp_run(x, xml, n);
	free(x);
	free(c);
	if (rc < 0)
		ol_s3_tags_free(t);
	return rc;
}

/* ---- AccessControlPolicy ---- */

struct acl_ctx {
	struct ol_acl *a;
	char type; /* grantee kind of the current <Grant>, 0 none yet */
	char id[OL_ACL_ID_MAX];
	unsigned perm;
	int err;
};

static int
acl_grantee(struct acl_ctx *c, const char *leaf, const char *t, size_t n)
{
	bool known = strcmp(leaf, "ID") == 0 || strcmp(leaf, "URI") == 0 ||
		     strcmp(leaf, "EmailAddress") == 0;
	if (!known)
		return 0; /* DisplayName and the like */
	if (c->type) {
		c->err = -EINVAL;
		return -1;
	}
	if (strcmp(leaf, "ID") == 0) {
		if (!ol_acl_id_ok(t, n)) {
			c->err = -EINVAL;
			return -1;
		}
		memcpy(c->id, t, n);
		c->id[n] = '\0';
		c->type = OL_ACL_USER;
	} else if (strcmp(leaf, "URI") == 0) {
		if (ol_acl_grantee_uri(t, n, &c->type) < 0) {
			c->err = -EINVAL;
			return -1;
		}
	} else if (strcmp(leaf, "EmailAddress") == 0) {
		c->err = -ENOTSUP;
		return -1;
	}
	return 0;
}

static int
acl_grant_end(struct acl_ctx *c)
{
	int rc;
	if (!c->type || !c->perm) {
		c->err = -EINVAL;
		return -1;
	}
	rc = ol_acl_add(c->a, c->type, c->id, c->perm);
	c->type = 0;
	c->perm = 0;
	c->id[0] = '\0';
	if (rc < 0)
		c->err = rc;
	return rc < 0 ? -1 : 0;
}

static int
acl_end(struct xp *x, const char *t, size_t n)
{
	struct acl_ctx *c = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "AccessControlPolicy") == 0 ? 0 : -1;
	if (at(x, 3, "AccessControlPolicy", "Owner", "ID")) {
		if (n && !ol_acl_id_ok(t, n))
			return -1;
		memcpy(c->a->owner, t, n);
		c->a->owner[n] = '\0';
		return 0;
	}
	if (at(x, 5, "AccessControlPolicy", "AccessControlList", "Grant") &&
	    strcmp(x->path[3], "Grantee") == 0)
		return acl_grantee(c, x->path[4], t, n);
	if (at(x, 4, "AccessControlPolicy", "AccessControlList", "Grant") &&
	    strcmp(x->path[3], "Permission") == 0) {
		while (n && (t[n - 1] == ' ' || t[n - 1] == '\n' || t[n - 1] == '\r'))
			n--;
		while (n && (*t == ' ' || *t == '\n' || *t == '\r'))
			t++, n--;
		c->perm = ol_acl_perm_parse(t, n);
		if (!c->perm)
			c->err = -EINVAL;
		return c->perm ? 0 : -1;
	}
	if (at(x, 3, "AccessControlPolicy", "AccessControlList", "Grant"))
		return acl_grant_end(c);
	return 0;
}

int
ol_acl_parse_xml(const char *xml, size_t n, struct ol_acl *a)
{
	struct acl_ctx c = {.a = a};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(a, 0, sizeof(*a));
	x->on_end = acl_end;
	x->arg = &c;
	int rc = xp_run(x, xml, n);
	free(x);
	if (rc < 0 && c.err)
		rc = c.err;
	return rc;
}

/* ---- CORSConfiguration ---- */

struct cors_ctx {
	struct ol_cors *c;
	struct ol_cors_rule cur;
	int err;
};

static int
list_add(char ***l, unsigned *n, const char *t, size_t len)
{
	if (*n >= OL_CORS_MAX_ITEMS || len == 0 || len > 1024 || memchr(t, 0, len))
		return -1;
	*l = ol_xrealloc(*l, (*n + 1) * sizeof(char *));
	(*l)[*n] = ol_xmalloc(len + 1);
	memcpy((*l)[*n], t, len);
	(*l)[*n][len] = '\0';
	(*n)++;
	return 0;
}

static void
rule_free(struct ol_cors_rule *r)
{
	char **ls[4] = {r->origins, r->methods, r->headers, r->expose};
	unsigned ns[4] = {r->n_origins, r->n_methods, r->n_headers, r->n_expose};
	for (int i = 0; i < 4; i++) {
		for (unsigned j = 0; j < ns[i]; j++)
			free(ls[i][j]);
		free(ls[i]);
	}
	memset(r, 0, sizeof(*r));
	r->max_age = -1;
}

void
ol_cors_free(struct ol_cors *c)
{
	for (unsigned i = 0; i < c->n; i++)
		rule_free(&c->rules[i]);
	free(c->rules);
	c->rules = NULL;
	c->n = 0;
}

static int
cors_rule_end(struct cors_ctx *x)
{
	static const char *const methods[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
	struct ol_cors_rule *r = &x->cur;
	if (!r->n_origins || !r->n_methods || x->c->n >= OL_CORS_MAX_RULES) {
		x->err = -EINVAL;
		return -1;
	}
	for (unsigned i = 0; i < r->n_methods; i++) {
		bool ok = false;
		for (size_t j = 0; j < 5; j++)
			ok |= strcmp(r->methods[i], methods[j]) == 0;
		if (!ok) {
			x->err = -EINVAL;
			return -1;
		}
	}
	x->c->rules = ol_xrealloc(x->c->rules, (x->c->n + 1) * sizeof(*x->c->rules));
	x->c->rules[x->c->n++] = *r;
	memset(r, 0, sizeof(*r));
	r->max_age = -1;
	return 0;
}

static int
cors_end(struct xp *x, const char *t, size_t n)
{
	struct cors_ctx *c = x->arg;
	struct ol_cors_rule *r = &c->cur;
	if (x->depth == 1)
		return strcmp(x->path[0], "CORSConfiguration") == 0 ? 0 : -1;
	if (at(x, 2, "CORSConfiguration", "CORSRule", NULL))
		return cors_rule_end(c);
	if (x->depth != 3 || strcmp(x->path[0], "CORSConfiguration") != 0 ||
	    strcmp(x->path[1], "CORSRule") != 0)
		return 0;
	const char *leaf = x->path[2];
	if (strcmp(leaf, "AllowedOrigin") == 0)
		return list_add(&r->origins, &r->n_origins, t, n);
	if (strcmp(leaf, "AllowedMethod") == 0)
		return list_add(&r->methods, &r->n_methods, t, n);
	if (strcmp(leaf, "AllowedHeader") == 0)
		return list_add(&r->headers, &r->n_headers, t, n);
	if (strcmp(leaf, "ExposeHeader") == 0)
		return list_add(&r->expose, &r->n_expose, t, n);
	if (strcmp(leaf, "MaxAgeSeconds") == 0) {
		unsigned v;
		if (parse_uint(t, 2147483647u, &v) < 0)
			return -1;
		r->max_age = (long)v;
	}
	return 0;
}

int
ol_cors_parse(const char *xml, size_t n, struct ol_cors *out)
{
	struct cors_ctx c = {.c = out};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(out, 0, sizeof(*out));
	c.cur.max_age = -1;
	x->on_end = cors_end;
	x->arg = &c;
	int rc = xp_run(x, xml, n);
	free(x);
	rule_free(&c.cur);
	if (rc < 0 && c.err)
		rc = c.err;
	if (rc == 0 && out->n == 0)
		rc = -EBADMSG;
	if (rc < 0)
		ol_cors_free(out);
	return rc;
}

/* ---- PublicAccessBlockConfiguration, OwnershipControls ---- */

static int
pab_end(struct xp *x, const char *t, size_t n)
{
	static const char *const names[] = {"BlockPublicAcls", "IgnorePublicAcls",
					    "BlockPublicPolicy", "RestrictPublicBuckets"};
	struct ol_pab *p = x->arg;
	bool *fields[] = {&p->block_public_acls, &p->ignore_public_acls, &p->block_public_policy,
			  &p->restrict_public_buckets};
	if (x->depth == 1)
		return strcmp(x->path[0], "PublicAccessBlockConfiguration") == 0 ? 0 : -1;
	if (x->depth != 2)
		return 0;
	for (int i = 0; i < 4; i++) {
		if (strcmp(x->path[1], names[i]) != 0)
			continue;
		if (n == 4 && strncasecmp(t, "true", 4) == 0)
			*fields[i] = true;
		else if (n == 5 && strncasecmp(t, "false", 5) == 0)
			*fields[i] = false;
		else
			return -1;
	}
	return 0;
}

int
ol_pab_parse(const char *xml, size_t n, struct ol_pab *out)
{
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	memset(out, 0, sizeof(*out));
	x->on_end = pab_end;
	x->arg = out;
	int rc = xp_run(x, xml, n);
	free(x);
	return rc;
}

void
ol_pab_encode(const struct ol_pab *p, char out[5])
{
	out[0] = p->block_public_acls ? '1' : '0';
	out[1] = p->ignore_public_acls ? '1' : '0';
	out[2] = p->block_public_policy ? '1' : '0';
	out[3] = p->restrict_public_buckets ? '1' : '0';
	out[4] = '\0';
}

void
ol_pab_decode(const char *s, size_t n, struct ol_pab *out)
{
	out->block_public_acls = n > 0 && s[0] == '1';
	out->ignore_public_acls = n > 1 && s[1] == '1';
	out->block_public_policy = n > 2 && s[2] == '1';
	out->restrict_public_buckets = n > 3 && s[3] == '1';
}

bool
ol_ownership_ok(const char *v)
{
	return strcmp(v, "BucketOwnerEnforced") == 0 || strcmp(v, "BucketOwnerPreferred") == 0 ||
	       strcmp(v, "ObjectWriter") == 0;
}

struct own_ctx {
	char *out;
	size_t cap;
	int n;
};

static int
own_end(struct xp *x, const char *t, size_t n)
{
	struct own_ctx *o = x->arg;
	if (x->depth == 1)
		return strcmp(x->path[0], "OwnershipControls") == 0 ? 0 : -1;
	if (!at(x, 3, "OwnershipControls", "Rule", "ObjectOwnership"))
		return 0;
	if (n >= o->cap || o->n++)
		return -1;
	memcpy(o->out, t, n);
	o->out[n] = '\0';
	return 0;
}

int
ol_ownership_parse(const char *xml, size_t n, char *out, size_t cap)
{
	struct own_ctx o = {out, cap, 0};
	struct xp *x = ol_xcalloc(1, sizeof(*x));
	out[0] = '\0';
	x->on_end = own_end;
	x->arg = &o;
	int rc = xp_run(x, xml, n);
	free(x);
	if (rc == 0 && !ol_ownership_ok(out))
		rc = o.n ? -EINVAL : -EBADMSG;
	return rc;
}
