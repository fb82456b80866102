/* base/hex.c - hexadecimal digits (see hex.h). */
#include "base/hex.h"

#include <errno.h>
#include <stdint.h>

static const char lower[] = "0123456789abcdef", upper_d[] = "0123456789ABCDEF";

char
ol_hex_digit(unsigned v, bool upper)
{
	return (upper ? upper_d : lower)[v & 15];
}

void
ol_hex_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = lower[p[i] >> 4];
		out[2 * i + 1] = lower[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int
ol_hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
ol_hex_decode(const char *in, size_t n, void *out)
{
	uint8_t *o = out;
	for (size_t i = 0; i < n; i++) {
		int hi = ol_hex_val((unsigned char)in[2 * i]);
		int lo = hi < 0 ? -1 : ol_hex_val((unsigned char)in[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		o[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
