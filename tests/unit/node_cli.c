/* node_cli - a command-line driver of the node plane client (src/node/client.c) for the
 * integration tests: node_cli ADDR SECRET SELF_ID DEADLINE_MS CMD [ARGS]
 *   hello | ping | stat DRIVE NAME | put DRIVE NAME FILE | get DRIVE NAME FILE [OFF LEN]
 *   | rename DRIVE FROM TO | rm DRIVE NAME | commit TEXT (a COMMIT call with TEXT as its
 *   payload: prints "reply LEN" and the reply's bytes, also after an error status)
 * Prints the result on stdout; on failure "error: <errno name> (<text>)" on stderr, exit 1. */
#include "io/io.h"
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

static ssize_t
file_src(void *arg, void *buf, size_t cap)
{
	size_t n = fread(buf, 1, cap, arg);
	return ferror((FILE *)arg) ? -EIO : (ssize_t)n;
}

static int
file_sink(void *arg, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, arg) == len ? 0 : -EIO;
}

static unsigned long long
num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || end == s) {
		fprintf(stderr, "node_cli: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static int
run(struct ol_node_client *c, int dl, int argc, char **argv)
{
	const char *cmd = argv[0];
	uint64_t n = 0, rtt = 0;
	int rc;
	if (!strcmp(cmd, "hello")) {
		struct ol_node_peer_info pi;
		rc = ol_node_hello(c, dl, &pi);
		if (!rc) {
			printf("node %u window %u max_payload %u drives %u\n", pi.node_id,
			       pi.window, pi.max_payload, pi.n_drives);
			for (unsigned i = 0; i < pi.n_drives; i++)
				printf("drive %u %s %s\n", i, pi.drives[i].path,
				       pi.drives[i].uuid[0] ? pi.drives[i].uuid : "-");
		}
		return rc;
	}
	if (!strcmp(cmd, "ping")) {
		rc = ol_node_ping(c, dl, &rtt);
		if (!rc)
			printf("rtt_us %.1f\n", (double)rtt / 1000.0);
		return rc;
	}
	if (!strcmp(cmd, "commit") && argc == 2) {
		const uint8_t *rp;
		size_t rl;
		struct iovec iov = {argv[1], strlen(argv[1])};
		rc = ol_node_call(c, OL_NODE_COMMIT, &iov, 1, dl, &rp, &rl);
		if (rp) {
			printf("reply %zu\n", rl);
			fwrite(rp, 1, rl, stdout);
		}
		return rc;
	}
	if (argc < 3)
		return -EINVAL;
	unsigned drive = (unsigned)num(argv[1]);
	if (!strcmp(cmd, "stat")) {
		rc = ol_node_stat(c, drive, argv[2], dl, &n);
		if (!rc)
			printf("size %llu\n", (unsigned long long)n);
		return rc;
	}
	if (!strcmp(cmd, "rm"))
		return ol_node_shard_unlink(c, drive, argv[2], dl);
	if (argc < 4)
		return -EINVAL;
	if (!strcmp(cmd, "rename"))
		return ol_node_shard_rename(c, drive, argv[2], argv[3], dl);
	FILE *f = fopen(argv[3], !strcmp(cmd, "put") ? "rb" : "wb");
	if (!f)
		return -errno;
	if (!strcmp(cmd, "put")) {
		rc = ol_node_shard_write(c, drive, argv[2], file_src, f, dl, &n);
		if (!rc)
			printf("wrote %llu\n", (unsigned long long)n);
	} else if (!strcmp(cmd, "get")) {
		uint64_t off = argc > 5 ? num(argv[4]) : 0,
			 len = argc > 5 ? num(argv[5]) : UINT64_MAX;
		rc = ol_node_shard_read(c, drive, argv[2], off, len, file_sink, f, dl, &n);
		if (!rc)
			printf("read %llu\n", (unsigned long long)n);
	} else {
		rc = -EINVAL;
	}
	if (fclose(f) && !rc)
		rc = -EIO;
	return rc;
}

int
main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: node_cli ADDR SECRET SELF_ID DEADLINE_MS CMD [ARGS]\n");
		return 2;
	}
	struct ol_node_client *c;
	if (ol_node_client_new(argv[1], argv[2], (unsigned)num(argv[3]), &c)) {
		fprintf(stderr, "node_cli: bad address or secret\n");
		return 2;
	}
	uint64_t t0 = ol_io_now_ms();
	int rc = run(c, (int)num(argv[4]), argc - 5, argv + 5);
	ol_node_client_free(c);
	if (rc) {
		fprintf(stderr, "error: %s (%s) after %llu ms\n", strerrorname_np(-rc),
			strerror(-rc), (unsigned long long)(ol_io_now_ms() - t0));
		return 1;
	}
	return 0;
}
