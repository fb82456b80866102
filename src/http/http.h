/* http/http.h - HTTP/1.1 server: a pure request-head parser, a pure chunked-body decoder, and a
 * blocking connection server built on them.
 *
 * Implementation: one SO_REUSEPORT listener + acceptor thread per core ("threads" option) and
 * one poller per core that holds idle connections (epoll, an idle-deadline FIFO); a connection
 * with bytes to read is served by a worker thread (made on demand) with a blocking socket,
 * poll() timeouts and one read buffer from a buffer pool, taken back when it parks, so memory
 * per connection is flat no matter how big the bodies are and idle ones cost no thread.
 * Handlers are blocking (they call the store, which does disk I/O); they run on the worker.
 * Keep-alive, pipelining (requests served in order), chunked request
 * and response bodies, Expect: 100-continue, header / idle / body timeouts, bounded heads.
 * Bad requests get a 400/408/413/431/501/505 and the connection closes; the handler never
 * sees them; the owner formats their bodies through an error callback (text/plain without one).
 *
 * Flood safety: a connection holds no thread while it is idle, while its TLS handshake runs or
 * while its request head is still arriving (the poller reads heads non-blocking and hands a
 * worker only a complete head); connections and requests in flight are capped per client
 * address and in total, with a 503 (or a close at accept for TLS) beyond, counted in stats.
 * Layering: http/ knows nothing of S3. */
#ifndef OL_HTTP_HTTP_H
#define OL_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ol_http_header {
	const char *name;
	const char *value;
};

struct ol_http_req {
	const char *method; /* "GET", NUL-terminated */
	const char *target; /* raw request-target as sent ("/b/k%20x?list-type=2") */
	const char *path;   /* raw path part, NOT percent-decoded */
	const char *query;  /* raw query after '?', "" if none */
	int version_minor;  /* 0 or 1 */
	const struct ol_http_header *headers;
	size_t n_headers; /* as received, in order (names as sent, values trimmed) */
	const unsigned *header_name_lens; /* their names' lengths, or NULL (ol_http_header) */
	int64_t content_length;		  /* -1 when chunked or absent */
	bool chunked, expect_continue, keep_alive;
	const char *peer; /* "127.0.0.1:53422" */
	bool tls;	  /* the connection is TLS ([s3_tls]) */
	void *priv;	  /* server-private */
};

/* All strings of a request stay valid until the handler returns. All functions below taking a
 * req may only be called from the handler's thread, during the handler call. */

/* Case-insensitive lookup of the first header with this name, NULL if absent. */
const char *ol_http_header(const struct ol_http_req *r, const char *name);

/* Blocking read of the request body (de-chunked; sends "100 Continue" first if the client asked
 * and no response was started). Returns bytes (>0), 0 at end of body, or -errno (-ETIMEDOUT,
 * -ECONNRESET, -EMSGSIZE, -EPROTO for bad chunking). After an error the connection is closed
 * when the response ends. */
ssize_t ol_http_body_read(struct ol_http_req *r, void *buf, size_t len);

/* Start the response. content_length >= 0 sends Content-Length; -1 sends Transfer-Encoding:
 * chunked (HTTP/1.1) or closes after body (1.0). The server adds Date, Server: OpenLake,
 * Connection as needed. For HEAD requests the body writes are swallowed but Content-Length is
 * kept. Headers h[0..n) are copied out before it returns; the head is buffered with the first
 * body bytes (one writev) when they fit. A "Connection: close" in h closes after the response.
 * Returns 0, -EALREADY if a response was started, -EINVAL for a bad status, or -errno. */
int ol_http_respond(struct ol_http_req *r, int status, const struct ol_http_header *h, size_t n,
		    int64_t content_length);

/* Write body bytes (blocking). Writing more than the announced Content-Length is -EMSGSIZE.
 * 0 or -errno. */
int ol_http_write(struct ol_http_req *r, const void *buf, size_t len);

/* End of response (flushes; terminating chunk when chunked). Unread body is drained (or the
 * connection closed if too large) so keep-alive keeps working. A response shorter than its
 * Content-Length closes the connection. 0 or -errno. Idempotent. */
int ol_http_finish(struct ol_http_req *r);

/* Convenience: respond + write + finish with a fixed body (content_type may be NULL). */
int ol_http_respond_simple(struct ol_http_req *r, int status, const char *content_type,
			   const void *body, size_t len);

/* Standard reason phrase ("Not Found"), "Unknown" for unknown codes. */
const char *ol_http_reason(int status);

typedef void (*ol_http_handler_fn)(struct ol_http_req *req, void *arg);

/* Errors the server answers by itself, before or instead of the handler. */
enum ol_http_err {
	OL_HTTP_ERR_BAD_REQUEST,      /* 400: malformed request line or header */
	OL_HTTP_ERR_HEADER_TOO_LARGE, /* 431: head over max_header_bytes or too many headers */
	OL_HTTP_ERR_TIMEOUT,	      /* 408: head not complete within header_timeout_ms */
	OL_HTTP_ERR_BODY_TOO_LARGE,   /* 413: Content-Length over max_body_bytes */
	OL_HTTP_ERR_BUSY,	      /* 503: over a connection or in-flight limit */
	OL_HTTP_ERR_VERSION,	      /* 505: HTTP version other than 1.0 / 1.1 */
	OL_HTTP_ERR_NOT_IMPLEMENTED,  /* 501: Transfer-Encoding other than chunked */
	OL_HTTP_ERR_TLS_REQUIRED,     /* 400: plain HTTP on a TLS port (answered in plain text) */
};

/* One such error, handed to the owner's callback to format. The callback may change status
 * (e.g. 431 -> 400), sets content_type (a static string; NULL = text/plain) and writes at most
 * body_cap bytes to body, setting body_len. It runs on any server thread, must not block, and
 * must not call back into the server. */
struct ol_http_error {
	enum ol_http_err kind;
	int status;		  /* in: what http/ would answer; out: what to answer */
	const char *message;	  /* in: one English sentence saying what went wrong */
	const char *content_type; /* out */
	char *body;		  /* out: body_cap bytes */
	size_t body_cap, body_len;
};
typedef void (*ol_http_error_fn)(struct ol_http_error *e, void *arg);

struct ol_http_server_opts {
	size_t size;	  /* sizeof(struct ol_http_server_opts) */
	const char *addr; /* "127.0.0.1:9000", "0.0.0.0:9000", "[::1]:9000" */
	unsigned threads; /* acceptor threads (one listener each); 0 = one per core */
	ol_http_handler_fn handler;
	void *arg;
	unsigned idle_timeout_ms;   /* between requests on a keep-alive conn; 0 = 60000 */
	unsigned header_timeout_ms; /* from first byte to full head; 0 = 30000 */
	unsigned body_timeout_ms;   /* max wait for progress reading/writing a body; 0 = 60000 */
	size_t max_header_bytes;    /* request line + headers; 0 = 64 KiB */
	/* additions */
	uint64_t max_body_bytes; /* larger Content-Length -> 413; 0 = unlimited */
	unsigned max_conns;	 /* concurrent connections; beyond -> 503 + close; 0 = from
				  * RLIMIT_NOFILE (soft limit less 1024 for files, at least 64) */
	/* additions: flood limits (0 = default) */
	unsigned max_conns_per_addr;	/* per client IP address; 0 = min(4096, max_conns) */
	unsigned max_inflight;		/* requests being served (worker threads); 0 = 2048;
					 * as many more may wait, beyond -> 503 */
	unsigned max_inflight_per_addr; /* per client IP address; 0 = max_inflight / 2 */
	uint64_t max_head_memory;	/* heap buffers of heads in progress, all connections;
					 * beyond -> 503; 0 = 256 MiB */
	ol_http_error_fn error_body;	/* formats the server's own errors; NULL = text/plain */
	void *error_arg;
	/* TLS (OpenSSL): cert_path set = HTTPS only on this listener. PEM files; client_ca set =
	 * a client certificate signed by it is required. Missing / bad files fail start with
	 * -ENOENT / -EACCES / -EINVAL and an error log line naming the file. */
	const char *tls_cert_path, *tls_key_path, *tls_client_ca;
};

struct ol_http_server;

/* Listening when it returns; -errno (e.g. -EADDRINUSE, -EINVAL) otherwise. */
int ol_http_server_start(const struct ol_http_server_opts *o, struct ol_http_server **out);
/* Bound port, useful with port 0. */
unsigned ol_http_server_port(const struct ol_http_server *s);
/* Stops accepting, closes connections (in-flight handlers see errors on their next socket
 * call), waits for every worker, joins the acceptors and pollers, frees s. */
void ol_http_server_stop(struct ol_http_server *s);
/* Shut every open connection down (SHUT_RDWR) and go on serving: a handler blocked on a client
 * that stopped reading, or that is gone behind a network cut, sees an error at once instead of
 * at its write timeout. For a stop that has waited long enough for the requests in flight. Any
 * thread; returns how many connections were shut. */
unsigned ol_http_server_shutdown_conns(struct ol_http_server *s);

/* Reload the TLS certificate, key and client CA of every running server from their files
 * (SIGHUP): new connections get the new ones, open ones keep theirs. A server whose new files
 * do not load keeps its old certificate and logs why. Any thread. Returns 0, or the -errno of
 * the first failure. */
int ol_http_tls_reload_all(void);

/* Counters since start (relaxed atomics: each value is exact, the set is not a snapshot). */
struct ol_http_stats {
	uint64_t conns_open, conns_total, conns_rejected; /* rejected: over a connection limit */
	uint64_t requests;				  /* handed to the handler */
	uint64_t bad_requests;				  /* answered 4xx/5xx by the server */
	uint64_t timeouts;				  /* idle, header or body timeouts */
	uint64_t bytes_in, bytes_out;			  /* on the sockets, heads included */
	/* additions */
	uint64_t rejected_per_addr;	 /* of conns_rejected: over max_conns_per_addr */
	uint64_t inflight_rejected;	 /* requests refused: over max_inflight_per_addr */
	uint64_t tls_handshake_failures; /* bad or plaintext clients on a TLS port */
	uint64_t inflight;		 /* requests being served now (gauge) */
	uint64_t head_mem_rejected;	 /* requests refused: over max_head_memory */
};
void ol_http_server_stats(const struct ol_http_server *s, struct ol_http_stats *out);

/* ================= pure parser (no sockets, no globals) ================= */

/* A parsed request head. Reusable: init once, parse many times, fini once. The parser copies
 * the head into h->mem (grown as needed, never beyond the cap) and points every string into
 * that copy, so the input buffer may be overwritten after parsing. */
struct ol_http_head {
	const char *method, *target, *path, *query;
	int version_minor;
	struct ol_http_header *headers;
	size_t n_headers;
	int64_t content_length; /* -1 when chunked or absent */
	bool chunked, expect_continue, keep_alive;
	int err_status;	     /* on error: the HTTP status to answer (400, 431, 501, 505) */
	unsigned *name_lens; /* name_lens[i]: strlen(headers[i].name) */
	/* private */
	char *mem;
	size_t mem_cap;
	size_t hdr_cap;
};

#define OL_HTTP_MAX_HEADERS 256 /* more headers -> -EMSGSIZE (431) */

void ol_http_head_init(struct ol_http_head *h);
void ol_http_head_fini(struct ol_http_head *h);

/* Parse a request head in buf[0..len). max_bytes caps the head (request line + headers + blank
 * line). Returns bytes consumed (> 0, up to and including the blank line) and fills h; 0 if more
 * bytes are needed (and len < max_bytes); or -errno with h->err_status set:
 * -EMSGSIZE over the cap or too many headers (431), -EPROTO malformed (400: bad request line,
 * bad header name, obs-fold, NUL/CR misuse, conflicting or bad Content-Length, Content-Length
 * with Transfer-Encoding), -ENOTSUP for a version other than HTTP/1.0 / 1.1 (505) or a
 * Transfer-Encoding other than "chunked" (501). Leading empty lines (RFC 9112 2.2) are skipped.
 * Content-Length duplicates with the same value are accepted. */
int ol_http_parse_request(const char *buf, size_t len, size_t max_bytes, struct ol_http_head *h);

/* Case-insensitive lookup in a parsed head. */
const char *ol_http_head_get(const struct ol_http_head *h, const char *name);
/* The same over n headers (the first named name, case-insensitively); with lens (the names'
 * lengths, or NULL) a name of another length is not compared. */
const char *ol_http_header_find(const struct ol_http_header *hs, const unsigned *lens, size_t n,
				const char *name);

/* ================= pure chunked decoder ================= */

struct ol_http_chunked {
	int state;
	uint64_t remaining; /* data bytes left in the current chunk */
	size_t line_len;    /* bytes of the current size / trailer line */
	size_t trailer_len; /* total trailer bytes */
	size_t max_line;    /* cap of a chunk-size line incl. extensions (default 4096) */
	size_t max_trailer; /* cap of all trailers (default 16384) */
};

void ol_http_chunked_init(struct ol_http_chunked *c);

/* Feed raw body bytes in[0..len). Consumes framing bytes and at most one span of data; the span
 * (a pointer into in) is returned in *data / *data_len (data_len 0 when none). Returns the
 * number of input bytes consumed (>= 0; less than len when a data span ended the call or the
 * body is complete - feed the rest again), or -EPROTO (bad framing) / -EMSGSIZE (line or
 * trailers over the cap). Chunk extensions are skipped; trailers are validated and skipped.
 * After the final CRLF nothing more is consumed: ol_http_chunked_done() is true and the bytes
 * that follow belong to the next request. */
ssize_t ol_http_chunked_feed(struct ol_http_chunked *c, const char *in, size_t len,
			     const char **data, size_t *data_len);
bool ol_http_chunked_done(const struct ol_http_chunked *c);
/* Data bytes that may be read straight into a caller buffer before framing resumes
 * (0 when not inside chunk data). Feeding those bytes returns them as one span. */
uint64_t ol_http_chunked_data_left(const struct ol_http_chunked *c);

/* ================= reverse proxy (forwarding a request to another server) =================
 *
 * Used by a cluster node to pass a request it does not serve to the node that does. The
 * request goes out byte-identical in what matters to a signature: the method, the raw target
 * and every header as received (names as sent, values trimmed, which SigV4 canonicalizes the
 * same way), in order, Host and Expect included; only hop-by-hop headers (Connection,
 * Keep-Alive, Proxy-Connection, Proxy-Authorization, TE, Upgrade) are dropped, and
 * X-Forwarded-For: <client address> is added last; with a client key (below) the proxy also
 * vouches for the client: X-OpenLake-Client: <address> <tls 0|1> <hex HMAC-SHA256 under the key
 * of method, target, address, tls and the request's X-Amz-Date (else Date)>, which a server
 * holding the same key checks (ol_http_proxy_vouched) to apply its policies to the real client
 * and not to the forwarding node; an X-OpenLake-Client a client sent is dropped. Bodies stream
 * both ways through one
 * 256 KiB buffer (a chunked request is re-chunked as it arrives); nothing is held whole.
 * Upstream connections are kept alive in a small pool (64 idle at most, reused within 10 s,
 * a connection that became readable while idle is dropped), TLS sessions with them. */

#define OL_HTTP_RESP_MAX_HEAD	 (64u << 10)
#define OL_HTTP_RESP_MAX_HEADERS 128

struct ol_http_proxy;
struct ol_http_proxy_opts {
	unsigned connect_timeout_ms; /* 0 = 2000 */
	unsigned io_timeout_ms;	     /* per send / receive progress; 0 = 120000 */
	/* TCP_USER_TIMEOUT of the upstream connections: a request whose bytes the upstream's
	 * kernel has not acknowledged for this long fails (-ETIMEDOUT) instead of waiting out
	 * io_timeout_ms on a pooled connection to a peer that became unreachable; 0 = 10000 */
	unsigned user_timeout_ms;
	const uint8_t *client_key; /* OL_HTTP_CLIENT_KEY bytes, copied; NULL: no vouching */
	/* TLS to the upstreams (their port speaks only TLS, as a cluster node's S3 port with
	 * [s3_tls]); false: plain HTTP. The upstream's certificate must chain to (or be) a
	 * certificate in one of the tls_ca PEM files (NULL entries skipped; with none, the
	 * system's CAs) and name the host connected to (IP or DNS name); with tls_cert and
	 * tls_key the proxy shows that certificate when the upstream asks for one. The files are
	 * read by ol_http_proxy_new and again by ol_http_proxy_reload_tls. */
	bool tls;
	const char *tls_ca[3];
	const char *tls_cert, *tls_key;
};
#define OL_HTTP_CLIENT_KEY 32
int ol_http_proxy_new(const struct ol_http_proxy_opts *o, struct ol_http_proxy **out);
/* Closes the pooled connections; no forward may be running. NULL is a no-op. */
void ol_http_proxy_free(struct ol_http_proxy *p);
/* Read the TLS files again (SIGHUP: rotated certificates): connections made from now on use
 * them, pooled ones keep theirs. 0 (also without TLS), or -errno from a file that does not
 * load (the old context stays). Safe while forwards run. */
int ol_http_proxy_reload_tls(struct ol_http_proxy *p);

/* Forward r to upstream ("host:port", numeric; "[v6]:port") and relay the answer, from the
 * handler's thread. Returns 0 when the upstream's answer (any status) went to the client;
 * -ECONNABORTED when the client's side broke or the relay broke after the answer started
 * (the caller only ends the request: ol_http_finish); any other -errno when nothing was
 * sent to the client and the upstream could not be reached or did not answer (-ECONNREFUSED,
 * -ETIMEDOUT, -ENODATA closed without answering, -EPROTO a malformed answer or a failed TLS
 * handshake, -EKEYREJECTED its TLS certificate did not verify, -EINVAL a bad upstream): the
 * caller answers (a 503); -EHOSTDOWN is such a failure after the client's
 * body was (partly) consumed, so the request cannot be forwarded again. Safe from many
 * threads at once. */
int ol_http_proxy_forward(struct ol_http_proxy *p, struct ol_http_req *r, const char *upstream);
void ol_http_proxy_stats(const struct ol_http_proxy *p, uint64_t *forwarded, uint64_t *failed,
			 uint64_t *reused);

/* Pure: the forwarded head into buf (see above); tls: the client's connection is TLS;
 * client_key NULL: no X-OpenLake-Client. Returns its length, -EMSGSIZE over cap. */
ssize_t ol_http_proxy_head(const char *method, const char *target, const struct ol_http_header *h,
			   size_t n, const char *peer, bool tls, const uint8_t *client_key,
			   char *buf, size_t cap);

/* Pure: whether r carries an X-OpenLake-Client that a proxy holding key vouched for (see
 * above). 0: the client's address ("1.2.3.4" or "::1") into ip and whether it came over TLS
 * into *tls; -ENOENT: none; -EBADMSG: one that does not verify (or two: a client's own
 * cannot pass a proxy); -EMSGSIZE: the address is over cap. */
int ol_http_proxy_vouched(const struct ol_http_req *r, const uint8_t *key, char *ip, size_t cap,
			  bool *tls);

/* Pure: an upstream's response head. The head is copied into mem and the headers point into
 * the copy. Returns its length (through the blank line), 0 when more is needed, -EMSGSIZE
 * over OL_HTTP_RESP_MAX_HEAD or OL_HTTP_RESP_MAX_HEADERS, -EPROTO when malformed (bad status
 * line or header, a Transfer-Encoding other than chunked, Content-Length with chunked,
 * conflicting lengths). */
struct ol_http_resp_head {
	int status, version_minor;
	int64_t content_length; /* -1 when absent */
	bool chunked, close;
	struct ol_http_header headers[OL_HTTP_RESP_MAX_HEADERS];
	size_t n_headers;
	char mem[OL_HTTP_RESP_MAX_HEAD + 1];
};
int ol_http_parse_response(const char *buf, size_t len, struct ol_http_resp_head *h);

#endif
