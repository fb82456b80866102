/* http/proxy.c - forward a request to another HTTP server and relay its answer, streaming both
 * bodies, over a small pool of keep-alive connections. See http.h ("reverse proxy"). */
#include "http/http.h"
#include "io/io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define PROXY_BUF     (256u << 10) /* body bytes moved per read */
#define POOL_MAX_AGE  10000	   /* ms an idle upstream connection is kept */
#define POOL_MAX_IDLE 64

/* a connection to an upstream: its socket and, with TLS, its session */
struct up {
	int fd;
	SSL *ssl;
};

struct pooled {
	struct up c;
	char addr[64];
	int64_t since_ms;
};

struct ol_http_proxy {
	struct ol_http_proxy_opts o;
	/* o.tls: the context new connections are made from (under mu: a reload swaps it; each
	 * SSL holds a reference on its own) and the files it is built from */
	SSL_CTX *ctx;
	char ca[3][512], cert[512], cert_key[512];
	pthread_mutex_t mu;
	struct pooled idle[POOL_MAX_IDLE];
	unsigned n_idle;
	_Atomic uint64_t forwarded, failed, reused;
	uint8_t key[OL_HTTP_CLIENT_KEY]; /* o.client_key points here when one was given */
};

static int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------- pure: the forwarded head, the upstream's response head ---------------- */

#define VOUCH "x-openlake-client"

/* hex HMAC-SHA256 of what a vouch covers (see http.h) into out[65] */
static void
vouch_mac(const uint8_t *key, const char *method, const char *target, const char *ip, bool tls,
	  const char *date, char out[65])
{
	uint8_t mac[32];
	unsigned ml = 0;
	size_t n = strlen(method) + strlen(target) + strlen(ip) + strlen(date) + 8;
	char *msg = malloc(n);
	if (!msg) {
		out[0] = 0;
		return;
	}
	int len = snprintf(msg, n, "%s\n%s\n%s\n%d\n%s", method, target, ip, tls ? 1 : 0, date);
	HMAC(EVP_sha256(), key, OL_HTTP_CLIENT_KEY, (const uint8_t *)msg, (size_t)len, mac, &ml);
	free(msg);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

static const char *
find_header(const struct ol_http_header *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(h[i].name, name))
			return h[i].value;
	return NULL;
}

static const char *
vouch_date(const struct ol_http_header *h, size_t n)
{
	const char *d = find_header(h, n, "x-amz-date");
	if (!d)
		d = find_header(h, n, "date");
	return d ? d : "";
}

static bool
hop_by_hop(const char *name)
{
	static const char *const hop[] = {
	    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te",
	    "upgrade",	  VOUCH};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (!strcasecmp(name, hop[i]))
			return true;
	return false;
}

ssize_t
ol_http_proxy_head(const char *method, const char *target, const struct ol_http_header *h, size_t n,
		   const char *peer, bool tls, const uint8_t *client_key, char *buf, size_t cap)
{
	size_t used = 0;
	int k = snprintf(buf, cap, "%s %s HTTP/1.1\r\n", method, target);
	if (k < 0 || (size_t)k >= cap)
		return -EMSGSIZE;
	used = (size_t)k;
	for (size_t i = 0; i < n; i++) {
		if (hop_by_hop(h[i].name))
			continue;
		k = snprintf(buf + used, cap - used, "%s: %s\r\n", h[i].name, h[i].value);
		if (k < 0 || (size_t)k >= cap - used)
			return -EMSGSIZE;
		used += (size_t)k;
	}
	/* the client's address without its port ("[::1]:5" -> "::1", "1.2.3.4:5" -> 1.2.3.4) */
	const char *colon = peer ? strrchr(peer, ':') : NULL;
	size_t pl = colon ? (size_t)(colon - peer) : (peer ? strlen(peer) : 0);
	const char *ip = peer ? peer : "";
	if (pl >= 2 && ip[0] == '[' && ip[pl - 1] == ']') {
		ip++;
		pl -= 2;
	}
	k = snprintf(buf + used, cap - used, "X-Forwarded-For: %.*s\r\n", (int)pl, ip);
	if (k < 0 || (size_t)k >= cap - used)
		return -EMSGSIZE;
	used += (size_t)k;
	if (client_key) {
		char addr[64], mac[65];
		if (pl >= sizeof(addr))
			return -EMSGSIZE;
		memcpy(addr, ip, pl);
		addr[pl] = 0;
		vouch_mac(client_key, method, target, addr, tls, vouch_date(h, n), mac);
		if (!mac[0])
			return -ENOMEM;
		k = snprintf(buf + used, cap - used, "X-OpenLake-Client: %s %d %s\r\n", addr,
			     tls ? 1 : 0, mac);
		if (k < 0 || (size_t)k >= cap - used)
			return -EMSGSIZE;
		used += (size_t)k;
	}
	if (cap - used < 3)
		return -EMSGSIZE;
	memcpy(buf + used, "\r\n", 3);
	return (ssize_t)(used + 2);
}

int
ol_http_proxy_vouched(const struct ol_http_req *r, const uint8_t *key, char *ip, size_t cap,
		      bool *tls)
{
	const char *v = NULL;
	for (size_t i = 0; i < r->n_headers; i++) {
		if (strcasecmp(r->headers[i].name, VOUCH))
			continue;
		if (v)
			return -EBADMSG;
		v = r->headers[i].value;
	}
	if (!v)
		return -ENOENT;
	const char *sp1 = strchr(v, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp2 - sp1 != 2 || (sp1[1] != '0' && sp1[1] != '1') ||
	    strlen(sp2 + 1) != 64)
		return -EBADMSG;
	size_t al = (size_t)(sp1 - v);
	if (al >= cap)
		return -EMSGSIZE;
	memcpy(ip, v, al);
	ip[al] = 0;
	char mac[65];
	vouch_mac(key, r->method, r->target, ip, sp1[1] == '1',
		  vouch_date(r->headers, r->n_headers), mac);
	if (!mac[0] || CRYPTO_memcmp(mac, sp2 + 1, 64))
		return -EBADMSG;
	*tls = sp1[1] == '1';
	return 0;
}

/* a header value that must be a decimal count */
static int
parse_count(const char *v, int64_t *out)
{
	char *end;
	errno = 0;
	if (*v < '0' || *v > '9')
		return -EPROTO;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || *end || x > (unsigned long long)INT64_MAX)
		return -EPROTO;
	*out = (int64_t)x;
	return 0;
}

static char *
trim(char *s, char *e)
{
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = 0;
	return s;
}

/* one "Name: value" line in place (line NUL-terminated, no CR LF) */
static int
resp_header(struct ol_http_resp_head *h, char *line)
{
	char *colon = strchr(line, ':');
	if (!colon || colon == line || h->n_headers == OL_HTTP_RESP_MAX_HEADERS)
		return colon && colon != line ? -EMSGSIZE : -EPROTO;
	for (char *p = line; p < colon; p++)
		if (*p <= ' ' || *p >= 127)
			return -EPROTO;
	*colon = 0;
	const char *v = trim(colon + 1, colon + 1 + strlen(colon + 1));
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < ' ' && *p != '\t')
			return -EPROTO;
	h->headers[h->n_headers++] = (struct ol_http_header){line, v};
	if (!strcasecmp(line, "content-length")) {
		int64_t cl;
		if (parse_count(v, &cl) || (h->content_length >= 0 && h->content_length != cl))
			return -EPROTO;
		h->content_length = cl;
	} else if (!strcasecmp(line, "transfer-encoding")) {
		if (strcasecmp(v, "chunked"))
			return -EPROTO; /* nothing else is relayed */
		h->chunked = true;
	} else if (!strcasecmp(line, "connection") && strcasestr(v, "close")) {
		h->close = true;
	}
	return 0;
}

int
ol_http_parse_response(const char *buf, size_t len, struct ol_http_resp_head *h)
{
	const char *end = NULL;
	for (size_t i = 3; i < len && !end; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			end = buf + i + 1;
	if (!end)
		return len >= OL_HTTP_RESP_MAX_HEAD ? -EMSGSIZE : 0;
	size_t hl = (size_t)(end - buf);
	if (hl > OL_HTTP_RESP_MAX_HEAD)
		return -EMSGSIZE;
	memcpy(h->mem, buf, hl);
	h->mem[hl - 2] = 0; /* the last CRLF of the blank line */
	h->n_headers = 0;
	h->content_length = -1;
	h->chunked = h->close = false;
	if (memchr(h->mem, 0, hl - 2))
		return -EPROTO;
	char *line = h->mem, *nl = strstr(line, "\r\n");
	*nl = 0;
	/* "HTTP/1.x SSS reason" */
	if (strncmp(line, "HTTP/1.", 7) || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
	    line[9] < '1' || line[9] > '5' || line[10] < '0' || line[10] > '9' || line[11] < '0' ||
	    line[11] > '9' || (line[12] != ' ' && line[12] != 0))
		return -EPROTO;
	h->version_minor = line[7] - '0';
	h->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	h->close = h->version_minor == 0;
	for (line = nl + 2; *line; line = nl + 2) {
		nl = strstr(line, "\r\n");
		if (!nl)
			return -EPROTO;
		*nl = 0;
		int rc = resp_header(h, line);
		if (rc)
			return rc;
	}
	if (h->chunked && h->content_length >= 0)
		return -EPROTO;
	return (int)hl;
}

/* ---------------- sockets ---------------- */

static int
wait_fd(int fd, short ev, int timeout_ms)
{
	struct pollfd p = {fd, ev, 0};
	int rc;
	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	return rc == 0 ? -ETIMEDOUT : 0;
}

static void
up_close(struct up *c)
{
	if (c->ssl) {
		SSL_free(c->ssl); /* no close_notify: the socket goes now either way */
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* after an SSL call returned k <= 0: 0 once what it wants (readable, writable) came (call it
 * again), or -errno */
static int
ssl_wait(const struct up *c, int k, int timeout_ms)
{
	int e = SSL_get_error(c->ssl, k);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ)
		return wait_fd(c->fd, POLLIN, timeout_ms);
	if (e == SSL_ERROR_WANT_WRITE)
		return wait_fd(c->fd, POLLOUT, timeout_ms);
	if (e == SSL_ERROR_SYSCALL && errno && errno != EAGAIN)
		return -errno;
	return -EPROTO;
}

static int
send_all(struct up *c, const void *buf, size_t len, int timeout_ms)
{
	const char *p = buf;
	while (c->ssl && len) {
		int k = SSL_write(c->ssl, p, len > INT32_MAX ? INT32_MAX : (int)len);
		if (k > 0) {
			p += k;
			len -= (size_t)k;
			continue;
		}
		int rc = ssl_wait(c, k, timeout_ms);
		if (rc)
			return rc;
	}
	int fd = c->fd;
	while (len) {
		ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
		if (k < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLOUT, timeout_ms);
			if (rc)
				return rc;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* > 0 bytes, 0 at the end of the stream, -errno */
static ssize_t
recv_some(struct up *c, void *buf, size_t len, int timeout_ms)
{
	while (c->ssl) {
		int k = SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
		if (k > 0)
			return k;
		int e = SSL_get_error(c->ssl, k);
		if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
			ERR_clear_error(); /* close_notify, or the peer closed the socket */
			return 0;
		}
		int rc = ssl_wait(c, k, timeout_ms);
		if (rc)
			return rc;
	}
	int fd = c->fd;
	for (;;) {
		ssize_t k = recv(fd, buf, len, 0);
		if (k >= 0)
			return k;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		int rc = wait_fd(fd, POLLIN, timeout_ms);
		if (rc)
			return rc;
	}
}

/* the TLS handshake with addr's host on c->fd: its certificate must name that host. 0 or
 * -errno (-EKEYREJECTED: its certificate did not verify; -EPROTO: the handshake failed) */
static int
tls_connect(struct ol_http_proxy *p, struct up *c, const char *addr, int timeout_ms)
{
	char host[256];
	const char *h = addr, *e = strrchr(addr, ':');
	size_t hl = e ? (size_t)(e - addr) : strlen(addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	pthread_mutex_lock(&p->mu);
	c->ssl = SSL_new(p->ctx);
	pthread_mutex_unlock(&p->mu);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
		return -ENOMEM;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
	if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(vp, host)
		  : !X509_VERIFY_PARAM_set1_host(vp, host, 0) ||
			!SSL_set_tlsext_host_name(c->ssl, host))
		return -EINVAL;
	int64_t end = now_ms() + timeout_ms;
	for (;;) {
		int k = SSL_connect(c->ssl);
		if (k == 1)
			return 0;
		int left = (int)(end - now_ms());
		int e2 = SSL_get_error(c->ssl, k);
		if (left <= 0 || (e2 != SSL_ERROR_WANT_READ && e2 != SSL_ERROR_WANT_WRITE)) {
			bool bad_cert = SSL_get_verify_result(c->ssl) != X509_V_OK;
			ERR_clear_error();
			return left <= 0 ? -ETIMEDOUT : bad_cert ? -EKEYREJECTED : -EPROTO;
		}
		int rc = ssl_wait(c, k, left);
		if (rc)
			return rc;
	}
}

/* addr: "host:port", "[v6]:port" or "name:port" (ol_io_connect: every address tried in turn),
 * made non-blocking, with TCP_USER_TIMEOUT: unacknowledged bytes fail the forward; with TLS,
 * after the handshake. 0 or -errno */
static int
connect_to(struct ol_http_proxy *p, struct up *c, const char *addr)
{
	int timeout_ms = (int)p->o.connect_timeout_ms;
	unsigned user_timeout_ms = p->o.user_timeout_ms;
	c->ssl = NULL;
	c->fd = ol_io_connect(addr, timeout_ms);
	if (c->fd < 0)
		return c->fd;
	int fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int rc = -errno;
		up_close(c);
		return rc;
	}
	(void)setsockopt(c->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
			 sizeof(user_timeout_ms));
	int rc = p->ctx ? tls_connect(p, c, addr, timeout_ms) : 0;
	if (rc)
		up_close(c);
	return rc;
}

/* ---------------- the pool ---------------- */

/* A TLS connection readable while idle: only TLS records that carry no data (a TLS 1.3
 * session ticket) keep it usable; SSL_peek consumes those and says whether data or the end
 * came. */
static bool
tls_idle_ok(struct up *c)
{
	char b;
	int k = SSL_peek(c->ssl, &b, 1);
	bool ok = k <= 0 && SSL_get_error(c->ssl, k) == SSL_ERROR_WANT_READ;
	ERR_clear_error();
	return ok;
}

/* an idle connection to addr that is still open (true, *out), or false */
static bool
pool_get(struct ol_http_proxy *p, const char *addr, struct up *out)
{
	int64_t now = now_ms();
	bool got = false;
	pthread_mutex_lock(&p->mu);
	for (unsigned i = p->n_idle; i-- > 0 && !got;) {
		struct pooled *e = &p->idle[i];
		if (strcmp(e->addr, addr))
			continue;
		struct up c = e->c;
		bool fresh = now - e->since_ms < POOL_MAX_AGE;
		*e = p->idle[--p->n_idle];
		struct pollfd pf = {c.fd, POLLIN, 0};
		/* readable while idle = closed by the upstream (or garbage): never reused */
		if (fresh && (poll(&pf, 1, 0) == 0 || (c.ssl && tls_idle_ok(&c)))) {
			*out = c;
			got = true;
		} else {
			up_close(&c);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return got;
}

static void
pool_put(struct ol_http_proxy *p, const char *addr, struct up *c)
{
	pthread_mutex_lock(&p->mu);
	if (p->n_idle == POOL_MAX_IDLE || strlen(addr) >= sizeof(p->idle[0].addr)) {
		pthread_mutex_unlock(&p->mu);
		up_close(c);
		return;
	}
	struct pooled *e = &p->idle[p->n_idle++];
	e->c = *c;
	c->fd = -1;
	c->ssl = NULL;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	e->since_ms = now_ms();
	pthread_mutex_unlock(&p->mu);
}

/* the client context for TLS upstreams (o.tls): TLS >= 1.2, the peer verified against the
 * ca files (a certificate there trusted on its own: one certificate shared by every node works
 * as well as a CA), the cert shown when asked. 0 and *out, -EINVAL (a file that does not
 * load), -ENOMEM */
static int
tls_ctx(const struct ol_http_proxy *p, SSL_CTX **out)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int n = 0, rc = -EINVAL;
	if (!ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	for (int i = 0; i < 3; i++) {
		if (!p->ca[i][0])
			continue;
		if (SSL_CTX_load_verify_locations(ctx, p->ca[i], NULL) != 1)
			goto out;
		n++;
	}
	if (!n && SSL_CTX_set_default_verify_paths(ctx) != 1)
		goto out;
	X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(ctx), X509_V_FLAG_PARTIAL_CHAIN);
	if (p->cert[0] && (SSL_CTX_use_certificate_chain_file(ctx, p->cert) != 1 ||
			   SSL_CTX_use_PrivateKey_file(ctx, p->cert_key, SSL_FILETYPE_PEM) != 1 ||
			   SSL_CTX_check_private_key(ctx) != 1))
		goto out;
	*out = ctx;
	ctx = NULL;
	rc = 0;
out:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return rc;
}

int
ol_http_proxy_reload_tls(struct ol_http_proxy *p)
{
	SSL_CTX *ctx = NULL, *old;
	if (!p || !p->o.tls)
		return 0;
	int rc = tls_ctx(p, &ctx);
	if (rc)
		return rc;
	pthread_mutex_lock(&p->mu);
	old = p->ctx;
	p->ctx = ctx;
	pthread_mutex_unlock(&p->mu);
	SSL_CTX_free(old); /* connections made from it keep their reference */
	return 0;
}

int
ol_http_proxy_new(const struct ol_http_proxy_opts *o, struct ol_http_proxy **out)
{
	struct ol_http_proxy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->o = *o;
	if (o->client_key) {
		memcpy(p->key, o->client_key, sizeof(p->key));
		p->o.client_key = p->key;
	}
	if (!p->o.connect_timeout_ms)
		p->o.connect_timeout_ms = 2000;
	if (!p->o.io_timeout_ms)
		p->o.io_timeout_ms = 120000;
	if (!p->o.user_timeout_ms)
		p->o.user_timeout_ms = 10000;
	for (int i = 0; i < 3; i++)
		if (o->tls_ca[i] && strlen(o->tls_ca[i]) < sizeof(p->ca[i]))
			snprintf(p->ca[i], sizeof(p->ca[i]), "%s", o->tls_ca[i]);
	if (o->tls_cert && strlen(o->tls_cert) < sizeof(p->cert) && o->tls_key &&
	    strlen(o->tls_key) < sizeof(p->cert_key)) {
		snprintf(p->cert, sizeof(p->cert), "%s", o->tls_cert);
		snprintf(p->cert_key, sizeof(p->cert_key), "%s", o->tls_key);
	}
	memset(p->o.tls_ca, 0, sizeof(p->o.tls_ca)); /* copied above */
	p->o.tls_cert = p->o.tls_key = NULL;
	if (o->tls) {
		int rc = tls_ctx(p, &p->ctx);
		if (rc) {
			free(p);
			return rc;
		}
	}
	pthread_mutex_init(&p->mu, NULL);
	*out = p;
	return 0;
}

void
ol_http_proxy_free(struct ol_http_proxy *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n_idle; i++)
		up_close(&p->idle[i].c);
	SSL_CTX_free(p->ctx);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

void
ol_http_proxy_stats(const struct ol_http_proxy *p, uint64_t *forwarded, uint64_t *failed,
		    uint64_t *reused)
{
	*forwarded = atomic_load(&p->forwarded);
	*failed = atomic_load(&p->failed);
	*reused = atomic_load(&p->reused);
}

/* ---------------- forwarding ---------------- */

struct fwd {
	struct ol_http_proxy *p;
	struct ol_http_req *r;
	struct up c;
	char *buf;	   /* PROXY_BUF */
	size_t len;	   /* response bytes read past the head */
	bool body_started; /* a byte of the client's body may have been taken */
	struct ol_http_resp_head head;
};

/* the request body, streamed (re-chunked when the client chunked it). 0, -EPIPE-like for the
 * upstream (it may have answered early), -ECONNABORTED for the client's side */
static int
send_body(struct fwd *f)
{
	struct ol_http_req *r = f->r;
	if (!r->chunked && r->content_length <= 0)
		return 0;
	int to = (int)f->p->o.io_timeout_ms;
	f->body_started = true;
	for (;;) {
		ssize_t k = ol_http_body_read(r, f->buf, PROXY_BUF);
		if (k < 0)
			return -ECONNABORTED;
		if (k == 0)
			break;
		int rc = 0;
		if (r->chunked) {
			char pre[24];
			int pl = snprintf(pre, sizeof(pre), "%zx\r\n", (size_t)k);
			rc = send_all(&f->c, pre, (size_t)pl, to);
		}
		rc = rc ? rc : send_all(&f->c, f->buf, (size_t)k, to);
		if (!rc && r->chunked)
			rc = send_all(&f->c, "\r\n", 2, to);
		if (rc)
			return rc;
	}
	return r->chunked ? send_all(&f->c, "0\r\n\r\n", 5, to) : 0;
}

/* read the response head (1xx answers skipped); 0, -ENODATA when the upstream closed before
 * a byte of it, -errno */
static int
read_head(struct fwd *f)
{
	f->len = 0;
	for (;;) {
		if (f->len) {
			int hl = ol_http_parse_response(f->buf, f->len, &f->head);
			if (hl < 0)
				return hl;
			if (hl > 0 && f->head.status < 200) {
				memmove(f->buf, f->buf + hl, f->len - (size_t)hl);
				f->len -= (size_t)hl;
				continue;
			}
			if (hl > 0) {
				memmove(f->buf, f->buf + hl, f->len - (size_t)hl);
				f->len -= (size_t)hl;
				return 0;
			}
		}
		if (f->len == PROXY_BUF)
			return -EMSGSIZE;
		ssize_t k = recv_some(&f->c, f->buf + f->len, PROXY_BUF - f->len,
				      (int)f->p->o.io_timeout_ms);
		if (k == 0)
			return f->len ? -EPROTO : -ENODATA;
		if (k < 0)
			return (int)k;
		f->len += (size_t)k;
	}
}

static int
respond_head(struct fwd *f, bool nobody)
{
	struct ol_http_header hs[OL_HTTP_RESP_MAX_HEADERS];
	size_t n = 0;
	for (size_t i = 0; i < f->head.n_headers; i++) {
		const char *name = f->head.headers[i].name;
		if (!hop_by_hop(name) && strcasecmp(name, "transfer-encoding") &&
		    strcasecmp(name, "content-length"))
			hs[n++] = f->head.headers[i];
	}
	int64_t cl = f->head.content_length;
	if (nobody && cl < 0)
		cl = 0;
	return ol_http_respond(f->r, f->head.status, hs, n, f->head.chunked ? -1 : cl);
}

/* relay the response body; 0 when it ended cleanly (the upstream connection reusable) */
static int
relay_body(struct fwd *f, bool nobody)
{
	int to = (int)f->p->o.io_timeout_ms;
	if (nobody)
		return f->len ? -EPROTO : 0;
	int64_t left = f->head.content_length;
	bool until_close = !f->head.chunked && left < 0;
	struct ol_http_chunked ch;
	ol_http_chunked_init(&ch);
	for (;;) {
		size_t off = 0;
		while (off < f->len) {
			const char *d = f->buf + off;
			size_t dl = f->len - off, used = dl;
			if (f->head.chunked) {
				ssize_t k =
				    ol_http_chunked_feed(&ch, f->buf + off, f->len - off, &d, &dl);
				if (k < 0)
					return (int)k;
				used = (size_t)k;
			} else if (left >= 0 && (int64_t)dl > left) {
				return -EPROTO; /* more than announced */
			}
			if (dl && ol_http_write(f->r, d, dl))
				return -ECONNABORTED;
			if (left >= 0)
				left -= (int64_t)dl;
			off += used;
			if (f->head.chunked && ol_http_chunked_done(&ch))
				return off == f->len ? 0 : -EPROTO;
			if (!used)
				break;
		}
		f->len = 0;
		if (left == 0 && !f->head.chunked)
			return 0;
		ssize_t k = recv_some(&f->c, f->buf, PROXY_BUF, to);
		if (k == 0)
			return until_close ? 1 : -EPROTO; /* 1: done, not reusable */
		if (k < 0)
			return (int)k;
		f->len = (size_t)k;
	}
}

/* send the head (and the body) on f->c; 0 or -errno */
static int
send_request(struct fwd *f, const char *head, size_t hl, int *body_rc)
{
	int rc = send_all(&f->c, head, hl, (int)f->p->o.io_timeout_ms);
	*body_rc = 0;
	if (!rc) {
		*body_rc = send_body(f);
		if (*body_rc == -ECONNABORTED)
			rc = *body_rc;
	}
	return rc;
}

int
ol_http_proxy_forward(struct ol_http_proxy *p, struct ol_http_req *r, const char *upstream)
{
	struct fwd *f = calloc(1, sizeof(*f));
	char *head = malloc(OL_HTTP_RESP_MAX_HEAD + 1024);
	int rc = f && head ? 0 : -ENOMEM;
	if (rc)
		goto out;
	f->p = p;
	f->r = r;
	f->c.fd = -1;
	f->buf = malloc(PROXY_BUF);
	ssize_t hl =
	    f->buf ? ol_http_proxy_head(r->method, r->target, r->headers, r->n_headers, r->peer,
					r->tls, p->o.client_key, head, OL_HTTP_RESP_MAX_HEAD + 1024)
		   : -ENOMEM;
	if (hl < 0) {
		rc = (int)hl;
		goto out;
	}
	bool has_body = r->chunked || r->content_length > 0;
	bool nobody = !strcmp(r->method, "HEAD");
	int body_rc = 0;
	/* a pooled connection the upstream closed in the meantime: once more on a fresh one,
	 * which is safe while no body byte was taken from the client */
	for (int attempt = 0; attempt < 2; attempt++) {
		bool pooled = attempt == 0 && pool_get(p, upstream, &f->c);
		if (pooled)
			atomic_fetch_add(&p->reused, 1);
		if (!pooled && (rc = connect_to(p, &f->c, upstream)))
			goto out;
		rc = send_request(f, head, (size_t)hl, &body_rc);
		if (!rc)
			rc = read_head(f);
		if (!rc || !pooled || has_body || rc == -ECONNABORTED)
			break;
		up_close(&f->c);
	}
	if (rc)
		goto out;
	atomic_fetch_add(&p->forwarded, 1);
	nobody = nobody || f->head.status == 204 || f->head.status == 304;
	rc = respond_head(f, nobody);
	if (rc) {
		rc = -ECONNABORTED;
		goto out;
	}
	int brc = relay_body(f, nobody);
	if (brc < 0)
		f->head.close = true;
	(void)ol_http_finish(r);
	if (!brc && !f->head.close && !body_rc)
		pool_put(p, upstream, &f->c);
	rc = 0;
out:
	if (rc && rc != -ECONNABORTED && f && f->body_started)
		rc = -EHOSTDOWN;
	if (rc && rc != -ECONNABORTED)
		atomic_fetch_add(&p->failed, 1);
	if (f)
		up_close(&f->c);
	if (f)
		free(f->buf);
	free(f);
	free(head);
	return rc;
}
