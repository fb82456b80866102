/* rdrive_env.h - the harness of the unit tests of sets over remote drives (test_rdrive.c,
 * test_rostore.c): N real node-plane servers in the test's process on loopback ports, each
 * with its own temp drive (real LMDB, real shard files), the set's config and drive specs,
 * and helpers to write and byte-check objects through a store opened over them. Include it
 * once, after tap.h (its helpers are static inline: a test uses the ones it needs). */
#ifndef OL_TEST_RDRIVE_ENV_H
#define OL_TEST_RDRIVE_ENV_H

#include "base/config.h"
#include "base/log.h"
#include "io/io.h"
#include "node/node.h"
#include "store/store.h"

#include <ftw.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRET "rdrive-test-secret"
#define N      4
#define BIG    (5u * 1024 * 1024 + 123) /* > 4 MiB: several stripes of 3 x 1 MiB */

static char root[256], dirs[N][300], addrs[N][64];
static struct ol_node_server *srv[N];
static struct ol_config cfg;
static struct ol_store_drive_spec specs[N];

static inline unsigned
free_port(void)
{
	int fd = ol_io_listen("127.0.0.1:0", false, 1);
	unsigned p = ol_io_sock_port(fd);

	close(fd);
	return p;
}

static inline int
srv_start(int i)
{
	const char *drives[1] = {dirs[i]};
	struct ol_node_server_opts o = {.addr = addrs[i],
					.secret = SECRET,
					.self_id = (unsigned)i + 1,
					.threads = 1,
					/* node 2: frames of 256 KiB and a window of one, so a
					 * block goes out in five frames and the pipeline waits
					 * for credit between them */
					.window = i == 1 ? (256u << 10) + 128 : 8u << 20,
					.max_payload = i == 1 ? 256u << 10 : 1u << 20,
					.n_drives = 1,
					.drives = drives};

	return ol_node_server_start(&o, &srv[i]);
}

static inline void
srv_stop(int i)
{
	ol_node_server_stop(srv[i]);
	srv[i] = NULL;
}

static inline int
put(struct ol_store *st, const char *b, const char *k, const uint8_t *data, size_t n, int vmode,
    char *vid)
{
	struct ol_put *p;
	struct ol_obj_info info;
	int rc = ol_store_put_begin(st, b, k, strlen(k), (int64_t)n, &p);

	if (rc)
		return rc;
	if (vmode)
		ol_store_put_set_vmode(p, vmode);
	for (size_t off = 0; off < n && !rc; off += 65536)
		rc = ol_store_put_write(p, data + off, n - off < 65536 ? n - off : 65536);
	if (rc) {
		ol_store_put_abort(p);
		return rc;
	}
	rc = ol_store_put_commit(p, "etag", NULL, 0, &info);
	if (!rc && vid)
		memcpy(vid, info.version_id, sizeof(info.version_id));
	return rc;
}

/* 1: the object reads back exactly data; 0 otherwise. */
static inline int
same(struct ol_store *st, const char *b, const char *k, const char *vid, const uint8_t *data,
     size_t n)
{
	struct ol_get *g;
	struct ol_obj_info info;
	uint8_t *buf = malloc(n + 1);
	ssize_t got = 0, r = 1;
	int rc = ol_store_get_open_ver(st, b, k, strlen(k), vid, &g, &info);

	if (rc) {
		printf("# get_open %s/%s: %d\n", b, k, rc);
		free(buf);
		return 0;
	}
	while ((size_t)got <= n &&
	       (r = ol_store_get_read(g, (uint64_t)got, buf + got, n + 1 - (size_t)got)) > 0)
		got += r;
	ol_store_get_close(g);
	rc = r >= 0 && (size_t)got == n && info.size == n && !memcmp(buf, data, n);
	if (!rc)
		printf("# %s/%s: read %zd of %zu (last %zd)\n", b, k, got, n, r);
	free(buf);
	return rc;
}

/* Wait up to 30 s for the store to have want drives online. */
static inline int
wait_online(struct ol_store *st, int want)
{
	for (time_t end = time(NULL) + 30; time(NULL) < end; usleep(20000))
		if (ol_store_drives_online(st) == want)
			return 1;
	return 0;
}

static inline int
open_set(uint64_t epoch, struct ol_store **out)
{
	struct ol_store_set_opts o = {.n = N,
				      .drives = specs,
				      .secret = SECRET,
				      .self_id = 100,
				      .epoch = epoch,
				      .deadline_ms = 5000};

	return ol_store_open_set(&cfg, &o, out);
}

static inline int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

/* The temp root (under $TMPDIR, named after the test), the config (N=4 P=1, fsync, 128 KiB
 * inline, 1 MiB blocks) and N servers started (one TAP line each). 0, or -1 without a temp
 * dir (skip). */
static inline int
env_start(const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/ol-%s-XXXXXX", tmp ? tmp : "/tmp", name);
	if (!mkdtemp(root))
		return -1;
	ol_config_default(&cfg);
	cfg.set_drive_count = N;
	cfg.default_parity_count = 1;
	cfg.fsync = true;
	cfg.inline_threshold = 128 * 1024;
	cfg.block_size = 1 << 20;
	for (int i = 0; i < N; i++) {
		int rc;

		snprintf(dirs[i], sizeof(dirs[i]), "%s/node%d", root, i);
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", free_port());
		specs[i] = (struct ol_store_drive_spec){addrs[i], 0, (unsigned)i + 1};
		rc = srv_start(i);
		ok(rc == 0, "node %d serves %s on %s (%d)", i + 1, dirs[i], addrs[i], rc);
	}
	return 0;
}

/* An ol_store_on_drive_return callback: counts the returns in `returned`. */
static _Atomic int returned;

static void
on_return(void *arg, const char *drive)
{
	(void)arg;
	(void)drive;
	atomic_fetch_add(&returned, 1);
}

/* Every server still running stopped, the temp root removed. */
static inline void
env_stop(void)
{
	for (int i = 0; i < N; i++)
		if (srv[i])
			srv_stop(i);
	nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
