/* store/heal_scan.c - whole-store heal: a count pass, then every bucket, object and upload
 * part is checked on every online drive. Records missing on a drive are written back (for
 * objects through the heal-on-read path, heal.c); every block of every shard file, parity
 * included, is read and its checksum verified; bad blocks are rebuilt from >= k good ones and
 * rewritten in place. The key's lock is held only while shard files are opened (and missing
 * ones recreated) so that a concurrent overwrite cannot race a recreation. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"
#include "base/clock.h"

#define BATCH 256 /* keys gathered per merge pass */

static _Atomic int heal_busy;

struct scan {
	struct ol_store *st;
	struct ol_heal_progress *p;
	uint64_t rate, paced;
	int64_t t0;
	bool count; /* count pass: totals only */
	/* the scan's place, published in p->cursor as it goes (ol_store_heal_cursor) */
	unsigned set_idx;
	/* resume: the cursor to start after (set by the scan of its set, cleared once the scan
	 * reaches it) */
	const struct ol_heal_cursor *from;
	/* shard files or blocks that could not be written, per drive of each set: on a drive
	 * still online at the end the heal fails (-EAGAIN), the store is not whole */
	uint32_t unw[OL_MAX_SETS][OL_MAX_DRIVES];
};

/* What a shard file belongs to, to re-check it under its lock. */
struct target {
	enum ol_meta_db db;
	char k[OL_KEYBUF];
	size_t kl;
	unsigned li;
};

static bool
cancelled(struct scan *s)
{
	return atomic_load(&s->p->cancel) != 0;
}

static void
pace(struct scan *s, uint64_t bytes)
{
	int64_t want, now;

	if (!s->rate)
		return;
	s->paced += bytes;
	want = (int64_t)(s->paced * 1000000000.0 / (double)s->rate);
	now = (int64_t)ol_clock_ns() - s->t0;
	while (want > now && !cancelled(s)) {
		int64_t d = want - now > 100000000 ? 100000000 : want - now;
		struct timespec ts = {d / 1000000000, d % 1000000000};

		nanosleep(&ts, NULL);
		now = (int64_t)ol_clock_ns() - s->t0;
	}
}

_Static_assert(OL_KEYBUF <= OL_HEAL_CURSOR_KEY, "a heal cursor holds any index key");

static void
cursor_lock(struct ol_heal_progress *p, bool on)
{
	if (!on) {
		atomic_store_explicit(&p->cursor_lock, 0, memory_order_release);
		return;
	}
	while (atomic_exchange_explicit(&p->cursor_lock, 1, memory_order_acquire))
		;
}

/* The position of one set as its drives' identity records name it (what every drive of it
 * must say: ol_format_open, ol_store_open_set), or OL_HEAL_SET_UNKNOWN when not checked */
static void
set_position(const struct ol_store *set, unsigned *pool, unsigned *pset)
{
	const struct ol_driveid *id = &set->d[0].id;
	bool known = id->store[0] && id->pool != OL_DRIVEID_NONE && id->set != OL_DRIVEID_NONE;

	*pool = known ? id->pool : OL_HEAL_SET_UNKNOWN;
	*pset = known ? id->set : OL_HEAL_SET_UNKNOWN;
}

/* The cursor to resume after, if the store's set at its index is the one it names */
static const struct ol_heal_cursor *
resume_from(struct ol_store *const *sets, int n, const struct ol_heal_cursor *c)
{
	unsigned pool, pset;

	if (!c)
		return NULL;
	if (c->set >= (unsigned)n) {
		ol_info(
		    "store: heal: the cursor's set %u is past the store's %d set(s) (the layout "
		    "changed): the scan starts from the beginning",
		    c->set, n);
		return NULL;
	}
	set_position(sets[c->set], &pool, &pset);
	if (c->pool == OL_HEAL_SET_UNKNOWN || pool == OL_HEAL_SET_UNKNOWN ||
	    (c->pool == pool && c->pset == pset))
		return c;
	ol_info("store: heal: the cursor's set %u was pool %u set %u, and is pool %u set %u now "
		"(the layout changed): the scan starts from the beginning",
		c->set, c->pool, c->pset, pool, pset);
	return NULL;
}

/* The scan is at (bucket, phase) of the current set, key k (kl bytes) done; bucket NULL:
 * the same bucket and phase as before. */
static void
cursor_at(struct scan *s, const char *bucket, unsigned phase, const void *k, size_t kl)
{
	struct ol_heal_progress *p = s->p;

	if (kl > sizeof(p->cursor.key))
		return;
	cursor_lock(p, true);
	p->cursor.set = s->set_idx;
	set_position(s->st, &p->cursor.pool, &p->cursor.pset);
	if (bucket) {
		snprintf(p->cursor.bucket, sizeof(p->cursor.bucket), "%s", bucket);
		p->cursor.phase = phase;
	}
	if (kl)
		memcpy(p->cursor.key, k, kl);
	p->cursor.key_len = kl;
	p->cursor_set = true;
	cursor_lock(p, false);
}

int
ol_store_heal_cursor(struct ol_heal_progress *p, struct ol_heal_cursor *out)
{
	int rc = -ENOENT;

	cursor_lock(p, true);
	if (p->cursor_set) {
		*out = p->cursor;
		rc = 0;
	}
	cursor_lock(p, false);
	return rc;
}

static void
lock_target(struct ol_store *st, const struct target *t, bool on)
{
	if (t->db == OL_META_PARTS) {
		if (on)
			pthread_mutex_lock(&st->upl_locks[t->li]);
		else
			pthread_mutex_unlock(&st->upl_locks[t->li]);
	} else if (on) {
		pthread_rwlock_rdlock(&st->obj_rw[t->li]);
	} else {
		pthread_rwlock_unlock(&st->obj_rw[t->li]);
	}
}

static void
mkdir_data(const struct ol_store *st, int d)
{
	char dir[OL_PATH_MAX + 16];

	if (ol_drive_remote(st, d))
		return; /* the node plane makes the directories it writes into */
	snprintf(dir, sizeof(dir), "%s/.openlake", st->d[d].root);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return;
	if (mkdir(st->d[d].data, 0700) && errno != EEXIST)
		ol_warn("store: heal: cannot create %s: %s", st->d[d].data, strerror(errno));
}

static int
open_shard(struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80];
	int fd;

	ol_shard_path(st, d, uuid, path, sizeof(path));
	fd = ol_shard_open(st, d, uuid);
	if (fd != -ENOENT)
		return fd < 0 ? -1 : fd;
	mkdir_data(st, d);
	fd = ol_shard_create(st, d, uuid);
	if (fd < 0) {
		ol_warn("store: heal: drive %s: shard %s is missing and cannot be made: %s",
			st->d[d].root, path, strerror(fd > -4096 ? -fd : EIO));
		return -1;
	}
	ol_shard_close(fd);
	ol_warn("store: heal: drive %s: shard %s was missing, rebuilding", st->d[d].root, path);
	fd = ol_shard_open(st, d, uuid);
	return fd < 0 ? -1 : fd;
}

static void
not_written(struct scan *s, int d)
{
	if (s->set_idx < OL_MAX_SETS)
		s->unw[s->set_idx][d]++;
}

/* Open the part's shard files if vid is still the visible version. 0, or -ENOENT. A shard
 * that cannot be opened nor made on an online drive is counted (not_written). */
static int
open_part(struct scan *s, const struct target *t, const uint8_t *vid, const struct ol_rpart *rp,
	  int *fd)
{
	struct ol_store *st = s->st;
	uint8_t cur[OL_UUID];
	int rc = -ENOENT;

	for (int d = 0; d < st->n; d++)
		fd[d] = -1;
	lock_target(st, t, true);
	if (ol_visible_vid(st, t->db, t->k, t->kl, cur) == 1 && !memcmp(cur, vid, OL_UUID)) {
		for (int d = 0; d < st->n; d++)
			if (st->d[d].meta && (fd[d] = open_shard(st, d, rp->uuid)) < 0)
				not_written(s, d);
		rc = 0;
	}
	lock_target(st, t, false);
	return rc;
}

struct stripe {
	uint64_t j;
	size_t bl, dl;
	uint32_t bs;
	int ck;
};

/* Verify stripe j on every drive; rebuild and rewrite bad blocks. healed[d] set for drives
 * that got a block. 0, or -EIO when fewer than k blocks verify. */
static int
check_stripe(struct scan *s, const struct stripe *sp, int *fd, uint8_t **blk, bool *healed)
{
	struct ol_store *st = s->st;
	struct ol_io_op ops[OL_MAX_DRIVES];
	bool ok[OL_MAX_DRIVES] = {false}, fix[OL_MAX_DRIVES] = {false};
	uint64_t off = sp->j * ((uint64_t)sp->bs + OL_TRAILER);
	int n = 0, map[OL_MAX_DRIVES], good = 0, bad = 0;

	for (int d = 0; d < st->n; d++) {
		if (fd[d] < 0)
			continue;
		ops[n] =
		    (struct ol_io_op){.fd = fd[d], .opcode = OL_IO_READ, .niov = 1, .off = off};
		ops[n].iov[0] = (struct iovec){blk[d], sp->bl + OL_TRAILER};
		map[n++] = d;
	}
	ol_shard_batch(ops, (unsigned)n);
	for (int i = 0; i < n; i++) {
		int d = map[i];

		ok[d] = ops[i].res == (ssize_t)(sp->bl + OL_TRAILER) &&
			ol_get_u64(blk[d] + sp->bl) == ol_block_sum(sp->ck, blk[d], sp->bl, sp->j);
		good += ok[d];
		fix[d] = !ok[d];
		bad += fix[d];
	}
	atomic_fetch_add(&s->p->bytes_scanned, (uint64_t)sp->dl);
	pace(s, (uint64_t)n * (sp->bl + OL_TRAILER));
	if (!bad)
		return 0;
	if (good < st->k || ol_ec_decode(&st->ec, sp->bl, blk, ok, fix))
		return -EIO;
	for (int d = 0; d < st->n; d++) {
		if (!fix[d])
			continue;
		ol_put_u64(blk[d] + sp->bl, ol_block_sum(sp->ck, blk[d], sp->bl, sp->j));
		if (ol_shard_pwrite(fd[d], blk[d], sp->bl + OL_TRAILER, off) !=
		    (ssize_t)(sp->bl + OL_TRAILER)) {
			ol_warn("store: heal: drive %s: cannot rewrite a block", st->d[d].root);
			not_written(s, d);
			continue;
		}
		healed[d] = true;
		atomic_fetch_add(&s->p->blocks_healed, 1);
	}
	return 0;
}

/* With cfg fsync: the rewritten file and its directory entry (it may be new) are durable. */
static void
sync_shard(const struct ol_store *st, int d, const uint8_t *uuid, int fd)
{
	int dfd;

	if (!st->fsync)
		return;
	if ((dfd = ol_shard_datasync(fd)))
		ol_warn("store: heal: drive %s: fdatasync: %s", st->d[d].root, strerror(-dfd));
	dfd = ol_open_shard_dir(st, d, uuid);
	if (dfd >= 0 && !ol_vfd(dfd))
		fsync(dfd);
	ol_shard_close(dfd);
}

/* Every stripe of one part. 0, -EIO (some stripe lost), -ECANCELED. */
static int
check_part(struct scan *s, const struct target *t, const struct ol_rec *w, uint32_t pi)
{
	struct ol_store *st = s->st;
	struct ol_rpart rp;
	int fd[OL_MAX_DRIVES], rc = 0;
	uint8_t *blk[OL_MAX_DRIVES];
	bool healed[OL_MAX_DRIVES] = {false};
	uint64_t sd = (uint64_t)st->k * w->bs;
	struct stripe sp = {.bs = w->bs, .ck = w->ck};

	ol_rec_part(w, pi, &rp);
	if (!rp.size || open_part(s, t, w->vid, &rp, fd))
		return 0; /* empty, or replaced meanwhile: nothing of it to heal */
	for (int d = 0; d < st->n; d++)
		blk[d] = ol_xmalloc((size_t)w->bs + OL_TRAILER);
	/* a lost stripe does not stop the others from being healed */
	for (sp.j = 0; sp.j * sd < rp.size && rc != -ECANCELED; sp.j++) {
		uint64_t dl = rp.size - sp.j * sd < sd ? rp.size - sp.j * sd : sd;

		sp.dl = (size_t)dl;
		sp.bl = (size_t)((dl + st->k - 1) / st->k);
		if (cancelled(s))
			rc = -ECANCELED;
		else if (check_stripe(s, &sp, fd, blk, healed))
			rc = -EIO;
	}
	for (int d = 0; d < st->n; d++) {
		if (healed[d]) {
			atomic_fetch_add(&s->p->shards_healed, 1);
			sync_shard(st, d, rp.uuid, fd[d]);
		}
		ol_shard_close(fd[d]);
		free(blk[d]);
	}
	return rc;
}

static int
first_valid(const struct ol_store *st, const bool *valid)
{
	for (int d = 0; d < st->n; d++)
		if (valid[d])
			return d;
	return -1;
}

/* Online drives that lack the resolved version of t (-1: no version resolves). */
static int
count_missing(struct ol_store *st, const struct target *t)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	int n = -1;

	ol_reads_get(st, t->db, t->k, t->kl, NULL, &r);
	if (ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid)) {
		n = 0;
		for (int d = 0; d < st->n; d++)
			n += st->d[d].meta && !valid[d];
	}
	ol_reads_free(&r);
	return n;
}

/* An object or part that too few shards could rebuild: unrecoverable with every drive of
 * its set online, else only unreadable now (the offline drive may hold what is missing). */
static void
not_rebuilt(struct scan *s)
{
	bool offline = false;

	for (int d = 0; d < s->st->n; d++)
		offline |= atomic_load(&s->st->d[d].meta) == NULL;
	atomic_fetch_add(offline ? &s->p->unreadable_offline : &s->p->unrecoverable, 1);
}

static void
check_parts(struct scan *s, const struct target *t, const struct ol_rec *w)
{
	bool lost = false;
	int rc = 0;

	for (uint32_t i = 0; i < w->n_parts && rc != -ECANCELED; i++) {
		rc = check_part(s, t, w, i);
		lost |= rc == -EIO;
	}
	if (lost)
		not_rebuilt(s);
}

/* One object: records back through get_open (heal.c), then every shard block. */
static void
scan_object(struct scan *s, const char *bucket, const struct ol_rec *w, const void *ik, size_t ikl)
{
	struct ol_store *st = s->st;
	char key[OL_STORE_MAX_KEY];
	size_t klen = ikl;
	struct target t = {.db = OL_META_OBJECTS};
	struct ol_get *g = NULL;
	struct ol_obj_info info;
	int before, after;

	if (w->tail_len) { /* long key: index head + hash, the rest is in the record */
		memcpy(key, ik, OL_KEY_HEAD);
		memcpy(key + OL_KEY_HEAD, w->tail, w->tail_len);
		klen = OL_KEY_HEAD + w->tail_len;
	} else {
		memcpy(key, ik, ikl);
	}
	t.kl = ol_okey(t.k, bucket, key, klen);
	t.li = ol_lock_idx(bucket, key, klen);
	before = count_missing(st, &t);
	if (before > 0 || (w->flags & OL_REC_INLINE)) {
		if (ol_set_get_open_all(st, bucket, key, klen, &g, &info) == -EIO)
			not_rebuilt(s);
		ol_store_get_close(g);
		after = count_missing(st, &t);
		if (before > 0 && after >= 0 && after < before)
			atomic_fetch_add(&s->p->records_restored, (uint64_t)(before - after));
	}
	if (w->flags & OL_REC_INLINE)
		atomic_fetch_add(&s->p->bytes_scanned, w->size);
	else
		check_parts(s, &t, w);
}

/* Write a part record back to the online drives that lack it (under the upload's lock, only
 * if it is still the visible version). Returns the number of drives written. */
static int
restore_part_rec(struct ol_store *st, const struct target *t, const struct ol_rec *w,
		 const bool *valid)
{
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rpart rp;
	bool skip[OL_MAX_DRIVES];
	char etag[OL_STORE_ETAG_MAX];
	struct ol_commit c = {.db = t->db, .k = t->k, .kl = t->kl, .b = b, .skip = skip};
	uint8_t cur[OL_UUID];
	int n = 0;

	if (w->n_parts != 1)
		return 0;
	ol_rec_part(w, 0, &rp);
	memcpy(etag, w->etag, w->etag_len);
	etag[w->etag_len] = 0;
	for (int d = 0; d < st->n; d++) {
		skip[d] = valid[d] || !st->d[d].meta;
		b[d] = (struct ol_rec_build){.st = st,
					     .flags = w->flags,
					     .size = w->size,
					     .mtime = w->mtime,
					     .vid = w->vid,
					     .parts = &rp,
					     .n_parts = 1,
					     .etag = etag,
					     .idx = d};
	}
	lock_target(st, t, true);
	if (ol_visible_vid(st, t->db, t->k, t->kl, cur) == 1 && !memcmp(cur, w->vid, OL_UUID))
		n = ol_commit_all(st, &c);
	lock_target(st, t, false);
	if (n > 0)
		ol_commit_reclaim(st, &c, w);
	ol_commit_free(&c);
	return n;
}

static void
scan_part(struct scan *s, const struct target *t, const struct ol_rec *w, const bool *valid)
{
	struct ol_store *st = s->st;
	int missing = 0;

	for (int d = 0; d < st->n; d++)
		missing += st->d[d].meta && !valid[d];
	if (missing > 0) {
		int n = restore_part_rec(st, t, w, valid);

		if (n > 0)
			atomic_fetch_add(&s->p->records_restored, (uint64_t)n);
	}
	check_parts(s, t, w);
}

/* A raw record (bucket or upload) agreed by >= k drives, back to the drives lacking it. */
static void
restore_raw(struct scan *s, enum ol_meta_db db, const void *k, size_t kl, const void *const *vals,
	    const size_t *lens)
{
	struct ol_store *st = s->st;
	uint8_t *raw[OL_MAX_DRIVES];
	size_t rl[OL_MAX_DRIVES];
	bool skip[OL_MAX_DRIVES];
	int votes = 0, first = -1, lack = 0, n;
	struct ol_commit c = {.db = db, .k = k, .kl = kl, .raw = raw, .raw_len = rl, .skip = skip};

	for (int d = 0; d < st->n; d++) {
		if (vals[d]) {
			votes++;
			first = first < 0 ? d : first;
		}
		lack += st->d[d].meta && !vals[d];
	}
	if (votes < st->k || !lack)
		return;
	for (int d = 0; d < st->n; d++) {
		raw[d] = (uint8_t *)vals[first];
		rl[d] = lens[first];
		skip[d] = vals[d] != NULL;
	}
	n = ol_commit_all(st, &c);
	if (n > 0)
		atomic_fetch_add(&s->p->records_restored, (uint64_t)n);
	ol_commit_free(&c);
}

/* One key of a batch: its index key and the raw record of one drive holding the winner
 * (the winner is that record or its prev: see item_rec). */
struct item {
	char k[OL_KEYBUF];
	size_t kl;
	uint8_t *raw;
	size_t len;
	uint8_t vid[OL_UUID];
	bool valid[OL_MAX_DRIVES];
	const void *vals[OL_MAX_DRIVES]; /* raw records (buckets, uploads): presence per drive */
	size_t lens[OL_MAX_DRIVES];
};

struct batch {
	struct item *v;
	int n;
	bool more;
};

static bool
take(struct ol_store *st, struct item *it, const void *const *vals, const size_t *lens, bool raw)
{
	struct ol_rec win[OL_MAX_DRIVES];
	int d = -1;

	if (raw) {
		for (int i = 0; i < st->n && d < 0; i++)
			if (vals[i])
				d = i;
	} else if (ol_rec_resolve(st, vals, lens, win, it->valid)) {
		d = first_valid(st, it->valid);
		memcpy(it->vid, win[d].vid, OL_UUID);
	}
	if (d < 0)
		return false;
	it->len = lens[d];
	it->raw = ol_xmalloc(lens[d] ? lens[d] : 1);
	memcpy(it->raw, vals[d], lens[d]);
	for (int i = 0; raw && i < st->n; i++) {
		it->lens[i] = lens[d];
		it->vals[i] = vals[i] ? it->raw : NULL;
	}
	return true;
}

/* Up to BATCH keys of db under prefix, after the key `after` (NULL: from the start). */
static int
gather(struct ol_store *st, enum ol_meta_db db, const char *pre, size_t pl, const char *after,
       size_t al, struct batch *b, bool raw)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *key;
	size_t lens[OL_MAX_DRIVES], kl;
	int rc = ol_merge_open(st, db, pre, pl, &m);

	b->n = 0;
	b->more = false;
	if (rc)
		return rc;
	if (after)
		ol_merge_seek(&m, after, al);
	while (ol_merge_next(&m, &key, &kl, vals, lens) == 1) {
		struct item *it = &b->v[b->n];

		if (after && kl == al && !memcmp(key, after, kl))
			continue;
		if (b->n == BATCH) {
			b->more = true;
			break;
		}
		memset(it, 0, sizeof(*it));
		if (kl > sizeof(it->k))
			continue;
		memcpy(it->k, key, kl);
		it->kl = kl;
		b->n += take(st, it, vals, lens, raw);
	}
	ol_merge_close(&m);
	return 0;
}

static void
batch_free(struct batch *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->v[i].raw);
}

/* Decode an item's winner: the record itself or its prev. */
static int
item_rec(const struct item *it, struct ol_rec *w)
{
	if (ol_rec_decode(it->raw, it->len, w))
		return -EIO;
	if (!memcmp(w->vid, it->vid, OL_UUID))
		return 0;
	if (!w->prev_len || ol_rec_decode(w->prev, w->prev_len, w) ||
	    memcmp(w->vid, it->vid, OL_UUID))
		return -EIO;
	return 0;
}

typedef void (*item_fn)(struct scan *s, const char *pre, size_t pl, const struct item *it,
			void *arg);

/* Call fn for every key of db under prefix after the key `after` (NULL: from the first), BATCH
 * keys per merge (no txn held while fn runs). track: each key done moves the cursor. */
static int
each_key_from(struct scan *s, enum ol_meta_db db, const char *pre, size_t pl, bool raw, item_fn fn,
	      void *arg, const void *after, size_t al, bool track)
{
	struct batch b = {.v = ol_xmalloc(BATCH * sizeof(struct item))};
	char last[OL_KEYBUF];
	size_t ll = 0;
	bool first = true;
	int rc;

	if (after && al && al <= sizeof(last)) {
		memcpy(last, after, al);
		ll = al;
		first = false;
	}
	do {
		rc = gather(s->st, db, pre, pl, first ? NULL : last, ll, &b, raw);
		first = false;
		for (int i = 0; !rc && i < b.n; i++) {
			if (cancelled(s))
				rc = -ECANCELED;
			else
				fn(s, pre, pl, &b.v[i], arg);
			/* a key cut short by a cancel is not done: a resume does it again */
			if (!rc && track && !cancelled(s))
				cursor_at(s, NULL, 0, b.v[i].k, b.v[i].kl);
		}
		if (b.n) {
			ll = b.v[b.n - 1].kl;
			memcpy(last, b.v[b.n - 1].k, ll);
		}
		batch_free(&b);
	} while (!rc && b.more);
	free(b.v);
	return rc;
}

static int
each_key(struct scan *s, enum ol_meta_db db, const char *pre, size_t pl, bool raw, item_fn fn,
	 void *arg)
{
	return each_key_from(s, db, pre, pl, raw, fn, arg, NULL, 0, false);
}

static void
count_one(struct scan *s, const struct ol_rec *w)
{
	atomic_fetch_add(&s->p->objects_total, 1);
	atomic_fetch_add(&s->p->bytes_total, w->size);
}

static void
object_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	struct ol_rec w;

	(void)pl;
	(void)arg;
	if (item_rec(it, &w))
		return;
	if (s->count) {
		count_one(s, &w);
		return;
	}
	scan_object(s, pre, &w, it->k, it->kl);
	atomic_fetch_add(&s->p->objects_scanned, 1);
}

/* A version's record back to the drives that lack it (inline: re-encoded from the body read
 * through the version reader). */
static void
restore_version(struct scan *s, const char *bucket, const struct target *t, const struct ol_rec *w,
		const char *key, size_t klen)
{
	struct ol_store *st = s->st;
	char vid[OL_STORE_VID_MAX];
	struct ol_get *g = NULL;
	struct ol_obj_info info;
	uint8_t *body = NULL;
	int before = count_missing(st, t), after;

	if (before <= 0)
		return;
	if (w->flags & OL_REC_INLINE) {
		ol_ver_id(w, vid);
		/* inline_shard reads k whole shards: the body padded with zeros */
		body = ol_xcalloc(1, (size_t)st->k * ((w->size + st->k - 1) / st->k) + 1);
		if (ol_set_get_open_ver(st, bucket, key, klen, vid, &g, &info) ||
		    ol_store_get_read(g, 0, body, w->size) != (ssize_t)w->size) {
			not_rebuilt(s);
			ol_store_get_close(g);
			free(body);
			return;
		}
		ol_store_get_close(g);
	}
	ol_heal_record_at(st, t->db, t->k, t->kl, t->li, w, body);
	free(body);
	after = count_missing(st, t);
	if (after >= 0 && after < before)
		atomic_fetch_add(&s->p->records_restored, (uint64_t)(before - after));
}

/* One entry of the versions index: its record on every drive and, unless it is the current
 * version (healed as an object), its shard files. */
static void
version_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	struct ol_store *st = s->st;
	struct target t = {.db = OL_META_VERSIONS};
	char key[OL_STORE_MAX_KEY], okey[OL_KEYBUF];
	uint8_t cur[OL_UUID];
	size_t hl, klen, okl;
	struct ol_rec w;
	bool current;

	(void)arg;
	if (it->kl < OL_VSUFFIX || item_rec(it, &w))
		return;
	hl = it->kl - OL_VSUFFIX;
	klen = hl > OL_KEY_HEAD ? (size_t)OL_KEY_HEAD + w.tail_len : hl;
	memcpy(key, it->k, hl > OL_KEY_HEAD ? OL_KEY_HEAD : hl);
	if (hl > OL_KEY_HEAD)
		memcpy(key + OL_KEY_HEAD, w.tail, w.tail_len);
	okl = ol_okey(okey, pre, key, klen);
	current = ol_visible_vid(st, OL_META_OBJECTS, okey, okl, cur) == 1 &&
		  !memcmp(cur, w.vid, OL_UUID);
	if (s->count) {
		if (!current)
			count_one(s, &w);
		return;
	}
	memcpy(t.k, pre, pl);
	memcpy(t.k + pl, it->k, it->kl);
	t.kl = pl + it->kl;
	t.li = ol_lock_idx(pre, key, klen);
	restore_version(s, pre, &t, &w, key, klen);
	if (current)
		return;
	if (w.flags & OL_REC_INLINE)
		atomic_fetch_add(&s->p->bytes_scanned, w.size);
	else
		check_parts(s, &t, &w);
	atomic_fetch_add(&s->p->objects_scanned, 1);
}

static void
part_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	struct target t = {.db = OL_META_PARTS};
	struct ol_rec w;
	size_t bl = strlen(pre);

	(void)arg;
	if (it->kl != 4 || item_rec(it, &w))
		return;
	if (s->count) {
		count_one(s, &w);
		return;
	}
	memcpy(t.k, pre, pl);
	memcpy(t.k + pl, it->k, 4);
	t.kl = pl + 4;
	t.li = ol_lock_idx(pre, pre, bl + 33); /* as put.c: bucket '\0' upload id */
	scan_part(s, &t, &w, it->valid);
	atomic_fetch_add(&s->p->objects_scanned, 1);
}

static void
upload_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	char k[OL_KEYBUF];

	(void)arg;
	if (it->kl != 32)
		return;
	memcpy(k, pre, pl);
	memcpy(k + pl, it->k, 32);
	if (!s->count) {
		unsigned li = ol_lock_idx(pre, k, pl + 32);

		pthread_mutex_lock(&s->st->upl_locks[li]);
		restore_raw(s, OL_META_UPLOADS, k, pl + 32, it->vals, it->lens);
		pthread_mutex_unlock(&s->st->upl_locks[li]);
	}
	k[pl + 32] = 0;
	each_key(s, OL_META_PARTS, k, pl + 33, false, part_fn, NULL);
}

/* A bucket's objects, versions and uploads (phases 0, 1, 2 of the cursor); resumed (s->from
 * names this bucket) from the cursor's phase and key. */
static int
bucket_fn(struct scan *s, const char *bucket)
{
	static const struct {
		enum ol_meta_db db;
		bool raw;
		item_fn fn;
	} phases[] = {{OL_META_OBJECTS, false, object_fn},
		      {OL_META_VERSIONS, false, version_fn},
		      {OL_META_UPLOADS, true, upload_fn}};
	char pre[80];
	size_t pl = strlen(bucket) + 1;
	const struct ol_heal_cursor *from = s->count ? NULL : s->from;
	unsigned ph = from ? from->phase : 0;
	int rc = 0;

	if (pl > sizeof(pre))
		return 0;
	memcpy(pre, bucket, pl);
	s->from = NULL;
	for (; !rc && ph < sizeof(phases) / sizeof(phases[0]); ph++) {
		const void *after = from && ph == from->phase ? from->key : NULL;
		size_t al = after ? from->key_len : 0;

		if (!s->count)
			cursor_at(s, bucket, ph, after, al);
		rc = each_key_from(s, phases[ph].db, pre, pl, phases[ph].raw, phases[ph].fn, NULL,
				   after, al, !s->count);
	}
	return rc;
}

static void
bucket_rec_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	char name[80];
	int *rc = arg;

	(void)pre;
	(void)pl;
	if (*rc || it->kl >= sizeof(name))
		return;
	memcpy(name, it->k, it->kl);
	name[it->kl] = 0;
	if (!s->count && s->from) { /* resuming: buckets before the cursor's are done */
		int c = strcmp(name, s->from->bucket);

		if (c < 0)
			return;
		if (c > 0)
			s->from = NULL; /* the cursor's bucket is gone: this one from its start */
	}
	if (!s->count) {
		pthread_rwlock_rdlock(&s->st->bucket_lock);
		restore_raw(s, OL_META_BUCKETS, it->k, it->kl, it->vals, it->lens);
		pthread_rwlock_unlock(&s->st->bucket_lock);
	}
	*rc = bucket_fn(s, name);
}

/* ---- one key (missed-write records, missed.c) ---- */

/* The item of index key k (its first pl bytes the prefix) as gather makes it, read from
 * every drive. false: nothing resolves (raw: no drive holds it). */
static bool
key_item(struct ol_store *st, enum ol_meta_db db, const char *k, size_t kl, size_t pl, bool raw,
	 struct item *it)
{
	struct ol_reads r;
	bool ok;

	memset(it, 0, sizeof(*it));
	memcpy(it->k, k + pl, kl - pl);
	it->kl = kl - pl;
	ol_reads_get(st, db, k, kl, NULL, &r);
	ok = take(st, it, (const void *const *)r.raw, r.len, raw);
	ol_reads_free(&r);
	return ok;
}

/* A version of one key, found by each_key under "bucket \0 key \0": version_fn wants the
 * bucket prefix (its length in *arg) and the rest. */
static void
key_version_fn(struct scan *s, const char *pre, size_t pl, const struct item *it, void *arg)
{
	size_t bpl = *(const size_t *)arg;
	struct item *v = ol_xmalloc(sizeof(*v));

	*v = *it;
	if (pl - bpl + it->kl <= sizeof(v->k)) {
		memcpy(v->k, pre + bpl, pl - bpl);
		memcpy(v->k + pl - bpl, it->k, it->kl);
		v->kl = pl - bpl + it->kl;
		version_fn(s, pre, bpl, v, NULL);
	}
	free(v);
}

/* Drives that hold the resolved record of k now (all when nothing resolves). */
static uint32_t
key_have(struct ol_store *st, enum ol_meta_db db, const char *k, size_t kl, size_t pl, bool raw,
	 struct item *it)
{
	uint32_t have = 0;
	int votes = 0;

	if (!key_item(st, db, k, kl, pl, raw, it))
		return ~0u;
	for (int d = 0; d < st->n; d++) {
		bool h = raw ? it->vals[d] != NULL : it->valid[d];

		votes += h;
		have |= h ? 1u << d : 0;
	}
	free(it->raw);
	return raw && votes < st->k ? ~0u : have;
}

void
ol_heal_key(struct ol_store *st, struct ol_heal_progress *p, struct ol_heal_pace *pc,
	    enum ol_meta_db db, const char *k, size_t kl, uint32_t *have)
{
	struct scan s = {.st = st, .p = p, .rate = pc->rate, .paced = pc->paced, .t0 = pc->t0};
	const char *z = memchr(k, 0, kl);
	size_t pl = z ? (size_t)(z - k) + 1 : 0; /* bucket '\0' */
	bool raw = db == OL_META_BUCKETS || db == OL_META_UPLOADS;
	struct item *it = ol_xmalloc(sizeof(*it));
	char vpre[OL_KEYBUF + 1];

	*have = ~0u;
	if (db == OL_META_BUCKETS)
		pl = 0;
	else if (!z || kl >= OL_KEYBUF || (db == OL_META_PARTS && kl < pl + 37))
		goto out; /* not a key of ours: nothing to heal */
	if (db == OL_META_PARTS)
		pl = kl - 4;
	if (key_item(st, db, k, kl, pl, raw, it)) {
		if (db == OL_META_BUCKETS) {
			pthread_rwlock_rdlock(&st->bucket_lock);
			restore_raw(&s, db, k, kl, it->vals, it->lens);
			pthread_rwlock_unlock(&st->bucket_lock);
		} else if (db == OL_META_OBJECTS) {
			object_fn(&s, k, pl, it, NULL);
		} else if (db == OL_META_VERSIONS) {
			version_fn(&s, k, pl, it, NULL);
		} else if (db == OL_META_UPLOADS) {
			upload_fn(&s, k, pl, it, NULL);
		} else if (db == OL_META_PARTS) {
			part_fn(&s, k, pl, it, NULL);
		}
		free(it->raw);
	}
	if (db == OL_META_OBJECTS) { /* its versions ("bucket \0 key \0 ...") */
		size_t bpl = pl;

		memcpy(vpre, k, kl);
		vpre[kl] = 0;
		each_key(&s, OL_META_VERSIONS, vpre, kl + 1, false, key_version_fn, &bpl);
	}
	*have = key_have(st, db, k, kl, pl, raw, it);
out:
	pc->paced = s.paced;
	free(it);
}

static int
pass(struct scan *s)
{
	int rc = 0, r2;

	r2 = each_key(s, OL_META_BUCKETS, "", 0, true, bucket_rec_fn, &rc);
	return rc ? rc : r2;
}

static void
reset(struct ol_heal_progress *p)
{
	atomic_store(&p->objects_total, 0);
	atomic_store(&p->objects_scanned, 0);
	atomic_store(&p->bytes_total, 0);
	atomic_store(&p->bytes_scanned, 0);
	atomic_store(&p->shards_healed, 0);
	atomic_store(&p->blocks_healed, 0);
	atomic_store(&p->records_restored, 0);
	atomic_store(&p->unrecoverable, 0);
	atomic_store(&p->missed_healed, 0);
	atomic_store(&p->unwritten_gone, 0);
	atomic_store(&p->unreadable_offline, 0);
	atomic_store(&p->finished_ns, 0);
	atomic_store(&p->started_ns, ol_clock_wall_ns());
	atomic_store(&p->result, 0);
}

/* Missed writes first: what returning drives lack, without walking the store. */
static int
heal_missed(struct ol_store *const *sets, int n, struct scan *s)
{
	struct ol_heal_pace pc = {.rate = s->rate, .t0 = (int64_t)ol_clock_ns()};
	int rc = 0;

	for (int i = 0; !rc && i < n; i++)
		rc = ol_missed_heal(sets[i], s->p, &pc);
	if (atomic_load(&s->p->missed_healed))
		ol_info("store: heal: %llu missed writes restored",
			(unsigned long long)atomic_load(&s->p->missed_healed));
	return rc;
}

/* A drive that failed a heal's write and is gone at the end (offline, or its node does not
 * answer a ping: killed or cut off during the heal) is not the heal's failure: nothing that
 * reads uses it now, and its return starts a heal ([storage] heal_on_return) that writes what
 * it lacks. One still online is: -EAGAIN, the store is not whole. */
static int
unwritten_online(struct ol_store *const *sets, int n, const struct scan *s)
{
	uint64_t online = 0, gone = 0;

	for (int i = 0; i < n && i < OL_MAX_SETS; i++) {
		struct ol_store *st = sets[i];

		for (int d = 0; d < st->n; d++) {
			if (!s->unw[i][d])
				continue;
			struct ol_meta *m = atomic_load(&st->d[d].meta);
			int ping = m && ol_drive_remote(st, d) ? ol_rd_ping(st->d[d].rd) : 0;
			/* its node does not answer: offline now, so that its return (the monitor's
			 * next good ping) starts the heal this one leaves to it */
			if (m && ping)
				ol_drive_offline(st, d, m, false,
						 "its node did not answer the heal's ping");
			if (m && !ping) {
				online += s->unw[i][d];
				ol_warn(
				    "store: heal: drive %s is online and %u shard file(s) or "
				    "block(s) could not be written on it (see the warnings above)",
				    st->d[d].root, s->unw[i][d]);
			} else {
				gone += s->unw[i][d];
				ol_warn(
				    "store: heal: drive %s is offline or unreachable now and %u "
				    "shard file(s) or block(s) were not written on it: the heal "
				    "at its return writes them",
				    st->d[d].root, s->unw[i][d]);
			}
		}
	}
	atomic_store(&s->p->unwritten_gone, gone);
	if (!online)
		return 0;
	ol_warn("store: heal: %llu shard file(s) or block(s) could not be written on drives that "
		"are online: the store is not whole; fix the drive and run the heal again",
		(unsigned long long)online);
	return -EAGAIN;
}

int
ol_set_heal_all(struct ol_store *const *sets, int n, const struct ol_heal_opts *o,
		struct ol_heal_progress *p)
{
	struct scan s = {.p = p, .rate = o ? o->rate_bytes : 0};
	const struct ol_heal_cursor *from = resume_from(sets, n, o ? o->from : NULL);
	int busy = 0, rc = 0;

	if (!atomic_compare_exchange_strong(&heal_busy, &busy, 1))
		return -EBUSY;
	reset(p);
	cursor_lock(p, true);
	p->cursor_set = from != NULL;
	if (from)
		p->cursor = *from;
	cursor_lock(p, false);
	atomic_store(&p->missed_only, o && o->missed_only);
	atomic_store(&p->running, 1);
	ol_info("store: heal started%s%s", o && o->missed_only ? " (missed writes only)" : "",
		s.rate ? " (rate limited)" : "");
	if (from)
		ol_info("store: heal resumes its scan after set %u, bucket '%s', %s, %zu-byte key",
			from->set, from->bucket,
			from->phase == 0   ? "objects"
			: from->phase == 1 ? "versions"
					   : "uploads",
			from->key_len);
	rc = heal_missed(sets, n, &s);
	s.count = true;
	for (int i = 0; !rc && !(o && o->missed_only) && i < n; i++) {
		s.st = sets[i];
		rc = pass(&s);
	}
	s.count = false;
	s.t0 = (int64_t)ol_clock_ns();
	s.paced = 0;
	for (int i = from ? (int)from->set : 0; !rc && !(o && o->missed_only) && i < n; i++) {
		s.st = sets[i];
		s.set_idx = (unsigned)i;
		s.from = from && i == (int)from->set ? from : NULL;
		if (!s.from)
			cursor_at(&s, "", 0, NULL, 0);
		rc = pass(&s);
	}
	if (!rc)
		rc = unwritten_online(sets, n, &s);
	for (int i = 0; !rc && !(o && o->missed_only) && i < n; i++)
		ol_sweep_orphans(sets[i], ol_sweep_grace(sets[i]));
	if (rc)
		ol_warn("store: heal: orphan sweep skipped: the heal did not finish (%s)",
			strerror(-rc));
	ol_info("store: heal %s: %llu objects, %llu shards healed, %llu records restored, "
		"%llu unrecoverable, %llu unreadable with drives offline",
		rc == -ECANCELED ? "cancelled"
		: rc		 ? "failed"
				 : "done",
		(unsigned long long)atomic_load(&p->objects_scanned),
		(unsigned long long)atomic_load(&p->shards_healed),
		(unsigned long long)atomic_load(&p->records_restored),
		(unsigned long long)atomic_load(&p->unrecoverable),
		(unsigned long long)atomic_load(&p->unreadable_offline));
	atomic_store(&p->result, rc);
	atomic_store(&p->finished_ns, ol_clock_wall_ns());
	atomic_store(&p->running, 0);
	atomic_store(&p->cancel, 0);
	atomic_store(&heal_busy, 0);
	return rc;
}

void
ol_store_heal_cancel(struct ol_heal_progress *p)
{
	atomic_store(&p->cancel, 1);
}
