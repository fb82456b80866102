/* test_loop.c - the per-core io_uring loop (src/io/loop.c) over real loopback sockets (TAP):
 * timers, cross-thread messages, a connection's whole life on the loop that accepted it, and
 * 10 000 concurrent connections served by a fixed number of loop threads. */
#include "io/io.h"
#include "io/loop.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* ThreadSanitizer runs a background thread of its own in the process */
#if defined(__SANITIZE_THREAD__)
#define SANITIZER_THREADS 1
#else
#define SANITIZER_THREADS 0
#endif

#define NLOOPS 2

/* Our threads in /proc/self/task. The kernel's io-wq workers ("iou-wrk-*", made for ops a
 * ring punts, such as fsync, and gone after a few idle seconds) are tasks of the process too;
 * they are the kernel's, bounded per ring, and not counted here. */
static int
count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
		}
		if (strncmp(comm, "iou-", 4) != 0)
			n++;
	}
	closedir(d);
	return n;
}

/* ---- timers ---- */

#define NT 200
struct tctx {
	struct ol_loop_timer t[NT];
	uint64_t deadline[NT], fired_at[NT];
	int order[NT], n_fired, fired[NT];
};

static struct tctx *tc;

static void
on_timer_i(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	int i = (int)(intptr_t)arg;
	tc->fired_at[i] = ol_io_now_ns();
	tc->fired[i]++;
	tc->order[tc->n_fired++] = i;
	if (tc->n_fired == NT / 2)
		ol_loop_quit(l);
}

static void
test_timers(void)
{
	struct ol_loop *l;
	int rc = ol_loop_new(0, &l);
	ok(rc == 0, "loop made (%d)", rc);
	if (rc)
		return;
	tc = calloc(1, sizeof(*tc));
	srand(7);
	/* odd timers are cancelled or re-armed later; only even ones must fire */
	for (int i = 0; i < NT; i++) {
		tc->t[i].cb = on_timer_i;
		tc->t[i].arg = (void *)(intptr_t)i;
		uint64_t d = (uint64_t)(rand() % 40) * 1000000u;
		if (ol_loop_timer_arm(l, &tc->t[i], d))
			break;
		tc->deadline[i] = tc->t[i].when_ns;
	}
	for (int i = 1; i < NT; i += 2)
		ol_loop_timer_cancel(l, &tc->t[i]);
	/* a re-armed timer moves: arm 0 again far later, then back early */
	ol_loop_timer_arm(l, &tc->t[0], 5000000000ull);
	ol_loop_timer_arm(l, &tc->t[0], 1000000u);
	tc->deadline[0] = tc->t[0].when_ns;
	rc = ol_loop_run(l);
	ok(rc == 0, "loop ran until the last timer quit it (%d)", rc);
	ok(tc->n_fired == NT / 2, "%d of %d armed timers fired", tc->n_fired, NT / 2);
	int early = 0, odd = 0, twice = 0, disorder = 0;
	for (int i = 0; i < NT; i++) {
		if (tc->fired[i] && tc->fired_at[i] < tc->deadline[i])
			early++;
		if (i % 2 && tc->fired[i])
			odd++;
		if (tc->fired[i] > 1)
			twice++;
	}
	for (int k = 1; k < tc->n_fired; k++)
		if (tc->deadline[tc->order[k]] < tc->deadline[tc->order[k - 1]])
			disorder++;
	ok(early == 0, "no timer fired before its deadline (%d early)", early);
	ok(odd == 0, "no cancelled timer fired (%d)", odd);
	ok(twice == 0, "each timer fired once");
	ok(disorder == 0, "timers fired in deadline order (%d out of order)", disorder);
	free(tc);
	ol_loop_free(l);
}

/* ---- cross-thread messages ---- */

#define NSEND 4
#define NMSG  20000
struct mmsg {
	struct ol_loop_msg m;
	int sender, seq;
};
static struct mmsg *msgs;
static int last_seq[NSEND], bad_order, got_total;
static struct ol_loop *mloop;
static atomic_int post_errors;
static pthread_t loop_tid;

static void
on_msg(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct mmsg *m = arg;
	if (m->seq != last_seq[m->sender] + 1 || !pthread_equal(pthread_self(), loop_tid))
		bad_order++;
	last_seq[m->sender] = m->seq;
	got_total++;
}

static void
on_loop_tid(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	(void)arg;
	loop_tid = pthread_self();
}

static void *
sender(void *arg)
{
	int s = (int)(intptr_t)arg;
	for (int i = 0; i < NMSG; i++) {
		struct mmsg *m = &msgs[s * NMSG + i];
		m->m.fn = on_msg;
		m->m.arg = m;
		m->sender = s;
		m->seq = i;
		if (ol_loop_post(mloop, &m->m))
			atomic_fetch_add(&post_errors, 1);
	}
	return NULL;
}

static void
test_messages(void)
{
	int rc = ol_loop_new(0, &mloop);
	ok(rc == 0, "loop for messages");
	if (rc)
		return;
	msgs = calloc(NSEND * NMSG, sizeof(*msgs));
	for (int s = 0; s < NSEND; s++)
		last_seq[s] = -1;
	struct ol_loop_msg first = {.fn = on_loop_tid};
	ol_loop_post(mloop, &first);
	ok(ol_loop_start(mloop, "t-loop") == 0, "loop thread started");
	pthread_t th[NSEND];
	for (int s = 0; s < NSEND; s++)
		pthread_create(&th[s], NULL, sender, (void *)(intptr_t)s);
	for (int s = 0; s < NSEND; s++)
		pthread_join(th[s], NULL);
	ol_loop_stop(mloop); /* the stop message comes after every sender's last one */
	ok(atomic_load(&post_errors) == 0, "every post succeeded");
	ok(got_total == NSEND * NMSG, "%d of %d messages ran", got_total, NSEND * NMSG);
	ok(bad_order == 0, "per sender in order, on the loop's thread (%d bad)", bad_order);
	int all_last = 1;
	for (int s = 0; s < NSEND; s++)
		all_last &= last_seq[s] == NMSG - 1;
	ok(all_last, "each sender's last message ran");
	struct ol_loop_stats st;
	ol_loop_stats(mloop, &st);
	ok(st.msgs_run == (uint64_t)NSEND * NMSG + 2, "exactly once: %llu runs",
	   (unsigned long long)st.msgs_run);
	free(msgs);
	ol_loop_free(mloop);
}

/* ---- an echo server on NLOOPS loops, each with its own SO_REUSEPORT listener ---- */

struct srv;
struct sconn {
	struct srv *s;
	struct ol_loop *home;
	int fd, wrong_loop;
	struct ol_loop_op rop, wop;
	char buf[64];
};

struct srv {
	struct ol_loop *loops[NLOOPS];
	int lfd[NLOOPS];
	struct ol_loop_op aop[NLOOPS];
	struct ol_loop_msg start[NLOOPS];
	atomic_int accepted, open, closed, wrong_loop, echoed;
	atomic_int per_loop[NLOOPS];
};

static void on_recv(struct ol_loop *l, void *arg, int res);

static void
conn_close(struct sconn *c)
{
	if (c->wrong_loop)
		atomic_fetch_add(&c->s->wrong_loop, 1);
	close(c->fd);
	atomic_fetch_sub(&c->s->open, 1);
	atomic_fetch_add(&c->s->closed, 1);
	free(c);
}

static void
on_sent(struct ol_loop *l, void *arg, int res)
{
	struct sconn *c = arg;
	if (l != c->home || ol_loop_current() != c->home)
		c->wrong_loop = 1;
	if (res <= 0 || ol_loop_recv(l, &c->rop, c->fd, c->buf, sizeof(c->buf))) {
		conn_close(c);
		return;
	}
	atomic_fetch_add(&c->s->echoed, 1);
}

static void
on_recv(struct ol_loop *l, void *arg, int res)
{
	struct sconn *c = arg;
	if (l != c->home || ol_loop_current() != c->home)
		c->wrong_loop = 1;
	if (res <= 0 || ol_loop_send_all(l, &c->wop, c->fd, c->buf, (size_t)res))
		conn_close(c);
}

static void
on_accept(struct ol_loop *l, void *arg, int res)
{
	struct srv *s = arg;
	int i = 0;
	while (s->loops[i] != l)
		i++;
	if (res >= 0) {
		struct sconn *c = calloc(1, sizeof(*c));
		c->s = s;
		c->home = l;
		c->fd = res;
		c->rop.cb = on_recv;
		c->rop.arg = c;
		c->wop.cb = on_sent;
		c->wop.arg = c;
		atomic_fetch_add(&s->accepted, 1);
		atomic_fetch_add(&s->open, 1);
		atomic_fetch_add(&s->per_loop[i], 1);
		if (ol_loop_recv(l, &c->rop, c->fd, c->buf, sizeof(c->buf)))
			conn_close(c);
	}
	if (res != -ECANCELED && res != -EBADF && res != -EINVAL)
		ol_loop_accept(l, &s->aop[i], s->lfd[i]);
}

static void
on_start(struct ol_loop *l, void *arg, int res)
{
	(void)res;
	struct srv *s = arg;
	for (int i = 0; i < NLOOPS; i++)
		if (s->loops[i] == l)
			ol_loop_accept(l, &s->aop[i], s->lfd[i]);
}

static int
srv_start(struct srv *s, unsigned *port)
{
	char addr[64] = "127.0.0.1:0";
	for (int i = 0; i < NLOOPS; i++) {
		s->lfd[i] = ol_io_listen(addr, true, 4096);
		if (s->lfd[i] < 0)
			return s->lfd[i];
		if (i == 0) {
			*port = ol_io_sock_port(s->lfd[0]);
			snprintf(addr, sizeof(addr), "127.0.0.1:%u", *port);
		}
		int rc = ol_loop_new(0, &s->loops[i]);
		if (rc)
			return rc;
		s->aop[i].cb = on_accept;
		s->aop[i].arg = s;
		s->start[i].fn = on_start;
		s->start[i].arg = s;
	}
	for (int i = 0; i < NLOOPS; i++) {
		ol_loop_post(s->loops[i], &s->start[i]);
		if (ol_loop_start(s->loops[i], "t-srv"))
			return -EAGAIN;
	}
	return 0;
}

static void
srv_stop(struct srv *s)
{
	for (int i = 0; i < NLOOPS; i++) {
		ol_loop_stop(s->loops[i]);
		ol_loop_free(s->loops[i]);
		close(s->lfd[i]);
	}
}

static int
wait_until(atomic_int *v, int want, int secs)
{
	uint64_t end = ol_io_now_ms() + (uint64_t)secs * 1000;
	while (atomic_load(v) != want && ol_io_now_ms() < end)
		usleep(2000);
	return atomic_load(v) == want;
}

static void
test_conn_life(void)
{
	struct srv *s = calloc(1, sizeof(*s));
	unsigned port = 0;
	int rc = srv_start(s, &port);
	ok(rc == 0, "echo server on %d loops (%d)", NLOOPS, rc);
	if (rc)
		return;
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	int bad = 0;
	for (int k = 0; k < 40; k++) {
		int fd = ol_io_connect(addr, 5000);
		char out[32], in[32];
		for (int r = 0; fd >= 0 && r < 5; r++) {
			int n = snprintf(out, sizeof(out), "conn %d round %d", k, r);
			if (ol_io_write_all(fd, out, (size_t)n, 10000) ||
			    ol_io_read(fd, in, sizeof(in), 10000) != n ||
			    memcmp(in, out, (size_t)n))
				bad++;
		}
		if (fd < 0)
			bad++;
		else
			close(fd);
	}
	ok(bad == 0, "40 connections x 5 echo rounds (%d failures)", bad);
	ok(wait_until(&s->closed, 40, 30), "every connection closed by its loop (%d)",
	   atomic_load(&s->closed));
	ok(atomic_load(&s->wrong_loop) == 0,
	   "every callback of a connection ran on the loop that accepted it (%d moved)",
	   atomic_load(&s->wrong_loop));
	srv_stop(s);
	free(s);
}

/* ---- a client on a loop: connect, send, recv, cancel, fsync, read as ring ops ---- */

struct cli {
	struct ol_loop_op op;
	int step, fd, tfd, res[7];
	char buf[64], rbuf[64];
	struct sockaddr_in sa;
};

static void
cli_step(struct ol_loop *l, void *arg, int res)
{
	struct cli *c = arg;
	c->res[c->step++] = res;
	switch (c->step) {
	case 1: /* connected: send */
		ol_loop_send_all(l, &c->op, c->fd, "ring ping", 9);
		break;
	case 2: /* sent: the echo */
		ol_loop_recv(l, &c->op, c->fd, c->buf, sizeof(c->buf));
		break;
	case 3: /* echoed: a recv nothing will answer, then cancel it */
		ol_loop_recv(l, &c->op, c->fd, c->buf, sizeof(c->buf));
		ol_loop_cancel(l, &c->op);
		break;
	case 4: /* cancelled: fsync a file */
		ol_loop_fsync(l, &c->op, c->tfd, false);
		break;
	case 5: /* synced: read it back from offset 5 (a pread: the file offset is not used) */
		ol_loop_read(l, &c->op, c->tfd, c->rbuf, sizeof(c->rbuf), 5);
		break;
	default:
		ol_loop_quit(l);
	}
}

static void
test_client_ops(void)
{
	struct srv *s = calloc(1, sizeof(*s));
	unsigned port = 0;
	struct ol_loop *l;
	if (srv_start(s, &port) || ol_loop_new(0, &l)) {
		ok(0, "server and a client loop");
		return;
	}
	struct cli c = {.op = {.cb = cli_step}};
	c.op.arg = &c;
	char tmpl[] = "/tmp/ol-test-loop-XXXXXX";
	c.tfd = mkstemp(tmpl);
	unlink(tmpl);
	ok(write(c.tfd, "ring read test", 14) == 14, "a file to fsync and read");
	c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c.sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	c.sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok(ol_loop_connect(l, &c.op, c.fd, (struct sockaddr *)&c.sa, sizeof(c.sa)) == 0,
	   "connect queued");
	ok(ol_loop_run(l) == 0 && c.step == 6, "the client ran its six steps (%d)", c.step);
	ok(c.res[0] == 0, "connect completed (%d)", c.res[0]);
	ok(c.res[1] == 9, "send_all sent all 9 bytes (%d)", c.res[1]);
	ok(c.res[2] == 9 && !memcmp(c.buf, "ring ping", 9), "recv got the echo (%d)", c.res[2]);
	ok(c.res[3] == -ECANCELED, "a cancelled recv completes once with -ECANCELED (%d)",
	   c.res[3]);
	ok(c.res[4] == 0, "fsync as a ring op (%d)", c.res[4]);
	ok(c.res[5] == 9 && !memcmp(c.rbuf, "read test", 9),
	   "read at an offset as a ring op: the 9 bytes from there to the end (%d)", c.res[5]);
	close(c.fd);
	close(c.tfd);
	ol_loop_free(l);
	srv_stop(s);
	free(s);
}

/* ---- 10 000 concurrent connections ---- */

#define NCONN 10000

/* the clients live in a child process: both ends in one process would need 20 000 fds */
static void
client_child(unsigned port, int ctl_w, int ctl_r)
{
	static int fds[NCONN];
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int ok_n = 0, active_ok = 0;
	for (int i = 0; i < NCONN; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)))
			break;
		ok_n++;
	}
	/* every 10th connection is active: a byte out, the same byte back */
	for (int i = 0; i < ok_n; i += 10) {
		char b = (char)i, r = 0;
		if (write(fds[i], &b, 1) == 1 && read(fds[i], &r, 1) == 1 && r == b)
			active_ok++;
	}
	int rep[2] = {ok_n, active_ok};
	if (write(ctl_w, rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	char go;
	if (read(ctl_r, &go, 1) != 1)
		_exit(3);
	for (int i = 0; i < ok_n; i++)
		close(fds[i]);
	_exit(0);
}

static void
test_many(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < NCONN + 200) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < NCONN + 200) {
		printf("ok %d - # SKIP 10 000 connections: RLIMIT_NOFILE is %llu (hard), needs "
		       "%d\n",
		       ++tap_n, (unsigned long long)rl.rlim_max, NCONN + 200);
		return;
	}
	struct srv *s = calloc(1, sizeof(*s));
	unsigned port = 0;
	int rc = srv_start(s, &port);
	ok(rc == 0, "server for %d connections", NCONN);
	if (rc)
		return;
	int threads_before = count_threads();
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		client_child(port, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	int rep[2] = {0, 0};
	ssize_t n = read(up[0], rep, sizeof(rep));
	ok(n == sizeof(rep) && rep[0] == NCONN, "client connected %d of %d", rep[0], NCONN);
	ok(rep[1] == NCONN / 10, "%d of %d active connections echoed", rep[1], NCONN / 10);
	ok(wait_until(&s->open, NCONN, 60), "server holds %d open connections",
	   atomic_load(&s->open));
	int threads = count_threads();
	ok(threads == threads_before && threads == 1 + NLOOPS + SANITIZER_THREADS,
	   "%d connections served by %d threads (main + %d loops)", NCONN, threads, NLOOPS);
	ok(atomic_load(&s->per_loop[0]) > 0 && atomic_load(&s->per_loop[1]) > 0,
	   "both loops took connections (%d, %d)", atomic_load(&s->per_loop[0]),
	   atomic_load(&s->per_loop[1]));
	if (write(down[1], "x", 1) != 1)
		ok(0, "tell the client to close");
	int st = 0;
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client exited cleanly");
	ok(wait_until(&s->open, 0, 60), "every connection closed on its loop at EOF (%d open)",
	   atomic_load(&s->open));
	ok(atomic_load(&s->wrong_loop) == 0, "no callback ran off its connection's loop");
	close(up[0]);
	close(down[1]);
	srv_stop(s);
	free(s);
}

static void
test_buffers(void)
{
	struct ol_loop *l;
	if (ol_loop_new(8, &l))
		return;
	void *a = ol_loop_buf_get(l), *b = ol_loop_buf_get(l);
	ok(a && b && a != b, "two distinct pool buffers");
	memset(a, 1, OL_LOOP_BUF);
	ol_loop_buf_put(l, a);
	ok(ol_loop_buf_get(l) == a, "a returned buffer is reused");
	ol_loop_buf_put(l, a);
	ol_loop_buf_put(l, b);
	ol_loop_free(l);
}

/* ---- pinning: ol_loop_new_on ---- */

struct pinctx {
	struct ol_loop_msg m;
	cpu_set_t seen;
	int cpu_now;
	atomic_int done;
};

static void
on_pin_msg(struct ol_loop *l, void *arg, int res)
{
	struct pinctx *p = arg;
	(void)l;
	(void)res;
	CPU_ZERO(&p->seen);
	pthread_getaffinity_np(pthread_self(), sizeof(p->seen), &p->seen);
	p->cpu_now = sched_getcpu();
	atomic_store(&p->done, 1);
}

/* A loop made for the last CPU of our mask runs there and only there; the caller's own mask
 * is left as it was; a CPU outside the mask is refused. */
static void
test_pinned(void)
{
	cpu_set_t before, after;
	pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
	int cpu = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &before))
			cpu = c;
	struct ol_loop *l = NULL;
	ok(ol_loop_new_on(0, cpu, &l) == 0 && ol_loop_cpu(l) == cpu, "a loop for CPU %d", cpu);
	pthread_getaffinity_np(pthread_self(), sizeof(after), &after);
	ok(CPU_EQUAL(&before, &after), "the caller's affinity mask is as it was");
	struct pinctx p = {.m = {.fn = on_pin_msg, .arg = &p}};
	ok(l && ol_loop_post(l, &p.m) == 0 && ol_loop_start(l, "pinned") == 0, "started");
	for (int i = 0; i < 10000 && !atomic_load(&p.done); i++)
		usleep(1000);
	ok(atomic_load(&p.done) && CPU_COUNT(&p.seen) == 1 && CPU_ISSET(cpu, &p.seen) &&
	       p.cpu_now == cpu,
	   "its thread may run on CPU %d only and runs there (%d)", cpu, p.cpu_now);
	if (l) {
		ol_loop_stop(l);
		ol_loop_free(l);
	}
	int outside = -1;
	for (int c = 0; c < CPU_SETSIZE && outside < 0; c++)
		if (!CPU_ISSET(c, &before))
			outside = c;
	ok(ol_loop_new_on(0, outside, &l) == -EINVAL && !l, "CPU %d, outside the mask: -EINVAL",
	   outside);
	ok(ol_loop_new_on(0, -1, &l) == 0 && ol_loop_cpu(l) == -1, "cpu -1: an unpinned loop");
	ol_loop_free(l);
}

/* ---- recv_all and sendmsg: a whole value per completion ---- */

#define WA_LEN (1u << 20)
struct wactx {
	int fd, calls, res;
	uint8_t *buf;
};

static void
on_wa(struct ol_loop *l, void *arg, int res)
{
	struct wactx *w = arg;
	w->calls++;
	w->res = res;
	ol_loop_quit(l);
}

/* The peer: write WA_LEN bytes in 4 KiB pieces (the socket buffer is much smaller, so the
 * receiver's MSG_WAITALL must gather many arrivals), or read them all back. */
static void *
wa_writer(void *arg)
{
	struct wactx *w = arg;
	uint8_t piece[4096];
	for (size_t off = 0; off < WA_LEN; off += sizeof(piece)) {
		for (size_t i = 0; i < sizeof(piece); i++)
			piece[i] = (uint8_t)((off + i) * 7);
		if (write(w->fd, piece, sizeof(piece)) != (ssize_t)sizeof(piece))
			break;
	}
	return NULL;
}

static void *
wa_reader(void *arg)
{
	struct wactx *w = arg;
	size_t got = 0;
	while (got < WA_LEN) {
		ssize_t n = read(w->fd, w->buf + got, WA_LEN - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return NULL;
}

static void
test_waitall(void)
{
	int sv[2];
	struct ol_loop *l;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || ol_loop_new(8, &l) != 0) {
		ok(0, "socketpair and loop");
		return;
	}
	struct wactx w = {.fd = sv[1], .buf = malloc(WA_LEN)}, peer = {.fd = sv[1]};
	struct ol_loop_op op = {.cb = on_wa, .arg = &w};
	pthread_t t;
	pthread_create(&t, NULL, wa_writer, &peer);
	ok(ol_loop_recv_all(l, &op, sv[0], w.buf, WA_LEN) == 0 && ol_loop_run(l) == 0,
	   "recv_all armed for 1 MiB written in 4 KiB pieces");
	pthread_join(t, NULL);
	int good = w.buf != NULL;
	for (size_t i = 0; good && i < WA_LEN; i++)
		good = w.buf[i] == (uint8_t)(i * 7);
	ok(w.calls == 1 && w.res == (int)WA_LEN && good,
	   "one completion with all of it, in order (calls %d, res %d)", w.calls, w.res);

	/* sendmsg: three pieces (a header, a value, a tail) arrive as their concatenation */
	static uint8_t hdr[32], tail[100];
	uint8_t *val = malloc(WA_LEN - sizeof(hdr) - sizeof(tail));
	memset(hdr, 0xaa, sizeof(hdr));
	memset(tail, 0x55, sizeof(tail));
	for (size_t i = 0; val && i < WA_LEN - sizeof(hdr) - sizeof(tail); i++)
		val[i] = (uint8_t)i;
	struct iovec iov[3] = {
	    {hdr, sizeof(hdr)}, {val, WA_LEN - sizeof(hdr) - sizeof(tail)}, {tail, sizeof(tail)}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
	struct wactx rd = {.fd = sv[1], .buf = calloc(1, WA_LEN)};
	w.calls = 0;
	pthread_create(&t, NULL, wa_reader, &rd);
	ok(val && ol_loop_sendmsg(l, &op, sv[0], &mh) == 0 && ol_loop_run(l) == 0,
	   "sendmsg of 3 iovecs (1 MiB) armed");
	pthread_join(t, NULL);
	good = rd.buf && val && memcmp(rd.buf, hdr, sizeof(hdr)) == 0 &&
	       memcmp(rd.buf + sizeof(hdr), val, WA_LEN - sizeof(hdr) - sizeof(tail)) == 0 &&
	       memcmp(rd.buf + WA_LEN - sizeof(tail), tail, sizeof(tail)) == 0;
	ok(w.calls == 1 && w.res == (int)WA_LEN && good,
	   "one completion, the peer read the three pieces in order (res %d)", w.res);
	free(val);
	free(rd.buf);
	free(w.buf);
	close(sv[0]);
	close(sv[1]);
	ol_loop_free(l);
}

/* ---- ol_loop_poll: a descriptor's readiness (node/ucx_srv.c polls UCX's event fd) ---- */

struct pollctx {
	int efd, res, calls;
	bool written; /* the timer wrote the eventfd before the poll completed */
	struct ol_loop_timer t;
};

static void
on_poll_timer(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct pollctx *p = arg;
	uint64_t one = 1;
	p->written = write(p->efd, &one, sizeof(one)) == sizeof(one);
}

static void
on_polled(struct ol_loop *l, void *arg, int res)
{
	struct pollctx *p = arg;
	p->res = res;
	p->calls++;
	ol_loop_quit(l);
}

static void
test_poll(void)
{
	struct ol_loop *l;
	struct pollctx p = {.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
	if (p.efd < 0 || ol_loop_new(8, &l) != 0) {
		ok(0, "eventfd and loop");
		return;
	}
	struct ol_loop_op op = {.cb = on_polled, .arg = &p};
	p.t = (struct ol_loop_timer){.cb = on_poll_timer, .arg = &p};
	ok(ol_loop_poll(l, &op, p.efd, POLLIN) == 0 &&
	       ol_loop_timer_arm(l, &p.t, 20u * 1000000u) == 0 && ol_loop_run(l) == 0,
	   "poll of an idle eventfd armed, a timer writes it in 20 ms");
	ok(p.calls == 1 && p.written && (p.res & POLLIN),
	   "the poll completes once, after the write, with POLLIN (res %d)", p.res);
	close(p.efd);
	ol_loop_free(l);
}

/* ---- fixed buffers: a registered buffer read into with read_fixed ---- */

struct fixctx {
	int res, calls;
};

static void
on_fixed_read(struct ol_loop *l, void *arg, int res)
{
	struct fixctx *f = arg;
	f->res = res;
	f->calls++;
	ol_loop_quit(l);
}

/* One read_fixed of len bytes at off of fd into buf (slot idx); its result. */
static int
read_fixed_once(struct ol_loop *l, int fd, void *buf, size_t len, uint64_t off, int idx)
{
	struct fixctx f = {0, 0};
	struct ol_loop_op op = {.cb = on_fixed_read, .arg = &f};
	int rc = ol_loop_read_fixed(l, &op, fd, buf, len, off, idx);
	if (rc == 0)
		rc = ol_loop_run(l);
	return rc ? rc : f.calls == 1 ? f.res : -EPROTO;
}

static void
test_fixed(void)
{
	enum { FLEN = 256 * 1024, BLEN = 128 * 1024 };
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[512];
	snprintf(path, sizeof(path), "%s/test_loop_fixed.XXXXXX", tmp);
	int wfd = mkstemp(path);
	uint8_t *pat = malloc(FLEN), *buf = NULL;
	struct ol_loop *l = NULL;
	if (wfd < 0 || !pat || posix_memalign((void **)&buf, 4096, BLEN) || ol_loop_new(8, &l)) {
		ok(0, "temp file, buffers and loop");
		goto out;
	}
	for (size_t i = 0; i < FLEN; i++)
		pat[i] = (uint8_t)(i * 131 + (i >> 12));
	ok(write(wfd, pat, FLEN) == FLEN && fsync(wfd) == 0, "a 256 KiB file written");
	int fd = open(path, O_RDONLY | O_DIRECT); /* as the KV tier reads its segments */
	if (fd < 0)
		fd = open(path, O_RDONLY); /* a file system without O_DIRECT (tmpfs) */
	int idx = ol_loop_buf_register(l, buf, BLEN);
	if (idx == -EINVAL || idx == -EOPNOTSUPP) {
		ok(1, "# SKIP this kernel has no sparse fixed-buffer tables (%d)", idx);
		close(fd);
		goto out;
	}
	ok(idx >= 0, "a 128 KiB buffer registered with the ring: slot %d", idx);
	memset(buf, 0, BLEN);
	int r = read_fixed_once(l, fd, buf + 4096, 64 * 1024, 64 * 1024, idx);
	ok(r == 64 * 1024 && memcmp(buf + 4096, pat + 64 * 1024, 64 * 1024) == 0,
	   "read_fixed of 64 KiB at 64 KiB into it at +4 KiB: exact (%d)", r);
	r = read_fixed_once(l, fd, buf, BLEN, FLEN - 64 * 1024, idx);
	ok(r == 64 * 1024 && memcmp(buf, pat + FLEN - 64 * 1024, 64 * 1024) == 0,
	   "a read past the end is short, with the bytes there (%d)", r);
	uint8_t *out = NULL;
	if (posix_memalign((void **)&out, 4096, 8192) == 0) {
		r = read_fixed_once(l, fd, out, 4096, 0, idx);
		ok(r == -EFAULT, "a read into memory outside the registered buffer fails (%d)", r);
		free(out);
	}
	int slots[256], n = 0, last = 0;
	while (n < 256 && (last = ol_loop_buf_register(l, buf, BLEN)) >= 0)
		slots[n++] = last;
	ok(n == 255 && last == -ENOSPC, "255 more slots, then -ENOSPC (%d, %d)", n, last);
	ol_loop_buf_unregister(l, idx);
	r = read_fixed_once(l, fd, buf, 4096, 0, idx);
	ok(r < 0, "a read into an unregistered slot fails (%d)", r);
	int again = ol_loop_buf_register(l, buf, BLEN);
	ok(again == idx, "its slot is free for the next registration (%d)", again);
	ol_loop_buf_unregister(l, again);
	for (int i = 0; i < n; i++)
		ol_loop_buf_unregister(l, slots[i]);
	ok(ol_loop_buf_register(l, buf, 4096) >= 0, "all slots free again");
	close(fd);
out:
	if (wfd >= 0) {
		close(wfd);
		unlink(path);
	}
	ol_loop_free(l); /* the ring's table goes with it */
	free(buf);
	free(pat);
}

int
main(void)
{
	struct ol_loop *probe;
	int rc = ol_loop_new(0, &probe);
	if (rc) {
		printf("1..0 # SKIP no usable io_uring here: %s\n", strerror(-rc));
		return 77;
	}
	ol_loop_free(probe);
	signal(SIGPIPE, SIG_IGN);
	test_timers();
	test_messages();
	test_buffers();
	test_pinned();
	test_waitall();
	test_poll();
	test_fixed();
	test_conn_life();
	test_client_ops();
	test_many();
	tap_done();
}
