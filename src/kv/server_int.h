/* kv/server_int.h - private to the KV server (server.c: frames, handlers, limits; serve_loop.c:
 * TCP (plaintext or [kv_tls]) and Unix connections as state machines on io/ loops).
 *
 * A frame is handled in three parts that every path shares: kvs_precheck (may this connection
 * run this op at all), then either the streaming PUT / GET code of the loops (or of ucx.c), or
 * kvs_handle over the whole body (every other op: its body is at most OL_KVS_BODY bytes, read
 * first) that leaves the reply in c->out*. */
#ifndef OL_KV_SERVER_INT_H
#define OL_KV_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "io/loop.h"
#include "kv/access.h"
#include "kv/engine.h"
#include "kv/lease.h"
#include "kv/proto.h"
#include "kv/view.h"
#include "tls/tls.h"

/* Refused connections stay open (error frame sent, write side shut) this long, so the
 * client reads the error instead of a reset; at most this many at once. */
#define OL_KV_REFUSED_MS  1000
#define OL_KV_REFUSED_MAX 256
/* [kv_tls]: ciphertext a connection's session buffers each way (allocated at first use). */
#define OL_KVS_TLS_BUF (64u * 1024)
/* The largest body kvs_handle reads first: a batch of request entries. */
#define OL_KVS_BODY ((size_t)OL_KVP_MAX_BATCH * OL_KVP_REQ_ENT)
/* GET replies of NVMe-tier entries read ahead together (the loops' KVL_READ_AHEAD) sent with
 * one sendmsg. */
#define OL_KVS_GATHER 16
/* Reply bodies built in c->reps: a batch of reply entries (a WELCOME or STATS fits too). */
#define OL_KVS_REPS ((size_t)OL_KVP_MAX_BATCH * OL_KVP_REP_ENT)

struct conn;
struct ol_strbuf;
struct kvloop;
struct kvhelp;

/* Per-namespace figures (the console's KV panel): one slot per namespace a client said HELLO
 * with, the first KVS_NS_MAX - 1 names; later ones share the last slot ("(other)"). Counted
 * where the reply is formed, over every path (blocking, serve loop, shm LOOKUP/COMMIT). */
#define KVS_NS_MAX 64
struct kvs_ns {
	char name[OL_KVP_MAX_NS + 1]; /* set once, before n_ns covers it */
	atomic_uint_fast64_t puts, put_bytes, hits, misses;
};

struct ol_kv_server {
	struct ol_kve *eng;
	struct kvs_ns *ns;     /* KVS_NS_MAX slots */
	pthread_mutex_t ns_mu; /* adding a slot */
	atomic_uint n_ns;
	int lfd, ufd; /* TCP listener, Unix (shm grant) listener */
	unsigned port;
	char upath[108];
	pthread_t reaper;
	bool reaper_running;
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv, reap_cv;
	struct conn *conns;
	unsigned n_conns;
	char host_id[64];
	struct ol_kvp_limits lim;
	struct ol_kva acl;
	struct ol_tls *tls; /* [kv_tls]: the TCP port speaks TLS only; NULL = plain */
	struct kvv view;    /* the members VIEW answers with; its tag rides on reply entries */
	unsigned max_conns, max_per_addr, max_pins_conn, max_pins;
	uint64_t ttl_ms; /* [kv_slab] reserve_ttl_secs: pins and reservations older are dropped */
	atomic_uint_fast64_t n_pins;
	struct kvl_leases leases; /* LEASE: pins by (namespace, key), ended by ttl or LEASE 0 */
	atomic_uint_fast64_t last_log_ms, quiet; /* rate-limited refusal log */
	struct {
		int fd;
		uint64_t t_ms;
	} refused[OL_KV_REFUSED_MAX]; /* under mu */
	unsigned n_refused;
	struct kvloop *loops; /* serve_loop.c: one per core */
	unsigned n_loops;
	atomic_uint loops_up; /* serve_loop.c: loops an accept may hand a connection to (all
			       * started; 0 until then and from the stop on) */
	struct kvhelp *help;  /* serve_loop.c: the helper threads for blocking engine calls */
	struct kvu *ucx;      /* ucx.c: the UCX listener and its thread; NULL = none */
};

struct pinref {
	uint64_t off, seq, t_ms;
};

/* A GET entry of a batch read from the NVMe tier on its connection's loop (serve_loop.c). */
struct kvnv {
	struct conn *c;
	struct ol_loop_op op;  /* its read */
	struct ol_kve_nvrd rd; /* the held extent (st OL_KVE_NVME until ol_kve_pin_finish) */
	struct ol_kve_slot sl; /* its value: a DRAM pin (off set) or inside c->rdbuf */
	size_t at, got;	       /* its record's place in c->rdbuf, the bytes read so far */
	int32_t st;	       /* its engine status; OL_KVE_NVME: not finished */
	int res;	       /* its read's result (bytes or -errno) */
	bool busy;	       /* its read is in flight */
};

/* Allocated with mmap (with its entry buffers) and unmapped at close: the memory of idle
 * connections returns to the system when they go, not to a malloc arena. */
struct conn {
	struct ol_kv_server *s;
	struct conn *prev, *next;
	int fd;
	struct ol_tls_mem tls; /* [kv_tls] (TCP only): the session; tls.ssl NULL = plaintext */
	char peer[64];
	uint8_t addr[16]; /* peer address (per-address limit); unix: zeros */
	uint8_t ns[16];
	char ns_str[OL_KVP_MAX_NS + 1];
	uint16_t ns_len;
	unsigned ns_slot; /* 1 + index into s->ns after HELLO; 0 = none yet (not counted) */
	bool local;	  /* shm path granted */
	bool is_unix;	  /* came over the Unix socket */
	bool authed;	  /* may run ops (AUTH done, or no access control) */
	bool hello;	  /* HELLO done */
	uint8_t nonce[OL_KVP_NONCE];
	uint64_t n_ahead;    /* COMMIT_ALLOC reservations made (their keys: nonce ^ count) */
	pthread_mutex_t pmu; /* pins: the connection's thread and the reaper */
	struct pinref *pins; /* LOOKUP pins and ALLOC reservations held by this connection */
	size_t n_pins, cap_pins;
	size_t map_len;
	uint8_t *ents;	  /* request entries, or a whole small body (OL_KVS_BODY) */
	uint8_t *reps;	  /* reply body (OL_KVS_REPS), with OL_KVP_HDR bytes of room before it */
	uint8_t rb[8192]; /* bytes received ahead (a header and its entries come in one recv) */
	size_t rb_off, rb_len;
	uint8_t pend[OL_KVP_HDR]; /* a GET reply header, sent with the first entry */
	bool has_pend;
	/* the reply kvs_handle left: header fields, body (c->reps or out_buf, freed after) */
	bool out_reply;
	int32_t out_status;
	uint32_t out_count;
	const uint8_t *out_body;
	size_t out_len;
	uint8_t *out_buf;
	/* serve_loop.c */
	struct kvloop *lp; /* the loop serving it (NULL: a UCX connection) */
	struct ol_loop_op op;
	struct ol_loop_timer tmo;
	struct ol_loop_msg msg;
	struct conn *hnext; /* helper queue */
	int job;	    /* what the helper runs */
	int cst;	    /* state */
	bool direct;	    /* the recv in flight fills a destination (not rb) */
	bool close_after;   /* the reply is a refusal: close once it is sent */
	bool timed_out;	    /* the frame timeout cancelled the op in flight */
	bool tls_seen;	    /* TLS: the first byte was not a plaintext frame's */
	bool tls_sending;   /* TLS: the ring op in flight sends ciphertext (else receives) */
	bool tls_pumping;   /* TLS: c->iov is being encrypted and sent (else a read waits) */
	struct ol_kvp_hdr h;
	uint64_t left;
	uint32_t i;
	size_t got;
	struct ol_kvp_req_ent e;
	struct ol_kvk k;
	struct ol_kve_slot sl;
	bool sl_held;	 /* sl is a reservation (PUT) or pin (GET) of ours */
	int32_t st;	 /* a helper's engine status */
	uint8_t *bounce; /* a helper's NVMe-tier value being sent (malloc) */
	/* a GET batch: entry i and the NVMe-only entries after it, read on the loop's ring into
	 * slices of rdbuf and sent in one gathered reply (the last may be a DRAM hit or a miss) */
	struct kvnv nv[OL_KVS_GATHER];
	unsigned nnv, nv_wait; /* entries in the batch, reads in flight */
	uint8_t *rdbuf;	       /* their buffer (OL_KVS_ALIGN-aligned, kept between batches) */
	size_t rdcap;
	int rdfix; /* rdbuf's fixed-buffer slot on the loop's ring + 1; 0 = not registered */
	uint8_t gh[OL_KVP_HDR + OL_KVP_REP_ENT];
	uint8_t gh_more[OL_KVS_GATHER][OL_KVP_REP_ENT]; /* the batch's later reply heads */
	struct iovec iov[2 + 2 * OL_KVS_GATHER];
	unsigned niov, iov_i;
	struct msghdr mh; /* the sendmsg in flight: iov[iov_i..niov) */
};

/* server.c */
void kvs_refuse_log(struct ol_kv_server *s, const char *peer, const char *what);
const char *kvs_why(int r);
/* 0: c may run h (its body is then read by the caller); -ECANCELED with a refusal reply set
 * (send it, then close); -EMSGSIZE: a body too large for its op (close). */
int kvs_precheck(struct conn *c, const struct ol_kvp_hdr *h);
/* Whether the body of h is skipped rather than read (STATS, VIEW ignore theirs). */
bool kvs_skips_body(const struct ol_kvp_hdr *h);
/* Every op but PUT and GET over its whole body (body_len bytes, skipped ones: NULL). Leaves
 * the reply in c->out_* (out_reply false: none). 0, -ECANCELED (a refusal is set: send it,
 * then close), or another -errno (close). May block on a disk when kvs_may_block says so. */
int kvs_handle(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *body);
bool kvs_may_block(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *body);
/* Encode the reply header for c->out_* at c->reps - OL_KVP_HDR (when the body is c->reps) or
 * into hb; returns the header's address. */
uint8_t *kvs_out_hdr(struct conn *c, const struct ol_kvp_hdr *rq, uint8_t hb[OL_KVP_HDR]);
void kvs_out_done(struct conn *c);
void kvs_rep_put(struct conn *c, uint32_t i, int32_t status, uint64_t len, uint64_t off,
		 uint64_t seq);
/* Count a put (stored or not) / a get or LOOKUP answer for c's namespace (server.c). */
void kvs_ns_put(struct conn *c, int st, uint64_t len);
void kvs_ns_get(struct conn *c, int st);
void kvs_get_head(struct conn *c, const struct ol_kvp_req_ent *e, int st,
		  const struct ol_kve_slot *sl, uint8_t rep[OL_KVP_REP_ENT]);
/* Admit an accepted fd (limits; a refused one is answered and parked): the new connection,
 * registered (with its TLS session on the TCP port under [kv_tls]), or NULL. */
struct conn *kvs_admit(struct ol_kv_server *s, int fd, bool is_unix);
/* A connection without a socket (UCX endpoints): the limits of kvs_admit, then registered.
 * NULL with *why set when refused ("" = the server is stopping). */
struct conn *kvs_admit_nofd(struct ol_kv_server *s, const uint8_t addr[16], const char *peer,
			    const char **why);
/* Close c: its pins and reservations released, fd closed, unregistered, unmapped. */
void kvs_conn_close(struct conn *c);
/* Answer fd with an error frame (req_id 0, status err, in plaintext), shut our side and close
 * it a second later (the fd is the server's then); what is logged, rate-limited. */
void kvs_refuse_fd(struct ol_kv_server *s, int fd, const char *peer, int err, const char *what);
/* Close the refused connections whose error frame had its time to arrive (all: force). */
void kvs_refused_flush(struct ol_kv_server *s, bool force);

/* serve_loop.c */
/* Start one loop per CPU of the process's affinity mask (each accepting on s->ufd, and on
 * s->lfd unless placement narrows the TCP accepts to the NIC's NUMA node) and the helper
 * threads. With cfg->pin_threads "auto", loop N runs on the N-th CPU of the mask
 * (io/topo.h). addr: the TCP listen address. 0 or -errno. */
int kvl_start(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr);
/* Serve c (admitted: plaintext, TLS or Unix) on the calling loop. */
void kvl_conn_start(struct kvloop *lp, struct conn *c);
/* openlake_kv_loop_connections: the connections each started loop serves (any thread; not
 * after kvl_stop began). */
void kvl_metrics_render(struct ol_strbuf *b, struct ol_kv_server *s);
/* Stop the loops and helpers: every connection of theirs must be closed already (shut down
 * their sockets and wait for n_conns to reach 0 first). */
void kvl_stop(struct ol_kv_server *s);

/* ucx.c (built with UCX only): the KV protocol over UCX active messages, served by a thread of
 * its own (docs/kv-protocol.md, "UCX transport"). start: listen on [rdma] port (0 = the KV
 * port + 1; 0 when the KV port is ephemeral) of the KV address's host; 0 or -errno (logged).
 * stop: close every UCX connection (pins and reservations released), then the listener, worker
 * and context; a no-op when not started. Called once each, from the server's start/stop. */
struct ol_config;
#ifdef OL_HAVE_UCX
int kvu_start(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr);
void kvu_stop(struct ol_kv_server *s);
#else
static inline void
kvu_stop(struct ol_kv_server *s)
{
	(void)s;
}
#endif

#endif
