/* base/clock.h - the clocks, the one copy. Any thread. */
#ifndef OL_BASE_CLOCK_H
#define OL_BASE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds / microseconds / milliseconds (intervals, deadlines). */
uint64_t ol_clock_ns(void);
uint64_t ol_clock_us(void);
uint64_t ol_clock_ms(void);

/* CLOCK_REALTIME in nanoseconds since the epoch (timestamps that are stored or shown). */
int64_t ol_clock_wall_ns(void);

#endif
