/* cluster/serve.c - the serving key: one node serves the cluster's S3 at a time, and a watch
 * of one key. See cluster.h ("the serving key"). */
#include "cluster/cluster.h"
#include "cluster/etcd.h"
#include "cluster/internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void
ol_cluster_serve_init(struct ol_cluster *c)
{
	snprintf(c->serve_key, sizeof(c->serve_key), "%sserving", c->cfg->cluster_prefix);
	snprintf(c->layout_key, sizeof(c->layout_key), "%slayout", c->cfg->cluster_prefix);
	pthread_mutex_init(&c->serve_mu, NULL);
}

void
ol_cluster_serve_fini(struct ol_cluster *c)
{
	pthread_mutex_destroy(&c->serve_mu);
}

static unsigned
holder_of(const struct ol_etcd_kv *kv)
{
	json_error_t e;
	json_t *o = json_loadb(kv->value, kv->value_len, 0, &e);
	json_int_t n = json_integer_value(json_object_get(o, "node"));
	json_decref(o);
	return n >= 0 && n <= 65535 ? (unsigned)n : 65536;
}

/* delete the key if it still is the one created at rev (0 / -errno) */
static int
drop_serving(struct ol_cluster *c, int64_t rev)
{
	struct ol_etcd_cmp cmp = {.key = c->serve_key,
				  .target = OL_ETCD_CMP_CREATE,
				  .result = OL_ETCD_EQUAL,
				  .number = rev};
	struct ol_etcd_op del = {.type = OL_ETCD_OP_DELETE, .key = c->serve_key};
	struct ol_etcd_txn_result t = {0};
	int rc = ol_etcd_txn(c->etcd, &cmp, 1, &del, 1, NULL, 0, &t);
	ol_etcd_txn_result_fini(&t);
	return rc;
}

/* the key this node took (serve_rev) is still there, under lease; an unanswered read counts
 * as not held (the caller then asks for it again) */
static bool
still_held(struct ol_cluster *c, int64_t lease)
{
	struct ol_etcd_range_result r;
	if (ol_etcd_range(c->etcd, c->serve_key, 0, 0, 0, &r))
		return false;
	bool held = r.n_kvs && r.kvs[0].create_revision == c->serve_rev && r.kvs[0].lease == lease;
	ol_etcd_range_result_fini(&r);
	return held;
}

/* one try: 0 taken, 1 a leftover of this node's under the same lease was deleted (try again),
 * or -EBUSY / -ESTALE / -errno */
static int
take(struct ol_cluster *c, const char *value, int64_t lease, int64_t layout_rev, unsigned *holder)
{
	struct ol_etcd_cmp cmp[2] = {
	    {.key = c->serve_key, .target = OL_ETCD_CMP_CREATE, .result = OL_ETCD_EQUAL},
	    {.key = c->layout_key,
	     .target = OL_ETCD_CMP_MOD,
	     .result = OL_ETCD_EQUAL,
	     .number = layout_rev}};
	struct ol_etcd_op put = {.type = OL_ETCD_OP_PUT,
				 .key = c->serve_key,
				 .value = value,
				 .value_len = strlen(value),
				 .lease = lease};
	struct ol_etcd_op get[2] = {{.type = OL_ETCD_OP_RANGE, .key = c->serve_key},
				    {.type = OL_ETCD_OP_RANGE, .key = c->layout_key}};
	struct ol_etcd_txn_result t = {0};
	int rc = ol_etcd_txn(c->etcd, cmp, 2, &put, 1, get, 2, &t);
	if (rc)
		goto out;
	if (t.succeeded) {
		c->serve_rev = t.revision;
		goto out;
	}
	rc = -EPROTO;
	if (t.n_ranges != 2)
		goto out;
	const struct ol_etcd_range_result *srv = &t.ranges[0], *lay = &t.ranges[1];
	if (!lay->n_kvs || lay->kvs[0].mod_revision != layout_rev) {
		rc = -ESTALE;
	} else if (srv->n_kvs) {
		const struct ol_etcd_kv *kv = &srv->kvs[0];
		unsigned h = holder_of(kv);
		rc = -EBUSY;
		if (holder)
			*holder = h;
		/* ours, under the lease we lead with, and we are not serving (we ask for it):
		 * a release that did not reach etcd */
		if (h == c->cfg->self_id && kv->lease == lease)
			rc = drop_serving(c, kv->create_revision) ? -EBUSY : 1;
	} else {
		rc = 1; /* deleted between the compare and the read */
	}
out:
	ol_etcd_txn_result_fini(&t);
	return rc;
}

int
ol_cluster_serve_acquire(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch,
			 int64_t layout_rev, unsigned *holder)
{
	struct ol_cluster_set *s = ol_cluster_find_set(c, pool, set);
	if (!s || !ol_cluster_leads(c, pool, set, epoch))
		return -ENOENT;
	int64_t lease = atomic_load(&s->my_lease);
	char v[128];
	snprintf(v, sizeof(v), "{\"node\":%u,\"pool\":%u,\"set\":%u,\"epoch\":%llu}",
		 c->cfg->self_id, pool, set, (unsigned long long)epoch);
	pthread_mutex_lock(&c->serve_mu);
	if (c->serve_rev && !still_held(c, lease))
		c->serve_rev = 0; /* it went with a lease that lapsed */
	int rc = c->serve_rev ? -EALREADY : 1;
	for (int tries = 0; rc == 1 && tries < 3; tries++)
		rc = take(c, v, lease, layout_rev, holder);
	if (rc == 1)
		rc = -EBUSY;
	pthread_mutex_unlock(&c->serve_mu);
	if (rc == -EALREADY)
		rc = 0; /* held already (never released): still ours while we lead */
	/* the lease may have lapsed while the txn ran: then the key went with it */
	if (!rc && !ol_cluster_leads(c, pool, set, epoch)) {
		(void)ol_cluster_serve_release(c);
		rc = -ENOENT;
	}
	return rc;
}

int
ol_cluster_serve_release(struct ol_cluster *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->serve_mu);
	int rc = c->serve_rev ? drop_serving(c, c->serve_rev) : 0;
	if (!rc)
		c->serve_rev = 0;
	pthread_mutex_unlock(&c->serve_mu);
	return rc;
}

/* ---- a watch of one key ---- */

struct kwatch {
	ol_cluster_watch_fn fn;
	void *arg;
};

static int
on_key(void *arg, const struct ol_etcd_event *ev, size_t n, int64_t revision)
{
	struct kwatch *w = arg;
	(void)revision;
	for (size_t i = 0; i < n; i++) {
		const struct ol_etcd_kv *kv = &ev[i].kv;
		int rc = ev[i].type == OL_ETCD_EV_PUT
			     ? w->fn(w->arg, kv->value, kv->value_len, kv->mod_revision)
			     : w->fn(w->arg, NULL, 0, kv->mod_revision);
		if (rc)
			return rc;
	}
	return 0;
}

static void
nap_ms(const atomic_int *stop, int ms)
{
	for (int t = 0; t < ms && !atomic_load(stop); t += 50) {
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

int
ol_cluster_watch(struct ol_cluster *c, const char *name, ol_cluster_watch_fn fn, void *arg,
		 const atomic_int *stop)
{
	char key[OL_CFG_STR + 64];
	struct kwatch w = {fn, arg};
	snprintf(key, sizeof(key), "%s%s", c->cfg->cluster_prefix, name);
	while (!atomic_load(stop)) {
		struct ol_etcd_range_result r;
		int rc = ol_etcd_range(c->etcd, key, 0, 0, 0, &r);
		if (rc) {
			nap_ms(stop, 500);
			continue;
		}
		int64_t from = r.revision + 1;
		rc = r.n_kvs ? fn(arg, r.kvs[0].value, r.kvs[0].value_len, r.kvs[0].mod_revision)
			     : fn(arg, NULL, 0, 0);
		ol_etcd_range_result_fini(&r);
		if (!rc)
			rc = ol_etcd_watch(c->etcd, key, 0, from, on_key, &w, stop, NULL);
		if (rc > 0)
			return rc;
		if (rc)
			nap_ms(stop, 200); /* compacted, or the stream failed: read again */
	}
	return 0;
}
