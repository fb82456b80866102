/* kv/spill.h - the NVMe tier: append-only segment files "seg-NNNNNNNNNN.olkv" in one
 * directory, written and read with io_uring (O_DIRECT when the file system allows it).
 *
 * Record = 128-byte header, then the value, padded to whole 4 KiB blocks:
 *   u32 magic "OLKR", u16 version, u16 flags (1 = tombstone), key[32], ns[16], u64 len,
 *   u64 ver, u64 xxh3(value), u64 time_ms, ..., u64 xxh3(header bytes 0..120) at 120.
 * Version 1: the value at byte 128. Version 2: the header alone in the first 4 KiB block, the
 * value at 4096, so the write-behind writes its whole blocks straight from the DRAM slot
 * (O_DIRECT, no copy). Both take ol_kvs_rec_size(len) bytes: version 2 is written only for
 * lengths where that holds (len >= 4096 and len % 4096 == 0 or > 3968: every power-of-two
 * block), version 1 for the rest and for tombstones; recovery and reads take both (a tier an
 * older build wrote comes back as it was). docs/storage-format.md, "KV pool NVMe tier".
 * Recovery scans every segment in id order and stops a segment at the first bad header or
 * short record (a torn tail); reads check header, key and value checksum, so a torn or
 * overwritten record is never returned. Thread-safe (one mutex for appends and the segment
 * table); each calling thread has its own io_uring and bounce buffer; a syncer thread runs
 * the fdatasyncs asked for with ol_kvs_sync_async. */
#ifndef OL_KV_SPILL_H
#define OL_KV_SPILL_H

#include <stddef.h>
#include <stdint.h>

#define OL_KVS_HDR	 128
#define OL_KVS_ALIGN	 4096
#define OL_KVS_TOMBSTONE 1

struct ol_kvs;

struct ol_kvs_rec {
	uint8_t kk[48]; /* key[32] + ns hash[16] */
	uint64_t len;
	uint64_t ver;
	uint16_t flags;
};

struct ol_kvs_loc {
	uint64_t seg; /* 0 = none */
	uint64_t off;
};

typedef void (*ol_kvs_recover_fn)(void *arg, const struct ol_kvs_rec *r,
				  const struct ol_kvs_loc *loc);

/* Open (create) dir and recover: calls fn for every valid record in write order, then starts
 * a fresh segment. cap = total bytes the segments may use (oldest dropped first).
 * 0 or -errno. */
int ol_kvs_open(const char *dir, uint64_t cap, uint64_t max_value, ol_kvs_recover_fn fn, void *arg,
		struct ol_kvs **out);
void ol_kvs_close(struct ol_kvs *s);

/* Append one record (val may be NULL for a tombstone). On success *loc is where it lies; when
 * older segments had to be dropped to make room, their ids are in dropped[0..*n_dropped)
 * (at most 8; the caller removes index entries pointing to them; also when the append then
 * fails). 0 or -errno.
 * Appends are serialised (one mutex held across the write), so records land in call order
 * and a segment never has a hole before a record that was reported written. */
int ol_kvs_append(struct ol_kvs *s, const struct ol_kvs_rec *r, const void *val,
		  struct ol_kvs_loc *loc, uint64_t *dropped, unsigned *n_dropped);

/* Most bytes of records worth putting in one ol_kvs_append_batch: 16 MiB, less when the
 * segments are smaller. One record alone may be larger. */
#define OL_KVS_BATCH (16u << 20)
uint64_t ol_kvs_batch_bytes(const struct ol_kvs *s);

struct ol_kvs_item {
	struct ol_kvs_rec rec;
	/* rec.len bytes, read during the call and unchanged until it returns (the device may
	 * read them: a 4 KiB-aligned value of a version 2 record is written from here, not
	 * copied); NULL = tombstone */
	const void *val;
	struct ol_kvs_loc loc; /* out */
};

/* Append it[0..n) (n >= 1) contiguously into one segment: each value is checksummed, and
 * written from val (version 2, whole blocks of a 4 KiB-aligned value) or copied with its
 * header into this thread's bounce buffer (version 1, the partial last block of a version 2
 * value, an unaligned value); the pieces go to the device as writev requests of ~4 MiB, up
 * to 8 in flight, sent while the next records are checksummed. All or nothing: 0 and
 * every it[i].loc set, or -errno and none of them recoverable (what landed is cut off; the
 * next append starts a new segment). dropped as for ol_kvs_append. */
int ol_kvs_append_batch(struct ol_kvs *s, struct ol_kvs_item *it, unsigned n, uint64_t *dropped,
			unsigned *n_dropped);

/* fdatasync every segment written since the last sync. 0 or -errno. */
int ol_kvs_sync(struct ol_kvs *s);
/* The same, done soon by the tier's syncer thread; returns at once (appends go on while a
 * flush, which can take hundreds of ms on a virtual disk, runs). Close syncs what is left. */
void ol_kvs_sync_async(struct ol_kvs *s);

/* Read the record at loc into this thread's bounce buffer and check it against r (key, ns,
 * len, ver). Returns 0 and *val (valid until this thread's next read), -ENOENT (segment
 * dropped), -EBADMSG (checksum or identity mismatch), -EIO / -errno. */
int ol_kvs_read(struct ol_kvs *s, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc,
		const void **val);

/* One record read: rec and loc as for ol_kvs_read; val and rc, its results. */
struct ol_kvs_rd {
	struct ol_kvs_rec rec;
	struct ol_kvs_loc loc;
	const void *val; /* out: rec.len bytes, valid until this thread's next read */
	int rc;		 /* out: as ol_kvs_read returns */
};

/* An NVMe-tier read that the caller does on its own ring (an event loop): where the record
 * lies, and a hold on its segment. Segments are append-only and never rewritten in place; the
 * tier only drops whole segments (oldest first, to stay within cap, or at close), and a held
 * segment keeps its descriptor open after it is dropped (unlinked), so the len bytes at off of
 * fd stay the record that was appended there until ol_kvs_extent_put. */
struct ol_kvs_ext {
	int fd;
	uint64_t off, len; /* len = ol_kvs_rec_size(rec.len): whole 4 KiB blocks (O_DIRECT) */
	void *seg;	   /* private */
};

/* Hold the extent of the record of rec_len value bytes at loc. 0 (put it later exactly once)
 * or -ENOENT (segment dropped). Any thread; takes the tier's mutex briefly, never a disk. */
int ol_kvs_extent_get(struct ol_kvs *s, const struct ol_kvs_loc *loc, uint64_t rec_len,
		      struct ol_kvs_ext *x);
/* Drop the hold (the descriptor may be closed here). Any thread. */
void ol_kvs_extent_put(struct ol_kvs *s, struct ol_kvs_ext *x);
/* Check a record read into buf (x->len bytes) against r, as ol_kvs_read does: header, key,
 * namespace, length, version and the value's checksum. 0 and *val = the value in buf (at
 * OL_KVS_HDR or OL_KVS_ALIGN, as the record's version says), or -EBADMSG (counted as
 * corrupt). Pure but for the count. */
int ol_kvs_verify(struct ol_kvs *s, const struct ol_kvs_rec *r, const uint8_t *buf,
		  const void **val);

/* On-disk size of a record of len value bytes. */
uint64_t ol_kvs_rec_size(uint64_t len);

struct ol_kvs_stats {
	uint64_t cap, used, segments, appended, dropped_segments, corrupt;
};
void ol_kvs_get_stats(struct ol_kvs *s, struct ol_kvs_stats *st);

#endif
