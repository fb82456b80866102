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
#include <unistd.h>
#include <xxhash.h>

#include "base/log.h"

#define REC_MAGIC 0x524b4c4fu /* "OLKR" */
#define REC_VER	  1
#define MAX_SEGS  4096

struct seg {
	uint64_t id;
	int fd;
	uint64_t size;
	int refs;
	bool dropped;
};

struct ol_kvs {
	pthread_mutex_t mu;
	char dir[512];
	uint64_t cap, seg_nominal, used, next_id;
	struct seg *segs[MAX_SEGS]; /* oldest first; the last one is appended to */
	unsigned n_segs;
	uint64_t appended, dropped_segments, corrupt;
};

/* ---- per-thread ring and bounce buffers ---- */

struct tls {
	struct io_uring ring;
	bool ring_ok;
	void *buf[2]; /* 0 = reads, 1 = appends */
	size_t cap[2];
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
		t->ring_ok = io_uring_queue_init(4, &t->ring, 0) == 0;
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
	int r = io_uring_submit(&t->ring);
	if (r < 0)
		return r;
	struct io_uring_cqe *cqe;
	r = io_uring_wait_cqe(&t->ring, &cqe);
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

static void
hdr_encode(uint8_t *h, const struct ol_kvs_rec *r, const void *val)
{
	uint32_t magic = REC_MAGIC;
	uint16_t ver = REC_VER;
	memset(h, 0, OL_KVS_HDR);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &ver, 2);
	memcpy(h + 6, &r->flags, 2);
	memcpy(h + 8, r->kk, 48);
	put64(h + 56, r->len);
	put64(h + 64, r->ver);
	put64(h + 72, val ? XXH3_64bits(val, r->len) : 0);
	put64(h + 80, now_wall_ms());
	put64(h + 120, XXH3_64bits(h, 120));
}

/* 0 and r filled, or -EBADMSG */
static int
hdr_decode(const uint8_t *h, struct ol_kvs_rec *r, uint64_t *val_hash)
{
	uint32_t magic;
	uint16_t ver;
	memcpy(&magic, h, 4);
	memcpy(&ver, h + 4, 2);
	if (magic != REC_MAGIC || ver != REC_VER || get64(h + 120) != XXH3_64bits(h, 120))
		return -EBADMSG;
	memcpy(&r->flags, h + 6, 2);
	memcpy(r->kk, h + 8, 48);
	r->len = get64(h + 56);
	r->ver = get64(h + 64);
	*val_hash = get64(h + 72);
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
		uint64_t vh;
		if (pread(g->fd, buf, OL_KVS_ALIGN, (off_t)off) != OL_KVS_ALIGN)
			break;
		if (hdr_decode(buf, &r, &vh) < 0)
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
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->cap = cap;
	s->next_id = 1;
	uint64_t nominal = cap / 16;
	if (nominal < (4u << 20))
		nominal = 4u << 20;
	if (nominal > (256u << 20))
		nominal = 256u << 20;
	(void)max_value; /* a record larger than a segment gets a segment of its own */
	s->seg_nominal = nominal;
	int r = recover(s, fn, arg);
	if (r == 0)
		r = seg_roll(s);
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

int
ol_kvs_append(struct ol_kvs *s, const struct ol_kvs_rec *r, const void *val, struct ol_kvs_loc *loc,
	      uint64_t *dropped, unsigned *n_dropped)
{
	struct tls *t = tls_get();
	uint64_t rs = ol_kvs_rec_size(val ? r->len : 0);
	uint8_t *buf = tls_buf(t, 1, rs);
	struct ol_kvs_rec rr = *r;
	if (!val)
		rr.len = 0;
	hdr_encode(buf, &rr, val);
	if (val)
		memcpy(buf + OL_KVS_HDR, val, rr.len);
	memset(buf + OL_KVS_HDR + rr.len, 0, rs - OL_KVS_HDR - rr.len);
	*n_dropped = 0;
	pthread_mutex_lock(&s->mu);
	struct seg *g = s->segs[s->n_segs - 1];
	int rc = 0;
	if (g->size > 0 && g->size + rs > s->seg_nominal) {
		if ((rc = seg_roll(s)) < 0)
			goto out;
		g = s->segs[s->n_segs - 1];
	}
	make_room(s, rs, dropped, n_dropped);
	rc = rw_all(t, g->fd, buf, rs, g->size, true);
	if (rc < 0) {
		ol_err("kv spill: write segment %llu: %s", (unsigned long long)g->id,
		       strerror(-rc));
		goto out;
	}
	loc->seg = g->id;
	loc->off = g->size;
	g->size += rs;
	s->used += rs;
	s->appended++;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int
ol_kvs_sync(struct ol_kvs *s)
{
	pthread_mutex_lock(&s->mu);
	int rc = fdatasync(s->segs[s->n_segs - 1]->fd) == 0 ? 0 : -errno;
	pthread_mutex_unlock(&s->mu);
	return rc;
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

static int
check_rec(const uint8_t *buf, const struct ol_kvs_rec *want)
{
	struct ol_kvs_rec r;
	uint64_t vh;
	if (hdr_decode(buf, &r, &vh) < 0 || memcmp(r.kk, want->kk, 48) != 0 || r.len != want->len ||
	    r.ver != want->ver || r.flags != 0)
		return -EBADMSG;
	return XXH3_64bits(buf + OL_KVS_HDR, r.len) == vh ? 0 : -EBADMSG;
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
	if (rc == 0 && (rc = check_rec(buf, r)) < 0) {
		pthread_mutex_lock(&s->mu);
		s->corrupt++;
		pthread_mutex_unlock(&s->mu);
	}
	if (rc == 0)
		*val = buf + OL_KVS_HDR;
	return rc;
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
