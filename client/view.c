/* client/view.c - libopenlake's view of the pool: the seeds as given, or a cluster's live
 * members learned with VIEW from any node (docs/kv-protocol.md, "Cluster view"), and where a
 * key goes in it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "client_int.h"
#include "kv/net.h"

#define OLC_VIEW_RETRY_MS 200 /* a stale view is asked for again at most this often */

static void
static_view(const struct ol_client *c, struct olc_view *v)
{
	memset(v, 0, offsetof(struct olc_view, m));
	for (size_t i = 0; i < c->n_seeds; i++)
		v->m[v->n++] = (struct olc_vmember){.node = (uint32_t)i, .weight = 1};
}

void
olc_view_init(struct ol_client *c)
{
	pthread_mutex_init(&c->vmu, NULL);
	static_view(c, &c->cur);
}

void
olc_view_saw_tag(struct ol_client *c, uint32_t tag)
{
	if (tag && atomic_load_explicit(&c->cluster_mode, memory_order_relaxed) &&
	    tag != atomic_load_explicit(&c->cur_tag, memory_order_relaxed))
		atomic_store_explicit(&c->stale, true, memory_order_relaxed);
}

void
olc_view_snapshot(struct ol_client *c, struct olc_view *cur, struct olc_view *prev, bool *has_prev)
{
	pthread_mutex_lock(&c->vmu);
	*cur = c->cur;
	*has_prev = c->has_prev && olc_now_ms() - c->changed_ms < c->grace_ms;
	if (*has_prev)
		*prev = c->prev;
	pthread_mutex_unlock(&c->vmu);
}

/* Weighted rendezvous: score = -weight / ln(u), u uniform in (0, 1) from the key and the
 * member's id; the highest wins. A member's expected share is its weight over the sum. */
static double
score(const struct ol_client *c, const struct olc_view *v, const struct olc_vmember *m,
      const uint8_t *key)
{
	if (!v->cluster)
		return (double)XXH3_64bits_withSeed(key, OL_KV_KEY_BYTES,
						    c->nodes[m->node].seed ^ c->ns_seed);
	uint64_t h = XXH3_64bits_withSeed(key, OL_KV_KEY_BYTES, m->seed ^ c->ns_seed);
	double u = ((double)(h >> 11) + 0.5) * 0x1p-53;
	return -(double)m->weight / log(u);
}

unsigned
olc_place(const struct ol_client *c, const struct olc_view *v, const uint8_t *key, uint32_t *out,
	  unsigned r)
{
	double best[OLC_MAX_REPLICAS];
	unsigned k = 0;
	if (r > OLC_MAX_REPLICAS)
		r = OLC_MAX_REPLICAS;
	for (uint32_t i = 0; i < v->n; i++) {
		double s = score(c, v, &v->m[i], key);
		unsigned j = k < r ? k++ : r;
		while (j > 0 && best[j - 1] < s) {
			if (j < r) {
				best[j] = best[j - 1];
				out[j] = out[j - 1];
			}
			j--;
		}
		if (j < r) {
			best[j] = s;
			out[j] = v->m[i].node;
		}
	}
	return k;
}

int
olc_node_add(struct ol_client *c, const char *addr)
{
	size_t n = atomic_load(&c->n_nodes);
	for (size_t i = 0; i < n; i++)
		if (strcmp(c->nodes[i].addr, addr) == 0)
			return (int)i;
	if (n == OLC_MAX_NODES || strlen(addr) >= sizeof(c->nodes[n].addr))
		return -ENOSPC;
	struct olc_node *nd = &c->nodes[n];
	memset(nd, 0, sizeof(*nd));
	snprintf(nd->addr, sizeof(nd->addr), "%s", addr);
	nd->seed = XXH3_64bits(nd->addr, strlen(nd->addr));
	pthread_mutex_init(&nd->mu, NULL);
	atomic_store(&c->n_nodes, n + 1); /* published whole */
	return (int)n;
}

/* One VIEW from node nd into v. 0, -ENOTSUP (an older server), -errno; *stale: it failed
 * on a pooled connection the server had closed (a restart), worth one more try. */
static int
ask_view_once(struct ol_client *c, struct olc_node *nd, struct ol_kvp_view *v, bool *stale)
{
	struct olc_conn cn;
	int r = olc_conn_get(c, nd, &cn);
	*stale = false;
	if (r < 0)
		return r; /* olc_conn_get marked the node down */
	uint8_t *buf = NULL;
	struct ol_kvp_hdr h = {.op = OL_KVP_VIEW}, rp;
	if (!cn.has_view) {
		olc_conn_put(c, nd, &cn, true);
		return -ENOTSUP;
	}
	r = olc_send(c, &cn, &h, NULL, 0);
	if (r == 0 && (r = olc_recv_hdr(&cn, &h, &rp)) == 0 && rp.body_len > OL_KVP_MAX_BLOB)
		r = -EPROTO;
	if (r == 0 && !(buf = malloc(rp.body_len ? rp.body_len : 1)))
		r = -ENOMEM;
	if (r == 0)
		r = olc_read(&cn, buf, rp.body_len);
	*stale = cn.reused && (r == -ECONNRESET || r == -EPIPE);
	olc_conn_put(c, nd, &cn, r == 0);
	if (*stale)
		olc_node_drop_idle(nd);
	else if (r < 0 && r != -ENOMEM && r != -EPROTO)
		olc_node_down(c, nd, r);
	if (r == 0 && ol_kvp_view_decode(buf, rp.body_len, v) < 0)
		r = -EPROTO;
	free(buf);
	return r;
}

static int
ask_view(struct ol_client *c, struct olc_node *nd, struct ol_kvp_view *v)
{
	bool stale;
	int r = ask_view_once(c, nd, v, &stale);
	return stale ? ask_view_once(c, nd, v, &stale) : r;
}

/* The client's view from a VIEW answer (under vmu). */
static void
build_view(struct ol_client *c, const struct ol_kvp_view *kv, struct olc_view *v)
{
	if (kv->epoch == 0) { /* a node without a cluster: the seeds stay the pool */
		static_view(c, v);
		return;
	}
	memset(v, 0, offsetof(struct olc_view, m));
	v->cluster = true;
	v->epoch = kv->epoch;
	v->tag = kv->tag;
	for (uint32_t i = 0; i < kv->n && v->n < OLC_MAX_NODES; i++) {
		const struct ol_kvp_view_member *m = &kv->m[i];
		int nd = m->weight ? olc_node_add(c, m->addr) : -EINVAL;
		if (nd < 0)
			continue;
		uint8_t idb[8];
		for (int b = 0; b < 8; b++)
			idb[b] = (uint8_t)(m->id >> (8 * b));
		v->m[v->n++] = (struct olc_vmember){.node = (uint32_t)nd,
						    .weight = m->weight,
						    .id = m->id,
						    .seed = XXH3_64bits(idb, sizeof(idb))};
	}
	if (v->n == 0) /* no member takes keys: keep to the seeds */
		static_view(c, v);
}

static void
apply_view(struct ol_client *c, const struct ol_kvp_view *kv)
{
	struct olc_view *nv = malloc(sizeof(*nv));
	if (!nv)
		return;
	pthread_mutex_lock(&c->vmu);
	build_view(c, kv, nv);
	bool changed = nv->cluster != c->cur.cluster || nv->tag != c->cur.tag || nv->n != c->cur.n;
	if (changed) {
		c->prev = c->cur;
		c->has_prev = true;
		c->changed_ms = olc_now_ms();
		c->cur = *nv;
		atomic_store(&c->cur_tag, nv->tag);
		atomic_store(&c->cluster_mode, nv->cluster);
		atomic_fetch_add(&c->view_changes, 1);
	}
	pthread_mutex_unlock(&c->vmu);
	if (changed)
		olc_log(c, OL_CLIENT_LOG_INFO, "openlake: view %s epoch %llu: %u nodes",
			nv->cluster ? "of the cluster at" : "of the seeds,",
			(unsigned long long)nv->epoch, nv->n);
	free(nv);
}

/* Ask the members of the current view, then the seeds, until one answers. */
static void
refresh(struct ol_client *c)
{
	struct ol_kvp_view *kv = malloc(sizeof(*kv));
	struct olc_view *cur = malloc(sizeof(*cur));
	if (!kv || !cur)
		goto out;
	pthread_mutex_lock(&c->vmu);
	*cur = c->cur;
	pthread_mutex_unlock(&c->vmu);
	uint32_t order[OLC_MAX_NODES * 2];
	unsigned n = 0;
	for (uint32_t i = 0; i < cur->n; i++)
		order[n++] = cur->m[i].node;
	for (uint32_t i = 0; i < c->n_seeds; i++)
		order[n++] = i;
	for (unsigned i = 0; i < n; i++) {
		int r = ask_view(c, &c->nodes[order[i]], kv);
		if (r == 0) {
			apply_view(c, kv);
			atomic_store(&c->view_ms, olc_now_ms());
			atomic_store(&c->stale, false);
			break;
		}
	}
out:
	free(kv);
	free(cur);
}

void
olc_view_maybe_refresh(struct ol_client *c)
{
	uint64_t now = olc_now_ms();
	bool due = atomic_load(&c->stale) || now - atomic_load(&c->view_ms) >= c->refresh_ms;
	if (!due || now - atomic_load(&c->try_ms) < OLC_VIEW_RETRY_MS)
		return;
	if (atomic_exchange(&c->refreshing, true))
		return;
	atomic_store(&c->try_ms, now);
	refresh(c);
	atomic_store(&c->refreshing, false);
}

int
olc_view_json(struct ol_client *c, char *buf, size_t cap)
{
	struct olc_view *v = malloc(sizeof(*v));
	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&c->vmu);
	*v = c->cur;
	pthread_mutex_unlock(&c->vmu);
	size_t len = 0;
	int n =
	    snprintf(buf, cap,
		     "{\"cluster\":%s,\"epoch\":%llu,\"tag\":%u,\"replicas\":%u,"
		     "\"grace_ms\":%u,\"changes\":%llu,\"put_failed\":%llu,"
		     "\"grace_hits\":%llu,\"members\":[",
		     v->cluster ? "true" : "false", (unsigned long long)v->epoch, v->tag,
		     c->replicas, c->grace_ms, (unsigned long long)atomic_load(&c->view_changes),
		     (unsigned long long)atomic_load(&c->put_failed),
		     (unsigned long long)atomic_load(&c->grace_hits));
	for (uint32_t i = 0; n > 0 && (size_t)n < cap - len && i <= v->n; i++) {
		len += (size_t)n;
		n = i == v->n ? snprintf(buf + len, cap - len, "]}")
			      : snprintf(buf + len, cap - len,
					 "%s{\"id\":%llu,\"addr\":\"%s\",\"weight\":%u}",
					 i ? "," : "", (unsigned long long)v->m[i].id,
					 c->nodes[v->m[i].node].addr, v->m[i].weight);
	}
	free(v);
	if (n < 0 || (size_t)n >= cap - len)
		return -ENOSPC;
	return (int)(len + (size_t)n);
}
