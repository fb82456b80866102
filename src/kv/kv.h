/* kv/kv.h - the KV-cache pool server: DRAM tier in POSIX shared memory, NVMe tier of
 * append-only segments, binary protocol (docs/kv-protocol.md) on a TCP listener.
 *
 * Threads: one io/ loop per CPU of the process's affinity mask (pinned there with
 * pin_threads = "auto") serving the plaintext TCP and Unix connections as state
 * machines, two helper threads for engine calls that may wait for a disk, a reaper (pin TTL,
 * VIEW refresh), a blocking thread per TLS connection, and the engine's write-behind threads.
 * All functions are called from the daemon's main thread. */
#ifndef OL_KV_KV_H
#define OL_KV_KV_H

#include "base/config.h"
#include "kv/proto.h"

struct ol_kv_server;

/* A source of the pool's live members for VIEW (the daemon wires cluster membership in): fill
 * v->epoch (> 0: a cluster epoch), v->n and v->m[] (ids, weights, capacities, KV addresses;
 * members without a KV address left out; v->tag is computed by the server). 0, or -errno / n = 0
 * to answer a view of this node alone. Called from one server thread at a time, about once a
 * second; must not block long. */
typedef int (*ol_kv_view_fn)(void *arg, struct ol_kvp_view *v);
/* Set (or clear with NULL) the source. Returns once no call of the old source is running, so
 * its arg may be freed after a clear. */
void ol_kv_server_set_view(struct ol_kv_server *s, ol_kv_view_fn fn, void *arg);

/* Start serving on ol_config_kv_listen(cfg) (port 0 = ephemeral) with cfg->kv_* and
 * [kv_slab]: creates the shm DRAM tier, recovers the NVMe tier from its spill directory and
 * starts the threads. cfg is only read during the call. Returns 0 and *out, -EINVAL (bad
 * config or address), -EADDRINUSE, -ENOSPC, or another -errno; logs the reason. */
int ol_kv_server_start(const struct ol_config *cfg, struct ol_kv_server **out);

/* The TCP port actually bound (useful with port 0). */
unsigned ol_kv_server_port(const struct ol_kv_server *s);

/* The per-core loops (for the status document's "locality"): fills up to cap entries, returns
 * how many loops run. cpu: the CPU a loop is pinned to, -1 when not pinned ([pin_threads]);
 * accepts_tcp: whether it takes TCP connections (all, unless only the loops on the NUMA node
 * of the listen address's NIC do, io/topo.h). Any thread while the server runs. */
struct ol_kv_loop_info {
	char name[16];
	int cpu;
	bool accepts_tcp;
};
unsigned ol_kv_server_loops(const struct ol_kv_server *s, struct ol_kv_loop_info *out,
			    unsigned cap);

/* Stop accepting, close every connection, flush dirty blocks to the NVMe tier, unmap and
 * unlink the shm object, free everything. NULL is a no-op. */
void ol_kv_server_stop(struct ol_kv_server *s);

#endif
