/* store/sweep.c - remove shard files that no record references: at open, leftovers of
 * writes interrupted before their metadata commit and old versions whose reclaim was cut
 * short by a crash (nothing is in flight then); after a heal and every
 * [storage] orphan_sweep_secs (ol_store_set_sweep), the same while the node runs (old
 * versions left on a drive that was read-only or offline when they were reclaimed, the
 * reclaim queue of a leader that crashed, the files of a follower killed mid-PUT), sparing
 * the files of writes in progress. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "store/store_int.h"

#include <pthread.h>

struct uuid_set {
	uint8_t (*u)[OL_UUID];
	size_t n, cap;
};

static void
set_add_rec(struct uuid_set *s, const struct ol_rec *r)
{
	struct ol_rpart p;

	if (r->flags & OL_REC_INLINE)
		return;
	for (uint32_t i = 0; i < r->n_parts; i++) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 256;
			s->u = ol_xrealloc(s->u, s->cap * OL_UUID);
		}
		ol_rec_part(r, i, &p);
		memcpy(s->u[s->n++], p.uuid, OL_UUID);
	}
}

static int
collect_db(struct ol_meta_txn *t, enum ol_meta_db db, struct uuid_set *s)
{
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl;
	struct ol_rec r, pr;
	int rc = ol_meta_cursor_open(t, db, &c);

	if (rc)
		return rc;
	for (rc = ol_meta_cursor_seek(c, "", 0, &k, &kl, &v, &vl); rc == 1;
	     rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl)) {
		if (ol_rec_decode(v, vl, &r)) {
			rc = -EUCLEAN; /* a damaged index: its references are not known */
			break;
		}
		set_add_rec(s, &r);
		if (r.prev_len && !ol_rec_decode(r.prev, r.prev_len, &pr))
			set_add_rec(s, &pr);
	}
	ol_meta_cursor_close(c);
	return rc;
}

static int
cmp_uuid(const void *a, const void *b)
{
	return memcmp(a, b, OL_UUID);
}

static int
unhex(const char *s, uint8_t *out)
{
	for (int i = 0; i < 2 * OL_UUID; i++) {
		int c = s[i], v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return -1;
		if (i & 1)
			out[i / 2] |= (uint8_t)v;
		else
			out[i / 2] = (uint8_t)(v << 4);
	}
	return s[2 * OL_UUID] ? -1 : 0;
}

static void
sweep_dir(const char *dir, const struct uuid_set *s, size_t *removed)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[OL_PATH_MAX + 80];
	uint8_t u[OL_UUID];

	if (!dh)
		return;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		if (unhex(e->d_name, u) == 0 && s->n && bsearch(u, s->u, s->n, OL_UUID, cmp_uuid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) == 0)
			(*removed)++;
	}
	closedir(dh);
}

static void
sweep_drive(struct ol_store *st, int d, const struct uuid_set *s)
{
	DIR *dh = opendir(st->d[d].data);
	struct dirent *e;
	size_t removed = 0;
	char sub[OL_PATH_MAX + 8];

	if (!dh) {
		ol_warn("store: drive %s: cannot sweep %s: %s", st->d[d].root, st->d[d].data,
			strerror(errno));
		return;
	}
	while ((e = readdir(dh))) {
		if (strlen(e->d_name) != 2 || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", st->d[d].data, e->d_name);
		sweep_dir(sub, s, &removed);
	}
	closedir(dh);
	if (removed)
		ol_info("store: drive %s: swept %zu unreferenced shard file(s)", st->d[d].root,
			removed);
}

/* A file is kept when a record on ANY drive references it, so a drive whose index was lost
 * keeps its shards (heal on read gives the records back). */
static void
sort_unique(struct uuid_set *s)
{
	size_t j = 0;

	if (!s->n)
		return;
	qsort(s->u, s->n, OL_UUID, cmp_uuid);
	for (size_t i = 1; i < s->n; i++)
		if (memcmp(s->u[i], s->u[j], OL_UUID))
			memcpy(s->u[++j], s->u[i], OL_UUID);
	s->n = j + 1;
}

/* The part uuids that records (or their prevs) of the online drives reference, sorted, once
 * per drive that references them (so a uuid appears as many times as drives know it). */
static int
collect_all(struct ol_store *st, struct uuid_set *s)
{
	int rc = 0;

	for (int d = 0; d < st->n && !rc; d++) {
		struct ol_meta *m = atomic_load(&st->d[d].meta);
		struct uuid_set one = {0};
		struct ol_meta_txn *t = NULL;

		if (!m)
			continue;
		rc = ol_meta_begin(m, false, &t);
		if (!rc)
			rc = collect_db(t, OL_META_OBJECTS, &one);
		if (!rc)
			rc = collect_db(t, OL_META_PARTS, &one);
		if (!rc)
			rc = collect_db(t, OL_META_VERSIONS, &one);
		if (rc) {
			ol_warn("store: drive %s: cannot read its records for the sweep: %s",
				st->d[d].root, strerror(rc < 0 ? -rc : rc));
			ol_drive_check(st, d, m);
		}
		ol_meta_abort(t); /* on a broken env: frees our wrapper only */
		sort_unique(&one);
		for (size_t i = 0; i < one.n; i++) {
			if (s->n == s->cap) {
				s->cap = s->cap ? 2 * s->cap : 256;
				s->u = ol_xrealloc(s->u, s->cap * OL_UUID);
			}
			memcpy(s->u[s->n++], one.u[i], OL_UUID);
		}
		free(one.u);
	}
	if (!rc && s->n)
		qsort(s->u, s->n, OL_UUID, cmp_uuid);
	return rc;
}

/* How many drives reference u (s from collect_all). */
static int
refs(const struct uuid_set *s, const uint8_t *u)
{
	const uint8_t(*hit)[OL_UUID] = s->n ? bsearch(u, s->u, s->n, OL_UUID, cmp_uuid) : NULL;
	size_t lo, hi;

	if (!hit)
		return 0;
	lo = hi = (size_t)(hit - s->u);
	while (lo > 0 && !memcmp(s->u[lo - 1], u, OL_UUID))
		lo--;
	while (hi + 1 < s->n && !memcmp(s->u[hi + 1], u, OL_UUID))
		hi++;
	return (int)(hi - lo + 1);
}

int
ol_sweep(struct ol_store *st)
{
	struct uuid_set s = {0};
	int rc = collect_all(st, &s);

	for (int d = 0; d < st->n && !rc; d++)
		if (st->d[d].meta &&
		    !ol_drive_remote(st, d)) /* remote: not built (no SHARD_LIST) */
			sweep_drive(st, d, &s);
	if (rc)
		ol_warn("store: sweep skipped: %s", strerror(-rc));
	free(s.u);
	return rc;
}

struct cand {
	uint8_t u[OL_UUID];
	int d;
};

static void
list_drive(struct ol_store *st, int d, time_t before, struct cand **c, size_t *n, size_t *cap,
	   size_t *young)
{
	DIR *dh = opendir(st->d[d].data), *sh;
	struct dirent *e, *f;
	char sub[OL_PATH_MAX + 8], path[OL_PATH_MAX + 80];
	struct stat sb;

	while (dh && (e = readdir(dh))) {
		if (strlen(e->d_name) != 2 || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", st->d[d].data, e->d_name);
		sh = opendir(sub);
		while (sh && (f = readdir(sh))) {
			uint8_t u[OL_UUID];

			snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
			if (f->d_name[0] == '.' || unhex(f->d_name, u) || stat(path, &sb))
				continue;
			if (sb.st_mtime > before) {
				(*young)++;
				continue;
			}
			if (*n == *cap) {
				*cap = *cap ? 2 * *cap : 256;
				*c = ol_xrealloc(*c, *cap * sizeof(**c));
			}
			memcpy((*c)[*n].u, u, OL_UUID);
			(*c)[(*n)++].d = d;
		}
		if (sh)
			closedir(sh);
	}
	if (dh)
		closedir(dh);
}

struct rlist {
	int d;
	time_t before;
	struct cand **c;
	size_t *n, *cap, *young;
};

static int
rlist_cb(void *arg, const char *dir, const char *name, uint64_t mtime)
{
	struct rlist *l = arg;
	uint8_t u[OL_UUID];

	(void)dir;
	if (unhex(name, u))
		return 0;
	if ((time_t)mtime > l->before) {
		(*l->young)++;
		return 0;
	}
	if (*l->n == *l->cap) {
		*l->cap = *l->cap ? 2 * *l->cap : 256;
		*l->c = ol_xrealloc(*l->c, *l->cap * sizeof(**l->c));
	}
	memcpy((*l->c)[*l->n].u, u, OL_UUID);
	(*l->c)[(*l->n)++].d = l->d;
	return 0;
}

/* A remote drive's shard files, listed over the plane (SHARD_LIST). */
static void
list_remote(struct ol_store *st, int d, time_t before, struct cand **c, size_t *n, size_t *cap,
	    size_t *young)
{
	struct rlist l = {d, before, c, n, cap, young};
	int rc = ol_rd_list(st, d, rlist_cb, &l);

	if (rc)
		ol_warn("store: drive %s: cannot list shards: %s", st->d[d].root, strerror(-rc));
}

/* One sweep of set st; stop (NULL: none) set ends it early, between drives and unlinks (a
 * closing store does not wait for a whole sweep of a large set).
 *
 * Order matters: the files are listed first, then the records are read. A write whose file
 * was listed either still runs (in flight: kept) or has ended, committed (referenced: kept)
 * or aborted (its file is garbage). Only with every drive online: an offline drive's
 * records are not known. "Referenced" means by at least k drives: a version known to fewer
 * can never be read (a read needs k votes); this is what a drive that missed deletes and
 * overwrites while offline keeps pointing at. */
static size_t
sweep_set(struct ol_store *st, int min_age_s, const atomic_bool *stop)
{
	struct uuid_set s = {0};
	struct cand *c = NULL;
	uint8_t(*q)[OL_UUID] = NULL;
	size_t n = 0, cap = 0, removed = 0, held = 0, young = 0, nq;
	char path[OL_PATH_MAX + 80];
	time_t before = time(NULL) - min_age_s;
	int online = ol_set_drives_online(st), rc;

	if (online < st->n) {
		ol_warn("store: orphan sweep skipped: %d of %d drives online (an offline drive's "
			"records are not known)",
			online, st->n);
		return 0;
	}
	for (int d = 0; d < st->n && !(stop && atomic_load(stop)); d++) {
		if (ol_drive_remote(st, d))
			list_remote(st, d, before, &c, &n, &cap, &young);
		else
			list_drive(st, d, before, &c, &n, &cap, &young);
	}
	if (stop && atomic_load(stop))
		n = 0; /* the store closes */
	if (!n) {
		if (young)
			ol_info("store: orphan sweep left %zu shard file(s) younger than %d s "
				"unchecked",
				young, min_age_s);
		free(c);
		return 0;
	}
	rc = collect_all(st, &s);
	online = ol_set_drives_online(st);
	if (rc || online < st->n) {
		ol_warn("store: orphan sweep skipped: %s",
			rc ? strerror(-rc) : "a drive went offline while its records were read");
		n = 0;
	}
	/* taken after the records: a version replaced before they were read is queued by now
	 * (unless its commit has not yet queued it: then it goes here, as without a delay) */
	nq = n ? ol_reclaim_queued(st, &q) : 0;
	for (size_t i = 0; i < n && !(stop && atomic_load(stop)); i++) {
		if (refs(&s, c[i].u) >= st->k)
			continue;
		if (ol_flight_has(st, c[i].u) || ol_inuse_has_shard(st, c[i].u) ||
		    ol_reclaim_has(q, nq, c[i].u)) {
			held++;
			continue;
		}
		ol_shard_path(st, c[i].d, c[i].u, path, sizeof(path));
		if (ol_drive_remote(st, c[i].d)) {
			ol_shard_unlink(st, c[i].d, c[i].u);
			removed++;
		} else if (unlink(path)) {
			ol_warn("store: drive %s: cannot remove orphan shard %s: %s",
				st->d[c[i].d].root, path, strerror(errno));
			continue;
		} else {
			removed++;
		}
		ol_debug("store: drive %s: removed orphan shard %s (no record references it)",
			 st->d[c[i].d].root, path);
	}
	if (removed)
		ol_info("store: orphan sweep removed %zu shard file(s) no record references",
			removed);
	if (held)
		ol_info("store: orphan sweep kept %zu unreferenced shard file(s) of writes in "
			"progress, versions being read or waiting for the reclaim delay",
			held);
	if (young)
		ol_info("store: orphan sweep left %zu shard file(s) younger than %d s unchecked",
			young, min_age_s);
	free(c);
	free(q);
	free(s.u);
	return removed;
}

/* ---- every sweep, and the periodic one (store.h, ol_store_set_sweep) ---- */

static pthread_mutex_t one_sweep = PTHREAD_MUTEX_INITIALIZER; /* two never overlap */
static _Atomic uint64_t sweeps_run, orphans_removed;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static size_t
sweep_one(struct ol_store *st, int min_age_s, const atomic_bool *stop)
{
	pthread_mutex_lock(&one_sweep);
	size_t n = sweep_set(st, min_age_s, stop);
	pthread_mutex_unlock(&one_sweep);
	atomic_fetch_add(&sweeps_run, 1);
	atomic_fetch_add(&orphans_removed, n);
	return n;
}

size_t
ol_sweep_orphans(struct ol_store *st, int min_age_s)
{
	return sweep_one(st, min_age_s, NULL);
}

int
ol_sweep_grace(const struct ol_store *set)
{
	unsigned g = atomic_load(&set->sweep_grace_s);

	return !set->remote ? 2 : g ? (int)g : OL_STORE_SWEEP_GRACE_S;
}

struct ol_sweeper {
	struct ol_store *st;
	int64_t interval_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thr;
	atomic_bool stop; /* also read by a sweep in progress, without mu */
};

static void
metrics(struct ol_strbuf *b, void *arg)
{
	(void)arg;
	ol_strbuf_printf(b,
			 "# HELP openlake_store_orphan_sweeps_total Orphan sweeps of an erasure "
			 "set run (each heal's and every [storage] orphan_sweep_secs).\n"
			 "# TYPE openlake_store_orphan_sweeps_total counter\n"
			 "openlake_store_orphan_sweeps_total %llu\n"
			 "# HELP openlake_store_orphans_removed_total Shard files those sweeps "
			 "removed: no record referenced them (writes cut short, versions whose "
			 "reclaim a crash lost).\n"
			 "# TYPE openlake_store_orphans_removed_total counter\n"
			 "openlake_store_orphans_removed_total %llu\n",
			 (unsigned long long)atomic_load(&sweeps_run),
			 (unsigned long long)atomic_load(&orphans_removed));
}

static void
metrics_register(void)
{
	ol_metrics_register(metrics, NULL);
}

static void *
sweeper_main(void *arg)
{
	struct ol_sweeper *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!atomic_load(&w->stop)) {
		int64_t end = (int64_t)ol_clock_ms() + w->interval_ms;

		while (!atomic_load(&w->stop) && (int64_t)ol_clock_ms() < end)
			ol_cond_wait_ms(&w->cv, &w->mu, end - (int64_t)ol_clock_ms());
		for (int i = 0; !atomic_load(&w->stop) && i < w->st->n_sets; i++) {
			struct ol_store *set = w->st->sets[i];

			pthread_mutex_unlock(&w->mu);
			(void)sweep_one(set, ol_sweep_grace(set), &w->stop);
			pthread_mutex_lock(&w->mu);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

void
ol_store_set_sweep(struct ol_store *st, unsigned interval_s, unsigned grace_s)
{
	struct ol_sweeper *w;

	for (int i = 0; i < st->n_sets; i++)
		atomic_store(&st->sets[i]->sweep_grace_s, grace_s);
	pthread_once(&metrics_once, metrics_register);
	if (!interval_s || st->readonly || st->sweeper)
		return;
	w = ol_xcalloc(1, sizeof(*w));
	w->st = st;
	w->interval_ms = (int64_t)interval_s * 1000;
	pthread_mutex_init(&w->mu, NULL);
	ol_cond_init_mono(&w->cv);
	if (pthread_create(&w->thr, NULL, sweeper_main, w)) {
		ol_warn("store: cannot start the periodic orphan sweep: orphan shard files are "
			"removed by heals only");
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return;
	}
	st->sweeper = w;
}

void
ol_sweeper_stop(struct ol_store *st)
{
	struct ol_sweeper *w = st->sweeper;

	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->stop, true);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thr, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
	st->sweeper = NULL;
}
