/* tests/unit/test_kv.c - KV engine: index, slots, LRU eviction order, pins and sequence
 * numbers, NVMe segments (round trip, demotion/promotion, recovery with a torn tail, corrupt
 * records, tombstones, write-behind), namespaces; concurrent puts that must wait for the
 * write-behind of dirty victims while reads run, kill -9 during write-behind, tombstones
 * recovered out of order, the background prefault; wire protocol decoding. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>

#include "base/config.h"
#include "base/log.h"
#include "kv/access.h"
#include "kv/engine.h"
#include "kv/lease.h"
#include "kv/proto.h"
#include "kv/spill.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB (1u << 20)
#define KiB 1024u

static uint8_t NS_A[16], NS_B[16];
static bool g_strict;	  /* engines opened by open_eng*: [kv] writeback = "strict" */
static uint64_t g_wb_bps; /* and their [kv] writeback_bytes_per_sec */
static double g_quota;	  /* and their [kv] namespace_quota_frac */
static uint64_t g_events; /* and their [kv] removal_events (0 = default) */

static struct ol_kve *
open_eng_pf(uint64_t dram, const char *spill, uint64_t spill_bytes, unsigned wb_ms, bool pf)
{
	struct ol_kve_opts o = {dram,  NULL, spill,    spill_bytes, 64 * MiB, wb_ms,   pf,
				false, 0,    g_strict, g_wb_bps,    g_quota,  g_events};
	struct ol_kve *e = NULL;
	if (ol_kve_open(&o, &e) != 0)
		return NULL;
	return e;
}

static struct ol_kve *
open_eng(uint64_t dram, const char *spill, uint64_t spill_bytes, unsigned wb_ms)
{
	return open_eng_pf(dram, spill, spill_bytes, wb_ms, false);
}

static int
put(struct ol_kve *e, const uint8_t *ns, uint64_t id, size_t len, uint64_t seed)
{
	uint8_t key[32];
	struct ol_kvk k;
	struct ol_kve_slot s;
	make_key(key, id);
	ol_kve_key(&k, key, ns);
	int st = ol_kve_alloc(e, &k, len, &s);
	if (st != OL_KV_OK)
		return st;
	fill_pattern(s.ptr, len, seed);
	return ol_kve_commit(e, &k, s.off, s.seq, len);
}

/* OL_KV_OK when the value is there with the right content. */
static int
get(struct ol_kve *e, const uint8_t *ns, uint64_t id, size_t len, uint64_t seed)
{
	uint8_t key[32];
	struct ol_kvk k;
	struct ol_kve_slot s;
	make_key(key, id);
	ol_kve_key(&k, key, ns);
	int st = ol_kve_pin(e, &k, false, &s);
	if (st != OL_KV_OK)
		return st;
	if (s.len != len || !check_pattern(s.ptr, len, seed))
		st = OL_KV_CORRUPT;
	if (s.off != OL_KVE_NOOFF)
		ol_kve_release(e, s.off, s.seq);
	return st;
}

static int
exists(struct ol_kve *e, const uint8_t *ns, uint64_t id)
{
	uint8_t key[32];
	struct ol_kvk k;
	uint64_t len;
	make_key(key, id);
	ol_kve_key(&k, key, ns);
	return ol_kve_exists(e, &k, &len) == OL_KV_OK;
}

static void
test_basic(void)
{
	struct ol_kve *e = open_eng(16 * MiB, NULL, 0, 0);
	ok(e != NULL, "engine opens with 16 MiB of anonymous DRAM");
	ok(put(e, NS_A, 1, 4096, 11) == OL_KV_OK, "put 4 KiB");
	ok(put(e, NS_A, 2, 100000, 12) == OL_KV_OK, "put 100000 bytes (odd size)");
	ok(put(e, NS_A, 3, 0, 13) == OL_KV_OK, "put an empty value");
	ok(get(e, NS_A, 1, 4096, 11) == OL_KV_OK, "get 4 KiB back with content");
	ok(get(e, NS_A, 2, 100000, 12) == OL_KV_OK, "get 100000 bytes back");
	ok(get(e, NS_A, 3, 0, 13) == OL_KV_OK, "get the empty value");
	ok(put(e, NS_A, 1, 4096, 99) == OL_KV_EXISTS, "second put of a key: EXISTS");
	ok(get(e, NS_A, 1, 4096, 11) == OL_KV_OK, "... and the first value stays");
	ok(get(e, NS_A, 4, 10, 0) == OL_KV_MISS, "unknown key: MISS");
	uint8_t key[32];
	struct ol_kvk k;
	make_key(key, 2);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_delete(e, &k) == OL_KV_OK && !exists(e, NS_A, 2), "delete removes");
	ok(ol_kve_delete(e, &k) == OL_KV_MISS, "second delete: MISS");
	struct ol_kve_slot s;
	make_key(key, 5);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_alloc(e, &k, 65 * MiB, &s) == OL_KV_TOO_LARGE, "value over max_block: TOO_LARGE");
	ok(put(e, NS_A, 6, 5 * MiB, 16) == OL_KV_OK && get(e, NS_A, 6, 5 * MiB, 16) == OL_KV_OK,
	   "a 5 MiB block (run of pages) round trips");
	ok(ol_kve_alloc(e, &k, 4096, &s) == OL_KV_OK, "alloc pending");
	ok(!exists(e, NS_A, 5), "a pending slot is not visible");
	ol_kve_release(e, s.off, s.seq);
	ok(ol_kve_commit(e, &k, s.off, s.seq, 4096) == OL_KV_ERROR,
	   "commit after abort is refused (ERROR)");
	ol_kve_close(e);
}

static void
test_namespaces(void)
{
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, 0);
	ok(put(e, NS_A, 7, 8192, 1) == OL_KV_OK, "ns A: put key 7");
	ok(get(e, NS_B, 7, 8192, 1) == OL_KV_MISS, "ns B: same key is a miss");
	ok(put(e, NS_B, 7, 8192, 2) == OL_KV_OK, "ns B: put key 7 (not EXISTS)");
	ok(get(e, NS_A, 7, 8192, 1) == OL_KV_OK && get(e, NS_B, 7, 8192, 2) == OL_KV_OK,
	   "each namespace reads its own value");
	ol_kve_close(e);
}

/* A reserved slot reused by another namespace reports its old bytes as foreign (the server
 * zeroes them before a shm client may read the slot); reuse within a namespace does not. */
static void
test_slot_reuse_across_namespaces(void)
{
	struct ol_kve *e = open_eng(2 * MiB, NULL, 0, 0); /* one page: one 2 MiB slot */
	uint8_t key[32];
	struct ol_kvk ka, kb, ka2;
	struct ol_kve_slot sl;
	make_key(key, 1);
	ol_kve_key(&ka, key, NS_A);
	ol_kve_key(&kb, key, NS_B);
	make_key(key, 2);
	ol_kve_key(&ka2, key, NS_A);
	int rc = ol_kve_alloc(e, &ka, MiB, &sl);
	ok(rc == OL_KV_OK && sl.foreign == MiB, "first use of a slot: nothing foreign");
	memset(sl.ptr, 0xAA, MiB);
	ok(ol_kve_commit(e, &ka, sl.off, sl.seq, MiB) == OL_KV_OK, "ns A commits its block");
	ok(ol_kve_delete(e, &ka) == OL_KV_OK, "ns A deletes it");
	rc = ol_kve_alloc(e, &ka2, MiB, &sl);
	ok(rc == OL_KV_OK && sl.foreign == MiB, "ns A reuses its own slot: nothing foreign");
	ol_kve_release(e, sl.off, sl.seq);
	rc = ol_kve_alloc(e, &kb, MiB, &sl);
	ok(rc == OL_KV_OK && sl.foreign == 0 && sl.ptr[0] == 0xAA,
	   "ns B is given the slot: its old bytes are reported foreign");
	ol_kve_release(e, sl.off, sl.seq);
	ol_kve_close(e);
}

/* Leases: a leased block survives the evictions that take an unleased one; ttl 0 and
 * expiry end a lease; a namespace's cap answers FULL; another namespace has its own. */
static void
test_leases(void)
{
	/* the reaper's age test: a pin newer than the reaper's clock reading is young (it
	 * wrapped and was dropped at once before, seen as "dropped 1 pins older than 60 s"
	 * a second after a start under load) */
	ok(!kvl_aged(1000, 1000, 60000) && !kvl_aged(1000, 60999, 60000) &&
	       kvl_aged(1000, 61000, 60000) && !kvl_aged(1001, 1000, 60000) &&
	       !kvl_aged(UINT64_MAX / 2, 5, 60000),
	   "a pin is aged only ttl after it was taken, never when taken after now");
	/* 8 MiB = 8 slots of 1 MiB */
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, 0);
	struct kvl_leases ls;
	kvl_leases_init(&ls, 5000, 2);
	uint8_t key[32];
	struct ol_kvk k0, k1, k2, kb;
	uint64_t len = 0;
	int good = 1;
	for (uint64_t i = 0; i < 3; i++)
		good &= put(e, NS_A, 300 + i, MiB, i) == OL_KV_OK;
	ok(good, "3 blocks stored");
	make_key(key, 300);
	ol_kve_key(&k0, key, NS_A);
	make_key(key, 301);
	ol_kve_key(&k1, key, NS_A);
	make_key(key, 302);
	ol_kve_key(&k2, key, NS_A);
	make_key(key, 399);
	ol_kve_key(&kb, key, NS_A);
	ok(kvl_lease(&ls, e, &k0, 60000, 1000, &len) == OL_KV_OK && len == MiB,
	   "lease block 0 (ttl capped to 5 s)");
	ok(kvl_lease(&ls, e, &k0, 60000, 1000, &len) == OL_KV_OK && ls.n == 1,
	   "a second lease extends it: still one lease");
	ok(kvl_lease(&ls, e, &kb, 60000, 1000, &len) == OL_KV_MISS, "a missing key: MISS");
	ok(kvl_lease(&ls, e, &k2, 60000, 1000, &len) == OL_KV_OK, "lease block 2");
	ok(kvl_lease(&ls, e, &k1, 60000, 1000, &len) == OL_KV_FULL, "third lease: FULL (cap 2)");
	make_key(key, 300);
	struct ol_kvk kB;
	ol_kve_key(&kB, key, NS_B);
	good = put(e, NS_B, 300, MiB, 9) == OL_KV_OK;
	ok(good && kvl_lease(&ls, e, &kB, 60000, 1000, &len) == OL_KV_OK,
	   "another namespace has a cap of its own");
	good = 1;
	for (uint64_t i = 0; i < 16; i++) /* twice the tier */
		good &= put(e, NS_A, 400 + i, MiB, i) == OL_KV_OK;
	ok(good, "a flood of 16 puts is stored");
	ok(exists(e, NS_A, 300) && exists(e, NS_A, 302) && !exists(e, NS_A, 301),
	   "the leased blocks stayed, the unleased one went");
	ok(get(e, NS_A, 300, MiB, 0) == OL_KV_OK, "the leased block reads back intact");
	ok(kvl_lease(&ls, e, &k0, 0, 1000, &len) == OL_KV_OK, "ttl 0 ends the lease");
	ok(kvl_lease(&ls, e, &k0, 0, 1000, &len) == OL_KV_MISS, "ending it again: MISS");
	ok(kvl_expire(&ls, e, 5999) == 0 && kvl_expire(&ls, e, 6000) == 2,
	   "expiry at the capped ttl ends the other two");
	good = 1;
	for (uint64_t i = 0; i < 16; i++)
		good &= put(e, NS_A, 500 + i, MiB, i) == OL_KV_OK;
	ok(good && !exists(e, NS_A, 300) && !exists(e, NS_A, 302),
	   "ended leases: the next flood evicts them");
	kvl_leases_fini(&ls, e);
	ol_kve_close(e);
}

static void
test_eviction_order(void)
{
	/* 8 MiB = 4 pages; 1 MiB blocks: 2 per page, 8 slots */
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, 0);
	int good = 1;
	for (uint64_t i = 0; i < 8; i++)
		good &= put(e, NS_A, 100 + i, MiB, i) == OL_KV_OK;
	ok(good, "fill DRAM with 8 x 1 MiB");
	ok(get(e, NS_A, 100, MiB, 0) == OL_KV_OK, "touch block 0 (now most recent)");
	uint8_t key[32];
	struct ol_kvk k;
	uint64_t len;
	make_key(key, 103);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_exists(e, &k, &len) == OL_KV_OK && len == MiB,
	   "exists block 3 (a lookup: refreshes its LRU age)");
	ok(put(e, NS_A, 200, MiB, 50) == OL_KV_OK, "a 9th block fits by evicting");
	ok(exists(e, NS_A, 100) && !exists(e, NS_A, 101),
	   "LRU: block 1 went, touched block 0 stayed");
	ok(put(e, NS_A, 201, MiB, 51) == OL_KV_OK && !exists(e, NS_A, 102),
	   "next eviction takes block 2");
	ok(put(e, NS_A, 202, MiB, 52) == OL_KV_OK && !exists(e, NS_A, 104) && exists(e, NS_A, 103),
	   "exists refreshed block 3: block 4 went instead");
	ok(exists(e, NS_A, 105) && exists(e, NS_A, 200), "younger blocks stay");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ok(st.evictions == 3 && st.dram_entries == 8,
	   "stats: 3 evictions, 8 entries (got %llu, %llu)", (unsigned long long)st.evictions,
	   (unsigned long long)st.dram_entries);
	ol_kve_close(e);
}

static uint64_t
seq_at(const struct ol_kve_slot *s)
{
	const _Atomic uint64_t *t = (const _Atomic uint64_t *)(s->ptr - s->off);
	return atomic_load(&t[s->off / OL_KVE_UNIT]);
}

static void
test_pins_and_seq(void)
{
	struct ol_kve *e = open_eng(4 * MiB, NULL, 0, 0); /* 2 pages: 2 slots of 2 MiB */
	uint8_t key[32];
	struct ol_kvk k;
	struct ol_kve_slot s, s2;
	ok(put(e, NS_A, 1, 2 * MiB, 1) == OL_KV_OK && put(e, NS_A, 2, 2 * MiB, 2) == OL_KV_OK,
	   "two 2 MiB blocks fill DRAM");
	make_key(key, 1);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_pin(e, &k, true, &s) == OL_KV_OK && seq_at(&s) == s.seq,
	   "pin block 1: table seq matches");
	ok(put(e, NS_A, 3, 2 * MiB, 3) == OL_KV_OK, "a third block evicts the unpinned one");
	ok(exists(e, NS_A, 1) && !exists(e, NS_A, 2), "the pinned block was not evicted");
	struct ol_kve_slot s3;
	make_key(key, 3);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_pin(e, &k, true, &s3) == OL_KV_OK, "pin block 3 too");
	ok(put(e, NS_A, 4, 2 * MiB, 4) == OL_KV_FULL, "every slot pinned: FULL");
	ol_kve_release(e, s3.off, s3.seq);
	make_key(key, 1);
	ol_kve_key(&k, key, NS_A);
	ok(check_pattern(s.ptr, 2 * MiB, 1) && seq_at(&s) == s.seq,
	   "pinned bytes and seq unchanged under pressure");
	ok(ol_kve_delete(e, &k) == OL_KV_OK && !exists(e, NS_A, 1), "delete a pinned block");
	ok(seq_at(&s) == s.seq && check_pattern(s.ptr, 2 * MiB, 1),
	   "its slot is not recycled while pinned");
	uint64_t off = s.off, seq = s.seq;
	ol_kve_release(e, s.off, s.seq);
	ok(seq_at(&s) != seq, "after the last release the slot's seq changes (reader would miss)");
	ok(put(e, NS_A, 5, 2 * MiB, 5) == OL_KV_OK, "the freed slot is reused");
	make_key(key, 5);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_pin(e, &k, true, &s2) == OL_KV_OK && s2.off == off && s2.seq != seq,
	   "reused slot: same offset, new seq");
	ol_kve_release(e, s2.off, s2.seq);
	ol_kve_release(e, off, seq); /* stale: ignored */
	ok(get(e, NS_A, 5, 2 * MiB, 5) == OL_KV_OK, "a stale release does not harm the new owner");
	ol_kve_close(e);
}

static char *
tmpdir(void)
{
	return kv_tmpdir("olkv-test");
}

static size_t
blk_len(uint64_t i)
{
	return (size_t)(4096 + (i * 7919) % (300 * KiB));
}

static void
last_segment(const char *dir, char *out, size_t cap)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		struct stat st;
		char p[600];
		snprintf(p, sizeof(p), "%s/%s", dir, ents[i]->d_name);
		if (strncmp(ents[i]->d_name, "seg-", 4) == 0 && stat(p, &st) == 0 && st.st_size > 0)
			snprintf(out, cap, "%s", p);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

static void
test_nvme_roundtrip_and_recovery(void)
{
	char *dir = tmpdir();
	g_strict = true; /* every put on NVMe before it returns: none dropped, all demoted */
	struct ol_kve *e = open_eng(8 * MiB, dir, 256 * MiB, 1000);
	ok(e != NULL, "engine with NVMe tier in %s (strict write-behind)", dir);
	int good = 1;
	for (uint64_t i = 0; i < 40; i++)
		good &= put(e, NS_A, 1000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "40 blocks of 4..300 KiB put (more than DRAM holds)");
	good = 1;
	for (uint64_t i = 0; i < 40; i++)
		good &= get(e, NS_A, 1000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "all 40 read back: demoted ones come from NVMe");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ok(st.hits_nvme > 0 && st.promotions == 0,
	   "first NVMe hits over TCP are served from the read buffer, not promoted (%llu)",
	   (unsigned long long)st.promotions);
	good = 1;
	for (uint64_t i = 0; i < 40; i++)
		good &= get(e, NS_A, 1000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "all 40 read back again with exact content");
	ol_kve_get_stats(e, &st);
	ok(st.demotions > 0 && st.hits_nvme > 0 && st.promotions > 0 && st.evictions == 0,
	   "demotions %llu, NVMe hits %llu, promotions %llu, no drops",
	   (unsigned long long)st.demotions, (unsigned long long)st.hits_nvme,
	   (unsigned long long)st.promotions);
	uint8_t key[32];
	struct ol_kvk k;
	make_key(key, 1000);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_flush(e) == 0 && ol_kve_delete(e, &k) == OL_KV_OK, "flush, then delete block 0");
	ol_kve_close(e);
	g_strict = false;

	e = open_eng(8 * MiB, dir, 256 * MiB, 1000);
	ok(e != NULL, "reopen on the same spill directory");
	ok(get(e, NS_A, 1000, blk_len(0), 0) == OL_KV_MISS,
	   "deleted block stays deleted (tombstone)");
	good = 1;
	for (uint64_t i = 1; i < 40; i++)
		good &= get(e, NS_A, 1000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "39 blocks recovered from NVMe with content");
	ok(get(e, NS_B, 1001, blk_len(1), 1) == OL_KV_MISS, "namespaces kept apart after recovery");
	ok(put(e, NS_A, 5000, 20000, 77) == OL_KV_OK, "put one more block (becomes the tail)");
	ol_kve_close(e);

	/* tear the last record: cut the file in the middle of it */
	char seg[600];
	last_segment(dir, seg, sizeof(seg));
	struct stat sb;
	ok(seg[0] && stat(seg, &sb) == 0 && truncate(seg, sb.st_size - 8192) == 0,
	   "tear the tail record of %s", seg);
	e = open_eng(8 * MiB, dir, 256 * MiB, 1000);
	ok(e && get(e, NS_A, 5000, 20000, 77) == OL_KV_MISS, "the torn record is not served");
	good = 1;
	for (uint64_t i = 1; i < 40; i++)
		good &= get(e, NS_A, 1000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "every complete record still reads back");
	ol_kve_close(e);

	/* corrupt a value byte inside a record (header intact) */
	last_segment(dir, seg, sizeof(seg));
	int fd = open(seg, O_RDWR);
	uint8_t b = 0;
	ok(fd >= 0 && pread(fd, &b, 1, 4096 * 3) == 1, "open the segment to flip a byte");
	b ^= 0xff;
	ok(pwrite(fd, &b, 1, 4096 * 3) == 1, "flip one value byte");
	close(fd);
	e = open_eng(8 * MiB, dir, 256 * MiB, 1000);
	int corrupt = 0, fine = 0;
	for (uint64_t i = 1; i < 40; i++) {
		int r = get(e, NS_A, 1000 + i, blk_len(i), i);
		corrupt += r == OL_KV_CORRUPT;
		fine += r == OL_KV_OK;
	}
	ok(corrupt >= 1 && fine + corrupt == 39, "checksum catches it: %d corrupt, %d fine",
	   corrupt, fine);
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* A TCP reader's second NVMe hit promotes only when it comes while a promotion at the first
 * would still be in DRAM: with more blocks appended to the LRU between the two hits than DRAM
 * holds (here 20000 DRAM hits of one small block), the block is served from the read buffer
 * again, exact, not promoted; a hit right after that one promotes. */
static void
test_nvme_promotion_reach(void)
{
	char *dir = tmpdir();
	g_strict = true;
	struct ol_kve *e = open_eng(8 * MiB, dir, 256 * MiB, 1000);
	int good = e != NULL && put(e, NS_A, 7000, 64 * KiB, 70) == OL_KV_OK;
	for (uint64_t i = 0; i < 200; i++) /* 12.5 MiB into 8 MiB: the first ones demoted */
		good &= put(e, NS_A, 7001 + i, 64 * KiB, i) == OL_KV_OK;
	good &= put(e, NS_B, 1, 16, 1) == OL_KV_OK;
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ok(good && st.demotions > 0, "201 blocks of 64 KiB into 8 MiB of DRAM (strict NVMe tier)");
	ok(get(e, NS_A, 7000, 64 * KiB, 70) == OL_KV_OK, "first NVMe hit: exact");
	ol_kve_get_stats(e, &st);
	uint64_t nv0 = st.hits_nvme, pr0 = st.promotions;
	uint8_t key[32];
	struct ol_kvk k;
	struct ol_kve_slot s;
	make_key(key, 1);
	ol_kve_key(&k, key, NS_B);
	for (int i = 0; i < 20000; i++) { /* each DRAM hit appends to the LRU again */
		good &= ol_kve_pin_dram(e, &k, &s) == OL_KV_OK;
		if (good)
			ol_kve_release(e, s.off, s.seq);
	}
	ok(good && get(e, NS_A, 7000, 64 * KiB, 70) == OL_KV_OK,
	   "second NVMe hit after 20000 DRAM hits of another block: exact");
	ol_kve_get_stats(e, &st);
	ok(st.hits_nvme == nv0 + 1 && st.promotions == pr0,
	   "... served from the read buffer, not promoted (%llu promotions)",
	   (unsigned long long)(st.promotions - pr0));
	ok(get(e, NS_A, 7000, 64 * KiB, 70) == OL_KV_OK, "a third hit right after: exact");
	ol_kve_get_stats(e, &st);
	ok(st.promotions == pr0 + 1, "... and promoted (%llu promotions)",
	   (unsigned long long)(st.promotions - pr0));
	make_key(key, 7000);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_pin_dram(e, &k, &s) == OL_KV_OK, "it is in DRAM now");
	ol_kve_release(e, s.off, s.seq);
	ol_kve_get_stats(e, &st);
	ok(st.hits_nvme == nv0 + 2, "NVMe hits: %llu after the first",
	   (unsigned long long)(st.hits_nvme - nv0));
	g_strict = false;
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* What an event loop may call: ol_kve_pin_dram pins a DRAM block, misses an absent one, and
 * for a block on the NVMe tier only answers OL_KVE_NVME without reading, pinning or counting
 * (the KV server then hands the get to a helper thread, whose ol_kve_pin reads it). */
static void
test_pin_dram_never_reads_the_disk(void)
{
	char *dir = tmpdir();
	g_strict = true; /* every block on NVMe: the early ones are demoted, not dropped */
	struct ol_kve *e = open_eng(4 * MiB, dir, 64 * MiB, 1000);
	g_strict = false;
	ok(e != NULL, "engine with an NVMe tier (strict)");
	int good = 1;
	for (uint64_t i = 0; i < 24; i++)
		good &= put(e, NS_A, 7000 + i, 256 * KiB, i) == OL_KV_OK;
	ok(good && ol_kve_has_spill(e) && ol_kve_strict(e), "24 x 256 KiB put into 4 MiB of DRAM");
	uint8_t key[32];
	struct ol_kvk k;
	struct ol_kve_slot s;
	struct ol_kve_stats a, b;
	make_key(key, 7000);
	ol_kve_key(&k, key, NS_A);
	ol_kve_get_stats(e, &a);
	int st = ol_kve_pin_dram(e, &k, &s);
	ol_kve_get_stats(e, &b);
	ok(st == OL_KVE_NVME && ol_kve_nvme_only(e, &k) && b.hits == a.hits &&
	       b.misses == a.misses && b.pinned == a.pinned,
	   "the oldest block is on NVMe only: OL_KVE_NVME, nothing pinned or counted (%d)", st);
	ok(ol_kve_pin(e, &k, false, &s) == OL_KV_OK && s.off == OL_KVE_NOOFF &&
	       check_pattern(s.ptr, 256 * KiB, 0),
	   "a blocking pin then reads it from NVMe with exact content");
	make_key(key, 7023);
	ol_kve_key(&k, key, NS_A);
	st = ol_kve_pin_dram(e, &k, &s);
	ok(st == OL_KV_OK && s.off != OL_KVE_NOOFF && check_pattern(s.ptr, 256 * KiB, 23) &&
	       !ol_kve_nvme_only(e, &k),
	   "the newest block is pinned in DRAM with exact content");
	if (st == OL_KV_OK)
		ol_kve_release(e, s.off, s.seq);
	make_key(key, 9999);
	ol_kve_key(&k, key, NS_A);
	ok(ol_kve_pin_dram(e, &k, &s) == OL_KV_MISS, "an absent key is a miss");
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

static void
test_writeback_and_capacity(void)
{
	char *dir = tmpdir();
	struct ol_kve *e = open_eng(64 * MiB, dir, 256 * MiB, 50);
	ok(put(e, NS_A, 1, 64 * KiB, 1) == OL_KV_OK, "put with writeback_ms = 50");
	/* the write-behind thread runs when the delay has passed and it is scheduled: on a loaded
	 * machine that can be seconds later (a fixed 300 ms wait failed there) */
	struct ol_kve_stats st;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ol_kve_get_stats(e, &st);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((st.writebacks == 1 && st.nvme_entries == 1) || now.tv_sec - t0.tv_sec >= 60)
			break;
		usleep(10 * 1000);
	}
	ok(st.writebacks == 1 && st.nvme_entries == 1, "written behind after the delay");
	ol_kve_close(e);
	/* a small NVMe tier: oldest segments are recycled (strict: every block goes there) */
	g_strict = true;
	e = open_eng(4 * MiB, dir, 16 * MiB, 1000);
	g_strict = false;
	int good = 1;
	for (uint64_t i = 0; i < 60; i++)
		good &= put(e, NS_A, 100 + i, MiB, i) == OL_KV_OK;
	ok(good, "60 MiB put into 4 MiB DRAM + 16 MiB NVMe");
	ol_kve_get_stats(e, &st);
	ok(st.nvme_used <= 16 * MiB && st.evictions > 0,
	   "NVMe stays under its cap (%llu), drops %llu", (unsigned long long)st.nvme_used,
	   (unsigned long long)st.evictions);
	ok(get(e, NS_A, 159, MiB, 59) == OL_KV_OK && get(e, NS_A, 100, MiB, 0) == OL_KV_MISS,
	   "newest kept, oldest dropped");
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* ---- concurrency: puts that need dirty victims, reads beside them ---- */

#define CC_PUTTERS 4
#define CC_PER	   48

struct cc {
	struct ol_kve *e;
	_Atomic uint64_t done[CC_PUTTERS]; /* blocks of each putter whose put returned */
	_Atomic int stop, put_bad, get_bad, reads, pinned_reads;
};

static size_t
cc_len(uint64_t id)
{
	return (size_t)(64 * KiB + (id * 40503) % (700 * KiB));
}

struct cc_arg {
	struct cc *c;
	unsigned t;
};

static void *
cc_put_main(void *arg)
{
	struct cc_arg *a = arg;
	for (uint64_t i = 0; i < CC_PER; i++) {
		uint64_t id = 10000 + a->t * 1000 + i;
		int st = put(a->c->e, NS_A, id, cc_len(id), id);
		if (st != OL_KV_OK) {
			fprintf(stderr, "# put %llu: status %d\n", (unsigned long long)id, st);
			atomic_fetch_add(&a->c->put_bad, 1);
		}
		atomic_store(&a->c->done[a->t], i + 1);
	}
	return NULL;
}

/* Reads blocks whose put returned: each must be there (strict) or may be a miss (async: it
 * may have been dropped before its write-behind), exact when there (a pinned read of its DRAM
 * slot or a copy from NVMe), never torn. */
static void *
cc_get_main(void *arg)
{
	struct cc *c = arg;
	uint64_t r = 88172645463325252ull;
	while (!atomic_load(&c->stop)) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		unsigned t = (unsigned)(r % CC_PUTTERS);
		uint64_t n = atomic_load(&c->done[t]);
		if (n == 0)
			continue;
		uint64_t id = 10000 + t * 1000 + (r >> 8) % n;
		uint8_t key[32];
		struct ol_kvk k;
		struct ol_kve_slot s;
		make_key(key, id);
		ol_kve_key(&k, key, NS_A);
		bool dram = (r >> 40) & 1; /* half the reads as a local reader would: DRAM only */
		int st = ol_kve_pin(c->e, &k, dram, &s);
		if (st == OL_KV_MISS && (dram || !g_strict))
			continue; /* allowed: a local reader then falls back to TCP */
		if (st != OL_KV_OK || s.len != cc_len(id) || !check_pattern(s.ptr, s.len, id))
			atomic_fetch_add(&c->get_bad, 1);
		if (st == OL_KV_OK && s.off != OL_KVE_NOOFF) {
			atomic_fetch_add(&c->pinned_reads, 1);
			ol_kve_release(c->e, s.off, s.seq);
		}
		atomic_fetch_add(&c->reads, 1);
	}
	return NULL;
}

/* Every block of the putters reads back exactly or (async only) is a miss; returns misses. */
static int
cc_check_all(struct ol_kve *e, int *bad)
{
	int miss = 0;
	*bad = 0;
	for (unsigned t = 0; t < CC_PUTTERS; t++)
		for (uint64_t i = 0; i < CC_PER; i++) {
			uint64_t id = 10000 + t * 1000 + i;
			int st = get(e, NS_A, id, cc_len(id), id);
			miss += st == OL_KV_MISS;
			*bad += st != OL_KV_OK && st != OL_KV_MISS;
		}
	return miss;
}

static void
test_concurrent_dirty_evictions(bool strict)
{
	char *dir = tmpdir();
	const char *mode = strict ? "strict" : "async";
	g_strict = strict;
	g_wb_bps = strict ? 0 : 4 * MiB; /* async: the disk surely cannot keep up */
	/* 16 MiB of DRAM against ~80 MiB of puts; a write-behind tick of 15 s and a batch (16 MiB)
	 * larger than DRAM: the writer runs only when a put wakes it (strict: every put; async:
	 * a quarter of DRAM is dirty, or a put dropped a dirty victim) */
	struct cc c = {.e = open_eng(16 * MiB, dir, 256 * MiB, 60000)};
	ok(c.e != NULL, "%s: engine: 16 MiB DRAM, NVMe tier, write-behind tick 15 s", mode);
	pthread_t pt[CC_PUTTERS], gt[2];
	struct cc_arg a[CC_PUTTERS];
	for (unsigned t = 0; t < 2; t++)
		pthread_create(&gt[t], NULL, cc_get_main, &c);
	for (unsigned t = 0; t < CC_PUTTERS; t++) {
		a[t] = (struct cc_arg){&c, t};
		pthread_create(&pt[t], NULL, cc_put_main, &a[t]);
	}
	for (unsigned t = 0; t < CC_PUTTERS; t++)
		pthread_join(pt[t], NULL);
	atomic_store(&c.stop, 1);
	for (unsigned t = 0; t < 2; t++)
		pthread_join(gt[t], NULL);
	struct ol_kve_stats st;
	ol_kve_get_stats(c.e, &st);
	ok(c.put_bad == 0, "%s: %d putters x %d blocks of 64..764 KiB: every put OK", mode,
	   CC_PUTTERS, CC_PER);
	ok(c.get_bad == 0 && c.reads > 0,
	   "%s: %d concurrent reads (%d pinned DRAM reads): none wrong%s", mode, c.reads,
	   c.pinned_reads, strict ? ", none missing" : "");
	if (strict)
		ok(st.demotions > 0 && st.evictions == 0 && st.wb_dropped == 0,
		   "strict: puts waited for a dirty victim %llu times; %llu demotions, no drops",
		   (unsigned long long)st.writeback_waits, (unsigned long long)st.demotions);
	else
		ok(st.wb_dropped > 0 && st.evictions == st.wb_dropped,
		   "async: puts waited %llu times (every slot pinned); %llu unwritten blocks "
		   "dropped (%llu evicted, %llu demoted)",
		   (unsigned long long)st.writeback_waits, (unsigned long long)st.wb_dropped,
		   (unsigned long long)st.evictions, (unsigned long long)st.demotions);
	if (!strict) { /* what was not dropped goes to NVMe: reads that promote then drop none */
		ok(ol_kve_flush(c.e) == 0, "async: flush the backlog");
		ol_kve_get_stats(c.e, &st);
	}
	int bad, miss = cc_check_all(c.e, &bad);
	ok(bad == 0 && (strict ? miss == 0 : (uint64_t)miss == st.wb_dropped),
	   "%s: afterwards every block reads back exactly or is one of the %d dropped", mode, miss);
	ol_kve_close(c.e);
	c.e = open_eng(16 * MiB, dir, 256 * MiB, 60000);
	int miss2 = c.e ? cc_check_all(c.e, &bad) : -1;
	ok(c.e && bad == 0 && miss2 == miss,
	   "%s: after close and reopen too (close wrote the dirty rest)", mode);
	ol_kve_close(c.e);
	g_strict = false;
	g_wb_bps = 0;
	kv_rm_rf(dir);
	free(dir);
}

/* A child puts set A until the write-behind reports it all on NVMe (no flush call), then puts
 * set B and is killed with SIGKILL while B is being written behind. */
static void
kill9_child(const char *dir)
{
	struct ol_kve *e = open_eng(32 * MiB, dir, 256 * MiB, 100); /* set A fits in DRAM */
	if (!e)
		_exit(2);
	for (uint64_t i = 0; i < 60; i++)
		if (put(e, NS_A, 20000 + i, blk_len(i), i) != OL_KV_OK)
			_exit(3);
	struct ol_kve_stats st;
	do {
		usleep(20 * 1000);
		ol_kve_get_stats(e, &st);
	} while (st.dirty_bytes > 0);
	for (uint64_t i = 0; i < 60; i++)
		if (put(e, NS_A, 30000 + i, blk_len(i), 1000 + i) != OL_KV_OK)
			_exit(4);
	raise(SIGKILL);
	_exit(5);
}

static void
test_kill9_during_writeback(void)
{
	char *dir = tmpdir();
	pid_t pid = fork();
	if (pid == 0)
		kill9_child(dir);
	int ws = 0;
	ok(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL,
	   "child put 60 blocks, waited for write-behind, put 60 more, was killed (-9)");
	struct ol_kve *e = open_eng(8 * MiB, dir, 256 * MiB, 100);
	int good = e != NULL;
	for (uint64_t i = 0; i < 60 && good; i++)
		good &= get(e, NS_A, 20000 + i, blk_len(i), i) == OL_KV_OK;
	ok(good, "every block written behind before the kill reads back exactly");
	int fine = 0, miss = 0;
	for (uint64_t i = 0; i < 60 && e; i++) {
		int r = get(e, NS_A, 30000 + i, blk_len(i), 1000 + i);
		fine += r == OL_KV_OK;
		miss += r == OL_KV_MISS;
	}
	ok(fine + miss == 60, "blocks in flight at the kill: %d exact, %d missing, none torn", fine,
	   miss);
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* The log is not in version order: a delete's tombstone may be appended before the write-
 * behind's record of the older value. Recovery must still keep the block deleted. */
static void
test_tombstone_out_of_order(void)
{
	char *dir = tmpdir();
	struct ol_kvs *s = NULL;
	uint8_t key[32], val[5000];
	struct ol_kvk k;
	struct ol_kvs_loc loc;
	uint64_t dropped[8];
	unsigned nd;
	make_key(key, 4242);
	ol_kve_key(&k, key, NS_A);
	fill_pattern(val, sizeof(val), 9);
	struct ol_kvs_rec tomb = {.len = sizeof(val), .ver = 7, .flags = OL_KVS_TOMBSTONE};
	struct ol_kvs_rec old = {.len = sizeof(val), .ver = 5};
	memcpy(tomb.kk, k.b, 48);
	memcpy(old.kk, k.b, 48);
	ok(ol_kvs_open(dir, 64 * MiB, MiB, NULL, NULL, &s) == 0 &&
	       ol_kvs_append(s, &tomb, NULL, &loc, dropped, &nd) == 0 &&
	       ol_kvs_append(s, &old, val, &loc, dropped, &nd) == 0,
	   "segment: tombstone (ver 7), then the older record (ver 5) of the same key");
	ol_kvs_close(s);
	struct ol_kve *e = open_eng(8 * MiB, dir, 64 * MiB, 1000);
	ok(e && get(e, NS_A, 4242, sizeof(val), 9) == OL_KV_MISS,
	   "recovered: the key stays deleted");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ok(st.entries == 0 && st.nvme_entries == 0, "no entry is left behind by the tombstone");
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

static void
test_prefault(void)
{
	struct ol_kve *e = open_eng_pf(32 * MiB, NULL, 0, 0, true);
	ok(e && put(e, NS_A, 1, MiB, 1) == OL_KV_OK && get(e, NS_A, 1, MiB, 1) == OL_KV_OK,
	   "puts and reads while the DRAM tier is prefaulted");
	struct ol_kve_stats st;
	for (int i = 0; i < 2000; i++) {
		ol_kve_get_stats(e, &st);
		if (st.prefaulted >= 15)
			break;
		usleep(10 * 1000);
	}
	ok(st.prefaulted >= 15, "the background prefault populated the other %llu pages",
	   (unsigned long long)st.prefaulted);
	ol_kve_close(e);
	e = open_eng_pf(1024 * MiB, NULL, 0, 0, true);
	ok(e != NULL, "a 1 GiB tier with prefault");
	ol_kve_close(e);
	ok(1, "close stops its prefault early");
}

/* The prefault touches each page it takes (an atomic add of 0 from user mode, a write(2) of the
 * page into a scratch memfd from kernel mode) while puts may already be writing slots there:
 * none of their bytes may change. Puts of 64 KiB go on beside the prefault of a 128 MiB tier
 * until every page is either prefaulted or taken by a put; then every block must read back
 * exactly. */
static void
test_prefault_beside_puts(void)
{
	struct ol_kve *e = open_eng_pf(128 * MiB, NULL, 0, 0, true);
	struct ol_kve_stats st = {0};
	uint64_t n = 0, pages = 0;
	bool good = e != NULL;
	time_t end = time(NULL) + 120;
	while (good && n < 1800 && time(NULL) < end) {
		good = put(e, NS_A, 50000 + n, 64 * KiB, 7000 + n) == OL_KV_OK;
		n++;
		ol_kve_get_stats(e, &st);
		pages = st.prefaulted + (st.dram_used + 2 * MiB - 1) / (2 * MiB);
		if (pages >= 64)
			break;
	}
	while (good && pages < 64 && time(NULL) < end) { /* the rest of the prefault */
		usleep(10 * 1000);
		ol_kve_get_stats(e, &st);
		pages = st.prefaulted + (st.dram_used + 2 * MiB - 1) / (2 * MiB);
	}
	ok(good && pages >= 64, "%llu puts beside the prefault (%llu pages prefaulted)",
	   (unsigned long long)n, (unsigned long long)st.prefaulted);
	for (uint64_t i = 0; i < n && good; i++)
		good = get(e, NS_A, 50000 + i, 64 * KiB, 7000 + i) == OL_KV_OK;
	ok(good, "every block put beside the prefault reads back exactly");
	ol_kve_close(e);
}

static void
test_proto(void)
{
	struct ol_kvp_limits lim = {OL_KVP_MAX_BATCH, MiB};
	uint8_t buf[512];
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION,	 OL_KVP_PUT, 0, 1, 0,
			       42,	     OL_KVP_REQ_ENT + 10};
	struct ol_kvp_req_ent e = {{1, 2, 3}, 10, 0, 0};
	ol_kvp_hdr_encode(buf, &h);
	ol_kvp_req_ent_encode(buf + OL_KVP_HDR, &e);
	memset(buf + OL_KVP_HDR + OL_KVP_REQ_ENT, 7, 10);
	size_t n = OL_KVP_HDR + OL_KVP_REQ_ENT + 10;
	ok(ol_kvp_parse_request(buf, n, &lim) == (int)n, "a PUT frame parses");
	ok(ol_kvp_parse_request(buf, n - 1, &lim) == 0, "a short PUT frame needs more");
	struct ol_kvp_hdr d;
	ok(ol_kvp_hdr_decode(buf, n, &d) == OL_KVP_HDR && d.req_id == 42 && d.count == 1,
	   "header round trip");
	buf[0] ^= 1;
	ok(ol_kvp_parse_request(buf, n, &lim) == -EBADMSG, "bad magic: -EBADMSG");
	buf[0] ^= 1;
	e.len = 2 * MiB;
	ol_kvp_req_ent_encode(buf + OL_KVP_HDR, &e);
	ok(ol_kvp_parse_request(buf, n, &lim) < 0, "entry over max_block rejected");
	h.count = OL_KVP_MAX_BATCH + 1;
	ol_kvp_hdr_encode(buf, &h);
	ok(ol_kvp_parse_request(buf, n, &lim) == -EMSGSIZE, "count over the batch cap rejected");
	h.op = 99;
	h.count = 0;
	ol_kvp_hdr_encode(buf, &h);
	ok(ol_kvp_parse_request(buf, n, &lim) == -EINVAL, "unknown opcode rejected");
	{
		struct ol_kvp_hdr lh = {.magic = OL_KVP_MAGIC,
					.version = OL_KVP_VERSION,
					.op = OL_KVP_LEASE,
					.count = 1,
					.body_len = OL_KVP_REQ_ENT};
		struct ol_kvp_req_ent le = {.len = 30000};
		uint8_t lb[OL_KVP_HDR + OL_KVP_REQ_ENT];
		ol_kvp_hdr_encode(lb, &lh);
		ol_kvp_req_ent_encode(lb + OL_KVP_HDR, &le);
		ok(ol_kvp_parse_request(lb, sizeof(lb), &lim) == (int)sizeof(lb),
		   "a LEASE frame parses (entry len = ttl)");
		lh.flags = OL_KVP_F_NOREPLY;
		ol_kvp_hdr_encode(lb, &lh);
		ok(ol_kvp_parse_request(lb, sizeof(lb), &lim) == -EINVAL, "LEASE has no NOREPLY");
	}
	struct ol_kvp_welcome w = {.flags = 1,
				   .max_batch = 1024,
				   .max_block = MiB,
				   .shm_size = 123,
				   .epoch = 9,
				   .unit = 4096,
				   .shm_name = "/x",
				   .name_len = 2},
			      w2;
	int wl = ol_kvp_welcome_encode(buf, sizeof(buf), &w);
	ok(wl > 0 && ol_kvp_welcome_decode(buf, (size_t)wl, &w2) == 0 && w2.epoch == 9 &&
	       w2.name_len == 2 && memcmp(w2.shm_name, "/x", 2) == 0 && !w2.v2 && !w2.auth,
	   "welcome round trip");
	/* version 2: auth flag, nonce and the unix socket path after the v1 fields */
	w.v2 = 1;
	w.auth = 1;
	memset(w.nonce, 0xab, sizeof(w.nonce));
	w.unix_path = "/run/openlake/kv-9400.sock";
	w.path_len = (uint16_t)strlen(w.unix_path);
	wl = ol_kvp_welcome_encode(buf, sizeof(buf), &w);
	ok(wl == 50 + 2 + 38 + w.path_len && ol_kvp_welcome_decode(buf, (size_t)wl, &w2) == 0 &&
	       w2.v2 && w2.auth == 1 && w2.nonce[31] == 0xab && w2.path_len == w.path_len &&
	       memcmp(w2.unix_path, w.unix_path, w.path_len) == 0 && w2.epoch == 9,
	   "welcome v2 round trip");
	ok(ol_kvp_welcome_decode(buf, (size_t)wl - 1, &w2) == -EINVAL &&
	       ol_kvp_welcome_decode(buf, 50 + 2 + 10, &w2) == -EINVAL,
	   "welcome v2 cut short rejected");
	/* AUTH: exactly a 32-byte mac, no entries */
	h.op = OL_KVP_AUTH;
	h.count = 0;
	h.body_len = OL_KVP_MAC;
	ol_kvp_hdr_encode(buf, &h);
	memset(buf + OL_KVP_HDR, 1, OL_KVP_MAC);
	ok(ol_kvp_parse_request(buf, OL_KVP_HDR + OL_KVP_MAC, &lim) == OL_KVP_HDR + OL_KVP_MAC,
	   "auth frame parses");
	h.body_len = OL_KVP_MAC - 1;
	ol_kvp_hdr_encode(buf, &h);
	ok(ol_kvp_parse_request(buf, OL_KVP_HDR + OL_KVP_MAC, &lim) == -EMSGSIZE,
	   "auth frame with a short mac rejected");
	uint8_t nonce[OL_KVP_NONCE] = {1}, m1[OL_KVP_AUTH_MSG], m2[OL_KVP_AUTH_MSG];
	size_t l1 = ol_kvp_auth_msg(m1, nonce, "ns-a", 4),
	       l2 = ol_kvp_auth_msg(m2, nonce, "ns-b", 4);
	ok(l1 == 16 + OL_KVP_NONCE + 4 && l1 == l2 && memcmp(m1, m2, l1) != 0,
	   "auth message binds the namespace");
}

static void
mac_of(const char *token, const uint8_t nonce[OL_KVP_NONCE], const char *ns, uint8_t mac[32])
{
	uint8_t msg[OL_KVP_AUTH_MSG];
	unsigned ml = 0;
	size_t n = ol_kvp_auth_msg(msg, nonce, ns, (uint16_t)strlen(ns));
	HMAC(EVP_sha256(), token, (int)strlen(token), msg, n, mac, &ml);
}

/* Tokens against the HMAC a client computes the same way (OpenSSL, RFC 2104). */
static void
test_access_tokens(void)
{
	static struct ol_config cfg;
	struct ol_kva a;
	uint8_t nonce[OL_KVP_NONCE], other[OL_KVP_NONCE], mac[32];
	memset(nonce, 7, sizeof(nonce));
	memset(other, 8, sizeof(other));
	ol_config_default(&cfg);
	ok(ol_kva_init(&a, &cfg) == 0 && !ol_kva_on(&a),
	   "no secret, no tokens: access control off");
	snprintf(cfg.kv_secret, sizeof(cfg.kv_secret), "pool-secret");
	snprintf(cfg.kv_tokens[0].token, sizeof(cfg.kv_tokens[0].token), "tok-a");
	snprintf(cfg.kv_tokens[0].namespaces, sizeof(cfg.kv_tokens[0].namespaces), "llama3/*,qwen");
	cfg.n_kv_tokens = 1;
	ok(ol_kva_init(&a, &cfg) == 0 && ol_kva_on(&a), "secret + one token: access control on");
	mac_of("pool-secret", nonce, "anything/at/all", mac);
	ok(ol_kva_check(&a, nonce, "anything/at/all", 15, mac) == 0, "the secret covers any ns");
	mac_of("tok-a", nonce, "llama3/bf16/tp0", mac);
	ok(ol_kva_check(&a, nonce, "llama3/bf16/tp0", 15, mac) == 0, "token within its pattern");
	ok(ol_kva_check(&a, other, "llama3/bf16/tp0", 15, mac) == -EKEYREJECTED,
	   "a mac over another nonce (replay) is rejected");
	mac_of("tok-a", nonce, "qwen", mac);
	ok(ol_kva_check(&a, nonce, "qwen", 4, mac) == 0, "token: second pattern");
	mac_of("tok-a", nonce, "mistral", mac);
	ok(ol_kva_check(&a, nonce, "mistral", 7, mac) == -EACCES, "token outside its patterns");
	mac_of("tok-b", nonce, "qwen", mac);
	ok(ol_kva_check(&a, nonce, "qwen", 4, mac) == -EKEYREJECTED, "unknown token rejected");
	mac_of("tok-a", nonce, "qwen", mac);
	mac[31] ^= 1;
	ok(ol_kva_check(&a, nonce, "qwen", 4, mac) == -EKEYREJECTED, "one flipped bit rejected");
	ok(ol_kva_check(&a, nonce, "qwen\0x", 6, mac) == -EKEYREJECTED,
	   "a namespace with a NUL is not matched by its prefix");
	cfg.kv_tokens[0].token[0] = '\0';
	ok(ol_kva_init(&a, &cfg) == -EINVAL, "a [[kv.tokens]] entry without a token is an error");
	cfg.kv_tokens[0].token[0] = 't';
	snprintf(cfg.kv_shm_group, sizeof(cfg.kv_shm_group), "no-such-group-olkv");
	ok(ol_kva_init(&a, &cfg) == -EINVAL, "an unknown shm_group is an error");
	snprintf(cfg.kv_shm_group, sizeof(cfg.kv_shm_group), "4242");
	ok(ol_kva_init(&a, &cfg) == 0 && a.has_gid && a.gid == 4242,
	   "a numeric shm_group is a gid (a container image may not name it)");
	snprintf(cfg.kv_shm_group, sizeof(cfg.kv_shm_group), "42x");
	ok(ol_kva_init(&a, &cfg) == -EINVAL, "a shm_group of digits and letters is a name");
	/* peer credentials: a socketpair's peer is this process (our uid) */
	int sv[2];
	cfg.kv_shm_group[0] = '\0';
	ok(ol_kva_init(&a, &cfg) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 &&
	       ol_kva_peer_local(&a, sv[0]),
	   "a peer of our own uid is granted the shm path");
	a.uid = 12345; /* as if the daemon ran as another user: root is still allowed */
	ok(ol_kva_peer_local(&a, sv[0]) == (geteuid() == 0), "a peer of another uid is not");
	close(sv[0]);
	close(sv[1]);
}

/* The UCX transport's framing (proto.h): a request message is the header + its entries in
 * the AM header and the rest of the body as data; a GET reply carries its reply entries in the
 * AM header and the hits' values as data. Checked against frames built here by hand. */
static uint8_t ucx_am[OL_KVP_HDR + 8 * OL_KVP_REQ_ENT];

static size_t
ucx_req(uint8_t op, uint32_t count, uint64_t body_len, const uint64_t *lens)
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION, op, 0, count, 0, 7, body_len};
	ol_kvp_hdr_encode(ucx_am, &h);
	for (uint32_t i = 0; i < count; i++) {
		struct ol_kvp_req_ent e = {.len = lens ? lens[i] : 0};
		memset(e.key, (int)i, sizeof(e.key));
		ol_kvp_req_ent_encode(ucx_am + OL_KVP_HDR + (size_t)i * OL_KVP_REQ_ENT, &e);
	}
	return OL_KVP_HDR + (size_t)count * OL_KVP_REQ_ENT;
}

static void
test_ucx_framing(void)
{
	struct ol_kvp_limits lim = {.max_batch = 1024, .max_block = 1 << 20};
	struct ol_kvp_hdr h;
	uint64_t lens[3] = {100, 0, 4096};
	uint64_t vals = 100 + 0 + 4096, ents = 3 * OL_KVP_REQ_ENT;
	size_t hl = ucx_req(OL_KVP_PUT, 3, ents + vals, lens);
	ok(ol_kvp_ucx_req_check(ucx_am, hl, vals, &lim, &h) == 0 && h.count == 3 && h.req_id == 7,
	   "ucx: a PUT of 3 entries (one empty) checks");
	ok(ol_kvp_ucx_req_check(ucx_am, hl, vals - 1, &lim, &h) == -EMSGSIZE,
	   "ucx: PUT data one byte short of the entries' lengths: refused");
	ok(ol_kvp_ucx_req_check(ucx_am, hl - 1, vals, &lim, &h) == -EMSGSIZE,
	   "ucx: PUT header cut inside an entry: refused");
	lens[2] = (1 << 20) + 1;
	hl = ucx_req(OL_KVP_PUT, 3, ents + 100 + lens[2], lens);
	ok(ol_kvp_ucx_req_check(ucx_am, hl, 100 + lens[2], &lim, &h) == -EMSGSIZE,
	   "ucx: a PUT value over max_block: refused");
	hl = ucx_req(OL_KVP_GET, 2, 2 * OL_KVP_REQ_ENT, NULL);
	ok(ol_kvp_ucx_req_check(ucx_am, hl, 0, &lim, &h) == 0, "ucx: a GET of 2 entries checks");
	ok(ol_kvp_ucx_req_check(ucx_am, hl, 5, &lim, &h) == -EMSGSIZE,
	   "ucx: a GET with data after its entries: refused");
	hl = ucx_req(OL_KVP_HELLO, 0, 40, NULL);
	ok(ol_kvp_ucx_req_check(ucx_am, hl, 40, &lim, &h) == 0,
	   "ucx: HELLO: header alone, the body as data");
	ok(ol_kvp_ucx_req_check(ucx_am, hl + OL_KVP_REQ_ENT, 40, &lim, &h) == -EMSGSIZE,
	   "ucx: HELLO with stray entry bytes in the header: refused");
	ucx_am[0] ^= 1;
	ok(ol_kvp_ucx_req_check(ucx_am, hl, 40, &lim, &h) == -EBADMSG, "ucx: bad magic: refused");
	ok(ol_kvp_ucx_req_check(ucx_am, 10, 0, &lim, &h) == -EBADMSG, "ucx: a short header");

	/* GET reply: 3 entries, hit (10 bytes), miss, hit (0 bytes); capacities 16, 16, 0 */
	uint8_t rep[OL_KVP_HDR + 3 * OL_KVP_REP_ENT];
	struct ol_kvp_hdr rh = {
	    OL_KVP_MAGIC, OL_KVP_VERSION, OL_KVP_GET, OL_KVP_F_REPLY, 3, 0, 7, 10};
	ol_kvp_hdr_encode(rep, &rh);
	struct ol_kvp_rep_ent re[3] = {{0, 9, 10, 0, 0}, {2, 9, 0, 0, 0}, {0, 9, 0, 0, 0}}, out[3];
	for (int i = 0; i < 3; i++)
		ol_kvp_rep_ent_encode(rep + OL_KVP_HDR + i * OL_KVP_REP_ENT, &re[i]);
	uint64_t cap[3] = {16, 16, 0};
	ok(ol_kvp_ucx_get_reply(rep, sizeof(rep), 10, 3, cap, out) == 0 && out[0].len == 10 &&
	       out[1].status == 2 && out[2].rsv == 9,
	   "ucx: a GET reply (hit, miss, empty hit) checks");
	ok(ol_kvp_ucx_get_reply(rep, sizeof(rep), 11, 3, cap, out) == -EPROTO,
	   "ucx: GET reply data longer than its hits: refused");
	cap[0] = 9;
	ok(ol_kvp_ucx_get_reply(rep, sizeof(rep), 10, 3, cap, out) == -EPROTO,
	   "ucx: a hit larger than the receiver's capacity: refused");
	cap[0] = 16;
	ok(ol_kvp_ucx_get_reply(rep, sizeof(rep), 10, 2, cap, out) == -EPROTO,
	   "ucx: a GET reply with another count than asked: refused");
	ok(ol_kvp_ucx_get_reply(rep, sizeof(rep) - 1, 10, 3, cap, out) == -EPROTO,
	   "ucx: a GET reply header cut short: refused");
}

int
main(void)
{
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("model-a", 7, NS_A);
	ol_kve_ns_hash("model-b", 7, NS_B);
	ok(memcmp(NS_A, NS_B, 16) != 0, "namespace hashes differ");
	test_basic();
	test_namespaces();
	test_slot_reuse_across_namespaces();
	test_access_tokens();
	test_eviction_order();
	test_leases();
	test_pins_and_seq();
	test_nvme_roundtrip_and_recovery();
	test_pin_dram_never_reads_the_disk();
	test_nvme_promotion_reach();
	test_writeback_and_capacity();
	test_concurrent_dirty_evictions(true);
	test_concurrent_dirty_evictions(false);
	test_kill9_during_writeback();
	test_tombstone_out_of_order();
	test_prefault();
	test_prefault_beside_puts();
	test_proto();
	test_ucx_framing();
	tap_done();
}
