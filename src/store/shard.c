/* store/shard.c - shard files (one per part per drive, named by a random uuid, never by the
 * key), batched parallel I/O on a small per-thread io_uring, reclaim and the open-time sweep. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"

#define RING_DEPTH 64

static __thread struct io_uring ring;
static __thread int ring_state; /* 0 untried, 1 ok, -1 unavailable */
static __thread pid_t ring_pid; /* a forked child must not share its parent's ring */

static ssize_t
io_sync_one(struct ol_io *o)
{
	ssize_t r;

	if (o->op == 2)
		return fdatasync(o->fd) ? -errno : 0;
	if (o->op == 3)
		return fsync(o->fd) ? -errno : 0;
	if (o->op == 0)
		r = preadv(o->fd, o->iov, o->niov, (off_t)o->off);
	else
		r = pwritev(o->fd, o->iov, o->niov, (off_t)o->off);
	return r < 0 ? -errno : r;
}

static void
prep(struct io_uring_sqe *sqe, struct ol_io *o)
{
	if (o->op == 2 || o->op == 3)
		io_uring_prep_fsync(sqe, o->fd, o->op == 2 ? IORING_FSYNC_DATASYNC : 0);
	else if (o->op == 0)
		io_uring_prep_readv(sqe, o->fd, o->iov, (unsigned)o->niov, o->off);
	else
		io_uring_prep_writev(sqe, o->fd, o->iov, (unsigned)o->niov, o->off);
	io_uring_sqe_set_data(sqe, o);
}

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

/* Threads come and go (one per HTTP connection): a thread's ring goes with it. */
static void
ring_free(void *arg)
{
	struct io_uring *r = arg;

	if (ring_state == 1 && r == &ring && ring_pid == getpid())
		io_uring_queue_exit(r);
	ring_state = 0;
}

static void
ring_key_init(void)
{
	if (pthread_key_create(&ring_key, ring_free))
		ol_die("store: pthread_key_create failed");
}

static int
ring_get(void)
{
	if (ring_state == 1 && ring_pid != getpid()) {
		io_uring_queue_exit(&ring); /* the child's mapping and fd only */
		ring_state = 0;
	}
	if (ring_state == 0) {
		pthread_once(&ring_once, ring_key_init);
		ring_state = io_uring_queue_init(RING_DEPTH, &ring, 0) == 0 ? 1 : -1;
		ring_pid = getpid();
		if (ring_state == 1)
			pthread_setspecific(ring_key, &ring);
	}
	return ring_state == 1;
}

/* A short write is finished synchronously (rare: only at ENOSPC-like edges). */
static void
finish_short(struct ol_io *o)
{
	size_t want = 0;

	for (int i = 0; i < o->niov; i++)
		want += o->iov[i].iov_len;
	if (o->op != 1 || o->res < 0 || (size_t)o->res >= want)
		return;
	o->res = io_sync_one(o) < 0 ? -EIO : (ssize_t)want;
}

void
ol_io_batch(struct ol_io *ops, int n)
{
	struct io_uring_sqe *sqe;
	int todo = 0;

	if (!ring_get() || n > RING_DEPTH) {
		for (int i = 0; i < n; i++)
			ops[i].res = ops[i].fd < 0 ? -EBADF : io_sync_one(&ops[i]);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (ops[i].fd < 0) {
			ops[i].res = -EBADF;
			continue;
		}
		sqe = io_uring_get_sqe(&ring);
		if (!sqe) {
			ops[i].res = io_sync_one(&ops[i]);
			continue;
		}
		prep(sqe, &ops[i]);
		todo++;
	}
	if (todo && io_uring_submit_and_wait(&ring, (unsigned)todo) < 0) {
		for (int i = 0; i < n; i++)
			ops[i].res = ops[i].fd < 0 ? -EBADF : io_sync_one(&ops[i]);
		return;
	}
	while (todo > 0) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			break;
		((struct ol_io *)io_uring_cqe_get_data(cqe))->res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		todo--;
	}
	for (int i = 0; i < n; i++)
		finish_short(&ops[i]);
}

static void
hex(const uint8_t *u, char *out)
{
	static const char h[] = "0123456789abcdef";

	for (int i = 0; i < OL_UUID; i++) {
		out[2 * i] = h[u[i] >> 4];
		out[2 * i + 1] = h[u[i] & 15];
	}
	out[2 * OL_UUID] = 0;
}

void
ol_shard_path(const struct ol_store *st, int d, const uint8_t *uuid, char *buf, size_t cap)
{
	char h[2 * OL_UUID + 1];

	hex(uuid, h);
	snprintf(buf, cap, "%s/%.2s/%s", st->d[d].data, h, h);
}

static void
shard_dir(const struct ol_store *st, int d, const uint8_t *uuid, char *buf, size_t cap)
{
	char h[2 * OL_UUID + 1];

	hex(uuid, h);
	snprintf(buf, cap, "%s/%.2s", st->d[d].data, h);
}

/* Returns an fd open for writing, or -errno. */
int
ol_shard_create(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80], dir[OL_PATH_MAX + 8];
	int fd;

	ol_shard_path(st, d, uuid, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		shard_dir(st, d, uuid, dir, sizeof(dir));
		if (mkdir(dir, 0700) && errno != EEXIST)
			return -errno;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	return fd < 0 ? -errno : fd;
}

int
ol_open_shard_dir(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char dir[OL_PATH_MAX + 8];
	int fd;

	shard_dir(st, d, uuid, dir, sizeof(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void
ol_shard_unlink(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80];

	ol_shard_path(st, d, uuid, path, sizeof(path));
	if (unlink(path) && errno != ENOENT)
		ol_warn("store: unlink %s: %s", path, strerror(errno));
}

static bool
kept(const struct ol_rec *keep, const uint8_t *uuid)
{
	struct ol_rpart p;

	for (uint32_t i = 0; keep && i < keep->n_parts; i++) {
		ol_rec_part(keep, i, &p);
		if (!memcmp(p.uuid, uuid, OL_UUID))
			return true;
	}
	return false;
}

static void
reclaim_rec(const struct ol_store *st, int d, const struct ol_rec *r, const struct ol_rec *keep)
{
	struct ol_rpart p;

	if (r->flags & OL_REC_INLINE)
		return;
	for (uint32_t i = 0; i < r->n_parts; i++) {
		ol_rec_part(r, i, &p);
		if (!kept(keep, p.uuid) && !ol_inuse_defer(st, d, r->vid, p.uuid))
			ol_shard_unlink(st, d, p.uuid);
	}
}

void
ol_reclaim(const struct ol_store *st, int d, const void *raw, size_t len, const struct ol_rec *keep)
{
	struct ol_rec r, pr;

	if (!raw || ol_rec_decode(raw, len, &r))
		return;
	reclaim_rec(st, d, &r, keep);
	if (r.prev_len && !ol_rec_decode(r.prev, r.prev_len, &pr))
		reclaim_rec(st, d, &pr, keep);
}
