/* meta/meta_int.h - what meta.c (LMDB) and remote.c (an env on another node) share. */
#ifndef OL_META_META_INT_H
#define OL_META_META_INT_H

#include <lmdb.h>

#include "meta/meta.h"

struct ol_rmeta;
struct ol_rtxn;
struct ol_rcur;

/* Read txns kept reset for the next begin (meta.c): a begin renews one instead of allocating a
 * txn and taking a reader slot under the lock file's mutex, and an abort resets it. */
#define OL_META_POOL 16

struct ol_meta {
	MDB_env *env;
	MDB_dbi dbi[OL_META_NALL];
	_Atomic int broken; /* a fault or corruption seen: the env is never touched again */
	char *map;	    /* the env's map, for the fault handler */
	bool listed;	    /* on the list of maps: never freed */
	size_t map_size;
	struct ol_meta *next; /* registered maps */
	char why[96];
	struct ol_rmeta *r; /* a remote env (remote.c): every call goes there */
	/* reset read txns, or NULL; a cache line each (the struct comes from ol_meta_alloc), so
	 * that threads taking and putting back their own slot's txn never share one, nor one
	 * with the fields every call reads */
	struct {
		struct ol_meta_txn *_Atomic t;
		char pad[64 - sizeof(void *)];
	} pool[OL_META_POOL] __attribute__((aligned(64)));
};

struct ol_meta_txn {
	struct ol_meta *m;
	MDB_txn *txn;
	struct ol_rtxn *r;
	bool rdonly;
};

struct ol_meta_cursor {
	MDB_cursor *cur;
	struct ol_meta *m;
	struct ol_rcur *r;
};

/* meta.c: a zeroed struct ol_meta, aligned as its pool asks (exits when out of memory) */
struct ol_meta *ol_meta_alloc(void);

/* meta.c: put m on the list of envs that are never freed (remote ones too: a thread may still
 * hold a pointer to an env another thread found broken). */
void ol_meta_list(struct ol_meta *m);

/* remote.c: the remote side of each call (m->r set). */
int ol_rm_begin(struct ol_meta *m, bool write, struct ol_meta_txn **out);
int ol_rm_commit(struct ol_meta_txn *t);
void ol_rm_abort(struct ol_meta_txn *t);
int ol_rm_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	      const void **val, size_t *vlen);
int ol_rm_put(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
	      const void *val, size_t vlen);
int ol_rm_del(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen);
int ol_rm_cursor_open(struct ol_meta_txn *t, enum ol_meta_db db, struct ol_meta_cursor **out);
void ol_rm_cursor_close(struct ol_meta_cursor *c);
int ol_rm_cursor_seek(struct ol_meta_cursor *c, const void *key, size_t klen, const void **k,
		      size_t *kl, const void **v, size_t *vl);
int ol_rm_cursor_next(struct ol_meta_cursor *c, const void **k, size_t *kl, const void **v,
		      size_t *vl);
int ol_rm_cursor_del(struct ol_meta_cursor *c);

#endif
