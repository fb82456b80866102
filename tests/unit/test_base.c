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

/* ol_clock_http_date against gmtime_r + strftime ("C" locale: the test does not set one), for
 * years 1000-9999 (strftime's %Y does not pad a year of fewer digits; HTTP's date has four) */
static int shown;

static int
date_differs(int64_t secs)
{
	char ours[OL_HTTP_DATE_LEN + 1], want[64];
	time_t t = (time_t)secs;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	ol_clock_http_date(secs, ours);
	if (strlen(ours) == OL_HTTP_DATE_LEN && strcmp(ours, want) == 0)
		return 0;
	if (++shown <= 5)
		fprintf(stderr, "# %lld: ours '%s', strftime '%s'\n", (long long)secs, ours, want);
	return 1;
}

static void
test_http_date(void)
{
	/* the epoch, the day before, RFC 9110's example, leap days (2000 is a leap year, 2100
	 * and 1900 are not), the ends of years and of the 4-digit range, today */
	static const int64_t edge[] = {
	    0,	       -1,	     -86400,	     784111777,	     951782400,
	    951868800, 4107542400LL, 4107456000LL,   -2203891200LL,  -2208988800LL,
	    946684799, 1798761599,   -30610224000LL, 253402300799LL, 1796601600};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int bad = 0, n = 0;
	char out[OL_HTTP_DATE_LEN + 1];

	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++, n++)
		bad += date_differs(edge[i]);
	for (int i = 0; i < 200000; i++, n++) { /* seconds over years 1000-9999 (xorshift) */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		bad += date_differs(-30610224000LL + (int64_t)(x % 284012524800ull));
	}
	for (int64_t t = 1796601600 - 86400 * 3; t < 1796601600 + 86400 * 3; t += 997, n++)
		bad += date_differs(t); /* every hour and minute of a week */
	ok(bad == 0, "HTTP dates as strftime writes them: %d of %d differ", bad, n);
	ok(strcmp(ol_clock_http_date(253402300800LL, out), "Fri, 31 Dec 9999 23:59:59 GMT") == 0 &&
	       strcmp(ol_clock_http_date(-62167219201LL, out), "Sat, 01 Jan 0000 00:00:00 GMT") ==
		   0,
	   "dates past year 9999 or before year 0 are clamped (%s)", out);
	ok(strcmp(ol_clock_http_date(-61372259340LL, out), "Mon, 10 Mar 0025 22:11:00 GMT") == 0,
	   "a year before 1000 has its four digits (%s)", out);
}

int
main(void)
{
	test_hex();
	test_buf();
	test_clock();
	test_http_date();
	tap_done();
}
