/* tests/unit/node_pat.h - what the node plane tests share over either transport: patterned
 * payloads (a source that makes len bytes of a position-dependent pattern, optionally failing
 * part-way, and a sink that counts the bytes that differ from it) and the shard round trip. */
#ifndef OL_TEST_NODE_PAT_H
#define OL_TEST_NODE_PAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "node/node.h"
#include "tap.h"

struct pat {
	uint64_t pos, len;
	int fail_at; /* fail the source once pos passes this (0 = never) */
};

static inline uint8_t
pat_byte(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

static inline ssize_t
pat_src(void *arg, void *buf, size_t cap)
{
	struct pat *p = arg;
	if (p->fail_at && p->pos >= (uint64_t)p->fail_at)
		return -EIO;
	size_t n = p->len - p->pos < cap ? (size_t)(p->len - p->pos) : cap;
	for (size_t i = 0; i < n; i++)
		((uint8_t *)buf)[i] = pat_byte(p->pos + i);
	p->pos += n;
	return (ssize_t)n;
}

struct chk {
	uint64_t pos;
	int bad;
};

static inline int
chk_sink(void *arg, const void *buf, size_t len)
{
	struct chk *k = arg;
	for (size_t i = 0; i < len; i++)
		k->bad += ((const uint8_t *)buf)[i] != pat_byte(k->pos + i);
	k->pos += len;
	return 0;
}

/* Client c's round trip on drive `drive` (at path dpath) of its server: a 5 MiB shard
 * streamed to a temporary name (a 0600 file under the drive's data dir), STAT, rename, read
 * back whole, ranged and past the end bit-exact, a missing shard, unlink. */
static inline void
node_shard_round_trip(struct ol_node_client *c, uint32_t drive, const char *dpath)
{
	const uint64_t big = 5u * 1024 * 1024 + 12345;
	struct pat p = {0, big, 0};
	uint64_t wrote = 0, size = 0, got = 0;
	int rc = ol_node_shard_write(c, drive, "ab/obj.tmp", pat_src, &p, 60000, &wrote);
	ok(rc == 0 && wrote == big, "5 MiB shard streamed to drive %u (%d, %llu)", drive, rc,
	   (unsigned long long)wrote);
	char path[512];
	snprintf(path, sizeof(path), "%s/.openlake/data/ab/obj.tmp", dpath);
	struct stat st;
	ok(stat(path, &st) == 0 && (uint64_t)st.st_size == big && (st.st_mode & 0777) == 0600,
	   "the file is under the drive's data dir, 0600");
	ok(ol_node_stat(c, drive, "ab/obj.tmp", 10000, &size) == 0 && size == big, "STAT size");
	rc = ol_node_shard_rename(c, drive, "ab/obj.tmp", "ab/obj", 10000);
	ok(rc == 0, "rename (%d)", rc);
	struct chk k = {0, 0};
	rc = ol_node_shard_read(c, drive, "ab/obj", 0, big, chk_sink, &k, 60000, &got);
	ok(rc == 0 && got == big && k.bad == 0, "read back bit-exact (%d, %llu bytes, %d bad)", rc,
	   (unsigned long long)got, k.bad);
	k = (struct chk){1000000, 0};
	rc = ol_node_shard_read(c, drive, "ab/obj", 1000000, 300000, chk_sink, &k, 30000, &got);
	ok(rc == 0 && got == 300000 && k.bad == 0, "ranged read");
	k = (struct chk){big - 10, 0};
	rc = ol_node_shard_read(c, drive, "ab/obj", big - 10, 1000, chk_sink, &k, 30000, &got);
	ok(rc == 0 && got == 10 && k.bad == 0, "a read past the end is short");
	ok(ol_node_shard_read(c, drive, "nope", 0, 10, chk_sink, &k, 10000, &got) == -ENOENT,
	   "read of a missing shard: -ENOENT");
	ok(ol_node_shard_unlink(c, drive, "ab/obj", 10000) == 0 &&
	       ol_node_stat(c, drive, "ab/obj", 10000, &size) == -ENOENT,
	   "unlink");
}

#endif
