/* cmd/openlaked/cluster_writes.h - the commits of writes served on every node (issue 10,
 * `[cluster] write_any`): a node that does not serve the store writes the data of a client's
 * plain PutObject and UploadPart itself on its shard-writing view (cluster_reads.h), and its
 * store hands the commit to the committer here, which sends it to the serving leader's node
 * plane as one OL_NODE_COMMIT call (the leader runs it: cstore_commit_serve in cluster_store.c).
 * docs/cluster.md, "Writes on every node".
 *
 * Retries: a commit is sent again only while it surely was not applied: no leader known yet,
 * the leader's plane does not answer a ping before the commit goes out (refused, reset, timed
 * out) or refuses the connection of the commit's call since, or the leader answers -ESTALE
 * (it does not serve the store now, or not yet; or the drives fenced its commit). That goes
 * on up to wait_ms (as a forwarded request waits for a leader), then the commit fails with
 * -EAGAIN (S3: 503 SlowDown). A commit to which no answer came (the node client's reply is
 * NULL) and that may have gone out is not sent again: it may have been applied; it fails with
 * -ETIMEDOUT (503 SlowDown; the store keeps its shard files for the leader's orphan sweep; the
 * client's retry writes the same bytes again, as after any lost answer). Any status the
 * leader answered is the commit's result.
 *
 * Connections: a small pool of node plane clients per leader address, one per commit in flight
 * (a client serves one thread at a time), kept idle up to CWRITES_IDLE in all. */
#ifndef OL_OPENLAKED_CLUSTER_WRITES_H
#define OL_OPENLAKED_CLUSTER_WRITES_H

#include "base/config.h"
#include "cluster/cluster.h"

#include <stdatomic.h>
#include <stddef.h>

#define CWRITES_IDLE 32 /* idle node plane clients kept for later commits */

struct cwrites;
struct ol_obj_info;

/* The committer's state: commits go to the leader of set serve_pool.0 (read at each try;
 * cfg, c, serve_pool and allowed outlive it), waiting up to wait_ms for one while *allowed
 * holds (the layout lets this node write: no drain; a commit refused after it changed fails
 * at once, not applied). Registers its metrics. */
struct cwrites *cwrites_new(const struct ol_config *cfg, struct ol_cluster *c,
			    const _Atomic unsigned *serve_pool, const atomic_bool *allowed,
			    int wait_ms);

/* An ol_store_commit_fn (arg: a struct cwrites): send the shard writer's commit req to the
 * serving leader and return its result (0 with *out: the version's size, mtime, etag, id; the
 * leader's -errno: -ENOENT no bucket or upload, -ECANCELED / -ENODATA a condition, -EIO no
 * quorum, ...), -EAGAIN (no leader took it within wait_ms: not applied) or -ETIMEDOUT (sent,
 * no answer: maybe applied). Blocks up to wait_ms plus one call's deadline; any thread. */
int cwrites_commit(void *arg, const void *req, size_t len, struct ol_obj_info *out);

/* The daemon stops: commits waiting for a leader give up at once (-EAGAIN). Any thread. */
void cwrites_stop(struct cwrites *w);
/* Free (no commit may run). NULL: no-op. */
void cwrites_free(struct cwrites *w);

#endif
