/* http/server.c - listeners and acceptors, workers that serve connections with requests to read,
 * per-core pollers that hold idle keep-alive connections and close them at their idle timeout. */
#include "http/internal.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- connection ---- */

/* A worker waits this long on a quiet keep-alive connection before parking it in its poller
 * (a busy client's next request is usually here by then; an idle one then costs no thread). */
#define PARK_AFTER_MS  20
#define WORKER_IDLE_MS 10000 /* a worker without work this long leaves (above n_pollers) */

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

static void
conn_free(struct ol_http_conn *c)
{
	ol_http_head_fini(&c->head);
	if (c->rbuf)
		ol_bufpool_put(c->srv->pool, c->rbuf);
	conn_unlink_close(c);
	free(c);
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

/* Wait for the first bytes of the next request: at most PARK_AFTER_MS, then 2 (park it);
 * 1 when the client closed or the connection failed. */
static int
wait_next(struct ol_http_conn *c)
{
	ssize_t n = ol_io_recv_timeo(c->fd, c->rbuf, c->rcap, PARK_AFTER_MS, &c->cur_timeo);
	if (n == -ETIMEDOUT)
		return 2;
	if (n <= 0)
		return 1;
	OL_HTTP_COUNT(c->srv, bytes_in, (uint64_t)n);
	c->rlen = (size_t)n;
	return 0;
}

/* Read until a full head is parsed into c->head. 0 ok; 1 close quietly; -1 error sent;
 * 2 nothing came yet: park the connection. */
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
		if (!c->rlen) {
			if ((rc = wait_next(c)))
				return rc;
			deadline = ol_io_now_ms() + s->o.header_timeout_ms;
			continue;
		}
		uint64_t now = ol_io_now_ms();
		if (!deadline)
			deadline = now + s->o.header_timeout_ms;
		int tmo = now >= deadline ? 0 : (int)(deadline - now);
		ssize_t n = ol_http_conn_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen, tmo);
		if (n == -ETIMEDOUT) {
			ol_http_send_error(c, 408);
			return -1;
		}
		if (n <= 0)
			return 1;
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

static void
park_remove(struct ol_http_poller *p, struct ol_http_conn *c)
{
	if (c->park_prev)
		c->park_prev->park_next = c->park_next;
	else
		p->idle_head = c->park_next;
	if (c->park_next)
		c->park_next->park_prev = c->park_prev;
	else
		p->idle_tail = c->park_prev;
	c->park_prev = c->park_next = NULL;
	c->parked = false;
}

/* Hand an idle connection to its poller. 0, or -errno (the caller closes it). The FIFO entry
 * and the epoll arming happen under p->mu, so the poller can neither see the event nor expire
 * the connection before both are done. */
static int
park(struct ol_http_conn *c)
{
	struct ol_http_poller *p = c->poller;
	if (c->rbuf) /* empty now: idle connections hold no buffer */
		ol_bufpool_put(c->srv->pool, c->rbuf);
	c->rbuf = NULL;
	pthread_mutex_lock(&p->mu);
	bool was_empty = !p->idle_head;
	c->parked = true;
	c->park_prev = p->idle_tail;
	c->park_next = NULL;
	if (p->idle_tail)
		p->idle_tail->park_next = c;
	else
		p->idle_head = c;
	p->idle_tail = c;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c};
	int rc = epoll_ctl(p->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev)
		     ? -errno
		     : 0;
	if (rc)
		park_remove(p, c);
	else
		c->in_epoll = true;
	pthread_mutex_unlock(&p->mu);
	if (!rc && was_empty) { /* its deadline is the poller's next one: recompute the wait */
		uint64_t one = 1;
		if (write(p->wakefd, &one, sizeof(one)) < 0)
			ol_warn("http: poller wake: %s", strerror(errno));
	}
	if (rc) {
		c->rbuf = ol_bufpool_get(c->srv->pool);
		ol_warn("http %s: cannot park the connection: %s", c->peer, strerror(-rc));
	}
	return rc;
}

static void
conn_run(struct ol_http_conn *c)
{
	if (!c->rbuf)
		c->rbuf = ol_bufpool_get(c->srv->pool);
	int rc;
	while ((rc = read_head(c)) == 0) {
		if (!serve_one(c)) {
			rc = -1;
			break;
		}
		c->idle_since_ms = ol_io_now_ms();
	}
	if (rc == 2) {
		if (park(c) == 0)
			return;
		rc = 1;
	}
	if (rc < 0 && !c->io_err)
		linger_close(c);
	conn_free(c);
}

/* ---- workers ---- */

static void *
worker_main(void *arg)
{
	struct ol_http_server *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct ol_http_conn *c = s->runq_head;
		if (c) {
			s->runq_head = c->run_next;
			if (!s->runq_head)
				s->runq_tail = NULL;
			c->run_next = NULL;
			pthread_mutex_unlock(&s->mu);
			conn_run(c);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		if (s->workers_stop)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WORKER_IDLE_MS / 1000;
		s->n_idle_workers++;
		int w = pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
		s->n_idle_workers--;
		if (w == ETIMEDOUT && !s->runq_head && s->n_workers > s->n_pollers)
			break;
	}
	s->n_workers--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Queue a connection with bytes (or EOF) to read; wake or make a worker for it. */
static void
dispatch(struct ol_http_server *s, struct ol_http_conn *c)
{
	pthread_mutex_lock(&s->mu);
	c->run_next = NULL;
	if (s->runq_tail)
		s->runq_tail->run_next = c;
	else
		s->runq_head = c;
	s->runq_tail = c;
	bool spawn = s->n_idle_workers == 0 && s->n_workers < s->max_workers;
	if (spawn)
		s->n_workers++;
	else
		pthread_cond_signal(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
	if (!spawn)
		return;
	int rc = ol_io_thread_start_detached("ol-http-conn", worker_main, s);
	if (rc == 0)
		return;
	ol_warn("http: cannot start a worker thread: %s", strerror(-rc));
	pthread_mutex_lock(&s->mu);
	s->n_workers--;
	/* with no worker at all nobody would ever take it: close it here */
	struct ol_http_conn *orphan = NULL;
	if (s->n_workers == 0 && s->runq_head == c && s->runq_tail == c) {
		s->runq_head = s->runq_tail = NULL;
		orphan = c;
	}
	pthread_mutex_unlock(&s->mu);
	if (orphan)
		conn_free(orphan);
}

/* ---- pollers ---- */

static void *
poller_main(void *arg)
{
	struct ol_http_poller *p = arg;
	struct ol_http_server *s = p->s;
	struct epoll_event ev[64];
	for (;;) {
		int tmo = -1;
		pthread_mutex_lock(&p->mu);
		if (p->idle_head) {
			uint64_t now = ol_io_now_ms(),
				 due = p->idle_head->idle_since_ms + s->o.idle_timeout_ms;
			tmo = due > now ? (int)(due - now) : 0;
		}
		pthread_mutex_unlock(&p->mu);
		int n = epoll_wait(p->epfd, ev, 64, tmo);
		if (n < 0 && errno != EINTR) {
			ol_warn("http: epoll_wait: %s", strerror(errno));
			n = 0;
		}
		for (int i = 0; i < n; i++) {
			struct ol_http_conn *c = ev[i].data.ptr;
			if (!c) {
				uint64_t v;
				if (read(p->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					ol_warn("http: poller wake: %s", strerror(errno));
				continue;
			}
			pthread_mutex_lock(&p->mu);
			bool mine = c->parked;
			if (mine)
				park_remove(p, c);
			pthread_mutex_unlock(&p->mu);
			if (mine)
				dispatch(s, c);
		}
		if (__atomic_load_n(&s->pollers_stop, __ATOMIC_ACQUIRE))
			break;
		/* expired idle connections: closed here, no thread needed */
		struct ol_http_conn *dead = NULL;
		uint64_t now = ol_io_now_ms();
		pthread_mutex_lock(&p->mu);
		while (p->idle_head && now >= p->idle_head->idle_since_ms + s->o.idle_timeout_ms) {
			struct ol_http_conn *c = p->idle_head;
			park_remove(p, c);
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			c->run_next = dead;
			dead = c;
		}
		pthread_mutex_unlock(&p->mu);
		while (dead) {
			struct ol_http_conn *c = dead;
			dead = c->run_next;
			OL_HTTP_COUNT(s, timeouts, 1);
			conn_free(c);
		}
	}
	return NULL;
}

static int
start_pollers(struct ol_http_server *s)
{
	s->n_pollers = s->o.threads;
	s->pollers = ol_xcalloc(s->n_pollers, sizeof(*s->pollers));
	for (unsigned i = 0; i < s->n_pollers; i++) {
		s->pollers[i].s = s;
		s->pollers[i].epfd = s->pollers[i].wakefd = -1;
		pthread_mutex_init(&s->pollers[i].mu, NULL);
	}
	for (unsigned i = 0; i < s->n_pollers; i++) {
		struct ol_http_poller *p = &s->pollers[i];
		p->epfd = epoll_create1(EPOLL_CLOEXEC);
		p->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (p->epfd < 0 || p->wakefd < 0)
			return -errno;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wakefd, &ev))
			return -errno;
		char name[16];
		snprintf(name, sizeof(name), "ol-http-poll%u", i);
		int rc = ol_io_thread_start(&p->th, name, poller_main, p);
		if (rc)
			return rc;
		p->started = true;
	}
	return 0;
}

static void
stop_pollers(struct ol_http_server *s)
{
	__atomic_store_n(&s->pollers_stop, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; s->pollers && i < s->n_pollers; i++) {
		struct ol_http_poller *p = &s->pollers[i];
		uint64_t one = 1;
		if (p->started) {
			if (write(p->wakefd, &one, sizeof(one)) < 0)
				ol_warn("http: poller wake: %s", strerror(errno));
			pthread_join(p->th, NULL);
		}
		if (p->epfd >= 0)
			close(p->epfd);
		if (p->wakefd >= 0)
			close(p->wakefd);
		pthread_mutex_destroy(&p->mu);
	}
	free(s->pollers);
	s->pollers = NULL;
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
	c->idle_since_ms = ol_io_now_ms();
	ol_io_addr_str(sa, sl, c->peer, sizeof(c->peer));
	c->rcap = ol_bufpool_buf_size(s->pool);
	ol_http_head_init(&c->head);
	ol_io_set_nodelay(fd);
	pthread_mutex_lock(&s->mu);
	c->poller = &s->pollers[s->next_poller++ % s->n_pollers];
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	OL_HTTP_COUNT(s, conns_open, 1);
	OL_HTTP_COUNT(s, conns_total, 1);
	pthread_mutex_unlock(&s->mu);
	/* to the poller until its first bytes come: a burst of connections costs no threads */
	if (park(c))
		conn_free(c);
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
	s->workers_stop = true;
	pthread_cond_broadcast(&s->work_cv);
	while (s->n_workers)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	stop_pollers(s);
	for (unsigned i = 0; i < s->n_listen; i++)
		close(s->lfds[i]);
	for (int i = 0; i < 2; i++)
		if (s->stop_pipe[i] >= 0)
			close(s->stop_pipe[i]);
	ol_bufpool_free(s->pool);
	pthread_cond_destroy(&s->work_cv);
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
	pthread_cond_init(&s->work_cv, NULL);
	s->max_workers = s->o.max_conns;
	s->lfds = ol_xcalloc(s->o.threads, sizeof(int));
	s->acceptors = ol_xcalloc(s->o.threads, sizeof(pthread_t));
	size_t bufsz = s->o.max_header_bytes < 65536 ? 65536 : s->o.max_header_bytes;
	s->pool = ol_bufpool_new(bufsz, 256);
	int rc = open_listeners(s);
	if (!rc && pipe2(s->stop_pipe, O_CLOEXEC))
		rc = -errno;
	if (!rc)
		rc = start_pollers(s);
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
