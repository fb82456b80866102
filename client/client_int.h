/* client/client_int.h - libopenlake internals shared by client.c, ops.c and stats.c. */
#ifndef OL_CLIENT_INT_H
#define OL_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "compress.h"
#include "kv/proto.h"
#include "openlake/openlake.h"

#define OLC_POOL_MAX	 32 /* idle connections kept per node */
#define OLC_MAX_NODES	 64 /* nodes a client knows: seeds and view members, never removed */
#define OLC_MAX_REPLICAS 4

/* One mapping of a node's shm DRAM tier, shared by every client of the process (one set of
 * page tables per process, not per client); refcounted, unmapped with its last client. */
struct olc_map {
	uint8_t *base;
	uint64_t size, epoch, seq_off, unit;
	_Atomic uint64_t *faulted; /* one bit per 2 MiB chunk already prefaulted here */
	unsigned refs;		   /* under the process-wide map lock */
	struct olc_map *next;
};

/* Prefault the chunks of [off, off + len) once per mapping (one madvise per 2 MiB instead of
 * a page fault per 4 KiB). */
void olc_map_prefault(struct olc_map *m, uint64_t off, uint64_t len);

struct olc_ucx;

/* A slot the node reserved for this connection's next put of len bytes (COMMIT_ALLOC): usable
 * until until_ms (half the node's reservation TTL after the request left), then released. */
#define OLC_AHEAD_MAX 8
struct olc_ahead {
	uint64_t off, seq, len, until_ms;
};

struct olc_conn {
	int fd;		     /* -1 on a UCX connection */
	struct olc_ucx *ucx; /* ucx.c: a UCX connection, else NULL */
	void *ssl;	     /* SSL * when the client speaks TLS (opts.tls, TCP only), else NULL */
	bool local;	     /* shm path granted and mapped */
	bool reused;
	bool has_view;	 /* the server answers VIEW (WELCOME flag) */
	bool has_lease;	 /* the server answers LEASE (WELCOME flag; older servers close on it) */
	bool has_events; /* the server answers EVENTS (WELCOME flag; older servers close on it) */
	bool has_calloc; /* the server answers COMMIT_ALLOC (WELCOME flag; older ones close) */
	unsigned n_ahead;
	struct olc_ahead ahead[OLC_AHEAD_MAX]; /* reservations held for the next puts (local) */
	uint64_t last_len; /* the size of the last value put here (local; reservations repeat it) */
	uint32_t max_batch;
	uint64_t max_block;
	struct olc_map *map;
};

struct olc_node {
	char addr[256];
	uint64_t seed; /* rendezvous seed */
	pthread_mutex_t mu;
	struct olc_conn idle[OLC_POOL_MAX];
	unsigned n_idle;
	uint64_t down_until_ms;
	unsigned backoff_ms;
	struct olc_map *maps[8]; /* one per server epoch seen */
	unsigned n_maps;
	bool local_failed;		     /* shm could not be mapped: TCP from now on */
	char unix_path[OL_KVP_MAX_HOST + 1]; /* the node's shm-grant socket (WELCOME v2) */
	bool unix_failed;		     /* no grant there: TCP from now on */
};

/* Where keys go (view.c). A cluster view (a VIEW with epoch > 0) places a key on the members
 * with the highest weighted rendezvous score of (key, member id); a static one (no cluster:
 * the seeds as given, or a server without VIEW) on the seed with the highest hash of (key,
 * address), as before views. */
struct olc_vmember {
	uint32_t node; /* index into ol_client.nodes */
	uint32_t weight;
	uint64_t id, seed;
};
struct olc_view {
	bool cluster;
	uint64_t epoch;
	uint32_t tag;
	uint32_t n;
	struct olc_vmember m[OLC_MAX_NODES];
};

struct ol_client {
	struct olc_node *nodes; /* OLC_MAX_NODES slots; [0, n_nodes) in use; seeds first */
	_Atomic size_t n_nodes;
	size_t n_seeds;
	pthread_mutex_t vmu;	   /* cur, prev, has_prev, changed_ms; appending to nodes */
	struct olc_view cur, prev; /* prev: the view before the last change (grace window) */
	bool has_prev;
	uint64_t changed_ms;
	_Atomic uint64_t view_ms, try_ms; /* last refresh that answered / was tried */
	atomic_bool stale, refreshing, cluster_mode;
	_Atomic uint32_t cur_tag;
	unsigned replicas, grace_ms, refresh_ms;
	atomic_uint_fast64_t put_failed, grace_hits, view_changes;
	char *ns;
	uint8_t ns_hash16[16];
	uint64_t ns_seed;
	bool want_local;
	bool no_ahead; /* $OPENLAKE_KV_COMMIT_ALLOC=0: local puts never use COMMIT_ALLOC */
	bool no_nt;    /* $OPENLAKE_KV_NT_COPY=0: local puts copy with memcpy only */
	unsigned timeout_ms;
	void (*log)(int level, const char *msg, void *arg);
	void *log_arg;
	char host_id[64];
	char *token; /* opts.token, NULL = none */
	atomic_uint_fast64_t req_id;
	unsigned compress, compress_row_bytes; /* opts.compress (compress.c) */
	struct olz_stats zst;
	void *ssl_ctx;	/* SSL_CTX * (opts.tls), NULL = plaintext TCP */
	char *tls_name; /* opts.server_name, NULL = each node's host */
	void *ucx_ctx;	/* ucp_context_h: opts.device ucx / rdma / a NIC, or ucx:// seeds */
	bool ucx;	/* every node over UCX (opts.device), not only ucx:// ones */
};

/* view.c */
void olc_view_init(struct ol_client *c);
/* A reply entry's view tag: a cluster client refreshes its view when it differs. */
void olc_view_saw_tag(struct ol_client *c, uint32_t tag);
/* Refresh the view when it is stale or older than refresh_ms (one thread at a time; the
 * others go on with the current view). */
void olc_view_maybe_refresh(struct ol_client *c);
void olc_view_snapshot(struct ol_client *c, struct olc_view *cur, struct olc_view *prev,
		       bool *has_prev);
/* The r best nodes for key in v, best first, into out; returns how many (<= v->n). */
unsigned olc_place(const struct ol_client *c, const struct olc_view *v, const uint8_t *key,
		   uint32_t *out, unsigned r);
/* {"epoch":..,"tag":..,"cluster":..,"members":[{"id":..,"addr":..,"weight":..}],...} */
int olc_view_json(struct ol_client *c, char *buf, size_t cap);

void olc_log(struct ol_client *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t olc_now_ms(void);
/* Add a node by address (or find it): its index, or -ENOSPC (OLC_MAX_NODES). Under vmu. */
int olc_node_add(struct ol_client *c, const char *addr);

/* Take a connection to node (pooled or new, HELLO done). 0, -EHOSTDOWN (in backoff), -errno. */
int olc_conn_get(struct ol_client *c, struct olc_node *nd, struct olc_conn *out);
/* Give it back: ok = reusable, else closed (and, when down, the node enters backoff). */
void olc_conn_put(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn, bool ok);
void olc_node_down(struct ol_client *c, struct olc_node *nd, int err);
/* Close the node's pooled connections (the server went away: they are stale). */
void olc_node_drop_idle(struct olc_node *nd);

/* Send a request header + iovs and read the reply header (checked). */
int olc_send(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, struct iovec *iov,
	     int n);
int olc_recv_hdr(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp);
/* Same, reading extra_len more bytes (what always follows this reply header) in the same
 * syscall. A server never answers with fewer entries than asked (it closes instead). */
int olc_recv_hdr_ex(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
		    void *extra, size_t extra_len);

/* hashcopy.c: ol_kv_get_xxh3. A get attempt at an op starts with olc_hash_begin; a path that
 * copies or receives the value through olc_hash_copy / olc_hash_read hashes it on the way
 * (each piece while still in cache) and marks it done; ol_kv_get_xxh3 hashes the OK ops no
 * path marked (UCX, compression) with olc_hash_after. One thread per op at a time. */
struct olc_hash {
	const struct ol_kv_op *base; /* the caller's ops[]: op i is base + i */
	const size_t *iovcnt; /* hash what lands in op i's first iovcnt[i] iovs; NULL = all */
	uint64_t *out;	      /* [n]: the hashes */
	bool *done;	      /* [n]: out[i] is the hash of what op i's iovs hold now */
};
void olc_hash_begin(const struct olc_hash *hx, const struct ol_kv_op *op);
/* Copy len bytes from src into op's iovs (len <= their total), hashing; done. */
void olc_hash_copy(const struct olc_hash *hx, struct ol_kv_op *op, const uint8_t *src,
		   uint64_t len);
/* Read len value bytes from cn's socket into op's iovs (len <= their total), hashing; done.
 * 0 or -errno (then not done). */
int olc_hash_read(const struct olc_hash *hx, struct olc_conn *cn, struct ol_kv_op *op,
		  uint64_t len);
/* Hash what op's iovs hold (op->value_len bytes); done. */
void olc_hash_after(const struct olc_hash *hx, struct ol_kv_op *op);
/* XXH3-64 (seed 0) of the first limit bytes of iov[0..n): ol_iov_xxh3 with a limit. 0 or
 * -EINVAL (a NULL base with a length). */
int olc_xxh3_iov(const struct ol_iov *iov, size_t n, uint64_t limit, uint64_t *out);

/* One sub-batch (n <= max_batch ops of one node) on a TCP connection: send, then receive, so
 * the calls of several nodes overlap. op = OL_KVP_PUT/GET/EXISTS/DELETE. 0 or -errno
 * (connection broken: the caller marks the ops unreachable). olc_call_fini always. */
struct olc_call {
	uint8_t op;
	struct ol_kv_op **ops;
	size_t n, m; /* m = entries sent */
	struct ol_kvp_hdr h;
	unsigned hdr_timeout_ms;   /* recv: wait this long for the reply header (0 = timeout_ms);
				      the bytes after it get timeout_ms per read again */
	const struct olc_hash *hx; /* GET from ol_kv_get_xxh3: values hashed as received */
	void *priv;
};
int olc_tcp_send(struct ol_client *c, struct olc_conn *cn, struct olc_call *call);
int olc_tcp_recv(struct ol_client *c, struct olc_conn *cn, struct olc_call *call);
void olc_call_fini(struct olc_call *call);

/* The shared-memory path runs a sub-batch synchronously (several round trips). */
int olc_shm_put(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n);
/* hx: NULL, or ol_kv_get_xxh3's (values hashed as copied) */
int olc_shm_get(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n,
		const struct olc_hash *hx);

/* tls.c: opts.tls. init: 0, -EINVAL (CA file unusable: logged), -ENOMEM. connect: the
 * handshake on cn->fd, cn->ssl set; 0, -EKEYREJECTED (certificate refused), -EPROTO, -errno
 * (logged). olc_conn_close frees cn->ssl and closes cn->fd. */
int olc_tls_init(struct ol_client *c, const char *ca_file, const char *server_name,
		 const char *cert_file, const char *key_file);
void olc_tls_fini(struct ol_client *c);
int olc_tls_connect(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn);
void olc_conn_close(struct olc_conn *cn);

/* ucx.c (built with UCX): frames as active messages (src/kv/proto.h). init: the client's UCP
 * context (dev: an RDMA NIC to use, when it exists here; NULL = UCX chooses); 0 or -errno
 * (logged). connect: a worker and endpoint for nd ("ucx://host:port", else host:port + 1);
 * HELLO is the caller's. send / send_call: the request goes out (not waited for); recv_*:
 * wait (timeout_ms, 0 = c->timeout_ms) for it and its reply, checked as on TCP; read: the next
 * bytes of a reply body. close: all of cn's UCX resources; cn->ucx NULL after. */
bool olc_ucx_built(void);
int olc_ucx_init(struct ol_client *c, const char *dev);
void olc_ucx_fini(struct ol_client *c);
int olc_ucx_connect(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn);
void olc_ucx_close(struct olc_conn *cn);
/* The most request entries whose AM header this connection can send (its worker's limit). */
uint32_t olc_ucx_max_batch(const struct olc_conn *cn);
int olc_ucx_send(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, struct iovec *iov,
		 int n);
int olc_ucx_send_call(struct ol_client *c, struct olc_conn *cn, struct olc_call *call,
		      const uint8_t *ents, const size_t *idx);
int olc_ucx_recv_hdr_ex(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
			void *extra, size_t extra_len, unsigned timeout_ms);
int olc_ucx_recv_get(struct ol_client *c, struct olc_conn *cn, struct olc_call *call);
int olc_ucx_read(struct olc_conn *cn, void *buf, size_t len);
/* Read len bytes of a reply body: the socket, or the UCX reply. */
int olc_read(struct olc_conn *cn, void *buf, size_t len);

uint64_t olc_iov_len(const struct ol_kv_op *op);
/* ol_kv_put (put) / ol_kv_get without compression: the stored bytes as they are. */
int olc_run_plain(struct ol_client *c, bool put, struct ol_kv_op *ops, size_t n);

#endif
