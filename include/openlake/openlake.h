/* openlake/openlake.h - libopenlake: the C client of the OpenLake KV-cache pool.
 *
 * A client holds a list of pool nodes ("host:port") as seeds, learns the live members of a
 * cluster from them (VIEW) and spreads keys over them by weighted rendezvous
 * (highest-random-weight) hashing of their stable ids (a static list without a cluster: of
 * their addresses), keeps one small pool of TCP connections per node and, when
 * a node runs on this host and device = "local", copies values straight in and out of the
 * node's shared-memory DRAM tier (the server only hands out and commits slots).
 *
 * Every call is thread-safe on one struct ol_client. Calls return 0 or -errno; per-entry
 * results are in ol_kv_op.status. The library never prints: it reports through opts.log.
 * Plain C types only (no unions, no varargs) so it is easy to bind from ctypes.
 * Exported symbols are the ol_* functions declared here (see client/openlake.map). */
#ifndef OPENLAKE_OPENLAKE_H
#define OPENLAKE_OPENLAKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OL_KV_KEY_BYTES 32   /* a key is a 32-byte digest */
#define OL_KV_MAX_BATCH 1024 /* entries per protocol frame; larger calls are split */

struct ol_client; /* opaque */

enum ol_client_log_level {
	OL_CLIENT_LOG_ERROR = 0,
	OL_CLIENT_LOG_WARN = 1,
	OL_CLIENT_LOG_INFO = 2,
	OL_CLIENT_LOG_DEBUG = 3
};

struct ol_client_opts {
	size_t size;		  /* sizeof(struct ol_client_opts): lets the struct grow */
	const char *const *nodes; /* n_nodes "host:port" strings (copied) */
	size_t n_nodes;		  /* 1..64 */
	const char *device;	  /* "local" (shared memory when the node is on this host, else
				     TCP), "tcp", or "ucx" / "rdma" / an RDMA NIC's name (UCX to
				     each node's port + 1, a pool with transport = "rdma"; a
				     library built without UCX: -EPROTONOSUPPORT); NULL = "local".
				     A node written "ucx://host:port" is UCX at that port */
	const char *ns;		  /* namespace: model id, dtype, layout, TP rank...: two namespaces
				     never share an entry. NULL = "" */
	unsigned timeout_ms;	  /* per call and node; 0 = 2000. A node that does not answer in
				     time is unreachable for this call and retried after a backoff */
	void (*log)(int level, const char *msg,
		    void *arg); /* optional; level = ol_client_log_level */
	void *log_arg;
	/* appended fields (a caller whose size ends before one gets its default): */
	unsigned compress; /* 0 = off, 1 = ExANS (lossless BF16): values are compressed before
			      they leave the client and decoded after they arrive; a per-value
			      header tells compressed from plain, so both kinds coexist on the
			      same keys and a get returns plain bytes either way */
	unsigned compress_row_bytes; /* ExANS rows mode: token row size in bytes (e.g.
					heads * head_dim * 2); 0 = off */
	const char *token;	 /* KV pool token ([kv] secret or a [[kv.tokens]] token; copied);
				    NULL = none. Proven by HMAC over a server nonce, never sent. A pool
				    that requires one refuses a client without it, or whose token does
				    not cover ns: its entries then come back OL_KV_UNREACHABLE and the
				    log callback says why */
	unsigned tls;		 /* 1 = TCP connections speak TLS (a node with [kv_tls]); 0 = plain.
				    The node's certificate is verified: against ca_file, else the
				    system's CA store, and for the node's host name or IP address
				    (or server_name). A failed check makes the node unreachable
				    and the log callback says why. Unix-socket (shm) connections
				    to a node on this host stay plaintext */
	const char *ca_file;	 /* PEM CA bundle to verify nodes with (copied); NULL = system */
	const char *server_name; /* name the nodes' certificates must carry; NULL = each node's
				    host as written in nodes[] (a name, or an IP address) */
	/* appended with the cluster view (docs/kv-protocol.md, "Cluster view"): nodes[] are
	   seeds; a node in a cluster answers VIEW with the live members, and keys are placed on
	   them by weighted rendezvous hashing of their stable ids */
	unsigned replicas;	  /* copies of each key on the top-R nodes; 0 = 1, at most 4 */
	unsigned grace_ms;	  /* after a view change, a get/exists miss on the new owner is
				     retried on the previous one for this long; 0 = 30000 */
	unsigned view_refresh_ms; /* ask for the view at least this often; 0 = 5000 (a change
				     is also noticed from the tag on every reply) */
	/* appended with client certificates (a node with [kv_tls] client_ca): */
	const char *cert_file; /* PEM certificate chain this client shows (opts.tls); NULL = none */
	const char *key_file;  /* its PEM key; NULL = in cert_file */
};

/* Create a client. Connects lazily: succeeds even if every node is down (they count as
 * unreachable until they return). Returns 0 and *out, or -EINVAL (bad options), -ENOMEM. */
int ol_client_new(const struct ol_client_opts *o, struct ol_client **out);
/* Close connections and unmap shared memory. No call may be running on c. NULL is a no-op. */
void ol_client_free(struct ol_client *c);

struct ol_iov {
	void *base;
	size_t len;
};

enum ol_kv_status {
	OL_KV_OK = 0,	       /* stored / hit / exists / deleted */
	OL_KV_EXISTS = 1,      /* put: the key is already stored (value not replaced) */
	OL_KV_MISS = 2,	       /* get/exists/delete: no such key */
	OL_KV_TOO_LARGE = 3,   /* put: value larger than the node's max block */
	OL_KV_FULL = 4,	       /* put: no room even after eviction (everything pinned) */
	OL_KV_UNREACHABLE = 5, /* the key's node is down or timed out: treat as a miss */
	OL_KV_TRUNCATED = 6,   /* get: the iovs are smaller than the value; value_len = its size */
	OL_KV_CORRUPT = 7,     /* the value failed its checksum (it is dropped; acts as a miss) */
	OL_KV_ERROR = 8,       /* protocol or internal error for this entry */
	OL_KV_STATUS_COUNT = 9
};

struct ol_kv_op {
	const uint8_t *key;	  /* OL_KV_KEY_BYTES bytes */
	const struct ol_iov *iov; /* the value as scatter/gather: put reads it, get fills it */
	size_t iovcnt;
	uint64_t value_len; /* out (get/exists): the stored value's size */
	int32_t status;	    /* out: enum ol_kv_status */
	uint32_t reserved;  /* set to 0 */
};

/* Batched operations over n entries (any n; split per node and per OL_KV_MAX_BATCH).
 * Return 0 when the batch ran (look at each op's status, UNREACHABLE included), -EINVAL on a
 * bad argument (NULL key...), -ENOMEM. A node that is down never stalls a call longer than
 * timeout_ms. */
int ol_kv_put(struct ol_client *c, struct ol_kv_op *ops, size_t n);
int ol_kv_get(struct ol_client *c, struct ol_kv_op *ops, size_t n);
/* status OK (value_len set) or MISS; iov is ignored. Refreshes the entry's LRU age (a lookup
 * before a load keeps what it found).
 * value_len is the STORED size: with compression, a compressed value's is smaller than its
 * original (get reports the original); it is never larger than the original + 16. */
int ol_kv_exists(struct ol_client *c, struct ol_kv_op *ops, size_t n);
/* status OK (deleted) or MISS. iov is ignored. */
int ol_kv_delete(struct ol_client *c, struct ol_kv_op *ops, size_t n);
/* Lease each key for ttl_ms: the node keeps the block in DRAM, safe from eviction, until the
 * lease ends: after ttl_ms (capped by the node's [kv_slab] reserve_ttl_secs), or when any
 * client of the namespace leases it again with ttl_ms 0 (ends it). A lease of a leased key
 * extends it. Leases are the namespace's, not this client's. status OK (leased, value_len =
 * stored size; ttl 0: ended), MISS (not stored; ttl 0: not leased), FULL (the namespace holds
 * too many leases), ERROR (the node is too old to lease), UNREACHABLE. iov is ignored. Only
 * the key's first replica is leased. */
int ol_kv_lease(struct ol_client *c, struct ol_kv_op *ops, size_t n, unsigned ttl_ms);

/* Write a NUL-terminated JSON document into json[0..cap):
 * {"nodes":[{"addr":"h:p","up":true,"local":false,"stats":{...server stats...}}, ...],
 *  "total":{"dram_capacity":..,"dram_used":..,"nvme_capacity":..,"nvme_used":..,"entries":..,
 *           "hits":..,"misses":..,"evictions":..},
 *  "client":{"compress":"exans"|"off","compress_in_bytes":..,"compress_out_bytes":..,
 *            "decompress_in_bytes":..,"decompress_out_bytes":..,"blocks_compressed":..,
 *            "blocks_plain":..,"blocks_corrupt":..}}
 * (client counters: compress_in = value bytes put, compress_out = bytes sent for them;
 *  decompress_in = bytes received by gets, decompress_out = value bytes returned)
 * Returns the JSON length (>= 0), -ENOSPC when cap is too small, -ENOMEM. */
int ol_kv_stats(struct ol_client *c, char *json, size_t cap);

/* "ok", "exists", "miss", "too_large", "full", "unreachable", "truncated", "corrupt", "error";
 * "unknown" otherwise. Static strings. */
const char *ol_kv_status_str(int status);
/* XXH3-64 (xxHash, seed 0) of the concatenation of iov[0..n) into *out: the same value as
 * XXH3_64bits over one buffer holding those bytes; zero-length entries are skipped. Reads the
 * ranges only (no client, no I/O). One call for a scatter list, so a caller checksumming a
 * block spread over many ranges (the vLLM connector's trailer: 64 per-layer ranges) does not
 * pay a foreign call per range. 0, or -EINVAL (iov NULL with n > 0, a NULL base with a
 * length, out NULL). Since OPENLAKE_0.3. */
int ol_iov_xxh3(const struct ol_iov *iov, size_t n, uint64_t *out);
/* ol_kv_get, and for each op that comes back OL_KV_OK, hash[i] = XXH3-64 (xxHash, seed 0) of
 * the value's bytes that landed in its first hash_iovcnt[i] iovs (hash_iovcnt NULL: in all of
 * them): the same value as ol_iov_xxh3 over the first min(value_len, their total) bytes of
 * those iovs after the call. hash[i] = 0 for any other status. The hash is taken while the
 * bytes are copied out of the node's shared memory or received from its socket (TCP, TLS), one
 * cache-sized piece at a time, so a caller that verifies a value (the vLLM connector's trailer
 * over the payload ranges, the trailer's iov excluded) does not read it from memory a second
 * time; values over UCX or through opts.compress are hashed after their copy (the same
 * value). The op's iovs must not overlap. hash: n entries (caller's). Returns what ol_kv_get
 * returns, and -EINVAL when hash is NULL with n > 0. Since OPENLAKE_0.4. */
int ol_kv_get_xxh3(struct ol_client *c, struct ol_kv_op *ops, size_t n, const size_t *hash_iovcnt,
		   uint64_t *hash);
/* The keys of this client's namespace that node node of the client's view removed from the pool
 * (evicted with no NVMe copy, NVMe space reclaimed, deleted, namespace quota, found corrupt)
 * with a sequence >= from, oldest first: at most max keys (32 bytes each) into keys; *next
 * gets the sequence to ask from next time. OL_KV_EVENTS_NOW as from asks for no keys, only
 * *next (where a new reader starts). *flags gets OL_KV_EVENTS_LOST when the node's bounded
 * event ring (its [kv] removal_events) dropped events past from, or from predates the node's
 * start: some removed keys are not in the answer. Nodes are numbered 0.. in the order the
 * client met them (seeds first, then view members; a number keeps its node for the client's
 * life); the view is refreshed as ol_kv_stats does. Returns the number of keys (>= 0),
 * -ERANGE (no node numbered node: the caller has asked every node), -ENOTSUP (the node is
 * too old to keep events: it is never sent the op), -EINVAL, or another -errno (the node is
 * down or unreachable: ask again later). max is capped at 1023 per call. Any thread.
 * Since OPENLAKE_0.5. */
#define OL_KV_EVENTS_NOW  UINT64_MAX
#define OL_KV_EVENTS_LOST 0x1u
int ol_kv_events(struct ol_client *c, size_t node, uint64_t from, uint8_t (*keys)[32], size_t max,
		 uint64_t *next, uint32_t *flags);
/* Library version, e.g. "0.1.0". */
const char *ol_version(void);

#ifdef __cplusplus
}
#endif
#endif
