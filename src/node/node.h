/* node/node.h - the node plane: framed, authenticated calls between the nodes of a cluster
 * (shard I/O on a peer's drives, ping, stat). Wire format: docs/node-protocol.md.
 *
 * Three parts:
 * - frame.c (pure, hostile-input safe, no allocation but a MAC context per connection
 *   direction): header codec, frame parser, payload readers/writers, key derivation and the
 *   per-frame MAC (ChaCha20-Poly1305 over AAD only), shard name rules.
 * - server.c + ops.c (daemon): serves rpc_addr on `threads` io_uring loops (io/loop.h), one
 *   SO_REUSEPORT listener per loop; a connection lives on the loop that accepted it. Ops are a
 *   dispatch table (ops.c), served on the loop, but for COMMIT, whose handler runs on the
 *   server's helper threads (commit.c). Logs through base/log.
 * - client.c (library grade: no logging, no abort, -errno): one connection to one peer,
 *   blocking calls each with a deadline.
 *
 * Security: every frame carries a Poly1305 tag (ChaCha20-Poly1305 over AAD only) over its
 * payload and header, under a key of its direction derived from the session key. The session key is
 * derived from the cluster secret and two 16-byte nonces exchanged at HELLO (the client's, then the
 * server's), and each direction numbers its frames 0, 1, 2, ... (the MAC's nonce): a frame replayed
 * from another connection or reflected back to its sender fails its MAC, one replayed or dropped
 * within a connection fails its sequence number. Frames are authenticated, not encrypted (keep the
 * plane on a private network, like the KV port; mTLS is not built).
 *
 * Flow control: the server grants each connection a credit window (bytes) at HELLO; a sender
 * never has more than that many frame bytes sent and not yet granted back. The server grants
 * bytes back once it consumed the frames (shard chunks written to the file), in the credit
 * field of any frame it sends (CREDIT frames when it has nothing else to say). A peer that
 * exceeds its window is cut off. */
#ifndef OL_NODE_NODE_H
#define OL_NODE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- wire format (frame.c, pure) ---- */

#define OL_NODE_MAGIC	   0x504e4c4fu /* "OLNP" as little-endian bytes */
#define OL_NODE_VERSION	   2 /* 1: HMAC-SHA256 (32 bytes); 2: ChaCha20-Poly1305 tags (16) */
#define OL_NODE_HDR	   40
#define OL_NODE_MAC	   16 /* the tag at the end of every frame */
#define OL_NODE_IV	   12 /* a frame's MAC nonce: direction u32 || seq u64 */
#define OL_NODE_NONCE	   16
#define OL_NODE_KEY	   32
#define OL_NODE_NAME_MAX   255
#define OL_NODE_MAX_DRIVES 64

enum ol_node_op {
	OL_NODE_HELLO = 1,
	OL_NODE_PING = 2,
	OL_NODE_CREDIT = 3, /* no call: carries a credit grant only */
	OL_NODE_STAT = 4,
	OL_NODE_SHARD_WRITE = 5,
	OL_NODE_SHARD_READ = 6,
	OL_NODE_SHARD_RENAME = 7,
	OL_NODE_SHARD_UNLINK = 8,
	OL_NODE_SHARD_PWRITE = 9, /* a chunk at an offset (create / exclusive / sync flags) */
	OL_NODE_SHARD_FSYNC = 10, /* fdatasync of a shard and fsync of its directory */
	OL_NODE_META_GET = 11,	  /* one record of a drive's metadata index (LMDB) */
	OL_NODE_META_SCAN = 12,	  /* a page of records from a key on */
	OL_NODE_META_COMMIT = 13, /* a batch of puts / deletes in one txn, fenced by an epoch */
	OL_NODE_SHARD_LIST = 14,  /* a page of the names in a shard directory */
	OL_NODE_DRIVE_ID = 15,	  /* a drive's identity record (claimed when it has none) */
	OL_NODE_COMMIT = 16,	  /* a shard writer's commit, run by the leader's store */
	OL_NODE_OP_MAX = 16,
};

/* DRIVE_ID flags: CLAIM: the request carries the record the caller expects; a drive without
 * one has it written (base/driveid.h) */
enum { OL_NODE_ID_CLAIM = 1 };

/* SHARD_PWRITE flags */
enum { OL_NODE_PW_CREATE = 1, OL_NODE_PW_EXCL = 2, OL_NODE_PW_SYNC = 4 };
/* META_COMMIT flags; with MC_GEN the flags byte is followed by the sender's generation u64
 * (node/mops.c, fencing) */
enum { OL_NODE_MC_SYNC = 1, OL_NODE_MC_GEN = 2 };
/* META_COMMIT entry kinds */
enum { OL_NODE_ME_PUT = 1, OL_NODE_ME_DEL = 2 };
/* The metadata databases a drive serves (meta/meta.h's enum ol_meta_db, fence excluded):
 * the record databases 0..4 and the missed-write records (6). A node older than db 6
 * refuses its ops (a protocol error). */
#define OL_NODE_META_NDB       5
#define OL_NODE_META_MISSED    6
#define OL_NODE_META_DB_OK(db) ((db) < OL_NODE_META_NDB || (db) == OL_NODE_META_MISSED)
#define OL_NODE_META_KEY       511 /* LMDB's key limit */

enum ol_node_flag {
	OL_NODE_F_REPLY = 1, /* server -> client */
	OL_NODE_F_MORE = 2,  /* more frames of this call follow */
	OL_NODE_F_FIRST = 4, /* first frame of a streamed request */
	OL_NODE_F_ENC = 8,   /* the payload is encrypted (ol_node_encrypt) */
	OL_NODE_F_ALL = 15,
};

struct ol_node_hdr {
	uint8_t version, op;
	uint16_t flags;
	uint64_t call_id, seq;
	uint32_t deadline_ms; /* the call's remaining time when sent (requests; 0 = none) */
	int32_t status;	      /* replies: 0 or -errno */
	uint32_t credit;      /* bytes granted back to the receiver of this frame */
	uint32_t len;	      /* payload bytes */
};

/* Encode h into out[OL_NODE_HDR] (magic and version written). */
void ol_node_hdr_encode(const struct ol_node_hdr *h, uint8_t *out);

/* Parse the frame at buf[0..len): 0 = need more bytes, > 0 = the whole frame's size (header,
 * payload, MAC) with *h filled, -EPROTO = not a frame of this protocol (magic, op, flags),
 * -EPROTONOSUPPORT = a frame of another version of it (h->version says which; seen at the
 * fifth byte), -EMSGSIZE = payload over max_payload. Pure; the MAC is not checked here. */
ssize_t ol_node_frame_parse(const uint8_t *buf, size_t len, uint32_t max_payload,
			    struct ol_node_hdr *h);

/* key = HMAC-SHA256(secret, "openlake-node-v1" || cnonce || snonce): the session key; the HELLO
 * request is authenticated under it with snonce all zero. 0 or -EIO (OpenSSL). */
int ol_node_kdf(const char *secret, const uint8_t *cnonce, const uint8_t *snonce, uint8_t *key);

/* Frame MACs: the 16-byte tag of ChaCha20-Poly1305 (RFC 8439) with payload || header as the
 * AAD and no plaintext, i.e. Poly1305 under a one-time key ChaCha20 derives from (key, nonce).
 * One struct ol_node_mac per direction of a connection: a sender seals with its direction's,
 * a receiver checks with the peer's. Each direction has its own key,
 *   HMAC-SHA256(session key, "openlake-node-v2 frame mac" || dir u32),
 * and frame seq's nonce is dir u32 || seq u64 (little-endian): a sender never numbers two
 * frames alike on one key, so no (key, nonce) pair is used twice. new allocates (once per
 * connection; nothing per frame): 0 or -ENOMEM. One thread at a time per context. */
enum { OL_NODE_C2S = 1, OL_NODE_S2C = 2 };
struct ol_node_mac;
int ol_node_mac_new(struct ol_node_mac **out);
void ol_node_mac_free(struct ol_node_mac *m);
/* Key m for direction dir from a session key (ol_node_kdf). 0 or -EIO (OpenSSL, bad dir). */
int ol_node_mac_key(struct ol_node_mac *m, const uint8_t *key, uint32_t dir);
/* tag[OL_NODE_MAC] = the MAC of (the iov bytes || hdr[OL_NODE_HDR]) with the nonce of the
 * header's seq; the payload is read where it lies. 0 or -EIO (not keyed, OpenSSL). */
struct iovec;
int ol_node_mac_seal(struct ol_node_mac *m, const uint8_t *hdr, const struct iovec *iov, int niov,
		     uint8_t *tag);
/* Check the tag at the end of a parsed frame (constant time). 0 or -EBADMSG. */
int ol_node_mac_check(struct ol_node_mac *m, const uint8_t *frame, const struct ol_node_hdr *h);
/* Encrypted frames (OL_NODE_F_ENC set in hdr): the same AEAD under the same key and nonce,
 * with the header as AAD and the payload as plaintext; a HELLO's (or reply's) first
 * OL_NODE_NONCE payload bytes stay in the clear, in the AAD after the header. seal_enc encrypts the
 * iov bytes into out (their total length; out may be the one iov's own buffer) and makes the tag;
 * open checks the tag of a parsed frame and decrypts its payload in place (left as it was on
 * -EBADMSG is not promised: drop the frame). 0, -EIO (not keyed, OpenSSL), -EBADMSG. */
int ol_node_mac_seal_enc(struct ol_node_mac *m, const uint8_t *hdr, const struct iovec *iov,
			 int niov, uint8_t *out, uint8_t *tag);
int ol_node_mac_open(struct ol_node_mac *m, uint8_t *frame, const struct ol_node_hdr *h);
/* Checks a received frame as this process's setting says (ol_node_encrypt): an encrypted
 * frame is opened, a plain one MAC-checked, and with encryption on a plain frame other than
 * a HELLO (or its reply) is refused. 0, -EBADMSG (MAC), -EPERM (plain while encrypting). */
int ol_node_frame_open(struct ol_node_mac *m, uint8_t *frame, const struct ol_node_hdr *h);

/* Encryption of the node plane's frames ([cluster] plane_encrypt), for every client and
 * server of this process: set it before the first plane connection. On: every frame after
 * HELLO carries OL_NODE_F_ENC and an encrypted payload, and a plain one from a peer is
 * refused. Off (default): frames are sent authenticated only; an encrypted one from a peer is
 * still opened, and a server answers encrypted on a connection whose client encrypts.
 * A client that encrypts sends its HELLO encrypted and the server answers it encrypted (all
 * but the leading nonce, which is in the AAD: docs/node-protocol.md). */
void ol_node_encrypt(bool on);
bool ol_node_encrypting(void);

/* A shard name: 1..4 components joined by '/', each 1..128 of [A-Za-z0-9._-] and not
 * starting with '.', OL_NODE_NAME_MAX bytes at most. So never "..", never absolute. */
bool ol_node_name_ok(const char *name, size_t len);

/* Bounded little-endian payload reading: any overrun sets err and reads zeros. */
struct ol_node_rd {
	const uint8_t *p;
	size_t n;
	bool err;
};
uint16_t ol_node_get16(struct ol_node_rd *r);
uint32_t ol_node_get32(struct ol_node_rd *r);
uint64_t ol_node_get64(struct ol_node_rd *r);
/* A u16-length-prefixed string copied NUL-terminated into out[cap] (err if it does not fit or
 * holds a NUL). Returns its length. */
size_t ol_node_getstr(struct ol_node_rd *r, char *out, size_t cap);
const uint8_t *ol_node_getbytes(struct ol_node_rd *r, size_t n);

/* One entry of a META_COMMIT batch or of a META_SCAN page (pointers into the payload). */
struct ol_node_mentry {
	uint8_t kind; /* OL_NODE_ME_PUT / _DEL (pages: PUT) */
	uint8_t db;
	const uint8_t *key, *val;
	uint16_t klen;
	uint32_t vlen;
};
/* Read the next entry: kind u8, db u8, klen u16, key, vlen u32, val (commit) or, with
 * page = true, klen u16, key, vlen u32, val (kind PUT, db 0). 0 or -EPROTO (r->err set, or a
 * kind, db or key length out of range: key 1..OL_NODE_META_KEY bytes). Pure. */
int ol_node_mentry_get(struct ol_node_rd *r, bool page, struct ol_node_mentry *e);

/* Writing into a caller's buffer: an overflow sets err. */
struct ol_node_wr {
	uint8_t *p;
	size_t n, cap;
	bool err;
};
void ol_node_put16(struct ol_node_wr *w, uint16_t v);
void ol_node_put32(struct ol_node_wr *w, uint32_t v);
void ol_node_put64(struct ol_node_wr *w, uint64_t v);
void ol_node_putstr(struct ol_node_wr *w, const char *s);
void ol_node_putbytes(struct ol_node_wr *w, const void *b, size_t n);

/* ---- server (daemon side: server.c, ops.c) ---- */

struct ol_node_server;

struct ol_node_server_opts {
	const char *addr;   /* "host:port" (rpc_addr) */
	const char *secret; /* cluster secret, non-empty */
	unsigned self_id;
	unsigned threads;     /* loops, >= 1 */
	uint32_t window;      /* credit window per connection, bytes */
	uint32_t max_payload; /* largest frame payload accepted */
	unsigned n_drives;
	const char *const *drives; /* data dirs; shard names live under <dir>/.openlake/data */
	/* The metadata index of a drive (<dir>/.openlake/meta.mdb) is opened by the first META
	 * op on it, locked as a store locks a data dir: a node serves its drives' metadata to a
	 * remote set only when no local store of this process holds them. */
	unsigned hello_timeout_ms; /* a connection without a valid HELLO by then is closed
				      (0 = 10 s) */
	/* OL_NODE_TCP (0): TCP listeners on `threads` loops. OL_NODE_UCX: a UCX listener on
	 * addr (UCX_TLS picks the wire: RDMA verbs, tcp, shm) on one loop, whatever threads
	 * says; the same frames, MACs, deadlines and credit window (docs/node-protocol.md,
	 * "UCX transport"). -EPROTONOSUPPORT when this build has no UCX. */
	unsigned transport;
	unsigned *port; /* where to store the port listened on (addr's port 0); may be NULL */
};
enum { OL_NODE_TCP = 0, OL_NODE_UCX = 1 };
/* True when this build has the UCX transport (libucx-dev was found). */
bool ol_node_ucx_available(void);
/* The RDMA device ("mlx5_0", "mlx5_0:1") the plane's UCX connections use, as [rdma]
 * dev_name says: set it before the first UCX server or client; "" or NULL lets UCX choose.
 * $UCX_NET_DEVICES wins. 0, -ENODEV (no such device here: UCX will choose; the caller warns),
 * -EPROTONOSUPPORT (no UCX in this build). */
int ol_node_ucx_device(const char *dev);

/* Listen on o->addr and serve. Returns at once. -EADDRINUSE, -EINVAL, -ENOMEM, -EOPNOTSUPP
 * (no usable io_uring), or another -errno. */
int ol_node_server_start(const struct ol_node_server_opts *o, struct ol_node_server **out);
/* The handler of OL_NODE_COMMIT calls (a follower's shard writer sends its commit to the
 * leader: docs/cluster.md "Writes on every node"): fn runs on a helper thread of the server
 * ("ol-node-commit"; never on a loop: it may call planes, this node's own included, and block
 * for seconds), one call per connection at a time (the connection reads nothing more
 * meanwhile), at most OL_NODE_COMMIT_THREADS at once across the server (more wait in FIFO
 * order; a handler that itself waits on COMMITs to this server can starve it; a call still
 * waiting when its request's deadline passes is answered -ETIMEDOUT and never run, but a call
 * running then is not stopped: a caller's -ETIMEDOUT leaves the outcome unknown, so it must
 * not undo what a late commit would reference). It is given
 * the request payload (req[len], valid during the call; one frame, so at most the server's
 * max_payload, [cluster] plane_max_frame, 1 MiB by default: ol_node_call refuses a bigger one
 * with -EMSGSIZE before sending) and answers a status (0 or -errno, sent as the reply's
 * status; > 0 or *rlen > cap is a bug, answered -EIO) and up to cap bytes of reply payload in
 * reply (*rlen; cap is 64 KiB, or max_payload when smaller), sent with any status. NULL fn
 * (the default): such calls are answered -EOPNOTSUPP at once. Any thread, any time after
 * start; a call keeps the fn (and arg) set when its request arrived. A connection that dies
 * while its call runs: the call finishes, its answer is dropped. Stop refuses new calls
 * (-ESHUTDOWN), answers those still queued -ESHUTDOWN without running them, waits for the
 * running ones and lets the loops send their answers (2 s at most) before it closes the
 * connections; fn is never called after stop returns (so fn must not stop this server).
 * Served over TCP and UCX alike. */
#define OL_NODE_COMMIT_THREADS 8
typedef int (*ol_node_commit_fn)(void *arg, const uint8_t *req, size_t len, uint8_t *reply,
				 size_t cap, size_t *rlen);
void ol_node_server_set_commit(struct ol_node_server *s, ol_node_commit_fn fn, void *arg);
/* Inside a COMMIT handler (on its helper thread): the ms left until its caller's deadline
 * (the request's deadline_ms, counted from its arrival; 60 s for a request without one), 0
 * once it passed: a handler bounds its own plane calls by it and starts no commit its caller
 * can no longer hear about. -1 on any other thread. */
int64_t ol_node_commit_left_ms(void);
/* Close the listeners and every connection, stop and join the loops, free s. */
void ol_node_server_stop(struct ol_node_server *s);

struct ol_node_server_stats {
	uint64_t conns, auth_failures, protocol_errors, frames, window_violations, hello_timeouts;
	uint64_t max_held; /* most frame bytes one connection held before granting them back */
	/* COMMIT calls handed to the helpers since start; of them, waiting for a helper now and
	 * running now */
	uint64_t commits, commits_queued, commits_running;
};
void ol_node_server_stats(struct ol_node_server *s, struct ol_node_server_stats *out);

/* ---- client (library grade) ---- */

struct ol_node_client;

struct ol_node_drive {
	char path[OL_NODE_NAME_MAX + 1];
	char uuid[40]; /* "" when the drive has no identity record */
};

struct ol_node_peer_info {
	unsigned node_id;
	uint32_t window, max_payload;
	unsigned n_drives;
	struct ol_node_drive drives[OL_NODE_MAX_DRIVES];
};

/* A client for the peer at addr: "host:port" (TCP) or "ucx://host:port" (a peer serving
 * plane_transport = "ucx"; -EPROTONOSUPPORT in a build without UCX). No I/O here: each call
 * connects when the client has no live connection, and a call that fails in a way that leaves the
 * stream in an unknown state (deadline, broken socket, protocol error) closes it. One thread at a
 * time per client (a caller keeps one client per peer per thread, or locks). -ENOMEM, -EINVAL. */
int ol_node_client_new(const char *addr, const char *secret, unsigned self_id,
		       struct ol_node_client **out);
void ol_node_client_free(struct ol_node_client *c);
/* Abandon c's call in progress, from any thread (the one running the call keeps c): its
 * TCP connection is shut down (a UCX endpoint's wait is woken and cancelled), so a blocked
 * send or recv returns at once, and that call and every later one on c fail with -ECANCELED
 * or a broken-connection error; the owner then frees c (it never connects again). */
void ol_node_client_abort(struct ol_node_client *c);

/* Every call takes deadline_ms > 0: the whole call (connect and HELLO included) ends by then,
 * or fails with -ETIMEDOUT. Other results: 0, the peer's -errno for the op (-ENOENT,
 * -EINVAL for a bad name or drive, ...), -EACCES (the peer refused our HELLO: the secrets
 * differ), -EBADMSG (a frame from the peer failed its MAC or sequence), -ECONNREFUSED,
 * -ECONNRESET, -EPROTO. */

/* Connect (if needed) and return what the peer said at HELLO. */
int ol_node_hello(struct ol_node_client *c, int deadline_ms, struct ol_node_peer_info *out);
/* One round trip; *rtt_ns its time (may be NULL). */
int ol_node_ping(struct ol_node_client *c, int deadline_ms, uint64_t *rtt_ns);
int ol_node_stat(struct ol_node_client *c, unsigned drive, const char *name, int deadline_ms,
		 uint64_t *size);

/* Stream a shard to name on the peer's drive: src is called for bytes until it returns 0
 * (end) or -errno (the call fails with it and the peer discards the file); chunks of at most
 * the peer's max_payload go out as credit allows. The peer fsyncs the file before it
 * answers. *written = bytes the peer stored (may be NULL). */
typedef ssize_t (*ol_node_src_fn)(void *arg, void *buf, size_t cap);
int ol_node_shard_write(struct ol_node_client *c, unsigned drive, const char *name,
			ol_node_src_fn src, void *arg, int deadline_ms, uint64_t *written);

/* Read len bytes at off of the shard (short at its end): sink is given them chunk by chunk as
 * they arrive (a sink error ends the call with it and closes the connection). *got = bytes
 * delivered (may be NULL). */
typedef int (*ol_node_sink_fn)(void *arg, const void *buf, size_t len);
int ol_node_shard_read(struct ol_node_client *c, unsigned drive, const char *name, uint64_t off,
		       uint64_t len, ol_node_sink_fn sink, void *arg, int deadline_ms,
		       uint64_t *got);

/* rename(from, to) on the peer's drive, then fsync of the directory. */
int ol_node_shard_rename(struct ol_node_client *c, unsigned drive, const char *from, const char *to,
			 int deadline_ms);
int ol_node_shard_unlink(struct ol_node_client *c, unsigned drive, const char *name,
			 int deadline_ms);

/* One request frame (payload = the iov bytes, at most the peer's max_payload: -EMSGSIZE)
 * and its one reply: *reply points at its payload (*rlen bytes) inside the client, valid until
 * the next call on c. Returns the peer's status, with the reply's payload whatever the status
 * (COMMIT's handler may explain a refusal there); the connection stays open after a peer's
 * status. *reply is NULL (and *rlen 0) exactly when no reply arrived: the result is a local
 * failure then (as listed above), and a request that may have gone out has an unknown
 * outcome (what a COMMIT caller must treat as such). For ops 9..16 (docs/node-protocol.md). */
struct iovec;
int ol_node_call(struct ol_node_client *c, uint8_t op, const struct iovec *iov, int niov,
		 int deadline_ms, const uint8_t **reply, size_t *rlen);
/* The same split in two, so several calls can be on the wire at once (the peer answers a
 * connection's calls in order): send queues one request frame (*call_id for recv) without
 * waiting; recv waits for the answer of call_id, which must be the oldest one unanswered.
 * The first send of a pipeline sets the deadline of all. send returns -EAGAIN, sending
 * nothing, when the credit window is short while calls are unanswered (recv one, then send
 * again); -EMSGSIZE, sending nothing, when the payload is over the peer's max_payload. A
 * failure that leaves the stream unknown closes the connection and forgets the pipeline.
 * Not for streamed ops (SHARD_WRITE, SHARD_READ). */
int ol_node_send(struct ol_node_client *c, uint8_t op, const struct iovec *iov, int niov,
		 int deadline_ms, uint64_t *call_id);
int ol_node_recv(struct ol_node_client *c, uint64_t call_id, const uint8_t **reply, size_t *rlen);
/* Calls sent and not yet answered. */
unsigned ol_node_client_pending(const struct ol_node_client *c);
/* The peer's max_payload after a successful call (0 before). */
uint32_t ol_node_client_max_payload(const struct ol_node_client *c);

struct ol_node_client_stats {
	uint64_t max_outstanding; /* most frame bytes sent and not yet granted back */
	uint64_t credit_waits;	  /* times a send waited for credit */
	uint64_t connects;
};
void ol_node_client_stats(const struct ol_node_client *c, struct ol_node_client_stats *out);

/* ---- test-only fault hook (fault.c) ----
 *
 * Off unless the process runs with OPENLAKE_FAULTS=1 and OPENLAKE_FAULT_FILE=PATH. Then every
 * call of the client reads PATH (a missing file: no fault) before it starts; a line
 * `hold OP MS` (OP a name as in enum ol_node_op without OL_NODE_, e.g. META_COMMIT) holds a
 * request of that op before it goes on the wire until MS ms passed (10 minutes at most) or the
 * line is gone from PATH (re-read every 20 ms). The call's deadline starts after the hold: the
 * hook stands for a sender that stalls between deciding to send and sending (the rest of the
 * process, its lease keepalives included, goes on), so a test can keep a leader's commit in
 * flight while the leader loses its set. Each hold appends `held OP` to PATH.hits when it
 * starts and `released OP` when it ends. Costs one getenv per process when off. */
void ol_node_fault_hold(uint8_t op);

/* The same `hold NAME MS` rule for a named point of the daemon rather than a frame: the
 * calling thread waits there as above (`held NAME` / `released NAME` in PATH.hits); `*`
 * names every op, never a point. Points:
 * VIEW_SWAP (a node that does not serve, about to close its read-only view of the store
 * because the layout's pools changed: the view stays behind the layout while held). */
void ol_node_fault_hold_at(const char *point);

/* The same file's `delay OP MS PEER` lines (OP a name or `*` for every op; PEER the peer's
 * plane address as the client dials it, "host:port", or `*`): a call of that op to that peer
 * waits MS ms once its deadline runs and before it sends, as if the network took that much
 * longer; a delay that reaches the call's deadline fails the call with -ETIMEDOUT (the
 * connection is dropped, as on any timeout). Unlike a hold, it stands for a slow link, not a
 * stalled sender. Returns the delay in ms for op to peer now, 0 when none or when off. */
int64_t ol_node_fault_delay(const char *peer, uint8_t op);

/* Pure: the ms the rules text (NUL-terminated, lines as above) sets for a rule of kind
 * ("hold" or "delay") on op and peer (NULL: only rules without a peer or with `*` match); the
 * last matching line wins, capped at 10 minutes; 0 when none matches. */
int64_t ol_node_fault_rule_ms(const char *rules, const char *kind, uint8_t op, const char *peer);

#endif
