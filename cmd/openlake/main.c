/* openlake - the OpenLake command line: benchmarks, pool and node inspection, the codec. */
#include "cmds.h"

#include <stdio.h>
#include <string.h>

struct sub {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct sub subs[] = {
#ifdef OL_HAVE_BENCH
    {"bench", ol_cmd_bench, "load an S3 endpoint or KV pool and report throughput/latency"},
#endif
#ifdef OL_HAVE_KV
    {"kv", ol_cmd_kv, "KV pool: stats (capacity, used, hits, misses, evictions, tiers)"},
#endif
#ifdef OL_HAVE_CLUSTER /* first: it hands `cluster status` without etcd to node_cmd.c */
    {"cluster", ol_cmd_cluster,
     "cluster: init (write the layout to etcd), join (add a pool of new nodes), leave (drain and "
     "remove a pool), status (members, "
     "pools, sets, epoch; without etcd: "
     "[[nodes]] reachability)"},
#endif
#ifdef OL_HAVE_NODE
    {"node", ol_cmd_node, "node info: version, drives, capacity"},
    {"disk", ol_cmd_node, "disk info: per-drive health and usage"},
    {"cluster", ol_cmd_node, "cluster status: nodes and their reachability"},
#endif
#ifdef OL_HAVE_HEAL
    {"heal", ol_cmd_heal, "heal the object store: verify every shard, rebuild what is lost"},
#endif
#ifdef OL_HAVE_CP
    {"cp", ol_cmd_cp, "copy files to and from S3 (as `aws s3 cp`): parallel, resumable"},
#endif
#ifdef OL_HAVE_KEYS
    {"keys", ol_cmd_keys, "S3 keys added at run time: add, list, rm (admin API)"},
#endif
#ifdef OL_HAVE_CODEC
    {"codec", ol_cmd_codec, "ExANS BF16 codec: compress, decompress, stats"},
#endif
    {NULL, NULL, NULL},
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: openlake COMMAND [ARGS...]\n\nCommands:\n");
	for (const struct sub *s = subs; s->name; s++) {
		const struct sub *t = subs;
		while (t < s && strcmp(t->name, s->name) != 0)
			t++;
		if (t == s) /* a name listed twice is served by its first entry */
			fprintf(f, "  %-8s %s\n", s->name, s->help);
	}
	fprintf(f, "\n'openlake COMMAND --help' describes each command.\n");
}

int
main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("openlake %s\n", OL_VERSION);
		return 0;
	}
	for (const struct sub *s = subs; s->name; s++)
		if (strcmp(argv[1], s->name) == 0)
			return s->fn(argc - 1, argv + 1);
	fprintf(stderr, "openlake: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
