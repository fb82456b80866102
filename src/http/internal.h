/* http/internal.h - state shared by conn.c (per request) and server.c (per connection). */
#ifndef OL_HTTP_INTERNAL_H
#define OL_HTTP_INTERNAL_H

#include "http/http.h"
#include "io/io.h"

#include <pthread.h>

#define OL_HTTP_WBUF	  (32 * 1024)  /* response head + small bodies, one writev */
#define OL_HTTP_DRAIN_MAX (4ull << 20) /* unread body bytes drained to keep the conn alive */

/* A poller: one per core, an epoll set of the server's idle keep-alive connections ("parked":
 * no thread waits on them) and their idle deadlines, a FIFO since the timeout is the same for
 * all. A readable connection goes back to a worker; an expired one is closed here. */
struct ol_http_poller {
	struct ol_http_server *s;
	int epfd, wakefd; /* wakefd: eventfd, stop */
	pthread_t th;
	bool started;
	pthread_mutex_t mu;			    /* the FIFO and c->parked */
	struct ol_http_conn *idle_head, *idle_tail; /* oldest first */
};

struct ol_http_server {
	struct ol_http_server_opts o;
	struct ol_http_poller *pollers;
	unsigned n_pollers, next_poller;
	/* workers: threads that serve connections with requests to read; made on demand, they
	 * leave after a while without work (down to n_pollers) */
	struct ol_http_conn *runq_head, *runq_tail; /* under mu */
	unsigned n_workers, n_idle_workers, max_workers;
	bool workers_stop, pollers_stop;
	pthread_cond_t work_cv;
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
	struct ol_http_conn *run_next;		    /* run queue, under srv->mu */
	uint64_t idle_since_ms;			    /* last response done (or accepted) */
	bool parked, in_epoll;
	int fd;
	int cur_timeo; /* SO_RCVTIMEO last set (ol_io_recv_timeo) */
	char peer[64];
	char *rbuf;
	size_t rcap, rpos, rlen;
	struct ol_http_head head;
	struct ol_http_req req;
	/* request body */
	int64_t body_left; /* Content-Length bytes still to read */
	uint64_t body_total;
	struct ol_http_chunked ck;
	bool body_done, continue_sent;
	int body_err;
	/* response */
	bool resp_started, resp_finished, resp_chunked, resp_nobody, close_after;
	int io_err;	   /* sticky socket error */
	int64_t resp_left; /* Content-Length bytes still owed, -1 if none announced */
	size_t wlen;
	char wbuf[OL_HTTP_WBUF];
};

/* conn.c */
void ol_http_conn_begin(struct ol_http_conn *c); /* set up req from c->head */
int ol_http_send_error(struct ol_http_conn *c, int status);
int ol_http_conn_flush(struct ol_http_conn *c);
ssize_t ol_http_conn_recv(struct ol_http_conn *c, void *buf, size_t len, int timeout_ms);

#endif
