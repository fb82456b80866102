/* node_burst - the node plane's credit window under a burst (issue 10): p99 with and without
 * credits, in one run.
 *
 *   build/src/node/node_burst_bench [--senders H] [--frames F] [--frame-kib K]
 *                                   [--window-kib W] [--rounds R]
 *
 * One plane server (one loop, as a node's plane under load) on loopback, in this process.
 * H bursting clients each pipeline F request frames of K KiB (PING with a payload: the
 * server reads, authenticates and grants back every byte, no disk), all at once; a probe
 * client sends an empty PING every 2 ms meanwhile. Two modes, alternating, R rounds each:
 *   credits: the server grants each connection a window of W KiB (a sender never has more
 *            than that sent and not granted back);
 *   none:    the window is the whole burst (H x F frames), so it never holds a sender back
 *            (only TCP's own buffers do).
 * Printed per mode (the median of the rounds' figures): the probe's PING p50 / p99 (what a
 * light peer sees while a burst is on), the bursting calls' p99 from the moment each frame
 * went on the wire to its answer (how long a frame waits at the receiver), the burst's time,
 * and the most bytes one connection held at the receiver. No pass/fail. */
#include "io/io.h"
#include "node/node.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SECRET	    "node-burst-bench-secret"
#define PROBE_EVERY 2000000L /* ns */
#define DEADLINE_MS 120000
#define MAX_SENDERS 64

struct opts {
	unsigned senders, frames, frame_kib, window_kib, rounds;
};

struct lat {
	uint64_t *v;
	size_t n, cap;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
lat_add(struct lat *l, uint64_t v)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v) {
			fprintf(stderr, "node_burst: out of memory\n");
			exit(1);
		}
	}
	l->v[l->n++] = v;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double
pct(struct lat *l, double p)
{
	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
	size_t i = (size_t)(p * (double)(l->n - 1) + 0.5);
	return (double)l->v[i];
}

struct sender {
	const char *addr;
	const struct opts *o;
	pthread_barrier_t *go;
	struct lat calls; /* ns from the frame's send to its answer */
	int rc;
};

/* send the burst, pipelined: when the window is short, collect the oldest answer first */
static void *
sender_main(void *arg)
{
	struct sender *s = arg;
	struct ol_node_client *c = NULL;
	struct ol_node_peer_info pi;
	size_t len = (size_t)s->o->frame_kib << 10;
	uint8_t *payload = calloc(1, len);
	uint64_t *ids = calloc(s->o->frames, sizeof(*ids)), *sent = calloc(s->o->frames, 8);
	unsigned next = 0, done = 0;

	s->rc = payload && ids && sent ? ol_node_client_new(s->addr, SECRET, 2, &c) : -ENOMEM;
	if (!s->rc)
		s->rc = ol_node_hello(c, DEADLINE_MS, &pi);
	pthread_barrier_wait(s->go);
	while (!s->rc && done < s->o->frames) {
		struct iovec iov = {payload, len};
		int rc = next < s->o->frames
			     ? ol_node_send(c, OL_NODE_PING, &iov, 1, DEADLINE_MS, &ids[next])
			     : -EAGAIN;
		if (rc == 0) {
			sent[next++] = now_ns();
			continue;
		}
		if (rc != -EAGAIN) {
			s->rc = rc;
			break;
		}
		const uint8_t *rp;
		size_t rl;
		s->rc = ol_node_recv(c, ids[done], &rp, &rl);
		lat_add(&s->calls, now_ns() - sent[done]);
		done++;
	}
	if (c)
		ol_node_client_free(c);
	free(payload);
	free(ids);
	free(sent);
	return NULL;
}

struct probe {
	const char *addr;
	volatile int *stop;
	struct lat pings;
	int rc;
};

static void *
probe_main(void *arg)
{
	struct probe *p = arg;
	struct ol_node_client *c;
	p->rc = ol_node_client_new(p->addr, SECRET, 3, &c);
	if (p->rc)
		return NULL;
	uint64_t rtt;
	p->rc = ol_node_ping(c, DEADLINE_MS, &rtt); /* connected before the burst */
	while (!p->rc && !*p->stop) {
		uint64_t t0 = now_ns();
		p->rc = ol_node_ping(c, DEADLINE_MS, &rtt);
		lat_add(&p->pings, now_ns() - t0);
		struct timespec ts = {0, PROBE_EVERY};
		nanosleep(&ts, NULL);
	}
	ol_node_client_free(c);
	return NULL;
}

struct figures {
	double probe50, probe99, call99, burst_ms, held;
};

static int
one_round(const struct opts *o, uint32_t window, struct figures *f)
{
	char addr[64];
	int lfd = ol_io_listen("127.0.0.1:0", false, 1);
	if (lfd < 0)
		return lfd;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(lfd));
	close(lfd);
	struct ol_node_server_opts so = {.addr = addr,
					 .secret = SECRET,
					 .self_id = 1,
					 .threads = 1,
					 .window = window,
					 .max_payload = (o->frame_kib << 10) + 64};
	struct ol_node_server *srv;
	int rc = ol_node_server_start(&so, &srv);
	if (rc)
		return rc;
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, o->senders + 1);
	struct sender s[MAX_SENDERS];
	pthread_t th[MAX_SENDERS], pt;
	volatile int stop = 0;
	struct probe p = {.addr = addr, .stop = &stop};
	pthread_create(&pt, NULL, probe_main, &p);
	for (unsigned i = 0; i < o->senders; i++) {
		s[i] = (struct sender){.addr = addr, .o = o, .go = &go};
		pthread_create(&th[i], NULL, sender_main, &s[i]);
	}
	pthread_barrier_wait(&go);
	uint64_t t0 = now_ns();
	struct lat calls = {0};
	for (unsigned i = 0; i < o->senders; i++) {
		pthread_join(th[i], NULL);
		rc = rc ? rc : s[i].rc;
		for (size_t j = 0; j < s[i].calls.n; j++)
			lat_add(&calls, s[i].calls.v[j]);
		free(s[i].calls.v);
	}
	f->burst_ms = (double)(now_ns() - t0) / 1e6;
	stop = 1;
	pthread_join(pt, NULL);
	rc = rc ? rc : p.rc;
	struct ol_node_server_stats st;
	ol_node_server_stats(srv, &st);
	ol_node_server_stop(srv);
	pthread_barrier_destroy(&go);
	f->probe50 = pct(&p.pings, 0.50) / 1e3;
	f->probe99 = pct(&p.pings, 0.99) / 1e3;
	f->call99 = pct(&calls, 0.99) / 1e6;
	f->held = (double)st.max_held / 1024.0;
	free(p.pings.v);
	free(calls.v);
	return rc;
}

static double
median(double *v, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

static unsigned
arg_num(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "node_burst: '%s' is not a number in %u..%u\n", s, lo, hi);
		exit(2);
	}
	return (unsigned)v;
}

int
main(int argc, char **argv)
{
	struct opts o = {
	    .senders = 4, .frames = 256, .frame_kib = 64, .window_kib = 256, .rounds = 3};
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--senders"))
			o.senders = arg_num(argv[i + 1], 1, MAX_SENDERS);
		else if (!strcmp(argv[i], "--frames"))
			o.frames = arg_num(argv[i + 1], 1, 100000);
		else if (!strcmp(argv[i], "--frame-kib"))
			o.frame_kib = arg_num(argv[i + 1], 1, 4096);
		else if (!strcmp(argv[i], "--window-kib"))
			o.window_kib = arg_num(argv[i + 1], 1, 1u << 20);
		else if (!strcmp(argv[i], "--rounds"))
			o.rounds = arg_num(argv[i + 1], 1, 100);
		else {
			fprintf(stderr,
				"usage: %s [--senders H] [--frames F] [--frame-kib K] "
				"[--window-kib W] [--rounds R]\n",
				argv[0]);
			return 2;
		}
	}
	uint64_t frame = ((uint64_t)o.frame_kib << 10) + OL_NODE_HDR + OL_NODE_MAC;
	uint64_t whole = frame * o.frames * o.senders + frame;
	uint32_t wins[2] = {o.window_kib << 10, whole > UINT32_MAX ? UINT32_MAX : (uint32_t)whole};
	if (wins[0] < (o.frame_kib << 10) + 64 + 128)
		wins[0] = (o.frame_kib << 10) + 64 + 128; /* at least one frame */
	const char *name[2] = {"credits", "none"};
	double fig[2][5][100];
	for (unsigned r = 0; r < o.rounds; r++)
		for (int m = 0; m < 2; m++) { /* alternating, so drift in the load hits both */
			struct figures f = {0};
			int rc = one_round(&o, wins[m], &f);
			if (rc) {
				fprintf(stderr, "node_burst: round %u (%s): %s\n", r, name[m],
					strerror(-rc));
				return 1;
			}
			double v[5] = {f.probe50, f.probe99, f.call99, f.burst_ms, f.held};
			for (int k = 0; k < 5; k++)
				fig[m][k][r] = v[k];
		}
	printf("node plane burst: %u senders x %u frames of %u KiB pipelined, probe PING every 2 "
	       "ms; median of %u rounds\n",
	       o.senders, o.frames, o.frame_kib, o.rounds);
	for (int m = 0; m < 2; m++)
		printf(
		    "%-7s window %8u KiB: probe PING p50 %8.0f us  p99 %8.0f us | burst call p99 "
		    "(sent->answered) %8.1f ms | burst %7.0f ms | receiver held at most %8.0f "
		    "KiB\n",
		    name[m], wins[m] >> 10, median(fig[m][0], o.rounds),
		    median(fig[m][1], o.rounds), median(fig[m][2], o.rounds),
		    median(fig[m][3], o.rounds), median(fig[m][4], o.rounds));
	return 0;
}
