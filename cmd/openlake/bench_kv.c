/* cmd/openlake/bench_kv.c - `openlake bench kv|redis|memcached|tcp|memcpy`: block put/get load
 * on the KV pool through libopenlake, and the same load on the references it is compared with,
 * all with the same reporting. Included by bench_cmd.c (after bench_s3.c, whose buffered
 * connection reader it reuses). */
#include "openlake/openlake.h"

enum kvb_op { KVB_PUT, KVB_GET };

struct kvbench {
	const char *what; /* workload name for messages */
	char host[256], port[16];
	const char *nodes, *device, *ns;
	enum kvb_op op;
	uint64_t size, batch, keys, conc, ops;
	double duration, rate; /* rate > 0: paced (open loop), total ops/s */
	double warmup;	       /* seconds of the same load before the measured run */
	uint64_t seq_base;     /* added to seq in the key choice (the warm-up's keys are its own) */
	bool json, quiet;
	bool wrap;	/* puts overwrite the key set (redis, memcached: finite memory) */
	bool cold;	/* memcpy: the far side of each copy cycles over --keys blocks */
	uint64_t nonce; /* keys of one run are unique to it */
	char **bufs;	/* one value buffer (batch x size) per connection */
	struct s3conn *conns;
	void **clients; /* kv: one ol_client per connection */
	unsigned char (*keyv)[OL_KV_KEY_BYTES];
	/* tcp: the in-process sink/source */
	int lfd;
	_Atomic int sink_stop;
};

#define KVB_MISS  2 /* error code of a get that found no value (redis/memcached/kv miss) */
#define KVB_BAD	  3 /* error code: an unexpected reply */
#define KVB_WRONG 4 /* error code: a get returned bytes that are not the key's value */

static void
kvb_code_name(unsigned code, char *buf, size_t cap)
{
	if (code >= 100 && code < 100 + OL_KV_STATUS_COUNT)
		snprintf(buf, cap, "kv_%s", ol_kv_status_str((int)code - 100));
	else if (code == KVB_MISS)
		snprintf(buf, cap, "miss");
	else if (code == KVB_BAD)
		snprintf(buf, cap, "bad_reply");
	else if (code == KVB_WRONG)
		snprintf(buf, cap, "wrong_bytes");
	else
		snprintf(buf, cap, "code_%u", code);
}

/* the key index of operation seq (entry j of its batch) */
static uint64_t
kvb_index(const struct kvbench *b, uint64_t seq, uint64_t j)
{
	seq += b->seq_base;
	if (b->op == KVB_PUT)
		return b->wrap ? (seq * b->batch + j) % b->keys : seq * b->batch + j;
	return mix64(seq * b->batch + j) % b->keys;
}

static void
kvb_keyname(const struct kvbench *b, uint64_t idx, char *out, size_t cap)
{
	snprintf(out, cap, "olbench:%llx:%llu", (unsigned long long)b->nonce,
		 (unsigned long long)idx);
}

/* Each value carries its key index (xor the run's nonce) at its start, middle and end: a get
 * checks them, so a reply with another key's bytes, or bytes never copied, is an error. */
static void
kvb_stamp(const struct kvbench *b, char *v, uint64_t idx)
{
	uint64_t x = idx ^ b->nonce;
	if (b->size < 8)
		return;
	memcpy(v, &x, 8);
	memcpy(v + (b->size / 2 & ~7ull), &x, 8);
	memcpy(v + b->size - 8, &x, 8);
}

static bool
kvb_stamp_ok(const struct kvbench *b, const char *v, uint64_t idx)
{
	uint64_t x = idx ^ b->nonce;
	return b->size < 8 ||
	       (memcmp(v, &x, 8) == 0 && memcmp(v + (b->size / 2 & ~7ull), &x, 8) == 0 &&
		memcmp(v + b->size - 8, &x, 8) == 0);
}

/* Read n bytes of a value into dst: what is buffered first, then straight from the socket. */
static int
conn_read_into(struct s3conn *c, char *dst, uint64_t n)
{
	size_t have = c->rlen - c->rpos, take = have < n ? have : (size_t)n;
	memcpy(dst, c->rbuf + c->rpos, take);
	c->rpos += take;
	return take == n ? 0 : bench_read_all(c->fd, dst + take, (size_t)(n - take));
}

/* head, value, "\r\n" in one writev: three small writes cost redis a round of wakeups */
static int
kvb_send3(int fd, const char *head, size_t hl, const char *val, size_t vl)
{
	struct iovec iov[3] = {{(void *)head, hl}, {(void *)val, vl}, {"\r\n", 2}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 3};
	while (m.msg_iovlen) {
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		while (m.msg_iovlen && (size_t)n >= m.msg_iov->iov_len) {
			n -= (ssize_t)m.msg_iov->iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + n;
			m.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* ---- redis (RESP) ---- */

static int
redis_reply(struct s3conn *c, char *dst, uint64_t want)
{
	char *line;
	int rc = s3_line(c, &line);
	if (rc)
		return rc;
	if (line[0] == '+')
		return 0;
	if (line[0] != '$')
		return KVB_BAD;
	long long n = strtoll(line + 1, NULL, 10);
	if (n < 0)
		return KVB_MISS;
	if ((uint64_t)n != want)
		return (rc = s3_skip(c, (uint64_t)n + 2, NULL, 0, NULL)) ? rc : KVB_BAD;
	if ((rc = conn_read_into(c, dst, want)) || (rc = s3_skip(c, 2, NULL, 0, NULL)))
		return rc;
	return 0;
}

static int
redis_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct kvbench *b = r->arg;
	struct s3conn *c = &b->conns[i];
	char key[96], head[256];
	uint64_t idx = kvb_index(b, seq, 0);
	kvb_keyname(b, idx, key, sizeof(key));
	if (b->op == KVB_PUT)
		kvb_stamp(b, b->bufs[i], idx);
	int hl = b->op == KVB_PUT
		     ? snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu\r\n",
				strlen(key), key, (unsigned long long)b->size)
		     : snprintf(head, sizeof(head), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n",
				strlen(key), key);
	int rc = b->op == KVB_PUT ? kvb_send3(c->fd, head, (size_t)hl, b->bufs[i], b->size)
				  : bench_write_all(c->fd, head, (size_t)hl);
	if (!rc)
		rc = redis_reply(c, b->bufs[i], b->size);
	if (rc == 0 && b->op == KVB_GET && !kvb_stamp_ok(b, b->bufs[i], idx))
		rc = KVB_WRONG;
	if (rc == 0)
		*bytes = b->size;
	return rc;
}

/* ---- memcached (text protocol) ---- */

static int
memc_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct kvbench *b = r->arg;
	struct s3conn *c = &b->conns[i];
	char key[96], head[256], *line;
	uint64_t idx = kvb_index(b, seq, 0);
	kvb_keyname(b, idx, key, sizeof(key));
	if (b->op == KVB_PUT)
		kvb_stamp(b, b->bufs[i], idx);
	int hl = b->op == KVB_PUT ? snprintf(head, sizeof(head), "set %s 0 0 %llu\r\n", key,
					     (unsigned long long)b->size)
				  : snprintf(head, sizeof(head), "get %s\r\n", key);
	int rc = b->op == KVB_PUT ? kvb_send3(c->fd, head, (size_t)hl, b->bufs[i], b->size)
				  : bench_write_all(c->fd, head, (size_t)hl);
	if (rc || (rc = s3_line(c, &line)))
		return rc;
	if (b->op == KVB_PUT)
		return strcmp(line, "STORED") == 0 ? (*bytes = b->size, 0) : KVB_BAD;
	if (strcmp(line, "END") == 0)
		return KVB_MISS;
	const char *last = strrchr(line, ' ');
	if (strncmp(line, "VALUE ", 6) != 0 || !last)
		return KVB_BAD;
	uint64_t n = strtoull(last + 1, NULL, 10);
	rc = n == b->size ? conn_read_into(c, b->bufs[i], n) : s3_skip(c, n, NULL, 0, NULL);
	if (rc || (rc = s3_skip(c, 2, NULL, 0, NULL)) || (rc = s3_line(c, &line)))
		return rc;
	if (strcmp(line, "END") != 0 || n != b->size)
		return KVB_BAD;
	if (!kvb_stamp_ok(b, b->bufs[i], idx))
		return KVB_WRONG;
	*bytes = b->size;
	return 0;
}

/* ---- plain TCP stream: 16-byte request {op, len}; put sends len bytes and reads an 8-byte
 * ack, get receives len bytes. The in-process server is the reference's other end. ---- */

struct tcp_peer {
	struct kvbench *b;
	int fd;
};

static void *
tcp_serve(void *arg)
{
	struct tcp_peer *p = arg;
	char *buf = malloc(1 << 20);
	uint64_t hdr[2];
	while (buf && bench_read_all(p->fd, hdr, sizeof(hdr)) == 0) {
		int rc = 0;
		for (uint64_t left = hdr[1]; left && !rc;) {
			size_t n = left < (1 << 20) ? (size_t)left : (1 << 20);
			rc =
			    hdr[0] ? bench_write_all(p->fd, buf, n) : bench_read_all(p->fd, buf, n);
			left -= n;
		}
		if (rc || (!hdr[0] && bench_write_all(p->fd, hdr, 8)))
			break;
	}
	free(buf);
	close(p->fd);
	free(p);
	return NULL;
}

static void *
tcp_accept(void *arg)
{
	struct kvbench *b = arg;
	while (!atomic_load(&b->sink_stop)) {
		int fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct tcp_peer *p = malloc(sizeof(*p));
		pthread_t t;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!p || (p->b = b, p->fd = fd, pthread_create(&t, NULL, tcp_serve, p))) {
			close(fd);
			free(p);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static int
tcp_start_sink(struct kvbench *b, pthread_t *t)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (b->lfd < 0 || bind(b->lfd, (struct sockaddr *)&sa, len) < 0 ||
	    listen(b->lfd, 512) < 0 || getsockname(b->lfd, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	snprintf(b->host, sizeof(b->host), "127.0.0.1");
	snprintf(b->port, sizeof(b->port), "%u", ntohs(sa.sin_port));
	return -pthread_create(t, NULL, tcp_accept, b);
}

static int
tcp_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct kvbench *b = r->arg;
	int fd = b->conns[i].fd;
	uint64_t hdr[2] = {b->op == KVB_GET, b->size};
	int rc = bench_write_all(fd, hdr, sizeof(hdr));
	if (!rc && b->op == KVB_PUT && !(rc = bench_write_all(fd, b->bufs[i], b->size)))
		rc = bench_read_all(fd, hdr, 8);
	if (!rc && b->op == KVB_GET)
		rc = bench_read_all(fd, b->bufs[i], b->size);
	if (rc == 0)
		*bytes = b->size;
	return rc;
}

/* ---- memcpy ---- */

/* the blocks of a thread's far side: one, or (--cold) its share of --keys */
static uint64_t
memcpy_blocks(const struct kvbench *b)
{
	uint64_t n = b->cold ? b->keys / b->conc : 1;
	return n ? n : 1;
}

static int
memcpy_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct kvbench *b = r->arg;
	char *src = b->bufs[i], *dst = b->bufs[i] + b->size * (1 + seq % memcpy_blocks(b));
	if (b->op == KVB_GET) {
		char *t = src;
		src = dst;
		dst = t;
	}
	memcpy(dst, src, b->size);
	__asm__ volatile("" : : "r"(dst) : "memory"); /* the copy must happen */
	*bytes = b->size;
	return 0;
}

/* ---- the KV pool through libopenlake ---- */

struct kvthr {
	struct ol_kv_op *ops;
	struct ol_iov *iov;
	unsigned char (*keys)[OL_KV_KEY_BYTES];
};

static int
kv_op(struct brun *r, unsigned i, uint64_t seq, uint64_t *bytes)
{
	struct kvbench *b = r->arg;
	struct kvthr *t = (struct kvthr *)b->conns[i].rbuf; /* per-connection scratch */
	for (uint64_t j = 0; j < b->batch; j++) {
		char name[96];
		kvb_keyname(b, kvb_index(b, seq, j), name, sizeof(name));
		SHA256((const unsigned char *)name, strlen(name), t->keys[j]);
		if (b->op == KVB_PUT)
			kvb_stamp(b, b->bufs[i] + j * b->size, kvb_index(b, seq, j));
		t->iov[j] = (struct ol_iov){b->bufs[i] + j * b->size, b->size};
		t->ops[j] = (struct ol_kv_op){.key = t->keys[j], .iov = &t->iov[j], .iovcnt = 1};
	}
	struct ol_client *c = b->clients[i];
	int rc = b->op == KVB_PUT ? ol_kv_put(c, t->ops, b->batch) : ol_kv_get(c, t->ops, b->batch);
	if (rc < 0)
		return rc;
	for (uint64_t j = 0; j < b->batch; j++) {
		int st = t->ops[j].status;
		if (st != OL_KV_OK && !(b->op == KVB_PUT && st == OL_KV_EXISTS))
			return 100 + (st >= 0 && st < OL_KV_STATUS_COUNT ? st : OL_KV_ERROR);
		if (b->op == KVB_GET && t->ops[j].value_len != b->size)
			return KVB_BAD;
		if (b->op == KVB_GET &&
		    !kvb_stamp_ok(b, b->bufs[i] + j * b->size, kvb_index(b, seq, j)))
			return KVB_WRONG;
	}
	*bytes = b->batch * b->size;
	return 0;
}

static _Atomic unsigned kv_log_count;

static void
kv_client_log(int level, const char *msg, void *arg)
{
	if (level > OL_CLIENT_LOG_WARN)
		return;
	unsigned n = atomic_fetch_add(&kv_log_count, 1);
	if (n < 3)
		fprintf(stderr, "openlake bench kv: libopenlake: %s\n", msg);
	else if (n == 3)
		fprintf(stderr, "openlake bench kv: (further libopenlake messages suppressed)\n");
}

/* One exists() through the first client: fails when no node of --nodes answers. */
static int
kv_probe(struct kvbench *b)
{
	unsigned char key[OL_KV_KEY_BYTES] = {0};
	struct ol_kv_op op = {.key = key};
	int rc = ol_kv_exists(b->clients[0], &op, 1);
	if (rc == 0 && op.status != OL_KV_UNREACHABLE)
		return 0;
	fprintf(stderr,
		"openlake bench kv: cannot reach the pool at --nodes %s: %s - is openlaked running "
		"with kv_addr there?\n",
		b->nodes, rc ? strerror(-rc) : "node unreachable");
	return -EHOSTUNREACH;
}

static int
kv_setup_conn(struct kvbench *b, unsigned i, const char *const *nodes, size_t n)
{
	struct kvthr *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	b->conns[i].rbuf = (char *)t;
	t->ops = calloc(b->batch, sizeof(*t->ops));
	t->iov = calloc(b->batch, sizeof(*t->iov));
	t->keys = calloc(b->batch, sizeof(*t->keys));
	if (!t->ops || !t->iov || !t->keys)
		return -ENOMEM;
	struct ol_client_opts o = {
	    .size = sizeof(o),
	    .nodes = nodes,
	    .n_nodes = n,
	    .device = b->device,
	    .ns = b->ns,
	    .timeout_ms = 10000,
	    .log = kv_client_log,
	    .token = getenv("OPENLAKE_KV_TOKEN"),
	    /* TLS ([kv_tls]) from the environment, as `openlake kv` reads it */
	    .ca_file = getenv("OPENLAKE_KV_CA_FILE"),
	    .server_name = getenv("OPENLAKE_KV_SERVER_NAME")};
	const char *tls = getenv("OPENLAKE_KV_TLS");
	o.tls = (tls && (strcmp(tls, "1") == 0 || strcmp(tls, "true") == 0)) ||
		(o.ca_file && o.ca_file[0]);
	struct ol_client *c;
	int rc = ol_client_new(&o, &c);
	if (rc)
		return rc;
	b->clients[i] = c;
	return 0;
}

static int
kv_setup(struct kvbench *b)
{
	char *list = strdup(b->nodes);
	const char *nodes[64];
	size_t n = 0;
	int rc = list ? 0 : -ENOMEM;
	for (char *save = NULL, *p = list ? strtok_r(list, ",", &save) : NULL; p && n < 64;
	     p = strtok_r(NULL, ",", &save))
		nodes[n++] = p;
	if (!rc && n == 0)
		rc = -EINVAL;
	b->clients = calloc(b->conc, sizeof(void *));
	for (unsigned i = 0; !rc && i < b->conc; i++)
		rc = b->clients ? kv_setup_conn(b, i, nodes, n) : -ENOMEM;
	if (rc == -EPROTONOSUPPORT)
		fprintf(stderr,
			"openlake bench kv: --device %s: libopenlake was built without UCX\n",
			b->device);
	if (rc == -EINVAL)
		fprintf(stderr,
			"openlake bench kv: --nodes '%s' or --device '%s' rejected by libopenlake "
			"(write --nodes HOST:PORT[,HOST:PORT...] --device tcp|local)\n",
			b->nodes, b->device);
	free(list);
	return rc;
}

static void
kv_teardown(struct kvbench *b)
{
	for (unsigned i = 0; b->clients && i < b->conc; i++) {
		struct kvthr *t = (struct kvthr *)b->conns[i].rbuf;
		ol_client_free(b->clients[i]);
		if (t) {
			free(t->ops);
			free(t->iov);
			free(t->keys);
		}
		free(t);
		b->conns[i].rbuf = NULL;
	}
	free(b->clients);
}

/* ---- flags ---- */

enum {
	KVF_ADDR = 300,
	KVF_NODES,
	KVF_DEVICE,
	KVF_NS,
	KVF_OPS,
	KVF_RATE,
	KVF_WARMUP,
	KVF_JSON,
	KVF_HIST,
	KVF_COLD
};

static const struct option kvb_longopts[] = {{"addr", required_argument, NULL, KVF_ADDR},
					     {"nodes", required_argument, NULL, KVF_NODES},
					     {"device", required_argument, NULL, KVF_DEVICE},
					     {"namespace", required_argument, NULL, KVF_NS},
					     {"op", required_argument, NULL, 'w'},
					     {"workload", required_argument, NULL, 'w'},
					     {"size", required_argument, NULL, 's'},
					     {"batch", required_argument, NULL, 'b'},
					     {"keys", required_argument, NULL, 'n'},
					     {"concurrency", required_argument, NULL, 'c'},
					     {"duration", required_argument, NULL, 'd'},
					     {"ops", required_argument, NULL, KVF_OPS},
					     {"rate", required_argument, NULL, KVF_RATE},
					     {"warmup", required_argument, NULL, KVF_WARMUP},
					     {"json", no_argument, NULL, KVF_JSON},
					     {"histogram", no_argument, NULL, KVF_HIST},
					     {"cold", no_argument, NULL, KVF_COLD},
					     {"quiet", no_argument, NULL, 'q'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};

static void
kvb_usage(const char *what, FILE *f)
{
	bool kv = strcmp(what, "kv") == 0;
	fprintf(f, "Usage: openlake bench %s [FLAGS]\n\n", what);
	if (kv)
		fprintf(f,
			"Block put/get on the KV pool through libopenlake, one client (and so one\n"
			"connection per node) per thread. Each key is the SHA-256 of a name unique "
			"to the run.\n\n"
			"  --nodes LIST         HOST:PORT[,HOST:PORT...] (default 127.0.0.1:9400)\n"
			"  --device D           tcp (default), local (shared memory when the node\n"
			"                       is on this host) or ucx (UCX, to a pool with\n"
			"                       transport = \"rdma\"; $UCX_TLS picks the fabric)\n"
			"  --namespace NS       default openlake-bench\n"
			"  -b, --batch N        entries per call (default 1, up to 1024)\n");
	else if (strcmp(what, "memcpy") == 0)
		fprintf(
		    f,
		    "Copies of one block between two buffers per thread: the ceiling of the\n"
		    "local shared-memory path.\n\n"
		    "      --cold           the destination of each put (the source of each get)\n"
		    "                       cycles over --keys blocks in all (default 512 MiB),\n"
		    "                       as a pool's slots do: memory's speed, not the "
		    "cache's\n");
	else if (strcmp(what, "tcp") == 0)
		fprintf(f,
			"Request/response blocks over plain loopback sockets to an in-process\n"
			"server (put: send the block, read an 8-byte ack; get: read the block):\n"
			"the ceiling of any TCP protocol here.\n\n");
	else
		fprintf(f,
			"The KV block load against %s (%s), as a reference.\n\n"
			"  --addr HOST:PORT     the server (required)\n",
			what, what[0] == 'r' ? "SET/GET over RESP" : "set/get, text protocol");
	fprintf(
	    f,
	    "  -w, --op OP          put or get (default get; get first writes the keys)\n"
	    "  -s, --size N         block size: 256KiB, 2MiB... (default 256KiB)\n"
	    "  -n, --keys N         distinct keys of get (and of redis/memcached put, which first\n"
	    "                       fills them; default: up to 512 MiB, max 1000)\n"
	    "  -c, --concurrency N  connections, one thread each (default 16)\n"
	    "  -d, --duration T     10, 10s, 500ms (default 10s)\n"
	    "      --ops N          stop after N operations (batches) instead\n"
	    "      --rate OPS       paced (open loop): OPS operations (batches) per second in\n"
	    "                       all; each thread has a fixed schedule of send times for\n"
	    "                       its share. One that falls due while the thread's previous\n"
	    "                       operation is still running is sent the moment it ends,\n"
	    "                       and latency always runs from the scheduled send, not the\n"
	    "                       actual one, so a stall counts in every operation it\n"
	    "                       delays (no coordinated omission). How late each one was\n"
	    "                       actually sent (behind its thread's previous operation,\n"
	    "                       or waiting for a CPU) is reported as send lag. ops/s\n"
	    "                       below OPS: the target could not keep up. Default:\n"
	    "                       closed loop, each thread as fast as it can.\n"
	    "                       The prefill of get is never paced.\n"
	    "      --warmup T       first run the same load for T, closed loop, unmeasured\n"
	    "                       (a get warm-up picks other keys than the measured ones)\n"
	    "      --histogram      also print the latency distribution, one line per power\n"
	    "                       of two\n"
	    "      --json           print one JSON object with every figure on stdout\n"
	    "  -q, --quiet          no progress lines on stderr\n");
}

static int
kvb_flag(struct kvbench *b, int opt, const char *v)
{
	const char *w = b->what;
	switch (opt) {
	case KVF_ADDR:
		if (bench_split_hostport(v, b->host, sizeof(b->host), b->port, sizeof(b->port))) {
			fprintf(stderr, "openlake bench %s: --addr '%s' is not HOST:PORT\n", w, v);
			return -EINVAL;
		}
		return 0;
	case KVF_NODES:
		b->nodes = v;
		return 0;
	case KVF_NS:
		b->ns = v;
		return 0;
	case KVF_JSON:
		b->json = true;
		return 0;
	case KVF_COLD:
		b->cold = strcmp(w, "memcpy") == 0;
		if (!b->cold)
			fprintf(stderr, "openlake bench %s: --cold is a flag of bench memcpy\n", w);
		return !b->cold;
	case KVF_HIST:
		bench_show_histogram = true;
		return 0;
	case 'q':
		b->quiet = true;
		return 0;
	case 's':
		return bflag_size(w, "--size", v, &b->size);
	case 'b':
		return bflag_u64(w, "--batch", v, 1, OL_KV_MAX_BATCH, &b->batch);
	case 'n':
		return bflag_u64(w, "--keys", v, 1, 1u << 24, &b->keys);
	case 'c':
		return bflag_u64(w, "--concurrency", v, 1, 1024, &b->conc);
	case 'd':
		return bflag_duration(w, "--duration", v, &b->duration);
	case KVF_OPS:
		return bflag_u64(w, "--ops", v, 1, UINT64_MAX / 4096, &b->ops);
	case KVF_RATE:
		return bflag_rate(w, "--rate", v, &b->rate);
	case KVF_WARMUP:
		return bflag_duration(w, "--warmup", v, &b->warmup);
	case KVF_DEVICE:
		if (strcmp(v, "tcp") == 0 || strcmp(v, "local") == 0 || strcmp(v, "ucx") == 0 ||
		    strcmp(v, "rdma") == 0) {
			b->device = v;
			return 0;
		}
		fprintf(stderr, "openlake bench %s: --device '%s': use tcp, local or ucx\n", w, v);
		return -EINVAL;
	case 'w':
		if (strcmp(v, "put") == 0 || strcmp(v, "set") == 0 || strcmp(v, "get") == 0) {
			b->op = strcmp(v, "get") == 0 ? KVB_GET : KVB_PUT;
			return 0;
		}
		fprintf(stderr, "openlake bench %s: --op '%s': use put or get\n", w, v);
		return -EINVAL;
	}
	return -EINVAL;
}

/* 0 ok, 1 --help shown, 2 bad usage */
static int
kvb_parse(struct kvbench *b, int argc, char **argv)
{
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":w:s:b:n:c:d:qh", kvb_longopts, NULL)) != -1) {
		if (opt == 'h') {
			kvb_usage(b->what, stdout);
			return 1;
		}
		if (opt == '?' || opt == ':')
			return bench_bad_flag(b->what, argc, argv, opt);
		if (kvb_flag(b, opt, optarg))
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "openlake bench %s: unexpected argument '%s' (see --help)\n",
			b->what, argv[optind]);
		return 2;
	}
	if (b->size == 0 || b->size > (1ull << 30)) {
		fprintf(stderr, "openlake bench %s: --size must be 1 byte..1GiB\n", b->what);
		return 2;
	}
	if (b->duration == 0 && b->ops == 0) {
		fprintf(stderr, "openlake bench %s: --duration 0 needs --ops N\n", b->what);
		return 2;
	}
	return 0;
}

/* ---- running ---- */

/* each connection's buffer: blocks x (batch x size) */
static int
kvb_alloc(struct kvbench *b, uint64_t blocks)
{
	b->bufs = calloc(b->conc, sizeof(*b->bufs));
	b->conns = calloc(b->conc, sizeof(*b->conns));
	if (!b->bufs || !b->conns)
		return -ENOMEM;
	for (unsigned i = 0; i < b->conc; i++) {
		b->conns[i].fd = -1;
		b->bufs[i] = malloc(b->batch * b->size * blocks);
		if (!b->bufs[i])
			return -ENOMEM;
		bench_fill(b->bufs[i], b->batch * b->size * blocks, i + 1);
	}
	return 0;
}

static void
kvb_free(struct kvbench *b)
{
	for (unsigned i = 0; b->conns && i < b->conc; i++) {
		s3_close(&b->conns[i]);
		free(b->conns[i].rbuf);
		free(b->conns[i].scratch);
		free(b->bufs[i]);
	}
	free(b->conns);
	free(b->bufs);
}

/* Socket references: one buffered connection per thread to host:port. */
static int
kvb_connect_all(struct kvbench *b, const char *flag)
{
	for (unsigned i = 0; i < b->conc; i++) {
		struct s3conn *c = &b->conns[i];
		c->rbuf = malloc(S3_HDR_CAP + 1);
		c->scratch = malloc(S3_SCRATCH);
		if (!c->rbuf || !c->scratch)
			return -ENOMEM;
		c->fd = bench_connect(b->host, b->port, 5000);
		if (c->fd < 0) {
			fprintf(stderr, "openlake bench %s: cannot connect to %s:%s (%s): %s\n",
				b->what, b->host, b->port, flag, strerror(-c->fd));
			return c->fd;
		}
	}
	return 0;
}

enum kvb_phase { KVB_PREFILL, KVB_WARMUP, KVB_MEASURE };

static int
kvb_phase(struct kvbench *b, const char *name, bench_op_fn fn, enum kvb_phase ph, struct btotal *t)
{
	enum kvb_op saved = b->op;
	struct brun r = {
	    .name = name, .conc = (unsigned)b->conc, .quiet = b->quiet, .op = fn, .arg = b};
	if (ph == KVB_PREFILL) {
		b->op = KVB_PUT;
		r.max_ops = (b->keys + b->batch - 1) / b->batch;
	} else if (ph == KVB_WARMUP) {
		r.duration_s = b->warmup;
		b->seq_base = 1ull << 40;
	} else {
		r.duration_s = b->ops ? 0 : b->duration;
		r.max_ops = b->ops;
		r.rate = b->rate;
	}
	int rc = bench_run(&r);
	b->op = saved;
	b->seq_base = 0;
	if (rc == 0)
		bench_total(&r, t);
	free(r.st);
	return rc;
}

static int
kvb_run(struct kvbench *b, bench_op_fn fn, bool needs_prefill)
{
	struct btotal pt = {0}, wt = {0}, t;
	/* redis and memcached puts overwrite a key set they already hold (their first fill pays
	 * for allocating memory: not the steady state being measured) */
	bool prefill = needs_prefill && (b->op == KVB_GET || b->wrap);
	char name[32], extra[1024];
	size_t off = 0;
	snprintf(name, sizeof(name), "%s %s", b->what, b->op == KVB_PUT ? "put" : "get");
	if (prefill && kvb_phase(b, "prefill", fn, KVB_PREFILL, &pt))
		return 1;
	if (b->warmup > 0 && kvb_phase(b, "warmup", fn, KVB_WARMUP, &wt))
		return 1;
	if (kvb_phase(b, name, fn, KVB_MEASURE, &t))
		return 1;
	bench_appendf(extra, sizeof(extra), &off,
		      "\"target\":\"%s\",\"op\":\"%s\",\"size\":%llu,\"batch\":%llu,\"keys\":%llu,"
		      "\"concurrency\":%llu",
		      b->what, b->op == KVB_PUT ? "put" : "get", (unsigned long long)b->size,
		      (unsigned long long)b->batch, (unsigned long long)b->keys,
		      (unsigned long long)b->conc);
	if (strcmp(b->what, "kv") == 0)
		bench_appendf(extra, sizeof(extra), &off, ",\"nodes\":\"%s\",\"device\":\"%s\"",
			      b->nodes, b->device);
	if (prefill)
		bench_appendf(extra, sizeof(extra), &off,
			      ",\"prefill\":{\"ops\":%llu,\"errors\":%llu,\"elapsed_s\":%.3f}",
			      (unsigned long long)pt.ops, (unsigned long long)pt.errors,
			      pt.elapsed_s);
	if (b->warmup > 0)
		bench_appendf(extra, sizeof(extra), &off,
			      ",\"warmup\":{\"ops\":%llu,\"errors\":%llu,\"elapsed_s\":%.3f}",
			      (unsigned long long)wt.ops, (unsigned long long)wt.errors,
			      wt.elapsed_s);
	if (prefill && !b->json)
		printf("prefill: %llu keys of %llu bytes, %llu errors\n",
		       (unsigned long long)(pt.ops * b->batch), (unsigned long long)b->size,
		       (unsigned long long)pt.errors);
	bench_report(name, &t, extra, b->json, kvb_code_name);
	return t.errors || pt.errors || wt.errors || t.ops == 0 ? 1 : 0;
}

static int
kvb_init(struct kvbench *b, const char *what, int argc, char **argv)
{
	memset(b, 0, sizeof(*b));
	b->what = what;
	b->nodes = "127.0.0.1:9400";
	b->device = "tcp";
	b->ns = "openlake-bench";
	b->op = KVB_GET;
	b->size = 256 * 1024;
	b->batch = 1;
	b->conc = 16;
	b->duration = 10;
	b->lfd = -1;
	b->nonce = (bench_now_ns() ^ ((uint64_t)getpid() << 32)) & 0xffffffffffffull;
	int rc = kvb_parse(b, argc, argv);
	if (rc)
		return rc;
	if (!b->keys) {
		uint64_t n = (512ull << 20) / (b->size * b->batch) * b->batch;
		b->keys = n > 1000 ? 1000 : n;
		if (b->keys < b->conc * b->batch)
			b->keys = b->conc * b->batch;
	}
	return 0;
}

static int
kvb_socket_main(const char *what, bench_op_fn fn, int argc, char **argv)
{
	struct kvbench b;
	int rc = kvb_init(&b, what, argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (!b.host[0]) {
		fprintf(stderr,
			"openlake bench %s: --addr HOST:PORT is required (where %s listens)\n",
			what, what);
		return 2;
	}
	b.wrap = true;
	rc = kvb_alloc(&b, 1) ? 1 : kvb_connect_all(&b, "--addr") ? 1 : kvb_run(&b, fn, true);
	kvb_free(&b);
	return rc;
}

int
bench_redis_main(int argc, char **argv)
{
	return kvb_socket_main("redis", redis_op, argc, argv);
}

int
bench_memcached_main(int argc, char **argv)
{
	return kvb_socket_main("memcached", memc_op, argc, argv);
}

int
bench_tcp_main(int argc, char **argv)
{
	struct kvbench b;
	pthread_t t;
	int rc = kvb_init(&b, "tcp", argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	bool own = !b.host[0];
	if (own && tcp_start_sink(&b, &t)) {
		fprintf(stderr, "openlake bench tcp: cannot start the loopback server: %s\n",
			strerror(errno));
		return 1;
	}
	rc = kvb_alloc(&b, 1) ? 1 : kvb_connect_all(&b, "--addr") ? 1 : kvb_run(&b, tcp_op, false);
	kvb_free(&b);
	if (own) {
		atomic_store(&b.sink_stop, 1);
		shutdown(b.lfd, SHUT_RDWR);
		pthread_join(t, NULL);
		close(b.lfd);
	}
	return rc;
}

int
bench_memcpy_main(int argc, char **argv)
{
	struct kvbench b;
	int rc = kvb_init(&b, "memcpy", argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (b.cold && b.keys < b.conc) {
		fprintf(stderr,
			"openlake bench memcpy: --cold needs --keys of at least one block per "
			"thread (--concurrency)\n");
		return 2;
	}
	rc = kvb_alloc(&b, 1 + memcpy_blocks(&b)) ? 1 : kvb_run(&b, memcpy_op, false);
	kvb_free(&b);
	return rc;
}

int
bench_kv_main(int argc, char **argv)
{
	struct kvbench b;
	int rc = kvb_init(&b, "kv", argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	rc = kvb_alloc(&b, 1) || kv_setup(&b) || kv_probe(&b) ? 1 : kvb_run(&b, kv_op, true);
	kv_teardown(&b);
	kvb_free(&b);
	return rc;
}
