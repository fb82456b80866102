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
	char text[OL_DRIVEID_TEXT];
	int n;

	if (ol_driveid_parse((const char *)data, size, &a) || a.version != 2)
		return 0;
	n = ol_driveid_format(&a, text, sizeof(text));
	if (n < 0 || ol_driveid_parse(text, (size_t)n, &b) || memcmp(&a, &b, sizeof(a)))
		abort();
	return 0;
}
