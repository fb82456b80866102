/* meta/meta.c - LMDB environment per drive. */
#include "meta/meta.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>

#include "base/log.h"

static const char *const db_names[OL_META_NDB] = {"buckets", "objects", "uploads", "parts"};

struct ol_meta {
	MDB_env *env;
	MDB_dbi dbi[OL_META_NDB];
};

struct ol_meta_txn {
	struct ol_meta *m;
	MDB_txn *txn;
};

struct ol_meta_cursor {
	MDB_cursor *cur;
};

/* LMDB returns positive errno values or its own codes below zero. */
static int
mdb_to_errno(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		return -ENOSPC;
	if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID)
		return -EIO;
	if (rc > 0)
		return -rc;
	return -EIO;
}

static int
open_dbs(struct ol_meta *m)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(m->env, NULL, 0, &txn);

	if (rc)
		return mdb_to_errno(rc);
	for (int i = 0; i < OL_META_NDB && !rc; i++)
		rc = mdb_dbi_open(txn, db_names[i], MDB_CREATE, &m->dbi[i]);
	if (rc) {
		mdb_txn_abort(txn);
		return mdb_to_errno(rc);
	}
	return mdb_to_errno(mdb_txn_commit(txn));
}

int
ol_meta_open(const char *path, uint64_t map_size, bool sync, struct ol_meta **out)
{
	struct ol_meta *m = ol_xcalloc(1, sizeof(*m));
	unsigned flags = MDB_NOSUBDIR | MDB_NOTLS | (sync ? 0 : MDB_NOSYNC);
	int err, rc = mdb_env_create(&m->env);

	if (rc) {
		free(m);
		return mdb_to_errno(rc);
	}
	rc = mdb_env_set_mapsize(m->env, map_size ? map_size : (64ULL << 30));
	if (!rc)
		rc = mdb_env_set_maxdbs(m->env, OL_META_NDB + 2);
	if (!rc)
		rc = mdb_env_set_maxreaders(m->env, 1024);
	if (!rc)
		rc = mdb_env_open(m->env, path, flags, 0644);
	err = mdb_to_errno(rc);
	if (!err)
		err = open_dbs(m);
	if (err) {
		mdb_env_close(m->env);
		free(m);
		return err;
	}
	*out = m;
	return 0;
}

void
ol_meta_close(struct ol_meta *m)
{
	if (!m)
		return;
	mdb_env_close(m->env);
	free(m);
}

int
ol_meta_sync(struct ol_meta *m)
{
	return mdb_to_errno(mdb_env_sync(m->env, 1));
}

int
ol_meta_fd(struct ol_meta *m)
{
	mdb_filehandle_t fd;

	return mdb_env_get_fd(m->env, &fd) ? -1 : fd;
}

int
ol_meta_begin(struct ol_meta *m, bool write, struct ol_meta_txn **out)
{
	struct ol_meta_txn *t = ol_xmalloc(sizeof(*t));
	int rc = mdb_txn_begin(m->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);

	if (rc) {
		free(t);
		return mdb_to_errno(rc);
	}
	t->m = m;
	*out = t;
	return 0;
}

int
ol_meta_commit(struct ol_meta_txn *t)
{
	int rc = mdb_txn_commit(t->txn);

	free(t);
	return mdb_to_errno(rc);
}

void
ol_meta_abort(struct ol_meta_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	free(t);
}

int
ol_meta_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	    const void **val, size_t *vlen)
{
	MDB_val k = {klen, (void *)key}, v;
	int rc = mdb_get(t->txn, t->m->dbi[db], &k, &v);

	if (rc)
		return mdb_to_errno(rc);
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

int
ol_meta_put(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	    const void *val, size_t vlen)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};

	return mdb_to_errno(mdb_put(t->txn, t->m->dbi[db], &k, &v, 0));
}

int
ol_meta_del(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen)
{
	MDB_val k = {klen, (void *)key};

	return mdb_to_errno(mdb_del(t->txn, t->m->dbi[db], &k, NULL));
}

int
ol_meta_cursor_open(struct ol_meta_txn *t, enum ol_meta_db db, struct ol_meta_cursor **out)
{
	struct ol_meta_cursor *c = ol_xmalloc(sizeof(*c));
	int rc = mdb_cursor_open(t->txn, t->m->dbi[db], &c->cur);

	if (rc) {
		free(c);
		return mdb_to_errno(rc);
	}
	*out = c;
	return 0;
}

void
ol_meta_cursor_close(struct ol_meta_cursor *c)
{
	if (!c)
		return;
	mdb_cursor_close(c->cur);
	free(c);
}

static int
cursor_get(struct ol_meta_cursor *c, MDB_val *k, MDB_cursor_op op, const void **kp, size_t *kl,
	   const void **vp, size_t *vl)
{
	MDB_val v;
	int rc = mdb_cursor_get(c->cur, k, &v, op);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return mdb_to_errno(rc);
	*kp = k->mv_data;
	*kl = k->mv_size;
	*vp = v.mv_data;
	*vl = v.mv_size;
	return 1;
}

int
ol_meta_cursor_seek(struct ol_meta_cursor *c, const void *key, size_t klen, const void **k,
		    size_t *kl, const void **v, size_t *vl)
{
	MDB_val kv = {klen, (void *)key};

	if (klen == 0)
		return cursor_get(c, &kv, MDB_FIRST, k, kl, v, vl);
	return cursor_get(c, &kv, MDB_SET_RANGE, k, kl, v, vl);
}

int
ol_meta_cursor_next(struct ol_meta_cursor *c, const void **k, size_t *kl, const void **v,
		    size_t *vl)
{
	MDB_val kv;

	return cursor_get(c, &kv, MDB_NEXT, k, kl, v, vl);
}

int
ol_meta_cursor_del(struct ol_meta_cursor *c)
{
	return mdb_to_errno(mdb_cursor_del(c->cur, 0));
}
