/* Fuzz target: the S3 XML request-body parsers (CompleteMultipartUpload, DeleteObjects,
 * CreateBucketConfiguration). The first byte selects the parser; the rest is the body. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "s3/s3util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;
	switch (data[0] % 3) {
	case 0: {
		struct ol_s3_complete_req c;
		if (ol_s3_parse_complete(body, n, &c) == 0) {
			for (unsigned i = 0; i < c.n_parts; i++)
				(void)strlen(c.parts[i].etag);
			ol_s3_complete_free(&c);
		}
		break;
	}
	case 1: {
		struct ol_s3_delete_req d;
		if (ol_s3_parse_delete(body, n, &d) == 0) {
			for (unsigned i = 0; i < d.n_keys; i++)
				(void)strlen(d.keys[i]);
			ol_s3_delete_free(&d);
		}
		break;
	}
	default: {
		char loc[64];
		(void)ol_s3_parse_create_bucket(body, n, loc, sizeof(loc));
	}
	}
	return 0;
}
