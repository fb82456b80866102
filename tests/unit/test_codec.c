/* tests/unit/test_codec.c - ExANS: round trips, special values, lengths, real KV dumps,
 * SIMD == scalar, corruption detection, raw fallback. argv[1]: the kv-bf16 data dir. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "codec/exans.h"
#include "codec/exans_fmt.h"
#include "codec/exans_impl.h"
#include "tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* BF16 with a peaked exponent distribution around 127 (like activations). */
static void
fill_bf16(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i & 1) {
			int e = 127;
			while (rnd() % 3 == 0)
				e += rnd() & 1 ? 1 : -1;
			uint16_t v = (uint16_t)((rnd() & 0x807f) | (uint16_t)(e & 0xff) << 7);
			p[i - 1] = (uint8_t)v;
			p[i] = (uint8_t)(v >> 8);
		} else if (i == n - 1) {
			p[i] = (uint8_t)rnd();
		}
	}
}

static void
fill_rand(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static const enum ol_exans_impl impls[] = {OL_EXANS_SCALAR, OL_EXANS_AVX2, OL_EXANS_AVX512};

/* Compress with every supported impl (the bytes must be identical), check the bound,
 * decompress with every impl, compare. Returns the compressed size or -1. */
static ssize_t
roundtrip(const uint8_t *src, size_t n, uint32_t blk)
{
	struct ol_exans_opts o = {.block_bytes = blk};
	size_t cap = ol_exans_bound(n, blk);
	uint8_t *c = malloc(cap), *d = malloc(n + 1);
	ssize_t r = ol_exans_compress(src, n, c, cap, &o);
	ssize_t ret = r;
	if (r < 0 || (size_t)r > cap)
		ret = -1;
	uint8_t *c2 = malloc(cap);
	for (int k = 0; ret >= 0 && k < 3; k++) {
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		o.impl = impls[k]; /* every encoder writes the same bytes */
		if (ol_exans_compress(src, n, c2, cap, &o) != r || memcmp(c, c2, (size_t)r) != 0)
			ret = -1;
		memset(d, 0xa5, n + 1);
		ssize_t m = ol_exans_decompress_opts(c, (size_t)r, d, n, &o);
		if (m != (ssize_t)n || memcmp(d, src, n) != 0)
			ret = -1;
	}
	uint64_t ds = 1;
	if (ret >= 0 && (ol_exans_decoded_size(c, (size_t)r, &ds) != 0 || ds != n))
		ret = -1;
	free(c);
	free(c2);
	free(d);
	return ret;
}

static void
test_fmt(void)
{
	uint32_t t[256];
	ol_exans_crc_table(t);
	ok(ol_exans_crc_sw(0, (const uint8_t *)"123456789", 9, t) == 0xe3069283u,
	   "software CRC-32C check value");
	uint32_t a = ol_exans_crc_sw(0, (const uint8_t *)"1234", 4, t);
	uint32_t b = ol_exans_crc_sw(0, (const uint8_t *)"56789", 5, t);
	ok(ol_exans_crc_combine(a, b, 5) == 0xe3069283u, "CRC-32C combine");
	int good = 1;
	for (int it = 0; it < 2000 && good; it++) {
		uint32_t cnt[256] = {0}, f[256], g[256];
		int ns = 1 + (int)(rnd() % (it % 3 ? 40 : 256));
		uint64_t n = 0;
		for (int k = 0; k < ns; k++) {
			uint32_t c = it % 5 ? (uint32_t)(1 + rnd() % (rnd() % 2 ? 3 : 100000)) : 1;
			cnt[rnd() & 255] += c;
		}
		for (int s = 0; s < 256; s++)
			n += cnt[s];
		ol_exans_quantise(cnt, n, f);
		uint32_t sum = 0;
		for (int s = 0; s < 256; s++) {
			sum += f[s];
			good &= f[s] <= 4095 && (cnt[s] == 0 || f[s] >= 1);
		}
		uint8_t buf[OL_EXANS_TABLE_MAX];
		size_t k = ol_exans_table_write(f, buf);
		good &= sum == 4096 && k <= sizeof(buf) && ol_exans_table_read(buf, k, g) == k;
		good &= memcmp(f, g, sizeof(f)) == 0 && ol_exans_table_read(buf, k - 1, g) == 0;
	}
	ok(good, "quantise: sum 4096, every present symbol 1..4095; table round trip, truncation");
}

static void
test_lengths(void)
{
	uint8_t *p = malloc(1 << 21);
	int good = 1;
	for (size_t n = 0; n <= 640 && good; n++) {
		fill_bf16(p, n);
		good &= roundtrip(p, n, 1024) >= 0 && roundtrip(p, n, 0) >= 0;
	}
	ok(good, "every length 0..640, BF16-like data, blocks of 1 KiB and 64 KiB");
	static const size_t odd[] = {1023,  1025,   4095,    65535,  65536,
				     65537, 131073, 1000001, 2097151};
	good = 1;
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		fill_bf16(p, odd[i]);
		ssize_t r = roundtrip(p, odd[i], 0);
		good &= r > 0 && (double)odd[i] / (double)r > 1.3;
		good &= roundtrip(p, odd[i], 4096) > 0;
	}
	ok(good, "odd large lengths round trip and compress (> 1.3x)");
	free(p);
}

static void
test_special(void)
{
	uint8_t p[8192];
	static const uint16_t sp[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0,
				      0xffc0, 0x7f81, 0xffff, 0x0001, 0x8001,
				      0x007f, 0x807f, 0x0080, 0x3f80, 0xbf80};
	int n = 0;
	for (int e = 0; e < 256; e++)
		for (int k = 0; k < 8; k++) { /* all 256 exponents, both signs, random mantissas */
			uint16_t v = (uint16_t)((rnd() & 0x807f) | e << 7);
			p[2 * n] = (uint8_t)v;
			p[2 * n + 1] = (uint8_t)(v >> 8);
			n++;
		}
	for (size_t i = 0; i < sizeof(sp) / 2 && n < 4096; i++, n++) {
		p[2 * n] = (uint8_t)sp[i];
		p[2 * n + 1] = (uint8_t)(sp[i] >> 8);
	}
	ok(roundtrip(p, 2 * (size_t)n, 0) > 0 && roundtrip(p, 2 * (size_t)n + 1, 1024) > 0,
	   "all 256 exponents, NaN, Inf, +-0, subnormals round trip");
	/* mostly one exponent with every other exponent once: forces frequency-1 symbols */
	for (int i = 0; i < 4096; i++) {
		uint16_t v = (uint16_t)((rnd() & 0x807f) | (i < 256 ? i : 127) << 7);
		p[2 * i] = (uint8_t)v;
		p[2 * i + 1] = (uint8_t)(v >> 8);
	}
	ok(roundtrip(p, 8192, 0) > 0, "skewed table with 255 rare symbols");
	for (int i = 0; i < 4096; i++) {
		p[2 * i] = 0x00;
		p[2 * i + 1] = 0x3f;
	}
	ssize_t r = roundtrip(p, 8192, 0);
	ok(r > 0 && r < 8192 / 2 + 200, "one constant value (single-symbol table): %zd bytes", r);
}

static void
test_raw_fallback(void)
{
	size_t n = 300000;
	uint8_t *p = malloc(n), *c = malloc(ol_exans_bound(n, 0));
	fill_rand(p, n);
	ssize_t r = roundtrip(p, n, 0);
	ok(r > 0 && (size_t)r <= n + 24 + 16 * 5, "random bytes: raw fallback, %zd <= raw + %d", r,
	   24 + 16 * 5);
	ssize_t b = ol_exans_block_encode(p, 65536, c, ol_exans_block_bound(65536));
	ok(b == 65536 + OL_EXANS_BHDR_BYTES && c[8] == OL_EXANS_MODE_RAW, "raw block flagged");
	fill_bf16(p, n);
	b = ol_exans_block_encode(p, 65536, c, ol_exans_block_bound(65536));
	ok(b > 0 && b < 50000 && c[8] == OL_EXANS_MODE_RANS, "BF16 block is rANS coded (%zd)", b);
	ok(ol_exans_compress(p, n, c, 1000, NULL) == -ENOSPC, "small cap: -ENOSPC");
	struct ol_exans_opts o = {.block_bytes = 3000};
	ok(ol_exans_compress(p, n, c, ol_exans_bound(n, 0), &o) == -EINVAL, "bad block size");
	free(p);
	free(c);
}

/* The group kernels on random tables, states and word streams (valid or not): every impl
 * must write the same bytes, end in the same states at the same word and agree on errors. */
typedef int (*groups_fn)(struct ol_exans_dec *, uint8_t *, const uint8_t *, size_t);
typedef int (*groups2_fn)(struct ol_exans_dec *, struct ol_exans_dec *, uint8_t *, uint8_t *,
			  const uint8_t *, const uint8_t *, size_t);

static void
rand_table(uint32_t *tbl)
{
	uint32_t cnt[256] = {0}, f[256], cum = 0;
	int lo = (int)(rnd() % 256), w = 1 + (int)(rnd() % (rnd() % 4 ? 24 : 256));
	for (int k = 0; k < 64; k++)
		cnt[(lo + (int)(rnd() % (uint64_t)w)) & 255] += 1 + (uint32_t)(rnd() % 1000);
	uint64_t n = 0;
	for (int s = 0; s < 256; s++)
		n += cnt[s];
	ol_exans_quantise(cnt, n, f);
	for (uint32_t s = 0; s < 256; s++) /* exans.c dec_table */
		for (uint32_t j = 0; j < f[s]; j++, cum++)
			tbl[cum] = ol_exans_rot((uint8_t)s) | f[s] << 8 | j << 20;
}

static void
rand_dec(struct ol_exans_dec *d, const uint32_t *tbl, const uint8_t *w, size_t wlen)
{
	for (unsigned l = 0; l < OL_EXANS_LANES; l++)
		d->x[l] = OL_EXANS_RANS_L + (uint32_t)(rnd() % ((1u << 31) - OL_EXANS_RANS_L));
	d->tbl = tbl;
	d->wp = w;
	d->wend = w + wlen;
}

static int
same_dec(const struct ol_exans_dec *a, const struct ol_exans_dec *b)
{
	return a->wp == b->wp && memcmp(a->x, b->x, sizeof(a->x)) == 0;
}

static void
test_kernels(void)
{
	static const groups_fn one[] = {ol_exans_dec_groups_scalar, ol_exans_dec_groups_avx2,
					ol_exans_dec_groups_avx512};
	static const groups2_fn two[] = {NULL, ol_exans_dec_groups2_avx2,
					 ol_exans_dec_groups2_avx512};
	enum { NG = 40, WB = 2 * 32 * NG + 64 };
	static uint32_t t0[OL_EXANS_PROB_SCALE], t1[OL_EXANS_PROB_SCALE];
	static uint8_t w0[WB], w1[WB], sm0[32 * NG], sm1[32 * NG];
	static uint8_t ref0[64 * NG], ref1[64 * NG], o0[64 * NG], o1[64 * NG];
	int good = 1, runs = 0;
	for (int it = 0; it < 400 && good; it++) {
		rand_table(t0);
		rand_table(t1);
		fill_rand(w0, WB);
		fill_rand(w1, WB);
		fill_rand(sm0, sizeof(sm0));
		fill_rand(sm1, sizeof(sm1));
		size_t ng = rnd() % (NG + 1), wl0 = rnd() % WB, wl1 = rnd() % WB;
		if (it % 4 == 0) /* short streams: the checked tail and -EBADMSG */
			wl0 = rnd() % 200, wl1 = rnd() % 200;
		struct ol_exans_dec s0, s1, a, b;
		rand_dec(&s0, t0, w0, wl0);
		rand_dec(&s1, t1, w1, wl1);
		a = s0;
		b = s1;
		int r0 = ol_exans_dec_groups_scalar(&a, ref0, sm0, ng);
		int r1 = ol_exans_dec_groups_scalar(&b, ref1, sm1, ng);
		for (int k = 1; k < 3; k++) {
			if (!ol_exans_impl_supported(impls[k]))
				continue;
			struct ol_exans_dec c = s0, e = s1;
			int q = one[k](&c, o0, sm0, ng);
			good &= q == r0 &&
				(q != 0 || (same_dec(&c, &a) && memcmp(o0, ref0, 64 * ng) == 0));
			c = s0;
			q = two[k](&c, &e, o0, o1, sm0, sm1, ng);
			good &= (q != 0) == (r0 != 0 || r1 != 0);
			if (q == 0)
				good &= same_dec(&c, &a) && same_dec(&e, &b) &&
					memcmp(o0, ref0, 64 * ng) == 0 &&
					memcmp(o1, ref1, 64 * ng) == 0;
			runs++;
		}
	}
	ok(good, "group kernels: %d random runs, SIMD == scalar bytes, states, words, errors",
	   runs);
}

/* Each block of a container decoded alone by every impl (the single-block kernels; the
 * container path pairs blocks): the same bytes as the scalar decoder and the input. */
static int
blocks_agree(const uint8_t *src, size_t n, uint32_t blk)
{
	struct ol_exans_opts o = {.block_bytes = blk};
	size_t cap = ol_exans_bound(n, blk);
	uint8_t *c = malloc(cap), *d = malloc(blk + 1), *ref = malloc(blk + 1);
	ssize_t m = ol_exans_compress(src, n, c, cap, &o);
	uint32_t nb = 0;
	int good = m > 0 && ol_exans_block_count(c, (size_t)m, &nb) == 0;
	for (uint32_t i = 0; good && i < nb; i++) {
		struct ol_exans_block_ref r;
		good &= ol_exans_block_locate(c, (size_t)m, i, &r) == 0;
		ssize_t k0 = ol_exans_block_decode(c + r.off, r.len, ref, blk, OL_EXANS_SCALAR);
		good &= k0 == (ssize_t)r.dec_len && memcmp(ref, src + r.dec_off, r.dec_len) == 0;
		for (int k = 1; good && k < 3; k++) {
			if (!ol_exans_impl_supported(impls[k]))
				continue;
			memset(d, 0x5a, blk + 1);
			ssize_t q = ol_exans_block_decode(c + r.off, r.len, d, blk, impls[k]);
			good &= q == k0 && memcmp(d, ref, r.dec_len) == 0;
		}
	}
	free(c);
	free(d);
	free(ref);
	return good;
}

static void
test_decoders_agree(void)
{
	uint8_t *p = malloc(8192);
	int good = 1;
	for (size_t n = 0; n <= 8192 && good; n++) {
		fill_bf16(p, n);
		good &= blocks_agree(p, n, 8192);
	}
	ok(good, "every length 0..8192 as one block: every decoder == scalar, byte for byte");
	free(p);
}

/* Every single-byte change of a small stream must be an error (never wrong data). */
static void
test_corruption(void)
{
	uint8_t p[600], c[1024], d[600];
	fill_bf16(p, sizeof(p));
	struct ol_exans_opts o = {.block_bytes = 1024};
	ssize_t n = ol_exans_compress(p, sizeof(p), c, sizeof(c), &o);
	ok(n > 0 && n < (ssize_t)sizeof(p), "small stream is compressed (%zd bytes)", n);
	int bad = 0, tried = 0;
	for (int k = 0; k < 3; k++) {
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		o.impl = impls[k];
		for (ssize_t i = 0; i < n; i++)
			for (int v = 1; v < 256; v += (v < 8 ? 1 : 37)) {
				c[i] ^= (uint8_t)v;
				ssize_t r =
				    ol_exans_decompress_opts(c, (size_t)n, d, sizeof(d), &o);
				bad += r >= 0;
				tried++;
				c[i] ^= (uint8_t)v;
			}
		for (ssize_t len = 0; len < n; len++)
			bad += ol_exans_decompress_opts(c, (size_t)len, d, sizeof(d), &o) >= 0;
	}
	ok(bad == 0, "%d byte corruptions and every truncation: all -EBADMSG (%d accepted)", tried,
	   bad);
	ok(ol_exans_decompress(c, (size_t)n, d, sizeof(d) - 1) == -ENOSPC,
	   "cap too small: -ENOSPC");
}

static void
test_blocks(void)
{
	size_t n = 5 * 4096 + 77;
	uint8_t *p = malloc(n), *c = malloc(ol_exans_bound(n, 4096)), d[4096];
	fill_bf16(p, n);
	struct ol_exans_opts o = {.block_bytes = 4096};
	ssize_t m = ol_exans_compress(p, n, c, ol_exans_bound(n, 4096), &o);
	uint32_t nb = 0;
	int good = m > 0 && ol_exans_block_count(c, (size_t)m, &nb) == 0 && nb == 6;
	for (uint32_t i = 0; good && i < nb; i++) {
		struct ol_exans_block_ref r;
		good &= ol_exans_block_locate(c, (size_t)m, i, &r) == 0;
		ssize_t k = ol_exans_block_decode(c + r.off, r.len, d, sizeof(d), OL_EXANS_AUTO);
		good &= k == (ssize_t)r.dec_len && memcmp(d, p + r.dec_off, r.dec_len) == 0;
	}
	struct ol_exans_block_ref r;
	ok(good && ol_exans_block_locate(c, (size_t)m, 6, &r) == -ERANGE,
	   "each block located and decoded alone");
	free(p);
	free(c);
}

/* Rows mode: exact repeats of earlier rows become 2-byte references. */
static void
test_rows(const char *dir)
{
	size_t n = 3 * 65536 + 1001, R = 64;
	uint8_t *p = malloc(n), *c = malloc(2 * n), *c2 = malloc(2 * n), *d = malloc(n);
	fill_bf16(p, n);
	for (size_t row = 1; row < n / R; row++) /* 3 rows in 4 repeat an earlier one */
		if (rnd() % 4)
			memcpy(p + row * R, p + (rnd() % row) * R, R);
	struct ol_exans_opts o = {.row_bytes = (uint32_t)R};
	ssize_t plain = ol_exans_compress(p, n, c2, 2 * n, NULL);
	ssize_t m = ol_exans_compress(p, n, c, 2 * n, &o);
	int good = m > 0 && m < plain / 2 && c[24 + 4 * 4 + 8] == OL_EXANS_MODE_ROWS;
	for (int k = 0; good && k < 3; k++) {
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		o.impl = impls[k];
		good &=
		    ol_exans_compress(p, n, c2, 2 * n, &o) == m && memcmp(c, c2, (size_t)m) == 0;
		good &= ol_exans_decompress_opts(c, (size_t)m, d, n, &o) == (ssize_t)n &&
			memcmp(d, p, n) == 0;
	}
	ok(good, "rows mode: %zd bytes vs %zd plain, same bytes from every impl, round trip", m,
	   plain);
	int bad = 0;
	struct ol_exans_opts so = {.block_bytes = 1024, .row_bytes = 16};
	ssize_t sn = ol_exans_compress(p, 1500, c, 2 * n, &so); /* small: flip every byte */
	good = sn > 0 && c[24 + 8 + 8] == OL_EXANS_MODE_ROWS;
	for (ssize_t i = 0; good && i < sn; i++)
		for (int v = 1; v < 256; v <<= 1) {
			c[i] ^= (uint8_t)v;
			bad += ol_exans_decompress(c, (size_t)sn, d, 1500) >= 0;
			c[i] ^= (uint8_t)v;
		}
	ok(good && bad == 0, "rows block: every bit flip of every byte is -EBADMSG (%d accepted)",
	   bad);
	fill_bf16(p, n);
	ok(ol_exans_compress(p, n, c, 2 * n, &o) == ol_exans_compress(p, n, c2, 2 * n, NULL),
	   "rows mode without repeats costs nothing");
	free(p);
	free(c);
	free(c2);
	free(d);
	(void)dir;
}

static uint8_t *
slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
	*n = fread(p, 1, (size_t)(sz > 0 ? sz : 0), f);
	fclose(f);
	return p;
}

/* Rows mode: same bytes from every impl, round trip on every impl. Size or -1. */
static ssize_t
roundtrip_rows(const uint8_t *src, size_t n, uint32_t row)
{
	struct ol_exans_opts o = {.row_bytes = row};
	size_t cap = ol_exans_bound(n, 0);
	uint8_t *c = malloc(cap), *c2 = malloc(cap), *d = malloc(n + 1);
	ssize_t r = ol_exans_compress(src, n, c, cap, &o), ret = r;
	for (int k = 0; ret >= 0 && k < 3; k++) {
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		o.impl = impls[k];
		if (ol_exans_compress(src, n, c2, cap, &o) != r || memcmp(c, c2, (size_t)r) != 0 ||
		    ol_exans_decompress_opts(c, (size_t)r, d, n, &o) != (ssize_t)n ||
		    memcmp(d, src, n) != 0)
			ret = -1;
	}
	free(c);
	free(c2);
	free(d);
	return ret;
}

static void
test_real(const char *dir)
{
	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/stories260K", dir ? dir : "");
	DIR *dd = dir ? opendir(sub) : NULL;
	if (!dd) {
		printf("ok %d # SKIP real KV dump absent (%s)\n", ++tap_n, sub);
		return;
	}
	struct dirent *de;
	int files = 0, good = 1;
	double raw = 0, comp = 0, bound = 0, rows = 0;
	while ((de = readdir(dd))) {
		size_t l = strlen(de->d_name), n = 0;
		if (l < 6 || strcmp(de->d_name + l - 5, ".bf16") != 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", sub, de->d_name);
		uint8_t *p = slurp(path, &n);
		ssize_t r = p ? roundtrip(p, n, 0) : -1;
		ssize_t q = p ? roundtrip_rows(p, n, 64) : -1;
		good &= r > 0 && q > 0 && q <= r && blocks_agree(p, n, 65536);
		rows += (double)(q > 0 ? q : 0);
		for (size_t off = 0; p && off < n; off += 65536) {
			double b;
			ol_exans_exp_entropy(p + off, n - off < 65536 ? n - off : 65536, &b);
			bound += b;
		}
		raw += (double)n;
		comp += (double)(r > 0 ? r : 0);
		files++;
		free(p);
	}
	closedir(dd);
	ok(files >= 48 && good,
	   "%d real dump files: same bytes from every encoder, round trip on every decoder, plain "
	   "and rows mode, every block alone == scalar",
	   files);
	ok(raw / comp >= 1.50, "real dump ratio %.4f >= 1.50", raw / comp);
	ok(raw / rows > raw / comp, "rows mode (64 B rows) on the dump: %.4f", raw / rows);
	ok(comp <= bound * 1.01,
	   "within 1%% of the per-block entropy bound (%.0f vs %.0f, +%.2f%%)", comp, bound,
	   100 * (comp / bound - 1));
}

/* Run-time dispatch: AUTO is the best the CPU has, a forced impl runs itself when supported
 * and scalar otherwise (its name says which). */
static void
test_dispatch(void)
{
	__builtin_cpu_init();
	int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
	int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
	const char *want = has512 ? "avx512" : has2 ? "avx2" : "scalar";
	int good = strcmp(ol_exans_impl_name(OL_EXANS_AUTO), want) == 0;
	good &= strcmp(ol_exans_impl_name(OL_EXANS_SCALAR), "scalar") == 0;
	good &= strcmp(ol_exans_impl_name(OL_EXANS_AVX2), has2 ? "avx2" : "scalar") == 0;
	good &= strcmp(ol_exans_impl_name(OL_EXANS_AVX512), has512 ? "avx512" : "scalar") == 0;
	good &= ol_exans_impl_supported(OL_EXANS_AVX2) == has2 &&
		ol_exans_impl_supported(OL_EXANS_AVX512) == has512;
	ok(good, "dispatch: AUTO picks %s; forced impls resolve to themselves or scalar", want);
}

int
main(int argc, char **argv)
{
	for (int k = 0; k < 3; k++)
		printf("# %s: %s\n", ol_exans_impl_name(impls[k]),
		       ol_exans_impl_supported(impls[k]) ? "tested"
							 : "not supported here, skipped");
	test_dispatch();
	test_fmt();
	test_lengths();
	test_special();
	test_raw_fallback();
	test_kernels();
	test_decoders_agree();
	test_corruption();
	test_blocks();
	test_rows(argc > 1 ? argv[1] : NULL);
	test_real(argc > 1 ? argv[1] : NULL);
	tap_done();
}
