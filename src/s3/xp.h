/* s3/xp.h - the bounded expat walker behind the S3 request-body parsers (xmlparse.c), for the
 * parsers that live in other files of the S3 util library (rules.c). Internal to s3/. */
#ifndef OL_S3_XP_H
#define OL_S3_XP_H

#include <expat.h>
#include <stddef.h>

#define XP_DEPTH 8
#define XP_TEXT	 (OL_S3_MAX_KEY * 6 + 16)

struct xp;
/* Called at the end of each element with its text (NUL-terminated, n bytes), x->depth and
 * x->path still naming it. A negative return stops the parse with -EBADMSG. */
typedef int (*xp_end_fn)(struct xp *x, const char *text, size_t n);

struct xp {
	XML_Parser p;
	int depth;
	const char *path[XP_DEPTH]; /* local names, borrowed from a static table or strdup'd */
	char names[XP_DEPTH][32];
	char text[XP_TEXT];
	size_t text_len;
	int err;
	xp_end_fn on_end;
	void *arg;
};

/* Parse xml (n <= OL_S3_MAX_XML_BODY bytes; no DTD) calling x->on_end (x zeroed but for
 * on_end and arg). 0, -EBADMSG (not well-formed, too deep, text too long, on_end refused),
 * or the error on_end left in x->err. */
int ol_s3_xp_run(struct xp *x, const char *xml, size_t n);

#endif
