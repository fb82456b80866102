/* http/server.c - listeners, acceptor threads, one thread per connection, request loop. */
#include "http/internal.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- connection ---- */

static void
conn_unlink_close(struct ol_http_conn *c)
{
	struct ol_http_server *s = c->srv;
	pthread_mutex_lock(&s->mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd); /* under the lock: stop() never shuts down a reused fd */
	s->n_conns--;
	__atomic_fetch_sub(&s->st.conns_open, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Close politely: half-close, then swallow what the client still sends for a moment, so the
 * kernel does not answer unread bytes with a RST that destroys our last response. */
static void
linger_close(struct ol_http_conn *c)
{
	uint64_t end = ol_io_now_ms() + 500;
	size_t total = 0;
	shutdown(c->fd, SHUT_WR);
	while (total < (1u << 20)) {
		uint64_t now = ol_io_now_ms();
		if (now >= end)
			break;
		ssize_t n = ol_http_conn_recv(c, c->rbuf, c->rcap, (int)(end - now));
		if (n <= 0)
			break;
		total += (size_t)n;
	}
}

/* Read until a full head is parsed into c->head. 0 ok; 1 close quietly; -1 error sent. */
static int
read_head(struct ol_http_conn *c)
{
	struct ol_http_server *s = c->srv;
	uint64_t deadline = 0;
	for (;;) {
		int rc = ol_http_parse_request(c->rbuf + c->rpos, c->rlen - c->rpos,
					       s->o.max_header_bytes, &c->head);
		if (rc > 0) {
			c->rpos += (size_t)rc;
			return 0;
		}
		if (rc < 0) {
			ol_debug("http %s: bad request head (%d), answering %d", c->peer, rc,
				 c->head.err_status);
			ol_http_send_error(c, c->head.err_status ? c->head.err_status : 400);
			return -1;
		}
		if (c->rpos) {
			memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
			c->rlen -= c->rpos;
			c->rpos = 0;
		}
		int tmo = (int)s->o.idle_timeout_ms;
		if (c->rlen) {
			uint64_t now = ol_io_now_ms();
			if (!deadline)
				deadline = now + s->o.header_timeout_ms;
			tmo = now >= deadline ? 0 : (int)(deadline - now);
		}
		ssize_t n = ol_http_conn_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen, tmo);
		if (n == -ETIMEDOUT && c->rlen) {
			ol_http_send_error(c, 408);
			return -1;
		}
		if (n <= 0)
			return 1;
		if (!c->rlen)
			deadline = ol_io_now_ms() + s->o.header_timeout_ms;
		c->rlen += (size_t)n;
	}
}

/* Serve one parsed request. Returns true to keep the connection. */
static bool
serve_one(struct ol_http_conn *c)
{
	struct ol_http_server *s = c->srv;
	ol_http_conn_begin(c);
	if (s->o.max_body_bytes && c->head.content_length > 0 &&
	    (uint64_t)c->head.content_length > s->o.max_body_bytes) {
		ol_http_send_error(c, 413);
		return false;
	}
	OL_HTTP_COUNT(s, requests, 1);
	s->o.handler(&c->req, s->o.arg);
	if (!c->resp_started)
		ol_http_respond(&c->req, 500, NULL, 0, 0);
	ol_http_finish(&c->req);
	return !c->close_after && !c->io_err && !__atomic_load_n(&s->stopping, __ATOMIC_RELAXED);
}

static void *
conn_main(void *arg)
{
	struct ol_http_conn *c = arg;
	int rc;
	while ((rc = read_head(c)) == 0) {
		if (!serve_one(c)) {
			rc = -1;
			break;
		}
	}
	if (rc < 0 && !c->io_err)
		linger_close(c);
	ol_http_head_fini(&c->head);
	ol_bufpool_put(c->srv->pool, c->rbuf);
	conn_unlink_close(c);
	free(c);
	return NULL;
}

/* ---- acceptors ---- */

static void
reject_busy(int fd)
{
	static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nServer: OpenLake\r\n"
				  "Content-Length: 0\r\nConnection: close\r\n\r\n";
	ssize_t n = send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)n;
	close(fd);
}

static void
start_conn(struct ol_http_server *s, int fd, const struct sockaddr *sa, socklen_t sl)
{
	struct ol_http_conn *c = ol_xcalloc(1, sizeof(*c));
	c->srv = s;
	c->fd = fd;
	c->cur_timeo = -2;
	ol_io_addr_str(sa, sl, c->peer, sizeof(c->peer));
	c->rbuf = ol_bufpool_get(s->pool);
	c->rcap = ol_bufpool_buf_size(s->pool);
	ol_http_head_init(&c->head);
	ol_io_set_nodelay(fd);
	pthread_mutex_lock(&s->mu);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	OL_HTTP_COUNT(s, conns_open, 1);
	OL_HTTP_COUNT(s, conns_total, 1);
	pthread_mutex_unlock(&s->mu);
	int rc = ol_io_thread_start_detached("ol-http-conn", conn_main, c);
	if (rc) {
		ol_warn("http: cannot start a connection thread: %s", strerror(-rc));
		ol_bufpool_put(s->pool, c->rbuf);
		conn_unlink_close(c);
		free(c);
	}
}

struct acceptor_arg {
	struct ol_http_server *s;
	int lfd;
};

static void *
acceptor_main(void *arg)
{
	struct acceptor_arg a = *(struct acceptor_arg *)arg;
	struct ol_http_server *s = a.s;
	free(arg);
	for (;;) {
		struct pollfd p[2] = {{.fd = a.lfd, .events = POLLIN},
				      {.fd = s->stop_pipe[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!p[0].revents)
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(a.lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
				ol_warn("http: accept: %s", strerror(errno));
				usleep(10000);
			}
			continue;
		}
		pthread_mutex_lock(&s->mu);
		bool busy = s->n_conns >= s->o.max_conns;
		pthread_mutex_unlock(&s->mu);
		if (busy) {
			OL_HTTP_COUNT(s, conns_rejected, 1);
			reject_busy(fd);
		} else
			start_conn(s, fd, (struct sockaddr *)&ss, sl);
	}
	return NULL;
}

/* ---- lifecycle ---- */

static void
apply_defaults(struct ol_http_server_opts *o, const struct ol_http_server_opts *in)
{
	memset(o, 0, sizeof(*o));
	memcpy(o, in, in->size < sizeof(*o) ? in->size : sizeof(*o));
	o->size = sizeof(*o);
	if (!o->threads)
		o->threads = ol_io_ncpu();
	if (o->threads > 64)
		o->threads = 64;
	if (!o->idle_timeout_ms)
		o->idle_timeout_ms = 60000;
	if (!o->header_timeout_ms)
		o->header_timeout_ms = 30000;
	if (!o->body_timeout_ms)
		o->body_timeout_ms = 60000;
	if (!o->max_header_bytes)
		o->max_header_bytes = 64 * 1024;
	if (!o->max_conns)
		o->max_conns = 4096;
}

/* SO_REUSEPORT would let a second server of the same user share our port silently: check
 * first that no one listens there (a plain bind, no listen, fails with -EADDRINUSE). */
static int
probe_port_free(const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
	if (a->sin_port == 0) /* same offset in sockaddr_in6 */
		return 0;
	int one = 1, rc = 0, fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, sa, len))
		rc = -errno;
	close(fd);
	return rc;
}

/* Bind the first listener (maybe port 0), then the others on the port it got. */
static int
open_listeners(struct ol_http_server *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = ol_io_parse_addr(s->o.addr, &ss, &len);
	if (rc)
		return rc;
	if ((rc = probe_port_free((struct sockaddr *)&ss, len)))
		return rc;
	for (unsigned i = 0; i < s->o.threads; i++) {
		int fd = ol_io_listen_sa((struct sockaddr *)&ss, len, true, 1024);
		if (fd < 0)
			return fd;
		s->lfds[s->n_listen++] = fd;
		/* non-blocking: a connection reset between poll and accept must not block stop */
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return -errno;
		if (i == 0) {
			s->port = ol_io_sock_port(fd);
			uint16_t p = htons((uint16_t)s->port);
			if (ss.ss_family == AF_INET)
				((struct sockaddr_in *)&ss)->sin_port = p;
			else
				((struct sockaddr_in6 *)&ss)->sin6_port = p;
		}
	}
	return 0;
}

static int
start_acceptors(struct ol_http_server *s)
{
	for (unsigned i = 0; i < s->n_listen; i++) {
		struct acceptor_arg *a = ol_xmalloc(sizeof(*a));
		a->s = s;
		a->lfd = s->lfds[i];
		char name[16];
		snprintf(name, sizeof(name), "ol-http-acc%u", i);
		int rc = ol_io_thread_start(&s->acceptors[i], name, acceptor_main, a);
		if (rc) {
			free(a);
			return rc;
		}
		s->n_acceptors_started = i + 1;
	}
	return 0;
}

static void
server_free(struct ol_http_server *s)
{
	if (s->stop_pipe[1] >= 0 && write(s->stop_pipe[1], "x", 1) < 0)
		ol_warn("http: stop pipe: %s", strerror(errno));
	for (unsigned i = 0; i < s->n_acceptors_started; i++)
		pthread_join(s->acceptors[i], NULL);
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->stopping, true, __ATOMIC_RELAXED);
	for (struct ol_http_conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	while (s->n_conns)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->n_listen; i++)
		close(s->lfds[i]);
	for (int i = 0; i < 2; i++)
		if (s->stop_pipe[i] >= 0)
			close(s->stop_pipe[i]);
	ol_bufpool_free(s->pool);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->lfds);
	free(s->acceptors);
	free(s);
}

int
ol_http_server_start(const struct ol_http_server_opts *o, struct ol_http_server **out)
{
	if (!o || !out || o->size < offsetof(struct ol_http_server_opts, max_header_bytes) ||
	    !o->addr || !o->handler)
		return -EINVAL;
	struct ol_http_server *s = ol_xcalloc(1, sizeof(*s));
	apply_defaults(&s->o, o);
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->lfds = ol_xcalloc(s->o.threads, sizeof(int));
	s->acceptors = ol_xcalloc(s->o.threads, sizeof(pthread_t));
	size_t bufsz = s->o.max_header_bytes < 65536 ? 65536 : s->o.max_header_bytes;
	s->pool = ol_bufpool_new(bufsz, 256);
	int rc = open_listeners(s);
	if (!rc && pipe2(s->stop_pipe, O_CLOEXEC))
		rc = -errno;
	if (!rc)
		rc = start_acceptors(s);
	if (rc) {
		server_free(s);
		return rc;
	}
	ol_info("http: listening on %s (port %u, %u acceptors)", s->o.addr, s->port, s->n_listen);
	*out = s;
	return 0;
}

unsigned
ol_http_server_port(const struct ol_http_server *s)
{
	return s->port;
}

void
ol_http_server_stop(struct ol_http_server *s)
{
	if (s)
		server_free(s);
}

void
ol_http_server_stats(const struct ol_http_server *s, struct ol_http_stats *out)
{
	const uint64_t *src = (const uint64_t *)&s->st;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
