/* cmd/openlake/kv_cmd.c - `openlake kv stats [--nodes host:port,...] [--config FILE] [--json]
 * [--timeout MS] [--tls [--ca-file PEM] [--server-name NAME]]`: the KV pool's state per node
 * and in total (capacity, used, hits, misses, evictions, per tier), read through libopenlake.
 * argv[0] is "kv". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "openlake/openlake.h"

#include "base/config.h"

#define KV_MAX_NODES 64
#define KV_JSON_CAP  (4u << 20) /* every node's stats, namespaces' rows included */

static void
usage(FILE *f)
{
	fprintf(
	    f, "usage: openlake kv stats [--nodes HOST:PORT,...] [--config FILE] [--json]\n"
	       "                        [--timeout MS] [--tls [--ca-file PEM] [--server-name N]]\n"
	       "  --nodes    pool nodes (default $OPENLAKE_NODES or 127.0.0.1:9400)\n"
	       "  --config   the daemon's TOML config: its KV listener (kv_addr, or rpc_addr\n"
	       "             in mode = \"kv\"), the other [[nodes]] of a KV pool, its [kv] secret\n"
	       "  --json     print the raw JSON document (per node and total)\n"
	       "  --timeout  per-node timeout in ms (default 2000)\n"
	       "  --tls      the KV port speaks TLS ([kv_tls]; default $OPENLAKE_KV_TLS=1)\n"
	       "  --ca-file  PEM CA that signed the nodes' certificates (default "
	       "$OPENLAKE_KV_CA_FILE, else the system's)\n"
	       "  --server-name  name the certificates carry (default: each node's host)\n");
}

static uint64_t
json_u64(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void
human(uint64_t v, char *buf, size_t cap)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double d = (double)v;
	int i = 0;
	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", d, u[i]);
}

static int
split_nodes(char *list, const char **nodes)
{
	int n = 0;
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t && n < KV_MAX_NODES;
	     t = strtok_r(NULL, ",", &save))
		nodes[n++] = t;
	return n;
}

/* Errors of the library (a pool that wants a token...) go to stderr, once per message. */
static void
kv_log(int level, const char *msg, void *arg)
{
	static char last[512];
	if (level > OL_CLIENT_LOG_ERROR || strncmp(last, msg, sizeof(last) - 1) == 0)
		return;
	snprintf(last, sizeof(last), "%s", msg);
	fprintf(stderr, "%s\n", msg);
}

static const char *kv_token; /* $OPENLAKE_KV_TOKEN, else the config's [kv] secret */

/* The nodes of the pool a config describes, comma-separated into list (a wildcard listener is
 * asked on loopback): this daemon's KV listener, and in mode = "kv" every other [[nodes]]
 * rpc_addr. 0, or 2 with the reason printed. */
static int
nodes_from_config(const char *path, char *list, size_t cap, struct ol_config *cfg)
{
	char err[512];
	ol_config_default(cfg);
	if (ol_config_load_file(cfg, path, err, sizeof(err))) {
		fprintf(stderr, "openlake kv stats: --config %s: %s\n", path, err);
		return 2;
	}
	const char *self = ol_config_kv_listen(cfg);
	if (!self[0]) {
		fprintf(stderr,
			"openlake kv stats: %s turns the KV pool off (kv_addr = \"\"): set kv_addr "
			"in it, or give --nodes HOST:PORT\n",
			path);
		return 2;
	}
	size_t len = 0;
	const char *wild = strncmp(self, "0.0.0.0:", 8) == 0 ? self + 7 : NULL;
	len += (size_t)snprintf(list, cap, "%s%s", wild ? "127.0.0.1" : "", wild ? wild : self);
	for (unsigned i = 0; strcmp(cfg->mode, "kv") == 0 && i < cfg->n_nodes && len < cap; i++) {
		const char *a = cfg->nodes[i].rpc_addr;
		if (!a[0] || cfg->nodes[i].id == cfg->self_id || strcmp(a, self) == 0)
			continue;
		len += (size_t)snprintf(list + len, cap - len, ",%s", a);
	}
	if (!kv_token && cfg->kv_secret[0])
		kv_token = cfg->kv_secret;
	return len < cap ? 0 : 2;
}

/* TLS settings: flags, else $OPENLAKE_KV_TLS / $OPENLAKE_KV_CA_FILE / $OPENLAKE_KV_SERVER_NAME. */
static struct {
	int tls;
	const char *ca, *name;
} kv_tls;

static void
kv_tls_env(void)
{
	const char *e = getenv("OPENLAKE_KV_TLS");
	kv_tls.tls = e && (strcmp(e, "1") == 0 || strcmp(e, "true") == 0);
	kv_tls.ca = getenv("OPENLAKE_KV_CA_FILE");
	kv_tls.name = getenv("OPENLAKE_KV_SERVER_NAME");
}

static struct ol_client *
connect_nodes(const char *const *nodes, size_t n, unsigned timeout_ms)
{
	struct ol_client_opts o = {.size = sizeof(o),
				   .nodes = nodes,
				   .n_nodes = n,
				   .device = "tcp",
				   .ns = "",
				   .timeout_ms = timeout_ms,
				   .log = kv_log,
				   .token = kv_token,
				   .tls = kv_tls.tls || (kv_tls.ca && kv_tls.ca[0]),
				   .ca_file = kv_tls.ca,
				   .server_name = kv_tls.name};
	struct ol_client *c = NULL;
	int r = ol_client_new(&o, &c);
	if (r < 0)
		fprintf(stderr, "openlake kv: bad node list: %s\n", strerror(-r));
	return c;
}

/* The write-behind: its mode, its lag and the promise that goes with it. */
static void
print_writeback(const char *json)
{
	char bb[32], mode[16] = "off", promise[512] = "";
	const char *p = strstr(json, "\"writeback\":\"");
	if (p)
		sscanf(p + 13, "%15[a-z]", mode);
	p = strstr(json, "\"promise\":\"");
	if (p)
		sscanf(p + 11, "%511[^\"]", promise);
	human(json_u64(json, "backlog_bytes"), bb, sizeof(bb));
	printf("  write-behind %s: backlog %s in %llu blocks, oldest %.1f s, dropped unwritten "
	       "%llu\n",
	       mode, bb, (unsigned long long)json_u64(json, "backlog_blocks"),
	       (double)json_u64(json, "backlog_oldest_ms") / 1000.0,
	       (unsigned long long)json_u64(json, "writeback_dropped"));
	if (promise[0])
		printf("  promise: %s\n", promise);
}

/* A JSON string's body at p (after its opening quote) into out, escapes undone (a control
 * byte shows as '?'); returns the end of the string in p. */
static const char *
json_str(const char *p, char *out, size_t cap)
{
	size_t n = 0;
	for (; *p && *p != '"'; p++) {
		char ch = *p;
		if (ch == '\\' && p[1] == 'u' && strlen(p) >= 6) {
			ch = '?';
			p += 5;
		} else if (ch == '\\' && p[1]) {
			ch = *++p;
		}
		if (n + 1 < cap)
			out[n++] = ch;
	}
	out[n] = '\0';
	return p;
}

/* What each client namespace holds on this node now, and its quota evictions. */
static void
print_namespaces(const char *json)
{
	const char *p = strstr(json, "\"namespaces\":[");
	uint64_t quota = json_u64(json, "namespace_quota_bytes");
	char q[32], db[32], nb[32], name[256];
	if (quota) {
		human(quota, q, sizeof(q));
		printf("  namespace quota %s of DRAM each ([kv] namespace_quota_frac)\n", q);
	}
	if (!p || p[14] == ']')
		return;
	printf("  %-28s %11s %11s %11s %11s %9s\n", "namespace", "dram blocks", "dram bytes",
	       "nvme blocks", "nvme bytes", "quota ev.");
	for (p = strstr(p, "{\"namespace\":\""); p; p = strstr(p, "{\"namespace\":\"")) {
		p = json_str(p + 14, name, sizeof(name));
		human(json_u64(p, "dram_bytes"), db, sizeof(db));
		human(json_u64(p, "nvme_bytes"), nb, sizeof(nb));
		printf("  %-28s %11llu %11s %11llu %11s %9llu\n", name[0] ? name : "(default)",
		       (unsigned long long)json_u64(p, "dram_blocks"), db,
		       (unsigned long long)json_u64(p, "nvme_blocks"), nb,
		       (unsigned long long)json_u64(p, "quota_evictions"));
	}
	if (json_u64(json, "namespaces_left_off"))
		printf(
		    "  (%llu more namespaces not shown: the node's reply holds 32 KiB of rows)\n",
		    (unsigned long long)json_u64(json, "namespaces_left_off"));
}

static void
print_node(const char *addr, const char *json)
{
	char dc[32], du[32], nc[32], nu[32];
	if (!strstr(json, "\"up\":true")) {
		printf("%-22s DOWN\n", addr);
		return;
	}
	human(json_u64(json, "dram_capacity"), dc, sizeof(dc));
	human(json_u64(json, "dram_used"), du, sizeof(du));
	human(json_u64(json, "nvme_capacity"), nc, sizeof(nc));
	human(json_u64(json, "nvme_used"), nu, sizeof(nu));
	printf("%-22s up%s\n", addr, strstr(json, "\"local\":true") ? " (local)" : "");
	printf("  dram   %10s / %-10s  %llu blocks\n", du, dc,
	       (unsigned long long)json_u64(json, "dram_entries"));
	printf("  nvme   %10s / %-10s  %llu blocks\n", nu, nc,
	       (unsigned long long)json_u64(json, "nvme_entries"));
	printf("  entries %llu  puts %llu  hits %llu (dram %llu, nvme %llu)  misses %llu\n",
	       (unsigned long long)json_u64(json, "entries"),
	       (unsigned long long)json_u64(json, "puts"),
	       (unsigned long long)json_u64(json, "hits"),
	       (unsigned long long)json_u64(json, "hits_dram"),
	       (unsigned long long)json_u64(json, "hits_nvme"),
	       (unsigned long long)json_u64(json, "misses"));
	printf("  evictions %llu  demotions %llu  promotions %llu  writebacks %llu  corrupt %llu\n",
	       (unsigned long long)json_u64(json, "evictions"),
	       (unsigned long long)json_u64(json, "demotions"),
	       (unsigned long long)json_u64(json, "promotions"),
	       (unsigned long long)json_u64(json, "writebacks"),
	       (unsigned long long)json_u64(json, "corrupt"));
	print_writeback(json);
	print_namespaces(json);
}

/* The client's view of the pool: a cluster's members (id, address, weight) or the seeds. */
static void
print_view(const char *json)
{
	const char *v = strstr(json, "\"view\":{");
	if (!v)
		return;
	int cluster = strncmp(v + 7, "{\"cluster\":true", 15) == 0;
	if (!cluster) {
		printf(
		    "view: the nodes as listed (no cluster: keys hashed over their addresses)\n");
		return;
	}
	printf("view: cluster epoch %llu, keys by weighted rendezvous on node ids\n",
	       (unsigned long long)json_u64(v, "epoch"));
	for (const char *m = strstr(v, "{\"id\":"); m; m = strstr(m + 1, "{\"id\":")) {
		char addr[256] = "?";
		const char *a = strstr(m, "\"addr\":\"");
		if (a)
			sscanf(a + 8, "%255[^\"]", addr);
		printf("  node %llu  %-22s weight %llu\n", (unsigned long long)json_u64(m, "id"),
		       addr, (unsigned long long)json_u64(m, "weight"));
	}
}

static int
stats(const char *const *nodes, size_t n, unsigned timeout_ms, int as_json)
{
	char *json = malloc(KV_JSON_CAP);
	int rc = 1, up = 0;
	if (!json)
		return 1;
	for (size_t i = 0; i < (as_json ? 1 : n); i++) {
		struct ol_client *c = as_json ? connect_nodes(nodes, n, timeout_ms)
					      : connect_nodes(nodes + i, 1, timeout_ms);
		if (!c)
			goto out;
		int r = ol_kv_stats(c, json, KV_JSON_CAP);
		ol_client_free(c);
		if (r < 0) {
			fprintf(stderr, "openlake kv stats: %s\n", strerror(-r));
			goto out;
		}
		up += (int)json_u64(json, "nodes_up");
		if (as_json)
			printf("%s\n", json);
		else
			print_node(nodes[i], json);
		if (!as_json && i + 1 == n)
			print_view(json);
	}
	rc = up > 0 ? 0 : 2;
	if (rc && !as_json)
		fprintf(
		    stderr,
		    "openlake kv stats: no node answered: is openlaked running with its KV pool "
		    "there? Give the pool's addresses with --nodes HOST:PORT,... or the daemon's "
		    "config with --config FILE\n");
out:
	free(json);
	return rc;
}

int
ol_cmd_kv(int argc, char **argv)
{
	const char *nodes[KV_MAX_NODES];
	char list[4096];
	const char *env = getenv("OPENLAKE_NODES");
	const char *config = NULL;
	static struct ol_config cfg; /* large: not on the stack */
	int as_json = 0, nodes_given = 0;
	unsigned long timeout_ms = 2000;
	snprintf(list, sizeof(list), "%s", env && env[0] ? env : "127.0.0.1:9400");
	if (ol_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "stats") != 0) {
		usage(stderr);
		return 2;
	}
	kv_tls_env();
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			as_json = 1;
		} else if (strcmp(argv[i], "--tls") == 0) {
			kv_tls.tls = 1;
		} else if (strcmp(argv[i], "--ca-file") == 0 && i + 1 < argc) {
			kv_tls.ca = argv[++i];
		} else if (strcmp(argv[i], "--server-name") == 0 && i + 1 < argc) {
			kv_tls.name = argv[++i];
		} else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
			snprintf(list, sizeof(list), "%s", argv[++i]);
			nodes_given = 1;
		} else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			config = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			char *end;
			timeout_ms = strtoul(argv[++i], &end, 10);
			if (*end || timeout_ms == 0 || timeout_ms > 600000) {
				fprintf(stderr, "openlake kv: bad --timeout %s\n", argv[i]);
				return 2;
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	kv_token = getenv("OPENLAKE_KV_TOKEN");
	if (config && nodes_given) {
		fprintf(stderr, "openlake kv stats: give --config FILE or --nodes, not both\n");
		return 2;
	}
	if (config && nodes_from_config(config, list, sizeof(list), &cfg))
		return 2;
	int n = split_nodes(list, nodes);
	if (n == 0) {
		usage(stderr);
		return 2;
	}
	return stats(nodes, (size_t)n, (unsigned)timeout_ms, as_json);
}
