/* Unit tests of set leadership's pure parts (src/cluster/leader.c): what a node does about a set
 * given the leader key and its own lease (the fencing rule: never lead without a surely live
 * lease, never take a key of another lease), the margin, and the leader record's JSON. etcd
 * and real daemons: tests/integration/test_cluster_store.py. */
#include "cluster/cluster.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct ol_cluster_lead_in
base(void)
{
	return (struct ol_cluster_lead_in){.self_id = 2,
					   .has_slot = true,
					   .lease = 77,
					   .now_ms = 100000,
					   .lease_valid_until_ms = 104000,
					   .margin_ms = 1000};
}

static void
test_decide(void)
{
	struct ol_cluster_lead_in in = base();
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_CAMPAIGN, "no key, live lease, a slot: campaign");
	in.has_slot = false;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_NONE, "no slot in the set: never campaign");
	in = base();
	in.lease = 0;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_NONE, "no lease: no campaign");
	in = base();
	in.now_ms = in.lease_valid_until_ms - in.margin_ms;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_NONE,
	   "lease within the margin of its end: no campaign");

	in = base();
	in.key_present = true;
	in.key_node = 2;
	in.key_lease = 77;
	in.key_create_rev = 41;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_LEAD, "our key under our live lease: lead");
	in.now_ms = in.lease_valid_until_ms - in.margin_ms - 1;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_LEAD, "one ms before the margin: still lead");
	in.now_ms++;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_FOLLOW,
	   "at the margin: step down although etcd still shows our key");
	in = base();
	in.key_present = true;
	in.key_node = 2;
	in.key_lease = 76; /* an older lease of ours (we registered again after a lapse) */
	in.key_create_rev = 41;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_FOLLOW,
	   "our node id under a former lease: not ours to lead");
	in.key_lease = 77;
	in.key_node = 3;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_FOLLOW, "another node's key: follow");
	in.key_node = 2;
	in.key_create_rev = 0;
	ok(ol_cluster_lead_decide(&in) == OL_LEAD_FOLLOW, "a key without a revision: no epoch");

	ok(ol_cluster_lead_margin_ms(10) == 2500 && ol_cluster_lead_margin_ms(2) == 500 &&
	       ol_cluster_lead_margin_ms(1) == 500,
	   "margin: a quarter of the TTL, at least 500 ms");
	/* the margin keeps a leader from outliving its lease even with a TTL of 2 s */
	for (unsigned ttl = 2; ttl <= 60; ttl++)
		if (ol_cluster_lead_margin_ms(ttl) >= (int64_t)ttl * 1000) {
			ok(0, "margin shorter than the TTL %u", ttl);
			return;
		}
	ok(1, "margin shorter than every TTL from 2 to 60 s");
}

/* the rule the request path, the lease guard and a gain share: lead under the key's lease only
 * while it is this node's lease now and surely lives */
static void
test_lease_sure(void)
{
	ok(ol_cluster_lease_sure(77, 77, 100000, 104000, 1000), "our lease, 3 s before the bound");
	ok(ol_cluster_lease_sure(77, 77, 102999, 104000, 1000), "one ms before the margin: sure");
	ok(!ol_cluster_lease_sure(77, 77, 103000, 104000, 1000),
	   "at the margin: not sure (the guard gives the set up)");
	ok(!ol_cluster_lease_sure(77, 77, 200000, 104000, 1000), "long past the bound: not sure");
	ok(!ol_cluster_lease_sure(78, 77, 100000, 104000, 1000),
	   "registered again under a new lease: the key's lease is not ours now");
	ok(!ol_cluster_lease_sure(0, 0, 100000, 104000, 1000), "no lease: never sure");
	ok(!ol_cluster_lease_sure(77, 77, 100000, 0, 1000), "no bound known (0): not sure");
}

/* the rule of "Write quorum and leadership": who may campaign, and when a leader resigns */
static void
test_quorum(void)
{
	ok(ol_cluster_write_quorum(4, 1) == 3 && ol_cluster_write_quorum(4, 2) == 3 &&
	       ol_cluster_write_quorum(6, 2) == 4 && ol_cluster_write_quorum(12, 4) == 8 &&
	       ol_cluster_write_quorum(2, 1) == 2 && ol_cluster_write_quorum(1, 0) == 1,
	   "write quorum: max(k, N/2 + 1, P + 1)");
	ok(ol_cluster_may_lead(4, 1, 3, 4), "reaches 3 of 4 (quorum 3): may lead");
	ok(!ol_cluster_may_lead(4, 1, 1, 4),
	   "a leader cut from the other nodes, all of them live: may not lead");
	ok(!ol_cluster_may_lead(4, 1, 2, 4), "two half-connected nodes: neither may lead");
	ok(!ol_cluster_may_lead(4, 1, 2, 3), "reaches 2 of the 3 live: another node may reach 3");
	ok(ol_cluster_may_lead(4, 1, 2, 2),
	   "two nodes dead (their leases lapsed): nobody reaches a quorum, any may lead (reads)");
	ok(ol_cluster_may_lead(4, 2, 2, 2), "P = 2, two nodes live: lead for reads (k = 2)");
	/* whoever may lead while all are live reaches a quorum, and two quorums of one set
	 * overlap: for every (N, P) two nodes that both may lead share a reachable drive */
	for (unsigned n = 1; n <= 16; n++)
		for (unsigned p = 0; p < n; p++) {
			unsigned w = ol_cluster_write_quorum(n, p);
			if (w > n || 2 * w <= n) {
				ok(0, "quorum %u of N=%u P=%u: out of range or no overlap", w, n,
				   p);
				return;
			}
		}
	ok(1, "every write quorum (N <= 16) is a majority of the set's drives");
}

static void
test_record(void)
{
	char *js = ol_cluster_leader_to_json(3, "127.0.0.1:9000", "127.0.0.1:9100");
	struct ol_cluster_leader_info li;
	ok(js && ol_cluster_leader_parse(js, strlen(js), &li) == 0 && li.node == 3 &&
	       strcmp(li.s3_addr, "127.0.0.1:9000") == 0 &&
	       strcmp(li.rpc_addr, "127.0.0.1:9100") == 0 && li.epoch == 0 && !li.is_self,
	   "leader record round trip: %s", js ? js : "(null)");
	free(js);
	const char *bad[] = {"",
			     "[]",
			     "{\"node\":-1,\"s3\":\"a\",\"rpc_addr\":\"b\"}",
			     "{\"node\":70000,\"s3\":\"a\",\"rpc_addr\":\"b\"}",
			     "{\"node\":\"1\",\"s3\":\"a\",\"rpc_addr\":\"b\"}",
			     "{\"node\":1,\"rpc_addr\":\"b\"}",
			     "{\"node\":1,\"s3\":5,\"rpc_addr\":\"b\"}",
			     "{\"node\":1,\"s3\":\"a\"",
			     NULL};
	int good = 1;
	for (int i = 0; bad[i]; i++)
		good &= ol_cluster_leader_parse(bad[i], strlen(bad[i]), &li) == -EPROTO;
	ok(good, "malformed leader records are -EPROTO");
	char big[600];
	memset(big, 'x', sizeof(big));
	char doc[800];
	snprintf(doc, sizeof(doc), "{\"node\":1,\"s3\":\"%.*s\",\"rpc_addr\":\"b\"}", 590, big);
	ok(ol_cluster_leader_parse(doc, strlen(doc), &li) == -EPROTO,
	   "an address longer than the config allows is refused");
}

/* The head of a job record (job.c): what every reader of <prefix>jobs/<name> needs */
static void
test_job_head(void)
{
	static const char rec[] = "{\"state\":\"running\",\"job\":\"e36e\",\"node\":3,"
				  "\"epoch\":12345678901,\"cursor\":{\"key\":\"6b\"}}";
	static const char *const bad[] = {"",
					  "[]",
					  "{\"job\":\"a\"}",
					  "{\"state\":\"done\"}",
					  "{\"job\":1,\"state\":\"done\"}",
					  "{\"job\":\"a\",\"state\":\"done\",\"node\":-1}",
					  "{\"job\":\"a\",\"state\":\"done\",\"epoch\":\"5\"}",
					  "{\"job\":\"a\",\"state\":\"a-state-far-too-long\"}",
					  NULL};
	struct ol_cluster_job_head h;
	bool good = true;

	ok(ol_cluster_job_head_parse(rec, strlen(rec), &h) == 0 && strcmp(h.job, "e36e") == 0 &&
	       strcmp(h.state, "running") == 0 && h.node == 3 && h.epoch == 12345678901ULL,
	   "a job record's head: job, state, node, epoch");
	for (int i = 0; bad[i]; i++)
		good &= ol_cluster_job_head_parse(bad[i], strlen(bad[i]), &h) == -EPROTO;
	ok(good, "malformed job records are -EPROTO");
}

int
main(void)
{
	test_decide();
	test_lease_sure();
	test_quorum();
	test_record();
	test_job_head();
	tap_done();
}
