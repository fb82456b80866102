/* cmd/openlaked/cluster_writes.c - a follower's commits sent to the serving leader: see
 * cluster_writes.h. */
#include "cluster_writes.h"
#include "cluster_store.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "node/node.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#define SET_INDEX    0u	   /* the serving set is set 0 of its pool (cluster_store.c) */
#define PING_MS	     2000  /* the leader's plane answers a ping before a commit goes out */
#define COMMIT_MS    30000 /* a commit's answer (the leader's metadata commit on its drives) */
#define RETRY_MS     200   /* a commit not taken is tried again this often */
#define COMMIT_RETRY 1	   /* commit_try: not applied, send it again */

/* an idle client of the plane at addr */
struct idle {
	struct ol_node_client *cl;
	char addr[OL_CFG_STR];
};

struct cwrites {
	const struct ol_config *cfg;
	struct ol_cluster *c;
	const _Atomic unsigned *serve_pool;
	const atomic_bool *allowed;
	int wait_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	struct idle idle[CWRITES_IDLE];
	unsigned n_idle;
	bool stopping;
	_Atomic uint64_t sent, failed, retried;
};

static int64_t
now_ms(void)
{
	return (int64_t)ol_clock_ms();
}

static void
metrics(struct ol_strbuf *b, void *arg)
{
	struct cwrites *w = arg;
	ol_strbuf_printf(
	    b,
	    "# HELP openlake_cluster_commits_sent_total Commits of writes whose data this node "
	    "wrote (write_any) sent to the serving leader and answered by it.\n"
	    "# TYPE openlake_cluster_commits_sent_total counter\n"
	    "openlake_cluster_commits_sent_total %llu\n"
	    "# HELP openlake_cluster_commits_failed_total Such commits that no leader took "
	    "within the wait, or whose answer did not come back (answered 503 SlowDown).\n"
	    "# TYPE openlake_cluster_commits_failed_total counter\n"
	    "openlake_cluster_commits_failed_total %llu\n"
	    "# HELP openlake_cluster_commits_retried_total Tries of such commits that surely "
	    "were not applied (no leader, leader unreachable or not serving) and were sent "
	    "again.\n"
	    "# TYPE openlake_cluster_commits_retried_total counter\n"
	    "openlake_cluster_commits_retried_total %llu\n",
	    (unsigned long long)atomic_load(&w->sent), (unsigned long long)atomic_load(&w->failed),
	    (unsigned long long)atomic_load(&w->retried));
}

struct cwrites *
cwrites_new(const struct ol_config *cfg, struct ol_cluster *c, const _Atomic unsigned *serve_pool,
	    const atomic_bool *allowed, int wait_ms)
{
	struct cwrites *w = ol_xcalloc(1, sizeof(*w));
	w->cfg = cfg;
	w->c = c;
	w->serve_pool = serve_pool;
	w->allowed = allowed;
	w->wait_ms = wait_ms;
	pthread_mutex_init(&w->mu, NULL);
	ol_cond_init_mono(&w->cv);
	ol_metrics_register(metrics, w);
	return w;
}

/* an idle client of addr, or a new one (NULL: it cannot be made) */
static struct ol_node_client *
client_take(struct cwrites *w, const char *addr)
{
	struct ol_node_client *cl = NULL;
	pthread_mutex_lock(&w->mu);
	for (unsigned i = 0; i < w->n_idle; i++) {
		if (strcmp(w->idle[i].addr, addr) != 0)
			continue;
		cl = w->idle[i].cl;
		w->idle[i] = w->idle[--w->n_idle];
		break;
	}
	pthread_mutex_unlock(&w->mu);
	if (!cl && ol_node_client_new(addr, w->cfg->cluster_secret, w->cfg->self_id, &cl))
		cl = NULL;
	return cl;
}

/* cl back to the idle ones (freed when they are full) */
static void
client_give(struct cwrites *w, const char *addr, struct ol_node_client *cl)
{
	pthread_mutex_lock(&w->mu);
	if (w->n_idle < CWRITES_IDLE) {
		struct idle *e = &w->idle[w->n_idle++];
		e->cl = cl;
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
		cl = NULL;
	}
	pthread_mutex_unlock(&w->mu);
	ol_node_client_free(cl);
}

/* the idle clients of addr go (its node stopped answering: they are stale too) */
static void
client_drop(struct cwrites *w, const char *addr)
{
	struct ol_node_client *gone[CWRITES_IDLE];
	unsigned n = 0;
	pthread_mutex_lock(&w->mu);
	for (unsigned i = 0; i < w->n_idle;) {
		if (strcmp(w->idle[i].addr, addr) == 0) {
			gone[n++] = w->idle[i].cl;
			w->idle[i] = w->idle[--w->n_idle];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&w->mu);
	for (unsigned i = 0; i < n; i++)
		ol_node_client_free(gone[i]);
}

/* the node plane address of the serving leader ("" : none known now) */
static void
leader_addr(struct cwrites *w, char *addr, size_t len, unsigned *node)
{
	struct ol_cluster_leader_info li;
	struct ol_cluster_view v;
	addr[0] = 0;
	if (ol_cluster_leader(w->c, atomic_load(w->serve_pool), SET_INDEX, &li) || !li.epoch)
		return;
	*node = li.node;
	if (ol_cluster_members(w->c, &v) == 0) {
		cstore_peer_addr(w->cfg, &v, li.node, addr, len);
		ol_cluster_view_fini(&v);
	} else {
		cstore_peer_addr(w->cfg, NULL, li.node, addr, len);
	}
}

/* No answer came to a commit (a local failure of the call, rc): nothing went out (the
 * connection refused again since the ping: retried; too large: -EIO) or the outcome is unknown:
 * the leader may have applied it (its commit was on the drives when the answer was lost). Not
 * sent again then: a second commit of the same version could land after a later write of the
 * key and undo it. -ETIMEDOUT: the store keeps the shard files, the client is answered 503
 * SlowDown and writes the object again. */
static int
lost_answer(struct cwrites *w, struct ol_node_client *cl, const char *addr, unsigned node, int rc)
{
	ol_node_client_free(cl);
	if (rc == -ECONNREFUSED) {
		client_drop(w, addr);
		return COMMIT_RETRY;
	}
	if (rc == -EMSGSIZE) {
		ol_warn(
		    "cluster: a commit of a write is larger than the serving leader's node plane "
		    "frames: set the same [cluster] plane_max_frame on every node");
		return -EIO;
	}
	ol_warn("cluster: the commit of a write sent to the serving leader (node %u, %s) had no "
		"answer (%s): it may have been applied; the client is answered 503 SlowDown and "
		"retries",
		node, addr, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
	return -ETIMEDOUT;
}

/* One try: 0 or a final -errno (the leader's answer, or -ETIMEDOUT: sent, no answer), or
 * COMMIT_RETRY when it surely was not applied. */
static int
commit_try(struct cwrites *w, const void *req, size_t len, struct ol_obj_info *out)
{
	char addr[OL_CFG_STR];
	unsigned node = 0;
	const uint8_t *reply;
	size_t rlen;
	leader_addr(w, addr, sizeof(addr), &node);
	if (!addr[0])
		return COMMIT_RETRY; /* no leader known yet */
	struct ol_node_client *cl = client_take(w, addr);
	if (!cl)
		return -ENOMEM;
	/* the commit goes out only on a connection the leader just answered: a failure before
	 * it (refused, reset, a killed leader's stale connection) surely applied nothing */
	int rc = ol_node_ping(cl, PING_MS, NULL);
	if (rc) {
		ol_debug("cluster: the serving leader's plane (node %u, %s) does not answer (%s): "
			 "its commit waits for a leader",
			 node, addr, strerror(-rc));
		ol_node_client_free(cl);
		client_drop(w, addr);
		return COMMIT_RETRY;
	}
	struct iovec iov = {(void *)req, len};
	reply = NULL;
	rc = ol_node_call(cl, OL_NODE_COMMIT, &iov, 1, COMMIT_MS, &reply, &rlen);
	if (!reply)
		return lost_answer(w, cl, addr, node, rc);
	/* the leader's answer: its status and, on success, the version's info */
	if (rc == 0 && ol_store_info_decode(reply, rlen, out)) {
		/* applied, and its answer unreadable: as a lost answer (the files stay) */
		ol_warn("cluster: the serving leader (node %u) answered a commit with a reply that "
			"does not decode: the client is answered 503 SlowDown",
			node);
		rc = -ETIMEDOUT;
	}
	client_give(w, addr, cl);
	if (rc == -ESTALE) /* it does not serve (yet, or any more), or the drives fenced it */
		return COMMIT_RETRY;
	if (rc == -EOPNOTSUPP) {
		ol_warn("cluster: the serving leader (node %u) does not take commits of writes "
			"from other nodes (a build without them): set [cluster] write_any = false "
			"on this node, or upgrade the leader",
			node);
		return -EAGAIN;
	}
	return rc; /* the leader's own -ETIMEDOUT included: the files stay (it may have landed) */
}

int
cwrites_commit(void *arg, const void *req, size_t len, struct ol_obj_info *out)
{
	struct cwrites *w = arg;
	int64_t end = now_ms() + w->wait_ms;
	int rc;
	for (;;) {
		rc = commit_try(w, req, len, out);
		if (rc != COMMIT_RETRY)
			break;
		pthread_mutex_lock(&w->mu);
		bool stop = w->stopping || now_ms() >= end || !atomic_load(w->allowed);
		if (!stop) {
			ol_cond_wait_ms(&w->cv, &w->mu, RETRY_MS);
		}
		pthread_mutex_unlock(&w->mu);
		if (stop) {
			rc = -EAGAIN; /* not applied: the client retries */
			break;
		}
		atomic_fetch_add(&w->retried, 1);
	}
	atomic_fetch_add(rc == -EAGAIN || rc == -ETIMEDOUT ? &w->failed : &w->sent, 1);
	return rc;
}

void
cwrites_stop(struct cwrites *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void
cwrites_free(struct cwrites *w)
{
	if (!w)
		return;
	ol_metrics_unregister(metrics, w);
	for (unsigned i = 0; i < w->n_idle; i++)
		ol_node_client_free(w->idle[i].cl);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
