/* cmd/openlaked/cluster_reads.c - GET and HEAD (and the data of PUTs) served by every node: see
 * cluster_reads.h. */
#include "cluster_reads.h"
#include "cluster_store.h"

#include "admin/admin.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "node/node.h"
#include "s3/s3.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VIEW_RETRY_MS 1000 /* a view that does not open is tried again this often */
#define WEIGH_MS      1000 /* a shard writer's pools weighed again (as the leader's are) */

/* A read-only store and the S3 server over it; requests count themselves in (users). */
struct view {
	struct ol_store *st;
	struct ol_s3_server *s3;
	unsigned users; /* under creads.mu */
	unsigned pools;
	bool shards;	      /* a shard writer (write_any): PUT and UploadPart data written here */
	struct ol_layout lay; /* the layout it opened (its pools weighed for new keys) */
	int64_t weighed_ms;   /* when the pools were weighed last */
};

enum { ST_OFF, ST_OPENING, ST_OPEN, ST_LEADING };

struct creads {
	const struct ol_config *cfg;
	struct ol_cluster *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	struct view *v;	      /* what requests take (NULL: forward them) */
	struct ol_layout lay; /* the layout this node took last */
	unsigned lay_gen;     /* bumped with each layout taken */
	bool leading, stopping;
	bool (*other_serves)(void *arg); /* creads_new */
	void *other_arg;
	ol_store_commit_fn commit; /* creads_new: a shard writer's commits go to the leader */
	void *commit_arg;
	/* the serving leader's offline drives as it put them last (<prefix>offline; off NULL:
	 * none read yet, or not such a value) */
	struct ol_offline offline;
	/* the leader refused a commit since that record was read: it holds online a drive the
	 * record says it lacks (taken back, not told yet); degraded writes are forwarded until
	 * the next record */
	bool offline_refused;
	/* the threads */
	pthread_t reader, watcher, offline_watcher;
	bool reader_started, watcher_started, offline_started;
	atomic_int stop, dirty; /* dirty: <prefix>gen changed since the last reload */
	_Atomic int state;
	_Atomic uint64_t local_reads;
	_Atomic uint64_t local_writes;	   /* PUTs and parts whose data this node wrote */
	_Atomic uint64_t writes_forwarded; /* such requests forwarded: a drive, or a drain */
	_Atomic uint64_t writes_degraded;  /* written without a drive the leader lacks too */
	_Atomic uint64_t declined;	   /* a 404 or 5xx of the view: forwarded to the leader */
	_Atomic uint64_t
	    behind; /* bucket reads forwarded: the view lacks a pool of etcd's layout */
};

static int64_t
now_ms(void)
{
	return (int64_t)ol_clock_ms();
}

/* until cv is signalled or ms pass (caller holds mu) */
static void
wait_locked(struct creads *rd, int ms)
{
	ol_cond_wait_ms(&rd->cv, &rd->mu, ms);
}

static void
layout_copy(const struct ol_layout *from, struct ol_layout *to)
{
	char *js = ol_layout_to_json(from);
	if (!js || ol_layout_from_json(js, strlen(js), to))
		ol_die("cluster: cannot copy the layout");
	free(js);
}

struct creads *
creads_new(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
	   bool (*other_serves)(void *arg), void *arg, ol_store_commit_fn commit, void *commit_arg)
{
	struct creads *rd = ol_xcalloc(1, sizeof(*rd));
	rd->cfg = cfg;
	rd->c = c;
	rd->other_serves = other_serves;
	rd->other_arg = arg;
	rd->commit = commit;
	rd->commit_arg = commit_arg;
	layout_copy(l, &rd->lay);
	rd->lay_gen = 1;
	pthread_mutex_init(&rd->mu, NULL);
	ol_cond_init_mono(&rd->cv);
	return rd;
}

/* ---- the view ---- */

/* The view's committer: rd->commit; a refusal (-EAGAIN: the leader holds online a drive this
 * write skipped, or no leader took it) makes the record of the leader's offline drives stale,
 * so that the client's retry of a degraded write is forwarded rather than refused again while
 * the leader's new record is on its way. */
static int
view_commit(void *arg, const void *req, size_t len, struct ol_obj_info *out)
{
	struct creads *rd = arg;
	int rc = rd->commit(rd->commit_arg, req, len, out);
	if (rc == -EAGAIN) {
		pthread_mutex_lock(&rd->mu);
		rd->offline_refused = true;
		pthread_mutex_unlock(&rd->mu);
	}
	return rc;
}

/* A read-only store of l's pools (a shard writer with write_any: its commits go to the leader
 * through rd->commit) and its S3 server, with the run-time keys read from it and the cached
 * bucket attributes dropped, before any request takes it. 0 or -errno. */
static int
view_open(struct creads *rd, const struct ol_layout *l, struct view **out)
{
	struct ol_store *st = NULL;
	struct ol_s3_server *s3 = NULL;
	bool shards = rd->cfg->cluster_write_any && rd->commit;
	int rc = cstore_open_pools(rd->cfg, rd->c, l, 0, l->n_pools, 0, true, shards, &st);
	if (rc)
		return rc;
	if (shards) {
		ol_store_set_committer(st, view_commit, rd);
		/* a commit is one plane frame: the leader's, as configured on every node */
		ol_store_set_commit_max(st, rd->cfg->cluster_plane_max_frame);
	}
	rc = ol_s3_new(rd->cfg, st, &s3);
	if (rc) {
		ol_store_close(st);
		return rc;
	}
	rc = ol_admin_keys_reload(st, rd->cfg, false);
	if (rc)
		ol_warn("cluster: the run-time S3 keys do not read from the read-only view (%s): "
			"reading them again in %d s",
			strerror(-rc), CREADS_REFRESH_MS / 1000);
	ol_s3_buckets_changed();
	struct view *v = ol_xcalloc(1, sizeof(*v));
	v->st = st;
	v->s3 = s3;
	v->pools = ol_layout_live_pools(l);
	v->shards = shards;
	layout_copy(l, &v->lay);
	if (shards) /* a new key goes to the pool the leader would pick (its free space) */
		cstore_pool_weights(rd->c, &v->lay, st);
	v->weighed_ms = now_ms();
	*out = v;
	return 0;
}

/* v no longer taken by new requests: wait for those on it, then close it */
static void
view_close(struct creads *rd, struct view *v)
{
	if (!v)
		return;
	pthread_mutex_lock(&rd->mu);
	while (v->users)
		wait_locked(rd, 1000);
	pthread_mutex_unlock(&rd->mu);
	ol_s3_free(v->s3);
	ol_store_close(v->st);
	ol_layout_fini(&v->lay);
	free(v);
}

/* v (may be NULL) replaces the view requests take; the old one closes after its requests */
static void
view_swap(struct creads *rd, struct view *v)
{
	pthread_mutex_lock(&rd->mu);
	struct view *old = rd->v;
	rd->v = v;
	pthread_mutex_unlock(&rd->mu);
	view_close(rd, old);
}

/* the open view (NULL: none, or this node serves the store), counted in as used; with
 * write: only a shard writer */
static struct view *
view_take(struct creads *rd, bool write)
{
	pthread_mutex_lock(&rd->mu);
	struct view *v = rd->leading ? NULL : rd->v;
	if (v && write && !v->shards)
		v = NULL;
	if (v)
		v->users++;
	pthread_mutex_unlock(&rd->mu);
	return v;
}

static void
view_put(struct creads *rd, struct view *v)
{
	pthread_mutex_lock(&rd->mu);
	if (--v->users == 0)
		pthread_cond_broadcast(&rd->cv);
	pthread_mutex_unlock(&rd->mu);
}

/* Every drive v lacks, the serving leader lacks too, as it last put <prefix>offline: the
 * record is of the leader that serves now (its epoch) and of v's layout, and the leader refused
 * no commit since it was read (view_commit). */
static bool
leader_lacks_too(struct creads *rd, struct view *v)
{
	int n = ol_store_drive_count(v->st);
	bool *off = ol_xcalloc(n > 0 ? (size_t)n : 1, sizeof(*off));
	n = ol_store_drives_offline(v->st, off, n);
	pthread_mutex_lock(&rd->mu);
	bool ok = !rd->offline_refused &&
		  ol_offline_covers(&rd->offline, v->lay.n_pools, off, (unsigned)n);
	uint64_t epoch = rd->offline.epoch;
	unsigned pool = rd->offline.pool;
	pthread_mutex_unlock(&rd->mu);
	free(off);
	struct ol_cluster_leader_info li;
	return ok && ol_cluster_leader(rd->c, pool, 0, &li) == 0 && li.epoch == epoch &&
	       !li.is_self;
}

bool
creads_write(struct creads *rd, struct ol_http_req *r, bool allowed)
{
	struct view *v = view_take(rd, true);
	if (!v)
		return false;
	/* A view that does not reach every drive would write fewer shards than the leader (a
	 * drive it has not taken back yet, while the leader writes it): an acknowledged object
	 * with less redundancy than the cluster has. Such writes go to the leader, unless the
	 * leader lacks each of those drives too (a node down: the leader would write the same
	 * shards); so do all of them while a pool drains (!allowed: its moves take the leader's
	 * key gates). */
	bool degraded = ol_store_drives_online(v->st) < ol_store_drive_count(v->st);
	if (!allowed ||
	    (degraded && !(rd->cfg->cluster_write_degraded && leader_lacks_too(rd, v)))) {
		atomic_fetch_add(&rd->writes_forwarded, 1);
		view_put(rd, v);
		return false;
	}
	/* never declined: the body is read by now, whatever the answer. Counted before the
	 * answer goes out, so that a client that saw it also sees the count in /metrics */
	atomic_fetch_add(&rd->local_writes, 1);
	if (degraded)
		atomic_fetch_add(&rd->writes_degraded, 1);
	ol_s3_handle(r, v->s3);
	view_put(rd, v);
	return true;
}

static bool same_pools(const struct ol_layout *a, const struct ol_layout *b);

/* The pools of the layout in etcd now are v's: a listing on v holds every key the leader
 * acknowledged before it. This node takes a new layout from its watch of the layout key, and
 * the leader may write to a joined pool first; an object there is still found through v (its
 * 404 is forwarded), but a listing on v would leave it out. One read of etcd per listing. */
static bool
view_lists_all(struct creads *rd, struct view *v)
{
	struct ol_layout l = {0};
	int64_t rev;
	if (ol_cluster_read_layout_rev(rd->c, &l, &rev))
		return false;
	bool same = same_pools(&v->lay, &l);
	ol_layout_fini(&l);
	return same;
}

bool
creads_serve(struct creads *rd, struct ol_http_req *r, bool bucket_read)
{
	struct view *v = rd->cfg->cluster_read_any ? view_take(rd, false) : NULL;
	if (!v)
		return false;
	if (bucket_read && !view_lists_all(rd, v)) {
		atomic_fetch_add(&rd->behind, 1);
		view_put(rd, v);
		return false;
	}
	bool served = ol_s3_handle_read(r, v->s3);
	atomic_fetch_add(served ? &rd->local_reads : &rd->declined, 1);
	view_put(rd, v);
	return served;
}

/* ---- ol-cstore-read ---- */

/* One step: the view follows read_any, the leadership and the layout; the keys and bucket
 * attributes follow <prefix>gen. *have: the layout generation of the view; *said: a failed
 * open was logged; *next_refresh: when the keys are read again regardless. */
static void
read_step(struct creads *rd, unsigned *have, bool *said, int64_t *next_refresh)
{
	struct ol_layout l = {0};
	pthread_mutex_lock(&rd->mu);
	bool want = (rd->cfg->cluster_read_any || rd->cfg->cluster_write_any) && !rd->leading &&
		    !rd->stopping;
	bool open = rd->v != NULL, reopen = want && (!open || rd->lay_gen != *have);
	unsigned gen = rd->lay_gen;
	if (reopen)
		layout_copy(&rd->lay, &l);
	pthread_mutex_unlock(&rd->mu);
	if (!want) {
		atomic_store(&rd->state, rd->leading ? ST_LEADING : ST_OFF);
		if (open) {
			view_swap(rd, NULL);
			ol_info("cluster: closed the read-only view of the store (this node %s)",
				rd->leading ? "serves the store now" : "stops");
		}
		return;
	}
	/* the first view waits for another node to serve: before, the drives of a new cluster
	 * may have no identity record yet (its leader writes them), and this node may be about
	 * to serve itself */
	if (reopen && !open && !rd->other_serves(rd->other_arg)) {
		atomic_store(&rd->state, ST_OPENING);
		ol_layout_fini(&l);
		return;
	}
	if (reopen && open) {
		/* the layout's pools changed: a view without a pool the leader writes now would
		 * answer 404 for its keys, so reads are forwarded until the new view opens (a
		 * test's fault rule holds the old view here: the window before this node took the
		 * layout, in which bucket reads check etcd's layout: view_lists_all) */
		ol_node_fault_hold_at("VIEW_SWAP");
		view_swap(rd, NULL);
		open = false;
		ol_info("cluster: the layout's pools changed: GET and HEAD are forwarded to the "
			"serving leader until the read-only view of them opens");
	}
	if (reopen) {
		struct view *v = NULL;
		atomic_store(&rd->state, ST_OPENING);
		int rc = view_open(rd, &l, &v);
		ol_layout_fini(&l);
		if (rc) {
			if (!*said)
				ol_warn(
				    "cluster: the read-only view of the store does not open yet "
				    "(%s): GET and HEAD are forwarded to the serving leader "
				    "meanwhile; retrying every %d ms",
				    strerror(rc < 0 && rc > -4096 ? -rc : EIO), VIEW_RETRY_MS);
			*said = true;
			return;
		}
		*said = false;
		*have = gen;
		*next_refresh = now_ms() + CREADS_REFRESH_MS;
		atomic_store(&rd->dirty, 0);
		unsigned pools = v->pools;
		bool shards = v->shards;
		view_swap(rd, v);
		atomic_store(&rd->state, ST_OPEN);
		ol_info("cluster: serving %s from a %s view of the store (%u pool(s)); other "
			"requests go to the serving leader",
			!rd->cfg->cluster_read_any ? "the data of PUTs and parts"
			: shards		   ? "GET, HEAD and the data of PUTs and parts"
						   : "GET and HEAD",
			shards ? "shard-writing" : "read-only", pools);
		return;
	}
	/* only this thread swaps the view: it stays open while it is used here */
	if (rd->v->shards && now_ms() - rd->v->weighed_ms >= WEIGH_MS) {
		cstore_pool_weights(rd->c, &rd->v->lay, rd->v->st);
		rd->v->weighed_ms = now_ms();
	}
	if (!atomic_load(&rd->dirty) && now_ms() < *next_refresh)
		return;
	/* only this thread swaps the view: it stays open while it is read here */
	atomic_store(&rd->dirty, 0);
	ol_s3_buckets_changed();
	int rc = ol_admin_keys_reload(rd->v->st, rd->cfg, true);
	/* a reload the store did not answer is tried again soon */
	*next_refresh = now_ms() + (rc ? VIEW_RETRY_MS : CREADS_REFRESH_MS);
}

static void *
read_main(void *arg)
{
	struct creads *rd = arg;
	unsigned have = 0;
	bool said = false;
	int64_t next_refresh = 0;
	for (;;) {
		pthread_mutex_lock(&rd->mu);
		bool stop = rd->stopping;
		pthread_mutex_unlock(&rd->mu);
		if (stop)
			break;
		read_step(rd, &have, &said, &next_refresh);
		/* a change of <prefix>gen is acted on at once, but only by an open view (the
		 * next view reads the keys anyway) */
		pthread_mutex_lock(&rd->mu);
		if (!rd->stopping && (!atomic_load(&rd->dirty) || !rd->v))
			wait_locked(rd, said ? VIEW_RETRY_MS : 200);
		pthread_mutex_unlock(&rd->mu);
	}
	view_swap(rd, NULL);
	return NULL;
}

/* ---- <prefix>gen: the leader's changes ---- */

static int
on_gen(void *arg, const char *v, size_t len, int64_t rev)
{
	struct creads *rd = arg;
	(void)v;
	(void)len;
	(void)rev;
	atomic_store(&rd->dirty, 1);
	pthread_mutex_lock(&rd->mu);
	pthread_cond_broadcast(&rd->cv);
	pthread_mutex_unlock(&rd->mu);
	return 0;
}

static void *
watch_main(void *arg)
{
	struct creads *rd = arg;
	(void)ol_cluster_watch(rd->c, "gen", on_gen, rd, &rd->stop);
	return NULL;
}

/* ---- <prefix>offline: the serving leader's offline drives ---- */

static int
on_offline(void *arg, const char *v, size_t len, int64_t rev)
{
	struct creads *rd = arg;
	struct ol_offline o = {0};
	(void)rev;
	if (v && ol_offline_decode(v, len, &o))
		memset(&o, 0, sizeof(o)); /* not such a value: as none */
	pthread_mutex_lock(&rd->mu);
	ol_offline_fini(&rd->offline);
	rd->offline = o;
	rd->offline_refused = false;
	pthread_mutex_unlock(&rd->mu);
	return 0;
}

static void *
offline_main(void *arg)
{
	struct creads *rd = arg;
	(void)ol_cluster_watch(rd->c, "offline", on_offline, rd, &rd->stop);
	return NULL;
}

/* a key or bucket changed through this node (it serves the store): the others read again */
static void
note_change(struct creads *rd, const char *what)
{
	char v[64];
	snprintf(v, sizeof(v), "{\"node\":%u,\"changed\":\"%s\"}", rd->cfg->self_id, what);
	int rc = ol_cluster_put(rd->c, "gen", v);
	if (rc)
		ol_warn("cluster: the change of %s could not be told to the other nodes through "
			"etcd (%s): they read it within %d s",
			what, strerror(rc < 0 && rc > -4096 ? -rc : EIO), CREADS_REFRESH_MS / 1000);
}

static void
keys_changed(void *arg)
{
	note_change(arg, "keys");
}

static void
buckets_changed(void *arg)
{
	note_change(arg, "buckets");
}

static void
metrics(struct ol_strbuf *b, void *arg)
{
	struct creads *rd = arg;
	pthread_mutex_lock(&rd->mu);
	int offline = -1;
	if (rd->offline.off) {
		offline = 0;
		for (unsigned i = 0; i < rd->offline.n; i++)
			offline += rd->offline.off[i];
	}
	pthread_mutex_unlock(&rd->mu);
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_cluster_local_reads_total S3 GET and HEAD requests this "
	    "node served from its read-only view of the cluster store.\n"
	    "# TYPE openlake_cluster_local_reads_total counter\n"
	    "openlake_cluster_local_reads_total %llu\n"
	    "# HELP openlake_cluster_local_reads_declined_total GET and HEAD requests whose "
	    "answer from the read-only view would have been a 404 or 5xx, forwarded to the "
	    "serving leader instead.\n"
	    "# TYPE openlake_cluster_local_reads_declined_total counter\n"
	    "openlake_cluster_local_reads_declined_total %llu\n"
	    "# HELP openlake_cluster_bucket_reads_behind_total Bucket GETs and HEADs (listings "
	    "among them) forwarded to the serving leader because the layout in etcd had pools "
	    "this node's read-only view lacked (a pool joined, not taken here yet).\n"
	    "# TYPE openlake_cluster_bucket_reads_behind_total counter\n"
	    "openlake_cluster_bucket_reads_behind_total %llu\n"
	    "# HELP openlake_cluster_read_view_open Whether this node's read-only view "
	    "of the cluster store is open (1) and serves GET and HEAD.\n"
	    "# TYPE openlake_cluster_read_view_open gauge\n"
	    "openlake_cluster_read_view_open %d\n"
	    "# HELP openlake_cluster_local_writes_total S3 PutObject and UploadPart requests "
	    "whose data this node wrote itself (write_any), their commits sent to the serving "
	    "leader.\n"
	    "# TYPE openlake_cluster_local_writes_total counter\n"
	    "openlake_cluster_local_writes_total %llu\n"
	    "# HELP openlake_cluster_local_writes_forwarded_total PutObject and UploadPart "
	    "requests forwarded to the serving leader instead of written here because this "
	    "node's view lacked a drive the leader had then, or a pool was draining.\n"
	    "# TYPE openlake_cluster_local_writes_forwarded_total counter\n"
	    "openlake_cluster_local_writes_forwarded_total %llu\n"
	    "# HELP openlake_cluster_local_writes_degraded_total Of the local writes, those "
	    "written while this node's view lacked drives that the serving leader lacked too "
	    "(it would have written the same shards).\n"
	    "# TYPE openlake_cluster_local_writes_degraded_total counter\n"
	    "openlake_cluster_local_writes_degraded_total %llu\n"
	    "# HELP openlake_cluster_leader_drives_offline Drives the serving leader holds "
	    "offline, as it last told (-1: not told).\n"
	    "# TYPE openlake_cluster_leader_drives_offline gauge\n"
	    "openlake_cluster_leader_drives_offline %d\n",
	    (unsigned long long)atomic_load(&rd->local_reads),
	    (unsigned long long)atomic_load(&rd->declined),
	    (unsigned long long)atomic_load(&rd->behind), atomic_load(&rd->state) == ST_OPEN,
	    (unsigned long long)atomic_load(&rd->local_writes),
	    (unsigned long long)atomic_load(&rd->writes_forwarded),
	    (unsigned long long)atomic_load(&rd->writes_degraded), offline);
}

void
creads_start(struct creads *rd, struct ol_s3_server *leader_s3)
{
	ol_s3_set_bucket_hook(leader_s3, buckets_changed, rd);
	ol_admin_set_keys_hook(keys_changed, rd);
	ol_metrics_register(metrics, rd);
	if (pthread_create(&rd->watcher, NULL, watch_main, rd) == 0) {
		pthread_setname_np(rd->watcher, "ol-cstore-gen");
		rd->watcher_started = true;
	} else {
		ol_warn("cluster: cannot watch the leader's key and bucket changes: they are read "
			"every %d s",
			CREADS_REFRESH_MS / 1000);
	}
	if (rd->cfg->cluster_write_any && rd->commit &&
	    pthread_create(&rd->offline_watcher, NULL, offline_main, rd) == 0) {
		pthread_setname_np(rd->offline_watcher, "ol-cstore-off");
		rd->offline_started = true;
	}
	if (pthread_create(&rd->reader, NULL, read_main, rd) == 0) {
		pthread_setname_np(rd->reader, "ol-cstore-read");
		rd->reader_started = true;
	} else {
		ol_warn("cluster: cannot start the read-only view: GET and HEAD are forwarded to "
			"the serving leader");
	}
}

/* the pools a view opens: those not removed (a pool's draining changes no view) */
static bool
same_pools(const struct ol_layout *a, const struct ol_layout *b)
{
	if (a->n_pools != b->n_pools)
		return false;
	for (unsigned p = 0; p < a->n_pools; p++)
		if ((a->pools[p].state == OL_POOL_REMOVED) !=
		    (b->pools[p].state == OL_POOL_REMOVED))
			return false;
	return true;
}

void
creads_layout(struct creads *rd, const struct ol_layout *l)
{
	struct ol_layout n;
	layout_copy(l, &n);
	pthread_mutex_lock(&rd->mu);
	if (!same_pools(&rd->lay, &n))
		rd->lay_gen++;
	ol_layout_fini(&rd->lay);
	rd->lay = n;
	pthread_cond_broadcast(&rd->cv);
	pthread_mutex_unlock(&rd->mu);
}

void
creads_leading(struct creads *rd, bool leading)
{
	pthread_mutex_lock(&rd->mu);
	rd->leading = leading;
	pthread_cond_broadcast(&rd->cv);
	pthread_mutex_unlock(&rd->mu);
}

void
creads_status_json(struct creads *rd, struct ol_strbuf *b)
{
	static const char *const names[] = {"off", "opening", "open", "leading"};
	pthread_mutex_lock(&rd->mu);
	unsigned pools = rd->v ? rd->v->pools : 0;
	pthread_mutex_unlock(&rd->mu);
	int s = atomic_load(&rd->state);
	ol_strbuf_printf(b,
			 "\"read_store\":{\"read_any\":%s,\"write_any\":%s,\"state\":\"%s\","
			 "\"pools\":%u,\"local_reads\":%llu,\"local_writes\":%llu}",
			 rd->cfg->cluster_read_any ? "true" : "false",
			 rd->cfg->cluster_write_any ? "true" : "false", names[s], pools,
			 (unsigned long long)atomic_load(&rd->local_reads),
			 (unsigned long long)atomic_load(&rd->local_writes));
}

void
creads_stop(struct creads *rd)
{
	if (!rd)
		return;
	pthread_mutex_lock(&rd->mu);
	rd->stopping = true;
	pthread_cond_broadcast(&rd->cv);
	pthread_mutex_unlock(&rd->mu);
	atomic_store(&rd->stop, 1);
	if (rd->reader_started)
		pthread_join(rd->reader, NULL);
	if (rd->watcher_started)
		pthread_join(rd->watcher, NULL);
	if (rd->offline_started)
		pthread_join(rd->offline_watcher, NULL);
	rd->reader_started = rd->watcher_started = rd->offline_started = false;
}

void
creads_free(struct creads *rd)
{
	if (!rd)
		return;
	creads_stop(rd);
	ol_metrics_unregister(metrics, rd);
	ol_admin_set_keys_hook(NULL, NULL);
	ol_layout_fini(&rd->lay);
	ol_offline_fini(&rd->offline);
	pthread_mutex_destroy(&rd->mu);
	pthread_cond_destroy(&rd->cv);
	free(rd);
}
