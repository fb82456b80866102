/* cmd/openlake/node_locality.c - `openlake node info`'s locality part: the status document's
 * "locality" object (io/topo.h's report, built by the daemon at start) as text or JSON. */
#include "node_locality.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* The "locality" object of the status, or NULL (a daemon without it). Caller decrefs. */
static json_t *
locality_get(const char *status)
{
	json_t *root = json_loads(status, 0, NULL);
	json_t *loc = json_object_get(root, "locality");
	loc = json_is_object(loc) ? json_incref(loc) : NULL;
	json_decref(root);
	return loc;
}

static const char *
node_str(json_t *v, char *buf, size_t cap)
{
	if (!json_is_integer(v))
		return "none";
	snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
	return buf;
}

static void
locality_loops(json_t *loc)
{
	json_t *loops = json_object_get(loc, "loops"), *l;
	size_t i, pinned = 0, accepting = 0;
	json_array_foreach(loops, i, l)
	{
		pinned += json_is_integer(json_object_get(l, "cpu"));
		accepting += json_is_true(json_object_get(l, "accepts"));
	}
	printf("loops    %zu KV loops, %zu pinned (pin_threads = %s), %zu take TCP connections\n",
	       json_array_size(loops), pinned,
	       json_string_value(json_object_get(loc, "pin_threads")), accepting);
	json_array_foreach(loops, i, l)
	{
		char c[24], n[24];
		printf("         %-12s CPU %-4s node %s%s\n",
		       json_string_value(json_object_get(l, "name")),
		       node_str(json_object_get(l, "cpu"), c, sizeof(c)),
		       node_str(json_object_get(l, "node"), n, sizeof(n)),
		       json_is_true(json_object_get(l, "accepts")) ? "" : "  (Unix socket only)");
	}
}

static void
locality_text(json_t *loc)
{
	json_t *v;
	size_t i;
	char n[24];
	json_array_foreach(json_object_get(loc, "nodes"), i, v)
	    printf("%-8s node %s: CPUs %s\n", i ? "" : "numa",
		   node_str(json_object_get(v, "node"), n, sizeof(n)),
		   json_string_value(json_object_get(v, "cpus")));
	locality_loops(loc);
	json_array_foreach(json_object_get(loc, "drives"), i, v)
	{
		const char *dev = json_string_value(json_object_get(v, "device"));
		printf("%-8s %-3s %-36s %-16s node %s\n", i ? "" : "devices",
		       json_string_value(json_object_get(v, "service")),
		       json_string_value(json_object_get(v, "path")), dev ? dev : "?",
		       node_str(json_object_get(v, "node"), n, sizeof(n)));
	}
	json_array_foreach(json_object_get(loc, "nics"), i, v)
	{
		const char *ifn = json_string_value(json_object_get(v, "ifname"));
		printf("%-8s %-3s %-28s %-12s node %s\n", i ? "" : "nics",
		       json_string_value(json_object_get(v, "service")),
		       json_string_value(json_object_get(v, "addr")), ifn ? ifn : "(all)",
		       node_str(json_object_get(v, "node"), n, sizeof(n)));
	}
	json_t *gpus = json_object_get(loc, "gpus");
	if (!json_array_size(gpus))
		printf("gpus     none (NVIDIA, PCI vendor 0x10de)\n");
	json_array_foreach(gpus, i, v) printf("%-8s %s node %s\n", i ? "" : "gpus",
					      json_string_value(json_object_get(v, "pci")),
					      node_str(json_object_get(v, "node"), n, sizeof(n)));
	json_array_foreach(json_object_get(loc, "warnings"), i, v)
	    printf("WARNING  %s\n", json_string_value(v));
}

char *
ol_node_locality_json(const char *status)
{
	json_t *loc = locality_get(status);
	char *s = loc ? json_dumps(loc, JSON_COMPACT) : NULL;
	json_decref(loc);
	return s;
}

int
ol_node_locality_text(const char *status)
{
	json_t *loc = locality_get(status);
	if (loc)
		locality_text(loc);
	json_decref(loc);
	return loc ? 0 : -1;
}
