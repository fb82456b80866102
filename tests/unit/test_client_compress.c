/* tests/unit/test_client_compress.c - libopenlake with opts.compress = 1 (ExANS) against a
 * real KV server started in this process: round trips of real and synthetic BF16 KV blocks
 * over the shared-memory and TCP paths, compressed and plain clients on the same keys,
 * incompressible values stored plain, crafted corrupt values -> CORRUPT, client stats.
 * argv[1]: the kv-bf16 data dir (the real-data part is skipped when it is absent). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "compress.h" /* client/: OLZ_MAGIC, OLZ_HDR */
#include "kv/kv.h"
#include "kv_data.h"
#include "openlake/openlake.h"

#define KiB 1024u

static char g_addr[64];

static struct ol_client *
mk(const char *dev, unsigned compress)
{
	const char *nodes[] = {g_addr};
	struct ol_client_opts o = {.size = sizeof(o),
				   .nodes = nodes,
				   .n_nodes = 1,
				   .device = dev,
				   .ns = "ztest",
				   .timeout_ms = 5000,
				   .compress = compress,
				   .compress_row_bytes = 0};
	struct ol_client *c = NULL;
	return ol_client_new(&o, &c) == 0 ? c : NULL;
}

static void
key_of(uint8_t *k, uint64_t id)
{
	memset(k, 0, 32);
	memcpy(k, &id, sizeof(id));
	k[31] = 0x5a;
}

/* One op: put or get of len bytes at buf (split into 3 iovs when split). */
static int32_t
op1(struct ol_client *c, int put, uint64_t id, void *buf, size_t len, int split, uint64_t *vlen)
{
	uint8_t k[32];
	key_of(k, id);
	size_t a = split ? len / 3 : len, b = split ? len / 3 : 0;
	struct ol_iov v[3] = {
	    {buf, a}, {(uint8_t *)buf + a, b}, {(uint8_t *)buf + a + b, len - a - b}};
	struct ol_kv_op op = {.key = k, .iov = v, .iovcnt = split ? 3 : 1};
	int r = put ? ol_kv_put(c, &op, 1) : ol_kv_get(c, &op, 1);
	if (vlen)
		*vlen = op.value_len;
	return r < 0 ? -1 : op.status;
}

static uint64_t
stat_of(struct ol_client *c, const char *key)
{
	static char json[16384];
	if (ol_kv_stats(c, json, sizeof(json)) < 0)
		return UINT64_MAX;
	const char *p = strstr(json, "\"client\":");
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = p ? strstr(p, pat) : NULL;
	return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* KV-like BF16: normal values with a per-channel scale (few exponents used). */
static void
synth_bf16(uint16_t *d, size_t n, uint64_t seed)
{
	srand((unsigned)seed);
	for (size_t i = 0; i < n; i++) {
		double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = rand() / (RAND_MAX + 1.0);
		float f = (float)(sqrt(-2 * log(u1)) * cos(6.283185307 * u2) * (1 + i % 8));
		uint32_t x;
		memcpy(&x, &f, 4);
		d[i] = (uint16_t)(x >> 16);
	}
}

static int
same_get(struct ol_client *c, uint64_t id, const uint8_t *want, size_t len, int split)
{
	uint8_t *got = calloc(1, len + 64);
	uint64_t vl = 0;
	int32_t st = op1(c, 0, id, got, len + (split ? 0 : 64), split, &vl);
	int ok_ = st == OL_KV_OK && vl == len && memcmp(got, want, len) == 0;
	if (!ok_)
		printf("# get %llu: status %d len %llu want %zu\n", (unsigned long long)id, st,
		       (unsigned long long)vl, len);
	free(got);
	return ok_;
}

/* The bytes the server holds for id (via a plain client), malloc'd; *len = their size. */
static uint8_t *
stored(struct ol_client *plain, uint64_t id, size_t cap, uint64_t *len)
{
	uint8_t *b = malloc(cap);
	if (b && op1(plain, 0, id, b, cap, 0, len) != OL_KV_OK) {
		free(b);
		return NULL;
	}
	return b;
}

static void
test_synthetic(const char *dev, uint64_t base)
{
	struct ol_client *z = mk(dev, 1), *p = mk(dev, 0);
	size_t len = 256 * KiB;
	uint16_t *d = malloc(len);
	int good = 1;
	for (uint64_t i = 0; i < 8; i++) {
		synth_bf16(d, len / 2, base + i);
		good &= op1(z, 1, base + i, d, len, (int)(i & 1), NULL) == OL_KV_OK;
		good &= same_get(z, base + i, (uint8_t *)d, len, (int)(i % 3 == 0));
	}
	ok(z && p && good, "%s: 8 synthetic BF16 blocks of 256 KiB round trip (1 and 3 iovs)", dev);
	uint64_t sl = 0, ex = 0;
	uint8_t *s = stored(p, base + 7, len + 64, &sl);
	uint8_t k[32];
	key_of(k, base + 7);
	struct ol_kv_op eo = {.key = k};
	ol_kv_exists(z, &eo, 1);
	ex = eo.value_len;
	ok(s && memcmp(s, OLZ_MAGIC, 4) == 0 && sl < len * 0.85 && ex == sl,
	   "%s: the server holds %llu bytes for 262144 (OLZ1 header), exists says %llu", dev,
	   (unsigned long long)sl, (unsigned long long)ex);
	free(s);
	uint64_t in = stat_of(z, "compress_in_bytes"), out = stat_of(z, "compress_out_bytes");
	ok(in == 8 * len && out < in && stat_of(z, "decompress_out_bytes") == 8 * len,
	   "%s: client stats: compress %llu -> %llu bytes", dev, (unsigned long long)in,
	   (unsigned long long)out);
	free(d);
	ol_client_free(z);
	ol_client_free(p);
}

static void
test_mixed(const char *dev, uint64_t base)
{
	struct ol_client *z = mk(dev, 1), *p = mk(dev, 0);
	size_t len = 128 * KiB;
	uint16_t *d = malloc(len);
	synth_bf16(d, len / 2, base);
	ok(op1(p, 1, base, d, len, 0, NULL) == OL_KV_OK && same_get(z, base, (uint8_t *)d, len, 0),
	   "%s: a plain client's value is returned as is by a compressing client", dev);
	ok(op1(z, 1, base + 1, d, len, 0, NULL) == OL_KV_OK &&
	       same_get(z, base + 1, (uint8_t *)d, len, 1),
	   "%s: same data, compressed, on the next key: both kinds coexist", dev);
	ok(op1(z, 1, base, d, len, 0, NULL) == OL_KV_EXISTS, "%s: put on a plain key -> EXISTS",
	   dev);
	uint8_t *rnd = malloc(len);
	for (size_t i = 0; i < len; i++)
		rnd[i] = (uint8_t)(rand() >> 7);
	uint64_t plain0 = stat_of(z, "blocks_plain"), sl = 0;
	ok(op1(z, 1, base + 2, rnd, len, 1, NULL) == OL_KV_OK &&
	       same_get(z, base + 2, rnd, len, 0) && stat_of(z, "blocks_plain") == plain0 + 1,
	   "%s: random bytes round trip, counted as stored plain", dev);
	uint8_t *s = stored(p, base + 2, len + 64, &sl);
	ok(s && sl == len && memcmp(s, rnd, len) == 0,
	   "%s: ...and the server holds them unchanged (no header)", dev);
	free(s);
	memcpy(rnd, OLZ_MAGIC, 4);
	s = NULL;
	ok(op1(z, 1, base + 3, rnd, len, 0, NULL) == OL_KV_OK &&
	       same_get(z, base + 3, rnd, len, 0) &&
	       (s = stored(p, base + 3, len + 64, &sl)) != NULL && sl == len + OLZ_HDR,
	   "%s: a plain value starting with the magic is wrapped in a raw header", dev);
	free(s);
	uint64_t vl = 0;
	int32_t st = op1(z, 0, base + 1, d, len / 2, 0, &vl);
	ok(st == OL_KV_TRUNCATED && vl == len,
	   "%s: get into a small buffer: TRUNCATED, "
	   "value_len = original %llu",
	   dev, (unsigned long long)vl);
	free(rnd);
	free(d);
	ol_client_free(z);
	ol_client_free(p);
}

/* Crafted values put by a plain client: each says compressed but is not decodable. */
static void
test_corrupt(uint64_t base)
{
	struct ol_client *z = mk("tcp", 1), *p = mk("tcp", 0);
	size_t len = 128 * KiB;
	uint16_t *d = malloc(len);
	synth_bf16(d, len / 2, base);
	uint64_t sl = 0;
	op1(z, 1, base, d, len, 0, NULL);
	uint8_t *s = stored(p, base, len + 64, &sl);
	ok(s && sl > 2 * OLZ_HDR && sl < len, "compressed value fetched raw (%llu bytes)",
	   (unsigned long long)sl);
	if (!s)
		return;
	uint8_t *buf = malloc(len + 64);
	const char *what[] = {"a flipped payload byte", "a bad codec id", "a wrong length",
			      "a cut payload", "a huge length, small buffer (not TRUNCATED)"};
	for (int t = 0; t < 5; t++) {
		uint8_t *c = malloc(sl);
		memcpy(c, s, sl);
		uint64_t cl = sl;
		if (t == 0)
			c[sl / 2] ^= 0x40;
		if (t == 1)
			c[4] = 9;
		if (t == 2)
			c[8] ^= 2;
		if (t == 3)
			cl = sl - 100;
		if (t == 4)
			c[13] = 0x7f;
		uint64_t vl = 7;
		int32_t pst = op1(p, 1, base + 1 + t, c, cl, 0, NULL);
		int32_t st = op1(z, 0, base + 1 + t, buf, t == 4 ? sl : len + 64, 0, &vl);
		ok(pst == OL_KV_OK && st == OL_KV_CORRUPT, "%s -> %s", what[t],
		   ol_kv_status_str(st));
		free(c);
	}
	ok(stat_of(z, "blocks_corrupt") == 5, "blocks_corrupt counted");
	ok(stat_of(p, "compress_in_bytes") == 0, "a plain client counts nothing");
	free(buf);
	free(s);
	free(d);
	ol_client_free(z);
	ol_client_free(p);
}

static uint8_t *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* Every K/V file of the real sample as one block, in one batch, through dev. */
static void
test_real(const char *dir, const char *dev, uint64_t base)
{
	char sub[512], path[800];
	snprintf(sub, sizeof(sub), "%s/stories260K", dir ? dir : "");
	DIR *dd = dir ? opendir(sub) : NULL;
	if (!dd) {
		ok(1, "# SKIP real KV data not found (%s)", sub);
		return;
	}
	uint8_t *blk[64], keys[64][32];
	size_t len[64], n = 0, total = 0;
	struct dirent *e;
	while ((e = readdir(dd)) != NULL && n < 64) {
		size_t l = strlen(e->d_name);
		if (l < 8 || strcmp(e->d_name + l - 5, ".bf16") != 0 ||
		    strncmp(e->d_name, "seq", 3))
			continue;
		snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
		if ((blk[n] = read_file(path, &len[n])) != NULL)
			total += len[n++];
	}
	closedir(dd);
	struct ol_client *z = mk(dev, 1);
	struct ol_kv_op ops[64];
	struct ol_iov v[64];
	uint8_t *got[64];
	for (size_t i = 0; i < n; i++) {
		key_of(keys[i], base + i);
		got[i] = calloc(1, len[i]);
		v[i] = (struct ol_iov){blk[i], len[i]};
		ops[i] = (struct ol_kv_op){.key = keys[i], .iov = &v[i], .iovcnt = 1};
	}
	int r = ol_kv_put(z, ops, n);
	size_t okn = 0, same = 0;
	for (size_t i = 0; i < n; i++)
		okn += ops[i].status == OL_KV_OK;
	for (size_t i = 0; i < n; i++)
		v[i].base = got[i];
	r |= ol_kv_get(z, ops, n);
	for (size_t i = 0; i < n; i++) {
		same += ops[i].status == OL_KV_OK && ops[i].value_len == len[i] &&
			memcmp(got[i], blk[i], len[i]) == 0;
		free(got[i]);
		free(blk[i]);
	}
	uint64_t in = stat_of(z, "compress_in_bytes"), out = stat_of(z, "compress_out_bytes");
	ok(r == 0 && n > 0 && okn == n && same == n,
	   "%s: %zu real K/V blocks (%zu bytes) put and got back bit-exact in one batch", dev, n,
	   total);
	ok(in == total && out < in, "%s: real data stored as %llu of %llu bytes (ratio %.3f)", dev,
	   (unsigned long long)out, (unsigned long long)in, in ? (double)in / out : 0.0);
	ol_client_free(z);
}

/* A batch bigger than a thread's scratch cap runs as several chunks, in order. */
static void
test_big_batch(void)
{
	enum { N = 40 };
	size_t len = 2u << 20;
	struct ol_client *z = mk("tcp", 1);
	uint16_t *base = malloc(len);
	synth_bf16(base, len / 2, 99);
	uint8_t *vals = malloc(N * len), *got = calloc(N, len), keys[N][32];
	struct ol_kv_op ops[N];
	struct ol_iov v[N];
	for (size_t i = 0; i < N; i++) {
		memcpy(vals + i * len, base, len);
		memcpy(vals + i * len + 4096 * i, &i, sizeof(i)); /* each block differs */
		key_of(keys[i], 8000 + i);
		v[i] = (struct ol_iov){vals + i * len, len};
		ops[i] = (struct ol_kv_op){.key = keys[i], .iov = &v[i], .iovcnt = 1};
	}
	int r = ol_kv_put(z, ops, N);
	size_t good = 0;
	for (size_t i = 0; i < N; i++) {
		good += ops[i].status == OL_KV_OK;
		v[i].base = got + i * len;
	}
	r |= ol_kv_get(z, ops, N);
	for (size_t i = 0; i < N; i++)
		good += ops[i].status == OL_KV_OK && ops[i].value_len == len;
	ok(r == 0 && good == 2 * N && memcmp(vals, got, N * len) == 0,
	   "a batch of %d x 2 MiB (over the %u MiB scratch cap) round trips in chunks", N,
	   OLZ_SCRATCH_CAP >> 20);
	free(vals);
	free(got);
	free(base);
	ol_client_free(z);
}

static void
test_opts(void)
{
	const char *nodes[] = {g_addr};
	struct ol_client_opts o = {.size = sizeof(o), .nodes = nodes, .n_nodes = 1, .compress = 2};
	struct ol_client *c = NULL;
	ok(ol_client_new(&o, &c) == -EINVAL, "compress = 2 is rejected");
	o.compress = 1;
	o.compress_row_bytes = 63;
	ok(ol_client_new(&o, &c) == -EINVAL, "an odd row size is rejected");
	o.compress_row_bytes = 64;
	o.size = offsetof(struct ol_client_opts, compress); /* an old caller: no compress */
	ok(ol_client_new(&o, &c) == 0 && c, "an old-size opts struct still works");
	char json[8192];
	ok(c && ol_kv_stats(c, json, sizeof(json)) > 0 && strstr(json, "\"compress\":\"off\""),
	   "...and its compression is off");
	ol_client_free(c);
}

int
main(int argc, char **argv)
{
	struct ol_config cfg;
	ol_config_default(&cfg);
	ol_log_threshold = OL_LOG_WARN;
	snprintf(cfg.kv_addr, sizeof(cfg.kv_addr), "127.0.0.1:0");
	cfg.kv_spill_dir[0] = '\0';
	cfg.kv_spill_bytes = 0;
	cfg.kv_dram_bytes = 192ull << 20;
	snprintf(cfg.kv_shm_name, sizeof(cfg.kv_shm_name), "/olkv-ztest-%d", (int)getpid());
	struct ol_kv_server *s = NULL;
	if (ol_kv_server_start(&cfg, &s) != 0) {
		printf("1..0 # SKIP cannot start a KV server\n");
		return 77;
	}
	snprintf(g_addr, sizeof(g_addr), "127.0.0.1:%u", ol_kv_server_port(s));
	struct ol_client *z = mk("local", 1);
	char json[8192];
	ok(z && ol_kv_stats(z, json, sizeof(json)) > 0 && strstr(json, "\"local\":true") &&
	       strstr(json, "\"compress\":\"exans\""),
	   "in-process server on %s, local shm path mapped, compression on", g_addr);
	ol_client_free(z);
	test_opts();
	test_synthetic("local", 1000);
	test_synthetic("tcp", 2000);
	test_mixed("local", 3000);
	test_mixed("tcp", 4000);
	test_corrupt(5000);
	test_real(argc > 1 ? argv[1] : NULL, "local", 6000);
	test_real(argc > 1 ? argv[1] : NULL, "tcp", 7000);
	test_big_batch();
	ol_kv_server_stop(s);
	shm_unlink(cfg.kv_shm_name);
	tap_done();
}
