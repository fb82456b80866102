/* test_io.c - io/ helpers over real loopback sockets (TAP). */
#include "io/io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

static int n_test, n_fail;
#define OK(cond, ...)                                                                              \
	do {                                                                                       \
		n_test++;                                                                          \
		if (cond) {                                                                        \
			printf("ok %d - ", n_test);                                                \
		} else {                                                                           \
			n_fail++;                                                                  \
			printf("not ok %d - ", n_test);                                            \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static void
test_addr(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char buf[64];
	OK(ol_io_parse_addr("127.0.0.1:9000", &ss, &len) == 0 && ss.ss_family == AF_INET,
	   "parse v4");
	OK(ol_io_addr_str((struct sockaddr *)&ss, len, buf, sizeof(buf)) == 0 &&
	       !strcmp(buf, "127.0.0.1:9000"),
	   "format v4: %s", buf);
	OK(ol_io_parse_addr("[::1]:80", &ss, &len) == 0 && ss.ss_family == AF_INET6, "parse v6");
	OK(ol_io_addr_str((struct sockaddr *)&ss, len, buf, sizeof(buf)) == 0 &&
	       !strcmp(buf, "[::1]:80"),
	   "format v6: %s", buf);
	OK(ol_io_parse_addr(":9000", &ss, &len) == 0 &&
	       ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY),
	   "parse :port = any");
	OK(ol_io_parse_addr("0.0.0.0:0", &ss, &len) == 0, "parse 0.0.0.0:0");
	OK(ol_io_parse_addr("localhost:1", &ss, &len) == 0, "parse localhost");
	const char *bad[] = {"",	   "1.2.3.4",	  "1.2.3.4:", "1.2.3.4:65536",
			     "1.2.3.4:-1", "1.2.3:80",	  "[::1]",    "[::1]80",
			     "::1:80",	   "1.2.3.4:80x", "[zz]:80",  "host:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		OK(ol_io_parse_addr(bad[i], &ss, &len) == -EINVAL, "reject '%s'", bad[i]);
	ol_io_parse_addr("10.0.0.1:8080", &ss, &len);
	OK(ol_io_addr_str((struct sockaddr *)&ss, len, buf, 6) == -ENOSPC && strlen(buf) == 5,
	   "short buffer: -ENOSPC, truncated and terminated");
}

/* Host names: resolved with getaddrinfo, every address tried in turn. The names come from a
 * hosts file bind-mounted over /etc/hosts in a private mount namespace (root only). */
static void
test_resolve(void)
{
	struct ol_io_addr a[8];
	OK(ol_io_resolve("127.0.0.1:9", a, 8) == 1 && a[0].ss.ss_family == AF_INET,
	   "resolve numeric: one address");
	OK(ol_io_resolve("[::1]:9", a, 8) == 1 && a[0].ss.ss_family == AF_INET6, "resolve [v6]");
	const char *bad[] = {"", "name", "name:", "name:65536", ":", "na:me:80", "[x:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		OK(ol_io_resolve(bad[i], a, 8) == -EINVAL, "resolve rejects '%s'", bad[i]);
	int rc = ol_io_resolve("no-such-host.invalid:80", a, 8);
	OK(rc == -ENXIO || rc == -EAGAIN, "an unknown name: -ENXIO (or -EAGAIN): %d", rc);
	rc = ol_io_connect("no-such-host.invalid:80", 2000);
	OK(rc == -ENXIO || rc == -EAGAIN, "connect to an unknown name fails cleanly: %d", rc);

	char dir[] = "/tmp/ol_test_io_XXXXXX", hosts[64];
	if (geteuid() != 0 || !mkdtemp(dir)) {
		printf("ok %d - # SKIP names from a hosts file need root (a mount namespace)\n",
		       ++n_test);
		return;
	}
	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	FILE *f = fopen(hosts, "w");
	/* ol-node-b: ::1 and 127.0.0.1; the listener below is IPv4 only, so a connect that took
	 * only the first address would fail whenever the resolver puts ::1 first */
	if (f) {
		fputs("127.0.0.1 localhost\n127.0.0.1 ol-node-a\n::1 ol-node-b\n"
		      "127.0.0.1 ol-node-b\n",
		      f);
		fclose(f);
	}
	bool ns = f && unshare(CLONE_NEWNS) == 0 &&
		  mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		  mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0;
	if (!ns) {
		printf("ok %d - # SKIP no private mount namespace here (%s)\n", ++n_test,
		       strerror(errno));
	} else {
		int n = ol_io_resolve("ol-node-a:1234", a, 8);
		OK(n >= 1 && a[0].ss.ss_family == AF_INET &&
		       ((struct sockaddr_in *)&a[0].ss)->sin_addr.s_addr ==
			   htonl(INADDR_LOOPBACK) &&
		       ntohs(((struct sockaddr_in *)&a[0].ss)->sin_port) == 1234,
		   "a name from the hosts file resolves to its address and port (%d)", n);
		int lfd = ol_io_listen("ol-node-a:0", false, 8);
		unsigned port = lfd >= 0 ? ol_io_sock_port(lfd) : 0;
		OK(lfd >= 0 && port, "listen on a host name: %d port %u", lfd, port);
		char addr[64];
		snprintf(addr, sizeof(addr), "ol-node-b:%u", port);
		n = ol_io_resolve(addr, a, 8);
		OK(n == 2, "a name with two addresses resolves to both: %d", n);
		int fd = ol_io_connect(addr, 5000);
		int sfd = fd >= 0 ? accept(lfd, NULL, NULL) : -1;
		OK(fd >= 0 && sfd >= 0, "connect tries every address of a name: %d", fd);
		if (fd >= 0)
			close(fd);
		if (sfd >= 0)
			close(sfd);
		if (lfd >= 0)
			close(lfd);
		umount2("/etc/hosts", MNT_DETACH);
	}
	unlink(hosts);
	rmdir(dir);
}

static void
test_sockets(void)
{
	int l = ol_io_listen("127.0.0.1:0", true, 0);
	OK(l >= 0, "listen on port 0");
	unsigned port = ol_io_sock_port(l);
	OK(port > 0, "bound port %u", port);
	char addr[32];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	int l2 = ol_io_listen(addr, true, 0);
	OK(l2 >= 0, "second SO_REUSEPORT listener on the same port");
	int l3 = ol_io_listen(addr, false, 0);
	OK(l3 == -EADDRINUSE, "without SO_REUSEPORT: -EADDRINUSE (%d)", l3);
	int c = ol_io_connect(addr, 1000);
	OK(c >= 0, "connect");
	struct pollfd p[2] = {{.fd = l, .events = POLLIN}, {.fd = l2, .events = POLLIN}};
	OK(poll(p, 2, 1000) > 0, "one listener sees the connection");
	int s = accept(p[0].revents ? l : l2, NULL, NULL);
	OK(s >= 0, "accept");
	char buf[16];
	uint64_t t0 = ol_io_now_ms();
	ssize_t n = ol_io_read(s, buf, sizeof(buf), 100);
	uint64_t dt = ol_io_now_ms() - t0;
	OK(n == -ETIMEDOUT && dt >= 90 && dt < 1000, "read times out (%zd after %llu ms)", n,
	   (unsigned long long)dt);
	int cur = -2;
	t0 = ol_io_now_ms();
	n = ol_io_recv_timeo(s, buf, sizeof(buf), 100, &cur);
	dt = ol_io_now_ms() - t0;
	OK(n == -ETIMEDOUT && cur == 100 && dt >= 90 && dt < 1000,
	   "recv_timeo times out via SO_RCVTIMEO (%zd after %llu ms)", n, (unsigned long long)dt);
	OK(ol_io_recv_timeo(s, buf, sizeof(buf), 0, &cur) == -ETIMEDOUT, "recv_timeo 0: at once");
	ol_io_write_all(c, "hi", 2, 1000);
	n = ol_io_recv_timeo(s, buf, sizeof(buf), 1000, &cur);
	OK(n == 2 && !memcmp(buf, "hi", 2) && cur == 1000, "recv_timeo reads");
	struct iovec iov[3] = {{"ab", 2}, {"", 0}, {"cde", 3}};
	OK(ol_io_writev_all(c, iov, 3, 1000) == 0, "writev_all");
	size_t got = 0;
	while (got < 5 && (n = ol_io_read(s, buf + got, sizeof(buf) - got, 1000)) > 0)
		got += (size_t)n;
	OK(got == 5 && !memcmp(buf, "abcde", 5), "read back the gathered bytes");
	/* a big write to a reader that does not read times out instead of blocking forever */
	size_t big = 64 << 20;
	char *junk = calloc(1, big);
	t0 = ol_io_now_ms();
	int rc = ol_io_write_all(c, junk, big, 200);
	OK(rc == -ETIMEDOUT, "write to a stalled peer times out (%d)", rc);
	free(junk);
	close(s);
	n = ol_io_read(c, buf, sizeof(buf), 1000);
	OK(n == 0 || n == -ECONNRESET, "EOF/reset after peer close (%zd)", n);
	rc = ol_io_write_all(c, "x", 1, 1000);
	rc = rc ? rc : ol_io_write_all(c, "x", 1, 1000);
	OK(rc == -EPIPE || rc == -ECONNRESET || rc == 0, "write to a closed peer: no SIGPIPE (%d)",
	   rc);
	close(c);
	close(l);
	close(l2);
	OK(ol_io_connect(addr, 1000) == -ECONNREFUSED, "connect to a closed port refused");
}

static void *
thread_fn(void *arg)
{
	char name[32] = "";
	pthread_getname_np(pthread_self(), name, sizeof(name));
	*(int *)arg = !strcmp(name, "ol-test-thread-");
	return NULL;
}

static void
test_misc(void)
{
	pthread_t t;
	int named = 0;
	OK(ol_io_thread_start(&t, "ol-test-thread-long-name", thread_fn, &named) == 0,
	   "thread start");
	pthread_join(t, NULL);
	OK(named, "thread name truncated to 15 chars");
	OK(ol_io_ncpu() >= 1, "ncpu %u", ol_io_ncpu());
	uint64_t a = ol_io_now_ns();
	usleep(2000);
	OK(ol_io_now_ns() - a >= 2000000, "monotonic clock advances");
	struct ol_bufpool *p = ol_bufpool_new(4096, 2);
	void *b1 = ol_bufpool_get(p), *b2 = ol_bufpool_get(p), *b3 = ol_bufpool_get(p);
	OK(b1 && b2 && b3 && ol_bufpool_buf_size(p) == 4096, "pool get");
	memset(b1, 1, 4096);
	ol_bufpool_put(p, b1);
	ol_bufpool_put(p, b2);
	ol_bufpool_put(p, b3); /* beyond max_cached: freed */
	void *b4 = ol_bufpool_get(p);
	OK(b4 == b2 || b4 == b1, "pool reuses a cached buffer");
	ol_bufpool_put(p, b4);
	ol_bufpool_free(p);
}

/* io's cache of large buffers: a buffer given back is the one the next get of its size takes;
 * small sizes and sizes beyond the classes are plain malloc; the idle buffers of all sizes
 * together stay under the limit's total, and one size under its count */
static void
test_iobuf(void)
{
	size_t big = 3u << 20, max = 10;
	ol_iobuf_limit(max * big + big / 2, 8192); /* before the first get, as the daemon does */
	void *a = ol_iobuf_get(big), *b;
	OK(a != NULL, "iobuf get");
	memset(a, 7, big);
	ol_iobuf_put(a, big);
	b = ol_iobuf_get(big);
	OK(b == a && ((unsigned char *)b)[big - 1] == 7, "iobuf: the cached buffer comes back");
	ol_iobuf_put(b, big);
	void *s = ol_iobuf_get(100);
	OK(s != NULL, "iobuf: a small size is malloc");
	ol_iobuf_put(s, 100);
	ol_iobuf_put(NULL, big); /* no-op */
	void **many = calloc(max + 3, sizeof(void *));
	for (size_t i = 0; i < max + 3; i++)
		many[i] = ol_iobuf_get(big);
	for (size_t i = 0; i < max + 3; i++)
		ol_iobuf_put(many[i], big); /* beyond the cap: freed (ASan: no leak, no double) */
	size_t hits = 0;
	void **again = calloc(max + 3, sizeof(void *));
	for (size_t i = 0; i < max + 3; i++) {
		again[i] = ol_iobuf_get(big);
		for (size_t j = 0; j < max + 3; j++)
			hits += again[i] == many[j];
	}
	OK(hits >= max, "iobuf: %zu of the %zu cached buffers reused", hits, max);
	OK(ol_iobuf_cached_bytes() == 0, "iobuf: none idle while all are out (%zu)",
	   ol_iobuf_cached_bytes());
	for (size_t i = 0; i < max + 3; i++)
		ol_iobuf_put(again[i], big);
	OK(ol_iobuf_cached_bytes() == max * big, "iobuf: %zu bytes idle after the burst, the cap",
	   ol_iobuf_cached_bytes());
	free(again);
	free(many);

	/* the total is shared: another size finds no room until a big one is taken */
	size_t other = 2u << 20;
	void *o = ol_iobuf_get(other);
	ol_iobuf_put(o, other);
	OK(ol_iobuf_cached_bytes() == max * big, "iobuf: a 2 MiB buffer past the total is freed");
	b = ol_iobuf_get(big);
	o = ol_iobuf_get(other);
	ol_iobuf_put(o, other);
	OK(ol_iobuf_cached_bytes() == (max - 1) * big + other,
	   "iobuf: kept once a big one is out (%zu)", ol_iobuf_cached_bytes());
	ol_iobuf_put(b, big);
	OK(ol_iobuf_cached_bytes() == (max - 1) * big + other,
	   "iobuf: and the big one is freed for it (%zu)", ol_iobuf_cached_bytes());

	/* a count per size (bucket_capacity): a new size keeps 2 */
	size_t four = 4u << 20, before = ol_iobuf_cached_bytes();
	ol_iobuf_limit(1ull << 30, 2);
	void *f[4];
	for (int i = 0; i < 4; i++)
		f[i] = ol_iobuf_get(four);
	for (int i = 0; i < 4; i++)
		ol_iobuf_put(f[i], four);
	OK(ol_iobuf_cached_bytes() == before + 2 * four, "iobuf: 2 of 4 MiB kept, the count (%zu)",
	   ol_iobuf_cached_bytes() - before);
	/* nothing cached ([memory_pool] enabled = false) */
	ol_iobuf_limit(0, 0);
	f[0] = ol_iobuf_get(four);
	f[1] = ol_iobuf_get(four);
	ol_iobuf_put(f[0], four);
	ol_iobuf_put(f[1], four);
	OK(ol_iobuf_cached_bytes() == before, "iobuf: a total of 0 keeps nothing more");
	ol_iobuf_limit(OL_IOBUF_CACHE_BYTES, 8192);
	/* more sizes than classes: the last ones are malloc/free (ASan checks the frees) */
	for (size_t i = 0; i < OL_IOBUF_CLASSES + 2; i++) {
		void *c = ol_iobuf_get(OL_IOBUF_MIN + 4096 * (i + 1));
		memset(c, 1, OL_IOBUF_MIN + 4096 * (i + 1));
		ol_iobuf_put(c, OL_IOBUF_MIN + 4096 * (i + 1));
	}
}

static void
test_batch(void)
{
	char path[] = "/tmp/ol-test-io-XXXXXX";
	int fd = mkstemp(path);
	OK(fd >= 0, "temp file");
	unlink(path);
	enum { N = 100, B = 8192 };
	char *w = malloc((size_t)N * B), *r = calloc(N, B);
	for (size_t i = 0; i < (size_t)N * B; i++)
		w[i] = (char)(i * 7 + i / B);
	struct ol_io_op ops[N + 1];
	for (int i = 0; i < N; i++) /* written in reverse order of offsets */
		ops[i] = (struct ol_io_op){.fd = fd,
					   .opcode = OL_IO_WRITE,
					   .buf = w + (size_t)(N - 1 - i) * B,
					   .len = B,
					   .off = (uint64_t)(N - 1 - i) * B,
					   .res = -1};
	int rc = ol_io_batch(ops, N);
	int bad = 0;
	for (int i = 0; i < N; i++)
		bad += ops[i].res != B;
	OK(rc == 0 && !bad, "batch of %d writes (more than one ring's depth), %d bad", N, bad);
	ops[0] = (struct ol_io_op){
	    .fd = fd, .opcode = OL_IO_FDATASYNC, .buf = NULL, .len = 0, .off = 0, .res = -1};
	OK(ol_io_batch(ops, 1) == 0 && ops[0].res == 0, "fdatasync through the batch");
	for (int i = 0; i < N; i++)
		ops[i] = (struct ol_io_op){.fd = fd,
					   .opcode = OL_IO_READ,
					   .buf = r + (size_t)i * B,
					   .len = B,
					   .off = (uint64_t)i * B,
					   .res = -1};
	ops[N] = (struct ol_io_op){.fd = fd,
				   .opcode = OL_IO_READ,
				   .buf = r,
				   .len = B,
				   .off = (uint64_t)N * B - 100,
				   .res = -1};
	rc = ol_io_batch(ops, N);
	OK(rc == 0 && !memcmp(r, w, (size_t)N * B), "batch of %d reads gives the bytes back", N);
	char tail[B];
	ops[0] = (struct ol_io_op){.fd = fd,
				   .opcode = OL_IO_READ,
				   .buf = tail,
				   .len = B,
				   .off = (uint64_t)N * B - 100,
				   .res = -1};
	ops[1] = (struct ol_io_op){
	    .fd = -1, .opcode = OL_IO_READ, .buf = tail, .len = B, .off = 0, .res = 0};
	rc = ol_io_batch(ops, 2);
	OK(rc == 0 && ops[0].res == 100 && !memcmp(tail, w + (size_t)N * B - 100, 100),
	   "read across EOF is short (%zd)", ops[0].res);
	OK(ops[1].res == -EBADF, "bad fd: -EBADF in its own op (%zd)", ops[1].res);

	/* vectored ops (the object engine's shard block + trailer): two iovecs per op */
	char head[N][B / 2], trail[N][8], back[N][B / 2 + 8];
	for (int i = 0; i < N; i++) {
		memset(head[i], 'a' + i % 26, sizeof(head[i]));
		memset(trail[i], 'A' + i % 26, sizeof(trail[i]));
		ops[i] = (struct ol_io_op){
		    .fd = fd, .opcode = OL_IO_WRITE, .niov = 2, .off = (uint64_t)i * (B / 2 + 8)};
		ops[i].iov[0] = (struct iovec){head[i], B / 2};
		ops[i].iov[1] = (struct iovec){trail[i], 8};
	}
	rc = ol_io_batch(ops, N);
	bad = 0;
	for (int i = 0; i < N; i++)
		bad += ops[i].res != B / 2 + 8;
	OK(rc == 0 && !bad, "batch of %d vectored writes, %d bad", N, bad);
	for (int i = 0; i < N; i++) {
		ops[i] = (struct ol_io_op){
		    .fd = fd, .opcode = OL_IO_READ, .niov = 1, .off = (uint64_t)i * (B / 2 + 8)};
		ops[i].iov[0] = (struct iovec){back[i], B / 2 + 8};
	}
	ops[N] = (struct ol_io_op){.fd = -1, .opcode = OL_IO_READ, .niov = 1};
	ops[N].iov[0] = (struct iovec){back[0], 8};
	rc = ol_io_batch(ops, N + 1);
	bad = 0;
	for (int i = 0; i < N; i++)
		bad += ops[i].res != B / 2 + 8 || memcmp(back[i], head[i], B / 2) ||
		       memcmp(back[i] + B / 2, trail[i], 8);
	OK(rc == 0 && !bad && ops[N].res == -EBADF,
	   "vectored reads give block and trailer back (%d bad), bad fd -EBADF (%zd)", bad,
	   ops[N].res);
	ops[0] = (struct ol_io_op){.fd = fd, .opcode = OL_IO_READ, .niov = 3};
	OK(ol_io_batch(ops, 1) == -EINVAL, "more than OL_IO_MAX_IOV iovecs: -EINVAL");
	close(fd);
	free(w);
	free(r);
}

int
main(void)
{
	test_iobuf();
	test_addr();
	test_resolve();
	test_sockets();
	test_misc();
	test_batch();
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
