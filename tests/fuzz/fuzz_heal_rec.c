/* Fuzz target: a heal job record as read back from etcd (admin/healrec.c) over arbitrary bytes.
 * An accepted record has a hex job id and a cursor that fits; ending one (ol_admin_heal_rec_end)
 * keeps it a record of the same job. */
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
	/* a record ended by a node that did not run it: only from a running one, and then it
	 * reads back as the same job, ended */
	char *end = ol_admin_heal_rec_end((const char *)data, size, "cancelled", -125, "why", 1);
	struct ol_admin_heal_rec e;
	if (end && (strstr(end, "\"state\":\"cancelled\"") == NULL ||
		    (ol_admin_heal_rec_parse((const char *)data, size, &r) == 0 &&
		     (ol_admin_heal_rec_parse(end, strlen(end), &e) || strcmp(e.job, r.job) ||
		      strcmp(e.state, "cancelled")))))
		abort();
	free(end);
	return 0;
}
