/* cmd/openlaked/cluster_store.c - the cluster store mode: see cluster_store.h. */
#include "cluster_store.h"
#include "cluster_quorum.h"
#include "cluster_reads.h"
#include "cluster_writes.h"
#include "heal_job.h"

#include "admin/admin.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "io/io.h"
#include "s3/s3.h"
#include "s3/s3util.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define OPEN_RETRY_MS  500
#define SERVE_TRY_MS   50   /* a node about to serve asks for the serving key this often */
#define LOST_GRACE_MS  2000 /* a server that stops waits this long for its requests in flight */
#define LAYOUT_POLL_MS 1000 /* the poller's steps (grow, weights, drain) */
#define LAYOUT_READ_MS 5000 /* the layout read without a watch event */
#define DEAD_PROBE_MS  300  /* a connect to the serving leader's S3 port waits this long */
#define DEAD_APART_MS  1000 /* refused twice at least this far apart: its process is gone */
#define MAX_POOLS      16   /* OL_STORE_MAX_POOLS */
#define MAX_SETS       64   /* erasure sets of one store */
#define MAX_NODES      256  /* members whose free space weighs the pools */
/* The leader of the serving set serves every set of every pool: it opens them all over the
 * node planes, each fenced with its epoch (see docs/cluster.md). The serving set is set 0 of
 * the layout's first active pool (ol_layout_serving_pool): 0.0 until `openlake cluster leave
 * --pool 0`, then the next pool's set 0, whose leader serves and runs the drain. A pool added
 * to the layout (`openlake cluster join`) and a pool's new state are noticed by polling the
 * layout key and taken without a restart. */
#define SET_INDEX	 0u
#define RETRY_AFTER_SECS "1"

struct cstore {
	const struct ol_config *cfg;
	struct ol_cluster *c;
	struct ol_layout layout;
	struct ol_s3_server *s3;
	struct ol_http_proxy *proxy;
	struct cquorum *q; /* the serving set's write quorum as this node reaches it (or NULL) */
	int wait_ms;	   /* how long a request waits for a leader before its 503 */
	/* the key a forwarding node vouches for its client with (X-OpenLake-Client, http.h):
	 * HMAC-SHA256 of the cluster secret and a fixed label, the same on every node */
	uint8_t client_key[OL_HTTP_CLIENT_KEY];
	/* swap_mu: the layout and the store's opening, growing and closing (the leadership
	 * thread's gained / lost, the layout poller); held across the plane calls, never by a
	 * request */
	pthread_mutex_t swap_mu;
	pthread_t poller;
	bool poller_started;
	unsigned grow_failed; /* pools the last grow could not open (logged once per count) */
	unsigned served_to;   /* the store served holds the layout's pools [0, served_to) */
	/* <prefix>offline as this node put it last while serving (the poller's; NULL: none) */
	char *offline_put;
	/* the poller's probe of the serving leader's S3 port (dead_leader_check): the epoch
	 * probed and when it first refused (0: it did not) */
	uint64_t dead_epoch;
	int64_t dead_since_ms;
	_Atomic uint64_t dead_revoked; /* leases of dead leaders this node revoked */
	/* the pool whose set 0 serves, as this node last read the layout (route reads it
	 * lock-free); serve_rev: the layout's mod revision when this node saw it become that
	 * pool (0: at start). Its leader serves only at an epoch above serve_rev, so above every
	 * epoch the previous serving leader used (docs/cluster.md, "Fencing"). */
	_Atomic unsigned serve_pool;
	int64_t serve_rev;
	_Atomic int64_t layout_rev; /* the mod revision of the layout last read */
	/* The watch of the layout key (ol-cstore-watch): a change that moves the serving set
	 * away from the set this node serves sets halt_rev to its revision, and this node admits
	 * no request from then on (serve_here), at once rather than at the next poll; the poller
	 * is woken (poll_now) and stops serving (lost), which releases the serving key the next
	 * server waits for. A layout read at or after halt_rev clears it. */
	_Atomic int64_t halt_rev;
	atomic_int poll_now, watch_stop;
	pthread_t watcher;
	bool watcher_started;
	/* the drain of a pool (`openlake cluster leave`), on its own thread; under swap_mu */
	pthread_t drainer;
	bool drain_started;
	int drain_pool;		   /* layout index of the pool drained */
	unsigned drain_store_pool; /* its index in drain_st (the drain thread reads this) */
	struct ol_store *drain_st;
	struct ol_drain_progress dp;
	struct heal_job *hj; /* the heal job's record in etcd (heal_job.h) */
	struct creads *rd;   /* GET and HEAD served here while another node serves */
	struct cwrites *cw;  /* the commits of PUTs written here, sent to the leader */
	/* write_any, and the layout this node took allows writes here: no pool draining (a
	 * drain moves keys between pools under the leader's gates) */
	atomic_bool local_writes;
	char endpoint_host[OL_S3_ENDPOINT_NAMES]; /* s3_addr's host and [s3] domains (vhost) */
	/* other nodes' commits this node ran as the serving leader (cstore_commit_serve):
	 * answered by the store (served), or not taken (refused: not serving) */
	_Atomic uint64_t commits_served, commits_refused;
	_Atomic int drain_rc; /* 1 running, 0 done (the pool is empty), -errno */
	int64_t drain_report_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	struct ol_store *st; /* open while this node leads and serves the set */
	uint64_t epoch;
	unsigned st_pool; /* st serves for the leader of set st_pool.0 */
	unsigned users;	  /* requests being served on st */
	bool stopping;	  /* the daemon stops: no waiting for a leader */
	/* set by cstore_resign: ends the requests still in flight after LOST_GRACE_MS */
	void (*cut)(void *arg);
	void *cut_arg;
};

static unsigned
layout_nodes(const struct ol_layout *l)
{
	unsigned seen[64], n = 0;
	for (unsigned p = 0; p < l->n_pools; p++) {
		size_t slots = (size_t)l->pools[p].n_sets * l->set_drives;
		for (size_t i = 0; i < slots; i++) {
			unsigned id = l->pools[p].slots[i].node, j = 0;
			while (j < n && seen[j] != id)
				j++;
			if (j == n && n < 64)
				seen[n++] = id;
		}
	}
	return n;
}

/* how long a starting node waits for etcd: three lease TTLs, 10 s to 60 s (30 s by default) */
static int
etcd_wait_ms(const struct ol_config *cfg)
{
	unsigned s = 3 * cfg->cluster_lease_ttl_s;
	return (int)(s < 10 ? 10 : s > 60 ? 60 : s) * 1000;
}

static int64_t mono_ms(void);

/* Every node of a cluster store runs its node plane on one transport: a node dials a peer at
 * the address the peer registered, but a store keeps the addresses it opened its drives with,
 * so a node that came back on the other transport would stay offline to the leader (seen:
 * "Connection refused" for every call). 0, or -EPROTOTYPE (logged with the fix) when a member
 * of the layout registered the other transport. Waits for the first read of the members. */
static int
same_plane_transport(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
		     int wait_ms)
{
	struct ol_cluster_view v = {0};
	int64_t end = mono_ms() + wait_ms;
	while (ol_cluster_members(c, &v) == 0 && v.epoch == 0 && mono_ms() < end) {
		ol_cluster_view_fini(&v);
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
	}
	bool ucx = ol_config_plane_scheme(cfg)[0] != 0;
	char other[256] = "";
	size_t len = 0;
	for (unsigned i = 0; i < v.n; i++) {
		const struct ol_cluster_member *m = &v.members[i];
		if (m->id == cfg->self_id || !m->rpc_addr[0] || !ol_layout_has_node(l, m->id) ||
		    (strncmp(m->rpc_addr, "ucx://", 6) == 0) == ucx || len + 16 >= sizeof(other))
			continue;
		len += (size_t)snprintf(other + len, sizeof(other) - len, "%s%u", len ? ", " : "",
					m->id);
	}
	ol_cluster_view_fini(&v);
	if (!other[0])
		return 0;
	ol_err("cluster: node(s) %s run their node plane on %s, this node on %s ([cluster] "
	       "plane_transport): every node of a cluster must use the same transport (UCX also "
	       "runs over TCP where a node has no RDMA NIC): set plane_transport the same on every "
	       "node and restart them (a node stopped within the lease TTL still counts until "
	       "its lease lapses)",
	       other, ucx ? "TCP" : "UCX", ucx ? "UCX" : "TCP");
	return -EPROTOTYPE;
}

int
cstore_decide(const struct ol_config *cfg, struct ol_cluster *c, struct ol_layout *l)
{
	const int ETCD_WAIT_MS = etcd_wait_ms(cfg);
	ol_info("cluster: reading the layout from etcd %s (waiting up to %d s for it to answer)",
		cfg->cluster_etcd, ETCD_WAIT_MS / 1000);
	int rc = ol_cluster_read_layout(c, ETCD_WAIT_MS, l);
	if (rc == -ETIMEDOUT) {
		ol_err(
		    "cluster: etcd %s did not answer within %d s: with [cluster] etcd and secret "
		    "set, a node needs etcd to know whether it serves a cluster store. Start "
		    "etcd (and check [cluster] etcd), or remove [cluster] etcd to run this "
		    "node alone",
		    cfg->cluster_etcd, ETCD_WAIT_MS / 1000);
		return rc;
	}
	if (rc == -ENOENT) {
		ol_info("cluster: no layout in etcd yet: serving the local drives as a single "
			"node; run `openlake cluster init --config FILE` and restart the nodes to "
			"form the cluster store");
		return 0;
	}
	if (rc) {
		ol_err("cluster: the layout in etcd is unreadable (%s): serving the local drives",
		       strerror(-rc));
		return 0;
	}
	if (layout_nodes(l) < 2) {
		ol_info("cluster: the layout has one node: serving the local drives");
		ol_layout_fini(l);
		return 0;
	}
	unsigned sets = 0;
	for (unsigned p = 0; p < l->n_pools; p++)
		sets += l->pools[p].n_sets;
	if (l->n_pools > MAX_POOLS || sets > MAX_SETS) {
		ol_err("cluster: the layout has %u erasure sets in %u pools; one store serves at "
		       "most %d sets in %d pools, so this node serves its local drives alone",
		       sets, l->n_pools, MAX_SETS, MAX_POOLS);
		ol_layout_fini(l);
		return 0;
	}
	rc = same_plane_transport(cfg, c, l, ETCD_WAIT_MS);
	if (rc) {
		ol_layout_fini(l);
		return rc;
	}
	ol_info("cluster: serving deployment %s as %u pool(s), %u erasure set(s) of %u drives "
		"(parity %u) over %u nodes; the leader of set %u.0 serves them all, the other "
		"nodes forward to it%s%s",
		l->deployment_id, l->n_pools, sets, l->set_drives, l->parity, layout_nodes(l),
		ol_layout_serving_pool(l),
		cfg->cluster_read_any ? " all but GET and HEAD, which they serve themselves "
					"([cluster] read_any)"
				      : "",
		cfg->cluster_write_any ? "; they write the data of plain PUTs and parts "
					 "themselves and send it only the commits ([cluster] "
					 "write_any)"
				       : "");
	return 1;
}

void
cstore_peer_addr(const struct ol_config *cfg, const struct ol_cluster_view *v, unsigned node,
		 char *out, size_t len)
{
	out[0] = 0;
	for (unsigned i = 0; v && i < v->n; i++)
		if (v->members[i].id == node && v->members[i].rpc_addr[0])
			snprintf(out, len, "%s", v->members[i].rpc_addr);
	/* [[nodes]] name no transport: the peer runs ours (plane_transport) */
	const char *sch = ol_config_plane_scheme(cfg);
	for (unsigned i = 0; !out[0] && i < cfg->n_nodes; i++)
		if (cfg->nodes[i].id == node)
			snprintf(out, len, "%s%s", sch, cfg->nodes[i].rpc_addr);
	if (!out[0] && node == cfg->self_id)
		snprintf(out, len, "%s%s", sch, cfg->rpc_addr);
}

/* every set of pool p of l, each over its drives' node planes, fenced with the epoch of the
 * leader of the serving set (readonly: a read-only view, epoch 0; shards: one that writes the
 * shard files of PUTs too); objects placed by a hash keyed with the deployment id */
static int
open_pool(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l, unsigned p,
	  uint64_t epoch, bool readonly, bool shards, struct ol_store **st)
{
	unsigned n = l->set_drives, m = l->pools[p].n_sets;
	size_t all = (size_t)m * n;
	struct ol_store_drive_spec *spec = ol_xcalloc(all, sizeof(*spec));
	char(*addr)[OL_CFG_STR] = ol_xcalloc(all, sizeof(*addr));
	struct ol_store_set_opts *o = ol_xcalloc(m, sizeof(*o));
	struct ol_cluster_view v;
	int rc = ol_cluster_members(c, &v);
	if (rc)
		goto out;
	for (size_t j = 0; j < all; j++) {
		const struct ol_layout_slot *s = &l->pools[p].slots[j];
		cstore_peer_addr(cfg, &v, s->node, addr[j], sizeof(addr[j]));
		spec[j] = (struct ol_store_drive_spec){addr[j], s->drive, s->node};
	}
	ol_cluster_view_fini(&v);
	for (unsigned i = 0; i < m; i++)
		o[i] = (struct ol_store_set_opts){.n = n,
						  .drives = spec + (size_t)i * n,
						  .secret = cfg->cluster_secret,
						  .self_id = cfg->self_id,
						  .epoch = epoch,
						  .readonly = readonly,
						  .shards = readonly && shards,
						  .deadline_ms = 5000,
						  .store_id = l->deployment_id,
						  .pool = p,
						  .set = i,
						  .sets = m};
	rc = ol_store_open_sets(cfg, o, m, l->deployment_id, st);
out:
	free(o);
	free(spec);
	free(addr);
	return rc;
}

int
cstore_open_pools(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
		  unsigned from, unsigned to, uint64_t epoch, bool readonly, bool shards,
		  struct ol_store **st)
{
	struct ol_store *parts[MAX_POOLS];
	unsigned n = 0;
	int rc = 0;
	*st = NULL;
	for (unsigned p = from; !rc && p < to && n < MAX_POOLS; p++)
		if (l->pools[p].state != OL_POOL_REMOVED) /* drained: serves nothing */
			rc = open_pool(cfg, c, l, p, epoch, readonly, shards, &parts[n++]);
	if (!rc && n == 0)
		return -ENOENT;
	if (rc) {
		for (unsigned i = 0; i + 1 < n; i++) /* parts[n - 1] is the one that failed */
			ol_store_close(parts[i]);
		return rc;
	}
	if (n == 1) {
		*st = parts[0];
		return 0;
	}
	/* takes them all over, also on error (the layout was checked against MAX_POOLS and
	 * MAX_SETS when taken) */
	return ol_store_pools(parts, n, l->deployment_id, st);
}

/* Pools from..to-1 of the layout served, opened as one writable store at epoch */
static int
open_pools(struct cstore *cs, unsigned from, unsigned to, uint64_t epoch, struct ol_store **st)
{
	return cstore_open_pools(cs->cfg, cs->c, &cs->layout, from, to, epoch, false, false, st);
}

/* the pools' weights for new keys: the free bytes of their nodes' drives, per drive, as the
 * nodes last measured them (<prefix>free/<id>, every 5 s while it changes; a node that has
 * not written it yet: what it registered with) */
void
cstore_pool_weights(struct ol_cluster *c, const struct ol_layout *l, struct ol_store *st)
{
	uint64_t w[MAX_POOLS] = {0}, now_free[MAX_NODES];
	unsigned ids[MAX_NODES];
	size_t nf = 0;
	struct ol_cluster_view v;
	if (ol_store_pool_count(st) < 2 || ol_cluster_members(c, &v))
		return;
	if (ol_cluster_free_space(c, ids, now_free, MAX_NODES, &nf))
		nf = 0;
	for (unsigned i = 0; i < v.n; i++)
		for (size_t j = 0; j < nf; j++)
			if (ids[j] == v.members[i].id)
				v.members[i].free = now_free[j];
	unsigned n = 0;
	for (unsigned p = 0; p < l->n_pools && n < MAX_POOLS; p++) {
		if (l->pools[p].state == OL_POOL_REMOVED)
			continue;
		for (size_t j = 0; j < (size_t)l->pools[p].n_sets * l->set_drives; j++)
			for (unsigned i = 0; i < v.n; i++)
				if (v.members[i].id == l->pools[p].slots[j].node &&
				    v.members[i].n_drives)
					w[n] += v.members[i].free / v.members[i].n_drives;
		n++;
	}
	ol_cluster_view_fini(&v);
	ol_store_set_pool_free(st, w, n);
}

static void
pool_weights(struct cstore *cs, struct ol_store *st)
{
	cstore_pool_weights(cs->c, &cs->layout, st);
}

/* the whole store of the layout */
static int
open_set(struct cstore *cs, uint64_t epoch, struct ol_store **st)
{
	int rc = open_pools(cs, 0, cs->layout.n_pools, epoch, st);
	if (!rc)
		pool_weights(cs, *st);
	return rc;
}

static bool
is_stopping(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	bool stopping = cs->stopping;
	pthread_mutex_unlock(&cs->mu);
	return stopping;
}

/* until cv is signalled (a leadership change, a request done, the stop) or ms pass */
static void
wait_change(struct cstore *cs, int ms)
{
	pthread_mutex_lock(&cs->mu);
	ol_cond_wait_ms(&cs->cv, &cs->mu, ms);
	pthread_mutex_unlock(&cs->mu);
}

/* ---- the drain of a pool (`openlake cluster leave`) ----
 *
 * The leader of set 0.0 runs it on the store it serves (ol_store_drain), on its own thread,
 * for the pool the layout marks draining. Its progress goes to <prefix>leave every 2 s;
 * when the pool is empty the layout marks it removed (a transaction on the layout's
 * revision), and every leader's poller then reopens its store without it. A new leader, or
 * this one after a swap of its store, starts the drain again from the start: the keys moved
 * already are not in the pool any more, so it rescans only what is left. Caller holds
 * swap_mu in all of these. */
static void drain_report(struct cstore *cs, bool now);

static void *
drain_main(void *arg)
{
	struct cstore *cs = arg;
	struct ol_drain_opts o = {.rate_bytes = cs->cfg->heal_bytes_per_sec};
	/* not cs->layout: the poller replaces it under swap_mu, which this thread does not hold */
	int rc = ol_store_drain(cs->drain_st, cs->drain_store_pool, &o, &cs->dp);
	atomic_store(&cs->drain_rc, rc);
	return NULL;
}

static void
drain_stop(struct cstore *cs)
{
	if (!cs->drain_started)
		return;
	ol_store_drain_cancel(&cs->dp);
	pthread_join(cs->drainer, NULL);
	cs->drain_started = false;
	drain_report(cs, true);
}

/* the store follows the layout's draining pool: weight 0 and the drain running */
static void
drain_sync(struct cstore *cs)
{
	int want = ol_layout_draining(&cs->layout);
	pthread_mutex_lock(&cs->mu);
	struct ol_store *st = cs->st;
	pthread_mutex_unlock(&cs->mu);
	if (cs->drain_started && (cs->drain_pool != want || cs->drain_st != st)) {
		if (want < 0)
			ol_info("cluster: the drain of pool %d stops: the layout has it active "
				"again (`openlake cluster leave --cancel`)",
				cs->drain_pool);
		drain_stop(cs);
	}
	if (!st || cs->drain_started || want < 0 || (unsigned)want >= cs->served_to) {
		if (st && want < 0)
			(void)ol_store_pool_set_draining(st, -1);
		return;
	}
	int rc =
	    ol_store_pool_set_draining(st, (int)ol_layout_store_pool(&cs->layout, (unsigned)want));
	if (rc) {
		ol_warn("cluster: pool %u cannot be drained by this store (%s)", want,
			strerror(-rc));
		return;
	}
	memset(&cs->dp, 0, sizeof(cs->dp));
	cs->drain_pool = want;
	cs->drain_store_pool = ol_layout_store_pool(&cs->layout, (unsigned)want);
	cs->drain_st = st;
	atomic_store(&cs->drain_rc, 1);
	if (pthread_create(&cs->drainer, NULL, drain_main, cs)) {
		ol_warn("cluster: cannot start the drain of pool %u: retrying", want);
		return;
	}
	pthread_setname_np(cs->drainer, "ol-drain");
	cs->drain_started = true;
	cs->drain_report_ms = 0;
	ol_info("cluster: draining pool %u: moving its objects to the other pools", want);
}

/* the drain's progress record (<prefix>leave) */
static void
drain_json(struct cstore *cs, bool gone, char *js, size_t len)
{
	int rc = atomic_load(&cs->drain_rc);
	const struct ol_drain_progress *p = &cs->dp;
	/* `cluster leave --cancel` made the pool active again: the drain stopped for that */
	bool cancelled = (unsigned)cs->drain_pool < cs->layout.n_pools &&
			 cs->layout.pools[cs->drain_pool].state == OL_POOL_ACTIVE;
	snprintf(js, len,
		 "{\"pool\":%d,\"state\":\"%s\",\"leader\":%u,\"objects_moved\":%llu,"
		 "\"bytes_moved\":%llu,\"objects_left\":%llu,\"bytes_left\":%llu,"
		 "\"failed\":%llu,\"uploads\":%llu,\"passes\":%llu,\"time\":%lld}",
		 cs->drain_pool,
		 gone	     ? "removed"
		 : cancelled ? "cancelled"
		 : rc == 1   ? "draining"
		 : rc == 0   ? "empty"
			     : "interrupted",
		 cs->cfg->self_id, (unsigned long long)atomic_load(&p->objects_moved),
		 (unsigned long long)atomic_load(&p->bytes_moved),
		 (unsigned long long)atomic_load(&p->objects_left),
		 (unsigned long long)atomic_load(&p->bytes_left),
		 (unsigned long long)atomic_load(&p->failed),
		 (unsigned long long)atomic_load(&p->uploads),
		 (unsigned long long)atomic_load(&p->passes), (long long)time(NULL));
}

/* <prefix>leave: the drain's progress, every 2 s while it runs (now: at once) */
static void
drain_report(struct cstore *cs, bool now)
{
	if (!cs->drain_started && !now)
		return;
	int64_t t = mono_ms();
	if (!now && t < cs->drain_report_ms + 2000)
		return;
	cs->drain_report_ms = t;
	char js[640];
	drain_json(cs,
		   (unsigned)cs->drain_pool < cs->layout.n_pools &&
		       cs->layout.pools[cs->drain_pool].state == OL_POOL_REMOVED,
		   js, sizeof(js));
	(void)ol_cluster_put(cs->c, "leave", js);
}

/* the pool is empty: mark it removed in the layout (on its revision: a concurrent change
 * makes it try again at the next poll) */
static void
drain_finish(struct cstore *cs)
{
	if (!cs->drain_started || atomic_load(&cs->drain_rc) != 0)
		return;
	struct ol_layout l;
	int64_t rev = 0;
	int rc = ol_cluster_read_layout_rev(cs->c, &l, &rev);
	if (rc)
		return;
	unsigned p = (unsigned)cs->drain_pool;
	if (p < l.n_pools && l.pools[p].state == OL_POOL_DRAINING) {
		char js[640];
		drain_json(cs, true, js, sizeof(js)); /* the record says removed with the layout */
		l.pools[p].state = OL_POOL_REMOVED;
		rc = ol_cluster_write_layout(cs->c, &l, rev, "leave", js);
		if (!rc)
			ol_info("cluster: pool %u is empty: removed from the layout; its nodes "
				"can be stopped",
				p);
		else
			ol_warn("cluster: pool %u is empty but the layout could not be changed "
				"(%s): trying again",
				p, rc == -ECANCELED ? "it changed meanwhile" : strerror(-rc));
	}
	ol_layout_fini(&l);
}

static int read_layout_now(struct cstore *cs, bool *warned, bool *removed);
static void lost(struct cstore *cs);

/* the serving key goes (this node serves nothing now); a failure is retried by the poller */
static void
release_serving(struct cstore *cs)
{
	int rc = ol_cluster_serve_release(cs->c);
	if (rc)
		ol_warn("cluster: the serving key could not be deleted (%s): retrying; the next "
			"server waits for it (at most the lease TTL)",
			strerror(rc < 0 && rc > -4096 ? -rc : EIO));
}

/* Before this node serves set pool.0 at epoch: take the serving key, once the previous
 * server stopped serving and deleted it (or its lease lapsed: killed, frozen, cut off from
 * etcd), and only while the layout is the one read (a move read meanwhile is decided again).
 * Requests wait meanwhile (route). 0: serve; -errno: do not (the leadership went, the serving
 * set moved, the daemon stops). Caller holds swap_mu. */
static int
take_serving(struct cstore *cs, unsigned pool, uint64_t epoch)
{
	int64_t t0 = mono_ms();
	unsigned holder = 0;
	bool said = false;
	for (;;) {
		int rc = ol_cluster_serve_acquire(cs->c, pool, SET_INDEX, epoch, cs->layout_rev,
						  &holder);
		if (!rc) {
			if (said)
				ol_info("cluster: node %u stopped serving after %lld ms: this node "
					"serves now",
					holder, (long long)(mono_ms() - t0));
			return 0;
		}
		if (rc == -ENOENT || is_stopping(cs))
			return -ENOENT;
		if (rc == -ESTALE) {
			bool warned = true, removed = false;
			if (read_layout_now(cs, &warned, &removed) == 0) {
				if (pool != atomic_load(&cs->serve_pool))
					return -ESTALE;
				if (epoch <= (uint64_t)cs->serve_rev) { /* moved away and back */
					(void)ol_cluster_lead_renew(cs->c, pool, SET_INDEX, epoch);
					return -ESTALE;
				}
				continue;
			}
		}
		if (rc == -EBUSY && !said) {
			ol_info(
			    "cluster: waiting for node %u to stop serving before this node serves "
			    "(it stops when it reads the layout; a node killed, frozen or cut off "
			    "stops with its lease, within %u s)",
			    holder, cs->cfg->cluster_lease_ttl_s);
			said = true;
		}
		int64_t next = mono_ms() + SERVE_TRY_MS;
		while (!is_stopping(cs) && mono_ms() < next)
			wait_change(cs, (int)(next - mono_ms()) + 1);
	}
}

/* The settings of a store this node writes. Other nodes read it (read_any): a version it
 * replaces keeps its shard files for [cluster] reclaim_delay_ms, so their reads of it can
 * finish. And its periodic orphan sweep ([storage] orphan_sweep_secs). */
static void
serving_opts(struct cstore *cs, struct ol_store *st)
{
	if (cs->cfg->cluster_read_any)
		ol_store_set_reclaim_delay(st, cs->cfg->cluster_reclaim_delay_ms);
	/* the garbage of a crash: a killed leader's queued reclaims, a killed follower's files */
	ol_store_set_sweep(st, cs->cfg->orphan_sweep_secs, cs->cfg->orphan_grace_secs);
}

/* This node leads set pool.0 at epoch: serve the store when that is the serving set. The
 * layout is read first (a node elected in the second the serving set moved must not serve the
 * set it is leaving). An epoch not above serve_rev was held before the serving set moved here:
 * the key is renewed instead (the callback then brings the newer epoch, here or to another
 * node of the set), so the drives' fence ends the previous server's late commits.
 *
 * Runs on the leadership thread (or the layout poller), which the daemon's stop joins
 * (cstore_resign): the retries end when the daemon stops too, not only when leadership goes,
 * or a node leading a set it cannot open (too few peers up) would never stop on SIGTERM.
 * Caller holds swap_mu. */
static void
gained(struct cstore *cs, unsigned pool, uint64_t epoch)
{
	struct ol_store *st = NULL;
	bool warned = true, removed = false;
	int rc, tries = 0;
	(void)read_layout_now(cs, &warned, &removed); /* unreadable: the last one read */
	if (pool != atomic_load(&cs->serve_pool))
		return; /* the leader of another set serves */
	pthread_mutex_lock(&cs->mu);
	bool same = cs->st && cs->st_pool == pool && cs->epoch == epoch, other = cs->st && !same;
	pthread_mutex_unlock(&cs->mu);
	if (same)
		return;
	if (other)
		lost(cs);
	if (epoch <= (uint64_t)cs->serve_rev) {
		ol_info("cluster: set %u.0 serves the cluster now; this node's key (epoch %llu) is "
			"older than that change (revision %lld): renewing it for a newer epoch",
			pool, (unsigned long long)epoch, (long long)cs->serve_rev);
		(void)ol_cluster_lead_renew(cs->c, pool, SET_INDEX, epoch);
		return;
	}
	if (take_serving(cs, pool, epoch))
		return;
	while ((rc = open_set(cs, epoch, &st)) && ol_cluster_leads(cs->c, pool, SET_INDEX, epoch) &&
	       !is_stopping(cs)) {
		if (!tries++)
			ol_warn("cluster: leading set %u.%u but its store does not open (%s): "
				"retrying while this node leads",
				pool, SET_INDEX, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
		wait_change(cs, OPEN_RETRY_MS); /* cstore_resign wakes it */
	}
	if (rc) {
		release_serving(cs);
		return;
	}
	serving_opts(cs, st);
	ol_s3_set_store(cs->s3, st);
	heal_job_serving(cs->hj, pool, epoch); /* before the store: it may start a heal */
	ol_admin_set_store(st);
	pthread_mutex_lock(&cs->mu);
	cs->st = st;
	cs->epoch = epoch;
	cs->st_pool = pool;
	pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
	creads_leading(cs->rd, true); /* this node serves every request: its view closes */
	unsigned sets = 0;
	for (unsigned p = 0; p < cs->layout.n_pools; p++)
		if (cs->layout.pools[p].state != OL_POOL_REMOVED)
			sets += cs->layout.pools[p].n_sets;
	cs->grow_failed = 0;
	cs->served_to = cs->layout.n_pools;
	ol_info("cluster: serving set %u.%u and the other %u set(s) of %u pool(s) at epoch %llu",
		pool, SET_INDEX, sets - 1, ol_layout_live_pools(&cs->layout),
		(unsigned long long)epoch);
	drain_sync(cs);
}

/* requests in flight, after new ones stopped: wait until they end or ms pass (true: none) */
static bool
wait_users(struct cstore *cs, int ms)
{
	int64_t end = mono_ms() + ms;
	pthread_mutex_lock(&cs->mu);
	while (cs->users && (ms < 0 || mono_ms() < end)) {
		pthread_mutex_unlock(&cs->mu);
		wait_change(cs, ms < 0 ? 1000 : (int)(end - mono_ms()) + 1);
		pthread_mutex_lock(&cs->mu);
	}
	bool none = cs->users == 0;
	pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
	return none;
}

/* Stop serving: new requests go elsewhere at once (st gone; ol_cluster_leads may be false
 * already), the drain stops, the requests in flight end, the store closes, and the serving key
 * is released so the next server starts. A request in flight longer than LOST_GRACE_MS (a
 * slow upload) does not hold the next server back: the key is released then, and such a
 * request's commit is refused by the drives the next server fences (503, retried); a read
 * still in flight began before the next server served, so it may return what it read.
 * Caller holds swap_mu. */
static void
lost(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	struct ol_store *st = cs->st;
	unsigned pool = cs->st_pool;
	unsigned long long epoch = (unsigned long long)cs->epoch;
	cs->st = NULL;
	pthread_mutex_unlock(&cs->mu);
	int64_t t0 = mono_ms();
	drain_stop(cs);
	bool early = !wait_users(cs, (int)(LOST_GRACE_MS - (mono_ms() - t0)));
	if (early) {
		ol_warn("cluster: requests still in flight on set %u.%u %d ms after it stopped "
			"serving here: the next server starts now (their commits are fenced)",
			pool, SET_INDEX, LOST_GRACE_MS);
		release_serving(cs);
		if (is_stopping(cs) && cs->cut) {
			ol_warn("cluster: stopping: the connections of the requests still in "
				"flight are closed");
			cs->cut(cs->cut_arg);
		}
		(void)wait_users(cs, -1);
	}
	if (st) {
		ol_admin_set_store(NULL);
		ol_s3_set_store(cs->s3, NULL);
		ol_store_close(st);
		ol_info("cluster: closed the store of set %u.%u", pool, SET_INDEX);
	}
	heal_job_stopped(cs->hj); /* the end of its heal run is recorded */
	/* nothing of it runs now (requests, drain, heal): the next server may start */
	if (!early)
		release_serving(cs);
	if (st)
		creads_leading(cs->rd, false); /* GET and HEAD served here again, from a view */
	if (st)
		ol_info("cluster: set %u.%u at epoch %llu is served no more here: the serving key "
			"is released (%lld ms after new requests stopped)",
			pool, SET_INDEX, epoch, (long long)(mono_ms() - t0));
}

/* The layout grew (caller holds swap_mu): open the new pools beside the store served, then
 * swap in the store of them all; requests wait for the swap (as on a leadership change) only
 * until the ones in flight end. Pools that do not open yet (their nodes not up) are tried
 * again at the next poll while the pools open serve on. */
static void
grow(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	struct ol_store *old = cs->st, *add = NULL, *st = NULL;
	uint64_t epoch = cs->epoch;
	pthread_mutex_unlock(&cs->mu);
	unsigned have = cs->served_to, want = cs->layout.n_pools;
	if (!old || have >= want) {
		if (old)
			pool_weights(cs, old); /* members come and go: their free space too */
		return;
	}
	int rc = open_pools(cs, have, want, epoch, &add);
	if (rc) {
		if (cs->grow_failed != want)
			ol_warn(
			    "cluster: pool(s) %u..%u of the layout do not open yet (%s): the %u "
			    "pool(s) open serve on; retrying",
			    have, want - 1, strerror(rc < 0 && rc > -4096 ? -rc : EIO), have);
		cs->grow_failed = want;
		return;
	}
	drain_stop(cs); /* it runs on old, which the swap takes over */
	pthread_mutex_lock(&cs->mu);
	cs->st = NULL; /* new requests wait (route) */
	while (cs->users)
		pthread_cond_wait(&cs->cv, &cs->mu);
	pthread_mutex_unlock(&cs->mu);
	ol_admin_set_store(NULL);
	ol_s3_set_store(cs->s3, NULL);
	struct ol_store *parts[2] = {old, add};
	rc = ol_store_pools(parts, 2, cs->layout.deployment_id, &st);
	if (rc) {
		ol_err("cluster: cannot add the new pools to the store (%s): opening it again",
		       strerror(-rc));
		gained(cs, cs->st_pool, epoch);
		return;
	}
	pool_weights(cs, st);
	serving_opts(cs, st);
	ol_s3_set_store(cs->s3, st);
	/* a heal the swap stopped was recorded running: the record is read again and it resumes */
	heal_job_serving(cs->hj, cs->st_pool, epoch);
	ol_admin_set_store(st);
	pthread_mutex_lock(&cs->mu);
	cs->st = st;
	pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
	cs->grow_failed = 0;
	cs->served_to = want;
	ol_info("cluster: serving %u pools (%u added) at epoch %llu",
		ol_layout_live_pools(&cs->layout), want - have, (unsigned long long)epoch);
	drain_sync(cs);
}

/* the layout read again: take it when it adds pools to ours or advances pools' states
 * (draining, removed); *removed when a pool served was removed (caller holds swap_mu) */
static void
take_layout(struct cstore *cs, struct ol_layout *nl, bool *warned, bool *removed)
{
	unsigned sets = 0;
	for (unsigned p = 0; p < nl->n_pools; p++)
		sets += nl->pools[p].n_sets;
	if (ol_layout_follows(&cs->layout, nl) && nl->n_pools <= MAX_POOLS && sets <= MAX_SETS) {
		if (ol_layout_extends(&cs->layout, nl) && nl->n_pools == cs->layout.n_pools)
			return; /* unchanged */
		if (nl->n_pools > cs->layout.n_pools)
			ol_info("cluster: the layout grew from %u to %u pools (`openlake cluster "
				"join`)",
				cs->layout.n_pools, nl->n_pools);
		for (unsigned p = 0; p < cs->layout.n_pools; p++) {
			unsigned a = cs->layout.pools[p].state, b = nl->pools[p].state;
			if (a != b)
				ol_info("cluster: pool %u of the layout is %s now (was %s)", p,
					ol_layout_state_name(b), ol_layout_state_name(a));
			if (b == OL_POOL_REMOVED && a != b && p < cs->served_to)
				*removed = true;
		}
		ol_layout_fini(&cs->layout);
		cs->layout = *nl;
		memset(nl, 0, sizeof(*nl));
		creads_layout(cs->rd, &cs->layout); /* the read-only view opens its pools again */
		return;
	}
	if (!ol_layout_follows(nl, &cs->layout) && !*warned) {
		ol_warn("cluster: the layout in etcd changed in a way a running node does not take "
			"(only pools added or drained, at most %d sets in %d pools, are): serving "
			"the layout it started with; restart the node to read it",
			MAX_SETS, MAX_POOLS);
		*warned = true;
	}
}

/* a pool of the store was removed from the layout: open the store again without it (requests
 * wait for the swap as on a leadership change). Caller holds swap_mu. */
static void
reopen(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	uint64_t epoch = cs->epoch;
	unsigned pool = cs->st_pool;
	bool serving = cs->st != NULL;
	pthread_mutex_unlock(&cs->mu);
	if (!serving)
		return;
	lost(cs);
	gained(cs, pool, epoch);
}

/* whether layout l lets a node that does not serve write the data of PUTs (write_any) */
static bool
writes_here(const struct ol_config *cfg, const struct ol_layout *l)
{
	if (!cfg->cluster_write_any)
		return false;
	for (unsigned p = 0; p < l->n_pools; p++)
		if (l->pools[p].state == OL_POOL_DRAINING)
			return false;
	return true;
}

/* local_writes follows the layout this node took: said when it changes, as the reason a
 * follower's PUTs stop (or start again) being written here (caller holds swap_mu) */
static void
writes_follow(struct cstore *cs)
{
	bool w = writes_here(cs->cfg, &cs->layout);
	if (atomic_exchange(&cs->local_writes, w) == w || !cs->cfg->cluster_write_any)
		return;
	if (w)
		ol_info("cluster: no pool drains: this node writes the data of PUTs again "
			"(write_any)");
	else
		ol_info("cluster: pool %d drains: PUTs through this node go whole to the serving "
			"leader until it ends (write_any waits)",
			ol_layout_draining(&cs->layout));
}

/* The layout nl read at rev, taken (caller holds swap_mu; nl is finished here): pools added are
 * followed by the leadership thread, and the serving pool follows the pools' states; *removed:
 * a pool served was removed. A read older than the one taken last is dropped. */
static void
apply_layout(struct cstore *cs, struct ol_layout *nl, int64_t rev, bool *warned, bool *removed)
{
	if (rev < cs->layout_rev) { /* read before another thread's read taken meanwhile */
		ol_layout_fini(nl);
		return;
	}
	take_layout(cs, nl, warned, removed);
	ol_layout_fini(nl);
	writes_follow(cs);
	cquorum_layout(cs->q, &cs->layout); /* the serving set may have moved */
	cs->layout_rev = rev;
	(void)ol_cluster_lead_follow(cs->c, &cs->layout);
	unsigned want = ol_layout_serving_pool(&cs->layout), was = atomic_load(&cs->serve_pool);
	if (want != was) {
		ol_info("cluster: the leader of set %u.0 serves the cluster from now on (was set "
			"%u.0: pool %u is %s; layout revision %lld)",
			want, was, was, ol_layout_state_name(cs->layout.pools[was].state),
			(long long)rev);
		cs->serve_rev = rev;
		atomic_store(&cs->serve_pool, want);
	}
	/* serve_pool is this read's now: serve_here compares it with the set served, so the
	 * watch's halt is not needed any more (a layout the node did not take serves on) */
	int64_t h = atomic_load(&cs->halt_rev);
	if (h && rev >= h)
		atomic_compare_exchange_strong(&cs->halt_rev, &h, 0);
}

/* The layout as etcd has it now, taken (caller holds swap_mu; see apply_layout). 0, or -errno
 * (the layout kept). */
static int
read_layout_now(struct cstore *cs, bool *warned, bool *removed)
{
	struct ol_layout nl;
	int64_t rev = 0;
	int rc = ol_cluster_read_layout_rev(cs->c, &nl, &rev);
	if (!rc)
		apply_layout(cs, &nl, rev, warned, removed);
	return rc;
}

/* After a layout read: this node stops serving a set that no longer serves, and starts
 * serving (or renews its key for) the serving set it leads. Caller holds swap_mu. */
static void
follow_serving(struct cstore *cs)
{
	unsigned want = atomic_load(&cs->serve_pool);
	pthread_mutex_lock(&cs->mu);
	bool serving = cs->st != NULL, moved = serving && cs->st_pool != want;
	pthread_mutex_unlock(&cs->mu);
	if (moved) {
		ol_info("cluster: set %u.0 serves the cluster now: this node stops serving", want);
		lost(cs);
		serving = false;
	}
	struct ol_cluster_leader_info li;
	if (!serving && ol_cluster_leader(cs->c, want, SET_INDEX, &li) == 0 && li.is_self)
		gained(cs, want, li.epoch);
}

/* The <prefix>offline value for the store this node serves (layout.h, ol_offline_encode:
 * which of its drives are offline now), when it differs from the last one put; NULL when not
 * serving or unchanged. Caller holds swap_mu (the store stays). */
static char *
offline_value(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	struct ol_store *st = cs->st;
	uint64_t epoch = cs->epoch;
	unsigned pool = cs->st_pool;
	pthread_mutex_unlock(&cs->mu);
	if (!st)
		return NULL;
	int n = ol_store_drive_count(st);
	bool *off = ol_xcalloc(n > 0 ? (size_t)n : 1, sizeof(*off));
	n = ol_store_drives_offline(st, off, n);
	char *v = ol_offline_encode(epoch, pool, cs->served_to, off, (unsigned)n);
	free(off);
	if (v && cs->offline_put && strcmp(v, cs->offline_put) == 0) {
		free(v);
		return NULL;
	}
	return v;
}

/* put v (offline_value's) as <prefix>offline: the followers writing PUTs' data skip a drive
 * their views lack only while this says the leader lacks it too. Not under swap_mu (an etcd
 * call); a failed put is tried again at the next poll. */
static void
offline_put(struct cstore *cs, char *v)
{
	int rc = ol_cluster_put(cs->c, "offline", v);
	if (rc) {
		free(v);
		return;
	}
	free(cs->offline_put);
	cs->offline_put = v;
}

/* A serving leader whose process is gone (a crash, kill -9, OOM) holds the serving set until
 * its lease runs out (lease_ttl_s): every write waits that long. Its host answers a connect to
 * its S3 port with a reset then, which a frozen or cut-off leader never does (its port
 * accepts, or the packets are lost): refused on two probes DEAD_APART_MS apart, the leader's
 * lease is revoked, and the next leader campaigns at once (docs/cluster.md, "A dead leader").
 * The poller's, on a node that does not serve; no lock held (a connect and an etcd call). A
 * host that answers resets at once: the connect's short bound only keeps a lost host from
 * holding up the poller's other steps. */
static void
dead_leader_check(struct cstore *cs)
{
	struct ol_cluster_leader_info li;
	if (!cs->cfg->cluster_revoke_dead_leader ||
	    ol_cluster_leader(cs->c, atomic_load(&cs->serve_pool), SET_INDEX, &li) || !li.epoch ||
	    li.is_self || li.node == cs->cfg->self_id || !li.s3_addr[0] || li.lease <= 0) {
		cs->dead_since_ms = 0;
		return;
	}
	if (li.epoch != cs->dead_epoch) {
		cs->dead_epoch = li.epoch;
		cs->dead_since_ms = 0;
	}
	int fd = ol_io_connect(li.s3_addr, DEAD_PROBE_MS);
	if (fd >= 0)
		close(fd);
	if (fd != -ECONNREFUSED) {
		cs->dead_since_ms = 0;
		return;
	}
	int64_t now = mono_ms();
	if (!cs->dead_since_ms) {
		cs->dead_since_ms = now;
		return;
	}
	if (now - cs->dead_since_ms < DEAD_APART_MS)
		return;
	cs->dead_since_ms = 0;
	int rc = ol_cluster_revoke(cs->c, li.lease);
	if (rc == -ENOENT) /* gone already: it lapsed, or another node revoked it */
		return;
	if (rc) {
		ol_warn(
		    "cluster: the serving leader (node %u, %s) refuses connections: its process "
		    "is gone, but revoking its lease failed (%s): the next leader serves at the "
		    "lease's end",
		    li.node, li.s3_addr, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
		return;
	}
	atomic_fetch_add(&cs->dead_revoked, 1);
	ol_warn("cluster: the serving leader (node %u, %s, epoch %llu) refuses connections on "
		"its S3 port twice %d ms apart: its process is gone; its lease %lld is revoked, so "
		"the next leader serves now rather than at the lease's end",
		li.node, li.s3_addr, (unsigned long long)li.epoch, DEAD_APART_MS,
		(long long)li.lease);
}

/* ol-cstore-layout: reads the layout key every LAYOUT_POLL_MS, takes pools added to it, and
 * (when this node serves) adds them to the store and keeps the pools' weights current */
static void *
poll_main(void *arg)
{
	struct cstore *cs = arg;
	bool warned = false, woken = false;
	int64_t next_read = 0;
	while (!is_stopping(cs)) {
		int64_t next = mono_ms() + LAYOUT_POLL_MS;
		woken = false;
		while (!is_stopping(cs) && mono_ms() < next &&
		       !(woken = atomic_exchange(&cs->poll_now, 0)))
			wait_change(cs, (int)(next - mono_ms()) + 1);
		woken = woken || atomic_exchange(&cs->poll_now, 0);
		bool removed = false;
		if (is_stopping(cs))
			continue;
		/* the watch wakes this thread on every change; the read every LAYOUT_READ_MS is
		 * for a change a broken watch stream missed. Read before swap_mu is taken: a loss
		 * of the set (on_lead, at the lease bound) must not wait for an etcd call that
		 * runs to its deadline while etcd hangs */
		struct ol_layout nl;
		int64_t rev = 0;
		bool read = woken || !cs->watcher_started || mono_ms() >= next_read;
		if (read && ol_cluster_read_layout_rev(cs->c, &nl, &rev)) {
			next_read = 0;
			continue;
		}
		pthread_mutex_lock(&cs->swap_mu);
		if (read) {
			apply_layout(cs, &nl, rev, &warned, &removed);
			next_read = mono_ms() + LAYOUT_READ_MS;
		}
		if (!is_stopping(cs))
			follow_serving(cs);
		pthread_mutex_lock(&cs->mu);
		bool serving = cs->st != NULL;
		pthread_mutex_unlock(&cs->mu);
		if (!serving)
			(void)ol_cluster_serve_release(cs->c); /* one that failed before */
		if (removed && !is_stopping(cs))
			reopen(cs);
		if (!is_stopping(cs))
			grow(cs);
		if (!is_stopping(cs))
			drain_sync(cs);
		drain_report(cs, false);
		if (!is_stopping(cs))
			drain_finish(cs);
		if (!is_stopping(cs))
			heal_job_tick(cs->hj); /* under swap_mu: the store does not go meanwhile */
		char *offline = is_stopping(cs) ? NULL : offline_value(cs);
		pthread_mutex_unlock(&cs->swap_mu);
		if (offline)
			offline_put(cs, offline);
		if (!serving && !is_stopping(cs))
			dead_leader_check(cs);
	}
	return NULL;
}

/* the layout key changed: a change that moves the serving set away from the set this node
 * serves halts its serving now; the poller is woken to act on any change */
static int
on_layout(void *arg, const char *v, size_t len, int64_t rev)
{
	struct cstore *cs = arg;
	struct ol_layout l;
	if (!v || ol_layout_from_json(v, len, &l))
		return 0;
	unsigned want = ol_layout_serving_pool(&l);
	ol_layout_fini(&l);
	pthread_mutex_lock(&cs->mu);
	if (cs->st && cs->st_pool != want && rev > cs->layout_rev && !atomic_load(&cs->halt_rev)) {
		atomic_store(&cs->halt_rev, rev);
		ol_info("cluster: the layout (revision %lld) moves the serving set to %u.0: this "
			"node admits no more requests",
			(long long)rev, want);
	}
	atomic_store(&cs->poll_now, 1);
	pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
	return 0;
}

static void *
watch_main(void *arg)
{
	struct cstore *cs = arg;
	(void)ol_cluster_watch(cs->c, "layout", on_layout, cs, &cs->watch_stop);
	return NULL;
}

static void
on_lead(void *arg, unsigned pool, unsigned set, uint64_t epoch, bool gain)
{
	struct cstore *cs = arg;
	if (set != SET_INDEX)
		return;
	pthread_mutex_lock(&cs->swap_mu);
	pthread_mutex_lock(&cs->mu);
	bool mine = cs->st && cs->st_pool == pool && cs->epoch == epoch;
	pthread_mutex_unlock(&cs->mu);
	if (gain)
		gained(cs, pool, epoch);
	else if (mine)
		lost(cs);
	pthread_mutex_unlock(&cs->swap_mu);
	pthread_mutex_lock(&cs->mu);
	pthread_cond_broadcast(&cs->cv); /* waiting requests look again */
	pthread_mutex_unlock(&cs->mu);
}

/* another node leads the serving set (as etcd last said): creads opens its first view then */
static bool
other_serves(void *arg)
{
	struct cstore *cs = arg;
	struct ol_cluster_leader_info li;
	return ol_cluster_leader(cs->c, atomic_load(&cs->serve_pool), SET_INDEX, &li) == 0 &&
	       li.epoch && li.node != cs->cfg->self_id;
}

int
cstore_new(const struct ol_config *cfg, struct ol_cluster *c, const struct ol_layout *l,
	   struct ol_s3_server *s3, struct cstore **out)
{
	struct cstore *cs = ol_xcalloc(1, sizeof(*cs));
	cs->cfg = cfg;
	cs->c = c;
	cs->s3 = s3;
	cs->layout = *l; /* taken over */
	atomic_store(&cs->serve_pool, ol_layout_serving_pool(l));
	atomic_store(&cs->local_writes, writes_here(cfg, l));
	cs->wait_ms = (int)cfg->cluster_lease_ttl_s * 1000 + 2000;
	if (cs->wait_ms > 15000)
		cs->wait_ms = 15000;
	ol_s3_endpoint_names(cfg->s3_addr, cfg->s3_domains, cs->endpoint_host,
			     sizeof(cs->endpoint_host));
	static const char label[] = "openlake forwarded client v1";
	unsigned kl = 0;
	if (!HMAC(EVP_sha256(), cfg->cluster_secret, (int)strlen(cfg->cluster_secret),
		  (const uint8_t *)label, sizeof(label) - 1, cs->client_key, &kl) ||
	    kl != sizeof(cs->client_key)) {
		free(cs);
		return -EIO;
	}
	/* with [s3_tls] every node's S3 port speaks TLS: so does the hop to the leader, which
	 * checks the leader's certificate ([cluster] tls_ca, else this node's own certificate and
	 * client CA) and shows this node's certificate when the leader asks for one */
	const struct ol_config_tls *t = &cfg->s3_tls;
	struct ol_http_proxy_opts po = {
	    .connect_timeout_ms = 2000,
	    .io_timeout_ms = 30000,
	    .client_key = cs->client_key,
	    .tls = t->cert_path[0] != 0,
	    .tls_ca = {cfg->cluster_tls_ca[0] ? cfg->cluster_tls_ca : NULL,
		       cfg->cluster_tls_ca[0] ? NULL : t->cert_path,
		       cfg->cluster_tls_ca[0] ? NULL : t->client_ca},
	    .tls_cert = t->cert_path,
	    .tls_key = t->key_path};
	int rc = ol_http_proxy_new(&po, &cs->proxy);
	if (rc) {
		if (po.tls)
			ol_err(
			    "cluster: the TLS context for forwarding to the leader does not load "
			    "(%s): check [s3_tls] cert_path / key_path and [cluster] tls_ca",
			    strerror(-rc));
		free(cs);
		return rc;
	}
	pthread_mutex_init(&cs->mu, NULL);
	pthread_mutex_init(&cs->swap_mu, NULL);
	cs->hj = heal_job_new(cfg, c);
	cs->cw = cwrites_new(cfg, c, &cs->serve_pool, &cs->local_writes, cs->wait_ms);
	cs->rd = creads_new(cfg, c, &cs->layout, other_serves, cs,
			    cfg->cluster_write_any ? cwrites_commit : NULL, cs->cw);
	ol_cond_init_mono(&cs->cv);
	*out = cs;
	return 0;
}

static void
commit_metrics(struct ol_strbuf *b, void *arg)
{
	struct cstore *cs = arg;
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_cluster_commits_served_total Commits of writes other nodes wrote "
	    "(write_any) that this node ran as the serving leader.\n"
	    "# TYPE openlake_cluster_commits_served_total counter\n"
	    "openlake_cluster_commits_served_total %llu\n"
	    "# HELP openlake_cluster_commits_refused_total Such commits refused because this "
	    "node did not serve the store then (the writer sends them to the next leader).\n"
	    "# TYPE openlake_cluster_commits_refused_total counter\n"
	    "openlake_cluster_commits_refused_total %llu\n"
	    "# HELP openlake_cluster_dead_leader_revokes_total Leases of serving leaders whose "
	    "process was gone (their S3 port refused connections) that this node revoked.\n"
	    "# TYPE openlake_cluster_dead_leader_revokes_total counter\n"
	    "openlake_cluster_dead_leader_revokes_total %llu\n",
	    (unsigned long long)atomic_load(&cs->commits_served),
	    (unsigned long long)atomic_load(&cs->commits_refused),
	    (unsigned long long)atomic_load(&cs->dead_revoked));
}

int
cstore_start(struct cstore *cs)
{
	ol_metrics_register(commit_metrics, cs);
	/* a node campaigns for the serving set only while it reaches a write quorum of its
	 * drives, and its leader gives it up after [cluster] quorum_loss_s without one */
	if (cquorum_start(cs->cfg, cs->c, &cs->q) == 0) {
		cquorum_layout(cs->q, &cs->layout);
		ol_cluster_lead_gate(cs->c, cquorum_may_lead, cs->q);
	} else {
		ol_warn("cluster: cannot start the write quorum probe: this node campaigns and "
			"leads without it");
	}
	int rc = ol_cluster_lead_start(cs->c, &cs->layout, on_lead, cs);
	if (rc)
		return rc;
	creads_start(cs->rd, cs->s3);
	if (pthread_create(&cs->watcher, NULL, watch_main, cs) == 0) {
		pthread_setname_np(cs->watcher, "ol-cstore-watch");
		cs->watcher_started = true;
	} else {
		ol_warn("cluster: cannot start the layout watch: a move of the serving set is "
			"seen at the next layout read (each second)");
	}
	if (pthread_create(&cs->poller, NULL, poll_main, cs) == 0) {
		pthread_setname_np(cs->poller, "ol-cstore-lay");
		cs->poller_started = true;
	} else {
		ol_warn("cluster: cannot start the layout poller: a pool added to the layout is "
			"served after a restart");
	}
	return 0;
}

/* this node serves the store now: true with the caller counted in as a user (the store is not
 * closed under it until store_give) */
static bool
store_take(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	bool ok = cs->st && !atomic_load(&cs->halt_rev) &&
		  cs->st_pool == atomic_load(&cs->serve_pool) &&
		  ol_cluster_leads(cs->c, cs->st_pool, SET_INDEX, cs->epoch);
	if (ok)
		cs->users++;
	pthread_mutex_unlock(&cs->mu);
	return ok;
}

static void
store_give(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	if (--cs->users == 0)
		pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
}

/* serve r on this node's store when it leads now; false when it does not */
static bool
serve_here(struct cstore *cs, struct ol_http_req *r)
{
	if (!store_take(cs))
		return false;
	/* forwarded: policies (aws:SourceIp, aws:SecureTransport) and SSE-C's TLS rule see the
	 * client the forwarding node vouched for, not that node */
	const char *was_peer = r->peer;
	bool was_tls = r->tls, tls;
	char ip[64], peer[80];
	if (ol_http_proxy_vouched(r, cs->client_key, ip, sizeof(ip), &tls) == 0) {
		snprintf(peer, sizeof(peer), strchr(ip, ':') ? "[%s]:0" : "%s:0", ip);
		r->peer = peer;
		r->tls = tls;
	}
	ol_s3_handle(r, cs->s3);
	r->peer = was_peer;
	r->tls = was_tls;
	store_give(cs);
	return true;
}

int
cstore_commit_serve(void *arg, const uint8_t *req, size_t len, uint8_t *reply, size_t cap,
		    size_t *rlen)
{
	struct cstore *cs = arg;
	struct ol_obj_info info;
	uint8_t buf[OL_STORE_INFO_WIRE];
	*rlen = 0;
	if (!store_take(cs)) {
		atomic_fetch_add(&cs->commits_refused, 1);
		return -ESTALE; /* not serving (yet, or any more): the writer tries again */
	}
	memset(&info, 0, sizeof(info));
	int rc = ol_s3_commit_remote(cs->s3, req, len, &info);
	store_give(cs);
	atomic_fetch_add(&cs->commits_served, 1);
	if (rc)
		return rc;
	size_t n = ol_store_info_encode(&info, buf);
	if (n > cap) /* applied, and no room for its answer: as a lost answer to the writer */
		return -ETIMEDOUT;
	memcpy(reply, buf, n);
	*rlen = n;
	return 0;
}

static void
slow_down(struct ol_http_req *r, const char *why)
{
	char body[1024];
	struct ol_http_error e = {.kind = OL_HTTP_ERR_BUSY,
				  .status = 503,
				  .message = why,
				  .body = body,
				  .body_cap = sizeof(body)};
	ol_s3_http_error(&e, NULL);
	struct ol_http_header h[] = {
	    {"Retry-After", RETRY_AFTER_SECS},
	    {"Content-Type", e.content_type ? e.content_type : "text/plain"}};
	if (ol_http_respond(r, 503, h, 2, (int64_t)e.body_len) == 0)
		(void)ol_http_write(r, body, e.body_len);
	(void)ol_http_finish(r);
}

static int64_t
mono_ms(void)
{
	return (int64_t)ol_clock_ms();
}

/* a configuration error waiting does not mend: said at most once a minute */
static void
bad_cert(unsigned node, const char *addr)
{
	static _Atomic int64_t last = -60000;
	int64_t now = mono_ms(), was = atomic_load(&last);
	if (now - was < 60000 || !atomic_compare_exchange_strong(&last, &was, now))
		return;
	ol_warn("cluster: the TLS certificate of the leader (node %u, %s) does not verify against "
		"[cluster] tls_ca (or, without it, this node's own [s3_tls] cert_path and "
		"client_ca), or does not name that address: requests through this node answer "
		"503 until it does",
		node, addr);
}

static bool
is_read(const struct ol_http_req *r)
{
	return strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
}

/* a query a plain object PUT may carry: none, an UploadPart's partNumber and uploadId (both),
 * a presigned URL's X-Amz-* parameters, an SDK's x-id; any other parameter is a sub-resource
 * (?tagging, ?acl, ?retention, ...), which stays with the leader */
static bool
query_plain(const char *q)
{
	unsigned part = 0, upload = 0;
	for (const char *p = q ? q : ""; *p;) {
		size_t n = strcspn(p, "=&");
		if (n == 10 && strncmp(p, "partNumber", n) == 0)
			part++;
		else if (n == 8 && strncmp(p, "uploadId", n) == 0)
			upload++;
		else if (n && !(n == 4 && strncmp(p, "x-id", n) == 0) &&
			 !(n > 6 && strncmp(p, "X-Amz-", 6) == 0))
			return false;
		p += strcspn(p, "&");
		if (*p)
			p++;
	}
	return part == upload && part <= 1;
}

/* A client's plain PutObject or UploadPart (no copy source, no sub-resource but the part's):
 * the writes whose data a node that does not serve writes itself (write_any). A PUT without
 * a key (CreateBucket) is not one. */
static bool
is_object_put(struct cstore *cs, const struct ol_http_req *r)
{
	struct ol_s3_route rt;
	if (strcmp(r->method, "PUT") != 0 || ol_http_header(r, "x-amz-copy-source") ||
	    !query_plain(r->query))
		return false;
	return ol_s3_route(ol_http_header(r, "host"), cs->endpoint_host, r->path, &rt) == 0 &&
	       rt.key_len > 0;
}

/* a GET or HEAD of a bucket rather than of a key: a listing, ListObjectVersions,
 * ListMultipartUploads, a bucket sub-resource (not ListBuckets, which reads the buckets' home set
 * only) */
static bool
is_bucket_read(struct cstore *cs, const struct ol_http_req *r)
{
	struct ol_s3_route rt;
	return ol_s3_route(ol_http_header(r, "host"), cs->endpoint_host, r->path, &rt) == 0 &&
	       rt.bucket[0] && rt.key_len == 0;
}

/* this node serves the writable store now (serve_here would take the request) */
static bool
leads_now(struct cstore *cs)
{
	pthread_mutex_lock(&cs->mu);
	bool st = cs->st != NULL;
	pthread_mutex_unlock(&cs->mu);
	return st;
}

/* serve (when `here`: this node leads) or forward r to the leader; 503 when neither works in
 * time */
static void
route(struct cstore *cs, struct ol_http_req *r, bool here)
{
	int64_t end = mono_ms() + cs->wait_ms;
	const char *why = "No node leads this erasure set now; retry shortly.";
	/* A request another node forwarded here (its vouch verifies) is served here or answered
	 * 503, never forwarded again: while the nodes' views of the serving set differ (a move
	 * of the serving set, a leader change not seen everywhere yet) two nodes could pass it
	 * back and forth, each hop adding its headers, until the request is too large. */
	char vip[64];
	bool vtls,
	    forwarded = ol_http_proxy_vouched(r, cs->client_key, vip, sizeof(vip), &vtls) == 0;
	/* read_any: a GET or HEAD from a client is served here on the read-only view while
	 * another node serves (or none does yet); never a forwarded one, never a write */
	if (here && !forwarded && is_read(r) && !leads_now(cs) &&
	    creads_serve(cs->rd, r, is_bucket_read(cs, r)))
		return;
	/* write_any: a client's plain PutObject or UploadPart is written here, on the view that
	 * writes shard files, and only its commit goes to the leader (cluster_writes.h); while a
	 * pool drains (local_writes false) the view counts it forwarded */
	if (here && !forwarded && cs->cfg->cluster_write_any && is_object_put(cs, r) &&
	    !leads_now(cs) && creads_write(cs->rd, r, atomic_load(&cs->local_writes)))
		return;
	for (;;) {
		if (here && serve_here(cs, r))
			return;
		if (forwarded) {
			why =
			    "The node this request was forwarded to does not serve the cluster now "
			    "(the serving set is moving); retry shortly.";
			/* while this node leads the serving set it is about to serve (it waits for
			 * the previous server to stop): the request waits as for a leader; else a
			 * second for this node to take the serving set over, if it is about to */
			struct ol_cluster_leader_info me;
			bool about = ol_cluster_leader(cs->c, atomic_load(&cs->serve_pool),
						       SET_INDEX, &me) == 0 &&
				     me.is_self;
			if (is_stopping(cs) ||
			    mono_ms() >= (about ? end : end - cs->wait_ms + 1000))
				break;
			wait_change(cs, 200);
			continue;
		}
		struct ol_cluster_leader_info li;
		/* never to this node itself: it may still show as leader in etcd while its
		 * lease is in doubt, and a request must not loop through our own port */
		if (ol_cluster_leader(cs->c, atomic_load(&cs->serve_pool), SET_INDEX, &li) == 0 &&
		    li.epoch && li.node != cs->cfg->self_id && li.s3_addr[0]) {
			int rc = ol_http_proxy_forward(cs->proxy, r, li.s3_addr);
			if (rc == 0)
				return;
			if (rc == -ECONNABORTED) {
				(void)ol_http_finish(r);
				return;
			}
			ol_debug("cluster: forwarding %s %s to node %u (%s): %s", r->method,
				 r->target, li.node, li.s3_addr, strerror(-rc));
			if (rc == -EKEYREJECTED)
				bad_cert(li.node, li.s3_addr);
			why =
			    "The leader of this erasure set cannot be reached now; retry shortly.";
			if (rc == -EHOSTDOWN)
				break; /* the body is spent: this request cannot go again */
		}
		if (is_stopping(cs) || mono_ms() >= end)
			break;
		wait_change(cs, 200);
	}
	slow_down(r, why);
}

void
cstore_route(struct cstore *cs, struct ol_http_req *r)
{
	route(cs, r, true);
}

void
cstore_status_json(struct cstore *cs, struct ol_strbuf *b)
{
	creads_status_json(cs->rd, b);
}

void
cstore_reload_tls(struct cstore *cs)
{
	if (!cs || !cs->cfg->s3_tls.cert_path[0])
		return;
	int rc = ol_http_proxy_reload_tls(cs->proxy);
	if (rc)
		ol_warn("cluster: the TLS files for forwarding to the leader do not load (%s): "
			"forwarding keeps the old ones; check [s3_tls] cert_path / key_path and "
			"[cluster] tls_ca",
			strerror(-rc));
	else
		ol_info("cluster: forwarding to the leader uses the reloaded TLS files");
}

/* An admin's DELETE of the heal on a node that holds no store: to the leader when one answers
 * at once (it runs the job: it cancels it there, or in the record when it runs none). When none
 * does (no leader; its key still held after a kill -9; cut off), or when the request was
 * forwarded here, false: this node cancels the job in its record (heal_job.c), since the job
 * is between two leaders exactly while none answers. One try, no wait. */
static bool
heal_cancel_forwarded(struct cstore *cs, struct ol_http_req *r)
{
	struct ol_cluster_leader_info li;
	char vip[64];
	bool vtls;
	int rc;

	if (ol_http_proxy_vouched(r, cs->client_key, vip, sizeof(vip), &vtls) == 0 ||
	    ol_cluster_leader(cs->c, atomic_load(&cs->serve_pool), SET_INDEX, &li) || !li.epoch ||
	    li.node == cs->cfg->self_id || !li.s3_addr[0])
		return false;
	rc = ol_http_proxy_forward(cs->proxy, r, li.s3_addr);
	if (rc == -ECONNABORTED)
		(void)ol_http_finish(r);
	if (rc == 0 || rc == -ECONNABORTED)
		return true;
	ol_info("cluster: an admin's cancel of the heal does not reach the leader, node %u (%s): "
		"cancelling the job in its record here",
		li.node, strerror(-rc));
	return false;
}

int
cstore_forward_admin(void *arg, struct ol_http_req *r)
{
	if (strcmp(r->method, "DELETE") == 0 && strcmp(r->path, "/openlake/admin/v1/heal") == 0)
		return heal_cancel_forwarded(arg, r) ? 1 : 0;
	route(arg, r, false);
	return 1;
}

void
cstore_resign(struct cstore *cs, void (*cut)(void *arg), void *cut_arg)
{
	if (!cs)
		return;
	pthread_mutex_lock(&cs->mu);
	cs->stopping = true;
	cs->cut = cut;
	cs->cut_arg = cut_arg;
	pthread_cond_broadcast(&cs->cv);
	pthread_mutex_unlock(&cs->mu);
	atomic_store(&cs->watch_stop, 1);
	if (cs->watcher_started) /* the flag stays until the poller, which reads it, ends */
		pthread_join(cs->watcher, NULL);
	if (cs->poller_started) {
		pthread_join(cs->poller, NULL);
		cs->poller_started = false;
	}
	cs->watcher_started = false;
	cwrites_stop(cs->cw);	  /* commits waiting for a leader give up */
	creads_stop(cs->rd);	  /* its view closes once the reads on it ended */
	cquorum_stop(cs->q);	  /* no step-down from now: the stop gives every set up */
	ol_cluster_resign(cs->c); /* runs lost(): drains and closes */
}

void
cstore_free(struct cstore *cs)
{
	if (!cs)
		return;
	heal_job_free(cs->hj);
	ol_metrics_unregister(commit_metrics, cs);
	creads_free(cs->rd);
	cwrites_free(cs->cw); /* after the view whose store commits through it */
	ol_http_proxy_free(cs->proxy);
	cquorum_free(cs->q); /* the leadership thread, its gate's caller, is stopped */
	ol_layout_fini(&cs->layout);
	free(cs->offline_put);
	pthread_mutex_destroy(&cs->mu);
	pthread_mutex_destroy(&cs->swap_mu);
	pthread_cond_destroy(&cs->cv);
	free(cs);
}
