/* node/server.c - the node plane server: listeners, connections, frames, HELLO, credit
 * (node.h). Each loop owns its listener and its connections; nothing is shared between loops
 * but the read-only server config and the relaxed counters. */
#include "node/node_int.h"
#include "node/ucx_int.h"

#include "base/driveid.h"
#include "base/log.h"
#include "base/metrics.h"
#include "io/io.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct nloop {
	struct ol_node_server *s;
	struct ol_loop *l;
	int lfd;
	struct ol_loop_op aop;
	struct ol_loop_msg start, shut;
	struct nconn *conns;
	struct ol_node_ucx_srv *ux; /* plane_transport = "ucx": the worker this loop progresses */
	struct ol_loop_msg flush;   /* stop: send what is queued first (flush_loops) */
	struct ol_loop_timer flush_t;
	uint64_t flush_end;
	bool stopping;
};

#define on_recv ol_node_on_recv
#define on_sent ol_node_on_sent

static void
stat_max(atomic_uint_fast64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static void
conn_free(struct nconn *c)
{
	ol_loop_timer_cancel(c->loop, &c->hello_timer);
	ol_node_ops_fini(c);
	ol_node_ucx_conn_fini(c);
	for (struct obuf *o = c->oq_head, *n; o; o = n) {
		n = o->next;
		free(o);
	}
	if (c->fd >= 0)
		close(c->fd);
	struct nloop *nl = c->nl;
	if (c->prev)
		c->prev->next = c->next;
	else
		nl->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->in);
	ol_node_mac_free(c->tx);
	ol_node_mac_free(c->rx);
	free(c);
}

void
ol_node_release(struct nconn *c)
{
	if (c->dead && !c->depth && !c->rpending && !c->wpending && !c->fpending && !c->xpending &&
	    !c->cpending)
		conn_free(c);
}

void
ol_node_kill(struct nconn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	if (c->ux)
		ol_node_ucx_shut(c); /* forced close: pending receives and sends complete */
	else
		shutdown(c->fd, SHUT_RDWR); /* a pending recv or send completes now */
	ol_node_release(c);
}

static void
kick_send(struct nconn *c)
{
	if (c->wpending || !c->oq_head || c->dead)
		return;
	c->wop.cb = on_sent;
	c->wop.arg = c;
	if (c->ux ? ol_node_ucx_send(c, c->oq_head->data, c->oq_head->len)
		  : ol_loop_send_all(c->nl->l, &c->wop, c->fd, c->oq_head->data, c->oq_head->len)) {
		ol_node_kill(c);
		return;
	}
	c->wpending = true;
}

void
on_sent(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	struct nconn *c = arg;
	c->wpending = false;
	c->depth++;
	if (res < 0 || c->dead) {
		ol_node_kill(c);
		goto out;
	}
	struct obuf *o = c->oq_head;
	c->oq_head = o->next;
	if (!c->oq_head)
		c->oq_tail = NULL;
	c->oq_n--;
	free(o);
	if (c->closing && !c->oq_head) {
		if (c->ux)
			ol_node_ucx_linger(c, 2000);
		else
			ol_node_kill(c);
		goto out;
	}
	ol_node_read_pump(c);
	kick_send(c);
out:
	c->depth--;
	ol_node_release(c);
}

uint8_t *
ol_node_out_begin(struct nconn *c, size_t cap)
{
	struct obuf *o = ol_xmalloc(sizeof(*o) + OL_NODE_HDR + cap + OL_NODE_MAC);
	o->next = NULL;
	o->len = cap;
	if (c->oq_tail)
		c->oq_tail->next = o;
	else
		c->oq_head = o;
	c->oq_tail = o;
	c->oq_n++;
	return o->data + OL_NODE_HDR;
}

static void
seal(struct nconn *c, struct obuf *o, struct ol_node_hdr *h, bool auth)
{
	bool enc = auth && c->enc;
	if (enc)
		h->flags |= OL_NODE_F_ENC;
	ol_node_hdr_encode(h, o->data);
	uint8_t *mac = o->data + OL_NODE_HDR + h->len;
	struct iovec iov = {o->data + OL_NODE_HDR, h->len};
	if (!auth)
		memset(mac, 0, OL_NODE_MAC);
	else if (enc ? ol_node_mac_seal_enc(c->tx, o->data, &iov, 1, iov.iov_base, mac)
		     : ol_node_mac_seal(c->tx, o->data, &iov, 1, mac))
		ol_die("node plane: frame MAC failed (OpenSSL)");
	o->len = OL_NODE_HDR + h->len + OL_NODE_MAC;
}

void
ol_node_out_end(struct nconn *c, uint8_t op, uint64_t call_id, uint16_t flags, int status,
		size_t len)
{
	struct ol_node_hdr h = {.op = op,
				.flags = (uint16_t)(flags | OL_NODE_F_REPLY),
				.call_id = call_id,
				.seq = c->wseq++,
				.status = status,
				.credit = (uint32_t)c->grant,
				.len = (uint32_t)len};
	c->held -= c->grant;
	c->grant = 0;
	seal(c, c->oq_tail, &h, c->authed);
	kick_send(c);
}

void
ol_node_reply(struct nconn *c, const struct ol_node_hdr *req, uint16_t flags, int status,
	      const void *payload, size_t len)
{
	uint8_t *p = ol_node_out_begin(c, len);
	if (len)
		memcpy(p, payload, len);
	ol_node_out_end(c, req->op, req->call_id, flags, status, len);
}

static int
hello(struct nconn *c, const struct ol_node_hdr *h, uint8_t *frame)
{
	struct ol_node_server *s = c->s;
	struct ol_node_rd r = {frame + OL_NODE_HDR, h->len, false};
	const uint8_t *cnonce = ol_node_getbytes(&r, OL_NODE_NONCE);
	uint8_t zero[OL_NODE_NONCE] = {0}, snonce[OL_NODE_NONCE], key[OL_NODE_KEY];
	bool enc = (h->flags & OL_NODE_F_ENC) != 0; /* the client encrypts: its node id is */
	if (h->op != OL_NODE_HELLO || h->seq != 0 || r.err)
		return -EPROTO;
	if (ol_node_kdf(s->secret, cnonce, zero, key) || ol_node_mac_key(c->rx, key, OL_NODE_C2S) ||
	    (enc ? ol_node_mac_open(c->rx, frame, h) : ol_node_mac_check(c->rx, frame, h))) {
		char who[32] = "";
		if (!enc && h->len >= OL_NODE_NONCE + 4)
			snprintf(who, sizeof(who), " (node %u)", ol_node_get32(&r));
		atomic_fetch_add_explicit(&s->auth_failures, 1, memory_order_relaxed);
		ol_warn("node plane: HELLO from %s%s failed authentication: its [cluster] "
			"secret differs from ours; connection refused",
			c->peer, who);
		ol_node_reply(c, h, 0, -EACCES, NULL, 0); /* not authenticated: no shared key */
		c->closing = true;
		return 0;
	}
	unsigned peer_id = ol_node_get32(&r);
	if (r.err)
		return -EPROTO;
	int rc = RAND_bytes(snonce, sizeof(snonce)) != 1 ||
			 ol_node_kdf(s->secret, cnonce, snonce, key) ||
			 ol_node_mac_key(c->tx, key, OL_NODE_S2C) ||
			 ol_node_mac_key(c->rx, key, OL_NODE_C2S)
		     ? -EIO
		     : 0;
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	c->authed = true;
	c->enc = enc; /* the reply is encrypted as the HELLO was: the client can open it */
	c->rseq = 1;
	ol_loop_timer_cancel(c->loop, &c->hello_timer);
	size_t cap = 64 + s->n_drives * (OL_NODE_NAME_MAX + 8 + OL_DRIVEID_UUID);
	struct ol_node_wr w = {ol_node_out_begin(c, cap), 0, cap, false};
	ol_node_putbytes(&w, snonce, sizeof(snonce));
	ol_node_put32(&w, s->self_id);
	ol_node_put32(&w, s->window);
	ol_node_put32(&w, s->max_payload);
	ol_node_put16(&w, (uint16_t)s->n_drives);
	for (unsigned i = 0; i < s->n_drives; i++) {
		struct ol_driveid id;

		ol_node_putstr(&w, s->drives[i]);
		/* its identity record's drive UUID ("" when it has none yet) */
		ol_node_putstr(
		    &w, ol_driveid_read(s->drives[i], &id) == 0 && id.version == 2 ? id.drive : "");
	}
	ol_node_out_end(c, OL_NODE_HELLO, h->call_id, 0, 0, w.n);
	c->enc |= ol_node_encrypting();
	ol_debug("node plane: node %u at %s authenticated", peer_id, c->peer);
	return 0;
}

/* One whole frame at c->in: authenticate, account, dispatch. 0, or -1 when the connection
 * was cut off. */
static int
one_frame(struct nconn *c, const struct ol_node_hdr *h, uint8_t *frame, size_t n)
{
	struct ol_node_server *s = c->s;
	atomic_fetch_add_explicit(&s->frames, 1, memory_order_relaxed);
	if (!c->authed) {
		int rc = hello(c, h, frame);
		c->held -= n; /* the HELLO is not charged to the window: the peer knows none yet */
		if (rc) {
			atomic_fetch_add_explicit(&s->protocol_errors, 1, memory_order_relaxed);
			ol_warn("node plane: %s sent no valid HELLO (%s); connection closed",
				c->peer, strerror(-rc));
			ol_node_kill(c);
			return -1;
		}
		return 0;
	}
	int orc = h->seq != c->rseq || (h->flags & OL_NODE_F_REPLY)
		      ? -EBADMSG
		      : ol_node_frame_open(c->rx, frame, h);
	if (orc == -EPERM) {
		atomic_fetch_add_explicit(&s->protocol_errors, 1, memory_order_relaxed);
		ol_warn("node plane: %s sends unencrypted frames while [cluster] plane_encrypt = "
			"true here: set the same plane_encrypt on every node; connection closed",
			c->peer);
		ol_node_kill(c);
		return -1;
	}
	if (orc) {
		atomic_fetch_add_explicit(&s->auth_failures, 1, memory_order_relaxed);
		ol_warn("node plane: frame from %s failed its MAC or sequence (seq %llu, expected "
			"%llu); connection closed",
			c->peer, (unsigned long long)h->seq, (unsigned long long)c->rseq);
		ol_node_kill(c);
		return -1;
	}
	c->rseq++;
	c->enc |= (h->flags & OL_NODE_F_ENC) != 0;
	/* served synchronously below (a chunk is in the file when dispatch returns), so the
	 * frame's bytes go back with the answer it may send: one frame per small call, not two */
	c->grant += n;
	int rc = ol_node_dispatch(c, h, frame + OL_NODE_HDR);
	if (rc == -EPROTO) {
		atomic_fetch_add_explicit(&s->protocol_errors, 1, memory_order_relaxed);
		ol_warn("node plane: %s broke the protocol (op %u, call %llu); connection closed",
			c->peer, h->op, (unsigned long long)h->call_id);
		ol_node_kill(c);
		return -1;
	}
	if (rc)
		ol_node_reply(c, h, 0, rc, NULL, 0);
	return 0;
}

/* Frames this big are read up to their end and no further (post_recv). */
#define BIG_FRAME (64u * 1024)

/* Bytes that are not a frame of ours: logged, the connection closed. */
static void
bad_input(struct nconn *c, ssize_t err, unsigned version)
{
	atomic_fetch_add_explicit(&c->s->protocol_errors, 1, memory_order_relaxed);
	if (err == -EPROTONOSUPPORT)
		ol_warn("node plane: %s speaks node protocol version %u, this node version %u "
			"(run one version on every node of the cluster); connection closed",
			c->peer, version, OL_NODE_VERSION);
	else
		ol_warn("node plane: %s sent %s; connection closed", c->peer,
			err == -EMSGSIZE ? "a frame over plane_max_frame"
					 : "bytes that are not a frame");
	ol_node_kill(c);
}

static void
post_recv(struct nconn *c)
{
	if (c->rpending || c->dead || c->closing || c->paused || c->in_len == c->in_cap)
		return;
	/* a big frame's recv ends where the frame does: the next one then starts at c->in and
	 * nothing is moved after it */
	size_t room = c->in_cap - c->in_len;
	if (c->need > c->in_len && c->need - c->in_len < room)
		room = c->need - c->in_len;
	c->rop.cb = on_recv;
	c->rop.arg = c;
	/* UCX: the rest of a big frame in one completion, not a fragment at a time */
	bool all = c->need > c->in_len && c->need - c->in_len == room;
	if (c->ux ? ol_node_ucx_recv(c, c->in + c->in_len, room, all)
		  : ol_loop_recv(c->nl->l, &c->rop, c->fd, c->in + c->in_len, room)) {
		ol_node_kill(c);
		return;
	}
	c->rpending = true;
}

static void
process_input(struct nconn *c)
{
	size_t used = 0;
	c->in_process = true;
	c->need = 0;
	while (!c->dead && !c->closing && !c->paused) {
		struct ol_node_hdr h = {0};
		ssize_t n =
		    ol_node_frame_parse(c->in + used, c->in_len - used, c->s->max_payload, &h);
		if (n == 0) {
			size_t whole = OL_NODE_HDR + (size_t)h.len + OL_NODE_MAC;
			if (c->in_len - used >= OL_NODE_HDR && whole >= BIG_FRAME)
				c->need = whole; /* h is filled once a header is in */
			break;
		}
		if (n < 0) {
			bad_input(c, n, h.version);
			break;
		}
		if (one_frame(c, &h, c->in + used, (size_t)n))
			break;
		used += (size_t)n;
	}
	c->in_process = false;
	if (c->dead)
		return;
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	if (c->grant && !c->closing) { /* nothing else carried the grant: a CREDIT frame */
		ol_node_out_begin(c, 0);
		ol_node_out_end(c, OL_NODE_CREDIT, 0, 0, 0, 0);
	}
	post_recv(c);
}

void
ol_node_resume(struct nconn *c)
{
	c->paused = false;
	if (!c->in_process) /* else the loop in process_input goes on by itself */
		process_input(c);
}

void
on_recv(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	struct nconn *c = arg;
	c->rpending = false;
	c->depth++;
	if (res <= 0 || c->dead) {
		ol_node_kill(c);
		goto out;
	}
	c->in_len += (size_t)res;
	/* the receiver's count: every byte read and not yet granted back */
	c->held += (uint64_t)res;
	stat_max(&c->s->max_held, c->held);
	if (c->held > c->s->window + (c->authed ? 0 : 65536u)) {
		atomic_fetch_add_explicit(&c->s->window_violations, 1, memory_order_relaxed);
		ol_warn(
		    "node plane: %s sent beyond its credit window (%llu > %u bytes); connection "
		    "closed",
		    c->peer, (unsigned long long)c->held, c->s->window);
		ol_node_kill(c);
		goto out;
	}
	process_input(c);
out:
	c->depth--;
	ol_node_release(c);
}

static void
on_hello_timeout(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct nconn *c = arg;
	if (c->authed || c->dead || c->closing) /* closing: refused, its last frame going out */
		return;
	atomic_fetch_add_explicit(&c->s->hello_timeouts, 1, memory_order_relaxed);
	ol_warn("node plane: %s sent no HELLO within %u ms; connection closed", c->peer,
		c->s->hello_timeout_ms);
	ol_node_kill(c);
}

struct nconn *
ol_node_conn_new(struct nloop *nl, struct ol_loop *l, int fd, const char *peer)
{
	struct nconn *c = ol_xcalloc(1, sizeof(*c));
	c->nl = nl;
	c->loop = l;
	c->s = nl->s;
	c->fd = fd;
	c->wfd = c->rfd = -1;
	c->in_cap = OL_NODE_HDR + nl->s->max_payload + OL_NODE_MAC;
	c->in = ol_xmalloc(c->in_cap);
	if (ol_node_mac_new(&c->tx) || ol_node_mac_new(&c->rx))
		ol_die("node plane: out of memory for a connection's MAC contexts");
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->next = nl->conns;
	if (nl->conns)
		nl->conns->prev = c;
	nl->conns = c;
	atomic_fetch_add_explicit(&nl->s->conns, 1, memory_order_relaxed);
	return c;
}

void
ol_node_conn_start(struct nconn *c)
{
	c->hello_timer.cb = on_hello_timeout;
	c->hello_timer.arg = c;
	ol_loop_timer_arm(c->loop, &c->hello_timer, (uint64_t)c->s->hello_timeout_ms * 1000000u);
	post_recv(c);
}

static void
on_accept(struct ol_loop *l, void *arg, int res)
{
	struct nloop *nl = arg;
	if (res >= 0 && nl->stopping) {
		close(res);
		return;
	}
	if (res < 0) {
		if (!nl->stopping && res != -ECANCELED)
			ol_loop_accept(l, &nl->aop, nl->lfd);
		return;
	}
	char peer[64] = "?";
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getpeername(res, (struct sockaddr *)&ss, &sl) ||
	    ol_io_addr_str((struct sockaddr *)&ss, sl, peer, sizeof(peer)))
		snprintf(peer, sizeof(peer), "?");
	ol_io_set_nodelay(res);
	ol_node_conn_start(ol_node_conn_new(nl, l, res, peer));
	if (!nl->stopping)
		ol_loop_accept(l, &nl->aop, nl->lfd);
}

static void
on_start(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	struct nloop *nl = arg;
	if (nl->ux) {
		ol_node_ucx_srv_start(nl->ux);
		return;
	}
	nl->aop.cb = on_accept;
	nl->aop.arg = nl;
	if (ol_loop_accept(l, &nl->aop, nl->lfd))
		ol_err("node plane: cannot queue an accept");
}

static void
on_shut(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	struct nloop *nl = arg;
	nl->stopping = true;
	if (nl->lfd >= 0)
		ol_loop_cancel(l, &nl->aop);
	for (struct nconn *c = nl->conns; c; c = c->next) {
		/* the loop is freed before the conns: no timer may point into them */
		ol_loop_timer_cancel(l, &c->hello_timer);
		ol_loop_timer_cancel(l, &c->wtimer);
		ol_loop_timer_cancel(l, &c->rtimer);
		if (c->ux)
			ol_node_ucx_quiet(c);
		if (!c->dead) {
			c->dead = true;
			if (c->ux)
				ol_node_ucx_shut(c);
			else
				shutdown(c->fd, SHUT_RDWR);
		}
	}
}

/* At stop, after the COMMIT calls ended: each loop goes on until its live connections sent
 * what they queued (the calls' answers among it), FLUSH_MS at most, then says so. */
#define FLUSH_MS 2000u

static void
flush_check(struct nloop *nl)
{
	bool queued = false;
	for (struct nconn *c = nl->conns; c && !queued; c = c->next)
		queued = !c->dead && (c->oq_head || c->cpending);
	if (queued && ol_loop_now_ns(nl->l) < nl->flush_end &&
	    !ol_loop_timer_arm(nl->l, &nl->flush_t, 1000000u))
		return;
	struct ol_node_server *s = nl->s;
	pthread_mutex_lock(&s->cmu);
	s->c_flushing--;
	pthread_cond_broadcast(&s->ccv);
	pthread_mutex_unlock(&s->cmu);
}

static void
on_flush_timer(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	flush_check(arg);
}

static void
on_flush(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	struct nloop *nl = arg;
	nl->flush_end = ol_loop_now_ns(l) + FLUSH_MS * 1000000ull;
	nl->flush_t = (struct ol_loop_timer){.cb = on_flush_timer, .arg = nl};
	flush_check(nl);
}

static void
flush_loops(struct ol_node_server *s)
{
	pthread_mutex_lock(&s->cmu);
	s->c_flushing = s->n_loops;
	for (unsigned i = 0; i < s->n_loops; i++) {
		s->loops[i].flush = (struct ol_loop_msg){.fn = on_flush, .arg = &s->loops[i]};
		ol_loop_post(s->loops[i].l, &s->loops[i].flush);
	}
	while (s->c_flushing)
		pthread_cond_wait(&s->ccv, &s->cmu);
	pthread_mutex_unlock(&s->cmu);
}

static void
render_metrics(struct ol_strbuf *b, void *arg)
{
	struct ol_node_server_stats st;
	ol_node_server_stats(arg, &st);
	const struct {
		const char *name, *help;
		uint64_t v;
	} c[] = {
	    {"connections_total", "connections accepted", st.conns},
	    {"frames_total", "frames received", st.frames},
	    {"auth_failures_total", "HELLOs or frames that failed their MAC or sequence",
	     st.auth_failures},
	    {"protocol_errors_total", "connections closed for bytes outside the protocol",
	     st.protocol_errors},
	    {"window_violations_total", "connections closed for sending beyond their credit",
	     st.window_violations},
	    {"hello_timeouts_total", "connections closed without a HELLO in time",
	     st.hello_timeouts},
	    {"commits_total", "COMMIT calls handed to the commit threads", st.commits},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		ol_strbuf_printf(
		    b,
		    "# HELP openlake_node_plane_%s Node plane: %s.\n"
		    "# TYPE openlake_node_plane_%s counter\nopenlake_node_plane_%s %llu\n",
		    c[i].name, c[i].help, c[i].name, c[i].name, (unsigned long long)c[i].v);
	ol_strbuf_printf(b,
			 "# HELP openlake_node_plane_max_held_bytes Node plane: most bytes one "
			 "connection held before granting them back (at most the window).\n"
			 "# TYPE openlake_node_plane_max_held_bytes gauge\n"
			 "openlake_node_plane_max_held_bytes %llu\n",
			 (unsigned long long)st.max_held);
	ol_strbuf_printf(b,
			 "# HELP openlake_node_plane_commits_queued Node plane: COMMIT calls "
			 "waiting for a commit thread.\n"
			 "# TYPE openlake_node_plane_commits_queued gauge\n"
			 "openlake_node_plane_commits_queued %llu\n"
			 "# HELP openlake_node_plane_commits_running Node plane: COMMIT calls "
			 "running on the commit threads.\n"
			 "# TYPE openlake_node_plane_commits_running gauge\n"
			 "openlake_node_plane_commits_running %llu\n",
			 (unsigned long long)st.commits_queued,
			 (unsigned long long)st.commits_running);
}

/* nl's loop and its listener: a TCP socket, or UCX's on the loop's worker */
static int
loop_listen(struct nloop *nl, const struct ol_node_server_opts *o)
{
	unsigned port = 0;
	int rc;
	nl->lfd = -1;
	if (o->transport != OL_NODE_UCX) {
		nl->lfd = ol_io_listen(o->addr, true, 0);
		if (nl->lfd < 0)
			return nl->lfd;
		port = ol_io_sock_port(nl->lfd);
	}
	rc = ol_loop_new(0, &nl->l);
	if (!rc && o->transport == OL_NODE_UCX) {
		rc = ol_node_ucx_listen(nl->s, nl, nl->l, o->addr, &nl->ux, &port);
		if (rc)
			ol_loop_free(nl->l);
	}
	if (rc) {
		if (nl->lfd >= 0)
			close(nl->lfd);
		return rc;
	}
	if (o->port && !*o->port)
		*o->port = port;
	return 0;
}

bool
ol_node_ucx_available(void)
{
	return ol_node_ucx_built();
}

int
ol_node_server_start(const struct ol_node_server_opts *o, struct ol_node_server **out)
{
	*out = NULL;
	if (!o->secret[0] || strlen(o->secret) >= 256 || !o->threads ||
	    o->n_drives > OL_NODE_MAX_DRIVES || o->window < o->max_payload + 128 ||
	    o->transport > OL_NODE_UCX)
		return -EINVAL;
	if (o->transport == OL_NODE_UCX && !ol_node_ucx_built())
		return -EPROTONOSUPPORT;
	struct ol_node_server *s = ol_xcalloc(1, sizeof(*s));
	memcpy(s->secret, o->secret, strlen(o->secret) + 1);
	s->self_id = o->self_id;
	s->window = o->window;
	s->max_payload = o->max_payload;
	s->hello_timeout_ms = o->hello_timeout_ms ? o->hello_timeout_ms : 10000;
	s->n_drives = o->n_drives;
	for (unsigned i = 0; i < o->n_drives; i++)
		snprintf(s->drives[i], sizeof(s->drives[i]), "%s", o->drives[i]);
	ol_node_mops_init(s);
	ol_node_commit_init(s);
	int rc = ol_node_ops_open_roots(s);
	s->loops = ol_xcalloc(o->threads, sizeof(*s->loops));
	unsigned threads = o->transport == OL_NODE_UCX ? 1 : o->threads;
	for (unsigned i = 0; !rc && i < threads; i++) {
		struct nloop *nl = &s->loops[i];
		nl->s = s;
		rc = loop_listen(nl, o);
		if (rc)
			break;
		s->n_loops++;
		nl->start = (struct ol_loop_msg){.fn = on_start, .arg = nl};
		ol_loop_post(nl->l, &nl->start);
		rc = ol_loop_start(nl->l, "ol-node");
	}
	if (rc) {
		ol_node_server_stop(s);
		return rc;
	}
	s->metrics = ol_metrics_register(render_metrics, s) == 0;
	*out = s;
	return 0;
}

void
ol_node_server_stop(struct ol_node_server *s)
{
	if (!s)
		return;
	if (s->metrics)
		ol_metrics_unregister(render_metrics, s);
	/* first, while the loops still serve: the COMMIT calls running end, their answers go out
	 * (only a server that served one waits for that: a failed start's loops may not run) */
	if (ol_node_commit_stop(s))
		flush_loops(s);
	for (unsigned i = 0; i < s->n_loops; i++) {
		struct nloop *nl = &s->loops[i];
		nl->shut = (struct ol_loop_msg){.fn = on_shut, .arg = nl};
		ol_loop_post(nl->l, &nl->shut);
		ol_loop_stop(nl->l);
		/* the loop's thread is gone: this one finishes the UCX endpoints' closes */
		ol_node_ucx_srv_stop(nl->ux);
		ol_loop_free(nl->l); /* no callback runs any more: free what is left */
		while (nl->conns) {
			nl->conns->rpending = nl->conns->wpending = nl->conns->fpending = false;
			nl->conns->xpending = false;
			conn_free(nl->conns);
		}
		if (nl->lfd >= 0)
			close(nl->lfd);
	}
	for (unsigned i = 0; i < s->n_drives; i++)
		if (s->root_fd[i] >= 0)
			close(s->root_fd[i]);
	ol_node_mops_fini(s);
	ol_node_commit_fini(s);
	free(s->loops);
	free(s);
}

void
ol_node_server_stats(struct ol_node_server *s, struct ol_node_server_stats *out)
{
	out->conns = atomic_load(&s->conns);
	out->auth_failures = atomic_load(&s->auth_failures);
	out->protocol_errors = atomic_load(&s->protocol_errors);
	out->frames = atomic_load(&s->frames);
	out->window_violations = atomic_load(&s->window_violations);
	out->hello_timeouts = atomic_load(&s->hello_timeouts);
	out->max_held = atomic_load(&s->max_held);
	ol_node_commit_stats(s, out);
}
