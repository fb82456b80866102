/* tests/fuzz/fuzz_awschunked.c - libFuzzer target for the aws-chunked decoder.
 * Input: byte 0 selects the mode (signed / signed-trailer / unsigned-trailer) and the feed
 * split, byte 1 the decoded-length check; the rest is the body. Checks the feed contract:
 * progress on every call, data spans inside the input, consumed <= len. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3/auth/awschunked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
run(const struct ol_sigv4_result *res, int64_t dlen, const uint8_t *in, size_t len, size_t step)
{
	struct ol_awschunked *d;
	if (ol_awschunked_new(res, dlen, &d))
		return;
	size_t pos = 0;
	int rc = OL_AWSCHUNKED_MORE;
	while (pos < len && rc == OL_AWSCHUNKED_MORE) {
		size_t n = len - pos < step ? len - pos : step, used;
		const uint8_t *p;
		size_t pl;
		rc = ol_awschunked_feed(d, in + pos, n, &used, &p, &pl);
		if (used > n || (rc == OL_AWSCHUNKED_MORE && used == 0))
			abort();
		if (pl && (p < in + pos || p + pl > in + pos + used))
			abort();
		pos += used;
	}
	if (rc == OL_AWSCHUNKED_DONE) {
		size_t nt = ol_awschunked_trailer_count(d);
		for (size_t i = 0; i < nt; i++) {
			const char *k, *v;
			if (ol_awschunked_trailer(d, i, &k, &v) || !ol_awschunked_trailer_get(d, k))
				abort();
		}
	}
	(void)ol_awschunked_decoded(d);
	(void)ol_awschunked_message(d);
	ol_awschunked_free(d);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum ol_sigv4_payload modes[] = {OL_SIGV4_PAYLOAD_STREAMING_SIGNED,
						      OL_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER,
						      OL_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER};
	static const size_t steps[] = {1, 2, 7, 64, 4096, (size_t)-1};
	if (size < 2)
		return 0;
	struct ol_sigv4_result res;
	memset(&res, 0, sizeof(res));
	res.payload = modes[data[0] % 3];
	memset(res.signing_key, 0x5a, sizeof(res.signing_key));
	memcpy(res.seed_signature,
	       "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", 65);
	memcpy(res.scope, "20130524/us-east-1/s3/aws4_request", 35);
	memcpy(res.amz_date, "20130524T000000Z", 17);
	int64_t dlen = data[1] == 0xff ? -1 : (int64_t)data[1] * 16;
	run(&res, dlen, data + 2, size - 2, steps[(data[0] / 3) % 6]);
	return 0;
}
