/* Fuzz target: a drive identity record (base/driveid.c) over arbitrary bytes, as a node plane
 * peer's DRIVE_ID answer or a disk's .openlake/format may hold them; a record that parses
 * formats and parses back to the same fields. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/driveid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_driveid a, b;
	char text[OL_DRIVEID_TEXT], again[OL_DRIVEID_TEXT];
	int n, m;

	if (ol_driveid_parse((const char *)data, size, &a) || a.version != 2)
		return 0;
	/* compared as text: the struct has padding */
	n = ol_driveid_format(&a, text, sizeof(text));
	if (n < 0 || ol_driveid_parse(text, (size_t)n, &b))
		abort();
	m = ol_driveid_format(&b, again, sizeof(again));
	if (m != n || memcmp(text, again, (size_t)n))
		abort();
	return 0;
}
