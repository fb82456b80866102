/* admin/keys.c - S3 keys added at run time (issue 11): the admin API under
 * /openlake/admin/v1/keys, their records in the object store, and the in-memory table of
 * base/keyring.h that every SigV4 verifier reads (no store read per request).
 *
 * Records: one empty object per key in the bucket "openlake_sys" (a name S3 cannot create or
 * address: the underscore is not allowed in S3 bucket names, and ListBuckets leaves out names
 * S3 cannot address), key "keys/<access key>", the record in the object's metadata blob (a
 * small JSON document). Written and read through the store's public API only. The secret is
 * wrapped with AES-256-GCM under a key derived (HKDF-SHA256) from the secret of the config's
 * first admin key; its access key is recorded ("wrapped_by") so that a record whose admin
 * secret changed is reported at start-up, not silently misread. docs/admin-keys.md says why. */
#include "adminint.h"
#include "keyreq.h"

#include "base/keyring.h"
#include "base/log.h"
#include "base/hex.h"
#include "store/store.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SYS_BUCKET "openlake_sys"
#define KEY_PREFIX "keys/"
#define KEYS_PATH  "/openlake/admin/v1/keys"
#define BODY_CAP   4096
#define WRAP_SALT  "openlake run-time S3 keys v1"

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER; /* create/delete, one at a time */
static void (*keys_hook)(void *arg); /* ol_admin_set_keys_hook, under keys_lock */
static void *keys_hook_arg;

/* ---- wrapping: AES-256-GCM, key = HKDF-SHA256(admin secret, salt, info = admin access key) */

static const struct ol_config_cred *
wrap_cred(const struct ol_config *cfg, const char *ak)
{
	for (unsigned i = 0; cfg && i < cfg->n_creds; i++)
		if (ol_config_cred_is_admin(&cfg->creds[i]) &&
		    (!ak || strcmp(cfg->creds[i].access_key, ak) == 0))
			return &cfg->creds[i];
	return NULL;
}

static int
wrap_key(const struct ol_config_cred *c, uint8_t key[32])
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *k = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM p[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)c->secret_key,
					      strlen(c->secret_key)),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, WRAP_SALT, strlen(WRAP_SALT)),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)c->access_key,
					      strlen(c->access_key)),
	    OSSL_PARAM_construct_end()};
	int rc = k && EVP_KDF_derive(k, key, 32, p) == 1 ? 0 : -EIO;
	EVP_KDF_CTX_free(k);
	EVP_KDF_free(kdf);
	return rc;
}

/* Associated data: the record's access key and user, so a wrapped secret cannot be moved to
 * another key's record. */
static void
wrap_aad(const char *ak, const char *user, char *out, size_t cap)
{
	snprintf(out, cap, "openlake-key-v1|%s|%s", ak, user);
}

/* secret -> ct (len + 16 bytes of tag) under a fresh nonce. 0 or -EIO. */
static int
seal(const uint8_t key[32], const char *aad, const char *secret, uint8_t nonce[12], uint8_t *ct)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int n = 0, m = 0, len = (int)strlen(secret), ok;
	ok = x && RAND_bytes(nonce, 12) == 1 &&
	     EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) == 1 &&
	     EVP_EncryptUpdate(x, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) == 1 &&
	     EVP_EncryptUpdate(x, ct, &n, (const uint8_t *)secret, len) == 1 &&
	     EVP_EncryptFinal_ex(x, ct + n, &m) == 1 &&
	     EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, 16, ct + len) == 1;
	EVP_CIPHER_CTX_free(x);
	return ok ? 0 : -EIO;
}

/* ct (ct_len bytes including the 16-byte tag) -> secret (NUL-terminated, cap bytes).
 * 0, -EBADMSG (wrong key or altered record), -EINVAL. */
static int
open_sealed(const uint8_t key[32], const char *aad, const uint8_t nonce[12], uint8_t *ct,
	    size_t ct_len, char *secret, size_t cap)
{
	if (ct_len <= 16 || ct_len - 16 >= cap)
		return -EINVAL;
	int len = (int)(ct_len - 16), n = 0, m = 0, ok;
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	ok = x && EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) == 1 &&
	     EVP_DecryptUpdate(x, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) == 1 &&
	     EVP_DecryptUpdate(x, (uint8_t *)secret, &n, ct, len) == 1 &&
	     EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, 16, ct + len) == 1 &&
	     EVP_DecryptFinal_ex(x, (uint8_t *)secret + n, &m) == 1;
	EVP_CIPHER_CTX_free(x);
	if (!ok) {
		OPENSSL_cleanse(secret, cap);
		return -EBADMSG;
	}
	secret[len] = '\0';
	return 0;
}

/* ---- records ---- */

/* The record of a key (malloc'd JSON text), or NULL when wrapping failed. */
static char *
record_make(const struct ol_config *cfg, const char *ak, const char *sk, const char *user,
	    int64_t created)
{
	const struct ol_config_cred *c = wrap_cred(cfg, NULL);
	uint8_t key[32], nonce[12], ct[OL_KEYRING_AK_MAX + 16];
	char aad[512], nhex[25], chex[2 * sizeof(ct) + 1];
	char *out = NULL;
	if (!c || wrap_key(c, key))
		return NULL;
	wrap_aad(ak, user, aad, sizeof(aad));
	if (seal(key, aad, sk, nonce, ct) == 0) {
		ol_hex_encode(nonce, 12, nhex);
		ol_hex_encode(ct, strlen(sk) + 16, chex);
		json_t *j = json_pack("{s:i,s:s,s:s,s:I,s:s,s:s,s:s}", "v", 1, "access_key", ak,
				      "user", user, "created", (json_int_t)created, "wrapped_by",
				      c->access_key, "nonce", nhex, "secret", chex);
		out = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
	}
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(chex, sizeof(chex));
	return out;
}

/* Parse a stored record and unwrap its secret into the keyring. 0, or -errno with a log line
 * naming the key and what to do. With seen (a reload), the access key is noted there, a key
 * the keyring holds with the same secret is left as it is (no moment without it), one with
 * another secret (removed and added again under the same access key) replaced, and a record
 * that does not load is logged once per reload pass at most (quiet). */
struct seen {
	char (*ak)[OL_KEYRING_AK_MAX + 1];
	size_t n, cap;
	bool quiet;
};

static bool
keyring_has_same(const char *ak, const char *secret)
{
	static struct ol_config none; /* no config keys: the run-time table only */
	const char *have = ol_keyring_secret_for(ak, &none);
	return have && strcmp(have, secret) == 0;
}

static int
record_load(const struct ol_config *cfg, const void *meta, size_t len, struct seen *seen)
{
	json_error_t e;
	const char *ak = NULL, *user = NULL, *by = NULL, *nhex = NULL, *chex = NULL;
	json_int_t created = 0;
	uint8_t key[32], nonce[12], ct[OL_KEYRING_AK_MAX + 16];
	char aad[512], secret[OL_KEYRING_AK_MAX + 1];
	int rc = -EINVAL;
	json_t *j = json_loadb(meta, len, 0, &e);
	if (!j ||
	    json_unpack(j, "{s:s,s:s,s:I,s:s,s:s,s:s}", "access_key", &ak, "user", &user, "created",
			&created, "wrapped_by", &by, "nonce", &nhex, "secret", &chex)) {
		if (!seen || !seen->quiet)
			ol_warn("admin: a run-time key record in bucket %s is unreadable; it is "
				"skipped",
				SYS_BUCKET);
		goto out;
	}
	if (seen && seen->n < seen->cap && strlen(ak) <= OL_KEYRING_AK_MAX)
		memcpy(seen->ak[seen->n++], ak, strlen(ak) + 1);
	const struct ol_config_cred *c = wrap_cred(cfg, by);
	size_t cl = strlen(chex) / 2;
	if (!c && seen && seen->quiet)
		goto out;
	if (!c) {
		ol_warn("admin: run-time key %s (user %s) was wrapped with the secret of admin key "
			"%s, which the config no longer has: the key is not loaded (put that "
			"[[credentials]] entry back, or remove the key: openlake keys rm %s)",
			ak, user, by, ak);
		goto out;
	}
	if (strlen(nhex) != 24 || strlen(chex) % 2 || cl > sizeof(ct) ||
	    ol_hex_decode(nhex, 12, nonce) || ol_hex_decode(chex, cl, ct) || wrap_key(c, key))
		goto bad;
	wrap_aad(ak, user, aad, sizeof(aad));
	rc = open_sealed(key, aad, nonce, ct, cl, secret, sizeof(secret));
	OPENSSL_cleanse(key, sizeof(key));
	if (rc && seen && seen->quiet)
		goto out;
	if (rc) {
		ol_warn("admin: run-time key %s (user %s) cannot be unwrapped: the secret of admin "
			"key %s has changed since it was created, or the record was altered; the "
			"key is not loaded (restore that secret, or remove the key: openlake keys "
			"rm %s)",
			ak, user, by, ak);
		goto out;
	}
	if (seen && keyring_has_same(ak, secret)) {
		rc = 0;
	} else {
		if (seen)
			(void)ol_keyring_remove(
			    ak); /* its secret changed: a new key of that name */
		rc = ol_keyring_add(ak, secret, user, (int64_t)created);
		if (rc == -EEXIST)
			ol_warn("admin: run-time key %s is loaded twice; the first record is kept",
				ak);
	}
	OPENSSL_cleanse(secret, sizeof(secret));
	goto out;
bad:
	if (!seen || !seen->quiet)
		ol_warn("admin: run-time key %s has a damaged record; it is not loaded", ak);
out:
	json_decref(j);
	return rc;
}

void
ol_admin_keys_load(struct ol_store *st, const struct ol_config *cfg)
{
	struct ol_iter *it = NULL;
	struct ol_obj_info info;
	const char *k;
	size_t kl;
	unsigned loaded = 0;
	int rc;
	ol_keyring_clear();
	if (!st)
		return;
	rc = ol_store_iter_open(st, SYS_BUCKET, &it);
	if (rc == -ENOENT || rc == -ENXIO)
		return; /* no run-time key was ever added */
	if (rc) {
		ol_err("admin: cannot read the run-time S3 keys (bucket %s): %s; only the config's "
		       "[[credentials]] are accepted until a restart reads them",
		       SYS_BUCKET, strerror(-rc));
		return;
	}
	pthread_mutex_lock(&keys_lock); /* against a reload (ol_admin_keys_reload) */
	while ((rc = ol_store_iter_next(it, &k, &kl, &info)) == 1)
		if (kl > strlen(KEY_PREFIX) && memcmp(k, KEY_PREFIX, strlen(KEY_PREFIX)) == 0 &&
		    record_load(cfg, info.meta, info.meta_len, NULL) == 0)
			loaded++;
	pthread_mutex_unlock(&keys_lock);
	if (rc < 0)
		ol_err("admin: reading the run-time S3 keys stopped early: %s", strerror(-rc));
	ol_store_iter_close(it);
	ol_info("admin: %u run-time S3 key%s loaded", loaded, loaded == 1 ? "" : "s");
}

int
ol_admin_keys_reload(struct ol_store *st, const struct ol_config *cfg, bool quiet)
{
	struct ol_iter *it = NULL;
	struct ol_obj_info info;
	const char *k;
	size_t kl;
	struct seen seen = {.cap = OL_KEYRING_MAX, .quiet = quiet};
	int rc = ol_store_iter_open(st, SYS_BUCKET, &it);
	if (rc && rc != -ENOENT && rc != -ENXIO)
		return rc; /* the keys held are kept: a key is dropped only when read gone */
	seen.ak = ol_xcalloc(seen.cap, sizeof(*seen.ak));
	pthread_mutex_lock(&keys_lock);
	while (it && (rc = ol_store_iter_next(it, &k, &kl, &info)) == 1)
		if (kl > strlen(KEY_PREFIX) && memcmp(k, KEY_PREFIX, strlen(KEY_PREFIX)) == 0)
			(void)record_load(cfg, info.meta, info.meta_len, &seen);
	if (!it) /* no bucket: no key was ever added */
		rc = 0;
	if (rc == 0) { /* the whole list was read: keys no record names any more go */
		size_t cap = ol_keyring_count() + 16, n;
		struct ol_keyring_info *v = ol_xcalloc(cap, sizeof(*v));
		n = ol_keyring_list(v, cap);
		for (size_t i = 0; i < n && i < cap; i++) {
			size_t j = 0;
			while (j < seen.n && strcmp(seen.ak[j], v[i].access_key) != 0)
				j++;
			if (j == seen.n)
				(void)ol_keyring_remove(v[i].access_key);
		}
		free(v);
	}
	pthread_mutex_unlock(&keys_lock);
	if (it)
		ol_store_iter_close(it);
	free(seen.ak);
	return rc;
}

void
ol_admin_set_keys_hook(void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&keys_lock);
	keys_hook_arg = arg;
	keys_hook = fn;
	pthread_mutex_unlock(&keys_lock);
}

/* a key was created or removed here: the hook tells the other nodes (before the answer) */
static void
keys_changed(void)
{
	pthread_mutex_lock(&keys_lock);
	void (*fn)(void *) = keys_hook;
	void *arg = keys_hook_arg;
	pthread_mutex_unlock(&keys_lock);
	if (fn)
		fn(arg);
}

static int
record_put(struct ol_store *st, const char *ak, const char *rec)
{
	char okey[sizeof(KEY_PREFIX) + OL_KEYRING_AK_MAX];
	struct ol_put *p = NULL;
	int n = snprintf(okey, sizeof(okey), KEY_PREFIX "%s", ak);
	int rc = ol_store_bucket_create(st, SYS_BUCKET);
	if (rc && rc != -EEXIST)
		return rc;
	rc = ol_store_put_begin(st, SYS_BUCKET, okey, (size_t)n, 0, &p);
	if (rc)
		return rc;
	return ol_store_put_commit(p, "openlake-key", rec, strlen(rec), NULL);
}

static int
record_delete(struct ol_store *st, const char *ak)
{
	char okey[sizeof(KEY_PREFIX) + OL_KEYRING_AK_MAX];
	int n = snprintf(okey, sizeof(okey), KEY_PREFIX "%s", ak);
	int rc = ol_store_delete(st, SYS_BUCKET, okey, (size_t)n);
	return rc == -ENXIO ? -ENOENT : rc;
}

static int
record_exists(struct ol_store *st, const char *ak)
{
	char okey[sizeof(KEY_PREFIX) + OL_KEYRING_AK_MAX];
	struct ol_obj_info info;
	int n = snprintf(okey, sizeof(okey), KEY_PREFIX "%s", ak);
	return ol_store_head(st, SYS_BUCKET, okey, (size_t)n, &info, NULL, 0) == 0;
}

/* ---- the API ---- */

static void
reply(struct ol_http_req *r, int status, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct ol_http_header h[] = {{"Content-Type", "application/json"},
				     {"Cache-Control", "no-store"}};
	size_t len = s ? strlen(s) : 0;
	if (ol_http_respond(r, status, h, 2, (int64_t)len + 1) == 0) {
		ol_http_write(r, s ? s : "", len);
		ol_http_write(r, "\n", 1);
	}
	ol_http_finish(r);
	if (s)
		OPENSSL_cleanse(s, len);
	free(s);
	json_decref(j);
}

static void
reply_error(struct ol_http_req *r, int status, const char *code, const char *msg)
{
	reply(r, status, json_pack("{s:s,s:s}", "code", code, "error", msg));
}

static json_t *
key_json(const char *ak, const char *user, bool admin, const char *source, int64_t created)
{
	json_t *j = json_pack("{s:s,s:s,s:b,s:s}", "access_key", ak, "user",
			      user[0] ? user : "admin", "admin", admin, "source", source);
	if (j && created)
		json_object_set_new(j, "created", json_integer(created));
	return j;
}

static void
keys_list(struct ol_http_req *r, const struct ol_config *cfg)
{
	json_t *arr = json_array();
	size_t cap = ol_keyring_count() + 16, n;
	struct ol_keyring_info *v = ol_xcalloc(cap, sizeof(*v));
	for (unsigned i = 0; i < cfg->n_creds; i++)
		json_array_append_new(arr, key_json(cfg->creds[i].access_key, cfg->creds[i].user,
						    ol_config_cred_is_admin(&cfg->creds[i]),
						    "config", 0));
	n = ol_keyring_list(v, cap);
	for (size_t i = 0; i < n && i < cap; i++)
		json_array_append_new(
		    arr, key_json(v[i].access_key, v[i].user, false, "runtime", v[i].created_s));
	free(v);
	reply(r, 200, json_pack("{s:o}", "keys", arr));
}

static void
gen(char *out, size_t n, const char *alphabet, unsigned mask)
{
	uint8_t b[64];
	if (n > sizeof(b) || RAND_bytes(b, (int)n) != 1)
		ol_die("admin: no random bytes for a new key");
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[b[i] & mask];
	out[n] = '\0';
	OPENSSL_cleanse(b, sizeof(b));
}

/* The new key's pair: the request's, or generated (AWS's shapes: a 20-character access key,
 * a 40-character secret). */
static void
key_pair(struct ol_admin_keyreq *q)
{
	if (!q->access_key[0]) {
		memcpy(q->access_key, "OL", 2);
		gen(q->access_key + 2, 18, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 31);
	}
	if (!q->secret_key[0])
		gen(q->secret_key, 40,
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 63);
}

static void
keys_create(struct ol_http_req *r, const struct ol_config *cfg, struct ol_store *st,
	    const struct ol_buf *body)
{
	struct ol_admin_keyreq q;
	char err[256];
	int64_t now = (int64_t)time(NULL);
	if (ol_admin_keyreq_parse(body->p ? body->p : "", body->len, &q, err, sizeof(err))) {
		reply_error(r, 400, "InvalidRequest", err);
		return;
	}
	key_pair(&q);
	pthread_mutex_lock(&keys_lock);
	const char *u;
	bool adm;
	int rc = ol_keyring_lookup(cfg, q.access_key, &u, &adm);
	if (rc == 0 || record_exists(st, q.access_key)) {
		snprintf(err, sizeof(err),
			 "access key %s exists already (%s): choose another, or leave access_key "
			 "out to have one generated",
			 q.access_key,
			 ol_config_cred_find(cfg, q.access_key)
			     ? "a [[credentials]] key of the config"
			     : "a run-time key");
		pthread_mutex_unlock(&keys_lock);
		reply_error(r, 409, "KeyAlreadyExists", err);
		goto out;
	}
	char *rec = record_make(cfg, q.access_key, q.secret_key, q.user, now);
	rc = rec ? record_put(st, q.access_key, rec) : -EIO;
	free(rec);
	if (rc == 0)
		rc = ol_keyring_add(q.access_key, q.secret_key, q.user, now);
	pthread_mutex_unlock(&keys_lock);
	keys_changed(); /* also after a failure: the record may be on some drives */
	if (rc) {
		snprintf(err, sizeof(err), "the key could not be stored: %s", strerror(-rc));
		reply_error(r, rc == -ENOSPC ? 507 : 503, "KeyNotStored", err);
		goto out;
	}
	ol_info("admin: run-time S3 key %s for user %s created (from %s)", q.access_key, q.user,
		r->peer ? r->peer : "?");
	json_t *j = key_json(q.access_key, q.user, false, "runtime", now);
	json_object_set_new(j, "secret_key", json_string(q.secret_key));
	reply(r, 201, j);
out:
	OPENSSL_cleanse(&q, sizeof(q));
}

static void
keys_delete(struct ol_http_req *r, const struct ol_config *cfg, struct ol_store *st, const char *ak)
{
	char err[400];
	if (ol_keyring_check_access_key(ak)) {
		reply_error(r, 400, "InvalidAccessKeyId",
			    "not an access key: 3 to 128 of A-Z a-z 0-9 . _ -");
		return;
	}
	if (ol_config_cred_find(cfg, ak)) {
		snprintf(err, sizeof(err),
			 "access key %s comes from the config's [[credentials]]: the admin API "
			 "removes run-time keys only; remove its entry from the config and restart "
			 "the daemon",
			 ak);
		reply_error(r, 409, "ConfigKey", err);
		return;
	}
	pthread_mutex_lock(&keys_lock);
	int rc = record_delete(st, ak); /* the record first: a key that works is a stored one */
	int rm = rc == 0 || rc == -ENOENT ? ol_keyring_remove(ak) : rc;
	pthread_mutex_unlock(&keys_lock);
	keys_changed();
	if (rc && rc != -ENOENT) {
		snprintf(err, sizeof(err), "the key could not be removed from the store: %s",
			 strerror(-rc));
		reply_error(r, 503, "KeyNotRemoved", err);
		return;
	}
	if (rc == -ENOENT && rm == -ENOENT) {
		snprintf(err, sizeof(err), "no run-time key %s (`openlake keys list` shows them)",
			 ak);
		reply_error(r, 404, "NoSuchKey", err);
		return;
	}
	ol_info("admin: run-time S3 key %s removed (from %s)", ak, r->peer ? r->peer : "?");
	reply(r, 200, json_pack("{s:s,s:b}", "access_key", ak, "deleted", 1));
}

void
ol_admin_keys_handle(struct ol_http_req *r, const struct ol_config *cfg, struct ol_store *st)
{
	const char *ak = r->path + strlen(KEYS_PATH);
	bool one = *ak == '/';
	bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
	bool post = strcmp(r->method, "POST") == 0, del = strcmp(r->method, "DELETE") == 0;
	struct ol_buf body = {0};
	int rc = !one && post ? ol_admin_authorize_body(r, cfg, &body, BODY_CAP)
			      : ol_admin_authorize(r, cfg, true);
	if (rc)
		goto out;
	if (!st)
		reply_error(r, 503, "NoObjectStore",
			    "this daemon runs no object store (mode = \"kv\"): run-time S3 keys "
			    "are kept in it");
	else if (!one && get)
		keys_list(r, cfg);
	else if (!one && post)
		keys_create(r, cfg, st, &body);
	else if (one && del)
		keys_delete(r, cfg, st, ak + 1);
	else
		reply_error(r, 405, "MethodNotAllowed",
			    one ? "use DELETE " KEYS_PATH "/ACCESS_KEY"
				: "use GET (list) or POST (create) on " KEYS_PATH);
out:
	if (body.p)
		OPENSSL_cleanse(body.p, body.len);
	ol_buf_free(&body);
}
