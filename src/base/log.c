#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic int ol_log_threshold = OL_LOG_INFO;

static const char *const level_names[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};

int
ol_log_set_level(const char *name)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++) {
		if (strcmp(name, names[i]) == 0) {
			atomic_store_explicit(&ol_log_threshold, i, memory_order_relaxed);
			return 0;
		}
	}
	return -EINVAL;
}

static void
log_vemit(int level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s [t%ld] ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000,
		     level_names[level < 0   ? 0
				 : level > 3 ? 3
					     : level],
		     (long)syscall(SYS_gettid));
	if (n < 0)
		return;
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	/* one event, one line: fold embedded newlines */
	for (size_t i = (size_t)n; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void
ol_log_emit(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vemit(level, fmt, ap);
	va_end(ap);
}

void
ol_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vemit(OL_LOG_ERROR, fmt, ap);
	va_end(ap);
	abort();
}

void *
ol_xmalloc(unsigned long n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		ol_die("out of memory allocating %lu bytes", n);
	return p;
}

void *
ol_xcalloc(unsigned long n, unsigned long size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		ol_die("out of memory allocating %lu x %lu bytes", n, size);
	return p;
}

void *
ol_xrealloc(void *p, unsigned long n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		ol_die("out of memory reallocating %lu bytes", n);
	return q;
}

char *
ol_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		ol_die("out of memory duplicating a string");
	return p;
}
