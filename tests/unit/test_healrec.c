/* tests/unit/test_healrec.c - the heal job record read back (admin/healrec.c): a record as the
 * daemon writes it parses to its fields and cursor; hostile records are -EPROTO. */
#include "admin/adminint.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
test_good(void)
{
	static const char rec[] =
	    "{\"state\":\"running\",\"running\":true,\"objects_scanned\":7,\"objects_total\":24,"
	    "\"bytes_scanned\":7340032,\"bytes_total\":25165824,\"shards_healed\":1,"
	    "\"blocks_healed\":2,\"records_restored\":3,\"unrecoverable\":0,\"result\":0,"
	    "\"rate_limit\":3145728,\"missed_healed\":4,\"missed_only\":false,"
	    "\"job\":\"e36ec512548677fd\",\"by\":\"an admin at 127.0.0.1:1\",\"resumed\":1,"
	    "\"job_started_ns\":1700000000000000000,\"node\":0,\"epoch\":5,"
	    "\"cursor\":{\"set\":1,\"pool\":1,\"pset\":0,\"bucket\":\"hjob\",\"phase\":2,"
	    "\"key\":\"6b3036\"}}";
	struct ol_admin_heal_rec r;

	ok(ol_admin_heal_rec_parse(rec, strlen(rec), &r) == 0, "a record parses");
	ok(r.cursor.pool == 1 && r.cursor.pset == 0, "its cursor's set position");
	ok(strcmp(r.job, "e36ec512548677fd") == 0 && strcmp(r.state, "running") == 0 &&
	       strcmp(r.by, "an admin at 127.0.0.1:1") == 0 && r.resumed == 1 &&
	       r.rate == 3145728 && !r.missed_only && r.started_ns == 1700000000000000000LL,
	   "its job, state, by, resumed, rate and start");
	ok(r.counts[0] == 7 && r.counts[1] == 7340032 && r.counts[2] == 1 && r.counts[3] == 2 &&
	       r.counts[4] == 3 && r.counts[5] == 0 && r.counts[6] == 4,
	   "its counters");
	ok(r.has_cursor && r.cursor.set == 1 && r.cursor.phase == 2 &&
	       strcmp(r.cursor.bucket, "hjob") == 0 && r.cursor.key_len == 3 &&
	       memcmp(r.cursor.key, "k06", 3) == 0,
	   "its cursor, the key decoded from hex");
	static const char bare[] = "{\"job\":\"ab\",\"state\":\"done\"}";
	ok(ol_admin_heal_rec_parse(bare, strlen(bare), &r) == 0 && !r.has_cursor &&
	       r.counts[0] == 0 && strcmp(r.state, "done") == 0,
	   "a record without cursor nor counters");
}

static void
test_bad(void)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"state\":\"running\"}",
	    "{\"job\":\"\",\"state\":\"running\"}",
	    "{\"job\":\"xyz\",\"state\":\"running\"}",
	    "{\"job\":\"ab\"}",
	    "{\"job\":\"ab\",\"state\":7}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"objects_scanned\":-1}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"rate_limit\":\"5\"}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"missed_only\":1}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":7}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"bucket\":\"b\","
	    "\"phase\":3,\"key\":\"\"}}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"bucket\":\"b\","
	    "\"phase\":0,\"key\":\"abc\"}}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"bucket\":\"b\","
	    "\"phase\":0,\"key\":\"zz\"}}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"phase\":0,\"key\":\"\"}"
	    "}",
	    "{\"job\":\"ab\\u0000cd\",\"state\":\"running\"}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"pool\":1,"
	    "\"bucket\":\"b\",\"phase\":0,\"key\":\"\"}}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"pool\":70000,"
	    "\"pset\":0,\"bucket\":\"b\",\"phase\":0,\"key\":\"\"}}",
	    "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"pool\":0,"
	    "\"pset\":-1,\"bucket\":\"b\",\"phase\":0,\"key\":\"\"}}",
	    NULL};
	struct ol_admin_heal_rec r;
	bool all = true;

	for (int i = 0; bad[i]; i++) {
		int rc = ol_admin_heal_rec_parse(bad[i], strlen(bad[i]), &r);

		if (rc != -EPROTO)
			printf("# %s: %d\n", bad[i], rc);
		all &= rc == -EPROTO;
	}
	ok(all, "malformed records are -EPROTO");
	static char big[2 * OL_HEAL_CURSOR_KEY + 200];
	int n = snprintf(big, sizeof(big),
			 "{\"job\":\"ab\",\"state\":\"running\",\"cursor\":{\"set\":0,\"bucket\":"
			 "\"b\",\"phase\":0,\"key\":\"");
	for (int i = 0; i < 2 * OL_HEAL_CURSOR_KEY + 2; i++)
		big[n++] = 'a';
	snprintf(big + n, sizeof(big) - (size_t)n, "\"}}");
	ok(ol_admin_heal_rec_parse(big, strlen(big), &r) == -EPROTO,
	   "a cursor key longer than any index key is refused");
}

/* The record of a job no node runs, ended by a node that does not run it: only a running
 * record changes, to cancelled or failed, keeping its id, counters and cursor. */
static void
test_end(void)
{
	static const char rec[] =
	    "{\"state\":\"running\",\"running\":true,\"objects_scanned\":7,\"result\":0,"
	    "\"eta_seconds\":12.5,\"finished_ns\":0,\"job\":\"e36ec512548677fd\",\"resumed\":1,"
	    "\"node\":2,\"epoch\":5,\"updated_ns\":1,"
	    "\"cursor\":{\"set\":0,\"bucket\":\"hjob\",\"phase\":0,\"key\":\"6b3036\"}}";
	struct ol_admin_heal_rec r;
	char *c =
	    ol_admin_heal_rec_end(rec, strlen(rec), "cancelled", -ECANCELED,
				  "an admin at 127.0.0.1:1 cancelled it, \"through\" node 3", 42);

	ok(c && ol_admin_heal_rec_parse(c, strlen(c), &r) == 0 &&
	       r.cursor.pool == OL_HEAL_SET_UNKNOWN && strcmp(r.state, "cancelled") == 0 &&
	       strcmp(r.job, "e36ec512548677fd") == 0 && r.counts[0] == 7 && r.resumed == 1 &&
	       r.has_cursor && r.cursor.key_len == 3,
	   "a running record cancelled keeps its id, counters and cursor");
	ok(c && strstr(c, "\"running\":false") && strstr(c, "\"result\":-125") &&
	       strstr(c, "\"finished_ns\":42") && strstr(c, "\"updated_ns\":42") &&
	       strstr(c, "\"node\":2") &&
	       strstr(
		   c,
		   "\"reason\":\"an admin at 127.0.0.1:1 cancelled it, \\\"through\\\" node 3\""),
	   "... and says it ended, when, and why (escaped)");
	char *f = ol_admin_heal_rec_end(rec, strlen(rec), "failed", -EPROTO, NULL, 7);
	ok(f && ol_admin_heal_rec_parse(f, strlen(f), &r) == 0 && strcmp(r.state, "failed") == 0 &&
	       strstr(f, "\"result\":-71") && !strstr(f, "\"reason\""),
	   "a running record failed, without a reason");
	ok(c && !ol_admin_heal_rec_end(c, strlen(c), "failed", -EPROTO, "x", 1),
	   "an ended record is not ended again (a cancel is final)");
	static const char *const no[] = {"",
					 "[]",
					 "{\"state\":\"running\"}",
					 "{\"job\":\"ab\",\"state\":\"done\"}",
					 "{\"job\":7,\"state\":\"running\"}",
					 NULL};
	bool none = true;
	for (int i = 0; no[i]; i++)
		none &= ol_admin_heal_rec_end(no[i], strlen(no[i]), "cancelled", -ECANCELED, NULL,
					      1) == NULL;
	ok(none, "what is not a running record is not ended");
	ok(!ol_admin_heal_rec_end(rec, strlen(rec), "done", 0, NULL, 1) &&
	       !ol_admin_heal_rec_end(rec, strlen(rec), "running", 0, NULL, 1),
	   "only cancelled or failed");
	free(c);
	free(f);
}

int
main(void)
{
	test_good();
	test_bad();
	test_end();
	tap_done();
}
