/* kv/metrics.c - the KV pool's figures on /metrics (Prometheus text). Server side only. */
#include "base/metrics.h"
#include "kv/engine.h"
#include "kv/kv_metrics.h"

void
ol_kv_metrics_render(struct ol_strbuf *b, void *arg)
{
	struct ol_kve_stats s;
	ol_kve_get_stats(arg, &s);
	ol_strbuf_printf(b,
			 "# HELP openlake_kv_capacity_bytes Size of each KV tier.\n"
			 "# TYPE openlake_kv_capacity_bytes gauge\n"
			 "openlake_kv_capacity_bytes{tier=\"dram\"} %llu\n"
			 "openlake_kv_capacity_bytes{tier=\"nvme\"} %llu\n"
			 "# HELP openlake_kv_used_bytes Bytes held in each KV tier.\n"
			 "# TYPE openlake_kv_used_bytes gauge\n"
			 "openlake_kv_used_bytes{tier=\"dram\"} %llu\n"
			 "openlake_kv_used_bytes{tier=\"nvme\"} %llu\n"
			 "# HELP openlake_kv_entries Blocks held in each KV tier.\n"
			 "# TYPE openlake_kv_entries gauge\n"
			 "openlake_kv_entries{tier=\"dram\"} %llu\n"
			 "openlake_kv_entries{tier=\"nvme\"} %llu\n",
			 (unsigned long long)s.dram_cap, (unsigned long long)s.nvme_cap,
			 (unsigned long long)s.dram_used, (unsigned long long)s.nvme_used,
			 (unsigned long long)s.dram_entries, (unsigned long long)s.nvme_entries);
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_kv_hits_total Gets served, by tier.\n"
	    "# TYPE openlake_kv_hits_total counter\n"
	    "openlake_kv_hits_total{tier=\"dram\"} %llu\n"
	    "openlake_kv_hits_total{tier=\"nvme\"} %llu\n"
	    "# HELP openlake_kv_misses_total Gets of a key the pool does not hold.\n"
	    "# TYPE openlake_kv_misses_total counter\nopenlake_kv_misses_total %llu\n"
	    "# HELP openlake_kv_puts_total Blocks stored.\n"
	    "# TYPE openlake_kv_puts_total counter\nopenlake_kv_puts_total %llu\n"
	    "# HELP openlake_kv_duplicate_puts_total Puts of a key already held.\n"
	    "# TYPE openlake_kv_duplicate_puts_total counter\n"
	    "openlake_kv_duplicate_puts_total %llu\n"
	    "# HELP openlake_kv_deletes_total Blocks deleted by clients.\n"
	    "# TYPE openlake_kv_deletes_total counter\nopenlake_kv_deletes_total %llu\n"
	    "# HELP openlake_kv_evictions_total Blocks dropped to make room.\n"
	    "# TYPE openlake_kv_evictions_total counter\nopenlake_kv_evictions_total %llu\n"
	    "# HELP openlake_kv_demotions_total Blocks moved from DRAM to the NVMe tier.\n"
	    "# TYPE openlake_kv_demotions_total counter\nopenlake_kv_demotions_total %llu\n"
	    "# HELP openlake_kv_promotions_total Blocks moved from NVMe back to DRAM on a hit.\n"
	    "# TYPE openlake_kv_promotions_total counter\n"
	    "openlake_kv_promotions_total %llu\n"
	    "# HELP openlake_kv_writebacks_total Blocks written behind from DRAM to NVMe.\n"
	    "# TYPE openlake_kv_writebacks_total counter\n"
	    "openlake_kv_writebacks_total %llu\n"
	    "# HELP openlake_kv_corrupt_total Blocks failing their checksum.\n"
	    "# TYPE openlake_kv_corrupt_total counter\nopenlake_kv_corrupt_total %llu\n"
	    "# HELP openlake_kv_full_total Puts refused because no tier had room.\n"
	    "# TYPE openlake_kv_full_total counter\nopenlake_kv_full_total %llu\n"
	    "# HELP openlake_kv_pinned DRAM slots pinned or reserved by clients now.\n"
	    "# TYPE openlake_kv_pinned gauge\nopenlake_kv_pinned %llu\n",
	    (unsigned long long)s.hits_dram, (unsigned long long)s.hits_nvme,
	    (unsigned long long)s.misses, (unsigned long long)s.puts,
	    (unsigned long long)s.dup_puts, (unsigned long long)s.deletes,
	    (unsigned long long)s.evictions, (unsigned long long)s.demotions,
	    (unsigned long long)s.promotions, (unsigned long long)s.writebacks,
	    (unsigned long long)s.corrupt, (unsigned long long)s.full,
	    (unsigned long long)s.pinned);
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_kv_writeback_backlog_bytes Bytes put to DRAM, not yet on NVMe.\n"
	    "# TYPE openlake_kv_writeback_backlog_bytes gauge\n"
	    "openlake_kv_writeback_backlog_bytes %llu\n"
	    "# HELP openlake_kv_writeback_backlog_blocks Blocks put to DRAM, not yet on NVMe.\n"
	    "# TYPE openlake_kv_writeback_backlog_blocks gauge\n"
	    "openlake_kv_writeback_backlog_blocks %llu\n"
	    "# HELP openlake_kv_writeback_backlog_age_seconds Age of the oldest block not yet on "
	    "NVMe (0 = none).\n"
	    "# TYPE openlake_kv_writeback_backlog_age_seconds gauge\n"
	    "openlake_kv_writeback_backlog_age_seconds %.3f\n"
	    "# HELP openlake_kv_writeback_dropped_total Blocks evicted from DRAM before their "
	    "write-behind to NVMe (the disk was behind).\n"
	    "# TYPE openlake_kv_writeback_dropped_total counter\n"
	    "openlake_kv_writeback_dropped_total %llu\n"
	    "# HELP openlake_kv_writeback_waits_total Times a put waited for the write-behind.\n"
	    "# TYPE openlake_kv_writeback_waits_total counter\n"
	    "openlake_kv_writeback_waits_total %llu\n",
	    (unsigned long long)s.dirty_bytes, (unsigned long long)s.dirty_blocks,
	    (double)s.dirty_age_ms / 1000.0, (unsigned long long)s.wb_dropped,
	    (unsigned long long)s.writeback_waits);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
void
ol_kv_metrics_label(struct ol_strbuf *b, const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p == '\\' || *p == '"')
			ol_strbuf_printf(b, "\\%c", *p);
		else if (*p == '\n')
			ol_strbuf_printf(b, "\\n");
		else
			ol_strbuf_printf(b, "%c", *p);
	}
}

/* The figures of one namespace (ol_kve_ns_each), one family per pass (which). */
struct nsm {
	struct ol_strbuf *b;
	int which; /* 0 blocks, 1 bytes, 2 quota evictions */
};

static void
ns_row(void *arg, const struct ol_kve_ns *n)
{
	static const char *const fam[3] = {"openlake_kv_ns_blocks", "openlake_kv_ns_bytes",
					   "openlake_kv_ns_quota_evictions_total"};
	struct nsm *m = arg;
	char lb[64];
	const char *name = ol_kve_ns_label(n, lb, sizeof(lb));
	uint64_t v[3][2] = {{n->dram_blocks, n->nvme_blocks},
			    {n->dram_bytes, n->nvme_bytes},
			    {n->quota_evictions, 0}};
	for (int t = 0; t < (m->which == 2 ? 1 : 2); t++) {
		ol_strbuf_printf(m->b, "%s{namespace=\"", fam[m->which]);
		ol_kv_metrics_label(m->b, name);
		if (m->which == 2)
			ol_strbuf_printf(m->b, "\"} %llu\n", (unsigned long long)v[2][0]);
		else
			ol_strbuf_printf(m->b, "\",tier=\"%s\"} %llu\n", t ? "nvme" : "dram",
					 (unsigned long long)v[m->which][t]);
	}
}

void
ol_kv_ns_metrics_render(struct ol_strbuf *b, struct ol_kve *e)
{
	static const char *const head[3] = {
	    "# HELP openlake_kv_ns_blocks Blocks each client namespace holds now, by tier.\n"
	    "# TYPE openlake_kv_ns_blocks gauge\n",
	    "# HELP openlake_kv_ns_bytes Bytes of the blocks each client namespace holds now, by "
	    "tier.\n# TYPE openlake_kv_ns_bytes gauge\n",
	    "# HELP openlake_kv_ns_quota_evictions_total Blocks of a namespace moved out of DRAM "
	    "to keep it within [kv] namespace_quota_frac.\n"
	    "# TYPE openlake_kv_ns_quota_evictions_total counter\n"};
	for (int w = 0; w < 3; w++) {
		struct nsm m = {b, w};
		ol_strbuf_printf(b, "%s", head[w]);
		ol_kve_ns_each(e, ns_row, &m);
	}
	ol_strbuf_printf(b,
			 "# HELP openlake_kv_namespace_quota_bytes DRAM bytes one namespace may "
			 "hold (0 = no quota).\n# TYPE openlake_kv_namespace_quota_bytes gauge\n"
			 "openlake_kv_namespace_quota_bytes %llu\n",
			 (unsigned long long)ol_kve_ns_quota(e));
}
