/* cluster/member.c - register this node in etcd under a lease, keep it alive, and keep a
 * snapshot of the live members current with a watch. See cluster.h. */
#include "cluster/cluster.h"
#include "cluster/etcd.h"
#include "cluster/internal.h"

#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#define FREE_PERIOD_MS 5000 /* <prefix>free/<id> at most this often */

int
ol_cluster_member_parse(const char *buf, size_t len, struct ol_cluster_member *m)
{
	memset(m, 0, sizeof(*m));
	json_error_t e;
	json_t *o = json_loadb(buf, len, 0, &e);
	const json_t *id = json_object_get(o, "id"), *drives = json_object_get(o, "drives");
	int rc = -EPROTO;
	if (!json_is_object(o) || !json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) > 65535)
		goto out;
	m->id = (unsigned)json_integer_value(id);
	const char *names[] = {"s3", "kv", "rpc_addr"};
	char *dst[] = {m->s3_addr, m->kv_addr, m->rpc_addr};
	for (int i = 0; i < 3; i++) {
		const char *s = json_string_value(json_object_get(o, names[i]));
		snprintf(dst[i], OL_CFG_STR, "%s", s ? s : "");
	}
	json_int_t cap = json_integer_value(json_object_get(o, "capacity"));
	json_int_t w = json_integer_value(json_object_get(o, "weight"));
	json_int_t fr = json_integer_value(json_object_get(o, "free"));
	m->capacity = cap > 0 ? (uint64_t)cap : 0;
	m->free = fr > 0 ? (uint64_t)fr : 0;
	m->weight = w > 0 && w <= 1000000 ? (unsigned)w : 0;
	m->n_drives = json_is_array(drives) ? (unsigned)json_array_size(drives) : 0;
	m->start_time = json_integer_value(json_object_get(o, "start_time"));
	rc = 0;
out:
	json_decref(o);
	return rc;
}

/* size and free bytes of data dir i (0, 0 when statvfs fails) */
static void
dir_space(const struct ol_config *cfg, unsigned i, uint64_t *size, uint64_t *avail)
{
	struct statvfs st;
	*size = *avail = 0;
	if (statvfs(cfg->data_dirs[i], &st) == 0) {
		*size = (uint64_t)st.f_blocks * st.f_frsize;
		*avail = (uint64_t)st.f_bavail * st.f_frsize;
	}
}

static char *
member_json(const struct ol_config *cfg)
{
	json_t *drives = json_array();
	uint64_t total = 0, free_total = 0;
	for (unsigned i = 0; drives && i < cfg->n_data_dirs; i++) {
		uint64_t size, avail;
		dir_space(cfg, i, &size, &avail);
		total += size;
		free_total += avail;
		json_array_append_new(drives, json_pack("{s:s, s:I}", "path", cfg->data_dirs[i],
							"size", (json_int_t)size));
	}
	char s3[OL_CFG_STR + 8], kv[OL_CFG_STR + 8], rpc[OL_CFG_STR + 16];
	json_t *o = json_pack(
	    "{s:I, s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:s, s:I}", "id", (json_int_t)cfg->self_id,
	    "s3",
	    strcmp(cfg->mode, "kv") == 0 ? ""
					 : ol_config_advertised(cfg, cfg->s3_addr, s3, sizeof(s3)),
	    "kv", ol_config_advertised(cfg, ol_config_kv_listen(cfg), kv, sizeof(kv)), "rpc_addr",
	    ol_config_plane_addr(cfg, rpc, sizeof(rpc)), "drives", drives, "capacity",
	    (json_int_t)total, "free", (json_int_t)free_total, "weight",
	    (json_int_t)cfg->cluster_weight, "version", OL_VERSION, "start_time",
	    (json_int_t)time(NULL));
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!s)
		ol_die("out of memory building the member record");
	return s;
}

/* sleep up to ms, or until stop / a request to register again */
static void
nap(struct ol_cluster *c, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&c->mu);
	while (!atomic_load(&c->stop) && !atomic_load(&c->reregister) &&
	       pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0)
		;
	pthread_mutex_unlock(&c->mu);
}

int64_t
ol_cluster_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lease surely lives on etcd's side until the moment its last answered grant or keepalive
 * was *sent* plus the TTL etcd answered: etcd started the TTL after it received the call. */
static void
lease_set(struct ol_cluster *c, int64_t id, int64_t sent_ms, int64_t ttl_s)
{
	atomic_store(&c->lease_valid_until, id && ttl_s > 0 ? sent_ms + ttl_s * 1000 : 0);
	atomic_store(&c->lease_id, id);
	c->lease = id;
}

/* This process's first registration: a member key of this node under a lease that is still
 * alive is a previous process's (one process per node runs here: the data dirs are locked), so
 * that process crashed or was killed, and its lease holds the sets it led until the lease's end
 * with no one serving them. It is revoked now, and the next leader campaigns at once
 * (docs/cluster.md, "A dead leader"). Best effort: on failure the lease lapses as before. */
static void
drop_predecessor(struct ol_cluster *c, int64_t mine)
{
	struct ol_etcd_range_result r;
	if (ol_etcd_range(c->ka_etcd, c->key, 0, 0, 1, &r))
		return;
	int64_t old = r.n_kvs ? r.kvs[0].lease : 0;
	ol_etcd_range_result_fini(&r);
	if (old <= 0 || old == mine)
		return;
	int rc = ol_etcd_lease_revoke(c->ka_etcd, old);
	if (rc == 0)
		ol_warn("cluster: a previous process of this node held lease %lld (its member key "
			"%s): revoked, so what it led goes to a campaign now rather than at the "
			"lease's end",
			(long long)old, c->key);
}

static int
register_once(struct ol_cluster *c)
{
	int64_t id, ttl, sent = ol_cluster_now_ms();
	int rc = ol_etcd_lease_grant(c->ka_etcd, c->cfg->cluster_lease_ttl_s, &id, &ttl);
	if (rc)
		return rc;
	if (!c->registered)
		drop_predecessor(c, id);
	int64_t rev = 0;
	rc = ol_etcd_put(c->ka_etcd, c->key, c->value, strlen(c->value), id, &rev);
	if (rc) {
		(void)ol_etcd_lease_revoke(c->ka_etcd, id);
		return rc;
	}
	atomic_store(&c->key_rev, rev);
	lease_set(c, id, sent, ttl);
	c->registered = true;
	return 0;
}

/* <prefix>free/<id>: the drives' free bytes now, under the lease, every FREE_PERIOD_MS while
 * they change (a store-mode member; a KV pool's weights are its config's) */
static void
put_free(struct ol_cluster *c)
{
	const struct ol_config *cfg = c->cfg;
	int64_t now = ol_cluster_now_ms();
	if (!c->lease || !cfg->n_data_dirs || strcmp(cfg->mode, "kv") == 0 || now < c->free_next_ms)
		return;
	c->free_next_ms = now + FREE_PERIOD_MS;
	uint64_t total = 0, free_total = 0;
	for (unsigned i = 0; i < cfg->n_data_dirs; i++) {
		uint64_t size, avail;
		dir_space(cfg, i, &size, &avail);
		total += size;
		free_total += avail;
	}
	if (c->free_lease == c->lease && c->free_last == free_total)
		return;
	char v[96];
	snprintf(v, sizeof(v), "{\"free\":%llu,\"capacity\":%llu}", (unsigned long long)free_total,
		 (unsigned long long)total);
	if (ol_etcd_put(c->ka_etcd, c->free_key, v, strlen(v), c->lease, NULL) == 0) {
		c->free_last = free_total;
		c->free_lease = c->lease;
	}
}

int
ol_cluster_free_space(struct ol_cluster *c, unsigned *ids, uint64_t *free_bytes, size_t cap,
		      size_t *n)
{
	struct ol_etcd_range_result r;
	*n = 0;
	int rc = ol_etcd_range(c->etcd, c->free_prefix, OL_ETCD_PREFIX, 0, 0, &r);
	if (rc)
		return rc;
	size_t pl = strlen(c->free_prefix);
	for (size_t i = 0; i < r.n_kvs && *n < cap; i++) {
		char *end;
		errno = 0;
		unsigned long id = strtoul(r.kvs[i].key + pl, &end, 10);
		json_error_t e;
		json_t *o = json_loadb(r.kvs[i].value, r.kvs[i].value_len, 0, &e);
		json_int_t f = json_integer_value(json_object_get(o, "free"));
		if (!errno && end != r.kvs[i].key + pl && !*end && id <= 65535 && f >= 0 &&
		    json_is_integer(json_object_get(o, "free"))) {
			ids[*n] = (unsigned)id;
			free_bytes[(*n)++] = (uint64_t)f;
		}
		json_decref(o);
	}
	ol_etcd_range_result_fini(&r);
	return 0;
}

static void *
keepalive_main(void *arg)
{
	struct ol_cluster *c = arg;
	int64_t back = 200, period = c->cfg->cluster_lease_ttl_s * 1000 / 3;
	bool down_logged = false;
	while (!atomic_load(&c->stop)) {
		int rc;
		if (atomic_exchange(&c->reregister, 0) && c->lease) {
			ol_warn("cluster: member key %s is gone while its lease lives: writing it "
				"again",
				c->key);
			int64_t rev = 0;
			rc = ol_etcd_put(c->ka_etcd, c->key, c->value, strlen(c->value), c->lease,
					 &rev);
			if (rc)
				lease_set(c, 0, 0, 0);
			else
				atomic_store(&c->key_rev, rev);
		}
		if (!c->lease) {
			rc = register_once(c);
			if (!rc) {
				ol_info("cluster: registered as %s (lease %lld, ttl %us) via %s",
					c->key, (long long)c->lease, c->cfg->cluster_lease_ttl_s,
					ol_etcd_endpoint(c->ka_etcd));
				down_logged = false;
				back = 200;
			}
		} else {
			int64_t ttl, sent = ol_cluster_now_ms();
			rc = ol_etcd_lease_keepalive(c->ka_etcd, c->lease, &ttl);
			if (rc == -ENOENT || (!rc && ttl <= 0)) {
				ol_warn("cluster: lease %lld lapsed (etcd lost it or this process "
					"was stalled): registering again",
					(long long)c->lease);
				lease_set(c, 0, 0, 0);
				continue;
			}
			if (!rc) {
				lease_set(c, c->lease, sent, ttl);
				down_logged = false;
			}
		}
		if (!rc)
			put_free(c);
		if (rc && rc != -ECANCELED && !down_logged) { /* -ECANCELED: a stop's cutoff */
			ol_warn("cluster: etcd (%s) unreachable: %s; serving the local store, "
				"retrying in the background",
				c->cfg->cluster_etcd, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
			down_logged = true;
		}
		if (rc && !c->lease) {
			nap(c, back);
			back = back < 5000 ? back * 2 : 5000;
		} else {
			nap(c, rc ? period / 3 : period);
		}
	}
	return NULL;
}

/* ---- the view ---- */

static int
cmp_member(const void *a, const void *b)
{
	const struct ol_cluster_member *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* apply a put (m != NULL) or delete of member id to the view; under mu */
static void
view_apply(struct ol_cluster_view *v, unsigned id, const struct ol_cluster_member *m)
{
	unsigned i = 0;
	while (i < v->n && v->members[i].id != id)
		i++;
	if (!m) {
		if (i < v->n)
			v->members[i] = v->members[--v->n];
	} else if (i < v->n) {
		v->members[i] = *m;
	} else {
		v->members = ol_xrealloc(v->members, (v->n + 1) * sizeof(*v->members));
		v->members[v->n++] = *m;
	}
	qsort(v->members, v->n, sizeof(*v->members), cmp_member);
}

/* the id in a members/<id> key, or -1 */
static long
key_id(const struct ol_cluster *c, const char *key)
{
	size_t pl = strlen(c->prefix);
	if (strncmp(key, c->prefix, pl) != 0)
		return -1;
	char *end;
	errno = 0;
	unsigned long id = strtoul(key + pl, &end, 10);
	if (errno || end == key + pl || *end || id > 65535)
		return -1;
	return (long)id;
}

static void
apply_kv(struct ol_cluster *c, const struct ol_etcd_kv *kv, bool deleted)
{
	long id = key_id(c, kv->key);
	struct ol_cluster_member m;
	if (id < 0)
		return;
	if (!deleted && ol_cluster_member_parse(kv->value, kv->value_len, &m) == 0) {
		m.id = (unsigned)id;
		m.lease = kv->lease;
		view_apply(&c->view, (unsigned)id, &m);
	} else {
		view_apply(&c->view, (unsigned)id, NULL);
	}
	if (deleted && (unsigned)id == c->cfg->self_id && !atomic_load(&c->stop) &&
	    kv->mod_revision > atomic_load(&c->key_rev)) {
		atomic_store(&c->reregister, 1);
		pthread_cond_broadcast(&c->cv);
	}
}

static int
on_events(void *arg, const struct ol_etcd_event *ev, size_t n, int64_t revision)
{
	struct ol_cluster *c = arg;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n; i++)
		apply_kv(c, &ev[i].kv, ev[i].type == OL_ETCD_EV_DELETE);
	if (revision > c->view.epoch)
		c->view.epoch = revision;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* read the prefix at a revision into the view; that revision, or -errno */
static int64_t
view_load(struct ol_cluster *c)
{
	struct ol_etcd_range_result r;
	int rc = ol_etcd_range(c->etcd, c->prefix, OL_ETCD_PREFIX, 0, 0, &r);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->mu);
	c->view.n = 0;
	for (size_t i = 0; i < r.n_kvs; i++)
		apply_kv(c, &r.kvs[i], false);
	if (r.revision > c->view.epoch)
		c->view.epoch = r.revision;
	pthread_mutex_unlock(&c->mu);
	int64_t rev = r.revision;
	ol_etcd_range_result_fini(&r);
	return rev;
}

static void *
watch_main(void *arg)
{
	struct ol_cluster *c = arg;
	int64_t back = 200;
	while (!atomic_load(&c->stop)) {
		int64_t rev = view_load(c);
		if (rev < 0) {
			nap(c, back);
			back = back < 5000 ? back * 2 : 5000;
			continue;
		}
		back = 200;
		int64_t compact = 0;
		int rc = ol_etcd_watch(c->etcd, c->prefix, OL_ETCD_PREFIX, rev + 1, on_events, c,
				       &c->stop, &compact);
		if (rc == OL_ETCD_ECOMPACTED)
			ol_info("cluster: member watch fell behind a compaction (revision %lld): "
				"reading the list again",
				(long long)compact);
		else if (rc && !atomic_load(&c->stop))
			ol_warn("cluster: member watch ended: %s; reading the list again",
				strerror(rc < 0 && rc > -4096 ? -rc : EIO));
	}
	return NULL;
}

int
ol_cluster_revoke(struct ol_cluster *c, int64_t lease)
{
	if (!c || lease <= 0)
		return -EINVAL;
	return ol_etcd_lease_revoke(c->etcd, lease);
}

int
ol_cluster_members(struct ol_cluster *c, struct ol_cluster_view *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->mu);
	out->epoch = c->view.epoch;
	out->n = c->view.n;
	out->members = malloc((c->view.n ? c->view.n : 1) * sizeof(*out->members));
	if (out->members && c->view.n)
		memcpy(out->members, c->view.members, c->view.n * sizeof(*out->members));
	pthread_mutex_unlock(&c->mu);
	if (!out->members) {
		memset(out, 0, sizeof(*out));
		return -ENOMEM;
	}
	return 0;
}

void
ol_cluster_view_fini(struct ol_cluster_view *v)
{
	free(v->members);
	memset(v, 0, sizeof(*v));
}

static void *
start_thread(struct ol_cluster *c, pthread_t *t, void *(*fn)(void *), const char *name)
{
	if (pthread_create(t, NULL, fn, c) != 0)
		return NULL;
	pthread_setname_np(*t, name);
	return c;
}

int
ol_cluster_start(const struct ol_config *cfg, struct ol_cluster **out)
{
	*out = NULL;
	if (!cfg->cluster_etcd[0])
		return 0;
	const char *addrs[] = {cfg->s3_addr, ol_config_kv_listen(cfg), cfg->rpc_addr};
	for (int i = 0; i < 3 && !cfg->cluster_advertise[0]; i++)
		if (addrs[i][0] && ol_config_addr_wildcard(addrs[i])) {
			ol_warn("cluster: %s binds every interface and [cluster] advertise is not "
				"set: other nodes will be told to reach this node on loopback; set "
				"[cluster] advertise to the address they reach it at",
				addrs[i]);
			break;
		}
	const char *eps[OL_ETCD_MAX_ENDPOINTS];
	char buf[OL_ETCD_MAX_ENDPOINTS][OL_CFG_STR];
	unsigned n = 0;
	while (n < OL_ETCD_MAX_ENDPOINTS &&
	       ol_config_list_item(cfg->cluster_etcd, n, buf[n], sizeof(buf[n])) == 0) {
		eps[n] = buf[n];
		n++;
	}
	struct ol_cluster *c = ol_xcalloc(1, sizeof(*c));
	c->cfg = cfg;
	/* each call is given a third of the lease by default: a keepalive always has time for a
	 * retry ([cluster] etcd_timeout_ms replaces it, for tests of a hung etcd) */
	unsigned timeout_ms = cfg->cluster_etcd_timeout_ms ? cfg->cluster_etcd_timeout_ms
							   : cfg->cluster_lease_ttl_s * 1000 / 3;
	int rc = ol_etcd_new(eps, n, timeout_ms, &c->etcd);
	if (!rc && (rc = ol_etcd_new(eps, n, timeout_ms, &c->ka_etcd)) != 0)
		ol_etcd_free(c->etcd);
	if (rc) {
		free(c);
		return rc;
	}
	snprintf(c->prefix, sizeof(c->prefix), "%smembers/", cfg->cluster_prefix);
	snprintf(c->key, sizeof(c->key), "%s%u", c->prefix, cfg->self_id);
	snprintf(c->free_prefix, sizeof(c->free_prefix), "%sfree/", cfg->cluster_prefix);
	snprintf(c->free_key, sizeof(c->free_key), "%s%u", c->free_prefix, cfg->self_id);
	c->value = member_json(cfg);
	ol_cluster_serve_init(c);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->ka_started = start_thread(c, &c->ka, keepalive_main, "ol-cluster-ka") != NULL;
	c->watch_started = start_thread(c, &c->watch, watch_main, "ol-cluster-wat") != NULL;
	if (!c->ka_started || !c->watch_started) {
		ol_cluster_stop(c);
		return -EAGAIN;
	}
	ol_info("cluster: etcd %s, registering as %s", cfg->cluster_etcd, c->key);
	*out = c;
	return 0;
}

void
ol_cluster_hurry(struct ol_cluster *c)
{
	if (c)
		ol_etcd_cutoff(c->etcd, OL_CLUSTER_STOP_ETCD_MS);
}

void
ol_cluster_stop(struct ol_cluster *c)
{
	if (!c)
		return;
	ol_cluster_hurry(c);
	ol_etcd_cutoff(c->ka_etcd, OL_CLUSTER_STOP_ETCD_MS);
	ol_cluster_lead_stop(c); /* resigns while the lease still lives */
	pthread_mutex_lock(&c->mu);
	atomic_store(&c->stop, 1);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (c->ka_started)
		pthread_join(c->ka, NULL);
	if (c->watch_started)
		pthread_join(c->watch, NULL);
	if (c->lease) {
		int rc = ol_etcd_lease_revoke(c->etcd, c->lease);
		if (rc)
			ol_warn("cluster: could not revoke lease %lld (%s): the member key "
				"goes when it expires",
				(long long)c->lease, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
		else
			ol_info("cluster: left (lease %lld revoked)", (long long)c->lease);
	}
	ol_cluster_lead_free(c);
	ol_etcd_free(c->etcd);
	ol_etcd_free(c->ka_etcd);
	free(c->value);
	free(c->view.members);
	ol_cluster_serve_fini(c);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
