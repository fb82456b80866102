/* client/s3http.c - the S3 client's HTTP/1.1: a pool of keep-alive connections, one signed
 * request with its body from a scatter list and its answer into one, retries with backoff. */
#include <errno.h>
#include <expat.h>
#include <isa-l/crc.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "s3int.h"

#define HDR_CAP	    16384	/* answer head */
#define BODY_CAP    (16u << 20) /* a buffered answer body (listings, errors) */
#define IDLE_MAX    256
#define BACKOFF_MAX 5000

struct s3_conn {
	int fd;
	SSL *ssl; /* https: the TLS session on fd */
	struct s3_conn *next;
	size_t rpos, rlen; /* unread bytes in rbuf */
	char rbuf[HDR_CAP];
};

static __thread char last_err[1024];

void
ol_s3_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_err, sizeof(last_err), fmt, ap);
	va_end(ap);
}

__attribute__((visibility("default"))) const char *
ol_s3_last_error(void)
{
	return last_err;
}

void
s3_logf(struct ol_s3 *s, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	if (!s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(level, msg, s->log_arg);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- connections ---- */

static void
conn_close(struct s3_conn *c)
{
	if (c) {
		SSL_free(c->ssl);
		close(c->fd);
		free(c);
	}
}

/* ---- TLS ---- */

static void
tls_reason(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, cap);
	else
		snprintf(buf, cap, "%s", errno ? strerror(errno) : "connection closed");
	ERR_clear_error();
}

int
s3_tls_init(struct ol_s3 *s)
{
	char why[200];
	SSL_CTX *ctx;
	int ok;
	if (!s->conf.tls)
		return 0;
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	ok = s->conf.ca_file[0] ? SSL_CTX_load_verify_locations(ctx, s->conf.ca_file, NULL)
				: SSL_CTX_set_default_verify_paths(ctx);
	if (ok != 1) {
		tls_reason(why, sizeof(why));
		ol_s3_set_error("CA bundle %s: %s (give a PEM file with ca_file, AWS_CA_BUNDLE or "
				"the profile's ca_bundle)",
				s->conf.ca_file[0] ? s->conf.ca_file : "(system)", why);
		SSL_CTX_free(ctx);
		return OL_S3_ECONFIG;
	}
	s->tls = ctx;
	return 0;
}

/* The handshake on a connected socket; the certificate must name the endpoint's host. */
static int
tls_connect(struct ol_s3 *s, struct s3_conn *c)
{
	unsigned char a6[16];
	char why[200];
	int is_ip =
	    inet_pton(AF_INET, s->conf.host, a6) == 1 || inet_pton(AF_INET6, s->conf.host, a6) == 1;
	c->ssl = SSL_new(s->tls);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
		return -ENOMEM;
	if (is_ip)
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), s->conf.host);
	else if (SSL_set_tlsext_host_name(c->ssl, s->conf.host) != 1 ||
		 SSL_set1_host(c->ssl, s->conf.host) != 1)
		return -ENOMEM;
	errno = 0;
	if (SSL_connect(c->ssl) == 1)
		return 0;
	long v = SSL_get_verify_result(c->ssl);
	if (v != X509_V_OK) {
		ERR_clear_error();
		ol_s3_set_error(
		    "TLS to %s: the server's certificate is not trusted: %s (give its CA "
		    "with ca_file, AWS_CA_BUNDLE or the profile's ca_bundle)",
		    s->conf.endpoint, X509_verify_cert_error_string(v));
		return -EACCES;
	}
	tls_reason(why, sizeof(why));
	ol_s3_set_error("TLS handshake with %s failed: %s (is it an https endpoint?)",
			s->conf.endpoint, why);
	return -ECONNRESET;
}

/* SSL_write may raise SIGPIPE on a closed socket: block it on this thread and swallow one
 * that became pending, leaving the process's disposition alone (a library must). */
static ssize_t
tls_write(SSL *ssl, const void *p, size_t l)
{
	sigset_t pipe, old;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	int k = SSL_write(ssl, p, (int)(l > (1u << 30) ? (1u << 30) : l));
	int err = k > 0 ? 0 : SSL_get_error(ssl, k), e = errno;
	sigset_t pending;
	sigpending(&pending);
	if (sigismember(&pending, SIGPIPE) && !sigismember(&old, SIGPIPE)) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (k > 0)
		return k;
	ERR_clear_error();
	errno = err == SSL_ERROR_SYSCALL && e ? e : (err == SSL_ERROR_WANT_WRITE ? EAGAIN : EPIPE);
	return -1;
}

static ssize_t
tls_read(SSL *ssl, void *p, size_t l)
{
	int k = SSL_read(ssl, p, (int)(l > (1u << 30) ? (1u << 30) : l));
	if (k > 0)
		return k;
	int err = SSL_get_error(ssl, k), e = errno;
	ERR_clear_error();
	if (err == SSL_ERROR_ZERO_RETURN)
		return 0;
	errno = err == SSL_ERROR_SYSCALL && e ? e
		: err == SSL_ERROR_WANT_READ  ? EAGAIN
					      : ECONNRESET;
	return err == SSL_ERROR_SYSCALL && !e ? 0 : -1;
}

static ssize_t
io_send(struct s3_conn *c, const void *p, size_t l)
{
	return c->ssl ? tls_write(c->ssl, p, l) : send(c->fd, p, l, MSG_NOSIGNAL);
}

static ssize_t
io_recv(struct s3_conn *c, void *p, size_t l)
{
	return c->ssl ? tls_read(c->ssl, p, l) : recv(c->fd, p, l, 0);
}

static int
conn_open(struct ol_s3 *s, struct s3_conn **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
	struct timeval tv = {(time_t)(s->timeout_ms / 1000), (long)(s->timeout_ms % 1000) * 1000};
	int rc = getaddrinfo(s->conf.host, s->conf.port, &hints, &ai), fd = -1, one = 1;
	if (rc) {
		ol_s3_set_error("cannot resolve %s: %s", s->conf.host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = -ECONNREFUSED;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* connect too */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		rc = errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		ol_s3_set_error("cannot connect to %s: %s", s->conf.endpoint, strerror(-rc));
		return rc;
	}
	*out = malloc(sizeof(**out));
	if (!*out) {
		close(fd);
		return -ENOMEM;
	}
	(*out)->fd = fd;
	(*out)->ssl = NULL;
	(*out)->rpos = (*out)->rlen = 0;
	(*out)->next = NULL;
	rc = s->tls ? tls_connect(s, *out) : 0;
	if (rc) {
		conn_close(*out);
		*out = NULL;
	}
	return rc;
}

static int
conn_get(struct ol_s3 *s, struct s3_conn **out, int *reused)
{
	pthread_mutex_lock(&s->lock);
	*out = s->idle;
	if (*out) {
		s->idle = (*out)->next;
		s->n_idle--;
	}
	pthread_mutex_unlock(&s->lock);
	*reused = *out != NULL;
	return *out ? 0 : conn_open(s, out);
}

static void
conn_put(struct ol_s3 *s, struct s3_conn *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->n_idle < IDLE_MAX) {
		c->next = s->idle;
		s->idle = c;
		s->n_idle++;
		c = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	conn_close(c);
}

void
s3_close_all(struct ol_s3 *s)
{
	while (s->idle) {
		struct s3_conn *c = s->idle;
		s->idle = c->next;
		conn_close(c);
	}
	s->n_idle = 0;
}

/* ---- scatter lists ---- */

/* Call fn on each contiguous span of bytes [off, off+len) of iov. */
int
s3_iov_walk(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len,
	    int (*fn)(char *p, size_t l, void *arg), void *arg)
{
	for (size_t i = 0; i < n && len; i++) {
		if (off >= iov[i].len) {
			off -= iov[i].len;
			continue;
		}
		size_t l = iov[i].len - off;
		if (l > len)
			l = len;
		int rc = fn((char *)iov[i].base + off, l, arg);
		if (rc)
			return rc;
		len -= l;
		off = 0;
	}
	return len ? -ERANGE : 0;
}

static int
crc_span(char *p, size_t l, void *arg)
{
	uint32_t *c = arg;
	while (l) {
		size_t k = l > (1u << 30) ? (1u << 30) : l;
		*c = crc32_iscsi((unsigned char *)p, (int)k, *c);
		p += k;
		l -= k;
	}
	return 0;
}

uint32_t
s3_crc32c(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len)
{
	uint32_t c = 0xffffffffu; /* ISA-L neither inverts on entry nor on exit */
	(void)s3_iov_walk(iov, n, off, len, crc_span, &c);
	return ~c;
}

static int
md5_span(char *p, size_t l, void *arg)
{
	return EVP_DigestUpdate(arg, p, l) == 1 ? 0 : -EIO;
}

int
s3_md5_hex(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len, char out[33])
{
	static const char hx[] = "0123456789abcdef";
	unsigned char raw[16];
	unsigned int rl = 16;
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	int rc = m && EVP_DigestInit_ex(m, EVP_md5(), NULL) == 1 ? 0 : -ENOMEM;
	rc = rc ? rc : s3_iov_walk(iov, n, off, len, md5_span, m);
	if (!rc && EVP_DigestFinal_ex(m, raw, &rl) != 1)
		rc = -EIO;
	EVP_MD_CTX_free(m);
	for (int i = 0; !rc && i < 16; i++) {
		out[2 * i] = hx[raw[i] >> 4];
		out[2 * i + 1] = hx[raw[i] & 15];
	}
	out[32] = 0;
	return rc;
}

void
s3_crc32c_b64(uint32_t crc, char out[16])
{
	unsigned char raw[4] = {crc >> 24, crc >> 16, crc >> 8, crc};
	EVP_EncodeBlock((unsigned char *)out, raw, 4);
}

/* ---- one exchange ---- */

struct send_ctx {
	struct ol_s3 *s;
	struct s3_conn *c;
};

static void
throttle(struct ol_s3 *s, size_t n)
{
	uint64_t t, now = now_ns();
	pthread_mutex_lock(&s->lock);
	t = s->throttle_next_ns > now ? s->throttle_next_ns : now;
	s->throttle_next_ns = t + (uint64_t)n * 1000000000ull / s->max_bps;
	pthread_mutex_unlock(&s->lock);
	if (t > now)
		sleep_ns(t - now);
}

static int
send_all(struct s3_conn *c, const char *p, size_t l)
{
	while (l) {
		ssize_t k = io_send(c, p, l);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
		p += k;
		l -= (size_t)k;
	}
	return 0;
}

static int
send_span(char *p, size_t l, void *arg)
{
	struct send_ctx *c = arg;
	while (l) {
		size_t k = l > (256u << 10) ? (256u << 10) : l;
		if (c->s->max_bps)
			throttle(c->s, k);
		int rc = send_all(c->c, p, k);
		if (rc)
			return rc;
		p += k;
		l -= k;
	}
	return 0;
}

static int
send_request(struct ol_s3 *s, struct s3_conn *c, struct s3_req *r)
{
	char path[3200], auth[4096], head[8192], ek[3072];
	size_t al;
	int n, rc;
	if (r->key) {
		if (ol_s3_uri_encode(r->key, 1, ek, sizeof(ek)))
			return -ENAMETOOLONG;
		n = snprintf(path, sizeof(path), "/%s/%s", r->bucket, ek);
	} else {
		n = snprintf(path, sizeof(path), "/%s", r->bucket);
	}
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	struct ol_s3_signer sg = {s->conf.access_key,
				  s->conf.secret_key,
				  s->conf.region,
				  s->conf.token[0] ? s->conf.token : NULL,
				  "",
				  {0}};
	al = ol_s3_sign(&sg, r->method, path, r->query, s->conf.hosthdr,
			r->len ? "UNSIGNED-PAYLOAD" : OL_S3_EMPTY_SHA256, r->xh, r->n_xh,
			time(NULL), auth, sizeof(auth));
	if (!al)
		return -E2BIG;
	n = snprintf(head, sizeof(head),
		     "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %llu\r\n%s", r->method,
		     path, r->query[0] ? "?" : "", r->query, s->conf.hosthdr,
		     (unsigned long long)r->len, auth);
	for (size_t i = 0; n > 0 && (size_t)n < sizeof(head) && i < r->n_xh; i++) {
		const char *colon = strchr(r->xh[i], ':');
		n += snprintf(head + n, sizeof(head) - (size_t)n, "%.*s: %s\r\n",
			      (int)(colon - r->xh[i]), r->xh[i], colon + 1);
	}
	if (n > 0 && (size_t)n < sizeof(head) && r->range)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "Range: %s\r\n", r->range);
	if (n > 0 && (size_t)n < sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -E2BIG;
	rc = send_all(c, head, (size_t)n);
	if (rc || !r->len)
		return rc;
	struct send_ctx sc = {s, c};
	return s3_iov_walk(r->iov, r->n_iov, r->off, r->len, send_span, &sc);
}

/* more bytes into c->rbuf (compacting); 0, -ECONNRESET at EOF, -ETIMEDOUT, -errno */
static int
fill(struct s3_conn *c)
{
	if (c->rpos && c->rpos == c->rlen)
		c->rpos = c->rlen = 0;
	if (c->rlen == sizeof(c->rbuf)) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
		if (c->rlen == sizeof(c->rbuf))
			return -E2BIG;
	}
	for (;;) {
		ssize_t k = io_recv(c, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen);
		if (k > 0) {
			c->rlen += (size_t)k;
			return 0;
		}
		if (k == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	}
}

/* read exactly l bytes to p (NULL = drop) */
static int
read_exact(struct s3_conn *c, char *p, size_t l)
{
	while (l) {
		size_t have = c->rlen - c->rpos;
		if (have) {
			size_t k = have < l ? have : l;
			if (p) {
				memcpy(p, c->rbuf + c->rpos, k);
				p += k;
			}
			c->rpos += k;
			l -= k;
			continue;
		}
		if (p && l >= 65536) { /* large: straight into the caller's memory */
			ssize_t k = io_recv(c, p, l);
			if (k > 0) {
				p += k;
				l -= (size_t)k;
				continue;
			}
			if (k < 0 && errno == EINTR)
				continue;
			return k == 0 ? -ECONNRESET : (errno == EAGAIN ? -ETIMEDOUT : -errno);
		}
		int rc = fill(c);
		if (rc)
			return rc;
	}
	return 0;
}

static int
read_span(char *p, size_t l, void *arg)
{
	return read_exact(arg, p, l);
}

/* one CRLF-terminated line (without it) into out */
static int
read_line(struct s3_conn *c, char *out, size_t cap)
{
	for (;;) {
		char *nl = memchr(c->rbuf + c->rpos, '\n', c->rlen - c->rpos);
		if (nl) {
			size_t l = (size_t)(nl - (c->rbuf + c->rpos));
			if (l && nl[-1] == '\r')
				l--;
			if (l >= cap)
				return -E2BIG;
			memcpy(out, c->rbuf + c->rpos, l);
			out[l] = 0;
			c->rpos = (size_t)(nl - c->rbuf) + 1;
			return 0;
		}
		int rc = fill(c);
		if (rc)
			return rc;
	}
}

struct resp_head {
	int status, chunked, close;
	int64_t clen;
};

static void
header_value(struct s3_req *r, struct resp_head *h, const char *name, const char *v)
{
	if (strcasecmp(name, "content-length") == 0) {
		h->clen = strtoll(v, NULL, 10);
	} else if (strcasecmp(name, "transfer-encoding") == 0) {
		h->chunked = strcasestr(v, "chunked") != NULL;
	} else if (strcasecmp(name, "connection") == 0) {
		h->close = strcasestr(v, "close") != NULL;
	} else if (strcasecmp(name, "etag") == 0) {
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	} else if (strcasecmp(name, "x-amz-checksum-crc32c") == 0) {
		snprintf(r->crc32c, sizeof(r->crc32c), "%s", v);
	} else if (strcasecmp(name, "x-amz-checksum-type") == 0) {
		snprintf(r->cktype, sizeof(r->cktype), "%s", v);
	} else if (strcasecmp(name, "content-range") == 0) {
		const char *sl = strchr(v, '/');
		if (sl && sl[1] != '*')
			r->total = strtoull(sl + 1, NULL, 10);
	}
}

static int
read_head(struct s3_conn *c, struct s3_req *r, struct resp_head *h)
{
	char line[4096];
	int rc = read_line(c, line, sizeof(line));
	if (rc)
		return rc;
	if (strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12)
		return OL_S3_EPROTO;
	h->status = (int)strtol(line + 9, NULL, 10);
	h->close = line[7] == '0';
	for (;;) {
		rc = read_line(c, line, sizeof(line));
		if (rc)
			return rc;
		if (!line[0])
			break;
		char *colon = strchr(line, ':');
		if (!colon)
			return OL_S3_EPROTO;
		*colon = 0;
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		header_value(r, h, line, v);
	}
	r->status = h->status;
	return 0;
}

static int
body_grow(struct s3_req *r, size_t more)
{
	if (r->body_len + more > BODY_CAP)
		return -EFBIG;
	char *b = realloc(r->body, r->body_len + more + 1);
	if (!b)
		return -ENOMEM;
	r->body = b;
	return 0;
}

static int
read_chunked(struct s3_conn *c, struct s3_req *r)
{
	char line[256];
	for (;;) {
		char *end;
		int rc = read_line(c, line, sizeof(line));
		if (rc)
			return rc;
		errno = 0;
		unsigned long long n = strtoull(line, &end, 16);
		if (end == line || errno)
			return OL_S3_EPROTO;
		if (n == 0)
			break;
		if ((rc = body_grow(r, n)) || (rc = read_exact(c, r->body + r->body_len, n)))
			return rc;
		r->body_len += n;
		if ((rc = read_line(c, line, sizeof(line))))
			return rc;
	}
	do { /* trailers up to the empty line */
		int rc = read_line(c, line, sizeof(line));
		if (rc)
			return rc;
	} while (line[0]);
	return 0;
}

static int
read_body(struct s3_conn *c, struct s3_req *r, struct resp_head *h)
{
	int rc;
	if (!strcmp(r->method, "HEAD") || h->status == 204 || h->status == 304)
		return 0;
	if (h->status == 200 && r->ranged)
		return OL_S3_EPROTO; /* a server that ignored Range: nothing of it is ours */
	if (h->status / 100 == 2 && r->resp_iov) {
		if (h->clen < 0 || (uint64_t)h->clen < r->resp_len ||
		    ((uint64_t)h->clen > r->resp_len && r->resp_exact))
			return -ERANGE;
		rc =
		    s3_iov_walk(r->resp_iov, r->n_resp_iov, r->resp_off, r->resp_len, read_span, c);
		if (!rc && (uint64_t)h->clen > r->resp_len)
			h->close = 1; /* the rest is not read: this connection is done */
		return rc;
	}
	if (h->chunked)
		rc = read_chunked(c, r);
	else if (h->clen < 0)
		return OL_S3_EPROTO; /* no framing: not expected from S3 */
	else if (!(rc = body_grow(r, (size_t)h->clen)) &&
		 !(rc = read_exact(c, r->body, (size_t)h->clen)))
		r->body_len = (size_t)h->clen;
	if (r->body)
		r->body[r->body_len] = 0;
	return rc;
}

static int
exchange(struct ol_s3 *s, struct s3_req *r, int *reused)
{
	struct s3_conn *c;
	struct resp_head h = {0, 0, 0, -1};
	int rc = conn_get(s, &c, reused);
	if (rc)
		return rc;
	free(r->body);
	r->body = NULL;
	r->body_len = 0;
	r->etag[0] = r->crc32c[0] = r->cktype[0] = 0;
	r->total = 0;
	rc = send_request(s, c, r);
	rc = rc ? rc : read_head(c, r, &h);
	rc = rc ? rc : read_body(c, r, &h);
	r->clen = h.clen >= 0 ? (uint64_t)h.clen : 0;
	if (!r->total && h.status / 100 == 2)
		r->total = r->clen;
	if (rc || h.close || h.status >= 500)
		conn_close(c);
	else
		conn_put(s, c);
	return rc;
}

static int
retryable_status(int st)
{
	return st == 500 || st == 502 || st == 503 || st == 504;
}

static int
retryable_rc(int rc)
{
	return rc == -ECONNRESET || rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -EHOSTUNREACH || rc == -ENETUNREACH ||
	       rc == OL_S3_EPROTO;
}

int
s3_do(struct ol_s3 *s, struct s3_req *r)
{
	uint64_t delay = (uint64_t)s->backoff_ms * 1000000ull;
	int rc = 0, reused = 0;
	for (r->attempts = 1;; r->attempts++) {
		rc = exchange(s, r, &reused);
		if (rc == 0 && !retryable_status(r->status))
			return 0;
		if (rc == -EACCES)
			return rc; /* an untrusted certificate: the handshake said why */
		if (rc && !retryable_rc(rc))
			break;
		if ((rc == -ECONNRESET || rc == -EPIPE) && reused && r->attempts == 1)
			/* a keep-alive the server had closed: again at once */
			continue;
		if (r->attempts >= s->retries)
			break;
		s3_logf(s, 1, "%s /%s/%s: %s%s (attempt %u of %u), retrying",
			r->op ? r->op : r->method, r->bucket, r->key ? r->key : "",
			rc ? "" : "HTTP ",
			rc ? strerror(-rc) : (r->status == 503 ? "503 SlowDown" : "5xx"),
			r->attempts, s->retries);
		sleep_ns(delay / 2 + (uint64_t)rand() % (delay / 2 + 1)); /* jitter */
		delay = delay * 2 > BACKOFF_MAX * 1000000ull ? BACKOFF_MAX * 1000000ull : delay * 2;
	}
	if (rc == 0)
		return s3_status_error(r, r->op);
	ol_s3_set_error("%s /%s/%s at %s: %s after %u attempt(s)%s", r->op ? r->op : r->method,
			r->bucket, r->key ? r->key : "", s->conf.endpoint,
			rc == OL_S3_EPROTO ? "answer is not HTTP" : strerror(-rc), r->attempts,
			retryable_rc(rc) ? " (is the endpoint up? raise retries for a slow one)"
					 : "");
	return rc;
}

void
s3_req_fini(struct s3_req *r)
{
	free(r->body);
	r->body = NULL;
}

struct err_fields {
	char code[128], msg[512];
};

static int
err_field(const char *name, const char *text, void *arg)
{
	struct err_fields *e = arg;
	if (!strcmp(name, "Code"))
		snprintf(e->code, sizeof(e->code), "%s", text);
	else if (!strcmp(name, "Message"))
		snprintf(e->msg, sizeof(e->msg), "%s", text);
	return 0;
}

int
s3_status_error(struct s3_req *r, const char *what)
{
	struct err_fields e = {"", ""};
	int st = r->status;
	if (r->body && r->body_len)
		(void)s3_xml_walk(r->body, r->body_len, err_field, &e);
	if (!e.code[0])
		snprintf(e.code, sizeof(e.code), "%s",
			 st == 404   ? "Not Found"
			 : st == 403 ? "Forbidden"
			 : st == 503 ? "Service Unavailable"
			 : st >= 500 ? "Server Error"
				     : "");
	ol_s3_set_error("%s /%s/%s: HTTP %d %s%s%s (after %u attempt%s)", what ? what : r->method,
			r->bucket, r->key ? r->key : "", st, e.code, e.msg[0] ? ": " : "", e.msg,
			r->attempts, r->attempts == 1 ? "" : "s");
	if (st == 404)
		return OL_S3_ENOTFOUND;
	if (st == 403 || st == 401)
		return OL_S3_EDENIED;
	if (st == 416)
		return -ERANGE;
	return st >= 500 ? OL_S3_ESERVER : OL_S3_ECLIENT;
}

/* ---- XML ---- */

struct xml_ctx {
	XML_Parser p;
	s3_xml_fn fn;
	void *arg;
	char text[4096];
	size_t tl;
	int rc;
};

static void
xml_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct xml_ctx *x = ud;
	(void)name;
	(void)attrs;
	x->tl = 0;
}

static void
xml_chars(void *ud, const XML_Char *s, int len)
{
	struct xml_ctx *x = ud;
	size_t k = (size_t)len;
	if (x->tl + k >= sizeof(x->text))
		k = sizeof(x->text) - 1 - x->tl;
	memcpy(x->text + x->tl, s, k);
	x->tl += k;
}

static void
xml_end(void *ud, const XML_Char *name)
{
	struct xml_ctx *x = ud;
	x->text[x->tl] = 0;
	if (!x->rc)
		x->rc = x->fn(name, x->text, x->arg);
	x->tl = 0;
	if (x->rc)
		XML_StopParser(x->p, XML_FALSE);
}

int
s3_xml_walk(const char *buf, size_t len, s3_xml_fn fn, void *arg)
{
	struct xml_ctx x = {.fn = fn, .arg = arg};
	int rc;
	x.p = XML_ParserCreate("UTF-8");
	if (!x.p)
		return -ENOMEM;
	XML_SetUserData(x.p, &x);
	XML_SetElementHandler(x.p, xml_start, xml_end);
	XML_SetCharacterDataHandler(x.p, xml_chars);
	rc = XML_Parse(x.p, buf, (int)len, 1) == XML_STATUS_OK ? 0 : OL_S3_EPROTO;
	XML_ParserFree(x.p);
	return x.rc ? x.rc : rc;
}
