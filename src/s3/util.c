/* s3/util.c - XML writer, URL coding, routing, names, Range, dates, meta blob. */
#include "s3/s3util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/hex.h"

/* ---- XML writer ---- */

void
ol_s3_xml_esc(struct ol_buf *b, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *rep = NULL;
		char num[8];
		if (c == '&')
			rep = "&amp;";
		else if (c == '<')
			rep = "&lt;";
		else if (c == '>')
			rep = "&gt;";
		else if (c == '"')
			rep = "&quot;";
		else if (c == '\'')
			rep = "&apos;";
		else if (c < 0x20) {
			snprintf(num, sizeof(num), "&#x%X;", c);
			rep = num;
		}
		if (!rep)
			continue;
		ol_buf_add(b, s + run, i - run);
		ol_buf_adds(b, rep);
		run = i + 1;
	}
	ol_buf_add(b, s + run, n - run);
}

void
ol_s3_xml_elemn(struct ol_buf *b, const char *name, const char *value, size_t n)
{
	ol_buf_addf(b, "<%s>", name);
	ol_s3_xml_esc(b, value, n);
	ol_buf_addf(b, "</%s>", name);
}

void
ol_s3_xml_elem(struct ol_buf *b, const char *name, const char *value)
{
	ol_s3_xml_elemn(b, name, value, strlen(value));
}

void
ol_s3_xml_elemu(struct ol_buf *b, const char *name, unsigned long long v)
{
	ol_buf_addf(b, "<%s>%llu</%s>", name, v, name);
}

void
ol_s3_xml_open_root(struct ol_buf *b, const char *name)
{
	ol_buf_addf(b,
		    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		    "<%s xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
		    name);
}

void
ol_s3_url_encode(struct ol_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
			ol_buf_add(b, &s[i], 1);
		} else {
			char e[3] = {'%', ol_hex_digit(c >> 4, true), ol_hex_digit(c, true)};
			ol_buf_add(b, e, 3);
		}
	}
}

void
ol_s3_xml_elem_url(struct ol_buf *b, bool url, const char *name, const char *value, size_t n)
{
	if (!url) {
		ol_s3_xml_elemn(b, name, value, n);
		return;
	}
	struct ol_buf e = {0};
	ol_s3_url_encode(&e, value, n);
	ol_s3_xml_elemn(b, name, e.p ? e.p : "", e.len);
	ol_buf_free(&e);
}

/* ---- decoding ---- */

long
ol_s3_pct_decode(const char *src, size_t n, char *dst, size_t cap, bool plus_space)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)src[i];
		if (c == '%') {
			if (i + 2 >= n)
				return -EINVAL;
			int h = ol_hex_val(src[i + 1]), l = ol_hex_val(src[i + 2]);
			if (h < 0 || l < 0)
				return -EINVAL;
			c = h * 16 + l;
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (c == 0)
			return -EINVAL;
		if (o + 1 >= cap)
			return -ENAMETOOLONG;
		dst[o++] = (char)c;
	}
	if (cap)
		dst[o] = '\0';
	return (long)o;
}

bool
ol_s3_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len;
		unsigned min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			len = 2, min = 0x80, c &= 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3, min = 0x800, c &= 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4, min = 0x10000, c &= 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t j = 1; j < len; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			c = (c << 6) | (s[i + j] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

/* ---- names ---- */

bool
ol_s3_is_ip(const char *host)
{
	if (host[0] == '[' || strchr(host, ':'))
		return true; /* IPv6 literal */
	int parts = 0;
	const char *p = host;
	while (*p) {
		int digits = 0;
		unsigned v = 0;
		while (isdigit((unsigned char)*p) && digits < 4) {
			v = v * 10 + (unsigned)(*p - '0');
			p++, digits++;
		}
		if (digits == 0 || v > 255)
			return false;
		parts++;
		if (*p == '.')
			p++;
		else if (*p)
			return false;
	}
	return parts == 4 && p[-1] != '.';
}

bool
ol_s3_bucket_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '.' ||
		      c == '-'))
			return false;
	}
	if (!isalnum((unsigned char)name[0]) || !isalnum((unsigned char)name[n - 1]))
		return false;
	if (strstr(name, "..") || strstr(name, ".-") || strstr(name, "-."))
		return false;
	if (strncmp(name, "xn--", 4) == 0 || (n > 8 && strcmp(name + n - 8, "-s3alias") == 0))
		return false;
	return !ol_s3_is_ip(name);
}

/* ---- routing ---- */

static bool
host_is_base(const char *h, size_t n, const char *endpoint_host)
{
	static const char *const fixed[] = {"localhost", "s3.amazonaws.com"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strlen(fixed[i]) == n && memcmp(h, fixed[i], n) == 0)
			return true;
	for (const char *e = endpoint_host ? endpoint_host : ""; *e;) {
		const char *comma = strchr(e, ',');
		size_t el = comma ? (size_t)(comma - e) : strlen(e);
		char name[256];
		if (el == n && el < sizeof(name) && strncasecmp(h, e, n) == 0) {
			memcpy(name, e, el);
			name[el] = '\0';
			if (!ol_s3_is_ip(name))
				return true;
		}
		e += el + (comma != NULL);
	}
	/* s3.<region>.amazonaws.com, s3-<region>.amazonaws.com */
	static const char sfx[] = ".amazonaws.com";
	size_t sl = sizeof(sfx) - 1;
	if (n > sl + 3 && memcmp(h + n - sl, sfx, sl) == 0 &&
	    (memcmp(h, "s3.", 3) == 0 || memcmp(h, "s3-", 3) == 0))
		return memchr(h + 3, '.', n - sl - 3) == NULL;
	return false;
}

/* Host without port, lowercased, into out. */
static void
host_strip(const char *host, char *out, size_t cap)
{
	size_t n = 0;
	if (!host)
		host = "";
	const char *end = host + strlen(host);
	if (host[0] != '[') {
		const char *colon = strrchr(host, ':');
		if (colon && strchr(host, ':') == colon)
			end = colon;
	}
	for (const char *p = host; p < end && n + 1 < cap; p++)
		out[n++] = (char)tolower((unsigned char)*p);
	out[n] = '\0';
}

static int
route_vhost(const char *h, const char *endpoint_host, struct ol_s3_route *r)
{
	if (ol_s3_is_ip(h) || host_is_base(h, strlen(h), endpoint_host))
		return 0;
	for (const char *dot = strchr(h, '.'); dot; dot = strchr(dot + 1, '.')) {
		if (!host_is_base(dot + 1, strlen(dot + 1), endpoint_host))
			continue;
		size_t bl = (size_t)(dot - h);
		if (bl == 0 || bl >= sizeof(r->bucket))
			return -EINVAL;
		memcpy(r->bucket, h, bl);
		r->bucket[bl] = '\0';
		r->vhost = true;
		return 1;
	}
	return 0;
}

void
ol_s3_endpoint_names(const char *s3_addr, const char *domains, char *out, size_t cap)
{
	char host[256];
	unsigned port;
	if (ol_config_split_addr(s3_addr, host, sizeof(host), &port) < 0)
		host[0] = '\0';
	int n = snprintf(out, cap, "%s%s%s", host, host[0] && domains[0] ? "," : "", domains);
	if (n < 0 || (size_t)n >= cap)
		snprintf(out, cap, "%s", host); /* the config's limits keep it under cap */
}

int
ol_s3_route(const char *host, const char *endpoint_host, const char *path, struct ol_s3_route *r)
{
	char h[256];
	memset(r, 0, sizeof(*r));
	host_strip(host, h, sizeof(h));
	int v = route_vhost(h, endpoint_host, r);
	if (v < 0)
		return v;
	const char *p = path && path[0] == '/' ? path + 1 : (path ? path : "");
	const char *keyp = p;
	if (!r->vhost) {
		const char *slash = strchr(p, '/');
		size_t bl = slash ? (size_t)(slash - p) : strlen(p);
		long n = ol_s3_pct_decode(p, bl, r->bucket, sizeof(r->bucket), false);
		if (n < 0)
			return n == -ENAMETOOLONG ? -EINVAL : (int)n;
		keyp = slash ? slash + 1 : p + bl;
	}
	long k = ol_s3_pct_decode(keyp, strlen(keyp), r->key, sizeof(r->key), false);
	if (k < 0)
		return (int)k;
	if (!ol_s3_utf8_valid(r->key, (size_t)k))
		return -EINVAL;
	r->key_len = (size_t)k;
	return 0;
}

/* ---- query ---- */

static const char *
query_find(const char *q, const char *name, size_t *vlen, bool *has_val)
{
	size_t nl = strlen(name);
	const char *p = q ? q : "";
	while (*p) {
		const char *end = strchr(p, '&');
		size_t seg = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', seg);
		size_t kl = eq ? (size_t)(eq - p) : seg;
		char kbuf[128];
		long d = kl < sizeof(kbuf) ? ol_s3_pct_decode(p, kl, kbuf, sizeof(kbuf), true) : -1;
		if (d == (long)nl && memcmp(kbuf, name, nl) == 0) {
			*has_val = eq != NULL;
			*vlen = eq ? seg - kl - 1 : 0;
			return eq ? eq + 1 : p + seg;
		}
		p += seg;
		if (*p == '&')
			p++;
	}
	return NULL;
}

long
ol_s3_query_get(const char *q, const char *name, char *val, size_t cap)
{
	size_t vl;
	bool hv;
	const char *v = query_find(q, name, &vl, &hv);
	if (!v)
		return -ENOENT;
	return ol_s3_pct_decode(v, vl, val, cap, true);
}

bool
ol_s3_query_has(const char *q, const char *name)
{
	size_t vl;
	bool hv;
	return query_find(q, name, &vl, &hv) != NULL;
}

int
ol_s3_parse_count(const char *s, unsigned *out)
{
	unsigned long long v = 0;
	if (!s || !*s)
		return -EINVAL;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*c - '0');
		if (v > 2147483647ull)
			return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* ---- Range ---- */

static int
parse_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		uint64_t d = (uint64_t)(s[i] - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d; /* saturate */
	}
	*out = v;
	return 0;
}

int
ol_s3_range_parse(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
	if (!h)
		return 0;
	while (*h == ' ')
		h++;
	if (strncmp(h, "bytes=", 6) != 0)
		return 0;
	const char *spec = h + 6;
	size_t n = strlen(spec);
	while (n && spec[n - 1] == ' ')
		n--;
	if (memchr(spec, ',', n))
		return 0;
	const char *dash = memchr(spec, '-', n);
	if (!dash)
		return 0;
	size_t a_len = (size_t)(dash - spec), b_len = n - a_len - 1;
	uint64_t a, b;
	if (a_len == 0) { /* suffix: -n */
		if (parse_u64(dash + 1, b_len, &b) < 0)
			return 0;
		if (b == 0 || size == 0)
			return -ERANGE;
		*len = b < size ? b : size;
		*off = size - *len;
		return 1;
	}
	if (parse_u64(spec, a_len, &a) < 0)
		return 0;
	if (b_len == 0) {
		b = UINT64_MAX;
	} else if (parse_u64(dash + 1, b_len, &b) < 0 || b < a) {
		return 0;
	}
	if (a >= size)
		return -ERANGE;
	if (b >= size)
		b = size - 1;
	*off = a;
	*len = b - a + 1;
	return 1;
}

/* ---- dates ---- */

void
ol_s3_http_date(int64_t ms, char out[32])
{
	ol_clock_http_date(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000), out);
}

void
ol_s3_iso_date(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char base[24];
	gmtime_r(&t, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 32, "%s.%03dZ", base, (int)(ms % 1000));
}

int
ol_s3_parse_http_date(const char *s, int64_t *secs)
{
	static const char *const fmts[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
					   "%a %b %e %H:%M:%S %Y", "%Y-%m-%dT%H:%M:%SZ"};
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		struct tm tm;
		memset(&tm, 0, sizeof(tm));
		const char *end = strptime(s, fmts[i], &tm);
		if (end && *end == '\0') {
			*secs = (int64_t)timegm(&tm);
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- meta blob ---- */

void
ol_s3_meta_add(struct ol_buf *b, const char *name, const char *value)
{
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return;
	ol_buf_addf(b, "%s: %s\n", name, value);
}

int
ol_s3_meta_next(const char *blob, size_t n, size_t *pos, struct ol_s3_meta_kv *kv)
{
	while (*pos < n) {
		const char *line = blob + *pos;
		const char *nl = memchr(line, '\n', n - *pos);
		size_t ll = nl ? (size_t)(nl - line) : n - *pos;
		*pos += ll + (nl ? 1 : 0);
		const char *colon = memchr(line, ':', ll);
		if (!colon || colon + 1 >= line + ll || colon[1] != ' ')
			continue;
		kv->name = line;
		kv->name_len = (size_t)(colon - line);
		kv->value = colon + 2;
		kv->value_len = ll - kv->name_len - 2;
		return 1;
	}
	return 0;
}

long
ol_s3_meta_get(const char *blob, size_t n, const char *name, const char **val)
{
	size_t pos = 0, nl = strlen(name);
	struct ol_s3_meta_kv kv;
	while (ol_s3_meta_next(blob, n, &pos, &kv)) {
		if (kv.name_len == nl && strncasecmp(kv.name, name, nl) == 0) {
			*val = kv.value;
			return (long)kv.value_len;
		}
	}
	return -ENOENT;
}
