/* meta/meta.h - the metadata index of one drive: an LMDB environment with a few named
 * databases, keys and values as opaque bytes, ordered by plain byte comparison.
 *
 * The object engine (store/) keeps one ol_meta per drive and replicates its records itself.
 *
 * Threads: an ol_meta may be used by any number of threads at once (MDB_NOTLS). A txn and
 * its cursors belong to one thread at a time. Only one write txn per environment is open at
 * a time: ol_meta_begin(write) blocks until the previous writer ends. Never hold two write
 * txns (of different drives) at once in one thread unless all threads take them in the same
 * order. Pointers returned by get/cursor calls are valid until the txn ends (or, for a
 * write txn, until the next put/del). */
#ifndef OL_META_META_H
#define OL_META_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ol_meta_db {
	OL_META_BUCKETS = 0, /* bucket name -> bucket record */
	OL_META_OBJECTS,     /* bucket '\0' key -> object record */
	OL_META_UPLOADS,     /* bucket '\0' upload id -> upload record */
	OL_META_PARTS,	     /* bucket '\0' upload id '\0' part_no (BE32) -> part record */
	OL_META_NDB
};

struct ol_meta;
struct ol_meta_txn;
struct ol_meta_cursor;

/* Open (creating) the environment in file path (MDB_NOSUBDIR; path-lock beside it).
 * map_size: the sparse map size in bytes (0 = 64 GiB). sync false: commits are not flushed
 * (MDB_NOSYNC); call ol_meta_sync to flush. Returns 0 or -errno. */
int ol_meta_open(const char *path, uint64_t map_size, bool sync, struct ol_meta **out);
void ol_meta_close(struct ol_meta *m);
/* Flush committed txns to stable storage (for group commit with sync=false). */
int ol_meta_sync(struct ol_meta *m);
/* The data file's fd: fdatasync on it is what ol_meta_sync does (so a caller may batch the
 * syncs of several environments, e.g. on io_uring). -1 on error. */
int ol_meta_fd(struct ol_meta *m);

int ol_meta_begin(struct ol_meta *m, bool write, struct ol_meta_txn **out);
/* Commit (write) or end (read) the txn; frees it either way. */
int ol_meta_commit(struct ol_meta_txn *t);
void ol_meta_abort(struct ol_meta_txn *t);

/* 0 and the value in val, vlen; or -ENOENT. */
int ol_meta_get(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
		const void **val, size_t *vlen);
int ol_meta_put(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen,
		const void *val, size_t vlen);
/* 0 or -ENOENT. */
int ol_meta_del(struct ol_meta_txn *t, enum ol_meta_db db, const void *key, size_t klen);

int ol_meta_cursor_open(struct ol_meta_txn *t, enum ol_meta_db db, struct ol_meta_cursor **out);
void ol_meta_cursor_close(struct ol_meta_cursor *c);
/* Position at the first key >= key and return it: 1 got one, 0 end, -errno. */
int ol_meta_cursor_seek(struct ol_meta_cursor *c, const void *key, size_t klen, const void **k,
			size_t *kl, const void **v, size_t *vl);
/* The next key: 1, 0 end, -errno. */
int ol_meta_cursor_next(struct ol_meta_cursor *c, const void **k, size_t *kl, const void **v,
			size_t *vl);
/* Delete the record the cursor is on (write txn only). */
int ol_meta_cursor_del(struct ol_meta_cursor *c);

#endif
