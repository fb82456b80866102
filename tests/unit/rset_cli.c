/* rset_cli.c - drives an erasure set over remote drives (ol_store_open_set) from the command
 * line, for tests/integration/test_rdrive.py and bench/rdrive.sh:
 *
 *   rset_cli SECRET EPOCH P PEER#DRIVE... -- put PREFIX COUNT SECONDS
 *       bucket "b" (created when missing), keys PREFIX-0.. with bytes derived from the key,
 *       sizes cycling 1 KiB (inline) / 1.5 MiB / 300 KiB; prints "ACK key" once a PUT is
 *       acknowledged, "ERR key rc" when it failed; stops after COUNT or SECONDS.
 *   ... -- verify            keys on stdin: "OK key" or "BAD key why"; exit 1 if any BAD
 *   ... -- heal              ol_store_heal_all; prints its counters; exit 1 unless whole
 *   ... -- bench SIZE_MIB    one PUT and one GET of SIZE_MIB MiB: "put_mibs X get_mibs Y"
 *   ... -- view SIZE_MIB ROUNDS   one PUT of SIZE_MIB MiB, then GETs of it through this store
 *       (the writer) and through a read-only view opened beside it over the same drives,
 *       alternating, ROUNDS each: "round R writer|view get_mibs X cpu_s C" lines, then the
 *       medians and their ratio (view / writer)
 *
 * A local set (the reference for bench) when PEER#DRIVE is replaced by "local DIR...". */
#include "base/config.h"
#include "base/log.h"
#include "io/io.h"
#include "store/store.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAXD 32

static uint64_t
key_seed(const char *k)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 1099511628211ULL;
	return h;
}

static void
fill(uint8_t *b, size_t n, uint64_t x)
{
	x = x * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 32);
	}
}

static size_t
size_of(unsigned i)
{
	static const size_t sz[3] = {1024, 1536 * 1024, 300 * 1024};

	return sz[i % 3];
}

static int
put_one(struct ol_store *st, const char *key, const uint8_t *b, size_t n)
{
	struct ol_put *p;
	int rc = ol_store_put_begin(st, "b", key, strlen(key), (int64_t)n, &p);

	if (rc)
		return rc;
	for (size_t off = 0; off < n && !rc; off += 1 << 20)
		rc = ol_store_put_write(p, b + off, n - off < (1u << 20) ? n - off : 1u << 20);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, "etag", NULL, 0, NULL);
}

static int
cmd_put(struct ol_store *st, const char *prefix, unsigned count, unsigned secs)
{
	uint8_t *b = malloc(2u << 20);
	char key[256];
	time_t end = time(NULL) + secs;
	int rc = ol_store_bucket_create(st, "b");

	if (rc && rc != -EEXIST) {
		printf("ERR bucket %d\n", rc);
		free(b);
		return 1;
	}
	for (unsigned i = 0; i < count && time(NULL) < end; i++) {
		snprintf(key, sizeof(key), "%s-%u", prefix, i);
		fill(b, size_of(i), key_seed(key));
		rc = put_one(st, key, b, size_of(i));
		printf(rc ? "ERR %s %d\n" : "ACK %s\n", key, rc);
		fflush(stdout);
	}
	free(b);
	return 0;
}

static const char *
check(struct ol_store *st, const char *key, uint8_t *want, uint8_t *got)
{
	struct ol_get *g;
	struct ol_obj_info info;
	unsigned idx = (unsigned)strtoul(strrchr(key, '-') ? strrchr(key, '-') + 1 : "0", NULL, 10);
	size_t n = size_of(idx), have = 0;
	ssize_t r = 1;

	if (ol_store_get_open(st, "b", key, strlen(key), &g, &info))
		return "missing";
	while (have <= n && (r = ol_store_get_read(g, have, got + have, n + 1 - have)) > 0)
		have += (size_t)r;
	ol_store_get_close(g);
	if (r < 0)
		return "read error";
	fill(want, n, key_seed(key));
	if (have != n || memcmp(want, got, n))
		return "wrong bytes";
	return NULL;
}

static int
cmd_verify(struct ol_store *st)
{
	uint8_t *want = malloc(2u << 20), *got = malloc((2u << 20) + 1);
	char key[256];
	int bad = 0;

	while (fgets(key, sizeof(key), stdin)) {
		key[strcspn(key, "\r\n")] = 0;
		if (!key[0])
			continue;
		const char *why = check(st, key, want, got);

		bad += why != NULL;
		printf(why ? "BAD %s %s\n" : "OK %s\n", key, why ? why : "");
	}
	free(want);
	free(got);
	return bad ? 1 : 0;
}

static int
cmd_heal(struct ol_store *st)
{
	struct ol_heal_progress p = {0};
	int rc = ol_store_heal_all(st, NULL, &p);

	printf("heal rc %d objects %llu shards_healed %llu records_restored %llu unrecoverable "
	       "%llu\n",
	       rc, (unsigned long long)p.objects_scanned, (unsigned long long)p.shards_healed,
	       (unsigned long long)p.records_restored, (unsigned long long)p.unrecoverable);
	return rc || p.unrecoverable ? 1 : 0;
}

/* CPU seconds this process used so far (all threads). */
static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int
cmd_bench(struct ol_store *st, unsigned mib)
{
	double c0 = cpu_s(), c1 = 0;
	size_t n = (size_t)mib << 20, chunk = 1 << 20;
	uint8_t *b = malloc(chunk);
	struct ol_put *p;
	struct ol_get *g;
	struct ol_obj_info info;
	uint64_t t0, t1, t2;
	int rc = ol_store_bucket_create(st, "bench");

	if (rc && rc != -EEXIST) {
		printf("bench failed: bucket %d\n", rc);
		free(b);
		return 1;
	}
	fill(b, chunk, 7);
	t0 = ol_io_now_ns();
	rc = ol_store_put_begin(st, "bench", "obj", 3, (int64_t)n, &p);
	for (size_t off = 0; !rc && off < n; off += chunk)
		rc = ol_store_put_write(p, b, chunk);
	if (!rc)
		rc = ol_store_put_commit(p, "e", NULL, 0, NULL);
	t1 = ol_io_now_ns();
	c1 = cpu_s();
	if (!rc)
		rc = ol_store_get_open(st, "bench", "obj", 3, &g, &info);
	for (size_t off = 0; !rc && off < n; off += chunk) {
		ssize_t r = ol_store_get_read(g, off, b, chunk);

		rc = r == (ssize_t)chunk ? 0 : -EIO;
	}
	if (!rc)
		ol_store_get_close(g);
	t2 = ol_io_now_ns();
	free(b);
	if (rc) {
		printf("bench failed: %d\n", rc);
		return 1;
	}
	printf("put_mibs %.1f get_mibs %.1f put_cpu_s %.3f get_cpu_s %.3f\n",
	       (double)mib * 1e9 / (double)(t1 - t0), (double)mib * 1e9 / (double)(t2 - t1),
	       c1 - c0, cpu_s() - c1);
	return 0;
}

/* One GET of the whole bench object through st in 1 MiB reads: MiB/s, or -1. */
static double
get_mibs(struct ol_store *st, uint8_t *b, size_t n, double *cpu)
{
	double c0 = cpu_s();
	uint64_t t0 = ol_io_now_ns();
	struct ol_obj_info info;
	struct ol_get *g = NULL;
	int rc = ol_store_get_open(st, "bench", "obj", 3, &g, &info);

	for (size_t off = 0; !rc && off < n; off += 1 << 20)
		rc = ol_store_get_read(g, off, b, 1 << 20) == 1 << 20 ? 0 : -EIO;
	if (!rc)
		ol_store_get_close(g);
	*cpu = cpu_s() - c0;
	return rc ? -1 : (double)(n >> 20) * 1e9 / (double)(ol_io_now_ns() - t0);
}

static int
dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int
cmd_view(struct ol_store *st, const struct ol_store_set_opts *o, const struct ol_config *cfg,
	 unsigned mib, unsigned rounds)
{
	struct ol_store_set_opts vo = *o;
	struct ol_store *v = NULL;
	size_t n = (size_t)mib << 20;
	uint8_t *b = malloc(1 << 20);
	double w[64], r[64], cpu[2] = {0, 0};
	struct ol_put *p;
	int rc = ol_store_bucket_create(st, "bench");

	if (rounds > 64)
		rounds = 64;
	fill(b, 1 << 20, 7);
	rc = rc && rc != -EEXIST ? rc : ol_store_put_begin(st, "bench", "obj", 3, (int64_t)n, &p);
	for (size_t off = 0; !rc && off < n; off += 1 << 20)
		rc = ol_store_put_write(p, b, 1 << 20);
	rc = rc ? rc : ol_store_put_commit(p, "e", NULL, 0, NULL);
	vo.readonly = true;
	vo.epoch = 0;
	vo.self_id = o->self_id + 1;
	rc = rc ? rc : ol_store_open_set(cfg, &vo, &v);
	for (unsigned i = 0; !rc && i < rounds; i++) { /* alternate which goes first */
		for (int k = 0; k < 2 && !rc; k++) {
			bool view = (k == 0) == (i % 2 == 1);
			double c, m = get_mibs(view ? v : st, b, n, &c);

			(view ? r : w)[i] = m;
			cpu[view] += c;
			printf("round %u %s get_mibs %.1f cpu_s %.3f\n", i + 1,
			       view ? "view" : "writer", m, c);
			rc = m < 0 ? -EIO : 0;
		}
	}
	ol_store_close(v);
	free(b);
	if (rc) {
		printf("view bench failed: %d\n", rc);
		return 1;
	}
	qsort(w, rounds, sizeof(*w), dbl_cmp);
	qsort(r, rounds, sizeof(*r), dbl_cmp);
	printf("median GET MiB/s: writer %.1f view %.1f ratio %.2f; CPU s: writer %.2f view "
	       "%.2f\n",
	       w[rounds / 2], r[rounds / 2], r[rounds / 2] / w[rounds / 2], cpu[0], cpu[1]);
	return 0;
}

int
main(int argc, char **argv)
{
	struct ol_store_drive_spec sp[MAXD];
	char peers[MAXD][128];
	struct ol_config *cfg = calloc(1, sizeof(*cfg));
	struct ol_store *st = NULL;
	struct ol_store_set_opts o = {0};
	int sep = 0, n = 0, rc;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--"))
			sep = i;
	if (argc < 6 || !sep || sep + 1 >= argc) {
		fprintf(stderr, "usage: rset_cli SECRET EPOCH P PEER#DRIVE... -- CMD ARGS\n");
		return 2;
	}
	ol_log_set_level(getenv("RSET_LOG") ? getenv("RSET_LOG") : "error");
	ol_config_default(cfg);
	cfg->default_parity_count = (unsigned)strtoul(argv[3], NULL, 10);
	cfg->fsync = true;
	if (!strcmp(argv[4], "local")) {
		for (int i = 5; i < sep && n < MAXD; i++, n++)
			snprintf(cfg->data_dirs[n], sizeof(cfg->data_dirs[n]), "%s", argv[i]);
		cfg->n_data_dirs = cfg->set_drive_count = (unsigned)n;
		rc = ol_store_open(cfg, &st);
	} else {
		for (int i = 4; i < sep && n < MAXD; i++, n++) {
			char *h = strchr(argv[i], '#');

			snprintf(peers[n], sizeof(peers[n]), "%.*s", h ? (int)(h - argv[i]) : 0,
				 argv[i]);
			sp[n] = (struct ol_store_drive_spec){
			    peers[n], h ? (unsigned)strtoul(h + 1, NULL, 10) : 0, (unsigned)n + 1};
		}
		o = (struct ol_store_set_opts){.n = (unsigned)n,
					       .drives = sp,
					       .secret = argv[1],
					       .self_id = 1000,
					       .epoch = strtoull(argv[2], NULL, 10),
					       .deadline_ms = 5000};
		rc = ol_store_open_set(cfg, &o, &st);
	}
	if (rc) {
		printf("open failed: %d\n", rc);
		return 1;
	}
	const char *cmd = argv[sep + 1];
	if (!strcmp(cmd, "put") && argc > sep + 4)
		rc = cmd_put(st, argv[sep + 2], (unsigned)strtoul(argv[sep + 3], NULL, 10),
			     (unsigned)strtoul(argv[sep + 4], NULL, 10));
	else if (!strcmp(cmd, "verify"))
		rc = cmd_verify(st);
	else if (!strcmp(cmd, "heal"))
		rc = cmd_heal(st);
	else if (!strcmp(cmd, "bench") && argc > sep + 2)
		rc = cmd_bench(st, (unsigned)strtoul(argv[sep + 2], NULL, 10));
	else if (!strcmp(cmd, "view") && argc > sep + 3 && o.n)
		rc = cmd_view(st, &o, cfg, (unsigned)strtoul(argv[sep + 2], NULL, 10),
			      (unsigned)strtoul(argv[sep + 3], NULL, 10));
	else
		rc = 2;
	ol_store_close(st);
	free(cfg);
	return rc;
}
