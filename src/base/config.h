/* base/config.h - the daemon's configuration: one schema table drives the TOML parser,
 * --key value overrides, validation and --print-config.
 *
 * Accepts the public OpenLake configs (storage-tcp-local.toml, kv_local.toml, kv_rdma.toml)
 * as written; unknown keys are an error naming file, line and key. */
#ifndef OL_BASE_CONFIG_H
#define OL_BASE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_CFG_MAX_DIRS	 64
#define OL_CFG_MAX_CREDS 16
#define OL_CFG_MAX_NODES 64
#define OL_CFG_STR	 256
/* console_addr's default (MinIO's console port); in use at start = a warning, not a stop */
#define OL_CONSOLE_ADDR_DEFAULT "127.0.0.1:9001"

#define OL_CFG_MAX_KV_TOKENS 64

/* [[kv.tokens]]: a KV pool token and the namespaces it may touch. */
struct ol_config_kv_token {
	char token[OL_CFG_STR];
	char namespaces[1024]; /* comma-separated fnmatch patterns, e.g. "llama3-*,qwen-*" */
};

struct ol_config_cred {
	char access_key[OL_CFG_STR];
	char secret_key[OL_CFG_STR];
	char user[OL_CFG_STR]; /* "" = the admin (upstream form); see ol_config_cred_is_admin() */
	bool admin;	       /* admin = true: a named user that may use the admin API */
};

struct ol_config_node {
	unsigned id;
	char rpc_addr[OL_CFG_STR];
	unsigned disk_count;
};

struct ol_config_tls {
	char cert_path[OL_CFG_STR];
	char key_path[OL_CFG_STR];
	char client_ca[OL_CFG_STR];
};

struct ol_config {
	/* upstream keys */
	unsigned self_id;
	char mode[16]; /* "storage" (default) or "kv" */
	char
	    transport[16]; /* "h2" (default), "tcp", or "rdma" / "ucx" (the KV pool over UCX too) */
	char data_dirs[OL_CFG_MAX_DIRS][OL_CFG_STR];
	unsigned n_data_dirs;
	char s3_addr[OL_CFG_STR]; /* "host:port" */
	unsigned s3_port;
	char rpc_addr[OL_CFG_STR];
	unsigned set_drive_count;      /* N */
	unsigned default_parity_count; /* P */
	char region[64];
	struct ol_config_cred creds[OL_CFG_MAX_CREDS];
	unsigned n_creds;
	struct ol_config_node nodes[OL_CFG_MAX_NODES];
	unsigned n_nodes;
	struct ol_config_tls s3_tls, rpc_tls;
	struct ol_config_tls
	    kv_tls; /* [kv_tls]: the KV TCP port speaks TLS when cert_path is set */
	bool mempool_enabled;
	uint64_t mempool_size_bytes;
	unsigned mempool_bucket_capacity;
	/* [rdma]: the KV pool's UCX listener (transport = "rdma"); the other keys of the public
	 * kv_rdma.toml are accepted and validated (docs/kv-protocol.md, "UCX transport") */
	unsigned rdma_port; /* 0 = the KV port + 1 */
	char rdma_backend[16];
	char rdma_dev_name[64];
	unsigned rdma_self_node_id;
	uint64_t rdma_dc_key;
	unsigned rdma_traffic_class, rdma_service_level;
	unsigned rdma_bulk_pool_cap, rdma_network_timeout_secs, rdma_srq_depth;
	unsigned rdma_max_send_wr, rdma_peer_credit, rdma_max_clients;
	/* [kv_slab] */
	unsigned kv_capacity_gb;
	double kv_cpu_ram_frac;
	unsigned kv_reserve_ttl_secs;

	/* our keys */
	char kv_addr[OL_CFG_STR];      /* KV pool listener; "" = off. Default 127.0.0.1:9400 */
	uint64_t kv_dram_bytes;	       /* [kv] dram_bytes: DRAM tier size (0 = from kv_slab) */
	char kv_spill_dir[OL_CFG_STR]; /* [kv] spill_dir: NVMe tier directory ("" = none) */
	uint64_t kv_spill_bytes;       /* [kv] spill_bytes */
	uint64_t kv_max_block_bytes;   /* [kv] max_block_bytes */
	unsigned kv_writeback_ms;      /* [kv] writeback_ms: max delay DRAM -> NVMe */
	char kv_writeback[8];	       /* [kv] writeback: "async" (default) or "strict" */
	uint64_t kv_writeback_bps;     /* [kv] writeback_bytes_per_sec: 0 = no cap */
	double kv_ns_quota_frac;       /* [kv] namespace_quota_frac: 0 = no quota */
	uint64_t kv_removal_events;    /* [kv] removal_events: the EVENTS ring's size */
	char kv_shm_name[OL_CFG_STR];  /* [kv] shm_name: POSIX shm object of the DRAM tier */
	char kv_prefault[8];	       /* [kv] prefault: "auto" (on in mode = "kv"), "on", "off" */

	/* [kv] access control and limits */
	char kv_secret[OL_CFG_STR]; /* [kv] secret: pool token for every namespace ("" = none) */
	struct ol_config_kv_token kv_tokens[OL_CFG_MAX_KV_TOKENS]; /* [[kv.tokens]] */
	unsigned n_kv_tokens;
	char kv_unix_socket[OL_CFG_STR]; /* [kv] unix_socket: shm-grant socket ("" = default) */
	char kv_shm_group[64];		 /* [kv] shm_group: group also granted the shm tier */
	unsigned kv_max_conns;		 /* [kv] max_connections */
	unsigned kv_max_conns_per_addr;	 /* [kv] max_connections_per_addr */
	unsigned kv_max_pins_per_conn;	 /* [kv] max_pins_per_connection */
	unsigned kv_max_pins;		 /* [kv] max_pins */

	uint64_t inline_threshold;     /* [storage] inline_threshold (128 KiB) */
	uint64_t block_size;	       /* [storage] block_size per shard (1 MiB) */
	char checksum[16];	       /* [storage] checksum: "crc32c" or "xxh3" */
	bool fsync;		       /* [storage] fsync: acknowledge only after stable storage */
	bool heal_on_return;	       /* [storage] heal_on_return: heal a drive that came back */
	unsigned heal_delay_secs;      /* [storage] heal_delay_secs before that heal */
	unsigned orphan_sweep_secs;    /* [storage] orphan_sweep_secs: the periodic sweep */
	unsigned orphan_grace_secs;    /* [storage] orphan_grace_secs: in a cluster */
	uint64_t heal_bytes_per_sec;   /* [storage] heal_bytes_per_sec of that heal (0: no cap) */
	unsigned threads;	       /* worker threads (0 = one per core) */
	char pin_threads[8];	       /* "auto": loops pinned to CPUs (io/topo.h); "off" */
	char log_level[16];	       /* error|warn|info|debug */
	char console_addr[OL_CFG_STR]; /* admin listener: /metrics, health, status, console, in
					* every mode ("" = off; the S3 port serves them too) */
	uint64_t max_object_size;      /* largest single PUT (5 GiB) */
	unsigned http_idle_timeout_ms; /* keep-alive idle */
	bool admin_status_auth;	       /* [admin] status_auth: status needs an admin signature */
	bool admin_metrics_auth;       /* [admin] metrics_auth: /metrics needs one */
	bool admin_health_auth;	       /* [admin] health_auth: /openlake/health needs one */
	unsigned http_max_conns;       /* 0 = from RLIMIT_NOFILE */
	unsigned http_max_conns_per_addr;    /* 0 = min(4096, http_max_conns) */
	unsigned http_max_inflight;	     /* 0 = 2048 */
	unsigned http_max_inflight_per_addr; /* 0 = http_max_inflight / 2 */
	unsigned http_header_timeout_ms;     /* request line + headers */
	/* [cluster]: etcd holds the cluster's shape; no etcd = one node, as before */
	char cluster_etcd[1024];	    /* etcd endpoints, comma-separated ("" = no cluster) */
	unsigned cluster_lease_ttl_s;	    /* membership lease */
	unsigned cluster_quorum_loss_s;	    /* a set leader without a write quorum resigns */
	unsigned cluster_etcd_timeout_ms;   /* each etcd call's deadline (0 = lease_ttl_s / 3) */
	char cluster_prefix[OL_CFG_STR];    /* key prefix in etcd, ends with '/' */
	unsigned cluster_weight;	    /* this node's relative share for placement */
	char cluster_secret[OL_CFG_STR];    /* node plane HMAC secret ("" = plane off) */
	char cluster_advertise[OL_CFG_STR]; /* host registered in place of a wildcard bind */
	char cluster_tls_ca[OL_CFG_STR];    /* trust for the forwarding hop's TLS ("" = own) */
	unsigned cluster_plane_threads;	    /* node plane loop threads */
	char cluster_plane_transport[8];    /* "tcp" (default), "ucx" or "rdma" (= ucx) */
	bool cluster_plane_encrypt;	    /* frames' payloads encrypted, not only authenticated */
	uint64_t cluster_plane_window;	    /* credit window granted to each peer, bytes */
	uint64_t cluster_plane_max_frame;   /* largest frame payload accepted */
	/* [cluster] plane_only_drives: the last this many data_dirs are the node plane's alone */
	unsigned cluster_plane_only_drives;
	/* [cluster] slow_drive_*: a slow drive taken offline (docs/cluster.md, "A slow drive") */
	unsigned cluster_slow_drive_ms;	   /* the floor (0 = never) */
	unsigned cluster_slow_drive_ratio; /* times the peers' median */
	unsigned cluster_slow_drive_hold_s;
	unsigned cluster_slow_drive_hold_max_s;
	unsigned cluster_slow_drive_min_s; /* online this long before it is judged */
	/* [cluster] hedge_*: stragglers of a stripe abandoned (docs/cluster.md, "A slow drive") */
	unsigned cluster_hedge_ms;    /* the floor (0 = never) */
	unsigned cluster_hedge_ratio; /* times the finished ops' median */

	/* [cluster] read_any: followers serve GET/HEAD over a read-only store; reclaim_delay_ms:
	 * how long the leader keeps the shard files of a replaced version */
	bool cluster_read_any;
	bool cluster_write_any; /* [cluster] write_any: followers write PUT / part data */
	/* [cluster] write_degraded: also without a drive the leader lacks too (false: forwarded) */
	bool cluster_write_degraded;
	/* [cluster] revoke_dead_leader: a serving leader whose S3 port refuses connections has
	 * its lease revoked by the other nodes */
	bool cluster_revoke_dead_leader;
	unsigned cluster_reclaim_delay_ms;

	/* [s3] lifecycle scanner */
	unsigned s3_lc_day_secs;      /* [s3] lifecycle_day_secs: a lifecycle "day" (tests: 1) */
	unsigned s3_lc_interval_secs; /* [s3] lifecycle_interval_secs between scans */
	unsigned s3_lc_ops_per_sec; /* [s3] lifecycle_ops_per_sec: entries + actions (0: no cap) */
	/* [s3] server-side encryption (s3/sse.c) */
	char s3_sse_master_key_file[OL_CFG_STR]; /* SSE-S3 master key: 32 bytes, raw/hex/base64 */
	bool s3_sse_c_allow_http;		 /* SSE-C over plain HTTP (tests, loopback) */
	char s3_sse_kms_keys[1024]; /* SSE-KMS key ids, comma-separated ("" = SSE-KMS off) */
	char s3_domains[1024]; /* [s3] domains: endpoint names for virtual-host style, comma-sep. */

	/* set by the loader */
	char source[OL_CFG_STR]; /* file name or "<embedded default>" */
	bool data_dirs_given;
};

/* Fill cfg with the embedded default (S3 127.0.0.1:9000, KV 127.0.0.1:9400, data under ./data:
 * data/d0..d3, N=4, P=1, credentials openlakeadmin/openlakeadmin, region us-east-1). */
void ol_config_default(struct ol_config *cfg);

/* Parse TOML text over cfg (which should hold defaults). name is used in messages.
 * Returns 0, or -EINVAL with a message "FILE:LINE: ..." in err. Pure: no I/O. */
int ol_config_parse(struct ol_config *cfg, const char *name, const char *text, size_t len,
		    char *err, size_t errlen);

/* Read and parse a file. Returns 0, -errno (err says why; a missing file named as one of the
 * public OpenLake's configs, e.g. crates/openlake_server/configs/kv_local.toml, says where ours
 * is: configs/ in the source tree, share/openlake/examples/ installed). */
int ol_config_load_file(struct ol_config *cfg, const char *path, char *err, size_t errlen);

/* Apply one override "key" = "value" as on the command line (--s3_addr 0.0.0.0:9000 or
 * --kv.dram_bytes 1GiB; '-' and '_' are equal). Returns 0 or -EINVAL with err. */
int ol_config_set(struct ol_config *cfg, const char *key, const char *value, char *err,
		  size_t errlen);

/* Check cross-key rules (N divides drives, 1 <= P <= N/2, self_id in nodes, ...).
 * Returns 0 or -EINVAL with err. */
int ol_config_validate(struct ol_config *cfg, char *err, size_t errlen);

/* Write the effective config as TOML; secrets are redacted unless show_secrets. */
void ol_config_print(const struct ol_config *cfg, int fd, bool show_secrets);

/* The n-th entry (0-based) of a comma-separated list such as cluster_etcd into buf.
 * Returns 0, -ENOENT past the end, -ENAMETOOLONG when buf is too small. */
int ol_config_list_item(const char *list, unsigned n, char *buf, size_t len);

/* Distinct [[nodes]] (by rpc_addr, or id when rpc_addr is empty). */
unsigned ol_config_distinct_nodes(const struct ol_config *cfg);

/* "host:port" -> host (into buf) and port. Returns 0 or -EINVAL. */
int ol_config_split_addr(const char *addr, char *host, size_t hostlen, unsigned *port);

/* Parse "1048576", "1MiB", "4 GiB", "512k" into bytes. Returns 0 or -EINVAL/-ERANGE. */
int ol_parse_size(const char *s, uint64_t *out);

/* Whether the KV engine prefaults its DRAM tier ([kv] prefault, "auto" = mode is "kv"). */
bool ol_config_kv_prefault(const struct ol_config *cfg);

/* The KV DRAM tier's size for a host with mem_total bytes of RAM: [kv] dram_bytes, else
 * [kv_slab] cpu_ram_frac of mem_total floored to whole GiB (at least 1 GiB, as upstream), else
 * [kv_slab] capacity_gb, else 1 GiB. *key (may be NULL) is set to the key that decided it, for
 * messages ("[kv] dram_bytes", "[kv_slab] cpu_ram_frac", ...). Pure. */
uint64_t ol_config_kv_dram_bytes(const struct ol_config *cfg, uint64_t mem_total, const char **key);

/* Whether a [[credentials]] entry may use the admin API (status, heal, ...): an entry without
 * a user key, or one marked admin = true. */
bool ol_config_cred_is_admin(const struct ol_config_cred *c);

/* The [[credentials]] entry of access key ak, NULL if none. */
const struct ol_config_cred *ol_config_cred_find(const struct ol_config *cfg, const char *ak);

/* Its secret key, NULL if none; cfg passed as void * so it serves as the SigV4 verifier's
 * secret lookup callback. */
const char *ol_config_secret_for(const char *ak, void *cfg);

/* The KV listener address in effect: kv_addr; in mode="kv" with kv_addr unset, rpc_addr. */
const char *ol_config_kv_listen(const struct ol_config *cfg);

/* Whether addr ("host:port", "[v6]:port") binds every interface (0.0.0.0, ::, empty host). */
bool ol_config_addr_wildcard(const char *addr);
/* addr as other nodes reach it: with [cluster] advertise set and a wildcard host in addr,
 * "advertise:port" written into buf (cap bytes) and returned; else addr itself. */
/* The node plane address this node registers (member record, leader record): rpc_addr as
 * ol_config_advertised makes it, written "ucx://host:port" when [cluster] plane_transport is
 * "ucx" or "rdma", so peers learn the transport with the address. Always buf. */
const char *ol_config_plane_addr(const struct ol_config *cfg, char *buf, size_t cap);
/* "ucx://" when this node's plane runs on UCX, else "": what a peer address from [[nodes]]
 * (which names no transport) is given, every node of a cluster running one transport. */
const char *ol_config_plane_scheme(const struct ol_config *cfg);
const char *ol_config_advertised(const struct ol_config *cfg, const char *addr, char *buf,
				 size_t cap);

#endif
