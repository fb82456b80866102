/* cmd/openlake/node_locality.h - the locality lines of `openlake node info` (node_locality.c). */
#ifndef OL_CLI_NODE_LOCALITY_H
#define OL_CLI_NODE_LOCALITY_H

/* The "locality" object of the daemon's status JSON, compact (malloc'd, caller frees), or NULL
 * when the status has none (an older daemon). */
char *ol_node_locality_json(const char *status);

/* Print it on stdout as `node info` lines: NUMA nodes and CPUs, the KV loops' CPUs, each
 * drive's device and NIC's interface with their nodes, GPUs, WARNING lines. 0, or -1 (none). */
int ol_node_locality_text(const char *status);

#endif
