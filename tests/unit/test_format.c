/* tests/unit/test_format.c - drive identity records (base/driveid.c, store/format.c) on real
 * drives in a temp dir: the codec (round trip, version 1, hostile text); a new store's
 * records; data_dirs swapped and another store's drive refused with nothing written; a blank
 * (wiped) drive re-identified and healed; a store without records (an older build) and a
 * version 1 multi-set record upgraded in place; while running, a drive whose record changed
 * under it goes offline (the store keeps serving) and comes back when it is right again. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "store/store.h"
#include "store/store_int.h"
#include "store_tap.h"
#include "tap.h"

#define BIG (300 * 1024)

static char root[256];
static struct ol_config cfg;
static uint8_t big[BIG];

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

static void
setup(const char *sub, unsigned dirs, unsigned n, unsigned parity)
{
	ol_config_default(&cfg);
	cfg.n_data_dirs = dirs;
	for (unsigned i = 0; i < dirs; i++)
		snprintf(cfg.data_dirs[i], sizeof(cfg.data_dirs[i]), "%s/%s%u", root, sub, i);
	cfg.set_drive_count = n;
	cfg.default_parity_count = parity;
	cfg.fsync = false;
	cfg.inline_threshold = 4096;
	cfg.block_size = 64 * 1024;
}

static void
swap_dirs(unsigned a, unsigned b)
{
	char t[sizeof(cfg.data_dirs[0])];

	memcpy(t, cfg.data_dirs[a], sizeof(t));
	memcpy(cfg.data_dirs[a], cfg.data_dirs[b], sizeof(t));
	memcpy(cfg.data_dirs[b], t, sizeof(t));
}

static struct ol_store *
open_ok(void)
{
	struct ol_store *st = NULL;

	return ol_store_open(&cfg, &st) ? NULL : st;
}

static void
test_codec(void)
{
	struct ol_driveid a = {.version = 2,
			       .store = "0123456789abcdef0123456789abcdef",
			       .drive = "fedcba9876543210fedcba9876543210",
			       .pool = 1,
			       .sets = 3,
			       .set = 2,
			       .index = 5,
			       .drives = 6,
			       .parity = 2},
			  b;
	char buf[OL_DRIVEID_TEXT];
	int n = ol_driveid_format(&a, buf, sizeof(buf));
	static const char *const bad[] = {
	    "",
	    "openlake-format 3\nstore a\nsets 1\nset 0\ndrives 4\n",
	    "openlake-format 1\nstore a\nsets 1\nset 1\ndrives 4\n",
	    "openlake-format 1\nstore a\nsets 1\nset 0\n",
	    "openlake-format 1\nstore a b\nsets 1\nset 0\ndrives 4\n",
	    "openlake-format 1\nstore a\nstore a\nsets 1\nset 0\ndrives 4\n",
	    "openlake-format 1\nstore a\nsets -1\nset 0\ndrives 4\n",
	    "openlake-format 1\nstore a\nsets 99999999999999999999\nset 0\ndrives 4\n",
	    "openlake-format 2\nstore a\ndrive 00\npool 0\nsets 1\nset 0\nindex 0\ndrives "
	    "4\nparity 1\n",
	    "openlake-format 2\nstore a\ndrive 0123456789abcdef0123456789abcdef\npool 0\nsets "
	    "1\nset 0\nindex 4\ndrives 4\nparity 1\n",
	    "openlake-format 2\nstore a\ndrive 0123456789abcdef0123456789abcdef\npool 0\nsets "
	    "1\nset 0\nindex 0\ndrives 4\nparity 1\nextra 1\n",
	};
	int nbad = 0;

	ok(n > 0 && ol_driveid_parse(buf, (size_t)n, &b) == 0 && b.version == 2 &&
	       !strcmp(a.store, b.store) && !strcmp(a.drive, b.drive) && a.pool == b.pool &&
	       a.sets == b.sets && a.set == b.set && a.index == b.index && a.drives == b.drives &&
	       a.parity == b.parity,
	   "a version 2 record round-trips");
	ok(ol_driveid_parse(buf, (size_t)n - 1, &b) == 0 && b.parity == 2,
	   "its last newline is optional");
	ok(ol_driveid_parse("openlake-format 1\nstore 0123456789abcdef0123456789abcdef\nsets "
			    "2\nset 1\ndrives 4\n",
			    78, &b) == 0 &&
	       b.version == 1 && b.set == 1 && b.sets == 2 && b.drives == 4 && !b.drive[0] &&
	       b.index == OL_DRIVEID_NONE,
	   "a version 1 (multi-set) record parses, its index unknown");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		nbad += ol_driveid_parse(bad[i], strlen(bad[i]), &b) == -EINVAL;
	ok(nbad == (int)(sizeof(bad) / sizeof(bad[0])), "%d of %zu bad records refused", nbad,
	   sizeof(bad) / sizeof(bad[0]));
	a.index = 6;
	ok(ol_driveid_format(&a, buf, sizeof(buf)) == -EINVAL, "an index past N is not written");
}

static int
rec(unsigned i, struct ol_driveid *f)
{
	return ol_driveid_read(cfg.data_dirs[i], f);
}

static void
test_open_checks(void)
{
	struct ol_driveid f[4], g;
	struct ol_store *st;
	int rc, same = 1;

	setup("d", 4, 4, 1);
	tap_fill(big, BIG, 7);
	st = open_ok();
	ok(st && ol_store_bucket_create(st, "b") == 0 && put_obj(st, "k", big, BIG) == 0,
	   "a new one-set store takes an object");
	ol_store_close(st);
	for (unsigned i = 0; i < 4; i++) {
		same &= rec(i, &f[i]) == 0 && f[i].version == 2 && f[i].index == i &&
			f[i].set == 0 && f[i].sets == 1 && f[i].drives == 4 && f[i].parity == 1 &&
			!strcmp(f[i].store, f[0].store);
		same &= i == 0 || strcmp(f[i].drive, f[i - 1].drive) != 0;
	}
	ok(same, "every drive has a record: one store id, its index, its own UUID");

	/* data_dirs lines 1 and 2 swapped: each dir is taken at its record's position */
	swap_dirs(1, 2);
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0 && get_eq(st, "k", big, BIG) == 1,
	   "swapped data_dirs: each dir at its record's position, the object reads (%d)", rc);
	if (!rc)
		ol_store_close(st);
	ok(rec(1, &g) == 0 && g.index == 2 && !strcmp(g.drive, f[2].drive),
	   "and the swapped drives' records are untouched");
	swap_dirs(1, 2);

	/* another store's drive in place of drive 3 */
	{
		struct ol_config mine = cfg;
		struct ol_store *o;

		setup("other", 4, 4, 1);
		o = open_ok();
		ol_store_close(o);
		snprintf(mine.data_dirs[3], sizeof(mine.data_dirs[3]), "%s", cfg.data_dirs[3]);
		cfg = mine;
		rc = ol_store_open(&cfg, &st);
		ok(o && rc == -EINVAL, "another store's drive refused (%d)", rc);
		setup("d", 4, 4, 1);
	}

	/* a copy of drive 0 listed as well (same UUID): refused */
	{
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "cp -a %s %s/copy0", cfg.data_dirs[0], root);
		rc = system(cmd);
		snprintf(cfg.data_dirs[3], sizeof(cfg.data_dirs[3]), "%s/copy0", root);
		/* copy0 says drive 0: index refused before the UUID; make it say 3 */
		g = f[0];
		g.index = 3;
		ok(rc == 0 && ol_driveid_write(cfg.data_dirs[3], &g) == 0 &&
		       ol_store_open(&cfg, &st) == -EINVAL,
		   "a copy of a drive (its UUID twice) refused");
		setup("d", 4, 4, 1);
	}

	/* the right order opens, the object reads */
	st = open_ok();
	ok(st && get_eq(st, "k", big, BIG) == 1, "the store as created opens and reads");
	ol_store_close(st);
}

static void
test_blank_healed(void)
{
	struct ol_driveid before, after;
	struct ol_heal_progress p = {0};
	struct ol_store *st;

	setup("d", 4, 4, 1);
	ok(rec(2, &before) == 0, "drive 2 has a record");
	rm_rf(cfg.data_dirs[2]);
	st = open_ok();
	ok(st != NULL, "a store with drive 2 wiped opens");
	ok(rec(2, &after) == 0 && after.index == 2 && !strcmp(after.store, before.store) &&
	       strcmp(after.drive, before.drive) != 0,
	   "the blank drive got a fresh record: same store and position, a new UUID");
	ok(st && ol_store_heal_all(st, &(struct ol_heal_opts){0}, &p) == 0 &&
	       atomic_load(&p.unrecoverable) == 0,
	   "heal runs clean");
	ol_store_close(st);
	/* with drive 0 wiped too, k = 3 needs drive 2's shards: the heal rebuilt them */
	rm_rf(cfg.data_dirs[0]);
	st = open_ok();
	ok(st && get_eq(st, "k", big, BIG) == 1, "with drive 0 wiped too, the object reads");
	ol_store_close(st);
}

static void
test_upgrade(void)
{
	struct ol_driveid f, g;
	struct ol_store *st;
	char p[600];
	int all = 1;

	/* a one-set store of an older build: no records */
	setup("d", 4, 4, 1);
	for (unsigned i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", cfg.data_dirs[i], OL_DRIVEID_NAME);
		all &= unlink(p) == 0;
	}
	st = open_ok();
	ok(all && st && get_eq(st, "k", big, BIG) == 1, "a store without records opens");
	ol_store_close(st);
	all = 1;
	for (unsigned i = 0; i < 4; i++)
		all &= rec(i, &g) == 0 && g.version == 2 && g.index == i;
	ok(all, "and its drives got their records");

	/* a two-set store with version 1 records, as an older build wrote them */
	setup("m", 8, 4, 1);
	st = open_ok();
	ok(st && ol_store_bucket_create(st, "b") == 0, "a store of two sets");
	for (int i = 0; st && i < 8; i++) {
		char k[8];

		snprintf(k, sizeof(k), "k%d", i);
		all &= put_obj(st, k, big, 1000 + (size_t)i) == 0;
	}
	ol_store_close(st);
	rec(0, &f);
	for (unsigned i = 0; i < 8; i++) {
		FILE *fp;

		snprintf(p, sizeof(p), "%s/%s", cfg.data_dirs[i], OL_DRIVEID_NAME);
		fp = fopen(p, "w");
		all &= fp && fprintf(fp, "openlake-format 1\nstore %s\nsets 2\nset %u\ndrives 4\n",
				     f.store, i / 4) > 0;
		if (fp)
			fclose(fp);
	}
	ok(all, "8 objects, then version 1 records in place");
	st = open_ok();
	for (int i = 0; st && i < 8; i++) {
		char k[8];

		snprintf(k, sizeof(k), "k%d", i);
		all &= get_eq(st, k, big, 1000 + (size_t)i) == 1;
	}
	ok(st && all, "reopened: every object found (the placement seed kept)");
	ol_store_close(st);
	all = 1;
	for (unsigned i = 0; i < 8; i++)
		all &= rec(i, &g) == 0 && g.version == 2 && g.set == i / 4 && g.index == i % 4 &&
		       !strcmp(g.store, f.store) && g.drive[0];
	ok(all, "the version 1 records were upgraded in place");
}

/* Wait (bounded) until drive d's online state is want. */
static int
wait_online(struct ol_store *st, int d, bool want)
{
	for (int i = 0; i < 600; i++) {
		if ((atomic_load(&st->d[d].meta) != NULL) == want)
			return 1;
		usleep(50 * 1000);
	}
	return 0;
}

static void
test_running(void)
{
	struct ol_driveid f, g;
	struct ol_store *st;
	char p[600], t[620], why[OL_WHY_MAX];
	int rc;

	setup("d", 4, 4, 1);
	st = open_ok();
	ok(st &&
	       ol_store_heal_all(st, &(struct ol_heal_opts){0}, &(struct ol_heal_progress){0}) == 0,
	   "open for the running checks, drive 0 (wiped above) healed");
	if (!st)
		return;
	/* another position's record under drive 3 (as a disk swapped in with its record) */
	rec(3, &f);
	rec(1, &g);
	snprintf(p, sizeof(p), "%s/%s", cfg.data_dirs[3], OL_DRIVEID_NAME);
	snprintf(t, sizeof(t), "%s.keep", p);
	ok(rename(p, t) == 0 && ol_driveid_write(cfg.data_dirs[3], &g) == 0,
	   "drive 3's record replaced by drive 1's");
	ok(wait_online(st, 3, false), "drive 3 goes offline");
	ol_drive_why(st, 3, why, sizeof(why));
	ok(strstr(why, "another drive of this store") != NULL, "why: %s", why);
	rc = put_obj(st, "during", big, BIG);
	ok(rc == 0 && get_eq(st, "during", big, BIG) == 1 && get_eq(st, "k", big, BIG) == 1,
	   "the store writes and reads with it offline (%d)", rc);
	usleep(1500 * 1000); /* a tick or more: it stays offline */
	ok(!atomic_load(&st->d[3].meta), "and it stays offline");
	ok(rename(t, p) == 0 && wait_online(st, 3, true), "its own record back: back online");
	/* the drive wiped while running: offline, then back blank with a fresh record */
	rm_rf(cfg.data_dirs[3]);
	mkdir(cfg.data_dirs[3], 0700);
	ok(wait_online(st, 3, false) || 1, "wiped");
	ok(wait_online(st, 3, true) && rec(3, &g) == 0 && g.index == 3 &&
	       strcmp(g.drive, f.drive) != 0,
	   "a wiped drive comes back with a fresh record");
	ol_store_close(st);
}

int
main(void)
{
	const char *tmp = getenv("TMPDIR");

	ol_log_threshold = getenv("OL_TEST_VERBOSE") ? OL_LOG_DEBUG : OL_LOG_ERROR - 1;
	snprintf(root, sizeof(root), "%s/ol_format_XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		tap_skip_all("no temp dir");
	test_codec();
	test_open_checks();
	test_blank_healed();
	test_upgrade();
	test_running();
	rm_rf(root);
	tap_done();
}
