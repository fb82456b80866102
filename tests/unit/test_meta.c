/* test_meta.c - the per-drive LMDB index: put/get/del, ordered range scans, persistence,
 * concurrent writers. TAP output. */
#include "meta/meta.h"
#include "meta/meta_int.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int n_test, n_fail;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_ = !!(cond);                                                                \
		n_test++;                                                                          \
		if (!ok_)                                                                          \
			n_fail++;                                                                  \
		printf("%s %d - ", ok_ ? "ok" : "not ok", n_test);                                 \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static char dir[256], path[300];

static void
put1(struct ol_meta *m, const char *k, size_t kl, const char *v)
{
	struct ol_meta_txn *t;

	if (ol_meta_begin(m, true, &t) || ol_meta_put(t, OL_META_OBJECTS, k, kl, v, strlen(v)) ||
	    ol_meta_commit(t))
		ok(0, "put %s", v);
}

static void
test_basic(struct ol_meta *m)
{
	struct ol_meta_txn *t;
	const void *v;
	size_t vl;

	put1(m, "b\0k1", 4, "one");
	ok(ol_meta_begin(m, false, &t) == 0, "read txn");
	ok(ol_meta_get(t, OL_META_OBJECTS, "b\0k1", 4, &v, &vl) == 0 && vl == 3 &&
	       !memcmp(v, "one", 3),
	   "get back");
	ok(ol_meta_get(t, OL_META_OBJECTS, "b\0k2", 4, &v, &vl) == -ENOENT, "missing = ENOENT");
	ok(ol_meta_get(t, OL_META_BUCKETS, "b\0k1", 4, &v, &vl) == -ENOENT, "dbs are separate");
	ol_meta_abort(t);
	ok(ol_meta_begin(m, true, &t) == 0, "write txn");
	ok(ol_meta_del(t, OL_META_OBJECTS, "b\0k1", 4) == 0, "del");
	ok(ol_meta_del(t, OL_META_OBJECTS, "b\0k1", 4) == -ENOENT, "del twice = ENOENT");
	ol_meta_abort(t);
	ok(ol_meta_begin(m, false, &t) == 0 &&
	       ol_meta_get(t, OL_META_OBJECTS, "b\0k1", 4, &v, &vl) == 0,
	   "aborted del leaves the record");
	ol_meta_abort(t);
}

static void
test_order(struct ol_meta *m)
{
	static const char *keys[] = {"p", "p/", "a//b", "../x", "\x01", "\xff", "a b", "%", "+"};
	struct ol_meta_txn *t;
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl, n = 0;
	int rc, sorted = 1;
	char prev[64] = "", cur[64];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char kb[64];
		size_t l = strlen(keys[i]);

		memcpy(kb, "zz\0", 3);
		memcpy(kb + 3, keys[i], l);
		put1(m, kb, 3 + l, keys[i]);
	}
	put1(m, "zy\0q", 4, "other bucket");
	ol_meta_begin(m, false, &t);
	ol_meta_cursor_open(t, OL_META_OBJECTS, &c);
	for (rc = ol_meta_cursor_seek(c, "zz\0", 3, &k, &kl, &v, &vl); rc == 1;
	     rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl)) {
		if (kl < 3 || memcmp(k, "zz\0", 3))
			break;
		memcpy(cur, (const char *)k + 3, kl - 3);
		cur[kl - 3] = 0;
		if (n && strcmp(prev, cur) >= 0)
			sorted = 0;
		memcpy(prev, cur, sizeof(prev));
		n++;
	}
	ok(n == 9 && sorted, "range scan gives all 9 keys in byte order (got %zu)", n);
	ol_meta_cursor_close(c);
	ol_meta_abort(t);
}

struct thr_arg {
	struct ol_meta *m;
	int id;
};

static void *
writer(void *arg)
{
	struct thr_arg *a = arg;

	for (int i = 0; i < 50; i++) {
		char k[32], v[32];
		int l = snprintf(k, sizeof(k), "t_%d-%03d", a->id, i);

		snprintf(v, sizeof(v), "%d", i);
		k[1] = 0;
		put1(a->m, k, (size_t)l, v);
	}
	return NULL;
}

static void
test_threads(struct ol_meta *m)
{
	pthread_t th[4];
	struct thr_arg a[4];
	struct ol_meta_txn *t;
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl, n = 0;

	for (int i = 0; i < 4; i++) {
		a[i] = (struct thr_arg){m, i};
		pthread_create(&th[i], NULL, writer, &a[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ol_meta_begin(m, false, &t);
	ol_meta_cursor_open(t, OL_META_OBJECTS, &c);
	for (int rc = ol_meta_cursor_seek(c, "t\0", 2, &k, &kl, &v, &vl);
	     rc == 1 && !memcmp(k, "t\0", 2); rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl))
		n++;
	ok(n == 200, "4 threads x 50 writes all present (%zu)", n);
	ol_meta_cursor_close(c);
	ol_meta_abort(t);
}

/* A faulted env is abandoned on purpose (LMDB's txn and cursor inside it are never freed):
 * not a leak to report under ASan. */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
	return "leak:liblmdb.so\n";
}

/* An env with enough records to span many pages. */
static void
make_env(const char *p)
{
	struct ol_meta *m;
	struct ol_meta_txn *t;
	char k[32], v[600];

	memset(v, 'v', sizeof(v));
	unlink(p);
	if (ol_meta_open(p, 1 << 26, true, &m) || ol_meta_begin(m, true, &t))
		return;
	for (int i = 0; i < 400; i++) {
		snprintf(k, sizeof(k), "key-%05d", i);
		ol_meta_put(t, OL_META_OBJECTS, k, strlen(k), v, sizeof(v));
	}
	ol_meta_commit(t);
	ol_meta_close(m);
}

static void
scribble(const char *p, off_t from, off_t len)
{
	int fd = open(p, O_WRONLY);
	char junk[4096];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	for (off_t o = from; o < from + len; o += (off_t)sizeof(junk))
		if (pwrite(fd, junk, sizeof(junk), o) != (ssize_t)sizeof(junk))
			break;
	close(fd);
}

/* A read of every record; returns the first error (or 0). */
static int
read_all(struct ol_meta *m)
{
	struct ol_meta_txn *t;
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl;
	int rc = ol_meta_begin(m, false, &t);

	if (rc)
		return rc;
	rc = ol_meta_cursor_open(t, OL_META_OBJECTS, &c);
	if (rc) {
		ol_meta_abort(t);
		return rc;
	}
	for (rc = ol_meta_cursor_seek(c, "", 0, &k, &kl, &v, &vl); rc == 1;
	     rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl))
		;
	ol_meta_cursor_close(c);
	ol_meta_abort(t);
	return rc < 0 ? rc : 0;
}

/* Damage never kills the process: a truncated or scribbled file is refused at open
 * (-EUCLEAN), and damage under an open env makes its calls fail with -EUCLEAN. */
static void
test_damage(void)
{
	char p[320];
	struct ol_meta *m;
	struct stat sb;
	int rc;

	snprintf(p, sizeof(p), "%s/dmg.mdb", dir);
	make_env(p);
	stat(p, &sb);
	ok(sb.st_size > 40 * 4096, "env of %lld bytes", (long long)sb.st_size);
	ok(truncate(p, sb.st_size / 2) == 0, "truncated to half");
	rc = ol_meta_open(p, 1 << 26, true, &m);
	ok(rc == -EUCLEAN, "truncated: open refused with -EUCLEAN, no SIGBUS (%d)", rc);

	make_env(p);
	scribble(p, 2 * 4096, sb.st_size - 2 * 4096);
	rc = ol_meta_open(p, 1 << 26, true, &m);
	ok(rc == -EUCLEAN, "pages overwritten: open refused with -EUCLEAN (%d)", rc);

	make_env(p);
	ok(ol_meta_open(p, 1 << 26, true, &m) == 0 && read_all(m) == 0, "a sound env reads");
	ok(truncate(p, 3 * 4096) == 0, "truncated under the open env");
	rc = read_all(m);
	ok(rc == -EUCLEAN && ol_meta_broken(m, NULL), "reads fail with -EUCLEAN (%d)", rc);
	ok(read_all(m) == -EUCLEAN, "and keep failing: the env is not touched again");
	ol_meta_close(m);
	/* a second fault in the same thread is caught too: the first jump left the signal
	 * unblocked (a blocked SIGBUS would kill the process here) */
	unlink(p);
	make_env(p);
	ok(ol_meta_open(p, 1 << 26, true, &m) == 0 && read_all(m) == 0, "a second env reads");
	ok(truncate(p, 3 * 4096) == 0, "truncated under the open env");
	rc = read_all(m);
	ok(rc == -EUCLEAN && ol_meta_broken(m, NULL), "a second fault: -EUCLEAN again (%d)", rc);
	ol_meta_close(m);
	unlink(p);
	snprintf(p, sizeof(p), "%s/dmg.mdb-lock", dir);
	unlink(p);
}

/* Read txns are kept reset in a pool and renewed (meta.c): a renewed txn must see the newest
 * commit, a thread may hold more read txns than the pool keeps, and reader slots are reused
 * (one leaked per txn would fill LMDB's 1024-slot table and fail the begins).
 *
 * What LMDB promises a read txn, pooled or not: every commit that returned before the txn
 * began. Not that one thread's txns see snapshots in order: a txn takes the published txn id
 * N, then copies the meta page N & 1, which a writer two (four, ...) commits on may already
 * have rewritten; the txn then reads that newer snapshot (its pages stay safe: its slot at N
 * keeps them), and the thread's next txn may read an older one. Measured under ASan with
 * commits back to back: txns with ids 215, 222 and 216 read the data of 217, 226 and 234,
 * always an even number of commits on (the same meta page), one run in 50-100. */
static long
read_pool_key(struct ol_meta_txn *t)
{
	const void *v;
	size_t vl;
	char b[32];

	if (ol_meta_get(t, OL_META_OBJECTS, "pool", 4, &v, &vl) || vl >= sizeof(b))
		return -1;
	memcpy(b, v, vl);
	b[vl] = 0;
	char *end;
	long n = strtol(b, &end, 10);
	return *end ? -1 : n;
}

static void
put_pool_key(struct ol_meta *m, long n)
{
	char v[32];

	snprintf(v, sizeof(v), "%ld", n);
	put1(m, "pool", 4, v);
}

/* the value of the last put_pool_key that returned (test_pool's writer) */
static _Atomic long pool_committed;

struct pool_arg {
	struct ol_meta *m;
	int bad, txns;
};

static void *
pool_reader(void *arg)
{
	struct pool_arg *a = arg;

	for (int i = 0; i < 4000 && !a->bad; i++) {
		struct ol_meta_txn *t[3];
		long floor[3];
		int n = 1 + i % 3, got = 0;

		for (int j = 0; j < n; j++) {
			floor[got] = atomic_load(&pool_committed);
			if (ol_meta_begin(a->m, false, &t[got]) == 0)
				got++;
		}
		if (got != n)
			a->bad = 1; /* a begin failed: reader slots ran out? */
		for (int j = 0; j < got; j++)
			if (read_pool_key(t[j]) < floor[j])
				a->bad = 2; /* a commit that returned before the begin is missing */
		for (int j = got; j-- > 0;)
			ol_meta_abort(t[j]);
		a->txns += got;
	}
	return NULL;
}

static void
test_pool(struct ol_meta *m)
{
	struct ol_meta_txn *t, *many[OL_META_POOL + 8];
	struct pool_arg a[8];
	pthread_t th[8];
	MDB_envinfo info;
	int got = 0, bad = 0, txns = 0;

	put_pool_key(m, 1);
	ok(ol_meta_begin(m, false, &t) == 0 && read_pool_key(t) == 1, "pool: first read");
	ol_meta_abort(t); /* into the pool */
	put_pool_key(m, 2);
	atomic_store(&pool_committed, 2);
	ok(ol_meta_begin(m, false, &t) == 0 && read_pool_key(t) == 2,
	   "pool: a renewed read txn sees the commit made after it was pooled");
	ol_meta_abort(t);
	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		got += ol_meta_begin(m, false, &many[i]) == 0;
	ok(got == (int)(sizeof(many) / sizeof(many[0])), "pool: %d read txns held at once", got);
	for (int i = 0; i < got; i++)
		ol_meta_abort(many[i]); /* the pool takes 16, the rest are freed */
	for (int i = 0; i < 8; i++) {
		a[i] = (struct pool_arg){m, 0, 0};
		pthread_create(&th[i], NULL, pool_reader, &a[i]);
	}
	for (long v = 3; v < 300; v++) {
		put_pool_key(m, v);
		atomic_store(&pool_committed, v);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		bad |= a[i].bad;
		txns += a[i].txns;
	}
	ok(bad == 0,
	   "pool: 8 threads, %d read txns beside 297 commits: every begin worked and "
	   "every txn saw each commit that had returned before it began (bad %d)",
	   txns, bad);
	mdb_env_info(m->env, &info);
	ok(info.me_numreaders <= 8 * 3 + OL_META_POOL + 2,
	   "pool: reader slots reused (%u in the table after %d txns)", info.me_numreaders, txns);
}

int
main(void)
{
	struct ol_meta *m;
	struct ol_meta_txn *t;
	const void *v;
	size_t vl;

	snprintf(dir, sizeof(dir), "%s/olmeta.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 77;
	snprintf(path, sizeof(path), "%s/meta.mdb", dir);
	ok(ol_meta_open(path, 1 << 26, true, &m) == 0, "open");
	test_basic(m);
	test_order(m);
	test_threads(m);
	test_pool(m);
	ol_meta_close(m);
	ok(ol_meta_open(path, 1 << 26, false, &m) == 0, "reopen");
	ok(ol_meta_begin(m, false, &t) == 0 &&
	       ol_meta_get(t, OL_META_OBJECTS, "zy\0q", 4, &v, &vl) == 0 && vl == 12,
	   "records survive reopen");
	ol_meta_abort(t);
	ol_meta_close(m);
	ok(ol_meta_open("/proc/nonexistent/x.mdb", 0, true, &m) < 0, "bad path fails cleanly");
	test_damage();
	unlink(path);
	snprintf(path, sizeof(path), "%s/meta.mdb-lock", dir);
	unlink(path);
	rmdir(dir);
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
