/* meta/remote.c - an env whose records live on another node (meta.h, "remote environments").
 * The transport is the owner's callbacks; here: the write txn's overlay (its puts and dels,
 * sorted by db and key, which its own lookups and cursors read first), cursors that read pages
 * and merge them with the overlay, and a broken flag for a drive that did not answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "meta/meta_int.h"

struct ol_rmeta {
	const struct ol_meta_remote_ops *ops;
	void *arg;
	bool sync;
};

struct ov {
	uint8_t db;
	bool del;
	void *k, *v;
	size_t kl, vl;
};

struct ol_rtxn {
	bool write;
	struct ov *ov; /* sorted by (db, key) */
	size_t n, cap;
	void **keep; /* values returned by get: freed when the txn ends */
	size_t nkeep, capkeep;
};

struct ol_rcur {
	struct ol_meta_txn *t;
	uint8_t db;
	struct ol_meta_page pg[3]; /* pg[0] current; two older ones kept for the caller */
	size_t i;		   /* next entry of pg[0] */
	bool end;		   /* the drive has nothing after pg[0] */
	bool positioned;
	void *cur; /* the last key returned (a copy) */
	size_t cur_kl;
};

/* LMDB's default order: bytes, then the shorter first. */
static int
kcmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

static int
ovcmp(const struct ov *o, uint8_t db, const void *k, size_t kl)
{
	if (o->db != db)
		return o->db < db ? -1 : 1;
	return kcmp(o->k, o->kl, k, kl);
}

/* Index of the first overlay entry >= (db, k) (strict: > (db, k)). */
static size_t
ov_bound(const struct ol_rtxn *r, uint8_t db, const void *k, size_t kl, bool strict)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = ovcmp(&r->ov[mid], db, k, kl);

		if (c < 0 || (strict && c == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct ov *
ov_find(const struct ol_rtxn *r, uint8_t db, const void *k, size_t kl)
{
	size_t i = ov_bound(r, db, k, kl, false);

	return i < r->n && !ovcmp(&r->ov[i], db, k, kl) ? &r->ov[i] : NULL;
}

static void
ov_set(struct ol_rtxn *r, uint8_t db, const void *k, size_t kl, const void *v, size_t vl, bool del)
{
	size_t i = ov_bound(r, db, k, kl, false);
	struct ov *o;

	if (i < r->n && !ovcmp(&r->ov[i], db, k, kl)) {
		o = &r->ov[i];
		free(o->v);
	} else {
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 8;
			r->ov = ol_xrealloc(r->ov, r->cap * sizeof(*r->ov));
		}
		memmove(&r->ov[i + 1], &r->ov[i], (r->n - i) * sizeof(*r->ov));
		r->n++;
		o = &r->ov[i];
		o->db = db;
		o->k = ol_xmalloc(kl ? kl : 1);
		memcpy(o->k, k, kl);
		o->kl = kl;
	}
	o->del = del;
	o->v = NULL;
	o->vl = del ? 0 : vl;
	if (!del) {
		o->v = ol_xmalloc(vl ? vl : 1);
		memcpy(o->v, v, vl);
	}
}

/* After a callback: an unreachable drive breaks the env. */
static int
seen(struct ol_meta *m, int rc)
{
	if (OL_META_REMOTE_SOUND(rc))
		return rc;
	if (!m->broken) {
		snprintf(m->why, sizeof(m->why), "drive unreachable: %s", strerror(-rc));
		m->broken = 6;
	}
	return -EUCLEAN;
}

#define RLIVE(m)                                                                                   \
	do {                                                                                       \
		if ((m)->broken)                                                                   \
			return -EUCLEAN;                                                           \
	} while (0)

int
ol_meta_open_remote(const struct ol_meta_remote_ops *ops, void *arg, bool sync,
		    struct ol_meta **out)
{
	struct ol_meta *m = ol_meta_alloc();

	m->r = ol_xcalloc(1, sizeof(*m->r));
	m->r->ops = ops;
	m->r->arg = arg;
	m->r->sync = sync;
	ol_meta_list(m);
	*out = m;
	return 0;
}

bool
ol_meta_is_remote(const struct ol_meta *m)
{
	return m && m->r;
}

int
ol_rm_begin(struct ol_meta *m, bool write, struct ol_meta_txn **out)
{
	struct ol_meta_txn *t;

	RLIVE(m);
	t = ol_xcalloc(1, sizeof(*t));
	t->m = m;
	t->r = ol_xcalloc(1, sizeof(*t->r));
	t->r->write = write;
	*out = t;
	return 0;
}

static void
txn_free(struct ol_meta_txn *t)
{
	struct ol_rtxn *r = t->r;

	for (size_t i = 0; i < r->n; i++) {
		free(r->ov[i].k);
		free(r->ov[i].v);
	}
	for (size_t i = 0; i < r->nkeep; i++)
		free(r->keep[i]);
	free(r->ov);
	free(r->keep);
	free(r);
	free(t);
}

int
ol_rm_commit(struct ol_meta_txn *t)
{
	struct ol_meta *m = t->m;
	struct ol_rtxn *r = t->r;
	struct ol_meta_op *ops;
	int rc = 0;

	if (m->broken || !r->write || !r->n) {
		rc = m->broken ? -EUCLEAN : 0;
		txn_free(t);
		return rc;
	}
	ops = ol_xmalloc(r->n * sizeof(*ops));
	for (size_t i = 0; i < r->n; i++)
		ops[i] = (struct ol_meta_op){.put = !r->ov[i].del,
					     .db = r->ov[i].db,
					     .k = r->ov[i].k,
					     .kl = r->ov[i].kl,
					     .v = r->ov[i].v,
					     .vl = r->ov[i].vl};
	rc = seen(m, m->r->ops->commit(m->r->arg, ops, r->n, m->r->sync));
	free(ops);
	txn_free(t);
	return rc;
}

void
ol_rm_abort(struct ol_meta_txn *t)
{
	txn_free(t);
}

/* The drive's value (no overlay). */
static int
remote_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	   const void **val, size_t *vlen)
{
	struct ol_rtxn *r = t->r;
	void *v = NULL;
	size_t vl = 0;
	int rc = seen(t->m, t->m->r->ops->get(t->m->r->arg, db, key, klen, &v, &vl));

	if (rc)
		return rc;
	if (r->nkeep == r->capkeep) {
		r->capkeep = r->capkeep ? 2 * r->capkeep : 8;
		r->keep = ol_xrealloc(r->keep, r->capkeep * sizeof(*r->keep));
	}
	r->keep[r->nkeep++] = v;
	*val = v;
	*vlen = vl;
	return 0;
}

int
ol_rm_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen, const void **val,
	  size_t *vlen)
{
	struct ov *o;

	RLIVE(t->m);
	if ((o = ov_find(t->r, (uint8_t)db, key, klen))) {
		if (o->del)
			return -ENOENT;
		*val = o->v;
		*vlen = o->vl;
		return 0;
	}
	return remote_get(t, db, key, klen, val, vlen);
}

int
ol_rm_put(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen, const void *val,
	  size_t vlen)
{
	RLIVE(t->m);
	if (!t->r->write)
		return -EACCES;
	if (!klen || klen > 511)
		return -EINVAL;
	ov_set(t->r, (uint8_t)db, key, klen, val, vlen, false);
	return 0;
}

int
ol_rm_del(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen)
{
	const void *v;
	size_t vl;
	int rc;

	RLIVE(t->m);
	if (!t->r->write)
		return -EACCES;
	rc = ol_rm_get(t, db, key, klen, &v, &vl); /* LMDB says -ENOENT for a missing key */
	if (rc)
		return rc;
	ov_set(t->r, (uint8_t)db, key, klen, NULL, 0, true);
	return 0;
}

int
ol_rm_cursor_open(struct ol_meta_txn *t, enum ol_meta_db db, struct ol_meta_cursor **out)
{
	struct ol_meta_cursor *c;

	RLIVE(t->m);
	c = ol_xcalloc(1, sizeof(*c));
	c->m = t->m;
	c->r = ol_xcalloc(1, sizeof(*c->r));
	c->r->t = t;
	c->r->db = (uint8_t)db;
	*out = c;
	return 0;
}

static void
page_free(struct ol_meta_page *pg)
{
	free(pg->e);
	free(pg->buf);
	*pg = (struct ol_meta_page){0};
}

void
ol_rm_cursor_close(struct ol_meta_cursor *c)
{
	for (int i = 0; i < 3; i++)
		page_free(&c->r->pg[i]);
	free(c->r->cur);
	free(c->r);
	free(c);
}

/* Read the page of entries >= k (after: > k) into pg[0], keeping the two before. */
static int
fetch(struct ol_meta_cursor *c, const void *k, size_t kl, bool after)
{
	struct ol_rcur *r = c->r;
	struct ol_meta_page pg = {0};
	int rc =
	    seen(c->m, c->m->r->ops->scan(c->m->r->arg, (enum ol_meta_db)r->db, k, kl, after, &pg));

	if (rc)
		return rc;
	page_free(&r->pg[2]);
	r->pg[2] = r->pg[1];
	r->pg[1] = r->pg[0];
	r->pg[0] = pg;
	r->i = 0;
	r->end = pg.n == 0;
	return 0;
}

/* The drive's next entry (NULL at its end). */
static int
rhead(struct ol_meta_cursor *c, const struct ol_meta_kv **e)
{
	struct ol_rcur *r = c->r;

	while (!r->end && r->i >= r->pg[0].n) {
		const struct ol_meta_kv *last = &r->pg[0].e[r->pg[0].n - 1];
		int rc = fetch(c, last->k, last->kl, true);

		if (rc)
			return rc;
	}
	*e = r->end ? NULL : &r->pg[0].e[r->i];
	return 0;
}

static void
set_cur(struct ol_rcur *r, const void *k, size_t kl)
{
	r->cur = ol_xrealloc(r->cur, kl ? kl : 1);
	memcpy(r->cur, k, kl);
	r->cur_kl = kl;
}

/* The next entry of the merge of the drive and the txn's overlay: > cur, or >= cur when incl.
 * 1, 0 at end, -errno. */
static int
produce(struct ol_meta_cursor *c, bool incl, const void **k, size_t *kl, const void **v, size_t *vl)
{
	struct ol_rcur *r = c->r;
	struct ol_rtxn *x = r->t->r;

	for (;;) {
		const struct ol_meta_kv *e;
		const struct ov *o = NULL;
		int rc = rhead(c, &e);
		size_t oi;

		if (rc)
			return rc;
		oi = ov_bound(x, r->db, r->cur, r->cur_kl, !incl);
		if (oi < x->n && x->ov[oi].db == r->db)
			o = &x->ov[oi];
		if (!e && !o)
			return 0;
		int cmp = !e ? 1 : !o ? -1 : kcmp(e->k, e->kl, o->k, o->kl);
		if (cmp <= 0)
			r->i++; /* the drive's entry is taken, or shadowed by the overlay's */
		incl = false;
		if (cmp < 0) {
			set_cur(r, e->k, e->kl);
			*k = e->k, *kl = e->kl, *v = e->v, *vl = e->vl;
			return 1;
		}
		set_cur(r, o->k, o->kl);
		if (o->del)
			continue;
		*k = o->k, *kl = o->kl, *v = o->v, *vl = o->vl;
		return 1;
	}
}

int
ol_rm_cursor_seek(struct ol_meta_cursor *c, const void *key, size_t klen, const void **k,
		  size_t *kl, const void **v, size_t *vl)
{
	int rc;

	RLIVE(c->m);
	rc = fetch(c, key, klen, false);
	if (rc)
		return rc;
	set_cur(c->r, key, klen);
	c->r->positioned = true;
	return produce(c, true, k, kl, v, vl);
}

int
ol_rm_cursor_next(struct ol_meta_cursor *c, const void **k, size_t *kl, const void **v, size_t *vl)
{
	RLIVE(c->m);
	if (!c->r->positioned)
		return ol_rm_cursor_seek(c, "", 0, k, kl, v, vl);
	return produce(c, false, k, kl, v, vl);
}

int
ol_rm_cursor_del(struct ol_meta_cursor *c)
{
	RLIVE(c->m);
	if (!c->r->t->r->write || !c->r->positioned)
		return -EINVAL;
	ov_set(c->r->t->r, c->r->db, c->r->cur, c->r->cur_kl, NULL, 0, true);
	return 0;
}
