/* Fuzz target: the bucket policy parser (s3/bpolicy.c) and the evaluation of what it
 * accepts, against a few fixed requests. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "s3/bpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
key_value(const char *name, void *arg)
{
	(void)arg;
	if (strcmp(name, "aws:sourceip") == 0)
		return "10.1.2.3";
	if (strcmp(name, "s3:prefix") == 0)
		return "home/alice/";
	if (strcmp(name, "s3:max-keys") == 0)
		return "10";
	return NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_policy *p;
	char msg[160];
	if (ol_policy_parse((const char *)data, size, "bkt", &p, msg, sizeof(msg)) < 0)
		return 0;
	static const struct ol_policy_req reqs[] = {
	    {NULL, "s3:GetObject", "arn:aws:s3:::bkt/a/b.txt", key_value, NULL},
	    {"alice", "s3:ListBucket", "arn:aws:s3:::bkt", key_value, NULL},
	    {"bob", "s3:PutObject", "arn:aws:s3:::bkt/x", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		(void)ol_policy_eval(p, &reqs[i]);
	(void)ol_policy_is_public(p);
	ol_policy_free(p);
	return 0;
}
