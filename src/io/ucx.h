/* io/ucx.h - what every UCX user here shares (the KV pool's transport in kv/ucx.c and
 * client/ucx.c, the node plane's in node/ucx.c and node/ucx_srv.c): status to errno, the
 * wait that progresses a worker and sleeps on its event fd, and a listener. Library grade: no
 * logging, no abort. Only built when meson found libucx-dev (OL_HAVE_UCX). */
#ifndef OL_IO_UCX_H
#define OL_IO_UCX_H

#include <stdbool.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

/* A UCS status as -errno: 0, -ETIMEDOUT (timed out, endpoint timeout), -ECONNREFUSED
 * (rejected), -EHOSTUNREACH (unreachable), -ENOMEM, -EPROTO (invalid parameter), else
 * -ECONNRESET. */
int ol_ucx_errno(ucs_status_t st);

/* Progress worker w (event fd efd, from ucp_worker_get_efd) until done(arg) is true (0), or
 * timeout_ms passed (-ETIMEDOUT; done is checked once more first), sleeping on efd between
 * events. -errno when arming the worker fails. The calling thread owns w. */
int ol_ucx_wait(ucp_worker_h w, int efd, bool (*done)(void *arg), void *arg, int timeout_ms);

/* A listener of worker w on sa: a port still held by a daemon killed a moment ago (UCS_ERR_BUSY)
 * is retried for 2 s, as the TCP listeners' bind is; *port = the port it listens on (sa's
 * port 0 picks one). Returns UCX's status (the caller logs it). */
ucs_status_t ol_ucx_listen(ucp_worker_h w, const struct sockaddr *sa, socklen_t len,
			   ucp_listener_conn_callback_t cb, void *arg, ucp_listener_h *out,
			   unsigned *port);

/* Restrict UCX config conf to RDMA device dev ("mlx5_0", or "mlx5_0:1" for a port) when dev
 * is set, the device exists here (/sys/class/infiniband/DEV) and $UCX_NET_DEVICES does not
 * say otherwise: a config copied from another host must not leave UCX without a device.
 * 0 (applied, or nothing to apply), -ENODEV (no such device here: UCX chooses; the caller
 * warns), -EINVAL (UCX refused the value). */
int ol_ucx_config_device(ucp_config_t *conf, const char *dev);

/* An endpoint of worker w with peer error handling (err(arg, ep, status) runs when the peer
 * fails or the connection breaks): ol_ucx_connect to a listener at sa (the client side of a
 * client-server connection), ol_ucx_accept for a connection request a listener was handed.
 * *out is NULL on failure. Returns UCX's status (the caller logs it). */
ucs_status_t ol_ucx_connect(ucp_worker_h w, const struct sockaddr *sa, socklen_t len,
			    ucp_err_handler_cb_t err, void *arg, ucp_ep_h *out);
ucs_status_t ol_ucx_accept(ucp_worker_h w, ucp_conn_request_h req, ucp_err_handler_cb_t err,
			   void *arg, ucp_ep_h *out);

#endif
