/* client/s3int.h - internals of libopenlake's S3 client (s3conf.c, s3http.c, s3.c, s3xml.c). */
#ifndef OL_CLIENT_S3INT_H
#define OL_CLIENT_S3INT_H

#include <pthread.h>
#include <stdint.h>

#include "openlake/openlake_s3.h"

struct ol_s3_conf {
	char profile[128];
	char endpoint[512];
	char region[64];
	char access_key[256];
	char secret_key[256];
	char token[2048];
	char host[256];	   /* to connect to */
	char hosthdr[300]; /* Host: header value (host[:port]) */
	char port[8];
	char ca_file[1024]; /* "" = the system's store */
	int tls;	    /* https:// */
};

/* Fill c from o, the environment and the shared files. 0 or a code (ol_s3_last_error set). */
int ol_s3_conf_resolve(struct ol_s3_conf *c, const struct ol_s3_opts *o);

/* Set the calling thread's last error (printf-style). */
void ol_s3_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct s3_conn;
struct ssl_ctx_st;

struct ol_s3 {
	struct ol_s3_conf conf;
	unsigned conns, retries, timeout_ms, backoff_ms;
	uint64_t part_size, max_bps;
	void (*log)(int level, const char *msg, void *arg);
	void *log_arg;
	pthread_mutex_t lock; /* idle list, throttle, progress */
	struct s3_conn *idle;
	unsigned n_idle;
	uint64_t throttle_next_ns;
	struct ssl_ctx_st *tls; /* SSL_CTX for https endpoints, else NULL */
};

/* The SSL_CTX of an https endpoint (s->tls); 0 or OL_S3_ECONFIG (bad CA bundle), -ENOMEM. */
int s3_tls_init(struct ol_s3 *s);

/* One request: a body slice of a scatter list out, the answer's body into a scatter slice
 * (2xx with resp_iov) or a malloc'd buffer (body, freed by s3_req_fini). */
struct s3_req {
	const char *op; /* "UploadPart"...: for messages (NULL = the method) */
	const char *method;
	const char *bucket, *key; /* key NULL: bucket request */
	const char *query;	  /* canonical query ("" none) */
	const char *const *xh;	  /* extra signed headers "name:value" */
	size_t n_xh;
	const char *range; /* "bytes=a-b" or NULL */
	const struct ol_iov *iov;
	size_t n_iov;
	uint64_t off, len; /* body = bytes [off, off+len) of iov */
	const struct ol_iov *resp_iov;
	size_t n_resp_iov;
	uint64_t resp_off, resp_len; /* 2xx body lands here; its length must be resp_len */
	int resp_exact;		     /* 0: a longer body is allowed (the rest is dropped) */
	int ranged;		     /* a Range request: only 206 fills resp_iov */
	/* out */
	int status;
	unsigned attempts;
	uint64_t clen, total; /* Content-Length; object size from Content-Range/Length */
	char etag[80];
	char crc32c[16]; /* x-amz-checksum-crc32c of the answer, "" none */
	char cktype[16]; /* x-amz-checksum-type: "FULL_OBJECT", "COMPOSITE", "" */
	char *body;	 /* non-2xx-into-iov bodies (NUL-terminated) */
	size_t body_len;
};

/* Run r with retries. 0 when an answer came (look at r->status), else -errno / OL_S3_ESERVER
 * after the retry budget (last error set). 2xx/3xx/4xx answers are not retried; 5xx 500, 502,
 * 503, 504 are. */
int s3_do(struct ol_s3 *s, struct s3_req *r);
void s3_req_fini(struct s3_req *r);
/* Map a finished request's non-2xx status to a code and set the last error from its body. */
int s3_status_error(struct s3_req *r, const char *what);
void s3_logf(struct ol_s3 *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void s3_close_all(struct ol_s3 *s);

/* Scatter helpers over bytes [off, off+len) of iov[0..n). */
uint32_t s3_crc32c(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len);
void s3_crc32c_b64(uint32_t crc, char out[16]);
int s3_md5_hex(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len, char out[33]);
int s3_iov_walk(const struct ol_iov *iov, size_t n, uint64_t off, uint64_t len,
		int (*fn)(char *p, size_t l, void *arg), void *arg);

/* XML: fn(element name, text, arg) at the end of each element; 0 or OL_S3_EPROTO. */
typedef int (*s3_xml_fn)(const char *name, const char *text, void *arg);
int s3_xml_walk(const char *buf, size_t len, s3_xml_fn fn, void *arg);

#endif
