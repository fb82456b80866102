/* tests/unit/test_kv_spill.c - the KV pool's NVMe tier (kv/spill.c) on its own: the record
 * layout on disk (version 2: header alone in the first 4 KiB block, the value written from
 * the caller's memory; version 1 where that would take more room, and tombstones), alignment
 * of every record and of the value, a value not aligned in memory (copied, same bytes on
 * disk), a segment written by an older build (version 1 records only) recovered and read,
 * and torn or forged records at recovery (never returned). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "kv/spill.h"
#include "kv_data.h"

#define KiB 1024u
#define MiB (1u << 20)
#define A   OL_KVS_ALIGN

struct found {
	struct ol_kvs_rec rec[16];
	struct ol_kvs_loc loc[16];
	unsigned n;
};

static void
on_rec(void *arg, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc)
{
	struct found *f = arg;
	if (f->n < 16) {
		f->rec[f->n] = *r;
		f->loc[f->n++] = *loc;
	}
}

static void
seg_path(const char *dir, uint64_t id, char *out, size_t cap)
{
	snprintf(out, cap, "%s/seg-%010llu.olkv", dir, (unsigned long long)id);
}

/* The bytes of segment id (malloc'd), *len its size. */
static uint8_t *
seg_bytes(const char *dir, uint64_t id, uint64_t *len)
{
	char p[600];
	seg_path(dir, id, p, sizeof(p));
	int fd = open(p, O_RDONLY);
	struct stat st;
	*len = 0;
	if (fd < 0 || fstat(fd, &st) != 0)
		return NULL;
	uint8_t *b = malloc((size_t)st.st_size + 1);
	*len = pread(fd, b, (size_t)st.st_size, 0) == st.st_size ? (uint64_t)st.st_size : 0;
	close(fd);
	return b;
}

static void
mk_rec(struct ol_kvs_rec *r, uint64_t id, uint64_t len, uint64_t ver)
{
	memset(r, 0, sizeof(*r));
	make_key(r->kk, id);
	memset(r->kk + 32, 0x11, 16);
	r->len = len;
	r->ver = ver;
}

static uint16_t
rec_version(const uint8_t *h)
{
	uint16_t v;
	memcpy(&v, h + 4, 2);
	return v;
}

static bool
all_zero(const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A record of the documented layout, version ver (1: value at 128; 2: value at 4096), the
 * way an older build (1) or this one (2) writes it, at p (room for 4096 + the value rounded
 * up to 4 KiB). Returns the bytes it covers. */
static uint64_t
encode_rec(uint8_t *p, const struct ol_kvs_rec *r, uint16_t ver, const uint8_t *val)
{
	uint64_t voff = ver == 2 ? A : OL_KVS_HDR;
	uint64_t rs = ver == 2 ? A + (r->len + A - 1) / A * A : ol_kvs_rec_size(r->len);
	uint32_t magic = 0x524b4c4fu;
	uint64_t vh = XXH3_64bits(val, r->len), t = 1, hh;
	memset(p, 0, rs);
	memcpy(p, &magic, 4);
	memcpy(p + 4, &ver, 2);
	memcpy(p + 6, &r->flags, 2);
	memcpy(p + 8, r->kk, 48);
	memcpy(p + 56, &r->len, 8);
	memcpy(p + 64, &r->ver, 8);
	memcpy(p + 72, &vh, 8);
	memcpy(p + 80, &t, 8);
	hh = XXH3_64bits(p, 120);
	memcpy(p + 120, &hh, 8);
	memcpy(p + voff, val, r->len);
	return rs;
}

static bool
read_exact(struct ol_kvs *s, const struct ol_kvs_rec *r, const struct ol_kvs_loc *loc,
	   uint64_t seed)
{
	const void *v = NULL;
	return ol_kvs_read(s, r, loc, &v) == 0 && check_pattern(v, r->len, seed);
}

/* Version 2 for lengths whose record is no larger that way, written from aligned memory;
 * version 1 for the others and tombstones; an unaligned value lands as the same bytes. */
static void
test_layout(void)
{
	static const uint64_t lens[5] = {256 * KiB, 256 * KiB + 100, 2 * A - 50, 256 * KiB, 0};
	static const uint16_t want_ver[5] = {2, 1, 2, 2, 1};
	char *dir = kv_tmpdir("olkvs-test");
	struct ol_kvs *s = NULL;
	struct ol_kvs_item it[5];
	uint8_t *mem[5] = {0};
	uint64_t dropped[8];
	unsigned nd;
	for (unsigned i = 0; i < 5; i++) {
		if (posix_memalign((void **)&mem[i], A, lens[i] + A) != 0)
			abort();
		uint8_t *v = i == 3 ? mem[i] + 8 : mem[i]; /* 3: not 4 KiB aligned */
		fill_pattern(v, lens[i], 100 + i);
		mk_rec(&it[i].rec, i + 1, lens[i], 10 + i);
		it[i].val = i == 4 ? NULL : v;
	}
	it[4].rec.flags = OL_KVS_TOMBSTONE;
	ok(ol_kvs_open(dir, 64 * MiB, MiB, NULL, NULL, &s) == 0 &&
	       ol_kvs_append_batch(s, it, 5, dropped, &nd) == 0,
	   "layout: a batch of 256 KiB, 256 KiB + 100, 8142 bytes, 256 KiB unaligned, tombstone");
	uint64_t at = 0, flen = 0;
	bool placed = true;
	for (unsigned i = 0; i < 5; i++) {
		placed &= it[i].loc.seg == it[0].loc.seg && it[i].loc.off == at && at % A == 0;
		at += ol_kvs_rec_size(lens[i]);
	}
	uint8_t *f = seg_bytes(dir, it[0].loc.seg, &flen);
	ok(placed && f && flen == at,
	   "layout: records back to back at 4 KiB boundaries, each ol_kvs_rec_size long");
	bool vers = true, v2 = true, v1 = true;
	for (unsigned i = 0; f && flen == at && i < 5; i++) {
		const uint8_t *r = f + it[i].loc.off;
		uint64_t rs = ol_kvs_rec_size(lens[i]);
		vers &= rec_version(r) == want_ver[i];
		if (want_ver[i] == 2) {
			v2 &= all_zero(r + OL_KVS_HDR, A - OL_KVS_HDR) &&
			      check_pattern(r + A, lens[i], 100 + i) &&
			      all_zero(r + A + lens[i], rs - A - lens[i]);
		} else {
			v1 &= (i == 4 || check_pattern(r + OL_KVS_HDR, lens[i], 100 + i)) &&
			      all_zero(r + OL_KVS_HDR + lens[i], rs - OL_KVS_HDR - lens[i]);
		}
	}
	ok(vers, "layout: version 2 for 256 KiB (aligned or not) and 8142 bytes, 1 for 256 KiB + "
		 "100 and the tombstone");
	ok(v2 && v1, "layout: version 2 value at 4096 after a zeroed header block, version 1 at "
		     "128; both zero-padded to the record's end");
	bool back = true;
	for (unsigned i = 0; i < 4; i++)
		back &= read_exact(s, &it[i].rec, &it[i].loc, 100 + i);
	ok(back, "layout: ol_kvs_read returns each value exact");
	bool ext = true;
	for (unsigned i = 0; f && i < 4; i++) {
		struct ol_kvs_ext x;
		const void *v = NULL;
		ext &= ol_kvs_extent_get(s, &it[i].loc, lens[i], &x) == 0 && x.off % A == 0 &&
		       x.len % A == 0 && ol_kvs_verify(s, &it[i].rec, f + x.off, &v) == 0 &&
		       check_pattern(v, lens[i], 100 + i);
		if (x.seg)
			ol_kvs_extent_put(s, &x);
	}
	ok(ext, "layout: extents are 4 KiB aligned and ol_kvs_verify finds each value");
	ol_kvs_close(s);
	free(f);
	for (unsigned i = 0; i < 5; i++)
		free(mem[i]);
	kv_rm_rf(dir);
	free(dir);
}

/* A tier an older build wrote (version 1 records, also for the lengths this build writes as
 * version 2) comes back warm, and new records appended beside them read back too. */
static void
test_old_format(void)
{
	char *dir = kv_tmpdir("olkvs-test");
	static const uint64_t lens[3] = {256 * KiB, 2 * MiB, 5000};
	uint64_t total = 0;
	for (unsigned i = 0; i < 3; i++)
		total += ol_kvs_rec_size(lens[i]);
	uint8_t *seg = calloc(1, total), *val = malloc(2 * MiB);
	struct ol_kvs_rec r[4];
	uint64_t at = 0;
	for (unsigned i = 0; i < 3; i++) {
		mk_rec(&r[i], 50 + i, lens[i], 5 + i);
		fill_pattern(val, lens[i], 200 + i);
		at += encode_rec(seg + at, &r[i], 1, val);
	}
	char p[600];
	seg_path(dir, 7, p, sizeof(p));
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	ok(fd >= 0 && write(fd, seg, total) == (ssize_t)total && close(fd) == 0,
	   "old format: segment 7 of three version 1 records (256 KiB, 2 MiB, 5000 bytes)");
	struct found f = {0};
	struct ol_kvs *s = NULL;
	ok(ol_kvs_open(dir, 64 * MiB, 4 * MiB, on_rec, &f, &s) == 0 && f.n == 3,
	   "old format: recovery finds the three records (%u)", f.n);
	bool back = f.n == 3;
	for (unsigned i = 0; back && i < 3; i++)
		back &= f.rec[i].len == lens[i] && f.rec[i].ver == 5 + i &&
			read_exact(s, &r[i], &f.loc[i], 200 + i);
	ok(back, "old format: each reads back exact");
	void *nv = NULL;
	if (posix_memalign(&nv, A, 256 * KiB) != 0)
		abort();
	fill_pattern(nv, 256 * KiB, 300);
	mk_rec(&r[3], 60, 256 * KiB, 9);
	struct ol_kvs_loc loc;
	uint64_t dropped[8];
	unsigned nd;
	ok(ol_kvs_append(s, &r[3], nv, &loc, dropped, &nd) == 0 && loc.seg == 8,
	   "old format: a new record goes to a new segment beside it");
	ol_kvs_close(s);
	memset(&f, 0, sizeof(f));
	back = ol_kvs_open(dir, 64 * MiB, 4 * MiB, on_rec, &f, &s) == 0 && f.n == 4;
	for (unsigned i = 0; back && i < 4; i++)
		back &= read_exact(s, &r[i], &f.loc[i], i < 3 ? 200 + i : 300);
	ok(back, "old format: after a restart both versions read back exact (%u records)", f.n);
	ol_kvs_close(s);
	free(nv);
	free(seg);
	free(val);
	kv_rm_rf(dir);
	free(dir);
}

static int
rewrite(const char *dir, uint64_t id, const uint8_t *b, uint64_t len)
{
	char p[600];
	seg_path(dir, id, p, sizeof(p));
	int fd = open(p, O_WRONLY | O_TRUNC);
	int rc = fd >= 0 && write(fd, b, len) == (ssize_t)len ? 0 : -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A crash mid-write: a record whose header landed but not its value blocks is found by the
 * scan and refused at every read (checksum); a cut record is cut off; a version 2 header
 * with a length no writer gives version 2 ends the segment's scan there. */
static void
test_torn(void)
{
	char *dir = kv_tmpdir("olkvs-test");
	struct ol_kvs *s = NULL;
	struct ol_kvs_item it[3];
	void *v[3];
	uint64_t dropped[8];
	unsigned nd;
	for (unsigned i = 0; i < 3; i++) {
		if (posix_memalign(&v[i], A, 256 * KiB) != 0)
			abort();
		fill_pattern(v[i], 256 * KiB, 400 + i);
		mk_rec(&it[i].rec, 70 + i, 256 * KiB, 20 + i);
		it[i].val = v[i];
	}
	ok(ol_kvs_open(dir, 64 * MiB, MiB, NULL, NULL, &s) == 0 &&
	       ol_kvs_append_batch(s, it, 3, dropped, &nd) == 0,
	   "torn: three 256 KiB records");
	ol_kvs_close(s);
	uint64_t id = it[0].loc.seg, len, rs = ol_kvs_rec_size(256 * KiB);
	uint8_t *f = seg_bytes(dir, id, &len);
	uint8_t *orig = malloc(len);
	memcpy(orig, f, len);
	memset(f + it[1].loc.off + A, 0, rs - A); /* record 2: header only */
	ok(len == 3 * rs && rewrite(dir, id, f, len - rs / 2) == 0,
	   "torn: record 2 without its value blocks, record 3 cut in half");
	struct found fd = {0};
	struct ol_kvs_stats st;
	bool good = ol_kvs_open(dir, 64 * MiB, MiB, on_rec, &fd, &s) == 0 && fd.n == 2;
	const void *val = NULL;
	good = good && read_exact(s, &it[0].rec, &fd.loc[0], 400) &&
	       ol_kvs_read(s, &it[1].rec, &fd.loc[1], &val) == -EBADMSG;
	ol_kvs_get_stats(s, &st);
	ok(good && st.corrupt == 1,
	   "torn: recovery keeps 2 records and cuts the third; record 1 reads exact, record 2 is "
	   "refused (-EBADMSG) and counted corrupt");
	ol_kvs_close(s);
	/* a valid header checksum over a version 2 header of a length written as version 1 */
	memcpy(f, orig, len);
	struct ol_kvs_rec bad;
	mk_rec(&bad, 99, 256 * KiB + 100, 1);
	uint8_t *b = calloc(1, ol_kvs_rec_size(bad.len) + A); /* version 2 of it runs longer */
	encode_rec(b, &bad, 2, f); /* a value of the right size; only the header is looked at */
	memcpy(f + it[1].loc.off, b, A);
	memset(&fd, 0, sizeof(fd));
	good = rewrite(dir, id, f, len) == 0 &&
	       ol_kvs_open(dir, 64 * MiB, MiB, on_rec, &fd, &s) == 0 && fd.n == 1 &&
	       read_exact(s, &it[0].rec, &fd.loc[0], 400);
	ok(good, "torn: a version 2 header naming a version 1 length ends the scan (%u kept)",
	   fd.n);
	ol_kvs_close(s);
	free(b);
	free(f);
	free(orig);
	for (unsigned i = 0; i < 3; i++)
		free(v[i]);
	kv_rm_rf(dir);
	free(dir);
}

int
main(void)
{
	test_layout();
	test_old_format();
	test_torn();
	tap_done();
}
