/* cmd/openlake/codec_cmd.c - `openlake codec compress|decompress|stats` on raw
 * little-endian BF16 files (ExANS, docs/exans-format.md). argv[0] is "codec". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmds.h"
#include "codec/exans.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: openlake codec compress IN OUT [--block BYTES] [--rows BYTES]\n"
		   "       openlake codec decompress IN OUT\n"
		   "       openlake codec stats IN [--block BYTES] [--rows BYTES]\n"
		   "IN/OUT: raw little-endian BF16 (compress, stats) or ExANS (decompress).\n"
		   "--block: power of two from 1024 to 16777216 (default 65536).\n"
		   "--rows: row size (even, 4..65534; e.g. heads * head_dim * 2) to store\n"
		   "        exact repeats of earlier rows as references (off by default).\n");
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whole file into memory. 0 or -errno. */
static int
read_file(const char *path, uint8_t **out, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	int r = 0;
	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) != 0) {
		r = -errno;
		goto out;
	}
	*n = (size_t)st.st_size;
	*out = malloc(*n ? *n : 1);
	if (!*out) {
		r = -ENOMEM;
		goto out;
	}
	if (fread(*out, 1, *n, f) != *n) {
		free(*out);
		r = -EIO;
	}
out:
	fclose(f);
	return r;
}

static int
write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -errno;
	int r = fwrite(p, 1, n, f) == n ? 0 : -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

/* [--block BYTES] [--rows BYTES] from argv[from..]. 0 or -EINVAL. */
static int
parse_opts(int argc, char **argv, int from, struct ol_exans_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = from; i < argc; i++) {
		int blk = strcmp(argv[i], "--block") == 0;
		if ((!blk && strcmp(argv[i], "--rows") != 0) || i + 1 >= argc)
			return -EINVAL;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(argv[++i], &end, 10);
		if (errno || *end)
			return -EINVAL;
		if (blk && (v < 1024 || v > (16u << 20) || (v & (v - 1))))
			return -EINVAL;
		if (!blk && (v < 4 || v > 65535 || (v & 1)))
			return -EINVAL;
		*(blk ? &o->block_bytes : &o->row_bytes) = (uint32_t)v;
	}
	return 0;
}

static int
do_compress(const char *in, const char *out, const struct ol_exans_opts *o)
{
	uint8_t *src, *dst;
	size_t n;
	int r = read_file(in, &src, &n);
	if (r) {
		fprintf(stderr, "codec: %s: %s\n", in, strerror(-r));
		return 1;
	}
	size_t cap = ol_exans_bound(n, o->block_bytes);
	dst = malloc(cap);
	ssize_t m = dst ? ol_exans_compress(src, n, dst, cap, o) : -ENOMEM;
	r = m < 0 ? (int)m : write_file(out, dst, (size_t)m);
	if (r == 0)
		printf("%s: %zu -> %zd bytes (%.4fx)\n", in, n, m, m ? (double)n / (double)m : 0);
	else
		fprintf(stderr, "codec: compress %s: %s\n", in, strerror(-r));
	free(src);
	free(dst);
	return r ? 1 : 0;
}

static int
do_decompress(const char *in, const char *out)
{
	uint8_t *src, *dst = NULL;
	size_t n;
	uint64_t dlen = 0;
	int r = read_file(in, &src, &n);
	if (r) {
		fprintf(stderr, "codec: %s: %s\n", in, strerror(-r));
		return 1;
	}
	r = ol_exans_decoded_size(src, n, &dlen);
	if (r == 0 && !(dst = malloc(dlen ? dlen : 1)))
		r = -ENOMEM;
	ssize_t m = r ? r : ol_exans_decompress(src, n, dst, dlen);
	r = m < 0 ? (int)m : write_file(out, dst, (size_t)m);
	if (r)
		fprintf(stderr, "codec: decompress %s: %s\n", in,
			r == -EBADMSG ? "corrupt or not ExANS data" : strerror(-r));
	free(src);
	free(dst);
	return r ? 1 : 0;
}

/* Entropy and bound summed per block, as the codec sees them. */
static void
block_stats(const uint8_t *p, size_t n, size_t b, double *hsum, double *bound)
{
	*hsum = *bound = 0;
	for (size_t off = 0; off < n; off += b) {
		size_t k = n - off < b ? n - off : b;
		double bb;
		*hsum += ol_exans_exp_entropy(p + off, k, &bb) * (double)(k / 2);
		*bound += bb;
	}
}

static int
do_stats(const char *in, const struct ol_exans_opts *o)
{
	uint8_t *src, *c, *d;
	size_t n;
	int r = read_file(in, &src, &n);
	if (r) {
		fprintf(stderr, "codec: %s: %s\n", in, strerror(-r));
		return 1;
	}
	size_t b = o->block_bytes ? o->block_bytes : 65536, cap = ol_exans_bound(n, o->block_bytes);
	c = malloc(cap);
	d = malloc(n ? n : 1);
	double tc = 1e9, td = 1e9; /* best of 5: the first run also pays page faults */
	ssize_t m = -ENOMEM, k = -ENOMEM;
	for (int rep = 0; rep < 5 && c && d; rep++) {
		double t0 = now();
		m = ol_exans_compress(src, n, c, cap, o);
		double t1 = now();
		k = m < 0 ? m : ol_exans_decompress(c, (size_t)m, d, n);
		double t2 = now();
		tc = t1 - t0 < tc ? t1 - t0 : tc;
		td = t2 - t1 < td ? t2 - t1 : td;
	}
	if (k < 0 || (size_t)k != n || memcmp(src, d, n) != 0) {
		fprintf(stderr, "codec: stats %s: round trip failed (%zd)\n", in, k);
		r = 1;
		goto out;
	}
	double hall, bound, hblk;
	hall = ol_exans_exp_entropy(src, n, NULL);
	block_stats(src, n, b, &hblk, &bound);
	printf("file               %s\n", in);
	printf("bytes              %zu (%zu BF16 values), block %zu\n", n, n / 2, b);
	printf("compressed         %zd\n", m);
	printf("ratio              %.4fx\n", m ? (double)n / (double)m : 0);
	printf("exp entropy        %.4f bits/value (whole file), %.4f (mean per block)\n", hall,
	       n >= 2 ? hblk / (double)(n / 2) : 0);
	printf("bound              %.4fx (exponent at per-block entropy + rest raw)\n",
	       bound > 0 ? (double)n / bound : 0);
	printf("vs bound           %+.2f%% size\n", bound > 0 ? 100 * ((double)m / bound - 1) : 0);
	printf("compress           %.3f ms, %.2f GB/s\n", tc * 1e3, (double)n / tc / 1e9);
	printf("decompress         %.3f ms, %.2f GB/s (%s)\n", td * 1e3, (double)n / td / 1e9,
	       ol_exans_impl_name(OL_EXANS_AUTO));
out:
	free(src);
	free(c);
	free(d);
	return r;
}

int
ol_cmd_codec(int argc, char **argv)
{
	struct ol_exans_opts o;
	if (ol_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "compress") == 0 && parse_opts(argc, argv, 4, &o) == 0)
		return do_compress(argv[2], argv[3], &o);
	if (argc == 4 && strcmp(argv[1], "decompress") == 0)
		return do_decompress(argv[2], argv[3]);
	if (argc >= 3 && strcmp(argv[1], "stats") == 0 && parse_opts(argc, argv, 3, &o) == 0)
		return do_stats(argv[2], &o);
	usage(stderr);
	return 2;
}

#ifdef OL_CODEC_CMD_MAIN
int
main(int argc, char **argv)
{
	return ol_cmd_codec(argc, argv); /* argv[0] stands for "codec" */
}
#endif
