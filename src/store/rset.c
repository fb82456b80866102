/* store/rset.c - an erasure set whose drives are served by node planes (issue 10). */
#include <errno.h>

#include "store/store_int.h"

int
ol_store_open_set(const struct ol_config *cfg, const struct ol_store_set_opts *o,
		  struct ol_store **out)
{
	(void)cfg;
	(void)o;
	*out = NULL;
	return -ENOSYS; /* not built yet: the API is committed first for the cluster wiring */
}

void
ol_store_set_epoch(struct ol_store *st, uint64_t epoch)
{
	(void)st;
	(void)epoch;
}
