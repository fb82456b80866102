/* tests/unit/test_undecided.c - a bucket's or an upload's check that cannot decide answers
 * -EIO (503, retried), never "does not exist" (-ENOENT / -ENXIO: NoSuchBucket, NoSuchUpload),
 * and writes or removes nothing on its strength; once the drive away is back the same call
 * succeeds. Real drives in a temp dir, 4 drives of k = 2: a record left on drives 2 and 3 only
 * (a commit that reached two of four, then removed from 0 and 1 here) with drive 2 away is
 * seen on one drive of the three that answer; with the one away that makes k, so the drives
 * that answered do not decide. (The PUT commit's case is in test_missed.c.) */
#include <errno.h>
#include <ftw.h>
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

#define NDRV  4
#define SMALL 1500
#define PART  (200 * 1024)
#define AWAY  2

static char root[256];
static struct ol_config cfg;
static uint8_t small[SMALL], part1[PART], part2[PART];

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	return remove(p);
}

/* Drive d's record k in db removed, as a commit left behind there. */
static int
del_rec(struct ol_store *st, int d, enum ol_meta_db db, const void *k, size_t kl)
{
	struct ol_meta_txn *t;
	int rc = ol_meta_begin(st->d[d].meta, true, &t);

	if (rc)
		return rc;
	rc = ol_meta_del(t, db, k, kl);
	if (rc) {
		ol_meta_abort(t);
		return rc;
	}
	return ol_meta_commit(t);
}

/* Drive d's bytes of record k in db, copied to buf (cap bytes): their length, 0 none, -1. */
static long
raw_rec(struct ol_store *st, int d, enum ol_meta_db db, const void *k, size_t kl, void *buf,
	size_t cap)
{
	struct ol_meta_txn *t;
	const void *v;
	size_t vl;
	long n = 0;

	if (!st->d[d].meta || ol_meta_begin(st->d[d].meta, false, &t))
		return -1;
	if (ol_meta_get(t, db, k, kl, &v, &vl) == 0) {
		n = vl <= cap ? (long)vl : -1;
		if (n > 0)
			memcpy(buf, v, vl);
	}
	ol_meta_abort(t);
	return n;
}

/* Drive AWAY of st goes away (its data dir renamed, a file in its place: neither the monitor nor a
 * reopen brings it back until back() below). */
static int
away(struct ol_store *st)
{
	char b[300];
	FILE *f;

	snprintf(b, sizeof(b), "%s.away", st->d[AWAY].root);
	if (rename(st->d[AWAY].root, b))
		return -errno;
	f = fopen(st->d[AWAY].root, "w");
	if (!f)
		return -errno;
	fclose(f);
	ol_drive_offline(st, AWAY, NULL, false, "test: taken away");
	return st->d[AWAY].meta ? -EIO : 0;
}

/* Its dir back; the monitor brings the drive online: waited for (60 s at most). */
static int
back(struct ol_store *st)
{
	char b[300];

	snprintf(b, sizeof(b), "%s.away", st->d[AWAY].root);
	unlink(st->d[AWAY].root);
	if (rename(b, st->d[AWAY].root))
		return -errno;
	for (int i = 0; i < 3000 && !st->d[AWAY].meta; i++)
		usleep(20000);
	return st->d[AWAY].meta ? 0 : -ETIMEDOUT;
}

/* Bucket b's record left on drives 2 and 3 only, drive 2 away: b undecided. */
static int
undecide_bucket(struct ol_store *st, const char *b)
{
	int rc = del_rec(st, 0, OL_META_BUCKETS, b, strlen(b));

	if (!rc)
		rc = del_rec(st, 1, OL_META_BUCKETS, b, strlen(b));
	return rc ? rc : away(st);
}

/* bucket b with object "o" (SMALL bytes) in it */
static int
bucket_with_obj(struct ol_store *st, const char *b)
{
	struct ol_put *p;
	int rc = ol_store_bucket_create(st, b);

	if (!rc)
		rc = ol_store_put_begin(st, b, "o", 1, SMALL, &p);
	if (rc)
		return rc;
	rc = ol_store_put_write(p, small, SMALL);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, "\"e\"", "m", 1, NULL);
}

/* object "o" of bucket b reads back as written: 1, else 0 or -errno */
static int
obj_intact(struct ol_store *st, const char *b)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t buf[SMALL];
	int rc = ol_store_get_open(st, b, "o", 1, &g, &info);
	ssize_t n;

	if (rc)
		return rc;
	n = ol_store_get_read(g, 0, buf, SMALL);
	ol_store_get_close(g);
	return n == SMALL && info.size == SMALL && !info.delete_marker &&
	       !memcmp(buf, small, SMALL);
}

static int
count_cb(const char *key, size_t key_len, const char *upload_id, int64_t init_ns, const void *meta,
	 size_t meta_len, void *arg)
{
	(void)key, (void)key_len, (void)upload_id, (void)init_ns;
	++*(int *)arg;
	return 0;
}

/* The calls that check a bucket first: each answers -EIO while the bucket is undecided,
 * leaves the stored object as it was, and succeeds once drive 2 is back. */
static void
test_bucket_calls(struct ol_store *st)
{
	struct ol_obj_info info;
	struct ol_iter *it = NULL;
	struct ol_viter *vit = NULL;
	char uid[64];
	int rc, n = 0;

	/* a delete marker (versioned delete) */
	ok(bucket_with_obj(st, "vd") == 0 && undecide_bucket(st, "vd") == 0, "vd undecided");
	rc = ol_store_delete_ver(st, "vd", "o", 1, OL_STORE_VER_ON, NULL, &info);
	ok(rc == -EIO, "a delete marker into an undecided bucket: -EIO, not -ENXIO (%d)", rc);
	ok(obj_intact(st, "vd") == 1, "vd/o intact: no marker made");
	ok(back(st) == 0, "drive 2 back");
	rc = ol_store_delete_ver(st, "vd", "o", 1, OL_STORE_VER_ON, NULL, &info);
	ok(rc == 0 && info.delete_marker, "then the marker is made (%d)", rc);

	/* a metadata replace (tagging) */
	ok(bucket_with_obj(st, "sm") == 0 && undecide_bucket(st, "sm") == 0, "sm undecided");
	rc = ol_store_set_meta(st, "sm", "o", 1, NULL, "new", 3);
	ok(rc == -EIO, "set_meta in an undecided bucket: -EIO, not -ENXIO (%d)", rc);
	ok(ol_store_head(st, "sm", "o", 1, &info, NULL, 0) == 0 && info.meta_len == 1,
	   "sm/o keeps its metadata");
	ok(back(st) == 0, "drive 2 back");
	rc = ol_store_set_meta(st, "sm", "o", 1, NULL, "new", 3);
	ok(rc == 0, "then set_meta writes (%d)", rc);

	/* a plain delete */
	ok(bucket_with_obj(st, "pd") == 0 && undecide_bucket(st, "pd") == 0, "pd undecided");
	rc = ol_store_delete(st, "pd", "o", 1);
	ok(rc == -EIO, "a delete in an undecided bucket: -EIO, not -ENXIO (%d)", rc);
	ok(obj_intact(st, "pd") == 1, "pd/o intact");
	ok(back(st) == 0, "drive 2 back");
	rc = ol_store_delete(st, "pd", "o", 1);
	ok(rc == 0, "then the delete removes it (%d)", rc);

	/* multipart create and list */
	ok(bucket_with_obj(st, "mc") == 0 && undecide_bucket(st, "mc") == 0, "mc undecided");
	rc = ol_store_mpu_create(st, "mc", "m", 1, NULL, 0, uid);
	ok(rc == -EIO, "an upload created in an undecided bucket: -EIO, not -ENOENT (%d)", rc);
	rc = ol_store_mpu_list(st, "mc", count_cb, &n);
	ok(rc == -EIO && n == 0, "its uploads listed: -EIO, not -ENOENT (%d)", rc);
	ok(back(st) == 0, "drive 2 back");
	rc = ol_store_mpu_create(st, "mc", "m", 1, NULL, 0, uid);
	ok(rc == 0, "then the upload is created (%d)", rc);
	rc = ol_store_mpu_list(st, "mc", count_cb, &n);
	ok(rc == 0 && n == 1, "and listed (%d, %d)", rc, n);

	/* listings */
	ok(bucket_with_obj(st, "ls") == 0 && undecide_bucket(st, "ls") == 0, "ls undecided");
	rc = ol_store_iter_open(st, "ls", &it);
	ok(rc == -EIO, "a listing of an undecided bucket: -EIO, not -ENOENT (%d)", rc);
	if (!rc)
		ol_store_iter_close(it);
	rc = ol_store_viter_open(st, "ls", &vit);
	ok(rc == -EIO, "a versions listing: -EIO, not -ENOENT (%d)", rc);
	if (!rc)
		ol_store_viter_close(vit);
	ok(back(st) == 0, "drive 2 back");
	it = NULL;
	rc = ol_store_iter_open(st, "ls", &it);
	if (!rc) {
		const char *k;
		size_t kl;

		rc = ol_store_iter_next(it, &k, &kl, &info);
		rc = rc == 1 && kl == 1 && k[0] == 'o' ? 0 : -1;
		ol_store_iter_close(it);
	}
	ok(rc == 0, "then it lists o (%d)", rc);
}

/* Bucket create and delete over an undecided check: neither writes, neither claims. */
static void
test_bucket_create_delete(struct ol_store *st)
{
	uint8_t before[512], after[512];
	long bl, al;
	int rc;

	ok(ol_store_bucket_create_attrs(st, "cr", "owner-a", 7) == 0, "cr made, owned by a");
	bl = raw_rec(st, 3, OL_META_BUCKETS, "cr", 2, before, sizeof(before));
	ok(bl > 0 && undecide_bucket(st, "cr") == 0, "cr undecided");
	rc = ol_store_bucket_create_attrs(st, "cr", "owner-b", 7);
	ok(rc == -EIO, "b's create of an undecided bucket: -EIO, not made again nor -EEXIST (%d)",
	   rc);
	al = raw_rec(st, 3, OL_META_BUCKETS, "cr", 2, after, sizeof(after));
	ok(al == bl && !memcmp(before, after, (size_t)bl), "cr's record on drive 3 untouched");
	ok(raw_rec(st, 0, OL_META_BUCKETS, "cr", 2, after, sizeof(after)) == 0,
	   "and none written on drive 0");
	ok(back(st) == 0, "drive 2 back");
	rc = ol_store_bucket_create_attrs(st, "cr", "owner-b", 7);
	ok(rc == -EEXIST, "then the create answers -EEXIST (%d)", rc);
	{
		void *attrs = NULL;
		size_t len = 0;

		rc = ol_store_bucket_attrs(st, "cr", &attrs, &len);
		ok(rc == 0 && len == 7 && !memcmp(attrs, "owner-a", 7), "cr still a's (%d)", rc);
		free(attrs);
	}

	ok(ol_store_bucket_create(st, "dl") == 0 && undecide_bucket(st, "dl") == 0,
	   "empty bucket dl undecided");
	rc = ol_store_bucket_delete(st, "dl");
	ok(rc == -EIO, "its delete: -EIO, not -ENOENT (%d)", rc);
	ok(raw_rec(st, 3, OL_META_BUCKETS, "dl", 2, after, sizeof(after)) > 0,
	   "dl's record on drive 3 not removed");
	ok(back(st) == 0, "drive 2 back");
	ok(raw_rec(st, AWAY, OL_META_BUCKETS, "dl", 2, after, sizeof(after)) > 0, "nor on drive 2");
	rc = ol_store_bucket_delete(st, "dl");
	ok(rc == 0 && ol_store_bucket_stat(st, "dl", NULL) == -ENOENT,
	   "then the delete removes it (%d)", rc);
}

/* one part of upload uid: begun (not committed) into *p */
static int
part_begin(struct ol_store *st, const char *uid, unsigned no, const uint8_t *d, struct ol_put **p)
{
	int rc = ol_store_mpu_part_begin(st, "up", uid, no, p);

	if (rc)
		return rc;
	rc = ol_store_put_write(*p, d, PART);
	if (rc)
		ol_store_put_abort(*p);
	return rc;
}

/* An upload whose record is undecided: every call on it answers -EIO (not NoSuchUpload), the
 * parts stay, and once drive 2 is back the upload completes with them. */
static void
test_upload(struct ol_store *st)
{
	char uid[64], uk[OL_KEYBUF], key[OL_STORE_MAX_KEY];
	struct ol_put *p = NULL, *p3 = NULL;
	struct ol_mpu_part *parts = NULL;
	struct ol_obj_info info;
	unsigned nos[2] = {1, 2};
	size_t np = 0, kl = sizeof(key), ml = 0, ul;
	int rc;

	ok(ol_store_bucket_create(st, "up") == 0 &&
	       ol_store_mpu_create(st, "up", "m", 1, NULL, 0, uid) == 0,
	   "an upload in bucket up");
	ok(part_begin(st, uid, 1, part1, &p) == 0 &&
	       ol_store_put_commit(p, "\"p1\"", NULL, 0, NULL) == 0,
	   "its part 1 stored");
	p = NULL;
	ok(part_begin(st, uid, 2, part2, &p) == 0, "its part 2 begun and written");
	ul = strlen("up") + 1 + 32;
	memcpy(uk, "up", 3);
	memcpy(uk + 3, uid, 32);
	ok(del_rec(st, 0, OL_META_UPLOADS, uk, ul) == 0 &&
	       del_rec(st, 1, OL_META_UPLOADS, uk, ul) == 0 && away(st) == 0,
	   "the upload's record gone from drives 0 and 1, drive 2 away");
	rc = p ? ol_store_put_commit(p, "\"p2\"", NULL, 0, NULL) : -1;
	ok(rc == -EIO, "part 2's commit: -EIO, not -ENOENT (%d)", rc);
	rc = ol_store_mpu_part_begin(st, "up", uid, 3, &p3);
	ok(rc == -EIO, "part 3's begin: -EIO, not -ENOENT (%d)", rc);
	if (!rc)
		ol_store_put_abort(p3);
	rc = ol_store_mpu_list_parts(st, "up", uid, &parts, &np);
	ok(rc == -EIO, "its parts listed: -EIO, not -ENOENT (%d)", rc);
	if (!rc)
		free(parts);
	rc = ol_store_mpu_stat(st, "up", uid, key, &kl, NULL, 0, &ml);
	ok(rc == -EIO, "its stat: -EIO, not -ENOENT (%d)", rc);
	rc = ol_store_mpu_complete(st, "up", uid, nos, 1, "\"c\"", &info);
	ok(rc == -EIO, "its complete: -EIO, not -ENOENT (%d)", rc);
	rc = ol_store_mpu_abort(st, "up", uid);
	ok(rc == -EIO, "its abort: -EIO, not -ENOENT (%d)", rc);
	ok(raw_rec(st, 3, OL_META_UPLOADS, uk, ul, key, sizeof(key)) > 0,
	   "the upload's record on drive 3 kept");
	ok(back(st) == 0, "drive 2 back");
	parts = NULL;
	np = 0;
	rc = ol_store_mpu_list_parts(st, "up", uid, &parts, &np);
	ok(rc == 0 && np == 1 && parts[0].part_no == 1, "then its part 1 is listed (%d, %zu)", rc,
	   np);
	free(parts);
	p = NULL;
	ok(part_begin(st, uid, 2, part2, &p) == 0 &&
	       ol_store_put_commit(p, "\"p2\"", NULL, 0, NULL) == 0,
	   "part 2 sent again commits");
	rc = ol_store_mpu_complete(st, "up", uid, nos, 2, "\"c-2\"", &info);
	ok(rc == 0 && info.size == 2 * PART, "the upload completes with both parts (%d)", rc);
	{
		struct ol_get *g;
		uint8_t *buf = malloc(2 * PART);
		ssize_t n = -1;

		if (buf && ol_store_get_open(st, "up", "m", 1, &g, &info) == 0) {
			n = ol_store_get_read(g, 0, buf, 2 * PART);
			ol_store_get_close(g);
		}
		ok(n == 2 * PART && !memcmp(buf, part1, PART) && !memcmp(buf + PART, part2, PART),
		   "the object reads back as its parts");
		free(buf);
	}
}

/* Two sets: a create whose set-0 check cannot decide writes no set. */
static void
test_sets_create(void)
{
	struct ol_config c2 = cfg;
	struct ol_store *st, *s0;
	uint8_t b[64];
	int rc;

	c2.n_data_dirs = 2 * NDRV;
	for (int i = 0; i < 2 * NDRV; i++)
		snprintf(c2.data_dirs[i], sizeof(c2.data_dirs[i]), "%s/s%d", root, i);
	ok(ol_store_open(&c2, &st) == 0 && st->n_sets == 2, "open a store of 2 sets");
	if (!st || st->n_sets != 2)
		return;
	s0 = st->sets[0];
	/* a bucket on drives 2 and 3 of set 0 only: made, then removed from the others */
	ok(ol_store_bucket_create(st, "two") == 0 &&
	       del_rec(s0, 0, OL_META_BUCKETS, "two", 3) == 0 &&
	       del_rec(s0, 1, OL_META_BUCKETS, "two", 3) == 0,
	   "bucket two on drives 2 and 3 of set 0");
	for (int d = 0; d < NDRV; d++)
		del_rec(st->sets[1], d, OL_META_BUCKETS, "two", 3);
	ok(away(s0) == 0, "drive 2 of set 0 away");
	rc = ol_store_bucket_create(st, "two");
	ok(rc == -EIO, "a create of two: -EIO (%d)", rc);
	ok(raw_rec(st->sets[1], 0, OL_META_BUCKETS, "two", 3, b, sizeof(b)) == 0,
	   "set 1 not given the bucket");
	ok(back(s0) == 0, "drive 2 back");
	rc = ol_store_bucket_create(st, "two");
	ok(rc == -EEXIST, "then the create answers -EEXIST (%d)", rc);
	ol_store_close(st);
}

int
main(void)
{
	const char *tmp = getenv("TMPDIR");
	struct ol_store *st = NULL;

	snprintf(root, sizeof(root), "%s/olundec.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		tap_skip_all("no temp dir");
	store_tap_cfg(&cfg, root, NDRV);
	tap_fill(small, SMALL, 2);
	tap_fill(part1, PART, 3);
	tap_fill(part2, PART, 4);
	ok(ol_store_open(&cfg, &st) == 0, "open a store of 4 drives (2 parity)");
	if (st) {
		test_bucket_calls(st);
		test_bucket_create_delete(st);
		test_upload(st);
		ol_store_close(st);
	}
	test_sets_create();
	nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	tap_done();
}
