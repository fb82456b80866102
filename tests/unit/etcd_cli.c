/* etcd_cli - drives the C etcd client from the command line, for the integration tests.
 *
 *   etcd_cli EP[,EP...] get KEY [prefix] [REV]     one line per key: KEY VALUE CREATE MOD
 *   etcd_cli EPS put KEY VALUE [LEASE]             prints the revision
 *   etcd_cli EPS del KEY [prefix]                  prints the count deleted
 *   etcd_cli EPS create KEY VALUE                  txn create-if-absent: "won REV" (exit 0) or
 *                                                  "lost VALUE" (exit 3)
 *   etcd_cli EPS cas KEY OLD NEW                   txn value compare-and-swap: exit 0 / 3
 *   etcd_cli EPS grant TTL | keepalive ID | revoke ID | ttl ID
 *   etcd_cli EPS watch KEY REV COUNT               prefix watch from REV: one line per event,
 *                                                  "PUT|DELETE KEY VALUE MODREV", COUNT events
 * Exit 1 with "error: ..." on failure (the -errno in words), 2 on bad usage. */
#include "cluster/etcd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long
num(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "not a number: %s\n", s);
		exit(2);
	}
	return v;
}

static int
fail(int rc)
{
	printf("error: %s (%d)\n", rc == OL_ETCD_ECOMPACTED ? "compacted" : strerror(-rc), rc);
	return 1;
}

struct wctx {
	long long left;
};

static int
on_ev(void *arg, const struct ol_etcd_event *ev, size_t n, int64_t rev)
{
	struct wctx *w = arg;
	for (size_t i = 0; i < n && w->left > 0; i++, w->left--)
		printf("%s %s %s %lld\n", ev[i].type == OL_ETCD_EV_PUT ? "PUT" : "DELETE",
		       ev[i].kv.key, ev[i].type == OL_ETCD_EV_PUT ? ev[i].kv.value : "-",
		       (long long)ev[i].kv.mod_revision);
	fflush(stdout);
	return w->left > 0 ? 0 : 1;
}

static int
txn_create(struct ol_etcd *c, const char *key, const char *val)
{
	struct ol_etcd_cmp cmp = {
	    .key = key, .target = OL_ETCD_CMP_CREATE, .result = OL_ETCD_EQUAL};
	struct ol_etcd_op put = {
	    .type = OL_ETCD_OP_PUT, .key = key, .value = val, .value_len = strlen(val)};
	struct ol_etcd_op get = {.type = OL_ETCD_OP_RANGE, .key = key};
	struct ol_etcd_txn_result t;
	int rc = ol_etcd_txn(c, &cmp, 1, &put, 1, &get, 1, &t);
	if (rc)
		return fail(rc);
	if (t.succeeded)
		printf("won %lld\n", (long long)t.revision);
	else
		printf("lost %s\n",
		       t.n_ranges && t.ranges[0].n_kvs ? t.ranges[0].kvs[0].value : "");
	rc = t.succeeded ? 0 : 3;
	ol_etcd_txn_result_fini(&t);
	return rc;
}

static int
txn_cas(struct ol_etcd *c, const char *key, const char *old, const char *new)
{
	struct ol_etcd_cmp cmp = {.key = key,
				  .target = OL_ETCD_CMP_VALUE,
				  .result = OL_ETCD_EQUAL,
				  .value = old,
				  .value_len = strlen(old)};
	struct ol_etcd_op put = {
	    .type = OL_ETCD_OP_PUT, .key = key, .value = new, .value_len = strlen(new)};
	struct ol_etcd_txn_result t;
	int rc = ol_etcd_txn(c, &cmp, 1, &put, 1, NULL, 0, &t);
	if (rc)
		return fail(rc);
	printf("%s\n", t.succeeded ? "swapped" : "unchanged");
	rc = t.succeeded ? 0 : 3;
	ol_etcd_txn_result_fini(&t);
	return rc;
}

static int
run(struct ol_etcd *c, int argc, char **argv)
{
	const char *op = argv[0];
	int64_t v = 0, v2 = 0;
	int rc;
	if (strcmp(op, "get") == 0 && argc >= 2) {
		struct ol_etcd_range_result r;
		unsigned fl = argc >= 3 && strcmp(argv[2], "prefix") == 0 ? OL_ETCD_PREFIX : 0;
		rc = ol_etcd_range(c, argv[1], fl, argc >= 4 ? num(argv[3]) : 0, 0, &r);
		if (rc)
			return fail(rc);
		for (size_t i = 0; i < r.n_kvs; i++)
			printf("%s %s %lld %lld\n", r.kvs[i].key, r.kvs[i].value,
			       (long long)r.kvs[i].create_revision,
			       (long long)r.kvs[i].mod_revision);
		printf("revision %lld\n", (long long)r.revision);
		ol_etcd_range_result_fini(&r);
		return 0;
	}
	if (strcmp(op, "put") == 0 && argc >= 3) {
		rc = ol_etcd_put(c, argv[1], argv[2], strlen(argv[2]), argc >= 4 ? num(argv[3]) : 0,
				 &v);
	} else if (strcmp(op, "del") == 0 && argc >= 2) {
		unsigned fl = argc >= 3 && strcmp(argv[2], "prefix") == 0 ? OL_ETCD_PREFIX : 0;
		rc = ol_etcd_delete(c, argv[1], fl, &v);
	} else if (strcmp(op, "create") == 0 && argc >= 3) {
		return txn_create(c, argv[1], argv[2]);
	} else if (strcmp(op, "cas") == 0 && argc >= 4) {
		return txn_cas(c, argv[1], argv[2], argv[3]);
	} else if (strcmp(op, "grant") == 0 && argc >= 2) {
		rc = ol_etcd_lease_grant(c, num(argv[1]), &v, &v2);
	} else if (strcmp(op, "keepalive") == 0 && argc >= 2) {
		rc = ol_etcd_lease_keepalive(c, num(argv[1]), &v);
	} else if (strcmp(op, "revoke") == 0 && argc >= 2) {
		rc = ol_etcd_lease_revoke(c, num(argv[1]));
	} else if (strcmp(op, "ttl") == 0 && argc >= 2) {
		rc = ol_etcd_lease_ttl(c, num(argv[1]), &v);
	} else if (strcmp(op, "watch") == 0 && argc >= 4) {
		struct wctx w = {.left = num(argv[3])};
		int64_t comp = 0;
		rc =
		    ol_etcd_watch(c, argv[1], OL_ETCD_PREFIX, num(argv[2]), on_ev, &w, NULL, &comp);
		if (rc == OL_ETCD_ECOMPACTED)
			printf("compacted %lld\n", (long long)comp);
		return rc == 1 ? 0 : fail(rc);
	} else {
		fprintf(stderr, "bad usage (see the comment at the top of etcd_cli.c)\n");
		return 2;
	}
	if (rc)
		return fail(rc);
	printf("%lld\n", (long long)v);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: etcd_cli EP[,EP...] OP ARGS...\n");
		return 2;
	}
	char *eps = strdup(argv[1]), *save = NULL;
	const char *list[OL_ETCD_MAX_ENDPOINTS];
	unsigned n = 0;
	for (char *t = strtok_r(eps, ",", &save); t && n < OL_ETCD_MAX_ENDPOINTS;
	     t = strtok_r(NULL, ",", &save))
		list[n++] = t;
	const char *to = getenv("ETCD_CLI_TIMEOUT_MS");
	struct ol_etcd *c;
	int rc = ol_etcd_new(list, n, to ? (unsigned)num(to) : 5000, &c);
	if (rc) {
		free(eps);
		return fail(rc);
	}
	rc = run(c, argc - 2, argv + 2);
	ol_etcd_free(c);
	free(eps);
	return rc;
}
