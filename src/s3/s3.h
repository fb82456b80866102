/* s3/s3.h - the S3 front end: routing, SigV4, XML, handlers over the object store.
 *
 * One server per process. Requests are served by the http/ worker threads; each handler call
 * runs to completion on the thread that received the request (blocking store calls). */
#ifndef OL_S3_S3_H
#define OL_S3_S3_H

#include "base/config.h"

struct ol_store;
struct ol_s3_server;

/* Serve S3 on cfg->s3_addr using st. Listening when it returns. cfg and st must outlive the
 * server. Returns 0 and *out, or -errno (bind failure, bad address, no credentials). */
int ol_s3_server_start(const struct ol_config *cfg, struct ol_store *st, struct ol_s3_server **out);

/* The bound TCP port (useful when cfg->s3_addr asks for port 0). */
unsigned ol_s3_server_port(const struct ol_s3_server *s);

/* Stop listening, wait for in-flight requests, free s. NULL is a no-op. */
void ol_s3_server_stop(struct ol_s3_server *s);

#endif
