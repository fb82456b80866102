/* cluster/cluster.h - this daemon's membership in the cluster kept in etcd.
 *
 * With [cluster] etcd set, the daemon registers at <prefix>members/<self_id> under a lease
 * (JSON: id, s3, kv and rpc addresses, drives with paths and sizes, capacity, weight, version,
 * start time), keeps the lease alive from a helper thread ("ol-cluster-ka"), registers again
 * after a lapse (lease expired while the process was frozen, etcd restarted or lost it, key
 * deleted), and revokes the lease on a clean stop. A second thread ("ol-cluster-watch") reads
 * the members prefix at a revision and watches it from there, so ol_cluster_members() is a
 * current snapshot. While etcd cannot be reached the node keeps serving its local store: the
 * threads log once and retry with backoff.
 *
 * Keys under the prefix: members/<id> (leased), layout (written once by `openlake cluster
 * init`). */
#ifndef OL_CLUSTER_CLUSTER_H
#define OL_CLUSTER_CLUSTER_H

#include "base/config.h"

#include <stdint.h>

struct ol_cluster;

struct ol_cluster_member {
	unsigned id;
	char s3_addr[OL_CFG_STR], kv_addr[OL_CFG_STR], rpc_addr[OL_CFG_STR];
	uint64_t capacity; /* bytes over all drives */
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

/* Revoke the lease (so the member key goes at once), stop and join the threads, free c. */
void ol_cluster_stop(struct ol_cluster *c);

/* Copy of the live members as last seen from etcd (n = 0, epoch = 0 before the first read).
 * Any thread. Free with ol_cluster_view_fini. -ENOMEM. */
int ol_cluster_members(struct ol_cluster *c, struct ol_cluster_view *out);
void ol_cluster_view_fini(struct ol_cluster_view *v);

/* Member JSON -> struct (pure). -EPROTO when it is not one. */
int ol_cluster_member_parse(const char *buf, size_t len, struct ol_cluster_member *m);

#endif
