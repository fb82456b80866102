/* client/tls.c - libopenlake over TLS (opts.tls): one client SSL_CTX, a handshake per TCP
 * connection, the server's certificate verified against opts.ca_file (else the system's
 * store) and its name or IP address against the node's host (or opts.server_name). */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_int.h"
#include "kv/net.h"

/* The client's own certificate and key (for a node with [kv_tls] client_ca). */
static int
client_cert(struct ol_client *c, SSL_CTX *ctx, const char *cert, const char *key)
{
	if (!cert || !cert[0])
		return 0;
	const char *k = key && key[0] ? key : cert;
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) == 1 &&
	    SSL_CTX_use_PrivateKey_file(ctx, k, SSL_FILETYPE_PEM) == 1 &&
	    SSL_CTX_check_private_key(ctx) == 1)
		return 0;
	char buf[160];
	ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
	ERR_clear_error();
	olc_log(c, OL_CLIENT_LOG_ERROR, "openlake: TLS client certificate %s / key %s: %s", cert, k,
		buf);
	return -EINVAL;
}

int
olc_tls_init(struct ol_client *c, const char *ca_file, const char *server_name,
	     const char *cert_file, const char *key_file)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	int ok = ca_file && ca_file[0] ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
				       : SSL_CTX_set_default_verify_paths(ctx);
	if (ok != 1) {
		unsigned long e = ERR_get_error();
		char buf[160];
		ERR_error_string_n(e, buf, sizeof(buf));
		ERR_clear_error();
		olc_log(c, OL_CLIENT_LOG_ERROR, "openlake: TLS CA file %s: %s",
			ca_file && ca_file[0] ? ca_file : "(system)", buf);
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (client_cert(c, ctx, cert_file, key_file) < 0) {
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (server_name && server_name[0] && !(c->tls_name = strdup(server_name))) {
		SSL_CTX_free(ctx);
		return -ENOMEM;
	}
	c->ssl_ctx = ctx;
	return 0;
}

void
olc_tls_fini(struct ol_client *c)
{
	SSL_CTX_free(c->ssl_ctx);
	free(c->tls_name);
}

/* The name the certificate must carry: opts.server_name, else the host part of addr. */
static int
peer_name(SSL *ssl, const char *name, const char *addr)
{
	char host[256];
	if (!name) {
		const char *colon = strrchr(addr, ':');
		size_t l = colon ? (size_t)(colon - addr) : strlen(addr);
		if (l >= 2 && addr[0] == '[' && addr[l - 1] == ']')
			addr++, l -= 2;
		if (l >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr, l);
		host[l] = '\0';
		name = host;
	}
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
	if (is_ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -EINVAL;
	if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1)
		return -EINVAL;
	return 0;
}

int
olc_tls_connect(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn)
{
	SSL *ssl = SSL_new(c->ssl_ctx);
	if (!ssl)
		return -ENOMEM;
	int r = SSL_set_fd(ssl, cn->fd) == 1 ? peer_name(ssl, c->tls_name, nd->addr) : -ENOMEM;
	struct kvnet_sigpipe sp;
	kvnet_sigpipe_block(&sp);
	int done = r == 0 ? SSL_connect(ssl) : 0;
	kvnet_sigpipe_unblock(&sp);
	if (done == 1) {
		cn->ssl = ssl;
		return 0;
	}
	if (r == 0) {
		long v = SSL_get_verify_result(ssl);
		unsigned long e = ERR_get_error();
		char buf[160] = "";
		if (e)
			ERR_error_string_n(e, buf, sizeof(buf));
		olc_log(c, OL_CLIENT_LOG_ERROR, "openlake: node %s: TLS handshake failed: %s%s",
			nd->addr,
			v != X509_V_OK ? X509_verify_cert_error_string(v)
				       : (buf[0] ? buf
						 : "the node closed the connection (is its "
						   "KV port plaintext? then connect without tls)"),
			v != X509_V_OK ? " (check ca_file / server_name)" : "");
		r = v != X509_V_OK ? -EKEYREJECTED : -EPROTO;
	}
	ERR_clear_error();
	SSL_free(ssl);
	return r;
}

void
olc_conn_close(struct olc_conn *cn)
{
	olc_ucx_close(cn);
	if (cn->ssl) {
		SSL_free(cn->ssl); /* no close_notify: the server reads EOF as a close either way */
		ERR_clear_error();
		cn->ssl = NULL;
	}
	if (cn->fd >= 0)
		close(cn->fd);
	cn->fd = -1;
}
