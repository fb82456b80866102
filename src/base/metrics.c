#include "metrics.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/buf.h"
#include "base/clock.h"

const uint64_t ol_hist_bounds_us[OL_HIST_BUCKETS - 1] = {
    50,	   100,	   250,	   500,	   1000,    2500,    5000,    10000,	25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

void
ol_strbuf_printf(struct ol_strbuf *b, const char *fmt, ...)
{
	struct ol_buf t = {b->p, b->len, b->cap}; /* one growable buffer: base/buf.c */
	va_list ap;
	va_start(ap, fmt);
	ol_buf_vaddf(&t, fmt, ap);
	va_end(ap);
	b->p = t.p;
	b->len = t.len;
	b->cap = t.cap;
}

void
ol_strbuf_free(struct ol_strbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void
ol_hist_observe(struct ol_hist *h, uint64_t us)
{
	unsigned i = 0;
	while (i < OL_HIST_BUCKETS - 1 && us > ol_hist_bounds_us[i])
		i++;
	ol_counter_add(&h->b[i], 1);
	ol_counter_add(&h->sum_us, us);
	ol_counter_add(&h->count, 1);
}

uint64_t
ol_hist_quantile(const struct ol_hist *h, double q)
{
	uint64_t total = ol_counter_get(&h->count), seen = 0;
	if (!total)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total + 0.5);
	if (want < 1)
		want = 1;
	for (unsigned i = 0; i < OL_HIST_BUCKETS; i++) {
		seen += ol_counter_get(&h->b[i]);
		if (seen >= want)
			return i < OL_HIST_BUCKETS - 1 ? ol_hist_bounds_us[i] : UINT64_MAX;
	}
	return UINT64_MAX;
}

void
ol_hist_render(struct ol_strbuf *b, const char *name, const char *labels, const struct ol_hist *h)
{
	uint64_t cum = 0;
	const char *sep = labels[0] ? "," : "";
	for (unsigned i = 0; i < OL_HIST_BUCKETS; i++) {
		cum += ol_counter_get(&h->b[i]);
		if (i < OL_HIST_BUCKETS - 1)
			ol_strbuf_printf(b, "%s_bucket{%s%sle=\"%g\"} %lu\n", name, labels, sep,
					 (double)ol_hist_bounds_us[i] / 1e6, (unsigned long)cum);
		else
			ol_strbuf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %lu\n", name, labels, sep,
					 (unsigned long)cum);
	}
	ol_strbuf_printf(b, "%s_sum{%s} %.6f\n", name, labels,
			 (double)ol_counter_get(&h->sum_us) / 1e6);
	ol_strbuf_printf(b, "%s_count{%s} %lu\n", name, labels,
			 (unsigned long)ol_counter_get(&h->count));
}

#define MAX_SOURCES 32
static struct {
	ol_metrics_fn fn;
	void *arg;
} sources[MAX_SOURCES];
static unsigned n_sources;
static pthread_mutex_t sources_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t start_us;

uint64_t
ol_now_us(void)
{
	return ol_clock_us();
}

int
ol_metrics_register(ol_metrics_fn fn, void *arg)
{
	int rc = -ENOSPC;
	pthread_mutex_lock(&sources_lock);
	if (!start_us)
		start_us = ol_now_us();
	if (n_sources < MAX_SOURCES) {
		sources[n_sources].fn = fn;
		sources[n_sources].arg = arg;
		n_sources++;
		rc = 0;
	}
	pthread_mutex_unlock(&sources_lock);
	return rc;
}

void
ol_metrics_unregister(ol_metrics_fn fn, void *arg)
{
	pthread_mutex_lock(&sources_lock);
	for (unsigned i = 0; i < n_sources; i++) {
		if (sources[i].fn == fn && sources[i].arg == arg) {
			memmove(&sources[i], &sources[i + 1],
				(n_sources - i - 1) * sizeof(sources[0]));
			n_sources--;
			break;
		}
	}
	pthread_mutex_unlock(&sources_lock);
}

static void
render_process(struct ol_strbuf *b)
{
	long rss_kb = 0, threads = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "VmRSS:", 6) == 0)
				rss_kb = strtol(line + 6, NULL, 10);
			else if (strncmp(line, "Threads:", 8) == 0)
				threads = strtol(line + 8, NULL, 10);
		}
		fclose(f);
	}
	long fds = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		while (readdir(d))
			fds++;
		closedir(d);
		fds -= 3; /* ., .., the dir itself */
	}
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_build_info Build version.\n# TYPE openlake_build_info gauge\n"
	    "openlake_build_info{version=\"%s\"} 1\n"
	    "# HELP openlake_uptime_seconds Seconds since the daemon started.\n"
	    "# TYPE openlake_uptime_seconds gauge\nopenlake_uptime_seconds %.3f\n"
	    "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
	    "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n"
	    "# HELP process_threads Threads of the daemon.\n"
	    "# TYPE process_threads gauge\nprocess_threads %ld\n"
	    "# HELP process_open_fds Open file descriptors.\n"
	    "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
	    OL_VERSION, start_us ? (double)(ol_now_us() - start_us) / 1e6 : 0.0, rss_kb * 1024,
	    threads, fds);
}

void
ol_metrics_render(struct ol_strbuf *out)
{
	render_process(out);
	pthread_mutex_lock(&sources_lock);
	for (unsigned i = 0; i < n_sources; i++)
		sources[i].fn(out, sources[i].arg);
	pthread_mutex_unlock(&sources_lock);
}
