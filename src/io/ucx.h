/* io/ucx.h - what every UCX user here shares (the KV pool's transport in kv/ucx.c and
 * client/ucx.c, the node plane's in node/ucx.c): status to errno, and the wait that
 * progresses a worker and sleeps on its event fd. Library grade: no logging, no abort. Only
 * built when meson found libucx-dev (OL_HAVE_UCX). */
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

#endif
