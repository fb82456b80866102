/* admin/adminint.h - private to admin/: the access check of the admin API (auth.c). */
#ifndef OL_ADMIN_ADMININT_H
#define OL_ADMIN_ADMININT_H

#include "admin.h"
#include "base/buf.h"
#include "store/store.h"

#include <stdbool.h>
#include <stdint.h>

/* 1 when r carries SigV4 (an Authorization header or X-Amz-Credential / X-Amz-Signature in the
 * query), else 0. */
int ol_admin_request_signed(const struct ol_http_req *r);

/* May r use an admin endpoint? A signed request must verify (SigV4, service "s3", the
 * configured region, a [[credentials]] key of cfg) and its key must be an admin
 * (ol_config_cred_is_admin), whether or not required is set. An unsigned one passes only when
 * !required. Returns 0 when allowed; otherwise the S3-style XML error (403 AccessDenied,
 * SignatureDoesNotMatch, InvalidAccessKeyId, RequestTimeTooSkewed; 400 for a malformed
 * Authorization or a body) has been sent and it returns -EACCES. Any thread. */
int ol_admin_authorize(struct ol_http_req *r, const struct ol_config *cfg, bool required);

/* As ol_admin_authorize(r, cfg, true), for a request with a body: reads the whole body into
 * body (NUL-terminated; at most cap bytes, more is 400 EntityTooLarge) before the signature is
 * checked, then checks it against the signed payload hash (x-amz-content-sha256, or the hash
 * curl signs without sending it): 400 XAmzContentSHA256Mismatch, 403 SignatureDoesNotMatch.
 * UNSIGNED-PAYLOAD is taken, as S3 takes it. 0, or -EACCES with the answer sent. The caller
 * frees body (ol_buf_free) in every case. Any thread. */
int ol_admin_authorize_body(struct ol_http_req *r, const struct ol_config *cfg, struct ol_buf *body,
			    size_t cap);

/* keys.c: run-time S3 keys (GET/POST /openlake/admin/v1/keys, DELETE .../keys/ACCESS_KEY).
 * The handler authorizes the request itself (admin only, with the body for POST); st NULL
 * answers 503. Any request thread. */
struct ol_store;
void ol_admin_keys_handle(struct ol_http_req *r, const struct ol_config *cfg, struct ol_store *st);
/* Fill base/keyring.h's table from the store's records (st NULL: empty it). Start-up only,
 * before S3 serves. Logs keys it cannot load (never their secrets). */
void ol_admin_keys_load(struct ol_store *st, const struct ol_config *cfg);

/* healrec.c: a heal job record (docs/cluster.md "Heal jobs") as read back from etcd. counts[]
 * are the job's counters (ol_admin_heal_counts names them, in the record and the heal
 * document), cursor its scan's position (has_cursor: one was recorded). */
#define OL_ADMIN_HEAL_NCOUNTS 7
extern const char *const ol_admin_heal_counts[OL_ADMIN_HEAL_NCOUNTS];
struct ol_admin_heal_rec {
	char job[33], by[128], state[16];
	unsigned resumed;
	uint64_t rate;
	bool missed_only;
	int64_t started_ns; /* CLOCK_REALTIME of the job's first start */
	uint64_t counts[OL_ADMIN_HEAL_NCOUNTS];
	bool has_cursor;
	struct ol_heal_cursor cursor;
};
/* Pure: 0 and *out, -EPROTO for text that is not a record (job: 1..32 hex digits; the cursor's
 * key in hex, its phase 0..2). */
int ol_admin_heal_rec_parse(const char *buf, size_t len, struct ol_admin_heal_rec *out);

#endif
