/* base/keyring.h - the S3 keys a daemon accepts: the config's [[credentials]] and the keys an
 * administrator adds at run time (admin API, `openlake keys`), behind one lookup that the SigV4
 * verifiers of s3/ and admin/ both use.
 *
 * The run-time table lives in memory only: admin/ persists it (docs/admin-keys.md) and fills it
 * at start-up. A lookup reads no store: a config key is found by the scan it always was, then
 * a run-time key in a hash table under a reader-writer lock (readers run in parallel; a change
 * takes the lock for a moment). A key removed here is refused by the next lookup.
 *
 * Run-time keys belong to named users and are never admins: admin keys stay in the config, so
 * that losing the metadata store never locks the operator out.
 *
 * Threads: every call is safe from any thread. Nothing here logs a secret. */
#ifndef OL_BASE_KEYRING_H
#define OL_BASE_KEYRING_H

#include "base/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_KEYRING_MAX	    4096 /* run-time keys at most */
#define OL_KEYRING_AK_MAX   128	 /* longest access key, secret, user name (bytes) */
#define OL_KEYRING_USER_MAX 63

/* Syntax checks (0 or -EINVAL), shared with the admin API's validation:
 * access key 3..128 of [A-Za-z0-9._-]; secret 8..128 printable ASCII without spaces;
 * user 1..63 of [A-Za-z0-9._@+=,-] (what an ACL grantee id may be). */
int ol_keyring_check_access_key(const char *ak);
int ol_keyring_check_secret(const char *sk);
int ol_keyring_check_user(const char *user);

/* Add a run-time key (all strings copied). 0; -EINVAL bad syntax; -EEXIST the access key is
 * a run-time key already; -ENOSPC OL_KEYRING_MAX reached. The caller checks config keys
 * (ol_config_cred_find) first. */
int ol_keyring_add(const char *ak, const char *secret, const char *user, int64_t created_s);

/* Remove a run-time key: 0, or -ENOENT. The secret is wiped from memory. */
int ol_keyring_remove(const char *ak);

/* Remove every run-time key (start-up reload, tests). */
void ol_keyring_clear(void);

/* Number of run-time keys. */
size_t ol_keyring_count(void);

/* Who owns access key ak: a config key first, then a run-time one. 0 with *user set ("" = the
 * administrator of the upstream form) and *admin (ol_config_cred_is_admin for a config key,
 * false for a run-time key), or -ENOENT. *user stays valid for the life of the process (config
 * strings, or user names kept once in an intern table), also after the key is removed. */
int ol_keyring_lookup(const struct ol_config *cfg, const char *ak, const char **user, bool *admin);

/* Whether a run-time key of this user exists (ACL grantees and policy principals must name
 * a known user). */
bool ol_keyring_has_user(const char *user);

/* The secret of ak (config first, then run-time), or NULL: the ol_sigv4_secret_fn of every
 * verifier (arg = cfg). A run-time secret is copied into a buffer of the calling thread, valid
 * until its next call here. */
const char *ol_keyring_secret_for(const char *ak, void *cfg);

/* One run-time key as listed (never its secret). */
struct ol_keyring_info {
	char access_key[OL_KEYRING_AK_MAX + 1];
	char user[OL_KEYRING_USER_MAX + 1];
	int64_t created_s;
};

/* Copy up to cap run-time keys, sorted by access key, into out; returns how many there are
 * (may exceed cap). */
size_t ol_keyring_list(struct ol_keyring_info *out, size_t cap);

#endif
