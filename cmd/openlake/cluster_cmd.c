/* cmd/openlake/cluster_cmd.c - `openlake cluster init`, `join` and `status` over etcd: the
 * layout written once and grown by a pool per join, the live members, the epoch. Without etcd (no
 * [cluster] etcd in the config and no --etcd), `cluster status` is node_cmd.c's static check of
 * [[nodes]]. */
#include "admin_client.h"
#include "cmds.h"

#include "base/config.h"
#include "cluster/cluster.h"
#include "cluster/etcd.h"
#include "cluster/layout.h"
#include "node/node.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct copts {
	const char *verb, *config, *etcd;
	bool json;
	long pool;   /* leave --pool, -1 when not given */
	bool cancel; /* leave --cancel */
	struct ol_config *cfg;
	struct ol_etcd *c;
	char layout_key[OL_CFG_STR + 16], members_key[OL_CFG_STR + 16], sets_key[OL_CFG_STR + 16];
};

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake cluster init   --config FILE [--etcd URL[,URL...]] [--json]\n"
	    "       openlake cluster join   --config FILE [--etcd URL[,URL...]] [--json]\n"
	    "       openlake cluster leave  --config FILE --pool P [--cancel] [--etcd "
	    "URL[,URL...]]\n"
	    "                               [--json]\n"
	    "       openlake cluster status [--config FILE] [--etcd URL[,URL...]] [--json]\n"
	    "\n"
	    "  init    write the cluster's layout to etcd, once: a new deployment id, N and P\n"
	    "          from the config, pools -> erasure sets -> (node, drive) slots from its\n"
	    "          [[nodes]] (disk_count each), every set spread over as many nodes as\n"
	    "          there are. A second init changes nothing: it says the layout exists and\n"
	    "          prints it (exit 0 when it matches this config, 1 when it does not).\n"
	    "  join    grow the cluster: the config's [[nodes]] that the layout does not have\n"
	    "          yet become a new pool (its own erasure sets of the layout's N and P).\n"
	    "          Objects stay where they are; new ones go to a pool weighted by free\n"
	    "          space. The running nodes take the new layout without a restart; start\n"
	    "          the new nodes with a config listing every node. Refused when no node is\n"
	    "          new or the new drives do not make whole sets of N; an etcd transaction\n"
	    "          on the layout's revision keeps two joins from racing.\n"
	    "  leave   decommission pool P: it is marked draining in the layout (no new object\n"
	    "          goes there; what it holds is still read there), and the serving leader\n"
	    "          (of set 0 of the first active pool: P = 0 moves it to the next pool)\n"
	    "          moves every object version, delete marker and their metadata to the\n"
	    "          other pools, one key at a time (rate: [storage] heal_bytes_per_sec),\n"
	    "          waits for uploads in progress there to complete or be aborted, gives\n"
	    "          every bucket to the other pools' sets (P = 0), and when the pool is\n"
	    "          empty marks it removed: its nodes can then be stopped. `status` shows\n"
	    "          the progress. Refused for the only pool left, an unknown or removed\n"
	    "          pool, and while another pool drains. With --cancel: stop the drain of\n"
	    "          pool P and make it\n"
	    "          active again (objects moved stay where they went; new ones may go to\n"
	    "          P again).\n"
	    "  status  the live members (their leases), the layout with each set's health,\n"
	    "          its leader and the leader's fencing epoch, the pools (and their state),\n"
	    "          a leave's progress, and the epoch (etcd revision\n"
	    "          of the member list). With [cluster] secret\n"
	    "          in the config, each member's node plane (rpc address) is pinged: plane=ok\n"
	    "          with its round-trip time, or the reason it is not reachable. Then the\n"
	    "          serving leader's view of its drives (its status, asked with the admin\n"
	    "          keys): how many are online, and why each offline one is (e.g. slow).\n"
	    "\n"
	    "etcd endpoints come from --etcd or the config's [cluster] etcd; keys live under\n"
	    "[cluster] prefix (default /openlake/). Without either, `cluster status` checks the\n"
	    "config's [[nodes]] for reachability.\n");
}

static int
connect_etcd(struct copts *o)
{
	const char *list = o->etcd ? o->etcd : o->cfg->cluster_etcd;
	char buf[OL_ETCD_MAX_ENDPOINTS][OL_CFG_STR];
	const char *eps[OL_ETCD_MAX_ENDPOINTS];
	unsigned n = 0;
	while (n < OL_ETCD_MAX_ENDPOINTS &&
	       ol_config_list_item(list, n, buf[n], sizeof(buf[n])) == 0) {
		eps[n] = buf[n];
		n++;
	}
	int rc = n ? ol_etcd_new(eps, n, 5000, &o->c) : -EINVAL;
	if (rc)
		fprintf(stderr, "openlake cluster %s: bad etcd endpoint list \"%s\"\n", o->verb,
			list);
	snprintf(o->layout_key, sizeof(o->layout_key), "%slayout", o->cfg->cluster_prefix);
	snprintf(o->members_key, sizeof(o->members_key), "%smembers/", o->cfg->cluster_prefix);
	snprintf(o->sets_key, sizeof(o->sets_key), "%ssets/", o->cfg->cluster_prefix);
	return rc;
}

static void
uuid4(char *out, size_t len)
{
	unsigned char b[16] = {0};
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		FILE *f = fopen("/dev/urandom", "rb");
		if (f) {
			if (fread(b, 1, sizeof(b), f) != sizeof(b))
				b[0] ^= 1;
			fclose(f);
		}
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

static int
build_layout(const struct ol_config *cfg, struct ol_layout *l)
{
	unsigned ids[OL_CFG_MAX_NODES], disks[OL_CFG_MAX_NODES];
	char id[40];
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		ids[i] = cfg->nodes[i].id;
		disks[i] = cfg->nodes[i].disk_count;
	}
	uuid4(id, sizeof(id));
	return ol_layout_build(ids, disks, cfg->n_nodes, cfg->set_drive_count,
			       cfg->default_parity_count, id, l);
}

static bool
same_shape(const struct ol_layout *a, const struct ol_layout *b)
{
	if (a->set_drives != b->set_drives || a->parity != b->parity || a->n_pools != b->n_pools)
		return false;
	for (unsigned p = 0; p < a->n_pools; p++)
		if (a->pools[p].n_sets != b->pools[p].n_sets ||
		    memcmp(a->pools[p].slots, b->pools[p].slots,
			   (size_t)a->pools[p].n_sets * a->set_drives * sizeof(*a->pools[p].slots)))
			return false;
	return true;
}

static void
print_layout(const struct ol_layout *l)
{
	printf("deployment %s: N=%u (data %u + parity %u), %u pool(s)\n", l->deployment_id,
	       l->set_drives, l->set_drives - l->parity, l->parity, l->n_pools);
	for (unsigned p = 0; p < l->n_pools; p++) {
		for (unsigned s = 0; s < l->pools[p].n_sets; s++) {
			printf("  pool %u set %u:", p, s);
			for (unsigned j = 0; j < l->set_drives; j++) {
				const struct ol_layout_slot *sl =
				    &l->pools[p].slots[(size_t)s * l->set_drives + j];
				printf(" node%u/drive%u", sl->node, sl->drive);
			}
			printf("  (%u nodes)\n", ol_layout_set_span(l, p, s));
		}
	}
}

static int
cluster_init(struct copts *o)
{
	struct ol_layout want, have;
	int rc = build_layout(o->cfg, &want);
	if (rc) {
		fprintf(stderr,
			"openlake cluster init: the [[nodes]] of %s hold drives that do not make "
			"whole sets of set_drive_count = %u with parity %u\n",
			o->cfg->source, o->cfg->set_drive_count, o->cfg->default_parity_count);
		return 1;
	}
	char *js = ol_layout_to_json(&want);
	struct ol_etcd_cmp cmp = {.key = o->layout_key,
				  .target = OL_ETCD_CMP_CREATE,
				  .result = OL_ETCD_EQUAL,
				  .number = 0};
	struct ol_etcd_op put = {.type = OL_ETCD_OP_PUT,
				 .key = o->layout_key,
				 .value = js,
				 .value_len = js ? strlen(js) : 0};
	struct ol_etcd_op get = {.type = OL_ETCD_OP_RANGE, .key = o->layout_key};
	struct ol_etcd_txn_result t = {0};
	rc = js ? ol_etcd_txn(o->c, &cmp, 1, &put, 1, &get, 1, &t) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "openlake cluster init: etcd (%s): %s\n",
			o->etcd ? o->etcd : o->cfg->cluster_etcd,
			rc == -ETIMEDOUT ? "no endpoint answered" : strerror(-rc));
		rc = 1;
		goto out;
	}
	const char *old =
	    !t.succeeded && t.n_ranges && t.ranges[0].n_kvs ? t.ranges[0].kvs[0].value : NULL;
	if (t.succeeded) {
		if (o->json)
			printf("{\"created\":true,\"revision\":%lld,\"layout\":%s}\n",
			       (long long)t.revision, js);
		else {
			printf("layout written to %s (revision %lld)\n", o->layout_key,
			       (long long)t.revision);
			print_layout(&want);
		}
		rc = 0;
	} else if (old && ol_layout_from_json(old, strlen(old), &have) == 0) {
		bool same = same_shape(&want, &have);
		if (o->json) {
			printf("{\"created\":false,\"matches_config\":%s,\"layout\":%s}\n",
			       same ? "true" : "false", old);
		} else {
			printf("the layout exists already at %s (init changes nothing)%s\n",
			       o->layout_key,
			       same ? "" : "; it differs from what this config describes");
			print_layout(&have);
		}
		ol_layout_fini(&have);
		rc = same ? 0 : 1;
	} else {
		fprintf(stderr, "openlake cluster init: %s holds something that is not a layout\n",
			o->layout_key);
		rc = 1;
	}
out:
	ol_etcd_txn_result_fini(&t);
	ol_layout_fini(&want);
	free(js);
	return rc;
}

#define MAX_SETS 64 /* erasure sets a deployment serves (store/store_int.h's OL_MAX_SETS) */

static void
print_pools(const struct ol_layout *l)
{
	for (unsigned p = 0; p < l->n_pools; p++) {
		unsigned seen[OL_CFG_MAX_NODES], n = 0;
		size_t slots = (size_t)l->pools[p].n_sets * l->set_drives;
		for (size_t i = 0; i < slots; i++) {
			unsigned id = l->pools[p].slots[i].node, j = 0;
			while (j < n && seen[j] != id)
				j++;
			if (j == n && n < OL_CFG_MAX_NODES)
				seen[n++] = id;
		}
		printf("  pool %u: %u set(s), %zu drives, nodes", p, l->pools[p].n_sets, slots);
		for (unsigned j = 0; j < n; j++)
			printf("%s%u", j ? "," : " ", seen[j]);
		printf("%s%s\n", l->pools[p].state ? ", " : "",
		       l->pools[p].state ? ol_layout_state_name(l->pools[p].state) : "");
	}
}

/* warn of the sets of pool p that one node's loss takes down (more than P drives on it) */
static void
warn_spread(const struct ol_layout *l, unsigned p)
{
	for (unsigned s = 0; s < l->pools[p].n_sets; s++) {
		const struct ol_layout_slot *set = &l->pools[p].slots[(size_t)s * l->set_drives];
		for (unsigned j = 0; j < l->set_drives; j++) {
			unsigned on = 0, k = 0;
			while (k < j && set[k].node != set[j].node)
				k++;
			if (k < j)
				continue; /* this node counted already */
			for (k = j; k < l->set_drives; k++)
				on += set[k].node == set[j].node;
			if (on > l->parity)
				fprintf(stderr,
					"openlake cluster join: warning: set %u of pool %u has %u "
					"of its "
					"%u drives on node %u, more than its parity %u: that "
					"node's loss "
					"stops the set (more new nodes spread it)\n",
					s, p, on, l->set_drives, set[j].node, l->parity);
		}
	}
}

/* the layout as stored: 0 and *l, *mod_rev; 1 after printing why not */
static int
read_layout(struct copts *o, struct ol_layout *l, int64_t *mod_rev)
{
	struct ol_etcd_range_result r = {0};
	int rc = ol_etcd_range(o->c, o->layout_key, 0, 0, 0, &r);
	if (rc)
		fprintf(stderr, "openlake cluster %s: etcd (%s): %s\n", o->verb,
			o->etcd ? o->etcd : o->cfg->cluster_etcd,
			rc == -ETIMEDOUT ? "no endpoint answered" : strerror(-rc));
	else if (!r.n_kvs)
		fprintf(stderr,
			"openlake cluster %s: no layout at %s yet: run `openlake cluster init "
			"--config FILE` first\n",
			o->verb, o->layout_key);
	else if (ol_layout_from_json(r.kvs[0].value, r.kvs[0].value_len, l))
		fprintf(stderr, "openlake cluster %s: %s holds something that is not a layout\n",
			o->verb, o->layout_key);
	else
		*mod_rev = r.kvs[0].mod_revision;
	rc = rc || !r.n_kvs || !*mod_rev ? 1 : 0;
	ol_etcd_range_result_fini(&r);
	return rc;
}

/* the config's [[nodes]] the layout does not have: count, ids, drives, drive total */
static unsigned
new_nodes(const struct ol_config *cfg, const struct ol_layout *l, unsigned *ids, unsigned *disks,
	  unsigned *total)
{
	unsigned n = 0;
	*total = 0;
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		if (ol_layout_has_node(l, cfg->nodes[i].id))
			continue;
		ids[n] = cfg->nodes[i].id;
		disks[n] = cfg->nodes[i].disk_count;
		*total += disks[n++];
	}
	return n;
}

static int
join_refused(const struct copts *o, const struct ol_layout *l, unsigned n, unsigned total)
{
	unsigned sets = 0;
	for (unsigned p = 0; p < l->n_pools; p++)
		sets += l->pools[p].n_sets;
	if (!n)
		fprintf(stderr,
			"openlake cluster join: every [[nodes]] entry of %s is in the layout "
			"already: nothing to join. Add the new nodes to [[nodes]] (id, rpc_addr, "
			"disk_count) and run join again\n",
			o->cfg->source);
	else if (!total || total % l->set_drives)
		fprintf(stderr,
			"openlake cluster join: the %u new node(s) of %s hold %u drive(s), which "
			"do not make whole erasure sets of N = %u (the layout's set_drive_count): "
			"give the new nodes a multiple of %u drives in all (disk_count), or add "
			"more nodes\n",
			n, o->cfg->source, total, l->set_drives, l->set_drives);
	else if (l->n_pools >= OL_CFG_MAX_NODES || sets + total / l->set_drives > MAX_SETS)
		fprintf(stderr,
			"openlake cluster join: the layout would have %u erasure sets in %u pools; "
			"a deployment serves at most %d sets\n",
			sets + total / l->set_drives, l->n_pools + 1, MAX_SETS);
	else
		return 0;
	return 1;
}

static int
cluster_join(struct copts *o)
{
	struct ol_layout l;
	int64_t mod = 0;
	unsigned ids[OL_CFG_MAX_NODES], disks[OL_CFG_MAX_NODES], total;
	if (read_layout(o, &l, &mod))
		return 1;
	unsigned n = new_nodes(o->cfg, &l, ids, disks, &total);
	char *js = NULL;
	struct ol_etcd_txn_result t = {0};
	int rc = join_refused(o, &l, n, total);
	if (rc)
		goto out;
	rc = ol_layout_add_pool(&l, ids, disks, n);
	js = rc ? NULL : ol_layout_to_json(&l);
	struct ol_etcd_cmp cmp = {.key = o->layout_key,
				  .target = OL_ETCD_CMP_MOD,
				  .result = OL_ETCD_EQUAL,
				  .number = mod};
	struct ol_etcd_op put = {.type = OL_ETCD_OP_PUT,
				 .key = o->layout_key,
				 .value = js,
				 .value_len = js ? strlen(js) : 0};
	rc = rc ? rc : js ? ol_etcd_txn(o->c, &cmp, 1, &put, 1, NULL, 0, &t) : -ENOMEM;
	if (rc || !t.succeeded) {
		if (rc)
			fprintf(stderr, "openlake cluster join: %s\n",
				rc == -ETIMEDOUT ? "no etcd endpoint answered" : strerror(-rc));
		else
			fprintf(stderr, "openlake cluster join: the layout changed while joining "
					"(another join?): run join again\n");
		rc = 1;
		goto out;
	}
	if (o->json) {
		printf("{\"joined\":true,\"pool\":%u,\"revision\":%lld,\"layout\":%s}\n",
		       l.n_pools - 1, (long long)t.revision, js);
	} else {
		printf("pool %u added to %s (revision %lld): the running nodes take it without a "
		       "restart; start the new nodes now\n",
		       l.n_pools - 1, o->layout_key, (long long)t.revision);
		print_layout(&l);
		print_pools(&l);
	}
	warn_spread(&l, l.n_pools - 1);
out:
	ol_etcd_txn_result_fini(&t);
	free(js);
	ol_layout_fini(&l);
	return rc;
}

/* ---- leave ---- */

/* why pool P cannot leave l (printed), or 0 */
static int
leave_refused(const struct copts *o, const struct ol_layout *l)
{
	int d = ol_layout_draining(l);
	unsigned p = (unsigned)o->pool;
	if (o->pool >= (long)l->n_pools || l->pools[p].state == OL_POOL_REMOVED)
		fprintf(stderr,
			"openlake cluster leave: the layout has no pool %ld (pools 0..%u%s): see "
			"`openlake cluster status`\n",
			o->pool, l->n_pools - 1,
			o->pool < (long)l->n_pools ? "; it was removed already" : "");
	else if (d == (int)p)
		fprintf(stderr,
			"openlake cluster leave: pool %u is draining already: `openlake cluster "
			"status` shows the progress (`--cancel` stops it)\n",
			p);
	else if (d >= 0)
		fprintf(stderr,
			"openlake cluster leave: pool %d is draining: one leave at a time; run it "
			"again once pool %d is removed (`openlake cluster status`)\n",
			d, d);
	else if (ol_layout_live_pools(l) < 2)
		fprintf(stderr,
			"openlake cluster leave: pool %u is the only pool: its objects "
			"would have nowhere to go (join a pool first)\n",
			p);
	else
		return 0;
	return 1;
}

/* Write layout l (its pool P's state changed) and <prefix>leave = {"pool": P, "state": state}
 * in one transaction on the layout's revision mod. 0 with *js (the layout's JSON, freed by
 * the caller) and t->revision; else 1, the reason printed (raced: what may have changed). */
static int
put_leave(struct copts *o, const struct ol_layout *l, int64_t mod, const char *state,
	  const char *raced, char **js, struct ol_etcd_txn_result *t)
{
	char leave[96], key[OL_CFG_STR + 16];
	*js = ol_layout_to_json(l);
	snprintf(key, sizeof(key), "%sleave", o->cfg->cluster_prefix);
	snprintf(leave, sizeof(leave), "{\"pool\":%ld,\"state\":\"%s\"}", o->pool, state);
	struct ol_etcd_cmp cmp = {.key = o->layout_key,
				  .target = OL_ETCD_CMP_MOD,
				  .result = OL_ETCD_EQUAL,
				  .number = mod};
	struct ol_etcd_op put[2] = {
	    {.type = OL_ETCD_OP_PUT,
	     .key = o->layout_key,
	     .value = *js,
	     .value_len = *js ? strlen(*js) : 0},
	    {.type = OL_ETCD_OP_PUT, .key = key, .value = leave, .value_len = strlen(leave)}};
	int rc = *js ? ol_etcd_txn(o->c, &cmp, 1, put, 2, NULL, 0, t) : -ENOMEM;
	if (!rc && t->succeeded)
		return 0;
	if (rc)
		fprintf(stderr, "openlake cluster leave: %s\n",
			rc == -ETIMEDOUT ? "no etcd endpoint answered" : strerror(-rc));
	else
		fprintf(stderr, "openlake cluster leave: the layout changed meanwhile (%s): %s\n",
			raced, "see `openlake cluster status` and run it again");
	return 1;
}

/* leave --cancel: pool P draining -> active, in one transaction on the layout's revision with
 * the leave record; the leader's poller stops the drain when it reads it (cluster_store.c) */
static int
leave_cancel(struct copts *o, struct ol_layout *l, int64_t mod)
{
	unsigned p = (unsigned)o->pool;
	char *js = NULL;
	struct ol_etcd_txn_result t = {0};
	int rc = 1;
	if (o->pool >= (long)l->n_pools) {
		fprintf(stderr,
			"openlake cluster leave: the layout has no pool %ld (pools 0..%u): see "
			"`openlake cluster status`\n",
			o->pool, l->n_pools - 1);
		return 1;
	}
	if (l->pools[p].state != OL_POOL_DRAINING) {
		fprintf(stderr,
			"openlake cluster leave: pool %u is not draining (it is %s): nothing to "
			"cancel%s\n",
			p, ol_layout_state_name(l->pools[p].state),
			l->pools[p].state == OL_POOL_REMOVED
			    ? "; its objects moved already (`openlake cluster join` a pool to "
			      "grow again)"
			    : "");
		return 1;
	}
	l->pools[p].state = OL_POOL_ACTIVE;
	rc = put_leave(o, l, mod, "cancelled", "the drain ended, or a join?", &js, &t);
	if (rc)
		goto out;
	if (o->json)
		printf("{\"cancelled\":true,\"pool\":%u,\"revision\":%lld,\"layout\":%s}\n", p,
		       (long long)t.revision, js);
	else {
		printf("the leave of pool %u is cancelled (revision %lld): the leader stops its "
		       "drain; objects already moved stay in the pools they went to, and new "
		       "objects may go to pool %u again.\n",
		       p, (long long)t.revision, p);
		print_pools(l);
	}
	rc = 0;
out:
	ol_etcd_txn_result_fini(&t);
	free(js);
	return rc;
}

static int
cluster_leave(struct copts *o)
{
	struct ol_layout l;
	int64_t mod = 0;
	char *js = NULL;
	struct ol_etcd_txn_result t = {0};
	if (read_layout(o, &l, &mod))
		return 1;
	if (o->cancel) {
		int rc = leave_cancel(o, &l, mod);
		ol_layout_fini(&l);
		return rc;
	}
	int rc = leave_refused(o, &l);
	if (rc)
		goto out;
	l.pools[o->pool].state = OL_POOL_DRAINING;
	rc = put_leave(o, &l, mod, "draining", "a join or another leave?", &js, &t);
	if (rc)
		goto out;
	if (o->json)
		printf("{\"leaving\":true,\"pool\":%ld,\"revision\":%lld,\"layout\":%s}\n", o->pool,
		       (long long)t.revision, js);
	else {
		printf("pool %ld is draining (revision %lld): no new object goes there; the leader "
		       "of set %u.0 %s its objects to the other pools and then removes it from "
		       "the layout; `openlake cluster status` shows the progress. Stop its nodes "
		       "once status shows it removed.\n",
		       o->pool, (long long)t.revision, ol_layout_serving_pool(&l),
		       o->pool == 0 ? "serves the cluster from now on, moves" : "moves");
		print_pools(&l);
	}
out:
	ol_etcd_txn_result_fini(&t);
	free(js);
	ol_layout_fini(&l);
	return rc;
}

/* ---- status ---- */

#define PLANE_DEADLINE_MS 2000

/* Ping a member's node plane with the config's secret: 0 and the RTT, or -errno. */
static int
plane_ping(const struct copts *o, const struct ol_cluster_member *m, uint64_t *rtt_ns)
{
	struct ol_node_client *c;
	if (!o->cfg->cluster_secret[0])
		return -ENOKEY;
	ol_node_encrypt(o->cfg->cluster_plane_encrypt);
	int rc = ol_node_client_new(m->rpc_addr, o->cfg->cluster_secret, o->cfg->self_id, &c);
	if (rc)
		return rc;
	rc = ol_node_ping(c, PLANE_DEADLINE_MS, NULL); /* connect + HELLO, then time a ping */
	if (!rc)
		rc = ol_node_ping(c, PLANE_DEADLINE_MS, rtt_ns);
	ol_node_client_free(c);
	return rc;
}

static void
plane_text(const struct copts *o, const struct ol_cluster_member *m, char *buf, size_t len)
{
	uint64_t rtt = 0;
	int rc = plane_ping(o, m, &rtt);
	if (!rc)
		snprintf(buf, len, "plane=ok rtt=%.0fus", (double)rtt / 1000.0);
	else if (rc == -ENOKEY)
		snprintf(buf, len, "plane=unchecked (no [cluster] secret in the config)");
	else if (rc == -EACCES)
		snprintf(buf, len,
			 "plane=refused (its [cluster] secret differs from this config's)");
	else
		snprintf(buf, len, "plane=unreachable (%s)", strerror(-rc));
}

static bool
member_live(const struct ol_cluster_member *m, size_t n, unsigned id)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].id == id)
			return true;
	return false;
}

/* the leader of set (p, s) from the sets/ range: {node, s3, rpc_addr, epoch} or null */
static json_t *
set_leader(const struct copts *o, const struct ol_etcd_range_result *lr, unsigned p, unsigned s)
{
	char key[OL_CFG_STR + 48];
	snprintf(key, sizeof(key), "%s%u.%u/leader", o->sets_key, p, s);
	for (size_t i = 0; lr && i < lr->n_kvs; i++) {
		struct ol_cluster_leader_info li;
		const struct ol_etcd_kv *kv = &lr->kvs[i];
		if (strcmp(kv->key, key) || ol_cluster_leader_parse(kv->value, kv->value_len, &li))
			continue;
		return json_pack("{s:I, s:s, s:s, s:I}", "node", (json_int_t)li.node, "s3",
				 li.s3_addr, "rpc_addr", li.rpc_addr, "epoch",
				 (json_int_t)kv->create_revision);
	}
	return json_null();
}

static json_t *
sets_health(const struct copts *o, const struct ol_layout *l, const struct ol_cluster_member *m,
	    size_t n, const struct ol_etcd_range_result *leaders)
{
	json_t *a = json_array();
	for (unsigned p = 0; l && p < l->n_pools; p++) {
		for (unsigned s = 0; s < l->pools[p].n_sets; s++) {
			unsigned live = 0;
			for (unsigned j = 0; j < l->set_drives; j++)
				live += member_live(
				    m, n, l->pools[p].slots[(size_t)s * l->set_drives + j].node);
			const char *h = l->pools[p].state == OL_POOL_REMOVED ? "removed"
					: live == l->set_drives		     ? "ok"
					: live >= l->set_drives - l->parity  ? "degraded"
									     : "unavailable";
			json_array_append_new(
			    a, json_pack("{s:I, s:I, s:I, s:I, s:s, s:o, s:b}", "pool",
					 (json_int_t)p, "set", (json_int_t)s, "drives",
					 (json_int_t)l->set_drives, "live", (json_int_t)live,
					 "health", h, "leader", set_leader(o, leaders, p, s),
					 "serves", p == ol_layout_serving_pool(l) && s == 0));
		}
	}
	return a;
}

static int
read_members(struct copts *o, struct ol_etcd_range_result *r, struct ol_cluster_member **out)
{
	int rc = ol_etcd_range(o->c, o->members_key, OL_ETCD_PREFIX, 0, 0, r);
	if (rc)
		return rc;
	*out = calloc(r->n_kvs + 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_kvs; i++) {
		struct ol_cluster_member *m = &(*out)[i];
		if (ol_cluster_member_parse(r->kvs[i].value, r->kvs[i].value_len, m) == 0)
			m->lease = r->kvs[i].lease;
	}
	return 0;
}

static void print_leave(struct copts *o);

static void
print_status(struct copts *o, const struct ol_etcd_range_result *r,
	     const struct ol_cluster_member *m, const struct ol_layout *l, json_t *sets)
{
	printf("etcd %s, prefix %s, epoch %lld\n", ol_etcd_endpoint(o->c), o->cfg->cluster_prefix,
	       (long long)r->revision);
	printf("members: %zu live\n", r->n_kvs);
	for (size_t i = 0; i < r->n_kvs; i++) {
		int64_t ttl = -1;
		(void)ol_etcd_lease_ttl(o->c, m[i].lease, &ttl);
		char plane[128];
		plane_text(o, &m[i], plane, sizeof(plane));
		printf("  node %u  s3=%s kv=%s rpc=%s drives=%u capacity=%.1fGiB weight=%u "
		       "lease=%lld ttl=%llds %s\n",
		       m[i].id, m[i].s3_addr[0] ? m[i].s3_addr : "-",
		       m[i].kv_addr[0] ? m[i].kv_addr : "-", m[i].rpc_addr, m[i].n_drives,
		       (double)m[i].capacity / (1 << 30), m[i].weight, (long long)m[i].lease,
		       (long long)ttl, plane);
	}
	if (!l) {
		printf("layout: none (run `openlake cluster init --config FILE`)\n");
		return;
	}
	printf("layout: ");
	print_layout(l);
	print_pools(l);
	print_leave(o);
	unsigned serving = ol_layout_serving_pool(l);
	size_t i;
	json_t *v;
	json_array_foreach(sets, i, v)
	{
		const json_t *ld = json_object_get(v, "leader");
		char leader[64] = "no leader";
		if (json_is_object(ld))
			snprintf(leader, sizeof(leader), "leader node %lld, epoch %lld",
				 (long long)json_integer_value(json_object_get(ld, "node")),
				 (long long)json_integer_value(json_object_get(ld, "epoch")));
		long long pool = (long long)json_integer_value(json_object_get(v, "pool")),
			  set = (long long)json_integer_value(json_object_get(v, "set"));
		/* the leader of the serving set serves every set of every pool
		 * (docs/cluster.md) */
		char by[64];
		snprintf(by, sizeof(by), "; served by the leader of set %u.0", serving);
		const char *h = json_string_value(json_object_get(v, "health"));
		bool removed = h && !strcmp(h, "removed"); /* serves nothing */
		printf("  pool %lld set %lld: %s (%lld of %lld nodes' drives live), %s%s\n", pool,
		       set, json_string_value(json_object_get(v, "health")),
		       (long long)json_integer_value(json_object_get(v, "live")),
		       (long long)json_integer_value(json_object_get(v, "drives")), leader,
		       json_is_true(json_object_get(v, "serves")) ? "; serves the cluster"
		       : removed				  ? ""
								  : by);
	}
}

/* [{"pool", "sets", "drives", "nodes": [ids]}] */
static json_t *
pools_json(const struct ol_layout *l)
{
	json_t *a = json_array();
	for (unsigned p = 0; l && p < l->n_pools; p++) {
		json_t *nodes = json_array();
		size_t slots = (size_t)l->pools[p].n_sets * l->set_drives;
		for (size_t i = 0; i < slots; i++) {
			json_int_t id = l->pools[p].slots[i].node;
			size_t j;
			json_t *v;
			bool seen = false;
			json_array_foreach(nodes, j, v) seen |= json_integer_value(v) == id;
			if (!seen)
				json_array_append_new(nodes, json_integer(id));
		}
		json_array_append_new(
		    a, json_pack("{s:I, s:I, s:I, s:o, s:s}", "pool", (json_int_t)p, "sets",
				 (json_int_t)l->pools[p].n_sets, "drives", (json_int_t)slots,
				 "nodes", nodes, "state", ol_layout_state_name(l->pools[p].state)));
	}
	return a;
}

/* <prefix>leave: the last drain's record (NULL: none) */
static json_t *
leave_record(struct copts *o)
{
	char key[OL_CFG_STR + 16];
	struct ol_etcd_range_result r = {0};
	json_error_t e;
	json_t *v = NULL;
	snprintf(key, sizeof(key), "%sleave", o->cfg->cluster_prefix);
	if (ol_etcd_range(o->c, key, 0, 0, 0, &r) == 0 && r.n_kvs)
		v = json_loadb(r.kvs[0].value, r.kvs[0].value_len, 0, &e);
	ol_etcd_range_result_fini(&r);
	if (v && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

static long long
jint(const json_t *o, const char *name)
{
	return (long long)json_integer_value(json_object_get(o, name));
}

static void
print_leave(struct copts *o)
{
	json_t *v = leave_record(o);
	if (!v)
		return;
	const char *state = json_string_value(json_object_get(v, "state"));
	printf("leave: pool %lld %s: %lld versions (%lld bytes) moved, %lld (%lld bytes) left "
	       "at the last pass, %lld failed moves, %lld uploads in progress there, pass %lld "
	       "(leader node %lld)\n",
	       jint(v, "pool"), state ? state : "?", jint(v, "objects_moved"),
	       jint(v, "bytes_moved"), jint(v, "objects_left"), jint(v, "bytes_left"),
	       jint(v, "failed"), jint(v, "uploads"), jint(v, "passes"), jint(v, "leader"));
	json_decref(v);
}

/* The serving set's leader's view of its drives: its status JSON's "store_drives" (each drive
 * online or not and why: docs/cluster.md "A slow drive"), signed with the admin keys as `node
 * info` signs; NULL with *why set when it cannot be asked. */
static json_t *
leader_drives(struct copts *o, json_t *sets, char *why, size_t cap)
{
	struct ol_cli_admin a = {0};
	const char *s3 = NULL;
	char *body = NULL;
	json_t *doc, *d = NULL, *v;
	json_error_t e;
	size_t i;
	int st;

	json_array_foreach(sets, i, v)
	{
		if (json_is_true(json_object_get(v, "serves")))
			s3 = json_string_value(json_object_get(json_object_get(v, "leader"), "s3"));
	}
	snprintf(why, cap, "no leader serves the cluster");
	if (!s3 || ol_cli_admin_keys(&a, "cluster status", NULL, NULL, NULL, o->cfg, o->config) ||
	    ol_cli_admin_endpoint(&a, s3))
		return NULL;
	a.tls = ol_cli_admin_tls(&a, o->cfg);
	a.wait_ms = 3000; /* a status asked of a hung leader: say so soon, the rest is printed */
	st = ol_cli_admin_call(&a, "GET", "/openlake/admin/v1/status", "", 4 << 20, &body);
	doc = st == 200 && body ? json_loads(body, 0, &e) : NULL;
	if (doc)
		d = json_incref(json_object_get(doc, "store_drives"));
	if (!json_is_array(d)) {
		snprintf(why, cap, "its status at %s: %s", s3,
			 st < 0	     ? strerror(-st)
			 : st != 200 ? "refused (the admin keys: --config's admin [[credentials]] "
				       "or AWS_ACCESS_KEY_ID)"
				     : "no drives listed (a leader older than this CLI)");
		json_decref(d);
		d = NULL;
	}
	json_decref(doc);
	free(body);
	return d;
}

static void
print_drives(const json_t *d, const char *why)
{
	size_t i, on = 0;
	json_t *v;

	if (!d) {
		printf("drives: unknown (%s)\n", why);
		return;
	}
	json_array_foreach(d, i, v) on += json_is_true(json_object_get(v, "online"));
	printf("drives (the serving leader's view): %zu of %zu online\n", on, json_array_size(d));
	json_array_foreach(d, i, v)
	{
		if (json_is_true(json_object_get(v, "online")))
			continue;
		printf("  %s: OFFLINE: %s\n", json_string_value(json_object_get(v, "drive")),
		       json_string_value(json_object_get(v, "why")));
	}
}

static void
json_status(struct copts *o, const struct ol_etcd_range_result *r, const char *layout,
	    const struct ol_layout *l, json_t *sets)
{
	json_error_t e;
	json_t *mem = json_array();
	for (size_t i = 0; i < r->n_kvs; i++) {
		json_t *m = json_loadb(r->kvs[i].value, r->kvs[i].value_len, 0, &e);
		if (!json_is_object(m)) {
			json_decref(m);
			continue;
		}
		int64_t ttl = -1;
		(void)ol_etcd_lease_ttl(o->c, r->kvs[i].lease, &ttl);
		char lease[32];
		snprintf(lease, sizeof(lease), "%lld", (long long)r->kvs[i].lease);
		json_object_set_new(m, "lease", json_string(lease));
		json_object_set_new(m, "ttl", json_integer(ttl));
		struct ol_cluster_member cm;
		uint64_t rtt = 0;
		int prc = ol_cluster_member_parse(r->kvs[i].value, r->kvs[i].value_len, &cm);
		if (!prc)
			prc = plane_ping(o, &cm, &rtt);
		json_object_set_new(
		    m, "plane",
		    prc ? json_pack("{s:b, s:s}", "ok", 0, "error",
				    prc == -ENOKEY ? "no [cluster] secret in the config"
						   : strerror(-prc))
			: json_pack("{s:b, s:f}", "ok", 1, "rtt_us", (double)rtt / 1000.0));
		json_array_append_new(mem, m);
	}
	json_t *lay = layout ? json_loads(layout, 0, &e) : NULL;
	json_t *doc =
	    json_pack("{s:s, s:s, s:I, s:o, s:o, s:o, s:O}", "etcd", ol_etcd_endpoint(o->c),
		      "prefix", o->cfg->cluster_prefix, "epoch", (json_int_t)r->revision, "members",
		      mem, "layout", lay ? lay : json_null(), "pools", pools_json(l), "sets", sets);
	json_t *lv = leave_record(o);
	if (doc && l)
		json_object_set_new(doc, "serving",
				    json_pack("{s:I, s:I}", "pool",
					      (json_int_t)ol_layout_serving_pool(l), "set", 0));
	if (doc)
		json_object_set_new(doc, "leave", lv ? lv : json_null());
	else
		json_decref(lv);
	char why[160];
	json_t *dr = leader_drives(o, sets, why, sizeof(why));
	if (doc)
		json_object_set_new(doc, "store_drives", dr ? dr : json_null());
	else
		json_decref(dr);
	char *s = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(doc);
}

static int
cluster_status(struct copts *o)
{
	struct ol_etcd_range_result r = {0}, lr = {0}, sr = {0};
	struct ol_cluster_member *m = NULL;
	struct ol_layout l;
	bool have_layout = false;
	int rc = read_members(o, &r, &m);
	if (!rc)
		rc = ol_etcd_range(o->c, o->layout_key, 0, 0, 0, &lr);
	if (!rc)
		rc = ol_etcd_range(o->c, o->sets_key, OL_ETCD_PREFIX, 0, 0, &sr);
	if (rc) {
		fprintf(stderr, "openlake cluster status: etcd (%s): %s\n",
			o->etcd ? o->etcd : o->cfg->cluster_etcd,
			rc == -ETIMEDOUT ? "no endpoint answered" : strerror(-rc));
		rc = 1;
		goto out;
	}
	const char *lj = lr.n_kvs ? lr.kvs[0].value : NULL;
	have_layout = lj && ol_layout_from_json(lj, strlen(lj), &l) == 0;
	json_t *sets = sets_health(o, have_layout ? &l : NULL, m, r.n_kvs, &sr);
	if (o->json)
		json_status(o, &r, have_layout ? lj : NULL, have_layout ? &l : NULL, sets);
	else
		print_status(o, &r, m, have_layout ? &l : NULL, sets);
	if (!o->json && have_layout) {
		char why[160];
		json_t *d = leader_drives(o, sets, why, sizeof(why));

		print_drives(d, why);
		json_decref(d);
	}
	json_decref(sets);
out:
	if (have_layout)
		ol_layout_fini(&l);
	free(m);
	ol_etcd_range_result_fini(&r);
	ol_etcd_range_result_fini(&lr);
	ol_etcd_range_result_fini(&sr);
	return rc;
}

static int
parse(struct copts *o, int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc)
			o->config = argv[++i];
		else if (strcmp(a, "--etcd") == 0 && i + 1 < argc)
			o->etcd = argv[++i];
		else if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (strcmp(a, "--cancel") == 0 && strcmp(o->verb, "leave") == 0)
			o->cancel = true;
		else if (strcmp(a, "--pool") == 0 && i + 1 < argc) {
			char *end = NULL;
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (!*argv[i] || *end || v > 1024) {
				fprintf(stderr, "openlake cluster %s: bad --pool '%s'\n", o->verb,
					argv[i]);
				return 2;
			}
			o->pool = (long)v;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		else {
			fprintf(stderr, "openlake cluster %s: unexpected argument '%s'\n", o->verb,
				a);
			return 2;
		}
	}
	return 0;
}

static int
load_config(struct copts *o)
{
	char err[512];
	o->cfg = calloc(1, sizeof(*o->cfg));
	if (!o->cfg)
		return 1;
	ol_config_default(o->cfg);
	if (o->config && (ol_config_load_file(o->cfg, o->config, err, sizeof(err)) ||
			  ol_config_validate(o->cfg, err, sizeof(err)))) {
		fprintf(stderr, "openlake cluster %s: %s\n", o->verb, err);
		return 1;
	}
	return 0;
}

/* `cluster status` with no etcd in sight (no --etcd, no [cluster] etcd in a config that
 * loads): node_cmd.c's [[nodes]] check, which takes its own flags (--endpoint, ...) */
static bool
status_without_etcd(int argc, char **argv)
{
	const char *config = NULL;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--etcd") == 0)
			return false;
		if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) &&
		    i + 1 < argc)
			config = argv[++i];
	}
	if (!config)
		return true;
	struct ol_config *cfg = calloc(1, sizeof(*cfg));
	char err[512];
	if (!cfg)
		return true;
	ol_config_default(cfg);
	bool none = ol_config_load_file(cfg, config, err, sizeof(err)) || !cfg->cluster_etcd[0];
	free(cfg);
	return none;
}

int
ol_cmd_cluster(int argc, char **argv)
{
	struct copts o = {.pool = -1};
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	o.verb = argv[1];
	bool init = strcmp(o.verb, "init") == 0, join = strcmp(o.verb, "join") == 0;
	bool leave = strcmp(o.verb, "leave") == 0;
	if (ol_cmd_wants_help(argc, argv)) { /* `cluster status --help` too, with or without etcd */
		usage(stdout);
		return 0;
	}
#ifdef OL_HAVE_NODE
	if (!init && !join && !leave && status_without_etcd(argc, argv))
		return ol_cmd_node(argc, argv);
#endif
	if (!init && !join && !leave && strcmp(o.verb, "status") != 0) {
		fprintf(stderr,
			"openlake cluster: unknown sub-command '%s' (init, join, leave, status)\n",
			o.verb);
		return 2;
	}
	int rc = parse(&o, argc, argv);
	if (rc) {
		if (rc == 1)
			usage(stdout);
		return rc == 1 ? 0 : rc;
	}
	if (init && !o.config) {
		fprintf(stderr, "openlake cluster init: --config FILE is needed (its [[nodes]], "
				"set_drive_count and default_parity_count make the layout)\n");
		return 2;
	}
	if (join && !o.config) {
		fprintf(stderr, "openlake cluster join: --config FILE is needed (its [[nodes]] "
				"that the layout lacks make the new pool)\n");
		return 2;
	}
	if (leave && o.pool < 0) {
		fprintf(stderr, "openlake cluster leave: --pool P is needed (the pool to drain and "
				"remove: `openlake cluster status` lists them)\n");
		return 2;
	}
	rc = load_config(&o);
	if (!rc && !o.etcd && !o.cfg->cluster_etcd[0]) {
		free(o.cfg);
		fprintf(stderr,
			"openlake cluster %s: no etcd: give --etcd URL or set [cluster] etcd in "
			"the config\n",
			o.verb);
		return 2;
	}
	if (!rc)
		rc = connect_etcd(&o) ? 2 : 0;
	if (!rc)
		rc = init    ? cluster_init(&o)
		     : join  ? cluster_join(&o)
		     : leave ? cluster_leave(&o)
			     : cluster_status(&o);
	ol_etcd_free(o.c);
	free(o.cfg);
	return rc;
}
