#include "toml.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct tk {
	const char *p, *end;
	unsigned line;
	char *err;
	size_t errlen;
	/* scratch for decoded values */
	char scratch[OL_TOML_MAX_ITEMS * 2][OL_TOML_MAX_LEN];
	unsigned n_scratch;
};

static int
fail(struct tk *t, const char *msg)
{
	snprintf(t->err, t->errlen, "%s", msg);
	return -EBADMSG;
}

/* skip spaces, tabs, comments; if nl, also newlines */
static void
skip_ws(struct tk *t, int nl)
{
	while (t->p < t->end) {
		char c = *t->p;
		if (c == ' ' || c == '\t' || c == '\r') {
			t->p++;
		} else if (c == '#') {
			while (t->p < t->end && *t->p != '\n')
				t->p++;
		} else if (c == '\n' && nl) {
			t->line++;
			t->p++;
		} else {
			break;
		}
	}
}

static int
is_bare(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static int
parse_bare_key(struct tk *t, char *out, size_t cap)
{
	size_t n = 0;
	if (t->p < t->end && (*t->p == '"' || *t->p == '\''))
		return fail(t, "quoted keys are not supported");
	while (t->p < t->end && is_bare(*t->p)) {
		if (n + 1 >= cap)
			return fail(t, "key too long");
		out[n++] = *t->p++;
	}
	out[n] = 0;
	if (n == 0)
		return fail(t, "expected a key");
	return 0;
}

static char *
scratch(struct tk *t)
{
	if (t->n_scratch >= sizeof(t->scratch) / sizeof(t->scratch[0]))
		return NULL;
	return t->scratch[t->n_scratch++];
}

static int
put_utf8(char *o, size_t *n, uint32_t cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (char)(0xC0 | (cp >> 6));
		o[(*n)++] = (char)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		o[(*n)++] = (char)(0xE0 | (cp >> 12));
		o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[(*n)++] = (char)(0x80 | (cp & 0x3F));
	} else {
		return -1;
	}
	return 0;
}

static int
parse_string(struct tk *t, const char **out)
{
	char q = *t->p++;
	char *o = scratch(t);
	size_t n = 0;
	if (!o)
		return fail(t, "too many values");
	if (t->p + 1 < t->end && t->p[0] == q && t->p[1] == q)
		return fail(t, "multi-line strings are not supported");
	while (t->p < t->end && *t->p != q) {
		char c = *t->p++;
		if (c == '\n')
			return fail(t, "unterminated string");
		if (n + 4 >= OL_TOML_MAX_LEN)
			return fail(t, "string too long");
		if (c == '\\' && q == '"') {
			if (t->p >= t->end)
				return fail(t, "unterminated string");
			c = *t->p++;
			switch (c) {
			case 'n':
				o[n++] = '\n';
				break;
			case 't':
				o[n++] = '\t';
				break;
			case 'r':
				o[n++] = '\r';
				break;
			case '"':
				o[n++] = '"';
				break;
			case '\\':
				o[n++] = '\\';
				break;
			case 'u': {
				uint32_t cp = 0;
				for (int i = 0; i < 4; i++) {
					if (t->p >= t->end || !isxdigit((unsigned char)*t->p))
						return fail(t, "bad \\u escape");
					char h = *t->p++;
					cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h)
								      ? h - '0'
								      : (tolower(h) - 'a' + 10));
				}
				if (cp == 0 || put_utf8(o, &n, cp))
					return fail(t, "bad \\u escape");
				break;
			}
			default:
				return fail(t, "unknown escape in string");
			}
		} else {
			o[n++] = c;
		}
	}
	if (t->p >= t->end)
		return fail(t, "unterminated string");
	t->p++;
	o[n] = 0;
	*out = o;
	return 0;
}

static int
parse_scalar(struct tk *t, const char **out)
{
	char *o = scratch(t);
	size_t n = 0;
	if (!o)
		return fail(t, "too many values");
	while (t->p < t->end && (isalnum((unsigned char)*t->p) || strchr("+-._", *t->p))) {
		if (n + 1 >= OL_TOML_MAX_LEN)
			return fail(t, "value too long");
		o[n++] = *t->p++;
	}
	o[n] = 0;
	if (n == 0)
		return fail(t, "expected a value");
	*out = o;
	return 0;
}

static int parse_inline_tables(struct tk *t, const struct ol_toml_cbs *cbs, const char *table,
			       const char *key);

static int
parse_array(struct tk *t, struct ol_toml_value *v)
{
	int kind = -1;
	t->p++; /* '[' */
	v->n_items = 0;
	for (;;) {
		skip_ws(t, 1);
		if (t->p >= t->end)
			return fail(t, "unterminated array");
		if (*t->p == ']') {
			t->p++;
			break;
		}
		if (v->n_items >= OL_TOML_MAX_ITEMS)
			return fail(t, "array too long");
		int is_str = (*t->p == '"' || *t->p == '\'');
		if (*t->p == '[' || *t->p == '{')
			return fail(t, "nested arrays are not supported");
		int rc = is_str ? parse_string(t, &v->items[v->n_items])
				: parse_scalar(t, &v->items[v->n_items]);
		if (rc)
			return rc;
		if (kind >= 0 && kind != is_str)
			return fail(t, "array mixes strings and other values");
		kind = is_str;
		v->n_items++;
		skip_ws(t, 1);
		if (t->p < t->end && *t->p == ',')
			t->p++;
		else if (t->p < t->end && *t->p != ']')
			return fail(t, "expected ',' or ']' in array");
	}
	v->kind = kind == 0 ? OL_TOML_ARRAY_OTHER : OL_TOML_ARRAY_STRING;
	return 0;
}

static int
parse_value(struct tk *t, struct ol_toml_value *v)
{
	if (t->p >= t->end || *t->p == '\n')
		return fail(t, "missing value after '='");
	if (*t->p == '[')
		return parse_array(t, v);
	if (*t->p == '{')
		return fail(t, "inline tables are only supported inside arrays of tables");
	v->n_items = 1;
	if (*t->p == '"' || *t->p == '\'') {
		v->kind = OL_TOML_STRING;
		return parse_string(t, &v->items[0]);
	}
	v->kind = OL_TOML_SCALAR;
	return parse_scalar(t, &v->items[0]);
}

static int
end_of_line(struct tk *t)
{
	skip_ws(t, 0);
	if (t->p < t->end && *t->p != '\n')
		return fail(t, "unexpected text after value");
	return 0;
}

/* key = value pairs inside { }, separated by ',' */
static int
parse_one_inline(struct tk *t, const struct ol_toml_cbs *cbs, const char *table)
{
	char k[128];
	t->p++; /* '{' */
	for (;;) {
		skip_ws(t, 0);
		if (t->p < t->end && *t->p == '}') {
			t->p++;
			return 0;
		}
		int rc = parse_bare_key(t, k, sizeof(k));
		if (rc)
			return rc;
		skip_ws(t, 0);
		if (t->p >= t->end || *t->p != '=')
			return fail(t, "expected '=' after key");
		t->p++;
		skip_ws(t, 0);
		struct ol_toml_value v;
		t->n_scratch = 0;
		if ((rc = parse_value(t, &v)))
			return rc;
		if ((rc = cbs->on_value(cbs->arg, table, k, &v, t->line)))
			return rc;
		skip_ws(t, 0);
		if (t->p < t->end && *t->p == ',')
			t->p++;
		else if (t->p < t->end && *t->p != '}')
			return fail(t, "expected ',' or '}' in inline table");
	}
}

static int
parse_inline_tables(struct tk *t, const struct ol_toml_cbs *cbs, const char *table, const char *key)
{
	char full[256];
	snprintf(full, sizeof(full), "%s%s%s", table, *table ? "." : "", key);
	t->p++; /* '[' */
	for (;;) {
		skip_ws(t, 1);
		if (t->p >= t->end)
			return fail(t, "unterminated array");
		if (*t->p == ']') {
			t->p++;
			return 0;
		}
		if (*t->p != '{')
			return fail(t, "expected '{' in array of inline tables");
		int rc = cbs->on_table(cbs->arg, full, 1, t->line);
		if (rc)
			return rc;
		if ((rc = parse_one_inline(t, cbs, full)))
			return rc;
		skip_ws(t, 1);
		if (t->p < t->end && *t->p == ',')
			t->p++;
	}
}

static int
parse_header(struct tk *t, const struct ol_toml_cbs *cbs, char *table, size_t cap)
{
	int arr = 0;
	size_t n = 0;
	t->p++;
	if (t->p < t->end && *t->p == '[') {
		arr = 1;
		t->p++;
	}
	skip_ws(t, 0);
	while (t->p < t->end && (is_bare(*t->p) || *t->p == '.')) {
		if (n + 1 >= cap)
			return fail(t, "table name too long");
		table[n++] = *t->p++;
	}
	table[n] = 0;
	skip_ws(t, 0);
	if (n == 0 || t->p >= t->end || *t->p != ']')
		return fail(t, "malformed table header");
	t->p++;
	if (arr) {
		if (t->p >= t->end || *t->p != ']')
			return fail(t, "malformed [[table]] header");
		t->p++;
	}
	int rc = end_of_line(t);
	if (rc)
		return rc;
	return cbs->on_table(cbs->arg, table, arr, t->line);
}

int
ol_toml_parse(const char *buf, size_t len, const struct ol_toml_cbs *cbs, char *err, size_t errlen,
	      unsigned *line)
{
	static __thread struct tk t;
	char table[128] = "";
	int rc = 0;
	t.p = buf;
	t.end = buf + len;
	t.line = 1;
	t.err = err;
	t.errlen = errlen;
	for (;;) {
		skip_ws(&t, 1);
		if (t.p >= t.end)
			break;
		if (*t.p == '[') {
			rc = parse_header(&t, cbs, table, sizeof(table));
		} else {
			char key[128];
			rc = parse_bare_key(&t, key, sizeof(key));
			if (rc)
				break;
			skip_ws(&t, 0);
			if (t.p < t.end && *t.p == '.') {
				rc = fail(&t, "dotted keys are not supported; use a [table]");
				break;
			}
			if (t.p >= t.end || *t.p != '=') {
				rc = fail(&t, "expected '=' after key");
				break;
			}
			t.p++;
			skip_ws(&t, 0);
			const char *q = t.p;
			while (q < t.end && (*q == '[' || *q == ' ' || *q == '\t' || *q == '\n'))
				q++;
			if (t.p < t.end && *t.p == '[' && q < t.end && *q == '{') {
				rc = parse_inline_tables(&t, cbs, table, key);
			} else {
				struct ol_toml_value v;
				t.n_scratch = 0;
				rc = parse_value(&t, &v);
				if (!rc)
					rc = end_of_line(&t);
				if (!rc)
					rc = cbs->on_value(cbs->arg, table, key, &v, t.line);
			}
		}
		if (rc)
			break;
	}
	*line = t.line;
	return rc;
}
