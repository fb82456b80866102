/* cmd/openlaked/cluster_quorum.h - whether this node reaches a write quorum of the serving
 * set's drives, and the leadership rule built on it (docs/cluster.md, "Write quorum and
 * leadership").
 *
 * A thread ("ol-cquorum") pings the node plane of every node holding a drive of the serving
 * set (this node's own too) once a second, each with a 1 s deadline, and counts the drives
 * it reaches (R) and the drives on nodes with a live member key in etcd (L). With W the set's
 * write quorum (max(k, N/2 + 1, P + 1)), this node *may lead* the set while R >= W, or while
 * L < W (no node can reach a write quorum now: the best leader is any, for reads).
 *
 * - The leadership thread campaigns for the serving set only while this node may lead it
 *   (cquorum_may_lead, the gate of ol_cluster_lead_gate).
 * - The set's leader that may not lead for [cluster] quorum_loss_s in a row gives the set up
 *   (ol_cluster_lead_step_down: its key deleted, so the next leader's epoch is above its own).
 *
 * So leadership moves only to a node that reached a write quorum at its last probe, and a
 * leader is deposed by this rule only after missing one for quorum_loss_s: two nodes that each
 * reach less than a quorum do not take the set from each other. The other sets of the layout
 * serve nothing (the serving set's leader serves them all): they are not gated. */
#ifndef OL_OPENLAKED_CLUSTER_QUORUM_H
#define OL_OPENLAKED_CLUSTER_QUORUM_H

#include "base/config.h"
#include "cluster/cluster.h"
#include "cluster/layout.h"

#include <stdbool.h>

struct cquorum;

/* The prober for node c (cfg and c outlive it); it probes nothing until cquorum_layout. Its
 * thread starts here: -EAGAIN when it cannot (the caller then installs no gate). */
int cquorum_start(const struct ol_config *cfg, struct ol_cluster *c, struct cquorum **out);

/* The layout as the daemon has it now (copied: the serving set's pool and slots). Any
 * thread. */
void cquorum_layout(struct cquorum *q, const struct ol_layout *l);

/* The gate (ol_cluster_gate_fn, arg a struct cquorum): false for the serving set while this
 * node may not lead it, or before the first probe of it; true for any other set. Takes a short
 * lock, never waits for a probe. */
bool cquorum_may_lead(void *arg, unsigned pool, unsigned set);

/* Stop and join the thread; the gate keeps answering what it last measured. NULL: no-op. */
void cquorum_stop(struct cquorum *q);
/* After ol_cluster_stop (the leadership thread may call the gate until then). */
void cquorum_free(struct cquorum *q);

#endif
