/* cluster/layout.h - the cluster's layout: deployment id, pools -> erasure sets -> slots
 * (node id, drive index on that node), N drives per set and P parity. Written once into etcd
 * by `openlake cluster init` (create-if-absent), read by every node.
 *
 * Pure (no I/O, no logging): build from the [[nodes]] list, encode to and decode from JSON.
 * 0 / -errno; the caller owns the layout and frees it with ol_layout_fini. */
#ifndef OL_CLUSTER_LAYOUT_H
#define OL_CLUSTER_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_LAYOUT_MAX_SLOTS 65536

struct ol_layout_slot {
	unsigned node;	/* [[nodes]] id */
	unsigned drive; /* index into that node's data_dirs */
};

/* A pool's state: `openlake cluster leave` marks it draining (no new key goes there; the
 * serving leader, of set 0 of the first active pool, moves its objects to the other pools), the
 * drain marks it removed when it is empty (its nodes serve nothing any more; it keeps its place so
 * pool numbers stay). */
enum { OL_POOL_ACTIVE = 0, OL_POOL_DRAINING = 1, OL_POOL_REMOVED = 2 };

struct ol_layout_pool {
	unsigned state; /* OL_POOL_*; "state" in the JSON, absent when active */
	unsigned n_sets;
	struct ol_layout_slot *slots; /* n_sets * set_drives, set by set */
};

struct ol_layout {
	char deployment_id[40]; /* random UUID */
	unsigned set_drives;	/* N */
	unsigned parity;	/* P */
	unsigned n_pools;
	struct ol_layout_pool *pools;
};

/* One pool from n_nodes nodes (ids[i] with disks[i] drives). Every set takes its drives from
 * distinct nodes while it can, choosing the nodes with the most drives left (ties: listed
 * first), so each set spans as many nodes as there are; drives of a node are used in order.
 * -EINVAL: no drives, N = 0, P >= N, or a total not divisible by N. */
int ol_layout_build(const unsigned *ids, const unsigned *disks, unsigned n_nodes,
		    unsigned set_drives, unsigned parity, const char *deployment_id,
		    struct ol_layout *out);
void ol_layout_fini(struct ol_layout *l);

/* Grow: append one pool made of these nodes (as ol_layout_build lays a pool out, with l's N).
 * The pools before stay as they are. -EINVAL: no drives, or a total not divisible by N;
 * -EEXIST: a node is in l already; -ENOMEM (l unchanged on any error). */
int ol_layout_add_pool(struct ol_layout *l, const unsigned *ids, const unsigned *disks,
		       unsigned n_nodes);
/* Whether node has a slot in any pool of l. */
bool ol_layout_has_node(const struct ol_layout *l, unsigned node);
/* Whether l is old with pools appended (same deployment, N, P and pools 0..old->n_pools-1,
 * their states too):
 * the only change a running cluster takes without a restart. */
bool ol_layout_extends(const struct ol_layout *old, const struct ol_layout *l);

/* Whether l is old with pools appended and/or pools' states advanced (active -> draining ->
 * removed; a draining pool may also go back to active): what a running node takes. */
bool ol_layout_follows(const struct ol_layout *old, const struct ol_layout *l);
/* Pools not removed; the index among those of pool p (the store's pool number). */
unsigned ol_layout_live_pools(const struct ol_layout *l);
unsigned ol_layout_store_pool(const struct ol_layout *l, unsigned p);
/* The draining pool, or -1. */
int ol_layout_draining(const struct ol_layout *l);
const char *ol_layout_state_name(unsigned state);
/* The pool whose set 0's leader serves the cluster: the first active pool (else the first
 * not removed; 0 for a layout with neither). Its leader moves when `cluster leave` makes that
 * pool draining, and back when the leave is cancelled. */
unsigned ol_layout_serving_pool(const struct ol_layout *l);

/* Distinct nodes in set s of pool p. */
unsigned ol_layout_set_span(const struct ol_layout *l, unsigned p, unsigned s);

/* malloc'd compact JSON, NULL on out of memory. */
char *ol_layout_to_json(const struct ol_layout *l);
/* -EPROTO for anything but a well-formed layout (sizes checked against each other). */
int ol_layout_from_json(const char *buf, size_t len, struct ol_layout *out);

/* ---- the serving leader's offline drives (docs/cluster.md, "Writes on every node") ----
 * The serving leader puts <prefix>offline after each change of which drives its store holds
 * offline. A follower that writes PUTs' data itself (write_any) writes without a drive its own
 * view lacks only while the leader lacks that drive too: it never writes fewer shards than the
 * leader would. The value is text, "epoch=E pool=P pools=K drives=N offline=BITS": the leader's
 * epoch, the pool whose set 0 it leads, the layout's pool count, and one character per drive
 * of the store in its order (every set of every pool, as the store opens them), '1' offline,
 * '0' online. */
struct ol_offline {
	uint64_t epoch;
	unsigned pool, pools;
	unsigned n;   /* drives */
	uint8_t *off; /* n flags, 1 = offline */
};
/* The value for off[0..n) (n <= OL_LAYOUT_MAX_SLOTS), malloc'd; NULL: no memory or n too big. */
char *ol_offline_encode(uint64_t epoch, unsigned pool, unsigned pools, const bool *off, unsigned n);
/* 0 and *o (ol_offline_fini frees it), -EPROTO (not such a value), -ENOMEM. */
int ol_offline_decode(const char *v, size_t len, struct ol_offline *o);
void ol_offline_fini(struct ol_offline *o);
/* Whether a view of pools pools whose drives off[0..n) are offline may write without them: o
 * is of the same pool count and drive count, and every drive offline in off is offline in o. */
bool ol_offline_covers(const struct ol_offline *o, unsigned pools, const bool *off, unsigned n);

#endif
