/* tests/unit/test_kv_stripes.c - the striped KV index under contention: several threads put,
 * get (pinned DRAM reads and NVMe reads), delete, abort reservations and evict, on a small
 * DRAM tier, over a key space small enough that they meet on the same keys and stripes.
 * Every block is self-describing (its key id and the seed of its put in a header, the rest a
 * pattern of that seed), so a get that returns a torn block, another key's block or a block
 * of a put never made is caught. Then every key reads back valid or misses, the counters
 * agree with the keys, and (NVMe) a reopen brings back exactly the keys that were there; the
 * same in strict write-behind. Also: eviction across stripes keeps LRU order with mixed block
 * sizes. Half the hammer's reads
 * of TCP readers go through ol_kve_pin_start / pin_finish with the read done by the test (as
 * the KV loops do it on their rings), racing the puts, deletes and evictions of their keys. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "base/log.h"
#include "kv/engine.h"
#include "kv/spill.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB	  (1u << 20)
#define KiB	  1024u
#define H_THREADS 6
#define H_OPS	  1500 /* operations per thread */
#define H_KEYS	  96

static uint8_t NS[16];

struct hammer {
	struct ol_kve *e;
	_Atomic uint64_t issued[H_THREADS]; /* seeds handed out per thread (counter part) */
	_Atomic int bad, torn_seq, puts, hits, misses, dels, fulls, aborts;
	_Atomic int split_nv; /* reads done by the caller (pin_start / pin_finish) from NVMe */
};

struct harg {
	struct hammer *h;
	unsigned t;
};

static size_t
hlen(uint64_t seed)
{
	return 16 + (size_t)((seed * 2654435761u) % (256 * KiB));
}

static void
hkey(struct ol_kvk *k, uint64_t id)
{
	uint8_t key[32];
	make_key(key, id);
	ol_kve_key(k, key, NS);
}

static void
hfill(uint8_t *p, uint64_t id, uint64_t seed)
{
	memcpy(p, &id, 8);
	memcpy(p + 8, &seed, 8);
	fill_pattern(p + 16, hlen(seed) - 16, seed);
}

/* The bytes are exactly those of a put of key id that some thread made. */
static bool
hcheck(struct hammer *h, const uint8_t *p, uint64_t len, uint64_t id)
{
	uint64_t id2, seed;
	if (len < 16)
		return false;
	memcpy(&id2, p, 8);
	memcpy(&seed, p + 8, 8);
	unsigned t = (unsigned)(seed >> 32);
	if (id2 != id || t >= H_THREADS || (seed & 0xffffffffu) == 0 ||
	    (seed & 0xffffffffu) > atomic_load(&h->issued[t]) || len != hlen(seed))
		return false;
	return check_pattern(p + 16, len - 16, seed);
}

static uint64_t
seq_at(const struct ol_kve_slot *s)
{
	const _Atomic uint64_t *t = (const _Atomic uint64_t *)(s->ptr - s->off);
	return atomic_load(&t[s->off / OL_KVE_UNIT]);
}

static void
h_put(struct hammer *h, unsigned t, uint64_t id, bool abort_it)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	uint64_t seed = ((uint64_t)t << 32) | (atomic_load(&h->issued[t]) + 1);
	atomic_fetch_add(&h->issued[t], 1);
	hkey(&k, id);
	int st = ol_kve_alloc(h->e, &k, hlen(seed), &s);
	if (st == OL_KV_FULL)
		atomic_fetch_add(&h->fulls, 1);
	if (st != OL_KV_OK) {
		if (st != OL_KV_EXISTS && st != OL_KV_FULL)
			atomic_fetch_add(&h->bad, 1);
		return;
	}
	hfill(s.ptr, id, seed);
	if (abort_it) {
		ol_kve_release(h->e, s.off, s.seq);
		atomic_fetch_add(&h->aborts, 1);
		return;
	}
	st = ol_kve_commit(h->e, &k, s.off, s.seq, hlen(seed));
	if (st == OL_KV_OK)
		atomic_fetch_add(&h->puts, 1);
	else if (st != OL_KV_EXISTS)
		atomic_fetch_add(&h->bad, 1);
}

/* ol_kve_pin(need_dram false) as an event loop does it: pin_start, the read of the held extent
 * by the caller (pread here, the loop's ring in the server), then pin_finish. The buffer is
 * the caller's: poisoned first, so a value not read from the record would be caught. */
static struct hammer *g_h;

static int
pin_split(struct ol_kve *e, const struct ol_kvk *k, struct ol_kve_slot *s, uint8_t **buf)
{
	struct ol_kve_nvrd rd;
	int st = ol_kve_pin_start(e, k, s, &rd);
	if (st != OL_KVE_NVME)
		return st;
	void *p = NULL;
	if (posix_memalign(&p, OL_KVS_ALIGN, rd.ext.len) != 0)
		abort();
	memset(p, 0x5a, rd.ext.len);
	atomic_fetch_add(&g_h->split_nv, 1);
	sched_yield(); /* let puts, deletes and evictions of the key run meanwhile */
	ssize_t n = pread(rd.ext.fd, p, rd.ext.len, (off_t)rd.ext.off);
	st = ol_kve_pin_finish(e, &rd, n < 0 ? -errno : (int)n, p, s);
	*buf = p;
	return st;
}

static void
h_get(struct hammer *h, uint64_t id, bool need_dram, bool split)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	uint8_t *buf = NULL;
	hkey(&k, id);
	int st = split ? pin_split(h->e, &k, &s, &buf) : ol_kve_pin(h->e, &k, need_dram, &s);
	if (st != OL_KV_OK)
		free(buf);
	if (st == OL_KV_MISS) {
		atomic_fetch_add(&h->misses, 1);
		return;
	}
	if (st != OL_KV_OK) {
		atomic_fetch_add(&h->bad, 1);
		return;
	}
	atomic_fetch_add(&h->hits, 1);
	bool dram = s.off != OL_KVE_NOOFF;
	if (need_dram && !dram)
		atomic_fetch_add(&h->bad, 1);
	if (dram && seq_at(&s) != s.seq)
		atomic_fetch_add(&h->torn_seq, 1);
	if (!hcheck(h, s.ptr, s.len, id))
		atomic_fetch_add(&h->bad, 1);
	if (dram && seq_at(&s) != s.seq) /* a pinned slot is never recycled under its reader */
		atomic_fetch_add(&h->torn_seq, 1);
	if (dram)
		ol_kve_release(h->e, s.off, s.seq);
	free(buf);
}

static void *
h_main(void *arg)
{
	struct harg *a = arg;
	struct hammer *h = a->h;
	uint64_t r = 0x9e3779b97f4a7c15ull * (a->t + 1);
	for (int i = 0; i < H_OPS; i++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		uint64_t id = 1 + (r >> 16) % H_KEYS;
		struct ol_kvk k;
		uint64_t len;
		switch (r % 10) {
		case 0:
		case 1:
		case 2:
		case 3:
			h_put(h, a->t, id, (r >> 40) % 16 == 0);
			break;
		case 8:
			hkey(&k, id);
			if (ol_kve_delete(h->e, &k) == OL_KV_OK)
				atomic_fetch_add(&h->dels, 1);
			break;
		case 9:
			hkey(&k, id);
			(void)ol_kve_exists(h->e, &k, &len);
			break;
		default:
			h_get(h, id, ((r >> 48) & 3) == 1, ((r >> 48) & 3) >= 2);
		}
	}
	return NULL;
}

static void
hammer(struct hammer *h)
{
	pthread_t th[H_THREADS];
	struct harg a[H_THREADS];
	for (unsigned t = 0; t < H_THREADS; t++) {
		a[t] = (struct harg){h, t};
		pthread_create(&th[t], NULL, h_main, &a[t]);
	}
	for (unsigned t = 0; t < H_THREADS; t++)
		pthread_join(th[t], NULL);
}

/* Every key reads back a valid block or misses; *present marks the keys that are there. */
static int
verify_all(struct hammer *h, bool present[H_KEYS + 1], int *n_present)
{
	int bad = 0;
	*n_present = 0;
	for (uint64_t id = 1; id <= H_KEYS; id++) {
		struct ol_kvk k;
		struct ol_kve_slot s;
		hkey(&k, id);
		int st = ol_kve_pin(h->e, &k, false, &s);
		present[id] = st == OL_KV_OK;
		*n_present += st == OL_KV_OK;
		if (st == OL_KV_OK && !hcheck(h, s.ptr, s.len, id))
			bad++;
		else if (st != OL_KV_OK && st != OL_KV_MISS)
			bad++;
		if (st == OL_KV_OK && s.off != OL_KVE_NOOFF)
			ol_kve_release(h->e, s.off, s.seq);
	}
	return bad;
}

static bool g_strict; /* engines opened by open_eng: [kv] writeback = "strict" */

static struct ol_kve *
open_eng(const char *spill)
{
	struct ol_kve_opts o = {.dram_bytes = 16 * MiB,
				.spill_dir = spill,
				.spill_bytes = spill ? 512 * MiB : 0,
				.max_block = 64 * MiB,
				.writeback_ms = 20,
				.strict = g_strict};
	struct ol_kve *e = NULL;
	return ol_kve_open(&o, &e) == 0 ? e : NULL;
}

static void
test_hammer(const char *spill)
{
	const char *mode = !spill ? "DRAM only" : g_strict ? "DRAM + NVMe strict" : "DRAM + NVMe";
	static struct hammer h;
	memset(&h, 0, sizeof(h));
	h.e = open_eng(spill);
	g_h = &h;
	ok(h.e != NULL, "%s: engine with 16 MiB of DRAM", mode);
	if (!h.e)
		return;
	hammer(&h);
	struct ol_kve_stats st;
	ol_kve_get_stats(h.e, &st);
	ok(h.bad == 0 && h.torn_seq == 0,
	   "%s: %d threads x %d ops on %d keys: %d puts, %d hits, %d misses, %d deletes, %d "
	   "aborted reservations, %d full: no wrong, torn or recycled read (bad %d, seq %d)",
	   mode, H_THREADS, H_OPS, H_KEYS, h.puts, h.hits, h.misses, h.dels, h.aborts, h.fulls,
	   h.bad, h.torn_seq);
	if (g_strict)
		ok(st.wb_dropped == 0 && st.evictions == 0 && st.demotions > 0,
		   "%s: no block dropped unwritten (%llu dropped, %llu evicted, %llu demoted)",
		   mode, (unsigned long long)st.wb_dropped, (unsigned long long)st.evictions,
		   (unsigned long long)st.demotions);
	ok(h.puts > 0 && h.hits > 0 && h.dels > 0 && st.evictions + st.demotions > 0,
	   "%s: the mix ran: puts, hits, deletes, and %llu evictions + %llu demotions under the "
	   "small DRAM",
	   mode, (unsigned long long)st.evictions, (unsigned long long)st.demotions);
	if (spill)
		ok(h.split_nv > 0,
		   "%s: %d reads took their NVMe record themselves (pin_start / pin_finish)", mode,
		   h.split_nv);
	bool present[H_KEYS + 1] = {false};
	int n, bad = verify_all(&h, present, &n);
	ol_kve_get_stats(h.e, &st);
	ok(bad == 0 && st.entries == (uint64_t)n && st.pinned == 0 &&
	       st.dram_entries <= st.entries && st.dram_used <= st.dram_cap,
	   "%s: afterwards every key reads back valid or misses; entries %llu = %d present, "
	   "%llu pinned, %llu in DRAM",
	   mode, (unsigned long long)st.entries, n, (unsigned long long)st.pinned,
	   (unsigned long long)st.dram_entries);
	if (!spill) {
		ol_kve_close(h.e);
		return;
	}
	ol_kve_close(h.e); /* writes the dirty rest */
	h.e = open_eng(spill);
	bool again[H_KEYS + 1] = {false};
	int n2 = 0, bad2 = h.e ? verify_all(&h, again, &n2) : -1;
	ok(h.e && bad2 == 0 && n2 == n && memcmp(present, again, sizeof(again)) == 0,
	   "%s: after close and reopen the same %d keys are there, each valid (got %d, %d bad)",
	   mode, n, n2, bad2);
	ol_kve_close(h.e);
}

/* Mixed sizes: DRAM full of small blocks and older large ones, then a new set of large blocks
 * half the size of DRAM is put: every one of the new set must still be there (the preference
 * for a victim of the wanted size class must not reach past the old blocks into new ones).
 * What the bench's GET prefill does after its PUT runs. */
static void
test_lru_mixed_sizes(void)
{
	struct ol_kve_opts o = {.dram_bytes = 64 * MiB, .max_block = 64 * MiB};
	struct ol_kve *e = NULL;
	ok(ol_kve_open(&o, &e) == 0, "mixed sizes: engine with 64 MiB of DRAM");
	if (!e)
		return;
	static struct hammer h;
	memset(&h, 0, sizeof(h));
	h.e = e;
	struct ol_kvk k;
	struct ol_kve_slot s;
	int bad = 0;
	uint64_t id = 1000;
	for (int i = 0; i < 256; i++, id++) { /* 256 KiB blocks: all of DRAM */
		hkey(&k, id);
		bad += ol_kve_alloc(e, &k, 256 * KiB, &s) != OL_KV_OK ||
		       ol_kve_commit(e, &k, s.off, s.seq, 256 * KiB) != OL_KV_OK;
	}
	for (int i = 0; i < 64; i++, id++) { /* older 2 MiB blocks: twice DRAM */
		hkey(&k, id);
		bad += ol_kve_alloc(e, &k, 2 * MiB, &s) != OL_KV_OK ||
		       ol_kve_commit(e, &k, s.off, s.seq, 2 * MiB) != OL_KV_OK;
	}
	uint64_t first = id;
	for (int i = 0; i < 16; i++, id++) { /* the new set: half of DRAM */
		hkey(&k, id);
		bad += ol_kve_alloc(e, &k, 2 * MiB, &s) != OL_KV_OK ||
		       ol_kve_commit(e, &k, s.off, s.seq, 2 * MiB) != OL_KV_OK;
	}
	int missing = 0;
	uint64_t len;
	for (uint64_t i = first; i < id; i++) {
		hkey(&k, i);
		missing += ol_kve_exists(e, &k, &len) != OL_KV_OK;
	}
	ok(bad == 0 && missing == 0,
	   "mixed sizes: after 64 MiB of 256 KiB blocks and 128 MiB of 2 MiB ones, the newest 16 "
	   "x 2 MiB are all there (%d missing, %d failed puts)",
	   missing, bad);
	ol_kve_close(e);
}

/* Put key id (a block of 128 KiB or more) into h and return its seed. */
static uint64_t
put_big(struct hammer *h, uint64_t id)
{
	uint64_t seed;
	do {
		seed = atomic_fetch_add(&h->issued[0], 1) + 1;
	} while (hlen(seed) < 128 * KiB);
	struct ol_kvk k;
	struct ol_kve_slot s;
	hkey(&k, id);
	if (ol_kve_alloc(h->e, &k, hlen(seed), &s) != OL_KV_OK)
		return 0;
	hfill(s.ptr, id, seed);
	return ol_kve_commit(h->e, &k, s.off, s.seq, hlen(seed)) == OL_KV_OK ? seed : 0;
}

/* One pin_start / read / pin_finish of key id, the read replaced by what `how` says:
 * 0 the record as read, 1 one byte of the value flipped, 2 a short read, 3 the key deleted
 * between start and finish, 4 abandoned. Returns the status (OL_KVE_NVME: not NVMe-only). */
static int
split_case(struct hammer *h, uint64_t id, int how, bool *exact, bool *in_dram)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	struct ol_kve_nvrd rd;
	hkey(&k, id);
	*exact = *in_dram = false;
	int st = ol_kve_pin_start(h->e, &k, &s, &rd);
	if (st != OL_KVE_NVME) {
		if (st == OL_KV_OK)
			ol_kve_release(h->e, s.off, s.seq);
		return OL_KVE_NVME;
	}
	if (how == 4) {
		ol_kve_pin_abandon(h->e, &rd);
		return OL_KV_OK;
	}
	void *p = NULL;
	if (posix_memalign(&p, OL_KVS_ALIGN, rd.ext.len) != 0)
		abort();
	ssize_t n = pread(rd.ext.fd, p, rd.ext.len, (off_t)rd.ext.off);
	if (how == 1)
		((uint8_t *)p)[OL_KVS_ALIGN + 100] ^= 1; /* a value byte in either version */
	if (how == 2 && n > 0)
		n -= OL_KVS_ALIGN;
	if (how == 3)
		(void)ol_kve_delete(h->e, &k);
	st = ol_kve_pin_finish(h->e, &rd, n < 0 ? -errno : (int)n, p, &s);
	if (st == OL_KV_OK) {
		*exact = hcheck(h, s.ptr, s.len, id);
		*in_dram = s.off != OL_KVE_NOOFF;
		if (*in_dram)
			ol_kve_release(h->e, s.off, s.seq);
	}
	free(p);
	return st;
}

/* ol_kve_pin_start / pin_finish (the KV loops' NVMe reads on their own rings): the record is
 * checked as ol_kve_pin checks it (a flipped byte is CORRUPT and the key is dropped, never
 * served), a short read or a key deleted meanwhile is a miss, the second NVMe hit promotes,
 * an abandoned read leaves nothing held, and a segment the tier drops while a read holds it
 * is still read whole (the hold keeps its descriptor). */
static void
test_pin_split(const char *dir)
{
	static struct hammer h;
	memset(&h, 0, sizeof(h));
	g_h = &h;
	struct ol_kve_opts o = {.dram_bytes = 4 * MiB,
				.spill_dir = dir,
				.spill_bytes = 16 * MiB,
				.max_block = 64 * MiB,
				.writeback_ms = 20};
	ok(ol_kve_open(&o, &h.e) == 0, "split pin: engine with 4 MiB of DRAM and 16 MiB of NVMe");
	if (!h.e)
		return;
	int bad = 0;
	for (uint64_t id = 1; id <= 40; id++) { /* ~7 MiB: most demoted to NVMe only */
		bad += put_big(&h, id) == 0;
		if (id % 8 == 0)
			bad += ol_kve_flush(h.e) != 0;
	}
	bad += ol_kve_flush(h.e) != 0;
	int cnt[5] = {0}, nv = 0;
	bool exact, dram, first_ok = true, promoted = false;
	for (uint64_t id = 1; id <= 40; id++) {
		int st = split_case(&h, id, 0, &exact, &dram);
		if (st == OL_KVE_NVME)
			continue;
		nv++;
		first_ok &= st == OL_KV_OK && exact && !dram;
		st = split_case(&h, id, 0, &exact, &dram); /* the second hit promotes */
		promoted |= st == OL_KVE_NVME || (st == OL_KV_OK && exact && dram);
	}
	ok(bad == 0 && nv >= 8 && first_ok && promoted,
	   "split pin: %d NVMe-only blocks read by the caller come back exact, served from its "
	   "buffer; a second hit promotes to DRAM",
	   nv);
	struct ol_kve_stats st0, st1;
	ol_kve_get_stats(h.e, &st0);
	for (uint64_t id = 1; id <= 40; id++) {
		int how = 1 + (int)(id % 4);
		int st = split_case(&h, id, how, &exact, &dram);
		if (st == OL_KVE_NVME)
			continue;
		cnt[how] += how == 1   ? st == OL_KV_CORRUPT
			    : how == 4 ? st == OL_KV_OK
				       : st == OL_KV_MISS;
		cnt[0]++;
	}
	ol_kve_get_stats(h.e, &st1);
	ok(cnt[0] > 0 && cnt[1] + cnt[2] + cnt[3] + cnt[4] == cnt[0] && cnt[1] > 0 &&
	       st1.corrupt - st0.corrupt == (uint64_t)cnt[1],
	   "split pin: a flipped byte is CORRUPT (%d), a short read a miss (%d), a key deleted "
	   "during its read a miss (%d), an abandoned read ends cleanly (%d), of %d",
	   cnt[1], cnt[2], cnt[3], cnt[4], cnt[0]);
	int after = 0, wrong = 0;
	for (uint64_t id = 1; id <= 40; id++) { /* what is left reads back exact or misses */
		struct ol_kvk k;
		struct ol_kve_slot s;
		hkey(&k, id);
		int st = ol_kve_pin(h.e, &k, false, &s);
		if (st != OL_KV_OK) {
			wrong += st != OL_KV_MISS;
			continue;
		}
		after++;
		wrong += !hcheck(&h, s.ptr, s.len, id);
		if (s.off != OL_KVE_NOOFF)
			ol_kve_release(h.e, s.off, s.seq);
	}
	ok(after > 0 && wrong == 0, "split pin: %d keys read back exact afterwards", after);
	/* a read holding a segment that the tier drops meanwhile (puts past the 16 MiB cap) */
	uint64_t id0 = 0;
	struct ol_kvk k;
	struct ol_kve_slot s;
	struct ol_kve_nvrd rd;
	for (uint64_t id = 1; id <= 40 && !id0; id++) {
		hkey(&k, id);
		int st = ol_kve_pin_start(h.e, &k, &s, &rd);
		if (st == OL_KV_OK)
			ol_kve_release(h.e, s.off, s.seq);
		if (st == OL_KVE_NVME)
			id0 = id;
	}
	ol_kve_get_stats(h.e, &st0);
	for (uint64_t id = 100; id < 300 && id0; id++) { /* ~35 MiB more through 16 MiB of NVMe */
		bad += put_big(&h, id) == 0;
		if (id % 8 == 0)
			bad += ol_kve_flush(h.e) != 0;
	}
	bad += ol_kve_flush(h.e) != 0;
	ol_kve_get_stats(h.e, &st1);
	int st = OL_KV_ERROR;
	bool whole = false;
	if (id0) {
		void *p = NULL;
		if (posix_memalign(&p, OL_KVS_ALIGN, rd.ext.len) != 0)
			abort();
		ssize_t n = pread(rd.ext.fd, p, rd.ext.len, (off_t)rd.ext.off);
		whole = n == (ssize_t)rd.ext.len;
		st = ol_kve_pin_finish(h.e, &rd, n < 0 ? -errno : (int)n, p, &s);
		if (st == OL_KV_OK && s.off != OL_KVE_NOOFF)
			ol_kve_release(h.e, s.off, s.seq);
		free(p);
	}
	ok(id0 && bad == 0 && whole && st == OL_KV_MISS && st1.nvme_used <= 16 * MiB,
	   "split pin: a held extent whose segment was dropped meanwhile is still read whole, "
	   "and the key (gone with its segment) is a miss (status %d)",
	   st);
	ol_kve_get_stats(h.e, &st1);
	ok(st1.pinned == 0, "split pin: no pin left behind (%llu)", (unsigned long long)st1.pinned);
	ol_kve_close(h.e);
}

int
main(void)
{
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("stripes", 7, NS);
	test_lru_mixed_sizes();
	test_hammer(NULL);
	char tpl[] = "/tmp/olkv-stripes-XXXXXX";
	char *dir = mkdtemp(tpl);
	ok(dir != NULL, "temp dir for the NVMe tier");
	if (dir) {
		test_hammer(dir);
		kv_rm_rf(dir);
	}
	char tpl4[] = "/tmp/olkv-stripes-XXXXXX";
	dir = mkdtemp(tpl4);
	if (dir) {
		test_pin_split(dir);
		kv_rm_rf(dir);
	}
	char tpl2[] = "/tmp/olkv-stripes-XXXXXX";
	dir = mkdtemp(tpl2);
	ok(dir != NULL, "temp dir for the NVMe tier (strict)");
	if (dir) {
		g_strict = true; /* puts wait on their stripe for the write-behind */
		test_hammer(dir);
		g_strict = false;
		kv_rm_rf(dir);
	}
	tap_done();
}
