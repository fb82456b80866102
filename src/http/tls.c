/* http/tls.c - TLS over a connection's non-blocking socket (OpenSSL): the server's context,
 * reloaded from its files on request, and the reads, writes and handshake steps conn.c and
 * server.c call. */
#include "http/internal.h"

#include "base/log.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ol_http_tls {
	pthread_mutex_t mu; /* ctx */
	SSL_CTX *ctx;
	char *cert, *key, *ca;
	struct ol_http_tls *next; /* all contexts, under reg_mu */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ol_http_tls *reg_head;

static void
ssl_err_str(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, cap);
	else
		snprintf(buf, cap, "unknown error");
	ERR_clear_error();
}

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

/* Check a file is there and readable first, so the message names it and says why. */
static int
check_file(const char *what, const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	int rc = -errno;
	ol_err("http: TLS %s %s: %s", what, path, strerror(-rc));
	return rc;
}

static int
ctx_load(const char *cert, const char *key, const char *ca, SSL_CTX **out)
{
	char e[256];
	int rc = check_file("certificate (cert_path)", cert);
	rc = rc ? rc : check_file("key (key_path)", key);
	if (!rc && ca && *ca)
		rc = check_file("client CA (client_ca)", ca);
	if (rc)
		return rc;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* idle connections hold no buffers */
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	rc = -EINVAL;
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("http: TLS certificate (cert_path) %s: %s", cert, e);
		goto out;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("http: TLS key (key_path) %s: %s", key, e);
		goto out;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("http: TLS key (key_path) %s does not match the certificate %s: %s", key,
		       cert, e);
		goto out;
	}
	if (ca && *ca) {
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
			ssl_err_str(e, sizeof(e));
			ol_err("http: TLS client CA (client_ca) %s: %s", ca, e);
			goto out;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	rc = 0;
out:
	if (rc)
		SSL_CTX_free(ctx);
	else
		*out = ctx;
	return rc;
}

static char *
dup_or_null(const char *s)
{
	return s && *s ? ol_xstrdup(s) : NULL;
}

int
ol_http_tls_new(const char *cert, const char *key, const char *ca, struct ol_http_tls **out)
{
	if (!cert || !*cert || !key || !*key) {
		ol_err("http: TLS needs both a certificate (cert_path) and a key (key_path)");
		return -EINVAL;
	}
	SSL_CTX *ctx;
	int rc = ctx_load(cert, key, ca, &ctx);
	if (rc)
		return rc;
	struct ol_http_tls *t = ol_xcalloc(1, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	t->ctx = ctx;
	t->cert = ol_xstrdup(cert);
	t->key = ol_xstrdup(key);
	t->ca = dup_or_null(ca);
	pthread_mutex_lock(&reg_mu);
	t->next = reg_head;
	reg_head = t;
	pthread_mutex_unlock(&reg_mu);
	*out = t;
	return 0;
}

void
ol_http_tls_free(struct ol_http_tls *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&reg_mu);
	struct ol_http_tls **pp = &reg_head;
	while (*pp && *pp != t)
		pp = &(*pp)->next;
	if (*pp)
		*pp = t->next;
	pthread_mutex_unlock(&reg_mu);
	SSL_CTX_free(t->ctx);
	pthread_mutex_destroy(&t->mu);
	free(t->cert);
	free(t->key);
	free(t->ca);
	free(t);
}

static int
tls_reload(struct ol_http_tls *t)
{
	SSL_CTX *ctx;
	int rc = ctx_load(t->cert, t->key, t->ca, &ctx);
	if (rc) {
		ol_err("http: TLS reload failed: keeping the old certificate (%s)", t->cert);
		return rc;
	}
	pthread_mutex_lock(&t->mu);
	SSL_CTX *old = t->ctx;
	t->ctx = ctx;
	pthread_mutex_unlock(&t->mu);
	SSL_CTX_free(old); /* open connections hold their own reference */
	ol_info("http: TLS certificate reloaded from %s", t->cert);
	return 0;
}

int
ol_http_tls_reload_all(void)
{
	int first = 0;
	pthread_mutex_lock(&reg_mu);
	for (struct ol_http_tls *t = reg_head; t; t = t->next) {
		int rc = tls_reload(t);
		if (rc && !first)
			first = rc;
	}
	pthread_mutex_unlock(&reg_mu);
	return first;
}

void *
ol_http_tls_conn_new(struct ol_http_tls *t, int fd)
{
	pthread_mutex_lock(&t->mu);
	SSL *ssl = SSL_new(t->ctx);
	pthread_mutex_unlock(&t->mu);
	if (!ssl)
		return NULL;
	if (SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_accept_state(ssl);
	return ssl;
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
