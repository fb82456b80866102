/* io/uring.c - batched file I/O on a per-thread io_uring, with a synchronous fallback. The one
 * ring of the daemon's file I/O: the object engine's shard reads, writes and fsyncs. */
#include "io/io.h"

#include "base/log.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING_DEPTH 64

struct thread_ring {
	struct io_uring ring;
	bool ok;
	pid_t pid; /* a forked child must not share its parent's ring */
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static _Atomic bool ring_disabled; /* set once setup failed: do not retry on every call */

/* Rings are unmapped and mapped with liburing's own syscalls, which ThreadSanitizer does not
 * see: a new thread's ring mapped where an exited thread's was looked like a race with the old
 * thread's accesses. Under TSan, a ring's exit releases and a ring's setup acquires one address:
 * the order the kernel gives. Nothing in other builds (no lock: a forked child sets up a ring). */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
static char ring_map_order;
#define RING_MAPPING()	__tsan_acquire(&ring_map_order)
#define RING_UNMAPPED() __tsan_release(&ring_map_order)
#else
#define RING_MAPPING()	((void)0)
#define RING_UNMAPPED() ((void)0)
#endif

static int
ring_init(struct io_uring *ring)
{
	RING_MAPPING();
	return io_uring_queue_init(RING_DEPTH, ring, 0);
}

static void
ring_exit(struct io_uring *ring)
{
	io_uring_queue_exit(ring);
	RING_UNMAPPED();
}

/* Threads come and go (one per HTTP connection): a thread's ring goes with it. */
static void
ring_free(void *p)
{
	struct thread_ring *r = p;
	if (r->ok && r->pid == getpid())
		ring_exit(&r->ring);
	free(r);
}

static void
ring_key_init(void)
{
	if (pthread_key_create(&ring_key, ring_free))
		ol_die("io: pthread_key_create failed");
	ring_disabled = getenv("OL_IO_NO_URING") != NULL; /* tests of the fallback */
}

static struct thread_ring *
thread_ring(void)
{
	pthread_once(&ring_once, ring_key_init);
	struct thread_ring *r = pthread_getspecific(ring_key);
	if (r && r->ok && r->pid != getpid()) {
		ring_exit(&r->ring); /* the child's mapping and fd only */
		r->ok = false;
		r->pid = getpid();
		r->ok = ring_init(&r->ring) == 0;
	}
	if (r || ring_disabled)
		return r && r->ok ? r : NULL;
	r = ol_xcalloc(1, sizeof(*r));
	int rc = ring_init(&r->ring);
	r->ok = rc == 0;
	r->pid = getpid();
	if (rc) {
		ol_info("io: io_uring unavailable (%d), using synchronous file I/O", rc);
		ring_disabled = true;
	}
	pthread_setspecific(ring_key, r);
	return r->ok ? r : NULL;
}

static size_t
op_len(const struct ol_io_op *op)
{
	size_t len = 0;
	if (op->niov == 0)
		return op->len;
	for (int i = 0; i < op->niov; i++)
		len += op->iov[i].iov_len;
	return len;
}

/* The rest of a transfer after its first done bytes, synchronously (the fallback, and the rare
 * partial transfer of a vectored op). Reads stop at EOF. */
static void
op_sync(struct ol_io_op *op, size_t done)
{
	if (op->opcode == OL_IO_FSYNC || op->opcode == OL_IO_FDATASYNC) {
		int rc = op->opcode == OL_IO_FSYNC ? fsync(op->fd) : fdatasync(op->fd);
		op->res = rc ? -errno : 0;
		return;
	}
	struct iovec v[OL_IO_MAX_IOV];
	int nv = op->niov ? op->niov : 1;
	if (op->niov)
		memcpy(v, op->iov, sizeof(v[0]) * (size_t)nv);
	else
		v[0] = (struct iovec){op->buf, op->len};
	size_t want = op_len(op);
	while (done < want) {
		struct iovec rest[OL_IO_MAX_IOV];
		int nr = 0;
		size_t skip = done;
		for (int i = 0; i < nv; i++) {
			if (skip >= v[i].iov_len) {
				skip -= v[i].iov_len;
				continue;
			}
			rest[nr++] =
			    (struct iovec){(char *)v[i].iov_base + skip, v[i].iov_len - skip};
			skip = 0;
		}
		off_t at = (off_t)(op->off + done);
		ssize_t n = op->opcode == OL_IO_READ ? preadv(op->fd, rest, nr, at)
						     : pwritev(op->fd, rest, nr, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			op->res = -errno;
			return;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	op->res = (ssize_t)done;
}

static void
prep(struct io_uring_sqe *sqe, struct ol_io_op *op, size_t done)
{
	bool rd = op->opcode == OL_IO_READ;
	switch (op->opcode) {
	case OL_IO_READ:
	case OL_IO_WRITE:
		if (op->niov && rd)
			io_uring_prep_readv(sqe, op->fd, op->iov, (unsigned)op->niov, op->off);
		else if (op->niov)
			io_uring_prep_writev(sqe, op->fd, op->iov, (unsigned)op->niov, op->off);
		else if (rd)
			io_uring_prep_read(sqe, op->fd, (char *)op->buf + done,
					   (unsigned)(op->len - done), op->off + done);
		else
			io_uring_prep_write(sqe, op->fd, (char *)op->buf + done,
					    (unsigned)(op->len - done), op->off + done);
		break;
	default:
		io_uring_prep_fsync(sqe, op->fd,
				    op->opcode == OL_IO_FDATASYNC ? IORING_FSYNC_DATASYNC : 0);
	}
	io_uring_sqe_set_data(sqe, op);
}

/* One completion of op (res of its CQE): 1 when the op still needs an SQE (a partial transfer
 * of a plain buffer continues on the ring), 0 when it is done. */
static int
complete(struct ol_io_op *op, int res)
{
	if (res < 0 || op->opcode >= OL_IO_FSYNC) {
		op->res = res < 0 ? res : 0;
		return 0;
	}
	op->res += res;
	size_t want = op_len(op);
	if (res == 0 || (size_t)op->res >= want)
		return 0;
	if (op->niov) { /* rare (a short write at ENOSPC-like edges): finish it here */
		op_sync(op, (size_t)op->res);
		return 0;
	}
	return 1;
}

/* Submit ops[0..n) (n <= RING_DEPTH) and reap them all. On a failure of the ring itself the
 * ops not completed get its -errno. */
static int
run_ring(struct io_uring *ring, struct ol_io_op *ops, unsigned n)
{
	unsigned pending = 0;
	bool open[RING_DEPTH] = {false};
	for (unsigned i = 0; i < n; i++) {
		ops[i].res = 0;
		if (ops[i].fd < 0) {
			ops[i].res = -EBADF;
			continue;
		}
		prep(io_uring_get_sqe(ring), &ops[i], 0);
		open[i] = true;
		pending++;
	}
	while (pending) {
		/* all of them in one syscall (a stripe's N shards), as long as none is partial */
		int rc = io_uring_submit_and_wait(ring, pending);
		if (rc < 0 && rc != -EINTR) {
			for (unsigned i = 0; i < n; i++)
				if (open[i])
					ops[i].res = rc;
			return rc;
		}
		struct io_uring_cqe *cqe;
		while (io_uring_peek_cqe(ring, &cqe) == 0) {
			struct ol_io_op *op = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(ring, cqe);
			pending--;
			if (complete(op, res)) {
				prep(io_uring_get_sqe(ring), op, (size_t)op->res);
				pending++;
			} else {
				open[op - ops] = false;
			}
		}
	}
	return 0;
}

int
ol_io_batch(struct ol_io_op *ops, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (ops[i].niov < 0 || ops[i].niov > OL_IO_MAX_IOV || op_len(&ops[i]) > (1u << 30))
			return -EINVAL; /* one SQE moves at most 2^31 bytes */
	struct thread_ring *r = thread_ring();
	if (!r) {
		for (unsigned i = 0; i < n; i++) {
			if (ops[i].fd < 0)
				ops[i].res = -EBADF;
			else
				op_sync(&ops[i], 0);
		}
		return 0;
	}
	int rc = 0;
	for (unsigned i = 0; i < n; i += RING_DEPTH) {
		unsigned k = n - i < RING_DEPTH ? n - i : RING_DEPTH;
		if (rc) { /* an earlier chunk broke the ring: the rest are not run */
			for (unsigned j = i; j < i + k; j++)
				ops[j].res = rc;
			continue;
		}
		rc = run_ring(&r->ring, ops + i, k);
	}
	return rc;
}
