/* s3/bpolicy.h - S3 bucket policies: a pure parser of the JSON document (libjansson) into a
 * compact form, and its evaluation for one request.
 *
 * Pure code over buffers (no store, no sockets): unit-tested in tests/unit/test_s3.c and
 * fuzzed by tests/fuzz/fuzz_policy.c. A parsed policy is immutable: any number of threads may
 * evaluate it at once. Return codes: 0 or -errno (-EINVAL with a message: MalformedPolicy). */
#ifndef OL_S3_BPOLICY_H
#define OL_S3_BPOLICY_H

#include <stdbool.h>
#include <stddef.h>

#define OL_POLICY_MAX_BYTES (20 * 1024) /* as AWS */

struct ol_policy;

/* Parse a bucket policy for bucket. On -EINVAL, msg (cap bytes) says why, as AWS words it.
 * *out is owned by the caller (ol_policy_free). */
int ol_policy_parse(const char *json, size_t n, const char *bucket, struct ol_policy **out,
		    char *msg, size_t cap);
void ol_policy_free(struct ol_policy *p);

/* Calls cb for each user name a statement names as principal (not "*"); a non-zero return
 * stops and is returned. For the caller's check that the users exist. */
int ol_policy_each_principal(const struct ol_policy *p, int (*cb)(const char *user, void *arg),
			     void *arg);

/* One request as the evaluation sees it. */
struct ol_policy_req {
	const char *user;     /* requester's user name; NULL: anonymous */
	const char *action;   /* "s3:GetObject" */
	const char *resource; /* "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key" */
	/* Value of a condition key (lowercase name: "aws:sourceip", "s3:prefix"), NULL when the
	 * request has none. */
	const char *(*key)(const char *name, void *arg);
	void *arg;
};
/* 1 allowed by some statement, -1 denied by some statement (explicit deny wins), 0 neither. */
int ol_policy_eval(const struct ol_policy *p, const struct ol_policy_req *r);
/* Does an Allow statement open the bucket to everyone (principal "*", no condition that
 * narrows it by source IP or account)? The policyStatus IsPublic of AWS. */
bool ol_policy_is_public(const struct ol_policy *p);

/* Does some condition of some statement use a key starting with prefix (lowercase,
 * "s3:existingobjecttag/")? */
bool ol_policy_uses_key(const struct ol_policy *p, const char *prefix);

/* Glob match: '*' any run, '?' any one byte; nocase for ASCII case-insensitive. Pure. */
bool ol_policy_glob(const char *pat, const char *s, bool nocase);

#endif
