/* s3/auth/md5mb.h - MD5 of many streams at once: the ETag of concurrent PUTs.
 *
 * MD5 is one long chain of dependent steps per stream: one core hashes one stream at about
 * 0.7 GB/s however wide its vector units are, and the ETag's MD5 was half of what a PUT cost
 * the daemon. This hashes up to 16 streams in the lanes of one set of vector registers
 * (AVX-512, AVX2, or the compiler's generic vectors: SSE2 on x86-64, NEON on arm64; chosen at
 * run time), so one pass of the chain advances 16 streams.
 *
 * Callers share one engine without a thread of its own (flat combining). A caller with a
 * piece of 16 KiB or more queues it; while fewer callers hash than there are online CPUs it
 * becomes a combiner and hashes its own piece (one lane runs as plain scalar MD5); once every
 * CPU has a combiner, combiners also take queued pieces of others into their free lanes, each
 * until its own piece is done, and wake as many waiting callers as CPUs they free. A few
 * streams hash as fast as before, many at a fraction of the CPU. Smaller pieces and the last
 * partial block are hashed by the caller alone.
 *
 * A context is used by one thread at a time; any number of contexts update at once. The digest
 * is plain MD5 (RFC 1321), checked against OpenSSL in tests/unit/test_md5mb.c. */
#ifndef OL_S3_AUTH_MD5MB_H
#define OL_S3_AUTH_MD5MB_H

#include <stddef.h>
#include <stdint.h>

struct ol_md5mb_job;

struct ol_md5mb {
	uint32_t h[4];
	uint64_t len; /* bytes added so far */
	uint8_t tail[64];
	unsigned tail_len;
	struct ol_md5mb_job *pending; /* a piece ol_md5mb_update_async left in the engine */
};

void ol_md5mb_init(struct ol_md5mb *c);
/* Add n bytes (p is only read, and only during the call). May wait while another caller hashes
 * this piece in its lanes. Never fails. */
void ol_md5mb_update(struct ol_md5mb *c, const void *p, size_t n);
/* The same, but a piece big enough for the engine is only queued: combiners of other callers
 * may hash it in their lanes while this caller does other work with the bytes (reads only).
 * p must stay unchanged until ol_md5mb_wait, which the next update and final call first. */
void ol_md5mb_update_async(struct ol_md5mb *c, const void *p, size_t n);
/* Until the piece of the last ol_md5mb_update_async is hashed (at once when none is left).
 * Before the bytes of that piece change or go, and before a context is dropped unfinished. */
void ol_md5mb_wait(struct ol_md5mb *c);
/* Write the 16-byte digest; the context must be initialised again before reuse. */
void ol_md5mb_final(struct ol_md5mb *c, uint8_t out[16]);

/* The instruction set the lanes run on: "avx512", "avx2" or "generic". */
const char *ol_md5mb_isa(void);
/* Tests and benchmarks: run the lanes on isa (one of the names above; "generic" always works).
 * Returns 0, or -ENOTSUP when this CPU lacks it, -EINVAL for an unknown name. Call while no
 * hash is in progress. */
int ol_md5mb_force(const char *isa);

/* Tests and benchmarks: at most n combiners at once; n < 0 restores the default (online CPUs),
 * 0 holds every piece in the queue until a later call allows combiners again. */
void ol_md5mb_set_combiners(int n);

struct ol_md5mb_stats {
	uint64_t runs;	 /* passes of combiners over their lanes */
	uint64_t lanes;	 /* lanes busy, summed over those passes (lanes / runs = mean fill) */
	unsigned queued; /* pieces waiting now */
};
/* Counters since start (tests and `md5_bench`). */
void ol_md5mb_stats(struct ol_md5mb_stats *s);

#endif
