/* store/reclaim.c - the delayed reclaim of replaced versions' shard files.
 *
 * A writer unlinks the shard files of the versions a commit replaced or deleted right after
 * the commit (ol_commit_reclaim, ol_reclaim; inuse.c defers those a local reader holds). A
 * read-only view on another node (store.h, "read-only view") that resolved such a version
 * just before the commit reads its shard files after it: with a delay set
 * (ol_store_set_reclaim_delay) the unlinks wait here, one small entry per shard file, until
 * delay ms after the commit, and this set's reclaim thread does them when due. Close unlinks
 * whatever is still queued. A crash loses the queue: the files are then ones no record names,
 * which the heal's orphan sweep removes (sweep.c skips files queued here while it runs). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "store/store_int.h"

struct ol_rq_ent {
	uint64_t due_ms;
	int d;
	uint8_t uuid[OL_UUID];
};

/* The entry i places after the head of the ring (caller holds rq_mu). */
static struct ol_rq_ent *
at(struct ol_store *st, size_t i)
{
	return &st->rq[(st->rq_head + i) % st->rq_cap];
}

/* Take the head off the ring into *e (caller holds rq_mu, the ring is not empty). */
static void
pop(struct ol_store *st, struct ol_rq_ent *e)
{
	*e = *at(st, 0);
	st->rq_head = (st->rq_head + 1) % st->rq_cap;
	st->rq_n--;
}

/* Grow the ring (caller holds rq_mu): false when it holds OL_RECLAIM_CAP already. */
static bool
grow(struct ol_store *st)
{
	size_t nc = st->rq_cap ? 2 * st->rq_cap : 256;
	struct ol_rq_ent *v;

	if (st->rq_n < st->rq_cap)
		return true;
	if (st->rq_cap >= OL_RECLAIM_CAP)
		return false;
	if (nc > OL_RECLAIM_CAP)
		nc = OL_RECLAIM_CAP;
	v = ol_xmalloc(nc * sizeof(*v));
	for (size_t i = 0; i < st->rq_n; i++)
		v[i] = *at(st, i);
	free(st->rq);
	st->rq = v;
	st->rq_cap = nc;
	st->rq_head = 0;
	return true;
}

void
ol_reclaim_unlink(struct ol_store *st, int d, const uint8_t *uuid)
{
	unsigned ms = atomic_load(&st->reclaim_ms);
	struct ol_rq_ent early = {0};
	bool full = false;

	if (!ms || st->readonly) {
		ol_shard_unlink(st, d, uuid);
		return;
	}
	pthread_mutex_lock(&st->rq_mu);
	if (!grow(st)) { /* the cap: the oldest entry (the nearest due) goes now */
		pop(st, &early);
		full = true;
		if (!st->rq_full_logged)
			ol_warn(
			    "store: %d shard files wait for their reclaim delay: the oldest are "
			    "unlinked before it ends (a follower reading them may answer 503)",
			    OL_RECLAIM_CAP);
		st->rq_full_logged = true;
	}
	*at(st, st->rq_n) = (struct ol_rq_ent){.due_ms = ol_io_now_ms() + ms, .d = d};
	memcpy(at(st, st->rq_n)->uuid, uuid, OL_UUID);
	st->rq_n++;
	pthread_cond_signal(&st->rq_cv);
	pthread_mutex_unlock(&st->rq_mu);
	if (full)
		ol_shard_unlink(st, early.d, early.uuid);
}

static int
uuid_cmp(const void *a, const void *b)
{
	return memcmp(a, b, OL_UUID);
}

size_t
ol_reclaim_queued(struct ol_store *st, uint8_t (**out)[OL_UUID])
{
	uint8_t(*v)[OL_UUID] = NULL;
	size_t n;

	pthread_mutex_lock(&st->rq_mu);
	n = st->rq_n;
	if (n) {
		v = ol_xmalloc(n * OL_UUID);
		for (size_t i = 0; i < n; i++)
			memcpy(v[i], at(st, i)->uuid, OL_UUID);
	}
	pthread_mutex_unlock(&st->rq_mu);
	if (n)
		qsort(v, n, OL_UUID, uuid_cmp);
	*out = v;
	return n;
}

bool
ol_reclaim_has(uint8_t (*const v)[OL_UUID], size_t n, const uint8_t *uuid)
{
	return n && bsearch(uuid, v, n, OL_UUID, uuid_cmp) != NULL;
}

static void *
reclaimer(void *arg)
{
	struct ol_store *st = arg;
	struct ol_rq_ent e;

	pthread_mutex_lock(&st->rq_mu);
	while (!st->rq_stop) {
		uint64_t now = ol_io_now_ms(), wait;
		struct timespec ts;

		if (st->rq_n && at(st, 0)->due_ms <= now) {
			pop(st, &e);
			pthread_mutex_unlock(&st->rq_mu);
			ol_shard_unlink(st, e.d, e.uuid);
			pthread_mutex_lock(&st->rq_mu);
			continue;
		}
		/* the head is the oldest entry; one whose delay was lowered since waits for it */
		wait = st->rq_n ? at(st, 0)->due_ms - now : 1000;
		if (wait > 1000)
			wait = 1000;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(wait % 1000) * 1000000L;
		ts.tv_sec += (time_t)(wait / 1000) + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&st->rq_cv, &st->rq_mu, &ts);
	}
	pthread_mutex_unlock(&st->rq_mu);
	return NULL;
}

void
ol_reclaim_init(struct ol_store *st)
{
	pthread_mutex_init(&st->rq_mu, NULL);
	pthread_cond_init(&st->rq_cv, NULL);
}

void
ol_reclaim_fini(struct ol_store *st)
{
	struct ol_rq_ent e;

	pthread_mutex_lock(&st->rq_mu);
	st->rq_stop = true;
	pthread_cond_signal(&st->rq_cv);
	pthread_mutex_unlock(&st->rq_mu);
	if (st->rq_started)
		pthread_join(st->rq_thr, NULL);
	st->rq_started = false;
	while (st->rq_n) { /* no thread left: the rest go now */
		pop(st, &e);
		ol_shard_unlink(st, e.d, e.uuid);
	}
	free(st->rq);
	st->rq = NULL;
	st->rq_cap = 0;
	pthread_cond_destroy(&st->rq_cv);
	pthread_mutex_destroy(&st->rq_mu);
}

/* One set: its delay, and its thread started the first time a delay is set. */
static void
set_delay(struct ol_store *st, unsigned ms)
{
	if (st->readonly)
		return; /* a view reclaims nothing */
	pthread_mutex_lock(&st->rq_mu);
	atomic_store(&st->reclaim_ms, ms);
	if (ms && !st->rq_started && !st->rq_stop)
		st->rq_started = pthread_create(&st->rq_thr, NULL, reclaimer, st) == 0;
	if (ms && !st->rq_started)
		atomic_store(&st->reclaim_ms, 0); /* no thread: unlink at once, as before */
	pthread_cond_signal(&st->rq_cv);
	pthread_mutex_unlock(&st->rq_mu);
}

void
ol_store_set_reclaim_delay(struct ol_store *st, unsigned ms)
{
	for (int i = 0; i < st->n_sets; i++)
		set_delay(st->sets[i], ms);
}

size_t
ol_store_reclaim_pending(struct ol_store *st)
{
	size_t n = 0;

	for (int i = 0; i < st->n_sets; i++) {
		pthread_mutex_lock(&st->sets[i]->rq_mu);
		n += st->sets[i]->rq_n;
		pthread_mutex_unlock(&st->sets[i]->rq_mu);
	}
	return n;
}
