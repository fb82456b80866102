/* store/store.h - the object engine: buckets, objects and multipart uploads, erasure-coded
 * over the drives of one set (ISA-L Reed-Solomon, k = N - P data + P parity shards).
 *
 * It knows nothing of HTTP or S3: ETags and the metadata blob are opaque bytes set by the
 * caller. Bucket names are validated by the caller (no '\0', no '/'); object keys are
 * arbitrary bytes up to OL_STORE_MAX_KEY and are never used as a path.
 *
 * Return codes: 0 (or a count) on success, -errno on failure. Common ones:
 *   -ENOENT  no such bucket/key/upload (see each call), -EEXIST bucket exists,
 *   -ENOTEMPTY bucket has objects or uploads, -EIO more than P shards or drives unusable,
 *   -EINVAL bad argument (key too long, part_no out of range), -ENOSPC/-EROFS from drives,
 *   OL_STORE_ECORRUPT: the shards are there but too many fail their checksums to rebuild the
 *   bytes (never wrong bytes; heal cannot fix it either).
 *   "No such bucket/upload" (-ENOENT, -ENXIO) is answered only when enough drives answered to
 *   know it; a bucket or upload record seen on fewer than k drives while the drives that did
 *   not answer could still make k is -EIO (undecided: retry), and nothing is written or
 *   removed on its strength (docs/ARCHITECTURE.md, "Absent or unknown").
 *
 * Threads: every call may run concurrently with every other call from any number of
 * threads, on any handles, except that one handle (ol_put, ol_get, ol_iter) is used by one
 * thread at a time. Writers of the same bucket/key are serialised inside the engine; the last
 * commit wins. A reader sees either the old or the new object, never a mix.
 *
 * Durability: with cfg->fsync, put_commit / mpu_* / delete / bucket_* return only after the
 * data and the metadata are on stable storage on a write quorum of drives.
 * Write quorum W = max(k, N/2 + 1, P + 1) drives; a read needs k drives that agree (newest version
 * present on >= k drives). So with up to P drives dead, reads and writes go on.
 * See docs/storage-format.md for the on-disk layout and the commit protocol. */
#ifndef OL_STORE_STORE_H
#define OL_STORE_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ol_config;

#define OL_STORE_MAX_KEY   1024
#define OL_STORE_MAX_PARTS 10000
#define OL_STORE_ETAG_MAX  80
#define OL_STORE_MAX_META  (64 * 1024) /* largest opaque metadata blob */
#define OL_STORE_ECORRUPT  (-EBADMSG)  /* stored data failed its checksums beyond repair */

#define OL_STORE_VID_LEN  48 /* hex of ~mtime (8 bytes) and a random id (16) */
#define OL_STORE_VID_MAX  (OL_STORE_VID_LEN + 1)
#define OL_STORE_EDELMARK (-ENOMSG) /* the version asked for is a delete marker */

struct ol_store;

/* Open the engine on cfg->data_dirs (set_drive_count N, default_parity_count P,
 * inline_threshold, block_size, checksum, fsync). Missing data dirs are created (mkdir -p);
 * a path that cannot be used (a file there, no permission) is an error logged with the dir
 * and the reason. Opens one LMDB environment per drive and sweeps leftovers of interrupted
 * writes. A drive that cannot be opened is logged and treated as offline, as long as a write
 * quorum of drives opens in each set; otherwise the call fails.
 * The data dirs are m erasure sets of N drives (dirs [0..N-1] set 0, [N..2N-1] set 1, ...;
 * -EINVAL when their count is not a multiple of N). With m > 1 each object lives in one set
 * (a keyed hash of bucket/key), each bucket on all. Every drive (m = 1 too) carries an
 * identity record (.openlake/format: the store id, its UUID, m, its set, its index, N, P):
 * -EINVAL (logged with the drive, where it belongs and the fix) when a drive is another
 * store's, another position's (dirs reordered, another m or N) or a copy of another; blank
 * drives get a fresh record, drives of an older build get theirs (store/format.c,
 * docs/storage-format.md). See docs/ARCHITECTURE.md, "Erasure sets". */
int ol_store_open(const struct ol_config *cfg, struct ol_store **out);
/* No other call may be running. NULL is fine. */
void ol_store_close(struct ol_store *st);

/* One drive of a set opened with ol_store_open_set. */
struct ol_store_drive_spec {
	const char *peer;    /* "host:port" of the node plane (rpc_addr) serving the drive */
	unsigned peer_drive; /* index of the drive among that node's data_dirs */
	unsigned node_id;    /* for logs and metrics */
};
struct ol_store_set_opts {
	unsigned n; /* drives in the set (N) */
	const struct ol_store_drive_spec *drives;
	const char *secret; /* [cluster] secret */
	unsigned self_id;   /* this node's id (HELLO) */
	uint64_t epoch;	    /* fencing epoch of this set's leader (> 0) */
	int deadline_ms;    /* per call on the plane; 0 = 5000 */
	/* Drive identity (docs/storage-format.md): with store_id (the deployment id) every drive
	 * must carry the record of (store_id, pool, set of sets, its index); a drive without one
	 * has it written, a drive whose record names another store or position is kept
	 * offline (logged) and never written to. NULL: not checked. */
	const char *store_id;
	unsigned pool, set, sets; /* sets 0 = 1 */
	/* A read-only view of the set (a follower serving GET and HEAD; docs/cluster.md
	 * "Read-only views"): epoch may be 0; nothing is ever written to a drive (no identity
	 * claim, no generation taken, no commit, no shard created, written or unlinked, no heal,
	 * no missed-write record); it opens once k drives answer. */
	bool readonly;
	/* With readonly: a *shard writer* (a follower serving PUT and UploadPart; docs/cluster.md
	 * "Writes on every node"): the view above, except that put_begin and mpu_part_begin work
	 * and write their shard files over the planes as a leader does (under a fresh uuid,
	 * unreferenced until committed); put_commit sends the commit to the committer hook
	 * (ol_store_set_committer) instead of committing, and unlinks the files when it fails.
	 * Every other write stays -EROFS. */
	bool shards;
};
/* Open the engine over drives served by node planes (this node's own drives too: in a cluster
 * the node plane server is the only owner of a node's local drives). cfg gives P, block size,
 * inline threshold, checksum, fsync. Opens as long as a write quorum of drives answers; the
 * others are offline and the monitor brings them back (calling on_return, so heal-on-return
 * works). Every metadata commit carries the epoch; a drive that has seen a newer epoch refuses
 * it (-ESTALE, surfaced by put_commit & co as -ESTALE). */
int ol_store_open_set(const struct ol_config *cfg, const struct ol_store_set_opts *o,
		      struct ol_store **out);
/* With o->readonly the set opens as a read-only view over the same drives: once at least k
 * drives answer and show their identity record (with store_id; a drive without one, or with
 * another's, is offline for this view and never claimed); no generation is taken and no empty
 * commit sent (a view never fences its leader), nothing is swept. The monitor brings drives
 * back with a ping and an identity check only; slow-drive judging and hedged reads work as
 * for a writer (they change this view only). Every call that would write (put_begin, delete,
 * delete_ver, set_meta, bucket create / delete / set_attrs, mpu_*, heal_all, drain,
 * pool_set_draining) returns -EROFS without touching a drive, and so do the lower layers
 * (commit, shard create / write / sync / unlink) as a second guard. Reads resolve records as
 * always (newest version on >= k drives), decode around a missing or corrupt shard from
 * parity without recreating or rewriting it, and give back no record to a drive that lacks
 * it. on_drive_return callbacks are never called on a read-only store. */
/* Open m sets over node planes as one store: o[j] is set j (each with its epoch). Objects are
 * placed over the sets by a hash keyed with placement_key (the cluster's deployment id: the
 * same on every node, never changing). m == 1 is ol_store_open_set. Every o[j].readonly set: a
 * read-only store; some set and some not: -EINVAL. */
int ol_store_open_sets(const struct ol_config *cfg, const struct ol_store_set_opts *o, unsigned m,
		       const char *placement_key, struct ol_store **out);
/* Several pools as one store (a cluster grown by `openlake cluster join`): pools[i] (each
 * opened by ol_store_open, ol_store_open_sets or ol_store_pools) gives the next pool(s), in
 * order; all are taken over (the sets move into *out; the stores given are freed, also on
 * error). The placement seed is placement_key's, as ol_store_open_sets', so pool 0 of a
 * cluster places keys exactly as it did alone. An existing key (any pool's set for it holds
 * a version or a delete marker of it) stays in its pool; a new key goes to a pool picked by a
 * hash of the key weighted by the pools' free space (ol_store_set_pool_free), inside the
 * pool to the set of the keyed hash modulo the pool's set count. If a race ever left a key
 * in two pools, the newest (mtime; equal: the lower pool) wins for reads, writes and
 * listings, and a warning names the key. At most OL_STORE_MAX_POOLS pools and 64 sets in
 * all: -E2BIG; -EINVAL n = 0. Not thread-safe against calls on the stores given. */
#define OL_STORE_MAX_POOLS 16
/* Pools all read-only give a read-only store (pools are weighed by free space only to place
 * new keys; a read asks every pool as always); read-only and writable mixed: -EINVAL (the
 * stores given are freed, as on any error). */
int ol_store_pools(struct ol_store **pools, unsigned n, const char *placement_key,
		   struct ol_store **out);
/* Is st a read-only view (ol_store_set_opts.readonly)? Any thread. */
bool ol_store_readonly(const struct ol_store *st);
/* Pool count (1 for any store not made by ol_store_pools). */
unsigned ol_store_pool_count(const struct ol_store *st);
/* The pools' free bytes, the weights of new keys' pools (n = the pool count; others are
 * ignored). All 0 (the default): equal weights. Any thread. */
void ol_store_set_pool_free(struct ol_store *st, const uint64_t *free_bytes, unsigned n);

/* Draining a pool (`openlake cluster leave`; drain.c). set_draining(pool) gives the pool
 * weight 0: no new key goes there, the keys it holds are still found there (-1: none; -EINVAL
 * a store of one pool, or pool out of range). Any thread.
 *
 * ol_store_drain moves every key of the draining pool to the pool a new key would go to now,
 * one key at a time: it closes the key's gate (a store of several pools counts every object
 * call in by key: put_begin to put_commit / put_abort, get_open, head, delete, tagging,
 * complete), waits for the calls in flight on it (10 s at most, else the key is left for the
 * next pass), copies its versions oldest first with their version ids, mtimes, ETags,
 * metadata blobs (user metadata, tags, checksums, SSE fields as stored) and part layout, and
 * delete markers, into the new pool, removes them from the draining pool, and opens the gate:
 * a call on the key waits for the move and then finds the key in one pool, whole. Objects
 * committed into the pool meanwhile (an upload begun there completed) are moved by the next
 * pass; passes repeat until a pass finds no key and no upload in progress in the pool (the
 * drain waits for uploads to be completed or aborted). 0 when the pool is empty, -ECANCELED
 * (ol_store_drain_cancel), -EINVAL (no draining pool, or not this one). Runs on the caller's
 * thread; p (zeroed by the caller) is updated atomically as it goes; any thread reads it. */
struct ol_drain_opts {
	uint64_t rate_bytes; /* bytes copied per second, 0: unlimited */
	/* a test's hook (NULL: none): called on the drain's thread in each count pass, for
	 * each bucket and set, between the listing of its uploads and the walk of its objects */
	void (*counting)(void *arg);
	void *arg;
};
struct ol_drain_progress {
	_Atomic uint64_t objects_moved, bytes_moved; /* versions and markers moved, their bytes */
	_Atomic uint64_t objects_left, bytes_left;   /* counted at each pass's start */
	_Atomic uint64_t failed;		     /* key moves that failed (retried next pass) */
	_Atomic uint64_t uploads; /* uploads in progress in the pool, last pass */
	_Atomic uint64_t passes;
	_Atomic int running, cancel, result;
};
int ol_store_pool_set_draining(struct ol_store *st, int pool);
int ol_store_drain(struct ol_store *st, unsigned pool, const struct ol_drain_opts *o,
		   struct ol_drain_progress *p);
void ol_store_drain_cancel(struct ol_drain_progress *p);
/* Delayed reclaim (a writer serving read-only views elsewhere; docs/cluster.md "Read-only
 * views"). With ms > 0, the shard files of versions replaced or deleted by a commit (an
 * overwrite, a delete, a multipart complete's unlisted parts, a version removed, and those a
 * local reader held past the commit) are unlinked no earlier than ms after that commit (after
 * the last local reader's release for those), by each set's reclaim thread; 0 (the default):
 * at once, as always. Each waiting file costs one 32-byte entry; above 2^20 per set the
 * oldest go early (logged once). ol_store_close unlinks what still waits. A crash loses the
 * queue: the files are then unreferenced and the heal's orphan sweep removes them (the sweep
 * skips files still queued). A changed delay applies to unlinks queued from then on. Ignored
 * by a read-only view. Any thread. */
void ol_store_set_reclaim_delay(struct ol_store *st, unsigned ms);
/* Shard-file unlinks waiting for the delay now, over every set (metrics, tests). Any thread. */
size_t ol_store_reclaim_pending(struct ol_store *st);
/* Raise the epoch (a leader re-elected), of every set; never lowers it. */
void ol_store_set_epoch(struct ol_store *st, uint64_t epoch);

/* Buckets. */
/* -EEXIST; -EIO when its existence is undecided (then nothing is written) */
int ol_store_bucket_create(struct ol_store *st, const char *bucket);
/* -ENOENT, -ENOTEMPTY (objects or in-progress uploads), -EIO undecided (nothing removed) */
int ol_store_bucket_delete(struct ol_store *st, const char *bucket);
int ol_store_bucket_stat(struct ol_store *st, const char *bucket, int64_t *created_ns);
typedef int (*ol_store_bucket_cb)(const char *bucket, int64_t created_ns, void *arg);
/* Calls cb for each bucket in byte order; a non-zero return from cb stops and is returned. */
int ol_store_bucket_list(struct ol_store *st, ol_store_bucket_cb cb, void *arg);
/* Bucket attributes: an opaque blob (<= OL_STORE_MAX_BATTRS bytes) kept in the bucket record
 * and set by the caller (S3: owner, ACL, policy). A bucket created by ol_store_bucket_create,
 * or by an older version of the engine, has none (length 0). */
#define OL_STORE_MAX_BATTRS (64 * 1024)
int ol_store_bucket_create_attrs(struct ol_store *st, const char *bucket, const void *attrs,
				 size_t len); /* -EEXIST, -EINVAL, -EIO (as bucket_create) */
/* Copies up to cap bytes of the attrs into buf (may be NULL); *len = their full length (may be
 * NULL); created_ns may be NULL. -ENOENT. */
int ol_store_bucket_get(struct ol_store *st, const char *bucket, int64_t *created_ns, void *buf,
			size_t cap, size_t *len);
/* The attrs as a malloc'd copy (*out, NUL-terminated beyond *len; the caller frees), in one
 * read. -ENOENT (then *out is NULL). */
int ol_store_bucket_attrs(struct ol_store *st, const char *bucket, void **out, size_t *len);
/* Replace the attrs (creation time kept). -ENOENT, -EINVAL, -EIO. */
int ol_store_bucket_set_attrs(struct ol_store *st, const char *bucket, const void *attrs,
			      size_t len);
/* As bucket_list, with each bucket's attrs (valid during the call only). */
typedef int (*ol_store_bucket_attrs_cb)(const char *bucket, int64_t created_ns, const void *attrs,
					size_t len, void *arg);
int ol_store_bucket_list_attrs(struct ol_store *st, ol_store_bucket_attrs_cb cb, void *arg);

struct ol_obj_info {
	uint64_t size;
	int64_t mtime_ns;
	char etag[OL_STORE_ETAG_MAX]; /* opaque, NUL-terminated, set by the caller at commit */
	/* opaque blob set by the caller; valid until the handle/iterator it came from is
	 * released or advanced (ol_store_head copies it into meta_buf instead) */
	const void *meta;
	size_t meta_len;
	unsigned n_parts; /* 0 for a plain PUT, else multipart part count */
	/* versioning: "null" or an opaque id of OL_STORE_VID_LEN chars (see below) */
	char version_id[OL_STORE_VID_MAX];
	int delete_marker; /* 1: this version is a delete marker */
	int is_latest;	   /* version iterator only: the key's current version */
};

/* Streaming writer. The object is visible only after put_commit. (It writes to the set of the
 * key; a set that lacks the bucket set 0 has is given it first: see docs/ARCHITECTURE.md.) */
struct ol_put;
/* -ENOENT no bucket, -EINVAL key_len 0 or > OL_STORE_MAX_KEY. size_hint may be -1. */
int ol_store_put_begin(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		       int64_t size_hint, struct ol_put **out);
/* Append bytes. -EIO when fewer than W drives accept the data. On error, call put_abort. */
int ol_store_put_write(struct ol_put *p, const void *buf, size_t len);
/* Make the object (or part) visible, replacing any older version atomically. etag is copied
 * (truncated to OL_STORE_ETAG_MAX-1); meta (<= OL_STORE_MAX_META) is copied. out_info may be
 * NULL; its meta pointer is not valid after return. Frees p, on success and on failure. */
int ol_store_put_commit(struct ol_put *p, const char *etag, const void *meta, size_t meta_len,
			struct ol_obj_info *out_info);
/* Drop everything written; frees p. NULL is fine. */
void ol_store_put_abort(struct ol_put *p);

/* ---- commits sent to the leader (shard writers, ol_store_set_opts.shards) ----
 * A shard writer's put_commit, its shards durable on a write quorum, encodes what the leader
 * needs to commit (the set by its first drive's id, bucket, key or upload id and part number,
 * the version's uuid, size, etag, metadata, inline shards, condition, versioning mode and
 * the drives the writer failed) and calls the committer with it; the committer delivers it to
 * the leader, whose ol_store_commit_remote runs the commit as its own put_commit does, and
 * returns what that returned (0 with *out filled: size, mtime_ns, etag, version_id; or
 * -errno). Without a committer: -EROFS. fn runs on the put_commit caller's thread. fn returns
 * -ETIMEDOUT exactly when the outcome is unknown (the request went out, no answer came): the
 * shard files are kept then (the commit may have landed; if it did not, the leader's orphan
 * sweep removes them, OL_STORE_SWEEP_GRACE_S after their last write) and put_commit returns
 * -ETIMEDOUT; on any other error they are unlinked as a failed put's are. */
/* How old a shard file of a set over node planes must be (since its last write) before a
 * heal's orphan sweep may remove it unreferenced: a follower's shard writer may be writing it,
 * or waiting for its commit's answer, that long (an HTTP body stalls for at most the server's
 * idle timeout between writes). */
#define OL_STORE_SWEEP_GRACE_S 900
/* Every interval_s seconds (0: never) sweep every set of st for orphan shard files, on a
 * thread of the store: files no record references on k drives, of no write in progress, no
 * version being read and no reclaim waiting its delay (the garbage of writes cut short, and
 * of replaced versions whose queued reclaim a crash lost), older than grace_s on a set over
 * node planes (0: OL_STORE_SWEEP_GRACE_S; also the grace of a heal's sweep) and 2 s on local
 * drives. Two sweeps never overlap; a set with a drive offline is skipped that time. A
 * read-only store sweeps nothing. Call once after open; ol_store_close stops it. Metrics:
 * openlake_store_orphan_sweeps_total, openlake_store_orphans_removed_total. */
void ol_store_set_sweep(struct ol_store *st, unsigned interval_s, unsigned grace_s);
typedef int (*ol_store_commit_fn)(void *arg, const void *req, size_t len, struct ol_obj_info *out);
void ol_store_set_committer(struct ol_store *st, ol_store_commit_fn fn, void *arg);
/* The largest request the committer can carry (the node plane's frame; 0, the default: no
 * limit). An object small enough to be inline whose request (its n inline shards, metadata and
 * names) would be larger is written as shard files instead, as a larger object is. */
void ol_store_set_commit_max(struct ol_store *st, size_t bytes);
/* On the leader (a writable store): commit the request a shard writer's committer received.
 * vmode (OL_STORE_VER_*) replaces the writer's for an object (the leader's view of the bucket's
 * versioning is the one that holds). -EBADMSG a request that does not decode, -ESTALE its set
 * is not one of this store's or not where the key goes now (the key is in another pool, the
 * pool drains: the writer's client retries), -EROFS on a read-only store; else put_commit's
 * results (-ENOENT no bucket or upload, -ECANCELED / -ENODATA a condition, -EIO no quorum). */
int ol_store_commit_remote(struct ol_store *st, const void *req, size_t len, int vmode,
			   struct ol_obj_info *out);
/* The bucket a commit request names (NUL-terminated, < 64 bytes) and whether it commits a
 * part (*part may be NULL): 0, or -EBADMSG. */
int ol_store_commit_req_bucket(const void *req, size_t len, char bucket[64], bool *part);
/* The answer to a commit as bytes for the wire and back: size, mtime_ns, etag, version_id.
 * encode returns its length (at most OL_STORE_INFO_WIRE); decode 0 or -EBADMSG. */
#define OL_STORE_INFO_WIRE (16 + 2 * 256)
size_t ol_store_info_encode(const struct ol_obj_info *in, uint8_t *buf);
int ol_store_info_decode(const uint8_t *buf, size_t len, struct ol_obj_info *out);
uint64_t ol_store_put_size(const struct ol_put *p);

/* A buffer of size bytes for a request body read in whole stripes, or a GET's send buffer:
 * io's process-wide cache of large buffers (ol_iobuf_get), so a busy server does not map,
 * fault in and unmap megabytes per request. Aborts on out-of-memory. Give it back with
 * ol_store_buf_put and the same size (NULL is fine). Any thread. */
void *ol_store_buf_get(size_t size);
void ol_store_buf_put(void *buf, size_t size);
/* Bytes of idle buffers that cache holds now (on /metrics). */
size_t ol_store_buf_cached(void);

/* Conditional write (S3 If-Match / If-None-Match: *): checked by put_commit and
 * mpu_complete_cond under the key's write lock, in the same critical section as the commit,
 * so of two racing conditional writers at most one passes. */
struct ol_store_cond {
	const char *if_match; /* visible object's etag must equal this (ASCII case-insensitive);
				 "*": any object must be visible; NULL: no check */
	int if_none_match;    /* 1: no object may be visible */
};
/* Attach cond (copied; if_match truncated to OL_STORE_ETAG_MAX-1) to an object writer (not a
 * part: ignored there). put_commit then fails with -ECANCELED when a condition does not hold,
 * or -ENODATA when if_match is set and no object is visible; p is freed as on any failure. */
void ol_store_put_set_cond(struct ol_put *p, const struct ol_store_cond *cond);

/* Reader. info->meta stays valid until get_close. -ENOENT no key, -ENXIO no bucket, -EAGAIN
 * (read-only views only: the version resolved was reclaimed, see get_read). */
struct ol_get;
int ol_store_get_open(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      struct ol_get **out, struct ol_obj_info *info);
/* Read up to len bytes at offset: returns the byte count (short only at EOF, 0 at/after EOF),
 * or -EIO when the bytes cannot be rebuilt (more than P shards lost or corrupt): never wrong
 * bytes. Missing, short or corrupt shard blocks are rebuilt from parity on the fly.
 *
 * A read-only view (ol_store_readonly) and a version reclaimed under it: the record it
 * resolved can be replaced or deleted by its writer right after, and the writer unlinks the
 * old version's shard files (at once, or after its reclaim delay: ol_store_set_reclaim_delay).
 * A view finds that out when more than P drives answer that a part's shard file is not there
 * (fewer than k can hold it):
 *   - ol_store_get_open / get_open_ver return -EAGAIN when the first part is gone already;
 *   - ol_store_get_read returns -EAGAIN when it finds a part gone and has not yet returned a
 *     byte on this handle (a positive count): close it, resolve the key again with a new
 *     get_open (the newer version, or -ENOENT after a delete), and read that; do so once: a
 *     second -EAGAIN is a version lost, answer an error;
 *   - after a positive count on the handle, the same finding is -EIO (mid-stream: cut the
 *     connection, as for any error after the headers went out).
 * No byte of a reclaimed version is ever wrong: blocks are verified as always. A writable
 * store never returns -EAGAIN from these (it recreates a missing shard and rebuilds it). */
ssize_t ol_store_get_read(struct ol_get *g, uint64_t offset, void *buf, size_t len);
/* How many bytes (1..max) a streaming reader should ask get_read for at offset: up to the
 * last shard block boundary within max (to the first one when max does not reach further),
 * so reads that start on a boundary go from the shard files straight into the caller's
 * buffer (no stripe buffers, no copy, no block read twice). max when no boundary is within
 * it, for inline objects, or at/after EOF. Same thread rules as get_read. */
size_t ol_store_get_step(const struct ol_get *g, uint64_t offset, size_t max);
void ol_store_get_close(struct ol_get *g);
/* The part sizes of the open object, in part order (S3 ?partNumber, GetObjectAttributes): a
 * multipart object's info->n_parts of them, else one (the whole size). Copies up to cap into
 * sizes and returns the count (which may exceed cap). Same thread rules as get_read. */
unsigned ol_store_get_part_sizes(const struct ol_get *g, uint64_t *sizes, unsigned cap);

/* Metadata only. Copies up to meta_cap bytes of the blob into meta_buf (may be NULL);
 * info->meta = meta_buf, info->meta_len = full length (may exceed meta_cap).
 * -ENOENT no key, -ENXIO no bucket. */
int ol_store_head(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		  struct ol_obj_info *info, void *meta_buf, size_t meta_cap);
/* 0, -ENOENT no key (the caller maps it to an idempotent 204), -ENXIO no bucket, -EIO the
 * bucket undecided. */
int ol_store_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len);

/* Listing: ordered iterator over the keys of a bucket (plain byte order, like S3). It reads a
 * consistent merge of all drives; objects committed while it runs may or may not appear. */
struct ol_iter;
/* -ENOENT no bucket, -EIO undecided */
int ol_store_iter_open(struct ol_store *st, const char *bucket, struct ol_iter **out);
/* Position at the first key >= key (key_len 0: the first key). */
int ol_store_iter_seek(struct ol_iter *it, const char *key, size_t key_len);
/* 1 = got one (key and info->meta valid until the next call on it), 0 = end, -errno. */
int ol_store_iter_next(struct ol_iter *it, const char **key, size_t *key_len,
		       struct ol_obj_info *info);
void ol_store_iter_close(struct ol_iter *it);

/* Multipart uploads. Parts are stored erasure-coded like objects; complete links them into
 * the object record without copying data. Upload ids are 32 lowercase hex chars + NUL.
 * All calls return -ENOENT when the bucket or the upload does not exist, -EIO when the drives
 * that answered do not decide whether it does (never -ENOENT then: the parts are kept). */
int ol_store_mpu_create(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			const void *meta, size_t meta_len, char upload_id[64]);
/* part_no 1..OL_STORE_MAX_PARTS (-EINVAL). Write with put_write, commit with the part's etag
 * (meta ignored); a re-upload of the same part replaces it. */
int ol_store_mpu_part_begin(struct ol_store *st, const char *bucket, const char *upload_id,
			    unsigned part_no, struct ol_put **out);
struct ol_mpu_part {
	unsigned part_no;
	char etag[OL_STORE_ETAG_MAX];
	uint64_t size;
	int64_t mtime_ns;
};
/* *parts (sorted by part_no; malloc'd, caller frees, NULL when *n == 0). */
int ol_store_mpu_list_parts(struct ol_store *st, const char *bucket, const char *upload_id,
			    struct ol_mpu_part **parts, size_t *n);
/* The caller has checked etags/order/min sizes against list_parts. part_nos must be strictly
 * increasing and uploaded (-EINVAL otherwise). Unlisted parts are reclaimed; the object's meta
 * is the one given at create; the upload is gone afterwards. out may be NULL. */
int ol_store_mpu_complete(struct ol_store *st, const char *bucket, const char *upload_id,
			  const unsigned *part_nos, size_t n, const char *final_etag,
			  struct ol_obj_info *out);
/* mpu_complete with cond (may be NULL) checked as put_commit does: -ECANCELED / -ENODATA, and
 * the upload and its parts are kept. */
int ol_store_mpu_complete_cond(struct ol_store *st, const char *bucket, const char *upload_id,
			       const unsigned *part_nos, size_t n, const char *final_etag,
			       const struct ol_store_cond *cond, struct ol_obj_info *out);
/* Removes only the upload and its parts, never the object with the same key. */
int ol_store_mpu_abort(struct ol_store *st, const char *bucket, const char *upload_id);
/* In-progress uploads of a bucket, ordered by (key, upload_id), each with its metadata blob
 * (as ol_store_mpu_stat gives it). A non-zero cb return stops and is returned. */
typedef int (*ol_store_mpu_cb)(const char *key, size_t key_len, const char *upload_id,
			       int64_t init_ns, const void *meta, size_t meta_len, void *arg);
int ol_store_mpu_list(struct ol_store *st, const char *bucket, ol_store_mpu_cb cb, void *arg);
/* Key and metadata blob of an upload (for CompleteMultipartUpload responses). key must hold
 * OL_STORE_MAX_KEY bytes; meta_buf may be NULL. -ENOENT. */
int ol_store_mpu_stat(struct ol_store *st, const char *bucket, const char *upload_id, char *key,
		      size_t *key_len, void *meta_buf, size_t meta_cap, size_t *meta_len);

/* Versioning (S3). The caller keeps each bucket's mode (it is not in the store) and passes
 * it to every write of that bucket:
 *   OL_STORE_VER_OFF  never versioned: writes replace and reclaim, as without versioning;
 *   OL_STORE_VER_ON   every PUT, complete and marker is given a fresh version id and the versions
 *                     it replaces are kept;
 *   OL_STORE_VER_SUSP writes get the "null" version id and replace the key's null version
 *                     (if any); other versions are kept.
 * The current version stays in the object index (plain GET, HEAD and listing cost what they
 * cost unversioned); every version of a key written in a versioned bucket is also in the
 * versions index, ordered key, then newest first. A version id is "null" (a version written
 * unversioned or suspended) or OL_STORE_VID_LEN lowercase hex chars (opaque to callers).
 * A current delete marker makes get_open and head return -ENOENT with info->delete_marker
 * and info->version_id set. */
enum { OL_STORE_VER_OFF = 0, OL_STORE_VER_ON = 1, OL_STORE_VER_SUSP = 2 };
/* Set the mode of an object writer (before put_commit; ignored for parts). put_commit's
 * out_info->version_id tells the id given. */
void ol_store_put_set_vmode(struct ol_put *p, int vmode);
/* get_open / head of one version (version_id NULL: the current one, as get_open / head).
 * -ENOENT no such version, -EINVAL malformed id, OL_STORE_EDELMARK it is a delete marker
 * (info->version_id, info->delete_marker and mtime set), -ENXIO no bucket. */
int ol_store_get_open_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			  const char *version_id, struct ol_get **out, struct ol_obj_info *info);
int ol_store_head_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      const char *version_id, struct ol_obj_info *info, void *meta_buf,
		      size_t meta_cap);
/* Delete in mode vmode. version_id NULL: OFF deletes the object (as ol_store_delete); ON and
 * SUSP add a delete marker as the current version (SUSP: the null one, replacing the null
 * version) and out (may be NULL) is given its id with delete_marker = 1. version_id set: removes
 * that version for good (its data reclaimed); when it was the current one the next newest
 * becomes current; out is given the id, and delete_marker when the version was a marker.
 * 0, -ENOENT (no such key or version: idempotent for S3), -EINVAL bad id, -ENXIO no bucket,
 * -EIO. */
int ol_store_delete_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			int vmode, const char *version_id, struct ol_obj_info *out);
/* Replace the metadata blob of one version (version_id NULL: the current one) in place: same
 * data, version id, mtime and ETag (S3 tagging). The caller reads the blob first (head_ver)
 * and passes the whole new one. 0, -ENOENT, OL_STORE_EDELMARK (a delete marker), -EINVAL
 * (bad id, meta too large), -ENXIO, -EIO. A crash in the middle may leave either blob. */
int ol_store_set_meta(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      const char *version_id, const void *meta, size_t meta_len);
/* ol_store_set_meta, only if the version's mtime is still expect_mtime_ns (the info->mtime_ns
 * of the head or get it was read with; 0: any), checked under the key's write lock: -ECANCELED
 * when it was replaced since (a plain or suspended bucket's "null" version rewritten by a PUT),
 * so a blob built from the old version never lands on the new one. */
int ol_store_set_meta_if(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			 const char *version_id, int64_t expect_mtime_ns, const void *meta,
			 size_t meta_len);
/* mpu_complete_cond in mode vmode (out->version_id set). */
int ol_store_mpu_complete_ver(struct ol_store *st, const char *bucket, const char *upload_id,
			      const unsigned *part_nos, size_t n, const char *final_etag,
			      const struct ol_store_cond *cond, int vmode, struct ol_obj_info *out);
/* mpu_complete_ver with the object's meta replaced by meta (meta_len <= OL_STORE_MAX_META,
 * else -EINVAL) instead of the one given at create; meta NULL: the create's. */
int ol_store_mpu_complete_meta(struct ol_store *st, const char *bucket, const char *upload_id,
			       const unsigned *part_nos, size_t n, const char *final_etag,
			       const struct ol_store_cond *cond, int vmode, const void *meta,
			       size_t meta_len, struct ol_obj_info *out);
/* Version iterator (ListObjectVersions): every version and delete marker of the bucket, keys
 * in byte order, each key's versions newest first; info->is_latest marks the current one.
 * The same rules as ol_iter (one thread, read txns held while open, keep it short). */
struct ol_viter;
int ol_store_viter_open(struct ol_store *st, const char *bucket, struct ol_viter **out);
/* Position at the first version of the first key >= key. */
int ol_store_viter_seek(struct ol_viter *it, const char *key, size_t key_len);
/* 1 got one (key, info->meta valid until the next call), 0 end, -errno. */
int ol_store_viter_next(struct ol_viter *it, const char **key, size_t *key_len,
			struct ol_obj_info *info);
void ol_store_viter_close(struct ol_viter *it);

/* For fault tests and ops. */
int ol_store_drive_count(const struct ol_store *st);
/* Root directory of drive i (0..count-1: the drives of set 0, then of set 1, ...) or NULL. */
const char *ol_store_drive_path(const struct ol_store *st, int i);
/* Number of drives online (their metadata opened). */
int ol_store_drives_online(const struct ol_store *st);
/* off[i] = whether drive i (numbered as ol_store_drive_path) is offline now, for the first cap
 * drives; returns how many were filled. Lock-free: a flag per drive, for a request's path. */
int ol_store_drives_offline(const struct ol_store *st, bool *off, int cap);
/* What the store knows of drive i (numbered as ol_store_drive_path) now. */
struct ol_store_drive_state {
	char path[512]; /* its root; a remote drive: "node N host:port drive D" */
	char why[256];	/* why it is offline ("" while online) */
	bool online;
	bool remote;		 /* served by a node plane: its call times are measured */
	bool slow;		 /* offline as slow, until its probes are fast for its hold */
	uint64_t faults;	 /* times taken offline */
	uint64_t slow_ejections; /* of those, as slow */
	uint64_t latency_us;	 /* moving average of its call times; while slow, its last probe */
	uint64_t hedged;	 /* its shard reads and writes abandoned as slower than the rest */
};
/* 0 and *out, or -ENOENT past the last drive. Any thread. */
int ol_store_drive_state(struct ol_store *st, int i, struct ol_store_drive_state *out);
/* cb(arg, drive root) runs on the drive monitor's thread each time an offline drive comes
 * back online (after it serves again), under the store's drive lock: it must return quickly
 * and call nothing of the store. NULL removes it; once this returns, the old cb is not
 * running and is not called again. */
void ol_store_on_drive_return(struct ol_store *st, void (*cb)(void *arg, const char *drive),
			      void *arg);
/* Per-drive paths of the shard files of an object (one per part per drive), for fault
 * injection: cb(drive, part_index, path). Inline objects have none. -ENOENT. */
int ol_store_shard_paths(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			 int (*cb)(int drive, unsigned part, const char *path, void *arg),
			 void *arg);

/* Whole-store heal (heal_scan.c). Walks every bucket, object and in-progress upload part,
 * reads every block of every shard (data and parity) on every online drive, rebuilds and
 * rewrites blocks that are missing, short or corrupt (missing shard files are recreated),
 * and writes back bucket, object, upload and part records to online drives that lack them.
 * Readers and writers go on meanwhile: blocks are rewritten only with bytes rebuilt from >= k
 * verified shards and their checksum, so a reader never sees wrong bytes.
 * Progress fields are updated atomically while it runs; any thread may read them.
 * One heal per process at a time: -EBUSY when another runs. -ECANCELED when cancelled
 * (ol_store_heal_cancel); 0 otherwise (check p->unrecoverable: objects or parts with more than
 * P shards lost in some stripe, or whose record has no quorum, are counted, not healed). */
/* Where a heal's scan stands (to resume it from there, on this node or another serving the
 * same layout): everything before (set, bucket, phase, key) is done. set: index among the
 * store's sets (pools in layout order, then sets); pool, pset: that set's position as its
 * drives' identity records name it (its pool, its index in the pool), OL_HEAL_SET_UNKNOWN
 * for a store whose drives are not checked (a resume then trusts the index); bucket: "" =
 * nothing of the set done yet; phase: what of the bucket is walked (0 objects, 1 versions, 2
 * uploads); key: the last index key done in that phase, below the bucket's prefix (key_len 0:
 * none yet). */
#define OL_HEAL_CURSOR_KEY  1200
#define OL_HEAL_SET_UNKNOWN 0xffffffffu
struct ol_heal_cursor {
	unsigned set, phase;
	unsigned pool, pset;
	char bucket[64];
	size_t key_len;
	uint8_t key[OL_HEAL_CURSOR_KEY];
};
struct ol_heal_opts {
	uint64_t rate_bytes; /* bytes read per second, 0: unlimited */
	bool missed_only;    /* only the missed-write records, no scan */
	/* resume: scan only what comes after this cursor (the missed writes are healed first,
	 * as always; the count pass still counts the whole store). NULL: the whole scan. A
	 * cursor whose set is not in the store now at its index (pool, pset differ: the layout
	 * changed between the runs; or the index is past the last set) is not used: the scan
	 * starts from the beginning (logged). */
	const struct ol_heal_cursor *from;
};
struct ol_heal_progress {
	_Atomic uint64_t objects_total; /* objects + upload parts found by the count pass */
	_Atomic uint64_t objects_scanned;
	_Atomic uint64_t bytes_total; /* logical bytes of those */
	_Atomic uint64_t bytes_scanned;
	_Atomic uint64_t shards_healed;	   /* (part, drive) shard files with a block rewritten */
	_Atomic uint64_t blocks_healed;	   /* shard blocks rewritten */
	_Atomic uint64_t records_restored; /* metadata records written back to a drive */
	_Atomic uint64_t unrecoverable;	   /* objects or parts not rebuilt, all drives online */
	/* objects or parts not rebuilt while a drive of their set was offline: maybe whole
	 * again once it returns (heal again then) */
	_Atomic uint64_t unreadable_offline;
	_Atomic uint64_t missed_healed; /* missed-write entries healed and removed */
	/* shard files or blocks a heal could not write on drives gone (offline, or their node
	 * not answering) by its end: not a failure, the heal at their return writes them */
	_Atomic uint64_t unwritten_gone;
	_Atomic int missed_only;		 /* the run heals missed-write records only */
	_Atomic int64_t started_ns, finished_ns; /* CLOCK_REALTIME; finished 0 while running */
	_Atomic int running;
	_Atomic int cancel; /* set by ol_store_heal_cancel */
	_Atomic int result; /* return code of the last run */
	/* the scan's position (ol_store_heal_cursor), guarded by cursor_lock (a spin flag) */
	_Atomic int cursor_lock;
	bool cursor_set;
	struct ol_heal_cursor cursor;
};
/* p must be zeroed by the caller before the first use (its counters are reset at start; a
 * cancel asked before the start is kept, and cleared when the call returns). */
int ol_store_heal_all(struct ol_store *st, const struct ol_heal_opts *o,
		      struct ol_heal_progress *p);
/* Missed-write records (missed.c; README "Healing"): a metadata commit that misses a
 * drive (offline when it began, its shards failed, or its txn failed) is recorded on the
 * drives that committed it, as (record, drive) entries: in the commit's own txn for a drive
 * known offline or skipped, in a follow-up txn for one that failed during the commit (a crash
 * in between leaves that one to the scan). A heal (ol_store_heal_all) first heals every key
 * recorded and removes the entries of the drives that hold it now (a drive still offline
 * keeps its entries), then scans, unless missed_only. Never fails a write: above
 * OL_MISSED_CAP pending entries misses are counted in dropped, not recorded.
 * pending: entries held now (exact after open and each heal; counted up by commits between);
 * dropped: misses not recorded since open. Any thread. */
void ol_store_missed_stats(struct ol_store *st, uint64_t *pending, uint64_t *dropped);
/* Where the running (or last) heal on p has come to: 0 and *out, -ENOENT before its scan
 * began (a heal that ends cancelled keeps the last cursor: resume from it). Any thread. */
int ol_store_heal_cursor(struct ol_heal_progress *p, struct ol_heal_cursor *out);
/* Ask a running heal on p to stop at the next block (any thread). */
void ol_store_heal_cancel(struct ol_heal_progress *p);

#endif
