/* cluster/leader.c - set leadership under the member lease, epochs from etcd revisions.
 * See cluster.h ("set leadership"). */
#include "cluster/cluster.h"
#include "cluster/etcd.h"
#include "cluster/internal.h"

#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The lease guard checks this node's lease bound every LEAD_TICK_MS (no etcd call, its own
 * thread: the leadership thread may wait on an etcd call up to its deadline). The leadership
 * thread reads the leader keys when the watch of <prefix>sets/ reports a change, and at least
 * every LEAD_READ_MS (a change the watch missed, a campaign that failed, a lease that came
 * back): 5 reads a second per node loaded etcd (3-4% of a core for 4 idle nodes, as much as
 * all the nodes' own idle work), and a leader's death is seen sooner through the watch. */
#define LEAD_TICK_MS 200
#define LEAD_READ_MS 1000

unsigned
ol_cluster_write_quorum(unsigned n, unsigned p)
{
	unsigned k = n > p ? n - p : 0, w = n / 2 + 1;
	if (k > w)
		w = k;
	return p + 1 > w ? p + 1 : w;
}

bool
ol_cluster_may_lead(unsigned n, unsigned p, unsigned reach, unsigned live)
{
	unsigned w = ol_cluster_write_quorum(n, p);
	return reach >= w || live < w;
}

int64_t
ol_cluster_lead_margin_ms(unsigned ttl_s)
{
	int64_t m = (int64_t)ttl_s * 1000 / 4;
	return m < 500 ? 500 : m;
}

bool
ol_cluster_lease_sure(int64_t lease, int64_t key_lease, int64_t now_ms, int64_t valid_until_ms,
		      int64_t margin_ms)
{
	return lease != 0 && lease == key_lease && now_ms + margin_ms < valid_until_ms;
}

enum ol_cluster_lead_act
ol_cluster_lead_decide(const struct ol_cluster_lead_in *in)
{
	bool lease_ok = ol_cluster_lease_sure(in->lease, in->lease, in->now_ms,
					      in->lease_valid_until_ms, in->margin_ms);
	if (in->key_present) {
		if (in->key_node == in->self_id && in->key_lease == in->lease && lease_ok &&
		    in->key_create_rev > 0)
			return OL_LEAD_LEAD;
		return OL_LEAD_FOLLOW;
	}
	return in->has_slot && lease_ok ? OL_LEAD_CAMPAIGN : OL_LEAD_NONE;
}

int
ol_cluster_leader_parse(const char *buf, size_t len, struct ol_cluster_leader_info *out)
{
	memset(out, 0, sizeof(*out));
	json_error_t e;
	json_t *o = json_loadb(buf, len, 0, &e);
	const json_t *id = json_object_get(o, "node");
	const char *s3 = json_string_value(json_object_get(o, "s3"));
	const char *rpc = json_string_value(json_object_get(o, "rpc_addr"));
	int rc = -EPROTO;
	if (!json_is_object(o) || !json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) > 65535 || !s3 || !rpc || strlen(s3) >= OL_CFG_STR ||
	    strlen(rpc) >= OL_CFG_STR)
		goto out;
	out->node = (unsigned)json_integer_value(id);
	memcpy(out->s3_addr, s3, strlen(s3) + 1);
	memcpy(out->rpc_addr, rpc, strlen(rpc) + 1);
	rc = 0;
out:
	json_decref(o);
	return rc;
}

char *
ol_cluster_leader_to_json(unsigned node, const char *s3_addr, const char *rpc_addr)
{
	json_t *o = json_pack("{s:I, s:s, s:s}", "node", (json_int_t)node, "s3", s3_addr,
			      "rpc_addr", rpc_addr);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

int
ol_cluster_read_layout(struct ol_cluster *c, int timeout_ms, struct ol_layout *out)
{
	char key[OL_CFG_STR + 16];
	snprintf(key, sizeof(key), "%slayout", c->cfg->cluster_prefix);
	int64_t end = ol_cluster_now_ms() + timeout_ms;
	for (;;) {
		struct ol_etcd_range_result r;
		int rc = ol_etcd_range(c->etcd, key, 0, 0, 0, &r);
		if (!rc) {
			rc = r.n_kvs ? ol_layout_from_json(r.kvs[0].value, r.kvs[0].value_len, out)
				     : -ENOENT;
			ol_etcd_range_result_fini(&r);
			return rc;
		}
		if (ol_cluster_now_ms() >= end)
			return -ETIMEDOUT;
		struct timespec ts = {0, 200 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

int
ol_cluster_read_layout_rev(struct ol_cluster *c, struct ol_layout *out, int64_t *mod_rev)
{
	char key[OL_CFG_STR + 16];
	struct ol_etcd_range_result r;
	int rc;

	snprintf(key, sizeof(key), "%slayout", c->cfg->cluster_prefix);
	rc = ol_etcd_range(c->etcd, key, 0, 0, 0, &r);
	if (rc)
		return rc;
	rc = r.n_kvs ? ol_layout_from_json(r.kvs[0].value, r.kvs[0].value_len, out) : -ENOENT;
	if (!rc)
		*mod_rev = r.kvs[0].mod_revision;
	ol_etcd_range_result_fini(&r);
	return rc;
}

int
ol_cluster_write_layout(struct ol_cluster *c, const struct ol_layout *l, int64_t mod_rev,
			const char *name, const char *value)
{
	char key[OL_CFG_STR + 16], key2[OL_CFG_STR + 64];
	char *js = ol_layout_to_json(l);
	struct ol_etcd_txn_result t = {0};
	int rc;

	snprintf(key, sizeof(key), "%slayout", c->cfg->cluster_prefix);
	struct ol_etcd_cmp cmp = {
	    .key = key, .target = OL_ETCD_CMP_MOD, .result = OL_ETCD_EQUAL, .number = mod_rev};
	snprintf(key2, sizeof(key2), "%s%s", c->cfg->cluster_prefix, name ? name : "");
	struct ol_etcd_op put[2] = {
	    {.type = OL_ETCD_OP_PUT, .key = key, .value = js, .value_len = js ? strlen(js) : 0},
	    {.type = OL_ETCD_OP_PUT,
	     .key = key2,
	     .value = value,
	     .value_len = value ? strlen(value) : 0}};
	rc = js ? ol_etcd_txn(c->etcd, &cmp, 1, put, name ? 2 : 1, NULL, 0, &t) : -ENOMEM;
	if (!rc && !t.succeeded)
		rc = -ECANCELED;
	ol_etcd_txn_result_fini(&t);
	free(js);
	return rc;
}

int
ol_cluster_put(struct ol_cluster *c, const char *name, const char *value)
{
	char key[OL_CFG_STR + 64];

	snprintf(key, sizeof(key), "%s%s", c->cfg->cluster_prefix, name);
	return ol_etcd_put(c->etcd, key, value, strlen(value), 0, NULL);
}

/* ---- the leadership thread ---- */

static struct ol_cluster_sets *
sets_now(struct ol_cluster *c)
{
	return __atomic_load_n(&c->sets, __ATOMIC_ACQUIRE);
}

static struct ol_cluster_set *
find_set(struct ol_cluster *c, unsigned pool, unsigned set)
{
	struct ol_cluster_sets *t = sets_now(c);
	for (unsigned i = 0; t && i < t->n; i++)
		if (t->v[i]->pool == pool && t->v[i]->set == set)
			return t->v[i];
	return NULL;
}

struct ol_cluster_set *
ol_cluster_find_set(struct ol_cluster *c, unsigned pool, unsigned set)
{
	return c ? find_set(c, pool, set) : NULL;
}

/* this node's lease now is key_lease (a node that registered again after a lapse holds a new
 * lease, and its old key is gone or going), and it surely lives */
static bool
lease_sure(struct ol_cluster *c, int64_t key_lease)
{
	return ol_cluster_lease_sure(atomic_load(&c->lease_id), key_lease, ol_cluster_now_ms(),
				     atomic_load(&c->lease_valid_until),
				     ol_cluster_lead_margin_ms(c->cfg->cluster_lease_ttl_s));
}

bool
ol_cluster_leads(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch)
{
	struct ol_cluster_set *s = c ? find_set(c, pool, set) : NULL;
	/* a node that is stopping leads nothing: its requests go to the next leader, and a
	 * gain it is still acting on (a store that does not open while it holds the key, as
	 * when the other nodes stop too) ends instead of retrying until its lease lapses */
	if (!s || !epoch || atomic_load(&s->my_epoch) != epoch || atomic_load(&c->ldr_stop))
		return false;
	return lease_sure(c, atomic_load(&s->my_lease));
}

int
ol_cluster_leader(struct ol_cluster *c, unsigned pool, unsigned set,
		  struct ol_cluster_leader_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!c || !sets_now(c))
		return -ENOENT;
	struct ol_cluster_set *s = find_set(c, pool, set);
	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&c->ldr_mu);
	*out = s->info;
	pthread_mutex_unlock(&c->ldr_mu);
	out->is_self = out->epoch && ol_cluster_leads(c, pool, set, out->epoch);
	return 0;
}

static void
set_info(struct ol_cluster *c, struct ol_cluster_set *s, const struct ol_cluster_leader_info *in)
{
	pthread_mutex_lock(&c->ldr_mu);
	s->info = *in;
	pthread_mutex_unlock(&c->ldr_mu);
}

/* ldr_act_mu: the guard and the leadership thread change my_epoch and call lead_fn one at a
 * time */
static void
act_lock(struct ol_cluster *c)
{
	pthread_mutex_lock(&c->ldr_act_mu);
}

static void
act_unlock(struct ol_cluster *c)
{
	pthread_mutex_unlock(&c->ldr_act_mu);
}

/* this node stops leading s: the request path sees it before the callback runs (caller holds
 * ldr_act_mu) */
static void
lose_locked(struct ol_cluster *c, struct ol_cluster_set *s, const char *why)
{
	uint64_t e = atomic_exchange(&s->my_epoch, 0);
	if (!e)
		return;
	ol_warn("cluster: no longer leading set %u.%u (epoch %llu): %s", s->pool, s->set,
		(unsigned long long)e, why);
	if (c->lead_fn)
		c->lead_fn(c->lead_arg, s->pool, s->set, e, false);
}

static void
lose(struct ol_cluster *c, struct ol_cluster_set *s, const char *why)
{
	act_lock(c);
	lose_locked(c, s, why);
	act_unlock(c);
}

/* This node leads s at epoch under lease, as an etcd answer said: acted on only if the lease is
 * still surely alive now, under ldr_act_mu (the answer may have taken up to the call's deadline,
 * and the guard may have given the set up meanwhile): else the next read decides again. */
static void
gain(struct ol_cluster *c, struct ol_cluster_set *s, uint64_t epoch, int64_t lease)
{
	act_lock(c);
	if (atomic_load(&s->my_epoch) == epoch)
		goto out;
	if (!lease_sure(c, lease)) {
		ol_debug("cluster: not leading set %u.%u at epoch %llu: this node's lease is not "
			 "surely alive any more",
			 s->pool, s->set, (unsigned long long)epoch);
		lose_locked(c, s, "this node's lease is not surely alive");
		goto out;
	}
	lose_locked(c, s, "a newer epoch of this node replaces it");
	struct ol_cluster_leader_info me = {.node = c->cfg->self_id, .epoch = epoch};
	char a[OL_CFG_STR + 8];
	snprintf(me.s3_addr, sizeof(me.s3_addr), "%s",
		 ol_config_advertised(c->cfg, c->cfg->s3_addr, a, sizeof(a)));
	snprintf(me.rpc_addr, sizeof(me.rpc_addr), "%s",
		 ol_config_plane_addr(c->cfg, a, sizeof(a)));
	me.lease = lease;
	set_info(c, s, &me);
	atomic_store(&s->my_lease, lease);
	atomic_store(&s->my_epoch, epoch);
	ol_info("cluster: leading set %u.%u at epoch %llu", s->pool, s->set,
		(unsigned long long)epoch);
	if (c->lead_fn)
		c->lead_fn(c->lead_arg, s->pool, s->set, epoch, true);
out:
	act_unlock(c);
}

/* create-if-absent under our lease; on success we lead at the txn's revision */
static void
campaign(struct ol_cluster *c, struct ol_cluster_set *s, int64_t lease)
{
	struct ol_etcd_cmp cmp = {
	    .key = s->key, .target = OL_ETCD_CMP_CREATE, .result = OL_ETCD_EQUAL, .number = 0};
	struct ol_etcd_op put = {.type = OL_ETCD_OP_PUT,
				 .key = s->key,
				 .value = c->ldr_value,
				 .value_len = strlen(c->ldr_value),
				 .lease = lease};
	struct ol_etcd_op get = {.type = OL_ETCD_OP_RANGE, .key = s->key};
	struct ol_etcd_txn_result t = {0};
	int rc = ol_etcd_txn(c->etcd, &cmp, 1, &put, 1, &get, 1, &t);
	if (rc) {
		ol_debug("cluster: campaign for set %u.%u: %s", s->pool, s->set, strerror(-rc));
	} else if (t.succeeded) {
		gain(c, s, (uint64_t)t.revision, lease);
	} else if (t.n_ranges && t.ranges[0].n_kvs) {
		struct ol_cluster_leader_info o;
		const struct ol_etcd_kv *kv = &t.ranges[0].kvs[0];
		if (ol_cluster_leader_parse(kv->value, kv->value_len, &o) == 0) {
			o.epoch = (uint64_t)kv->create_revision;
			o.lease = kv->lease;
			set_info(c, s, &o);
		}
	}
	ol_etcd_txn_result_fini(&t);
}

/* delete s's key if it is still the one created at epoch e: 0 (deleted, or not that key any
 * more), -errno when etcd did not answer */
static int
drop_key(struct ol_cluster *c, struct ol_cluster_set *s, uint64_t e)
{
	struct ol_etcd_cmp cmp = {.key = s->key,
				  .target = OL_ETCD_CMP_CREATE,
				  .result = OL_ETCD_EQUAL,
				  .number = (int64_t)e};
	struct ol_etcd_op del = {.type = OL_ETCD_OP_DELETE, .key = s->key};
	struct ol_etcd_txn_result t = {0};
	int rc = ol_etcd_txn(c->etcd, &cmp, 1, &del, 1, NULL, 0, &t);
	ol_etcd_txn_result_fini(&t);
	return rc;
}

/* ol_cluster_lead_step_down: stop leading now, delete the key, then tell the daemon (whose
 * loss may wait for requests in flight: the key must not wait for them, or no other node could
 * take the set meanwhile) */
static void
step_down(struct ol_cluster *c, struct ol_cluster_set *s, uint64_t e)
{
	act_lock(c);
	bool led = atomic_exchange(&s->my_epoch, 0) == e;
	if (led)
		ol_warn("cluster: no longer leading set %u.%u (epoch %llu): this node has not "
			"reached a write quorum of the set's drives for [cluster] quorum_loss_s "
			"(%u s) while other nodes may: the key is given up for a node that reaches "
			"one",
			s->pool, s->set, (unsigned long long)e, c->cfg->cluster_quorum_loss_s);
	act_unlock(c); /* not across the etcd call: the guard acts meanwhile */
	/* not deleted (etcd did not answer): the next step finds the key still ours and deletes
	 * it then, instead of leading under it again */
	if (drop_key(c, s, e) == 0)
		atomic_store(&s->step_down, 0);
	set_info(c, s, &(struct ol_cluster_leader_info){0});
	if (led && c->lead_fn) { /* the epoch is taken: nothing else reports its loss */
		act_lock(c);
		c->lead_fn(c->lead_arg, s->pool, s->set, e, false);
		act_unlock(c);
	}
}

/* the key is absent: campaign unless the gate says this node should not lead the set now */
static void
try_campaign(struct ol_cluster *c, struct ol_cluster_set *s, int64_t lease)
{
	bool may = !c->gate_fn || c->gate_fn(c->gate_arg, s->pool, s->set);
	if (may != !s->gated) {
		s->gated = !may;
		if (s->gated)
			ol_info("cluster: not campaigning for set %u.%u: this node does not reach "
				"a write quorum of the set's drives (or has not probed them yet)",
				s->pool, s->set);
		else
			ol_info("cluster: campaigning for set %u.%u again: this node reaches a "
				"write quorum of its drives",
				s->pool, s->set);
	}
	if (may)
		campaign(c, s, lease);
}

/* ol_cluster_lead_renew: give the key up and campaign again at once (a new create revision) */
static void
renew(struct ol_cluster *c, struct ol_cluster_set *s, uint64_t e, int64_t lease)
{
	atomic_store(&s->renew, 0);
	lose(c, s, "renewing its key for a newer epoch (the set became the serving set)");
	(void)drop_key(c, s, e);
	set_info(c, s, &(struct ol_cluster_leader_info){0});
	try_campaign(c, s, lease);
}

/* one set, given its key as read (kv NULL: absent) */
static void
step_set(struct ol_cluster *c, struct ol_cluster_set *s, const struct ol_etcd_kv *kv)
{
	struct ol_cluster_leader_info o = {0};
	bool parsed = kv && ol_cluster_leader_parse(kv->value, kv->value_len, &o) == 0;
	struct ol_cluster_lead_in in = {
	    .key_present = kv != NULL,
	    .key_node = parsed ? o.node : 65536,
	    .key_lease = kv ? kv->lease : 0,
	    .key_create_rev = kv ? kv->create_revision : 0,
	    .self_id = c->cfg->self_id,
	    .has_slot = s->has_slot,
	    .lease = atomic_load(&c->lease_id),
	    .now_ms = ol_cluster_now_ms(),
	    .lease_valid_until_ms = atomic_load(&c->lease_valid_until),
	    .margin_ms = ol_cluster_lead_margin_ms(c->cfg->cluster_lease_ttl_s),
	};
	switch (ol_cluster_lead_decide(&in)) {
	case OL_LEAD_LEAD:
		if (atomic_load(&s->step_down) == (uint64_t)kv->create_revision)
			step_down(c, s, (uint64_t)kv->create_revision);
		else if (atomic_load(&s->renew) == (uint64_t)kv->create_revision)
			renew(c, s, (uint64_t)kv->create_revision, in.lease);
		else
			gain(c, s, (uint64_t)kv->create_revision, kv->lease);
		return;
	case OL_LEAD_FOLLOW:
		/* the key may still be this node's, under its lease: only the lease's bound
		 * passed (etcd slow to answer its keepalives), and it leads again at the same
		 * epoch once one is answered; say so rather than name another leader */
		lose(c, s,
		     parsed && o.node == in.self_id && in.key_lease == in.lease
			 ? "this node's lease is not surely alive (its leader key stands: it leads "
			   "again at this epoch once etcd answers its keepalive)"
			 : "another leader holds the set (or this node's lease lapsed)");
		o.epoch = parsed ? (uint64_t)kv->create_revision : 0;
		o.lease = kv->lease;
		set_info(c, s, &o);
		return;
	case OL_LEAD_CAMPAIGN:
		lose(c, s, "the leader key is gone");
		set_info(c, s, &(struct ol_cluster_leader_info){0});
		try_campaign(c, s, in.lease);
		return;
	case OL_LEAD_NONE:
		lose(c, s, "this node's lease is not surely alive");
		set_info(c, s, &(struct ol_cluster_leader_info){0});
		return;
	}
}

/* the local half of leadership: a set led without a surely live lease is given up now. No
 * etcd call. Not for stopping (resign_all gives the sets up and deletes their keys). */
static void
check_leases(struct ol_cluster *c)
{
	struct ol_cluster_sets *tab = sets_now(c);
	act_lock(c);
	for (unsigned i = 0; i < tab->n; i++) {
		struct ol_cluster_set *s = tab->v[i];
		if (atomic_load(&s->my_epoch) && !lease_sure(c, atomic_load(&s->my_lease)))
			lose_locked(c, s, "this node's lease is not surely alive");
	}
	act_unlock(c);
}

static void
step_all(struct ol_cluster *c)
{
	struct ol_etcd_range_result r;
	struct ol_cluster_sets *tab = sets_now(c); /* the pools followed now */
	int rc = ol_etcd_range(c->etcd, c->sets_prefix, OL_ETCD_PREFIX, 0, 0, &r);
	if (rc) {
		/* etcd unreachable: keep what we know (the guard gives up what the lease no
		 * longer covers) */
		if (!c->ldr_guard_started)
			check_leases(c);
		return;
	}
	for (unsigned i = 0; i < tab->n && !atomic_load(&c->ldr_stop); i++) {
		const struct ol_etcd_kv *kv = NULL;
		for (size_t j = 0; j < r.n_kvs && !kv; j++)
			if (strcmp(r.kvs[j].key, tab->v[i]->key) == 0)
				kv = &r.kvs[j];
		step_set(c, tab->v[i], kv);
	}
	ol_etcd_range_result_fini(&r);
}

static void
wake(struct ol_cluster *c)
{
	pthread_mutex_lock(&c->ldr_mu);
	atomic_store(&c->ldr_dirty, 1);
	pthread_cond_broadcast(&c->ldr_cv);
	pthread_mutex_unlock(&c->ldr_mu);
}

static int
on_sets(void *arg, const struct ol_etcd_event *ev, size_t n, int64_t revision)
{
	(void)ev;
	(void)n;
	(void)revision;
	wake(arg);
	return 0;
}

/* ol-cluster-lw: the watch of <prefix>sets/ (from now: the thread reads the keys itself) */
static void *
leader_watch_main(void *arg)
{
	struct ol_cluster *c = arg;
	while (!atomic_load(&c->ldr_stop)) {
		(void)ol_etcd_watch(c->etcd, c->sets_prefix, OL_ETCD_PREFIX, 0, on_sets, c,
				    &c->ldr_stop, NULL);
		wake(c); /* compacted or failed: what it missed, the read finds */
		for (int t = 0; t < 4 && !atomic_load(&c->ldr_stop); t++) {
			struct timespec ts = {0, 50 * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

/* sleep ms, or until a stop (or, with dirty, a request for a read) */
static void
ldr_nap(struct ol_cluster *c, int64_t ms, bool dirty)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_mutex_lock(&c->ldr_mu);
	while (!atomic_load(&c->ldr_stop) && !(dirty && atomic_load(&c->ldr_dirty)) &&
	       pthread_cond_timedwait(&c->ldr_cv, &c->ldr_mu, &ts) == 0)
		;
	pthread_mutex_unlock(&c->ldr_mu);
}

/* ol-cluster-lg: the lease guard. A leader's step-down (the log line, the callback that closes
 * its store) comes at its lease bound, within a tick, also while the leadership thread waits on
 * an etcd call that runs to its deadline. */
static void *
guard_main(void *arg)
{
	struct ol_cluster *c = arg;
	while (!atomic_load(&c->ldr_stop)) {
		check_leases(c);
		ldr_nap(c, LEAD_TICK_MS, false);
	}
	return NULL;
}

/* On a clean stop: give each set up and delete its key (only if it is still ours), so the
 * others take over at once instead of after the TTL. */
static void
resign_all(struct ol_cluster *c)
{
	struct ol_cluster_sets *tab = sets_now(c);
	for (unsigned i = 0; i < tab->n; i++) {
		struct ol_cluster_set *s = tab->v[i];
		uint64_t e = atomic_load(&s->my_epoch);
		if (!e)
			continue;
		act_lock(c);
		e = atomic_load(&s->my_epoch); /* the guard may have given it up meanwhile */
		lose_locked(c, s, "stopping");
		act_unlock(c);
		if (e)
			(void)drop_key(c, s, e);
	}
}

static void *
leader_main(void *arg)
{
	struct ol_cluster *c = arg;
	int64_t next_read = 0;
	while (!atomic_load(&c->ldr_stop)) {
		int64_t now = ol_cluster_now_ms();
		if (atomic_exchange(&c->ldr_dirty, 0) || now >= next_read) {
			step_all(c);
			next_read = now + LEAD_READ_MS;
		} else if (!c->ldr_guard_started) {
			check_leases(c); /* no guard thread: between reads at least */
		}
		ldr_nap(c, LEAD_TICK_MS, true);
	}
	resign_all(c);
	return NULL;
}

static bool
node_in_set(const struct ol_layout *l, unsigned p, unsigned s, unsigned node)
{
	for (unsigned j = 0; j < l->set_drives; j++)
		if (l->pools[p].slots[(size_t)s * l->set_drives + j].node == node)
			return true;
	return false;
}

/* a deep copy (the layout lives with c) */
static int
copy_layout(const struct ol_layout *l, struct ol_layout *out)
{
	char *js = ol_layout_to_json(l);
	int rc = js ? ol_layout_from_json(js, strlen(js), out) : -ENOMEM;
	free(js);
	return rc;
}

/* A table of old's sets and those of l's pools [from, l->n_pools), published: request
 * threads and the leadership thread may look already. */
static void
publish_sets(struct ol_cluster *c, const struct ol_layout *l, unsigned from)
{
	struct ol_cluster_sets *old = sets_now(c);
	unsigned n = old ? old->n : 0, k = n;
	for (unsigned p = from; p < l->n_pools; p++)
		n += l->pools[p].n_sets;
	struct ol_cluster_sets *t = ol_xcalloc(1, sizeof(*t) + (n ? n : 1) * sizeof(t->v[0]));
	for (unsigned i = 0; old && i < old->n; i++)
		t->v[i] = old->v[i];
	for (unsigned p = from; p < l->n_pools; p++) {
		for (unsigned s = 0; s < l->pools[p].n_sets; s++) {
			struct ol_cluster_set *st = ol_xcalloc(1, sizeof(*st));
			st->pool = p;
			st->set = s;
			st->has_slot = node_in_set(l, p, s, c->cfg->self_id);
			snprintf(st->key, sizeof(st->key), "%ssets/%u.%u/leader",
				 c->cfg->cluster_prefix, p, s);
			t->v[k++] = st;
		}
	}
	t->n = k;
	t->older = old;
	__atomic_store_n(&c->sets, t, __ATOMIC_RELEASE);
}

int
ol_cluster_lead_follow(struct ol_cluster *c, const struct ol_layout *l)
{
	struct ol_layout nl;
	int rc = 0;
	if (!sets_now(c))
		return -ENOENT;
	pthread_mutex_lock(&c->ldr_mu);
	unsigned had = c->layout.n_pools;
	if (l->n_pools > had && !(rc = copy_layout(l, &nl))) {
		publish_sets(c, l, had);
		ol_layout_fini(&c->layout);
		c->layout = nl;
		ol_info("cluster: following the leadership of pool(s) %u..%u of the layout", had,
			l->n_pools - 1);
		atomic_store(&c->ldr_dirty, 1);
		pthread_cond_broadcast(&c->ldr_cv);
	}
	pthread_mutex_unlock(&c->ldr_mu);
	return rc;
}

int
ol_cluster_lead_renew(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch)
{
	struct ol_cluster_set *s = c ? find_set(c, pool, set) : NULL;
	if (!s || !epoch || atomic_load(&s->my_epoch) != epoch)
		return -ENOENT;
	atomic_store(&s->renew, epoch);
	wake(c);
	return 0;
}

int
ol_cluster_lead_step_down(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch)
{
	struct ol_cluster_set *s = c ? find_set(c, pool, set) : NULL;
	if (!s || !epoch || atomic_load(&s->my_epoch) != epoch)
		return -ENOENT;
	atomic_store(&s->step_down, epoch);
	wake(c);
	return 0;
}

void
ol_cluster_lead_gate(struct ol_cluster *c, ol_cluster_gate_fn fn, void *arg)
{
	c->gate_fn = fn;
	c->gate_arg = arg;
}

int
ol_cluster_lead_start(struct ol_cluster *c, const struct ol_layout *l, ol_cluster_lead_fn fn,
		      void *arg)
{
	if (sets_now(c))
		return -EALREADY;
	int rc = copy_layout(l, &c->layout);
	if (rc)
		return rc;
	pthread_mutex_init(&c->ldr_mu, NULL);
	pthread_mutex_init(&c->ldr_act_mu, NULL);
	publish_sets(c, l, 0);
	snprintf(c->sets_prefix, sizeof(c->sets_prefix), "%ssets/", c->cfg->cluster_prefix);
	char s3[OL_CFG_STR + 8], rpc[OL_CFG_STR + 16];
	c->ldr_value = ol_cluster_leader_to_json(
	    c->cfg->self_id, ol_config_advertised(c->cfg, c->cfg->s3_addr, s3, sizeof(s3)),
	    ol_config_plane_addr(c->cfg, rpc, sizeof(rpc)));
	if (!c->ldr_value)
		ol_die("out of memory building the leader record");
	c->lead_fn = fn;
	c->lead_arg = arg;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->ldr_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&c->ldr_guard, NULL, guard_main, c) == 0) {
		pthread_setname_np(c->ldr_guard, "ol-cluster-lg");
		c->ldr_guard_started = true;
	} else {
		ol_warn("cluster: cannot start the lease guard: a set is given up at the lease "
			"bound only between etcd calls");
	}
	if (pthread_create(&c->ldr, NULL, leader_main, c) != 0) {
		ol_cluster_lead_free(c);
		return -EAGAIN;
	}
	pthread_setname_np(c->ldr, "ol-cluster-ldr");
	c->ldr_started = true;
	if (pthread_create(&c->ldr_watch, NULL, leader_watch_main, c) == 0) {
		pthread_setname_np(c->ldr_watch, "ol-cluster-lw");
		c->ldr_watch_started = true;
	} else {
		ol_warn("cluster: cannot start the watch of the leader keys: they are read each "
			"second");
	}
	return 0;
}

void
ol_cluster_lead_stop(struct ol_cluster *c)
{
	if (!c->ldr_started && !c->ldr_guard_started)
		return;
	pthread_mutex_lock(&c->ldr_mu);
	atomic_store(&c->ldr_stop, 1);
	pthread_cond_broadcast(&c->ldr_cv);
	pthread_mutex_unlock(&c->ldr_mu);
	if (c->ldr_started) /* it resigns the sets first */
		pthread_join(c->ldr, NULL);
	c->ldr_started = false;
	if (c->ldr_guard_started) {
		pthread_join(c->ldr_guard, NULL);
		c->ldr_guard_started = false;
	}
	if (c->ldr_watch_started) {
		pthread_join(c->ldr_watch, NULL);
		c->ldr_watch_started = false;
	}
}

void
ol_cluster_resign(struct ol_cluster *c)
{
	if (c)
		ol_cluster_lead_stop(c);
}

void
ol_cluster_lead_free(struct ol_cluster *c)
{
	struct ol_cluster_sets *t = sets_now(c);
	if (!t)
		return;
	ol_cluster_lead_stop(c);
	pthread_mutex_destroy(&c->ldr_mu);
	pthread_mutex_destroy(&c->ldr_act_mu);
	pthread_cond_destroy(&c->ldr_cv);
	ol_layout_fini(&c->layout);
	for (unsigned i = 0; i < t->n; i++) /* the newest table holds every set */
		free(t->v[i]);
	while (t) {
		struct ol_cluster_sets *older = t->older;
		free(t);
		t = older;
	}
	c->sets = NULL;
	free(c->ldr_value);
	c->ldr_value = NULL;
}
