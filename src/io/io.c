/* io/io.c - addresses, sockets, timed reads/writes, threads, clock, buffer pools. */
#include "io/io.h"

#include "base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include "base/clock.h"

static int
parse_port(const char *s, uint16_t *port)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

static int
parse_v6(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	const char *close = strchr(s, ']');
	char host[INET6_ADDRSTRLEN];
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	size_t hl = close ? (size_t)(close - s - 1) : 0;
	if (!close || close[1] != ':' || hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s + 1, hl);
	host[hl] = '\0';
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
		return -EINVAL;
	uint16_t port;
	if (parse_port(close + 2, &port))
		return -EINVAL;
	a->sin6_port = htons(port);
	*len = sizeof(*a);
	return 0;
}

int
ol_io_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	if (!s || !ss || !len)
		return -EINVAL;
	if (s[0] == '[')
		return parse_v6(s, ss, len);
	const char *colon = strrchr(s, ':');
	char host[INET_ADDRSTRLEN + 16];
	size_t hl = colon ? (size_t)(colon - s) : 0;
	if (!colon || hl >= sizeof(host) || memchr(s, ':', hl))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (hl == 0 || !strcmp(host, "*"))
		a->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (!strcmp(host, "localhost"))
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -EINVAL;
	uint16_t port;
	if (parse_port(colon + 1, &port))
		return -EINVAL;
	a->sin_port = htons(port);
	*len = sizeof(*a);
	return 0;
}

int
ol_io_resolve(const char *addr, struct ol_io_addr *out, unsigned max)
{
	if (!addr || !out || !max)
		return -EINVAL;
	if (ol_io_parse_addr(addr, &out[0].ss, &out[0].len) == 0)
		return 1;
	/* a host name: "name:port", no brackets (those are numeric IPv6, parsed above) */
	const char *colon = strrchr(addr, ':');
	char host[256];
	uint16_t port;
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	if (!colon || hl == 0 || hl >= sizeof(host) || addr[0] == '[' || memchr(addr, ':', hl) ||
	    parse_port(colon + 1, &port))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc)
		return rc == EAI_AGAIN ? -EAGAIN : rc == EAI_MEMORY ? -ENOMEM : -ENXIO;
	unsigned n = 0;
	for (struct addrinfo *p = ai; p && n < max; p = p->ai_next) {
		if ((p->ai_family != AF_INET && p->ai_family != AF_INET6) ||
		    p->ai_addrlen > sizeof(out[n].ss))
			continue;
		memcpy(&out[n].ss, p->ai_addr, p->ai_addrlen);
		out[n].len = p->ai_addrlen;
		n++;
	}
	freeaddrinfo(ai);
	return n ? (int)n : -ENXIO;
}

int
ol_io_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN];
	int n;
	if (cap == 0)
		return -ENOSPC;
	buf[0] = '\0';
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		n = snprintf(buf, cap, "%s:%u", host, ntohs(a->sin_port));
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		n = snprintf(buf, cap, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		n = snprintf(buf, cap, "?");
	}
	return (n < 0 || (size_t)n >= cap) ? -ENOSPC : 0;
}

unsigned
ol_io_sock_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

int
ol_io_listen_sa(const struct sockaddr *sa, socklen_t len, bool reuseport, int backlog)
{
	int one = 1, err;
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		goto fail;
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail;
	if (sa->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))
		goto fail;
	if (bind(fd, sa, len))
		goto fail;
	if (listen(fd, backlog > 0 ? backlog : SOMAXCONN))
		goto fail;
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

int
ol_io_listen(const char *addr, bool reuseport, int backlog)
{
	struct ol_io_addr a;
	int rc = ol_io_resolve(addr, &a, 1);
	if (rc < 0)
		return rc;
	return ol_io_listen_sa((struct sockaddr *)&a.ss, a.len, reuseport, backlog);
}

int
ol_io_set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -errno;
	return 0;
}

int
ol_io_wait(int fd, short events, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	uint64_t deadline = timeout_ms >= 0 ? ol_io_now_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		int t = timeout_ms;
		if (timeout_ms >= 0) {
			uint64_t now = ol_io_now_ms();
			t = now >= deadline ? 0 : (int)(deadline - now);
		}
		int n = poll(&p, 1, t);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int
fcntl_clear_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* one address: a connected blocking fd with TCP_NODELAY, or -errno */
static int
connect_one(const struct ol_io_addr *a, int timeout_ms)
{
	int rc = 0, err = 0;
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) && errno != EINPROGRESS) {
		rc = -errno;
		goto fail;
	}
	rc = ol_io_wait(fd, POLLOUT, timeout_ms);
	socklen_t el = sizeof(err);
	if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el))
		rc = -errno;
	if (!rc && err)
		rc = -err;
	if (rc)
		goto fail;
	rc = fcntl_clear_nonblock(fd);
	if (rc)
		goto fail;
	ol_io_set_nodelay(fd);
	return fd;
fail:
	close(fd);
	return rc;
}

int
ol_io_connect(const char *addr, int timeout_ms)
{
	struct ol_io_addr a[8];
	int n = ol_io_resolve(addr, a, 8), rc = -ECONNREFUSED;
	if (n < 0)
		return n;
	uint64_t deadline = timeout_ms >= 0 ? ol_io_now_ms() + (uint64_t)timeout_ms : 0;
	for (int i = 0; i < n; i++) {
		int t = timeout_ms;
		if (timeout_ms >= 0) {
			uint64_t now = ol_io_now_ms();
			if (now >= deadline && i > 0)
				return -ETIMEDOUT;
			t = now >= deadline ? 0 : (int)(deadline - now);
		}
		rc = connect_one(&a[i], t);
		if (rc >= 0 || rc == -ETIMEDOUT)
			return rc;
	}
	return rc;
}

ssize_t
ol_io_read(int fd, void *buf, size_t len, int timeout_ms)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = ol_io_wait(fd, POLLIN, timeout_ms);
		if (rc)
			return rc;
	}
}

ssize_t
ol_io_recv_timeo(int fd, void *buf, size_t len, int timeout_ms, int *cur_timeo)
{
	if (timeout_ms == 0)
		return -ETIMEDOUT;
	if (timeout_ms < 0)
		timeout_ms = -1;
	if (*cur_timeo != timeout_ms) {
		struct timeval tv = {0, 0};
		if (timeout_ms > 0) {
			tv.tv_sec = timeout_ms / 1000;
			tv.tv_usec = (timeout_ms % 1000) * 1000;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
			return -errno;
		*cur_timeo = timeout_ms;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, len, 0);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return (errno == EAGAIN || errno == EWOULDBLOCK) ? -ETIMEDOUT : -errno;
	}
}

int
ol_io_writev_all(int fd, struct iovec *iov, int n, int timeout_ms)
{
	while (n > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			int rc = ol_io_wait(fd, POLLOUT, timeout_ms);
			if (rc)
				return rc;
			continue;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int
ol_io_write_all(int fd, const void *buf, size_t len, int timeout_ms)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return ol_io_writev_all(fd, &iov, 1, timeout_ms);
}

void
ol_io_thread_name(const char *name)
{
	char n[16];
	snprintf(n, sizeof(n), "%s", name);
	pthread_setname_np(pthread_self(), n);
}

struct thread_start {
	char name[16];
	void *(*fn)(void *);
	void *arg;
};

static void *
thread_trampoline(void *p)
{
	struct thread_start ts = *(struct thread_start *)p;
	free(p);
	ol_io_thread_name(ts.name);
	return ts.fn(ts.arg);
}

static int
thread_start(pthread_t *t, bool detached, const char *name, void *(*fn)(void *), void *arg)
{
	struct thread_start *ts = ol_xmalloc(sizeof(*ts));
	pthread_attr_t attr;
	pthread_t tid;
	snprintf(ts->name, sizeof(ts->name), "%s", name);
	ts->fn = fn;
	ts->arg = arg;
	pthread_attr_init(&attr);
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 2 * 1024 * 1024);
	int rc = pthread_create(t ? t : &tid, &attr, thread_trampoline, ts);
	if (rc == EINVAL) { /* big static TLS does not fit: fall back to the default size */
		pthread_attr_setstacksize(&attr, 8 * 1024 * 1024);
		rc = pthread_create(t ? t : &tid, &attr, thread_trampoline, ts);
	}
	pthread_attr_destroy(&attr);
	if (rc) {
		free(ts);
		return -rc;
	}
	return 0;
}

int
ol_io_thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
	return thread_start(t, false, name, fn, arg);
}

int
ol_io_thread_start_detached(const char *name, void *(*fn)(void *), void *arg)
{
	return thread_start(NULL, true, name, fn, arg);
}

unsigned
ol_io_ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

uint64_t
ol_io_now_ns(void)
{
	return ol_clock_ns(); /* the one clock: base/clock.c */
}

uint64_t
ol_io_now_ms(void)
{
	return ol_io_now_ns() / 1000000ull;
}

struct ol_bufpool {
	pthread_mutex_t mu;
	size_t buf_size;
	unsigned max_cached, n_cached;
	void **cache;
};

struct ol_bufpool *
ol_bufpool_new(size_t buf_size, unsigned max_cached)
{
	struct ol_bufpool *p = ol_xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	p->buf_size = buf_size;
	p->max_cached = max_cached;
	p->cache = ol_xcalloc(max_cached ? max_cached : 1, sizeof(void *));
	return p;
}

void *
ol_bufpool_get(struct ol_bufpool *p)
{
	void *b = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->n_cached)
		b = p->cache[--p->n_cached];
	pthread_mutex_unlock(&p->mu);
	return b ? b : ol_xmalloc(p->buf_size);
}

void
ol_bufpool_put(struct ol_bufpool *p, void *buf)
{
	if (!buf)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->n_cached < p->max_cached) {
		p->cache[p->n_cached++] = buf;
		buf = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	free(buf);
}

size_t
ol_bufpool_buf_size(const struct ol_bufpool *p)
{
	return p->buf_size;
}

void
ol_bufpool_free(struct ol_bufpool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n_cached; i++)
		free(p->cache[i]);
	free(p->cache);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Classes are only ever appended (size and pool written, then n published with release), so
 * a get or put finds its class without a lock; mu serialises only the making of a class.
 * cached counts the idle bytes of all classes (reserved before a buffer is kept, released
 * when one is taken), so the total is kept without a lock shared by the classes. */
static struct {
	pthread_mutex_t mu;
	_Atomic unsigned n;
	size_t size[OL_IOBUF_CLASSES];
	struct ol_bufpool *pool[OL_IOBUF_CLASSES];
	_Atomic size_t cached, total;
	_Atomic unsigned per_size;
} iobufs = {.mu = PTHREAD_MUTEX_INITIALIZER, .total = OL_IOBUF_CACHE_BYTES, .per_size = 8192};

void
ol_iobuf_limit(size_t total_bytes, unsigned per_size)
{
	atomic_store(&iobufs.total, total_bytes);
	atomic_store(&iobufs.per_size, per_size);
}

static struct ol_bufpool *
iobuf_find(size_t size, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (iobufs.size[i] == size)
			return iobufs.pool[i];
	return NULL;
}

/* The pool of this size, made on first use while a class is free; NULL: not cached. */
static struct ol_bufpool *
iobuf_pool(size_t size)
{
	if (size < OL_IOBUF_MIN)
		return NULL;
	unsigned n = atomic_load_explicit(&iobufs.n, memory_order_acquire);
	struct ol_bufpool *p = iobuf_find(size, n);
	if (p || n == OL_IOBUF_CLASSES)
		return p;
	pthread_mutex_lock(&iobufs.mu);
	n = atomic_load_explicit(&iobufs.n, memory_order_relaxed);
	p = iobuf_find(size, n);
	if (!p && n < OL_IOBUF_CLASSES) {
		size_t max = atomic_load(&iobufs.total) / size;
		unsigned per = atomic_load(&iobufs.per_size);

		p = ol_bufpool_new(size, max < per ? (unsigned)max : per);
		iobufs.size[n] = size;
		iobufs.pool[n] = p;
		atomic_store_explicit(&iobufs.n, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&iobufs.mu);
	return p;
}

void *
ol_iobuf_get(size_t size)
{
	struct ol_bufpool *p = iobuf_pool(size);
	void *b = NULL;

	if (p) {
		pthread_mutex_lock(&p->mu);
		if (p->n_cached) {
			b = p->cache[--p->n_cached];
			atomic_fetch_sub(&iobufs.cached, size);
		}
		pthread_mutex_unlock(&p->mu);
	}
	return b ? b : ol_xmalloc(size);
}

size_t
ol_iobuf_cached_bytes(void)
{
	return atomic_load(&iobufs.cached);
}

void
ol_iobuf_put(void *buf, size_t size)
{
	struct ol_bufpool *p;

	if (!buf)
		return;
	p = iobuf_pool(size);
	if (p && atomic_fetch_add(&iobufs.cached, size) + size <= atomic_load(&iobufs.total)) {
		pthread_mutex_lock(&p->mu);
		if (p->n_cached < p->max_cached) {
			p->cache[p->n_cached++] = buf;
			buf = NULL;
		}
		pthread_mutex_unlock(&p->mu);
		if (!buf)
			return;
	}
	if (p)
		atomic_fetch_sub(&iobufs.cached, size);
	free(buf);
}
