/* base/keyring.c - config and run-time S3 keys behind one lookup (see keyring.h). */
#include "base/keyring.h"

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024 /* chains stay short up to OL_KEYRING_MAX keys */

struct kr_entry {
	struct kr_entry *next;
	const char *user; /* interned: outlives the entry */
	int64_t created_s;
	char access_key[OL_KEYRING_AK_MAX + 1];
	char secret[OL_KEYRING_AK_MAX + 1];
};

/* User names, kept once for the life of the process (a request may hold one after its key
 * was removed). Bounded: a name is interned only when a key is added for it. */
struct kr_user {
	struct kr_user *next;
	char name[OL_KEYRING_USER_MAX + 1];
};

static pthread_rwlock_t kr_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct kr_entry *kr_table[NBUCKETS];
static struct kr_user *kr_users;
static _Atomic size_t kr_count; /* 0: lookups skip the lock */
static _Thread_local char kr_secret_copy[OL_KEYRING_AK_MAX + 1];

static unsigned
hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % NBUCKETS;
}

static int
check_chars(const char *s, size_t min, size_t max, const char *extra, bool printable)
{
	size_t n = strnlen(s, max + 1);
	if (n < min || n > max)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool ok = printable ? c > 0x20 && c < 0x7f
				    : (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					  (c >= '0' && c <= '9') || (c && strchr(extra, c));
		if (!ok)
			return -EINVAL;
	}
	return 0;
}

int
ol_keyring_check_access_key(const char *ak)
{
	return check_chars(ak, 3, OL_KEYRING_AK_MAX, "._-", false);
}

int
ol_keyring_check_secret(const char *sk)
{
	return check_chars(sk, 8, OL_KEYRING_AK_MAX, "", true);
}

int
ol_keyring_check_user(const char *user)
{
	return check_chars(user, 1, OL_KEYRING_USER_MAX, "._@+=,-", false);
}

/* Under the write lock. */
static const char *
intern(const char *user)
{
	for (struct kr_user *u = kr_users; u; u = u->next)
		if (strcmp(u->name, user) == 0)
			return u->name;
	struct kr_user *u = ol_xcalloc(1, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", user);
	u->next = kr_users;
	kr_users = u;
	return u->name;
}

/* Under either lock. */
static struct kr_entry **
find_slot(const char *ak)
{
	struct kr_entry **p = &kr_table[hash(ak)];
	while (*p && strcmp((*p)->access_key, ak) != 0)
		p = &(*p)->next;
	return p;
}

int
ol_keyring_add(const char *ak, const char *secret, const char *user, int64_t created_s)
{
	int rc = 0;
	if (ol_keyring_check_access_key(ak) || ol_keyring_check_secret(secret) ||
	    ol_keyring_check_user(user))
		return -EINVAL;
	pthread_rwlock_wrlock(&kr_lock);
	struct kr_entry **p = find_slot(ak);
	if (*p) {
		rc = -EEXIST;
		goto out;
	}
	if (atomic_load(&kr_count) >= OL_KEYRING_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	struct kr_entry *e = ol_xcalloc(1, sizeof(*e));
	snprintf(e->access_key, sizeof(e->access_key), "%s", ak);
	snprintf(e->secret, sizeof(e->secret), "%s", secret);
	e->user = intern(user);
	e->created_s = created_s;
	*p = e;
	atomic_fetch_add(&kr_count, 1);
out:
	pthread_rwlock_unlock(&kr_lock);
	return rc;
}

static void
entry_free(struct kr_entry *e)
{
	explicit_bzero(e->secret, sizeof(e->secret));
	free(e);
}

int
ol_keyring_remove(const char *ak)
{
	pthread_rwlock_wrlock(&kr_lock);
	struct kr_entry **p = find_slot(ak), *e = *p;
	if (e) {
		*p = e->next;
		atomic_fetch_sub(&kr_count, 1);
	}
	pthread_rwlock_unlock(&kr_lock);
	if (!e)
		return -ENOENT;
	entry_free(e);
	return 0;
}

void
ol_keyring_clear(void)
{
	pthread_rwlock_wrlock(&kr_lock);
	for (unsigned i = 0; i < NBUCKETS; i++) {
		while (kr_table[i]) {
			struct kr_entry *e = kr_table[i];
			kr_table[i] = e->next;
			entry_free(e);
		}
	}
	atomic_store(&kr_count, 0);
	pthread_rwlock_unlock(&kr_lock);
}

size_t
ol_keyring_count(void)
{
	return atomic_load(&kr_count);
}

int
ol_keyring_lookup(const struct ol_config *cfg, const char *ak, const char **user, bool *admin)
{
	const struct ol_config_cred *c = cfg ? ol_config_cred_find(cfg, ak) : NULL;
	int rc = -ENOENT;
	if (c) {
		*user = c->user;
		*admin = ol_config_cred_is_admin(c);
		return 0;
	}
	if (!atomic_load(&kr_count))
		return -ENOENT;
	pthread_rwlock_rdlock(&kr_lock);
	const struct kr_entry *e = *find_slot(ak);
	if (e) {
		*user = e->user;
		*admin = false;
		rc = 0;
	}
	pthread_rwlock_unlock(&kr_lock);
	return rc;
}

const char *
ol_keyring_secret_for(const char *ak, void *cfg)
{
	const char *s = cfg ? ol_config_secret_for(ak, cfg) : NULL;
	if (s || !atomic_load(&kr_count))
		return s;
	pthread_rwlock_rdlock(&kr_lock);
	const struct kr_entry *e = *find_slot(ak);
	if (e) {
		memcpy(kr_secret_copy, e->secret, sizeof(kr_secret_copy));
		s = kr_secret_copy;
	}
	pthread_rwlock_unlock(&kr_lock);
	return s;
}

bool
ol_keyring_has_user(const char *user)
{
	bool found = false;
	if (!atomic_load(&kr_count))
		return false;
	pthread_rwlock_rdlock(&kr_lock);
	for (unsigned i = 0; i < NBUCKETS && !found; i++)
		for (const struct kr_entry *e = kr_table[i]; e && !found; e = e->next)
			found = strcmp(e->user, user) == 0;
	pthread_rwlock_unlock(&kr_lock);
	return found;
}

static int
info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ol_keyring_info *)a)->access_key,
		      ((const struct ol_keyring_info *)b)->access_key);
}

size_t
ol_keyring_list(struct ol_keyring_info *out, size_t cap)
{
	size_t n = 0;
	pthread_rwlock_rdlock(&kr_lock);
	for (unsigned i = 0; i < NBUCKETS; i++) {
		for (const struct kr_entry *e = kr_table[i]; e; e = e->next, n++) {
			if (n >= cap)
				continue;
			snprintf(out[n].access_key, sizeof(out[n].access_key), "%s", e->access_key);
			snprintf(out[n].user, sizeof(out[n].user), "%s", e->user);
			out[n].created_s = e->created_s;
		}
	}
	pthread_rwlock_unlock(&kr_lock);
	qsort(out, n < cap ? n : cap, sizeof(*out), info_cmp);
	return n;
}
