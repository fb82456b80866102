/* cluster_view - joins the cluster like openlaked does (ol_cluster_start with a config) and
 * prints the member view each time its set of ids changes, for the integration tests:
 *
 *   cluster_view CONFIG COUNT      "epoch E members ID,ID,..." lines; exits 0 after COUNT of
 *                                  them, 1 when 120 s pass first, 2 on a bad config
 */
#include "base/config.h"
#include "base/log.h"
#include "cluster/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
ids_of(const struct ol_cluster_view *v, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < v->n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? "," : "",
					 v->members[i].id);
}

int
main(int argc, char **argv)
{
	static struct ol_config cfg;
	char err[512], cur[1024] = "-", now[1024];
	if (argc != 3)
		return 2;
	ol_config_default(&cfg);
	if (ol_config_load_file(&cfg, argv[1], err, sizeof(err)) ||
	    ol_config_validate(&cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	ol_log_set_level("warn");
	struct ol_cluster *c;
	if (ol_cluster_start(&cfg, &c) || !c)
		return 2;
	long want = strtol(argv[2], NULL, 10), seen = 0;
	int64_t last_epoch = 0;
	int rc = 1;
	for (int tick = 0; tick < 120 * 20; tick++) {
		struct ol_cluster_view v;
		if (ol_cluster_members(c, &v) == 0) {
			ids_of(&v, now, sizeof(now));
			if (v.epoch < last_epoch) {
				printf("epoch went back: %lld < %lld\n", (long long)v.epoch,
				       (long long)last_epoch);
				ol_cluster_view_fini(&v);
				break;
			}
			last_epoch = v.epoch;
			if (v.epoch && strcmp(now, cur) != 0) {
				printf("epoch %lld members %s\n", (long long)v.epoch, now);
				fflush(stdout);
				memcpy(cur, now, sizeof(cur));
				seen++;
			}
			ol_cluster_view_fini(&v);
		}
		if (seen >= want) {
			rc = 0;
			break;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ol_cluster_stop(c);
	return rc;
}
