/* kv/kv_metrics.h - render callback for base/metrics (arg: the server's struct ol_kve). */
#ifndef OL_KV_KV_METRICS_H
#define OL_KV_KV_METRICS_H

struct ol_strbuf;
void ol_kv_metrics_render(struct ol_strbuf *b, void *arg);
/* What each namespace holds now, by tier (openlake_kv_ns_blocks, openlake_kv_ns_bytes), its
 * quota evictions and the quota: appended to b. Any thread. */
struct ol_kve;
void ol_kv_ns_metrics_render(struct ol_strbuf *b, struct ol_kve *e);
/* s as a Prometheus label value (backslash, double quote and newline escaped) onto b. */
void ol_kv_metrics_label(struct ol_strbuf *b, const char *s);

#endif
