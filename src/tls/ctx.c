/* tls/ctx.c - server TLS contexts from PEM files, reloaded on request (see tls.h). */
#include "tls/tls.h"

#include "base/log.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ol_tls {
	pthread_mutex_t mu; /* ctx */
	SSL_CTX *ctx;
	char *who, *cert, *key, *ca;
	ol_tls_setup_fn setup;
	struct ol_tls *next; /* all contexts, under reg_mu */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ol_tls *reg_head;

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

/* Check a file is there and readable first, so the message names it and says why. */
static int
check_file(const char *who, const char *what, const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	int rc = -errno;
	ol_err("%s: TLS %s %s: %s", who, what, path, strerror(-rc));
	return rc;
}

static int
ctx_files(const struct ol_tls *t, SSL_CTX *ctx)
{
	char e[256];
	if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("%s: TLS certificate (cert_path) %s: %s", t->who, t->cert, e);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("%s: TLS key (key_path) %s: %s", t->who, t->key, e);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_err_str(e, sizeof(e));
		ol_err("%s: TLS key (key_path) %s does not match the certificate %s: %s", t->who,
		       t->key, t->cert, e);
		return -EINVAL;
	}
	if (t->ca) {
		if (SSL_CTX_load_verify_locations(ctx, t->ca, NULL) != 1) {
			ssl_err_str(e, sizeof(e));
			ol_err("%s: TLS client CA (client_ca) %s: %s", t->who, t->ca, e);
			return -EINVAL;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return 0;
}

static int
ctx_load(const struct ol_tls *t, SSL_CTX **out)
{
	int rc = check_file(t->who, "certificate (cert_path)", t->cert);
	rc = rc ? rc : check_file(t->who, "key (key_path)", t->key);
	if (!rc && t->ca)
		rc = check_file(t->who, "client CA (client_ca)", t->ca);
	if (rc)
		return rc;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* idle connections hold no buffers */
	if (t->setup)
		t->setup(ctx);
	rc = ctx_files(t, ctx);
	if (rc)
		SSL_CTX_free(ctx);
	else
		*out = ctx;
	return rc;
}

static void
tls_fini(struct ol_tls *t)
{
	free(t->who);
	free(t->cert);
	free(t->key);
	free(t->ca);
	free(t);
}

int
ol_tls_new(const char *who, const char *cert, const char *key, const char *ca,
	   ol_tls_setup_fn setup, struct ol_tls **out)
{
	if (!cert || !*cert || !key || !*key) {
		ol_err("%s: TLS needs both a certificate (cert_path) and a key (key_path)", who);
		return -EINVAL;
	}
	struct ol_tls *t = ol_xcalloc(1, sizeof(*t));
	t->who = ol_xstrdup(who);
	t->cert = ol_xstrdup(cert);
	t->key = ol_xstrdup(key);
	t->ca = ca && *ca ? ol_xstrdup(ca) : NULL;
	t->setup = setup;
	int rc = ctx_load(t, &t->ctx);
	if (rc) {
		tls_fini(t);
		return rc;
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_lock(&reg_mu);
	t->next = reg_head;
	reg_head = t;
	pthread_mutex_unlock(&reg_mu);
	*out = t;
	return 0;
}

void
ol_tls_free(struct ol_tls *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&reg_mu);
	struct ol_tls **pp = &reg_head;
	while (*pp && *pp != t)
		pp = &(*pp)->next;
	if (*pp)
		*pp = t->next;
	pthread_mutex_unlock(&reg_mu);
	SSL_CTX_free(t->ctx);
	pthread_mutex_destroy(&t->mu);
	tls_fini(t);
}

static int
tls_reload(struct ol_tls *t)
{
	SSL_CTX *ctx;
	int rc = ctx_load(t, &ctx);
	if (rc) {
		ol_err("%s: TLS reload failed: keeping the old certificate (%s)", t->who, t->cert);
		return rc;
	}
	pthread_mutex_lock(&t->mu);
	SSL_CTX *old = t->ctx;
	t->ctx = ctx;
	pthread_mutex_unlock(&t->mu);
	SSL_CTX_free(old); /* open connections hold their own reference */
	ol_info("%s: TLS certificate reloaded from %s", t->who, t->cert);
	return 0;
}

int
ol_tls_reload_all(void)
{
	int first = 0;
	pthread_mutex_lock(&reg_mu);
	for (struct ol_tls *t = reg_head; t; t = t->next) {
		int rc = tls_reload(t);
		if (rc && !first)
			first = rc;
	}
	pthread_mutex_unlock(&reg_mu);
	return first;
}

void *
ol_tls_ssl_new(struct ol_tls *t, int fd)
{
	pthread_mutex_lock(&t->mu);
	SSL *ssl = SSL_new(t->ctx);
	pthread_mutex_unlock(&t->mu);
	if (!ssl)
		return NULL;
	if (fd >= 0 && SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_accept_state(ssl);
	return ssl;
}
