/* kv/engine.c - KV index in stripes, LRU, write-behind to NVMe (the DRAM slots: engine_slab.c).
 */
#include "kv/engine.h"
#include "kv/engine_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/log.h"
#include "base/metrics.h"
#include "kv/spill.h"
#include "openlake/openlake.h"

#define WB_MAX_ITEMS 256 /* blocks per write-behind batch */
/* Pinned blocks (reads, leases) passed over at the head of a namespace's LRU in a stripe when
 * its quota needs a victim: past them the namespace's put is refused (full). */
#define NS_WINDOW 256

/* NVMe segments the tier dropped during a call made under a stripe's mutex: their entries
 * are forgotten after that mutex is released (drop_segments takes every stripe in turn). */
struct drops {
	uint64_t ids[8];
	unsigned n;
};

/* ---- keys, stripes and hash chains ---- */

void
ol_kve_ns_hash(const void *ns, size_t len, uint8_t out[16])
{
	XXH128_hash_t h = XXH3_128bits_withSeed(ns, len, 0x6f6c6b76);
	memcpy(out, &h.low64, 8);
	memcpy(out + 8, &h.high64, 8);
}

void
ol_kve_key(struct ol_kvk *k, const uint8_t key[32], const uint8_t ns[16])
{
	memcpy(k->b, key, 32);
	memcpy(k->b + 32, ns, 16);
}

static uint64_t
khash(const struct ol_kvk *k)
{
	return XXH3_64bits(k->b, sizeof(k->b));
}

/* The stripe of a hash: high bits (the chains of a stripe use the low ones). */
static unsigned
sid_of(const struct ol_kve *e, uint64_t h)
{
	return (unsigned)(h >> 40) & (e->nstripe - 1);
}

static struct kstripe *
stripe_of(struct ol_kve *e, uint64_t h)
{
	return &e->stripes[sid_of(e, h)];
}

static struct ent *
ht_find(struct kstripe *st, const struct ol_kvk *k, uint64_t h)
{
	for (struct ent *x = st->ht[h & st->ht_mask]; x; x = x->hnext)
		if (x->h == h && memcmp(x->k.b, k->b, sizeof(k->b)) == 0)
			return x;
	return NULL;
}

static void
ht_grow(struct kstripe *st)
{
	uint64_t n = (st->ht_mask + 1) * 2;
	struct ent **t = ol_xcalloc(n, sizeof(*t));
	for (uint64_t i = 0; i <= st->ht_mask; i++) {
		struct ent *x = st->ht[i], *nx;
		for (; x; x = nx) {
			nx = x->hnext;
			x->hnext = t[x->h & (n - 1)];
			t[x->h & (n - 1)] = x;
		}
	}
	free(st->ht);
	st->ht = t;
	st->ht_mask = n - 1;
}

static void
ht_insert(struct kstripe *st, struct ent *x)
{
	if (st->n_ent > st->ht_mask)
		ht_grow(st);
	x->hnext = st->ht[x->h & st->ht_mask];
	st->ht[x->h & st->ht_mask] = x;
	st->n_ent++;
}

static void
ht_remove(struct kstripe *st, struct ent *x)
{
	struct ent **p = &st->ht[x->h & st->ht_mask];
	while (*p && *p != x)
		p = &(*p)->hnext;
	if (*p) {
		*p = x->hnext;
		st->n_ent--;
	}
}

/* ---- intrusive lists (stripe mutex held) ---- */

/* Residency of x in st (see Namespaces in engine_int.h): x entered (+1) or left (-1) a tier. */
static void
dram_count(struct ol_kve *e, struct kstripe *st, const struct ent *x, int sign)
{
	st->dram_entries += (uint64_t)(int64_t)sign;
	ol_kve_res(e, x, false, sign);
}

static void
nvme_count(struct ol_kve *e, struct kstripe *st, const struct ent *x, int sign)
{
	st->nvme_entries += (uint64_t)(int64_t)sign;
	ol_kve_res(e, x, true, sign);
}

static void
nlru_remove(struct kstripe *st, struct ent *x)
{
	struct ent **h = &st->nsl[2 * x->ns], **t = h + 1;
	if (x->nprev)
		x->nprev->nnext = x->nnext;
	else
		*h = x->nnext;
	if (x->nnext)
		x->nnext->nprev = x->nprev;
	else
		*t = x->nprev;
	x->nprev = x->nnext = NULL;
}

static void
nlru_append(struct kstripe *st, struct ent *x)
{
	struct ent **h = &st->nsl[2 * x->ns], **t = h + 1;
	x->nprev = *t;
	x->nnext = NULL;
	if (*t)
		(*t)->nnext = x;
	else
		*h = x;
	*t = x;
}

static void
lru_remove(struct kstripe *st, struct ent *x)
{
	if (!x->in_lru)
		return;
	nlru_remove(st, x);
	if (x->lprev)
		x->lprev->lnext = x->lnext;
	else
		st->lru_head = x->lnext;
	if (x->lnext)
		x->lnext->lprev = x->lprev;
	else
		st->lru_tail = x->lprev;
	x->lprev = x->lnext = NULL;
	x->in_lru = false;
}

static void
lru_append(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	x->lru_t = atomic_fetch_add_explicit(&e->lru_clock, 1, memory_order_relaxed);
	x->lprev = st->lru_tail;
	x->lnext = NULL;
	if (st->lru_tail)
		st->lru_tail->lnext = x;
	else
		st->lru_head = x;
	st->lru_tail = x;
	x->in_lru = true;
	nlru_append(st, x);
}

static void
dirty_remove(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	if (!x->in_dirty)
		return;
	if (x->dprev)
		x->dprev->dnext = x->dnext;
	else
		st->dirty_head = x->dnext;
	if (x->dnext)
		x->dnext->dprev = x->dprev;
	else
		st->dirty_tail = x->dprev;
	x->dprev = x->dnext = NULL;
	x->in_dirty = false;
	atomic_fetch_sub(&e->dirty_q_bytes, x->len);
	atomic_fetch_sub(&e->dirty_q_n, 1);
	atomic_store_explicit(&st->dirty_old, st->dirty_head ? st->dirty_head->put_ms : UINT64_MAX,
			      memory_order_relaxed);
}

static void
dirty_append(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	x->dprev = st->dirty_tail;
	x->dnext = NULL;
	if (st->dirty_tail)
		st->dirty_tail->dnext = x;
	else
		st->dirty_head = x;
	st->dirty_tail = x;
	x->in_dirty = true;
	atomic_fetch_add(&e->dirty_q_bytes, x->len);
	atomic_fetch_add(&e->dirty_q_n, 1);
	atomic_store_explicit(&st->dirty_old, st->dirty_head->put_ms, memory_order_relaxed);
}

/* ---- entries and their slots ---- */

/* The namespace tag of a key: which namespace's bytes a DRAM unit holds (never 0). */
static uint64_t
ns_tag(const struct ol_kvk *k)
{
	uint64_t t;
	memcpy(&t, k->b + 32, sizeof(t));
	return t | 1;
}

/* Mark the units of [off, off + len) as x's namespace's. Returns the offset (from off) of the
 * first unit that held another namespace's bytes, len when none did (0 = never written). */
static uint64_t
tag_claim(struct ol_kve *e, const struct ent *x, uint64_t off, uint64_t len)
{
	uint64_t tag = ns_tag(&x->k), first = len;
	uint64_t end = (off + (len ? len : 1) + OL_KVE_UNIT - 1) / OL_KVE_UNIT;
	for (uint64_t u = off / OL_KVE_UNIT; u < end; u++) {
		if (e->tag[u] != tag && e->tag[u] != 0 && first == len)
			first = u * OL_KVE_UNIT - off;
		e->tag[u] = tag;
	}
	return first;
}

/* Give x the slot s (taken for x's stripe; that stripe's mutex held). Returns tag_claim's
 * answer for x's value bytes. */
static uint64_t
ent_attach(struct ol_kve *e, struct ent *x, const struct slot *s)
{
	x->off = s->off;
	x->seq = s->seq;
	x->cls = s->cls;
	x->npages = s->npages;
	e->ent_at[s->off / OL_KVE_UNIT] = x;
	return tag_claim(e, x, s->off, x->len);
}

static void
ent_slot(const struct ent *x, struct slot *s)
{
	s->off = x->off;
	s->seq = x->seq;
	s->cls = x->cls;
	s->npages = x->npages;
}

static void
rec_of(const struct ent *x, struct ol_kvs_rec *r)
{
	memcpy(r->kk, x->k.b, 48);
	r->len = x->len;
	r->ver = x->ver;
	r->flags = 0;
}

static void
ent_free(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	if (x->off != OL_KVE_NOOFF) {
		struct slot s;
		ent_slot(x, &s);
		ol_kve_slot_free(e, &s);
		if (x->state == ST_LIVE)
			dram_count(e, st, x, -1);
	}
	if (x->loc.seg)
		nvme_count(e, st, x, -1);
	lru_remove(st, x);
	dirty_remove(e, st, x);
	free(x);
}

/* Forget the NVMe copies in segments the tier dropped (no stripe mutex held). */
static void
drop_segments(struct ol_kve *e, const uint64_t *ids, unsigned n)
{
	if (n == 0)
		return;
	for (unsigned s = 0; s < e->nstripe; s++) {
		struct kstripe *st = &e->stripes[s];
		pthread_mutex_lock(&st->mu);
		for (uint64_t i = 0; i <= st->ht_mask; i++) {
			struct ent *x = st->ht[i], *nx;
			for (; x; x = nx) {
				nx = x->hnext;
				bool hit = false;
				for (unsigned j = 0; j < n; j++)
					hit |= x->loc.seg == ids[j];
				if (!hit || !x->loc.seg)
					continue;
				x->loc.seg = 0;
				nvme_count(e, st, x, -1);
				if (x->off == OL_KVE_NOOFF) {
					ht_remove(st, x);
					ol_kve_ev_note(e, st, x);
					st->st.evictions++;
					free(x);
				}
			}
		}
		pthread_mutex_unlock(&st->mu);
	}
}

static void
ent_set_loc(struct ol_kve *e, struct kstripe *st, struct ent *x, const struct ol_kvs_loc *loc)
{
	if (!x->loc.seg)
		nvme_count(e, st, x, +1);
	x->loc = *loc;
	x->dirty = false;
	dirty_remove(e, st, x);
	st->st.writebacks++;
}

/* Write x (in DRAM) to NVMe now, its stripe's mutex held. */
static int
spill_now(struct ol_kve *e, struct kstripe *st, struct ent *x, struct drops *d)
{
	struct ol_kvs_rec r;
	struct ol_kvs_loc loc;
	rec_of(x, &r);
	int rc = ol_kvs_append(e->spill, &r, e->base + x->off, &loc, d->ids, &d->n);
	if (rc == 0)
		ent_set_loc(e, st, x, &loc);
	return rc;
}

/* ---- write-behind signalling (wmu) ---- */

static bool
wb_can_wait(const struct ol_kve *e)
{
	return atomic_load(&e->wb_running) && !atomic_load(&e->stop);
}

static void
wb_kick_locked(struct ol_kve *e)
{
	e->wb_kick = true;
	pthread_cond_signal(&e->wb_cv);
}

/* Wake the write-behind thread now (a stripe's mutex may be held; wmu is not). */
static void
wb_kick(struct ol_kve *e)
{
	pthread_mutex_lock(&e->wmu);
	wb_kick_locked(e);
	pthread_mutex_unlock(&e->wmu);
}

/* Wait (no lock held) until the write-behind thread finished a batch, or stops. */
static void
wb_wait(struct ol_kve *e)
{
	pthread_mutex_lock(&e->wmu);
	e->wb_waits++;
	uint64_t gen = e->wb_gen;
	wb_kick_locked(e);
	while (gen == e->wb_gen && wb_can_wait(e))
		pthread_cond_wait(&e->clean_cv, &e->wmu);
	pthread_mutex_unlock(&e->wmu);
}

/* ---- eviction ---- */

/* Evict x from DRAM (x live, unpinned; its stripe's mutex held): demote to NVMe or drop. */
static void
ent_evict(struct ol_kve *e, struct kstripe *st, struct ent *x, struct drops *d)
{
	if (x->dirty && e->spill && (e->strict || !wb_can_wait(e))) {
		if (spill_now(e, st, x, d) < 0)
			ol_warn("kv: dropping a block that could not be written to NVMe");
	} else if (x->dirty && e->spill) {
		/* the disk is behind: a cache drops the block rather than hold the put */
		st->st.wb_dropped++;
		if (!atomic_load(&e->wb_active))
			wb_kick(e);
	}
	if (x->loc.seg) {
		struct slot s;
		ent_slot(x, &s);
		lru_remove(st, x);
		dirty_remove(e, st, x);
		ol_kve_slot_free(e, &s);
		x->off = OL_KVE_NOOFF;
		x->nv_hit = false; /* a demoted block again needs two NVMe hits */
		dram_count(e, st, x, -1);
		st->st.demotions++;
		return;
	}
	ht_remove(st, x);
	ol_kve_ev_note(e, st, x);
	st->st.evictions++;
	ent_free(e, st, x);
}

/* A candidate victim: an entry, its stripe and its LRU stamp. */
struct cand {
	struct ent *x;
	unsigned sid;
	uint64_t t;
};

/* Keep x (seen under its stripe's mutex, stamp t) in c if it is older. */
static void
cand_keep(struct cand *c, struct ent *x, unsigned sid, uint64_t t)
{
	if (!c->x || t < c->t)
		*c = (struct cand){x, sid, t};
}

/* Unpinned entries looked at from the head of each stripe's LRU when choosing a victim. */
static unsigned
lru_window(const struct ol_kve *e)
{
	return 128 / e->nstripe > 8 ? 128 / e->nstripe : 8;
}

/* LRU victims across the stripes, as in one LRU of every stripe's entries. Each stripe is
 * looked at from its head, lru_window() unpinned entries deep; the window of the whole index
 * is what is older than the shallowest of those looks (so that a young block of a stripe
 * with few old ones is not taken for an old one): the oldest entries of the index, at least
 * lru_window() of them. *fit_clean: the oldest of class want in it that is clean,
 * *fit_dirty: the oldest dirty one (it must be written to NVMe before it can go), *any: the
 * oldest of all. The stripes are visited one at a time; the candidates are hints to check
 * again under their stripe. *busy: an entry was passed over only because the write-behind
 * thread writes it. */
static void
victims(struct ol_kve *e, int want, struct cand *fit_clean, struct cand *fit_dirty,
	struct cand *any, bool *busy)
{
	struct cand fc[OL_KVE_MAX_STRIPES], fd[OL_KVE_MAX_STRIPES];
	unsigned w = lru_window(e);
	uint64_t edge = UINT64_MAX;
	for (unsigned sid = 0; sid < e->nstripe; sid++) {
		struct kstripe *st = &e->stripes[sid];
		fc[sid].x = fd[sid].x = NULL;
		pthread_mutex_lock(&st->mu);
		unsigned seen = 0;
		struct ent *x = st->lru_head;
		for (; x && seen < w; x = x->lnext) {
			if (x->pins) {
				*busy |= x->wb;
				continue;
			}
			seen++;
			cand_keep(any, x, sid, x->lru_t);
			if (want == CLS_LARGE || x->cls == want)
				cand_keep(x->dirty ? &fd[sid] : &fc[sid], x, sid, x->lru_t);
			if (seen == w && x->lru_t < edge)
				edge = x->lru_t;
		}
		pthread_mutex_unlock(&st->mu);
	}
	/* the candidates may be gone by now: only their stamps are compared */
	for (unsigned sid = 0; sid < e->nstripe; sid++) {
		if (fc[sid].x && fc[sid].t <= edge)
			cand_keep(fit_clean, fc[sid].x, sid, fc[sid].t);
		if (fd[sid].x && fd[sid].t <= edge)
			cand_keep(fit_dirty, fd[sid].x, sid, fd[sid].t);
	}
}

/* Whether x is still an unpinned entry of st's LRU window (st's mutex held; x may be a
 * stale pointer: it is compared, not read, until found). */
static bool
still_there(const struct ol_kve *e, struct kstripe *st, const struct ent *x)
{
	unsigned w = lru_window(e), seen = 0;
	for (struct ent *y = st->lru_head; y && seen < w; y = y->lnext) {
		if (y->pins)
			continue;
		if (y == x)
			return true;
		seen++;
	}
	return false;
}

/* Whether x is still the first unpinned entry of namespace slot ns's LRU in st (st's mutex
 * held; x may be a stale pointer: compared, not read, until found). */
static bool
ns_still_there(struct kstripe *st, const struct ent *x, uint16_t ns)
{
	unsigned skipped = 0;
	for (struct ent *y = st->nsl[2 * ns]; y && skipped < NS_WINDOW; y = y->nnext, skipped++) {
		if (y == x)
			return !y->pins;
		if (!y->pins)
			return false;
	}
	return false;
}

/* Evict the candidate c if it is still one (no lock held): from the global LRU window (ns <
 * 0), or the oldest of namespace slot ns (counted as a quota eviction). As evict_one. */
static int
evict_cand(struct ol_kve *e, const struct cand *c, bool promote, int ns)
{
	struct kstripe *st = &e->stripes[c->sid];
	pthread_mutex_lock(&st->mu);
	if (ns < 0 ? !still_there(e, st, c->x) : !ns_still_there(st, c->x, (uint16_t)ns)) {
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	struct ent *v = c->x;
	if (v->dirty && v->in_dirty && (e->strict || promote) && wb_can_wait(e)) {
		pthread_mutex_unlock(&st->mu);
		return -EAGAIN;
	}
	struct drops d = {.n = 0};
	ent_evict(e, st, v, &d); /* clean, or dirty and given up on by the writer */
	if (ns >= 0)
		atomic_fetch_add_explicit(&e->ns[ns].quota_ev, 1, memory_order_relaxed);
	pthread_mutex_unlock(&st->mu);
	drop_segments(e, d.ids, d.n);
	return 0;
}

/* Evict one block for a slot of class want (no lock held). Eviction is global LRU across
 * stripes (victims above): a clean block of the wanted class among the oldest, else a dirty
 * one, else the oldest of all. For a put (promote false): async, a dirty victim is dropped
 * unwritten (counted); strict, a dirty victim is left to the write-behind thread (-EAGAIN:
 * wait for it). A promotion never waits and never drops a dirty block (-EAGAIN). When no
 * write-behind thread runs (close), a dirty victim is written here, under its stripe's
 * mutex. 0 (evicted one, or the victim changed meanwhile: try again), -EAGAIN (wait for the
 * writer), -ENOSPC (nothing to evict). */
static int
evict_one(struct ol_kve *e, int want, bool promote)
{
	struct cand fc = {0}, fd = {0}, any = {0};
	bool busy = false;
	victims(e, want, &fc, &fd, &any, &busy);
	struct cand *c = fc.x ? &fc : fd.x ? &fd : &any;
	if (!c->x)
		return busy && wb_can_wait(e) ? -EAGAIN : -ENOSPC;
	return evict_cand(e, c, promote, -1);
}

/* The oldest unpinned DRAM block of namespace slot ns across the stripes, from the heads of
 * its LRU lists (at most NS_WINDOW pinned ones passed over in each): a hint, as in
 * victims(). *busy as there. */
static void
ns_victim(struct ol_kve *e, uint16_t ns, struct cand *c, bool *busy)
{
	for (unsigned sid = 0; sid < e->nstripe; sid++) {
		struct kstripe *st = &e->stripes[sid];
		unsigned skipped = 0;
		pthread_mutex_lock(&st->mu);
		for (struct ent *x = st->nsl[2 * ns]; x && skipped < NS_WINDOW;
		     x = x->nnext, skipped++) {
			*busy |= x->pins && x->wb;
			if (!x->pins) {
				cand_keep(c, x, sid, x->lru_t);
				break;
			}
		}
		pthread_mutex_unlock(&st->mu);
	}
}

/* Make room under namespace slot ns's quota for len more DRAM bytes by moving its own least
 * recently used blocks out of DRAM, as evict_one does (no lock held). 0, -ENOSPC (larger
 * than the quota, or nothing of the namespace left to move), -EAGAIN (promote only: a dirty
 * victim must wait for the writer; a put waits for it here). */
static int
quota_room(struct ol_kve *e, uint16_t ns, uint64_t len, bool promote)
{
	if (!e->quota)
		return 0;
	if (len > e->quota)
		return -ENOSPC;
	_Atomic int64_t *held = &e->ns[ns].dram_b;
	int64_t q = (int64_t)(e->quota - len);
	while (atomic_load_explicit(held, memory_order_relaxed) > q) {
		struct cand c = {0};
		bool busy = false;
		ns_victim(e, ns, &c, &busy);
		int rc = c.x			  ? evict_cand(e, &c, promote, ns)
			 : busy && wb_can_wait(e) ? -EAGAIN
						  : -ENOSPC;
		if (rc == -ENOSPC || (rc == -EAGAIN && promote))
			return rc;
		if (rc == -EAGAIN)
			wb_wait(e);
	}
	return 0;
}

/* Reserve a DRAM slot for len bytes for stripe sid, evicting as needed (no lock held: the
 * slot is unreachable until the caller attaches it under the stripe's mutex). A put waits
 * for the write-behind thread when evict_one says so (strict, or every candidate pinned by
 * the batch being written); a promotion fails instead. 0, -ENOSPC or -EAGAIN. */
static int
slot_alloc(struct ol_kve *e, uint64_t len, bool promote, unsigned sid, struct slot *s)
{
	int rc;
	while ((rc = ol_kve_slot_take(e, len, sid, s)) == -EAGAIN) {
		rc = evict_one(e, s->cls, promote);
		if (rc == -ENOSPC || (rc == -EAGAIN && promote))
			return rc;
		if (rc == -EAGAIN)
			wb_wait(e);
	}
	return rc;
}

/* ---- NVMe write-behind ---- */

/* Bytes of one write-behind batch: the tier's batch, at most a quarter of DRAM (a batch pins
 * its blocks; puts need victims meanwhile). */
static uint64_t
wb_batch_cap(const struct ol_kve *e)
{
	uint64_t cap = ol_kvs_batch_bytes(e->spill), dram = (uint64_t)e->n_pages * OL_KVE_PAGE / 4;
	return cap < dram ? cap : dram;
}

/* The stripe whose dirty FIFO starts with the oldest put (UINT32_MAX: none is dirty). */
static unsigned
oldest_dirty(struct ol_kve *e)
{
	unsigned best = UINT32_MAX;
	uint64_t bt = UINT64_MAX;
	for (unsigned i = 0; i < e->nstripe; i++) {
		uint64_t t = atomic_load_explicit(&e->stripes[i].dirty_old, memory_order_relaxed);
		if (t < bt) {
			bt = t;
			best = i;
		}
	}
	return best;
}

/* Take the oldest dirty entries across the stripes, up to one batch, off their FIFOs and pin
 * them (the writer's; no lock held). */
static unsigned
wb_take(struct ol_kve *e)
{
	uint64_t cap = wb_batch_cap(e), bytes = 0;
	unsigned n = 0, sid;
	while (n < WB_MAX_ITEMS && (sid = oldest_dirty(e)) != UINT32_MAX) {
		struct kstripe *st = &e->stripes[sid];
		pthread_mutex_lock(&st->mu);
		struct ent *x = st->dirty_head;
		uint64_t rs = x ? ol_kvs_rec_size(x->len) : 0;
		if (x && n > 0 && bytes + rs > cap) {
			pthread_mutex_unlock(&st->mu);
			break;
		}
		if (x) {
			if (n == 0)
				atomic_store(&e->wb_oldest_ms, x->put_ms);
			dirty_remove(e, st, x);
			x->pins++;
			x->wb = true;
			atomic_fetch_add(&e->wb_bytes, x->len);
			rec_of(x, &e->wb_items[n].rec);
			e->wb_items[n].val = e->base + x->off;
			e->wb_ents[n++] = x;
			bytes += rs;
		}
		pthread_mutex_unlock(&st->mu);
	}
	return n;
}

/* Write one batch of the dirty FIFOs (no lock held). Entries whose write failed stay dirty
 * but off the FIFO: eviction then writes or drops them itself. Returns blocks written (0:
 * nothing was dirty) or -errno. */
static int
wb_batch(struct ol_kve *e, uint64_t *sent)
{
	uint64_t dropped[8], b0 = atomic_load(&e->wb_bytes);
	unsigned nd = 0, n = wb_take(e);
	if (n == 0)
		return 0;
	*sent += atomic_load(&e->wb_bytes) - b0;
	atomic_store(&e->wb_n, n);
	int rc = ol_kvs_append_batch(e->spill, e->wb_items, n, dropped, &nd);
	for (unsigned i = 0; i < n; i++) {
		struct ent *x = e->wb_ents[i];
		struct kstripe *st = stripe_of(e, x->h); /* h is constant; x is pinned */
		pthread_mutex_lock(&st->mu);
		x->pins--;
		x->wb = false;
		atomic_fetch_sub(&e->wb_bytes, x->len);
		atomic_fetch_sub(&e->wb_n, 1);
		if (rc == 0 && x->state == ST_LIVE)
			ent_set_loc(e, st, x, &e->wb_items[i].loc);
		else if (x->state == ST_DEAD && x->pins == 0)
			ent_free(e, st, x);
		pthread_cond_broadcast(&st->clean_cv);
		pthread_mutex_unlock(&st->mu);
	}
	drop_segments(e, dropped, nd); /* dropped to make room even when the write failed */
	return rc < 0 ? rc : (int)n;
}

/* Hold the writer (wmu held, free meanwhile) until sent bytes since t0_us fit the bandwidth
 * cap. Not at close: what is left is written at full speed. */
static void
wb_pace(struct ol_kve *e, uint64_t t0_us, uint64_t sent)
{
	if (!e->wb_bps)
		return;
	uint64_t due = t0_us + (uint64_t)((double)sent * 1e6 / (double)e->wb_bps), now;
	while (!atomic_load(&e->stop) && (now = ol_now_us()) < due) {
		uint64_t us = due - now;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(us / 1000000);
		ts.tv_nsec += (long)(us % 1000000) * 1000;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&e->wb_cv, &e->wmu, &ts);
	}
}

/* Wake every strict put waiting on a stripe (after a pass of the writer: a block it waits
 * for may have left the FIFO another way, by a delete). */
static void
wake_stripes(struct ol_kve *e)
{
	for (unsigned i = 0; i < e->nstripe; i++) {
		pthread_mutex_lock(&e->stripes[i].mu);
		pthread_cond_broadcast(&e->stripes[i].clean_cv);
		pthread_mutex_unlock(&e->stripes[i].mu);
	}
}

/* Write the dirty FIFOs until they are empty (wmu held on entry and exit, free during the
 * writes; the caller checked that no other writer is active). The syncer makes the segments
 * durable about every writeback_ms while this runs, and after it; the writes do not wait for
 * it (a flush can cost 300 ms on a virtual disk, and slows the writes beside it). Returns
 * blocks written. */
static unsigned
writeback_run(struct ol_kve *e)
{
	unsigned n = 0, tick = e->wb_ms ? e->wb_ms : 1;
	uint64_t synced = ol_now_us() / 1000, t0 = ol_now_us(), sent = 0;
	atomic_store(&e->wb_active, true);
	while (atomic_load(&e->dirty_q_n) > 0) {
		pthread_mutex_unlock(&e->wmu);
		int rc = wb_batch(e, &sent);
		pthread_mutex_lock(&e->wmu);
		e->wb_gen++;
		pthread_cond_broadcast(&e->clean_cv);
		if (rc <= 0)
			break; /* disk trouble: the rest of the FIFO waits for the next tick */
		n += (unsigned)rc;
		wb_pace(e, t0, sent);
		if (ol_now_us() / 1000 - synced >= tick) {
			ol_kvs_sync_async(e->spill);
			synced = ol_now_us() / 1000;
		}
	}
	atomic_store(&e->wb_active, false);
	if (n)
		ol_kvs_sync_async(e->spill);
	e->wb_gen++;
	pthread_cond_broadcast(&e->clean_cv);
	pthread_mutex_unlock(&e->wmu);
	wake_stripes(e);
	pthread_mutex_lock(&e->wmu);
	return n;
}

static void *
writeback_main(void *arg)
{
	struct ol_kve *e = arg;
	unsigned tick = e->wb_ms / 4 ? e->wb_ms / 4 : 1;
	pthread_mutex_lock(&e->wmu);
	while (!atomic_load(&e->stop)) {
		if (!e->wb_kick) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(tick % 1000) * 1000000L;
			ts.tv_sec += tick / 1000 + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&e->wb_cv, &e->wmu, &ts);
		}
		if (atomic_load(&e->stop))
			break;
		e->wb_kick = false;
		writeback_run(e);
	}
	pthread_mutex_unlock(&e->wmu);
	return NULL;
}

/* Run the writer here, once no other is active (wmu held; no writer thread runs). */
static void
writeback_here(struct ol_kve *e)
{
	while (atomic_load(&e->wb_active))
		pthread_cond_wait(&e->clean_cv, &e->wmu);
	writeback_run(e);
}

int
ol_kve_flush(struct ol_kve *e)
{
	if (!e->spill)
		return 0;
	pthread_mutex_lock(&e->wmu);
	if (wb_can_wait(e)) {
		while (atomic_load(&e->dirty_q_n) > 0 || atomic_load(&e->wb_active)) {
			wb_kick_locked(e);
			pthread_cond_wait(&e->clean_cv, &e->wmu);
		}
	} else {
		writeback_here(e);
	}
	pthread_mutex_unlock(&e->wmu);
	return ol_kvs_sync(e->spill);
}

/* ---- open / close ---- */

static void
gver_at_least(struct ol_kve *e, uint64_t v)
{
	uint64_t cur = atomic_load(&e->gver);
	while (cur < v && !atomic_compare_exchange_weak(&e->gver, &cur, v))
		;
}

/* The tier's scan at open (one thread: no locks). */
static void
recover_one(void *arg, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc)
{
	struct ol_kve *e = arg;
	struct ol_kvk k;
	memcpy(k.b, r->kk, 48);
	uint64_t h = khash(&k);
	struct kstripe *st = stripe_of(e, h);
	struct ent *x = ht_find(st, &k, h);
	gver_at_least(e, r->ver);
	if (x && x->ver >= r->ver)
		return;
	if (!x) {
		x = ol_xcalloc(1, sizeof(*x));
		x->k = k;
		x->h = h;
		x->off = OL_KVE_NOOFF;
		x->ns = ol_kve_ns_slot(e, k.b + 32);
		ht_insert(st, x);
	}
	x->ver = r->ver;
	if (x->loc.seg) /* an older version: the newer one counts instead */
		nvme_count(e, st, x, -1);
	x->loc.seg = 0;
	if (r->flags & OL_KVS_TOMBSTONE) {
		/* kept as a dead placeholder until the scan ends: the log is not in version order
		 * (a tombstone may land before an older write of the same block) */
		x->len = 0;
		x->state = ST_DEAD;
		return;
	}
	x->state = ST_LIVE;
	x->len = r->len;
	x->loc = *loc;
	nvme_count(e, st, x, +1);
}

/* Drop the placeholders of deleted blocks left by recovery. */
static void
recover_sweep(struct ol_kve *e)
{
	for (unsigned s = 0; s < e->nstripe; s++) {
		struct kstripe *st = &e->stripes[s];
		for (uint64_t i = 0; i <= st->ht_mask; i++) {
			struct ent *x = st->ht[i], *nx;
			for (; x; x = nx) {
				nx = x->hnext;
				if (x->state == ST_DEAD) {
					ht_remove(st, x);
					ent_free(e, st, x);
				}
			}
		}
	}
}

/* About 4 stripes per core, a power of two in [8, OL_KVE_MAX_STRIPES]. */
static unsigned
stripe_count(void)
{
	unsigned want = 4u * (unsigned)get_nprocs_conf(), n = 8;
	while (n < want && n < OL_KVE_MAX_STRIPES)
		n *= 2;
	return n;
}

static void
stripes_init(struct ol_kve *e)
{
	e->nstripe = stripe_count();
	void *p = NULL;
	if (posix_memalign(&p, 64, e->nstripe * sizeof(struct kstripe)) != 0)
		ol_die("kv: out of memory for the index stripes");
	memset(p, 0, e->nstripe * sizeof(struct kstripe));
	e->stripes = p;
	for (unsigned i = 0; i < e->nstripe; i++) {
		struct kstripe *st = &e->stripes[i];
		pthread_mutex_init(&st->mu, NULL);
		pthread_cond_init(&st->clean_cv, NULL);
		st->ht_mask = 255;
		st->ht = ol_xcalloc(st->ht_mask + 1, sizeof(*st->ht));
		st->nsl = ol_xcalloc(2 * OL_KVE_NS_SLOTS, sizeof(*st->nsl));
		atomic_init(&st->dirty_old, UINT64_MAX);
	}
}

static void
stripes_fini(struct ol_kve *e)
{
	for (unsigned s = 0; e->stripes && s < e->nstripe; s++) {
		struct kstripe *st = &e->stripes[s];
		for (uint64_t i = 0; i <= st->ht_mask; i++) {
			struct ent *x = st->ht[i], *nx;
			for (; x; x = nx) {
				nx = x->hnext;
				free(x);
			}
		}
		free(st->ht);
		free(st->nsl);
		pthread_mutex_destroy(&st->mu);
		pthread_cond_destroy(&st->clean_cv);
	}
	free(e->stripes);
}

int
ol_kve_open(const struct ol_kve_opts *o, struct ol_kve **out)
{
	struct ol_kve *e = ol_xcalloc(1, sizeof(*e));
	e->shm_fd = -1;
	pthread_mutex_init(&e->wmu, NULL);
	pthread_cond_init(&e->wb_cv, NULL);
	pthread_cond_init(&e->clean_cv, NULL);
	e->max_block = o->max_block ? o->max_block : (64u << 20);
	e->wb_ms = o->writeback_ms;
	e->strict = o->strict;
	e->wb_bps = o->writeback_bps;
	ol_kve_slab_init(e);
	ol_kve_ns_init(e);
	stripes_init(e);
	ol_kve_ev_init(e, o->events);
	int rc = ol_kve_map_dram(e, o);
	if (rc < 0) {
		ol_err("kv: cannot map the DRAM tier (%llu bytes, shm %s): %s",
		       (unsigned long long)o->dram_bytes, o->shm_name ? o->shm_name : "-",
		       strerror(-rc));
		ol_kve_close(e);
		return rc;
	}
	if (o->ns_quota_frac > 0)
		e->quota = (uint64_t)((double)e->n_pages * OL_KVE_PAGE *
				      (o->ns_quota_frac < 1 ? o->ns_quota_frac : 1));
	e->ent_at = ol_xcalloc(e->size / OL_KVE_UNIT, sizeof(*e->ent_at));
	e->tag = ol_xcalloc(e->size / OL_KVE_UNIT, sizeof(*e->tag));
	if (getrandom(&e->epoch, sizeof(e->epoch), 0) != sizeof(e->epoch))
		e->epoch = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	/* unit 0 of the table is never a slot: it carries the epoch so a client can check that
	 * the object it mapped is this server's */
	atomic_store(&e->seqtab[0], e->epoch);
	if (o->spill_dir && o->spill_dir[0]) {
		rc = ol_kvs_open(o->spill_dir, o->spill_bytes, e->max_block, recover_one, e,
				 &e->spill);
		if (rc < 0) {
			ol_err("kv: cannot open the NVMe tier in %s: %s", o->spill_dir,
			       strerror(-rc));
			ol_kve_close(e);
			return rc;
		}
		recover_sweep(e);
		struct ol_kve_stats st;
		ol_kve_get_stats(e, &st);
		ol_info("kv: NVMe tier %s: %llu blocks recovered", o->spill_dir,
			(unsigned long long)st.nvme_entries);
		e->wb_items = ol_xcalloc(WB_MAX_ITEMS, sizeof(*e->wb_items));
		e->wb_ents = ol_xcalloc(WB_MAX_ITEMS, sizeof(*e->wb_ents));
		rc = pthread_create(&e->wb, NULL, writeback_main, e);
		if (rc != 0) {
			ol_kve_close(e);
			return -rc;
		}
		atomic_store(&e->wb_running, true);
	}
	if (o->prefault && pthread_create(&e->pf, NULL, ol_kve_prefault_main, e) == 0)
		e->pf_running = true;
	*out = e;
	return 0;
}

int
ol_kve_shm_unlink_stale(const char *name, bool even_empty)
{
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = 0;
	struct stat st;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
		rc = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
	else if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (st.st_size == 0 && !even_empty)
		rc = -EADDRINUSE; /* being created: its owner locks it before sizing it */
	else if (shm_unlink(name) != 0 && errno != ENOENT)
		rc = -errno;
	else
		rc = 1;
	close(fd);
	return rc;
}

void
ol_kve_close(struct ol_kve *e)
{
	if (!e)
		return;
	if (e->pf_running) {
		atomic_store(&e->pf_stop, true);
		pthread_join(e->pf, NULL);
	}
	if (atomic_load(&e->wb_running)) {
		pthread_mutex_lock(&e->wmu);
		atomic_store(&e->stop, true);
		pthread_cond_signal(&e->wb_cv);
		pthread_cond_broadcast(&e->clean_cv);
		pthread_mutex_unlock(&e->wmu);
		wake_stripes(e);
		pthread_join(e->wb, NULL);
		pthread_mutex_lock(&e->wmu);
		atomic_store(&e->wb_running, false);
		writeback_here(e);
		pthread_mutex_unlock(&e->wmu);
	}
	ol_kve_ev_fini(e);
	stripes_fini(e);
	ol_kvs_close(e->spill);
	if (e->base)
		munmap(e->base, e->size);
	if (e->is_shm)
		shm_unlink(e->shm_name);
	if (e->shm_fd >= 0)
		close(e->shm_fd); /* drops the lock */
	free(e->tag);
	free(e->ent_at);
	ol_kve_ns_fini(e);
	ol_kve_slab_fini(e);
	free(e->wb_items);
	free(e->wb_ents);
	pthread_cond_destroy(&e->wb_cv);
	pthread_cond_destroy(&e->clean_cv);
	pthread_mutex_destroy(&e->wmu);
	free(e);
}

/* ---- operations ---- */

static void
slot_out(const struct ol_kve *e, const struct ent *x, struct ol_kve_slot *s)
{
	s->ptr = e->base + x->off;
	s->off = x->off;
	s->seq = x->seq;
	s->len = x->len;
}

int
ol_kve_alloc(struct ol_kve *e, const struct ol_kvk *k, uint64_t len, struct ol_kve_slot *s)
{
	if (len > e->max_block)
		return OL_KV_TOO_LARGE;
	uint64_t h = khash(k);
	unsigned sid = sid_of(e, h);
	struct kstripe *st = &e->stripes[sid];
	struct slot sl;
	int rc = OL_KV_OK;
	uint16_t ns = ol_kve_ns_slot(e, k->b + 32);
	pthread_mutex_lock(&st->mu);
	bool dup = ht_find(st, k, h) != NULL;
	st->st.dup_puts += dup;
	pthread_mutex_unlock(&st->mu);
	if (dup)
		return OL_KV_EXISTS;
	int ar = quota_room(e, ns, len, false);
	if (ar == 0)
		ar = slot_alloc(e, len ? len : 1, false, sid, &sl);
	pthread_mutex_lock(&st->mu);
	if (ar < 0) {
		st->st.full++;
		rc = OL_KV_FULL;
		goto out;
	}
	if (ht_find(st, k, h)) { /* stored while we evicted */
		st->st.dup_puts++;
		ol_kve_slot_free(e, &sl);
		rc = OL_KV_EXISTS;
		goto out;
	}
	struct ent *x = ol_xcalloc(1, sizeof(*x));
	x->k = *k;
	x->h = h;
	x->len = len;
	x->ns = ns;
	x->pins = 1;
	x->state = ST_PENDING;
	s->foreign = ent_attach(e, x, &sl);
	slot_out(e, x, s);
out:
	pthread_mutex_unlock(&st->mu);
	if (rc == OL_KV_OK && sl.fresh)
		ol_kve_slot_prefault(e, &sl); /* the slot is ours (pinned, pending) */
	return rc;
}

/* The entry of the slot (off, seq): the stripe named by seq, whose mutex the caller holds. */
static struct ent *
ent_by_slot(struct ol_kve *e, uint64_t off, uint64_t seq)
{
	if (off % OL_KVE_UNIT || off < e->data_off || off >= e->size)
		return NULL;
	/* a matching seq means the slot is the stripe's (it frees its slots under its mutex) */
	if (atomic_load_explicit(&e->seqtab[off / OL_KVE_UNIT], memory_order_acquire) != seq)
		return NULL;
	struct ent *x = e->ent_at[off / OL_KVE_UNIT];
	return x && x->off == off && x->seq == seq ? x : NULL;
}

static struct kstripe *
stripe_of_seq(struct ol_kve *e, uint64_t seq)
{
	unsigned sid = (unsigned)(seq & ((1u << SEQ_SID_BITS) - 1));
	return sid < e->nstripe ? &e->stripes[sid] : NULL;
}

/* strict: hold a put until the write-behind thread appended x (x's stripe's mutex held, free
 * while waiting; x pinned meanwhile). OL_KV_OK, or OL_KV_ERROR when the write failed: the
 * block is then taken out of the index (the put did not happen). */
static int
wait_written(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	x->pins++;
	while (x->state == ST_LIVE && x->dirty && (x->in_dirty || x->wb)) {
		if (!atomic_load(&e->wb_running) && !atomic_load(&e->wb_active)) {
			/* no writer thread (closing): write it here */
			pthread_mutex_unlock(&st->mu);
			pthread_mutex_lock(&e->wmu);
			writeback_here(e);
			pthread_mutex_unlock(&e->wmu);
			pthread_mutex_lock(&st->mu);
			continue;
		}
		if (wb_can_wait(e))
			wb_kick(e);
		pthread_cond_wait(&st->clean_cv, &st->mu);
	}
	int rc = OL_KV_OK;
	if (x->state == ST_LIVE && x->dirty) {
		ht_remove(st, x);
		ol_kve_ev_note(e, st, x);
		lru_remove(st, x);
		dram_count(e, st, x, -1);
		x->state = ST_DEAD;
		rc = OL_KV_ERROR;
	}
	if (--x->pins == 0 && x->state != ST_LIVE)
		ent_free(e, st, x);
	return rc;
}

/* Publish the pending entry x under k (x's stripe st, its mutex held; x->k == *k). */
static int
commit_locked(struct ol_kve *e, struct kstripe *st, struct ent *x, const struct ol_kvk *k,
	      uint64_t len)
{
	int rc = OL_KV_OK;
	if (ht_find(st, k, x->h)) {
		st->st.dup_puts++;
		ent_free(e, st, x);
		return OL_KV_EXISTS;
	}
	x->len = len;
	x->state = ST_LIVE;
	x->pins = 0;
	x->ver = atomic_fetch_add(&e->gver, 1) + 1;
	ht_insert(st, x);
	lru_append(e, st, x);
	dram_count(e, st, x, +1);
	st->st.puts++;
	if (e->spill) {
		x->dirty = true;
		x->put_ms = ol_now_us() / 1000;
		dirty_append(e, st, x);
		if (e->strict)
			rc = wait_written(e, st, x);
		else if (!atomic_load(&e->wb_active) &&
			 (e->wb_ms == 0 || atomic_load(&e->dirty_q_bytes) >= wb_batch_cap(e)))
			wb_kick(e); /* a batch is ready: no need to wait for the tick */
	}
	return rc;
}

int
ol_kve_commit(struct ol_kve *e, const struct ol_kvk *k, uint64_t off, uint64_t seq, uint64_t len)
{
	int rc;
	struct kstripe *st = stripe_of_seq(e, seq);
	if (!st)
		return OL_KV_ERROR;
	pthread_mutex_lock(&st->mu);
	struct ent *x = ent_by_slot(e, off, seq);
	if (!x || x->state != ST_PENDING || memcmp(x->k.b, k->b, 48) != 0 || len > x->len)
		rc = OL_KV_ERROR;
	else
		rc = commit_locked(e, st, x, k, len);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
ol_kve_commit_as(struct ol_kve *e, const struct ol_kvk *k, uint64_t off, uint64_t seq, uint64_t len)
{
	struct kstripe *from = stripe_of_seq(e, seq);
	if (!from)
		return OL_KV_ERROR;
	uint64_t h = khash(k);
	unsigned sid = sid_of(e, h);
	struct kstripe *to = &e->stripes[sid];
	pthread_mutex_lock(&from->mu);
	struct ent *x = ent_by_slot(e, off, seq);
	if (!x || x->state != ST_PENDING || len > x->len ||
	    memcmp(x->k.b + 32, k->b + 32, 16) != 0) {
		pthread_mutex_unlock(&from->mu);
		return OL_KV_ERROR;
	}
	if (to == from) { /* the same stripe: the entry takes the key where it is */
		x->k = *k;
		x->h = h;
		int rc = commit_locked(e, from, x, k, len);
		pthread_mutex_unlock(&from->mu);
		return rc;
	}
	/* Another stripe: the slot leaves its owner (ent_at cleared under its mutex, so a
	 * release or commit naming the old seq finds nothing), takes a sequence naming the new
	 * stripe, and is attached there. In between no stripe owns it: it is in no list, pinned
	 * for nobody but this call, and nothing can free it. */
	struct slot sl;
	ent_slot(x, &sl);
	e->ent_at[off / OL_KVE_UNIT] = NULL;
	pthread_mutex_unlock(&from->mu);
	ol_kve_slot_reseq(e, &sl, sid);
	x->k = *k;
	x->h = h;
	x->seq = sl.seq;
	pthread_mutex_lock(&to->mu);
	e->ent_at[off / OL_KVE_UNIT] = x;
	int rc = commit_locked(e, to, x, k, len);
	pthread_mutex_unlock(&to->mu);
	return rc;
}

void
ol_kve_release(struct ol_kve *e, uint64_t off, uint64_t seq)
{
	struct kstripe *st = stripe_of_seq(e, seq);
	if (!st)
		return;
	pthread_mutex_lock(&st->mu);
	struct ent *x = ent_by_slot(e, off, seq);
	if (x && x->pins > 0 && --x->pins == 0 && x->state != ST_LIVE)
		ent_free(e, st, x);
	pthread_mutex_unlock(&st->mu);
}

static int
pin_dram(struct ol_kve *e, struct kstripe *st, struct ent *x, struct ol_kve_slot *s)
{
	x->pins++;
	lru_remove(st, x);
	lru_append(e, st, x);
	slot_out(e, x, s);
	return OL_KV_OK;
}

/* The read of an NVMe-only block, between its start (under the stripe) and its end. */
struct nvread {
	struct ol_kvk k;
	uint64_t h;
	uint16_t ns;
	bool promote;
	struct ol_kvs_rd rd;
};

/* Whether a TCP reader's NVMe hit on x (NVMe only; its stripe's mutex held) promotes it: only
 * a second hit that came while a promotion at the first would still be in DRAM. x->lru_t is
 * the LRU clock at that first hit; the clock ticks once per block appended to the LRU, and a
 * block appended then is not evicted before about as many others as DRAM holds were appended
 * after it (estimated as this stripe's DRAM entries times the stripes: keys spread evenly).
 * A block whose reuse is farther apart than that (a random working set larger than DRAM)
 * would be evicted again before its next hit: its promotion would only cost an eviction and
 * a 64 KiB-class copy per get. */
static bool
nv_promote(struct ol_kve *e, const struct kstripe *st, const struct ent *x)
{
	if (!x->nv_hit)
		return false;
	uint64_t now = atomic_load_explicit(&e->lru_clock, memory_order_relaxed);
	uint64_t reach = (st->dram_entries + 1) * e->nstripe;
	return now - x->lru_t < reach;
}

/* Note what to read of x (NVMe only; its stripe's mutex held). A TCP reader (!need_dram) is
 * served from the read buffer on the entry's first NVMe hit and promotes only on a second one
 * soon enough after it (nv_promote): a block read once from a random working set gains
 * nothing from a DRAM slot, which costs an eviction and a copy. */
static void
nv_start(struct ol_kve *e, const struct kstripe *st, struct ent *x, bool need_dram,
	 struct nvread *nr)
{
	nr->k = x->k;
	nr->h = x->h;
	nr->ns = x->ns;
	nr->promote = need_dram || nv_promote(e, st, x);
	rec_of(x, &nr->rd.rec);
	nr->rd.loc = x->loc;
}

/* After the read (rd.rc, rd.val set; no lock held): promote the block if nr says so, then
 * take its stripe's mutex and pin it or hand out the read buffer. The slot of a promotion is
 * taken (evicting as needed) and filled with no lock held: it is unreachable until attached.
 * Returns with the stripe's mutex held: OL_KV_OK, OL_KV_MISS, OL_KV_CORRUPT. */
static int
nv_finish(struct ol_kve *e, struct kstripe *st, struct nvread *nr, bool need_dram,
	  struct ol_kve_slot *s)
{
	int rc = nr->rd.rc;
	const struct ol_kvs_rec *r = &nr->rd.rec;
	struct slot sl;
	/* a promotion keeps to the namespace's quota, or is not made */
	int ar = rc == 0 && nr->promote && quota_room(e, nr->ns, r->len, true) == 0
		     ? slot_alloc(e, r->len ? r->len : 1, true, sid_of(e, nr->h), &sl)
		     : -1;
	if (ar == 0) {
		if (sl.fresh)
			ol_kve_slot_prefault(e, &sl);
		memcpy(e->base + sl.off, nr->rd.val, r->len);
	}
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, &nr->k, nr->h);
	if (!x || x->ver != r->ver || x->off != OL_KVE_NOOFF) {
		if (ar == 0)
			ol_kve_slot_free(e, &sl);
		return x && x->ver == r->ver ? pin_dram(e, st, x, s) : OL_KV_MISS;
	}
	if (rc < 0) {
		if (rc == -EBADMSG || rc == -ENOENT) {
			ht_remove(st, x);
			ol_kve_ev_note(e, st, x);
			ent_free(e, st, x);
		}
		st->st.corrupt += rc == -EBADMSG;
		return rc == -EBADMSG ? OL_KV_CORRUPT : OL_KV_MISS;
	}
	if (ar < 0) {
		if (need_dram)
			return OL_KV_MISS;
		x->nv_hit = true; /* the next hit promotes if it comes soon enough */
		x->lru_t = atomic_load_explicit(&e->lru_clock, memory_order_relaxed);
		s->ptr = (uint8_t *)nr->rd.val;
		s->off = OL_KVE_NOOFF;
		s->seq = 0;
		s->len = r->len;
		return OL_KV_OK;
	}
	(void)ent_attach(e, x, &sl);
	dram_count(e, st, x, +1);
	st->st.promotions++;
	return pin_dram(e, st, x, s);
}

/* x is NVMe only: read it, then promote it or not (x's stripe's mutex held on entry and exit,
 * free during the read, the eviction and the copy into DRAM: reads of other blocks go on). */
static int
pin_nvme(struct ol_kve *e, struct kstripe *st, struct ent *x, bool need_dram, struct ol_kve_slot *s)
{
	struct nvread nr;
	nv_start(e, st, x, need_dram, &nr);
	pthread_mutex_unlock(&st->mu);
	nr.rd.rc = ol_kvs_read(e->spill, &nr.rd.rec, &nr.rd.loc, &nr.rd.val);
	return nv_finish(e, st, &nr, need_dram, s);
}

int
ol_kve_pin(struct ol_kve *e, const struct ol_kvk *k, bool need_dram, struct ol_kve_slot *s)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	int rc;
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	if (!x) {
		rc = OL_KV_MISS;
	} else if (x->off != OL_KVE_NOOFF) {
		st->st.hits_dram++;
		rc = pin_dram(e, st, x, s);
	} else {
		rc = pin_nvme(e, st, x, need_dram, s);
		st->st.hits_nvme += rc == OL_KV_OK;
	}
	if (rc == OL_KV_OK)
		st->st.hits++;
	else
		st->st.misses++;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
ol_kve_pin_dram(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	int rc = OL_KV_MISS;
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	if (x && x->off == OL_KVE_NOOFF) {
		rc = OL_KVE_NVME; /* counted by the ol_kve_pin that follows */
	} else if (x) {
		st->st.hits_dram++;
		st->st.hits++;
		rc = pin_dram(e, st, x, s);
	} else {
		st->st.misses++;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
ol_kve_pin_start(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s,
		 struct ol_kve_nvrd *rd)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	int rc = OL_KV_MISS;
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	if (x && x->off != OL_KVE_NOOFF) {
		st->st.hits_dram++;
		st->st.hits++;
		rc = pin_dram(e, st, x, s);
	} else if (x && ol_kvs_extent_get(e->spill, &x->loc, x->len, &rd->ext) == 0) {
		struct nvread nr;
		nv_start(e, st, x, false, &nr);
		rd->k = nr.k;
		rd->h = nr.h;
		rd->ns = nr.ns;
		rd->promote = nr.promote;
		rd->rec = nr.rd.rec;
		rd->loc = nr.rd.loc;
		rc = OL_KVE_NVME; /* hits and misses counted at the finish */
	} else if (x) {		  /* its segment was dropped: forget it, as a read would */
		ht_remove(st, x);
		ol_kve_ev_note(e, st, x);
		ent_free(e, st, x);
		st->st.misses++;
	} else {
		st->st.misses++;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
ol_kve_pin_finish(struct ol_kve *e, struct ol_kve_nvrd *rd, int res, const uint8_t *buf,
		  struct ol_kve_slot *s)
{
	struct nvread nr = {.k = rd->k, .h = rd->h, .ns = rd->ns, .promote = rd->promote};
	nr.rd.rec = rd->rec;
	nr.rd.loc = rd->loc;
	ol_kvs_extent_put(e->spill, &rd->ext);
	nr.rd.rc = res < 0 ? res : (uint64_t)res != ol_kvs_rec_size(rd->rec.len) ? -EIO : 0;
	if (nr.rd.rc == 0)
		nr.rd.rc = ol_kvs_verify(e->spill, &nr.rd.rec, buf, &nr.rd.val);
	struct kstripe *st = stripe_of(e, nr.h);
	int rc = nv_finish(e, st, &nr, false, s);
	st->st.hits_nvme += rc == OL_KV_OK;
	st->st.hits += rc == OL_KV_OK;
	st->st.misses += rc != OL_KV_OK;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

void
ol_kve_pin_abandon(struct ol_kve *e, struct ol_kve_nvrd *rd)
{
	ol_kvs_extent_put(e->spill, &rd->ext);
}

bool
ol_kve_nvme_only(struct ol_kve *e, const struct ol_kvk *k)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	bool r = x && x->off == OL_KVE_NOOFF;
	pthread_mutex_unlock(&st->mu);
	return r;
}

bool
ol_kve_has_spill(const struct ol_kve *e)
{
	return e->spill != NULL;
}

bool
ol_kve_strict(const struct ol_kve *e)
{
	return e->strict;
}

int
ol_kve_exists(struct ol_kve *e, const struct ol_kvk *k, uint64_t *len)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	if (x) {
		*len = x->len;
		if (x->in_lru) { /* a lookup is a use: a block about to be loaded stays */
			lru_remove(st, x);
			lru_append(e, st, x);
		}
	}
	pthread_mutex_unlock(&st->mu);
	return x ? OL_KV_OK : OL_KV_MISS;
}

/* Append a tombstone for x (its stripe's mutex held, dropped during the write: nobody can
 * reach x, which is out of the index and pinned by the caller). */
static void
tombstone(struct ol_kve *e, struct kstripe *st, struct ent *x)
{
	struct ol_kvs_rec r;
	struct ol_kvs_loc loc;
	uint64_t dropped[8];
	unsigned nd = 0;
	rec_of(x, &r);
	r.ver = atomic_fetch_add(&e->gver, 1) + 1;
	r.flags = OL_KVS_TOMBSTONE;
	pthread_mutex_unlock(&st->mu);
	int rc = ol_kvs_append(e->spill, &r, NULL, &loc, dropped, &nd);
	if (rc < 0)
		ol_warn("kv: tombstone write failed; the block may come back after a restart");
	drop_segments(e, dropped, nd);
	pthread_mutex_lock(&st->mu);
}

int
ol_kve_delete(struct ol_kve *e, const struct ol_kvk *k)
{
	uint64_t h = khash(k);
	struct kstripe *st = stripe_of(e, h);
	pthread_mutex_lock(&st->mu);
	struct ent *x = ht_find(st, k, h);
	if (!x) {
		pthread_mutex_unlock(&st->mu);
		return OL_KV_MISS;
	}
	ht_remove(st, x);
	ol_kve_ev_note(e, st, x);
	st->st.deletes++;
	/* on NVMe, or maybe being written there (pinned): a restart must not bring it back */
	bool tomb = e->spill && (x->loc.seg || x->pins > 0);
	lru_remove(st, x);
	dirty_remove(e, st, x);
	if (x->off != OL_KVE_NOOFF)
		dram_count(e, st, x, -1);
	if (x->loc.seg)
		nvme_count(e, st, x, -1);
	x->loc.seg = 0;
	x->state = ST_DEAD; /* freed by whoever drops the last pin */
	x->pins++;
	if (tomb)
		tombstone(e, st, x);
	if (--x->pins == 0)
		ent_free(e, st, x);
	pthread_mutex_unlock(&st->mu);
	return OL_KV_OK;
}
