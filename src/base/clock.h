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

/* An HTTP date (RFC 9110 IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") of secs since the
 * epoch into out (29 characters and a NUL), as strftime's "%a, %d %b %Y %H:%M:%S GMT" over
 * gmtime_r writes it, without either: gmtime_r takes glibc's time-zone lock and strftime reads
 * the locale, per call. Years 0-9999 (others are clamped to those). Returns out. */
#define OL_HTTP_DATE_LEN 29
char *ol_clock_http_date(int64_t secs, char out[OL_HTTP_DATE_LEN + 1]);

/* A condition variable whose timed waits count CLOCK_MONOTONIC (a wall-clock step neither
 * shortens nor stretches them), and such a wait: mu held, until cv is signalled or ms pass
 * (a spurious wakeup returns early too; callers re-check their condition). */
void ol_cond_init_mono(pthread_cond_t *cv);
void ol_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);

#endif
