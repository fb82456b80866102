/* tests/unit/test_client_xxh3.c - ol_kv_get_xxh3 against real KV servers started in this
 * process: over shared memory, TCP and a compressing client, for several iovec shapes (one
 * buffer, uneven ranges, the vLLM connector's 64 ranges + trailer, empty and one-byte
 * ranges) and value sizes that are not multiples of the copy pieces, each hash checked
 * against ol_iov_xxh3 over what landed in the iovs and against XXH3_64bits of the value put;
 * statuses other than OK give 0; a miss retried on a second replica is hashed anew. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/config.h"
#include "base/log.h"
#include "kv/kv.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define KiB 1024u
#define MiB (1024u * KiB)

static struct ol_client *
mk(const char *const *nodes, size_t n, const char *dev, unsigned compress, unsigned replicas)
{
	struct ol_client_opts o = {.size = sizeof(o),
				   .nodes = nodes,
				   .n_nodes = n,
				   .device = dev,
				   .ns = "xxh3test",
				   .timeout_ms = 10000,
				   .compress = compress,
				   .replicas = replicas};
	struct ol_client *c = NULL;
	return ol_client_new(&o, &c) == 0 ? c : NULL;
}

/* How a get's buffer is cut into iovs. */
enum shape { ONE, UNEVEN, CONNECTOR, TINY, SHAPES };
static const char *const shape_name[SHAPES] = {"one buffer", "3 uneven", "64 ranges + trailer",
					       "empty and 1-byte ranges"};

#define MAXV 80

/* Cut [buf, buf + len) into v; returns the count and, in *payload, how many of them a
 * verifier covers (all but the trailer for CONNECTOR, else all but the last when more
 * than one). */
static size_t
cut(enum shape s, uint8_t *buf, size_t len, struct ol_iov *v, size_t *payload)
{
	size_t n = 0, at = 0;
	switch (s) {
	case ONE:
		v[n++] = (struct ol_iov){buf, len};
		break;
	case UNEVEN:
		v[n++] = (struct ol_iov){buf, len / 7};
		v[n++] = (struct ol_iov){buf + len / 7, len / 2};
		at = len / 7 + len / 2;
		v[n++] = (struct ol_iov){buf + at, len - at};
		break;
	case CONNECTOR: /* 64 equal ranges and a 32-byte trailer */
		for (; n < 64; n++) {
			size_t l = len >= 32 ? (len - 32) / 64 : 0;
			v[n] = (struct ol_iov){buf + at, l};
			at += l;
		}
		v[n++] = (struct ol_iov){buf + at, len - at};
		break;
	default: { /* TINY: 1, 0, 1, 0 and 3 bytes, then the rest in two */
		static const size_t first[] = {1, 0, 1, 0, 3};
		for (size_t i = 0; i < 5; i++) {
			size_t l = first[i] < len - at ? first[i] : len - at;
			v[n++] = (struct ol_iov){buf + at, l};
			at += l;
		}
		size_t half = (len - at) / 2;
		v[n++] = (struct ol_iov){buf + at, half};
		v[n++] = (struct ol_iov){buf + at + half, len - at - half};
	} break;
	}
	*payload = n > 1 ? n - 1 : n;
	return n;
}

/* The reference: XXH3_64bits of the first min(len, bytes of v[0..k)) bytes of want. */
static uint64_t
ref_hash(const uint8_t *want, size_t len, const struct ol_iov *v, size_t k)
{
	size_t b = 0;
	for (size_t i = 0; i < k; i++)
		b += v[i].len;
	return XXH3_64bits(want, b < len ? b : len);
}

static int32_t
put1(struct ol_client *c, uint64_t id, const uint8_t *val, size_t len)
{
	uint8_t k[32];
	make_key(k, id);
	struct ol_iov v = {(void *)val, len};
	struct ol_kv_op op = {.key = k, .iov = &v, .iovcnt = 1};
	return ol_kv_put(c, &op, 1) == 0 ? op.status : -1;
}

/* Get id's value (want, len bytes) into a fresh buffer of cap bytes cut as s, hashing the
 * first k iovs (k = SIZE_MAX: hash_iovcnt NULL, all of them); 1 when status, bytes and
 * hash are right. */
static int
get_check(struct ol_client *c, uint64_t id, const uint8_t *want, size_t len, size_t cap,
	  enum shape s, size_t k)
{
	uint8_t key[32], *buf = malloc(cap ? cap : 1);
	struct ol_iov v[MAXV];
	size_t payload, nv = cut(s, buf, cap, v, &payload);
	size_t kk = k == SIZE_MAX ? nv : k, kn = kk < nv ? kk : nv;
	make_key(key, id);
	memset(buf, 0xa5, cap);
	struct ol_kv_op op = {.key = key, .iov = v, .iovcnt = nv};
	uint64_t h = 1, h2 = 2;
	int r = ol_kv_get_xxh3(c, &op, 1, k == SIZE_MAX ? NULL : &kk, &h);
	/* what landed in the first kk iovs, as ol_iov_xxh3 sees it afterwards */
	struct ol_iov w[MAXV];
	size_t left = len, nw = 0;
	for (size_t i = 0; i < kk && i < nv && left; i++) {
		w[nw] = v[i];
		w[nw].len = v[i].len < left ? v[i].len : left;
		left -= w[nw++].len;
	}
	int good = r == 0 && op.status == OL_KV_OK && op.value_len == len &&
		   memcmp(buf, want, len) == 0 && h == ref_hash(want, len, v, kn) &&
		   ol_iov_xxh3(w, nw, &h2) == 0 && h2 == h;
	if (!good)
		printf("# id %llu len %zu cap %zu %s k %zu: r %d status %s value_len %llu hash "
		       "%016llx ref %016llx iov_xxh3 %016llx\n",
		       (unsigned long long)id, len, cap, shape_name[s], kk, r,
		       ol_kv_status_str(op.status), (unsigned long long)op.value_len,
		       (unsigned long long)h, (unsigned long long)ref_hash(want, len, v, kn),
		       (unsigned long long)h2);
	free(buf);
	return good;
}

static const size_t sizes[] = {
    1, 100, 4095, 64 * KiB - 1, 64 * KiB + 1, 256 * KiB + 3, 2 * MiB + 32, 5 * MiB + 7};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every shape and size, hashing the payload iovs and all of them. */
static void
test_shapes(struct ol_client *c, const char *what, uint64_t base)
{
	uint8_t *want = malloc(5 * MiB + 7);
	size_t good = 0, tried = 0, bad_put = 0;
	for (size_t z = 0; z < NSIZES; z++) {
		uint64_t id = base + z;
		fill_pattern(want, sizes[z], id);
		bad_put += put1(c, id, want, sizes[z]) != OL_KV_OK;
		for (int s = 0; s < SHAPES; s++) {
			uint8_t tmp[1];
			struct ol_iov v[MAXV];
			size_t payload;
			(void)cut((enum shape)s, tmp, 0, v,
				  &payload); /* how many a verifier covers */
			good += get_check(c, id, want, sizes[z], sizes[z], (enum shape)s, payload);
			good += get_check(c, id, want, sizes[z], sizes[z], (enum shape)s, SIZE_MAX);
			tried += 2;
		}
	}
	ok(bad_put == 0, "%s: %zu values put (1 B .. 5 MiB + 7)", what, NSIZES);
	ok(good == tried, "%s: %zu gets of every iov shape and size: bytes and hash right", what,
	   tried);
	/* a buffer larger than the value: the hash covers the value's bytes only */
	fill_pattern(want, 1000, base);
	ok(put1(c, base + 100, want, 1000) == OL_KV_OK &&
	       get_check(c, base + 100, want, 1000, 3000, UNEVEN, 3) &&
	       get_check(c, base + 100, want, 1000, 3000, UNEVEN, 1) &&
	       get_check(c, base + 100, want, 1000, 3000, UNEVEN, 0) &&
	       get_check(c, base + 100, want, 1000, 3000, CONNECTOR, 100),
	   "%s: value shorter than the iovs: hash of the bytes that landed (k = 3, 1, 0, > n)",
	   what);
	free(want);
}

/* One call of 40 ops: hits of mixed sizes, misses, a buffer too small (TRUNCATED); each op's
 * hash lands in its own slot, 0 where the status is not OK. */
static void
test_batch(struct ol_client *c, const char *what, uint64_t base)
{
	enum { N = 40 };
	struct ol_kv_op ops[N];
	struct ol_iov v[N][MAXV];
	uint8_t keys[N][32], *bufs[N], *want[N];
	size_t lens[N], kk[N], payload;
	uint64_t h[N];
	int bad_put = 0;
	for (int i = 0; i < N; i++) {
		lens[i] = 3 * KiB + (size_t)i * 70001u % (700 * KiB);
		want[i] = malloc(lens[i]);
		fill_pattern(want[i], lens[i], base + (uint64_t)i);
		if (i % 5 != 3) /* every fifth one is never put: a miss */
			bad_put += put1(c, base + (uint64_t)i, want[i], lens[i]) != OL_KV_OK;
		size_t cap = i == 7 ? lens[i] - 1 : lens[i]; /* one too small: TRUNCATED */
		bufs[i] = malloc(cap);
		make_key(keys[i], base + (uint64_t)i);
		size_t nv = cut((enum shape)(i % SHAPES), bufs[i], cap, v[i], &payload);
		kk[i] = payload;
		ops[i] = (struct ol_kv_op){.key = keys[i], .iov = v[i], .iovcnt = nv};
		h[i] = 12345;
	}
	int r = ol_kv_get_xxh3(c, ops, N, kk, h);
	int good = 0;
	for (int i = 0; i < N; i++) {
		int st = i % 5 == 3 ? OL_KV_MISS : i == 7 ? OL_KV_TRUNCATED : OL_KV_OK;
		uint64_t ref = st == OL_KV_OK ? ref_hash(want[i], lens[i], v[i], kk[i]) : 0;
		int fine = ops[i].status == st && h[i] == ref &&
			   (st != OL_KV_OK || memcmp(bufs[i], want[i], lens[i]) == 0);
		if (!fine)
			printf("# op %d: status %s, hash %016llx, want %016llx\n", i,
			       ol_kv_status_str(ops[i].status), (unsigned long long)h[i],
			       (unsigned long long)ref);
		good += fine;
		free(bufs[i]);
		free(want[i]);
	}
	ok(r == 0 && bad_put == 0 && good == N,
	   "%s: one call of %d ops (hits, misses, a TRUNCATED): each hash in its slot, 0 unless "
	   "OK (%d right)",
	   what, N, good);
}

/* replicas = 2 over two servers; node 0's copies deleted: keys whose first replica was
 * node 0 miss there and are read (and hashed) from node 1. */
static void
test_replica_retry(const char *a0, const char *a1)
{
	enum { N = 24 };
	const char *both[] = {a0, a1}, *only0[] = {a0};
	struct ol_client *c = mk(both, 2, "local", 0, 2), *c0 = mk(only0, 1, "tcp", 0, 1);
	ok(c && c0, "replicas: clients of two servers");
	if (!c || !c0)
		goto out;
	uint8_t *want = malloc(300 * KiB);
	int bad = 0, good = 0;
	for (int i = 0; i < N; i++) {
		fill_pattern(want, 300 * KiB, 9000 + (uint64_t)i);
		bad += put1(c, 9000 + (uint64_t)i, want, 300 * KiB) != OL_KV_OK;
	}
	uint8_t keys[N][32];
	struct ol_kv_op del[N];
	for (int i = 0; i < N; i++) {
		make_key(keys[i], 9000 + (uint64_t)i);
		del[i] = (struct ol_kv_op){.key = keys[i]};
	}
	int deleted = 0;
	bad += ol_kv_delete(c0, del, N) != 0;
	for (int i = 0; i < N; i++)
		deleted += del[i].status == OL_KV_OK;
	for (int i = 0; i < N; i++) {
		fill_pattern(want, 300 * KiB, 9000 + (uint64_t)i);
		good += get_check(c, 9000 + (uint64_t)i, want, 300 * KiB, 300 * KiB, CONNECTOR, 64);
	}
	ok(bad == 0 && deleted == N && good == N,
	   "replicas: %d of %d read from the second replica after a miss, bytes and hash right",
	   good, N);
	free(want);
out:
	ol_client_free(c);
	ol_client_free(c0);
}

static void
test_args(struct ol_client *c)
{
	uint8_t key[32];
	make_key(key, 1);
	struct ol_kv_op op = {.key = key};
	uint64_t h;
	ok(ol_kv_get_xxh3(c, &op, 1, NULL, NULL) == -EINVAL, "hash NULL with n > 0: -EINVAL");
	ok(ol_kv_get_xxh3(NULL, &op, 1, NULL, &h) == -EINVAL, "client NULL: -EINVAL");
	ok(ol_kv_get_xxh3(c, NULL, 0, NULL, NULL) == 0, "n = 0: nothing to do");
}

static int
start(struct ol_kv_server **s, char *addr, size_t cap, char *shm, size_t shm_cap, int i)
{
	struct ol_config cfg;
	ol_config_default(&cfg);
	snprintf(cfg.kv_addr, sizeof(cfg.kv_addr), "127.0.0.1:0");
	cfg.kv_spill_dir[0] = '\0';
	cfg.kv_spill_bytes = 0;
	cfg.kv_dram_bytes = 192ull << 20;
	snprintf(shm, shm_cap, "/olkv-xxh3-%d-%d", (int)getpid(), i);
	snprintf(cfg.kv_shm_name, sizeof(cfg.kv_shm_name), "%s", shm);
	if (ol_kv_server_start(&cfg, s) != 0)
		return -1;
	snprintf(addr, cap, "127.0.0.1:%u", ol_kv_server_port(*s));
	return 0;
}

int
main(void)
{
	ol_log_threshold = OL_LOG_WARN;
	struct ol_kv_server *s[2] = {NULL, NULL};
	char addr[2][64], shm[2][64];
	if (start(&s[0], addr[0], sizeof(addr[0]), shm[0], sizeof(shm[0]), 0) != 0 ||
	    start(&s[1], addr[1], sizeof(addr[1]), shm[1], sizeof(shm[1]), 1) != 0) {
		printf("1..0 # SKIP cannot start two KV servers\n");
		return 77;
	}
	const char *nodes[] = {addr[0]};
	struct ol_client *loc = mk(nodes, 1, "local", 0, 1), *tcp = mk(nodes, 1, "tcp", 0, 1),
			 *z = mk(nodes, 1, "local", 1, 1);
	char json[8192];
	ok(loc && tcp && z && ol_kv_stats(loc, json, sizeof(json)) > 0 &&
	       strstr(json, "\"local\":true"),
	   "servers on %s and %s; local client on shared memory", addr[0], addr[1]);
	if (loc && tcp && z) {
		test_args(loc);
		test_shapes(loc, "shm", 1000);
		test_shapes(tcp, "tcp", 2000);
		test_shapes(z, "compressing client (hashed after)", 3000);
		test_batch(loc, "shm", 4000);
		test_batch(tcp, "tcp", 5000);
		test_replica_retry(addr[0], addr[1]);
	}
	ol_client_free(loc);
	ol_client_free(tcp);
	ol_client_free(z);
	for (int i = 0; i < 2; i++) {
		ol_kv_server_stop(s[i]);
		shm_unlink(shm[i]);
	}
	tap_done();
}
