/* cmd/openlake/heal_cmd.c - `openlake heal`: start a whole-store heal on a running daemon
 * (POST /openlake/admin/v1/heal on its S3 address; the daemon answers loopback clients only,
 * so run it on the node) and follow it: one progress line a second on stderr, a summary on
 * stdout (or the final progress JSON with --json).
 * Exit status: 0 everything healthy or healed, 1 objects unrecoverable (or the heal failed, was
 * cancelled, or the daemon cannot be reached), 2 bad usage. */
#include "cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAL_REPLY_CAP (64 * 1024)
#define HEAL_PATH      "/openlake/admin/v1/heal"

struct heal_cli {
	char host[256], port[16];
	bool json, no_wait, status_only;
	unsigned long long rate;
};

struct prog {
	char state[32];
	unsigned long long scanned, total, bytes, bytes_total, shards, blocks, records, unrec;
	double elapsed, bps, eta;
};

static int
connect_to(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *p;
	int fd = -ECONNREFUSED;

	if (getaddrinfo(host, port, &hints, &ai))
		return -EHOSTUNREACH;
	for (p = ai; p; p = p->ai_next) {
		fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, p->ai_addr, p->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -ECONNREFUSED;
	}
	freeaddrinfo(ai);
	return fd;
}

/* One request with Connection: close. Returns the HTTP status (body in *body, malloc'd) or
 * -errno when the daemon cannot be reached. */
static int
http_call(const struct heal_cli *c, const char *method, const char *path, char **body)
{
	char req[600], *buf;
	size_t len = 0;
	int fd = connect_to(c->host, c->port), n, status = -EPROTO;

	*body = NULL;
	if (fd < 0)
		return fd;
	n = snprintf(req, sizeof(req),
		     "%s %s HTTP/1.1\r\nHost: %s:%s\r\nAccept: application/json\r\n"
		     "Content-Length: 0\r\nConnection: close\r\n\r\n",
		     method, path, c->host, c->port);
	buf = malloc(HEAL_REPLY_CAP);
	if (!buf || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		free(buf);
		close(fd);
		return -EIO;
	}
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&pfd, 1, 5000) != 1)
			break;
		r = read(fd, buf + len, HEAL_REPLY_CAP - 1 - len);
		if (r <= 0 || (len += (size_t)r) >= HEAL_REPLY_CAP - 1)
			break;
	}
	close(fd);
	buf[len] = 0;
	if (len > 12 && strncmp(buf, "HTTP/1.", 7) == 0) {
		char *b = strstr(buf, "\r\n\r\n");

		status = (int)strtol(buf + 9, NULL, 10);
		*body = b ? strdup(b + 4) : NULL;
	}
	free(buf);
	return status;
}

static int
field(const char *j, const char *key, char *out, size_t cap)
{
	char pat[64];
	const char *p;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = j ? strstr(j, pat) : NULL;
	if (!p)
		return -ENOENT;
	p += strlen(pat);
	if (*p == '"')
		p++;
	while (*p && !strchr("\",}", *p) && n + 1 < cap)
		out[n++] = *p++;
	out[n] = 0;
	return 0;
}

static unsigned long long
num(const char *j, const char *key)
{
	char v[64];

	return field(j, key, v, sizeof(v)) ? 0 : strtoull(v, NULL, 10);
}

static double
dbl(const char *j, const char *key)
{
	char v[64];

	return field(j, key, v, sizeof(v)) ? 0 : strtod(v, NULL);
}

static void
parse(const char *j, struct prog *p)
{
	if (field(j, "state", p->state, sizeof(p->state)))
		snprintf(p->state, sizeof(p->state), "unknown");
	p->scanned = num(j, "objects_scanned");
	p->total = num(j, "objects_total");
	p->bytes = num(j, "bytes_scanned");
	p->bytes_total = num(j, "bytes_total");
	p->shards = num(j, "shards_healed");
	p->blocks = num(j, "blocks_healed");
	p->records = num(j, "records_restored");
	p->unrec = num(j, "unrecoverable");
	p->elapsed = dbl(j, "elapsed_seconds");
	p->bps = dbl(j, "bytes_per_second");
	p->eta = dbl(j, "eta_seconds");
}

static void
progress_line(const struct prog *p)
{
	fprintf(stderr,
		"heal: %s: objects %llu/%llu, %.1f/%.1f MB scanned, %llu shards healed, "
		"%llu records restored, %llu unrecoverable, %.1f MB/s, ETA %.0fs\n",
		p->state, p->scanned, p->total, (double)p->bytes / 1e6,
		(double)p->bytes_total / 1e6, p->shards, p->records, p->unrec, p->bps / 1e6,
		p->eta);
}

static int
exit_code(const struct prog *p)
{
	return p->unrec || strcmp(p->state, "done") ? 1 : 0;
}

static int
summary(const struct heal_cli *c, const char *j, const struct prog *p)
{
	if (c->json) {
		fputs(j, stdout);
	} else {
		printf(
		    "heal %s: %llu of %llu objects scanned (%.1f MB) in %.1fs: %llu shards healed "
		    "(%llu blocks), %llu records restored, %llu unrecoverable\n",
		    p->state, p->scanned, p->total, (double)p->bytes / 1e6, p->elapsed, p->shards,
		    p->blocks, p->records, p->unrec);
		if (p->unrec)
			printf("%llu objects have more than parity-count shards lost: their data "
			       "cannot be rebuilt\n",
			       p->unrec);
	}
	return exit_code(p);
}

/* Poll once a second until the heal is no longer running. */
static int
follow(const struct heal_cli *c)
{
	for (;;) {
		char *j = NULL;
		struct prog p = {0};
		int st = http_call(c, "GET", HEAL_PATH, &j), rc;

		if (st != 200) {
			fprintf(stderr, "openlake heal: progress request failed (%d)\n", st);
			free(j);
			return 1;
		}
		parse(j, &p);
		progress_line(&p);
		if (strcmp(p.state, "running")) {
			rc = summary(c, j, &p);
			free(j);
			return rc;
		}
		free(j);
		sleep(1);
	}
}

static int
start(const struct heal_cli *c)
{
	char path[128], *j = NULL;
	int st;

	if (c->rate)
		snprintf(path, sizeof(path), "%s?rate=%llu", HEAL_PATH, c->rate);
	else
		snprintf(path, sizeof(path), "%s", HEAL_PATH);
	st = http_call(c, "POST", path, &j);
	free(j);
	if (st < 0) {
		fprintf(stderr, "openlake heal: cannot reach the daemon at %s:%s: %s\n", c->host,
			c->port, strerror(-st));
		return 1;
	}
	if (st == 409) {
		fprintf(stderr, "openlake heal: a heal is already running; following it\n");
	} else if (st == 403) {
		fprintf(stderr, "openlake heal: refused (403): heal is served to loopback clients "
				"only; run it on the node\n");
		return 1;
	} else if (st != 202) {
		fprintf(stderr, "openlake heal: the daemon answered %d\n", st);
		return 1;
	}
	if (c->no_wait) {
		fprintf(stderr,
			"openlake heal: started; `openlake heal --status` shows progress\n");
		return 0;
	}
	return follow(c);
}

static int
status_once(const struct heal_cli *c)
{
	char *j = NULL;
	struct prog p = {0};
	int st = http_call(c, "GET", HEAL_PATH, &j), rc;

	if (st != 200) {
		fprintf(stderr, "openlake heal: cannot get the heal status from %s:%s (%d)\n",
			c->host, c->port, st);
		free(j);
		return 1;
	}
	parse(j, &p);
	if (c->json)
		fputs(j, stdout);
	else
		progress_line(&p);
	rc = strcmp(p.state, "running") == 0 || strcmp(p.state, "idle") == 0 ? (p.unrec ? 1 : 0)
									     : exit_code(&p);
	free(j);
	return rc;
}

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake heal [--endpoint http://127.0.0.1:9000] [--json] [--no-wait]\n"
	    "                     [--rate BYTES_PER_SECOND] [--status]\n\n"
	    "Verify every block of every shard (data and parity) of every object and upload part\n"
	    "on every drive, rebuild what is missing or corrupt, restore missing metadata "
	    "records.\n"
	    "Progress goes to stderr once a second; the summary to stdout.\n"
	    "  --status   only show the progress of the running (or last) heal\n"
	    "  --no-wait  start it and return\n"
	    "  --rate N   read at most N bytes/s so that clients are not starved\n\n"
	    "Exit status: 0 healthy or healed, 1 objects unrecoverable (or no daemon, heal\n"
	    "failed or cancelled), 2 bad usage.\n");
}

static int
endpoint(struct heal_cli *c, const char *url)
{
	const char *p = strncmp(url, "http://", 7) == 0 ? url + 7 : url, *colon;
	size_t hl = strcspn(p, "/");
	char hp[300];

	snprintf(hp, sizeof(hp), "%.*s", (int)hl, p);
	colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
	if (strstr(p, "://") || !colon || !colon[hp[0] == '[' ? 2 : 1])
		return -EINVAL;
	snprintf(c->port, sizeof(c->port), "%s", colon + (hp[0] == '[' ? 2 : 1));
	snprintf(c->host, sizeof(c->host), "%.*s", (int)(colon - hp - (hp[0] == '[')),
		 hp + (hp[0] == '['));
	return strspn(c->port, "0123456789") == strlen(c->port) && c->host[0] ? 0 : -EINVAL;
}

int
ol_cmd_heal(int argc, char **argv)
{
	static const struct option opts[] = {{"endpoint", required_argument, NULL, 'e'},
					     {"json", no_argument, NULL, 'j'},
					     {"no-wait", no_argument, NULL, 'n'},
					     {"status", no_argument, NULL, 's'},
					     {"rate", required_argument, NULL, 'r'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct heal_cli c = {.host = "127.0.0.1", .port = "9000"};
	int o;
	char *end;

	optind = 1;
	while ((o = getopt_long(argc, argv, "e:jnsr:h", opts, NULL)) != -1) {
		switch (o) {
		case 'e':
			if (endpoint(&c, optarg)) {
				fprintf(stderr,
					"openlake heal: --endpoint '%s' is not "
					"http://HOST:PORT\n",
					optarg);
				return 2;
			}
			break;
		case 'j':
			c.json = true;
			break;
		case 'n':
			c.no_wait = true;
			break;
		case 's':
			c.status_only = true;
			break;
		case 'r':
			errno = 0;
			c.rate = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end) {
				fprintf(stderr, "openlake heal: --rate wants bytes per second\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "openlake heal: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return c.status_only ? status_once(&c) : start(&c);
}
