/* cmd/openlaked/cluster_quorum.c - the serving set's write quorum as this node reaches it: see
 * cluster_quorum.h. */
#include "cluster_quorum.h"
#include "cluster_store.h"

#include "base/clock.h"
#include "base/log.h"
#include "node/node.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROBE_MS	  1000 /* a probe round starts this often */
#define PROBE_DEADLINE_MS 1000 /* each ping's deadline (connect and HELLO included) */
#define MAX_SLOTS	  256  /* drives of one set */

struct peer {
	unsigned node;
	char addr[OL_CFG_STR];
	struct ol_node_client *cl;
};

struct cquorum {
	const struct ol_config *cfg;
	struct ol_cluster *c;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop; /* under mu */
	/* the serving set as the daemon last gave it, under mu; gen grows with each change */
	unsigned pool, n, parity, node[MAX_SLOTS];
	uint64_t gen;
	/* what the last round measured, for the gate: the pool probed (-1: none yet) and whether
	 * this node may lead its set 0 */
	_Atomic int probed_pool;
	atomic_bool may;
	/* the thread's own */
	struct peer peers[MAX_SLOTS];
	unsigned n_peers;
	int64_t lost_since; /* CLOCK_MONOTONIC ms since this node may not lead (0: it may) */
};

/* the client for node at addr (made, or made again when the address changed); NULL: none */
static struct ol_node_client *
peer_client(struct cquorum *q, unsigned node, const char *addr)
{
	struct peer *p = NULL;
	for (unsigned i = 0; i < q->n_peers && !p; i++)
		if (q->peers[i].node == node)
			p = &q->peers[i];
	if (!p && q->n_peers < MAX_SLOTS) {
		p = &q->peers[q->n_peers++];
		*p = (struct peer){.node = node};
	}
	if (!p)
		return NULL;
	if (p->cl && strcmp(p->addr, addr) != 0) {
		ol_node_client_free(p->cl);
		p->cl = NULL;
	}
	if (!p->cl) {
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		if (ol_node_client_new(addr, q->cfg->cluster_secret, q->cfg->self_id, &p->cl))
			p->cl = NULL;
	}
	return p->cl;
}

static bool
member_live(const struct ol_cluster_view *v, unsigned node)
{
	for (unsigned i = 0; i < v->n; i++)
		if (v->members[i].id == node)
			return true;
	return false;
}

/* one round over the set's nodes: *reach and *live drives of the n */
static void
probe(struct cquorum *q, const unsigned *node, unsigned n, unsigned *reach, unsigned *live)
{
	struct ol_cluster_view v = {0};
	bool have_view = ol_cluster_members(q->c, &v) == 0;
	unsigned done[MAX_SLOTS];
	bool ok[MAX_SLOTS];
	unsigned nd = 0;
	*reach = *live = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned j = 0;
		while (j < nd && done[j] != node[i])
			j++;
		if (j == nd) { /* each node once, however many drives it holds */
			char addr[OL_CFG_STR];
			cstore_peer_addr(q->cfg, have_view ? &v : NULL, node[i], addr,
					 sizeof(addr));
			struct ol_node_client *cl = addr[0] ? peer_client(q, node[i], addr) : NULL;
			done[nd] = node[i];
			ok[nd++] = cl && ol_node_ping(cl, PROBE_DEADLINE_MS, NULL) == 0;
		}
		*reach += ok[j];
		*live += node[i] == q->cfg->self_id || (have_view && member_live(&v, node[i]));
	}
	if (have_view)
		ol_cluster_view_fini(&v);
}

/* act on a round's result: publish it for the gate, and a leader that may not lead for
 * quorum_loss_s steps down */
static void
decide(struct cquorum *q, unsigned pool, unsigned n, unsigned parity, unsigned reach, unsigned live)
{
	unsigned w = ol_cluster_write_quorum(n, parity);
	bool may = ol_cluster_may_lead(n, parity, reach, live);
	atomic_store(&q->may, may);
	atomic_store(&q->probed_pool, (int)pool);
	if (may) {
		if (q->lost_since)
			ol_info("cluster: this node reaches %u of the %u drives of set %u.0 again "
				"(write quorum %u): it may lead the set",
				reach, n, pool, w);
		q->lost_since = 0;
		return;
	}
	int64_t now = (int64_t)ol_clock_ms();
	if (!q->lost_since) {
		q->lost_since = now;
		ol_warn("cluster: this node reaches %u of the %u drives of set %u.0 over the node "
			"plane (write quorum %u; %u on live members): it does not campaign for the "
			"set, and gives it up after %u s if it leads it",
			reach, n, pool, w, live, q->cfg->cluster_quorum_loss_s);
	}
	struct ol_cluster_leader_info li;
	if (now - q->lost_since >= (int64_t)q->cfg->cluster_quorum_loss_s * 1000 &&
	    ol_cluster_leader(q->c, pool, 0, &li) == 0 && li.is_self)
		(void)ol_cluster_lead_step_down(q->c, pool, 0, li.epoch);
}

static void *
quorum_main(void *arg)
{
	struct cquorum *q = arg;
	unsigned node[MAX_SLOTS];
	uint64_t gen_seen = 0;
	pthread_mutex_lock(&q->mu);
	while (!q->stop) {
		unsigned pool = q->pool, n = q->n, parity = q->parity;
		uint64_t gen = q->gen;
		memcpy(node, q->node, n * sizeof(node[0]));
		pthread_mutex_unlock(&q->mu);
		int64_t next = (int64_t)ol_clock_ms() + PROBE_MS;
		if (gen != gen_seen) /* another serving set: its loss counts from now */
			q->lost_since = 0;
		gen_seen = gen;
		if (n) {
			unsigned reach, live;
			probe(q, node, n, &reach, &live);
			pthread_mutex_lock(&q->mu);
			bool same = gen == q->gen;
			pthread_mutex_unlock(&q->mu);
			if (same)
				decide(q, pool, n, parity, reach, live);
		}
		struct timespec ts = {next / 1000, (next % 1000) * 1000000L};
		pthread_mutex_lock(&q->mu);
		while (!q->stop && q->gen == gen &&
		       pthread_cond_timedwait(&q->cv, &q->mu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int
cquorum_start(const struct ol_config *cfg, struct ol_cluster *c, struct cquorum **out)
{
	struct cquorum *q = ol_xcalloc(1, sizeof(*q));
	if (cfg->cluster_quorum_loss_s <= cfg->cluster_lease_ttl_s)
		ol_warn("cluster: [cluster] quorum_loss_s = %u is not above lease_ttl_s = %u: a "
			"leader whose peers were killed may give its set up before their leases "
			"lapse and take it back after (docs/cluster.md, \"Write quorum and "
			"leadership\"); set quorum_loss_s above lease_ttl_s",
			cfg->cluster_quorum_loss_s, cfg->cluster_lease_ttl_s);
	q->cfg = cfg;
	q->c = c;
	atomic_store(&q->probed_pool, -1);
	pthread_mutex_init(&q->mu, NULL);
	ol_cond_init_mono(&q->cv);
	if (pthread_create(&q->th, NULL, quorum_main, q) != 0) {
		cquorum_free(q);
		return -EAGAIN;
	}
	pthread_setname_np(q->th, "ol-cquorum");
	q->started = true;
	*out = q;
	return 0;
}

void
cquorum_layout(struct cquorum *q, const struct ol_layout *l)
{
	unsigned pool = ol_layout_serving_pool(l), n = l->set_drives;
	if (!q || pool >= l->n_pools || n > MAX_SLOTS || !l->pools[pool].n_sets)
		return;
	pthread_mutex_lock(&q->mu);
	bool same = q->n == n && q->pool == pool && q->parity == l->parity;
	for (unsigned j = 0; same && j < n; j++)
		same = q->node[j] == l->pools[pool].slots[j].node;
	if (!same) {
		q->pool = pool;
		q->n = n;
		q->parity = l->parity;
		for (unsigned j = 0; j < n; j++) /* set 0: the pool's first n slots */
			q->node[j] = l->pools[pool].slots[j].node;
		q->gen++;
		atomic_store(&q->probed_pool, -1); /* not measured yet: no campaign */
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
}

bool
cquorum_may_lead(void *arg, unsigned pool, unsigned set)
{
	struct cquorum *q = arg;
	pthread_mutex_lock(&q->mu);
	bool serving = q->n && pool == q->pool && set == 0;
	pthread_mutex_unlock(&q->mu);
	if (!serving)
		return true;
	return atomic_load(&q->probed_pool) == (int)pool && atomic_load(&q->may);
}

void
cquorum_stop(struct cquorum *q)
{
	if (!q || !q->started)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	q->started = false;
}

void
cquorum_free(struct cquorum *q)
{
	if (!q)
		return;
	cquorum_stop(q);
	for (unsigned i = 0; i < q->n_peers; i++)
		ol_node_client_free(q->peers[i].cl);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q);
}
