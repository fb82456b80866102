/* base/clock.c - the clocks (see clock.h). */
#include "base/clock.h"

#include <string.h>
#include <time.h>

uint64_t
ol_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
ol_clock_us(void)
{
	return ol_clock_ns() / 1000u;
}

uint64_t
ol_clock_ms(void)
{
	return ol_clock_ns() / 1000000u;
}

int64_t
ol_clock_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
ol_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

void
ol_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (ms < 0)
		ms = 0;
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	(void)pthread_cond_timedwait(cv, mu, &ts);
}

/* two decimal digits of v (0-99) at p */
static char *
dig2(char *p, int v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
	return p + 2;
}

char *
ol_clock_http_date(int64_t secs, char out[OL_HTTP_DATE_LEN + 1])
{
	static const char wday[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
	static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	const int64_t lo = -62167219200LL, hi = 253402300799LL; /* 0000-01-01, 9999-12-31 */
	int64_t t = secs < lo ? lo : secs > hi ? hi : secs;
	int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400), sod = t - days * 86400;
	/* civil date from days since 1970-01-01 (eras of 400 years, March-based years) */
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
	int d = (int)(doy - (153 * mp + 2) / 5 + 1), m = (int)(mp < 10 ? mp + 3 : mp - 9);
	int y = (int)(yoe + era * 400 + (m <= 2));
	int w = (int)(((days % 7) + 7) % 7);
	char *p = out;

	memcpy(p, wday[w], 3);
	p[3] = ',';
	p[4] = ' ';
	p = dig2(p + 5, d);
	*p++ = ' ';
	memcpy(p, mon[m - 1], 3);
	p[3] = ' ';
	p = dig2(dig2(p + 4, y / 100), y % 100);
	*p++ = ' ';
	p = dig2(p, (int)(sod / 3600));
	*p++ = ':';
	p = dig2(p, (int)(sod / 60 % 60));
	*p++ = ':';
	p = dig2(p, (int)(sod % 60));
	memcpy(p, " GMT", 5);
	return out;
}
