/* Fuzz target: a heal job record as read back from etcd (admin/healrec.c) over arbitrary bytes.
 * An accepted record has a hex job id and a cursor that fits. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin/adminint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_admin_heal_rec r;

	if (ol_admin_heal_rec_parse((const char *)data, size, &r) == 0 &&
	    (!r.job[0] || strlen(r.job) >= sizeof(r.job) ||
	     strspn(r.job, "0123456789abcdefABCDEF") != strlen(r.job) ||
	     (r.has_cursor && (r.cursor.phase > 2 || r.cursor.key_len > sizeof(r.cursor.key)))))
		abort();
	return 0;
}
