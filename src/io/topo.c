/* io/topo.c - host topology over hwloc (see topo.h for the contract). */
#include "io/topo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hwloc.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define TOPO_MAX_NODES 1024

struct ol_topo {
	hwloc_topology_t h;
};

static int
topo_load(struct ol_topo **out, const char *synthetic)
{
	*out = NULL;
	struct ol_topo *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	if (hwloc_topology_init(&t->h) < 0) {
		free(t);
		return -ENOMEM;
	}
	int rc = 0;
	if (synthetic)
		rc = hwloc_topology_set_synthetic(t->h, synthetic) < 0 ? -EINVAL : 0;
	else /* PCI devices that matter (storage, network, display) and their OS devices; every
	      * CPU, also those outside this process's mask (the nodes' lists are the host's) */
		rc = hwloc_topology_set_io_types_filter(t->h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) <
				 0 ||
			     hwloc_topology_set_flags(t->h,
						      HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0
			 ? -errno
			 : 0;
	if (rc == 0 && hwloc_topology_load(t->h) < 0)
		rc = errno ? -errno : -EIO;
	if (rc) {
		hwloc_topology_destroy(t->h);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int
ol_topo_open(struct ol_topo **out)
{
	return topo_load(out, NULL);
}

int
ol_topo_open_synthetic(const char *desc, struct ol_topo **out)
{
	return topo_load(out, desc);
}

void
ol_topo_free(struct ol_topo *t)
{
	if (!t)
		return;
	hwloc_topology_destroy(t->h);
	free(t);
}

unsigned
ol_topo_nodes(const struct ol_topo *t)
{
	int n = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE);
	return n > 0 ? (unsigned)n : 1;
}

int
ol_topo_node(const struct ol_topo *t, unsigned i, unsigned *os_index, char *cpus, size_t cap)
{
	hwloc_obj_t o = hwloc_get_obj_by_type(t->h, HWLOC_OBJ_NUMANODE, i);
	hwloc_const_cpuset_t set = o ? o->cpuset : NULL;
	if (!o && i == 0) /* no NUMA node object at all: the whole machine is node 0 */
		set = hwloc_topology_get_topology_cpuset(t->h);
	if (!set)
		return -ENOENT;
	*os_index = o ? o->os_index : 0;
	int n = hwloc_bitmap_list_snprintf(cpus, cap, set);
	return n < 0 ? -EINVAL : (size_t)n >= cap ? -ENOSPC : 0;
}

/* The one node of a nodeset, or -ENODEV for none or several. */
static int
single_node(hwloc_const_nodeset_t ns)
{
	if (!ns || hwloc_bitmap_weight(ns) != 1)
		return -ENODEV;
	return hwloc_bitmap_first(ns);
}

int
ol_topo_cpu_node(const struct ol_topo *t, unsigned cpu)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t->h, cpu);
	if (!pu)
		return -ENOENT;
	int n = single_node(pu->nodeset);
	return n < 0 ? -ENOENT : n;
}

/* The node of an I/O object: that of the first non-I/O ancestor (its PCI locality). */
static int
io_node(const struct ol_topo *t, hwloc_obj_t o)
{
	hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t->h, o);
	return a ? single_node(a->nodeset) : -ENODEV;
}

static hwloc_obj_t
find_osdev(const struct ol_topo *t, hwloc_obj_osdev_type_t type, const char *name)
{
	for (hwloc_obj_t o = hwloc_get_next_osdev(t->h, NULL); o; o = hwloc_get_next_osdev(t->h, o))
		if (o->attr->osdev.type == type && o->name && strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

int
ol_topo_netdev_node(const struct ol_topo *t, const char *ifname)
{
	hwloc_obj_t o = find_osdev(t, HWLOC_OBJ_OSDEV_NETWORK, ifname);
	return o ? io_node(t, o) : -ENODEV;
}

int
ol_topo_addr_ifname(const char *host, char *ifname, size_t cap)
{
	unsigned char a[16];
	int fam = inet_pton(AF_INET, host, a) == 1    ? AF_INET
		  : inet_pton(AF_INET6, host, a) == 1 ? AF_INET6
						      : 0;
	if (!*host || strcmp(host, "*") == 0)
		return -EADDRNOTAVAIL;
	if (!fam)
		return -EINVAL;
	size_t alen = fam == AF_INET ? 4 : 16;
	static const unsigned char zero[16];
	if (memcmp(a, zero, alen) == 0)
		return -EADDRNOTAVAIL; /* a wildcard: every interface */
	struct ifaddrs *ifs;
	if (getifaddrs(&ifs) < 0)
		return -errno;
	int rc = -EADDRNOTAVAIL;
	for (struct ifaddrs *i = ifs; i && rc; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;
		if (!sa || sa->sa_family != fam)
			continue;
		const void *b = fam == AF_INET
				    ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
				    : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (memcmp(a, b, alen) == 0)
			rc = snprintf(ifname, cap, "%s", i->ifa_name) < (int)cap ? 0 : -ENOSPC;
	}
	freeifaddrs(ifs);
	return rc;
}

/* The whole disk's name for block device dev: /sys/dev/block/MAJ:MIN names the partition or
 * the disk; a partition's directory sits inside its disk's. 0 or -errno. */
static int
block_name(dev_t dev, char *name, size_t cap)
{
	char link[64], real[PATH_MAX], part[PATH_MAX + 16];
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	if (!realpath(link, real))
		return -errno;
	snprintf(part, sizeof(part), "%s/partition", real);
	char *slash = strrchr(real, '/');
	if (slash && access(part, F_OK) == 0) { /* a partition: its parent is the disk */
		*slash = 0;
		slash = strrchr(real, '/');
	}
	if (!slash)
		return -ENOENT;
	return snprintf(name, cap, "%s", slash + 1) < (int)cap ? 0 : -ENOSPC;
}

/* For a file system without a block device number of its own (major 0: tmpfs, overlay, and
 * btrfs, whose st_dev is anonymous): "TYPE" or "TYPE:SOURCE" of the mount with that device
 * number, from /proc/self/mountinfo, and in *blk the device its source names when that is a
 * block device (btrfs on /dev/nvme0n1p2), else 0. 0 or -ENOENT. */
static int
mount_name(dev_t dev, char *name, size_t cap, dev_t *blk)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[4096];
	int rc = -ENOENT;
	*blk = 0;
	while (rc && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		char type[64], src[256];
		unsigned ma, mi;
		struct stat st;
		if (sscanf(line, "%*s %*s %u:%u", &ma, &mi) != 2 || ma != major(dev) ||
		    mi != minor(dev) || !sep || sscanf(sep + 3, "%63s %255s", type, src) != 2)
			continue;
		bool same = strcmp(type, src) == 0 || strcmp(src, "none") == 0;
		int n = same ? snprintf(name, cap, "%s", type)
			     : snprintf(name, cap, "%s:%s", type, src);
		rc = n < (int)cap ? 0 : -ENOSPC;
		if (strncmp(src, "/dev/", 5) == 0 && stat(src, &st) == 0 && S_ISBLK(st.st_mode))
			*blk = st.st_rdev;
	}
	fclose(f);
	return rc;
}

/* The node of block device name: its hwloc OS device; a device-mapper or md device (no PCI
 * parent of its own) takes the node of its first slave that has one. */
static int
block_node(const struct ol_topo *t, const char *name, int depth)
{
	hwloc_obj_t o = find_osdev(t, HWLOC_OBJ_OSDEV_BLOCK, name);
	if (o)
		return io_node(t, o);
	char path[300];
	snprintf(path, sizeof(path), "/sys/block/%s/slaves", name);
	DIR *d = depth < 4 ? opendir(path) : NULL;
	int node = -ENODEV;
	for (struct dirent *e; d && node < 0 && (e = readdir(d));)
		if (e->d_name[0] != '.')
			node = block_node(t, e->d_name, depth + 1);
	if (d)
		closedir(d);
	return node;
}

int
ol_topo_path_dev(const struct ol_topo *t, const char *path, char *dev, size_t cap, int *node)
{
	struct stat st;
	dev_t blk = 0;
	*node = -1;
	if (stat(path, &st) < 0)
		return -errno;
	if (major(st.st_dev))
		blk = st.st_dev;
	else if (mount_name(st.st_dev, dev, cap, &blk) < 0) /* a number from another namespace */
		snprintf(dev, cap, "%u:%u", major(st.st_dev), minor(st.st_dev));
	if (blk && block_name(blk, dev, cap) == 0) {
		int n = block_node(t, dev, 0);
		*node = n < 0 ? -1 : n;
	} else if (major(st.st_dev)) { /* sysfs does not know it */
		snprintf(dev, cap, "%u:%u", major(st.st_dev), minor(st.st_dev));
	}
	return 0;
}

static bool
is_gpu(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;
	return o->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302);
}

unsigned
ol_topo_gpus(const struct ol_topo *t, struct ol_topo_gpu *out, unsigned cap)
{
	unsigned n = 0;
	for (hwloc_obj_t o = hwloc_get_next_pcidev(t->h, NULL); o;
	     o = hwloc_get_next_pcidev(t->h, o)) {
		if (!is_gpu(o))
			continue;
		if (n < cap) {
			const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
			snprintf(out[n].pci, sizeof(out[n].pci), "%04x:%02x:%02x.%01x", a->domain,
				 a->bus, a->dev, a->func);
			int nd = io_node(t, o);
			out[n].node = nd < 0 ? -1 : nd;
		}
		n++;
	}
	return n;
}

/* ---- placement ---- */

int
ol_topo_loop_cpus(const cpu_set_t *allowed, unsigned n, int *cpus)
{
	int list[CPU_SETSIZE];
	unsigned k = 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, allowed))
			list[k++] = c;
	if (k == 0)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		cpus[i] = list[i % k];
	return 0;
}

unsigned
ol_topo_accept_loops(const struct ol_topo *t, const int *cpus, unsigned n, int nic_node,
		     bool *accept)
{
	unsigned on_node = 0;
	bool narrow = nic_node >= 0 && ol_topo_nodes(t) > 1;
	for (unsigned i = 0; i < n; i++) {
		accept[i] =
		    narrow && cpus[i] >= 0 && ol_topo_cpu_node(t, (unsigned)cpus[i]) == nic_node;
		on_node += accept[i];
	}
	if (on_node)
		return on_node;
	for (unsigned i = 0; i < n; i++) /* no loop on the NIC's node: every loop takes its share */
		accept[i] = true;
	return n;
}

/* ---- the locality report ---- */

static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void
json_node(FILE *f, int node)
{
	if (node < 0)
		fputs("null", f);
	else
		fprintf(f, "%d", node);
}

/* Whether a pinned loop (an accepting one, with only_accepting) runs on node; *any: whether
 * any loop is pinned at all. */
static bool
node_served(const struct ol_topo *t, const struct ol_topo_report *r, int node, bool only_accepting,
	    bool *any)
{
	bool hit = false;
	*any = false;
	for (unsigned i = 0; i < r->n_loops; i++) {
		const struct ol_topo_loop *lp = &r->loops[i];
		if (lp->cpu < 0 || (only_accepting && !lp->accepts))
			continue;
		*any = true;
		hit |= ol_topo_cpu_node(t, (unsigned)lp->cpu) == node;
	}
	return hit;
}

/* The warning for a device on node that the loops do not serve from there, or none (0). */
static int
locality_warning(const struct ol_topo *t, const struct ol_topo_report *r, const char *what,
		 int node, bool only_accepting, char *buf, size_t cap)
{
	bool any;
	if (node < 0 || ol_topo_nodes(t) < 2 || node_served(t, r, node, only_accepting, &any) ||
	    !any)
		return 0;
	snprintf(buf, cap, "%s is on NUMA node %d, but no %sloop runs on that node", what, node,
		 only_accepting ? "accepting " : "");
	if (r->warn)
		r->warn(r->warn_arg, buf);
	return 1;
}

/* "host:port" or "[v6]:port" -> host (no brackets). */
static void
addr_host(const char *addr, char *host, size_t cap)
{
	const char *end = addr[0] == '[' ? strchr(addr, ']') : strrchr(addr, ':');
	const char *start = addr[0] == '[' ? addr + 1 : addr;
	size_t n = end ? (size_t)(end - start) : strlen(start);
	snprintf(host, cap, "%.*s", (int)(n < cap ? n : cap - 1), start);
}

static void
report_nodes(const struct ol_topo *t, FILE *f)
{
	fputs("{\"nodes\":[", f);
	for (unsigned i = 0; i < ol_topo_nodes(t); i++) {
		char cpus[4096];
		unsigned os;
		if (ol_topo_node(t, i, &os, cpus, sizeof(cpus)) < 0)
			continue;
		fprintf(f, "%s{\"node\":%u,\"cpus\":", i ? "," : "", os);
		json_str(f, cpus);
		fputc('}', f);
	}
	fputs("]", f);
}

static void
report_loops(const struct ol_topo *t, const struct ol_topo_report *r, FILE *f)
{
	fputs(",\"pin_threads\":", f);
	json_str(f, r->pin_threads ? r->pin_threads : "");
	fputs(",\"loops\":[", f);
	for (unsigned i = 0; i < r->n_loops; i++) {
		const struct ol_topo_loop *lp = &r->loops[i];
		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, lp->name);
		fputs(",\"cpu\":", f);
		json_node(f, lp->cpu);
		fputs(",\"node\":", f);
		json_node(f, lp->cpu < 0 ? -1 : ol_topo_cpu_node(t, (unsigned)lp->cpu));
		fprintf(f, ",\"accepts\":%s}", lp->accepts ? "true" : "false");
	}
	fputs("]", f);
}

/* Append warning w to the array body in warn (nw so far). */
static void
add_warning(FILE *warn, unsigned *nw, const char *w)
{
	fputs((*nw)++ ? "," : "", warn);
	json_str(warn, w);
}

static bool
of_loops(const struct ol_topo_report *r, const char *service)
{
	return r->loop_service && strcmp(r->loop_service, service) == 0;
}

/* Drives; their warnings go to warn (one JSON array body, nw entries so far). */
static void
report_drives(const struct ol_topo *t, const struct ol_topo_report *r, FILE *f, FILE *warn,
	      unsigned *nw)
{
	char w[512], what[PATH_MAX + 128];
	fputs(",\"drives\":[", f);
	for (unsigned i = 0; i < r->n_dirs; i++) {
		const struct ol_topo_dir *d = &r->dirs[i];
		char dev[256] = "";
		int node = -1;
		if (ol_topo_path_dev(t, d->path, dev, sizeof(dev), &node) < 0)
			dev[0] = 0;
		fprintf(f, "%s{\"service\":", i ? "," : "");
		json_str(f, d->service);
		fputs(",\"path\":", f);
		json_str(f, d->path);
		fputs(",\"device\":", f);
		if (dev[0])
			json_str(f, dev);
		else
			fputs("null", f);
		fputs(",\"node\":", f);
		json_node(f, node);
		fputc('}', f);
		snprintf(what, sizeof(what), "drive %s (%s) of %s", d->path, dev, d->service);
		if (of_loops(r, d->service) &&
		    locality_warning(t, r, what, node, false, w, sizeof(w)))
			add_warning(warn, nw, w);
	}
	fputs("]", f);
}

/* The NICs of the listeners; warnings as above. */
static void
report_nics(const struct ol_topo *t, const struct ol_topo_report *r, FILE *f, FILE *warn,
	    unsigned *nw)
{
	char w[512], what[PATH_MAX + 128];
	fputs(",\"nics\":[", f);
	for (unsigned i = 0; i < r->n_listeners; i++) {
		const struct ol_topo_listener *l = &r->listeners[i];
		char host[256], ifn[IF_NAMESIZE + 1] = "";
		addr_host(l->addr, host, sizeof(host));
		int node = ol_topo_addr_ifname(host, ifn, sizeof(ifn)) == 0
			       ? ol_topo_netdev_node(t, ifn)
			       : -1;
		node = node < 0 ? -1 : node;
		fprintf(f, "%s{\"service\":", i ? "," : "");
		json_str(f, l->service);
		fputs(",\"addr\":", f);
		json_str(f, l->addr);
		fputs(",\"ifname\":", f);
		if (ifn[0])
			json_str(f, ifn);
		else
			fputs("null", f); /* a wildcard or an address no interface holds */
		fputs(",\"node\":", f);
		json_node(f, node);
		fputc('}', f);
		snprintf(what, sizeof(what), "NIC %s of %s %s", ifn, l->service, l->addr);
		if (of_loops(r, l->service) &&
		    locality_warning(t, r, what, node, true, w, sizeof(w)))
			add_warning(warn, nw, w);
	}
	fputs("]", f);
}

static void
report_gpus(const struct ol_topo *t, FILE *f)
{
	struct ol_topo_gpu g[64];
	unsigned n = ol_topo_gpus(t, g, 64);
	fputs(",\"gpus\":[", f);
	for (unsigned i = 0; i < n && i < 64; i++) {
		fprintf(f, "%s{\"pci\":", i ? "," : "");
		json_str(f, g[i].pci);
		fputs(",\"node\":", f);
		json_node(f, g[i].node);
		fputc('}', f);
	}
	fputs("]", f);
}

int
ol_topo_report_json(const struct ol_topo *t, const struct ol_topo_report *r, char **out)
{
	char *buf = NULL, *wbuf = NULL;
	size_t len = 0, wlen = 0;
	FILE *f = open_memstream(&buf, &len);
	FILE *warn = open_memstream(&wbuf, &wlen);
	int rc = 0;
	*out = NULL;
	if (!f || !warn) {
		rc = -ENOMEM;
		goto out;
	}
	report_nodes(t, f);
	report_loops(t, r, f);
	unsigned nw = 0;
	report_drives(t, r, f, warn, &nw);
	report_nics(t, r, f, warn, &nw);
	report_gpus(t, f);
	if (ol_topo_nodes(t) > 1 && r->pin_threads && strcmp(r->pin_threads, "off") == 0) {
		const char *m =
		    "threads are not pinned (pin_threads = \"off\") on a host of several "
		    "NUMA nodes: a connection's work may run on any node";
		add_warning(warn, &nw, m);
		if (r->warn)
			r->warn(r->warn_arg, m);
	}
	if (fflush(warn) != 0) {
		rc = -ENOMEM;
		goto out;
	}
	fprintf(f, ",\"warnings\":[%s]}", wbuf ? wbuf : "");
	if (fflush(f) != 0 || ferror(f))
		rc = -ENOMEM;
out:
	if (warn)
		fclose(warn);
	free(wbuf);
	if (f)
		fclose(f);
	if (rc == 0 && buf)
		*out = buf;
	else
		free(buf);
	return rc ? rc : *out ? 0 : -ENOMEM;
}
