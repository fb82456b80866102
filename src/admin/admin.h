/* admin/admin.h - operator endpoints served beside S3 on the same port:
 *   GET /metrics, /openlake/admin/v1/metrics   Prometheus text (unauthenticated, as upstream)
 *   GET /openlake/admin/v1/status              JSON: version, mode, uptime, addresses, drives
 *   GET /openlake/health                       200 "ok" (liveness)
 *   GET /openlake/console                      the web console (one HTML page, no assets)
 *   POST   /openlake/admin/v1/heal[?rate=BYTES] start a whole-store heal in the background
 *                                              (202 + progress JSON; 409 if one runs)
 *   GET    /openlake/admin/v1/heal             heal progress JSON (also in the status JSON)
 *   DELETE /openlake/admin/v1/heal             cancel a running heal (202; 404 when none)
 * Heal rewrites data, so its endpoints are authenticated by the peer address: they answer only
 * requests from loopback (127.0.0.0/8, ::1) and 403 anything else. SigV4 is checked in s3/,
 * above this layer, so admin does not verify signatures; run `openlake heal` on the node.
 * "metrics" and "openlake" are valid bucket names, so these paths are ours only for requests
 * that carry no S3 signature (an unsigned S3 request would be AccessDenied anyway); a signed
 * GET /metrics is still ListObjects of bucket "metrics". An unsigned browser GET / (Accept:
 * text/html) is redirected to the console. */
#ifndef OL_ADMIN_ADMIN_H
#define OL_ADMIN_ADMIN_H

#include "base/config.h"
#include "http/http.h"

/* Remember cfg (must outlive the server) for the status page. Call once at start-up. */
void ol_admin_init(const struct ol_config *cfg);

struct ol_store;
/* The store the heal endpoints act on (NULL: they answer 503). Call at start-up, before
 * serving; st must outlive the server. Setting NULL (at shutdown, after the server stopped)
 * cancels a running heal and waits for its thread to finish, so the store can be closed. */
void ol_admin_set_store(struct ol_store *st);

/* Answer an admin request. Returns 1 when it answered, 0 when the request is not for us (the
 * caller routes it as S3). Call first for every request. */
int ol_admin_handle(struct ol_http_req *r);

/* The status document as JSON (also used by `openlake node info`). Caller frees. */
char *ol_admin_status_json(void);

/* The heal progress as one JSON object (no newline). Caller frees. */
char *ol_admin_heal_json(void);

#endif
