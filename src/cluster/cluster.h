/* cluster/cluster.h - this daemon's membership in the cluster kept in etcd.
 *
 * With [cluster] etcd set, the daemon registers at <prefix>members/<self_id> under a lease
 * (JSON: id, s3, kv and rpc addresses, drives with paths and sizes, capacity, free bytes (at
 * registration; <prefix>free/<id> keeps the figure current), weight, version,
 * start time), keeps the lease alive from a helper thread ("ol-cluster-ka"), registers again
 * after a lapse (lease expired while the process was frozen, etcd restarted or lost it, key
 * deleted), and revokes the lease on a clean stop. A second thread ("ol-cluster-watch") reads
 * the members prefix at a revision and watches it from there, so ol_cluster_members() is a
 * current snapshot. While etcd cannot be reached the node keeps serving its local store: the
 * threads log once and retry with backoff.
 *
 * Keys under the prefix: members/<id> (leased), layout (written once by `openlake cluster
 * init`), sets/<pool>.<set>/leader (leased by the leader's member lease; see below), serving
 * (leased: the node that serves S3 now; "the serving key" below), jobs/<name> (long-running
 * jobs' records, "job records" below). */
#ifndef OL_CLUSTER_CLUSTER_H
#define OL_CLUSTER_CLUSTER_H

#include "base/config.h"
#include "cluster/layout.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_cluster;

struct ol_cluster_member {
	unsigned id;
	char s3_addr[OL_CFG_STR], kv_addr[OL_CFG_STR], rpc_addr[OL_CFG_STR];
	uint64_t capacity; /* bytes over all drives */
	uint64_t free;	   /* bytes free over all drives when it registered (pool weights) */
	unsigned weight;
	unsigned n_drives;
	int64_t lease;
	int64_t start_time; /* unix seconds */
};

struct ol_cluster_view {
	/* an etcd revision at or after the last change of the member list: it grows whenever
	 * a member joins, leaves or changes */
	int64_t epoch;
	unsigned n;
	struct ol_cluster_member *members; /* sorted by id */
};

/* Start membership when cfg names etcd (else *out = NULL and 0: single node). Returns at
 * once: registration happens in the background, etcd being down is not an error. -ENOMEM,
 * -EINVAL (bad endpoint). */
int ol_cluster_start(const struct ol_config *cfg, struct ol_cluster **out);

/* How long a stop waits for etcd: each of its two steps (ol_cluster_hurry to
 * ol_cluster_stop, and ol_cluster_stop itself) ends its etcd calls within this. With etcd
 * healthy a call takes milliseconds; with etcd hung or cut off, the lease lapses at its TTL
 * instead of the revoke and the set keys go with it. */
#define OL_CLUSTER_STOP_ETCD_MS 3000

/* A stop begins: every etcd call of c, those in flight included, ends within
 * OL_CLUSTER_STOP_ETCD_MS from now (-ECANCELED), so the stop's own calls (the resign, the
 * revoke) are not held behind calls that wait out a hung etcd's deadline. The lease's
 * keepalive goes on (its own handle) until ol_cluster_stop: a drain that outlasts the cutoff
 * does not let the lease lapse. NULL: nothing. Any thread. */
void ol_cluster_hurry(struct ol_cluster *c);

/* Revoke the lease (so the member key goes at once), stop and join the threads, free c.
 * Its etcd calls, and those of c's threads, end within OL_CLUSTER_STOP_ETCD_MS. */
void ol_cluster_stop(struct ol_cluster *c);

/* Copy of the live members as last seen from etcd (n = 0, epoch = 0 before the first read).
 * Any thread. Free with ol_cluster_view_fini. -ENOMEM. */
int ol_cluster_members(struct ol_cluster *c, struct ol_cluster_view *out);
void ol_cluster_view_fini(struct ol_cluster_view *v);

/* The free bytes over each member's drives as it last measured them: a store-mode member
 * writes <prefix>free/<id> (JSON {"free", "capacity"}, under its lease) every 5 s while the
 * figure changes, so the pools' weights for new keys follow the drives as they fill (the
 * member record's "free" is from its registration). ids[i] and free[i] for i < *n (at most
 * cap members). 0, or -errno when etcd does not answer. Any thread; one etcd range. */
int ol_cluster_free_space(struct ol_cluster *c, unsigned *ids, uint64_t *free, size_t cap,
			  size_t *n);

/* Member JSON -> struct (pure). -EPROTO when it is not one. */
int ol_cluster_member_parse(const char *buf, size_t len, struct ol_cluster_member *m);

/* Read the layout from etcd, retrying until timeout_ms passes: 0 and *out (free with
 * ol_layout_fini), -ENOENT when etcd answered and there is none, -EPROTO when the key holds
 * something else, -ETIMEDOUT when no etcd endpoint answered in time. Any thread. */
int ol_cluster_read_layout(struct ol_cluster *c, int timeout_ms, struct ol_layout *out);

/* The layout and its mod_revision (0 / -ENOENT / -EPROTO / -errno, one try). */
int ol_cluster_read_layout_rev(struct ol_cluster *c, struct ol_layout *out, int64_t *mod_rev);
/* Replace the layout with l if its mod_revision is still mod_rev, and (name not NULL) put
 * <prefix><name> = value in the same transaction: 0, -ECANCELED (it changed meanwhile),
 * -errno. Any thread. */
int ol_cluster_write_layout(struct ol_cluster *c, const struct ol_layout *l, int64_t mod_rev,
			    const char *name, const char *value);
/* <prefix><name> = value, no lease (the drain's progress record, "leave"). 0 / -errno. */
int ol_cluster_put(struct ol_cluster *c, const char *name, const char *value);

/* ---- set leadership ----
 *
 * Every set of the layout has at most one leader, elected in etcd: a create-if-absent txn on
 * <prefix>sets/<pool>.<set>/leader, attached to the node's member lease, value the leader's
 * record (node id, s3 and rpc addresses). The leader's *epoch* is that key's create_revision:
 * unique, and larger for every new leader. Nodes with a slot in the set campaign when the key
 * is absent; every node watches the keys (and reads them at least every second) so it knows
 * where to forward.
 *
 * A node leads only while its lease surely lives on etcd's side: until the time it *sent* the
 * last answered keepalive plus the TTL, less a margin (a quarter of the TTL, at least 500 ms).
 * A node frozen or cut off from etcd past that stops leading before etcd can let the key go,
 * so two nodes never both believe they lead; what a stalled leader had in flight is refused
 * by the drives, which remember the newest epoch they saw. */

struct ol_cluster_leader_info {
	unsigned node;
	char s3_addr[OL_CFG_STR], rpc_addr[OL_CFG_STR];
	uint64_t epoch; /* create_revision of the leader key; 0 = no leader known */
	int64_t lease;
	bool is_self; /* this node leads the set at epoch, now */
};

/* Called when this node gains (gained, with its epoch) or loses a set (gained false, the epoch
 * it held): on the leadership thread, or for a loss at the lease bound on the lease guard
 * thread ("ol-cluster-lg", which never waits on etcd), one call at a time. It may block:
 * leadership waits for it. A loss is reported after ol_cluster_leads() stopped answering true
 * for that epoch; a gain only while the lease is surely alive as it is reported. */
typedef void (*ol_cluster_lead_fn)(void *arg, unsigned pool, unsigned set, uint64_t epoch,
				   bool gained);

/* Start electing leaders for the sets of l (copied) with the member lease; fn may be NULL.
 * Once per c; ol_cluster_stop gives up every set first (fn runs for each). -ENOMEM, -EAGAIN,
 * -EALREADY. */
int ol_cluster_lead_start(struct ol_cluster *c, const struct ol_layout *l, ol_cluster_lead_fn fn,
			  void *arg);

/* Follow the leadership of the sets of pools that l has beyond those followed (a running
 * node takes a layout grown by `openlake cluster join`): campaign for those it has a slot in,
 * and answer ol_cluster_leader for them. Pools followed already are left as they are. The
 * table of sets read lock-free by request threads is replaced, the old one kept until
 * ol_cluster_stop. 0, -ENOENT before ol_cluster_lead_start, -ENOMEM. Any thread. */
int ol_cluster_lead_follow(struct ol_cluster *c, const struct ol_layout *l);

/* This node leads (pool, set) at epoch and needs a newer epoch (it starts serving what
 * another leader served, whose epoch may be above this one): the leadership thread gives the
 * key up (the callback reports the loss) and campaigns again at once, so whoever wins (this
 * node, or another of the set's nodes) leads at a create revision above every earlier one.
 * 0, or -ENOENT when this node does not lead (pool, set) at epoch. Any thread, also the
 * callback. */
int ol_cluster_lead_renew(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch);

/* Whether this node may campaign for (pool, set) now: the daemon says no while the node cannot
 * reach a write quorum of the set's drives (docs/cluster.md, "Write quorum and leadership").
 * Called on the leadership thread before each campaign; it must not block (read what another
 * thread measured). */
typedef bool (*ol_cluster_gate_fn)(void *arg, unsigned pool, unsigned set);

/* Install the campaign gate (NULL: campaign whenever the key is absent, the default). Call
 * before ol_cluster_lead_start; fn and arg outlive ol_cluster_stop. */
void ol_cluster_lead_gate(struct ol_cluster *c, ol_cluster_gate_fn fn, void *arg);

/* This node leads (pool, set) at epoch but should not (it cannot reach a write quorum of the
 * set's drives while other nodes may): the leadership thread stops leading at once
 * (ol_cluster_leads false), deletes the key if it is still the one of epoch (so the next
 * leader's epoch is above it; tried again at each step while etcd does not answer, never led
 * under again), then reports the loss to the callback; it campaigns again only
 * when the key is absent and the gate says yes. 0, or -ENOENT when this node does not lead
 * (pool, set) at epoch. Any thread. */
int ol_cluster_lead_step_down(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch);

/* Give up every set this node leads and stop campaigning (a clean stop: call it before the
 * servers that use the sets stop; ol_cluster_leader keeps answering, is_self false).
 * ol_cluster_stop does it too. */
void ol_cluster_resign(struct ol_cluster *c);

/* Revoke another member's lease (ol_cluster_leader_info.lease): every key under it goes (its
 * member key, the leader and serving keys it held), so a member whose process is known to be
 * gone stops holding them before the lease's TTL runs out. A live member whose lease is revoked
 * loses its sets as at a lapsed lease (its epochs are fenced). 0, -ENOENT (no such lease any
 * more), -errno. Any thread. */
int ol_cluster_revoke(struct ol_cluster *c, int64_t lease);

/* The set's leader as last read from etcd (any thread). 0 and *out (out->epoch = 0 when no
 * node leads it now), -ENOENT for a set not in the layout or before ol_cluster_lead_start. */
int ol_cluster_leader(struct ol_cluster *c, unsigned pool, unsigned set,
		      struct ol_cluster_leader_info *out);

/* True while this node leads (pool, set) at epoch, its lease surely lives and it is not
 * stopping (ol_cluster_lead_stop begun). No lock, no syscall but a clock read: the request
 * path calls it for every request. */
bool ol_cluster_leads(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch);

/* ---- the serving key ----
 *
 * One node at a time serves the cluster's S3: the leader of the serving set (docs/cluster.md,
 * "Leaving pool 0: the serving set moves"). While it serves it holds <prefix>serving =
 * {"node", "pool", "set", "epoch"}, under the lease of its leader key for that set. It takes
 * the key with a transaction that succeeds only while the key is absent and the layout is
 * still at the mod revision the node decided from, and deletes it once it stopped serving
 * (new requests go elsewhere, those in flight ended); else etcd deletes it with the lease. So
 * a node about to serve waits until the previous server stopped, or (killed, frozen, cut off)
 * until its lease lapsed: at most the TTL. The lease bound of ol_cluster_leads() ends a frozen
 * or cut-off server's serving before etcd can let the key go. */

/* Take the serving key for (pool, set) led at epoch, the layout read at layout_rev. 0: this
 * node holds it (also when it held it already). -EBUSY: another node (*holder, may be NULL)
 * holds it: wait and try again. -ESTALE: the layout changed since layout_rev: read it and
 * decide again. -ENOENT: this node does not lead (pool, set) at epoch now. -errno: etcd.
 * Any thread. */
int ol_cluster_serve_acquire(struct ol_cluster *c, unsigned pool, unsigned set, uint64_t epoch,
			     int64_t layout_rev, unsigned *holder);

/* Delete the serving key this node holds (if it still is the one it created): call once it
 * serves nothing any more. 0 (also when it holds none), -errno: it is kept, call again. */
int ol_cluster_serve_release(struct ol_cluster *c);

/* A watch of <prefix><name>: fn is given the value now (NULL, 0, 0 when absent), then every
 * change (a deletion as NULL, 0 and its revision), on the calling thread, each once, in
 * order; a broken stream or a compacted revision reads the key again (fn may then see a
 * value twice). Blocks until *stop (checked every 250 ms) or fn returns a positive value
 * (returned; fn returns 0 to go on). Any thread, one call per thread. */
typedef int (*ol_cluster_watch_fn)(void *arg, const char *value, size_t len, int64_t mod_rev);
int ol_cluster_watch(struct ol_cluster *c, const char *name, ol_cluster_watch_fn fn, void *arg,
		     const atomic_int *stop);

/* ---- job records ----
 *
 * A long-running job (the heal: name "heal") keeps its record at <prefix>jobs/<name>, a JSON
 * object with at least "job" (its id), "state" ("running" while someone is to run it, or
 * "done", "failed", "cancelled"), "node" and "epoch" (the node running it and its leader
 * epoch). Only the leader of a set writes it, and only over the record it last saw: a leader
 * that was replaced (frozen, cut off, stepped down) cannot overwrite what its successor wrote,
 * and the successor resumes a "running" record from what it says (docs/cluster.md, "Heal
 * jobs"). */
struct ol_cluster_job_head {
	char job[40], state[16];
	unsigned node;
	uint64_t epoch;
};

/* The record <prefix>jobs/<name>: 0 with *value (malloc'd, NUL-terminated, *len bytes) and
 * its mod revision; -ENOENT (none; *mod_rev 0); -errno (etcd). Any thread; one range. */
int ol_cluster_job_get(struct ol_cluster *c, const char *name, char **value, size_t *len,
		       int64_t *mod_rev);

/* Write value to <prefix>jobs/<name> if it is still at mod_rev (0: absent) and this node's
 * key of set (pool, set) is still the one of epoch, in one transaction. 0 and *new_rev (may be
 * NULL: the record's new mod revision); -ECANCELED: the record changed since mod_rev (read it
 * again); -ESTALE: this node does not lead (pool, set) at epoch any more (or does not follow
 * it); -errno (etcd: the write may have happened). Any thread. */
int ol_cluster_job_put(struct ol_cluster *c, const char *name, const char *value, unsigned pool,
		       unsigned set, uint64_t epoch, int64_t mod_rev, int64_t *new_rev);

/* Write value to <prefix>jobs/<name> if it is still at mod_rev (> 0: the record exists), with
 * no leader's fence: the one write a node that leads nothing makes (an admin's cancel of a job
 * that no node runs now, docs/cluster.md "Heal jobs"). 0 and *new_rev (may be NULL);
 * -ECANCELED: the record changed since mod_rev (read it again); -EINVAL: mod_rev <= 0;
 * -errno (etcd: the write may have happened). Any thread; one transaction. */
int ol_cluster_job_swap(struct ol_cluster *c, const char *name, const char *value, int64_t mod_rev,
			int64_t *new_rev);

/* Pure: the fields of a record every reader needs. -EPROTO when it is not one. */
int ol_cluster_job_head_parse(const char *buf, size_t len, struct ol_cluster_job_head *out);

/* Pure: what this node does about one set, from the leader key as read (or its absence) and
 * its own lease. */
struct ol_cluster_lead_in {
	bool key_present;
	unsigned key_node;
	int64_t key_lease, key_create_rev;
	unsigned self_id;
	bool has_slot;
	int64_t lease; /* this node's lease, 0 = none */
	int64_t now_ms, lease_valid_until_ms, margin_ms;
};
enum ol_cluster_lead_act {
	OL_LEAD_NONE,	  /* no leader, and this node may not campaign now */
	OL_LEAD_FOLLOW,	  /* another node (or a former lease of this one) holds the key */
	OL_LEAD_CAMPAIGN, /* no leader: try the create-if-absent txn */
	OL_LEAD_LEAD,	  /* this node leads at key_create_rev */
};
enum ol_cluster_lead_act ol_cluster_lead_decide(const struct ol_cluster_lead_in *in);

/* The write quorum of a set of n drives with p parity: max(n - p, n / 2 + 1, p + 1) (pure;
 * store.h's rule). */
unsigned ol_cluster_write_quorum(unsigned n, unsigned p);

/* Whether a node may lead a set of n drives with p parity (pure; docs/cluster.md, "Write quorum
 * and leadership"): it reaches `reach` of its drives over the node plane (its own included),
 * and `live` of them are on nodes with a live member key. Yes while reach >= the write quorum,
 * or while live < it (no node can reach one now: any leader serves reads). */
bool ol_cluster_may_lead(unsigned n, unsigned p, unsigned reach, unsigned live);

/* The margin a leader keeps before its lease's end (pure). */
int64_t ol_cluster_lead_margin_ms(unsigned ttl_s);

/* Whether a set led under key_lease may be led now (pure): this node holds a lease (lease !=
 * 0), it is the one the leader key is under, and now is more than margin_ms before the time
 * until which it surely lives. The rule of ol_cluster_leads(), the lease guard and a gain. */
bool ol_cluster_lease_sure(int64_t lease, int64_t key_lease, int64_t now_ms, int64_t valid_until_ms,
			   int64_t margin_ms);

/* Leader record JSON <-> struct (pure). parse: -EPROTO when it is not one (epoch, lease and
 * is_self are left 0). to_json: malloc'd, NULL on out of memory. */
int ol_cluster_leader_parse(const char *buf, size_t len, struct ol_cluster_leader_info *out);
char *ol_cluster_leader_to_json(unsigned node, const char *s3_addr, const char *rpc_addr);

#endif
