/* node/fault.c - the test-only fault hook of the node plane's client (node.h,
 * ol_node_fault_hold). Library grade: no logging; any failure to read the rules means "no
 * fault". */
#include "node/node.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAULT_POLL_MS 20
#define FAULT_MAX_MS  600000 /* a rule holds a frame 10 minutes at most */

static const char *const op_names[OL_NODE_OP_MAX + 1] = {
    [OL_NODE_HELLO] = "HELLO",
    [OL_NODE_PING] = "PING",
    [OL_NODE_CREDIT] = "CREDIT",
    [OL_NODE_STAT] = "STAT",
    [OL_NODE_SHARD_WRITE] = "SHARD_WRITE",
    [OL_NODE_SHARD_READ] = "SHARD_READ",
    [OL_NODE_SHARD_RENAME] = "SHARD_RENAME",
    [OL_NODE_SHARD_UNLINK] = "SHARD_UNLINK",
    [OL_NODE_SHARD_PWRITE] = "SHARD_PWRITE",
    [OL_NODE_SHARD_FSYNC] = "SHARD_FSYNC",
    [OL_NODE_META_GET] = "META_GET",
    [OL_NODE_META_SCAN] = "META_SCAN",
    [OL_NODE_META_COMMIT] = "META_COMMIT",
    [OL_NODE_SHARD_LIST] = "SHARD_LIST",
    [OL_NODE_DRIVE_ID] = "DRIVE_ID",
    [OL_NODE_COMMIT] = "COMMIT",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char rules_path[512]; /* "" = the hook is off */

static void
fault_init(void)
{
	const char *on = getenv("OPENLAKE_FAULTS");
	const char *p = getenv("OPENLAKE_FAULT_FILE");

	if (on && strcmp(on, "1") == 0 && p && p[0] && strlen(p) < sizeof(rules_path) - 8)
		memcpy(rules_path, p, strlen(p) + 1);
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ol_node_fault_rule_ms for a rule named name: an op's name (star: `*` matches it too), or a
 * hold point's (only its own name: `*` stands for every op, not every point) */
static int64_t
rule_in(const char *rules, const char *kind, const char *name, bool star, const char *peer)
{
	int64_t ms = 0;
	size_t kl = strlen(kind);

	for (const char *line = rules; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char buf[384], rname[32], addr[272] = "*";
		long long v;
		int n;

		if (len < sizeof(buf) && len > kl && strncmp(line, kind, kl) == 0 &&
		    line[kl] == ' ') {
			memcpy(buf, line, len);
			buf[len] = 0;
			n = sscanf(buf + kl, " %31s %lld %271s", rname, &v, addr);
			if (n >= 2 && v > 0 && (n == 3 || !peer) &&
			    ((star && strcmp(rname, "*") == 0) || strcmp(rname, name) == 0) &&
			    (strcmp(addr, "*") == 0 || (peer && strcmp(addr, peer) == 0)))
				ms = v > FAULT_MAX_MS ? FAULT_MAX_MS : v;
		}
		line = eol ? eol + 1 : NULL;
	}
	return ms;
}

int64_t
ol_node_fault_rule_ms(const char *rules, const char *kind, uint8_t op, const char *peer)
{
	if (op > OL_NODE_OP_MAX || !op_names[op])
		return 0;
	return rule_in(rules, kind, op_names[op], true, peer);
}

/* The ms the rules file sets now for name (and peer, for kind "delay"): 0 when none, or the
 * file is unreadable. */
static int64_t
rule_ms(const char *kind, const char *name, bool star, const char *peer)
{
	char buf[4096];
	int fd = open(rules_path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return rule_in(buf, kind, name, star, peer);
}

/* One line to <rules>.hits, so a test can wait until a frame is being held. */
static void
note(const char *what, const char *name)
{
	char path[sizeof(rules_path) + 8], line[64];
	int fd, len;

	snprintf(path, sizeof(path), "%s.hits", rules_path);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	len = snprintf(line, sizeof(line), "%s %.40s\n", what, name);
	if (write(fd, line, (size_t)len) < 0)
		len = -1; /* a test waiting for the line times out and says so */
	close(fd);
}

/* Hold while a `hold NAME ms` line (or, with star, `hold * ms`) is in the file, ms at most. */
static void
hold(const char *name, bool star)
{
	int64_t ms, end;

	ms = rule_ms("hold", name, star, NULL);
	if (!ms)
		return;
	note("held", name);
	end = now_ms() + ms;
	while (now_ms() < end && rule_ms("hold", name, star, NULL)) {
		struct timespec ts = {0, FAULT_POLL_MS * 1000000L};

		nanosleep(&ts, NULL);
	}
	note("released", name);
}

void
ol_node_fault_hold(uint8_t op)
{
	pthread_once(&once, fault_init);
	if (!rules_path[0] || op > OL_NODE_OP_MAX || !op_names[op])
		return;
	hold(op_names[op], true);
}

void
ol_node_fault_hold_at(const char *point)
{
	pthread_once(&once, fault_init);
	if (rules_path[0] && point && point[0])
		hold(point, false);
}

int64_t
ol_node_fault_delay(const char *peer, uint8_t op)
{
	pthread_once(&once, fault_init);
	if (!rules_path[0] || op > OL_NODE_OP_MAX || !op_names[op])
		return 0;
	return rule_ms("delay", op_names[op], true, peer);
}
