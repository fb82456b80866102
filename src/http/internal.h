/* http/internal.h - state shared by conn.c (per request) and server.c (per connection). */
#ifndef OL_HTTP_INTERNAL_H
#define OL_HTTP_INTERNAL_H

#include "http/http.h"
#include "io/io.h"

#include <pthread.h>

#define OL_HTTP_WBUF	  (32 * 1024)  /* response head + small bodies, one writev */
#define OL_HTTP_DRAIN_MAX (4ull << 20) /* unread body bytes drained to keep the conn alive */

/* Per client address counts, under the server's mu. */
struct ol_http_peer {
	struct ol_http_peer *next;
	uint8_t key[16];   /* IPv6 address, IPv4 v4-mapped */
	unsigned conns;	   /* under the server's mu */
	unsigned inflight; /* atomic */
};

struct ol_http_peers {
	struct ol_http_peer **b;
	size_t nb, n;
};

/* peers.c: not thread-safe (the caller holds the server's mu). get() finds or adds (zero
 * counts); put() drops the entry when both counts are 0. */
void ol_http_peer_key(const struct sockaddr *sa, uint8_t key[16]);
void ol_http_peers_init(struct ol_http_peers *t, size_t nbuckets);
void ol_http_peers_fini(struct ol_http_peers *t);
struct ol_http_peer *ol_http_peers_get(struct ol_http_peers *t, const uint8_t key[16]);
void ol_http_peers_put(struct ol_http_peers *t, struct ol_http_peer *p);

/* tls.c. A context made from files, in a process-wide list for ol_http_tls_reload_all(). */
struct ol_http_tls;
int ol_http_tls_new(const char *cert, const char *key, const char *ca, struct ol_http_tls **out);
void ol_http_tls_free(struct ol_http_tls *t);
void *ol_http_tls_conn_new(struct ol_http_tls *t, int fd); /* SSL *, NULL on failure */
void ol_http_tls_conn_free(void *ssl, bool polite);
/* One non-blocking handshake step: 0 done, POLLIN / POLLOUT to wait for, -errno failed. */
int ol_http_tls_handshake(void *ssl);
/* Like ol_io_read on the SSL (fd non-blocking); timeout_ms 0: -ETIMEDOUT when nothing is
 * ready. */
ssize_t ol_http_tls_read(void *ssl, int fd, void *buf, size_t len, int timeout_ms);
int ol_http_tls_write(void *ssl, int fd, const void *buf, size_t len, int timeout_ms);
/* Have TLS 1.3 session tickets sent with the next write (none go out after the handshake). */
void ol_http_tls_tickets(void *ssl);

/* A poller: one per core, an epoll set of the server's connections that no thread serves
 * ("parked") in two deadline FIFOs (one timeout each, so arrival order is deadline order):
 * idle keep-alive connections (idle timeout) and those whose TLS handshake or request head is
 * under way (header timeout); and refused ones it reads until they end (a second). Its
 * threads read heads (non-blocking) and do handshake steps; the thread that completes the head
 * of a request without a body serves it on the spot and parks the connection again, one with
 * a body goes to a worker; an expired one is closed here. A poller has one thread, and more
 * while all of its threads are held by requests (server.c, mon_main). */
enum { PARK_NONE, PARK_IDLE, PARK_HEAD, PARK_LINGER };

struct ol_http_plist {
	struct ol_http_conn *head, *tail; /* oldest first */
};

struct ol_http_pthread {
	pid_t tid;
	struct ol_http_pthread *next;
};

struct ol_http_poller {
	struct ol_http_server *s;
	int epfd, wakefd; /* wakefd: eventfd, stop */
	pthread_t th;	  /* its first thread (joined; the others are detached) */
	bool started;
	unsigned n_waiting; /* its threads in epoll_wait now (atomic) */
	uint64_t progress;  /* events its threads took (atomic; the watch compares) */
	unsigned starting;  /* threads the watch gave it, not yet in its loop (atomic) */
	struct ol_http_pthread *threads; /* under mu: its threads, for the watch */
	pthread_mutex_t mu;		 /* the lists and c->parked */
	struct ol_http_plist lists[4];	 /* [PARK_IDLE], [PARK_HEAD], [PARK_LINGER] */
};

struct ol_http_server {
	struct ol_http_server_opts o;
	struct ol_http_poller *pollers;
	unsigned n_pollers, next_poller;
	/* workers: threads that serve requests with a body (the run queue); made on demand,
	 * they leave after a while without work */
	struct ol_http_conn *runq_head, *runq_tail; /* under mu */
	unsigned n_workers, n_idle_workers, max_workers;
	bool workers_stop;
	pthread_cond_t work_cv;
	/* the pollers' extra threads (under mu): made by the watch (mon) when a poller's threads
	 * are all held by their requests, at most max_workers; they leave after a while without
	 * work */
	unsigned n_extra;
	uint64_t quick_inflight; /* requests served on the pollers' threads now (atomic) */
	pthread_t mon;
	pthread_cond_t mon_cv;		      /* wakes the watch; with mu */
	bool mon_started, mon_stop, mon_idle; /* mon_idle: asleep, nothing in flight (atomic) */
	struct ol_http_peers peers;	      /* under mu */
	struct ol_http_tls *tls;	      /* NULL: plaintext */
	uint64_t log_next_ms[8];	      /* rate-limited refusal logs */
	uint64_t log_dropped[8];
	uint64_t head_mem; /* bytes of heap head buffers (atomic) */
	bool pollers_stop;
	int *lfds;
	pthread_t *acceptors;
	unsigned n_listen, n_acceptors_started;
	unsigned port;
	int stop_pipe[2];
	struct ol_bufpool *pool;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned n_conns;
	struct ol_http_conn *conns;
	bool stopping;
	struct ol_http_stats st; /* updated with __atomic_fetch_add, relaxed */
};

#define OL_HTTP_COUNT(s, field, n) __atomic_fetch_add(&(s)->st.field, (n), __ATOMIC_RELAXED)

struct ol_http_conn {
	struct ol_http_server *srv;
	struct ol_http_conn *prev, *next;
	struct ol_http_poller *poller;
	struct ol_http_conn *park_prev, *park_next; /* poller FIFO, under poller->mu */
	struct ol_http_conn *run_next;		    /* run queue (under srv->mu), expired list */
	struct ol_http_peer *pe;		    /* counts of its address, under srv->mu */
	uint64_t idle_since_ms;			    /* last response done (or accepted) */
	uint64_t head_since_ms;			    /* first byte of the head (0: none yet) */
	int plist;				    /* PARK_* list while parked */
	bool parked, in_epoll, inflight;
	bool quick; /* served on its poller's thread (no body), not on a worker */
	int fd;
	int cur_timeo; /* SO_RCVTIMEO last set (ol_io_recv_timeo) */
	void *ssl;     /* SSL *; NULL for plaintext (then fd is blocking) */
	bool tls_up;   /* handshake done */
	char peer[64];
	/* read buffer: NULL while idle; a small heap buffer (rheap) while the poller gathers a
	 * head; a pool buffer while a worker serves (its tail is wbuf) */
	char *rbuf;
	size_t rcap, rpos, rlen;
	bool rheap;
	struct ol_http_head head;
	struct ol_http_req req;
	/* request body */
	int64_t body_left; /* Content-Length bytes still to read */
	uint64_t body_total;
	struct ol_http_chunked ck;
	bool body_done, continue_sent;
	bool tickets; /* TLS: the session tickets were asked for (ol_http_tls_tickets) */
	int body_err;
	/* response */
	bool resp_started, resp_finished, resp_chunked, resp_nobody, close_after;
	int io_err;	   /* sticky socket error */
	int64_t resp_left; /* Content-Length bytes still owed, -1 if none announced */
	size_t wlen;
	char *wbuf; /* OL_HTTP_WBUF bytes, while a worker serves */
};

/* conn.c */
void ol_http_conn_begin(struct ol_http_conn *c); /* set up req from c->head */
/* Answer an error of the server's own (body from the owner's callback), Connection: close.
 * timeout_ms 0: one non-blocking attempt (poller). 0 or -errno. */
int ol_http_send_error(struct ol_http_conn *c, enum ol_http_err kind, int timeout_ms);
/* Format such a response into buf (Date, Content-Length, Connection: close); its length. */
size_t ol_http_format_error(struct ol_http_server *s, enum ol_http_err kind, char *buf, size_t cap);
int ol_http_conn_flush(struct ol_http_conn *c);
ssize_t ol_http_conn_recv(struct ol_http_conn *c, void *buf, size_t len, int timeout_ms);
int ol_http_conn_writev(struct ol_http_conn *c, struct iovec *iov, int n, int timeout_ms);

#endif
