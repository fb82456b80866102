/* cluster/httpc.h - the tiny HTTP/1.1 client the etcd gateway needs (POST, JSON bodies,
 * Content-Length or chunked answers, a streaming reader for watches). It is to become the one
 * HTTP client of the tree (issue 9: node plane, admin calls); until then it lives here.
 *
 * Library grade: no logging, 0/-errno, caller owns what it receives. Deadlines are absolute
 * CLOCK_MONOTONIC milliseconds (ol_httpc_now_ms). The parsers are pure over buffers. */
#ifndef OL_CLUSTER_HTTPC_H
#define OL_CLUSTER_HTTPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_HTTPC_MAX_HEAD (16u << 10)
#define OL_HTTPC_MAX_BODY (64u << 20)

int64_t ol_httpc_now_ms(void);

/* "http://host:port[/]" or "host:port" -> host and port. Returns 0 or -EINVAL
 * (https is refused: -EPROTONOSUPPORT). */
int ol_httpc_parse_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen);

/* Pure: a response head in buf. Returns its length (through the blank line), 0 when more is
 * needed, -EMSGSIZE over OL_HTTPC_MAX_HEAD, -EPROTO when malformed. *content_length is -1
 * when absent. */
long ol_httpc_parse_head(const char *buf, size_t len, int *status, int64_t *content_length,
			 bool *chunked);

/* Pure: one chunk of a chunked body at buf. Returns bytes consumed (size line, data, CRLF),
 * 0 when more is needed, -EPROTO when malformed, -EMSGSIZE over OL_HTTPC_MAX_BODY. The data
 * is buf[*data_off, *data_off + *data_len); *data_len == 0 is the last chunk (its trailer
 * must be empty). */
long ol_httpc_chunk(const char *buf, size_t len, size_t *data_off, size_t *data_len);

/* A cutoff: NULL, or an absolute time (ol_httpc_now_ms; 0 = none yet) that another thread may
 * set or bring forward while a call waits: the call then ends with -ECANCELED, within
 * OL_HTTPC_CUTOFF_POLL_MS of it (a stop that must not wait out a hung server's deadline). */
#define OL_HTTPC_CUTOFF_POLL_MS 200

/* The cutoff (may be NULL) has passed at now. */
bool ol_httpc_cut_off(const _Atomic int64_t *cutoff, int64_t now);

/* A connection with a request sent and its response head read. */
struct ol_httpc_conn {
	int fd;
	const _Atomic int64_t *cutoff; /* from ol_httpc_open: read_body and read_stream obey it */
	int status;
	bool chunked;
	int64_t content_length;
	char *buf; /* bytes read past the head, not yet consumed */
	size_t len, cap;
};

/* Connect to host:port, send POST path with body, read the head; all before deadline and the
 * cutoff (NULL: none). headers: more request header lines, each ending in "\r\n" (NULL: none;
 * the whole head must fit in 1 KiB). Returns 0 (conn filled), or -errno (-ETIMEDOUT,
 * -ECANCELED at the cutoff, -ECONNREFUSED, -EPROTO, ...). */
int ol_httpc_open(struct ol_httpc_conn *c, const char *host, const char *port, const char *path,
		  const char *headers, const char *body, int64_t deadline,
		  const _Atomic int64_t *cutoff);
void ol_httpc_close(struct ol_httpc_conn *c);

/* Read the whole body (de-chunked) before deadline into *body (malloc'd, NUL-terminated). */
int ol_httpc_read_body(struct ol_httpc_conn *c, int64_t deadline, char **body, size_t *len);

/* Streaming: wait up to wait_ms for more of a chunked body and append the decoded data to
 * out (grown, capped at OL_HTTPC_MAX_BODY). Returns 0 (maybe nothing new), -ECONNRESET when
 * the stream ended or broke, -ECANCELED past the cutoff, -errno. */
int ol_httpc_read_stream(struct ol_httpc_conn *c, int wait_ms, char **out, size_t *out_len,
			 size_t *out_cap);

/* POST and read the answer: open + read_body + close. */
int ol_httpc_post(const char *host, const char *port, const char *path, const char *headers,
		  const char *body, int64_t deadline, const _Atomic int64_t *cutoff, int *status,
		  char **resp, size_t *resp_len);

#endif
