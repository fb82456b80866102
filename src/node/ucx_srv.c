/* node/ucx_srv.c - the node plane server's UCX transport (ucx_int.h): one worker and its
 * listener, progressed on the server's first loop; each endpoint a struct nconn of server.c. */
#include "node/node_int.h"
#include "node/ucx_int.h"

#include "base/log.h"
#include "io/io.h"
#include "io/ucx.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

struct ol_node_ucx_srv {
	struct ol_node_server *s;
	struct nloop *nl;
	struct ol_loop *l;
	ucp_worker_h w;
	ucp_listener_h lis;
	int efd;
	struct ol_loop_op pop;	  /* the ring's poll of efd */
	struct ol_loop_timer run; /* a progress pass soon */
	bool polling, stopping;
	unsigned busy; /* requests (receive, send, close) not yet completed */
};

struct nux {
	struct ol_node_ucx_srv *u;
	ucp_ep_h ep;
	struct ol_loop_timer t; /* completions that happened at once, delivered from the loop */
	struct ol_loop_timer linger; /* a closing endpoint waits for its peer to close first */
	size_t rlen, slen;
	bool rnow, snow;
};

static void srv_kick(struct ol_node_ucx_srv *u);

/* Progress until idle, then arm the worker and keep the ring's poll of its fd queued. */
static void
srv_drain(struct ol_node_ucx_srv *u)
{
	ucs_status_t st;
	do {
		while (ucp_worker_progress(u->w))
			;
		st = ucp_worker_arm(u->w);
	} while (st == UCS_ERR_BUSY);
	if (st != UCS_OK)
		ol_err("node plane: UCX worker: %s", ucs_status_string(st));
	if (!u->polling && !u->stopping) {
		if (ol_loop_poll(u->l, &u->pop, u->efd, POLLIN)) {
			srv_kick(u); /* the ring is full: try again on the next pass */
			return;
		}
		u->polling = true;
	}
}

static void
on_poll(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct ol_node_ucx_srv *u = arg;
	u->polling = false;
	srv_drain(u);
}

static void
on_run(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	srv_drain(arg);
}

static void
srv_kick(struct ol_node_ucx_srv *u)
{
	if (!u->stopping && !u->run.idx)
		ol_loop_timer_arm(u->l, &u->run, 0);
}

static void
ux_deliver(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	struct nconn *c = arg;
	struct nux *ux = c->ux;
	c->depth++;
	if (ux->rnow) {
		ux->rnow = false;
		ol_node_on_recv(l, c, (int)ux->rlen);
	}
	if (ux->snow) {
		ux->snow = false;
		ol_node_on_sent(l, c, (int)ux->slen);
	}
	c->depth--;
	ol_node_release(c);
}

static void
srv_ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	struct nconn *c = arg;
	(void)ep;
	if (!c->ux->ep)
		return;
	if (st != UCS_ERR_CONNECTION_RESET && st != UCS_ERR_ENDPOINT_TIMEOUT)
		ol_debug("node plane: UCX endpoint of %s: %s", c->peer, ucs_status_string(st));
	c->depth++;
	ol_node_kill(c);
	c->depth--;
	ol_node_release(c);
}

static void
on_conn(ucp_conn_request_h req, void *arg)
{
	struct ol_node_ucx_srv *u = arg;
	ucp_conn_request_attr_t a = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
	char peer[64] = "ucx:?", hp[56];
	if (ucp_conn_request_query(req, &a) == UCS_OK &&
	    !ol_io_addr_str((struct sockaddr *)&a.client_address, sizeof(a.client_address), hp,
			    sizeof(hp)))
		snprintf(peer, sizeof(peer), "ucx:%s", hp);
	if (u->stopping) {
		ucp_listener_reject(u->lis, req);
		return;
	}
	struct nconn *c = ol_node_conn_new(u->nl, u->l, -1, peer);
	struct nux *ux = ol_xcalloc(1, sizeof(*ux));
	ux->u = u;
	ux->t = (struct ol_loop_timer){.cb = ux_deliver, .arg = c};
	c->ux = ux;
	ucs_status_t st = ol_ucx_accept(u->w, req, srv_ep_err, c, &ux->ep);
	if (st != UCS_OK) {
		ol_warn("node plane: UCX connection from %s: %s", peer, ucs_status_string(st));
		ol_node_kill(c);
		return;
	}
	ol_node_conn_start(c);
}

static void
recv_cb(void *req, ucs_status_t st, size_t len, void *arg)
{
	struct nconn *c = arg;
	struct ol_node_ucx_srv *u = c->ux->u;
	ucp_request_free(req);
	u->busy--;
	if (u->stopping) {
		c->rpending = false;
		return;
	}
	ol_node_on_recv(u->l, c, st == UCS_OK ? (int)len : -ECONNRESET);
}

static void
send_cb(void *req, ucs_status_t st, void *arg)
{
	struct nconn *c = arg;
	struct ol_node_ucx_srv *u = c->ux->u;
	ucp_request_free(req);
	u->busy--;
	if (u->stopping) {
		c->wpending = false;
		return;
	}
	ol_node_on_sent(u->l, c, st == UCS_OK ? (int)c->ux->slen : -ECONNRESET);
}

int
ol_node_ucx_recv(struct nconn *c, void *buf, size_t len, bool all)
{
	struct nux *ux = c->ux;
	if (!ux->ep)
		return -ECONNRESET;
	size_t n = 0;
	ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
						 UCP_OP_ATTR_FIELD_USER_DATA |
						 UCP_OP_ATTR_FIELD_FLAGS,
				 .cb.recv_stream = recv_cb,
				 .user_data = c,
				 .flags = all ? UCP_STREAM_RECV_FLAG_WAITALL : 0};
	void *req = ucp_stream_recv_nbx(ux->ep, buf, len, &n, &p);
	if (UCS_PTR_IS_ERR(req))
		return ol_ucx_errno(UCS_PTR_STATUS(req));
	if (req == NULL) { /* the bytes were there: delivered from the loop, not from here */
		ux->rlen = n;
		ux->rnow = true;
		ol_loop_timer_arm(c->loop, &ux->t, 0);
		return 0;
	}
	ux->u->busy++;
	srv_kick(ux->u);
	return 0;
}

int
ol_node_ucx_send(struct nconn *c, const void *buf, size_t len)
{
	struct nux *ux = c->ux;
	if (!ux->ep)
		return -ECONNRESET;
	ucp_request_param_t p = {.op_attr_mask =
				     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
				 .cb.send = send_cb,
				 .user_data = c};
	ux->slen = len;
	void *req = ucp_stream_send_nbx(ux->ep, buf, len, &p);
	if (UCS_PTR_IS_ERR(req))
		return ol_ucx_errno(UCS_PTR_STATUS(req));
	if (req == NULL) {
		ux->snow = true;
		ol_loop_timer_arm(c->loop, &ux->t, 0);
		return 0;
	}
	ux->u->busy++;
	srv_kick(ux->u);
	return 0;
}

static void
closed_cb(void *req, ucs_status_t st, void *arg)
{
	struct nconn *c = arg;
	struct ol_node_ucx_srv *u = c->ux->u;
	(void)st;
	ucp_request_free(req);
	u->busy--;
	c->xpending = false;
	if (!u->stopping)
		ol_node_release(c);
}

void
ol_node_ucx_shut(struct nconn *c)
{
	struct nux *ux = c->ux;
	if (!ux->ep)
		return;
	ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
						 UCP_OP_ATTR_FIELD_USER_DATA |
						 UCP_OP_ATTR_FIELD_FLAGS,
				 .flags = UCP_EP_CLOSE_FLAG_FORCE,
				 .cb.send = closed_cb,
				 .user_data = c};
	ucp_ep_h ep = ux->ep;
	ux->ep = NULL;
	c->xpending = true; /* before the close: its callbacks may run inside it */
	ux->u->busy++;
	void *req = ucp_ep_close_nbx(ep, &p);
	if (req == NULL || UCS_PTR_IS_ERR(req)) {
		ux->u->busy--;
		c->xpending = false;
	}
	srv_kick(ux->u);
}

static void
on_linger(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct nconn *c = arg;
	c->depth++;
	ol_node_kill(c);
	c->depth--;
	ol_node_release(c);
}

void
ol_node_ucx_linger(struct nconn *c, unsigned ms)
{
	c->ux->linger = (struct ol_loop_timer){.cb = on_linger, .arg = c};
	ol_loop_timer_arm(c->loop, &c->ux->linger, (uint64_t)ms * 1000000u);
}

void
ol_node_ucx_quiet(struct nconn *c)
{
	ol_loop_timer_cancel(c->loop, &c->ux->t);
	ol_loop_timer_cancel(c->loop, &c->ux->linger);
}

void
ol_node_ucx_conn_fini(struct nconn *c)
{
	if (!c->ux)
		return;
	ol_node_ucx_quiet(c); /* no-ops after the server's own */
	free(c->ux);
	c->ux = NULL;
}

int
ol_node_ucx_listen(struct ol_node_server *s, struct nloop *nl, struct ol_loop *l, const char *addr,
		   struct ol_node_ucx_srv **out, unsigned *port)
{
	*out = NULL;
	struct ol_io_addr a;
	int rc = ol_io_resolve(addr, &a, 1);
	if (rc < 0)
		return -EINVAL;
	struct ol_node_ucx_srv *u = ol_xcalloc(1, sizeof(*u));
	u->s = s;
	u->nl = nl;
	u->l = l;
	u->pop = (struct ol_loop_op){.cb = on_poll, .arg = u};
	u->run = (struct ol_loop_timer){.cb = on_run, .arg = u};
	/* a restarted daemon binds its port again while the last one's connections linger (read
	 * when the UCP context is made: before the worker) */
	(void)!setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
	rc = ol_node_ucx_worker_new(&u->w, &u->efd);
	if (rc) {
		free(u);
		return rc;
	}
	*port = 0;
	ucs_status_t st =
	    ol_ucx_listen(u->w, (const struct sockaddr *)&a.ss, a.len, on_conn, u, &u->lis, port);
	if (st != UCS_OK) {
		ol_err("node plane: UCX cannot listen on %s: %s", addr, ucs_status_string(st));
		ol_node_ucx_worker_free(u->w);
		free(u);
		return st == UCS_ERR_BUSY ? -EADDRINUSE : -EIO;
	}
	*out = u;
	return 0;
}

void
ol_node_ucx_srv_start(struct ol_node_ucx_srv *u)
{
	srv_drain(u);
}

static bool
srv_idle(void *arg)
{
	return ((struct ol_node_ucx_srv *)arg)->busy == 0;
}

void
ol_node_ucx_srv_stop(struct ol_node_ucx_srv *u)
{
	if (!u)
		return;
	u->stopping = true;
	ucp_listener_destroy(u->lis);
	if (ol_ucx_wait(u->w, u->efd, srv_idle, u, 5000))
		ol_warn("node plane: %u UCX requests did not complete at stop", u->busy);
	ol_node_ucx_worker_free(u->w);
	free(u);
}
