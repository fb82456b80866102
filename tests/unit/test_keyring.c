/* Unit tests of base/keyring: config keys first, run-time keys beside them, syntax checks,
 * limits, and readers that never see a torn or freed secret while a writer adds and removes. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/keyring.h"
#include "tap.h"

static struct ol_config cfg;

static void
test_syntax(void)
{
	ok(ol_keyring_check_access_key("AKIA_x.y-z") == 0 && ol_keyring_check_access_key("ab") &&
	       ol_keyring_check_access_key("a/b/c") && ol_keyring_check_access_key("a b c"),
	   "access keys: 3+ of A-Z a-z 0-9 . _ -");
	ok(ol_keyring_check_secret("s3cr3t/+=") == 0 && ol_keyring_check_secret("short") &&
	       ol_keyring_check_secret("has space") && ol_keyring_check_secret("tab\tinside"),
	   "secrets: 8+ printable, no spaces");
	ok(ol_keyring_check_user("bob@example.com") == 0 && ol_keyring_check_user("") &&
	       ol_keyring_check_user("b/ob"),
	   "users: what an ACL grantee id may be");
	char longk[200];
	memset(longk, 'a', sizeof(longk) - 1);
	longk[sizeof(longk) - 1] = 0;
	ok(ol_keyring_check_access_key(longk) &&
	       ol_keyring_add(longk, "12345678", "u", 0) == -EINVAL,
	   "too long: refused");
}

static void
test_lookup(void)
{
	const char *user = NULL;
	bool admin = true;
	ok(ol_keyring_add("RTKEY1", "runtime-secret-1", "bob", 42) == 0, "add a run-time key");
	ok(ol_keyring_add("RTKEY1", "other-secret-1", "eve", 43) == -EEXIST, "twice: -EEXIST");
	ok(ol_keyring_lookup(&cfg, "RTKEY1", &user, &admin) == 0 && strcmp(user, "bob") == 0 &&
	       !admin,
	   "found: its user, never an admin");
	const char *bob = user;
	ok(strcmp(ol_keyring_secret_for("RTKEY1", &cfg), "runtime-secret-1") == 0,
	   "its secret for the verifier");
	ok(ol_keyring_lookup(&cfg, "cfgadmin", &user, &admin) == 0 && user[0] == 0 && admin &&
	       strcmp(ol_keyring_secret_for("cfgadmin", &cfg), "cfgsecret") == 0,
	   "config keys as before");
	ok(ol_keyring_has_user("bob") && !ol_keyring_has_user("eve"), "users with keys");
	ok(ol_keyring_remove("RTKEY1") == 0 && ol_keyring_remove("RTKEY1") == -ENOENT,
	   "remove, then -ENOENT");
	ok(ol_keyring_secret_for("RTKEY1", &cfg) == NULL &&
	       ol_keyring_lookup(&cfg, "RTKEY1", &user, &admin) == -ENOENT,
	   "a removed key is unknown at once");
	ok(strcmp(bob, "bob") == 0, "the user name stays valid after its key went");
}

static void
test_limits_and_list(void)
{
	char ak[32];
	int rc = 0;
	for (int i = 0; i < OL_KEYRING_MAX && !rc; i++) {
		snprintf(ak, sizeof(ak), "K%05d", OL_KEYRING_MAX - 1 - i);
		rc = ol_keyring_add(ak, "secret-secret", i % 2 ? "odd" : "even", i);
	}
	ok(rc == 0 && ol_keyring_count() == OL_KEYRING_MAX, "OL_KEYRING_MAX keys");
	ok(ol_keyring_add("ONEMORE", "secret-secret", "u", 0) == -ENOSPC, "one more: -ENOSPC");
	static struct ol_keyring_info v[OL_KEYRING_MAX];
	size_t n = ol_keyring_list(v, OL_KEYRING_MAX);
	bool sorted = n == OL_KEYRING_MAX;
	for (size_t i = 1; i < n && sorted; i++)
		sorted = strcmp(v[i - 1].access_key, v[i].access_key) < 0;
	ok(sorted && strcmp(v[0].access_key, "K00000") == 0, "listed, sorted by access key");
	ok(ol_keyring_list(v, 3) == OL_KEYRING_MAX, "a short list says how many there are");
	ol_keyring_clear();
	ok(ol_keyring_count() == 0 && ol_keyring_secret_for("K00001", &cfg) == NULL, "cleared");
}

/* ---- readers against a writer ---- */

static _Atomic int stop, bad;
static _Atomic unsigned long reads;

static void *
reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		const char *s = ol_keyring_secret_for("STABLE", &cfg);
		if (!s || strcmp(s, "stable-secret") != 0)
			atomic_fetch_add(&bad, 1);
		s = ol_keyring_secret_for("CHURN", &cfg);
		if (s && strcmp(s, "churn-secret-0123456789") != 0)
			atomic_fetch_add(&bad, 1);
		atomic_fetch_add(&reads, 1);
	}
	return NULL;
}

static void
test_concurrent(void)
{
	pthread_t t[4];
	ol_keyring_add("STABLE", "stable-secret", "s", 0);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, reader, NULL);
	uint64_t t0 = ol_clock_us();
	unsigned changes = 0;
	/* bounded in count and in time (a loaded machine gets fewer rounds, never a hang) */
	while (changes < 20000 && ol_clock_us() - t0 < 2000000) {
		ol_keyring_add("CHURN", "churn-secret-0123456789", "c", 0);
		ol_keyring_remove("CHURN");
		changes++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ok(atomic_load(&bad) == 0, "%u add/remove rounds against %lu reads: no wrong secret",
	   changes, (unsigned long)atomic_load(&reads));
	ol_keyring_clear();
}

int
main(void)
{
	ol_config_default(&cfg);
	snprintf(cfg.creds[0].access_key, sizeof(cfg.creds[0].access_key), "cfgadmin");
	snprintf(cfg.creds[0].secret_key, sizeof(cfg.creds[0].secret_key), "cfgsecret");
	cfg.n_creds = 1;
	test_syntax();
	test_lookup();
	test_limits_and_list();
	test_concurrent();
	tap_done();
}
