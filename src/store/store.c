/* store/store.c - opening the drives, buckets, quorum reads and the per-drive commit. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/config.h"
#include "base/clock.h"
#include "base/log.h"
#include "store/store_int.h"

int64_t
ol_now_ns(struct ol_store *st)
{
	struct timespec ts;
	int64_t now, last;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	last = atomic_load(&st->last_ns);
	do {
		if (now <= last)
			now = last + 1;
	} while (!atomic_compare_exchange_weak(&st->last_ns, &last, now));
	return now;
}

void
ol_uuid(uint8_t out[OL_UUID])
{
	if (getrandom(out, OL_UUID, 0) != OL_UUID)
		ol_die("store: getrandom failed");
}

size_t
ol_okey(char *buf, const char *bucket, const char *key, size_t klen)
{
	size_t bl = strlen(bucket);
	uint64_t h;

	memcpy(buf, bucket, bl + 1);
	if (klen <= OL_KEY_HEAD) {
		memcpy(buf + bl + 1, key, klen);
		return bl + 1 + klen;
	}
	memcpy(buf + bl + 1, key, OL_KEY_HEAD);
	h = XXH3_64bits(key, klen);
	for (int i = 0; i < 8; i++)
		buf[bl + 1 + OL_KEY_HEAD + i] = (char)(h >> (56 - 8 * i));
	return bl + 1 + OL_KEY_HEAD + 8;
}

void
ol_key_tail(struct ol_rec_build *b, const char *key, size_t klen)
{
	if (klen <= OL_KEY_HEAD)
		return;
	b->tail = (const uint8_t *)key + OL_KEY_HEAD;
	b->tail_len = (uint16_t)(klen - OL_KEY_HEAD);
}

unsigned
ol_lock_idx(const char *bucket, const void *key, size_t klen)
{
	return (unsigned)((XXH3_64bits(bucket, strlen(bucket)) ^ XXH3_64bits(key, klen)) %
			  OL_NLOCKS);
}

/* mkdir -p; the error says which dir and why. */
int
ol_mkdir_p(const char *path)
{
	char buf[OL_PATH_MAX];
	struct stat sb;
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		buf[i] = 0;
		if (mkdir(buf, 0700) && errno != EEXIST) {
			ol_err("store: cannot create data dir %s: %s", buf, strerror(errno));
			return -errno;
		}
		if (stat(buf, &sb) || !S_ISDIR(sb.st_mode)) {
			ol_err("store: data dir %s: %s", buf,
			       errno ? strerror(errno) : "exists and is not a directory");
			return -ENOTDIR;
		}
		buf[i] = i == len ? 0 : '/';
	}
	return 0;
}

/* Every record of every database decodes (its checksum holds): 0, -EUCLEAN, or -errno. */
static int
verify_db(struct ol_meta_txn *t, enum ol_meta_db db)
{
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl, a, b;
	struct ol_rec r;
	int64_t x;
	const char *kp;
	const void *mp;
	int bad = 0, rc = ol_meta_cursor_open(t, db, &c);

	if (rc)
		return rc;
	for (rc = ol_meta_cursor_seek(c, "", 0, &k, &kl, &v, &vl); rc == 1 && !bad;
	     rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl)) {
		if (db == OL_META_BUCKETS)
			bad = ol_brec_check(v, vl);
		else if (db == OL_META_UPLOADS)
			bad = ol_urec_decode(v, vl, &x, &kp, &a, &mp, &b);
		else
			bad = ol_rec_decode(v, vl, &r);
	}
	ol_meta_cursor_close(c);
	return bad ? -EUCLEAN : rc;
}

int
ol_verify_records(struct ol_meta *m)
{
	struct ol_meta_txn *t = NULL;
	int rc = ol_meta_begin(m, false, &t);

	for (int db = 0; !rc && db < OL_META_NDB; db++)
		rc = verify_db(t, (enum ol_meta_db)db);
	ol_meta_abort(t); /* on a broken env: frees our wrapper only */
	return rc;
}

static int
drive_open(struct ol_store *st, int i, const char *root)
{
	struct ol_drive *d = &st->d[i];
	char p[OL_PATH_MAX + 32];
	struct ol_meta *m = NULL;
	int rc;

	snprintf(d->root, sizeof(d->root), "%s", root);
	snprintf(d->data, sizeof(d->data), "%s/.openlake/data", root);
	snprintf(p, sizeof(p), "%s/.openlake", root);
	rc = ol_mkdir_p(root);
	if (!rc)
		rc = ol_mkdir_p(p);
	if (!rc)
		rc = ol_mkdir_p(d->data);
	if (rc)
		return rc;
	snprintf(p, sizeof(p), "%s/.openlake/lock", root);
	d->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		rc = -errno;
		ol_err("store: data dir %s: cannot open %s: %s", root, p, strerror(-rc));
		return rc;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = -errno;
		ol_err("store: data dir %s is in use by another process (%s)", root, strerror(-rc));
		return rc;
	}
	rc = ol_drive_open_meta(st, i, &m);
	if (rc) {
		ol_err("store: data dir %s: cannot open metadata: %s", root, strerror(-rc));
		return rc;
	}
	rc = ol_verify_records(m);
	if (rc == -EUCLEAN) {
		/* a record failing its checksum: the index is damaged, not to be written to */
		ol_meta_close(m);
		m = NULL;
		ol_warn("store: data dir %s: a metadata record failed its checksum", root);
		d->damaged = true;
		rc = ol_drive_open_meta(st, i, &m);
	}
	if (rc) {
		ol_err("store: data dir %s: cannot open metadata: %s", root, strerror(-rc));
		return rc;
	}
	d->mounted = ol_is_mount_point(root);
	atomic_store(&d->meta, m);
	return 0;
}

static int
geometry(struct ol_store *st, const struct ol_config *cfg)
{
	st->n = (int)(cfg->set_drive_count ? cfg->set_drive_count : cfg->n_data_dirs);
	st->p = (int)cfg->default_parity_count;
	st->k = st->n - st->p;
	if (st->n < 1 || st->n > OL_MAX_DRIVES || (unsigned)st->n > cfg->n_data_dirs || st->k < 1 ||
	    st->p < 0) {
		ol_err("store: bad geometry: %u data dirs, set_drive_count %d, parity %d",
		       cfg->n_data_dirs, st->n, st->p);
		return -EINVAL;
	}
	/* W = max(k, N/2 + 1, P + 1): a commit on W drives is seen by any k, and the <= N - W
	 * stale copies it leaves behind can never reach k votes */
	st->w = st->n / 2 + 1 > st->k ? st->n / 2 + 1 : st->k;
	if (st->p + 1 > st->w)
		st->w = st->p + 1;
	st->bs = cfg->block_size ? (uint32_t)cfg->block_size : (1u << 20);
	st->inline_max = cfg->inline_threshold;
	st->ck = strcmp(cfg->checksum, "xxh3") == 0 ? OL_CK_XXH3 : OL_CK_CRC32C;
	st->fsync = cfg->fsync;
	if (cfg->block_size > (1u << 30) || st->bs < 64)
		return -EINVAL;
	return ol_ec_init(&st->ec, st->k, st->p);
}

int
ol_store_new(const struct ol_config *cfg, struct ol_store **out)
{
	struct ol_store *st = ol_xcalloc(1, sizeof(*st));
	int rc = geometry(st, cfg);

	if (rc) {
		free(st);
		return rc;
	}
	pthread_rwlock_init(&st->bucket_lock, NULL);
	st->inuse = ol_inuse_new();
	ol_reclaim_init(st);
	pthread_mutex_init(&st->cq_mu, NULL);
	pthread_cond_init(&st->cq_cv, NULL);
	pthread_mutex_init(&st->drv_mu, NULL);
	pthread_cond_init(&st->drv_cv, NULL);
	pthread_mutex_init(&st->fl_mu, NULL);
	st->cq_tail = &st->cq_head;
	st->n_sets = 1;
	st->sets[0] = st;
	st->upl_tag = -1;
	st->missed_cap = OL_MISSED_CAP;
	pthread_rwlock_init(&st->brw, NULL);
	for (int i = 0; i < OL_NLOCKS; i++) {
		pthread_mutex_init(&st->upl_locks[i], NULL);
		pthread_rwlock_init(&st->obj_rw[i], NULL);
	}
	for (int i = 0; i < st->n; i++)
		st->d[i].lock_fd = -1;
	*out = st;
	return 0;
}

int
ol_set_open(const struct ol_config *cfg, const struct ol_driveid *ids, struct ol_store **out)
{
	struct ol_store *st;
	int online = 0, rc = ol_store_new(cfg, &st);

	if (rc)
		return rc;
	for (int i = 0; i < st->n; i++) {
		if (ids)
			st->d[i].id = ids[i];
		if (drive_open(st, i, cfg->data_dirs[i]) == 0)
			online++;
		else
			snprintf(st->d[i].why, sizeof(st->d[i].why),
				 "could not be opened at start");
	}
	if (online < st->w) {
		ol_err("store: only %d of %d drives usable, need %d", online, st->n, st->w);
		ol_set_close(st);
		return -EIO;
	}
	ol_sweep(st);
	ol_missed_count(st);
	if (atomic_load(&st->missed_pending))
		ol_info("store: %llu missed-write records pending (a heal restores them)",
			(unsigned long long)atomic_load(&st->missed_pending));
	ol_info("store: %d drives (%d online), %d data + %d parity, write quorum %d, block %u",
		st->n, online, st->k, st->p, st->w, st->bs);
	if (online < st->n)
		ol_warn("store: DEGRADED: %d of %d drives offline; serving from the rest, the "
			"offline ones are retried every second",
			st->n - online, st->n);
	ol_drive_monitor_start(st);
	*out = st;
	return 0;
}

void
ol_set_close(struct ol_store *st)
{
	if (!st)
		return;
	ol_drive_monitor_stop(st);
	ol_reclaim_fini(st); /* what waits for its delay is unlinked while the drives serve */
	for (int i = 0; i < st->n; i++) {
		ol_meta_close(st->d[i].meta);
		ol_meta_close(st->d[i].parked);
		if (st->d[i].lock_fd >= 0)
			close(st->d[i].lock_fd);
		ol_rd_free(st->d[i].rd);
	}
	for (int i = 0; i < OL_NLOCKS; i++) {
		pthread_mutex_destroy(&st->upl_locks[i]);
		pthread_rwlock_destroy(&st->obj_rw[i]);
	}
	pthread_rwlock_destroy(&st->bucket_lock);
	pthread_rwlock_destroy(&st->brw);
	pthread_mutex_destroy(&st->cq_mu);
	pthread_cond_destroy(&st->cq_cv);
	pthread_mutex_destroy(&st->drv_mu);
	pthread_cond_destroy(&st->drv_cv);
	pthread_mutex_destroy(&st->fl_mu);
	free(st->flight);
	ol_ec_fini(&st->ec);
	ol_inuse_free(st->inuse);
	free(st);
}

int
ol_set_drive_count(const struct ol_store *st)
{
	return st->n;
}

const char *
ol_set_drive_path(const struct ol_store *st, int i)
{
	return i >= 0 && i < st->n ? st->d[i].root : NULL;
}

int
ol_set_drives_online(const struct ol_store *st)
{
	int n = 0;

	for (int i = 0; i < st->n; i++)
		n += st->d[i].meta != NULL;
	return n;
}

struct rg {
	enum ol_meta_db db;
	const void *key;
	size_t klen;
	const char *bucket;
	struct ol_reads *r;
	struct ol_store *st;
	enum ol_reads_how how;
	bool bk[OL_MAX_DRIVES], ans[OL_MAX_DRIVES];
};

static void
read_one(struct ol_store *st, int d, void *arg)
{
	struct rg *a = arg;
	struct ol_reads *r = a->r;
	struct ol_meta *m = atomic_load(&st->d[d].meta);
	struct ol_meta_txn *t;
	const void *v;
	size_t vl;
	int rb = -ENOENT, rk = -ENOENT;

	if (!m)
		return;
	if (ol_meta_begin(m, false, &t)) {
		ol_drive_check(st, d, m);
		return;
	}
	/* a lookup (REC) reads the key first: a drive that holds a record of the key holds its
	 * bucket (a bucket is emptied before it is deleted), so the bucket is read only where
	 * the key is absent (NoSuchKey or NoSuchBucket); every other read asks both */
	if (a->bucket && a->how != OL_READS_REC)
		rb = ol_meta_get(t, OL_META_BUCKETS, a->bucket, strlen(a->bucket), &v, &vl);
	if (a->key && rb != -ECANCELED &&
	    (rk = ol_meta_get(t, a->db, a->key, a->klen, &v, &vl)) == 0) {
		r->raw[d] = ol_xmalloc(vl ? vl : 1);
		memcpy(r->raw[d], v, vl);
		r->len[d] = vl;
	}
	if (a->bucket && a->how == OL_READS_REC && rk != -ECANCELED)
		rb = rk == 0
			 ? 0
			 : ol_meta_get(t, OL_META_BUCKETS, a->bucket, strlen(a->bucket), &v, &vl);
	if (rb == -ECANCELED || rk == -ECANCELED) { /* left behind: no answer, no fault */
		free(r->raw[d]);
		r->raw[d] = NULL;
		ol_meta_abort(t);
		return;
	}
	if (ol_meta_broken(m, NULL)) { /* a fault: what it read does not count */
		free(r->raw[d]);
		r->raw[d] = NULL;
		ol_meta_abort(t); /* frees our wrapper only: the env is abandoned */
		ol_drive_check(st, d, m);
		return;
	}
	a->bk[d] = rb == 0;
	a->ans[d] = true;
	ol_meta_abort(t);
}

/* Do the answers of the drives done[] decide what the caller concludes (see ol_reads_how)? */
static bool
read_decided(void *arg, const bool *done)
{
	struct rg *a = arg;
	struct ol_store *st = a->st;
	const void *raw[OL_MAX_DRIVES];
	size_t len[OL_MAX_DRIVES];
	int pending = 0, answered = 0, bk = 0, held = 0, key;

	for (int d = 0; d < st->n; d++) {
		bool in = done[d] && a->ans[d];

		pending += !done[d];
		answered += in;
		bk += in && a->bk[d];
		raw[d] = in ? a->r->raw[d] : NULL;
		len[d] = in ? a->r->len[d] : 0;
		held += raw[d] != NULL;
	}
	if (a->how == OL_READS_REC)
		key = ol_rec_decide_sound(st->n, st->k, raw, len, pending, st->n - answered,
					  &a->r->sound);
	else
		key = ol_presence_decide(held, st->n - answered, st->k);
	/* attrs: the newest update among the answers; an acknowledged one is on >= w drives, so
	 * on one of the answers when fewer than w are pending */
	if (a->how == OL_READS_ATTRS && key == OL_DECIDE_FOUND && pending >= st->w)
		return false;
	/* a read-only view must not serve a version older than one a write quorum may hold (it
	 * may lag its writer): decided only while the drives it has not heard from are fewer than
	 * w, so that a version only they hold cannot be on w */
	if (st->readonly && key == OL_DECIDE_FOUND && st->n - answered >= st->w)
		return false;
	if (key != OL_DECIDE_ABSENT)
		return key == OL_DECIDE_FOUND;
	/* the key absent: a lookup's answer is then the bucket's (NoSuchKey or NoSuchBucket) */
	return !a->bucket || ol_presence_decide(bk, st->n - answered, st->k) != OL_DECIDE_WAIT;
}

/* A read of a store whose drives are all local: drive after drive (the data shards' drives
 * first), until the answers decide (read_decided). The rest are not asked (a quorum read: a
 * local drive is never hedged, so nothing is abandoned or counted); they come back in the mask
 * as drives left behind do, so that no heal takes them for drives that missed the write.
 * Stores with remote drives: ol_each_drive_hedged. Reads only: a commit goes to every drive. */
static uint32_t
read_drives(struct ol_store *st, struct rg *a)
{
	bool done[OL_MAX_DRIVES] = {false};
	int held = 0, answered = 0;

	for (int d = 0; d < st->n; d++)
		if (ol_drive_remote(st, d))
			return ol_each_drive_hedged(st, read_one, read_decided, a);
	for (int d = 0; d < st->n; d++) {
		read_one(st, d, a);
		done[d] = true;
		answered += a->ans[d];
		held += a->ans[d] && a->r->raw[d];
		/* nothing decides while fewer than k hold the record and k still could (the
		 * decoding read_decided does is then spared) */
		if (d + 1 < st->n && (held >= st->k || held + st->n - answered < st->k) &&
		    read_decided(a, done))
			return (uint32_t)((1ull << st->n) - (1ull << (d + 1)));
	}
	return 0;
}

void
ol_reads_get_as(struct ol_store *st, enum ol_meta_db db, const void *key, size_t klen,
		const char *bucket, struct ol_reads *r, enum ol_reads_how how)
{
	struct rg a = {
	    .db = db, .key = key, .klen = klen, .bucket = bucket, .r = r, .st = st, .how = how};
	uint32_t left = 0;

	memset(r, 0, sizeof(*r));
	if (how == OL_READS_ALL)
		ol_each_drive(st, read_one, &a); /* remote drives read at once */
	else
		left = read_drives(st, &a);
	for (int d = 0; d < st->n; d++) {
		r->bucket_votes += a.bk[d];
		r->answered += a.ans[d];
		if (!a.ans[d] && (left & (1u << d)))
			r->left |= 1u << d;
	}
}

void
ol_reads_get(struct ol_store *st, enum ol_meta_db db, const void *key, size_t klen,
	     const char *bucket, struct ol_reads *r)
{
	ol_reads_get_as(st, db, key, klen, bucket, r, OL_READS_ALL);
}

int
ol_reads_absent(const struct ol_store *st, const struct ol_reads *r)
{
	int votes = 0;

	for (int d = 0; d < st->n; d++)
		votes += r->raw[d] != NULL;
	return votes + st->n - r->answered >= st->k ? -EIO : -ENOENT;
}

void
ol_reads_free(struct ol_reads *r)
{
	for (int d = 0; d < OL_MAX_DRIVES; d++)
		free(r->raw[d]);
}

/* Present on >= k drives. An online drive that lacks the record is given it back (heal). */
int
ol_bucket_check(struct ol_store *st, const char *bucket)
{
	struct ol_reads r;
	uint8_t *raw[OL_MAX_DRIVES];
	bool skip[OL_MAX_DRIVES];
	int votes = 0, online = 0, first = -1, rc;

	ol_reads_get_as(st, OL_META_BUCKETS, bucket, strlen(bucket), NULL, &r, OL_READS_PRESENT);
	for (int d = 0; d < st->n; d++) {
		/* a drive left behind is not known to lack it: no heal of it here */
		online += st->d[d].meta != NULL && !(r.left & (1u << d));
		if (r.raw[d]) {
			votes++;
			first = first < 0 ? d : first;
		}
	}
	if (votes >= st->k && votes < online) {
		struct ol_commit c = {.db = OL_META_BUCKETS,
				      .k = bucket,
				      .kl = strlen(bucket),
				      .raw = raw,
				      .raw_len = r.len,
				      .skip = skip};

		for (int d = 0; d < st->n; d++) {
			raw[d] = r.raw[first];
			r.len[d] = r.len[first];
			skip[d] = r.raw[d] != NULL || (r.left & (1u << d));
		}
		if (ol_commit_all(st, &c) > 0)
			ol_info("store: healed bucket record %s", bucket);
		ol_commit_free(&c);
	}
	rc = votes >= st->k ? 0 : ol_reads_absent(st, &r);
	ol_reads_free(&r);
	return rc;
}

static void
keep_copy(void **dst, size_t *dl, const void *v, size_t vl)
{
	*dst = ol_xmalloc(vl ? vl : 1);
	memcpy(*dst, v, vl);
	*dl = vl;
}

void
ol_commit_gone(struct ol_commit *c, int d, const void *v, size_t vl)
{
	c->gone[d] = ol_xrealloc(c->gone[d], (c->n_gone[d] + 1) * sizeof(void *));
	c->gone_len[d] = ol_xrealloc(c->gone_len[d], (c->n_gone[d] + 1) * sizeof(size_t));
	keep_copy(&c->gone[d][c->n_gone[d]], &c->gone_len[d][c->n_gone[d]], v, vl);
	c->n_gone[d]++;
}

static int
del_prefix(struct ol_meta_txn *t, struct ol_commit *c, int d)
{
	struct ol_meta_cursor *cur;
	const void *k, *v;
	size_t kl, vl;
	int rc = ol_meta_cursor_open(t, OL_META_PARTS, &cur);

	if (rc)
		return rc;
	for (rc = ol_meta_cursor_seek(cur, c->del_prefix, c->del_plen, &k, &kl, &v, &vl); rc == 1;
	     rc = ol_meta_cursor_seek(cur, c->del_prefix, c->del_plen, &k, &kl, &v, &vl)) {
		if (kl < c->del_plen || memcmp(k, c->del_prefix, c->del_plen)) {
			rc = 0; /* past the prefix: another upload's part, not an error */
			break;
		}
		ol_commit_gone(c, d, v, vl);
		rc = ol_meta_cursor_del(cur);
		if (rc)
			break;
	}
	ol_meta_cursor_close(cur);
	/* 1: the cursor stopped on a key past the prefix (another upload's part), not an error */
	return rc < 0 ? rc : 0;
}

/* The prev of a new record: the visible version as this drive holds it. Keeping the
 * drive's current record instead would, after a crash left a losing newer version there,
 * drop the visible version's vote. */
static uint8_t *
pick_prev(const struct ol_commit *c, const void *v, size_t vl, size_t *sl)
{
	struct ol_rec cur, pr;
	uint8_t *o;

	if (!c->prev_vid || ol_rec_decode(v, vl, &cur))
		return ol_rec_strip(v, vl, sl);
	if (!memcmp(cur.vid, c->prev_vid, OL_UUID))
		return ol_rec_strip(v, vl, sl);
	if (!cur.prev_len || ol_rec_decode(cur.prev, cur.prev_len, &pr) ||
	    memcmp(pr.vid, c->prev_vid, OL_UUID))
		return NULL;
	o = ol_xmalloc(cur.prev_len);
	memcpy(o, cur.prev, cur.prev_len);
	*sl = cur.prev_len;
	return o;
}

int
ol_visible_vid(struct ol_store *st, enum ol_meta_db db, const void *k, size_t kl,
	       uint8_t vid[OL_UUID])
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	int found, d;

	ol_reads_get_as(st, db, k, kl, NULL, &r, OL_READS_REC);
	found = ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid);
	for (d = 0; found && !valid[d]; d++)
		;
	if (found)
		memcpy(vid, win[d].vid, OL_UUID);
	ol_reads_free(&r);
	return found;
}

int
ol_cond_check(struct ol_store *st, const void *k, size_t kl, const struct ol_store_cond *cond)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	int found, d, rc = 0;

	if (!cond || (!cond->if_match && !cond->if_none_match))
		return 0;
	ol_reads_get_as(st, OL_META_OBJECTS, k, kl, NULL, &r, OL_READS_REC);
	found = ol_rec_resolve(st, (const void *const *)r.raw, r.len, win, valid);
	for (d = 0; found && !valid[d]; d++)
		;
	if (found && (win[d].flags & OL_REC_DELMARK))
		found = 0; /* a delete marker is no object */
	if (found && cond->if_none_match)
		rc = -ECANCELED;
	else if (!found && cond->if_match)
		rc = -ENODATA;
	else if (found && cond->if_match && strcmp(cond->if_match, "*") != 0 &&
		 (strlen(cond->if_match) != win[d].etag_len ||
		  strncasecmp(cond->if_match, win[d].etag, win[d].etag_len) != 0))
		rc = -ECANCELED;
	ol_reads_free(&r);
	return rc;
}

static int
put_one(struct ol_meta_txn *t, struct ol_commit *c, int d)
{
	const void *v;
	size_t vl, sl = 0;
	uint8_t *rec, *strip = NULL;
	int rc = 0;

	if (c->vdel_k)
		return ol_ver_del_one(t, c, d);
	if (c->set_vid)
		return ol_ver_meta_one(t, c, d);
	if (ol_meta_get(t, c->db, c->k, c->kl, &v, &vl) == 0) {
		keep_copy(&c->old[d], &c->old_len[d], v, vl);
		if (c->b)
			strip = pick_prev(c, v, vl, &sl);
	}
	if (c->b) {
		struct ol_rec_build b = c->b[d];
		struct ol_rec o;

		/* a new version must sort after the one it replaces, even if the clock
		 * went back across a restart */
		if (c->old[d] && !ol_rec_decode(c->old[d], c->old_len[d], &o) && o.mtime >= b.mtime)
			b.mtime = o.mtime + 1;
		b.prev = strip;
		b.prev_len = (uint32_t)sl;
		rec = ol_rec_encode(&b, &vl);
		rc = ol_meta_put(t, c->db, c->k, c->kl, rec, vl);
		if (!rc && c->vmode)
			rc = ol_ver_apply(t, c, d, rec, vl, strip, sl);
		free(rec);
	} else if (c->raw) {
		rc = ol_meta_put(t, c->db, c->k, c->kl, c->raw[d], c->raw_len[d]);
	} else if (c->old[d]) {
		rc = ol_meta_del(t, c->db, c->k, c->kl);
	}
	free(strip);
	/* an unversioned write over a key that has versions: the replaced record is one of
	 * them (or its prev is), so it is not reclaimed */
	if (!rc && c->db == OL_META_OBJECTS && !c->vmode && c->old[d] &&
	    ol_ver_has(t, c->k, c->kl)) {
		free(c->old[d]);
		c->old[d] = NULL;
		c->old_len[d] = 0;
	}
	if (!rc && c->del_key)
		rc = ol_meta_del(t, OL_META_UPLOADS, c->del_key, c->del_kl);
	if (rc == -ENOENT)
		rc = 0;
	if (!rc && c->del_prefix)
		rc = del_prefix(t, c, d);
	return rc;
}

struct ol_cq {
	struct ol_commit *c;
	int ok;
	bool done;
	struct ol_cq *next;
};

static bool
skipped(const struct ol_store *st, const struct ol_commit *c, int d)
{
	return !st->d[d].meta || (c->skip && c->skip[d]);
}

/* Forget what a failed txn did for c on drive d. */
static void
undo_drive(struct ol_commit *c, int d)
{
	free(c->old[d]);
	c->old[d] = NULL;
	c->old_len[d] = 0;
	for (size_t i = 0; i < c->n_gone[d]; i++)
		free(c->gone[d][i]);
	free(c->gone[d]);
	free(c->gone_len[d]);
	c->gone[d] = NULL;
	c->gone_len[d] = NULL;
	c->n_gone[d] = 0;
	c->done[d] = false;
}

/* One commit on one drive in its own txn. */
static void
one_txn(struct ol_store *st, struct ol_commit *c, int d)
{
	struct ol_meta *m = atomic_load(&st->d[d].meta);
	struct ol_meta_txn *t;
	int rc = ol_meta_begin(m, true, &t);

	if (!rc) {
		rc = put_one(t, c, d);
		if (!rc)
			rc = ol_missed_put(st, t, c, d);
		if (rc)
			ol_meta_abort(t);
		else
			rc = ol_meta_commit(t);
	}
	if (rc)
		ol_drive_check(st, d, m);
	if (rc == -ESTALE)
		c->stale = true;
	if (rc == -ECANCELED) { /* left behind (slow): batch_run says so, once */
		undo_drive(c, d);
		return;
	}
	if (rc) {
		undo_drive(c, d);
		ol_warn("store: drive %s: metadata commit failed: %s", st->d[d].root,
			rc == -ESTALE ? "refused, the drive has seen a newer set-leader epoch"
				      : strerror(-rc));
		return;
	}
	c->done[d] = true;
}

/* Every queued commit in one txn on drive d; if any fails, each goes alone. */
static void
batch_drive(struct ol_store *st, struct ol_cq *b, int d)
{
	struct ol_meta *m = atomic_load(&st->d[d].meta);
	struct ol_meta_txn *t = NULL;
	int rc = ol_meta_begin(m, true, &t);

	for (struct ol_cq *x = b; x && !rc; x = x->next)
		if (!skipped(st, x->c, d)) {
			rc = put_one(t, x->c, d);
			if (!rc)
				rc = ol_missed_put(st, t, x->c, d);
		}
	if (!rc) {
		rc = ol_meta_commit(t);
		t = NULL;
	}
	if (rc == -ECANCELED) { /* left behind (slow): no fault, no retries on it */
		ol_meta_abort(t);
		for (struct ol_cq *x = b; x; x = x->next)
			undo_drive(x->c, d);
		return;
	}
	if (rc && ol_meta_broken(m, NULL)) { /* faulted: the drive goes, no retries on it */
		ol_meta_abort(t);
		ol_drive_check(st, d, m);
		for (struct ol_cq *x = b; x; x = x->next)
			undo_drive(x->c, d);
		return;
	}
	if (rc) {
		ol_meta_abort(t);
		for (struct ol_cq *x = b; x; x = x->next)
			if (!skipped(st, x->c, d)) {
				undo_drive(x->c, d);
				one_txn(st, x->c, d);
			}
		return;
	}
	for (struct ol_cq *x = b; x; x = x->next)
		x->c->done[d] = !skipped(st, x->c, d);
}

struct cq_ctx {
	struct ol_store *st;
	struct ol_cq *b;
};

static void
batch_one(struct ol_store *st, int d, void *arg)
{
	struct ol_cq *b = ((struct cq_ctx *)arg)->b;

	if (atomic_load(&st->d[d].meta))
		batch_drive(st, b, d);
	else
		for (struct ol_cq *x = b; x; x = x->next)
			x->c->done[d] = false;
}

/* After c's batch: count the new missed entries (those of the drive that made most), and
 * record the drives that were online and meant to commit but failed (m: online at start). */
static void
missed_after(struct ol_store *st, struct ol_commit *c, struct ol_meta *const *m)
{
	uint32_t failed = 0;
	int most = 0, ok = 0;

	for (int d = 0; d < st->n; d++) {
		ok += c->done[d];
		if (c->done[d] && c->missed && c->missed_new[d] > most)
			most = c->missed_new[d];
		if (m[d] && !c->done[d] && !(c->skip && c->skip[d]))
			failed |= 1u << d;
	}
	atomic_fetch_add(&st->missed_pending, (uint64_t)most);
	if (failed && ok && ol_missed_mask(st, &(struct ol_commit){0}, failed))
		ol_missed_follow(st, c, failed);
}

/* Has every commit of the batch landed on a write quorum of the drives done[]? */
static bool
commit_decided(void *arg, const bool *done)
{
	struct cq_ctx *q = arg;

	for (struct ol_cq *x = q->b; x; x = x->next) {
		int ok = 0;

		for (int d = 0; d < q->st->n; d++)
			ok += done[d] && x->c->done[d];
		if (ok < q->st->w)
			return false;
	}
	return true;
}

/* The drives a batch left behind (left): each counts as failed for every commit of the batch
 * that it did not answer (missed_after records the miss on the drives that took it; one that
 * answered as it was cut holds it) and takes a new generation before its next commit, so that
 * the abandoned commit, if it still arrives, is refused there once a newer one landed instead
 * of landing over it (landing before, it is an older record, and heal rewrites it). Batches
 * run one at a time, so no other commit of this batch queue is on its way to the drive; a
 * heal's own commit of a missed entry's removal that is (missed.c) and is refused fails as
 * any failed commit does (the entry stays). */
static void
left_behind(struct ol_store *st, uint32_t left)
{
	for (int d = 0; d < st->n; d++) {
		if (!(left & (1u << d)))
			continue;
		ol_rd_fence_next(st->d[d].rd);
		ol_warn("store: drive %s: metadata commit (left behind: slow) failed: its writes "
			"count as missed there, for heal",
			st->d[d].root);
	}
}

static void
batch_run(struct ol_store *st, struct ol_cq *b)
{
	struct cq_ctx q = {st, b};
	struct ol_io_op ops[OL_MAX_DRIVES];

	struct ol_meta *m[OL_MAX_DRIVES];
	uint32_t off = 0;
	int64_t now = ol_clock_wall_ns();

	for (int d = 0; d < st->n; d++) {
		m[d] = atomic_load(&st->d[d].meta);
		off |= m[d] ? 0 : 1u << d;
	}
	for (struct ol_cq *x = b; x; x = x->next) {
		x->c->missed = ol_missed_mask(st, x->c, off);
		x->c->missed_ns = now;
	}
	/* remote drives commit at once; those above the write quorum may be left behind */
	left_behind(st, ol_each_drive_hedged(st, batch_one, commit_decided, &q));
	if (st->fsync) { /* LMDB runs MDB_NOSYNC: one fdatasync per drive covers the batch */
		for (int d = 0; d < st->n; d++)
			ops[d] = (struct ol_io_op){.fd = m[d] ? ol_meta_fd(m[d]) : -1,
						   .opcode = OL_IO_FDATASYNC};
		ol_io_batch(ops, st->n);
		for (int d = 0; d < st->n; d++) {
			if (!m[d] || ops[d].res >= 0 || ol_meta_is_remote(m[d]))
				continue; /* a remote drive synced its commit before it answered */
			ol_warn("store: drive %s: metadata fsync failed: %s", st->d[d].root,
				strerror((int)-ops[d].res));
			for (struct ol_cq *x = b; x; x = x->next)
				x->c->done[d] = false;
		}
	}
	for (struct ol_cq *x = b; x; x = x->next)
		missed_after(st, x->c, m);
	for (struct ol_cq *x = b; x; x = x->next)
		for (int d = 0; d < st->n; d++)
			x->ok += x->c->done[d];
}

int
ol_commit_all(struct ol_store *st, struct ol_commit *c)
{
	struct ol_cq me = {.c = c};

	if (st->readonly) { /* the last guard: no drive of a read-only view is written */
		c->rofs = true;
		return 0;
	}
	pthread_mutex_lock(&st->cq_mu);
	*st->cq_tail = &me;
	st->cq_tail = &me.next;
	while (!me.done) {
		struct ol_cq *b, *nx;

		if (st->cq_busy) {
			pthread_cond_wait(&st->cq_cv, &st->cq_mu);
			continue;
		}
		st->cq_busy = true;
		b = st->cq_head;
		st->cq_head = NULL;
		st->cq_tail = &st->cq_head;
		pthread_mutex_unlock(&st->cq_mu);
		batch_run(st, b);
		pthread_mutex_lock(&st->cq_mu);
		for (struct ol_cq *x = b; x; x = nx) {
			nx = x->next;
			x->done = true;
		}
		st->cq_busy = false;
		pthread_cond_broadcast(&st->cq_cv);
	}
	pthread_mutex_unlock(&st->cq_mu);
	return me.ok;
}

void
ol_commit_reclaim(struct ol_store *st, struct ol_commit *c, const struct ol_rec *keep)
{
	for (int d = 0; d < st->n; d++) {
		if (!c->done[d])
			continue;
		ol_reclaim(st, d, c->old[d], c->old_len[d], keep);
		for (size_t i = 0; i < c->n_gone[d]; i++)
			ol_reclaim(st, d, c->gone[d][i], c->gone_len[d][i], keep);
	}
}

int
ol_commit_err(const struct ol_commit *c)
{
	return c->rofs ? -EROFS : c->stale ? -ESTALE : -EIO;
}

void
ol_commit_free(struct ol_commit *c)
{
	for (int d = 0; d < OL_MAX_DRIVES; d++) {
		free(c->old[d]);
		for (size_t i = 0; i < c->n_gone[d]; i++)
			free(c->gone[d][i]);
		free(c->gone[d]);
		free(c->gone_len[d]);
	}
}
