/* base/buf.c - the growable byte buffer (see buf.h). */
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static void
reserve(struct ol_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	b->p = ol_xrealloc(b->p, cap);
	b->cap = cap;
}

void
ol_buf_add(struct ol_buf *b, const void *data, size_t n)
{
	reserve(b, n);
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
ol_buf_adds(struct ol_buf *b, const char *s)
{
	ol_buf_add(b, s, strlen(s));
}

void
ol_buf_vaddf(struct ol_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n <= 0)
		return;
	reserve(b, (size_t)n);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void
ol_buf_addf(struct ol_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ol_buf_vaddf(b, fmt, ap);
	va_end(ap);
}

char *
ol_buf_cstr(struct ol_buf *b)
{
	reserve(b, 0);
	b->p[b->len] = '\0';
	return b->p;
}

void
ol_buf_free(struct ol_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
