/* client/stats.c - ol_kv_stats: every node's server stats plus totals, as JSON. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "kv/net.h"

#define OL_API __attribute__((visibility("default")))
/* One node's stats: what a server sends (its namespaces' rows up to 32 KiB), with room. */
#define STATS_BUF (64u * 1024)

static const char *const total_keys[] = {"dram_capacity",  "dram_used",
					 "nvme_capacity",  "nvme_used",
					 "entries",	   "hits",
					 "misses",	   "evictions",
					 "demotions",	   "promotions",
					 "puts",	   "backlog_bytes",
					 "backlog_blocks", "writeback_dropped",
					 "writebacks",	   "backlog_oldest_ms"};
#define N_TOTAL (sizeof(total_keys) / sizeof(total_keys[0]))

static uint64_t
json_u64(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* Fetch one node's stats JSON into buf. 0 or -errno. */
static int
node_stats(struct ol_client *c, struct olc_node *nd, char *buf, size_t cap, bool *local)
{
	struct olc_conn cn;
	int r = olc_conn_get(c, nd, &cn);
	if (r < 0)
		return r;
	struct ol_kvp_hdr h = {.op = OL_KVP_STATS}, rp;
	r = olc_send(c, &cn, &h, NULL, 0);
	if (r == 0 && (r = olc_recv_hdr(&cn, &h, &rp)) == 0 && rp.body_len >= cap)
		r = -EPROTO;
	if (r == 0 && (r = olc_read(&cn, buf, rp.body_len)) == 0)
		buf[rp.body_len] = '\0';
	*local = cn.local;
	olc_conn_put(c, nd, &cn, r == 0);
	return r;
}

struct out {
	char *p;
	size_t cap, len;
	bool overflow;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->len, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0 || o->len + (size_t)n >= o->cap)
		o->overflow = true;
	else
		o->len += (size_t)n;
}

OL_API int
ol_kv_stats(struct ol_client *c, char *json, size_t cap)
{
	if (!c || !json || cap == 0)
		return -EINVAL;
	char *buf = malloc(STATS_BUF);
	if (!buf)
		return -ENOMEM;
	olc_view_maybe_refresh(c); /* the members of a cluster, when it is one */
	uint64_t tot[N_TOTAL] = {0};
	unsigned up = 0;
	struct out o = {json, cap, 0, false};
	emit(&o, "{\"nodes\":[");
	for (size_t i = 0; i < c->n_nodes; i++) {
		bool local = false;
		int r = node_stats(c, &c->nodes[i], buf, STATS_BUF, &local);
		emit(&o, "%s{\"addr\":\"%s\",\"up\":%s,\"local\":%s", i ? "," : "",
		     c->nodes[i].addr, r == 0 ? "true" : "false", local ? "true" : "false");
		if (r == 0) {
			up++;
			emit(&o, ",\"stats\":%s}", buf);
			for (size_t k = 0; k < N_TOTAL; k++) {
				uint64_t v = json_u64(buf, total_keys[k]);
				if (k == N_TOTAL - 1) /* the oldest backlog: a maximum, not a sum */
					tot[k] = v > tot[k] ? v : tot[k];
				else
					tot[k] += v;
			}
		} else {
			emit(&o, ",\"error\":\"%s\"}", strerror(-r));
		}
	}
	emit(&o, "],\"total\":{\"nodes\":%zu,\"nodes_up\":%u", c->n_nodes, up);
	for (size_t k = 0; k < N_TOTAL; k++)
		emit(&o, ",\"%s\":%llu", total_keys[k], (unsigned long long)tot[k]);
	emit(&o, "}");
	if (olz_stats_json(c, buf, STATS_BUF) > 0)
		emit(&o, ",\"client\":%s", buf);
	if (olc_view_json(c, buf, STATS_BUF) > 0)
		emit(&o, ",\"view\":%s", buf);
	emit(&o, "}");
	free(buf);
	return o.overflow ? -ENOSPC : (int)o.len;
}
