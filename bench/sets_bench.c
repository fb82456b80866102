/* bench/sets_bench.c - what placement over several erasure sets costs (store/sets.c, issue 10).
 * Not a test: prints one line per figure, a store of 2 sets of 4 drives (8 data dirs) beside
 * the reference measured in the same run, one set of 4 drives, same engine, same disk:
 *
 *   PUT  small objects (1 KiB, inline), one thread            ops/s
 *   HEAD of those keys                                         ops/s
 *   LIST the whole bucket (pages of 1000, a fresh iterator per page, as S3 lists)  keys/s
 *
 * Both stores run with fsync off (the figure is the engine's cost, not the disk's flushes).
 * Each figure: wall time and this thread's CPU time (the machine is shared: CPU time moves
 * less with the load). Usage: sets_bench [DIR] [KEYS]   (DIR default $TMPDIR or /tmp, KEYS
 * default 20000, not a multiple of 7919). Built as build/src/store/sets_bench. */
#include "store/store.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/config.h"
#include "base/log.h"

struct t {
	double wall, cpu;
};

static double
now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct t
start(void)
{
	return (struct t){now(CLOCK_MONOTONIC), now(CLOCK_THREAD_CPUTIME_ID)};
}

static struct t
since(struct t a)
{
	return (struct t){now(CLOCK_MONOTONIC) - a.wall, now(CLOCK_THREAD_CPUTIME_ID) - a.cpu};
}

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

struct res {
	struct t put, head, list;
	long listed;
};

static int
run(const char *dir, int dirs, int keys, struct res *r)
{
	struct ol_config cfg;
	struct ol_store *st;
	char k[64], buf[1024];
	struct t t0;
	int rc;

	ol_config_default(&cfg);
	cfg.n_data_dirs = (unsigned)dirs;
	for (int i = 0; i < dirs; i++)
		snprintf(cfg.data_dirs[i], sizeof(cfg.data_dirs[i]), "%s/d%d", dir, i);
	cfg.set_drive_count = 4;
	cfg.default_parity_count = 1;
	cfg.fsync = false;
	if ((rc = ol_store_open(&cfg, &st)))
		return rc;
	ol_store_bucket_create(st, "bench");
	memset(buf, 'v', sizeof(buf));
	t0 = start();
	for (int i = 0; i < keys; i++) {
		struct ol_put *p;

		snprintf(k, sizeof(k), "obj/%08d",
			 (int)((unsigned long long)i * 7919 % (unsigned)keys));
		if ((rc = ol_store_put_begin(st, "bench", k, strlen(k), sizeof(buf), &p)) ||
		    (rc = ol_store_put_write(p, buf, sizeof(buf))) ||
		    (rc = ol_store_put_commit(p, "etag", NULL, 0, NULL)))
			goto out;
	}
	r->put = since(t0);
	t0 = start();
	for (int i = 0; i < keys; i++) {
		struct ol_obj_info info;

		snprintf(k, sizeof(k), "obj/%08d", i);
		if ((rc = ol_store_head(st, "bench", k, strlen(k), &info, NULL, 0)))
			goto out;
	}
	r->head = since(t0);
	t0 = start();
	r->listed = 0;
	k[0] = 0;
	for (;;) {
		struct ol_iter *it;
		const char *key;
		size_t kl, klast = strlen(k);
		struct ol_obj_info info;
		int got = 0;

		if ((rc = ol_store_iter_open(st, "bench", &it)))
			goto out;
		ol_store_iter_seek(it, k, klast ? klast + 1 : 0); /* past the last key */
		while (got < 1000 && ol_store_iter_next(it, &key, &kl, &info) == 1) {
			memcpy(k, key, kl);
			k[kl] = 0;
			got++;
		}
		ol_store_iter_close(it);
		r->listed += got;
		if (got < 1000)
			break;
	}
	r->list = since(t0);
	rc = r->listed == keys ? 0 : -1;
out:
	ol_store_close(st);
	return rc;
}

static void
line(const char *what, double n, struct t ours, struct t ref, const char *unit)
{
	printf(
	    "%-5s 2 sets x 4 drives %9.0f %s (cpu %9.0f)   1 set x 4 drives %9.0f %s (cpu %9.0f) "
	    "  ratio %.2f (cpu %.2f)\n",
	    what, n / ours.wall, unit, n / ours.cpu, n / ref.wall, unit, n / ref.cpu,
	    ref.wall / ours.wall, ref.cpu / ours.cpu);
}

int
main(int argc, char **argv)
{
	const char *base = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int keys = 20000;
	char d1[512], d2[512], *end;
	struct res one, two;

	if (argc > 2) {
		errno = 0;
		unsigned long long v = strtoull(argv[2], &end, 10);
		if (errno || end == argv[2] || *end || v < 1 || v > 10000000) {
			fprintf(stderr,
				"sets_bench: KEYS must be a count from 1 to 10000000, not "
				"'%s'\n",
				argv[2]);
			return 2;
		}
		keys = (int)v;
	}
	ol_log_threshold = OL_LOG_ERROR;
	snprintf(d1, sizeof(d1), "%s/sets_bench_XXXXXX", base);
	snprintf(d2, sizeof(d2), "%s/sets_bench_XXXXXX", base);
	if (!mkdtemp(d1) || !mkdtemp(d2)) {
		fprintf(stderr, "sets_bench: cannot make temp dirs under %s\n", base);
		return 1;
	}
	int rc1 = run(d1, 4, keys, &one), rc2 = run(d2, 8, keys, &two);
	nftw(d1, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	nftw(d2, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	if (rc1 || rc2) {
		fprintf(stderr, "sets_bench: a run failed (%d, %d)\n", rc1, rc2);
		return 1;
	}
	printf("%d keys of 1 KiB, fsync off, under %s\n", keys, base);
	line("PUT", keys, two.put, one.put, "ops/s");
	line("HEAD", keys, two.head, one.head, "ops/s");
	line("LIST", keys, two.list, one.list, "keys/s");
	return 0;
}
