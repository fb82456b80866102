/* client/s3.c - libopenlake's S3 operations: parallel multipart PUT (with resume), parallel
 * ranged GET into a scatter list, HEAD, DELETE, CreateBucket, ListObjectsV2. */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3int.h"

#define OL_API	   __attribute__((visibility("default")))
#define MAX_CONNS  256
#define MAX_THREAD 64

OL_API int
ol_s3_new(const struct ol_s3_opts *o, struct ol_s3 **out)
{
	struct ol_s3 *s;
	int rc;
	*out = NULL;
	if (!o || o->size < offsetof(struct ol_s3_opts, log) || o->conns > MAX_CONNS) {
		ol_s3_set_error("ol_s3_new: bad options (size, or conns > %d)", MAX_CONNS);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = ol_s3_conf_resolve(&s->conf, o);
	if (!rc)
		rc = s3_tls_init(s);
	if (rc) {
		free(s);
		return rc;
	}
	s->conns = o->conns ? o->conns : 8;
	s->retries = o->retries ? o->retries : 5;
	s->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	s->backoff_ms = o->backoff_ms ? o->backoff_ms : 100;
	s->part_size = o->part_size;
	s->max_bps = o->max_bytes_per_sec;
	if (o->size >= offsetof(struct ol_s3_opts, log_arg) + sizeof(void *)) {
		s->log = o->log;
		s->log_arg = o->log_arg;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

OL_API void
ol_s3_free(struct ol_s3 *s)
{
	if (!s)
		return;
	s3_close_all(s);
	SSL_CTX_free(s->tls);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

OL_API const char *
ol_s3_endpoint(const struct ol_s3 *s)
{
	return s->conf.endpoint;
}

OL_API const char *
ol_s3_region(const struct ol_s3 *s)
{
	return s->conf.region;
}

OL_API const char *
ol_s3_access_key(const struct ol_s3 *s)
{
	return s->conf.access_key;
}

OL_API const char *
ol_s3_strerror(int rc)
{
	switch (rc) {
	case OL_S3_ENOTFOUND:
		return "not found";
	case OL_S3_EDENIED:
		return "access denied";
	case OL_S3_ECLIENT:
		return "request refused";
	case OL_S3_ESERVER:
		return "server error";
	case OL_S3_ECHECKSUM:
		return "checksum mismatch";
	case OL_S3_EPROTO:
		return "bad answer from the server";
	case OL_S3_ECONFIG:
		return "configuration error";
	default:
		return strerror(rc < 0 ? -rc : rc);
	}
}

OL_API uint64_t
ol_s3_part_size(const struct ol_s3 *s, uint64_t total)
{
	uint64_t min = (total + OL_S3_MAX_PARTS - 1) / OL_S3_MAX_PARTS, p;
	if (s->part_size)
		return s->part_size > min ? s->part_size : min;
	for (p = OL_S3_MIN_PART; p < min; p *= 2)
		;
	/* at least conns parts when the object allows, never below 8 MiB */
	while (p / 2 >= OL_S3_MIN_PART && (total + p - 1) / p < s->conns)
		p /= 2;
	return p;
}

static uint64_t
iov_total(const struct ol_iov *iov, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += iov[i].len;
	return t;
}

static int
check_names(const char *bucket, const char *key)
{
	if (!bucket || !*bucket || strchr(bucket, '/') || (key && !*key)) {
		ol_s3_set_error("bad bucket or key name ('%s', '%s')", bucket ? bucket : "",
				key ? key : "");
		return -EINVAL;
	}
	return 0;
}

/* ---- parallel runner ---- */

struct job {
	struct ol_s3 *s;
	size_t n_items;
	atomic_size_t next;
	atomic_int stop;
	int (*fn)(struct job *j, size_t item);
	void *ctx;
	int rc; /* first failure, under s->lock */
	char err[1024];
	uint64_t done, total;
	ol_s3_progress_fn progress;
	void *parg;
};

static void
job_fail(struct job *j, int rc)
{
	pthread_mutex_lock(&j->s->lock);
	if (!j->rc) {
		j->rc = rc;
		snprintf(j->err, sizeof(j->err), "%s", ol_s3_last_error());
	}
	pthread_mutex_unlock(&j->s->lock);
	atomic_store(&j->stop, 1);
}

static int
job_progress(struct job *j, uint64_t n)
{
	int cancel = 0;
	pthread_mutex_lock(&j->s->lock);
	j->done += n;
	if (j->progress)
		cancel = j->progress(j->done, j->total, j->parg);
	pthread_mutex_unlock(&j->s->lock);
	if (cancel) {
		ol_s3_set_error("transfer cancelled by the progress callback");
		return -ECANCELED;
	}
	return 0;
}

static void *
job_thread(void *arg)
{
	struct job *j = arg;
	while (!atomic_load(&j->stop)) {
		size_t i = atomic_fetch_add(&j->next, 1);
		if (i >= j->n_items)
			break;
		int rc = j->fn(j, i);
		if (rc)
			job_fail(j, rc);
	}
	return NULL;
}

static int
job_run(struct job *j)
{
	pthread_t th[MAX_THREAD];
	size_t nt = j->s->conns < MAX_THREAD ? j->s->conns : MAX_THREAD, started = 0;
	if (nt > j->n_items)
		nt = j->n_items;
	for (size_t i = 1; i < nt; i++) {
		if (pthread_create(&th[i], NULL, job_thread, j) != 0)
			break;
		started = i;
	}
	job_thread(j); /* the caller's thread works too */
	for (size_t i = 1; i <= started; i++)
		pthread_join(th[i], NULL);
	if (j->rc)
		ol_s3_set_error("%s", j->err);
	return j->rc;
}

/* ---- small requests ---- */

OL_API int
ol_s3_head(struct ol_s3 *s, const char *bucket, const char *key, uint64_t *size, char *etag,
	   size_t cap)
{
	struct s3_req r = {
	    .op = "HeadObject", .method = "HEAD", .bucket = bucket, .key = key, .query = ""};
	int rc = check_names(bucket, key);
	if (rc)
		return rc;
	rc = s3_do(s, &r);
	if (!rc && r.status / 100 != 2)
		rc = s3_status_error(&r, "HeadObject");
	if (!rc) {
		*size = r.clen;
		if (etag && cap)
			snprintf(etag, cap, "%s", r.etag);
	}
	s3_req_fini(&r);
	return rc;
}

OL_API int
ol_s3_delete(struct ol_s3 *s, const char *bucket, const char *key)
{
	struct s3_req r = {
	    .op = "DeleteObject", .method = "DELETE", .bucket = bucket, .key = key, .query = ""};
	int rc = check_names(bucket, key);
	if (rc)
		return rc;
	rc = s3_do(s, &r);
	if (!rc && r.status / 100 != 2 && r.status != 404)
		rc = s3_status_error(&r, "DeleteObject");
	s3_req_fini(&r);
	return rc;
}

OL_API int
ol_s3_create_bucket(struct ol_s3 *s, const char *bucket)
{
	struct s3_req r = {.op = "CreateBucket", .method = "PUT", .bucket = bucket, .query = ""};
	int rc = check_names(bucket, NULL);
	if (rc)
		return rc;
	rc = s3_do(s, &r);
	if (!rc && r.status / 100 != 2 &&
	    !(r.status == 409 && r.body && strstr(r.body, "BucketAlreadyOwnedByYou")))
		rc = s3_status_error(&r, "CreateBucket");
	s3_req_fini(&r);
	return rc;
}

/* ---- listing ---- */

struct list_page {
	char key[1100];
	uint64_t size;
	int truncated, have_key;
	char token[1100];
	ol_s3_list_fn fn;
	void *arg;
};

static int
list_field(const char *name, const char *text, void *arg)
{
	struct list_page *p = arg;
	if (!strcmp(name, "Key")) {
		snprintf(p->key, sizeof(p->key), "%s", text);
		p->have_key = 1;
	} else if (!strcmp(name, "Size")) {
		p->size = strtoull(text, NULL, 10);
	} else if (!strcmp(name, "Contents") && p->have_key) {
		p->have_key = 0;
		return p->fn(p->key, p->size, p->arg);
	} else if (!strcmp(name, "IsTruncated")) {
		p->truncated = !strcmp(text, "true");
	} else if (!strcmp(name, "NextContinuationToken")) {
		snprintf(p->token, sizeof(p->token), "%s", text);
	}
	return 0;
}

OL_API int
ol_s3_list(struct ol_s3 *s, const char *bucket, const char *prefix, ol_s3_list_fn fn, void *arg)
{
	struct list_page p = {.fn = fn, .arg = arg};
	char q[4096], ep[3200], et[3400];
	int rc = check_names(bucket, NULL);
	if (rc)
		return rc;
	if (ol_s3_uri_encode(prefix ? prefix : "", 0, ep, sizeof(ep)))
		return -ENAMETOOLONG;
	do {
		struct s3_req r = {
		    .op = "ListObjectsV2", .method = "GET", .bucket = bucket, .query = q};
		if (ol_s3_uri_encode(p.token, 0, et, sizeof(et)))
			return -ENAMETOOLONG;
		snprintf(q, sizeof(q), "%s%s%slist-type=2&prefix=%s",
			 p.token[0] ? "continuation-token=" : "", p.token[0] ? et : "",
			 p.token[0] ? "&" : "", ep);
		p.truncated = 0;
		p.token[0] = 0;
		rc = s3_do(s, &r);
		if (!rc && r.status != 200)
			rc = s3_status_error(&r, "ListObjectsV2");
		if (!rc)
			rc = s3_xml_walk(r.body ? r.body : "", r.body_len, list_field, &p);
		s3_req_fini(&r);
		if (!rc && p.truncated && !p.token[0])
			rc = OL_S3_EPROTO;
	} while (!rc && p.truncated);
	return rc;
}

/* ---- PUT ---- */

struct part_have {
	uint64_t size;
	char etag[80]; /* unquoted, "" = not there */
};

struct put_ctx {
	const char *bucket, *key;
	const struct ol_iov *iov;
	size_t n;
	uint64_t total, psize;
	unsigned nparts;
	char upload_id[512], qid[1200]; /* raw and URI-encoded */
	char (*etags)[80];
	char (*crcs)[16];
	struct part_have *have; /* OL_S3_PUT_RESUME: parts already there, index = number - 1 */
	atomic_uint resumed;
};

static void
unquote(const char *in, char *out, size_t cap)
{
	size_t l = strlen(in);
	if (l >= 2 && in[0] == '"' && in[l - 1] == '"') {
		in++;
		l -= 2;
	}
	snprintf(out, cap, "%.*s", (int)l, in);
}

static int
put_single(struct ol_s3 *s, struct put_ctx *p, char *etag, size_t cap)
{
	char crc[16], xh0[64];
	const char *xh[1] = {xh0};
	s3_crc32c_b64(s3_crc32c(p->iov, p->n, 0, p->total), crc);
	snprintf(xh0, sizeof(xh0), "x-amz-checksum-crc32c:%s", crc);
	struct s3_req r = {.op = "PutObject",
			   .method = "PUT",
			   .bucket = p->bucket,
			   .key = p->key,
			   .query = "",
			   .xh = xh,
			   .n_xh = 1,
			   .iov = p->iov,
			   .n_iov = p->n,
			   .len = p->total};
	int rc = s3_do(s, &r);
	if (!rc && r.status != 200)
		rc = s3_status_error(&r, "PutObject");
	if (!rc && r.crc32c[0] && strcmp(r.crc32c, crc) != 0) {
		ol_s3_set_error("PUT /%s/%s: the server stored CRC32C %s, we sent %s", p->bucket,
				p->key, r.crc32c, crc);
		rc = OL_S3_ECHECKSUM;
	}
	if (!rc && etag && cap)
		snprintf(etag, cap, "%s", r.etag);
	s3_req_fini(&r);
	return rc;
}

static int
id_field(const char *name, const char *text, void *arg)
{
	if (!strcmp(name, "UploadId"))
		snprintf(arg, 512, "%s", text);
	return 0;
}

static int
mpu_create(struct ol_s3 *s, struct put_ctx *p)
{
	const char *xh[1] = {"x-amz-checksum-algorithm:CRC32C"};
	struct s3_req r = {.op = "CreateMultipartUpload",
			   .method = "POST",
			   .bucket = p->bucket,
			   .key = p->key,
			   .query = "uploads=",
			   .xh = xh,
			   .n_xh = 1};
	int rc = s3_do(s, &r);
	if (!rc && r.status != 200)
		rc = s3_status_error(&r, "CreateMultipartUpload");
	if (!rc)
		rc = s3_xml_walk(r.body ? r.body : "", r.body_len, id_field, p->upload_id);
	if (!rc && !p->upload_id[0]) {
		ol_s3_set_error("CreateMultipartUpload /%s/%s: no UploadId in the answer",
				p->bucket, p->key);
		rc = OL_S3_EPROTO;
	}
	s3_req_fini(&r);
	return rc;
}

struct uploads_scan {
	const char *key;
	char cur_key[1100], cur_id[512];
	char *found; /* 512 */
};

static int
uploads_field(const char *name, const char *text, void *arg)
{
	struct uploads_scan *u = arg;
	if (!strcmp(name, "Key"))
		snprintf(u->cur_key, sizeof(u->cur_key), "%s", text);
	else if (!strcmp(name, "UploadId"))
		snprintf(u->cur_id, sizeof(u->cur_id), "%s", text);
	else if (!strcmp(name, "Upload") && !strcmp(u->cur_key, u->key))
		snprintf(u->found, 512, "%s", u->cur_id); /* oldest first: the last is the newest */
	return 0;
}

struct parts_scan {
	struct put_ctx *p;
	unsigned num;
	uint64_t size;
	char etag[80];
	int truncated;
	unsigned next_marker;
};

static int
parts_field(const char *name, const char *text, void *arg)
{
	struct parts_scan *ps = arg;
	if (!strcmp(name, "PartNumber"))
		ps->num = (unsigned)strtoul(text, NULL, 10);
	else if (!strcmp(name, "Size"))
		ps->size = strtoull(text, NULL, 10);
	else if (!strcmp(name, "ETag"))
		unquote(text, ps->etag, sizeof(ps->etag));
	else if (!strcmp(name, "IsTruncated"))
		ps->truncated = !strcmp(text, "true");
	else if (!strcmp(name, "NextPartNumberMarker"))
		ps->next_marker = (unsigned)strtoul(text, NULL, 10);
	else if (!strcmp(name, "Part") && ps->num >= 1 && ps->num <= ps->p->nparts) {
		ps->p->have[ps->num - 1].size = ps->size;
		snprintf(ps->p->have[ps->num - 1].etag, 80, "%s", ps->etag);
	}
	return 0;
}

/* OL_S3_PUT_RESUME: the newest upload in progress for this key and its parts; 0 with
 * upload_id "" when there is none */
static int
mpu_find(struct ol_s3 *s, struct put_ctx *p)
{
	char q[4096], ek[3200];
	struct uploads_scan u = {.key = p->key, .found = p->upload_id};
	struct parts_scan ps = {.p = p};
	int rc;
	if (ol_s3_uri_encode(p->key, 0, ek, sizeof(ek)))
		return -ENAMETOOLONG;
	snprintf(q, sizeof(q), "prefix=%s&uploads=", ek);
	struct s3_req r = {
	    .op = "ListMultipartUploads", .method = "GET", .bucket = p->bucket, .query = q};
	rc = s3_do(s, &r);
	if (!rc && r.status != 200)
		rc = s3_status_error(&r, "ListMultipartUploads");
	if (!rc)
		rc = s3_xml_walk(r.body ? r.body : "", r.body_len, uploads_field, &u);
	s3_req_fini(&r);
	if (rc || !p->upload_id[0])
		return rc;
	if (ol_s3_uri_encode(p->upload_id, 0, p->qid, sizeof(p->qid)))
		return -ENAMETOOLONG;
	do {
		struct s3_req l = {.op = "ListParts",
				   .method = "GET",
				   .bucket = p->bucket,
				   .key = p->key,
				   .query = q};
		if (ps.next_marker)
			snprintf(q, sizeof(q), "part-number-marker=%u&uploadId=%s", ps.next_marker,
				 p->qid);
		else
			snprintf(q, sizeof(q), "uploadId=%s", p->qid);
		ps.truncated = 0;
		rc = s3_do(s, &l);
		if (!rc && l.status != 200)
			rc = s3_status_error(&l, "ListParts");
		if (!rc)
			rc = s3_xml_walk(l.body ? l.body : "", l.body_len, parts_field, &ps);
		s3_req_fini(&l);
	} while (!rc && ps.truncated && ps.next_marker);
	return rc;
}

static int
put_part(struct job *j, size_t i)
{
	struct ol_s3 *s = j->s;
	struct put_ctx *p = j->ctx;
	uint64_t off = (uint64_t)i * p->psize;
	uint64_t len = p->total - off < p->psize ? p->total - off : p->psize;
	char q[1400], xh0[64], md5[33];
	const char *xh[1] = {xh0};
	int rc;
	s3_crc32c_b64(s3_crc32c(p->iov, p->n, off, len), p->crcs[i]);
	if (p->have && p->have[i].etag[0] && p->have[i].size == len) {
		rc = s3_md5_hex(p->iov, p->n, off, len, md5);
		if (rc)
			return rc;
		if (!strcasecmp(md5, p->have[i].etag)) {
			snprintf(p->etags[i], 80, "\"%s\"", md5);
			atomic_fetch_add(&p->resumed, 1);
			return job_progress(j, len);
		}
	}
	snprintf(xh0, sizeof(xh0), "x-amz-checksum-crc32c:%s", p->crcs[i]);
	snprintf(q, sizeof(q), "partNumber=%zu&uploadId=%s", i + 1, p->qid);
	struct s3_req r = {.op = "UploadPart",
			   .method = "PUT",
			   .bucket = p->bucket,
			   .key = p->key,
			   .query = q,
			   .xh = xh,
			   .n_xh = 1,
			   .iov = p->iov,
			   .n_iov = p->n,
			   .off = off,
			   .len = len};
	rc = s3_do(s, &r);
	if (!rc && r.status != 200)
		rc = s3_status_error(&r, "UploadPart");
	if (!rc && r.crc32c[0] && strcmp(r.crc32c, p->crcs[i]) != 0) {
		ol_s3_set_error("UploadPart %zu of /%s/%s: the server stored CRC32C %s, we sent %s",
				i + 1, p->bucket, p->key, r.crc32c, p->crcs[i]);
		rc = OL_S3_ECHECKSUM;
	}
	if (!rc)
		snprintf(p->etags[i], 80, "%s", r.etag);
	s3_req_fini(&r);
	return rc ? rc : job_progress(j, len);
}

static char *
complete_xml(struct put_ctx *p, size_t *len)
{
	size_t cap = 128 + (size_t)p->nparts * 200, o;
	char *x = malloc(cap);
	if (!x)
		return NULL;
	o = (size_t)snprintf(x, cap, "<CompleteMultipartUpload>");
	for (unsigned i = 0; i < p->nparts; i++)
		o += (size_t)snprintf(x + o, cap - o,
				      "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag>"
				      "<ChecksumCRC32C>%s</ChecksumCRC32C></Part>",
				      i + 1, p->etags[i], p->crcs[i]);
	o += (size_t)snprintf(x + o, cap - o, "</CompleteMultipartUpload>");
	*len = o;
	return x;
}

static int
etag_field(const char *name, const char *text, void *arg)
{
	if (!strcmp(name, "ETag"))
		snprintf(arg, 512, "%s", text);
	return 0;
}

static int
mpu_complete(struct ol_s3 *s, struct put_ctx *p, char *etag, size_t cap)
{
	size_t len = 0;
	char q[1300], *x = complete_xml(p, &len);
	int rc = -ENOMEM;
	struct ol_iov iov = {x, len};
	snprintf(q, sizeof(q), "uploadId=%s", p->qid);
	for (unsigned attempt = 1; x && attempt <= s->retries; attempt++) {
		struct s3_req r = {.op = "CompleteMultipartUpload",
				   .method = "POST",
				   .bucket = p->bucket,
				   .key = p->key,
				   .query = q,
				   .iov = &iov,
				   .n_iov = 1,
				   .len = len};
		uint64_t size;
		rc = s3_do(s, &r);
		if (!rc && r.status == 200 && r.body && strstr(r.body, "<Error>")) {
			rc = OL_S3_ESERVER; /* 200 with an error inside: retry */
			ol_s3_set_error("CompleteMultipartUpload /%s/%s: %.300s", p->bucket, p->key,
					r.body);
		} else if (!rc && r.status == 200) {
			if (etag && cap) {
				char e[512] = "";
				(void)s3_xml_walk(r.body ? r.body : "", r.body_len, etag_field, e);
				snprintf(etag, cap, "%s", e);
			}
		} else if (!rc && r.status == 404 && (attempt > 1 || r.attempts > 1) &&
			   ol_s3_head(s, p->bucket, p->key, &size, etag, cap) == 0 &&
			   size == p->total) {
			rc = 0; /* an earlier attempt completed it; its answer was lost */
		} else if (!rc) {
			rc = s3_status_error(&r, "CompleteMultipartUpload");
		}
		s3_req_fini(&r);
		if (rc != OL_S3_ESERVER && rc != -ECONNRESET && rc != -ETIMEDOUT)
			break;
	}
	free(x);
	return rc;
}

static void
mpu_abort(struct ol_s3 *s, struct put_ctx *p)
{
	char q[1300], keep[1024];
	snprintf(keep, sizeof(keep), "%s", ol_s3_last_error());
	snprintf(q, sizeof(q), "uploadId=%s", p->qid);
	struct s3_req r = {.op = "AbortMultipartUpload",
			   .method = "DELETE",
			   .bucket = p->bucket,
			   .key = p->key,
			   .query = q};
	(void)s3_do(s, &r);
	s3_req_fini(&r);
	ol_s3_set_error("%s", keep);
}

static int
put_multipart(struct ol_s3 *s, struct put_ctx *p, unsigned flags, struct job *j, char *etag,
	      size_t cap)
{
	int rc = 0;
	p->etags = calloc(p->nparts, sizeof(*p->etags));
	p->crcs = calloc(p->nparts, sizeof(*p->crcs));
	if (flags & OL_S3_PUT_RESUME)
		p->have = calloc(p->nparts, sizeof(*p->have));
	if (!p->etags || !p->crcs || ((flags & OL_S3_PUT_RESUME) && !p->have)) {
		rc = -ENOMEM;
		goto out;
	}
	if (flags & OL_S3_PUT_RESUME)
		rc = mpu_find(s, p);
	if (!rc && !p->upload_id[0]) {
		rc = mpu_create(s, p);
		if (!rc && ol_s3_uri_encode(p->upload_id, 0, p->qid, sizeof(p->qid)))
			rc = -ENAMETOOLONG;
	}
	if (rc)
		goto out;
	j->n_items = p->nparts;
	j->ctx = p;
	rc = job_run(j);
	if (!rc)
		rc = mpu_complete(s, p, etag, cap);
	if (rc && !(flags & OL_S3_PUT_KEEP_FAILED))
		mpu_abort(s, p);
out:
	free(p->etags);
	free(p->crcs);
	free(p->have);
	return rc;
}

OL_API int
ol_s3_put(struct ol_s3 *s, const char *bucket, const char *key, const struct ol_iov *iov, size_t n,
	  unsigned flags, ol_s3_progress_fn progress, void *arg, char *etag, size_t cap,
	  unsigned *resumed_parts)
{
	struct put_ctx p = {.bucket = bucket, .key = key, .iov = iov, .n = n};
	struct job j = {.s = s, .fn = put_part, .progress = progress, .parg = arg};
	int rc = check_names(bucket, key);
	if (resumed_parts)
		*resumed_parts = 0;
	if (rc)
		return rc;
	p.total = j.total = iov_total(iov, n);
	if (p.total > OL_S3_MAX_OBJECT) {
		ol_s3_set_error("object of %llu bytes: larger than S3's 5 TiB",
				(unsigned long long)p.total);
		return -EFBIG;
	}
	p.psize = ol_s3_part_size(s, p.total);
	if (p.total <= p.psize) {
		rc = put_single(s, &p, etag, cap);
		if (!rc && progress && progress(p.total, p.total, arg)) {
			ol_s3_set_error("transfer cancelled by the progress callback");
			rc = -ECANCELED;
		}
		return rc;
	}
	p.nparts = (unsigned)((p.total + p.psize - 1) / p.psize);
	rc = put_multipart(s, &p, flags, &j, etag, cap);
	if (resumed_parts)
		*resumed_parts = atomic_load(&p.resumed);
	return rc;
}

/* ---- GET ---- */

struct get_ctx {
	const char *bucket, *key;
	const struct ol_iov *iov;
	size_t n;
	uint64_t off, len, psize;
	uint64_t first; /* bytes of range 0: up to the object's next multiple of psize */
	int whole;
};

/* Range i of a parallel GET. Ranges end on multiples of psize in the object, not in the
 * caller's window, so a read from an offset (a safetensors file's data after its header)
 * asks for the same aligned ranges a multipart PUT wrote as parts: servers that store
 * parts, or stripes within parts, then read each stripe for one request only. */
static int
get_range(struct job *j, size_t i)
{
	struct get_ctx *g = j->ctx;
	uint64_t o = i ? g->first + (uint64_t)(i - 1) * g->psize : 0;
	uint64_t l = i ? g->psize : g->first;
	if (l > g->len - o)
		l = g->len - o;
	char range[64];
	snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)(g->off + o),
		 (unsigned long long)(g->off + o + l - 1));
	struct s3_req r = {.op = "GetObject",
			   .method = "GET",
			   .bucket = g->bucket,
			   .key = g->key,
			   .query = "",
			   .range = range,
			   .ranged = 1,
			   .resp_iov = g->iov,
			   .n_resp_iov = g->n,
			   .resp_off = o,
			   .resp_len = l,
			   .resp_exact = 1};
	int rc = s3_do(j->s, &r);
	if (!rc && r.status != 206)
		rc = s3_status_error(&r, "GetObject");
	if (rc == -ERANGE)
		ol_s3_set_error("GET /%s/%s: the object ends before byte %llu", g->bucket, g->key,
				(unsigned long long)(g->off + o + l));
	s3_req_fini(&r);
	return rc ? rc : job_progress(j, l);
}

static int
check_crc(struct get_ctx *g, const struct s3_req *r)
{
	const char *want = r->crc32c;
	char got[16];
	/* none; or per part: "crc-N", or a multipart object's (ETag "md5-N") unless the server
	   says it is the CRC32C of the whole object (S3's x-amz-checksum-type FULL_OBJECT) */
	if (!want[0] || strchr(want, '-') ||
	    (strchr(r->etag, '-') && strcasecmp(r->cktype, "FULL_OBJECT") != 0))
		return 0;
	s3_crc32c_b64(s3_crc32c(g->iov, g->n, 0, g->len), got);
	if (strcmp(got, want) == 0)
		return 0;
	ol_s3_set_error("GET /%s/%s: data has CRC32C %s, the server says %s", g->bucket, g->key,
			got, want);
	return OL_S3_ECHECKSUM;
}

/* one request: a Range, or (OL_S3_GET_WHOLE) the whole object, checked against its CRC32C */
static int
get_one(struct ol_s3 *s, struct get_ctx *g)
{
	const char *xh[1] = {"x-amz-checksum-mode:ENABLED"};
	char range[64];
	snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)g->off,
		 (unsigned long long)(g->off + g->len - 1));
	struct s3_req r = {.op = "GetObject",
			   .method = "GET",
			   .bucket = g->bucket,
			   .key = g->key,
			   .query = "",
			   .xh = xh,
			   .n_xh = g->whole ? 1 : 0,
			   .range = g->whole ? NULL : range,
			   .ranged = !g->whole,
			   .resp_iov = g->iov,
			   .n_resp_iov = g->n,
			   .resp_len = g->len,
			   .resp_exact = g->whole};
	int rc = s3_do(s, &r);
	if (!rc && r.status / 100 != 2)
		rc = s3_status_error(&r, "GetObject");
	if (rc == -ERANGE && g->whole)
		ol_s3_set_error("GET /%s/%s: the object has %llu bytes, not the %llu expected",
				g->bucket, g->key, (unsigned long long)r.clen,
				(unsigned long long)g->len);
	else if (rc == -ERANGE)
		ol_s3_set_error("GET /%s/%s: the object ends before byte %llu", g->bucket, g->key,
				(unsigned long long)(g->off + g->len));
	if (!rc && g->whole)
		rc = check_crc(g, &r);
	s3_req_fini(&r);
	return rc;
}

OL_API int
ol_s3_get(struct ol_s3 *s, const char *bucket, const char *key, uint64_t off,
	  const struct ol_iov *iov, size_t n, unsigned flags, ol_s3_progress_fn progress, void *arg)
{
	struct get_ctx g = {.bucket = bucket,
			    .key = key,
			    .iov = iov,
			    .n = n,
			    .off = off,
			    .whole = (flags & OL_S3_GET_WHOLE) != 0};
	struct job j = {.s = s, .fn = get_range, .ctx = &g, .progress = progress, .parg = arg};
	const char *xh[1] = {"x-amz-checksum-mode:ENABLED"};
	int rc = check_names(bucket, key);
	if (rc)
		return rc;
	g.len = j.total = iov_total(iov, n);
	if (!g.len)
		return 0;
	if (g.whole && off) {
		ol_s3_set_error("GET /%s/%s: OL_S3_GET_WHOLE with an offset", bucket, key);
		return -EINVAL;
	}
	g.psize = ol_s3_part_size(s, g.len);
	if (g.len <= g.psize) {
		rc = get_one(s, &g);
		return rc ? rc : job_progress(&j, g.len);
	}
	struct s3_req h = {.op = "HeadObject",
			   .method = "HEAD",
			   .bucket = bucket,
			   .key = key,
			   .query = "",
			   .xh = xh,
			   .n_xh = 1};
	rc = s3_do(s, &h);
	if (!rc && h.status != 200)
		rc = s3_status_error(&h, "HeadObject");
	if (!rc && (h.clen < off + g.len || (g.whole && h.clen != g.len))) {
		ol_s3_set_error("GET /%s/%s: the object has %llu bytes, asked for up to %llu",
				bucket, key, (unsigned long long)h.clen,
				(unsigned long long)(off + g.len));
		rc = -ERANGE;
	}
	if (!rc)
		g.psize = ol_s3_part_size(s, h.clen); /* the parts our PUT of it would make */
	g.first = g.psize - off % g.psize;
	j.n_items =
	    1 + (size_t)((g.len - (g.len < g.first ? g.len : g.first) + g.psize - 1) / g.psize);
	rc = rc ? rc : job_run(&j);
	if (!rc && !off && h.clen == g.len)
		rc = check_crc(&g, &h);
	s3_req_fini(&h);
	return rc;
}
