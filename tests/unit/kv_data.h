/* tests/unit/kv_data.h - deterministic block contents and keys for the kv and client tests. */
#ifndef OL_TEST_KV_DATA_H
#define OL_TEST_KV_DATA_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

/* Deterministic content: value bytes are a function of (seed, i). */
static inline void
fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)(seed + i);
}

static inline int
check_pattern(const uint8_t *p, size_t len, uint64_t seed)
{
	uint8_t *q = malloc(len ? len : 1);
	fill_pattern(q, len, seed);
	int r = memcmp(p, q, len) == 0;
	free(q);
	return r;
}

static inline void
make_key(uint8_t key[32], uint64_t id)
{
	memset(key, 0, 32);
	memcpy(key, &id, 8);
	key[31] = 0x5a;
}

/* A fresh directory under /tmp named after prefix (malloc'd; NULL on failure), and its removal
 * with the files in it (the tests make no subdirectories). */
static inline char *
kv_tmpdir(const char *prefix)
{
	char tpl[128];
	snprintf(tpl, sizeof(tpl), "/tmp/%s-XXXXXX", prefix);
	char *d = mkdtemp(tpl);
	return d ? strdup(d) : NULL;
}

static inline void
kv_rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[600];
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

#endif
