/* Fuzz target: browser POST uploads (s3/postform.c). The first byte selects: even, the
 * multipart/form-data head (boundary "B"); odd, the POST policy checked against a fixed form. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3/postform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_form f = {0};
	char msg[200];
	int64_t lo, hi;
	if (size == 0)
		return 0;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;
	if (data[0] % 2 == 0) {
		char b[80];
		(void)ol_form_parse_head(body, n, "B", &f);
		(void)ol_form_get(&f, "key");
		char *ct = malloc(n + 1);
		memcpy(ct, body, n);
		ct[n] = '\0';
		(void)ol_form_boundary(ct, b, sizeof(b));
		free(ct);
	} else {
		static const char head[] =
		    "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n"
		    "u/a.txt\r\n--B\r\nContent-Disposition: form-data; "
		    "name=\"acl\"\r\n\r\nprivate\r\n--B\r\nContent-Disposition: "
		    "form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n";
		(void)ol_form_parse_head(head, sizeof(head) - 1, "B", &f);
		(void)ol_post_policy_check(body, n, &f, "bkt", "u/a.txt", 1700000000, &lo, &hi, msg,
					   sizeof(msg));
	}
	ol_form_free(&f);
	return 0;
}
