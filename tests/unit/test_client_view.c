/* tests/unit/test_client_view.c - libopenlake's placement (client/view.c) without a server:
 * weighted rendezvous on node ids gives each member its weight's share of the keys, a join
 * moves keys only to the new member (about its share), replicas are distinct members, the
 * static placement of a seed list is the address hash of before views; and the VIEW body's
 * codec (src/kv/proto.c): round trip, hostile lengths, a tag independent of member order. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "client_int.h"
#include "kv/proto.h"
#include "tap.h"

#define NKEYS 30000

static void
key_of(unsigned i, uint8_t k[32])
{
	for (int j = 0; j < 4; j++) {
		uint64_t h = XXH3_64bits_withSeed(&i, sizeof(i), (uint64_t)j);
		memcpy(k + 8 * j, &h, 8);
	}
}

static void
member(struct ol_client *c, struct olc_view *v, uint64_t id, uint32_t weight, const char *addr)
{
	uint8_t idb[8];
	for (int b = 0; b < 8; b++)
		idb[b] = (uint8_t)(id >> (8 * b));
	int nd = olc_node_add(c, addr);
	v->m[v->n++] = (struct olc_vmember){(uint32_t)nd, weight, id, XXH3_64bits(idb, 8)};
}

static void
test_weights_and_join(struct ol_client *c)
{
	static struct olc_view v3, v4;
	v3.cluster = true;
	member(c, &v3, 11, 3, "127.0.0.1:1");
	member(c, &v3, 12, 1, "127.0.0.1:2");
	member(c, &v3, 13, 1, "127.0.0.1:3");
	v4 = v3;
	member(c, &v4, 14, 1, "127.0.0.1:4");
	unsigned cnt[OLC_MAX_NODES] = {0}, moved = 0, wrong = 0, same_rep = 0;
	for (unsigned i = 0; i < NKEYS; i++) {
		uint8_t k[32];
		uint32_t a[2], b[OLC_MAX_REPLICAS];
		key_of(i, k);
		olc_place(c, &v3, k, a, 2);
		olc_place(c, &v4, k, b, 1);
		cnt[a[0]]++;
		same_rep += a[0] == a[1];
		if (a[0] != b[0]) {
			moved++;
			wrong += b[0] != v4.m[3].node;
		}
	}
	double s1 = (double)cnt[v3.m[0].node] / NKEYS, s2 = (double)cnt[v3.m[1].node] / NKEYS;
	ok(s1 > 0.57 && s1 < 0.63, "weight 3 of 5 gets 60%% of the keys (%.3f)", s1);
	ok(s2 > 0.18 && s2 < 0.22, "weight 1 of 5 gets 20%% (%.3f)", s2);
	double m = (double)moved / NKEYS;
	ok(m > 0.15 && m < 0.185, "a weight-1 join moves 1/6 of the keys (%.3f)", m);
	ok(wrong == 0, "every moved key moves to the new member (%u did not)", wrong);
	ok(same_rep == 0, "the two replicas of a key are distinct members");
	/* ids, not addresses: the same members listed in another order place the same */
	static struct olc_view r;
	r.cluster = true;
	for (int i = 2; i >= 0; i--)
		r.m[r.n++] = v3.m[i];
	unsigned diff = 0;
	for (unsigned i = 0; i < 2000; i++) {
		uint8_t k[32];
		uint32_t a, b;
		key_of(i, k);
		olc_place(c, &v3, k, &a, 1);
		olc_place(c, &r, k, &b, 1);
		diff += a != b;
	}
	ok(diff == 0, "placement does not depend on the members' order");
}

static void
test_static(struct ol_client *c)
{
	static struct olc_view v;
	v.cluster = false;
	v.n = 2;
	v.m[0].node = 0;
	v.m[1].node = 1;
	unsigned bad = 0;
	for (unsigned i = 0; i < 2000; i++) {
		uint8_t k[32];
		uint32_t a;
		key_of(i, k);
		olc_place(c, &v, k, &a, 1);
		uint64_t h0 = XXH3_64bits_withSeed(k, 32, c->nodes[0].seed ^ c->ns_seed);
		uint64_t h1 = XXH3_64bits_withSeed(k, 32, c->nodes[1].seed ^ c->ns_seed);
		bad += a != (h1 > h0 ? 1u : 0u);
	}
	ok(bad == 0, "a static seed list places keys by the address hash of before views");
}

static void
test_codec(void)
{
	static struct ol_kvp_view v, w, r;
	static uint8_t buf[1 << 17];
	v.epoch = 77;
	for (unsigned i = 0; i < 3; i++) {
		v.m[i].id = 100 + i;
		v.m[i].weight = i + 1;
		v.m[i].capacity = 1ull << 30;
		v.m[i].addr_len =
		    (uint16_t)snprintf(v.m[i].addr, sizeof(v.m[i].addr), "10.0.0.%u:9400", i);
	}
	v.n = 3;
	v.tag = ol_kvp_view_tag(&v);
	int n = ol_kvp_view_encode(buf, sizeof(buf), &v);
	ok(n > 0 && ol_kvp_view_decode(buf, (size_t)n, &w) == 0 && w.n == 3 && w.epoch == 77 &&
	       w.tag == v.tag && strcmp(w.m[2].addr, "10.0.0.2:9400") == 0 && w.m[1].weight == 2,
	   "VIEW body round trip");
	ok(ol_kvp_view_decode(buf, (size_t)n - 1, &w) == -EINVAL, "a cut VIEW body is refused");
	ok(ol_kvp_view_decode(buf, (size_t)n + 1, &w) == -EINVAL, "trailing bytes are refused");
	buf[12] = 0xff; /* n = 255 + ... : more members than bytes */
	ok(ol_kvp_view_decode(buf, (size_t)n, &w) == -EINVAL, "a count past the body is refused");
	r = v;
	r.m[0] = v.m[2];
	r.m[2] = v.m[0];
	ok(ol_kvp_view_tag(&r) == v.tag, "the tag does not depend on the members' order");
	r.m[0].weight++;
	ok(ol_kvp_view_tag(&r) != v.tag, "a weight change changes the tag");
	v.m[0].addr_len = 0;
	ok(ol_kvp_view_encode(buf, sizeof(buf), &v) == -EINVAL, "an empty address is not encoded");
}

int
main(void)
{
	const char *seeds[] = {"127.0.0.1:9", "127.0.0.1:10"};
	struct ol_client_opts o = {.size = sizeof(o), .nodes = seeds, .n_nodes = 2, .ns = "t"};
	struct ol_client *c = NULL;
	ok(ol_client_new(&o, &c) == 0, "client");
	test_static(c);
	test_weights_and_join(c);
	test_codec();
	ol_client_free(c);
	o.replicas = 5;
	ok(ol_client_new(&o, &c) == -EINVAL, "replicas above 4 are refused");
	tap_done();
}
