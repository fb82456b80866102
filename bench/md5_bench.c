/* md5_bench - the ETag's MD5 over concurrent streams: the shared lanes against OpenSSL.
 *
 *   build/src/s3/auth/md5_bench [--streams N] [--mib M] [--piece-kib K] [--isa NAME]
 *
 * N threads each hash their own M MiB stream (default 8 threads x 256 MiB), fed in K KiB
 * pieces (default 3072: a stripe of a 3+1 set, as the S3 body reader hands them over). Run
 * twice, in this order: OpenSSL's EVP MD5, one context per thread (what the daemon used
 * before, and the reference), then ol_md5mb (s3/auth/md5mb.h) on the lanes of --isa (default:
 * the widest this CPU has). Every digest of the second run is checked against the first.
 *
 * Prints a line per run: streams, GB hashed, wall seconds, GB/s, CPU seconds (user + sys of
 * this process) per GB, and for the lanes the mean count of busy lanes per kernel call; then
 * the ratio of the two rates. No pass/fail. */
#include "s3/auth/md5mb.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static unsigned streams = 8, mib = 256, piece_kib = 3072;
static uint8_t *buf;
static size_t buflen;

struct stream {
	unsigned id;
	bool lanes;
	uint8_t digest[16];
};

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static void *
stream_main(void *arg)
{
	struct stream *s = arg;
	size_t total = (size_t)mib << 20, piece = (size_t)piece_kib << 10;
	size_t start = (s->id * 4099u) % (buflen - piece);
	struct ol_md5mb m;
	EVP_MD_CTX *e = NULL;

	if (s->lanes) {
		ol_md5mb_init(&m);
	} else {
		e = EVP_MD_CTX_new();
		if (!e || !EVP_DigestInit_ex(e, EVP_md5(), NULL))
			abort();
	}
	for (size_t done = 0, off = start; done < total; done += piece) {
		size_t n = total - done < piece ? total - done : piece;
		if (off + n > buflen)
			off = 0;
		if (s->lanes)
			ol_md5mb_update(&m, buf + off, n);
		else if (!EVP_DigestUpdate(e, buf + off, n))
			abort();
		off += n;
	}
	if (s->lanes) {
		ol_md5mb_final(&m, s->digest);
	} else {
		unsigned int len = 16;
		EVP_DigestFinal_ex(e, s->digest, &len);
		EVP_MD_CTX_free(e);
	}
	return NULL;
}

static double
run(struct stream *st, bool lanes, const char *name)
{
	pthread_t t[streams];
	struct ol_md5mb_stats s0, s1;
	ol_md5mb_stats(&s0);
	double t0 = now(), c0 = cpu();
	for (unsigned i = 0; i < streams; i++) {
		st[i].id = i;
		st[i].lanes = lanes;
		if (pthread_create(&t[i], NULL, stream_main, &st[i]) != 0)
			abort();
	}
	for (unsigned i = 0; i < streams; i++)
		pthread_join(t[i], NULL);
	double secs = now() - t0, cs = cpu() - c0;
	double gb = (double)streams * mib * 1048576.0 / 1e9;
	ol_md5mb_stats(&s1);
	printf("%-16s streams %u  %.2f GB  %.2f s  %.2f GB/s  %.2f CPU-s/GB", name, streams, gb,
	       secs, gb / secs, cs / gb);
	if (lanes && s1.runs > s0.runs)
		printf("  lanes busy %.1f/16",
		       (double)(s1.lanes - s0.lanes) / (double)(s1.runs - s0.runs));
	printf("\n");
	return gb / secs;
}

static unsigned
arg_uint(const char *name, const char *v)
{
	char *end;
	unsigned long x = v ? strtoul(v, &end, 10) : 0;
	if (!v || *end || x == 0 || x > 1u << 20) {
		fprintf(stderr, "md5_bench: %s needs a positive whole number\n", name);
		exit(2);
	}
	return (unsigned)x;
}

int
main(int argc, char **argv)
{
	const char *isa = NULL;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(argv[i], "--streams") == 0)
			streams = arg_uint(argv[i], v), i++;
		else if (strcmp(argv[i], "--mib") == 0)
			mib = arg_uint(argv[i], v), i++;
		else if (strcmp(argv[i], "--piece-kib") == 0)
			piece_kib = arg_uint(argv[i], v), i++;
		else if (strcmp(argv[i], "--isa") == 0 && v)
			isa = v, i++;
		else {
			fprintf(stderr, "usage: md5_bench [--streams N] [--mib M] [--piece-kib K] "
					"[--isa avx512|avx2|generic]\n");
			return 2;
		}
	}
	if (isa && ol_md5mb_force(isa) < 0) {
		fprintf(stderr, "md5_bench: --isa %s: not available on this CPU\n", isa);
		return 2;
	}
	buflen = ((size_t)piece_kib << 10) * 4 + (64u << 20);
	buf = malloc(buflen);
	if (!buf)
		abort();
	for (size_t i = 0; i < buflen; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	struct stream *ref = calloc(streams, sizeof(*ref)), *ln = calloc(streams, sizeof(*ln));
	if (!ref || !ln)
		abort();
	double r = run(ref, false, "openssl-md5");
	char name[32];
	snprintf(name, sizeof(name), "md5mb-%s", ol_md5mb_isa());
	double l = run(ln, true, name);
	for (unsigned i = 0; i < streams; i++)
		if (memcmp(ref[i].digest, ln[i].digest, 16) != 0) {
			fprintf(stderr, "md5_bench: stream %u: digests differ\n", i);
			return 1;
		}
	printf("ratio md5mb/openssl %.2fx (same digests)\n", l / r);
	free(ref);
	free(ln);
	free(buf);
	return 0;
}
