/* tests/unit/test_checksum.c - check values and streaming for s3/auth/checksum. TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/auth/checksum.h"
#include "base/hex.h"

static int n_test, n_fail;

static void
ok(int cond, const char *what)
{
	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_test, what);
}

static int
hex_is(enum ol_cksum_alg alg, const char *s, size_t n, const char *want)
{
	uint8_t raw[OL_CKSUM_MAX_RAW];
	char hx[2 * OL_CKSUM_MAX_RAW + 1];
	int len = ol_cksum_compute(alg, s, n, raw);
	if (len < 0 || (size_t)len != ol_cksum_len(alg))
		return 0;
	ol_hex_encode(raw, (size_t)len, hx);
	if (strcmp(hx, want) != 0)
		printf("# %s: got %s want %s\n", ol_cksum_alg_name(alg), hx, want);
	return strcmp(hx, want) == 0;
}

static void
test_check_values(void)
{
	const char *c = "123456789";
	ok(hex_is(OL_CKSUM_CRC32, c, 9, "cbf43926"), "CRC32 check value");
	ok(hex_is(OL_CKSUM_CRC32C, c, 9, "e3069283"), "CRC32C check value");
	ok(hex_is(OL_CKSUM_CRC64NVME, c, 9, "ae8b14860a799888"), "CRC64NVME check value");
	ok(hex_is(OL_CKSUM_SHA1, "abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d"), "SHA1 abc");
	ok(hex_is(OL_CKSUM_SHA256, "abc", 3,
		  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	   "SHA256 abc");
	ok(hex_is(OL_CKSUM_MD5, "", 0, "d41d8cd98f00b204e9800998ecf8427e"), "MD5 empty");
	ok(hex_is(OL_CKSUM_MD5, "abc", 3, "900150983cd24fb0d6963f7d28e17f72"), "MD5 abc");
	ok(hex_is(OL_CKSUM_CRC32, "", 0, "00000000"), "CRC32 empty");
	ok(hex_is(OL_CKSUM_CRC64NVME, "", 0, "0000000000000000"), "CRC64NVME empty");
	/* S3 documents crc32 of "Hello World" bodies; cross-check with zlib's value */
	ok(hex_is(OL_CKSUM_CRC32, "The quick brown fox jumps over the lazy dog", 43, "414fa339"),
	   "CRC32 quick brown fox");
	ok(hex_is(OL_CKSUM_CRC32C, "The quick brown fox jumps over the lazy dog", 43, "22620404"),
	   "CRC32C quick brown fox");
}

/* bit-at-a-time CRC-64/NVME, the reference for the table and CLMUL paths */
static uint64_t
crc64nvme_naive(const uint8_t *p, size_t n)
{
	uint64_t c = ~0ULL;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ULL : c >> 1;
	}
	return ~c;
}

static void
test_crc64_reference(void)
{
	size_t n = 70000;
	uint8_t *buf = malloc(n);
	srand(7);
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)rand();
	int good = 1;
	for (size_t len = 0; len < 700 && good; len++) /* every short length, all alignments */
		for (size_t off = 0; off < 3 && good; off++) {
			uint8_t raw[OL_CKSUM_MAX_RAW];
			ol_cksum_compute(OL_CKSUM_CRC64NVME, buf + off, len, raw);
			uint64_t v = 0;
			for (int i = 0; i < 8; i++)
				v = v << 8 | raw[i];
			good = v == crc64nvme_naive(buf + off, len);
			if (!good)
				printf("# len %zu off %zu\n", len, off);
		}
	uint8_t raw[OL_CKSUM_MAX_RAW];
	ol_cksum_compute(OL_CKSUM_CRC64NVME, buf, n, raw);
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | raw[i];
	ok(good && v == crc64nvme_naive(buf, n), "CRC64NVME equals the bitwise reference");
	free(buf);
}

static void
test_streaming(void)
{
	enum ol_cksum_alg algs[] = {OL_CKSUM_CRC32, OL_CKSUM_CRC32C, OL_CKSUM_CRC64NVME,
				    OL_CKSUM_SHA1,  OL_CKSUM_SHA256, OL_CKSUM_MD5};
	size_t n = 100003;
	uint8_t *buf = malloc(n);
	srand(42);
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)rand();
	for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
		uint8_t one[OL_CKSUM_MAX_RAW], part[OL_CKSUM_MAX_RAW];
		int l1 = ol_cksum_compute(algs[a], buf, n, one), good = l1 > 0;
		for (int round = 0; round < 20 && good; round++) {
			struct ol_cksum c;
			good &= ol_cksum_init(&c, algs[a]) == 0;
			size_t off = 0;
			while (good && off < n) {
				size_t step = (size_t)rand() % (round < 10 ? 17 : 9000);
				if (step > n - off)
					step = n - off;
				good &= ol_cksum_update(&c, buf + off, step) == 0;
				off += step;
			}
			good &=
			    ol_cksum_final(&c, part) == l1 && memcmp(one, part, (size_t)l1) == 0;
		}
		char what[64];
		snprintf(what, sizeof(what), "%s streaming == one-shot over random splits",
			 ol_cksum_alg_name(algs[a]));
		ok(good, what);
	}
	free(buf);
}

static void
test_names_base64(void)
{
	ok(ol_cksum_from_header("x-amz-checksum-crc32c") == OL_CKSUM_CRC32C, "header crc32c");
	ok(ol_cksum_from_header("X-Amz-Checksum-CRC64NVME") == OL_CKSUM_CRC64NVME,
	   "header crc64nvme any case");
	ok(ol_cksum_from_header("x-amz-checksum-md5") == OL_CKSUM_NONE, "md5 is no header");
	ok(ol_cksum_from_header("x-amz-checksum-") == OL_CKSUM_NONE, "empty alg");
	ok(ol_cksum_from_header("x-amz-checksum-algorithm") == OL_CKSUM_NONE,
	   "x-amz-checksum-algorithm is not a checksum");
	ok(ol_cksum_from_name("SHA256") == OL_CKSUM_SHA256, "name SHA256");
	ok(ol_cksum_from_name("crc32") == OL_CKSUM_CRC32, "name crc32");
	ok(ol_cksum_from_name("MD5") == OL_CKSUM_NONE, "name MD5 not flexible");
	ok(strcmp(ol_cksum_header_name(OL_CKSUM_SHA1), "x-amz-checksum-sha1") == 0, "hdr sha1");
	ok(strcmp(ol_cksum_alg_name(OL_CKSUM_CRC64NVME), "CRC64NVME") == 0, "alg name");

	uint8_t raw[OL_CKSUM_MAX_RAW];
	char b64[OL_CKSUM_MAX_B64];
	int n = ol_cksum_compute(OL_CKSUM_CRC32, "123456789", 9, raw);
	ok(ol_cksum_b64_encode(raw, (size_t)n, b64, sizeof(b64)) == 8 &&
	       strcmp(b64, "y/Q5Jg==") == 0,
	   "base64 of CRC32 check value");
	uint8_t back[8];
	ok(ol_cksum_b64_decode("y/Q5Jg==", 8, back, sizeof(back)) == 4 && memcmp(back, raw, 4) == 0,
	   "base64 decode round trip");
	ok(ol_cksum_b64_decode("y/Q5Jg=", 7, back, sizeof(back)) == -EINVAL, "bad length");
	ok(ol_cksum_b64_decode("y/Q5J*==", 8, back, sizeof(back)) == -EINVAL, "bad char");
	ok(ol_cksum_b64_decode("AAAAAAAA", 8, back, 4) == -ENOSPC, "too small");
	ok(ol_cksum_b64_encode(raw, 4, b64, 8) == -ENOSPC, "encode cap");
	ok(ol_cksum_init(&(struct ol_cksum){0}, OL_CKSUM_NONE) == -EINVAL, "init NONE");
}

static void
test_composite(void)
{
	/* composite over two parts equals the checksum of the two raw part digests */
	uint8_t p1[OL_CKSUM_MAX_RAW], p2[OL_CKSUM_MAX_RAW], cat[8], want[OL_CKSUM_MAX_RAW];
	ol_cksum_compute(OL_CKSUM_CRC32C, "part one", 8, p1);
	ol_cksum_compute(OL_CKSUM_CRC32C, "part two", 8, p2);
	memcpy(cat, p1, 4);
	memcpy(cat + 4, p2, 4);
	ol_cksum_compute(OL_CKSUM_CRC32C, cat, 8, want);
	char wb[OL_CKSUM_MAX_B64], out[OL_CKSUM_MAX_B64];
	ol_cksum_b64_encode(want, 4, wb, sizeof(wb));
	size_t wl = strlen(wb);
	memcpy(wb + wl, "-2", 3);
	struct ol_cksum_composite cc;
	int rc = ol_cksum_composite_init(&cc, OL_CKSUM_CRC32C);
	rc |= ol_cksum_composite_add(&cc, p1, 4);
	rc |= ol_cksum_composite_add(&cc, p2, 4);
	ok(rc == 0 && ol_cksum_composite_final(&cc, out, sizeof(out)) > 0 && strcmp(out, wb) == 0,
	   "composite CRC32C of 2 parts is BASE64-2");
	ol_cksum_composite_init(&cc, OL_CKSUM_SHA256);
	ok(ol_cksum_composite_add(&cc, p1, 4) == -EINVAL, "composite rejects wrong length");
	ol_cksum_fini(&cc.c);
}

int
main(void)
{
	test_check_values();
	test_crc64_reference();
	test_streaming();
	test_names_base64();
	test_composite();
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
