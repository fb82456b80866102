/* kv/lease.c - leases on stored blocks: a table of pins keyed by (namespace, key). */
#include "kv/lease.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "openlake/openlake.h"

struct kvl_lease {
	struct kvl_lease *next;
	struct ol_kvk k;
	uint64_t off, seq, exp_ms;
};

struct kvl_ns {
	struct kvl_ns *next;
	uint8_t h[16];
	unsigned n;
};

#define KVL_BUCKETS 4096u

void
kvl_leases_init(struct kvl_leases *ls, uint64_t max_ttl_ms, unsigned max_per_ns)
{
	memset(ls, 0, sizeof(*ls));
	pthread_mutex_init(&ls->mu, NULL);
	ls->nb = KVL_BUCKETS;
	ls->tab = ol_xcalloc(ls->nb, sizeof(*ls->tab));
	ls->max_ttl_ms = max_ttl_ms;
	ls->max_per_ns = max_per_ns;
}

static size_t
bucket(const struct kvl_leases *ls, const struct ol_kvk *k)
{
	uint64_t h;
	memcpy(&h, k->b, sizeof(h)); /* keys are hashes: their first bytes spread well */
	return (size_t)(h % ls->nb);
}

static struct kvl_ns *
ns_of(struct kvl_leases *ls, const struct ol_kvk *k, bool create)
{
	for (struct kvl_ns *n = ls->ns; n; n = n->next)
		if (memcmp(n->h, k->b + 32, 16) == 0)
			return n;
	if (!create)
		return NULL;
	struct kvl_ns *n = ol_xcalloc(1, sizeof(*n));
	memcpy(n->h, k->b + 32, 16);
	n->next = ls->ns;
	ls->ns = n;
	return n;
}

static void
drop(struct kvl_leases *ls, struct ol_kve *e, struct kvl_lease **pp)
{
	struct kvl_lease *l = *pp;
	*pp = l->next;
	struct kvl_ns *n = ns_of(ls, &l->k, false);
	if (n && n->n > 0)
		n->n--;
	ls->n--;
	ol_kve_release(e, l->off, l->seq);
	free(l);
}

static struct kvl_lease **
find(struct kvl_leases *ls, const struct ol_kvk *k)
{
	struct kvl_lease **pp = &ls->tab[bucket(ls, k)];
	while (*pp && memcmp((*pp)->k.b, k->b, sizeof(k->b)) != 0)
		pp = &(*pp)->next;
	return pp;
}

int
kvl_lease(struct kvl_leases *ls, struct ol_kve *e, const struct ol_kvk *k, uint64_t ttl_ms,
	  uint64_t now_ms, uint64_t *len)
{
	*len = 0;
	if (ttl_ms == 0) {
		pthread_mutex_lock(&ls->mu);
		struct kvl_lease **pp = find(ls, k);
		bool had = *pp != NULL;
		if (had)
			drop(ls, e, pp);
		pthread_mutex_unlock(&ls->mu);
		return had ? OL_KV_OK : OL_KV_MISS;
	}
	if (ttl_ms > ls->max_ttl_ms)
		ttl_ms = ls->max_ttl_ms;
	/* pin first (may read the disk; no lease lock held), then record or swap it in: a key
	 * deleted and stored again since the last lease has a new slot, whose pin replaces */
	struct ol_kve_slot sl;
	int st = ol_kve_pin(e, k, true, &sl);
	if (st != OL_KV_OK)
		return st == OL_KV_CORRUPT ? OL_KV_MISS : st;
	pthread_mutex_lock(&ls->mu);
	struct kvl_lease **pp = find(ls, k);
	struct kvl_lease *l = *pp;
	if (l) {
		ol_kve_release(e, l->off, l->seq);
	} else {
		struct kvl_ns *n = ns_of(ls, k, true);
		if (n->n >= ls->max_per_ns) {
			pthread_mutex_unlock(&ls->mu);
			ol_kve_release(e, sl.off, sl.seq);
			return OL_KV_FULL;
		}
		n->n++;
		ls->n++;
		l = ol_xcalloc(1, sizeof(*l));
		l->k = *k;
		*pp = l;
	}
	l->off = sl.off;
	l->seq = sl.seq;
	l->exp_ms = now_ms + ttl_ms;
	pthread_mutex_unlock(&ls->mu);
	*len = sl.len;
	return OL_KV_OK;
}

unsigned
kvl_expire(struct kvl_leases *ls, struct ol_kve *e, uint64_t now_ms)
{
	unsigned n = 0;
	pthread_mutex_lock(&ls->mu);
	for (size_t b = 0; ls->n && b < ls->nb; b++) {
		struct kvl_lease **pp = &ls->tab[b];
		while (*pp) {
			if ((*pp)->exp_ms <= now_ms) {
				drop(ls, e, pp);
				n++;
			} else {
				pp = &(*pp)->next;
			}
		}
	}
	pthread_mutex_unlock(&ls->mu);
	return n;
}

void
kvl_leases_fini(struct kvl_leases *ls, struct ol_kve *e)
{
	kvl_expire(ls, e, UINT64_MAX);
	while (ls->ns) {
		struct kvl_ns *n = ls->ns;
		ls->ns = n->next;
		free(n);
	}
	free(ls->tab);
	pthread_mutex_destroy(&ls->mu);
}
