/* cluster/httpc.c - tiny HTTP/1.1 client: see httpc.h. */
#include "cluster/httpc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int64_t
ol_httpc_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
ol_httpc_parse_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen)
{
	if (strncmp(url, "https://", 8) == 0)
		return -EPROTONOSUPPORT;
	if (strncmp(url, "http://", 7) == 0)
		url += 7;
	size_t l = strcspn(url, "/");
	if (url[l] && strcmp(url + l, "/") != 0)
		return -EINVAL;
	const char *h = url, *colon;
	size_t hl;
	if (*url == '[') {
		const char *rb = memchr(url, ']', l);
		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = url + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = memrchr(url, ':', l);
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - url);
	}
	size_t pl = l - (size_t)(colon + 1 - url);
	if (hl == 0 || hl >= hostlen || pl == 0 || pl >= portlen || pl > 5)
		return -EINVAL;
	for (size_t i = 0; i < pl; i++)
		if (!isdigit((unsigned char)colon[1 + i]))
			return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	memcpy(port, colon + 1, pl);
	port[pl] = 0;
	return strtoul(port, NULL, 10) <= 65535 ? 0 : -EINVAL;
}

/* the value of header name in the head's line [s, e), or NULL */
static const char *
header_value(const char *s, const char *e, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	if ((size_t)(e - s) <= nl || strncasecmp(s, name, nl) != 0 || s[nl] != ':')
		return NULL;
	s += nl + 1;
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*vlen = (size_t)(e - s);
	return s;
}

long
ol_httpc_parse_head(const char *buf, size_t len, int *status, int64_t *content_length,
		    bool *chunked)
{
	const char *end = NULL;
	for (size_t i = 3; i < len && !end; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			end = buf + i + 1;
	if (!end)
		return len > OL_HTTPC_MAX_HEAD ? -EMSGSIZE : 0;
	if ((size_t)(end - buf) > OL_HTTPC_MAX_HEAD)
		return -EMSGSIZE;
	if (end - buf < 16 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' ||
	    !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) ||
	    !isdigit((unsigned char)buf[11]))
		return -EPROTO;
	*status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	*content_length = -1;
	*chunked = false;
	const char *s = memchr(buf, '\n', (size_t)(end - buf)) + 1;
	while (s < end - 2) {
		const char *e = memchr(s, '\n', (size_t)(end - s));
		const char *le = e[-1] == '\r' ? e - 1 : e;
		size_t vl;
		const char *v = header_value(s, le, "content-length", &vl);
		if (v) {
			int64_t n = 0;
			if (vl == 0 || vl > 15)
				return -EPROTO;
			for (size_t i = 0; i < vl; i++) {
				if (!isdigit((unsigned char)v[i]))
					return -EPROTO;
				n = n * 10 + (v[i] - '0');
			}
			*content_length = n;
		}
		v = header_value(s, le, "transfer-encoding", &vl);
		if (v) {
			if (vl != 7 || strncasecmp(v, "chunked", 7) != 0)
				return -EPROTO;
			*chunked = true;
		}
		s = e + 1;
	}
	return (long)(end - buf);
}

long
ol_httpc_chunk(const char *buf, size_t len, size_t *data_off, size_t *data_len)
{
	size_t i = 0, n = 0;
	int digits = 0;
	for (; i < len && isxdigit((unsigned char)buf[i]); i++) {
		if (++digits > 8)
			return -EMSGSIZE;
		char ch = (char)tolower((unsigned char)buf[i]);
		n = n * 16 + (size_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
	}
	if (i == len)
		return 0;
	if (!digits)
		return -EPROTO;
	if (n > OL_HTTPC_MAX_BODY)
		return -EMSGSIZE;
	/* chunk extensions up to the line end */
	const char *nl = memchr(buf + i, '\n', len - i);
	if (!nl)
		return len - i > 1024 ? -EPROTO : 0;
	if (nl == buf + i || nl[-1] != '\r')
		return -EPROTO;
	size_t off = (size_t)(nl + 1 - buf);
	if (len - off < n + 2)
		return 0;
	if (buf[off + n] != '\r' || buf[off + n + 1] != '\n')
		return -EPROTO; /* last chunk: trailers are not accepted either */
	*data_off = off;
	*data_len = n;
	return (long)(off + n + 2);
}

bool
ol_httpc_cut_off(const _Atomic int64_t *cutoff, int64_t now)
{
	int64_t at = cutoff ? atomic_load(cutoff) : 0;
	return at && now >= at;
}

static int
wait_fd(int fd, short events, int64_t deadline, const _Atomic int64_t *cutoff)
{
	for (;;) {
		int64_t now = ol_httpc_now_ms(), left = deadline - now;
		if (ol_httpc_cut_off(cutoff, now))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		/* with a cutoff, look at it again every OL_HTTPC_CUTOFF_POLL_MS */
		int64_t slice = cutoff ? OL_HTTPC_CUTOFF_POLL_MS : 1000;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, left > slice ? (int)slice : (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int
connect_to(const char *host, const char *port, int64_t deadline, const _Atomic int64_t *cutoff)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc)
		return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
	rc = -ECONNREFUSED;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			continue;
		}
		rc = wait_fd(fd, POLLOUT, deadline, cutoff);
		int err = 0;
		socklen_t el = sizeof(err);
		if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
			rc = -err;
		if (rc) {
			close(fd);
			if (rc == -ECANCELED)
				break;
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		freeaddrinfo(ai);
		return fd;
	}
	freeaddrinfo(ai);
	return rc;
}

static int
send_all(int fd, const char *p, size_t len, int64_t deadline, const _Atomic int64_t *cutoff)
{
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int rc = wait_fd(fd, POLLOUT, deadline, cutoff);
		if (rc)
			return rc;
	}
	return 0;
}

/* read what is there into c->buf (grown up to cap); 0, -ECONNRESET at EOF, -errno */
static int
recv_some(struct ol_httpc_conn *c, size_t cap)
{
	if (c->len == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16384;
		if (c->cap >= cap)
			return -EMSGSIZE;
		char *nb = realloc(c->buf, ncap + 1);
		if (!nb)
			return -ENOMEM;
		c->buf = nb;
		c->cap = ncap;
	}
	ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (r > 0) {
		c->len += (size_t)r;
		c->buf[c->len] = 0;
		return 0;
	}
	if (r == 0)
		return -ECONNRESET;
	return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
}

void
ol_httpc_close(struct ol_httpc_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

int
ol_httpc_open(struct ol_httpc_conn *c, const char *host, const char *port, const char *path,
	      const char *headers, const char *body, int64_t deadline,
	      const _Atomic int64_t *cutoff)
{
	memset(c, 0, sizeof(*c));
	c->cutoff = cutoff;
	c->fd = connect_to(host, port, deadline, cutoff);
	if (c->fd < 0) {
		int rc = c->fd;
		c->fd = -1;
		return rc;
	}
	size_t bl = strlen(body);
	char head[1024];
	int hl = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
			  "%sContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  path, host, port, headers ? headers : "", bl);
	int rc = (hl < 0 || (size_t)hl >= sizeof(head)) ? -ENAMETOOLONG : 0;
	if (!rc)
		rc = send_all(c->fd, head, (size_t)hl, deadline, cutoff);
	if (!rc)
		rc = send_all(c->fd, body, bl, deadline, cutoff);
	while (!rc) {
		long h = ol_httpc_parse_head(c->buf ? c->buf : "", c->len, &c->status,
					     &c->content_length, &c->chunked);
		if (h < 0) {
			rc = (int)h;
			break;
		}
		if (h > 0) {
			memmove(c->buf, c->buf + h, c->len - (size_t)h);
			c->len -= (size_t)h;
			return 0;
		}
		rc = wait_fd(c->fd, POLLIN, deadline, cutoff);
		if (!rc)
			rc = recv_some(c, OL_HTTPC_MAX_HEAD);
	}
	ol_httpc_close(c);
	return rc == -ECONNRESET ? -EPROTO : rc;
}

/* decode the complete chunks at c->buf into out; sets *done at the last chunk */
static int
dechunk(struct ol_httpc_conn *c, char **out, size_t *out_len, size_t *out_cap, bool *done)
{
	size_t pos = 0;
	int rc = 0;
	while (!*done) {
		size_t off, dl;
		long n = ol_httpc_chunk(c->buf + pos, c->len - pos, &off, &dl);
		if (n <= 0) {
			rc = (int)n;
			break;
		}
		if (*out_len + dl + 1 > *out_cap) {
			size_t ncap = (*out_len + dl + 1) * 2;
			if (ncap > OL_HTTPC_MAX_BODY) {
				rc = -EMSGSIZE;
				break;
			}
			char *nb = realloc(*out, ncap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			*out = nb;
			*out_cap = ncap;
		}
		memcpy(*out + *out_len, c->buf + pos + off, dl);
		*out_len += dl;
		(*out)[*out_len] = 0;
		pos += (size_t)n;
		if (dl == 0)
			*done = true;
	}
	if (pos) {
		memmove(c->buf, c->buf + pos, c->len - pos);
		c->len -= pos;
	}
	return rc;
}

int
ol_httpc_read_body(struct ol_httpc_conn *c, int64_t deadline, char **body, size_t *len)
{
	char *out = NULL;
	size_t ol = 0, cap = 0;
	bool done = false;
	int rc = 0;
	for (;;) {
		if (c->chunked) {
			rc = dechunk(c, &out, &ol, &cap, &done);
			if (rc || done)
				break;
		} else if (c->content_length >= 0 && c->len >= (size_t)c->content_length) {
			break;
		}
		rc = wait_fd(c->fd, POLLIN, deadline, c->cutoff);
		if (!rc)
			rc = recv_some(c, OL_HTTPC_MAX_BODY);
		if (rc == -ECONNRESET && !c->chunked && c->content_length < 0) {
			rc = 0; /* body delimited by the close */
			break;
		}
		if (rc)
			break;
	}
	if (!rc && !c->chunked) {
		size_t n = c->content_length >= 0 ? (size_t)c->content_length : c->len;
		out = malloc(n + 1);
		if (!out)
			return -ENOMEM;
		if (n)
			memcpy(out, c->buf, n);
		out[n] = 0;
		ol = n;
	}
	if (rc) {
		free(out);
		return rc == -ECONNRESET ? -EPROTO : rc;
	}
	if (!out && !(out = calloc(1, 1)))
		return -ENOMEM;
	*body = out;
	*len = ol;
	return 0;
}

int
ol_httpc_read_stream(struct ol_httpc_conn *c, int wait_ms, char **out, size_t *out_len,
		     size_t *out_cap)
{
	bool done = false;
	int rc = dechunk(c, out, out_len, out_cap, &done);
	if (rc)
		return rc;
	if (done)
		return -ECONNRESET;
	if (ol_httpc_cut_off(c->cutoff, ol_httpc_now_ms()))
		return -ECANCELED;
	if (c->cutoff && wait_ms > OL_HTTPC_CUTOFF_POLL_MS)
		wait_ms = OL_HTTPC_CUTOFF_POLL_MS;
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	int r = poll(&p, 1, wait_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return 0;
	rc = recv_some(c, OL_HTTPC_MAX_BODY);
	if (rc)
		return rc;
	rc = dechunk(c, out, out_len, out_cap, &done);
	if (rc)
		return rc;
	return done ? -ECONNRESET : 0;
}

int
ol_httpc_post(const char *host, const char *port, const char *path, const char *headers,
	      const char *body, int64_t deadline, const _Atomic int64_t *cutoff, int *status,
	      char **resp, size_t *resp_len)
{
	struct ol_httpc_conn c;
	int rc = ol_httpc_open(&c, host, port, path, headers, body, deadline, cutoff);
	if (rc)
		return rc;
	*status = c.status;
	rc = ol_httpc_read_body(&c, deadline, resp, resp_len);
	ol_httpc_close(&c);
	return rc;
}
