/* store/format.c - drive identity records (issue 10): every drive of a store keeps one
 * (base/driveid.h, <drive>/.openlake/format: the store id, pool, set, its index in the set,
 * N, P and its own UUID). At open the data dirs are checked against their records: a drive
 * that is another store's, or another position's (data_dirs lines swapped, a disk moved
 * between sets or nodes), stops the store from opening with a message that names the drive,
 * where its record says it belongs, and the fix. Blank drives (new or wiped) get a fresh
 * record; a store written by an older build is given its records on its first open from what its
 * drives hold (a multi-set record of version 1 is upgraded in place). While running, the
 * drive monitor (drive.c) checks an online drive's record every tick and a returning drive's
 * before anything is written to it (ol_format_verify). docs/storage-format.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "store/store_int.h"

/* The store id most of the records name (the first among equals), or NULL when none. */
static const char *
vote(const struct ol_driveid *rec, const int *rc, unsigned all)
{
	const char *best = NULL;
	unsigned most = 0;

	for (unsigned i = 0; i < all; i++) {
		unsigned c = 0;

		if (rc[i])
			continue;
		for (unsigned j = 0; j < all; j++)
			c += !rc[j] && !strcmp(rec[i].store, rec[j].store);
		if (c > most) {
			most = c;
			best = rec[i].store;
		}
	}
	return best;
}

/* Drive root's record f at position i (set i / n, index i % n) of a store of m sets of n
 * whose id is id: 0 when it fits, else -EINVAL with the reason logged. */
static int
fits(const char *root, const struct ol_driveid *f, unsigned i, unsigned n, unsigned m,
     const char *id)
{
	unsigned at = f->set * n + (f->version == 2 ? f->index : i % n) + 1;

	if (strcmp(f->store, id)) {
		ol_err("store: data dir %s belongs to another store: its identity record %s "
		       "names store %s (drive %u of erasure set %u), the other drives store %s; "
		       "a disk of another store or node is mounted there. Put it back where it "
		       "came from and this store's disk here, or wipe it (remove %s/.openlake) "
		       "to reuse it in this store (it is then healed)",
		       root, OL_DRIVEID_NAME, f->store, f->index == OL_DRIVEID_NONE ? 0 : f->index,
		       f->set, id, root);
		return -EINVAL;
	}
	if (f->sets != m || f->drives != n) {
		ol_err("store: data dir %s belongs to a store of %u erasure set(s) of %u drives, "
		       "but this config lays %u data dirs out as %u set(s) of %u: a store's set "
		       "count cannot change; set data_dirs to the store's %u dirs (in their "
		       "order) and set_drive_count = %u",
		       root, f->sets, f->drives, m * n, m, n, f->sets * f->drives, f->drives);
		return -EINVAL;
	}
	if (f->set != i / n || (f->version == 2 && (f->index != i % n || f->pool != 0))) {
		ol_err("store: data dir %s is drive %u of erasure set %u (its identity record %s) "
		       "but data_dirs lists it as drive %u of set %u (entry %u): data_dirs is not "
		       "in the order the store was created with. Restore that order (this dir "
		       "is entry %u, counting from 1), or wipe it (remove %s/.openlake) to reuse "
		       "it at this position (it is then healed)",
		       root, f->version == 2 ? f->index : i % n, f->set, OL_DRIVEID_NAME, i % n,
		       i / n, i + 1, at, root);
		return -EINVAL;
	}
	return 0;
}

/* Another drive before i has the same drive UUID: a copy of a drive, not a drive. */
static int
duplicate(const struct ol_config *cfg, const struct ol_driveid *rec, const int *rc, unsigned i)
{
	for (unsigned j = 0; j < i; j++) {
		if (rc[j] || rec[i].version != 2 || rec[j].version != 2 ||
		    strcmp(rec[i].drive, rec[j].drive))
			continue;
		ol_err("store: data dirs %s and %s carry the same drive UUID %s: one is a copy of "
		       "the other; remove the copy from data_dirs, or wipe it (remove its "
		       ".openlake) to reuse it (it is then healed)",
		       cfg->data_dirs[j], cfg->data_dirs[i], rec[i].drive);
		return -EINVAL;
	}
	return 0;
}

/* Data dirs reordered (data_dirs lines moved, disks mounted in another order): each dir whose
 * record is this store's (version 2: it names its set and index) is put at the position its
 * record names, in cfg->data_dirs and in rec/rc alike; the dirs without such a record keep
 * their order in the positions left. Nothing moves when two records name one position (a
 * copied disk: check_all refuses it). */
static void
reorder(struct ol_config *cfg, unsigned n, unsigned m, struct ol_driveid *rec, int *rc,
	const char *id)
{
	unsigned all = m * n, to[OL_CFG_MAX_DIRS], next = 0;
	bool used[OL_CFG_MAX_DIRS] = {false}, mine[OL_CFG_MAX_DIRS], moved = false;
	struct ol_driveid *r2;
	char(*d2)[OL_CFG_STR];
	int rc2[OL_CFG_MAX_DIRS];

	for (unsigned i = 0; i < all; i++) {
		const struct ol_driveid *f = &rec[i];
		unsigned at = f->set * n + f->index;

		mine[i] = !rc[i] && f->version == 2 && !strcmp(f->store, id) && f->sets == m &&
			  f->drives == n && f->pool == 0 && f->set < m && f->index < n;
		if (!mine[i])
			continue;
		if (used[at])
			return;
		used[at] = true;
		to[i] = at;
		moved |= at != i;
	}
	if (!moved)
		return;
	for (unsigned i = 0; i < all; i++) {
		if (mine[i])
			continue;
		while (used[next])
			next++;
		used[next] = true;
		to[i] = next;
	}
	r2 = ol_xcalloc(all, sizeof(*r2));
	d2 = ol_xcalloc(all, sizeof(*d2));
	for (unsigned i = 0; i < all; i++) {
		if (to[i] != i)
			ol_warn(
			    "store: data dir %s is drive %u of erasure set %u (its identity record "
			    "%s) but data_dirs lists it as entry %u: it is used as its record says "
			    "(list it as entry %u to silence this)",
			    cfg->data_dirs[i], to[i] % n, to[i] / n, OL_DRIVEID_NAME, i + 1,
			    to[i] + 1);
		memcpy(d2[to[i]], cfg->data_dirs[i], OL_CFG_STR);
		r2[to[i]] = rec[i];
		rc2[to[i]] = rc[i];
	}
	memcpy(cfg->data_dirs, d2, all * sizeof(*d2));
	memcpy(rec, r2, all * sizeof(*r2));
	memcpy(rc, rc2, all * sizeof(*rc));
	free(r2);
	free(d2);
}

/* Check every data dir's record: rc[i] what reading it answered. */
static int
check_all(const struct ol_config *cfg, unsigned n, unsigned m, const struct ol_driveid *rec,
	  const int *rc, const char *id)
{
	for (unsigned i = 0; i < m * n; i++) {
		const char *root = cfg->data_dirs[i];

		if (rc[i] == -EINVAL) {
			ol_err("store: data dir %s: its identity record %s is unreadable; restore "
			       "it, or wipe the drive (remove %s/.openlake) to reuse it (it is "
			       "then healed)",
			       root, OL_DRIVEID_NAME, root);
			return -EINVAL;
		}
		if (rc[i] == -ENOENT && m > 1 && ol_driveid_used(root)) {
			ol_err(
			    "store: data dir %s holds a store created as one erasure set (it has "
			    "no format record), but this config lays %u data dirs out as %u sets "
			    "of %u: a store's set count cannot change; open it with data_dirs = "
			    "the drives it was created with and set_drive_count = their count",
			    root, m * n, m, n);
			return -EINVAL;
		}
		if (!rc[i] && (fits(root, &rec[i], i, n, m, id) || duplicate(cfg, rec, rc, i)))
			return -EINVAL;
	}
	return 0;
}

/* Write the records the drives lack (blank, an older build's, version 1), fill ids. */
static void
write_all(const struct ol_config *cfg, unsigned n, unsigned m, const struct ol_driveid *rec,
	  const int *rc, const char *id, struct ol_driveid *ids)
{
	for (unsigned i = 0; i < m * n; i++) {
		const char *root = cfg->data_dirs[i];
		struct ol_driveid *e = &ids[i];
		int w;

		*e = (struct ol_driveid){.version = 2,
					 .sets = m,
					 .set = i / n,
					 .index = i % n,
					 .drives = n,
					 .parity = cfg->default_parity_count};
		snprintf(e->store, sizeof(e->store), "%s", id);
		if (!rc[i] && rec[i].version == 2) {
			memcpy(e->drive, rec[i].drive, sizeof(e->drive));
			if (rec[i].parity != e->parity)
				ol_info("store: data dir %s was formatted with parity %u, "
					"default_parity_count is now %u (new objects use it)",
					root, rec[i].parity, e->parity);
			continue;
		}
		if (rc[i] && rc[i] != -ENOENT)
			continue; /* unreadable now: the set opens it offline, the monitor checks */
		if (!rc[i] || ol_driveid_used(root))
			ol_info("store: data dir %s: identity record written (a drive of an older "
				"build)",
				root);
		if ((w = ol_driveid_uuid(e->drive)) == 0 && (w = ol_mkdir_p(root)) == 0)
			w = ol_driveid_write(root, e);
		if (w) {
			ol_warn("store: data dir %s: cannot write its identity record: %s", root,
				strerror(-w));
			e->drive[0] = 0;
		}
	}
}

int
ol_format_open(struct ol_config *cfg, unsigned n, unsigned m, uint64_t *seed,
	       struct ol_driveid *ids)
{
	struct ol_driveid *rec = ol_xcalloc(m * n, sizeof(*rec));
	int *rc = ol_xcalloc(m * n, sizeof(*rc)), err;
	char id[OL_DRIVEID_STORE] = "", head[17];
	const char *v;

	for (unsigned i = 0; i < m * n; i++)
		rc[i] = ol_driveid_read(cfg->data_dirs[i], &rec[i]);
	v = vote(rec, rc, m * n);
	if (v)
		snprintf(id, sizeof(id), "%s", v);
	reorder(cfg, n, m, rec, rc, id);
	err = check_all(cfg, n, m, rec, rc, id);
	if (err)
		goto out;
	if (!id[0]) {
		if ((err = ol_driveid_uuid(id)))
			goto out;
		ol_info("store: store %s: %u erasure set(s) of %u drives", id, m, n);
	}
	write_all(cfg, n, m, rec, rc, id, ids);
	memcpy(head, id, 16);
	head[16] = 0;
	*seed = m == 1 ? 0 : strtoull(head, NULL, 16);
out:
	free(rec);
	free(rc);
	return err;
}

/* Does record f name the position that drive d of st is? */
static bool
same_place(const struct ol_driveid *e, const struct ol_driveid *f)
{
	return !strcmp(e->store, f->store) && e->pool == f->pool && e->sets == f->sets &&
	       e->set == f->set && e->drives == f->drives &&
	       (f->version != 2 || e->index == f->index);
}

int
ol_format_match(const struct ol_driveid *e, const struct ol_driveid *f, const char *where,
		char *why, size_t cap)
{
	if (same_place(e, f))
		return 0;
	if (strcmp(e->store, f->store))
		snprintf(why, cap,
			 "another store's disk is there (%s: store %s set %u drive %u; this is "
			 "store %s): put the right disk back, or wipe it to reuse it",
			 where, f->store, f->set, f->index, e->store);
	else
		snprintf(why, cap,
			 "another drive of this store is there (%s: pool %u set %u drive %u; this "
			 "slot: pool %u set %u drive %u): put the right disk back, or wipe it to "
			 "reuse it",
			 where, f->pool, f->set, f->index, e->pool, e->set, e->index);
	return -EXDEV;
}

int
ol_format_verify(struct ol_store *st, int d, bool ours, char *why, size_t cap)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_driveid f;
	int rc;

	if (!dr->id.store[0])
		return 0; /* opened without identity (tests of the engine alone) */
	rc = ol_driveid_read(dr->root, &f);
	/* no record: blank, ours, or a drive of an older build never seen with one (unreadable
	 * when the store opened: taken at its position, as the open takes such drives) */
	if (rc == -ENOENT)
		if (ours || !dr->id.drive[0] || !ol_driveid_used(dr->root))
			return 1;
	if (rc == -ENOENT) {
		snprintf(why, cap,
			 "it holds object-store metadata but no identity record (a disk of an "
			 "older build or another store): wipe it to reuse it");
		return -EXDEV;
	}
	if (rc == -EINVAL) {
		snprintf(why, cap,
			 "its identity record %s is garbled: restore it, or wipe the "
			 "drive to reuse it",
			 OL_DRIVEID_NAME);
		return -EXDEV;
	}
	if (rc) {
		snprintf(why, cap, "cannot read its identity record: %s", strerror(-rc));
		return rc;
	}
	if ((rc = ol_format_match(&dr->id, &f, "its identity record", why, cap)))
		return rc;
	if (f.version == 2 && strcmp(f.drive, dr->id.drive)) {
		if (dr->id.drive[0])
			ol_info("store: drive %s: now drive UUID %s (was %s)", dr->root, f.drive,
				dr->id.drive);
		memcpy(dr->id.drive, f.drive, sizeof(f.drive));
	}
	return 0;
}

int
ol_format_claim(struct ol_store *st, int d)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_driveid e = dr->id;
	int rc;

	if (!e.store[0])
		return 0;
	if ((rc = ol_driveid_uuid(e.drive)) || (rc = ol_driveid_write(dr->root, &e))) {
		ol_warn("store: drive %s: cannot write its identity record: %s", dr->root,
			strerror(-rc));
		return rc;
	}
	memcpy(dr->id.drive, e.drive, sizeof(e.drive));
	ol_info("store: drive %s: identity record written (drive UUID %s, set %u drive %u)",
		dr->root, e.drive, e.set, e.index);
	return 0;
}
