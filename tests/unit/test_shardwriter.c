/* test_shardwriter.c - a shard writer (a cluster follower writing PUTs and parts) beside its
 * leader (TAP): four real node-plane servers in this process (rdrive_env.h), a writable store
 * (the leader) and a shard writer (ol_store_set_opts.readonly + shards) over the same drives,
 * whose committer hands each commit request to the leader's ol_store_commit_remote, as the
 * daemon's node-plane call does. Objects of every shape written through the shard writer read
 * back bit-exact through the leader; the leader's versioning mode and conditions rule; a
 * failed commit unlinks the writer's shard files, an unknown outcome (-ETIMEDOUT) keeps them;
 * every other write of the shard writer is -EROFS; a request the leader cannot place is
 * -ESTALE; damaged requests (every truncation, random bytes changed) never commit wrongly and
 * never crash. */
#include "store/store_int.h" /* ol_creq_decode */
#include "tap.h"
#include "rdrive_env.h"

#include <dirent.h>
#include <errno.h>

#define STORE_ID "dep-sw"
#define EPOCH	 9

static struct ol_store *leader;
static int vmode_forced;  /* the leader's versioning mode for the bucket */
static int fail_with;	  /* != 0: the committer answers this instead of calling the leader */
static uint8_t *last_req; /* the last request the committer carried */
static size_t last_len;
static _Atomic int commits;

static int
committer(void *arg, const void *req, size_t len, struct ol_obj_info *out)
{
	(void)arg;
	free(last_req);
	last_req = malloc(len);
	memcpy(last_req, req, len);
	last_len = len;
	atomic_fetch_add(&commits, 1);
	if (fail_with)
		return fail_with;
	return ol_store_commit_remote(leader, req, len, vmode_forced, out);
}

static int
open_store(bool shards, struct ol_store **out)
{
	struct ol_store_set_opts o = {.n = N,
				      .drives = specs,
				      .secret = SECRET,
				      .self_id = shards ? 300 : 100,
				      .epoch = shards ? 0 : EPOCH,
				      .deadline_ms = 5000,
				      .store_id = STORE_ID,
				      .sets = 1,
				      .readonly = shards,
				      .shards = shards};

	return ol_store_open_set(&cfg, &o, out);
}

/* shard files on every drive: <root>/<drive>/.openlake/data/<xx>/<uuid> */
static int
count_in(const char *dir, int depth)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (dh && (e = readdir(dh))) {
		char sub[900];

		if (e->d_name[0] == '.' && (depth != 1 || strcmp(e->d_name, ".openlake")))
			continue;
		if (depth == 4) {
			n++;
			continue;
		}
		if (depth == 2 && strcmp(e->d_name, "data"))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		n += count_in(sub, depth + 1);
	}
	if (dh)
		closedir(dh);
	return n;
}

static int
count_shards(void)
{
	return count_in(root, 0);
}

static void
test_shapes(struct ol_store *sw, const uint8_t *big)
{
	static const size_t sizes[] = {0, 1, 100, 128 * 1024, 128 * 1024 + 1, 3u << 20, BIG};
	char vid[OL_STORE_VID_MAX];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char k[32];
		int before = atomic_load(&commits), rc;

		snprintf(k, sizeof(k), "shape-%zu", sizes[i]);
		rc = put(sw, "b", k, big, sizes[i], 0, vid);
		ok(rc == 0 && atomic_load(&commits) == before + 1 &&
		       same(leader, "b", k, NULL, big, sizes[i]),
		   "%zu bytes through the shard writer: one commit, the leader reads them (%d)",
		   sizes[i], rc);
	}
	/* the writer's reads see its own writes (it reads the drives) */
	snprintf(vid, sizeof(vid), "shape-%u", BIG);
	ok(same(sw, "b", vid, NULL, big, BIG), "the shard writer reads back what it wrote");
	/* an overwrite: the new bytes, through both */
	ok(put(sw, "b", "shape-100", big + 7, 100, 0, NULL) == 0 &&
	       same(leader, "b", "shape-100", NULL, big + 7, 100),
	   "an overwrite through the shard writer replaces the version");
	/* a commit that cannot carry the inline shards: the object goes to shard files */
	int files = count_shards(), files2;
	ol_store_set_commit_max(sw, 4096);
	int rc = put(sw, "b", "no-room", big, 100000, 0, NULL);
	files2 = count_shards();
	ol_store_set_commit_max(sw, 0);
	ok(rc == 0 && files2 == files + N && same(leader, "b", "no-room", NULL, big, 100000),
	   "100000 bytes with a 4 KiB commit limit: in N shard files, not inline (%d, %d)", rc,
	   files2 - files);
	files = count_shards();
	rc = put(sw, "b", "room", big, 100000, 0, NULL);
	ok(rc == 0 && count_shards() == files && same(leader, "b", "room", NULL, big, 100000),
	   "without the limit: inline, no file (%d)", rc);
}

static void
test_leader_rules(struct ol_store *sw, const uint8_t *big)
{
	char v1[OL_STORE_VID_MAX], v2[OL_STORE_VID_MAX];
	struct ol_put *p;
	struct ol_store_cond c = {.if_none_match = 1};
	int files, rc;

	/* the writer says OFF, the leader's bucket is versioned: the leader's mode holds */
	vmode_forced = OL_STORE_VER_ON;
	rc = put(sw, "b", "ver", big, 1000, 0, v1);
	rc = rc ? rc : put(sw, "b", "ver", big + 1, 300000, 0, v2);
	vmode_forced = OL_STORE_VER_OFF;
	ok(rc == 0 && strcmp(v1, "null") != 0 && strcmp(v1, v2) != 0 &&
	       same(leader, "b", "ver", v1, big, 1000) &&
	       same(leader, "b", "ver", v2, big + 1, 300000),
	   "the leader's versioning mode: two versions kept (%s, %s, %d)", v1, v2, rc);
	/* If-None-Match on a key that exists: the leader refuses, the files go */
	files = count_shards();
	rc = ol_store_put_begin(sw, "b", "shape-3145728", 13, -1, &p);
	if (!rc) {
		ol_store_put_set_cond(p, &c);
		rc = ol_store_put_write(p, big, 2u << 20);
		rc = rc ? rc : ol_store_put_commit(p, "e", NULL, 0, NULL);
	}
	ok(rc == -ECANCELED && count_shards() == files &&
	       same(leader, "b", "shape-3145728", NULL, big, 3u << 20),
	   "If-None-Match: * on a key that exists: -ECANCELED, no file left, the old bytes (%d)",
	   rc);
	/* no such bucket on the leader: -ENOENT */
	ok(ol_store_bucket_create(leader, "gone") == 0, "bucket gone made");
	rc = ol_store_put_begin(sw, "gone", "k", 1, -1, &p);
	ok(rc == 0 && ol_store_bucket_delete(leader, "gone") == 0,
	   "a put begun on the shard writer, then the bucket deleted on the leader (%d)", rc);
	if (!rc) {
		rc = ol_store_put_write(p, big, 2u << 20);
		rc = rc ? rc : ol_store_put_commit(p, "e", NULL, 0, NULL);
		ok(rc == -ENOENT && count_shards() == files,
		   "its commit: -ENOENT, its files unlinked (%d)", rc);
	}
}

/* A drive offline when the writer began: the leader lacking it too takes the commit (its miss
 * recorded); the leader having it online refuses it, -EAGAIN, nothing committed (the writer's
 * view was behind: the object would have fewer shards than the leader writes). */
static void
test_absent(struct ol_store *sw, const uint8_t *big)
{
	struct ol_creq q;
	struct ol_obj_info in;
	uint64_t pend0, pend1, drop;
	int rc;

	srv_stop(2);
	ok(wait_online(sw, N - 1) && wait_online(leader, N - 1),
	   "node 3 down: the writer and the leader see 3 drives");
	fail_with = -EIO; /* the request only */
	(void)put(sw, "b", "absent-late", big, 2u << 20, 0, NULL);
	fail_with = 0;
	uint8_t *req = malloc(last_len);
	size_t len = last_len;
	memcpy(req, last_req, len);
	ok(ol_creq_decode(req, len, &q) == 0 && (q.flags & OL_CREQ_ABSENT) && q.absent == 4 &&
	       (q.bad & 4),
	   "the request names drive 3 absent from the start (flags %u, absent %llu)", q.flags,
	   (unsigned long long)q.absent);
	ol_store_missed_stats(leader, &pend0, &drop);
	rc = put(sw, "b", "absent-now", big + 1, 2u << 20, 0, NULL);
	ol_store_missed_stats(leader, &pend1, &drop);
	ok(rc == 0 && same(leader, "b", "absent-now", NULL, big + 1, 2u << 20) &&
	       pend1 == pend0 + 1,
	   "the leader lacks drive 3 too: committed, read back, its miss recorded (%d)", rc);
	ok(srv_start(2) == 0 && wait_online(leader, N), "node 3 back: the leader has 4 drives");
	rc = ol_store_commit_remote(leader, req, len, 0, &in);
	ok(rc == -EAGAIN && ol_store_head(leader, "b", "absent-late", 11, &in, NULL, 0) == -ENOENT,
	   "a commit that skipped drive 3, online on the leader: -EAGAIN, nothing committed (%d)",
	   rc);
	ok(wait_online(sw, N), "the writer has 4 drives again");
	free(req);
}

static void
test_outcomes(struct ol_store *sw, const uint8_t *big)
{
	int files = count_shards(), rc;
	struct ol_obj_info in;

	fail_with = -EIO;
	rc = put(sw, "b", "failed", big, 2u << 20, 0, NULL);
	ok(rc == -EIO && count_shards() == files,
	   "a commit the leader failed: the error, the files unlinked (%d)", rc);
	fail_with = -ETIMEDOUT;
	rc = put(sw, "b", "unknown", big, 2u << 20, 0, NULL);
	ok(rc == -ETIMEDOUT && count_shards() == files + N &&
	       ol_store_head(leader, "b", "unknown", 7, &in, NULL, 0) == -ENOENT,
	   "an unknown outcome: -ETIMEDOUT, the N files kept for the leader's sweep (%d, %d)", rc,
	   count_shards() - files);
	/* the request that was lost: the leader commits it late, and the files serve it */
	fail_with = 0;
	rc = ol_store_commit_remote(leader, last_req, last_len, 0, &in);
	ok(rc == 0 && same(leader, "b", "unknown", NULL, big, 2u << 20),
	   "the lost request committed late reads back from the kept files (%d)", rc);
	/* a drive the writer failed while the leader has it: the miss is recorded and the
	 * leader's heal of missed writes is started (no return of the drive would start it) */
	uint64_t pend0, pend1, drop;
	fail_with = -EIO; /* the request only (its files go) */
	(void)put(sw, "b", "missed", big, 2u << 20, 0, NULL);
	fail_with = 0;
	ol_store_missed_stats(leader, &pend0, &drop);
	ol_store_on_drive_return(leader, on_return, NULL);
	returned = 0;
	last_req[last_len - 12] |= 4; /* the bad-drive mask (no inline shards): drive 2 */
	rc = ol_store_commit_remote(leader, last_req, last_len, 0, &in);
	ol_store_missed_stats(leader, &pend1, &drop);
	ol_store_on_drive_return(leader, NULL, NULL);
	ok(rc == 0 && pend1 == pend0 + 1 && atomic_load(&returned) == 1,
	   "a drive the writer failed: its miss recorded (%llu -> %llu), the heal started (%d)",
	   (unsigned long long)pend0, (unsigned long long)pend1, atomic_load(&returned));
	test_absent(sw, big);
	ol_store_set_committer(sw, NULL, NULL);
	rc = put(sw, "b", "nocommitter", big, 100, 0, NULL);
	ok(rc == -EROFS, "no committer: -EROFS (%d)", rc);
	ol_store_set_committer(sw, committer, NULL);
}

static void
test_parts(struct ol_store *sw, const uint8_t *big)
{
	char id[64];
	unsigned nos[3] = {1, 2, 3};
	static const size_t lens[3] = {5u << 20, 1000, 0}; /* a zero-byte part has empty files */
	struct ol_put *p;
	struct ol_obj_info in;
	int rc = ol_store_mpu_create(leader, "b", "mp", 2, NULL, 0, id);

	for (unsigned i = 0; !rc && i < 3; i++) {
		rc = ol_store_mpu_part_begin(sw, "b", id, nos[i], &p);
		rc = rc || !lens[i] ? rc : ol_store_put_write(p, big + i * (5u << 20), lens[i]);
		rc = rc ? rc : ol_store_put_commit(p, "e", NULL, 0, NULL);
	}
	rc = rc ? rc : ol_store_mpu_complete(leader, "b", id, nos, 3, "final-3", &in);
	ok(rc == 0 && same(leader, "b", "mp", NULL, big, (5u << 20) + 1000) &&
	       same(sw, "b", "mp", NULL, big, (5u << 20) + 1000),
	   "multipart: parts through the shard writer, completed on the leader, bit-exact (%d)",
	   rc);
	rc = ol_store_mpu_part_begin(sw, "b", "00ffffffffffffffffffffffffffffff", 1, &p);
	ok(rc == -ENOENT, "a part of an upload that does not exist: -ENOENT at begin (%d)", rc);
}

static void
test_refusals(struct ol_store *sw, const uint8_t *big)
{
	char id[64];
	struct ol_creq q;
	struct ol_obj_info in;
	uint8_t *req;
	size_t len;
	int rc, bad = 0, wrong = 0;

	ok(ol_store_delete(sw, "b", "shape-1", 7) == -EROFS &&
	       ol_store_bucket_create(sw, "nb") == -EROFS &&
	       ol_store_mpu_create(sw, "b", "x", 1, NULL, 0, id) == -EROFS,
	   "delete, bucket create and multipart create on the shard writer: -EROFS");
	ok(ol_store_commit_remote(sw, last_req, last_len, 0, &in) == -EROFS,
	   "a shard writer commits no request itself: -EROFS");
	/* a request naming another deployment's set: -ESTALE */
	fail_with = -EIO; /* capture the request only */
	(void)put(sw, "b", "capture", big, 50, 0, NULL);
	fail_with = 0;
	req = malloc(last_len);
	len = last_len;
	memcpy(req, last_req, len);
	ok(ol_creq_decode(req, len, &q) == 0 && q.store_len == strlen(STORE_ID),
	   "the captured request decodes");
	req[(size_t)(q.store - req)] ^= 1;
	rc = ol_store_commit_remote(leader, req, len, 0, &in);
	req[(size_t)(q.store - req)] ^= 1;
	ok(rc == -ESTALE, "a request for another store's set: -ESTALE (%d)", rc);
	/* every truncation: -EBADMSG */
	for (size_t n = 0; n < len; n++)
		bad += ol_store_commit_remote(leader, req, n, 0, &in) == -EBADMSG;
	ok(bad == (int)len, "every truncation of the request is -EBADMSG (%d of %zu)", bad, len);
	/* random bytes changed: never a crash; what commits is a well-formed request */
	srand(42);
	for (int i = 0; i < 3000; i++) {
		uint8_t *m = malloc(len);
		int flips = 1 + rand() % 3;

		memcpy(m, req, len);
		for (int f = 0; f < flips; f++)
			m[(size_t)rand() % len] = (uint8_t)rand();
		rc = ol_store_commit_remote(leader, m, len, 0, &in);
		wrong += rc == 0 && ol_creq_decode(m, len, &q) != 0;
		free(m);
	}
	ok(wrong == 0, "3000 damaged requests: none committed that does not decode");
	free(req);
}

/* Two pools of one set each, pool p on drive p of every node (the servers restarted with two
 * fresh drives each): where a key goes is the leader's to say. */
static struct ol_store *
open_pools(bool shards)
{
	struct ol_store *pools[2] = {NULL, NULL}, *st = NULL;
	struct ol_store_drive_spec sp[2][N];
	int rc = 0;

	for (int p = 0; p < 2 && !rc; p++) {
		for (int i = 0; i < N; i++)
			sp[p][i] =
			    (struct ol_store_drive_spec){addrs[i], (unsigned)p, (unsigned)i + 1};
		struct ol_store_set_opts o = {.n = N,
					      .drives = sp[p],
					      .secret = SECRET,
					      .self_id = shards ? 300 : 100,
					      .epoch = shards ? 0 : EPOCH,
					      .deadline_ms = 5000,
					      .store_id = "dep-pools",
					      .pool = (unsigned)p,
					      .sets = 1,
					      .readonly = shards,
					      .shards = shards};
		rc = ol_store_open_set(&cfg, &o, &pools[p]);
	}
	if (rc) {
		ol_store_close(pools[0]);
		return NULL;
	}
	return ol_store_pools(pools, 2, "dep-pools", &st) ? NULL : st;
}

static void
test_pools(const uint8_t *big)
{
	static char pd[2][N][300];
	struct ol_store *sw, *was = leader;
	uint64_t sw_free[2] = {1u << 30, 0}, l_free[2] = {0, 1u << 30};
	uint8_t *req = NULL;
	size_t len = 0;
	struct ol_obj_info in;
	int rc, good = 0, files;

	for (int i = 0; i < N; i++) {
		const char *drives[2];

		srv_stop(i);
		for (int p = 0; p < 2; p++) {
			snprintf(pd[p][i], sizeof(pd[p][i]), "%s/pool%d-node%d", root, p, i);
			mkdir(pd[p][i], 0700);
			drives[p] = pd[p][i];
		}
		struct ol_node_server_opts o = {.addr = addrs[i],
						.secret = SECRET,
						.self_id = (unsigned)i + 1,
						.threads = 1,
						.window = 8u << 20,
						.max_payload = 1u << 20,
						.n_drives = 2,
						.drives = drives};
		rc = ol_node_server_start(&o, &srv[i]);
		ok(rc == 0, "node %d serves two drives (%d)", i + 1, rc);
	}
	leader = open_pools(false);
	ok(leader && ol_store_bucket_create(leader, "b") == 0, "a leader of two pools");
	sw = leader ? open_pools(true) : NULL;
	ok(sw != NULL, "a shard writer of the two pools");
	if (!sw) {
		ol_store_close(leader);
		leader = was;
		return;
	}
	ol_store_set_committer(sw, committer, NULL);
	for (int i = 0; i < 12; i++) {
		char k[16];

		snprintf(k, sizeof(k), "pk-%d", i);
		good += put(sw, "b", k, big + i, 200000, 0, NULL) == 0 &&
			same(leader, "b", k, NULL, big + i, 200000);
	}
	ok(good == 12, "12 keys through the shard writer over two pools read back (%d)", good);
	/* a bucket pool 1 lacks (made before the pool joined): the writer writes there anyway,
	 * the leader gives the set the bucket at the commit */
	uint64_t only1[2] = {0, 1u << 30};
	ok(ol_set_bucket_create_attrs(leader->sets[0], "late", NULL, 0) == 0 &&
	       ol_set_bucket_stat(leader->sets[1], "late", NULL) == -ENOENT,
	   "bucket late on pool 0 only");
	ol_store_set_pool_free(sw, only1, 2);
	rc = put(sw, "late", "k1", big, 400000, 0, NULL);
	ok(rc == 0 && same(leader, "late", "k1", NULL, big, 400000) &&
	       ol_set_bucket_stat(leader->sets[1], "late", NULL) == 0,
	   "a put into pool 1 of bucket late: committed, pool 1 given the bucket (%d)", rc);
	/* the writer weighs pool 0 only, the leader pool 1 only: a new key is taken where the
	 * writer put it, a key the leader holds elsewhere is not */
	ol_store_set_pool_free(sw, sw_free, 2);
	ol_store_set_pool_free(leader, l_free, 2);
	rc = put(sw, "b", "new-key", big, 1000, 0, NULL);
	ok(rc == 0 && same(leader, "b", "new-key", NULL, big, 1000),
	   "a new key in the pool the writer chose (%d)", rc);
	fail_with = -EIO; /* the request only */
	(void)put(sw, "b", "moved", big, 1000, 0, NULL);
	fail_with = 0;
	req = malloc(last_len);
	len = last_len;
	memcpy(req, last_req, len);
	rc = put(leader, "b", "moved", big + 5, 1000, 0, NULL);
	ok(rc == 0, "the leader writes the key to the other pool (%d)", rc);
	rc = ol_store_commit_remote(leader, req, len, 0, &in);
	ok(rc == -ESTALE && same(leader, "b", "moved", NULL, big + 5, 1000),
	   "the writer's commit of a key another pool holds: -ESTALE, the key unchanged (%d)", rc);
	free(req);
	/* a pool draining takes no new version */
	files = count_shards();
	ok(ol_store_pool_set_draining(leader, 0) == 0, "pool 0 drains on the leader");
	rc = put(sw, "b", "into-drain", big, 300000, 0, NULL);
	ok(rc == -ESTALE && count_shards() == files,
	   "a commit into the draining pool: -ESTALE, the files unlinked (%d)", rc);
	(void)ol_store_pool_set_draining(leader, -1);
	ol_store_close(sw);
	ol_store_close(leader);
	leader = was;
}

int
main(void)
{
	struct ol_store *sw = NULL;
	uint8_t *big = malloc(2 * BIG);
	int rc;

	ol_log_set_level("error");
	if (env_start("shardwriter"))
		tap_skip_all("no temp dir");
	tap_fill(big, 2 * BIG, 21);
	rc = open_store(false, &leader);
	ok(rc == 0 && ol_store_bucket_create(leader, "b") == 0,
	   "the leader opens, bucket made (%d)", rc);
	rc = rc ? rc : open_store(true, &sw);
	ok(rc == 0 && ol_store_readonly(sw), "a shard writer opens beside it (%d)", rc);
	if (!rc) {
		ol_store_set_committer(sw, committer, NULL);
		test_shapes(sw, big);
		test_leader_rules(sw, big);
		test_outcomes(sw, big);
		test_parts(sw, big);
		test_refusals(sw, big);
	}
	ol_store_close(sw);
	ol_store_close(leader);
	leader = NULL;
	if (!rc)
		test_pools(big);
	env_stop();
	free(big);
	free(last_req);
	tap_done();
}
