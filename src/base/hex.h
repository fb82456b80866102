/* base/hex.h - hexadecimal digits, the one copy (SigV4, checksums, shard file names, URL
 * escapes). Pure: no allocation, any thread. */
#ifndef OL_BASE_HEX_H
#define OL_BASE_HEX_H

#include <stdbool.h>
#include <stddef.h>

/* The digit for v (0..15), lowercase or uppercase. */
char ol_hex_digit(unsigned v, bool upper);

/* n bytes at in as 2n lowercase digits at out, then a NUL (out holds 2n + 1). */
void ol_hex_encode(const void *in, size_t n, char *out);

/* The value of hex digit c (either case), or -1. */
int ol_hex_val(int c);

/* 2n digits at in (either case) as n bytes at out. 0, or -EINVAL on a non-digit (out is then
 * partly written). */
int ol_hex_decode(const char *in, size_t n, void *out);

#endif
