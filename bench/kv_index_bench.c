/* bench/kv_index_bench.c - what the KV engine's index costs when threads meet on it (issue 9:
 * the index is striped so that the per-core loops do not contend). Threads pin and release
 * DRAM-resident blocks (the GET path without the copy), with 1 op in 16 a delete and re-put
 * of the same key (4 KiB blocks, so the slab and the LRU churn too). The reference, measured
 * in the same run on the same engine: the same calls, each wrapped in one process-wide mutex,
 * which is what the engine's single index mutex did before the stripes. One line per thread
 * count. Then the cost of the removal events (issue 13: every delete appends one): the same
 * striped run on an engine keeping 65536 events against one keeping none ([kv]
 * removal_events = 0), and one thread's puts into a full pool where every put evicts (an event
 * each), alternated rounds, medians. Not a pass/fail test.
 *   ninja -C build src/kv/kv_index_bench && build/src/kv/kv_index_bench [seconds-per-figure] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "kv/engine.h"
#include "openlake/openlake.h"

#define NKEYS 8192
#define BLOCK 4096

static struct ol_kve *eng;
static uint8_t ns[16];
static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool stop;
static bool one_lock;

static void
key_of(struct ol_kvk *k, uint64_t id)
{
	uint8_t key[32] = {0};
	memcpy(key, &id, sizeof(id));
	ol_kve_key(k, key, ns);
}

static void
put(uint64_t id)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, id);
	if (ol_kve_alloc(eng, &k, BLOCK, &s) != OL_KV_OK)
		return;
	memset(s.ptr, (int)id, 64);
	ol_kve_commit(eng, &k, s.off, s.seq, BLOCK);
}

static void
lock(void)
{
	if (one_lock)
		pthread_mutex_lock(&big);
}

static void
unlock(void)
{
	if (one_lock)
		pthread_mutex_unlock(&big);
}

static void *
worker(void *arg)
{
	uint64_t r = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1), n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		uint64_t id = (r >> 20) % NKEYS;
		struct ol_kvk k;
		struct ol_kve_slot s;
		key_of(&k, id);
		if (r % 16 == 0) {
			lock();
			ol_kve_delete(eng, &k);
			unlock();
			lock();
			put(id);
			unlock();
		} else {
			lock();
			int st = ol_kve_pin(eng, &k, true, &s);
			unlock();
			if (st == OL_KV_OK) {
				lock();
				ol_kve_release(eng, s.off, s.seq);
				unlock();
			}
		}
		n++;
	}
	return (void *)(uintptr_t)n;
}

static struct ol_kve *
open_eng(uint64_t events)
{
	struct ol_kve_opts o = {.dram_bytes = 64u << 20, .max_block = 1u << 20, .events = events};
	struct ol_kve *e = NULL;
	if (ol_kve_open(&o, &e) != 0) {
		fprintf(stderr, "kv_index_bench: cannot open an engine\n");
		exit(1);
	}
	eng = e;
	for (uint64_t i = 0; i < NKEYS; i++)
		put(i);
	return e;
}

static double
run(unsigned threads, bool ref, double secs)
{
	pthread_t t[64];
	one_lock = ref;
	atomic_store(&stop, false);
	uint64_t t0 = ol_clock_us(), ops = 0;
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, true);
	for (unsigned i = 0; i < threads; i++) {
		void *n;
		pthread_join(t[i], &n);
		ops += (uintptr_t)n;
	}
	return (double)ops / ((double)(ol_clock_us() - t0) / 1e6) / 1e6;
}

/* Puts of new keys into a full pool with no NVMe tier: every put evicts one block (one removal
 * event when they are kept). Mputs/s over secs on one thread. */
static double
churn(uint64_t events, double secs)
{
	struct ol_kve_opts o = {.dram_bytes = 8u << 20, .max_block = 1u << 20, .events = events};
	struct ol_kve *e = NULL;
	if (ol_kve_open(&o, &e) != 0)
		exit(1);
	eng = e;
	uint64_t id = 0;
	while (id < 4096) /* fill: 2048 slots of 4 KiB, then every put evicts */
		put(id++);
	uint64_t t0 = ol_clock_us(), end = t0 + (uint64_t)(secs * 1e6), now, first = id;
	do {
		for (int i = 0; i < 256; i++)
			put(id++);
	} while ((now = ol_clock_us()) < end);
	ol_kve_close(e);
	return (double)(id - first) / ((double)(now - t0) / 1e6) / 1e6;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("bench", 5, ns);
	open_eng(65536);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("# kv_index_bench: %ld cpus, %u keys of %u B in DRAM, %.1f s per figure; Mops/s "
	       "of pin+release (1 in 16: delete + put)\n",
	       cpus, NKEYS, BLOCK, secs);
	for (unsigned th = 1; th <= 8; th *= 2) {
		double ours = run(th, false, secs), ref = run(th, true, secs);
		printf(
		    "KV index threads=%u | ours (striped) %.2f Mops/s | one mutex around each call "
		    "%.2f Mops/s | ratio %.2f\n",
		    th, ours, ref, ours / ref);
	}
	ol_kve_close(eng);
	for (unsigned th = 1; th <= 8; th *= 2) {
		struct ol_kve *on = open_eng(65536);
		double ours = run(th, false, secs);
		ol_kve_close(on);
		struct ol_kve *off = open_eng(0);
		double ref = run(th, false, secs);
		ol_kve_close(off);
		printf(
		    "KV index events threads=%u | ours (65536 removal events kept) %.2f Mops/s | "
		    "no events %.2f Mops/s | ratio %.2f\n",
		    th, ours, ref, ours / ref);
	}
	double on[9], off[9];
	for (int i = 0; i < 9; i++) { /* alternated short rounds: the median of each */
		on[i] = churn(65536, secs / 4);
		off[i] = churn(0, secs / 4);
	}
	qsort(on, 9, sizeof(double), cmp_d);
	qsort(off, 9, sizeof(double), cmp_d);
	printf(
	    "KV evicting puts 1 thread (median of 9) | ours (an event per eviction) %.2f Mputs/s "
	    "| no events %.2f Mputs/s | ratio %.2f\n",
	    on[4], off[4], on[4] / off[4]);
	return 0;
}
