/* kv/engine.h - the KV index and its two tiers (internal to kv/).
 *
 * DRAM tier: one POSIX shm object = [u64 slot-sequence table: one per 4 KiB unit][2 MiB pages].
 * A page holds slots of one size class (4 KiB .. 2 MiB, steps of x1.5/x1.33); a block larger
 * than a page takes a run of contiguous pages. Entries live in a hash table keyed by
 * (32-byte key, 128-bit namespace hash); DRAM-resident entries sit on one LRU list.
 *
 * Sequence rule (what makes local readers safe): every slot handed out is given a fresh seq,
 * stored in the table at seq[off / 4096] before anyone writes the slot. A reader that copied
 * a slot re-reads that seq after its copy; a mismatch means the slot was recycled: a miss.
 * Pinned slots (readers in flight, writes in flight) are never evicted or recycled.
 *
 * Eviction: LRU, preferring an entry of the wanted size class; an evicted entry that is on
 * NVMe is demoted (kept in the index, NVMe only); with no NVMe tier it is dropped. An NVMe hit
 * of a local reader (need_dram) is promoted back into DRAM; a TCP reader is served from the
 * read buffer on the entry's first NVMe hit and promotes it on the second (reset on demotion):
 * a random working set larger than DRAM then costs no eviction and copy per read.
 *
 * Write-behind (NVMe tier on): every put is dirty until the write-behind thread has appended
 * it, oldest first, in batches of up to 16 MiB, within writeback_ms while the disk keeps up.
 * async (default): a put never waits for the disk; a dirty LRU victim is dropped unwritten
 * (stats wb_dropped; a later get misses). strict (opts.strict): ol_kve_commit returns once the
 * block is appended to the NVMe tier, and a put whose victim is dirty waits for the writer
 * (no mutex held meanwhile). Deletes append a tombstone; recovery honours versions, not
 * log order.
 *
 * Namespaces: the engine counts, per namespace (the 16-byte hash in a key), the blocks and
 * value bytes it holds in each tier now (ol_kve_ns_each). With a quota (opts.ns_quota_frac),
 * a put or promotion that would take its namespace's DRAM bytes past the quota first moves
 * that namespace's own least recently used unpinned blocks out of DRAM (demoted to NVMe, or
 * dropped): the blocks of other namespaces are not touched for it. A block larger than the
 * quota, or one that does not fit when every block of its namespace left in DRAM is pinned,
 * is refused (OL_KV_FULL), as when the whole pool is full. Puts of one namespace in flight
 * together are each checked against what is committed, so together they may pass the quota
 * by what they reserve; the next put of that namespace brings it back under.
 *
 * Removal events: every removal of a block from the whole pool (dropped from DRAM with no NVMe
 * copy, its NVMe segment dropped, deleted, found corrupt or gone on a read, a strict put whose
 * NVMe write failed) is numbered by a 64-bit sequence and kept, with its key, in a bounded
 * ring (opts.events in all, spread over the stripes: a stripe's oldest are overwritten first).
 * A demotion to NVMe keeps the block and is no event. ol_kve_events reads them back per
 * namespace, so that a client can tell a router which blocks are gone.
 *
 * Thread-safe: the index is striped by key hash, a mutex per stripe; the slab allocator and
 * the write-behind state have their own (see engine_int.h, "Locking"). Bulk copies of pinned
 * slots, disk writes, promotion copies and the waits above happen outside them. Eviction is
 * global LRU across stripes. Threads: write-behind, the NVMe tier's syncer, and (with
 * opts.prefault) a low-priority prefault of the DRAM tier, all joined by ol_kve_close. */
#ifndef OL_KV_ENGINE_H
#define OL_KV_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/spill.h"

#define OL_KVE_UNIT  4096u
#define OL_KVE_PAGE  (2u << 20)
#define OL_KVE_NOOFF UINT64_MAX

struct ol_kve;

struct ol_kve_opts {
	uint64_t dram_bytes;
	const char *shm_name;  /* "/name"; NULL or "" = anonymous memory (no local path) */
	const char *spill_dir; /* NULL or "" = no NVMe tier */
	uint64_t spill_bytes;
	uint64_t max_block;
	unsigned writeback_ms; /* write-behind delay bound; the thread runs when spill_dir set */
	bool prefault;	       /* populate the DRAM tier in a low-priority thread after open */
	bool shm_group;	       /* the shm object is 0660 with group shm_gid (else 0600) */
	unsigned shm_gid;
	bool strict;		/* writeback = "strict": a put returns once its block is on NVMe */
	uint64_t writeback_bps; /* cap on write-behind bytes per second (0 = none) */
	double ns_quota_frac;	/* share of the DRAM tier one namespace may hold (0 = no quota) */
	uint64_t events;	/* removal events kept (0 = none; see Removal events) */
};

/* key[32] + namespace hash[16] */
struct ol_kvk {
	uint8_t b[48];
};

/* A pinned or reserved slot. ptr is valid until unpin/commit/abort. */
struct ol_kve_slot {
	uint8_t *ptr;
	uint64_t off; /* shm offset, OL_KVE_NOOFF when ptr is a thread-local bounce copy */
	uint64_t seq;
	uint64_t len;
	uint64_t foreign; /* ol_kve_alloc: bytes from here to len may hold another namespace's
			     old data (len = none): a caller that lets the client read the slot
			     before writing it (ALLOC over shm) zeroes them */
};

struct ol_kve_stats {
	uint64_t dram_cap, dram_used, dram_entries, nvme_cap, nvme_used, nvme_entries, entries;
	uint64_t puts, dup_puts, hits, hits_dram, hits_nvme, misses, evictions, demotions;
	uint64_t promotions, writebacks, corrupt, deletes, pinned, full;
	uint64_t dirty_bytes;	  /* written to DRAM, not yet to NVMe (queued + being written) */
	uint64_t dirty_blocks;	  /* the same in blocks: the write-behind backlog */
	uint64_t dirty_age_ms;	  /* age of the oldest block not yet on NVMe (0 = none) */
	uint64_t wb_dropped;	  /* blocks evicted from DRAM before their write-behind */
	uint64_t writeback_waits; /* times a put waited for the write-behind thread (strict) */
	uint64_t prefaulted;	  /* DRAM pages populated by the background prefault */
};

/* The shm object of the DRAM tier is held with flock(LOCK_EX) while the tier lives (the lock
 * is the liveness mark, valid across PID namespaces and containers sharing /dev/shm). */
int ol_kve_open(const struct ol_kve_opts *o, struct ol_kve **out);
/* Unlink shm object name if no live tier holds it: 1 = unlinked, 0 = no such object,
 * -EADDRINUSE = a live tier holds its lock (or, unless even_empty, the object is still empty:
 * a tier being created, whose owner takes the lock before it sizes the object), other -errno.
 */
int ol_kve_shm_unlink_stale(const char *name, bool even_empty);
/* Writes every dirty block to the NVMe tier, then frees. */
void ol_kve_close(struct ol_kve *e);

void ol_kve_ns_hash(const void *ns, size_t len, uint8_t out[16]);
void ol_kve_key(struct ol_kvk *k, const uint8_t key[32], const uint8_t ns[16]);

/* Reserve a slot of len bytes for k. Returns OL_KV_OK (slot filled, pinned, pending),
 * OL_KV_EXISTS (k is stored; nothing reserved), OL_KV_TOO_LARGE, OL_KV_FULL. strict: may block
 * while the write-behind thread writes a dirty victim; async: only while every candidate is
 * pinned by the batch being written. */
int ol_kve_alloc(struct ol_kve *e, const struct ol_kvk *k, uint64_t len, struct ol_kve_slot *s);
/* Publish a reserved slot under k (len <= reserved). OL_KV_OK, OL_KV_EXISTS (another put won;
 * the slot is freed), OL_KV_ERROR (no such pending slot; strict: the NVMe write failed and the
 * block is not stored). strict: blocks until the block is on NVMe. */
int ol_kve_commit(struct ol_kve *e, const struct ol_kvk *k, uint64_t off, uint64_t seq,
		  uint64_t len);
/* ol_kve_commit of a slot reserved under any key of k's namespace (a reservation made before
 * the key was known): the slot is published under k, moved to k's stripe when the reserved key
 * hashed elsewhere (it then takes a new sequence). Same results; OL_KV_ERROR also when the
 * reservation belongs to another namespace. */
int ol_kve_commit_as(struct ol_kve *e, const struct ol_kvk *k, uint64_t off, uint64_t seq,
		     uint64_t len);
/* Drop a reservation or a pin (matched by off+seq; stale pairs are ignored). */
void ol_kve_release(struct ol_kve *e, uint64_t off, uint64_t seq);

/* Find k and pin its bytes. need_dram: fail with OL_KV_MISS rather than return a bounce copy
 * (local readers need a shm slot). OL_KV_OK, OL_KV_MISS, OL_KV_CORRUPT. Refreshes LRU. */
int ol_kve_pin(struct ol_kve *e, const struct ol_kvk *k, bool need_dram, struct ol_kve_slot *s);
/* ol_kve_pin without waiting for a disk (an event loop's thread may call it): OL_KV_OK (k is in
 * DRAM, pinned), OL_KV_MISS, or OL_KVE_NVME when k is on the NVMe tier only: nothing is pinned
 * or counted, and the caller runs ol_kve_pin where a blocking read is allowed. */
#define OL_KVE_NVME 1000
int ol_kve_pin_dram(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s);
/* A GET whose NVMe-tier read the caller does itself, on its own ring (an event loop's thread:
 * neither call waits for a disk):
 *
 *   ol_kve_pin_start: OL_KV_OK (k is in DRAM: pinned in s, as ol_kve_pin_dram), OL_KV_MISS,
 *     or OL_KVE_NVME: k is on the NVMe tier only; rd->ext says what to read (rd->ext.len bytes
 *     at rd->ext.off of rd->ext.fd, into a buffer aligned to OL_KVS_ALIGN: the file may be
 *     O_DIRECT) and holds that extent so it is not dropped or reused meanwhile. The caller
 *     then ends rd exactly once: ol_kve_pin_finish after its read, or ol_kve_pin_abandon.
 *   ol_kve_pin_finish: res = bytes read into buf (all of rd->ext.len; fewer or -errno is a
 *     failed read), then as ol_kve_pin(need_dram false): the record is checked (header,
 *     identity, value checksum: a torn or recycled record is never returned), the key must
 *     still name that version, and the block is promoted to DRAM on its second NVMe hit (a
 *     slot taken without waiting: no clean victim, no promotion). OL_KV_OK with s a DRAM pin
 *     (s->off set) or s->ptr inside buf (s->off == OL_KVE_NOOFF, valid while buf is),
 *     OL_KV_MISS (deleted, replaced or dropped meanwhile; a failed read), OL_KV_CORRUPT.
 *   ol_kve_pin_abandon: drop rd's hold, nothing read or counted.
 * Any thread; each takes the key's stripe mutex briefly. Counted as ol_kve_pin counts. */
struct ol_kve_nvrd {
	struct ol_kvs_ext ext;
	/* private */
	struct ol_kvk k;
	uint64_t h;
	uint16_t ns;
	bool promote;
	struct ol_kvs_rec rec;
	struct ol_kvs_loc loc;
};
int ol_kve_pin_start(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s,
		     struct ol_kve_nvrd *rd);
int ol_kve_pin_finish(struct ol_kve *e, struct ol_kve_nvrd *rd, int res, const uint8_t *buf,
		      struct ol_kve_slot *s);
void ol_kve_pin_abandon(struct ol_kve *e, struct ol_kve_nvrd *rd);
/* Whether k is stored on the NVMe tier only (a pin of it would read the disk). A hint: the
 * answer may change right after. */
bool ol_kve_nvme_only(struct ol_kve *e, const struct ol_kvk *k);
/* Which calls may block on a disk: with an NVMe tier, ol_kve_pin and ol_kve_delete (a
 * tombstone); strict, also ol_kve_alloc and ol_kve_commit. */
bool ol_kve_has_spill(const struct ol_kve *e);
bool ol_kve_strict(const struct ol_kve *e);
/* OL_KV_OK (*len set) or OL_KV_MISS. Refreshes LRU (a DRAM entry becomes the newest): a
 * lookup before a load keeps the block it found. */
int ol_kve_exists(struct ol_kve *e, const struct ol_kvk *k, uint64_t *len);
/* OL_KV_OK or OL_KV_MISS. */
int ol_kve_delete(struct ol_kve *e, const struct ol_kvk *k);

void ol_kve_get_stats(struct ol_kve *e, struct ol_kve_stats *st);

#define OL_KVE_EVENTS_DEF 65536u
#define OL_KVE_EV_NOW	  UINT64_MAX /* from: no events, only the sequence to start from */
/* The keys of namespace hash ns removed with a sequence >= from (see Removal events), oldest
 * first, at most max into keys. *next: the sequence to ask from next time (after the last key
 * returned, or the next one to be given). *lost: a ring overwrote events of ns numbered >=
 * from (another namespace's overflow alone does not count; it may only while ns's own events
 * are being overwritten during this read), or from is past the sequence given so far (a
 * cursor from an earlier start of the server): keys may be missing. Returns how many keys.
 * Any thread; takes every stripe's mutex in turn, briefly; mallocs. */
unsigned ol_kve_events(struct ol_kve *e, const uint8_t ns[16], uint64_t from, uint8_t (*keys)[32],
		       unsigned max, uint64_t *next, bool *lost);
/* How many events the rings hold in all (0: opts.events was 0, no events kept). */
uint64_t ol_kve_events_cap(const struct ol_kve *e);

/* What one namespace holds now (see Namespaces above). */
struct ol_kve_ns {
	const char *name; /* as a client said at HELLO; NULL = not said since start (blocks
			     recovered from NVMe), or the shared slot */
	bool other;	  /* the slot shared by namespaces past the first OL_KVE_NS_SLOTS - 1 */
	uint8_t id[16];	  /* the namespace hash (zeros for the shared slot) */
	uint64_t dram_blocks, dram_bytes, nvme_blocks, nvme_bytes;
	uint64_t quota_evictions; /* own blocks moved out of DRAM to keep to the quota */
};
/* Give the namespace with hash ns its name (len bytes, any bytes), for the figures: called at
 * HELLO. The first name given to a hash stays. Any thread. */
void ol_kve_ns_name(struct ol_kve *e, const uint8_t ns[16], const char *name, size_t len);
/* Call fn for every namespace the engine has met since open (the shared slot too when it
 * holds or held anything), in the order met. fn runs under the engine's namespace mutex: it
 * must not call the engine. n and n->name are valid during the call only. */
void ol_kve_ns_each(struct ol_kve *e, void (*fn)(void *arg, const struct ol_kve_ns *n), void *arg);
/* The label of a namespace for figures: its name, "(other)" for the shared slot, or
 * "(unnamed <32 hex digits>)" (buf, at least 48 bytes) before its name is known. */
const char *ol_kve_ns_label(const struct ol_kve_ns *n, char *buf, size_t cap);
/* DRAM value bytes one namespace may hold (0 = no quota). */
uint64_t ol_kve_ns_quota(const struct ol_kve *e);
/* Stats as one JSON object into buf; returns length or -ENOSPC. The object ends with
 * "namespaces": [{"namespace", "dram_blocks", "dram_bytes", "nvme_blocks", "nvme_bytes",
 * "quota_evictions"}, ...] (ol_kve_ns_each); rows that do not fit in cap are left out and
 * counted in "namespaces_left_off". */
int ol_kve_stats_json(struct ol_kve *e, char *buf, size_t cap);

/* The durability promise of this pool's writeback setting, one sentence (static string). */
const char *ol_kve_promise(const struct ol_kve *e);

/* Shm geometry for HELLO. */
const char *ol_kve_shm_name(const struct ol_kve *e);
uint64_t ol_kve_shm_size(const struct ol_kve *e);
/* Where the DRAM tier is mapped in this process (ol_kve_shm_size bytes; the UCX transport
 * registers it once). Valid until ol_kve_close. */
uint8_t *ol_kve_shm_base(const struct ol_kve *e);
uint64_t ol_kve_max_block(const struct ol_kve *e);
uint64_t ol_kve_epoch(const struct ol_kve *e);

/* Wait until every dirty block is on NVMe (written by the write-behind thread, or here when
 * it does not run) and fdatasynced. Tests; shutdown. 0 or -errno. */
int ol_kve_flush(struct ol_kve *e);

#endif
