/* codec/cuda/exans_gpucheck.cu - GPU self-check and timing of the ExANS kernels.
 * Usage: exans_gpucheck [DATA_DIR [MiB]]   (default ../shared/data/kv-bf16/stories260K, 1024)
 * Builds MiB of input by repeating the real BF16 KV dump, then checks
 *   1. GPU encode == CPU encode, byte for byte, every block;
 *   2. GPU decode of the CPU-encoded blocks == the input, every block status OK;
 *   3. corrupted blocks are reported -EBADMSG by the GPU decoder;
 * and times GPU encode and decode beside a device-to-device cudaMemcpy of the same bytes.
 * Exit 0 if every check passed, 1 if one failed, 77 if there is no GPU. */
#include <cuda_runtime.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "codec/exans.h"
}
#include "codec/cuda/exans_cuda.h"
#include "codec/exans_fmt.h"

#define BLK 65536u
#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int failures;

static void
check(int cond, const char *what)
{
	printf("%s %s\n", cond ? "PASS" : "FAIL", what);
	failures += !cond;
}

static size_t
load_dump(const char *dir, uint8_t *buf, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;
	while (d && (de = readdir(d)) && n < cap) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".bf16") != 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		FILE *f = fopen(path, "rb");
		if (f) {
			n += fread(buf + n, 1, cap - n, f);
			fclose(f);
		}
	}
	if (d)
		closedir(d);
	return n;
}

static double
cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best-of-5 milliseconds of what fn launches on the default stream. */
template <typename F>
static float
time_ms(F fn)
{
	cudaEvent_t a, b;
	float best = 1e30f;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	fn(); /* warm up */
	CK(cudaDeviceSynchronize());
	for (int r = 0; r < 5; r++) {
		float ms;
		CK(cudaEventRecord(a));
		fn();
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		best = ms < best ? ms : best;
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return best;
}

/* 4. rows mode (written by the CPU only): GPU decode of a container made with row_bytes. */
static void
check_rows(const uint8_t *in, size_t n)
{
	struct ol_exans_opts o = {0, OL_EXANS_AUTO, 64};
	size_t cap = ol_exans_bound(n, 0);
	uint8_t *c = (uint8_t *)malloc(cap), *out = (uint8_t *)malloc(n), *d_c, *d_out;
	ssize_t m = ol_exans_compress(in, n, c, cap, &o);
	uint32_t nb = 0, rows = 0, bad = 0;
	ol_exans_block_count(c, (size_t)m, &nb);
	uint64_t *off = (uint64_t *)malloc(nb * 8), *d_off;
	uint32_t *len = (uint32_t *)malloc(nb * 4), *d_len;
	int32_t *st = (int32_t *)malloc(nb * 4), *d_st;
	for (uint32_t i = 0; i < nb; i++) {
		struct ol_exans_block_ref r;
		ol_exans_block_locate(c, (size_t)m, i, &r);
		off[i] = r.off;
		len[i] = (uint32_t)r.len;
		rows += c[r.off + 8] == OL_EXANS_MODE_ROWS;
	}
	CK(cudaMalloc(&d_c, (size_t)m));
	CK(cudaMalloc(&d_out, n));
	CK(cudaMalloc(&d_off, nb * 8));
	CK(cudaMalloc(&d_len, nb * 4));
	CK(cudaMalloc(&d_st, nb * 4));
	CK(cudaMemcpy(d_c, c, (size_t)m, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_off, off, nb * 8, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_len, len, nb * 4, cudaMemcpyHostToDevice));
	ol_exans_cuda_decode(d_c, d_off, d_len, nb, d_out, BLK, d_st, NULL);
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(out, d_out, n, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(st, d_st, nb * 4, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < nb; i++)
		bad += st[i] != (int32_t)(n - (size_t)i * BLK < BLK ? n - (size_t)i * BLK : BLK);
	printf("rows mode: %u of %u blocks are rows blocks, ratio %.4fx\n", rows, nb,
	       (double)n / (double)m);
	check(bad == 0 && memcmp(out, in, n) == 0, "GPU decode of CPU rows-mode blocks == input");
	cudaFree(d_c);
	cudaFree(d_out);
	cudaFree(d_off);
	cudaFree(d_len);
	cudaFree(d_st);
	free(c);
	free(out);
	free(off);
	free(len);
	free(st);
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "../shared/data/kv-bf16/stories260K";
	size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("SKIP no CUDA device\n");
		return 77;
	}
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
	size_t n = mib << 20, one;
	uint8_t *in = (uint8_t *)malloc(n);
	one = load_dump(dir, in, n);
	if (one == 0) {
		printf("SKIP no .bf16 files in %s\n", dir);
		return 77;
	}
	for (size_t off = one; off < n; off += one) /* repeat the dump to n bytes */
		memcpy(in + off, in, n - off < one ? n - off : one);
	uint32_t nblk = (uint32_t)((n + BLK - 1) / BLK), slot = BLK + OL_EXANS_BHDR_BYTES;
	printf("input %zu MiB from %zu bytes of dump, %u blocks of %u\n", mib, one, nblk, BLK);

	/* CPU reference: every block into its slot, and packed for the decoder */
	uint8_t *cslots = (uint8_t *)malloc((size_t)nblk * slot), *packed;
	uint32_t *clen = (uint32_t *)malloc(nblk * 4), *glen = (uint32_t *)malloc(nblk * 4);
	uint64_t *off = (uint64_t *)malloc(nblk * 8), tot = 0;
	double t = cpu_now();
	for (uint32_t i = 0; i < nblk; i++) {
		size_t len = n - (size_t)i * BLK < BLK ? n - (size_t)i * BLK : BLK;
		ssize_t r = ol_exans_block_encode(in + (size_t)i * BLK, len,
						  cslots + (size_t)i * slot, slot);
		clen[i] = (uint32_t)r;
		off[i] = tot;
		tot += (uint64_t)r;
	}
	t = cpu_now() - t;
	printf("cpu encode %.2f GB/s (one core), ratio %.4fx\n", (double)n / t / 1e9,
	       (double)n / (double)tot);
	packed = (uint8_t *)malloc(tot);
	for (uint32_t i = 0; i < nblk; i++)
		memcpy(packed + off[i], cslots + (size_t)i * slot, clen[i]);

	uint8_t *d_in, *d_slots, *d_packed, *d_out, *d_copy;
	uint32_t *d_len, *d_clen;
	uint64_t *d_off;
	int32_t *d_st;
	CK(cudaMalloc(&d_in, n));
	CK(cudaMalloc(&d_copy, n));
	CK(cudaMalloc(&d_out, n));
	CK(cudaMalloc(&d_slots, (size_t)nblk * slot));
	CK(cudaMalloc(&d_packed, tot));
	CK(cudaMalloc(&d_len, nblk * 4));
	CK(cudaMalloc(&d_clen, nblk * 4));
	CK(cudaMalloc(&d_off, nblk * 8));
	CK(cudaMalloc(&d_st, nblk * 4));
	CK(cudaMemcpy(d_in, in, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_packed, packed, tot, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_clen, clen, nblk * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_off, off, nblk * 8, cudaMemcpyHostToDevice));

	/* 1. GPU encode == CPU encode */
	check(ol_exans_cuda_encode(d_in, n, BLK, d_slots, d_len, NULL) == 0, "encode launch");
	CK(cudaDeviceSynchronize());
	uint8_t *gslots = (uint8_t *)malloc((size_t)nblk * slot);
	CK(cudaMemcpy(gslots, d_slots, (size_t)nblk * slot, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(glen, d_len, nblk * 4, cudaMemcpyDeviceToHost));
	uint32_t bad = 0;
	for (uint32_t i = 0; i < nblk; i++)
		bad += glen[i] != clen[i] ||
		       memcmp(gslots + (size_t)i * slot, cslots + (size_t)i * slot, clen[i]) != 0;
	printf("encode mismatching blocks: %u of %u\n", bad, nblk);
	check(bad == 0, "GPU-encoded bytes == CPU-encoded bytes");

	/* 2. GPU decode of CPU-encoded blocks */
	CK(cudaMemset(d_out, 0, n));
	check(ol_exans_cuda_decode(d_packed, d_off, d_clen, nblk, d_out, BLK, d_st, NULL) == 0,
	      "decode launch");
	CK(cudaDeviceSynchronize());
	uint8_t *out = (uint8_t *)malloc(n);
	int32_t *st = (int32_t *)malloc(nblk * 4);
	CK(cudaMemcpy(out, d_out, n, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(st, d_st, nblk * 4, cudaMemcpyDeviceToHost));
	bad = 0;
	for (uint32_t i = 0; i < nblk; i++)
		bad += st[i] != (int32_t)(n - (size_t)i * BLK < BLK ? n - (size_t)i * BLK : BLK);
	check(bad == 0 && memcmp(out, in, n) == 0, "GPU decode of CPU-encoded blocks == input");

	/* 3. corruption: flip one byte in each of the first 64 blocks, at varying places */
	for (uint32_t i = 0; i < 64 && i < nblk; i++)
		packed[off[i] + (i * 977u) % clen[i]] ^= (uint8_t)(1u << (i % 8));
	CK(cudaMemcpy(d_packed, packed, tot, cudaMemcpyHostToDevice));
	CK(cudaMemset(d_st, 0, nblk * 4));
	ol_exans_cuda_decode(d_packed, d_off, d_clen, nblk, d_out, BLK, d_st, NULL);
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(st, d_st, nblk * 4, cudaMemcpyDeviceToHost));
	bad = 0;
	for (uint32_t i = 0; i < 64 && i < nblk; i++)
		bad += st[i] != -EBADMSG;
	check(bad == 0, "corrupted blocks -> -EBADMSG on the GPU");
	for (uint32_t i = 0; i < 64 && i < nblk; i++) /* undo */
		packed[off[i] + (i * 977u) % clen[i]] ^= (uint8_t)(1u << (i % 8));
	CK(cudaMemcpy(d_packed, packed, tot, cudaMemcpyHostToDevice));

	check_rows(in, n < (64u << 20) ? n : (64u << 20));

	/* timings */
	float ms_copy = time_ms([&] { cudaMemcpy(d_copy, d_in, n, cudaMemcpyDeviceToDevice); });
	float ms_dec = time_ms(
		[&] { ol_exans_cuda_decode(d_packed, d_off, d_clen, nblk, d_out, BLK, d_st, NULL); });
	float ms_enc = time_ms([&] { ol_exans_cuda_encode(d_in, n, BLK, d_slots, d_len, NULL); });
	CK(cudaGetLastError());
	printf("gpu cudaMemcpy D2D %8.1f GB/s (%.3f ms)\n", n / ms_copy / 1e6, ms_copy);
	printf("gpu exans decode   %8.1f GB/s of BF16 (%.3f ms)\n", n / ms_dec / 1e6, ms_dec);
	printf("gpu exans encode   %8.1f GB/s of BF16 (%.3f ms)\n", n / ms_enc / 1e6, ms_enc);
	printf("%s: %d failed checks\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
