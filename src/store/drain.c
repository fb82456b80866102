/* store/drain.c - emptying a pool into the others (`openlake cluster leave`), and the key
 * gates that keep object calls off a key while it moves.
 *
 * A store of several pools counts each object call in at the gate of its key (a stripe of
 * OL_GATES by the placement hash) from before it looks the key up until it is done (a writer:
 * until put_commit or put_abort). The drain closes a key's gate, waits until no call is in
 * flight on it, moves all of the key (every version and delete marker, oldest first, with
 * their ids and mtimes: ol_import_cur), removes it from the draining pool and opens the gate.
 * So a call sees the key in the draining pool before the move or in its new pool after it,
 * never half moved, and a write on the key is never lost under the move: it lands before the
 * copy (and is copied) or after it (in the new pool, where the key now is). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "store/store_int.h"

_Thread_local const struct ol_import *ol_import_cur;

#define GATE_WAIT_MS 10000 /* calls in flight on a key: wait this long, then skip the key */
#define CHUNK	     (1u << 20)
#define BATCH	     128    /* keys taken per iterator opening (iterators hold read txns) */
#define MAX_VERS     100000 /* versions of one key the drain moves (more: the key stays) */
#define QUIESCE_MS   30000  /* calls in flight at a pass that found the pool empty: waited */

static void
nap_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&t, NULL);
}

#define EPOCH_BIT (1u << 31) /* in a gate's token: the call counted in gate_busy[1] */

unsigned
ol_gate_enter(struct ol_store *st, uint64_t h)
{
	unsigned i = (unsigned)(h % OL_GATES);

	for (;;) {
		unsigned e = atomic_load(&st->gate_epoch) & 1;

		atomic_fetch_add(&st->gate_busy[e][i], 1);
		/* the epoch moved on meanwhile (counted anew), or the gate is closed (wait) */
		if ((atomic_load(&st->gate_epoch) & 1) == e && !atomic_load(&st->gate_closed[i]))
			return (i + 1) | (e ? EPOCH_BIT : 0);
		atomic_fetch_sub(&st->gate_busy[e][i], 1);
		if ((atomic_load(&st->gate_epoch) & 1) == e)
			nap_ms(1);
	}
}

void
ol_gate_leave(struct ol_store *st, unsigned g)
{
	if (g)
		atomic_fetch_sub(&st->gate_busy[(g & EPOCH_BIT) ? 1 : 0][(g & ~EPOCH_BIT) - 1], 1);
}

/* whether a call counted in epoch parity e is in flight on any gate */
static bool
epoch_busy(struct ol_store *st, unsigned e)
{
	for (unsigned i = 0; i < OL_GATES; i++)
		if (atomic_load(&st->gate_busy[e][i]))
			return true;
	return false;
}

/* 0 once every object call in flight when the wait began has ended (the gates' epoch moves
 * on; the calls of the new one are not waited for), -EBUSY when some still run after
 * QUIESCE_MS. st->gate_waiting keeps the epoch still waited for after a -EBUSY (also across
 * drains): the epoch moves on only once the count it moves into has no call left of an older
 * wait, so the calls of an epoch are never mixed with those of one two moves before. */
static int
calls_ended(struct ol_store *st, const struct ol_drain_progress *p)
{
	uint64_t until = ol_clock_ms() + QUIESCE_MS;

	for (;;) {
		bool fresh = !st->gate_waiting;

		if (fresh)
			st->gate_waiting = (int)(atomic_fetch_add(&st->gate_epoch, 1) & 1) + 1;
		while (epoch_busy(st, (unsigned)st->gate_waiting - 1)) {
			if (ol_clock_ms() > until || atomic_load(&p->cancel))
				return -EBUSY;
			nap_ms(1);
		}
		st->gate_waiting = 0;
		if (fresh)
			return 0;
		/* that was an older wait's epoch: now the calls in flight at this one */
	}
}

/* 0 once no call is in flight on h's gate (new ones wait), -EBUSY (gate opened again) */
static int
gate_close(struct ol_store *st, uint64_t h)
{
	unsigned i = (unsigned)(h % OL_GATES);
	uint64_t until = ol_clock_ms() + GATE_WAIT_MS;

	atomic_store(&st->gate_closed[i], true);
	while (atomic_load(&st->gate_busy[0][i]) || atomic_load(&st->gate_busy[1][i])) {
		if (ol_clock_ms() > until) {
			atomic_store(&st->gate_closed[i], false);
			return -EBUSY;
		}
		nap_ms(1);
	}
	return 0;
}

static void
gate_open(struct ol_store *st, uint64_t h)
{
	atomic_store(&st->gate_closed[h % OL_GATES], false);
}

int
ol_store_pool_set_draining(struct ol_store *st, int pool)
{
	if (st->readonly)
		return -EROFS;
	if (st->n_sets < 2 || st->n_pools < 2 || pool < -1 || pool >= st->n_pools)
		return -EINVAL;
	atomic_store(&st->draining, pool);
	return 0;
}

void
ol_store_drain_cancel(struct ol_drain_progress *p)
{
	atomic_store(&p->cancel, 1);
}

struct drain {
	struct ol_store *st;
	const struct ol_drain_opts *o;
	unsigned pool;
	uint64_t rate, copied;
	int64_t t0;
	struct ol_drain_progress *p;
	uint8_t *buf;
	uint64_t found; /* keys (count pass: versions) seen by this pass */
};

struct ver {
	char id[OL_STORE_VID_MAX];
	int64_t mtime;
	bool marker;
	bool copied; /* written into the new pool by this move (undone if the move fails) */
};

struct vlist {
	struct ver *v;
	size_t n, cap;
	bool indexed; /* in the versions index (a bucket that was ever versioned) */
};

static void
vpush(struct vlist *l, const char *id, int64_t mtime, bool marker)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 8;
		l->v = ol_xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	snprintf(l->v[l->n].id, sizeof(l->v[l->n].id), "%s", id);
	l->v[l->n].mtime = mtime;
	l->v[l->n].copied = false;
	l->v[l->n++].marker = marker;
}

/* key's versions on set s, newest first */
static int
key_versions(struct ol_store *s, const char *bucket, const char *key, size_t klen, struct vlist *l)
{
	struct ol_viter *it;
	struct ol_obj_info info;
	const char *k;
	size_t kl;
	int rc = ol_set_viter_open(s, bucket, &it);

	if (rc)
		return rc;
	rc = ol_set_viter_seek(it, key, klen);
	while (!rc && (rc = ol_set_viter_next(it, &k, &kl, &info)) == 1) {
		rc = 0;
		if (kl != klen || memcmp(k, key, klen))
			break;
		if (l->n == MAX_VERS) { /* moved whole or not at all: the oldest go first */
			rc = -E2BIG;
			break;
		}
		vpush(l, info.version_id, info.mtime_ns, info.delete_marker);
	}
	ol_set_viter_close(it);
	/* the iterator also lists a key never written versioned (its one "null" record, not in
	 * the versions index): moved as an unversioned write, it stays out of the index there
	 * too; a null version alone in the index (versioning suspended) moves the same way,
	 * which reads and lists the same */
	l->indexed = l->n > 1 || (l->n == 1 && (strcmp(l->v[0].id, "null") || l->v[0].marker));
	return rc < 0 ? rc : 0;
}

/* the rate limit: sleep until copied bytes are within the rate (cancel-aware) */
static void
pace(struct drain *d, uint64_t n)
{
	d->copied += n;
	if (!d->rate)
		return;
	for (;;) {
		int64_t due =
		    d->t0 + (int64_t)(d->copied * 1000 / d->rate) - (int64_t)ol_clock_ms();

		if (due <= 0 || atomic_load(&d->p->cancel))
			return;
		nap_ms(due > 100 ? 100 : (int)due);
	}
}

/* bytes [off, off + len) of g into writer w */
static int
copy_range(struct drain *d, struct ol_get *g, uint64_t off, uint64_t len, struct ol_put *w)
{
	while (len) {
		size_t want = len < CHUNK ? (size_t)len : CHUNK;
		ssize_t got = ol_store_get_read(g, off, d->buf, want);
		int rc;

		if (atomic_load(&d->p->cancel))
			return -ECANCELED; /* the source is untouched until every version is copied
					    */
		if (got < 0)
			return (int)got;
		if ((size_t)got != want)
			return -EIO;
		rc = ol_store_put_write(w, d->buf, want);
		if (rc)
			return rc;
		pace(d, want);
		off += want;
		len -= want;
	}
	return 0;
}

/* a plain object: one writer, committed with the version's id and mtime */
static int
copy_plain(struct drain *d, unsigned di, struct ol_get *g, const struct ol_obj_info *in,
	   const char *bucket, const char *key, size_t klen, int vmode, const struct ol_import *imp)
{
	struct ol_store *dst = d->st->sets[di];
	struct ol_put *w = NULL;
	int rc = ol_set_put_begin(dst, bucket, key, klen, (int64_t)in->size, &w);

	if (rc == -ENOENT && ol_sets_repaired(d->st, di, bucket))
		rc = ol_set_put_begin(dst, bucket, key, klen, (int64_t)in->size, &w);
	if (rc)
		return rc;
	ol_store_put_set_vmode(w, vmode);
	rc = copy_range(d, g, 0, in->size, w);
	if (rc) {
		ol_store_put_abort(w);
		return rc;
	}
	ol_import_cur = imp;
	rc = ol_store_put_commit(w, in->etag, in->meta, in->meta_len, NULL);
	ol_import_cur = NULL;
	return rc;
}

/* a multipart object: the same parts (sizes), completed with the version's id and mtime */
static int
copy_parts(struct drain *d, unsigned di, struct ol_get *g, const struct ol_obj_info *in,
	   const char *bucket, const char *key, size_t klen, int vmode, const struct ol_import *imp)
{
	struct ol_store *dst = d->st->sets[di];
	unsigned n = ol_store_get_part_sizes(g, NULL, 0);
	uint64_t *sizes = ol_xcalloc(n ? n : 1, sizeof(*sizes));
	unsigned *nos = ol_xcalloc(n ? n : 1, sizeof(*nos));
	uint64_t off = 0;
	char uid[64];
	int rc;

	ol_store_get_part_sizes(g, sizes, n);
	rc = ol_set_mpu_create(dst, bucket, key, klen, in->meta, in->meta_len, uid);
	if (rc == -ENOENT && ol_sets_repaired(d->st, di, bucket))
		rc = ol_set_mpu_create(dst, bucket, key, klen, in->meta, in->meta_len, uid);
	if (rc)
		goto out;
	for (unsigned i = 0; !rc && i < n; i++) {
		struct ol_put *w = NULL;

		nos[i] = i + 1;
		rc = ol_set_mpu_part_begin(dst, bucket, uid, i + 1, &w);
		if (!rc && (rc = copy_range(d, g, off, sizes[i], w)))
			ol_store_put_abort(w);
		else if (!rc)
			rc = ol_store_put_commit(w, "", NULL, 0, NULL);
		off += sizes[i];
	}
	ol_import_cur = imp;
	if (!rc)
		rc = ol_set_mpu_complete_meta(dst, bucket, uid, nos, n, in->etag, NULL, vmode, NULL,
					      0, NULL);
	ol_import_cur = NULL;
	if (rc)
		ol_set_mpu_abort(dst, bucket, uid);
out:
	free(sizes);
	free(nos);
	return rc;
}

/* one version (or marker) v of key from set si into set di, unless di has it already (a
 * drain interrupted and started again) */
static int
copy_version(struct drain *d, unsigned si, unsigned di, const char *bucket, const char *key,
	     size_t klen, const struct vlist *l, struct ver *v)
{
	struct ol_store *src = d->st->sets[si], *dst = d->st->sets[di];
	struct ol_import imp = {.mtime = v->mtime};
	struct ol_obj_info info = {0};
	struct ol_get *g = NULL;
	bool null = !strcmp(v->id, "null");
	int vmode = !l->indexed ? OL_STORE_VER_OFF : null ? OL_STORE_VER_SUSP : OL_STORE_VER_ON;
	int rc = l->indexed ? ol_set_head_ver(dst, bucket, key, klen, v->id, &info, NULL, 0)
			    : ol_set_head(dst, bucket, key, klen, &info, NULL, 0);

	if ((rc == 0 || rc == OL_STORE_EDELMARK || (rc == -ENOENT && info.delete_marker)) &&
	    (null ? info.mtime_ns >= v->mtime : true))
		return 0;
	if (null || ol_ver_parse(v->id, &imp.mtime, imp.vid))
		ol_uuid(imp.vid);
	imp.mtime = v->mtime;
	if (v->marker) {
		ol_import_cur = &imp;
		rc = ol_set_delete_ver(dst, bucket, key, klen, vmode, NULL, NULL);
		ol_import_cur = NULL;
		if (rc == -ENXIO && ol_sets_repaired(d->st, di, bucket)) {
			ol_import_cur = &imp;
			rc = ol_set_delete_ver(dst, bucket, key, klen, vmode, NULL, NULL);
			ol_import_cur = NULL;
		}
		v->copied = rc == 0;
		return rc;
	}
	rc = l->indexed ? ol_set_get_open_ver(src, bucket, key, klen, v->id, &g, &info)
			: ol_set_get_open(src, bucket, key, klen, &g, &info);
	if (rc)
		return rc == -ENOENT ? 0 : rc; /* gone meanwhile: nothing to move */
	rc = info.n_parts > 1 ? copy_parts(d, di, g, &info, bucket, key, klen, vmode, &imp)
			      : copy_plain(d, di, g, &info, bucket, key, klen, vmode, &imp);
	if (!rc) {
		v->copied = true;
		atomic_fetch_add(&d->p->objects_moved, 1);
		atomic_fetch_add(&d->p->bytes_moved, info.size);
	}
	ol_store_get_close(g);
	return rc;
}

/* the key's versions, then their removal from set si (its gate closed) */
static int
move_locked(struct drain *d, unsigned si, unsigned di, const char *bucket, const char *key,
	    size_t klen)
{
	struct vlist l = {0};
	int rc = key_versions(d->st->sets[si], bucket, key, klen, &l);

	for (size_t i = l.n; !rc && i-- > 0;) {
		rc = copy_version(d, si, di, bucket, key, klen, &l, &l.v[i]);
		if (!rc && l.v[i].marker)
			atomic_fetch_add(&d->p->objects_moved, 1);
	}
	/* a copy failed (or the drain was cancelled): take back what this move wrote, so the
	 * key is in one pool when its gate opens (a crash here leaves older versions copied: the
	 * next drain finds them there and copies only the rest) */
	for (size_t i = 0; rc && i < l.n; i++)
		if (l.v[i].copied && l.indexed)
			(void)ol_set_delete_ver(d->st->sets[di], bucket, key, klen, OL_STORE_VER_ON,
						l.v[i].id, NULL);
	/* every version is in the new pool: only now leave the old one, oldest version first, so
	 * a move cut short here (a server deposed by a newer epoch, a crash) leaves the old pool
	 * with the key's newest versions: both pools then agree on its current version and on
	 * which version is latest, and a listing shows each version once (sets.c) */
	for (size_t i = l.n; !rc && i-- > 0;) {
		rc = l.indexed ? ol_set_delete_ver(d->st->sets[si], bucket, key, klen,
						   OL_STORE_VER_ON, l.v[i].id, NULL)
			       : ol_set_delete(d->st->sets[si], bucket, key, klen);
		if (rc == -ENOENT)
			rc = 0;
	}
	free(l.v);
	return rc;
}

static void
move_key(struct drain *d, unsigned si, const char *bucket, const char *key, size_t klen)
{
	uint64_t h;
	int di = ol_sets_key_dest(d->st, bucket, key, klen, &h), rc;

	if (di < 0)
		return;
	rc = gate_close(d->st, h);
	if (!rc) {
		rc = move_locked(d, si, (unsigned)di, bucket, key, klen);
		gate_open(d->st, h);
	}
	if (rc) {
		atomic_fetch_add(&d->p->failed, 1);
		ol_warn("store: drain of pool %u: %s/%.*s not moved yet (%s): next pass", d->pool,
			bucket, (int)(klen > 200 ? 200 : klen), key, strerror(-rc));
	}
}

struct batch {
	char *k[BATCH];
	size_t kl[BATCH];
	unsigned n;
	uint64_t versions, bytes; /* count pass */
};

static int
batch_add(struct batch *b, const char *k, size_t kl)
{
	if (b->n && b->kl[b->n - 1] == kl && !memcmp(b->k[b->n - 1], k, kl))
		return 0;
	if (b->n == BATCH)
		return 1;
	b->k[b->n] = ol_xmalloc(kl ? kl : 1);
	memcpy(b->k[b->n], k, kl);
	b->kl[b->n++] = kl;
	return 0;
}

/* up to BATCH keys of set s after (last, ll) (ll < 0: from the start); versions: the version
 * index (and only entries that are not current when counting), else the current objects */
static int
take_batch(struct ol_store *s, const char *bucket, bool versions, bool count, const char *last,
	   ssize_t ll, struct batch *b)
{
	void *it = NULL;
	const char *k;
	size_t kl;
	struct ol_obj_info info;
	int rc = versions ? ol_set_viter_open(s, bucket, (struct ol_viter **)&it)
			  : ol_set_iter_open(s, bucket, (struct ol_iter **)&it);

	if (rc)
		return rc == -ENOENT || rc == -ENXIO ? 0 : rc;
	rc = versions ? ol_set_viter_seek(it, last, ll < 0 ? 0 : (size_t)ll)
		      : ol_set_iter_seek(it, last, ll < 0 ? 0 : (size_t)ll);
	while (!rc) {
		rc = versions ? ol_set_viter_next(it, &k, &kl, &info)
			      : ol_set_iter_next(it, &k, &kl, &info);
		if (rc != 1)
			break;
		rc = 0;
		if (ll >= 0 && kl == (size_t)ll && !memcmp(k, last, kl))
			continue;
		if (count && versions && info.is_latest)
			continue;
		if (batch_add(b, k, kl))
			break;
		b->versions++;
		b->bytes += info.size;
	}
	if (versions)
		ol_set_viter_close(it);
	else
		ol_set_iter_close(it);
	return rc < 0 ? rc : 0;
}

/* every key of bucket on set s (count: only count them) */
static int
walk(struct drain *d, unsigned s, const char *bucket, bool versions, bool count)
{
	char last[OL_KEYBUF];
	ssize_t ll = -1;
	int rc = 0;

	while (!rc && !atomic_load(&d->p->cancel)) {
		struct batch b = {0};

		rc = take_batch(d->st->sets[s], bucket, versions, count, last, ll, &b);
		if (count) {
			atomic_fetch_add(&d->p->objects_left, b.versions);
			atomic_fetch_add(&d->p->bytes_left, b.bytes);
		}
		for (unsigned i = 0; i < b.n; i++) {
			if (!count)
				move_key(d, s, bucket, b.k[i], b.kl[i]);
			d->found++;
		}
		if (b.n) {
			memcpy(last, b.k[b.n - 1], b.kl[b.n - 1]);
			ll = (ssize_t)b.kl[b.n - 1];
		}
		for (unsigned i = 0; i < b.n; i++)
			free(b.k[i]);
		if (b.n < BATCH)
			break;
	}
	return rc;
}

struct names {
	char **v;
	size_t n;
};

static int
name_cb(const char *bucket, int64_t created_ns, void *arg)
{
	struct names *b = arg;

	(void)created_ns;
	b->v = ol_xrealloc(b->v, (b->n + 1) * sizeof(*b->v));
	b->v[b->n++] = ol_xstrdup(bucket);
	return 0;
}

static int
upload_cb(const char *key, size_t kl, const char *id, int64_t init, const void *meta, size_t ml,
	  void *arg)
{
	(void)key, (void)kl, (void)id, (void)init, (void)meta, (void)ml;
	++*(uint64_t *)arg;
	return 0;
}

/* one pass over every bucket on every set of the pool: count, or move */
static int
pass(struct drain *d, bool count, uint64_t *uploads)
{
	struct names b = {0};
	int rc = ol_set_bucket_list(d->st->sets[0], name_cb, &b);
	int first = d->st->pool_first[d->pool], end = d->st->pool_first[d->pool + 1];

	d->found = 0;
	for (size_t i = 0; !rc && i < b.n; i++)
		for (int s = first; !rc && s < end; s++) {
			if (atomic_load(&d->p->cancel))
				rc = -ECANCELED;
			/* a count's uploads before its objects: a multipart complete turns an
			 * upload into an object in one commit, so an upload completed after
			 * this listing has its object there for the walks below; the other way
			 * round, one completed between the walks and the listing would be seen
			 * as neither, and the pool removed with its object in it */
			if (!rc && uploads) {
				ol_set_mpu_list(d->st->sets[s], b.v[i], upload_cb, uploads);
				if (d->o && d->o->counting)
					d->o->counting(d->o->arg);
			}
			if (!rc)
				rc = walk(d, (unsigned)s, b.v[i], false, count);
			if (!rc)
				rc = walk(d, (unsigned)s, b.v[i], true, count);
		}
	for (size_t i = 0; i < b.n; i++)
		free(b.v[i]);
	free(b.v);
	return rc;
}

/* The home pool (its first set is the store's set 0, where buckets live first) is empty:
 * before it may be removed, every bucket goes with its attrs to every set of the other
 * pools, so the next pool's set 0, the home once this pool is gone, has them all (also buckets
 * never used there, and the daemon's own, e.g. the run-time S3 keys'). Not done: not empty. */
static int
give_buckets(struct drain *d, bool *empty)
{
	unsigned n = 0;
	int rc = ol_sets_give_buckets(d->st, d->pool, &n);

	if (rc) {
		*empty = false;
		ol_warn("store: drain of pool %u: the buckets cannot be given to the other pools "
			"yet (%s): next pass",
			d->pool, strerror(-rc));
		return 0;
	}
	ol_info("store: drain of pool %u: its %u bucket(s), with their attrs, are on every set "
		"of the other pools",
		d->pool, n);
	return 0;
}

/* one count pass and one move pass: 0 and *empty when the pool held nothing to move */
static int
round_once(struct drain *d, bool *empty)
{
	struct ol_drain_progress *p = d->p;
	uint64_t uploads = 0;
	int rc;

	atomic_store(&p->objects_left, 0);
	atomic_store(&p->bytes_left, 0);
	atomic_fetch_add(&p->passes, 1);
	rc = pass(d, true, &uploads);
	atomic_store(&p->uploads, uploads);
	ol_info("store: drain of pool %u, pass %llu: %llu versions (%llu bytes) to move, %llu "
		"uploads in progress there",
		d->pool, (unsigned long long)atomic_load(&p->passes),
		(unsigned long long)atomic_load(&p->objects_left),
		(unsigned long long)atomic_load(&p->bytes_left), (unsigned long long)uploads);
	*empty = !rc && !d->found && !uploads;
	if (*empty && d->st->pool_first[d->pool] == 0)
		rc = give_buckets(d, empty);
	if (rc || *empty)
		return rc;
	rc = pass(d, false, NULL);
	atomic_store(&p->objects_left, 0);
	atomic_store(&p->bytes_left, 0);
	return rc;
}

int
ol_store_drain(struct ol_store *st, unsigned pool, const struct ol_drain_opts *o,
	       struct ol_drain_progress *p)
{
	struct drain d = {.st = st,
			  .o = o,
			  .pool = pool,
			  .rate = o ? o->rate_bytes : 0,
			  .t0 = (int64_t)ol_clock_ms(),
			  .p = p,
			  .buf = NULL};
	bool empty = false;
	int rc = 0;

	if (st->readonly)
		return -EROFS;
	if (st->n_sets < 2 || st->n_pools < 2 || atomic_load(&st->draining) != (int)pool)
		return -EINVAL;
	d.buf = ol_xmalloc(CHUNK);
	atomic_store(&p->running, 1);
	ol_info("store: draining pool %u into the other %d pool(s)%s", pool, st->n_pools - 1,
		d.rate ? " (rate limited)" : "");
	/* Empty only when a pass finds it so, the object calls in flight then have ended, and
	 * the next pass finds it so again: a multipart complete (or any commit) in flight while
	 * a pass looks can be on too few drives for its upload to list and for its object to
	 * walk; once it has ended it is on its quorum (or failed), and seen. A call that begins
	 * after an empty pass finds nothing of the pool to write to (no key, no upload there;
	 * new keys never go there) */
	for (int empties = 0; empties < 2;) {
		rc = round_once(&d, &empty);
		if (atomic_load(&p->cancel))
			rc = -ECANCELED;
		if (rc == -ECANCELED)
			break;
		if (rc)
			ol_warn("store: drain of pool %u: %s: next pass", pool, strerror(-rc));
		empties = !rc && empty ? empties + 1 : 0;
		if (empties == 1 && calls_ended(st, p)) {
			ol_info("store: drain of pool %u: calls in flight for over %d s: the pool "
				"is counted again once they end",
				pool, QUIESCE_MS / 1000);
			empties = 0;
		}
		for (int i = 0; !empties && i < 10 && !atomic_load(&p->cancel); i++)
			nap_ms(100);
		rc = 0;
	}
	ol_info("store: drain of pool %u %s: %llu versions (%llu bytes) moved", pool,
		rc ? "cancelled" : "done: the pool is empty",
		(unsigned long long)atomic_load(&p->objects_moved),
		(unsigned long long)atomic_load(&p->bytes_moved));
	free(d.buf);
	atomic_store(&p->result, rc);
	atomic_store(&p->running, 0);
	return rc;
}
