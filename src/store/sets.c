/* store/sets.c - a store of several erasure sets behind the one API of store.h (issue 10).
 *
 * A store is m sets of N drives. A one-set store (m = 1, every store before issue 10) is its
 * own only set: every call goes straight to the set's engine (ol_set_*), nothing allocated,
 * the bytes on disk and the placement as they always were. A store of m > 1 sets is a shell
 * whose sets[] are one-set stores:
 *   - an object lives in one set: XXH3-64 of bucket '\0' key, seeded with the store's
 *     placement seed (the store id of the drives' format records, or the cluster's deployment
 *     id), modulo m. The choice never changes for a store (its set count cannot change);
 *   - an upload lives in the set of its key; its id's first byte (2 hex chars) is that set,
 *     so the calls that name only the upload id find it;
 *   - a bucket is on every set. Set 0 is its home: exists, stat, attrs and the bucket list
 *     read set 0. Create makes sets 1..m-1 then set 0; delete checks every set is empty and
 *     deletes sets 1..m-1 then set 0; so a crash in between leaves a bucket that set 0 has and
 *     another set lacks, which the first call that needs it there repairs (the set is given the
 *     bucket with set 0's attrs). brw orders create/delete (writers) against repairs;
 *   - listings (objects, versions, uploads) merge the sets' ordered streams by key.
 * A shell may also hold several pools (ol_store_pools: a cluster grown by `openlake cluster
 * join`), each its own run of sets[]: a key that exists stays in the pool that holds it
 * (found by a head in each pool's set of the key), a new key goes to a pool picked by a second
 * hash of the key weighted by the pools' free space, and inside a pool to the keyed hash
 * modulo the pool's set count; one pool places exactly as above, with no lookup.
 * See docs/ARCHITECTURE.md (Erasure sets) and docs/cluster.md (Pools). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/config.h"
#include "base/hex.h"
#include "base/log.h"
#include "store/store_int.h"

static inline bool
multi(const struct ol_store *st)
{
	return st->n_sets > 1;
}

/* The keyed hash of bucket '\0' key; false (and 0) for names the sets refuse anyway. */
static bool
key_hash(const struct ol_store *st, const char *bucket, const char *key, size_t klen, uint64_t *h)
{
	char buf[OL_KEYBUF];
	size_t bl = strlen(bucket);

	*h = 0;
	if (bl > 64 || klen > OL_STORE_MAX_KEY)
		return false;
	memcpy(buf, bucket, bl + 1);
	memcpy(buf + bl + 1, key, klen);
	*h = XXH3_64bits_withSeed(buf, bl + 1 + klen, st->place_seed);
	return true;
}

/* the set of hash h inside pool p */
static unsigned
in_pool(const struct ol_store *st, int p, uint64_t h)
{
	int first = st->pool_first[p], m = st->pool_first[p + 1] - first;

	return (unsigned)first + (unsigned)(h % (uint64_t)m);
}

/* The pool of a new key: a second hash of the key over the pools' free space (equal weights
 * when none is known), so every call picks the same pool while the weights hold; never a
 * draining pool (its weight is 0). */
static int
pick_pool(const struct ol_store *st, uint64_t h)
{
	uint64_t w[OL_MAX_POOLS], total = 0, r;
	int drain = atomic_load(&((struct ol_store *)st)->draining);

	for (int p = 0; p < st->n_pools; p++)
		total += w[p] =
		    p == drain ? 0 : atomic_load(&((struct ol_store *)st)->pool_free[p]);
	if (!total)
		for (int p = 0; p < st->n_pools; p++)
			total += w[p] = p != drain;
	r = XXH3_64bits_withSeed(&h, sizeof(h), st->place_seed ^ 0x706f6f6cULL) % total;
	for (int p = 0; p < st->n_pools; p++) {
		if (r < w[p])
			return p;
		r -= w[p];
	}
	return st->n_pools - 1;
}

static bool repaired(struct ol_store *st, unsigned i, const char *bucket);

/* Does set s hold key (a current version or a current delete marker)? 1 and its mtime, 0
 * not there (or no bucket on set 0: the call itself answers that), -errno unknown. */
static int
holds(struct ol_store *st, unsigned s, const char *bucket, const char *key, size_t klen,
      const char *vid, int64_t *mtime)
{
	struct ol_obj_info info;
	int rc;

	for (int tries = 0; tries < 2; tries++) {
		memset(&info, 0, sizeof(info));
		rc = vid ? ol_set_head_ver(st->sets[s], bucket, key, klen, vid, &info, NULL, 0)
			 : ol_set_head(st->sets[s], bucket, key, klen, &info, NULL, 0);
		if (rc != -ENXIO || !repaired(st, s, bucket))
			break;
	}
	*mtime = info.mtime_ns;
	if (rc == 0 || rc == OL_STORE_EDELMARK || (rc == -ENOENT && info.delete_marker))
		return 1;
	if (rc == -ENOENT || rc == -ENXIO || rc == -EINVAL)
		return 0;
	return rc;
}

/* A key found in several pools: warn, at most once a minute (a hot key would flood the log). */
static void
warn_twice(const char *bucket, const char *key, size_t klen, int found, int best)
{
	static _Atomic int64_t last;
	static _Atomic unsigned quiet;
	int64_t now = (int64_t)time(NULL), was = atomic_load(&last);

	if (now - was < 60 || !atomic_compare_exchange_strong(&last, &was, now)) {
		atomic_fetch_add(&quiet, 1);
		return;
	}
	ol_warn("store: %s/%.*s is in %d pools (two writers raced): the newest, in set %d, wins "
		"(%u more such lookups since the last warning)",
		bucket, (int)(klen > 200 ? 200 : klen), key, found, best,
		atomic_exchange(&quiet, 0));
}

/* A delete removed the key (vid NULL: a plain delete) or one version of it (vid) from set
 * `done`: remove the same from the other pools too, or the next read would find it there. A
 * race can leave older copies of a key in two pools; a drain's leader killed in the middle of
 * a key's move leaves copies of its older versions in the new pool (same ids, drain.c), and
 * without this the copy left there would be the version "deleted", back in every listing. */
static void
drop_copies(struct ol_store *st, const char *bucket, const char *key, size_t klen, const char *vid,
	    unsigned done)
{
	uint64_t h;
	int64_t t;

	if (!key_hash(st, bucket, key, klen, &h))
		return;
	for (int p = 0; p < st->n_pools; p++) {
		unsigned s = in_pool(st, p, h);

		if (s == done || holds(st, s, bucket, key, klen, vid, &t) != 1)
			continue;
		if ((vid ? ol_set_delete_ver(st->sets[s], bucket, key, klen, OL_STORE_VER_ON, vid,
					     NULL)
			 : ol_set_delete(st->sets[s], bucket, key, klen)) == 0)
			ol_info("store: %s/%.*s: deleted its copy%s%s in set %u too", bucket,
				(int)(klen > 200 ? 200 : klen), key, vid ? " of version " : "",
				vid ? vid : "", s);
	}
}

/* Count a call on key in at its gate (a store of several pools; 0: none): a drain moving
 * the key waits for it, and it waits for the move (drain.c). */
static unsigned
gate_key(struct ol_store *st, const char *bucket, const char *key, size_t klen)
{
	uint64_t h;

	if (st->n_pools <= 1 || !key_hash(st, bucket, key, klen, &h))
		return 0;
	return ol_gate_enter(st, h);
}

/* The set a call on key goes to (>= 0) or -errno (a pool that cannot say whether it holds
 * the key: a write there could leave it in two pools, a read could miss it). One pool: the
 * keyed hash, no lookup. Several: the pool that holds the key (vid: that version), the newest
 * when a race left it in several; none: a new key, pick_pool's. */
static int
locate(struct ol_store *st, const char *bucket, const char *key, size_t klen, const char *vid)
{
	int best = -1, found = 0, err = 0;
	int64_t best_t = 0;
	uint64_t h;

	if (!key_hash(st, bucket, key, klen, &h))
		return 0;
	if (st->n_pools <= 1)
		return (int)in_pool(st, 0, h);
	for (int p = 0; p < st->n_pools; p++) {
		unsigned s = in_pool(st, p, h);
		int64_t t;
		int rc = holds(st, s, bucket, key, klen, vid, &t);

		if (rc < 0 && !err)
			err = rc;
		if (rc == 1 && (found++, best < 0 || t > best_t)) {
			best = (int)s;
			best_t = t;
		}
	}
	if (found > 1)
		warn_twice(bucket, key, klen, found, best);
	if (best >= 0)
		return best;
	if (err)
		return err;
	return (int)in_pool(st, pick_pool(st, h), h);
}

/* The set of an upload id (its first byte, two hex digits), or -1. */
static int
upload_set(const struct ol_store *st, const char *id)
{
	uint8_t v;

	if (strnlen(id, 2) < 2 || ol_hex_decode(id, 1, &v))
		return -1;
	return v < st->n_sets ? v : -1;
}

/* Set i lacks bucket (it answered "no bucket"): give it the bucket with set 0's attrs when set
 * 0 has it. Caller holds brw (read or write). 0 repaired (or there already), -ENOENT. */
static int
repair_locked(struct ol_store *st, unsigned i, const char *bucket)
{
	void *attrs = NULL;
	size_t len = 0;
	int rc;

	if (i == 0)
		return -ENOENT;
	rc = ol_set_bucket_attrs(st->sets[0], bucket, &attrs, &len);
	if (rc)
		return -ENOENT;
	rc = ol_set_bucket_create_attrs(st->sets[i], bucket, attrs, len);
	free(attrs);
	if (rc == -EEXIST)
		rc = 0;
	if (rc)
		ol_warn("store: set %u lacks bucket %s and it cannot be repaired: %s", i, bucket,
			strerror(-rc));
	else
		ol_info("store: set %u lacked bucket %s: repaired from set 0", i, bucket);
	return rc ? -ENOENT : 0;
}

/* true when the call that said "no bucket" on set i should be tried again */
static bool
repaired(struct ol_store *st, unsigned i, const char *bucket)
{
	int rc;

	if (i == 0 || st->readonly) /* a read-only view gives no bucket to a set */
		return false;
	pthread_rwlock_rdlock(&st->brw);
	rc = repair_locked(st, i, bucket);
	pthread_rwlock_unlock(&st->brw);
	return rc == 0;
}

bool
ol_sets_repaired(struct ol_store *st, unsigned i, const char *bucket)
{
	return repaired(st, i, bucket);
}

struct bucket_rec {
	char name[64];
	int64_t created;
	void *attrs;
	size_t len;
};

struct bucket_recs {
	struct bucket_rec *v;
	size_t n;
};

static int
collect_bucket(const char *name, int64_t created, const void *attrs, size_t len, void *arg)
{
	struct bucket_recs *b = arg;
	struct bucket_rec *r;

	if (strlen(name) >= sizeof(r->name))
		return 0;
	b->v = ol_xrealloc(b->v, (b->n + 1) * sizeof(*b->v));
	r = &b->v[b->n++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->created = created;
	r->len = len;
	r->attrs = ol_xmalloc(len ? len : 1);
	if (len)
		memcpy(r->attrs, attrs, len);
	return 0;
}

int
ol_sets_give_buckets(struct ol_store *st, unsigned pool, unsigned *n)
{
	struct bucket_recs b = {0};
	int first, end, rc;

	*n = 0;
	if (!multi(st) || (int)pool >= st->n_pools)
		return -EINVAL;
	first = st->pool_first[pool];
	end = st->pool_first[pool + 1];
	pthread_rwlock_wrlock(&st->brw);
	rc = ol_set_bucket_list_attrs(st->sets[0], collect_bucket, &b);
	for (size_t i = 0; !rc && i < b.n; i++) {
		const struct bucket_rec *r = &b.v[i];

		for (int s = 0; !rc && s < st->n_sets; s++)
			if (s < first || s >= end)
				rc = ol_set_bucket_copy(st->sets[s], r->name, r->created, r->attrs,
							r->len);
		if (rc)
			ol_warn("store: bucket %s cannot be given to the other pools' sets: %s",
				r->name, strerror(-rc));
	}
	pthread_rwlock_unlock(&st->brw);
	for (size_t i = 0; i < b.n; i++)
		free(b.v[i].attrs);
	free(b.v);
	if (!rc)
		*n = (unsigned)b.n;
	return rc;
}

int
ol_sets_key_dest(struct ol_store *st, const char *bucket, const char *key, size_t klen, uint64_t *h)
{
	if (!key_hash(st, bucket, key, klen, h))
		return -EINVAL;
	return (int)in_pool(st, pick_pool(st, *h), *h);
}

static struct ol_store *
shell_new(unsigned m, uint64_t seed)
{
	struct ol_store *st = ol_xcalloc(1, sizeof(*st));

	st->n_sets = (int)m;
	st->place_seed = seed;
	st->upl_tag = -1;
	st->n_pools = 1;
	st->pool_first[1] = (int)m;
	st->draining = -1;
	pthread_rwlock_init(&st->brw, NULL);
	return st;
}

static void
shell_free(struct ol_store *st)
{
	ol_drive_metrics_shell(st, false);
	for (int i = 0; i < st->n_sets; i++)
		ol_set_close(st->sets[i]);
	pthread_rwlock_destroy(&st->brw);
	free(st);
}

int
ol_store_open(const struct ol_config *cfg, struct ol_store **out)
{
	unsigned n = cfg->set_drive_count ? cfg->set_drive_count : cfg->n_data_dirs, m;
	struct ol_config *c, *ord;
	struct ol_store *st;
	struct ol_driveid *ids;
	uint64_t seed;
	int rc;

	if (!n || !cfg->n_data_dirs || cfg->n_data_dirs % n) {
		ol_err("store: %u data dirs are not a whole number of erasure sets of "
		       "set_drive_count = %u: list m x %u data dirs (m sets), or set "
		       "set_drive_count to a divisor of %u",
		       cfg->n_data_dirs, n, n, cfg->n_data_dirs);
		return -EINVAL;
	}
	m = cfg->n_data_dirs / n;
	if (m > OL_MAX_SETS) {
		ol_err("store: %u erasure sets; at most %d", m, OL_MAX_SETS);
		return -EINVAL;
	}
	ids = ol_xcalloc(m * n, sizeof(*ids));
	ord = ol_xmalloc(sizeof(*ord)); /* cfg with data_dirs in their records' order */
	memcpy(ord, cfg, sizeof(*ord));
	rc = ol_format_open(ord, n, m, &seed, ids); /* format.c: drive identity records */
	if (rc || m == 1) {
		if (!rc)
			rc = ol_set_open(ord, ids, out);
		free(ord);
		free(ids);
		return rc;
	}
	st = shell_new(m, seed);
	c = ol_xmalloc(sizeof(*c));
	for (unsigned j = 0; j < m; j++) {
		memcpy(c, cfg, sizeof(*c));
		for (unsigned i = 0; i < n; i++)
			memcpy(c->data_dirs[i], ord->data_dirs[j * n + i], sizeof(c->data_dirs[i]));
		c->n_data_dirs = n;
		c->set_drive_count = n;
		rc = ol_set_open(c, ids + (size_t)j * n, &st->sets[j]);
		if (rc) {
			ol_err("store: erasure set %u (data dirs %u..%u) does not open: %s", j,
			       j * n, j * n + n - 1, strerror(-rc));
			st->n_sets = (int)j;
			shell_free(st);
			free(c);
			free(ord);
			free(ids);
			return rc;
		}
		st->sets[j]->upl_tag = (int)j;
	}
	free(c);
	free(ord);
	free(ids);
	ol_drive_metrics_shell(st, true);
	ol_info("store: %u erasure sets of %u drives; objects placed by key", m, n);
	*out = st;
	return 0;
}

int
ol_store_open_set(const struct ol_config *cfg, const struct ol_store_set_opts *o,
		  struct ol_store **out)
{
	return ol_set_open_set(cfg, o, out);
}

int
ol_store_open_sets(const struct ol_config *cfg, const struct ol_store_set_opts *o, unsigned m,
		   const char *placement_key, struct ol_store **out)
{
	struct ol_store *st;
	int rc;

	*out = NULL;
	if (!m || m > OL_MAX_SETS || !placement_key)
		return -EINVAL;
	for (unsigned j = 1; j < m; j++)
		if (o[j].readonly != o[0].readonly || o[j].shards != o[0].shards)
			return -EINVAL; /* a store reads and writes, or only reads */
	if (m == 1)
		return ol_set_open_set(cfg, o, out);
	st = shell_new(m, XXH3_64bits(placement_key, strlen(placement_key)));
	st->readonly = o[0].readonly;
	st->shards = o[0].readonly && o[0].shards;
	for (unsigned j = 0; j < m; j++) {
		rc = ol_set_open_set(cfg, &o[j], &st->sets[j]);
		if (rc) {
			ol_err("store: erasure set %u does not open: %s", j, strerror(-rc));
			st->n_sets = (int)j;
			shell_free(st);
			return rc;
		}
		st->sets[j]->upl_tag = (int)j;
	}
	ol_drive_metrics_shell(st, true);
	*out = st;
	return 0;
}

/* Move the sets of src (a shell, or a one-set store: one pool of itself) to the end of st as
 * its next pool(s); src's husk is freed. */
static void
take_pools(struct ol_store *st, struct ol_store *src)
{
	bool shell = multi(src);
	int np = shell ? src->n_pools : 1;

	if (shell)
		ol_drive_metrics_shell(src, false);
	for (int p = 0; p < np; p++) {
		int from = shell ? src->pool_first[p] : 0;
		int to = shell ? src->pool_first[p + 1] : 1;

		for (int j = from; j < to; j++) {
			struct ol_store *set = shell ? src->sets[j] : src;

			set->upl_tag = st->n_sets;
			st->sets[st->n_sets++] = set;
		}
		st->pool_first[++st->n_pools] = st->n_sets;
	}
	if (shell) {
		pthread_rwlock_destroy(&src->brw);
		free(src);
	}
}

int
ol_store_pools(struct ol_store **pools, unsigned n, const char *placement_key,
	       struct ol_store **out)
{
	unsigned np = 0, ns = 0;
	struct ol_store *st;

	*out = NULL;
	for (unsigned i = 0; i < n; i++) {
		np += ol_store_pool_count(pools[i]);
		ns += (unsigned)pools[i]->n_sets;
	}
	for (unsigned i = 1; i < n && placement_key; i++)
		if (pools[i]->readonly != pools[0]->readonly ||
		    pools[i]->shards != pools[0]->shards)
			placement_key = NULL; /* read-only and writable mixed: -EINVAL */
	if (!n || !placement_key || np > OL_MAX_POOLS || ns > OL_MAX_SETS) {
		for (unsigned i = 0; i < n; i++)
			ol_store_close(pools[i]);
		return !n || !placement_key ? -EINVAL : -E2BIG;
	}
	if (ns == 1) { /* one pool of one set: the set itself, as ol_store_open_sets makes it */
		*out = pools[0];
		return 0;
	}
	st = shell_new(ns, XXH3_64bits(placement_key, strlen(placement_key)));
	st->n_sets = 0;
	st->n_pools = 0;
	st->readonly = pools[0]->readonly;
	st->shards = pools[0]->shards;
	for (unsigned i = 0; i < n; i++)
		take_pools(st, pools[i]);
	ol_drive_metrics_shell(st, true);
	ol_info("store: %u pool(s), %u erasure sets in all; new keys placed by free space", np, ns);
	*out = st;
	return 0;
}

bool
ol_store_readonly(const struct ol_store *st)
{
	return st->readonly;
}

unsigned
ol_store_pool_count(const struct ol_store *st)
{
	return multi(st) && st->n_pools > 1 ? (unsigned)st->n_pools : 1;
}

void
ol_store_set_pool_free(struct ol_store *st, const uint64_t *free_bytes, unsigned n)
{
	for (unsigned p = 0; p < n && (int)p < st->n_pools && p < OL_MAX_POOLS; p++)
		atomic_store(&st->pool_free[p], free_bytes[p] >> 20);
}

void
ol_store_close(struct ol_store *st)
{
	if (!st)
		return;
	ol_sweeper_stop(st);
	if (multi(st))
		shell_free(st);
	else
		ol_set_close(st);
}

void
ol_store_set_epoch(struct ol_store *st, uint64_t epoch)
{
	for (int i = 0; i < st->n_sets; i++)
		ol_set_set_epoch(st->sets[i], epoch);
}

/* ---- buckets ---- */

int
ol_store_bucket_create_attrs(struct ol_store *st, const char *bucket, const void *attrs, size_t len)
{
	if (st->readonly)
		return -EROFS;
	int rc = 0;

	if (!multi(st))
		return ol_set_bucket_create_attrs(st, bucket, attrs, len);
	pthread_rwlock_wrlock(&st->brw);
	rc = ol_set_bucket_stat(st->sets[0], bucket, NULL); /* -EIO undecided: no create */
	rc = rc == 0 ? -EEXIST : rc == -ENOENT ? 0 : rc;
	for (int i = 1; !rc && i < st->n_sets; i++) {
		rc = ol_set_bucket_create_attrs(st->sets[i], bucket, attrs, len);
		if (rc == -EEXIST) /* left by a create that did not reach set 0 */
			rc = ol_set_bucket_set_attrs(st->sets[i], bucket, attrs, len);
	}
	if (!rc)
		rc = ol_set_bucket_create_attrs(st->sets[0], bucket, attrs, len);
	pthread_rwlock_unlock(&st->brw);
	return rc;
}

int
ol_store_bucket_create(struct ol_store *st, const char *bucket)
{
	return ol_store_bucket_create_attrs(st, bucket, NULL, 0);
}

int
ol_store_bucket_delete(struct ol_store *st, const char *bucket)
{
	if (st->readonly)
		return -EROFS;
	int rc;

	if (!multi(st))
		return ol_set_bucket_delete(st, bucket);
	pthread_rwlock_wrlock(&st->brw);
	rc = ol_set_bucket_stat(st->sets[0], bucket, NULL);
	for (int i = 0; !rc && i < st->n_sets; i++) {
		rc = ol_set_bucket_empty(st->sets[i], bucket);
		if (rc == -ENOENT && i > 0)
			rc = 0; /* the set lacks it: nothing there */
	}
	for (int i = st->n_sets - 1; !rc && i > 0; i--) {
		rc = ol_set_bucket_delete(st->sets[i], bucket);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (!rc)
		rc = ol_set_bucket_delete(st->sets[0], bucket);
	pthread_rwlock_unlock(&st->brw);
	return rc;
}

int
ol_store_bucket_stat(struct ol_store *st, const char *bucket, int64_t *created_ns)
{
	return ol_set_bucket_stat(st->sets[0], bucket, created_ns);
}

int
ol_store_bucket_list(struct ol_store *st, ol_store_bucket_cb cb, void *arg)
{
	return ol_set_bucket_list(st->sets[0], cb, arg);
}

int
ol_store_bucket_get(struct ol_store *st, const char *bucket, int64_t *created_ns, void *buf,
		    size_t cap, size_t *len)
{
	return ol_set_bucket_get(st->sets[0], bucket, created_ns, buf, cap, len);
}

int
ol_store_bucket_attrs(struct ol_store *st, const char *bucket, void **out, size_t *len)
{
	return ol_set_bucket_attrs(st->sets[0], bucket, out, len);
}

int
ol_store_bucket_set_attrs(struct ol_store *st, const char *bucket, const void *attrs, size_t len)
{
	if (st->readonly)
		return -EROFS;
	int rc;

	if (!multi(st))
		return ol_set_bucket_set_attrs(st, bucket, attrs, len);
	pthread_rwlock_rdlock(&st->brw);
	rc = ol_set_bucket_set_attrs(st->sets[0], bucket, attrs, len);
	for (int i = 1; !rc && i < st->n_sets; i++) {
		int r = ol_set_bucket_set_attrs(st->sets[i], bucket, attrs, len);

		if (r == -ENOENT)
			r = repair_locked(st, (unsigned)i, bucket);
		if (r) /* set 0's copy is the one read; a repair copies it */
			ol_warn("store: bucket %s: attrs not written to set %d: %s", bucket, i,
				strerror(-r));
	}
	pthread_rwlock_unlock(&st->brw);
	return rc;
}

int
ol_store_bucket_list_attrs(struct ol_store *st, ol_store_bucket_attrs_cb cb, void *arg)
{
	return ol_set_bucket_list_attrs(st->sets[0], cb, arg);
}

/* ---- objects: the set of the key ---- */

int
ol_store_put_begin(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		   int64_t size_hint, struct ol_put **out)
{
	if (!ol_shards_ok(st))
		return -EROFS;
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_put_begin(st, bucket, key, key_len, size_hint, out);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, NULL);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_put_begin(st->sets[i], bucket, key, key_len, size_hint, out);
	if (rc == -ENOENT && repaired(st, i, bucket))
		rc = ol_set_put_begin(st->sets[i], bucket, key, key_len, size_hint, out);
	/* a shard writer repairs nothing: a set that lacks a bucket set 0 has (a pool joined
	 * after it was made) is given it by the leader at the commit */
	if (rc == -ENOENT && st->shards && i != 0 &&
	    ol_set_bucket_stat(st->sets[0], bucket, NULL) == 0) {
		*out = ol_put_new(st->sets[i], bucket, key, key_len, false);
		rc = 0;
	}
	if (rc == 0)
		ol_put_set_gate(*out, st, g);
out:
	if (rc)
		ol_gate_leave(st, g);
	return rc;
}

int
ol_store_get_open(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  struct ol_get **out, struct ol_obj_info *info)
{
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_get_open(st, bucket, key, key_len, out, info);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, NULL);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_get_open(st->sets[i], bucket, key, key_len, out, info);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_get_open(st->sets[i], bucket, key, key_len, out, info);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_get_open_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      const char *version_id, struct ol_get **out, struct ol_obj_info *info)
{
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_get_open_ver(st, bucket, key, key_len, version_id, out, info);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, version_id);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_get_open_ver(st->sets[i], bucket, key, key_len, version_id, out, info);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_get_open_ver(st->sets[i], bucket, key, key_len, version_id, out, info);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_head(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
	      struct ol_obj_info *info, void *meta_buf, size_t meta_cap)
{
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_head(st, bucket, key, key_len, info, meta_buf, meta_cap);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, NULL);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_head(st->sets[i], bucket, key, key_len, info, meta_buf, meta_cap);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_head(st->sets[i], bucket, key, key_len, info, meta_buf, meta_cap);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_head_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  const char *version_id, struct ol_obj_info *info, void *meta_buf, size_t meta_cap)
{
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_head_ver(st, bucket, key, key_len, version_id, info, meta_buf,
				       meta_cap);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, version_id);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_head_ver(st->sets[i], bucket, key, key_len, version_id, info, meta_buf,
			     meta_cap);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_head_ver(st->sets[i], bucket, key, key_len, version_id, info, meta_buf,
				     meta_cap);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len)
{
	if (st->readonly)
		return -EROFS;
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_delete(st, bucket, key, key_len);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, NULL);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_delete(st->sets[i], bucket, key, key_len);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_delete(st->sets[i], bucket, key, key_len);
	if (rc == 0 && st->n_pools > 1)
		drop_copies(st, bucket, key, key_len, NULL, i);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_delete_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    int vmode, const char *version_id, struct ol_obj_info *out)
{
	if (st->readonly)
		return -EROFS;
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_delete_ver(st, bucket, key, key_len, vmode, version_id, out);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, version_id);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_delete_ver(st->sets[i], bucket, key, key_len, vmode, version_id, out);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_delete_ver(st->sets[i], bucket, key, key_len, vmode, version_id, out);
	if (rc == 0 && version_id && st->n_pools > 1)
		drop_copies(st, bucket, key, key_len, version_id, i);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_set_meta_if(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		     const char *version_id, int64_t expect_mtime_ns, const void *meta,
		     size_t meta_len)
{
	if (st->readonly)
		return -EROFS;
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_set_meta(st, bucket, key, key_len, version_id, expect_mtime_ns, meta,
				       meta_len);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, version_id);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_set_meta(st->sets[i], bucket, key, key_len, version_id, expect_mtime_ns, meta,
			     meta_len);
	if (rc == -ENXIO && repaired(st, i, bucket))
		rc = ol_set_set_meta(st->sets[i], bucket, key, key_len, version_id, expect_mtime_ns,
				     meta, meta_len);
out:
	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_set_meta(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  const char *version_id, const void *meta, size_t meta_len)
{
	return ol_store_set_meta_if(st, bucket, key, key_len, version_id, 0, meta, meta_len);
}

struct sp_arg {
	int base;
	int (*cb)(int drive, unsigned part, const char *path, void *arg);
	void *arg;
};

static int
sp_cb(int drive, unsigned part, const char *path, void *arg)
{
	struct sp_arg *a = arg;

	return a->cb(a->base + drive, part, path, a->arg);
}

int
ol_store_shard_paths(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		     int (*cb)(int drive, unsigned part, const char *path, void *arg), void *arg)
{
	int i;
	struct sp_arg a = {.cb = cb, .arg = arg};

	if (!multi(st))
		return ol_set_shard_paths(st, bucket, key, key_len, cb, arg);
	i = locate(st, bucket, key, key_len, NULL);
	if (i < 0)
		return i;
	for (int j = 0; j < i; j++)
		a.base += st->sets[j]->n;
	return ol_set_shard_paths(st->sets[i], bucket, key, key_len, sp_cb, &a);
}

/* ---- multipart: the set of the key, named by the upload id ---- */

int
ol_store_mpu_create(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    const void *meta, size_t meta_len, char upload_id[64])
{
	if (st->readonly)
		return -EROFS;
	unsigned i, g;
	int rc;

	if (!multi(st))
		return ol_set_mpu_create(st, bucket, key, key_len, meta, meta_len, upload_id);
	g = gate_key(st, bucket, key, key_len);
	rc = locate(st, bucket, key, key_len, NULL);
	if (rc < 0)
		goto out;
	i = (unsigned)rc;
	rc = ol_set_mpu_create(st->sets[i], bucket, key, key_len, meta, meta_len, upload_id);
	if (rc == -ENOENT && repaired(st, i, bucket))
		rc =
		    ol_set_mpu_create(st->sets[i], bucket, key, key_len, meta, meta_len, upload_id);
out:
	ol_gate_leave(st, g);
	return rc;
}

/* The set of an upload: st itself for one set; NULL: no such upload. Its id names its set;
 * with several pools an id that set does not know is looked for in every set (an upload
 * begun in a one-set pool before the store grew has an id that names no set). */
static struct ol_store *
upl_set(struct ol_store *st, const char *bucket, const char *upload_id)
{
	char key[OL_KEYBUF];
	size_t kl = sizeof(key), ml = 0;
	int i;

	if (!multi(st))
		return st;
	i = upload_set(st, upload_id);
	if (st->n_pools <= 1)
		return i < 0 ? NULL : st->sets[i];
	if (i >= 0 &&
	    ol_set_mpu_stat(st->sets[i], bucket, upload_id, key, &kl, NULL, 0, &ml) != -ENOENT)
		return st->sets[i];
	for (int j = 0; j < st->n_sets; j++) {
		kl = sizeof(key);
		if (j != i &&
		    ol_set_mpu_stat(st->sets[j], bucket, upload_id, key, &kl, NULL, 0, &ml) == 0)
			return st->sets[j];
	}
	return i < 0 ? NULL : st->sets[i];
}

/* The gate of an upload's key (several pools; 0: none), held by its complete. */
static unsigned
upl_gate(struct ol_store *st, struct ol_store *s, const char *bucket, const char *upload_id)
{
	char key[OL_KEYBUF];
	size_t kl = sizeof(key), ml = 0;

	if (!s || st->n_pools <= 1 || ol_set_mpu_stat(s, bucket, upload_id, key, &kl, NULL, 0, &ml))
		return 0;
	return gate_key(st, bucket, key, kl);
}

int
ol_store_mpu_part_begin(struct ol_store *st, const char *bucket, const char *upload_id,
			unsigned part_no, struct ol_put **out)
{
	if (!ol_shards_ok(st))
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);

	return s ? ol_set_mpu_part_begin(s, bucket, upload_id, part_no, out) : -ENOENT;
}

int
ol_store_mpu_list_parts(struct ol_store *st, const char *bucket, const char *upload_id,
			struct ol_mpu_part **parts, size_t *n)
{
	struct ol_store *s = upl_set(st, bucket, upload_id);

	*parts = NULL;
	*n = 0;
	return s ? ol_set_mpu_list_parts(s, bucket, upload_id, parts, n) : -ENOENT;
}

int
ol_store_mpu_complete(struct ol_store *st, const char *bucket, const char *upload_id,
		      const unsigned *part_nos, size_t n, const char *final_etag,
		      struct ol_obj_info *out)
{
	if (st->readonly)
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);
	unsigned g = upl_gate(st, s, bucket, upload_id);
	int rc =
	    s ? ol_set_mpu_complete(s, bucket, upload_id, part_nos, n, final_etag, out) : -ENOENT;

	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_mpu_complete_cond(struct ol_store *st, const char *bucket, const char *upload_id,
			   const unsigned *part_nos, size_t n, const char *final_etag,
			   const struct ol_store_cond *cond, struct ol_obj_info *out)
{
	if (st->readonly)
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);
	unsigned g = upl_gate(st, s, bucket, upload_id);
	int rc =
	    s ? ol_set_mpu_complete_cond(s, bucket, upload_id, part_nos, n, final_etag, cond, out)
	      : -ENOENT;

	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_mpu_complete_ver(struct ol_store *st, const char *bucket, const char *upload_id,
			  const unsigned *part_nos, size_t n, const char *final_etag,
			  const struct ol_store_cond *cond, int vmode, struct ol_obj_info *out)
{
	if (st->readonly)
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);
	unsigned g = upl_gate(st, s, bucket, upload_id);
	int rc = s ? ol_set_mpu_complete_ver(s, bucket, upload_id, part_nos, n, final_etag, cond,
					     vmode, out)
		   : -ENOENT;

	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_mpu_complete_meta(struct ol_store *st, const char *bucket, const char *upload_id,
			   const unsigned *part_nos, size_t n, const char *final_etag,
			   const struct ol_store_cond *cond, int vmode, const void *meta,
			   size_t meta_len, struct ol_obj_info *out)
{
	if (st->readonly)
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);
	unsigned g = upl_gate(st, s, bucket, upload_id);
	int rc = s ? ol_set_mpu_complete_meta(s, bucket, upload_id, part_nos, n, final_etag, cond,
					      vmode, meta, meta_len, out)
		   : -ENOENT;

	ol_gate_leave(st, g);
	return rc;
}

int
ol_store_mpu_abort(struct ol_store *st, const char *bucket, const char *upload_id)
{
	if (st->readonly)
		return -EROFS;
	struct ol_store *s = upl_set(st, bucket, upload_id);

	return s ? ol_set_mpu_abort(s, bucket, upload_id) : -ENOENT;
}

int
ol_store_mpu_stat(struct ol_store *st, const char *bucket, const char *upload_id, char *key,
		  size_t *key_len, void *meta_buf, size_t meta_cap, size_t *meta_len)
{
	struct ol_store *s = upl_set(st, bucket, upload_id);

	return s ? ol_set_mpu_stat(s, bucket, upload_id, key, key_len, meta_buf, meta_cap, meta_len)
		 : -ENOENT;
}

struct upl_ent {
	char *key; /* the key, then the metadata blob */
	size_t kl, ml;
	char id[33];
	int64_t init;
};
struct upl_all {
	struct upl_ent *e;
	size_t n, cap;
};

static int
upl_collect(const char *key, size_t kl, const char *id, int64_t init, const void *meta, size_t ml,
	    void *arg)
{
	struct upl_all *a = arg;

	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 64;
		a->e = ol_xrealloc(a->e, a->cap * sizeof(*a->e));
	}
	a->e[a->n].key = ol_xmalloc(kl + ml + 1);
	memcpy(a->e[a->n].key, key, kl);
	memcpy(a->e[a->n].key + kl, meta, ml);
	a->e[a->n].kl = kl;
	a->e[a->n].ml = ml;
	snprintf(a->e[a->n].id, sizeof(a->e[a->n].id), "%s", id);
	a->e[a->n].init = init;
	a->n++;
	return 0;
}

static int
keycmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : al < bl ? -1 : al > bl;
}

static int
upl_cmp(const void *x, const void *y)
{
	const struct upl_ent *a = x, *b = y;
	int c = keycmp(a->key, a->kl, b->key, b->kl);

	return c ? c : strcmp(a->id, b->id);
}

int
ol_store_mpu_list(struct ol_store *st, const char *bucket, ol_store_mpu_cb cb, void *arg)
{
	struct upl_all a = {0};
	int rc = 0;

	if (!multi(st))
		return ol_set_mpu_list(st, bucket, cb, arg);
	for (int i = 0; !rc && i < st->n_sets; i++) {
		rc = ol_set_mpu_list(st->sets[i], bucket, upl_collect, &a);
		if (rc == -ENOENT && i > 0)
			rc = 0; /* a set that lacks the bucket has no upload in it */
	}
	if (!rc && a.n) /* qsort of NULL, 0 is undefined (UBSan stops the daemon) */
		qsort(a.e, a.n, sizeof(*a.e), upl_cmp);
	for (size_t i = 0; !rc && i < a.n; i++)
		rc = cb(a.e[i].key, a.e[i].kl, a.e[i].id, a.e[i].init, a.e[i].key + a.e[i].kl,
			a.e[i].ml, arg);
	for (size_t i = 0; i < a.n; i++)
		free(a.e[i].key);
	free(a.e);
	return rc;
}

/* ---- listings: a k-way merge of the sets' ordered iterators ---- */

#define UNREAD 2

struct ol_kmerge {
	int n;
	bool ver; /* version iterators */
	int last; /* the set whose entry was returned last, or -1 */
	struct ol_iter *it[OL_MAX_SETS];
	struct ol_viter *vit[OL_MAX_SETS];
	int have[OL_MAX_SETS]; /* 1 an entry, 0 end, UNREAD, or -errno */
	const char *key[OL_MAX_SETS];
	size_t kl[OL_MAX_SETS];
	struct ol_obj_info info[OL_MAX_SETS];
};

static void
km_close(struct ol_kmerge *km)
{
	for (int i = 0; i < km->n; i++) {
		if (km->it[i])
			ol_set_iter_close(km->it[i]);
		if (km->vit[i])
			ol_set_viter_close(km->vit[i]);
	}
	free(km);
}

static int
km_open_one(struct ol_store *st, struct ol_kmerge *km, int i, const char *bucket)
{
	return km->ver ? ol_set_viter_open(st->sets[i], bucket, &km->vit[i])
		       : ol_set_iter_open(st->sets[i], bucket, &km->it[i]);
}

static int
km_open(struct ol_store *st, const char *bucket, bool ver, struct ol_kmerge **out)
{
	struct ol_kmerge *km = ol_xcalloc(1, sizeof(*km));
	int rc = 0;

	km->ver = ver;
	km->last = -1;
	for (int i = 0; !rc && i < st->n_sets; i++) {
		rc = km_open_one(st, km, i, bucket);
		if (rc == -ENOENT && repaired(st, (unsigned)i, bucket))
			rc = km_open_one(st, km, i, bucket);
		km->have[i] = UNREAD;
		km->n = i + 1;
	}
	if (rc) {
		km_close(km);
		return rc;
	}
	*out = km;
	return 0;
}

static int
km_read(struct ol_kmerge *km, int i)
{
	km->have[i] = km->ver ? ol_set_viter_next(km->vit[i], &km->key[i], &km->kl[i], &km->info[i])
			      : ol_set_iter_next(km->it[i], &km->key[i], &km->kl[i], &km->info[i]);
	return km->have[i];
}

static int
km_seek(struct ol_kmerge *km, const char *key, size_t key_len)
{
	int rc = 0;

	km->last = -1;
	for (int i = 0; i < km->n; i++) {
		int r = km->ver ? ol_set_viter_seek(km->vit[i], key, key_len)
				: ol_set_iter_seek(km->it[i], key, key_len);
		km->have[i] = UNREAD;
		if (r < 0 && !rc)
			rc = r;
	}
	return rc;
}

/* Entries of one set are in key order and a key lives in one set: the smallest head is next
 * (a version iterator's entries of one key come from one set, newest first, in a row). */
static int
km_next(struct ol_kmerge *km, const char **key, size_t *key_len, struct ol_obj_info *info)
{
	int best = -1;

	if (km->last >= 0) {
		km->have[km->last] = UNREAD;
		km->last = -1;
	}
	for (int i = 0; i < km->n; i++) {
		if (km->have[i] == UNREAD && km_read(km, i) < 0)
			return km->have[i];
		if (km->have[i] != 1)
			continue;
		int c = best < 0 ? -1 : keycmp(km->key[i], km->kl[i], km->key[best], km->kl[best]);
		if (c == 0 && km->ver) {
			/* a key in two pools (a race, a move cut short): the same version (its
			 * id) is listed once; the key's versions, newest first */
			if (!strcmp(km->info[i].version_id, km->info[best].version_id)) {
				km->have[i] = UNREAD;
				continue;
			}
			if (km->info[i].mtime_ns > km->info[best].mtime_ns)
				best = i;
			continue;
		}
		if (c == 0 && !km->ver) {
			/* a key a race left in two pools: the newest is listed, the other
			 * dropped (ol_store_pools) */
			bool newer = km->info[i].mtime_ns > km->info[best].mtime_ns;

			km->have[newer ? best : i] = UNREAD;
			if (newer)
				best = i;
			continue;
		}
		if (c < 0)
			best = i;
	}
	if (best < 0)
		return 0;
	*key = km->key[best];
	*key_len = km->kl[best];
	*info = km->info[best];
	km->last = best;
	return 1;
}

int
ol_store_iter_open(struct ol_store *st, const char *bucket, struct ol_iter **out)
{
	struct ol_kmerge *km;
	int rc;

	if (!multi(st))
		return ol_set_iter_open(st, bucket, out);
	rc = km_open(st, bucket, false, &km);
	if (!rc)
		*out = ol_iter_shell(km);
	return rc;
}

int
ol_store_iter_seek(struct ol_iter *it, const char *key, size_t key_len)
{
	struct ol_kmerge *km = ol_iter_km(it);

	return km ? km_seek(km, key, key_len) : ol_set_iter_seek(it, key, key_len);
}

int
ol_store_iter_next(struct ol_iter *it, const char **key, size_t *key_len, struct ol_obj_info *info)
{
	struct ol_kmerge *km = ol_iter_km(it);

	return km ? km_next(km, key, key_len, info) : ol_set_iter_next(it, key, key_len, info);
}

void
ol_store_iter_close(struct ol_iter *it)
{
	struct ol_kmerge *km;

	if (!it)
		return;
	km = ol_iter_km(it);
	if (!km) {
		ol_set_iter_close(it);
		return;
	}
	km_close(km);
	free(it);
}

int
ol_store_viter_open(struct ol_store *st, const char *bucket, struct ol_viter **out)
{
	struct ol_kmerge *km;
	int rc;

	if (!multi(st))
		return ol_set_viter_open(st, bucket, out);
	rc = km_open(st, bucket, true, &km);
	if (!rc)
		*out = ol_viter_shell(km);
	return rc;
}

int
ol_store_viter_seek(struct ol_viter *it, const char *key, size_t key_len)
{
	struct ol_kmerge *km = ol_viter_km(it);

	return km ? km_seek(km, key, key_len) : ol_set_viter_seek(it, key, key_len);
}

int
ol_store_viter_next(struct ol_viter *it, const char **key, size_t *key_len,
		    struct ol_obj_info *info)
{
	struct ol_kmerge *km = ol_viter_km(it);

	return km ? km_next(km, key, key_len, info) : ol_set_viter_next(it, key, key_len, info);
}

void
ol_store_viter_close(struct ol_viter *it)
{
	struct ol_kmerge *km;

	if (!it)
		return;
	km = ol_viter_km(it);
	if (!km) {
		ol_set_viter_close(it);
		return;
	}
	km_close(km);
	free(it);
}

/* ---- drives and heal: every set's; drive i is drive i - (drives of sets before) of its set */

int
ol_store_drive_count(const struct ol_store *st)
{
	int n = 0;

	for (int i = 0; i < st->n_sets; i++)
		n += ol_set_drive_count(st->sets[i]);
	return n;
}

const char *
ol_store_drive_path(const struct ol_store *st, int i)
{
	for (int s = 0; i >= 0 && s < st->n_sets; s++) {
		int n = ol_set_drive_count(st->sets[s]);

		if (i < n)
			return ol_set_drive_path(st->sets[s], i);
		i -= n;
	}
	return NULL;
}

int
ol_store_drives_online(const struct ol_store *st)
{
	int n = 0;

	for (int i = 0; i < st->n_sets; i++)
		n += ol_set_drives_online(st->sets[i]);
	return n;
}

int
ol_store_drives_offline(const struct ol_store *st, bool *off, int cap)
{
	int n = 0;

	for (int s = 0; s < st->n_sets; s++)
		for (int i = 0; i < st->sets[s]->n && n < cap; i++)
			off[n++] = atomic_load(&st->sets[s]->d[i].meta) == NULL;
	return n;
}

void
ol_store_on_drive_return(struct ol_store *st, void (*cb)(void *arg, const char *drive), void *arg)
{
	for (int i = 0; i < st->n_sets; i++)
		ol_set_on_drive_return(st->sets[i], cb, arg);
}

void
ol_store_missed_stats(struct ol_store *st, uint64_t *pending, uint64_t *dropped)
{
	*pending = 0;
	*dropped = 0;
	for (int i = 0; i < st->n_sets; i++) {
		*pending += atomic_load(&st->sets[i]->missed_pending);
		*dropped += atomic_load(&st->sets[i]->missed_dropped);
	}
}

int
ol_store_heal_all(struct ol_store *st, const struct ol_heal_opts *o, struct ol_heal_progress *p)
{
	if (st->readonly)
		return -EROFS;
	return ol_set_heal_all(st->sets, st->n_sets, o, p);
}

/* ---- commits sent to the leader (store.h; the request's coding is put.c's) ---- */

void
ol_store_set_committer(struct ol_store *st, ol_store_commit_fn fn, void *arg)
{
	for (int i = 0; i < st->n_sets; i++) {
		st->sets[i]->committer_arg = arg;
		st->sets[i]->committer = fn;
	}
	st->committer_arg = arg;
	st->committer = fn;
}

void
ol_store_set_commit_max(struct ol_store *st, size_t bytes)
{
	for (int i = 0; i < st->n_sets; i++)
		st->sets[i]->commit_max = bytes;
	st->commit_max = bytes;
}

/* the index in st of the set q names (its first drive's identity), or -1 */
static int
creq_set(const struct ol_store *st, const struct ol_creq *q)
{
	for (int i = 0; i < st->n_sets; i++) {
		const struct ol_driveid *id = &st->sets[i]->d[0].id;

		if (id->pool == q->pool && id->set == q->set && q->store_len == strlen(id->store) &&
		    !memcmp(id->store, q->store, q->store_len))
			return i;
	}
	return -1;
}

/* Whether a new version of key may go to set i: the set of its hash in i's pool (one pool:
 * the only set for it), a pool not draining, and no other pool holding the key (a writer's view may
 * weigh the pools otherwise, which is fine for a new key). 0, -ESTALE, or a pool's read error. */
static int
placed(struct ol_store *st, int i, const char *bucket, const char *key, size_t klen)
{
	uint64_t h;
	int pool = 0, rc;
	int64_t t;

	if (!key_hash(st, bucket, key, klen, &h))
		return -EINVAL;
	while (pool + 1 < st->n_pools && st->pool_first[pool + 1] <= i)
		pool++;
	if (in_pool(st, pool, h) != (unsigned)i || pool == atomic_load(&st->draining))
		return -ESTALE;
	for (int p = 0; p < st->n_pools; p++) {
		if (p == pool)
			continue;
		rc = holds(st, in_pool(st, p, h), bucket, key, klen, NULL, &t);
		if (rc)
			return rc == 1 ? -ESTALE : rc;
	}
	return 0;
}

int
ol_store_commit_remote(struct ol_store *st, const void *req, size_t len, int vmode,
		       struct ol_obj_info *out)
{
	struct ol_creq q;
	unsigned g = 0;
	int i, rc;

	if (st->readonly)
		return -EROFS;
	if (ol_creq_decode(req, len, &q))
		return -EBADMSG;
	if ((i = creq_set(st, &q)) < 0)
		return -ESTALE;
	if (q.flags & OL_CREQ_PART) {
		if (upl_set(st, q.bucket, q.upload_id) != st->sets[i])
			return -ESTALE;
	} else if (multi(st)) {
		g = gate_key(st, q.bucket, (const char *)q.key, q.klen);
		rc = placed(st, i, q.bucket, (const char *)q.key, q.klen);
		if (rc) {
			ol_gate_leave(st, g);
			return rc;
		}
	}
	/* a writer's put into a set without the bucket (a pool joined after it was made) */
	if (!(q.flags & OL_CREQ_PART) && ol_bucket_check(st->sets[i], q.bucket) == -ENOENT)
		(void)repaired(st, (unsigned)i, q.bucket);
	rc = ol_set_commit_remote(st->sets[i], &q, vmode, out);
	if (g)
		ol_gate_leave(st, g);
	return rc;
}
