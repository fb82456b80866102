/* io/uring.c - batched file I/O on a per-thread io_uring, with a synchronous fallback. */
#include "io/io.h"

#include "base/log.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <unistd.h>

#define RING_DEPTH 64

struct thread_ring {
	struct io_uring ring;
	bool ok;
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static bool ring_disabled; /* set once setup failed: do not retry on every call */

static void
ring_free(void *p)
{
	struct thread_ring *r = p;
	if (r->ok)
		io_uring_queue_exit(&r->ring);
	free(r);
}

static void
ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
	ring_disabled = getenv("OL_IO_NO_URING") != NULL; /* tests of the fallback */
}

static struct thread_ring *
thread_ring(void)
{
	pthread_once(&ring_once, ring_key_init);
	struct thread_ring *r = pthread_getspecific(ring_key);
	if (r || ring_disabled)
		return r && r->ok ? r : NULL;
	r = ol_xcalloc(1, sizeof(*r));
	int rc = io_uring_queue_init(RING_DEPTH, &r->ring, 0);
	r->ok = rc == 0;
	if (rc) {
		ol_info("io: io_uring unavailable (%d), using synchronous file I/O", rc);
		ring_disabled = true;
	}
	pthread_setspecific(ring_key, r);
	return r->ok ? r : NULL;
}

/* One op synchronously; writes and reads loop over partial transfers. */
static void
op_sync(struct ol_io_op *op)
{
	size_t done = 0;
	if (op->opcode == OL_IO_FSYNC || op->opcode == OL_IO_FDATASYNC) {
		int rc = op->opcode == OL_IO_FSYNC ? fsync(op->fd) : fdatasync(op->fd);
		op->res = rc ? -errno : 0;
		return;
	}
	while (done < op->len) {
		char *b = (char *)op->buf + done;
		off_t at = (off_t)(op->off + done);
		ssize_t n = op->opcode == OL_IO_READ ? pread(op->fd, b, op->len - done, at)
						     : pwrite(op->fd, b, op->len - done, at);
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
	char *b = (char *)op->buf + done;
	switch (op->opcode) {
	case OL_IO_READ:
		io_uring_prep_read(sqe, op->fd, b, (unsigned)(op->len - done), op->off + done);
		break;
	case OL_IO_WRITE:
		io_uring_prep_write(sqe, op->fd, b, (unsigned)(op->len - done), op->off + done);
		break;
	default:
		io_uring_prep_fsync(sqe, op->fd,
				    op->opcode == OL_IO_FDATASYNC ? IORING_FSYNC_DATASYNC : 0);
	}
	io_uring_sqe_set_data(sqe, op);
}

/* Submit ops[0..n) (n <= RING_DEPTH) and reap them all; resubmits partial transfers. */
static int
run_ring(struct io_uring *ring, struct ol_io_op *ops, unsigned n)
{
	unsigned pending = 0;
	for (unsigned i = 0; i < n; i++) {
		ops[i].res = 0;
		prep(io_uring_get_sqe(ring), &ops[i], 0);
		pending++;
	}
	while (pending) {
		int rc = io_uring_submit_and_wait(ring, 1);
		if (rc < 0 && rc != -EINTR)
			return rc;
		struct io_uring_cqe *cqe;
		while (io_uring_peek_cqe(ring, &cqe) == 0) {
			struct ol_io_op *op = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(ring, cqe);
			pending--;
			if (res < 0 || op->opcode >= OL_IO_FSYNC) {
				op->res = res < 0 ? res : 0;
				continue;
			}
			op->res += res;
			if (res > 0 && (size_t)op->res < op->len) { /* partial: continue it */
				prep(io_uring_get_sqe(ring), op, (size_t)op->res);
				pending++;
			}
		}
	}
	return 0;
}

int
ol_io_batch(struct ol_io_op *ops, unsigned n)
{
	struct thread_ring *r = thread_ring();
	for (unsigned i = 0; i < n; i++)
		if (ops[i].len > (1u << 30))
			return -EINVAL; /* one SQE moves at most 2^31 bytes */
	if (!r) {
		for (unsigned i = 0; i < n; i++)
			op_sync(&ops[i]);
		return 0;
	}
	for (unsigned i = 0; i < n; i += RING_DEPTH) {
		unsigned k = n - i < RING_DEPTH ? n - i : RING_DEPTH;
		int rc = run_ring(&r->ring, ops + i, k);
		if (rc)
			return rc;
	}
	return 0;
}
