/* Unit tests of the etcd gateway codec (pure JSON encode/decode, answers captured from etcd
 * 3.4.23), the HTTP head and chunk parsers, the client's endpoint failover (each try's share
 * of the deadline; real loopback sockets: members that hang, one that answers as a member in
 * a minority does, one that answers), the layout builder and its JSON, and the [cluster]
 * config keys. No etcd is needed: tests/integration/test_etcd_cluster.py runs one. */
#include "base/config.h"
#include "cluster/etcd.h"
#include "cluster/etcd_json.h"
#include "cluster/httpc.h"
#include "cluster/layout.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HDR                                                                                        \
	"{\"cluster_id\":\"3249\",\"member_id\":\"3319\",\"revision\":\"%s\",\"raft_term\":\"2\"}"

static json_t *
parse(const char *s)
{
	json_error_t e;
	return s ? json_loads(s, 0, &e) : NULL;
}

static const char *
str_at(json_t *o, const char *path1, const char *path2)
{
	json_t *j = json_object_get(o, path1);
	if (path2)
		j = json_object_get(j, path2);
	return json_string_value(j);
}

static void
test_encode(void)
{
	char *s = ol_etcd_enc_range("/openlake/members/", OL_ETCD_PREFIX, 42, 7);
	json_t *o = parse(s);
	/* "/openlake/members/" and its prefix end "/openlake/members0" in base64 */
	ok(o && strcmp(str_at(o, "key", NULL), "L29wZW5sYWtlL21lbWJlcnMv") == 0 &&
	       strcmp(str_at(o, "range_end", NULL), "L29wZW5sYWtlL21lbWJlcnMw") == 0,
	   "range: base64 key and prefix end: %s", s);
	ok(o && strcmp(str_at(o, "revision", NULL), "42") == 0 &&
	       strcmp(str_at(o, "limit", NULL), "7") == 0,
	   "range: revision and limit are JSON strings");
	json_decref(o);
	free(s);

	s = ol_etcd_enc_put("foo", "bar", 3, 7587862000000000001LL);
	o = parse(s);
	ok(o && strcmp(str_at(o, "key", NULL), "Zm9v") == 0 &&
	       strcmp(str_at(o, "value", NULL), "YmFy") == 0 &&
	       strcmp(str_at(o, "lease", NULL), "7587862000000000001") == 0,
	   "put: key, value, 64-bit lease as a string: %s", s);
	json_decref(o);
	free(s);

	s = ol_etcd_enc_put("k", "", 0, 0);
	o = parse(s);
	ok(o && strcmp(str_at(o, "value", NULL), "") == 0 && !json_object_get(o, "lease"),
	   "put: empty value, no lease field");
	json_decref(o);
	free(s);

	struct ol_etcd_cmp cmp = {
	    .key = "/l", .target = OL_ETCD_CMP_CREATE, .result = OL_ETCD_EQUAL, .number = 0};
	struct ol_etcd_op put = {.type = OL_ETCD_OP_PUT, .key = "/l", .value = "x", .value_len = 1};
	struct ol_etcd_op get = {.type = OL_ETCD_OP_RANGE, .key = "/l"};
	s = ol_etcd_enc_txn(&cmp, 1, &put, 1, &get, 1);
	o = parse(s);
	json_t *c0 = json_array_get(json_object_get(o, "compare"), 0);
	ok(c0 && strcmp(str_at(c0, "target", NULL), "CREATE") == 0 &&
	       strcmp(str_at(c0, "result", NULL), "EQUAL") == 0 &&
	       strcmp(str_at(c0, "create_revision", NULL), "0") == 0,
	   "txn: create-if-absent compare: %s", s);
	ok(json_object_get(json_array_get(json_object_get(o, "success"), 0), "request_put") &&
	       json_object_get(json_array_get(json_object_get(o, "failure"), 0), "request_range"),
	   "txn: success put, failure range");
	json_decref(o);
	free(s);

	struct ol_etcd_cmp vc = {.key = "/v",
				 .target = OL_ETCD_CMP_VALUE,
				 .result = OL_ETCD_NOT_EQUAL,
				 .value = "ab",
				 .value_len = 2};
	s = ol_etcd_enc_txn(&vc, 1, NULL, 0, NULL, 0);
	o = parse(s);
	c0 = json_array_get(json_object_get(o, "compare"), 0);
	ok(c0 && strcmp(str_at(c0, "value", NULL), "YWI=") == 0 &&
	       strcmp(str_at(c0, "result", NULL), "NOT_EQUAL") == 0,
	   "txn: value compare");
	json_decref(o);
	free(s);
	struct ol_etcd_cmp bad = {.key = "/v", .target = 9};
	s = ol_etcd_enc_txn(&bad, 1, NULL, 0, NULL, 0);
	ok(s == NULL, "txn: an unknown compare target is refused");
	free(s);

	s = ol_etcd_enc_watch("/p/", OL_ETCD_PREFIX, 17);
	o = parse(s);
	ok(o && strcmp(str_at(o, "create_request", "start_revision"), "17") == 0 &&
	       strcmp(str_at(o, "create_request", "key"), "L3Av") == 0,
	   "watch: create_request from a revision: %s", s);
	json_decref(o);
	free(s);

	s = ol_etcd_enc_lease("ID", 2324035790434194696LL);
	ok(s && strcmp(s, "{\"ID\":\"2324035790434194696\"}") == 0, "lease id: %s", s);
	free(s);

	char end[8];
	size_t el = ol_etcd_prefix_end("a\xff\xff", 3, end);
	ok(el == 1 && end[0] == 'b', "prefix end drops trailing 0xff");
	el = ol_etcd_prefix_end("\xff", 1, end);
	ok(el == 1 && end[0] == 0, "prefix end of all-0xff is \\0 (every key)");
}

static void
test_decode(void)
{
	char buf[2048];
	struct ol_etcd_range_result r;
	snprintf(buf, sizeof(buf),
		 "{\"header\":" HDR ",\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\","
		 "\"mod_revision\":\"3\",\"version\":\"2\",\"value\":\"YmFy\",\"lease\":"
		 "\"7587862000000000001\"}],\"count\":\"1\"}",
		 "9");
	int rc = ol_etcd_dec_range(buf, strlen(buf), &r);
	ok(rc == 0 && r.revision == 9 && r.count == 1 && r.n_kvs == 1, "range decodes (%d)", rc);
	ok(rc == 0 && strcmp(r.kvs[0].key, "foo") == 0 && r.kvs[0].value_len == 3 &&
	       memcmp(r.kvs[0].value, "bar", 3) == 0 && r.kvs[0].create_revision == 2 &&
	       r.kvs[0].mod_revision == 3 && r.kvs[0].lease == 7587862000000000001LL,
	   "range: key, value, revisions, 64-bit lease");
	ol_etcd_range_result_fini(&r);

	snprintf(buf, sizeof(buf), "{\"header\":" HDR "}", "5");
	rc = ol_etcd_dec_range(buf, strlen(buf), &r);
	ok(rc == 0 && r.n_kvs == 0 && r.revision == 5, "range of nothing");
	ol_etcd_range_result_fini(&r);

	const char *comp = "{\"error\":\"etcdserver: mvcc: required revision has been compacted\","
			   "\"message\":\"etcdserver: mvcc: required revision has been "
			   "compacted\",\"code\":11}";
	ok(ol_etcd_dec_range(comp, strlen(comp), &r) == OL_ETCD_ECOMPACTED,
	   "compacted revision is OL_ETCD_ECOMPACTED");
	const char *nolease = "{\"error\":\"etcdserver: requested lease not found\",\"message\":"
			      "\"etcdserver: requested lease not found\",\"code\":5}";
	int code = 0;
	char msg[64];
	ok(ol_etcd_json_error(nolease, strlen(nolease), &code, msg, sizeof(msg)) == -ENOENT &&
	       code == 5 && strstr(msg, "lease not found"),
	   "lease not found is -ENOENT");
	const char *unavail = "{\"error\":\"etcdserver: leader changed\",\"code\":14}";
	ok(ol_etcd_json_error(unavail, strlen(unavail), NULL, NULL, 0) == -EAGAIN,
	   "unavailable is -EAGAIN (retried on the next endpoint)");
	const char *stream_err = "{\"error\":{\"grpc_code\":5,\"http_code\":404,\"message\":"
				 "\"etcdserver: requested lease not found\"}}";
	ok(ol_etcd_dec_lease(stream_err, strlen(stream_err), NULL, NULL) == -ENOENT,
	   "a stream's error object");

	int64_t id = 0, ttl = 0;
	snprintf(buf, sizeof(buf),
		 "{\"header\":" HDR ",\"ID\":\"2324035790434194696\",\"TTL\":\"5\"}", "2");
	ok(ol_etcd_dec_lease(buf, strlen(buf), &id, &ttl) == 0 && id == 2324035790434194696LL &&
	       ttl == 5,
	   "lease grant: 64-bit id from a string");
	snprintf(buf, sizeof(buf), "{\"result\":{\"header\":" HDR ",\"ID\":\"12\",\"TTL\":\"9\"}}",
		 "2");
	ok(ol_etcd_dec_lease(buf, strlen(buf), &id, &ttl) == 0 && id == 12 && ttl == 9,
	   "keepalive answer inside result");
	snprintf(buf, sizeof(buf), "{\"result\":{\"header\":" HDR ",\"ID\":\"12345\"}}", "2");
	ok(ol_etcd_dec_lease(buf, strlen(buf), &id, &ttl) == -ENOENT,
	   "keepalive of a lost lease (no TTL) is -ENOENT");
	snprintf(buf, sizeof(buf), "{\"header\":" HDR ",\"ID\":\"12345\",\"TTL\":\"-1\"}", "2");
	ok(ol_etcd_dec_lease(buf, strlen(buf), &id, &ttl) == -ENOENT,
	   "timetolive of a lost lease (-1) is -ENOENT");

	struct ol_etcd_txn_result t;
	snprintf(buf, sizeof(buf),
		 "{\"header\":" HDR ",\"responses\":[{\"response_range\":{\"header\":{\"revision\":"
		 "\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":"
		 "\"2\",\"version\":\"1\",\"value\":\"YmFy\"}],\"count\":\"1\"}}]}",
		 "2");
	rc = ol_etcd_dec_txn(buf, strlen(buf), &t);
	ok(rc == 0 && !t.succeeded && t.n_ranges == 1 && t.ranges[0].n_kvs == 1 &&
	       strcmp(t.ranges[0].kvs[0].value, "bar") == 0,
	   "txn that failed (succeeded omitted) with the failure branch's range");
	ol_etcd_txn_result_fini(&t);
	snprintf(buf, sizeof(buf),
		 "{\"header\":" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":"
		 "{\"header\":{\"revision\":\"3\"}}}]}",
		 "3");
	rc = ol_etcd_dec_txn(buf, strlen(buf), &t);
	ok(rc == 0 && t.succeeded && t.n_ranges == 0 && t.revision == 3, "txn that succeeded");
	ol_etcd_txn_result_fini(&t);

	int64_t rev = 0, del = 0;
	snprintf(buf, sizeof(buf), "{\"header\":" HDR ",\"deleted\":\"1\"}", "3");
	ok(ol_etcd_dec_write(buf, strlen(buf), &rev, &del) == 0 && rev == 3 && del == 1,
	   "deleterange");

	const char *junk[] = {"",
			      "[]",
			      "{\"kvs\":{}}",
			      "{\"kvs\":[{\"key\":\"Zm9\"}]}",
			      "{\"header\":{\"revision\":\"12x\"}}",
			      "{\"count\":true}",
			      "{\"kvs\":[{\"key\":\"!!!!\"}]}"};
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		ok(ol_etcd_dec_range(junk[i], strlen(junk[i]), &r) == -EPROTO,
		   "malformed range answer %zu is -EPROTO", i);
}

static void
test_watch(void)
{
	char buf[4096];
	int n = snprintf(
	    buf, sizeof(buf),
	    "{\"result\":{\"header\":" HDR ",\"created\":true}}\n"
	    "{\"result\":{\"header\":" HDR ",\"events\":[{\"kv\":{\"key\":\"Zm9v\","
	    "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"YmFy\"}"
	    "},"
	    "{\"type\":\"DELETE\",\"kv\":{\"key\":\"Zm9v\",\"mod_revision\":\"3\"}}]}}\n"
	    "{\"result\":{\"header\":{\"raft_term\":\"2\"},\"canceled\":true,\"compact_revision\":"
	    "\"2\"}}\n{\"result\":",
	    "3", "3");
	struct ol_etcd_watch_msg m;
	long used = ol_etcd_watch_parse(buf, (size_t)n, &m);
	ok(used > 0 && m.created && m.revision == 3 && m.n_events == 0, "watch: created");
	ol_etcd_watch_msg_fini(&m);
	long u2 = ol_etcd_watch_parse(buf + used, (size_t)n - (size_t)used, &m);
	ok(u2 > 0 && m.n_events == 2 && m.events[0].type == OL_ETCD_EV_PUT &&
	       m.events[1].type == OL_ETCD_EV_DELETE && m.events[1].kv.mod_revision == 3 &&
	       strcmp(m.events[0].kv.value, "bar") == 0,
	   "watch: put and delete events");
	ol_etcd_watch_msg_fini(&m);
	used += u2;
	u2 = ol_etcd_watch_parse(buf + used, (size_t)n - (size_t)used, &m);
	ok(u2 > 0 && m.canceled && m.compact_revision == 2, "watch: canceled by compaction");
	ol_etcd_watch_msg_fini(&m);
	used += u2;
	ok(ol_etcd_watch_parse(buf + used, (size_t)n - (size_t)used, &m) == 0,
	   "watch: an incomplete line needs more");
	ok(ol_etcd_watch_parse("\r\n", 2, &m) == 2, "watch: blank line consumed");
	ok(ol_etcd_watch_parse("{\"result\":[]}\n", 14, &m) == -EPROTO, "watch: junk refused");
}

static void
test_http(void)
{
	const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			"Transfer-Encoding: chunked\r\n\r\n8\r\n";
	int st;
	int64_t cl;
	bool ch;
	long n = ol_httpc_parse_head(h, strlen(h), &st, &cl, &ch);
	ok(n > 0 && st == 200 && ch && cl == -1 && h[n] == '8', "head: chunked");
	h = "HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n";
	n = ol_httpc_parse_head(h, strlen(h), &st, &cl, &ch);
	ok(n == (long)strlen(h) && st == 400 && cl == 12 && !ch, "head: content-length");
	ok(ol_httpc_parse_head(h, 20, &st, &cl, &ch) == 0, "head: partial needs more");
	h = "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n";
	ok(ol_httpc_parse_head(h, strlen(h), &st, &cl, &ch) == -EPROTO, "head: bad length");
	h = "SMTP ready\r\n\r\n";
	ok(ol_httpc_parse_head(h, strlen(h), &st, &cl, &ch) == -EPROTO, "head: not HTTP");

	size_t off, dl;
	const char *c = "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
	n = ol_httpc_chunk(c, strlen(c), &off, &dl);
	ok(n == 32 && off == 4 && dl == 26, "chunk: data");
	ok(ol_httpc_chunk(c + n, strlen(c) - (size_t)n, &off, &dl) == 5 && dl == 0, "chunk: last");
	ok(ol_httpc_chunk(c, 10, &off, &dl) == 0, "chunk: partial");
	ok(ol_httpc_chunk("zz\r\n", 4, &off, &dl) == -EPROTO, "chunk: bad size");
	ok(ol_httpc_chunk("3\r\nabcX\n", 8, &off, &dl) == -EPROTO, "chunk: bad end");
	ok(ol_httpc_chunk("fffffffff\r\n", 11, &off, &dl) == -EMSGSIZE, "chunk: too big");

	char host[64], port[8];
	ok(ol_httpc_parse_url("http://127.0.0.1:2379", host, sizeof(host), port, sizeof(port)) ==
		   0 &&
	       strcmp(host, "127.0.0.1") == 0 && strcmp(port, "2379") == 0,
	   "url");
	ok(ol_httpc_parse_url("[::1]:2379/", host, sizeof(host), port, sizeof(port)) == 0 &&
	       strcmp(host, "::1") == 0,
	   "url: ipv6, no scheme");
	ok(ol_httpc_parse_url("https://h:1", host, sizeof(host), port, sizeof(port)) ==
	       -EPROTONOSUPPORT,
	   "url: https refused");
	ok(ol_httpc_parse_url("http://h", host, sizeof(host), port, sizeof(port)) == -EINVAL,
	   "url: no port");
}

static void
test_try_share(void)
{
	/* TTL 5 s: a call has 1666 ms over 3 members */
	ok(ol_etcd_try_ms(1666, 3) == 555 && ol_etcd_try_ms(1111, 2) == 555 &&
	       ol_etcd_try_ms(556, 1) == 556,
	   "3 members share a call's deadline equally: two hung ones leave the third its share");
	ok(ol_etcd_try_ms(600, 3) == OL_ETCD_MIN_TRY_MS && ol_etcd_try_ms(100, 3) == 100 &&
	       ol_etcd_try_ms(0, 1) == 0,
	   "a try is given at least OL_ETCD_MIN_TRY_MS, never more than is left");
	unsigned o[4];
	bool none[4] = {false, false, false, false}, two[3] = {true, true, false};
	ok(ol_etcd_order(3, 1, none, o) == 3 && o[0] == 1 && o[1] == 2 && o[2] == 0,
	   "no suspect member: the order starts where the last answer came from");
	ok(ol_etcd_order(3, 0, two, o) == 1 && o[0] == 2 && o[1] == 0 && o[2] == 1,
	   "members whose tries ran out of time go after the one that did not");
}

/* A loopback listener; serve: answer every request with status and body (body NULL: accept
 * nothing, so connections sit in the backlog with their requests unread, as on a member that
 * hangs). */
struct fake {
	int fd;
	char url[64];
	const char *status, *body;
	int delay_ms; /* before each answer: a member slow to answer */
	atomic_int hits, require_leader;
	pthread_t t;
};

/* read one request (head and Content-Length body) from c into req; its length */
static size_t
read_request(int c, char *req, size_t cap)
{
	size_t n = 0, want = 0;
	ssize_t r;
	while (n < cap - 1 && (!want || n < want) && (r = read(c, req + n, cap - 1 - n)) > 0) {
		n += (size_t)r;
		req[n] = 0;
		const char *end = strstr(req, "\r\n\r\n"), *cl = strstr(req, "Content-Length: ");
		if (end && !want)
			want = (size_t)(end + 4 - req) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
	}
	req[n] = 0;
	return n;
}

static void *
fake_main(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		int c = accept(f->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char req[4096], resp[1024];
		read_request(c, req, sizeof(req));
		atomic_fetch_add(&f->hits, 1);
		if (f->delay_ms)
			usleep((useconds_t)f->delay_ms * 1000);
		if (strstr(req, "\r\nGrpc-Metadata-Hasleader: true\r\n"))
			atomic_fetch_add(&f->require_leader, 1);
		int n = snprintf(resp, sizeof(resp),
				 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\n\r\n%s",
				 f->status, strlen(f->body), f->body);
		if (n <= 0 || write(c, resp, (size_t)n) != n)
			printf("# fake member: write failed\n");
		close(c);
	}
}

static int
fake_start(struct fake *f, const char *status, const char *body)
{
	memset(f, 0, sizeof(*f));
	f->status = status;
	f->body = body;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&a, sizeof(a)) || listen(f->fd, 16) ||
	    getsockname(f->fd, (struct sockaddr *)&a, &al))
		return -1;
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", ntohs(a.sin_port));
	return body ? pthread_create(&f->t, NULL, fake_main, f) : 0;
}

static void
fake_stop(struct fake *f)
{
	shutdown(f->fd, SHUT_RDWR); /* accept() fails: the thread ends */
	if (f->body)
		pthread_join(f->t, NULL);
	close(f->fd);
}

/* answers of etcd 3.4.23's gateway: a range, and a member without a raft leader */
#define OK_RANGE "{\"header\":{\"revision\":\"7\"},\"count\":\"0\",\"kvs\":[],\"more\":false}"
#define NO_LEADER                                                                                  \
	"{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}"

static void
test_failover(void)
{
	struct fake hung1, hung2, minority, live;
	int rc = fake_start(&hung1, NULL, NULL);
	rc = rc ? rc : fake_start(&hung2, NULL, NULL);
	rc = rc ? rc : fake_start(&minority, "503 Service Unavailable", NO_LEADER);
	rc = rc ? rc : fake_start(&live, "200 OK", OK_RANGE);
	ok(rc == 0, "four loopback listeners");
	if (rc)
		return;
	/* the order every node lists them in: the first two hang (a member cut off, or
	 * stopped, with its connections open), the third answers */
	const char *eps[] = {hung1.url, hung2.url, live.url};
	struct ol_etcd *c;
	struct ol_etcd_range_result r;
	/* the deadline is large enough that the live member's answer fits its share with room on
	 * a loaded machine under a sanitizer (at 1666 ms, shares of 555, an ASan run at load 35
	 * missed a bound) */
	const int dl = 4998, sh = ol_etcd_try_ms(dl, 3);
	rc = ol_etcd_new(eps, 3, dl, &c);
	int64_t t0 = ol_httpc_now_ms();
	rc = rc ? rc : ol_etcd_range(c, "k", 0, 0, 0, &r);
	int64_t took = ol_httpc_now_ms() - t0;
	/* rc 0: within the deadline (the last try's own deadline is the call's) */
	ok(rc == 0 && r.revision == 7 && took >= 2 * sh - 10,
	   "a call whose first two members hang reaches the third within its deadline (%d, "
	   "%lld ms)",
	   rc, (long long)took);
	if (rc == 0)
		ol_etcd_range_result_fini(&r);
	t0 = ol_httpc_now_ms();
	rc = ol_etcd_range(c, "k", 0, 0, 0, &r);
	took = ol_httpc_now_ms() - t0;
	/* (a try of a hung member would last its share: the bound tells the two apart without
	 * asking a loaded machine for speed) */
	ok(rc == 0 && took < sh && strcmp(ol_etcd_endpoint(c), live.url) == 0,
	   "the next call starts at the member that answered (%lld ms)", (long long)took);
	if (rc == 0)
		ol_etcd_range_result_fini(&r);
	ol_etcd_free(c);

	/* a member in a minority answers "no leader" at once: the call moves on without waiting */
	const char *eps2[] = {minority.url, live.url};
	rc = ol_etcd_new(eps2, 2, dl, &c);
	t0 = ol_httpc_now_ms();
	rc = rc ? rc : ol_etcd_range(c, "k", 0, 0, 0, &r);
	took = ol_httpc_now_ms() - t0;
	ok(rc == 0 && took < dl / 2 /* waiting on it would take its share */ &&
	       atomic_load(&minority.hits) == 1 && atomic_load(&minority.require_leader) == 1 &&
	       atomic_load(&live.require_leader) >= 3,
	   "every request requires a leader; \"no leader\" moves to the next member at once "
	   "(%d, %lld ms)",
	   rc, (long long)took);
	if (rc == 0)
		ol_etcd_range_result_fini(&r);
	ol_etcd_free(c);
	fake_stop(&minority);
	fake_stop(&live);

	/* a member that answers behind two that hang (a majority member reached through a cut),
	 * then more slowly than a third of the deadline (a loaded machine): the hung two are
	 * suspect after the first call, so it is given half of the deadline (before: a third in
	 * every call, so it was never reached again) */
	struct fake slow;
	rc = fake_start(&slow, "200 OK", OK_RANGE);
	const char *eps3[] = {hung1.url, hung2.url, slow.url};
	rc = rc ? rc : ol_etcd_new(eps3, 3, dl, &c);
	rc = rc ? rc : ol_etcd_range(c, "k", 0, 0, 0, &r);
	ok(rc == 0, "a call whose first two members hang reaches the third (%d)", rc);
	if (rc == 0)
		ol_etcd_range_result_fini(&r);
	slow.delay_ms = dl / 3 + 300;
	int rc2 = -1;
	for (int i = 0; i < 2 && rc2; i++) { /* twice: one more try of the hung members, if any */
		rc2 = ol_etcd_range(c, "k", 0, 0, 0, &r);
		if (rc2 == 0)
			ol_etcd_range_result_fini(&r);
	}
	ok(rc2 == 0 && strcmp(ol_etcd_endpoint(c), slow.url) == 0,
	   "the hung members count as one: the slow member answers in its half (%d)", rc2);
	ol_etcd_free(c);
	fake_stop(&hung1);
	fake_stop(&hung2);
	fake_stop(&slow);
}

static void
test_layout(void)
{
	unsigned ids[] = {0, 1, 2, 3}, disks[] = {2, 2, 2, 2};
	struct ol_layout l;
	int rc = ol_layout_build(ids, disks, 4, 4, 1, "dep", &l);
	ok(rc == 0 && l.n_pools == 1 && l.pools[0].n_sets == 2, "4 nodes x 2 drives, N=4: 2 sets");
	int each = rc == 0;
	for (unsigned s = 0; each && s < 2; s++) {
		each = ol_layout_set_span(&l, 0, s) == 4;
		for (unsigned j = 0; each && j < 4; j++)
			each = l.pools[0].slots[s * 4 + j].node == j &&
			       l.pools[0].slots[s * 4 + j].drive == s;
	}
	ok(each, "each set has one drive on each node, drives used in order");

	char *js = rc == 0 ? ol_layout_to_json(&l) : NULL;
	struct ol_layout back;
	rc = js ? ol_layout_from_json(js, strlen(js), &back) : -1;
	ok(rc == 0 && back.set_drives == 4 && back.parity == 1 &&
	       strcmp(back.deployment_id, "dep") == 0 && back.pools[0].n_sets == 2 &&
	       memcmp(back.pools[0].slots, l.pools[0].slots, 8 * sizeof(struct ol_layout_slot)) ==
		   0,
	   "layout JSON round trip: %s", js ? js : "(null)");
	if (rc == 0)
		ol_layout_fini(&back);
	free(js);
	ol_layout_fini(&l);

	unsigned ids3[] = {5, 6, 7}, d3[] = {4, 4, 4};
	rc = ol_layout_build(ids3, d3, 3, 4, 2, "x", &l);
	each = rc == 0 && l.pools[0].n_sets == 3;
	for (unsigned s = 0; each && s < 3; s++)
		each = ol_layout_set_span(&l, 0, s) == 3;
	ok(each, "3 nodes x 4 drives, N=4: every set spans all 3 nodes");
	if (rc == 0)
		ol_layout_fini(&l);

	unsigned idsu[] = {0, 1, 2}, du[] = {4, 2, 2};
	rc = ol_layout_build(idsu, du, 3, 4, 1, "u", &l);
	each = rc == 0 && l.pools[0].n_sets == 2;
	for (unsigned s = 0; each && s < 2; s++)
		each = ol_layout_set_span(&l, 0, s) == 3;
	ok(each, "uneven drives 4+2+2, N=4: both sets span 3 nodes");
	if (rc == 0)
		ol_layout_fini(&l);

	unsigned one[] = {0}, d1[] = {6};
	ok(ol_layout_build(one, d1, 1, 4, 1, "x", &l) == -EINVAL, "6 drives, N=4: refused");
	ok(ol_layout_build(one, d1, 1, 3, 3, "x", &l) == -EINVAL, "P >= N refused");
	const char *bad[] = {"{}",
			     "{\"deployment_id\":\"a\",\"set_drive_count\":2,\"parity\":1,"
			     "\"pools\":[{\"sets\":[[{\"node\":0,\"drive\":0}]]}]}",
			     "{\"deployment_id\":\"a\",\"set_drive_count\":1,\"parity\":1,"
			     "\"pools\":[{\"sets\":[[{\"node\":0,\"drive\":0}]]}]}"};
	for (size_t i = 0; i < 3; i++)
		ok(ol_layout_from_json(bad[i], strlen(bad[i]), &l) == -EPROTO,
		   "malformed layout %zu refused", i);

	/* growing: a second pool of new nodes, the first untouched */
	struct ol_layout old, g;
	unsigned ids2[] = {4, 5, 6, 7}, d2[] = {1, 1, 1, 1}, bad2[] = {1, 1, 1, 2};
	rc = ol_layout_build(ids, disks, 4, 4, 1, "dep", &old);
	rc = rc ? rc : ol_layout_build(ids, disks, 4, 4, 1, "dep", &g);
	ok(rc == 0 && ol_layout_add_pool(&g, ids2, d2, 4) == 0 && g.n_pools == 2 &&
	       g.pools[1].n_sets == 1 && ol_layout_set_span(&g, 1, 0) == 4 &&
	       ol_layout_has_node(&g, 7) && !ol_layout_has_node(&old, 7),
	   "a pool of 4 new nodes x 1 drive added: 1 set over the 4");
	ok(ol_layout_extends(&old, &g) && !ol_layout_extends(&g, &old) && ol_layout_extends(&g, &g),
	   "the grown layout extends the old one, not the other way");
	ok(ol_layout_add_pool(&g, ids2, d2, 4) == -EEXIST, "nodes already in it: -EEXIST");
	unsigned ids3b[] = {8, 9, 10, 11};
	ok(ol_layout_add_pool(&g, ids3b, bad2, 4) == -EINVAL && g.n_pools == 2,
	   "5 new drives for N=4: -EINVAL, layout unchanged");
	char *gj = ol_layout_to_json(&g);
	struct ol_layout gb;
	ok(gj && ol_layout_from_json(gj, strlen(gj), &gb) == 0 && ol_layout_extends(&g, &gb) &&
	       ol_layout_extends(&gb, &g),
	   "two pools round-trip through JSON");
	if (gj)
		ol_layout_fini(&gb);
	free(gj);
	/* leaving: pool 1 draining, then removed; states round-trip and only advance */
	struct ol_layout dr, rm;
	ok(ol_layout_draining(&g) == -1 && ol_layout_live_pools(&g) == 2,
	   "no pool draining, 2 live");
	g.pools[1].state = OL_POOL_DRAINING;
	gj = ol_layout_to_json(&g);
	rc = gj ? ol_layout_from_json(gj, strlen(gj), &dr) : -ENOMEM;
	ok(rc == 0 && dr.pools[1].state == OL_POOL_DRAINING && dr.pools[0].state == 0 &&
	       strstr(gj, "\"state\":\"draining\"") && ol_layout_draining(&dr) == 1,
	   "a draining pool round-trips through JSON");
	free(gj);
	g.pools[1].state = OL_POOL_REMOVED;
	gj = ol_layout_to_json(&g);
	rc = gj ? ol_layout_from_json(gj, strlen(gj), &rm) : -ENOMEM;
	ok(rc == 0 && rm.pools[1].state == OL_POOL_REMOVED && ol_layout_live_pools(&rm) == 1 &&
	       ol_layout_store_pool(&rm, 1) == 1 && ol_layout_draining(&rm) == -1,
	   "a removed pool keeps its place: 1 live pool");
	free(gj);
	g.pools[1].state = OL_POOL_ACTIVE;
	ok(ol_layout_follows(&g, &dr) && ol_layout_follows(&dr, &rm) &&
	       ol_layout_follows(&g, &rm) && !ol_layout_follows(&rm, &dr) &&
	       !ol_layout_follows(&rm, &g) && ol_layout_follows(&dr, &g) &&
	       ol_layout_follows(&old, &dr),
	   "states only advance (a draining pool may go back to active), with pools appended");
	ok(!ol_layout_extends(&g, &dr) && !ol_layout_extends(&dr, &g),
	   "a changed state is not an extension");
	/* the serving pool: the first active one; pool 0 draining moves it to pool 1 */
	ok(ol_layout_serving_pool(&g) == 0 && ol_layout_serving_pool(&dr) == 0,
	   "pool 0 active: its set 0 serves, also while pool 1 drains");
	g.pools[0].state = OL_POOL_DRAINING;
	ok(ol_layout_serving_pool(&g) == 1, "pool 0 draining: pool 1 serves");
	g.pools[0].state = OL_POOL_REMOVED;
	ok(ol_layout_serving_pool(&g) == 1, "pool 0 removed: pool 1 serves");
	g.pools[1].state = OL_POOL_DRAINING;
	ok(ol_layout_serving_pool(&g) == 1, "no pool active: the first not removed");
	g.pools[0].state = OL_POOL_ACTIVE;
	g.pools[1].state = OL_POOL_ACTIVE;
	const char *badstate = "{\"deployment_id\":\"d\",\"set_drive_count\":1,\"parity\":0,"
			       "\"pools\":[{\"state\":\"gone\",\"sets\":[[{\"node\":0,"
			       "\"drive\":0}]]}]}";
	struct ol_layout bs;
	ok(ol_layout_from_json(badstate, strlen(badstate), &bs) == -EPROTO,
	   "an unknown state refused");
	ol_layout_fini(&dr);
	ol_layout_fini(&rm);
	old.pools[0].slots[0].drive ^= 1;
	ok(!ol_layout_extends(&old, &g), "a changed pool 0 is not an extension");
	ok(!ol_layout_follows(&old, &g), "nor does it follow");
	ol_layout_fini(&old);
	ol_layout_fini(&g);
}

static void
test_config(void)
{
	static struct ol_config c;
	char err[512], ep[64];
	const char *t =
	    "[cluster]\netcd = [\"http://127.0.0.1:2379\", \"http://127.0.0.1:22379\"]\n"
	    "lease_ttl_s = 5\n";
	ol_config_default(&c);
	int rc = ol_config_parse(&c, "t", t, strlen(t), err, sizeof(err));
	ok(rc == 0 && ol_config_validate(&c, err, sizeof(err)) == 0 && c.cluster_lease_ttl_s == 5 &&
	       strcmp(c.cluster_prefix, "/openlake/") == 0,
	   "[cluster] etcd array, lease_ttl_s, default prefix (%s)", rc ? err : "");
	ok(ol_config_list_item(c.cluster_etcd, 1, ep, sizeof(ep)) == 0 &&
	       strcmp(ep, "http://127.0.0.1:22379") == 0 &&
	       ol_config_list_item(c.cluster_etcd, 2, ep, sizeof(ep)) == -ENOENT,
	   "endpoints listed in order");
	ol_config_default(&c);
	t = "[cluster]\netcd = \"127.0.0.1:2379\"\n";
	ok(ol_config_parse(&c, "t", t, strlen(t), err, sizeof(err)) == 0 &&
	       strcmp(c.cluster_etcd, "127.0.0.1:2379") == 0,
	   "[cluster] etcd as one string");
	ol_config_default(&c);
	t = "[cluster]\netcd = [\"http://nohost\"]\n";
	ok(ol_config_parse(&c, "t", t, strlen(t), err, sizeof(err)) == 0 &&
	       ol_config_validate(&c, err, sizeof(err)) == -EINVAL && strstr(err, "cluster.etcd"),
	   "an endpoint without a port is refused: %s", err);
	ol_config_default(&c);
	ok(ol_config_set(&c, "cluster.etcd", "http://a:1, http://b:2", err, sizeof(err)) == 0 &&
	       ol_config_validate(&c, err, sizeof(err)) == -EINVAL,
	   "an override with a space after the comma is refused");
	ol_config_default(&c);
	ok(ol_config_set(&c, "cluster.etcd", "http://a:1,http://b:2/", err, sizeof(err)) == 0 &&
	       ol_config_validate(&c, err, sizeof(err)) == 0,
	   "a comma-separated override, trailing slash allowed: %s", err);
	ol_config_default(&c);
	ok(ol_config_set(&c, "cluster.prefix", "noslash", err, sizeof(err)) == 0 &&
	       ol_config_validate(&c, err, sizeof(err)) == -EINVAL,
	   "a prefix without slashes is refused");
	ol_config_default(&c);
	t = "[[nodes]]\nid = 0\nrpc_addr = \"a:1\"\n[[nodes]]\nid = 1\nrpc_addr = \"b:1\"\n";
	ok(ol_config_parse(&c, "t", t, strlen(t), err, sizeof(err)) == 0 &&
	       ol_config_distinct_nodes(&c) == 2,
	   "two distinct nodes counted");
}

/* the serving leader's offline drives (<prefix>offline): the text both ways, the follower's
 * rule, and every malformed value refused */
static void
test_offline(void)
{
	bool off[5] = {false, true, false, false, true}, view[5] = {0};
	struct ol_offline o;
	char *v = ol_offline_encode(42, 1, 2, off, 5);

	ok(v && strcmp(v, "epoch=42 pool=1 pools=2 drives=5 offline=01001") == 0, "encoded: %s",
	   v ? v : "(null)");
	ok(v && ol_offline_decode(v, strlen(v), &o) == 0 && o.epoch == 42 && o.pool == 1 &&
	       o.pools == 2 && o.n == 5 && o.off[1] && o.off[4] && !o.off[0] && !o.off[2],
	   "decoded back");
	ok(ol_offline_covers(&o, 2, view, 5), "a view with every drive writes");
	view[1] = true;
	ok(ol_offline_covers(&o, 2, view, 5), "a view lacking a drive the leader lacks writes");
	view[4] = true;
	ok(ol_offline_covers(&o, 2, view, 5), "... two such drives too");
	view[2] = true;
	ok(!ol_offline_covers(&o, 2, view, 5), "a view lacking a drive the leader has forwards");
	view[2] = false;
	ok(!ol_offline_covers(&o, 3, view, 5) && !ol_offline_covers(&o, 2, view, 4),
	   "another pool count or drive count: never");
	ol_offline_fini(&o);
	ok(!ol_offline_covers(&o, 2, view, 5), "no record: never");
	static const char *bad[] = {
	    "",
	    "epoch=42 pool=1 pools=2 drives=5 offline=0100",
	    "epoch=42 pool=1 pools=2 drives=5 offline=010011",
	    "epoch=42 pool=1 pools=2 drives=5 offline=01x01",
	    "epoch=42 pool=1 pools=2 drives=5 offline=01001 ",
	    "epoch=42 pool=1 pools=2 drives=5\n",
	    "epoch=42 pool=1 drives=5 offline=01001",
	    "epoch= pool=1 pools=2 drives=5 offline=01001",
	    "epoch=-1 pool=1 pools=2 drives=5 offline=01001",
	    "epoch=99999999999999999999999 pool=1 pools=2 drives=1 offline=0",
	    "epoch=1 pool=4294967296 pools=2 drives=1 offline=0",
	    "epoch=1 pool=0 pools=1 drives=65537 offline=0",
	    "pool=1 epoch=42 pools=2 drives=5 offline=01001",
	};
	int refused = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused += ol_offline_decode(bad[i], strlen(bad[i]), &o) == -EPROTO && !o.off;
	ok(refused == (int)(sizeof(bad) / sizeof(bad[0])), "%d of %zu malformed values refused",
	   refused, sizeof(bad) / sizeof(bad[0]));
	/* every prefix of a good value is refused, and never read past its length */
	int cut = 0;
	for (size_t l = 0; v && l < strlen(v); l++) {
		char *c = malloc(l ? l : 1);
		memcpy(c, v, l);
		cut += ol_offline_decode(c, l, &o) == -EPROTO;
		free(c);
	}
	ok(v && cut == (int)strlen(v), "every truncation refused (%d)", cut);
	ok(ol_offline_decode("epoch=0 pool=0 pools=1 drives=0 offline=", 40, &o) == 0 && o.n == 0,
	   "a store of no drive decodes");
	ol_offline_fini(&o);
	free(v);
}

/* A put on a lease that is gone (its holder stalled past the TTL): the member says "lease not
 * found" for good. The put retries it for the window a fresh grant takes to apply (3 s), then
 * returns -ENOENT, not at its 20 s deadline: a node stopping meanwhile waited for that. */
static void
test_lapsed_lease(void)
{
	struct fake gone;
	struct ol_etcd *c = NULL;
	int rc = fake_start(&gone, "404 Not Found",
			    "{\"error\":\"etcdserver: requested lease not found\",\"message\":"
			    "\"etcdserver: requested lease not found\",\"code\":5}");
	const char *eps[] = {gone.url};
	rc = rc ? rc : ol_etcd_new(eps, 1, 20000, &c);
	ok(rc == 0, "a member that lost the lease");
	if (rc)
		return;
	int64_t t0 = ol_httpc_now_ms();
	rc = ol_etcd_put(c, "/t/member", "v", 1, 42, NULL);
	int64_t ms = ol_httpc_now_ms() - t0;
	ok(rc == -ENOENT && atomic_load(&gone.hits) > 1 && ms >= 1000 && ms < 15000,
	   "a put on a lapsed lease retries about 3 s, then -ENOENT (rc %d, %d tries, %lld ms)", rc,
	   atomic_load(&gone.hits), (long long)ms);
	ol_etcd_free(c);
	fake_stop(&gone);
}

struct cut_call {
	struct ol_etcd *c;
	bool watch;
	int rc;
	int64_t done_ms;
};

static int
no_events(void *arg, const struct ol_etcd_event *ev, size_t n, int64_t revision)
{
	(void)arg, (void)ev, (void)n, (void)revision;
	return 0;
}

static void *
cut_call_main(void *arg)
{
	struct cut_call *k = arg;
	atomic_int stop = 0;
	struct ol_etcd_range_result r;
	k->rc = k->watch
		    ? ol_etcd_watch(k->c, "/t/", OL_ETCD_PREFIX, 0, no_events, NULL, &stop, NULL)
		    : ol_etcd_range(k->c, "/t/k", 0, 0, 0, &r);
	if (!k->watch && !k->rc)
		ol_etcd_range_result_fini(&r);
	k->done_ms = ol_httpc_now_ms();
	return NULL;
}

/* A stop's cutoff: a range and a watch waiting on a member that hangs (20 s deadline) both end
 * with -ECANCELED soon after the cutoff another thread sets; a call past the cutoff returns at
 * once; a later cutoff lets calls through again. */
static void
test_cutoff(void)
{
	struct fake hung, live;
	struct ol_etcd *c = NULL, *lc = NULL;
	int rc = fake_start(&hung, NULL, NULL);
	rc = rc ? rc : fake_start(&live, "200 OK", OK_RANGE);
	const char *eps[] = {hung.url}, *leps[] = {live.url};
	rc = rc ? rc : ol_etcd_new(eps, 1, 20000, &c);
	rc = rc ? rc : ol_etcd_new(leps, 1, 20000, &lc);
	ok(rc == 0, "a member that hangs and one that answers");
	if (rc)
		return;
	struct cut_call calls[2] = {{.c = c, .watch = false}, {.c = c, .watch = true}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, cut_call_main, &calls[i]);
	usleep(300 * 1000); /* both wait on the member */
	int64_t cut = ol_httpc_now_ms() + 200;
	ol_etcd_cutoff(c, 200);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		int64_t late = calls[i].done_ms - cut;
		ok(calls[i].rc == -ECANCELED && late >= 0 && late < 5000,
		   "a %s waiting on a hung member ends at the cutoff (rc %d, %lld ms after it, "
		   "deadline 20 s)",
		   calls[i].watch ? "watch" : "range", calls[i].rc, (long long)late);
	}
	int64_t t0 = ol_httpc_now_ms();
	rc = ol_etcd_put(c, "/t/k", "v", 1, 0, NULL);
	int64_t ms = ol_httpc_now_ms() - t0;
	ok(rc == -ECANCELED && ms < 1000, "a call past the cutoff returns at once (rc %d, %lld ms)",
	   rc, (long long)ms);

	struct ol_etcd_range_result r;
	ol_etcd_cutoff(lc, 0);
	rc = ol_etcd_range(lc, "/t/k", 0, 0, 0, &r);
	ok(rc == -ECANCELED && atomic_load(&live.hits) == 0,
	   "a cutoff of now: no request leaves (rc %d)", rc);
	ol_etcd_cutoff(lc, 60000);
	rc = ol_etcd_range(lc, "/t/k", 0, 0, 0, &r);
	ok(rc == 0 && r.revision == 7, "a later cutoff lets calls through again (rc %d)", rc);
	if (!rc)
		ol_etcd_range_result_fini(&r);
	ol_etcd_free(c);
	ol_etcd_free(lc);
	fake_stop(&hung);
	fake_stop(&live);
}

int
main(void)
{
	test_encode();
	test_decode();
	test_watch();
	test_http();
	test_try_share();
	test_failover();
	test_lapsed_lease();
	test_cutoff();
	test_layout();
	test_config();
	test_offline();
	tap_done();
}
