/* kv/engine.c - KV index, DRAM tier in shm (size-class slots), LRU, write-behind to NVMe. */
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/log.h"
#include "base/metrics.h"
#include "kv/barrier.h"
#include "kv/spill.h"
#include "openlake/openlake.h"

#define WB_MAX_ITEMS 256 /* blocks per write-behind batch */

/* ---- keys and hash table ---- */

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

static struct ent *
ht_find(struct ol_kve *e, const struct ol_kvk *k, uint64_t h)
{
	for (struct ent *x = e->ht[h & e->ht_mask]; x; x = x->hnext)
		if (x->h == h && memcmp(x->k.b, k->b, sizeof(k->b)) == 0)
			return x;
	return NULL;
}

static void
ht_grow(struct ol_kve *e)
{
	uint64_t n = (e->ht_mask + 1) * 2;
	struct ent **t = ol_xcalloc(n, sizeof(*t));
	for (uint64_t i = 0; i <= e->ht_mask; i++) {
		struct ent *x = e->ht[i], *nx;
		for (; x; x = nx) {
			nx = x->hnext;
			x->hnext = t[x->h & (n - 1)];
			t[x->h & (n - 1)] = x;
		}
	}
	free(e->ht);
	e->ht = t;
	e->ht_mask = n - 1;
}

static void
ht_insert(struct ol_kve *e, struct ent *x)
{
	if (e->n_ent > e->ht_mask)
		ht_grow(e);
	x->hnext = e->ht[x->h & e->ht_mask];
	e->ht[x->h & e->ht_mask] = x;
	e->n_ent++;
}

static void
ht_remove(struct ol_kve *e, struct ent *x)
{
	struct ent **p = &e->ht[x->h & e->ht_mask];
	while (*p && *p != x)
		p = &(*p)->hnext;
	if (*p) {
		*p = x->hnext;
		e->n_ent--;
	}
}

/* ---- intrusive lists ---- */

static void
lru_remove(struct ol_kve *e, struct ent *x)
{
	if (!x->in_lru)
		return;
	if (x->lprev)
		x->lprev->lnext = x->lnext;
	else
		e->lru_head = x->lnext;
	if (x->lnext)
		x->lnext->lprev = x->lprev;
	else
		e->lru_tail = x->lprev;
	x->lprev = x->lnext = NULL;
	x->in_lru = false;
}

static void
lru_append(struct ol_kve *e, struct ent *x)
{
	x->lprev = e->lru_tail;
	x->lnext = NULL;
	if (e->lru_tail)
		e->lru_tail->lnext = x;
	else
		e->lru_head = x;
	e->lru_tail = x;
	x->in_lru = true;
}

static void
dirty_remove(struct ol_kve *e, struct ent *x)
{
	if (!x->in_dirty)
		return;
	if (x->dprev)
		x->dprev->dnext = x->dnext;
	else
		e->dirty_head = x->dnext;
	if (x->dnext)
		x->dnext->dprev = x->dprev;
	else
		e->dirty_tail = x->dprev;
	x->dprev = x->dnext = NULL;
	x->in_dirty = false;
	e->dirty_q_bytes -= x->len;
	e->dirty_q_n--;
}

static void
dirty_append(struct ol_kve *e, struct ent *x)
{
	x->dprev = e->dirty_tail;
	x->dnext = NULL;
	if (e->dirty_tail)
		e->dirty_tail->dnext = x;
	else
		e->dirty_head = x;
	e->dirty_tail = x;
	x->in_dirty = true;
	e->dirty_q_bytes += x->len;
	e->dirty_q_n++;
}

/* ---- DRAM slots ---- */

static int
class_for(const struct ol_kve *e, uint64_t len)
{
	for (int c = 0; c < NCLS; c++)
		if (len <= e->cls[c].size)
			return c;
	return CLS_LARGE;
}

static uint64_t
slot_bytes(const struct ol_kve *e, const struct slot *s)
{
	return s->cls == CLS_LARGE ? (uint64_t)s->npages * OL_KVE_PAGE : e->cls[s->cls].size;
}

static uint32_t
page_of(const struct ol_kve *e, uint64_t off)
{
	return (uint32_t)((off - e->data_off) / OL_KVE_PAGE);
}

static void
cls_push(struct sclass *c, uint64_t off)
{
	if (c->nfree == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		c->free = ol_xrealloc(c->free, c->cap * sizeof(*c->free));
	}
	c->free[c->nfree++] = off;
}

static bool
page_carve(struct ol_kve *e, int ci)
{
	struct sclass *c = &e->cls[ci];
	for (uint32_t p = 0; p < e->n_pages; p++) {
		if (e->pages[p].cls != PG_FREE)
			continue;
		e->pages[p].cls = (int16_t)ci;
		e->pages[p].used = 0;
		uint64_t n = OL_KVE_PAGE / c->size, base = e->data_off + (uint64_t)p * OL_KVE_PAGE;
		for (uint64_t i = n; i-- > 0;)
			cls_push(c, base + i * c->size);
		return true;
	}
	return false;
}

static bool
large_take(struct ol_kve *e, uint32_t np, uint64_t *off)
{
	uint32_t run = 0;
	for (uint32_t p = 0; p < e->n_pages; p++) {
		run = e->pages[p].cls == PG_FREE ? run + 1 : 0;
		if (run < np)
			continue;
		uint32_t first = p + 1 - np;
		for (uint32_t q = first; q <= p; q++)
			e->pages[q].cls = q == first ? PG_LARGE : PG_TAIL;
		e->pages[first].run = np;
		*off = e->data_off + (uint64_t)first * OL_KVE_PAGE;
		return true;
	}
	return false;
}

/* Claim the first touch of a slot's pages: true when one of them was never touched (the
 * caller then prefaults them with one madvise, outside the lock, instead of 512 faults). */
static bool
claim_fresh(struct ol_kve *e, uint64_t off, uint32_t np)
{
	bool fresh = false;
	for (uint32_t p = page_of(e, off), q = p + np; p < q; p++) {
		fresh |= !e->pages[p].faulted;
		e->pages[p].faulted = true;
	}
	return fresh;
}

static void
prefault(struct ol_kve *e, const struct slot *s)
{
	uint64_t start = e->data_off + (uint64_t)page_of(e, s->off) * OL_KVE_PAGE;
	madvise(e->base + start, (uint64_t)s->npages * OL_KVE_PAGE, MADV_POPULATE_WRITE);
}

static bool
slot_try(struct ol_kve *e, struct slot *s)
{
	if (s->cls == CLS_LARGE)
		return large_take(e, s->npages, &s->off);
	struct sclass *c = &e->cls[s->cls];
	if (c->nfree == 0 && !page_carve(e, s->cls))
		return false;
	s->off = c->free[--c->nfree];
	e->pages[page_of(e, s->off)].used++;
	return true;
}

static void
page_reclaim(struct ol_kve *e, uint32_t p)
{
	struct sclass *c = &e->cls[e->pages[p].cls];
	uint64_t lo = e->data_off + (uint64_t)p * OL_KVE_PAGE, hi = lo + OL_KVE_PAGE;
	size_t j = 0;
	for (size_t i = 0; i < c->nfree; i++)
		if (c->free[i] < lo || c->free[i] >= hi)
			c->free[j++] = c->free[i];
	c->nfree = j;
	e->pages[p].cls = PG_FREE;
}

static void
slot_free(struct ol_kve *e, const struct slot *s)
{
	atomic_store_explicit(&e->seqtab[s->off / OL_KVE_UNIT], 0, memory_order_release);
	e->ent_at[s->off / OL_KVE_UNIT] = NULL;
	e->dram_used -= slot_bytes(e, s);
	uint32_t p = page_of(e, s->off);
	if (s->cls == CLS_LARGE) {
		for (uint32_t q = p; q < p + s->npages; q++)
			e->pages[q].cls = PG_FREE;
		return;
	}
	cls_push(&e->cls[s->cls], s->off);
	if (--e->pages[p].used == 0)
		page_reclaim(e, p);
}

static void ent_evict(struct ol_kve *e, struct ent *x);

/* An LRU victim among unpinned entries: the oldest of class want among the first 64 (a clean
 * one first: a dirty one must be written to NVMe before it can go), else the oldest. *busy:
 * an entry was passed over only because the write-behind thread is writing it. */
static struct ent *
victim(struct ol_kve *e, int want, bool *busy)
{
	struct ent *any = NULL, *dirty = NULL;
	int seen = 0;
	*busy = false;
	for (struct ent *x = e->lru_head; x; x = x->lnext) {
		if (x->pins) {
			*busy |= x->wb;
			continue;
		}
		bool fits = want == CLS_LARGE || x->cls == want;
		if (fits && !x->dirty)
			return x;
		if (fits && !dirty)
			dirty = x;
		if (!any)
			any = x;
		if (++seen >= 64)
			break;
	}
	return dirty ? dirty : any;
}

static bool
wb_can_wait(const struct ol_kve *e)
{
	return e->wb_running && !e->stop;
}

/* Wake the write-behind thread now (lock held). */
static void
wb_kick(struct ol_kve *e)
{
	e->wb_kick = true;
	pthread_cond_signal(&e->wb_cv);
}

/* Wait (lock released meanwhile) until the write-behind thread finished a batch. */
static void
wb_wait(struct ol_kve *e)
{
	e->st.writeback_waits++;
	wb_kick(e);
	pthread_cond_wait(&e->clean_cv, &e->mu);
}

/* Reserve a DRAM slot for len bytes, evicting as needed. For a put (promote false): async,
 * a victim that is still dirty is dropped unwritten (counted in wb_dropped) and the put waits
 * only when every candidate is pinned by the batch being written; strict, a dirty victim is
 * left to the write-behind thread and the put waits for it (the index lock is free meanwhile,
 * so other puts and gets go on). A promotion never waits and never drops a dirty block: it
 * fails with -EAGAIN (the reader is served from the read buffer, or misses). When no
 * write-behind thread runs (close), a dirty victim is written here, under the lock.
 * 0, -ENOSPC or -EAGAIN. */
static int
slot_alloc(struct ol_kve *e, uint64_t len, bool promote, struct slot *s)
{
	s->cls = class_for(e, len);
	s->npages = s->cls == CLS_LARGE ? (uint32_t)((len + OL_KVE_PAGE - 1) / OL_KVE_PAGE) : 1;
	if (s->npages > e->n_pages)
		return -ENOSPC;
	while (!slot_try(e, s)) {
		bool busy;
		struct ent *v = victim(e, s->cls, &busy);
		bool dirty = v && v->dirty && v->in_dirty;
		bool queued = v ? dirty && (e->strict || promote) : busy;
		if (queued && wb_can_wait(e)) {
			if (promote)
				return -EAGAIN;
			wb_wait(e);
			continue;
		}
		if (!v)
			return -ENOSPC;
		ent_evict(e, v); /* clean, or dirty and given up on by the writer */
	}
	s->fresh = claim_fresh(e, s->off, s->npages);
	s->seq = ++e->gseq;
	atomic_store_explicit(&e->seqtab[s->off / OL_KVE_UNIT], s->seq, memory_order_release);
	ol_fence_store();
	e->dram_used += slot_bytes(e, s);
	return 0;
}

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

/* Returns tag_claim's answer for x's value bytes. */
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

/* ---- NVMe write-behind ---- */

static void
rec_of(const struct ent *x, struct ol_kvs_rec *r)
{
	memcpy(r->kk, x->k.b, 48);
	r->len = x->len;
	r->ver = x->ver;
	r->flags = 0;
}

static void
drop_segments(struct ol_kve *e, const uint64_t *ids, unsigned n)
{
	for (unsigned j = 0; j < n; j++) {
		for (uint64_t i = 0; i <= e->ht_mask; i++) {
			struct ent *x = e->ht[i], *nx;
			for (; x; x = nx) {
				nx = x->hnext;
				if (x->loc.seg != ids[j])
					continue;
				x->loc.seg = 0;
				e->nvme_entries--;
				if (x->off == OL_KVE_NOOFF) {
					ht_remove(e, x);
					e->st.evictions++;
					free(x);
				}
			}
		}
	}
}

static void
ent_set_loc(struct ol_kve *e, struct ent *x, const struct ol_kvs_loc *loc)
{
	if (!x->loc.seg)
		e->nvme_entries++;
	x->loc = *loc;
	x->dirty = false;
	dirty_remove(e, x);
	e->st.writebacks++;
}

/* Write x (in DRAM) to NVMe now, engine lock held. */
static int
spill_now(struct ol_kve *e, struct ent *x)
{
	struct ol_kvs_rec r;
	struct ol_kvs_loc loc;
	uint64_t dropped[8];
	unsigned nd;
	rec_of(x, &r);
	int rc = ol_kvs_append(e->spill, &r, e->base + x->off, &loc, dropped, &nd);
	if (rc == 0)
		ent_set_loc(e, x, &loc);
	x->pins++; /* keep x alive across drop_segments */
	drop_segments(e, dropped, nd);
	x->pins--;
	return rc;
}

static void
ent_free(struct ol_kve *e, struct ent *x)
{
	if (x->off != OL_KVE_NOOFF) {
		struct slot s;
		ent_slot(x, &s);
		slot_free(e, &s);
		if (x->state == ST_LIVE)
			e->dram_entries--;
	}
	if (x->loc.seg)
		e->nvme_entries--;
	lru_remove(e, x);
	dirty_remove(e, x);
	free(x);
}

/* Evict x from DRAM (x live, unpinned): demote to NVMe or drop. */
static void
ent_evict(struct ol_kve *e, struct ent *x)
{
	if (x->dirty && e->spill && (e->strict || !wb_can_wait(e))) {
		if (spill_now(e, x) < 0)
			ol_warn("kv: dropping a block that could not be written to NVMe");
	} else if (x->dirty && e->spill) {
		/* the disk is behind: a cache drops the block rather than hold the put */
		e->st.wb_dropped++;
		if (!e->wb_active)
			wb_kick(e);
	}
	if (x->loc.seg) {
		struct slot s;
		ent_slot(x, &s);
		lru_remove(e, x);
		dirty_remove(e, x);
		slot_free(e, &s);
		x->off = OL_KVE_NOOFF;
		x->nv_hit = false; /* a demoted block again needs two NVMe hits */
		e->dram_entries--;
		e->st.demotions++;
		return;
	}
	ht_remove(e, x);
	e->st.evictions++;
	ent_free(e, x);
}

/* Bytes of one write-behind batch: the tier's batch, at most a quarter of DRAM (a batch pins
 * its blocks; puts need victims meanwhile). */
static uint64_t
wb_batch_cap(const struct ol_kve *e)
{
	uint64_t cap = ol_kvs_batch_bytes(e->spill), dram = (uint64_t)e->n_pages * OL_KVE_PAGE / 4;
	return cap < dram ? cap : dram;
}

/* Take the oldest dirty entries, up to one batch, off the FIFO and pin them. Lock held. */
static unsigned
wb_take(struct ol_kve *e)
{
	uint64_t cap = wb_batch_cap(e), bytes = 0;
	unsigned n = 0;
	if (e->dirty_head)
		e->wb_oldest_ms = e->dirty_head->put_ms;
	while (e->dirty_head && n < WB_MAX_ITEMS) {
		struct ent *x = e->dirty_head;
		uint64_t rs = ol_kvs_rec_size(x->len);
		if (n > 0 && bytes + rs > cap)
			break;
		dirty_remove(e, x);
		x->pins++;
		x->wb = true;
		e->wb_bytes += x->len;
		rec_of(x, &e->wb_items[n].rec);
		e->wb_items[n].val = e->base + x->off;
		e->wb_ents[n++] = x;
		bytes += rs;
	}
	return n;
}

/* Write one batch of the dirty FIFO (lock held, dropped during the write). Entries whose
 * write failed stay dirty but off the FIFO: eviction then writes or drops them itself.
 * Returns blocks written or -errno. */
static int
wb_batch(struct ol_kve *e, uint64_t *sent)
{
	uint64_t dropped[8], b0 = e->wb_bytes;
	unsigned nd, n = wb_take(e);
	*sent += e->wb_bytes - b0;
	e->wb_n = n;
	pthread_mutex_unlock(&e->mu);
	int rc = ol_kvs_append_batch(e->spill, e->wb_items, n, dropped, &nd);
	pthread_mutex_lock(&e->mu);
	e->wb_n = 0;
	for (unsigned i = 0; i < n; i++) {
		struct ent *x = e->wb_ents[i];
		x->pins--;
		x->wb = false;
		e->wb_bytes -= x->len;
		if (rc == 0 && x->state == ST_LIVE)
			ent_set_loc(e, x, &e->wb_items[i].loc);
	}
	drop_segments(e, dropped, nd); /* dropped to make room even when the write failed */
	for (unsigned i = 0; i < n; i++)
		if (e->wb_ents[i]->state == ST_DEAD && e->wb_ents[i]->pins == 0)
			ent_free(e, e->wb_ents[i]);
	pthread_cond_broadcast(&e->clean_cv);
	return rc < 0 ? rc : (int)n;
}

/* Hold the writer (lock free meanwhile) until sent bytes since t0_us fit the bandwidth cap.
 * Not at close: what is left is written at full speed. */
static void
wb_pace(struct ol_kve *e, uint64_t t0_us, uint64_t sent)
{
	if (!e->wb_bps)
		return;
	uint64_t due = t0_us + (uint64_t)((double)sent * 1e6 / (double)e->wb_bps), now;
	while (!e->stop && (now = ol_now_us()) < due) {
		uint64_t us = due - now;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(us / 1000000);
		ts.tv_nsec += (long)(us % 1000000) * 1000;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&e->wb_cv, &e->mu, &ts);
	}
}

/* Write the dirty FIFO until it is empty (lock held on entry and exit). The syncer makes the
 * segments durable about every writeback_ms while this runs, and after it; the writes do not
 * wait for it (a flush can cost 300 ms on a virtual disk, and slows the writes beside it).
 * Returns blocks written. */
static unsigned
writeback_run(struct ol_kve *e)
{
	unsigned n = 0, tick = e->wb_ms ? e->wb_ms : 1;
	uint64_t synced = ol_now_us() / 1000, t0 = ol_now_us(), sent = 0;
	e->wb_active = true;
	while (e->dirty_head) {
		int rc = wb_batch(e, &sent);
		if (rc < 0)
			break; /* disk trouble: the rest of the FIFO waits for the next tick */
		n += (unsigned)rc;
		wb_pace(e, t0, sent);
		if (ol_now_us() / 1000 - synced >= tick) {
			ol_kvs_sync_async(e->spill);
			synced = ol_now_us() / 1000;
		}
	}
	e->wb_active = false;
	if (n)
		ol_kvs_sync_async(e->spill);
	pthread_cond_broadcast(&e->clean_cv);
	return n;
}

static void *
writeback_main(void *arg)
{
	struct ol_kve *e = arg;
	unsigned tick = e->wb_ms / 4 ? e->wb_ms / 4 : 1;
	pthread_mutex_lock(&e->mu);
	while (!e->stop) {
		if (!e->wb_kick) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(tick % 1000) * 1000000L;
			ts.tv_sec += tick / 1000 + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&e->wb_cv, &e->mu, &ts);
		}
		if (e->stop)
			break;
		e->wb_kick = false;
		writeback_run(e);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int
ol_kve_flush(struct ol_kve *e)
{
	if (!e->spill)
		return 0;
	pthread_mutex_lock(&e->mu);
	if (wb_can_wait(e)) {
		while (e->dirty_head || e->wb_active) {
			wb_kick(e);
			pthread_cond_wait(&e->clean_cv, &e->mu);
		}
	} else {
		writeback_run(e);
	}
	pthread_mutex_unlock(&e->mu);
	return ol_kvs_sync(e->spill);
}

/* ---- open / close ---- */

static void
recover_one(void *arg, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc)
{
	struct ol_kve *e = arg;
	struct ol_kvk k;
	memcpy(k.b, r->kk, 48);
	uint64_t h = khash(&k);
	struct ent *x = ht_find(e, &k, h);
	if (r->ver > e->gver)
		e->gver = r->ver;
	if (x && x->ver >= r->ver)
		return;
	if (!x) {
		x = ol_xcalloc(1, sizeof(*x));
		x->k = k;
		x->h = h;
		x->off = OL_KVE_NOOFF;
		ht_insert(e, x);
	}
	x->ver = r->ver;
	if (r->flags & OL_KVS_TOMBSTONE) {
		/* kept as a dead placeholder until the scan ends: the log is not in version order
		 * (a tombstone may land before an older write of the same block) */
		if (x->loc.seg)
			e->nvme_entries--;
		x->loc.seg = 0;
		x->len = 0;
		x->state = ST_DEAD;
		return;
	}
	if (!x->loc.seg)
		e->nvme_entries++;
	x->state = ST_LIVE;
	x->len = r->len;
	x->loc = *loc;
}

/* Drop the placeholders of deleted blocks left by recovery. */
static void
recover_sweep(struct ol_kve *e)
{
	for (uint64_t i = 0; i <= e->ht_mask; i++) {
		struct ent *x = e->ht[i], *nx;
		for (; x; x = nx) {
			nx = x->hnext;
			if (x->state == ST_DEAD) {
				ht_remove(e, x);
				ent_free(e, x);
			}
		}
	}
}

static int
map_dram(struct ol_kve *e, const struct ol_kve_opts *o)
{
	uint64_t pages = o->dram_bytes / OL_KVE_PAGE;
	e->n_pages = (uint32_t)(pages ? pages : 1);
	uint64_t data = (uint64_t)e->n_pages * OL_KVE_PAGE, d = OL_KVE_PAGE;
	while ((d + data) / OL_KVE_UNIT * 8 > d)
		d += OL_KVE_PAGE;
	e->data_off = d;
	e->size = d + data;
	void *p;
	if (o->shm_name && o->shm_name[0]) {
		snprintf(e->shm_name, sizeof(e->shm_name), "%s", o->shm_name);
		/* a leftover of a crashed run */
		int rc = ol_kve_shm_unlink_stale(e->shm_name, true);
		if (rc < 0)
			return rc;
		int fd = shm_open(e->shm_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		/* held while the tier lives: the mark of a live object, in any PID namespace;
		 * taken before the object gets its size (a cleaner that holds the lock of an
		 * empty object for a moment leaves it alone: then we wait) */
		if (flock(fd, LOCK_EX) != 0 || ftruncate(fd, (off_t)e->size) != 0 ||
		    (o->shm_group &&
		     (fchown(fd, (uid_t)-1, o->shm_gid) != 0 || fchmod(fd, 0660) != 0))) {
			rc = -errno;
			close(fd);
			shm_unlink(e->shm_name);
			return rc;
		}
		p = mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
		e->shm_fd = fd;
		e->is_shm = true;
	} else {
		p = mmap(NULL, e->size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, e->size, MADV_HUGEPAGE); /* best effort: THP for shmem may be off */
	e->base = p;
	e->seqtab = (_Atomic uint64_t *)p;
	return 0;
}

/* Memory is short: under a quarter of RAM free, or of the shm file system. Prefaulting then
 * would take memory that other processes (or the tier's own puts) need sooner. */
static bool
memory_short(const struct ol_kve *e)
{
	struct sysinfo si;
	struct statvfs sv;
	if (sysinfo(&si) == 0 && si.freeram < si.totalram / 4)
		return true;
	return e->is_shm && statvfs("/dev/shm", &sv) == 0 && sv.f_bavail < sv.f_blocks / 4;
}

/* Populate the DRAM tier page by page at the lowest priority, so that puts after start do not
 * pay this machine's first touch of shared memory. A page a put claimed first is skipped;
 * populating a page in use is harmless (it writes nothing). Stops at close, when memory runs
 * short, or on the first failure: the rest is populated by use, as without this thread. */
static void *
prefault_main(void *arg)
{
	struct ol_kve *e = arg;
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	if (madvise(e->base, e->data_off, MADV_POPULATE_WRITE) != 0)
		return NULL;
	for (uint32_t p = 0; p < e->n_pages && !atomic_load(&e->pf_stop); p++) {
		if (p % 64 == 0 && memory_short(e)) {
			ol_info(
			    "kv: prefault of the DRAM tier stopped at page %u of %u: memory short",
			    p, e->n_pages);
			break;
		}
		pthread_mutex_lock(&e->mu);
		bool todo = !e->pages[p].faulted;
		e->pages[p].faulted = true;
		e->st.prefaulted += todo;
		pthread_mutex_unlock(&e->mu);
		uint8_t *at = e->base + e->data_off + (uint64_t)p * OL_KVE_PAGE;
		if (todo && madvise(at, OL_KVE_PAGE, MADV_POPULATE_WRITE) != 0) {
			ol_warn("kv: prefault of the DRAM tier stopped at page %u of %u: %s", p,
				e->n_pages, strerror(errno));
			break;
		}
	}
	return NULL;
}

static void
init_classes(struct ol_kve *e)
{
	uint64_t s = 8192;
	e->cls[0].size = 4096;
	for (int c = 1; c < NCLS; c += 2, s *= 2) {
		e->cls[c].size = s;
		if (c + 1 < NCLS)
			e->cls[c + 1].size = s + s / 2;
	}
	e->cls[NCLS - 1].size = OL_KVE_PAGE;
}

int
ol_kve_open(const struct ol_kve_opts *o, struct ol_kve **out)
{
	struct ol_kve *e = ol_xcalloc(1, sizeof(*e));
	e->shm_fd = -1;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->wb_cv, NULL);
	pthread_cond_init(&e->clean_cv, NULL);
	e->max_block = o->max_block ? o->max_block : (64u << 20);
	e->wb_ms = o->writeback_ms;
	e->strict = o->strict;
	e->wb_bps = o->writeback_bps;
	init_classes(e);
	int rc = map_dram(e, o);
	if (rc < 0) {
		ol_err("kv: cannot map the DRAM tier (%llu bytes, shm %s): %s",
		       (unsigned long long)o->dram_bytes, o->shm_name ? o->shm_name : "-",
		       strerror(-rc));
		free(e);
		return rc;
	}
	e->pages = ol_xcalloc(e->n_pages, sizeof(*e->pages));
	for (uint32_t p = 0; p < e->n_pages; p++)
		e->pages[p].cls = PG_FREE;
	e->ent_at = ol_xcalloc(e->size / OL_KVE_UNIT, sizeof(*e->ent_at));
	e->tag = ol_xcalloc(e->size / OL_KVE_UNIT, sizeof(*e->tag));
	e->ht_mask = 1023;
	e->ht = ol_xcalloc(e->ht_mask + 1, sizeof(*e->ht));
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
		ol_info("kv: NVMe tier %s: %llu blocks recovered", o->spill_dir,
			(unsigned long long)e->nvme_entries);
		e->wb_items = ol_xcalloc(WB_MAX_ITEMS, sizeof(*e->wb_items));
		e->wb_ents = ol_xcalloc(WB_MAX_ITEMS, sizeof(*e->wb_ents));
		rc = pthread_create(&e->wb, NULL, writeback_main, e);
		if (rc != 0) {
			ol_kve_close(e);
			return -rc;
		}
		e->wb_running = true;
	}
	if (o->prefault && pthread_create(&e->pf, NULL, prefault_main, e) == 0)
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
	if (e->wb_running) {
		pthread_mutex_lock(&e->mu);
		e->stop = true;
		pthread_cond_signal(&e->wb_cv);
		pthread_cond_broadcast(&e->clean_cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->wb, NULL);
		pthread_mutex_lock(&e->mu);
		e->wb_running = false;
		writeback_run(e);
		pthread_mutex_unlock(&e->mu);
	}
	for (uint64_t i = 0; e->ht && i <= e->ht_mask; i++) {
		struct ent *x = e->ht[i], *nx;
		for (; x; x = nx) {
			nx = x->hnext;
			free(x);
		}
	}
	ol_kvs_close(e->spill);
	if (e->base)
		munmap(e->base, e->size);
	if (e->is_shm)
		shm_unlink(e->shm_name);
	if (e->shm_fd >= 0)
		close(e->shm_fd); /* drops the lock */
	free(e->tag);
	for (int c = 0; c < NCLS; c++)
		free(e->cls[c].free);
	free(e->ht);
	free(e->ent_at);
	free(e->pages);
	free(e->wb_items);
	free(e->wb_ents);
	pthread_cond_destroy(&e->wb_cv);
	pthread_cond_destroy(&e->clean_cv);
	pthread_mutex_destroy(&e->mu);
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
	struct slot sl;
	int rc = OL_KV_OK;
	pthread_mutex_lock(&e->mu);
	if (ht_find(e, k, h)) {
		e->st.dup_puts++;
		rc = OL_KV_EXISTS;
		goto out;
	}
	if (slot_alloc(e, len ? len : 1, false, &sl) < 0) {
		e->st.full++;
		rc = OL_KV_FULL;
		goto out;
	}
	struct ent *x = ol_xcalloc(1, sizeof(*x));
	x->k = *k;
	x->h = h;
	x->len = len;
	x->pins = 1;
	x->state = ST_PENDING;
	s->foreign = ent_attach(e, x, &sl);
	slot_out(e, x, s);
out:
	pthread_mutex_unlock(&e->mu);
	if (rc == OL_KV_OK && sl.fresh)
		prefault(e, &sl); /* the slot is ours (pinned, pending): no lock needed */
	return rc;
}

static struct ent *
ent_by_slot(struct ol_kve *e, uint64_t off, uint64_t seq)
{
	if (off % OL_KVE_UNIT || off < e->data_off || off >= e->size)
		return NULL;
	struct ent *x = e->ent_at[off / OL_KVE_UNIT];
	return x && x->off == off && x->seq == seq ? x : NULL;
}

/* strict: hold a put until the write-behind thread appended x (lock held, free while
 * waiting; x pinned meanwhile). OL_KV_OK, or OL_KV_ERROR when the write failed: the block is
 * then taken out of the index (the put did not happen). */
static int
wait_written(struct ol_kve *e, struct ent *x)
{
	x->pins++;
	while (x->state == ST_LIVE && x->dirty && (x->in_dirty || x->wb)) {
		if (!e->wb_running && !e->wb_active) {
			writeback_run(e); /* no writer thread (closing): write it here */
			continue;
		}
		if (wb_can_wait(e))
			wb_kick(e);
		pthread_cond_wait(&e->clean_cv, &e->mu);
	}
	int rc = OL_KV_OK;
	if (x->state == ST_LIVE && x->dirty) {
		ht_remove(e, x);
		lru_remove(e, x);
		e->dram_entries--;
		x->state = ST_DEAD;
		rc = OL_KV_ERROR;
	}
	if (--x->pins == 0 && x->state != ST_LIVE)
		ent_free(e, x);
	return rc;
}

int
ol_kve_commit(struct ol_kve *e, const struct ol_kvk *k, uint64_t off, uint64_t seq, uint64_t len)
{
	int rc = OL_KV_OK;
	pthread_mutex_lock(&e->mu);
	struct ent *x = ent_by_slot(e, off, seq);
	if (!x || x->state != ST_PENDING || memcmp(x->k.b, k->b, 48) != 0 || len > x->len) {
		rc = OL_KV_ERROR;
		goto out;
	}
	if (ht_find(e, k, x->h)) {
		e->st.dup_puts++;
		ent_free(e, x);
		rc = OL_KV_EXISTS;
		goto out;
	}
	x->len = len;
	x->state = ST_LIVE;
	x->pins = 0;
	x->ver = ++e->gver;
	ht_insert(e, x);
	lru_append(e, x);
	e->dram_entries++;
	e->st.puts++;
	if (e->spill) {
		x->dirty = true;
		x->put_ms = ol_now_us() / 1000;
		dirty_append(e, x);
		if (e->strict)
			rc = wait_written(e, x);
		else if (!e->wb_active && (e->wb_ms == 0 || e->dirty_q_bytes >= wb_batch_cap(e)))
			wb_kick(e); /* a batch is ready: no need to wait for the tick */
	}
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

void
ol_kve_release(struct ol_kve *e, uint64_t off, uint64_t seq)
{
	pthread_mutex_lock(&e->mu);
	struct ent *x = ent_by_slot(e, off, seq);
	if (x && x->pins > 0 && --x->pins == 0 && x->state != ST_LIVE)
		ent_free(e, x);
	pthread_mutex_unlock(&e->mu);
}

static int
pin_dram(struct ol_kve *e, struct ent *x, struct ol_kve_slot *s)
{
	x->pins++;
	lru_remove(e, x);
	lru_append(e, x);
	slot_out(e, x, s);
	return OL_KV_OK;
}

/* x is NVMe only: read it (lock dropped), then promote it. A TCP reader (!need_dram) is
 * served from the read buffer on the entry's first NVMe hit and promotes only on the second:
 * a block read once from a random working set gains nothing from a DRAM slot, which costs an
 * eviction and a copy under the mutex. Lock held on entry and exit. */
static int
pin_nvme(struct ol_kve *e, const struct ol_kvk *k, uint64_t h, bool need_dram,
	 struct ol_kve_slot *s)
{
	struct ent *x = ht_find(e, k, h);
	struct ol_kvs_rec r;
	struct ol_kvs_loc loc = x->loc;
	const void *val;
	rec_of(x, &r);
	pthread_mutex_unlock(&e->mu);
	int rc = ol_kvs_read(e->spill, &r, &loc, &val);
	pthread_mutex_lock(&e->mu);
	x = ht_find(e, k, h);
	bool promote = need_dram || (x && x->nv_hit);
	struct slot sl;
	int ar = rc == 0 && promote ? slot_alloc(e, r.len ? r.len : 1, true, &sl) : -1;
	x = ht_find(e, k, h); /* slot_alloc may drop the lock (it waits for write-behind) */
	if (!x || x->ver != r.ver || x->off != OL_KVE_NOOFF) {
		if (ar == 0)
			slot_free(e, &sl);
		return x && x->ver == r.ver ? pin_dram(e, x, s) : OL_KV_MISS;
	}
	if (rc < 0) {
		if (rc == -EBADMSG || rc == -ENOENT) {
			ht_remove(e, x);
			ent_free(e, x);
		}
		e->st.corrupt += rc == -EBADMSG;
		return rc == -EBADMSG ? OL_KV_CORRUPT : OL_KV_MISS;
	}
	if (ar < 0) {
		if (need_dram)
			return OL_KV_MISS;
		x->nv_hit = true;
		s->ptr = (uint8_t *)val;
		s->off = OL_KVE_NOOFF;
		s->seq = 0;
		s->len = r.len;
		return OL_KV_OK;
	}
	if (sl.fresh)
		prefault(e, &sl);
	memcpy(e->base + sl.off, val, r.len);
	(void)ent_attach(e, x, &sl);
	e->dram_entries++;
	e->st.promotions++;
	return pin_dram(e, x, s);
}

int
ol_kve_pin(struct ol_kve *e, const struct ol_kvk *k, bool need_dram, struct ol_kve_slot *s)
{
	uint64_t h = khash(k);
	int rc;
	pthread_mutex_lock(&e->mu);
	struct ent *x = ht_find(e, k, h);
	if (!x) {
		rc = OL_KV_MISS;
	} else if (x->off != OL_KVE_NOOFF) {
		e->st.hits_dram++;
		rc = pin_dram(e, x, s);
	} else {
		rc = pin_nvme(e, k, h, need_dram, s);
		e->st.hits_nvme += rc == OL_KV_OK;
	}
	if (rc == OL_KV_OK)
		e->st.hits++;
	else
		e->st.misses++;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int
ol_kve_pin_dram(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s)
{
	uint64_t h = khash(k);
	int rc = OL_KV_MISS;
	pthread_mutex_lock(&e->mu);
	struct ent *x = ht_find(e, k, h);
	if (x && x->off == OL_KVE_NOOFF) {
		rc = OL_KVE_NVME; /* counted by the ol_kve_pin that follows */
	} else if (x) {
		e->st.hits_dram++;
		e->st.hits++;
		rc = pin_dram(e, x, s);
	} else {
		e->st.misses++;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

bool
ol_kve_nvme_only(struct ol_kve *e, const struct ol_kvk *k)
{
	uint64_t h = khash(k);
	pthread_mutex_lock(&e->mu);
	struct ent *x = ht_find(e, k, h);
	bool r = x && x->off == OL_KVE_NOOFF;
	pthread_mutex_unlock(&e->mu);
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
	pthread_mutex_lock(&e->mu);
	struct ent *x = ht_find(e, k, h);
	if (x) {
		*len = x->len;
		if (x->in_lru) { /* a lookup is a use: a block about to be loaded stays */
			lru_remove(e, x);
			lru_append(e, x);
		}
	}
	pthread_mutex_unlock(&e->mu);
	return x ? OL_KV_OK : OL_KV_MISS;
}

/* Append a tombstone for x (lock held, dropped during the write: nobody can reach x, which
 * is out of the index and pinned by the caller). */
static void
tombstone(struct ol_kve *e, struct ent *x)
{
	struct ol_kvs_rec r;
	struct ol_kvs_loc loc;
	uint64_t dropped[8];
	unsigned nd;
	rec_of(x, &r);
	r.ver = ++e->gver;
	r.flags = OL_KVS_TOMBSTONE;
	pthread_mutex_unlock(&e->mu);
	int rc = ol_kvs_append(e->spill, &r, NULL, &loc, dropped, &nd);
	pthread_mutex_lock(&e->mu);
	if (rc < 0)
		ol_warn("kv: tombstone write failed; the block may come back after a restart");
	drop_segments(e, dropped, nd);
}

int
ol_kve_delete(struct ol_kve *e, const struct ol_kvk *k)
{
	uint64_t h = khash(k);
	pthread_mutex_lock(&e->mu);
	struct ent *x = ht_find(e, k, h);
	if (!x) {
		pthread_mutex_unlock(&e->mu);
		return OL_KV_MISS;
	}
	ht_remove(e, x);
	e->st.deletes++;
	/* on NVMe, or maybe being written there (pinned): a restart must not bring it back */
	bool tomb = e->spill && (x->loc.seg || x->pins > 0);
	lru_remove(e, x);
	dirty_remove(e, x);
	if (x->off != OL_KVE_NOOFF)
		e->dram_entries--;
	if (x->loc.seg)
		e->nvme_entries--;
	x->loc.seg = 0;
	x->state = ST_DEAD; /* freed by whoever drops the last pin */
	x->pins++;
	if (tomb)
		tombstone(e, x);
	if (--x->pins == 0)
		ent_free(e, x);
	pthread_mutex_unlock(&e->mu);
	return OL_KV_OK;
}
