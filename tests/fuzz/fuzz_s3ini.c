/* Fuzz target: the AWS config/credentials file reader of libopenlake's S3 client
 * (ol_s3_ini_get) over arbitrary bytes: the sections and keys the client asks for, plus a
 * section and key named by the input's first line ("SECTION KEY"). */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "openlake/openlake_s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const sections[] = {"default", "profile default", "train", "profile train", "",
				       "a"};
static const char *const keys[] = {"aws_access_key_id",
				   "aws_secret_access_key",
				   "aws_session_token",
				   "region",
				   "endpoint_url",
				   "k",
				   ""};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[64], big[4096], line[256];
	const char *buf = (const char *)data;
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			int rc = ol_s3_ini_get(buf, size, sections[s], keys[k], out, sizeof(out));
			if (rc >= 0 && (size_t)rc != strlen(out))
				abort(); /* the length returned is the value's */
			(void)ol_s3_ini_get(buf, size, sections[s], keys[k], big, sizeof(big));
			(void)ol_s3_ini_get(buf, size, sections[s], keys[k], out, 1);
		}
	}
	size_t n = 0;
	while (n < size && n < sizeof(line) - 1 && data[n] != '\n')
		n++;
	memcpy(line, data, n);
	line[n] = 0;
	char *sp = strchr(line, ' ');
	if (sp) {
		*sp = 0;
		(void)ol_s3_ini_get(buf, size, line, sp + 1, out, sizeof(out));
	}
	return 0;
}
