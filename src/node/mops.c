/* node/mops.c - the ops a remote erasure set needs beyond streamed shard writes and reads:
 * SHARD_PWRITE (a chunk at an offset), SHARD_FSYNC, and the metadata index of a drive
 * (META_GET, META_SCAN, META_COMMIT). The node server is the one owner of a drive's LMDB env
 * while it serves it: the env is opened by the first META op on the drive (so a daemon whose
 * local store holds the same drives never opens it twice), after taking the drive's lock
 * file as a store does.
 *
 * Fencing: META_COMMIT carries the epoch of the set leader that sends it. In the same LMDB
 * write txn as the batch, the drive's stored fence (OL_META_FENCE, key "epoch") is read: an
 * older epoch is refused with -ESTALE (nothing applied), a newer one is stored.
 * Within an epoch, a frame may also carry the sender's generation of this drive (flag
 * MC_GEN): the leader raises it each time it takes the drive back after counting it failed,
 * and its first frame after that is an empty commit with the new generation. The drive keeps
 * the highest generation of its epoch (key "gen"); a frame of the same epoch with a lower one
 * (or none, once one is kept) is refused with -ESTALE: a commit that sat in this node's
 * socket buffers while it was frozen, sent before the leader gave up on it, cannot land after
 * (and so over) what the leader wrote to the drive since its return.
 *
 * Everything runs inline on the connection's loop thread (LMDB calls and fdatasync block it
 * for their time; the loop's other connections wait meanwhile). */
#include "node/node_int.h"

#include "base/driveid.h"
#include "base/log.h"
#include "meta/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCAN_MAX_ENTRIES 256u
#define SCAN_MAX_BYTES	 (256u * 1024)

void
ol_node_mops_init(struct ol_node_server *s)
{
	pthread_mutex_init(&s->meta_mu, NULL);
	for (unsigned i = 0; i < OL_NODE_MAX_DRIVES; i++)
		s->meta_lock[i] = -1;
}

void
ol_node_mops_fini(struct ol_node_server *s)
{
	for (unsigned i = 0; i < OL_NODE_MAX_DRIVES; i++) {
		ol_meta_close(s->meta[i]);
		s->meta[i] = NULL;
		if (s->meta_lock[i] >= 0)
			close(s->meta_lock[i]);
		s->meta_lock[i] = -1;
	}
	for (unsigned i = 0; i < s->n_retired; i++)
		ol_meta_close(s->retired[i]);
	s->n_retired = 0;
	pthread_mutex_destroy(&s->meta_mu);
}

/* The drive's env, opened on first use. 0 or -errno (-EBUSY: a store holds the drive). */
static int
drive_meta(struct ol_node_server *s, unsigned d, struct ol_meta **out)
{
	char p[OL_NODE_NAME_MAX + 64];
	int rc = 0;

	pthread_mutex_lock(&s->meta_mu);
	if (s->meta[d] && ol_meta_broken(s->meta[d], NULL)) {
		ol_err(
		    "node plane: drive %s: metadata env broken; serving it again needs a restart",
		    s->drives[d]);
		rc = -EIO;
		goto out;
	}
	if (s->meta[d])
		goto out;
	if (s->meta_lock[d] < 0) {
		snprintf(p, sizeof(p), "%s/.openlake/lock", s->drives[d]);
		int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
			rc = -errno;
			if (fd >= 0)
				close(fd);
			ol_err("node plane: drive %s is in use by a store of this host (%s)",
			       s->drives[d], strerror(-rc));
			rc = -EBUSY;
			goto out;
		}
		s->meta_lock[d] = fd;
	}
	snprintf(p, sizeof(p), "%s/.openlake/meta.mdb", s->drives[d]);
	rc = ol_meta_open(p, 0, false, &s->meta[d]);
	if (rc)
		ol_err("node plane: drive %s: cannot open metadata: %s", s->drives[d],
		       strerror(-rc));
out:
	*out = rc ? NULL : s->meta[d];
	pthread_mutex_unlock(&s->meta_mu);
	return rc;
}

/* a removed directory has no links left */
static bool
removed(int fd)
{
	struct stat st;
	return fd >= 0 && !fstat(fd, &st) && st.st_nlink == 0;
}

/* under meta_mu: make <drive>/.openlake/data again and put it at root_fd[d] (dup3: a request
 * on another thread sees the old directory or the new one, never a closed fd) */
static int
renew_drive(struct ol_node_server *s, unsigned d)
{
	char p[OL_NODE_NAME_MAX + 64];
	if (s->n_retired == OL_NODE_MAX_RETIRED && s->meta[d])
		return -EMFILE;
	static const char *const sub[] = {"", "/.openlake", "/.openlake/data"};
	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", s->drives[d], sub[i]);
		if (mkdir(p, 0700) && errno != EEXIST)
			return -errno;
	}
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = dup3(fd, s->root_fd[d], O_CLOEXEC) < 0 ? -errno : 0;
	close(fd);
	if (rc)
		return rc;
	if (s->meta[d])
		s->retired[s->n_retired++] = s->meta[d];
	s->meta[d] = NULL; /* drive_meta opens a fresh env */
	if (s->meta_lock[d] >= 0)
		close(s->meta_lock[d]);
	s->meta_lock[d] = -1;
	return 0;
}

int
ol_node_drive_check(struct ol_node_server *s, unsigned d)
{
	int rc = 0;
	if (!removed(s->root_fd[d]))
		return 0;
	pthread_mutex_lock(&s->meta_mu);
	if (removed(s->root_fd[d])) { /* not renewed by another thread meanwhile */
		rc = renew_drive(s, d);
		if (rc)
			ol_err("node plane: drive %s: its data directory was removed and cannot be "
			       "made again (%s): restart the node",
			       s->drives[d], strerror(-rc));
		else
			ol_warn("node plane: drive %s: its data directory was removed (the drive "
				"wiped?): serving it again, empty; `openlake heal` restores it",
				s->drives[d]);
	}
	pthread_mutex_unlock(&s->meta_mu);
	return rc;
}

/* drive u16 (index), then for META ops the env */
static int
meta_target(struct nconn *c, struct ol_node_rd *r, struct ol_meta **m)
{
	unsigned d = ol_node_get16(r);

	if (r->err)
		return -EPROTO;
	if (d >= c->s->n_drives)
		return -EINVAL;
	int rc = ol_node_drive_check(c->s, d);
	return rc ? rc : drive_meta(c->s, d, m);
}

/* ---- SHARD_PWRITE: drive, name, off u64, flags u32, data ---- */

int
ol_node_op_pwrite(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char name[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, name), fd, rc = 0;
	uint64_t off = ol_node_get64(r);
	uint32_t fl = ol_node_get32(r);

	if (d < 0 || r->err)
		return d < 0 ? d : -EPROTO;
	if (off > (1ULL << 50) || (fl & ~7u))
		return -EINVAL;
	int root = c->s->root_fd[d];
	int of = O_WRONLY | O_NOFOLLOW | O_CLOEXEC;
	if (fl & OL_NODE_PW_CREATE) {
		of |= O_CREAT | ((fl & OL_NODE_PW_EXCL) ? O_EXCL : 0);
		if ((rc = ol_node_make_parents(root, name)))
			return rc;
	}
	fd = openat(root, name, of, 0600);
	if (fd < 0)
		return -errno;
	while (r->n && !rc) {
		ssize_t n = pwrite(fd, r->p, r->n, (off_t)off);
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else {
			off += (uint64_t)n;
			r->p += n;
			r->n -= (size_t)n;
		}
	}
	if (!rc && (fl & OL_NODE_PW_SYNC) && fdatasync(fd))
		rc = -errno;
	close(fd);
	if (!rc &&
	    (fl & (OL_NODE_PW_SYNC | OL_NODE_PW_CREATE)) == (OL_NODE_PW_SYNC | OL_NODE_PW_CREATE))
		rc = ol_node_sync_parent(root, name);
	if (!rc)
		ol_node_reply(c, h, 0, 0, NULL, 0);
	return rc;
}

/* ---- SHARD_FSYNC: drive, name ---- */

int
ol_node_op_fsync(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char name[OL_NODE_NAME_MAX + 1];
	int d = ol_node_target(c, r, name), fd, rc = 0;

	if (d < 0)
		return d;
	fd = openat(c->s->root_fd[d], name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fdatasync(fd))
		rc = -errno;
	close(fd);
	if (!rc)
		rc = ol_node_sync_parent(c->s->root_fd[d], name);
	if (!rc)
		ol_node_reply(c, h, 0, 0, NULL, 0);
	return rc;
}

/* ---- META_GET: drive u16, db u8, klen u16, key -> the value ---- */

static int
get_key(struct ol_node_rd *r, uint8_t *db, const uint8_t **key, uint16_t *klen, bool empty_ok)
{
	const uint8_t *b = ol_node_getbytes(r, 1);

	*db = b ? *b : 0;
	*klen = ol_node_get16(r);
	*key = ol_node_getbytes(r, *klen);
	if (r->err)
		return -EPROTO;
	if (!OL_NODE_META_DB_OK(*db) || *klen > OL_NODE_META_KEY || (!*klen && !empty_ok))
		return -EINVAL;
	return 0;
}

int
ol_node_op_meta_get(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	struct ol_meta *m = NULL;
	struct ol_meta_txn *t = NULL;
	const uint8_t *key;
	const void *v;
	uint16_t klen;
	size_t vl;
	uint8_t db;
	int rc = meta_target(c, r, &m);

	if (!rc)
		rc = get_key(r, &db, &key, &klen, false);
	if (!rc)
		rc = ol_meta_begin(m, false, &t);
	if (rc)
		return rc;
	rc = ol_meta_get(t, (enum ol_meta_db)db, key, klen, &v, &vl);
	if (!rc && vl > c->s->max_payload)
		rc = -EMSGSIZE;
	if (!rc)
		ol_node_reply(c, h, 0, 0, v, vl);
	ol_meta_abort(t);
	return rc;
}

/* ---- META_SCAN: drive u16, db u8, after u8, max u32, klen u16, key -> n u32, entries ---- */

static int
scan_page(struct nconn *c, struct ol_meta_cursor *cur, const uint8_t *key, uint16_t klen,
	  bool after, uint32_t max, struct ol_node_wr *w)
{
	const void *k, *v;
	size_t kl, vl;
	uint32_t n = 0;
	int got = ol_meta_cursor_seek(cur, key, klen, &k, &kl, &v, &vl);

	ol_node_put32(w, 0); /* the count, set below */
	if (got == 1 && after && kl == klen && !memcmp(k, key, kl))
		got = ol_meta_cursor_next(cur, &k, &kl, &v, &vl);
	while (got == 1 && n < max) {
		size_t need = 2 + kl + 4 + vl;
		if (w->cap - w->n < need || (n && w->n + need > SCAN_MAX_BYTES))
			break;
		ol_node_put16(w, (uint16_t)kl);
		ol_node_putbytes(w, k, kl);
		ol_node_put32(w, (uint32_t)vl);
		ol_node_putbytes(w, v, vl);
		n++;
		got = ol_meta_cursor_next(cur, &k, &kl, &v, &vl);
	}
	if (got < 0)
		return got;
	if (got == 1 && !n)
		return -EMSGSIZE; /* one record larger than a frame */
	w->p[0] = (uint8_t)n;
	w->p[1] = (uint8_t)(n >> 8);
	w->p[2] = (uint8_t)(n >> 16);
	w->p[3] = (uint8_t)(n >> 24);
	return 0;
}

int
ol_node_op_meta_scan(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	struct ol_meta *m = NULL;
	struct ol_meta_txn *t = NULL;
	struct ol_meta_cursor *cur = NULL;
	const uint8_t *key, *af;
	uint16_t klen;
	uint32_t max;
	uint8_t db;
	int rc = meta_target(c, r, &m);

	if (!rc)
		rc = get_key(r, &db, &key, &klen, true);
	af = ol_node_getbytes(r, 1);
	max = ol_node_get32(r);
	if (!rc && r->err)
		rc = -EPROTO;
	if (!rc)
		rc = ol_meta_begin(m, false, &t);
	if (!rc)
		rc = ol_meta_cursor_open(t, (enum ol_meta_db)db, &cur);
	if (rc) {
		ol_meta_abort(t);
		return rc;
	}
	if (!max || max > SCAN_MAX_ENTRIES)
		max = SCAN_MAX_ENTRIES;
	size_t cap = c->s->max_payload;
	uint8_t *p = ol_node_out_begin(c, cap);
	struct ol_node_wr w = {p, 0, cap, false};
	rc = scan_page(c, cur, key, klen, *af != 0, max, &w);
	ol_meta_cursor_close(cur);
	ol_meta_abort(t);
	ol_node_out_end(c, OL_NODE_META_SCAN, h->call_id, 0, rc, rc ? 0 : w.n);
	return 0; /* answered, with rc as its status */
}

/* ---- META_COMMIT: drive u16, epoch u64, flags u8, [gen u64 with MC_GEN,] n u32, entries ---- */

static int
fence_get(struct ol_meta_txn *t, const char *name, uint64_t *out)
{
	const void *v;
	size_t vl;
	int rc = ol_meta_get(t, OL_META_FENCE, name, strlen(name), &v, &vl);

	*out = 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc && vl == 8)
		memcpy(out, v, 8);
	return 0;
}

/* Refuse (epoch, gen) older than the drive's fence, else raise the fence to it. */
static int
fence(struct ol_meta_txn *t, uint64_t epoch, uint64_t gen)
{
	uint64_t cur, cur_gen;
	int rc = fence_get(t, "epoch", &cur);

	if (!rc)
		rc = fence_get(t, "gen", &cur_gen);
	if (rc)
		return rc;
	if (epoch < cur || (epoch == cur && gen < cur_gen))
		return -ESTALE;
	if (epoch > cur && (rc = ol_meta_put(t, OL_META_FENCE, "epoch", 5, &epoch, 8)))
		return rc;
	if (epoch > cur || gen > cur_gen)
		rc = ol_meta_put(t, OL_META_FENCE, "gen", 3, &gen, 8);
	return rc;
}

static int
apply(struct ol_meta_txn *t, struct ol_node_rd *r, uint32_t n)
{
	struct ol_node_mentry e;
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = ol_node_mentry_get(r, false, &e);
		if (rc)
			break;
		if (e.kind == OL_NODE_ME_PUT)
			rc = ol_meta_put(t, (enum ol_meta_db)e.db, e.key, e.klen, e.val, e.vlen);
		else if ((rc = ol_meta_del(t, (enum ol_meta_db)e.db, e.key, e.klen)) == -ENOENT)
			rc = 0;
	}
	if (!rc && r->n)
		rc = -EPROTO; /* bytes after the last entry */
	return rc;
}

int
ol_node_op_meta_commit(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	struct ol_meta *m = NULL;
	struct ol_meta_txn *t = NULL;
	int rc = meta_target(c, r, &m);
	uint64_t epoch = ol_node_get64(r), gen = 0;
	const uint8_t *fl = ol_node_getbytes(r, 1);
	uint32_t n;

	if (fl && (*fl & OL_NODE_MC_GEN))
		gen = ol_node_get64(r);
	n = ol_node_get32(r);
	if (!rc && r->err)
		rc = -EPROTO;
	if (!rc && !epoch)
		rc = -EINVAL;
	if (!rc)
		rc = ol_meta_begin(m, true, &t);
	if (rc)
		return rc;
	rc = fence(t, epoch, gen);
	if (!rc)
		rc = apply(t, r, n);
	if (rc) {
		ol_meta_abort(t);
		return rc;
	}
	rc = ol_meta_commit(t);
	if (!rc && (*fl & OL_NODE_MC_SYNC))
		rc = ol_meta_sync(m);
	if (!rc)
		ol_node_reply(c, h, 0, 0, NULL, 0);
	return rc;
}

/* ---- SHARD_LIST: drive u16, dir str ("" = the data root), after str, max u32 ->
 *      n u32, n x (name str, mtime_s u64), names in byte order, dot files left out ---- */

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of dir after `after`, sorted (malloc'd array of malloc'd strings). */
static int
names_after(int fd, const char *after, char ***out, size_t *n)
{
	DIR *dh = fdopendir(fd);
	struct dirent *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!dh) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.' || (after[0] && strcmp(e->d_name, after) <= 0))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			*out = ol_xrealloc(*out, cap * sizeof(**out));
		}
		(*out)[(*n)++] = ol_xstrdup(e->d_name);
	}
	if (*n)
		qsort(*out, *n, sizeof(**out), cmp_name);
	/* fstatat below needs the directory: keep it open by duplicating before closedir */
	int dfd = dup(dirfd(dh));
	closedir(dh);
	return dfd < 0 ? -errno : dfd;
}

int
ol_node_op_list(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char dir[OL_NODE_NAME_MAX + 1], after[OL_NODE_NAME_MAX + 1];
	unsigned d = ol_node_get16(r);
	size_t dl = ol_node_getstr(r, dir, sizeof(dir));
	char **names;
	size_t n, i;
	uint32_t max, cnt = 0;
	int fd, dfd;

	ol_node_getstr(r, after, sizeof(after));
	max = ol_node_get32(r);
	if (r->err)
		return -EPROTO;
	if (d >= c->s->n_drives || c->s->root_fd[d] < 0 || (dl && !ol_node_name_ok(dir, dl)))
		return -EINVAL;
	int rc = ol_node_drive_check(c->s, d);
	if (rc)
		return rc;
	if (!max || max > 1024)
		max = 1024;
	/* the data root opened anew, not dup'ed: a dup shares root_fd's directory offset, so
	 * the first listing's readdir left it at the end and every later one listed nothing
	 * (every orphan sweep after a node's first found no files there) */
	fd = openat(c->s->root_fd[d], dl ? dir : ".",
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dfd = names_after(fd, after, &names, &n);
	if (dfd < 0)
		return dfd;
	size_t cap = c->s->max_payload;
	uint8_t *p = ol_node_out_begin(c, cap);
	struct ol_node_wr w = {p, 0, cap, false};

	ol_node_put32(&w, 0);
	for (i = 0; i < n && cnt < max; i++) {
		struct stat sb;
		size_t need = 2 + strlen(names[i]) + 8;

		if (w.cap - w.n < need)
			break;
		if (fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		ol_node_putstr(&w, names[i]);
		ol_node_put64(&w, (uint64_t)sb.st_mtime);
		cnt++;
	}
	p[0] = (uint8_t)cnt;
	p[1] = (uint8_t)(cnt >> 8);
	p[2] = (uint8_t)(cnt >> 16);
	p[3] = (uint8_t)(cnt >> 24);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	close(dfd);
	ol_node_out_end(c, OL_NODE_SHARD_LIST, h->call_id, 0, 0, w.n);
	return 0;
}

/* ---- DRIVE_ID: drive u16, flags u8, [record str with CLAIM] -> record str ---- */

/* Drive d's record, or with CLAIM on a drive without one the caller's (written). 0, -ENOENT
 * (none, no claim), -EUCLEAN (garbled, or a local store's version 1), -EINVAL, -errno. */
static int
drive_id(struct ol_node_server *s, unsigned d, bool claim, const char *text, size_t n,
	 struct ol_driveid *id)
{
	int rc;

	pthread_mutex_lock(&s->meta_mu); /* one claim at a time */
	rc = ol_driveid_read(s->drives[d], id);
	if (rc == -ENOENT && claim) {
		rc = ol_driveid_parse(text, n, id);
		if (!rc && id->version != 2)
			rc = -EINVAL;
		if (!rc)
			rc = ol_driveid_write(s->drives[d], id);
		if (!rc)
			ol_info(
			    "node plane: drive %s: identity record written (store %s, pool %u set "
			    "%u drive %u, UUID %s)",
			    s->drives[d], id->store, id->pool, id->set, id->index, id->drive);
	} else if (rc == -EINVAL || (!rc && id->version != 2)) {
		rc = -EUCLEAN;
	}
	pthread_mutex_unlock(&s->meta_mu);
	return rc;
}

int
ol_node_op_drive_id(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	char text[OL_DRIVEID_TEXT];
	unsigned d = ol_node_get16(r);
	const uint8_t *fl = ol_node_getbytes(r, 1);
	struct ol_driveid id;
	size_t n = 0;
	int rc;

	if (fl && (*fl & OL_NODE_ID_CLAIM))
		n = ol_node_getstr(r, text, sizeof(text));
	if (r->err || !fl)
		return -EPROTO;
	if (d >= c->s->n_drives || (*fl & ~OL_NODE_ID_CLAIM))
		return -EINVAL;
	/* only a claim makes a wiped drive's directories again: a plain read writes nothing (it
	 * may run while an operator's rm -rf of the drive is under way) */
	if ((*fl & OL_NODE_ID_CLAIM) && (rc = ol_node_drive_check(c->s, d)))
		return rc;
	rc = drive_id(c->s, d, *fl & OL_NODE_ID_CLAIM, text, n, &id);
	if (rc)
		return rc;
	int len = ol_driveid_format(&id, text, sizeof(text));
	if (len < 0)
		return -EUCLEAN;
	uint8_t *p = ol_node_out_begin(c, (size_t)len + 2);
	struct ol_node_wr w = {p, 0, (size_t)len + 2, false};

	ol_node_put16(&w, (uint16_t)len);
	ol_node_putbytes(&w, text, (size_t)len);
	ol_node_out_end(c, OL_NODE_DRIVE_ID, h->call_id, 0, 0, w.n);
	return 0;
}
