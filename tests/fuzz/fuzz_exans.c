/* tests/fuzz/fuzz_exans.c - ExANS decoder on hostile input: must return an error or the
 * decoded bytes, never read or write out of bounds. Successful decodes are re-encoded and
 * decoded again by every implementation, which must agree. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/exans.h"
#include "codec/exans_fmt.h"

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

/* Decode a container with every impl; all must agree. */
static void
check_container(const uint8_t *data, size_t size)
{
	uint64_t dlen = 0;
	if (ol_exans_decoded_size(data, size, &dlen) != 0 || dlen > (64u << 20))
		return;
	uint8_t *out = malloc(dlen ? dlen : 1);
	uint8_t *out2 = malloc(dlen ? dlen : 1);
	ssize_t first = 0;
	for (int k = 0; k < 3; k++) {
		struct ol_exans_opts o = {.impl = impls[k]};
		if (!ol_exans_impl_supported(impls[k]))
			continue;
		ssize_t r = ol_exans_decompress_opts(data, size, k ? out2 : out, dlen, &o);
		if (k == 0)
			first = r;
		else if ((r >= 0) != (first >= 0) || (r >= 0 && memcmp(out, out2, dlen) != 0))
			abort(); /* implementations disagree */
	}
	free(out);
	free(out2);
}

/* A copy with the header CRC recomputed, so mutations reach the block decoders. */
static void
check_fixed(const uint8_t *data, size_t size)
{
	if (size < OL_EXANS_HDR_BYTES || ol_exans_ld32(data) != OL_EXANS_MAGIC)
		return;
	uint64_t nb = ol_exans_ld32(data + 16);
	if (nb > (size - OL_EXANS_HDR_BYTES) / 4)
		return;
	uint32_t t[256];
	uint8_t *c = malloc(size);
	memcpy(c, data, size);
	ol_exans_crc_table(t);
	uint32_t a = ol_exans_crc_sw(0, c, 20, t);
	uint32_t b = ol_exans_crc_sw(0, c + OL_EXANS_HDR_BYTES, nb * 4, t);
	ol_exans_st32(c + 20, ol_exans_crc_combine(a, b, nb * 4));
	check_container(c, size);
	free(c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_block(data, size);
	check_container(data, size);
	check_fixed(data, size);
	return 0;
}
