/* cluster/layout.c - build the layout from [[nodes]], and its JSON form. See layout.h. */
#include "cluster/layout.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
ol_layout_fini(struct ol_layout *l)
{
	for (unsigned i = 0; i < l->n_pools; i++)
		free(l->pools[i].slots);
	free(l->pools);
	memset(l, 0, sizeof(*l));
}

/* the node for the next slot of a set: most drives left, not in the set yet if possible */
static unsigned
pick(const unsigned *left, const bool *in_set, unsigned n_nodes)
{
	unsigned best = n_nodes;
	for (int pass = 0; pass < 2 && best == n_nodes; pass++)
		for (unsigned i = 0; i < n_nodes; i++)
			if (left[i] && (pass || !in_set[i]) &&
			    (best == n_nodes || left[i] > left[best]))
				best = i;
	return best;
}

static int
fill_sets(const unsigned *ids, const unsigned *disks, unsigned n_nodes, unsigned n,
	  struct ol_layout_pool *pool)
{
	unsigned *left = calloc(n_nodes, sizeof(*left)), *used = calloc(n_nodes, sizeof(*used));
	bool *in_set = calloc(n_nodes, sizeof(*in_set));
	int rc = (left && used && in_set) ? 0 : -ENOMEM;
	for (unsigned i = 0; !rc && i < n_nodes; i++)
		left[i] = disks[i];
	for (unsigned s = 0; !rc && s < pool->n_sets; s++) {
		memset(in_set, 0, n_nodes * sizeof(*in_set));
		for (unsigned j = 0; j < n; j++) {
			unsigned i = pick(left, in_set, n_nodes);
			if (i == n_nodes) {
				rc = -EINVAL;
				break;
			}
			pool->slots[s * n + j] = (struct ol_layout_slot){ids[i], used[i]++};
			left[i]--;
			in_set[i] = true;
		}
	}
	free(left);
	free(used);
	free(in_set);
	return rc;
}

int
ol_layout_build(const unsigned *ids, const unsigned *disks, unsigned n_nodes, unsigned set_drives,
		unsigned parity, const char *deployment_id, struct ol_layout *out)
{
	memset(out, 0, sizeof(*out));
	unsigned long total = 0;
	for (unsigned i = 0; i < n_nodes; i++)
		total += disks[i];
	if (!total || !set_drives || parity >= set_drives || total % set_drives ||
	    total > OL_LAYOUT_MAX_SLOTS || strlen(deployment_id) >= sizeof(out->deployment_id))
		return -EINVAL;
	out->pools = calloc(1, sizeof(*out->pools));
	if (!out->pools)
		return -ENOMEM;
	out->n_pools = 1;
	memcpy(out->deployment_id, deployment_id, strlen(deployment_id) + 1);
	out->set_drives = set_drives;
	out->parity = parity;
	out->pools[0].n_sets = (unsigned)(total / set_drives);
	out->pools[0].slots = calloc(total, sizeof(struct ol_layout_slot));
	int rc = out->pools[0].slots ? fill_sets(ids, disks, n_nodes, set_drives, &out->pools[0])
				     : -ENOMEM;
	if (rc)
		ol_layout_fini(out);
	return rc;
}

int
ol_layout_add_pool(struct ol_layout *l, const unsigned *ids, const unsigned *disks,
		   unsigned n_nodes)
{
	unsigned long total = 0, have = 0;
	for (unsigned i = 0; i < n_nodes; i++)
		total += disks[i];
	for (unsigned p = 0; p < l->n_pools; p++)
		have += (unsigned long)l->pools[p].n_sets * l->set_drives;
	if (!total || !l->set_drives || total % l->set_drives ||
	    have + total > OL_LAYOUT_MAX_SLOTS || l->n_pools >= 1024)
		return -EINVAL;
	for (unsigned i = 0; i < n_nodes; i++)
		if (ol_layout_has_node(l, ids[i]))
			return -EEXIST;
	struct ol_layout_pool np = {.n_sets = (unsigned)(total / l->set_drives)};
	np.slots = calloc(total, sizeof(*np.slots));
	if (!np.slots)
		return -ENOMEM;
	int rc = fill_sets(ids, disks, n_nodes, l->set_drives, &np);
	struct ol_layout_pool *pools =
	    rc ? NULL : realloc(l->pools, (l->n_pools + 1) * sizeof(*l->pools));
	if (!pools) {
		free(np.slots);
		return rc ? rc : -ENOMEM;
	}
	l->pools = pools;
	l->pools[l->n_pools++] = np;
	return 0;
}

bool
ol_layout_has_node(const struct ol_layout *l, unsigned node)
{
	for (unsigned p = 0; p < l->n_pools; p++)
		for (size_t i = 0; i < (size_t)l->pools[p].n_sets * l->set_drives; i++)
			if (l->pools[p].slots[i].node == node)
				return true;
	return false;
}

bool
ol_layout_extends(const struct ol_layout *old, const struct ol_layout *l)
{
	if (strcmp(old->deployment_id, l->deployment_id) || old->set_drives != l->set_drives ||
	    old->parity != l->parity || l->n_pools < old->n_pools)
		return false;
	for (unsigned p = 0; p < old->n_pools; p++)
		if (old->pools[p].n_sets != l->pools[p].n_sets ||
		    old->pools[p].state != l->pools[p].state ||
		    memcmp(old->pools[p].slots, l->pools[p].slots,
			   (size_t)old->pools[p].n_sets * old->set_drives *
			       sizeof(*old->pools[p].slots)))
			return false;
	return true;
}

bool
ol_layout_follows(const struct ol_layout *old, const struct ol_layout *l)
{
	if (strcmp(old->deployment_id, l->deployment_id) || old->set_drives != l->set_drives ||
	    old->parity != l->parity || l->n_pools < old->n_pools)
		return false;
	for (unsigned p = 0; p < old->n_pools; p++) {
		unsigned a = old->pools[p].state, b = l->pools[p].state;

		if (old->pools[p].n_sets != l->pools[p].n_sets ||
		    memcmp(old->pools[p].slots, l->pools[p].slots,
			   (size_t)old->pools[p].n_sets * old->set_drives *
			       sizeof(*old->pools[p].slots)) ||
		    (b < a && !(a == OL_POOL_DRAINING && b == OL_POOL_ACTIVE)))
			return false;
	}
	return true;
}

unsigned
ol_layout_live_pools(const struct ol_layout *l)
{
	unsigned n = 0;

	for (unsigned p = 0; p < l->n_pools; p++)
		n += l->pools[p].state != OL_POOL_REMOVED;
	return n;
}

unsigned
ol_layout_store_pool(const struct ol_layout *l, unsigned p)
{
	unsigned n = 0;

	for (unsigned i = 0; i < p && i < l->n_pools; i++)
		n += l->pools[i].state != OL_POOL_REMOVED;
	return n;
}

int
ol_layout_draining(const struct ol_layout *l)
{
	for (unsigned p = 0; p < l->n_pools; p++)
		if (l->pools[p].state == OL_POOL_DRAINING)
			return (int)p;
	return -1;
}

unsigned
ol_layout_serving_pool(const struct ol_layout *l)
{
	for (unsigned p = 0; p < l->n_pools; p++)
		if (l->pools[p].state == OL_POOL_ACTIVE)
			return p;
	for (unsigned p = 0; p < l->n_pools; p++)
		if (l->pools[p].state != OL_POOL_REMOVED)
			return p;
	return 0;
}

static const char *const state_names[] = {"active", "draining", "removed"};

const char *
ol_layout_state_name(unsigned state)
{
	return state < 3 ? state_names[state] : "?";
}

unsigned
ol_layout_set_span(const struct ol_layout *l, unsigned p, unsigned s)
{
	const struct ol_layout_slot *set = &l->pools[p].slots[(size_t)s * l->set_drives];
	unsigned span = 0;
	for (unsigned j = 0; j < l->set_drives; j++) {
		unsigned k = 0;
		while (k < j && set[k].node != set[j].node)
			k++;
		span += k == j;
	}
	return span;
}

char *
ol_layout_to_json(const struct ol_layout *l)
{
	json_t *o = json_pack("{s:i, s:s, s:I, s:I}", "version", 1, "deployment_id",
			      l->deployment_id, "set_drive_count", (json_int_t)l->set_drives,
			      "parity", (json_int_t)l->parity);
	json_t *pools = json_array();
	if (!o || !pools || json_object_set(o, "pools", pools))
		goto bad;
	for (unsigned p = 0; p < l->n_pools; p++) {
		json_t *sets = json_array();
		json_t *jp = json_pack("{s:o}", "sets", sets);
		if (jp && l->pools[p].state &&
		    json_object_set_new(jp, "state",
					json_string(ol_layout_state_name(l->pools[p].state))))
			goto bad;
		if (json_array_append_new(pools, jp))
			goto bad;
		for (unsigned s = 0; s < l->pools[p].n_sets; s++) {
			json_t *set = json_array();
			if (json_array_append_new(sets, set))
				goto bad;
			for (unsigned j = 0; j < l->set_drives; j++) {
				const struct ol_layout_slot *sl =
				    &l->pools[p].slots[(size_t)s * l->set_drives + j];
				if (json_array_append_new(
					set, json_pack("{s:I, s:I}", "node", (json_int_t)sl->node,
						       "drive", (json_int_t)sl->drive)))
					goto bad;
			}
		}
	}
	json_decref(pools);
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
bad:
	json_decref(pools);
	json_decref(o);
	return NULL;
}

static int
u32_of(const json_t *o, const char *name, unsigned max, unsigned *out)
{
	const json_t *j = json_object_get(o, name);
	if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > max)
		return -EPROTO;
	*out = (unsigned)json_integer_value(j);
	return 0;
}

static int
pool_from(const json_t *jp, unsigned n, struct ol_layout_pool *pool, size_t *total)
{
	const json_t *sets = json_object_get(jp, "sets");
	if (!json_is_array(sets) || json_array_size(sets) == 0)
		return -EPROTO;
	size_t ns = json_array_size(sets);
	if ((*total += ns * n) > OL_LAYOUT_MAX_SLOTS)
		return -EPROTO;
	pool->slots = calloc(ns * n, sizeof(*pool->slots));
	if (!pool->slots)
		return -ENOMEM;
	pool->n_sets = (unsigned)ns;
	const json_t *st = json_object_get(jp, "state");
	if (st) {
		unsigned i = 0;
		while (i < 3 &&
		       (!json_is_string(st) || strcmp(json_string_value(st), state_names[i])))
			i++;
		if (i == 3)
			return -EPROTO;
		pool->state = i;
	}
	for (size_t s = 0; s < ns; s++) {
		const json_t *set = json_array_get(sets, s);
		if (!json_is_array(set) || json_array_size(set) != n)
			return -EPROTO;
		for (unsigned j = 0; j < n; j++) {
			const json_t *sl = json_array_get(set, j);
			struct ol_layout_slot *d = &pool->slots[s * n + j];
			if (!json_is_object(sl) || u32_of(sl, "node", 65535, &d->node) ||
			    u32_of(sl, "drive", 65535, &d->drive))
				return -EPROTO;
		}
	}
	return 0;
}

int
ol_layout_from_json(const char *buf, size_t len, struct ol_layout *out)
{
	memset(out, 0, sizeof(*out));
	json_error_t e;
	json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	const json_t *id = json_object_get(o, "deployment_id");
	const json_t *pools = json_object_get(o, "pools");
	int rc = -EPROTO;
	if (!json_is_object(o) || !json_is_string(id) ||
	    json_string_length(id) >= sizeof(out->deployment_id) || !json_is_array(pools) ||
	    json_array_size(pools) == 0 || json_array_size(pools) > 1024 ||
	    u32_of(o, "set_drive_count", 256, &out->set_drives) ||
	    u32_of(o, "parity", 128, &out->parity) || out->set_drives == 0 ||
	    out->parity >= out->set_drives)
		goto out;
	memcpy(out->deployment_id, json_string_value(id), json_string_length(id) + 1);
	out->pools = calloc(json_array_size(pools), sizeof(*out->pools));
	rc = out->pools ? 0 : -ENOMEM;
	size_t total = 0;
	for (size_t p = 0; !rc && p < json_array_size(pools); p++) {
		out->n_pools++;
		rc = pool_from(json_array_get(pools, p), out->set_drives, &out->pools[p], &total);
	}
out:
	if (rc)
		ol_layout_fini(out);
	json_decref(o);
	return rc;
}

/* ---- the serving leader's offline drives ---- */

char *
ol_offline_encode(uint64_t epoch, unsigned pool, unsigned pools, const bool *off, unsigned n)
{
	char head[128];
	int hl;
	char *v;

	if (n > OL_LAYOUT_MAX_SLOTS)
		return NULL;
	hl = snprintf(head, sizeof(head),
		      "epoch=%llu pool=%u pools=%u drives=%u offline=", (unsigned long long)epoch,
		      pool, pools, n);
	v = malloc((size_t)hl + n + 1);
	if (!v)
		return NULL;
	memcpy(v, head, (size_t)hl);
	for (unsigned i = 0; i < n; i++)
		v[hl + (int)i] = off[i] ? '1' : '0';
	v[(size_t)hl + n] = '\0';
	return v;
}

/* "name=DIGITS " at *p (within end): the number into *out, *p past it; -EPROTO */
static int
off_field(const char **p, const char *end, const char *name, uint64_t max, uint64_t *out)
{
	size_t nl = strlen(name);
	uint64_t x = 0;
	const char *q;

	if ((size_t)(end - *p) < nl + 2 || memcmp(*p, name, nl) || (*p)[nl] != '=')
		return -EPROTO;
	q = *p + nl + 1;
	if (q == end || *q < '0' || *q > '9')
		return -EPROTO;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		x = x * 10 + (uint64_t)(*q - '0');
		if (x > max)
			return -EPROTO;
	}
	if (q == end || *q != ' ')
		return -EPROTO;
	*p = q + 1;
	*out = x;
	return 0;
}

int
ol_offline_decode(const char *v, size_t len, struct ol_offline *o)
{
	const char *p = v, *end = v + len;
	uint64_t epoch, pool, pools, n;

	memset(o, 0, sizeof(*o));
	if (!v || off_field(&p, end, "epoch", UINT64_MAX / 10 - 1, &epoch) ||
	    off_field(&p, end, "pool", UINT32_MAX, &pool) ||
	    off_field(&p, end, "pools", UINT32_MAX, &pools) ||
	    off_field(&p, end, "drives", OL_LAYOUT_MAX_SLOTS, &n))
		return -EPROTO;
	if ((size_t)(end - p) != strlen("offline=") + n || memcmp(p, "offline=", 8))
		return -EPROTO;
	p += 8;
	o->off = malloc(n ? n : 1);
	if (!o->off)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		if (p[i] != '0' && p[i] != '1') {
			ol_offline_fini(o);
			return -EPROTO;
		}
		o->off[i] = p[i] == '1';
	}
	o->epoch = epoch;
	o->pool = (unsigned)pool;
	o->pools = (unsigned)pools;
	o->n = (unsigned)n;
	return 0;
}

void
ol_offline_fini(struct ol_offline *o)
{
	free(o->off);
	memset(o, 0, sizeof(*o));
}

bool
ol_offline_covers(const struct ol_offline *o, unsigned pools, const bool *off, unsigned n)
{
	if (!o->off || o->pools != pools || o->n != n)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (off[i] && !o->off[i])
			return false;
	return true;
}
