/* cmd/openlake/bench_s3.c - `openlake bench s3`: S3 PUT/GET/mixed load. Requests are signed here
 * (SigV4 header auth, UNSIGNED-PAYLOAD or the precomputed SHA-256 of the body), sent over
 * keep-alive HTTP/1.1 connections, one blocking socket and thread per connection. Only 2xx
 * replies with the expected body length count as successes. Included by bench_cmd.c. */
#include "openlake/openlake_s3.h"

#include <getopt.h>
#include <openssl/sha.h>
#include <strings.h>
#include "base/hex.h"

#define S3_HDR_CAP   (64 * 1024)
#define S3_SCRATCH   (256 * 1024)
#define S3_WRONG_LEN 1 /* error code: a 2xx whose body length is not the object size */

enum s3_work { S3_PUT, S3_GET, S3_MIXED };

struct s3conn {
	int fd;
	char *rbuf; /* response headers and buffered bytes */
	size_t rlen, rpos;
	char *scratch;		    /* GET bodies are read here and dropped */
	struct ol_s3_signer signer; /* caches the signing key of the day */
};

struct s3bench {
	char host[256], port[16], hosthdr[300];
	const char *access, *secret, *region, *bucket, *prefix;
	uint64_t size, objects, read_pct;
	enum s3_work work;
	bool signed_payload, prefill, json;
	char *body;	      /* the object bytes: the same for every key */
	char body_hash[65];   /* hex SHA-256 of body */
	struct s3conn *conns; /* one per connection */
};

/* Build the request head of METHOD path (already encoded) into out; returns its length. */
static size_t
s3_request_head(struct s3bench *b, struct s3conn *c, const char *method, const char *path,
		const char *phash, uint64_t clen, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, b->hosthdr);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	c->signer.access_key = b->access;
	c->signer.secret_key = b->secret;
	c->signer.region = b->region;
	size_t k = ol_s3_sign(&c->signer, method, path, "", b->hosthdr, phash, NULL, 0, time(NULL),
			      out + n, cap - (size_t)n);
	if (!k)
		return 0;
	int m = snprintf(out + n + k, cap - (size_t)n - k, "Content-Length: %llu\r\n\r\n",
			 (unsigned long long)clen);
	return m > 0 && (size_t)m < cap - (size_t)n - k ? (size_t)n + k + (size_t)m : 0;
}

/* ---- response reading ---- */

static int
s3_fill(struct s3conn *c)
{
	if (c->rpos > 0) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	if (c->rlen >= S3_HDR_CAP)
		return -E2BIG;
	ssize_t n;
	do
		n = recv(c->fd, c->rbuf + c->rlen, S3_HDR_CAP - c->rlen, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	c->rlen += (size_t)n;
	return 0;
}

/* Read one line ending in \r\n from the buffer (NUL-terminated in place). */
static int
s3_line(struct s3conn *c, char **line)
{
	for (;;) {
		char *p = c->rbuf + c->rpos;
		char *e = memmem(p, c->rlen - c->rpos, "\r\n", 2);
		if (e) {
			*e = 0;
			*line = p;
			c->rpos = (size_t)(e + 2 - c->rbuf);
			return 0;
		}
		int rc = s3_fill(c);
		if (rc)
			return rc;
	}
}

/* Consume n body bytes: from the buffer first, then straight from the socket. When keep is
 * set, up to keep_cap bytes are copied to keep (for error bodies). */
static int
s3_skip(struct s3conn *c, uint64_t n, char *keep, size_t keep_cap, size_t *kept)
{
	while (n) {
		size_t have = c->rlen - c->rpos, take;
		const char *src;
		if (have) {
			take = have < n ? have : (size_t)n;
			src = c->rbuf + c->rpos;
			c->rpos += take;
		} else {
			size_t want = n < S3_SCRATCH ? (size_t)n : S3_SCRATCH;
			ssize_t r = recv(c->fd, c->scratch, want, 0);
			if (r == 0)
				return -ECONNRESET;
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return errno == EAGAIN ? -ETIMEDOUT : -errno;
			}
			take = (size_t)r;
			src = c->scratch;
		}
		if (keep && *kept < keep_cap) {
			size_t k = keep_cap - *kept < take ? keep_cap - *kept : take;
			memcpy(keep + *kept, src, k);
			*kept += k;
		}
		n -= take;
	}
	return 0;
}

static int
s3_chunked(struct s3conn *c, uint64_t *total, char *keep, size_t keep_cap, size_t *kept)
{
	for (;;) {
		char *line, *end;
		int rc = s3_line(c, &line);
		if (rc)
			return rc;
		errno = 0;
		unsigned long long n = strtoull(line, &end, 16);
		if (end == line || errno)
			return -EPROTO;
		if (n == 0)
			break;
		rc = s3_skip(c, n, keep, keep_cap, kept);
		if (rc || (rc = s3_line(c, &line)))
			return rc;
		*total += n;
	}
	for (;;) { /* trailers up to the empty line */
		char *line;
		int rc = s3_line(c, &line);
		if (rc)
			return rc;
		if (!*line)
			return 0;
	}
}

struct s3resp {
	int status;
	uint64_t body_len;
	bool close;
	char err[256]; /* start of an error body */
	size_t err_len;
};

static int
s3_read_headers(struct s3conn *c, struct s3resp *r, int64_t *clen, bool *chunked)
{
	char *line;
	int rc = s3_line(c, &line);
	if (rc)
		return rc;
	if (strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12)
		return -EPROTO;
	r->close = line[7] == '0';
	r->status = (int)strtol(line + 9, NULL, 10);
	for (;;) {
		if ((rc = s3_line(c, &line)))
			return rc;
		if (!*line)
			return 0;
		char *v = strchr(line, ':');
		if (!v)
			return -EPROTO;
		*v++ = 0;
		v += strspn(v, " \t");
		if (strcasecmp(line, "content-length") == 0)
			*clen = (int64_t)strtoull(v, NULL, 10);
		else if (strcasecmp(line, "transfer-encoding") == 0)
			*chunked = strcasestr(v, "chunked") != NULL;
		else if (strcasecmp(line, "connection") == 0)
			r->close = strcasestr(v, "close") != NULL;
	}
}

static int
s3_read_response(struct s3conn *c, bool head, struct s3resp *r)
{
	int64_t clen = -1;
	bool chunked = false;
	memset(r, 0, sizeof(*r));
	int rc = s3_read_headers(c, r, &clen, &chunked);
	if (rc)
		return rc;
	bool ok = r->status >= 200 && r->status < 300;
	char *keep = ok ? NULL : r->err;
	if (head || r->status == 204 || r->status == 304) {
		r->body_len = 0;
	} else if (chunked) {
		rc = s3_chunked(c, &r->body_len, keep, sizeof(r->err) - 1, &r->err_len);
	} else if (clen >= 0) {
		r->body_len = (uint64_t)clen;
		rc = s3_skip(c, (uint64_t)clen, keep, sizeof(r->err) - 1, &r->err_len);
	} else {
		return -EPROTO; /* a body delimited by close: not keep-alive, not supported */
	}
	r->err[r->err_len] = 0;
	return rc;
}

/* ---- one request ---- */

static void
s3_close(struct s3conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->rlen = c->rpos = 0;
}

static int
s3_send(struct s3conn *c, const char *head, size_t hlen, const char *body, uint64_t blen)
{
	ssize_t n;
	do
		n = send(c->fd, head, hlen, MSG_NOSIGNAL | (blen ? MSG_MORE : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0 || (size_t)n != hlen) {
		int rc = n < 0 ? -errno : bench_write_all(c->fd, head + n, hlen - (size_t)n);
		if (rc)
			return rc;
	}
	return blen ? bench_write_all(c->fd, body, blen) : 0;
}

/* Send METHOD key and read the reply. Returns 0 (reply in *r) or -errno. */
static int
s3_request(struct s3bench *b, struct s3conn *c, const char *method, const char *path,
	   const char *body, uint64_t blen, struct s3resp *r)
{
	char head[4096];
	const char *ph = !b->signed_payload ? "UNSIGNED-PAYLOAD"
			 : blen		    ? b->body_hash
					    : OL_S3_EMPTY_SHA256;
	size_t hlen = s3_request_head(b, c, method, path, ph, blen, head, sizeof(head));
	if (!hlen)
		return -ENAMETOOLONG;
	for (int attempt = 0; attempt < 2; attempt++) {
		bool fresh = c->fd < 0;
		if (fresh) {
			int fd = bench_connect(b->host, b->port, 5000);
			if (fd < 0)
				return fd;
			c->fd = fd;
		}
		int rc = s3_send(c, head, hlen, body, blen);
		/* the server may answer (e.g. 403) and close before taking the whole body */
		int rrc = s3_read_response(c, strcmp(method, "HEAD") == 0, r);
		if (rrc == 0) {
			if (r->close || rc)
				s3_close(c);
			return 0;
		}
		s3_close(c);
		/* a kept-alive connection the server closed meanwhile: retry once on a new one */
		if (fresh || (rrc != -ECONNRESET && rrc != -EPIPE && rc != -EPIPE))
			return rrc;
	}
	return -ECONNRESET;
}

static void
s3_key_path(struct s3bench *b, uint64_t idx, char *out, size_t cap)
{
	char raw[1200];
	snprintf(raw, sizeof(raw), "/%s/%s%08llu", b->bucket, b->prefix, (unsigned long long)idx);
	if (ol_s3_uri_encode(raw, 1, out, cap))
		out[0] = 0;
}

static uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static int
s3_do(struct s3bench *b, struct s3conn *c, bool put, uint64_t idx, uint64_t *bytes)
{
	char path[4096];
	struct s3resp r;
	s3_key_path(b, idx, path, sizeof(path));
	int rc = s3_request(b, c, put ? "PUT" : "GET", path, put ? b->body : NULL,
			    put ? b->size : 0, &r);
	if (rc)
		return rc < 0 ? rc : -EIO;
	if (r.status < 200 || r.status >= 300)
		return r.status > 0 ? r.status : -EPROTO;
	if (!put && r.body_len != b->size)
		return S3_WRONG_LEN;
	*bytes = b->size;
	return 0;
}

static int
s3_op_prefill(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct s3bench *b = r->arg;
	return s3_do(b, &b->conns[i], true, seq, bytes);
}

static int
s3_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct s3bench *b = r->arg;
	uint64_t h = mix64(seq);
	bool put = b->work == S3_PUT || (b->work == S3_MIXED && (h >> 32) % 100 >= b->read_pct);
	uint64_t idx = b->work == S3_PUT ? seq % b->objects : h % b->objects;
	return s3_do(b, &b->conns[i], put, idx, bytes);
}

/* ---- setup, flags, main ---- */

static int
s3_make_bucket(struct s3bench *b)
{
	char path[512];
	struct s3resp r;
	snprintf(path, sizeof(path), "/%s", b->bucket);
	int rc = s3_request(b, &b->conns[0], "PUT", path, NULL, 0, &r);
	if (rc) {
		fprintf(stderr,
			"openlake bench s3: cannot reach %s:%s (--endpoint): %s - is openlaked "
			"running there?\n",
			b->host, b->port, strerror(-rc));
		return rc;
	}
	if ((r.status >= 200 && r.status < 300) || r.status == 409)
		return 0; /* created, or BucketAlreadyOwnedByYou / BucketAlreadyExists */
	char *code = strstr(r.err, "<Code>");
	char *end = code ? strstr(code, "</Code>") : NULL;
	if (end)
		*end = 0;
	fprintf(stderr, "openlake bench s3: creating bucket '%s' failed: HTTP %d %s%s\n", b->bucket,
		r.status, end ? code + 6 : "",
		r.status == 403 ? " - check --access-key/--secret-key/--region (or "
				  "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_REGION)"
				: "");
	return r.status; /* the run goes on and reports its errors */
}

static void
s3_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: openlake bench s3 [FLAGS]\n"
	    "\n"
	    "S3 load generator: SigV4-signed PUT/GET over keep-alive HTTP/1.1, one connection\n"
	    "per thread. Only 2xx replies (and, for GET, a body of the object's size) count as\n"
	    "successes; everything else is an error and is counted by status code.\n"
	    "\n"
	    "  --endpoint URL       http://HOST:PORT (default $AWS_ENDPOINT_URL or "
	    "http://127.0.0.1:9000)\n"
	    "  --access-key KEY     default $AWS_ACCESS_KEY_ID or openlakeadmin\n"
	    "  --secret-key KEY     default $AWS_SECRET_ACCESS_KEY or openlakeadmin\n"
	    "  --region NAME        default $AWS_REGION, $AWS_DEFAULT_REGION or us-east-1\n"
	    "  --bucket NAME        default openlake-bench (created if missing)\n"
	    "  --prefix P           key prefix (default bench/); keys are P00000000, P00000001..\n"
	    "  -w, --workload W     put, get or mixed (default get)\n"
	    "  -s, --size N         object size: 4KiB, 1MiB, 64MiB... (default 4KiB)\n"
	    "  -n, --objects N      distinct keys (default: concurrency, at least enough for\n"
	    "                       1000 objects or 1 GiB, whichever is fewer)\n"
	    "  -c, --concurrency N  connections, one thread each (default 16)\n"
	    "  -d, --duration T     10, 10s, 500ms, 2m (default 10s; 0 with --ops)\n"
	    "      --ops N          stop after N operations instead of a duration\n"
	    "      --read-percent N share of GETs in the mixed workload (default 60)\n"
	    "      --payload MODE   unsigned (UNSIGNED-PAYLOAD, default) or signed (SHA-256 of\n"
	    "                       the body, computed once: all objects have the same bytes)\n"
	    "      --no-prefill     get/mixed: do not PUT the objects first\n"
	    "      --histogram      also print the latency distribution, one line per power\n"
	    "                       of two\n"
	    "      --json           print one JSON object with every figure on stdout\n"
	    "  -q, --quiet          no progress lines on stderr\n"
	    "\n"
	    "Example: openlake bench s3 -w get -s 4KiB -c 64 -d 10s --json\n");
}

enum {
	S3F_ENDPOINT = 256,
	S3F_AK,
	S3F_SK,
	S3F_REGION,
	S3F_BUCKET,
	S3F_PREFIX,
	S3F_OPS,
	S3F_READ,
	S3F_PAYLOAD,
	S3F_NOPREFILL,
	S3F_JSON,
	S3F_HIST
};

static const struct option s3_longopts[] = {{"endpoint", required_argument, NULL, S3F_ENDPOINT},
					    {"access-key", required_argument, NULL, S3F_AK},
					    {"secret-key", required_argument, NULL, S3F_SK},
					    {"region", required_argument, NULL, S3F_REGION},
					    {"bucket", required_argument, NULL, S3F_BUCKET},
					    {"prefix", required_argument, NULL, S3F_PREFIX},
					    {"workload", required_argument, NULL, 'w'},
					    {"size", required_argument, NULL, 's'},
					    {"objects", required_argument, NULL, 'n'},
					    {"concurrency", required_argument, NULL, 'c'},
					    {"duration", required_argument, NULL, 'd'},
					    {"ops", required_argument, NULL, S3F_OPS},
					    {"read-percent", required_argument, NULL, S3F_READ},
					    {"payload", required_argument, NULL, S3F_PAYLOAD},
					    {"no-prefill", no_argument, NULL, S3F_NOPREFILL},
					    {"json", no_argument, NULL, S3F_JSON},
					    {"histogram", no_argument, NULL, S3F_HIST},
					    {"quiet", no_argument, NULL, 'q'},
					    {"help", no_argument, NULL, 'h'},
					    {NULL, 0, NULL, 0}};

static const char *
env_or(const char *a, const char *b, const char *def)
{
	const char *v = a ? getenv(a) : NULL;
	if (v && *v)
		return v;
	v = b ? getenv(b) : NULL;
	return v && *v ? v : def;
}

/* Report a getopt failure the way every workload does; returns 2. */
static int
bench_bad_flag(const char *what, int argc, char **argv, int opt)
{
	const char *flag = optind - 1 < argc ? argv[optind - 1] : "?";
	if (opt == ':')
		fprintf(stderr,
			"openlake bench %s: %s needs a value (see openlake bench %s --help)\n",
			what, flag, what);
	else
		fprintf(stderr,
			"openlake bench %s: unknown flag '%s' (see openlake bench %s --help)\n",
			what, flag, what);
	return 2;
}

static int
s3_endpoint(struct s3bench *b, const char *url)
{
	const char *p = url;
	if (strncmp(p, "http://", 7) == 0)
		p += 7;
	else if (strstr(p, "://")) {
		fprintf(stderr,
			"openlake bench s3: --endpoint '%s': only http:// is supported (the bench "
			"speaks plain HTTP/1.1)\n",
			url);
		return -EINVAL;
	}
	char hp[300];
	size_t n = strcspn(p, "/");
	if (n >= sizeof(hp))
		n = sizeof(hp) - 1;
	memcpy(hp, p, n);
	hp[n] = 0;
	if (!strchr(hp, ':') || hp[n ? n - 1 : 0] == ']') {
		if (n + 3 >= sizeof(hp))
			return -EINVAL;
		memcpy(hp + n, ":80", 4);
	}
	if (bench_split_hostport(hp, b->host, sizeof(b->host), b->port, sizeof(b->port))) {
		fprintf(stderr,
			"openlake bench s3: --endpoint '%s' is not http://HOST:PORT (e.g. "
			"http://127.0.0.1:9000)\n",
			url);
		return -EINVAL;
	}
	snprintf(b->hosthdr, sizeof(b->hosthdr), "%s", hp);
	return 0;
}

struct s3opts {
	const char *endpoint;
	double duration;
	uint64_t conc, ops;
	bool quiet, objects_set;
};

static int
s3_flag(struct s3bench *b, struct s3opts *o, int opt, const char *v)
{
	const char *w = "s3";
	switch (opt) {
	case S3F_ENDPOINT:
		o->endpoint = v;
		return 0;
	case S3F_AK:
		b->access = v;
		return 0;
	case S3F_SK:
		b->secret = v;
		return 0;
	case S3F_REGION:
		b->region = v;
		return 0;
	case S3F_BUCKET:
		b->bucket = v;
		return 0;
	case S3F_PREFIX:
		b->prefix = v;
		return 0;
	case S3F_NOPREFILL:
		b->prefill = false;
		return 0;
	case S3F_JSON:
		b->json = true;
		return 0;
	case S3F_HIST:
		bench_show_histogram = true;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 's':
		return bflag_size(w, "--size", v, &b->size);
	case 'c':
		return bflag_u64(w, "--concurrency", v, 1, 4096, &o->conc);
	case 'd':
		return bflag_duration(w, "--duration", v, &o->duration);
	case S3F_OPS:
		return bflag_u64(w, "--ops", v, 1, UINT64_MAX / 2, &o->ops);
	case S3F_READ:
		return bflag_u64(w, "--read-percent", v, 0, 100, &b->read_pct);
	case 'n':
		o->objects_set = true;
		return bflag_u64(w, "--objects", v, 1, 1u << 30, &b->objects);
	case 'w':
		if (strcmp(v, "put") == 0 || strcmp(v, "get") == 0 || strcmp(v, "mixed") == 0) {
			b->work = v[0] == 'p' ? S3_PUT : v[0] == 'g' ? S3_GET : S3_MIXED;
			return 0;
		}
		fprintf(stderr, "openlake bench s3: --workload '%s': use put, get or mixed\n", v);
		return -EINVAL;
	case S3F_PAYLOAD:
		if (strcmp(v, "signed") == 0 || strcmp(v, "unsigned") == 0) {
			b->signed_payload = v[0] == 's';
			return 0;
		}
		fprintf(stderr, "openlake bench s3: --payload '%s': use unsigned or signed\n", v);
		return -EINVAL;
	}
	return -EINVAL;
}

static int
s3_parse(int argc, char **argv, struct s3bench *b, struct s3opts *o)
{
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":w:s:n:c:d:qh", s3_longopts, NULL)) != -1) {
		if (opt == 'h') {
			s3_usage(stdout);
			return 1;
		}
		if (opt == '?' || opt == ':')
			return bench_bad_flag("s3", argc, argv, opt);
		if (s3_flag(b, o, opt, optarg))
			return 2;
	}
	if (optind < argc) {
		fprintf(
		    stderr,
		    "openlake bench s3: unexpected argument '%s' (flags only; see openlake bench "
		    "s3 --help)\n",
		    argv[optind]);
		return 2;
	}
	if (b->size == 0 || b->size > (16ull << 30)) {
		fprintf(stderr, "openlake bench s3: --size must be 1 byte..16GiB\n");
		return 2;
	}
	if (o->duration == 0 && o->ops == 0) {
		fprintf(stderr, "openlake bench s3: --duration 0 needs --ops N\n");
		return 2;
	}
	return s3_endpoint(b, o->endpoint) ? 2 : 0;
}

static void
s3_defaults(struct s3bench *b, struct s3opts *o)
{
	memset(b, 0, sizeof(*b));
	memset(o, 0, sizeof(*o));
	b->access = env_or("AWS_ACCESS_KEY_ID", NULL, "openlakeadmin");
	b->secret = env_or("AWS_SECRET_ACCESS_KEY", NULL, "openlakeadmin");
	b->region = env_or("AWS_REGION", "AWS_DEFAULT_REGION", "us-east-1");
	b->bucket = "openlake-bench";
	b->prefix = "bench/";
	b->size = 4096;
	b->read_pct = 60;
	b->work = S3_GET;
	b->prefill = true;
	o->endpoint = env_or("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "http://127.0.0.1:9000");
	o->duration = 10;
	o->conc = 16;
}

static int
s3_alloc(struct s3bench *b, unsigned conc)
{
	b->body = malloc(b->size);
	b->conns = calloc(conc, sizeof(*b->conns));
	if (!b->body || !b->conns)
		return -ENOMEM;
	bench_fill(b->body, b->size, 42);
	unsigned char h[32];
	SHA256((const unsigned char *)b->body, b->size, h);
	ol_hex_encode(h, 32, b->body_hash);
	for (unsigned i = 0; i < conc; i++) {
		b->conns[i].fd = -1;
		b->conns[i].rbuf = malloc(S3_HDR_CAP + 1);
		b->conns[i].scratch = malloc(S3_SCRATCH);
		if (!b->conns[i].rbuf || !b->conns[i].scratch)
			return -ENOMEM;
	}
	return 0;
}

static void
s3_free(struct s3bench *b, unsigned conc)
{
	for (unsigned i = 0; b->conns && i < conc; i++) {
		s3_close(&b->conns[i]);
		free(b->conns[i].rbuf);
		free(b->conns[i].scratch);
	}
	free(b->conns);
	free(b->body);
}

static void
s3_code_name(unsigned code, char *buf, size_t cap)
{
	if (code == S3_WRONG_LEN)
		snprintf(buf, cap, "wrong_length");
	else
		snprintf(buf, cap, "http_%u", code);
}

static int
s3_prefill(struct s3bench *b, struct s3opts *o, struct btotal *pt)
{
	struct brun pr = {.name = "prefill",
			  .conc = (unsigned)o->conc,
			  .max_ops = b->objects,
			  .quiet = o->quiet,
			  .op = s3_op_prefill,
			  .arg = b};
	if (pr.conc > b->objects)
		pr.conc = (unsigned)b->objects;
	int rc = bench_run(&pr);
	if (rc == 0)
		bench_total(&pr, pt);
	free(pr.st);
	return rc;
}

static void
s3_extra_json(const struct s3bench *b, const struct s3opts *o, const struct btotal *pt,
	      int bucket_rc, char *buf, size_t cap)
{
	static const char *const names[] = {"put", "get", "mixed"};
	size_t off = 0;
	bench_appendf(
	    buf, cap, &off,
	    "\"target\":\"s3\",\"op\":\"%s\",\"endpoint\":\"http://%s\",\"bucket\":\"%s\","
	    "\"size\":%llu,\"objects\":%llu,\"concurrency\":%llu,\"payload\":\"%s\","
	    "\"bucket_status\":%d",
	    names[b->work], b->hosthdr, b->bucket, (unsigned long long)b->size,
	    (unsigned long long)b->objects, (unsigned long long)o->conc,
	    b->signed_payload ? "signed" : "unsigned", bucket_rc);
	if (b->work == S3_MIXED)
		bench_appendf(buf, cap, &off, ",\"read_percent\":%llu",
			      (unsigned long long)b->read_pct);
	if (pt)
		bench_appendf(buf, cap, &off,
			      ",\"prefill\":{\"ops\":%llu,\"errors\":%llu,\"elapsed_s\":%.3f}",
			      (unsigned long long)pt->ops, (unsigned long long)pt->errors,
			      pt->elapsed_s);
}

static uint64_t
s3_default_objects(uint64_t size, uint64_t conc)
{
	uint64_t n = (1ull << 30) / size;
	if (n > 1000)
		n = 1000;
	return n < conc ? conc : n;
}

static int
s3_bench_run(struct s3bench *b, struct s3opts *o)
{
	struct btotal pt = {0}, t;
	int brc = s3_make_bucket(b);
	if (brc < 0)
		return 1;
	bool prefill = b->prefill && b->work != S3_PUT;
	if (prefill && s3_prefill(b, o, &pt))
		return 1;
	static const char *const names[] = {"s3 put", "s3 get", "s3 mixed"};
	struct brun r = {.name = names[b->work],
			 .conc = (unsigned)o->conc,
			 .duration_s = o->ops ? 0 : o->duration,
			 .max_ops = o->ops,
			 .quiet = o->quiet,
			 .op = s3_op,
			 .arg = b};
	if (bench_run(&r)) {
		free(r.st);
		return 1;
	}
	bench_total(&r, &t);
	free(r.st);
	char extra[1024];
	s3_extra_json(b, o, prefill ? &pt : NULL, brc, extra, sizeof(extra));
	if (prefill && !b->json)
		printf("prefill: %llu objects of %llu bytes written, %llu errors\n",
		       (unsigned long long)pt.ops, (unsigned long long)b->size,
		       (unsigned long long)pt.errors);
	bench_report(names[b->work], &t, extra, b->json, s3_code_name);
	return t.errors || pt.errors || t.ops == 0 ? 1 : 0;
}

int
bench_s3_main(int argc, char **argv)
{
	struct s3bench b;
	struct s3opts o;
	s3_defaults(&b, &o);
	int rc = s3_parse(argc, argv, &b, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!o.objects_set)
		b.objects = s3_default_objects(b.size, o.conc);
	if (s3_alloc(&b, (unsigned)o.conc)) {
		fprintf(stderr,
			"openlake bench s3: out of memory for %llu connections x %llu bytes\n",
			(unsigned long long)o.conc, (unsigned long long)b.size);
		rc = 1;
	} else {
		rc = s3_bench_run(&b, &o);
	}
	s3_free(&b, (unsigned)o.conc);
	return rc;
}
