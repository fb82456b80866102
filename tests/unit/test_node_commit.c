/* test_node_commit.c - the node plane's COMMIT op (node.h, ol_node_server_set_commit;
 * src/node/commit.c) on real servers over loopback with the real client (TAP): no handler,
 * an echo with status 0 and with an error, a request of the whole frame, a handler that
 * blocks while the server's loop answers other calls (PING, META_GET, another COMMIT, the
 * handler's own PING to this server), 20 concurrent calls on the 8 commit threads, a client
 * gone while its handler runs, a queued call past its deadline (never run), and a stop while
 * handlers run and one waits in the queue.
 *
 * The handler's request says what it does, by its first byte:
 *   E  answer the request reversed, status 0     N  the same, status -ENOENT
 *   T  the same, status -ETIMEDOUT
 *   S  answer its length and a hash of it        P  PING this same server, answer its result
 *   B  block until the test releases it          W  block until 8 handlers run at once
 *   D  answer ol_node_commit_left_ms() */
#include "io/io.h"
#include "node/node.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SECRET	 "node-commit-test-secret"
#define DL	 60000 /* a call's deadline, ms: generous for a loaded machine */
#define WAIT_S	 60    /* the most a wait on a condition of the test takes */
#define MAXP	 (256u << 10)
#define NCALLERS 20

struct hctx {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool release;	  /* B handlers return */
	bool wide;	  /* W handlers return: 8 ran at once */
	unsigned blocked; /* B handlers waiting now */
	unsigned running; /* handlers inside now */
	unsigned max_running, calls, returned;
	char addr[64];	     /* the server, for P */
	atomic_bool stopped; /* set once ol_node_server_stop returned */
	unsigned after_stop; /* handler calls that began or ended after that */
};

static void
hctx_init(struct hctx *h, const char *addr)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	snprintf(h->addr, sizeof(h->addr), "%s", addr);
}

static void
hctx_fini(struct hctx *h)
{
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
}

static struct timespec
until(int s)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += s;
	return ts;
}

/* Under h->mu: wait until *flag, at most WAIT_S. 0 or -ETIMEDOUT. */
static int
wait_flag(struct hctx *h, const bool *flag)
{
	struct timespec end = until(WAIT_S);
	while (!*flag)
		if (pthread_cond_timedwait(&h->cv, &h->mu, &end) == ETIMEDOUT)
			return -ETIMEDOUT;
	return 0;
}

static int
self_ping(const char *addr)
{
	struct ol_node_client *c;
	int rc = ol_node_client_new(addr, SECRET, 5, &c);
	if (!rc)
		rc = ol_node_ping(c, DL, NULL);
	ol_node_client_free(c);
	return rc;
}

static uint64_t
fnv(const uint8_t *p, size_t n)
{
	uint64_t x = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		x = (x ^ p[i]) * 0x100000001b3ull;
	return x;
}

static int
handler(void *arg, const uint8_t *req, size_t len, uint8_t *reply, size_t cap, size_t *rlen)
{
	struct hctx *h = arg;
	int rc = 0;
	char op = len ? (char)req[0] : 0;
	pthread_mutex_lock(&h->mu);
	h->calls++;
	h->after_stop += atomic_load(&h->stopped);
	if (++h->running > h->max_running)
		h->max_running = h->running;
	if (op == 'B') {
		h->blocked++;
		pthread_cond_broadcast(&h->cv);
		rc = wait_flag(h, &h->release);
		h->blocked--;
	} else if (op == 'W') {
		if (h->running >= OL_NODE_COMMIT_THREADS)
			h->wide = true;
		pthread_cond_broadcast(&h->cv);
		rc = wait_flag(h, &h->wide);
	}
	pthread_mutex_unlock(&h->mu);
	if (op == 'P')
		rc = self_ping(h->addr);
	if (op == 'N')
		rc = -ENOENT;
	if (op == 'T') /* a status the client also has for its own failures */
		rc = -ETIMEDOUT;
	if (op == 'D') { /* the time left to the caller's deadline, as the handler sees it */
		int64_t left = ol_node_commit_left_ms();
		memcpy(reply, &left, sizeof(left));
		*rlen = sizeof(left);
	} else if (op == 'S') {
		uint64_t v[2] = {len, fnv(req, len)};
		memcpy(reply, v, sizeof(v));
		*rlen = sizeof(v);
	} else if (len <= cap) {
		for (size_t i = 0; i < len; i++)
			reply[i] = req[len - 1 - i];
		*rlen = len;
	} else {
		rc = -EMSGSIZE;
	}
	pthread_mutex_lock(&h->mu);
	h->running--;
	h->returned++;
	h->after_stop += atomic_load(&h->stopped);
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/* Wait until *count (under h->mu) reaches n. */
static bool
wait_count(struct hctx *h, const unsigned *count, unsigned n)
{
	struct timespec end = until(WAIT_S);
	bool got = true;
	pthread_mutex_lock(&h->mu);
	while (*count < n && got)
		got = pthread_cond_timedwait(&h->cv, &h->mu, &end) != ETIMEDOUT;
	got = *count >= n;
	pthread_mutex_unlock(&h->mu);
	return got;
}

static void
release(struct hctx *h)
{
	pthread_mutex_lock(&h->mu);
	h->release = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

/* One COMMIT on c: the status, the reply copied to rep[*rlen] (cap 256). */
static int
commit(struct ol_node_client *c, const void *req, size_t len, uint8_t *rep, size_t *rlen)
{
	const uint8_t *rp = NULL;
	size_t rl = 0;
	struct iovec iov = {(void *)req, len};
	int rc = ol_node_call(c, OL_NODE_COMMIT, &iov, 1, DL, &rp, &rl);
	*rlen = 0;
	if (rp && rl <= 256) {
		memcpy(rep, rp, rl);
		*rlen = rl;
	}
	return rc;
}

static bool
is_reversed(const char *req, const uint8_t *rep, size_t rlen)
{
	size_t n = strlen(req);
	if (rlen != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (rep[i] != (uint8_t)req[n - 1 - i])
			return false;
	return true;
}

/* A caller thread: its own client (or the one given), one COMMIT. */
struct caller {
	pthread_t t;
	const char *addr;
	struct ol_node_client *c; /* freed by the thread when done */
	char req[32];
	int rc;
	uint8_t rep[256];
	size_t rlen;
	atomic_bool done;
};

static void *
caller_main(void *arg)
{
	struct caller *k = arg;
	k->rc = k->c ? 0 : ol_node_client_new(k->addr, SECRET, 5, &k->c);
	if (!k->rc)
		k->rc = commit(k->c, k->req, strlen(k->req), k->rep, &k->rlen);
	ol_node_client_free(k->c);
	atomic_store(&k->done, true);
	return NULL;
}

static int
caller_start(struct caller *k, const char *addr, const char *req)
{
	memset(k, 0, sizeof(*k));
	k->addr = addr;
	snprintf(k->req, sizeof(k->req), "%s", req);
	return pthread_create(&k->t, NULL, caller_main, k);
}

static unsigned
free_port(void)
{
	int fd = ol_io_listen("127.0.0.1:0", false, 1);
	unsigned p = ol_io_sock_port(fd);
	close(fd);
	return p;
}

/* One loop (so "the loop is not blocked" means the loop of every connection), one drive. */
static struct ol_node_server *
server(const char *drive, char *addr, size_t cap)
{
	const char *drives[] = {drive};
	snprintf(addr, cap, "127.0.0.1:%u", free_port());
	struct ol_node_server_opts o = {.addr = addr,
					.secret = SECRET,
					.self_id = 2,
					.threads = 1,
					.window = 1u << 20,
					.max_payload = MAXP,
					.n_drives = 1,
					.drives = drives};
	struct ol_node_server *s = NULL;
	int rc = ol_node_server_start(&o, &s);
	ok(rc == 0, "server on %s (%d)", addr, rc);
	return rc ? NULL : s;
}

static void
test_no_handler(struct ol_node_client *c)
{
	uint8_t rep[256];
	size_t rlen;
	struct ol_node_client_stats cs;
	int rc = commit(c, "Ehello", 6, rep, &rlen);
	ok(rc == -EOPNOTSUPP, "no handler set: -EOPNOTSUPP (%d)", rc);
	ol_node_client_stats(c, &cs);
	ok(ol_node_ping(c, DL, NULL) == 0 && cs.connects == 1,
	   "the connection goes on serving (%llu connects)", (unsigned long long)cs.connects);
}

static void
test_echo(struct ol_node_client *c)
{
	uint8_t rep[256];
	size_t rlen;
	int rc = commit(c, "Ehello, leader", 14, rep, &rlen);
	ok(rc == 0 && is_reversed("Ehello, leader", rep, rlen),
	   "the handler's status 0 and its reply, the request reversed (%d, %zu bytes)", rc, rlen);
	rc = commit(c, "Nmissing", 8, rep, &rlen);
	ok(rc == -ENOENT && is_reversed("Nmissing", rep, rlen),
	   "its status -ENOENT reaches the caller, with its reply (%d, %zu bytes)", rc, rlen);
	rc = commit(c, "Tlate", 5, rep, &rlen);
	struct ol_node_client_stats cs;
	ol_node_client_stats(c, &cs);
	ok(rc == -ETIMEDOUT && is_reversed("Tlate", rep, rlen) && cs.connects == 1,
	   "the peer's -ETIMEDOUT arrives with its reply (told from a local one by it), the "
	   "connection kept (%d, %zu bytes, %llu connects)",
	   rc, rlen, (unsigned long long)cs.connects);
	ok(ol_node_ping(c, DL, NULL) == 0, "and the connection goes on");

	const uint8_t *rp;
	size_t rl = 0;
	int64_t left = -2;
	rc = ol_node_call(c, OL_NODE_COMMIT, &(struct iovec){"D", 1}, 1, 5000, &rp, &rl);
	if (!rc && rl == sizeof(left))
		memcpy(&left, rp, sizeof(left));
	ok(rc == 0 && left > 0 && left <= 5000 && ol_node_commit_left_ms() == -1,
	   "the handler sees its caller's deadline: %lld of 5000 ms left (-1 off its thread)",
	   (long long)left);

	/* the largest request: one frame of the server's max_payload */
	uint8_t *big = malloc(MAXP + 1);
	tap_fill(big, MAXP + 1, 16);
	big[0] = 'S';
	rc = commit(c, big, MAXP, rep, &rlen);
	uint64_t v[2] = {0, 0};
	if (rlen == sizeof(v))
		memcpy(v, rep, sizeof(v));
	ok(rc == 0 && v[0] == MAXP && v[1] == fnv(big, MAXP),
	   "a request of max_payload bytes reaches the handler whole (%d)", rc);
	rc = commit(c, big, MAXP + 1, rep, &rlen);
	ok(rc == -EMSGSIZE && rlen == 0 && ol_node_ping(c, DL, NULL) == 0,
	   "one byte more is refused by the client before sending, no reply (%d)", rc);
	free(big);

	/* two on the wire at once: answered in order, each its own reply */
	uint64_t id1, id2;
	const uint8_t *r1, *r2;
	size_t l1 = 0, l2 = 0;
	struct iovec a = {"Efirst", 6}, b = {"Esecond!", 8};
	int rc1 = ol_node_send(c, OL_NODE_COMMIT, &a, 1, DL, &id1);
	int rc2 = rc1 ? rc1 : ol_node_send(c, OL_NODE_COMMIT, &b, 1, DL, &id2);
	int rc3 = rc2 ? rc2 : ol_node_recv(c, id1, &r1, &l1);
	bool first = !rc3 && is_reversed("Efirst", r1, l1);
	int rc4 = rc3 ? rc3 : ol_node_recv(c, id2, &r2, &l2);
	ok(first && !rc4 && is_reversed("Esecond!", r2, l2),
	   "two COMMITs pipelined on one connection: answered in order (%d %d %d %d)", rc1, rc2,
	   rc3, rc4);
}

/* A META_GET of a key no drive has: -ENOENT, served on the loop. */
static int
meta_get(struct ol_node_client *c)
{
	uint8_t p[32];
	struct ol_node_wr w = {p, 0, sizeof(p), false};
	ol_node_put16(&w, 0);
	ol_node_putbytes(&w, (uint8_t[]){1}, 1); /* db 1: objects */
	ol_node_put16(&w, 5);
	ol_node_putbytes(&w, "nokey", 5);
	const uint8_t *rp;
	size_t rl;
	return ol_node_call(c, OL_NODE_META_GET, &(struct iovec){p, w.n}, 1, DL, &rp, &rl);
}

static void
test_blocking(const char *addr, struct hctx *h, struct ol_node_client *c)
{
	struct caller k;
	uint8_t rep[256];
	size_t rlen;
	ok(caller_start(&k, addr, "Bblocked") == 0 && wait_count(h, &h->blocked, 1),
	   "a COMMIT whose handler blocks");
	ok(ol_node_ping(c, DL, NULL) == 0, "meanwhile a PING on another connection is answered");
	int rc = meta_get(c);
	ok(rc == -ENOENT, "a META_GET is answered (%d)", rc);
	rc = commit(c, "Esecond", 7, rep, &rlen);
	ok(rc == 0 && is_reversed("Esecond", rep, rlen), "a second COMMIT is answered (%d)", rc);
	rc = commit(c, "Pself", 5, rep, &rlen);
	ok(rc == 0 && is_reversed("Pself", rep, rlen),
	   "a handler that PINGs this same server (same loop) is answered (%d)", rc);
	ok(!atomic_load(&k.done), "and the blocked call is still waiting");
	release(h);
	pthread_join(k.t, NULL);
	ok(k.rc == 0 && is_reversed("Bblocked", k.rep, k.rlen),
	   "released: its answer arrives (%d, %zu bytes)", k.rc, k.rlen);
	pthread_mutex_lock(&h->mu);
	h->release = false;
	pthread_mutex_unlock(&h->mu);
}

static void
test_twenty(const char *addr, struct hctx *h)
{
	static struct caller k[NCALLERS];
	unsigned started = 0, good = 0;
	pthread_mutex_lock(&h->mu);
	h->max_running = 0;
	pthread_mutex_unlock(&h->mu);
	for (unsigned i = 0; i < NCALLERS; i++) {
		char req[32];
		snprintf(req, sizeof(req), "Wcaller %u of %u", i, NCALLERS);
		started += caller_start(&k[i], addr, req) == 0;
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(k[i].t, NULL);
		good += k[i].rc == 0 && is_reversed(k[i].req, k[i].rep, k[i].rlen);
	}
	ok(started == NCALLERS && good == NCALLERS,
	   "%u concurrent COMMITs from %u threads: all answered with their own reply (%u)",
	   NCALLERS, NCALLERS, good);
	pthread_mutex_lock(&h->mu);
	unsigned most = h->max_running;
	pthread_mutex_unlock(&h->mu);
	ok(most == OL_NODE_COMMIT_THREADS,
	   "at most %u handlers ran at once, and that many did (%u)", OL_NODE_COMMIT_THREADS, most);
}

/* PING, COMMIT, blocking, 20 at once, on one server; its stats. */
static void
test_served(const char *drive)
{
	char addr[64];
	struct hctx h;
	struct ol_node_client *c;
	struct ol_node_server *s = server(drive, addr, sizeof(addr));
	if (!s)
		return;
	hctx_init(&h, addr);
	ok(ol_node_client_new(addr, SECRET, 5, &c) == 0, "client");
	test_no_handler(c);
	ol_node_server_set_commit(s, handler, &h);
	test_echo(c);
	test_blocking(addr, &h, c);
	test_twenty(addr, &h);
	struct ol_node_server_stats st;
	ol_node_server_stats(s, &st);
	pthread_mutex_lock(&h.mu);
	unsigned calls = h.calls;
	pthread_mutex_unlock(&h.mu);
	ok(st.commits == calls && st.commits_queued == 0 && st.commits_running == 0,
	   "stats: %llu COMMITs handed to the handler, as it counted (%u), none left",
	   (unsigned long long)st.commits, calls);
	ol_node_server_set_commit(s, NULL, NULL);
	uint8_t rep[256];
	size_t rlen;
	ok(commit(c, "Eagain", 6, rep, &rlen) == -EOPNOTSUPP,
	   "the handler unset: -EOPNOTSUPP again");
	ol_node_client_free(c);
	ol_node_server_stop(s);
	hctx_fini(&h);
}

/* The caller leaves while its handler runs: the handler finishes once, the server goes on,
 * stops cleanly (ASan: nothing freed twice, nothing leaked). */
static void
test_gone(const char *drive)
{
	char addr[64];
	struct hctx h;
	struct caller k;
	struct ol_node_server *s = server(drive, addr, sizeof(addr));
	if (!s)
		return;
	hctx_init(&h, addr);
	ol_node_server_set_commit(s, handler, &h);
	memset(&k, 0, sizeof(k));
	k.addr = addr;
	snprintf(k.req, sizeof(k.req), "Bgone");
	int rc = ol_node_client_new(addr, SECRET, 5, &k.c);
	if (!rc)
		rc = pthread_create(&k.t, NULL, caller_main, &k);
	ok(rc == 0 && wait_count(&h, &h.blocked, 1), "a COMMIT whose handler blocks (%d)", rc);
	if (rc)
		goto out;
	ol_node_client_abort(k.c); /* its connection shut down; the thread frees the client */
	pthread_join(k.t, NULL);
	ok(k.rc == -ECANCELED || k.rc == -ECONNRESET || k.rc == -EPIPE,
	   "the caller gave up and closed its connection (%d)", k.rc);
	release(&h);
	ok(wait_count(&h, &h.returned, 1), "the handler returns");
	ok(self_ping(addr) == 0, "the server serves on");
out:
	ol_node_server_stop(s);
	ok(h.calls == 1 && h.after_stop == 0, "the handler ran once (%u)", h.calls);
	hctx_fini(&h);
}

/* A call that waits in the queue past its deadline (8 handlers busy) is not run once a
 * thread frees: its caller gave up, and a commit run late would publish what the caller
 * counts as failed. */
static void
test_late(const char *drive)
{
	char addr[64];
	struct hctx h;
	static struct caller k[OL_NODE_COMMIT_THREADS];
	struct ol_node_client *late = NULL;
	unsigned n = 0, good = 0;
	struct ol_node_server_stats ss = {0};
	struct ol_node_server *s = server(drive, addr, sizeof(addr));
	if (!s)
		return;
	hctx_init(&h, addr);
	ol_node_server_set_commit(s, handler, &h);
	for (; n < OL_NODE_COMMIT_THREADS; n++)
		if (caller_start(&k[n], addr, "Bbusy") != 0)
			break;
	ok(n == OL_NODE_COMMIT_THREADS && wait_count(&h, &h.blocked, n),
	   "%u handlers block, every commit thread busy", n);
	uint8_t rep[256];
	size_t rlen;
	int rc = ol_node_client_new(addr, SECRET, 5, &late);
	if (!rc) {
		const uint8_t *rp;
		struct iovec iov = {"Elate", 5};
		rc = ol_node_call(late, OL_NODE_COMMIT, &iov, 1, 300, &rp, &rlen);
	}
	struct timespec end = until(WAIT_S);
	do { /* queued by now, or soon: its frame reached the server before the caller gave up */
		ol_node_server_stats(s, &ss);
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	} while (!ss.commits_queued && time(NULL) < end.tv_sec);
	ok(rc == -ETIMEDOUT && ss.commits_queued == 1,
	   "a call with a 300 ms deadline waits in the queue and its caller times out (%d)", rc);
	/* queued at the latest now, so its deadline ends 300 ms from now at the latest */
	uint64_t after = ol_io_now_ms() + 400;
	while (ol_io_now_ms() < after)
		nanosleep(&(struct timespec){0, 20000000}, NULL);
	release(&h);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(k[i].t, NULL);
		good += k[i].rc == 0 && is_reversed("Bbusy", k[i].rep, k[i].rlen);
	}
	end = until(WAIT_S);
	do {
		ol_node_server_stats(s, &ss);
		nanosleep(&(struct timespec){0, 5000000}, NULL); /* polling a condition */
	} while ((ss.commits_queued || ss.commits_running) && time(NULL) < end.tv_sec);
	rc = commit(late, "Eafter", 6, rep, &rlen);
	ok(good == n && !ss.commits_queued && rc == 0 && is_reversed("Eafter", rep, rlen),
	   "the 8 answered, the queue drained; a new call on that client is served (%d)", rc);
	pthread_mutex_lock(&h.mu);
	unsigned calls = h.calls;
	pthread_mutex_unlock(&h.mu);
	ok(calls == OL_NODE_COMMIT_THREADS + 1,
	   "the late call never ran: %u handler calls (8 blocked + the new one)", calls);
	ol_node_client_free(late);
	ol_node_server_stop(s);
	hctx_fini(&h);
}

struct stopper {
	pthread_t t;
	struct ol_node_server *s;
	struct hctx *h;
};

static void *
stopper_main(void *arg)
{
	struct stopper *st = arg;
	ol_node_server_stop(st->s);
	atomic_store(&st->h->stopped, true);
	return NULL;
}

/* Stop while 8 handlers run and a ninth call waits for a thread: the ninth is answered
 * -ESHUTDOWN at once, never run; stop waits for the 8 and sends their answers before it
 * closes the connections; no handler runs after stop returned. */
static void
test_stop(const char *drive)
{
	char addr[64];
	struct hctx h;
	static struct caller k[OL_NODE_COMMIT_THREADS + 1];
	struct stopper st;
	unsigned n = 0, good = 0;
	struct ol_node_server_stats ss = {0};
	struct ol_node_server *s = server(drive, addr, sizeof(addr));
	if (!s)
		return;
	hctx_init(&h, addr);
	ol_node_server_set_commit(s, handler, &h);
	for (; n < OL_NODE_COMMIT_THREADS; n++)
		if (caller_start(&k[n], addr, "Bstopping") != 0)
			break;
	ok(n == OL_NODE_COMMIT_THREADS && wait_count(&h, &h.blocked, n),
	   "%u handlers block, every commit thread busy", n);
	int rc = caller_start(&k[n], addr, "Equeued");
	n += rc == 0;
	struct timespec end = until(WAIT_S);
	do {
		ol_node_server_stats(s, &ss);
		nanosleep(&(struct timespec){0, 5000000}, NULL); /* polling a condition */
	} while (!ss.commits_queued && time(NULL) < end.tv_sec);
	ok(rc == 0 && ss.commits_queued == 1, "a ninth COMMIT waits in the queue");
	st = (struct stopper){.s = s, .h = &h};
	rc = pthread_create(&st.t, NULL, stopper_main, &st);
	ok(rc == 0, "stop, from another thread");
	if (rc) {
		release(&h);
		ol_node_server_stop(s);
		goto out;
	}
	pthread_join(k[n - 1].t, NULL);
	ok(k[n - 1].rc == -ESHUTDOWN, "the queued COMMIT is answered -ESHUTDOWN at once (%d)",
	   k[n - 1].rc);
	ok(!atomic_load(&h.stopped) && !atomic_load(&k[0].done),
	   "stop waits for the handlers running");
	release(&h);
	pthread_join(st.t, NULL);
	for (unsigned i = 0; i + 1 < n; i++) {
		pthread_join(k[i].t, NULL);
		good += k[i].rc == 0 && is_reversed("Bstopping", k[i].rep, k[i].rlen);
	}
	ok(good == OL_NODE_COMMIT_THREADS,
	   "the %u running handlers' answers went out before stop closed their connections (%u)",
	   OL_NODE_COMMIT_THREADS, good);
	ok(h.calls == OL_NODE_COMMIT_THREADS && h.returned == h.calls && h.after_stop == 0,
	   "the handler ran %u times (the queued call never), none after stop returned", h.calls);
out:
	hctx_fini(&h);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	char tmp[] = "/tmp/ol-test-node-commit-XXXXXX";
	if (!mkdtemp(tmp))
		tap_skip_all("no temp dir");
	char drive[128];
	snprintf(drive, sizeof(drive), "%s/d0", tmp);
	test_served(drive);
	test_gone(drive);
	test_late(drive);
	test_stop(drive);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd))
		ok(0, "cleanup");
	tap_done();
}
