/* tests/unit/test_heal.c - whole-store heal (store/heal_scan.c) on real drives in a temp dir:
 * a wiped drive, a corrupt parity block and a record deleted from one drive's LMDB are all
 * restored to the exact bytes; a reader running meanwhile never sees wrong bytes; more than P
 * lost shards count as unrecoverable; cancel and one-at-a-time; a heal resumed from a cursor
 * scans only what comes after it. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "store/store.h"
#include "store/store_int.h"
#include "store_tap.h"
#include "tap.h"

#define NDRV 4
#define MAXF 64

static char root[256];
static struct ol_config cfg;

struct snap {
	char path[MAXF][600];
	uint8_t *data[MAXF];
	size_t len[MAXF];
	int n;
};

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	return remove(p);
}

static void
rm_rf(const char *p)
{
	nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static uint8_t *
slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	uint8_t *b;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	*len = fread(b, 1, (size_t)n, f);
	fclose(f);
	return b;
}

static struct snap *cur_snap;

static int
snap_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	struct snap *s = cur_snap;

	(void)sb, (void)f;
	if (flag != FTW_F || !strstr(p, "/.openlake/data/") || s->n == MAXF)
		return 0;
	snprintf(s->path[s->n], sizeof(s->path[0]), "%s", p);
	s->data[s->n] = slurp(p, &s->len[s->n]);
	s->n++;
	return 0;
}

static void
snap_take(struct snap *s)
{
	memset(s, 0, sizeof(*s));
	cur_snap = s;
	nftw(root, snap_cb, 16, FTW_PHYS);
}

/* Every file of s is there with the same bytes. */
static int
snap_same(const struct snap *s)
{
	for (int i = 0; i < s->n; i++) {
		size_t len = 0;
		uint8_t *b = slurp(s->path[i], &len);
		int same = b && len == s->len[i] && !memcmp(b, s->data[i], len);

		free(b);
		if (!same) {
			printf("# differs: %s\n", s->path[i]);
			return 0;
		}
	}
	return 1;
}

static void
snap_free(struct snap *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->data[i]);
}

/* Drives holding a record (their own or prev) of the resolved version of an object. */
static int
rec_drives(struct ol_store *st, const char *k)
{
	char okey[OL_KEYBUF];
	size_t kl = ol_okey(okey, "b", k, strlen(k));
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	int n = 0;

	ol_reads_get(st, OL_META_OBJECTS, okey, kl, NULL, &r);
	if (ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid))
		for (int d = 0; d < st->n; d++)
			n += valid[d];
	ol_reads_free(&r);
	return n;
}

static int
del_rec(struct ol_store *st, int d, const char *k)
{
	char okey[OL_KEYBUF];
	size_t kl = ol_okey(okey, "b", k, strlen(k));
	struct ol_meta_txn *t;
	int rc = ol_meta_begin(st->d[d].meta, true, &t);

	if (rc)
		return rc;
	rc = ol_meta_del(t, OL_META_OBJECTS, okey, kl);
	if (rc) {
		ol_meta_abort(t);
		return rc;
	}
	return ol_meta_commit(t);
}

struct path_arg {
	int drive;
	char path[600];
};

static int
path_cb(int drive, unsigned part, const char *path, void *arg)
{
	struct path_arg *a = arg;

	(void)part;
	if (drive == a->drive)
		snprintf(a->path, sizeof(a->path), "%s", path);
	return 0;
}

/* Flip one byte at off in drive d's shard file of key k. */
static int
corrupt(struct ol_store *st, const char *k, int d, off_t off)
{
	struct path_arg a = {.drive = d};
	uint8_t c;
	int fd, rc = -1;

	ol_store_shard_paths(st, "b", k, strlen(k), path_cb, &a);
	fd = open(a.path, O_RDWR);
	if (fd >= 0 && pread(fd, &c, 1, off) == 1) {
		c ^= 0x5a;
		rc = pwrite(fd, &c, 1, off) == 1 ? 0 : -1;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

#define BIG1  (300 * 1024 + 17)
#define BIG2  (1000 * 1024 + 3)
#define SMALL 1500
#define PART  (200 * 1024)

static uint8_t big1[BIG1], big2[BIG2], small[SMALL], part[PART];

struct reader {
	struct ol_store *st;
	_Atomic int stop;
	int reads, bad;
};

static void *
reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(&r->stop)) {
		int a = get_eq(r->st, "big1", big1, BIG1), b = get_eq(r->st, "big2", big2, BIG2);

		if ((a != 1 || b != 1) && !r->bad)
			printf("# reader: big1 %d big2 %d\n", a, b);
		r->bad += (a != 1) + (b != 1);
		r->reads += 2;
	}
	return NULL;
}

struct healer {
	struct ol_store *st;
	struct ol_heal_opts o;
	struct ol_heal_progress p;
	int rc;
};

static void *
heal_main(void *arg)
{
	struct healer *h = arg;

	h->rc = ol_store_heal_all(h->st, &h->o, &h->p);
	return NULL;
}

static struct ol_store *
setup(void)
{
	struct ol_store *st;
	struct ol_put *p;
	char uid[64];

	store_tap_cfg(&cfg, root, NDRV);
	tap_fill(big1, BIG1, 1);
	tap_fill(big2, BIG2, 2);
	tap_fill(small, SMALL, 3);
	tap_fill(part, PART, 4);
	if (ol_store_open(&cfg, &st))
		return NULL;
	if (ol_store_bucket_create(st, "b") || put_obj(st, "big1", big1, BIG1) ||
	    put_obj(st, "big2", big2, BIG2) || put_obj(st, "small", small, SMALL))
		return NULL;
	if (ol_store_mpu_create(st, "b", "mp", 2, NULL, 0, uid) ||
	    ol_store_mpu_part_begin(st, "b", uid, 1, &p) || ol_store_put_write(p, part, PART) ||
	    ol_store_put_commit(p, "\"p1\"", NULL, 0, NULL))
		return NULL;
	return st;
}

static void
test_heal(struct ol_store **stp)
{
	struct ol_store *st = *stp;
	struct snap s;
	static struct reader rd;
	static struct healer h;
	pthread_t rt, ht;
	char d0[300];
	uint64_t bs = 64 * 1024 + 8;

	snap_take(&s);
	ok(s.n == 4 * 3, "12 shard files (3 large parts x 4 drives), got %d", s.n);
	ol_store_close(st);
	snprintf(d0, sizeof(d0), "%s/d0", root);
	rm_rf(d0);
	ok(ol_store_open(&cfg, stp) == 0, "reopen with drive 0 wiped");
	st = *stp;
	/* parity is drive 3; big1 stripe 1 sits at bs on each drive */
	ok(corrupt(st, "big1", 3, (off_t)bs + 100) == 0, "corrupt a parity block of big1");
	ok(del_rec(st, 2, "big2") == 0 && rec_drives(st, "big2") == 2,
	   "record of big2 deleted on drive 2 (2 = k drives hold it now)");
	h.st = st;
	h.o.rate_bytes = 4 << 20;
	pthread_create(&ht, NULL, heal_main, &h);
	usleep(20000);
	ok(ol_store_heal_all(st, NULL, &(struct ol_heal_progress){0}) == -EBUSY,
	   "a second heal is refused while one runs");
	pthread_join(ht, NULL);
	ok(h.rc == 0, "heal_all returned %d", h.rc);
	ok(snap_same(&s), "every shard file is back with the exact bytes (wiped drive, parity)");
	ok(rec_drives(st, "big1") == 4 && rec_drives(st, "big2") == 4 &&
	       rec_drives(st, "small") == 4,
	   "object records on all 4 drives");
	ok(h.p.objects_total == 4 && h.p.objects_scanned == 4,
	   "3 objects + 1 upload part scanned (%llu/%llu)", (unsigned long long)h.p.objects_scanned,
	   (unsigned long long)h.p.objects_total);
	/* drive 0: bucket, 3 objects, upload, part; drive 2: big2 */
	ok(h.p.records_restored == 7, "records restored: %llu (want 7)",
	   (unsigned long long)h.p.records_restored);
	ok(h.p.shards_healed == 4, "shards healed: %llu (3 on drive 0, 1 parity)",
	   (unsigned long long)h.p.shards_healed);
	ok(h.p.unrecoverable == 0 && h.p.bytes_scanned == h.p.bytes_total &&
	       h.p.bytes_total == BIG1 + BIG2 + SMALL + PART,
	   "nothing unrecoverable; bytes %llu/%llu", (unsigned long long)h.p.bytes_scanned,
	   (unsigned long long)h.p.bytes_total);
	ok(!h.p.running && h.p.finished_ns >= h.p.started_ns, "finished");
	memset(&h.p, 0, sizeof(h.p));
	h.o.rate_bytes = 0;
	ok(ol_store_heal_all(st, &h.o, &h.p) == 0 && h.p.shards_healed == 0 &&
	       h.p.records_restored == 0 && h.p.blocks_healed == 0,
	   "a second heal finds nothing to do");
	/* again with a reader racing the heal (it heals on read too) */
	ol_store_close(st);
	snprintf(d0, sizeof(d0), "%s/d1", root);
	rm_rf(d0);
	ok(ol_store_open(&cfg, stp) == 0, "reopen with drive 1 wiped");
	st = *stp;
	rd.st = st;
	h.st = st;
	h.o.rate_bytes = 4 << 20;
	memset(&h.p, 0, sizeof(h.p));
	pthread_create(&rt, NULL, reader_main, &rd);
	pthread_create(&ht, NULL, heal_main, &h);
	pthread_join(ht, NULL);
	atomic_store(&rd.stop, 1);
	pthread_join(rt, NULL);
	ok(h.rc == 0 && h.p.unrecoverable == 0, "heal with a reader: %d", h.rc);
	ok(rd.reads > 0 && rd.bad == 0, "reader during heal: %d reads, %d wrong", rd.reads, rd.bad);
	ok(snap_same(&s), "drive 1's shard files are back with the exact bytes");
	ok(rec_drives(st, "big1") == 4 && rec_drives(st, "big2") == 4, "records on all drives");
	snap_free(&s);
}

/* The cursor of a whole run ends at the last key walked; a heal resumed after "big2" (a
 * cluster's next leader resuming a job, cmd/openlaked/heal_job.c) restores only what follows. */
static void
test_resume(struct ol_store **stp)
{
	struct ol_heal_progress p = {0};
	struct ol_heal_cursor c, from = {.set = 0, .phase = 0, .bucket = "b", .key_len = 4};
	struct ol_heal_opts o = {.from = &from};
	struct snap s;
	char d0[300];

	ok(ol_store_heal_cursor(&p, &c) == -ENOENT, "no cursor before a heal");
	ok(ol_store_heal_all(*stp, NULL, &p) == 0 && ol_store_heal_cursor(&p, &c) == 0,
	   "a whole heal leaves its cursor");
	ok(c.set == 0 && strcmp(c.bucket, "b") == 0 && c.phase == 2 && c.key_len == 32,
	   "it ends at the last upload of bucket b (set %u, '%s', phase %u, %zu bytes)", c.set,
	   c.bucket, c.phase, c.key_len);
	ok(c.pool == 0 && c.pset == 0, "its set is named by its position too (pool %u set %u)",
	   c.pool, c.pset);
	snap_take(&s);
	ol_store_close(*stp);
	snprintf(d0, sizeof(d0), "%s/d0", root);
	rm_rf(d0);
	ok(ol_store_open(&cfg, stp) == 0, "reopen with drive 0 wiped");
	memcpy(from.key, "big2", 4);
	from.pool = c.pool;
	from.pset = c.pset;
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(*stp, &o, &p) == 0, "a heal resumed after big2");
	ok(p.objects_scanned == 2, "it scans small and the upload part only (%llu)",
	   (unsigned long long)p.objects_scanned);
	ok(rec_drives(*stp, "big1") == 3 && rec_drives(*stp, "big2") == 3 &&
	       rec_drives(*stp, "small") == 4,
	   "big1 and big2 (before the cursor) are left to a whole heal, small is restored");
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(*stp, NULL, &p) == 0 && snap_same(&s) &&
	       rec_drives(*stp, "big1") == 4 && rec_drives(*stp, "big2") == 4,
	   "a whole heal then restores the rest to the exact bytes");
	snap_free(&s);
	/* the layout changed between the runs: set 0 is another set now, or there is no set 1 */
	from.pool = 1;
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(*stp, &o, &p) == 0 && p.objects_scanned == 4,
	   "a cursor naming another set at its index scans from the start (%llu)",
	   (unsigned long long)p.objects_scanned);
	from.pool = c.pool;
	from.set = 1;
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(*stp, &o, &p) == 0 && p.objects_scanned == 4,
	   "a cursor past the last set scans from the start (%llu)",
	   (unsigned long long)p.objects_scanned);
	from.set = 0;
	from.pool = from.pset = OL_HEAL_SET_UNKNOWN;
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(*stp, &o, &p) == 0 && p.objects_scanned == 2,
	   "a cursor without the set's position (an older record) resumes by its index (%llu)",
	   (unsigned long long)p.objects_scanned);
}

static void
test_unrecoverable(struct ol_store *st)
{
	struct ol_heal_progress p = {0};
	uint64_t bs = 64 * 1024 + 8;

	/* big2 stripe 2 on drives 0, 1 and 3: P + 1 = 3 shards lost */
	ok(corrupt(st, "big2", 0, (off_t)(2 * bs) + 5) == 0 &&
	       corrupt(st, "big2", 1, (off_t)(2 * bs) + 9) == 0 &&
	       corrupt(st, "big2", 3, (off_t)(2 * bs) + 1) == 0,
	   "corrupt 3 shards of one stripe of big2 (P = 2)");
	ok(ol_store_heal_all(st, NULL, &p) == 0, "heal returns");
	ok(p.unrecoverable == 1, "big2 counted unrecoverable (%llu)",
	   (unsigned long long)p.unrecoverable);
	ok(p.blocks_healed == 0, "and nothing of it rewritten (%llu blocks)",
	   (unsigned long long)p.blocks_healed);
	/* a lost stripe does not keep the heal from fixing the other stripes of the part */
	ok(corrupt(st, "big2", 2, (off_t)(4 * bs) + 3) == 0, "corrupt a parity block of stripe 4");
	memset(&p, 0, sizeof(p));
	ok(ol_store_heal_all(st, NULL, &p) == 0 && p.unrecoverable == 1 && p.blocks_healed == 1,
	   "heal again: still 1 unrecoverable, stripe 4 healed (%llu blocks)",
	   (unsigned long long)p.blocks_healed);
	ok(get_eq(st, "big2", big2, BIG2) == OL_STORE_ECORRUPT,
	   "a GET of big2 is OL_STORE_ECORRUPT, never wrong bytes");
	ok(get_eq(st, "big1", big1, BIG1) == 1, "big1 still exact");
}

static void
test_cancel(struct ol_store *st)
{
	struct healer h = {.st = st, .o = {.rate_bytes = 64 * 1024}};
	pthread_t t;

	pthread_create(&t, NULL, heal_main, &h);
	/* wait (not a fixed sleep: the machine may be loaded) until it counts objects */
	for (int i = 0; i < 3000 && atomic_load(&h.p.objects_total) == 0; i++)
		usleep(10000);
	ok(atomic_load(&h.p.running) == 1, "a rate-limited heal is running");
	ol_store_heal_cancel(&h.p);
	pthread_join(t, NULL);
	ok(h.rc == -ECANCELED, "cancel stops it (%d)", h.rc);
	ok(h.p.objects_scanned < h.p.objects_total, "before the end (%llu/%llu)",
	   (unsigned long long)h.p.objects_scanned, (unsigned long long)h.p.objects_total);
}

int
main(void)
{
	struct ol_store *st;
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/olheal.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		tap_skip_all("no temp dir");
	st = setup();
	ok(st != NULL, "store with 3 objects and an upload part");
	if (st) {
		test_heal(&st);
		test_resume(&st);
		test_unrecoverable(st);
		test_cancel(st);
	}
	ol_store_close(st);
	rm_rf(root);
	tap_done();
}
