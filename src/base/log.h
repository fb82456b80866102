/* base/log.h - one line per event: time, level, thread, message. */
#ifndef OL_BASE_LOG_H
#define OL_BASE_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

enum ol_log_level { OL_LOG_ERROR = 0, OL_LOG_WARN = 1, OL_LOG_INFO = 2, OL_LOG_DEBUG = 3 };

/* messages above this level are dropped before formatting; atomic, so the level may change
 * while other threads log (relaxed: a message near the change may go either way) */
extern _Atomic int ol_log_threshold;

/* Parse "error|warn|info|debug"; returns 0 or -EINVAL. */
int ol_log_set_level(const char *name);

/* Write one line to stderr: "2026-12-01T18:00:00.123Z INFO  [t3] msg". Thread-safe.
 * A trailing newline in fmt is not needed. */
void ol_log_emit(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ol_log(level, ...)                                                                         \
	do {                                                                                       \
		if ((level) <= atomic_load_explicit(&ol_log_threshold, memory_order_relaxed))      \
			ol_log_emit((level), __VA_ARGS__);                                         \
	} while (0)
#define ol_err(...)   ol_log(OL_LOG_ERROR, __VA_ARGS__)
#define ol_warn(...)  ol_log(OL_LOG_WARN, __VA_ARGS__)
#define ol_info(...)  ol_log(OL_LOG_INFO, __VA_ARGS__)
#define ol_debug(...) ol_log(OL_LOG_DEBUG, __VA_ARGS__)

/* Abort with a clear log line (used for out-of-memory in the daemon). */
void ol_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc/calloc/realloc/strdup that abort via ol_die on failure (daemon only, never the client
 * lib). */
void *ol_xmalloc(unsigned long n);
void *ol_xcalloc(unsigned long n, unsigned long size);
void *ol_xrealloc(void *p, unsigned long n);
char *ol_xstrdup(const char *s);

#endif
