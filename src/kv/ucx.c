/* kv/ucx.c - the KV protocol over UCX active messages (transport = "rdma" or "ucx").
 *
 * One UCP context and one worker, progressed by a thread of their own ("kv-ucx") that sleeps
 * on the worker's event fd; a listener on [rdma] port. Each UCX endpoint is a struct conn of
 * the server (limits, HELLO, AUTH, namespace, counters as on TCP; never the shm grant) whose
 * frames come as active messages (proto.h, "the UCX transport"; docs/kv-protocol.md):
 *
 *   PUT    the entries are checked and their slots reserved while the message's header is
 *          in hand; a small message's values are copied from UCX's buffer, a rendezvous one's
 *          are received straight into the reserved DRAM slots (one IOV receive); then commit
 *   GET    each entry pinned (a DRAM slot, or a copy of an NVMe-tier value); one reply whose
 *          header holds the reply entries and whose data is the values, sent from the slots
 *          (the DRAM tier is ucp_mem_map'ed: a contiguous value goes with its memory handle);
 *          the pins are dropped when UCX reports the send complete
 *   other  kvs_handle as on TCP; the reply is copied and sent eagerly
 *
 * At most KVU_WINDOW operations of a connection in flight (a receive or a reply send): a client
 * with more (libopenlake has one) is closed. Engine calls that wait for a disk (NVMe reads,
 * strict write-behind) run on this thread: the UCX clients wait for them together. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "io/ucx.h"
#include "kv/server_int.h"
#include "openlake/openlake.h"

#define KVU_WINDOW  8	       /* operations in flight per connection */
#define KVU_SINK    (1u << 20) /* where the values of unstored PUT entries land */
#define KVU_BUCKETS 1024

struct kvu_conn {
	struct kvu *u;
	struct conn *c;
	ucp_ep_h ep;
	struct kvu_conn *hnext;	      /* endpoint hash chain */
	struct kvu_conn *prev, *next; /* every connection */
	unsigned inflight;
	bool closing, closed;
};

struct kvu_ent {
	struct ol_kvk k;
	struct ol_kve_slot sl;
	uint64_t len;
	int32_t st;
	bool held;	 /* sl is our reservation or pin */
	uint8_t *bounce; /* a copy of an NVMe-tier value (GET) */
};

struct kvu_op {
	struct kvu_conn *uc;
	struct ol_kvp_hdr h;
	uint32_t n;
	struct kvu_ent *ent;
	bool close_after; /* a refusal: close once it is sent */
	uint8_t *rhdr;	  /* the reply's AM header */
	size_t rhdr_len;
	uint8_t *body; /* the reply's data (a copy) */
	size_t body_len;
	ucp_dt_iov_t *iov;
	size_t niov;
};

struct kvu {
	struct ol_kv_server *s;
	ucp_context_h ctx;
	ucp_worker_h w;
	ucp_listener_h lis;
	ucp_mem_h memh; /* the DRAM tier; NULL when it could not be mapped */
	uint8_t *base;
	uint64_t size;
	int efd, wake;
	pthread_t t;
	atomic_bool stop;
	size_t max_hdr;
	unsigned max_clients, n;
	uint8_t *sink;
	struct kvu_conn *all;
	struct kvu_conn *tab[KVU_BUCKETS];
};

static void conn_kill(struct kvu_conn *uc);

/* ---- connections by endpoint ---- */

static unsigned
bucket(ucp_ep_h ep)
{
	uintptr_t p = (uintptr_t)ep;
	return (unsigned)((p >> 4) ^ (p >> 14)) % KVU_BUCKETS;
}

static struct kvu_conn *
lookup(struct kvu *u, ucp_ep_h ep)
{
	struct kvu_conn *uc = u->tab[bucket(ep)];
	while (uc && uc->ep != ep)
		uc = uc->hnext;
	return uc;
}

static void
unhash(struct kvu_conn *uc)
{
	struct kvu_conn **pp = &uc->u->tab[bucket(uc->ep)];
	while (*pp && *pp != uc)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = uc->hnext;
}

/* Free uc once its endpoint is closed and nothing of it is in flight. */
static void
maybe_free(struct kvu_conn *uc)
{
	if (!uc->closed || uc->inflight)
		return;
	struct kvu *u = uc->u;
	if (uc->prev)
		uc->prev->next = uc->next;
	else
		u->all = uc->next;
	if (uc->next)
		uc->next->prev = uc->prev;
	u->n--;
	kvs_conn_close(uc->c);
	free(uc);
}

static void
closed_cb(void *req, ucs_status_t st, void *arg)
{
	struct kvu_conn *uc = arg;
	(void)st;
	ucp_request_free(req);
	uc->closed = true;
	maybe_free(uc);
}

/* Close uc's endpoint (forced: its requests complete as cancelled, which drops their pins and
 * reservations); uc goes when the last of them has, maybe here: the caller must not touch uc
 * after this. */
static void
conn_kill(struct kvu_conn *uc)
{
	if (!uc->closing) {
		uc->closing = true;
		unhash(uc);
		ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
							 UCP_OP_ATTR_FIELD_USER_DATA |
							 UCP_OP_ATTR_FIELD_FLAGS,
					 .flags = UCP_EP_CLOSE_FLAG_FORCE,
					 .cb.send = closed_cb,
					 .user_data = uc};
		void *req = ucp_ep_close_nbx(uc->ep, &p);
		if (req == NULL || UCS_PTR_IS_ERR(req))
			uc->closed = true;
	}
	maybe_free(uc);
}

static void
ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	struct kvu_conn *uc = arg;
	(void)ep;
	if (st != UCS_ERR_CONNECTION_RESET && st != UCS_ERR_ENDPOINT_TIMEOUT && !uc->closing)
		ol_debug("kv: UCX connection from %s: %s", uc->c->peer, ucs_status_string(st));
	conn_kill(uc);
}

static void
peer_of(const struct sockaddr_storage *ss, uint8_t addr[16], char *buf, size_t cap)
{
	char h[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		memcpy(addr, &a->sin_addr, 4);
		inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		memcpy(addr, &a->sin6_addr, 16);
		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
		port = ntohs(a->sin6_port);
	}
	snprintf(buf, cap, "ucx:%s:%u", h, port);
}

static void
on_conn(ucp_conn_request_h req, void *arg)
{
	struct kvu *u = arg;
	ucp_conn_request_attr_t a = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
	uint8_t addr[16] = {0};
	char peer[64] = "ucx:?";
	if (ucp_conn_request_query(req, &a) == UCS_OK)
		peer_of(&a.client_address, addr, peer, sizeof(peer));
	const char *why = "";
	struct conn *c = NULL;
	if (u->max_clients && u->n >= u->max_clients)
		why = "too many UCX KV clients ([rdma] max_clients)";
	else
		c = kvs_admit_nofd(u->s, addr, peer, &why);
	if (!c) {
		if (*why)
			kvs_refuse_log(u->s, peer, why);
		ucp_listener_reject(u->lis, req);
		return;
	}
	struct kvu_conn *uc = calloc(1, sizeof(*uc));
	if (!uc)
		ol_die("kv: out of memory for a UCX connection");
	uc->u = u;
	uc->c = c;
	ucs_status_t st = ol_ucx_accept(u->w, req, ep_err, uc, &uc->ep);
	if (st != UCS_OK) {
		kvs_refuse_log(u->s, peer, ucs_status_string(st));
		kvs_conn_close(c);
		free(uc);
		return;
	}
	uc->hnext = u->tab[bucket(uc->ep)];
	u->tab[bucket(uc->ep)] = uc;
	uc->next = u->all;
	if (u->all)
		u->all->prev = uc;
	u->all = uc;
	u->n++;
}

/* ---- operations ---- */

static struct kvu_op *
op_new(struct kvu_conn *uc, const struct ol_kvp_hdr *h, uint32_t n)
{
	struct kvu_op *op = calloc(1, sizeof(*op));
	if (!op || (n && !(op->ent = calloc(n, sizeof(*op->ent)))))
		ol_die("kv: out of memory for a UCX request");
	op->uc = uc;
	op->h = *h;
	op->n = n;
	uc->inflight++;
	return op;
}

/* The end of an operation (its reply sent, or st says why not). */
static void
op_done(struct kvu_op *op, ucs_status_t st)
{
	struct kvu_conn *uc = op->uc;
	struct ol_kve *eng = uc->u->s->eng;
	for (uint32_t i = 0; i < op->n; i++) {
		if (op->ent[i].held)
			ol_kve_release(eng, op->ent[i].sl.off, op->ent[i].sl.seq);
		free(op->ent[i].bounce);
	}
	free(op->ent);
	free(op->rhdr);
	free(op->body);
	free(op->iov);
	bool kill = op->close_after || (st != UCS_OK && st != UCS_ERR_CANCELED);
	free(op);
	uc->inflight--;
	if (kill)
		conn_kill(uc); /* may free uc */
	else
		maybe_free(uc);
}

static void
sent_cb(void *req, ucs_status_t st, void *arg)
{
	ucp_request_free(req);
	op_done(arg, st);
}

static uint8_t *
hdr_new(const struct ol_kvp_hdr *rq, int32_t status, uint32_t count, uint64_t body_len,
	size_t extra)
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION, rq->op,	 OL_KVP_F_REPLY,
			       count,	     status,	     rq->req_id, body_len};
	uint8_t *b = malloc(OL_KVP_HDR + extra);
	if (!b)
		ol_die("kv: out of memory for a UCX reply");
	ol_kvp_hdr_encode(b, &h);
	return b;
}

/* Send op's reply: header op->rhdr, data (count elements of dt). op is done when it is. */
static void
op_send(struct kvu_op *op, const void *data, size_t count, ucp_datatype_t dt, ucp_mem_h memh,
	bool eager)
{
	struct kvu_conn *uc = op->uc;
	if (uc->closing) {
		op_done(op, UCS_ERR_CANCELED);
		return;
	}
	ucp_request_param_t p = {.op_attr_mask =
				     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
				     UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS |
				     (memh ? UCP_OP_ATTR_FIELD_MEMH : 0),
				 .cb.send = sent_cb,
				 .user_data = op,
				 .datatype = dt,
				 .flags = eager ? UCP_AM_SEND_FLAG_EAGER : 0,
				 .memh = memh};
	void *req =
	    ucp_am_send_nbx(uc->ep, OL_KVP_UCX_AM_REP, op->rhdr, op->rhdr_len, data, count, &p);
	if (req == NULL)
		op_done(op, UCS_OK);
	else if (UCS_PTR_IS_ERR(req))
		op_done(op, UCS_PTR_STATUS(req));
}

/* The PUT's values are in their slots (ok) or not (the connection went): commit and answer. */
static void
put_finish(struct kvu_op *op, bool ok)
{
	struct conn *c = op->uc->c;
	uint32_t tag = atomic_load(&c->s->view.tag);
	op->rhdr = hdr_new(&op->h, 0, op->n, (uint64_t)op->n * OL_KVP_REP_ENT, 0);
	op->rhdr_len = OL_KVP_HDR;
	op->body_len = (size_t)op->n * OL_KVP_REP_ENT;
	op->body = malloc(op->body_len + 1);
	if (!op->body)
		ol_die("kv: out of memory for a UCX reply");
	for (uint32_t i = 0; i < op->n; i++) {
		struct kvu_ent *e = &op->ent[i];
		if (e->held && ok) {
			e->st = ol_kve_commit(c->s->eng, &e->k, e->sl.off, e->sl.seq, e->len);
			e->held = false; /* committed, or freed by the engine */
			kvs_ns_put(c, e->st, e->len);
		}
		struct ol_kvp_rep_ent re = {e->st, tag, e->len, 0, 0};
		ol_kvp_rep_ent_encode(op->body + (size_t)i * OL_KVP_REP_ENT, &re);
	}
	if (!ok) {
		op_done(op, UCS_ERR_CANCELED);
		return;
	}
	op_send(op, op->body, op->body_len, ucp_dt_make_contig(1), NULL, true);
}

static void
put_recvd(void *req, ucs_status_t st, size_t len, void *arg)
{
	(void)len;
	ucp_request_free(req);
	put_finish(arg, st == UCS_OK);
}

/* The destinations of a rendezvous PUT: each reserved slot, the sink for values not stored. */
static void
put_iov(struct kvu_op *op)
{
	size_t n = 0;
	for (uint32_t i = 0; i < op->n; i++)
		n += op->ent[i].held ? 1 : (op->ent[i].len + KVU_SINK - 1) / KVU_SINK;
	op->iov = malloc((n + 1) * sizeof(*op->iov));
	if (!op->iov)
		ol_die("kv: out of memory for a UCX request");
	for (uint32_t i = 0; i < op->n; i++) {
		struct kvu_ent *e = &op->ent[i];
		if (e->held) {
			op->iov[op->niov++] = (ucp_dt_iov_t){e->sl.ptr, e->len};
			continue;
		}
		for (uint64_t left = e->len; left; left -= op->iov[op->niov++].length)
			op->iov[op->niov] =
			    (ucp_dt_iov_t){op->uc->u->sink, left < KVU_SINK ? left : KVU_SINK};
	}
}

static void
do_put(struct kvu_conn *uc, const struct ol_kvp_hdr *h, const uint8_t *ents, void *data, size_t len,
       bool rndv)
{
	struct kvu *u = uc->u;
	struct kvu_op *op = op_new(uc, h, h->count);
	bool any = false;
	for (uint32_t i = 0; i < op->n; i++) {
		struct kvu_ent *e = &op->ent[i];
		struct ol_kvp_req_ent re;
		ol_kvp_req_ent_decode(ents + (size_t)i * OL_KVP_REQ_ENT, &re);
		ol_kve_key(&e->k, re.key, uc->c->ns);
		e->len = re.len;
		e->st = ol_kve_alloc(u->s->eng, &e->k, re.len, &e->sl);
		e->held = e->st == OL_KV_OK;
		any |= e->held;
	}
	if (!rndv || !any) { /* eager: the values are here; rendezvous: nothing to store */
		size_t at = 0;
		for (uint32_t i = 0; !rndv && i < op->n; at += op->ent[i++].len)
			if (op->ent[i].held && op->ent[i].len)
				memcpy(op->ent[i].sl.ptr, (const uint8_t *)data + at,
				       op->ent[i].len);
		put_finish(op, true);
		return;
	}
	put_iov(op);
	ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
						 UCP_OP_ATTR_FIELD_USER_DATA |
						 UCP_OP_ATTR_FIELD_DATATYPE,
				 .cb.recv_am = put_recvd,
				 .user_data = op,
				 .datatype = ucp_dt_make_iov()};
	void *req = ucp_am_recv_data_nbx(u->w, data, op->iov, op->niov, &p);
	if (req == NULL)
		put_finish(op, true);
	else if (UCS_PTR_IS_ERR(req))
		put_finish(op, false);
}

/* One GET entry: pinned (a DRAM slot, or a copy of an NVMe-tier value), its reply entry. */
static void
get_one(struct kvu_op *op, uint32_t i, const uint8_t *ent)
{
	struct conn *c = op->uc->c;
	struct kvu_ent *e = &op->ent[i];
	struct ol_kvp_req_ent re;
	ol_kvp_req_ent_decode(ent, &re);
	ol_kve_key(&e->k, re.key, c->ns);
	e->st = ol_kve_pin(c->s->eng, &e->k, false, &e->sl);
	e->held = e->st == OL_KV_OK && e->sl.off != OL_KVE_NOOFF;
	kvs_get_head(c, &re, e->st, &e->sl, op->rhdr + OL_KVP_HDR + (size_t)i * OL_KVP_REP_ENT);
	bool data = e->st == OL_KV_OK && e->sl.len <= re.len;
	if (!data && e->held) {
		ol_kve_release(c->s->eng, e->sl.off, e->sl.seq);
		e->held = false;
	}
	if (data && e->sl.off == OL_KVE_NOOFF && e->sl.len) { /* valid until our next read */
		if (!(e->bounce = malloc(e->sl.len)))
			ol_die("kv: out of memory for a UCX reply");
		memcpy(e->bounce, e->sl.ptr, e->sl.len);
		e->sl.ptr = e->bounce;
	}
	e->len = data ? e->sl.len : 0;
}

static void
do_get(struct kvu_conn *uc, const struct ol_kvp_hdr *h, const uint8_t *ents)
{
	struct kvu *u = uc->u;
	struct kvu_op *op = op_new(uc, h, h->count);
	op->rhdr_len = OL_KVP_HDR + (size_t)h->count * OL_KVP_REP_ENT;
	op->rhdr = malloc(op->rhdr_len);
	op->iov = malloc((h->count + 1) * sizeof(*op->iov));
	if (!op->rhdr || !op->iov)
		ol_die("kv: out of memory for a UCX reply");
	uint64_t total = 0;
	bool in_tier = true;
	for (uint32_t i = 0; i < op->n; i++) {
		get_one(op, i, ents + (size_t)i * OL_KVP_REQ_ENT);
		if (!op->ent[i].len)
			continue;
		op->iov[op->niov++] = (ucp_dt_iov_t){op->ent[i].sl.ptr, op->ent[i].len};
		in_tier &= op->ent[i].held;
		total += op->ent[i].len;
	}
	struct ol_kvp_hdr rh = {OL_KVP_MAGIC, OL_KVP_VERSION, h->op, OL_KVP_F_REPLY, h->count, 0,
				h->req_id,    total};
	ol_kvp_hdr_encode(op->rhdr, &rh);
	if (op->rhdr_len > u->max_hdr) {
		kvs_refuse_log(u->s, uc->c->peer,
			       "a GET batch whose reply entries exceed UCX's AM header size");
		op->close_after = true;
		op_done(op, UCS_OK);
		return;
	}
	if (op->niov == 1) /* one value: contiguous, with the tier's memory handle */
		op_send(op, op->iov[0].buffer, op->iov[0].length, ucp_dt_make_contig(1),
			in_tier ? u->memh : NULL, false);
	else
		op_send(op, op->iov, op->niov, ucp_dt_make_iov(), NULL, false);
}

/* Send the reply kvs_precheck or kvs_handle left in c->out_* (a copy: c's buffers serve the
 * next request); close once it is sent when close_after. */
static void
send_out(struct kvu_conn *uc, const struct ol_kvp_hdr *h, bool close_after)
{
	struct conn *c = uc->c;
	struct kvu_op *op = op_new(uc, h, 0);
	op->close_after = close_after;
	if (!c->out_reply) { /* RELEASE with NOREPLY */
		op_done(op, UCS_OK);
		return;
	}
	op->rhdr = hdr_new(h, c->out_status, c->out_count, c->out_len, 0);
	op->rhdr_len = OL_KVP_HDR;
	op->body_len = c->out_len;
	if (!(op->body = malloc(c->out_len + 1)))
		ol_die("kv: out of memory for a UCX reply");
	if (c->out_len)
		memcpy(op->body, c->out_body, c->out_len);
	kvs_out_done(c);
	op_send(op, op->body, op->body_len, ucp_dt_make_contig(1), NULL, true);
}

/* Every op but PUT and GET: the body is entries + data, kvs_handle as on TCP. */
static int
do_other(struct kvu_conn *uc, const struct ol_kvp_hdr *h, const uint8_t *ents, const void *data,
	 size_t len)
{
	struct conn *c = uc->c;
	size_t el = (size_t)h->count * OL_KVP_REQ_ENT;
	bool skip = kvs_skips_body(h);
	if (!skip) {
		if (el + len > OL_KVS_BODY)
			return -EMSGSIZE;
		if (el)
			memcpy(c->ents, ents, el);
		if (len)
			memcpy(c->ents + el, data, len);
	}
	int r = kvs_handle(c, h, skip ? NULL : c->ents);
	if (r < 0 && r != -ECANCELED) {
		kvs_out_done(c);
		return r;
	}
	send_out(uc, h, r == -ECANCELED);
	return 0;
}

/* A request message. Handled here, in the worker's progress. */
static ucs_status_t
on_req(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
       const ucp_am_recv_param_t *p)
{
	struct kvu *u = arg;
	struct kvu_conn *uc = NULL;
	if (p->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
		uc = lookup(u, p->reply_ep);
	if (!uc || uc->closing)
		return UCS_OK;
	bool rndv = p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
	struct ol_kvp_hdr h;
	int r = ol_kvp_ucx_req_check(hdr, hlen, len, &u->s->lim, &h);
	if (r == 0 && uc->inflight >= KVU_WINDOW)
		r = -ENOBUFS;
	if (r == 0 && rndv && h.op != OL_KVP_PUT)
		r = -EBADMSG;
	if (r == 0)
		r = kvs_precheck(uc->c, &h);
	const uint8_t *ents = (const uint8_t *)hdr + OL_KVP_HDR;
	if (r == -ECANCELED) { /* a refusal is set: send it, then close (uc may be gone) */
		send_out(uc, &h, true);
		return UCS_OK;
	}
	if (r == 0 && h.op == OL_KVP_PUT)
		do_put(uc, &h, ents, data, len, rndv);
	else if (r == 0 && h.op == OL_KVP_GET)
		do_get(uc, &h, ents);
	else if (r == 0)
		r = do_other(uc, &h, ents, data, len);
	if (r < 0) {
		if (r != -ECANCELED)
			ol_warn("kv: closing UCX connection from %s: %s", uc->c->peer,
				r == -ENOBUFS ? "more requests in flight than its window"
					      : kvs_why(r));
		conn_kill(uc);
	}
	return UCS_OK;
}

/* ---- the thread ---- */

static void *
kvu_main(void *arg)
{
	struct kvu *u = arg;
	pthread_setname_np(pthread_self(), "kv-ucx");
	struct pollfd pf[2] = {{u->efd, POLLIN, 0}, {u->wake, POLLIN, 0}};
	while (!atomic_load(&u->stop)) {
		while (ucp_worker_progress(u->w))
			;
		ucs_status_t st = ucp_worker_arm(u->w);
		if (st == UCS_ERR_BUSY)
			continue;
		if (st != UCS_OK) {
			ol_err("kv: UCX worker: %s", ucs_status_string(st));
			break;
		}
		poll(pf, 2, 250);
	}
	return NULL;
}

/* ---- start and stop ---- */

/* [rdma] dev_name, qos: applied when the device exists here and $UCX_* does not say otherwise
 * (a config copied from another host must not leave UCX without a device). */
static void
tune(ucp_config_t *uc, const struct ol_config *cfg)
{
	char v[80];
	int rc = ol_ucx_config_device(uc, cfg->rdma_dev_name);
	if (rc == -ENODEV)
		ol_warn("kv: [rdma] dev_name %s: no such RDMA device here: UCX chooses the devices",
			cfg->rdma_dev_name);
	else if (rc)
		ol_warn("kv: UCX does not take [rdma] dev_name %s as NET_DEVICES",
			cfg->rdma_dev_name);
	/* a restarted daemon binds its port again while connections of the last one linger in
	 * TIME_WAIT (the TCP port's SO_REUSEADDR) */
	(void)!setenv("UCX_TCP_CM_REUSEADDR", "y", 0); /* ucp_config_modify warns on a uct key */
	if (cfg->rdma_service_level && !getenv("UCX_IB_SL")) {
		snprintf(v, sizeof(v), "%u", cfg->rdma_service_level);
		(void)!ucp_config_modify(uc, "IB_SL", v);
	}
	if (cfg->rdma_traffic_class && !getenv("UCX_IB_TRAFFIC_CLASS")) {
		snprintf(v, sizeof(v), "%u", cfg->rdma_traffic_class);
		(void)!ucp_config_modify(uc, "IB_TRAFFIC_CLASS", v);
	}
}

static int
ctx_init(struct kvu *u, const struct ol_config *cfg)
{
	ucp_config_t *conf;
	if (ucp_config_read(NULL, NULL, &conf) != UCS_OK)
		return -EIO;
	tune(conf, cfg);
	ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
			   .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
			   .name = "openlaked-kv"};
	ucs_status_t st = ucp_init(&pp, conf, &u->ctx);
	ucp_config_release(conf);
	if (st != UCS_OK) {
		ol_err("kv: UCX: %s", ucs_status_string(st));
		return -EIO;
	}
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	if ((st = ucp_worker_create(u->ctx, &wp, &u->w)) != UCS_OK ||
	    (st = ucp_worker_get_efd(u->w, &u->efd)) != UCS_OK) {
		ol_err("kv: UCX worker: %s", ucs_status_string(st));
		return -EIO;
	}
	ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER};
	if (ucp_worker_query(u->w, &wa) != UCS_OK)
		return -EIO;
	u->max_hdr = wa.max_am_header;
	ucp_am_handler_param_t hp = {
	    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
			  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
	    .flags = UCP_AM_FLAG_WHOLE_MSG,
	    .id = OL_KVP_UCX_AM_REQ,
	    .cb = on_req,
	    .arg = u};
	return ucp_worker_set_am_recv_handler(u->w, &hp) == UCS_OK ? 0 : -EIO;
}

/* The DRAM tier registered once, so values go out of (and come into) registered memory. */
static void
map_tier(struct kvu *u)
{
	ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
						 UCP_MEM_MAP_PARAM_FIELD_LENGTH,
				   .address = u->base,
				   .length = u->size};
	ucs_status_t st = ucp_mem_map(u->ctx, &mp, &u->memh);
	if (st != UCS_OK) {
		u->memh = NULL;
		ol_warn("kv: UCX cannot register the DRAM tier (%s): values are registered per "
			"send",
			ucs_status_string(st));
	}
}

static int
listen_on(struct kvu *u, const struct ol_config *cfg, const char *addr)
{
	char host[256] = "";
	const char *colon = strrchr(addr, ':');
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	if (hl >= 2 && addr[0] == '[')
		addr++, hl -= 2;
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	unsigned port = cfg->rdma_port ? cfg->rdma_port : u->s->port ? u->s->port + 1 : 0;
	if (port > 65535)
		return -EINVAL;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*ai;
	bool any = !host[0] || strcmp(host, "*") == 0;
	if (getaddrinfo(any			    ? NULL
			: strcmp(host, "localhost") ? host
						    : "127.0.0.1",
			ps, &hints, &ai) != 0)
		return -EINVAL;
	/* a daemon killed a moment ago may still hold the port: retried for 2 s, as TCP does */
	ucs_status_t st =
	    ol_ucx_listen(u->w, ai->ai_addr, ai->ai_addrlen, on_conn, u, &u->lis, &port);
	freeaddrinfo(ai);
	if (st != UCS_OK) {
		ol_err("kv: UCX cannot listen on port %u (%s): %s; set [rdma] port to a free port",
		       port,
		       cfg->rdma_port ? "[rdma] port" : "the KV port + 1: [rdma] port is unset",
		       ucs_status_string(st));
		return -EADDRINUSE;
	}
	ol_info("kv: UCX listening on port %u (transport = \"%s\", [rdma] backend = \"%s\": "
		"UCX_TLS %s; AM header up to %zu bytes; DRAM tier %s)",
		port, cfg->transport, cfg->rdma_backend,
		getenv("UCX_TLS") ? getenv("UCX_TLS") : "not set: UCX picks (dc/rc/ud, tcp, shm)",
		u->max_hdr, u->memh ? "registered" : "not registered");
	return 0;
}

static void
kvu_free(struct kvu *u)
{
	if (u->lis)
		ucp_listener_destroy(u->lis);
	if (u->memh)
		ucp_mem_unmap(u->ctx, u->memh);
	if (u->w)
		ucp_worker_destroy(u->w);
	if (u->ctx)
		ucp_cleanup(u->ctx);
	if (u->wake >= 0)
		close(u->wake);
	free(u->sink);
	free(u);
}

int
kvu_start(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr)
{
	struct kvu *u = calloc(1, sizeof(*u));
	if (!u)
		ol_die("kv: out of memory for UCX");
	u->s = s;
	u->max_clients = cfg->rdma_max_clients;
	u->base = ol_kve_shm_base(s->eng);
	u->size = ol_kve_shm_size(s->eng);
	u->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	u->sink = malloc(KVU_SINK);
	if (u->wake < 0 || !u->sink)
		ol_die("kv: out of memory for UCX");
	int r = ctx_init(u, cfg);
	if (r == 0)
		map_tier(u);
	if (r == 0)
		r = listen_on(u, cfg, addr);
	if (r == 0 && pthread_create(&u->t, NULL, kvu_main, u) != 0)
		r = -EAGAIN;
	if (r < 0) {
		ol_err("kv: transport = \"%s\": UCX could not start (see above)", cfg->transport);
		kvu_free(u);
		return r;
	}
	s->ucx = u;
	return 0;
}

void
kvu_stop(struct ol_kv_server *s)
{
	struct kvu *u = s->ucx;
	if (!u)
		return;
	atomic_store(&u->stop, true);
	uint64_t one = 1;
	(void)!write(u->wake, &one, sizeof(one));
	pthread_join(u->t, NULL);
	/* the thread is gone: this one progresses the worker now */
	ucp_listener_destroy(u->lis);
	u->lis = NULL;
	for (struct kvu_conn *uc = u->all, *nx; uc; uc = nx) {
		nx = uc->next;
		conn_kill(uc); /* may free uc */
	}
	for (int i = 0; u->all && i < 50000; i++)
		if (!ucp_worker_progress(u->w))
			usleep(100);
	for (struct kvu_conn *uc = u->all, *nx; uc; uc = nx) { /* never closed: let them go */
		nx = uc->next;
		ol_warn("kv: UCX connection from %s did not close", uc->c->peer);
		kvs_conn_close(uc->c);
		free(uc);
	}
	kvu_free(u);
	s->ucx = NULL;
}
