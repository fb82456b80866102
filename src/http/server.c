/* http/server.c - listeners and acceptors; per-core pollers: an epoll set of the connections no
 * thread serves, read by threads that serve a connection whose request head came on the
 * spot and park it again after its response; idle keep-alive connections closed at their
 * idle timeout. */
#include "http/internal.h"

#include "base/log.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- connection ---- */

/* A worker waits this long on a quiet keep-alive connection before parking it in its poller
 * (a busy client's next request is usually here by then; an idle one then costs no thread).
 * The same holds for a head that stops arriving half-way: the poller gathers the rest. */
#define PARK_AFTER_MS  20
#define WORKER_IDLE_MS 10000 /* a worker or extra poller thread without work this long leaves */
#define WAIT_MAX_MS    1000  /* a poller thread looks at the deadlines at least this often */
#define MON_TICK_US    1000  /* how often the watch looks for pollers whose threads are held */
#define SURPLUS_MS     5000  /* an extra poller thread that was a spare this long leaves */
#define LINGER_MS      1000  /* a refused connection: time to read what the client still sends */
#define HEAD_BUF_MIN   2048  /* first head buffer of a connection the poller reads */
#define POLLER_READS   4     /* reads per readiness event before others get their turn */

enum { LOG_CONNS, LOG_PER_ADDR, LOG_INFLIGHT, LOG_TLS, LOG_HEAD_MEM, LOG_PLAIN };

/* One warning a second per kind of refusal, with the count of those not logged. */
static void
refuse_log(struct ol_http_server *s, int k, const char *peer, const char *what)
{
	uint64_t now = ol_io_now_ms(), next = __atomic_load_n(&s->log_next_ms[k], __ATOMIC_RELAXED);
	if (now < next || !__atomic_compare_exchange_n(&s->log_next_ms[k], &next, now + 1000, false,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(&s->log_dropped[k], 1, __ATOMIC_RELAXED);
		return;
	}
	uint64_t d = __atomic_exchange_n(&s->log_dropped[k], 0, __ATOMIC_RELAXED);
	ol_warn("http %s: %s (%llu more like it not logged since the last such line)", peer, what,
		(unsigned long long)d);
}

/* Requests in flight: taken while a request is served (from when a complete head goes to a
 * worker until its response is done). Atomics, no lock: c->pe cannot go away while c counts a
 * connection on it. */
static void
inflight_take(struct ol_http_conn *c)
{
	if (c->inflight)
		return;
	c->inflight = true;
	__atomic_fetch_add(&c->srv->st.inflight, 1, __ATOMIC_RELAXED);
	if (c->pe)
		__atomic_fetch_add(&c->pe->inflight, 1, __ATOMIC_RELAXED);
}

static void
inflight_put(struct ol_http_conn *c)
{
	if (!c->inflight)
		return;
	c->inflight = false;
	__atomic_fetch_sub(&c->srv->st.inflight, 1, __ATOMIC_RELAXED);
	if (c->pe)
		__atomic_fetch_sub(&c->pe->inflight, 1, __ATOMIC_RELAXED);
}

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
	inflight_put(c);
	if (c->pe) {
		c->pe->conns--;
		ol_http_peers_put(&s->peers, c->pe);
	}
	close(c->fd); /* under the lock: stop() never shuts down a reused fd */
	s->n_conns--;
	__atomic_fetch_sub(&s->st.conns_open, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Heap head buffers of all connections count against max_head_memory. */
static bool
head_mem_take(struct ol_http_server *s, size_t n, bool force)
{
	uint64_t now = __atomic_add_fetch(&s->head_mem, n, __ATOMIC_RELAXED);
	if (force || now <= s->o.max_head_memory)
		return true;
	__atomic_fetch_sub(&s->head_mem, n, __ATOMIC_RELAXED);
	return false;
}

static void
buf_release(struct ol_http_conn *c)
{
	if (c->rbuf && c->rheap)
		__atomic_fetch_sub(&c->srv->head_mem, c->rcap, __ATOMIC_RELAXED);
	if (c->rbuf && c->rheap)
		free(c->rbuf);
	else if (c->rbuf)
		ol_bufpool_put(c->srv->pool, c->rbuf);
	c->rbuf = c->wbuf = NULL;
	c->rheap = false;
	c->rcap = c->rpos = c->rlen = 0;
}

static void
conn_free(struct ol_http_conn *c)
{
	ol_http_head_fini(&c->head);
	buf_release(c);
	ol_http_tls_conn_free(c->ssl, c->tls_up && !c->io_err);
	c->ssl = NULL;
	conn_unlink_close(c);
	free(c);
}

/* A worker's buffers: a pool buffer (read part + wbuf), keeping unread bytes. */
static void
buf_for_worker(struct ol_http_conn *c)
{
	struct ol_http_server *s = c->srv;
	if (c->rbuf && !c->rheap)
		return;
	char *b = ol_bufpool_get(s->pool);
	size_t pend = c->rlen - c->rpos;
	if (pend)
		memcpy(b, c->rbuf + c->rpos, pend);
	buf_release(c);
	c->rbuf = b;
	c->rcap = ol_bufpool_buf_size(s->pool) - OL_HTTP_WBUF;
	c->wbuf = b + c->rcap;
	c->rlen = pend;
}

/* A parked connection's buffers: none when idle, a heap copy of a partial head else. */
static void
buf_for_park(struct ol_http_conn *c)
{
	size_t pend = c->rlen - c->rpos;
	if (!pend) {
		buf_release(c);
		ol_http_head_fini(&c->head); /* idle: no parser memory either */
		ol_http_head_init(&c->head);
		return;
	}
	if (c->rheap)
		return;
	size_t cap = pend < HEAD_BUF_MIN ? HEAD_BUF_MIN : pend;
	char *h = ol_xmalloc(cap);
	head_mem_take(c->srv, cap, true);
	memcpy(h, c->rbuf + c->rpos, pend);
	buf_release(c);
	c->rbuf = h;
	c->rheap = true;
	c->rcap = cap;
	c->rlen = pend;
}

/* Room to read more of a head in the poller: the heap buffer grows up to the head cap.
 * -ENOMEM when that would pass max_head_memory. */
static ssize_t
buf_room(struct ol_http_conn *c)
{
	size_t max = c->srv->o.max_header_bytes;
	if (!c->rbuf) {
		size_t cap = HEAD_BUF_MIN < max ? HEAD_BUF_MIN : max;
		if (!head_mem_take(c->srv, cap, false))
			return -ENOMEM;
		c->rcap = cap;
		c->rbuf = ol_xmalloc(c->rcap);
		c->rheap = true;
	}
	if (c->rpos) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	if (c->rheap && c->rlen == c->rcap && c->rcap < max) {
		size_t cap = c->rcap * 2 < max ? c->rcap * 2 : max;
		if (!head_mem_take(c->srv, cap - c->rcap, false))
			return -ENOMEM;
		c->rcap = cap;
		c->rbuf = ol_xrealloc(c->rbuf, c->rcap);
	}
	return (ssize_t)(c->rcap - c->rlen);
}

/* A read that never counts a timeout (waiting for a next request is no error). */
static ssize_t
raw_recv(struct ol_http_conn *c, void *buf, size_t len, int timeout_ms)
{
	if (c->ssl)
		return ol_http_tls_read(c->ssl, c->fd, buf, len, timeout_ms);
	if (timeout_ms == 0) {
		ssize_t n = recv(c->fd, buf, len, MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		return n;
	}
	return ol_io_recv_timeo(c->fd, buf, len, timeout_ms, &c->cur_timeo);
}

/* Close politely: half-close, then swallow what the client still sends for a moment, so the
 * kernel does not answer unread bytes with a RST that destroys our last response. */
static void
linger_close(struct ol_http_conn *c)
{
	uint64_t end = ol_io_now_ms() + 500;
	size_t total = 0;
	if (c->ssl && c->tls_up)
		SSL_shutdown(c->ssl);
	shutdown(c->fd, SHUT_WR);
	while (total < (1u << 20)) {
		uint64_t now = ol_io_now_ms();
		if (now >= end)
			break;
		ssize_t n = raw_recv(c, c->rbuf, c->rcap, (int)(end - now));
		if (n <= 0)
			break;
		total += (size_t)n;
	}
}

/* Wait for the first bytes of the next request (0; 1 when the client closed or the connection
 * failed). A worker waits at most PARK_AFTER_MS, then 2 (park it). A poller's thread that
 * served a request without a body (c->quick) parks it at once: its poller sees the next
 * bytes, and a thread waiting here would cost a context switch per request; bytes that a TLS
 * connection's library holds already are invisible to epoll, so for TLS one non-blocking
 * read first. */
static int
wait_next(struct ol_http_conn *c)
{
	if (c->quick && !c->ssl)
		return 2;
	ssize_t n = raw_recv(c, c->rbuf, c->rcap, c->quick ? 0 : PARK_AFTER_MS);
	if (n == -ETIMEDOUT)
		return 2;
	if (n <= 0)
		return 1;
	OL_HTTP_COUNT(c->srv, bytes_in, (uint64_t)n);
	c->rlen = (size_t)n;
	c->head_since_ms = ol_io_now_ms();
	return 0;
}

static enum ol_http_err
err_kind(int status)
{
	switch (status) {
	case 431:
		return OL_HTTP_ERR_HEADER_TOO_LARGE;
	case 501:
		return OL_HTTP_ERR_NOT_IMPLEMENTED;
	case 505:
		return OL_HTTP_ERR_VERSION;
	default:
		return OL_HTTP_ERR_BAD_REQUEST;
	}
}

/* Read until a full head is parsed into c->head. 0 ok; 1 close quietly; -1 error sent;
 * 2 nothing came yet: park the connection as idle; 3 part of a head came and the rest is
 * slow: park it, the poller gathers the rest (no worker waits on a slow head). */
static int
read_head(struct ol_http_conn *c)
{
	struct ol_http_server *s = c->srv;
	for (;;) {
		int rc = ol_http_parse_request(c->rbuf + c->rpos, c->rlen - c->rpos,
					       s->o.max_header_bytes, &c->head);
		if (rc > 0) {
			c->rpos += (size_t)rc;
			c->head_since_ms = 0;
			return 0;
		}
		if (rc < 0) {
			ol_debug("http %s: bad request head (%d), answering %d", c->peer, rc,
				 c->head.err_status);
			ol_http_send_error(c, err_kind(c->head.err_status),
					   (int)s->o.body_timeout_ms);
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
			continue;
		}
		if (!c->head_since_ms)
			c->head_since_ms = ol_io_now_ms();
		/* only what is there now: a head that trickles in holds no worker */
		ssize_t n = raw_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n == -ETIMEDOUT)
			return 3;
		if (n <= 0)
			return 1;
		OL_HTTP_COUNT(s, bytes_in, (uint64_t)n);
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
		ol_http_send_error(c, OL_HTTP_ERR_BODY_TOO_LARGE, (int)s->o.body_timeout_ms);
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
	struct ol_http_plist *l = &p->lists[c->plist];
	if (c->park_prev)
		c->park_prev->park_next = c->park_next;
	else
		l->head = c->park_next;
	if (c->park_next)
		c->park_next->park_prev = c->park_prev;
	else
		l->tail = c->park_prev;
	c->park_prev = c->park_next = NULL;
	c->parked = false;
	c->plist = PARK_NONE;
}

/* When a parked connection's time is up. */
static uint64_t
park_due(const struct ol_http_server *s, const struct ol_http_conn *c)
{
	switch (c->plist) {
	case PARK_HEAD:
		return c->head_since_ms + s->o.header_timeout_ms;
	case PARK_LINGER:
		return c->idle_since_ms + LINGER_MS;
	default:
		return c->idle_since_ms + s->o.idle_timeout_ms;
	}
}

/* Hand a connection no thread serves to its poller, on list (PARK_*), waiting for events
 * (EPOLLIN or EPOLLOUT). 0, or -errno (the caller closes it). The list entry and the epoll
 * arming happen under p->mu, so the poller can neither see the event nor expire the
 * connection before both are done. */
static int
park(struct ol_http_conn *c, int list, uint32_t events, bool from_poller)
{
	struct ol_http_poller *p = c->poller;
	struct ol_http_plist *l = &p->lists[list];
	pthread_mutex_lock(&p->mu);
	bool was_empty = !l->head;
	c->parked = true;
	c->plist = list;
	c->park_prev = l->tail;
	c->park_next = NULL;
	if (l->tail)
		l->tail->park_next = c;
	else
		l->head = c;
	l->tail = c;
	struct epoll_event ev = {.events = events | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c};
	int rc = epoll_ctl(p->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev)
		     ? -errno
		     : 0;
	if (rc)
		park_remove(p, c);
	else
		c->in_epoll = true;
	pthread_mutex_unlock(&p->mu);
	if (!rc && was_empty && !from_poller) { /* maybe its next deadline: recompute the wait */
		uint64_t one = 1;
		if (write(p->wakefd, &one, sizeof(one)) < 0)
			ol_warn("http: poller wake: %s", strerror(errno));
	}
	if (rc)
		ol_warn("http %s: cannot park the connection: %s", c->peer, strerror(-rc));
	return rc;
}

/* Refuse with an error (a 503; one non-blocking write), then half-close and let the poller read
 * what the client still sends for a moment before it closes. */
static void
refuse_linger(struct ol_http_conn *c, enum ol_http_err kind, bool from_poller)
{
	if (!c->ssl || c->tls_up)
		ol_http_send_error(c, kind, 0);
	if (c->ssl && c->tls_up)
		SSL_shutdown(c->ssl);
	shutdown(c->fd, SHUT_WR);
	c->idle_since_ms = ol_io_now_ms();
	buf_release(c);
	if (park(c, PARK_LINGER, EPOLLIN, from_poller))
		conn_free(c);
}

static void
conn_run(struct ol_http_conn *c)
{
	buf_for_worker(c);
	int rc;
	while ((rc = read_head(c)) == 0) {
		inflight_take(c); /* the first one was taken by dispatch() or serve_here() */
		bool keep = serve_one(c);
		inflight_put(c);
		if (!keep) {
			rc = -1;
			break;
		}
		c->idle_since_ms = ol_io_now_ms();
	}
	if (rc < 0 && !c->io_err)
		linger_close(c);
	inflight_put(c);
	if (rc == 2 || rc == 3) {
		buf_for_park(c);
		if (park(c, rc == 2 ? PARK_IDLE : PARK_HEAD, EPOLLIN, c->quick) == 0)
			return;
	}
	conn_free(c);
}

/* Over its address's in-flight cap, or with max_inflight served and as many waiting: the
 * request is refused with a 503 (true; the connection is then the poller's). */
static bool
over_inflight(struct ol_http_server *s, struct ol_http_conn *c)
{
	if (!(c->pe &&
	      __atomic_load_n(&c->pe->inflight, __ATOMIC_RELAXED) >= s->o.max_inflight_per_addr) &&
	    __atomic_load_n(&s->st.inflight, __ATOMIC_RELAXED) < 2 * s->o.max_inflight)
		return false;
	OL_HTTP_COUNT(s, inflight_rejected, 1);
	refuse_log(s, LOG_INFLIGHT, c->peer, "request refused (503): too many requests in flight");
	refuse_linger(c, OL_HTTP_ERR_BUSY, true);
	return true;
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

/* Queue a connection with a complete head (or a bad one, or EOF) for a worker; wake or make
 * one. Over its address's in-flight cap, or with max_inflight served and as many queued, it
 * is refused with a 503 instead. */
static void
dispatch(struct ol_http_server *s, struct ol_http_conn *c)
{
	if (over_inflight(s, c))
		return;
	c->quick = false;
	pthread_mutex_lock(&s->mu);
	inflight_take(c);
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

enum { STEP_MORE, STEP_READY, STEP_CLOSE, STEP_BUSY, STEP_PLAIN };

/* Before a TLS handshake starts, a look at the first byte: a TLS client starts with a
 * handshake record (0x16), plain HTTP with a method in capitals (STEP_PLAIN); a client that
 * closes without a byte (a port probe) is no handshake failure (STEP_CLOSE). STEP_MORE: go on
 * with the handshake. */
static int
tls_first_byte(struct ol_http_conn *c)
{
	char b;
	if (!SSL_in_before(c->ssl))
		return STEP_MORE;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return STEP_CLOSE;
	return n == 1 && b >= 'A' && b <= 'Z' ? STEP_PLAIN : STEP_MORE;
}

/* The poller's part of a connection: TLS handshake steps, then non-blocking reads of the head
 * until it is complete (or bad: the worker answers). *events: what to wait for on MORE. */
static int
head_step(struct ol_http_conn *c, uint32_t *events)
{
	struct ol_http_server *s = c->srv;
	*events = EPOLLIN;
	if (c->ssl && !c->tls_up) {
		int first = tls_first_byte(c);
		if (first != STEP_MORE)
			return first;
		int rc = ol_http_tls_handshake(c->ssl);
		if (rc < 0) {
			OL_HTTP_COUNT(s, tls_handshake_failures, 1);
			refuse_log(s, LOG_TLS, c->peer, "TLS handshake failed");
			return STEP_CLOSE;
		}
		if (rc > 0) {
			*events = rc == POLLOUT ? EPOLLOUT : EPOLLIN;
			return STEP_MORE;
		}
		c->tls_up = true;
		c->head_since_ms = 0; /* handshake done: idle until a head starts */
	}
	for (int i = 0; i < POLLER_READS; i++) {
		ssize_t room = buf_room(c);
		if (room < 0)
			return STEP_BUSY;
		if (!room)
			return STEP_READY;
		ssize_t n = raw_recv(c, c->rbuf + c->rlen, (size_t)room, 0);
		if (n == -ETIMEDOUT)
			return STEP_MORE;
		if (n <= 0)
			return STEP_CLOSE;
		OL_HTTP_COUNT(s, bytes_in, (uint64_t)n);
		if (!c->head_since_ms)
			c->head_since_ms = ol_io_now_ms();
		c->rlen += (size_t)n;
		if (ol_http_parse_request(c->rbuf, c->rlen, s->o.max_header_bytes, &c->head))
			return STEP_READY;
	}
	return STEP_MORE;
}

/* Bytes a refused connection still sends: read and dropped until EOF. */
static int
linger_step(struct ol_http_conn *c)
{
	char tmp[4096];
	for (int i = 0; i < POLLER_READS; i++) {
		ssize_t n = c->ssl ? ol_http_tls_read(c->ssl, c->fd, tmp, sizeof(tmp), 0)
				   : recv(c->fd, tmp, sizeof(tmp), MSG_DONTWAIT);
		if (!c->ssl && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return STEP_MORE;
		if (n == -ETIMEDOUT)
			return STEP_MORE;
		if (n <= 0)
			return STEP_CLOSE;
	}
	return STEP_MORE;
}

/* The watch sleeps while nothing is in flight: wake it. */
static void
mon_wake(struct ol_http_server *s)
{
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->mon_idle, false, __ATOMIC_RELAXED);
	pthread_cond_signal(&s->mon_cv);
	pthread_mutex_unlock(&s->mu);
}

/* A request without a body (or a bad head, or EOF) is served on this thread, then the
 * connection parked again: such requests rarely block, and serving them where the head was
 * read saves the hand-over to a worker and the worker's wait on the connection (a context
 * switch each). When they do block (a cold read, a forward, a slow client), mon_main gives
 * the poller another thread. Over the in-flight limits: a 503 (over_inflight). */
static void
serve_here(struct ol_http_poller *p, struct ol_http_conn *c)
{
	struct ol_http_server *s = p->s;
	if (over_inflight(s, c))
		return;
	c->quick = true;
	inflight_take(c);
	/* seq_cst, as mon_main's store of mon_idle and look at quick_inflight: one of the two
	 * sees the other's write, so the watch never sleeps through a request served here */
	__atomic_fetch_add(&s->quick_inflight, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->mon_idle, __ATOMIC_SEQ_CST))
		mon_wake(s);
	conn_run(c);
	__atomic_fetch_sub(&s->quick_inflight, 1, __ATOMIC_RELAXED);
}

static void
poller_event(struct ol_http_poller *p, struct ol_http_conn *c)
{
	pthread_mutex_lock(&p->mu);
	bool mine = c->parked;
	int list = c->plist;
	if (mine)
		park_remove(p, c);
	pthread_mutex_unlock(&p->mu);
	if (!mine)
		return;
	uint32_t events = EPOLLIN;
	int rc = list == PARK_LINGER ? linger_step(c) : head_step(c, &events);
	if (rc == STEP_READY) {
		/* a request with a body reads it and mostly waits (the body, a commit's sync): on
		 * a worker, as before; one without is served here */
		if (c->head.content_length > 0 || c->head.chunked)
			dispatch(p->s, c);
		else
			serve_here(p, c);
		return;
	}
	if (rc == STEP_PLAIN) { /* answer in plain text that this port speaks TLS */
		OL_HTTP_COUNT(p->s, tls_handshake_failures, 1);
		refuse_log(p->s, LOG_PLAIN, c->peer, "plain HTTP on the TLS port: answered 400");
		ol_http_tls_conn_free(c->ssl, false);
		c->ssl = NULL;
		refuse_linger(c, OL_HTTP_ERR_TLS_REQUIRED, true);
		return;
	}
	if (rc == STEP_BUSY) {
		OL_HTTP_COUNT(p->s, head_mem_rejected, 1);
		refuse_log(p->s, LOG_HEAD_MEM, c->peer,
			   "request refused (503): request heads in progress use max_head_memory");
		refuse_linger(c, OL_HTTP_ERR_BUSY, true);
		return;
	}
	if (rc == STEP_MORE) {
		if (list != PARK_LINGER)
			list = c->head_since_ms ? PARK_HEAD : PARK_IDLE;
		if (park(c, list, events, true) == 0)
			return;
	}
	conn_free(c);
}

/* Close the connections whose time is up: idle ones quietly, a head that did not finish in
 * time with a 408 (one non-blocking write), a refused one after its linger. */
static void
poller_expire(struct ol_http_poller *p)
{
	struct ol_http_server *s = p->s;
	struct ol_http_conn *dead = NULL;
	uint64_t now = ol_io_now_ms();
	pthread_mutex_lock(&p->mu);
	for (int l = PARK_IDLE; l <= PARK_LINGER; l++) {
		while (p->lists[l].head && now >= park_due(s, p->lists[l].head)) {
			struct ol_http_conn *c = p->lists[l].head;
			park_remove(p, c);
			c->plist = l; /* for below */
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			c->run_next = dead;
			dead = c;
		}
	}
	pthread_mutex_unlock(&p->mu);
	while (dead) {
		struct ol_http_conn *c = dead;
		dead = c->run_next;
		if (c->plist != PARK_LINGER)
			OL_HTTP_COUNT(s, timeouts, 1);
		if (c->plist == PARK_HEAD && c->rlen && (!c->ssl || c->tls_up))
			ol_http_send_error(c, OL_HTTP_ERR_TIMEOUT, 0);
		conn_free(c);
	}
}

static int
poller_wait_ms(struct ol_http_poller *p)
{
	int tmo = -1;
	uint64_t now = ol_io_now_ms();
	pthread_mutex_lock(&p->mu);
	for (int l = PARK_IDLE; l <= PARK_LINGER; l++) {
		if (!p->lists[l].head)
			continue;
		uint64_t due = park_due(p->s, p->lists[l].head);
		int t = due > now ? (int)(due - now) : 0;
		if (tmo < 0 || t < tmo)
			tmo = t;
	}
	pthread_mutex_unlock(&p->mu);
	return tmo;
}

/* A poller's thread: waits for one event at a time on its epoll set (EPOLLONESHOT: a
 * connection is never seen by two threads), serves it, and closes what expired. The first
 * thread of a poller stays until the stop; an extra one (mon_main) leaves after
 * WORKER_IDLE_MS without an event while another thread of its poller waits, or once every
 * event it took for SURPLUS_MS left another thread of its poller waiting (a thread too many:
 * epoll wakes its waiters in turn, so a spare one costs a context switch per request). The
 * stop comes after every connection closed: no thread is serving one then. */
static void
poller_loop(struct ol_http_poller *p, bool extra)
{
	struct ol_http_server *s = p->s;
	uint64_t last_work = ol_io_now_ms(), surplus_since = 0;
	struct ol_http_pthread me = {.tid = (pid_t)syscall(SYS_gettid)};
	pthread_mutex_lock(&p->mu);
	me.next = p->threads;
	p->threads = &me;
	pthread_mutex_unlock(&p->mu);
	if (extra)
		__atomic_fetch_sub(&p->starting, 1, __ATOMIC_RELEASE);
	for (;;) {
		struct epoll_event ev;
		int tmo = poller_wait_ms(p);
		if (tmo < 0 || tmo > WAIT_MAX_MS)
			tmo = WAIT_MAX_MS;
		__atomic_fetch_add(&p->n_waiting, 1, __ATOMIC_RELEASE);
		int n = epoll_wait(p->epfd, &ev, 1, tmo);
		unsigned others = __atomic_sub_fetch(&p->n_waiting, 1, __ATOMIC_ACQ_REL);
		if (n < 0 && errno != EINTR) {
			ol_warn("http: epoll_wait: %s", strerror(errno));
			n = 0;
		}
		if (__atomic_load_n(&s->pollers_stop, __ATOMIC_ACQUIRE))
			break;
		if (n == 1 && ev.data.ptr) {
			__atomic_fetch_add(&p->progress, 1, __ATOMIC_RELAXED);
			last_work = ol_io_now_ms();
			if (!others)
				surplus_since = 0;
			else if (!surplus_since)
				surplus_since = last_work;
			poller_event(p, ev.data.ptr);
		} else if (n == 1) {
			uint64_t v;
			if (read(p->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				ol_warn("http: poller wake: %s", strerror(errno));
		}
		poller_expire(p);
		uint64_t now = ol_io_now_ms();
		if (extra && others &&
		    ((n == 0 && now - last_work >= WORKER_IDLE_MS) ||
		     (surplus_since && now - surplus_since >= SURPLUS_MS)))
			break;
	}
	pthread_mutex_lock(&p->mu);
	struct ol_http_pthread **pp = &p->threads;
	while (*pp != &me)
		pp = &(*pp)->next;
	*pp = me.next;
	pthread_mutex_unlock(&p->mu);
	/* the stop: nobody reads the wake any more, so each thread that leaves wakes the next */
	uint64_t one = 1;
	if (__atomic_load_n(&s->pollers_stop, __ATOMIC_ACQUIRE) &&
	    write(p->wakefd, &one, sizeof(one)) < 0)
		ol_warn("http: poller wake: %s", strerror(errno));
}

static void *
poller_main(void *arg)
{
	poller_loop(arg, false);
	return NULL;
}

static void *
poller_extra_main(void *arg)
{
	struct ol_http_poller *p = arg;
	struct ol_http_server *s = p->s;
	poller_loop(p, true);
	pthread_mutex_lock(&s->mu);
	s->n_extra--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* 0 when a thread of p is runnable (its /proc state R: preempted or running, it comes back
 * for the next event by itself), else how many threads p has. Only the first 16 are looked
 * at. */
static unsigned
poller_held(struct ol_http_poller *p)
{
	pid_t tids[16];
	unsigned n = 0;
	pthread_mutex_lock(&p->mu);
	for (struct ol_http_pthread *t = p->threads; t && n < 16; t = t->next)
		tids[n++] = t->tid;
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < n; i++) {
		char path[64], buf[256];
		snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", (long)tids[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		const char *st = strrchr(buf, ')'); /* "tid (comm) S ..." */
		if (st && st[1] == ' ' && st[2] == 'R')
			return 0;
	}
	return n;
}

/* The pollers' watch ("ol-http-mon"): every MON_TICK_US while requests are in flight, a poller
 * none of whose threads waits for events and none of whose threads took one since the last
 * look is given as many threads more as it has (up to 8; doubling, so that a burst of GETs that
 * a slow disk holds has its threads within a few ticks), at most max_workers beside the first
 * ones, when none of them is runnable: each is held by its request (a disk, a slow client, a
 * forward, a lock). Threads that are only busy, or preempted, do not count: more threads than
 * cores serving at once, and a spare one waiting, only cost context switches. A poller is not
 * given more while threads it was given have not yet entered its loop (not in its list, so not
 * seen runnable): on a CPU so loaded that a new thread waits longer than a tick to run, each
 * tick would otherwise double threads that bring no progress. Asleep while no request is
 * served on a poller (serve_here wakes it). */
static void *
mon_main(void *arg)
{
	struct ol_http_server *s = arg;
	uint64_t *seen = ol_xcalloc(s->n_pollers, sizeof(*seen));
	pthread_mutex_lock(&s->mu);
	while (!s->mon_stop) {
		if (!__atomic_load_n(&s->quick_inflight, __ATOMIC_RELAXED)) {
			__atomic_store_n(&s->mon_idle, true, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&s->quick_inflight, __ATOMIC_SEQ_CST))
				__atomic_store_n(&s->mon_idle, false, __ATOMIC_RELAXED);
			while (__atomic_load_n(&s->mon_idle, __ATOMIC_RELAXED) && !s->mon_stop)
				pthread_cond_wait(&s->mon_cv, &s->mu);
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		struct timespec ts = {0, MON_TICK_US * 1000};
		nanosleep(&ts, NULL);
		unsigned grow[64 * 8], n_grow = 0;
		for (unsigned i = 0; i < s->n_pollers; i++) {
			struct ol_http_poller *p = &s->pollers[i];
			uint64_t prog = __atomic_load_n(&p->progress, __ATOMIC_RELAXED);
			unsigned held = 0;
			if (!__atomic_load_n(&p->n_waiting, __ATOMIC_RELAXED) && prog == seen[i] &&
			    !__atomic_load_n(&p->starting, __ATOMIC_ACQUIRE))
				held = poller_held(p);
			for (unsigned k = 0; k < held && k < 8; k++)
				grow[n_grow++] = i;
			seen[i] = prog;
		}
		pthread_mutex_lock(&s->mu);
		unsigned ok = 0;
		for (unsigned i = 0; i < n_grow && !s->mon_stop && s->n_extra < s->max_workers;
		     i++, ok++)
			s->n_extra++;
		n_grow = ok;
		pthread_mutex_unlock(&s->mu);
		for (unsigned i = 0; i < n_grow; i++) {
			struct ol_http_poller *p = &s->pollers[grow[i]];
			__atomic_fetch_add(&p->starting, 1, __ATOMIC_RELAXED);
			int rc = ol_io_thread_start_detached("ol-http-conn", poller_extra_main, p);
			if (rc == 0)
				continue;
			__atomic_fetch_sub(&p->starting, 1, __ATOMIC_RELAXED);
			ol_warn("http: cannot start a thread: %s", strerror(-rc));
			pthread_mutex_lock(&s->mu);
			s->n_extra--;
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
		}
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	free(seen);
	return NULL;
}

static void
stop_mon(struct ol_http_server *s)
{
	if (!s->mon_started)
		return;
	pthread_mutex_lock(&s->mu);
	s->mon_stop = true;
	pthread_cond_signal(&s->mon_cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->mon, NULL);
	s->mon_started = false;
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
		uint64_t one = 1;
		if (s->pollers[i].started && write(s->pollers[i].wakefd, &one, sizeof(one)) < 0)
			ol_warn("http: poller wake: %s", strerror(errno));
	}
	pthread_mutex_lock(&s->mu); /* the extra threads use the epoll sets until they leave */
	while (s->n_extra)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; s->pollers && i < s->n_pollers; i++) {
		struct ol_http_poller *p = &s->pollers[i];
		if (p->started)
			pthread_join(p->th, NULL);
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

/* Over the total cap: a 503 if the socket takes it at once (plaintext), then close. */
static void
reject_now(struct ol_http_server *s, int fd)
{
	char msg[2048];
	size_t n = s->tls ? 0 : ol_http_format_error(s, OL_HTTP_ERR_BUSY, msg, sizeof(msg));
	if (n && send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		ol_debug("http: 503 at accept: %s", strerror(errno));
	close(fd);
}

static struct ol_http_conn *
conn_new(struct ol_http_server *s, int fd, const struct sockaddr *sa, socklen_t sl)
{
	struct ol_http_conn *c = ol_xcalloc(1, sizeof(*c));
	c->srv = s;
	c->fd = fd;
	c->cur_timeo = -2;
	c->idle_since_ms = ol_io_now_ms();
	ol_io_addr_str(sa, sl, c->peer, sizeof(c->peer));
	ol_http_head_init(&c->head);
	ol_io_set_nodelay(fd);
	return c;
}

/* Count a new connection against the limits; link it. 0 ok, 1 over the total cap, 2 over its
 * address's cap (then it is linked without an address, to be refused). */
static int
conn_admit(struct ol_http_server *s, struct ol_http_conn *c, const struct sockaddr *sa)
{
	uint8_t key[16];
	int rc = 0;
	ol_http_peer_key(sa, key);
	pthread_mutex_lock(&s->mu);
	if (s->n_conns >= s->o.max_conns) {
		pthread_mutex_unlock(&s->mu);
		return 1;
	}
	struct ol_http_peer *pe = ol_http_peers_get(&s->peers, key);
	if (pe->conns >= s->o.max_conns_per_addr) {
		ol_http_peers_put(&s->peers, pe);
		rc = 2;
	} else {
		pe->conns++;
		c->pe = pe;
	}
	c->poller = &s->pollers[s->next_poller++ % s->n_pollers];
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	OL_HTTP_COUNT(s, conns_open, 1);
	OL_HTTP_COUNT(s, conns_total, 1);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void
start_conn(struct ol_http_server *s, int fd, const struct sockaddr *sa, socklen_t sl)
{
	struct ol_http_conn *c = conn_new(s, fd, sa, sl);
	int rc = conn_admit(s, c, sa);
	if (rc == 1) {
		OL_HTTP_COUNT(s, conns_rejected, 1);
		refuse_log(s, LOG_CONNS, c->peer, "connection refused: max_conns reached");
		reject_now(s, fd);
		ol_http_head_fini(&c->head);
		free(c);
		return;
	}
	if (rc == 2) {
		OL_HTTP_COUNT(s, conns_rejected, 1);
		OL_HTTP_COUNT(s, rejected_per_addr, 1);
		refuse_log(s, LOG_PER_ADDR, c->peer,
			   "connection refused: too many connections from this address");
		if (s->tls) /* a 503 would cost a handshake */
			conn_free(c);
		else
			refuse_linger(c, OL_HTTP_ERR_BUSY, false);
		return;
	}
	int list = PARK_IDLE;
	if (s->tls) {
		int fl = fcntl(fd, F_GETFL);
		c->ssl = fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0
			     ? NULL
			     : ol_http_tls_conn_new(s->tls, fd);
		if (!c->ssl) {
			conn_free(c);
			return;
		}
		c->head_since_ms = ol_io_now_ms(); /* the handshake has the header timeout */
		list = PARK_HEAD;
	}
	/* to the poller until its first bytes come: a burst of connections costs no threads */
	if (park(c, list, EPOLLIN, false))
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
				refuse_log(s, LOG_CONNS, "-", "accept failed: out of descriptors");
				usleep(10000);
			}
			continue;
		}
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
	if (!o->max_conns) {
		struct rlimit rl;
		rlim_t cur = getrlimit(RLIMIT_NOFILE, &rl) ? 4096 : rl.rlim_cur;
		o->max_conns =
		    cur > 1024 + 64 ? (unsigned)(cur > 1u << 30 ? 1u << 30 : cur) - 1024 : 64;
	}
	if (!o->max_conns_per_addr)
		o->max_conns_per_addr = o->max_conns < 4096 ? o->max_conns : 4096;
	if (!o->max_inflight)
		o->max_inflight = 2048;
	if (!o->max_head_memory)
		o->max_head_memory = 256ull << 20;
	if (!o->max_inflight_per_addr)
		o->max_inflight_per_addr = o->max_inflight / 2 ? o->max_inflight / 2 : 1;
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
	struct ol_io_addr a;
	int rc = ol_io_resolve(s->o.addr, &a, 1); /* a host name binds its first address */
	if (rc < 0)
		return rc;
	struct sockaddr_storage ss = a.ss;
	socklen_t len = a.len;
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
	stop_mon(s);
	stop_pollers(s);
	for (unsigned i = 0; i < s->n_listen; i++)
		close(s->lfds[i]);
	for (int i = 0; i < 2; i++)
		if (s->stop_pipe[i] >= 0)
			close(s->stop_pipe[i]);
	ol_bufpool_free(s->pool);
	ol_http_peers_fini(&s->peers);
	ol_http_tls_free(s->tls);
	pthread_cond_destroy(&s->mon_cv);
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
	pthread_cond_init(&s->mon_cv, NULL);
	pthread_cond_init(&s->work_cv, NULL);
	s->max_workers = s->o.max_inflight;
	s->lfds = ol_xcalloc(s->o.threads, sizeof(int));
	s->acceptors = ol_xcalloc(s->o.threads, sizeof(pthread_t));
	size_t bufsz = s->o.max_header_bytes < 65536 ? 65536 : s->o.max_header_bytes;
	s->pool = ol_bufpool_new(bufsz + OL_HTTP_WBUF, 256);
	ol_http_peers_init(&s->peers, 4096);
	int rc = 0;
	if (s->o.tls_cert_path && *s->o.tls_cert_path)
		rc = ol_http_tls_new(s->o.tls_cert_path, s->o.tls_key_path, s->o.tls_client_ca,
				     &s->tls);
	if (!rc)
		rc = open_listeners(s);
	if (!rc && pipe2(s->stop_pipe, O_CLOEXEC))
		rc = -errno;
	if (!rc)
		rc = start_pollers(s);
	if (!rc && !(rc = ol_io_thread_start(&s->mon, "ol-http-mon", mon_main, s)))
		s->mon_started = true;
	if (!rc)
		rc = start_acceptors(s);
	if (rc) {
		server_free(s);
		return rc;
	}
	ol_info("http: listening on %s (port %u, %u acceptors%s), up to %u connections (%u per "
		"address), %u requests in flight (%u per address)",
		s->o.addr, s->port, s->n_listen, s->tls ? ", TLS" : "", s->o.max_conns,
		s->o.max_conns_per_addr, s->o.max_inflight, s->o.max_inflight_per_addr);
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

unsigned
ol_http_server_shutdown_conns(struct ol_http_server *s)
{
	unsigned n = 0;
	if (!s)
		return 0;
	pthread_mutex_lock(&s->mu);
	for (struct ol_http_conn *c = s->conns; c; c = c->next, n++)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
	return n;
}

void
ol_http_server_stats(const struct ol_http_server *s, struct ol_http_stats *out)
{
	const uint64_t *src = (const uint64_t *)&s->st;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
