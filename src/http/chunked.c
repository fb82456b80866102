/* http/chunked.c - pure decoder of Transfer-Encoding: chunked (RFC 9112 7.1). */
#include "http/http.h"

#include <errno.h>
#include <string.h>
#include "base/hex.h"

enum {
	CK_SIZE0,   /* first hex digit of a chunk-size */
	CK_SIZE,    /* more hex digits */
	CK_EXT,	    /* after the size: BWS / ";ext" up to CR */
	CK_SIZE_LF, /* LF ending the size line */
	CK_DATA,    /* chunk data */
	CK_DATA_CR, /* CRLF after chunk data */
	CK_DATA_LF,
	CK_TR_START, /* start of a trailer line, or CR of the final blank line */
	CK_TR_LINE,  /* inside a trailer line */
	CK_TR_LF,    /* LF ending a trailer line */
	CK_END_LF,   /* LF of the final blank line */
	CK_DONE,
};

void
ol_http_chunked_init(struct ol_http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CK_SIZE0;
	c->max_line = 4096;
	c->max_trailer = 16384;
}

bool
ol_http_chunked_done(const struct ol_http_chunked *c)
{
	return c->state == CK_DONE;
}

uint64_t
ol_http_chunked_data_left(const struct ol_http_chunked *c)
{
	return c->state == CK_DATA ? c->remaining : 0;
}

static int
size_byte(struct ol_http_chunked *c, unsigned char ch)
{
	int v = ol_hex_val(ch);
	if (v >= 0) {
		if (c->remaining >> 56)
			return -EPROTO; /* would overflow 2^60 */
		c->remaining = c->remaining * 16 + (uint64_t)v;
		c->state = CK_SIZE;
		return 0;
	}
	if (c->state == CK_SIZE0)
		return -EPROTO;
	if (ch == '\r') {
		c->state = CK_SIZE_LF;
		return 0;
	}
	if (ch == ';' || ch == ' ' || ch == '\t') {
		c->state = CK_EXT;
		return 0;
	}
	return -EPROTO;
}

static int
end_of_size_line(struct ol_http_chunked *c)
{
	c->line_len = 0;
	c->state = c->remaining ? CK_DATA : CK_TR_START;
	return 0;
}

/* One framing byte. */
static int
frame_byte(struct ol_http_chunked *c, unsigned char ch)
{
	switch (c->state) {
	case CK_SIZE0:
	case CK_SIZE:
		if (++c->line_len > c->max_line)
			return -EMSGSIZE;
		return size_byte(c, ch);
	case CK_EXT:
		if (++c->line_len > c->max_line)
			return -EMSGSIZE;
		if (ch == '\r')
			c->state = CK_SIZE_LF;
		else if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
			return -EPROTO;
		return 0;
	case CK_SIZE_LF:
		return ch == '\n' ? end_of_size_line(c) : -EPROTO;
	case CK_DATA_CR:
		c->state = CK_DATA_LF;
		return ch == '\r' ? 0 : -EPROTO;
	case CK_DATA_LF:
		c->state = CK_SIZE0;
		c->line_len = 0;
		return ch == '\n' ? 0 : -EPROTO;
	default:
		return -EPROTO;
	}
}

/* One trailer byte (states CK_TR_*, CK_END_LF). */
static int
trailer_byte(struct ol_http_chunked *c, unsigned char ch)
{
	if (++c->trailer_len > c->max_trailer)
		return -EMSGSIZE;
	switch (c->state) {
	case CK_TR_START:
		if (ch == '\r') {
			c->state = CK_END_LF;
			return 0;
		}
		if (ch == ':' || ch == ' ' || ch == '\t' || ch < 0x21 || ch == 0x7f)
			return -EPROTO; /* empty name, obs-fold or control */
		c->state = CK_TR_LINE;
		c->line_len = 0;
		return 0;
	case CK_TR_LINE:
		if (ch == '\r') {
			if (!c->line_len)
				return -EPROTO; /* no ':' in the field */
			c->state = CK_TR_LF;
		} else if (ch == ':') {
			c->line_len = 1;
		} else if (ch != '\t' && (ch < 0x20 || ch == 0x7f)) {
			return -EPROTO;
		}
		return 0;
	case CK_TR_LF:
		c->state = CK_TR_START;
		return ch == '\n' ? 0 : -EPROTO;
	case CK_END_LF:
		if (ch != '\n')
			return -EPROTO;
		c->state = CK_DONE;
		return 0;
	default:
		return -EPROTO;
	}
}

ssize_t
ol_http_chunked_feed(struct ol_http_chunked *c, const char *in, size_t len, const char **data,
		     size_t *data_len)
{
	size_t i = 0;
	*data = NULL;
	*data_len = 0;
	while (i < len && c->state != CK_DONE) {
		if (c->state == CK_DATA) {
			size_t n = len - i;
			if (n > c->remaining)
				n = (size_t)c->remaining;
			*data = in + i;
			*data_len = n;
			c->remaining -= n;
			if (!c->remaining)
				c->state = CK_DATA_CR;
			return (ssize_t)(i + n);
		}
		unsigned char ch = (unsigned char)in[i++];
		int rc = c->state >= CK_TR_START ? trailer_byte(c, ch) : frame_byte(c, ch);
		if (rc)
			return rc;
	}
	return (ssize_t)i;
}
