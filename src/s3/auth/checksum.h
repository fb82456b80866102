/* s3/auth/checksum.h - streaming checksums for x-amz-checksum-*, ETag and Content-MD5.
 *
 * CRC32 (ISA-L crc32_gzip_refl), CRC32C (ISA-L crc32_iscsi), CRC64NVME (slice-by-8 table,
 * poly 0xAD93D23594C93659 reflected), SHA1, SHA256, MD5 (OpenSSL EVP). Values are big-endian
 * raw bytes as S3 sends them base64-encoded. A context is used by one thread at a time. */
#ifndef OL_S3_AUTH_CHECKSUM_H
#define OL_S3_AUTH_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

enum ol_cksum_alg {
	OL_CKSUM_NONE = 0,
	OL_CKSUM_CRC32,
	OL_CKSUM_CRC32C,
	OL_CKSUM_CRC64NVME,
	OL_CKSUM_SHA1,
	OL_CKSUM_SHA256,
	OL_CKSUM_MD5, /* ETag / Content-MD5 only; not an x-amz-checksum algorithm */
};

#define OL_CKSUM_MAX_RAW 32 /* largest raw digest (SHA256) */
#define OL_CKSUM_MAX_B64 64 /* room for base64 of the largest digest plus "-10000" and NUL */

struct ol_cksum {
	enum ol_cksum_alg alg;
	uint64_t crc; /* CRC state */
	void *md;     /* EVP_MD_CTX for SHA1/SHA256/MD5 */
};

/* Start a checksum. Returns 0, -EINVAL (NONE/unknown alg) or -ENOMEM. */
int ol_cksum_init(struct ol_cksum *c, enum ol_cksum_alg alg);
/* Add n bytes. Returns 0 or -EIO (OpenSSL failure). */
int ol_cksum_update(struct ol_cksum *c, const void *p, size_t n);
/* Write the raw digest into out and release the context. Returns the length or -EIO. */
int ol_cksum_final(struct ol_cksum *c, uint8_t out[OL_CKSUM_MAX_RAW]);
/* Release without finishing (safe after final, and on a zeroed struct). */
void ol_cksum_fini(struct ol_cksum *c);
/* One shot: returns the length or -errno. */
int ol_cksum_compute(enum ol_cksum_alg alg, const void *p, size_t n, uint8_t out[OL_CKSUM_MAX_RAW]);

/* Raw digest length of alg (4, 4, 8, 20, 32, 16), 0 for NONE. */
size_t ol_cksum_len(enum ol_cksum_alg alg);

/* "x-amz-checksum-crc32c" (case-insensitive) -> alg; NONE when not one. MD5 is never returned. */
enum ol_cksum_alg ol_cksum_from_header(const char *name);
/* "CRC32C" (x-amz-sdk-checksum-algorithm / x-amz-checksum-algorithm value, case-insensitive)
 * -> alg; NONE when unknown. */
enum ol_cksum_alg ol_cksum_from_name(const char *value);
/* "x-amz-checksum-crc32c", "CRC32C"; NULL for NONE/MD5 header, "MD5" name. */
const char *ol_cksum_header_name(enum ol_cksum_alg alg);
const char *ol_cksum_alg_name(enum ol_cksum_alg alg);

/* Standard base64 with padding, NUL-terminated. Returns the text length or -ENOSPC. */
int ol_cksum_b64_encode(const uint8_t *raw, size_t n, char *out, size_t cap);
/* Decode strict padded base64 (len chars). Returns the byte count or -EINVAL / -ENOSPC. */
int ol_cksum_b64_decode(const char *b64, size_t len, uint8_t *out, size_t cap);

/* Multipart "checksum of checksums": alg over the concatenated raw part checksums; the value
 * S3 shows is "BASE64-N" with N the part count. */
struct ol_cksum_composite {
	struct ol_cksum c;
	unsigned parts;
};
int ol_cksum_composite_init(struct ol_cksum_composite *cc, enum ol_cksum_alg alg);
/* raw: one part's raw checksum, ol_cksum_len(alg) bytes. Returns 0, -EINVAL or -EIO. */
int ol_cksum_composite_add(struct ol_cksum_composite *cc, const uint8_t *raw, size_t n);
/* Writes "BASE64-N" into out. Returns the text length or -errno. Releases the context. */
int ol_cksum_composite_final(struct ol_cksum_composite *cc, char *out, size_t cap);

#endif
