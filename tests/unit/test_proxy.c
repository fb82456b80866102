/* Unit tests of the reverse proxy (src/http/proxy.c): the forwarded head (every header byte as
 * received, hop-by-hop ones dropped, X-Forwarded-For added), the response-head parser, and a
 * live forward between two real ol_http servers on loopback: a client's chunked 8 MiB body and
 * an 8 MiB answer stream through, headers arrive as sent, the upstream connection is reused,
 * and a dead upstream is an error the caller can answer. */
#include "http/http.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void
test_head(void)
{
	struct ol_http_header h[] = {{"Host", "127.0.0.1:9000"},
				     {"X-Amz-Date", "20260101T000000Z"},
				     {"Connection", "keep-alive"},
				     {"Authorization", "AWS4-HMAC-SHA256 Credential=a/b, Sig=c"},
				     {"keep-alive", "5"},
				     {"Expect", "100-continue"},
				     {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}};
	char buf[1024];
	ssize_t n = ol_http_proxy_head("PUT", "/b/k%20x?partNumber=1&uploadId=u", h, 7,
				       "10.1.2.3:5555", false, NULL, buf, sizeof(buf));
	const char *want = "PUT /b/k%20x?partNumber=1&uploadId=u HTTP/1.1\r\n"
			   "Host: 127.0.0.1:9000\r\n"
			   "X-Amz-Date: 20260101T000000Z\r\n"
			   "Authorization: AWS4-HMAC-SHA256 Credential=a/b, Sig=c\r\n"
			   "Expect: 100-continue\r\n"
			   "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"
			   "X-Forwarded-For: 10.1.2.3\r\n\r\n";
	ok(n == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0,
	   "forwarded head: target raw, headers in order as sent, hop-by-hop dropped, XFF last");
	n = ol_http_proxy_head("GET", "/", h, 1, "[::1]:80", false, NULL, buf, sizeof(buf));
	ok(n > 0 && strstr(buf, "X-Forwarded-For: ::1\r\n\r\n"), "XFF of an IPv6 peer");
	ok(ol_http_proxy_head("GET", "/", h, 7, "1.2.3.4:5", false, NULL, buf, 60) == -EMSGSIZE,
	   "a head over the buffer is -EMSGSIZE");
}

/* The proxy vouches for its client (X-OpenLake-Client, keyed); a server with the key believes
 * exactly what the proxy sent, for that request, and nothing a client wrote itself. */
static void
test_vouch(void)
{
	uint8_t key[OL_HTTP_CLIENT_KEY], other[OL_HTTP_CLIENT_KEY];
	struct ol_http_header in[] = {{"Host", "n1:9000"},
				      {"X-Amz-Date", "20260101T000000Z"},
				      {"x-openlake-client", "6.6.6.6 1 forged"}};
	static char buf[2048];
	char ip[64], *line, *v;
	bool tls = false;

	memset(key, 7, sizeof(key));
	memset(other, 8, sizeof(other));
	ssize_t n = ol_http_proxy_head("GET", "/b/k?x=1", in, 3, "[2001:db8::5]:4000", true, key,
				       buf, sizeof(buf));
	ok(n > 0 && !strstr(buf, "6.6.6.6") && (line = strstr(buf, "X-OpenLake-Client: ")),
	   "the proxy drops a client's own X-OpenLake-Client and adds its vouch");
	if (n <= 0 || !line)
		return;
	v = line + strlen("X-OpenLake-Client: ");
	*strstr(v, "\r\n") = 0;
	struct ol_http_header got[] = {
	    {"Host", "n1:9000"}, {"X-Amz-Date", "20260101T000000Z"}, {"X-OpenLake-Client", v}};
	struct ol_http_req r = {
	    .method = "GET", .target = "/b/k?x=1", .headers = got, .n_headers = 3};
	int rc = ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls);
	ok(rc == 0 && strcmp(ip, "2001:db8::5") == 0 && tls,
	   "vouched: the client's v6 address and TLS (%d %s)", rc, rc ? "" : ip);
	ok(ol_http_proxy_vouched(&r, other, ip, sizeof(ip), &tls) == -EBADMSG,
	   "another cluster's key does not verify");
	r.target = "/b/other";
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -EBADMSG,
	   "a vouch replayed on another target does not verify");
	r.target = "/b/k?x=1";
	got[1].value = "20260101T000001Z";
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -EBADMSG,
	   "nor with another date");
	got[1].value = "20260101T000000Z";
	char forged[160];
	snprintf(forged, sizeof(forged), "6.6.6.6 1 %s", strrchr(v, ' ') + 1);
	got[2].value = forged;
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -EBADMSG,
	   "the proxy's MAC with another address does not verify");
	r.n_headers = 2;
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -ENOENT, "no vouch: -ENOENT");
	struct ol_http_header two[] = {{"X-OpenLake-Client", v}, {"x-openlake-client", v}};
	r.headers = two;
	r.n_headers = 2;
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -EBADMSG,
	   "two vouches: refused");
	struct ol_http_header bad[] = {{"X-OpenLake-Client", "1.2.3.4 2 00"}};
	r.headers = bad;
	r.n_headers = 1;
	ok(ol_http_proxy_vouched(&r, key, ip, sizeof(ip), &tls) == -EBADMSG, "a malformed one too");
}

static void
test_response(void)
{
	static struct ol_http_resp_head h;
	const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nETag: \"ab\"\r\n"
			"x-amz-request-id:  R1 \r\n\r\nhello world!";
	int n = ol_http_parse_response(r, strlen(r), &h);
	ok(n == (int)(strlen(r) - 12) && h.status == 200 && h.content_length == 12 && !h.chunked &&
	       !h.close && h.n_headers == 3 && strcmp(h.headers[2].value, "R1") == 0 &&
	       strcmp(h.headers[1].name, "ETag") == 0,
	   "response head: status, length, headers trimmed");
	ok(ol_http_parse_response(r, 20, &h) == 0, "a partial head needs more");
	r = "HTTP/1.1 100 Continue\r\n\r\n";
	ok(ol_http_parse_response(r, strlen(r), &h) == (int)strlen(r) && h.status == 100,
	   "interim 100 parsed (the proxy skips it)");
	r = "HTTP/1.0 503 Slow Down\r\nTransfer-Encoding: chunked\r\n\r\n";
	ok(ol_http_parse_response(r, strlen(r), &h) > 0 && h.chunked && h.close && h.status == 503,
	   "HTTP/1.0 closes; chunked seen");
	const char *bad[] = {
	    "HTTP/2 200 OK\r\n\r\n",
	    "HTTP/1.1 20 OK\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
	    NULL};
	int all = 1;
	for (int i = 0; bad[i]; i++) {
		int rc = ol_http_parse_response(bad[i], strlen(bad[i]), &h);
		if (rc != -EPROTO) {
			printf("# bad[%d] -> %d\n", i, rc);
			all = 0;
		}
	}
	ok(all, "malformed response heads are -EPROTO");
	char *big = malloc(OL_HTTP_RESP_MAX_HEAD + 10);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(big + 20, 'a', OL_HTTP_RESP_MAX_HEAD - 10);
	ok(ol_http_parse_response(big, OL_HTTP_RESP_MAX_HEAD + 10, &h) == -EMSGSIZE,
	   "a head over the cap is -EMSGSIZE");
	free(big);
}

/* ---- live: client -> front (proxy) -> upstream ---- */

#define BODY (8u << 20)

static char upstream_addr[64];
static struct ol_http_proxy *proxy;

static uint32_t
mix(uint32_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* upstream: answers the headers it got (X-Got-*), the body's length and hash, then for GET
 * /big an 8 MiB body of a known pattern */
static void
upstream(struct ol_http_req *r, void *arg)
{
	(void)arg;
	static __thread unsigned char buf[65536];
	uint64_t total = 0;
	uint32_t h = 2166136261u;
	ssize_t k;
	while ((k = ol_http_body_read(r, buf, sizeof(buf))) > 0) {
		h = mix(h, buf, (size_t)k);
		total += (uint64_t)k;
	}
	char len[32], hash[32], n[16];
	snprintf(len, sizeof(len), "%llu", (unsigned long long)total);
	snprintf(hash, sizeof(hash), "%08x", h);
	snprintf(n, sizeof(n), "%zu", r->n_headers);
	const char *xff = ol_http_header(r, "x-forwarded-for");
	const char *auth = ol_http_header(r, "authorization");
	struct ol_http_header out[] = {{"X-Body-Len", len},
				       {"X-Body-Hash", hash},
				       {"X-Got-Headers", n},
				       {"X-Got-XFF", xff ? xff : "-"},
				       {"X-Got-Auth", auth ? auth : "-"}};
	bool big = strcmp(r->path, "/big") == 0;
	ol_http_respond(r, big ? 200 : 201, out, 5, big ? -1 : 0);
	for (unsigned off = 0; big && off < BODY; off += sizeof(buf)) {
		for (unsigned i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)((off + i) * 7);
		ol_http_write(r, buf, sizeof(buf));
	}
	ol_http_finish(r);
}

static void
front(struct ol_http_req *r, void *arg)
{
	(void)arg;
	int rc = ol_http_proxy_forward(proxy, r, upstream_addr);
	if (rc && rc != -ECONNABORTED) {
		char m[64];
		snprintf(m, sizeof(m), "upstream: %d", rc);
		ol_http_respond_simple(r, 503, "text/plain", m, strlen(m));
	} else if (rc) {
		ol_http_finish(r);
	}
}

static struct ol_http_server *
serve(ol_http_handler_fn fn)
{
	struct ol_http_server_opts o = {
	    .size = sizeof(o), .addr = "127.0.0.1:0", .threads = 1, .handler = fn};
	struct ol_http_server *s = NULL;
	return ol_http_server_start(&o, &s) ? NULL : s;
}

static int
dial(unsigned port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
send_all(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* read one response: the head into head (NUL-terminated), the de-chunked or sized body hashed.
 * Bytes read past the response (a 100 Continue and the final answer can come in one read) are
 * kept for the next call on the same fd. */
static int
read_resp(int fd, char *head, size_t cap, uint64_t *blen, uint32_t *bhash)
{
	static char buf[1 << 20];
	static size_t len;
	static int last_fd = -1;
	if (fd != last_fd)
		len = 0;
	last_fd = fd;
	buf[len] = 0;
	char *end = strstr(buf, "\r\n\r\n");
	while (!end) {
		ssize_t k = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (k <= 0)
			return -1;
		len += (size_t)k;
		buf[len] = 0;
		end = strstr(buf, "\r\n\r\n");
	}
	size_t hl = (size_t)(end + 4 - buf);
	snprintf(head, cap, "%.*s", (int)hl, buf);
	*blen = 0;
	*bhash = 2166136261u;
	bool chunked = strstr(head, "Transfer-Encoding: chunked") != NULL;
	const char *cl = strstr(head, "Content-Length: ");
	uint64_t want = cl ? strtoull(cl + 16, NULL, 10) : 0;
	memmove(buf, buf + hl, len - hl);
	len -= hl;
	if (strncmp(head + 9, "1", 1) == 0) /* an interim answer has no body */
		return 0;
	for (;;) {
		if (chunked) {
			char *nl = memmem(buf, len, "\r\n", 2);
			if (nl) {
				unsigned long sz = strtoul(buf, NULL, 16);
				size_t need = (size_t)(nl + 2 - buf) + sz + 2;
				if (len >= need) {
					*bhash = mix(*bhash, (unsigned char *)nl + 2, sz);
					*blen += sz;
					memmove(buf, buf + need, len - need);
					len -= need;
					if (sz == 0)
						return 0;
					continue;
				}
			}
		} else {
			size_t take = len < want - *blen ? len : (size_t)(want - *blen);
			*bhash = mix(*bhash, (unsigned char *)buf, take);
			*blen += take;
			memmove(buf, buf + take, len - take);
			len -= take;
			if (*blen == want)
				return 0;
		}
		ssize_t k = read(fd, buf + len, sizeof(buf) - len);
		if (k <= 0)
			return -1;
		len += (size_t)k;
	}
}

/* a copy of a response head on one TAP line: CR and LF shown as '|' (a copy: the checks in
 * the same ok() call read the head, in an order C leaves open) */
static const char *
oneline(const char *head)
{
	static char out[128];
	size_t i = 0;
	for (; head[i] && i < sizeof(out) - 1; i++)
		out[i] = head[i] == '\r' || head[i] == '\n' ? '|' : head[i];
	out[i] = 0;
	return out;
}

static void
test_live(void)
{
	struct ol_http_server *up = serve(upstream), *fr = serve(front);
	struct ol_http_proxy_opts po = {.connect_timeout_ms = 2000, .io_timeout_ms = 30000};
	if (!up || !fr || ol_http_proxy_new(&po, &proxy)) {
		ok(0, "servers and proxy start");
		return;
	}
	snprintf(upstream_addr, sizeof(upstream_addr), "127.0.0.1:%u", ol_http_server_port(up));
	int fd = dial(ol_http_server_port(fr));
	char head[4096];
	uint64_t blen;
	uint32_t bhash;
	/* a chunked 8 MiB PUT with Expect: 100-continue, sent in 64 KiB chunks */
	const char *h = "PUT /b/k HTTP/1.1\r\nHost: node-a:9000\r\n"
			"Authorization: AWS4-HMAC-SHA256 Credential=x, Signature=abc\r\n"
			"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
	int rc = fd < 0 || send_all(fd, h, strlen(h));
	static unsigned char chunk[65536];
	uint32_t want = 2166136261u;
	for (unsigned off = 0; !rc && off < BODY; off += sizeof(chunk)) {
		for (unsigned i = 0; i < sizeof(chunk); i++)
			chunk[i] = (unsigned char)((off + i) * 13);
		want = mix(want, chunk, sizeof(chunk));
		rc = send_all(fd, "10000\r\n", 7) || send_all(fd, chunk, sizeof(chunk)) ||
		     send_all(fd, "\r\n", 2);
	}
	rc = rc || send_all(fd, "0\r\n\r\n", 5);
	/* the client may first see our own 100 Continue */
	rc = rc || read_resp(fd, head, sizeof(head), &blen, &bhash);
	if (!rc && strstr(head, " 100 "))
		rc = read_resp(fd, head, sizeof(head), &blen, &bhash);
	char wantlen[64], wanth[64];
	snprintf(wantlen, sizeof(wantlen), "X-Body-Len: %u\r\n", BODY);
	snprintf(wanth, sizeof(wanth), "X-Body-Hash: %08x\r\n", want);
	ok(!rc && strstr(head, "HTTP/1.1 201") && strstr(head, wantlen) && strstr(head, wanth) &&
	       strstr(head, "X-Got-Auth: AWS4-HMAC-SHA256 Credential=x, Signature=abc\r\n") &&
	       strstr(head, "X-Got-XFF: 127.0.0.1\r\n") && strstr(head, "X-Got-Headers: 5\r\n"),
	   "8 MiB chunked PUT streamed through, headers as sent + XFF: %.60s", oneline(head));
	/* an 8 MiB chunked answer on the same client connection */
	const char *g = "GET /big HTTP/1.1\r\nHost: node-a:9000\r\n\r\n";
	rc = send_all(fd, g, strlen(g)) || read_resp(fd, head, sizeof(head), &blen, &bhash);
	uint32_t wb = 2166136261u;
	for (unsigned off = 0; off < BODY; off += sizeof(chunk)) {
		for (unsigned i = 0; i < sizeof(chunk); i++)
			chunk[i] = (unsigned char)((off + i) * 7);
		wb = mix(wb, chunk, sizeof(chunk));
	}
	ok(!rc && strstr(head, "HTTP/1.1 200") && blen == BODY && bhash == wb,
	   "8 MiB answer relayed byte-exact");
	uint64_t fwd, failed, reused;
	ol_http_proxy_stats(proxy, &fwd, &failed, &reused);
	ok(fwd == 2 && failed == 0 && reused >= 1, "upstream connection reused (%llu of %llu)",
	   (unsigned long long)reused, (unsigned long long)fwd);
	/* the upstream gone: the caller gets an error before anything was sent */
	ol_http_server_stop(up);
	const char *d = "DELETE /b/k HTTP/1.1\r\nHost: node-a:9000\r\n\r\n";
	rc = send_all(fd, d, strlen(d)) || read_resp(fd, head, sizeof(head), &blen, &bhash);
	ok(!rc && strstr(head, "HTTP/1.1 503"), "dead upstream: the caller answers 503: %.60s",
	   oneline(head));
	close(fd);
	ol_http_server_stop(fr);
	ol_http_proxy_free(proxy);
}

int
main(void)
{
	test_head();
	test_vouch();
	test_response();
	test_live();
	tap_done();
}
