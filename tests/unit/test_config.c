/* Config schema: upstream files accepted as written, errors name file, line and key. */
#include "base/config.h"
#include "base/log.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
parse(struct ol_config *c, const char *text, char *err)
{
	ol_config_default(c);
	return ol_config_parse(c, "t.toml", text, strlen(text), err, 256);
}

static void
test_shipped(const char *dir)
{
	static const char *const files[] = {"storage-tcp-local.toml", "kv_local.toml",
					    "kv_rdma.toml"};
	for (size_t i = 0; i < 3; i++) {
		struct ol_config c;
		char path[512], err[256] = "";
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		ol_config_default(&c);
		int rc = ol_config_load_file(&c, path, err, sizeof(err));
		ok(rc == 0, "%s parses (%s)", files[i], err);
		rc = ol_config_validate(&c, err, sizeof(err));
		ok(rc == 0, "%s validates (%s)", files[i], err);
	}
	/* the public OpenLake's quick start names its own path: the error says where ours is */
	struct ol_config c;
	char err[512] = "";
	ol_config_default(&c);
	int rc = ol_config_load_file(
	    &c, "/nonexistent-openlake/crates/openlake_server/configs/storage-tcp-local.toml", err,
	    sizeof(err));
	ok(rc == -ENOENT && strstr(err, "is configs/storage-tcp-local.toml in this source tree") &&
	       strstr(err, "share/openlake/examples/storage-tcp-local.toml"),
	   "a missing public config path names ours: %s", err);
	rc = ol_config_load_file(&c, "/nonexistent-openlake/mine.toml", err, sizeof(err));
	ok(rc == -ENOENT && !strstr(err, "public OpenLake"), "another missing file: no hint (%s)",
	   err);
}

static void
test_storage_values(void)
{
	struct ol_config c;
	char err[256] = "";
	const char *t =
	    "self_id = 1\n"
	    "data_dirs = [\"a\", 'b',\n  \"c\", \"d\",]  # four\n"
	    "s3_addr = \"0.0.0.0:9000\"\nrpc_addr = \"127.0.0.1:9100\"\n"
	    "replication = 4\ndefault_parity_count = 2\nregion = \"eu-west-1\"\n"
	    "nodes = [{ id = 1, rpc_addr = \"h:1\", disk_count = 4 }, {id=2, rpc_addr=\"h:2\"}]\n"
	    "[[credentials]]\naccess_key = \"ak\"\nsecret_key = \"sk\"\n"
	    "[[credentials]]\naccess_key = \"ak2\"\nsecret_key = \"sk2\"\n"
	    "[storage]\nblock_size = \"2MiB\"\nfsync = false\n"
	    "[kv]\ndram_bytes = 1_073_741_824\n";
	int rc = parse(&c, t, err);
	ok(rc == 0, "full storage config parses (%s)", err);
	ok(c.n_data_dirs == 4 && strcmp(c.data_dirs[1], "b") == 0, "data_dirs array");
	ok(c.set_drive_count == 4 && c.default_parity_count == 2, "replication alias and parity");
	ok(c.n_creds == 2 && strcmp(c.creds[1].secret_key, "sk2") == 0, "two credentials");
	ok(c.n_nodes == 2 && c.nodes[1].id == 2 && c.nodes[1].disk_count == 1, "inline nodes");
	ok(c.block_size == 2u << 20 && !c.fsync, "storage table");
	ok(c.kv_dram_bytes == 1ull << 30, "underscored integer");
	ok(ol_config_validate(&c, err, sizeof(err)) == 0, "validates (%s)", err);
}

static void
test_errors(void)
{
	struct ol_config c;
	char err[256];
	ok(parse(&c, "self_id = 0\nbogus_key = 1\n", err) == -EINVAL && strstr(err, "t.toml:2") &&
	       strstr(err, "bogus_key"),
	   "unknown key names file, line and key: %s", err);
	ok(parse(&c, "[nope]\n", err) == -EINVAL && strstr(err, "nope"), "unknown table: %s", err);
	ok(parse(&c, "self_id = \"x\"\n", err) == -EINVAL && strstr(err, "t.toml:1"),
	   "quoted integer: %s", err);
	ok(parse(&c, "region = \"a\nb\"\n", err) == -EINVAL && strstr(err, "unterminated"),
	   "unterminated string: %s", err);
	ok(parse(&c, "set_drive_count = 0\n", err) == -EINVAL, "range check: %s", err);
	ok(parse(&c, "mode = \"fast\"\n", err) == -EINVAL && strstr(err, "storage|kv"),
	   "enum lists choices: %s", err);
	ok(parse(&c, "a.b = 1\n", err) == -EINVAL, "dotted key refused: %s", err);
	ok(parse(&c, "data_dirs = [\"x\", \"x\"]\n", err) == -EINVAL && strstr(err, "twice"),
	   "duplicate dir: %s", err);
	ok(parse(&c, "self_id = 0 junk\n", err) == -EINVAL, "trailing junk: %s", err);
	parse(&c, "data_dirs = [\"a\",\"b\",\"c\"]\nset_drive_count = 4\n", err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "set_drive_count"),
	   "N must divide drives: %s", err);
	parse(&c, "default_parity_count = 3\n", err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL, "P <= N/2: %s", err);
	parse(&c, "self_id = 7\n", err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "self_id"),
	   "self_id must be a node: %s", err);
	parse(&c,
	      "[[credentials]]\naccess_key=\"a\"\nsecret_key=\"b\"\n[[credentials]]\n"
	      "access_key=\"a\"\nsecret_key=\"c\"\n",
	      err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "twice"),
	   "duplicate access key: %s", err);
	parse(&c,
	      "[[nodes]]\nid = 0\nrpc_addr = \"10.0.0.1:9100\"\n[[nodes]]\nid = 1\n"
	      "rpc_addr = \"10.0.0.1:9100\"\n",
	      err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "same rpc_addr"),
	   "two nodes on one rpc_addr: %s", err);
	parse(&c,
	      "[[nodes]]\nid = 0\nrpc_addr = \"10.0.0.1:9100\"\n[[nodes]]\nid = 0\n"
	      "rpc_addr = \"10.0.0.2:9100\"\n",
	      err);
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "listed twice"),
	   "duplicate node id: %s", err);
	parse(&c, "", err);
	ok(!ol_config_kv_prefault(&c), "no DRAM prefault beside S3 by default");
	parse(&c, "mode = \"kv\"\n", err);
	ok(ol_config_kv_prefault(&c), "a dedicated pool (mode = kv) prefaults by default");
	parse(&c, "mode = \"kv\"\n[kv]\nprefault = \"off\"\n", err);
	ok(!ol_config_kv_prefault(&c), "[kv] prefault = off wins");
	ok(parse(&c, "[kv]\nprefault = \"yes\"\n", err) == -EINVAL && strstr(err, "auto|on|off"),
	   "prefault lists its choices: %s", err);
}

static void
test_kv_dram_and_console(void)
{
	struct ol_config cfg, *c = &cfg;
	char err[256] = "";
	const uint64_t gib = 1ull << 30;
	const char *key = NULL;
	parse(c, "[kv_slab]\ncpu_ram_frac = 0.5\n", err);
	ok(ol_config_kv_dram_bytes(c, 24 * gib + 12345, &key) == 12 * gib &&
	       strcmp(key, "[kv_slab] cpu_ram_frac") == 0,
	   "cpu_ram_frac takes its share of RAM, floored to GiB, and is named: %s", key);
	ok(ol_config_kv_dram_bytes(c, gib, NULL) == gib, "at least 1 GiB, as upstream");
	parse(c, "[kv_slab]\ncpu_ram_frac = 0.5\n[kv]\ndram_bytes = \"64MiB\"\n", err);
	ok(ol_config_kv_dram_bytes(c, 24 * gib, &key) == 64ull << 20 &&
	       strcmp(key, "[kv] dram_bytes") == 0,
	   "[kv] dram_bytes wins over cpu_ram_frac");
	parse(c, "", err);
	ok(ol_config_kv_dram_bytes(c, 24 * gib, &key) == gib, "1 GiB by default");
	ok(strcmp(c->console_addr, "127.0.0.1:9001") == 0, "console_addr defaults to :9001");
	ok(parse(c, "console_addr = \"\"\n", err) == 0 && !c->console_addr[0] &&
	       ol_config_validate(c, err, 256) == 0,
	   "console_addr = \"\" turns the admin listener off: %s", err);
	ok(parse(c, "[s3]\ndomains = [\"s3.example.com\", \"objects.lan\"]\n", err) == 0 &&
	       !strcmp(c->s3_domains, "s3.example.com,objects.lan") &&
	       ol_config_validate(c, err, 256) == 0,
	   "[s3] domains: a list of names: %s", err);
	const char *bad_domains[] = {"s3.example.com:9000",
				     "http://s3.example.com",
				     "10.0.0.5",
				     "fd00::5",
				     ".example.com",
				     "a b"};
	for (size_t i = 0; i < sizeof(bad_domains) / sizeof(bad_domains[0]); i++) {
		char toml[128];
		snprintf(toml, sizeof(toml), "[s3]\ndomains = [\"%s\"]\n", bad_domains[i]);
		err[0] = 0;
		ok(parse(c, toml, err) == 0 && ol_config_validate(c, err, 256) == -EINVAL &&
		       strstr(err, "s3.domains"),
		   "[s3] domains = [\"%s\"] refused: %s", bad_domains[i], err);
	}
	ok(parse(c, "set_drive_count = \"4\"\n", err) == -EINVAL &&
	       strstr(err, "set_drive_count = 4 (no quotes)"),
	   "a quoted number says what to write: %s", err);
}

static void
test_overrides(void)
{
	struct ol_config c;
	char err[256];
	ol_config_default(&c);
	ok(ol_config_set(&c, "s3-addr", "127.0.0.1:1234", err, sizeof(err)) == 0 &&
	       strcmp(c.s3_addr, "127.0.0.1:1234") == 0,
	   "--s3-addr override");
	ok(ol_config_set(&c, "kv.dram_bytes", "2GiB", err, sizeof(err)) == 0 &&
	       c.kv_dram_bytes == 2ull << 30,
	   "--kv.dram_bytes with a unit");
	ok(ol_config_set(&c, "data_dirs", "x,y", err, sizeof(err)) == 0 && c.n_data_dirs == 2,
	   "--data_dirs list");
	ok(ol_config_set(&c, "nonsense", "1", err, sizeof(err)) == -EINVAL, "unknown option");
	uint64_t v;
	ok(ol_parse_size("4 GiB", &v) == 0 && v == 4ull << 30, "size with space");
	ok(ol_parse_size("12q", &v) == -EINVAL, "bad size suffix");
	char host[64];
	unsigned port;
	ok(ol_config_split_addr("[::1]:9000", host, sizeof(host), &port) == 0 &&
	       strcmp(host, "::1") == 0 && port == 9000,
	   "ipv6 address");
	ok(ol_config_split_addr("host:99999", host, sizeof(host), &port) == -EINVAL, "bad port");
	ol_config_default(&c);
	ok(strcmp(ol_config_kv_listen(&c), "127.0.0.1:9400") == 0, "default KV address");
	/* [cluster] advertise replaces a wildcard host in what a node registers */
	char buf[96];
	ok(strcmp(ol_config_advertised(&c, "0.0.0.0:9000", buf, sizeof(buf)), "0.0.0.0:9000") == 0,
	   "no advertise: the address as configured");
	ok(ol_config_set(&c, "cluster.advertise", "10.0.0.5", err, sizeof(err)) == 0,
	   "--cluster.advertise");
	ok(strcmp(ol_config_advertised(&c, "0.0.0.0:9000", buf, sizeof(buf)), "10.0.0.5:9000") ==
		   0 &&
	       strcmp(ol_config_advertised(&c, "[::]:9001", buf, sizeof(buf)), "10.0.0.5:9001") ==
		   0 &&
	       strcmp(ol_config_advertised(&c, ":9002", buf, sizeof(buf)), "10.0.0.5:9002") == 0,
	   "wildcards (0.0.0.0, ::, none) become the advertised host");
	ok(strcmp(ol_config_advertised(&c, "127.0.0.1:9000", buf, sizeof(buf)), "127.0.0.1:9000") ==
	       0,
	   "a specific address is kept");
	ol_config_set(&c, "cluster.advertise", "fd00::5", err, sizeof(err));
	ok(strcmp(ol_config_advertised(&c, "0.0.0.0:9000", buf, sizeof(buf)), "[fd00::5]:9000") ==
	       0,
	   "an IPv6 advertise is bracketed");
	ol_config_set(&c, "cluster.advertise", "10.0.0.5:9000", err, sizeof(err));
	ok(ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "cluster.advertise"),
	   "advertise with a port is refused: %s", err);
}

/* [cluster] plane_transport: the plane address a node registers names its transport */
static void
test_plane_transport(void)
{
	struct ol_config c;
	char err[256], buf[300];
	ol_config_default(&c);
	ok(strcmp(c.cluster_plane_transport, "tcp") == 0 && !ol_config_plane_scheme(&c)[0] &&
	       strcmp(ol_config_plane_addr(&c, buf, sizeof(buf)), "127.0.0.1:9100") == 0,
	   "default: tcp, the plane address as rpc_addr");
	ok(ol_config_set(&c, "cluster.plane_transport", "ucx", err, sizeof(err)) == 0 &&
	       strcmp(ol_config_plane_addr(&c, buf, sizeof(buf)), "ucx://127.0.0.1:9100") == 0,
	   "ucx: registered as ucx://%s", c.rpc_addr);
	ol_config_set(&c, "rpc_addr", "0.0.0.0:9100", err, sizeof(err));
	ol_config_set(&c, "cluster.advertise", "10.0.0.5", err, sizeof(err));
	ok(ol_config_set(&c, "cluster.plane_transport", "rdma", err, sizeof(err)) == 0 &&
	       strcmp(ol_config_plane_addr(&c, buf, sizeof(buf)), "ucx://10.0.0.5:9100") == 0 &&
	       strcmp(ol_config_plane_scheme(&c), "ucx://") == 0,
	   "rdma is ucx, with the advertised host (%s)", buf);
	ok(ol_config_set(&c, "cluster.plane_transport", "verbs", err, sizeof(err)) == -EINVAL,
	   "another transport is refused: %s", err);
}

/* What ol_config_print writes (openlaked --print-config) into a string (malloc'd). */
static char *
printed(const struct ol_config *c)
{
	FILE *tf = tmpfile();
	if (!tf)
		return NULL;
	ol_config_print(c, fileno(tf), true);
	long n = ftell(tf);
	char *buf = NULL;
	if (n > 0 && fseek(tf, 0, SEEK_SET) == 0 && (buf = calloc(1, (size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, tf) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(tf);
	return buf;
}

/* --print-config's output is a config that loads back to the same settings: every table once
 * (the key table has top-level keys after a table's), the arrays of tables after them. */
static void
test_print_loads_back(void)
{
	struct ol_config c, d;
	char err[256] = "";
	const char *t = "self_id = 1\n"
			"data_dirs = [\"a\", \"b\", \"c\", \"d\"]\n"
			"rpc_addr = \"127.0.0.1:9100\"\n"
			"http_max_conns = 77\nhttp_max_inflight = 33\n"
			"[[nodes]]\nid = 1\nrpc_addr = \"h:1\"\ndisk_count = 4\n"
			"[[credentials]]\naccess_key = \"ak\"\nsecret_key = \"s\\\"k\"\n"
			"[admin]\nstatus_auth = false\n"
			"[storage]\nblock_size = \"2MiB\"\nfsync = false\n"
			"[kv]\ndram_bytes = 1_073_741_824\n";
	int rc = parse(&c, t, err);
	ok(rc == 0, "the config to print parses (%s)", err);
	char *one = printed(&c);
	ok(one != NULL, "printed");
	if (!one)
		return;
	ol_config_default(&d);
	rc = ol_config_parse(&d, "t.toml", one, strlen(one), err, sizeof(err));
	ok(rc == 0, "what --print-config prints parses (%s)", err);
	ok(d.http_max_conns == 77 && d.http_max_inflight == 33 && !d.admin_status_auth &&
	       d.block_size == 2u << 20 && !d.fsync && d.kv_dram_bytes == 1ull << 30,
	   "with the same top-level and table values");
	ok(d.n_creds == 1 && strcmp(d.creds[0].secret_key, "s\"k") == 0 && d.n_nodes == 1 &&
	       d.nodes[0].disk_count == 4 && d.n_data_dirs == 4 && !strcmp(d.data_dirs[3], "d"),
	   "and the same arrays");
	char *two = printed(&d);
	ok(two && strcmp(one, two) == 0, "printed again: the same text");
	free(one);
	free(two);
}

int
main(int argc, char **argv)
{
	test_shipped(argc > 1 ? argv[1] : "configs");
	test_storage_values();
	test_errors();
	test_overrides();
	test_kv_dram_and_console();
	test_plane_transport();
	test_print_loads_back();
	tap_done();
}
