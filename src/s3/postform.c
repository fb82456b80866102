/* s3/postform.c - multipart/form-data head and POST policy conditions. */
#include "s3/postform.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/log.h"

int
ol_form_boundary(const char *ct, char *out, size_t cap)
{
	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
		return -EINVAL;
	const char *b = strcasestr(ct, "boundary=");
	if (!b)
		return -EINVAL;
	b += 9;
	bool q = *b == '"';
	b += q;
	size_t n = strcspn(b, q ? "\"" : "; \t");
	if (n == 0 || n > 70 || n >= cap)
		return -EINVAL;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

void
ol_form_free(struct ol_form *f)
{
	for (unsigned i = 0; i < f->n; i++)
		free(f->f[i].value);
	f->n = 0;
}

const char *
ol_form_get(const struct ol_form *f, const char *name)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcasecmp(f->f[i].name, name) == 0)
			return f->f[i].value;
	return NULL;
}

/* A Content-Disposition parameter (name="x") into out; false when absent. */
static bool
disp_param(const char *h, size_t hl, const char *param, char *out, size_t cap)
{
	size_t pl = strlen(param);
	for (size_t i = 0; i + pl + 2 <= hl; i++) {
		if ((i && h[i - 1] != ' ' && h[i - 1] != ';') ||
		    strncasecmp(h + i, param, pl) != 0 || h[i + pl] != '=' || h[i + pl + 1] != '"')
			continue;
		const char *v = h + i + pl + 2;
		const char *e = memchr(v, '"', hl - (size_t)(v - h));
		if (!e || (size_t)(e - v) >= cap)
			return false;
		memcpy(out, v, (size_t)(e - v));
		out[e - v] = '\0';
		return true;
	}
	return false;
}

/* Part headers at p (up to the blank line): name, filename, content type. Returns the
 * offset past the blank line, 0 need more, -EBADMSG. */
static long
part_headers(const char *p, size_t len, char *name, size_t ncap, char *fname, size_t fcap,
	     bool *is_file, char *ctype, size_t ccap)
{
	const char *end = memmem(p, len, "\r\n\r\n", 4);
	if (!end)
		return len > 8192 ? -EBADMSG : 0;
	size_t hl = (size_t)(end - p) + 2;
	bool have_name = false;
	*is_file = false;
	ctype[0] = '\0';
	for (size_t i = 0; i < hl;) {
		const char *eol = memmem(p + i, hl - i, "\r\n", 2);
		size_t ll = (size_t)(eol - (p + i));
		const char *l = p + i;
		if (ll > 20 && strncasecmp(l, "content-disposition:", 20) == 0) {
			have_name = disp_param(l, ll, "name", name, ncap);
			*is_file = disp_param(l, ll, "filename", fname, fcap);
		} else if (ll > 13 && strncasecmp(l, "content-type:", 13) == 0) {
			const char *v = l + 13;
			while (*v == ' ')
				v++;
			size_t vl = ll - (size_t)(v - l);
			if (vl < ccap) {
				memcpy(ctype, v, vl);
				ctype[vl] = '\0';
			}
		}
		i += ll + 2;
	}
	return have_name ? (long)(hl + 2) : -EBADMSG;
}

long
ol_form_parse_head(const char *buf, size_t len, const char *boundary, struct ol_form *out)
{
	char delim[80], name[128], fname[256], ctype[128];
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	size_t pos;
	bool is_file;
	/* the body starts with "--boundary\r\n" (the leading CRLF of delim left out) */
	if (len < dl)
		return 0;
	if (memcmp(buf, delim + 2, dl - 2) != 0 || buf[dl - 2] != '\r' || buf[dl - 1] != '\n')
		return -EBADMSG;
	pos = dl;
	for (;;) {
		long h = part_headers(buf + pos, len - pos, name, sizeof(name), fname,
				      sizeof(fname), &is_file, ctype, sizeof(ctype));
		if (h <= 0)
			return h;
		pos += (size_t)h;
		if (is_file && strcasecmp(name, "file") == 0) {
			memcpy(out->filename, fname, sizeof(out->filename));
			memcpy(out->file_type, ctype, sizeof(out->file_type));
			return (long)pos;
		}
		const char *e = memmem(buf + pos, len - pos, delim, dl);
		if (!e)
			return len - pos > OL_FORM_MAX_HEAD ? -EBADMSG : 0;
		if (out->n >= OL_FORM_MAX_FIELDS)
			return -E2BIG;
		struct ol_form_field *f = &out->f[out->n++];
		size_t vl = (size_t)(e - (buf + pos));
		memcpy(f->name, name, sizeof(f->name));
		f->value = ol_xmalloc(vl + 1);
		memcpy(f->value, buf + pos, vl);
		f->value[vl] = '\0';
		f->len = vl;
		pos = (size_t)(e - buf) + dl;
		if (len - pos < 2)
			return 0;
		if (buf[pos] == '-' && buf[pos + 1] == '-')
			return -EBADMSG; /* the form ended without a file */
		if (buf[pos] != '\r' || buf[pos + 1] != '\n')
			return -EBADMSG;
		pos += 2;
	}
}

/* ---- POST policy ---- */

static int
deny(char *msg, size_t cap, const char *fmt, const char *a)
{
	if (cap)
		snprintf(msg, cap, fmt, a ? a : "");
	return -EACCES;
}

static int64_t
iso_time(const char *s)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, sec;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &sec) != 6)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	return (int64_t)timegm(&tm);
}

/* The value the policy sees for a field name ("bucket", "key" or a form field). */
static const char *
field_value(const struct ol_form *f, const char *name, const char *bucket, const char *key)
{
	if (strcasecmp(name, "bucket") == 0)
		return bucket;
	if (strcasecmp(name, "key") == 0)
		return key;
	return ol_form_get(f, name);
}

struct covered {
	bool c[OL_FORM_MAX_FIELDS];
};

static void
cover(const struct ol_form *f, const char *name, struct covered *cv)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcasecmp(f->f[i].name, name) == 0)
			cv->c[i] = true;
}

static int
cond_array(const json_t *c, const struct ol_form *f, const char *bucket, const char *key,
	   int64_t *min_len, int64_t *max_len, struct covered *cv, char *msg, size_t cap)
{
	const char *op = json_string_value(json_array_get(c, 0));
	const json_t *a = json_array_get(c, 1), *b = json_array_get(c, 2);
	if (!op || json_array_size(c) != 3)
		return -EINVAL;
	if (strcasecmp(op, "content-length-range") == 0) {
		if (!json_is_integer(a) || !json_is_integer(b))
			return -EINVAL;
		*min_len = json_integer_value(a);
		*max_len = json_integer_value(b);
		return 0;
	}
	const char *fld = json_string_value(a), *want = json_string_value(b);
	if (!fld || !want || fld[0] != '$')
		return -EINVAL;
	const char *have = field_value(f, fld + 1, bucket, key);
	cover(f, fld + 1, cv);
	bool ok;
	if (strcasecmp(op, "eq") == 0)
		ok = have && strcmp(have, want) == 0;
	else if (strcasecmp(op, "starts-with") == 0)
		ok = (have && strncmp(have, want, strlen(want)) == 0) || (!have && !want[0]);
	else
		return -EINVAL;
	return ok ? 0
		  : deny(msg, cap, "Invalid according to Policy: Policy Condition failed: %s", fld);
}

static int
cond_object(const json_t *c, const struct ol_form *f, const char *bucket, const char *key,
	    struct covered *cv, char *msg, size_t cap)
{
	const char *name;
	const json_t *v;
	if (json_object_size(c) != 1)
		return -EINVAL;
	json_object_foreach((json_t *)c, name, v)
	{
		const char *want = json_string_value(v);
		const char *have = field_value(f, name, bucket, key);
		if (!want)
			return -EINVAL;
		cover(f, name, cv);
		if (!have || strcmp(have, want) != 0)
			return deny(msg, cap,
				    "Invalid according to Policy: Policy Condition failed: "
				    "[\"eq\", \"$%s\"]",
				    name);
	}
	return 0;
}

static bool
exempt(const char *name)
{
	return strcasecmp(name, "policy") == 0 || strcasecmp(name, "x-amz-signature") == 0 ||
	       strcasecmp(name, "file") == 0 || strncasecmp(name, "x-ignore-", 9) == 0 ||
	       strcasecmp(name, "AWSAccessKeyId") == 0 || strcasecmp(name, "signature") == 0;
}

static int
conditions(const json_t *conds, const struct ol_form *f, const char *bucket, const char *key,
	   int64_t *min_len, int64_t *max_len, char *msg, size_t cap)
{
	struct covered cv = {{0}};
	size_t i;
	const json_t *c;
	int rc = 0;
	json_array_foreach(conds, i, c)
	{
		if (json_is_array(c))
			rc = cond_array(c, f, bucket, key, min_len, max_len, &cv, msg, cap);
		else if (json_is_object(c))
			rc = cond_object(c, f, bucket, key, &cv, msg, cap);
		else
			rc = -EINVAL;
		if (rc)
			return rc;
	}
	for (unsigned k = 0; k < f->n; k++)
		if (!cv.c[k] && !exempt(f->f[k].name))
			return deny(msg, cap, "Invalid according to Policy: Extra input fields: %s",
				    f->f[k].name);
	return 0;
}

int
ol_post_policy_check(const char *json, size_t n, const struct ol_form *f, const char *bucket,
		     const char *key, int64_t now, int64_t *min_len, int64_t *max_len, char *msg,
		     size_t cap)
{
	json_error_t je;
	int rc;
	*min_len = 0;
	*max_len = INT64_MAX;
	if (cap)
		msg[0] = '\0';
	json_t *root = json_loadb(json, n, 0, &je);
	const json_t *exp = json_object_get(root, "expiration");
	const json_t *conds = json_object_get(root, "conditions");
	if (!json_is_object(root) || !json_is_string(exp) || !json_is_array(conds)) {
		rc = -EINVAL;
		goto out;
	}
	int64_t t = iso_time(json_string_value(exp));
	if (t < 0) {
		rc = -EINVAL;
		goto out;
	}
	if (t <= now) {
		rc = deny(msg, cap, "Invalid according to Policy: Policy expired.%s", NULL);
		goto out;
	}
	rc = conditions(conds, f, bucket, key, min_len, max_len, msg, cap);
out:
	if (rc == -EINVAL && cap)
		snprintf(msg, cap, "Invalid Policy: Invalid JSON.");
	json_decref(root);
	return rc;
}
