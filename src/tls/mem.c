/* tls/mem.c - a server TLS session over a pair of memory BIOs (see tls.h): OpenSSL never
 * touches a socket; the caller's transport (the KV server's io_uring loops) receives ciphertext
 * straight into the pair's input buffer and sends it from the output buffer where it lies.
 *
 * OpenSSL's error queue is per thread and shared by every session a loop thread runs: each call
 * starts with it empty and leaves it empty, so one session's failure never shows up as
 * another's. */
#include "tls/tls.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

#define MEM_IO_MAX (1 << 30) /* SSL_read / SSL_write take an int */

int
ol_tls_mem_new(struct ol_tls *t, size_t in_cap, size_t out_cap, struct ol_tls_mem *m)
{
	BIO *ours = NULL, *net = NULL;
	SSL *ssl = ol_tls_ssl_new(t, -1);
	*m = (struct ol_tls_mem){0};
	/* ours: what the session writes (out_cap bytes, read at net); net: what the transport
	 * writes (in_cap bytes, read by the session) */
	if (!ssl || BIO_new_bio_pair(&ours, out_cap, &net, in_cap) != 1) {
		SSL_free(ssl);
		ERR_clear_error();
		return -ENOMEM;
	}
	SSL_set_bio(ssl, ours, ours); /* one reference, owned by the SSL */
	/* a value is written as far as the output buffer takes it, then again from where it
	 * stopped once the buffer was sent */
	SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	m->ssl = ssl;
	m->net = net;
	return 0;
}

void
ol_tls_mem_free(struct ol_tls_mem *m)
{
	if (!m->ssl)
		return;
	SSL_free(m->ssl);
	BIO_free(m->net);
	ERR_clear_error();
	*m = (struct ol_tls_mem){0};
}

size_t
ol_tls_mem_in_room(struct ol_tls_mem *m, uint8_t **p)
{
	char *b = NULL;
	int n = BIO_nwrite0(m->net, &b);
	*p = (uint8_t *)b;
	return n > 0 ? (size_t)n : 0;
}

void
ol_tls_mem_in_commit(struct ol_tls_mem *m, size_t n)
{
	char *b;
	(void)!BIO_nwrite(m->net, &b, (int)n);
}

int
ol_tls_mem_peek(struct ol_tls_mem *m)
{
	char *b = NULL;
	int n = BIO_nread0(SSL_get_rbio(m->ssl), &b);
	return n > 0 ? (uint8_t)b[0] : -1;
}

size_t
ol_tls_mem_out(struct ol_tls_mem *m, const uint8_t **p)
{
	char *b = NULL;
	int n = BIO_nread0(m->net, &b);
	*p = (const uint8_t *)b;
	return n > 0 ? (size_t)n : 0;
}

void
ol_tls_mem_out_done(struct ol_tls_mem *m, size_t n)
{
	char *b;
	(void)!BIO_nread(m->net, &b, (int)n);
}

int
ol_tls_mem_handshake(struct ol_tls_mem *m, char *why, size_t cap)
{
	ERR_clear_error();
	int r = SSL_do_handshake(m->ssl);
	if (r == 1)
		return 1;
	int e = SSL_get_error(m->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	unsigned long code = ERR_get_error();
	if (code)
		ERR_error_string_n(code, why, cap);
	else
		snprintf(why, cap, "%s", e == SSL_ERROR_SYSCALL ? "peer closed" : "protocol error");
	ERR_clear_error();
	return -EPROTO;
}

long
ol_tls_mem_read(struct ol_tls_mem *m, void *dst, size_t n)
{
	ERR_clear_error();
	int r = SSL_read(m->ssl, dst, n > MEM_IO_MAX ? MEM_IO_MAX : (int)n);
	if (r > 0)
		return r;
	int e = SSL_get_error(m->ssl, r);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	return e == SSL_ERROR_ZERO_RETURN ? -ECONNRESET : -EPROTO;
}

long
ol_tls_mem_write(struct ol_tls_mem *m, const void *src, size_t n)
{
	ERR_clear_error();
	int r = SSL_write(m->ssl, src, n > MEM_IO_MAX ? MEM_IO_MAX : (int)n);
	if (r > 0)
		return r;
	int e = SSL_get_error(m->ssl, r);
	ERR_clear_error();
	return e == SSL_ERROR_WANT_WRITE ? 0 : -EPROTO; /* WANT_READ: renegotiation is off */
}

bool
ol_tls_mem_busy(struct ol_tls_mem *m)
{
	return SSL_has_pending(m->ssl) || BIO_ctrl_pending(SSL_get_rbio(m->ssl)) > 0;
}
