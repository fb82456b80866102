/* tests/unit/test_kv_ns.c - KV engine, per namespace: what each namespace holds in each tier,
 * exact after put, duplicate put, delete, eviction, demotion, promotion, reopen (blocks
 * recovered from NVMe count again, unnamed until a HELLO names them); the quota: a namespace
 * flooding past it moves only its own blocks out of DRAM, pinned blocks stay, a block that
 * cannot fit is refused as by a full pool, promotions keep to it; concurrent puts, gets and
 * deletes of two namespaces leave the counters equal to the blocks held. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "kv/engine.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB (1u << 20)
#define KiB 1024u

static uint8_t NS_A[16], NS_B[16];

static struct ol_kve *
open_eng(uint64_t dram, const char *spill, bool strict, double quota)
{
	struct ol_kve_opts o = {.dram_bytes = dram,
				.spill_dir = spill,
				.spill_bytes = spill ? 256 * MiB : 0,
				.max_block = 64 * MiB,
				.writeback_ms = 1000,
				.strict = strict,
				.ns_quota_frac = quota};
	struct ol_kve *e = NULL;
	return ol_kve_open(&o, &e) == 0 ? e : NULL;
}

static void
key_of(struct ol_kvk *k, const uint8_t *ns, uint64_t id)
{
	uint8_t key[32];
	make_key(key, id);
	ol_kve_key(k, key, ns);
}

static int
put(struct ol_kve *e, const uint8_t *ns, uint64_t id, size_t len)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, ns, id);
	int st = ol_kve_alloc(e, &k, len, &s);
	if (st != OL_KV_OK)
		return st;
	fill_pattern(s.ptr, len, id);
	return ol_kve_commit(e, &k, s.off, s.seq, len);
}

static int
get(struct ol_kve *e, const uint8_t *ns, uint64_t id, size_t len)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, ns, id);
	int st = ol_kve_pin(e, &k, false, &s);
	if (st != OL_KV_OK)
		return st;
	if (s.len != len || !check_pattern(s.ptr, len, id))
		st = OL_KV_CORRUPT;
	if (s.off != OL_KVE_NOOFF)
		ol_kve_release(e, s.off, s.seq);
	return st;
}

static int
del(struct ol_kve *e, const uint8_t *ns, uint64_t id)
{
	struct ol_kvk k;
	key_of(&k, ns, id);
	return ol_kve_delete(e, &k);
}

/* Where block id of ns is: 0 absent, 1 DRAM (maybe NVMe too), 2 NVMe only. */
static int
where(struct ol_kve *e, const uint8_t *ns, uint64_t id)
{
	struct ol_kvk k;
	uint64_t len;
	key_of(&k, ns, id);
	if (ol_kve_exists(e, &k, &len) != OL_KV_OK)
		return 0;
	return ol_kve_nvme_only(e, &k) ? 2 : 1;
}

struct find {
	const char *label;
	struct ol_kve_ns r;
	unsigned found, rows;
};

static void
find_cb(void *arg, const struct ol_kve_ns *n)
{
	struct find *f = arg;
	char lb[64];
	f->rows++;
	if (strcmp(ol_kve_ns_label(n, lb, sizeof(lb)), f->label) == 0) {
		f->r = *n;
		f->found++;
	}
}

/* The row labelled label (zeros when there is none). */
static struct ol_kve_ns
row(struct ol_kve *e, const char *label)
{
	struct find f = {.label = label};
	ol_kve_ns_each(e, find_cb, &f);
	return f.r;
}

/* What ns holds by looking at each of its blocks ids [lo, hi) with lengths len(id). */
struct held {
	uint64_t dn, db, nn, nb;
};

static struct held
scan(struct ol_kve *e, const uint8_t *ns, uint64_t lo, uint64_t hi, size_t (*len)(uint64_t))
{
	struct held h = {0};
	for (uint64_t i = lo; i < hi; i++) {
		int w = where(e, ns, i);
		h.dn += w == 1;
		h.db += w == 1 ? len(i) : 0;
		h.nn += w == 2;
		h.nb += w == 2 ? len(i) : 0;
	}
	return h;
}

static size_t
len_small(uint64_t i)
{
	return (size_t)(i % 5 == 0 ? 0 : 1000 + (i * 7919) % (40 * KiB));
}

static size_t
len_64k(uint64_t i)
{
	(void)i;
	return 64 * KiB;
}

static bool
same_dram(const struct ol_kve_ns *r, struct held h)
{
	return r->dram_blocks == h.dn && r->dram_bytes == h.db;
}

static void
test_dram_residency(void)
{
	struct ol_kve *e = open_eng(16 * MiB, NULL, false, 0); /* a page for each size class */
	ol_kve_ns_name(e, NS_A, "model-a", 7);
	ol_kve_ns_name(e, NS_B, "model-b", 7);
	int good = 1;
	for (uint64_t i = 0; i < 20; i++)
		good &= put(e, NS_A, i, len_small(i)) == OL_KV_OK;
	for (uint64_t i = 0; i < 5; i++)
		good &= put(e, NS_B, 100 + i, 4096) == OL_KV_OK;
	ok(good, "20 blocks put in model-a, 5 in model-b");
	struct ol_kve_ns a = row(e, "model-a"), b = row(e, "model-b");
	uint64_t want = 0;
	for (uint64_t i = 0; i < 20; i++)
		want += len_small(i);
	ok(a.dram_blocks == 20 && a.dram_bytes == want && a.nvme_blocks == 0,
	   "model-a holds 20 blocks, %llu bytes in DRAM (%llu, %llu)", (unsigned long long)want,
	   (unsigned long long)a.dram_blocks, (unsigned long long)a.dram_bytes);
	ok(b.dram_blocks == 5 && b.dram_bytes == 5 * 4096, "model-b holds 5 blocks of 4 KiB");
	ok(put(e, NS_A, 3, 999) == OL_KV_EXISTS && row(e, "model-a").dram_bytes == want,
	   "a duplicate put changes nothing");
	ok(del(e, NS_A, 3) == OL_KV_OK && put(e, NS_A, 3, 5000) == OL_KV_OK,
	   "delete block 3, put it again with 5000 bytes");
	want = want - len_small(3) + 5000;
	a = row(e, "model-a");
	ok(a.dram_blocks == 20 && a.dram_bytes == want, "model-a: 20 blocks, %llu bytes",
	   (unsigned long long)want);
	ok(del(e, NS_B, 100) == OL_KV_OK && del(e, NS_B, 100) == OL_KV_MISS &&
	       row(e, "model-b").dram_blocks == 4 && row(e, "model-b").dram_bytes == 4 * 4096,
	   "a delete takes one block off model-b, a second delete nothing");
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, NS_B, 200);
	ok(ol_kve_alloc(e, &k, 8192, &s) == OL_KV_OK && row(e, "model-b").dram_blocks == 4,
	   "a reserved, uncommitted slot is not counted");
	ol_kve_release(e, s.off, s.seq);
	/* no NVMe tier: a flood of model-a evicts (model-a's oldest and model-b's) */
	good = 1;
	for (uint64_t i = 1000; i < 1300; i++)
		good &= put(e, NS_A, i, 64 * KiB) == OL_KV_OK;
	ok(good, "a flood of 300 x 64 KiB into 16 MiB of DRAM");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	uint64_t na = scan(e, NS_A, 1000, 1300, len_64k).dn + scan(e, NS_A, 0, 20, len_small).dn;
	struct held hb = scan(e, NS_B, 100, 105, len_64k);
	a = row(e, "model-a");
	b = row(e, "model-b");
	ok(st.evictions > 0 && a.dram_blocks == na,
	   "after %llu evictions model-a's count equals its blocks found (%llu)",
	   (unsigned long long)st.evictions, (unsigned long long)a.dram_blocks);
	ok(b.dram_blocks == hb.dn, "model-b's count equals its blocks found (%llu)",
	   (unsigned long long)b.dram_blocks);
	ok(a.dram_blocks + b.dram_blocks == st.dram_entries,
	   "the namespaces' blocks add up to the pool's (%llu)",
	   (unsigned long long)st.dram_entries);
	ol_kve_close(e);
}

static char *
tmpdir(void)
{
	return kv_tmpdir("olkvns-test");
}

static size_t
len_mid(uint64_t i)
{
	return (size_t)(4096 + (i * 7919) % (300 * KiB));
}

/* Both tiers: the counts follow demotion, promotion, delete and a reopen. */
static void
test_nvme_residency(void)
{
	char *dir = tmpdir();
	struct ol_kve *e = open_eng(8 * MiB, dir, true, 0); /* strict: every put on NVMe */
	ol_kve_ns_name(e, NS_A, "model-a", 7);
	int good = 1;
	for (uint64_t i = 0; i < 60; i++)
		good &= put(e, NS_A, i, len_mid(i)) == OL_KV_OK;
	for (uint64_t i = 0; i < 4; i++)
		good &= put(e, NS_B, 500 + i, 8192) == OL_KV_OK;
	ok(good, "60 blocks of model-a (more than DRAM), 4 of the unnamed other");
	struct held h = scan(e, NS_A, 0, 60, len_mid);
	struct ol_kve_ns a = row(e, "model-a");
	uint64_t all = 0;
	for (uint64_t i = 0; i < 60; i++)
		all += len_mid(i);
	ok(same_dram(&a, h) && a.nvme_blocks == 60 && a.nvme_bytes == all && h.nn > 0,
	   "model-a: %llu in DRAM (%llu bytes), all 60 on NVMe (%llu bytes), %llu NVMe only",
	   (unsigned long long)h.dn, (unsigned long long)h.db, (unsigned long long)all,
	   (unsigned long long)h.nn);
	for (int pass = 0; pass < 2; pass++) /* the second NVMe hit promotes */
		for (uint64_t i = 0; i < 60; i++)
			good &= get(e, NS_A, i, len_mid(i)) == OL_KV_OK;
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	h = scan(e, NS_A, 0, 60, len_mid);
	a = row(e, "model-a");
	ok(good && st.promotions > 0 && same_dram(&a, h) && a.nvme_blocks == 60,
	   "after %llu promotions the DRAM count is still the blocks found there (%llu)",
	   (unsigned long long)st.promotions, (unsigned long long)h.dn);
	ok(del(e, NS_A, 7) == OL_KV_OK && row(e, "model-a").nvme_blocks == 59 &&
	       row(e, "model-a").nvme_bytes == all - len_mid(7),
	   "a delete takes the block off NVMe too");
	char lb[64];
	struct ol_kve_ns bn = {.id = {0}};
	memcpy(bn.id, NS_B, 16);
	bn.id[0] &= 0xfe;
	struct ol_kve_ns b = row(e, ol_kve_ns_label(&bn, lb, sizeof(lb)));
	ok(b.nvme_blocks == 4 && b.nvme_bytes == 4 * 8192 && strncmp(lb, "(unnamed ", 9) == 0,
	   "a namespace no HELLO named is shown by its hash: %s", lb);
	ok(ol_kve_flush(e) == 0, "flush");
	ol_kve_close(e);

	e = open_eng(8 * MiB, dir, false, 0);
	b = row(e, lb);
	ok(e && b.nvme_blocks == 4 && b.dram_blocks == 0, "reopen: model-b's 4 blocks recovered");
	ok(row(e, "model-a").nvme_blocks == 0, "model-a has no name yet after the reopen");
	ol_kve_ns_name(e, NS_A, "model-a", 7);
	a = row(e, "model-a");
	ok(a.nvme_blocks == 59 && a.nvme_bytes == all - len_mid(7) && a.dram_blocks == 0,
	   "named again: 59 blocks, %llu bytes on NVMe, none in DRAM",
	   (unsigned long long)(all - len_mid(7)));
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* 8 MiB of DRAM, a quota of half: model-b's blocks stay whatever model-a puts. */
static void
test_quota(void)
{
	struct ol_kve *e = open_eng(8 * MiB, NULL, false, 0.5);
	ol_kve_ns_name(e, NS_A, "model-a", 7);
	ol_kve_ns_name(e, NS_B, "model-b", 7);
	ok(ol_kve_ns_quota(e) == 4 * MiB, "quota 0.5 of 8 MiB = 4 MiB");
	int good = 1;
	for (uint64_t i = 0; i < 16; i++)
		good &= put(e, NS_B, 100 + i, 64 * KiB) == OL_KV_OK;
	for (uint64_t i = 0; i < 200; i++)
		good &= put(e, NS_A, i, 64 * KiB) == OL_KV_OK;
	ok(good, "model-b puts 1 MiB, then model-a floods 12.5 MiB: every put answered OK");
	struct ol_kve_ns a = row(e, "model-a"), b = row(e, "model-b");
	struct held ha = scan(e, NS_A, 0, 200, len_64k);
	ok(a.dram_bytes == 4 * MiB && a.dram_blocks == 64 && same_dram(&a, ha),
	   "model-a holds its quota exactly: 64 blocks");
	ok(scan(e, NS_A, 136, 200, len_64k).dn == 64, "... its 64 newest");
	ok(scan(e, NS_B, 100, 116, len_64k).dn == 16 && b.dram_blocks == 16,
	   "every block of model-b is still there");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ok(a.quota_evictions == 136 && st.evictions == 136 && b.quota_evictions == 0,
	   "136 quota evictions, all model-a's (pool: %llu)", (unsigned long long)st.evictions);
	uint64_t full = st.full;
	ok(put(e, NS_A, 900, 4 * MiB + 1) == OL_KV_FULL, "a block larger than the quota: FULL");
	ol_kve_get_stats(e, &st);
	ok(st.full == full + 1, "... counted as full");
	/* a pinned block of model-a stays through its next flood */
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, NS_A, 136); /* its oldest */
	ok(ol_kve_pin(e, &k, true, &s) == OL_KV_OK, "pin model-a's oldest block");
	good = 1;
	for (uint64_t i = 200; i < 300; i++)
		good &= put(e, NS_A, i, 64 * KiB) == OL_KV_OK;
	ok(good && where(e, NS_A, 136) == 1 && row(e, "model-a").dram_bytes <= 4 * MiB,
	   "100 more: the pinned one stays, model-a keeps to its quota");
	ok(scan(e, NS_B, 100, 116, len_64k).dn == 16, "model-b still has all 16");
	ol_kve_release(e, s.off, s.seq);
	ol_kve_close(e);

	/* every block of model-a in DRAM pinned: the next put is refused, not model-b's evicted */
	e = open_eng(8 * MiB, NULL, false, 0.5);
	struct ol_kve_slot p[2];
	good = put(e, NS_B, 1, 2 * MiB) == OL_KV_OK;
	for (uint64_t i = 0; i < 2; i++) {
		good &= put(e, NS_A, 10 + i, 2 * MiB) == OL_KV_OK;
		key_of(&k, NS_A, 10 + i);
		good &= ol_kve_pin(e, &k, true, &p[i]) == OL_KV_OK;
	}
	ok(good, "model-a holds its 4 MiB in two pinned 2 MiB blocks");
	ok(put(e, NS_A, 12, 64 * KiB) == OL_KV_FULL, "its next put: FULL (as a full pool)");
	ok(where(e, NS_B, 1) == 1, "model-b's block was not taken for it");
	for (int i = 0; i < 2; i++)
		ol_kve_release(e, p[i].off, p[i].seq);
	ok(put(e, NS_A, 12, 64 * KiB) == OL_KV_OK && where(e, NS_B, 1) == 1,
	   "unpinned: the put evicts model-a's own oldest");
	ol_kve_close(e);
}

/* With NVMe: quota evictions demote, promotions keep to the quota. */
static void
test_quota_nvme(void)
{
	char *dir = tmpdir();
	struct ol_kve *e = open_eng(8 * MiB, dir, true, 0.25);
	int good = 1;
	for (uint64_t i = 0; i < 32; i++)
		good &= put(e, NS_B, 100 + i, 64 * KiB) == OL_KV_OK;
	for (uint64_t i = 0; i < 100; i++)
		good &= put(e, NS_A, i, 64 * KiB) == OL_KV_OK;
	ok(good, "model-b 2 MiB, model-a 6.25 MiB with a 2 MiB quota (strict NVMe tier)");
	struct held ha = scan(e, NS_A, 0, 100, len_64k);
	ok(ha.dn == 32 && ha.nn == 68, "model-a: 32 blocks in DRAM, 68 demoted to NVMe");
	ok(scan(e, NS_B, 100, 132, len_64k).dn == 32, "model-b: all 32 in DRAM");
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < 100; i++)
			good &= get(e, NS_A, i, 64 * KiB) == OL_KV_OK;
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	ha = scan(e, NS_A, 0, 100, len_64k);
	ok(good && st.promotions > 0 && ha.dn <= 32 && ha.dn + ha.nn == 100,
	   "model-a read twice over: %llu promotions, still %llu in DRAM",
	   (unsigned long long)st.promotions, (unsigned long long)ha.dn);
	ok(scan(e, NS_B, 100, 132, len_64k).dn == 32, "model-b: still all 32 in DRAM");
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

/* Threads put, get and delete in two namespaces at once (with a quota); afterwards the
 * counters equal the blocks held. Also what TSan is run on. */
struct worker {
	struct ol_kve *e;
	const uint8_t *ns;
	uint64_t base;
};

static void *
work(void *arg)
{
	struct worker *w = arg;
	for (uint64_t i = 0; i < 400; i++) {
		uint64_t id = w->base + i % 150;
		(void)put(w->e, w->ns, id, len_small(id));
		(void)get(w->e, w->ns, w->base + (i * 7) % 150, len_small(w->base + (i * 7) % 150));
		if (i % 5 == 0)
			(void)del(w->e, w->ns, w->base + (i * 3) % 150);
	}
	return NULL;
}

static void
test_concurrent(void)
{
	char *dir = tmpdir();
	struct ol_kve *e = open_eng(16 * MiB, dir, false, 0.5);
	ol_kve_ns_name(e, NS_A, "model-a", 7);
	ol_kve_ns_name(e, NS_B, "model-b", 7);
	pthread_t t[4];
	struct worker w[4] = {{e, NS_A, 0}, {e, NS_A, 1000}, {e, NS_B, 0}, {e, NS_B, 1000}};
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, work, &w[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ok(ol_kve_flush(e) == 0, "4 threads put, get and delete in two namespaces; flush");
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	uint64_t dn = 0, nn = 0;
	int exact = 1;
	for (int n = 0; n < 2; n++) {
		const uint8_t *ns = n ? NS_B : NS_A;
		struct held h = scan(e, ns, 0, 150, len_small),
			    h2 = scan(e, ns, 1000, 1150, len_small);
		struct ol_kve_ns r = row(e, n ? "model-b" : "model-a");
		exact &= r.dram_blocks == h.dn + h2.dn && r.dram_bytes == h.db + h2.db;
		/* a block in DRAM and on NVMe counts in both */
		exact &=
		    r.nvme_blocks >= h.nn + h2.nn && r.nvme_blocks <= h.nn + h2.nn + h.dn + h2.dn;
		dn += r.dram_blocks;
		nn += r.nvme_blocks;
	}
	ok(exact, "each namespace's counts equal the blocks found");
	ok(dn == st.dram_entries && nn == st.nvme_entries,
	   "and add up to the pool's: %llu in DRAM, %llu on NVMe", (unsigned long long)dn,
	   (unsigned long long)nn);
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

int
main(void)
{
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("model-a", 7, NS_A);
	ol_kve_ns_hash("model-b", 7, NS_B);
	test_dram_residency();
	test_nvme_residency();
	test_quota();
	test_quota_nvme();
	test_concurrent();
	tap_done();
}
