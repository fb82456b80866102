/* admin/keyreq.c - parse and check a create-key request body (see keyreq.h). */
#include "keyreq.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define USAGE                                                                                      \
	"send {\"user\": \"NAME\"} to have a key pair generated, or {\"user\": \"NAME\", "         \
	"\"access_key\": \"AK\", \"secret_key\": \"SK\"} to give one"

static int
fail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: " USAGE, what);
	return -EINVAL;
}

/* Copy string member name of j into out (cap bytes); absent = "". 0 or -EINVAL. */
static int
member(json_t *j, const char *name, char *out, size_t cap)
{
	json_t *v = json_object_get(j, name);
	out[0] = '\0';
	if (!v)
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -EINVAL;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int
check(struct ol_admin_keyreq *q, char *err, size_t errlen)
{
	if (!q->user[0] || ol_keyring_check_user(q->user))
		return fail(err, errlen, "\"user\" must be 1 to 63 of A-Z a-z 0-9 . _ @ + = , -");
	if (strcmp(q->user, "admin") == 0)
		return fail(err, errlen,
			    "\"admin\" names the administrator, whose keys are the config's "
			    "[[credentials]]: choose another user name");
	if (!q->access_key[0] != !q->secret_key[0])
		return fail(err, errlen, "give both \"access_key\" and \"secret_key\", or neither");
	if (q->access_key[0] && ol_keyring_check_access_key(q->access_key))
		return fail(err, errlen, "\"access_key\" must be 3 to 128 of A-Z a-z 0-9 . _ -");
	if (q->secret_key[0] && ol_keyring_check_secret(q->secret_key))
		return fail(
		    err, errlen,
		    "\"secret_key\" must be 8 to 128 printable ASCII characters, no spaces");
	return 0;
}

int
ol_admin_keyreq_parse(const char *buf, size_t len, struct ol_admin_keyreq *out, char *err,
		      size_t errlen)
{
	json_error_t je;
	const char *name;
	json_t *v, *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	int rc = 0;
	memset(out, 0, sizeof(*out));
	if (!j)
		return fail(err, errlen, "the body is not JSON");
	if (!json_is_object(j)) {
		rc = fail(err, errlen, "the body is not a JSON object");
		goto out;
	}
	json_object_foreach(j, name, v)
	{
		if (strcmp(name, "user") && strcmp(name, "access_key") &&
		    strcmp(name, "secret_key")) {
			char what[96];
			snprintf(what, sizeof(what), "unknown field \"%.40s\"", name);
			rc = fail(err, errlen, what);
			goto out;
		}
	}
	if (member(j, "user", out->user, sizeof(out->user)) ||
	    member(j, "access_key", out->access_key, sizeof(out->access_key)) ||
	    member(j, "secret_key", out->secret_key, sizeof(out->secret_key))) {
		rc = fail(err, errlen,
			  "\"user\", \"access_key\" and \"secret_key\" must be short "
			  "strings");
		goto out;
	}
	rc = check(out, err, errlen);
out:
	json_decref(j);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}
