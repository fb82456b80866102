/* test_store.c - the object engine on real files in a temp dir: round trips, ranges,
 * overwrite, delete, listing order, multipart, bit flips, wiped drives, P+1 lost drives,
 * aborted and SIGKILLed writers, concurrent threads. TAP output. */
#include "store/store.h"
#include "store/store_int.h" /* to leave half-done commits behind, as a crash does */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"

static int n_test, n_fail;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_ = !!(cond);                                                                \
		n_test++;                                                                          \
		if (!ok_)                                                                          \
			n_fail++;                                                                  \
		printf("%s %d - ", ok_ ? "ok" : "not ok", n_test);                                 \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		fflush(stdout);                                                                    \
	} while (0)

static char root[256];
static struct ol_config cfg;

static void
fill(uint8_t *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 32);
	}
}

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	return remove(p);
}

static void
rm_rf(const char *p)
{
	nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void
setup_cfg(int n, int p)
{
	ol_config_default(&cfg);
	cfg.n_data_dirs = (unsigned)n;
	for (int i = 0; i < n; i++)
		snprintf(cfg.data_dirs[i], sizeof(cfg.data_dirs[i]), "%s/d%d", root, i);
	cfg.set_drive_count = (unsigned)n;
	cfg.default_parity_count = (unsigned)p;
	cfg.fsync = false;
	cfg.inline_threshold = 128 * 1024;
	cfg.block_size = 1 << 20;
}

static int
put_obj(struct ol_store *st, const char *b, const char *k, const uint8_t *d, size_t n)
{
	struct ol_put *p;
	int rc = ol_store_put_begin(st, b, k, strlen(k), (int64_t)n, &p);
	size_t off = 0;

	if (rc)
		return rc;
	while (off < n && !rc) { /* uneven writes */
		size_t c = n - off < 777777 ? n - off : 777777;

		rc = ol_store_put_write(p, d + off, c);
		off += c;
	}
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, "\"etag\"", "meta", 4, NULL);
}

/* Whole body equals d[0..n): 1; read error: the -errno. */
static int
get_eq(struct ol_store *st, const char *b, const char *k, const uint8_t *d, size_t n)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t *buf;
	size_t off = 0;
	int rc = ol_store_get_open(st, b, k, strlen(k), &g, &info), same = 1;

	if (rc)
		return rc;
	buf = malloc(n + 1);
	while (off < n) {
		ssize_t r = ol_store_get_read(g, off, buf + off, 1000003);

		if (r <= 0) {
			rc = r < 0 ? (int)r : -EIO;
			break;
		}
		off += (size_t)r;
	}
	if (!rc)
		same = info.size == n && !memcmp(buf, d, n) && ol_store_get_read(g, n, buf, 1) == 0;
	free(buf);
	ol_store_get_close(g);
	return rc ? rc : same;
}

/* Stream [off, n) of key in ol_store_get_step steps of at most max: the bytes equal d, and
 * after the first step every step starts on a shard block boundary, which for this layout
 * (k = 3, 1 MiB blocks, parts restart their stripes) is checked with block_at(). 1 if so. */
static int
stream_steps(struct ol_store *st, const char *k, const uint8_t *d, size_t n, size_t off, size_t max,
	     const size_t *part, int nparts)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t *buf = malloc(max);
	int good = ol_store_get_open(st, "b", k, strlen(k), &g, &info) == 0;

	for (int first = 1; good && off < n; first = 0) {
		size_t want = ol_store_get_step(g, off, max), po = off, dl;
		int pi = 0;

		while (pi + 1 < nparts && po >= part[pi]) /* position in its part and stripe */
			po -= part[pi++];
		dl = part[pi] - po / (3 << 20) * (3 << 20);
		dl = dl < (3u << 20) ? dl : 3u << 20;
		/* a step may stop short of max only on a block boundary */
		good = want >= 1 && want <= max &&
		       (want == max || want == n - off ||
			((po % (3 << 20)) + want) % ((dl + 2) / 3) == 0 ||
			(po % (3 << 20)) + want == dl);
		good = good && (first || (po % (3 << 20)) % ((dl + 2) / 3) == 0);
		good = good && ol_store_get_read(g, off, buf, want) == (ssize_t)want &&
		       !memcmp(buf, d + off, want);
		off += want;
	}
	if (good)
		ol_store_get_close(g);
	free(buf);
	return good;
}

static void
test_roundtrip(struct ol_store *st)
{
	static const size_t sizes[] = {0,
				       1,
				       128 * 1024 - 1,
				       128 * 1024,
				       128 * 1024 + 1,
				       1 << 20,
				       3 * (1 << 20) + 7,
				       20 * (1 << 20)};
	uint8_t *d = malloc(20 << 20), *buf = malloc(1 << 20);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[32];

		snprintf(key, sizeof(key), "obj-%zu", sizes[i]);
		fill(d, sizes[i], i + 1);
		ok(put_obj(st, "b", key, d, sizes[i]) == 0, "put %zu bytes", sizes[i]);
		ok(get_eq(st, "b", key, d, sizes[i]) == 1, "get %zu bytes back exactly", sizes[i]);
	}
	{
		struct ol_get *g;
		struct ol_obj_info info;
		int bad = 0;
		size_t sz = 3 * (1 << 20) + 7;

		fill(d, sz, 7);
		ol_store_get_open(st, "b", "obj-3145735", 11, &g, &info);
		for (int i = 0; i < 200; i++) {
			uint64_t off = ((uint64_t)rand() * 7919) % (sz + 10);
			size_t len = (size_t)rand() % (1 << 20);
			ssize_t r = ol_store_get_read(g, off, buf, len);
			size_t want = off >= sz ? 0 : (sz - off < len ? sz - off : len);

			if (r != (ssize_t)want || (want && memcmp(buf, d + off, want)))
				bad++;
		}
		ok(bad == 0, "200 range reads at random offsets exact (%d bad)", bad);
		fill(d, 20 << 20, 8);
		{
			size_t whole[1] = {20 << 20};

			ok(stream_steps(st, "obj-20971520", d, 20 << 20, 0, 1 << 20, whole, 1) &&
			       stream_steps(st, "obj-20971520", d, 20 << 20, 5, 1 << 20, whole,
					    1) &&
			       stream_steps(st, "obj-20971520", d, 20 << 20, (18 << 20) + 9,
					    1 << 20, whole, 1) &&
			       stream_steps(st, "obj-20971520", d, 20 << 20, 77, 3 << 20, whole, 1),
			   "get_step: streams exact bytes, every step after the first from a "
			   "block boundary");
		}
		fill(d, sz, 7);
		/* info.meta lives as long as the handle */
		ok(!strcmp(info.etag, "\"etag\"") && info.meta_len == 4 &&
		       !memcmp(info.meta, "meta", 4) && info.n_parts == 0,
		   "etag and meta blob come back");
		ol_store_get_close(g);
	}
	free(d);
	free(buf);
}

struct paths {
	char p[8][600];
	int n;
};

static int
paths_cb(int drive, unsigned part, const char *path, void *arg)
{
	struct paths *ps = arg;

	if (ps->n < 8)
		snprintf(ps->p[ps->n++], 600, "%s", path);
	return 0;
}

static void
test_overwrite_delete(struct ol_store *st)
{
	uint8_t *d = malloc(5 << 20);
	struct paths ps = {.n = 0};
	struct stat sb;
	struct ol_obj_info info;
	char mb[16];

	fill(d, 5 << 20, 11);
	ok(put_obj(st, "b", "ow", d, 5 << 20) == 0, "put 5 MiB");
	ol_store_shard_paths(st, "b", "ow", 2, paths_cb, &ps);
	ok(ps.n == 4 && stat(ps.p[0], &sb) == 0, "one shard file per drive");
	fill(d, 1000, 12);
	ok(put_obj(st, "b", "ow", d, 1000) == 0, "overwrite with 1000 bytes (inline)");
	ok(get_eq(st, "b", "ow", d, 1000) == 1, "new version read back");
	ok(stat(ps.p[0], &sb) != 0 && stat(ps.p[3], &sb) != 0, "old version's shards reclaimed");
	ok(ol_store_head(st, "b", "ow", 2, &info, mb, sizeof(mb)) == 0 && info.size == 1000 &&
	       info.meta_len == 4 && !memcmp(mb, "meta", 4),
	   "head");
	ok(ol_store_delete(st, "b", "ow", 2) == 0, "delete");
	ok(ol_store_delete(st, "b", "ow", 2) == -ENOENT, "delete again: -ENOENT");
	ok(get_eq(st, "b", "ow", d, 1000) == -ENOENT, "get deleted: -ENOENT");
	ok(ol_store_head(st, "nob", "ow", 2, &info, NULL, 0) == -ENXIO, "no bucket: -ENXIO");
	ok(ol_store_delete(st, "nob", "ow", 2) == -ENXIO, "delete in no bucket: -ENXIO");
	free(d);
}

static int
keycmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;

	return strcmp(x, y); /* strcmp compares as unsigned char: byte order */
}

static void
test_listing(struct ol_store *st)
{
	const char *keys[80] = {"a//b", "p/",  "p",  "../x", "\x01", "\xff", "\xff\xfe", "a b", "%",
				"+",	"a/b", "..", ".",    "x%2F", "z",    "p0",	 "p/q"};
	int n = 17, i = 0, bad = 0, rc;
	char extra[40][16];
	struct ol_iter *it;
	const char *k;
	size_t kl;
	struct ol_obj_info info;

	static char lk[10][1025];
	static const size_t ll[10] = {1024, 1023, 401, 401, 401, 400, 399, 501, 501, 450};
	static const char lt[10] = {'L', 'L', 'a', '\x01', '\xff', 'L', 'L', 'b', 'a', 'L'};

	ok(ol_store_bucket_create(st, "list") == 0, "bucket list");
	for (int j = 0; j < 10; j++) { /* long keys, several sharing their first 400 bytes */
		memset(lk[j], 'L', ll[j]);
		lk[j][ll[j] - 1] = lt[j];
		lk[j][ll[j]] = 0;
		keys[n++] = lk[j];
	}
	for (int j = 0; j < 40; j++) {
		snprintf(extra[j], sizeof(extra[j]), "k%03d", (j * 17) % 40);
		keys[n++] = extra[j];
	}
	for (int j = 0; j < n; j++)
		bad += put_obj(st, "list", keys[j], (const uint8_t *)keys[j], strlen(keys[j])) != 0;
	ok(bad == 0, "put %d keys", n);
	qsort(keys, (size_t)n, sizeof(keys[0]), keycmp);
	ok(ol_store_iter_open(st, "list", &it) == 0, "iter open");
	bad = 0;
	while ((rc = ol_store_iter_next(it, &k, &kl, &info)) == 1) {
		if (i >= n || kl != strlen(keys[i]) || memcmp(k, keys[i], kl) || info.size != kl)
			bad++;
		i++;
	}
	ok(rc == 0 && i == n && bad == 0, "listing gives %d keys in byte order (%d, %d bad)", n, i,
	   bad);
	ok(ol_store_iter_seek(it, "p/", 2) == 0 && ol_store_iter_next(it, &k, &kl, &info) == 1 &&
	       kl == 2 && !memcmp(k, "p/", 2),
	   "seek to an existing key");
	ok(ol_store_iter_seek(it, "p/a", 3) == 0 && ol_store_iter_next(it, &k, &kl, &info) == 1 &&
	       kl == 3 && !memcmp(k, "p/q", 3),
	   "seek between keys");
	{
		char want[1025];

		memset(want, 'L', 501);
		want[500] = 'a';
		ok(ol_store_iter_seek(it, want, 501) == 0 &&
		       ol_store_iter_next(it, &k, &kl, &info) == 1 && kl == 501 && k[500] == 'a' &&
		       ol_store_iter_next(it, &k, &kl, &info) == 1 && kl == 501 && k[500] == 'b',
		   "seek inside a group of long keys sharing 400 bytes");
	}
	ok(get_eq(st, "list", lk[0], (const uint8_t *)lk[0], 1024) == 1 &&
	       get_eq(st, "list", lk[1], (const uint8_t *)lk[1], 1023) == 1,
	   "1024- and 1023-byte keys are distinct objects");
	ok(ol_store_iter_seek(it, "\xff\xff", 2) == 0 &&
	       ol_store_iter_next(it, &k, &kl, &info) == 0,
	   "seek past the end");
	ol_store_iter_close(it);
	ok(ol_store_iter_open(st, "nolist", &it) == -ENOENT, "iter on missing bucket: -ENOENT");
	ok(ol_store_bucket_delete(st, "list") == -ENOTEMPTY, "delete non-empty bucket");
	for (int j = 0; j < n; j++)
		ol_store_delete(st, "list", keys[j], strlen(keys[j]));
	ok(ol_store_bucket_delete(st, "list") == 0, "delete emptied bucket");
	ok(ol_store_bucket_stat(st, "list", NULL) == -ENOENT, "bucket gone");
}

static int
put_part(struct ol_store *st, const char *uid, unsigned no, const uint8_t *d, size_t n)
{
	struct ol_put *p;
	char etag[16];
	int rc = ol_store_mpu_part_begin(st, "b", uid, no, &p);

	if (rc)
		return rc;
	snprintf(etag, sizeof(etag), "e%u", no);
	rc = ol_store_put_write(p, d, n);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	return ol_store_put_commit(p, etag, NULL, 0, NULL);
}

static int
upl_count(const char *key, size_t key_len, const char *upload_id, int64_t init_ns, const void *meta,
	  size_t meta_len, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void
test_multipart(struct ol_store *st)
{
	size_t s1 = (5 << 20) + 3, s2 = 1 << 20, s3 = 100, tot = s1 + s2 + s3;
	uint8_t *d = malloc(tot), *x = malloc(s2);
	char uid[64], uid2[64], key[OL_STORE_MAX_KEY];
	struct ol_mpu_part *parts;
	size_t np, kl, ml;
	unsigned nos[] = {1, 2, 3}, bad_nos[] = {1, 4};
	struct ol_obj_info info;
	int nu = 0;
	struct paths ps = {.n = 0};
	struct stat sb;

	fill(d, tot, 21);
	fill(x, s2, 22);
	ok(ol_store_mpu_create(st, "b", "mp", 2, "mpmeta", 6, uid) == 0 && strlen(uid) == 32,
	   "mpu create");
	ok(put_part(st, uid, 1, d, s1) == 0 && put_part(st, uid, 2, x, s2) == 0 &&
	       put_part(st, uid, 3, d + s1 + s2, s3) == 0,
	   "upload 3 parts");
	ok(put_part(st, uid, 2, d + s1, s2) == 0, "re-upload part 2");
	ok(ol_store_mpu_list_parts(st, "b", uid, &parts, &np) == 0 && np == 3 &&
	       parts[0].part_no == 1 && parts[1].part_no == 2 && parts[2].size == s3 &&
	       parts[1].size == s2 && !strcmp(parts[2].etag, "e3"),
	   "list parts");
	free(parts);
	ok(ol_store_mpu_list(st, "b", upl_count, &nu) == 0 && nu == 1, "one upload listed");
	ok(ol_store_mpu_stat(st, "b", uid, key, &kl, NULL, 0, &ml) == 0 && kl == 2 && ml == 6,
	   "upload stat");
	ok(ol_store_bucket_delete(st, "b") == -ENOTEMPTY, "bucket with upload is not empty");
	ok(ol_store_mpu_complete(st, "b", uid, bad_nos, 2, "x-2", &info) == -EINVAL,
	   "complete with a missing part: -EINVAL");
	ok(ol_store_mpu_complete(st, "b", uid, nos, 3, "final-3", &info) == 0 && info.size == tot &&
	       info.n_parts == 3,
	   "complete");
	ok(get_eq(st, "b", "mp", d, tot) == 1, "multipart object reads back exactly");
	{
		struct ol_get *g;
		uint8_t buf[64];

		ol_store_get_open(st, "b", "mp", 2, &g, &info);
		ok(ol_store_get_read(g, s1 - 10, buf, 64) == 64 && !memcmp(buf, d + s1 - 10, 64),
		   "range across a part boundary");
		{
			size_t part[3] = {s1, s2, s3};

			ok(stream_steps(st, "mp", d, tot, 0, 1 << 20, part, 3) &&
			       stream_steps(st, "mp", d, tot, s1 - 10, 1 << 20, part, 3) &&
			       stream_steps(st, "mp", d, tot, 12345, 1 << 20, part, 3),
			   "get_step over parts: exact bytes, steps on block boundaries");
		}
		ok(info.meta_len == 6 && !memcmp(info.meta, "mpmeta", 6) &&
		       !strcmp(info.etag, "final-3"),
		   "meta from create, final etag");
		ol_store_get_close(g);
	}
	ok(ol_store_mpu_list_parts(st, "b", uid, &parts, &np) == -ENOENT, "upload gone");
	/* abort keeps the object; unlisted parts are reclaimed */
	ok(ol_store_mpu_create(st, "b", "mp", 2, NULL, 0, uid2) == 0 &&
	       put_part(st, uid2, 1, x, 1000) == 0,
	   "second upload on the same key");
	ok(ol_store_mpu_abort(st, "b", uid2) == 0, "abort");
	ok(get_eq(st, "b", "mp", d, tot) == 1, "abort kept the existing object");
	ok(ol_store_mpu_abort(st, "b", uid2) == -ENOENT, "abort twice: -ENOENT");
	ok(ol_store_mpu_create(st, "b", "mp2", 3, NULL, 0, uid2) == 0 &&
	       put_part(st, uid2, 1, x, s2) == 0 && put_part(st, uid2, 2, d, 5000) == 0,
	   "upload with 2 parts");
	ok(ol_store_mpu_complete(st, "b", uid2, nos, 1, "one", NULL) == 0 &&
	       get_eq(st, "b", "mp2", x, s2) == 1,
	   "complete with part 1 only");
	ol_store_shard_paths(st, "b", "mp2", 3, paths_cb, &ps);
	ok(ps.n == 4 && stat(ps.p[0], &sb) == 0, "listed part's shards kept");
	/* complete with the object's meta replaced (S3 adds what it learns at complete) */
	char mb[64];
	struct ol_obj_info hi;
	ok(ol_store_mpu_create(st, "b", "mp3", 3, "create-meta", 11, uid2) == 0 &&
	       put_part(st, uid2, 1, x, 100) == 0,
	   "upload with meta");
	ok(ol_store_mpu_complete_meta(st, "b", uid2, nos, 1, "m-1", NULL, OL_STORE_VER_OFF, mb,
				      OL_STORE_MAX_META + 1, NULL) == -EINVAL,
	   "complete_meta: meta too large is -EINVAL");
	ok(ol_store_mpu_complete_meta(st, "b", uid2, nos, 1, "m-1", NULL, OL_STORE_VER_OFF,
				      "complete-meta", 13, NULL) == 0 &&
	       ol_store_head(st, "b", "mp3", 3, &hi, mb, sizeof(mb)) == 0 && hi.meta_len == 13 &&
	       memcmp(mb, "complete-meta", 13) == 0 && get_eq(st, "b", "mp3", x, 100) == 1,
	   "complete_meta: the object carries the meta given at complete");
	nu = 0;
	ol_store_mpu_list(st, "b", upl_count, &nu);
	ok(nu == 0, "no uploads left");
	free(d);
	free(x);
}

/* A GET that resolved a version keeps reading it whole while an overwrite or a delete
 * commits: the old version's shard files are unlinked only when the reader closes. */
static void
test_read_while_replaced(struct ol_store *st)
{
	size_t s1 = (5 << 20) + 3, s2 = 1 << 20, tot = s1 + s2;
	uint8_t *d = malloc(tot), *got = malloc(tot), small[100];
	unsigned nos[] = {1, 2};
	char uid[64];
	struct paths ps = {.n = 0};
	struct ol_obj_info info;
	struct stat sb;

	fill(d, tot, 31);
	fill(small, sizeof(small), 32);
	for (int round = 0; round < 2; round++) {
		struct ol_get *g = NULL;
		ssize_t r1 = -1, r2 = -1;

		ps.n = 0;
		ok(ol_store_mpu_create(st, "b", "rr", 2, NULL, 0, uid) == 0 &&
		       put_part(st, uid, 1, d, s1) == 0 && put_part(st, uid, 2, d + s1, s2) == 0 &&
		       ol_store_mpu_complete(st, "b", uid, nos, 2, "rr-2", NULL) == 0,
		   "two-part object %d", round);
		ol_store_shard_paths(st, "b", "rr", 2, paths_cb, &ps);
		ok(ol_store_get_open(st, "b", "rr", 2, &g, &info) == 0 && info.size == tot,
		   "open a reader of it");
		if (g)
			r1 = ol_store_get_read(g, 0, got, 4096);
		ok(round ? ol_store_delete(st, "b", "rr", 2) == 0
			 : put_obj(st, "b", "rr", small, sizeof(small)) == 0,
		   round ? "delete while it reads" : "overwrite while it reads");
		if (g)
			r2 = ol_store_get_read(g, 4096, got + 4096, tot - 4096);
		ok(r1 == 4096 && r2 == (ssize_t)(tot - 4096) && !memcmp(got, d, tot),
		   "the reader reads the whole old version (%zd, %zd)", r1, r2);
		ok(ps.n == 8 && stat(ps.p[7], &sb) == 0, "old shards kept while read");
		ol_store_get_close(g);
		ok(stat(ps.p[0], &sb) != 0 && stat(ps.p[7], &sb) != 0,
		   "old shards gone once the reader closed");
	}
	ok(get_eq(st, "b", "rr", NULL, 0) != 1, "deleted");
	free(d);
	free(got);
}

static int
flip_cb(int drive, unsigned part, const char *path, void *arg)
{
	int *target = arg;
	int fd;
	uint8_t b[16];

	if (drive != target[0])
		return 0;
	fd = open(path, O_RDWR);
	if (fd < 0)
		return 0;
	if (pread(fd, b, sizeof(b), target[1]) == (ssize_t)sizeof(b)) {
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] ^= 0x5a;
		if (pwrite(fd, b, sizeof(b), target[1]) == (ssize_t)sizeof(b))
			target[2]++;
	}
	close(fd);
	return 0;
}

/* FNV-1a of drive 0's shard file */
static int
hash_cb(int drive, unsigned part, const char *path, void *arg)
{
	uint64_t *h = arg;
	uint8_t b[65536];
	ssize_t r;
	int fd;

	if (drive != 0 || (fd = open(path, O_RDONLY)) < 0)
		return 0;
	*h = 1469598103934665603ULL;
	while ((r = read(fd, b, sizeof(b))) > 0)
		for (ssize_t i = 0; i < r; i++)
			*h = (*h ^ b[i]) * 1099511628211ULL;
	close(fd);
	return 0;
}

static int
unlink_cb(int drive, unsigned part, const char *path, void *arg)
{
	int *mask = arg;

	if (*mask & (1 << drive))
		unlink(path);
	return 0;
}

static void
test_faults(struct ol_store **stp)
{
	struct ol_store *st = *stp;
	size_t n = (6 << 20) + 12345;
	uint8_t *d = malloc(n), *sm = malloc(5000);
	int t0[3] = {0, 100, 0}, t1[3] = {1, (1 << 20) + 8 + 5, 0}, mask, rc;
	char path[600];

	fill(d, n, 31);
	fill(sm, 5000, 32);
	ok(put_obj(st, "b", "f", d, n) == 0 && put_obj(st, "b", "small", sm, 5000) == 0,
	   "put large and small object");
	ol_store_shard_paths(st, "b", "f", 1, flip_cb, t0);
	ok(t0[2] == 1 && get_eq(st, "b", "f", d, n) == 1,
	   "bytes flipped in a data shard: exact bytes");
	ol_store_shard_paths(st, "b", "f", 1, flip_cb, t1);
	ok(t1[2] == 1 && get_eq(st, "b", "f", d, n) == 1,
	   "bytes flipped in another drive's second block: exact bytes");
	{
		uint64_t h0 = 0, h1 = 0;
		int t2[3] = {1, 200, 0};

		ol_store_shard_paths(st, "b", "f", 1, hash_cb, &h0);
		t0[2] = 0;
		ol_store_shard_paths(st, "b", "f", 1, flip_cb, t0);
		ok(get_eq(st, "b", "f", d, n) == 1, "corrupt block read exactly");
		ol_store_shard_paths(st, "b", "f", 1, hash_cb, &h1);
		ok(h0 == h1, "the read healed the corrupt block in place");
		ol_store_shard_paths(st, "b", "f", 1, flip_cb, t0);
		ol_store_shard_paths(st, "b", "f", 1, flip_cb, t2);
		rc = get_eq(st, "b", "f", d, n);
		ok(rc == OL_STORE_ECORRUPT,
		   "two corrupt shards in one stripe (P=1): OL_STORE_ECORRUPT, not wrong bytes "
		   "(%d)",
		   rc);
		ol_store_shard_paths(st, "b", "f", 1, flip_cb, t2); /* restore drive 1 */
		ok(get_eq(st, "b", "f", d, n) == 1, "one corrupt again: exact");
	}
	snprintf(path, sizeof(path), "%s/d2", root);
	rm_rf(path);
	ok(get_eq(st, "b", "f", d, n) == 1 && get_eq(st, "b", "small", sm, 5000) == 1,
	   "drive 2 wiped while open: exact bytes (large and inline)");
	ol_store_close(st);
	ok(ol_store_open(&cfg, stp) == 0, "reopen with a wiped drive");
	st = *stp;
	ok(get_eq(st, "b", "f", d, n) == 1 && get_eq(st, "b", "small", sm, 5000) == 1,
	   "after reopen: exact bytes");
	ok(ol_store_bucket_stat(st, "b", NULL) == 0, "bucket still there");
	{
		struct ol_iter *it; /* opening checks the bucket, which heals its record */

		ok(ol_store_iter_open(st, "b", &it) == 0, "list the bucket");
		ol_store_iter_close(it);
	}
	ol_store_close(st);
	snprintf(path, sizeof(path), "%s/d0", root);
	rm_rf(path);
	ok(ol_store_open(&cfg, stp) == 0, "wipe drive 0 too (after the reads healed drive 2)");
	st = *stp;
	ok(get_eq(st, "b", "f", d, n) == 1 && get_eq(st, "b", "small", sm, 5000) == 1,
	   "exact bytes: drive 2's records and shards were healed by the reads");
	ok(ol_store_bucket_stat(st, "b", NULL) == 0, "bucket record healed too");
	fill(d, n, 33);
	ok(put_obj(st, "b", "g", d, n) == 0 && get_eq(st, "b", "g", d, n) == 1, "new writes work");
	mask = 3;
	ol_store_shard_paths(st, "b", "g", 1, unlink_cb, &mask);
	ok(get_eq(st, "b", "g", d, n) == -EIO, "P+1 drives' shards gone: -EIO, not wrong bytes");
	ok(put_obj(st, "b", "h", d, n) == 0, "put h");
	mask = 8;
	ol_store_shard_paths(st, "b", "h", 1, unlink_cb, &mask);
	ok(get_eq(st, "b", "h", d, n) == 1, "parity drive's shard gone: exact");
	mask = 1;
	ol_store_shard_paths(st, "b", "h", 1, unlink_cb, &mask);
	ok(get_eq(st, "b", "h", d, n) == -EIO, "and a data drive's too: -EIO");
	free(d);
	free(sm);
}

static int n_files;

static int
file_count2(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	if (flag == FTW_F && strstr(p, "/.openlake/data/"))
		n_files++;
	return 0;
}

static int
data_files(void)
{
	n_files = 0;
	nftw(root, file_count2, 16, FTW_PHYS);
	return n_files;
}

/* basenames (object version uuids) of the shard files on disk */
#define MAX_NAMES 1024
struct names {
	char n[MAX_NAMES][64];
	int count;
};
static struct names *names_into;

static int
file_name_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	if (flag == FTW_F && strstr(p, "/.openlake/data/") && names_into->count < MAX_NAMES)
		snprintf(names_into->n[names_into->count++], 64, "%s", p + f->base);
	return 0;
}

static void
data_names(struct names *out)
{
	out->count = 0;
	names_into = out;
	nftw(root, file_name_cb, 16, FTW_PHYS);
}

static int
names_has(const struct names *s, const char *name)
{
	for (int i = 0; i < s->count; i++)
		if (strcmp(s->n[i], name) == 0)
			return 1;
	return 0;
}

static int
name_cb(int drive, unsigned part, const char *path, void *arg)
{
	struct names *s = arg;
	const char *b = strrchr(path, '/');
	if (s->count < MAX_NAMES)
		snprintf(s->n[s->count++], 64, "%s", b ? b + 1 : path);
	return 0;
}

/* After a writer was killed: every shard file on disk is one that existed before, one of the
 * object's current version, or one of a single torn version (the put in flight when it died,
 * whose record may have reached fewer than a write quorum of drives and is kept, as
 * docs/storage-format.md says, until the key is next written). Anything else is a leak. */
static int
only_referenced_left(struct ol_store *st, const struct names *before, const char *key, char *why,
		     size_t whylen)
{
	struct names *now = malloc(sizeof(*now)), *cur = malloc(sizeof(*cur));
	const char *torn = NULL;
	int ok_ = 1, n_torn = 0;

	data_names(now);
	cur->count = 0;
	ol_store_shard_paths(st, "b", key, strlen(key), name_cb, cur);
	for (int i = 0; i < now->count && ok_; i++) {
		const char *n = now->n[i];
		if (names_has(before, n) || names_has(cur, n))
			continue;
		if (!torn)
			torn = n;
		if (strcmp(torn, n) != 0 || ++n_torn > ol_store_drive_count(st)) {
			snprintf(why, whylen, "unreferenced shard file %s", n);
			ok_ = 0;
		}
	}
	if (ok_)
		snprintf(why, whylen, "%d file(s) of a torn version kept", n_torn);
	free(now);
	free(cur);
	return ok_;
}

static void
test_crash(struct ol_store **stp)
{
	struct ol_store *st = *stp;
	uint8_t *d = malloc(4 << 20);
	struct ol_put *p;
	int before = data_files(), status, bad = 0, seen = 0, pfd[2];
	struct names *before_names = malloc(sizeof(*before_names));
	char why[128];
	uint64_t acked = 0, v_ack;
	pid_t pid;

	ok(ol_store_put_begin(st, "b", "ab", 2, -1, &p) == 0 &&
	       ol_store_put_write(p, d, 4 << 20) == 0,
	   "begin a 4 MiB put");
	ol_store_put_abort(p);
	ok(data_files() == before, "abort mid-put leaves no files");
	ok(ol_store_head(st, "b", "ab", 2, &(struct ol_obj_info){0}, NULL, 0) == -ENOENT,
	   "and no object");
	ol_store_close(st);
	*stp = NULL;
	data_names(before_names);
	if (pipe(pfd)) {
		free(before_names);
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct ol_store *cs;

		close(pfd[0]);
		if (ol_store_open(&cfg, &cs))
			_exit(1);
		for (uint64_t v = 1;; v++) {
			size_t sz = (v % 3 == 0) ? 3000 : (size_t)(1 << 20) + v * 4099 % 500000;

			fill(d, sz, v);
			memcpy(d, &v, 8);
			if (put_obj(cs, "b", "crash", d, sz) == 0 && write(pfd[1], &v, 8) != 8)
				_exit(1);
		}
	}
	close(pfd[1]);
	for (int i = 0; i < 5 && read(pfd[0], &acked, 8) == 8; i++)
		;
	usleep((useconds_t)(rand() % 20000));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	while (read(pfd[0], &v_ack, 8) == 8)
		acked = v_ack;
	close(pfd[0]);
	ok(ol_store_open(&cfg, stp) == 0, "reopen after SIGKILL of a writer");
	st = *stp;
	{
		struct ol_get *g;
		struct ol_obj_info info;
		uint64_t v = 0;
		uint8_t *got = malloc(4 << 20);

		if (ol_store_get_open(st, "b", "crash", 5, &g, &info) == 0) {
			seen = 1;
			if (ol_store_get_read(g, 0, got, info.size) != (ssize_t)info.size)
				bad = 1;
			memcpy(&v, got, 8);
			fill(d, info.size, v);
			memcpy(d, &v, 8);
			bad |= memcmp(d, got, info.size) != 0;
			ol_store_get_close(g);
		}
		ok(seen && !bad, "the object is one whole version (v%llu, %llu bytes)",
		   (unsigned long long)v, (unsigned long long)info.size);
		ok(acked > 0 && (v == acked || v == acked + 1),
		   "it is the last acknowledged put or the one in flight (acked v%llu)",
		   (unsigned long long)acked);
		free(got);
	}
	ok(only_referenced_left(st, before_names, "crash", why, sizeof(why)),
	   "sweep left only referenced shard files (%s)", why);
	free(before_names);
	free(d);
}

struct thr {
	struct ol_store *st;
	int id, errs;
};

static void *
worker(void *arg)
{
	struct thr *t = arg;
	uint8_t *d = malloc(300000);
	char key[32];

	fill(d, 300000, 0); /* every size is a prefix of the same bytes */
	for (int i = 0; i < 12; i++) {
		size_t sz = (size_t)(i % 2 ? 300000 : 2000);

		snprintf(key, sizeof(key), i % 3 ? "t%d-%d" : "shared", t->id, i);
		int rc = put_obj(t->st, "b", key, d, sz);

		if (rc) {
			printf("# put %s: %d\n", key, rc);
			t->errs++;
		}
		if (i % 3 && (rc = get_eq(t->st, "b", key, d, sz)) != 1) {
			printf("# get %s: %d\n", key, rc);
			t->errs++;
		}
		if (!(i % 3)) {
			struct ol_get *g;
			struct ol_obj_info info;

			if (ol_store_get_open(t->st, "b", "shared", 6, &g, &info) == 0) {
				uint8_t *b = malloc(info.size + 1);

				ssize_t r = ol_store_get_read(g, 0, b, info.size);

				if (r != (ssize_t)info.size || memcmp(b, d, info.size)) {
					printf("# shared read %zd of %llu\n", r,
					       (unsigned long long)info.size);
					t->errs++;
				}
				free(b);
				ol_store_get_close(g);
			}
		}
	}
	free(d);
	return NULL;
}

#include <dirent.h>

static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static void
test_threads(struct ol_store *st)
{
	pthread_t th[4];
	struct thr t[4];
	int errs = 0, fds = open_fds();

	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){st, i, 0};
		pthread_create(&th[i], NULL, worker, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		errs += t[i].errs;
	}
	ok(errs == 0, "4 threads putting/getting concurrently, same and distinct keys (%d errors)",
	   errs);
	ok(open_fds() == fds, "no fd left behind by exited threads (their rings are freed)");
}

static void
test_open_errors(void)
{
	struct ol_store *st;
	char p[300];
	int fd;

	setup_cfg(4, 1);
	snprintf(p, sizeof(p), "%s/d3", root);
	rm_rf(p);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	close(fd);
	ok(ol_store_open(&cfg, &st) == 0 && ol_store_drives_online(st) == 3,
	   "a file where drive 3 should be: open with 3 of 4 drives");
	ok(st && ol_store_bucket_create(st, "x") == 0 &&
	       put_obj(st, "x", "k", (uint8_t *)"hi", 2) == 0 &&
	       get_eq(st, "x", "k", (uint8_t *)"hi", 2) == 1,
	   "writes and reads with a drive down");
	ol_store_close(st);
	snprintf(p, sizeof(p), "%s/d2", root);
	rm_rf(p);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	close(fd);
	ok(ol_store_open(&cfg, &st) == -EIO, "two drives unusable (P=1): open refused");
}

/* A commit of vid that reached only the drives in mask, as when the process dies. */
static void
partial_commit(struct ol_store *st, const char *key, unsigned mask)
{
	struct ol_rec_build b[OL_MAX_DRIVES];
	struct ol_rpart part = {.size = 5 << 20};
	bool skip[OL_MAX_DRIVES];
	char okey[OL_KEYBUF];
	uint8_t vid[OL_UUID], vis[OL_UUID];
	struct ol_commit c = {.db = OL_META_OBJECTS, .k = okey, .b = b, .skip = skip};

	c.kl = ol_okey(okey, "b", key, strlen(key));
	ol_uuid(vid);
	memcpy(part.uuid, vid, OL_UUID);
	for (int d = 0; d < 4; d++) {
		skip[d] = !(mask & (1u << d));
		b[d] = (struct ol_rec_build){.st = st,
					     .size = part.size,
					     .mtime = ol_now_ns(st),
					     .vid = vid,
					     .parts = &part,
					     .n_parts = 1,
					     .etag = "lost",
					     .idx = d};
	}
	if (ol_visible_vid(st, OL_META_OBJECTS, okey, c.kl, vis))
		c.prev_vid = vis;
	ol_commit_all(st, &c);
	ol_commit_free(&c);
}

static void
test_torn_commits(struct ol_store *st)
{
	uint8_t d[3000];

	fill(d, sizeof(d), 51);
	ok(put_obj(st, "b", "torn", d, sizeof(d)) == 0, "put v1");
	partial_commit(st, "torn", 3); /* v2 on drives 0, 1 of 4 (k = 3): not visible */
	ok(get_eq(st, "b", "torn", d, sizeof(d)) == 1, "v2 on 2 of 4 drives: v1 whole");
	partial_commit(st, "torn", 3); /* v3 on the same two drives */
	ok(get_eq(st, "b", "torn", d, sizeof(d)) == 1,
	   "then v3 on the same 2 drives: still v1 (prev keeps the visible version)");
	partial_commit(st, "torn", 7); /* v4 on 3 drives: visible, its data is missing */
	ok(get_eq(st, "b", "torn", d, sizeof(d)) == -EIO, "v4 on 3 drives wins (k = 3)");
	ok(put_obj(st, "b", "torn", d, 10) == 0 && get_eq(st, "b", "torn", d, 10) == 1,
	   "a full commit after torn ones");
}

/* ---- versioning ---- */

static int
put_ver(struct ol_store *st, const char *k, const uint8_t *d, size_t n, int vmode, char *vid)
{
	struct ol_put *p;
	struct ol_obj_info info;
	int rc = ol_store_put_begin(st, "vb", k, strlen(k), (int64_t)n, &p);

	if (rc)
		return rc;
	ol_store_put_set_vmode(p, vmode);
	rc = ol_store_put_write(p, d, n);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	rc = ol_store_put_commit(p, "\"e\"", NULL, 0, &info);
	if (!rc)
		memcpy(vid, info.version_id, OL_STORE_VID_MAX);
	return rc;
}

/* The version's exact bytes: 1; else the -errno. */
static int
get_ver_eq(struct ol_store *st, const char *k, const char *vid, const uint8_t *d, size_t n)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t *buf = malloc(n + 1);
	int rc = ol_store_get_open_ver(st, "vb", k, strlen(k), vid, &g, &info), same = 0;

	if (!rc) {
		same = info.size == n && ol_store_get_read(g, 0, buf, n) == (ssize_t)n &&
		       !memcmp(buf, d, n) && !strcmp(info.version_id, vid);
		ol_store_get_close(g);
	}
	free(buf);
	return rc ? rc : same;
}

static const char *
tail6(const char *vid)
{
	return strlen(vid) < 6 ? vid : vid + strlen(vid) - 6;
}

/* "id:latest:marker," for every version of the bucket, in listing order. */
static void
vlist(struct ol_store *st, char *out, size_t cap)
{
	struct ol_viter *it;
	const char *k;
	size_t kl, n = 0;
	struct ol_obj_info info;

	out[0] = 0;
	if (ol_store_viter_open(st, "vb", &it))
		return;
	while (ol_store_viter_next(it, &k, &kl, &info) == 1 && n + 80 < cap)
		n += (size_t)snprintf(out + n, cap - n, "%.*s/%.6s:%d:%d,", (int)kl, k,
				      tail6(info.version_id), info.is_latest, info.delete_marker);
	ol_store_viter_close(it);
}

static void
test_versions(struct ol_store **stp)
{
	struct ol_store *st = *stp;
	size_t big = (2 << 20) + 7;
	uint8_t *d1 = malloc(big), *d2 = malloc(1000), *d3 = malloc(big);
	char v1[OL_STORE_VID_MAX], v2[OL_STORE_VID_MAX], v3[OL_STORE_VID_MAX], n1[OL_STORE_VID_MAX];
	char want[512], got[512], path[600], mk[OL_STORE_VID_MAX];
	struct ol_obj_info info;
	struct ol_iter *it;
	const char *k;
	size_t kl;
	uint8_t u1[OL_UUID];
	struct stat sb;

	fill(d1, big, 61);
	fill(d2, 1000, 62);
	fill(d3, big, 63);
	ok(ol_store_bucket_create(st, "vb") == 0, "versioned bucket");
	ok(put_ver(st, "k", d2, 1000, OL_STORE_VER_OFF, n1) == 0 && !strcmp(n1, "null"),
	   "a write before versioning is the null version");
	ok(put_ver(st, "k", d1, big, OL_STORE_VER_ON, v1) == 0 &&
	       put_ver(st, "k", d2, 1000, OL_STORE_VER_ON, v2) == 0 &&
	       put_ver(st, "k", d3, big, OL_STORE_VER_ON, v3) == 0 &&
	       strlen(v1) == OL_STORE_VID_LEN && strcmp(v1, v2) && strcmp(v2, v3),
	   "three versions, three ids");
	ok(get_eq(st, "vb", "k", d3, big) == 1 && get_ver_eq(st, "k", v1, d1, big) == 1 &&
	       get_ver_eq(st, "k", v2, d2, 1000) == 1 && get_ver_eq(st, "k", "null", d2, 1000) == 1,
	   "current and every version read back exactly");
	snprintf(want, sizeof(want), "k/%s:1:0,k/%s:0:0,k/%s:0:0,k/%s:0:0,", tail6(v3), tail6(v2),
		 tail6(v1), "null");
	vlist(st, got, sizeof(got));
	ok(!strcmp(got, want), "versions newest first, the current one latest (%s)", got);
	ol_store_close(st);
	ok(ol_store_open(&cfg, stp) == 0, "reopen (sweep at open)");
	st = *stp;
	{ /* drive 0 wiped: the whole-store heal gives back its versions and their shards */
		struct ol_heal_progress hp;
		char dir[300];

		uint64_t u0;

		memset(&hp, 0, sizeof(hp));
		ol_store_heal_all(st, &(struct ol_heal_opts){0},
				  &hp); /* earlier tests' leftovers */
		u0 = atomic_load(&hp.unrecoverable);
		memset(&hp, 0, sizeof(hp));
		ol_store_close(st);
		snprintf(dir, sizeof(dir), "%s/d0/.openlake", root);
		rm_rf(dir);
		ok(ol_store_open(&cfg, stp) == 0, "reopen with drive 0 wiped");
		st = *stp;
		ok(ol_store_heal_all(st, &(struct ol_heal_opts){0}, &hp) == 0 &&
		       atomic_load(&hp.records_restored) >= 5 &&
		       atomic_load(&hp.unrecoverable) == u0,
		   "heal restores the versions' records (%llu, %llu unrecoverable)",
		   (unsigned long long)atomic_load(&hp.records_restored),
		   (unsigned long long)atomic_load(&hp.unrecoverable));
		for (int i = 0; i < OL_UUID; i++) {
			unsigned x;

			sscanf(v1 + 16 + 2 * i, "%2x", &x);
			u1[i] = (uint8_t)x;
		}
		ol_shard_path(st, 0, u1, path, sizeof(path));
		ok(stat(path, &sb) == 0, "and the old version's shard file on the wiped drive");
	}
	ol_sweep_orphans(st, 0);
	ok(get_ver_eq(st, "k", v1, d1, big) == 1 && get_ver_eq(st, "k", v2, d2, 1000) == 1,
	   "an old version's shards survive the sweep at open and the orphan sweep");
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, NULL, &info) == 0 &&
	       info.delete_marker && strlen(info.version_id) == OL_STORE_VID_LEN,
	   "delete adds a marker");
	ok(ol_store_get_open(st, "vb", "k", 1, (struct ol_get **)&it, &info) == -ENOENT &&
	       info.delete_marker,
	   "current marker: -ENOENT with delete_marker");
	memcpy(mk, info.version_id, sizeof(mk));
	ok(ol_store_head_ver(st, "vb", "k", 1, mk, &info, NULL, 0) == OL_STORE_EDELMARK &&
	       info.delete_marker && !strcmp(info.version_id, mk),
	   "the marker by id: OL_STORE_EDELMARK");
	ok(ol_store_iter_open(st, "vb", &it) == 0 && ol_store_iter_next(it, &k, &kl, &info) == 0,
	   "the plain listing skips a key whose current version is a marker");
	ol_store_iter_close(it);
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, "junk", NULL) == -EINVAL &&
	       ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON,
				   "000000000000000000000000000000000000000000000000",
				   NULL) == -ENOENT,
	   "bad id -EINVAL, unknown id -ENOENT");
	/* v1's shard file on drive 0: its uuid is the id's last 32 hex digits */
	for (int i = 0; i < OL_UUID; i++) {
		unsigned x;

		sscanf(v1 + 16 + 2 * i, "%2x", &x);
		u1[i] = (uint8_t)x;
	}
	ol_shard_path(st, 0, u1, path, sizeof(path));
	ok(stat(path, &sb) == 0, "v1 has its shard file");
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, v1, &info) == 0 &&
	       stat(path, &sb) != 0 && get_ver_eq(st, "k", v1, d1, big) == -ENOENT,
	   "deleting v1 for good reclaims its shards");
	vlist(st, got, sizeof(got));
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, got + 2, NULL) == -EINVAL,
	   "a truncated id is -EINVAL");
	/* the marker is current: remove it, then v3: v2 becomes current */
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, mk, &info) == 0 &&
	       info.delete_marker && get_eq(st, "vb", "k", d3, big) == 1,
	   "removing the marker makes v3 current again");
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_ON, v3, NULL) == 0 &&
	       get_eq(st, "vb", "k", d2, 1000) == 1 &&
	       ol_store_head(st, "vb", "k", 1, &info, NULL, 0) == 0 && !strcmp(info.version_id, v2),
	   "removing the current version makes the next newest current");
	ok(put_ver(st, "k", d1, 10, OL_STORE_VER_SUSP, n1) == 0 && !strcmp(n1, "null") &&
	       put_ver(st, "k", d3, 20, OL_STORE_VER_SUSP, n1) == 0,
	   "two writes while suspended");
	snprintf(want, sizeof(want), "k/null:1:0,k/%s:0:0,", tail6(v2));
	vlist(st, got, sizeof(got));
	ok(!strcmp(got, want), "suspended writes replace the null version (%s)", got);
	ok(ol_store_bucket_delete(st, "vb") == -ENOTEMPTY, "bucket with versions is not empty");
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_SUSP, "null", NULL) == 0 &&
	       get_eq(st, "vb", "k", d2, 1000) == 1,
	   "removing the null version: v2 current");
	ok(ol_store_delete_ver(st, "vb", "k", 1, OL_STORE_VER_SUSP, v2, NULL) == 0 &&
	       ol_store_bucket_delete(st, "vb") == 0,
	   "all versions gone: the bucket deletes");
	free(d1);
	free(d2);
	free(d3);
}

/* N=4, P=2 with fsync on: any two drives may go, a third is -EIO. */
static void
test_p2(void)
{
	struct ol_store *st;
	size_t n = (2 << 20) + 99;
	uint8_t *d = malloc(n);
	int mask;

	rm_rf(root);
	mkdir(root, 0755);
	setup_cfg(4, 2);
	cfg.fsync = true;
	fill(d, n, 41);
	ok(ol_store_open(&cfg, &st) == 0 && ol_store_bucket_create(st, "p2") == 0,
	   "open 2+2 with fsync");
	ok(put_obj(st, "p2", "o", d, n) == 0 && put_obj(st, "p2", "s", d, 999) == 0,
	   "durable puts (large and inline)");
	mask = 5; /* drives 0 and 2: one data, one parity shard */
	ol_store_shard_paths(st, "p2", "o", 1, unlink_cb, &mask);
	ok(get_eq(st, "p2", "o", d, n) == 1, "two shards gone of P=2: exact bytes");
	mask = 10; /* now 1 and 3: only the two healed by that read are left */
	ol_store_shard_paths(st, "p2", "o", 1, unlink_cb, &mask);
	ok(get_eq(st, "p2", "o", d, n) == 1, "the read healed both lost shards");
	mask = 15;
	ol_store_shard_paths(st, "p2", "o", 1, unlink_cb, &mask);
	ok(get_eq(st, "p2", "o", d, n) == -EIO, "all gone: -EIO");
	ol_store_close(st);
	ok(ol_store_open(&cfg, &st) == 0 && get_eq(st, "p2", "s", d, 999) == 1,
	   "reopen: inline object intact");
	ol_store_close(st);
	free(d);
}

int
main(void)
{
	struct ol_store *st = NULL;

	ol_log_threshold = getenv("OL_TEST_VERBOSE") ? OL_LOG_DEBUG : OL_LOG_ERROR - 1;
	snprintf(root, sizeof(root), "%s/olstore.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(root))
		return 77;
	setup_cfg(4, 1);
	ok(ol_store_open(&cfg, &st) == 0 && ol_store_drive_count(st) == 4, "open creates 4 drives");
	ok(ol_store_bucket_create(st, "b") == 0, "bucket create");
	ok(ol_store_bucket_create(st, "b") == -EEXIST, "bucket create again: -EEXIST");
	ok(ol_store_bucket_stat(st, "b", NULL) == 0, "bucket stat");
	test_roundtrip(st);
	test_overwrite_delete(st);
	test_listing(st);
	test_multipart(st);
	test_read_while_replaced(st);
	test_faults(&st);
	test_crash(&st);
	test_threads(st);
	test_torn_commits(st);
	test_versions(&st);
	ol_store_close(st);
	test_open_errors();
	test_p2();
	rm_rf(root);
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
