/* kv/engine_stats.c - engine counters as a struct and as JSON; shm geometry. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/metrics.h"

#include "kv/engine_int.h"

/* Add the counters of a stripe (every field of ol_kve_stats is a u64 counter). */
static void
stats_add(struct ol_kve_stats *to, const struct ol_kve_stats *from)
{
	_Static_assert(sizeof(*to) % sizeof(uint64_t) == 0, "ol_kve_stats is all u64");
	uint64_t *t = (uint64_t *)to;
	const uint64_t *f = (const uint64_t *)from;
	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		t[i] += f[i];
}

void
ol_kve_get_stats(struct ol_kve *e, struct ol_kve_stats *st)
{
	memset(st, 0, sizeof(*st));
	uint64_t oldest = UINT64_MAX, now = ol_now_us() / 1000;
	for (unsigned s = 0; s < e->nstripe; s++) {
		struct kstripe *k = &e->stripes[s];
		pthread_mutex_lock(&k->mu);
		stats_add(st, &k->st);
		st->dram_entries += k->dram_entries;
		st->nvme_entries += k->nvme_entries;
		st->entries += k->n_ent;
		if (k->dirty_head && k->dirty_head->put_ms < oldest)
			oldest = k->dirty_head->put_ms;
		for (struct ent *x = k->lru_head; x; x = x->lnext)
			st->pinned += x->pins > 0;
		pthread_mutex_unlock(&k->mu);
	}
	pthread_mutex_lock(&e->amu);
	st->dram_cap = (uint64_t)e->n_pages * OL_KVE_PAGE;
	st->dram_used = e->dram_used;
	st->prefaulted = e->prefaulted;
	pthread_mutex_unlock(&e->amu);
	pthread_mutex_lock(&e->wmu);
	st->writeback_waits = e->wb_waits;
	pthread_mutex_unlock(&e->wmu);
	uint64_t wb_n = atomic_load(&e->wb_n);
	st->dirty_bytes = atomic_load(&e->dirty_q_bytes) + atomic_load(&e->wb_bytes);
	st->dirty_blocks = atomic_load(&e->dirty_q_n) + wb_n;
	if (wb_n && atomic_load(&e->wb_oldest_ms) < oldest)
		oldest = atomic_load(&e->wb_oldest_ms);
	st->dirty_age_ms = oldest == UINT64_MAX || oldest > now ? 0 : now - oldest;
	if (e->spill) {
		struct ol_kvs_stats ss;
		ol_kvs_get_stats(e->spill, &ss);
		st->nvme_cap = ss.cap;
		st->nvme_used = ss.used;
	}
}

int
ol_kve_stats_json(struct ol_kve *e, char *buf, size_t cap)
{
	struct ol_kve_stats s;
	ol_kve_get_stats(e, &s);
	int n = snprintf(
	    buf, cap,
	    "{\"dram_capacity\":%llu,\"dram_used\":%llu,\"dram_entries\":%llu,"
	    "\"nvme_capacity\":%llu,\"nvme_used\":%llu,\"nvme_entries\":%llu,"
	    "\"entries\":%llu,\"puts\":%llu,\"dup_puts\":%llu,\"hits\":%llu,"
	    "\"hits_dram\":%llu,\"hits_nvme\":%llu,\"misses\":%llu,\"evictions\":%llu,"
	    "\"demotions\":%llu,\"promotions\":%llu,\"writebacks\":%llu,\"corrupt\":%llu,"
	    "\"deletes\":%llu,\"full\":%llu,\"pinned\":%llu,\"max_block\":%llu,"
	    "\"dirty_bytes\":%llu,\"writeback_waits\":%llu,\"prefaulted_pages\":%llu,"
	    "\"backlog_bytes\":%llu,\"backlog_blocks\":%llu,\"backlog_oldest_ms\":%llu,"
	    "\"writeback_dropped\":%llu,\"writeback\":\"%s\",\"promise\":\"%s\","
	    "\"nvme\":%s,\"shm\":%s,\"namespace_quota_bytes\":%llu}",
	    (unsigned long long)s.dram_cap, (unsigned long long)s.dram_used,
	    (unsigned long long)s.dram_entries, (unsigned long long)s.nvme_cap,
	    (unsigned long long)s.nvme_used, (unsigned long long)s.nvme_entries,
	    (unsigned long long)s.entries, (unsigned long long)s.puts,
	    (unsigned long long)s.dup_puts, (unsigned long long)s.hits,
	    (unsigned long long)s.hits_dram, (unsigned long long)s.hits_nvme,
	    (unsigned long long)s.misses, (unsigned long long)s.evictions,
	    (unsigned long long)s.demotions, (unsigned long long)s.promotions,
	    (unsigned long long)s.writebacks, (unsigned long long)s.corrupt,
	    (unsigned long long)s.deletes, (unsigned long long)s.full, (unsigned long long)s.pinned,
	    (unsigned long long)e->max_block, (unsigned long long)s.dirty_bytes,
	    (unsigned long long)s.writeback_waits, (unsigned long long)s.prefaulted,
	    (unsigned long long)s.dirty_bytes, (unsigned long long)s.dirty_blocks,
	    (unsigned long long)s.dirty_age_ms, (unsigned long long)s.wb_dropped,
	    !e->spill	? "off"
	    : e->strict ? "strict"
			: "async",
	    ol_kve_promise(e), e->spill ? "true" : "false", e->is_shm ? "true" : "false",
	    (unsigned long long)e->quota);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	size_t len = ol_kve_ns_json(e, buf, (size_t)n - 1, cap, 2); /* inside the object */
	int w = snprintf(buf + len, cap - len, "}");
	return w < 0 || len + (size_t)w >= cap ? -ENOSPC : (int)(len + (size_t)w);
}

const char *
ol_kve_promise(const struct ol_kve *e)
{
	if (!e->spill)
		return "a block is never served wrong; DRAM only: nothing survives a restart";
	if (e->strict)
		return "a block is never served wrong; a put returns once its block is on NVMe: "
		       "every acknowledged block survives a crash of the daemon";
	return "a block is never served wrong; a block whose write-behind completed survives a "
	       "crash; one still in the backlog at a crash may be a miss afterwards";
}

const char *
ol_kve_shm_name(const struct ol_kve *e)
{
	return e->is_shm ? e->shm_name : "";
}

uint64_t
ol_kve_shm_size(const struct ol_kve *e)
{
	return e->size;
}

uint8_t *
ol_kve_shm_base(const struct ol_kve *e)
{
	return e->base;
}

uint64_t
ol_kve_max_block(const struct ol_kve *e)
{
	return e->max_block;
}

uint64_t
ol_kve_epoch(const struct ol_kve *e)
{
	return e->epoch;
}
