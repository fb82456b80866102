/* cmd/openlake/admin_client.c - signed calls to the admin plane (see admin_client.h). */
#include "admin_client.h"

#include "openlake/openlake_s3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *
env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static void
set_keys(struct ol_cli_admin *a, const char *ak, const char *sk, const char *source)
{
	snprintf(a->access_key, sizeof(a->access_key), "%s", ak);
	snprintf(a->secret_key, sizeof(a->secret_key), "%s", sk);
	snprintf(a->key_source, sizeof(a->key_source), "%s", source);
}

int
ol_cli_admin_keys(struct ol_cli_admin *a, const char *cmd, const char *ak, const char *sk,
		  const char *region, const struct ol_config *cfg, const char *cfg_path)
{
	const char *r = region		    ? region
			: env("AWS_REGION") ? env("AWS_REGION")
					    : env("AWS_DEFAULT_REGION");
	if (!ak != !sk) {
		fprintf(stderr, "openlake %s: give both --access-key and --secret-key\n", cmd);
		return -EINVAL;
	}
	if (!r)
		r = cfg ? cfg->region : "us-east-1";
	snprintf(a->region, sizeof(a->region), "%s", r);
	if (ak) {
		set_keys(a, ak, sk, "--access-key/--secret-key");
		return 0;
	}
	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		set_keys(a, env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
			 "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
		return 0;
	}
	for (unsigned i = 0; cfg && i < cfg->n_creds; i++) {
		if (ol_config_cred_is_admin(&cfg->creds[i])) {
			char src[OL_CFG_STR + 32];
			snprintf(src, sizeof(src), "--config %s", cfg_path ? cfg_path : "");
			set_keys(a, cfg->creds[i].access_key, cfg->creds[i].secret_key, src);
			return 0;
		}
	}
	set_keys(a, "openlakeadmin", "openlakeadmin", "the built-in default");
	return 0;
}

int
ol_cli_admin_endpoint(struct ol_cli_admin *a, const char *url)
{
	bool tls = strncmp(url, "https://", 8) == 0;
	const char *p = tls ? url + 8 : strncmp(url, "http://", 7) == 0 ? url + 7 : url;
	char hp[300];
	if (strstr(p, "://"))
		return -EINVAL;
	snprintf(hp, sizeof(hp), "%.*s", (int)strcspn(p, "/"), p);
	bool v6 = hp[0] == '[';
	const char *colon = v6 ? strstr(hp, "]:") : strrchr(hp, ':');
	if (!colon || !colon[v6 ? 2 : 1])
		return -EINVAL;
	const char *port = colon + (v6 ? 2 : 1);
	int hl = (int)(colon - hp - v6);
	if (strspn(port, "0123456789") != strlen(port) || strlen(port) >= sizeof(a->port) ||
	    hl < 0 || (size_t)hl >= sizeof(a->host))
		return -EINVAL;
	snprintf(a->port, sizeof(a->port), "%s", port);
	snprintf(a->host, sizeof(a->host), "%.*s", hl, hp + v6);
	if (!a->host[0] || strcmp(a->host, "0.0.0.0") == 0)
		snprintf(a->host, sizeof(a->host), "127.0.0.1");
	else if (strcmp(a->host, "::") == 0)
		snprintf(a->host, sizeof(a->host), "::1");
	a->tls = tls;
	return 0;
}

bool
ol_cli_admin_tls(struct ol_cli_admin *a, const struct ol_config *cfg)
{
	const char *bundle = env("AWS_CA_BUNDLE");
	a->ca_file[0] = a->cert[0] = a->key[0] = 0;
	if (bundle)
		snprintf(a->ca_file, sizeof(a->ca_file), "%s", bundle);
	if (!cfg || !cfg->s3_tls.cert_path[0])
		return false;
	if (!bundle)
		snprintf(a->ca_file, sizeof(a->ca_file), "%s", cfg->s3_tls.cert_path);
	if (cfg->s3_tls.client_ca[0]) {
		snprintf(a->cert, sizeof(a->cert), "%s", cfg->s3_tls.cert_path);
		snprintf(a->key, sizeof(a->key), "%s", cfg->s3_tls.key_path);
	}
	return true;
}

const char *
ol_cli_admin_scheme(const struct ol_cli_admin *a)
{
	return a->tls ? "https" : "http";
}

/* ---- TLS over the call's blocking socket (its SO_RCVTIMEO / SO_SNDTIMEO bound each step) */

struct conn {
	int fd;
	int wait_ms; /* for each read or write */
	SSL_CTX *ctx;
	SSL *ssl;
};

static void
conn_close(struct conn *c)
{
	SSL_free(c->ssl);
	SSL_CTX_free(c->ctx);
	if (c->fd >= 0)
		close(c->fd);
}

/* the handshake: 0, -EKEYREJECTED (the certificate did not verify), -EPROTO, -ENOMEM,
 * -ENOENT (a CA or certificate file that does not load) */
static int
tls_open(struct ol_cli_admin *a, struct conn *c)
{
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	int rc = -ENOENT;
	if (a->ca_file[0] ? SSL_CTX_load_verify_locations(c->ctx, a->ca_file, NULL) != 1
			  : SSL_CTX_set_default_verify_paths(c->ctx) != 1)
		goto out;
	X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(c->ctx), X509_V_FLAG_PARTIAL_CHAIN);
	if (a->cert[0] && (SSL_CTX_use_certificate_chain_file(c->ctx, a->cert) != 1 ||
			   SSL_CTX_use_PrivateKey_file(c->ctx, a->key, SSL_FILETYPE_PEM) != 1))
		goto out;
	rc = -ENOMEM;
	c->ssl = SSL_new(c->ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
		goto out;
	unsigned char ip[16];
	X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
	bool is_ip = inet_pton(AF_INET, a->host, ip) == 1 || inet_pton(AF_INET6, a->host, ip) == 1;
	if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(vp, a->host)
		  : !X509_VERIFY_PARAM_set1_host(vp, a->host, 0) ||
			!SSL_set_tlsext_host_name(c->ssl, a->host))
		goto out;
	rc = SSL_connect(c->ssl) == 1			  ? 0
	     : SSL_get_verify_result(c->ssl) != X509_V_OK ? -EKEYREJECTED
							  : -EPROTO;
out:
	ERR_clear_error();
	return rc;
}

static int
conn_send(struct conn *c, const void *buf, size_t len)
{
	if (c->ssl)
		return len == 0 || SSL_write(c->ssl, buf, (int)len) == (int)len ? 0 : -EIO;
	return send(c->fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -EIO;
}

/* > 0 bytes, 0 at the end, -errno */
static ssize_t
conn_recv(struct conn *c, void *buf, size_t len)
{
	if (!c->ssl) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		if (poll(&pfd, 1, c->wait_ms) != 1)
			return -ETIMEDOUT;
		ssize_t n = read(c->fd, buf, len);
		return n < 0 ? -errno : n;
	}
	int n = SSL_read(c->ssl, buf, (int)len);
	if (n > 0)
		return n;
	int e = SSL_get_error(c->ssl, n);
	ERR_clear_error();
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0))
		return 0; /* close_notify, or the daemon closed the socket */
	return e == SSL_ERROR_SYSCALL && errno ? -errno : -EPROTO;
}

int
ol_cli_tcp_connect(const char *host, const char *port, int timeout_ms)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *p;
	int rc = -ECONNREFUSED;
	if (getaddrinfo(host, port, &hints, &ai))
		return -EHOSTUNREACH;
	for (p = ai; p; p = p->ai_next) {
		int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, p->ai_addr, p->ai_addrlen) < 0 && errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			continue;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int err = 0;
		socklen_t len = sizeof(err);
		if (poll(&pfd, 1, timeout_ms) == 1 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			freeaddrinfo(ai);
			return fd;
		}
		rc = err ? -err : -ETIMEDOUT;
		close(fd);
	}
	freeaddrinfo(ai);
	return rc;
}

/* Read until the peer closes (Connection: close). 0, -ETIMEDOUT, -EMSGSIZE or -errno. */
static int
read_all(struct conn *c, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	for (;;) {
		ssize_t n = conn_recv(c, buf + *len, cap - 1 - *len);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		*len += (size_t)n;
		if (*len >= cap - 1)
			return -EMSGSIZE;
	}
	buf[*len] = 0;
	return 0;
}

int
ol_cli_admin_call(struct ol_cli_admin *a, const char *method, const char *path, const char *query,
		  size_t cap, char **body)
{
	return ol_cli_admin_call_body(a, method, path, query, NULL, 0, cap, body);
}

int
ol_cli_admin_call_body(struct ol_cli_admin *a, const char *method, const char *path,
		       const char *query, const char *send_body, size_t send_len, size_t cap,
		       char **body)
{
	struct ol_s3_signer s = {
	    .access_key = a->access_key, .secret_key = a->secret_key, .region = a->region};
	char host[300], req[4096], hash[65] = OL_S3_EMPTY_SHA256, *buf = NULL;
	unsigned char md[32];
	size_t len = 0;
	int n, rc;
	struct conn c = {.fd = -1};

	*body = NULL;
	if (send_len) {
		SHA256((const unsigned char *)send_body, send_len, md);
		for (int i = 0; i < 32; i++)
			snprintf(hash + 2 * i, 3, "%02x", md[i]);
	}
	snprintf(host, sizeof(host), strchr(a->host, ':') ? "[%s]:%s" : "%s:%s", a->host, a->port);
	n = snprintf(req, sizeof(req), "%s %s%s%s HTTP/1.1\r\nHost: %s\r\n", method, path,
		     *query ? "?" : "", query, host);
	size_t k = n > 0 && (size_t)n < sizeof(req)
		       ? ol_s3_sign(&s, method, path, query, host, hash, NULL, 0, time(NULL),
				    req + n, sizeof(req) - (size_t)n)
		       : 0;
	int m = k ? snprintf(req + n + k, sizeof(req) - (size_t)n - k,
			     "Accept: application/json\r\n%sContent-Length: %zu\r\nConnection: "
			     "close\r\n\r\n",
			     send_len ? "Content-Type: application/json\r\n" : "", send_len)
		  : -1;
	if (m < 0 || (size_t)m >= sizeof(req) - (size_t)n - k)
		return -ENAMETOOLONG;
	n += (int)k + m;
	c.fd = ol_cli_tcp_connect(a->host, a->port, 3000);
	if (c.fd < 0)
		return c.fd;
	c.wait_ms = a->wait_ms > 0 ? a->wait_ms : 10000;
	struct timeval tv = {.tv_sec = c.wait_ms / 1000, .tv_usec = (c.wait_ms % 1000) * 1000};
	(void)setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	buf = malloc(cap);
	rc = !buf ? -ENOMEM : a->tls ? tls_open(a, &c) : 0;
	if (!rc)
		rc = conn_send(&c, req, (size_t)n);
	if (!rc && send_len)
		rc = conn_send(&c, send_body, send_len);
	if (!rc)
		rc = read_all(&c, buf, cap, &len);
	if (!rc && (len < 12 || strncmp(buf, "HTTP/1.", 7)))
		rc = -EPROTO;
	if (!rc) {
		char *b = strstr(buf, "\r\n\r\n");
		rc = (int)strtol(buf + 9, NULL, 10);
		*body = b && b[4] ? strdup(b + 4) : NULL;
	}
	free(buf);
	conn_close(&c);
	return rc;
}

/* The text of <name>...</name> in an XML error, or "" (out has cap bytes). */
static void
xml_elem(const char *xml, const char *name, char *out, size_t cap)
{
	char open[40];
	const char *p, *e;
	snprintf(open, sizeof(open), "<%s>", name);
	out[0] = 0;
	p = xml ? strstr(xml, open) : NULL;
	if (!p)
		return;
	p += strlen(open);
	e = strchr(p, '<');
	snprintf(out, cap, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
}

void
ol_cli_admin_refused(const struct ol_cli_admin *a, const char *cmd, int status, const char *body)
{
	char code[64], msg[512];
	const char *why;
	xml_elem(body, "Code", code, sizeof(code));
	xml_elem(body, "Message", msg, sizeof(msg));
	if (strcmp(code, "SignatureDoesNotMatch") == 0)
		why = "the secret key is wrong for this access key";
	else if (strcmp(code, "InvalidAccessKeyId") == 0)
		why = "the daemon has no such access key in its [[credentials]]";
	else if (strcmp(code, "AccessDenied") == 0)
		why =
		    "this key is not an admin user's (the admin API needs a [[credentials]] entry "
		    "without user, or with admin = true)";
	else if (strcmp(code, "RequestTimeTooSkewed") == 0)
		why = "this host's clock and the daemon's differ by more than 15 minutes";
	else if (strcmp(code, "AuthorizationHeaderMalformed") == 0)
		why = "the request was signed for another region (see --region)";
	else
		why = "the daemon refused the request";
	fprintf(stderr, "openlake %s: refused (%d %s): %s.\n", cmd, status,
		code[0] ? code : "no error code", why);
	if (msg[0])
		fprintf(stderr, "  daemon says: %s\n", msg);
	fprintf(stderr,
		"  used access key '%s' (from %s), region %s.\n"
		"  fix: give an admin key with --access-key KEY --secret-key SECRET, or set\n"
		"  AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or --config FILE with the daemon's "
		"config.\n",
		a->access_key, a->key_source, a->region);
}
