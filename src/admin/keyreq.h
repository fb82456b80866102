/* admin/keyreq.h - the body of POST /openlake/admin/v1/keys (create a run-time S3 key), parsed
 * and checked. Pure: no I/O, no global state, hostile input safe (fuzzed:
 * tests/fuzz/fuzz_admin_keys.c). */
#ifndef OL_ADMIN_KEYREQ_H
#define OL_ADMIN_KEYREQ_H

#include "base/keyring.h"

#include <stddef.h>

struct ol_admin_keyreq {
	char user[OL_KEYRING_USER_MAX + 1];
	char access_key[OL_KEYRING_AK_MAX + 1]; /* "" = generate one */
	char secret_key[OL_KEYRING_AK_MAX + 1]; /* "" = generate one */
};

/* buf (len bytes, need not be NUL-terminated): a JSON object {"user": "NAME"} with optional
 * "access_key" and "secret_key" (both or neither), nothing else. Syntax as base/keyring.h
 * checks it; the user "admin" is refused (it names the administrator, whose keys stay in the
 * config). Returns 0 with out filled, or -EINVAL with a message for the client in err (errlen
 * bytes) that names the problem and the fix; never echoes a secret. */
int ol_admin_keyreq_parse(const char *buf, size_t len, struct ol_admin_keyreq *out, char *err,
			  size_t errlen);

#endif
