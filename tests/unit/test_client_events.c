/* tests/unit/test_client_events.c - ol_kv_events against real KV servers started in this
 * process: blocks evicted by a flood of puts into a small pool and deleted come back as events
 * to a TCP and a shared-memory client of their namespace, exactly those keys, in order, and
 * never to another namespace; next goes on where an answer was cut; EVENTS_NOW; node numbers
 * past the view; a server with [kv] removal_events = 0 does not advertise the op and is never
 * sent it (the connection it would close stays usable). */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "kv/kv.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB  (1024u * 1024u)
#define NBLK 40

static struct ol_client *
mk(const char *addr, const char *dev, const char *ns)
{
	const char *nodes[] = {addr};
	struct ol_client_opts o = {.size = sizeof(o),
				   .nodes = nodes,
				   .n_nodes = 1,
				   .device = dev,
				   .ns = ns,
				   .timeout_ms = 10000};
	struct ol_client *c = NULL;
	return ol_client_new(&o, &c) == 0 ? c : NULL;
}

static int
start(struct ol_kv_server **s, char *addr, size_t cap, char *shm, size_t shm_cap, int i,
      uint64_t events)
{
	struct ol_config cfg;
	ol_config_default(&cfg);
	snprintf(cfg.kv_addr, sizeof(cfg.kv_addr), "127.0.0.1:0");
	cfg.kv_spill_dir[0] = '\0';
	cfg.kv_spill_bytes = 0;
	cfg.kv_dram_bytes = 16ull << 20;
	cfg.kv_removal_events = events;
	snprintf(shm, shm_cap, "/olkv-events-%d-%d", (int)getpid(), i);
	snprintf(cfg.kv_shm_name, sizeof(cfg.kv_shm_name), "%s", shm);
	if (ol_kv_server_start(&cfg, s) != 0)
		return -1;
	snprintf(addr, cap, "127.0.0.1:%u", ol_kv_server_port(*s));
	return 0;
}

static uint8_t val[MiB];

static int
put1(struct ol_client *c, uint64_t id)
{
	uint8_t k[32];
	make_key(k, id);
	struct ol_iov v = {val, sizeof(val)};
	struct ol_kv_op op = {.key = k, .iov = &v, .iovcnt = 1};
	return ol_kv_put(c, &op, 1) == 0 ? op.status : -1;
}

static int
op1(struct ol_client *c, int (*fn)(struct ol_client *, struct ol_kv_op *, size_t), uint64_t id)
{
	uint8_t k[32];
	make_key(k, id);
	struct ol_kv_op op = {.key = k};
	return fn(c, &op, 1) == 0 ? op.status : -1;
}

/* Which id make_key gave key (ids < 1000), or -1. */
static int
id_of(const uint8_t key[32])
{
	uint8_t k[32];
	for (int id = 0; id < 1000; id++) {
		make_key(k, (uint64_t)id);
		if (memcmp(k, key, 32) == 0)
			return id;
	}
	return -1;
}

static uint8_t keys[2048][32];

/* Every event from *from on (answers of at most max keys), into ids; *from moves on. */
static int
drain(struct ol_client *c, uint64_t *from, size_t max, int *ids, uint32_t *flags_or)
{
	int n = 0, r;
	uint64_t next;
	uint32_t fl;
	*flags_or = 0;
	do {
		r = ol_kv_events(c, 0, *from, keys, max, &next, &fl);
		if (r < 0)
			return r;
		for (int i = 0; i < r && n < 1000; i++)
			ids[n++] = id_of(keys[i]);
		*from = next;
		*flags_or |= fl;
	} while ((size_t)r == max && max > 0);
	return n;
}

static void
test_events(const char *addr, const char *dev)
{
	struct ol_client *a = mk(addr, dev, "events-a"), *b = mk(addr, dev, "events-b");
	uint64_t fa, fb, next;
	uint32_t fl;
	int ids[1000];
	ok(a && b, "%s: clients of namespaces events-a and events-b", dev);
	if (!a || !b)
		goto out;
	ok(ol_kv_events(a, 0, OL_KV_EVENTS_NOW, keys, 16, &fa, &fl) == 0 && fl == 0,
	   "%s: EVENTS_NOW: no keys, where to start (%llu)", dev, (unsigned long long)fa);
	ok(ol_kv_events(b, 0, OL_KV_EVENTS_NOW, NULL, 0, &fb, &fl) == 0,
	   "%s: the same with no key buffer", dev);
	int good = 1;
	for (uint64_t i = 0; i < NBLK; i++)
		good &= put1(a, 100 + i) == OL_KV_OK;
	ok(good, "%s: %d blocks of 1 MiB into a 16 MiB pool", dev, NBLK);
	bool gone[NBLK];
	int ngone = 0;
	for (int i = 0; i < NBLK; i++) {
		gone[i] = op1(a, ol_kv_exists, 100 + (uint64_t)i) == OL_KV_MISS;
		ngone += gone[i];
	}
	int n = drain(a, &fa, 5, ids, &fl);
	bool exact = n == ngone && fl == 0;
	for (int i = 0; exact && i < n; i++)
		exact = ids[i] >= 100 && ids[i] < 100 + NBLK && gone[ids[i] - 100] &&
			(i == 0 || ids[i] > ids[i - 1]);
	ok(ngone > 0 && exact,
	   "%s: an event for exactly each evicted block (%d of %d), oldest first, in answers of 5",
	   dev, n, ngone);
	ok(op1(a, ol_kv_delete, 100 + NBLK - 1) == OL_KV_OK, "%s: delete a stored block", dev);
	n = drain(a, &fa, 64, ids, &fl);
	ok(n == 1 && ids[0] == 100 + NBLK - 1, "%s: its event", dev);
	n = drain(b, &fb, 64, ids, &fl);
	ok(n == 0, "%s: the other namespace sees none of them", dev);
	ok(ol_kv_events(a, 0, fa, keys, 64, &next, &fl) == 0 && next == fa,
	   "%s: nothing new: next stays", dev);
	ok(ol_kv_events(a, 1, 0, keys, 64, &next, &fl) == -ERANGE, "%s: node 1: -ERANGE", dev);
	ok(ol_kv_events(a, 0, 0, NULL, 4, &next, &fl) == -EINVAL &&
	       ol_kv_events(a, 0, 0, keys, 4, NULL, &fl) == -EINVAL &&
	       ol_kv_events(NULL, 0, 0, keys, 4, &next, &fl) == -EINVAL,
	   "%s: bad arguments: -EINVAL", dev);
	/* clean up for the next round: the pool's blocks of a go */
	for (uint64_t i = 0; i < NBLK; i++)
		op1(a, ol_kv_delete, 100 + i);
out:
	ol_client_free(a);
	ol_client_free(b);
}

static void
test_off(const char *addr)
{
	struct ol_client *c = mk(addr, "tcp", "events-off");
	uint64_t next = 7;
	uint32_t fl = 9;
	ok(c && ol_kv_events(c, 0, 0, keys, 16, &next, &fl) == -ENOTSUP && next == 7,
	   "a server without the EVENTS flag: -ENOTSUP, nothing asked");
	ok(c && put1(c, 5) == OL_KV_OK && op1(c, ol_kv_exists, 5) == OL_KV_OK,
	   "the pooled connection still works (the op was never sent: it would close it)");
	char json[8192];
	ok(c && ol_kv_stats(c, json, sizeof(json)) > 0 && strstr(json, "\"up\":true"),
	   "and the node is not marked down");
	ol_client_free(c);
}

int
main(void)
{
	ol_log_threshold = OL_LOG_WARN;
	struct ol_kv_server *s[2] = {NULL, NULL};
	char addr[2][64], shm[2][64];
	if (start(&s[0], addr[0], sizeof(addr[0]), shm[0], sizeof(shm[0]), 0, 65536) != 0 ||
	    start(&s[1], addr[1], sizeof(addr[1]), shm[1], sizeof(shm[1]), 1, 0) != 0) {
		printf("1..0 # SKIP cannot start two KV servers\n");
		return 77;
	}
	test_events(addr[0], "tcp");
	test_events(addr[0], "local");
	test_off(addr[1]);
	for (int i = 0; i < 2; i++) {
		ol_kv_server_stop(s[i]);
		shm_unlink(shm[i]);
	}
	tap_done();
}
