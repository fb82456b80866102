/* bench/codec_bench.c - ExANS on raw BF16 files beside zstd -1 and lz4 in the same run.
 * Usage: codec_bench [--speed] [--impl scalar|avx2|avx512] [--reps N] [DIR_OR_FILE...]
 *        (default input ../shared/data/kv-bf16/stories260K; --help lists the options)
 * Ratio: every file compressed on its own (one K or V tensor per file, as the KV pool would).
 * Speed: one core, on the files concatenated and repeated to >= 64 MiB; best of 3 runs,
 * timed in thread CPU time (the build machines are shared: wall time would count others). */
#include <dirent.h>
#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "codec/exans.h"

struct file {
	uint8_t *p;
	size_t n;
	int kind; /* 1: V (*.v.bf16), 2: K (*.k.bf16), 0: other */
};

static struct file files[4096];
static int nfiles;
static int reps_n = 3;	  /* best of reps_n timed runs */
static int only_impl = 0; /* 0: every supported impl, else one enum ol_exans_impl */

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* per-core: CPU time, not wall */
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
load(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) != 0 || st.st_size <= 0 || nfiles >= 4096) {
		if (f)
			fclose(f);
		return;
	}
	uint8_t *p = malloc((size_t)st.st_size);
	size_t n = fread(p, 1, (size_t)st.st_size, f);
	fclose(f);
	size_t l = strlen(path);
	int kind = l > 7 && strcmp(path + l - 7, ".v.bf16") == 0   ? 1
		   : l > 7 && strcmp(path + l - 7, ".k.bf16") == 0 ? 2
								   : 0;
	files[nfiles++] = (struct file){p, n, kind};
}

static void
load_arg(const char *a)
{
	struct stat st;
	if (stat(a, &st) != 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		load(a);
		return;
	}
	struct dirent **ents;
	int n = scandir(a, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		size_t l = strlen(ents[i]->d_name);
		if (l > 5 && strcmp(ents[i]->d_name + l - 5, ".bf16") == 0) {
			char p[8192];
			snprintf(p, sizeof(p), "%s/%s", a, ents[i]->d_name);
			load(p);
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

static void
ratios(uint32_t blk)
{
	double raw = 0, ex = 0, bound = 0, zs = 0, lz = 0;
	struct ol_exans_opts o = {.block_bytes = blk};
	for (int i = 0; i < nfiles; i++) {
		size_t n = files[i].n, cap = ol_exans_bound(n, blk);
		cap = cap > ZSTD_compressBound(n) ? cap : ZSTD_compressBound(n);
		uint8_t *c = malloc(cap + (size_t)LZ4_compressBound((int)n));
		ex += (double)ol_exans_compress(files[i].p, n, c, cap, &o);
		for (size_t off = 0; off < n; off += blk) {
			double b;
			ol_exans_exp_entropy(files[i].p + off, n - off < blk ? n - off : blk, &b);
			bound += b;
		}
		if (blk == 65536) {
			zs += (double)ZSTD_compress(c, cap, files[i].p, n, 1);
			lz += LZ4_compress_default((const char *)files[i].p, (char *)c, (int)n,
						   LZ4_compressBound((int)n));
		}
		raw += (double)n;
		free(c);
	}
	printf("ratio  block %7u  exans %.4fx  bound(exp at entropy, rest raw) %.4fx  "
	       "exans/bound %.2f%% over\n",
	       blk, raw / ex, raw / bound, 100 * (ex / bound - 1));
	if (blk == 65536)
		printf("ratio  same files       zstd-1 %.4fx  lz4 %.4fx\n", raw / zs, raw / lz);
}

/* zstd -19 on the two byte planes of a file (the LZ reference that catches repeats). */
static double
zstd_planes(const uint8_t *p, size_t n)
{
	size_t h = n / 2, cap = ZSTD_compressBound(n);
	uint8_t *pl = malloc(n), *c = malloc(cap);
	for (size_t i = 0; i < h; i++) {
		pl[i] = p[2 * i];
		pl[h + i] = p[2 * i + 1];
	}
	if (n & 1)
		pl[n - 1] = p[n - 1];
	double r = (double)ZSTD_compress(c, cap, pl, h, 19) +
		   (double)ZSTD_compress(c, cap, pl + h, n - h, 19);
	free(pl);
	free(c);
	return r;
}

/* Rows mode (row = one token: 4 KV heads x head_dim 8 x 2 bytes) beside zstd -19 planes,
 * over all files, V files, K files; layer 0 of V repeats where tokens repeat. */
static void
rows_ratio(uint32_t row)
{
	double raw[3] = {0}, ex[3] = {0}, rw[3] = {0}, zp[3] = {0};
	struct ol_exans_opts o = {.row_bytes = row};
	for (int i = 0; i < nfiles; i++) {
		size_t n = files[i].n, cap = ol_exans_bound(n, 0);
		uint8_t *c = malloc(cap);
		int k = files[i].kind;
		double a = (double)ol_exans_compress(files[i].p, n, c, cap, NULL);
		double b = (double)ol_exans_compress(files[i].p, n, c, cap, &o);
		double z = zstd_planes(files[i].p, n);
		for (int j = 0; j < 3; j++)
			if (j == 0 || j == k) {
				raw[j] += (double)n;
				ex[j] += a;
				rw[j] += b;
				zp[j] += z;
			}
		free(c);
	}
	static const char *name[] = {"all", "V", "K"};
	for (int j = 0; j < 3; j++)
		if (raw[j] > 0)
			printf("rows   %-3s files  exans %.4fx  exans+rows(%u B) %.4fx  "
			       "zstd-19 byte planes %.4fx\n",
			       name[j], raw[j] / ex[j], row, raw[j] / rw[j], raw[j] / zp[j]);
}

typedef long (*op_fn)(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg);

static double
gbps(op_fn fn, const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg, size_t bytes,
     long *res)
{
	double best = 1e9;
	for (int rep = 0; rep < reps_n; rep++) {
		double t = now();
		*res = fn(in, n, out, cap, arg);
		t = now() - t;
		best = t < best ? t : best;
	}
	return (double)bytes / best / 1e9;
}

static long
ex_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return ol_exans_compress(in, n, out, cap, arg);
}

static long
ex_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return ol_exans_decompress_opts(in, n, out, cap, arg);
}

static long
zs_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return (long)ZSTD_compress(out, cap, in, n, 1);
}

static long
zs_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return (long)ZSTD_decompress(out, cap, in, n);
}

static long
lz_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return LZ4_compress_default((const char *)in, (char *)out, (int)n, (int)cap);
}

static long
lz_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap, void *arg)
{
	return LZ4_decompress_safe((const char *)in, (char *)out, (int)n, (int)cap);
}

static void
speeds(void)
{
	size_t one = 0, n = 0;
	for (int i = 0; i < nfiles; i++)
		one += files[i].n;
	size_t reps = ((64u << 20) + one - 1) / one;
	uint8_t *big = malloc(one * reps);
	for (size_t r = 0; r < reps; r++)
		for (int i = 0; i < nfiles; i++, n += files[i - 1].n)
			memcpy(big + n, files[i].p, files[i].n);
	size_t cap = ol_exans_bound(n, 0) + ZSTD_compressBound(n);
	uint8_t *c = malloc(cap), *d = malloc(n);
	long cl, dl;
	printf("speed  %zu MiB, one core, GB/s of uncompressed BF16\n", n >> 20);
	static const enum ol_exans_impl im[] = {OL_EXANS_SCALAR, OL_EXANS_AVX2, OL_EXANS_AVX512};
	for (int k = 0; k < 3; k++) {
		struct ol_exans_opts o = {.impl = im[k]};
		if (!ol_exans_impl_supported(im[k]) || (only_impl && only_impl != (int)im[k]))
			continue;
		double e = gbps(ex_c, big, n, c, cap, &o, n, &cl);
		double dd = gbps(ex_d, c, (size_t)cl, d, n, &o, n, &dl);
		printf("speed  exans-%-7s encode %6.2f  decode %6.2f  ratio %.4fx %s\n",
		       ol_exans_impl_name(im[k]), e, dd, (double)n / (double)cl,
		       dl == (long)n && memcmp(d, big, n) == 0 ? "verified" : "MISMATCH");
	}
	double e = gbps(zs_c, big, n, c, cap, NULL, n, &cl);
	double dd = gbps(zs_d, c, (size_t)cl, d, n, NULL, n, &dl);
	printf("speed  zstd-1         encode %6.2f  decode %6.2f  ratio %.4fx\n", e, dd,
	       (double)n / (double)cl);
	e = gbps(lz_c, big, n, c, cap, NULL, n, &cl);
	dd = gbps(lz_d, c, (size_t)cl, d, n, NULL, n, &dl);
	printf("speed  lz4            encode %6.2f  decode %6.2f  ratio %.4fx\n", e, dd,
	       (double)n / (double)cl);
	free(big);
	free(c);
	free(d);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: codec_bench [--speed] [--impl scalar|avx2|avx512] [--reps N] "
		   "[DIR_OR_FILE...]\n"
		   "  --speed  speed lines only (skip the ratio and rows tables)\n"
		   "  --impl   time only this ExANS implementation (zstd and lz4 still run)\n"
		   "  --reps   best of N timed runs per figure (default 3, 1..1000)\n"
		   "  input defaults to ../shared/data/kv-bf16/stories260K\n");
}

static int
parse_impl(const char *s)
{
	static const char *names[] = {"scalar", "avx2", "avx512"};
	for (int k = 0; k < 3; k++)
		if (strcmp(s, names[k]) == 0)
			return OL_EXANS_SCALAR + k;
	return -1;
}

int
main(int argc, char **argv)
{
	int speed_only = 0, ninputs = 0;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--speed") == 0) {
			speed_only = 1;
		} else if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc) {
			only_impl = parse_impl(argv[++i]);
			if (only_impl < 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
			unsigned long long v = strtoull(argv[++i], &end, 10);
			if (*end || v < 1 || v > 1000) {
				usage(stderr);
				return 2;
			}
			reps_n = (int)v;
		} else if (argv[i][0] == '-') {
			usage(stderr);
			return 2;
		} else {
			load_arg(argv[i]);
			ninputs++;
		}
	}
	if (!ninputs)
		load_arg("../shared/data/kv-bf16/stories260K");
	if (!nfiles) {
		fprintf(stderr, "codec_bench: no .bf16 input found\n");
		return 1;
	}
	printf("input  %d files\n", nfiles);
	static const uint32_t blks[] = {4096, 16384, 32768, 65536, 131072, 262144};
	for (size_t i = 0; !speed_only && i < sizeof(blks) / sizeof(blks[0]); i++)
		ratios(blks[i]);
	if (!speed_only)
		rows_ratio(64);
	speeds();
	return 0;
}
