/* store/get.c - reads: the newest version on >= k drives; inline bodies are decoded from
 * the records; shard blocks are read from data shards only while they verify, and rebuilt
 * from parity (and rewritten in place when corrupt) when not. Also head. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"

struct ol_get {
	struct ol_store *st;
	struct ol_obj_info info;
	uint8_t *raw; /* the winning record (of one drive), owns meta and parts */
	struct ol_rec rec;
	uint8_t *body;	 /* inline objects */
	uint64_t *start; /* large: byte offset of each part */
	uint32_t cur_part;
	int fd[OL_MAX_DRIVES];
	uint8_t *blk[OL_MAX_DRIVES];
	int64_t cur_stripe;
	bool ok[OL_MAX_DRIVES], tried[OL_MAX_DRIVES];
	bool full[OL_MAX_DRIVES];   /* the last block read from drive d was whole (maybe corrupt) */
	bool warned[OL_MAX_DRIVES]; /* one warning per drive and part */
	/* drive d's block of this stripe was left to its slow drive (abandoned, or not asked
	 * for: docs/cluster.md, "A slow drive"): rebuilt when needed, never written back */
	bool lag[OL_MAX_DRIVES];
	/* drive d's shard of the current part was opened without asking whether it is there (a
	 * remote drive: open_shard); its first read answers that (checked) */
	bool unchecked[OL_MAX_DRIVES];
	bool held; /* rec.vid held in st->inuse (large objects) */
	/* read-only views: drive d answered that its shard of the current part is not there
	 * (open or read: the writer may have reclaimed the version); served: get_read has
	 * returned bytes on this handle (a reclaimed version is then -EIO, not -EAGAIN) */
	bool gone[OL_MAX_DRIVES];
	bool served;
};

static void
close_fds(struct ol_get *g)
{
	for (int d = 0; d < g->st->n; d++) {
		ol_shard_close(g->fd[d]);
		g->fd[d] = -1;
	}
}

/* More drives answered that their shard is not there than the set can spare: the version was
 * reclaimed by its writer after this handle resolved it (or lost beyond repair). */
static bool
reclaimed(const struct ol_get *g)
{
	int n = 0;

	for (int d = 0; d < g->st->n; d++)
		n += g->gone[d];
	return n > g->st->n - g->st->k;
}

/* Drive d's shard file of the current part is not there (uuid: the part's): a read-only view
 * notes it (the writer may have reclaimed the version); the writer recreates it empty, and
 * reads that rebuild its blocks write them back. */
static void
missing(struct ol_get *g, int d, const uint8_t *uuid)
{
	struct ol_store *st = g->st;
	char path[OL_PATH_MAX + 80];

	if (st->readonly) { /* a view recreates nothing: parity covers it, or not */
		g->gone[d] = true;
		return;
	}
	g->fd[d] = ol_shard_create(st, d, uuid);
	if (g->fd[d] >= 0) {
		ol_shard_close(g->fd[d]);
		g->fd[d] = ol_shard_open(st, d, uuid);
	}
	g->warned[d] = true;
	ol_shard_path(st, d, uuid, path, sizeof(path));
	ol_warn("store: drive %s: shard %s missing (%s)", st->d[d].root, path,
		g->fd[d] >= 0 ? "healing on read" : "cannot recreate");
}

/* Drive d's shard file of part p. A remote drive's is opened unchecked: asking whether the
 * file is there would be a round trip before every part's first read, and that read answers it
 * too (checked); a slow drive is not waited for either. */
static void
open_shard(struct ol_get *g, int d, const struct ol_rpart *p)
{
	struct ol_store *st = g->st;

	if (!st->d[d].meta)
		return;
	g->fd[d] = ol_shard_handle(st, d, p->uuid);
	if (ol_drive_remote(st, d))
		g->unchecked[d] = g->fd[d] >= 0;
	else if (g->fd[d] < 0 && p->size && (g->fd[d] == -ENOENT || !st->readonly))
		missing(g, d, p->uuid);
}

/* The first read of drive d's shard of the current part, on a handle opened unchecked: what
 * its open would have found. A file not there is missing (recreated for healing on read, or
 * noted by a view); another error keeps the drive out of the part, as a failed open does. Not
 * for a read left to a slow drive: its result is not the drive's. */
static void
checked(struct ol_get *g, int d, ssize_t res)
{
	struct ol_rpart p;

	if (!g->unchecked[d])
		return;
	g->unchecked[d] = false;
	if (res >= 0)
		return;
	ol_shard_close(g->fd[d]);
	g->fd[d] = (int)res;
	if (res == -ENOENT) {
		ol_rec_part(&g->rec, g->cur_part, &p);
		missing(g, d, p.uuid);
	}
}

/* Open part pi's shard files. 0, or -EAGAIN on a read-only view whose part is gone. */
static int
open_part(struct ol_get *g, uint32_t pi)
{
	struct ol_rpart p;

	close_fds(g);
	memset(g->warned, 0, sizeof(g->warned));
	memset(g->gone, 0, sizeof(g->gone));
	memset(g->unchecked, 0, sizeof(g->unchecked));
	ol_rec_part(&g->rec, pi, &p);
	/* in this thread: no open is a call any more (a fan-out would only add thread wakes) */
	for (int d = 0; d < g->st->n; d++)
		open_shard(g, d, &p);
	g->cur_part = pi;
	g->cur_stripe = -1;
	return g->st->readonly && reclaimed(g) ? -EAGAIN : 0;
}

/* Inline: shard d is in drive d's record. */
static int
decode_inline(struct ol_get *g, const struct ol_rec *win, const bool *valid)
{
	struct ol_store *st = g->st;
	size_t bl = (g->rec.size + st->k - 1) / st->k;
	uint8_t *sh[OL_EC_MAX_SHARDS], *buf;
	bool present[OL_EC_MAX_SHARDS], data[OL_EC_MAX_SHARDS];
	int rc;

	buf = ol_xcalloc((size_t)st->n, bl ? bl : 1);
	for (int d = 0; d < st->n; d++) {
		sh[d] = buf + (size_t)d * bl;
		data[d] = d < st->k; /* the body; a heal encodes its parity again */
		/* its bytes are under the record's checksum, which held when the record was
		 * decoded (ol_rec_resolve): the shard's own sum (inl_crc) would check them again */
		present[d] = valid[d] && win[d].idx == d && win[d].inl_len == bl;
		if (present[d])
			memcpy(sh[d], win[d].inl, bl);
		else if (valid[d])
			ol_warn(
			    "store: drive %s: inline shard does not fit the record (heal needed)",
			    st->d[d].root);
	}
	rc = ol_ec_decode(&st->ec, bl, sh, present, data);
	if (rc) {
		free(buf);
		return rc;
	}
	g->body = buf; /* data shards are contiguous at the front: the body */
	return 0;
}

static int
setup_large(struct ol_get *g)
{
	struct ol_rpart p;
	uint64_t off = 0;

	g->start = ol_xmalloc(((size_t)g->rec.n_parts + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < g->rec.n_parts; i++) {
		ol_rec_part(&g->rec, i, &p);
		g->start[i] = off;
		off += p.size;
	}
	g->start[g->rec.n_parts] = off;
	if (off != g->rec.size || g->rec.k != g->st->k || g->rec.bs == 0)
		return -EIO;
	return g->rec.n_parts ? open_part(g, 0) : 0;
}

static int
first_valid(const struct ol_store *st, const bool *valid)
{
	for (int d = 0; d < st->n; d++)
		if (valid[d])
			return d;
	return -1;
}

/* Resolve the record of key in db at index key ik (NULL: the object index key of key). A
 * delete marker: info set, -ENOENT (current) or OL_STORE_EDELMARK (a version asked for). */
static int
lookup_at(struct ol_store *st, const char *bucket, const char *key, size_t klen, const char *ik,
	  size_t ikl, struct ol_reads *r, struct ol_rec *win, bool *valid, struct ol_obj_info *info,
	  enum ol_reads_how how)
{
	char okey[OL_KEYBUF];

	if (klen == 0 || klen > OL_STORE_MAX_KEY)
		return -EINVAL;
	if (!ik) {
		ikl = ol_okey(okey, bucket, key, klen);
		ik = okey;
	}
	ol_reads_get_as(st, ik == okey ? OL_META_OBJECTS : OL_META_VERSIONS, ik, ikl, bucket, r,
			how);
	if (ol_rec_resolve_sound(st, (const void *const *)r->raw, r->len, &r->sound, win, valid)) {
		const struct ol_rec *w = &win[first_valid(st, valid)];

		/* a long key's index entry is head + hash: check the rest */
		if (klen > OL_KEY_HEAD && (w->tail_len != klen - OL_KEY_HEAD ||
					   memcmp(w->tail, key + OL_KEY_HEAD, w->tail_len)))
			return -ENOENT;
		/* a view that may miss an acknowledged newer version says it cannot tell (the
		 * follower then asks the leader) rather than serve the older one as current */
		if (st->readonly &&
		    ol_rec_doubt(st, (const void *const *)r->raw, r->len, w, st->n - r->answered))
			return -EIO;
		if (!(w->flags & OL_REC_DELMARK))
			return 0;
		if (info) {
			ol_rec_info(w, info);
			info->meta = NULL;
			info->meta_len = 0;
		}
		return ik == okey ? -ENOENT : OL_STORE_EDELMARK;
	}
	if (r->bucket_votes + st->n - r->answered >= st->k && r->bucket_votes < st->k)
		return -EIO; /* too few drives answered to say the bucket or the key is absent */
	return r->bucket_votes >= st->k ? -ENOENT : -ENXIO;
}

static int
lookup(struct ol_store *st, const char *bucket, const char *key, size_t klen, struct ol_reads *r,
       struct ol_rec *win, bool *valid, struct ol_obj_info *info)
{
	return lookup_at(st, bucket, key, klen, NULL, 0, r, win, valid, info, OL_READS_REC);
}

static int
open_at(struct ol_store *st, const char *bucket, const char *key, size_t key_len, const char *vk,
	size_t vkl, struct ol_get **out, struct ol_obj_info *info, enum ol_reads_how how)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	struct ol_get *g = NULL; /* set before heal is */
	unsigned li = ol_lock_idx(bucket, key, key_len);
	bool heal = false;
	int d, rc;

	pthread_rwlock_rdlock(&st->obj_rw[li]);
	rc = lookup_at(st, bucket, key, key_len, vk, vkl, &r, win, valid, info, how);
	if (rc)
		goto out;
	g = ol_xcalloc(1, sizeof(*g));
	g->st = st;
	for (int i = 0; i < OL_MAX_DRIVES; i++)
		g->fd[i] = -1;
	d = first_valid(st, valid);
	g->raw = r.raw[d]; /* win[d] points into it: it may be the record's prev */
	r.raw[d] = NULL;
	g->rec = win[d];
	if (g->rec.flags & OL_REC_INLINE)
		rc = decode_inline(g, win, valid);
	else
		rc = setup_large(g);
	if (rc) {
		ol_store_get_close(g);
		goto out;
	}
	if (!(g->rec.flags & OL_REC_INLINE)) {
		/* under the key's read lock: a commit replacing this version comes after, and
		 * so does its reclaim, which then leaves the files to our release */
		ol_inuse_hold(st, g->rec.vid);
		g->held = true;
	}
	ol_rec_info(&g->rec, &g->info);
	*info = g->info;
	*out = g;
	for (int i = 0; i < st->n && !vk && !st->readonly; i++) /* heal writes index records */
		heal |= st->d[i].meta && !valid[i] && !(r.left & (1u << i)); /* not left behind */
out:
	pthread_rwlock_unlock(&st->obj_rw[li]);
	if (rc != -EINVAL)
		ol_reads_free(&r);
	if (!rc && heal)
		ol_heal_record(st, bucket, key, key_len, &g->rec, g->body);
	return rc;
}

int
ol_set_get_open(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		struct ol_get **out, struct ol_obj_info *info)
{
	return open_at(st, bucket, key, key_len, NULL, 0, out, info, OL_READS_REC);
}

int
ol_set_get_open_all(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    struct ol_get **out, struct ol_obj_info *info)
{
	return open_at(st, bucket, key, key_len, NULL, 0, out, info, OL_READS_ALL);
}

/* The current version when it is the "null" one asked for; -ENOENT when not. */
static int
null_current(struct ol_store *st, const char *bucket, const char *key, size_t key_len)
{
	struct ol_obj_info cur;
	int rc = ol_set_head(st, bucket, key, key_len, &cur, NULL, 0);

	if (rc == -ENOENT && cur.delete_marker)
		rc = strcmp(cur.version_id, "null") ? -ENOENT : OL_STORE_EDELMARK;
	else if (rc == 0 && strcmp(cur.version_id, "null"))
		rc = -ENOENT;
	return rc;
}

int
ol_set_get_open_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		    const char *version_id, struct ol_get **out, struct ol_obj_info *info)
{
	char vk[OL_KEYBUF + OL_VSUFFIX];
	size_t vkl;
	int rc;

	if (!version_id)
		return ol_set_get_open(st, bucket, key, key_len, out, info);
	rc = ol_store_ver_locate(st, bucket, key, key_len, version_id, vk, &vkl);
	if (rc == 1) {
		rc = null_current(st, bucket, key, key_len);
		if (rc == 0)
			return ol_set_get_open(st, bucket, key, key_len, out, info);
		if (rc == OL_STORE_EDELMARK)
			ol_set_head(st, bucket, key, key_len, info, NULL, 0);
		return rc;
	}
	return rc ? rc : open_at(st, bucket, key, key_len, vk, vkl, out, info, OL_READS_REC);
}

unsigned
ol_store_get_part_sizes(const struct ol_get *g, uint64_t *sizes, unsigned cap)
{
	struct ol_rpart p;

	if (g->info.n_parts == 0) {
		if (cap)
			sizes[0] = g->info.size;
		return 1;
	}
	for (uint32_t i = 0; i < g->rec.n_parts && i < cap; i++) {
		ol_rec_part(&g->rec, i, &p);
		sizes[i] = p.size;
	}
	return g->rec.n_parts;
}

void
ol_store_get_close(struct ol_get *g)
{
	if (!g)
		return;
	close_fds(g);
	if (g->held)
		ol_inuse_release(g->st, g->rec.vid);
	for (int d = 0; d < OL_MAX_DRIVES; d++)
		ol_iobuf_put(g->blk[d], (size_t)g->rec.bs + OL_TRAILER);
	free(g->start);
	free(g->body);
	free(g->raw);
	free(g);
}

struct stripe {
	uint64_t j; /* stripe number in the part */
	size_t dl;  /* data bytes in it */
	size_t bl;  /* block bytes per shard */
};

/* Read the blocks of the drives in which not yet tried; up to spare of them may be left to a
 * slow drive (ol_shard_batch_spare). */
static void
read_blocks(struct ol_get *g, const struct stripe *s, const bool *which, int spare)
{
	struct ol_io_op ops[OL_MAX_DRIVES];
	int n = 0, map[OL_MAX_DRIVES];
	uint64_t hedged;

	for (int d = 0; d < g->st->n; d++) {
		if (!which[d] || g->tried[d])
			continue;
		g->tried[d] = true;
		ops[n] = (struct ol_io_op){.fd = g->fd[d],
					   .opcode = OL_IO_READ,
					   .niov = 1,
					   .off = s->j * ((uint64_t)g->rec.bs + OL_TRAILER)};
		ops[n].iov[0] = (struct iovec){g->blk[d], s->bl + OL_TRAILER};
		map[n++] = d;
	}
	ol_shard_batch_spare(ops, (unsigned)n, spare, &hedged);
	for (int i = 0; i < n; i++) {
		int d = map[i];
		uint64_t sum = ol_block_sum(g->rec.ck, g->blk[d], s->bl, s->j);

		bool full = ops[i].res == (ssize_t)(s->bl + OL_TRAILER);

		g->full[d] = full;
		g->gone[d] |= ops[i].res == -ENOENT; /* unlinked since the part was opened */
		g->ok[d] = full && ol_get_u64(g->blk[d] + s->bl) == sum;
		g->lag[d] = hedged >> i & 1;
		if (!g->lag[d])
			checked(g, d, ops[i].res);
		/* a view's file gone since the open: the writer reclaimed it (load says) */
		if (g->ok[d] || g->lag[d] || g->fd[d] < 0 || (g->warned[d] && !full) ||
		    (g->st->readonly && ops[i].res == -ENOENT))
			continue;
		g->warned[d] = true;
		ol_warn("store: drive %s: shard block %llu of part %u %s (rebuilding)",
			g->st->d[d].root, (unsigned long long)s->j, g->cur_part,
			full ? "corrupt" : "short");
	}
}

/* Rewrite rebuilt blocks whose file is there but whose bytes were bad. */
static void
heal_blocks(struct ol_get *g, const struct stripe *s, const bool *rebuilt)
{
	for (int d = 0; d < g->st->n; d++) {
		ssize_t w;

		if (!rebuilt[d] || g->fd[d] < 0 || g->lag[d] || g->st->readonly)
			continue;
		ol_put_u64(g->blk[d] + s->bl, ol_block_sum(g->rec.ck, g->blk[d], s->bl, s->j));
		w = ol_shard_pwrite(g->fd[d], g->blk[d], s->bl + OL_TRAILER,
				    s->j * ((uint64_t)g->rec.bs + OL_TRAILER));
		if (w == (ssize_t)(s->bl + OL_TRAILER))
			ol_info("store: drive %s: healed shard block %llu", g->st->d[d].root,
				(unsigned long long)s->j);
	}
}

/* A drive whose block may be read: open and not yet tried for this stripe. */
static bool
readable(const struct ol_get *g, int d)
{
	return g->fd[d] >= 0 && !g->tried[d];
}

/* For each wanted data shard on a drive far slower than its peers, ask a parity shard of a
 * drive that is not instead (the data block is rebuilt from it); the slow one is left out of
 * this stripe. Returns how many readable drives the wanted ones leave spare. */
static int
swap_lagging(struct ol_get *g, bool *want)
{
	struct ol_store *st = g->st;
	int spare = 0;

	for (int d = 0; d < st->k; d++) {
		if (!want[d] || !readable(g, d) || !ol_drive_lagging(st, d))
			continue;
		for (int q = st->k; q < st->n; q++) {
			if (want[q] || !readable(g, q) || ol_drive_lagging(st, q))
				continue;
			want[q] = true;
			g->tried[d] = g->lag[d] = true;
			break;
		}
	}
	for (int d = 0; d < st->n; d++)
		spare += !want[d] && readable(g, d);
	return spare;
}

static int
count_ok(const struct ol_get *g)
{
	int n = 0;

	for (int d = 0; d < g->st->n; d++)
		n += g->ok[d];
	return n;
}

/* Read once more, without leaving any behind, the blocks of this stripe that were left to a
 * slow drive (abandoned, or swapped for parity): whether there were any. */
static bool
wait_lagging(struct ol_get *g, const struct stripe *s)
{
	bool again[OL_MAX_DRIVES] = {false}, any = false;

	for (int d = 0; d < g->st->n; d++) {
		if (!g->lag[d] || g->ok[d] || g->fd[d] < 0)
			continue;
		again[d] = any = true;
		g->tried[d] = g->lag[d] = false;
	}
	if (any)
		read_blocks(g, s, again, 0);
	return any;
}

/* Make data shards [lo, hi] of the stripe valid in blk[]. */
static int
load(struct ol_get *g, const struct stripe *s, int lo, int hi)
{
	struct ol_store *st = g->st;
	bool want[OL_MAX_DRIVES] = {false}, all[OL_MAX_DRIVES], rebuilt[OL_MAX_DRIVES] = {false};
	int good = 0, missing = 0, spare;

	for (int i = lo; i <= hi; i++)
		want[i] = true;
	/* a shard left behind here is one the second read below replaces: never more than
	 * there are other drives to read */
	spare = swap_lagging(g, want);
	read_blocks(g, s, want, spare);
	for (int i = lo; i <= hi; i++)
		missing += !g->ok[i];
	if (!missing)
		return 0;
	spare = -st->k;
	for (int d = 0; d < st->n; d++) {
		all[d] = true;
		spare += g->ok[d] || readable(g, d);
	}
	read_blocks(g, s, all, spare);
	good = count_ok(g);
	/* the drives counted on in place of the ones left behind did not all have their shard
	 * (one missed the object's write, say): wait for the slow ones after all, never fail
	 * where waiting succeeds */
	if (good < st->k && wait_lagging(g, s))
		good = count_ok(g);
	if (good < st->k && st->readonly && reclaimed(g))
		return -EAGAIN; /* get_read says whether a byte went out before */
	if (good < st->k) {
		int there = 0;

		for (int d = 0; d < st->n; d++)
			there += g->full[d];
		ol_err("store: stripe %llu of part %u: only %d of %d shards verify (%d whole)",
		       (unsigned long long)s->j, g->cur_part, good, st->k, there);
		/* enough shards there but too many fail their checksums: corrupt, not a drive
		 * problem the client could wait out */
		return there >= st->k ? OL_STORE_ECORRUPT : -EIO;
	}
	for (int d = 0; d < st->n; d++) /* heal parity too, but for a slow drive's */
		rebuilt[d] = !g->ok[d] && (want[d] || (g->fd[d] >= 0 && !g->lag[d]));
	if (ol_ec_decode(&st->ec, s->bl, g->blk, g->ok, rebuilt))
		return -EIO;
	heal_blocks(g, s, rebuilt);
	for (int d = 0; d < st->n; d++)
		g->ok[d] |= rebuilt[d];
	return 0;
}

/* Whole data blocks from offset in of the stripe go straight into out (no copy through
 * blk[]), all in one parallel batch, each verified against its trailer. Returns the bytes
 * served (whole blocks), or 0 when the stripe is already loaded, the range is not block
 * aligned, or any block is short or corrupt: the caller then takes the path that rebuilds. */
static size_t
read_direct(struct ol_get *g, const struct stripe *s, size_t in, uint8_t *out, size_t len)
{
	struct ol_io_op ops[OL_MAX_DRIVES];
	uint8_t tr[OL_MAX_DRIVES][OL_TRAILER];
	int first = (int)(in / s->bl), n = 0;

	if (!s->bl || in % s->bl || len < s->bl || (int64_t)s->j == g->cur_stripe)
		return 0;
	/* remote drives: fewer blocks than the stripe's would go out one drive per call (S3
	 * reads 1 MiB at a time); the stripe path reads all k at once and keeps them */
	if (g->st->remote && in + len < (size_t)g->st->k * s->bl)
		return 0;
	for (int sh = first; sh < g->st->k && (size_t)(n + 1) * s->bl <= len; sh++, n++) {
		if (g->fd[sh] < 0 || ol_drive_lagging(g->st, sh))
			return 0; /* the stripe path rebuilds it from parity instead */
		ops[n] = (struct ol_io_op){.fd = g->fd[sh],
					   .opcode = OL_IO_READ,
					   .niov = 2,
					   .off = s->j * ((uint64_t)g->rec.bs + OL_TRAILER)};
		ops[n].iov[0] = (struct iovec){out + (size_t)n * s->bl, s->bl};
		ops[n].iov[1] = (struct iovec){tr[n], OL_TRAILER};
	}
	ol_shard_batch(ops, (unsigned)n);
	for (int i = 0; i < n; i++)
		checked(g, first + i, ops[i].res);
	for (int i = 0; i < n; i++)
		if (ops[i].res != (ssize_t)(s->bl + OL_TRAILER) ||
		    ol_get_u64(tr[i]) !=
			ol_block_sum(g->rec.ck, out + (size_t)i * s->bl, s->bl, s->j))
			return 0;
	return (size_t)n * s->bl;
}

/* Copy len bytes at offset pos of part pi (within one stripe). */
static int
read_in_part(struct ol_get *g, uint32_t pi, uint64_t pos, uint8_t *out, size_t len)
{
	uint64_t psize = g->start[pi + 1] - g->start[pi], sd = (uint64_t)g->st->k * g->rec.bs;
	struct stripe s = {.j = pos / sd};
	size_t in = (size_t)(pos % sd), direct;
	int rc;

	s.dl = (size_t)(psize - s.j * sd < sd ? psize - s.j * sd : sd);
	s.bl = (s.dl + g->st->k - 1) / g->st->k;
	if (pi != g->cur_part && (rc = open_part(g, pi)))
		return rc;
	direct = read_direct(g, &s, in, out, len);
	out += direct;
	in += direct;
	len -= direct;
	if (!len)
		return 0;
	for (int d = 0; d < g->st->n; d++) /* lazily: not for HEAD-only handles */
		if (!g->blk[d])
			g->blk[d] = ol_iobuf_get((size_t)g->rec.bs + OL_TRAILER);
	if ((int64_t)s.j != g->cur_stripe) {
		memset(g->ok, 0, sizeof(g->ok));
		memset(g->tried, 0, sizeof(g->tried));
		memset(g->full, 0, sizeof(g->full));
		memset(g->lag, 0, sizeof(g->lag));
		g->cur_stripe = (int64_t)s.j;
	}
	/* from a stripe's start (streaming), fetch all its data blocks in one parallel batch;
	 * small range reads fetch only the blocks they touch */
	if (in == 0 || len >= s.bl)
		rc = load(g, &s, 0, g->st->k - 1);
	else
		rc = load(g, &s, (int)(in / s.bl), (int)((in + len - 1) / s.bl));
	if (rc)
		return rc;
	while (len) {
		size_t sh = in / s.bl, o = in % s.bl, n = s.bl - o < len ? s.bl - o : len;

		memcpy(out, g->blk[sh] + o, n);
		out += n;
		in += n;
		len -= n;
	}
	return 0;
}

static uint32_t
find_part(const struct ol_get *g, uint64_t off)
{
	uint32_t lo = 0, hi = g->rec.n_parts - 1;

	while (lo < hi) {
		uint32_t mid = (lo + hi + 1) / 2;

		if (g->start[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

size_t
ol_store_get_step(const struct ol_get *g, uint64_t offset, size_t max)
{
	uint64_t sd = (uint64_t)g->st->k * g->rec.bs, pos, psize, dl, bl, in, end;
	uint32_t pi;

	if (g->body || !max || offset >= g->rec.size || !g->rec.n_parts)
		return max;
	pi = find_part(g, offset);
	pos = offset - g->start[pi];
	psize = g->start[pi + 1] - g->start[pi];
	dl = psize - pos / sd * sd < sd ? psize - pos / sd * sd : sd; /* data in this stripe */
	bl = (dl + g->st->k - 1) / g->st->k;
	in = pos % sd;
	end = (in + max) / bl * bl; /* the last block boundary within reach */
	if (end > dl)
		end = dl;
	return end > in ? (size_t)(end - in) : max;
}

ssize_t
ol_store_get_read(struct ol_get *g, uint64_t offset, void *buf, size_t len)
{
	uint64_t size = g->rec.size, sd = (uint64_t)g->st->k * g->rec.bs;
	uint8_t *out = buf;
	size_t done = 0;

	if (offset >= size)
		return 0;
	if (len > size - offset)
		len = (size_t)(size - offset);
	if (g->body) {
		memcpy(buf, g->body + offset, len);
		return (ssize_t)len;
	}
	while (done < len) {
		uint64_t off = offset + done;
		uint32_t pi = find_part(g, off);
		uint64_t pos = off - g->start[pi];
		uint64_t room = sd - pos % sd, plen = g->start[pi + 1] - off;
		size_t n = len - done;
		int rc;

		if (n > room)
			n = (size_t)room;
		if (n > plen)
			n = (size_t)plen;
		rc = read_in_part(g, pi, pos, out + done, n);
		if (rc == -EAGAIN && g->served)
			rc = -EIO; /* mid-stream: the caller cuts the body short */
		if (rc)
			return rc;
		done += n;
	}
	g->served |= done > 0;
	return (ssize_t)done;
}

static int
head_at(struct ol_store *st, const char *bucket, const char *key, size_t key_len, const char *vk,
	size_t vkl, struct ol_obj_info *info, void *meta_buf, size_t meta_cap)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	unsigned li = ol_lock_idx(bucket, key, key_len);
	int rc;

	memset(info, 0, sizeof(*info));
	pthread_rwlock_rdlock(&st->obj_rw[li]);
	rc = lookup_at(st, bucket, key, key_len, vk, vkl, &r, win, valid, info, OL_READS_REC);
	if (!rc) {
		struct ol_rec *w = &win[first_valid(st, valid)];

		ol_rec_info(w, info);
		if (meta_buf)
			memcpy(meta_buf, w->meta, w->meta_len < meta_cap ? w->meta_len : meta_cap);
		info->meta = meta_buf;
	}
	pthread_rwlock_unlock(&st->obj_rw[li]);
	if (rc != -EINVAL)
		ol_reads_free(&r);
	return rc;
}

int
ol_set_head(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
	    struct ol_obj_info *info, void *meta_buf, size_t meta_cap)
{
	return head_at(st, bucket, key, key_len, NULL, 0, info, meta_buf, meta_cap);
}

int
ol_set_head_ver(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		const char *version_id, struct ol_obj_info *info, void *meta_buf, size_t meta_cap)
{
	char vk[OL_KEYBUF + OL_VSUFFIX];
	size_t vkl;
	int rc;

	if (!version_id)
		return ol_set_head(st, bucket, key, key_len, info, meta_buf, meta_cap);
	memset(info, 0, sizeof(*info));
	rc = ol_store_ver_locate(st, bucket, key, key_len, version_id, vk, &vkl);
	if (rc == 1) {
		rc = null_current(st, bucket, key, key_len);
		if (rc == 0 || rc == OL_STORE_EDELMARK)
			ol_set_head(st, bucket, key, key_len, info, meta_buf, meta_cap);
		return rc;
	}
	return rc ? rc : head_at(st, bucket, key, key_len, vk, vkl, info, meta_buf, meta_cap);
}

int
ol_set_shard_paths(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
		   int (*cb)(int drive, unsigned part, const char *path, void *arg), void *arg)
{
	struct ol_reads r;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];
	char path[OL_PATH_MAX + 80];
	int rc = lookup(st, bucket, key, key_len, &r, win, valid, NULL);
	struct ol_rec *w;

	if (rc)
		goto out;
	w = &win[first_valid(st, valid)];
	for (uint32_t i = 0; !rc && !(w->flags & OL_REC_INLINE) && i < w->n_parts; i++) {
		struct ol_rpart p;

		ol_rec_part(w, i, &p);
		for (int d = 0; !rc && d < st->n; d++) {
			ol_shard_path(st, d, p.uuid, path, sizeof(path));
			rc = cb(d, i, path, arg);
		}
	}
out:
	if (rc != -EINVAL)
		ol_reads_free(&r);
	return rc;
}
