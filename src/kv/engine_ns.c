/* kv/engine_ns.c - the KV engine's namespace slots: what each namespace holds in each tier, its
 * name for the figures (see "Namespaces" in engine_int.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kv/engine_int.h"
#include "openlake/openlake.h"

void
ol_kve_ns_init(struct ol_kve *e)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, OL_KVE_NS_SLOTS * sizeof(struct kns)) != 0)
		ol_die("kv: out of memory for the namespace table");
	memset(p, 0, OL_KVE_NS_SLOTS * sizeof(struct kns));
	e->ns = p;
	pthread_mutex_init(&e->nsmu, NULL);
}

void
ol_kve_ns_fini(struct ol_kve *e)
{
	if (!e->ns)
		return;
	for (unsigned i = 0; i < OL_KVE_NS_SLOTS; i++)
		free(e->ns[i].name);
	free(e->ns);
	pthread_mutex_destroy(&e->nsmu);
}

static void
ns_ids(const uint8_t id[16], uint64_t *a, uint64_t *b)
{
	memcpy(a, id, 8);
	memcpy(b, id + 8, 8);
	*a |= 1; /* 0 marks a free slot */
}

/* Probe for id (a, b): its slot, or -(free slot) to claim, or 0 when the table is full. */
static int
ns_probe(struct ol_kve *e, uint64_t a, uint64_t b)
{
	unsigned n = OL_KVE_NS_SLOTS - 1; /* slots 1..n; 0 is the shared one */
	for (unsigned j = 0; j < n; j++) {
		unsigned i = 1 + (unsigned)((a >> 1) + j) % n;
		uint64_t x = atomic_load_explicit(&e->ns[i].id0, memory_order_acquire);
		if (x == 0)
			return -(int)i;
		if (x == a && e->ns[i].id1 == b)
			return (int)i;
	}
	return 0;
}

uint16_t
ol_kve_ns_slot(struct ol_kve *e, const uint8_t id[16])
{
	uint64_t a, b;
	ns_ids(id, &a, &b);
	int i = ns_probe(e, a, b); /* lock-free: a claimed slot never changes */
	if (i >= 0)
		return (uint16_t)i;
	pthread_mutex_lock(&e->nsmu);
	i = ns_probe(e, a, b);
	if (i < 0) {
		i = -i;
		e->ns[i].id1 = b;
		atomic_store_explicit(&e->ns[i].id0, a, memory_order_release);
	}
	pthread_mutex_unlock(&e->nsmu);
	return (uint16_t)i;
}

void
ol_kve_ns_name(struct ol_kve *e, const uint8_t ns[16], const char *name, size_t len)
{
	uint16_t i = ol_kve_ns_slot(e, ns);
	if (i == 0)
		return; /* the shared slot has no one name */
	pthread_mutex_lock(&e->nsmu);
	if (!e->ns[i].name) {
		char *s = ol_xmalloc(len + 1);
		memcpy(s, name, len);
		s[len] = '\0';
		e->ns[i].name = s;
	}
	pthread_mutex_unlock(&e->nsmu);
}

static uint64_t
nonneg(_Atomic int64_t *v)
{
	int64_t x = atomic_load_explicit(v, memory_order_relaxed);
	return x > 0 ? (uint64_t)x : 0; /* a move in flight may show a moment below zero */
}

void
ol_kve_ns_each(struct ol_kve *e, void (*fn)(void *arg, const struct ol_kve_ns *n), void *arg)
{
	pthread_mutex_lock(&e->nsmu);
	for (unsigned i = 1; i <= OL_KVE_NS_SLOTS; i++) {
		unsigned s = i % OL_KVE_NS_SLOTS; /* the shared slot 0 last */
		struct kns *k = &e->ns[s];
		struct ol_kve_ns n = {.name = k->name, .other = s == 0};
		uint64_t a = atomic_load_explicit(&k->id0, memory_order_acquire);
		n.dram_blocks = nonneg(&k->dram_n);
		n.dram_bytes = nonneg(&k->dram_b);
		n.nvme_blocks = nonneg(&k->nvme_n);
		n.nvme_bytes = nonneg(&k->nvme_b);
		n.quota_evictions = atomic_load_explicit(&k->quota_ev, memory_order_relaxed);
		if (s == 0 && !n.dram_blocks && !n.nvme_blocks && !n.quota_evictions)
			continue;
		if (s != 0 && a == 0)
			continue;
		if (s != 0) {
			a &= ~(uint64_t)1; /* bit 0 of the hash is lost: show it as 0 */
			memcpy(n.id, &a, 8);
			memcpy(n.id + 8, &k->id1, 8);
		}
		fn(arg, &n);
	}
	pthread_mutex_unlock(&e->nsmu);
}

const char *
ol_kve_ns_label(const struct ol_kve_ns *n, char *buf, size_t cap)
{
	if (n->other)
		return "(other)";
	if (n->name)
		return n->name;
	int w = snprintf(buf, cap, "(unnamed ");
	for (unsigned i = 0; i < 16 && w > 0 && (size_t)w + 3 < cap; i++)
		w += snprintf(buf + w, cap - (size_t)w, "%02x", n->id[i]);
	if (w > 0 && (size_t)w + 1 < cap)
		snprintf(buf + w, cap - (size_t)w, ")");
	return buf;
}

uint64_t
ol_kve_ns_quota(const struct ol_kve *e)
{
	return e->quota;
}

/* JSON rows (ol_kve_ns_each callback). */
struct nsjson {
	char *buf;
	size_t len, cap, room;
	unsigned rows, left_off;
};

/* s as a JSON string body (quotes, backslashes and control bytes escaped) into b. Returns
 * the length, or cap when it does not fit. */
static size_t
json_esc(char *b, size_t cap, const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int w = *p == '"' || *p == '\\' ? snprintf(b + n, cap - n, "\\%c", *p)
			: *p < 0x20		? snprintf(b + n, cap - n, "\\u%04x", *p)
						: snprintf(b + n, cap - n, "%c", *p);
		if (w < 0 || n + (size_t)w >= cap)
			return cap;
		n += (size_t)w;
	}
	return n;
}

static void
ns_json_row(void *arg, const struct ol_kve_ns *n)
{
	struct nsjson *j = arg;
	char lb[64];
	size_t cap = j->cap - j->room, at = j->len;
	int w = snprintf(j->buf + at, cap - at, "%s{\"namespace\":\"", j->rows ? "," : "");
	if (w < 0 || at + (size_t)w >= cap)
		goto full;
	at += (size_t)w;
	size_t e = json_esc(j->buf + at, cap - at, ol_kve_ns_label(n, lb, sizeof(lb)));
	if (e >= cap - at)
		goto full;
	at += e;
	w = snprintf(j->buf + at, cap - at,
		     "\",\"dram_blocks\":%llu,\"dram_bytes\":%llu,\"nvme_blocks\":%llu,"
		     "\"nvme_bytes\":%llu,\"quota_evictions\":%llu}",
		     (unsigned long long)n->dram_blocks, (unsigned long long)n->dram_bytes,
		     (unsigned long long)n->nvme_blocks, (unsigned long long)n->nvme_bytes,
		     (unsigned long long)n->quota_evictions);
	if (w < 0 || at + (size_t)w >= cap)
		goto full;
	j->len = at + (size_t)w;
	j->rows++;
	return;
full:
	j->buf[j->len] = '\0';
	j->left_off++;
}

size_t
ol_kve_ns_json(struct ol_kve *e, char *buf, size_t len, size_t cap, size_t room)
{
	struct nsjson j = {buf, len, cap, room + 48, 0, 0};
	int w = snprintf(buf + j.len, cap - j.len, ",\"namespaces\":[");
	if (w < 0 || j.len + (size_t)w + j.room >= cap)
		return len;
	j.len += (size_t)w;
	ol_kve_ns_each(e, ns_json_row, &j);
	w = snprintf(buf + j.len, cap - j.len, "],\"namespaces_left_off\":%u", j.left_off);
	return j.len + (size_t)(w > 0 ? w : 0);
}
