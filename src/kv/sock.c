/* kv/sock.c - reads and writes on a KV connection that may speak TLS, for libopenlake (no
 * logging; client/meson.build builds it; the server's TLS runs over memory BIOs on its loops,
 * tls/mem.c, and does not use it). Blocking sockets with SO_RCVTIMEO / SO_SNDTIMEO, as in net.c:
 * OpenSSL turns a timed-out read or write into SSL_ERROR_WANT_READ / WANT_WRITE. */
#include "kv/net.h"

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <sys/socket.h>

/* After an SSL call returned n <= 0: -EAGAIN (timed out), -ECONNRESET (peer closed), -errno. */
static int
ssl_err(SSL *ssl, int n)
{
	int saved = errno, e = SSL_get_error(ssl, n);
	ERR_clear_error();
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		if (saved == EINTR)
			return -EINTR;
		return saved && saved != EAGAIN ? -saved : -ECONNRESET;
	default:
		return -EPROTO;
	}
}

long
kvnet_srecv(int fd, void *ssl, void *buf, size_t len)
{
	int cap = len > (1u << 30) ? (1 << 30) : (int)len;
	for (;;) {
		long r;
		if (ssl) {
			int n = SSL_read(ssl, buf, cap);
			r = n > 0 ? n : ssl_err(ssl, n);
		} else {
			ssize_t n = recv(fd, buf, (size_t)cap, 0);
			r = n > 0 ? n : n == 0 ? -ECONNRESET : -errno;
			if (r == -EWOULDBLOCK)
				r = -EAGAIN;
		}
		if (r != -EINTR)
			return r;
	}
}

int
kvnet_sreadv_full(int fd, void *ssl, struct iovec *iov, int n)
{
	if (!ssl)
		return kvnet_readv_full(fd, iov, n);
	for (int i = 0; i < n; i++) {
		char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;
		while (left > 0) {
			long r = kvnet_srecv(fd, ssl, p, left);
			if (r < 0)
				return r == -EAGAIN ? -ETIMEDOUT : (int)r;
			p += r;
			left -= (size_t)r;
		}
	}
	return 0;
}

/* OpenSSL writes with write(2), without MSG_NOSIGNAL: a peer that closed would raise SIGPIPE
 * in a process that did not ignore it (a C program using libopenlake). Block it on this thread
 * around the call and take back one it raised. */
void
kvnet_sigpipe_block(struct kvnet_sigpipe *sp)
{
	sigset_t pipe, pend;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pend);
	sp->was_pending = sigismember(&pend, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe, &sp->old);
}

void
kvnet_sigpipe_unblock(struct kvnet_sigpipe *sp)
{
	sigset_t pipe;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	if (!sp->was_pending) {
		struct timespec zero = {0, 0};
		while (sigtimedwait(&pipe, NULL, &zero) == SIGPIPE)
			;
	}
	pthread_sigmask(SIG_SETMASK, &sp->old, NULL);
}

static int
ssl_write_all(SSL *ssl, const void *buf, size_t len)
{
	struct kvnet_sigpipe sp;
	kvnet_sigpipe_block(&sp);
	int r = 0;
	const char *p = buf;
	while (len > 0) {
		int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
		int n = SSL_write(ssl, p, chunk);
		if (n <= 0) {
			r = ssl_err(ssl, n);
			if (r == -EINTR) {
				r = 0;
				continue;
			}
			r = r == -EAGAIN ? -ETIMEDOUT : r == -ECONNRESET ? -EPIPE : r;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	kvnet_sigpipe_unblock(&sp);
	return r;
}

/* Small iovs (headers, entries) are gathered into one record; large values go as they are. */
int
kvnet_swritev_full(int fd, void *ssl, struct iovec *iov, int n)
{
	if (!ssl)
		return kvnet_writev_full(fd, iov, n);
	char buf[16384];
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		size_t l = iov[i].iov_len;
		if (l == 0)
			continue;
		if (used + l <= sizeof(buf)) {
			memcpy(buf + used, iov[i].iov_base, l);
			used += l;
			continue;
		}
		int r = used ? ssl_write_all(ssl, buf, used) : 0;
		used = 0;
		if (r == 0 && l <= sizeof(buf)) {
			memcpy(buf, iov[i].iov_base, l);
			used = l;
		} else if (r == 0) {
			r = ssl_write_all(ssl, iov[i].iov_base, l);
		}
		if (r < 0)
			return r;
	}
	return used ? ssl_write_all(ssl, buf, used) : 0;
}

int
kvnet_sread_full(int fd, void *ssl, void *buf, size_t len)
{
	struct iovec v = {buf, len};
	return kvnet_sreadv_full(fd, ssl, &v, 1);
}

int
kvnet_swrite_full(int fd, void *ssl, const void *buf, size_t len)
{
	struct iovec v = {(void *)buf, len};
	return kvnet_swritev_full(fd, ssl, &v, 1);
}

int
kvnet_sskip(int fd, void *ssl, size_t len)
{
	if (!ssl)
		return kvnet_skip(fd, len);
	char buf[16384];
	while (len > 0) {
		size_t k = len < sizeof(buf) ? len : sizeof(buf);
		int r = kvnet_sread_full(fd, ssl, buf, k);
		if (r < 0)
			return r;
		len -= k;
	}
	return 0;
}
