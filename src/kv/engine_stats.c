/* kv/engine_stats.c - engine counters as a struct and as JSON; shm geometry. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "kv/engine_int.h"

void
ol_kve_get_stats(struct ol_kve *e, struct ol_kve_stats *st)
{
	pthread_mutex_lock(&e->mu);
	*st = e->st;
	st->dram_cap = (uint64_t)e->n_pages * OL_KVE_PAGE;
	st->dram_used = e->dram_used;
	st->dram_entries = e->dram_entries;
	st->nvme_entries = e->nvme_entries;
	st->entries = e->n_ent;
	st->dirty_bytes = e->dirty_q_bytes + e->wb_bytes;
	st->pinned = 0;
	for (struct ent *x = e->lru_head; x; x = x->lnext)
		st->pinned += x->pins > 0;
	pthread_mutex_unlock(&e->mu);
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
	    "\"nvme\":%s,\"shm\":%s}",
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
	    e->spill ? "true" : "false", e->is_shm ? "true" : "false");
	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
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
