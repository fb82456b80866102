/* node_commit - what serving COMMIT on the helper threads costs over an op served inline on the
 * loop (src/node/commit.c).
 *
 *   build/src/node/node_commit_bench [--calls N] [--rounds R] [--bytes B]
 *
 * One plane server (one loop, as a node's) on loopback in this process; its COMMIT handler
 * does nothing (status 0, a 16-byte reply), so what is timed is the plane: the request copied
 * out, the hand-over to a helper thread, the answer posted back to the loop (an eventfd
 * wakeup). The reference, in the same run on the same connection: PING with the same B-byte
 * payload (default 512, about a small commit request), served inline on the loop.
 *
 * latency: one client, R rounds alternating N PINGs then N COMMITs, one call at a time;
 *          p50 and p99 of each op over all its rounds, and the COMMIT / PING ratio of each.
 * rate:    8 client threads (one connection each) making N calls each of one op, the ops
 *          alternating per round; calls/s of each, best round, and the ratio.
 * No pass/fail. */
#include "io/io.h"
#include "node/node.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define SECRET	    "node-commit-bench-secret"
#define DEADLINE_MS 60000
#define CLIENTS	    8

static int
handler(void *arg, const uint8_t *req, size_t len, uint8_t *reply, size_t cap, size_t *rlen)
{
	(void)arg;
	(void)req;
	(void)len;
	memset(reply, 0, cap < 16 ? cap : 16);
	*rlen = cap < 16 ? cap : 16;
	return 0;
}

static int
one_call(struct ol_node_client *c, uint8_t op, const uint8_t *pay, size_t n)
{
	const uint8_t *rp;
	size_t rl;
	struct iovec iov = {(void *)pay, n};
	return ol_node_call(c, op, &iov, 1, DEADLINE_MS, &rp, &rl);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double
pct(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return (double)v[(size_t)(p * (double)(n - 1))] / 1000.0;
}

/* R rounds of N PINGs then N COMMITs on one client: each call's ns. */
static int
latency(const char *addr, unsigned n, unsigned rounds, const uint8_t *pay, size_t bytes)
{
	struct ol_node_client *c;
	uint64_t *lat[2];
	size_t got[2] = {0, 0};
	static const uint8_t op[2] = {OL_NODE_PING, OL_NODE_COMMIT};
	int rc = ol_node_client_new(addr, SECRET, 1, &c);
	lat[0] = malloc((size_t)n * rounds * sizeof(uint64_t));
	lat[1] = malloc((size_t)n * rounds * sizeof(uint64_t));
	for (unsigned r = 0; !rc && r < rounds; r++)
		for (int k = 0; k < 2 && !rc; k++)
			for (unsigned i = 0; i < n && !rc; i++) {
				uint64_t t0 = ol_io_now_ns();
				rc = one_call(c, op[k], pay, bytes);
				lat[k][got[k]++] = ol_io_now_ns() - t0;
			}
	if (!rc) {
		double p50[2], p99[2];
		for (int k = 0; k < 2; k++) {
			p50[k] = pct(lat[k], got[k], 0.50);
			p99[k] = pct(lat[k], got[k], 0.99);
		}
		printf("latency  %zu B, %u x %u calls each: COMMIT p50 %.1f us p99 %.1f us  "
		       "reference PING p50 %.1f us p99 %.1f us  ratio p50 %.2f p99 %.2f\n",
		       bytes, rounds, n, p50[1], p99[1], p50[0], p99[0], p50[1] / p50[0],
		       p99[1] / p99[0]);
	}
	ol_node_client_free(c);
	free(lat[0]);
	free(lat[1]);
	return rc;
}

struct worker {
	pthread_t t;
	struct ol_node_client *c;
	uint8_t op;
	unsigned n;
	const uint8_t *pay;
	size_t bytes;
	int rc;
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	for (unsigned i = 0; i < w->n && !w->rc; i++)
		w->rc = one_call(w->c, w->op, w->pay, w->bytes);
	return NULL;
}

/* calls/s of CLIENTS threads making n calls of op each */
static double
rate_once(struct worker *w, uint8_t op, unsigned n)
{
	uint64_t t0 = ol_io_now_ns();
	unsigned started = 0;
	int rc = 0;
	for (; started < CLIENTS; started++) {
		w[started].op = op;
		w[started].n = n;
		w[started].rc = 0;
		if (pthread_create(&w[started].t, NULL, worker_main, &w[started]))
			break;
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(w[i].t, NULL);
		rc |= w[i].rc;
	}
	double s = (double)(ol_io_now_ns() - t0) / 1e9;
	return rc || started < CLIENTS ? -1 : (double)CLIENTS * n / s;
}

static int
rate(const char *addr, unsigned n, unsigned rounds, const uint8_t *pay, size_t bytes)
{
	struct worker w[CLIENTS];
	double best[2] = {0, 0};
	int rc = 0;
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < CLIENTS && !rc; i++) {
		rc = ol_node_client_new(addr, SECRET, 1, &w[i].c);
		w[i].pay = pay;
		w[i].bytes = bytes;
	}
	for (unsigned r = 0; !rc && r < rounds; r++) {
		double p = rate_once(w, OL_NODE_PING, n), c = rate_once(w, OL_NODE_COMMIT, n);
		if (p < 0 || c < 0)
			rc = -EIO;
		best[0] = p > best[0] ? p : best[0];
		best[1] = c > best[1] ? c : best[1];
	}
	if (!rc)
		printf("rate     %zu B, %u clients x %u calls, best of %u: COMMIT %.0f calls/s  "
		       "reference PING %.0f calls/s  ratio %.2f\n",
		       bytes, CLIENTS, n, rounds, best[1], best[0], best[1] / best[0]);
	for (unsigned i = 0; i < CLIENTS; i++)
		ol_node_client_free(w[i].c);
	return rc;
}

static unsigned long
arg_num(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || end == s || !v) {
		fprintf(stderr, "node_commit_bench: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	unsigned n = 5000, rounds = 5;
	size_t bytes = 512;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--calls"))
			n = (unsigned)arg_num(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned)arg_num(argv[i + 1]);
		else if (!strcmp(argv[i], "--bytes"))
			bytes = arg_num(argv[i + 1]);
	}
	if (bytes > (1u << 20))
		bytes = 1u << 20;
	char addr[64];
	unsigned port = 0;
	struct ol_node_server_opts o = {.addr = "127.0.0.1:0",
					.secret = SECRET,
					.self_id = 1,
					.threads = 1,
					.window = 8u << 20,
					.max_payload = 1u << 20,
					.port = &port};
	struct ol_node_server *s;
	int rc = ol_node_server_start(&o, &s);
	if (rc) {
		fprintf(stderr, "node_commit_bench: server: %s\n", strerror(-rc));
		return 1;
	}
	ol_node_server_set_commit(s, handler, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	uint8_t *pay = calloc(1, bytes);
	rc = latency(addr, n, rounds, pay, bytes);
	if (!rc)
		rc = rate(addr, n / 4 ? n / 4 : 1, rounds, pay, bytes);
	if (rc)
		fprintf(stderr, "node_commit_bench: a call failed: %s\n", strerror(-rc));
	free(pay);
	ol_node_server_stop(s);
	return rc ? 1 : 0;
}
