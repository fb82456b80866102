/* Unit tests of base/'s shared helpers: hex, the growable buffer, the clocks. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/hex.h"
#include "base/metrics.h"
#include "tap.h"

static void
test_hex(void)
{
	uint8_t all[256], back[256];
	char h[513];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	ol_hex_encode(all, 256, h);
	ok(strlen(h) == 512 && strncmp(h, "000102", 6) == 0 && strcmp(h + 506, "fdfeff") == 0,
	   "encode: lowercase, every byte, NUL-terminated");
	ok(ol_hex_decode(h, 256, back) == 0 && memcmp(all, back, 256) == 0, "decode round-trips");
	ok(ol_hex_decode("A0fF", 2, back) == 0 && back[0] == 0xa0 && back[1] == 0xff,
	   "decode takes either case");
	ok(ol_hex_decode("0g", 1, back) == -EINVAL && ol_hex_decode("g0", 1, back) == -EINVAL &&
	       ol_hex_decode("0\0", 1, back) == -EINVAL,
	   "decode refuses a non-digit in either place");
	ok(ol_hex_val('7') == 7 && ol_hex_val('c') == 12 && ol_hex_val('C') == 12 &&
	       ol_hex_val('/') == -1 && ol_hex_val(':') == -1 && ol_hex_val('G') == -1,
	   "digit values and their edges");
	ok(ol_hex_digit(0x2b, false) == 'b' && ol_hex_digit(11, true) == 'B', "single digits");
	ol_hex_encode(all, 0, h);
	ok(h[0] == '\0', "empty input: empty string");
}

static void
test_buf(void)
{
	struct ol_buf b = {0};
	ok(strcmp(ol_buf_cstr(&b), "") == 0 && b.len == 0, "empty buffer is an empty string");
	for (int i = 0; i < 10000; i++)
		ol_buf_addf(&b, "%d,", i % 10);
	ok(b.len == 20000 && b.p[b.len] == '\0' && strncmp(b.p + 19996, "8,9,", 4) == 0,
	   "grows over many appends, stays terminated");
	ol_buf_add(&b, "x\0y", 3);
	ok(b.len == 20003 && memcmp(b.p + 20000, "x\0y", 3) == 0, "binary bytes kept");
	ol_buf_free(&b);
	ok(!b.p && !b.len && !b.cap, "free resets");
	ol_buf_adds(&b, "again");
	ok(strcmp(b.p, "again") == 0, "reusable after free");
	ol_buf_free(&b);
	struct ol_strbuf s = {0};
	for (int i = 0; i < 2000; i++)
		ol_strbuf_printf(&s, "metric_%d %d\n", i, i);
	ok(s.p && strncmp(s.p, "metric_0 0\nmetric_1 1\n", 22) == 0 && s.p[s.len] == '\0' &&
	       strstr(s.p, "metric_1999 1999\n") == s.p + s.len - 17,
	   "the metrics text buffer grows the same way");
	ol_strbuf_free(&s);
}

static void
test_clock(void)
{
	uint64_t a = ol_clock_ns(), ms = ol_clock_ms();
	struct timespec d = {0, 2000000};
	nanosleep(&d, NULL);
	uint64_t b = ol_clock_ns();
	ok(b - a >= 2000000, "monotonic clock advances across a 2 ms sleep (%llu ns)",
	   (unsigned long long)(b - a));
	ok(ol_clock_ms() >= ms && ol_clock_us() / 1000 >= ms, "ms and us agree with ns");
	ok(ol_clock_wall_ns() > 1700000000ll * 1000000000ll, "wall clock is after 2023");
}

int
main(void)
{
	test_hex();
	test_buf();
	test_clock();
	tap_done();
}
