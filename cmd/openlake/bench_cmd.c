/* cmd/openlake/bench_cmd.c - `openlake bench`: load generators for the S3 endpoint and the KV
 * pool, plus the drivers of the references they are compared with (redis, memcached, a plain
 * TCP stream, memcpy). This file holds the dispatcher and what the workloads share (see
 * bench_common.h); the workloads are in bench_s3.c and bench_kv.c, included at the end. */
#include "admin_client.h"
#include "bench_common.h"
#include "cmds.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

/* ---- histogram ---- */

static unsigned
bh_index(uint64_t v)
{
	if (v < 2 * BH_SUB)
		return (unsigned)v;
	unsigned msb = 63 - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - 5; /* v >> shift lies in [32, 64) */
	unsigned i = 2 * BH_SUB + (shift - 1) * BH_SUB + (unsigned)((v >> shift) - BH_SUB);
	return i < BH_BUCKETS ? i : BH_BUCKETS - 1;
}

/* Upper edge of bucket i (so quantiles never understate a latency). */
static uint64_t
bh_upper(unsigned i)
{
	if (i < 2 * BH_SUB)
		return i;
	unsigned shift = (i - 2 * BH_SUB) / BH_SUB + 1;
	uint64_t top = (i - 2 * BH_SUB) % BH_SUB + BH_SUB;
	return ((top + 1) << shift) - 1;
}

void
bh_add(struct bhist *h, uint64_t ns)
{
	h->c[bh_index(ns)]++;
	h->n++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

void
bh_merge(struct bhist *dst, const struct bhist *src)
{
	for (unsigned i = 0; i < BH_BUCKETS; i++)
		dst->c[i] += src->c[i];
	dst->n += src->n;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t
bh_quantile(const struct bhist *h, double q)
{
	if (h->n == 0)
		return 0;
	uint64_t want = (uint64_t)ceil(q * (double)h->n), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < BH_BUCKETS; i++) {
		seen += h->c[i];
		if (seen >= want)
			return bh_upper(i) < h->max ? bh_upper(i) : h->max;
	}
	return h->max;
}

/* ---- small helpers ---- */

uint64_t
bench_now_ns(void)
{
	return ol_clock_ns();
}

void
bench_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x1234567ull;
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(p + i, &x, n);
	}
}

void
bench_appendf(char *buf, size_t cap, size_t *off, const char *fmt, ...)
{
	if (*off >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *off, cap - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off = *off + (size_t)n < cap ? *off + (size_t)n : cap - 1;
}

int
bflag_size(const char *what, const char *flag, const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	uint64_t mul = 1;
	if (end == v || errno || x < 0)
		goto bad;
	while (*end == ' ')
		end++;
	static const struct {
		const char *s;
		uint64_t m;
	} units[] = {{"", 1},		{"B", 1},	 {"k", 1000},	     {"K", 1024},
		     {"KB", 1000},	{"KiB", 1024},	 {"M", 1u << 20},    {"MB", 1000000},
		     {"MiB", 1u << 20}, {"G", 1u << 30}, {"GB", 1000000000}, {"GiB", 1u << 30}};
	size_t i;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].s) == 0)
			break;
	if (i == sizeof(units) / sizeof(units[0]))
		goto bad;
	mul = units[i].m;
	if (x * (double)mul > 1e15)
		goto bad;
	*out = (uint64_t)(x * (double)mul);
	return 0;
bad:
	fprintf(stderr,
		"openlake bench %s: %s: '%s' is not a size (write e.g. 4096, 4KiB, 1MiB, 64MiB)\n",
		what, flag, v);
	return -EINVAL;
}

int
bflag_u64(const char *what, const char *flag, const char *v, uint64_t lo, uint64_t hi,
	  uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (end == v || *end || errno || v[0] == '-' || x < lo || x > hi) {
		fprintf(stderr, "openlake bench %s: %s: '%s' is not a whole number in %llu..%llu\n",
			what, flag, v, (unsigned long long)lo, (unsigned long long)hi);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int
bflag_duration(const char *what, const char *flag, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	double mul = 1;
	if (end == v || errno || x < 0)
		goto bad;
	if (strcmp(end, "ms") == 0)
		mul = 0.001;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mul = 60;
	else if (*end && strcmp(end, "s") != 0)
		goto bad;
	*out = x * mul;
	if (*out > 86400)
		goto bad;
	return 0;
bad:
	fprintf(stderr,
		"openlake bench %s: %s: '%s' is not a duration (write e.g. 10, 10s, 500ms, 2m)\n",
		what, flag, v);
	return -EINVAL;
}

int
bflag_rate(const char *what, const char *flag, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (end == v || *end || errno || !(x > 0) || x > 1e8) {
		fprintf(stderr,
			"openlake bench %s: %s: '%s' is not a rate in operations per second "
			"(a number above 0, at most 1e8, e.g. 5000)\n",
			what, flag, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

/* ---- sockets ---- */

int
bench_split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon;
	size_t hl;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		hl = (size_t)(rb - s - 1);
		s++;
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	size_t pl = strlen(colon + 1);
	if (hl == 0 || hl >= hcap || pl == 0 || pl >= pcap || strspn(colon + 1, "0123456789") != pl)
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = 0;
	memcpy(port, colon + 1, pl + 1);
	return 0;
}

/* The CLI's one connect helper (admin_client.c), then the bench's socket options: 60 s I/O
 * timeouts, TCP_NODELAY. */
int
bench_connect(const char *host, const char *port, int timeout_ms)
{
	int fd = ol_cli_tcp_connect(host, port, timeout_ms);
	if (fd < 0)
		return fd;
	struct timeval io = {.tv_sec = 60};
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof(io)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof(io)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

int
bench_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
bench_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- the run loop ---- */

struct bthread {
	struct brun *r;
	unsigned i;
};

static void
record(struct bstats *s, int rc, uint64_t bytes, uint64_t ns)
{
	if (rc == 0) {
		bh_add(&s->hist, ns);
		atomic_fetch_add_explicit(&s->ops, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
	s->codes[rc > 0 && rc < BS_CODES ? rc : 0]++;
}

/* Sleep until the monotonic time at (ns), in slices short enough to notice the end of the
 * run. false when the run ended first. */
static bool
sleep_until(struct brun *r, uint64_t at)
{
	for (;;) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return false;
		uint64_t now = bench_now_ns();
		if (now >= at)
			return true;
		uint64_t until = at - now > 20000000 ? now + 20000000 : at;
		struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
				      .tv_nsec = (long)(until % 1000000000u)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
}

/* Open loop (r->rate > 0): operation k of thread i is due at t0 + (k + i / conc) * period,
 * period = conc / rate; one that is due is sent at once, however late, and its latency runs
 * from when it was due. How late it was sent (behind the thread's previous operation, or the
 * thread's own wake-up) goes to s->lag; it is in the latency too. */
static void
paced_loop(struct brun *r, unsigned i, struct bstats *s)
{
	double period_ns = (double)r->conc / r->rate * 1e9;
	/* the default 50 us timer slack would be added to every wake-up, so to every latency */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	for (uint64_t k = 0;; k++) {
		uint64_t due = r->t0 + (uint64_t)(((double)k + (double)i / r->conc) * period_ns);
		if (!sleep_until(r, due))
			break;
		uint64_t seq = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
		if (r->max_ops && seq >= r->max_ops)
			break;
		uint64_t bytes = 0, sent = bench_now_ns();
		bh_add(&s->lag, sent - due);
		int rc = r->op(r, i, seq, &bytes);
		uint64_t done = bench_now_ns();
		if (rc == 0)
			bh_add(&s->svc, done - sent);
		record(s, rc, bytes, done - due);
	}
}

static void *
bench_thread(void *arg)
{
	struct bthread *t = arg;
	struct brun *r = t->r;
	struct bstats *s = &r->st[t->i];
	if (r->rate > 0) {
		paced_loop(r, t->i, s);
		atomic_fetch_sub(&r->running, 1);
		return NULL;
	}
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		uint64_t seq = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
		if (r->max_ops && seq >= r->max_ops)
			break;
		uint64_t bytes = 0, t0 = bench_now_ns();
		int rc = r->op(r, t->i, seq, &bytes);
		record(s, rc, bytes, bench_now_ns() - t0);
	}
	atomic_fetch_sub(&r->running, 1);
	return NULL;
}

static void
progress(const struct brun *r, double t, uint64_t *last_ops, uint64_t *last_bytes, double *last_t)
{
	uint64_t ops = 0, bytes = 0, errors = 0;
	for (unsigned i = 0; i < r->conc; i++) {
		ops += atomic_load_explicit(&r->st[i].ops, memory_order_relaxed);
		bytes += atomic_load_explicit(&r->st[i].bytes, memory_order_relaxed);
		errors += atomic_load_explicit(&r->st[i].errors, memory_order_relaxed);
	}
	double dt = t - *last_t;
	if (!r->quiet && dt > 0)
		fprintf(stderr, "[%5.1fs] %-10s %10.0f ops/s %10.1f MB/s  errors %llu\n", t,
			r->name, (double)(ops - *last_ops) / dt,
			(double)(bytes - *last_bytes) / dt / 1e6, (unsigned long long)errors);
	*last_ops = ops;
	*last_bytes = bytes;
	*last_t = t;
}

/* Ctrl-C ends the current run early; its report is still printed */
static volatile sig_atomic_t bench_interrupted;

static void
on_sigint(int sig)
{
	if (bench_interrupted)
		_exit(130);
	bench_interrupted = 1;
}

static void
wait_run(struct brun *r, uint64_t t0)
{
	uint64_t last_ops = 0, last_bytes = 0;
	double last_t = 0, next_report = 1.0;
	for (;;) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
		double t = (double)(bench_now_ns() - t0) / 1e9;
		if (atomic_load(&r->running) == 0)
			break;
		if ((r->duration_s > 0 && t >= r->duration_s) || bench_interrupted)
			atomic_store(&r->stop, 1);
		if (t >= next_report) {
			progress(r, t, &last_ops, &last_bytes, &last_t);
			next_report += 1.0;
		}
	}
}

int
bench_run(struct brun *r)
{
	int rc = 0;
	pthread_t *th = calloc(r->conc, sizeof(*th));
	struct bthread *bt = calloc(r->conc, sizeof(*bt));
	r->st = calloc(r->conc, sizeof(*r->st));
	if (!th || !bt || !r->st) {
		rc = -ENOMEM;
		goto out;
	}
	atomic_store(&r->next, 0);
	atomic_store(&r->stop, 0);
	atomic_store(&r->running, r->conc);
	struct sigaction sa = {.sa_handler = on_sigint};
	sigaction(SIGINT, &sa, NULL);
	uint64_t t0 = bench_now_ns();
	r->t0 = t0;
	unsigned started = 0;
	for (; started < r->conc; started++) {
		bt[started] = (struct bthread){r, started};
		rc = -pthread_create(&th[started], NULL, bench_thread, &bt[started]);
		if (rc)
			break;
	}
	if (rc) {
		atomic_store(&r->stop, 1);
		atomic_fetch_sub(&r->running, r->conc - started);
	}
	wait_run(r, t0);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	r->elapsed_s = (double)(bench_now_ns() - t0) / 1e9;
out:
	free(th);
	free(bt);
	return rc;
}

void
bench_total(const struct brun *r, struct btotal *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < r->conc; i++) {
		t->ops += atomic_load(&r->st[i].ops);
		t->bytes += atomic_load(&r->st[i].bytes);
		t->errors += atomic_load(&r->st[i].errors);
		bh_merge(&t->hist, &r->st[i].hist);
		bh_merge(&t->lag, &r->st[i].lag);
		bh_merge(&t->svc, &r->st[i].svc);
		for (unsigned c = 0; c < BS_CODES; c++)
			t->codes[c] += r->st[i].codes[c];
	}
	t->elapsed_s = r->elapsed_s;
	t->rate = r->rate;
}

/* ---- report ---- */

bool bench_show_histogram;

static const double quants[] = {0.5, 0.9, 0.99, 0.999};
static const char *const qnames[] = {"p50", "p90", "p99", "p99_9"};

static void
codes_text(const struct btotal *t, bench_code_name_fn code_name, char *buf, size_t cap, bool json)
{
	size_t off = 0;
	buf[0] = 0;
	for (unsigned c = 0; c < BS_CODES; c++) {
		char name[64];
		if (!t->codes[c])
			continue;
		if (c == 0)
			snprintf(name, sizeof(name), "transport");
		else
			code_name(c, name, sizeof(name));
		if (json)
			bench_appendf(buf, cap, &off, "%s\"%s\":%llu", off ? "," : "", name,
				      (unsigned long long)t->codes[c]);
		else
			bench_appendf(buf, cap, &off, " %s:%llu", name,
				      (unsigned long long)t->codes[c]);
	}
}

static void
json_quantiles(const char *name, const struct bhist *h)
{
	printf(",\"%s\":{\"mean\":%.1f", name, h->n ? (double)h->sum / (double)h->n / 1e3 : 0.0);
	for (unsigned i = 0; i < 4; i++)
		printf(",\"%s\":%.1f", qnames[i], (double)bh_quantile(h, quants[i]) / 1e3);
	printf(",\"max\":%.1f}", (double)h->max / 1e3);
}

static void
report_json(const char *workload, const struct btotal *t, const char *extra, const char *codes)
{
	double el = t->elapsed_s > 0 ? t->elapsed_s : 1e-9;
	const struct bhist *h = &t->hist;
	printf("{\"workload\":\"%s\",%s%s\"ops\":%llu,\"errors\":%llu,\"bytes\":%llu,"
	       "\"elapsed_s\":%.3f,\"ops_per_s\":%.1f,\"mb_per_s\":%.3f,\"gb_per_s\":%.4f,"
	       "\"latency_us\":{\"mean\":%.1f",
	       workload, extra, *extra ? "," : "", (unsigned long long)t->ops,
	       (unsigned long long)t->errors, (unsigned long long)t->bytes, t->elapsed_s,
	       (double)t->ops / el, (double)t->bytes / el / 1e6, (double)t->bytes / el / 1e9,
	       h->n ? (double)h->sum / (double)h->n / 1e3 : 0.0);
	for (unsigned i = 0; i < 4; i++)
		printf(",\"%s\":%.1f", qnames[i], (double)bh_quantile(h, quants[i]) / 1e3);
	printf(",\"max\":%.1f}", (double)h->max / 1e3);
	if (t->rate > 0) {
		/* paced: the target rate, how late operations were sent, and their latency from
		 * the actual send (what a closed loop would have reported) */
		printf(",\"rate\":%.1f", t->rate);
		json_quantiles("send_lag_us", &t->lag);
		json_quantiles("service_us", &t->svc);
	}
	printf(",\"error_codes\":{%s},\"histogram_us\":[", codes);
	/* the non-empty buckets as [upper edge in us, count] */
	for (unsigned i = 0, first = 1; i < BH_BUCKETS; i++) {
		if (!h->c[i])
			continue;
		printf("%s[%.3f,%llu]", first ? "" : ",", (double)bh_upper(i) / 1e3,
		       (unsigned long long)h->c[i]);
		first = 0;
	}
	printf("]}\n");
}

/* One line per power of two of latency: range, count, share and a bar. */
static void
print_histogram(const struct bhist *h)
{
	uint64_t per[64] = {0}, top = 1;
	for (unsigned i = 0; i < BH_BUCKETS; i++) {
		uint64_t up = bh_upper(i);
		per[up ? 63 - __builtin_clzll(up) : 0] += h->c[i];
	}
	for (unsigned k = 0; k < 64; k++)
		top = per[k] > top ? per[k] : top;
	for (unsigned k = 0; k < 64; k++) {
		if (!per[k])
			continue;
		char bar[41];
		unsigned n = (unsigned)(per[k] * 40 / top);
		memset(bar, '#', n);
		bar[n] = 0;
		printf("  %10.1f - %10.1f us %10llu %5.1f%% %s\n", (double)(1ull << k) / 1e3,
		       (double)(2ull << k) / 1e3, (unsigned long long)per[k],
		       100.0 * (double)per[k] / (double)h->n, bar);
	}
}

void
bench_report(const char *workload, const struct btotal *t, const char *extra_json, bool json,
	     bench_code_name_fn code_name)
{
	char codes[2048];
	codes_text(t, code_name, codes, sizeof(codes), json);
	if (json) {
		report_json(workload, t, extra_json, codes);
		fflush(stdout);
		return;
	}
	double el = t->elapsed_s > 0 ? t->elapsed_s : 1e-9;
	const struct bhist *h = &t->hist;
	printf("%s: %llu ops in %.2f s: %.1f ops/s, %.2f MB/s (%.3f GB/s), errors %llu%s%s%s\n",
	       workload, (unsigned long long)t->ops, t->elapsed_s, (double)t->ops / el,
	       (double)t->bytes / el / 1e6, (double)t->bytes / el / 1e9,
	       (unsigned long long)t->errors, *codes ? " (" : "", *codes ? codes + 1 : "",
	       *codes ? ")" : "");
	printf("latency us: mean %.1f", h->n ? (double)h->sum / (double)h->n / 1e3 : 0.0);
	for (unsigned i = 0; i < 4; i++)
		printf("  %s %.1f", qnames[i], (double)bh_quantile(h, quants[i]) / 1e3);
	printf("  max %.1f\n", (double)h->max / 1e3);
	if (t->rate > 0) {
		printf("paced at %.1f ops/s (open loop: latency from each operation's scheduled "
		       "send)\n",
		       t->rate);
		printf("send lag us: p50 %.1f  p99 %.1f  max %.1f; from the actual send: p50 %.1f  "
		       "p99 %.1f  max %.1f\n",
		       (double)bh_quantile(&t->lag, 0.5) / 1e3,
		       (double)bh_quantile(&t->lag, 0.99) / 1e3, (double)t->lag.max / 1e3,
		       (double)bh_quantile(&t->svc, 0.5) / 1e3,
		       (double)bh_quantile(&t->svc, 0.99) / 1e3, (double)t->svc.max / 1e3);
	}
	if (bench_show_histogram)
		print_histogram(h);
	fflush(stdout);
}

/* ---- dispatcher ---- */

static void
bench_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake bench WORKLOAD [FLAGS]\n"
	    "\n"
	    "Workloads:\n"
	    "  s3         S3 PUT/GET/mixed load with SigV4-signed requests over keep-alive\n"
	    "             HTTP/1.1 connections\n"
	    "  kv         KV pool put/get through libopenlake (tcp or local shared memory)\n"
	    "  redis      the same load against redis-server (SET/GET, RESP) - a reference\n"
	    "  memcached  the same load against memcached (set/get, text protocol) - a reference\n"
	    "  tcp        request/response blocks over a plain loopback socket - a reference\n"
	    "  memcpy     block copies in memory - the reference of the local path\n"
	    "\n"
	    "Each prints progress once a second on stderr and, at the end, ops/s, MB/s, errors\n"
	    "and latency percentiles (p50/p90/p99/p99.9/max), or one JSON object with --json.\n"
	    "kv, redis, memcached, tcp and memcpy take --rate OPS: a paced (open-loop) run whose\n"
	    "latency counts from each operation's scheduled send (no coordinated omission).\n"
	    "Exit status: 0 no errors, 1 errors (or target unreachable), 2 bad usage.\n"
	    "'openlake bench WORKLOAD --help' lists the flags of each.\n");
}

int
ol_cmd_bench(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} w[] = {{"s3", bench_s3_main},	      {"kv", bench_kv_main},
		 {"redis", bench_redis_main}, {"memcached", bench_memcached_main},
		 {"tcp", bench_tcp_main},     {"memcpy", bench_memcpy_main}};
	if (argc < 2) {
		bench_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		bench_usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (strcmp(argv[1], w[i].name) == 0)
			return w[i].fn(argc - 1, argv + 1);
	fprintf(stderr,
		"openlake bench: unknown workload '%s' (one of: s3, kv, redis, memcached, tcp, "
		"memcpy; see openlake bench --help)\n",
		argv[1]);
	return 2;
}

/* The workloads: one translation unit with this file (see the header comment). */
#include "bench_s3.c"
#include "bench_kv.c"
