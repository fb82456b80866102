/* io/loop.c - the per-core event loop (see loop.h for the contract). */
#include "io/loop.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX  64
#define FIXED_MAX 256 /* fixed-buffer slots of a ring's table */

struct ol_loop {
	struct io_uring ring;
	int efd;
	uint64_t efd_val;
	struct ol_loop_op efd_op;
	_Atomic(struct ol_loop_msg *) inbox;
	struct ol_loop_msg stop_msg;
	bool quit, have_thread, efd_armed;
	int cpu; /* pinned CPU, -1 = none */
	pthread_t thread;
	uint64_t now_ns;
	struct ol_loop_timer **heap;
	unsigned n_heap, cap_heap;
	void *pool[POOL_MAX];
	unsigned n_pool;
	int fixed; /* the ring's fixed-buffer table: 0 not made yet, 1 made, -errno unavailable */
	uint16_t fixed_free[FIXED_MAX]; /* its free slots (a stack) */
	unsigned n_fixed_free;
	struct ol_loop_stats st;
};

static _Thread_local struct ol_loop *cur_loop;

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the ops a loop needs; on a kernel without one, ol_loop_new answers -EOPNOTSUPP */
static int
probe_ops(struct io_uring *ring)
{
	static const int need[] = {IORING_OP_ACCEPT,	   IORING_OP_CONNECT, IORING_OP_SEND,
				   IORING_OP_RECV,	   IORING_OP_FSYNC,   IORING_OP_READ,
				   IORING_OP_ASYNC_CANCEL, IORING_OP_SENDMSG};
	struct io_uring_probe *p = io_uring_get_probe_ring(ring);
	if (!p)
		return -EOPNOTSUPP;
	int rc = 0;
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!io_uring_opcode_supported(p, need[i]))
			rc = -EOPNOTSUPP;
	io_uring_free_probe(p);
	return rc;
}

static struct io_uring_sqe *
get_sqe(struct ol_loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
	if (!sqe && io_uring_submit(&l->ring) >= 0)
		sqe = io_uring_get_sqe(&l->ring);
	return sqe;
}

static void on_efd(struct ol_loop *l, void *arg, int res);

static int
arm_efd(struct ol_loop *l)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	l->efd_op.cb = on_efd;
	l->efd_op.arg = NULL;
	io_uring_prep_read(sqe, l->efd, &l->efd_val, sizeof(l->efd_val), 0);
	io_uring_sqe_set_data(sqe, &l->efd_op);
	l->efd_armed = true;
	return 0;
}

static void
on_stop_msg(struct ol_loop *l, void *arg, int res)
{
	(void)arg;
	(void)res;
	l->quit = true;
}

int
ol_loop_new(unsigned entries, struct ol_loop **out)
{
	*out = NULL;
	struct ol_loop *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	/* Completions run their kernel task work at the loop's next io_uring_enter, instead of
	 * interrupting the loop thread wherever it is (an IPI and a trip through the kernel per
	 * completion batch); the loop enters at the end of every turn anyway. Kernels before
	 * 5.19 lack the flags: then without. */
	int rc = io_uring_queue_init(entries ? entries : 256, &l->ring,
				     IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(entries ? entries : 256, &l->ring, 0);
	if (rc) {
		free(l);
		return rc;
	}
	rc = probe_ops(&l->ring);
	if (rc)
		goto fail_ring;
	l->efd = eventfd(0, EFD_CLOEXEC);
	if (l->efd < 0) {
		rc = -errno;
		goto fail_ring;
	}
	atomic_init(&l->inbox, NULL);
	l->cpu = -1;
	l->stop_msg.fn = on_stop_msg;
	l->now_ns = mono_ns();
	*out = l;
	return 0;
fail_ring:
	io_uring_queue_exit(&l->ring);
	free(l);
	return rc;
}

/* ol_loop_new_on's maker: a short-lived thread pinned to the loop's CPU makes the loop, so
 * the kernel allocates the ring there; the caller's own mask is never touched. */
struct maker {
	unsigned entries;
	int rc;
	struct ol_loop *l;
};

static void *
maker_main(void *arg)
{
	struct maker *m = arg;
	m->rc = ol_loop_new(m->entries, &m->l);
	return NULL;
}

int
ol_loop_new_on(unsigned entries, int cpu, struct ol_loop **out)
{
	cpu_set_t mine, one;
	pthread_attr_t attr;
	pthread_t t;
	struct maker m = {entries, -EINVAL, NULL};
	*out = NULL;
	if (cpu < 0)
		return ol_loop_new(entries, out);
	if (cpu >= CPU_SETSIZE || pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine) ||
	    !CPU_ISSET(cpu, &mine))
		return -EINVAL;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	int rc = -pthread_attr_init(&attr);
	if (rc)
		return rc;
	rc = -pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	if (rc == 0)
		rc = -pthread_create(&t, &attr, maker_main, &m);
	pthread_attr_destroy(&attr);
	if (rc)
		return rc;
	pthread_join(t, NULL);
	if (m.rc == 0)
		m.l->cpu = cpu;
	*out = m.l;
	return m.rc;
}

int
ol_loop_cpu(const struct ol_loop *l)
{
	return l->cpu;
}

void
ol_loop_free(struct ol_loop *l)
{
	if (!l)
		return;
	io_uring_queue_exit(&l->ring);
	close(l->efd);
	for (unsigned i = 0; i < l->n_pool; i++)
		free(l->pool[i]);
	free(l->heap);
	free(l);
}

struct ol_loop *
ol_loop_current(void)
{
	return cur_loop;
}

uint64_t
ol_loop_now_ns(struct ol_loop *l)
{
	return cur_loop == l ? l->now_ns : mono_ns();
}

/* ---- messages ---- */

int
ol_loop_post(struct ol_loop *l, struct ol_loop_msg *m)
{
	struct ol_loop_msg *head = atomic_load_explicit(&l->inbox, memory_order_relaxed);
	do {
		m->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&l->inbox, &head, m, memory_order_release,
							memory_order_relaxed));
	if (head)
		return 0; /* not the first: whoever made it non-empty woke the loop */
	uint64_t one = 1;
	if (write(l->efd, &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

static void
run_inbox(struct ol_loop *l)
{
	struct ol_loop_msg *m = atomic_exchange_explicit(&l->inbox, NULL, memory_order_acquire);
	struct ol_loop_msg *fifo = NULL;
	while (m) { /* the stack holds newest first: reverse it into posting order */
		struct ol_loop_msg *next = m->next;
		m->next = fifo;
		fifo = m;
		m = next;
	}
	while (fifo) {
		struct ol_loop_msg *next = fifo->next;
		l->st.msgs_run++;
		fifo->fn(l, fifo->arg, 0);
		fifo = next;
	}
}

static void
on_efd(struct ol_loop *l, void *arg, int res)
{
	(void)arg;
	(void)res;
	l->efd_armed = false;
	run_inbox(l);
	if (!l->quit)
		arm_efd(l);
}

/* ---- timers: a binary min-heap on when_ns ---- */

static void
heap_set(struct ol_loop *l, unsigned i, struct ol_loop_timer *t)
{
	l->heap[i] = t;
	t->idx = i + 1;
}

static void
heap_up(struct ol_loop *l, unsigned i)
{
	struct ol_loop_timer *t = l->heap[i];
	while (i > 0) {
		unsigned p = (i - 1) / 2;
		if (l->heap[p]->when_ns <= t->when_ns)
			break;
		heap_set(l, i, l->heap[p]);
		i = p;
	}
	heap_set(l, i, t);
}

static void
heap_down(struct ol_loop *l, unsigned i)
{
	struct ol_loop_timer *t = l->heap[i];
	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= l->n_heap)
			break;
		if (c + 1 < l->n_heap && l->heap[c + 1]->when_ns < l->heap[c]->when_ns)
			c++;
		if (l->heap[c]->when_ns >= t->when_ns)
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

void
ol_loop_timer_cancel(struct ol_loop *l, struct ol_loop_timer *t)
{
	if (!t->idx)
		return;
	unsigned i = t->idx - 1;
	t->idx = 0;
	struct ol_loop_timer *last = l->heap[--l->n_heap];
	if (i == l->n_heap)
		return;
	heap_set(l, i, last);
	heap_up(l, i);
	heap_down(l, last->idx - 1);
}

int
ol_loop_timer_arm(struct ol_loop *l, struct ol_loop_timer *t, uint64_t delay_ns)
{
	ol_loop_timer_cancel(l, t);
	if (l->n_heap == l->cap_heap) {
		unsigned cap = l->cap_heap ? 2 * l->cap_heap : 64;
		struct ol_loop_timer **h = realloc(l->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		l->heap = h;
		l->cap_heap = cap;
	}
	/* the fresh clock, not the iteration's: "not before now + delay" must hold */
	t->when_ns = mono_ns() + delay_ns;
	heap_set(l, l->n_heap++, t);
	heap_up(l, l->n_heap - 1);
	return 0;
}

static void
run_timers(struct ol_loop *l)
{
	while (l->n_heap && l->heap[0]->when_ns <= l->now_ns) {
		struct ol_loop_timer *t = l->heap[0];
		ol_loop_timer_cancel(l, t);
		l->st.timers_fired++;
		t->cb(l, t->arg, 0);
	}
}

/* ---- ring ops ---- */

static int
queue_op(struct ol_loop *l, struct ol_loop_op *op, struct io_uring_sqe *sqe)
{
	io_uring_sqe_set_data(sqe, op);
	return 0;
}

int
ol_loop_accept(struct ol_loop *l, struct ol_loop_op *op, int listen_fd)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_accept(sqe, listen_fd, NULL, NULL, SOCK_CLOEXEC);
	return queue_op(l, op, sqe);
}

int
ol_loop_connect(struct ol_loop *l, struct ol_loop_op *op, int fd, const struct sockaddr *sa,
		socklen_t len)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_connect(sqe, fd, sa, len);
	return queue_op(l, op, sqe);
}

int
ol_loop_recv(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_recv(sqe, fd, buf, len, 0);
	return queue_op(l, op, sqe);
}

int
ol_loop_recv_all(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_recv(sqe, fd, buf, len, MSG_WAITALL);
	return queue_op(l, op, sqe);
}

static int
prep_send(struct ol_loop *l, struct ol_loop_op *op)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_send(sqe, op->fd, op->buf + op->done, op->len - op->done, MSG_NOSIGNAL);
	return queue_op(l, op, sqe);
}

int
ol_loop_send(struct ol_loop *l, struct ol_loop_op *op, int fd, const void *buf, size_t len)
{
	op->all = false;
	op->fd = fd;
	op->buf = buf;
	op->len = len;
	op->done = 0;
	return prep_send(l, op);
}

int
ol_loop_send_all(struct ol_loop *l, struct ol_loop_op *op, int fd, const void *buf, size_t len)
{
	int rc = ol_loop_send(l, op, fd, buf, len);
	op->all = true;
	return rc;
}

int
ol_loop_sendmsg(struct ol_loop *l, struct ol_loop_op *op, int fd, const struct msghdr *msg)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_sendmsg(sqe, fd, msg, MSG_NOSIGNAL | MSG_WAITALL);
	return queue_op(l, op, sqe);
}

int
ol_loop_fsync(struct ol_loop *l, struct ol_loop_op *op, int fd, bool datasync)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	return queue_op(l, op, sqe);
}

int
ol_loop_read(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len, uint64_t off)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_read(sqe, fd, buf, len > (1u << 30) ? (1u << 30) : (unsigned)len, off);
	return queue_op(l, op, sqe);
}

int
ol_loop_read_fixed(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len,
		   uint64_t off, int idx)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_read_fixed(sqe, fd, buf, len > (1u << 30) ? (1u << 30) : (unsigned)len, off,
				 idx);
	return queue_op(l, op, sqe);
}

/* Make the ring's (sparse) fixed-buffer table at the first registration. */
static int
fixed_init(struct ol_loop *l)
{
	if (l->fixed == 0) {
		int rc = io_uring_register_buffers_sparse(&l->ring, FIXED_MAX);
		l->fixed = rc < 0 ? rc : 1;
		for (unsigned i = 0; rc == 0 && i < FIXED_MAX; i++)
			l->fixed_free[i] = (uint16_t)(FIXED_MAX - 1 - i);
		l->n_fixed_free = rc == 0 ? FIXED_MAX : 0;
	}
	return l->fixed < 0 ? l->fixed : 0;
}

int
ol_loop_buf_register(struct ol_loop *l, void *buf, size_t len)
{
	int rc = fixed_init(l);
	if (rc)
		return rc;
	if (l->n_fixed_free == 0)
		return -ENOSPC;
	unsigned idx = l->fixed_free[--l->n_fixed_free];
	struct iovec iov = {buf, len};
	rc = io_uring_register_buffers_update_tag(&l->ring, idx, &iov, NULL, 1);
	if (rc == 1)
		return (int)idx;
	l->fixed_free[l->n_fixed_free++] = (uint16_t)idx;
	return rc < 0 ? rc : -EIO;
}

void
ol_loop_buf_unregister(struct ol_loop *l, int idx)
{
	if (idx < 0 || idx >= FIXED_MAX || l->fixed != 1)
		return;
	struct iovec iov = {NULL, 0}; /* an empty slot */
	(void)io_uring_register_buffers_update_tag(&l->ring, (unsigned)idx, &iov, NULL, 1);
	l->fixed_free[l->n_fixed_free++] = (uint16_t)idx;
}

int
ol_loop_poll(struct ol_loop *l, struct ol_loop_op *op, int fd, unsigned events)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	op->all = false;
	io_uring_prep_poll_add(sqe, fd, events);
	return queue_op(l, op, sqe);
}

int
ol_loop_cancel(struct ol_loop *l, struct ol_loop_op *op)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel(sqe, op, 0);
	io_uring_sqe_set_data(sqe, NULL); /* its own completion is not reported */
	return 0;
}

static void
complete(struct ol_loop *l, struct ol_loop_op *op, int res)
{
	if (op->all && res > 0) {
		op->done += (size_t)res;
		if (op->done < op->len) {
			int rc = prep_send(l, op);
			if (!rc)
				return;
			res = rc;
		} else {
			res = (int)op->len;
		}
	} else if (op->all && res == 0) {
		res = -EPIPE;
	}
	l->st.ops_done++;
	op->cb(l, op->arg, res);
}

/* ---- the loop ---- */

/* the time to the first timer (has: there is one) */
static struct __kernel_timespec
until_timer(struct ol_loop *l)
{
	uint64_t when = l->heap[0]->when_ns, now = mono_ns();
	uint64_t d = when > now ? when - now : 0;
	return (struct __kernel_timespec){.tv_sec = (long long)(d / 1000000000u),
					  .tv_nsec = (long long)(d % 1000000000u)};
}

/* Submit what is queued and wait for a completion or the first timer. With requests queued
 * and nothing to reap, one io_uring_enter does both (a loop turn that queued a send and a
 * receive cost two: on this VM every syscall pays the hypervisor's interrupt enabling); with
 * nothing queued the wait looks at the completion ring first and enters only to sleep. */
static int
submit_wait(struct ol_loop *l)
{
	struct io_uring_cqe *cqe;
	int rc;
	if (io_uring_sq_ready(&l->ring) && !io_uring_cq_ready(&l->ring)) {
		if (l->n_heap) {
			struct __kernel_timespec ts = until_timer(l);
			rc = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, &ts, NULL);
		} else {
			rc = io_uring_submit_and_wait(&l->ring, 1);
		}
		/* -EBUSY / -EAGAIN: the completion ring is full: reap, then submit again */
		return rc >= 0 || rc == -ETIME || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN
			   ? 0
			   : rc;
	}
	rc = io_uring_submit(&l->ring);
	if (rc < 0 && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN)
		return rc;
	if (l->n_heap) {
		struct __kernel_timespec ts = until_timer(l);
		rc = io_uring_wait_cqe_timeout(&l->ring, &cqe, &ts);
	} else {
		rc = io_uring_wait_cqe(&l->ring, &cqe);
	}
	if (rc == -ETIME || rc == -EINTR)
		return 0;
	return rc;
}

static int
reap(struct ol_loop *l)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	/* one batch at a time: a callback may submit, which must not disturb this walk */
	struct {
		struct ol_loop_op *op;
		int res;
	} done[64];
	io_uring_for_each_cqe(&l->ring, head, cqe)
	{
		if (n == 64)
			break;
		void *ud = io_uring_cqe_get_data(cqe);
		if (ud && cqe->user_data != LIBURING_UDATA_TIMEOUT) {
			done[n].op = ud;
			done[n].res = cqe->res;
			n++;
		}
		io_uring_cq_advance(&l->ring, 1);
	}
	l->now_ns = mono_ns();
	for (unsigned i = 0; i < n; i++)
		complete(l, done[i].op, done[i].res);
	return (int)n;
}

int
ol_loop_run(struct ol_loop *l)
{
	int rc = 0;
	cur_loop = l;
	l->quit = false;
	if (!l->efd_armed && (rc = arm_efd(l)))
		goto out;
	run_inbox(l); /* messages posted before the loop ran */
	while (!l->quit) {
		rc = submit_wait(l);
		if (rc)
			goto out;
		l->st.wakeups++;
		while (reap(l) == 64)
			;
		run_timers(l);
	}
	rc = io_uring_submit(&l->ring) < 0 ? -EIO : 0;
out:
	cur_loop = NULL;
	return rc < 0 ? rc : 0;
}

void
ol_loop_quit(struct ol_loop *l)
{
	l->quit = true;
}

static void *
loop_thread(void *arg)
{
	ol_loop_run(arg);
	return NULL;
}

int
ol_loop_start(struct ol_loop *l, const char *name)
{
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr);
	if (rc)
		return -rc;
	if (l->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(l->cpu, &one);
		rc = pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	}
	if (rc == 0)
		rc = pthread_create(&l->thread, &attr, loop_thread, l);
	pthread_attr_destroy(&attr);
	if (rc)
		return -rc;
	if (name) {
		char n[16];
		snprintf(n, sizeof(n), "%s", name);
		pthread_setname_np(l->thread, n);
	}
	l->have_thread = true;
	return 0;
}

void
ol_loop_stop(struct ol_loop *l)
{
	ol_loop_post(l, &l->stop_msg);
	if (l->have_thread) {
		pthread_join(l->thread, NULL);
		l->have_thread = false;
	}
}

/* ---- buffers ---- */

void *
ol_loop_buf_get(struct ol_loop *l)
{
	if (l->n_pool)
		return l->pool[--l->n_pool];
	return malloc(OL_LOOP_BUF);
}

void
ol_loop_buf_put(struct ol_loop *l, void *buf)
{
	if (!buf)
		return;
	if (l->n_pool < POOL_MAX)
		l->pool[l->n_pool++] = buf;
	else
		free(buf);
}

void
ol_loop_stats(const struct ol_loop *l, struct ol_loop_stats *out)
{
	*out = l->st;
}
