/* Fuzz target: the body of POST /openlake/admin/v1/keys (admin/keyreq.c) over arbitrary bytes.
 * An accepted request must satisfy the syntax rules the keyring enforces. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin/keyreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_admin_keyreq q;
	char err[256];
	if (ol_admin_keyreq_parse((const char *)data, size, &q, err, sizeof(err)) == 0) {
		if (ol_keyring_check_user(q.user) || strcmp(q.user, "admin") == 0 ||
		    !q.access_key[0] != !q.secret_key[0] ||
		    (q.access_key[0] && ol_keyring_check_access_key(q.access_key)) ||
		    (q.secret_key[0] && ol_keyring_check_secret(q.secret_key)))
			abort();
	} else if (!err[0] || memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	return 0;
}
