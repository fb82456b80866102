/* tests/unit/test_client_ucx.c - libopenlake over UCX against an in-process KV server with
 * transport = "ucx" (UCX_TLS=tcp): round trips of 0 B to 4 MiB checked byte for byte, a batch
 * larger than one AM header, statuses (exists, miss, truncated, delete), then both sides shut
 * down, so an ASan build checks the UCX code of the server and the client for leaks. In a
 * build without UCX: the client refuses ucx:// (-EPROTONOSUPPORT), the server serves TCP. */
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "kv/kv.h"
#include "openlake/openlake.h"
#include "tap.h"

#define MiB (1u << 20)

static unsigned
free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) != 0)
		return 0;
	close(fd);
	return ntohs(a.sin_port);
}

static void
key_of(uint8_t k[32], unsigned i)
{
	memset(k, 0, 32);
	snprintf((char *)k, 32, "ucx-key-%u", i);
}

static void
fill(uint8_t *b, size_t n, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b[i] = (uint8_t)x;
	}
}

static void
test_sizes(struct ol_client *c)
{
	static const size_t sizes[] = {0, 1, 4000, 65536, 256 * 1024, 2 * MiB + 3, 4 * MiB};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	uint8_t keys[N][32], *val[N], *got[N];
	struct ol_iov vi[N], gi[N];
	struct ol_kv_op put[N], get[N];
	for (unsigned i = 0; i < N; i++) {
		key_of(keys[i], i);
		val[i] = malloc(sizes[i] + 1);
		got[i] = calloc(1, sizes[i] + 1);
		fill(val[i], sizes[i], i);
		vi[i] = (struct ol_iov){val[i], sizes[i]};
		gi[i] = (struct ol_iov){got[i], sizes[i]};
		put[i] = (struct ol_kv_op){.key = keys[i], .iov = &vi[i], .iovcnt = 1};
		get[i] = (struct ol_kv_op){.key = keys[i], .iov = &gi[i], .iovcnt = 1};
	}
	int r = ol_kv_put(c, put, N);
	unsigned okp = 0, okg = 0;
	for (unsigned i = 0; i < N; i++)
		okp += put[i].status == OL_KV_OK;
	ok(r == 0 && okp == N, "ucx: %u values of 0 B to 4 MiB stored", okp);
	r = ol_kv_get(c, get, N);
	for (unsigned i = 0; i < N; i++)
		okg += get[i].status == OL_KV_OK && get[i].value_len == sizes[i] &&
		       memcmp(got[i], val[i], sizes[i]) == 0;
	ok(r == 0 && okg == N, "ucx: all %u read back byte for byte", okg);
	/* a buffer one byte short: truncated, with the stored size */
	gi[4].len = sizes[4] - 1;
	r = ol_kv_get(c, &get[4], 1);
	ok(r == 0 && get[4].status == OL_KV_TRUNCATED && get[4].value_len == sizes[4],
	   "ucx: a short buffer is truncated, value_len the stored size");
	struct ol_kv_op ex[2] = {{.key = keys[5]},
				 {.key = (const uint8_t *)"nope-nope-nope-nope-nope-nope-n"}};
	r = ol_kv_exists(c, ex, 2);
	ok(r == 0 && ex[0].status == OL_KV_OK && ex[0].value_len == sizes[5] &&
	       ex[1].status == OL_KV_MISS,
	   "ucx: exists: hit with its size, miss");
	struct ol_kv_op del = {.key = keys[5]};
	r = ol_kv_delete(c, &del, 1);
	ok(r == 0 && del.status == OL_KV_OK, "ucx: delete");
	r = ol_kv_get(c, &get[5], 1);
	ok(r == 0 && get[5].status == OL_KV_MISS, "ucx: a deleted key misses");
	for (unsigned i = 0; i < N; i++) {
		free(val[i]);
		free(got[i]);
	}
}

/* 400 entries: more than one request header of UCX over tcp holds; the client splits. */
static void
test_batch(struct ol_client *c)
{
	enum { N = 400, LEN = 3000 };
	static uint8_t keys[N][32], val[N][LEN], got[N][LEN];
	static struct ol_iov vi[N], gi[N];
	static struct ol_kv_op put[N], get[N];
	for (unsigned i = 0; i < N; i++) {
		key_of(keys[i], 1000 + i);
		fill(val[i], LEN, 1000 + i);
		vi[i] = (struct ol_iov){val[i], LEN};
		gi[i] = (struct ol_iov){got[i], LEN};
		put[i] = (struct ol_kv_op){.key = keys[i], .iov = &vi[i], .iovcnt = 1};
		get[i] = (struct ol_kv_op){.key = keys[i], .iov = &gi[i], .iovcnt = 1};
	}
	unsigned n = 0;
	int r = ol_kv_put(c, put, N);
	for (unsigned i = 0; i < N; i++)
		n += put[i].status == OL_KV_OK;
	ok(r == 0 && n == N, "ucx: a batch of %u puts", n);
	r = ol_kv_get(c, get, N);
	n = 0;
	for (unsigned i = 0; i < N; i++)
		n += get[i].status == OL_KV_OK && memcmp(got[i], val[i], LEN) == 0;
	ok(r == 0 && n == N, "ucx: a batch of %u gets, every byte right", n);
}

int
main(void)
{
	struct ol_config cfg;
	ol_config_default(&cfg);
	ol_log_threshold = OL_LOG_WARN;
	setenv("UCX_TLS", "tcp", 1);
	char dir[] = "/tmp/olkv-ucx-XXXXXX";
	unsigned up = free_port();
	if (!mkdtemp(dir) || !up) {
		printf("1..0 # SKIP no temp dir or port\n");
		return 77;
	}
	snprintf(cfg.kv_addr, sizeof(cfg.kv_addr), "127.0.0.1:0");
	snprintf(cfg.kv_spill_dir, sizeof(cfg.kv_spill_dir), "%s", dir);
	snprintf(cfg.transport, sizeof(cfg.transport), "ucx");
	cfg.rdma_port = up;
	cfg.kv_spill_bytes = 0;
	cfg.kv_dram_bytes = 64ull * MiB;
	struct ol_kv_server *s;
	ok(ol_kv_server_start(&cfg, &s) == 0, "server with transport = ucx on UCX port %u", up);
	char node[64];
	snprintf(node, sizeof(node), "ucx://127.0.0.1:%u", up);
	const char *nodes[] = {node};
	struct ol_client_opts o = {
	    .size = sizeof(o), .nodes = nodes, .n_nodes = 1, .device = "tcp", .timeout_ms = 10000};
	struct ol_client *c = NULL;
	int r = ol_client_new(&o, &c);
#ifdef OL_HAVE_UCX
	const bool built = true;
#else
	const bool built = false;
#endif
	if (!built) {
		ok(r == -EPROTONOSUPPORT, "built without UCX: ucx:// refused");
	} else {
		ok(r == 0, "client for %s", node);
		test_sizes(c);
		test_batch(c);
		ol_client_free(c);
	}
	ol_kv_server_stop(s);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	tap_done();
}
