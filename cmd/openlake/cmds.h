/* cmd/openlake/cmds.h - sub-commands of the `openlake` CLI. Each takes the arguments after its
 * own name (argv[0] is the sub-command) and returns the process exit code. */
#ifndef OL_CMD_OPENLAKE_CMDS_H
#define OL_CMD_OPENLAKE_CMDS_H

#include <stdbool.h>
#include <string.h>

int ol_cmd_codec(int argc, char **argv);   /* codec_cmd.c: compress, decompress, stats */
int ol_cmd_kv(int argc, char **argv);	   /* kv_cmd.c: stats */
int ol_cmd_bench(int argc, char **argv);   /* bench_cmd.c: s3 and kv workloads */
int ol_cmd_node(int argc, char **argv);	   /* node_cmd.c: node info, disk info, cluster status */
int ol_cmd_heal(int argc, char **argv);	   /* heal_cmd.c: whole-store heal with progress */
int ol_cmd_cluster(int argc, char **argv); /* cluster_cmd.c: init, status over etcd */
int ol_cmd_cp(int argc, char **argv);	   /* cp_cmd.c: files to and from S3 */
int ol_cmd_keys(int argc, char **argv);	   /* keys_cmd.c: run-time S3 keys (add, list, rm) */

/* Whether --help or -h is among argv[1..argc-1]: `openlake COMMAND [VERB] --help` prints the
 * command's usage on stdout and exits 0, wherever the flag stands. */
static inline bool
ol_cmd_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

#endif
