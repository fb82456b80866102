/* tests/unit/node_pat.h - the node plane tests' patterned payloads: a source that makes
 * len bytes of a position-dependent pattern (optionally failing part-way) and a sink that
 * counts the bytes that differ from it. */
#ifndef OL_TEST_NODE_PAT_H
#define OL_TEST_NODE_PAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif
