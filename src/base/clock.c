/* base/clock.c - the clocks (see clock.h). */
#include "base/clock.h"

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
