/* cluster/etcd.h - a small client of etcd's v3 JSON gateway (etcd 3.4, HTTP/1.1).
 *
 * Library grade: never logs, never aborts; every function returns 0 or -errno (project codes
 * below -4096), and the caller owns what it receives (free it with the matching _fini).
 *
 * Every call has a deadline (the client's timeout_ms, over all endpoints together) and fails
 * over across the endpoints it was given: a refused, broken or silent connection, or etcd's
 * "unavailable" (no leader, leader changed), moves to the next endpoint until the deadline.
 * Each try has its share of the time left (ol_etcd_try_ms), so members that are cut off
 * (silent) or hung leave the last endpoint its time; a call starts at the endpoint that
 * answered last, and after a failure the next call starts past the endpoint that failed; an
 * endpoint whose try ran out of time is tried after the others for OL_ETCD_SUSPECT_MS, and
 * the suspect ones count as one in the others' shares (a member that answers, slowly, behind
 * two that hang is given half the deadline, not a third).
 * Every request asks etcd to require a leader: a member cut off in a minority refuses at once
 * ("no leader") instead of holding the call, and ends its watch streams.
 * A handle may be used by several threads at once (each call opens its own connection).
 *
 * Error results: -ETIMEDOUT (deadline passed, no endpoint answered), -ECANCELED (past the
 * cutoff, ol_etcd_cutoff), -ENOENT (lease not found),
 * -EINVAL (etcd refused the request as malformed), OL_ETCD_ECOMPACTED (the revision asked for
 * was compacted), -EPROTO (an answer we could not understand), -ENOMEM, -EIO (other errors
 * reported by etcd).
 *
 * Keys are NUL-terminated strings (ours are text); values are (pointer, length). 64-bit ids
 * and revisions travel as JSON strings and come back as int64_t. */
#ifndef OL_CLUSTER_ETCD_H
#define OL_CLUSTER_ETCD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_ETCD_ECOMPACTED    (-4201) /* the start revision of a watch or range was compacted */
#define OL_ETCD_MAX_ENDPOINTS 16

#define OL_ETCD_PREFIX	   1u	 /* range/delete/watch every key that starts with key */
#define OL_ETCD_MIN_TRY_MS 250	 /* a try on one endpoint has at least this (or what is left) */
#define OL_ETCD_SUSPECT_MS 10000 /* an endpoint whose try ran out of time is tried last so long */

struct ol_etcd;

struct ol_etcd_kv {
	char *key; /* NUL-terminated copy; key_len is exact */
	size_t key_len;
	char *value; /* NUL-terminated copy (so JSON values can be parsed in place) */
	size_t value_len;
	int64_t create_revision, mod_revision, version, lease;
};

struct ol_etcd_range_result {
	int64_t revision; /* the store's revision the answer was read at */
	int64_t count;	  /* keys in the range (may exceed n_kvs with a limit) */
	bool more;
	struct ol_etcd_kv *kvs;
	size_t n_kvs;
};

enum ol_etcd_cmp_target {
	OL_ETCD_CMP_CREATE, /* create_revision (0 = the key does not exist) */
	OL_ETCD_CMP_MOD,    /* mod_revision */
	OL_ETCD_CMP_VERSION,
	OL_ETCD_CMP_VALUE,
};
enum ol_etcd_cmp_result { OL_ETCD_EQUAL, OL_ETCD_NOT_EQUAL, OL_ETCD_GREATER, OL_ETCD_LESS };

struct ol_etcd_cmp {
	const char *key;
	enum ol_etcd_cmp_target target;
	enum ol_etcd_cmp_result result;
	int64_t number;	   /* CREATE, MOD, VERSION */
	const void *value; /* VALUE */
	size_t value_len;
};

enum ol_etcd_op_type { OL_ETCD_OP_RANGE, OL_ETCD_OP_PUT, OL_ETCD_OP_DELETE };

struct ol_etcd_op {
	enum ol_etcd_op_type type;
	const char *key;
	unsigned flags;	   /* OL_ETCD_PREFIX for RANGE and DELETE */
	const void *value; /* PUT */
	size_t value_len;
	int64_t lease; /* PUT: 0 = none */
};

struct ol_etcd_txn_result {
	bool succeeded; /* the compares held: the success ops ran, else the failure ops */
	int64_t revision;
	/* one result per RANGE op of the branch that ran, in order */
	struct ol_etcd_range_result *ranges;
	size_t n_ranges;
};

enum ol_etcd_event_type { OL_ETCD_EV_PUT, OL_ETCD_EV_DELETE };

struct ol_etcd_event {
	enum ol_etcd_event_type type;
	struct ol_etcd_kv kv; /* DELETE: key and mod_revision only */
};

/* Events of one watch response (all with the same revision). Return 0 to go on, anything
 * else to end the watch (ol_etcd_watch returns that value). Pointers live for the call. */
typedef int (*ol_etcd_watch_cb)(void *arg, const struct ol_etcd_event *ev, size_t n,
				int64_t revision);

/* endpoints: "http://host:port" (or "host:port"), 1..OL_ETCD_MAX_ENDPOINTS of them.
 * timeout_ms: the deadline of each call. Returns 0, -EINVAL (bad endpoint), -ENOMEM. */
int ol_etcd_new(const char *const *endpoints, unsigned n, unsigned timeout_ms,
		struct ol_etcd **out);
void ol_etcd_free(struct ol_etcd *c);

/* Pure: how long one try of a call may take, with left_ms of its deadline left and untried
 * (>= 1) endpoints of the round still to try, this one included: an equal share, at least
 * OL_ETCD_MIN_TRY_MS, never more than left_ms. */
int64_t ol_etcd_try_ms(int64_t left_ms, unsigned untried);

/* Pure: the order a call tries n endpoints in: from start on, those not suspect first (suspect
 * [i]: a try of endpoint i ran out of its time within OL_ETCD_SUSPECT_MS), then the suspect
 * ones, each group from start on. Fills order[0..n) and returns how many are not suspect;
 * while one of those is still to try, the suspect ones count as one in the share. */
unsigned ol_etcd_order(unsigned n, unsigned start, const bool *suspect, unsigned *order);

/* Endpoint last answered (for messages); valid while c lives. */
const char *ol_etcd_endpoint(struct ol_etcd *c);

/* From now on every call of c, those in flight included, ends by now + ms at the latest: one
 * past it returns -ECANCELED (a watch, -ECANCELED too), within OL_HTTPC_CUTOFF_POLL_MS. For
 * a stop that must not wait out a hung etcd's deadlines; a later call sets a new cutoff.
 * Any thread. */
void ol_etcd_cutoff(struct ol_etcd *c, int64_t ms);

/* Read key (or the prefix with OL_ETCD_PREFIX) at revision rev (0 = latest), at most limit
 * keys (0 = all), sorted by key. */
int ol_etcd_range(struct ol_etcd *c, const char *key, unsigned flags, int64_t rev, int64_t limit,
		  struct ol_etcd_range_result *out);
void ol_etcd_range_result_fini(struct ol_etcd_range_result *r);

/* Write key = value, attached to lease (0 = none). "lease not found" right after a grant
 * (a member that has not applied it yet) is retried for up to 3 s within the deadline, then
 * returned (-ENOENT: the lease is gone). *revision (may be NULL) receives the revision of
 * the write. */
int ol_etcd_put(struct ol_etcd *c, const char *key, const void *value, size_t value_len,
		int64_t lease, int64_t *revision);

/* Delete key (or the prefix). *deleted (may be NULL) receives the number of keys removed. */
int ol_etcd_delete(struct ol_etcd *c, const char *key, unsigned flags, int64_t *deleted);

/* If every compare holds, run success ops, else failure ops; atomically. */
int ol_etcd_txn(struct ol_etcd *c, const struct ol_etcd_cmp *cmp, size_t n_cmp,
		const struct ol_etcd_op *success, size_t n_success,
		const struct ol_etcd_op *failure, size_t n_failure, struct ol_etcd_txn_result *out);
void ol_etcd_txn_result_fini(struct ol_etcd_txn_result *r);

/* Leases. keepalive refreshes once and returns the new TTL; -ENOENT: the lease is gone
 * (expired or revoked). ttl returns the remaining seconds, -ENOENT when gone. */
int ol_etcd_lease_grant(struct ol_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl);
int ol_etcd_lease_keepalive(struct ol_etcd *c, int64_t id, int64_t *ttl);
int ol_etcd_lease_revoke(struct ol_etcd *c, int64_t id);
int ol_etcd_lease_ttl(struct ol_etcd *c, int64_t id, int64_t *ttl);

/* Watch key (or the prefix) from start_rev (0 = now) and hand every event to cb, on the
 * calling thread, until cb returns non-zero or *stop becomes non-zero (checked at least
 * every 250 ms; stop may be NULL). A broken stream is reopened on any endpoint from the last
 * revision delivered + 1, so no event is lost or repeated; connecting is retried with
 * backoff for as long as the watch runs; a stream silent for 30 s is reopened the same way
 * (a member that hangs without closing its connections). Returns cb's value, 0 when stopped, or
 * OL_ETCD_ECOMPACTED (with *compact_rev, may be NULL) when the events needed are compacted
 * away: read the range again and watch from its revision + 1. */
int ol_etcd_watch(struct ol_etcd *c, const char *key, unsigned flags, int64_t start_rev,
		  ol_etcd_watch_cb cb, void *arg, const atomic_int *stop, int64_t *compact_rev);

#endif
