/* client/ops.c - one sub-batch of one node: TCP and shared-memory data paths. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "client_int.h"
#include "kv/barrier.h"
#include "kv/net.h"

struct batch {
	uint8_t *ents;	   /* request entries */
	uint8_t *reps;	   /* reply entries */
	struct iovec *iov; /* [0] = header */
	size_t *idx;	   /* frame entry -> ops index */
	int niov;
};

/* Room for n ops' entries (and their values' iovs when with_values) plus extra entries. */
static int
batch_init_ex(struct batch *b, struct ol_kv_op **ops, size_t n, bool with_values, size_t extra)
{
	size_t niov = 2 + n + extra;
	if (with_values)
		for (size_t i = 0; i < n; i++)
			niov += ops[i]->iovcnt;
	n += extra;
	b->ents = malloc(n * OL_KVP_REQ_ENT + 1);
	b->reps = malloc(n * OL_KVP_REP_ENT + 1);
	b->iov = malloc(niov * sizeof(*b->iov));
	b->idx = malloc(n * sizeof(*b->idx) + 1);
	b->niov = 1;
	if (!b->ents || !b->reps || !b->iov || !b->idx) {
		free(b->ents);
		free(b->reps);
		free(b->iov);
		free(b->idx);
		return -ENOMEM;
	}
	b->iov[0].iov_base = NULL;
	b->iov[0].iov_len = 0;
	return 0;
}

static int
batch_init(struct batch *b, struct ol_kv_op **ops, size_t n, bool with_values)
{
	return batch_init_ex(b, ops, n, with_values, 0);
}

static void
batch_fini(struct batch *b)
{
	free(b->ents);
	free(b->reps);
	free(b->iov);
	free(b->idx);
}

/* Append request entry number j. */
static void
batch_ent(struct batch *b, size_t j, const uint8_t *key, uint64_t len, uint64_t off, uint64_t seq)
{
	struct ol_kvp_req_ent e;
	memcpy(e.key, key, OL_KVP_KEY);
	e.len = len;
	e.off = off;
	e.seq = seq;
	uint8_t *p = b->ents + j * OL_KVP_REQ_ENT;
	ol_kvp_req_ent_encode(p, &e);
	b->iov[b->niov].iov_base = p;
	b->iov[b->niov++].iov_len = OL_KVP_REQ_ENT;
}

/* Send the frame built in b (m entries) and read m reply entries into b->reps. */
static int
batch_call(struct ol_client *c, struct olc_conn *cn, struct batch *b, uint8_t op, size_t m,
	   uint64_t body_len)
{
	struct ol_kvp_hdr h = {.op = op, .count = (uint32_t)m, .body_len = body_len}, rp;
	b->iov[0].iov_base = NULL; /* reserved for the header */
	b->iov[0].iov_len = 0;
	int r = olc_send(c, cn, &h, b->iov, b->niov);
	if (r < 0 || (r = olc_recv_hdr_ex(cn, &h, &rp, b->reps, m * OL_KVP_REP_ENT)) < 0)
		return r;
	return rp.count != m || rp.body_len != m * OL_KVP_REP_ENT ? -EPROTO : 0;
}

static void
rep_at(const struct batch *b, size_t j, struct ol_kvp_rep_ent *re)
{
	ol_kvp_rep_ent_decode(b->reps + j * OL_KVP_REP_ENT, re);
}

static int32_t
status_ok(int32_t st)
{
	return st >= 0 && st < OL_KV_STATUS_COUNT ? st : OL_KV_ERROR;
}

/* Read len value bytes into op's iovs (len <= their total). */
static int
read_value(struct olc_conn *cn, struct ol_kv_op *op, uint64_t len)
{
	struct iovec stackv[16], *v = op->iovcnt <= 16 ? stackv : malloc(op->iovcnt * sizeof(*v));
	if (!v)
		return -ENOMEM;
	int nv = 0;
	for (size_t k = 0; k < op->iovcnt && len > 0; k++) {
		size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
		v[nv].iov_base = op->iov[k].base;
		v[nv++].iov_len = l;
		len -= l;
	}
	int r = kvnet_sreadv_full(cn->fd, cn->ssl, v, nv);
	if (v != stackv)
		free(v);
	return r;
}

/* ---- TCP: a call is sent, then (after other nodes' calls were sent too) received ---- */

static int
tcp_build(struct olc_conn *cn, struct olc_call *call, struct batch *b, uint64_t *body)
{
	*body = 0;
	call->m = 0;
	for (size_t i = 0; i < call->n; i++) {
		struct ol_kv_op *op = call->ops[i];
		uint64_t len = olc_iov_len(op);
		if (call->op == OL_KVP_PUT && len > cn->max_block) {
			op->status = OL_KV_TOO_LARGE;
			continue;
		}
		if (call->op == OL_KVP_LEASE) {
			if (!cn->has_lease) { /* an older server: it would close on the op */
				op->status = OL_KV_ERROR;
				continue;
			}
			len = op->value_len; /* ol_kv_lease put the ttl there */
		}
		batch_ent(b, call->m, op->key, len, 0, 0);
		*body += OL_KVP_REQ_ENT;
		if (call->op == OL_KVP_PUT) {
			for (size_t k = 0; k < op->iovcnt; k++) {
				b->iov[b->niov].iov_base = op->iov[k].base;
				b->iov[b->niov++].iov_len = op->iov[k].len;
			}
			*body += len;
		}
		b->idx[call->m++] = i;
	}
	return 0;
}

int
olc_tcp_send(struct ol_client *c, struct olc_conn *cn, struct olc_call *call)
{
	struct batch *b = malloc(sizeof(*b));
	uint64_t body;
	if (!b || batch_init(b, call->ops, call->n, call->op == OL_KVP_PUT) < 0) {
		free(b);
		call->priv = NULL;
		return -ENOMEM;
	}
	call->priv = b;
	tcp_build(cn, call, b, &body);
	if (call->m == 0)
		return 0;
	memset(&call->h, 0, sizeof(call->h));
	call->h.op = call->op;
	call->h.count = (uint32_t)call->m;
	call->h.body_len = body;
	if (cn->ucx)
		return olc_ucx_send_call(c, cn, call, b->ents, b->idx);
	b->iov[0].iov_base = NULL; /* reserved for the header */
	b->iov[0].iov_len = 0;
	return olc_send(c, cn, &call->h, b->iov, b->niov);
}

/* GET reply entries; the first one was read with the header into first. */
static int
recv_stream(struct olc_conn *cn, struct olc_call *call, const uint8_t *first)
{
	for (size_t i = 0; i < call->m; i++) {
		uint8_t rb[OL_KVP_REP_ENT];
		struct ol_kvp_rep_ent re;
		struct ol_kv_op *op = call->ops[i];
		int r = i == 0 ? 0 : kvnet_sread_full(cn->fd, cn->ssl, rb, sizeof(rb));
		if (r < 0)
			return r;
		if (i == 0)
			memcpy(rb, first, sizeof(rb));
		ol_kvp_rep_ent_decode(rb, &re);
		op->status = status_ok(re.status);
		op->value_len = re.len;
		if (re.status != OL_KV_OK)
			continue;
		if (re.len > olc_iov_len(op))
			return -EPROTO;
		r = call->hx ? olc_hash_read(call->hx, cn, op, re.len) : read_value(cn, op, re.len);
		if (r < 0)
			return r;
	}
	return 0;
}

int
olc_tcp_recv(struct ol_client *c, struct olc_conn *cn, struct olc_call *call)
{
	struct batch *b = call->priv;
	struct ol_kvp_hdr rp;
	if (call->m == 0)
		return 0;
	bool short_wait = call->hdr_timeout_ms && call->hdr_timeout_ms < c->timeout_ms;
	bool get = call->op == OL_KVP_GET;
	if (cn->ucx && get)
		return olc_ucx_recv_get(c, cn, call);
	if (short_wait && !cn->ucx)
		kvnet_set_timeout(cn->fd, call->hdr_timeout_ms);
	/* the reply header and what always follows it (all reply entries, or a GET's first
	 * one) in one read */
	int r = cn->ucx ? olc_ucx_recv_hdr_ex(cn, &call->h, &rp, b->reps, call->m * OL_KVP_REP_ENT,
					      short_wait ? call->hdr_timeout_ms : 0)
			: olc_recv_hdr_ex(cn, &call->h, &rp, b->reps,
					  (get ? 1 : call->m) * OL_KVP_REP_ENT);
	if (short_wait && !cn->ucx)
		kvnet_set_timeout(cn->fd, c->timeout_ms);
	if (r < 0)
		return r;
	if (rp.count != call->m)
		return -EPROTO;
	struct ol_kvp_rep_ent first;
	rep_at(b, 0, &first);
	olc_view_saw_tag(c, first.rsv); /* the view the node serves changed: refresh ours */
	if (get)
		return recv_stream(cn, call, b->reps);
	if (rp.body_len != call->m * OL_KVP_REP_ENT)
		return -EPROTO;
	for (size_t j = 0; j < call->m; j++) {
		struct ol_kvp_rep_ent re;
		struct ol_kv_op *op = call->ops[b->idx[j]];
		rep_at(b, j, &re);
		op->status = status_ok(re.status);
		if (call->op != OL_KVP_PUT)
			op->value_len = re.status == OL_KV_OK ? re.len : 0;
	}
	return 0;
}

void
olc_call_fini(struct olc_call *call)
{
	if (call->priv) {
		batch_fini(call->priv);
		free(call->priv);
		call->priv = NULL;
	}
}

/* ---- shared memory ---- */

static bool
slot_ok(const struct olc_map *m, uint64_t off, uint64_t len)
{
	return off >= m->unit && off % m->unit == 0 && off < m->size && len <= m->size - off;
}

/* Values from this size on are copied into their slot with non-temporal stores: the slot is
 * cold (a tier far larger than the caches), and the client does not read it again; plain
 * stores would first read each line of it (read for ownership). */
#define OLC_NT_MIN (256u << 10)

#if defined(__x86_64__)
static void
copy_nt(uint8_t *dst, const uint8_t *src, size_t len)
{
	size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
	if (head > len)
		head = len;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	len -= head;
	for (; len >= 64; dst += 64, src += 64, len -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
	memcpy(dst, src, len);
}
#define copy_fence() _mm_sfence()
#else
#define copy_nt(d, s, n) memcpy(d, s, n)
#define copy_fence()	 ((void)0)
#endif

/* Copy op's value into its slot (nt: pieces from OLC_NT_MIN on with non-temporal stores). The
 * caller runs copy_fence() before it commits the slot, so that the server sees the bytes. */
static void
copy_in(uint8_t *dst, const struct ol_kv_op *op, bool nt)
{
	for (size_t k = 0; k < op->iovcnt; k++) {
		if (nt && op->iov[k].len >= OLC_NT_MIN)
			copy_nt(dst, op->iov[k].base, op->iov[k].len);
		else
			memcpy(dst, op->iov[k].base, op->iov[k].len);
		dst += op->iov[k].len;
	}
}

static void
copy_out(struct ol_kv_op *op, const uint8_t *src, uint64_t len)
{
	for (size_t k = 0; k < op->iovcnt && len > 0; k++) {
		size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
		memcpy(op->iov[k].base, src, l);
		src += l;
		len -= l;
	}
}

static uint64_t
slot_seq(const struct olc_map *m, uint64_t off)
{
	ol_fence_load(); /* the copy is done before we look at the sequence again */
	const _Atomic uint64_t *t = (const _Atomic uint64_t *)(m->base + m->seq_off);
	return atomic_load_explicit(&t[off / m->unit], memory_order_acquire);
}

/* ALLOC slots for the first m entries of b (ops[b->idx[j]]); the granted ones are copied in
 * and appended to b as COMMIT entries from *k on (b->idx: their ops). */
static int
shm_alloc_copy(struct ol_client *c, struct olc_conn *cn, struct batch *b, struct ol_kv_op **ops,
	       size_t m, size_t *k)
{
	int r = m ? batch_call(c, cn, b, OL_KVP_ALLOC, m, m * OL_KVP_REQ_ENT) : 0;
	b->niov = 1 + *k;
	/* each reply entry is read where it is used: the COMMIT entries go to b->ents, the
	 * replies stay in b->reps */
	for (size_t j = 0; r == 0 && j < m; j++) {
		struct ol_kv_op *op = ops[b->idx[j]];
		struct ol_kvp_rep_ent g;
		rep_at(b, j, &g);
		op->status = status_ok(g.status);
		if (g.status != OL_KV_OK)
			continue;
		if (!slot_ok(cn->map, g.off, g.len)) {
			r = -EPROTO;
			break;
		}
		olc_map_prefault(cn->map, g.off, g.len);
		copy_in(cn->map->base + g.off, op, !c->no_nt);
		batch_ent(b, *k, op->key, g.len, g.off, g.seq);
		b->idx[(*k)++] = b->idx[j];
	}
	return r;
}

/* The held reservation for a value of len bytes (exactly: a slot of another size would waste
 * the tier or not fit), taken out of cn's set; -1 = none. */
static int
ahead_take(struct olc_conn *cn, uint64_t len, uint64_t now, struct olc_ahead *out)
{
	for (unsigned a = 0; a < cn->n_ahead; a++) {
		if (cn->ahead[a].len != len || cn->ahead[a].until_ms <= now)
			continue;
		*out = cn->ahead[a];
		cn->ahead[a] = cn->ahead[--cn->n_ahead];
		return 0;
	}
	return -1;
}

/* Whether one of the n ops has a value of len bytes. */
static bool
some_len(struct ol_kv_op **ops, size_t n, uint64_t len)
{
	for (size_t i = 0; i < n; i++)
		if (olc_iov_len(ops[i]) == len)
			return true;
	return false;
}

/* Release (no reply) the held reservations past their time, and those of a size none of this
 * call's values has (sizes change: a slot held for a size no longer put is tier taken out of
 * everyone's use until the node's TTL). The node handles it before this connection's next
 * request. */
static int
ahead_drop(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n, uint64_t now)
{
	uint8_t ents[OLC_AHEAD_MAX * OL_KVP_REQ_ENT];
	static const uint8_t nokey[OL_KVP_KEY];
	unsigned k = 0;
	for (unsigned a = 0; a < cn->n_ahead;) {
		if (cn->ahead[a].until_ms > now && some_len(ops, n, cn->ahead[a].len)) {
			a++;
			continue;
		}
		struct ol_kvp_req_ent e = {.off = cn->ahead[a].off, .seq = cn->ahead[a].seq};
		memcpy(e.key, nokey, OL_KVP_KEY);
		ol_kvp_req_ent_encode(ents + k++ * OL_KVP_REQ_ENT, &e);
		cn->ahead[a] = cn->ahead[--cn->n_ahead];
	}
	if (k == 0)
		return 0;
	struct ol_kvp_hdr h = {.op = OL_KVP_RELEASE,
			       .flags = OL_KVP_F_NOREPLY,
			       .count = k,
			       .body_len = (uint64_t)k * OL_KVP_REQ_ENT};
	struct iovec v[2] = {{NULL, 0}, {ents, (size_t)k * OL_KVP_REQ_ENT}};
	return olc_send(c, cn, &h, v, 2);
}

/* COMMIT_ALLOC: the k commits in b, and reservations for the next call, in one round trip:
 * one per committed value whose size repeats (the size of the last value this connection put
 * before this call: values of one size are the steady state worth a held slot; a size seen
 * once is not), up to OLC_AHEAD_MAX held. */
static int
shm_commit_ahead(struct ol_client *c, struct olc_conn *cn, struct batch *b, struct ol_kv_op **ops,
		 size_t k)
{
	static const uint8_t nokey[OL_KVP_KEY];
	size_t want = 0;
	uint64_t lens[OLC_AHEAD_MAX];
	/* a frame holds at most max_batch entries (more closes the connection) */
	for (size_t j = 0; j < k && cn->n_ahead + want < OLC_AHEAD_MAX && k + want < cn->max_batch;
	     j++) {
		uint64_t len = olc_iov_len(ops[b->idx[j]]);
		if (len != cn->last_len)
			continue;
		lens[want] = len;
		batch_ent(b, k + want, nokey, len, 0, 0);
		want++;
	}
	cn->last_len = olc_iov_len(ops[b->idx[k - 1]]);
	uint64_t t0 = olc_now_ms();
	int r = batch_call(c, cn, b, OL_KVP_COMMIT_ALLOC, k + want, (k + want) * OL_KVP_REQ_ENT);
	for (size_t j = 0; r == 0 && j < k + want; j++) {
		struct ol_kvp_rep_ent re;
		rep_at(b, j, &re);
		if (j < k) {
			ops[b->idx[j]]->status = status_ok(re.status);
			continue;
		}
		if (re.status != OL_KV_OK)
			continue;
		if (!slot_ok(cn->map, re.off, lens[j - k]))
			return -EPROTO;
		cn->ahead[cn->n_ahead++] =
		    (struct olc_ahead){re.off, re.seq, lens[j - k], t0 + re.len / 2};
	}
	return r;
}

/* A put over shared memory with a node that answers COMMIT_ALLOC: values whose length matches a
 * held reservation are copied straight into it; the others ALLOC first (the first put of a
 * connection, a new size); then one COMMIT_ALLOC commits them all and reserves for the next
 * call. In steady state (values of one size) a put is one round trip instead of two. */
static int
shm_put_ahead(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n)
{
	struct batch b;
	size_t m = 0, k = 0;
	if (batch_init_ex(&b, ops, n, false, OLC_AHEAD_MAX) < 0)
		return -ENOMEM;
	uint64_t now = olc_now_ms();
	/* a connection holds at most OLC_AHEAD_MAX slots: so many puts of a call can use one */
	struct olc_ahead held[OLC_AHEAD_MAX];
	size_t use[OLC_AHEAD_MAX];
	int r = ahead_drop(c, cn, ops, n, now);
	size_t nh = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		uint64_t len = olc_iov_len(ops[i]);
		if (len > cn->max_block)
			ops[i]->status = OL_KV_TOO_LARGE;
		else if (nh < OLC_AHEAD_MAX && ahead_take(cn, len, now, &held[nh]) == 0)
			use[nh++] = i;
		else {
			batch_ent(&b, m, ops[i]->key, len, 0, 0);
			b.idx[m++] = i;
		}
	}
	if (r == 0)
		r = shm_alloc_copy(c, cn, &b, ops, m, &k);
	for (size_t j = 0; r == 0 && j < nh; j++) {
		struct ol_kv_op *op = ops[use[j]];
		olc_map_prefault(cn->map, held[j].off, held[j].len);
		copy_in(cn->map->base + held[j].off, op, !c->no_nt);
		batch_ent(&b, k, op->key, held[j].len, held[j].off, held[j].seq);
		b.idx[k++] = use[j];
	}
	copy_fence();
	if (r == 0 && k)
		r = shm_commit_ahead(c, cn, &b, ops, k);
	batch_fini(&b);
	return r;
}

int
olc_shm_put(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n)
{
	struct batch b;
	size_t m = 0, k = 0;
	if (cn->has_calloc)
		return shm_put_ahead(c, cn, ops, n);
	if (batch_init(&b, ops, n, false) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t len = olc_iov_len(ops[i]);
		if (len > cn->max_block) {
			ops[i]->status = OL_KV_TOO_LARGE;
			continue;
		}
		batch_ent(&b, m, ops[i]->key, len, 0, 0);
		b.idx[m++] = i;
	}
	int r = shm_alloc_copy(c, cn, &b, ops, m, &k);
	copy_fence();
	if (r == 0 && k)
		r = batch_call(c, cn, &b, OL_KVP_COMMIT, k, k * OL_KVP_REQ_ENT);
	for (size_t j = 0; r == 0 && j < k; j++) {
		struct ol_kvp_rep_ent re;
		rep_at(&b, j, &re);
		ops[b.idx[j]]->status = status_ok(re.status);
	}
	batch_fini(&b);
	return r;
}

/* Copy the looked-up slots out, check their sequence after the copy, release the pins
 * (no reply: the server handles it before our next request). */
static int
shm_copy_release(struct ol_client *c, struct olc_conn *cn, struct batch *b, struct ol_kv_op **ops,
		 size_t n, const struct olc_hash *hx)
{
	size_t k = 0;
	struct ol_kvp_rep_ent *res = malloc(n * sizeof(*res) + 1);
	if (!res)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		rep_at(b, i, &res[i]);
	b->niov = 1;
	for (size_t i = 0; i < n; i++) {
		struct ol_kvp_rep_ent *re = &res[i];
		ops[i]->status = status_ok(re->status);
		ops[i]->value_len = re->status == OL_KV_OK ? re->len : 0;
		if (re->status != OL_KV_OK)
			continue;
		batch_ent(b, k++, ops[i]->key, 0, re->off, re->seq);
		if (!slot_ok(cn->map, re->off, re->len)) {
			ops[i]->status = OL_KV_ERROR;
		} else if (re->len > olc_iov_len(ops[i])) {
			ops[i]->status = OL_KV_TRUNCATED;
		} else {
			olc_map_prefault(cn->map, re->off, re->len);
			if (hx)
				olc_hash_copy(hx, ops[i], cn->map->base + re->off, re->len);
			else
				copy_out(ops[i], cn->map->base + re->off, re->len);
			if (slot_seq(cn->map, re->off) != re->seq)
				ops[i]->status =
				    OL_KV_MISS; /* recycled under us: never torn data */
		}
	}
	free(res);
	if (k == 0)
		return 0;
	struct ol_kvp_hdr h = {.op = OL_KVP_RELEASE,
			       .flags = OL_KVP_F_NOREPLY,
			       .count = (uint32_t)k,
			       .body_len = k * OL_KVP_REQ_ENT};
	b->iov[0].iov_base = NULL;
	b->iov[0].iov_len = 0;
	return olc_send(c, cn, &h, b->iov, b->niov);
}

int
olc_shm_get(struct ol_client *c, struct olc_conn *cn, struct ol_kv_op **ops, size_t n,
	    const struct olc_hash *hx)
{
	struct batch b;
	if (batch_init(&b, ops, n, false) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		batch_ent(&b, i, ops[i]->key, olc_iov_len(ops[i]), 0, 0);
	int r = batch_call(c, cn, &b, OL_KVP_LOOKUP, n, n * OL_KVP_REQ_ENT);
	if (r == 0)
		r = shm_copy_release(c, cn, &b, ops, n, hx);
	batch_fini(&b);
	return r;
}
