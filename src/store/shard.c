/* store/shard.c - shard files (one per part per drive, named by a random uuid, never by the
 * key), reclaim and the open-time sweep. Their I/O goes through io/'s ol_io_batch. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"
#include "base/hex.h"

void
ol_shard_path(const struct ol_store *st, int d, const uint8_t *uuid, char *buf, size_t cap)
{
	char h[2 * OL_UUID + 1];

	ol_hex_encode(uuid, OL_UUID, h);
	if (ol_drive_remote(st, d)) /* for logs and fault tests: the node plane's name */
		snprintf(buf, cap, "%s: %.2s/%s", st->d[d].root, h, h);
	else
		snprintf(buf, cap, "%s/%.2s/%s", st->d[d].data, h, h);
}

static void
shard_dir(const struct ol_store *st, int d, const uint8_t *uuid, char *buf, size_t cap)
{
	char h[2 * OL_UUID + 1];

	ol_hex_encode(uuid, OL_UUID, h);
	snprintf(buf, cap, "%s/%.2s", st->d[d].data, h);
}

/* Returns an fd open for writing, or -errno. */
int
ol_shard_create(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80], dir[OL_PATH_MAX + 8];
	int fd;

	if (!ol_shards_ok(st))
		return -EROFS;
	if (ol_drive_remote(st, d))
		return ol_rd_shard_open((struct ol_store *)st, d, uuid, OL_RD_CREATE);
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
ol_shard_create_deferred(const struct ol_store *st, int d, const uint8_t *uuid)
{
	if (ol_drive_remote(st, d))
		return ol_rd_shard_open((struct ol_store *)st, d, uuid, OL_RD_CREATE_LATER);
	return ol_shard_create(st, d, uuid);
}

int
ol_shard_handle(const struct ol_store *st, int d, const uint8_t *uuid)
{
	if (ol_drive_remote(st, d))
		return ol_rd_shard_open((struct ol_store *)st, d, uuid, OL_RD_UNCHECKED);
	return ol_shard_open(st, d, uuid);
}

int
ol_open_shard_dir(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char dir[OL_PATH_MAX + 8];
	int fd;

	if (ol_drive_remote(st, d))
		return ol_rd_shard_open((struct ol_store *)st, d, uuid, OL_RD_DIR);
	shard_dir(st, d, uuid, dir, sizeof(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void
ol_shard_unlink(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80];

	if (!ol_shards_ok(st))
		return;
	if (ol_drive_remote(st, d)) {
		ol_rd_shard_unlink((struct ol_store *)st, d, uuid);
		return;
	}
	ol_shard_path(st, d, uuid, path, sizeof(path));
	if (unlink(path) && errno != ENOENT)
		ol_warn("store: unlink %s: %s", path, strerror(errno));
}

int
ol_shard_open(const struct ol_store *st, int d, const uint8_t *uuid)
{
	char path[OL_PATH_MAX + 80];
	int fd;

	if (ol_drive_remote(st, d))
		return ol_rd_shard_open((struct ol_store *)st, d, uuid, OL_RD_EXISTING);
	ol_shard_path(st, d, uuid, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void
ol_shard_close(int fd)
{
	if (ol_vfd(fd))
		ol_vfd_close(fd);
	else if (fd >= 0)
		close(fd);
}

ssize_t
ol_shard_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	struct ol_io_op op = {
	    .fd = fd, .opcode = OL_IO_WRITE, .buf = (void *)buf, .len = len, .off = off};
	int rc;

	if (!ol_vfd(fd)) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);

		return n < 0 ? -errno : n;
	}
	rc = ol_shard_batch(&op, 1);
	return rc ? rc : op.res;
}

int
ol_shard_datasync(int fd)
{
	struct ol_io_op op = {.fd = fd, .opcode = OL_IO_FDATASYNC};
	int rc;

	if (!ol_vfd(fd))
		return fdatasync(fd) ? -errno : 0;
	rc = ol_shard_batch(&op, 1);
	return rc ? rc : (int)(op.res < 0 ? op.res : 0);
}

void
ol_shard_writeback(int fd, uint64_t off, uint64_t len)
{
	if (fd >= 0 && !ol_vfd(fd))
		(void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
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
			ol_reclaim_unlink((struct ol_store *)st, d, p.uuid);
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
