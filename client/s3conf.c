/* client/s3conf.c - where the S3 client's endpoint, region and keys come from: arguments, the
 * AWS environment variables, the shared config and credentials files (pure INI reader). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "s3int.h"

#define OL_API	     __attribute__((visibility("default")))
#define INI_MAX_FILE (1u << 20) /* a config file larger than 1 MiB is refused */

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* [p, e) trimmed of blanks on both ends */
static void
trim(const char **p, const char **e)
{
	while (*p < *e && is_blank(**p))
		(*p)++;
	while (*e > *p && is_blank((*e)[-1]))
		(*e)--;
}

static int
span_eq(const char *p, const char *e, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(e - p) == n && memcmp(p, s, n) == 0;
}

/* One line [p, e): 1 = section header (name in *np..*ne), 2 = key/value, 0 = blank/comment or
 * continuation (an indented line after a key, as Python's configparser reads it: the AWS
 * tools' nested "s3 =" settings), -EINVAL = malformed. *after_key: a key came before in this
 * section (in/out). */
static int
ini_line(const char *p, const char *e, const char **np, const char **ne, const char **vp,
	 const char **ve, int *after_key)
{
	int indented = p < e && is_blank(*p);
	trim(&p, &e);
	if (p == e || *p == '#' || *p == ';' || (indented && *after_key))
		return 0;
	*after_key = *p != '[';
	if (*p == '[') {
		const char *c = memchr(p, ']', (size_t)(e - p));
		if (!c)
			return -EINVAL;
		*np = p + 1;
		*ne = c;
		trim(np, ne);
		return 1;
	}
	const char *eq = memchr(p, '=', (size_t)(e - p));
	if (!eq || eq == p)
		return -EINVAL;
	*np = p;
	*ne = eq;
	*vp = eq + 1;
	*ve = e;
	trim(np, ne);
	trim(vp, ve);
	return 2;
}

OL_API int
ol_s3_ini_get(const char *buf, size_t len, const char *section, const char *key, char *out,
	      size_t cap)
{
	const char *p = buf, *end = buf + len;
	int in = 0, found = -ENOENT, after_key = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end, *np, *ne, *vp, *ve;
		int t = ini_line(p, e, &np, &ne, &vp, &ve, &after_key);
		p = nl ? nl + 1 : end;
		if (t == 1) {
			in = span_eq(np, ne, section);
		} else if (t < 0 && in) {
			return -EINVAL;
		} else if (t == 2 && in && span_eq(np, ne, key)) {
			size_t n = (size_t)(ve - vp);
			if (memchr(vp, 0, n))
				return -EINVAL; /* a NUL byte: not a text value */
			if (n >= cap)
				return -ENAMETOOLONG;
			memcpy(out, vp, n);
			out[n] = 0;
			found = (int)n; /* the last one wins, as in Python's configparser */
		}
	}
	return found;
}

/* The whole file into a malloc'd buffer (caller frees). 0, -ENOENT, -EFBIG, -errno. */
static int
read_small_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	int rc = 0;
	*buf = NULL;
	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (st.st_size > INI_MAX_FILE) {
		rc = -EFBIG;
		goto out;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		rc = -ENOMEM;
		goto out;
	}
	*len = fread(*buf, 1, (size_t)st.st_size, f);
	if (ferror(f)) {
		rc = -EIO;
		free(*buf);
		*buf = NULL;
	}
out:
	fclose(f);
	return rc;
}

struct ini_file {
	char path[1024];
	char *buf; /* NULL: absent or unreadable */
	size_t len;
};

static int
ini_open(struct ini_file *f, const char *env, const char *home_rel)
{
	const char *v = getenv(env), *home = getenv("HOME");
	int rc;
	f->buf = NULL;
	if (v && *v)
		snprintf(f->path, sizeof(f->path), "%s", v);
	else
		snprintf(f->path, sizeof(f->path), "%s/%s", home ? home : "", home_rel);
	rc = read_small_file(f->path, &f->buf, &f->len);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;
	if (rc)
		ol_s3_set_error("cannot read %s: %s (fix the file or point %s elsewhere)", f->path,
				strerror(-rc), env);
	return rc ? OL_S3_ECONFIG : 0;
}

/* key of the profile: credentials file "[name]", then config file "[profile name]" (or
 * "[default]"). 1 found, 0 absent, OL_S3_ECONFIG malformed */
static int
profile_get(struct ini_file *cred, struct ini_file *conf, const char *profile, const char *key,
	    char *out, size_t cap, int cred_first)
{
	char sect[300];
	struct ini_file *order[2] = {cred_first ? cred : conf, cred_first ? conf : cred};
	for (int i = 0; i < 2; i++) {
		struct ini_file *f = order[i];
		int rc;
		if (!f->buf)
			continue;
		if (f == conf && strcmp(profile, "default") != 0)
			snprintf(sect, sizeof(sect), "profile %s", profile);
		else
			snprintf(sect, sizeof(sect), "%s", profile);
		rc = ol_s3_ini_get(f->buf, f->len, sect, key, out, cap);
		if (rc >= 0)
			return 1;
		if (rc != -ENOENT) {
			ol_s3_set_error("%s: section [%s]: %s", f->path, sect,
					rc == -EINVAL ? "a line is neither 'key = value' nor a "
							"[section] (fix the file)"
						      : "value too long");
			return OL_S3_ECONFIG;
		}
	}
	return 0;
}

static int
profile_exists(struct ini_file *f, const char *sect)
{
	/* a section header line equal to sect */
	const char *p = f->buf, *end = f->buf ? f->buf + f->len : NULL;
	int after_key = 0;
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end, *np, *ne, *vp, *ve;
		if (ini_line(p, e, &np, &ne, &vp, &ve, &after_key) == 1 && span_eq(np, ne, sect))
			return 1;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static const char *
env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int
set(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap) {
		ol_s3_set_error("configuration value too long: '%.40s...'", v);
		return OL_S3_ECONFIG;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int
resolve_keys(struct ol_s3_conf *c, const struct ol_s3_opts *o, struct ini_file *cred,
	     struct ini_file *conf)
{
	int rc, a, b;
	if (o->access_key || o->secret_key) {
		if (!o->access_key || !o->secret_key) {
			ol_s3_set_error("give both access_key and secret_key, or neither");
			return -EINVAL;
		}
		rc = set(c->access_key, sizeof(c->access_key), o->access_key);
		rc = rc ? rc : set(c->secret_key, sizeof(c->secret_key), o->secret_key);
		if (!rc && o->session_token)
			rc = set(c->token, sizeof(c->token), o->session_token);
		return rc;
	}
	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		rc = set(c->access_key, sizeof(c->access_key), env("AWS_ACCESS_KEY_ID"));
		rc = rc ? rc
			: set(c->secret_key, sizeof(c->secret_key), env("AWS_SECRET_ACCESS_KEY"));
		if (!rc && env("AWS_SESSION_TOKEN"))
			rc = set(c->token, sizeof(c->token), env("AWS_SESSION_TOKEN"));
		return rc;
	}
	a = profile_get(cred, conf, c->profile, "aws_access_key_id", c->access_key,
			sizeof(c->access_key), 1);
	b = profile_get(cred, conf, c->profile, "aws_secret_access_key", c->secret_key,
			sizeof(c->secret_key), 1);
	if (a < 0 || b < 0)
		return OL_S3_ECONFIG;
	if (!a || !b) {
		ol_s3_set_error(
		    "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
		    "or aws_access_key_id/aws_secret_access_key in profile '%s' of %s",
		    c->profile, cred->path);
		return OL_S3_ECONFIG;
	}
	rc =
	    profile_get(cred, conf, c->profile, "aws_session_token", c->token, sizeof(c->token), 1);
	return rc < 0 ? rc : 0;
}

static int
resolve_endpoint(struct ol_s3_conf *c, const struct ol_s3_opts *o, struct ini_file *cred,
		 struct ini_file *conf)
{
	const char *v = o->endpoint ? o->endpoint
				    : (env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3")
								  : env("AWS_ENDPOINT_URL"));
	int rc;
	if (v)
		return set(c->endpoint, sizeof(c->endpoint), v);
	rc = profile_get(cred, conf, c->profile, "endpoint_url", c->endpoint, sizeof(c->endpoint),
			 0);
	if (rc < 0)
		return rc;
	if (!rc) {
		ol_s3_set_error(
		    "no S3 endpoint: pass one (--endpoint-url), set AWS_ENDPOINT_URL, or "
		    "endpoint_url in profile '%s' of %s",
		    c->profile, conf->path);
		return OL_S3_ECONFIG;
	}
	return 0;
}

static int
resolve_region(struct ol_s3_conf *c, const struct ol_s3_opts *o, struct ini_file *cred,
	       struct ini_file *conf)
{
	const char *v = o->region
			    ? o->region
			    : (env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION"));
	int rc;
	if (v)
		return set(c->region, sizeof(c->region), v);
	rc = profile_get(cred, conf, c->profile, "region", c->region, sizeof(c->region), 0);
	if (rc < 0)
		return rc;
	return rc ? 0 : set(c->region, sizeof(c->region), "us-east-1");
}

static int
resolve_ca(struct ol_s3_conf *c, const struct ol_s3_opts *o, struct ini_file *cred,
	   struct ini_file *conf)
{
	const char *v =
	    o->size >= offsetof(struct ol_s3_opts, ca_file) + sizeof(o->ca_file) && o->ca_file
		? o->ca_file
		: env("AWS_CA_BUNDLE");
	int rc;
	if (v)
		return set(c->ca_file, sizeof(c->ca_file), v);
	rc = profile_get(cred, conf, c->profile, "ca_bundle", c->ca_file, sizeof(c->ca_file), 0);
	return rc < 0 ? rc : 0;
}

/* "http[s]://host[:port][/]" -> host, port, Host header value */
static int
parse_endpoint(struct ol_s3_conf *c)
{
	const char *p = c->endpoint, *colon, *slash;
	char *end;
	unsigned long port = 80;
	c->tls = strncmp(p, "https://", 8) == 0;
	if (c->tls) {
		port = 443;
		p++;
	} else if (strncmp(p, "http://", 7) != 0) {
		ol_s3_set_error("endpoint '%s' does not start with http:// or https:// (write it "
				"as http://HOST:PORT)",
				c->endpoint);
		return -EINVAL;
	}
	p += 7;
	slash = strchr(p, '/');
	if (slash && slash[1]) {
		ol_s3_set_error("endpoint '%s' has a path: give only http://HOST:PORT",
				c->endpoint);
		return -EINVAL;
	}
	size_t hl = slash ? (size_t)(slash - p) : strlen(p);
	if (hl == 0 || hl >= sizeof(c->hosthdr)) {
		ol_s3_set_error("endpoint '%s' has no host", c->endpoint);
		return -EINVAL;
	}
	memcpy(c->hosthdr, p, hl);
	c->hosthdr[hl] = 0;
	colon = strrchr(c->hosthdr, ':');
	if (colon && !strchr(colon, ']')) {
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || port == 0 || port > 65535 || end == colon + 1) {
			ol_s3_set_error("endpoint '%s': bad port", c->endpoint);
			return -EINVAL;
		}
		hl = (size_t)(colon - c->hosthdr);
	}
	memcpy(c->host, c->hosthdr, hl);
	c->host[hl] = 0;
	snprintf(c->port, sizeof(c->port), "%lu", port);
	return 0;
}

int
ol_s3_conf_resolve(struct ol_s3_conf *c, const struct ol_s3_opts *o)
{
	struct ini_file cred = {.buf = NULL}, conf = {.buf = NULL};
	const char *prof = o->profile ? o->profile : env("AWS_PROFILE");
	int rc;
	memset(c, 0, sizeof(*c));
	rc = set(c->profile, sizeof(c->profile), prof ? prof : "default");
	if (rc)
		return rc;
	rc = ini_open(&cred, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	rc = rc ? rc : ini_open(&conf, "AWS_CONFIG_FILE", ".aws/config");
	if (rc)
		goto out;
	if (prof && strcmp(prof, "default") != 0 && !profile_exists(&cred, prof)) {
		char sect[300];
		snprintf(sect, sizeof(sect), "profile %s", prof);
		if (!profile_exists(&conf, sect)) {
			ol_s3_set_error(
			    "profile '%s' not found in %s or %s (add a [%s] section, or "
			    "unset AWS_PROFILE)",
			    prof, cred.path, conf.path, prof);
			rc = OL_S3_ECONFIG;
			goto out;
		}
	}
	rc = resolve_keys(c, o, &cred, &conf);
	rc = rc ? rc : resolve_region(c, o, &cred, &conf);
	rc = rc ? rc : resolve_endpoint(c, o, &cred, &conf);
	rc = rc ? rc : parse_endpoint(c);
	rc = rc ? rc : resolve_ca(c, o, &cred, &conf);
out:
	free(cred.buf);
	free(conf.buf);
	return rc;
}
