/* openlaked - the OpenLake daemon: S3 object store and KV-cache pool in one process.
 * Flags, config and wiring only; everything else lives in src/. */
#include "base/config.h"
#include "base/log.h"

#ifdef OL_HAVE_STORE
#include "store/store.h"
#endif
#ifdef OL_HAVE_S3
#include "http/http.h"
#include "s3/s3.h"
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

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlaked [--config FILE] [--KEY VALUE ...] [--print-config] [--check-config]\n"
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
	    "  --check-config     parse and validate, then exit 0 (or 1 with the reason)\n"
	    "  -h, --help         this text\n"
	    "  -V, --version      print the version\n"
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
	}
	return 0;
}

static void
banner(const struct ol_config *cfg)
{
	ol_info("openlaked %s starting (config: %s, mode %s, %u drive(s), set %u+%u)", OL_VERSION,
		cfg->source, cfg->mode, cfg->n_data_dirs,
		cfg->set_drive_count - cfg->default_parity_count, cfg->default_parity_count);
	if (cfg->n_nodes > 1)
		ol_warn("%u [[nodes]] configured: this openlaked serves its own drives only; the "
			"KV pool is sharded by the clients over the nodes they are given",
			cfg->n_nodes);
	if (strcmp(cfg->transport, "rdma") == 0)
		ol_warn("transport = \"rdma\": RDMA is not built into this openlaked; serving over "
			"TCP on the same addresses");
}

struct daemon {
#ifdef OL_HAVE_STORE
	struct ol_store *store;
#endif
#ifdef OL_HAVE_S3
	struct ol_s3_server *s3;
#endif
#ifdef OL_HAVE_KV
	struct ol_kv_server *kv;
#endif
#ifdef OL_HAVE_CLUSTER
	struct ol_cluster *cluster;
#endif
#ifdef OL_HAVE_NODE
	struct ol_node_server *plane;
#endif
	int unused;
};

/* [s3_tls]: both files named and readable, else a message naming the file (the TLS module
 * then checks what is inside them). */
static int
check_tls_files(const struct ol_config *cfg)
{
	const struct ol_config_tls *t = &cfg->s3_tls;
	if ((!t->cert_path[0] && !t->key_path[0] && !t->client_ca[0]) ||
	    strcmp(cfg->mode, "kv") == 0) /* no S3 port */
		return 0;
	if (!t->cert_path[0] || !t->key_path[0]) {
		fprintf(stderr,
			"openlaked: %s: [s3_tls] needs both cert_path and key_path (PEM files); "
			"set both, or remove [s3_tls] to serve plain HTTP\n",
			cfg->source);
		return -EINVAL;
	}
	const char *files[][2] = {
	    {"cert_path", t->cert_path}, {"key_path", t->key_path}, {"client_ca", t->client_ca}};
	for (size_t i = 0; i < 3; i++) {
		if (!files[i][1][0] || access(files[i][1], R_OK) == 0)
			continue;
		fprintf(stderr, "openlaked: %s: [s3_tls] %s %s: %s\n", cfg->source, files[i][0],
			files[i][1], strerror(errno));
		return -errno;
	}
	return 0;
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

static int
start_storage(const struct ol_config *cfg, struct daemon *d)
{
#if defined(OL_HAVE_STORE) && defined(OL_HAVE_S3)
	int rc = ol_store_open(cfg, &d->store);
	if (rc) {
		ol_err("cannot open the object store: %s", strerror(-rc));
		return rc;
	}
	rc = ol_s3_server_start(cfg, d->store, &d->s3);
	if (rc) {
		ol_err("cannot serve S3 on %s: %s", cfg->s3_addr, strerror(-rc));
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

static int
start_kv(const struct ol_config *cfg, struct daemon *d)
{
	const char *addr = ol_config_kv_listen(cfg);
	if (!addr[0])
		return 0;
#ifdef OL_HAVE_KV
	int rc = ol_kv_server_start(cfg, &d->kv);
	if (rc) {
		ol_err("cannot serve the KV pool on %s: %s", addr, strerror(-rc));
		return rc;
	}
	ol_info("KV pool on %s", addr);
	return 0;
#else
	ol_warn("this build has no KV pool; %s is not served", addr);
	return 0;
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
					.drives = drives};
	int rc = ol_node_server_start(&o, &d->plane);
	if (rc) {
		ol_err("cannot serve the node plane on %s: %s", cfg->rpc_addr, strerror(-rc));
		return rc;
	}
	ol_info("node plane on %s (%u loops, window %llu bytes)", cfg->rpc_addr,
		cfg->cluster_plane_threads, (unsigned long long)cfg->cluster_plane_window);
	return 0;
#else
	(void)d;
	ol_warn("[cluster] secret is set but this build has no node plane");
	return 0;
#endif
}

static void
stop_all(struct daemon *d)
{
#ifdef OL_HAVE_NODE
	ol_node_server_stop(d->plane);
	d->plane = NULL;
#endif
#ifdef OL_HAVE_CLUSTER
	ol_cluster_stop(d->cluster);
	d->cluster = NULL;
#endif
#ifdef OL_HAVE_KV
	ol_kv_server_stop(d->kv);
	d->kv = NULL;
#endif
#ifdef OL_HAVE_S3
	ol_s3_server_stop(d->s3);
	d->s3 = NULL;
#endif
#ifdef OL_HAVE_STORE
	if (d->store)
		ol_store_close(d->store);
	d->store = NULL;
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
	banner(cfg);
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
	rc = strcmp(cfg->mode, "kv") == 0 ? 0 : start_storage(cfg, &d);
	if (!rc)
		rc = start_kv(cfg, &d);
	if (!rc)
		rc = start_plane(cfg, &d);
	if (!rc)
		rc = start_cluster(cfg, &d);
	if (rc) {
		stop_all(&d);
		free(cfg);
		return 1;
	}
	ol_info("ready");
	int sig = 0;
	while (sigwait(&stop_set, &sig) == 0 && sig == SIGHUP) {
#ifdef OL_HAVE_S3
		ol_info("SIGHUP: reloading the TLS certificates");
		ol_http_tls_reload_all();
#else
		ol_info("SIGHUP: nothing to reload");
#endif
	}
	ol_info("signal %d: stopping", sig);
	stop_all(&d);
	ol_info("stopped");
	free(cfg);
	return 0;
}
