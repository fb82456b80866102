/* kv/spill.c - NVMe tier: append-only segments, io_uring + O_DIRECT, crash recovery. */
#include "kv/spill.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/log.h"

#define REC_MAGIC 0x524b4c4fu /* "OLKR" */
#define REC_V1	  1	      /* value at OL_KVS_HDR */
#define REC_V2	  2	      /* value at OL_KVS_ALIGN: written straight from its DRAM slot */
#define MAX_SEGS  4096
#define WR_CHUNK  (4u << 20) /* an append batch goes to the device in writes of about this */
#define WR_DEPTH  8	     /* ... with up to this many in flight */

struct seg {
	uint64_t id;
	int fd;
	uint64_t size;
	int refs;
	bool dropped, unsynced;
};

struct ol_kvs {
	pthread_mutex_t mu;
	char dir[512];
	uint64_t cap, seg_nominal, used, next_id;
	struct seg *segs[MAX_SEGS]; /* oldest first; the last one is appended to */
	unsigned n_segs;
	bool roll_next; /* a write failed: the next append starts a new segment */
	uint64_t appended, dropped_segments, corrupt;
	/* the syncer thread: fdatasync off the append path (a flush can take 300 ms) */
	pthread_t syncer;
	pthread_cond_t sync_cv;
	bool syncer_running, sync_want, sync_stop;
};

/* ---- per-thread ring and bounce buffers ---- */

struct tls {
	struct io_uring ring;
	bool ring_ok;
	void *buf[2]; /* 0 = reads, 1 = appends (bounce blocks) */
	size_t cap[2];
	struct iovec *iov; /* an append batch's iovecs */
	size_t iov_cap;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void
tls_free(void *p)
{
	struct tls *t = p;
	if (t->ring_ok)
		io_uring_queue_exit(&t->ring);
	free(t->buf[0]);
	free(t->buf[1]);
	free(t->iov);
	free(t);
}

static void
tls_init_key(void)
{
	if (pthread_key_create(&tls_key, tls_free) != 0)
		ol_die("kv spill: pthread_key_create failed");
}

static struct tls *
tls_get(void)
{
	pthread_once(&tls_once, tls_init_key);
	struct tls *t = pthread_getspecific(tls_key);
	if (!t) {
		t = ol_xcalloc(1, sizeof(*t));
		t->ring_ok = io_uring_queue_init(2 * WR_DEPTH, &t->ring, 0) == 0;
		pthread_setspecific(tls_key, t);
	}
	return t;
}

static void *
tls_buf(struct tls *t, int which, size_t need)
{
	if (t->cap[which] >= need)
		return t->buf[which];
	free(t->buf[which]);
	size_t cap = need < (1u << 20) ? (1u << 20) : need;
	void *p = NULL;
	if (posix_memalign(&p, OL_KVS_ALIGN, cap) != 0)
		ol_die("kv spill: out of memory (%zu bytes)", cap);
	t->buf[which] = p;
	t->cap[which] = cap;
	return p;
}

static struct iovec *
tls_iov(struct tls *t, size_t need)
{
	if (t->iov_cap < need) {
		free(t->iov);
		t->iov = ol_xcalloc(need, sizeof(*t->iov));
		t->iov_cap = need;
	}
	return t->iov;
}

static int
rw_once(struct tls *t, int fd, uint8_t *buf, size_t len, uint64_t off, bool wr)
{
	if (!t->ring_ok) {
		ssize_t r = wr ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);
		return r < 0 ? -errno : (int)r;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (!sqe)
		return -EBUSY;
	unsigned n = len > (1u << 30) ? (1u << 30) : (unsigned)len;
	if (wr)
		io_uring_prep_write(sqe, fd, buf, n, off);
	else
		io_uring_prep_read(sqe, fd, buf, n, off);
	/* one syscall per request: submit and wait together (was submit, then wait) */
	int r = io_uring_submit_and_wait(&t->ring, 1);
	if (r < 0)
		return r;
	struct io_uring_cqe *cqe;
	r = io_uring_wait_cqe(&t->ring, &cqe); /* already complete: no syscall */
	if (r < 0)
		return r;
	r = cqe->res;
	io_uring_cqe_seen(&t->ring, cqe);
	return r;
}

static int
rw_all(struct tls *t, int fd, uint8_t *buf, size_t len, uint64_t off, bool wr)
{
	size_t done = 0;
	while (done < len) {
		int r = rw_once(t, fd, buf + done, len - done, off + done, wr);
		if (r == -EINTR || r == -EAGAIN)
			continue;
		if (r < 0)
			return r;
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/* ---- pipelined writes: chunks of a batch go to the device while the rest is encoded ---- */

/* A batch is a list of iovecs in file order: bounce blocks (headers, small records, a value's
 * partial last block) and the DRAM slots' own bytes (whole 4 KiB blocks of a version 2
 * record's value). Chunks of it go out as writev requests of about WR_CHUNK bytes (at most
 * WR_IOV iovecs, one iovec at most a whole value: kv.max_block_bytes caps it at 1 GiB, so a
 * request stays under 2 GiB) while the next records are checksummed. */
#define WR_IOV 1024 /* UIO_MAXIOV */

struct wr_pipe {
	struct tls *t;
	int fd;
	struct iovec *iov;
	unsigned niov, sent_iov; /* iovecs filled; handed to the device */
	uint64_t base;		 /* file offset of the batch */
	uint64_t filled, sent;	 /* bytes filled; handed to the device */
	uint64_t at[WR_DEPTH];	 /* per request in flight: batch offset, first iovec, count */
	unsigned iv0[WR_DEPTH], ivn[WR_DEPTH];
	bool busy[WR_DEPTH];
	unsigned inflight;
	int rc;
};

/* Append [b, b + len) to the batch, merged with the last iovec when it continues it. */
static void
pipe_add(struct wr_pipe *p, const void *b, uint64_t len)
{
	struct iovec *l = p->niov > p->sent_iov ? &p->iov[p->niov - 1] : NULL;
	if (len == 0)
		return;
	if (l && (const uint8_t *)l->iov_base + l->iov_len == (const uint8_t *)b)
		l->iov_len += len;
	else
		p->iov[p->niov++] = (struct iovec){(void *)b, len};
	p->filled += len;
}

/* Write iov[0..n) at off with pwritev until done, skipping the first skip bytes (a short
 * write's rest). The iovecs are the caller's to change. 0 or -errno. */
static int
pwritev_all(int fd, struct iovec *iov, unsigned n, uint64_t off, uint64_t skip)
{
	off += skip;
	while (n > 0) {
		while (n > 0 && skip >= iov->iov_len) {
			skip -= iov->iov_len;
			iov++;
			n--;
		}
		if (n == 0)
			break;
		iov->iov_base = (uint8_t *)iov->iov_base + skip;
		iov->iov_len -= skip;
		ssize_t w = pwritev(fd, iov, (int)n, (off_t)off);
		if (w < 0 && errno == EINTR)
			w = 0;
		else if (w < 0)
			return -errno;
		else if (w == 0)
			return -EIO;
		skip = (uint64_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Wait for one write of p to complete. A short write is finished synchronously. */
static void
pipe_reap(struct wr_pipe *p)
{
	struct io_uring_cqe *cqe;
	int r;
	while ((r = io_uring_wait_cqe(&p->t->ring, &cqe)) == -EINTR || r == -EAGAIN)
		;
	if (r < 0) /* writes still read the slots and buffers: going on could corrupt memory */
		ol_die("kv spill: io_uring wait failed with writes in flight: %s", strerror(-r));
	unsigned i = (unsigned)cqe->user_data;
	int res = cqe->res;
	io_uring_cqe_seen(&p->t->ring, cqe);
	p->busy[i] = false;
	p->inflight--;
	if (res < 0) {
		p->rc = p->rc ? p->rc : res;
	} else if (p->rc == 0) {
		uint64_t want = 0;
		for (unsigned k = 0; k < p->ivn[i]; k++)
			want += p->iov[p->iv0[i] + k].iov_len;
		if ((uint64_t)res < want)
			p->rc = pwritev_all(p->fd, p->iov + p->iv0[i], p->ivn[i],
					    p->base + p->at[i], (uint64_t)res);
	}
}

/* Hand what was filled and not yet sent to the device (without waiting, when the ring
 * allows). */
static void
pipe_send(struct wr_pipe *p)
{
	if (p->sent_iov == p->niov || p->rc)
		return;
	unsigned n = p->niov - p->sent_iov;
	if (!p->t->ring_ok) {
		p->rc = pwritev_all(p->fd, p->iov + p->sent_iov, n, p->base + p->sent, 0);
		goto sent;
	}
	while (p->inflight == WR_DEPTH)
		pipe_reap(p);
	unsigned i = 0;
	while (p->busy[i])
		i++;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&p->t->ring);
	if (!sqe) { /* cannot happen: the ring has twice WR_DEPTH entries */
		p->rc = -EBUSY;
		return;
	}
	io_uring_prep_writev(sqe, p->fd, p->iov + p->sent_iov, n, p->base + p->sent);
	io_uring_sqe_set_data64(sqe, i);
	int r = io_uring_submit(&p->t->ring);
	if (r < 0) {
		p->rc = r;
		return;
	}
	p->at[i] = p->sent;
	p->iv0[i] = p->sent_iov;
	p->ivn[i] = n;
	p->busy[i] = true;
	p->inflight++;
sent:
	p->sent_iov = p->niov;
	p->sent = p->filled;
}

/* Wait for every write of p. 0 or the first error. */
static int
pipe_finish(struct wr_pipe *p)
{
	while (p->inflight)
		pipe_reap(p);
	return p->rc;
}

/* ---- records ---- */

uint64_t
ol_kvs_rec_size(uint64_t len)
{
	return (OL_KVS_HDR + len + OL_KVS_ALIGN - 1) / OL_KVS_ALIGN * OL_KVS_ALIGN;
}

static void
put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8); /* little-endian hosts only (x86-64, aarch64) */
}

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint64_t
now_wall_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* Version 2 for a value whose record has the same size either way (its last 4 KiB block is
 * full or has no room for the header): whole blocks of it go to the device from the slot. */
static bool
rec_v2(uint64_t len)
{
	uint64_t r = len % OL_KVS_ALIGN;
	return len >= OL_KVS_ALIGN && (r == 0 || r > OL_KVS_ALIGN - OL_KVS_HDR);
}

/* The version a record of a len-byte value with flags is written as (a version 2 header never
 * carries flags: recovery refuses one that does). */
static uint16_t
rec_ver(uint64_t len, uint16_t flags)
{
	return rec_v2(len) && !flags ? REC_V2 : REC_V1;
}

/* Header of r at h (OL_KVS_HDR bytes) with value checksum vh (0: tombstone). */
static void
hdr_encode(uint8_t *h, const struct ol_kvs_rec *r, uint16_t ver, uint64_t vh)
{
	uint32_t magic = REC_MAGIC;
	memset(h, 0, OL_KVS_HDR);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &ver, 2);
	memcpy(h + 6, &r->flags, 2);
	memcpy(h + 8, r->kk, 48);
	put64(h + 56, r->len);
	put64(h + 64, r->ver);
	put64(h + 72, vh);
	put64(h + 80, now_wall_ms());
	put64(h + 120, XXH3_64bits(h, 120));
}

/* 0 and r, the value checksum and the value's offset in the record filled, or -EBADMSG.
 * Pure. */
static int
hdr_decode(const uint8_t *h, struct ol_kvs_rec *r, uint64_t *val_hash, uint64_t *val_off)
{
	uint32_t magic;
	uint16_t ver;
	memcpy(&magic, h, 4);
	memcpy(&ver, h + 4, 2);
	if (magic != REC_MAGIC || (ver != REC_V1 && ver != REC_V2) ||
	    get64(h + 120) != XXH3_64bits(h, 120))
		return -EBADMSG;
	memcpy(&r->flags, h + 6, 2);
	memcpy(r->kk, h + 8, 48);
	r->len = get64(h + 56);
	r->ver = get64(h + 64);
	*val_hash = get64(h + 72);
	*val_off = ver == REC_V2 ? OL_KVS_ALIGN : OL_KVS_HDR;
	if (ver == REC_V2 && (!rec_v2(r->len) || r->flags != 0))
		return -EBADMSG; /* no writer makes that: do not trust its length */
	return 0;
}

/* ---- segments ---- */

static int
seg_open(struct ol_kvs *s, uint64_t id, bool create, struct seg **out)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/seg-%010llu.olkv", s->dir, (unsigned long long)id);
	int fl = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
	int fd = open(path, fl | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, fl, 0600); /* file system without O_DIRECT (tmpfs) */
	if (fd < 0)
		return -errno;
	struct seg *g = ol_xcalloc(1, sizeof(*g));
	g->id = id;
	g->fd = fd;
	*out = g;
	return 0;
}

static void
seg_unref(struct seg *g)
{
	if (--g->refs <= 0 && g->dropped) {
		close(g->fd);
		free(g);
	}
}

static void
seg_drop_oldest(struct ol_kvs *s)
{
	struct seg *g = s->segs[0];
	char path[600];
	memmove(s->segs, s->segs + 1, (s->n_segs - 1) * sizeof(s->segs[0]));
	s->n_segs--;
	s->used -= g->size;
	s->dropped_segments++;
	snprintf(path, sizeof(path), "%s/seg-%010llu.olkv", s->dir, (unsigned long long)g->id);
	if (unlink(path) != 0)
		ol_warn("kv spill: unlink %s: %s", path, strerror(errno));
	g->dropped = true;
	g->refs++;
	seg_unref(g);
}

static int
seg_roll(struct ol_kvs *s)
{
	struct seg *g;
	if (s->n_segs == MAX_SEGS)
		seg_drop_oldest(s);
	int r = seg_open(s, s->next_id, true, &g);
	if (r < 0) {
		ol_err("kv spill: cannot create segment %llu in %s: %s",
		       (unsigned long long)s->next_id, s->dir, strerror(-r));
		return r;
	}
	s->next_id++;
	s->segs[s->n_segs++] = g;
	return 0;
}

/* ---- recovery ---- */

static int
seg_filter(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n == 19 && strncmp(d->d_name, "seg-", 4) == 0 &&
	       strcmp(d->d_name + 14, ".olkv") == 0;
}

static uint64_t
seg_scan(struct ol_kvs *s, struct seg *g, uint8_t *buf, ol_kvs_recover_fn fn, void *arg)
{
	struct stat st;
	uint64_t off = 0, size = fstat(g->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	while (off + OL_KVS_ALIGN <= size) {
		struct ol_kvs_rec r;
		uint64_t vh, voff;
		if (pread(g->fd, buf, OL_KVS_ALIGN, (off_t)off) != OL_KVS_ALIGN)
			break;
		if (hdr_decode(buf, &r, &vh, &voff) < 0)
			break;
		uint64_t rs = ol_kvs_rec_size(r.len);
		if (off + rs > size)
			break; /* torn tail */
		struct ol_kvs_loc loc = {g->id, off};
		fn(arg, &r, &loc);
		off += rs;
	}
	if (off < size) {
		ol_warn("kv spill: segment %llu: torn or garbage tail at %llu of %llu, cut",
			(unsigned long long)g->id, (unsigned long long)off,
			(unsigned long long)size);
		if (ftruncate(g->fd, (off_t)off) != 0)
			ol_warn("kv spill: ftruncate: %s", strerror(errno));
	}
	return off;
}

static int
recover(struct ol_kvs *s, ol_kvs_recover_fn fn, void *arg)
{
	struct dirent **ents;
	int n = scandir(s->dir, &ents, seg_filter, alphasort);
	if (n < 0)
		return -errno;
	uint8_t *buf = tls_buf(tls_get(), 0, OL_KVS_ALIGN);
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char *end;
		uint64_t id = strtoull(ents[i]->d_name + 4, &end, 10);
		struct seg *g;
		if (rc == 0 && *end == '.' && s->n_segs < MAX_SEGS &&
		    seg_open(s, id, false, &g) == 0) {
			g->size = seg_scan(s, g, buf, fn, arg);
			s->used += g->size;
			s->segs[s->n_segs++] = g;
			if (id >= s->next_id)
				s->next_id = id + 1;
		}
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* fdatasync the segments written since their last sync (lock held, dropped around each
 * fdatasync; a segment dropped meanwhile stays open through its reference). One sweep:
 * what is written during it is left for the next. */
static int
sync_segments(struct ol_kvs *s)
{
	struct seg *todo[16];
	unsigned n;
	int rc = 0;
	do {
		n = 0;
		for (unsigned i = 0; i < s->n_segs && n < 16; i++) {
			if (!s->segs[i]->unsynced)
				continue;
			s->segs[i]->unsynced = false;
			s->segs[i]->refs++;
			todo[n++] = s->segs[i];
		}
		pthread_mutex_unlock(&s->mu);
		for (unsigned i = 0; i < n; i++)
			if (fdatasync(todo[i]->fd) != 0 && rc == 0)
				rc = -errno;
		pthread_mutex_lock(&s->mu);
		for (unsigned i = 0; i < n; i++)
			seg_unref(todo[i]);
	} while (n == 16);
	return rc;
}

static void *
syncer_main(void *arg)
{
	struct ol_kvs *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->sync_stop) {
		if (!s->sync_want) {
			pthread_cond_wait(&s->sync_cv, &s->mu);
			continue;
		}
		s->sync_want = false;
		int rc = sync_segments(s);
		if (rc < 0)
			ol_warn("kv spill: fdatasync in %s: %s", s->dir, strerror(-rc));
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int
ol_kvs_open(const char *dir, uint64_t cap, uint64_t max_value, ol_kvs_recover_fn fn, void *arg,
	    struct ol_kvs **out)
{
	if (strlen(dir) >= sizeof(((struct ol_kvs *)0)->dir))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	struct ol_kvs *s = ol_xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->sync_cv, NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->cap = cap;
	s->next_id = 1;
	uint64_t nominal = cap / 16;
	if (nominal < (4u << 20))
		nominal = 4u << 20;
	if (nominal > (256u << 20))
		nominal = 256u << 20;
	(void)max_value; /* a record larger than a segment has a segment of its own */
	s->seg_nominal = nominal;
	int r = recover(s, fn, arg);
	if (r == 0)
		r = seg_roll(s);
	if (r == 0 && (r = -pthread_create(&s->syncer, NULL, syncer_main, s)) == 0)
		s->syncer_running = true;
	if (r < 0) {
		ol_kvs_close(s);
		return r;
	}
	*out = s;
	return 0;
}

void
ol_kvs_close(struct ol_kvs *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->syncer_running) {
		s->sync_stop = true;
		pthread_cond_signal(&s->sync_cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->syncer, NULL);
		pthread_mutex_lock(&s->mu);
	}
	int rc = sync_segments(s);
	if (rc < 0)
		ol_warn("kv spill: fdatasync at close of %s: %s", s->dir, strerror(-rc));
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->n_segs; i++) {
		if (s->segs[i]->size == 0 && i + 1 == s->n_segs) {
			char path[600];
			snprintf(path, sizeof(path), "%s/seg-%010llu.olkv", s->dir,
				 (unsigned long long)s->segs[i]->id);
			unlink(path);
		}
		close(s->segs[i]->fd);
		free(s->segs[i]);
	}
	pthread_cond_destroy(&s->sync_cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void
make_room(struct ol_kvs *s, uint64_t rs, uint64_t *dropped, unsigned *n_dropped)
{
	while (s->used + rs > s->cap && s->n_segs > 1) {
		if (*n_dropped >= 8)
			break;
		dropped[(*n_dropped)++] = s->segs[0]->id;
		seg_drop_oldest(s);
	}
}

/* Bounce bytes the record of it needs: the whole record (version 1, or a value not 4 KiB
 * aligned in memory), else the header block and the value's partial last block. */
static uint64_t
rec_bounce(const struct ol_kvs_item *it)
{
	uint64_t len = it->val ? it->rec.len : 0;
	if (rec_ver(len, it->rec.flags) == REC_V1 || (uintptr_t)it->val % OL_KVS_ALIGN)
		return ol_kvs_rec_size(len);
	return OL_KVS_ALIGN + (len % OL_KVS_ALIGN ? OL_KVS_ALIGN : 0);
}

/* Add the record of it to p: the header (and a version 1 record whole) encoded at *bb in the
 * bounce buffer, a version 2 value's whole blocks straight from val (read by the device, not
 * copied), its partial last block copied and zero-padded. The checksum is taken over val;
 * the caller keeps val unchanged until the write completed (the engine pins the slot). A
 * value changed anyway is caught by the checksum at every read. Returns the record's size. */
static uint64_t
rec_add(struct wr_pipe *p, uint8_t **bb, const struct ol_kvs_item *it)
{
	struct ol_kvs_rec rr = it->rec;
	const uint8_t *val = it->val;
	if (!val)
		rr.len = 0;
	uint64_t rs = ol_kvs_rec_size(rr.len), vh = val ? XXH3_64bits(val, rr.len) : 0;
	uint8_t *b = *bb;
	if (rec_ver(rr.len, rr.flags) == REC_V1) {
		hdr_encode(b, &rr, REC_V1, vh);
		if (val)
			memcpy(b + OL_KVS_HDR, val, rr.len);
		memset(b + OL_KVS_HDR + rr.len, 0, rs - OL_KVS_HDR - rr.len);
		pipe_add(p, b, rs);
		*bb = b + rs;
		return rs;
	}
	hdr_encode(b, &rr, REC_V2, vh);
	memset(b + OL_KVS_HDR, 0, OL_KVS_ALIGN - OL_KVS_HDR);
	pipe_add(p, b, OL_KVS_ALIGN);
	b += OL_KVS_ALIGN;
	uint64_t whole = rr.len / OL_KVS_ALIGN * OL_KVS_ALIGN, part = rr.len - whole;
	if ((uintptr_t)val % OL_KVS_ALIGN) { /* O_DIRECT needs aligned memory: copy */
		memcpy(b, val, whole);
		pipe_add(p, b, whole);
		b += whole;
	} else {
		pipe_add(p, val, whole);
	}
	if (part) {
		memcpy(b, val + whole, part);
		memset(b + part, 0, OL_KVS_ALIGN - part);
		pipe_add(p, b, OL_KVS_ALIGN);
		b += OL_KVS_ALIGN;
	}
	*bb = b;
	return rs;
}

uint64_t
ol_kvs_batch_bytes(const struct ol_kvs *s)
{
	return s->seg_nominal < OL_KVS_BATCH ? s->seg_nominal : OL_KVS_BATCH;
}

/* The write at g->size failed: cut off whatever part of it landed (recovery must not find
 * records of a batch reported failed) and start a new segment with the next append. */
static void
seg_fail(struct ol_kvs *s, struct seg *g)
{
	if (ftruncate(g->fd, (off_t)g->size) != 0)
		ol_warn("kv spill: ftruncate segment %llu: %s", (unsigned long long)g->id,
			strerror(errno));
	s->roll_next = true;
}

int
ol_kvs_append_batch(struct ol_kvs *s, struct ol_kvs_item *it, unsigned n, uint64_t *dropped,
		    unsigned *n_dropped)
{
	struct tls *t = tls_get();
	uint64_t total = 0, bounce = 0;
	for (unsigned i = 0; i < n; i++) {
		total += ol_kvs_rec_size(it[i].val ? it[i].rec.len : 0);
		bounce += rec_bounce(&it[i]);
	}
	uint8_t *bb = tls_buf(t, 1, bounce);
	struct iovec *iov = tls_iov(t, 3 * (size_t)n);
	*n_dropped = 0;
	pthread_mutex_lock(&s->mu);
	struct seg *g = s->segs[s->n_segs - 1];
	int rc = 0;
	if (s->roll_next || (g->size > 0 && g->size + total > s->seg_nominal)) {
		if ((rc = seg_roll(s)) < 0)
			goto out;
		s->roll_next = false;
		g = s->segs[s->n_segs - 1];
	}
	make_room(s, total, dropped, n_dropped);
	/* encode record by record; every WR_CHUNK bytes go to the device while the next are
	 * checksummed (the lock is held throughout: appends stay in order, and a failed batch
	 * is cut off before anything lands after it) */
	struct wr_pipe p = {.t = t, .fd = g->fd, .iov = iov, .base = g->size};
	for (unsigned i = 0; i < n; i++) {
		it[i].loc.off = p.filled;
		rec_add(&p, &bb, &it[i]);
		if (p.filled - p.sent >= WR_CHUNK || p.niov - p.sent_iov + 3 > WR_IOV)
			pipe_send(&p);
	}
	pipe_send(&p);
	rc = pipe_finish(&p);
	if (rc < 0) {
		ol_err("kv spill: write segment %llu: %s", (unsigned long long)g->id,
		       strerror(-rc));
		seg_fail(s, g);
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		it[i].loc.seg = g->id;
		it[i].loc.off += g->size;
	}
	g->size += total;
	g->unsynced = true;
	s->used += total;
	s->appended += n;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int
ol_kvs_append(struct ol_kvs *s, const struct ol_kvs_rec *r, const void *val, struct ol_kvs_loc *loc,
	      uint64_t *dropped, unsigned *n_dropped)
{
	struct ol_kvs_item it = {*r, val, {0, 0}};
	int rc = ol_kvs_append_batch(s, &it, 1, dropped, n_dropped);
	if (rc == 0)
		*loc = it.loc;
	return rc;
}

int
ol_kvs_sync(struct ol_kvs *s)
{
	pthread_mutex_lock(&s->mu);
	int rc = sync_segments(s);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void
ol_kvs_sync_async(struct ol_kvs *s)
{
	pthread_mutex_lock(&s->mu);
	s->sync_want = true;
	pthread_cond_signal(&s->sync_cv);
	pthread_mutex_unlock(&s->mu);
}

static struct seg *
seg_find_ref(struct ol_kvs *s, uint64_t id)
{
	struct seg *g = NULL;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = s->n_segs; i-- > 0;) {
		if (s->segs[i]->id == id) {
			g = s->segs[i];
			g->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return g;
}

/* Check the record at buf against want; its value's offset in buf (the record's version
 * says) or -EBADMSG. */
static int64_t
check_rec(const uint8_t *buf, const struct ol_kvs_rec *want)
{
	struct ol_kvs_rec r;
	uint64_t vh, voff;
	if (hdr_decode(buf, &r, &vh, &voff) < 0 || memcmp(r.kk, want->kk, 48) != 0 ||
	    r.len != want->len || r.ver != want->ver || r.flags != 0)
		return -EBADMSG;
	return XXH3_64bits(buf + voff, r.len) == vh ? (int64_t)voff : -EBADMSG;
}

int
ol_kvs_read(struct ol_kvs *s, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc,
	    const void **val)
{
	struct tls *t = tls_get();
	uint64_t rs = ol_kvs_rec_size(r->len);
	uint8_t *buf = tls_buf(t, 0, rs);
	struct seg *g = seg_find_ref(s, loc->seg);
	if (!g)
		return -ENOENT;
	int rc = rw_all(t, g->fd, buf, rs, loc->off, false);
	pthread_mutex_lock(&s->mu);
	seg_unref(g);
	pthread_mutex_unlock(&s->mu);
	return rc < 0 ? rc : ol_kvs_verify(s, r, buf, val);
}

int
ol_kvs_extent_get(struct ol_kvs *s, const struct ol_kvs_loc *loc, uint64_t rec_len,
		  struct ol_kvs_ext *x)
{
	struct seg *g = seg_find_ref(s, loc->seg);
	if (!g)
		return -ENOENT;
	x->fd = g->fd;
	x->off = loc->off;
	x->len = ol_kvs_rec_size(rec_len);
	x->seg = g;
	return 0;
}

void
ol_kvs_extent_put(struct ol_kvs *s, struct ol_kvs_ext *x)
{
	pthread_mutex_lock(&s->mu);
	seg_unref(x->seg);
	pthread_mutex_unlock(&s->mu);
	x->seg = NULL;
	x->fd = -1;
}

int
ol_kvs_verify(struct ol_kvs *s, const struct ol_kvs_rec *r, const uint8_t *buf, const void **val)
{
	int64_t voff = check_rec(buf, r);
	if (voff < 0) {
		pthread_mutex_lock(&s->mu);
		s->corrupt++;
		pthread_mutex_unlock(&s->mu);
		return (int)voff;
	}
	*val = buf + voff;
	return 0;
}

void
ol_kvs_get_stats(struct ol_kvs *s, struct ol_kvs_stats *st)
{
	pthread_mutex_lock(&s->mu);
	st->cap = s->cap;
	st->used = s->used;
	st->segments = s->n_segs;
	st->appended = s->appended;
	st->dropped_segments = s->dropped_segments;
	st->corrupt = s->corrupt;
	pthread_mutex_unlock(&s->mu);
}
