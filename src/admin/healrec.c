/* admin/healrec.c - the heal job record (docs/cluster.md "Heal jobs") read back: pure, over
 * jansson, hostile input safe (the record comes from etcd, which any admin of it may write). */
#include "adminint.h"

#include "base/hex.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

const char *const ol_admin_heal_counts[OL_ADMIN_HEAL_NCOUNTS] = {
    "objects_scanned",	"bytes_scanned", "shards_healed", "blocks_healed",
    "records_restored", "unrecoverable", "missed_healed"};

/* a string member into out (cap bytes with its NUL): 0, -ENOENT (absent), -EPROTO */
static int
str(json_t *j, const char *name, char *out, size_t cap)
{
	json_t *v = json_object_get(j, name);

	if (!v)
		return -ENOENT;
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -EPROTO;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* a non-negative integer member (absent: 0): 0 or -EPROTO */
static int
u64(json_t *j, const char *name, uint64_t *out)
{
	json_t *v = json_object_get(j, name);

	*out = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int
cursor(json_t *c, struct ol_heal_cursor *out)
{
	uint64_t set, phase, pool, pset;
	json_t *k = json_object_get(c, "key");
	size_t kl;

	if (!json_is_object(c) || u64(c, "set", &set) || u64(c, "phase", &phase) || set > 4096 ||
	    phase > 2 || str(c, "bucket", out->bucket, sizeof(out->bucket)) || !json_is_string(k))
		return -EPROTO;
	/* the set's position: both or neither (a record of an older build has neither) */
	bool has_pool = json_object_get(c, "pool") != NULL;
	if (has_pool != (json_object_get(c, "pset") != NULL) || u64(c, "pool", &pool) ||
	    u64(c, "pset", &pset) || pool > 0xffff || pset > 4096)
		return -EPROTO;
	out->pool = has_pool ? (unsigned)pool : OL_HEAL_SET_UNKNOWN;
	out->pset = has_pool ? (unsigned)pset : OL_HEAL_SET_UNKNOWN;
	kl = json_string_length(k);
	if (kl % 2 || kl / 2 > sizeof(out->key) ||
	    ol_hex_decode(json_string_value(k), kl / 2, out->key))
		return -EPROTO;
	out->set = (unsigned)set;
	out->phase = (unsigned)phase;
	out->key_len = kl / 2;
	return 0;
}

int
ol_admin_heal_rec_parse(const char *buf, size_t len, struct ol_admin_heal_rec *out)
{
	json_error_t e;
	json_t *j = json_loadb(buf, len, 0, &e), *c;
	uint64_t resumed = 0;
	int rc = -EPROTO;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j) || str(j, "job", out->job, sizeof(out->job)) ||
	    str(j, "state", out->state, sizeof(out->state)) || !out->job[0])
		goto out;
	for (const char *p = out->job; *p; p++)
		if (ol_hex_val(*p) < 0)
			goto out;
	if (str(j, "by", out->by, sizeof(out->by)) == -EPROTO || u64(j, "rate_limit", &out->rate) ||
	    u64(j, "resumed", &resumed) || resumed > 1000000 ||
	    (json_object_get(j, "missed_only") &&
	     !json_is_boolean(json_object_get(j, "missed_only"))))
		goto out;
	out->resumed = (unsigned)resumed;
	out->missed_only = json_is_true(json_object_get(j, "missed_only"));
	uint64_t t;
	if (u64(j, "job_started_ns", &t) || t > INT64_MAX)
		goto out;
	out->started_ns = (int64_t)t;
	for (int i = 0; i < OL_ADMIN_HEAL_NCOUNTS; i++)
		if (u64(j, ol_admin_heal_counts[i], &out->counts[i]))
			goto out;
	c = json_object_get(j, "cursor");
	if (c && !json_is_null(c)) {
		if (cursor(c, &out->cursor))
			goto out;
		out->has_cursor = true;
	}
	rc = 0;
out:
	json_decref(j);
	return rc;
}

char *
ol_admin_heal_rec_end(const char *rec, size_t len, const char *state, int result, const char *why,
		      int64_t now_ns)
{
	json_error_t e;
	json_t *j = json_loadb(rec, len, 0, &e), *st = json_object_get(j, "state");
	char *out = NULL;

	if (!json_is_object(j) || !json_is_string(json_object_get(j, "job")) ||
	    !json_is_string(st) || strcmp(json_string_value(st), "running") ||
	    (strcmp(state, "cancelled") && strcmp(state, "failed")))
		goto out;
	if (json_object_set_new(j, "state", json_string(state)) ||
	    json_object_set_new(j, "running", json_false()) ||
	    json_object_set_new(j, "result", json_integer(result)) ||
	    json_object_set_new(j, "eta_seconds", json_real(0)) ||
	    json_object_set_new(j, "finished_ns", json_integer(now_ns)) ||
	    json_object_set_new(j, "updated_ns", json_integer(now_ns)) ||
	    (why && json_object_set_new(j, "reason", json_string(why))))
		goto out;
	out = json_dumps(j, JSON_COMPACT);
out:
	json_decref(j);
	return out;
}
