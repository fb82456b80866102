/* cmd/openlake/heal_cmd.c - `openlake heal`: start a whole-store heal on a running daemon
 * (POST /openlake/admin/v1/heal on its S3 address, SigV4-signed with an admin key: see
 * admin_client.h) and follow it: one progress line a second on stderr, a summary on stdout (or
 * the final progress JSON with --json, whose "result" is non-zero when it exits 1).
 * Exit status: 0 everything healthy or healed, 1 objects unrecoverable or unreadable with a
 * drive offline (or the heal failed, was cancelled, or the daemon cannot be reached or refused
 * the keys), 2 bad usage.
 *
 * A heal is a job with an id ("job" in the progress document). In a cluster the job outlives
 * the node running it (docs/cluster.md "Heal jobs"): while following, a node that does not
 * answer for a while (503 while the serving node changes, or no connection) is asked again
 * for up to FOLLOW_GRACE_S, and the job is followed by its id to its end on the next node. */
#include "admin_client.h"
#include "cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
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
#define FOLLOW_GRACE_S 120

struct heal_cli {
	char host[256], port[16];
	bool json, no_wait, status_only;
	unsigned long long rate;
	const char *ak, *sk, *region, *config; /* flags; NULL when not given */
	struct ol_cli_admin admin;
};

struct prog {
	char state[32];
	unsigned long long scanned, total, bytes, bytes_total, shards, blocks, records, unrec;
	unsigned long long missed_pending, missed_healed;
	unsigned long long unwritten_gone; /* not written on drives gone by the heal's end */
	unsigned long long unreadable;	   /* not rebuilt while a drive of their set was offline */
	long result; /* 0, or the -errno of the run (-EIO: objects unrecoverable) */
	double elapsed, bps, eta;
	char reason[256]; /* why a job ended failed or cancelled where no node ran it ("" none) */
};

/* One signed request. Returns the HTTP status (body in *body, malloc'd) or -errno when the
 * daemon cannot be reached. A refusal (400/403) is explained on stderr here. */
static int
http_call(struct heal_cli *c, const char *method, const char *path, char **body)
{
	const char *q = strchr(path, '?');
	char p[128];
	snprintf(p, sizeof(p), "%.*s", (int)(q ? q - path : (long)strlen(path)), path);
	int st = ol_cli_admin_call(&c->admin, method, p, q ? q + 1 : "", HEAL_REPLY_CAP, body);
	if (st == 400 || st == 403)
		ol_cli_admin_refused(&c->admin, "heal", st, *body);
	return st;
}

/* Say why a call (what: "start a heal", ...) did not get its answer: no errno numbers, the
 * cause and the fix. A refusal (400/403) was explained by http_call already. */
static void
call_failed(const struct heal_cli *c, const char *what, int st)
{
	if (st == 400 || st == 403)
		return;
	if (st < 0)
		fprintf(
		    stderr,
		    "openlake heal: cannot %s: no daemon answers at %s://%s:%s (%s). Is "
		    "openlaked running? Start it, or name it with --endpoint http(s)://HOST:PORT "
		    "or --config FILE%s\n",
		    what, ol_cli_admin_scheme(&c->admin), c->host, c->port, strerror(-st),
		    st == -EKEYREJECTED ? " (its TLS certificate does not verify: set "
					  "AWS_CA_BUNDLE to the CA that signed it)"
					: "");
	else if (st == 503)
		fprintf(stderr,
			"openlake heal: cannot %s: the daemon at %s:%s runs no object store (a KV "
			"pool, mode = \"kv\"): there is nothing to heal\n",
			what, c->host, c->port);
	else
		fprintf(stderr, "openlake heal: cannot %s: the daemon at %s:%s answered HTTP %d\n",
			what, c->host, c->port, st);
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
	char v[32];

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
	p->missed_pending = num(j, "missed_pending");
	p->missed_healed = num(j, "missed_healed");
	p->unwritten_gone = num(j, "unwritten_gone");
	p->unreadable = num(j, "unreadable_offline");
	p->result = strtol(field(j, "result", v, sizeof(v)) ? "0" : v, NULL, 10);
	p->elapsed = dbl(j, "elapsed_seconds");
	p->bps = dbl(j, "bytes_per_second");
	p->eta = dbl(j, "eta_seconds");
	/* a sentence (commas, quotes): read as JSON, not by field() */
	json_t *d = json_loads(j, 0, NULL), *r = json_object_get(d, "reason");
	snprintf(p->reason, sizeof(p->reason), "%s", json_is_string(r) ? json_string_value(r) : "");
	json_decref(d);
}

static void
progress_line(const struct prog *p)
{
	fprintf(stderr,
		"heal: %s: objects %llu/%llu, %.1f/%.1f MB scanned, %llu shards healed, "
		"%llu records restored, %llu unrecoverable, %llu unreadable with drives offline, "
		"%.1f MB/s, ETA %.0fs; missed writes: %llu healed, %llu pending\n",
		p->state, p->scanned, p->total, (double)p->bytes / 1e6,
		(double)p->bytes_total / 1e6, p->shards, p->records, p->unrec, p->unreadable,
		p->bps / 1e6, p->eta, p->missed_healed, p->missed_pending);
	if (p->reason[0])
		fprintf(stderr, "heal: %s: %s\n", p->state, p->reason);
}

static int
exit_code(const struct prog *p)
{
	return p->unrec || p->unreadable || p->result || strcmp(p->state, "done") ? 1 : 0;
}

static int
summary(struct heal_cli *c, const char *j, const struct prog *p)
{
	if (c->json) {
		fputs(j, stdout);
	} else {
		printf(
		    "heal %s: %llu of %llu objects scanned (%.1f MB) in %.1fs: %llu shards healed "
		    "(%llu blocks), %llu records restored, %llu unrecoverable, %llu unreadable "
		    "with drives offline\n",
		    p->state, p->scanned, p->total, (double)p->bytes / 1e6, p->elapsed, p->shards,
		    p->blocks, p->records, p->unrec, p->unreadable);
		printf("missed writes: %llu healed, %llu pending (a drive still offline keeps "
		       "its records for the next heal)\n",
		       p->missed_healed, p->missed_pending);
		if (p->reason[0])
			printf("heal %s: %s\n", p->state, p->reason);
		if (p->unwritten_gone)
			printf(
			    "%llu shard files or blocks were not written on drives that went "
			    "offline or unreachable during the heal (a node down: the daemon's log "
			    "names them); the heal that starts at their return writes them\n",
			    p->unwritten_gone);
		if (p->unrec)
			printf("%llu objects have more than parity-count shards lost with every "
			       "drive of their erasure set online: their data cannot be rebuilt\n",
			       p->unrec);
		if (p->unreadable)
			printf("%llu objects could not be rebuilt from the drives online now; a "
			       "drive of their erasure set is offline (a node down or restarting: "
			       "openlake node info, the console) and may hold what they lack: run "
			       "the heal again once it is back\n",
			       p->unreadable);
		if (!p->unrec && !p->unreadable && p->result == -EAGAIN)
			printf("some shards could not be written on a drive that is still online "
			       "(the daemon's log names it): the store is not whole; fix the drive "
			       "and run the heal again\n");
	}
	return exit_code(p);
}

/* An answer worth waiting out while following: no connection, or 502/503/504 (in a cluster the
 * node that serves may be changing) */
static bool
transient(int st)
{
	return st < 0 || st == 502 || st == 503 || st == 504;
}

/* Progress document j shows job id, not the followed job want. A node that has just taken the
 * store over heals the missed writes it holds first (a job of its own, missed_only), then
 * resumes the job left running: true while that pass is to be waited out, up to
 * FOLLOW_GRACE_S from *since (0: the first such answer, said once on stderr). */
static bool
wait_missed_pass(const char *j, const char *id, const char *want, time_t *since)
{
	char mo[8] = "";

	(void)field(j, "missed_only", mo, sizeof(mo));
	if (strcmp(mo, "true") || (*since && time(NULL) - *since >= FOLLOW_GRACE_S))
		return false;
	if (!*since) {
		fprintf(
		    stderr,
		    "openlake heal: the daemon runs a heal of missed writes only (job %s: a node "
		    "that has just taken over does that first); waiting up to %d s for heal job "
		    "%s to be resumed after it\n",
		    id, FOLLOW_GRACE_S, want);
		*since = time(NULL);
	}
	return true;
}

/* Poll once a second until the heal job (id job, "" = the one running now) is no longer
 * running; then the summary and the exit status when final, else 0 (1: the daemon could not
 * be asked, or the job was lost). */
static int
follow(struct heal_cli *c, bool final, const char *job)
{
	char want[40];
	time_t failing = 0, other = 0;

	snprintf(want, sizeof(want), "%s", job ? job : "");
	for (;;) {
		char *j = NULL, id[40] = "";
		struct prog p = {0};
		int st = http_call(c, "GET", HEAL_PATH, &j), rc;

		if (st != 200 && transient(st) &&
		    (!failing || time(NULL) - failing < FOLLOW_GRACE_S)) {
			char why[64];

			snprintf(why, sizeof(why), "%s", st < 0 ? strerror(-st) : "HTTP ");
			if (st > 0)
				snprintf(why, sizeof(why), "HTTP %d", st);
			if (!failing)
				fprintf(
				    stderr,
				    "openlake heal: the daemon at %s:%s does not answer now (%s): "
				    "asking again for up to %d s (in a cluster the node serving "
				    "the store may be changing)\n",
				    c->host, c->port, why, FOLLOW_GRACE_S);
			failing = failing ? failing : time(NULL);
			free(j);
			sleep(1);
			continue;
		}
		if (st != 200) {
			call_failed(c, "follow the heal's progress", st);
			free(j);
			return 1;
		}
		failing = 0;
		parse(j, &p);
		(void)field(j, "job", id, sizeof(id));
		if (!want[0])
			snprintf(want, sizeof(want), "%s", id);
		if (id[0] && strcmp(id, want)) {
			if (final && wait_missed_pass(j, id, want, &other)) {
				free(j);
				sleep(1);
				continue;
			}
			/* another job is the cluster's now: the one followed ended unseen */
			if (final)
				fprintf(
				    stderr,
				    "openlake heal: heal job %s is not known any more (the "
				    "daemon's last job is %s): its outcome was lost; run `openlake "
				    "heal` again\n",
				    want, id);
			free(j);
			return final ? 1 : 0;
		}
		progress_line(&p);
		if (strcmp(p.state, "running")) {
			rc = final ? summary(c, j, &p) : 0;
			free(j);
			return rc;
		}
		free(j);
		sleep(1);
	}
}

static int
start(struct heal_cli *c)
{
	char path[128], *j = NULL, job[40] = "";
	int st;

	if (c->rate)
		snprintf(path, sizeof(path), "%s?rate=%llu", HEAL_PATH, c->rate);
	else
		snprintf(path, sizeof(path), "%s", HEAL_PATH);
	st = http_call(c, "POST", path, &j);
	/* a cluster node between two servings (a leader change) says so: ask again a while */
	bool busy = false;
	for (time_t t0 = time(NULL); st == 503 && j && strstr(j, "\"retry\":true");) {
		if (time(NULL) - t0 >= FOLLOW_GRACE_S) {
			fprintf(stderr,
				"openlake heal: cannot start a heal: the daemon at %s:%s served no "
				"object store for %d s (its cluster has no serving node: `openlake "
				"cluster status` shows why)\n",
				c->host, c->port, FOLLOW_GRACE_S);
			free(j);
			return 1;
		}
		if (!busy)
			fprintf(
			    stderr,
			    "openlake heal: the daemon serves no object store right now (its "
			    "cluster's serving node is changing); asking again for up to %d s\n",
			    FOLLOW_GRACE_S);
		busy = true;
		free(j);
		j = NULL;
		sleep(1);
		st = http_call(c, "POST", path, &j);
	}
	if (st == 202)
		(void)field(j, "job", job, sizeof(job));
	free(j);
	/* A heal already running (one started by a drive's return, say) may have passed a drive
	 * before it came back: its "done" would not mean the store is whole now. Wait for it,
	 * then run one that starts after this call. */
	for (int i = 0; st == 409 && !c->no_wait && i < 5; i++) {
		fprintf(stderr, "openlake heal: a heal is already running; waiting for it to end, "
				"then starting a new one\n");
		if (follow(c, false, NULL))
			return 1;
		st = http_call(c, "POST", path, &j);
		if (st == 202)
			(void)field(j, "job", job, sizeof(job));
		free(j);
	}
	if (st == 409) {
		fprintf(stderr, "openlake heal: a heal is already running; following it\n");
	} else if (st != 202) {
		call_failed(c, "start a heal", st);
		return 1;
	}
	if (c->no_wait) {
		fprintf(stderr,
			"openlake heal: started; `openlake heal --status` shows progress\n");
		return 0;
	}
	return follow(c, true, job);
}

static int
status_once(struct heal_cli *c)
{
	char *j = NULL;
	struct prog p = {0};
	int st = http_call(c, "GET", HEAL_PATH, &j), rc;

	if (st != 200) {
		call_failed(c, "get the heal status", st);
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
	    "Usage: openlake heal [--endpoint http(s)://127.0.0.1:9000] [--json] [--no-wait]\n"
	    "                     [--rate BYTES_PER_SECOND] [--status] [--config FILE]\n"
	    "                     [--access-key KEY --secret-key KEY] [--region NAME]\n\n"
	    "Heal first the writes recorded as missed by a drive (missed writes), then verify\n"
	    "every block of every shard (data and parity) of every object and upload part on\n"
	    "every drive, rebuild what is missing or corrupt, restore missing metadata records.\n"
	    "Progress goes to stderr once a second; the summary to stdout. A heal already\n"
	    "running is waited for, then a new one runs. In a cluster the heal is a job that\n"
	    "the next leader resumes where it stood when the node running it stops: the\n"
	    "progress follows it there (a node that does not answer is asked again for up\n"
	    "to 120 s).\n"
	    "  --status   only show the progress of the running (or last) heal\n"
	    "  --no-wait  start it and return\n"
	    "  --rate N   read at most N bytes/s so that clients are not starved\n"
	    "  --json     print the final progress document (\"result\" != 0 when exit is 1)\n"
	    "  --config FILE  the daemon's config: its s3_addr and first admin key (HTTPS when\n"
	    "                 it has [s3_tls]; AWS_CA_BUNDLE names the CA to trust, else its\n"
	    "                 own cert_path)\n"
	    "The admin API needs a SigV4 signature by an admin user:\n" OL_CLI_ADMIN_KEY_HELP
	    "\nExit status: 0 healthy or healed, 1 objects unrecoverable or unreadable with a\n"
	    "drive offline (or no daemon, keys refused, heal failed or cancelled), 2 bad usage.\n");
}

static int
endpoint(struct heal_cli *c, const char *url)
{
	int rc = ol_cli_admin_endpoint(&c->admin, url);
	if (!rc) {
		snprintf(c->host, sizeof(c->host), "%s", c->admin.host);
		snprintf(c->port, sizeof(c->port), "%s", c->admin.port);
	}
	return rc;
}

/* Keys (and, without --endpoint, the address) from the flags, environment or --config. */
static int
heal_keys(struct heal_cli *c, bool endpoint_given)
{
	struct ol_config *cfg = NULL;
	char err[512];
	int rc = 0;

	if (c->config) {
		cfg = calloc(1, sizeof(*cfg));
		if (!cfg)
			return 1;
		ol_config_default(cfg);
		if (ol_config_load_file(cfg, c->config, err, sizeof(err))) {
			fprintf(stderr, "openlake heal: --config %s: %s\n", c->config, err);
			rc = 2;
			goto out;
		}
		if (strcmp(cfg->mode, "kv") == 0) {
			fprintf(stderr,
				"openlake heal: %s is a KV pool (mode = \"kv\"): it runs no object "
				"store, so there is nothing to heal\n",
				c->config);
			rc = 1;
			goto out;
		}
		if (!endpoint_given && endpoint(c, cfg->s3_addr)) {
			fprintf(stderr, "openlake heal: s3_addr '%s' of %s is not HOST:PORT\n",
				cfg->s3_addr, c->config);
			rc = 2;
			goto out;
		}
	}
	bool tls = c->admin.tls;
	if (ol_cli_admin_tls(&c->admin, cfg) && !endpoint_given)
		tls = true; /* [s3_tls]: the S3 port speaks only HTTPS */
	c->admin.tls = tls;
	if (ol_cli_admin_keys(&c->admin, "heal", c->ak, c->sk, c->region, cfg, c->config)) {
		rc = 2;
		goto out;
	}
	snprintf(c->admin.host, sizeof(c->admin.host), "%s", c->host);
	snprintf(c->admin.port, sizeof(c->admin.port), "%s", c->port);
out:
	free(cfg);
	return rc;
}

int
ol_cmd_heal(int argc, char **argv)
{
	static const struct option opts[] = {{"endpoint", required_argument, NULL, 'e'},
					     {"json", no_argument, NULL, 'j'},
					     {"no-wait", no_argument, NULL, 'n'},
					     {"status", no_argument, NULL, 's'},
					     {"rate", required_argument, NULL, 'r'},
					     {"config", required_argument, NULL, 'c'},
					     {"access-key", required_argument, NULL, 'A'},
					     {"secret-key", required_argument, NULL, 'S'},
					     {"region", required_argument, NULL, 'R'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct heal_cli c = {.host = "127.0.0.1", .port = "9000"};
	bool endpoint_given = false;
	int o, rc;
	char *end;

	optind = 1;
	while ((o = getopt_long(argc, argv, "e:jnsr:c:h", opts, NULL)) != -1) {
		switch (o) {
		case 'e':
			if (endpoint(&c, optarg)) {
				fprintf(stderr,
					"openlake heal: --endpoint '%s' is not "
					"http://HOST:PORT\n",
					optarg);
				return 2;
			}
			endpoint_given = true;
			break;
		case 'c':
			c.config = optarg;
			break;
		case 'A':
			c.ak = optarg;
			break;
		case 'S':
			c.sk = optarg;
			break;
		case 'R':
			c.region = optarg;
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
	rc = heal_keys(&c, endpoint_given);
	if (rc)
		return rc;
	return c.status_only ? status_once(&c) : start(&c);
}
