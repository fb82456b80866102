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

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ol_meta_db {
	OL_META_BUCKETS = 0, /* bucket name -> bucket record */
	OL_META_OBJECTS,     /* bucket '\0' key -> object record */
	OL_META_UPLOADS,     /* bucket '\0' upload id -> upload record */
	OL_META_PARTS,	     /* bucket '\0' upload id '\0' part_no (BE32) -> part record */
	OL_META_VERSIONS,    /* bucket '\0' key '\0' ~mtime (BE64) vid -> version record */
	OL_META_NDB,	     /* the record databases above */
	/* "epoch" -> u64 (host order): the newest set-leader epoch this drive committed for,
	 * "gen" -> u64: the highest generation of that epoch (node/mops.c, fencing); not a
	 * record database, the store never reads it */
	OL_META_FENCE = OL_META_NDB,
	/* missed writes (store/missed.c): db id (u8) || index key || drive slot (u8) -> when
	 * (u64 ns, CLOCK_REALTIME): the record of that key in that db was committed on this
	 * drive while drive `slot` of its set missed it; heal removes the entry once that
	 * drive holds the record. Not a record database. */
	OL_META_MISSED,
	OL_META_NALL, /* every database */
};

struct ol_meta;
struct ol_meta_txn;
struct ol_meta_cursor;

/* Open (creating, mode 0600) the environment in file path (MDB_NOSUBDIR; path-lock beside
 * it). map_size: the sparse map size in bytes (0 = 64 GiB). sync false: commits are not
 * flushed (MDB_NOSYNC); call ol_meta_sync to flush. Before mapping an existing file its meta
 * pages are checked against its size (ol_meta_precheck), after opening every page is read
 * (ol_meta_check). Returns 0, -EUCLEAN when the file is damaged (logged with the reason), or
 * -errno.
 *
 * Faults: every call runs under a per-thread guard. A SIGBUS/SIGSEGV or an LMDB assertion
 * inside LMDB, or a fault reading a value returned by a get/cursor call, marks the env broken
 * instead of killing the process: the call (and every later call on it, its txns and cursors)
 * returns -EUCLEAN, and the env is never touched again (its memory and map are abandoned, not
 * freed). Corruption reported by LMDB (MDB_CORRUPTED, MDB_PAGE_NOTFOUND) does the same.
 * A fault anywhere else goes to the previous handler (a crash, as before). */
int ol_meta_open(const char *path, uint64_t map_size, bool sync, struct ol_meta **out);
/* A broken env is left alone (abandoned). NULL is fine. */
void ol_meta_close(struct ol_meta *m);
/* true when m is NULL or broken; *why (may be NULL) the reason, valid while m lives. */
bool ol_meta_broken(const struct ol_meta *m, const char **why);
/* Check an existing data file without mapping it: 0 (also when it does not exist or is
 * empty), -EUCLEAN with a reason in why (its meta pages are invalid or claim more pages than
 * the file holds), -errno when it cannot be read. */
int ol_meta_precheck(const char *path, char *why, size_t cap);
/* Read every key and value of every database (and check the free list's page numbers):
 * 0 or -EUCLEAN (m is then broken). Reads the whole file: for open and heal, not hot paths. */
int ol_meta_check(struct ol_meta *m);
/* Flush committed txns to stable storage (for group commit with sync=false). */
int ol_meta_sync(struct ol_meta *m);
/* The data file's fd: fdatasync on it is what ol_meta_sync does (so a caller may batch the
 * syncs of several environments, e.g. on io_uring). -1 on error. */
int ol_meta_fd(struct ol_meta *m);

/* ---- remote environments ----
 * An env whose records live on another node (store/rdrive.c implements the callbacks over the
 * node plane). The calls below work on it as on a local one, with these differences:
 * - no snapshot across calls: a read txn's point reads and cursor pages each see the drive as it is
 *   when they reach it;
 * - a write txn buffers its puts and dels (its own point reads and cursors see them, as an overlay)
 *   and ol_meta_commit ships them as one batch the drive applies in one LMDB txn, durable
 *   before the answer when the env was opened with sync (ol_meta_sync is then a no-op and
 *   ol_meta_fd is -1);
 * - cursors read pages of entries: a pointer from a cursor stays valid until that cursor has
 *   read two more pages (or the txn ends), not for the whole txn;
 * - a call that cannot reach the drive (peer down, deadline, protocol) marks the env broken
 *   (-EUCLEAN from then on, ol_meta_broken true with the reason), as a fault does locally;
 *   the owner makes a new env when the drive answers again. */
struct ol_meta_kv {
	const void *k, *v;
	size_t kl, vl;
};
struct ol_meta_page {
	struct ol_meta_kv *e; /* malloc'd by the callback, n entries in key order */
	size_t n;
	void *buf; /* what e points into (malloc'd; freed with e) */
};
struct ol_meta_op {
	uint8_t put; /* 1 put, 0 delete */
	uint8_t db;
	const void *k, *v;
	size_t kl, vl;
};
struct ol_meta_remote_ops {
	/* 0 and a malloc'd copy of the value, -ENOENT, or -errno */
	int (*get)(void *arg, enum ol_meta_db db, const void *k, size_t kl, void **v, size_t *vl);
	/* the first entries with key >= k (after: > k), at least one when any; n == 0 at end */
	int (*scan)(void *arg, enum ol_meta_db db, const void *k, size_t kl, bool after,
		    struct ol_meta_page *pg);
	/* apply ops atomically (durable when sync); -ESTALE: fenced (the env stays sound) */
	int (*commit)(void *arg, const struct ol_meta_op *ops, size_t n, bool sync);
};
/* Results of the callbacks that do not mean "the drive is unreachable"; -ECANCELED: a call
 * this node abandoned itself (a hedged read left a slow drive behind, store/rdrive.c). */
#define OL_META_REMOTE_SOUND(rc)                                                                   \
	((rc) == 0 || (rc) == -ENOENT || (rc) == -ESTALE || (rc) == -EMSGSIZE || (rc) == -ECANCELED)
/* A remote env calling ops with arg (both outlive it). 0 or -ENOMEM. */
int ol_meta_open_remote(const struct ol_meta_remote_ops *ops, void *arg, bool sync,
			struct ol_meta **out);
bool ol_meta_is_remote(const struct ol_meta *m);

/* -ENODEV when m is NULL (a drive taken offline), -EUCLEAN when broken. */
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
