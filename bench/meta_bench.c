/* bench/meta_bench.c - what a metadata lookup's read txn costs (meta/meta.c): ns per
 * begin + get + abort of a read txn through ol_meta (read txns pooled reset and renewed),
 * beside raw LMDB on an env opened the same way (MDB_NOTLS) with a txn begun and aborted
 * each time (what ol_meta did before the pool) and with one txn reset and renewed (the
 * floor), measured in the same run, on 1 and 2 threads. One line per figure; not a
 * pass/fail test.
 *   ninja -C build src/meta/meta_bench && build/src/meta/meta_bench [iterations] */
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "meta/meta.h"

static long iters = 1000000;
static struct ol_meta *m;
static MDB_env *env;
static MDB_dbi dbi;

enum mode { OURS, RAW_BEGIN, RAW_RENEW };

static void *
run(void *arg)
{
	enum mode md = (enum mode)(long)arg;
	MDB_txn *txn = NULL;
	size_t sink = 0;
	if (md == RAW_RENEW && mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0)
		mdb_txn_reset(txn);
	for (long i = 0; i < iters; i++) {
		if (md == OURS) {
			struct ol_meta_txn *t;
			const void *v;
			size_t vl;
			if (ol_meta_begin(m, false, &t) == 0) {
				if (ol_meta_get(t, OL_META_OBJECTS, "bench\0key", 9, &v, &vl) == 0)
					sink += vl;
				ol_meta_abort(t);
			}
			continue;
		}
		MDB_val k = {9, "bench\0key"}, v;
		int rc = md == RAW_RENEW ? mdb_txn_renew(txn)
					 : mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
		if (rc)
			continue;
		if (mdb_get(txn, dbi, &k, &v) == 0)
			sink += v.mv_size;
		if (md == RAW_RENEW)
			mdb_txn_reset(txn);
		else
			mdb_txn_abort(txn);
	}
	if (md == RAW_RENEW && txn)
		mdb_txn_abort(txn);
	return (void *)sink;
}

/* ns per lookup on each of n threads at once */
static double
timed(enum mode md, int n)
{
	pthread_t th[2];
	uint64_t t0 = ol_clock_us();
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, run, (void *)(long)md);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return (double)(ol_clock_us() - t0) * 1000.0 / (double)iters;
}

int
main(int argc, char **argv)
{
	char dir[] = "/tmp/meta_bench.XXXXXX", p[64];
	struct ol_meta_txn *t;
	MDB_txn *txn;
	MDB_val k = {9, "bench\0key"}, v = {200, NULL};
	char val[200];
	if (argc > 1) {
		char *end;
		iters = strtol(argv[1], &end, 10);
		if (*end || iters <= 0) {
			fprintf(stderr,
				"meta_bench: iterations must be a positive number, not '%s'\n",
				argv[1]);
			return 2;
		}
	}
	if (!mkdtemp(dir))
		return 1;
	memset(val, 'v', sizeof(val));
	v.mv_data = val;
	snprintf(p, sizeof(p), "%s/ours.mdb", dir);
	if (ol_meta_open(p, 1 << 26, false, &m) || ol_meta_begin(m, true, &t) ||
	    ol_meta_put(t, OL_META_OBJECTS, "bench\0key", 9, val, sizeof(val)) ||
	    ol_meta_commit(t)) {
		fprintf(stderr, "meta_bench: cannot make %s\n", p);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/raw.mdb", dir);
	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
	    mdb_env_set_maxreaders(env, 1024) || mdb_env_set_mapsize(env, 1 << 26) ||
	    mdb_env_open(env, p, MDB_NOSUBDIR | MDB_NOTLS | MDB_NOSYNC, 0600) ||
	    mdb_txn_begin(env, NULL, 0, &txn) || mdb_dbi_open(txn, "objects", MDB_CREATE, &dbi) ||
	    mdb_put(txn, dbi, &k, &v, 0) || mdb_txn_commit(txn)) {
		fprintf(stderr, "meta_bench: cannot make %s\n", p);
		return 1;
	}
	printf("read txn begin + get (200-byte value) + abort, %ld per thread\n", iters);
	for (int n = 1; n <= 2; n++) {
		double raw = timed(RAW_BEGIN, n), floor = timed(RAW_RENEW, n),
		       ours = timed(OURS, n);
		printf("%d thread%s: ol_meta %.0f ns | LMDB begin/abort %.0f ns (ratio %.2f) | "
		       "LMDB reset/renew %.0f ns (ratio %.2f)\n",
		       n, n > 1 ? "s" : " ", ours, raw, raw / ours, floor, floor / ours);
	}
	ol_meta_close(m);
	mdb_env_close(env);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	return system(p) ? 1 : 0;
}
