/* store/rdrive.c - drives served by other nodes' node planes (issue 10).
 *
 * A remote drive has a small pool of node-plane clients (a client is one thread at a time;
 * the pool lets concurrent puts and reads each take their own connection). Over it run:
 * - its metadata: a remote ol_meta (meta/remote.c) whose callbacks are META_GET / META_SCAN /
 *   META_COMMIT; every commit carries the store's epoch and the drive's generation
 *   (fencing, node/mops.c): each time the drive's env is opened (at start and at every
 *   return after it was counted failed) the generation is raised and an empty commit fences
 *   the drive with it before anything else is sent, so a commit still queued at a frozen
 *   node from before its return is refused instead of landing over newer records;
 * - its shard files: the engine's code handles shards as file descriptors through
 *   ol_io_batch. A remote shard is given a *virtual* descriptor (>= OL_VFD_BASE, far above any
 *   real one) that names (drive, shard); ol_shard_batch runs the real ones on the ring and
 *   the virtual ones over the plane (SHARD_READ, SHARD_PWRITE, SHARD_FSYNC), all drives of a
 *   stripe in parallel: each remote op beyond the first on a fan-out worker (threads kept for
 *   it, "the fan-out workers" below), the calling thread takes the first (a client call
 *   blocks on its socket, so the calls overlap on the wire). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/hex.h"
#include "base/log.h"
#include "node/node.h"
#include "store/store_int.h"

#define POOL_MAX   16
#define PING_MS	   1000
#define MAX_NAME   40
#define FRAME_ROOM 128 /* request header bytes of a SHARD_PWRITE besides its data */

struct ol_rdrive {
	struct ol_store *st;
	char peer[128];
	unsigned node_id;
	/* the drive's index on its node: the slot's data_dirs index, or where its disk was found
	 * (ol_rd_find); changed only while the drive is offline */
	_Atomic unsigned pdrive;
	_Atomic uint64_t gen; /* this drive's generation (above); 0 before the first open */
	pthread_mutex_t mu;
	struct ol_node_client *idle[POOL_MAX]; /* each checked against uuid when it connected */
	int n_idle;
	char uuid[40]; /* the UUID the identity check last found on the drive; "" unknown */
	/* call times (slow.c): an EWMA in us and the calls since the last reset */
	_Atomic uint64_t lat_us, lat_n;
	_Atomic uint64_t hedged;    /* its ops abandoned by hedged batches */
	_Atomic uint64_t hedged_ns; /* when the last one was (ol_io_now_ns), 0: never */
};

/* ---- hedging: an op of a batch that may be abandoned ----
 * The thread running an op of a hedged batch points `my_slot` at the op's slot. Every client it
 * takes from the pool is registered there while in use, so that the batch's thread can
 * abort it (ol_node_client_abort); an aborted slot takes no more clients, and its client is
 * freed, not pooled (its connection is cut; the pool's others are fine). */
struct hslot {
	pthread_mutex_t *mu; /* the batch's */
	struct ol_node_client *c;
	bool aborted, done;
	uint64_t us; /* the op's time, once done */
};

static _Thread_local struct hslot *my_slot;

static bool
aborted_now(void)
{
	bool a = false;

	if (my_slot) {
		pthread_mutex_lock(my_slot->mu);
		a = my_slot->aborted;
		pthread_mutex_unlock(my_slot->mu);
	}
	return a;
}

/* c in use by this thread's op (or NULL: no longer): false when the op is abandoned. */
static bool
slot_set(struct ol_node_client *c)
{
	bool a = false;

	if (my_slot) {
		pthread_mutex_lock(my_slot->mu);
		a = my_slot->aborted;
		my_slot->c = a ? NULL : c;
		pthread_mutex_unlock(my_slot->mu);
	}
	return !a;
}

/* ---- call times ---- */

/* One call of us into the drive's EWMA, lock-free. */
static void
rd_note_us(struct ol_rdrive *rd, uint64_t us)
{
	uint64_t n = atomic_fetch_add(&rd->lat_n, 1), cur = atomic_load(&rd->lat_us);

	while (!atomic_compare_exchange_weak(&rd->lat_us, &cur, ol_slow_ewma(cur, us, n)))
		;
}

/* One call that started at t0 (ns) ended now. */
static void
rd_note(struct ol_rdrive *rd, uint64_t t0)
{
	rd_note_us(rd, (ol_io_now_ns() - t0) / 1000);
}

uint64_t
ol_rd_latency(struct ol_rdrive *rd, uint64_t *calls)
{
	if (calls)
		*calls = atomic_load(&rd->lat_n);
	return atomic_load(&rd->lat_us);
}

void
ol_rd_latency_reset(struct ol_rdrive *rd)
{
	atomic_store(&rd->lat_n, 0);
	atomic_store(&rd->lat_us, 0);
}

/* ---- the client pool ---- */

/* An unused pooled client back to the pool (freed when the pool is full). */
static void
rd_give_idle(struct ol_rdrive *rd, struct ol_node_client *c)
{
	pthread_mutex_lock(&rd->mu);
	if (rd->n_idle < POOL_MAX) {
		rd->idle[rd->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&rd->mu);
	ol_node_client_free(c);
}

/* A pooled client, or a new one (*fresh). A new one connects at once and, when the identity
 * check knows the drive's UUID, the node's disk at the drive's index must carry it (HELLO
 * lists them), else -EXDEV: after a node restarted with its disks in another order, no call
 * lands on another slot's disk in the second before the monitor sees it. With check false
 * (the monitor's ping, identity check and search for the disk) a new client is not checked,
 * and the caller must not pool it (rd_give's fresh). In an op of a hedged batch the client
 * is registered in the op's slot before any call (its HELLO too), and an op already
 * abandoned takes none (-ECANCELED). */
static int
rd_take_as(struct ol_rdrive *rd, struct ol_node_client **out, bool check, bool *fresh)
{
	struct ol_node_peer_info *in;
	char want[sizeof(rd->uuid)];
	unsigned pd;
	int rc;

	*fresh = false;
	*out = NULL;
	if (aborted_now())
		return -ECANCELED;
	pthread_mutex_lock(&rd->mu);
	if (rd->n_idle) {
		*out = rd->idle[--rd->n_idle];
		pthread_mutex_unlock(&rd->mu);
		if (slot_set(*out))
			return 0;
		rd_give_idle(rd, *out); /* abandoned meanwhile: back unused */
		*out = NULL;
		return -ECANCELED;
	}
	memcpy(want, rd->uuid, sizeof(want));
	pthread_mutex_unlock(&rd->mu);
	*fresh = !check;
	if ((rc = ol_node_client_new(rd->peer, rd->st->secret, rd->st->self_id, out)))
		return rc;
	if (!slot_set(*out)) {
		ol_node_client_free(*out);
		*out = NULL;
		return -ECANCELED;
	}
	if (!check)
		return 0;
	in = ol_xmalloc(sizeof(*in));
	rc = ol_node_hello(*out, rd->st->deadline_ms, in);
	pd = atomic_load(&rd->pdrive);
	if (!rc && want[0] && (pd >= in->n_drives || strcmp(in->drives[pd].uuid, want))) {
		ol_warn(
		    "store: node %u %s: the disk at data_dirs index %u is %s, not drive UUID %s "
		    "found there before: no call goes to it until its identity is checked",
		    rd->node_id, rd->peer, pd,
		    pd >= in->n_drives || !in->drives[pd].uuid[0] ? "one without an identity record"
								  : in->drives[pd].uuid,
		    want);
		rc = -EXDEV;
	}
	free(in);
	if (rc) {
		slot_set(NULL);
		ol_node_client_free(*out);
		*out = NULL;
	}
	return rc;
}

static int
rd_take(struct ol_rdrive *rd, struct ol_node_client **out)
{
	bool fresh;

	return rd_take_as(rd, out, true, &fresh);
}

/* A failure that says the peer or its connection is gone. */
static bool
conn_err(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -ECONNREFUSED || rc == -ETIMEDOUT ||
	       rc == -EBADMSG || rc == -EPROTO;
}

/* Back to the pool after a call that returned rc. A connection error drops the client and
 * every idle one: after a peer restarts, all pooled connections to it are dead. A client
 * whose op was abandoned is dropped alone (its connection was cut here, not by the peer). */
static void
rd_give_as(struct ol_rdrive *rd, struct ol_node_client *c, int rc, bool fresh)
{
	struct ol_node_client *drop[POOL_MAX];
	int nd = 0;

	if (!slot_set(NULL)) {
		ol_node_client_free(c);
		return;
	}
	pthread_mutex_lock(&rd->mu);
	if (conn_err(rc)) {
		nd = rd->n_idle;
		memcpy(drop, rd->idle, (size_t)nd * sizeof(*drop));
		rd->n_idle = 0;
	} else if (rd->n_idle < POOL_MAX && !fresh) {
		rd->idle[rd->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&rd->mu);
	ol_node_client_free(c);
	for (int i = 0; i < nd; i++)
		ol_node_client_free(drop[i]);
}

static void
rd_give(struct ol_rdrive *rd, struct ol_node_client *c, int rc)
{
	rd_give_as(rd, c, rc, false);
}

/* Once more after a connection that broke under a call: it may have been a pooled one the
 * peer had closed (a restart), and a fresh connection answers. Ops are idempotent here: the
 * peer that broke the connection never applied the call (a restarted peer never saw it). */
static bool
again(int rc, int *tries)
{
	return (rc == -ECONNRESET || rc == -EPIPE) && (*tries)++ == 0 && !aborted_now();
}

static int
dl(const struct ol_rdrive *rd)
{
	return rd->st->deadline_ms;
}

/* One simple call on a pooled client within deadline_ms; the reply copied into *out
 * (malloc'd) when asked. check: as rd_take_as. Its time is not noted (rd_call_as does). */
static int
rd_call_in(struct ol_rdrive *rd, uint8_t op, const struct iovec *iov, int niov, void **out,
	   size_t *olen, bool check, int deadline_ms)
{
	struct ol_node_client *c;
	const uint8_t *rp;
	size_t rl;
	bool fresh;
	int rc, tries = 0;

	do {
		if ((rc = rd_take_as(rd, &c, check, &fresh)))
			break;
		rc = ol_node_call(c, op, iov, niov, deadline_ms, &rp, &rl);
		if (!rc && out) {
			*out = ol_xmalloc(rl ? rl : 1);
			memcpy(*out, rp, rl);
			*olen = rl;
		}
		rd_give_as(rd, c, rc, fresh);
	} while (again(rc, &tries));
	return rc;
}

/* rd_call_in within the plane's deadline, its time noted in the drive's average. */
static int
rd_call_as(struct ol_rdrive *rd, uint8_t op, const struct iovec *iov, int niov, void **out,
	   size_t *olen, bool check)
{
	uint64_t t0 = ol_io_now_ns();
	int rc = rd_call_in(rd, op, iov, niov, out, olen, check, dl(rd));

	rd_note(rd, t0);
	return rc;
}

static int
rd_call(struct ol_rdrive *rd, uint8_t op, const struct iovec *iov, int niov, void **out,
	size_t *olen)
{
	return rd_call_as(rd, op, iov, niov, out, olen, true);
}

struct ol_rdrive *
ol_rd_new(struct ol_store *st, const struct ol_store_drive_spec *sp)
{
	struct ol_rdrive *rd = ol_xcalloc(1, sizeof(*rd));

	rd->st = st;
	snprintf(rd->peer, sizeof(rd->peer), "%s", sp->peer);
	rd->pdrive = sp->peer_drive;
	rd->node_id = sp->node_id;
	pthread_mutex_init(&rd->mu, NULL);
	return rd;
}

void
ol_rd_free(struct ol_rdrive *rd)
{
	if (!rd)
		return;
	for (int i = 0; i < rd->n_idle; i++)
		ol_node_client_free(rd->idle[i]);
	pthread_mutex_destroy(&rd->mu);
	free(rd);
}

/* The monitor's deadline for a ping or a probe: short, so a tick is not held long. */
static int
ping_dl(const struct ol_rdrive *rd)
{
	return PING_MS < dl(rd) ? PING_MS : dl(rd);
}

int
ol_rd_ping(struct ol_rdrive *rd)
{
	uint64_t t0 = ol_io_now_ns();
	int rc = rd_call_in(rd, OL_NODE_PING, NULL, 0, NULL, NULL, false, ping_dl(rd));

	rd_note(rd, t0);
	return rc;
}

static void put_drive(struct ol_node_wr *w, const struct ol_rdrive *rd);

/* The probe of a drive held out as slow: a read of its identity record (DRIVE_ID, no claim),
 * which the peer serves from the drive itself, so a drive whose link is fast but whose disk
 * is slow shows it (a ping would not). A drive without a record (-ENOENT) answered too. */
int
ol_rd_probe(struct ol_rdrive *rd, uint64_t *us)
{
	uint8_t req[4];
	struct ol_node_wr w = {req, 0, sizeof(req), false};
	struct iovec iov;
	uint64_t t0 = ol_io_now_ns();
	int rc;

	put_drive(&w, rd);
	ol_node_putbytes(&w, &(uint8_t){0}, 1);
	iov = (struct iovec){req, w.n};
	/* unchecked, as the monitor's pings and identity reads */
	rc = rd_call_in(rd, OL_NODE_DRIVE_ID, &iov, 1, NULL, NULL, false, ping_dl(rd));
	*us = (ol_io_now_ns() - t0) / 1000;
	return rc == -ENOENT ? 0 : rc;
}

/* ---- metadata over the plane ---- */

static void
put_drive(struct ol_node_wr *w, const struct ol_rdrive *rd)
{
	ol_node_put16(w, (uint16_t)rd->pdrive);
}

static int
m_get(void *arg, enum ol_meta_db db, const void *k, size_t kl, void **v, size_t *vl)
{
	struct ol_rdrive *rd = arg;
	uint8_t hdr[8];
	struct ol_node_wr w = {hdr, 0, sizeof(hdr), false};
	struct iovec iov[2];
	int rc;

	if (kl == 0 || kl > OL_NODE_META_KEY)
		return -EINVAL;
	put_drive(&w, rd);
	ol_node_putbytes(&w, &(uint8_t){(uint8_t)db}, 1);
	ol_node_put16(&w, (uint16_t)kl);
	iov[0] = (struct iovec){hdr, w.n};
	iov[1] = (struct iovec){(void *)k, kl};
	rc = rd_call(rd, OL_NODE_META_GET, iov, 2, v, vl);
	/* left behind by a hedged read: not a fault of the drive (the env stays sound) */
	return rc && rc != -ENOENT && aborted_now() ? -ECANCELED : rc;
}

/* Decode a META_SCAN reply (n u32, n entries) into pg; buf is taken over. */
static int
page_parse(uint8_t *buf, size_t len, struct ol_meta_page *pg)
{
	struct ol_node_rd r = {buf, len, false};
	uint32_t n = ol_node_get32(&r);
	struct ol_node_mentry e;

	if (r.err || n > len / 6) {
		free(buf);
		return -EPROTO;
	}
	pg->e = ol_xmalloc((n ? n : 1) * sizeof(*pg->e));
	pg->buf = buf;
	pg->n = n;
	for (uint32_t i = 0; i < n; i++) {
		if (ol_node_mentry_get(&r, true, &e)) {
			free(pg->e);
			free(buf);
			*pg = (struct ol_meta_page){0};
			return -EPROTO;
		}
		pg->e[i] = (struct ol_meta_kv){e.key, e.val, e.klen, e.vlen};
	}
	return 0;
}

static int
m_scan(void *arg, enum ol_meta_db db, const void *k, size_t kl, bool after, struct ol_meta_page *pg)
{
	struct ol_rdrive *rd = arg;
	uint8_t hdr[8], tail[8];
	struct ol_node_wr w = {hdr, 0, sizeof(hdr), false}, t = {tail, 0, sizeof(tail), false};
	struct iovec iov[3];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	if (kl > OL_NODE_META_KEY)
		return -EINVAL;
	put_drive(&w, rd);
	ol_node_putbytes(&w, &(uint8_t){(uint8_t)db}, 1);
	ol_node_put16(&w, (uint16_t)kl);
	ol_node_putbytes(&t, &(uint8_t){after}, 1);
	ol_node_put32(&t, 0); /* the drive's page size */
	iov[0] = (struct iovec){hdr, w.n};
	iov[1] = (struct iovec){(void *)k, kl};
	iov[2] = (struct iovec){tail, t.n};
	rc = rd_call(rd, OL_NODE_META_SCAN, iov, 3, &buf, &len);
	if (rc)
		return rc != -ENOENT && aborted_now() ? -ECANCELED : rc; /* left behind, as m_get */
	return page_parse(buf, len, pg);
}

static int
m_commit(void *arg, const struct ol_meta_op *ops, size_t n, bool sync)
{
	struct ol_rdrive *rd = arg;
	size_t need = 2 + 8 + 1 + 8 + 4;
	struct ol_node_wr w;
	struct iovec iov;
	int rc;

	if (rd->st->readonly) /* a read-only view never commits (nor fences its leader) */
		return -EROFS;
	for (size_t i = 0; i < n; i++)
		need += 2 + 2 + ops[i].kl + 4 + ops[i].vl;
	if (n > UINT32_MAX)
		return -EMSGSIZE;
	w = (struct ol_node_wr){ol_xmalloc(need), 0, need, false};
	put_drive(&w, rd);
	ol_node_put64(&w, atomic_load(&rd->st->epoch));
	ol_node_putbytes(&w, &(uint8_t){(sync ? OL_NODE_MC_SYNC : 0) | OL_NODE_MC_GEN}, 1);
	ol_node_put64(&w, atomic_load(&rd->gen));
	ol_node_put32(&w, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		uint8_t kd[2] = {ops[i].put ? OL_NODE_ME_PUT : OL_NODE_ME_DEL, ops[i].db};

		ol_node_putbytes(&w, kd, 2);
		ol_node_put16(&w, (uint16_t)ops[i].kl);
		ol_node_putbytes(&w, ops[i].k, ops[i].kl);
		ol_node_put32(&w, (uint32_t)ops[i].vl);
		ol_node_putbytes(&w, ops[i].v, ops[i].vl);
	}
	iov = (struct iovec){w.p, w.n};
	rc = w.err ? -EMSGSIZE : rd_call(rd, OL_NODE_META_COMMIT, &iov, 1, NULL, NULL);
	free(w.p);
	/* left behind by a hedged commit: not a fault (the caller fences the drive instead) */
	return rc && rc != -ESTALE && aborted_now() ? -ECANCELED : rc;
}

static const struct ol_meta_remote_ops rd_meta_ops = {m_get, m_scan, m_commit};

/* A generation above every earlier one of this drive, also across a reopen of the store
 * within one epoch: the wall clock in ns, or one more than the last when that is not higher. */
static uint64_t
next_gen(struct ol_rdrive *rd)
{
	struct timespec ts;
	uint64_t now, cur = atomic_load(&rd->gen), next;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	do
		next = now > cur ? now : cur + 1;
	while (!atomic_compare_exchange_weak(&rd->gen, &cur, next));
	return next;
}

uint64_t
ol_rd_fence_next(struct ol_rdrive *rd)
{
	return next_gen(rd);
}

uint64_t
ol_rd_gen(struct ol_rdrive *rd)
{
	return atomic_load(&rd->gen);
}

/* The DRIVE_ID reply (record str) into *f. */
static int
ident_parse(const void *buf, size_t len, struct ol_driveid *f)
{
	struct ol_node_rd r = {buf, len, false};
	char text[OL_DRIVEID_TEXT];
	size_t n = ol_node_getstr(&r, text, sizeof(text));

	return r.err || ol_driveid_parse(text, n, f) ? -EPROTO : 0;
}

/* DRIVE_ID of the node's drive pd: *got its record (0), 1 when it has none, or -errno; with
 * claim_text the node first writes that record on a drive without one. */
static int
ident_at(struct ol_rdrive *rd, unsigned pd, const char *claim_text, int n, struct ol_driveid *got)
{
	uint8_t req[4 + OL_DRIVEID_TEXT];
	struct ol_node_wr w = {req, 0, sizeof(req), false};
	struct iovec iov;
	void *v = NULL;
	size_t vl = 0;
	int rc;

	ol_node_put16(&w, (uint16_t)pd);
	ol_node_putbytes(&w, &(uint8_t){claim_text ? OL_NODE_ID_CLAIM : 0}, 1);
	if (claim_text) {
		ol_node_put16(&w, (uint16_t)n);
		ol_node_putbytes(&w, claim_text, (size_t)n);
	}
	iov = (struct iovec){req, w.n};
	rc = rd_call_as(rd, OL_NODE_DRIVE_ID, &iov, 1, &v, &vl, false);
	if (!rc)
		rc = ident_parse(v, vl, got);
	free(v);
	return rc == -ENOENT && !claim_text ? 1 : rc;
}

int
ol_rd_ident(struct ol_store *st, int d, bool claim, char *why, size_t cap)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_driveid want = dr->id, got;
	char text[OL_DRIVEID_TEXT];
	int rc, n = 0;

	if (!want.store[0])
		return 0;	/* a set opened without identity (tests) */
	claim &= !st->readonly; /* a read-only view never writes a record */
	/* a fresh UUID: the node writes the record only on a drive without one (blank) */
	if (claim) {
		if ((rc = ol_driveid_uuid(want.drive)))
			return rc;
		if ((n = ol_driveid_format(&want, text, sizeof(text))) < 0)
			return n;
	}
	rc = ident_at(dr->rd, atomic_load(&dr->rd->pdrive), claim ? text : NULL, n, &got);
	if (rc == 1)
		return 1;
	if (rc == -EUCLEAN) {
		snprintf(why, cap,
			 "its identity record is garbled or a local store's: restore "
			 "it, or wipe the drive to reuse it");
		return -EXDEV;
	}
	if (rc) {
		snprintf(why, cap, "node plane: identity check: %s%s", strerror(-rc),
			 rc == -EPROTO || rc == -ECONNRESET ? " (a node older than this one? "
							      "upgrade every node)"
							    : "");
		return rc;
	}
	if ((rc = ol_format_match(&dr->id, &got, "its identity record", why, cap)))
		return rc;
	if (strcmp(got.drive, dr->id.drive))
		memcpy(dr->id.drive, got.drive, sizeof(got.drive));
	pthread_mutex_lock(&dr->rd->mu);
	snprintf(dr->rd->uuid, sizeof(dr->rd->uuid), "%s", got.drive);
	pthread_mutex_unlock(&dr->rd->mu);
	return 0;
}

int
ol_rd_find(struct ol_store *st, int d, bool move)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_rdrive *rd = dr->rd;
	struct ol_node_peer_info *in;
	struct ol_node_client *c;
	struct ol_driveid got;
	unsigned pd = atomic_load(&rd->pdrive), n;
	char why[OL_WHY_MAX];
	bool fresh;
	int rc, found = -1;

	if (!dr->id.store[0])
		return -1;
	rc = ident_at(rd, pd, NULL, 0, &got);
	if (rc < 0 || (!rc && !ol_format_match(&dr->id, &got, "", why, sizeof(why))))
		return -1; /* its own disk is there, or the identity check says why not */
	if (rd_take_as(rd, &c, false, &fresh))
		return -1;
	in = ol_xmalloc(sizeof(*in));
	rc = ol_node_hello(c, dl(rd), in);
	rd_give_as(rd, c, rc, fresh);
	n = rc ? 0 : in->n_drives;
	free(in);
	for (unsigned j = 0; j < n; j++) {
		if (j == pd || ident_at(rd, j, NULL, 0, &got) ||
		    ol_format_match(&dr->id, &got, "", why, sizeof(why)))
			continue;
		if (found >= 0) {
			ol_err(
			    "store: drive %s: the disks at data_dirs index %d and %u of its node "
			    "both hold its identity record (a cloned disk?): wipe the one that is "
			    "not this slot's",
			    dr->root, found, j);
			return -1;
		}
		found = (int)j;
	}
	if (found < 0 || !move)
		return found;
	ol_warn("store: drive %s: its disk is found at data_dirs index %d of the node (its "
		"identity record names this slot: pool %u set %u drive %u); using it there",
		dr->root, found, dr->id.pool, dr->id.set, dr->id.index);
	atomic_store(&rd->pdrive, (unsigned)found);
	return found;
}

/* Open drive d's remote env after the drive answered a ping, proved its identity and a
 * metadata read, and took a new generation (an empty commit, synced) that fences every frame
 * sent before. */
int
ol_rd_open_meta(struct ol_store *st, int d, struct ol_meta **out, char *why, size_t cap)
{
	struct ol_rdrive *rd = st->d[d].rd;
	void *v = NULL;
	size_t vl;
	int rc = ol_rd_ping(rd);

	snprintf(why, cap, "node plane: %s", strerror(-rc));
	if (!rc)
		ol_rd_find(st, d, true);
	if (!rc && (rc = ol_rd_ident(st, d, true, why, cap))) {
		if (rc == 1) { /* only a read-only view leaves a drive without its record */
			snprintf(why, cap,
				 "it has no identity record (a read-only view never "
				 "writes one: its leader does)");
			return -EXDEV;
		}
		return rc; /* a wrong drive: nothing written to it */
	}
	if (!rc)
		rc = m_get(rd, OL_META_BUCKETS, "", 1, &v, &vl); /* "\0": never a bucket */
	free(v);
	if (rc && rc != -ENOENT) {
		snprintf(why, cap, "node plane: %s", strerror(-rc));
		return rc;
	}
	if (st->readonly) /* no generation, no fencing commit: the leader's frames stay good */
		return ol_meta_open_remote(&rd_meta_ops, rd, st->fsync, out);
	next_gen(rd);
	if ((rc = m_commit(rd, NULL, 0, true))) {
		snprintf(why, cap, "node plane: %s", strerror(-rc));
		return rc;
	}
	return ol_meta_open_remote(&rd_meta_ops, rd, st->fsync, out);
}

/* ---- shard files: virtual descriptors ---- */

struct vfile {
	struct ol_rdrive *rd;
	char name[MAX_NAME];
	bool dir; /* a directory handle: its fsync is part of SHARD_FSYNC of the file */
	/* a new shard not yet created: its first write (or sync) creates it, exclusively, so
	 * that a PUT's creates ride on its first stripe's batch (hedged) instead of one call
	 * per drive in turn; only the thread running the file's ops touches it */
	bool create;
};

static pthread_mutex_t vf_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vfile **vf;
static size_t vf_cap, vf_hint;

bool
ol_vfd(int fd)
{
	return fd >= OL_VFD_BASE;
}

static int
vf_new(struct ol_rdrive *rd, const uint8_t *uuid, bool dir, bool create)
{
	struct vfile *f = ol_xcalloc(1, sizeof(*f));
	char h[2 * OL_UUID + 1];
	size_t i;

	ol_hex_encode(uuid, OL_UUID, h);
	snprintf(f->name, sizeof(f->name), "%.2s/%s", h, h);
	f->rd = rd;
	f->dir = dir;
	f->create = create;
	pthread_mutex_lock(&vf_mu);
	for (i = 0; i < vf_cap && vf[(vf_hint + i) % vf_cap]; i++)
		;
	if (i == vf_cap) {
		size_t nc = vf_cap ? 2 * vf_cap : 256;

		vf = ol_xrealloc(vf, nc * sizeof(*vf));
		memset(vf + vf_cap, 0, (nc - vf_cap) * sizeof(*vf));
		i = vf_cap;
		vf_hint = 0;
		vf_cap = nc;
	} else {
		i = (vf_hint + i) % vf_cap;
	}
	vf[i] = f;
	vf_hint = i + 1;
	pthread_mutex_unlock(&vf_mu);
	return OL_VFD_BASE + (int)i;
}

static struct vfile *
vf_get(int fd)
{
	struct vfile *f = NULL;
	size_t i = (size_t)(fd - OL_VFD_BASE);

	pthread_mutex_lock(&vf_mu);
	if (fd >= OL_VFD_BASE && i < vf_cap)
		f = vf[i];
	pthread_mutex_unlock(&vf_mu);
	return f;
}

void
ol_vfd_close(int fd)
{
	size_t i = (size_t)(fd - OL_VFD_BASE);
	struct vfile *f = NULL;

	pthread_mutex_lock(&vf_mu);
	if (i < vf_cap) {
		f = vf[i];
		vf[i] = NULL;
	}
	pthread_mutex_unlock(&vf_mu);
	free(f);
}

static void
name_of(const uint8_t *uuid, char *out)
{
	char h[2 * OL_UUID + 1];

	ol_hex_encode(uuid, OL_UUID, h);
	snprintf(out, MAX_NAME, "%.2s/%s", h, h);
}

/* Collect the oldest answer of a pipeline. */
static int
collect(struct ol_node_client *c, uint64_t *next, bool *any)
{
	int rc = ol_node_recv(c, (*next)++, NULL, NULL);

	*any |= rc == 0;
	return rc;
}

/* PWRITE of data (iov) at off with flags, in frames the peer accepts, pipelined (a block of
 * 1 MiB + its checksum is two frames: the second goes out before the first is answered);
 * *any: the peer took some of it. */
static int
pwrite_frames(struct ol_rdrive *rd, struct ol_node_client *c, const char *name,
	      const struct iovec *data, int nd, uint64_t off, uint32_t flags, bool *any)
{
	size_t total = 0, done = 0, di = 0, doff = 0;
	uint64_t next = 0, id;
	int rc = 0;

	for (int i = 0; i < nd; i++)
		total += data[i].iov_len;
	if (!ol_node_client_max_payload(c))
		rc = ol_node_hello(c, dl(rd), NULL);
	do {
		size_t room = rc ? 0 : ol_node_client_max_payload(c) - FRAME_ROOM, n = 0;
		uint8_t hdr[FRAME_ROOM];
		struct ol_node_wr w = {hdr, 0, sizeof(hdr), false};
		struct iovec iov[2 + OL_IO_MAX_IOV];
		int ni = 1;
		bool last;

		if (rc)
			break;
		while (n < room && di < (size_t)nd) { /* slices of data up to room bytes */
			size_t take = data[di].iov_len - doff;

			if (take > room - n)
				take = room - n;
			iov[ni++] = (struct iovec){(uint8_t *)data[di].iov_base + doff, take};
			n += take;
			doff += take;
			if (doff == data[di].iov_len)
				di++, doff = 0;
		}
		last = done + n == total;
		ol_node_put16(&w, (uint16_t)rd->pdrive);
		ol_node_putstr(&w, name);
		ol_node_put64(&w, off + done);
		/* exclusive create on the first frame only; the sync rides on the last one */
		ol_node_put32(&w, (done ? 0 : flags & (OL_NODE_PW_CREATE | OL_NODE_PW_EXCL)) |
				      (last ? flags & OL_NODE_PW_SYNC : 0));
		iov[0] = (struct iovec){hdr, w.n};
		while ((rc = ol_node_send(c, OL_NODE_SHARD_PWRITE, iov, ni, dl(rd), &id)) ==
			   -EAGAIN &&
		       !(rc = collect(c, &next, any)))
			;
		if (!rc && !done)
			next =
			    id; /* call ids are consecutive: the first one's answer comes first */
		done += n;
	} while (!rc && done < total);
	while (!rc && ol_node_client_pending(c))
		rc = collect(c, &next, any);
	return rc;
}

static int
rd_pwrite(struct ol_rdrive *rd, const char *name, const struct iovec *data, int nd, uint64_t off,
	  uint32_t flags)
{
	struct ol_node_client *c;
	bool any = false;
	uint64_t t0 = ol_io_now_ns();
	int rc, tries = 0;

	if (!ol_shards_ok(rd->st))
		return -EROFS;
	do { /* again only when the peer took none of it (an exclusive create must not repeat) */
		if ((rc = rd_take(rd, &c)))
			break;
		rc = pwrite_frames(rd, c, name, data, nd, off, flags, &any);
		if (ol_node_client_pending(c)) { /* answers still on their way: not reusable */
			slot_set(NULL);
			ol_node_client_free(c);
			c = NULL;
		}
		if (c)
			rd_give(rd, c, rc);
	} while (!any && again(rc, &tries));
	rd_note(rd, t0);
	return rc;
}

/* The shard of drive d as how says (store_int.h): a virtual fd or -errno. */
int
ol_rd_shard_open(struct ol_store *st, int d, const uint8_t *uuid, enum ol_rd_open how)
{
	struct ol_rdrive *rd = st->d[d].rd;
	char name[MAX_NAME];
	struct ol_node_client *c;
	int rc = 0;

	if (!ol_shards_ok(st) && (how == OL_RD_CREATE || how == OL_RD_CREATE_LATER))
		return -EROFS;
	name_of(uuid, name);
	if (how == OL_RD_CREATE) {
		rc = rd_pwrite(rd, name, NULL, 0, 0, OL_NODE_PW_CREATE | OL_NODE_PW_EXCL);
	} else if (how == OL_RD_EXISTING) {
		int tries = 0;

		do {
			if ((rc = rd_take(rd, &c)))
				break;
			rc = ol_node_stat(c, rd->pdrive, name, dl(rd), NULL);
			rd_give(rd, c, rc);
		} while (again(rc, &tries));
	}
	return rc ? rc : vf_new(rd, uuid, how == OL_RD_DIR, how == OL_RD_CREATE_LATER);
}

void
ol_rd_shard_unlink(struct ol_store *st, int d, const uint8_t *uuid)
{
	struct ol_rdrive *rd = st->d[d].rd;
	struct ol_node_client *c;
	char name[MAX_NAME];
	int rc, tries = 0;

	if (!ol_shards_ok(st))
		return;
	name_of(uuid, name);
	do {
		if ((rc = rd_take(rd, &c)))
			break;
		rc = ol_node_shard_unlink(c, rd->pdrive, name, dl(rd));
		rd_give(rd, c, rc);
	} while (again(rc, &tries));
	if (rc && rc != -ENOENT) /* left for the orphan sweep */
		ol_warn("store: drive %s: unlink %s: %s", st->d[d].root, name, strerror(-rc));
}

struct sink {
	const struct iovec *iov;
	int niov, i;
	size_t off;
};

static int
to_iov(void *arg, const void *buf, size_t len)
{
	struct sink *s = arg;
	const uint8_t *b = buf;

	while (len) {
		if (s->i >= s->niov)
			return -EOVERFLOW;
		size_t room = s->iov[s->i].iov_len - s->off, n = len < room ? len : room;

		memcpy((uint8_t *)s->iov[s->i].iov_base + s->off, b, n);
		b += n;
		len -= n;
		s->off += n;
		if (s->off == s->iov[s->i].iov_len)
			s->i++, s->off = 0;
	}
	return 0;
}

/* One remote op of a batch: res as ol_io_batch sets it. */
static void
run_remote(struct ol_io_op *op)
{
	struct vfile *f = vf_get(op->fd);
	struct iovec one = {op->buf, op->len};
	const struct iovec *iov = op->niov ? op->iov : &one;
	int niov = op->niov ? op->niov : 1;
	size_t total = 0;
	int rc;

	if (!f) {
		op->res = -EBADF;
		return;
	}
	for (int i = 0; i < niov; i++)
		total += iov[i].iov_len;
	switch (op->opcode) {
	case OL_IO_READ: {
		struct ol_node_client *c;
		struct sink s;
		uint64_t got = 0, t0 = ol_io_now_ns();
		int tries = 0;

		do {
			if ((rc = rd_take(f->rd, &c)))
				break;
			s = (struct sink){iov, niov, 0, 0};
			rc = ol_node_shard_read(c, f->rd->pdrive, f->name, op->off, total, to_iov,
						&s, dl(f->rd), &got);
			rd_give(f->rd, c, rc);
		} while (!got && again(rc, &tries));
		rd_note(f->rd, t0);
		op->res = rc ? rc : (ssize_t)got;
		return;
	}
	case OL_IO_WRITE:
		rc = rd_pwrite(f->rd, f->name, iov, niov, op->off,
			       f->create ? OL_NODE_PW_CREATE | OL_NODE_PW_EXCL : 0);
		f->create &= rc != 0; /* failed: the put counts the drive failed, no retry */
		op->res = rc ? rc : (ssize_t)total;
		return;
	case OL_IO_FSYNC:
	case OL_IO_FDATASYNC: {
		uint8_t b[MAX_NAME + 8];
		struct ol_node_wr w = {b, 0, sizeof(b), false};
		struct iovec i1;

		if (!ol_shards_ok(f->rd->st)) {
			rc = -EROFS;
			break;
		}
		if (f->dir) { /* the file's SHARD_FSYNC made its directory entry durable */
			rc = 0;
			break;
		}
		if (f->create) { /* never written: created empty, synced with its entry */
			rc = rd_pwrite(f->rd, f->name, NULL, 0, 0,
				       OL_NODE_PW_CREATE | OL_NODE_PW_EXCL | OL_NODE_PW_SYNC);
			f->create &= rc != 0;
			break;
		}
		ol_node_put16(&w, (uint16_t)f->rd->pdrive);
		ol_node_putstr(&w, f->name);
		i1 = (struct iovec){b, w.n};
		rc = rd_call(f->rd, OL_NODE_SHARD_FSYNC, &i1, 1, NULL, NULL);
		break;
	}
	default:
		rc = -EINVAL;
	}
	op->res = rc;
}

/* ---- the fan-out workers ----
 * The items of a fan-out (a batch's remote ops, a call on every drive) run on threads kept for
 * it: a thread created and joined per item cost more than a loopback call (a clone, its stack
 * zeroed, two wakes: a third of a leader's CPU on 1 MiB GETs here, bench/RESULTS.md). An item
 * goes to an idle worker, or to a new one when none is idle (an item never waits for another
 * fan-out's); a worker idle for FAN_IDLE_MS leaves. The caller waits on its group. */
#define FAN_IDLE_MS 10000

struct fan_group {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left; /* items started and not yet ended */
};

struct fan_job {
	struct fan_job *next;
	void (*fn)(void *arg);
	void *arg;
	struct fan_group *g;
};

static pthread_mutex_t fan_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fan_cv = PTHREAD_COND_INITIALIZER;
static struct fan_job *fan_head, *fan_tail;
static unsigned fan_queued, fan_idle;

static void *
fan_worker(void *arg)
{
	struct timespec ts;

	(void)arg;
	pthread_mutex_lock(&fan_mu);
	for (;;) {
		while (!fan_head) {
			int rc;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += FAN_IDLE_MS / 1000;
			fan_idle++;
			rc = pthread_cond_timedwait(&fan_cv, &fan_mu, &ts);
			fan_idle--;
			if (rc == ETIMEDOUT && !fan_head) {
				pthread_mutex_unlock(&fan_mu);
				return NULL;
			}
		}
		struct fan_job *j = fan_head;

		fan_head = j->next;
		if (!fan_head)
			fan_tail = NULL;
		fan_queued--;
		pthread_mutex_unlock(&fan_mu);
		struct fan_group *g = j->g;

		j->fn(j->arg);
		pthread_mutex_lock(&g->mu); /* j is gone once left reaches 0 */
		if (--g->left == 0)
			pthread_cond_signal(&g->cv);
		pthread_mutex_unlock(&g->mu);
		pthread_mutex_lock(&fan_mu);
	}
}

static void
fan_group_init(struct fan_group *g)
{
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->left = 0;
}

/* j->fn(j->arg) on a worker (0), or -errno: no worker could be had (the caller runs it). */
static int
fan_go(struct fan_group *g, struct fan_job *j, void (*fn)(void *arg), void *arg)
{
	*j = (struct fan_job){NULL, fn, arg, g};
	pthread_mutex_lock(&fan_mu);
	if (fan_queued >= fan_idle) { /* every idle worker has an item already */
		pthread_t t;
		pthread_attr_t a;
		int rc;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &a, fan_worker, NULL);
		pthread_attr_destroy(&a);
		if (rc) {
			pthread_mutex_unlock(&fan_mu);
			return -rc;
		}
		pthread_setname_np(t, "ol-rd-fan");
	}
	pthread_mutex_lock(&g->mu);
	g->left++;
	pthread_mutex_unlock(&g->mu);
	if (fan_tail)
		fan_tail->next = j;
	else
		fan_head = j;
	fan_tail = j;
	fan_queued++;
	pthread_cond_signal(&fan_cv);
	pthread_mutex_unlock(&fan_mu);
	return 0;
}

/* Until every item of g has ended; then g is finished. */
static void
fan_group_wait(struct fan_group *g)
{
	pthread_mutex_lock(&g->mu);
	while (g->left)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
}

static void
remote_job(void *arg)
{
	run_remote(arg);
}

/* Remote ops in parallel: workers for all but the first, which runs here. */
static void
run_remotes(struct ol_io_op **r, unsigned n)
{
	struct fan_job j[OL_MAX_DRIVES * 2];
	struct fan_group g;

	fan_group_init(&g);
	for (unsigned i = 1; i < n; i++)
		if (fan_go(&g, &j[i], remote_job, r[i]))
			run_remote(r[i]);
	if (n)
		run_remote(r[0]);
	fan_group_wait(&g);
}

/* A hedged fan-out (a batch of shard ops, or a call on every drive): item i runs run(arg, i)
 * on a fan-out worker while the caller watches; s[i] is its slot (the node client the
 * abandon cuts), done[i] and ndone say which ended. */
struct hfan {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct hslot s[OL_MAX_DRIVES * 2];
	bool done[OL_MAX_DRIVES * 2];
	unsigned ndone;
	uint64_t t0; /* ns */
	void (*run)(void *arg, unsigned i);
	void *arg;
	struct fan_group g;
	struct fan_job j[OL_MAX_DRIVES * 2];
};

struct hfan_arg {
	struct hfan *h;
	unsigned i;
};

static void
hfan_item(void *arg)
{
	struct hfan_arg *a = arg;
	struct hfan *h = a->h;

	my_slot = &h->s[a->i];
	h->run(h->arg, a->i);
	my_slot = NULL;
	pthread_mutex_lock(&h->mu);
	h->s[a->i].done = true;
	h->s[a->i].us = (ol_io_now_ns() - h->t0) / 1000;
	h->done[a->i] = true;
	h->ndone++;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

/* Start items [0, n) that `which` names (all without it) on fan-out workers; an item no
 * worker could take runs here, and is waited for. */
static void
hfan_start(struct hfan *h, struct hfan_arg *a, unsigned n, const bool *which)
{
	bool here[OL_MAX_DRIVES * 2] = {false};
	pthread_condattr_t ca;

	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->t0 = ol_io_now_ns();
	fan_group_init(&h->g);
	for (unsigned i = 0; i < n; i++) {
		h->s[i].mu = &h->mu;
		a[i] = (struct hfan_arg){h, i};
		here[i] = (!which || which[i]) && fan_go(&h->g, &h->j[i], hfan_item, &a[i]);
	}
	for (unsigned i = 0; i < n; i++)
		if (here[i])
			hfan_item(&a[i]);
}

/* The items of [0, n) (`which`, all without it) still running are abandoned (h->mu held):
 * their connections cut, so their calls return at once. */
static void
hfan_abandon(struct hfan *h, unsigned n, const bool *which)
{
	for (unsigned i = 0; i < n; i++) {
		if ((which && !which[i]) || h->s[i].done)
			continue;
		h->s[i].aborted = true;
		if (h->s[i].c)
			ol_node_client_abort(h->s[i].c);
	}
}

/* Wait for every item to end. */
static void
hfan_join(struct hfan *h)
{
	fan_group_wait(&h->g);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
}

static void
run_item(void *arg, unsigned i)
{
	run_remote(((struct ol_io_op **)arg)[i]);
}

/* The store of a remote op (every op of a batch is of one store). */
static const struct ol_hedge_cfg *
hedge_cfg(struct ol_io_op *op)
{
	struct vfile *f = vf_get(op->fd);

	return f ? &f->rd->st->hedge : NULL;
}

/* Wait on cv (mu held) for a signal, or (after: not UINT64_MAX) until after us from a batch's
 * start, now us into it: cv runs on CLOCK_MONOTONIC. */
static void
wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t after, uint64_t now)
{
	struct timespec ts;

	if (after == UINT64_MAX) {
		pthread_cond_wait(cv, mu);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)((after - now) / 1000000);
	ts.tv_nsec += (long)((after - now) % 1000000) * 1000;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	pthread_cond_timedwait(cv, mu, &ts);
}

/* Wait (h->mu held) until every op is done, or until the rule lets the rest go: then they
 * are abandoned. */
static void
hedge_wait(struct hfan *h, unsigned n, int spare, const struct ol_hedge_cfg *cfg)
{
	while (h->ndone < n) {
		uint64_t us[OL_MAX_DRIVES * 2], after, now;
		int nd = 0;

		for (unsigned i = 0; i < n; i++)
			if (h->s[i].done)
				us[nd++] = h->s[i].us;
		after = ol_hedge_after_us(cfg, us, nd, (int)n, spare);
		now = (ol_io_now_ns() - h->t0) / 1000;
		if (after != UINT64_MAX && now >= after)
			break;
		wait_until(&h->cv, &h->mu, after, now);
	}
	hfan_abandon(h, n, NULL);
}

/* Remote ops in parallel, giving up on up to spare stragglers; *mask: the abandoned ones. */
static void
run_hedged(struct ol_io_op **r, unsigned n, int spare, uint64_t *mask)
{
	struct hfan h = {.run = run_item, .arg = r};
	struct hfan_arg a[OL_MAX_DRIVES * 2];

	hfan_start(&h, a, n, NULL);
	pthread_mutex_lock(&h.mu);
	hedge_wait(&h, n, spare, hedge_cfg(r[0]));
	pthread_mutex_unlock(&h.mu);
	hfan_join(&h);
	for (unsigned i = 0; i < n; i++) {
		struct vfile *f;

		if (!h.s[i].aborted)
			continue;
		r[i]->res = -ETIMEDOUT;
		*mask |= 1ull << i;
		if ((f = vf_get(r[i]->fd))) {
			atomic_fetch_add(&f->rd->hedged, 1);
			atomic_store(&f->rd->hedged_ns, ol_io_now_ns());
		}
	}
}

int
ol_shard_batch_spare(struct ol_io_op *ops, unsigned n, int spare, uint64_t *hedged)
{
	struct ol_io_op *loc[OL_MAX_DRIVES * 2], *rem[OL_MAX_DRIVES * 2];
	struct ol_io_op tmp[OL_MAX_DRIVES * 2];
	unsigned nl = 0, nr = 0, ri[OL_MAX_DRIVES * 2];
	const struct ol_hedge_cfg *cfg;
	uint64_t mask = 0;
	int rc = 0;

	if (hedged)
		*hedged = 0;
	if (n > OL_MAX_DRIVES * 2)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (ol_vfd(ops[i].fd)) {
			ri[nr] = i;
			rem[nr++] = &ops[i];
		} else {
			loc[nl++] = &ops[i];
		}
	}
	if (!nr)
		return ol_io_batch(ops, n);
	for (unsigned i = 0; i < nl; i++)
		tmp[i] = *loc[i];
	if (nl)
		rc = ol_io_batch(tmp, nl);
	for (unsigned i = 0; i < nl; i++)
		loc[i]->res = tmp[i].res;
	cfg = hedge_cfg(rem[0]);
	if (spare > 0 && nr > 1 && cfg && cfg->floor_ms)
		run_hedged(rem, nr, spare, &mask);
	else
		run_remotes(rem, nr);
	for (unsigned i = 0; hedged && i < nr; i++)
		if (mask & (1ull << i))
			*hedged |= 1ull << ri[i];
	return rc;
}

int
ol_shard_batch(struct ol_io_op *ops, unsigned n)
{
	return ol_shard_batch_spare(ops, n, 0, NULL);
}

uint64_t
ol_rd_hedged(struct ol_rdrive *rd)
{
	return atomic_load(&rd->hedged);
}

bool
ol_drive_lagging(struct ol_store *st, int d)
{
	uint64_t calls, at, lat, peers;
	int n;

	if (!st->d[d].rd || !st->hedge.floor_ms)
		return false;
	/* left behind just now: its average may not show it (an abandoned call counts only the
	 * time it was given, and its other calls may be fast) */
	at = atomic_load(&st->d[d].rd->hedged_ns);
	if (at && ol_io_now_ns() - at < (uint64_t)OL_HEDGE_RECENT_MS * 1000000)
		return true;
	peers = ol_drive_peers_us(st, d, 1, &n);
	lat = ol_rd_latency(st->d[d].rd, &calls);
	return n && lat && calls && ol_hedge_lagging(&st->hedge, lat, peers);
}

struct each {
	struct ol_store *st;
	int d;
	void (*fn)(struct ol_store *st, int d, void *arg);
	void *arg;
};

static void
each_job(void *arg)
{
	struct each *e = arg;

	e->fn(e->st, e->d, e->arg);
}

void
ol_each_drive(struct ol_store *st, void (*fn)(struct ol_store *st, int d, void *arg), void *arg)
{
	struct each e[OL_MAX_DRIVES];
	struct fan_job j[OL_MAX_DRIVES];
	struct fan_group g;
	bool here[OL_MAX_DRIVES] = {false};
	int first = -1;

	fan_group_init(&g);
	for (int d = 0; d < st->n; d++) {
		e[d] = (struct each){st, d, fn, arg};
		if (!ol_drive_remote(st, d) || first < 0) {
			here[d] = true; /* local, or the first remote one: runs in this thread */
			first = ol_drive_remote(st, d) ? d : first;
		} else {
			here[d] = fan_go(&g, &j[d], each_job, &e[d]) != 0;
		}
	}
	for (int d = 0; d < st->n; d++)
		if (here[d])
			fn(st, d, arg);
	fan_group_wait(&g);
}

/* ol_each_drive_hedged's fan: drive d's fn. */
struct each_fan {
	struct ol_store *st;
	void (*fn)(struct ol_store *st, int d, void *arg);
	void *arg;
};

static void
each_item(void *arg, unsigned i)
{
	struct each_fan *e = arg;

	e->fn(e->st, (int)i, e->arg);
}

/* Wait (h->mu held) until every remote drive's fn ended, or until decided() holds and the
 * rest ran past the hedge delay: then they are abandoned. */
static void
ehedge_wait(struct hfan *h, struct ol_store *st, const bool *remote,
	    bool (*decided)(void *arg, const bool *done), void *arg)
{
	for (;;) {
		uint64_t us[OL_MAX_DRIVES], after = UINT64_MAX, now;
		int nd = 0, nr = 0;

		for (int d = 0; d < st->n; d++) {
			nr += remote[d];
			if (remote[d] && h->done[d])
				us[nd++] = h->s[d].us;
		}
		if (nd == nr)
			return;
		if (nd && decided(arg, h->done)) /* all the rest may go: the answer is in */
			after = ol_hedge_after_us(&st->hedge, us, nd, nr, nr - nd);
		now = (ol_io_now_ns() - h->t0) / 1000;
		if (after != UINT64_MAX && now >= after)
			break;
		wait_until(&h->cv, &h->mu, after, now);
	}
	hfan_abandon(h, (unsigned)st->n, remote);
}

uint32_t
ol_each_drive_hedged(struct ol_store *st, void (*fn)(struct ol_store *st, int d, void *arg),
		     bool (*decided)(void *arg, const bool *done), void *arg)
{
	struct each_fan e = {st, fn, arg};
	struct hfan h = {.run = each_item, .arg = &e};
	struct hfan_arg a[OL_MAX_DRIVES];
	bool remote[OL_MAX_DRIVES] = {false};
	uint32_t left = 0;

	if (!st->hedge.floor_ms) {
		ol_each_drive(st, fn, arg);
		return 0;
	}
	for (int d = 0; d < st->n; d++)
		remote[d] = ol_drive_remote(st, d);
	hfan_start(&h, a, (unsigned)st->n, remote);
	for (int d = 0; d < st->n; d++)
		if (!remote[d]) {
			fn(st, d, arg);
			h.done[d] = true; /* no thread writes a local drive's entry */
		}
	pthread_mutex_lock(&h.mu);
	ehedge_wait(&h, st, remote, decided, arg);
	pthread_mutex_unlock(&h.mu);
	hfan_join(&h);
	for (int d = 0; d < st->n; d++) {
		if (!h.s[d].aborted)
			continue;
		left |= 1u << d;
		atomic_fetch_add(&st->d[d].rd->hedged, 1);
		atomic_store(&st->d[d].rd->hedged_ns, ol_io_now_ns());
	}
	return left;
}

/* One SHARD_LIST page of dir after `after`: cb(arg, name, mtime_s) for each; *last is set to the
 * last name (empty when the page was empty). */
static int
list_page(struct ol_rdrive *rd, const char *dir, const char *after, char *last,
	  int (*cb)(void *arg, const char *dir, const char *name, uint64_t mtime), void *arg)
{
	uint8_t req[2 * (OL_NODE_NAME_MAX + 2) + 8];
	struct ol_node_wr w = {req, 0, sizeof(req), false};
	struct iovec iov;
	void *buf = NULL;
	size_t len = 0;
	int rc;

	ol_node_put16(&w, (uint16_t)rd->pdrive);
	ol_node_putstr(&w, dir);
	ol_node_putstr(&w, after);
	ol_node_put32(&w, 0);
	iov = (struct iovec){req, w.n};
	last[0] = 0;
	if ((rc = rd_call(rd, OL_NODE_SHARD_LIST, &iov, 1, &buf, &len)))
		return rc;
	struct ol_node_rd r = {buf, len, false};
	uint32_t n = ol_node_get32(&r);
	for (uint32_t i = 0; i < n && !r.err && !rc; i++) {
		char name[OL_NODE_NAME_MAX + 1];
		uint64_t mt;

		ol_node_getstr(&r, name, sizeof(name));
		mt = ol_node_get64(&r);
		if (r.err)
			break;
		memcpy(last, name, strlen(name) + 1);
		rc = cb(arg, dir, name, mt);
	}
	free(buf);
	return rc ? rc : r.err ? -EPROTO : 0;
}

struct walk {
	struct ol_rdrive *rd;
	int (*cb)(void *arg, const char *dir, const char *name, uint64_t mtime);
	void *arg;
};

static int
walk_dir(void *arg, const char *dir, const char *name, uint64_t mtime)
{
	struct walk *k = arg;
	char after[OL_NODE_NAME_MAX + 1] = "", last[OL_NODE_NAME_MAX + 1];
	int rc;

	(void)dir;
	(void)mtime;
	if (strlen(name) != 2)
		return 0; /* shard directories are two hex digits */
	do {
		rc = list_page(k->rd, name, after, last, k->cb, k->arg);
		memcpy(after, last, sizeof(after));
	} while (!rc && last[0]);
	return rc;
}

int
ol_rd_list(struct ol_store *st, int d,
	   int (*cb)(void *arg, const char *dir, const char *name, uint64_t mtime), void *arg)
{
	struct walk k = {st->d[d].rd, cb, arg};
	char after[OL_NODE_NAME_MAX + 1] = "", last[OL_NODE_NAME_MAX + 1];
	int rc;

	do {
		rc = list_page(k.rd, "", after, last, walk_dir, &k);
		memcpy(after, last, sizeof(after));
	} while (!rc && last[0]);
	return rc;
}
