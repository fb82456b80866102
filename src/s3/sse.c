/* s3/sse.c - server-side encryption at rest: SSE-S3 (a master key from [s3]
 * sse_master_key_file), SSE-KMS (aws:kms, a local KMS: the key ids of [s3] sse_kms_keys, each
 * key HMAC-SHA256(master, "openlake sse-kms key " || id)) and SSE-C (the customer's key in
 * the request headers).
 *
 * Each object (each part of a multipart upload) has its data encrypted with AES-256-GCM
 * under a random per-object data key; the store keeps only ciphertext, so erasure coding, heal
 * and the commit protocol work on it unchanged. Layout of one segment (a plain object, or one
 * part of a multipart object):
 *
 *   prefix (8 random bytes) | block 0 | block 1 | ... | block n-1
 *
 * where block i is the AES-256-GCM encryption of plaintext bytes [i*64 KiB, (i+1)*64 KiB)
 * followed by its 16-byte tag, nonce = prefix || be32(i), and the additional data one byte:
 * 1 for the segment's last block, else 0 (so a truncated segment fails to decrypt). An empty
 * segment has one empty last block. A ranged read decrypts only the blocks it touches.
 *
 * The data key is wrapped (AES-256-GCM, random nonce) by the master key (SSE-S3), the KMS key
 * (SSE-KMS) or the customer's key (SSE-C) and kept in the object's metadata blob, with the
 * plaintext size:
 *   ol-sse: AES256 | aws:kms | SSE-C       ol-sse-key: base64(nonce | wrapped key | tag)
 *   ol-sse-kid: master key id (SSE-S3, SSE-KMS; 16 hex of HMAC-SHA256(master, "openlake sse
 *   kid"))     ol-sse-kms: the KMS key id (SSE-KMS)
 *   ol-sse-salt, ol-sse-mac: SSE-C: a random salt and HMAC-SHA256(salt, customer key), to tell
 *   a wrong key (403) before anything is decrypted; the customer key itself is never stored.
 *   ol-sse-size: the plaintext size (the store's size is the ciphertext's). */
#include "s3/s3int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/hex.h"
#include "base/log.h"

#define WRAP_LEN  (12 + 32 + 16)
#define CBLK	  (S3_SSE_BLOCK + S3_SSE_TAG)
#define RD_BLOCKS 16u	       /* blocks decrypted per read step (1 MiB of plaintext) */
#define W_FLUSH	  (16u * CBLK) /* ciphertext gathered before a store write */

static const char wrap_aad[] = "openlake-sse-v1";

/* ---- the master key ---- */

/* The key from a file's bytes: 32 raw bytes, else (trailing whitespace trimmed) 64 hex digits
 * or the base64 of 32 bytes. 0 or -EINVAL. */
static int
key_from_bytes(const uint8_t *b, size_t n, uint8_t key[32])
{
	if (n == 32) {
		memcpy(key, b, 32);
		return 0;
	}
	while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' '))
		n--;
	if (n == 64)
		return ol_hex_decode((const char *)b, 32, key);
	uint8_t raw[48];
	if (n == 44 && ol_cksum_b64_decode((const char *)b, n, raw, sizeof(raw)) == 32) {
		memcpy(key, raw, 32);
		OPENSSL_cleanse(raw, sizeof(raw));
		return 0;
	}
	return -EINVAL;
}

/* A key id of the config: 1-255 printable characters, no space (the bucket attribute keeps
 * "aws:kms <id>") */
static bool
kms_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= S3_KMS_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (id[i] <= ' ' || id[i] == 0x7f)
			return false;
	return true;
}

/* The KMS key of id: derived from the master key, so that it needs no store of its own and
 * an object stays readable after its id leaves the config */
static void
kms_key(const uint8_t master[32], const char *id, uint8_t out[32])
{
	uint8_t msg[24 + S3_KMS_ID_MAX];
	size_t n = strlen(id);
	unsigned ml = 0;
	memcpy(msg, "openlake sse-kms key ", 21);
	memcpy(msg + 21, id, n);
	HMAC(EVP_sha256(), master, 32, msg, 21 + n, out, &ml);
}

int
s3_sse_load_master(struct ol_s3_server *s)
{
	const char *path = s->cfg->s3_sse_master_key_file;
	uint8_t buf[130];
	s->sse_master_set = false;
	if (!path[0]) {
		if (s->cfg->s3_sse_kms_keys[0]) {
			ol_err("s3: [s3] sse_kms_keys needs [s3] sse_master_key_file: the KMS keys "
			       "are derived from it (make one with `openssl rand 32 > FILE`)");
			return -EINVAL;
		}
		return 0;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ol_err("s3: [s3] sse_master_key_file %s cannot be read: %s", path, strerror(errno));
		return -EINVAL;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || key_from_bytes(buf, (size_t)n, s->sse_master) < 0) {
		ol_err(
		    "s3: [s3] sse_master_key_file %s is not a key: it must hold exactly 32 bytes, "
		    "or 64 hex digits, or the base64 of 32 bytes (e.g. `openssl rand 32 > FILE`)",
		    path);
		OPENSSL_cleanse(buf, sizeof(buf));
		return -EINVAL;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	uint8_t mac[32];
	unsigned ml = 0;
	HMAC(EVP_sha256(), s->sse_master, 32, (const uint8_t *)"openlake sse kid", 16, mac, &ml);
	ol_hex_encode(mac, 8, s->sse_kid);
	s->sse_master_set = true;
	ol_info("s3: SSE-S3 master key loaded (key id %s)", s->sse_kid);
	char id[S3_KMS_ID_MAX];
	int rc;
	for (unsigned i = 0;
	     (rc = ol_config_list_item(s->cfg->s3_sse_kms_keys, i, id, sizeof(id))) != -ENOENT;
	     i++) {
		if (rc < 0 || !kms_id_ok(id)) {
			ol_err("s3: [s3] sse_kms_keys: entry %u is not a key id: give 1 to 255 "
			       "printable characters without spaces",
			       i + 1);
			return -EINVAL;
		}
		ol_info("s3: SSE-KMS key \"%s\" ready%s", id, i == 0 ? " (the default)" : "");
	}
	return 0;
}

/* ---- AES-256-GCM helpers ---- */

/* A context keyed once (the key schedule), for many blocks; NULL on failure. */
static EVP_CIPHER_CTX *
gcm_new(bool enc, const uint8_t key[32])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	if (c && (enc ? EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, NULL)
		      : EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, NULL)))
		return c;
	EVP_CIPHER_CTX_free(c);
	return NULL;
}

/* One message (a block) with iv under c's key: encrypt (tag out) or decrypt (tag checked:
 * -EBADMSG when it fails). */
static int
gcm_run(EVP_CIPHER_CTX *c, bool enc, const uint8_t iv[12], const uint8_t *aad, size_t al,
	const uint8_t *in, size_t n, uint8_t *out, uint8_t tag[16])
{
	int l, ok = c && (enc ? EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv)
			      : EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv));
	ok = ok && (enc ? EVP_EncryptUpdate(c, NULL, &l, aad, (int)al)
			: EVP_DecryptUpdate(c, NULL, &l, aad, (int)al));
	ok = ok && (n == 0 || (enc ? EVP_EncryptUpdate(c, out, &l, in, (int)n)
				   : EVP_DecryptUpdate(c, out, &l, in, (int)n)));
	if (enc)
		ok = ok && EVP_EncryptFinal_ex(c, out + n, &l) &&
		     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag);
	else
		ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag) &&
		     EVP_DecryptFinal_ex(c, out + n, &l) > 0;
	return ok ? 0 : -EBADMSG;
}

static int
gcm(bool enc, const uint8_t key[32], const uint8_t iv[12], const uint8_t *aad, size_t al,
    const uint8_t *in, size_t n, uint8_t *out, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = gcm_new(enc, key);
	int rc = c ? gcm_run(c, enc, iv, aad, al, in, n, out, tag) : -EBADMSG;
	EVP_CIPHER_CTX_free(c);
	return rc;
}

static void
key_wrap(const uint8_t kek[32], const uint8_t dkey[32], char b64[OL_CKSUM_MAX_B64 * 2])
{
	uint8_t w[WRAP_LEN];
	RAND_bytes(w, 12);
	gcm(true, kek, w, (const uint8_t *)wrap_aad, sizeof(wrap_aad) - 1, dkey, 32, w + 12,
	    w + 44);
	ol_cksum_b64_encode(w, sizeof(w), b64, OL_CKSUM_MAX_B64 * 2);
}

static int
key_unwrap(const uint8_t kek[32], const char *b64, size_t bl, uint8_t dkey[32])
{
	uint8_t w[WRAP_LEN + 4];
	if (ol_cksum_b64_decode(b64, bl, w, sizeof(w)) != WRAP_LEN)
		return -EBADMSG;
	return gcm(false, kek, w, (const uint8_t *)wrap_aad, sizeof(wrap_aad) - 1, w + 12, 32, dkey,
		   w + 44);
}

static void
ckey_mac(const uint8_t salt[16], const uint8_t ckey[32], char b64[64])
{
	uint8_t mac[32];
	unsigned ml = 0;
	HMAC(EVP_sha256(), salt, 16, ckey, 32, mac, &ml);
	ol_cksum_b64_encode(mac, 32, b64, 64);
}

/* ---- request headers ---- */

static void
err_header(struct s3_req *r, const char *code, int status, const char *msg, const char *hdr)
{
	struct ol_buf x = {0};
	if (hdr) {
		ol_s3_xml_elem(&x, "ArgumentName", hdr);
	}
	s3_error_code(r, code, status, msg, x.p);
	ol_buf_free(&x);
}

static int
kms_refused(struct s3_req *r, const char *hdr)
{
	char msg[300];
	struct ol_buf x = {0};
	if (r->srv->cfg->s3_sse_kms_keys[0])
		snprintf(msg, sizeof(msg),
			 "%.80s is not supported by this server's KMS (aws:kms with a key id of "
			 "[s3] sse_kms_keys is)",
			 hdr);
	else
		snprintf(msg, sizeof(msg),
			 "SSE-KMS (aws:kms) is not available: no KMS key is configured on this "
			 "server ([s3] sse_kms_keys; header %.80s); use "
			 "x-amz-server-side-encryption: AES256 or SSE-C",
			 hdr);
	ol_s3_xml_elem(&x, "Header", hdr);
	s3_error_code(r, "NotImplemented", 501, msg, x.p);
	ol_buf_free(&x);
	return -1;
}

static bool
kms_has(const struct ol_s3_server *s, const char *id)
{
	char e[S3_KMS_ID_MAX];
	int rc;
	for (unsigned i = 0;
	     (rc = ol_config_list_item(s->cfg->s3_sse_kms_keys, i, e, sizeof(e))) != -ENOENT; i++)
		if (rc == 0 && strcmp(e, id) == 0)
			return true;
	return false;
}

int
s3_sse_kms_pick(struct s3_req *r, const char *id, struct s3_sse_req *q)
{
	const char *keys = r->srv->cfg->s3_sse_kms_keys;
	if (!keys[0] || !r->srv->sse_master_set)
		return kms_refused(r, "x-amz-server-side-encryption");
	if (!id || !id[0]) {
		if (ol_config_list_item(keys, 0, q->kms_id, sizeof(q->kms_id)) < 0)
			return kms_refused(r, "x-amz-server-side-encryption");
	} else if (strlen(id) >= S3_KMS_ID_MAX || !kms_has(r->srv, id)) {
		char msg[S3_KMS_ID_MAX + 120];
		snprintf(msg, sizeof(msg),
			 "Invalid keyId '%.255s': this server's KMS holds the key ids of [s3] "
			 "sse_kms_keys",
			 id);
		s3_error_code(r, "KMS.NotFoundException", 400, msg, NULL);
		return -1;
	} else {
		snprintf(q->kms_id, sizeof(q->kms_id), "%s", id);
	}
	q->mode = S3_SSE_KMS;
	return 0;
}

int
s3_sse_parse(struct s3_req *r, bool source, struct s3_sse_req *q)
{
#define SSE_C_H "server-side-encryption-customer-"
	/* the SSE-C headers of the object (0) and of a copy's source (1) */
	static const char *const names[2][3] = {
	    {"x-amz-" SSE_C_H "algorithm", "x-amz-" SSE_C_H "key", "x-amz-" SSE_C_H "key-md5"},
	    {"x-amz-copy-source-" SSE_C_H "algorithm", "x-amz-copy-source-" SSE_C_H "key",
	     "x-amz-copy-source-" SSE_C_H "key-md5"}};
#undef SSE_C_H
	const char *n1 = names[source][0], *n2 = names[source][1], *n3 = names[source][2];
	memset(q, 0, sizeof(*q));
	if (!source) {
		const char *bk = ol_http_header(r->h, "x-amz-server-side-encryption-bucket-key-"
						      "enabled");
		const char *v = ol_http_header(r->h, "x-amz-server-side-encryption");
		const char *kid =
		    ol_http_header(r->h, "x-amz-server-side-encryption-aws-kms-key-id");
		bool kms = v && strcmp(v, "aws:kms") == 0;
		/* S3 Bucket Keys cut the calls to AWS KMS; a local KMS has none to cut */
		if (bk && strcasecmp(bk, "false") != 0 && !kms)
			return kms_refused(r, "x-amz-server-side-encryption-bucket-key-enabled");
		if (v && strcmp(v, "aws:kms:dsse") == 0)
			return kms_refused(r, "x-amz-server-side-encryption");
		if (ol_http_header(r->h, "x-amz-server-side-encryption-context"))
			return kms_refused(r, "x-amz-server-side-encryption-context");
		if (kid && !kms) {
			err_header(r, "InvalidArgument", 400,
				   "Server Side Encryption with AWS KMS managed key requires HTTP "
				   "header x-amz-server-side-encryption : aws:kms",
				   "x-amz-server-side-encryption-aws-kms-key-id");
			return -1;
		}
		if (kms && s3_sse_kms_pick(r, kid, q) < 0)
			return -1;
		if (v && !kms && strcmp(v, "AES256") != 0) {
			struct ol_buf x = {0};
			ol_s3_xml_elem(&x, "ArgumentName", "x-amz-server-side-encryption");
			ol_s3_xml_elem(&x, "ArgumentValue", v);
			s3_error_code(r, "InvalidArgument", 400,
				      "The encryption method specified is not supported", x.p);
			ol_buf_free(&x);
			return -1;
		}
		if (v && !kms)
			q->mode = S3_SSE_S3;
	}
	const char *alg = ol_http_header(r->h, n1), *key = ol_http_header(r->h, n2),
		   *md5 = ol_http_header(r->h, n3);
	if (!alg && !key && !md5)
		return 0;
	if (q->mode == S3_SSE_S3 || q->mode == S3_SSE_KMS) {
		err_header(r, "InvalidArgument", 400,
			   "Server Side Encryption with Customer provided key is incompatible with "
			   "the encryption method specified",
			   "x-amz-server-side-encryption");
		return -1;
	}
	if (!alg) {
		err_header(r, "InvalidArgument", 400,
			   "Requests specifying Server Side Encryption with Customer provided keys "
			   "must provide a valid encryption algorithm.",
			   n1);
		return -1;
	}
	if (strcmp(alg, "AES256") != 0) {
		err_header(r, "InvalidEncryptionAlgorithmError", 400,
			   "The Encryption request you specified is not valid. Supported value: "
			   "AES256.",
			   n1);
		return -1;
	}
	if (!key) {
		err_header(r, "InvalidArgument", 400,
			   "Requests specifying Server Side Encryption with Customer provided keys "
			   "must provide an appropriate secret key.",
			   n2);
		return -1;
	}
	if (!md5) {
		err_header(r, "InvalidArgument", 400,
			   "Requests specifying Server Side Encryption with Customer provided keys "
			   "must provide the client calculated MD5 of the secret key.",
			   n3);
		return -1;
	}
	uint8_t raw[48], dg[OL_CKSUM_MAX_RAW];
	if (ol_cksum_b64_decode(key, strlen(key), raw, sizeof(raw)) != 32) {
		err_header(r, "InvalidArgument", 400,
			   "The secret key was invalid for the specified algorithm.", n2);
		return -1;
	}
	ol_cksum_compute(OL_CKSUM_MD5, raw, 32, dg);
	char calc[OL_CKSUM_MAX_B64];
	ol_cksum_b64_encode(dg, 16, calc, sizeof(calc));
	if (strcmp(calc, md5) != 0) {
		OPENSSL_cleanse(raw, sizeof(raw));
		err_header(r, "InvalidArgument", 400,
			   "The calculated MD5 hash of the key did not match the hash that was "
			   "provided.",
			   n3);
		return -1;
	}
	if (!r->h->tls && !r->srv->cfg->s3_sse_c_allow_http) {
		OPENSSL_cleanse(raw, sizeof(raw));
		s3_error_code(r, "InvalidRequest", 400,
			      "Requests specifying Server Side Encryption with Customer provided "
			      "keys must be made over a secure connection.",
			      NULL);
		return -1;
	}
	memcpy(q->ckey, raw, 32);
	OPENSSL_cleanse(raw, sizeof(raw));
	snprintf(q->ckey_md5, sizeof(q->ckey_md5), "%s", calc);
	q->mode = S3_SSE_C;
	return 0;
}

void
s3_sse_req_fini(struct s3_sse_req *q)
{
	OPENSSL_cleanse(q, sizeof(*q));
}

void
s3_sse_fini(struct s3_sse *e)
{
	OPENSSL_cleanse(e, sizeof(*e));
}

/* The loaded bucket's default encryption (PUT ?encryption): S3_SSE_S3, S3_SSE_KMS (the
 * attribute "aws:kms" or "aws:kms <key id>": its id into kms_id, "" for the default key) or 0. */
static int
bucket_default(struct s3_req *r, char kms_id[S3_KMS_ID_MAX])
{
	const char *v;
	s3_bucket_load(r);
	long n = r->ba.blob ? ol_s3_attr_get(r->ba.blob, r->ba.blob_len, "sse", &v) : -ENOENT;
	kms_id[0] = '\0';
	if (n == 6 && memcmp(v, "AES256", 6) == 0)
		return S3_SSE_S3;
	if (n >= 7 && memcmp(v, "aws:kms", 7) == 0) {
		if (n > 8 && v[7] == ' ' && n - 8 < S3_KMS_ID_MAX) {
			memcpy(kms_id, v + 8, (size_t)n - 8);
			kms_id[n - 8] = '\0';
		}
		return S3_SSE_KMS;
	}
	return 0;
}

static int
no_master(struct s3_req *r)
{
	struct ol_buf x = {0};
	ol_s3_xml_elem(&x, "Header", "x-amz-server-side-encryption");
	s3_error_code(r, "NotImplemented", 501,
		      "x-amz-server-side-encryption: AES256 (SSE-S3) needs a master key, and "
		      "none is configured on this server ([s3] sse_master_key_file); nothing "
		      "was stored",
		      x.p);
	ol_buf_free(&x);
	return -1;
}

int
s3_sse_new(struct s3_req *r, const struct s3_sse_req *q, struct s3_sse *e, struct ol_buf *meta)
{
	char b64[OL_CKSUM_MAX_B64 * 2];
	memset(e, 0, sizeof(*e));
	e->mode = q->mode;
	if (q->mode == S3_SSE_KMS) {
		snprintf(e->kms_id, sizeof(e->kms_id), "%s", q->kms_id);
	} else if (!q->mode) {
		char bid[S3_KMS_ID_MAX];
		struct s3_sse_req bq = {0};
		e->mode = bucket_default(r, bid);
		/* the bucket's key, checked again: the config may have dropped it since */
		if (e->mode == S3_SSE_KMS) {
			if (s3_sse_kms_pick(r, bid, &bq) < 0)
				return -1;
			snprintf(e->kms_id, sizeof(e->kms_id), "%s", bq.kms_id);
		}
	}
	if (e->mode == 0)
		return 0;
	if (e->mode == S3_SSE_S3 && !r->srv->sse_master_set)
		return no_master(r);
	RAND_bytes(e->dkey, 32);
	if (e->mode == S3_SSE_S3) {
		key_wrap(r->srv->sse_master, e->dkey, b64);
		ol_s3_meta_add(meta, "ol-sse", "AES256");
		ol_s3_meta_add(meta, "ol-sse-kid", r->srv->sse_kid);
	} else if (e->mode == S3_SSE_KMS) {
		uint8_t kk[32];
		kms_key(r->srv->sse_master, e->kms_id, kk);
		key_wrap(kk, e->dkey, b64);
		OPENSSL_cleanse(kk, sizeof(kk));
		ol_s3_meta_add(meta, "ol-sse", "aws:kms");
		ol_s3_meta_add(meta, "ol-sse-kid", r->srv->sse_kid);
		ol_s3_meta_add(meta, "ol-sse-kms", e->kms_id);
	} else {
		uint8_t salt[16];
		char sb[32], mac[64];
		RAND_bytes(salt, 16);
		ol_cksum_b64_encode(salt, 16, sb, sizeof(sb));
		ckey_mac(salt, q->ckey, mac);
		key_wrap(q->ckey, e->dkey, b64);
		ol_s3_meta_add(meta, "ol-sse", "SSE-C");
		ol_s3_meta_add(meta, "ol-sse-salt", sb);
		ol_s3_meta_add(meta, "ol-sse-mac", mac);
		snprintf(e->ckey_md5, sizeof(e->ckey_md5), "%s", q->ckey_md5);
	}
	ol_s3_meta_add(meta, "ol-sse-key", b64);
	return 0;
}

int
s3_sse_meta_mode(const void *meta, size_t len)
{
	const char *v;
	long n = meta ? ol_s3_meta_get(meta, len, "ol-sse", &v) : -ENOENT;
	if (n == 6 && memcmp(v, "AES256", 6) == 0)
		return S3_SSE_S3;
	if (n == 5 && memcmp(v, "SSE-C", 5) == 0)
		return S3_SSE_C;
	if (n == 7 && memcmp(v, "aws:kms", 7) == 0)
		return S3_SSE_KMS;
	return 0;
}

/* the KMS key id of an SSE-KMS blob into e->kms_id ("" when absent or too long) */
static void
meta_kms_id(const void *meta, size_t len, struct s3_sse *e)
{
	const char *v;
	long n = ol_s3_meta_get(meta, len, "ol-sse-kms", &v);
	e->kms_id[0] = '\0';
	if (n > 0 && n < S3_KMS_ID_MAX) {
		memcpy(e->kms_id, v, (size_t)n);
		e->kms_id[n] = '\0';
	}
}

void
s3_sse_meta_info(const void *meta, size_t len, struct s3_sse *e)
{
	e->mode = meta ? s3_sse_meta_mode(meta, len) : 0;
	if (e->mode == S3_SSE_KMS)
		meta_kms_id(meta, len, e);
}

static int
not_applicable(struct s3_req *r)
{
	s3_error_code(r, "InvalidRequest", 400,
		      "The encryption parameters are not applicable to this object.", NULL);
	return -1;
}

static int
corrupt(struct s3_req *r)
{
	ol_err("s3 %s: the encryption entries of %s cannot be used", r->reqid, r->h->target);
	s3_error_code(r, "InternalError", 500,
		      "The object's encryption metadata is damaged: its data key cannot be "
		      "recovered",
		      NULL);
	return -1;
}

int
s3_sse_open(struct s3_req *r, const void *meta, size_t len, const struct s3_sse_req *q,
	    struct s3_sse *e)
{
	const char *v, *k;
	memset(e, 0, sizeof(*e));
	e->mode = s3_sse_meta_mode(meta, len);
	long kl = ol_s3_meta_get(meta, len, "ol-sse-key", &k);
	if (e->mode == 0)
		return q->mode == S3_SSE_C ? not_applicable(r) : 0;
	if (kl <= 0)
		goto corrupt;
	if (e->mode == S3_SSE_S3 || e->mode == S3_SSE_KMS) {
		if (q->mode == S3_SSE_C)
			return not_applicable(r);
		long n = ol_s3_meta_get(meta, len, "ol-sse-kid", &v);
		if (!r->srv->sse_master_set || n != 16 || memcmp(v, r->srv->sse_kid, 16) != 0) {
			char msg[300];
			snprintf(msg, sizeof(msg),
				 "The object is encrypted (%s) under master key id %.*s, but "
				 "this server's [s3] sse_master_key_file %s: the object cannot be "
				 "decrypted until that key is configured again",
				 e->mode == S3_SSE_KMS ? "SSE-KMS" : "SSE-S3",
				 (int)(n > 0 && n < 40 ? n : 0), n > 0 ? v : "",
				 r->srv->sse_master_set ? "holds another key" : "is not set");
			ol_err("s3 %s: %s", r->reqid, msg);
			s3_error_code(r, "InternalError", 500, msg, NULL);
			return -1;
		}
		if (e->mode == S3_SSE_S3)
			return key_unwrap(r->srv->sse_master, k, (size_t)kl, e->dkey) < 0
				   ? corrupt(r)
				   : 0;
		uint8_t kk[32];
		meta_kms_id(meta, len, e);
		if (!e->kms_id[0])
			return corrupt(r);
		kms_key(r->srv->sse_master, e->kms_id, kk);
		int rc = key_unwrap(kk, k, (size_t)kl, e->dkey);
		OPENSSL_cleanse(kk, sizeof(kk));
		return rc < 0 ? corrupt(r) : 0;
	}
	/* SSE-C */
	if (q->mode != S3_SSE_C) {
		s3_error_code(r, "InvalidRequest", 400,
			      "The object was stored using a form of Server Side Encryption. The "
			      "correct parameters must be provided to retrieve the object.",
			      NULL);
		return -1;
	}
	const char *sv, *mv;
	long sl = ol_s3_meta_get(meta, len, "ol-sse-salt", &sv);
	long ml = ol_s3_meta_get(meta, len, "ol-sse-mac", &mv);
	uint8_t salt[24];
	char mac[64];
	if (sl <= 0 || ml <= 0 || ol_cksum_b64_decode(sv, (size_t)sl, salt, sizeof(salt)) != 16)
		goto corrupt;
	ckey_mac(salt, q->ckey, mac);
	if (strlen(mac) != (size_t)ml || CRYPTO_memcmp(mac, mv, (size_t)ml) != 0) {
		s3_error_code(r, "AccessDenied", 403,
			      "The provided customer encryption key does not match the key the "
			      "object was stored with.",
			      NULL);
		return -1;
	}
	if (key_unwrap(q->ckey, k, (size_t)kl, e->dkey) < 0)
		goto corrupt;
	snprintf(e->ckey_md5, sizeof(e->ckey_md5), "%s", q->ckey_md5);
	return 0;
corrupt:
	return corrupt(r);
}

size_t
s3_sse_headers(const struct s3_sse *e, struct ol_http_header *h, size_t n)
{
	if (e->mode == S3_SSE_S3) {
		h[n++] = (struct ol_http_header){"x-amz-server-side-encryption", "AES256"};
	} else if (e->mode == S3_SSE_KMS) {
		h[n++] = (struct ol_http_header){"x-amz-server-side-encryption", "aws:kms"};
		h[n++] = (struct ol_http_header){"x-amz-server-side-encryption-aws-kms-key-id",
						 e->kms_id};
	} else if (e->mode == S3_SSE_C) {
		h[n++] = (struct ol_http_header){"x-amz-server-side-encryption-customer-algorithm",
						 "AES256"};
		h[n++] = (struct ol_http_header){"x-amz-server-side-encryption-customer-key-MD5",
						 e->ckey_md5};
	}
	return n;
}

void
s3_sse_etag(const struct s3_sse *e, const uint8_t md5[16], char etag[33])
{
	if (e->mode != S3_SSE_C) {
		ol_hex_encode(md5, 16, etag);
		return;
	}
	/* SSE-C: AWS's ETag is not the MD5 of the data; ours is keyed, so it tells nothing
	 * about the plaintext to one without the key */
	uint8_t mac[32];
	unsigned ml = 0;
	HMAC(EVP_sha256(), e->dkey, 32, md5, 16, mac, &ml);
	ol_hex_encode(mac, 16, etag);
}

uint64_t
s3_sse_plain_len(uint64_t clen)
{
	if (clen < S3_SSE_HDR + S3_SSE_TAG)
		return 0;
	uint64_t c = clen - S3_SSE_HDR, nb = (c + CBLK - 1) / CBLK;
	return c - nb * S3_SSE_TAG;
}

uint64_t
s3_obj_size(const struct ol_obj_info *in)
{
	const char *v;
	char b[24];
	long n = in->meta ? ol_s3_meta_get(in->meta, in->meta_len, "ol-sse-size", &v) : -ENOENT;
	if (n <= 0 || n >= (long)sizeof(b))
		return in->size;
	memcpy(b, v, (size_t)n);
	b[n] = '\0';
	return strtoull(b, NULL, 10);
}

/* ---- writer ---- */

int
s3_sse_w_init(struct s3_sse_w *w, const struct s3_sse *e, struct ol_put *p)
{
	memset(w, 0, sizeof(*w));
	w->p = p;
	w->e = e && e->mode ? e : NULL;
	if (!w->e)
		return 0;
	w->ctx = gcm_new(true, e->dkey);
	if (!w->ctx)
		return -EIO;
	w->pbuf = ol_xmalloc(S3_SSE_BLOCK);
	w->obuf = ol_xmalloc(W_FLUSH + CBLK + S3_SSE_HDR);
	RAND_bytes(w->prefix, S3_SSE_HDR);
	memcpy(w->obuf, w->prefix, S3_SSE_HDR);
	w->olen = S3_SSE_HDR;
	return 0;
}

static int
w_block(struct s3_sse_w *w, bool last)
{
	uint8_t iv[12], aad = last ? 1 : 0;
	memcpy(iv, w->prefix, 8);
	iv[8] = (uint8_t)(w->blk >> 24), iv[9] = (uint8_t)(w->blk >> 16);
	iv[10] = (uint8_t)(w->blk >> 8), iv[11] = (uint8_t)w->blk;
	uint8_t *out = w->obuf + w->olen;
	if (gcm_run(w->ctx, true, iv, &aad, 1, w->pbuf, w->plen, out, out + w->plen) < 0)
		return -EIO;
	w->olen += w->plen + S3_SSE_TAG;
	w->plen = 0;
	w->blk++;
	if (w->olen >= W_FLUSH || last) {
		int rc = ol_store_put_write(w->p, w->obuf, w->olen);
		w->olen = 0;
		return rc < 0 ? rc : 0;
	}
	return 0;
}

int
s3_sse_w_write(struct s3_sse_w *w, const void *data, size_t n)
{
	const uint8_t *d = data;
	w->plain += n;
	if (!w->e)
		return ol_store_put_write(w->p, d, n);
	if (!w->ctx)
		return -EIO; /* init failed (OpenSSL) */
	while (n > 0) {
		if (w->plen == S3_SSE_BLOCK) {
			int rc = w_block(w, false);
			if (rc < 0)
				return rc;
		}
		size_t k = S3_SSE_BLOCK - w->plen < n ? S3_SSE_BLOCK - w->plen : n;
		memcpy(w->pbuf + w->plen, d, k);
		w->plen += k;
		d += k;
		n -= k;
	}
	return 0;
}

int
s3_sse_w_finish(struct s3_sse_w *w)
{
	return !w->e ? 0 : w->ctx ? w_block(w, true) : -EIO;
}

void
s3_sse_w_fini(struct s3_sse_w *w)
{
	if (w->pbuf)
		OPENSSL_cleanse(w->pbuf, S3_SSE_BLOCK);
	free(w->pbuf);
	free(w->obuf);
	EVP_CIPHER_CTX_free(w->ctx);
	w->pbuf = w->obuf = NULL;
	w->ctx = NULL;
}

/* ---- reader ---- */

int
s3_sse_rd_init(struct s3_sse_rd *rd, const struct s3_sse *e, struct ol_get *g, uint64_t size)
{
	memset(rd, 0, sizeof(*rd));
	rd->g = g;
	rd->e = e && e->mode ? e : NULL;
	rd->size = size;
	if (!rd->e)
		return 0;
	unsigned n = ol_store_get_part_sizes(g, NULL, 0);
	if (n == 0)
		return -EIO;
	uint64_t *cs = ol_xcalloc(n, sizeof(uint64_t));
	ol_store_get_part_sizes(g, cs, n);
	rd->seg = ol_xcalloc(n, sizeof(*rd->seg));
	rd->nseg = n;
	uint64_t co = 0, po = 0;
	for (unsigned i = 0; i < n; i++) {
		rd->seg[i].cstart = co;
		rd->seg[i].clen = cs[i];
		rd->seg[i].pstart = po;
		rd->seg[i].plen = s3_sse_plain_len(cs[i]);
		co += cs[i];
		po += rd->seg[i].plen;
	}
	free(cs);
	rd->size = po;
	rd->ctx = gcm_new(false, e->dkey);
	if (!rd->ctx)
		return -EIO;
	return 0; /* the buffers come with the first read (a HEAD needs none) */
}

unsigned
s3_sse_rd_parts(struct s3_sse_rd *rd, uint64_t *sizes, unsigned cap)
{
	if (!rd->e)
		return ol_store_get_part_sizes(rd->g, sizes, cap);
	for (unsigned i = 0; i < rd->nseg && i < cap; i++)
		sizes[i] = rd->seg[i].plen;
	return rd->nseg;
}

static int
read_full(struct ol_get *g, uint64_t off, uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = ol_store_get_read(g, off, buf, len);
		if (n <= 0)
			return n < 0 ? (int)n : -EIO;
		off += (uint64_t)n;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t
s3_sse_read(struct s3_sse_rd *rd, uint64_t off, void *buf, size_t len)
{
	if (!rd->e)
		return ol_store_get_read(rd->g, off, buf, len);
	if (!rd->ctx)
		return -EIO; /* init failed */
	if (off >= rd->size || len == 0)
		return 0;
	if (!rd->cbuf) {
		rd->cbuf = ol_xmalloc((size_t)RD_BLOCKS * CBLK);
		rd->pbuf = ol_xmalloc((size_t)RD_BLOCKS * S3_SSE_BLOCK);
	}
	unsigned s = 0;
	while (s + 1 < rd->nseg && off >= rd->seg[s].pstart + rd->seg[s].plen)
		s++;
	struct s3_sse_seg *sg = &rd->seg[s];
	if (!sg->have_prefix) {
		int rc = read_full(rd->g, sg->cstart, sg->prefix, S3_SSE_HDR);
		if (rc < 0)
			return rc;
		sg->have_prefix = true;
	}
	uint64_t po = off - sg->pstart;
	uint64_t nblk = (sg->clen - S3_SSE_HDR + CBLK - 1) / CBLK;
	uint64_t b0 = po / S3_SSE_BLOCK;
	uint64_t want = po % S3_SSE_BLOCK + len;
	uint64_t nb = (want + S3_SSE_BLOCK - 1) / S3_SSE_BLOCK;
	if (nb > RD_BLOCKS)
		nb = RD_BLOCKS;
	if (b0 + nb > nblk)
		nb = nblk - b0;
	uint64_t cfrom = S3_SSE_HDR + b0 * CBLK;
	uint64_t cl = nb * CBLK;
	if (cfrom + cl > sg->clen)
		cl = sg->clen - cfrom;
	int rc = read_full(rd->g, sg->cstart + cfrom, rd->cbuf, (size_t)cl);
	if (rc < 0)
		return rc;
	/* whole blocks that fit the caller's buffer (a streaming GET) are decrypted straight into
	 * it; a read that starts or ends inside a block goes through pbuf. Bytes of a block whose
	 * tag fails are never returned: the call fails. */
	size_t skip = (size_t)(po % S3_SSE_BLOCK), got = 0;
	bool direct = skip == 0 && cl - nb * S3_SSE_TAG <= len;
	uint8_t *dst = direct ? buf : rd->pbuf;
	for (uint64_t j = 0; j < nb; j++) {
		uint64_t bi = b0 + j;
		size_t bl = (size_t)(cl - j * CBLK < CBLK ? cl - j * CBLK : CBLK);
		uint8_t iv[12], aad = bi + 1 == nblk ? 1 : 0;
		memcpy(iv, sg->prefix, 8);
		iv[8] = (uint8_t)(bi >> 24), iv[9] = (uint8_t)(bi >> 16);
		iv[10] = (uint8_t)(bi >> 8), iv[11] = (uint8_t)bi;
		const uint8_t *cb = rd->cbuf + j * CBLK;
		if (bl < S3_SSE_TAG ||
		    gcm_run(rd->ctx, false, iv, &aad, 1, cb, bl - S3_SSE_TAG,
			    dst + j * S3_SSE_BLOCK, (uint8_t *)(cb + bl - S3_SSE_TAG)) < 0) {
			ol_err("s3: block %llu of an encrypted object fails its authentication tag",
			       (unsigned long long)bi);
			return OL_STORE_ECORRUPT;
		}
		got += bl - S3_SSE_TAG;
	}
	if (direct)
		return (ssize_t)got;
	size_t n = got > skip ? got - skip : 0;
	if (n > len)
		n = len;
	memcpy(buf, rd->pbuf + skip, n);
	return (ssize_t)n;
}

void
s3_sse_rd_fini(struct s3_sse_rd *rd)
{
	if (rd->pbuf)
		OPENSSL_cleanse(rd->pbuf, (size_t)RD_BLOCKS * S3_SSE_BLOCK);
	free(rd->pbuf);
	free(rd->cbuf);
	free(rd->seg);
	EVP_CIPHER_CTX_free(rd->ctx);
	memset(rd, 0, sizeof(*rd));
}

/* ---- bucket default encryption (?encryption) ---- */

void
s3_bucket_encryption(struct s3_req *r)
{
	const char *m = r->h->method;
	if (strcmp(m, "DELETE") == 0) {
		r->op = "DeleteBucketEncryption";
		s3_attr_stored(r, s3_bucket_attr_store(r, "sse", NULL, -1), 204);
		return;
	}
	if (strcmp(m, "GET") == 0) {
		r->op = "GetBucketEncryption";
		char bid[S3_KMS_ID_MAX];
		int mode = bucket_default(r, bid);
		if (!mode) {
			s3_error_code(r, "ServerSideEncryptionConfigurationNotFoundError", 404,
				      "The server side encryption configuration was not found",
				      NULL);
			return;
		}
		struct ol_buf x = {0};
		ol_s3_xml_open_root(&x, "ServerSideEncryptionConfiguration");
		ol_buf_adds(&x, "<Rule><ApplyServerSideEncryptionByDefault>");
		ol_s3_xml_elem(&x, "SSEAlgorithm", mode == S3_SSE_KMS ? "aws:kms" : "AES256");
		if (bid[0])
			ol_s3_xml_elem(&x, "KMSMasterKeyID", bid);
		ol_buf_adds(&x, "</ApplyServerSideEncryptionByDefault>"
				"<BucketKeyEnabled>false</BucketKeyEnabled></Rule>"
				"</ServerSideEncryptionConfiguration>");
		s3_send_xml(r, 200, &x);
		return;
	}
	r->op = "PutBucketEncryption";
	struct s3_body b;
	char *body = NULL;
	size_t len = 0;
	if (s3_length_check(r, OL_S3_MAX_XML_BODY) < 0)
		return;
	if (s3_body_slurp(r, OL_S3_MAX_XML_BODY, &body, &len, &b) < 0) {
		s3_error(r, b.err, b.errmsg);
		goto out;
	}
	/* one rule: ApplyServerSideEncryptionByDefault with SSEAlgorithm */
	const char *a = memmem(body, len, "<SSEAlgorithm>", 14);
	const char *root = memmem(body, len, "<ServerSideEncryptionConfiguration", 34);
	const char *end = a ? memmem(a, len - (size_t)(a - body), "</SSEAlgorithm>", 15) : NULL;
	if (!a || !root || !end) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	a += 14;
	size_t al = (size_t)(end - a);
	if (al == 7 && memcmp(a, "aws:kms", 7) == 0) {
		/* KMSMasterKeyID, optional: the default key when absent */
		const char *k = memmem(body, len, "<KMSMasterKeyID>", 16);
		const char *ke =
		    k ? memmem(k, len - (size_t)(k - body), "</KMSMasterKeyID>", 17) : NULL;
		char id[S3_KMS_ID_MAX] = "", attr[8 + S3_KMS_ID_MAX];
		struct s3_sse_req q = {0};
		if (k && (!ke || (size_t)(ke - k - 16) >= sizeof(id))) {
			s3_error(r, OL_S3E_MALFORMED_XML, NULL);
			goto out;
		}
		if (k) {
			memcpy(id, k + 16, (size_t)(ke - k - 16));
			id[ke - k - 16] = '\0';
		}
		if (s3_sse_kms_pick(r, id, &q) < 0)
			goto out;
		int n = snprintf(attr, sizeof(attr), id[0] ? "aws:kms %s" : "aws:kms", id);
		s3_attr_stored(r, s3_bucket_attr_store(r, "sse", attr, n), 200);
		goto out;
	}
	if (al >= 7 && memcmp(a, "aws:kms", 7) == 0) {
		kms_refused(r, "SSEAlgorithm");
		goto out;
	}
	if (al != 6 || memcmp(a, "AES256", 6) != 0) {
		s3_error(r, OL_S3E_MALFORMED_XML, NULL);
		goto out;
	}
	if (!r->srv->sse_master_set) {
		no_master(r);
		goto out;
	}
	s3_attr_stored(r, s3_bucket_attr_store(r, "sse", "AES256", 6), 200);
out:
	free(body);
	s3_body_fini(&b);
}
