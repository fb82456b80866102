/* cmd/openlaked/cluster_store.h - the daemon's cluster store mode (issue 10): the layout's
 * pools of erasure sets spanning the nodes, all served by the leader of the serving set (one
 * node at a time: the serving key, docs/cluster.md), every other node forwarding to it all but
 * the GETs and HEADs it serves itself from a read-only view (cluster_reads.h) and the PUTs whose
 * data it writes itself, their commits sent to the leader (cluster_writes.h). A
 * pool appended to the layout (`openlake cluster join`) is taken without a restart: a thread
 * watches the layout key (and reads it every 5 s) and the leader adds the new pool to the
 * store it serves.
 *
 * Wiring only: leadership comes from cluster/ (ol_cluster_lead_start), the store over the node
 * planes from store/ (ol_store_open_sets, ol_store_pools), forwarding from http/
 * (ol_http_proxy_forward). */
#ifndef OL_OPENLAKED_CLUSTER_STORE_H
#define OL_OPENLAKED_CLUSTER_STORE_H

#include "base/config.h"
#include "cluster/cluster.h"
#include "cluster/layout.h"
#include "http/http.h"

struct ol_s3_server;
struct cstore;

/* At start, with [cluster] etcd and secret set: wait (3 lease TTLs, 10 to 60 s, logging why)
 * for etcd and read
 * the layout. 1 and *l: serve the layout's sets across the nodes; 0: run as a single node
 * (no layout yet, or one node only; logged); -ETIMEDOUT: etcd did not answer (logged with the
 * fix; the daemon refuses to start). */
int cstore_decide(const struct ol_config *cfg, struct ol_cluster *c, struct ol_layout *l);

/* The mode's state over s3 (made with no store). cfg, c and s3 outlive it. */
int cstore_new(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
	       struct ol_s3_server *s3, struct cstore **out);

/* Start campaigning and the layout poller (after the node plane serves this node's drives). */
int cstore_start(struct cstore *cs);

/* The S3 port's route: serve r here when this node leads the set (its store open), else serve a
 * client's GET or HEAD on the read-only view when one is open (read_any; never a request
 * another node forwarded), or a client's plain PutObject or UploadPart on the view's shard
 * writer, its commit sent to the leader (write_any, no pool draining), else forward it to the
 * leader, else (no leader, leader unreachable within the deadline) answer 503 SlowDown. Always
 * answers. */
void cstore_route(struct cstore *cs, struct ol_http_req *r);
/* The admin API's hook (ol_admin_set_forward, arg a struct cstore): a heal or keys request to
 * a node that holds no store goes to the set's leader the same way, never served here, and
 * it answers (1); except an admin's DELETE of the heal that no leader answers at once (or that
 * was forwarded here): 0, and the admin module cancels the job in its record (docs/cluster.md
 * "Heal jobs"). */
int cstore_forward_admin(void *arg, struct ol_http_req *r);

/* The node plane address of node: as it registered in etcd (v; "ucx://" before it: its plane
 * is on UCX), else as cfg's [[nodes]] list it (with this node's transport), else "" (v may be
 * NULL: the config only). */
void cstore_peer_addr(const struct ol_config *cfg, const struct ol_cluster_view *v, unsigned node,
		      char *out, size_t len);

/* Pools from..to-1 of l (those not removed), each set over its drives' node planes, as one
 * store *st: writable and fenced at epoch (the serving leader), or readonly (epoch 0: a node
 * serving reads, cluster_reads.h; with shards, a shard writer too: write_any). 0, -ENOENT (no
 * pool to open), or the store's -errno. Blocks on the planes (up to their deadlines); any
 * thread. */
struct ol_store;
int cstore_open_pools(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
		      unsigned from, unsigned to, uint64_t epoch, bool readonly, bool shards,
		      struct ol_store **st);

/* The pools' weights for new keys in st (a store of l's pools not removed): the free bytes per
 * drive of their nodes as they last wrote them to etcd. A shard writer places a new key by
 * them as the leader does (write_any). Reads etcd; any thread. */
void cstore_pool_weights(struct ol_cluster *c, const struct ol_layout *l, struct ol_store *st);

/* The node plane's OL_NODE_COMMIT handler (ol_node_server_set_commit, arg a struct cstore):
 * another node's shard writer sends the commit of a write it wrote (cluster_writes.h). While
 * this node serves the store (counted in as a request, so the store stays open meanwhile) it
 * runs it with ol_s3_commit_remote and answers its status and, on success, the version's info
 * (ol_store_info_encode); else -ESTALE (the writer sends it to the next leader). A plane
 * helper thread; blocks on the drives. */
int cstore_commit_serve(void *arg, const uint8_t *req, size_t len, uint8_t *reply, size_t cap,
			size_t *rlen);

/* Stop the layout poller, give the set up (in-flight requests finish, the store closes);
 * then free. NULL: no-op. */
/* The read-only view's state for the status document's "cluster" object, as one member
 * ("read_store":{...}, cluster_reads.h). Any thread, no blocking. */
struct ol_strbuf;
void cstore_status_json(struct cstore *cs, struct ol_strbuf *b);

/* SIGHUP: the forwarding hop's TLS files read again (rotated certificates); logs the result. */
void cstore_reload_tls(struct cstore *cs);
/* The daemon stops: give the set up (the others take over) and close the store. Requests in
 * flight have LOST_GRACE_MS (2 s) to end; then cut (when not NULL) is called to end the rest
 * (the HTTP server's connections shut down), so a client that stopped reading does not hold
 * the stop for its write timeout (their commits would be fenced by the next server anyway). */
void cstore_resign(struct cstore *cs, void (*cut)(void *arg), void *cut_arg);
void cstore_free(struct cstore *cs);

#endif
