/* tests/unit/test_kv_events.c - KV engine removal events: each kind of removal (eviction with no
 * NVMe copy, delete, namespace quota with no NVMe tier, NVMe segments dropped) appends exactly
 * the removed keys, a demotion to NVMe appends nothing; sequences grow, an answer is cut at max
 * and goes on from next, per namespace; a small ring wraps and says lost, to the namespace whose
 * events it overwrote only; EVENTS_NOW; the EVENTS reply body's codec. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "kv/engine.h"
#include "kv/proto.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB  (1u << 20)
#define KiB  1024u
#define MAXK 4096

static uint8_t NS_A[16], NS_B[16];

static struct ol_kve *
open_eng(uint64_t dram, const char *spill, uint64_t spill_bytes, bool strict, double quota,
	 uint64_t events)
{
	struct ol_kve_opts o = {.dram_bytes = dram,
				.spill_dir = spill,
				.spill_bytes = spill_bytes,
				.max_block = 64 * MiB,
				.writeback_ms = 1000,
				.strict = strict,
				.ns_quota_frac = quota,
				.events = events ? events : OL_KVE_EVENTS_DEF};
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

static bool
stored(struct ol_kve *e, const uint8_t *ns, uint64_t id)
{
	struct ol_kvk k;
	uint64_t len;
	key_of(&k, ns, id);
	return ol_kve_exists(e, &k, &len) == OL_KV_OK;
}

/* The id make_key encoded in key (the tests' keys are make_key(id)). */
static uint64_t
id_of(const uint8_t key[32])
{
	uint8_t k[32];
	for (uint64_t id = 0; id < 100000; id++) {
		make_key(k, id);
		if (memcmp(k, key, 32) == 0)
			return id;
	}
	return UINT64_MAX;
}

static uint8_t keys[MAXK][32];

/* Every event of ns from *from on, into ids (n returned); *from moves to next. */
static unsigned
drain(struct ol_kve *e, const uint8_t *ns, uint64_t *from, uint64_t *ids, bool *lost)
{
	uint64_t next;
	bool l;
	unsigned n = ol_kve_events(e, ns, *from, keys, MAXK, &next, &l);
	for (unsigned i = 0; i < n; i++)
		ids[i] = id_of(keys[i]);
	*from = next;
	if (lost)
		*lost = l;
	return n;
}

static bool
same_set(const uint64_t *ids, unsigned n, const bool *gone, uint64_t lo, uint64_t hi)
{
	unsigned want = 0;
	for (uint64_t id = lo; id < hi; id++)
		want += gone[id - lo];
	if (want != n)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (ids[i] < lo || ids[i] >= hi || !gone[ids[i] - lo])
			return false;
	return true;
}

static void
test_evict_delete_no_nvme(void)
{
	static uint64_t ids[MAXK];
	static bool gone[64];
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, false, 0, 0);
	uint64_t from, next;
	bool lost;
	ok(ol_kve_events(e, NS_A, OL_KVE_EV_NOW, keys, MAXK, &from, &lost) == 0 && from == 0 &&
	       !lost,
	   "EVENTS_NOW on a fresh engine: no keys, next 0");
	for (uint64_t i = 0; i < 8; i++)
		put(e, NS_A, i, MiB);
	ok(drain(e, NS_A, &from, ids, &lost) == 0 && !lost, "8 puts that fit: no event");
	for (uint64_t i = 8; i < 20; i++)
		put(e, NS_A, i, MiB);
	for (uint64_t i = 0; i < 20; i++)
		gone[i] = !stored(e, NS_A, i);
	unsigned n = drain(e, NS_A, &from, ids, &lost);
	ok(n == 12 && same_set(ids, n, gone, 0, 20) && !lost,
	   "eviction with no NVMe tier: an event for exactly each evicted key (%u)", n);
	bool order = true;
	for (unsigned i = 1; i < n; i++)
		order &= ids[i] > ids[i - 1]; /* LRU: oldest evicted first */
	ok(order, "events come oldest first");
	ok(from == 12, "next = 12 after 12 events (got %llu)", (unsigned long long)from);
	struct ol_kvk k;
	key_of(&k, NS_A, 19);
	ok(ol_kve_delete(e, &k) == OL_KV_OK, "delete a stored key");
	n = drain(e, NS_A, &from, ids, NULL);
	ok(n == 1 && ids[0] == 19, "delete: one event for that key");
	ok(ol_kve_delete(e, &k) == OL_KV_MISS && drain(e, NS_A, &from, ids, NULL) == 0,
	   "delete of a missing key: no event");
	put(e, NS_B, 500, MiB);
	put(e, NS_A, 30, MiB);
	key_of(&k, NS_B, 500);
	ol_kve_delete(e, &k);
	uint64_t fb = 0;
	n = drain(e, NS_B, &fb, ids, NULL);
	ok(n == 1 && ids[0] == 500, "namespace B sees only its own removal");
	n = drain(e, NS_A, &from, ids, NULL);
	bool only_a = true;
	for (unsigned i = 0; i < n; i++)
		only_a &= ids[i] < 100;
	ok(only_a, "namespace A does not see B's (%u of its own)", n);
	/* an answer cut at max goes on from next */
	for (uint64_t i = 40; i < 50; i++)
		put(e, NS_A, i, MiB);
	uint64_t f2 = from, all = 0;
	unsigned got = 0, calls = 0;
	do {
		n = ol_kve_events(e, NS_A, f2, keys, 3, &next, &lost);
		got += n;
		calls++;
		ok(n <= 3, "a cut answer holds at most max keys");
		f2 = next;
	} while (n == 3 && calls < 100);
	all = drain(e, NS_A, &from, ids, NULL);
	ok(got == all && got >= 8, "cut answers add up to the whole (%u = %llu)", got,
	   (unsigned long long)all);
	ol_kve_close(e);
}

static void
test_quota_no_nvme(void)
{
	static uint64_t ids[MAXK];
	static bool gone[64];
	struct ol_kve *e = open_eng(16 * MiB, NULL, 0, false, 0.25, 0);
	uint64_t from = 0;
	for (uint64_t i = 0; i < 10; i++)
		put(e, NS_A, i, MiB);
	put(e, NS_B, 900, MiB);
	for (uint64_t i = 0; i < 10; i++)
		gone[i] = !stored(e, NS_A, i);
	unsigned n = drain(e, NS_A, &from, ids, NULL);
	ok(n >= 6 && same_set(ids, n, gone, 0, 10),
	   "namespace quota with no NVMe tier: an event per block it dropped (%u)", n);
	uint64_t fb = 0;
	ok(drain(e, NS_B, &fb, ids, NULL) == 0 && stored(e, NS_B, 900),
	   "the other namespace lost nothing and has no event");
	ol_kve_close(e);
}

static char *
tmpdir(void)
{
	return kv_tmpdir("olkv-ev");
}

static void
test_nvme(void)
{
	static uint64_t ids[MAXK];
	static bool gone[64];
	char *dir = tmpdir();
	/* strict: every block is on NVMe before its put returns, so a DRAM eviction demotes */
	struct ol_kve *e = open_eng(4 * MiB, dir, 256 * MiB, true, 0, 0);
	uint64_t from = 0;
	for (uint64_t i = 0; i < 12; i++)
		put(e, NS_A, i, MiB);
	struct ol_kve_stats st;
	ol_kve_get_stats(e, &st);
	bool all = true;
	for (uint64_t i = 0; i < 12; i++)
		all &= stored(e, NS_A, i);
	ok(st.demotions >= 8 && all, "12 MiB into 4 MiB DRAM + NVMe: demoted, all stored");
	ok(drain(e, NS_A, &from, ids, NULL) == 0, "a demotion to NVMe is no event");
	ol_kve_close(e);
	kv_rm_rf(dir);
	/* a small NVMe tier: the oldest segments are dropped, their blocks leave the pool */
	e = open_eng(4 * MiB, dir, 16 * MiB, true, 0, 0);
	from = 0;
	for (uint64_t i = 0; i < 60; i++)
		put(e, NS_A, i, MiB);
	for (uint64_t i = 0; i < 60; i++)
		gone[i] = !stored(e, NS_A, i);
	unsigned n = drain(e, NS_A, &from, ids, NULL);
	ok(n > 20 && same_set(ids, n, gone, 0, 60),
	   "NVMe segments dropped: an event for exactly each block gone (%u)", n);
	ol_kve_close(e);
	kv_rm_rf(dir);
	free(dir);
}

static void
test_wrap(void)
{
	static uint64_t ids[MAXK];
	/* 64 events in all: a few per stripe */
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, false, 0, 64);
	uint64_t cap = ol_kve_events_cap(e), from = 0, next;
	bool lost;
	ok(cap >= 64, "the rings hold at least what was asked (%llu)", (unsigned long long)cap);
	struct ol_kvk k;
	for (uint64_t i = 0; i < 4 * cap; i++) {
		put(e, NS_A, i, 4096);
		key_of(&k, NS_A, i);
		ol_kve_delete(e, &k);
	}
	unsigned n = drain(e, NS_A, &from, ids, &lost);
	ok(lost, "a ring that wrapped past from says lost");
	ok(n <= cap && n > 0 && from == 4 * cap, "what it kept comes back (%u), next = %llu", n,
	   (unsigned long long)from);
	bool order = ids[n - 1] == 4 * cap - 1;
	for (unsigned i = 1; i < n; i++)
		order &= ids[i] > ids[i - 1];
	ok(order, "the kept events in order, the newest last");
	ok(drain(e, NS_A, &from, ids, &lost) == 0 && !lost, "from next on: nothing lost");
	put(e, NS_A, 99999, 4096);
	key_of(&k, NS_A, 99999);
	ol_kve_delete(e, &k);
	n = drain(e, NS_A, &from, ids, &lost);
	ok(n == 1 && ids[0] == 99999 && !lost, "a new removal after catching up: not lost");
	n = ol_kve_events(e, NS_A, from + 1000, keys, MAXK, &next, &lost);
	ok(lost && next == from, "a cursor past the sequence (an earlier server life): lost");
	ol_kve_close(e);
}

/* lost is per namespace: a burst of B's removals that wraps every ring says lost to B, not to
 * A, whose events are older than its cursor; once A's own events are overwritten, A too. */
static void
test_wrap_other_namespace(void)
{
	static uint64_t ids[MAXK];
	struct ol_kve *e = open_eng(8 * MiB, NULL, 0, false, 0, 64);
	uint64_t cap = ol_kve_events_cap(e), from_a = 0, from_b = 0;
	bool lost;
	struct ol_kvk k;
	put(e, NS_A, 1, 4096);
	key_of(&k, NS_A, 1);
	ol_kve_delete(e, &k);
	unsigned n = drain(e, NS_A, &from_a, ids, &lost);
	ok(n == 1 && ids[0] == 1 && !lost, "A reads its one removal");
	for (uint64_t i = 0; i < 4 * cap; i++) {
		put(e, NS_B, i, 4096);
		key_of(&k, NS_B, i);
		ol_kve_delete(e, &k);
	}
	n = drain(e, NS_B, &from_b, ids, &lost);
	ok(lost && n > 0 && n <= cap, "B's burst wrapped the rings: lost to B (%u kept)", n);
	n = drain(e, NS_A, &from_a, ids, &lost);
	ok(n == 0 && !lost, "to A, which read its events before the burst: nothing lost");
	uint64_t a0 = from_a;
	for (uint64_t i = 100; i < 100 + 4 * cap; i++) { /* A's, then B's over them */
		put(e, i % 2 ? NS_A : NS_B, i, 4096);
		key_of(&k, i % 2 ? NS_A : NS_B, i);
		ol_kve_delete(e, &k);
	}
	n = drain(e, NS_A, &from_a, ids, &lost);
	ok(lost && n < 2 * cap, "A's own events overwritten: lost to A (%u kept)", n);
	ok(drain(e, NS_A, &from_a, ids, &lost) == 0 && !lost && from_a > a0,
	   "and from next on, nothing lost");
	ol_kve_close(e);
}

static void
test_off(void)
{
	struct ol_kve_opts o = {.dram_bytes = 8 * MiB, .max_block = 64 * MiB};
	struct ol_kve *e = NULL;
	uint64_t next = 1;
	bool lost = true;
	ok(ol_kve_open(&o, &e) == 0 && ol_kve_events_cap(e) == 0, "events = 0: no rings");
	for (uint64_t i = 0; i < 20; i++)
		put(e, NS_A, i, MiB);
	ok(ol_kve_events(e, NS_A, 0, keys, MAXK, &next, &lost) == 0 && next == 0 && !lost,
	   "evictions with events off: none kept, next stays 0");
	ol_kve_close(e);
}

static void
test_codec(void)
{
	uint8_t k[3][32], buf[OL_KVP_EVENTS_HDR + 3 * 32];
	for (int i = 0; i < 3; i++)
		make_key(k[i], (uint64_t)i + 7);
	struct ol_kvp_events ev = {.next = 1234,
				   .flags = OL_KVP_EVENTS_LOST,
				   .n = 3,
				   .keys = &k[0][0]},
			     d;
	int n = ol_kvp_events_encode(buf, sizeof(buf), &ev);
	ok(n == (int)sizeof(buf), "events reply encodes to 16 + 3 * 32 bytes");
	ok(ol_kvp_events_decode(buf, sizeof(buf), 3, &d) == 0 && d.next == 1234 &&
	       d.flags == OL_KVP_EVENTS_LOST && d.n == 3 && memcmp(d.keys, k, sizeof(k)) == 0,
	   "and decodes back");
	ok(ol_kvp_events_decode(buf, sizeof(buf), 2, &d) == -EINVAL,
	   "more keys than asked: refused");
	ok(ol_kvp_events_decode(buf, sizeof(buf) - 1, 3, &d) == -EINVAL, "a short body: refused");
	ok(ol_kvp_events_encode(buf, sizeof(buf) - 1, &ev) == -ENOSPC, "encode past cap: ENOSPC");
	buf[8] = 0x7;
	ok(ol_kvp_events_decode(buf, sizeof(buf), 3, &d) == -EINVAL, "unknown flags: refused");
	struct ol_kvp_hdr h = {.magic = OL_KVP_MAGIC,
			       .version = OL_KVP_VERSION,
			       .op = OL_KVP_EVENTS,
			       .count = 1,
			       .body_len = OL_KVP_REQ_ENT};
	struct ol_kvp_limits lim = {OL_KVP_MAX_BATCH, 64 * MiB};
	ok(ol_kvp_check_req(&h, &lim) == 0, "an EVENTS request with one entry passes");
	h.count = 2;
	h.body_len = 2 * OL_KVP_REQ_ENT;
	ok(ol_kvp_check_req(&h, &lim) == -EINVAL, "an EVENTS request with two entries: refused");
}

int
main(void)
{
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("model-a", 7, NS_A);
	ol_kve_ns_hash("model-b", 7, NS_B);
	test_evict_delete_no_nvme();
	test_quota_no_nvme();
	test_nvme();
	test_wrap();
	test_wrap_other_namespace();
	test_off();
	test_codec();
	tap_done();
}
