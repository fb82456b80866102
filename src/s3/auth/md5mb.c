/* s3/auth/md5mb.c - MD5 in 16 vector lanes, shared by concurrent callers (see md5mb.h). */
#include "s3/auth/md5mb.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LANES	   16
#define STEP_MAX   256	       /* blocks per kernel call: 16 KiB a lane */
#define ENGINE_MIN (16u << 10) /* smaller pieces are hashed by the caller */

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "md5mb.c loads message words as little-endian"
#endif

typedef uint32_t v16 __attribute__((vector_size(64), aligned(64)));

/* RFC 1321's four functions, written so they serve scalars and vectors alike */
#define F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define H(x, y, z) ((x) ^ (y) ^ (z))
#define I(x, y, z) ((y) ^ ((x) | ~(z)))
#define ROTL(x, s) (((x) << (s)) | ((x) >> (32 - (s))))
#define MD5_STEP(f, a, b, c, d, m, k, s)                                                           \
	do {                                                                                       \
		(a) += f((b), (c), (d)) + (m) + (k);                                               \
		(a) = ROTL((a), (s)) + (b);                                                        \
	} while (0)

/* The 64 steps; sin-derived constants and shifts from RFC 1321 section 3.4. */
#define MD5_ROUNDS(a, b, c, d, M)                                                                  \
	do {                                                                                       \
		MD5_STEP(F, a, b, c, d, M[0], 0xd76aa478u, 7);                                     \
		MD5_STEP(F, d, a, b, c, M[1], 0xe8c7b756u, 12);                                    \
		MD5_STEP(F, c, d, a, b, M[2], 0x242070dbu, 17);                                    \
		MD5_STEP(F, b, c, d, a, M[3], 0xc1bdceeeu, 22);                                    \
		MD5_STEP(F, a, b, c, d, M[4], 0xf57c0fafu, 7);                                     \
		MD5_STEP(F, d, a, b, c, M[5], 0x4787c62au, 12);                                    \
		MD5_STEP(F, c, d, a, b, M[6], 0xa8304613u, 17);                                    \
		MD5_STEP(F, b, c, d, a, M[7], 0xfd469501u, 22);                                    \
		MD5_STEP(F, a, b, c, d, M[8], 0x698098d8u, 7);                                     \
		MD5_STEP(F, d, a, b, c, M[9], 0x8b44f7afu, 12);                                    \
		MD5_STEP(F, c, d, a, b, M[10], 0xffff5bb1u, 17);                                   \
		MD5_STEP(F, b, c, d, a, M[11], 0x895cd7beu, 22);                                   \
		MD5_STEP(F, a, b, c, d, M[12], 0x6b901122u, 7);                                    \
		MD5_STEP(F, d, a, b, c, M[13], 0xfd987193u, 12);                                   \
		MD5_STEP(F, c, d, a, b, M[14], 0xa679438eu, 17);                                   \
		MD5_STEP(F, b, c, d, a, M[15], 0x49b40821u, 22);                                   \
		MD5_STEP(G, a, b, c, d, M[1], 0xf61e2562u, 5);                                     \
		MD5_STEP(G, d, a, b, c, M[6], 0xc040b340u, 9);                                     \
		MD5_STEP(G, c, d, a, b, M[11], 0x265e5a51u, 14);                                   \
		MD5_STEP(G, b, c, d, a, M[0], 0xe9b6c7aau, 20);                                    \
		MD5_STEP(G, a, b, c, d, M[5], 0xd62f105du, 5);                                     \
		MD5_STEP(G, d, a, b, c, M[10], 0x02441453u, 9);                                    \
		MD5_STEP(G, c, d, a, b, M[15], 0xd8a1e681u, 14);                                   \
		MD5_STEP(G, b, c, d, a, M[4], 0xe7d3fbc8u, 20);                                    \
		MD5_STEP(G, a, b, c, d, M[9], 0x21e1cde6u, 5);                                     \
		MD5_STEP(G, d, a, b, c, M[14], 0xc33707d6u, 9);                                    \
		MD5_STEP(G, c, d, a, b, M[3], 0xf4d50d87u, 14);                                    \
		MD5_STEP(G, b, c, d, a, M[8], 0x455a14edu, 20);                                    \
		MD5_STEP(G, a, b, c, d, M[13], 0xa9e3e905u, 5);                                    \
		MD5_STEP(G, d, a, b, c, M[2], 0xfcefa3f8u, 9);                                     \
		MD5_STEP(G, c, d, a, b, M[7], 0x676f02d9u, 14);                                    \
		MD5_STEP(G, b, c, d, a, M[12], 0x8d2a4c8au, 20);                                   \
		MD5_STEP(H, a, b, c, d, M[5], 0xfffa3942u, 4);                                     \
		MD5_STEP(H, d, a, b, c, M[8], 0x8771f681u, 11);                                    \
		MD5_STEP(H, c, d, a, b, M[11], 0x6d9d6122u, 16);                                   \
		MD5_STEP(H, b, c, d, a, M[14], 0xfde5380cu, 23);                                   \
		MD5_STEP(H, a, b, c, d, M[1], 0xa4beea44u, 4);                                     \
		MD5_STEP(H, d, a, b, c, M[4], 0x4bdecfa9u, 11);                                    \
		MD5_STEP(H, c, d, a, b, M[7], 0xf6bb4b60u, 16);                                    \
		MD5_STEP(H, b, c, d, a, M[10], 0xbebfbc70u, 23);                                   \
		MD5_STEP(H, a, b, c, d, M[13], 0x289b7ec6u, 4);                                    \
		MD5_STEP(H, d, a, b, c, M[0], 0xeaa127fau, 11);                                    \
		MD5_STEP(H, c, d, a, b, M[3], 0xd4ef3085u, 16);                                    \
		MD5_STEP(H, b, c, d, a, M[6], 0x04881d05u, 23);                                    \
		MD5_STEP(H, a, b, c, d, M[9], 0xd9d4d039u, 4);                                     \
		MD5_STEP(H, d, a, b, c, M[12], 0xe6db99e5u, 11);                                   \
		MD5_STEP(H, c, d, a, b, M[15], 0x1fa27cf8u, 16);                                   \
		MD5_STEP(H, b, c, d, a, M[2], 0xc4ac5665u, 23);                                    \
		MD5_STEP(I, a, b, c, d, M[0], 0xf4292244u, 6);                                     \
		MD5_STEP(I, d, a, b, c, M[7], 0x432aff97u, 10);                                    \
		MD5_STEP(I, c, d, a, b, M[14], 0xab9423a7u, 15);                                   \
		MD5_STEP(I, b, c, d, a, M[5], 0xfc93a039u, 21);                                    \
		MD5_STEP(I, a, b, c, d, M[12], 0x655b59c3u, 6);                                    \
		MD5_STEP(I, d, a, b, c, M[3], 0x8f0ccc92u, 10);                                    \
		MD5_STEP(I, c, d, a, b, M[10], 0xffeff47du, 15);                                   \
		MD5_STEP(I, b, c, d, a, M[1], 0x85845dd1u, 21);                                    \
		MD5_STEP(I, a, b, c, d, M[8], 0x6fa87e4fu, 6);                                     \
		MD5_STEP(I, d, a, b, c, M[15], 0xfe2ce6e0u, 10);                                   \
		MD5_STEP(I, c, d, a, b, M[6], 0xa3014314u, 15);                                    \
		MD5_STEP(I, b, c, d, a, M[13], 0x4e0811a1u, 21);                                   \
		MD5_STEP(I, a, b, c, d, M[4], 0xf7537e82u, 6);                                     \
		MD5_STEP(I, d, a, b, c, M[11], 0xbd3af235u, 10);                                   \
		MD5_STEP(I, c, d, a, b, M[2], 0x2ad7d2bbu, 15);                                    \
		MD5_STEP(I, b, c, d, a, M[9], 0xeb86d391u, 21);                                    \
	} while (0)

/* One 64-byte block M into the state a..d of type T: the 64 steps, then the feed-forward. */
#define MD5_BLOCK(T, a, b, c, d, M)                                                                \
	do {                                                                                       \
		T aa_ = (a), bb_ = (b), cc_ = (c), dd_ = (d);                                      \
		MD5_ROUNDS(a, b, c, d, M);                                                         \
		(a) += aa_;                                                                        \
		(b) += bb_;                                                                        \
		(c) += cc_;                                                                        \
		(d) += dd_;                                                                        \
	} while (0)

/* ---- one stream (tails, small pieces) ---- */

static void
md5_blocks(uint32_t h[4], const uint8_t *p, size_t nblocks)
{
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
	for (size_t i = 0; i < nblocks; i++, p += 64) {
		uint32_t M[16];
		memcpy(M, p, 64);
		MD5_BLOCK(uint32_t, a, b, c, d, M);
	}
	h[0] = a;
	h[1] = b;
	h[2] = c;
	h[3] = d;
}

/* ---- 16 streams in the lanes of v16 ---- */

struct ol_md5mb_job {
	uint32_t h[4];
	const uint8_t *p;
	size_t left; /* whole blocks still to hash */
	struct ol_md5mb_job *next;
	pthread_cond_t cv;
	bool queued; /* in the queue, not in a combiner's lanes */
	bool done;
};

struct lanes {
	v16 st[4]; /* st[i][l]: word i of lane l's state, during a kernel call */
	const uint8_t *p[LANES];
	struct ol_md5mb_job *job[LANES];
};

/* Idle lanes hash zeros; their results are never read. */
static const uint8_t zeros[64 * STEP_MAX];

typedef uint32_t v16i __attribute__((vector_size(64)));

/* One stage of the 16 x 16 transpose: swap bit b of the row index (lane) with bit b of the
 * column index (word) between rows i and i | 1 << b, by two-source shuffles. */
#define XPOSE_STAGE(r, b, lo, hi)                                                                  \
	do {                                                                                       \
		_Pragma("GCC unroll 16") for (unsigned i_ = 0; i_ < 16; i_++)                      \
		{                                                                                  \
			if (i_ & (1u << (b)))                                                      \
				continue;                                                          \
			v16 x_ = r[i_], y_ = r[i_ | (1u << (b))];                                  \
			r[i_] = __builtin_shuffle(x_, y_, lo);                                     \
			r[i_ | (1u << (b))] = __builtin_shuffle(x_, y_, hi);                       \
		}                                                                                  \
	} while (0)

/* M[w][l] = word w of lane l's block blk: 16 row loads and 64 shuffles (AVX-512: vpermt2d), or,
 * where two-source shuffles of 16 words are slow (AVX2, SSE2), scalar stores into a table. */
static inline __attribute__((always_inline)) void
lanes_load(v16 M[16], const struct lanes *L, size_t blk, bool shuffle)
{
#if defined(__clang__) /* no __builtin_shuffle; the table below serves */
	(void)shuffle;
#else
	if (shuffle) {
		for (unsigned l = 0; l < LANES; l++)
			memcpy(&M[l], L->p[l] + 64 * blk, 64);
		XPOSE_STAGE(M, 0,
			    ((v16i){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}),
			    ((v16i){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}));
		XPOSE_STAGE(M, 1,
			    ((v16i){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}),
			    ((v16i){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}));
		XPOSE_STAGE(M, 2,
			    ((v16i){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}),
			    ((v16i){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}));
		XPOSE_STAGE(M, 3, ((v16i){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}),
			    ((v16i){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));
		return;
	}
#endif
	uint32_t t[16][LANES] __attribute__((aligned(64)));
	for (unsigned l = 0; l < LANES; l++) {
		uint32_t w[16];
		memcpy(w, L->p[l] + 64 * blk, 64);
		for (unsigned i = 0; i < 16; i++)
			t[i][l] = w[i];
	}
	memcpy(M, t, 16 * sizeof(v16));
}

static inline __attribute__((always_inline)) void
lanes_body(struct lanes *L, size_t n, bool shuffle)
{
	v16 a = L->st[0], b = L->st[1], c = L->st[2], d = L->st[3];
	for (size_t blk = 0; blk < n; blk++) {
		v16 M[16];
		lanes_load(M, L, blk, shuffle);
		MD5_BLOCK(v16, a, b, c, d, M);
	}
	L->st[0] = a;
	L->st[1] = b;
	L->st[2] = c;
	L->st[3] = d;
}

static void
lanes_generic(struct lanes *L, size_t n)
{
	lanes_body(L, n, false);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void
lanes_avx512(struct lanes *L, size_t n)
{
	lanes_body(L, n, true);
}

/* AVX2 registers hold 8 words: a pass of 16 lanes is two registers per value and costs ~3.7
 * blocks of one stream (md5_bench), more than the 2-3 lanes a few streams keep busy save.
 * In 8 lanes a pass costs about half that, so AVX2 runs the busy lanes 8 at a time. */
typedef uint32_t v8 __attribute__((vector_size(32), aligned(32)));

__attribute__((target("avx2"))) static void
lanes8_avx2(const uint8_t *const p[8], uint32_t st[4][8], size_t n)
{
	v8 a, b, c, d;

	memcpy(&a, st[0], sizeof(a));
	memcpy(&b, st[1], sizeof(b));
	memcpy(&c, st[2], sizeof(c));
	memcpy(&d, st[3], sizeof(d));
	for (size_t blk = 0; blk < n; blk++) {
		uint32_t t[16][8] __attribute__((aligned(32)));
		v8 M[16];

		for (unsigned l = 0; l < 8; l++) {
			uint32_t w[16];

			memcpy(w, p[l] + 64 * blk, 64);
			for (unsigned i = 0; i < 16; i++)
				t[i][l] = w[i];
		}
		memcpy(M, t, sizeof(M));
		MD5_BLOCK(v8, a, b, c, d, M);
	}
	memcpy(st[0], &a, sizeof(a));
	memcpy(st[1], &b, sizeof(b));
	memcpy(st[2], &c, sizeof(c));
	memcpy(st[3], &d, sizeof(d));
}

__attribute__((target("avx2"))) static void
lanes16_avx2(struct lanes *L, size_t n)
{
	lanes_body(L, n, false);
}

/* The AVX2 engine's kernel: more than 8 lanes busy, all 16 in one pass (two independent
 * registers per value: the pass is cheaper per lane than two passes of 8); else the busy
 * ones in 8 lanes, or one by one when they are 2 or fewer. */
static void
lanes_avx2(struct lanes *L, size_t n)
{
	const uint8_t *p[8];
	uint32_t st[4][8];
	unsigned idx[8], k = 0, busy = 0;

	for (unsigned l = 0; l < LANES; l++)
		busy += L->job[l] != NULL;
	if (busy > 8) {
		lanes16_avx2(L, n);
		return;
	}
	for (unsigned l = 0; l <= LANES; l++) {
		if (l < LANES) {
			if (!L->job[l])
				continue;
			idx[k++] = l;
			if (k < 8)
				continue;
		}
		if (k <= 2) { /* a pass of 8 costs ~2.4 blocks of one stream (md5_bench) */
			for (unsigned g = 0; g < k; g++) {
				unsigned l2 = idx[g];
				uint32_t h[4] = {L->st[0][l2], L->st[1][l2], L->st[2][l2],
						 L->st[3][l2]};

				md5_blocks(h, L->job[l2]->p, n);
				for (unsigned i = 0; i < 4; i++)
					L->st[i][l2] = h[i];
			}
		} else {
			for (unsigned g = 0; g < 8; g++) {
				unsigned l2 = idx[g < k ? g : 0]; /* idle slots repeat the first */

				p[g] = L->p[l2];
				for (unsigned i = 0; i < 4; i++)
					st[i][g] = L->st[i][l2];
			}
			lanes8_avx2(p, st, n);
			for (unsigned g = 0; g < k; g++)
				for (unsigned i = 0; i < 4; i++)
					L->st[i][idx[g]] = st[i][g];
		}
		k = 0;
	}
}
#endif

static struct {
	pthread_mutex_t mu;
	pthread_once_t once;
	void (*kernel)(struct lanes *, size_t);
	const char *isa;
	struct ol_md5mb_job *head, **tailp;
	unsigned inflight, queued; /* pieces in the engine, and of them queued */
	unsigned busy, max_busy;   /* combiners now, and at most */
	unsigned cpus;
	uint64_t runs, lanes;
} eng = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT, .tailp = &eng.head};

static void
engine_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	eng.cpus = cpus > 0 ? (unsigned)cpus : 1;
	eng.max_busy = eng.cpus;
	eng.kernel = lanes_generic;
	eng.isa = "generic";
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		eng.kernel = lanes_avx512;
		eng.isa = "avx512";
	} else if (__builtin_cpu_supports("avx2")) {
		eng.kernel = lanes_avx2;
		eng.isa = "avx2";
	}
#endif
}

static void
queue_push(struct ol_md5mb_job *j, bool front)
{
	if (front) {
		j->next = eng.head;
		eng.head = j;
		if (!j->next)
			eng.tailp = &j->next;
	} else {
		j->next = NULL;
		*eng.tailp = j;
		eng.tailp = &j->next;
	}
	j->queued = true;
	eng.queued++;
}

static void
queue_remove(struct ol_md5mb_job *j)
{
	struct ol_md5mb_job **pp = &eng.head;
	while (*pp != j)
		pp = &(*pp)->next;
	*pp = j->next;
	if (!*pp)
		eng.tailp = pp;
	j->queued = false;
	eng.queued--;
}

/* Whether combiners take the pieces of others: when more pieces are in the engine than CPUs
 * may hash them one each (a pass of 16 lanes costs about 1.3 blocks of one stream). With
 * fewer, each caller hashes its own piece on a CPU of its own. */
static bool
share(void)
{
	return eng.busy >= eng.max_busy || eng.inflight > eng.max_busy;
}

/* Fill empty lanes from the queue; the blocks every busy lane can take, 0 when none is busy.
 * Pieces of others are taken as share() says. */
static size_t
lanes_fill(struct lanes *L, unsigned *busy)
{
	size_t n = STEP_MAX;
	*busy = 0;
	for (unsigned l = 0; l < LANES; l++) {
		if (!L->job[l] && eng.head && share()) {
			L->job[l] = eng.head;
			queue_remove(eng.head);
		}
		if (!L->job[l])
			continue;
		++*busy;
		if (L->job[l]->left < n)
			n = L->job[l]->left;
	}
	return *busy ? n : 0;
}

/* n blocks of every busy lane, outside the lock. A pass of the lanes costs about 2 blocks of one
 * stream (AVX-512's 16 lanes, AVX2's 8), so a lone lane is hashed as one stream. */
static void
lanes_run(struct lanes *L, unsigned busy, size_t n, void (*kernel)(struct lanes *, size_t))
{
	if (busy < 2) {
		for (unsigned l = 0; l < LANES; l++)
			if (L->job[l])
				md5_blocks(L->job[l]->h, L->job[l]->p, n);
		return;
	}
	for (unsigned l = 0; l < LANES; l++) {
		struct ol_md5mb_job *j = L->job[l];
		L->p[l] = j ? j->p : zeros;
		for (unsigned i = 0; i < 4; i++)
			L->st[i][l] = j ? j->h[i] : 0;
	}
	kernel(L, n);
	for (unsigned l = 0; l < LANES; l++)
		if (L->job[l])
			for (unsigned i = 0; i < 4; i++)
				L->job[l]->h[i] = L->st[i][l];
}

/* Wake as many waiting callers as combiners may start (they decide in engine_run). */
static void
wake_waiting(void)
{
	struct ol_md5mb_job *w = eng.head;
	for (unsigned k = eng.busy; w && k < eng.max_busy; k++, w = w->next)
		pthread_cond_signal(&w->cv);
}

/* Called with eng.mu held and self queued, returns with the lock held and self done: hash self
 * in a lane, and others beside it as lanes_fill allows; others still in a lane at the end go
 * back to the head of the queue. */
static void
combine(struct ol_md5mb_job *self)
{
	struct lanes L;
	unsigned busy;
	memset(L.job, 0, sizeof(L.job));
	queue_remove(self);
	L.job[0] = self;
	for (size_t n; !self->done && (n = lanes_fill(&L, &busy)) != 0;) {
		void (*kernel)(struct lanes *, size_t) = eng.kernel;
		eng.runs++;
		eng.lanes += busy;
		pthread_mutex_unlock(&eng.mu);
		lanes_run(&L, busy, n, kernel);
		pthread_mutex_lock(&eng.mu);
		for (unsigned l = 0; l < LANES; l++) {
			struct ol_md5mb_job *j = L.job[l];
			if (!j)
				continue;
			j->p += 64 * n;
			j->left -= n;
			if (j->left)
				continue;
			L.job[l] = NULL;
			j->done = true;
			eng.inflight--;
			if (j != self)
				pthread_cond_signal(&j->cv);
		}
		if (eng.head && !share())
			wake_waiting(); /* few enough now to hash their own */
	}
	for (unsigned l = 0; l < LANES; l++)
		if (L.job[l])
			queue_push(L.job[l], true);
}

/* Queue a piece: a combiner may take it into its lanes before its caller waits for it. */
static void
engine_push(struct ol_md5mb_job *j)
{
	pthread_mutex_lock(&eng.mu);
	queue_push(j, false);
	eng.inflight++;
	pthread_mutex_unlock(&eng.mu);
}

/* Until piece j is hashed: by a combiner that took it, or by this caller as a combiner. */
static void
engine_wait(struct ol_md5mb_job *j)
{
	pthread_mutex_lock(&eng.mu);
	while (!j->done) {
		/* a combiner of its own: on a free CPU, unless the running ones should take it
		 * into their lanes and have room */
		if (j->queued && eng.busy < eng.max_busy &&
		    (eng.busy == 0 || !share() || eng.queued >= LANES)) {
			eng.busy++;
			combine(j);
			eng.busy--;
			wake_waiting(); /* hand the role on */
			continue;
		}
		pthread_cond_wait(&j->cv, &eng.mu);
	}
	pthread_mutex_unlock(&eng.mu);
}

/* ---- the context ---- */

void
ol_md5mb_init(struct ol_md5mb *c)
{
	pthread_once(&eng.once, engine_init);
	c->h[0] = 0x67452301u;
	c->h[1] = 0xefcdab89u;
	c->h[2] = 0x98badcfeu;
	c->h[3] = 0x10325476u;
	c->len = 0;
	c->tail_len = 0;
	c->pending = NULL;
}

void
ol_md5mb_wait(struct ol_md5mb *c)
{
	struct ol_md5mb_job *j = c->pending;

	if (!j)
		return;
	engine_wait(j);
	memcpy(c->h, j->h, sizeof(c->h));
	pthread_cond_destroy(&j->cv);
	free(j);
	c->pending = NULL;
}

void
ol_md5mb_update(struct ol_md5mb *c, const void *data, size_t n)
{
	ol_md5mb_update_async(c, data, n);
	ol_md5mb_wait(c);
}

void
ol_md5mb_update_async(struct ol_md5mb *c, const void *data, size_t n)
{
	const uint8_t *p = data;
	ol_md5mb_wait(c); /* the chain goes on from the piece before */
	c->len += n;
	if (c->tail_len) {
		size_t take = 64 - c->tail_len < n ? 64 - c->tail_len : n;
		memcpy(c->tail + c->tail_len, p, take);
		c->tail_len += (unsigned)take;
		p += take;
		n -= take;
		if (c->tail_len < 64)
			return;
		md5_blocks(c->h, c->tail, 1);
		c->tail_len = 0;
	}
	size_t nb = n / 64;
	struct ol_md5mb_job *j = nb * 64 >= ENGINE_MIN ? calloc(1, sizeof(*j)) : NULL;

	if (j) {
		memcpy(j->h, c->h, sizeof(j->h));
		j->p = p;
		j->left = nb;
		pthread_cond_init(&j->cv, NULL);
		c->pending = j;
		engine_push(j);
	} else if (nb) {
		md5_blocks(c->h, p, nb);
	}
	memcpy(c->tail, p + nb * 64, n - nb * 64);
	c->tail_len = (unsigned)(n - nb * 64);
}

void
ol_md5mb_final(struct ol_md5mb *c, uint8_t out[16])
{
	uint64_t bits = c->len * 8;
	uint8_t pad[128] = {0x80};
	size_t padn = (c->tail_len < 56 ? 56 : 120) - c->tail_len;
	for (unsigned i = 0; i < 8; i++)
		pad[padn + i] = (uint8_t)(bits >> (8 * i));
	uint64_t len = c->len;
	ol_md5mb_update(c, pad, padn + 8);
	c->len = len;
	memcpy(out, c->h, 16);
}

const char *
ol_md5mb_isa(void)
{
	pthread_once(&eng.once, engine_init);
	pthread_mutex_lock(&eng.mu);
	const char *isa = eng.isa;
	pthread_mutex_unlock(&eng.mu);
	return isa;
}

static int
force_locked(const char *isa)
{
	if (strcmp(isa, "generic") == 0) {
		eng.kernel = lanes_generic;
		eng.isa = "generic";
		return 0;
	}
#if defined(__x86_64__)
	if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0) {
		bool z = isa[3] == '5';
		if (z ? !__builtin_cpu_supports("avx512f") : !__builtin_cpu_supports("avx2"))
			return -ENOTSUP;
		eng.kernel = z ? lanes_avx512 : lanes_avx2;
		eng.isa = z ? "avx512" : "avx2";
		return 0;
	}
#endif
	return strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0 ? -ENOTSUP : -EINVAL;
}

int
ol_md5mb_force(const char *isa)
{
	pthread_once(&eng.once, engine_init);
	pthread_mutex_lock(&eng.mu);
	int rc = force_locked(isa);
	pthread_mutex_unlock(&eng.mu);
	return rc;
}

void
ol_md5mb_set_combiners(int n)
{
	pthread_once(&eng.once, engine_init);
	pthread_mutex_lock(&eng.mu);
	eng.max_busy = n < 0 ? eng.cpus : (unsigned)n;
	wake_waiting();
	pthread_mutex_unlock(&eng.mu);
}

void
ol_md5mb_stats(struct ol_md5mb_stats *s)
{
	pthread_mutex_lock(&eng.mu);
	s->runs = eng.runs;
	s->lanes = eng.lanes;
	s->queued = eng.queued;
	pthread_mutex_unlock(&eng.mu);
}
