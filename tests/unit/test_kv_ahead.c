/* tests/unit/test_kv_ahead.c - COMMIT_ALLOC (op 15, docs/kv-protocol.md): the engine's
 * ol_kve_commit_as (a slot reserved under one key published under another, in its own stripe
 * and moved across stripes; EXISTS; another namespace; the old sequence after a move; eviction
 * and deletion of moved blocks), and the server's handling of the frame on a connection with a
 * shm grant (kvs_precheck, kvs_handle): reservations ahead and their reply, the per-connection
 * pin cap, commits of slots the connection does not hold, the refusal without a grant. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kv/engine.h"
#include "kv/proto.h"
#include "kv/server_int.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB (1u << 20)

static uint8_t NS_A[16], NS_B[16];

static struct ol_kve *
open_eng(uint64_t dram)
{
	struct ol_kve_opts o = {.dram_bytes = dram, .max_block = 64 * MiB};
	struct ol_kve *e = NULL;
	return ol_kve_open(&o, &e) == 0 ? e : NULL;
}

static void
key_of(struct ol_kvk *k, const uint8_t *ns, uint64_t id)
{
	uint8_t raw[32];
	make_key(raw, id);
	ol_kve_key(k, raw, ns);
}

/* OL_KV_OK when id holds len bytes of pattern seed (and the stripe its slot's seq names). */
static int
check(struct ol_kve *e, const uint8_t *ns, uint64_t id, size_t len, uint64_t seed, unsigned *sid)
{
	struct ol_kvk k;
	struct ol_kve_slot s;
	key_of(&k, ns, id);
	int st = ol_kve_pin(e, &k, true, &s);
	if (st != OL_KV_OK)
		return st;
	if (s.len != len || !check_pattern(s.ptr, len, seed))
		st = OL_KV_CORRUPT;
	if (sid)
		*sid = (unsigned)(s.seq & 0xff);
	ol_kve_release(e, s.off, s.seq);
	return st;
}

static void
test_commit_as(void)
{
	struct ol_kve *e = open_eng(64 * MiB);
	ok(e != NULL, "engine opens");
	unsigned same = 0, moved = 0, bad = 0, stale_ok = 0;
	for (uint64_t i = 0; i < 200; i++) {
		struct ol_kvk held, real;
		struct ol_kve_slot s;
		key_of(&held, NS_A, 1000000 + i); /* the placeholder: never stored */
		key_of(&real, NS_A, i);
		size_t len = 4096 + (size_t)i * 7;
		if (ol_kve_alloc(e, &held, len, &s) != OL_KV_OK) {
			bad++;
			continue;
		}
		fill_pattern(s.ptr, len, i);
		unsigned sid0 = (unsigned)(s.seq & 0xff), sid1 = 0;
		if (ol_kve_commit_as(e, &real, s.off, s.seq, len) != OL_KV_OK ||
		    check(e, NS_A, i, len, i, &sid1) != OL_KV_OK)
			bad++;
		struct ol_kvk k2;
		uint64_t l2;
		key_of(&k2, NS_A, 1000000 + i);
		if (ol_kve_exists(e, &k2, &l2) != OL_KV_MISS)
			bad++;
		if (sid0 == sid1) {
			same++;
		} else {
			moved++;
			/* the old (off, seq) names nothing now */
			stale_ok += ol_kve_commit_as(e, &real, s.off, s.seq, len) == OL_KV_ERROR;
			ol_kve_release(e, s.off, s.seq);
		}
	}
	ok(bad == 0,
	   "200 slots reserved under placeholders, published under their keys, read back");
	ok(same > 0 && moved > 0, "both cases met: same stripe (%u), moved across stripes (%u)",
	   same, moved);
	ok(stale_ok == moved, "a moved slot's old sequence commits nothing (%u of %u)", stale_ok,
	   moved);
	bad = 0;
	for (uint64_t i = 0; i < 200; i++)
		bad += check(e, NS_A, i, 4096 + (size_t)i * 7, i, NULL) != OL_KV_OK;
	ok(bad == 0, "after stale releases every block is intact");

	/* EXISTS: the slot is freed; another namespace: refused */
	struct ol_kvk held, real, other;
	struct ol_kve_slot s;
	struct ol_kve_stats st0, st1;
	ol_kve_get_stats(e, &st0);
	key_of(&held, NS_A, 2000000);
	key_of(&real, NS_A, 5);
	ok(ol_kve_alloc(e, &held, 8192, &s) == OL_KV_OK, "reserve");
	ok(ol_kve_commit_as(e, &real, s.off, s.seq, 8192) == OL_KV_EXISTS,
	   "commit_as of a stored key: EXISTS");
	ol_kve_get_stats(e, &st1);
	ok(st1.dram_used == st0.dram_used, "... and the slot is freed");
	ok(check(e, NS_A, 5, 4096 + 35, 5, NULL) == OL_KV_OK, "... the stored value stays");
	key_of(&held, NS_A, 2000001);
	key_of(&other, NS_B, 7);
	ok(ol_kve_alloc(e, &held, 8192, &s) == OL_KV_OK, "reserve in namespace A");
	ok(ol_kve_commit_as(e, &other, s.off, s.seq, 8192) == OL_KV_ERROR,
	   "commit_as into namespace B: ERROR");
	ok(ol_kve_commit_as(e, &real, s.off, s.seq, 8193) == OL_KV_ERROR,
	   "commit_as longer than reserved: ERROR");
	ol_kve_release(e, s.off, s.seq);

	/* deletes and evictions of moved blocks free their slots */
	for (uint64_t i = 0; i < 200; i++) {
		key_of(&real, NS_A, i);
		ol_kve_delete(e, &real);
	}
	ol_kve_get_stats(e, &st1);
	ok(st1.dram_used == 0, "every moved block deleted: the tier is empty (%llu)",
	   (unsigned long long)st1.dram_used);
	bad = 0;
	for (uint64_t i = 0; i < 100; i++) { /* 100 x 2 MiB through a 64 MiB tier */
		key_of(&held, NS_A, 3000000 + i);
		key_of(&real, NS_A, 4000000 + i);
		if (ol_kve_alloc(e, &held, 2 * MiB, &s) != OL_KV_OK) {
			bad++;
			continue;
		}
		fill_pattern(s.ptr, 2 * MiB, i);
		bad += ol_kve_commit_as(e, &real, s.off, s.seq, 2 * MiB) != OL_KV_OK;
	}
	ok(bad == 0, "200 MiB of moved blocks through a 64 MiB tier (evictions)");
	ok(check(e, NS_A, 4000099, 2 * MiB, 99, NULL) == OL_KV_OK, "the newest reads back");
	ol_kve_close(e);
}

/* A connection as the loops make one after HELLO on the Unix socket with a grant. */
static struct conn *
conn_new(struct ol_kv_server *s, bool local)
{
	struct conn *c = calloc(1, sizeof(*c));
	c->s = s;
	c->local = local;
	c->authed = true;
	c->hello = true;
	memcpy(c->ns, NS_A, 16);
	for (unsigned i = 0; i < OL_KVP_NONCE; i++)
		c->nonce[i] = (uint8_t)(i * 37 + 1);
	pthread_mutex_init(&c->pmu, NULL);
	c->ents = malloc(64 * OL_KVP_REQ_ENT);
	c->reps = (uint8_t *)malloc(OL_KVP_HDR + 64 * OL_KVP_REP_ENT) + OL_KVP_HDR;
	return c;
}

static void
conn_free(struct conn *c)
{
	for (size_t i = 0; i < c->n_pins; i++)
		ol_kve_release(c->s->eng, c->pins[i].off, c->pins[i].seq);
	free(c->pins);
	free(c->ents);
	free(c->reps - OL_KVP_HDR);
	pthread_mutex_destroy(&c->pmu);
	free(c);
}

/* Run one COMMIT_ALLOC frame of n entries; reps[i] get the reply entries. */
static int
frame(struct conn *c, const struct ol_kvp_req_ent *ents, uint32_t n, struct ol_kvp_rep_ent *reps)
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC,
			       OL_KVP_VERSION,
			       OL_KVP_COMMIT_ALLOC,
			       0,
			       n,
			       0,
			       1,
			       (uint64_t)n * OL_KVP_REQ_ENT};
	struct ol_kvp_limits lim = {OL_KVP_MAX_BATCH, 64 * MiB};
	int r = ol_kvp_check_req(&h, &lim);
	if (r == 0)
		r = kvs_precheck(c, &h);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < n; i++)
		ol_kvp_req_ent_encode(c->ents + (size_t)i * OL_KVP_REQ_ENT, &ents[i]);
	r = kvs_handle(c, &h, c->ents);
	if (r < 0)
		return r;
	if (!c->out_reply || c->out_count != n || c->out_len != (size_t)n * OL_KVP_REP_ENT)
		return -EPROTO;
	for (uint32_t i = 0; i < n; i++)
		ol_kvp_rep_ent_decode(c->reps + (size_t)i * OL_KVP_REP_ENT, &reps[i]);
	return 0;
}

static struct ol_kvp_req_ent
ent(uint64_t id, uint64_t len, uint64_t off, uint64_t seq)
{
	struct ol_kvp_req_ent e = {{0}, len, off, seq};
	make_key(e.key, id);
	return e;
}

static void
test_frames(void)
{
	struct ol_kv_server s;
	memset(&s, 0, sizeof(s));
	s.eng = open_eng(64 * MiB);
	s.ttl_ms = 60000;
	s.max_pins_conn = 4;
	s.max_pins = 1u << 20;
	uint8_t *base = ol_kve_shm_base(s.eng);
	struct conn *c = conn_new(&s, true);
	struct ol_kvp_req_ent q[8];
	struct ol_kvp_rep_ent r[8];

	for (int i = 0; i < 6; i++)
		q[i] = ent(0, MiB, 0, 0);
	ok(frame(c, q, 6, r) == 0, "COMMIT_ALLOC of 6 reservations is answered");
	ok(r[0].status == OL_KV_OK && r[3].status == OL_KV_OK && r[4].status == OL_KV_FULL &&
	       r[5].status == OL_KV_FULL,
	   "4 reserved, then full: max_pins_per_connection (4) bounds them");
	ok(r[0].len == 60000 && r[0].off != 0 && r[0].seq != 0 && r[0].off != r[1].off,
	   "a reservation's reply: its slot and the TTL in ms");
	ok(c->n_pins == 4 && atomic_load(&s.n_pins) == 4, "they are the connection's pins");
	struct ol_kvp_rep_ent held[4];
	memcpy(held, r, sizeof(held));

	/* fill two, commit them under real keys, and reserve one more in the same frame */
	fill_pattern(base + held[0].off, MiB, 1);
	fill_pattern(base + held[1].off, 1000, 2);
	q[0] = ent(1, MiB, held[0].off, held[0].seq);
	q[1] = ent(2, 1000, held[1].off, held[1].seq);
	q[2] = ent(0, MiB, 0, 0);
	ok(frame(c, q, 3, r) == 0, "COMMIT_ALLOC of 2 commits and 1 reservation is answered");
	ok(r[0].status == OL_KV_OK && r[1].status == OL_KV_OK && r[0].len == MiB &&
	       r[1].len == 1000,
	   "both committed (a shorter value into a larger reservation too)");
	ok(r[2].status == OL_KV_OK && c->n_pins == 3, "... the reservation reuses a freed pin");
	ok(check(s.eng, NS_A, 1, MiB, 1, NULL) == OL_KV_OK &&
	       check(s.eng, NS_A, 2, 1000, 2, NULL) == OL_KV_OK,
	   "the committed blocks read back under their keys");

	/* slots that are not this connection's (any more) commit nothing */
	q[0] = ent(3, MiB, held[0].off, held[0].seq);
	q[1] = ent(4, MiB, held[2].off, held[2].seq + 256);
	q[2] = ent(5, MiB, 4096, 1);
	ok(frame(c, q, 3, r) == 0 && r[0].status == OL_KV_ERROR && r[1].status == OL_KV_ERROR &&
	       r[2].status == OL_KV_ERROR,
	   "a committed slot, a wrong sequence, a made-up slot: ERROR each");
	ok(check(s.eng, NS_A, 1, MiB, 1, NULL) == OL_KV_OK, "the first block is untouched");
	q[0] = ent(1, MiB, held[2].off, held[2].seq);
	ok(frame(c, q, 1, r) == 0 && r[0].status == OL_KV_EXISTS && c->n_pins == 2,
	   "a commit under a stored key: EXISTS, the reservation is gone");

	struct conn *t = conn_new(&s, false);
	ok(frame(t, q, 1, r) == -ECANCELED && t->out_status == -EPERM,
	   "without a shm grant: an EPERM frame, then a close");
	struct ol_kvp_hdr h16 = {OL_KVP_MAGIC, OL_KVP_VERSION, 16, 0, 0, 0, 1, 0};
	struct ol_kvp_limits lim = {OL_KVP_MAX_BATCH, 64 * MiB};
	ok(ol_kvp_check_req(&h16, &lim) < 0, "op 16 is still unknown");
	conn_free(t);
	conn_free(c);
	struct ol_kve_stats st;
	ol_kve_get_stats(s.eng, &st);
	ok(st.dram_entries == 2 && st.pinned == 0,
	   "the connection's end released its reservations: the two blocks remain");
	ol_kve_close(s.eng);
}

int
main(void)
{
	ol_log_threshold = OL_LOG_ERROR;
	ol_kve_ns_hash("model-a", 7, NS_A);
	ol_kve_ns_hash("model-b", 7, NS_B);
	test_commit_as();
	test_frames();
	tap_done();
}
