/* s3/s3.h - the S3 front end: routing, SigV4, XML, handlers over the object store.
 *
 * One per process. Requests are served by the http/ worker threads; each handler call runs to
 * completion on the thread that received the request (blocking store calls). */
#ifndef OL_S3_S3_H
#define OL_S3_S3_H

#include "base/config.h"

struct ol_store;
struct ol_s3_server;
struct ol_http_req;
struct ol_http_error;
struct ol_http_server;

/* The S3 front end over st. It does not listen: cmd/openlaked starts the HTTP server and routes
 * to ol_s3_handle what admin/ does not take (s3/ knows nothing of admin/). cfg and st must
 * outlive s. st may be NULL (a cluster node that leads no set yet): then nothing may be handed
 * to ol_s3_handle before ol_s3_set_store gave s a store. st may be read-only
 * (ol_store_readonly: a cluster node serving reads): the lifecycle scanner, which deletes,
 * never runs over it, and a write that reaches it answers 503. Several servers may live in one
 * process: the S3 counters are the process's, rendered on /metrics once (by the first server
 * made, whose ol_s3_set_http names the HTTP server counted). Returns 0 and *out, or -EINVAL
 * (no credentials). */
int ol_s3_new(const struct ol_config *cfg, struct ol_store *st, struct ol_s3_server **out);

/* Hand s another store (or NULL) - a cluster node that gained or lost the leadership of its
 * set. The caller guarantees that no request is being served by s meanwhile (it drains them
 * first) and that st outlives its use. Every cached bucket attribute is dropped: another node
 * may have changed the buckets while this one did not serve them. The lifecycle scanner runs
 * only while s has a writable store: it is stopped (joined) before the store changes and started
 * again with the new one (its metrics start from zero on each node that gains the set). */
void ol_s3_set_store(struct ol_s3_server *s, struct ol_store *st);

/* Call fn(arg) after every bucket record write s makes (CreateBucket, DeleteBucket, and every
 * bucket setting: policy, ACL, versioning, public access block, ...), on the request's thread,
 * before the answer goes out, whether or not the write succeeded (a failed write may still
 * have reached some drives). The cluster's serving leader tells the other nodes through it.
 * Set before serving (NULL: none). */
void ol_s3_set_bucket_hook(struct ol_s3_server *s, void (*fn)(void *arg), void *arg);

/* Every bucket attribute any server of this process cached is read again at its next use: a
 * node serving reads of a store another node writes calls it when told that the buckets
 * changed. Any thread. */
void ol_s3_buckets_changed(void);

/* Serve one request as S3 (an ol_http_handler_fn; arg is the server). Always answers, on the
 * calling HTTP worker thread (blocking store calls). */
void ol_s3_handle(struct ol_http_req *h, void *arg);

/* As ol_s3_handle for a GET or HEAD served on a read-only view of a store another node writes
 * (a cluster follower, docs/cluster.md "Reads on every node"): true when it answered; false
 * when the answer would have been a 404 (NoSuchKey, NoSuchVersion, NoSuchBucket...) or a 5xx,
 * which the view may give only because it is behind its writer or reaches too few of its
 * drives: nothing was sent, nothing of h was read (a GET or HEAD has no body), and the caller
 * answers h (it forwards it to the writer). Such a request is not counted in the S3 metrics
 * here. An error after the answer's head went out still cuts the connection. */
bool ol_s3_handle_read(struct ol_http_req *h, struct ol_s3_server *s);
/* On the cluster's serving leader: commit what a follower's shard writer sent
 * (ol_store_commit_remote on s's store), with the versioning mode of the bucket as s knows it
 * (the follower's copy of the bucket attributes may be behind). 0 with *out filled, or
 * ol_store_commit_remote's -errno. Any thread. */
struct ol_obj_info;
int ol_s3_commit_remote(struct ol_s3_server *s, const void *req, size_t len,
			struct ol_obj_info *out);

/* Format the HTTP server's own errors (bad head, timeout, over a limit) as S3 XML error
 * documents (an ol_http_error_fn; arg unused). */
void ol_s3_http_error(struct ol_http_error *e, void *arg);

/* The HTTP server that serves s (its counters go to /metrics as openlake_http_*); NULL before
 * it starts and after it stopped. Any thread. */
void ol_s3_set_http(struct ol_s3_server *s, const struct ol_http_server *http);

/* Free s; call after the HTTP server serving it stopped. NULL is a no-op. */
void ol_s3_free(struct ol_s3_server *s);

#endif
