/* s3/cors.c - which CORS rule of a bucket allows a request. */
#include "s3/cors.h"

#include <string.h>

#include "s3/bpolicy.h"

static bool
any_glob(char *const *l, unsigned n, const char *s, bool nocase)
{
	for (unsigned i = 0; i < n; i++)
		if (ol_policy_glob(l[i], s, nocase))
			return true;
	return false;
}

/* Every header of the comma-separated list is allowed by the rule. */
static bool
headers_ok(const struct ol_cors_rule *r, const char *list)
{
	char h[256];
	const char *s = list;
	while (s && *s) {
		const char *c = strchr(s, ',');
		const char *e = c ? c : s + strlen(s);
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		size_t n = (size_t)(e - s);
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n >= sizeof(h))
			return false;
		memcpy(h, s, n);
		h[n] = '\0';
		if (n && !any_glob(r->headers, r->n_headers, h, true))
			return false;
		s = c ? c + 1 : NULL;
	}
	return true;
}

const struct ol_cors_rule *
ol_cors_match(const struct ol_cors *c, const char *origin, const char *method,
	      const char *req_headers)
{
	for (unsigned i = 0; i < c->n; i++) {
		const struct ol_cors_rule *r = &c->rules[i];
		bool m = false;
		for (unsigned j = 0; j < r->n_methods && !m; j++)
			m = strcmp(r->methods[j], method) == 0;
		if (m && any_glob(r->origins, r->n_origins, origin, false) &&
		    headers_ok(r, req_headers))
			return r;
	}
	return NULL;
}
