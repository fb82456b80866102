/* client/ucx.c - libopenlake's UCX connections (opts.device "ucx", "rdma" or an RDMA NIC's
 * name; nodes written "ucx://host:port"). Frames travel as active messages
 * (src/kv/proto.h, "the UCX transport"; docs/kv-protocol.md).
 *
 * Each connection has a worker of its own (a connection is used by one caller at a time, as
 * the pool hands it out), on the client's one UCP context. A request is sent without waiting
 * (the calls of several nodes overlap as on TCP); the wait for its reply progresses the worker
 * and sleeps on its event fd, timeout_ms at most. The reply handler keeps the message: a GET's
 * values are received straight into the caller's iovs (a rendezvous: one RDMA transfer on a
 * NIC, into GPU memory where UCX can reach it), other replies are copied into a buffer of the
 * connection that olc_read serves. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ucp/api/ucp.h>

#include "client_int.h"
#include "io/ucx.h"

bool
olc_ucx_built(void)
{
	return true;
}

struct olc_ucx {
	unsigned timeout_ms; /* the client's */
	size_t max_hdr;	     /* the worker's largest AM header */
	ucp_worker_h w;
	ucp_ep_h ep;
	int efd;
	ucs_status_t err; /* the endpoint failed */
	void *wreq;	  /* the request wait_until waits for */
	void *sreq;	  /* the request being sent */
	uint8_t *shdr;	  /* its AM header (valid until sent) */
	size_t shdr_cap;
	ucp_dt_iov_t *siov; /* its values (PUT) */
	size_t siov_cap;
	uint8_t *sbody; /* or its body, flattened (other ops) */
	size_t sbody_cap;
	/* the reply: header copied, data kept by UCX until taken */
	bool have, rndv;
	uint8_t *hbuf;
	size_t hlen, hcap;
	void *data;
	size_t dlen;
	/* a reply body (not GET), read by olc_read */
	uint8_t *rbuf;
	size_t rcap, rlen, rpos;
};

static ucs_status_t
on_rep(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
       const ucp_am_recv_param_t *p)
{
	struct olc_ucx *x = arg;
	if (x->have) { /* one reply per request */
		x->err = UCS_ERR_INVALID_PARAM;
		return UCS_OK;
	}
	if (hlen > x->hcap) {
		uint8_t *nb = realloc(x->hbuf, hlen);
		if (!nb) {
			x->err = UCS_ERR_NO_MEMORY;
			return UCS_OK;
		}
		x->hbuf = nb;
		x->hcap = hlen;
	}
	memcpy(x->hbuf, hdr, hlen);
	x->hlen = hlen;
	x->data = data;
	x->dlen = len;
	x->rndv = p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
	x->have = true;
	if (p->recv_attr & (UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV))
		return UCS_INPROGRESS; /* kept until we take it */
	/* UCX's buffer: copy it now (a small reply) */
	x->data = NULL;
	if (len > x->rcap) {
		uint8_t *nb = realloc(x->rbuf, len);
		if (!nb) {
			x->err = UCS_ERR_NO_MEMORY;
			return UCS_OK;
		}
		x->rbuf = nb;
		x->rcap = len;
	}
	if (len)
		memcpy(x->rbuf, data, len);
	return UCS_OK;
}

static void
ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	struct olc_ucx *x = arg;
	(void)ep;
	x->err = st;
}

#define errno_of ol_ucx_errno /* io/ucx.c, shared with the node plane's UCX */

static bool
ucx_done(void *arg)
{
	struct olc_ucx *x = arg;
	return x->err != UCS_OK ||
	       (x->wreq ? ucp_request_check_status(x->wreq) != UCS_INPROGRESS : x->have);
}

/* Progress until *done (a request complete, or a reply here), the endpoint fails, or the
 * deadline passes. */
static int
wait_until(struct olc_ucx *x, void *req, uint64_t deadline)
{
	uint64_t now = olc_now_ms();
	x->wreq = req;
	int r = ol_ucx_wait(x->w, x->efd, ucx_done, x, deadline > now ? (int)(deadline - now) : 0);
	x->wreq = NULL;
	if (x->err != UCS_OK)
		return errno_of(x->err);
	return r;
}

/* Wait for req (NULL: done at once) and free it. */
static int
finish(struct olc_ucx *x, void *req, uint64_t deadline)
{
	if (req == NULL)
		return 0;
	if (UCS_PTR_IS_ERR(req))
		return errno_of(UCS_PTR_STATUS(req));
	int r = wait_until(x, req, deadline);
	ucs_status_t st = ucp_request_check_status(req);
	if (r == 0 && st != UCS_OK)
		r = errno_of(st);
	if (st == UCS_INPROGRESS) { /* timed out or failed: the connection is closed next */
		ucp_request_cancel(x->w, req);
		for (int i = 0; i < 1000 && ucp_request_check_status(req) == UCS_INPROGRESS; i++)
			ucp_worker_progress(x->w);
	}
	ucp_request_free(req);
	return r;
}

/* The reply message's data: dropped (UCX's descriptor released). */
static void
drop_data(struct olc_ucx *x)
{
	if (x->data)
		ucp_am_data_release(x->w, x->data);
	x->data = NULL;
	x->have = false;
}

/* ---- the context and connections ---- */

int
olc_ucx_init(struct ol_client *c, const char *dev)
{
	ucp_config_t *conf;
	if (ucp_config_read(NULL, NULL, &conf) != UCS_OK)
		return -ENOMEM;
	if (ol_ucx_config_device(conf, dev) == -ENODEV)
		olc_log(c, OL_CLIENT_LOG_WARN,
			"openlake: device %s: no such RDMA device here: UCX chooses", dev);
	ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES |
					 UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME,
			   .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
			   .mt_workers_shared = 1,
			   .name = "libopenlake"};
	ucp_context_h ctx;
	ucs_status_t st = ucp_init(&pp, conf, &ctx);
	ucp_config_release(conf);
	if (st != UCS_OK) {
		olc_log(c, OL_CLIENT_LOG_ERROR, "openlake: UCX: %s", ucs_status_string(st));
		return -EIO;
	}
	c->ucx_ctx = ctx;
	return 0;
}

void
olc_ucx_fini(struct ol_client *c)
{
	if (c->ucx_ctx)
		ucp_cleanup(c->ucx_ctx);
	c->ucx_ctx = NULL;
}

/* "ucx://host:port": that port; "host:port" (device ucx): the port + 1. */
static int
resolve(const char *addr, struct addrinfo **ai)
{
	bool exact = strncmp(addr, "ucx://", 6) == 0;
	char host[256], ps[8];
	if (exact)
		addr += 6;
	const char *colon = strrchr(addr, ':');
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	char *end;
	unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
	if (!colon || *end || port == 0 || port + !exact > 65535)
		return -EINVAL;
	if (hl >= 2 && addr[0] == '[')
		addr++, hl -= 2;
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	snprintf(ps, sizeof(ps), "%lu", port + !exact);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	return getaddrinfo(strcmp(host, "localhost") ? host : "127.0.0.1", ps, &hints, ai) == 0
		   ? 0
		   : -EHOSTUNREACH;
}

int
olc_ucx_connect(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn)
{
	struct addrinfo *ai;
	int r = resolve(nd->addr, &ai);
	if (r < 0)
		return r;
	struct olc_ucx *x = calloc(1, sizeof(*x));
	if (!x) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	cn->ucx = x;
	x->timeout_ms = c->timeout_ms;
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	ucp_am_handler_param_t hp = {
	    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
			  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
	    .flags = UCP_AM_FLAG_WHOLE_MSG,
	    .id = OL_KVP_UCX_AM_REP,
	    .cb = on_rep,
	    .arg = x};
	ucs_status_t st = ucp_worker_create(c->ucx_ctx, &wp, &x->w);
	if (st == UCS_OK)
		st = ucp_worker_get_efd(x->w, &x->efd);
	ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER};
	if (st == UCS_OK && (st = ucp_worker_query(x->w, &wa)) == UCS_OK)
		x->max_hdr = wa.max_am_header;
	if (st == UCS_OK)
		st = ucp_worker_set_am_recv_handler(x->w, &hp);
	if (st == UCS_OK)
		st = ol_ucx_connect(x->w, ai->ai_addr, ai->ai_addrlen, ep_err, x, &x->ep);
	freeaddrinfo(ai);
	if (st != UCS_OK) {
		olc_log(c, OL_CLIENT_LOG_WARN, "openlake: node %s: UCX: %s", nd->addr,
			ucs_status_string(st));
		olc_ucx_close(cn);
		return errno_of(st);
	}
	return 0;
}

uint32_t
olc_ucx_max_batch(const struct olc_conn *cn)
{
	size_t n = (cn->ucx->max_hdr - OL_KVP_HDR) / OL_KVP_REQ_ENT;
	return n < 1 ? 1 : n > OL_KVP_MAX_BATCH ? OL_KVP_MAX_BATCH : (uint32_t)n;
}

void
olc_ucx_close(struct olc_conn *cn)
{
	struct olc_ucx *x = cn->ucx;
	if (!x)
		return;
	cn->ucx = NULL;
	uint64_t deadline = olc_now_ms() + 1000;
	if (x->sreq) {
		ucp_request_cancel(x->w, x->sreq);
		(void)!finish(x, x->sreq, deadline);
	}
	if (x->have)
		drop_data(x);
	if (x->ep) {
		ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					 .flags = UCP_EP_CLOSE_FLAG_FORCE};
		void *req = ucp_ep_close_nbx(x->ep, &p);
		x->err = UCS_OK;
		if (req && !UCS_PTR_IS_ERR(req)) {
			for (int i = 0;
			     i < 100000 && ucp_request_check_status(req) == UCS_INPROGRESS; i++)
				ucp_worker_progress(x->w);
			ucp_request_free(req);
		}
	}
	if (x->w)
		ucp_worker_destroy(x->w);
	free(x->shdr);
	free(x->siov);
	free(x->sbody);
	free(x->hbuf);
	free(x->rbuf);
	free(x);
}

/* ---- requests ---- */

static int
grow(void **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	void *n = realloc(*p, need);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = need;
	return 0;
}

/* Send a request: header h (completed here: magic, version, req_id), ents (count entries) in
 * the AM header, data (n elements: contiguous bytes when iov is NULL) after it. Not waited
 * for: olc_ucx_recv waits for it with the reply. */
static int
send_req(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, const uint8_t *ents,
	 size_t ents_len, const void *data, size_t n, bool iov)
{
	struct olc_ucx *x = cn->ucx;
	if (x->sreq || x->have || x->err != UCS_OK)
		return -EPROTO;
	h->magic = OL_KVP_MAGIC;
	h->version = OL_KVP_VERSION;
	h->req_id = atomic_fetch_add(&c->req_id, 1) + 1;
	if (grow((void **)&x->shdr, &x->shdr_cap, OL_KVP_HDR + ents_len) < 0)
		return -ENOMEM;
	ol_kvp_hdr_encode(x->shdr, h);
	if (ents_len)
		memcpy(x->shdr + OL_KVP_HDR, ents, ents_len);
	ucp_request_param_t p = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS,
	    .datatype = iov && n ? ucp_dt_make_iov() : ucp_dt_make_contig(1),
	    .flags = UCP_AM_SEND_FLAG_REPLY | (h->op == OL_KVP_PUT ? 0 : UCP_AM_SEND_FLAG_EAGER)};
	void *req = ucp_am_send_nbx(x->ep, OL_KVP_UCX_AM_REQ, x->shdr, OL_KVP_HDR + ents_len,
				    n ? data : NULL, n, &p);
	if (UCS_PTR_IS_ERR(req))
		return errno_of(UCS_PTR_STATUS(req));
	x->sreq = req;
	return 0;
}

int
olc_ucx_send(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, struct iovec *iov,
	     int n)
{
	struct olc_ucx *x = cn->ucx;
	size_t total = 0, at = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_base ? iov[i].iov_len : 0;
	/* small bodies (HELLO, AUTH, entries): flattened; kept until sent */
	if (grow((void **)&x->sbody, &x->sbody_cap, total + 1) < 0)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_base)
			continue;
		memcpy(x->sbody + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	size_t el = (size_t)h->count * OL_KVP_REQ_ENT;
	if (el > total)
		return -EINVAL;
	return send_req(c, cn, h, x->sbody, el, x->sbody + el, total - el, false);
}

int
olc_ucx_send_call(struct ol_client *c, struct olc_conn *cn, struct olc_call *call,
		  const uint8_t *ents, const size_t *idx)
{
	struct olc_ucx *x = cn->ucx;
	size_t n = 0;
	if (call->op == OL_KVP_PUT) {
		for (size_t j = 0; j < call->m; j++)
			n += call->ops[idx[j]]->iovcnt;
		if (grow((void **)&x->siov, &x->siov_cap, (n + 1) * sizeof(*x->siov)) < 0)
			return -ENOMEM;
		n = 0;
		for (size_t j = 0; j < call->m; j++) {
			const struct ol_kv_op *op = call->ops[idx[j]];
			for (size_t k = 0; k < op->iovcnt; k++)
				if (op->iov[k].len)
					x->siov[n++] =
					    (ucp_dt_iov_t){op->iov[k].base, op->iov[k].len};
		}
	}
	return send_req(c, cn, &call->h, ents, call->m * OL_KVP_REQ_ENT, x->siov, n, true);
}

/* Wait for the request in flight to be sent and for its reply; check the reply header as on
 * TCP (olc_recv_hdr_ex). */
static int
recv_reply(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
	   unsigned timeout_ms)
{
	struct olc_ucx *x = cn->ucx;
	uint64_t deadline = olc_now_ms() + timeout_ms;
	void *req = x->sreq;
	x->sreq = NULL;
	int r = finish(x, req, deadline);
	if (r == 0 && !x->have)
		r = wait_until(x, NULL, deadline);
	if (r < 0)
		return r;
	if (ol_kvp_hdr_decode(x->hbuf, x->hlen, rp) <= 0 || !(rp->flags & OL_KVP_F_REPLY))
		return -EPROTO;
	if (rp->op != rq->op || rp->req_id != rq->req_id)
		return -EPROTO;
	return rp->status < 0 ? rp->status : 0;
}

int
olc_ucx_recv_hdr_ex(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
		    void *extra, size_t extra_len, unsigned timeout_ms)
{
	struct olc_ucx *x = cn->ucx;
	int r = recv_reply(cn, rq, rp, timeout_ms ? timeout_ms : x->timeout_ms);
	if (x->have && (x->rndv || x->hlen != OL_KVP_HDR || x->dlen != rp->body_len))
		r = r < 0 ? r : -EPROTO; /* replies but GET's: header alone, body sent eagerly */
	if (x->have && x->data && x->dlen && r == 0) {
		if (grow((void **)&x->rbuf, &x->rcap, x->dlen + 1) < 0)
			r = -ENOMEM;
		else
			memcpy(x->rbuf, x->data, x->dlen);
	}
	x->rlen = x->have ? x->dlen : 0;
	x->rpos = 0;
	if (x->have)
		drop_data(x);
	if (r == 0 && extra_len)
		r = olc_ucx_read(cn, extra, extra_len);
	return r;
}

int
olc_ucx_read(struct olc_conn *cn, void *buf, size_t len)
{
	struct olc_ucx *x = cn->ucx;
	if (len > x->rlen - x->rpos)
		return -EPROTO;
	if (len == 0)
		return 0;
	memcpy(buf, x->rbuf + x->rpos, len);
	x->rpos += len;
	return 0;
}

/* A GET's values: straight into each hit's iovs (rendezvous), or copied from the message. */
static int
get_values(struct olc_ucx *x, struct olc_call *call, const struct ol_kvp_rep_ent *re,
	   uint64_t deadline)
{
	size_t n = 0;
	for (size_t i = 0; i < call->m; i++)
		n += re[i].status == OL_KV_OK ? call->ops[i]->iovcnt : 0;
	ucp_dt_iov_t *v = malloc((n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	n = 0;
	const uint8_t *src = x->data ? x->data : x->rbuf; /* kept by UCX, or copied */
	size_t at = 0;
	for (size_t i = 0; i < call->m; i++) {
		uint64_t len = re[i].status == OL_KV_OK ? re[i].len : 0;
		const struct ol_kv_op *op = call->ops[i];
		for (size_t k = 0; k < op->iovcnt && len > 0; k++) {
			size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
			if (x->rndv)
				v[n++] = (ucp_dt_iov_t){op->iov[k].base, l};
			else if (l)
				memcpy(op->iov[k].base, src + at, l);
			at += l;
			len -= l;
		}
	}
	int r = 0;
	if (x->rndv && x->dlen) {
		ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
					 .datatype = ucp_dt_make_iov()};
		void *req = ucp_am_recv_data_nbx(x->w, x->data, v, n, &p);
		x->data = NULL; /* the receive owns the descriptor now */
		x->have = false;
		r = finish(x, req, deadline);
	}
	free(v);
	return r;
}

int
olc_ucx_recv_get(struct ol_client *c, struct olc_conn *cn, struct olc_call *call)
{
	struct olc_ucx *x = cn->ucx;
	struct ol_kvp_hdr rp;
	unsigned t = call->hdr_timeout_ms ? call->hdr_timeout_ms : c->timeout_ms;
	int r = recv_reply(cn, &call->h, &rp, t);
	uint64_t *cap = malloc(call->m * sizeof(*cap) + 1);
	struct ol_kvp_rep_ent *re = malloc(call->m * sizeof(*re) + 1);
	if (r == 0 && (!cap || !re))
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < call->m; i++)
		cap[i] = olc_iov_len(call->ops[i]);
	if (r == 0 && (!x->have || ol_kvp_ucx_get_reply(x->hbuf, x->hlen, x->dlen,
							(uint32_t)call->m, cap, re) < 0))
		r = -EPROTO;
	if (r == 0) {
		olc_view_saw_tag(c, call->m ? re[0].rsv : 0);
		r = get_values(x, call, re, olc_now_ms() + c->timeout_ms);
	}
	for (size_t i = 0; r == 0 && i < call->m; i++) {
		struct ol_kv_op *op = call->ops[i];
		op->status = re[i].status >= 0 && re[i].status < OL_KV_STATUS_COUNT ? re[i].status
										    : OL_KV_ERROR;
		op->value_len = re[i].len;
	}
	if (x->have)
		drop_data(x);
	free(cap);
	free(re);
	return r;
}
