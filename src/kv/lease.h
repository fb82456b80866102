/* kv/lease.h - leases on stored blocks (op LEASE, docs/kv-protocol.md).
 *
 * A lease pins a block in the DRAM tier (ol_kve_pin with need_dram) until it ends: by a LEASE
 * of the same key with ttl 0 (any connection of the namespace: a scheduler takes it, the
 * worker that loads the block ends it), by expiry (the reaper, each second), or at shutdown.
 * Leases belong to the (namespace, key), not to a connection: a client's pooled connections
 * come and go. A second lease of a leased key extends it. Bounded: ttl at most max_ttl_ms,
 * at most max_per_ns leases per namespace (a tenant cannot pin the whole tier). */
#ifndef OL_KV_LEASE_H
#define OL_KV_LEASE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv/engine.h"

struct kvl_lease;
struct kvl_ns;

struct kvl_leases {
	pthread_mutex_t mu;
	struct kvl_lease **tab; /* chained hash on the key */
	size_t nb;
	struct kvl_ns *ns; /* lease counts per namespace (a short list) */
	uint64_t max_ttl_ms;
	unsigned max_per_ns;
	uint64_t n;
};

void kvl_leases_init(struct kvl_leases *ls, uint64_t max_ttl_ms, unsigned max_per_ns);
/* Release every lease (before the engine closes). */
void kvl_leases_fini(struct kvl_leases *ls, struct ol_kve *e);
/* Lease k for ttl_ms (capped; 0 ends the lease). Returns OL_KV_OK (leased, *len = stored
 * size; or ended), OL_KV_MISS (not stored; or, ending, not leased), OL_KV_FULL (the
 * namespace holds max_per_ns leases). May read the NVMe tier (a promotion). */
int kvl_lease(struct kvl_leases *ls, struct ol_kve *e, const struct ol_kvk *k, uint64_t ttl_ms,
	      uint64_t now_ms, uint64_t *len);
/* End the leases past their time. Returns how many. */
unsigned kvl_expire(struct kvl_leases *ls, struct ol_kve *e, uint64_t now_ms);

/* A pin or reservation taken at t_ms is due for the reaper at now_ms (both CLOCK_MONOTONIC
 * ms) once ttl_ms have passed. One taken after the reaper read its clock (t_ms > now_ms) is
 * not: the plain difference would wrap and drop it the moment it was made. */
static inline bool
kvl_aged(uint64_t t_ms, uint64_t now_ms, uint64_t ttl_ms)
{
	return t_ms <= now_ms && now_ms - t_ms >= ttl_ms;
}

#endif
