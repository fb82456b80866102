/* kv/serve_loop.c - TCP (plaintext or [kv_tls]) and Unix KV connections as state machines on
 * the per-core io/ loops (docs/ARCHITECTURE.md, "Threads and I/O").
 *
 * One loop per CPU of the process's affinity mask, pinned there with pin_threads = "auto";
 * every loop keeps an accept armed on the Unix (shm grant) listener and, unless placement
 * narrows it to the loops on the NUMA node of the address's NIC (io/topo.h), on the TCP
 * listener. The kernel hands each connection to one of them (in a burst of connects, mostly
 * to whichever is awake: it drains the backlog), and that loop passes it on to the loop that
 * serves the fewest connections (ties: itself), where it stays: 16 connections opened at
 * once are served 8 and 8 by two loops, as a server whose acceptor deals them round robin.
 * A connection has one ring op in flight at a time (a recv, a send, or none while a helper
 * runs for it), or the reads of one GET batch, so its callbacks never race. States:
 *
 *   C_TLS_HS   [kv_tls]: the first bytes (a plaintext frame is refused in plaintext), then
 *              the TLS handshake, within one frame timeout from the accept
 *   C_HDR      a frame header (recv into rb; idle there without a timer)
 *   C_BODY     a whole small body (entries, HELLO, AUTH; STATS/VIEW bodies skipped), then
 *              kvs_handle on the loop, or on a helper when kvs_may_block says so
 *   C_PUT_ENT  the next PUT entry; alloc (a helper in strict mode); then
 *   C_PUT_DATA the value, recv'd straight into the reserved shm slot; commit; or
 *   C_PUT_SKIP a value not stored (exists, full, too large) read and dropped
 *   C_GET      the next GET entry: pinned in DRAM and sent from the slot (no copy); or on
 *              the NVMe tier only: a batch of it and the NVMe-only entries after it (up to
 *              KVL_READ_AHEAD, their records within KVL_RDBUF_KEEP; a DRAM hit or a miss
 *              that follows joins it answered and ends it), each extent held by
 *              ol_kve_pin_start, all read at once on the loop's own ring into slices of the
 *              connection's buffer (a fixed buffer of the ring where it has a slot), each
 *              record checked by ol_kve_pin_finish (which may promote it) once all are in,
 *              and every reply sent from where it lies in one gathered sendmsg (no copy)
 *
 * Once a frame has started, each ring op must complete within the frame timeout (10 s, as the
 * blocking sockets' SO_RCVTIMEO gave every read, plus 1 s per MiB it moves: a value is one op,
 * MSG_WAITALL), else the op is cancelled and the connection closed.
 * The reads of a batch run under one frame timeout for all their bytes; at the timeout each
 * read still in flight is cancelled, and once every one has completed the connection closes
 * (unless none was cut short: then the batch is answered).
 * Helpers: a few threads that run the engine calls that may wait for a disk (a GET entry whose
 * read cannot be queued on the ring, tombstones, strict write-behind, LOOKUP promotions) and
 * post the connection back to its loop.
 *
 * TLS: the same states over a session on memory BIOs (tls/mem.c). The connection's one ring
 * op then moves ciphertext: a recv straight into the session's input buffer, or a send from
 * its output buffer. Where a plaintext state would recv, it decrypts what the session holds
 * (a PUT value straight into its shm slot, exactly the bytes the state needs) and waits for
 * ciphertext only when the session has none left; a reply is encrypted straight from where
 * it lies (a GET value from its pinned slot or its slice of the read buffer) into the output
 * buffer, which is sent each time it fills and at the end. Each ciphertext op runs under the
 * frame timeout as a plaintext op would; idle between frames, a connection waits for
 * ciphertext without a timer. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "io/loop.h"
#include "io/topo.h"
#include "kv/server_int.h"
#include "openlake/openlake.h"

#define KVL_FRAME_TIMEOUT_NS (10000ull * 1000000)
#define KVL_TICK_NS	     (250ull * 1000000)
#define KVL_MAX_LOOPS	     64
#define KVL_HELPERS	     2
#define KVL_READ_AHEAD	     OL_KVS_GATHER /* GET entries read from NVMe in one submission */
#define KVL_RDBUF_KEEP	     (2u << 20)	   /* a connection's NVMe read buffer kept up to this */
#define KVL_RDBUF_MIN	     (64u << 10)   /* and allocated at least this large */

enum { C_TLS_HS, C_HDR, C_BODY, C_PUT_ENT, C_PUT_DATA, C_PUT_SKIP, C_GET };
enum { J_HANDLE, J_PUT_ALLOC, J_PUT_COMMIT, J_GET_PIN };

struct kvloop {
	struct ol_kv_server *s;
	struct ol_loop *l;
	unsigned idx;
	int cpu;		  /* pinned CPU, -1 = none */
	struct ol_loop_op acc[2]; /* TCP, Unix */
	int afd[2];
	bool rearm[2]; /* an accept failed (EMFILE...): the tick arms it again */
	struct ol_loop_timer tick;
	struct ol_loop_msg begin;
	atomic_uint nconn; /* connections it serves (counted when handed to it) */
};

struct kvhelp {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct conn *head, *tail;
	bool stop;
	pthread_t t[KVL_HELPERS];
	unsigned n;
};

static void step(struct conn *c);
static void on_recv(struct ol_loop *l, void *arg, int res);
static void on_sent(struct ol_loop *l, void *arg, int res);
static int tls_want(struct conn *c, size_t n);
static int tls_fill(struct conn *c, uint8_t *dst, size_t n);
static int tls_send_start(struct conn *c);

static size_t
avail(const struct conn *c)
{
	return c->rb_len - c->rb_off;
}

/* ---- the connection's one op, its timeout, its end ---- */

static void
on_tmo(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	bool again = false;
	(void)res;
	c->timed_out = true;
	if (c->nv_wait == 0)
		again = ol_loop_cancel(l, &c->op) < 0;
	for (unsigned j = 0; c->nv_wait > 0 && j < c->nnv; j++) /* a GET batch's reads */
		if (c->nv[j].busy && ol_loop_cancel(l, &c->nv[j].op) < 0)
			again = true;
	if (again) /* no SQE free now: try again soon */
		(void)!ol_loop_timer_arm(l, &c->tmo, 10 * 1000000);
}

/* The frame timeout of an op moving n bytes: the 10 s every read or write had with blocking
 * sockets, plus 1 s per MiB, since one ring op now carries a whole value (MSG_WAITALL). */
static int
tmo_arm(struct conn *c, size_t n)
{
	return ol_loop_timer_arm(c->lp->l, &c->tmo,
				 KVL_FRAME_TIMEOUT_NS + (uint64_t)(n >> 20) * 1000000000u);
}

/* Drop c's GET batch entries from m on (no read of theirs in flight): the holds of those not
 * finished are dropped, the DRAM pins of the others released (their reply sent, or never
 * will be). From 0: the batch ends; from m > 0: the entries cut come again in their turn. */
static void
nv_cut(struct conn *c, unsigned m)
{
	unsigned n = c->nnv;
	c->nnv = m;
	for (unsigned j = m; j < n; j++) {
		struct kvnv *v = &c->nv[j];
		if (v->st == OL_KVE_NVME)
			ol_kve_pin_abandon(c->s->eng, &v->rd);
		else if (v->st == OL_KV_OK && v->sl.off != OL_KVE_NOOFF)
			ol_kve_release(c->s->eng, v->sl.off, v->sl.seq);
	}
}

/* Free c's NVMe read buffer (no read into it in flight), its ring registration first. */
static void
rdbuf_free(struct conn *c)
{
	ol_loop_buf_unregister(c->lp->l, c->rdfix - 1);
	c->rdfix = 0;
	free(c->rdbuf);
	c->rdbuf = NULL;
	c->rdcap = 0;
}

/* Close c; no op of its is in flight. */
static void
conn_end(struct conn *c, int r)
{
	ol_loop_timer_cancel(c->lp->l, &c->tmo);
	if (c->timed_out && r == -ECANCELED)
		r = -ETIMEDOUT;
	if (r < 0 && r != -ECONNRESET && r != -EPIPE && r != -ECANCELED &&
	    !atomic_load(&c->s->stop))
		ol_warn("kv: closing connection from %s: %s", c->peer, kvs_why(r));
	if (c->sl_held)
		ol_kve_release(c->s->eng, c->sl.off, c->sl.seq);
	free(c->bounce);
	c->bounce = NULL;
	nv_cut(c, 0);
	rdbuf_free(c);
	atomic_fetch_sub_explicit(&c->lp->nconn, 1, memory_order_relaxed);
	kvs_conn_close(c);
}

static int
arm_recv(struct conn *c, void *dst, size_t n, bool direct)
{
	c->op.cb = on_recv;
	c->op.arg = c;
	c->direct = direct;
	return ol_loop_recv(c->lp->l, &c->op, c->fd, dst, n);
}

/* Straight into a destination, all n bytes in one op (MSG_WAITALL). */
static int
arm_recv_all(struct conn *c, void *dst, size_t n)
{
	c->op.cb = on_recv;
	c->op.arg = c;
	c->direct = true;
	return ol_loop_recv_all(c->lp->l, &c->op, c->fd, dst, n);
}

/* n bytes (<= sizeof rb) buffered in rb: 1 when they are, 0 when a recv is armed, -errno.
 * Between frames (C_HDR, nothing buffered) a connection waits without a timer. */
static int
want(struct conn *c, size_t n)
{
	if (avail(c) >= n)
		return 1;
	memmove(c->rb, c->rb + c->rb_off, avail(c));
	c->rb_len -= c->rb_off;
	c->rb_off = 0;
	if (c->tls.ssl)
		return tls_want(c, n);
	bool idle = c->cst == C_HDR && c->rb_len == 0;
	int r = idle ? 0 : tmo_arm(c, 0);
	if (r == 0)
		r = arm_recv(c, c->rb + c->rb_len, sizeof(c->rb) - c->rb_len, false);
	return r < 0 ? r : 0;
}

/* dst[got..n) from rb, then straight from the socket (dst NULL: n bytes dropped). 1 when
 * c->got reached n, 0 when a recv is armed, -errno. */
static int
fill(struct conn *c, uint8_t *dst, size_t n)
{
	size_t t = avail(c) < n - c->got ? avail(c) : n - c->got;
	if (dst)
		memcpy(dst + c->got, c->rb + c->rb_off, t);
	c->rb_off += t;
	c->got += t;
	if (c->got == n)
		return 1;
	c->rb_off = c->rb_len = 0;
	if (c->tls.ssl)
		return tls_fill(c, dst, n);
	int r = tmo_arm(c, n - c->got);
	if (r == 0 && dst)
		r = arm_recv_all(c, dst + c->got, n - c->got);
	else if (r == 0)
		r = arm_recv(c, c->rb, n - c->got < sizeof(c->rb) ? n - c->got : sizeof(c->rb),
			     true);
	return r < 0 ? r : 0;
}

static void
on_recv(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	ol_loop_timer_cancel(l, &c->tmo);
	if (res <= 0) {
		conn_end(c, res == 0 ? -ECONNRESET : res);
		return;
	}
	c->timed_out = false;
	if (c->direct)
		c->got += (size_t)res;
	else
		c->rb_len += (size_t)res;
	step(c);
}

/* One sendmsg of what is left of c->iov (a GET's reply entry and its value go together). */
static int
send_next(struct conn *c)
{
	c->op.cb = on_sent;
	c->op.arg = c;
	c->mh = (struct msghdr){.msg_iov = c->iov + c->iov_i, .msg_iovlen = c->niov - c->iov_i};
	size_t n = 0;
	for (unsigned i = c->iov_i; i < c->niov; i++)
		n += c->iov[i].iov_len;
	int r = tmo_arm(c, n);
	return r < 0 ? r : ol_loop_sendmsg(c->lp->l, &c->op, c->fd, &c->mh);
}

/* Send c->iov[0..niov): 0 (sent_done continues with c->cst), -errno. */
static int
send_start(struct conn *c)
{
	c->iov_i = 0;
	if (c->tls.ssl)
		return tls_send_start(c);
	int r = send_next(c);
	return r < 0 ? r : 0;
}

/* The reply in c->iov went out: release what it was sent from, then the next state. */
static void
sent_done(struct conn *c)
{
	if (c->sl_held)
		ol_kve_release(c->s->eng, c->sl.off, c->sl.seq);
	c->sl_held = false;
	free(c->bounce);
	c->bounce = NULL;
	nv_cut(c, 0);
	if (c->rdcap > KVL_RDBUF_KEEP) /* a large block's buffer goes with it */
		rdbuf_free(c);
	kvs_out_done(c);
	if (c->close_after)
		conn_end(c, -ECANCELED);
	else
		step(c);
}

static void
on_sent(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	ol_loop_timer_cancel(l, &c->tmo);
	if (res <= 0) { /* 0: nothing went of a non-empty send: as a closed peer */
		conn_end(c, res < 0 ? res : -EPIPE);
		return;
	}
	c->timed_out = false;
	for (size_t left = (size_t)res; left > 0 && c->iov_i < c->niov;) {
		struct iovec *v = &c->iov[c->iov_i];
		size_t t = left < v->iov_len ? left : v->iov_len;
		v->iov_base = (uint8_t *)v->iov_base + t;
		v->iov_len -= t;
		left -= t;
		if (v->iov_len == 0)
			c->iov_i++;
	}
	if (c->iov_i < c->niov) {
		int r = send_next(c);
		if (r < 0)
			conn_end(c, r);
		return;
	}
	sent_done(c);
}

/* ---- TLS: ciphertext between the socket and the session ---- */

static void on_tls_io(struct ol_loop *l, void *arg, int res);

/* Wait for the session: send the ciphertext it has for the peer, else receive more into it.
 * timed: under the frame timeout for an op moving n bytes (false: idle between frames, or the
 * handshake's own deadline runs). 0 (on_tls_io continues), -errno. */
static int
tls_wait(struct conn *c, bool timed, size_t n)
{
	const uint8_t *out;
	uint8_t *in;
	size_t len = ol_tls_mem_out(&c->tls, &out);
	int r = timed ? tmo_arm(c, n) : 0;
	c->op.cb = on_tls_io;
	c->op.arg = c;
	c->tls_sending = len > 0;
	if (r == 0 && len > 0)
		r = ol_loop_send(c->lp->l, &c->op, c->fd, out, len);
	else if (r == 0 && (len = ol_tls_mem_in_room(&c->tls, &in)) > 0)
		r = ol_loop_recv(c->lp->l, &c->op, c->fd, in, len);
	else if (r == 0)
		r = -EPROTO; /* input full and unread: cannot happen while the session wants more */
	return r < 0 ? r : 0;
}

/* n bytes (<= sizeof rb) in rb, decrypted: exactly the bytes missing, so what follows (a PUT
 * value) stays in the session for its destination. 1, 0 (waiting), -errno. */
static int
tls_want(struct conn *c, size_t n)
{
	while (c->rb_len < n) {
		long r = ol_tls_mem_read(&c->tls, c->rb + c->rb_len, n - c->rb_len);
		if (r < 0)
			return (int)r;
		if (r == 0) {
			bool idle = c->cst == C_HDR && c->rb_len == 0 && !ol_tls_mem_busy(&c->tls);
			return tls_wait(c, !idle, 0);
		}
		c->rb_len += (size_t)r;
	}
	return 1;
}

/* dst[got..n) decrypted straight from the session (dst NULL: dropped through rb). 1, 0
 * (waiting), -errno. */
static int
tls_fill(struct conn *c, uint8_t *dst, size_t n)
{
	while (c->got < n) {
		size_t k = n - c->got;
		if (!dst && k > sizeof(c->rb))
			k = sizeof(c->rb);
		long r = ol_tls_mem_read(&c->tls, dst ? dst + c->got : c->rb, k);
		if (r < 0)
			return (int)r;
		if (r == 0)
			return tls_wait(c, true, n - c->got);
		c->got += (size_t)r;
	}
	return 1;
}

/* Encrypt what is left of c->iov into the session, sending its output each time it fills and
 * at the end: 1 all sent, 0 (waiting), -errno. */
static int
tls_pump(struct conn *c)
{
	size_t left = 0;
	for (unsigned i = c->iov_i; i < c->niov; i++)
		left += c->iov[i].iov_len;
	while (c->iov_i < c->niov) {
		struct iovec *v = &c->iov[c->iov_i];
		long w = v->iov_len ? ol_tls_mem_write(&c->tls, v->iov_base, v->iov_len) : 0;
		if (w < 0)
			return (int)w;
		if (w == 0 && v->iov_len)
			return tls_wait(c, true, left); /* the output is full: send it */
		v->iov_base = (uint8_t *)v->iov_base + w;
		v->iov_len -= (size_t)w;
		left -= (size_t)w;
		if (v->iov_len == 0)
			c->iov_i++;
	}
	const uint8_t *out;
	if (ol_tls_mem_out(&c->tls, &out) > 0)
		return tls_wait(c, true, 0);
	c->tls_pumping = false;
	return 1;
}

static int
tls_send_start(struct conn *c)
{
	c->tls_pumping = true;
	int r = tls_pump(c);
	return r == 1 ? -EIO : r; /* a reply always leaves ciphertext to send */
}

/* A plaintext KV client on the TLS port: answered in plaintext with a frame it understands
 * (-EPROTONOSUPPORT, req_id 0, as a refusal at accept); the fd is parked with the refused
 * ones, so our close a second later does not reset the answer away. */
static int
tls_refuse_plain(struct conn *c)
{
	kvs_refuse_fd(c->s, c->fd, c->peer, -EPROTONOSUPPORT,
		      "a plaintext KV client on the TLS port ([kv_tls]): it must connect with TLS");
	c->fd = -1;
	return -ECANCELED;
}

/* The first bytes, then the handshake (its deadline was armed at the accept). */
static int
st_tls_hs(struct conn *c)
{
	char why[160], what[200];
	if (!c->tls_seen) {
		int b = ol_tls_mem_peek(&c->tls);
		if (b < 0)
			return tls_wait(c, false, 0);
		if (b == (OL_KVP_MAGIC & 0xff))
			return tls_refuse_plain(c);
		c->tls_seen = true;
	}
	int r = ol_tls_mem_handshake(&c->tls, why, sizeof(why));
	if (r == 0)
		return tls_wait(c, false, 0);
	if (r < 0) {
		const uint8_t *alert; /* best effort: tell the peer why, without waiting */
		size_t n = ol_tls_mem_out(&c->tls, &alert);
		if (n > 0)
			(void)!send(c->fd, alert, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		snprintf(what, sizeof(what), "TLS handshake failed: %s", why);
		kvs_refuse_log(c->s, c->peer, what);
		return -ECANCELED;
	}
	ol_loop_timer_cancel(c->lp->l, &c->tmo);
	c->cst = C_HDR;
	return 1;
}

/* The handshake's ring op ended badly, or its deadline passed: say why (rate-limited). */
static void
tls_hs_end(struct conn *c, int res)
{
	const char *why = c->timed_out		    ? "not done within the frame timeout"
			  : res == 0 && c->tls_seen ? "peer closed"
						    : NULL; /* before a byte: a port probe */
	if (why && !atomic_load(&c->s->stop)) {
		char what[96];
		snprintf(what, sizeof(what), "TLS handshake failed: %s", why);
		kvs_refuse_log(c->s, c->peer, what);
	}
	c->timed_out = false;
	conn_end(c, res < 0 && res != -ECANCELED ? res : -ECANCELED);
}

static void
on_tls_io(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	bool hs = c->cst == C_TLS_HS;
	if (hs && (res <= 0 || c->timed_out)) {
		tls_hs_end(c, res);
		return;
	}
	if (!hs)
		ol_loop_timer_cancel(l, &c->tmo);
	if (res <= 0) {
		conn_end(c, res == 0 ? -ECONNRESET : res);
		return;
	}
	if (!hs)
		c->timed_out = false;
	if (c->tls_sending)
		ol_tls_mem_out_done(&c->tls, (size_t)res);
	else
		ol_tls_mem_in_commit(&c->tls, (size_t)res);
	if (!c->tls_pumping) {
		step(c);
		return;
	}
	int r = tls_pump(c);
	if (r < 0)
		conn_end(c, r);
	else if (r == 1)
		sent_done(c);
}

/* Send the reply kvs_handle (or PUT) left; 1 when there is none. */
static int
send_out(struct conn *c)
{
	if (!c->out_reply)
		return 1;
	uint8_t *at = kvs_out_hdr(c, &c->h, c->gh);
	bool joined = at + OL_KVP_HDR == c->out_body;
	c->niov = 0;
	c->iov[c->niov++] = (struct iovec){at, OL_KVP_HDR + (joined ? c->out_len : 0)};
	if (!joined && c->out_len)
		c->iov[c->niov++] = (struct iovec){(void *)c->out_body, c->out_len};
	return send_start(c);
}

static void
out_entries(struct conn *c, uint32_t count, size_t len)
{
	c->out_reply = true;
	c->out_status = 0;
	c->out_count = count;
	c->out_body = c->reps;
	c->out_len = len;
}

/* ---- helpers: blocking engine calls off the loop ---- */

static int
help(struct conn *c, int job)
{
	struct kvhelp *hp = c->s->help;
	c->job = job;
	c->hnext = NULL;
	pthread_mutex_lock(&hp->mu);
	if (hp->tail)
		hp->tail->hnext = c;
	else
		hp->head = c;
	hp->tail = c;
	pthread_cond_signal(&hp->cv);
	pthread_mutex_unlock(&hp->mu);
	return 0;
}

static void
help_run(struct conn *c)
{
	struct ol_kve *e = c->s->eng;
	switch (c->job) {
	case J_HANDLE:
		c->st = kvs_handle(c, &c->h, c->ents);
		break;
	case J_PUT_ALLOC:
		c->st = ol_kve_alloc(e, &c->k, c->e.len, &c->sl);
		break;
	case J_PUT_COMMIT:
		c->st = ol_kve_commit(e, &c->k, c->sl.off, c->sl.seq, c->e.len);
		break;
	default: /* J_GET_PIN: entry i's read could not be queued on the loop's ring */
		c->st = ol_kve_pin(e, &c->k, false, &c->sl);
		if (c->st == OL_KV_OK && c->sl.off == OL_KVE_NOOFF) {
			/* the tier's read buffer is this thread's: keep a copy to send */
			c->bounce = ol_xmalloc(c->sl.len ? c->sl.len : 1);
			memcpy(c->bounce, c->sl.ptr, c->sl.len);
			c->sl.ptr = c->bounce;
		}
		break;
	}
}

static void on_helped(struct ol_loop *l, void *arg, int res);

static void *
help_main(void *arg)
{
	struct kvhelp *hp = arg;
	pthread_mutex_lock(&hp->mu);
	for (;;) {
		while (!hp->head && !hp->stop)
			pthread_cond_wait(&hp->cv, &hp->mu);
		if (!hp->head)
			break;
		struct conn *c = hp->head;
		hp->head = c->hnext;
		if (!hp->head)
			hp->tail = NULL;
		pthread_mutex_unlock(&hp->mu);
		help_run(c);
		c->msg.fn = on_helped;
		c->msg.arg = c;
		if (ol_loop_post(c->lp->l, &c->msg) < 0)
			ol_warn("kv: cannot wake a loop for a helper's result");
		pthread_mutex_lock(&hp->mu);
	}
	pthread_mutex_unlock(&hp->mu);
	return NULL;
}

/* ---- frames ---- */

static int
handled(struct conn *c, int r)
{
	if (r == -ECANCELED) {
		c->close_after = true;
	} else if (r < 0) {
		kvs_out_done(c);
		return r;
	}
	c->cst = C_HDR;
	return send_out(c);
}

static int
st_hdr(struct conn *c)
{
	int r = want(c, OL_KVP_HDR);
	if (r <= 0)
		return r;
	r = ol_kvp_hdr_decode(c->rb + c->rb_off, OL_KVP_HDR, &c->h);
	c->rb_off += OL_KVP_HDR;
	if (r > 0)
		r = ol_kvp_check_req(&c->h, &c->s->lim);
	else if (r == 0)
		r = -EBADMSG;
	if (r == 0)
		r = kvs_precheck(c, &c->h);
	if (r == -ECANCELED) /* a refusal: its reply, then close */
		return handled(c, r);
	if (r < 0)
		return r;
	c->got = 0;
	c->i = 0;
	c->left = c->h.body_len;
	c->cst = c->h.op == OL_KVP_PUT ? C_PUT_ENT : C_BODY;
	return 1;
}

static int
get_start(struct conn *c)
{
	if (c->h.count == 0) {
		out_entries(c, 0, 0);
		c->cst = C_HDR;
		return send_out(c);
	}
	struct ol_kvp_hdr rh = {
	    OL_KVP_MAGIC, OL_KVP_VERSION, c->h.op, OL_KVP_F_REPLY, c->h.count, 0, c->h.req_id, 0};
	ol_kvp_hdr_encode(c->pend, &rh); /* sent with the first entry */
	c->has_pend = true;
	c->cst = C_GET;
	return 1;
}

static int
st_body(struct conn *c)
{
	bool skip = kvs_skips_body(&c->h);
	int r = fill(c, skip ? NULL : c->ents, c->h.body_len);
	if (r <= 0)
		return r;
	if (c->h.op == OL_KVP_GET)
		return get_start(c);
	if (kvs_may_block(c, &c->h, c->ents))
		return help(c, J_HANDLE);
	return handled(c, kvs_handle(c, &c->h, c->ents));
}

static int
put_alloced(struct conn *c)
{
	c->got = 0;
	if (c->st == OL_KV_OK) {
		c->sl_held = true;
		c->cst = C_PUT_DATA;
	} else {
		kvs_rep_put(c, c->i, c->st, c->e.len, 0, 0);
		c->cst = C_PUT_SKIP;
	}
	return 1;
}

static int
put_done(struct conn *c)
{
	c->sl_held = false; /* committed, or freed by the engine */
	kvs_ns_put(c, c->st, c->e.len);
	kvs_rep_put(c, c->i++, c->st, c->e.len, 0, 0);
	c->cst = C_PUT_ENT;
	return 1;
}

static int
st_put_ent(struct conn *c)
{
	if (c->i == c->h.count) {
		if (c->left != 0)
			return -EMSGSIZE;
		out_entries(c, c->h.count, (size_t)c->h.count * OL_KVP_REP_ENT);
		c->cst = C_HDR;
		return send_out(c);
	}
	if (c->left < OL_KVP_REQ_ENT)
		return -EMSGSIZE;
	int r = want(c, OL_KVP_REQ_ENT);
	if (r <= 0)
		return r;
	ol_kvp_req_ent_decode(c->rb + c->rb_off, &c->e);
	c->rb_off += OL_KVP_REQ_ENT;
	c->left -= OL_KVP_REQ_ENT;
	if (ol_kvp_check_put_ent(&c->e, c->left, &c->s->lim) < 0)
		return -EMSGSIZE;
	c->left -= c->e.len;
	ol_kve_key(&c->k, c->e.key, c->ns);
	if (ol_kve_strict(c->s->eng))
		return help(c, J_PUT_ALLOC);
	c->st = ol_kve_alloc(c->s->eng, &c->k, c->e.len, &c->sl);
	return put_alloced(c);
}

static int
st_put_data(struct conn *c)
{
	int r = fill(c, c->sl.ptr, c->e.len);
	if (r <= 0)
		return r;
	if (ol_kve_strict(c->s->eng))
		return help(c, J_PUT_COMMIT);
	c->st = ol_kve_commit(c->s->eng, &c->k, c->sl.off, c->sl.seq, c->e.len);
	return put_done(c);
}

static int
st_put_skip(struct conn *c)
{
	int r = fill(c, NULL, c->e.len);
	if (r <= 0)
		return r;
	c->i++;
	c->cst = C_PUT_ENT;
	return 1;
}

/* Append a GET reply to c->iov: its head (hl bytes at h), then its value when there is one
 * that fits the entry's capacity cap (else the head says its length alone). */
static void
iov_reply(struct conn *c, uint8_t *h, size_t hl, int st, const struct ol_kve_slot *sl, uint64_t cap)
{
	c->iov[c->niov++] = (struct iovec){h, hl};
	if (st == OL_KV_OK && sl->len <= cap && sl->len > 0)
		c->iov[c->niov++] = (struct iovec){sl->ptr, sl->len};
}

/* Send entry i's reply (and the frame's header before the first) and its value, straight
 * from the pinned slot (or a helper's copy of an NVMe read). */
static int
get_send(struct conn *c)
{
	c->sl_held = c->st == OL_KV_OK && c->sl.off != OL_KVE_NOOFF;
	size_t hl = 0;
	if (c->has_pend) {
		memcpy(c->gh, c->pend, OL_KVP_HDR);
		hl = OL_KVP_HDR;
		c->has_pend = false;
	}
	kvs_get_head(c, &c->e, c->st, &c->sl, c->gh + hl);
	hl += OL_KVP_REP_ENT;
	c->niov = 0;
	iov_reply(c, c->gh, hl, c->st, &c->sl, c->e.len);
	c->i++;
	return send_start(c);
}

/* ---- a GET batch: entry i and the NVMe-only entries after it, read on the loop's ring ---- */

/* Send the batch's replies (entries i..i+nnv) in one gathered send, each value from where it
 * lies: its slice of c->rdbuf, or its DRAM pin (released in sent_done, by nv_cut). */
static int
nv_send(struct conn *c)
{
	c->niov = 0;
	for (unsigned j = 0; j < c->nnv; j++) {
		struct kvnv *v = &c->nv[j];
		struct ol_kvp_req_ent re;
		uint8_t *h = j ? c->gh_more[j - 1] : c->gh;
		size_t hl = 0;
		if (j == 0 && c->has_pend) {
			memcpy(c->gh, c->pend, OL_KVP_HDR);
			hl = OL_KVP_HDR;
			c->has_pend = false;
		}
		ol_kvp_req_ent_decode(c->ents + (size_t)c->i * OL_KVP_REQ_ENT, &re);
		kvs_get_head(c, &re, v->st, &v->sl, h + hl);
		iov_reply(c, h, hl + OL_KVP_REP_ENT, v->st, &v->sl, re.len);
		c->i++;
	}
	return send_start(c);
}

static void on_nv_read(struct ol_loop *l, void *arg, int res);

/* Queue the read of what is left of v's record into its slice of c->rdbuf: 0 or -errno. */
static int
nv_submit(struct conn *c, struct kvnv *v)
{
	const struct ol_kvs_ext *x = &v->rd.ext;
	uint8_t *dst = c->rdbuf + v->at + v->got;
	size_t n = x->len - v->got;
	int r;
	v->op.cb = on_nv_read;
	v->op.arg = v;
	if (c->rdfix)
		r = ol_loop_read_fixed(c->lp->l, &v->op, x->fd, dst, n, x->off + v->got,
				       c->rdfix - 1);
	else
		r = ol_loop_read(c->lp->l, &v->op, x->fd, dst, n, x->off + v->got);
	v->busy = r == 0;
	return r;
}

/* c->rdbuf of at least n bytes (no read into it in flight): kept when large enough, else a
 * new one, at least twice the old up to KVL_RDBUF_KEEP. One kept between batches is
 * registered with the ring (its pages pinned once, not at every read); without a slot (an
 * old kernel, a small RLIMIT_MEMLOCK, the ring's slots taken), plain reads. */
static void
nv_buf(struct conn *c, size_t n)
{
	if (c->rdcap >= n)
		return;
	size_t cap = c->rdcap * 2 > KVL_RDBUF_MIN ? c->rdcap * 2 : KVL_RDBUF_MIN;
	cap = cap > KVL_RDBUF_KEEP ? KVL_RDBUF_KEEP : cap;
	cap = cap < n ? n : cap;
	void *p = NULL;
	rdbuf_free(c);
	if (posix_memalign(&p, OL_KVS_ALIGN, cap) != 0)
		ol_die("kv: out of memory (%zu bytes for NVMe reads)", cap);
	c->rdbuf = p;
	c->rdcap = cap;
	int idx = cap <= KVL_RDBUF_KEEP ? ol_loop_buf_register(c->lp->l, p, cap) : -1;
	c->rdfix = idx >= 0 ? idx + 1 : 0;
}

/* Add the entries after i to c's batch (entry i is c->nv[0], held): each NVMe-only one whose
 * record still fits KVL_RDBUF_KEEP, up to KVL_READ_AHEAD; the first that is not NVMe-only (a
 * DRAM hit, pinned, or a miss) joins the batch answered and ends it. Returns the bytes of
 * c->rdbuf the batch needs. */
static size_t
nv_gather(struct conn *c)
{
	size_t need = c->nv[0].rd.ext.len;
	while (c->nnv < KVL_READ_AHEAD && c->i + c->nnv < c->h.count) {
		struct kvnv *v = &c->nv[c->nnv];
		struct ol_kvp_req_ent re;
		struct ol_kvk k;
		ol_kvp_req_ent_decode(c->ents + (size_t)(c->i + c->nnv) * OL_KVP_REQ_ENT, &re);
		ol_kve_key(&k, re.key, c->ns);
		v->st = ol_kve_pin_start(c->s->eng, &k, &v->sl, &v->rd);
		if (v->st != OL_KVE_NVME) {
			c->nnv++;
			break;
		}
		size_t at = (need + OL_KVS_ALIGN - 1) / OL_KVS_ALIGN * OL_KVS_ALIGN;
		if (at + v->rd.ext.len > KVL_RDBUF_KEEP) { /* read in its turn */
			ol_kve_pin_abandon(c->s->eng, &v->rd);
			break;
		}
		v->at = at;
		need = at + v->rd.ext.len;
		c->nnv++;
	}
	return need;
}

/* Entry i is on the NVMe tier only (held in c->nv[0].rd): read it and the NVMe-only entries
 * after it on the loop's ring, all queued at once (one submission), under one frame timeout
 * for their bytes. 0 (on_nv_read or a helper continues), -errno. */
static int
nv_batch(struct conn *c)
{
	struct kvnv *v0 = &c->nv[0];
	v0->st = OL_KVE_NVME;
	v0->at = 0;
	c->nnv = 1;
	size_t need = nv_gather(c);
	nv_buf(c, need);
	int r = tmo_arm(c, need);
	unsigned m = 0;
	for (; r == 0 && m < c->nnv; m++) {
		struct kvnv *v = &c->nv[m];
		v->c = c;
		v->got = 0;
		v->res = 0;
		if (v->st == OL_KVE_NVME && nv_submit(c, v) < 0)
			break; /* no SQE free: the batch ends before it */
		c->nv_wait += v->st == OL_KVE_NVME;
	}
	nv_cut(c, m);
	if (c->nv_wait > 0)
		return 0;
	ol_loop_timer_cancel(c->lp->l, &c->tmo);
	if (r < 0)
		return r;
	return help(c, J_GET_PIN); /* not even entry i could be queued: a helper reads it */
}

/* Every read of c's batch completed: a batch cut by the frame timeout closes c; otherwise
 * each record is checked (ol_kve_pin_finish: a corrupt one answers CORRUPT, one changed or
 * dropped meanwhile is a miss; it may be promoted) and the replies are sent. */
static void
nv_done(struct conn *c)
{
	bool failed = false;
	ol_loop_timer_cancel(c->lp->l, &c->tmo);
	for (unsigned j = 0; j < c->nnv; j++)
		failed |= c->nv[j].st == OL_KVE_NVME && c->nv[j].res < 0;
	if (c->timed_out && failed) {
		conn_end(c, -ECANCELED); /* reported as the timeout; nv_cut ends the holds */
		return;
	}
	c->timed_out = false;
	for (unsigned j = 0; j < c->nnv; j++) {
		struct kvnv *v = &c->nv[j];
		if (v->st == OL_KVE_NVME)
			v->st =
			    ol_kve_pin_finish(c->s->eng, &v->rd, v->res, c->rdbuf + v->at, &v->sl);
	}
	int r = nv_send(c);
	if (r < 0)
		conn_end(c, r);
	else if (r > 0)
		step(c);
}

static void
on_nv_read(struct ol_loop *l, void *arg, int res)
{
	struct kvnv *v = arg;
	struct conn *c = v->c;
	(void)l;
	v->busy = false;
	if (res > 0 && v->got + (size_t)res < v->rd.ext.len && !c->timed_out) {
		v->got += (size_t)res; /* short: read the rest */
		if (nv_submit(c, v) == 0)
			return;
		res = -EIO;
	}
	v->res = res > 0 ? (int)(v->got + (size_t)res) : res == 0 ? -EIO : res;
	if (--c->nv_wait == 0)
		nv_done(c);
}

static int
st_get(struct conn *c)
{
	if (c->i == c->h.count) {
		c->cst = C_HDR;
		return 1;
	}
	ol_kvp_req_ent_decode(c->ents + (size_t)c->i * OL_KVP_REQ_ENT, &c->e);
	ol_kve_key(&c->k, c->e.key, c->ns);
	c->st = ol_kve_pin_start(c->s->eng, &c->k, &c->sl, &c->nv[0].rd);
	if (c->st != OL_KVE_NVME)
		return get_send(c);
	return nv_batch(c);
}

/* Run c's states until it waits for an op or a helper, or ends. */
static void
step(struct conn *c)
{
	for (;;) {
		int r;
		switch (c->cst) {
		case C_TLS_HS:
			r = st_tls_hs(c);
			break;
		case C_HDR:
			r = st_hdr(c);
			break;
		case C_BODY:
			r = st_body(c);
			break;
		case C_PUT_ENT:
			r = st_put_ent(c);
			break;
		case C_PUT_DATA:
			r = st_put_data(c);
			break;
		case C_PUT_SKIP:
			r = st_put_skip(c);
			break;
		default:
			r = st_get(c);
			break;
		}
		if (r < 0)
			conn_end(c, r);
		if (r <= 0)
			return;
	}
}

static void
on_helped(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	int r;
	(void)l;
	(void)res;
	switch (c->job) {
	case J_HANDLE:
		r = handled(c, c->st);
		break;
	case J_PUT_ALLOC:
		r = put_alloced(c);
		break;
	case J_PUT_COMMIT:
		r = put_done(c);
		break;
	default:
		r = get_send(c);
		break;
	}
	if (r < 0)
		conn_end(c, r);
	else if (r > 0)
		step(c);
}

void
kvl_conn_start(struct kvloop *lp, struct conn *c)
{
	c->lp = lp;
	c->tmo.cb = on_tmo;
	c->tmo.arg = c;
	c->cst = C_HDR;
	if (c->tls.ssl) { /* the handshake, bounded by one frame timeout from here */
		c->cst = C_TLS_HS;
		int r = tmo_arm(c, 0);
		if (r < 0) {
			conn_end(c, r);
			return;
		}
	}
	step(c);
}

/* ---- accepting ---- */

static void on_accept_tcp(struct ol_loop *l, void *arg, int res);
static void on_accept_unix(struct ol_loop *l, void *arg, int res);

static int
arm_accept(struct kvloop *lp, int i)
{
	lp->acc[i].cb = i == 0 ? on_accept_tcp : on_accept_unix;
	lp->acc[i].arg = lp;
	int r = ol_loop_accept(lp->l, &lp->acc[i], lp->afd[i]);
	lp->rearm[i] = r < 0;
	return r;
}

/* The loop that serves the fewest connections among those that accept on listener i (TCP:
 * placement may leave some out), lp itself on a tie; lp while the loops are starting. The
 * counts of other loops may move meanwhile: a balance, not an exact one. */
static struct kvloop *
least_loaded(struct kvloop *lp, int i)
{
	struct ol_kv_server *s = lp->s;
	unsigned n = atomic_load_explicit(&s->loops_up, memory_order_acquire);
	struct kvloop *best = lp;
	unsigned least = atomic_load_explicit(&lp->nconn, memory_order_relaxed);
	for (unsigned j = 0; j < n; j++) {
		struct kvloop *o = &s->loops[j];
		unsigned k = atomic_load_explicit(&o->nconn, memory_order_relaxed);
		if (o->afd[i] >= 0 && k < least) {
			best = o;
			least = k;
		}
	}
	return best;
}

static void
on_handed(struct ol_loop *l, void *arg, int res)
{
	struct conn *c = arg;
	(void)l;
	(void)res;
	kvl_conn_start(c->lp, c);
}

/* Serve c on the least loaded loop: lp's own, or another's through its inbox (c->msg is free
 * until the connection's first helper job). */
static void
hand_out(struct kvloop *lp, int i, struct conn *c)
{
	struct kvloop *to = least_loaded(lp, i);
	if (to != lp) {
		atomic_fetch_add_explicit(&to->nconn, 1, memory_order_relaxed);
		c->lp = to;
		c->msg.fn = on_handed;
		c->msg.arg = c;
		if (ol_loop_post(to->l, &c->msg) == 0)
			return;
		atomic_fetch_sub_explicit(&to->nconn, 1, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&lp->nconn, 1, memory_order_relaxed);
	kvl_conn_start(lp, c);
}

static void
accepted(struct kvloop *lp, int i, int res)
{
	struct ol_kv_server *s = lp->s;
	if (atomic_load(&s->stop)) {
		if (res >= 0)
			close(res);
		return;
	}
	if (res < 0 && res != -EINTR && res != -ECONNABORTED && res != -EAGAIN) {
		kvs_refuse_log(s, "a connection", strerror(-res)); /* EMFILE... */
		lp->rearm[i] = true;				   /* by the tick, not at once */
		return;
	}
	if (res >= 0) {
		struct conn *c = kvs_admit(s, res, i == 1);
		if (c)
			hand_out(lp, i, c);
	}
	(void)arm_accept(lp, i); /* a failure sets rearm: the tick tries again */
}

static void
on_accept_tcp(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	accepted(arg, 0, res);
}

static void
on_accept_unix(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	accepted(arg, 1, res);
}

/* Every 250 ms: accepts that failed are armed again; loop 0 closes refused connections
 * whose error frame had its time. */
static void
on_tick(struct ol_loop *l, void *arg, int res)
{
	struct kvloop *lp = arg;
	(void)res;
	for (int i = 0; i < 2; i++)
		if (lp->afd[i] >= 0 && lp->rearm[i] && !atomic_load(&lp->s->stop))
			(void)arm_accept(lp, i);
	if (lp->idx == 0)
		kvs_refused_flush(lp->s, false);
	(void)!ol_loop_timer_arm(l, &lp->tick, KVL_TICK_NS);
}

static void
on_begin(struct ol_loop *l, void *arg, int res)
{
	struct kvloop *lp = arg;
	(void)res;
	for (int i = 0; i < 2; i++)
		if (lp->afd[i] >= 0)
			(void)arm_accept(lp, i);
	lp->tick.cb = on_tick;
	lp->tick.arg = lp;
	(void)!ol_loop_timer_arm(l, &lp->tick, KVL_TICK_NS);
}

/* ---- start / stop ---- */

static int
help_start(struct ol_kv_server *s)
{
	struct kvhelp *hp = ol_xcalloc(1, sizeof(*hp));
	pthread_mutex_init(&hp->mu, NULL);
	pthread_cond_init(&hp->cv, NULL);
	s->help = hp;
	for (; hp->n < KVL_HELPERS; hp->n++) {
		int r = -pthread_create(&hp->t[hp->n], NULL, help_main, hp);
		if (r < 0)
			return r;
		char name[16];
		snprintf(name, sizeof(name), "kv-help-%u", hp->n);
		pthread_setname_np(hp->t[hp->n], name);
	}
	return 0;
}

static void
help_stop(struct ol_kv_server *s)
{
	struct kvhelp *hp = s->help;
	if (!hp)
		return;
	pthread_mutex_lock(&hp->mu);
	hp->stop = true;
	pthread_cond_broadcast(&hp->cv);
	pthread_mutex_unlock(&hp->mu);
	for (unsigned i = 0; i < hp->n; i++)
		pthread_join(hp->t[i], NULL);
	pthread_cond_destroy(&hp->cv);
	pthread_mutex_destroy(&hp->mu);
	free(hp);
	s->help = NULL;
}

/* How many loops, and the CPU of each (-1 each when not pinned): one loop per CPU the
 * process may run on (taskset, cgroups), at most KVL_MAX_LOOPS. */
static unsigned
loop_cpus(const struct ol_config *cfg, int *cpus)
{
	cpu_set_t mask;
	unsigned n;
	bool have = sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0;
	if (have) {
		n = (unsigned)CPU_COUNT(&mask);
	} else {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		n = nc < 1 ? 1 : (unsigned)nc;
	}
	n = n > KVL_MAX_LOOPS ? KVL_MAX_LOOPS : n;
	bool pin = have && strcmp(cfg->pin_threads, "off") != 0;
	if (!pin || ol_topo_loop_cpus(&mask, n, cpus) < 0)
		for (unsigned i = 0; i < n; i++)
			cpus[i] = -1;
	return n;
}

/* Which loops accept TCP connections: on a host of several NUMA nodes, those on the node of
 * the listen address's NIC (io/topo.h); every loop otherwise. Logs the choice. */
static void
loop_accepts(const int *cpus, unsigned n, const char *addr, bool *accept)
{
	struct ol_topo *t = NULL;
	char host[256], ifn[64] = "";
	int node = -1;
	const char *end = addr[0] == '[' ? strchr(addr, ']') : strrchr(addr, ':');
	const char *start = addr[0] == '[' ? addr + 1 : addr;
	snprintf(host, sizeof(host), "%.*s", end ? (int)(end - start) : (int)strlen(start), start);
	int r = cpus[0] >= 0 ? ol_topo_open(&t) : 0;
	if (r < 0)
		ol_warn("kv: cannot read the host's topology (%s): every loop accepts",
			strerror(-r));
	if (t && ol_topo_addr_ifname(host, ifn, sizeof(ifn)) == 0)
		node = ol_topo_netdev_node(t, ifn);
	unsigned k = n;
	if (t)
		k = ol_topo_accept_loops(t, cpus, n, node, accept);
	else
		for (unsigned i = 0; i < n; i++)
			accept[i] = true;
	if (cpus[0] >= 0)
		ol_info("kv: %u loops pinned to CPUs (pin_threads = \"auto\"); %s", n,
			k < n ? "TCP accepts on the loops of the NIC's NUMA node"
			      : "every loop accepts");
	if (k < n)
		ol_info("kv: %s is on %s, NUMA node %d: %u of %u loops accept its connections",
			addr, ifn, node, k, n);
	ol_topo_free(t);
}

int
kvl_start(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr)
{
	int cpus[KVL_MAX_LOOPS];
	bool accept[KVL_MAX_LOOPS];
	unsigned n = loop_cpus(cfg, cpus);
	loop_accepts(cpus, n, addr, accept);
	int r = help_start(s);
	s->loops = ol_xcalloc(n, sizeof(*s->loops));
	for (unsigned i = 0; r == 0 && i < n; i++) {
		struct kvloop *lp = &s->loops[i];
		char name[16];
		lp->s = s;
		lp->idx = i;
		lp->cpu = cpus[i];
		lp->afd[0] = accept[i] ? s->lfd : -1;
		lp->afd[1] = s->ufd;
		if ((r = ol_loop_new_on(0, cpus[i], &lp->l)) < 0)
			break;
		lp->begin.fn = on_begin;
		lp->begin.arg = lp;
		snprintf(name, sizeof(name), "kv-loop-%u", i);
		if ((r = ol_loop_post(lp->l, &lp->begin)) == 0 &&
		    (r = ol_loop_start(lp->l, name)) == 0) {
			s->n_loops++;
			continue;
		}
		ol_loop_free(lp->l);
		lp->l = NULL;
	}
	if (r < 0) {
		ol_err("kv: cannot start the KV loops: %s", strerror(-r));
		kvl_stop(s);
		return r;
	}
	atomic_store_explicit(&s->loops_up, s->n_loops, memory_order_release);
	return r;
}

unsigned
ol_kv_server_loops(const struct ol_kv_server *s, struct ol_kv_loop_info *out, unsigned cap)
{
	for (unsigned i = 0; i < s->n_loops && i < cap; i++) {
		snprintf(out[i].name, sizeof(out[i].name), "kv-loop-%u", i);
		out[i].cpu = s->loops[i].cpu;
		out[i].accepts_tcp = s->loops[i].afd[0] >= 0;
	}
	return s->n_loops;
}

void
kvl_metrics_render(struct ol_strbuf *b, struct ol_kv_server *s)
{
	unsigned n = atomic_load_explicit(&s->loops_up, memory_order_acquire);
	ol_strbuf_printf(b, "# HELP openlake_kv_loop_connections KV connections (TCP and Unix) "
			    "each loop serves.\n# TYPE openlake_kv_loop_connections gauge\n");
	for (unsigned i = 0; i < n; i++)
		ol_strbuf_printf(b, "openlake_kv_loop_connections{loop=\"kv-loop-%u\"} %u\n", i,
				 atomic_load_explicit(&s->loops[i].nconn, memory_order_relaxed));
}

/* Loops first (no new job reaches the helpers), then the helpers (a job in hand finishes
 * and posts its result to its loop, whose eventfd must still be open: ThreadSanitizer saw
 * a helper write to it while the loop was being freed), then the loops' memory. */
void
kvl_stop(struct ol_kv_server *s)
{
	atomic_store(&s->loops_up, 0);
	for (unsigned i = 0; i < s->n_loops; i++)
		ol_loop_stop(s->loops[i].l);
	help_stop(s);
	for (unsigned i = 0; i < s->n_loops; i++)
		ol_loop_free(s->loops[i].l);
	free(s->loops);
	s->loops = NULL;
	s->n_loops = 0;
}
