/* kv/kv_metrics.h - render callback for base/metrics (arg: the server's struct ol_kve). */
#ifndef OL_KV_KV_METRICS_H
#define OL_KV_KV_METRICS_H

struct ol_strbuf;
void ol_kv_metrics_render(struct ol_strbuf *b, void *arg);

#endif
