/* io/loop.h - the per-core event loop: one thread, one io_uring, its timers, its buffers and a
 * queue of messages from other threads.
 *
 * Library grade (the daemon and libopenlake may both use it): no logging, no abort, 0 or -errno
 * results, the caller owns every struct it passes in (ops, timers, messages live in the
 * caller's objects; the loop keeps pointers to them until their callback has run).
 *
 * Threads: a loop belongs to the thread that runs it (ol_loop_run, or the thread
 * ol_loop_start makes). Every function here must be called on that thread, except
 * ol_loop_post, ol_loop_stop and ol_loop_free (after the loop stopped), which any thread may
 * call. Callbacks run on the loop's thread, one at a time; a callback may start new ops, arm
 * timers and post messages.
 *
 * Ring ops (accept, connect, recv, send, sendmsg, read, fsync): the op struct must stay valid and
 * untouched until its callback ran, which happens exactly once per started op, with the kernel's
 * result (bytes, a new fd, 0, or -errno; -ECANCELED after ol_loop_cancel). A send may be short, as
 * with send(2); ol_loop_send_all resubmits until all bytes went or an error.
 *
 * The ring is made with IORING_SETUP_COOP_TASKRUN (where the kernel has it): the kernel's
 * share of a completion runs when the loop thread next enters the ring, never by interrupting
 * it.
 *
 * Timers: a min-heap of deadlines on the monotonic clock; the loop waits on its ring with the
 * earliest deadline as the timeout (io_uring_wait_cqe_timeout: EXT_ARG when the kernel has it,
 * else liburing's timeout SQE). A timer never fires before its deadline.
 *
 * Messages: an intrusive lock-free MPSC stack (taken whole and reversed by the loop, so the
 * messages of one sender run in the order it posted them, each exactly once) plus an eventfd
 * the ring keeps a read armed on. A producer writes the eventfd only when it made the queue
 * non-empty. (IORING_OP_MSG_RING would need a ring on the sender's side too; posts come from
 * any thread, so the eventfd is the one path.) */
#ifndef OL_IO_LOOP_H
#define OL_IO_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ol_loop;

/* A ring op's completion: res as the kernel reports it. */
typedef void (*ol_loop_cb)(struct ol_loop *l, void *arg, int res);

struct ol_loop_op {
	ol_loop_cb cb;
	void *arg;
	/* private */
	int fd;
	const char *buf;
	size_t len, done;
	bool all;
};

struct ol_loop_timer {
	uint64_t when_ns; /* monotonic deadline; set by ol_loop_timer_arm */
	ol_loop_cb cb;	  /* res = 0 */
	void *arg;
	unsigned idx; /* private: heap slot + 1, 0 = not armed */
};

/* A message to a loop's thread; fn(l, arg, 0) runs there. */
struct ol_loop_msg {
	ol_loop_cb fn;
	void *arg;
	struct ol_loop_msg *next; /* private */
};

/* Make a loop with a ring of `entries` SQEs (0 = 256). Probes the ops it needs (accept,
 * connect, send, recv, fsync, async cancel): -EOPNOTSUPP on a kernel without them, -ENOSYS or
 * -EPERM where io_uring is off, -ENOMEM. Any thread; the loop then belongs to whoever runs it. */
int ol_loop_new(unsigned entries, struct ol_loop **out);

/* ol_loop_new for a loop that will run pinned on CPU cpu (cpu < 0: as ol_loop_new): a
 * short-lived thread pinned to cpu makes the ring and the loop, so the kernel allocates the
 * ring on cpu's NUMA node (the caller's own affinity is not touched); ol_loop_start's thread
 * then runs on cpu only, and what it allocates and touches first (the buffer pool, the
 * caller's per-connection memory) lands on that node too (first touch, the kernel's default
 * local policy). -EINVAL when cpu is outside the caller's affinity mask; else as ol_loop_new
 * (or -errno from pthread_create). */
int ol_loop_new_on(unsigned entries, int cpu, struct ol_loop **out);
/* The CPU a loop was made for (ol_loop_new_on), or -1. Any thread. */
int ol_loop_cpu(const struct ol_loop *l);

/* Free a loop that is not running. Ops still in flight are dropped without their callbacks. */
void ol_loop_free(struct ol_loop *l);

/* Run on the calling thread until ol_loop_stop; returns 0, or -errno if the ring failed. */
int ol_loop_run(struct ol_loop *l);

/* Run the loop on a new thread named `name` (pinned to the loop's CPU, when it has one, from
 * its first instruction). 0 or -errno. */
int ol_loop_start(struct ol_loop *l, const char *name);

/* Ask the loop to return from ol_loop_run after the current callbacks; with a thread from
 * ol_loop_start, also join it. Any thread but the loop's own (use ol_loop_quit there). */
void ol_loop_stop(struct ol_loop *l);
/* From a callback on the loop's thread: return from ol_loop_run soon. */
void ol_loop_quit(struct ol_loop *l);

/* The loop the calling thread runs, or NULL. */
struct ol_loop *ol_loop_current(void);

/* Monotonic time (ns), read once per loop iteration when called from the loop's thread. */
uint64_t ol_loop_now_ns(struct ol_loop *l);

/* Queue m for the loop's thread. Any thread. 0, or -errno when the eventfd write failed. */
int ol_loop_post(struct ol_loop *l, struct ol_loop_msg *m);

/* Timers (loop thread): arm fires t->cb once, not before now + delay_ns; arming an armed
 * timer moves it. cancel of a timer that is not armed is a no-op. 0 or -ENOMEM. */
int ol_loop_timer_arm(struct ol_loop *l, struct ol_loop_timer *t, uint64_t delay_ns);
void ol_loop_timer_cancel(struct ol_loop *l, struct ol_loop_timer *t);

/* Ring ops (loop thread). 0 once queued (the callback will run), -EBUSY if the ring has no
 * free SQE even after a submit. op->cb and op->arg must be set by the caller. */
int ol_loop_accept(struct ol_loop *l, struct ol_loop_op *op, int listen_fd);
int ol_loop_connect(struct ol_loop *l, struct ol_loop_op *op, int fd, const struct sockaddr *sa,
		    socklen_t len);
int ol_loop_recv(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len);
int ol_loop_send(struct ol_loop *l, struct ol_loop_op *op, int fd, const void *buf, size_t len);
/* Send all len bytes (resubmitting short sends); res = len or -errno. */
int ol_loop_send_all(struct ol_loop *l, struct ol_loop_op *op, int fd, const void *buf, size_t len);
/* recv with MSG_WAITALL: completes once len bytes arrived (the kernel retries inside the ring,
 * one completion for a whole value), with fewer only at EOF, an error or a cancel; res = bytes
 * or -errno. A kernel without MSG_WAITALL on the ring completes short, as ol_loop_recv. */
int ol_loop_recv_all(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len);
/* sendmsg(2) of msg's iovecs (gather: a header and a value in one op, one segment), with
 * MSG_WAITALL: normally complete; the caller still handles a short count (older kernels, a
 * cancel after part went). msg and its iovecs must stay valid until the callback. */
int ol_loop_sendmsg(struct ol_loop *l, struct ol_loop_op *op, int fd, const struct msghdr *msg);
int ol_loop_fsync(struct ol_loop *l, struct ol_loop_op *op, int fd, bool datasync);
/* pread(2) of up to len bytes at off of fd (a file: an O_DIRECT one needs buf, len and off
 * aligned to its block size); res = bytes read (may be short; 0 at the end) or -errno. A read
 * the device has started is not cancelled: its callback runs when it completes. */
int ol_loop_read(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len,
		 uint64_t off);
/* Fixed buffers (loop thread): a buffer registered with the loop's ring is pinned once, so a
 * read into it (ol_loop_read_fixed) skips the kernel's per-I/O page lookup and pinning, which
 * an O_DIRECT ol_loop_read pays every time. register returns the buffer's slot (>= 0), or
 * -ENOSPC (the ring's 256 slots are taken), -ENOMEM (e.g. past RLIMIT_MEMLOCK, where the
 * kernel counts pinned pages against it) or another -errno (a kernel without sparse buffer
 * tables, before 5.19): then read with ol_loop_read. unregister frees the slot (idx < 0 is a
 * no-op); the caller must have no read into it in flight, and unregisters before it frees
 * or reuses the memory. read_fixed: as ol_loop_read, with [buf, buf + len) inside the buffer
 * registered at idx. */
int ol_loop_buf_register(struct ol_loop *l, void *buf, size_t len);
void ol_loop_buf_unregister(struct ol_loop *l, int idx);
int ol_loop_read_fixed(struct ol_loop *l, struct ol_loop_op *op, int fd, void *buf, size_t len,
		       uint64_t off, int idx);
/* poll(2) of fd for events (POLLIN, ...), one shot: res = the events that are ready, or
 * -errno. For a descriptor that is not a socket or a file, e.g. a library's wakeup fd (UCX's
 * worker event fd: node/ucx.c progresses its worker on the loop this way). */
int ol_loop_poll(struct ol_loop *l, struct ol_loop_op *op, int fd, unsigned events);
/* Cancel a started op: its callback still runs once, with -ECANCELED (or its result, if it
 * had completed). 0 or -EBUSY. */
int ol_loop_cancel(struct ol_loop *l, struct ol_loop_op *op);

/* The loop's buffer pool (loop thread, no locks): buffers of OL_LOOP_BUF bytes; up to 64
 * cached, the rest freed. get: NULL on out-of-memory. */
#define OL_LOOP_BUF (64u * 1024)
void *ol_loop_buf_get(struct ol_loop *l);
void ol_loop_buf_put(struct ol_loop *l, void *buf);

/* Counters for tests and metrics (loop thread, or any thread after the loop stopped). */
struct ol_loop_stats {
	uint64_t ops_done, timers_fired, msgs_run, wakeups;
};
void ol_loop_stats(const struct ol_loop *l, struct ol_loop_stats *out);

#endif
