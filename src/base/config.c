/* base/config.c - one schema table drives the TOML-subset parser, overrides, validation and
 * --print-config.  The TOML subset: comments, key = value, [table], [[array-of-tables]],
 * dotted table names, basic and literal strings, integers (with '_'), floats, booleans,
 * arrays (one or several lines) of strings or integers. */
#include "config.h"
#include "toml.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* T_LIST: a string or an array of strings, kept as one comma-separated string */
enum cfg_type { T_STR, T_U32, T_U64, T_SIZE, T_BOOL, T_F64, T_DIRS, T_ENUM, T_LIST };

struct cfg_key {
	const char *name; /* full dotted name as written in TOML */
	enum cfg_type type;
	size_t off, len;   /* offset into the struct (or element for arrays), field size */
	const char *def;   /* default, as text ("" = empty / zero) */
	double min, max;   /* numeric range */
	const char *enums; /* T_ENUM: "a|b|c" */
	int array; /* 0: struct ol_config, 1: [[credentials]], 2: [[nodes]], 3: [[kv.tokens]] */
	int secret;
	const char *help;
};

#define F(f)	offsetof(struct ol_config, f), sizeof(((struct ol_config *)0)->f)
#define CR(f)	offsetof(struct ol_config_cred, f), sizeof(((struct ol_config_cred *)0)->f)
#define ND(f)	offsetof(struct ol_config_node, f), sizeof(((struct ol_config_node *)0)->f)
#define KT(f)	offsetof(struct ol_config_kv_token, f), sizeof(((struct ol_config_kv_token *)0)->f)
#define BIG	1e19
#define ALIAS_F "set_drive_count"

static const struct cfg_key keys[] = {
    {"self_id", T_U32, F(self_id), "0", 0, 65535, 0, 0, 0, "this node's id; must be in [[nodes]]"},
    {"mode", T_ENUM, F(mode), "storage", 0, 0, "storage|kv", 0, 0,
     "storage: S3 + KV pool; kv: KV pool only"},
    {"transport", T_ENUM, F(transport), "h2", 0, 0, "h2|rdma|tcp|ucx", 0, 0,
     "rdma or ucx: the KV pool also serves over UCX ([rdma] port; TCP alone when built "
     "without UCX); the inter-node plane has its own key, [cluster] plane_transport"},
    {"data_dirs", T_DIRS, F(data_dirs), "data/d0,data/d1,data/d2,data/d3", 0, 0, 0, 0, 0,
     "drives of this node, in order (created when missing)"},
    {"s3_addr", T_STR, F(s3_addr), "127.0.0.1:9000", 0, 0, 0, 0, 0, "S3 listen address"},
    {"s3_port", T_U32, F(s3_port), "0", 0, 65535, 0, 0, 0, "S3 port of other nodes (0: same)"},
    {"rpc_addr", T_STR, F(rpc_addr), "127.0.0.1:9100", 0, 0, 0, 0, 0,
     "inter-node RPC address (the KV listener in mode = \"kv\")"},
    {"set_drive_count", T_U32, F(set_drive_count), "4", 1, 256, 0, 0, 0,
     "N: drives per erasure set"},
    {"replication", T_U32, F(set_drive_count), "", 1, 256, 0, 0, 0, "alias of set_drive_count"},
    {"default_parity_count", T_U32, F(default_parity_count), "1", 0, 128, 0, 0, 0,
     "P: parity shards per stripe"},
    {"region", T_STR, F(region), "us-east-1", 0, 0, 0, 0, 0, "SigV4 region"},
    {"kv_addr", T_STR, F(kv_addr), "127.0.0.1:9400", 0, 0, 0, 0, 0,
     "KV pool listen address (\"\" = off)"},
    {"threads", T_U32, F(threads), "0", 0, 1024, 0, 0, 0,
     "S3 listeners and pollers (0 = one per core)"},
    {"pin_threads", T_ENUM, F(pin_threads), "auto", 0, 0, "auto|off", 0, 0,
     "auto: KV loop N on the N-th CPU of the process's mask, accepts on the NIC's NUMA node"},
    {"log_level", T_ENUM, F(log_level), "info", 0, 0, "error|warn|info|debug", 0, 0,
     "log verbosity"},
    {"console_addr", T_STR, F(console_addr), OL_CONSOLE_ADDR_DEFAULT, 0, 0, 0, 0, 0,
     "admin listener in every mode: /metrics, health, status, console (\"\" = off)"},
    {"max_object_size", T_SIZE, F(max_object_size), "5GiB", 1, BIG, 0, 0, 0,
     "largest single PUT or part"},
    {"http_idle_timeout_ms", T_U32, F(http_idle_timeout_ms), "60000", 100, 3600000, 0, 0, 0,
     "keep-alive idle timeout"},
    {"http_header_timeout_ms", T_U32, F(http_header_timeout_ms), "15000", 100, 3600000, 0, 0, 0,
     "time allowed for a request head"},
    {"admin.status_auth", T_BOOL, F(admin_status_auth), "true", 0, 0, 0, 0, 0,
     "status, heal progress: only for requests SigV4-signed by an admin user"},
    {"admin.metrics_auth", T_BOOL, F(admin_metrics_auth), "false", 0, 0, 0, 0, 0,
     "/metrics: only signed by an admin (then at /openlake/admin/v1/metrics)"},
    {"admin.health_auth", T_BOOL, F(admin_health_auth), "false", 0, 0, 0, 0, 0,
     "/openlake/health: only signed by an admin (then at /openlake/admin/v1/health)"},
    {"http_max_conns", T_U32, F(http_max_conns), "0", 0, 1u << 30, 0, 0, 0,
     "open S3 connections in all (0 = the open-files limit less 1024)"},
    {"http_max_conns_per_addr", T_U32, F(http_max_conns_per_addr), "0", 0, 1u << 30, 0, 0, 0,
     "open S3 connections per client address (0 = min(4096, http_max_conns))"},
    {"http_max_inflight", T_U32, F(http_max_inflight), "0", 0, 65536, 0, 0, 0,
     "S3 requests served at once, worker threads (0 = 2048); as many more may wait"},
    {"http_max_inflight_per_addr", T_U32, F(http_max_inflight_per_addr), "0", 0, 65536, 0, 0, 0,
     "S3 requests in flight per client address (0 = http_max_inflight / 2)"},
    {"storage.inline_threshold", T_SIZE, F(inline_threshold), "128KiB", 0, 16777216, 0, 0, 0,
     "objects up to this size live inside the metadata record"},
    {"storage.block_size", T_SIZE, F(block_size), "1MiB", 4096, 268435456, 0, 0, 0,
     "erasure-coding block per shard"},
    {"storage.checksum", T_ENUM, F(checksum), "crc32c", 0, 0, "crc32c|xxh3", 0, 0,
     "per-block bitrot checksum"},
    {"storage.fsync", T_BOOL, F(fsync), "true", 0, 0, 0, 0, 0,
     "acknowledge a PUT only when it is on stable storage"},
    {"storage.heal_on_return", T_BOOL, F(heal_on_return), "true", 0, 0, 0, 0, 0,
     "start a heal when a drive comes back online while running"},
    {"storage.heal_delay_secs", T_U32, F(heal_delay_secs), "10", 0, 86400, 0, 0, 0,
     "seconds a returned drive stays online before that heal starts"},
    {"storage.heal_bytes_per_sec", T_SIZE, F(heal_bytes_per_sec), "0", 0, BIG, 0, 0, 0,
     "read rate of that heal (0: unlimited)"},
    {"storage.orphan_sweep_secs", T_U32, F(orphan_sweep_secs), "3600", 0, 31536000, 0, 0, 0,
     "every this many seconds the node that writes the store removes shard files no record "
     "references (writes cut short, replaced versions whose queued reclaim a crash lost), as "
     "a heal does at its end (0: only heals do)"},
    {"storage.orphan_grace_secs", T_U32, F(orphan_grace_secs), "900", 60, 86400, 0, 0, 0,
     "in a cluster, how old such a file must be (since its last write) before a sweep "
     "removes it: a follower may be writing it, or waiting for its commit's answer (at "
     "least 60: a commit lands within about a minute of the last write of its files)"},
    {"kv.dram_bytes", T_SIZE, F(kv_dram_bytes), "0", 0, BIG, 0, 0, 0,
     "DRAM tier size (0 = from [kv_slab], else 1 GiB)"},
    {"kv.spill_dir", T_STR, F(kv_spill_dir), "", 0, 0, 0, 0, 0,
     "NVMe tier directory (\"\" = <first data dir>/kv)"},
    {"kv.spill_bytes", T_SIZE, F(kv_spill_bytes), "8GiB", 0, BIG, 0, 0, 0,
     "NVMe tier size (0 = no NVMe tier)"},
    {"kv.max_block_bytes", T_SIZE, F(kv_max_block_bytes), "64MiB", 4096, 1073741824, 0, 0, 0,
     "largest KV block accepted"},
    {"kv.writeback_ms", T_U32, F(kv_writeback_ms), "1000", 0, 600000, 0, 0, 0,
     "longest delay before a DRAM block is on the NVMe tier"},
    {"kv.writeback", T_ENUM, F(kv_writeback), "async", 0, 0, "async|strict", 0, 0,
     "async: a put returns at DRAM speed, write-behind is best effort (a block not yet written "
     "when evicted is dropped, counted); strict: a put returns once its block is on NVMe"},
    {"kv.writeback_bytes_per_sec", T_SIZE, F(kv_writeback_bps), "0", 0, BIG, 0, 0, 0,
     "cap on the write-behind's NVMe bandwidth, leaving the rest to reads (0 = none)"},
    {"kv.namespace_quota_frac", T_F64, F(kv_ns_quota_frac), "0", 0, 1, 0, 0, 0,
     "share of the DRAM tier one client namespace may hold: past it, its own least recently "
     "used blocks leave DRAM for its new ones, not other namespaces' (0 = no quota)"},
    {"kv.removal_events", T_U64, F(kv_removal_events), "65536", 0, 16777216, 0, 0, 0,
     "blocks removed from the pool (evicted, dropped, deleted) the pool remembers for the EVENTS "
     "op, so that a client can tell a KV-aware router they are gone (0: none, no EVENTS op)"},
    {"kv.prefault", T_ENUM, F(kv_prefault), "auto", 0, 0, "auto|on|off", 0, 0,
     "touch the DRAM tier's pages in a low-priority thread after start, so first puts do not "
     "pay for it (auto: on in mode = \"kv\", off beside S3)"},
    {"kv.shm_name", T_STR, F(kv_shm_name), "", 0, 0, 0, 0, 0,
     "POSIX shm name of the DRAM tier (\"\" = /openlake-kv-<port>-<pid>)"},
    {"kv.secret", T_STR, F(kv_secret), "", 0, 0, 0, 0, 1,
     "KV pool secret: a client must prove it (or a [[kv.tokens]] token) at HELLO; grants every "
     "namespace (\"\" = no access control unless [[kv.tokens]] are set)"},
    {"kv.unix_socket", T_STR, F(kv_unix_socket), "", 0, 0, 0, 0, 0,
     "Unix socket that grants the shm tier to local clients by peer uid (\"\" = "
     "/run/openlake/kv-<port>.sock, \"off\" = no shm grant)"},
    {"kv.shm_group", T_STR, F(kv_shm_group), "", 0, 0, 0, 0, 0,
     "group (name or numeric gid) whose members are also granted the shm tier (\"\" = the "
     "daemon's uid only)"},
    {"kv.max_connections", T_U32, F(kv_max_conns), "4096", 1, 1048576, 0, 0, 0,
     "KV connections open at once; more are refused"},
    {"kv.max_connections_per_addr", T_U32, F(kv_max_conns_per_addr), "1024", 1, 1048576, 0, 0, 0,
     "KV connections open at once from one client address"},
    {"kv.max_pins_per_connection", T_U32, F(kv_max_pins_per_conn), "16384", 1, 16777216, 0, 0, 0,
     "slots one connection may hold pinned or reserved (LOOKUP, ALLOC)"},
    {"kv.max_pins", T_U32, F(kv_max_pins), "1048576", 1, 268435456, 0, 0, 0,
     "slots all connections together may hold pinned or reserved"},
    {"kv.tokens.token", T_STR, KT(token), "", 0, 0, 0, 3, 1, "KV pool token"},
    {"kv.tokens.namespaces", T_STR, KT(namespaces), "", 0, 0, 0, 3, 0,
     "namespaces the token may touch: fnmatch patterns, an array or comma-separated"},
    {"kv_slab.capacity_gb", T_U32, F(kv_capacity_gb), "0", 0, 1048576, 0, 0, 0,
     "DRAM tier in GiB (upstream key)"},
    {"kv_slab.cpu_ram_frac", T_F64, F(kv_cpu_ram_frac), "0", 0, 1, 0, 0, 0,
     "DRAM tier as a fraction of RAM (upstream key; wins over capacity_gb)"},
    {"kv_slab.reserve_ttl_secs", T_U32, F(kv_reserve_ttl_secs), "60", 1, 86400, 0, 0, 0,
     "how long an unfinished local put keeps its slot"},
    {"memory_pool.enabled", T_BOOL, F(mempool_enabled), "true", 0, 0, 0, 0, 0,
     "keep large S3 I/O buffers (64 KiB and more: PUT bodies, stripes, shard blocks) for the "
     "next request instead of freeing them (false: malloc and free each time)"},
    {"memory_pool.size_bytes", T_SIZE, F(mempool_size_bytes), "1GiB", 0, BIG, 0, 0, 0,
     "the most memory those idle buffers keep after a burst, all sizes together "
     "(openlake_io_buffer_cache_bytes on /metrics)"},
    {"memory_pool.bucket_capacity", T_U32, F(mempool_bucket_capacity), "8192", 0, 1 << 30, 0, 0, 0,
     "idle buffers kept of one size"},
    {"cluster.etcd", T_LIST, F(cluster_etcd), "", 0, 0, 0, 0, 0,
     "etcd endpoints, e.g. [\"http://10.0.0.1:2379\", \"http://10.0.0.2:2379\"]: nodes register "
     "there and share the layout written by `openlake cluster init` ([] = single node)"},
    {"cluster.advertise", T_STR, F(cluster_advertise), "", 0, 0, 0, 0, 0,
     "the host or IP other nodes and clients reach this node at: replaces a wildcard "
     "(0.0.0.0, ::) in the s3_addr, kv_addr and rpc_addr this node registers in etcd "
     "(\"\" = as configured; a wildcard is then read as loopback)"},
    {"cluster.tls_ca", T_STR, F(cluster_tls_ca), "", 0, 0, 0, 0, 0,
     "with [s3_tls]: a PEM file of the CA (or certificates) the other nodes' S3 certificates "
     "chain to, for the hop that forwards a request to the leader (\"\" = this node's own "
     "[s3_tls] cert_path and client_ca, so one certificate shared by all nodes works)"},
    {"cluster.lease_ttl_s", T_U32, F(cluster_lease_ttl_s), "10", 2, 3600, 0, 0, 0,
     "membership lease: a node that stops renewing it leaves the member list after this long"},
    {"cluster.quorum_loss_s", T_U32, F(cluster_quorum_loss_s), "15", 1, 3600, 0, 0, 0,
     "a set leader that cannot reach a write quorum of its set's drives' nodes for this long "
     "gives the set up (while another node may reach one), and a node campaigns only while it "
     "reaches one"},
    {"cluster.slow_drive_ms", T_U32, F(cluster_slow_drive_ms), "200", 0, 60000, 0, 0, 0,
     "a set leader takes a drive offline as slow when its node-plane calls average at least "
     "this many ms and slow_drive_ratio times its set's other drives' median, while the set "
     "keeps its write quorum without it (0 = never)"},
    {"cluster.slow_drive_ratio", T_U32, F(cluster_slow_drive_ratio), "8", 2, 1000, 0, 0, 0,
     "how many times its peers' median call time makes a drive slow (with slow_drive_ms)"},
    {"cluster.slow_drive_hold_s", T_U32, F(cluster_slow_drive_hold_s), "10", 1, 3600, 0, 0, 0,
     "a drive taken offline as slow returns once its probes have been fast this long; the "
     "hold doubles on each relapse, up to slow_drive_hold_max_s"},
    {"cluster.slow_drive_hold_max_s", T_U32, F(cluster_slow_drive_hold_max_s), "160", 1, 86400, 0,
     0, 0,
     "the longest hold of a drive that keeps turning slow; online twice this long without a "
     "relapse, its hold is back to slow_drive_hold_s"},
    {"cluster.slow_drive_min_s", T_U32, F(cluster_slow_drive_min_s), "5", 0, 3600, 0, 0, 0,
     "a drive is judged slow only once it has been online this long (since the store opened "
     "or it returned) with 16 calls, and only when slow at 2 of the monitor's ticks in a row"},
    {"cluster.hedge_ms", T_U32, F(cluster_hedge_ms), "200", 0, 60000, 0, 0, 0,
     "a set leader stops waiting for the slowest drives of a stripe's writes or reads once "
     "the others are done, the set can spare them (above its write quorum or k) and they "
     "have taken this many ms and hedge_ratio times the others' median; a write so given up "
     "is recorded as missed and healed; the same for a metadata commit on a write quorum and "
     "a metadata read whose answers decide it (0 = always wait)"},
    {"cluster.hedge_ratio", T_U32, F(cluster_hedge_ratio), "4", 1, 1000, 0, 0, 0,
     "how many times the finished drives' median time a straggler is given (with hedge_ms); "
     "also how far a drive's average call time must be above its peers' (and hedge_ms) for "
     "reads to take a parity shard instead of its data shard"},
    {"cluster.read_any", T_BOOL, F(cluster_read_any), "true", 0, 0, 0, 0, 0,
     "every node that does not serve the cluster store serves S3 GET and HEAD requests itself "
     "over a read-only view of the store (docs/cluster.md, \"Serving and forwarding\"); "
     "false: it forwards them to the serving leader like every other request"},
    {"cluster.write_any", T_BOOL, F(cluster_write_any), "true", 0, 0, 0, 0, 0,
     "every node that does not serve the cluster store writes the data of a client's plain "
     "PutObject and UploadPart itself (erasure coding, checksums, shard files over the node "
     "planes) and sends only the commit to the serving leader (docs/cluster.md, \"Writes on "
     "every node\"); false: such writes are forwarded to the leader whole"},
    {"cluster.write_degraded", T_BOOL, F(cluster_write_degraded), "true", 0, 0, 0, 0, 0,
     "with write_any, a follower whose view lacks a drive also writes a PUT's data itself when "
     "the serving leader says it lacks that drive too (<prefix>offline); the leader refuses "
     "the commit (503 SlowDown, retried) if it has that drive online by then; false: such "
     "PUTs are forwarded to the leader (docs/cluster.md, \"Writes on every node\")"},
    {"cluster.revoke_dead_leader", T_BOOL, F(cluster_revoke_dead_leader), "true", 0, 0, 0, 0, 0,
     "a node that finds the serving leader's S3 port refusing connections on two checks a "
     "second apart (its process is gone: a crash, kill -9, OOM) revokes the leader's etcd "
     "lease, so the next leader serves within seconds instead of at the lease's end "
     "(lease_ttl_s); a leader frozen or cut off is not refused and waits for its lease "
     "(docs/cluster.md, \"A dead leader\")"},
    {"cluster.reclaim_delay_ms", T_U32, F(cluster_reclaim_delay_ms), "30000", 0, 3600000, 0, 0, 0,
     "with read_any: the serving leader unlinks the shard files of an overwritten or deleted "
     "version only this long after the commit, so other nodes' reads of it can finish"},
    {"cluster.etcd_timeout_ms", T_U32, F(cluster_etcd_timeout_ms), "0", 0, 600000, 0, 0, 0,
     "deadline of each etcd call, over all the endpoints it tries (0 = a third of lease_ttl_s: "
     "a keepalive to a hung member fails over in time to keep the lease); a longer one only "
     "makes this node wait longer on a hung etcd, e.g. to test that leadership does not"},
    {"cluster.prefix", T_STR, F(cluster_prefix), "/openlake/", 0, 0, 0, 0, 0,
     "prefix of every key OpenLake writes to etcd"},
    {"cluster.weight", T_U32, F(cluster_weight), "1", 0, 1000000, 0, 0, 0,
     "this node's relative share when placing KV blocks (0 = none)"},
    {"cluster.secret", T_STR, F(cluster_secret), "", 0, 0, 0, 0, 1,
     "shared secret of the node plane (every frame carries a MAC under keys derived from it); "
     "the plane serves rpc_addr only when it is set, and every node needs the same one"},
    {"cluster.plane_only_drives", T_U32, F(cluster_plane_only_drives), "0", 0, 64, 0, 0, 0,
     "the last this many data_dirs are served only over the node plane (drives of a set led "
     "by another process), never opened by this node's own store"},
    {"cluster.plane_threads", T_U32, F(cluster_plane_threads), "2", 1, 64, 0, 0, 0,
     "node plane: event-loop threads (one io_uring each) serving rpc_addr"},
    {"cluster.plane_transport", T_ENUM, F(cluster_plane_transport), "tcp", 0, 0, "tcp|ucx|rdma", 0,
     0,
     "node plane: tcp, or ucx (rdma: the same) for RDMA fabrics (UCX_TLS and UCX_NET_DEVICES, "
     "or [rdma] dev_name, pick the wire); every node of a cluster the same; ucx needs a build "
     "with libucx-dev"},
    {"cluster.plane_encrypt", T_BOOL, F(cluster_plane_encrypt), "false", 0, 0, 0, 0, 0,
     "node plane: encrypt every frame's payload (ChaCha20-Poly1305 under the per-connection "
     "keys) instead of authenticating it only; every node of a cluster the same: a node with it "
     "on refuses a peer that sends plain frames"},
    {"cluster.plane_window", T_SIZE, F(cluster_plane_window), "8MiB", 65536, 1073741824, 0, 0, 0,
     "node plane: bytes a peer may have in flight towards this node (its credit window)"},
    {"cluster.plane_max_frame", T_SIZE, F(cluster_plane_max_frame), "1MiB", 4096, 16777216, 0, 0, 0,
     "node plane: largest frame payload accepted (shard chunks are at most this)"},
    {"s3.lifecycle_day_secs", T_U32, F(s3_lc_day_secs), "86400", 1, 86400, 0, 0, 0,
     "seconds in a lifecycle \"day\" (Expiration Days, NoncurrentDays, DaysAfterInitiation); "
     "for tests only: 1 runs a day of rules in a second"},
    {"s3.lifecycle_interval_secs", T_U32, F(s3_lc_interval_secs), "3600", 1, 604800, 0, 0, 0,
     "seconds between two scans of the buckets that have lifecycle rules"},
    {"s3.lifecycle_ops_per_sec", T_U32, F(s3_lc_ops_per_sec), "1000", 0, 1000000, 0, 0, 0,
     "lifecycle scanner I/O cap: versions read plus actions taken per second (0 = no cap)"},
    {"s3.sse_master_key_file", T_STR, F(s3_sse_master_key_file), "", 0, 0, 0, 0, 0,
     "SSE-S3 master key file: exactly 32 bytes, or 64 hex digits, or the base64 of 32 bytes "
     "(a trailing newline is allowed); \"\" = SSE-S3 off (requests for it are refused)"},
    {"s3.sse_kms_keys", T_LIST, F(s3_sse_kms_keys), "", 0, 0, 0, 0, 0,
     "key ids of the local KMS for SSE-KMS (aws:kms), each a key derived from the "
     "sse_master_key_file; the first serves aws:kms without a key id; [] = SSE-KMS off"},
    {"s3.domains", T_LIST, F(s3_domains), "", 0, 0, 0, 0, 0,
     "DNS names of the S3 endpoint besides s3_addr's host: a request whose Host is "
     "<bucket>.<name> addresses <bucket> (virtual-host style), e.g. a cluster's load-balanced "
     "name with a wildcard DNS record; give every node the same list; [] = s3_addr's host, "
     "localhost and the AWS names only"},
    {"s3.sse_c_allow_http", T_BOOL, F(s3_sse_c_allow_http), "false", 0, 0, 0, 0, 0,
     "accept SSE-C (customer keys in headers) over plain HTTP; AWS refuses it (the key would "
     "cross the network in clear): keep false unless clients are on loopback"},
    {"s3_tls.cert_path", T_STR, F(s3_tls.cert_path), "", 0, 0, 0, 0, 0, "S3 TLS certificate"},
    {"s3_tls.key_path", T_STR, F(s3_tls.key_path), "", 0, 0, 0, 0, 0, "S3 TLS key"},
    {"s3_tls.client_ca", T_STR, F(s3_tls.client_ca), "", 0, 0, 0, 0, 0, "S3 TLS client CA"},
    {"kv_tls.cert_path", T_STR, F(kv_tls.cert_path), "", 0, 0, 0, 0, 0,
     "KV port TLS certificate (PEM; set with key_path: the KV TCP port speaks TLS only)"},
    {"kv_tls.key_path", T_STR, F(kv_tls.key_path), "", 0, 0, 0, 0, 0, "KV port TLS key"},
    {"kv_tls.client_ca", T_STR, F(kv_tls.client_ca), "", 0, 0, 0, 0, 0,
     "KV port TLS client CA (set: clients must show a certificate it signed)"},
    {"rpc_tls.cert_path", T_STR, F(rpc_tls.cert_path), "", 0, 0, 0, 0, 0, "RPC TLS cert"},
    {"rpc_tls.key_path", T_STR, F(rpc_tls.key_path), "", 0, 0, 0, 0, 0, "RPC TLS key"},
    {"rpc_tls.client_ca", T_STR, F(rpc_tls.client_ca), "", 0, 0, 0, 0, 0, "RPC TLS CA"},
    {"rdma.port", T_U32, F(rdma_port), "0", 0, 65535, 0, 0, 0,
     "UCX port of the KV pool (transport = rdma); 0 = the KV port + 1"},
    {"rdma.backend", T_ENUM, F(rdma_backend), "dct", 0, 0, "dct|ucx", 0, 0, "RDMA backend"},
    {"rdma.dev_name", T_STR, F(rdma_dev_name), "", 0, 0, 0, 0, 0,
     "RDMA NIC (e.g. mlx5_0) the KV pool's and the node plane's UCX use when it is here "
     "and UCX_NET_DEVICES is unset"},
    {"rdma.self_node_id", T_U32, F(rdma_self_node_id), "0", 0, 65535, 0, 0, 0, "DCT node id"},
    {"rdma.dc_key", T_U64, F(rdma_dc_key), "0", 0, BIG, 0, 0, 0, "DCT access key"},
    {"rdma.bulk_pool_cap", T_U32, F(rdma_bulk_pool_cap), "64", 0, 1 << 20, 0, 0, 0, "RDMA"},
    {"rdma.network_timeout_secs", T_U32, F(rdma_network_timeout_secs), "36000", 0, 1 << 30, 0, 0, 0,
     "RDMA"},
    {"rdma.srq_depth", T_U32, F(rdma_srq_depth), "4096", 1, 1 << 20, 0, 0, 0, "RDMA"},
    {"rdma.max_send_wr", T_U32, F(rdma_max_send_wr), "256", 1, 1 << 20, 0, 0, 0, "RDMA"},
    {"rdma.peer_credit", T_U32, F(rdma_peer_credit), "4", 1, 1 << 20, 0, 0, 0, "RDMA"},
    {"rdma.max_clients", T_U32, F(rdma_max_clients), "0", 0, 1 << 20, 0, 0, 0, "RDMA"},
    {"rdma.qos.traffic_class", T_U32, F(rdma_traffic_class), "0", 0, 255, 0, 0, 0, "QoS"},
    {"rdma.qos.service_level", T_U32, F(rdma_service_level), "0", 0, 15, 0, 0, 0, "QoS"},
    {"credentials.access_key", T_STR, CR(access_key), "", 0, 0, 0, 1, 0, "S3 access key"},
    {"credentials.secret_key", T_STR, CR(secret_key), "", 0, 0, 0, 1, 1, "S3 secret key"},
    {"credentials.user", T_STR, CR(user), "", 0, 0, 0, 1, 0,
     "user name (\"\" = the admin); a named user is not an admin unless admin = true"},
    {"credentials.admin", T_BOOL, CR(admin), "false", 0, 0, 0, 1, 0,
     "this key may use the admin API (status, heal, console)"},
    {"nodes.id", T_U32, ND(id), "0", 0, 65535, 0, 2, 0, "node id"},
    {"nodes.rpc_addr", T_STR, ND(rpc_addr), "", 0, 0, 0, 2, 0, "node RPC address"},
    {"nodes.disk_count", T_U32, ND(disk_count), "1", 1, OL_CFG_MAX_DIRS, 0, 2, 0, "drives"},
};

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static const struct cfg_key *
key_find(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

int
ol_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	while (*end == ' ')
		end++;
	static const struct {
		const char *suf;
		unsigned shift;
	} sufs[] = {{"", 0},	 {"b", 0},   {"k", 10},	  {"kb", 10}, {"kib", 10},
		    {"m", 20},	 {"mb", 20}, {"mib", 20}, {"g", 30},  {"gb", 30},
		    {"gib", 30}, {"t", 40},  {"tb", 40},  {"tib", 40}};
	for (size_t i = 0; i < sizeof(sufs) / sizeof(sufs[0]); i++) {
		if (strcasecmp(end, sufs[i].suf) == 0) {
			if (sufs[i].shift && v > (UINT64_MAX >> sufs[i].shift))
				return -ERANGE;
			*out = (uint64_t)v << sufs[i].shift;
			return 0;
		}
	}
	return -EINVAL;
}

int
ol_config_split_addr(const char *addr, char *host, size_t hostlen, unsigned *port)
{
	const char *colon, *h = addr;
	size_t hl;
	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = addr + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - addr);
	}
	if (hl == 0 || hl >= hostlen)
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p > 65535)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	*port = (unsigned)p;
	return 0;
}

/* Store a scalar value (already unquoted, text form) into the field. */
static int
key_store(void *base, const struct cfg_key *k, const char *val, char *err, size_t errlen)
{
	char *p = (char *)base + k->off;
	char *end;
	switch (k->type) {
	case T_STR:
	case T_ENUM:
	case T_LIST:
		if (strlen(val) >= k->len) {
			snprintf(err, errlen, "value of '%s' is too long (max %zu bytes)", k->name,
				 k->len - 1);
			return -EINVAL;
		}
		if (k->type == T_ENUM) {
			size_t vl = strlen(val);
			const char *e = k->enums;
			int ok = 0;
			while (*e) {
				size_t l = strcspn(e, "|");
				if (l == vl && strncmp(e, val, l) == 0)
					ok = 1;
				e += l + (e[l] == '|');
			}
			if (!ok) {
				snprintf(err, errlen, "'%s' must be one of %s, not \"%s\"", k->name,
					 k->enums, val);
				return -EINVAL;
			}
		}
		memcpy(p, val, strlen(val) + 1);
		return 0;
	case T_BOOL:
		if (strcmp(val, "true") == 0)
			*(bool *)p = true;
		else if (strcmp(val, "false") == 0)
			*(bool *)p = false;
		else {
			snprintf(err, errlen, "'%s' must be true or false, not \"%s\"", k->name,
				 val);
			return -EINVAL;
		}
		return 0;
	case T_F64: {
		errno = 0;
		double d = strtod(val, &end);
		if (errno || *end || end == val || isnan(d) || d < k->min || d > k->max) {
			snprintf(err, errlen, "'%s' must be a number in [%g, %g], not \"%s\"",
				 k->name, k->min, k->max, val);
			return -EINVAL;
		}
		*(double *)p = d;
		return 0;
	}
	case T_U32:
	case T_U64:
	case T_SIZE: {
		uint64_t v;
		int rc;
		char clean[64];
		size_t j = 0;
		for (const char *s = val; *s && j < sizeof(clean) - 1; s++)
			if (*s != '_')
				clean[j++] = *s;
		clean[j] = 0;
		if (k->type == T_SIZE) {
			rc = ol_parse_size(clean, &v);
		} else {
			errno = 0;
			rc = (!isdigit((unsigned char)clean[0])) ? -EINVAL : 0;
			if (!rc) {
				v = strtoull(clean, &end, 0);
				rc = (errno || *end) ? -EINVAL : 0;
			}
		}
		if (rc || (double)v < k->min || (double)v > k->max) {
			snprintf(err, errlen, "'%s' must be %s in [%.0f, %.0f], not \"%s\"",
				 k->name, k->type == T_SIZE ? "a size (e.g. 4GiB)" : "an integer",
				 k->min, k->max, val);
			return -EINVAL;
		}
		if (k->type == T_U32)
			*(unsigned *)p = (unsigned)v;
		else
			*(uint64_t *)p = v;
		return 0;
	}
	case T_DIRS:
		break;
	}
	return -EINVAL;
}

static int
dirs_add(struct ol_config *cfg, const char *dir, char *err, size_t errlen)
{
	if (cfg->n_data_dirs >= OL_CFG_MAX_DIRS) {
		snprintf(err, errlen, "too many data_dirs (max %d)", OL_CFG_MAX_DIRS);
		return -EINVAL;
	}
	if (!*dir || strlen(dir) >= OL_CFG_STR) {
		snprintf(err, errlen, "data_dirs entry is empty or too long");
		return -EINVAL;
	}
	for (unsigned i = 0; i < cfg->n_data_dirs; i++) {
		if (strcmp(cfg->data_dirs[i], dir) == 0) {
			snprintf(err, errlen, "data_dirs lists \"%s\" twice", dir);
			return -EINVAL;
		}
	}
	memcpy(cfg->data_dirs[cfg->n_data_dirs++], dir, strlen(dir) + 1);
	return 0;
}

/* comma-separated list (defaults and command-line overrides) */
static int
dirs_set_list(struct ol_config *cfg, const char *list, char *err, size_t errlen)
{
	char buf[OL_CFG_STR];
	cfg->n_data_dirs = 0;
	while (*list) {
		size_t l = strcspn(list, ",");
		if (l >= sizeof(buf)) {
			snprintf(err, errlen, "data_dirs entry too long");
			return -EINVAL;
		}
		memcpy(buf, list, l);
		buf[l] = 0;
		int rc = dirs_add(cfg, buf, err, errlen);
		if (rc)
			return rc;
		list += l + (list[l] == ',');
	}
	return 0;
}

void
ol_config_default(struct ol_config *cfg)
{
	char err[256];
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct cfg_key *k = &keys[i];
		if (k->array || !k->def[0])
			continue;
		if (k->type == T_DIRS)
			dirs_set_list(cfg, k->def, err, sizeof(err));
		else
			key_store(cfg, k, k->def, err, sizeof(err));
	}
	memcpy(cfg->creds[0].access_key, "openlakeadmin", 14);
	memcpy(cfg->creds[0].secret_key, "openlakeadmin", 14);
	cfg->n_creds = 1;
	cfg->nodes[0].id = 0;
	memcpy(cfg->nodes[0].rpc_addr, cfg->rpc_addr, strlen(cfg->rpc_addr) + 1);
	cfg->nodes[0].disk_count = cfg->n_data_dirs;
	cfg->n_nodes = 1;
	memcpy(cfg->source, "<embedded default>", 19);
}

bool
ol_config_cred_is_admin(const struct ol_config_cred *c)
{
	return c->admin || !c->user[0];
}

const struct ol_config_cred *
ol_config_cred_find(const struct ol_config *cfg, const char *ak)
{
	for (unsigned i = 0; i < cfg->n_creds; i++)
		if (strcmp(cfg->creds[i].access_key, ak) == 0)
			return &cfg->creds[i];
	return NULL;
}

const char *
ol_config_secret_for(const char *ak, void *cfg)
{
	const struct ol_config_cred *c = ol_config_cred_find(cfg, ak);
	return c ? c->secret_key : NULL;
}

/* ---- parser glue: the TOML tokenizer (toml.c) calls back with (table, key, value) ---- */

/* T_LIST from TOML: a string or an array of strings, joined with ',' (no entry may hold one) */
static int
strlist_store(void *base, const struct cfg_key *k, const struct ol_toml_value *v, char *err,
	      size_t errlen)
{
	char *p = (char *)base + k->off;
	size_t used = 0;
	if (v->kind != OL_TOML_STRING && v->kind != OL_TOML_ARRAY_STRING &&
	    !(v->kind == OL_TOML_ARRAY_OTHER && v->n_items == 0)) {
		snprintf(err, errlen, "'%s' must be a string or an array of strings", k->name);
		return -EINVAL;
	}
	p[0] = 0;
	for (size_t i = 0; i < v->n_items; i++) {
		size_t l = strlen(v->items[i]);
		if (!l || strchr(v->items[i], ',')) {
			snprintf(err, errlen, "'%s' entries must be non-empty and hold no ','",
				 k->name);
			return -EINVAL;
		}
		if (used + l + 2 > k->len) {
			snprintf(err, errlen, "'%s' is too long (max %zu bytes)", k->name,
				 k->len - 1);
			return -EINVAL;
		}
		if (used)
			p[used++] = ',';
		memcpy(p + used, v->items[i], l + 1);
		used += l;
	}
	return 0;
}

int
ol_config_list_item(const char *list, unsigned n, char *buf, size_t len)
{
	while (*list) {
		size_t l = strcspn(list, ",");
		if (n-- == 0) {
			if (l >= len)
				return -ENAMETOOLONG;
			memcpy(buf, list, l);
			buf[l] = 0;
			return 0;
		}
		list += l + (list[l] == ',');
	}
	return -ENOENT;
}

unsigned
ol_config_distinct_nodes(const struct ol_config *cfg)
{
	unsigned n = 0;
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		unsigned j = 0;
		for (; j < i; j++) {
			const struct ol_config_node *a = &cfg->nodes[i], *b = &cfg->nodes[j];
			if (a->rpc_addr[0] ? strcmp(a->rpc_addr, b->rpc_addr) == 0 : a->id == b->id)
				break;
		}
		n += j == i;
	}
	return n;
}

struct parse_ctx {
	struct ol_config *cfg;
	const char *name;
	char *err;
	size_t errlen;
	int creds_seen, nodes_seen, dirs_seen;
	int kv_slab_seen;
};

static void *
array_elem(struct parse_ctx *c, int array)
{
	if (array == 3)
		return c->cfg->n_kv_tokens ? &c->cfg->kv_tokens[c->cfg->n_kv_tokens - 1] : NULL;
	if (array == 1)
		return c->cfg->n_creds ? &c->cfg->creds[c->cfg->n_creds - 1] : NULL;
	return c->cfg->n_nodes ? &c->cfg->nodes[c->cfg->n_nodes - 1] : NULL;
}

static int
on_table(void *arg, const char *table, int is_array, unsigned line)
{
	struct parse_ctx *c = arg;
	if (is_array && strcmp(table, "credentials") == 0) {
		if (!c->creds_seen++)
			c->cfg->n_creds = 0;
		if (c->cfg->n_creds >= OL_CFG_MAX_CREDS)
			goto full;
		memset(&c->cfg->creds[c->cfg->n_creds++], 0, sizeof(struct ol_config_cred));
		return 0;
	}
	if (is_array && strcmp(table, "kv.tokens") == 0) {
		if (c->cfg->n_kv_tokens >= OL_CFG_MAX_KV_TOKENS)
			goto full;
		memset(&c->cfg->kv_tokens[c->cfg->n_kv_tokens++], 0,
		       sizeof(struct ol_config_kv_token));
		return 0;
	}
	if (is_array && strcmp(table, "nodes") == 0) {
		if (!c->nodes_seen++)
			c->cfg->n_nodes = 0;
		if (c->cfg->n_nodes >= OL_CFG_MAX_NODES)
			goto full;
		struct ol_config_node *n = &c->cfg->nodes[c->cfg->n_nodes++];
		memset(n, 0, sizeof(*n));
		n->disk_count = 1;
		return 0;
	}
	static const char *const tables[] = {"storage", "kv",	   "kv_slab", "memory_pool",
					     "s3_tls",	"rpc_tls", "rdma",    "rdma.qos",
					     "admin",	"cluster", "kv_tls",  "s3"};
	for (size_t i = 0; !is_array && i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (strcmp(table, tables[i]) == 0) {
			if (strcmp(table, "kv_slab") == 0)
				c->kv_slab_seen = 1;
			return 0;
		}
	}
	snprintf(c->err, c->errlen, "%s:%u: unknown table [%s%s%s]", c->name, line,
		 is_array ? "[" : "", table, is_array ? "]" : "");
	return -EINVAL;
full:
	snprintf(c->err, c->errlen, "%s:%u: too many [[%s]] entries", c->name, line, table);
	return -EINVAL;
}

/* An array of strings stored comma-joined in a T_STR field ([[kv.tokens]] namespaces). */
static int
list_store(void *base, const struct cfg_key *k, const struct ol_toml_value *v, char *err,
	   size_t errlen)
{
	char *p = (char *)base + k->off;
	size_t n = 0;
	for (size_t i = 0; i < v->n_items; i++) {
		size_t l = strlen(v->items[i]);
		if (strchr(v->items[i], ',') || n + l + 2 > k->len) {
			snprintf(err, errlen, "'%s': an item has a ',' or the list is too long",
				 k->name);
			return -EINVAL;
		}
		if (n)
			p[n++] = ',';
		memcpy(p + n, v->items[i], l);
		n += l;
	}
	p[n] = '\0';
	return 0;
}

static int
on_value(void *arg, const char *table, const char *key, const struct ol_toml_value *v,
	 unsigned line)
{
	struct parse_ctx *c = arg;
	char full[256];
	snprintf(full, sizeof(full), "%s%s%s", table, *table ? "." : "", key);
	const struct cfg_key *k = key_find(full);
	if (!k) {
		snprintf(c->err, c->errlen, "%s:%u: unknown key '%s'", c->name, line, full);
		return -EINVAL;
	}
	void *base = c->cfg;
	if (k->array) {
		base = array_elem(c, k->array);
		if (!base)
			goto bad;
	}
	char msg[200];
	int rc;
	if (k->type == T_DIRS) {
		c->cfg->n_data_dirs = 0;
		c->cfg->data_dirs_given = true;
		if (v->kind == OL_TOML_STRING) {
			rc = dirs_add(c->cfg, v->items[0], msg, sizeof(msg));
		} else if (v->kind == OL_TOML_ARRAY_STRING) {
			rc = 0;
			for (size_t i = 0; !rc && i < v->n_items; i++)
				rc = dirs_add(c->cfg, v->items[i], msg, sizeof(msg));
		} else {
			snprintf(msg, sizeof(msg),
				 "'data_dirs' must be a string or array of strings");
			rc = -EINVAL;
		}
	} else if (k->array == 3 && k->type == T_STR && v->kind == OL_TOML_ARRAY_STRING) {
		rc = list_store(base, k, v, msg, sizeof(msg));
	} else if (k->type == T_LIST) {
		rc = strlist_store(base, k, v, msg, sizeof(msg));
	} else if (v->kind == OL_TOML_ARRAY_STRING || v->kind == OL_TOML_ARRAY_OTHER) {
		snprintf(msg, sizeof(msg), "'%s' takes one value, not an array", full);
		rc = -EINVAL;
	} else if ((k->type == T_STR || k->type == T_ENUM) && v->kind != OL_TOML_STRING) {
		snprintf(msg, sizeof(msg), "'%s' must be a quoted string", full);
		rc = -EINVAL;
	} else if (k->type != T_STR && k->type != T_ENUM && k->type != T_SIZE &&
		   v->kind == OL_TOML_STRING) {
		snprintf(msg, sizeof(msg),
			 "'%s' takes %s, not a quoted string: write %s = %.40s (no quotes)", full,
			 k->type == T_BOOL ? "true or false" : "a number", full, v->items[0]);
		rc = -EINVAL;
	} else {
		rc = key_store(base, k, v->items[0], msg, sizeof(msg));
	}
	if (rc) {
		snprintf(c->err, c->errlen, "%s:%u: %s", c->name, line, msg);
		return rc;
	}
	return 0;
bad:
	snprintf(c->err, c->errlen, "%s:%u: key '%s' outside its [[%s]] table", c->name, line, full,
		 k->array == 1	 ? "credentials"
		 : k->array == 3 ? "kv.tokens"
				 : "nodes");
	return -EINVAL;
}

int
ol_config_parse(struct ol_config *cfg, const char *name, const char *text, size_t len, char *err,
		size_t errlen)
{
	struct parse_ctx c = {.cfg = cfg, .name = name, .err = err, .errlen = errlen};
	struct ol_toml_cbs cbs = {.on_table = on_table, .on_value = on_value, .arg = &c};
	char perr[200];
	unsigned line = 0;
	int rc = ol_toml_parse(text, len, &cbs, perr, sizeof(perr), &line);
	if (rc == -EBADMSG) {
		snprintf(err, errlen, "%s:%u: %s", name, line, perr);
		return -EINVAL;
	}
	if (rc)
		return rc;
	if (strlen(name) < sizeof(cfg->source))
		memcpy(cfg->source, name, strlen(name) + 1);
	/* a config that names no kv listener in kv mode listens on rpc_addr (upstream) */
	return 0;
}

/* A missing file named as one of the public OpenLake's configs (its quick start's
 * crates/openlake_server/configs/storage-tcp-local.toml): where ours is. "" for other names. */
static const char *
public_config_hint(const char *path, char *buf, size_t cap)
{
	static const char *const names[] = {"storage-tcp-local.toml", "kv_local.toml",
					    "kv_rdma.toml"};
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(base, names[i]) == 0) {
			snprintf(buf, cap,
				 " (the public OpenLake's %s is configs/%s in this source tree, "
				 "share/openlake/examples/%s under the install prefix)",
				 base, base, base);
			return buf;
		}
	return "";
}

int
ol_config_load_file(struct ol_config *cfg, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		char hint[256];
		snprintf(err, errlen, "cannot open config %s: %s%s", path, strerror(e),
			 e == ENOENT ? public_config_hint(path, hint, sizeof(hint)) : "");
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) || st.st_size > (1 << 20)) {
		close(fd);
		snprintf(err, errlen, "config %s is not a regular file under 1 MiB", path);
		return -EFBIG;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	int rc = ol_config_parse(cfg, path, buf, got, err, errlen);
	free(buf);
	return rc;
}

int
ol_config_set(struct ol_config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	char name[128];
	size_t l = strlen(key);
	if (l >= sizeof(name)) {
		snprintf(err, errlen, "unknown option --%s", key);
		return -EINVAL;
	}
	for (size_t i = 0; i <= l; i++)
		name[i] = key[i] == '-' ? '_' : key[i];
	const struct cfg_key *k = key_find(name);
	if (!k || k->array) {
		snprintf(err, errlen, "unknown option --%s (see openlaked --print-config for keys)",
			 key);
		return -EINVAL;
	}
	if (k->type == T_DIRS) {
		cfg->data_dirs_given = true;
		return dirs_set_list(cfg, value, err, errlen);
	}
	return key_store(cfg, k, value, err, errlen);
}

const char *
ol_config_kv_listen(const struct ol_config *cfg)
{
	if (strcmp(cfg->mode, "kv") == 0 && strcmp(cfg->kv_addr, "127.0.0.1:9400") == 0 &&
	    cfg->rpc_addr[0])
		return cfg->rpc_addr;
	return cfg->kv_addr;
}

const char *
ol_config_advertised(const struct ol_config *cfg, const char *addr, char *buf, size_t cap)
{
	char host[OL_CFG_STR];
	unsigned port;
	if (!cfg->cluster_advertise[0] || !ol_config_addr_wildcard(addr))
		return addr;
	if (addr[0] == ':') {
		char tmp[16];
		snprintf(tmp, sizeof(tmp), "*%s", addr);
		if (ol_config_split_addr(tmp, host, sizeof(host), &port))
			return addr;
	} else if (ol_config_split_addr(addr, host, sizeof(host), &port)) {
		return addr;
	}
	bool v6 = strchr(cfg->cluster_advertise, ':') != NULL;
	int n = snprintf(buf, cap, v6 ? "[%s]:%u" : "%s:%u", cfg->cluster_advertise, port);
	return n > 0 && (size_t)n < cap ? buf : addr;
}

const char *
ol_config_plane_scheme(const struct ol_config *cfg)
{
	return strcmp(cfg->cluster_plane_transport, "tcp") ? "ucx://" : "";
}

const char *
ol_config_plane_addr(const struct ol_config *cfg, char *buf, size_t cap)
{
	char tmp[OL_CFG_STR + 8];
	const char *a = ol_config_advertised(cfg, cfg->rpc_addr, tmp, sizeof(tmp));
	snprintf(buf, cap, "%s%s", ol_config_plane_scheme(cfg), a);
	return buf;
}

bool
ol_config_addr_wildcard(const char *addr)
{
	char host[OL_CFG_STR];
	unsigned port;
	if (addr[0] == ':') /* ":9000" */
		return true;
	if (ol_config_split_addr(addr, host, sizeof(host), &port))
		return false;
	return !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*");
}

uint64_t
ol_config_kv_dram_bytes(const struct ol_config *cfg, uint64_t mem_total, const char **key)
{
	const uint64_t gib = 1ull << 30;
	const char *k = "the default";
	uint64_t v = gib;
	if (cfg->kv_dram_bytes) {
		k = "[kv] dram_bytes";
		v = cfg->kv_dram_bytes;
	} else if (cfg->kv_cpu_ram_frac > 0) {
		uint64_t g = (uint64_t)((double)mem_total * cfg->kv_cpu_ram_frac) / gib;
		k = "[kv_slab] cpu_ram_frac";
		v = (g ? g : 1) * gib;
	} else if (cfg->kv_capacity_gb) {
		k = "[kv_slab] capacity_gb";
		v = (uint64_t)cfg->kv_capacity_gb * gib;
	}
	if (key)
		*key = k;
	return v;
}

bool
ol_config_kv_prefault(const struct ol_config *cfg)
{
	if (strcmp(cfg->kv_prefault, "auto") == 0)
		return strcmp(cfg->mode, "kv") == 0;
	return strcmp(cfg->kv_prefault, "on") == 0;
}

static int
validate_addrs(const struct ol_config *cfg, char *err, size_t errlen)
{
	char host[OL_CFG_STR];
	unsigned port;
	const char *const names[] = {"s3_addr", "rpc_addr", "kv_addr", "console_addr"};
	const char *const vals[] = {cfg->s3_addr, cfg->rpc_addr, cfg->kv_addr, cfg->console_addr};
	for (int i = 0; i < 4; i++) {
		if (!vals[i][0] && i >= 1)
			continue;
		if (ol_config_split_addr(vals[i], host, sizeof(host), &port)) {
			snprintf(err, errlen, "%s = \"%s\" is not host:port (e.g. 127.0.0.1:9000)",
				 names[i], vals[i]);
			return -EINVAL;
		}
	}
	/* [s3] domains: host names alone (no port, scheme or path; an IP address never names
	 * a bucket) */
	int r;
	for (unsigned i = 0;
	     (r = ol_config_list_item(cfg->s3_domains, i, host, sizeof(host))) != -ENOENT; i++) {
		bool ip = !r && (inet_pton(AF_INET, host, &(struct in_addr){0}) == 1 ||
				 strchr(host, ':'));
		if (r || !host[0] || ip || strpbrk(host, " \t/[]@") || host[0] == '.' ||
		    host[strlen(host) - 1] == '.') {
			snprintf(err, errlen,
				 "s3.domains: \"%s\" is not a DNS name like \"s3.example.com\" (no "
				 "port, scheme, path or IP address: requests to <bucket>.<name> "
				 "address <bucket>)",
				 r ? "(too long)" : host);
			return -EINVAL;
		}
	}
	return 0;
}

/* [cluster]: endpoints are http://host:port (or host:port); the prefix is an absolute
 * etcd "directory" */
static int
validate_cluster(const struct ol_config *cfg, char *err, size_t errlen)
{
	char ep[OL_CFG_STR], host[OL_CFG_STR];
	unsigned port;
	if (cfg->cluster_plane_window < cfg->cluster_plane_max_frame + 128) {
		snprintf(
		    err, errlen,
		    "cluster.plane_window (%llu) must exceed cluster.plane_max_frame (%llu) by "
		    "at least 128 bytes: a peer must be able to send one whole frame",
		    (unsigned long long)cfg->cluster_plane_window,
		    (unsigned long long)cfg->cluster_plane_max_frame);
		return -EINVAL;
	}
	const char *adv = cfg->cluster_advertise;
	if (adv[0] && (strchr(adv, '[') || strchr(adv, ' ') || strchr(adv, '/') ||
		       (strchr(adv, ':') && strchr(adv, '.')))) {
		snprintf(err, errlen,
			 "cluster.advertise = \"%s\" must be a host name or an IP address alone "
			 "(e.g. \"10.0.0.5\" or \"fd00::5\"): the ports come from s3_addr, "
			 "kv_addr and rpc_addr",
			 adv);
		return -EINVAL;
	}
	size_t pl = strlen(cfg->cluster_prefix);
	if (pl < 2 || cfg->cluster_prefix[0] != '/' || cfg->cluster_prefix[pl - 1] != '/') {
		snprintf(err, errlen,
			 "cluster.prefix = \"%s\" must start and end with '/' (e.g. "
			 "\"/openlake/\")",
			 cfg->cluster_prefix);
		return -EINVAL;
	}
	int r;
	for (unsigned i = 0;
	     (r = ol_config_list_item(cfg->cluster_etcd, i, ep, sizeof(ep))) != -ENOENT; i++) {
		if (r)
			ep[0] = 0;
		const char *a = strncmp(ep, "http://", 7) == 0 ? ep + 7 : ep;
		size_t al = strlen(a);
		if (al && a[al - 1] == '/')
			ep[strlen(ep) - 1] = 0;
		if (i >= 16 || strpbrk(a, " \t/") ||
		    ol_config_split_addr(a, host, sizeof(host), &port) || !port) {
			snprintf(
			    err, errlen,
			    "cluster.etcd: \"%s\" is not an etcd endpoint like "
			    "\"http://127.0.0.1:2379\" (at most 16; https is not supported yet)",
			    ep);
			return -EINVAL;
		}
	}
	return 0;
}

int
ol_config_validate(struct ol_config *cfg, char *err, size_t errlen)
{
	int rc = validate_addrs(cfg, err, errlen);
	if (rc)
		return rc;
	if (cfg->n_data_dirs == 0) {
		snprintf(err, errlen, "data_dirs is empty: name at least one drive directory");
		return -EINVAL;
	}
	unsigned n = cfg->set_drive_count, p = cfg->default_parity_count;
	/* in a cluster (etcd, several [[nodes]]) a set spans the nodes: N divides all their
	 * drives, not this node's */
	unsigned total = 0;
	for (unsigned i = 0; i < cfg->n_nodes; i++)
		total += cfg->nodes[i].disk_count;
	bool spans = cfg->cluster_etcd[0] && ol_config_distinct_nodes(cfg) >= 2;
	if (spans && (n > total || total % n)) {
		snprintf(err, errlen,
			 "set_drive_count = %u must divide the drives of all [[nodes]] (%u, their "
			 "disk_count summed); set it to a divisor of %u",
			 n, total, total);
		return -EINVAL;
	}
	if (cfg->cluster_plane_only_drives >= cfg->n_data_dirs) {
		snprintf(err, errlen,
			 "[cluster] plane_only_drives = %u leaves none of the %u data_dirs to this "
			 "node's store; it must be below %u",
			 cfg->cluster_plane_only_drives, cfg->n_data_dirs, cfg->n_data_dirs);
		return -EINVAL;
	}
	unsigned own = cfg->n_data_dirs - cfg->cluster_plane_only_drives;
	if (!spans && (n > own || own % n)) {
		snprintf(err, errlen,
			 "set_drive_count = %u must divide the number of data_dirs (%u%s): the "
			 "drives form erasure sets of %u; set it to a divisor of %u or list more "
			 "drives",
			 n, own, cfg->cluster_plane_only_drives ? " not plane_only" : "", n, own);
		return -EINVAL;
	}
	if (n > 1 && (p < 1 || p > n / 2)) {
		snprintf(err, errlen,
			 "default_parity_count = %u must be between 1 and %u for %u drives", p,
			 n / 2, n);
		return -EINVAL;
	}
	if (n == 1 && p != 0) {
		snprintf(err, errlen,
			 "with set_drive_count = 1 there is no room for parity: set "
			 "default_parity_count = 0");
		return -EINVAL;
	}
	if (!cfg->region[0]) {
		snprintf(err, errlen, "region must not be empty");
		return -EINVAL;
	}
	if (cfg->n_creds == 0) {
		snprintf(err, errlen, "no [[credentials]]: add access_key and secret_key");
		return -EINVAL;
	}
	for (unsigned i = 0; i < cfg->n_creds; i++) {
		if (!cfg->creds[i].access_key[0] || !cfg->creds[i].secret_key[0]) {
			snprintf(err, errlen, "[[credentials]] #%u needs access_key and secret_key",
				 i + 1);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++) {
			if (strcmp(cfg->creds[i].access_key, cfg->creds[j].access_key) == 0) {
				snprintf(err, errlen, "access_key \"%s\" is listed twice",
					 cfg->creds[i].access_key);
				return -EINVAL;
			}
		}
	}
	int self_found = 0;
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		for (unsigned j = 0; j < i; j++) {
			if (cfg->nodes[i].id == cfg->nodes[j].id) {
				snprintf(err, errlen, "[[nodes]] id %u is listed twice",
					 cfg->nodes[i].id);
				return -EINVAL;
			}
			if (cfg->nodes[i].rpc_addr[0] &&
			    strcmp(cfg->nodes[i].rpc_addr, cfg->nodes[j].rpc_addr) == 0) {
				snprintf(err, errlen,
					 "[[nodes]] id %u and id %u have the same rpc_addr \"%s\"",
					 cfg->nodes[j].id, cfg->nodes[i].id,
					 cfg->nodes[i].rpc_addr);
				return -EINVAL;
			}
		}
		if (cfg->nodes[i].id == cfg->self_id)
			self_found = 1;
	}
	if (cfg->n_nodes && !self_found) {
		snprintf(err, errlen,
			 "self_id = %u is not in [[nodes]]: list every host there, this one as "
			 "[[nodes]] id = %u with its rpc_addr (the same list in every host's file)",
			 cfg->self_id, cfg->self_id);
		return -EINVAL;
	}
	rc = validate_cluster(cfg, err, errlen);
	if (rc)
		return rc;
	if (cfg->kv_cpu_ram_frac < 0 || cfg->kv_cpu_ram_frac > 1) {
		snprintf(err, errlen, "kv_slab.cpu_ram_frac must be in (0, 1]");
		return -EINVAL;
	}
	return 0;
}

static void
print_value(FILE *f, const struct cfg_key *k, const void *base, bool show_secrets)
{
	const char *p = (const char *)base + k->off;
	switch (k->type) {
	case T_STR:
	case T_ENUM:
		if (k->secret && !show_secrets) {
			fprintf(f, "\"<redacted>\"");
			break;
		}
		fputc('"', f);
		for (const char *s = p; *s; s++) {
			if (*s == '"' || *s == '\\')
				fputc('\\', f);
			fputc(*s, f);
		}
		fputc('"', f);
		break;
	case T_BOOL:
		fprintf(f, "%s", *(const bool *)p ? "true" : "false");
		break;
	case T_F64:
		fprintf(f, "%g", *(const double *)p);
		break;
	case T_U32:
		fprintf(f, "%u", *(const unsigned *)p);
		break;
	case T_U64:
	case T_SIZE:
		fprintf(f, "%" PRIu64, *(const uint64_t *)p);
		break;
	case T_DIRS:
		break;
	case T_LIST:
		fputc('[', f);
		for (const char *s = p; *s;) {
			size_t l = strcspn(s, ",");
			fprintf(f, "%s\"%.*s\"", s == p ? "" : ", ", (int)l, s);
			s += l + (s[l] == ',');
		}
		fputc(']', f);
		break;
	}
}

/* A key printed in a table: not an array of tables' key, not the replication alias. */
static bool
plain_key(const struct cfg_key *k)
{
	return !k->array && strcmp(k->name, "replication") != 0;
}

/* The table of a key ("" for a top-level one) into table[64]. */
static void
key_table(const struct cfg_key *k, char table[64])
{
	const char *dot = strrchr(k->name, '.');
	table[0] = '\0';
	if (dot)
		snprintf(table, 64, "%.*s", (int)(dot - k->name), k->name);
}

/* The plain keys of one table, in the key table's order. */
static void
print_table(FILE *f, const struct ol_config *cfg, const char *table, bool show_secrets)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct cfg_key *k = &keys[i];
		char t[64];
		if (!plain_key(k))
			continue;
		key_table(k, t);
		if (strcmp(t, table) != 0)
			continue;
		const char *dot = strrchr(k->name, '.');
		fprintf(f, "%s = ", dot ? dot + 1 : k->name);
		if (k->type == T_DIRS) {
			fputc('[', f);
			for (unsigned j = 0; j < cfg->n_data_dirs; j++)
				fprintf(f, "%s\"%s\"", j ? ", " : "", cfg->data_dirs[j]);
			fputc(']', f);
		} else {
			print_value(f, k, cfg, show_secrets);
		}
		fprintf(f, "    # %s\n", k->help);
	}
}

/* Valid TOML that loads back (the key table need not keep a table's keys together, and TOML
 * has no way back to the top level once a table began): the top-level keys first, then each
 * table once with all its keys, then the arrays of tables. */
void
ol_config_print(const struct ol_config *cfg, int fd, bool show_secrets)
{
	int dfd = dup(fd);
	FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;
	if (!f)
		return;
	fprintf(f, "# effective configuration (from %s)\n", cfg->source);
	print_table(f, cfg, "", show_secrets);
	for (size_t i = 0; i < N_KEYS; i++) {
		char t[64], u[64];
		if (!plain_key(&keys[i]))
			continue;
		key_table(&keys[i], t);
		bool seen = !t[0];
		for (size_t j = 0; j < i && !seen; j++) {
			key_table(&keys[j], u);
			seen = plain_key(&keys[j]) && strcmp(t, u) == 0;
		}
		if (seen)
			continue;
		fprintf(f, "\n[%s]\n", t);
		print_table(f, cfg, t, show_secrets);
	}
	for (unsigned j = 0; j < cfg->n_creds; j++) {
		fprintf(f, "\n[[credentials]]\n");
		for (size_t i = 0; i < N_KEYS; i++) {
			if (keys[i].array != 1)
				continue;
			fprintf(f, "%s = ", strchr(keys[i].name, '.') + 1);
			print_value(f, &keys[i], &cfg->creds[j], show_secrets);
			fputc('\n', f);
		}
	}
	for (unsigned j = 0; j < cfg->n_kv_tokens; j++) {
		fprintf(f, "\n[[kv.tokens]]\n");
		for (size_t i = 0; i < N_KEYS; i++) {
			if (keys[i].array != 3)
				continue;
			fprintf(f, "%s = ", strrchr(keys[i].name, '.') + 1);
			print_value(f, &keys[i], &cfg->kv_tokens[j], show_secrets);
			fputc('\n', f);
		}
	}
	for (unsigned j = 0; j < cfg->n_nodes; j++) {
		fprintf(f, "\n[[nodes]]\n");
		for (size_t i = 0; i < N_KEYS; i++) {
			if (keys[i].array != 2)
				continue;
			fprintf(f, "%s = ", strchr(keys[i].name, '.') + 1);
			print_value(f, &keys[i], &cfg->nodes[j], show_secrets);
			fputc('\n', f);
		}
	}
	fclose(f);
}
