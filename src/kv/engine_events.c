/* kv/engine_events.c - the KV engine's removal events: per stripe rings merged by sequence
 * (see "Removal events" in engine_int.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kv/engine_int.h"

void
ol_kve_ev_init(struct ol_kve *e, uint64_t total)
{
	if (total == 0)
		return; /* off: no rings, no events */
	uint64_t per = total / e->nstripe, cap = 16;
	while (cap < per && cap < (1u << 24))
		cap *= 2;
	e->ev_mask = cap - 1;
	for (unsigned i = 0; i < e->nstripe; i++)
		e->stripes[i].ev = ol_xcalloc(cap, sizeof(struct kev));
}

void
ol_kve_ev_fini(struct ol_kve *e)
{
	for (unsigned i = 0; e->stripes && i < e->nstripe; i++)
		free(e->stripes[i].ev);
}

uint64_t
ol_kve_events_cap(const struct ol_kve *e)
{
	return e->stripes[0].ev ? (e->ev_mask + 1) * e->nstripe : 0;
}

/* v, about to be overwritten, is lost to readers behind it: in its stripe and namespace. */
void
ol_kve_ev_gone(struct ol_kve *e, struct kstripe *st, const struct kev *v)
{
	st->ev_gone = v->seq + 1;
	_Atomic uint64_t *g = &e->ns[v->ns].ev_gone; /* stripes race: keep the highest */
	uint64_t cur = atomic_load_explicit(g, memory_order_relaxed);
	while (cur < v->seq + 1 &&
	       !atomic_compare_exchange_weak_explicit(g, &cur, v->seq + 1, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static int
by_seq(const void *a, const void *b)
{
	uint64_t x = ((const struct kev *)a)->seq, y = ((const struct kev *)b)->seq;
	return x < y ? -1 : x > y;
}

/* Append stripe st's events of namespace ns (slot slot) numbered in [from, end) to *out
 * (grown). Lost: this stripe overwrote an event numbered >= from, and so did some stripe for
 * ns (read under this stripe's mutex: an overwrite here before this read is in it). */
static void
ev_collect(struct ol_kve *e, struct kstripe *st, const uint8_t ns[16], uint16_t slot, uint64_t from,
	   uint64_t end, struct kev **out, size_t *n, size_t *cap, bool *lost)
{
	pthread_mutex_lock(&st->mu);
	uint64_t have = st->ev_head < e->ev_mask + 1 ? st->ev_head : e->ev_mask + 1;
	*lost |= st->ev_gone > from &&
		 atomic_load_explicit(&e->ns[slot].ev_gone, memory_order_relaxed) > from;
	for (uint64_t i = st->ev_head - have; i < st->ev_head; i++) {
		const struct kev *v = &st->ev[i & e->ev_mask];
		if (v->seq < from || v->seq >= end || memcmp(v->k.b + 32, ns, 16) != 0)
			continue;
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 64;
			*out = realloc(*out, *cap * sizeof(**out));
			if (!*out)
				ol_die("kv: out of memory for removal events");
		}
		(*out)[(*n)++] = *v;
	}
	pthread_mutex_unlock(&st->mu);
}

unsigned
ol_kve_events(struct ol_kve *e, const uint8_t ns[16], uint64_t from, uint8_t (*keys)[32],
	      unsigned max, uint64_t *next, bool *lost)
{
	uint64_t end = atomic_load(&e->ev_seq);
	*lost = false;
	*next = end;
	if (from == OL_KVE_EV_NOW || !e->stripes[0].ev)
		return 0;
	if (from > end) { /* a cursor of another server life: everything may be gone */
		*lost = true;
		from = 0;
	}
	struct kev *v = NULL;
	size_t n = 0, cap = 0;
	uint16_t slot = ol_kve_ns_slot(e, ns);
	for (unsigned i = 0; i < e->nstripe; i++)
		ev_collect(e, &e->stripes[i], ns, slot, from, end, &v, &n, &cap, lost);
	if (n > 1)
		qsort(v, n, sizeof(*v), by_seq);
	unsigned k = n < max ? (unsigned)n : max;
	for (unsigned i = 0; i < k; i++)
		memcpy(keys[i], v[i].k.b, 32);
	if (k < n) /* the rest at the next call */
		*next = k ? v[k - 1].seq + 1 : from;
	free(v);
	return k;
}
