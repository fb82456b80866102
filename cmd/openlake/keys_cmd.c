/* cmd/openlake/keys_cmd.c - `openlake keys add|list|rm`: S3 keys added to a running daemon at
 * run time (the admin API's /openlake/admin/v1/keys, SigV4-signed with an admin key: see
 * admin_client.h). A new key's secret is printed once, by `add`; nothing lists it later.
 * Exit status: 0 done, 1 refused or failed (the daemon's reason is printed), 2 bad usage. */
#include "admin_client.h"
#include "cmds.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEYS_PATH      "/openlake/admin/v1/keys"
#define KEYS_REPLY_CAP (4 << 20)

struct keys_cli {
	const char *verb;
	bool json, secret_stdin;
	const char *new_key;		       /* --key */
	const char *ak, *sk, *region, *config; /* admin keys, flags; NULL when not given */
	struct ol_cli_admin admin;
};

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake keys add USER [--key ACCESS_KEY --secret-stdin] [--json]\n"
	    "       openlake keys list [--json]\n"
	    "       openlake keys rm ACCESS_KEY [--json]\n"
	    "  common: [--endpoint http(s)://127.0.0.1:9000] [--config FILE]\n"
	    "          [--access-key KEY --secret-key KEY] [--region NAME]\n\n"
	    "S3 keys added to a running daemon without a restart. They are kept in its object\n"
	    "store (the secret wrapped with a key derived from the admin's secret) and work at\n"
	    "once; `rm` stops a key at once. Keys of the config's [[credentials]] are listed but\n"
	    "cannot be removed here (edit the config and restart).\n"
	    "  add USER        create a key for USER (not \"admin\"); the pair is generated and\n"
	    "                  printed once: store the secret, nothing shows it again\n"
	    "  --key AK        give the access key yourself; the secret is then read from\n"
	    "  --secret-stdin  standard input (one line), never from the command line\n"
	    "  list            access keys, users and where each comes from (never secrets)\n"
	    "  rm ACCESS_KEY   remove a run-time key\n"
	    "  --json          print the daemon's JSON answer\n"
	    "  --endpoint URL  the daemon's S3 address (default 127.0.0.1:9000, or --config's:\n"
	    "                  https when it has [s3_tls]; AWS_CA_BUNDLE names the CA to trust)\n"
	    "  --config FILE   the daemon's config: its s3_addr and first admin key\n"
	    "The admin API needs a SigV4 signature by an admin user:\n" OL_CLI_ADMIN_KEY_HELP
	    "\nExit status: 0 done, 1 refused or failed, 2 bad usage.\n");
}

/* Admin keys and, without --endpoint, the address from --config. 0, or an exit code. */
static int
setup(struct keys_cli *c, const char *url)
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
			fprintf(stderr, "openlake keys: --config %s: %s\n", c->config, err);
			rc = 2;
			goto out;
		}
	}
	if (ol_cli_admin_endpoint(&c->admin, url ? url : cfg ? cfg->s3_addr : "127.0.0.1:9000")) {
		fprintf(stderr, "openlake keys: %s '%s' is not http(s)://HOST:PORT\n",
			url ? "--endpoint" : "s3_addr", url ? url : cfg->s3_addr);
		rc = 2;
		goto out;
	}
	if (ol_cli_admin_tls(&c->admin, cfg) && !url)
		c->admin.tls = true; /* [s3_tls]: the S3 port speaks only HTTPS */
	if (ol_cli_admin_keys(&c->admin, "keys", c->ak, c->sk, c->region, cfg, c->config))
		rc = 2;
out:
	free(cfg);
	return rc;
}

/* The reply's "error" text (JSON), else the raw body. */
static void
print_error(const struct keys_cli *c, int st, const char *body)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "error"));
	if (st < 0)
		fprintf(stderr,
			"openlake keys %s: no daemon answers at %s://%s:%s (%s). Is openlaked "
			"running? Name it with --endpoint http(s)://HOST:PORT or --config FILE%s\n",
			c->verb, ol_cli_admin_scheme(&c->admin), c->admin.host, c->admin.port,
			strerror(-st),
			st == -EKEYREJECTED ? " (its TLS certificate does not verify: set "
					      "AWS_CA_BUNDLE to the CA that signed it)"
					    : "");
	else if (st == 403 || (st == 400 && !j))
		ol_cli_admin_refused(&c->admin, "keys", st, body);
	else
		fprintf(stderr, "openlake keys %s: the daemon answered HTTP %d: %s\n", c->verb, st,
			msg    ? msg
			: body ? body
			       : "(no body)");
	json_decref(j);
}

static int
call(struct keys_cli *c, const char *method, const char *path, const char *send, int want,
     json_t **out)
{
	char *body = NULL;
	int st = ol_cli_admin_call_body(&c->admin, method, path, "", send, send ? strlen(send) : 0,
					KEYS_REPLY_CAP, &body);
	*out = NULL;
	if (st != want) {
		print_error(c, st, body);
		free(body);
		return 1;
	}
	*out = body ? json_loads(body, 0, NULL) : NULL;
	if (!*out)
		fprintf(stderr, "openlake keys %s: the daemon's answer is not JSON\n", c->verb);
	else if (c->json)
		printf("%s", body);
	free(body);
	return *out ? 0 : 1;
}

/* One line of standard input, without its newline, into out. 0 or -EINVAL. */
static int
read_secret(char *out, size_t cap)
{
	if (!fgets(out, (int)cap, stdin))
		return -EINVAL;
	out[strcspn(out, "\r\n")] = '\0';
	return out[0] ? 0 : -EINVAL;
}

static int
keys_add(struct keys_cli *c, const char *user)
{
	char secret[OL_CFG_STR];
	json_t *req, *res = NULL;
	int rc;

	if (!c->new_key != !c->secret_stdin) {
		fprintf(stderr, "openlake keys add: give --key ACCESS_KEY and --secret-stdin "
				"together (or neither, to have the pair generated)\n");
		return 2;
	}
	req = json_pack("{s:s}", "user", user);
	if (c->new_key) {
		if (read_secret(secret, sizeof(secret))) {
			fprintf(stderr, "openlake keys add: --secret-stdin: no secret on standard "
					"input (one line)\n");
			json_decref(req);
			return 2;
		}
		json_object_set_new(req, "access_key", json_string(c->new_key));
		json_object_set_new(req, "secret_key", json_string(secret));
		memset(secret, 0, sizeof(secret));
	}
	char *send = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	rc = send ? call(c, "POST", KEYS_PATH, send, 201, &res) : 1;
	free(send);
	if (!rc && !c->json && c->secret_stdin) /* the caller has it: kept off the terminal */
		printf("created an S3 key for user %s\n"
		       "  access key: %s\n"
		       "  secret key: the one read from standard input (not printed)\n",
		       json_string_value(json_object_get(res, "user")),
		       json_string_value(json_object_get(res, "access_key")));
	else if (!rc && !c->json)
		printf("created an S3 key for user %s\n"
		       "  access key: %s\n"
		       "  secret key: %s\n"
		       "The secret is shown only now: store it (nothing lists it again).\n",
		       json_string_value(json_object_get(res, "user")),
		       json_string_value(json_object_get(res, "access_key")),
		       json_string_value(json_object_get(res, "secret_key")));
	json_decref(res);
	return rc;
}

static int
keys_list(struct keys_cli *c)
{
	json_t *res = NULL, *k;
	size_t i;
	int rc = call(c, "GET", KEYS_PATH, NULL, 200, &res);
	if (rc || c->json)
		goto out;
	printf("%-24s %-20s %-8s %s\n", "ACCESS KEY", "USER", "SOURCE", "CREATED");
	json_array_foreach(json_object_get(res, "keys"), i, k)
	{
		char when[32] = "-";
		time_t t = (time_t)json_integer_value(json_object_get(k, "created"));
		struct tm tm;
		if (t && gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%-24s %-20s %-8s %s%s\n",
		       json_string_value(json_object_get(k, "access_key")),
		       json_string_value(json_object_get(k, "user")),
		       json_string_value(json_object_get(k, "source")), when,
		       json_is_true(json_object_get(k, "admin")) ? "  (admin)" : "");
	}
out:
	json_decref(res);
	return rc;
}

static int
keys_rm(struct keys_cli *c, const char *ak)
{
	char path[sizeof(KEYS_PATH) + OL_CFG_STR];
	json_t *res = NULL;
	int rc;
	if (strspn(ak, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
	    strlen(ak)) {
		fprintf(stderr, "openlake keys rm: '%s' is not an access key (A-Z a-z 0-9 . _ -)\n",
			ak);
		return 2;
	}
	snprintf(path, sizeof(path), KEYS_PATH "/%s", ak);
	rc = call(c, "DELETE", path, NULL, 200, &res);
	if (!rc && !c->json)
		printf("removed S3 key %s: it is refused from now on\n", ak);
	json_decref(res);
	return rc;
}

int
ol_cmd_keys(int argc, char **argv)
{
	static const struct option opts[] = {{"endpoint", required_argument, NULL, 'e'},
					     {"json", no_argument, NULL, 'j'},
					     {"key", required_argument, NULL, 'k'},
					     {"secret-stdin", no_argument, NULL, 'i'},
					     {"config", required_argument, NULL, 'c'},
					     {"access-key", required_argument, NULL, 'A'},
					     {"secret-key", required_argument, NULL, 'S'},
					     {"region", required_argument, NULL, 'R'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct keys_cli c = {0};
	const char *url = NULL;
	int o, rc;

	optind = 1;
	while ((o = getopt_long(argc, argv, "e:jc:h", opts, NULL)) != -1) {
		switch (o) {
		case 'e':
			url = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'k':
			c.new_key = optarg;
			break;
		case 'i':
			c.secret_stdin = true;
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
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	int n = argc - optind;
	c.verb = n > 0 ? argv[optind] : "";
	bool ok = (strcmp(c.verb, "add") == 0 && n == 2) ||
		  (strcmp(c.verb, "list") == 0 && n == 1) || (strcmp(c.verb, "rm") == 0 && n == 2);
	if (!ok) {
		fprintf(stderr, "openlake keys: %s\n\n",
			n == 0			      ? "say add, list or rm"
			: strcmp(c.verb, "add") == 0  ? "add takes one USER"
			: strcmp(c.verb, "rm") == 0   ? "rm takes one ACCESS_KEY"
			: strcmp(c.verb, "list") == 0 ? "list takes no argument"
						      : "unknown sub-command (add, list, rm)");
		usage(stderr);
		return 2;
	}
	if ((c.new_key || c.secret_stdin) && strcmp(c.verb, "add") != 0) {
		fprintf(stderr, "openlake keys: --key and --secret-stdin belong to `keys add`\n");
		return 2;
	}
	rc = setup(&c, url);
	if (rc)
		return rc;
	if (strcmp(c.verb, "add") == 0)
		return keys_add(&c, argv[optind + 1]);
	if (strcmp(c.verb, "rm") == 0)
		return keys_rm(&c, argv[optind + 1]);
	return keys_list(&c);
}
