/* s3/bpolicy.c - bucket policy documents: parse (jansson) and evaluate. */
#include "s3/bpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

#define MAX_LIST 256

enum cond_op {
	C_STR_EQ,
	C_STR_NE,
	C_STR_EQ_IC,
	C_STR_NE_IC,
	C_STR_LIKE,
	C_STR_NOT_LIKE,
	C_NUM_EQ,
	C_NUM_NE,
	C_NUM_LT,
	C_NUM_LE,
	C_NUM_GT,
	C_NUM_GE,
	C_BOOL,
	C_IP,
	C_NOT_IP,
	C_NULL,
};

static const struct {
	const char *name;
	enum cond_op op;
} cond_ops[] = {
    {"StringEquals", C_STR_EQ},
    {"StringNotEquals", C_STR_NE},
    {"StringEqualsIgnoreCase", C_STR_EQ_IC},
    {"StringNotEqualsIgnoreCase", C_STR_NE_IC},
    {"StringLike", C_STR_LIKE},
    {"StringNotLike", C_STR_NOT_LIKE},
    {"ArnEquals", C_STR_LIKE},
    {"ArnLike", C_STR_LIKE},
    {"ArnNotEquals", C_STR_NOT_LIKE},
    {"ArnNotLike", C_STR_NOT_LIKE},
    {"NumericEquals", C_NUM_EQ},
    {"NumericNotEquals", C_NUM_NE},
    {"NumericLessThan", C_NUM_LT},
    {"NumericLessThanEquals", C_NUM_LE},
    {"NumericGreaterThan", C_NUM_GT},
    {"NumericGreaterThanEquals", C_NUM_GE},
    {"Bool", C_BOOL},
    {"IpAddress", C_IP},
    {"NotIpAddress", C_NOT_IP},
    {"Null", C_NULL},
};

struct strs {
	char **v;
	unsigned n;
};

struct cond {
	enum cond_op op;
	bool if_exists;
	char *key; /* lowercase */
	struct strs vals;
};

struct stmt {
	bool deny;
	bool not_principal, any_principal;
	struct strs principals; /* user names */
	bool not_action;
	struct strs actions;
	bool not_resource;
	struct strs resources;
	struct cond *conds;
	unsigned n_conds;
};

struct ol_policy {
	struct stmt *st;
	unsigned n;
};

/* ---- glob ---- */

static inline int
fold(int c, bool nocase)
{
	return nocase && c >= 'A' && c <= 'Z' ? c + 32 : c;
}

bool
ol_policy_glob(const char *p, const char *s, bool nocase)
{
	const char *star = NULL, *mark = NULL;
	if (!strpbrk(p, "*?"))
		return nocase ? strcasecmp(p, s) == 0 : strcmp(p, s) == 0;
	while (*s) {
		if (*p == '*') {
			star = p++;
			mark = s;
		} else if (*p && (*p == '?' || fold((unsigned char)*p, nocase) ==
						   fold((unsigned char)*s, nocase))) {
			p++;
			s++;
		} else if (star) {
			p = star + 1;
			s = ++mark;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* ---- parse ---- */

struct perr {
	char *msg;
	size_t cap;
};

static int
fail(struct perr *e, const char *fmt, const char *arg)
{
	if (e->cap)
		snprintf(e->msg, e->cap, fmt, arg ? arg : "");
	return -EINVAL;
}

static void
strs_free(struct strs *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static void
strs_add(struct strs *s, const char *v)
{
	s->v = ol_xrealloc(s->v, (s->n + 1) * sizeof(char *));
	s->v[s->n++] = ol_xstrdup(v);
}

/* A JSON value that is a string, number or bool, as text (condition values). */
static int
scalar_text(const json_t *j, char *buf, size_t cap)
{
	if (json_is_string(j))
		return snprintf(buf, cap, "%s", json_string_value(j)) < (int)cap ? 0 : -1;
	if (json_is_integer(j))
		return snprintf(buf, cap, "%lld", (long long)json_integer_value(j)) < (int)cap ? 0
											       : -1;
	if (json_is_real(j))
		return snprintf(buf, cap, "%.17g", json_real_value(j)) < (int)cap ? 0 : -1;
	if (json_is_boolean(j))
		return snprintf(buf, cap, "%s", json_is_true(j) ? "true" : "false") < (int)cap ? 0
											       : -1;
	return -1;
}

/* A string or a non-empty array of scalars into out. */
static int
str_list(const json_t *j, struct strs *out, bool strings_only)
{
	char buf[1024];
	if (json_is_array(j)) {
		size_t i;
		const json_t *v;
		if (json_array_size(j) == 0 || json_array_size(j) > MAX_LIST)
			return -1;
		json_array_foreach(j, i, v)
		{
			if ((strings_only && !json_is_string(v)) ||
			    scalar_text(v, buf, sizeof(buf)) < 0)
				return -1;
			strs_add(out, buf);
		}
		return 0;
	}
	if ((strings_only && !json_is_string(j)) || scalar_text(j, buf, sizeof(buf)) < 0)
		return -1;
	strs_add(out, buf);
	return 0;
}

/* "*", "alice", "arn:aws:iam::<acct>:user/alice" -> "*" / "alice"; NULL when not a user. */
static const char *
principal_user(const char *s)
{
	const char *u = strstr(s, ":user/");
	if (strncmp(s, "arn:aws:iam::", 13) == 0) {
		if (!u || !u[6])
			return NULL;
		return u + 6;
	}
	if (!s[0] || strchr(s, ':') || strchr(s, '/'))
		return NULL;
	return s;
}

static int
parse_principal(struct stmt *st, const json_t *j, struct perr *e)
{
	struct strs raw = {0};
	int rc = 0;
	if (json_is_string(j) && strcmp(json_string_value(j), "*") == 0) {
		st->any_principal = true;
		return 0;
	}
	if (!json_is_object(j))
		return fail(e, "Invalid principal in policy", NULL);
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)j, k, v)
	{
		if (strcmp(k, "AWS") != 0 && strcmp(k, "CanonicalUser") != 0) {
			rc = fail(e, "Invalid principal in policy", NULL);
			break;
		}
		if (str_list(v, &raw, true) < 0) {
			rc = fail(e, "Invalid principal in policy", NULL);
			break;
		}
	}
	for (unsigned i = 0; rc == 0 && i < raw.n; i++) {
		const char *u = principal_user(raw.v[i]);
		if (!u) {
			rc = fail(e, "Invalid principal in policy", NULL);
		} else if (strcmp(u, "*") == 0) {
			st->any_principal = true;
		} else {
			strs_add(&st->principals, u);
		}
	}
	strs_free(&raw);
	if (rc == 0 && !st->any_principal && st->principals.n == 0)
		rc = fail(e, "Invalid principal in policy", NULL);
	return rc;
}

static int
parse_actions(struct stmt *st, const json_t *j, struct perr *e)
{
	if (str_list(j, &st->actions, true) < 0)
		return fail(e, "Policy has an invalid action", NULL);
	for (unsigned i = 0; i < st->actions.n; i++) {
		const char *a = st->actions.v[i];
		if (strcmp(a, "*") != 0 && strncasecmp(a, "s3:", 3) != 0)
			return fail(e, "Policy has invalid action: %s", a);
	}
	return 0;
}

static int
parse_resources(struct stmt *st, const json_t *j, const char *bucket, struct perr *e)
{
	if (str_list(j, &st->resources, true) < 0)
		return fail(e, "Policy has invalid resource", NULL);
	for (unsigned i = 0; i < st->resources.n; i++) {
		const char *r = st->resources.v[i];
		if (strcmp(r, "*") == 0)
			continue;
		if (strncmp(r, "arn:aws:s3:::", 13) != 0)
			return fail(e, "Policy has invalid resource", NULL);
		const char *b = r + 13;
		/* the resource must lie in this bucket (its bucket part may be a pattern) */
		const char *slash = strchr(b, '/');
		size_t pl = slash ? (size_t)(slash - b) : strlen(b);
		char part[256];
		bool in = pl < sizeof(part);
		if (in) {
			memcpy(part, b, pl);
			part[pl] = '\0';
			in = ol_policy_glob(part, bucket, false) ||
			     (slash == NULL && pl && part[pl - 1] == '*' &&
			      strncmp(part, bucket, pl - 1) == 0);
		}
		if (!in)
			return fail(e, "Policy has invalid resource", NULL);
	}
	return 0;
}

static int
parse_cond_op(const char *name, struct cond *c)
{
	char base[64];
	size_t n = strlen(name);
	const char *colon = strchr(name, ':');
	if (colon &&
	    (strncmp(name, "ForAnyValue:", 12) == 0 || strncmp(name, "ForAllValues:", 13) == 0)) {
		name = colon + 1;
		n = strlen(name);
	}
	c->if_exists = n > 8 && strcmp(name + n - 8, "IfExists") == 0;
	if (c->if_exists)
		n -= 8;
	if (n >= sizeof(base))
		return -1;
	memcpy(base, name, n);
	base[n] = '\0';
	for (size_t i = 0; i < sizeof(cond_ops) / sizeof(cond_ops[0]); i++) {
		if (strcmp(cond_ops[i].name, base) == 0) {
			c->op = cond_ops[i].op;
			return 0;
		}
	}
	return -1;
}

static int
parse_conditions(struct stmt *st, const json_t *j, struct perr *e)
{
	const char *opname, *key;
	const json_t *block, *v;
	if (!json_is_object(j))
		return fail(e, "Policy has an invalid condition", NULL);
	json_object_foreach((json_t *)j, opname, block)
	{
		struct cond tmpl = {0};
		if (parse_cond_op(opname, &tmpl) < 0)
			return fail(e, "Invalid Condition type : %s", opname);
		if (!json_is_object(block) || json_object_size(block) == 0)
			return fail(e, "Policy has an invalid condition", NULL);
		json_object_foreach((json_t *)block, key, v)
		{
			if (st->n_conds >= MAX_LIST)
				return fail(e, "Policy has an invalid condition", NULL);
			st->conds = ol_xrealloc(st->conds, (st->n_conds + 1) * sizeof(*st->conds));
			struct cond *c = &st->conds[st->n_conds++];
			*c = tmpl;
			c->key = ol_xstrdup(key);
			for (char *p = c->key; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			if (!strchr(c->key, ':'))
				return fail(e, "Policy has an invalid condition key", NULL);
			if (str_list(v, &c->vals, false) < 0)
				return fail(e, "Policy has an invalid condition", NULL);
		}
	}
	return 0;
}

static int
parse_effect(struct stmt *st, const json_t *j, struct perr *e)
{
	const char *v = json_is_string(j) ? json_string_value(j) : NULL;
	if (v && strcmp(v, "Allow") == 0)
		st->deny = false;
	else if (v && strcmp(v, "Deny") == 0)
		st->deny = true;
	else
		return fail(e, "Invalid effect: %s", v ? v : "(not a string)");
	return 0;
}

static int
parse_stmt(struct stmt *st, const json_t *j, const char *bucket, struct perr *e)
{
	const json_t *p = json_object_get(j, "Principal"), *np = json_object_get(j, "NotPrincipal");
	const json_t *a = json_object_get(j, "Action"), *na = json_object_get(j, "NotAction");
	const json_t *r = json_object_get(j, "Resource"), *nr = json_object_get(j, "NotResource");
	const json_t *c = json_object_get(j, "Condition");
	const char *k;
	const json_t *v;
	if (!json_is_object(j))
		return fail(e, "Policy statement must be an object", NULL);
	json_object_foreach((json_t *)j, k, v)
	{
		static const char *const known[] = {"Sid",	    "Effect",	   "Principal",
						    "NotPrincipal", "Action",	   "NotAction",
						    "Resource",	    "NotResource", "Condition"};
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= strcmp(k, known[i]) == 0;
		if (!ok)
			return fail(e, "Unknown field %s", k);
	}
	int rc = parse_effect(st, json_object_get(j, "Effect"), e);
	if (rc)
		return rc;
	if (!p == !np)
		return fail(e, "Missing required field Principal", NULL);
	st->not_principal = np != NULL;
	if ((rc = parse_principal(st, p ? p : np, e)))
		return rc;
	if (!a == !na)
		return fail(e, "Missing required field Action", NULL);
	st->not_action = na != NULL;
	if ((rc = parse_actions(st, a ? a : na, e)))
		return rc;
	if (!r == !nr)
		return fail(e, "Missing required field Resource", NULL);
	st->not_resource = nr != NULL;
	if ((rc = parse_resources(st, r ? r : nr, bucket, e)))
		return rc;
	return c ? parse_conditions(st, c, e) : 0;
}

static int
parse_doc(struct ol_policy *pol, const json_t *root, const char *bucket, struct perr *e)
{
	const json_t *ver = json_object_get(root, "Version");
	const json_t *sts = json_object_get(root, "Statement");
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)root, k, v)
	{
		if (strcmp(k, "Version") != 0 && strcmp(k, "Statement") != 0 &&
		    strcmp(k, "Id") != 0)
			return fail(e, "Unknown field %s", k);
	}
	if (ver && !(json_is_string(ver) && (strcmp(json_string_value(ver), "2012-10-17") == 0 ||
					     strcmp(json_string_value(ver), "2008-10-17") == 0)))
		return fail(e, "The policy must contain a valid version string", NULL);
	if (!sts)
		return fail(e, "Missing required field Statement", NULL);
	size_t n = json_is_array(sts) ? json_array_size(sts) : 1;
	if (n == 0 || n > MAX_LIST)
		return fail(e, "Missing required field Statement", NULL);
	pol->st = ol_xcalloc(n, sizeof(*pol->st));
	for (size_t i = 0; i < n; i++) {
		int rc = parse_stmt(&pol->st[i], json_is_array(sts) ? json_array_get(sts, i) : sts,
				    bucket, e);
		pol->n = (unsigned)i + 1;
		if (rc)
			return rc;
	}
	return 0;
}

void
ol_policy_free(struct ol_policy *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n; i++) {
		struct stmt *s = &p->st[i];
		strs_free(&s->principals);
		strs_free(&s->actions);
		strs_free(&s->resources);
		for (unsigned j = 0; j < s->n_conds; j++) {
			free(s->conds[j].key);
			strs_free(&s->conds[j].vals);
		}
		free(s->conds);
	}
	free(p->st);
	free(p);
}

int
ol_policy_parse(const char *json, size_t n, const char *bucket, struct ol_policy **out, char *msg,
		size_t cap)
{
	struct perr e = {msg, cap};
	json_error_t je;
	size_t i = 0;
	*out = NULL;
	if (cap)
		msg[0] = '\0';
	while (i < n && isspace((unsigned char)json[i]))
		i++;
	if (n > OL_POLICY_MAX_BYTES)
		return fail(&e, "Policy exceeds the maximum allowed document size.", NULL);
	if (i == n || json[i] != '{')
		return fail(&e, "Policies must be valid JSON and the first byte must be '{'", NULL);
	json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &je);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return fail(&e, "Policies must be valid JSON and the first byte must be '{'", NULL);
	}
	struct ol_policy *pol = ol_xcalloc(1, sizeof(*pol));
	int rc = parse_doc(pol, root, bucket, &e);
	json_decref(root);
	if (rc) {
		ol_policy_free(pol);
		return rc;
	}
	*out = pol;
	return 0;
}

int
ol_policy_each_principal(const struct ol_policy *p, int (*cb)(const char *user, void *arg),
			 void *arg)
{
	for (unsigned i = 0; i < p->n; i++)
		for (unsigned j = 0; j < p->st[i].principals.n; j++) {
			int rc = cb(p->st[i].principals.v[j], arg);
			if (rc)
				return rc;
		}
	return 0;
}

/* ---- evaluation ---- */

static bool
in_list(const struct strs *l, const char *s, bool nocase, bool glob)
{
	for (unsigned i = 0; i < l->n; i++) {
		if (glob ? ol_policy_glob(l->v[i], s, nocase)
			 : (nocase ? strcasecmp(l->v[i], s) == 0 : strcmp(l->v[i], s) == 0))
			return true;
	}
	return false;
}

static bool
principal_match(const struct stmt *st, const char *user)
{
	bool in = st->any_principal || (user && in_list(&st->principals, user, false, false));
	return st->not_principal ? !in : in;
}

static int
parse_ip(const char *s, uint8_t out[16], int *fam)
{
	char buf[64];
	size_t n = strlen(s);
	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	if (inet_pton(AF_INET, buf, out) == 1) {
		*fam = 4;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, out) == 1) {
		*fam = 6;
		return 0;
	}
	return -1;
}

/* Is ip (text) inside cidr ("10.0.0.0/8", "::1/128", or a bare address)? */
static bool
ip_in(const char *ip, const char *cidr)
{
	uint8_t a[16], net[16];
	int fa, fn;
	char buf[64];
	const char *slash = strchr(cidr, '/');
	size_t hl = slash ? (size_t)(slash - cidr) : strlen(cidr);
	if (hl >= sizeof(buf) || parse_ip(ip, a, &fa) < 0)
		return false;
	memcpy(buf, cidr, hl);
	buf[hl] = '\0';
	if (parse_ip(buf, net, &fn) < 0 || fa != fn)
		return false;
	unsigned max = fa == 4 ? 32 : 128, bits = max;
	if (slash) {
		char *end;
		unsigned long b = strtoul(slash + 1, &end, 10);
		if (end == slash + 1 || *end || b > max)
			return false;
		bits = (unsigned)b;
	}
	for (unsigned i = 0; i < bits; i++) {
		uint8_t m = (uint8_t)(0x80u >> (i % 8));
		if ((a[i / 8] & m) != (net[i / 8] & m))
			return false;
	}
	return true;
}

static bool
num(const char *s, double *out)
{
	char *end;
	if (!s[0])
		return false;
	*out = strtod(s, &end);
	return *end == '\0';
}

/* The positive form of op holds for value v against one policy value pv. */
static bool
one_match(enum cond_op op, const char *v, const char *pv)
{
	double a, b;
	switch (op) {
	case C_STR_EQ:
	case C_STR_NE:
		return strcmp(v, pv) == 0;
	case C_STR_EQ_IC:
	case C_STR_NE_IC:
		return strcasecmp(v, pv) == 0;
	case C_STR_LIKE:
	case C_STR_NOT_LIKE:
		return ol_policy_glob(pv, v, false);
	case C_BOOL:
		return strcasecmp(v, pv) == 0;
	case C_IP:
	case C_NOT_IP:
		return ip_in(v, pv);
	default:
		break;
	}
	if (!num(v, &a) || !num(pv, &b))
		return op == C_NUM_NE;
	switch (op) {
	case C_NUM_EQ:
		return a == b;
	case C_NUM_NE:
		return a == b;
	case C_NUM_LT:
		return a < b;
	case C_NUM_LE:
		return a <= b;
	case C_NUM_GT:
		return a > b;
	case C_NUM_GE:
		return a >= b;
	default:
		return false;
	}
}

static bool
negated(enum cond_op op)
{
	return op == C_STR_NE || op == C_STR_NE_IC || op == C_STR_NOT_LIKE || op == C_NUM_NE ||
	       op == C_NOT_IP;
}

static bool
cond_holds(const struct cond *c, const struct ol_policy_req *r)
{
	const char *v = r->key ? r->key(c->key, r->arg) : NULL;
	if (c->op == C_NULL) {
		bool want_absent = c->vals.n && strcasecmp(c->vals.v[0], "true") == 0;
		return want_absent == (v == NULL);
	}
	if (!v)
		return c->if_exists || negated(c->op);
	bool any = false;
	for (unsigned i = 0; i < c->vals.n && !any; i++)
		any = one_match(c->op, v, c->vals.v[i]);
	return negated(c->op) ? !any : any;
}

static bool
stmt_applies(const struct stmt *st, const struct ol_policy_req *r)
{
	if (!principal_match(st, r->user))
		return false;
	bool a = in_list(&st->actions, r->action, true, true);
	if (a == st->not_action)
		return false;
	bool res = in_list(&st->resources, r->resource, false, true);
	if (res == st->not_resource)
		return false;
	for (unsigned i = 0; i < st->n_conds; i++)
		if (!cond_holds(&st->conds[i], r))
			return false;
	return true;
}

int
ol_policy_eval(const struct ol_policy *p, const struct ol_policy_req *r)
{
	int verdict = 0;
	for (unsigned i = 0; p && i < p->n; i++) {
		if (!stmt_applies(&p->st[i], r))
			continue;
		if (p->st[i].deny)
			return -1;
		verdict = 1;
	}
	return verdict;
}

bool
ol_policy_uses_key(const struct ol_policy *p, const char *prefix)
{
	size_t n = strlen(prefix);
	for (unsigned i = 0; p && i < p->n; i++)
		for (unsigned j = 0; j < p->st[i].n_conds; j++)
			if (strncmp(p->st[i].conds[j].key, prefix, n) == 0)
				return true;
	return false;
}

bool
ol_policy_is_public(const struct ol_policy *p)
{
	static const char *const narrowing[] = {
	    "aws:sourceip",	  "aws:sourcevpc",  "aws:sourcevpce", "aws:sourceaccount",
	    "aws:principalorgid", "aws:userid",	    "aws:username",   "aws:principalaccount",
	    "aws:sourcearn",	  "aws:sourceowner"};
	for (unsigned i = 0; i < p->n; i++) {
		const struct stmt *st = &p->st[i];
		bool narrowed = false;
		if (st->deny || !st->any_principal || st->not_principal)
			continue;
		for (unsigned j = 0; j < st->n_conds && !narrowed; j++)
			for (size_t k = 0; k < sizeof(narrowing) / sizeof(narrowing[0]); k++)
				narrowed |= strcmp(st->conds[j].key, narrowing[k]) == 0;
		if (!narrowed)
			return true;
	}
	return false;
}
