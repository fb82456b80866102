/* cmd/openlaked/cluster_reads.h - reads served by every node of a cluster store (issue 10,
 * `[cluster] read_any`): a node that does not serve the store (the serving leader does) opens a
 * read-only view of the layout's pools over the node planes in the background and serves S3
 * GET and HEAD requests on it with an S3 server of its own; with `[cluster] write_any` the view
 * is a shard writer (ol_store_set_opts.shards) and the node writes the data of a client's plain
 * PutObject and UploadPart itself, its commit sent to the leader (the committer given to
 * creads_new); everything else is forwarded to the leader (cluster_store.c). docs/cluster.md,
 * "Serving and forwarding" and "Writes on every node".
 *
 * What a node keeps in memory follows the leader's writes: the leader puts <prefix>gen after
 * each run-time key created or removed and each bucket record written; every node watches it
 * and, on a change (and every CREADS_REFRESH_MS regardless), reads the run-time keys again from
 * its view and drops the S3 layer's cached bucket attributes.
 *
 * Threads: "ol-cstore-read" opens, reopens (the layout's pools changed) and closes the view and
 * reloads the keys; "ol-cstore-gen" watches <prefix>gen. Requests take the view with a count
 * of users, so a view closes only after the requests on it ended. */
#ifndef OL_OPENLAKED_CLUSTER_READS_H
#define OL_OPENLAKED_CLUSTER_READS_H

#include "base/config.h"
#include "cluster/cluster.h"
#include "cluster/layout.h"
#include "http/http.h"
#include "store/store.h"

#include <stdbool.h>

#define CREADS_REFRESH_MS 5000 /* keys and bucket attributes read again at least this often */

struct creads;
struct ol_s3_server;
struct ol_strbuf;

/* The reads' state for layout l (copied); cfg and c outlive it. other_serves(arg): whether
 * another node serves the store now (a view first opens only then: before, a new cluster's
 * drives may have no identity record yet, and this node may be about to serve); any thread,
 * must not block. commit(commit_arg, ...): a shard writer's committer (write_any; NULL: the view
 * only reads), run on the request thread of the PUT it commits. Nothing runs before
 * creads_start. */
struct creads *creads_new(const struct ol_config *cfg, struct ol_cluster *c,
			  const struct ol_layout *l, bool (*other_serves)(void *arg), void *arg,
			  ol_store_commit_fn commit, void *commit_arg);

/* Start the threads (a view opens when read_any or write_any is on and this node does not
 * serve), and tell
 * the other nodes of every key and bucket change made through this node's admin API and
 * leader_s3 (the S3 server that serves the writable store when this node leads). */
void creads_start(struct creads *rd, struct ol_s3_server *leader_s3);

/* The layout this node took (copied): when its pools not removed differ from the view's (a
 * pool joined or removed; a drain alone changes nothing), the view closes at once (GET and
 * HEAD are forwarded) and one of the new pools opens. Any thread. */
void creads_layout(struct creads *rd, const struct ol_layout *l);

/* This node serves the writable store (true) or stopped serving it (false): the view is
 * closed while it serves, opened again after. Any thread; does not wait. */
void creads_leading(struct creads *rd, bool leading);

/* Serve r (a GET or HEAD that was not forwarded to this node) on the view: true when served,
 * false when no view is open or the view's answer would have been a 404 or 5xx (it may be
 * behind the leader, or reach too few drives: ol_s3_handle_read); nothing was sent then, and
 * the caller forwards r. bucket_read: r addresses a bucket, not a key (a listing, say): it is
 * served only when the layout in etcd has no pool the view lacks (one read of etcd): the
 * leader may write to a joined pool before this node takes the layout. Request thread. */
bool creads_serve(struct creads *rd, struct ol_http_req *r, bool bucket_read);

/* Serve r (a client's plain PutObject or UploadPart, chosen by the caller) on the view when it
 * is a shard writer: true when served (always answered: the body is read, nothing is declined),
 * false when no such view is open, when it lacks a drive the leader has, or when !allowed (the
 * layout lets no node but the serving leader write now: a pool drains); nothing was read then and
 * the caller forwards r, counted as forwarded unless no view was open. Request thread. */
bool creads_write(struct creads *rd, struct ol_http_req *r, bool allowed);

/* "read_store":{...} for the status document's "cluster" object: "read_any", "write_any",
 * "state" ("off", "opening", "open", "leading"), "pools", "local_reads", "local_writes". Any
 * thread, no blocking. */
void creads_status_json(struct creads *rd, struct ol_strbuf *b);

/* Stop the threads and close the view (waits for the requests on it); then free. NULL: no-op. */
void creads_stop(struct creads *rd);
void creads_free(struct creads *rd);

#endif
