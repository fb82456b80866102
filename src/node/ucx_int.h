/* node/ucx_int.h - the node plane's transport seam: the frames, MACs, deadlines and credit
 * window of client.c and server.c run unchanged over a TCP socket or a UCX stream endpoint
 * (plane_transport = "ucx"; docs/node-protocol.md, "UCX transport"). Both are byte streams:
 * what changes is who moves the bytes. ucx.c implements this over UCP streams when the build
 * found libucx-dev; ucx_none.c refuses (-EPROTONOSUPPORT) otherwise. */
#ifndef OL_NODE_UCX_INT_H
#define OL_NODE_UCX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* "ucx://" before a plane address: the peer serves its plane over UCX (the registration in
 * etcd carries it, so every node learns each peer's transport with its address). */
#define OL_NODE_UCX_SCHEME "ucx://"

/* True when this build has the UCX transport. */
bool ol_node_ucx_built(void);

#ifdef OL_HAVE_UCX
#include <ucp/api/ucp.h>
/* A UCP worker (one thread at a time) on the process's one UCP context (STREAM and WAKEUP;
 * made with the first worker, freed with the last), and its event fd. 0, -ENOMEM, -EIO. */
int ol_node_ucx_worker_new(ucp_worker_h *w, int *efd);
void ol_node_ucx_worker_free(ucp_worker_h w);
#endif

/* ---- client side (client.c; library grade: no logging, -errno) ----
 * One connection, used by one thread at a time: a UCP worker of its own on the process's
 * shared UCP context, progressed only inside these calls (which sleep on its event fd). */
struct ol_node_ucx;
struct iovec;

/* Resolve addr ("host:port", no scheme) and create an endpoint to the UCX listener there.
 * The connection completes with the first bytes exchanged (its failure shows then as
 * -ECONNREFUSED / -ECONNRESET). 0, -EINVAL, -ENXIO, -ENOMEM, -EPROTONOSUPPORT (not built),
 * -EIO (UCX). */
int ol_node_ucx_connect(const char *addr, struct ol_node_ucx **out);
/* Up to len bytes (at least 1) as they arrive, within timeout_ms: bytes, -ETIMEDOUT,
 * -ECONNRESET (the peer closed or failed), -ECONNREFUSED. A failed or timed-out read leaves
 * the connection to be closed. */
ssize_t ol_node_ucx_read(struct ol_node_ucx *x, void *buf, size_t len, int timeout_ms);
/* All the bytes of the n (at most 16) buffers, in one stream send, within timeout_ms. 0 or as
 * read. The buffers must stay untouched until this returns. */
int ol_node_ucx_writev(struct ol_node_ucx *x, const struct iovec *iov, int n, int timeout_ms);
/* Close the endpoint (forced: what is in flight is cancelled) and free x. NULL is a no-op. */
void ol_node_ucx_close(struct ol_node_ucx *x);
/* From any thread, while x is not being closed: the read or write blocked on x returns now with
 * -ECANCELED, and so does every later one (what it waited for is cancelled by the close). The
 * UCX twin of a shutdown(2) of the TCP connection (ol_node_client_abort). */
void ol_node_ucx_abort(struct ol_node_ucx *x);

/* ---- server side (server.c; daemon, loop thread unless said) ----
 * One UCP worker and its listener on rpc_addr, progressed on the server's first loop: the
 * worker's event fd is polled by the ring (ol_loop_poll), and every UCX call made on the loop
 * schedules a progress pass (a zero-delay timer). Each endpoint is a struct nconn whose recv
 * and send go through ol_node_ucx_recv / _send; their completions call the same on_recv /
 * on_sent as the ring's, on the loop thread. */
struct ol_node_server;
struct ol_node_ucx_srv;
struct nconn;
struct nloop;
struct ol_loop;

/* Make the worker and listen on addr ("host:port"; port 0 picks one: *port says which). Any
 * thread, before the loop runs. -EADDRINUSE, -EINVAL, -EIO (UCX), -EPROTONOSUPPORT. */
int ol_node_ucx_listen(struct ol_node_server *s, struct nloop *nl, struct ol_loop *l,
		       const char *addr, struct ol_node_ucx_srv **out, unsigned *port);
/* On the loop's thread, once: start polling the worker. */
void ol_node_ucx_srv_start(struct ol_node_ucx_srv *u);
/* After the loop stopped (its thread joined): progress until every endpoint's close is done,
 * then free the listener and the worker. The connections are freed after this. */
void ol_node_ucx_srv_stop(struct ol_node_ucx_srv *u);
/* Receive up to len bytes (all of them with `all`: the rest of a big frame, one completion
 * instead of one per fragment) / send all len bytes on c's endpoint; the completion calls
 * ol_node_on_recv / ol_node_on_sent later (never from inside these). 0 or -errno. */
int ol_node_ucx_recv(struct nconn *c, void *buf, size_t len, bool all);
int ol_node_ucx_send(struct nconn *c, const void *buf, size_t len);
/* Close c's endpoint (forced): pending receives and sends complete with an error. */
void ol_node_ucx_shut(struct nconn *c);
/* c sent its last frame (a refused HELLO): its peer is left to close first, as a close of
 * ours could overtake the frame (UCX's connection manager carries the disconnect apart from
 * the data); after ms it is closed anyway. */
void ol_node_ucx_linger(struct nconn *c, unsigned ms);
/* The server stops: drop c's deferred completions (the loop is about to be freed). */
void ol_node_ucx_quiet(struct nconn *c);
/* Free c's endpoint state (conn_free). */
void ol_node_ucx_conn_fini(struct nconn *c);

#endif
