/* kv/server.c - the KV protocol server: frames, handlers, limits, start and stop. TCP
 * connections (plaintext, or TLS with [kv_tls]) and Unix ones are served on the per-core loops
 * of serve_loop.c. */
#include "kv/kv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "kv/access.h"
#include "kv/kv_metrics.h"
#include "kv/engine.h"
#include "kv/net.h"
#include "kv/proto.h"
#include "kv/server_int.h"
#include "kv/view.h"
#include "tls/tls.h"
#include "openlake/openlake.h"

/* The largest HELLO body. */
#define OL_KV_HELLO_MAX (OL_KVP_MAX_NS + OL_KVP_MAX_HOST + 16)

/* ---- per-connection pin list ---- */

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Refusals and denials: one log line per second at most, with the count of those muted. */
void
kvs_refuse_log(struct ol_kv_server *s, const char *peer, const char *what)
{
	uint64_t now = now_ms(), last = atomic_load(&s->last_log_ms);
	if (now - last < 1000 || !atomic_compare_exchange_strong(&s->last_log_ms, &last, now)) {
		atomic_fetch_add(&s->quiet, 1);
		return;
	}
	unsigned long long q = atomic_exchange(&s->quiet, 0);
	ol_warn("kv: refusing %s: %s (%llu more refusals not logged)", peer, what, q);
}

/* Whether the connection may hold one more pin (per-connection and total caps). */
static bool
pin_room(struct conn *c)
{
	return c->n_pins < c->s->max_pins_conn && atomic_load(&c->s->n_pins) < c->s->max_pins;
}

static void
pin_add(struct conn *c, uint64_t off, uint64_t seq)
{
	pthread_mutex_lock(&c->pmu);
	if (c->n_pins == c->cap_pins) {
		c->cap_pins = c->cap_pins ? c->cap_pins * 2 : 64;
		c->pins = ol_xrealloc(c->pins, c->cap_pins * sizeof(*c->pins));
	}
	c->pins[c->n_pins++] = (struct pinref){off, seq, now_ms()};
	atomic_fetch_add(&c->s->n_pins, 1);
	pthread_mutex_unlock(&c->pmu);
}

static bool
pin_take(struct conn *c, uint64_t off, uint64_t seq)
{
	bool found = false;
	pthread_mutex_lock(&c->pmu);
	for (size_t i = c->n_pins; i-- > 0;) {
		if (c->pins[i].off == off && c->pins[i].seq == seq) {
			c->pins[i] = c->pins[--c->n_pins];
			atomic_fetch_sub(&c->s->n_pins, 1);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->pmu);
	return found;
}

/* Drop the pins and reservations of c older than the TTL (the reaper). Returns how many. */
static unsigned
pins_expire(struct conn *c, uint64_t now)
{
	unsigned n = 0;
	pthread_mutex_lock(&c->pmu);
	for (size_t i = c->n_pins; i-- > 0;) {
		if (!kvl_aged(c->pins[i].t_ms, now, c->s->ttl_ms))
			continue;
		ol_kve_release(c->s->eng, c->pins[i].off, c->pins[i].seq);
		c->pins[i] = c->pins[--c->n_pins];
		atomic_fetch_sub(&c->s->n_pins, 1);
		n++;
	}
	pthread_mutex_unlock(&c->pmu);
	return n;
}

/* ---- replies ---- */

static void
out_set(struct conn *c, int32_t status, uint32_t count, const uint8_t *body, size_t len)
{
	c->out_reply = true;
	c->out_status = status;
	c->out_count = count;
	c->out_body = body;
	c->out_len = len;
}

uint8_t *
kvs_out_hdr(struct conn *c, const struct ol_kvp_hdr *rq, uint8_t hb[OL_KVP_HDR])
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION, rq->op,	 OL_KVP_F_REPLY,
			       c->out_count, c->out_status,  rq->req_id, c->out_len};
	uint8_t *at = c->out_body == c->reps ? c->reps - OL_KVP_HDR : hb;
	ol_kvp_hdr_encode(at, &h);
	return at;
}

void
kvs_out_done(struct conn *c)
{
	free(c->out_buf);
	c->out_buf = NULL;
	c->out_reply = false;
}

void
kvs_rep_put(struct conn *c, uint32_t i, int32_t status, uint64_t len, uint64_t off, uint64_t seq)
{
	struct ol_kvp_rep_ent r = {status, atomic_load(&c->s->view.tag), len, off, seq};
	ol_kvp_rep_ent_encode(c->reps + (size_t)i * OL_KVP_REP_ENT, &r);
}

static void
ent_key(struct conn *c, const struct ol_kvp_req_ent *e, struct ol_kvk *k)
{
	ol_kve_key(k, e->key, c->ns);
}

/* ---- handlers over a whole body: return 0, or -errno to close the connection ---- */

static int
read_host_id(char *buf, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		n = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return (int)n;
}

/* A frame-level refusal: the reply header carries -errno, then the connection closes. */
static int
refuse(struct conn *c, int err, const char *what)
{
	kvs_refuse_log(c->s, c->peer, what);
	out_set(c, err, 0, NULL, 0);
	return -ECANCELED; /* closes (after the reply) without another log line */
}

/* openlake_kv_ns_*{namespace="..."}: the per-namespace figures on /metrics. */
static void
ns_metrics_render(struct ol_strbuf *b, void *arg)
{
	struct ol_kv_server *s = arg;
	static const char *const what[4][2] = {
	    {"puts_total", "Blocks stored (put or COMMIT), by client namespace."},
	    {"put_bytes_total", "Bytes of the blocks stored, by client namespace."},
	    {"hits_total", "Gets and LOOKUPs answered with the block, by client namespace."},
	    {"misses_total", "Gets and LOOKUPs of a block the pool does not hold, by client "
			     "namespace."}};
	unsigned n = atomic_load(&s->n_ns);
	for (unsigned f = 0; f < 4; f++) {
		ol_strbuf_printf(b,
				 "# HELP openlake_kv_ns_%s %s\n# TYPE openlake_kv_ns_%s counter\n",
				 what[f][0], what[f][1], what[f][0]);
		for (unsigned i = 0; i < n; i++) {
			const struct kvs_ns *x = &s->ns[i];
			const atomic_uint_fast64_t *v[4] = {&x->puts, &x->put_bytes, &x->hits,
							    &x->misses};
			ol_strbuf_printf(b, "openlake_kv_ns_%s{namespace=\"", what[f][0]);
			ol_kv_metrics_label(b, x->name);
			ol_strbuf_printf(b, "\"} %llu\n", (unsigned long long)atomic_load(v[f]));
		}
	}
	ol_kv_ns_metrics_render(b, s->eng);
	kvl_metrics_render(b, s);
}

/* The slot of namespace name (1-based), added on first sight while there is room. */
static unsigned
ns_slot(struct ol_kv_server *s, const char *name)
{
	pthread_mutex_lock(&s->ns_mu);
	unsigned n = atomic_load(&s->n_ns), i;
	for (i = 0; i < n; i++)
		if (strcmp(s->ns[i].name, name) == 0)
			break;
	if (i == n) {
		i = n < KVS_NS_MAX ? n : KVS_NS_MAX - 1;
		if (n < KVS_NS_MAX) {
			snprintf(s->ns[i].name, sizeof(s->ns[i].name), "%s",
				 n == KVS_NS_MAX - 1 ? "(other)" : name);
			atomic_store(&s->n_ns, n + 1);
		}
	}
	pthread_mutex_unlock(&s->ns_mu);
	return i + 1;
}

void
kvs_ns_put(struct conn *c, int st, uint64_t len)
{
	if (!c->ns_slot || st != OL_KV_OK)
		return;
	struct kvs_ns *n = &c->s->ns[c->ns_slot - 1];
	atomic_fetch_add_explicit(&n->puts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&n->put_bytes, len, memory_order_relaxed);
}

void
kvs_ns_get(struct conn *c, int st)
{
	if (!c->ns_slot || (st != OL_KV_OK && st != OL_KV_MISS))
		return;
	struct kvs_ns *n = &c->s->ns[c->ns_slot - 1];
	atomic_fetch_add_explicit(st == OL_KV_OK ? &n->hits : &n->misses, 1, memory_order_relaxed);
}

/* HELLO: sets the namespace. The shm path is granted only on the Unix socket to a peer whose
 * credentials pass (never for a value a client sends); over TCP a local client on the same
 * host is told the socket's path. With access control on, a client must say it has a token
 * (HELLO_TOKEN) and then AUTH with an HMAC over the nonce sent here (WELCOME v2). */
static int
do_hello(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *body)
{
	struct ol_kvp_hello hi;
	struct ol_kv_server *s = c->s;
	if (ol_kvp_hello_decode(body, h->body_len, &hi) < 0)
		return -EBADMSG;
	bool acl = ol_kva_on(&s->acl);
	if (acl && (hi.version < OL_KVP_HELLO_V2 || !(hi.flags & OL_KVP_HELLO_TOKEN)))
		return refuse(c, -EACCES,
			      "the pool requires a token ([kv] secret or "
			      "[[kv.tokens]]); the client sent none or is too old");
	ol_kve_ns_hash(hi.ns, hi.ns_len, c->ns);
	memcpy(c->ns_str, hi.ns, hi.ns_len);
	c->ns_str[hi.ns_len] = '\0';
	c->ns_len = hi.ns_len;
	c->ns_slot = ns_slot(s, c->ns_str);
	ol_kve_ns_name(s->eng, c->ns, c->ns_str, c->ns_len);
	c->hello = true;
	c->authed = !acl;
	const char *name = ol_kve_shm_name(s->eng);
	bool want = (hi.flags & OL_KVP_HELLO_LOCAL) && name[0];
	c->local = want && c->is_unix && ol_kva_peer_local(&s->acl, c->fd);
	size_t hl = strlen(s->host_id);
	bool same_host = hl > 0 && hi.host_len == hl && memcmp(hi.host, s->host_id, hl) == 0;
	if (getrandom(c->nonce, sizeof(c->nonce), 0) != sizeof(c->nonce))
		return -EIO;
	struct ol_kvp_welcome w = {.flags = (c->local ? OL_KVP_HELLO_LOCAL : 0) |
					    OL_KVP_WELCOME_VIEW | OL_KVP_WELCOME_LEASE |
					    OL_KVP_WELCOME_COMMIT_ALLOC |
					    (ol_kve_events_cap(s->eng) ? OL_KVP_WELCOME_EVENTS : 0),
				   .max_batch = s->lim.max_batch,
				   .max_block = ol_kve_max_block(s->eng),
				   .shm_size = ol_kve_shm_size(s->eng),
				   .epoch = ol_kve_epoch(s->eng),
				   .unit = OL_KVE_UNIT,
				   .shm_name = name,
				   .name_len = (uint16_t)strlen(name)};
	w.v2 = hi.version >= OL_KVP_HELLO_V2;
	w.auth = acl;
	memcpy(w.nonce, c->nonce, sizeof(w.nonce));
	if (want && !c->is_unix && same_host && s->upath[0]) {
		w.unix_path = s->upath;
		w.path_len = (uint16_t)strlen(s->upath);
	}
	int n = ol_kvp_welcome_encode(c->reps, OL_KVS_REPS, &w);
	if (n < 0)
		return n;
	out_set(c, 0, 0, c->reps, (size_t)n);
	return 0;
}

static int
do_auth(struct conn *c, const uint8_t *mac)
{
	if (!c->hello)
		return refuse(c, -EACCES, "AUTH before HELLO");
	out_set(c, 0, 0, NULL, 0);
	if (!ol_kva_on(&c->s->acl))
		return 0;
	int r = ol_kva_check(&c->s->acl, c->nonce, c->ns_str, c->ns_len, mac);
	if (r == -EKEYREJECTED)
		return refuse(c, r, "bad token");
	if (r < 0) {
		char what[OL_KVP_MAX_NS + 64];
		snprintf(what, sizeof(what), "token not allowed for namespace \"%s\"", c->ns_str);
		return refuse(c, r, what);
	}
	c->authed = true;
	return 0;
}

/* ALLOC: reserve a slot of len bytes under k, pinned for c (another namespace's old bytes in it
 * zeroed: the client may read the slot before it writes it). */
static int32_t
reserve(struct conn *c, const struct ol_kvk *k, uint64_t len, struct ol_kve_slot *sl)
{
	int32_t st = pin_room(c) ? ol_kve_alloc(c->s->eng, k, len, sl) : OL_KV_FULL;
	if (st == OL_KV_OK && sl->foreign < len) /* another namespace's bytes */
		memset(sl->ptr + sl->foreign, 0, len - sl->foreign);
	if (st == OL_KV_OK)
		pin_add(c, sl->off, sl->seq);
	return st;
}

/* COMMIT_ALLOC's reservation of a slot for a put whose key is not known yet: reserved under a
 * key of the connection's own (its nonce with a count mixed in; a client's stored key does not
 * collide with it), published under the real key by the COMMIT_ALLOC that fills it. */
static int32_t
reserve_ahead(struct conn *c, uint64_t len, struct ol_kve_slot *sl)
{
	uint8_t raw[OL_KVP_KEY];
	struct ol_kvk k;
	uint64_t n = ++c->n_ahead, x;
	memcpy(raw, c->nonce, sizeof(raw));
	memcpy(&x, raw, sizeof(x));
	x ^= n;
	memcpy(raw, &x, sizeof(x));
	ol_kve_key(&k, raw, c->ns);
	return reserve(c, &k, len, sl);
}

/* One entry of COMMIT_ALLOC: a commit of a slot c reserved (under any key), or (off and seq
 * 0) a reservation for a later put; its reply's len is then how long the server keeps it. */
static int32_t
commit_alloc_one(struct conn *c, const struct ol_kvp_req_ent *e, const struct ol_kvk *k,
		 struct ol_kve_slot *sl, uint64_t *len)
{
	int32_t st;
	if (e->off == 0 && e->seq == 0) {
		*len = c->s->ttl_ms;
		return reserve_ahead(c, e->len, sl);
	}
	st = pin_take(c, e->off, e->seq) ? ol_kve_commit_as(c->s->eng, k, e->off, e->seq, e->len)
					 : OL_KV_ERROR;
	*len = e->len;
	kvs_ns_put(c, st, e->len);
	return st;
}

/* One entry of EXISTS, DELETE, ALLOC, LOOKUP, LEASE, COMMIT or COMMIT_ALLOC. */
static void
simple_one(struct conn *c, uint8_t op, uint32_t i, const struct ol_kvp_req_ent *e)
{
	struct ol_kvk k;
	struct ol_kve_slot sl = {0};
	uint64_t len = 0;
	int32_t st;
	ent_key(c, e, &k);
	switch (op) {
	case OL_KVP_EXISTS:
		st = ol_kve_exists(c->s->eng, &k, &len);
		break;
	case OL_KVP_DELETE:
		st = ol_kve_delete(c->s->eng, &k);
		break;
	case OL_KVP_LEASE:
		st = kvl_lease(&c->s->leases, c->s->eng, &k, e->len, now_ms(), &len);
		break;
	case OL_KVP_ALLOC:
		st = reserve(c, &k, e->len, &sl);
		len = e->len;
		break;
	case OL_KVP_LOOKUP:
		st = pin_room(c) ? ol_kve_pin(c->s->eng, &k, true, &sl) : OL_KV_FULL;
		if (st == OL_KV_OK)
			pin_add(c, sl.off, sl.seq);
		kvs_ns_get(c, st);
		len = sl.len;
		break;
	case OL_KVP_COMMIT_ALLOC:
		st = commit_alloc_one(c, e, &k, &sl, &len);
		break;
	default: /* COMMIT */
		st = pin_take(c, e->off, e->seq)
			 ? ol_kve_commit(c->s->eng, &k, e->off, e->seq, e->len)
			 : OL_KV_ERROR;
		len = e->len;
		kvs_ns_put(c, st, len);
		break;
	}
	kvs_rep_put(c, i, st, len, sl.off, sl.seq);
}

static int
do_simple(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *ents)
{
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		ol_kvp_req_ent_decode(ents + (size_t)i * OL_KVP_REQ_ENT, &e);
		simple_one(c, h->op, i, &e);
	}
	out_set(c, 0, h->count, c->reps, (size_t)h->count * OL_KVP_REP_ENT);
	return 0;
}

static int
do_release(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *ents)
{
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		ol_kvp_req_ent_decode(ents + (size_t)i * OL_KVP_REQ_ENT, &e);
		bool ok = pin_take(c, e.off, e.seq);
		if (ok)
			ol_kve_release(c->s->eng, e.off, e.seq);
		kvs_rep_put(c, i, ok ? OL_KV_OK : OL_KV_MISS, 0, 0, 0);
	}
	if (!(h->flags & OL_KVP_F_NOREPLY))
		out_set(c, 0, h->count, c->reps, (size_t)h->count * OL_KVP_REP_ENT);
	return 0;
}

static int
do_stats(struct conn *c)
{
	char *buf = (char *)c->reps;
	size_t cap = OL_KVS_REPS; /* the namespaces' rows that do not fit are left out */
	int n = ol_kve_stats_json(c->s->eng, buf, cap - 96);
	if (n < 0)
		return n;
	pthread_mutex_lock(&c->s->mu);
	unsigned nc = c->s->n_conns;
	pthread_mutex_unlock(&c->s->mu);
	n--; /* reopen the object to add server fields */
	n += snprintf(buf + n, cap - (size_t)n,
		      ",\"connections\":%u,\"conn_pins\":%llu,\"port\":%u}", nc,
		      (unsigned long long)atomic_load(&c->s->n_pins), c->s->port);
	out_set(c, 0, 0, c->reps, (size_t)n);
	return 0;
}

/* EVENTS: the keys of the connection's namespace removed from the pool since a sequence (the
 * namespace is the one HELLO named and AUTH proved: a client reads no other's). */
static int
do_events(struct conn *c, const uint8_t *ents)
{
	struct ol_kvp_req_ent e;
	ol_kvp_req_ent_decode(ents, &e);
	unsigned max = e.len < OL_KVP_MAX_EVENTS ? (unsigned)e.len : OL_KVP_MAX_EVENTS;
	struct ol_kvp_events ev = {.keys = c->reps + OL_KVP_EVENTS_HDR};
	bool lost;
	ev.n = ol_kve_events(c->s->eng, c->ns, e.seq, (uint8_t(*)[32])(c->reps + OL_KVP_EVENTS_HDR),
			     max, &ev.next, &lost);
	ev.flags = lost ? OL_KVP_EVENTS_LOST : 0;
	int n = ol_kvp_events_encode(c->reps, OL_KVS_REPS, &ev);
	if (n < 0)
		return n;
	out_set(c, 0, 0, c->reps, (size_t)n);
	return 0;
}

/* VIEW: the pool's live members (any authenticated connection; the addresses are no secret
 * from a client that may use the pool). */
static int
do_view(struct conn *c)
{
	uint8_t *buf;
	int n = kvv_encode(&c->s->view, &buf);
	if (n < 0)
		return n;
	c->out_buf = buf;
	out_set(c, 0, 0, buf, (size_t)n);
	return 0;
}

int
kvs_precheck(struct conn *c, const struct ol_kvp_hdr *h)
{
	if (!c->authed && h->op != OL_KVP_HELLO && h->op != OL_KVP_AUTH)
		return refuse(c, -EACCES, "an op before a successful HELLO/AUTH");
	if ((h->op == OL_KVP_ALLOC || h->op == OL_KVP_COMMIT || h->op == OL_KVP_LOOKUP ||
	     h->op == OL_KVP_COMMIT_ALLOC) &&
	    !c->local)
		return refuse(c, -EPERM, "shared-memory op without a shm grant");
	if (h->op == OL_KVP_EVENTS && !ol_kve_events_cap(c->s->eng)) /* as an older server */
		return refuse(c, -EOPNOTSUPP, "EVENTS with [kv] removal_events = 0");
	if (h->op == OL_KVP_HELLO && h->body_len > OL_KV_HELLO_MAX)
		return -EMSGSIZE;
	if (h->op == OL_KVP_AUTH && h->body_len != OL_KVP_MAC)
		return -EMSGSIZE;
	return 0;
}

bool
kvs_skips_body(const struct ol_kvp_hdr *h)
{
	return h->op == OL_KVP_STATS || h->op == OL_KVP_VIEW;
}

bool
kvs_may_block(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *body)
{
	struct ol_kve *e = c->s->eng;
	switch (h->op) {
	case OL_KVP_DELETE:
		return ol_kve_has_spill(e); /* a tombstone append */
	case OL_KVP_ALLOC:
	case OL_KVP_COMMIT:
	case OL_KVP_COMMIT_ALLOC:
		return ol_kve_strict(e); /* waits for the write-behind */
	case OL_KVP_LOOKUP:
	case OL_KVP_LEASE:
		for (uint32_t i = 0; ol_kve_has_spill(e) && i < h->count; i++) {
			struct ol_kvp_req_ent re;
			struct ol_kvk k;
			ol_kvp_req_ent_decode(body + (size_t)i * OL_KVP_REQ_ENT, &re);
			ent_key(c, &re, &k);
			if (ol_kve_nvme_only(e, &k))
				return true; /* a promotion reads the disk */
		}
		return false;
	default:
		return false;
	}
}

int
kvs_handle(struct conn *c, const struct ol_kvp_hdr *h, const uint8_t *body)
{
	c->out_reply = false;
	switch (h->op) {
	case OL_KVP_HELLO:
		return do_hello(c, h, body);
	case OL_KVP_AUTH:
		return do_auth(c, body);
	case OL_KVP_STATS:
		return do_stats(c);
	case OL_KVP_VIEW:
		return do_view(c);
	case OL_KVP_EVENTS:
		return do_events(c, body);
	case OL_KVP_RELEASE:
		return do_release(c, h, body);
	default:
		return do_simple(c, h, body);
	}
}

/* The reply entry of a GET (st as the engine answered; sl valid when OL_KV_OK). */
void
kvs_get_head(struct conn *c, const struct ol_kvp_req_ent *e, int st, const struct ol_kve_slot *sl,
	     uint8_t rep[OL_KVP_REP_ENT])
{
	kvs_ns_get(c, st);
	if (st == OL_KV_OK && sl->len > e->len)
		st = OL_KV_TRUNCATED;
	struct ol_kvp_rep_ent re = {st, atomic_load(&c->s->view.tag),
				    st == OL_KV_MISS || st == OL_KV_CORRUPT ? 0 : sl->len, 0, 0};
	ol_kvp_rep_ent_encode(rep, &re);
}

/* ---- connections ---- */

void
kvs_conn_close(struct conn *c)
{
	struct ol_kv_server *s = c->s;
	pthread_mutex_lock(&c->pmu);
	for (size_t i = 0; i < c->n_pins; i++)
		ol_kve_release(s->eng, c->pins[i].off, c->pins[i].seq);
	atomic_fetch_sub(&s->n_pins, c->n_pins);
	c->n_pins = 0;
	pthread_mutex_unlock(&c->pmu);
	kvs_out_done(c);
	ol_tls_mem_free(&c->tls);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_lock(&s->mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	free(c->pins);
	pthread_mutex_destroy(&c->pmu);
	munmap(c, c->map_len);
}

const char *
kvs_why(int r)
{
	switch (r) {
	case -EBADMSG:
		return "bad magic or malformed body";
	case -EPROTONOSUPPORT:
		return "unsupported protocol version";
	case -EMSGSIZE:
		return "frame or entry too large / lengths inconsistent";
	case -EINVAL:
		return "bad opcode, flags or count";
	case -EPERM:
		return "shared-memory op without a granted local HELLO";
	default:
		return strerror(-r);
	}
}

static struct conn *
conn_new(struct ol_kv_server *s, int fd, bool is_unix)
{
	size_t len = sizeof(struct conn) + OL_KVS_BODY + OL_KVP_HDR + OL_KVS_REPS;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		ol_die("kv: out of memory for a connection");
	struct conn *c = p; /* zeroed */
	c->map_len = len;
	c->ents = (uint8_t *)(c + 1);
	c->reps = c->ents + OL_KVS_BODY + OL_KVP_HDR;
	c->s = s;
	c->fd = fd;
	c->is_unix = is_unix;
	pthread_mutex_init(&c->pmu, NULL);
	ol_kve_ns_hash("", 0, c->ns);
	c->authed = !ol_kva_on(&s->acl);
	return c;
}

/* The peer's address (for the per-address limit) and its printable form. */
static void
peer_of(int fd, bool is_unix, uint8_t addr[16], char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	snprintf(buf, cap, is_unix ? "unix" : "?");
	if (is_unix || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		const uint8_t *b = (const uint8_t *)&a->sin_addr;
		memcpy(addr, b, 4);
		snprintf(buf, cap, "%u.%u.%u.%u:%u", b[0], b[1], b[2], b[3], ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		memcpy(addr, &a->sin6_addr, 16);
		snprintf(buf, cap, "[ipv6]:%u", ntohs(a->sin6_port));
	}
}

void
kvs_refused_flush(struct ol_kv_server *s, bool force)
{
	uint64_t now = now_ms();
	unsigned k = 0;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->n_refused; i++) {
		if (force || now - s->refused[i].t_ms >= OL_KV_REFUSED_MS)
			close(s->refused[i].fd);
		else
			s->refused[k++] = s->refused[i];
	}
	s->n_refused = k;
	pthread_mutex_unlock(&s->mu);
}

/* Answer a refused connection (over a limit, a plaintext client on the TLS port) with an
 * error frame (req_id 0, status -err), shut our side and close it a little later (closing at
 * once could reset it before the client read the frame). */
void
kvs_refuse_fd(struct ol_kv_server *s, int fd, const char *peer, int err, const char *what)
{
	struct ol_kvp_hdr h = {
	    OL_KVP_MAGIC, OL_KVP_VERSION, OL_KVP_HELLO, OL_KVP_F_REPLY, 0, err, 0, 0};
	uint8_t hb[OL_KVP_HDR];
	ol_kvp_hdr_encode(hb, &h);
	kvs_refuse_log(s, peer, what);
	(void)!send(fd, hb, sizeof(hb), MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	pthread_mutex_lock(&s->mu);
	if (s->n_refused == OL_KV_REFUSED_MAX) {
		close(s->refused[0].fd);
		memmove(s->refused, s->refused + 1,
			(OL_KV_REFUSED_MAX - 1) * sizeof(s->refused[0]));
		s->n_refused--;
	}
	s->refused[s->n_refused].fd = fd;
	s->refused[s->n_refused++].t_ms = now_ms();
	pthread_mutex_unlock(&s->mu);
}

/* Count and insert c in one hold of the lock: every loop accepts, and two loops that each
 * counted max - 1 connections of an address would both let theirs in. NULL (inserted), "" (the
 * server is stopping) or why a limit refuses it. */
static const char *
admit_insert(struct ol_kv_server *s, struct conn *c)
{
	const char *why = NULL;
	unsigned same = 0;
	pthread_mutex_lock(&s->mu);
	for (struct conn *o = s->conns; !c->is_unix && o && same < s->max_per_addr; o = o->next)
		same += !o->is_unix && memcmp(o->addr, c->addr, 16) == 0;
	if (atomic_load(&s->stop)) /* after stop's shutdown pass: it would not see c */
		why = "";
	else if (s->n_conns >= s->max_conns)
		why = "too many KV connections ([kv] max_connections)";
	else if (same >= s->max_per_addr)
		why = "too many KV connections from this address ([kv] max_connections_per_addr)";
	if (!why) {
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
	}
	pthread_mutex_unlock(&s->mu);
	if (why) {
		kvs_out_done(c);
		pthread_mutex_destroy(&c->pmu);
		munmap(c, c->map_len);
	}
	return why;
}

struct conn *
kvs_admit(struct ol_kv_server *s, int fd, bool is_unix)
{
	uint8_t addr[16] = {0};
	char peer[64];
	peer_of(fd, is_unix, addr, peer, sizeof(peer));
	int one = 1;
	if (!is_unix)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct conn *c = conn_new(s, fd, is_unix);
	memcpy(c->addr, addr, 16);
	memcpy(c->peer, peer, sizeof(c->peer));
	const char *why = admit_insert(s, c);
	if (why) {
		if (*why)
			kvs_refuse_fd(s, fd, peer, -EUSERS, why);
		else
			close(fd);
		return NULL;
	}
	if (s->tls && !is_unix && ol_tls_mem_new(s->tls, OL_KVS_TLS_BUF, OL_KVS_TLS_BUF, &c->tls)) {
		kvs_refuse_log(s, peer, "out of memory for a TLS session");
		kvs_conn_close(c);
		return NULL;
	}
	return c;
}

struct conn *
kvs_admit_nofd(struct ol_kv_server *s, const uint8_t addr[16], const char *peer, const char **why)
{
	struct conn *c = conn_new(s, -1, false);
	memcpy(c->addr, addr, 16);
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	*why = admit_insert(s, c);
	return *why ? NULL : c;
}

/* Every second: drop pins and reservations older than [kv_slab] reserve_ttl_secs (a client
 * that ALLOCs and never commits, or LOOKUPs and never releases, cannot hold slots for good;
 * a late reader then sees a changed sequence number: a miss, never torn data). */
static void *
reaper_main(void *arg)
{
	struct ol_kv_server *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!atomic_load(&s->stop)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->reap_cv, &s->mu, &ts);
		unsigned n = 0;
		uint64_t now = now_ms();
		for (struct conn *c = s->conns; c && !atomic_load(&s->stop); c = c->next)
			n += pins_expire(c, now);
		unsigned nl = kvl_expire(&s->leases, s->eng, now);
		if (nl)
			ol_debug("kv: %u leases ended by their ttl", nl);
		if (n)
			ol_info(
			    "kv: dropped %u pins/reservations older than reserve_ttl_secs = %llu",
			    n, (unsigned long long)(s->ttl_ms / 1000));
		pthread_mutex_unlock(&s->mu);
		kvv_refresh(&s->view); /* without s->mu: the source may take its own locks */
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- start / stop ---- */

static uint64_t
mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	uint64_t kb = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "MemTotal:", 9) == 0) {
			kb = strtoull(line + 9, NULL, 10);
			break;
		}
	}
	if (f)
		fclose(f);
	return kb * 1024;
}

static uint64_t
dram_bytes(const struct ol_config *cfg)
{
	const uint64_t gib = 1ull << 30;
	if (cfg->kv_dram_bytes)
		return cfg->kv_dram_bytes;
	if (cfg->kv_cpu_ram_frac > 0) {
		uint64_t g = (uint64_t)((double)mem_total() * cfg->kv_cpu_ram_frac) / gib;
		return (g ? g : 1) * gib; /* upstream floors to whole GiB */
	}
	if (cfg->kv_capacity_gb)
		return (uint64_t)cfg->kv_capacity_gb * gib;
	return gib;
}

static int
mkdir_p(const char *path)
{
	char tmp[OL_CFG_STR + 8];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(tmp, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

static void
spill_dir(const struct ol_config *cfg, char *buf, size_t cap)
{
	if (cfg->kv_spill_dir[0])
		snprintf(buf, cap, "%s", cfg->kv_spill_dir);
	else if (cfg->n_data_dirs > 0)
		snprintf(buf, cap, "%s/kv", cfg->data_dirs[0]);
	else
		snprintf(buf, cap, "./data/kv");
}

/* Unlink the default-named DRAM tiers ("/openlake-kv-PORT-PID") of daemons that died
 * without cleaning up (kill -9): their pages would stay in /dev/shm for good. A live daemon
 * holds a flock on its object, whatever PID namespace or container it runs in: an object is
 * removed only when its lock is free (and, for objects of older daemons that took no lock,
 * when its PID is not alive here either). */
static void
gc_stale_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	unsigned n = 0;
	while (d && (de = readdir(d)) != NULL) {
		char *end;
		if (strncmp(de->d_name, "openlake-kv-", 12) != 0)
			continue;
		strtoul(de->d_name + 12, &end, 10);
		if (*end != '-')
			continue;
		long pid = strtol(end + 1, &end, 10);
		if (*end != '\0' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char name[300];
		snprintf(name, sizeof(name), "/%s", de->d_name);
		n += ol_kve_shm_unlink_stale(name, false) == 1;
	}
	if (d)
		closedir(d);
	if (n)
		ol_info("kv: removed %u stale DRAM tier(s) of dead daemons from /dev/shm", n);
}

static int
open_engine(struct ol_kv_server *s, const struct ol_config *cfg)
{
	char dir[OL_CFG_STR + 8], shm[OL_CFG_STR];
	spill_dir(cfg, dir, sizeof(dir));
	if (cfg->kv_shm_name[0])
		snprintf(shm, sizeof(shm), "%s%s", cfg->kv_shm_name[0] == '/' ? "" : "/",
			 cfg->kv_shm_name);
	else
		snprintf(shm, sizeof(shm), "/openlake-kv-%u-%d", s->port, (int)getpid());
	gc_stale_shm();
	bool spill = cfg->kv_spill_bytes > 0;
	if (spill) {
		int r = mkdir_p(dir);
		if (r < 0) {
			ol_err("kv: cannot create the spill directory %s: %s", dir, strerror(-r));
			return r;
		}
	}
	struct ol_kve_opts o = {.dram_bytes = dram_bytes(cfg),
				.shm_name = shm,
				.spill_dir = spill ? dir : NULL,
				.spill_bytes = cfg->kv_spill_bytes,
				.max_block = cfg->kv_max_block_bytes,
				.writeback_ms = cfg->kv_writeback_ms,
				.strict = strcmp(cfg->kv_writeback, "strict") == 0,
				.writeback_bps = cfg->kv_writeback_bps,
				.ns_quota_frac = cfg->kv_ns_quota_frac,
				.events = cfg->kv_removal_events,
				.prefault = ol_config_kv_prefault(cfg),
				.shm_group = s->acl.has_gid,
				.shm_gid = s->acl.gid};
	int r = ol_kve_open(&o, &s->eng);
	if (r == -EADDRINUSE)
		ol_err("kv: shm object %s is held by a live daemon: set [kv] shm_name apart", shm);
	if (r == 0)
		ol_info(
		    "kv: pool on port %u: DRAM %llu MiB in shm %s, NVMe %s (%llu MiB), max block "
		    "%llu KiB, write-behind %s within %u ms, namespace quota %llu MiB (0 = none)",
		    s->port, (unsigned long long)(o.dram_bytes >> 20), shm, spill ? dir : "off",
		    (unsigned long long)(o.spill_bytes >> 20),
		    (unsigned long long)(ol_kve_max_block(s->eng) >> 10),
		    o.strict ? "strict" : "async", o.writeback_ms,
		    (unsigned long long)(ol_kve_ns_quota(s->eng) >> 20));
	return r;
}

/* Bind and listen on the Unix socket at path: its directory is created 0700 (0770 with
 * [kv] shm_group) and must be ours and not writable by others (whoever can write it could
 * put a socket of their own in our place); the socket is 0600 (0660). The TCP port is ours
 * (bound first), so a socket left at that path by a dead daemon is replaced. fd or -errno. */
static int
unix_bind(struct ol_kv_server *s, const char *path)
{
	char dir[sizeof(s->upath)];
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	bool grp = s->acl.has_gid;
	struct stat st;
	if (dir[0] && stat(dir, &st) != 0) {
		int r = mkdir_p(dir);
		if (r == 0 && grp && (chown(dir, (uid_t)-1, s->acl.gid) != 0 || chmod(dir, 0770)))
			r = -errno;
		if (r < 0)
			return r;
	}
	if (dir[0] && (stat(dir, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 0002)))
		return -EPERM;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(path, grp ? 0660 : 0600) != 0 ||
	    (grp && chown(path, (uid_t)-1, s->acl.gid) != 0) || listen(fd, SOMAXCONN) != 0) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

/* The Unix socket that grants the shm tier. [kv] unix_socket set: that path or the daemon
 * does not start. Default: /run/openlake/kv-<port>.sock, else (no right to create it, e.g.
 * not root) $XDG_RUNTIME_DIR/openlake/, else the spill directory; none usable: a warning,
 * and local clients use TCP. */
static int
listen_unix(struct ol_kv_server *s, const struct ol_config *cfg)
{
	s->ufd = -1;
	if (strcmp(cfg->kv_unix_socket, "off") == 0 || !s->eng || !ol_kve_shm_name(s->eng)[0])
		return 0;
	if (cfg->kv_unix_socket[0]) {
		size_t l = strlen(cfg->kv_unix_socket);
		if (l >= sizeof(s->upath) || cfg->kv_unix_socket[0] != '/') {
			ol_err("kv: unix_socket \"%s\" must be an absolute path under %zu bytes",
			       cfg->kv_unix_socket, sizeof(s->upath));
			return -EINVAL;
		}
		int fd = unix_bind(s, cfg->kv_unix_socket);
		if (fd < 0) {
			ol_err("kv: cannot listen on unix socket %s: %s%s", cfg->kv_unix_socket,
			       strerror(-fd),
			       fd == -EPERM
				   ? " (its directory must be ours, not writable by others)"
				   : "");
			return fd;
		}
		memcpy(s->upath, cfg->kv_unix_socket, l + 1);
		s->ufd = fd;
		return 0;
	}
	char cand[3][OL_CFG_STR + 32], sp[OL_CFG_STR + 8];
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	spill_dir(cfg, sp, sizeof(sp));
	snprintf(cand[0], sizeof(cand[0]), "/run/openlake/kv-%u.sock", s->port);
	snprintf(cand[1], sizeof(cand[1]), "%s/openlake/kv-%u.sock", xdg ? xdg : "", s->port);
	snprintf(cand[2], sizeof(cand[2]), "%s/kv-%u.sock", sp, s->port);
	for (int i = 0; i < 3; i++) {
		if ((i == 1 && (!xdg || xdg[0] != '/')) || cand[i][0] != '/' ||
		    strlen(cand[i]) >= sizeof(s->upath))
			continue;
		int fd = unix_bind(s, cand[i]);
		if (fd >= 0) {
			snprintf(s->upath, sizeof(s->upath), "%s", cand[i]);
			s->ufd = fd;
			return 0;
		}
		ol_info("kv: no unix socket at %s: %s", cand[i], strerror(-fd));
	}
	ol_warn("kv: no unix socket for the shared-memory grant: local clients use TCP (set [kv] "
		"unix_socket to a path this user may create)");
	return 0;
}

static void
limits_init(struct ol_kv_server *s, const struct ol_config *cfg)
{
	s->lim.max_batch = OL_KVP_MAX_BATCH;
	s->lim.max_block = cfg->kv_max_block_bytes ? cfg->kv_max_block_bytes : (64u << 20);
	s->max_conns = cfg->kv_max_conns ? cfg->kv_max_conns : 4096;
	s->max_per_addr = cfg->kv_max_conns_per_addr ? cfg->kv_max_conns_per_addr : 1024;
	s->max_pins_conn = cfg->kv_max_pins_per_conn ? cfg->kv_max_pins_per_conn : 16384;
	s->max_pins = cfg->kv_max_pins ? cfg->kv_max_pins : (1u << 20);
	s->ttl_ms = (uint64_t)(cfg->kv_reserve_ttl_secs ? cfg->kv_reserve_ttl_secs : 60) * 1000;
	/* a lease lives at most reserve_ttl_secs; a namespace holds at most a connection's pins */
	kvl_leases_init(&s->leases, s->ttl_ms, s->max_pins_conn);
}

/* A pool that listens beyond loopback without a secret serves anyone who can reach it. */
static void
warn_open_pool(const struct ol_kv_server *s, const char *addr)
{
	if (ol_kva_on(&s->acl))
		return;
	if (strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10) == 0 ||
	    strncmp(addr, "[::1]:", 6) == 0)
		return;
	ol_warn("kv: WARNING: the KV pool listens on %s, beyond loopback, with NO access "
		"control: anyone who reaches it can read, overwrite and delete every block. Set "
		"[kv] secret or [[kv.tokens]].",
		addr);
}

/* This node as a view member: [cluster] weight, the tiers' capacity, the KV address (the
 * bound port when the configured one is 0). */
static void
view_init(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr)
{
	struct ol_kvp_view_member me = {.id = cfg->self_id, .weight = cfg->cluster_weight};
	me.capacity = cfg->kv_dram_bytes + cfg->kv_spill_bytes;
	const char *colon = strrchr(addr, ':');
	int n = colon && strcmp(colon, ":0") == 0 ? snprintf(me.addr, sizeof(me.addr), "%.*s:%u",
							     (int)(colon - addr), addr, s->port)
						  : snprintf(me.addr, sizeof(me.addr), "%s", addr);
	me.addr_len = (uint16_t)(n > 0 && (size_t)n < sizeof(me.addr) ? n : 0);
	kvv_init(&s->view, &me);
}

void
ol_kv_server_set_view(struct ol_kv_server *s, ol_kv_view_fn fn, void *arg)
{
	if (s)
		kvv_set_source(&s->view, fn, arg);
}

/* transport = "rdma" or "ucx": the KV protocol over UCX as well (ucx.c). 0 or -errno. */
static int
ucx_start(struct ol_kv_server *s, const struct ol_config *cfg, const char *addr)
{
	if (strcmp(cfg->transport, "rdma") != 0 && strcmp(cfg->transport, "ucx") != 0)
		return 0;
#ifdef OL_HAVE_UCX
	return kvu_start(s, cfg, addr);
#else
	(void)s;
	(void)addr;
	return 0; /* openlaked warns: built without UCX */
#endif
}

int
ol_kv_server_start(const struct ol_config *cfg, struct ol_kv_server **out)
{
	const char *addr = ol_config_kv_listen(cfg);
	if (!addr || !addr[0])
		return -EINVAL;
	struct ol_kv_server *s = ol_xcalloc(1, sizeof(*s));
	s->lfd = s->ufd = -1;
	s->ns = ol_xcalloc(KVS_NS_MAX, sizeof(*s->ns));
	pthread_mutex_init(&s->ns_mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_cond_init(&s->reap_cv, NULL);
	limits_init(s, cfg);
	read_host_id(s->host_id, sizeof(s->host_id));
	int r = ol_kva_init(&s->acl, cfg);
	if (r < 0)
		goto fail;
	/* a daemon killed a moment ago may still hold the port: the kernel closes a listening
	 * socket that an io_uring accept references only once it has torn that ring down, which
	 * it does asynchronously (a few ms, more under load); so a restart retries for 2 s */
	for (int i = 0; (s->lfd = kvnet_listen(addr, &s->port)) == -EADDRINUSE && i < 40; i++)
		usleep(50 * 1000);
	r = s->lfd;
	if (r == -EADDRINUSE) {
		ol_err("kv: port of %s is already in use (another openlaked, or another program): "
		       "stop it or set kv_addr to a free port",
		       addr);
		goto fail;
	}
	if (r < 0) {
		ol_err("kv: cannot listen on %s: %s", addr, strerror(-r));
		goto fail;
	}
	view_init(s, cfg, addr);
	if (cfg->kv_tls.cert_path[0] || cfg->kv_tls.key_path[0]) {
		r = ol_tls_new("kv", cfg->kv_tls.cert_path, cfg->kv_tls.key_path,
			       cfg->kv_tls.client_ca, NULL, &s->tls);
		if (r < 0) {
			ol_err("kv: [kv_tls] cannot be used: fix the file named above, or remove "
			       "[kv_tls] to serve the KV port in plaintext");
			goto fail;
		}
	}
	if ((r = open_engine(s, cfg)) < 0 || (r = listen_unix(s, cfg)) < 0)
		goto fail;
	/* before the loops accept: a scrape right after a client's first put shows it */
	ol_metrics_register(ol_kv_metrics_render, s->eng);
	ol_metrics_register(ns_metrics_render, s);
	if ((r = kvl_start(s, cfg, addr)) < 0)
		goto fail;
	if ((r = ucx_start(s, cfg, addr)) < 0)
		goto fail_loops;
	s->reaper_running = pthread_create(&s->reaper, NULL, reaper_main, s) == 0;
	warn_open_pool(s, addr);
	ol_info("kv: access control %s; TLS %s; shm grant on %s", ol_kva_on(&s->acl) ? "on" : "off",
		s->tls ? "on ([kv_tls])" : "off", s->upath[0] ? s->upath : "(none)");
	*out = s;
	return 0;
fail_loops:
	kvl_stop(s);
fail:
	ol_metrics_unregister(ol_kv_metrics_render, s->eng);
	ol_metrics_unregister(ns_metrics_render, s);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->ufd >= 0) {
		close(s->ufd);
		unlink(s->upath);
	}
	kvl_leases_fini(&s->leases, s->eng);
	ol_kve_close(s->eng);
	ol_tls_free(s->tls);
	if (s->view.view)
		kvv_fini(&s->view);
	pthread_mutex_destroy(&s->ns_mu);
	free(s->ns);
	free(s);
	return r;
}

unsigned
ol_kv_server_port(const struct ol_kv_server *s)
{
	return s->port;
}

void
ol_kv_server_stop(struct ol_kv_server *s)
{
	if (!s)
		return;
	ol_metrics_unregister(ol_kv_metrics_render, s->eng);
	ol_metrics_unregister(ns_metrics_render, s);
	atomic_store(&s->stop, true);
	pthread_mutex_lock(&s->mu);
	pthread_cond_broadcast(&s->reap_cv);
	pthread_mutex_unlock(&s->mu);
	if (s->reaper_running)
		pthread_join(s->reaper, NULL);
	kvu_stop(s); /* closes its connections: they have no socket to shut down */
	pthread_mutex_lock(&s->mu);
	for (struct conn *c = s->conns; c; c = c->next)
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
	while (s->n_conns > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	kvl_stop(s); /* no connection left on the loops: stop them (and their accepts) */
	kvs_refused_flush(s, true);
	kvl_leases_fini(&s->leases, s->eng);
	close(s->lfd);
	if (s->ufd >= 0) {
		close(s->ufd);
		unlink(s->upath);
	}
	ol_kve_close(s->eng);
	ol_tls_free(s->tls);
	kvv_fini(&s->view);
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->reap_cv);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->ns_mu);
	free(s->ns);
	free(s);
}
