/* test_sets.c - a store of several erasure sets (store/sets.c) on real files in a temp dir:
 * placement spread over the sets and stable across reopens, buckets on every set, listings
 * merged in key order (seek, pages), versions, multipart across sets, a set missing a bucket
 * repaired, bucket delete only when every set is empty, and a store refusing to open with
 * another set count; several pools (ol_store_pools): old keys stay, new ones go by free
 * space, listings merge the pools, a key in two pools resolves to the newest; a pool drained
 * (ol_store_drain) into the other with its versions whole while writers go on; pool 0 drained
 * gives its buckets to the other pool. TAP output. */
#include "store/store.h"
#include "store/store_int.h" /* to look at one set, and to take a bucket from one */

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "tap.h"

#define NKEYS 300

static char root[256];
static struct ol_config cfg;
static char keys[NKEYS][32];

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static void
rm_rf(const char *p)
{
	nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void
setup(int dirs, int n, int p)
{
	ol_config_default(&cfg);
	cfg.n_data_dirs = (unsigned)dirs;
	for (int i = 0; i < dirs; i++)
		snprintf(cfg.data_dirs[i], sizeof(cfg.data_dirs[i]), "%s/d%d", root, i);
	cfg.set_drive_count = (unsigned)n;
	cfg.default_parity_count = (unsigned)p;
	cfg.fsync = false;
	cfg.inline_threshold = 1024;
	cfg.block_size = 4096;
}

static int
put(struct ol_store *st, const char *b, const char *k, const void *d, size_t n, int vmode,
    struct ol_obj_info *out)
{
	struct ol_put *p;
	int rc = ol_store_put_begin(st, b, k, strlen(k), (int64_t)n, &p);

	if (rc)
		return rc;
	ol_store_put_set_vmode(p, vmode);
	rc = ol_store_put_write(p, d, n);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, "etag", NULL, 0, out);
}

static int
get(struct ol_store *st, const char *b, const char *k, char *buf, size_t cap)
{
	struct ol_get *g;
	struct ol_obj_info info;
	int rc = ol_store_get_open(st, b, k, strlen(k), &g, &info);
	ssize_t n;

	if (rc)
		return rc;
	n = ol_store_get_read(g, 0, buf, cap - 1);
	ol_store_get_close(g);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	return 0;
}

/* the set holding key (by asking every set), or -1 (none) / -2 (several) */
static int
set_of(struct ol_store *st, const char *b, const char *k)
{
	int where = -1;

	for (int i = 0; i < st->n_sets; i++) {
		struct ol_obj_info info;

		if (ol_set_head(st->sets[i], b, k, strlen(k), &info, NULL, 0) == 0)
			where = where == -1 ? i : -2;
	}
	return where;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* the keys of bucket b from key `from` on, pages of `page` (a fresh iterator per page, seeking
 * past the last key, as S3 ListObjectsV2 does), into out; count or -1 when out of order */
static int
list_all(struct ol_store *st, const char *b, const char *from, int page, char (*out)[32], int cap)
{
	char last[64] = "";
	int n = 0;
	bool first = true;

	for (;;) {
		struct ol_iter *it;
		const char *k;
		size_t kl;
		struct ol_obj_info info;
		int got = 0, rc;

		if (ol_store_iter_open(st, b, &it))
			return -1;
		if (first)
			ol_store_iter_seek(it, from, strlen(from));
		else {
			char seek[64];

			snprintf(seek, sizeof(seek), "%s", last);
			ol_store_iter_seek(it, seek, strlen(seek) + 1); /* past last ('\0' after) */
		}
		first = false;
		while (got < page && (rc = ol_store_iter_next(it, &k, &kl, &info)) == 1) {
			size_t ll = strlen(last);
			int c = memcmp(last, k, ll < kl ? ll : kl);

			if (n && (c > 0 || (c == 0 && ll >= kl))) {
				ol_store_iter_close(it);
				return -1;
			}
			if (n < cap)
				snprintf(out[n], 32, "%.*s", (int)kl, k);
			snprintf(last, sizeof(last), "%.*s", (int)kl, k);
			n++;
			got++;
		}
		ol_store_iter_close(it);
		if (got < page)
			return n;
	}
}

static void
test_placement_and_listing(void)
{
	struct ol_store *st;
	int per[2] = {0, 0}, where[NKEYS], bad = 0, rc;
	char buf[256], (*lst)[32] = calloc(NKEYS + 8, 32), sorted[NKEYS][32];

	setup(8, 4, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0, "8 data dirs, set_drive_count 4: opens (%d)", rc);
	if (rc)
		exit(1);
	ok(st->n_sets == 2 && ol_store_drive_count(st) == 8 && ol_store_drives_online(st) == 8,
	   "two sets of 4, 8 drives online (%d sets, %d drives)", st->n_sets,
	   ol_store_drive_count(st));
	ok(!strcmp(ol_store_drive_path(st, 5), cfg.data_dirs[5]) && !ol_store_drive_path(st, 8),
	   "drive 5 is the 6th data dir, drive 8 none");
	ok(ol_store_bucket_create(st, "b") == 0, "bucket created");
	ok(ol_set_bucket_stat(st->sets[0], "b", NULL) == 0 &&
	       ol_set_bucket_stat(st->sets[1], "b", NULL) == 0,
	   "the bucket is on both sets");
	ok(ol_store_bucket_create(st, "b") == -EEXIST, "created again: -EEXIST");

	for (int i = 0; i < NKEYS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k/%04d", (i * 7919) % NKEYS);
		snprintf(buf, sizeof(buf), "value of %s %s", keys[i], i % 3 ? "" : "x");
		if (i % 10 == 0) { /* some beyond the inline threshold: shard files */
			memset(buf, 'a' + i % 26, 200);
			snprintf(buf + 200, 50, "%s", keys[i]);
		}
		if (put(st, "b", keys[i], buf, strlen(buf), OL_STORE_VER_OFF, NULL))
			bad++;
	}
	ok(bad == 0, "%d PUTs, %d failed", NKEYS, bad);
	for (int i = 0; i < NKEYS; i++) {
		where[i] = set_of(st, "b", keys[i]);
		if (where[i] >= 0)
			per[where[i]]++;
	}
	ok(per[0] + per[1] == NKEYS, "every key is in exactly one set (%d + %d)", per[0], per[1]);
	ok(per[0] > NKEYS / 4 && per[1] > NKEYS / 4, "spread over both sets: %d / %d", per[0],
	   per[1]);

	memcpy(sorted, keys, sizeof(sorted));
	qsort(sorted, NKEYS, 32, cmp_str);
	rc = list_all(st, "b", "", 1000, lst, NKEYS + 8);
	ok(rc == NKEYS, "one listing: %d keys in order (of %d)", rc, NKEYS);
	ok(rc == NKEYS && !memcmp(lst, sorted, sizeof(sorted)), "the listing is the sorted keys");
	rc = list_all(st, "b", "", 7, lst, NKEYS + 8);
	ok(rc == NKEYS && !memcmp(lst, sorted, sizeof(sorted)),
	   "pages of 7 resuming past the last key: all %d in order", rc);
	rc = list_all(st, "b", "k/0150", 1000, lst, NKEYS + 8);
	ok(rc == NKEYS - 150 && !strcmp(lst[0], "k/0150") &&
	       !strcmp(lst[rc - 1], sorted[NKEYS - 1]),
	   "seek to k/0150: the %d keys from there (%s..)", rc, rc > 0 ? lst[0] : "");

	/* placement is stable: reopen, every key reads back from the same set */
	ol_store_close(st);
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0, "reopens");
	bad = 0;
	for (int i = 0; i < NKEYS; i++) {
		char want[256];

		snprintf(want, sizeof(want), "value of %s %s", keys[i], i % 3 ? "" : "x");
		if (i % 10 == 0) {
			memset(want, 'a' + i % 26, 200);
			snprintf(want + 200, 50, "%s", keys[i]);
		}
		if (get(st, "b", keys[i], buf, sizeof(buf)) || strcmp(buf, want) ||
		    set_of(st, "b", keys[i]) != where[i])
			bad++;
	}
	ok(bad == 0, "after a reopen every key reads back, from the same set (%d bad)", bad);

	/* delete: the bucket goes only when every set is empty */
	ok(ol_store_bucket_delete(st, "b") == -ENOTEMPTY, "delete of a bucket with keys refused");
	for (int i = 0; i < NKEYS; i++)
		if (where[i] == 1 || i == 0 || ol_store_delete(st, "b", keys[i], strlen(keys[i])))
			continue;
	/* only keys[0] and set 1's keys left */
	rc = ol_store_bucket_delete(st, "b");
	ok(rc == -ENOTEMPTY, "keys left in set 1 only: delete refused (%d)", rc);
	ok(ol_set_bucket_stat(st->sets[0], "b", NULL) == 0 &&
	       ol_set_bucket_stat(st->sets[1], "b", NULL) == 0,
	   "and the bucket is still on both sets");
	for (int i = 0; i < NKEYS; i++)
		ol_store_delete(st, "b", keys[i], strlen(keys[i]));
	ok(ol_store_bucket_delete(st, "b") == 0, "every set empty: bucket deleted");
	ok(ol_set_bucket_stat(st->sets[0], "b", NULL) == -ENOENT &&
	       ol_set_bucket_stat(st->sets[1], "b", NULL) == -ENOENT,
	   "gone from both sets");
	ol_store_close(st);
	free(lst);
}

/* a key of bucket b that lands in set s */
static void
key_in(struct ol_store *st, const char *b, int s, const char *pfx, char *out, size_t cap)
{
	for (int i = 0;; i++) {
		struct ol_put *p;

		snprintf(out, cap, "%s%d", pfx, i);
		/* put_begin places it: abort, then look where the set count says */
		if (ol_store_put_begin(st, b, out, strlen(out), 1, &p) == 0) {
			ol_store_put_write(p, "x", 1);
			ol_store_put_commit(p, "e", NULL, 0, NULL);
		}
		if (set_of(st, b, out) == s) {
			ol_store_delete(st, b, out, strlen(out));
			return;
		}
		ol_store_delete(st, b, out, strlen(out));
	}
}

static int
mpu_cb(const char *key, size_t kl, const char *id, int64_t init, const void *meta, size_t ml,
       void *arg)
{
	char(*got)[80] = arg;
	int i = 0;

	(void)init;
	while (got[i][0])
		i++;
	snprintf(got[i], 80, "%.*s %s", (int)kl, key, id);
	return 0;
}

static void
test_mpu_versions_repair(void)
{
	struct ol_store *st;
	char k[2][32], id[2][64], buf[64], got[8][80] = {{0}};
	struct ol_obj_info info;
	int rc;

	setup(8, 4, 1);
	ok(ol_store_open(&cfg, &st) == 0, "reopens after the bucket was deleted");
	ok(ol_store_bucket_create_attrs(st, "m", "ATTRS", 5) == 0, "bucket with attrs created");
	key_in(st, "m", 0, "a", k[0], sizeof(k[0]));
	key_in(st, "m", 1, "b", k[1], sizeof(k[1]));
	for (int s = 0; s < 2; s++) {
		struct ol_put *p;

		rc = ol_store_mpu_create(st, "m", k[s], strlen(k[s]), NULL, 0, id[s]);
		ok(rc == 0 && id[s][0] == '0' && id[s][1] == '0' + s && strlen(id[s]) == 32,
		   "upload of a set-%d key: id %s names its set", s, id[s]);
		rc = ol_store_mpu_part_begin(st, "m", id[s], 1, &p);
		if (!rc) {
			ol_store_put_write(p, k[s], strlen(k[s]));
			rc = ol_store_put_commit(p, "pe", NULL, 0, NULL);
		}
		ok(rc == 0, "part 1 of the set-%d upload written by id alone", s);
	}
	rc = ol_store_mpu_list(st, "m", mpu_cb, got);
	snprintf(buf, sizeof(buf), "%s %s", k[0], id[0]);
	ok(rc == 0 && !strcmp(got[0], buf) && !strncmp(got[1], k[1], strlen(k[1])) && !got[2][0],
	   "uploads listed from both sets in key order: [%s] [%s]", got[0], got[1]);
	for (int s = 0; s < 2; s++) {
		unsigned part = 1;

		rc = ol_store_mpu_complete(st, "m", id[s], &part, 1, "final", &info);
		ok(rc == 0 && set_of(st, "m", k[s]) == s, "completed: the object is in set %d", s);
		ok(get(st, "m", k[s], buf, sizeof(buf)) == 0 && !strcmp(buf, k[s]),
		   "and reads back");
	}
	ok(ol_store_mpu_abort(st, "m", "ff000000000000000000000000000000") == -ENOENT &&
	       ol_store_mpu_abort(st, "m", "zz") == -ENOENT,
	   "an upload id naming no set: -ENOENT");

	/* versions of keys in both sets, listed merged: keys in order, newest first */
	{
		struct ol_viter *vi;
		const char *key;
		size_t kl;
		int n = 0, latest = 0, order_ok = 1;
		char last[64] = "";

		for (int v = 0; v < 3; v++)
			for (int s = 0; s < 2; s++)
				put(st, "m", k[s], "v", 1, OL_STORE_VER_ON, NULL);
		rc = ol_store_viter_open(st, "m", &vi);
		while (!rc && ol_store_viter_next(vi, &key, &kl, &info) == 1) {
			char cur[64];

			snprintf(cur, sizeof(cur), "%.*s", (int)kl, key);
			if (strcmp(cur, last) < 0)
				order_ok = 0;
			snprintf(last, sizeof(last), "%s", cur);
			latest += info.is_latest;
			n++;
		}
		if (!rc)
			ol_store_viter_close(vi);
		ok(!rc && n == 8 && latest == 2 && order_ok,
		   "version listing over both sets: %d versions (8), %d latest (2), in order", n,
		   latest);
	}

	/* a set that lost the bucket (a crash between sets) has it back on first use */
	ok(ol_set_bucket_delete(st->sets[1], "m") == -ENOTEMPTY, "set 1 holds keys of m");
	ok(ol_store_bucket_create(st, "r") == 0, "bucket r");
	ok(ol_set_bucket_delete(st->sets[1], "r") == 0 &&
	       ol_set_bucket_stat(st->sets[1], "r", NULL) == -ENOENT,
	   "bucket r taken from set 1 alone");
	{
		void *a = NULL;
		size_t al = 0;

		ol_store_bucket_set_attrs(st, "r", "NEW", 3);
		ok(ol_set_bucket_attrs(st->sets[1], "r", &a, &al) == 0 && al == 3 &&
		       !memcmp(a, "NEW", 3),
		   "set_attrs repairs set 1 with set 0's attrs");
		free(a);
	}
	ol_set_bucket_delete(st->sets[1], "r");
	{
		char kr[32];
		struct ol_iter *it;
		const char *key;
		size_t kl;

		snprintf(kr, sizeof(kr), "%s", "x");
		for (int i = 0; set_of(st, "r", kr) != 1; i++) {
			snprintf(kr, sizeof(kr), "x%d", i);
			rc = put(st, "r", kr, "y", 1, OL_STORE_VER_OFF, NULL);
			if (rc)
				break;
			if (set_of(st, "r", kr) != 1)
				ol_store_delete(st, "r", kr, strlen(kr));
		}
		ok(rc == 0 && set_of(st, "r", kr) == 1,
		   "a PUT to set 1 after it lost the bucket succeeds (%d)", rc);
		ok(ol_set_bucket_stat(st->sets[1], "r", NULL) == 0, "set 1 has bucket r again");
		ol_set_bucket_delete(st->sets[1], "r"); /* fails: not empty */
		rc = ol_store_iter_open(st, "r", &it);
		ok(rc == 0 && ol_store_iter_next(it, &key, &kl, &info) == 1 && kl == strlen(kr) &&
		       !memcmp(key, kr, kl) && ol_store_iter_next(it, &key, &kl, &info) == 0,
		   "listing r shows the one key");
		if (!rc)
			ol_store_iter_close(it);
	}
	ol_store_close(st);
}

/* keys past the index's key head (400 bytes: stored as head + hash, their order restored by
 * each set's iterator) merge in byte order over the sets too */
static void
test_long_keys(void)
{
	struct ol_store *st;
	enum { NL = 40 };
	static char lk[NL][520];
	int bad = 0, n = 0, per[2] = {0, 0};
	struct ol_iter *it;
	const char *key;
	size_t kl;
	struct ol_obj_info info;

	setup(8, 4, 1);
	ok(ol_store_open(&cfg, &st) == 0, "reopens for long keys");
	ol_store_bucket_create(st, "long");
	for (int i = 0; i < NL; i++) {
		memset(lk[i], 'p', 420);
		/* the same 400-byte head for all; tails differ, some keys short of the head */
		snprintf(lk[i] + (i % 5 ? 420 : 390), 40, "%03d", (i * 17) % NL);
		if (put(st, "long", lk[i], "v", 1, OL_STORE_VER_OFF, NULL))
			bad++;
		per[set_of(st, "long", lk[i]) == 1]++;
	}
	ok(bad == 0 && per[0] && per[1], "%d long keys put, on both sets (%d / %d)", NL, per[0],
	   per[1]);
	qsort(lk, NL, sizeof(lk[0]), cmp_str);
	if (ol_store_iter_open(st, "long", &it) == 0) {
		while (ol_store_iter_next(it, &key, &kl, &info) == 1) {
			if (n >= NL || kl != strlen(lk[n]) || memcmp(key, lk[n], kl))
				bad++;
			n++;
		}
		ol_store_iter_close(it);
	}
	ok(n == NL && bad == 0, "long keys listed in byte order over both sets (%d, %d bad)", n,
	   bad);
	ol_store_close(st);
}

struct racer {
	struct ol_store *st;
	int id;
	atomic_int *stop;
	atomic_int puts, gone; /* PUTs acknowledged; PUTs refused for no bucket */
};

static void *
race_writer(void *arg)
{
	struct racer *r = arg;
	char k[32];

	for (int i = 0; !atomic_load(r->stop); i++) {
		int rc;

		snprintf(k, sizeof(k), "w%d-%d", r->id, i % 50);
		rc = put(r->st, "race", k, "v", 1, OL_STORE_VER_OFF, NULL);
		if (rc == 0) {
			atomic_fetch_add(&r->puts, 1);
			ol_store_delete(r->st, "race", k, strlen(k));
		} else if (rc == -ENOENT) {
			atomic_fetch_add(&r->gone, 1);
		}
	}
	return NULL;
}

/* bucket delete racing writers on both sets: when it succeeds the bucket is gone from set 0
 * and no set keeps it with objects (a repair never brings back a bucket being deleted) */
static void
test_delete_races_writers(void)
{
	struct ol_store *st;
	pthread_t th[3];
	struct racer r[3];
	atomic_int stop = 0;
	int tries = 0, rc = -1, left = 0;

	setup(8, 4, 1);
	ok(ol_store_open(&cfg, &st) == 0, "reopens for the race");
	ol_store_bucket_create(st, "race");
	for (int i = 0; i < 3; i++) {
		r[i].st = st;
		r[i].id = i;
		r[i].stop = &stop;
		atomic_init(&r[i].puts, 0);
		atomic_init(&r[i].gone, 0);
		pthread_create(&th[i], NULL, race_writer, &r[i]);
	}
	/* until the writers have written, then until a delete finds every set empty */
	while (atomic_load(&r[0].puts) + atomic_load(&r[1].puts) + atomic_load(&r[2].puts) < 200)
		usleep(1000);
	while (rc && tries < 100000) {
		rc = ol_store_bucket_delete(st, "race");
		tries++;
	}
	while (atomic_load(&r[0].gone) + atomic_load(&r[1].gone) + atomic_load(&r[2].gone) < 30 &&
	       rc == 0)
		usleep(1000); /* the writers see the bucket gone */
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ok(rc == 0, "a delete went through after %d tries, while 3 writers ran", tries);
	ok(ol_set_bucket_stat(st->sets[0], "race", NULL) == -ENOENT,
	   "the bucket is gone from set 0");
	for (int i = 1; i < st->n_sets; i++) {
		int e = ol_set_bucket_empty(st->sets[i], "race");

		left += e != 0 && e != -ENOENT;
	}
	ok(left == 0, "no other set keeps it with objects");
	ok(ol_store_bucket_create(st, "race") == 0, "created again");
	{
		struct ol_iter *it;
		const char *key;
		size_t kl;
		struct ol_obj_info info;

		rc = ol_store_iter_open(st, "race", &it);
		ok(rc == 0 && ol_store_iter_next(it, &key, &kl, &info) == 0,
		   "and it is empty (nothing from its earlier life)");
		if (!rc)
			ol_store_iter_close(it);
	}
	ol_store_close(st);
}

static bool
exists(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0;
}

static void
test_set_count_fixed(void)
{
	struct ol_store *st;
	char p[600];
	int rc;

	setup(8, 8, 2);
	rc = ol_store_open(&cfg, &st);
	ok(rc == -EINVAL, "the 2-set store opened as one set of 8: refused (%d)", rc);
	setup(8, 2, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == -EINVAL, "opened as 4 sets of 2: refused (%d)", rc);
	setup(8, 4, 1);
	{ /* swap the two sets' first dirs: each is taken where its record says */
		char t[sizeof(cfg.data_dirs[0])];

		memcpy(t, cfg.data_dirs[0], sizeof(t));
		memcpy(cfg.data_dirs[0], cfg.data_dirs[4], sizeof(t));
		memcpy(cfg.data_dirs[4], t, sizeof(t));
	}
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0, "opened with set 0 and set 1 dirs swapped: each at its record's place (%d)",
	   rc);
	if (!rc)
		ol_store_close(st);
	setup(8, 4, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0, "opened as created: fine");
	if (!rc)
		ol_store_close(st);
	setup(6, 4, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == -EINVAL, "6 dirs with set_drive_count 4: refused (%d)", rc);

	/* a one-set store: its drives' identity records say one set, and it cannot grow into
	 * two */
	rm_rf(root);
	mkdir(root, 0700);
	setup(4, 4, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == 0 && st->n_sets == 1 && st->sets[0] == st, "a one-set store is its own set");
	if (!rc) {
		ok(ol_store_bucket_create(st, "one") == 0 &&
		       put(st, "one", "k", "v", 1, OL_STORE_VER_OFF, NULL) == 0,
		   "one-set store: bucket and object");
		ol_store_close(st);
	}
	{
		struct ol_driveid f;

		ok(ol_driveid_read(cfg.data_dirs[3], &f) == 0 && f.sets == 1 && f.set == 0 &&
		       f.index == 3 && f.drives == 4,
		   "a one-set store's drive has its identity record (set 0 of 1, drive 3 of 4)");
	}
	setup(8, 4, 1);
	rc = ol_store_open(&cfg, &st);
	ok(rc == -EINVAL, "the one-set store with 4 more dirs as 2 sets: refused (%d)", rc);
	snprintf(p, sizeof(p), "%s/.openlake/format", cfg.data_dirs[4]);
	ok(!exists(p), "and nothing written to the new dirs");
	setup(4, 4, 1);
	rc = ol_store_open(&cfg, &st);
	if (!rc) {
		char buf[8];

		ok(get(st, "one", "k", buf, sizeof(buf)) == 0 && !strcmp(buf, "v"),
		   "the one-set store opens as before, its object there");
		ol_store_close(st);
	} else {
		ok(0, "the one-set store reopens (%d)", rc);
	}
}

/* pool 0: 8 dirs as 2 sets of 4 (p0_*); pool 1: 4 dirs as 1 set (p1_*) */
static int
open_pools(int n, struct ol_store **out)
{
	struct ol_store *pools[2] = {NULL, NULL};
	int rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		setup(i ? 4 : 8, 4, 1);
		for (unsigned d = 0; d < cfg.n_data_dirs; d++)
			snprintf(cfg.data_dirs[d], sizeof(cfg.data_dirs[d]), "%s/p%d_%u", root, i,
				 d);
		rc = ol_store_open(&cfg, &pools[i]);
	}
	if (rc) {
		ol_store_close(pools[0]);
		return rc;
	}
	return ol_store_pools(pools, (unsigned)n, "deployment-x", out);
}

static void
test_pools(void)
{
	struct ol_store *st;
	char k[32], buf[64], want[64], lst[400][32];
	int where[100], bad = 0, per[3] = {0}, rc;
	struct ol_obj_info info;
	uint64_t only1[2] = {0, 1ull << 30}, even[2] = {1ull << 30, 1ull << 30};

	rm_rf(root);
	mkdir(root, 0700);
	rc = open_pools(1, &st);
	ok(rc == 0 && st->n_sets == 2 && ol_store_pool_count(st) == 1, "one pool of 2 sets (%d)",
	   rc);
	if (rc)
		return;
	ok(ol_store_bucket_create_attrs(st, "p", "ATTRS", 5) == 0, "bucket p with attrs");
	for (int i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "old/%03d", i);
		bad += put(st, "p", k, k, strlen(k), OL_STORE_VER_ON, NULL) != 0;
		where[i] = set_of(st, "p", k);
	}
	ok(bad == 0, "100 keys in the one-pool store");
	ol_store_close(st);

	rc = open_pools(2, &st);
	ok(rc == 0 && st->n_sets == 3 && ol_store_pool_count(st) == 2 && st->pool_first[1] == 2,
	   "grown: pool 0 = sets 0-1, pool 1 = set 2 (%d)", rc);
	if (rc)
		return;
	bad = 0;
	for (int i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "old/%03d", i);
		bad += get(st, "p", k, buf, sizeof(buf)) != 0 || strcmp(buf, k) ||
		       set_of(st, "p", k) != where[i];
	}
	ok(bad == 0, "every old key reads back from its set of pool 0 (%d bad)", bad);

	ol_store_set_pool_free(st, only1, 2);
	bad = 0;
	for (int i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "old/%03d", i);
		snprintf(want, sizeof(want), "new %s", k);
		bad += put(st, "p", k, want, strlen(want), OL_STORE_VER_ON, NULL) != 0 ||
		       set_of(st, "p", k) != where[i] || get(st, "p", k, buf, sizeof(buf)) ||
		       strcmp(buf, want);
	}
	ok(bad == 0, "overwrites of old keys stay in pool 0, all free space in pool 1 (%d bad)",
	   bad);
	ok(ol_set_bucket_stat(st->sets[2], "p", NULL) == 0, "pool 1 got bucket p on first use");
	{
		void *a = NULL;
		size_t al = 0;

		ok(ol_set_bucket_attrs(st->sets[2], "p", &a, &al) == 0 && al == 5 &&
		       !memcmp(a, "ATTRS", 5),
		   "with set 0's attrs");
		free(a);
	}
	bad = 0;
	for (int i = 0; i < 50; i++) {
		snprintf(k, sizeof(k), "n1/%03d", i);
		bad += put(st, "p", k, k, strlen(k), OL_STORE_VER_OFF, NULL) != 0 ||
		       set_of(st, "p", k) != 2;
	}
	ok(bad == 0, "new keys go to the pool with all the free space (%d bad)", bad);
	ol_store_set_pool_free(st, even, 2);
	bad = 0;
	for (int i = 0; i < 200; i++) {
		int s;

		snprintf(k, sizeof(k), "n2/%03d", i);
		bad += put(st, "p", k, k, strlen(k), OL_STORE_VER_OFF, NULL) != 0;
		s = set_of(st, "p", k);
		if (s >= 0)
			per[s]++;
	}
	ok(bad == 0 && per[0] + per[1] + per[2] == 200 && per[0] + per[1] > 50 && per[2] > 50,
	   "equal free space: new keys over both pools (%d + %d / %d)", per[0], per[1], per[2]);

	rc = list_all(st, "p", "", 37, lst, 400);
	ok(rc == 350, "one listing over both pools: %d keys in order (of 350)", rc);

	/* a delete marker keeps its key in its pool */
	ol_store_set_pool_free(st, only1, 2);
	ok(ol_store_delete_ver(st, "p", "old/000", 7, OL_STORE_VER_ON, NULL, &info) == 0 &&
	       ol_store_head(st, "p", "old/000", 7, &info, NULL, 0) == -ENOENT,
	   "old/000 deleted (a delete marker)");
	ok(put(st, "p", "old/000", "again", 5, OL_STORE_VER_ON, NULL) == 0 &&
	       set_of(st, "p", "old/000") == where[0],
	   "PUT over a delete marker stays in pool 0");

	/* a race left old/001 in both pools: the newest wins, listed once */
	{
		struct ol_put *pp;

		rc = ol_set_put_begin(st->sets[2], "p", "old/001", 7, 4, &pp);
		if (!rc && (rc = ol_store_put_write(pp, "dup!", 4)))
			ol_store_put_abort(pp);
		if (!rc)
			rc = ol_store_put_commit(pp, "etag", NULL, 0, NULL);
		ok(rc == 0 && set_of(st, "p", "old/001") == -2, "old/001 written into pool 1 too");
		ok(get(st, "p", "old/001", buf, sizeof(buf)) == 0 && !strcmp(buf, "dup!"),
		   "a read takes the newest: pool 1's");
		rc = list_all(st, "p", "old/", 1000, lst, 400);
		ok(rc == 350 - 250 && !strcmp(lst[1], "old/001") && !strcmp(lst[2], "old/002"),
		   "listed once (%d)", rc);
	}

	/* multipart: in the set chosen at initiate */
	{
		char id[64];
		struct ol_put *pp;

		rc = ol_store_mpu_create(st, "p", "mp/1", 4, NULL, 0, id);
		ok(rc == 0 && id[0] == '0' && id[1] == '2', "an upload of a new key in pool 1: %s",
		   id);
		ol_store_set_pool_free(st, (uint64_t[2]){1ull << 30, 0}, 2);
		rc = ol_store_mpu_part_begin(st, "p", id, 1, &pp);
		if (!rc && (rc = ol_store_put_write(pp, "part", 4)))
			ol_store_put_abort(pp);
		if (!rc)
			rc = ol_store_put_commit(pp, "e1", NULL, 0, NULL);
		rc = rc ? rc : ol_store_mpu_complete(st, "p", id, (unsigned[]){1}, 1, "e-1", &info);
		ok(rc == 0 && set_of(st, "p", "mp/1") == 2 && get(st, "p", "mp/1", buf, 64) == 0 &&
		       !strcmp(buf, "part"),
		   "completed in pool 1 though pool 0 has the free space now (%d)", rc);
	}
	/* a plain delete of a key in two pools deletes both copies */
	{
		struct ol_put *pp;
		int c;

		ol_store_set_pool_free(st, (uint64_t[2]){1ull << 30, 0}, 2);
		rc = put(st, "p", "dup/1", "old", 3, OL_STORE_VER_OFF, NULL);
		c = set_of(st, "p", "dup/1");
		if (!rc)
			rc = ol_set_put_begin(st->sets[2], "p", "dup/1", 5, 3, &pp);
		if (!rc && (rc = ol_store_put_write(pp, "new", 3)))
			ol_store_put_abort(pp);
		if (!rc)
			rc = ol_store_put_commit(pp, "etag", NULL, 0, NULL);
		ok(rc == 0 && (c == 0 || c == 1) && set_of(st, "p", "dup/1") == -2,
		   "dup/1 in pool 0 (set %d) and pool 1", c);
		ok(ol_store_delete(st, "p", "dup/1", 5) == 0 && set_of(st, "p", "dup/1") == -1 &&
		       get(st, "p", "dup/1", buf, sizeof(buf)) == -ENOENT,
		   "one delete removes both copies: no older one comes back");
	}
	ok(ol_store_bucket_delete(st, "p") == -ENOTEMPTY, "bucket delete refused with keys");
	ol_store_close(st);
}

/* every version of bucket b through the store, one line each: key, id, mtime, etag, size,
 * marker, latest, meta, part count and sizes, a checksum of the bytes */
static size_t
dump(struct ol_store *st, const char *b, char *out, size_t cap)
{
	struct ol_viter *it;
	const char *k;
	size_t kl, n = 0;
	struct ol_obj_info info;
	char key[64][80], id[64][OL_STORE_VID_MAX];
	int cnt = 0;

	if (ol_store_viter_open(st, b, &it))
		return 0;
	while (cnt < 64 && ol_store_viter_next(it, &k, &kl, &info) == 1) {
		if (kl >= 2 && !memcmp(k, "c/", 2))
			continue; /* overwritten during the drain: checked apart */
		snprintf(key[cnt], sizeof(key[cnt]), "%.*s", (int)kl, k);
		snprintf(id[cnt++], sizeof(id[0]), "%s", info.version_id);
	}
	ol_store_viter_close(it);
	for (int i = 0; i < cnt; i++) {
		struct ol_get *g = NULL;
		uint64_t sum = 0, sizes[8] = {0};
		unsigned np = 0;
		char data[9000];
		int rc = ol_store_get_open_ver(st, b, key[i], strlen(key[i]), id[i], &g, &info);
		ssize_t got = 0;

		if (!rc) {
			got = ol_store_get_read(g, 0, data, sizeof(data));
			for (ssize_t j = 0; j < got; j++)
				sum = sum * 131 + (uint8_t)data[j];
			np = ol_store_get_part_sizes(g, sizes, 8);
		}
		n += (size_t)snprintf(out + n, cap - n,
				      "%s %s %lld %s %llu %d %.*s %u %llu/%llu %llu rc=%d\n",
				      key[i], id[i], (long long)info.mtime_ns, info.etag,
				      (unsigned long long)info.size, info.delete_marker,
				      (int)info.meta_len, rc ? "" : (const char *)info.meta, np,
				      (unsigned long long)sizes[0], (unsigned long long)sizes[1],
				      (unsigned long long)sum, rc == OL_STORE_EDELMARK ? 1 : rc);
		if (g)
			ol_store_get_close(g);
	}
	return n;
}

static int
put_meta(struct ol_store *st, const char *k, size_t size, int vmode, const char *meta)
{
	static char data[9000];
	struct ol_put *p;
	int rc = ol_store_put_begin(st, "dr", k, strlen(k), (int64_t)size, &p);

	for (size_t i = 0; i < size; i++)
		data[i] = (char)(i * 7 + (size_t)vmode + strlen(k));
	if (rc)
		return rc;
	ol_store_put_set_vmode(p, vmode);
	rc = ol_store_put_write(p, data, size);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, meta, meta, strlen(meta), NULL);
}

struct drain_writer {
	struct ol_store *st;
	atomic_int stop;
	int last[8], bad;
};

/* overwrites of c/0..7 (in the draining pool at the start) while the drain runs */
static void *
drain_writer(void *arg)
{
	struct drain_writer *w = arg;
	char k[16], v[32];

	for (int r = 1; r < 400 && !atomic_load(&w->stop); r++) {
		int i = r % 8;

		snprintf(k, sizeof(k), "c/%d", i);
		snprintf(v, sizeof(v), "round %d", r);
		if (put(w->st, "dr", k, v, strlen(v), OL_STORE_VER_OFF, NULL) == 0)
			w->last[i] = r;
		else
			w->bad++;
	}
	return NULL;
}

/* A fresh store of two pools with bucket made, whose new keys go to pool 1 (all the free
 * space): 0, or the open's error (reported). */
static int
two_pools(const char *bucket, const char *what, struct ol_store **st)
{
	int rc;

	rm_rf(root);
	mkdir(root, 0700);
	rc = open_pools(2, st);
	ok(rc == 0 && ol_store_pool_count(*st) == 2, "%s: two pools (%d)", what, rc);
	if (rc)
		return rc;
	ol_store_bucket_create(*st, bucket);
	ol_store_set_pool_free(*st, (uint64_t[2]){0, 1ull << 30}, 2);
	return 0;
}

static void
test_drain(void)
{
	static char before[16384], after[16384];
	struct ol_store *st;
	struct ol_drain_progress pr = {0};
	struct drain_writer w = {0};
	struct ol_obj_info info;
	pthread_t th;
	char id[64], buf[64], k[16], want[32];
	int rc, bad = 0;

	if (two_pools("dr", "drain", &st))
		return;
	ok(ol_store_pool_set_draining(st, 5) == -EINVAL, "draining an unknown pool: -EINVAL");
	/* in pool 1: versions and a marker, a null version among versions, a plain object with
	 * metadata, a multipart object, keys overwritten during the drain */
	bad += put_meta(st, "v/k", 5000, OL_STORE_VER_ON, "m1") != 0;
	bad += put_meta(st, "v/k", 10, OL_STORE_VER_ON, "m2") != 0;
	bad += ol_store_delete_ver(st, "dr", "v/k", 3, OL_STORE_VER_ON, NULL, &info) != 0;
	bad += put_meta(st, "v/n", 100, OL_STORE_VER_ON, "n1") != 0;
	bad += put_meta(st, "v/n", 200, OL_STORE_VER_SUSP, "n2") != 0;
	bad += put_meta(st, "v/n", 300, OL_STORE_VER_ON, "n3") != 0;
	bad += put_meta(st, "plain", 8500, OL_STORE_VER_OFF, "tags=a&b") != 0;
	rc = ol_store_mpu_create(st, "dr", "mp", 2, "MPMETA", 6, id);
	for (unsigned i = 1; !rc && i <= 2; i++) {
		struct ol_put *pp;

		rc = ol_store_mpu_part_begin(st, "dr", id, i, &pp);
		if (!rc && (rc = ol_store_put_write(pp, i == 1 ? "aaaaaaa" : "bb", i == 1 ? 7 : 2)))
			ol_store_put_abort(pp);
		else if (!rc)
			rc = ol_store_put_commit(pp, "pe", NULL, 0, NULL);
	}
	bad += rc || ol_store_mpu_complete(st, "dr", id, (unsigned[]){1, 2}, 2, "mpe-2", NULL);
	for (int i = 0; i < 8; i++) {
		snprintf(k, sizeof(k), "c/%d", i);
		bad += put(st, "dr", k, "round 0", 7, OL_STORE_VER_OFF, NULL) != 0;
	}
	ok(bad == 0 && set_of(st, "dr", "plain") == 2 && set_of(st, "dr", "mp") == 2,
	   "objects of every kind in pool 1 (%d bad)", bad);
	dump(st, "dr", before, sizeof(before));

	ok(ol_store_pool_set_draining(st, 1) == 0, "pool 1 draining");
	ok(put(st, "dr", "new", "n", 1, OL_STORE_VER_OFF, NULL) == 0 &&
	       (set_of(st, "dr", "new") == 0 || set_of(st, "dr", "new") == 1),
	   "a new key goes to pool 0 though pool 1 has all the free space");
	{
		struct ol_drain_progress cancelled = {.cancel = 1};

		ok(ol_store_drain(st, 0, NULL, &cancelled) == -EINVAL &&
		       ol_store_drain(st, 1, NULL, &cancelled) == -ECANCELED &&
		       set_of(st, "dr", "plain") == 2 && !cancelled.running,
		   "a drain of a pool not draining: -EINVAL; cancelled: -ECANCELED, nothing moved");
	}
	w.st = st;
	pthread_create(&th, NULL, drain_writer, &w);
	rc = ol_store_drain(st, 1, &(struct ol_drain_opts){.rate_bytes = 0}, &pr);
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	ok(rc == 0 && !pr.running && pr.objects_moved >= 7 && pr.bytes_moved > 13000,
	   "drained: %llu versions, %llu bytes moved, %llu failed (%d)",
	   (unsigned long long)pr.objects_moved, (unsigned long long)pr.bytes_moved,
	   (unsigned long long)pr.failed, rc);
	{
		struct ol_iter *it;
		struct ol_viter *vi;
		const char *kk;
		size_t kl;
		int left = 0;

		if (ol_set_iter_open(st->sets[2], "dr", &it) == 0) {
			left += ol_set_iter_next(it, &kk, &kl, &info) != 0;
			ol_set_iter_close(it);
		}
		if (ol_set_viter_open(st->sets[2], "dr", &vi) == 0) {
			left += ol_set_viter_next(vi, &kk, &kl, &info) != 0;
			ol_set_viter_close(vi);
		}
		ok(left == 0, "pool 1 holds nothing");
	}
	bad = 0;
	for (int i = 0; i < 8; i++) {
		snprintf(k, sizeof(k), "c/%d", i);
		snprintf(want, sizeof(want), "round %d", w.last[i]);
		bad += get(st, "dr", k, buf, sizeof(buf)) || strcmp(buf, want) ||
		       set_of(st, "dr", k) < 0 || set_of(st, "dr", k) > 1;
	}
	ok(w.bad == 0 && bad == 0, "every overwrite acknowledged during the drain reads back");
	/* the c/ keys changed: compare the others */
	bad = 0;
	for (int i = 0; i < 8; i++) {
		snprintf(k, sizeof(k), "c/%d", i);
		bad += ol_store_delete(st, "dr", k, strlen(k)) != 0 ||
		       get(st, "dr", k, buf, sizeof(buf)) != -ENOENT;
	}
	ok(bad == 0 && ol_store_delete(st, "dr", "new", 3) == 0, "moved keys delete (%d bad)", bad);
	dump(st, "dr", after, sizeof(after));
	{
		ok(strlen(before) > 100 && !strcmp(before, after),
		   "every version whole: ids, mtimes, ETags, metadata, parts, bytes");
		if (strcmp(before, after))
			fprintf(stderr, "# before:\n%s\n# after:\n%s", before, after);
	}
	ok(get(st, "dr", "plain", buf, 2) == 0 &&
	       ol_store_head(st, "dr", "plain", 5, &info, buf, sizeof(buf)) == 0 &&
	       info.meta_len == 8 && !memcmp(buf, "tags=a&b", 8) && info.size == 8500,
	   "the unversioned object whole with its metadata");
	ol_store_close(st);
}

/* Pool 0 drained: its set 0 is the buckets' home, so before the pool is empty every bucket,
 * with its creation time and attrs, is on every set of the other pools, also one never used
 * there and one whose attrs there are stale. */
static void
test_drain_home_pool(void)
{
	struct ol_store *st;
	struct ol_drain_progress pr = {0};
	char buf[64], a0[16], a2[16];
	int64_t c0 = 0, c2 = -1;
	size_t l0 = 0, l2 = 0;
	int rc, bad = 0;

	rm_rf(root);
	mkdir(root, 0700);
	rc = open_pools(2, &st);
	ok(rc == 0 && ol_store_pool_count(st) == 2, "home drain: two pools (%d)", rc);
	if (rc)
		return;
	ol_store_set_pool_free(st, (uint64_t[2]){1ull << 30, 0}, 2);
	bad += ol_store_bucket_create_attrs(st, "h1", "ATTR1", 5) != 0;
	bad += ol_store_bucket_create_attrs(st, "h2", "X", 1) != 0;
	bad += put(st, "h1", "k", "kept", 4, OL_STORE_VER_OFF, NULL) != 0;
	/* pool 1's set lacks h2 (never used there) and has h1's attrs of before */
	bad += ol_set_bucket_delete(st->sets[2], "h2") != 0;
	bad += ol_set_bucket_set_attrs(st->sets[2], "h1", "OLD", 3) != 0;
	ok(bad == 0 && set_of(st, "h1", "k") < 2 &&
	       ol_set_bucket_stat(st->sets[2], "h2", NULL) == -ENOENT,
	   "k in pool 0; pool 1 lacks h2 and has stale attrs of h1 (%d bad)", bad);
	ok(ol_store_pool_set_draining(st, 0) == 0, "pool 0 draining");
	rc = ol_store_drain(st, 0, NULL, &pr);
	ok(rc == 0 && get(st, "h1", "k", buf, sizeof(buf)) == 0 && !strcmp(buf, "kept") &&
	       set_of(st, "h1", "k") == 2,
	   "drained: k in pool 1 (%d)", rc);
	bad = 0;
	for (int b = 0; b < 2; b++) {
		const char *name = b ? "h2" : "h1";

		bad += ol_set_bucket_get(st->sets[0], name, &c0, a0, sizeof(a0), &l0) != 0;
		bad += ol_set_bucket_get(st->sets[2], name, &c2, a2, sizeof(a2), &l2) != 0;
		bad += c0 != c2 || l0 != l2 || memcmp(a0, a2, l0);
	}
	ok(bad == 0, "every bucket on pool 1's set with set 0's creation time and attrs");
	ol_store_close(st);
}

/* The last upload open in the draining pool completed while a count pass looks at the pool
 * (the leader completing a client's upload while its drain runs): the pass must see the
 * upload or the object it became, never neither, or the pool is "empty" with the object in
 * it, and removed from the layout with it. The hook completes the upload in the middle of the
 * first count pass (between the listing of uploads and the walk of objects). */
struct late_upload {
	struct ol_store *st;
	char id[64];
	int calls, rc;
};

static void
complete_late(void *arg)
{
	struct late_upload *u = arg;

	if (u->calls++ == 0)
		u->rc =
		    ol_store_mpu_complete(u->st, "up", u->id, (unsigned[]){1}, 1, "late-1", NULL);
}

static void
test_drain_upload_completed_meanwhile(void)
{
	struct ol_store *st;
	struct ol_drain_progress pr = {0};
	struct late_upload u = {0};
	struct ol_put *pp;
	char buf[64];
	int rc;

	if (two_pools("up", "late upload", &st))
		return;
	u.st = st;
	rc = ol_store_mpu_create(st, "up", "late", 4, NULL, 0, u.id);
	rc = rc ? rc : ol_store_mpu_part_begin(st, "up", u.id, 1, &pp);
	if (!rc && (rc = ol_store_put_write(pp, "late bytes", 10)))
		ol_store_put_abort(pp);
	else if (!rc)
		rc = ol_store_put_commit(pp, "p1", NULL, 0, NULL);
	ok(rc == 0 && !strncmp(u.id, "02", 2), "an upload open in pool 1 (%s, %d)", u.id, rc);
	ok(ol_store_pool_set_draining(st, 1) == 0, "pool 1 draining");
	rc = ol_store_drain(st, 1, &(struct ol_drain_opts){.counting = complete_late, .arg = &u},
			    &pr);
	ok(rc == 0 && u.calls > 1 && u.rc == 0,
	   "drained; the upload completed during its first count pass (%d, %d calls, %d)", rc,
	   u.calls, u.rc);
	ok(get(st, "up", "late", buf, sizeof(buf)) == 0 && !strcmp(buf, "late bytes") &&
	       (set_of(st, "up", "late") == 0 || set_of(st, "up", "late") == 1),
	   "its object was moved to pool 0 before the drain ended (in set %d)",
	   set_of(st, "up", "late"));
	ol_store_close(st);
}

/* A call in flight when a count pass first finds the pool empty (a PUT begun then, committed
 * 1.5 s later): the drain ends only after it has (the complete whose commit is on too few
 * drives for either look to see it is such a call). */
struct in_flight {
	struct ol_store *st;
	int calls, rc;
	_Atomic int begun;
	uint64_t committed_ms;
	pthread_t th;
};

static void *
slow_put(void *arg)
{
	struct in_flight *f = arg;
	struct ol_put *pp = NULL;
	int rc = ol_store_put_begin(f->st, "up", "inflight", 8, 4, &pp);

	atomic_store(&f->begun, 1);
	if (!rc) {
		usleep(1500 * 1000);
		if ((rc = ol_store_put_write(pp, "slow", 4)))
			ol_store_put_abort(pp);
		else
			rc = ol_store_put_commit(pp, "e", NULL, 0, NULL);
	}
	f->committed_ms = ol_clock_ms();
	f->rc = rc;
	return NULL;
}

static void
begin_slow_put(void *arg)
{
	struct in_flight *f = arg;

	if (++f->calls != 2) /* the second count pass: the first found the key, moved since */
		return;
	pthread_create(&f->th, NULL, slow_put, f);
	while (!atomic_load(&f->begun))
		usleep(1000);
}

static void
test_drain_waits_for_calls_in_flight(void)
{
	struct ol_store *st;
	struct ol_drain_progress pr = {0};
	struct in_flight f = {0};
	char buf[64];
	uint64_t ended;
	int rc;

	if (two_pools("up", "in flight", &st))
		return;
	f.st = st;
	ok(put(st, "up", "q", "queued", 6, OL_STORE_VER_OFF, NULL) == 0 &&
	       set_of(st, "up", "q") == 2,
	   "a key in pool 1");
	ok(ol_store_pool_set_draining(st, 1) == 0, "pool 1 draining");
	rc = ol_store_drain(st, 1, &(struct ol_drain_opts){.counting = begin_slow_put, .arg = &f},
			    &pr);
	ended = ol_clock_ms();
	if (f.calls >= 2)
		pthread_join(f.th, NULL);
	ok(rc == 0 && f.calls >= 3 && f.rc == 0 && ended >= f.committed_ms,
	   "the drain ended after the PUT in flight at its first empty pass (%d, %d passes, "
	   "ended %lld ms after the commit)",
	   rc, f.calls, (long long)ended - (long long)f.committed_ms);
	ok(get(st, "up", "inflight", buf, sizeof(buf)) == 0 && !strcmp(buf, "slow") &&
	       get(st, "up", "q", buf, sizeof(buf)) == 0 && !strcmp(buf, "queued") &&
	       set_of(st, "up", "q") < 2,
	   "both keys read back from pool 0");
	ol_store_close(st);
}

/* A drain's leader killed in the middle of a key's move leaves copies of its older versions in
 * the new pool (same ids and mtimes). A DELETE of one of those versions by id must remove
 * every copy: one left behind would be the deleted version, back in listings and reads. */
static void
test_delete_version_in_two_pools(void)
{
	struct ol_store *st;
	struct ol_obj_info v1 = {0}, v2 = {0}, info;
	struct ol_import imp = {0};
	struct ol_put *pp;
	uint64_t h;
	char buf[64];
	int rc, d;

	if (two_pools("cw", "version copies", &st))
		return;
	rc = put(st, "cw", "k", "one", 3, OL_STORE_VER_ON, &v1);
	rc = rc ? rc : put(st, "cw", "k", "two", 3, OL_STORE_VER_ON, &v2);
	ok(rc == 0 && set_of(st, "cw", "k") == 2 && strcmp(v1.version_id, v2.version_id),
	   "two versions of k in pool 1 (%s, %s)", v1.version_id, v2.version_id);
	/* what the interrupted move left: version one copied into k's set of pool 0 */
	ol_store_set_pool_free(st, (uint64_t[2]){1ull << 30, 0}, 2);
	d = ol_sets_key_dest(st, "cw", "k", 1, &h);
	imp.mtime = v1.mtime_ns;
	rc = d == 0 || d == 1 ? ol_ver_parse(v1.version_id, &imp.mtime, imp.vid) : -EINVAL;
	imp.mtime = v1.mtime_ns;
	if (!rc)
		rc = ol_set_put_begin(st->sets[d], "cw", "k", 1, 3, &pp);
	if (!rc) {
		ol_store_put_set_vmode(pp, OL_STORE_VER_ON);
		ol_import_cur = &imp;
		if ((rc = ol_store_put_write(pp, "one", 3)))
			ol_store_put_abort(pp);
		else
			rc = ol_store_put_commit(pp, "etag", NULL, 0, NULL);
		ol_import_cur = NULL;
	}
	ok(rc == 0 &&
	       ol_set_head_ver(st->sets[d], "cw", "k", 1, v1.version_id, &info, NULL, 0) == 0,
	   "version one copied into set %d of pool 0 with its id (%d)", d, rc);
	{
		struct ol_viter *vi;
		const char *kk;
		size_t kl;
		char got[4][OL_STORE_VID_MAX];
		int n = 0;

		if (ol_store_viter_open(st, "cw", &vi) == 0) {
			while (n < 4 && ol_store_viter_next(vi, &kk, &kl, &info) == 1)
				snprintf(got[n++], sizeof(got[0]), "%s", info.version_id);
			ol_store_viter_close(vi);
		}
		ok(n == 2 && !strcmp(got[0], v2.version_id) && !strcmp(got[1], v1.version_id),
		   "the version listing shows each version once, newest first (%d)", n);
	}
	ok(ol_store_delete_ver(st, "cw", "k", 1, OL_STORE_VER_ON, v1.version_id, NULL) == 0,
	   "DELETE of version one by id");
	ok(ol_set_head_ver(st->sets[d], "cw", "k", 1, v1.version_id, &info, NULL, 0) == -ENOENT &&
	       ol_set_head_ver(st->sets[2], "cw", "k", 1, v1.version_id, &info, NULL, 0) ==
		   -ENOENT &&
	       ol_store_head_ver(st, "cw", "k", 1, v1.version_id, &info, NULL, 0) == -ENOENT,
	   "version one is gone from both pools (deleted from both pools)");
	ok(get(st, "cw", "k", buf, sizeof(buf)) == 0 && !strcmp(buf, "two"),
	   "version two is still the object");
	ol_store_close(st);
}

int
main(void)
{
	const char *tmp = getenv("TMPDIR");

	ol_log_threshold = getenv("OL_TEST_VERBOSE") ? OL_LOG_DEBUG : OL_LOG_ERROR - 1;
	snprintf(root, sizeof(root), "%s/ol_sets_XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		tap_skip_all("no temp dir");
	test_placement_and_listing();
	test_mpu_versions_repair();
	test_long_keys();
	test_delete_races_writers();
	test_set_count_fixed();
	test_pools();
	test_drain_home_pool();
	test_drain();
	test_drain_upload_completed_meanwhile();
	test_drain_waits_for_calls_in_flight();
	test_delete_version_in_two_pools();
	rm_rf(root);
	tap_done();
}
