/* base/metrics.h - Prometheus text metrics: modules register a render callback; counters and
 * latency histograms are lock-free (relaxed atomics), safe from any thread. */
#ifndef OL_BASE_METRICS_H
#define OL_BASE_METRICS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* growable text buffer (aborts on OOM: daemon only) */
struct ol_strbuf {
	char *p;
	size_t len, cap;
};
void ol_strbuf_printf(struct ol_strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ol_strbuf_free(struct ol_strbuf *b);

/* latency histogram; bucket upper bounds in microseconds (last is +Inf) */
#define OL_HIST_BUCKETS 18
extern const uint64_t ol_hist_bounds_us[OL_HIST_BUCKETS - 1];
struct ol_hist {
	uint64_t b[OL_HIST_BUCKETS];
	uint64_t sum_us, count;
};
void ol_hist_observe(struct ol_hist *h, uint64_t us);
/* quantile q in [0,1] estimated from the buckets (upper bound of the bucket), in us */
uint64_t ol_hist_quantile(const struct ol_hist *h, double q);
/* Render h as name_bucket{labels,le=...}, name_sum, name_count (seconds). labels may be "". */
void ol_hist_render(struct ol_strbuf *b, const char *name, const char *labels,
		    const struct ol_hist *h);

static inline void
ol_counter_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}
static inline uint64_t
ol_counter_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* Register a source rendered on every scrape, in registration order. Up to 32 sources.
 * Call at start-up; unregister before arg is freed. */
typedef void (*ol_metrics_fn)(struct ol_strbuf *out, void *arg);
int ol_metrics_register(ol_metrics_fn fn, void *arg);
void ol_metrics_unregister(ol_metrics_fn fn, void *arg);

/* The whole scrape: process metrics (uptime, RSS, threads, fds) then every source.
 * The caller frees out->p with ol_strbuf_free. */
void ol_metrics_render(struct ol_strbuf *out);

/* Monotonic microseconds. */
uint64_t ol_now_us(void);

#endif
