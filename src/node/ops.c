/* node/ops.c - the node plane's ops, one table: ping, stat, shard write / read / rename /
 * unlink on this node's drives. Shard names are confined to <drive>/.openlake/data (names
 * validated by ol_node_name_ok: no "..", no absolute path, no dot files; files opened with
 * O_NOFOLLOW relative to the drive's directory fd).
 *
 * Disk I/O: chunk writes and reads are pwrite/pread on the loop thread (page cache), the
 * fsync that ends a shard write is a ring op (the loop goes on serving other connections);
 * rename and unlink (small metadata calls) run inline. */
#include "node/node_int.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK     (256u * 1024)
#define NO_DEADLINE_MS 60000u /* the deadline of a request that names none */

uint64_t
ol_node_req_deadline_ns(const struct ol_node_hdr *h)
{
	return (uint64_t)(h->deadline_ms ? h->deadline_ms : NO_DEADLINE_MS) * 1000000u;
}

int
ol_node_ops_open_roots(struct ol_node_server *s)
{
	for (unsigned i = 0; i < OL_NODE_MAX_DRIVES; i++)
		s->root_fd[i] = -1;
	for (unsigned i = 0; i < s->n_drives; i++) {
		char p[OL_NODE_NAME_MAX + 64];
		snprintf(p, sizeof(p), "%s/.openlake", s->drives[i]);
		mkdir(s->drives[i], 0700);
		mkdir(p, 0700);
		snprintf(p, sizeof(p), "%s/.openlake/data", s->drives[i]);
		mkdir(p, 0700);
		s->root_fd[i] = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->root_fd[i] < 0) {
			int rc = -errno;
			ol_err("node plane: drive %u: cannot open %s: %s", i, p, strerror(errno));
			return rc;
		}
	}
	return 0;
}

/* drive index and shard name at the start of a request */
int
ol_node_target(struct nconn *c, struct ol_node_rd *r, char *name)
{
	unsigned d = ol_node_get16(r);
	size_t n = ol_node_getstr(r, name, OL_NODE_NAME_MAX + 1);
	if (r->err)
		return -EPROTO;
	if (d >= c->s->n_drives || c->s->root_fd[d] < 0 || !ol_node_name_ok(name, n))
		return -EINVAL;
	int rc = ol_node_drive_check(c->s, d);
	return rc ? rc : (int)d;
}

/* create the directories above name (mkdir -p of its parent) */
int
ol_node_make_parents(int root, const char *name)
{
	char p[OL_NODE_NAME_MAX + 1];
	snprintf(p, sizeof(p), "%s", name);
	for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		if (mkdirat(root, p, 0700) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

int
ol_node_sync_parent(int root, const char *name)
{
	char p[OL_NODE_NAME_MAX + 1];
	snprintf(p, sizeof(p), "%s", name);
	char *s = strrchr(p, '/');
	int fd;
	if (s) {
		*s = 0;
		fd = openat(root, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	} else {
		fd = dup(root);
	}
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

static int
op_ping(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	(void)r;
	ol_node_reply(c, h, 0, 0, NULL, 0);
	return 0;
}

static int
op_stat(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char name[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, name);
	if (d < 0)
		return d;
	struct stat st;
	if (fstatat(c->s->root_fd[d], name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EISDIR;
	uint8_t out[16];
	struct ol_node_wr w = {out, 0, sizeof(out), false};
	ol_node_put64(&w, (uint64_t)st.st_size);
	ol_node_put64(&w, (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec);
	ol_node_reply(c, h, 0, 0, out, w.n);
	return 0;
}

static int
op_rename(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char from[OL_NODE_NAME_MAX + 1], to[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, from);
	if (d < 0)
		return d;
	size_t n = ol_node_getstr(r, to, sizeof(to));
	if (r->err)
		return -EPROTO;
	if (!ol_node_name_ok(to, n))
		return -EINVAL;
	int root = c->s->root_fd[d];
	int rc = ol_node_make_parents(root, to);
	if (!rc && renameat(root, from, root, to))
		rc = -errno;
	if (!rc)
		rc = ol_node_sync_parent(root, to);
	if (!rc)
		ol_node_reply(c, h, 0, 0, NULL, 0);
	return rc;
}

static int
op_unlink(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char name[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, name);
	if (d < 0)
		return d;
	if (unlinkat(c->s->root_fd[d], name, 0))
		return -errno;
	ol_node_reply(c, h, 0, 0, NULL, 0);
	return 0;
}

/* ---- SHARD_WRITE: FIRST opens, each frame appends, the last fsyncs then answers ---- */

static void
write_drop(struct nconn *c)
{
	if (c->wfd < 0)
		return;
	ol_loop_timer_cancel(c->loop, &c->wtimer);
	close(c->wfd);
	c->wfd = -1;
	unlinkat(c->s->root_fd[c->wdrive], c->wname, 0);
}

static void
on_fsync(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	struct nconn *c = arg;
	c->fpending = false;
	if (c->dead) {
		ol_node_kill(c);
		ol_node_release(c); /* frees it once nothing is pending */
		return;
	}
	c->depth++;
	uint8_t out[8];
	struct ol_node_wr w = {out, 0, sizeof(out), false};
	ol_node_put64(&w, c->wbytes);
	struct ol_node_hdr h = {.op = OL_NODE_SHARD_WRITE, .call_id = c->wcall};
	if (res < 0) {
		ol_err("node plane: fsync of %s on drive %d failed: %s", c->wname, c->wdrive,
		       strerror(-res));
		write_drop(c);
	} else {
		ol_loop_timer_cancel(c->loop, &c->wtimer);
		close(c->wfd);
		c->wfd = -1;
	}
	ol_node_reply(c, &h, 0, res < 0 ? res : 0, out, res < 0 ? 0 : w.n);
	ol_node_resume(c);
	c->depth--;
	ol_node_release(c);
}

/* The write stream's deadline passed before its last frame: the file goes, the call fails
 * with -ETIMEDOUT, and the frames still on their way are dropped. */
static void
on_write_deadline(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct nconn *c = arg;
	if (c->wfd < 0 || c->fpending || c->dead)
		return;
	ol_warn("node plane: shard write %s from %s passed its deadline unfinished (%llu bytes); "
		"dropped",
		c->wname, c->peer, (unsigned long long)c->wbytes);
	uint64_t call = c->wcall;
	write_drop(c);
	c->discard = true;
	c->discard_call = call;
	struct ol_node_hdr h = {.op = OL_NODE_SHARD_WRITE, .call_id = call};
	ol_node_reply(c, &h, 0, -ETIMEDOUT, NULL, 0);
}

static int
write_open(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	if (c->wfd >= 0)
		return -EBUSY; /* one shard stream per connection */
	int d = ol_node_target(c, r, c->wname);
	if (d < 0)
		return d;
	int root = c->s->root_fd[d];
	int rc = ol_node_make_parents(root, c->wname);
	if (rc)
		return rc;
	c->wfd =
	    openat(root, c->wname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (c->wfd < 0)
		return -errno;
	c->wdrive = d;
	c->wcall = h->call_id;
	c->wbytes = 0;
	c->wtimer.cb = on_write_deadline;
	c->wtimer.arg = c;
	rc = ol_loop_timer_arm(c->loop, &c->wtimer, ol_node_req_deadline_ns(h));
	if (rc)
		write_drop(c);
	return rc;
}

static int
write_frame(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	int rc;
	if (h->flags & OL_NODE_F_FIRST) {
		rc = write_open(c, h, r);
		if (rc)
			return rc;
	} else if (c->discard && h->call_id == c->discard_call) {
		c->discard = (h->flags & OL_NODE_F_MORE) != 0;
		return 0; /* the rest of a call already answered with an error */
	} else if (c->wfd < 0 || h->call_id != c->wcall) {
		return -EPROTO;
	}
	if (h->status < 0) { /* the sender gave up: drop the file */
		write_drop(c);
		return h->status;
	}
	while (r->n) {
		ssize_t n = pwrite(c->wfd, r->p, r->n, (off_t)c->wbytes);
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			write_drop(c);
			return rc;
		}
		c->wbytes += (uint64_t)n;
		r->p += n;
		r->n -= (size_t)n;
	}
	if (h->flags & OL_NODE_F_MORE)
		return 0;
	c->fop.cb = on_fsync;
	c->fop.arg = c;
	rc = ol_loop_fsync(c->loop, &c->fop, c->wfd, false);
	if (rc) {
		write_drop(c);
		return rc;
	}
	c->fpending = true;
	c->paused = true; /* the next request waits for this answer */
	return 0;
}

static int
op_write(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	int rc = write_frame(c, h, r);
	if (rc && rc != -EPROTO && (h->flags & OL_NODE_F_MORE)) {
		c->discard = true; /* answered now; its remaining frames are dropped */
		c->discard_call = h->call_id;
	}
	return rc;
}

/* ---- SHARD_READ: streamed back READ_CHUNK at a time, one chunk queued ahead ---- */

void
ol_node_read_pump(struct nconn *c)
{
	while (c->rfd >= 0 && c->oq_n < 2 && !c->dead) {
		size_t want = c->rleft < READ_CHUNK ? (size_t)c->rleft : READ_CHUNK;
		if (want > c->s->max_payload)
			want = c->s->max_payload;
		uint8_t *p = ol_node_out_begin(c, want);
		ssize_t n = 0;
		int status = 0;
		if (ol_loop_now_ns(c->loop) > c->rdeadline_ns)
			status = -ETIMEDOUT; /* the caller has given up by now */
		else if (want && (n = pread(c->rfd, p, want, (off_t)c->roff)) < 0)
			status = -errno;
		if (status)
			n = 0;
		c->roff += (uint64_t)n;
		c->rleft -= (uint64_t)n;
		bool last = status || c->rleft == 0 || n == 0;
		ol_node_out_end(c, OL_NODE_SHARD_READ, c->rcall, last ? 0 : OL_NODE_F_MORE, status,
				(size_t)n);
		if (last) {
			ol_loop_timer_cancel(c->loop, &c->rtimer);
			close(c->rfd);
			c->rfd = -1;
			ol_node_resume(c);
		}
	}
}

/* A reader that stopped taking its stream (its frames wait in the send queue) past the
 * call's deadline: the connection goes, which frees the file and the queue. */
static void
on_read_deadline(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct nconn *c = arg;
	if (c->rfd < 0 || c->dead)
		return;
	ol_warn("node plane: %s stopped reading shard stream (call %llu) past its deadline; "
		"connection closed",
		c->peer, (unsigned long long)c->rcall);
	ol_node_kill(c);
}

static int
op_read(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char name[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, name);
	uint64_t off = ol_node_get64(r), len = ol_node_get64(r);
	if (d < 0 || r->err)
		return d < 0 ? d : -EPROTO;
	int fd = openat(c->s->root_fd[d], name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	uint64_t size = (uint64_t)st.st_size;
	c->rfd = fd;
	c->rcall = h->call_id;
	c->roff = off;
	c->rleft = off >= size ? 0 : (len < size - off ? len : size - off);
	c->rdeadline_ns = ol_loop_now_ns(c->loop) + ol_node_req_deadline_ns(h);
	c->rtimer.cb = on_read_deadline;
	c->rtimer.arg = c;
	if (ol_loop_timer_arm(c->loop, &c->rtimer, ol_node_req_deadline_ns(h) + 1000000000u)) {
		close(fd);
		c->rfd = -1;
		return -ENOMEM;
	}
	c->paused = true;
	ol_node_read_pump(c);
	return 0;
}

static int
op_refuse(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	(void)c;
	(void)h;
	(void)r;
	return -EPROTO; /* HELLO twice, or CREDIT from a client */
}

typedef int (*op_fn)(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r);

static const struct {
	op_fn fn;
	bool stream; /* several frames per call (FIRST / MORE allowed) */
} ops[OL_NODE_OP_MAX + 1] = {
    [OL_NODE_HELLO] = {op_refuse, false},
    [OL_NODE_PING] = {op_ping, false},
    [OL_NODE_CREDIT] = {op_refuse, false},
    [OL_NODE_STAT] = {op_stat, false},
    [OL_NODE_SHARD_WRITE] = {op_write, true},
    [OL_NODE_SHARD_READ] = {op_read, false},
    [OL_NODE_SHARD_RENAME] = {op_rename, false},
    [OL_NODE_SHARD_UNLINK] = {op_unlink, false},
    [OL_NODE_SHARD_PWRITE] = {ol_node_op_pwrite, false},
    [OL_NODE_SHARD_FSYNC] = {ol_node_op_fsync, false},
    [OL_NODE_META_GET] = {ol_node_op_meta_get, false},
    [OL_NODE_META_SCAN] = {ol_node_op_meta_scan, false},
    [OL_NODE_META_COMMIT] = {ol_node_op_meta_commit, false},
    [OL_NODE_SHARD_LIST] = {ol_node_op_list, false},
    [OL_NODE_DRIVE_ID] = {ol_node_op_drive_id, false},
    [OL_NODE_COMMIT] = {ol_node_op_commit, false},
};

int
ol_node_dispatch(struct nconn *c, const struct ol_node_hdr *h, const uint8_t *p)
{
	struct ol_node_rd r = {p, h->len, false};
	if (!ops[h->op].stream && (h->flags & (OL_NODE_F_FIRST | OL_NODE_F_MORE)))
		return -EPROTO;
	return ops[h->op].fn(c, h, &r);
}

void
ol_node_ops_fini(struct nconn *c)
{
	write_drop(c);
	ol_loop_timer_cancel(c->loop, &c->rtimer);
	if (c->rfd >= 0)
		close(c->rfd);
	c->rfd = -1;
}
