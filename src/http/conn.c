/* http/conn.c - the per-request API a handler calls: body reads, response head and body. */
#include "http/internal.h"

#include "base/clock.h"
#include "base/log.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int
tmo_body(const struct ol_http_conn *c)
{
	return (int)c->srv->o.body_timeout_ms;
}

const char *
ol_http_header(const struct ol_http_req *r, const char *name)
{
	return ol_http_header_find(r->headers, r->header_name_lens, r->n_headers, name);
}

void
ol_http_conn_begin(struct ol_http_conn *c)
{
	struct ol_http_head *h = &c->head;
	struct ol_http_req *r = &c->req;
	memset(r, 0, sizeof(*r));
	r->method = h->method;
	r->target = h->target;
	r->path = h->path;
	r->query = h->query;
	r->version_minor = h->version_minor;
	r->headers = h->headers;
	r->n_headers = h->n_headers;
	r->header_name_lens = h->name_lens;
	r->content_length = h->content_length;
	r->chunked = h->chunked;
	r->expect_continue = h->expect_continue;
	r->keep_alive = h->keep_alive;
	r->peer = c->peer;
	r->tls = c->ssl != NULL;
	r->priv = c;
	c->body_left = h->content_length > 0 ? h->content_length : 0;
	c->body_total = 0;
	c->body_done = !h->chunked && c->body_left == 0;
	c->continue_sent = false;
	c->body_err = 0;
	ol_http_chunked_init(&c->ck);
	c->resp_started = c->resp_finished = c->resp_chunked = c->resp_nobody = false;
	c->close_after = !h->keep_alive;
	c->resp_left = -1;
	c->wlen = 0;
}

/* ---- output buffer ---- */

static int
sock_err(struct ol_http_conn *c, int rc)
{
	if (rc && !c->io_err) {
		c->io_err = rc;
		c->close_after = true;
	}
	return rc;
}

/* Write wbuf plus iov[0..n) in one writev. */
static int
flush_with(struct ol_http_conn *c, const struct iovec *extra, int n)
{
	struct iovec iov[4];
	int k = 0;
	if (c->io_err)
		return c->io_err;
	if (c->wlen)
		iov[k++] = (struct iovec){c->wbuf, c->wlen};
	for (int i = 0; i < n; i++)
		if (extra[i].iov_len)
			iov[k++] = extra[i];
	c->wlen = 0;
	if (!k)
		return 0;
	size_t total = 0;
	for (int i = 0; i < k; i++)
		total += iov[i].iov_len;
	OL_HTTP_COUNT(c->srv, bytes_out, total);
	return sock_err(c, ol_http_conn_writev(c, iov, k, tmo_body(c)));
}

int
ol_http_conn_writev(struct ol_http_conn *c, struct iovec *iov, int n, int timeout_ms)
{
	if (!c->ssl) {
		if (timeout_ms == 0) { /* one non-blocking try */
			struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
			ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
			return w < 0 ? -errno : 0;
		}
		return ol_io_writev_all(c->fd, iov, n, timeout_ms);
	}
	if (!c->tickets) { /* with the first bytes of the first answer, not before */
		ol_http_tls_tickets(c->ssl);
		c->tickets = true;
	}
	for (int i = 0; i < n; i++) {
		int rc =
		    ol_http_tls_write(c->ssl, c->fd, iov[i].iov_base, iov[i].iov_len, timeout_ms);
		if (rc)
			return rc;
	}
	return 0;
}

int
ol_http_conn_flush(struct ol_http_conn *c)
{
	return flush_with(c, NULL, 0);
}

/* Append the strings s[0..n) to the head being built, all or none (printf-free: a GET of a
 * small object formats ten-odd headers). -EMSGSIZE when they do not fit. */
static int
wputs(struct ol_http_conn *c, const char *const *s, size_t n)
{
	size_t len[8], sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += len[i] = strlen(s[i]);
	if (sum >= OL_HTTP_WBUF - c->wlen)
		return -EMSGSIZE;
	for (size_t i = 0; i < n; i++) {
		memcpy(c->wbuf + c->wlen, s[i], len[i]);
		c->wlen += len[i];
	}
	return 0;
}

/* "name: value\r\n" */
static int
wheader(struct ol_http_conn *c, const char *name, const char *value)
{
	return wputs(c, (const char *const[]){name, ": ", value, "\r\n"}, 4);
}

/* a string */
static int
wput(struct ol_http_conn *c, const char *str)
{
	return wputs(c, &str, 1);
}

/* v in decimal into buf (at least 21 bytes); returns buf */
static const char *
dec(uint64_t v, char *buf)
{
	char *p = buf + 20;
	*p = '\0';
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	return p;
}

/* ---- request body ---- */

static int
send_continue(struct ol_http_conn *c)
{
	static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct iovec iov = {(void *)msg, sizeof(msg) - 1};
	c->continue_sent = true;
	return sock_err(c, ol_http_conn_writev(c, &iov, 1, tmo_body(c)));
}

ssize_t
ol_http_conn_recv(struct ol_http_conn *c, void *buf, size_t len, int timeout_ms)
{
	ssize_t n = c->ssl ? ol_http_tls_read(c->ssl, c->fd, buf, len, timeout_ms)
			   : ol_io_recv_timeo(c->fd, buf, len, timeout_ms, &c->cur_timeo);
	if (n > 0)
		OL_HTTP_COUNT(c->srv, bytes_in, (uint64_t)n);
	else if (n == -ETIMEDOUT)
		OL_HTTP_COUNT(c->srv, timeouts, 1);
	return n;
}

static ssize_t
sock_read(struct ol_http_conn *c, void *buf, size_t len)
{
	ssize_t n = ol_http_conn_recv(c, buf, len, tmo_body(c));
	if (n == 0)
		return -ECONNRESET; /* EOF inside a body */
	return n;
}

static ssize_t
read_cl(struct ol_http_conn *c, void *buf, size_t len)
{
	size_t n = len < (uint64_t)c->body_left ? len : (size_t)c->body_left;
	size_t avail = c->rlen - c->rpos;
	ssize_t got;
	if (avail) {
		got = (ssize_t)(n < avail ? n : avail);
		memcpy(buf, c->rbuf + c->rpos, (size_t)got);
		c->rpos += (size_t)got;
	} else {
		got = sock_read(c, buf, n);
		if (got < 0)
			return got;
	}
	c->body_left -= got;
	if (!c->body_left)
		c->body_done = true;
	return got;
}

/* Feed decoder from in[0..n); copy data to out. Returns data bytes, 0 if only framing. */
static ssize_t
feed(struct ol_http_conn *c, const char *in, size_t n, size_t *used, char *out)
{
	const char *d;
	size_t dl;
	ssize_t k = ol_http_chunked_feed(&c->ck, in, n, &d, &dl);
	if (k < 0)
		return k;
	*used = (size_t)k;
	if (dl && d != out)
		memmove(out, d, dl);
	return (ssize_t)dl;
}

static ssize_t
read_chunked_step(struct ol_http_conn *c, char *buf, size_t len)
{
	size_t avail = c->rlen - c->rpos, used;
	if (avail) {
		ssize_t k = feed(c, c->rbuf + c->rpos, avail < len ? avail : len, &used, buf);
		if (k >= 0)
			c->rpos += used;
		return k;
	}
	uint64_t left = ol_http_chunked_data_left(&c->ck);
	if (left) { /* straight into the caller's buffer */
		ssize_t n = sock_read(c, buf, len < left ? len : (size_t)left);
		return n < 0 ? n : feed(c, buf, (size_t)n, &used, buf);
	}
	c->rpos = c->rlen = 0;
	ssize_t n = sock_read(c, c->rbuf, c->rcap);
	if (n < 0)
		return n;
	c->rlen = (size_t)n;
	return 0;
}

static ssize_t
read_chunked(struct ol_http_conn *c, char *buf, size_t len)
{
	for (;;) {
		ssize_t k = read_chunked_step(c, buf, len);
		if (k < 0)
			return k;
		if (ol_http_chunked_done(&c->ck))
			c->body_done = true;
		if (k > 0 || c->body_done)
			return k;
	}
}

ssize_t
ol_http_body_read(struct ol_http_req *r, void *buf, size_t len)
{
	struct ol_http_conn *c = r->priv;
	if (c->body_err)
		return c->body_err;
	if (c->body_done)
		return 0;
	if (!len)
		return -EINVAL;
	if (c->head.expect_continue && !c->continue_sent && !c->resp_started) {
		int rc = send_continue(c);
		if (rc)
			return rc;
	}
	ssize_t n = c->head.chunked ? read_chunked(c, buf, len) : read_cl(c, buf, len);
	if (n > 0) {
		c->body_total += (uint64_t)n;
		uint64_t max = c->srv->o.max_body_bytes;
		if (max && c->body_total > max)
			n = -EMSGSIZE;
	}
	if (n < 0) {
		c->body_err = (int)n;
		c->close_after = true;
	}
	return n;
}

/* The client asked for 100 Continue, was not given it, and has not started its body: it may
 * never send it. Clients wait about a second for the 100 and then send the body anyway (an
 * answer that took longer, such as a 503 after waiting for a cluster leader, finds the body
 * coming): that body is drained like any other, not left unread for the close to answer with
 * a reset that destroys the response. */
static bool
waits_continue(const struct ol_http_conn *c)
{
	struct pollfd p = {c->fd, POLLIN, 0};

	if (!c->head.expect_continue || c->continue_sent)
		return false;
	return c->rlen == c->rpos && !(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
}

/* Discard the unread body so the next request can be read; else mark the conn to close. */
static void
drain_body(struct ol_http_conn *c)
{
	char tmp[16384];
	uint64_t budget = OL_HTTP_DRAIN_MAX;
	if (c->body_done || c->close_after)
		return;
	if (waits_continue(c) || (!c->head.chunked && (uint64_t)c->body_left > budget)) {
		c->close_after = true; /* the client may never send it, or it is too big */
		return;
	}
	c->continue_sent = true; /* never send 100 after the final response */
	while (!c->body_done && budget) {
		ssize_t n = ol_http_body_read(&c->req, tmp, sizeof(tmp));
		if (n <= 0)
			break;
		budget = (uint64_t)n >= budget ? 0 : budget - (uint64_t)n;
	}
	if (!c->body_done)
		c->close_after = true;
}

/* ---- response ---- */

const char *
ol_http_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 304:
		return "Not Modified";
	case 307:
		return "Temporary Redirect";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 416:
		return "Range Not Satisfiable";
	case 417:
		return "Expectation Failed";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	case 507:
		return "Insufficient Storage";
	default:
		return "Unknown";
	}
}

static bool
is_server_header(const char *n)
{
	static const char *const own[] = {"content-length", "transfer-encoding", "date", "server",
					  "connection"};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcasecmp(n, own[i]))
			return true;
	return false;
}

static bool
header_ok(const struct ol_http_header *h)
{
	if (!h->name || !h->value || !*h->name)
		return false;
	for (const char *p = h->name; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == ':' || *p == 0x7f)
			return false;
	return strpbrk(h->value, "\r\n") == NULL;
}

/* The Date value, formatted at most once a second per thread. */
static const char *
date_now(void)
{
	static __thread time_t last = -1;
	static __thread char d[OL_HTTP_DATE_LEN + 1];
	time_t now = time(NULL);
	if (now != last) {
		ol_clock_http_date(now, d);
		last = now;
	}
	return d;
}

static int
append_date(struct ol_http_conn *c)
{
	return wputs(c, (const char *const[]){"Date: ", date_now(), "\r\nServer: OpenLake\r\n"}, 3);
}

/* Framing headers; sets resp_chunked / resp_left / close_after. */
static int
append_framing(struct ol_http_conn *c, int status, int64_t cl)
{
	int rc = 0;
	if (status == 204 || (status == 304 && cl < 0))
		return 0;
	if (cl >= 0) {
		if (!c->resp_nobody)
			c->resp_left = cl;
		char n[24];
		return wheader(c, "Content-Length", dec((uint64_t)cl, n));
	}
	if (c->resp_nobody)
		return 0;
	if (c->head.version_minor >= 1) {
		c->resp_chunked = true;
		rc = wput(c, "Transfer-Encoding: chunked\r\n");
	} else {
		c->close_after = true; /* HTTP/1.0: the body ends when the connection closes */
	}
	return rc;
}

static int
build_head(struct ol_http_conn *c, int status, const struct ol_http_header *h, size_t n, int64_t cl)
{
	int rc = 0;
	/* An empty body with Expect: 100-continue: answer 100 first, as S3 does. A final
	 * answer alone is legal, but botocore (1.29 here) then keeps that status line for
	 * the connection's next response and reads that response's head as headers: the
	 * next PUT on the connection hung until its read timeout. */
	if (c->head.expect_continue && !c->continue_sent && c->body_done && status >= 200) {
		c->continue_sent = true;
		rc = wput(c, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	char code[24];
	const char *st = dec(status > 0 ? (uint64_t)status : 0, code);
	rc = rc ? rc
		: wputs(c,
			(const char *const[]){"HTTP/1.1 ", st, " ", ol_http_reason(status), "\r\n"},
			5);
	rc = rc ? rc : append_date(c);
	rc = rc ? rc : append_framing(c, status, cl);
	for (size_t i = 0; !rc && i < n; i++) {
		if (!header_ok(&h[i]))
			return -EINVAL;
		if (!strcasecmp(h[i].name, "connection") && !strcasecmp(h[i].value, "close"))
			c->close_after = true;
		if (!is_server_header(h[i].name))
			rc = wheader(c, h[i].name, h[i].value);
	}
	if (rc)
		return rc;
	if (__atomic_load_n(&c->srv->stopping, __ATOMIC_RELAXED) || c->body_err || c->io_err)
		c->close_after = true;
	/* answering before the body: it may never come (Expect), or be too big to drain */
	if (!c->body_done &&
	    (waits_continue(c) || (!c->head.chunked && (uint64_t)c->body_left > OL_HTTP_DRAIN_MAX)))
		c->close_after = true;
	if (c->close_after)
		rc = wput(c, "Connection: close\r\n");
	else if (c->head.version_minor == 0)
		rc = wput(c, "Connection: keep-alive\r\n");
	return rc ? rc : wput(c, "\r\n");
}

int
ol_http_respond(struct ol_http_req *r, int status, const struct ol_http_header *h, size_t n,
		int64_t content_length)
{
	struct ol_http_conn *c = r->priv;
	if (c->resp_started)
		return -EALREADY;
	if (status < 200 || status > 599 || (n && !h))
		return -EINVAL;
	bool was_close = c->close_after;
	c->resp_nobody = !strcmp(c->head.method, "HEAD") || status == 204 || status == 304;
	c->resp_chunked = false;
	c->resp_left = -1;
	c->wlen = 0;
	int rc = build_head(c, status, h, n, content_length);
	if (rc) {
		c->wlen = 0;
		c->close_after = was_close;
		c->resp_chunked = false;
		c->resp_left = -1;
		return rc;
	}
	c->resp_started = true;
	return 0;
}

int
ol_http_write(struct ol_http_req *r, const void *buf, size_t len)
{
	struct ol_http_conn *c = r->priv;
	char pre[24];
	if (!c->resp_started || c->resp_finished)
		return -EINVAL;
	if (c->io_err)
		return c->io_err;
	if (c->resp_nobody || !len)
		return 0;
	if (c->resp_left >= 0) {
		if ((uint64_t)c->resp_left < len)
			return -EMSGSIZE;
		c->resp_left -= (int64_t)len;
	}
	size_t pl = 0;
	if (c->resp_chunked)
		pl = (size_t)snprintf(pre, sizeof(pre), "%zx\r\n", len);
	size_t sl = c->resp_chunked ? 2 : 0;
	if (c->wlen + pl + len + sl <= OL_HTTP_WBUF) {
		memcpy(c->wbuf + c->wlen, pre, pl);
		memcpy(c->wbuf + c->wlen + pl, buf, len);
		memcpy(c->wbuf + c->wlen + pl + len, "\r\n", sl);
		c->wlen += pl + len + sl;
		return 0;
	}
	struct iovec iov[3] = {{pre, pl}, {(void *)buf, len}, {"\r\n", sl}};
	return flush_with(c, iov, 3);
}

int
ol_http_finish(struct ol_http_req *r)
{
	struct ol_http_conn *c = r->priv;
	if (c->resp_finished)
		return c->io_err;
	if (!c->resp_started) {
		int rc = ol_http_respond(r, 500, NULL, 0, 0);
		if (rc)
			return rc;
	}
	if (c->resp_chunked && wput(c, "0\r\n\r\n")) {
		int rc = ol_http_conn_flush(c);
		if (rc || wput(c, "0\r\n\r\n"))
			return rc ? rc : -EMSGSIZE;
	}
	if (c->resp_left > 0)
		c->close_after = true; /* short body: the client must see the conn end */
	c->resp_finished = true;
	int rc = ol_http_conn_flush(c);
	if (!rc)
		drain_body(c);
	return rc;
}

int
ol_http_respond_simple(struct ol_http_req *r, int status, const char *content_type,
		       const void *body, size_t len)
{
	struct ol_http_header h = {"Content-Type", content_type};
	int rc = ol_http_respond(r, status, &h, content_type ? 1 : 0, (int64_t)len);
	if (!rc && len)
		rc = ol_http_write(r, body, len);
	int rc2 = ol_http_finish(r);
	return rc ? rc : rc2;
}

static const struct {
	int status;
	const char *message;
} err_info[] = {
    [OL_HTTP_ERR_BAD_REQUEST] = {400, "The request line or a header is malformed."},
    [OL_HTTP_ERR_HEADER_TOO_LARGE] = {431, "The request header section is too large."},
    [OL_HTTP_ERR_TIMEOUT] = {408, "The request head did not arrive within the timeout."},
    [OL_HTTP_ERR_BODY_TOO_LARGE] = {413, "The request body is larger than allowed."},
    [OL_HTTP_ERR_BUSY] = {503, "Too many connections or requests; reduce your request rate."},
    [OL_HTTP_ERR_VERSION] = {505, "Only HTTP/1.0 and HTTP/1.1 are supported."},
    [OL_HTTP_ERR_NOT_IMPLEMENTED] = {501, "This Transfer-Encoding is not implemented."},
    [OL_HTTP_ERR_TLS_REQUIRED] = {400, "This port speaks HTTPS only: use an https:// endpoint."},
};

size_t
ol_http_format_error(struct ol_http_server *s, enum ol_http_err kind, char *buf, size_t cap)
{
	char body[1024];
	struct ol_http_error e = {.kind = kind,
				  .status = err_info[kind].status,
				  .message = err_info[kind].message,
				  .body = body,
				  .body_cap = sizeof(body)};
	if (s->o.error_body)
		s->o.error_body(&e, s->o.error_arg);
	if (!s->o.error_body || e.body_len > sizeof(body) || e.status < 400 || e.status > 599) {
		e.status = err_info[kind].status;
		e.content_type = NULL;
		int n = snprintf(body, sizeof(body), "%d %s\n", e.status, ol_http_reason(e.status));
		e.body_len = (size_t)n;
	}
	int n = snprintf(buf, cap,
			 "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: OpenLake\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 e.status, ol_http_reason(e.status), date_now(),
			 e.content_type ? e.content_type : "text/plain", e.body_len);
	if (n < 0 || (size_t)n + e.body_len > cap)
		return 0;
	memcpy(buf + n, body, e.body_len);
	return (size_t)n + e.body_len;
}

int
ol_http_send_error(struct ol_http_conn *c, enum ol_http_err kind, int timeout_ms)
{
	char msg[2048];
	size_t n = ol_http_format_error(c->srv, kind, msg, sizeof(msg));
	c->close_after = true;
	c->resp_started = c->resp_finished = true;
	c->body_done = true;
	OL_HTTP_COUNT(c->srv, bad_requests, 1);
	if (!n)
		return -EMSGSIZE;
	OL_HTTP_COUNT(c->srv, bytes_out, n);
	struct iovec iov = {msg, n};
	return ol_http_conn_writev(c, &iov, 1, timeout_ms);
}
