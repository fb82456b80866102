/* cmd/openlaked/heal_job.h - the heal job's record in etcd (issue 10: long-running job state
 * lives in etcd; docs/cluster.md "Heal jobs"). The node that serves the cluster store runs the
 * heal (admin/); this keeps <prefix>jobs/heal true: written when a job starts, every
 * HEAL_JOB_WRITE_MS while it runs, when an admin cancels it and when its run ends (also when
 * the store goes under it: then still "running", with the cursor it reached), each write
 * fenced by the serving leader's key (ol_cluster_job_put). A node that starts serving reads
 * the record first and resumes a "running" job from its cursor (or records it "failed", with
 * the reason, when it cannot). An admin's cancel on a node that runs no heal writes a
 * "running" record "cancelled" (the admin hooks' cancel; a leader that resumed the job
 * meanwhile finds it so at its next write and stops its run). Every node keeps a copy of the
 * record (read every HEAL_JOB_READ_MS) that the heal document shows while the node runs no
 * heal itself, so `openlake heal`, the status JSON and the console follow the job through a
 * change of leader.
 *
 * Wiring only: the record's fencing is cluster/ (job.c), the job's state admin/. */
#ifndef OL_OPENLAKED_HEAL_JOB_H
#define OL_OPENLAKED_HEAL_JOB_H

#include "base/config.h"
#include "cluster/cluster.h"

#include <stdint.h>

#define HEAL_JOB_WRITE_MS 3000
#define HEAL_JOB_READ_MS  2000

struct heal_job;

/* Set the admin module's heal hooks to the record of c (cfg and c outlive it). */
struct heal_job *heal_job_new(const struct ol_config *cfg, struct ol_cluster *c);
/* Clear the hooks (returns once none runs) and free. NULL: no-op. */
void heal_job_free(struct heal_job *hj);

/* This node is about to serve the store as leader of set pool.0 at epoch: call before
 * ol_admin_set_store(st). Records are not written until heal_job_tick has read the record
 * (and resumed its job when it is running). Caller: the store's swapper (swap_mu). */
void heal_job_serving(struct heal_job *hj, unsigned pool, uint64_t epoch);
/* It serves no more: call after ol_admin_set_store(NULL) (whose end of the heal run was
 * recorded with the leader's fence). */
void heal_job_stopped(struct heal_job *hj);

/* The poller's step (about each second): the resume check once serving, the running job's
 * progress, the copy of the record. Blocks on etcd (bounded by its timeout). */
void heal_job_tick(struct heal_job *hj);

#endif
