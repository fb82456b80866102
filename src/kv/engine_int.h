/* kv/engine_int.h - private structures of the KV engine (engine.c, engine_stats.c). */
#ifndef OL_KV_ENGINE_INT_H
#define OL_KV_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv/engine.h"
#include "kv/spill.h"

#define NCLS	   18
#define PG_FREE	   (-1)
#define PG_LARGE   (-2)
#define PG_TAIL	   (-3)
#define CLS_LARGE  (-1)
#define ST_PENDING 0
#define ST_LIVE	   1
#define ST_DEAD	   2

/* Locking. The index is split into stripes by key hash (a power of two, about 4 per core,
 * at most OL_KVE_MAX_STRIPES): each stripe has its own mutex, hash chains, DRAM LRU, dirty
 * FIFO, condition (strict puts wait there for their block) and counters. An entry belongs to
 * the stripe of its key; every field of an entry is under its stripe's mutex. The slab
 * allocator (pages, size classes, slot sequences, first-touch marks) has its own mutex amu,
 * held only for a slot's alloc or free, never across a copy or an I/O. The write-behind
 * state has wmu. Lock order: a stripe, then amu or wmu; never two stripes at once; nothing
 * is taken under amu; wmu is not held while a stripe is taken (the writer drops it).
 *
 * A slot's sequence carries the stripe that owns it in its low 8 bits, so that release and
 * commit, which name a slot by (off, seq), lock the right stripe; a slot is freed only under
 * its owner stripe's mutex, so a matching seq in the table under that mutex means the slot,
 * and ent_at[] at it, are that stripe's. */
#define OL_KVE_MAX_STRIPES 64
#define SEQ_SID_BITS	   8

/* Namespaces. Each namespace the engine meets (its 16-byte hash, from a key or a HELLO) is given
 * a slot of ns[] on first sight, up to OL_KVE_NS_SLOTS - 1 of them; later ones share slot 0
 * ("(other)"). A slot is never reused. Lookup is lock-free (a slot's id0 is published with
 * release after id1); claiming a slot or naming one takes nsmu. The residency counters are
 * atomics changed under the stripe mutex of the entry that moves (every tier move of an entry
 * is under its stripe's mutex), read without a lock: each is exact once the moves in flight
 * are done. An entry's slot (ent.ns) is fixed when the entry is made. Per stripe, the DRAM
 * entries of each namespace slot also sit on their own LRU list (nsl[2 * slot]: head,
 * nsl[2 * slot + 1]: tail), in the order of the stripe's LRU: the oldest block of a namespace
 * over its quota is found at the heads of those lists. */
#define OL_KVE_NS_SLOTS 256

struct kns {
	_Atomic uint64_t id0; /* bytes 0..7 of the namespace hash | 1; 0 = free slot */
	uint64_t id1;	      /* bytes 8..15 */
	_Atomic int64_t dram_n, dram_b, nvme_n, nvme_b; /* blocks and value bytes held */
	_Atomic uint64_t quota_ev; /* own blocks moved out of DRAM to keep to the quota */
	_Atomic uint64_t ev_gone;  /* 1 + the highest sequence of its events a ring overwrote */
	char *name;		   /* as a client said at HELLO (nsmu); NULL = not yet */
} __attribute__((aligned(64)));

struct ent {
	struct ol_kvk k;
	uint64_t h;
	struct ent *hnext;
	struct ent *lprev, *lnext; /* DRAM LRU: head = least recently used */
	struct ent *dprev, *dnext; /* dirty FIFO */
	struct ent *nprev, *nnext; /* its namespace's LRU in the stripe (with lprev/lnext) */
	uint64_t len, ver;
	uint64_t off, seq; /* DRAM slot, off = OL_KVE_NOOFF when not in DRAM */
	uint64_t put_ms;   /* when it was committed (dirty since then): the backlog's age */
	uint64_t lru_t;	   /* engine-wide LRU clock at its last touch (NVMe only: last hit) */
	int cls;
	uint32_t npages, pins;
	uint16_t ns; /* namespace slot (see Namespaces) */
	uint8_t state;
	bool dirty, in_lru, in_dirty;
	bool wb;     /* in the write-behind batch being written (holds one pin) */
	bool nv_hit; /* NVMe only, served to TCP without promotion at lru_t: a next hit soon
		      * enough after promotes (nv_promote) */
	struct ol_kvs_loc loc; /* NVMe copy; seg 0 = none */
};

struct slot {
	uint64_t off, seq;
	int cls;
	uint32_t npages;
	bool fresh; /* its pages were never touched: prefault them */
};

struct page {
	int16_t cls;
	bool faulted; /* prefaulted in our mapping */
	uint32_t used;
	uint32_t run;
};

struct sclass {
	uint64_t size;
	uint64_t *free; /* stack of free slot offsets */
	size_t nfree, cap;
};

/* Removal events. Every removal of a block from the whole pool (a drop from DRAM with no NVMe
 * copy, an NVMe segment dropped, a delete, a corrupt or vanished record, a strict put whose
 * write failed) takes the next number of e->ev_seq and appends (sequence, key) to the ring of
 * the block's stripe, under that stripe's mutex (no lock shared by every core). A demotion to
 * NVMe keeps the block: no event. Each ring holds ev_mask + 1 events, the oldest overwritten
 * first (counted in the stripe's ev_gone, and in its namespace's: a reader is told `lost` only
 * when both passed its cursor, so another namespace's overflow does not count against it). A
 * reader (ol_kve_events) takes the next sequence first, then each stripe's mutex in turn, and
 * merges by sequence: an event numbered before that load was appended under a mutex the
 * reader then waits for, so none is skipped. */
struct kev {
	uint64_t seq;
	struct ol_kvk k;
	uint16_t ns; /* the block's namespace slot */
};

/* One stripe of the index (see Locking above). */
struct kstripe {
	pthread_mutex_t mu;
	pthread_cond_t clean_cv; /* a block of this stripe left the write-behind (strict waits) */
	struct ent **ht;
	uint64_t ht_mask, n_ent;
	struct ent *lru_head, *lru_tail, *dirty_head, *dirty_tail;
	struct ent **nsl;	    /* per namespace slot: head and tail of its DRAM LRU here */
	_Atomic uint64_t dirty_old; /* put_ms of dirty_head; UINT64_MAX when none */
	uint64_t dram_entries, nvme_entries;
	struct ol_kve_stats st; /* the counters of this stripe's operations */
	struct kev *ev;		/* its ring of removal events (see Removal events) */
	uint64_t ev_head;	/* events appended to it since open */
	uint64_t ev_gone;	/* 1 + the highest sequence it overwrote (0 = none) */
} __attribute__((aligned(64)));

struct ol_kve {
	uint8_t *base;
	uint64_t size, data_off;
	bool is_shm;
	int shm_fd; /* open and flock()ed while the tier lives */
	char shm_name[256];
	uint32_t n_pages;
	_Atomic uint64_t *seqtab;
	unsigned nstripe;
	struct kstripe *stripes;
	/* the slab allocator: amu */
	pthread_mutex_t amu;
	struct page *pages;
	struct sclass cls[NCLS];
	uint64_t gseq, dram_used, prefaulted;
	uint64_t *tag;	       /* per unit: namespace tag of the bytes it holds (0 = never used);
				  written by the slot's owner only */
	struct ent **ent_at;   /* per unit: the entry whose slot starts there (owner stripe's mu) */
	_Atomic uint64_t gver; /* versions of puts and tombstones */
	_Atomic uint64_t lru_clock; /* LRU order across stripes */
	struct kns *ns;		    /* OL_KVE_NS_SLOTS namespace slots (see Namespaces) */
	pthread_mutex_t nsmu;	    /* claiming or naming a namespace slot */
	uint64_t quota;		    /* DRAM value bytes one namespace may hold (0 = no quota) */
	uint64_t epoch, max_block;
	uint64_t ev_mask; /* per stripe ring: ev_mask + 1 events (see Removal events) */
	/* the next removal event's sequence, bumped by every removal: padded so that it shares
	 * no cache line with the fields every put reads (the struct is calloc'ed, not aligned) */
	char ev_pad0[64];
	_Atomic uint64_t ev_seq;
	char ev_pad1[64];
	struct ol_kvs *spill;
	/* write-behind: one thread (or the closer, after it stopped) writes the dirty FIFOs in
	 * batches, oldest first across stripes, and bumps wb_gen and broadcasts clean_cv after
	 * every batch. async: a put never waits for it (a dirty LRU victim is dropped unwritten,
	 * counted); strict: a put waits on its stripe's clean_cv until its own block is written,
	 * and on clean_cv for a dirty victim to be written. Under wmu unless atomic. */
	pthread_mutex_t wmu;
	pthread_t wb;
	pthread_cond_t wb_cv, clean_cv;
	_Atomic bool wb_running, stop, wb_active;
	bool wb_kick;
	uint64_t wb_gen, wb_waits;
	bool strict;
	unsigned wb_ms;
	uint64_t wb_bps; /* write-behind bandwidth cap, bytes per second (0 = none) */
	_Atomic uint64_t dirty_q_bytes; /* value bytes queued on the dirty FIFOs */
	_Atomic uint64_t dirty_q_n;	/* blocks queued on the dirty FIFOs */
	_Atomic uint64_t wb_bytes;	/* value bytes in the batch being written */
	_Atomic uint64_t wb_n;		/* blocks in the batch being written */
	_Atomic uint64_t wb_oldest_ms;	/* put_ms of the oldest block in that batch */
	struct ol_kvs_item *wb_items;	/* the writer's */
	struct ent **wb_ents;
	/* background prefault of the DRAM tier (low priority, stopped by close) */
	pthread_t pf;
	bool pf_running;
	_Atomic bool pf_stop;
	int warm_fd; /* a 2 MiB memfd the prefault copies pages into (see engine_slab.c); -1 */
};

/* engine_ns.c: namespace slots (see Namespaces). */
void ol_kve_ns_init(struct ol_kve *e);
void ol_kve_ns_fini(struct ol_kve *e);
/* The slot of namespace hash id (claimed on first sight; 0 when the table is full). */
uint16_t ol_kve_ns_slot(struct ol_kve *e, const uint8_t id[16]);
/* Append the "namespaces" rows to a JSON object being written in buf (len bytes so far, cap
 * in all, keeping room bytes free for the caller). Returns the new length. */
size_t ol_kve_ns_json(struct ol_kve *e, char *buf, size_t len, size_t cap, size_t room);

/* engine_events.c: removal events (see Removal events). */
void ol_kve_ev_init(struct ol_kve *e, uint64_t total);
void ol_kve_ev_fini(struct ol_kve *e);
void ol_kve_ev_gone(struct ol_kve *e, struct kstripe *st, const struct kev *v);
/* Note that x left the pool (x's stripe st, its mutex held). */
static inline void
ol_kve_ev_note(struct ol_kve *e, struct kstripe *st, const struct ent *x)
{
	if (!st->ev)
		return; /* events off */
	struct kev *v = &st->ev[st->ev_head++ & e->ev_mask];
	if (st->ev_head > e->ev_mask + 1)
		ol_kve_ev_gone(e, st, v);
	v->seq = atomic_fetch_add_explicit(&e->ev_seq, 1, memory_order_relaxed);
	v->k = x->k;
	v->ns = x->ns;
}

/* Residency of x in a tier changes by sign (x's stripe's mutex held; x->len is what counts).
 */
static inline void
ol_kve_res(struct ol_kve *e, const struct ent *x, bool nvme, int sign)
{
	struct kns *n = &e->ns[x->ns];
	int64_t b = sign * (int64_t)x->len;
	atomic_fetch_add_explicit(nvme ? &n->nvme_n : &n->dram_n, sign, memory_order_relaxed);
	atomic_fetch_add_explicit(nvme ? &n->nvme_b : &n->dram_b, b, memory_order_relaxed);
}

/* engine_slab.c: the DRAM tier (amu inside; see Locking). */
void ol_kve_slab_init(struct ol_kve *e);
void ol_kve_slab_fini(struct ol_kve *e);
/* Map the tier (shm or anonymous) and set up its pages. 0 or -errno. */
int ol_kve_map_dram(struct ol_kve *e, const struct ol_kve_opts *o);
/* Take a free slot of len bytes for stripe sid: s->cls and s->npages are set in any case;
 * 0 (s filled, its seq in the table, ent_at cleared), -EAGAIN (none free: evict and retry),
 * -ENOSPC (larger than the tier). */
int ol_kve_slot_take(struct ol_kve *e, uint64_t len, unsigned sid, struct slot *s);
/* Give a slot that no stripe owns (detached from its entry) a fresh sequence naming stripe sid,
 * stored in the table. */
void ol_kve_slot_reseq(struct ol_kve *e, struct slot *s, unsigned sid);
/* Free a slot (its owner stripe's mutex held, or the slot never published). */
void ol_kve_slot_free(struct ol_kve *e, const struct slot *s);
/* Populate a fresh slot's pages (no lock: the slot is the caller's). */
void ol_kve_slot_prefault(struct ol_kve *e, const struct slot *s);
/* The background prefault thread. */
void *ol_kve_prefault_main(void *arg);

#endif
