/* node/node_int.h - what server.c (connections, frames, HELLO) and ops.c (the dispatch table
 * and the shard files) share. Everything here runs on the connection's loop thread. */
#ifndef OL_NODE_NODE_INT_H
#define OL_NODE_NODE_INT_H

#include "io/loop.h"
#include "node/node.h"

#include <pthread.h>
#include <stdatomic.h>

struct nloop;

struct obuf {
	struct obuf *next;
	size_t len;
	uint8_t data[]; /* header, payload, MAC */
};

struct nux;

struct nconn {
	struct nloop *nl;
	struct ol_loop *loop; /* the loop this connection lives on */
	struct ol_node_server *s;
	struct nconn *prev, *next;
	int fd;		/* -1 on UCX */
	struct nux *ux; /* the UCX endpoint (ucx_srv.c), NULL on TCP */
	unsigned depth; /* callbacks of this connection on the stack: not freed meanwhile */
	char peer[64];
	struct ol_loop_op rop, wop, fop;
	struct ol_loop_timer hello_timer;
	struct ol_loop_timer wtimer, rtimer; /* the deadlines of the open write / read stream */
	bool xpending;			     /* the UCX endpoint's close is in flight */
	bool rpending, wpending, fpending, dead, closing, authed, paused, in_process;
	bool cpending; /* a COMMIT of this connection is with the helpers (commit.c) */
	bool enc;      /* replies encrypted: this process encrypts, or the client did */
	uint8_t *in;
	size_t in_len, in_cap;
	struct ol_node_mac *tx, *rx; /* our frames' MAC (server to client), the peer's */
	uint64_t rseq, wseq;
	size_t need; /* bytes at c->in that end the big frame in progress (0: none known) */
	uint64_t held, grant; /* frame bytes received and not granted back; to grant */
	struct obuf *oq_head, *oq_tail;
	unsigned oq_n;
	/* the shard being written (one stream at a time per connection) */
	int wfd, wdrive;
	uint64_t wcall, wbytes, discard_call;
	bool discard;
	char wname[OL_NODE_NAME_MAX + 1];
	/* the shard being read back */
	int rfd;
	uint64_t rcall, roff, rleft, rdeadline_ns;
};

#define OL_NODE_MAX_RETIRED 8

struct ol_node_server {
	char secret[256];
	unsigned self_id;
	uint32_t window, max_payload;
	unsigned hello_timeout_ms;
	unsigned n_drives;
	char drives[OL_NODE_MAX_DRIVES][OL_NODE_NAME_MAX + 1];
	int root_fd[OL_NODE_MAX_DRIVES]; /* <drive>/.openlake/data, or -1 */
	/* mops.c: each drive's metadata env, opened by the first META op (under meta_mu) */
	pthread_mutex_t meta_mu;
	struct ol_meta *meta[OL_NODE_MAX_DRIVES];
	int meta_lock[OL_NODE_MAX_DRIVES]; /* flock on <drive>/.openlake/lock, or -1 */
	/* envs of drives wiped under the plane (ol_node_drive_check): requests may still hold
	 * them, so they are closed at fini only */
	struct ol_meta *retired[OL_NODE_MAX_RETIRED];
	unsigned n_retired;
	unsigned n_loops;
	struct nloop *loops;
	/* commit.c: the COMMIT handler, its queue of calls (FIFO) and its helper threads, all
	 * under cmu */
	pthread_mutex_t cmu;
	pthread_cond_t ccv;
	ol_node_commit_fn commit_fn;
	void *commit_arg;
	struct ncommit *cq_head, *cq_tail;
	unsigned cq_len, c_threads, c_idle, c_running;
	unsigned c_flushing; /* server.c, at stop: loops still sending what they queued */
	uint64_t c_calls;
	bool c_stopping;
	pthread_t c_thr[OL_NODE_COMMIT_THREADS];
	bool metrics; /* registered with base/metrics */
	atomic_uint_fast64_t conns, auth_failures, protocol_errors, frames, window_violations,
	    hello_timeouts, max_held;
};

/* Queue a reply frame to req's call (payload copied). */
/* How long request h may run: its deadline_ms, or 60 s when it names none (ops.c). */
uint64_t ol_node_req_deadline_ns(const struct ol_node_hdr *h);
void ol_node_reply(struct nconn *c, const struct ol_node_hdr *req, uint16_t flags, int status,
		   const void *payload, size_t len);
/* Build a reply in place: begin returns room for cap payload bytes, end seals and queues it. */
uint8_t *ol_node_out_begin(struct nconn *c, size_t cap);
void ol_node_out_end(struct nconn *c, uint8_t op, uint64_t call_id, uint16_t flags, int status,
		     size_t len);
/* Input processing paused by an op (fsync, read stream) goes on. */
void ol_node_resume(struct nconn *c);
/* A new connection of loop nl on l (fd -1 for a UCX endpoint: the caller sets c->ux), in
 * the loop's list; conn_start arms its HELLO timer and starts reading. */
struct nconn *ol_node_conn_new(struct nloop *nl, struct ol_loop *l, int fd, const char *peer);
void ol_node_conn_start(struct nconn *c);
/* The completions of a connection's receive (res: bytes, 0 or -errno) and send. */
void ol_node_on_recv(struct ol_loop *l, void *arg, int res);
void ol_node_on_sent(struct ol_loop *l, void *arg, int res);
/* Free a dead connection once no ring op and no callback refers to it. */
void ol_node_release(struct nconn *c);
/* Cut the connection off (after a protocol error; logged by the caller). */
void ol_node_kill(struct nconn *c);

/* ops.c: serve one authenticated request frame; 0 or -errno to answer the call with. */
int ol_node_dispatch(struct nconn *c, const struct ol_node_hdr *h, const uint8_t *p);
/* Called when the send queue drained a frame: a read stream sends its next chunk. */
void ol_node_read_pump(struct nconn *c);
/* Close what a dying connection still has open (a half-written shard is removed). */
void ol_node_ops_fini(struct nconn *c);
/* Open <drive>/.openlake/data (created) for each drive; -errno. */
int ol_node_ops_open_roots(struct ol_node_server *s);

/* mops.c: SHARD_PWRITE, SHARD_FSYNC and the META ops; init / fini of their state. */
struct ol_node_rd;
int ol_node_op_pwrite(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_fsync(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_meta_get(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_meta_scan(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_meta_commit(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_list(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
int ol_node_op_drive_id(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
void ol_node_mops_init(struct ol_node_server *s);
void ol_node_mops_fini(struct ol_node_server *s);
/* commit.c: OL_NODE_COMMIT. op_commit hands the request to a helper thread (0: answered
 * later, the connection paused and pending meanwhile) or refuses it (-EOPNOTSUPP: no
 * handler; -ESHUTDOWN: the server stops). init before the loops start; stop (any thread but
 * a loop's, before the loops shut down) answers what is queued, waits for the handlers
 * running and joins the helpers, and says whether any call was served (then server.c lets
 * the loops send the answers before it closes the connections); fini (after the loops are
 * freed) frees the rest. */
#define OL_NODE_COMMIT_REPLY (64u * 1024) /* reply bytes a handler may write (or max_payload) */
struct ncommit;
int ol_node_op_commit(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);
void ol_node_commit_init(struct ol_node_server *s);
bool ol_node_commit_stop(struct ol_node_server *s);
void ol_node_commit_fini(struct ol_node_server *s);
void ol_node_commit_stats(struct ol_node_server *s, struct ol_node_server_stats *out);
/* ops.c helpers mops.c shares */
int ol_node_target(struct nconn *c, struct ol_node_rd *r, char *name);
/* Drive d's data directory still exists (0), or it was removed under the plane (the drive
 * wiped while the node runs): then it is made again, empty, and served from now on (0), its
 * old metadata env retired (closed at fini), its lock taken again; -errno when that fails
 * (-EMFILE: wiped more than OL_NODE_MAX_RETIRED times: restart the node). Any thread. */
int ol_node_drive_check(struct ol_node_server *s, unsigned d);
int ol_node_make_parents(int root, const char *name);
int ol_node_sync_parent(int root, const char *name);

#endif
