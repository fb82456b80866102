/* admin/admin.h - operator endpoints, served beside S3 on the S3 port and, in every mode (also
 * a KV-only pool), on their own admin listener at console_addr (default 127.0.0.1:9001).
 *
 * The admin API, under /openlake/admin/ (signed or not; a bucket named "openlake" is therefore
 * not reachable path-style for keys under "admin/"):
 *   GET    /openlake/admin/v1/status              JSON: version, mode, uptime, addresses, drives,
 *                                                 cluster (members, set leaders; etcd mode)
 *   POST   /openlake/admin/v1/heal[?rate=BYTES]   start a whole-store heal in the background
 *                                                 (202 + progress JSON; 409 if one runs)
 *   GET    /openlake/admin/v1/heal                heal progress JSON (also in the status JSON)
 *   DELETE /openlake/admin/v1/heal                cancel a running heal (202; 404 when none;
 *                                                 cluster: also a job no node runs now)
 *   GET    /openlake/admin/v1/metrics, .../health the signed forms of /metrics and health
 *   GET    /openlake/admin/v1/keys                S3 keys: config and run-time, never secrets
 *   POST   /openlake/admin/v1/keys                add a run-time key (JSON body; 201 with the
 *                                                 secret, once); docs/admin-keys.md
 *   DELETE /openlake/admin/v1/keys/ACCESS_KEY     remove a run-time key (409 for a config key)
 * Unsigned GETs only (a signed one is S3: GET /metrics lists bucket "metrics"):
 *   GET /metrics                Prometheus text
 *   GET /openlake/health        200 "ok" (liveness)
 *   GET /openlake/ready         200 "ready" once every service of the daemon listens, else 503
 *   GET /openlake/console       the web console (one HTML page; it signs its calls itself)
 *   GET / with Accept: text/html  302 to the console
 * Access: a request that reveals or changes state (status, heal progress; POST/DELETE always)
 * must be SigV4-signed (Authorization header or presigned query; service "s3", the configured
 * region) with the key of an admin user (ol_config_cred_is_admin). Metrics and health are open
 * unless [admin] metrics_auth / health_auth = true; [admin] status_auth = false opens status and
 * heal progress. A signed request is always verified, also for an open endpoint. Refusals are
 * S3 XML errors: 403 AccessDenied (unsigned, or not an admin), SignatureDoesNotMatch,
 * InvalidAccessKeyId, RequestTimeTooSkewed; 400 AuthorizationHeaderMalformed. The verifier is
 * s3/auth, a pure leaf library below both s3/ and admin/ (docs/ARCHITECTURE.md). */
#ifndef OL_ADMIN_ADMIN_H
#define OL_ADMIN_ADMIN_H

#include "base/config.h"
#include "http/http.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Remember cfg (must outlive the server) for the status page. Call once at start-up. */
void ol_admin_init(const struct ol_config *cfg);

/* What this daemon serves, for the status document ("services") and the CLI, which reports
 * only what runs. Each address is copied; NULL or "" = that service is off. Any thread. */
void ol_admin_set_services(const char *s3_addr, const char *kv_addr, const char *admin_addr);

/* Cluster mode: fn appends this daemon's view of the etcd cluster to the status document as
 * one JSON value ("cluster"; null while none is set): the live members (leased keys) with
 * their addresses, and each erasure set's leader and epoch. The daemon sets it (admin/ does
 * not depend on cluster/); fn runs on a request thread and must not block on etcd. Setting
 * NULL returns once no request runs the old fn (so its arg may be freed then). */
struct ol_strbuf;
typedef void (*ol_admin_cluster_fn)(void *arg, struct ol_strbuf *b);
void ol_admin_set_cluster(ol_admin_cluster_fn fn, void *arg);
/* s as a JSON string (quoted, escaped), appended to b. */
void ol_admin_json_str(struct ol_strbuf *b, const char *s);

/* Where this daemon runs (io/topo.h's locality report: NUMA nodes, the loops' CPUs, the
 * drives' and NICs' nodes, GPUs, warnings), one JSON object the daemon builds at start; the
 * status document carries it as "locality" (null until set). json is copied; NULL clears.
 * Any thread. */
void ol_admin_set_locality(const char *json);

/* Readiness (/openlake/ready): false until the daemon has started every service. */
void ol_admin_set_ready(bool ready);

/* The admin listener: the unsigned open routes (any request, signed or not, since there is no
 * S3 here), the admin API, and 404 for anything else. Listening when it returns 0; -errno
 * (-EADDRINUSE, -EINVAL) otherwise. cfg must outlive it. Call ol_admin_init first. */
struct ol_admin_server;
int ol_admin_server_start(const struct ol_config *cfg, const char *addr,
			  struct ol_admin_server **out);
/* Bound port (useful with port 0). */
unsigned ol_admin_server_port(const struct ol_admin_server *s);
/* Stop and free (NULL is fine). */
void ol_admin_server_stop(struct ol_admin_server *s);

struct ol_store;
/* The store the heal and keys endpoints act on (NULL: they answer 503). Call at start-up,
 * before serving (it loads the run-time S3 keys from st); st must outlive the server. Setting NULL
 * (at shutdown, after the server stopped) cancels a running heal and waits for its thread to
 * finish, so the store can be closed. */
void ol_admin_set_store(struct ol_store *st);

/* The run-time S3 keys read again from st (a cluster node serving reads of a store the serving
 * leader writes, docs/cluster.md "Serving and forwarding"): keys recorded there and not held
 * are added, keys held and no longer recorded are removed (only once the whole list was read),
 * a key whose record names another secret is replaced; a key that stays is never missing in
 * between. quiet: records that do not load are not logged (a periodic reload). 0, or -errno
 * (the store did not answer: the keys held are kept). Any thread but not concurrently with
 * itself or ol_admin_set_store; it takes the keys' lock against the API's create and delete. */
int ol_admin_keys_reload(struct ol_store *st, const struct ol_config *cfg, bool quiet);

/* Call fn(arg) after every run-time key created or removed through this daemon's admin API
 * (also when the store write failed: it may have reached some drives), on the request's thread
 * before the answer. The cluster's serving leader tells the other nodes through it. NULL: none.
 * Any thread. */
void ol_admin_set_keys_hook(void (*fn)(void *arg), void *arg);

/* Where the heal and keys endpoints go while this daemon holds no store (cluster mode on a
 * node that does not lead the set): fn takes r before anything of it is read or checked,
 * forwards it whole to the node that holds the store (which checks the signature) or
 * answers an error, and returns 1; 0 leaves r to this module as without a hook (503, but a
 * DELETE of the heal goes to the heal hooks' cancel after the access check). Set before
 * serving, cleared (NULL) after the servers stopped. */
typedef int (*ol_admin_forward_fn)(void *arg, struct ol_http_req *r);
void ol_admin_set_forward(ol_admin_forward_fn fn, void *arg);

/* ---- heal jobs (cluster mode: docs/cluster.md "Heal jobs") ----
 *
 * Every heal this daemon starts is a job with an id (16 hex digits), who started it ("by"),
 * the counters of its runs and its scan's cursor. The daemon keeps its record in etcd through
 * these hooks; admin/ knows nothing of etcd. */
enum ol_admin_heal_event {
	OL_ADMIN_HEAL_STARTED,	 /* a job started or resumed here */
	OL_ADMIN_HEAL_CANCELLED, /* an admin cancelled it (DELETE), before the answer */
	OL_ADMIN_HEAL_ENDED,	 /* its run here ended: done, failed, cancelled, or stopped
				  * because the store went (ol_admin_set_store(NULL)) */
};
struct ol_admin_heal_hooks {
	/* on the thread that saw the event, before the request that caused it is answered; it
	 * may block briefly (a record write). It must not call ol_admin_set_store. */
	void (*event)(void *arg, enum ol_admin_heal_event ev);
	/* The heal document to show in place of this daemon's own while it runs no heal: a
	 * malloc'd JSON object, or NULL to show its own. local_job: the id of its last job (""
	 * none), local_state: that job's state as its record says it (see
	 * ol_admin_heal_record; NULL none). Any request thread; must not block. */
	char *(*doc)(void *arg, const char *local_job, const char *local_state);
	/* An admin's DELETE while no heal runs here: the job recorded "running" that no node
	 * runs now (its leader died, the next has not resumed it) is cancelled in its record.
	 * who: "an admin at ADDR". 202 and *doc (malloc'd: the cancelled record, the answer's
	 * body); 404 no job is recorded running; 503 the record cannot be read or written now.
	 * NULL hook: 404. Request thread; blocks on etcd (bounded by its timeouts). */
	int (*cancel)(void *arg, const char *who, char **doc);
	void *arg;
};
/* Copied; NULL clears (returns once no call of the old hooks runs). Any thread. */
void ol_admin_set_heal_hooks(const struct ol_admin_heal_hooks *h);

/* The record of this daemon's current (or last) heal job: the heal document with the job's
 * state as others must see it ("running" also for a run stopped because the store went: it is
 * to be resumed; "cancelled" only for an admin's cancel; "done", "failed"), "job", "by",
 * "resumed", "job_started_ns", "node" and "epoch" (given: the node running it and its leader
 * epoch), "updated_ns" and "cursor" ({"set","bucket","phase","key" (hex)}, absent before the
 * scan began). NULL when no job ran here. *job is set to its id, *final whether its state is
 * done, failed or cancelled. Malloc'd. Any thread. */
char *ol_admin_heal_record(unsigned node, unsigned long long epoch, char job[33], bool *final);

/* Resume the job of a record (JSON as above) whose state is "running": the heal starts with
 * the missed writes, then scans after the record's cursor, its counters counting on from the
 * record's, under the same id and rate. 202 started; 0 the record is not running (nothing to
 * resume); 409 a heal runs here (not a missed-writes-only one, which gives way); 503 no store;
 * -EPROTO not a record. Any thread. */
int ol_admin_heal_resume(const char *rec, size_t len);

/* The record says job was cancelled while it ran here (an admin's DELETE through a node that
 * does not run it): stop its run here as an admin's cancel would (its state becomes
 * "cancelled"; the run stops between two keys). true when a run of job was cancelled here.
 * Any thread, also from the event hook. */
bool ol_admin_heal_cancel_job(const char *job);

/* Pure: the record rec (JSON, len bytes) of a job no node runs now, ended: "state" becomes
 * state ("cancelled" or "failed"), "running" false, "result" result (-errno: -ECANCELED for a
 * cancel), "eta_seconds" 0, "finished_ns" and "updated_ns" now_ns (CLOCK_REALTIME), "reason"
 * why (a sentence for the user; NULL: none); every other member is kept. The new record
 * (malloc'd), or NULL when rec is not an object with a "job" and "state" "running" (nothing
 * to end), state is another, or out of memory. */
char *ol_admin_heal_rec_end(const char *rec, size_t len, const char *state, int result,
			    const char *why, int64_t now_ns);

/* Answer an admin request (access checked as above). Returns 1 when it answered, 0 when the
 * request is not for us (the caller routes it as S3). Call first for every request. */
int ol_admin_handle(struct ol_http_req *r);

/* The status document as JSON (also used by `openlake node info` and the console): version,
 * mode, addresses, erasure, drives, members (the config's [[nodes]]), cluster_etcd,
 * kv_namespaces (the KV tokens' namespace patterns, never the tokens), services, ready,
 * cluster (ol_admin_set_cluster; null outside cluster mode), locality (ol_admin_set_locality),
 * heal. Caller frees. */
char *ol_admin_status_json(void);

/* The heal progress as one JSON object (no newline). Caller frees. "result": 0 when the last
 * heal finished with everything healthy or healed (or none ran), -5 (EIO) when it finished with
 * unrecoverable objects, -125 (ECANCELED) when cancelled, another -errno when it failed. */
char *ol_admin_heal_json(void);

#endif
