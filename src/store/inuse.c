/* store/inuse.c - versions being read keep their shard files past a reclaim.
 *
 * An overwrite or delete commits the new record and then unlinks the old version's shard
 * files. A GET that resolved the old version before that commit streams it part by part and
 * opens each part's files when it reaches it, so an unlink in between cut the body short.
 * A GET of a large object holds its version here (taken under the key's read lock, which the
 * commit's write lock excludes, so a reclaim after that commit always sees the hold); a
 * reclaim of a held version defers its unlinks to the last reader's release. A crash loses
 * the deferred list, leaving files no record names: the sweep and heal remove those. */
#include "base/log.h"
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

#define OL_INUSE_BUCKETS 64

struct ol_inuse_def {
	int d;
	uint8_t uuid[OL_UUID];
};

struct ol_inuse {
	struct ol_inuse *next;
	uint8_t vid[OL_UUID];
	unsigned readers;
	size_t n_def;
	struct ol_inuse_def *def;
};

/* Striped: each bucket its own lock, so GETs on different cores rarely meet on one. */
struct ol_inuse_tab {
	struct {
		pthread_mutex_t mu;
		struct ol_inuse *head;
	} b[OL_INUSE_BUCKETS];
};

struct ol_inuse_tab *
ol_inuse_new(void)
{
	struct ol_inuse_tab *t = ol_xcalloc(1, sizeof(*t));

	for (int i = 0; i < OL_INUSE_BUCKETS; i++)
		pthread_mutex_init(&t->b[i].mu, NULL);
	return t;
}

void
ol_inuse_free(struct ol_inuse_tab *t)
{
	if (!t)
		return;
	for (int i = 0; i < OL_INUSE_BUCKETS; i++) {
		while (t->b[i].head) {
			struct ol_inuse *e = t->b[i].head;

			t->b[i].head = e->next;
			free(e->def);
			free(e);
		}
		pthread_mutex_destroy(&t->b[i].mu);
	}
	free(t);
}

static unsigned
bucket_of(const uint8_t *vid)
{
	return (vid[0] ^ vid[7]) % OL_INUSE_BUCKETS;
}

/* The link that points at vid's entry (or at the NULL ending its bucket); bucket locked. */
static struct ol_inuse **
slot(struct ol_inuse_tab *t, unsigned b, const uint8_t *vid)
{
	struct ol_inuse **pp = &t->b[b].head;

	while (*pp && memcmp((*pp)->vid, vid, OL_UUID))
		pp = &(*pp)->next;
	return pp;
}

void
ol_inuse_hold(struct ol_store *st, const uint8_t *vid)
{
	struct ol_inuse_tab *t = st->inuse;
	unsigned b = bucket_of(vid);
	struct ol_inuse **pp;

	pthread_mutex_lock(&t->b[b].mu);
	pp = slot(t, b, vid);
	if (!*pp) {
		*pp = ol_xcalloc(1, sizeof(**pp));
		memcpy((*pp)->vid, vid, OL_UUID);
	}
	(*pp)->readers++;
	pthread_mutex_unlock(&t->b[b].mu);
}

void
ol_inuse_release(struct ol_store *st, const uint8_t *vid)
{
	struct ol_inuse_tab *t = st->inuse;
	unsigned b = bucket_of(vid);
	struct ol_inuse **pp, *e = NULL;

	pthread_mutex_lock(&t->b[b].mu);
	pp = slot(t, b, vid);
	if (*pp && --(*pp)->readers == 0) {
		e = *pp;
		*pp = e->next;
	}
	pthread_mutex_unlock(&t->b[b].mu);
	if (!e)
		return;
	for (size_t i = 0; i < e->n_def; i++)
		ol_reclaim_unlink(st, e->def[i].d, e->def[i].uuid); /* its delay from now */
	free(e->def);
	free(e);
}

bool
ol_inuse_defer(const struct ol_store *st, int d, const uint8_t *vid, const uint8_t *uuid)
{
	struct ol_inuse_tab *t = st->inuse;
	unsigned b = bucket_of(vid);
	struct ol_inuse *e;

	pthread_mutex_lock(&t->b[b].mu);
	e = *slot(t, b, vid);
	if (e) {
		e->def = ol_xrealloc(e->def, (e->n_def + 1) * sizeof(*e->def));
		e->def[e->n_def].d = d;
		memcpy(e->def[e->n_def].uuid, uuid, OL_UUID);
		e->n_def++;
	}
	pthread_mutex_unlock(&t->b[b].mu);
	return e != NULL;
}

bool
ol_inuse_has_shard(const struct ol_store *st, const uint8_t *uuid)
{
	struct ol_inuse_tab *t = st->inuse;
	bool found = false;

	for (int i = 0; i < OL_INUSE_BUCKETS && !found; i++) {
		pthread_mutex_lock(&t->b[i].mu);
		for (struct ol_inuse *e = t->b[i].head; e && !found; e = e->next)
			for (size_t j = 0; j < e->n_def && !found; j++)
				found = !memcmp(e->def[j].uuid, uuid, OL_UUID);
		pthread_mutex_unlock(&t->b[i].mu);
	}
	return found;
}
