/* io/topo.h - where things are on this host: NUMA nodes and their CPUs, the NUMA node of a
 * network interface, of the block device under a path and of each NVIDIA GPU, and where the
 * per-core loops go (which CPU each runs on, which loops take a NIC's connections).
 *
 * Library grade (no logging, no abort; 0 or -errno), over hwloc (Debian libhwloc-dev). A
 * topology is read once (ol_topo_open: this host, with its PCI devices; or a synthetic one for
 * tests) and is then immutable: any thread may query it, ol_topo_free ends it.
 *
 * NUMA nodes and CPUs are named by the kernel's numbers (the os_index of hwloc): node 1 is
 * /sys/devices/system/node/node1, CPU 5 is what sched_setaffinity calls 5. A device's node is
 * that of the nearest non-I/O object above it in hwloc's tree (the PCI bus's locality): a
 * device there whose locality spans several nodes, and a device that is not on a PCI bus
 * (loopback, bridges, veth, tmpfs, overlay), has none: -ENODEV. */
#ifndef OL_IO_TOPO_H
#define OL_IO_TOPO_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

struct ol_topo;

/* This host, with its PCI and OS devices (network interfaces, block devices, GPUs).
 * 0, -ENOMEM, or -errno from hwloc. Any thread. */
int ol_topo_open(struct ol_topo **out);
/* A synthetic topology in hwloc's syntax, e.g. "package:2 numa:1 core:4 pu:1" (2 sockets, a
 * NUMA node each, 8 CPUs numbered 0-7): for tests of the placement choice. No devices.
 * 0, -EINVAL (bad description), -ENOMEM. */
int ol_topo_open_synthetic(const char *desc, struct ol_topo **out);
void ol_topo_free(struct ol_topo *t);

/* NUMA nodes (at least 1: a host without NUMA is one node, 0). */
unsigned ol_topo_nodes(const struct ol_topo *t);
/* The os index of the i-th NUMA node (i < ol_topo_nodes), and its CPUs as a list ("0-3,8"),
 * NUL-terminated in cpus[cap]. 0, -ENOENT (no such node), -ENOSPC (cap too small). */
int ol_topo_node(const struct ol_topo *t, unsigned i, unsigned *os_index, char *cpus, size_t cap);
/* The NUMA node of CPU cpu, or -ENOENT when the topology has no such CPU. */
int ol_topo_cpu_node(const struct ol_topo *t, unsigned cpu);

/* The NUMA node of network interface ifname ("eth0"): >= 0; -ENODEV when it has no PCI
 * locality (virtual, loopback) or the host's topology was read without devices. */
int ol_topo_netdev_node(const struct ol_topo *t, const char *ifname);

/* The network interface that holds address host ("10.0.0.5", "::1"; no port), from
 * getifaddrs: its name in ifname[cap]. 0; -EADDRNOTAVAIL for a wildcard (0.0.0.0, ::, "")
 * or an address no interface holds; -EINVAL for something that is not an IP address. Does not
 * need a topology (and reads no DNS). */
int ol_topo_addr_ifname(const char *host, char *ifname, size_t cap);

/* The device under path (a data dir): dev[cap] gets its block device's name ("nvme0n1",
 * "vda": the whole disk, not the partition; for a btrfs, whose device number is anonymous,
 * the disk its mount's source names) or, for a file system without one, its type and source
 * from mountinfo ("tmpfs", "overlay"), or "MAJ:MIN" when neither sysfs nor mountinfo knows
 * the number; *node its NUMA node, or -1 when it has none (see above) or it is not known.
 * 0, or -errno from stat. */
int ol_topo_path_dev(const struct ol_topo *t, const char *path, char *dev, size_t cap, int *node);

/* NVIDIA GPUs (PCI vendor 0x10de, display or 3D controller class). */
struct ol_topo_gpu {
	char pci[16]; /* bus id, "0000:3b:00.0" */
	int node;     /* NUMA node, -1 when none */
};
/* Fills up to cap entries of out; returns how many GPUs there are (may exceed cap). */
unsigned ol_topo_gpus(const struct ol_topo *t, struct ol_topo_gpu *out, unsigned cap);

/* ---- placement of the per-core loops ---- */

/* The CPU of each of n loops: loop i runs on the i-th CPU of allowed (the process's affinity
 * mask: taskset and cgroups are respected), wrapping around when n exceeds them. cpus[n].
 * 0, or -EINVAL when allowed holds no CPU. Pure (no topology needed). */
int ol_topo_loop_cpus(const cpu_set_t *allowed, unsigned n, int *cpus);

/* Which loops accept the connections of a listener whose NIC is on node nic_node (-1: none
 * known, or a wildcard address): on a host of several NUMA nodes with a loop pinned on
 * nic_node, the loops on that node only (so a connection's work stays on its NIC's socket);
 * else every loop. cpus[i] < 0 marks an unpinned loop. accept[n] gets the choice; returns how
 * many accept (>= 1 when n >= 1). */
unsigned ol_topo_accept_loops(const struct ol_topo *t, const int *cpus, unsigned n, int nic_node,
			      bool *accept);

/* ---- the locality report (the status document's "locality", `openlake node info`) ---- */

struct ol_topo_loop {
	const char *name; /* "kv-loop-0" */
	int cpu;	  /* pinned CPU, -1 = not pinned */
	bool accepts;	  /* takes the TCP listener's connections */
};
struct ol_topo_listener {
	const char *service; /* "s3", "kv" */
	const char *addr;    /* as configured, "10.0.0.5:9400" */
};
struct ol_topo_dir {
	const char *service; /* "s3" (a data dir), "kv" (the KV pool's spill dir) */
	const char *path;
};
struct ol_topo_report {
	const char *pin_threads;  /* the config's pin_threads */
	const char *loop_service; /* what the loops serve ("kv"): only its drives and NICs can
				     be on the wrong node (other services' threads are unpinned) */
	const struct ol_topo_loop *loops;
	unsigned n_loops;
	const struct ol_topo_dir *dirs;
	unsigned n_dirs;
	const struct ol_topo_listener *listeners;
	unsigned n_listeners;
	/* optional: called with each warning as it is found (the daemon logs them) */
	void (*warn)(void *arg, const char *msg);
	void *warn_arg;
};

/* One JSON object (malloc'd, NUL-terminated, no newline, caller frees) describing r on this
 * topology: "nodes" [{node, cpus}], "pin_threads", "loops" [{name, cpu, node, accepts}],
 * "drives" [{service, path, device, node}], "nics" [{service, addr, ifname, node}], "gpus"
 * [{pci, node}], "warnings" [strings]: on a host of several nodes, a drive of loop_service on
 * a node where no pinned loop runs, a NIC of loop_service on one where no accepting loop
 * runs, and pin_threads "off". 0 or -ENOMEM. */
int ol_topo_report_json(const struct ol_topo *t, const struct ol_topo_report *r, char **out);

#endif
