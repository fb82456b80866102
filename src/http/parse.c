/* http/parse.c - pure HTTP/1.1 request-head parser (RFC 9112), no sockets, no globals. */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* tchar of RFC 9110 5.6.2 */
static const char tchar_extra[] = "!#$%&'*+-.^_`|~";

static bool
is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr(tchar_extra, c) != NULL;
}

/* field-value / target bytes: VCHAR, obs-text; SP and HTAB only where allowed */
static bool
is_vchar(unsigned char c)
{
	return (c > 0x20 && c != 0x7f);
}

void
ol_http_head_init(struct ol_http_head *h)
{
	memset(h, 0, sizeof(*h));
	h->content_length = -1;
}

void
ol_http_head_fini(struct ol_http_head *h)
{
	free(h->mem);
	free(h->headers);
	free(h->name_lens);
	ol_http_head_init(h);
}

static int
fail(struct ol_http_head *h, int err, int status)
{
	h->err_status = status;
	return err;
}

/* Find the blank line ending the head in buf[0..len). Returns the offset just past it, 0 when
 * not there yet, -EPROTO on a bare LF or bare CR. */
static ssize_t
find_head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n')
			return -EPROTO; /* LF not preceded by CR */
		if (buf[i] != '\r')
			continue;
		if (i + 1 >= len)
			return 0;
		if (buf[i + 1] != '\n')
			return -EPROTO;
		if (i + 3 < len && buf[i + 2] == '\r' && buf[i + 3] == '\n')
			return (ssize_t)(i + 4);
		if (i + 2 >= len || (buf[i + 2] == '\r' && i + 3 >= len))
			return 0;
		i++;
	}
	return 0;
}

static int
grow(struct ol_http_head *h, size_t need)
{
	if (need > h->mem_cap) {
		char *m = realloc(h->mem, need);
		if (!m)
			return -ENOMEM;
		h->mem = m;
		h->mem_cap = need;
	}
	if (!h->headers) {
		h->headers = calloc(16, sizeof(*h->headers));
		h->name_lens = calloc(16, sizeof(*h->name_lens));
		if (!h->headers || !h->name_lens) {
			free(h->headers);
			free(h->name_lens);
			h->headers = NULL;
			h->name_lens = NULL;
			return -ENOMEM;
		}
		h->hdr_cap = 16;
	}
	return 0;
}

static int
add_header(struct ol_http_head *h, const char *name, const char *value)
{
	if (h->n_headers == h->hdr_cap) {
		if (h->hdr_cap >= OL_HTTP_MAX_HEADERS)
			return fail(h, -EMSGSIZE, 431);
		size_t cap = h->hdr_cap * 2;
		struct ol_http_header *n = realloc(h->headers, cap * sizeof(*n));
		if (!n)
			return fail(h, -ENOMEM, 500);
		h->headers = n;
		unsigned *nl = realloc(h->name_lens, cap * sizeof(*nl));
		if (!nl)
			return fail(h, -ENOMEM, 500);
		h->name_lens = nl;
		h->hdr_cap = cap;
	}
	h->headers[h->n_headers].name = name;
	h->headers[h->n_headers].value = value;
	h->name_lens[h->n_headers] = (unsigned)strlen(name);
	h->n_headers++;
	return 0;
}

/* Split the target into path and query (into dst, a copy); handles origin-form,
 * absolute-form ("http://host/p?q") and asterisk-form ("*"). */
static int
split_target(struct ol_http_head *h, const char *t, char *dst)
{
	const char *p = t;
	if (t[0] != '/') {
		if (!strcmp(t, "*")) {
			p = t;
		} else if (!strncasecmp(t, "http://", 7) || !strncasecmp(t, "https://", 8)) {
			const char *auth = strstr(t, "://") + 3;
			p = auth + strcspn(auth, "/?");
			if (p == auth)
				return fail(h, -EPROTO, 400); /* empty authority */
		} else {
			return fail(h, -EPROTO, 400);
		}
	}
	size_t pl = strlen(p);
	char *d = dst;
	if (pl == 0 || p[0] == '?')
		*d++ = '/'; /* absolute-form with an empty path */
	memcpy(d, p, pl + 1);
	char *q = strchr(dst, '?');
	h->path = dst;
	if (q) {
		*q = '\0';
		h->query = q + 1;
	} else {
		h->query = dst + strlen(dst); /* "" */
	}
	return 0;
}

static int
parse_version(struct ol_http_head *h, const char *v)
{
	if (strncmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
	    v[7] > '9' || v[8])
		return fail(h, -EPROTO, 400);
	if (v[5] != '1' || v[7] > '1')
		return fail(h, -ENOTSUP, 505);
	h->version_minor = v[7] - '0';
	return 0;
}

/* line: "METHOD SP target SP HTTP/1.x" (NUL-terminated copy, modified in place) */
static int
parse_request_line(struct ol_http_head *h, char *line, char *target_dst)
{
	char *sp1 = line;
	while (is_tchar((unsigned char)*sp1))
		sp1++;
	if (sp1 == line || *sp1 != ' ')
		return fail(h, -EPROTO, 400);
	*sp1 = '\0';
	char *t = sp1 + 1, *sp2 = t;
	while (is_vchar((unsigned char)*sp2))
		sp2++;
	if (sp2 == t || *sp2 != ' ')
		return fail(h, -EPROTO, 400);
	*sp2 = '\0';
	h->method = line;
	h->target = t;
	int rc = parse_version(h, sp2 + 1);
	if (rc)
		return rc;
	return split_target(h, t, target_dst);
}

static char *
trim(char *s, char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*end = '\0';
	return s;
}

/* One header line (without CRLF, NUL-terminated). */
static int
parse_header_line(struct ol_http_head *h, char *line)
{
	if (*line == ' ' || *line == '\t')
		return fail(h, -EPROTO, 400); /* obs-fold is rejected (RFC 9112 5.2) */
	char *c = line;
	while (is_tchar((unsigned char)*c))
		c++;
	if (c == line || *c != ':')
		return fail(h, -EPROTO, 400); /* empty name, bad char, or space before colon */
	*c = '\0';
	char *v = c + 1, *e = v;
	for (; *e; e++) {
		unsigned char ch = (unsigned char)*e;
		if (!is_vchar(ch) && ch != ' ' && ch != '\t')
			return fail(h, -EPROTO, 400);
	}
	return add_header(h, line, trim(v, e));
}

static int
parse_content_length(struct ol_http_head *h, const char *v)
{
	if (*v < '0' || *v > '9')
		return fail(h, -EPROTO, 400);
	uint64_t n = 0;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > (UINT64_C(1) << 59))
			return fail(h, -EPROTO, 400);
		n = n * 10 + (uint64_t)(*v - '0');
	}
	if (h->content_length >= 0 && (uint64_t)h->content_length != n)
		return fail(h, -EPROTO, 400); /* conflicting duplicates */
	h->content_length = (int64_t)n;
	return 0;
}

/* Does the comma-separated list v contain token tok (case-insensitive)? */
static bool
list_has(const char *v, const char *tok)
{
	size_t tl = strlen(tok);
	while (*v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		size_t n = strcspn(v, ",");
		size_t m = n;
		while (m && (v[m - 1] == ' ' || v[m - 1] == '\t'))
			m--;
		if (m == tl && !strncasecmp(v, tok, tl))
			return true;
		v += n;
	}
	return false;
}

static int
semantics(struct ol_http_head *h)
{
	bool te = false, conn_close = false, conn_ka = false;
	size_t n_host = 0;
	int rc;
	for (size_t i = 0; i < h->n_headers; i++) {
		const char *n = h->headers[i].name, *v = h->headers[i].value;
		if (!strcasecmp(n, "content-length")) {
			if ((rc = parse_content_length(h, v)))
				return rc;
		} else if (!strcasecmp(n, "transfer-encoding")) {
			if (te || strcasecmp(v, "chunked"))
				return fail(h, -ENOTSUP, 501);
			te = true;
		} else if (!strcasecmp(n, "connection")) {
			conn_close |= list_has(v, "close");
			conn_ka |= list_has(v, "keep-alive");
		} else if (!strcasecmp(n, "expect")) {
			h->expect_continue = !strcasecmp(v, "100-continue");
		} else if (!strcasecmp(n, "host")) {
			n_host++;
		}
	}
	if (te && h->content_length >= 0)
		return fail(h, -EPROTO, 400); /* request smuggling guard */
	if (h->version_minor == 1 && n_host != 1)
		return fail(h, -EPROTO, 400); /* RFC 9112 3.2 */
	if (te && h->version_minor == 0)
		return fail(h, -EPROTO, 400);
	h->chunked = te;
	if (te)
		h->content_length = -1;
	h->keep_alive = h->version_minor == 1 ? !conn_close : (conn_ka && !conn_close);
	if (h->version_minor == 0)
		h->expect_continue = false;
	return 0;
}

static void
reset(struct ol_http_head *h)
{
	h->method = h->target = h->path = h->query = NULL;
	h->version_minor = 0;
	h->n_headers = 0;
	h->content_length = -1;
	h->chunked = h->expect_continue = h->keep_alive = false;
	h->err_status = 0;
}

/* Parse the lines of the copied head mem[0..hl) (ends with CRLF CRLF). */
static int
parse_lines(struct ol_http_head *h, char *mem, size_t hl, char *target_dst)
{
	char *p = mem, *end = mem + hl - 2; /* the last CRLF ends the head */
	bool first = true;
	while (p < end) {
		char *cr = memchr(p, '\r', (size_t)(end - p));
		if (!cr)
			return fail(h, -EPROTO, 400);
		*cr = '\0';
		if (memchr(p, '\0', (size_t)(cr - p)))
			return fail(h, -EPROTO, 400); /* NUL inside a line */
		int rc = first ? parse_request_line(h, p, target_dst) : parse_header_line(h, p);
		if (rc)
			return rc;
		first = false;
		p = cr + 2;
	}
	return first ? fail(h, -EPROTO, 400) : semantics(h);
}

int
ol_http_parse_request(const char *buf, size_t len, size_t max_bytes, struct ol_http_head *h)
{
	size_t skip = 0, lim = len < max_bytes ? len : max_bytes;
	reset(h);
	while (skip + 1 < lim && buf[skip] == '\r' && buf[skip + 1] == '\n')
		skip += 2;
	ssize_t e = find_head_end(buf + skip, lim - skip);
	if (e < 0)
		return fail(h, (int)e, 400);
	if (e == 0)
		return len >= max_bytes ? fail(h, -EMSGSIZE, 431) : 0;
	size_t hl = (size_t)e;
	/* mem: the head copy, then a copy of the target for path/query ("/" may be added) */
	int rc = grow(h, 2 * hl + 4);
	if (rc)
		return fail(h, rc, 500);
	memcpy(h->mem, buf + skip, hl);
	rc = parse_lines(h, h->mem, hl, h->mem + hl + 1);
	if (rc)
		return rc;
	return (int)(skip + hl);
}

const char *
ol_http_head_get(const struct ol_http_head *h, const char *name)
{
	return ol_http_header_find(h->headers, h->name_lens, h->n_headers, name);
}

const char *
ol_http_header_find(const struct ol_http_header *hs, const unsigned *lens, size_t n,
		    const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if ((!lens || lens[i] == len) && !strcasecmp(hs[i].name, name))
			return hs[i].value;
	return NULL;
}
