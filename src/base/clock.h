/* base/clock.h - the clocks, the one copy. Any thread. */
#ifndef OL_BASE_CLOCK_H
#define OL_BASE_CLOCK_H

#include <pthread.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds / microseconds / milliseconds (intervals, deadlines). */
uint64_t ol_clock_ns(void);
uint64_t ol_clock_us(void);
uint64_t ol_clock_ms(void);

/* CLOCK_REALTIME in nanoseconds since the epoch (timestamps that are stored or shown). */
int64_t ol_clock_wall_ns(void);

/* A condition variable whose timed waits count CLOCK_MONOTONIC (a wall-clock step neither
 * shortens nor stretches them), and such a wait: mu held, until cv is signalled or ms pass
 * (a spurious wakeup returns early too; callers re-check their condition). */
void ol_cond_init_mono(pthread_cond_t *cv);
void ol_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);

#endif
