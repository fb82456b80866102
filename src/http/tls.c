/* http/tls.c - TLS over a connection's non-blocking socket (OpenSSL): the server's context
 * (tls/, reloaded from its files on request) with ALPN, and the reads, writes and handshake
 * steps conn.c and server.c call. */
#include "http/internal.h"

#include "base/log.h"
#include "tls/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The context itself lives in tls/ (shared with the KV port); this wraps it with ALPN. */
struct ol_http_tls {
	struct ol_tls *t;
};

static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
	    unsigned inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, h11, sizeof(h11) - 1, in, inlen) ==
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_OK;
	return SSL_TLSEXT_ERR_NOACK; /* e.g. h2 only: go on without ALPN, as HTTP/1.1 */
}

static void
http_setup(void *ctx)
{
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	/* TLS 1.3 session tickets go out with the connection's first response
	 * (ol_http_tls_tickets), not right after the handshake: bytes the client did not ask
	 * for make its socket readable while it waits for an answer, and botocore, waiting a
	 * second for 100 Continue, then reads a status line that is not there, times out inside
	 * the TLS layer and drops the connection when the answer takes longer (a cluster node
	 * waiting for its leader) */
	SSL_CTX_set_num_tickets(ctx, 0);
}

void
ol_http_tls_tickets(void *ssl)
{
	if (SSL_version(ssl) == TLS1_3_VERSION)
		(void)SSL_new_session_ticket(ssl); /* sent with the next write */
}

int
ol_http_tls_new(const char *cert, const char *key, const char *ca, struct ol_http_tls **out)
{
	struct ol_tls *t;
	int rc = ol_tls_new("http", cert, key, ca, http_setup, &t);
	if (rc)
		return rc;
	struct ol_http_tls *h = ol_xcalloc(1, sizeof(*h));
	h->t = t;
	*out = h;
	return 0;
}

void
ol_http_tls_free(struct ol_http_tls *t)
{
	if (!t)
		return;
	ol_tls_free(t->t);
	free(t);
}

int
ol_http_tls_reload_all(void)
{
	return ol_tls_reload_all(); /* every TLS context of the process, the KV port's too */
}

void *
ol_http_tls_conn_new(struct ol_http_tls *t, int fd)
{
	return ol_tls_ssl_new(t->t, fd);
}

void
ol_http_tls_conn_free(void *ssl, bool polite)
{
	if (!ssl)
		return;
	if (polite && SSL_is_init_finished(ssl))
		SSL_shutdown(ssl); /* close_notify, best effort (non-blocking socket) */
	SSL_free(ssl);
	ERR_clear_error();
}

/* After an SSL call returned n <= 0: POLLIN / POLLOUT to wait for, 0 for a clean end, or
 * -errno. */
static int
want(SSL *ssl, int n)
{
	int e = SSL_get_error(ssl, n), saved = errno;
	ERR_clear_error();
	switch (e) {
	case SSL_ERROR_WANT_READ:
		return POLLIN;
	case SSL_ERROR_WANT_WRITE:
		return POLLOUT;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		return saved && saved != EAGAIN ? -saved : -ECONNRESET;
	default:
		return -EPROTO;
	}
}

int
ol_http_tls_handshake(void *ssl)
{
	int n = SSL_do_handshake(ssl);
	if (n == 1)
		return 0;
	int w = want(ssl, n);
	return w == 0 ? -ECONNRESET : w;
}

ssize_t
ol_http_tls_read(void *ssl, int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t end = timeout_ms > 0 ? ol_io_now_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		int n = SSL_read(ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
		if (n > 0)
			return n;
		int w = want(ssl, n);
		if (w <= 0)
			return w;
		int tmo = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t now = ol_io_now_ms();
			tmo = now >= end ? 0 : (int)(end - now);
		}
		if (tmo == 0)
			return -ETIMEDOUT;
		int rc = ol_io_wait(fd, (short)w, tmo);
		if (rc)
			return rc;
	}
}

int
ol_http_tls_write(void *ssl, int fd, const void *buf, size_t len, int timeout_ms)
{
	const char *p = buf;
	while (len) {
		int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
		int n = SSL_write(ssl, p, chunk);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		int w = want(ssl, n);
		if (w <= 0)
			return w ? w : -EPIPE;
		if (timeout_ms == 0)
			return -ETIMEDOUT;
		int rc = ol_io_wait(fd, (short)w, timeout_ms);
		if (rc)
			return rc;
	}
	return 0;
}
