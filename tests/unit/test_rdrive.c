/* test_rdrive.c - an erasure set over remote drives (store/rdrive.c, rset.c) (TAP): four real
 * node-plane servers in this process on loopback ports, each with its own temp drive (real
 * LMDB, real shard files), and ol_store_open_set N=4 P=1 over them. Buckets, inline and
 * multi-block objects byte-checked, overwrite, delete, listing, multipart, versioning; a
 * server stopped (reads and writes go on), started again (the drive comes back, on_return
 * fires, heal makes it whole: a read then needs its shards); and fencing: a handle with a
 * newer epoch commits, the older one's commit fails with -ESTALE. */
#include "base/config.h"
#include "base/log.h"
#include "io/io.h"
#include "meta/meta.h"
#include "node/node.h"
#include "store/store.h"
#include "store/store_int.h" /* a drive's why and state */
#include "tap.h"
#include "rdrive_env.h"

#include <errno.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <utime.h>
#include <unistd.h>

static void
test_basic(struct ol_store *st, uint8_t *big, uint8_t *small)
{
	struct ol_iter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	char keys[256] = "";
	int64_t created;

	ok(ol_store_bucket_create(st, "b1") == 0, "bucket created on remote drives");
	ok(ol_store_bucket_create(st, "b1") == -EEXIST, "twice: -EEXIST");
	ok(ol_store_bucket_stat(st, "b1", &created) == 0 && created > 0, "bucket stat");
	ok(put(st, "b1", "small", small, 1000, 0, NULL) == 0 &&
	       same(st, "b1", "small", NULL, small, 1000),
	   "small (inline) object round trip");
	ok(put(st, "b1", "big", big, BIG, 0, NULL) == 0 && same(st, "b1", "big", NULL, big, BIG),
	   "5 MiB object (multi-stripe) round trip, byte-exact");
	ok(put(st, "b1", "small", big + 7, 3000, 0, NULL) == 0 &&
	       same(st, "b1", "small", NULL, big + 7, 3000),
	   "overwrite reads the new bytes");
	ok(put(st, "b1", "k/a", small, 10, 0, NULL) == 0 &&
	       put(st, "b1", "k/b", small, 20, 0, NULL) == 0,
	   "two more keys");
	ok(ol_store_delete(st, "b1", "small", 5) == 0 &&
	       ol_store_head(st, "b1", "small", 5, &info, NULL, 0) == -ENOENT,
	   "delete: gone");
	ok(ol_store_iter_open(st, "b1", &it) == 0, "iterator");
	while (ol_store_iter_next(it, &k, &kl, &info) == 1)
		snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%.*s,", (int)kl, k);
	ol_store_iter_close(it);
	ok(!strcmp(keys, "big,k/a,k/b,"), "listing in order: %s", keys);
}

/* More keys than a META_SCAN page (256): listings and seeks read page after page. */
static void
test_many(struct ol_store *st, uint8_t *small)
{
	struct ol_iter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	char key[32], prev[32] = "";
	int rc = ol_store_bucket_create(st, "many"), n = 0, order = 1, first = -1;

	for (int i = 0; i < 300 && !rc; i++) {
		snprintf(key, sizeof(key), "key-%04d", (i * 7) % 300); /* not in key order */
		rc = put(st, "many", key, small, 16, 0, NULL);
	}
	ok(rc == 0, "300 objects (%d)", rc);
	ok(ol_store_iter_open(st, "many", &it) == 0, "iterator");
	while (ol_store_iter_next(it, &k, &kl, &info) == 1) {
		snprintf(key, sizeof(key), "%.*s", (int)kl, k);
		order &= strcmp(prev, key) < 0;
		memcpy(prev, key, sizeof(key));
		n++;
	}
	ok(n == 300 && order, "listing: %d keys in order (%d)", n, order);
	ok(ol_store_iter_seek(it, "key-0270", 8) == 0 &&
	       ol_store_iter_next(it, &k, &kl, &info) == 1,
	   "seek into the last page");
	first = kl == 8 && !memcmp(k, "key-0270", 8);
	n = 1;
	while (ol_store_iter_next(it, &k, &kl, &info) == 1)
		n++;
	ol_store_iter_close(it);
	ok(first && n == 30, "from key-0270: %d keys", n);
	ok(ol_store_bucket_delete(st, "many") == -ENOTEMPTY, "a bucket with objects stays");
}

static void
test_mpu(struct ol_store *st, uint8_t *big)
{
	char uid[64];
	struct ol_put *p;
	unsigned parts[2] = {1, 2};
	int rc = ol_store_mpu_create(st, "b1", "mp", 2, NULL, 0, uid);

	ok(rc == 0, "multipart upload created (%d)", rc);
	rc = ol_store_mpu_part_begin(st, "b1", uid, 1, &p);
	if (!rc)
		rc = ol_store_put_write(p, big, BIG - 1000);
	if (!rc)
		rc = ol_store_put_commit(p, "e1", NULL, 0, NULL);
	if (!rc)
		rc = ol_store_mpu_part_begin(st, "b1", uid, 2, &p);
	if (!rc)
		rc = ol_store_put_write(p, big + BIG - 1000, 1000);
	if (!rc)
		rc = ol_store_put_commit(p, "e2", NULL, 0, NULL);
	ok(rc == 0, "two parts uploaded (%d)", rc);
	rc = ol_store_mpu_complete(st, "b1", uid, parts, 2, "final", NULL);
	ok(rc == 0 && same(st, "b1", "mp", NULL, big, BIG), "complete: the object reads back (%d)",
	   rc);
}

static void
test_versions(struct ol_store *st, uint8_t *big, uint8_t *small)
{
	char v1[OL_STORE_VID_MAX], v2[OL_STORE_VID_MAX];
	struct ol_viter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	int n = 0;

	ok(ol_store_bucket_create(st, "vb") == 0, "versioned bucket");
	ok(put(st, "vb", "x", small, 500, OL_STORE_VER_ON, v1) == 0 &&
	       put(st, "vb", "x", big, 200000, OL_STORE_VER_ON, v2) == 0 && strcmp(v1, v2),
	   "two versions: %s %s", v1, v2);
	ok(same(st, "vb", "x", v1, small, 500) && same(st, "vb", "x", NULL, big, 200000),
	   "the old version by id, the new one current");
	ok(ol_store_viter_open(st, "vb", &it) == 0, "version iterator");
	while (ol_store_viter_next(it, &k, &kl, &info) == 1)
		n++;
	ol_store_viter_close(it);
	ok(n == 2, "two versions listed (%d)", n);
	/* removing the current version makes the next newest current (cursors inside the
	 * drives' write txns, over the txn's own puts and deletes) */
	ok(ol_store_delete_ver(st, "vb", "x", 1, OL_STORE_VER_ON, v2, &info) == 0 &&
	       same(st, "vb", "x", NULL, small, 500),
	   "version 2 removed: version 1 is current again");
	ok(ol_store_set_meta(st, "vb", "x", 1, NULL, "tags", 4) == 0 &&
	       ol_store_head(st, "vb", "x", 1, &info, (char[8]){0}, 8) == 0 && info.meta_len == 4,
	   "its metadata blob replaced in place");
	ok(ol_store_delete_ver(st, "vb", "x", 1, OL_STORE_VER_ON, NULL, &info) == 0 &&
	       info.delete_marker &&
	       ol_store_get_open(st, "vb", "x", 1, &(struct ol_get *){0}, &info) == -ENOENT,
	   "a delete marker hides it");
	ok(same(st, "vb", "x", v1, small, 500), "version 1 by id still reads");
}

/* ops left behind on any drive of the store so far (its drives' `hedged`) */
static uint64_t
hedges(struct ol_store *st)
{
	struct ol_store_drive_state ds;
	uint64_t n = 0;
	for (int i = 0; ol_store_drive_state(st, i, &ds) == 0; i++)
		n += ds.hedged;
	return n;
}

static void
test_down_and_back(struct ol_store *st, uint8_t *big)
{
	struct ol_heal_progress p = {0};
	uint64_t pend, drop, pend0, hedged;
	int rc;

	/* a write some drive took longer for than the hedge delay (200 ms, reached under a
	 * sanitizer on a loaded machine) is left behind and its miss recorded too: the misses
	 * before are counted (pend0), and node 4's two exactly unless a drive was left behind
	 * meanwhile (hedged; its op count is not a count of misses: one PUT may leave several
	 * ops of one drive behind) */
	ol_store_missed_stats(st, &pend0, &drop);
	hedged = hedges(st);
	ol_store_on_drive_return(st, on_return, NULL);
	srv_stop(3);
	ok(put(st, "b1", "while-down", big + 3, 2u << 20, 0, NULL) == 0,
	   "a 2 MiB PUT with one node down");
	ok(same(st, "b1", "big", NULL, big, BIG), "a GET with one node down (degraded)");
	ok(wait_online(st, N - 1), "the drive is offline (%d online)", ol_store_drives_online(st));
	ok(put(st, "b1", "while-down2", big + 5, 100, 0, NULL) == 0, "an inline PUT, still down");
	ol_store_missed_stats(st, &pend, &drop);
	hedged = hedges(st) - hedged;
	ok((hedged ? pend >= pend0 + 2 : pend == pend0 + 2) && drop == 0,
	   "both misses recorded on the remote drives (%llu pending, %llu before, %llu hedged)",
	   (unsigned long long)pend, (unsigned long long)pend0, (unsigned long long)hedged);
	pend0 = pend;
	ok(srv_start(3) == 0, "node 4 serves again");
	/* the monitor counts the drive online, then calls on_return: wait for both */
	int back = wait_online(st, N);
	for (time_t end = time(NULL) + 30; back && atomic_load(&returned) < 1 && time(NULL) < end;)
		usleep(20000);
	ok(back && atomic_load(&returned) >= 1, "the drive comes back and on_return fires (%d)",
	   atomic_load(&returned));
	/* a shard file no record references (a PUT whose writer died), an hour old */
	char orphan[700];
	snprintf(orphan, sizeof(orphan), "%s/.openlake/data/ab", dirs[2]);
	mkdir(orphan, 0700);
	snprintf(orphan, sizeof(orphan), "%s/.openlake/data/ab/ab%030d", dirs[2], 7);
	FILE *f = fopen(orphan, "w");
	ok(f && fputs("leftover", f) >= 0 && fclose(f) == 0 &&
	       utime(orphan, &(struct utimbuf){time(NULL) - 3600, time(NULL) - 3600}) == 0,
	   "an orphan shard on node 3");
	rc = ol_store_heal_all(st, NULL, &p);
	ok(rc == 0 && p.unrecoverable == 0 && p.shards_healed >= 1 && p.records_restored >= 2,
	   "heal: rc %d, %llu shards, %llu records restored, %llu unrecoverable", rc,
	   (unsigned long long)p.shards_healed, (unsigned long long)p.records_restored,
	   (unsigned long long)p.unrecoverable);
	ol_store_missed_stats(st, &pend, &drop);
	ok(p.missed_healed >= pend0 && pend == 0,
	   "the heal began with the %llu missed writes (%llu, %llu)", (unsigned long long)pend0,
	   (unsigned long long)p.missed_healed, (unsigned long long)pend);
	ok(access(orphan, F_OK) != 0, "heal swept the orphan over the plane (SHARD_LIST)");
	/* whole again: with another node down, what was written while node 4 was away reads
	 * from node 4's healed shards and records */
	srv_stop(0);
	ok(same(st, "b1", "while-down", NULL, big + 3, 2u << 20) &&
	       same(st, "b1", "while-down2", NULL, big + 5, 100),
	   "node 1 down: the objects node 4 missed read back from its healed copy");
	ok(srv_start(0) == 0 && wait_online(st, N), "node 1 back");
}

static int
count_name(void *arg, const char *dir, const char *name, uint64_t mtime)
{
	(void)dir;
	(void)name;
	(void)mtime;
	(*(size_t *)arg)++;
	return 0;
}

/* The periodic orphan sweep (ol_store_set_sweep): a shard file no record references and older
 * than the grace is removed within a few intervals, a younger one stays, the objects read
 * back, and the metric counts it. */
static void
test_periodic_sweep(struct ol_store *st, uint8_t *big)
{
	char dir[400], old[700], young[700];
	time_t then = time(NULL) - 3600;
	int gone = 0;

	snprintf(dir, sizeof(dir), "%s/.openlake/data/cd", dirs[1]);
	mkdir(dir, 0700);
	snprintf(old, sizeof(old), "%s/cd%030d", dir, 8);
	snprintf(young, sizeof(young), "%s/cd%030d", dir, 9);
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(i ? young : old, "w");

		ok(f && fputs("leftover", f) >= 0 && fclose(f) == 0,
		   "an orphan shard on node 2 (%s)", i ? "written now" : "an hour old");
	}
	ok(utime(old, &(struct utimbuf){then, then}) == 0, "its mtime an hour ago");
	/* every listing of a drive lists it whole, not only the first of its node's life */
	size_t once = 0, twice = 0;
	ok(ol_rd_list(st, 1, count_name, &once) == 0 &&
	       ol_rd_list(st, 1, count_name, &twice) == 0 && once >= 2 && twice == once,
	   "node 2's shard files listed twice over its plane: %zu, then %zu", once, twice);
	ol_store_set_sweep(st, 1, 600);
	for (time_t end = time(NULL) + 60; !gone && time(NULL) < end; usleep(50000))
		gone = access(old, F_OK) != 0;
	ok(gone, "the periodic sweep removed the hour-old orphan over the plane");
	ok(access(young, F_OK) == 0, "the orphan younger than the 600 s grace stays");
	ok(same(st, "b1", "big", NULL, big, BIG), "the objects read back after the sweeps");
	unlink(young);
}

/* A META_COMMIT from before the drive's return (a frame that sat in a frozen node's socket
 * buffers, sent with the generation the drive had then, or by a sender without one) lands
 * after the drive came back: the drive refuses it, and what was written since stays. */
static int late_commit_gen(const char *key, bool with_gen, uint64_t gen);

static int
late_commit(const char *key, bool with_gen)
{
	return late_commit_gen(key, with_gen, 1); /* the generation of an open long before */
}

static int
late_commit_gen(const char *key, bool with_gen, uint64_t gen)
{
	struct ol_node_client *c = NULL;
	uint8_t buf[128];
	struct ol_node_wr w = {buf, 0, sizeof(buf), false};
	size_t kl = 3 + strlen(key); /* "b1\0" key */
	char okey[64];
	const uint8_t *reply;
	size_t rlen;
	int rc = ol_node_client_new(addrs[3], SECRET, 99, &c);

	if (rc)
		return rc;
	snprintf(okey, sizeof(okey), "b1%c%s", 0, key);
	ol_node_put16(&w, 0);
	ol_node_put64(&w, 1); /* the set's epoch: the same */
	ol_node_putbytes(&w, &(uint8_t){OL_NODE_MC_SYNC | (with_gen ? OL_NODE_MC_GEN : 0)}, 1);
	if (with_gen)
		ol_node_put64(&w, gen);
	ol_node_put32(&w, 1);
	ol_node_putbytes(&w, (uint8_t[]){OL_NODE_ME_DEL, OL_META_OBJECTS}, 2);
	ol_node_put16(&w, (uint16_t)kl);
	ol_node_putbytes(&w, okey, kl);
	ol_node_put32(&w, 0);
	rc =
	    ol_node_call(c, OL_NODE_META_COMMIT, &(struct iovec){buf, w.n}, 1, 5000, &reply, &rlen);
	ol_node_client_free(c);
	return rc;
}

static void
test_late_frame(struct ol_store *st, uint8_t *big)
{
	int rc = late_commit("while-down2", true);

	ok(rc == -ESTALE, "a commit with the generation before the return is refused (%d)", rc);
	rc = late_commit("while-down2", false);
	ok(rc == -ESTALE, "a commit of the same epoch without a generation is refused (%d)", rc);
	ok(put(st, "b1", "after-late", big + 9, 100, 0, NULL) == 0,
	   "the leader's own commits still land");
	srv_stop(0);
	ok(same(st, "b1", "while-down2", NULL, big + 5, 100) &&
	       same(st, "b1", "after-late", NULL, big + 9, 100),
	   "node 1 down: node 4 still holds the record the late frame would have deleted");
	ok(srv_start(0) == 0 && wait_online(st, N), "node 1 back");
}

/* The fault hook's rules file (OPENLAKE_FAULT_FILE, set before any call). */
static char faults[512];

/* A commit to a drive whose META_COMMITs are slow is left behind once the other three took it
 * (the write quorum) and the hedge delay passed: the PUT succeeds, the drive stays online with
 * the miss recorded, and takes a new generation; the abandoned commit, arriving after a newer
 * one landed, is refused (-ESTALE), and the drive keeps the newer record. */
static void
test_hedged_commit(struct ol_store *st, uint8_t *small)
{
	struct ol_rdrive *rd = st->d[3].rd;
	uint64_t g0 = ol_rd_gen(rd), h0 = ol_rd_hedged(rd), pend = 0, drop = 0;
	struct ol_heal_progress p = {0};
	FILE *f = fopen(faults, "w");
	int rc;

	/* under the plane's 5 s deadline (a call past it fails and takes the drive out) */
	ok(f && fprintf(f, "delay META_COMMIT 4000 %s\n", addrs[3]) > 0 && fclose(f) == 0,
	   "node 4's META_COMMITs 4 s slow");
	rc = put(st, "b1", "hc", small, 100, 0, NULL);
	ok(rc == 0, "a PUT commits on the other three (%d)", rc);
	ok(ol_rd_hedged(rd) > h0, "its commit to node 4 was left behind");
	ok(ol_store_drives_online(st) == N, "node 4 stays online");
	ok(ol_rd_gen(rd) > g0, "node 4 took a new generation before its next commit");
	ol_store_missed_stats(st, &pend, &drop);
	ok(pend >= 1, "the miss is recorded (%llu pending)", (unsigned long long)pend);
	unlink(faults);
	ok(put(st, "b1", "hc", small + 7, 100, 0, NULL) == 0, "the key overwritten, node 4 fast");
	rc = late_commit_gen("hc", true, g0);
	ok(rc == -ESTALE, "the abandoned commit (its generation) arriving late is refused (%d)",
	   rc);
	srv_stop(0);
	ok(same(st, "b1", "hc", NULL, small + 7, 100),
	   "node 1 down: node 4 holds the newer record");
	ok(srv_start(0) == 0 && wait_online(st, N), "node 1 back");
	rc = ol_store_heal_all(st, NULL, &p);
	ok(rc == 0 && p.unrecoverable == 0, "heal: rc %d, %llu unrecoverable", rc,
	   (unsigned long long)p.unrecoverable);
	ol_store_missed_stats(st, &pend, &drop);
	ok(pend == 0, "no miss pending after the heal (%llu)", (unsigned long long)pend);
}

/* Three of four nodes gone (the leader's own drive is all it reaches, as across a partition):
 * a bucket or an object that fewer than k drives answered for is unknown, -EIO (S3 503),
 * never "no such bucket" or "no such key". */
static void
test_cut_off(struct ol_store *st, uint8_t *small)
{
	int64_t created;

	for (int i = 0; i < 3; i++)
		srv_stop(i);
	ok(ol_store_bucket_stat(st, "b1", &created) == -EIO, "bucket stat with 1 of 4: -EIO");
	ok(put(st, "b1", "cut", small, 100, 0, NULL) == -EIO, "a PUT with 1 of 4: -EIO");
	ok(ol_store_head(st, "b1", "big", 3, &(struct ol_obj_info){0}, NULL, 0) == -EIO,
	   "a HEAD of an existing object with 1 of 4: -EIO, not -ENOENT");
	ok(ol_store_head(st, "nope", "x", 1, &(struct ol_obj_info){0}, NULL, 0) == -EIO,
	   "a HEAD in a bucket that does not exist, 1 of 4: -EIO too (it cannot tell)");
	for (int i = 0; i < 3; i++)
		ok(srv_start(i) == 0, "node %d back", i + 1);
	ok(wait_online(st, N), "all drives online again (%d)", ol_store_drives_online(st));
	ok(ol_store_bucket_stat(st, "nope", &created) == -ENOENT, "with all 4: absent is -ENOENT");
}

static void
test_fencing(struct ol_store *st, uint8_t *small)
{
	struct ol_store *st2 = NULL;
	int rc = open_set(2, &st2);

	ok(rc == 0, "a second handle with epoch 2 (%d)", rc);
	if (rc)
		return;
	ok(ol_store_bucket_create(st2, "fenced") == 0, "epoch 2 commits");
	rc = put(st, "b1", "stale", small, 100, 0, NULL);
	ok(rc == -ESTALE, "epoch 1's commit is refused with -ESTALE (%d)", rc);
	ok(ol_store_head(st2, "b1", "stale", 5, &(struct ol_obj_info){0}, NULL, 0) == -ENOENT,
	   "and nothing of it is visible");
	ol_store_set_epoch(st, 1); /* never lowers */
	ol_store_set_epoch(st, 3);
	ok(put(st, "b1", "fresh", small, 100, 0, NULL) == 0 &&
	       same(st2, "b1", "fresh", NULL, small, 100),
	   "raised to epoch 3, it commits again (and the other handle reads it)");
	rc = ol_store_bucket_create(st2, "late");
	ok(rc == -ESTALE, "now epoch 2 is the stale one (%d)", rc);
	ol_store_close(st2);
}

/* A peer that accepts connections and never answers (a frozen node): its drive misses the
 * call deadline and is offline; the set opens on the other three and serves. */
static void
test_silent_peer(uint8_t *small)
{
	struct ol_store_drive_spec sp[N];
	char addr[64];
	int lfd = ol_io_listen("127.0.0.1:0", false, 16);
	struct ol_store *st = NULL;
	uint64_t t0;
	int rc;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(lfd));
	memcpy(sp, specs, sizeof(sp));
	sp[2].peer = addr;
	struct ol_store_set_opts o = {.n = N,
				      .drives = sp,
				      .secret = SECRET,
				      .self_id = 101,
				      .epoch = 5,
				      .deadline_ms = 1500};
	t0 = ol_io_now_ns();
	rc = ol_store_open_set(&cfg, &o, &st);
	ok(rc == 0 && ol_store_drives_online(st) == N - 1,
	   "a silent peer: its drive offline at open after the deadline (%d, %.1f s)", rc,
	   (double)(ol_io_now_ns() - t0) / 1e9);
	if (!rc) {
		ok(put(st, "b1", "silent", small, 300, 0, NULL) == 0 &&
		       same(st, "b1", "silent", NULL, small, 300),
		   "the other three serve");
		ol_store_close(st);
	}
	close(lfd);
}

/* Drive identity records over the plane: written on open, the uuid in HELLO; another store's
 * drive kept offline (the set runs degraded), a drive whose record changes while it runs taken
 * offline, both back once right; swapped drive specs refused. */
static int
open_ident(struct ol_store **out)
{
	struct ol_store_set_opts o = {.n = N,
				      .drives = specs,
				      .secret = SECRET,
				      .self_id = 100,
				      .epoch = 50,
				      .deadline_ms = 5000,
				      .store_id = "dep-1",
				      .sets = 1};

	return ol_store_open_set(&cfg, &o, out);
}

static int
wait_drive(struct ol_store *st, int d, bool want)
{
	for (time_t end = time(NULL) + 30; time(NULL) < end; usleep(20000))
		if ((atomic_load(&st->d[d].meta) != NULL) == want)
			return 1;
	return 0;
}

/* Nodes i and j restarted with their disks exchanged. */
static int
exchange_disks(int i, int j)
{
	char t[sizeof(dirs[0])];

	srv_stop(i);
	srv_stop(j);
	memcpy(t, dirs[i], sizeof(t));
	memcpy(dirs[i], dirs[j], sizeof(t));
	memcpy(dirs[j], t, sizeof(t));
	return srv_start(i) || srv_start(j);
}

static void
test_identity(uint8_t *small)
{
	struct ol_driveid f[N], g;
	struct ol_node_client *c = NULL;
	struct ol_node_peer_info pi;
	struct ol_store *st = NULL;
	char why[OL_WHY_MAX];
	int rc = open_ident(&st), all = 1;

	for (int i = 0; i < N; i++)
		all &= ol_driveid_read(dirs[i], &f[i]) == 0 && !strcmp(f[i].store, "dep-1") &&
		       f[i].index == (unsigned)i && f[i].set == 0 && f[i].drives == N;
	ok(rc == 0 && all, "a set opened with a store id: every drive got its record (%d)", rc);
	ok(ol_node_client_new(addrs[2], SECRET, 100, &c) == 0 && ol_node_hello(c, 5000, &pi) == 0 &&
	       pi.n_drives == 1 && !strcmp(pi.drives[0].uuid, f[2].drive),
	   "HELLO carries the drive's UUID");
	ol_node_client_free(c);
	/* drive 2's record says drive 1 while it runs: offline, the set serves, back when right */
	g = f[2];
	g.index = 1;
	ok(st && ol_driveid_write(dirs[2], &g) == 0 && wait_drive(st, 2, false),
	   "a drive whose record changed under it goes offline");
	why[0] = 0;
	if (st)
		ol_drive_why(st, 2, why, sizeof(why));
	ok(strstr(why, "another drive of this store") != NULL, "why: %s", why);
	ok(st && put(st, "b1", "ident1", small, 1000, 0, NULL) == 0 &&
	       same(st, "b1", "ident1", NULL, small, 1000),
	   "the set writes and reads with it offline");
	ok(st && ol_driveid_write(dirs[2], &f[2]) == 0 && wait_drive(st, 2, true),
	   "its own record back: online again");
	/* drive 1's record removed while it runs (as by a wipe): claimed again, a new UUID */
	{
		char p[400];
		int back = 0;

		snprintf(p, sizeof(p), "%s/%s", dirs[1], OL_DRIVEID_NAME);
		unlink(p);
		for (time_t end = time(NULL) + 30; time(NULL) < end && !back; usleep(50000))
			back = ol_driveid_read(dirs[1], &g) == 0;
		ok(back && g.index == 1 && strcmp(g.drive, f[1].drive) && st &&
		       atomic_load(&st->d[1].meta) != NULL,
		   "a record gone from an online drive is written again, with a fresh UUID");
	}
	/* nodes 2 and 3 restarted with their disks exchanged (as a node restarted with its
	 * disks in another order): a new connection finds another disk at the drive's index
	 * (HELLO's UUID) and no call goes to it, before the monitor has looked */
	{
		uint8_t u[16] = {7};
		int a, b;

		rc = exchange_disks(2, 3);
		a = st ? ol_rd_shard_open(st, 2, u, OL_RD_EXISTING) : 0;
		b = st ? ol_rd_shard_open(st, 3, u, OL_RD_EXISTING) : 0;
		ok(rc == 0 && a == -EXDEV && b == -EXDEV,
		   "disks exchanged under a restart: no call reaches them (%d, %d)", a, b);
		rc = exchange_disks(2, 3);
		ok(rc == 0 && st && wait_drive(st, 2, true) && wait_drive(st, 3, true) &&
		       ol_rd_shard_open(st, 2, u, OL_RD_EXISTING) == -ENOENT,
		   "the disks back in place: calls reach them again");
	}
	ol_store_close(st);
	st = NULL;
	/* another store's drive in slot 3: kept offline at open, the set opens degraded */
	g = f[3];
	snprintf(g.store, sizeof(g.store), "dep-other");
	rc = ol_driveid_write(dirs[3], &g);
	rc = rc ? rc : open_ident(&st);
	if (rc == 0)
		ol_drive_why(st, 3, why, sizeof(why));
	ok(rc == 0 && ol_store_drives_online(st) == N - 1 &&
	       strstr(why, "another store's disk") != NULL,
	   "another store's drive kept offline at open, the set runs degraded (%d)", rc);
	ok(st && put(st, "b1", "ident2", small, 2000, 0, NULL) == 0 &&
	       same(st, "b1", "ident2", NULL, small, 2000),
	   "and serves reads and writes");
	ok(st && ol_driveid_read(dirs[3], &g) == 0 && !strcmp(g.store, "dep-other"),
	   "the foreign drive's record is untouched");
	ok(st && ol_driveid_write(dirs[3], &f[3]) == 0 && wait_drive(st, 3, true),
	   "the right disk back: online");
	ol_store_close(st);
	st = NULL;
	/* drive specs 0 and 1 swapped: both refused, too few drives for a quorum */
	{
		struct ol_store_drive_spec t = specs[0];

		specs[0] = specs[1];
		specs[1] = t;
		rc = open_ident(&st);
		ok(rc == -EIO && ol_driveid_read(dirs[0], &g) == 0 && g.index == 0,
		   "swapped drive slots refused (%d), records untouched", rc);
		if (!rc)
			ol_store_close(st);
		specs[1] = specs[0];
		specs[0] = t;
	}
}

int
main(void)
{
	struct ol_store *st = NULL;
	uint8_t *big = malloc(BIG), *small = malloc(4096);
	int rc;

	ol_log_set_level("warn");
	snprintf(faults, sizeof(faults), "%s/ol-rdrive-faults-%d",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	setenv("OPENLAKE_FAULTS", "1", 1);
	setenv("OPENLAKE_FAULT_FILE", faults, 1);
	if (env_start("rdrive"))
		tap_skip_all("no temp dir");
	tap_fill(big, BIG, 1);
	tap_fill(small, 4096, 2);
	rc = open_set(1, &st);
	ok(rc == 0 && ol_store_drives_online(st) == N, "remote set N=4 P=1 open (%d)", rc);
	if (!rc) {
		test_basic(st, big, small);
		test_many(st, small);
		test_mpu(st, big);
		test_versions(st, big, small);
		test_down_and_back(st, big);
		test_periodic_sweep(st, big);
		test_late_frame(st, big);
		test_hedged_commit(st, small);
		test_cut_off(st, small);
		test_fencing(st, small);
		ol_store_close(st);
		test_silent_peer(small);
		test_identity(small);
	}
	env_stop();
	free(big);
	free(small);
	tap_done();
}
