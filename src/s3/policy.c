/* s3/policy.c - bucket policy verdicts (placeholder until the policy parser lands). */
#include "s3/s3int.h"

int
s3_policy_verdict(struct s3_req *r, const char *action)
{
	(void)r;
	(void)action;
	return 0;
}
