/* tests/fuzz/fuzz_sigv4.c - libFuzzer target for SigV4 parsing (Authorization header and
 * presigned query). Input: "METHOD PATH[?QUERY]\n" then "name:value\n" header lines.
 * Runs verify (at the vectors' time, with a known key), is_anonymous and sign, and the
 * Signature Version 2 verifier on the same request. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3/auth/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXH 64

static const char *
secret_for(const char *ak, void *arg)
{
	(void)arg;
	return strcmp(ak, "AKIDEXAMPLE") == 0 ? "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" : NULL;
}

/* Split the first line into method, path, query. */
static int
parse_start(char *line, struct ol_sigv4_request *req)
{
	char *sp = strchr(line, ' ');
	if (!sp)
		return -1;
	*sp = 0;
	req->method = line;
	req->path = sp + 1;
	char *q = strchr(sp + 1, '?');
	req->path_len = q ? (size_t)(q - (sp + 1)) : strlen(sp + 1);
	req->query = q ? q + 1 : NULL;
	req->query_len = q ? strlen(q + 1) : 0;
	return 0;
}

static void
exercise(const struct ol_sigv4_request *req)
{
	struct ol_sigv4_result res;
	static const time_t nows[] = {1796149800, 1369353600, 0};
	for (int i = 0; i < 3; i++) {
		int rc = ol_sigv4_verify(req, "us-east-1", nows[i], secret_for, NULL, &res);
		if (rc > 0 || (rc < 0 && rc != OL_SIGV4_ERR_NEED_BODY_HASH && !res.message[0]))
			abort();
		if (rc == OL_SIGV4_ERR_NEED_BODY_HASH) {
			static const uint8_t sha[32];
			if (!res.body_hash_pending)
				abort();
			rc = ol_sigv4_verify_body(&res, sha);
			if (rc == 0 && !res.has_payload_sha256)
				abort();
		}
		(void)ol_sigv4_s3_code(rc, res.presigned);
		(void)ol_sigv4_http_status(rc);
		ol_sigv4_result_fini(&res);
	}
	for (int i = 0; i < 3; i++) {
		int present = ol_sigv2_present(req);
		int rc = ol_sigv2_verify(req, nows[i], secret_for, NULL, &res);
		if (rc > 0 || (present && rc < 0 && rc != OL_SIGV4_ERR_NOMEM && !res.message[0] &&
			       rc != OL_SIGV4_ERR_SIGNATURE_MISMATCH))
			abort();
		ol_sigv4_result_fini(&res);
	}
	(void)ol_sigv4_is_anonymous(req);
	char out[1024];
	(void)ol_sigv4_sign(req, "AKIDEXAMPLE", "secret", "us-east-1", "20261201T183000Z",
			    "UNSIGNED-PAYLOAD", out, sizeof(out));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > 65536)
		return 0;
	char *buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = 0;
	struct ol_sigv4_header h[MAXH];
	struct ol_sigv4_request req = {0};
	req.headers = h;
	char *nl = strchr(buf, '\n');
	char *rest = nl ? nl + 1 : buf + size;
	if (nl)
		*nl = 0;
	if (parse_start(buf, &req) == 0) {
		while (*rest && req.n_headers < MAXH) {
			char *e = strchr(rest, '\n');
			size_t len = e ? (size_t)(e - rest) : strlen(rest);
			char *colon = memchr(rest, ':', len);
			if (colon)
				h[req.n_headers++] = (struct ol_sigv4_header){
				    rest, (size_t)(colon - rest), colon + 1,
				    len - (size_t)(colon + 1 - rest)};
			rest += len + (e ? 1 : 0);
		}
		exercise(&req);
	}
	free(buf);
	return 0;
}
