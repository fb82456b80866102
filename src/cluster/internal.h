/* cluster/internal.h - what member.c (membership, the lease) and leader.c (set leadership)
 * share inside the module. Not for other modules: they use cluster.h. */
#ifndef OL_CLUSTER_INTERNAL_H
#define OL_CLUSTER_INTERNAL_H

#include "cluster/cluster.h"
#include "cluster/layout.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct ol_etcd;

/* One erasure set's leadership as this node sees it (leader.c). */
struct ol_cluster_set {
	unsigned pool, set;
	bool has_slot;		   /* this node holds a drive of the set: it campaigns */
	char key[OL_CFG_STR + 48]; /* <prefix>sets/<pool>.<set>/leader */
	/* under ldr_mu */
	struct ol_cluster_leader_info info; /* info.epoch == 0: no leader known */
	/* the epoch this node leads at (0 = it does not): read lock-free by the request path */
	_Atomic uint64_t my_epoch;
	/* the lease the key of my_epoch is under: leading ends with it, also when the node
	 * registered again under a new lease before this thread saw the key go */
	_Atomic int64_t my_lease;
	/* ol_cluster_lead_renew asked to give up the key held at this epoch and campaign again */
	_Atomic uint64_t renew;
	/* ol_cluster_lead_step_down asked to give up the key held at this epoch, and not to
	 * campaign again while the gate says no */
	_Atomic uint64_t step_down;
	bool gated; /* the gate said no at the last campaign (the leadership thread's: logs) */
};

/* The sets a node follows: published whole (one pointer), replaced when pools join; the
 * entries live until ol_cluster_lead_free, and so does every table replaced (a request thread
 * may still be reading one). */
struct ol_cluster_sets {
	struct ol_cluster_sets *older; /* the table this one replaced */
	unsigned n;
	struct ol_cluster_set *v[];
};

struct ol_cluster {
	const struct ol_config *cfg;
	struct ol_etcd *etcd;
	/* the keepalive thread's own handle: ol_cluster_hurry's cutoff leaves it, so the lease
	 * lives through a stop's drain until ol_cluster_stop revokes it */
	struct ol_etcd *ka_etcd;
	char key[OL_CFG_STR + 32];	   /* <prefix>members/<id> */
	char prefix[OL_CFG_STR + 16];	   /* <prefix>members/ */
	char *value;			   /* this member's JSON */
	char free_key[OL_CFG_STR + 32];	   /* <prefix>free/<id> */
	char free_prefix[OL_CFG_STR + 16]; /* <prefix>free/ */
	/* the keepalive thread's: what it last wrote there, under which lease, and when next */
	uint64_t free_last;
	int64_t free_lease, free_next_ms;
	int64_t lease;	 /* the keepalive thread's own copy */
	bool registered; /* the keepalive thread's: this process registered once */
	/* the lease for the other threads: its id (0 = none) and the CLOCK_MONOTONIC ms until
	 * which it surely lives on etcd's side (sent time of the last answered keepalive + TTL) */
	_Atomic int64_t lease_id, lease_valid_until;
	atomic_int stop, reregister;
	/* the revision of this member's last write of its key: a delete of the key at or before
	 * it (a watch that resumed late delivers the old lease's expiry) is not a loss */
	_Atomic int64_t key_rev;
	pthread_t ka, watch;
	bool ka_started, watch_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the view, under mu */
	struct ol_cluster_view view;

	/* set leadership (leader.c), started by ol_cluster_lead_start: the leadership thread
	 * (etcd reads, campaigns), the watch of the leader keys, and the lease guard (the local
	 * lease check every tick, no etcd call: a set is given up at the lease bound also while
	 * the leadership thread waits on etcd) */
	pthread_t ldr, ldr_watch, ldr_guard;
	bool ldr_started, ldr_watch_started, ldr_guard_started;
	atomic_int ldr_stop;
	/* every change of a set's my_epoch and every lead_fn call, so the guard and the
	 * leadership thread act one at a time: a gain that a slow etcd read decided is acted on
	 * only if the lease is still surely alive under it. Taken before ldr_mu, never held
	 * across an etcd call of leader.c (lead_fn may make its own). */
	pthread_mutex_t ldr_act_mu;
	/* the leader keys changed (the watch of <prefix>sets/), or a renew / new pools ask for a
	 * step: the leadership thread reads the keys now rather than at its next periodic read */
	atomic_int ldr_dirty;
	pthread_mutex_t ldr_mu;
	pthread_cond_t ldr_cv;
	struct ol_layout layout;      /* the pools followed (grown by ol_cluster_lead_follow) */
	struct ol_cluster_sets *sets; /* read lock-free; replaced under ldr_mu */
	char sets_prefix[OL_CFG_STR + 16]; /* <prefix>sets/ */
	char *ldr_value;		   /* this node's leader record (JSON) */
	ol_cluster_lead_fn lead_fn;
	void *lead_arg;
	ol_cluster_gate_fn gate_fn; /* may this node campaign for a set (NULL: yes) */
	void *gate_arg;

	/* the serving key (serve.c): <prefix>serving, and the create revision of the one this
	 * node holds (0: none), under serve_mu */
	char serve_key[OL_CFG_STR + 16];
	char layout_key[OL_CFG_STR + 16];
	pthread_mutex_t serve_mu;
	int64_t serve_rev;
};

int64_t ol_cluster_now_ms(void);

/* the serving key's names and lock (serve.c): made by ol_cluster_start, freed by
 * ol_cluster_stop */
void ol_cluster_serve_init(struct ol_cluster *c);
void ol_cluster_serve_fini(struct ol_cluster *c);

/* the set (pool, set) of the table followed now, NULL when not followed (leader.c) */
struct ol_cluster_set *ol_cluster_find_set(struct ol_cluster *c, unsigned pool, unsigned set);

/* Stop the leadership thread (each set this node led is given up first: the callback runs
 * with gained = false, the keys are deleted); no-op when it never started. */
void ol_cluster_lead_stop(struct ol_cluster *c);
/* ... and free its state (ol_cluster_stop, last). */
void ol_cluster_lead_free(struct ol_cluster *c);

#endif
