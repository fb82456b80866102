/* kv/kv.h - the KV-cache pool server: DRAM tier in POSIX shared memory, NVMe tier of
 * append-only segments, binary protocol (docs/kv-protocol.md) on a TCP listener.
 *
 * Threads: one acceptor thread and one thread per connection (blocking sockets; the NVMe tier
 * does blocking io_uring waits), one write-behind thread. All functions are called from the
 * daemon's main thread. */
#ifndef OL_KV_KV_H
#define OL_KV_KV_H

#include "base/config.h"

struct ol_kv_server;

/* Start serving on ol_config_kv_listen(cfg) (port 0 = ephemeral) with cfg->kv_* and
 * [kv_slab]: creates the shm DRAM tier, recovers the NVMe tier from its spill directory and
 * starts the threads. cfg is only read during the call. Returns 0 and *out, -EINVAL (bad
 * config or address), -EADDRINUSE, -ENOSPC, or another -errno; logs the reason. */
int ol_kv_server_start(const struct ol_config *cfg, struct ol_kv_server **out);

/* The TCP port actually bound (useful with port 0). */
unsigned ol_kv_server_port(const struct ol_kv_server *s);

/* Stop accepting, close every connection, flush dirty blocks to the NVMe tier, unmap and
 * unlink the shm object, free everything. NULL is a no-op. */
void ol_kv_server_stop(struct ol_kv_server *s);

#endif
