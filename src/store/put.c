/* store/put.c - streaming writes: stripes of k x block are encoded and the N shard blocks
 * written in parallel; commit = shards durable, then the record on a write quorum of
 * drives, then the replaced version's data reclaimed. Also delete. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"

struct ol_put {
	struct ol_store *st;
	char bucket[64];
	char key[OL_KEYBUF]; /* object key, or upload id '\0' part_no for a part */
	size_t klen;
	bool part;
	char upload_id[64];
	unsigned part_no;
	uint8_t uuid[OL_UUID];
	uint64_t size;
	uint8_t *sbuf; /* one stripe of data: k x bs (small until the body outgrows inline) */
	size_t fill, sbuf_cap;
	uint8_t *par[OL_EC_MAX_SHARDS];
	size_t par_len; /* bytes of each par[] buffer */
	int fd[OL_MAX_DRIVES];
	bool bad[OL_MAX_DRIVES];
	uint64_t absent; /* drives offline at the start: skipped, never written */
	bool files;
	uint64_t stripes;
	int err;
	struct ol_store_cond cond; /* checked under the lock in publish() */
	char cond_etag[OL_STORE_ETAG_MAX];
	int vmode;		  /* OL_STORE_VER_* (objects only) */
	struct ol_store *gate_st; /* the shell whose key gate this writer holds (drain.c) */
	unsigned gate;
};

static size_t
stripe_cap(const struct ol_store *st)
{
	return (size_t)st->k * st->bs;
}

/* Stripes and parity blocks come from io's cache of large buffers; the small buffer of an
 * object that may stay inline is plain malloc (one size class per store is enough). */
static void *
buf_get(const struct ol_store *st, size_t n)
{
	return n == stripe_cap(st) || n == st->bs ? ol_iobuf_get(n) : ol_xmalloc(n);
}

static void
buf_put(const struct ol_store *st, void *b, size_t n)
{
	if (n == stripe_cap(st) || n == st->bs)
		ol_iobuf_put(b, n);
	else
		free(b);
}

struct ol_put *
ol_put_new(struct ol_store *st, const char *bucket, const void *key, size_t klen, bool part)
{
	struct ol_put *p = ol_xcalloc(1, sizeof(*p));

	p->st = st;
	memcpy(p->bucket, bucket, strlen(bucket) + 1);
	memcpy(p->key, key, klen);
	p->klen = klen;
	p->part = part;
	ol_uuid(p->uuid);
	ol_flight_add(st, p->uuid); /* before any file exists: see ol_sweep_orphans */
	p->sbuf_cap = stripe_cap(st);
	if (!part && st->inline_max + st->k < p->sbuf_cap)
		p->sbuf_cap = st->inline_max + st->k;
	p->sbuf = buf_get(st, p->sbuf_cap);
	for (int d = 0; d < st->n; d++) {
		p->fd[d] = -1;
		p->bad[d] = st->d[d].meta == NULL;
		p->absent |= (uint64_t)p->bad[d] << d;
	}
	return p;
}

int
ol_set_put_begin(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		 int64_t size_hint, struct ol_put **out)
{
	if (key_len == 0 || key_len > OL_STORE_MAX_KEY || strlen(bucket) > 63)
		return -EINVAL;
	int rc = ol_bucket_check(st, bucket);

	if (rc)
		return rc;
	*out = ol_put_new(st, bucket, key, key_len, false);
	return 0;
}

static int
good_drives(const struct ol_put *p)
{
	int n = 0;

	for (int d = 0; d < p->st->n; d++)
		n += !p->bad[d];
	return n;
}

static void
drive_failed(struct ol_put *p, int d, const char *what, int err)
{
	if (p->bad[d])
		return;
	p->bad[d] = true;
	ol_warn("store: drive %s: %s failed: %s", p->st->d[d].root, what, strerror(-err));
}

/* The shard files; with stripes to write, a remote drive's is created by its first stripe's
 * write (a batch that need not wait for a slow drive) instead of by a call of its own. */
static void
open_files(struct ol_put *p, bool stripes)
{
	for (int d = 0; d < p->st->n; d++) {
		if (p->bad[d])
			continue;
		p->fd[d] = stripes ? ol_shard_create_deferred(p->st, d, p->uuid)
				   : ol_shard_create(p->st, d, p->uuid);
		if (p->fd[d] < 0)
			drive_failed(p, d, "shard create", p->fd[d]);
	}
	p->files = true;
}

/* Encode dl bytes at src (k blocks of bl, padded with zeros) as one stripe and write its N
 * blocks at once. */
static int
write_stripe(struct ol_put *p, const uint8_t *src, size_t dl)
{
	struct ol_store *st = p->st;
	size_t bl = (dl + st->k - 1) / st->k;
	uint8_t *data[OL_EC_MAX_SHARDS], trailer[OL_MAX_DRIVES][OL_TRAILER];
	struct ol_io_op ops[OL_MAX_DRIVES];
	uint64_t hedged;

	if (!p->files)
		open_files(p, true);
	for (int i = 0; i < st->p; i++)
		if (!p->par[i])
			p->par[i] = buf_get(st, st->bs);
	p->par_len = st->bs;
	for (int i = 0; i < st->k; i++)
		data[i] = (uint8_t *)src + (size_t)i * bl; /* read only */
	for (int i = 0; i < st->p; i++)
		data[st->k + i] = p->par[i];
	ol_ec_encode(&st->ec, bl, data, data + st->k);
	for (int d = 0; d < st->n; d++) {
		ol_put_u64(trailer[d], ol_block_sum(st->ck, data[d], bl, p->stripes));
		ops[d] = (struct ol_io_op){.fd = p->bad[d] ? -1 : p->fd[d],
					   .opcode = OL_IO_WRITE,
					   .niov = 2,
					   .off = p->stripes * (st->bs + OL_TRAILER)};
		ops[d].iov[0] = (struct iovec){data[d], bl};
		ops[d].iov[1] = (struct iovec){trailer[d], OL_TRAILER};
	}
	/* a drive slower than the rest is left behind while the others make the quorum: it
	 * misses this object (recorded at commit, healed), not every stripe's wait */
	ol_shard_batch_spare(ops, (unsigned)st->n, good_drives(p) - st->w, &hedged);
	for (int d = 0; d < st->n; d++)
		if (!p->bad[d] && ops[d].res != (ssize_t)(bl + OL_TRAILER))
			drive_failed(p, d,
				     hedged >> d & 1 ? "shard write (left behind: slow)"
						     : "shard write",
				     ops[d].res < 0 ? (int)ops[d].res : -EIO);
	/* with fsync: the stripe starts for the disk now, so commit's fdatasync of the file has
	 * little left to write (measured: the part's sync otherwise halves PUT throughput) */
	for (int d = 0; st->fsync && d < st->n; d++)
		if (!p->bad[d])
			ol_shard_writeback(p->fd[d], ops[d].off, bl + OL_TRAILER);
	p->stripes++;
	return good_drives(p) >= st->w ? 0 : -EIO;
}

/* The buffered bytes as one stripe. */
static int
flush_stripe(struct ol_put *p)
{
	size_t dl = p->fill, bl = (dl + p->st->k - 1) / p->st->k;

	memset(p->sbuf + dl, 0, (size_t)p->st->k * bl - dl);
	p->fill = 0;
	return write_stripe(p, p->sbuf, dl);
}

/* Whole stripes of the caller's bytes, with nothing buffered before them, are coded and
 * written from where they are (no copy); only when the object cannot be inline anyway. */
static bool
direct_ok(const struct ol_put *p, size_t len, size_t cap)
{
	return p->fill == 0 && len >= cap && (p->part || cap > p->st->inline_max);
}

int
ol_store_put_write(struct ol_put *p, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	size_t cap = stripe_cap(p->st);

	if (p->err)
		return p->err;
	while (len) {
		size_t n;

		if (p->fill == cap && (p->err = flush_stripe(p)))
			return p->err;
		if (direct_ok(p, len, cap)) {
			if ((p->err = write_stripe(p, b, cap)))
				return p->err;
			p->size += cap;
			b += cap;
			len -= cap;
			continue;
		}
		n = cap - p->fill < len ? cap - p->fill : len;
		if (p->fill + n > p->sbuf_cap) { /* outgrew inline: a whole stripe */
			uint8_t *sb = buf_get(p->st, cap);

			memcpy(sb, p->sbuf, p->fill);
			buf_put(p->st, p->sbuf, p->sbuf_cap);
			p->sbuf = sb;
			p->sbuf_cap = cap;
		}
		memcpy(p->sbuf + p->fill, b, n);
		p->fill += n;
		p->size += n;
		b += n;
		len -= n;
	}
	return 0;
}

void *
ol_store_buf_get(size_t size)
{
	return ol_iobuf_get(size);
}

void
ol_store_buf_put(void *buf, size_t size)
{
	ol_iobuf_put(buf, size);
}

size_t
ol_store_buf_cached(void)
{
	return ol_iobuf_cached_bytes();
}

uint64_t
ol_store_put_size(const struct ol_put *p)
{
	return p->size;
}

static void
close_files(struct ol_put *p, bool unlink_them)
{
	for (int d = 0; d < p->st->n; d++) {
		ol_shard_close(p->fd[d]);
		p->fd[d] = -1;
		if (unlink_them && p->files && p->st->d[d].meta)
			ol_shard_unlink(p->st, d, p->uuid);
	}
}

static void
put_free(struct ol_put *p)
{
	ol_flight_del(p->st, p->uuid);
	for (int i = 0; i < p->st->p; i++)
		buf_put(p->st, p->par[i], p->par_len);
	buf_put(p->st, p->sbuf, p->sbuf_cap);
	if (p->gate_st)
		ol_gate_leave(p->gate_st, p->gate);
	free(p);
}

void
ol_put_set_gate(struct ol_put *p, struct ol_store *st, unsigned g)
{
	p->gate_st = g ? st : NULL;
	p->gate = g;
}

void
ol_store_put_abort(struct ol_put *p)
{
	if (!p)
		return;
	close_files(p, true);
	put_free(p);
}

/* Shards durable: fsync the files and their directory entries, all drives at once. */
static int
sync_files(struct ol_put *p)
{
	struct ol_io_op ops[2 * OL_MAX_DRIVES];
	struct ol_store *st = p->st;
	uint64_t hedged;
	int n = st->n;

	if (!st->fsync)
		return good_drives(p) >= st->w ? 0 : -EIO;
	for (int d = 0; d < n; d++) {
		ops[d] =
		    (struct ol_io_op){.fd = p->bad[d] ? -1 : p->fd[d], .opcode = OL_IO_FDATASYNC};
		ops[n + d] =
		    (struct ol_io_op){.fd = p->bad[d] ? -1 : ol_open_shard_dir(st, d, p->uuid),
				      .opcode = OL_IO_FSYNC};
	}
	ol_shard_batch_spare(ops, (unsigned)(2 * n), good_drives(p) - st->w, &hedged);
	for (int d = 0; d < n; d++) {
		int rc = ops[d].res < 0 ? (int)ops[d].res : (int)ops[n + d].res;

		ol_shard_close(ops[n + d].fd);
		if (!p->bad[d] && rc < 0)
			drive_failed(p, d,
				     (hedged >> d | hedged >> (n + d)) & 1
					 ? "fsync (left behind: slow)"
					 : "fsync",
				     rc);
	}
	return good_drives(p) >= st->w ? 0 : -EIO;
}

/* Inline: the whole body is one short stripe coded into the records (one shard each). */
static void
inline_shards(struct ol_put *p, uint8_t **sh, uint32_t *bl)
{
	struct ol_store *st = p->st;

	*bl = (uint32_t)((p->size + st->k - 1) / st->k);
	memset(p->sbuf + p->size, 0, (size_t)st->k * *bl - p->size);
	for (int i = 0; i < st->k; i++)
		sh[i] = p->sbuf + (size_t)i * *bl;
	for (int i = 0; i < st->p; i++) {
		p->par[i] = ol_xmalloc(*bl ? *bl : 1);
		sh[st->k + i] = p->par[i];
		p->par_len = *bl ? *bl : 1;
	}
	ol_ec_encode(&st->ec, *bl, sh, sh + st->k);
}

static int
target_ok(struct ol_put *p)
{
	/* the bucket's (or the upload's) check as is: -ENOENT only when it is surely gone; -EIO
	 * when the drives that answered do not decide (a drive offline beside one that missed
	 * the bucket's or the upload's commit), which is not NoSuchBucket / NoSuchUpload */
	if (!p->part)
		return ol_bucket_check(p->st, p->bucket);
	return ol_upload_check(p->st, p->key, strlen(p->bucket) + 1 + 32);
}

static void
lock(struct ol_put *p, bool on)
{
	struct ol_store *st = p->st;
	unsigned i = ol_lock_idx(p->bucket, p->key, p->part ? strlen(p->bucket) + 33 : p->klen);

	if (on) {
		pthread_rwlock_rdlock(&st->bucket_lock);
		if (p->part)
			pthread_mutex_lock(&st->upl_locks[i]);
		else
			pthread_rwlock_wrlock(&st->obj_rw[i]);
		return;
	}
	if (p->part)
		pthread_mutex_unlock(&st->upl_locks[i]);
	else
		pthread_rwlock_unlock(&st->obj_rw[i]);
	pthread_rwlock_unlock(&st->bucket_lock);
}

static int
publish(struct ol_put *p, struct ol_rec_build *b)
{
	struct ol_store *st = p->st;
	char okey[OL_KEYBUF];
	struct ol_commit c = {.db = p->part ? OL_META_PARTS : OL_META_OBJECTS,
			      .b = b,
			      .skip = p->bad,
			      .skip_missed = true};
	uint8_t vis[OL_UUID];
	int64_t now;
	int rc, ok;

	if (p->part) {
		c.k = p->key;
		c.kl = p->klen;
	} else {
		c.k = okey;
		c.kl = ol_okey(okey, p->bucket, p->key, p->klen);
	}
	lock(p, true);
	/* stamped under the lock: the order of mtimes is the order of commits (a version
	 * the drain moves keeps its own) */
	now = ol_import_cur ? ol_import_cur->mtime : ol_now_ns(st);
	for (int d = 0; d < st->n; d++) {
		b[d].mtime = now;
		if (!p->part)
			ol_key_tail(&b[d], p->key, p->klen);
	}
	rc = target_ok(p);
	if (!rc && !p->part)
		rc = ol_cond_check(st, c.k, c.kl, &p->cond);
	if (!rc && ol_visible_vid(st, c.db, c.k, c.kl, vis))
		c.prev_vid = vis;
	if (!p->part && p->vmode) {
		c.vmode = p->vmode;
		for (int d = 0; d < st->n; d++)
			b[d].flags |= p->vmode == OL_STORE_VER_ON ? OL_REC_VERSIONED : 0;
	}
	ok = rc ? 0 : ol_commit_all(st, &c);
	lock(p, false);
	if (!rc && ok < st->w)
		rc = ol_commit_err(&c);
	if (!rc)
		ol_commit_reclaim(st, &c, NULL);
	ol_commit_free(&c);
	return rc;
}

/* ---- shard writers: the commit goes to the leader (store.h) ----
 * The request (little-endian): magic "OLCQ", version 1, flags (OL_CREQ_*), vmode, n, k, the
 * set's identity (store id, pool, set: its first drive's record), bucket, key, upload id, part
 * number, the version's uuid, size, etag, metadata, If-Match etag, the mask of drives the
 * writer failed, the inline shard length and, inline, the n shards, then with OL_CREQ_ABSENT
 * (only then: a writer with every drive sends what older leaders decode) the mask of drives
 * offline when the writer began. Variable fields are a 32-bit length and the bytes. */
#define CREQ_MAGIC   0x51434c4fu /* "OLCQ" */
#define CREQ_VERSION 1

struct wr {
	uint8_t *p;
	size_t n;
};

static void
w_u32(struct wr *w, uint32_t v)
{
	ol_put_u32(w->p + w->n, v);
	w->n += 4;
}

static void
w_bytes(struct wr *w, const void *b, size_t n)
{
	w_u32(w, (uint32_t)n);
	if (n)
		memcpy(w->p + w->n, b, n);
	w->n += n;
}

/* a string of at most OL_STORE_ETAG_MAX - 1 bytes (longer: truncated, as put_commit's etag) */
static void
w_str(struct wr *w, const char *s)
{
	w_bytes(w, s, s ? strnlen(s, OL_STORE_ETAG_MAX - 1) : 0);
}

/* the most bytes a request of p takes, with inline shards of bl bytes each (or none) */
static size_t
creq_cap(const struct ol_put *p, size_t meta_len, bool inl, uint32_t bl)
{
	const struct ol_store *st = p->st;

	return 136 + strlen(st->d[0].id.store) + sizeof(p->bucket) + p->klen +
	       sizeof(p->upload_id) + OL_STORE_ETAG_MAX * 2 + meta_len +
	       (inl ? (size_t)st->n * bl : 0);
}

static int
send_commit(struct ol_put *p, const char *etag, const void *meta, size_t meta_len, uint8_t **sh,
	    uint32_t bl, struct ol_obj_info *out)
{
	struct ol_store *st = p->st;
	const struct ol_driveid *id = &st->d[0].id;
	size_t cap = creq_cap(p, meta_len, sh != NULL, bl);
	struct wr w = {ol_xmalloc(cap), 0};
	uint64_t bad = 0;
	unsigned flags = (p->part ? OL_CREQ_PART : 0) | (sh ? OL_CREQ_INLINE : 0) |
			 (p->cond.if_none_match ? OL_CREQ_IF_NONE_MATCH : 0) |
			 (p->cond.if_match ? OL_CREQ_IF_MATCH : 0) |
			 (p->absent ? OL_CREQ_ABSENT : 0);
	int rc;

	if (!st->committer) {
		free(w.p);
		return -EROFS;
	}
	for (int d = 0; d < st->n; d++)
		bad |= (uint64_t)p->bad[d] << d;
	w_u32(&w, CREQ_MAGIC);
	w.p[w.n++] = CREQ_VERSION;
	w.p[w.n++] = (uint8_t)flags;
	w.p[w.n++] = (uint8_t)p->vmode;
	w.p[w.n++] = (uint8_t)st->n;
	w.p[w.n++] = (uint8_t)st->k;
	w_str(&w, id->store);
	w_u32(&w, id->pool);
	w_u32(&w, id->set);
	w_str(&w, p->bucket);
	w_bytes(&w, p->key, p->klen);
	w_str(&w, p->part ? p->upload_id : "");
	w_u32(&w, p->part_no);
	w_bytes(&w, p->uuid, OL_UUID);
	ol_put_u64(w.p + w.n, p->size);
	w.n += 8;
	w_str(&w, etag);
	w_bytes(&w, meta, p->part ? 0 : meta_len);
	w_str(&w, p->cond.if_match);
	ol_put_u64(w.p + w.n, bad);
	w.n += 8;
	w_u32(&w, sh ? bl : 0);
	for (int d = 0; sh && d < st->n; d++) {
		if (bl)
			memcpy(w.p + w.n, sh[d], bl);
		w.n += bl;
	}
	if (p->absent) {
		ol_put_u64(w.p + w.n, p->absent);
		w.n += 8;
	}
	rc = st->committer(st->committer_arg, w.p, w.n, out);
	free(w.p);
	return rc;
}

struct rd {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

static uint32_t
r_u32(struct rd *r)
{
	if (r->bad || r->n - r->off < 4) {
		r->bad = true;
		return 0;
	}
	r->off += 4;
	return ol_get_u32(r->p + r->off - 4);
}

static uint64_t
r_u64(struct rd *r)
{
	if (r->bad || r->n - r->off < 8) {
		r->bad = true;
		return 0;
	}
	r->off += 8;
	return ol_get_u64(r->p + r->off - 8);
}

static uint8_t
r_u8(struct rd *r)
{
	if (r->bad || r->off >= r->n) {
		r->bad = true;
		return 0;
	}
	return r->p[r->off++];
}

/* n raw bytes (no length before them), or NULL */
static const uint8_t *
r_raw(struct rd *r, size_t n)
{
	if (r->bad || r->n - r->off < n) {
		r->bad = true;
		return NULL;
	}
	r->off += n;
	return r->p + r->off - n;
}

/* a length-prefixed field of at most max bytes */
static const uint8_t *
r_bytes(struct rd *r, size_t max, size_t *len)
{
	uint32_t n = r_u32(r);

	*len = 0;
	if (n > max)
		r->bad = true;
	if (r->bad)
		return NULL;
	*len = n;
	return r_raw(r, n);
}

/* a string field into buf (cap bytes with its NUL) */
static void
r_str(struct rd *r, char *buf, size_t cap)
{
	size_t n;
	const uint8_t *b = r_bytes(r, cap - 1, &n);

	buf[0] = 0;
	if (!b)
		return;
	if (memchr(b, 0, n)) {
		r->bad = true;
		return;
	}
	memcpy(buf, b, n);
	buf[n] = 0;
}

int
ol_creq_decode(const void *req, size_t len, struct ol_creq *q)
{
	struct rd r = {req, len, 0, false};
	size_t n;

	memset(q, 0, sizeof(*q));
	if (r_u32(&r) != CREQ_MAGIC || r_u8(&r) != CREQ_VERSION)
		return -EBADMSG;
	q->flags = r_u8(&r);
	q->vmode = r_u8(&r);
	q->n = r_u8(&r);
	q->k = r_u8(&r);
	q->store = r_bytes(&r, OL_DRIVEID_STORE - 1, &q->store_len);
	q->pool = r_u32(&r);
	q->set = r_u32(&r);
	r_str(&r, q->bucket, sizeof(q->bucket));
	q->key = r_bytes(&r, OL_KEYBUF, &q->klen);
	r_str(&r, q->upload_id, sizeof(q->upload_id));
	q->part_no = r_u32(&r);
	q->uuid = r_bytes(&r, OL_UUID, &n);
	if (n != OL_UUID)
		r.bad = true;
	q->size = r_u64(&r);
	r_str(&r, q->etag, sizeof(q->etag));
	q->meta = r_bytes(&r, OL_STORE_MAX_META, &q->meta_len);
	r_str(&r, q->if_match, sizeof(q->if_match));
	q->bad = r_u64(&r);
	q->bl = r_u32(&r);
	if ((q->flags & OL_CREQ_INLINE) && q->n && q->bl <= len)
		q->inl = r_raw(&r, (size_t)q->n * q->bl);
	else if (q->flags & OL_CREQ_INLINE)
		r.bad = true;
	if (q->flags & OL_CREQ_ABSENT)
		q->absent = r_u64(&r);
	if (r.bad || r.off != len || (q->flags & ~31u) ||
	    ((q->flags & OL_CREQ_ABSENT) && (!q->absent || (q->absent & ~q->bad))) ||
	    q->vmode > OL_STORE_VER_SUSP || !q->n || q->n > OL_MAX_DRIVES || !q->k || q->k > q->n ||
	    !q->klen || !q->bucket[0] ||
	    ((q->flags & OL_CREQ_PART) && (!q->upload_id[0] || !q->part_no)) ||
	    ((q->flags & OL_CREQ_INLINE) && (q->flags & OL_CREQ_PART)))
		return -EBADMSG;
	return 0;
}

int
ol_store_commit_req_bucket(const void *req, size_t len, char bucket[64], bool *part)
{
	struct ol_creq q;

	if (ol_creq_decode(req, len, &q))
		return -EBADMSG;
	memcpy(bucket, q.bucket, sizeof(q.bucket));
	if (part)
		*part = q.flags & OL_CREQ_PART;
	return 0;
}

size_t
ol_store_info_encode(const struct ol_obj_info *in, uint8_t *buf)
{
	struct wr w = {buf, 0};

	ol_put_u64(buf, in->size);
	ol_put_u64(buf + 8, (uint64_t)in->mtime_ns);
	w.n = 16;
	w_str(&w, in->etag);
	w_str(&w, in->version_id);
	return w.n;
}

int
ol_store_info_decode(const uint8_t *buf, size_t len, struct ol_obj_info *out)
{
	struct rd r = {buf, len, 0, false};

	memset(out, 0, sizeof(*out));
	out->size = r_u64(&r);
	out->mtime_ns = (int64_t)r_u64(&r);
	r_str(&r, out->etag, sizeof(out->etag));
	r_str(&r, out->version_id, sizeof(out->version_id));
	return r.bad || r.off != len ? -EBADMSG : 0;
}

/* The records of a put, one per drive: inline, sh[d] is drive d's shard of bl bytes. */
static void
build_recs(struct ol_store *st, struct ol_rec_build *b, struct ol_rpart *part, bool inl,
	   const uint8_t *const *sh, uint32_t bl, uint64_t size, const uint8_t *vid,
	   const char *etag, const void *meta, size_t meta_len)
{
	int64_t now = ol_now_ns(st);

	for (int d = 0; d < st->n; d++)
		b[d] = (struct ol_rec_build){.st = st,
					     .flags = inl ? OL_REC_INLINE : 0,
					     .size = size,
					     .mtime = now,
					     .vid = vid,
					     .parts = part,
					     .n_parts = inl ? 0 : 1,
					     .etag = etag,
					     .meta = meta,
					     .meta_len = (uint32_t)meta_len,
					     .idx = d,
					     .inl = inl ? sh[d] : NULL,
					     .inl_len = inl ? bl : 0};
}

static void
info_out(struct ol_obj_info *out, uint64_t size, const char *etag, const struct ol_rec_build *b)
{
	memset(out, 0, sizeof(*out));
	out->size = size;
	out->mtime_ns = b->mtime; /* set by publish */
	snprintf(out->etag, sizeof(out->etag), "%s", etag ? etag : "");
	ol_ver_id_raw(b->flags, b->mtime, b->vid, out->version_id);
}

/* Drives the writer failed and this store has online missed the version (recorded by the
 * commit): they never left here, so no return starts the heal of missed writes that mends
 * them; the return callback is called for the first as if it had come back (it only starts
 * that heal, once, however many commits call it). */
static void
nudge_heal(struct ol_store *st, uint64_t bad)
{
	pthread_mutex_lock(&st->drv_mu); /* as back_online calls it (drive.c) */
	for (int d = 0; d < st->n && st->on_return; d++) {
		if (!(bad >> d & 1) || !atomic_load(&st->d[d].meta))
			continue;
		st->on_return(st->on_return_arg, st->d[d].root);
		break;
	}
	pthread_mutex_unlock(&st->drv_mu);
}

int
ol_set_commit_remote(struct ol_store *st, const struct ol_creq *q, int vmode,
		     struct ol_obj_info *out)
{
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rpart part = {.size = q->size, .part_no = q->part_no};
	const uint8_t *sh[OL_MAX_DRIVES];
	bool part_req = q->flags & OL_CREQ_PART, inl = q->flags & OL_CREQ_INLINE;
	struct ol_put *p;
	int rc;

	if ((int)q->n != st->n || (int)q->k != st->k || q->klen > OL_KEYBUF ||
	    (!part_req && q->klen > OL_STORE_MAX_KEY) || (inl && q->size > st->inline_max))
		return -ESTALE;
	for (int d = 0; d < st->n; d++) {
		if ((q->absent >> d & 1) && atomic_load(&st->d[d].meta)) {
			ol_debug("store: a writer's commit skipped drive %s, online here: refused "
				 "(its client retries)",
				 st->d[d].root);
			return -EAGAIN;
		}
	}
	p = ol_xcalloc(1, sizeof(*p));
	p->st = st;
	memcpy(p->bucket, q->bucket, sizeof(p->bucket));
	memcpy(p->key, q->key, q->klen);
	p->klen = q->klen;
	p->part = part_req;
	memcpy(p->upload_id, q->upload_id, sizeof(p->upload_id));
	p->part_no = q->part_no;
	memcpy(p->uuid, q->uuid, OL_UUID);
	p->size = q->size;
	p->cond.if_none_match = (q->flags & OL_CREQ_IF_NONE_MATCH) != 0;
	if (q->flags & OL_CREQ_IF_MATCH) {
		memcpy(p->cond_etag, q->if_match, sizeof(p->cond_etag));
		p->cond.if_match = p->cond_etag;
	}
	p->vmode = part_req ? 0 : vmode;
	for (int d = 0; d < st->n; d++) {
		p->fd[d] = -1;
		p->bad[d] = (q->bad >> d & 1) || st->d[d].meta == NULL;
		sh[d] = inl ? q->inl + (size_t)d * q->bl : NULL;
	}
	memcpy(part.uuid, p->uuid, OL_UUID);
	build_recs(st, b, &part, inl, sh, q->bl, q->size, p->uuid, q->etag,
		   part_req ? NULL : q->meta, part_req ? 0 : q->meta_len);
	rc = publish(p, b);
	if (!rc && out)
		info_out(out, q->size, q->etag, b);
	if (!rc && q->bad)
		nudge_heal(st, q->bad);
	free(p);
	return rc;
}

int
ol_store_put_commit(struct ol_put *p, const char *etag, const void *meta, size_t meta_len,
		    struct ol_obj_info *out_info)
{
	struct ol_store *st = p->st;
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rpart part = {.size = p->size, .part_no = p->part ? p->part_no : 0};
	uint8_t *sh[OL_EC_MAX_SHARDS];
	uint32_t bl = 0;
	bool inl = !p->part && !p->stripes && p->size <= st->inline_max, keep = false;
	int rc = p->err;

	/* a shard writer's inline shards travel in its commit: too many for it, shard files */
	if (inl && st->shards && st->commit_max &&
	    creq_cap(p, meta_len, true, (uint32_t)((p->size + st->k - 1) / st->k)) > st->commit_max)
		inl = false;

	if (meta_len > OL_STORE_MAX_META)
		rc = -EINVAL;
	if (!rc && !inl && p->fill)
		rc = flush_stripe(p);
	/* a zero-byte part has no stripe: its (empty) shard files still exist, so fsync and
	 * heal find them like any other part's */
	if (!rc && !inl && !p->files)
		open_files(p, false);
	if (!rc && !inl)
		rc = sync_files(p);
	close_files(p, false);
	if (!rc && inl)
		inline_shards(p, sh, &bl);
	memcpy(part.uuid, p->uuid, OL_UUID);
	if (!rc && st->shards) {
		struct ol_obj_info tmp;

		rc = send_commit(p, etag, meta, meta_len, inl ? sh : NULL, bl,
				 out_info ? out_info : &tmp);
		keep = rc == -ETIMEDOUT; /* it may have landed: the leader's sweep decides */
	} else if (!rc) {
		build_recs(st, b, &part, inl, (const uint8_t *const *)sh, bl, p->size,
			   ol_import_cur ? ol_import_cur->vid : p->uuid, etag,
			   p->part ? NULL : meta, p->part ? 0 : meta_len);
		rc = publish(p, b);
		if (!rc && out_info)
			info_out(out_info, p->size, etag, &b[0]);
	}
	if (rc && !keep)
		close_files(p, true);
	put_free(p);
	return rc;
}

void
ol_store_put_set_vmode(struct ol_put *p, int vmode)
{
	p->vmode = vmode;
}

void
ol_store_put_set_cond(struct ol_put *p, const struct ol_store_cond *cond)
{
	p->cond.if_none_match = cond && cond->if_none_match;
	p->cond.if_match = NULL;
	if (cond && cond->if_match) {
		snprintf(p->cond_etag, sizeof(p->cond_etag), "%s", cond->if_match);
		p->cond.if_match = p->cond_etag;
	}
}

int
ol_put_set_part(struct ol_put *p, const char *upload_id, unsigned part_no)
{
	p->part_no = part_no;
	memcpy(p->upload_id, upload_id, 33);
	return 0;
}

int
ol_set_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len)
{
	char okey[OL_KEYBUF];
	struct ol_commit c = {.db = OL_META_OBJECTS, .k = okey};
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES], any = false;
	unsigned li = ol_lock_idx(bucket, key, key_len);
	int rc = 0, found;

	if (key_len == 0 || key_len > OL_STORE_MAX_KEY)
		return -EINVAL;
	c.kl = ol_okey(okey, bucket, key, key_len);
	pthread_rwlock_rdlock(&st->bucket_lock);
	pthread_rwlock_wrlock(&st->obj_rw[li]);
	ol_reads_get(st, OL_META_OBJECTS, okey, c.kl, bucket, &r);
	found = ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid);
	for (int d = 0; d < st->n; d++)
		any |= r.raw[d] != NULL;
	if (r.bucket_votes < st->k) /* undecided (-EIO) when the drives away could make k */
		rc = r.bucket_votes + st->n - r.answered >= st->k ? -EIO : -ENXIO;
	else if (any && ol_commit_all(st, &c) < st->w)
		rc = ol_commit_err(&c);
	else if (!found)
		rc = -ENOENT;
	pthread_rwlock_unlock(&st->obj_rw[li]);
	pthread_rwlock_unlock(&st->bucket_lock);
	if (rc == 0 || rc == -ENOENT)
		ol_commit_reclaim(st, &c, NULL);
	ol_reads_free(&r);
	ol_commit_free(&c);
	return rc;
}
