/* store/missed.c - missed-write records. A metadata commit succeeds on a write quorum; the
 * drives it missed are named, per key, on the drives that committed it (OL_META_MISSED:
 * db id || index key || drive slot -> when), so that a heal after any restart goes straight
 * to what a returning drive lacks instead of scanning the whole store for it.
 *
 * Written in the commit's own txn for the drives offline when the batch began (atomic with
 * the record), in a follow-up txn for those whose commit failed (ol_missed_follow). Removed
 * by ol_missed_heal once the drive holds the record (or nothing resolves: a delete), on every
 * online drive; an entry written after the heal of its key began is kept. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "store/store_int.h"

#define MKEY_MAX 511 /* LMDB's key limit: db (1) + index key + slot (1) */
#define MBATCH	 256 /* entries gathered per merge */

static size_t
mkey(uint8_t *buf, enum ol_meta_db db, const void *k, size_t kl, int slot)
{
	if (kl + 2 > MKEY_MAX)
		return 0;
	buf[0] = (uint8_t)db;
	memcpy(buf + 1, k, kl);
	buf[kl + 1] = (uint8_t)slot;
	return kl + 2;
}

uint32_t
ol_missed_mask(struct ol_store *st, const struct ol_commit *c, uint32_t off)
{
	uint32_t m = off;

	for (int d = 0; c->skip_missed && c->skip && d < st->n; d++)
		if (c->skip[d])
			m |= 1u << d;
	if (!m)
		return 0;
	if (atomic_load(&st->missed_pending) >= st->missed_cap) {
		bool was = false;

		if (atomic_compare_exchange_strong(&st->missed_full, &was, true))
			ol_warn(
			    "store: %llu missed-write records pending (the cap): further misses "
			    "are not recorded; the whole-store heal finds them",
			    (unsigned long long)atomic_load(&st->missed_pending));
		atomic_fetch_add(&st->missed_dropped, 1);
		return 0;
	}
	return m;
}

/* Entries for key k of db on this txn's drive d, one per drive in c->missed. */
static int
put_key(struct ol_meta_txn *t, struct ol_commit *c, int d, enum ol_meta_db db, const void *k,
	size_t kl)
{
	uint8_t key[MKEY_MAX], when[8];
	const void *v;
	size_t n, vl;
	int rc = 0;

	ol_put_u64(when, (uint64_t)c->missed_ns);
	for (int s = 0; !rc && s < OL_MAX_DRIVES; s++) {
		if (!(c->missed & (1u << s)) || s == d)
			continue;
		n = mkey(key, db, k, kl, s);
		if (!n)
			return 0; /* no room for the slot: the scan finds it */
		c->missed_new[d] += ol_meta_get(t, OL_META_MISSED, key, n, &v, &vl) == -ENOENT;
		rc = ol_meta_put(t, OL_META_MISSED, key, n, when, sizeof(when));
	}
	return rc;
}

int
ol_missed_put(struct ol_store *st, struct ol_meta_txn *t, struct ol_commit *c, int d)
{
	int rc;

	(void)st;
	c->missed_new[d] = 0;
	if (!c->missed)
		return 0;
	rc = put_key(t, c, d, c->db, c->k, c->kl);
	if (!rc && c->del_key) /* a completed upload: its upload record (and parts) went too */
		rc = put_key(t, c, d, OL_META_UPLOADS, c->del_key, c->del_kl);
	return rc;
}

void
ol_missed_follow(struct ol_store *st, struct ol_commit *c, uint32_t failed)
{
	uint32_t was = c->missed;
	int most = 0;

	c->missed = failed;
	c->missed_ns = ol_clock_wall_ns();
	for (int d = 0; d < st->n; d++) {
		struct ol_meta *m = atomic_load(&st->d[d].meta);
		struct ol_meta_txn *t;
		int rc;

		if (!c->done[d] || !m || ol_meta_begin(m, true, &t))
			continue;
		rc = ol_missed_put(st, t, c, d);
		if (rc)
			ol_meta_abort(t);
		else
			rc = ol_meta_commit(t);
		if (!rc && st->fsync)
			rc = ol_meta_sync(m);
		if (rc)
			ol_drive_check(st, d, m);
		else if (c->missed_new[d] > most)
			most = c->missed_new[d];
	}
	atomic_fetch_add(&st->missed_pending, (uint64_t)most);
	c->missed = was | failed;
}

void
ol_missed_count(struct ol_store *st)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	uint64_t n = 0;

	if (ol_merge_open(st, OL_META_MISSED, "", 0, &m))
		return;
	while (n < st->missed_cap && ol_merge_next(&m, &k, &kl, vals, lens) == 1)
		n++;
	ol_merge_close(&m);
	atomic_store(&st->missed_pending, n);
	if (n < st->missed_cap)
		atomic_store(&st->missed_full, false);
}

struct ment {
	uint8_t k[MKEY_MAX];
	size_t kl;
};

/* Up to MBATCH entries after `after` (al 0: from the first). */
static int
gather(struct ol_store *st, const struct ment *after, struct ment *v, int *n, bool *more)
{
	struct ol_merge m;
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	int rc = ol_merge_open(st, OL_META_MISSED, "", 0, &m);

	*n = 0;
	*more = false;
	if (rc)
		return rc;
	if (after->kl)
		ol_merge_seek(&m, after->k, after->kl);
	while (ol_merge_next(&m, &k, &kl, vals, lens) == 1) {
		if (kl == after->kl && !memcmp(k, after->k, kl))
			continue;
		if (*n == MBATCH) {
			*more = true;
			break;
		}
		if (kl < 3 || kl > MKEY_MAX)
			continue;
		memcpy(v[*n].k, k, kl);
		v[*n].kl = kl;
		(*n)++;
	}
	ol_merge_close(&m);
	return 0;
}

/* Remove entry e from every online drive unless it was written at or after t0. */
static int
drop_entry(struct ol_store *st, const struct ment *e, int64_t t0)
{
	int gone = 0;

	for (int d = 0; d < st->n; d++) {
		struct ol_meta *m = atomic_load(&st->d[d].meta);
		struct ol_meta_txn *t;
		const void *v;
		size_t vl;
		int rc;

		if (!m || ol_meta_begin(m, true, &t))
			continue;
		rc = ol_meta_get(t, OL_META_MISSED, e->k, e->kl, &v, &vl);
		if (rc == 0 && (vl != 8 || (int64_t)ol_get_u64(v) < t0)) {
			rc = ol_meta_del(t, OL_META_MISSED, e->k, e->kl);
			gone |= rc == 0;
		}
		if (rc == 0)
			rc = ol_meta_commit(t);
		else
			ol_meta_abort(t);
		if (rc && rc != -ENOENT)
			ol_drive_check(st, d, m);
	}
	return gone;
}

/* Nothing resolves for object or upload key ik (deleted while some drive was away): drop
 * the stale copies that drives still hold, under the key's lock, when enough drives answered
 * to know it is gone. An object's files go with it; an upload's part files are left to the
 * orphan sweep (a completed upload's parts are its object's files). */
static void
purge(struct ol_store *st, enum ol_meta_db db, const char *ik, size_t ikl)
{
	const char *z = memchr(ik, 0, ikl);
	size_t pl = z ? (size_t)(z - ik) + 1 : 0;
	bool obj = db == OL_META_OBJECTS, skip[OL_MAX_DRIVES], valid[OL_MAX_DRIVES];
	char pre[OL_KEYBUF];
	struct ol_commit c = {.db = db, .k = ik, .kl = ikl, .skip = skip};
	struct ol_rec win[OL_MAX_DRIVES];
	struct ol_reads r;
	unsigned li;
	int held = 0, n = 0;

	if (!z || (obj && ikl - pl > OL_KEY_HEAD) || (!obj && ikl != pl + 32) ||
	    ikl + 1 > sizeof(pre))
		return; /* a long key's lock needs its tail: left to the scan */
	li = obj ? ol_lock_idx(ik, ik + pl, ikl - pl) : ol_lock_idx(ik, ik, ikl);
	if (obj) {
		pthread_rwlock_rdlock(&st->bucket_lock);
		pthread_rwlock_wrlock(&st->obj_rw[li]);
	} else {
		pthread_mutex_lock(&st->upl_locks[li]);
		memcpy(pre, ik, ikl);
		pre[ikl] = 0;
		c.del_prefix = pre; /* its part records */
		c.del_plen = ikl + 1;
	}
	ol_reads_get(st, db, ik, ikl, NULL, &r);
	for (int d = 0; d < st->n; d++) {
		held += r.raw[d] != NULL;
		skip[d] = r.raw[d] == NULL;
	}
	if (held && held < st->k && ol_reads_absent(st, &r) == -ENOENT &&
	    !(obj && ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid)))
		n = ol_commit_all(st, &c);
	if (n > 0 && obj)
		ol_commit_reclaim(st, &c, NULL);
	if (n > 0)
		ol_info("store: removed a stale %s record from %d drive(s)",
			obj ? "object" : "upload", n);
	ol_commit_free(&c);
	ol_reads_free(&r);
	if (obj) {
		pthread_rwlock_unlock(&st->obj_rw[li]);
		pthread_rwlock_unlock(&st->bucket_lock);
	} else {
		pthread_mutex_unlock(&st->upl_locks[li]);
	}
}

/* Entries v[i..j) are the slots of one key: heal it once, drop the slots healed. */
static void
heal_group(struct ol_store *st, struct ol_heal_progress *p, struct ol_heal_pace *pc,
	   const struct ment *v, int i, int j)
{
	int64_t t0 = ol_clock_wall_ns();
	uint32_t have = 0;
	int db = v[i].k[0];

	if (db < OL_META_NDB) {
		ol_heal_key(st, p, pc, (enum ol_meta_db)db, (const char *)v[i].k + 1, v[i].kl - 2,
			    &have);
		if (have == ~0u && (db == OL_META_OBJECTS || db == OL_META_UPLOADS))
			purge(st, (enum ol_meta_db)db, (const char *)v[i].k + 1, v[i].kl - 2);
	} else
		have = ~0u; /* not a record database: nothing to heal, the entry is garbage */
	for (int e = i; e < j; e++) {
		int s = v[e].k[v[e].kl - 1];

		if (s < st->n && (!(have & (1u << s)) || !atomic_load(&st->d[s].meta)))
			continue; /* still offline, or not restored: kept for the next heal */
		if (drop_entry(st, &v[e], t0)) {
			atomic_fetch_add(&p->missed_healed, 1);
			if (atomic_load(&st->missed_pending))
				atomic_fetch_sub(&st->missed_pending, 1);
		}
	}
}

int
ol_missed_heal(struct ol_store *st, struct ol_heal_progress *p, struct ol_heal_pace *pc)
{
	struct ment *v = ol_xmalloc(MBATCH * sizeof(*v));
	struct ment last = {.kl = 0};
	bool more = true;
	int n = 0, rc = 0;

	while (!rc && more) {
		rc = gather(st, &last, v, &n, &more);
		for (int i = 0, j; !rc && i < n; i = j) {
			if (atomic_load(&p->cancel)) {
				rc = -ECANCELED;
				break;
			}
			/* the slots of one key are adjacent: same bytes but the last */
			for (j = i + 1;
			     j < n && v[j].kl == v[i].kl && !memcmp(v[j].k, v[i].k, v[i].kl - 1);
			     j++)
				;
			heal_group(st, p, pc, v, i, j);
		}
		if (n)
			last = v[n - 1];
	}
	free(v);
	if (rc != -ECANCELED)
		ol_missed_count(st);
	return rc == -ECANCELED ? rc : 0;
}
