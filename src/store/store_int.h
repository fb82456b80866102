/* store/store_int.h - internals shared by the engine's files (not a public header). */
#ifndef OL_STORE_INT_H
#define OL_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "base/driveid.h"
#include "io/io.h"
#include "meta/meta.h"
#include "store/ec.h"
#include "store/store.h"

#define OL_MAX_DRIVES 32
#define OL_MAX_SETS   64		 /* erasure sets of one store (sets.c) */
#define OL_MAX_POOLS  OL_STORE_MAX_POOLS /* pools of one store (sets.c) */
#define OL_NLOCKS     256
#define OL_GATES      1024 /* key gates of a store of several pools (drain.c) */
#define OL_TRAILER    8	   /* checksum after every shard block */
#define OL_UUID	      16
#define OL_PATH_MAX   512
#define OL_WHY_MAX    256 /* why a drive is offline, one line */
/* LMDB keys are at most 511 bytes: an object key longer than OL_KEY_HEAD is indexed as its
 * first OL_KEY_HEAD bytes + an 8-byte hash of the whole key, and its tail is kept in the
 * record (listing restores the order of such keys, see list.c). */
#define OL_KEY_HEAD 400

enum { OL_CK_CRC32C = 1, OL_CK_XXH3 = 2 };
/* VERSIONED: written in a versioning-enabled bucket (its id is shown, else "null");
 * DELMARK: a delete marker (inline, size 0, no data) */
enum { OL_REC_INLINE = 1, OL_REC_MULTIPART = 2, OL_REC_VERSIONED = 4, OL_REC_DELMARK = 8 };

struct ol_cq;

struct ol_rdrive;

/* slow.c: when a remote drive is slow enough to take offline (docs/cluster.md, "A slow
 * drive"). All pure: no clock, no lock. */
#define OL_SLOW_EWMA_DIV   8  /* each call moves a drive's latency EWMA 1/8 of the way */
#define OL_SLOW_MIN_CALLS  16 /* calls since it was judged afresh before a drive's EWMA is */
#define OL_SLOW_TICKS	   2  /* monitor ticks in a row, each on new calls, a drive is slow */
#define OL_SLOW_CALM_HOLDS 2  /* online this many caps without a relapse: hold back to base */
struct ol_slow_cfg {
	unsigned floor_ms;   /* below this a drive is never slow; 0 = ejection off */
	unsigned ratio;	     /* slow: at least this many times its peers' median */
	unsigned hold_s;     /* an ejected drive's probes fast this long before it returns */
	unsigned hold_max_s; /* the hold doubles on each relapse up to this */
	unsigned min_s;	     /* judged only once online (judged afresh) this long */
};
/* One drive's judging between the monitor's ticks (drive.c's monitor owns it). A drive is
 * judged afresh (its average reset, since_ms now, streak 0) when the monitor starts, so that
 * the calls of the store's opening are not in it, and when it returns. */
struct ol_slow_judge {
	uint64_t since_ms; /* judged afresh at (ms, ol_io_now_ms); 0: never judged */
	uint64_t calls;	   /* its call count at the last tick that found it slow */
	unsigned streak;   /* ticks in a row found slow, each on calls newer than the last's */
};
/* The EWMA after one more call of sample us (n calls before it; n 0: the sample itself). */
uint64_t ol_slow_ewma(uint64_t cur, uint64_t sample, uint64_t n);
/* The median of v[0..n-1] (the upper of the two middles for even n), 0 for n 0; sorts v. */
uint64_t ol_slow_median(uint64_t *v, int n);
/* Is a drive whose calls take lat_us slow beside peers whose median is peers_us: at least
 * floor_ms and at least ratio times peers_us (false when c->floor_ms is 0). */
bool ol_slow_is(const struct ol_slow_cfg *c, uint64_t lat_us, uint64_t peers_us);
/* One monitor tick's verdict on a drive judged afresh at j->since_ms that has made `calls`
 * calls since, averaging lat_us, beside npeers judged peers whose median is peers_us: true
 * once it has been slow (ol_slow_is) on OL_SLOW_TICKS ticks in a row, each with calls made
 * since the last such tick (a tick with none neither counts nor breaks the run), and only
 * after c->min_s online and OL_SLOW_MIN_CALLS calls; any tick that finds it not slow, too
 * young, with too few calls or no peers, starts the run again. Updates *j. */
bool ol_slow_judge(const struct ol_slow_cfg *c, struct ol_slow_judge *j, uint64_t now_ms,
		   uint64_t calls, uint64_t lat_us, int npeers, uint64_t peers_us);
/* May a set with `online` drives online, write quorum w and k data shards spare one more? */
bool ol_slow_may_eject(int online, int w, int k);
/* The hold of an ejection at now_ms of a drive whose last hold was prev_ms (0: none yet) and
 * which last returned from a slow spell at back_ms: the base hold for a first ejection or
 * one after OL_SLOW_CALM_HOLDS caps online, else the last one doubled, at most the cap. */
uint64_t ol_slow_next_hold(const struct ol_slow_cfg *c, uint64_t prev_ms, uint64_t back_ms,
			   uint64_t now_ms);
/* May a drive whose probes have been fast since good_since_ms (0: not fast now) return? */
bool ol_slow_may_return(uint64_t good_since_ms, uint64_t now_ms, uint64_t hold_ms);

/* Hedging (docs/cluster.md, "A slow drive"): a batch of remote shard ops that may spare some
 * of its ops abandons the stragglers instead of waiting for them. Pure, as above. */
#define OL_HEDGE_RECENT_MS 2000 /* a drive left behind this recently is lagging for reads */
struct ol_hedge_cfg {
	unsigned floor_ms; /* never abandon an op before this; 0 = hedging off */
	unsigned ratio;	   /* nor before this many times the finished ops' median time */
};
/* The time since a batch of n remote ops started (us) from which its unfinished ops may be
 * abandoned, given the times of the ndone that finished (done_us; sorted here) and how many
 * it may spare: UINT64_MAX while none may be (hedging off, none finished, or more than spare
 * unfinished), else the larger of floor_ms and ratio times their median. */
uint64_t ol_hedge_after_us(const struct ol_hedge_cfg *c, uint64_t *done_us, int ndone, int n,
			   int spare);
/* Does a drive whose calls average lat_us lag so far behind peers at peers_us that a read
 * goes to another shard instead: at least floor_ms and ratio times peers_us (false when off). */
bool ol_hedge_lagging(const struct ol_hedge_cfg *c, uint64_t lat_us, uint64_t peers_us);

/* What a metadata read's answers so far decide (issue 10): the answer that waiting for every
 * drive would give (FOUND, ABSENT), or WAIT. Pure, as above. */
enum { OL_DECIDE_WAIT, OL_DECIDE_FOUND, OL_DECIDE_ABSENT };
/* A record asked for by presence (a bucket's): FOUND on >= k answering drives (more answers
 * only add votes), ABSENT when votes + unanswered < k (every drive not answered, still running
 * or failed, counted as holding it, as ol_reads_absent does), else WAIT. */
int ol_presence_decide(int votes, int unanswered, int k);

struct ol_drive {
	char root[OL_PATH_MAX]; /* data dir; a remote drive: "node N host:port drive D" */
	struct ol_rdrive *rd;	/* NULL: a local drive; else served by a node plane (rdrive.c) */
	char data[OL_PATH_MAX]; /* root/.openlake/data */
	/* NULL: offline. Any thread may take a drive offline (ol_drive_offline); only the
	 * monitor (drive.c) brings it back. Readers load it once per use. */
	struct ol_meta *_Atomic meta;
	struct ol_meta *parked; /* an offline drive's env that is still sound (monitor only) */
	int lock_fd;
	_Atomic uint64_t faults; /* times taken offline */
	bool damaged;		 /* its meta.mdb is not trusted: moved aside when it returns */
	bool mounted;	      /* its root was a mount point when opened: not served from beneath */
	char why[OL_WHY_MAX]; /* why offline (monitor and ol_drive_offline, under drv_mu) */
	/* what its identity record must say (format.c); store "" = not checked. The drive
	 * UUID is the one seen last ("" unknown); written by open and the monitor only */
	struct ol_driveid id;
	unsigned id_miss; /* monitor ticks in a row a remote drive showed no record */
	/* slow-drive ejection (slow.c, drive.c's monitor): times taken offline as slow (any
	 * thread reads it); the rest is the monitor's own. slow: offline as slow, back only
	 * once its probes are fast for hold_ms (from good_ms, 0 = not yet); back_ms: its last
	 * return from a slow spell (a relapse soon after doubles the hold) */
	_Atomic uint64_t slow_ejections;
	_Atomic bool slow;
	uint64_t slow_hold_ms, slow_good_ms, slow_back_ms;
	_Atomic uint64_t slow_probe_us; /* the last probe's time while slow (metrics) */
	bool slow_kept;		    /* slow, kept online (the set cannot spare it): logged once */
	struct ol_slow_judge judge; /* the monitor's, and the open's before the monitor starts */
};

struct ol_store {
	int n, k, p, w; /* drives, data, parity, write quorum */
	uint32_t bs;	/* shard block size */
	uint64_t inline_max;
	int ck;
	bool fsync;
	struct ol_ec ec;
	struct ol_drive d[OL_MAX_DRIVES];
	pthread_rwlock_t bucket_lock; /* bucket delete (w) vs commits (r) */
	pthread_mutex_t obj_locks[OL_NLOCKS];
	pthread_mutex_t upl_locks[OL_NLOCKS];
	pthread_rwlock_t obj_rw[OL_NLOCKS];
	_Atomic int64_t last_ns;
	/* group commit: concurrent metadata commits queue here; one thread at a time runs
	 * the whole queue as one LMDB txn per drive and one round of fdatasyncs */
	pthread_mutex_t cq_mu;
	pthread_cond_t cq_cv;
	struct ol_cq *cq_head, **cq_tail;
	bool cq_busy;
	/* drive.c: the monitor that probes drives and brings them back */
	pthread_mutex_t drv_mu;
	pthread_cond_t drv_cv;
	pthread_t mon;
	bool mon_started, mon_stop;
	/* called on the monitor thread after a drive came back online (under no lock) */
	void (*on_return)(void *arg, const char *drive);
	void *on_return_arg;
	/* shard files of writes in progress (their records are not committed yet): the orphan
	 * sweep of heal never removes them */
	pthread_mutex_t fl_mu;
	uint8_t (*flight)[OL_UUID];
	size_t n_flight, cap_flight;
	struct ol_inuse_tab *inuse; /* versions being read (inuse.c) */
	/* reclaim.c: unlinks of replaced versions' shard files waiting for reclaim_ms (0: none
	 * wait), a ring of rq_n entries from rq_head, in the order queued; the reclaim thread
	 * does them when due */
	_Atomic unsigned reclaim_ms;
	pthread_mutex_t rq_mu;
	pthread_cond_t rq_cv;
	pthread_t rq_thr;
	bool rq_started, rq_stop, rq_full_logged;
	struct ol_rq_ent *rq;
	size_t rq_head, rq_n, rq_cap;
	/* a set of remote drives (ol_store_open_set) */
	bool remote; /* its drives are remote (ol_store_open_set) */
	/* a read-only view (ol_store_set_opts.readonly; a shell: every set is): nothing is
	 * written to a drive, every write returns -EROFS (store.h) */
	bool readonly;
	/* a shard writer (ol_store_set_opts.shards, with readonly): shard files of PUTs and
	 * parts are written, their commits go to committer (put.c, "shard writers") */
	bool shards;
	ol_store_commit_fn committer;
	void *committer_arg;
	size_t commit_max;	/* the largest request it carries (0: any) */
	_Atomic uint64_t epoch; /* sent with every metadata commit (fencing) */
	char secret[256];
	unsigned self_id;
	int deadline_ms;
	struct ol_slow_cfg slow;   /* slow-drive ejection of remote drives (floor_ms 0 = off) */
	struct ol_hedge_cfg hedge; /* abandoning stragglers of remote batches (floor_ms 0 = off) */
	/* sets.c: a store of several erasure sets is a shell (n_sets > 1) whose sets[] are
	 * one-set stores; a one-set store is its own only set (n_sets 1, sets[0] itself) */
	int n_sets;
	struct ol_store *sets[OL_MAX_SETS];
	uint64_t place_seed;  /* keys the placement hash (the store id / deployment id) */
	int upl_tag;	      /* >= 0: a set of a shell, its index is the upload ids' 1st byte */
	pthread_rwlock_t brw; /* shell: bucket create/delete (w) vs bucket repair (r) */
	/* shell: pool p is sets[pool_first[p] .. pool_first[p + 1] - 1] (one pool unless
	 * ol_store_pools made it); pool_free: new keys' weights (MiB free), all 0 = equal */
	int n_pools;
	int pool_first[OL_MAX_POOLS + 1];
	_Atomic uint64_t pool_free[OL_MAX_POOLS];
	/* drain.c: the pool being drained (-1 none: new keys never go there); object calls of a
	 * store of several pools count themselves in by key and by the gates' epoch parity
	 * (gate_busy[e][key's gate]), so the drain moves a key with no call on it in flight
	 * (gate_closed: new calls on it wait), and waits out the calls in flight at a moment
	 * (those of the epoch before it moved it on), not the ones that begin after */
	_Atomic int draining;
	_Atomic unsigned gate_busy[2][OL_GATES];
	_Atomic bool gate_closed[OL_GATES];
	_Atomic unsigned gate_epoch;
	int gate_waiting; /* the drain's: the parity + 1 whose calls it still waits out, 0 none */
	/* missed.c: missed-write entries (record, drive) held by the drives: exact after open
	 * and each heal pass, counted up by commits between; misses not recorded (cap) */
	_Atomic uint64_t missed_pending, missed_dropped;
	uint64_t missed_cap;	  /* OL_MISSED_CAP (tests lower it) */
	_Atomic bool missed_full; /* the cap was reached (logged once until it is not) */
	/* sweep.c: the grace of this set's orphan sweeps (0: the default, ol_sweep_grace); the
	 * periodic sweep of a store's sets (ol_store_set_sweep: the shell's, or a one-set
	 * store's own) */
	_Atomic unsigned sweep_grace_s;
	struct ol_sweeper *sweeper;
};

/* One part's layout inside a version record. */
struct ol_rpart {
	uint8_t uuid[OL_UUID];
	uint64_t size;
	uint32_t part_no;
};

/* A decoded version record (object or part). Pointers point into the raw bytes. */
struct ol_rec {
	uint8_t k, p, idx, ck;
	uint16_t flags;
	uint32_t bs;
	uint64_t size;
	int64_t mtime;
	uint8_t vid[OL_UUID];
	uint32_t n_parts;
	const uint8_t *parts; /* n_parts x 28 bytes, see rec_part() */
	const char *etag;
	uint32_t etag_len;
	const uint8_t *meta;
	uint32_t meta_len;
	const uint8_t *inl;
	uint32_t inl_len, inl_crc;
	const uint8_t *tail; /* key bytes past OL_KEY_HEAD (long keys only) */
	uint16_t tail_len;
	const uint8_t *prev;
	uint32_t prev_len;
};

/* The engine of one erasure set: the ol_store_* calls of store.h (sets.c dispatches them to
 * the sets of a store), each over the one set st. */
/* ids: drive i's identity (ol_format_open), or NULL: not checked. */
int ol_set_open(const struct ol_config *cfg, const struct ol_driveid *ids, struct ol_store **out);
void ol_set_close(struct ol_store *st);
int ol_set_open_set(const struct ol_config *cfg, const struct ol_store_set_opts *o,
		    struct ol_store **out);
void ol_set_set_epoch(struct ol_store *st, uint64_t epoch);
int ol_set_bucket_create(struct ol_store *st, const char *bucket);
/* Bucket with this creation time and attrs on st, made or replaced (the drain of the home
 * pool gives every bucket to the other pools' sets). 0 / -errno. */
int ol_set_bucket_copy(struct ol_store *st, const char *bucket, int64_t created, const void *attrs,
		       size_t len);
int ol_set_bucket_delete(struct ol_store *st, const char *bucket);
/* 0: no object, version or upload in the bucket; -ENOTEMPTY, -ENOENT. No lock taken. */
int ol_set_bucket_empty(struct ol_store *st, const char *bucket);
int ol_set_bucket_stat(struct ol_store *st, const char *bucket, int64_t *created_ns);
int ol_set_bucket_list(struct ol_store *st, ol_store_bucket_cb cb, void *arg);
int ol_set_bucket_create_attrs(struct ol_store *st, const char *bucket, const void *attrs,
			       size_t len);
int ol_set_bucket_get(struct ol_store *st, const char *bucket, int64_t *created_ns, void *buf,
		      size_t cap, size_t *len);
int ol_set_bucket_attrs(struct ol_store *st, const char *bucket, void **out, size_t *len);
int ol_set_bucket_set_attrs(struct ol_store *st, const char *bucket, const void *attrs, size_t len);
int ol_set_bucket_list_attrs(struct ol_store *st, ol_store_bucket_attrs_cb cb, void *arg);
int ol_set_put_begin(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		     int64_t size_hint, struct ol_put **out);
int ol_set_get_open(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    struct ol_get **out, struct ol_obj_info *info);
/* The same, with the record read on every drive (a GET stops at the drives that decide):
 * the heal's, so that a drive lacking the record has it written back. */
int ol_set_get_open_all(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			struct ol_get **out, struct ol_obj_info *info);
int ol_set_head(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		struct ol_obj_info *info, void *meta_buf, size_t meta_cap);
int ol_set_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len);
int ol_set_iter_open(struct ol_store *st, const char *bucket, struct ol_iter **out);
int ol_set_iter_seek(struct ol_iter *it, const char *key, size_t key_len);
int ol_set_iter_next(struct ol_iter *it, const char **key, size_t *key_len,
		     struct ol_obj_info *info);
void ol_set_iter_close(struct ol_iter *it);
int ol_set_mpu_create(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      const void *meta, size_t meta_len, char upload_id[64]);
int ol_set_mpu_part_begin(struct ol_store *st, const char *bucket, const char *upload_id,
			  unsigned part_no, struct ol_put **out);
int ol_set_mpu_list_parts(struct ol_store *st, const char *bucket, const char *upload_id,
			  struct ol_mpu_part **parts, size_t *n);
int ol_set_mpu_complete(struct ol_store *st, const char *bucket, const char *upload_id,
			const unsigned *part_nos, size_t n, const char *final_etag,
			struct ol_obj_info *out);
int ol_set_mpu_complete_cond(struct ol_store *st, const char *bucket, const char *upload_id,
			     const unsigned *part_nos, size_t n, const char *final_etag,
			     const struct ol_store_cond *cond, struct ol_obj_info *out);
int ol_set_mpu_abort(struct ol_store *st, const char *bucket, const char *upload_id);
int ol_set_mpu_list(struct ol_store *st, const char *bucket, ol_store_mpu_cb cb, void *arg);
int ol_set_mpu_stat(struct ol_store *st, const char *bucket, const char *upload_id, char *key,
		    size_t *key_len, void *meta_buf, size_t meta_cap, size_t *meta_len);
int ol_set_get_open_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
			const char *version_id, struct ol_get **out, struct ol_obj_info *info);
int ol_set_head_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    const char *version_id, struct ol_obj_info *info, void *meta_buf,
		    size_t meta_cap);
int ol_set_delete_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		      int vmode, const char *version_id, struct ol_obj_info *out);
int ol_set_set_meta(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    const char *version_id, int64_t expect_mtime, const void *meta,
		    size_t meta_len);
int ol_set_mpu_complete_ver(struct ol_store *st, const char *bucket, const char *upload_id,
			    const unsigned *part_nos, size_t n, const char *final_etag,
			    const struct ol_store_cond *cond, int vmode, struct ol_obj_info *out);
int ol_set_mpu_complete_meta(struct ol_store *st, const char *bucket, const char *upload_id,
			     const unsigned *part_nos, size_t n, const char *final_etag,
			     const struct ol_store_cond *cond, int vmode, const void *meta,
			     size_t meta_len, struct ol_obj_info *out);
int ol_set_viter_open(struct ol_store *st, const char *bucket, struct ol_viter **out);
int ol_set_viter_seek(struct ol_viter *it, const char *key, size_t key_len);
int ol_set_viter_next(struct ol_viter *it, const char **key, size_t *key_len,
		      struct ol_obj_info *info);
void ol_set_viter_close(struct ol_viter *it);
int ol_set_drive_count(const struct ol_store *st);
const char *ol_set_drive_path(const struct ol_store *st, int i);
int ol_set_drives_online(const struct ol_store *st);
void ol_set_on_drive_return(struct ol_store *st, void (*cb)(void *arg, const char *drive),
			    void *arg);
int ol_set_shard_paths(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		       int (*cb)(int drive, unsigned part, const char *path, void *arg), void *arg);
/* heal_scan.c: heal every set of sets[0..n-1] (one count pass over all, then one heal pass),
 * with one progress. */
int ol_set_heal_all(struct ol_store *const *sets, int n, const struct ol_heal_opts *o,
		    struct ol_heal_progress *p);
/* sets.c: the k-way merge state of an iterator over several sets (NULL: one set). */
struct ol_kmerge;
struct ol_iter *ol_iter_shell(struct ol_kmerge *km); /* list.c */
struct ol_kmerge *ol_iter_km(const struct ol_iter *it);
struct ol_viter *ol_viter_shell(struct ol_kmerge *km); /* version.c */
struct ol_kmerge *ol_viter_km(const struct ol_viter *it);

/* record.c */
struct ol_rec_build {
	const struct ol_store *st;
	uint16_t flags;
	uint64_t size;
	int64_t mtime;
	const uint8_t *vid;
	const struct ol_rpart *parts;
	uint32_t n_parts;
	const char *etag;
	const void *meta;
	uint32_t meta_len;
	int idx;
	const uint8_t *inl;
	uint32_t inl_len;
	const uint8_t *tail;
	uint16_t tail_len;
	const uint8_t *prev;
	uint32_t prev_len;
};
uint8_t *ol_rec_encode(const struct ol_rec_build *b, size_t *len);
int ol_rec_decode(const void *buf, size_t len, struct ol_rec *r);
void ol_rec_part(const struct ol_rec *r, uint32_t i, struct ol_rpart *out);
/* The record with its meta blob replaced (malloc'd; NULL when buf does not decode). */
uint8_t *ol_rec_with_meta(const void *buf, size_t len, const void *meta, uint32_t mlen,
			  size_t *out_len);
/* The record without its prev (malloc'd). */
uint8_t *ol_rec_strip(const void *buf, size_t len, size_t *out_len);
/* A read-only view's doubt about best, the version ol_rec_resolve chose (issue 10, docs/cluster.md
 * "Read-only views"): true when some newer version is on so many of the answering drives that,
 * with the unanswered ones counted as holding it, it may be on a write quorum: acknowledged,
 * while the drives this view reads show it on fewer than k (a drive it cannot reach holds it
 * and another missed it). The writer never has this doubt about its own commits (a reader waits
 * for the key's commit under its lock); a view reads beside commits in flight and must not
 * answer the older version as current. */
bool ol_rec_doubt(const struct ol_store *st, const void *const *raw, const size_t *lens,
		  const struct ol_rec *best, int unanswered);
/* Resolve the per-drive raw records: newest version present on >= k drives. win[d] is set to the
 * decoded record of that version on drive d (valid[d] says which). Returns 1 found, 0 none. */
int ol_rec_resolve(const struct ol_store *st, const void *const *raw, const size_t *lens,
		   struct ol_rec *win, bool *valid);
/* The same over the records of one read (ol_reads.sound): a record whose bit is set in *sound
 * passed its checksum at a decode of this read before and is not summed again; each that
 * passes now has its bit set. ol_rec_decide_sound likewise. */
int ol_rec_resolve_sound(const struct ol_store *st, const void *const *raw, const size_t *lens,
			 uint32_t *sound, struct ol_rec *win, bool *valid);
uint32_t ol_crc32c(const void *buf, size_t len, uint32_t seed);
/* ol_rec_resolve's answer decided before every drive answered, for the n drives' records
 * raw[] (NULL: none, or not answered yet), pending of them still running and unanswered not
 * answered in all (pending included): ABSENT when ol_presence_decide says so (no version can
 * reach k votes); FOUND when pending < k and the newest version among the answers (a current
 * record or a prev) holds >= k votes there (and >= its own k): a newer version could then
 * be only on pending drives, on fewer than k, and never wins; else WAIT (a record that does
 * not decode too: the full read takes its drive out). Pure: decodes only. */
int ol_rec_decide(int n, int k, const void *const *raw, const size_t *lens, int pending,
		  int unanswered);
int ol_rec_decide_sound(int n, int k, const void *const *raw, const size_t *lens, int pending,
			int unanswered, uint32_t *sound);
uint64_t ol_block_sum(int ck, const void *buf, size_t len, uint64_t block);
void ol_put_u32(uint8_t *p, uint32_t v);
void ol_put_u64(uint8_t *p, uint64_t v);
uint32_t ol_get_u32(const uint8_t *p);
uint64_t ol_get_u64(const uint8_t *p);
/* Bucket record: created_ns + crc. Upload record: init, key, meta. */
size_t ol_brec_encode(uint8_t out[16], int64_t created);
int ol_brec_decode(const void *buf, size_t len, int64_t *created);
/* bucket.c: a bucket record of either version (v1 or v2 with attrs) decodes: 0 or -EIO. */
int ol_brec_check(const void *buf, size_t len);
uint8_t *ol_urec_encode(int64_t init, const char *key, size_t klen, const void *meta, size_t mlen,
			size_t *len);
int ol_urec_decode(const void *buf, size_t len, int64_t *init, const char **key, size_t *klen,
		   const void **meta, size_t *mlen);

/* rdrive.c: remote drives (a node plane serves them). Shards of a remote drive are handled
 * through virtual descriptors (>= OL_VFD_BASE; real descriptors never get that high). */
#define OL_VFD_BASE 0x40000000
struct ol_store_drive_spec;
struct ol_rdrive *ol_rd_new(struct ol_store *st, const struct ol_store_drive_spec *sp);
void ol_rd_free(struct ol_rdrive *rd);
int ol_rd_ping(struct ol_rdrive *rd);
/* The EWMA of the drive's call times in us (every plane call, the wait for a pooled
 * connection and the fault hook's delay included) and how many calls it has seen since its
 * last reset. Lock-free; any thread. */
uint64_t ol_rd_latency(struct ol_rdrive *rd, uint64_t *calls);
/* Forget the drive's call times (a drive that returns starts afresh). */
void ol_rd_latency_reset(struct ol_rdrive *rd);
/* One small read of the drive (its identity record, served from the drive itself, not a
 * ping) timed by the wall clock, the way calls are timed: 0 and *us, or -errno. */
int ol_rd_probe(struct ol_rdrive *rd, uint64_t *us);
/* A remote env for drive d once it answers (ping, its identity, a metadata read). 0 or
 * -errno; why (cap bytes) says what failed: -EXDEV, the drive is not the one its slot
 * expects (its identity record names another store or position), nothing was written to it. */
int ol_rd_open_meta(struct ol_store *st, int d, struct ol_meta **out, char *why, size_t cap);
/* Drive d's identity record (DRIVE_ID) against st->d[d].id: 0, 1 it has none (only without
 * claim; nothing written), -EXDEV (another drive, why says whose), -errno. With claim a
 * drive without one has st->d[d].id written, with a fresh UUID. */
int ol_rd_ident(struct ol_store *st, int d, bool claim, char *why, size_t cap);
/* Drive d's node answers and the disk at the slot's index is not the slot's (another slot's
 * record, or none): the index of the node's one other disk that holds the slot's record (the
 * node's data_dirs lines reordered, or its disks mounted in another order), else -1 (also
 * when two do: a cloned disk, logged). move (the drive offline: no call in flight): the drive
 * is addressed there from now on, logged. */
int ol_rd_find(struct ol_store *st, int d, bool move);
/* What ol_rd_shard_open opens of a remote shard. */
enum ol_rd_open {
	OL_RD_EXISTING,	    /* an existing shard (-ENOENT when missing) */
	OL_RD_CREATE,	    /* a new empty one, created now (-EEXIST) */
	OL_RD_DIR,	    /* a handle for its directory */
	OL_RD_CREATE_LATER, /* a new one created (exclusively) by its first write or sync */
	OL_RD_UNCHECKED,    /* an existing one, no call now: a read of a missing one fails then */
};
int ol_rd_shard_open(struct ol_store *st, int d, const uint8_t *uuid, enum ol_rd_open how);
void ol_rd_shard_unlink(struct ol_store *st, int d, const uint8_t *uuid);
/* Every file in the shard directories of remote drive d: cb(arg, dir, name, mtime in s);
 * a non-zero cb return stops the walk and is returned. 0 or -errno (SHARD_LIST pages). */
int ol_rd_list(struct ol_store *st, int d,
	       int (*cb)(void *arg, const char *dir, const char *name, uint64_t mtime), void *arg);
bool ol_vfd(int fd);
void ol_vfd_close(int fd);
/* ol_io_batch for ops on real and virtual descriptors (the remote ones over the plane, in
 * parallel). Same contract; n <= 2 * OL_MAX_DRIVES. */
int ol_shard_batch(struct ol_io_op *ops, unsigned n);
/* ol_shard_batch that may give up on `spare` of its remote ops (0: as ol_shard_batch): once
 * all but at most spare of them have finished and the rest have run past the store's hedge
 * delay (ol_hedge_after_us), the rest are abandoned: their connections are shut down and
 * dropped, each such op ends with res -ETIMEDOUT (none of its buffers is touched after this
 * returns; a write may still land on the drive later, with the same bytes), its time counts
 * in the drive's EWMA and in its hedged counter. *hedged (when given) is set to the mask of
 * abandoned op indexes. Local ops are never abandoned. */
int ol_shard_batch_spare(struct ol_io_op *ops, unsigned n, int spare, uint64_t *hedged);
/* A new generation for the drive (above every earlier one), carried by its next commit: a
 * commit of an older one, still on its way, is then refused there once a newer one landed
 * (-ESTALE at the drive). ol_rd_gen: the current one. Any thread. */
uint64_t ol_rd_fence_next(struct ol_rdrive *rd);
uint64_t ol_rd_gen(struct ol_rdrive *rd);
/* Ops of drive d's remote calls that hedged batches abandoned (any thread). */
uint64_t ol_rd_hedged(struct ol_rdrive *rd);
/* Is remote drive d of st so far behind its set's other online remote drives (EWMAs,
 * ol_hedge_lagging), or was an op of it left behind in the last OL_HEDGE_RECENT_MS, so that a
 * read should take another shard instead? False for a local drive or with hedging off. After
 * that time a read asks it again (and leaves it behind again while it is slow): the probe. */
bool ol_drive_lagging(struct ol_store *st, int d);
/* The median call time (us) of remote drive d's online remote peers with at least min_calls
 * calls in their average; *np: how many there are (0: the median is 0). */
uint64_t ol_drive_peers_us(struct ol_store *st, int d, uint64_t min_calls, int *np);
/* fn(st, d, arg) for every drive: local ones in this thread in order, remote ones at once
 * (their calls overlap on the wire). fn must only touch drive d's part of shared state. */
void ol_each_drive(struct ol_store *st, void (*fn)(struct ol_store *st, int d, void *arg),
		   void *arg);
/* ol_each_drive whose remote drives may be left behind (issue 10): each remote drive's fn runs
 * on its own thread (local ones on this one, first); after each one ends, decided(arg, done)
 * (called under a lock; done[d]: drive d's fn ended, every local one's has) says whether the
 * ends in hand settle what the caller will conclude. Once it does and the rest have run past
 * the store's hedge delay (ol_hedge_after_us, all of them spare), the rest are abandoned as
 * ol_shard_batch_spare's are: their connections cut (their calls return -ECANCELED at once),
 * each call noted in the drive's EWMA with the time it was given, each drive counted in its
 * hedged counter. Every fn has ended when this returns. Returns the mask of drives abandoned
 * (0 with hedging off: then it is ol_each_drive). decided must read only what the fns of
 * drives done[] wrote. */
uint32_t ol_each_drive_hedged(struct ol_store *st,
			      void (*fn)(struct ol_store *st, int d, void *arg),
			      bool (*decided)(void *arg, const bool *done), void *arg);

/* shard.c: shard files (their I/O goes through io/'s ol_io_batch, one ring per thread) */
void ol_shard_path(const struct ol_store *st, int d, const uint8_t *uuid, char *buf, size_t cap);
int ol_shard_create(const struct ol_store *st, int d, const uint8_t *uuid);
/* ol_shard_create, but a remote drive's shard is created by its first write or fsync (in a
 * batch with the other drives', where a slow drive may be left behind) instead of now: that
 * write or fsync fails -EEXIST where ol_shard_create would have. */
int ol_shard_create_deferred(const struct ol_store *st, int d, const uint8_t *uuid);
/* ol_shard_open, but a remote drive's shard is not checked now (no call): a read of a
 * missing one fails when it is made. */
int ol_shard_handle(const struct ol_store *st, int d, const uint8_t *uuid);
/* An fd on the directory holding the shard file (to fsync its entry), or -errno. */
int ol_open_shard_dir(const struct ol_store *st, int d, const uint8_t *uuid);
void ol_shard_unlink(const struct ol_store *st, int d, const uint8_t *uuid);
/* An existing shard open for reading and (when allowed) writing: fd or -errno (-ENOENT). */
int ol_shard_open(const struct ol_store *st, int d, const uint8_t *uuid);
/* close / pwrite / fdatasync of a shard fd (real or virtual). */
void ol_shard_close(int fd);
ssize_t ol_shard_pwrite(int fd, const void *buf, size_t len, uint64_t off);
int ol_shard_datasync(int fd);
/* Start writing back [off, off + len) of a local shard now, without waiting (the fsync at
 * commit then finds little left to write: the disk works while the body still arrives). A
 * hint only: nothing for a virtual fd (the remote drive's plane syncs at commit), errors
 * ignored; durability still comes from the fsync. */
void ol_shard_writeback(int fd, uint64_t off, uint64_t len);
static inline bool
ol_drive_remote(const struct ol_store *st, int d)
{
	return st->d[d].rd != NULL;
}

/* inuse.c: a version held by a reader keeps its shard files until the last release. hold and
 * release pair per reader; defer returns true (and takes the unlink of shard uuid on drive d
 * over) when version vid is held; has_shard tells whether an unlink of uuid is deferred. */
struct ol_inuse_tab *ol_inuse_new(void);
void ol_inuse_free(struct ol_inuse_tab *t);
void ol_inuse_hold(struct ol_store *st, const uint8_t *vid);
void ol_inuse_release(struct ol_store *st, const uint8_t *vid);
bool ol_inuse_defer(const struct ol_store *st, int d, const uint8_t *vid, const uint8_t *uuid);
bool ol_inuse_has_shard(const struct ol_store *st, const uint8_t *uuid);
/* reclaim.c: the delayed reclaim (ol_store_set_reclaim_delay). */
#define OL_RECLAIM_CAP (1u << 20) /* queued unlinks per set (32 bytes each) */
void ol_reclaim_init(struct ol_store *st);
/* Stop the reclaim thread, unlink what is queued, free the queue (before the drives close). */
void ol_reclaim_fini(struct ol_store *st);
/* Unlink shard uuid of drive d now (no delay set, or a read-only view: then nothing), or queue
 * it for the delay (at the cap the oldest queued one is unlinked early, logged once). Any
 * thread. */
void ol_reclaim_unlink(struct ol_store *st, int d, const uint8_t *uuid);
/* The uuids queued now, sorted (*out malloc'd, the caller frees; NULL when 0): the count. */
size_t ol_reclaim_queued(struct ol_store *st, uint8_t (**out)[OL_UUID]);
/* Is uuid among v[0..n-1] (sorted by ol_reclaim_queued)? */
bool ol_reclaim_has(uint8_t (*const v)[OL_UUID], size_t n, const uint8_t *uuid);
/* Unlink every part file of a raw record (and its prev) on drive d, except those in keep. */
void ol_reclaim(const struct ol_store *st, int d, const void *raw, size_t len,
		const struct ol_rec *keep);
int ol_sweep(struct ol_store *st);

/* store.c */
/* A store with its geometry from cfg, its locks made, no drive opened (rset.c, store.c). */
int ol_store_new(const struct ol_config *cfg, struct ol_store **out);
int64_t ol_now_ns(struct ol_store *st);
/* mkdir -p (errors logged with the dir). 0 or -errno. */
int ol_mkdir_p(const char *path);
void ol_uuid(uint8_t out[OL_UUID]);

/* drain.c: a version copied into another pool keeps its mtime and id. While the drain's own
 * thread sets ol_import_cur, the object, complete or delete marker it commits takes them
 * instead of now and a fresh id (put.c, mpu.c, version.c); NULL (always, on other threads):
 * as usual. */
struct ol_import {
	int64_t mtime;
	uint8_t vid[OL_UUID];
};
extern _Thread_local const struct ol_import *ol_import_cur;
/* 1 "null", 0 an id (*mtime, vid), -EINVAL (version.c) */
int ol_ver_parse(const char *id, int64_t *mtime, uint8_t *vid);
/* drain.c: key gates of a shell of several pools (0: not gated; else a token to pass to
 * leave) */
unsigned ol_gate_enter(struct ol_store *st, uint64_t h);
void ol_gate_leave(struct ol_store *st, unsigned g);
/* sets.c: repair bucket on set i of shell st (true: retry the call); the set a new key
 * goes to now (never the draining pool) and its placement hash, or -EINVAL */
bool ol_sets_repaired(struct ol_store *st, unsigned i, const char *bucket);
int ol_sets_key_dest(struct ol_store *st, const char *bucket, const char *key, size_t klen,
		     uint64_t *h);
/* sets.c: every bucket of set 0 (with its creation time and attrs) made or replaced on every
 * set outside pool (the home pool, draining: set 0 of the next pool becomes the home once it
 * is removed); writers of buckets wait meanwhile. 0 and *n buckets, or -errno. */
int ol_sets_give_buckets(struct ol_store *st, unsigned pool, unsigned *n);
/* put.c: put_commit / put_abort of p leave gate g of shell st */
/* A writer of set st with no bucket check (put.c; ol_set_put_begin checks first). */
struct ol_put *ol_put_new(struct ol_store *st, const char *bucket, const void *key, size_t klen,
			  bool part);
int ol_put_set_part(struct ol_put *p, const char *upload_id, unsigned part_no);
void ol_put_set_gate(struct ol_put *p, struct ol_store *st, unsigned g);
/* A shard writer's commit request, decoded (put.c): pointers into the request's bytes. */
struct ol_creq {
	unsigned flags, vmode, n, k;
	const uint8_t *store;
	size_t store_len;
	unsigned pool, set;
	char bucket[64];
	const uint8_t *key; /* the object key, or the part's key (upload key, part number) */
	size_t klen;
	char upload_id[64];
	unsigned part_no;
	const uint8_t *uuid;
	uint64_t size;
	char etag[OL_STORE_ETAG_MAX];
	const uint8_t *meta;
	size_t meta_len;
	char if_match[OL_STORE_ETAG_MAX];
	uint64_t bad; /* drives the writer failed, bit d */
	uint32_t bl;  /* inline: each drive's shard bytes, n of them at inl */
	const uint8_t *inl;
	uint64_t absent; /* OL_CREQ_ABSENT: drives offline when the writer began (in bad too) */
};
enum {
	OL_CREQ_PART = 1,
	OL_CREQ_INLINE = 2,
	OL_CREQ_IF_NONE_MATCH = 4,
	OL_CREQ_IF_MATCH = 8,
	OL_CREQ_ABSENT = 16, /* the absent mask follows the inline shards */
};
int ol_creq_decode(const void *req, size_t len, struct ol_creq *q);
/* Commit q on set st (the leader's, the set q names): as put_commit's publish. -EAGAIN
 * (nothing committed, the writer's client retries) when q skipped from its start a drive st
 * has online: the writer's view was behind the leader's, and an acknowledged version must
 * not have fewer shards than the leader would have written. */
int ol_set_commit_remote(struct ol_store *st, const struct ol_creq *q, int vmode,
			 struct ol_obj_info *out);
/* shards: may this store write shard files (a writer, or a shard writer) */
static inline bool
ol_shards_ok(const struct ol_store *st)
{
	return !st->readonly || st->shards;
}
/* The index key of an object: bucket '\0' key (long keys: head + hash, see OL_KEY_HEAD). */
size_t ol_okey(char *buf, const char *bucket, const char *key, size_t klen);
/* Set b->tail for a long key. */
void ol_key_tail(struct ol_rec_build *b, const char *key, size_t klen);
unsigned ol_lock_idx(const char *bucket, const void *key, size_t klen);
/* Per-drive copies of the records of one key in db (plus the bucket's presence). */
struct ol_reads {
	void *raw[OL_MAX_DRIVES];
	size_t len[OL_MAX_DRIVES];
	int bucket_votes;
	int answered;	/* drives whose read ran without a fault (a missing record counts) */
	uint32_t left;	/* drives left behind (slow; not a fault): they did not answer */
	uint32_t sound; /* drives whose record passed its checksum at a decode of this read */
};
/* How a read may end before every drive answered (issue 10): never (ALL), or once the answers
 * in hand decide what waiting would (ol_rec_decide for REC, ol_presence_decide for PRESENT, the
 * bucket's presence too when a bucket is asked for and the key is absent) and the rest ran
 * past the hedge delay: they are then left behind (ol_each_drive_hedged), in r->left. ATTRS:
 * a bucket's record read for its attrs (the newest update among the answers wins): as
 * PRESENT, and present only with fewer than w drives pending, so that the newest acknowledged
 * update (on >= w drives) is among the answers. */
enum ol_reads_how { OL_READS_ALL, OL_READS_REC, OL_READS_PRESENT, OL_READS_ATTRS };
void ol_reads_get_as(struct ol_store *st, enum ol_meta_db db, const void *key, size_t klen,
		     const char *bucket, struct ol_reads *r, enum ol_reads_how how);
void ol_reads_get(struct ol_store *st, enum ol_meta_db db, const void *key, size_t klen,
		  const char *bucket, struct ol_reads *r);
void ol_reads_free(struct ol_reads *r);
/* A record found on fewer than k drives: -ENOENT when enough drives answered to know it is
 * absent, -EIO when the drives that did not answer could still hold it on k. */
int ol_reads_absent(const struct ol_store *st, const struct ol_reads *r);
/* 0 when the bucket exists (on >= k drives), -ENOENT when enough drives answered to know it
 * does not, -EIO when too few answered to tell (a leader cut off from its peers must not
 * answer NoSuchBucket). Callers pass -EIO on (503, retried), never turn it into "absent";
 * there is no boolean form, on purpose. */
int ol_bucket_check(struct ol_store *st, const char *bucket);
/* mpu.c: the same for an upload record (key: bucket '\0' upload id, kl its length): 0 on
 * >= k drives, -ENOENT surely gone (NoSuchUpload), -EIO undecided. */
int ol_upload_check(struct ol_store *st, const char *k, size_t kl);

#define OL_KEYBUF (64 + 1 + OL_STORE_MAX_KEY + 80)

/* store.c: write one key's record on every online drive (one txn per drive, never two held
 * at once), then group-sync. Returns the number of drives that committed. */
struct ol_commit {
	enum ol_meta_db db;
	const void *k;
	size_t kl;
	const struct ol_rec_build *b; /* per drive; encoded with the old record as prev */
	uint8_t *const *raw;	      /* or: per-drive raw value; or both NULL: delete k */
	const size_t *raw_len;
	const bool *skip; /* drives not to touch (their shards failed), may be NULL */
	/* with b: keep as prev the record of this version (the one readers see now), found as
	 * the drive's current record or its prev; NULL: the drive's current record */
	const uint8_t *prev_vid;
	/* also delete, in the same txns: every key with this prefix in OL_META_PARTS, and the
	 * exact key del_key in OL_META_UPLOADS */
	const void *del_prefix;
	size_t del_plen;
	const void *del_key;
	size_t del_kl;
	/* versioning (version.c): with b, vmode ON/SUSP keeps the replaced version in
	 * OL_META_VERSIONS (old[] is then never reclaimed; removed null versions go to gone[]);
	 * vdel_k: remove that versions key instead (into gone[]) and, where k's current record is
	 * that version, make the next newest current */
	int vmode;
	const void *vdel_k;
	size_t vdel_kl;
	/* set_vid: replace the meta blob of that version in place, in k's current record (if it
	 * is that version) and in the versions key set_vk (if present) */
	const uint8_t *set_vid;
	const void *set_vk, *set_meta;
	size_t set_vkl;
	uint32_t set_meta_len;
	/* filled: the values replaced or deleted, per drive, for ol_commit_reclaim */
	void *old[OL_MAX_DRIVES];
	size_t old_len[OL_MAX_DRIVES];
	void **gone[OL_MAX_DRIVES]; /* deleted part records */
	size_t *gone_len[OL_MAX_DRIVES];
	size_t n_gone[OL_MAX_DRIVES];
	bool done[OL_MAX_DRIVES];
	/* missed-write records (missed.c): skip_missed: the skipped drives missed the write
	 * (their shards failed), record them; set by batch_run: the drives (bits) whose miss
	 * each committing drive records in the same txn, when, and how many entries were new */
	bool skip_missed;
	uint32_t missed;
	int64_t missed_ns;
	int missed_new[OL_MAX_DRIVES];
	_Atomic bool stale; /* a drive refused the commit: it has seen a newer epoch (-ESTALE) */
	bool rofs;	    /* refused whole: the store is a read-only view (-EROFS) */
};
int ol_commit_all(struct ol_store *st, struct ol_commit *c);
/* The version id readers see now for key k in db, into vid; 0 none, 1 found. */
int ol_visible_vid(struct ol_store *st, enum ol_meta_db db, const void *k, size_t kl,
		   uint8_t vid[OL_UUID]);
/* cond (may be NULL) against the object visible now under object key k (in OL_META_OBJECTS);
 * the caller holds the key's write lock. 0, -ECANCELED or -ENODATA (see ol_store_cond). */
int ol_cond_check(struct ol_store *st, const void *k, size_t kl, const struct ol_store_cond *cond);
/* Unlink the data of replaced records on the drives that committed (keep: files still used). */
void ol_commit_reclaim(struct ol_store *st, struct ol_commit *c, const struct ol_rec *keep);
void ol_commit_free(struct ol_commit *c);
/* The error of a commit that missed its quorum: -EROFS on a read-only view, -ESTALE when
 * fenced, else -EIO. */
int ol_commit_err(const struct ol_commit *c);

/* version.c */
#define OL_VSUFFIX 25 /* '\0' ~mtime (BE64) vid[16] after the object index key */
size_t ol_vkey(char *buf, const void *okey, size_t okl, int64_t mtime, const uint8_t *vid);
/* The version id text of a record (OL_STORE_VID_MAX bytes). */
void ol_ver_id(const struct ol_rec *r, char *out);
void ol_ver_id_raw(uint16_t flags, int64_t mtime, const uint8_t *vid, char *out);
/* Inside a drive's write txn of c (store.c put_one): versions work after the new current
 * record rec (NULL for vdel) was put; strip: this drive's copy of the replaced visible one. */
int ol_ver_apply(struct ol_meta_txn *t, struct ol_commit *c, int d, const uint8_t *rec, size_t rl,
		 const uint8_t *strip, size_t sl);
bool ol_ver_has(struct ol_meta_txn *t, const void *okey, size_t okl);
int ol_ver_del_one(struct ol_meta_txn *t, struct ol_commit *c, int d);
int ol_ver_meta_one(struct ol_meta_txn *t, struct ol_commit *c, int d);
/* Keep a malloc'd copy of v in gone[d] (reclaimed after a quorum commit). */
void ol_commit_gone(struct ol_commit *c, int d, const void *v, size_t vl);

/* format.c: drive identity records (base/driveid.h). */
/* Check data dirs 0..m*n-1 of cfg (m sets of n) against their records and write the records
 * the drives lack; ids[i] is given what drive i's record says (or must say). Dirs listed in
 * another order than their records say are put in the records' order in cfg->data_dirs
 * (logged). A drive that is another store's or another position's: -EINVAL, logged with the
 * drive, where it belongs and the fix. *seed: the placement seed (0 for one set; else from
 * the store id). */
int ol_format_open(struct ol_config *cfg, unsigned n, unsigned m, uint64_t *seed,
		   struct ol_driveid *ids);
/* Record f (found at where, e.g. "its identity record") against expected e: 0 the same
 * position, else -EXDEV and why says whose drive it is and the fix. */
int ol_format_match(const struct ol_driveid *e, const struct ol_driveid *f, const char *where,
		    char *why, size_t cap);
/* Local drive d against its identity record (monitor thread): 0 it is the drive, 1 it has no
 * record and is blank (no metadata), ours (its metadata is the env st holds), or never seen
 * with one (its UUID unknown: unreadable at open, an older build's): the caller writes one
 * (ol_format_claim); -EXDEV another drive or a garbled record, -errno unreadable
 * (why says which). Adopts a changed drive UUID of the right position (logged). */
int ol_format_verify(struct ol_store *st, int d, bool ours, char *why, size_t cap);
/* Write a fresh record (new drive UUID) for drive d. 0 or -errno (logged). */
int ol_format_claim(struct ol_store *st, int d);

/* drive.c */
/* Take drive d offline if its env is still m (NULL: whatever it is): one log line with the
 * drive's path and the reason, the fault counter; the env is kept for the monitor when it is
 * sound, abandoned when broken or damaged (its file is then moved aside when the drive comes
 * back). Any thread. */
void ol_drive_offline(struct ol_store *st, int d, struct ol_meta *m, bool damaged, const char *why);
/* A copy of why drive d went offline ("" while online): taken under drv_mu, so a caller
 * that saw the drive offline reads the reason of that fall. */
void ol_drive_why(struct ol_store *st, int d, char *out, size_t cap);
/* After a failed meta call on drive d's env m: offline when m is broken. */
void ol_drive_check(struct ol_store *st, int d, struct ol_meta *m);
/* Open drive d's metadata: a damaged meta.mdb is renamed aside (meta.mdb.damaged-<time>,
 * with its lock file) and a fresh env created. 0 or -errno (logged). */
int ol_drive_open_meta(struct ol_store *st, int d, struct ol_meta **out);
/* Is path a mount point (on another device than its parent directory)? */
bool ol_is_mount_point(const char *path);
/* Every record of every database of m decodes (its checksum holds): 0, -EUCLEAN, -errno. */
int ol_verify_records(struct ol_meta *m);
/* A store of several sets: its sets' /metrics sources become one of the shell (on), or the
 * shell's goes (off, before its sets close). */
void ol_drive_metrics_shell(struct ol_store *shell, bool on);
/* Start / stop the monitor thread and the /metrics source. */
void ol_drive_monitor_start(struct ol_store *st);
void ol_drive_monitor_stop(struct ol_store *st);
/* In-flight shard uuids (put.c registers at begin, forgets at the end). */
void ol_flight_add(struct ol_store *st, const uint8_t *uuid);
void ol_flight_del(struct ol_store *st, const uint8_t *uuid);
bool ol_flight_has(struct ol_store *st, const uint8_t *uuid);
/* Remove shard files on online drives that no record of any drive references, that belong
 * to no write in progress and are older than min_age_s. Returns the count removed. Two
 * sweeps never run at once (a heal's and the periodic one). */
size_t ol_sweep_orphans(struct ol_store *st, int min_age_s);
/* The min_age_s of set's sweeps: a set over node planes its sweep_grace_s (0: the default
 * OL_STORE_SWEEP_GRACE_S), a local set 2 s. */
int ol_sweep_grace(const struct ol_store *set);
/* Stop and free st's periodic sweep (ol_store_set_sweep), if any: before its sets close. */
void ol_sweeper_stop(struct ol_store *st);

/* missed.c: missed-write records (OL_META_MISSED, see meta.h and docs/storage-format.md). */
#define OL_MISSED_CAP (1u << 20) /* pending entries above which misses are not recorded */
/* The drives (bits) whose miss of c each committing drive records: off (offline when the
 * batch began), plus c's skipped drives with skip_missed; 0 while the cap is reached. */
uint32_t ol_missed_mask(struct ol_store *st, const struct ol_commit *c, uint32_t off);
/* In drive d's write txn t of c, after its record: an entry per drive in c->missed. */
int ol_missed_put(struct ol_store *st, struct ol_meta_txn *t, struct ol_commit *c, int d);
/* After a batch: record on the drives that committed c those that failed it (failed, bits),
 * each in its own txn (synced with fsync). A crash before leaves those misses to the scan. */
void ol_missed_follow(struct ol_store *st, struct ol_commit *c, uint32_t failed);
/* Count the entries held by the online drives (distinct keys, stops at the cap). */
void ol_missed_count(struct ol_store *st);
/* Heal every pending entry of set st (heal_scan.c's per-key heal), delete those whose drive
 * now holds the record. 0 or -ECANCELED. */
struct ol_heal_pace {
	uint64_t rate, paced;
	int64_t t0;
};
int ol_missed_heal(struct ol_store *st, struct ol_heal_progress *p, struct ol_heal_pace *pc);
/* heal_scan.c: heal index key k of db as the whole-store heal does (objects: their versions
 * too); *have: the drives (bits) that hold its resolved record now, all when none resolves
 * (nothing to restore: a delete). */
void ol_heal_key(struct ol_store *st, struct ol_heal_progress *p, struct ol_heal_pace *pc,
		 enum ol_meta_db db, const char *k, size_t kl, uint32_t *have);

/* heal.c: give the resolved version w back to online drives that lack it. */
void ol_heal_record(struct ol_store *st, const char *bucket, const char *key, size_t klen,
		    const struct ol_rec *w, const uint8_t *body);
/* The same for index key ik of db (objects or versions) under object lock li. */
void ol_heal_record_at(struct ol_store *st, enum ol_meta_db db, const char *ik, size_t ikl,
		       unsigned li, const struct ol_rec *w, const uint8_t *body);

/* list.c: ordered merge of one db's keys across the online drives (read txns held open;
 * pointers valid until ol_merge_close). */
struct ol_merge {
	struct ol_store *st;
	enum ol_meta_db db;
	char prefix[OL_KEYBUF];
	size_t plen;
	struct ol_meta_txn *t[OL_MAX_DRIVES];
	struct ol_meta_cursor *c[OL_MAX_DRIVES];
	struct ol_meta *mm[OL_MAX_DRIVES]; /* the env each cursor reads */
	bool have[OL_MAX_DRIVES];
	const void *k[OL_MAX_DRIVES], *v[OL_MAX_DRIVES];
	size_t kl[OL_MAX_DRIVES], vl[OL_MAX_DRIVES];
};
int ol_merge_open(struct ol_store *st, enum ol_meta_db db, const void *prefix, size_t plen,
		  struct ol_merge *m);
/* Position at the first key >= prefix + rest. */
void ol_merge_seek(struct ol_merge *m, const void *rest, size_t rlen);
/* 1: key (without the prefix) and per-drive values (NULL where absent); 0: end. */
int ol_merge_next(struct ol_merge *m, const void **key, size_t *klen, const void **vals,
		  size_t *lens);
void ol_merge_close(struct ol_merge *m);
/* The iterator returns delete markers too (version.c). */
struct ol_iter;
void ol_iter_markers(struct ol_iter *it);
/* version.c: the versions index key of a version (see locate in version.c). */
int ol_store_ver_locate(struct ol_store *st, const char *bucket, const char *key, size_t klen,
			const char *version_id, char *vk, size_t *vkl);
/* The resolved info of a version record. */
void ol_rec_info(const struct ol_rec *r, struct ol_obj_info *info);

#endif
