/* openlaked - the OpenLake daemon: S3 object store and KV-cache pool in one process.
 * Flags, config and wiring only; everything else lives in src/. */
#include "base/config.h"
#include "base/log.h"
#include "io/io.h"
#include "io/topo.h"
#include "tls/tls.h"

#ifdef OL_HAVE_STORE
#include "store/store.h"
#endif
#ifdef OL_HAVE_S3
#include "admin/admin.h"
#include "http/http.h"
#include "s3/s3.h"
#endif
#ifdef OL_HAVE_ADMIN
#include "admin/admin.h"
#include "base/metrics.h"
#endif
#ifdef OL_HAVE_KV
#include "kv/kv.h"
#endif
#ifdef OL_HAVE_CLUSTER
#include "cluster/cluster.h"
#endif
#ifdef OL_HAVE_NODE
#include "node/node.h"
#endif
#ifdef OL_HAVE_CSTORE
#include "cluster_store.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlaked [--config FILE] [--KEY VALUE ...] [--print-config [--show-secrets]]\n"
	    "                 [--check-config]\n"
	    "\n"
	    "OpenLake: an S3-compatible object store (erasure-coded over the drives) and a\n"
	    "KV-cache pool for LLM inference engines, in one daemon.\n"
	    "\n"
	    "With no arguments it runs on the embedded default: S3 on 127.0.0.1:9000, the KV pool\n"
	    "on 127.0.0.1:9400, four drives data/d0..data/d3 under the current directory "
	    "(created),\n"
	    "4 drives per erasure set with 1 parity, credentials openlakeadmin / openlakeadmin.\n"
	    "\n"
	    "Options:\n"
	    "  --config FILE      TOML config (the public OpenLake files are accepted as written:\n"
	    "                     storage-tcp-local.toml, kv_local.toml, kv_rdma.toml)\n"
	    "  --KEY VALUE        override any config key, e.g. --s3-addr 0.0.0.0:9000,\n"
	    "                     --data-dirs /mnt/a,/mnt/b, --kv.dram_bytes 8GiB, --log-level "
	    "debug\n"
	    "  --print-config     print the effective config (all keys, defaults, help) and exit;\n"
	    "                     secrets are redacted unless --show-secrets is given too\n"
	    "  --check-config     parse and validate, then exit 0 (or 2 with the reason)\n"
	    "  -h, --help         this text\n"
	    "  -V, --version      print the version\n"
	    "\n"
	    "The admin listener (console_addr, default " OL_CONSOLE_ADDR_DEFAULT ") serves\n"
	    "/metrics, /openlake/health, /openlake/ready, the status JSON and the web console in\n"
	    "every mode, also for a KV-only pool; console_addr = \"\" turns it off.\n"
	    "\n"
	    "Exit status: 0 stopped cleanly (or --check-config / --print-config succeeded);\n"
	    "1 could not start (a data dir in use or unusable, an address taken, ...);\n"
	    "2 bad command line or invalid config (the message names the key and the fix).\n"
	    "\n"
	    "Environment: OPENLAKE_SELF_ID overrides self_id (for StatefulSets).\n"
	    "Signals: SIGINT or SIGTERM stop the daemon cleanly.\n");
}

struct opts {
	const char *config;
	int print_config, show_secrets, check_only;
};

static int
parse_args(int argc, char **argv, struct ol_config *cfg, struct opts *o)
{
	char err[512];
	/* the config file goes first so that --KEY overrides apply on top of it */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "openlaked: --config needs a FILE\n");
				return -EINVAL;
			}
			o->config = argv[++i];
		} else if (strncmp(argv[i], "--config=", 9) == 0) {
			o->config = argv[i] + 9;
		}
	}
	if (o->config && ol_config_load_file(cfg, o->config, err, sizeof(err))) {
		fprintf(stderr, "openlaked: %s\n", err);
		return -EINVAL;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
			i++;
		} else if (strncmp(a, "--config=", 9) == 0) {
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
			printf("openlaked %s\n", OL_VERSION);
			exit(0);
		} else if (strcmp(a, "--print-config") == 0) {
			o->print_config = 1;
		} else if (strcmp(a, "--show-secrets") == 0) {
			o->show_secrets = 1;
		} else if (strcmp(a, "--check-config") == 0) {
			o->check_only = 1;
		} else if (strncmp(a, "--", 2) == 0 && a[2]) {
			char key[128];
			const char *val, *eq = strchr(a, '=');
			size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			if (kl >= sizeof(key)) {
				fprintf(stderr, "openlaked: option too long: %s\n", a);
				return -EINVAL;
			}
			memcpy(key, a + 2, kl);
			key[kl] = 0;
			if (eq) {
				val = eq + 1;
			} else if (i + 1 < argc) {
				val = argv[++i];
			} else {
				fprintf(stderr, "openlaked: --%s needs a value\n", key);
				return -EINVAL;
			}
			if (ol_config_set(cfg, key, val, err, sizeof(err))) {
				fprintf(stderr, "openlaked: %s\n", err);
				return -EINVAL;
			}
		} else {
			fprintf(stderr,
				"openlaked: unexpected argument '%s' (try openlaked --help)\n", a);
			return -EINVAL;
		}
	}
	return 0;
}

static int
apply_env(struct ol_config *cfg)
{
	const char *id = getenv("OPENLAKE_SELF_ID");
	char err[256];
	if (id && *id && ol_config_set(cfg, "self_id", id, err, sizeof(err))) {
		fprintf(stderr, "openlaked: OPENLAKE_SELF_ID: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

/* mkdir -p; refuse a path that exists and is not a directory */
static int
ensure_dir(const char *path)
{
	char buf[OL_CFG_STR];
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return access(path, W_OK | X_OK) == 0 ? 0 : -EACCES;
		return -ENOTDIR;
	}
	size_t l = strlen(path);
	if (l >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, l + 1);
	for (size_t i = 1; i <= l; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		char c = buf[i];
		buf[i] = 0;
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		buf[i] = c;
	}
	ol_info("created data dir %s", path);
	return 0;
}

/* The pid holding a flock on the file open as fd, from /proc/locks; 0 when not found. */
static long
lock_holder(int fd)
{
	struct stat st;
	char line[256];
	long pid = 0;
	FILE *f = fstat(fd, &st) ? NULL : fopen("/proc/locks", "r");
	while (f && !pid && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long ino;
		long p;
		char kind[16];
		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
		if (sscanf(line, "%*s %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min, &ino) ==
			5 &&
		    strcmp(kind, "FLOCK") == 0 && ino == (unsigned long long)st.st_ino &&
		    maj == major(st.st_dev) && min == minor(st.st_dev))
			pid = p;
	}
	if (f)
		fclose(f);
	return pid;
}

/* A data dir whose lock another process holds (a second openlaked on the same drives): refuse
 * with the lock file and its holder named, before the store opens anything. */
static int
check_not_in_use(const char *dir)
{
	char path[OL_CFG_STR + 32], comm[64] = "?";
	snprintf(path, sizeof(path), "%s/.openlake/lock", dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 0; /* never used, or not ours to judge: the store says more */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		close(fd); /* free: the store takes it for good */
		return 0;
	}
	long pid = lock_holder(fd);
	close(fd);
	if (pid > 0) {
		char cp[64];
		snprintf(cp, sizeof(cp), "/proc/%ld/comm", pid);
		FILE *f = fopen(cp, "r");
		if (f && fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		if (f)
			fclose(f);
	}
	if (pid > 0)
		ol_err("data dir %s is in use by another process: %s (pid %ld) holds its lock %s. "
		       "Stop that daemon first (kill %ld), or give this one other data_dirs",
		       dir, comm, pid, path, pid);
	else
		ol_err("data dir %s is in use by another process (it holds the lock %s, perhaps "
		       "in another container or mount namespace): stop that daemon first, or give "
		       "this one other data_dirs",
		       dir, path);
	return -EBUSY;
}

static int
prepare_dirs(const struct ol_config *cfg)
{
	for (unsigned i = 0; i < cfg->n_data_dirs; i++) {
		int rc = ensure_dir(cfg->data_dirs[i]);
		if (rc == -ENOTDIR) {
			ol_err("data dir %s exists but is not a directory: remove it or change "
			       "data_dirs",
			       cfg->data_dirs[i]);
			return rc;
		}
		if (rc == -EACCES) {
			/* a drive that exists but takes no writes (read-only mount): the store
			 * keeps it offline and serves from the others while a quorum remains */
			ol_warn("data dir %s is not writable: it starts offline",
				cfg->data_dirs[i]);
			continue;
		}
		if (rc) {
			ol_err("data dir %s cannot be used: %s (check its permissions or change "
			       "data_dirs)",
			       cfg->data_dirs[i], strerror(-rc));
			return rc;
		}
		if (strcmp(cfg->mode, "kv") && (rc = check_not_in_use(cfg->data_dirs[i])))
			return rc;
	}
	return 0;
}

static void
banner(const struct ol_config *cfg)
{
	ol_info("openlaked %s starting (config: %s, mode %s, %u drive(s), set %u+%u)", OL_VERSION,
		cfg->source, cfg->mode, cfg->n_data_dirs,
		cfg->set_drive_count - cfg->default_parity_count, cfg->default_parity_count);
	if (cfg->n_nodes > 1 && !cfg->cluster_etcd[0])
		ol_warn("%u [[nodes]] configured: this openlaked serves its own drives only; the "
			"KV pool is sharded by the clients over the nodes they are given",
			cfg->n_nodes);
	/* upstream's configs carry [rpc_tls] (TLS between nodes): say what protects ours */
	if (cfg->rpc_tls.cert_path[0] || cfg->rpc_tls.key_path[0] || cfg->rpc_tls.client_ca[0])
		ol_warn("[rpc_tls] is set but not used: the node plane does not speak TLS; its "
			"frames are authenticated with [cluster] secret (HMAC-SHA256)%s",
			cfg->cluster_plane_encrypt
			    ? " and encrypted ([cluster] plane_encrypt)"
			    : "; set [cluster] plane_encrypt = true to encrypt them too, or keep "
			      "the plane on a private network");
#ifndef OL_HAVE_UCX
	if (strcmp(cfg->transport, "rdma") == 0 || strcmp(cfg->transport, "ucx") == 0)
		ol_warn("transport = \"%s\": this openlaked was built without UCX (libucx-dev); "
			"serving over TCP on the same addresses",
			cfg->transport);
#endif
}

static uint64_t
mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/* Say how much RAM the KV pool's DRAM tier claims (shared memory) and whether it is prefaulted;
 * over a quarter of the host's RAM is a warning naming the key that asked for it. */
static void
kv_memory_notice(const struct ol_config *cfg)
{
	const char *key;
	uint64_t ram = mem_total(), dram = ol_config_kv_dram_bytes(cfg, ram, &key);
	double g = (double)(1ull << 30);
	bool pf = ol_config_kv_prefault(cfg);
	if (!ol_config_kv_listen(cfg)[0])
		return;
	char frac[48] = "";
	if (strcmp(key, "[kv_slab] cpu_ram_frac") == 0)
		snprintf(frac, sizeof(frac), " = %g", cfg->kv_cpu_ram_frac);
	if (ram && dram > ram / 4)
		ol_warn("kv: the DRAM tier takes %.1f GiB of shared memory, %.0f%% of this host's "
			"%.1f GiB of RAM (set by %s%s); to use less, set [kv] dram_bytes (e.g. "
			"--kv.dram_bytes 4GiB)%s",
			(double)dram / g, 100.0 * (double)dram / (double)ram, (double)ram / g, key,
			frac,
			strcmp(key, "[kv_slab] cpu_ram_frac") == 0 ? " or a smaller cpu_ram_frac"
								   : "");
	ol_info("kv: DRAM tier %.*f %s (%s), %s ([kv] prefault = %s%s)",
		dram < (1ull << 30) ? 0 : 1,
		dram < (1ull << 30) ? (double)dram / (1 << 20) : (double)dram / g,
		dram < (1ull << 30) ? "MiB" : "GiB", key,
		pf ? "prefaulted in the background" : "pages taken on first use", cfg->kv_prefault,
		strcmp(cfg->kv_prefault, "auto") ? ""
		: strcmp(cfg->mode, "kv") == 0	 ? ": on for a dedicated pool, mode = \"kv\""
						 : ": off beside the object store");
}

struct daemon {
#ifdef OL_HAVE_STORE
	struct ol_store *store;
#endif
#ifdef OL_HAVE_S3
	struct ol_s3_server *s3;
	struct ol_http_server *http; /* the S3 port: admin/ and s3/ routed side by side */
#endif
#ifdef OL_HAVE_KV
	struct ol_kv_server *kv;
#endif
#ifdef OL_HAVE_CLUSTER
	struct ol_cluster *cluster;
#endif
#ifdef OL_HAVE_ADMIN
	struct ol_admin_server *admin;
#endif
	char admin_addr[OL_CFG_STR]; /* where the admin listener listens ("" = not) */
#ifdef OL_HAVE_NODE
	struct ol_node_server *plane;
#endif
#ifdef OL_HAVE_CSTORE
	struct cstore *cs; /* cluster store mode: the set's leader serves, the others forward */
#endif
	int unused;
};

/* [s3_tls] / [kv_tls]: both files named and readable, else a message naming the file (the
 * TLS module then checks what is inside them). */
static int
check_tls_table(const struct ol_config *cfg, const char *table, const struct ol_config_tls *t,
		const char *plain)
{
	if (!t->cert_path[0] && !t->key_path[0] && !t->client_ca[0])
		return 0;
	if (!t->cert_path[0] || !t->key_path[0]) {
		fprintf(stderr,
			"openlaked: %s: [%s] needs both cert_path and key_path (PEM files); "
			"set both, or remove [%s] to serve %s\n",
			cfg->source, table, table, plain);
		return -EINVAL;
	}
	const char *files[][2] = {
	    {"cert_path", t->cert_path}, {"key_path", t->key_path}, {"client_ca", t->client_ca}};
	for (size_t i = 0; i < 3; i++) {
		if (!files[i][1][0] || access(files[i][1], R_OK) == 0)
			continue;
		fprintf(stderr, "openlaked: %s: [%s] %s %s: %s\n", cfg->source, table, files[i][0],
			files[i][1], strerror(errno));
		return -errno;
	}
	return 0;
}

static int
check_tls_files(const struct ol_config *cfg)
{
	int r = 0;
	if (strcmp(cfg->mode, "kv") != 0) /* else no S3 port */
		r = check_tls_table(cfg, "s3_tls", &cfg->s3_tls, "plain HTTP");
	const char *kv = ol_config_kv_listen(cfg);
	if (!r && kv && kv[0])
		r = check_tls_table(cfg, "kv_tls", &cfg->kv_tls, "the KV port in plaintext");
	return r;
}

/* Open-files soft limit up to the hard one: every idle S3 connection is a descriptor, and the
 * HTTP server sizes its default connection cap from this limit. */
static void
raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		ol_warn("cannot raise the open-files limit from %llu to %llu: %s",
			(unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
}

#ifdef OL_HAVE_S3
/* The S3 port's router: each route answers a request (1) or passes it on (0), in this order.
 * admin/ takes its own paths (/metrics, /openlake/..., the console) and s3/ the rest; neither
 * knows of the other. */
static int
route_admin(struct ol_http_req *h, struct daemon *d)
{
	(void)d;
	return ol_admin_handle(h);
}

/* In cluster store mode every S3 request goes to the set's leader: served here when this node
 * leads, forwarded otherwise (cluster_store.c). */
static int
route_cluster(struct ol_http_req *h, struct daemon *d)
{
#ifdef OL_HAVE_CSTORE
	if (d->cs) {
		cstore_route(d->cs, h);
		return 1;
	}
#endif
	(void)h;
	(void)d;
	return 0;
}

static int
route_s3(struct ol_http_req *h, struct daemon *d)
{
	ol_s3_handle(h, d->s3);
	return 1;
}

static const struct route {
	const char *name;
	int (*serve)(struct ol_http_req *h, struct daemon *d);
} routes[] = {
    {"admin", route_admin},
    {"cluster", route_cluster},
    {"s3", route_s3},
};

static void
route(struct ol_http_req *h, void *arg)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (routes[i].serve(h, arg))
			return;
}

static int
start_http(const struct ol_config *cfg, struct daemon *d)
{
	struct ol_http_server_opts o = {
	    .size = sizeof(o),
	    .addr = cfg->s3_addr,
	    .threads = cfg->threads,
	    .handler = route,
	    .arg = d,
	    .idle_timeout_ms = cfg->http_idle_timeout_ms,
	    .header_timeout_ms = cfg->http_header_timeout_ms,
	    .max_conns = cfg->http_max_conns,
	    .max_conns_per_addr = cfg->http_max_conns_per_addr,
	    .max_inflight = cfg->http_max_inflight,
	    .max_inflight_per_addr = cfg->http_max_inflight_per_addr,
	    .error_body = ol_s3_http_error,
	    .tls_cert_path = cfg->s3_tls.cert_path,
	    .tls_key_path = cfg->s3_tls.key_path,
	    .tls_client_ca = cfg->s3_tls.client_ca,
	};
	int rc = ol_http_server_start(&o, &d->http);
	if (rc < 0)
		return rc;
	ol_s3_set_http(d->s3, d->http);
	ol_info("s3: listening on %s (port %u), region %s", cfg->s3_addr,
		ol_http_server_port(d->http), cfg->region);
	return 0;
}

/* S3 could not start: the cause, and for an address in use the fix (as the KV and admin
 * listeners say theirs) */
static void
s3_serve_error(const struct ol_config *cfg, int rc)
{
	ol_err("cannot serve S3 on %s: %s%s", cfg->s3_addr, strerror(-rc),
	       rc == -EADDRINUSE ? " (another openlaked, or another program): stop it or set "
				   "s3_addr to a free port"
				 : "");
}
#endif

static int
start_storage(const struct ol_config *cfg, struct daemon *d)
{
#if defined(OL_HAVE_STORE) && defined(OL_HAVE_S3)
	int rc;
	if (cfg->cluster_plane_only_drives) { /* the last data_dirs are the node plane's alone */
		struct ol_config *own = ol_xmalloc(sizeof(*own));
		memcpy(own, cfg, sizeof(*own));
		own->n_data_dirs -= cfg->cluster_plane_only_drives;
		rc = ol_store_open(own, &d->store);
		free(own);
	} else {
		rc = ol_store_open(cfg, &d->store);
	}
	if (rc) {
		ol_err("cannot open the object store: %s", strerror(-rc));
		return rc;
	}
	ol_store_set_sweep(d->store, cfg->orphan_sweep_secs, cfg->orphan_grace_secs);
	rc = ol_s3_new(cfg, d->store, &d->s3);
	if (!rc) {
		ol_admin_init(cfg);
		ol_admin_set_store(d->store);
		rc = start_http(cfg, d);
	}
	if (rc) {
		s3_serve_error(cfg, rc);
		return rc;
	}
	ol_info("S3 API on %s://%s (region %s, access key %s%s)",
		cfg->s3_tls.cert_path[0] ? "https" : "http", cfg->s3_addr, cfg->region,
		cfg->creds[0].access_key,
		strcmp(cfg->creds[0].secret_key, "openlakeadmin") == 0
		    ? ", secret key openlakeadmin: the embedded default, change it for "
		      "anything but a test"
		    : "");
	return 0;
#else
	ol_warn("this build has no object store; S3 is off");
	return 0;
#endif
}

#ifdef OL_HAVE_CSTORE
/* Cluster store mode: no local store (the node plane owns this node's drives); S3 starts with
 * no store and the set's store opens when this node gains the set's leadership. */
static int
start_cluster_storage(const struct ol_config *cfg, struct daemon *d, struct ol_layout *l)
{
	int rc = ol_s3_new(cfg, NULL, &d->s3);
	if (!rc)
		rc = cstore_new(cfg, d->cluster, l, d->s3, &d->cs);
	if (rc) {
		ol_layout_fini(l);
		ol_err("cannot start the cluster store: %s", strerror(-rc));
		return rc;
	}
	ol_admin_init(cfg);
	ol_admin_set_forward(cstore_forward_admin, d->cs);
	rc = start_http(cfg, d);
	if (rc)
		s3_serve_error(cfg, rc);
	return rc;
}
#endif

/* Object storage: the local drives as today, or (with [cluster] etcd and secret and a layout of
 * several nodes in etcd) the cluster store. -ETIMEDOUT: etcd never answered. */
static int
start_objects(const struct ol_config *cfg, struct daemon *d)
{
	if (strcmp(cfg->mode, "kv") == 0)
		return 0;
#ifdef OL_HAVE_CSTORE
	if (d->cluster && cfg->cluster_secret[0]) {
		struct ol_layout l;
		int rc = cstore_decide(cfg, d->cluster, &l);
		if (rc < 0)
			return rc;
		if (rc == 1)
			return start_cluster_storage(cfg, d, &l);
		if (cfg->set_drive_count > cfg->n_data_dirs ||
		    cfg->n_data_dirs % cfg->set_drive_count) {
			ol_err("set_drive_count = %u spans the cluster's nodes, but etcd holds no "
			       "layout of several nodes to serve it with: run `openlake cluster "
			       "init --config FILE` once, then start the nodes",
			       cfg->set_drive_count);
			return -EINVAL;
		}
	}
#endif
	return start_storage(cfg, d);
}

static int
start_kv(const struct ol_config *cfg, struct daemon *d)
{
	const char *addr = ol_config_kv_listen(cfg);
	if (!addr[0])
		return 0;
#ifdef OL_HAVE_KV
	int rc = ol_kv_server_start(cfg, &d->kv);
	if (rc) {
		bool ucx = !strcmp(cfg->transport, "rdma") || !strcmp(cfg->transport, "ucx");
		ol_err("cannot serve the KV pool on %s%s: %s", addr,
		       ucx ? " or its UCX port (see above)" : "", strerror(-rc));
		return rc;
	}
	ol_info("KV pool on %s", addr);
	return 0;
#else
	ol_warn("this build has no KV pool; %s is not served", addr);
	return 0;
#endif
}

/* The admin listener on console_addr, in every mode. The default address taken (a second
 * daemon on this host) is a warning: the daemon runs without it; an address the config names
 * that cannot be served stops the start. */
static int
start_admin(const struct ol_config *cfg, struct daemon *d)
{
	const char *addr = cfg->console_addr;
	if (!addr[0]) {
		ol_info("admin listener off (console_addr = \"\")%s",
			strcmp(cfg->mode, "kv") ? "; /metrics and the console stay on the S3 port"
						: "");
		return 0;
	}
#ifdef OL_HAVE_ADMIN
	ol_admin_init(cfg);
	int rc = ol_admin_server_start(cfg, addr, &d->admin);
	if (rc == -EADDRINUSE && strcmp(addr, OL_CONSOLE_ADDR_DEFAULT) == 0) {
		ol_warn("admin listener not started: %s (console_addr's default) is in use, "
			"perhaps by another openlaked; set console_addr = \"HOST:PORT\" to a free "
			"port (or \"\" to turn it off) to silence this",
			addr);
		return 0;
	}
	if (rc) {
		ol_err("cannot serve the admin listener on console_addr = \"%s\": %s; set "
		       "console_addr to a free HOST:PORT, or \"\" to turn it off",
		       addr, strerror(-rc));
		return rc;
	}
	snprintf(d->admin_addr, sizeof(d->admin_addr), "%s", addr);
	ol_info("admin listener on http://%s (/metrics, /openlake/health, /openlake/ready, "
		"/openlake/console)",
		addr);
	return 0;
#else
	(void)d;
	ol_warn("this build has no admin module; console_addr %s is not served", addr);
	return 0;
#endif
}

#ifdef OL_HAVE_ADMIN
static void
locality_warn(void *arg, const char *msg)
{
	(void)arg;
	ol_warn("locality: %s", msg);
}

/* Where the daemon runs, for the status document ("locality", `openlake node info`): the
 * host's NUMA nodes, the KV loops' CPUs, the nodes of the drives and of the listeners' NICs,
 * the GPUs; each mismatch is logged once here. */
static void
announce_locality(const struct ol_config *cfg, const struct daemon *d, const char *s3,
		  const char *kv)
{
	struct ol_topo *t = NULL;
	int rc = ol_topo_open(&t);
	if (rc < 0) {
		ol_warn("cannot read the host's topology (hwloc): %s; `openlake node info` shows "
			"no locality",
			strerror(-rc));
		return;
	}
	struct ol_topo_loop loops[64];
	unsigned n_loops = 0;
#ifdef OL_HAVE_KV
	struct ol_kv_loop_info li[64];
	n_loops = d->kv ? ol_kv_server_loops(d->kv, li, 64) : 0;
	n_loops = n_loops > 64 ? 64 : n_loops;
	for (unsigned i = 0; i < n_loops; i++)
		loops[i] = (struct ol_topo_loop){li[i].name, li[i].cpu, li[i].accepts_tcp};
#else
	(void)d;
#endif
	struct ol_topo_dir dirs[OL_CFG_MAX_DIRS + 1];
	unsigned n_dirs = 0;
	for (unsigned i = 0; strcmp(cfg->mode, "kv") && i < cfg->n_data_dirs; i++)
		dirs[n_dirs++] = (struct ol_topo_dir){"s3", cfg->data_dirs[i]};
	if (*kv && cfg->kv_spill_dir[0])
		dirs[n_dirs++] = (struct ol_topo_dir){"kv", cfg->kv_spill_dir};
	struct ol_topo_listener ls[2];
	unsigned n_ls = 0;
	if (*s3)
		ls[n_ls++] = (struct ol_topo_listener){"s3", s3};
	if (*kv)
		ls[n_ls++] = (struct ol_topo_listener){"kv", kv};
	struct ol_topo_report r = {cfg->pin_threads, "kv", loops, n_loops,	 dirs,
				   n_dirs,	     ls,   n_ls,  locality_warn, NULL};
	char *js = NULL;
	if (ol_topo_report_json(t, &r, &js) == 0)
		ol_admin_set_locality(js);
	free(js);
	ol_topo_free(t);
}
#endif

/* Tell the status document what runs, and that the daemon is ready. */
static void
announce_services(const struct ol_config *cfg, const struct daemon *d)
{
#ifdef OL_HAVE_ADMIN
	const char *s3 = "", *kv = "";
#ifdef OL_HAVE_S3
	if (d->s3)
		s3 = cfg->s3_addr;
#endif
#ifdef OL_HAVE_KV
	if (d->kv)
		kv = ol_config_kv_listen(cfg);
#endif
	ol_admin_set_services(s3, kv, d->admin_addr);
	announce_locality(cfg, d, s3, kv);
	ol_admin_set_ready(true);
#else
	(void)cfg;
	(void)d;
#endif
}

/* several object-store nodes and no etcd would be separate stores that look like one */
static int
check_cluster(const struct ol_config *cfg)
{
	if (cfg->cluster_etcd[0] || strcmp(cfg->mode, "kv") == 0 ||
	    ol_config_distinct_nodes(cfg) < 2)
		return 0;
	fprintf(stderr,
		"openlaked: %s: %u [[nodes]] are listed but no [cluster] etcd is set: the nodes "
		"would run as separate object stores. To form the cluster: start etcd (Debian "
		"etcd-server), set [cluster] etcd = [\"http://HOST:2379\", ...] in every node's "
		"config, and run `openlake cluster init --config FILE` once; or list only this "
		"node in [[nodes]] to run it alone.\n",
		cfg->source, ol_config_distinct_nodes(cfg));
	return -EINVAL;
}

#if defined(OL_HAVE_CLUSTER) && defined(OL_HAVE_KV)
/* The KV pool's VIEW answers with the live members that serve a KV port (issue 10). */
static int
kv_view_of_cluster(void *arg, struct ol_kvp_view *v)
{
	struct ol_cluster_view cv;
	int rc = ol_cluster_members(arg, &cv);
	if (rc)
		return rc;
	v->epoch = cv.epoch > 0 ? (uint64_t)cv.epoch : 0;
	v->n = 0;
	for (unsigned i = 0; i < cv.n && v->n < OL_KVP_MAX_VIEW; i++) {
		const struct ol_cluster_member *m = &cv.members[i];
		size_t l = strlen(m->kv_addr);
		if (l == 0 || l > OL_KVP_MAX_VIEW_ADDR)
			continue;
		struct ol_kvp_view_member *o = &v->m[v->n++];
		o->id = m->id;
		o->capacity = m->capacity;
		o->weight = m->weight;
		o->addr_len = (uint16_t)l;
		memcpy(o->addr, m->kv_addr, l + 1);
	}
	ol_cluster_view_fini(&cv);
	return 0;
}
#endif

#if defined(OL_HAVE_CLUSTER) && defined(OL_HAVE_ADMIN)
/* The status document's "cluster" (the console's cluster panel): the live members as the
 * watch last saw them (a member is live while its leased key exists) and, for each set of
 * each pool of the layout this node started with, its leader and epoch as last read from
 * etcd; in cluster store mode, "read_store": this node's read-only view (cluster_reads.h).
 * arg: the daemon. */
static void
admin_cluster_json(void *argd, struct ol_strbuf *b)
{
	struct daemon *d = argd;
	struct ol_cluster *arg = d->cluster;
	struct ol_cluster_view cv;
	if (ol_cluster_members(arg, &cv) != 0) {
		ol_strbuf_printf(b, "null");
		return;
	}
	ol_strbuf_printf(b, "{\"epoch\":%lld,\"members\":[", (long long)cv.epoch);
	for (unsigned i = 0; i < cv.n; i++) {
		const struct ol_cluster_member *m = &cv.members[i];
		ol_strbuf_printf(b, "%s{\"id\":%u,\"s3_addr\":", i ? "," : "", m->id);
		ol_admin_json_str(b, m->s3_addr);
		ol_strbuf_printf(b, ",\"kv_addr\":");
		ol_admin_json_str(b, m->kv_addr);
		ol_strbuf_printf(b, ",\"rpc_addr\":");
		ol_admin_json_str(b, m->rpc_addr);
		ol_strbuf_printf(b,
				 ",\"capacity_bytes\":%llu,\"drives\":%u,\"start_time\":%lld,"
				 "\"live\":true}",
				 (unsigned long long)m->capacity, m->n_drives,
				 (long long)m->start_time);
	}
	ol_cluster_view_fini(&cv);
	ol_strbuf_printf(b, "],\"sets\":[");
	bool first = true;
	for (unsigned pool = 0; pool < 1024; pool++) {
		unsigned set = 0;
		for (; set < 1024; set++) {
			struct ol_cluster_leader_info li;
			if (ol_cluster_leader(arg, pool, set, &li) != 0)
				break; /* -ENOENT: past the pool's sets, or not in this node's
					  layout */
			ol_strbuf_printf(b, "%s{\"pool\":%u,\"set\":%u,\"epoch\":%llu,\"leader\":",
					 first ? "" : ",", pool, set, (unsigned long long)li.epoch);
			first = false;
			if (li.epoch)
				ol_strbuf_printf(b, "%u", li.node);
			else
				ol_strbuf_printf(b, "null");
			ol_strbuf_printf(b, ",\"leader_s3_addr\":");
			ol_admin_json_str(b, li.epoch ? li.s3_addr : "");
			ol_strbuf_printf(b, ",\"self\":%s}", li.is_self ? "true" : "false");
		}
		if (!set)
			break;
	}
	ol_strbuf_printf(b, "]");
#ifdef OL_HAVE_CSTORE
	if (d->cs) { /* GET and HEAD served here from a read-only view (read_any) */
		ol_strbuf_printf(b, ",");
		cstore_status_json(d->cs, b);
	}
#endif
	ol_strbuf_printf(b, "}");
}
#endif

static int
start_cluster(const struct ol_config *cfg, struct daemon *d)
{
#ifdef OL_HAVE_CLUSTER
	int rc = ol_cluster_start(cfg, &d->cluster);
	if (rc)
		ol_err("cannot start cluster membership: %s", strerror(-rc));
	return rc;
#else
	if (cfg->cluster_etcd[0])
		ol_warn("[cluster] etcd is set but this build has no cluster module");
	return 0;
#endif
}

/* After the services: the KV pool's VIEW from the members, the set leadership campaign (the
 * node plane serves this node's drives by now). */
static int
join_cluster(struct daemon *d)
{
#if defined(OL_HAVE_CLUSTER) && defined(OL_HAVE_KV)
	if (d->cluster && d->kv)
		ol_kv_server_set_view(d->kv, kv_view_of_cluster, d->cluster);
#endif
#if defined(OL_HAVE_CLUSTER) && defined(OL_HAVE_ADMIN)
	if (d->cluster)
		ol_admin_set_cluster(admin_cluster_json, d);
#endif
#ifdef OL_HAVE_CSTORE
	if (d->cs) {
#ifdef OL_HAVE_NODE
		/* the commits of writes other nodes wrote (write_any) run here while this node
		 * serves the store */
		if (d->plane)
			ol_node_server_set_commit(d->plane, cstore_commit_serve, d->cs);
#endif
		int rc = cstore_start(d->cs);
		if (rc)
			ol_err("cannot start the set leadership: %s", strerror(-rc));
		return rc;
	}
#endif
	(void)d;
	return 0;
}

/* The node plane serves rpc_addr once [cluster] secret is set (every frame is authenticated
 * with it; there is no unauthenticated mode). */
static int
start_plane(const struct ol_config *cfg, struct daemon *d)
{
	if (!cfg->cluster_secret[0]) {
		if (cfg->cluster_etcd[0])
			ol_warn("node plane off: [cluster] etcd is set but [cluster] secret is "
				"not; set "
				"the same secret on every node to serve the plane on rpc_addr");
		return 0;
	}
	if (!strcmp(ol_config_kv_listen(cfg), cfg->rpc_addr)) {
		ol_warn("node plane off: rpc_addr %s is the KV pool's listener", cfg->rpc_addr);
		return 0;
	}
#ifdef OL_HAVE_NODE
	bool ucx = strcmp(cfg->cluster_plane_transport, "tcp") != 0;
	if (ucx && !ol_node_ucx_available()) {
		ol_err("[cluster] plane_transport = \"%s\": this openlaked was built without UCX "
		       "(libucx-dev); install it and rebuild, or set plane_transport = \"tcp\" on "
		       "every node",
		       cfg->cluster_plane_transport);
		return -EPROTONOSUPPORT;
	}
	const char *drives[OL_CFG_MAX_DIRS];
	for (unsigned i = 0; i < cfg->n_data_dirs; i++)
		drives[i] = cfg->data_dirs[i];
	struct ol_node_server_opts o = {.addr = cfg->rpc_addr,
					.secret = cfg->cluster_secret,
					.self_id = cfg->self_id,
					.threads = cfg->cluster_plane_threads,
					.window = (uint32_t)cfg->cluster_plane_window,
					.max_payload = (uint32_t)cfg->cluster_plane_max_frame,
					.n_drives = strcmp(cfg->mode, "kv") ? cfg->n_data_dirs : 0,
					.drives = drives,
					.transport = ucx ? OL_NODE_UCX : OL_NODE_TCP};
	int rc = ol_node_server_start(&o, &d->plane);
	if (rc) {
		ol_err("cannot serve the node plane on %s: %s", cfg->rpc_addr, strerror(-rc));
		return rc;
	}
	const char *frames = cfg->cluster_plane_encrypt ? "encrypted" : "authenticated";
	if (ucx)
		ol_info(
		    "node plane on %s over UCX (one loop; UCX_TLS %s; window %llu bytes; frames "
		    "%s)",
		    cfg->rpc_addr, getenv("UCX_TLS") ? getenv("UCX_TLS") : "not set: UCX picks",
		    (unsigned long long)cfg->cluster_plane_window, frames);
	else
		ol_info("node plane on %s (%u loops, window %llu bytes, frames %s)", cfg->rpc_addr,
			cfg->cluster_plane_threads, (unsigned long long)cfg->cluster_plane_window,
			frames);
	return 0;
#else
	(void)d;
	ol_warn("[cluster] secret is set but this build has no node plane");
	return 0;
#endif
}

#ifdef OL_HAVE_CSTORE
/* the stop's cut of requests still in flight after their grace (cstore_resign) */
static void
shut_conns(void *http)
{
	unsigned n = ol_http_server_shutdown_conns(http);
	ol_info("stopping: %u S3 connection(s) shut down", n);
}
#endif

static void
stop_all(struct daemon *d)
{
#ifdef OL_HAVE_CLUSTER
	ol_cluster_hurry(d->cluster); /* no etcd call holds the stop past a few seconds */
#endif
#ifdef OL_HAVE_ADMIN
	ol_admin_set_ready(false);
	ol_admin_set_locality(NULL);
#endif
#ifdef OL_HAVE_CSTORE
	if (d->cs) {
		/* give the set up first (the others take over at once), then stop taking requests
		 * before the membership they read goes */
		cstore_resign(d->cs, shut_conns, d->http);
		ol_s3_set_http(d->s3, NULL);
		ol_http_server_stop(d->http);
		d->http = NULL;
	}
#endif
#ifdef OL_HAVE_NODE
	ol_node_server_stop(d->plane);
	d->plane = NULL;
#endif
#ifdef OL_HAVE_CLUSTER
#ifdef OL_HAVE_KV
	ol_kv_server_set_view(d->kv, NULL, NULL); /* before the members it reads go */
#endif
#ifdef OL_HAVE_ADMIN
	ol_admin_set_cluster(NULL, NULL);
#endif
	ol_cluster_stop(d->cluster);
	d->cluster = NULL;
#endif
#ifdef OL_HAVE_KV
	ol_kv_server_stop(d->kv);
	d->kv = NULL;
#endif
#ifdef OL_HAVE_S3
	if (d->s3)
		ol_s3_set_http(d->s3, NULL);
	ol_http_server_stop(d->http); /* waits for in-flight requests */
	d->http = NULL;
	if (d->s3)
		ol_admin_set_store(NULL); /* cancels a running heal and waits for it */
	ol_s3_free(d->s3);
	d->s3 = NULL;
#endif
#ifdef OL_HAVE_STORE
	if (d->store)
		ol_store_close(d->store);
	d->store = NULL;
#endif
#ifdef OL_HAVE_ADMIN
	ol_admin_server_stop(d->admin);
	d->admin = NULL;
#endif
#ifdef OL_HAVE_CSTORE
	if (d->cs)
		ol_admin_set_forward(NULL, NULL);
	cstore_free(d->cs);
	d->cs = NULL;
#endif
	(void)d;
}

/* Parse, validate, and answer --print-config / --check-config. Returns the exit status when
 * the daemon must not start, -1 when it should. */
static int
early_exit(struct ol_config *cfg, struct opts *o, int argc, char **argv, char *err, size_t el)
{
	if (parse_args(argc, argv, cfg, o) || apply_env(cfg))
		return 2;
	if (ol_config_validate(cfg, err, el)) {
		fprintf(stderr, "openlaked: %s: %s\n", cfg->source, err);
		return 2;
	}
	if (check_tls_files(cfg))
		return 2;
	if (o->print_config) {
		ol_config_print(cfg, STDOUT_FILENO, o->show_secrets);
		return 0;
	}
	if (check_cluster(cfg))
		return 2;
	if (o->check_only) {
		kv_memory_notice(cfg); /* the memory it would claim, without claiming it */
		printf("%s: OK\n", cfg->source);
		return 0;
	}
	return -1;
}

int
main(int argc, char **argv)
{
	struct ol_config *cfg = ol_xcalloc(1, sizeof(*cfg));
	struct opts o = {0};
	struct daemon d = {0};
	char err[512];
	int rc;

	/* object data, metadata and the KV tier are the daemon's alone: files 0600, dirs 0700 */
	umask(077);
	ol_config_default(cfg);
	rc = early_exit(cfg, &o, argc, argv, err, sizeof(err));
	if (rc >= 0) {
		free(cfg);
		return rc;
	}
	ol_log_set_level(cfg->log_level);
	ol_iobuf_limit(cfg->mempool_enabled ? cfg->mempool_size_bytes : 0,
		       cfg->mempool_bucket_capacity);
	banner(cfg);
#ifdef OL_HAVE_NODE
	/* before anything connects over the plane (the store's sets open over it) */
	ol_node_encrypt(cfg->cluster_plane_encrypt);
	if (strcmp(cfg->cluster_plane_transport, "tcp") && ol_node_ucx_available() &&
	    ol_node_ucx_device(cfg->rdma_dev_name) == -ENODEV)
		ol_warn("node plane: [rdma] dev_name %s: no such RDMA device here: UCX chooses the "
			"devices",
			cfg->rdma_dev_name);
#endif
	kv_memory_notice(cfg);
	/* block the stop signals before any thread starts, so threads inherit the mask and
	 * only the main thread's sigwait() sees them */
	signal(SIGPIPE, SIG_IGN);
	sigset_t stop_set;
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGINT);
	sigaddset(&stop_set, SIGTERM);
	sigaddset(&stop_set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
	raise_nofile();

	if (prepare_dirs(cfg)) {
		free(cfg);
		return 1;
	}
	rc = start_admin(cfg, &d);
	if (!rc)
		rc = start_cluster(cfg, &d);
	if (!rc)
		rc = start_objects(cfg, &d);
	if (!rc)
		rc = start_kv(cfg, &d);
	if (!rc)
		rc = start_plane(cfg, &d);
	if (!rc)
		rc = join_cluster(&d);
	if (rc) {
		stop_all(&d);
		free(cfg);
		return 1;
	}
	announce_services(cfg, &d);
	ol_info("ready");
	int sig = 0;
	while (sigwait(&stop_set, &sig) == 0 && sig == SIGHUP) {
		ol_info("SIGHUP: reloading the TLS certificates");
		ol_tls_reload_all();	 /* [s3_tls] and [kv_tls] */
		cstore_reload_tls(d.cs); /* the hop to the leader (cluster mode) */
	}
	ol_info("signal %d: stopping", sig);
	stop_all(&d);
	ol_info("stopped");
	free(cfg);
	return 0;
}
