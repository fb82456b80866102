/* admin/adminint.h - private to admin/: the access check of the admin API (auth.c). */
#ifndef OL_ADMIN_ADMININT_H
#define OL_ADMIN_ADMININT_H

#include "admin.h"

#include <stdbool.h>

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

#endif
