/* s3/auth/checksum.c - CRC32/CRC32C (ISA-L), CRC64NVME (table), SHA1/SHA256/MD5 (OpenSSL). */
#include "s3/auth/checksum.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>
#include <openssl/evp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define OL_CRC64_CLMUL 1
#endif

/* ---- CRC-64/NVME: reflected poly 0x9A6C9329AC4BC9B5 (0xAD93D23594C93659 reversed) ---- */

#define CRC64NVME_POLY_REFL 0x9A6C9329AC4BC9B5ULL

static uint64_t crc64_table[8][256];
#ifdef OL_CRC64_CLMUL
static void clmul_init(void);
#endif
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

static void
crc64_init_table(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC64NVME_POLY_REFL : c >> 1;
		crc64_table[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc64_table[t][i] = (crc64_table[t - 1][i] >> 8) ^
					    crc64_table[0][crc64_table[t - 1][i] & 0xff];
#ifdef OL_CRC64_CLMUL
	clmul_init();
#endif
}

/* state is the running register (already inverted at init, inverted again at final) */
static uint64_t
crc64_table_update(uint64_t crc, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		v ^= crc; /* little-endian host (x86-64, arm64) */
		crc = crc64_table[7][v & 0xff] ^ crc64_table[6][(v >> 8) & 0xff] ^
		      crc64_table[5][(v >> 16) & 0xff] ^ crc64_table[4][(v >> 24) & 0xff] ^
		      crc64_table[3][(v >> 32) & 0xff] ^ crc64_table[2][(v >> 40) & 0xff] ^
		      crc64_table[1][(v >> 48) & 0xff] ^ crc64_table[0][v >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#ifdef OL_CRC64_CLMUL
/* Carry-less multiply folding (as ISA-L and Linux do for other CRCs). The constants are
 * reflect(x^e mod P), derived here from the polynomial: folding a 128-bit lane forward by d bits
 * multiplies its low half by x^(d+63) and its high half by x^(d-1). The last 16 bytes are
 * reduced with the table, so no Barrett step is needed. */
static uint64_t kf[4][2]; /* d = 128, 256, 384, 512 */
static int have_clmul;

static uint64_t
xpow_mod(unsigned e)
{
	uint64_t v = 1;
	for (unsigned i = 0; i < e; i++)
		v = (v << 1) ^ ((v >> 63) ? 0xAD93D23594C93659ULL : 0);
	return v;
}

static uint64_t
reflect64(uint64_t v)
{
	uint64_t r = 0;
	for (int i = 0; i < 64; i++)
		r |= ((v >> i) & 1) << (63 - i);
	return r;
}

static void
clmul_init(void)
{
	__builtin_cpu_init();
	have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	for (unsigned j = 0; j < 4; j++) {
		unsigned d = 128 * (j + 1);
		kf[j][0] = reflect64(xpow_mod(d + 63));
		kf[j][1] = reflect64(xpow_mod(d - 1));
	}
}

__attribute__((target("pclmul,sse4.1"))) static inline __m128i
fold(__m128i x, const uint64_t k[2])
{
	__m128i kk = _mm_set_epi64x((long long)k[1], (long long)k[0]);
	return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}

/* n is a multiple of 16 and at least 64. Returns the register after p[0..n). */
__attribute__((target("pclmul,sse4.1"))) static uint64_t
crc64_clmul(uint64_t crc, const uint8_t *p, size_t n)
{
	__m128i x[4];
	for (int i = 0; i < 4; i++)
		x[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
	x[0] = _mm_xor_si128(x[0], _mm_cvtsi64_si128((long long)crc));
	p += 64;
	n -= 64;
	for (; n >= 64; p += 64, n -= 64)
		for (int i = 0; i < 4; i++)
			x[i] = _mm_xor_si128(fold(x[i], kf[3]),
					     _mm_loadu_si128((const __m128i *)(p + 16 * i)));
	__m128i r = _mm_xor_si128(_mm_xor_si128(fold(x[0], kf[2]), fold(x[1], kf[1])),
				  _mm_xor_si128(fold(x[2], kf[0]), x[3]));
	for (; n >= 16; p += 16, n -= 16)
		r = _mm_xor_si128(fold(r, kf[0]), _mm_loadu_si128((const __m128i *)p));
	uint8_t last[16];
	_mm_storeu_si128((__m128i *)last, r);
	return crc64_table_update(0, last, 16);
}
#endif

static uint64_t
crc64nvme_update(uint64_t crc, const uint8_t *p, size_t n)
{
#ifdef OL_CRC64_CLMUL
	if (have_clmul && n >= 128) {
		size_t bulk = n & ~(size_t)15;
		crc = crc64_clmul(crc, p, bulk);
		p += bulk;
		n -= bulk;
	}
#endif
	return crc64_table_update(crc, p, n);
}

static const EVP_MD *
md_of(enum ol_cksum_alg alg)
{
	switch (alg) {
	case OL_CKSUM_SHA1:
		return EVP_sha1();
	case OL_CKSUM_SHA256:
		return EVP_sha256();
	case OL_CKSUM_MD5:
		return EVP_md5();
	default:
		return NULL;
	}
}

size_t
ol_cksum_len(enum ol_cksum_alg alg)
{
	static const size_t len[] = {0, 4, 4, 8, 20, 32, 16};
	if ((unsigned)alg >= sizeof(len) / sizeof(len[0]))
		return 0;
	return len[alg];
}

int
ol_cksum_init(struct ol_cksum *c, enum ol_cksum_alg alg)
{
	memset(c, 0, sizeof(*c));
	c->alg = alg;
	switch (alg) {
	case OL_CKSUM_CRC32:
	case OL_CKSUM_CRC32C:
		c->crc = 0;
		return 0;
	case OL_CKSUM_CRC64NVME:
		pthread_once(&crc64_once, crc64_init_table);
		c->crc = ~0ULL;
		return 0;
	case OL_CKSUM_SHA1:
	case OL_CKSUM_SHA256:
	case OL_CKSUM_MD5:
		c->md = EVP_MD_CTX_new();
		if (!c->md)
			return -ENOMEM;
		if (EVP_DigestInit_ex(c->md, md_of(alg), NULL) != 1) {
			ol_cksum_fini(c);
			return -EIO;
		}
		return 0;
	default:
		c->alg = OL_CKSUM_NONE;
		return -EINVAL;
	}
}

static uint32_t
crc32c_update(uint32_t crc, const uint8_t *p, size_t n)
{
	/* ISA-L's crc32_iscsi neither inverts on entry nor on exit: keep ~crc between calls */
	uint32_t reg = ~crc;
	while (n) {
		size_t step = n > (size_t)INT_MAX ? (size_t)1 << 30 : n;
		reg = crc32_iscsi((unsigned char *)p, (int)step, reg);
		p += step;
		n -= step;
	}
	return ~reg;
}

int
ol_cksum_update(struct ol_cksum *c, const void *p, size_t n)
{
	switch (c->alg) {
	case OL_CKSUM_CRC32:
		c->crc = crc32_gzip_refl((uint32_t)c->crc, p, n);
		return 0;
	case OL_CKSUM_CRC32C:
		c->crc = crc32c_update((uint32_t)c->crc, p, n);
		return 0;
	case OL_CKSUM_CRC64NVME:
		c->crc = crc64nvme_update(c->crc, p, n);
		return 0;
	default:
		if (!c->md)
			return -EINVAL;
		return EVP_DigestUpdate(c->md, p, n) == 1 ? 0 : -EIO;
	}
}

static void
put_be(uint8_t *out, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		out[i] = (uint8_t)v;
		v >>= 8;
	}
}

int
ol_cksum_final(struct ol_cksum *c, uint8_t out[OL_CKSUM_MAX_RAW])
{
	unsigned int len = 0;
	int rc;
	switch (c->alg) {
	case OL_CKSUM_CRC32:
	case OL_CKSUM_CRC32C:
		put_be(out, (uint32_t)c->crc, 4);
		rc = 4;
		break;
	case OL_CKSUM_CRC64NVME:
		put_be(out, ~c->crc, 8);
		rc = 8;
		break;
	default:
		if (!c->md)
			return -EINVAL;
		rc = EVP_DigestFinal_ex(c->md, out, &len) == 1 ? (int)len : -EIO;
		break;
	}
	ol_cksum_fini(c);
	return rc;
}

void
ol_cksum_fini(struct ol_cksum *c)
{
	if (c->md)
		EVP_MD_CTX_free(c->md);
	c->md = NULL;
}

int
ol_cksum_compute(enum ol_cksum_alg alg, const void *p, size_t n, uint8_t out[OL_CKSUM_MAX_RAW])
{
	struct ol_cksum c;
	int rc = ol_cksum_init(&c, alg);
	if (rc < 0)
		return rc;
	rc = ol_cksum_update(&c, p, n);
	if (rc < 0) {
		ol_cksum_fini(&c);
		return rc;
	}
	return ol_cksum_final(&c, out);
}

static const char *const alg_names[] = {NULL,	"CRC32",  "CRC32C", "CRC64NVME",
					"SHA1", "SHA256", "MD5"};

const char *
ol_cksum_alg_name(enum ol_cksum_alg alg)
{
	if ((unsigned)alg >= sizeof(alg_names) / sizeof(alg_names[0]))
		return NULL;
	return alg_names[alg];
}

const char *
ol_cksum_header_name(enum ol_cksum_alg alg)
{
	static const char *const hdr[] = {NULL,
					  "x-amz-checksum-crc32",
					  "x-amz-checksum-crc32c",
					  "x-amz-checksum-crc64nvme",
					  "x-amz-checksum-sha1",
					  "x-amz-checksum-sha256",
					  NULL};
	if ((unsigned)alg >= sizeof(hdr) / sizeof(hdr[0]))
		return NULL;
	return hdr[alg];
}

enum ol_cksum_alg
ol_cksum_from_name(const char *value)
{
	if (!value)
		return OL_CKSUM_NONE;
	for (int a = OL_CKSUM_CRC32; a <= OL_CKSUM_SHA256; a++)
		if (strcasecmp(value, alg_names[a]) == 0)
			return (enum ol_cksum_alg)a;
	return OL_CKSUM_NONE;
}

enum ol_cksum_alg
ol_cksum_from_header(const char *name)
{
	static const char prefix[] = "x-amz-checksum-";
	if (!name || strncasecmp(name, prefix, sizeof(prefix) - 1) != 0)
		return OL_CKSUM_NONE;
	return ol_cksum_from_name(name + sizeof(prefix) - 1);
}

int
ol_cksum_b64_encode(const uint8_t *raw, size_t n, char *out, size_t cap)
{
	size_t need = 4 * ((n + 2) / 3) + 1;
	if (need > cap || n > INT_MAX / 2)
		return -ENOSPC;
	return EVP_EncodeBlock((unsigned char *)out, raw, (int)n);
}

static int
b64_char_ok(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '+' || ch == '/';
}

int
ol_cksum_b64_decode(const char *b64, size_t len, uint8_t *out, size_t cap)
{
	if (len % 4 != 0 || len > INT_MAX / 2)
		return -EINVAL;
	size_t pad = 0;
	if (len >= 1 && b64[len - 1] == '=')
		pad++;
	if (len >= 2 && b64[len - 2] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++)
		if (!b64_char_ok(b64[i]))
			return -EINVAL;
	size_t n = len / 4 * 3 - pad;
	if (n > cap)
		return -ENOSPC;
	uint8_t tmp[len / 4 * 3 + 1];
	if (EVP_DecodeBlock(tmp, (const unsigned char *)b64, (int)len) < 0)
		return -EINVAL;
	memcpy(out, tmp, n);
	return (int)n;
}

int
ol_cksum_composite_init(struct ol_cksum_composite *cc, enum ol_cksum_alg alg)
{
	cc->parts = 0;
	return ol_cksum_init(&cc->c, alg);
}

int
ol_cksum_composite_add(struct ol_cksum_composite *cc, const uint8_t *raw, size_t n)
{
	if (n != ol_cksum_len(cc->c.alg))
		return -EINVAL;
	cc->parts++;
	return ol_cksum_update(&cc->c, raw, n);
}

int
ol_cksum_composite_final(struct ol_cksum_composite *cc, char *out, size_t cap)
{
	uint8_t raw[OL_CKSUM_MAX_RAW];
	int n = ol_cksum_final(&cc->c, raw);
	if (n < 0)
		return n;
	int len = ol_cksum_b64_encode(raw, (size_t)n, out, cap);
	if (len < 0)
		return len;
	int k = snprintf(out + len, cap - (size_t)len, "-%u", cc->parts);
	if (k < 0 || (size_t)k >= cap - (size_t)len)
		return -ENOSPC;
	return len + k;
}
