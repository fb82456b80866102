/* test_topo.c - the host topology (src/io/topo.c) (TAP): this host as hwloc reads it, checked
 * against what the kernel says in sysfs (nodes and their CPUs, a NIC's and a drive's PCI
 * locality, NVIDIA GPUs), and the loops' placement on a synthetic 2-socket host, which this
 * one-node machine cannot show. topo.c is included to reach its warning rule. */
#include "../../src/io/topo.c"
#include "tap.h"

#include <jansson.h>
#include <sys/stat.h>

/* The first line of a small sysfs file, without its newline; "" when unreadable. */
static void
read_line(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	out[0] = 0;
	if (f) {
		if (!fgets(out, (int)cap, f))
			out[0] = 0;
		fclose(f);
	}
	out[strcspn(out, "\n")] = 0;
}

/* ---- this host ---- */

static void
test_nodes(const struct ol_topo *t)
{
	unsigned want = 0;
	char path[128], list[4096], cpus[4096];
	for (unsigned n = 0; n < 1024; n++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u", n);
		want += access(path, F_OK) == 0;
	}
	ok(ol_topo_nodes(t) == (want ? want : 1), "NUMA nodes: %u (sysfs: %u)", ol_topo_nodes(t),
	   want);
	for (unsigned i = 0; i < ol_topo_nodes(t); i++) {
		unsigned os = 99;
		int rc = ol_topo_node(t, i, &os, cpus, sizeof(cpus));
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/cpulist", os);
		read_line(path, list, sizeof(list));
		ok(rc == 0 && (!want || strcmp(cpus, list) == 0), "node %u: CPUs %s (sysfs: %s)",
		   os, cpus, list);
	}
	ok(ol_topo_node(t, ol_topo_nodes(t), &(unsigned){0}, cpus, sizeof(cpus)) == -ENOENT,
	   "a node past the last: -ENOENT");
	ok(ol_topo_node(t, 0, &(unsigned){0}, cpus, 1) == -ENOSPC,
	   "a list that does not fit: -ENOSPC");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int bad = 0;
	for (long c = 0; c < ncpu; c++) {
		int node = ol_topo_cpu_node(t, (unsigned)c);
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/node%d", c, node);
		bad += node < 0 || (want && access(path, F_OK) != 0);
	}
	ok(bad == 0, "each of the %ld CPUs on the node sysfs links it to", ncpu);
	ok(ol_topo_cpu_node(t, 100000) == -ENOENT, "an unknown CPU: -ENOENT");
}

/* The node the kernel gives a PCI device (its numa_node, -1 when the firmware says none): on a
 * host of one node that is node 0 all the same. */
static int
sysfs_pci_node(const char *dev_dir, const struct ol_topo *t)
{
	char path[PATH_MAX + 32], v[32];
	char real[PATH_MAX];
	if (!realpath(dev_dir, real))
		return -1;
	for (char *s; (s = strrchr(real, '/')) && !strstr(s, ":");) /* up to the PCI function */
		*s = 0;
	snprintf(path, sizeof(path), "%s/numa_node", real);
	read_line(path, v, sizeof(v));
	int n = v[0] ? (int)strtol(v, NULL, 10) : -1; /* "-1" when the firmware gives none */
	return n >= 0 ? n : ol_topo_nodes(t) == 1 ? 0 : -1;
}

static void
test_nics(const struct ol_topo *t)
{
	ok(ol_topo_netdev_node(t, "lo") == -ENODEV, "loopback has no NUMA node");
	ok(ol_topo_netdev_node(t, "no-such-nic0") == -ENODEV, "an unknown interface: -ENODEV");
	DIR *d = opendir("/sys/class/net");
	unsigned pci = 0, virt = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		char link[PATH_MAX], path[PATH_MAX];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s", e->d_name);
		if (!realpath(path, link))
			continue;
		int got = ol_topo_netdev_node(t, e->d_name);
		if (strstr(link, "/devices/virtual/")) {
			virt++;
			ok(got == -ENODEV, "virtual interface %s: no NUMA node (%d)", e->d_name,
			   got);
		} else if (strstr(link, "/devices/pci")) {
			snprintf(path, sizeof(path), "/sys/class/net/%s/device", e->d_name);
			int want = sysfs_pci_node(path, t);
			pci++;
			ok(got == want, "PCI interface %s: node %d (kernel: %d)", e->d_name, got,
			   want);
		}
	}
	if (d)
		closedir(d);
	ok(virt > 0, "%u virtual and %u PCI interfaces checked", virt, pci);

	char ifn[IF_NAMESIZE + 1];
	ok(ol_topo_addr_ifname("127.0.0.1", ifn, sizeof(ifn)) == 0 && strcmp(ifn, "lo") == 0,
	   "127.0.0.1 is on lo");
	ok(ol_topo_addr_ifname("0.0.0.0", ifn, sizeof(ifn)) == -EADDRNOTAVAIL &&
	       ol_topo_addr_ifname("::", ifn, sizeof(ifn)) == -EADDRNOTAVAIL &&
	       ol_topo_addr_ifname("", ifn, sizeof(ifn)) == -EADDRNOTAVAIL,
	   "wildcards name no interface");
	ok(ol_topo_addr_ifname("192.0.2.77", ifn, sizeof(ifn)) == -EADDRNOTAVAIL,
	   "an address no interface holds (TEST-NET-1): -EADDRNOTAVAIL");
	ok(ol_topo_addr_ifname("example.com", ifn, sizeof(ifn)) == -EINVAL,
	   "a name, not an address: -EINVAL (no DNS)");
}

/* The disk the kernel puts under path: /sys/dev/block/M:m's DEVNAME, or its parent's for a
 * partition. */
static void
sysfs_disk(dev_t dev, char *name, size_t cap)
{
	char path[128], line[256];
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/partition", major(dev), minor(dev));
	bool part = access(path, F_OK) == 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%suevent", major(dev), minor(dev),
		 part ? "../" : "");
	FILE *f = fopen(path, "r");
	name[0] = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "DEVNAME=", 8) == 0)
			snprintf(name, cap, "%.*s", (int)strcspn(line + 8, "\n"), line + 8);
	if (f)
		fclose(f);
}

static void
test_paths(const struct ol_topo *t)
{
	char dir[] = "/tmp/ol-topo-XXXXXX", dev[256], want[256];
	int node = -2;
	ok(mkdtemp(dir) != NULL, "temp dir %s", dir);
	struct stat st;
	stat(dir, &st);
	ok(ol_topo_path_dev(t, dir, dev, sizeof(dev), &node) == 0,
	   "the device under %s: %s, node %d", dir, dev, node);
	if (major(st.st_dev)) {
		sysfs_disk(st.st_dev, want, sizeof(want));
		ok(strcmp(dev, want) == 0, "a block device: %s (sysfs: %s)", dev, want);
		char blk[300];
		snprintf(blk, sizeof(blk), "/sys/block/%s/device", dev);
		if (access(blk, F_OK) == 0 && find_osdev(t, HWLOC_OBJ_OSDEV_BLOCK, dev))
			ok(node == sysfs_pci_node(blk, t), "its node: %d (kernel: %d)", node,
			   sysfs_pci_node(blk, t));
	} else {
		ok(node == -1, "a file system without a block device (%s) has no node", dev);
	}
	rmdir(dir);
	ok(ol_topo_path_dev(t, "/proc", dev, sizeof(dev), &node) == 0 && strcmp(dev, "proc") == 0 &&
	       node == -1,
	   "/proc: device \"%s\", no node", dev);
	ok(ol_topo_path_dev(t, "/no/such/dir", dev, sizeof(dev), &node) == -ENOENT,
	   "a missing path: -ENOENT");
}

static void
test_gpus(const struct ol_topo *t)
{
	unsigned want = 0;
	DIR *d = opendir("/sys/bus/pci/devices");
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[PATH_MAX], v[32], c[32];
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		read_line(path, v, sizeof(v));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
		read_line(path, c, sizeof(c));
		want += strcmp(v, "0x10de") == 0 &&
			(strncmp(c, "0x0300", 6) == 0 || strncmp(c, "0x0302", 6) == 0);
	}
	if (d)
		closedir(d);
	struct ol_topo_gpu g[64];
	unsigned n = ol_topo_gpus(t, g, 64);
	ok(n == want, "NVIDIA GPUs: %u (sysfs: %u)", n, want);
	for (unsigned i = 0; i < n && i < 64; i++)
		ok(g[i].node >= -1 && strlen(g[i].pci) == 12, "GPU %s on node %d", g[i].pci,
		   g[i].node);
}

static void
test_real_report(const struct ol_topo *t)
{
	struct ol_topo_dir dirs[] = {{"s3", "/tmp"}, {"kv", "/proc"}};
	struct ol_topo_loop loops[] = {{"kv-loop-0", 0, true}, {"kv-loop-1", -1, true}};
	struct ol_topo_listener ls[] = {{"kv", "127.0.0.1:9400"}, {"s3", "0.0.0.0:9000"}};
	struct ol_topo_report r = {"auto", "kv", loops, 2, dirs, 2, ls, 2, NULL, NULL};
	char *js = NULL;
	ok(ol_topo_report_json(t, &r, &js) == 0, "report of this host: %s", js ? js : "");
	json_error_t err;
	json_t *j = js ? json_loads(js, 0, &err) : NULL;
	ok(j != NULL, "it is JSON");
	json_t *drv = json_object_get(j, "drives"), *nics = json_object_get(j, "nics");
	const char *dev = json_string_value(json_object_get(json_array_get(drv, 1), "device"));
	ok(json_array_size(drv) == 2 && dev && strcmp(dev, "proc") == 0, "drives: /proc on proc");
	const char *ifn = json_string_value(json_object_get(json_array_get(nics, 0), "ifname"));
	ok(ifn && strcmp(ifn, "lo") == 0 &&
	       json_is_null(json_object_get(json_array_get(nics, 0), "node")) &&
	       json_is_null(json_object_get(json_array_get(nics, 1), "ifname")),
	   "NICs: 127.0.0.1 on lo without a node, 0.0.0.0 on no one interface");
	json_t *l1 = json_array_get(json_object_get(j, "loops"), 1);
	ok(json_is_null(json_object_get(l1, "cpu")) && json_is_null(json_object_get(l1, "node")),
	   "an unpinned loop: cpu and node null");
	ok(json_array_size(json_object_get(j, "warnings")) == 0 || ol_topo_nodes(t) > 1,
	   "one node: no warning");
	json_decref(j);
	free(js);
}

static void
count_warn(void *arg, const char *msg)
{
	(void)msg;
	(*(int *)arg)++;
}

/* ---- a synthetic 2-socket host: 8 CPUs, node 0 = 0-3, node 1 = 4-7 ---- */

static void
test_placement(void)
{
	struct ol_topo *t = NULL, *one = NULL;
	ok(ol_topo_open_synthetic("package:2 numa:1 core:4 pu:1", &t) == 0 && ol_topo_nodes(t) == 2,
	   "synthetic 2-socket host");
	ok(ol_topo_open_synthetic("bogus:2", &one) == -EINVAL, "a bad description: -EINVAL");
	char cpus[64];
	unsigned os;
	ok(ol_topo_node(t, 1, &os, cpus, sizeof(cpus)) == 0 && os == 1 && strcmp(cpus, "4-7") == 0,
	   "node 1 holds CPUs 4-7");
	ok(ol_topo_cpu_node(t, 5) == 1 && ol_topo_cpu_node(t, 3) == 0, "CPU 5 on node 1, 3 on 0");

	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	int got[8];
	ok(ol_topo_loop_cpus(&allowed, 2, got) == -EINVAL, "no CPU allowed: -EINVAL");
	for (int c = 0; c < 8; c++)
		CPU_SET(c, &allowed);
	ok(ol_topo_loop_cpus(&allowed, 8, got) == 0 && got[0] == 0 && got[7] == 7,
	   "loop N on CPU N");
	CPU_ZERO(&allowed); /* taskset -c 1,3,5,6 */
	CPU_SET(1, &allowed);
	CPU_SET(3, &allowed);
	CPU_SET(5, &allowed);
	CPU_SET(6, &allowed);
	ok(ol_topo_loop_cpus(&allowed, 6, got) == 0 && got[0] == 1 && got[1] == 3 && got[2] == 5 &&
	       got[3] == 6 && got[4] == 1 && got[5] == 3,
	   "CPUs outside the mask skipped, wrapping: 1 3 5 6 1 3");

	int all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	bool acc[8];
	ok(ol_topo_accept_loops(t, all, 8, 1, acc) == 4 && !acc[0] && !acc[3] && acc[4] && acc[7],
	   "NIC on node 1: loops 4-7 accept, 0-3 do not");
	ok(ol_topo_accept_loops(t, all, 8, 0, acc) == 4 && acc[0] && acc[3] && !acc[4],
	   "NIC on node 0: loops 0-3 accept");
	ok(ol_topo_accept_loops(t, all, 8, -1, acc) == 8 && acc[4] && acc[0],
	   "no NIC node (wildcard, virtual): every loop accepts");
	int low[4] = {0, 1, 2, 3};
	ok(ol_topo_accept_loops(t, low, 4, 1, acc) == 4 && acc[0] && acc[3],
	   "NIC on node 1 but every loop on node 0 (taskset): all of them accept");
	int unpinned[3] = {-1, -1, -1};
	ok(ol_topo_accept_loops(t, unpinned, 3, 1, acc) == 3, "unpinned loops all accept");

	ok(ol_topo_open_synthetic("core:4 pu:1", &one) == 0 && ol_topo_nodes(one) == 1,
	   "synthetic one-node host");
	ok(ol_topo_accept_loops(one, all, 4, 0, acc) == 4 && acc[0] && acc[3],
	   "one node: every loop accepts");

	/* warnings: loops pinned on node 0 only, the accepting ones too */
	struct ol_topo_loop loops[] = {{"kv-loop-0", 0, true}, {"kv-loop-1", 1, true}};
	int warned = 0;
	struct ol_topo_report r = {"auto", "kv", loops, 2, NULL, 0, NULL, 0, count_warn, &warned};
	char w[512];
	ok(of_loops(&r, "kv") && !of_loops(&r, "s3"),
	   "only the loops' own service (kv) is checked: S3's threads are not pinned");
	ok(locality_warning(t, &r, "drive /d1 (nvme1n1)", 1, false, w, sizeof(w)) == 1 &&
	       strstr(w, "node 1"),
	   "a drive on node 1, loops on node 0: \"%s\"", w);
	ok(locality_warning(t, &r, "drive /d0", 0, false, w, sizeof(w)) == 0,
	   "a drive on the loops' node: no warning");
	ok(locality_warning(t, &r, "drive /d", -1, false, w, sizeof(w)) == 0,
	   "a drive without a node: no warning");
	ok(locality_warning(one, &r, "drive /d", 0, false, w, sizeof(w)) == 0,
	   "one-node host: no warning");
	loops[0].cpu = 4; /* loop 0 on node 1 but not accepting */
	loops[0].accepts = false;
	ok(locality_warning(t, &r, "NIC eth1", 1, true, w, sizeof(w)) == 1 &&
	       locality_warning(t, &r, "drive /d1", 1, false, w, sizeof(w)) == 0,
	   "a NIC needs an accepting loop on its node, a drive any loop");
	loops[0].cpu = loops[1].cpu = -1;
	ok(locality_warning(t, &r, "drive /d1", 1, false, w, sizeof(w)) == 0,
	   "unpinned loops: no per-device warning");

	char *js = NULL;
	r.pin_threads = "off";
	warned = 0;
	ok(ol_topo_report_json(t, &r, &js) == 0 &&
	       strstr(js, "\"warnings\":[\"threads are not pinned"),
	   "pin_threads = off on 2 nodes: one warning");
	ok(warned == 1, "the warning also went to the callback");
	json_t *j = json_loads(js, 0, NULL);
	ok(j && json_array_size(json_object_get(j, "nodes")) == 2 &&
	       strcmp(json_string_value(
			  json_object_get(json_array_get(json_object_get(j, "nodes"), 1), "cpus")),
		      "4-7") == 0,
	   "report: 2 nodes, node 1 with CPUs 4-7");
	json_decref(j);
	free(js);
	ol_topo_free(one);
	ol_topo_free(t);
}

int
main(void)
{
	struct ol_topo *t = NULL;
	int rc = ol_topo_open(&t);
	ok(rc == 0, "this host's topology: %d", rc);
	if (rc == 0) {
		test_nodes(t);
		test_nics(t);
		test_paths(t);
		test_gpus(t);
		test_real_report(t);
		ol_topo_free(t);
	}
	test_placement();
	tap_done();
}
