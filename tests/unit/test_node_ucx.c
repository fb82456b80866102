/* test_node_ucx.c - the node plane over UCX (plane_transport = "ucx") with UCX_TLS=tcp (TAP):
 * a real server on its loop with the real client through "ucx://" addresses: HELLO, ping,
 * shard write / stat / rename / read bit-exact, pipelined calls, refusals, a wrong secret, a
 * silent endpoint closed by the HELLO timer; the credit window with a small window; a peer
 * frozen with SIGSTOP (another process): the deadline, a call blocked on it cut by
 * ol_node_client_abort from another thread, then a stream that waits on its credit
 * while the receiver is frozen and finishes when it thaws, never beyond the window. Without
 * UCX in the build: the refusals (-EPROTONOSUPPORT) only. [rdma] dev_name: a device this
 * host lacks is reported, $UCX_NET_DEVICES wins over it, and the calls run with it set. COMMIT
 * over UCX: no handler, an echo, a blocked handler beside a PING, a caller gone mid-call. */
#include "io/io.h"
#include "node/node.h"
#include "node_pat.h"
#include "node/ucx_int.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "node-plane-ucx-secret"

static int
start(const char *drive, uint32_t window, uint32_t maxp, unsigned *port, struct ol_node_server **s)
{
	const char *drives[] = {drive};
	*port = 0;
	struct ol_node_server_opts o = {.addr = "127.0.0.1:0",
					.secret = SECRET,
					.self_id = 7,
					.threads = 2,
					.window = window,
					.max_payload = maxp,
					.n_drives = 1,
					.drives = drives,
					.hello_timeout_ms = 500,
					.transport = OL_NODE_UCX,
					.port = port};
	return ol_node_server_start(&o, s);
}

static void test_commit(const char *addr, struct ol_node_server *s);

static void
test_calls(const char *tmp)
{
	char d0[256], addr[64], path[512];
	snprintf(d0, sizeof(d0), "%s/d0", tmp);
	struct ol_node_server *s;
	unsigned port;
	int rc = start(d0, 1u << 20, 256u << 10, &port, &s);
	ok(rc == 0 && port > 0, "UCX server on 127.0.0.1:%u (%d)", port, rc);
	if (rc)
		return;
	snprintf(addr, sizeof(addr), "ucx://127.0.0.1:%u", port);
	struct ol_node_client *c;
	ok(ol_node_client_new(addr, SECRET, 3, &c) == 0, "client of %s", addr);
	struct ol_node_peer_info pi;
	rc = ol_node_hello(c, 20000, &pi);
	ok(rc == 0 && pi.node_id == 7 && pi.n_drives == 1 && !strcmp(pi.drives[0].path, d0) &&
	       pi.window == 1u << 20 && pi.max_payload == 256u << 10,
	   "HELLO over UCX: node 7, its drive, window and frame cap (%d)", rc);
	uint64_t rtt = 0;
	ok(ol_node_ping(c, 10000, &rtt) == 0 && rtt > 0, "ping (%llu ns)", (unsigned long long)rtt);

	node_shard_round_trip(c, 0, d0);
	struct pat p = {0, 100, 0};
	ok(ol_node_shard_write(c, 0, "../x", pat_src, &p, 10000, NULL) == -EINVAL,
	   "a bad name refused by the server");

	/* pipelined: several calls on the wire at once, answered in order */
	static uint8_t pay[100u << 10];
	struct iovec iov = {pay, sizeof(pay)};
	uint64_t ids[8];
	int sent = 0, answered = 0;
	for (int i = 0; i < 8; i++)
		sent += ol_node_send(c, OL_NODE_PING, &iov, 1, 20000, &ids[i]) == 0;
	for (int i = 0; i < sent; i++)
		answered += ol_node_recv(c, ids[i], NULL, NULL) == 0;
	ok(sent >= 1 && answered == sent && ol_node_client_pending(c) == 0,
	   "%d pipelined calls of 100 KiB, all answered", sent);
	struct ol_node_client_stats cs;
	ol_node_client_stats(c, &cs);
	ok(cs.connects == 1, "one connection for all those calls (%llu)",
	   (unsigned long long)cs.connects);
	ol_node_client_free(c);

	ok(ol_node_client_new(addr, "not-the-secret", 3, &c) == 0, "client with a wrong secret");
	rc = ol_node_ping(c, 10000, NULL);
	ok(rc == -EACCES, "wrong secret: -EACCES (%d)", rc);
	ol_node_client_free(c);

	/* nobody listening: refused at once, as on TCP */
	struct ol_node_client *nc;
	int lfd = ol_io_listen("127.0.0.1:0", false, 1); /* a port nobody listens on, once closed */
	snprintf(path, sizeof(path), "ucx://127.0.0.1:%u", ol_io_sock_port(lfd));
	close(lfd);
	ol_node_client_new(path, SECRET, 3, &nc);
	uint64_t t0 = ol_io_now_ms();
	rc = ol_node_ping(nc, 20000, NULL);
	ok(rc == -ECONNREFUSED && ol_io_now_ms() - t0 < 15000,
	   "no listener: -ECONNREFUSED before the deadline (%d)", rc);
	ol_node_client_free(nc);

	/* an endpoint that never says HELLO is closed by the server's timer */
	struct ol_node_ucx *x;
	uint8_t b;
	rc = ol_node_ucx_connect(addr + strlen(OL_NODE_UCX_SCHEME), &x);
	ssize_t r = rc ? rc : ol_node_ucx_read(x, &b, 1, 30000);
	ok(r < 0 && r != -ETIMEDOUT, "silent endpoint closed by the server (%zd)", r);
	ol_node_ucx_close(x);

	struct ol_node_server_stats ss;
	ol_node_server_stats(s, &ss);
	ok(ss.max_held <= (1u << 20) && ss.window_violations == 0,
	   "the server never held more than the window (%llu)", (unsigned long long)ss.max_held);
	ok(ss.auth_failures == 1 && ss.hello_timeouts == 1,
	   "one failed HELLO, one HELLO timeout (%llu, %llu)", (unsigned long long)ss.auth_failures,
	   (unsigned long long)ss.hello_timeouts);
	test_commit(addr, s);
	ol_node_server_stop(s);
}

/* ---- COMMIT over UCX: the same helper threads as on TCP ---- */

struct blk {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool release;
	unsigned blocked, calls, returned;
};

/* the request reversed, status 0; a request starting with 'B' first waits for release */
static int
blk_handler(void *arg, const uint8_t *req, size_t len, uint8_t *reply, size_t cap, size_t *rlen)
{
	struct blk *b = arg;
	int rc = len <= cap ? 0 : -EMSGSIZE;
	pthread_mutex_lock(&b->mu);
	b->calls++;
	if (len && req[0] == 'B') {
		b->blocked++;
		pthread_cond_broadcast(&b->cv);
		struct timespec end;
		clock_gettime(CLOCK_REALTIME, &end);
		end.tv_sec += 60; /* a test that never releases fails, it does not hang */
		while (!b->release && pthread_cond_timedwait(&b->cv, &b->mu, &end) != ETIMEDOUT)
			;
		b->blocked--;
	}
	pthread_mutex_unlock(&b->mu);
	for (size_t i = 0; !rc && i < len; i++)
		reply[i] = req[len - 1 - i];
	*rlen = rc ? 0 : len;
	pthread_mutex_lock(&b->mu);
	b->returned++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	return rc;
}

/* Wait (60 s at most) until *n reaches want. */
static bool
blk_wait(struct blk *b, const unsigned *n, unsigned want)
{
	uint64_t end = ol_io_now_ms() + 60000;
	pthread_mutex_lock(&b->mu);
	while (*n < want && ol_io_now_ms() < end) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&b->cv, &b->mu, &ts);
	}
	bool got = *n >= want;
	pthread_mutex_unlock(&b->mu);
	return got;
}

struct bcall {
	struct ol_node_client *c;
	int rc;
	uint8_t rep[16];
	size_t rlen;
};

static void *
bcall_main(void *arg)
{
	struct bcall *k = arg;
	const uint8_t *rp;
	size_t rl;
	k->rc = ol_node_call(k->c, OL_NODE_COMMIT, &(struct iovec){"Bwait", 5}, 1, 60000, &rp, &rl);
	if (!k->rc && rl <= sizeof(k->rep)) {
		memcpy(k->rep, rp, rl);
		k->rlen = rl;
	}
	return NULL;
}

static void
test_commit(const char *addr, struct ol_node_server *s)
{
	struct ol_node_client *c, *k1c, *k2c;
	struct blk b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	const uint8_t *rp;
	size_t rl;
	pthread_t t1, t2;
	ol_node_client_new(addr, SECRET, 3, &c);
	int rc = ol_node_call(c, OL_NODE_COMMIT, &(struct iovec){"Ex", 2}, 1, 20000, &rp, &rl);
	ok(rc == -EOPNOTSUPP, "COMMIT over UCX without a handler: -EOPNOTSUPP (%d)", rc);
	ol_node_server_set_commit(s, blk_handler, &b);
	rc = ol_node_call(c, OL_NODE_COMMIT, &(struct iovec){"Eabc", 4}, 1, 20000, &rp, &rl);
	ok(rc == 0 && rl == 4 && !memcmp(rp, "cbaE", 4),
	   "COMMIT over UCX: the handler's reply (%d)", rc);
	struct bcall k1 = {0}, k2 = {0};
	ol_node_client_new(addr, SECRET, 3, &k1c);
	ol_node_client_new(addr, SECRET, 3, &k2c);
	k1.c = k1c;
	k2.c = k2c;
	rc = pthread_create(&t1, NULL, bcall_main, &k1);
	ok(rc == 0 && blk_wait(&b, &b.blocked, 1), "a COMMIT whose handler blocks");
	ok(ol_node_ping(c, 20000, NULL) == 0, "meanwhile the UCX loop answers a PING");
	rc = pthread_create(&t2, NULL, bcall_main, &k2);
	ok(rc == 0 && blk_wait(&b, &b.blocked, 2), "and a second blocking COMMIT");
	ol_node_client_abort(k2c); /* its caller leaves while the handler runs */
	pthread_join(t2, NULL);
	ol_node_client_free(k2c);
	ok(k2.rc < 0, "the second caller gave up (%d)", k2.rc);
	pthread_mutex_lock(&b.mu);
	b.release = true;
	pthread_cond_broadcast(&b.cv);
	pthread_mutex_unlock(&b.mu);
	pthread_join(t1, NULL);
	ok(k1.rc == 0 && k1.rlen == 5 && !memcmp(k1.rep, "tiawB", 5),
	   "released: the first one's answer arrives (%d)", k1.rc);
	bool back = blk_wait(&b, &b.returned, 3); /* the echo's and the two blocked ones' */
	ok(back && b.calls == 3 && ol_node_ping(c, 20000, NULL) == 0,
	   "each handler returned, once each (%u calls), the server serves on", b.calls);
	ol_node_client_free(k1c);
	ol_node_client_free(c);
}

/* ---- a peer in another process, frozen with SIGSTOP ---- */

#define FROZEN_WINDOW (64u << 10)

/* The child: a UCX server with a small window; its port goes up `up`; it serves until `down`
 * closes, then sends its stats up and exits. */
static void
child(const char *drive, int up, int down)
{
	struct ol_node_server *s;
	unsigned port = 0;
	if (start(drive, FROZEN_WINDOW, 16u << 10, &port, &s))
		port = 0;
	(void)!write(up, &port, sizeof(port));
	char b;
	while (read(down, &b, 1) > 0)
		;
	struct ol_node_server_stats ss = {0};
	if (port) {
		ol_node_server_stats(s, &ss);
		ol_node_server_stop(s);
	}
	(void)!write(up, &ss, sizeof(ss));
	_exit(0);
}

struct writer {
	struct ol_node_client *c;
	int rc;
	uint64_t wrote;
};

static void *
write_2m(void *arg)
{
	struct writer *w = arg;
	struct pat p = {0, 2u << 20, 0};
	w->rc = ol_node_shard_write(w->c, 0, "slow", pat_src, &p, 120000, &w->wrote);
	return NULL;
}

struct pinger {
	struct ol_node_client *c;
	_Atomic int rc;
};

static void *
ping_long(void *arg)
{
	struct pinger *p = arg;
	atomic_store(&p->rc, ol_node_ping(p->c, 100000, NULL));
	return NULL;
}

/* A call blocked on a frozen peer is cut by ol_node_client_abort from another thread (the
 * hedge's abandon, docs/cluster.md "A slow drive"), as it is over TCP. */
static void
test_abort_frozen(struct ol_node_client *c)
{
	struct pinger p = {c, 1};
	pthread_t th;
	pthread_create(&th, NULL, ping_long, &p);
	usleep(300 * 1000); /* for the call to block (an abort before that fails it the same way) */
	uint64_t t0 = ol_io_now_ms();
	ol_node_client_abort(c);
	pthread_join(th, NULL); /* without the abort: its 100 s deadline */
	uint64_t took = ol_io_now_ms() - t0;
	ok(atomic_load(&p.rc) == -ECANCELED && took < 60000,
	   "abort: a call blocked on the frozen peer over UCX returns -ECANCELED (%d after %llu "
	   "ms)",
	   atomic_load(&p.rc), (unsigned long long)took);
	ok(ol_node_ping(c, 100000, NULL) == -ECANCELED,
	   "abort: a later call fails at once, without connecting again");
}

static void
test_frozen(pid_t pid, int up, int down)
{
	unsigned port = 0;
	ok(read(up, &port, sizeof(port)) == sizeof(port) && port > 0,
	   "a UCX server in another process (port %u)", port);
	if (!port)
		return;
	char addr[64];
	snprintf(addr, sizeof(addr), "ucx://127.0.0.1:%u", port);
	struct ol_node_client *c;
	ol_node_client_new(addr, SECRET, 1, &c);
	ok(ol_node_ping(c, 20000, NULL) == 0, "ping the live peer");
	struct ol_node_client *ca;
	ol_node_client_new(addr, SECRET, 1, &ca);
	ok(ol_node_ping(ca, 20000, NULL) == 0, "a second client pings the live peer");
	kill(pid, SIGSTOP);
	int wst = 0;
	ok(waitpid(pid, &wst, WUNTRACED) == pid && WIFSTOPPED(wst), "the peer is frozen");
	uint64_t t0 = ol_io_now_ms();
	int rc = ol_node_ping(c, 300, NULL);
	uint64_t took = ol_io_now_ms() - t0;
	ok(rc == -ETIMEDOUT && took >= 300 && took < 30000,
	   "a frozen peer: -ETIMEDOUT, not before the deadline (%d after %llu ms)", rc,
	   (unsigned long long)took);
	test_abort_frozen(ca);
	ol_node_client_free(ca);
	/* a 2 MiB stream to a receiver frozen for a while: it waits on its credit */
	struct writer w = {c, -1, 0};
	pthread_t th;
	pthread_create(&th, NULL, write_2m, &w);
	usleep(300 * 1000); /* the freeze, not a wait for something */
	kill(pid, SIGCONT);
	pthread_join(th, NULL);
	struct ol_node_client_stats cs;
	ol_node_client_stats(c, &cs);
	ok(w.rc == 0 && w.wrote == 2u << 20, "2 MiB to the thawed receiver (%d)", w.rc);
	ok(cs.credit_waits > 0 && cs.max_outstanding <= FROZEN_WINDOW,
	   "the sender waited for credit (%llu times), at most %llu bytes out of %u",
	   (unsigned long long)cs.credit_waits, (unsigned long long)cs.max_outstanding,
	   FROZEN_WINDOW);
	ol_node_client_free(c);
	close(down);
	struct ol_node_server_stats ss;
	ok(read(up, &ss, sizeof(ss)) == sizeof(ss) && ss.window_violations == 0 &&
	       ss.max_held <= FROZEN_WINDOW,
	   "the receiver never held more than its window (%llu <= %u)",
	   (unsigned long long)ss.max_held, FROZEN_WINDOW);
}

int
main(void)
{
	if (!ol_node_ucx_available()) {
		struct ol_node_client *c;
		struct ol_node_server *s;
		const char *d[] = {"/nonexistent"};
		struct ol_node_server_opts o = {.addr = "127.0.0.1:0",
						.secret = SECRET,
						.threads = 1,
						.window = 1u << 20,
						.max_payload = 65536,
						.n_drives = 1,
						.drives = d,
						.transport = OL_NODE_UCX};
		ok(ol_node_client_new("ucx://127.0.0.1:1", SECRET, 1, &c) == -EPROTONOSUPPORT,
		   "no UCX in this build: a ucx:// peer is refused");
		ok(ol_node_server_start(&o, &s) == -EPROTONOSUPPORT,
		   "no UCX in this build: a UCX server is refused");
		ok(ol_node_ucx_device("mlx5_0") == -EPROTONOSUPPORT,
		   "no UCX in this build: no device to set");
		tap_done();
	}
	/* a test runs on any host: tcp on loopback unless told otherwise (UCX would also open
	 * lanes on every other interface, some of them other tests' and short-lived) */
	setenv("UCX_TLS", "tcp", 0);
	/* [rdma] dev_name: a device this host lacks is said, and UCX then chooses;
	 * $UCX_NET_DEVICES wins over it (as it does for the KV pool's UCX) */
	char *nd = getenv("UCX_NET_DEVICES") ? strdup(getenv("UCX_NET_DEVICES")) : NULL;
	unsetenv("UCX_NET_DEVICES");
	ok(ol_node_ucx_device("mlx5_nosuch:1") == -ENODEV, "dev_name of no device here: -ENODEV");
	ok(ol_node_ucx_device(NULL) == 0, "no dev_name: nothing to apply");
	setenv("UCX_NET_DEVICES", nd ? nd : "lo", 1);
	free(nd);
	ok(ol_node_ucx_device("mlx5_nosuch") == 0, "$UCX_NET_DEVICES set: dev_name not applied");
	char tmp[] = "/tmp/ol-node-ucx-XXXXXX", d1[300];
	if (!mkdtemp(tmp))
		tap_skip_all("mkdtemp");
	snprintf(d1, sizeof(d1), "%s/frozen", tmp);
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		tap_skip_all("pipe");
	/* the frozen peer's process first: no UCX state of ours is forked into it */
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		child(d1, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	test_calls(tmp);
	test_frozen(pid, up[0], down[1]);
	kill(pid, SIGCONT);
	int wst = 0;
	waitpid(pid, &wst, 0);
	ok(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the peer process stopped cleanly");
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	(void)!system(cmd);
	tap_done();
}
