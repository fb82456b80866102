/* tests/unit/test_client.c - libopenlake against real servers (child processes of this binary
 * on 127.0.0.1 ephemeral ports): TCP and shared-memory round trips of thousands of blocks
 * (4 KiB .. 32 MiB) with scatter/gather, namespaces, statuses, concurrent clients on the same
 * keys with no torn read, a two-node pool with one node killed, kill -9 + NVMe recovery. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/config.h"
#include "base/log.h"
#include "kv/kv.h"
#include "kv/net.h"
#include "kv/proto.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define MiB (1u << 20)
#define KiB 1024u

/* ---- server child ---- */

static int
server_main(char **argv)
{
	struct ol_config cfg;
	ol_config_default(&cfg);
	ol_log_threshold = OL_LOG_WARN;
	snprintf(cfg.kv_addr, sizeof(cfg.kv_addr), "127.0.0.1:%s", argv[5]);
	snprintf(cfg.kv_spill_dir, sizeof(cfg.kv_spill_dir), "%s", argv[2]);
	cfg.kv_spill_bytes = strcmp(argv[2], "-") == 0 ? 0 : 512ull * MiB;
	cfg.kv_dram_bytes = strtoull(argv[3], NULL, 10) * MiB;
	cfg.kv_writeback_ms = (unsigned)strtoul(argv[4], NULL, 10);
	if (strcmp(argv[6], "default") != 0)
		snprintf(cfg.kv_shm_name, sizeof(cfg.kv_shm_name), "%s", argv[6]);
	struct ol_kv_server *s;
	if (ol_kv_server_start(&cfg, &s) != 0)
		return 1;
	printf("PORT %u\n", ol_kv_server_port(s));
	fflush(stdout);
	char b;
	while (read(0, &b, 1) > 0) /* until the parent closes our stdin (or dies) */
		;
	ol_kv_server_stop(s);
	return 0;
}

struct child {
	pid_t pid;
	int in_fd;
	unsigned port;
	char addr[64];
	char shm[64]; /* its DRAM tier: a SIGKILLed server cannot unlink it, we do */
};

static int spawn_default_shm; /* next spawn: let the server pick its shm name */

static int
spawn(struct child *ch, const char *spill, unsigned dram_mib, unsigned wb_ms, unsigned port)
{
	int in[2], out[2];
	char dram[16], wb[16], prt[16], shm[64];
	snprintf(dram, sizeof(dram), "%u", dram_mib);
	snprintf(wb, sizeof(wb), "%u", wb_ms);
	snprintf(prt, sizeof(prt), "%u", port);
	snprintf(shm, sizeof(shm), "/olkv-test-%d-%u", (int)getpid(),
		 port ? port : (unsigned)rand());
	if (spawn_default_shm)
		snprintf(shm, sizeof(shm), "default");
	if (pipe(in) != 0 || pipe(out) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		char *args[] = {"test_client", "--server", (char *)spill, dram, wb, prt, shm, NULL};
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	ch->pid = pid;
	ch->in_fd = in[1];
	snprintf(ch->shm, sizeof(ch->shm), "%s", shm);
	char buf[64] = {0};
	size_t n = 0;
	struct pollfd p = {out[0], POLLIN, 0};
	while (n < sizeof(buf) - 1 && !strchr(buf, '\n') && poll(&p, 1, 10000) == 1) {
		ssize_t r = read(out[0], buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(out[0]);
	if (sscanf(buf, "PORT %u", &ch->port) != 1)
		return -1;
	snprintf(ch->addr, sizeof(ch->addr), "127.0.0.1:%u", ch->port);
	return 0;
}

static void
stop_child(struct child *ch)
{
	close(ch->in_fd);
	waitpid(ch->pid, NULL, 0);
}

/* SIGSTOP and wait until every thread of the child is stopped. */
static void
stop_hard(pid_t pid)
{
	char path[64], buf[512];
	kill(pid, SIGSTOP);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		const char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(5000);
	}
}

static void
kill_child(struct child *ch)
{
	kill(ch->pid, SIGKILL);
	waitpid(ch->pid, NULL, 0);
	close(ch->in_fd);
	shm_unlink(ch->shm); /* else its pages stay in /dev/shm */
}

/* ---- client helpers ---- */

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ol_client *
mk_client(const char *const *nodes, size_t n, const char *dev, const char *ns, unsigned tmo)
{
	struct ol_client_opts o = {.size = sizeof(o),
				   .nodes = nodes,
				   .n_nodes = n,
				   .device = dev,
				   .ns = ns,
				   .timeout_ms = tmo};
	struct ol_client *c = NULL;
	return ol_client_new(&o, &c) == 0 ? c : NULL;
}

struct blk {
	uint8_t key[32];
	size_t len;
	uint64_t seed;
	uint8_t *buf;
	struct ol_iov iov[3];
};

/* Run op over n blocks in batches; put splits each value in 3 iovs, get in 2 (other split). */
static void
blocks_op(struct ol_client *c, int put, struct blk *b, size_t n, size_t batch, int32_t *st,
	  uint64_t *vlen)
{
	struct ol_kv_op *ops = calloc(batch, sizeof(*ops));
	for (size_t i = 0; i < n; i += batch) {
		size_t m = n - i < batch ? n - i : batch;
		for (size_t j = 0; j < m; j++) {
			struct blk *x = &b[i + j];
			size_t a = x->len / 3, bb = x->len / 2;
			if (put) {
				x->iov[0] = (struct ol_iov){x->buf, a};
				x->iov[1] = (struct ol_iov){x->buf + a, bb - a};
				x->iov[2] = (struct ol_iov){x->buf + bb, x->len - bb};
			} else {
				memset(x->buf, 0, x->len);
				x->iov[0] = (struct ol_iov){x->buf, x->len / 5};
				x->iov[1] =
				    (struct ol_iov){x->buf + x->len / 5, x->len - x->len / 5};
			}
			ops[j] = (struct ol_kv_op){x->key, x->iov, put ? 3 : 2, 0, -1, 0};
		}
		int r = put ? ol_kv_put(c, ops, m) : ol_kv_get(c, ops, m);
		for (size_t j = 0; j < m; j++) {
			st[i + j] = r == 0 ? ops[j].status : -1;
			if (vlen)
				vlen[i + j] = ops[j].value_len;
		}
	}
	free(ops);
}

static struct blk *
mk_blocks(size_t n, uint64_t first_id, size_t (*len_of)(size_t), uint64_t salt)
{
	struct blk *b = calloc(n, sizeof(*b));
	for (size_t i = 0; i < n; i++) {
		make_key(b[i].key, first_id + i);
		b[i].len = len_of(i);
		b[i].seed = (first_id + i) * 31 + salt;
		b[i].buf = malloc(b[i].len ? b[i].len : 1);
		fill_pattern(b[i].buf, b[i].len, b[i].seed);
	}
	return b;
}

static void
free_blocks(struct blk *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(b[i].buf);
	free(b);
}

/* Number of blocks whose status is OL_KV_OK and (for gets) whose content is right; the
 * other outcomes are listed as a TAP comment. */
static size_t
count_ok(struct blk *b, size_t n, const int32_t *st, int check)
{
	size_t good = 0, by[OL_KV_STATUS_COUNT + 1] = {0};
	for (size_t i = 0; i < n; i++) {
		int fine =
		    st[i] == OL_KV_OK && (!check || check_pattern(b[i].buf, b[i].len, b[i].seed));
		good += fine;
		if (!fine)
			by[st[i] >= 0 && st[i] < OL_KV_STATUS_COUNT ? st[i] : OL_KV_STATUS_COUNT]++;
	}
	for (int k = 0; k <= OL_KV_STATUS_COUNT; k++)
		if (by[k])
			printf("# %zu blocks: %s\n", by[k],
			       k == OL_KV_OK ? "ok but wrong content" : ol_kv_status_str(k));
	return good;
}

static size_t
len_small(size_t i)
{
	return 4 * KiB + (i * 4099) % (60 * KiB);
}

static size_t
len_big(size_t i)
{
	static const size_t s[] = {MiB, 2 * MiB, 3 * MiB + 17, 8 * MiB, 32 * MiB};
	return s[i % 5];
}

static size_t
len_mixed(size_t i)
{
	return 4 * KiB + (i * 7919) % (256 * KiB);
}

/* ---- tests ---- */

static void
test_roundtrips(struct child *s1)
{
	const char *nodes[] = {s1->addr};
	struct ol_client *tcp = mk_client(nodes, 1, "tcp", "model-a", 5000);
	struct ol_client *loc = mk_client(nodes, 1, "local", "model-a", 5000);
	ok(tcp && loc, "clients created (tcp, local)");
	size_t n = 2000;
	int32_t *st = calloc(n, sizeof(*st));
	struct blk *b = mk_blocks(n, 1, len_small, 0);
	blocks_op(tcp, 1, b, n, 250, st, NULL);
	ok(count_ok(b, n, st, 0) == n, "TCP: put %zu blocks of 4..64 KiB (3 iovs each)", n);
	blocks_op(tcp, 0, b, n, 250, st, NULL);
	ok(count_ok(b, n, st, 1) == n, "TCP: get them back (2 iovs each), content checked");
	blocks_op(loc, 0, b, n, 500, st, NULL);
	ok(count_ok(b, n, st, 1) == n, "local shm: get the TCP-put blocks, content checked");
	free_blocks(b, n);

	b = mk_blocks(1000, 100000, len_small, 5);
	blocks_op(loc, 1, b, 1000, 1000, st, NULL);
	ok(count_ok(b, 1000, st, 0) == 1000, "local shm: put 1000 blocks in one batch");
	blocks_op(tcp, 0, b, 1000, 100, st, NULL);
	ok(count_ok(b, 1000, st, 1) == 1000, "TCP: get the shm-put blocks, content checked");
	blocks_op(loc, 0, b, 1000, 1000, st, NULL);
	ok(count_ok(b, 1000, st, 1) == 1000, "local shm: get them back");
	free_blocks(b, 1000);

	b = mk_blocks(5, 200000, len_big, 0);
	blocks_op(tcp, 1, b, 5, 5, st, NULL);
	ok(count_ok(b, 5, st, 0) == 5, "TCP: put 1, 2, 3+, 8, 32 MiB blocks");
	blocks_op(loc, 0, b, 5, 5, st, NULL);
	ok(count_ok(b, 5, st, 1) == 5, "local: get the big blocks, content checked");
	blocks_op(tcp, 0, b, 5, 5, st, NULL);
	ok(count_ok(b, 5, st, 1) == 5, "TCP: get the big blocks, content checked");
	free_blocks(b, 5);

	b = mk_blocks(5, 300000, len_big, 1);
	blocks_op(loc, 1, b, 5, 5, st, NULL);
	ok(count_ok(b, 5, st, 0) == 5, "local: put big blocks");
	blocks_op(tcp, 0, b, 5, 5, st, NULL);
	ok(count_ok(b, 5, st, 1) == 5, "TCP: get big blocks put through shm");
	free_blocks(b, 5);

	char json[8192];
	int jl = ol_kv_stats(loc, json, sizeof(json));
	ok(jl > 0 && strstr(json, "\"local\":true") && strstr(json, "\"hits\":"),
	   "stats JSON from the local client (%d bytes)", jl);
	ok(ol_kv_stats(loc, json, 10) == -ENOSPC, "stats into a tiny buffer: -ENOSPC");
	free(st);
	ol_client_free(tcp);
	ol_client_free(loc);
}

static void
test_statuses(struct child *s1)
{
	const char *nodes[] = {s1->addr};
	struct ol_client *a = mk_client(nodes, 1, "local", "model-a/bf16/tp0", 5000);
	struct ol_client *b = mk_client(nodes, 1, "tcp", "model-b/bf16/tp0", 5000);
	uint8_t key[32], v1[5000], v2[5000], out[5000];
	make_key(key, 777);
	fill_pattern(v1, sizeof(v1), 1);
	fill_pattern(v2, sizeof(v2), 2);
	struct ol_iov i1 = {v1, sizeof(v1)}, i2 = {v2, sizeof(v2)}, io = {out, sizeof(out)};
	struct ol_kv_op op = {key, &i1, 1, 0, -1, 0};
	ok(ol_kv_put(a, &op, 1) == 0 && op.status == OL_KV_OK, "ns A: put");
	op.status = -1;
	ok(ol_kv_put(a, &op, 1) == 0 && op.status == OL_KV_EXISTS, "ns A: put again -> EXISTS");
	op = (struct ol_kv_op){key, &io, 1, 0, -1, 0};
	ok(ol_kv_get(b, &op, 1) == 0 && op.status == OL_KV_MISS, "ns B: same key -> MISS");
	op = (struct ol_kv_op){key, &i2, 1, 0, -1, 0};
	ok(ol_kv_put(b, &op, 1) == 0 && op.status == OL_KV_OK, "ns B: put its own value");
	op = (struct ol_kv_op){key, &io, 1, 0, -1, 0};
	ok(ol_kv_get(a, &op, 1) == 0 && op.status == OL_KV_OK && memcmp(out, v1, sizeof(v1)) == 0,
	   "ns A still reads its value");
	op = (struct ol_kv_op){key, NULL, 0, 0, -1, 0};
	ok(ol_kv_exists(b, &op, 1) == 0 && op.status == OL_KV_OK && op.value_len == sizeof(v2),
	   "exists: OK with value_len");
	struct ol_iov small = {out, 100};
	struct ol_kv_op ops2[2] = {{key, &small, 1, 0, -1, 0}, {key, &small, 1, 0, -1, 0}};
	ok(ol_kv_get(a, ops2, 1) == 0 && ops2[0].status == OL_KV_TRUNCATED &&
	       ops2[0].value_len == sizeof(v1),
	   "local get into a small buffer: TRUNCATED with the real size");
	ok(ol_kv_get(b, ops2 + 1, 1) == 0 && ops2[1].status == OL_KV_TRUNCATED &&
	       ops2[1].value_len == sizeof(v2),
	   "TCP get into a small buffer: TRUNCATED with the real size");
	op = (struct ol_kv_op){key, NULL, 0, 0, -1, 0};
	ok(ol_kv_lease(b, &op, 1, 30000) == 0 && op.status == OL_KV_OK &&
	       op.value_len == sizeof(v2),
	   "lease: OK with value_len");
	op = (struct ol_kv_op){key, NULL, 0, 0, -1, 0};
	ok(ol_kv_lease(a, &op, 1, 0) == 0 && op.status == OL_KV_MISS,
	   "ns A (local) holds no lease on its key: ending one is MISS");
	op = (struct ol_kv_op){key, NULL, 0, 0, -1, 0};
	ok(ol_kv_lease(b, &op, 1, 0) == 0 && op.status == OL_KV_OK, "ns B ends its lease");
	ok(ol_kv_lease(b, NULL, 1, 10) == -EINVAL, "lease with NULL ops: -EINVAL");
	op = (struct ol_kv_op){key, NULL, 0, 0, -1, 0};
	ok(ol_kv_delete(b, &op, 1) == 0 && op.status == OL_KV_OK, "delete in ns B");
	op.status = -1;
	ok(ol_kv_exists(b, &op, 1) == 0 && op.status == OL_KV_MISS, "gone from ns B");
	op = (struct ol_kv_op){key, &io, 1, 0, -1, 0};
	ok(ol_kv_get(a, &op, 1) == 0 && op.status == OL_KV_OK, "still in ns A");
	size_t big = 65 * MiB;
	uint8_t *huge = calloc(1, big);
	struct ol_iov hi = {huge, big};
	op = (struct ol_kv_op){key, &hi, 1, 0, -1, 0};
	ok(ol_kv_put(b, &op, 1) == 0 && op.status == OL_KV_TOO_LARGE, "65 MiB put: TOO_LARGE");
	free(huge);
	ok(ol_kv_put(a, NULL, 1) == -EINVAL, "NULL ops: -EINVAL");
	ok(strcmp(ol_kv_status_str(OL_KV_UNREACHABLE), "unreachable") == 0 &&
	       strcmp(ol_kv_status_str(99), "unknown") == 0 && strcmp(ol_version(), "0.1.0") == 0,
	   "status names and version");
	ol_client_free(a);
	ol_client_free(b);
}

/* ---- concurrency: same keys, writers replace values, readers never see a torn one ---- */

#define HK   12
#define HVAL MiB
struct hammer {
	const char *addr;
	atomic_bool stop;
	atomic_uint_fast64_t gen, hits, torn, gets, puts;
};

static void
hval(uint8_t *p, uint64_t id, uint64_t gen)
{
	fill_pattern(p, HVAL, id * 1000003 + gen);
	memcpy(p, &id, 8);
	memcpy(p + 8, &gen, 8);
}

static void *
hammer_writer(void *arg)
{
	struct hammer *h = arg;
	const char *nodes[] = {h->addr};
	struct ol_client *c = mk_client(nodes, 1, "local", "hammer", 5000);
	uint8_t *v = malloc(HVAL), key[32];
	unsigned seed = (unsigned)(uintptr_t)&v;
	while (!atomic_load(&h->stop)) {
		uint64_t id = (uint64_t)rand_r(&seed) % HK, gen = atomic_fetch_add(&h->gen, 1);
		make_key(key, id);
		hval(v, id, gen);
		struct ol_iov iov = {v, HVAL};
		struct ol_kv_op op = {key, &iov, 1, 0, -1, 0};
		ol_kv_delete(c, &op, 1);
		ol_kv_put(c, &op, 1);
		atomic_fetch_add(&h->puts, 1);
	}
	free(v);
	ol_client_free(c);
	return NULL;
}

static void *
hammer_reader(void *arg, const char *dev)
{
	struct hammer *h = arg;
	const char *nodes[] = {h->addr};
	struct ol_client *c = mk_client(nodes, 1, dev, "hammer", 5000);
	uint8_t *v = malloc(HVAL), key[32];
	unsigned seed = (unsigned)(uintptr_t)&v;
	while (!atomic_load(&h->stop)) {
		uint64_t id = (uint64_t)rand_r(&seed) % HK, gid, gen;
		make_key(key, id);
		struct ol_iov iov = {v, HVAL};
		struct ol_kv_op op = {key, &iov, 1, 0, -1, 0};
		ol_kv_get(c, &op, 1);
		atomic_fetch_add(&h->gets, 1);
		if (op.status != OL_KV_OK)
			continue;
		memcpy(&gid, v, 8);
		memcpy(&gen, v + 8, 8);
		uint8_t *want = malloc(HVAL);
		hval(want, id, gen);
		if (gid != id || op.value_len != HVAL || memcmp(want, v, HVAL) != 0)
			atomic_fetch_add(&h->torn, 1);
		else
			atomic_fetch_add(&h->hits, 1);
		free(want);
	}
	free(v);
	ol_client_free(c);
	return NULL;
}

static void *
reader_local(void *arg)
{
	return hammer_reader(arg, "local");
}

static void *
reader_tcp(void *arg)
{
	return hammer_reader(arg, "tcp");
}

static void
test_hammer(void)
{
	struct child s;
	ok(spawn(&s, "-", 8, 1000, 0) == 0, "small server (8 MiB DRAM, no NVMe) for the hammer");
	struct hammer h = {.addr = s.addr};
	pthread_t t[6];
	pthread_create(&t[0], NULL, hammer_writer, &h);
	pthread_create(&t[1], NULL, hammer_writer, &h);
	pthread_create(&t[2], NULL, reader_local, &h);
	pthread_create(&t[3], NULL, reader_local, &h);
	pthread_create(&t[4], NULL, reader_tcp, &h);
	pthread_create(&t[5], NULL, reader_tcp, &h);
	usleep(2000 * 1000);
	atomic_store(&h.stop, true);
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	ok(h.torn == 0 && h.hits > 5 && h.puts > 5,
	   "%llu puts and %llu gets of %d hot keys under eviction: %llu hits, %llu torn",
	   (unsigned long long)h.puts, (unsigned long long)h.gets, HK, (unsigned long long)h.hits,
	   (unsigned long long)h.torn);
	stop_child(&s);
}

static void
test_two_nodes(void)
{
	struct child a, b;
	ok(spawn(&a, "-", 64, 1000, 0) == 0 && spawn(&b, "-", 64, 1000, 0) == 0,
	   "two nodes started");
	const char *nodes[] = {a.addr, b.addr};
	/* a killed node refuses at once: calls with it must end well within one timeout; the
	 * timeout itself leaves the live node room under a sanitizer on a loaded machine (at
	 * 500 ms, TSan at load 15, the live node's 100 puts timed out too) */
	const unsigned long long tmo = 4000;
	struct ol_client *c = mk_client(nodes, 2, "tcp", "pool", (unsigned)tmo);
	size_t n = 300;
	int32_t st[300];
	struct blk *bl = mk_blocks(n, 5000, len_small, 9);
	blocks_op(c, 1, bl, n, 100, st, NULL);
	ok(count_ok(bl, n, st, 0) == n, "put %zu blocks over 2 nodes", n);
	char json[8192];
	ok(ol_kv_stats(c, json, sizeof(json)) > 0, "stats over two nodes");
	const char *e1 = strstr(json, "\"entries\":"),
		   *e2 = e1 ? strstr(e1 + 1, "\"entries\":") : 0;
	unsigned long n1 = e1 ? strtoul(e1 + 10, NULL, 10) : 0,
		      n2 = e2 ? strtoul(e2 + 10, NULL, 10) : 0;
	ok(n1 > 90 && n2 > 90 && n1 + n2 == n, "rendezvous spreads keys: %lu + %lu", n1, n2);
	/* a third node: rendezvous moves only the keys it now wins (about a third); none move
	 * between A and B */
	struct child x;
	ok(spawn(&x, "-", 64, 1000, 0) == 0, "third node started");
	const char *nodes3[] = {a.addr, b.addr, x.addr};
	/* the hung-node bounds below tell "waited a timeout" from "did not" (and one timeout
	 * from two); the live nodes' share of each call must stay well under the timeout, which
	 * at 1000 ms an ASan client at load 35 overran: 2500 */
	const unsigned long long htmo = 2500;
	struct ol_client *c3 = mk_client(nodes3, 3, "tcp", "pool", (unsigned)htmo);
	blocks_op(c3, 0, bl, n, 100, st, NULL);
	size_t hits3 = count_ok(bl, n, st, 1), miss3 = 0;
	for (size_t i = 0; i < n; i++)
		miss3 += st[i] == OL_KV_MISS;
	ok(hits3 + miss3 == n && miss3 > 60 && miss3 < 140,
	   "adding a node: %zu keys moved (to it), %zu still hit", miss3, hits3);
	/* a hung node (SIGSTOP) costs at most the timeout, then is skipped */
	stop_hard(x.pid);
	uint64_t t0 = now_ms();
	blocks_op(c3, 0, bl, n, 100, st, NULL);
	uint64_t dt = now_ms() - t0;
	size_t unr = 0;
	for (size_t i = 0; i < n; i++)
		unr += st[i] == OL_KV_UNREACHABLE;
	ok(unr == miss3 && count_ok(bl, n, st, 1) == hits3 && dt < 2 * htmo,
	   "hung node: %zu unreachable after %llu ms (timeout %llu), others hit", unr,
	   (unsigned long long)dt, htmo);
	t0 = now_ms();
	blocks_op(c3, 0, bl, n, 100, st, NULL);
	dt = now_ms() - t0;
	ok(dt < htmo * 7 / 10, "next call skips the hung node at once (%llu ms, timeout %llu)",
	   (unsigned long long)dt, htmo);
	kill(x.pid, SIGCONT);
	/* two hung nodes cost one timeout, not two: nodes are asked in parallel */
	usleep((unsigned)(htmo + 100) * 1000); /* let the backoff of x expire (one timeout) */
	blocks_op(c3, 0, bl, n, 300, st, NULL);
	stop_hard(x.pid);
	stop_hard(b.pid);
	t0 = now_ms();
	blocks_op(c3, 0, bl, n, 300, st, NULL);
	dt = now_ms() - t0;
	unr = 0;
	for (size_t i = 0; i < n; i++)
		unr += st[i] == OL_KV_UNREACHABLE;
	ok(unr > miss3 && unr + count_ok(bl, n, st, 1) == n && dt < htmo * 18 / 10,
	   "two hung nodes: %zu unreachable after %llu ms (timeout %llu: not 2 x)", unr,
	   (unsigned long long)dt, htmo);
	kill(x.pid, SIGCONT);
	kill(b.pid, SIGCONT);
	ol_client_free(c3);
	stop_child(&x);

	kill_child(&b);
	t0 = now_ms();
	blocks_op(c, 0, bl, n, 100, st, NULL);
	dt = now_ms() - t0;
	size_t good = count_ok(bl, n, st, 1), unreach = 0;
	for (size_t i = 0; i < n; i++)
		unreach += st[i] == OL_KV_UNREACHABLE;
	ok(good == n1 && unreach == n2, "node B killed: %zu hits from A, %zu unreachable", good,
	   unreach);
	ok(dt < tmo, "gets did not stall (%llu ms, timeout %llu)", (unsigned long long)dt, tmo);
	struct blk *bl2 = mk_blocks(n, 9000, len_small, 3);
	t0 = now_ms();
	blocks_op(c, 1, bl2, n, 100, st, NULL);
	dt = now_ms() - t0;
	good = count_ok(bl2, n, st, 0);
	ok(good > 60 && good < n && dt < tmo,
	   "puts skip the dead node: %zu stored, %llu ms (timeout %llu)", good,
	   (unsigned long long)dt, tmo);
	ok(ol_kv_stats(c, json, sizeof(json)) > 0 && strstr(json, "\"up\":false"),
	   "stats shows the dead node down");
	ol_client_free(c);
	free_blocks(bl, n);
	free_blocks(bl2, n);
	stop_child(&a);

	const char *none[] = {"127.0.0.1:1"};
	c = mk_client(none, 1, "tcp", "", 300);
	uint8_t key[32], buf[16];
	struct ol_iov iov = {buf, sizeof(buf)};
	struct ol_kv_op op = {key, &iov, 1, 0, -1, 0};
	make_key(key, 1);
	ok(c && ol_kv_get(c, &op, 1) == 0 && op.status == OL_KV_UNREACHABLE,
	   "a client of a node that never ran: created, gets are UNREACHABLE");
	ol_client_free(c);
}

static void
test_kill9_recovery(void)
{
	char tpl[] = "/tmp/olkv-client-XXXXXX";
	char *dir = mkdtemp(tpl);
	struct child s;
	/* DRAM holds every block: the write-behind is best effort (a block evicted before it is
	 * written is dropped), and a slow sanitizer build writes slower than it puts */
	ok(dir && spawn(&s, dir, 128, 100, 0) == 0, "server with NVMe tier, write-behind 100 ms");
	const char *nodes[] = {s.addr};
	/* a generous call timeout: a batch of 100 gets from the restarted server's NVMe tier
	 * took over 3 s under ThreadSanitizer beside a loaded suite, and a timed-out call marks
	 * the node down for the calls after it (what this case tests is the stale connections) */
	struct ol_client *tcp = mk_client(nodes, 1, "tcp", "warm", 30000);
	struct ol_client *loc = mk_client(nodes, 1, "local", "warm", 30000);
	size_t n = 400;
	int32_t *st = calloc(n, sizeof(*st));
	struct blk *b = mk_blocks(n, 40000, len_mixed, 4);
	blocks_op(tcp, 1, b, n / 2, 50, st, NULL);
	blocks_op(loc, 1, b + n / 2, n / 2, 50, st + n / 2, NULL);
	ok(count_ok(b, n, st, 0) == n, "put %zu blocks of 4..260 KiB (~50 MB, DRAM 128 MiB)", n);
	/* the write-behind bound is writeback_ms (100) plus the disk time of the backlog: wait
	 * until the server reports every block on NVMe (slow sanitizer builds need longer) */
	char json[8192];
	uint64_t t0 = now_ms(), on_nvme = 0;
	while (now_ms() - t0 < 20000) {
		usleep(100 * 1000);
		const char *p = ol_kv_stats(tcp, json, sizeof(json)) > 0
				    ? strstr(json, "\"nvme_entries\":")
				    : NULL;
		on_nvme = p ? strtoull(p + 15, NULL, 10) : 0;
		if (on_nvme >= n)
			break;
	}
	ok(on_nvme == n, "write-behind put all %zu blocks on NVMe after %llu ms", n,
	   (unsigned long long)(now_ms() - t0));
	unsigned port = s.port;
	kill_child(&s);
	ok(spawn(&s, dir, 64, 100, port) == 0 && s.port == port, "kill -9, restart on port %u",
	   port);
	t0 = now_ms();
	blocks_op(tcp, 0, b, n, 100, st, NULL);
	ok(count_ok(b, n, st, 1) == n,
	   "TCP (stale pooled connection): every block reads back (%llu ms)",
	   (unsigned long long)(now_ms() - t0));
	t0 = now_ms();
	blocks_op(loc, 0, b, n, 100, st, NULL);
	ok(count_ok(b, n, st, 1) == n, "local (new shm epoch): every block reads back (%llu ms)",
	   (unsigned long long)(now_ms() - t0));
	ok(ol_kv_stats(tcp, json, sizeof(json)) > 0 && !strstr(json, "\"hits_nvme\":0,"),
	   "hits came from the recovered NVMe tier");
	stop_child(&s);
	ol_client_free(tcp);
	ol_client_free(loc);
	free_blocks(b, n);
	free(st);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ok(system(cmd) == 0, "clean up %s", dir);
}

/* ---- hostile frames: the connection is closed, the store is not harmed ---- */

static int
closed_after(const char *addr, const void *frame, size_t len)
{
	int fd = kvnet_connect(addr, 2000);
	if (fd < 0)
		return 0;
	kvnet_set_timeout(fd, 3000);
	kvnet_write_full(fd, frame, len);
	shutdown(fd, SHUT_WR); /* a cut frame: the server sees EOF in the middle */
	char b[256];
	ssize_t r;
	int closed = 0;
	while ((r = read(fd, b, sizeof(b))) > 0)
		; /* a reply for a partial frame would be a bug, but EOF is what we wait for */
	closed = r == 0 || (r < 0 && errno == ECONNRESET);
	close(fd);
	return closed;
}

static size_t
frame(uint8_t *out, uint8_t op, uint8_t flags, uint32_t count, uint64_t body_len)
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION, op, flags, count, 0, 1, body_len};
	ol_kvp_hdr_encode(out, &h);
	return OL_KVP_HDR;
}

static void
test_hostile(struct child *s1)
{
	uint8_t f[256];
	memset(f, 0x41, sizeof(f));
	ok(closed_after(s1->addr, f, 64), "garbage (bad magic): connection closed");
	size_t n = frame(f, OL_KVP_GET, 0, 5000, 5000ull * OL_KVP_REQ_ENT);
	ok(closed_after(s1->addr, f, n), "GET with 5000 entries (over the cap): closed");
	n = frame(f, OL_KVP_PUT, 0, 1, OL_KVP_REQ_ENT + 10);
	struct ol_kvp_req_ent e = {{9}, 1ull << 40, 0, 0};
	ol_kvp_req_ent_encode(f + n, &e);
	ok(closed_after(s1->addr, f, n + OL_KVP_REQ_ENT), "PUT entry of 1 TiB: closed");
	n = frame(f, OL_KVP_COMMIT, 0, 1, OL_KVP_REQ_ENT);
	e = (struct ol_kvp_req_ent){{9}, 10, 4096, 1};
	ol_kvp_req_ent_encode(f + n, &e);
	ok(closed_after(s1->addr, f, n + OL_KVP_REQ_ENT), "COMMIT without a local HELLO: closed");
	n = frame(f, OL_KVP_COMMIT_ALLOC, 0, 1, OL_KVP_REQ_ENT);
	e = (struct ol_kvp_req_ent){{9}, 4096, 0, 0};
	ol_kvp_req_ent_encode(f + n, &e);
	ok(closed_after(s1->addr, f, n + OL_KVP_REQ_ENT),
	   "COMMIT_ALLOC (a reservation ahead) without a local HELLO: closed");
	n = frame(f, 77, 0, 0, 0);
	ok(closed_after(s1->addr, f, n), "unknown opcode: closed");
	n = frame(f, OL_KVP_PUT, 0, 2, 2 * OL_KVP_REQ_ENT + 8);
	e = (struct ol_kvp_req_ent){{9}, 4, 0, 0};
	ol_kvp_req_ent_encode(f + n, &e);
	memcpy(f + n + OL_KVP_REQ_ENT, "abcd", 4);
	ok(closed_after(s1->addr, f, n + OL_KVP_REQ_ENT + 4), "PUT cut in the middle: closed");
	/* the store still works and still has its data */
	const char *nodes[] = {s1->addr};
	struct ol_client *c = mk_client(nodes, 1, "tcp", "model-a", 5000);
	struct blk *b = mk_blocks(50, 1, len_small, 0);
	int32_t st[50];
	blocks_op(c, 0, b, 50, 50, st, NULL);
	ok(count_ok(b, 50, st, 1) == 50, "after hostile frames the pool serves its data");
	uint8_t k9[32] = {9};
	uint8_t buf[16];
	struct ol_iov iov = {buf, sizeof(buf)};
	struct ol_kv_op op = {k9, &iov, 1, 0, -1, 0};
	ok(ol_kv_get(c, &op, 1) == 0 && op.status == OL_KV_MISS,
	   "and no half-put entry is visible");
	free_blocks(b, 50);
	ol_client_free(c);
}

/* A daemon killed with -9 leaves its default-named shm; the next start removes it. */
static void
test_stale_shm_gc(void)
{
	char stale[64];
	snprintf(stale, sizeof(stale), "/openlake-kv-1-%d", 4190000 + (int)(getpid() % 1000));
	int fd = shm_open(stale, O_CREAT | O_RDWR, 0600);
	ok(fd >= 0 && ftruncate(fd, 4096) == 0, "fake stale DRAM tier %s of a dead daemon", stale);
	close(fd);
	struct child s;
	spawn_default_shm = 1;
	int r = spawn(&s, "-", 8, 1000, 0);
	spawn_default_shm = 0;
	ok(r == 0, "server with the default shm name");
	fd = shm_open(stale, O_RDONLY, 0);
	ok(fd < 0 && errno == ENOENT, "the stale object was removed at start");
	if (fd >= 0) {
		close(fd);
		shm_unlink(stale);
	}
	char own[64];
	snprintf(own, sizeof(own), "/openlake-kv-%u-%d", s.port, (int)s.pid);
	fd = shm_open(own, O_RDONLY, 0);
	ok(fd >= 0, "the live server's own %s is there", own);
	if (fd >= 0)
		close(fd);
	const char *nodes[] = {s.addr};
	struct ol_client *c = mk_client(nodes, 1, "local", "gc", 2000);
	char json[8192];
	ok(ol_kv_stats(c, json, sizeof(json)) > 0 && strstr(json, "\"local\":true"),
	   "local path works with the default name");
	ol_client_free(c);
	stop_child(&s);
	fd = shm_open(own, O_RDONLY, 0);
	ok(fd < 0, "a stopped server unlinks its shm");
	if (fd >= 0)
		close(fd);
}

/* ol_iov_xxh3 over a scatter list = XXH3_64bits of the same bytes in one buffer. */
static void
test_iov_xxh3(void)
{
	enum { N = 200000 };
	uint8_t *buf = malloc(N);
	ok(buf != NULL, "iov_xxh3: buffer");
	if (!buf)
		return;
	for (size_t i = 0; i < N; i++)
		buf[i] = (uint8_t)(i * 131u + (i >> 9));
	/* 64 ranges of uneven sizes (the first 63 take 134002 bytes), one of them empty */
	struct ol_iov v[64];
	size_t off = 0;
	for (int i = 0; i < 64; i++) {
		size_t len = i == 63 ? N - off : (i == 7 ? 0 : (size_t)(1000 + 37 * i));
		v[i] = (struct ol_iov){buf + off, len};
		off += len;
	}
	uint64_t h = 0;
	ok(ol_iov_xxh3(v, 64, &h) == 0 && h == XXH3_64bits(buf, N),
	   "iov_xxh3: 64 ranges hash like one buffer");
	ok(ol_iov_xxh3(v, 1, &h) == 0 && h == XXH3_64bits(buf, v[0].len), "iov_xxh3: one range");
	ok(ol_iov_xxh3(NULL, 0, &h) == 0 && h == XXH3_64bits(buf, 0), "iov_xxh3: empty list");
	buf[N / 2] ^= 1;
	uint64_t h2 = 0;
	ok(ol_iov_xxh3(v, 64, &h2) == 0 && h2 != h && h2 == XXH3_64bits(buf, N),
	   "iov_xxh3: a flipped bit changes it");
	ok(ol_iov_xxh3(NULL, 1, &h) == -EINVAL, "iov_xxh3: NULL list is -EINVAL");
	ok(ol_iov_xxh3(v, 64, NULL) == -EINVAL, "iov_xxh3: NULL out is -EINVAL");
	struct ol_iov bad = {NULL, 5};
	ok(ol_iov_xxh3(&bad, 1, &h) == -EINVAL, "iov_xxh3: NULL base with a length is -EINVAL");
	free(buf);
}

int
main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "--server") == 0)
		return server_main(argv);
	signal(SIGPIPE, SIG_IGN);
	srand((unsigned)getpid());
	test_iov_xxh3();
	struct child s1;
	char tpl[] = "/tmp/olkv-s1-XXXXXX";
	char *dir = mkdtemp(tpl);
	ok(dir && spawn(&s1, dir, 256, 1000, 0) == 0, "server child on 127.0.0.1:%u", s1.port);
	test_roundtrips(&s1);
	test_statuses(&s1);
	test_hostile(&s1);
	stop_child(&s1);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	test_hammer();
	test_two_nodes();
	test_kill9_recovery();
	test_stale_shm_gc();
	tap_done();
}
