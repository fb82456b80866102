/* fuzz_http.c - libFuzzer target over the HTTP request-head parser, the chunked decoder and the
 * proxy's response-head parser.
 * Input: the raw bytes a client might send. The first byte chooses how the body is split
 * when fed to the chunked decoder. Invariants are checked with __builtin_trap(). */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include "http/http.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

/* Feed body[0..len) to a decoder in pieces of step bytes; returns decoded bytes or -errno. */
static int64_t
decode(const uint8_t *body, size_t len, size_t step)
{
	struct ol_http_chunked c;
	int64_t total = 0;
	size_t off = 0;
	ol_http_chunked_init(&c);
	while (off < len && !ol_http_chunked_done(&c)) {
		size_t n = len - off < step ? len - off : step, used = 0;
		while (used < n && !ol_http_chunked_done(&c)) {
			const char *d;
			size_t dl;
			ssize_t k = ol_http_chunked_feed(&c, (const char *)body + off + used,
							 n - used, &d, &dl);
			if (k < 0)
				return k;
			CHECK((size_t)k <= n - used);
			CHECK(dl <= (size_t)k);
			CHECK(!dl || (d >= (const char *)body + off + used &&
				      d + dl <= (const char *)body + off + n));
			if (k == 0)
				break;
			used += (size_t)k;
			total += (int64_t)dl;
		}
		off += used;
		if (used < n && !ol_http_chunked_done(&c))
			__builtin_trap(); /* a decoder that is not done must consume everything */
	}
	return total;
}

static void
check_head(const struct ol_http_head *h, const char *buf, size_t len, int rc)
{
	CHECK((size_t)rc <= len);
	CHECK(h->method && h->target && h->path && h->query);
	CHECK(h->version_minor == 0 || h->version_minor == 1);
	CHECK(!h->chunked || h->content_length == -1);
	for (size_t i = 0; i < h->n_headers; i++) {
		CHECK(h->headers[i].name[0]);
		CHECK(!strpbrk(h->headers[i].value, "\r\n"));
		CHECK(ol_http_head_get(h, h->headers[i].name));
	}
	(void)buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step = size ? (size_t)(data[0] % 17) + 1 : 1;
	struct ol_http_head h;
	ol_http_head_init(&h);
	/* the whole input as a request stream; a small cap exercises -EMSGSIZE too */
	size_t cap = size && (data[0] & 0x80) ? 64 : 65536;
	int rc = ol_http_parse_request((const char *)data, size, cap, &h);
	if (rc > 0) {
		check_head(&h, (const char *)data, size, rc);
		/* re-parsing only the head gives the same answer */
		struct ol_http_head h2;
		ol_http_head_init(&h2);
		CHECK(ol_http_parse_request((const char *)data, (size_t)rc, cap, &h2) == rc);
		CHECK(h2.n_headers == h.n_headers && h2.content_length == h.content_length);
		ol_http_head_fini(&h2);
		if (h.chunked) {
			int64_t a = decode(data + rc, size - (size_t)rc, step);
			int64_t b = decode(data + rc, size - (size_t)rc, size);
			CHECK(a == b);
		}
	} else {
		CHECK(rc == 0 || rc == -EMSGSIZE || rc == -EPROTO || rc == -ENOTSUP);
		CHECK(rc == 0 || h.err_status >= 400);
	}
	ol_http_head_fini(&h);
	/* the whole input as an upstream's answer to the proxy (http/proxy.c) */
	static struct ol_http_resp_head rh;
	int rr = ol_http_parse_response((const char *)data, size, &rh);
	CHECK(rr >= 0 || rr == -EPROTO || rr == -EMSGSIZE);
	if (rr > 0) {
		CHECK((size_t)rr <= size && rh.status >= 100 && rh.status <= 599);
		CHECK(!rh.chunked || rh.content_length == -1);
		for (size_t i = 0; i < rh.n_headers; i++)
			CHECK(rh.headers[i].name[0] && !strpbrk(rh.headers[i].value, "\r\n"));
	}
	/* the whole input as a chunked body, split two ways: same result */
	if (size) {
		int64_t a = decode(data + 1, size - 1, step);
		int64_t b = decode(data + 1, size - 1, 1);
		CHECK(a == b);
	}
	return 0;
}
