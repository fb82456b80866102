/* meta/meta.c - LMDB environment per drive. */
#include "meta/meta.h"
#include "meta/meta_int.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/log.h"

static const char *const db_names[OL_META_NALL] = {"buckets",  "objects", "uploads", "parts",
						   "versions", "fence",	  "missed"};

/* Faults. LMDB reads its file through a read-only shared map: a truncated file makes a read
 * past its end SIGBUS, and damaged pages can make LMDB follow wild offsets (SIGSEGV) or fail
 * one of its assertions (abort). Every LMDB call runs under a per-thread guard: a fault or an
 * assertion while it is armed jumps back to the call, which marks the env broken and returns
 * -EUCLEAN; the env is never used again. A SIGBUS/SIGSEGV with no guard armed but inside a
 * registered map (a caller decoding a value it got from us) has the page replaced by zeros,
 * marks that env broken and carries on: the zeros fail the caller's record checksum. Any
 * other fault goes to the previous handler (the default: a core dump). */
struct guard {
	sigjmp_buf jb;
	struct ol_meta *m;
};
static __thread struct guard *armed;
static struct ol_meta *_Atomic maps; /* never shrinks: an entry lives as long as its map */
static pthread_mutex_t maps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction old_bus, old_segv;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static struct ol_meta *
map_of(const void *addr)
{
	for (struct ol_meta *m = atomic_load(&maps); m; m = m->next)
		if (m->map && (const char *)addr >= m->map &&
		    (const char *)addr < m->map + m->map_size)
			return m;
	return NULL;
}

static void
on_fault(int sig, siginfo_t *si, void *uc)
{
	struct ol_meta *m = map_of(si->si_addr);
	struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
	long pg = sysconf(_SC_PAGESIZE);

	if (armed) {
		sigset_t s;

		armed->m->broken = sig == SIGBUS ? 2 : 3;
		/* the guard saved no signal mask (see GUARDED): unblock the signal this handler
		 * runs under, as the mask was when the guard was armed */
		sigemptyset(&s);
		sigaddset(&s, sig);
		pthread_sigmask(SIG_UNBLOCK, &s, NULL);
		siglongjmp(armed->jb, 1);
	}
	if (m) {
		void *page = (void *)((uintptr_t)si->si_addr & ~(uintptr_t)(pg - 1));

		m->broken = sig == SIGBUS ? 2 : 3;
		if (mmap(page, (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) != MAP_FAILED)
			return;
	}
	/* not ours: the previous disposition, and the fault happens again on return */
	sigaction(sig, old, NULL);
	if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL &&
	    old->sa_handler != SIG_IGN)
		old->sa_handler(sig);
	else if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
}

static void
install_handler(void)
{
	struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_ONSTACK};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
}

static void
on_assert(MDB_env *env, const char *msg)
{
	(void)env;
	if (armed) {
		snprintf(armed->m->why, sizeof(armed->m->why), "LMDB assertion: %s", msg);
		armed->m->broken = 4;
		siglongjmp(armed->jb, 1);
	}
	/* no guard: LMDB aborts after we return, as it always did */
}

/* Arm a guard for m in this thread; GUARDED(m, g) is true on the first pass and false when
 * a fault or an assertion jumped back (m is then broken). The mask is not saved: saving it
 * costs an rt_sigprocmask call per LMDB call (16 per S3 GET); on_fault unblocks its signal
 * before the jump instead (a thread never runs with SIGBUS/SIGSEGV blocked), and an
 * assertion jumps back from ordinary code, where the mask has not changed. */
#define GUARDED(mm, g) ((g).m = (mm), armed = &(g), sigsetjmp((g).jb, 0) == 0)
static inline void
disarm(void)
{
	armed = NULL;
}

/* LMDB returns positive errno values or its own codes below zero. */
static int
mdb_to_errno(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		return -ENOSPC;
	if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
	    rc == MDB_BAD_TXN || rc == MDB_VERSION_MISMATCH)
		return -EUCLEAN;
	if (rc > 0)
		return -rc;
	return -EIO;
}

/* Convert an LMDB result on m; corruption marks m broken. */
static int
res(struct ol_meta *m, int rc)
{
	int err = mdb_to_errno(rc);

	if (err == -EUCLEAN && !m->broken) {
		snprintf(m->why, sizeof(m->why), "LMDB: %s", mdb_strerror(rc));
		m->broken = 1;
	}
	return err;
}

/* After a jump back: the env is broken and the call fails. */
static int
faulted(struct ol_meta *m)
{
	disarm();
	if (!m->why[0])
		snprintf(m->why, sizeof(m->why), "%s inside its map",
			 m->broken == 2 ? "SIGBUS (file truncated?)" : "fault (damaged pages?)");
	return -EUCLEAN;
}

#define LIVE(m)                                                                                    \
	do {                                                                                       \
		if (!(m) || (m)->broken)                                                           \
			return (m) ? -EUCLEAN : -ENODEV;                                           \
	} while (0)

/* Read every byte of a value inside the guard (one per 512): a page past the end of a
 * truncated file faults here, not later in the caller. */
static void
touch(const void *p, size_t n)
{
	const volatile char *c = p;
	char x = 0;

	for (size_t i = 0; i < n; i += 512)
		x ^= c[i];
	if (n)
		x ^= c[n - 1];
	(void)x;
}

static int
open_dbs(struct ol_meta *m)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(m->env, NULL, 0, &txn);

	if (rc)
		return res(m, rc);
	for (int i = 0; i < OL_META_NALL && !rc; i++)
		rc = mdb_dbi_open(txn, db_names[i], MDB_CREATE, &m->dbi[i]);
	if (rc) {
		mdb_txn_abort(txn);
		return res(m, rc);
	}
	return res(m, mdb_txn_commit(txn));
}

/* The two meta pages of an existing data file, checked before LMDB maps it: the newest valid
 * one's last page must lie inside the file (a truncated file would SIGBUS in the map). */
#define MDB_MAGIC_ 0xBEEFC0DEu
struct meta_pg {
	uint32_t magic, version;
	uint64_t psize, last_pg, txnid;
};

static bool
read_meta_pg(int fd, off_t off, struct meta_pg *mp)
{
	/* 16-byte page header, then MDB_meta: magic u32, version u32, address, mapsize,
	 * 2 x MDB_db (48 bytes; the first's md_pad is the page size), last_pg, txnid */
	uint8_t b[160];

	if (pread(fd, b, sizeof(b), off) != (ssize_t)sizeof(b))
		return false;
	memcpy(&mp->magic, b + 16, 4);
	memcpy(&mp->version, b + 20, 4);
	mp->psize = 0;
	memcpy(&mp->psize, b + 40, 4);
	memcpy(&mp->last_pg, b + 136, 8);
	memcpy(&mp->txnid, b + 144, 8);
	return mp->magic == MDB_MAGIC_ && mp->version == 1 && mp->psize >= 512 &&
	       mp->psize <= 65536 && !(mp->psize & (mp->psize - 1));
}

int
ol_meta_precheck(const char *path, char *why, size_t cap)
{
	struct meta_pg a, b, *best;
	struct stat sb;
	bool va, vb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &sb)) {
		rc = -errno;
		goto out;
	}
	if (sb.st_size == 0)
		goto out; /* LMDB makes a new env */
	va = read_meta_pg(fd, 0, &a);
	vb = va && read_meta_pg(fd, (off_t)a.psize, &b) && b.psize == a.psize;
	if (!va) {
		snprintf(why, cap, "first meta page unreadable or invalid (%lld bytes)",
			 (long long)sb.st_size);
		rc = -EUCLEAN;
		goto out;
	}
	best = vb && b.txnid > a.txnid ? &b : &a;
	if ((uint64_t)sb.st_size < (best->last_pg + 1) * best->psize ||
	    (uint64_t)sb.st_size < 2 * best->psize) {
		snprintf(why, cap, "truncated: %lld bytes, its meta page claims %llu",
			 (long long)sb.st_size,
			 (unsigned long long)((best->last_pg + 1) * best->psize));
		rc = -EUCLEAN;
	}
out:
	close(fd);
	return rc;
}

/* The env's map: LMDB reports its address only for MDB_FIXEDMAP, so find the mapping of the
 * data file (by device and inode) in /proc/self/maps. Without it, faults outside a guard in
 * this map go to the previous handler (the guard still covers every LMDB call). */
static void
register_map(struct ol_meta *m)
{
	mdb_filehandle_t fd;
	struct stat sb;
	char line[512];
	FILE *f;

	if (mdb_env_get_fd(m->env, &fd) || fstat(fd, &sb) || !(f = fopen("/proc/self/maps", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, ino;
		unsigned maj, mnr;

		if (sscanf(line, "%lx-%lx %*s %*x %x:%x %lu", &lo, &hi, &maj, &mnr, &ino) != 5 ||
		    ino != sb.st_ino || makedev(maj, mnr) != sb.st_dev || hi - lo < m->map_size)
			continue;
		m->map = (char *)lo;
		m->map_size = hi - lo;
	}
	fclose(f);
	ol_meta_list(m);
}

void
ol_meta_list(struct ol_meta *m)
{
	m->listed = true; /* listed even when not found: never freed, like a listed one */
	pthread_mutex_lock(&maps_mu);
	m->next = atomic_load(&maps);
	atomic_store(&maps, m);
	pthread_mutex_unlock(&maps_mu);
}

/* The pool of reset read txns. With MDB_NOTLS a read txn owns its reader slot until it is
 * aborted, so a reset one keeps it (marked unused: it pins no pages) and is renewed from any
 * thread; begin and abort of a pooled txn allocate nothing and take no lock. Each thread
 * starts its search at its own slot, so threads seldom meet on one. */
static unsigned
pool_hint(void)
{
	static _Atomic unsigned next;
	static __thread unsigned hint;

	if (!hint)
		hint = atomic_fetch_add(&next, 1) + 1;
	return hint;
}

static struct ol_meta_txn *
pool_take(struct ol_meta *m)
{
	unsigned h = pool_hint();

	for (unsigned i = 0; i < OL_META_POOL; i++) {
		struct ol_meta_txn *_Atomic *s = &m->pool[(h + i) % OL_META_POOL].t;
		struct ol_meta_txn *t;

		if (atomic_load_explicit(s, memory_order_relaxed) &&
		    (t = atomic_exchange_explicit(s, NULL, memory_order_acquire)))
			return t;
	}
	return NULL;
}

static bool
pool_put(struct ol_meta *m, struct ol_meta_txn *t)
{
	unsigned h = pool_hint();

	for (unsigned i = 0; i < OL_META_POOL; i++) {
		struct ol_meta_txn *e = NULL;

		if (atomic_compare_exchange_strong_explicit(&m->pool[(h + i) % OL_META_POOL].t, &e,
							    t, memory_order_release,
							    memory_order_relaxed))
			return true;
	}
	return false;
}

/* Before the env closes (no txn of it is in use then): abort the pooled ones, which frees
 * their reader slots. */
static void
pool_drain(struct ol_meta *m)
{
	struct ol_meta_txn *t;

	while ((t = pool_take(m))) {
		mdb_txn_abort(t->txn);
		free(t);
	}
}

struct ol_meta *
ol_meta_alloc(void)
{
	void *p = NULL;

	if (posix_memalign(&p, _Alignof(struct ol_meta), sizeof(struct ol_meta)))
		ol_die("out of memory allocating %zu bytes", sizeof(struct ol_meta));
	return memset(p, 0, sizeof(struct ol_meta));
}

static int
env_open(struct ol_meta *m, const char *path, uint64_t map_size, unsigned flags)
{
	struct guard g;
	int rc;

	rc = mdb_env_create(&m->env);
	if (rc)
		return mdb_to_errno(rc);
	mdb_env_set_assert(m->env, on_assert);
	rc = mdb_env_set_mapsize(m->env, map_size ? map_size : (64ULL << 30));
	if (!rc)
		rc = mdb_env_set_maxdbs(m->env, OL_META_NALL + 2);
	if (!rc)
		rc = mdb_env_set_maxreaders(m->env, 1024);
	if (rc)
		return mdb_to_errno(rc);
	if (!GUARDED(m, g))
		return faulted(m);
	rc = mdb_env_open(m->env, path, flags, 0600);
	disarm();
	if (rc)
		return res(m, rc);
	m->map_size = 1; /* any mapping of the file at least this big; the largest wins */
	register_map(m);
	if (!GUARDED(m, g))
		return faulted(m);
	rc = open_dbs(m);
	disarm();
	return rc;
}

int
ol_meta_open(const char *path, uint64_t map_size, bool sync, struct ol_meta **out)
{
	struct ol_meta *m = ol_meta_alloc();
	unsigned flags = MDB_NOSUBDIR | MDB_NOTLS | (sync ? 0 : MDB_NOSYNC);
	char why[128] = "";
	int err;

	pthread_once(&handler_once, install_handler);
	err = ol_meta_precheck(path, why, sizeof(why));
	if (err == -EUCLEAN)
		ol_warn("meta: %s: %s", path, why);
	if (!err)
		err = env_open(m, path, map_size, flags);
	if (!err)
		err = ol_meta_check(m);
	if (err) {
		if (m->why[0])
			ol_warn("meta: %s: %s", path, m->why);
		if (m->listed) { /* the struct stays on the list of maps */
			if (!m->broken)
				ol_meta_close(m);
		} else if (!m->broken) { /* never mapped: nothing can point into it */
			if (m->env)
				mdb_env_close(m->env);
			free(m);
		}
		return err;
	}
	*out = m;
	return 0;
}

void
ol_meta_close(struct ol_meta *m)
{
	if (m && m->r) {
		m->broken = m->broken ? m->broken : 5;
		return; /* listed: never freed */
	}
	if (!m || m->broken)
		return; /* a broken env is abandoned, never touched again */
	pool_drain(m);
	m->broken = 5;
	mdb_env_close(m->env);
	m->map = NULL; /* the struct stays on the list of maps */
}

bool
ol_meta_broken(const struct ol_meta *m, const char **why)
{
	if (why)
		*why = m && m->why[0] ? m->why : "damaged";
	return !m || m->broken;
}

int
ol_meta_sync(struct ol_meta *m)
{
	if (m && m->r)
		return m->broken ? -EUCLEAN : 0; /* commits were synced by the drive */
	LIVE(m);
	return mdb_to_errno(mdb_env_sync(m->env, 1));
}

int
ol_meta_fd(struct ol_meta *m)
{
	if (m && m->r)
		return -1;
	mdb_filehandle_t fd;

	if (!m || m->broken)
		return -1;
	return mdb_env_get_fd(m->env, &fd) ? -1 : fd;
}

/* A pooled txn made current again; on failure it is gone. */
static int
pool_renew(struct ol_meta *m, struct ol_meta_txn *t)
{
	struct guard g;
	int rc;

	if (!GUARDED(m, g)) {
		free(t); /* its LMDB txn is abandoned with the env */
		return faulted(m);
	}
	rc = mdb_txn_renew(t->txn);
	if (rc)
		mdb_txn_abort(t->txn);
	disarm();
	if (rc)
		free(t);
	return rc ? res(m, rc) : 0;
}

int
ol_meta_begin(struct ol_meta *m, bool write, struct ol_meta_txn **out)
{
	if (m && m->r)
		return ol_rm_begin(m, write, out);
	struct ol_meta_txn *t, *p;
	struct guard g;
	int rc;

	LIVE(m);
	if (!write && (p = pool_take(m))) {
		rc = pool_renew(m, p);
		if (!rc)
			*out = p;
		return rc;
	}
	t = ol_xcalloc(1, sizeof(*t));
	if (!GUARDED(m, g)) {
		free(t); /* what LMDB allocated inside is abandoned with the env */
		return faulted(m);
	}
	rc = mdb_txn_begin(m->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);
	disarm();
	if (rc) {
		free(t);
		return res(m, rc);
	}
	t->m = m;
	t->rdonly = !write;
	*out = t;
	return 0;
}

int
ol_meta_commit(struct ol_meta_txn *t)
{
	if (t->r)
		return ol_rm_commit(t);
	struct ol_meta *m = t->m;
	struct guard g;
	int rc;

	if (m->broken) {
		free(t); /* the LMDB txn is abandoned with the env */
		return -EUCLEAN;
	}
	if (!GUARDED(m, g)) {
		free(t);
		return faulted(m);
	}
	rc = mdb_txn_commit(t->txn);
	disarm();
	free(t);
	return res(m, rc);
}

void
ol_meta_abort(struct ol_meta_txn *t)
{
	if (t && t->r) {
		ol_rm_abort(t);
		return;
	}
	struct guard g;

	if (!t)
		return;
	if (t->m->broken) {
		free(t); /* the LMDB txn is abandoned with the env */
		return;
	}
	if (!GUARDED(t->m, g)) {
		faulted(t->m);
		free(t);
		return;
	}
	if (t->rdonly) {
		mdb_txn_reset(t->txn);
		disarm();
		if (pool_put(t->m, t))
			return;
		if (!GUARDED(t->m, g)) {
			faulted(t->m);
			free(t);
			return;
		}
	}
	mdb_txn_abort(t->txn);
	disarm();
	free(t);
}

int
ol_meta_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	    const void **val, size_t *vlen)
{
	if (t->r)
		return ol_rm_get(t, db, key, klen, val, vlen);
	MDB_val k = {klen, (void *)key}, v;
	struct guard g;
	int rc;

	LIVE(t->m);
	if (!GUARDED(t->m, g))
		return faulted(t->m);
	rc = mdb_get(t->txn, t->m->dbi[db], &k, &v);
	if (!rc)
		touch(v.mv_data, v.mv_size);
	disarm();
	if (rc)
		return res(t->m, rc);
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

int
ol_meta_put(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	    const void *val, size_t vlen)
{
	if (t->r)
		return ol_rm_put(t, db, key, klen, val, vlen);
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	struct guard g;
	int rc;

	LIVE(t->m);
	if (!GUARDED(t->m, g))
		return faulted(t->m);
	rc = mdb_put(t->txn, t->m->dbi[db], &k, &v, 0);
	disarm();
	return res(t->m, rc);
}

int
ol_meta_del(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen)
{
	if (t->r)
		return ol_rm_del(t, db, key, klen);
	MDB_val k = {klen, (void *)key};
	struct guard g;
	int rc;

	LIVE(t->m);
	if (!GUARDED(t->m, g))
		return faulted(t->m);
	rc = mdb_del(t->txn, t->m->dbi[db], &k, NULL);
	disarm();
	return res(t->m, rc);
}

int
ol_meta_cursor_open(struct ol_meta_txn *t, enum ol_meta_db db, struct ol_meta_cursor **out)
{
	if (t->r)
		return ol_rm_cursor_open(t, db, out);
	struct ol_meta_cursor *c;
	struct guard g;
	int rc;

	LIVE(t->m);
	c = ol_xcalloc(1, sizeof(*c));
	c->m = t->m;
	if (!GUARDED(t->m, g)) {
		free(c);
		return faulted(t->m);
	}
	rc = mdb_cursor_open(t->txn, t->m->dbi[db], &c->cur);
	disarm();
	if (rc) {
		free(c);
		return res(t->m, rc);
	}
	*out = c;
	return 0;
}

void
ol_meta_cursor_close(struct ol_meta_cursor *c)
{
	if (c && c->r) {
		ol_rm_cursor_close(c);
		return;
	}
	if (!c)
		return;
	if (!c->m->broken)
		mdb_cursor_close(c->cur);
	free(c);
}

static int
cursor_get(struct ol_meta_cursor *c, MDB_val *k, MDB_cursor_op op, const void **kp, size_t *kl,
	   const void **vp, size_t *vl)
{
	MDB_val v;
	struct guard g;
	int rc;

	LIVE(c->m);
	if (!GUARDED(c->m, g))
		return faulted(c->m);
	rc = mdb_cursor_get(c->cur, k, &v, op);
	if (!rc) {
		touch(k->mv_data, k->mv_size);
		touch(v.mv_data, v.mv_size);
	}
	disarm();
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return res(c->m, rc);
	*kp = k->mv_data;
	*kl = k->mv_size;
	*vp = v.mv_data;
	*vl = v.mv_size;
	return 1;
}

int
ol_meta_cursor_seek(struct ol_meta_cursor *c, const void *key, size_t klen, const void **k,
		    size_t *kl, const void **v, size_t *vl)
{
	if (c->r)
		return ol_rm_cursor_seek(c, key, klen, k, kl, v, vl);
	MDB_val kv = {klen, (void *)key};

	if (klen == 0)
		return cursor_get(c, &kv, MDB_FIRST, k, kl, v, vl);
	return cursor_get(c, &kv, MDB_SET_RANGE, k, kl, v, vl);
}

int
ol_meta_cursor_next(struct ol_meta_cursor *c, const void **k, size_t *kl, const void **v,
		    size_t *vl)
{
	if (c->r)
		return ol_rm_cursor_next(c, k, kl, v, vl);
	MDB_val kv;

	return cursor_get(c, &kv, MDB_NEXT, k, kl, v, vl);
}

int
ol_meta_cursor_del(struct ol_meta_cursor *c)
{
	if (c->r)
		return ol_rm_cursor_del(c);
	struct guard g;
	int rc;

	LIVE(c->m);
	if (!GUARDED(c->m, g))
		return faulted(c->m);
	rc = mdb_cursor_del(c->cur, 0);
	disarm();
	return res(c->m, rc);
}

/* Walk one database (every key and value read) in txn; the free list's values are page
 * lists whose pages must lie inside the file. */
static int
walk(struct ol_meta *m, MDB_txn *txn, MDB_dbi dbi, size_t last_pg, uint64_t *n)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, dbi, &cur);

	if (rc)
		return res(m, rc);
	while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
		touch(k.mv_data, k.mv_size);
		touch(v.mv_data, v.mv_size);
		(*n)++;
		if (dbi == 0) {
			size_t cnt, pg;

			if (v.mv_size < sizeof(size_t))
				return res(m, MDB_CORRUPTED);
			memcpy(&cnt, v.mv_data, sizeof(cnt));
			if (cnt > v.mv_size / sizeof(size_t) - 1)
				return res(m, MDB_CORRUPTED);
			for (size_t i = 1; i <= cnt; i++) {
				memcpy(&pg, (char *)v.mv_data + i * sizeof(size_t), sizeof(pg));
				if (pg < 2 || pg > last_pg)
					return res(m, MDB_CORRUPTED);
			}
		}
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : res(m, rc);
}

int
ol_meta_check(struct ol_meta *m)
{
	if (m && m->r)
		return m->broken ? -EUCLEAN : 0; /* the drive's node checked it at open */
	MDB_txn *txn = NULL;
	MDB_envinfo info;
	struct guard g;
	uint64_t n = 0;
	int rc;

	LIVE(m);
	if (!GUARDED(m, g))
		return faulted(m);
	rc = mdb_env_info(m->env, &info);
	if (!rc)
		rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
	if (rc) {
		disarm();
		return res(m, rc);
	}
	rc = walk(m, txn, 0, info.me_last_pgno, &n);
	for (int i = 0; i < OL_META_NALL && !rc; i++)
		rc = walk(m, txn, m->dbi[i], info.me_last_pgno, &n);
	mdb_txn_abort(txn);
	disarm();
	return rc;
}
