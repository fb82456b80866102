/* base/buf.h - the growable byte buffer, the one copy (XML documents, metrics text, error
 * bodies). Start from {0}; the bytes are always NUL-terminated once anything was added. The
 * daemon's: growth aborts via ol_die on out-of-memory. Not thread-safe (one owner). */
#ifndef OL_BASE_BUF_H
#define OL_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct ol_buf {
	char *p;
	size_t len, cap;
};

void ol_buf_add(struct ol_buf *b, const void *data, size_t n);
void ol_buf_adds(struct ol_buf *b, const char *s);
void ol_buf_addf(struct ol_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ol_buf_vaddf(struct ol_buf *b, const char *fmt, va_list ap);
/* The contents as a C string (an empty buffer gets its terminator). Owned by b. */
char *ol_buf_cstr(struct ol_buf *b);
/* Free the bytes and reset b to {0}. */
void ol_buf_free(struct ol_buf *b);

#endif
