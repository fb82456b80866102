/* cmd/openlake/bench_common.h - what the `openlake bench` workloads share: flag parsing helpers,
 * the HDR-style latency histogram, per-connection counters, the run loop (one thread per
 * connection, progress once a second on stderr) and the final report (text or JSON).
 *
 * The workloads live in bench_s3.c and bench_kv.c; bench_cmd.c includes them so that the CLI's
 * meson file, which picks up bench_cmd.c only, builds all of them as one translation unit. */
#ifndef OL_CMD_OPENLAKE_BENCH_COMMON_H
#define OL_CMD_OPENLAKE_BENCH_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- latency histogram: 32 linear sub-buckets per power of two (about 3% resolution) ---- */
#define BH_SUB	   32
#define BH_BUCKETS 1280

struct bhist {
	uint64_t c[BH_BUCKETS];
	uint64_t n, sum, max;
};

void bh_add(struct bhist *h, uint64_t ns);
void bh_merge(struct bhist *dst, const struct bhist *src);
/* The value (ns) below which a fraction q (0..1) of the samples fall; never above max. */
uint64_t bh_quantile(const struct bhist *h, double q);

/* ---- counters of one connection (thread) ---- */
#define BS_CODES 600 /* index = HTTP status (or 0 for transport errors / other statuses) */

struct bstats {
	_Atomic uint64_t ops;	 /* successful operations */
	_Atomic uint64_t bytes;	 /* payload bytes moved by successful operations */
	_Atomic uint64_t errors; /* failed operations (non-2xx, wrong length, socket errors) */
	struct bhist hist;	 /* latency of successful operations */
	struct bhist lag;	 /* paced runs: actual send time - scheduled send time */
	struct bhist svc;	 /* paced runs: latency from the actual send (successes) */
	uint64_t codes[BS_CODES];
};

/* ---- one run: conc threads calling op() until the duration or the op budget ends ---- */
struct brun;
/* One operation on connection i. Returns 0 when it succeeded (counted with *bytes payload
 * bytes), a status code > 0 for an error reply (HTTP status, KV status + 1000...), or -errno for
 * a transport error. */
typedef int (*bench_op_fn)(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes);

struct brun {
	const char *name; /* "s3 get", "kv put"... for the progress lines */
	unsigned conc;
	double duration_s; /* 0: until max_ops */
	uint64_t max_ops;  /* 0: until duration */
	bool quiet;	   /* no progress lines */
	/* > 0: paced (open loop). Total ops/s across threads: operation k of thread i of conc
	 * is due at t0 + (k + i / conc) * conc / rate; one that falls due while the thread's
	 * previous operation runs is sent as soon as that ends, and latency always runs from
	 * the due time, so a stall counts in every operation it delays (no coordinated
	 * omission). 0: closed loop, each thread sends as soon as its previous one ends. */
	double rate;
	bench_op_fn op;
	void *arg; /* the workload's state */
	/* filled by bench_run */
	_Atomic uint64_t next;	  /* next operation sequence number */
	_Atomic int stop;	  /* set when the run must end */
	_Atomic unsigned running; /* threads still running */
	struct bstats *st;	  /* conc entries */
	uint64_t t0;		  /* start (bench_now_ns) */
	double elapsed_s;
};

/* Run r (threads, progress, timing). Returns 0 or -errno (thread creation). */
int bench_run(struct brun *r);

/* Totals of a finished run. */
struct btotal {
	uint64_t ops, bytes, errors;
	struct bhist hist;
	struct bhist lag, svc; /* paced runs (rate > 0) only */
	double rate;
	uint64_t codes[BS_CODES];
	double elapsed_s;
};
void bench_total(const struct brun *r, struct btotal *t);

/* --histogram: the text report adds one line per power of two of latency */
extern bool bench_show_histogram;

/* Names an error code for the report ("http 403", "kv miss"...) into buf. */
typedef void (*bench_code_name_fn)(unsigned code, char *buf, size_t cap);

/* Print the report. json: one JSON object on stdout, whose fields are those of t plus the
 * workload's own "key": value pairs in extra_json (already formatted, may be ""), with error
 * codes keyed by name. Otherwise a readable summary. */
void bench_report(const char *workload, const struct btotal *t, const char *extra_json, bool json,
		  bench_code_name_fn code_name);

/* ---- flag parsing helpers: on error they print "openlake bench WHAT: --flag: why" ---- */
int bflag_size(const char *what, const char *flag, const char *v, uint64_t *out);
int bflag_u64(const char *what, const char *flag, const char *v, uint64_t lo, uint64_t hi,
	      uint64_t *out);
int bflag_duration(const char *what, const char *flag, const char *v, double *out);
/* A rate in operations per second: a number > 0 and <= 1e8 (fractions allowed). */
int bflag_rate(const char *what, const char *flag, const char *v, double *out);

uint64_t bench_now_ns(void);
/* Fill buf with pseudo-random bytes (xorshift; fast, not cryptographic). */
void bench_fill(void *buf, size_t len, uint64_t seed);
/* Append printf-formatted text to buf[0..cap) at *off (truncates safely). */
void bench_appendf(char *buf, size_t cap, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Connect a blocking TCP socket to host:port with TCP_NODELAY and timeouts. fd or -errno. */
int bench_connect(const char *host, const char *port, int timeout_ms);
/* Full-length socket write / read with MSG_NOSIGNAL; 0 or -errno (-ECONNRESET at EOF). */
int bench_write_all(int fd, const void *buf, size_t len);
int bench_read_all(int fd, void *buf, size_t len);
/* Split "host:port" (or "[v6]:port") into host and port. 0 or -EINVAL. */
int bench_split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap);

/* Workloads (bench_s3.c, bench_kv.c). argv[0] is the workload name. Exit codes: 0 ran without
 * errors, 1 ran with errors or could not reach the target, 2 bad usage. */
int bench_s3_main(int argc, char **argv);
int bench_kv_main(int argc, char **argv);
int bench_redis_main(int argc, char **argv);
int bench_memcached_main(int argc, char **argv);
int bench_tcp_main(int argc, char **argv);
int bench_memcpy_main(int argc, char **argv);

#endif
