/* cmd/openlake/node_cmd.c - `openlake node info`, `openlake disk info`, `openlake cluster status`.
 *
 * Two sources, used together when both are given:
 *  - the daemon's config (--config FILE, the same TOML as openlaked): addresses, erasure layout,
 *    drives (measured here with statvfs and a write check: the command runs on the node) and
 *    the [[nodes]] of the cluster (reachability checked with a TCP connect);
 *  - the running daemon's status document, GET /openlake/admin/v1/status on its S3 address
 *    or its admin listener (--endpoint URL; else from the config: s3_addr, or console_addr for
 *    a KV pool, mode = "kv"; else 127.0.0.1:9000, then 127.0.0.1:9001), SigV4-signed with an
 *    admin key (admin_client.h): version, uptime, the mode and the services that run (only
 *    those are reported) and, without a config, the drives as the daemon sees them.
 * Output is a readable table, or one JSON object with --json. */
#include "admin_client.h"
#include "cmds.h"
#include "node_locality.h"

#include "base/config.h"
#include "base/driveid.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define NODE_MAX_DRIVES 64
#define NODE_JSON_CAP	(1 << 20)

struct drive {
	char path[OL_CFG_STR];
	unsigned long long dev; /* st_dev + 1 when measured here (0 = unknown) */
	bool online, writable;
	unsigned long long total, used, free;
	char uuid[OL_DRIVEID_UUID]; /* its identity record's drive UUID ("" unknown) */
};

struct nodeinfo {
	const char *verb;	  /* "node info", "disk info", "cluster status" */
	struct ol_config *cfg;	  /* NULL without --config */
	char host[256], port[16]; /* the daemon's S3/admin address */
	struct ol_cli_admin admin;
	const char *ak, *sk, *region; /* --access-key, --secret-key, --region */
	bool daemon_up;
	char *status;  /* the daemon's status JSON, or NULL */
	bool have_svc; /* the status named its services: what runs, "" = off */
	char svc_s3[OL_CFG_STR], svc_kv[OL_CFG_STR], svc_admin[OL_CFG_STR];
	struct drive drives[NODE_MAX_DRIVES];
	unsigned n_drives;
	bool json;
};

/* ---- tiny helpers: addresses, TCP, HTTP GET ---- */

static int
split_addr(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon = s[0] == '[' ? strstr(s, "]:") : strrchr(s, ':');
	if (!colon)
		return -EINVAL;
	size_t hl = (size_t)(colon - s) - (s[0] == '[' ? 1 : 0);
	const char *h = s[0] == '[' ? s + 1 : s;
	const char *p = colon + (s[0] == '[' ? 2 : 1);
	if (hl >= hcap || !*p || strlen(p) >= pcap || strspn(p, "0123456789") != strlen(p))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	/* a wildcard listener is reached on loopback from this host */
	if (hl == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0)
		snprintf(host, hcap, "127.0.0.1");
	else if (strcmp(host, "::") == 0)
		snprintf(host, hcap, "::1");
	snprintf(port, pcap, "%s", p);
	return 0;
}

static bool
reachable(const char *addr)
{
	char host[256], port[16];
	if (!addr || !*addr || split_addr(addr, host, sizeof(host), port, sizeof(port)))
		return false;
	int fd = ol_cli_tcp_connect(host, port, 1000);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ---- reading the status JSON (our own flat document: scalar fields and one drives array) ---- */

/* The raw value of "key" at or after from, up to end: strings unquoted. 0 or -ENOENT. */
static int
json_field(const char *from, const char *end, const char *key, char *out, size_t cap)
{
	char pat[80];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(from, pat);
	if (!p || (end && p >= end))
		return -ENOENT;
	p += strlen(pat);
	size_t n = 0;
	if (*p == '"') {
		for (p++; *p && *p != '"' && n + 1 < cap; p++) {
			if (*p == '\\' && p[1])
				p++;
			out[n++] = *p;
		}
	} else {
		while (*p && !strchr(",}]", *p) && n + 1 < cap)
			out[n++] = *p++;
	}
	out[n] = 0;
	return 0;
}

static unsigned long long
json_ull(const char *from, const char *end, const char *key)
{
	char v[64];
	return json_field(from, end, key, v, sizeof(v)) ? 0 : strtoull(v, NULL, 10);
}

static bool
json_true(const char *from, const char *end, const char *key)
{
	char v[16];
	return json_field(from, end, key, v, sizeof(v)) == 0 && strcmp(v, "true") == 0;
}

/* "services":{"s3":"ADDR"|null,"kv":...,"admin":...} of the status document */
static void
services_from_status(struct nodeinfo *ni)
{
	const char *p = ni->status ? strstr(ni->status, "\"services\":{") : NULL;
	const char *end = p ? strchr(p, '}') : NULL;
	char *out[] = {ni->svc_s3, ni->svc_kv, ni->svc_admin};
	const char *keys[] = {"s3", "kv", "admin"};
	if (!end)
		return;
	for (int i = 0; i < 3; i++)
		if (json_field(p, end, keys[i], out[i], OL_CFG_STR) || strcmp(out[i], "null") == 0)
			out[i][0] = 0;
	ni->have_svc = true;
}

static void
drives_from_status(struct nodeinfo *ni)
{
	const char *p = ni->status ? strstr(ni->status, "\"drives\":[") : NULL;
	while (p && (p = strstr(p, "{\"index\":")) && ni->n_drives < NODE_MAX_DRIVES) {
		const char *end = strchr(p, '}');
		struct drive *d = &ni->drives[ni->n_drives++];
		if (json_field(p, end, "path", d->path, sizeof(d->path)))
			d->path[0] = 0;
		d->online = json_true(p, end, "online");
		d->writable = json_true(p, end, "writable");
		d->total = json_ull(p, end, "total_bytes");
		d->used = json_ull(p, end, "used_bytes");
		d->free = json_ull(p, end, "free_bytes");
		p = end;
	}
}

/* ---- measuring drives from the config ---- */

static bool
dir_writable(const char *dir)
{
	char path[OL_CFG_STR + 32];
	snprintf(path, sizeof(path), "%s/.openlake-probe-XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0)
		return false;
	bool ok = write(fd, "ok", 2) == 2 && fsync(fd) == 0;
	close(fd);
	unlink(path);
	return ok;
}

static void
drives_from_config(struct nodeinfo *ni)
{
	for (unsigned i = 0; i < ni->cfg->n_data_dirs && i < NODE_MAX_DRIVES; i++) {
		struct drive *d = &ni->drives[ni->n_drives++];
		struct statvfs vs;
		snprintf(d->path, sizeof(d->path), "%s", ni->cfg->data_dirs[i]);
		d->online = statvfs(d->path, &vs) == 0;
		if (!d->online)
			continue;
		d->total = (unsigned long long)vs.f_blocks * vs.f_frsize;
		d->used = d->total - (unsigned long long)vs.f_bfree * vs.f_frsize;
		d->free = (unsigned long long)vs.f_bavail * vs.f_frsize;
		d->writable = dir_writable(d->path);
		struct ol_driveid id;
		if (ol_driveid_read(d->path, &id) == 0 && id.version == 2)
			memcpy(d->uuid, id.drive, sizeof(d->uuid));
		struct stat st;
		if (stat(d->path, &st) == 0)
			d->dev = (unsigned long long)st.st_dev + 1;
	}
}

/* ---- output ---- */

static void
json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void
human(unsigned long long v, char *buf, size_t cap)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double x = (double)v;
	unsigned i = 0;
	while (x >= 1024 && i < 5) {
		x /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", x, u[i]);
}

static void
drives_json(const struct nodeinfo *ni)
{
	printf("\"drives\":[");
	for (unsigned i = 0; i < ni->n_drives; i++) {
		const struct drive *d = &ni->drives[i];
		printf("%s{\"index\":%u,\"path\":", i ? "," : "", i);
		json_string(d->path);
		printf(",\"online\":%s,\"writable\":%s,\"total_bytes\":%llu,\"used_bytes\":%llu,"
		       "\"free_bytes\":%llu,\"uuid\":\"%s\"}",
		       d->online ? "true" : "false", d->writable ? "true" : "false", d->total,
		       d->used, d->free, d->uuid);
	}
	printf("]");
}

static int
disk_info(const struct nodeinfo *ni)
{
	int bad = 0;
	for (unsigned i = 0; i < ni->n_drives; i++)
		bad |= !ni->drives[i].online || !ni->drives[i].writable;
	if (ni->json) {
		printf("{");
		drives_json(ni);
		printf(",\"source\":\"%s\"}\n", ni->cfg ? "config" : "daemon");
		return bad;
	}
	printf("%-3s %-40s %-8s %-8s %10s %10s %10s %5s  %s\n", "#", "PATH", "STATE", "WRITABLE",
	       "TOTAL", "USED", "FREE", "USE%", "DRIVE UUID");
	for (unsigned i = 0; i < ni->n_drives; i++) {
		const struct drive *d = &ni->drives[i];
		char t[32], u[32], f[32];
		human(d->total, t, sizeof(t));
		human(d->used, u, sizeof(u));
		human(d->free, f, sizeof(f));
		printf("%-3u %-40s %-8s %-8s %10s %10s %10s %4.0f%%  %s\n", i, d->path,
		       d->online ? "online" : "OFFLINE", d->writable ? "yes" : "NO", t, u, f,
		       d->total ? 100.0 * (double)d->used / (double)d->total : 0.0,
		       d->uuid[0] ? d->uuid : "-");
	}
	return bad;
}

struct nodesum {
	char version[32], uptime[32], mode[16], s3[OL_CFG_STR], kv[OL_CFG_STR], region[64];
	unsigned self_id, set_n, parity, nodes, online, writable;
	unsigned long long total, used, free;
};

/* true when drive i lies on the file system of an earlier drive */
static bool
shares_fs(const struct nodeinfo *ni, unsigned i)
{
	for (unsigned k = 0; ni->drives[i].dev && k < i; k++)
		if (ni->drives[k].dev == ni->drives[i].dev)
			return true;
	return false;
}

static void
node_summary(const struct nodeinfo *ni, struct nodesum *s)
{
	memset(s, 0, sizeof(*s));
	const char *j = ni->status;
	if (j) {
		json_field(j, NULL, "version", s->version, sizeof(s->version));
		json_field(j, NULL, "uptime_seconds", s->uptime, sizeof(s->uptime));
	}
	if (ni->cfg) {
		const struct ol_config *c = ni->cfg;
		snprintf(s->mode, sizeof(s->mode), "%s", c->mode);
		snprintf(s->s3, sizeof(s->s3), "%s", c->s3_addr);
		snprintf(s->kv, sizeof(s->kv), "%s", ol_config_kv_listen(c));
		snprintf(s->region, sizeof(s->region), "%s", c->region);
		s->self_id = c->self_id;
		s->set_n = c->set_drive_count;
		s->parity = c->default_parity_count;
		s->nodes = c->n_nodes;
	} else if (j) {
		json_field(j, NULL, "mode", s->mode, sizeof(s->mode));
		json_field(j, NULL, "s3_addr", s->s3, sizeof(s->s3));
		json_field(j, NULL, "kv_addr", s->kv, sizeof(s->kv));
		json_field(j, NULL, "region", s->region, sizeof(s->region));
		s->self_id = (unsigned)json_ull(j, NULL, "self_id");
		s->set_n = (unsigned)json_ull(j, NULL, "set_drive_count");
		s->parity = (unsigned)json_ull(j, NULL, "parity");
		s->nodes = (unsigned)json_ull(j, NULL, "nodes");
	}
	if (ni->have_svc) { /* what the daemon runs, not what a config says */
		json_field(j, NULL, "mode", s->mode, sizeof(s->mode));
		snprintf(s->s3, sizeof(s->s3), "%s", ni->svc_s3);
		snprintf(s->kv, sizeof(s->kv), "%s", ni->svc_kv);
	} else if (ni->cfg && strcmp(ni->cfg->mode, "kv") == 0) {
		s->s3[0] = 0; /* a KV pool serves no S3 */
	}
	for (unsigned i = 0; i < ni->n_drives; i++) {
		s->online += ni->drives[i].online;
		s->writable += ni->drives[i].writable;
		if (shares_fs(ni, i))
			continue; /* capacity counts each file system once */
		s->total += ni->drives[i].total;
		s->used += ni->drives[i].used;
		s->free += ni->drives[i].free;
	}
}

static void
node_info_json(const struct nodeinfo *ni, const struct nodesum *s)
{
	printf("{\"daemon\":{\"endpoint\":\"%s://%s:%s\",\"up\":%s,\"version\":",
	       ol_cli_admin_scheme(&ni->admin), ni->host, ni->port,
	       ni->daemon_up ? "true" : "false");
	json_string(s->version);
	printf(",\"uptime_seconds\":%s},\"self_id\":%u,\"mode\":", *s->uptime ? s->uptime : "null",
	       s->self_id);
	json_string(s->mode);
	printf(",\"s3_addr\":");
	json_string(s->s3);
	printf(",\"kv_addr\":");
	json_string(s->kv);
	printf(",\"region\":");
	json_string(s->region);
	printf(",\"erasure\":{\"set_drive_count\":%u,\"data\":%u,\"parity\":%u},\"nodes\":%u,"
	       "\"capacity\":{\"total_bytes\":%llu,\"used_bytes\":%llu,\"free_bytes\":%llu,"
	       "\"drives\":%u,\"online\":%u,\"writable\":%u},",
	       s->set_n, s->set_n - s->parity, s->parity, s->nodes, s->total, s->used, s->free,
	       ni->n_drives, s->online, s->writable);
	drives_json(ni);
	char *lj = ni->status ? ol_node_locality_json(ni->status) : NULL;
	printf(",\"locality\":%s", lj ? lj : "null");
	free(lj);
	printf(",\"source\":\"%s\"}\n", ni->cfg ? "config" : "daemon");
}

static int
node_info(const struct nodeinfo *ni)
{
	struct nodesum s;
	node_summary(ni, &s);
	if (ni->json) {
		node_info_json(ni, &s);
		return !ni->daemon_up;
	}
	char t[32], u[32], f[32];
	human(s.total, t, sizeof(t));
	human(s.used, u, sizeof(u));
	human(s.free, f, sizeof(f));
	printf("node     %u\n", s.self_id);
	if (ni->status)
		printf("daemon   up at %s://%s:%s, version %s, uptime %s s\n",
		       ol_cli_admin_scheme(&ni->admin), ni->host, ni->port, s.version, s.uptime);
	else if (ni->daemon_up)
		printf("daemon   up, but no status at %s://%s:%s (version and uptime unknown): "
		       "give --endpoint http://HOST:PORT of its admin listener (console_addr)\n",
		       ol_cli_admin_scheme(&ni->admin), ni->host, ni->port);
	else
		printf("daemon   NOT REACHABLE at %s://%s:%s\n", ol_cli_admin_scheme(&ni->admin),
		       ni->host, ni->port);
	printf("mode     %s\ns3       %s\nkv       %s\n", s.mode,
	       *s.s3			   ? s.s3
	       : strcmp(s.mode, "kv") == 0 ? "(not served: a KV pool, mode = \"kv\")"
					   : "(off)",
	       *s.kv ? s.kv : "(off)");
	if (ni->have_svc)
		printf("admin    %s\n",
		       *ni->svc_admin ? ni->svc_admin : "(off: console_addr = \"\")");
	printf("region   %s\n", s.region);
	if (strcmp(s.mode, "kv"))
		printf("erasure  %u drives per set: %u data + %u parity\n", s.set_n,
		       s.set_n - s.parity, s.parity);
	printf("nodes    %u\n", s.nodes);
	printf("drives   %u (%u online, %u writable)\ncapacity %s total, %s used, %s free %s\n",
	       ni->n_drives, s.online, s.writable, t, u, f,
	       ni->cfg ? "(each file system counted once)"
		       : "(sum over the drives: give --config to count shared file systems once)");
	if (ni->status)
		ol_node_locality_text(ni->status);
	return !ni->daemon_up;
}

/* One service of the daemon for `cluster status`: its address ("" = not served) and whether
 * it answers. */
struct svc {
	const char *name;
	char addr[OL_CFG_STR];
	bool up;
};

/* What runs: the daemon's own word (status "services") when it gave it, else the config's
 * (a KV pool serves no S3), else the endpoint asked. */
static void
cluster_services(const struct nodeinfo *ni, struct svc sv[3])
{
	const struct ol_config *c = ni->cfg;
	sv[0].name = "s3";
	sv[1].name = "kv";
	sv[2].name = "admin";
	if (ni->have_svc) {
		snprintf(sv[0].addr, sizeof(sv[0].addr), "%s", ni->svc_s3);
		snprintf(sv[1].addr, sizeof(sv[1].addr), "%s", ni->svc_kv);
		snprintf(sv[2].addr, sizeof(sv[2].addr), "%s", ni->svc_admin);
	} else if (c) {
		snprintf(sv[0].addr, sizeof(sv[0].addr), "%s",
			 strcmp(c->mode, "kv") == 0 ? "" : c->s3_addr);
		snprintf(sv[1].addr, sizeof(sv[1].addr), "%s", ol_config_kv_listen(c));
		snprintf(sv[2].addr, sizeof(sv[2].addr), "%s", c->console_addr);
	} else {
		snprintf(sv[0].addr, sizeof(sv[0].addr), "%s:%s", ni->host, ni->port);
	}
	for (int i = 0; i < 3; i++)
		sv[i].up = sv[i].addr[0] && reachable(sv[i].addr);
}

static int
cluster_status(const struct nodeinfo *ni)
{
	const struct ol_config *c = ni->cfg;
	struct svc sv[3];
	cluster_services(ni, sv);
	int down = !ni->daemon_up || (sv[0].addr[0] && !sv[0].up) || (sv[1].addr[0] && !sv[1].up);
	unsigned n = c ? c->n_nodes : 0;
	bool up[OL_CFG_MAX_NODES];
	char mode[16] = "";
	if (ni->status)
		json_field(ni->status, NULL, "mode", mode, sizeof(mode));
	else if (c)
		snprintf(mode, sizeof(mode), "%s", c->mode);
	for (unsigned i = 0; i < n; i++) {
		up[i] = reachable(c->nodes[i].rpc_addr);
		down |= !up[i];
	}
	if (ni->json) {
		printf("{\"mode\":");
		json_string(mode);
		for (int i = 0; i < 3; i++) {
			printf(",\"%s\":{\"addr\":", sv[i].name);
			if (sv[i].addr[0])
				json_string(sv[i].addr);
			else
				printf("null");
			printf(",\"reachable\":%s}", sv[i].up ? "true" : "false");
		}
		printf(",\"nodes\":[");
		for (unsigned i = 0; i < n; i++) {
			printf("%s{\"id\":%u,\"rpc_addr\":", i ? "," : "", c->nodes[i].id);
			json_string(c->nodes[i].rpc_addr);
			printf(",\"disk_count\":%u,\"reachable\":%s,\"self\":%s}",
			       c->nodes[i].disk_count, up[i] ? "true" : "false",
			       c->nodes[i].id == c->self_id ? "true" : "false");
		}
		printf("]}\n");
		return down;
	}
	if (*mode)
		printf("mode   %s\n", mode);
	for (int i = 0; i < 3; i++) {
		if (sv[i].addr[0])
			printf("%-6s %s  %s\n", sv[i].name, sv[i].addr, sv[i].up ? "up" : "DOWN");
		else if (i == 0 && strcmp(mode, "kv") == 0)
			printf("%-6s (not served: a KV pool, mode = \"kv\")\n", sv[i].name);
		else
			printf("%-6s (off)\n", sv[i].name);
	}
	printf("\n");
	if (!c)
		printf("(give --config FILE to list and check every node of the cluster)\n");
	else
		printf("%-4s %-30s %-6s %5s\n", "ID", "RPC ADDRESS", "STATE", "DISKS");
	for (unsigned i = 0; i < n; i++)
		printf("%-4u %-30s %-6s %5u%s\n", c->nodes[i].id, c->nodes[i].rpc_addr,
		       up[i] ? "up" : "DOWN", c->nodes[i].disk_count,
		       c->nodes[i].id == c->self_id ? "  (self)" : "");
	return down;
}

/* ---- flags and main ---- */

static void
node_usage(const char *verb, FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake %s [--config FILE] [--endpoint URL] [--json]\n"
	    "                [--access-key KEY --secret-key KEY] [--region NAME]\n"
	    "\n"
	    "  node info       the node: daemon version and uptime, addresses, erasure layout,\n"
	    "                  drive count and capacity; from the daemon: NUMA nodes and their\n"
	    "                  CPUs, the KV loops' CPUs, each drive's device and NIC's interface\n"
	    "                  with its NUMA node, NVIDIA GPUs, and a WARNING line for a drive or\n"
	    "                  NIC on a node no loop serving it runs on\n"
	    "  disk info       each drive: online, writable, total/used/free\n"
	    "  cluster status  the S3 and KV listeners and every [[nodes]] entry, checked for\n"
	    "                  reachability with a TCP connect\n"
	    "\n"
	    "  --config FILE   the daemon's TOML config (drives are then measured here, on the\n"
	    "                  node, with statvfs and a write probe)\n"
	    "  --endpoint URL  the daemon's S3 or admin address, http(s)://HOST:PORT (default:\n"
	    "                  from the config, s3_addr, or console_addr for a KV pool; else\n"
	    "                  http://127.0.0.1:9000, then :9001; HTTPS to an s3_addr with\n"
	    "                  [s3_tls], trusting $AWS_CA_BUNDLE or its cert_path); its status\n"
	    "                  document\n"
	    "                  /openlake/admin/v1/status (signed with an admin key) says the\n"
	    "                  mode and what runs, and supplies what the config does not\n"
	    "  --json          one JSON object on stdout\n" OL_CLI_ADMIN_KEY_HELP "\n"
	    "Exit status: 0 healthy, 1 something is down (daemon, a drive, a node) or the daemon\n"
	    "refused the keys, 2 bad usage.\n",
	    verb);
}

static int
node_endpoint(struct nodeinfo *ni, const char *url)
{
	if (ol_cli_admin_endpoint(&ni->admin, url)) {
		fprintf(stderr,
			"openlake %s: --endpoint '%s' is not http(s)://HOST:PORT (e.g. "
			"http://127.0.0.1:9000)\n",
			ni->verb, url);
		return -EINVAL;
	}
	snprintf(ni->host, sizeof(ni->host), "%s", ni->admin.host);
	snprintf(ni->port, sizeof(ni->port), "%s", ni->admin.port);
	return 0;
}

static int
node_load_config(struct nodeinfo *ni, const char *path)
{
	char err[512];
	ni->cfg = calloc(1, sizeof(*ni->cfg));
	if (!ni->cfg)
		return -ENOMEM;
	ol_config_default(ni->cfg);
	int rc = ol_config_load_file(ni->cfg, path, err, sizeof(err));
	if (rc)
		fprintf(stderr, "openlake %s: --config %s: %s\n", ni->verb, path, err);
	return rc;
}

static const struct option node_longopts[] = {{"config", required_argument, NULL, 'c'},
					      {"endpoint", required_argument, NULL, 'e'},
					      {"access-key", required_argument, NULL, 'A'},
					      {"secret-key", required_argument, NULL, 'S'},
					      {"region", required_argument, NULL, 'R'},
					      {"json", no_argument, NULL, 'j'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};

/* 0 ok, 1 help shown, 2 bad usage */
static int
node_parse(struct nodeinfo *ni, int argc, char **argv, const char **config, const char **url)
{
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":c:e:jh", node_longopts, NULL)) != -1) {
		const char *flag = argv[optind - 1];
		switch (opt) {
		case 'c':
			*config = optarg;
			break;
		case 'e':
			*url = optarg;
			break;
		case 'j':
			ni->json = true;
			break;
		case 'A':
			ni->ak = optarg;
			break;
		case 'S':
			ni->sk = optarg;
			break;
		case 'R':
			ni->region = optarg;
			break;
		case 'h':
			node_usage(ni->verb, stdout);
			return 1;
		case ':':
			fprintf(stderr, "openlake %s: %s needs a value (see openlake %s --help)\n",
				ni->verb, flag, ni->verb);
			return 2;
		default:
			fprintf(stderr, "openlake %s: unknown flag '%s' (see openlake %s --help)\n",
				ni->verb, flag, ni->verb);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "openlake %s: unexpected argument '%s' (see openlake %s --help)\n",
			ni->verb, argv[optind], ni->verb);
		return 2;
	}
	return 0;
}

/* Where the daemon's status is asked for, without --endpoint: a KV pool (mode = "kv") serves
 * it on its admin listener only; anything else on its S3 port (the admin listener after). */
static const char *
status_addr(const struct ol_config *c, bool second)
{
	bool kv = c && strcmp(c->mode, "kv") == 0;
	if (!c)
		return second ? OL_CONSOLE_ADDR_DEFAULT : "127.0.0.1:9000";
	if (kv)
		return second ? "" : c->console_addr;
	return second ? c->console_addr : c->s3_addr;
}

static int
status_fetch(struct nodeinfo *ni)
{
	snprintf(ni->admin.host, sizeof(ni->admin.host), "%s", ni->host);
	snprintf(ni->admin.port, sizeof(ni->admin.port), "%s", ni->port);
	free(ni->status);
	ni->status = NULL;
	return ol_cli_admin_call(&ni->admin, "GET", "/openlake/admin/v1/status", "", NODE_JSON_CAP,
				 &ni->status);
}

static int
node_gather(struct nodeinfo *ni, const char *config, const char *url)
{
	if (config && node_load_config(ni, config))
		return 2;
	const char *addr = status_addr(ni->cfg, false);
	if (!url && !*addr)
		addr = ni->cfg->s3_addr; /* a KV pool with console_addr = "": no status to ask */
	if (url ? node_endpoint(ni, url)
		: split_addr(addr, ni->host, sizeof(ni->host), ni->port, sizeof(ni->port)))
		return 2;
	if (ol_cli_admin_keys(&ni->admin, ni->verb, ni->ak, ni->sk, ni->region, ni->cfg, config))
		return 2;
	/* [s3_tls]: s3_addr speaks only HTTPS; the admin listener (console_addr) plain HTTP */
	bool s3_tls = ol_cli_admin_tls(&ni->admin, ni->cfg);
	if (!url)
		ni->admin.tls = s3_tls && addr == ni->cfg->s3_addr;
	bool first_tls = ni->admin.tls;
	int st = status_fetch(ni);
	const char *second = url ? "" : status_addr(ni->cfg, true);
	if (st < 0 && *second) {
		char host[256], port[16];
		snprintf(host, sizeof(host), "%s", ni->host);
		snprintf(port, sizeof(port), "%s", ni->port);
		ni->admin.tls = false;
		if (split_addr(second, ni->host, sizeof(ni->host), ni->port, sizeof(ni->port)) == 0)
			st = status_fetch(ni);
		if (st < 0) { /* report the first address, the one the config names */
			snprintf(ni->host, sizeof(ni->host), "%s", host);
			snprintf(ni->port, sizeof(ni->port), "%s", port);
			ni->admin.tls = first_tls;
		}
	}
	if (st == 400 || st == 403) {
		ol_cli_admin_refused(&ni->admin, ni->verb, st, ni->status);
		return 1;
	}
	if (st != 200) {
		free(ni->status);
		ni->status = NULL;
	}
	services_from_status(ni);
	ni->daemon_up = ni->status ||
			reachable(ni->cfg && strcmp(ni->cfg->mode, "kv") ? ni->cfg->s3_addr : NULL);
	/* mode = "kv" serves no S3: the daemon is up when its KV listener answers */
	if (!ni->daemon_up && ni->cfg && strcmp(ni->cfg->mode, "kv") == 0)
		ni->daemon_up = reachable(ol_config_kv_listen(ni->cfg));
	if (ni->cfg)
		drives_from_config(ni);
	else if (ni->status)
		drives_from_status(ni);
	if (!ni->cfg && !ni->status) {
		fprintf(stderr,
			"openlake %s: no daemon answers at %s://%s:%s - give --config FILE (the "
			"daemon's config) or --endpoint http(s)://HOST:PORT\n",
			ni->verb, ol_cli_admin_scheme(&ni->admin), ni->host, ni->port);
		return 1;
	}
	return 0;
}

int
ol_cmd_node(int argc, char **argv)
{
	static const char *const verbs[][2] = {
	    {"node", "info"}, {"disk", "info"}, {"cluster", "status"}};
	struct nodeinfo ni = {0};
	const char *config = NULL, *url = NULL;
	unsigned v;
	for (v = 0; v < 3 && strcmp(argv[0], verbs[v][0]) != 0; v++)
		;
	if (v == 3)
		return 2;
	char verb[32];
	snprintf(verb, sizeof(verb), "%s %s", verbs[v][0], verbs[v][1]);
	ni.verb = verb;
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		node_usage(verb, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], verbs[v][1]) != 0) {
		fprintf(stderr,
			"openlake %s: unknown sub-command '%s' (did you mean 'openlake %s'?)\n",
			argv[0], argv[1], verb);
		return 2;
	}
	int rc = node_parse(&ni, argc - 1, argv + 1, &config, &url);
	if (rc)
		return rc == 1 ? 0 : rc;
	rc = node_gather(&ni, config, url);
	if (rc == 0)
		rc = v == 0 ? node_info(&ni) : v == 1 ? disk_info(&ni) : cluster_status(&ni);
	free(ni.cfg);
	free(ni.status);
	return rc;
}
