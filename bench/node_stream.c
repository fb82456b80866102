/* node_stream - the node plane's one-connection stream, memory to memory (issue 10).
 *
 *   build/src/node/node_stream_bench [--mode plane|plane-enc|ucx|tcp|mac] [--mib N]
 *                                    [--frame-kib K]
 *                                    [--window-kib W]
 *
 * plane: one plane server (one loop, as a node's) on loopback in this process; one client
 *        streams N MiB as PING frames with a K KiB payload, pipelined within the credit window
 *        (W KiB, default 8 MiB = [cluster] plane_window): the server reads each frame,
 *        authenticates it, grants its bytes back and answers it with an empty PING reply. No
 *        disk, no file copies: the plane's own cost per byte.
 * plane-enc: the same as plane with the frames encrypted ([cluster] plane_encrypt = true:
 *        ChaCha20-Poly1305 over the payload instead of Poly1305 alone; the client encrypts
 *        into its own buffer, the server decrypts in place).
 * ucx:   the same as plane with the plane on UCX (plane_transport = "ucx"): a UCX stream
 *        endpoint instead of the TCP socket under the same frames, MACs and window; UCX_TLS
 *        picks the wire among the point-to-point transports streams can use (tcp, rc, ud).
 * tcp:   the reference: the same N MiB over a plain loopback TCP stream between two threads
 *        of this process, written K KiB at a time and read into a K KiB buffer, one byte
 *        acknowledged at the end (a pure stream: no framing, no MAC, no round trips).
 *
 * mac:   the candidates for the frame MAC, one thread, one context reused as the plane does,
 *        timed in the thread's CPU time (other work on a loaded machine left out),
 *        over frames of 0 B, 4 KiB and K KiB (+ the 40-byte header): HMAC-SHA256 (version 1),
 *        AES-256-GMAC and ChaCha20-Poly1305 (version 2), both over AAD only, payload first.
 *
 * plane and tcp print one line: the mode, MiB, seconds, MiB/s and this process's CPU seconds
 * (user + sys, both ends) per GiB streamed; mac a line per frame size. bench/node_plane.sh
 * alternates the modes and `openlake bench tcp` and takes medians. No pass/fail. */
#include "io/io.h"
#include "node/node.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SECRET	    "node-stream-bench-secret"
#define DEADLINE_MS 600000

struct opts {
	const char *mode;
	unsigned mib, frame_kib, window_kib;
};

static double
cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int
free_addr(char *addr, size_t cap)
{
	int lfd = ol_io_listen("127.0.0.1:0", false, 1);
	if (lfd < 0)
		return lfd;
	snprintf(addr, cap, "127.0.0.1:%u", ol_io_sock_port(lfd));
	close(lfd);
	return 0;
}

/* Send frames while the window allows, collect the oldest answer when it does not. */
static int
plane_stream(struct ol_node_client *c, const uint8_t *buf, size_t frame, uint64_t total)
{
	uint64_t sent = 0, id, oldest = 0; /* the oldest call unanswered (calls are numbered) */
	int rc = 0;
	while (!rc && (sent < total || ol_node_client_pending(c))) {
		struct iovec iov = {(void *)buf, frame};
		rc = sent < total ? ol_node_send(c, OL_NODE_PING, &iov, 1, DEADLINE_MS, &id)
				  : -EAGAIN;
		if (rc == 0) {
			oldest = oldest ? oldest : id;
			sent += frame;
		} else if (rc == -EAGAIN) {
			const uint8_t *r;
			size_t rl;
			rc = ol_node_recv(c, oldest++, &r, &rl);
		}
	}
	return rc;
}

static int
run_plane(const struct opts *o, uint8_t *buf, double *secs, double *cpu)
{
	char addr[80];
	bool ucx = !strcmp(o->mode, "ucx");
	int rc = free_addr(addr, sizeof(addr));
	if (rc)
		return rc;
	size_t frame = (size_t)o->frame_kib << 10;
	unsigned port = 0;
	struct ol_node_server_opts so = {.addr = ucx ? "127.0.0.1:0" : addr,
					 .secret = SECRET,
					 .self_id = 1,
					 .threads = 1,
					 .window = o->window_kib << 10,
					 .max_payload = (uint32_t)frame,
					 .transport = ucx ? OL_NODE_UCX : OL_NODE_TCP,
					 .port = &port};
	struct ol_node_server *srv;
	struct ol_node_client *c = NULL;
	rc = ol_node_server_start(&so, &srv);
	if (rc)
		return rc;
	if (ucx)
		snprintf(addr, sizeof(addr), "ucx://127.0.0.1:%u", port);
	rc = ol_node_client_new(addr, SECRET, 2, &c);
	if (!rc)
		rc = ol_node_hello(c, DEADLINE_MS, NULL);
	if (!rc) {
		double c0 = cpu_s();
		uint64_t t0 = ol_io_now_ns();
		rc = plane_stream(c, buf, frame, (uint64_t)o->mib << 20);
		*secs = (double)(ol_io_now_ns() - t0) / 1e9;
		*cpu = cpu_s() - c0;
	}
	ol_node_client_free(c);
	ol_node_server_stop(srv);
	return rc;
}

struct sink {
	int lfd;
	size_t frame;
	uint64_t total;
	int rc;
};

static void *
sink_main(void *arg)
{
	struct sink *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	uint8_t *buf = malloc(s->frame);
	uint64_t got = 0;
	while (fd >= 0 && buf && got < s->total) {
		ssize_t n = read(fd, buf, s->frame);
		if (n <= 0)
			break;
		got += (uint64_t)n;
	}
	s->rc = got == s->total && write(fd, "k", 1) == 1 ? 0 : -EIO;
	free(buf);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int
run_tcp(const struct opts *o, uint8_t *buf, double *secs, double *cpu)
{
	char addr[64];
	struct sink s = {.frame = (size_t)o->frame_kib << 10, .total = (uint64_t)o->mib << 20};
	s.lfd = ol_io_listen("127.0.0.1:0", false, 1);
	if (s.lfd < 0)
		return s.lfd;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(s.lfd));
	pthread_t t;
	if (pthread_create(&t, NULL, sink_main, &s)) {
		close(s.lfd);
		return -EAGAIN;
	}
	int fd = ol_io_connect(addr, 10000), rc = fd < 0 ? fd : 0;
	double c0 = cpu_s();
	uint64_t t0 = ol_io_now_ns();
	for (uint64_t left = s.total; !rc && left; left -= s.frame)
		rc = ol_io_write_all(fd, buf, s.frame, DEADLINE_MS);
	char k;
	if (!rc && ol_io_read(fd, &k, 1, DEADLINE_MS) != 1)
		rc = -EIO;
	*secs = (double)(ol_io_now_ns() - t0) / 1e9;
	*cpu = cpu_s() - c0;
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	pthread_join(t, NULL);
	if (fd >= 0)
		close(fd);
	close(s.lfd);
	return rc ? rc : s.rc;
}

/* ---- mac: the MAC candidates on one core ---- */

/* this thread's CPU time: a loaded machine's other work does not count */
static double
thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per frame of len payload bytes (+ header) for an AEAD over AAD only, or HMAC-SHA256
 * (ci NULL) */
static double
mac_ns(const EVP_CIPHER *ci, const uint8_t *buf, size_t len, unsigned iters)
{
	uint8_t key[32] = {1}, iv[12] = {0}, tag[32], hdr[40] = {0};
	EVP_CIPHER_CTX *c = ci ? EVP_CIPHER_CTX_new() : NULL;
	EVP_MAC *alg = ci ? NULL : EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *h = alg ? EVP_MAC_CTX_new(alg) : NULL;
	OSSL_PARAM pr[] = {OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0),
			   OSSL_PARAM_construct_end()};
	int outl, ok = ci ? c && EVP_EncryptInit_ex(c, ci, NULL, key, NULL) : h != NULL;
	size_t hl;
	double t0 = thread_cpu_ns();
	for (unsigned i = 0; ok && i < iters; i++) {
		memcpy(iv, &i, sizeof(i));
		if (ci)
			ok = EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) &&
			     (!len || EVP_EncryptUpdate(c, NULL, &outl, buf, (int)len)) &&
			     EVP_EncryptUpdate(c, NULL, &outl, hdr, sizeof(hdr)) &&
			     EVP_EncryptFinal_ex(c, tag, &outl) &&
			     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag);
		else
			ok = EVP_MAC_init(h, key, 32, pr) && EVP_MAC_update(h, hdr, sizeof(hdr)) &&
			     (!len || EVP_MAC_update(h, buf, len)) &&
			     EVP_MAC_final(h, tag, &hl, sizeof(tag));
	}
	double ns = (thread_cpu_ns() - t0) / iters;
	EVP_CIPHER_CTX_free(c);
	EVP_MAC_CTX_free(h);
	EVP_MAC_free(alg);
	return ok ? ns : -1;
}

static int
run_mac(const struct opts *o, const uint8_t *buf)
{
	size_t sizes[] = {0, 4096, (size_t)o->frame_kib << 10};
	for (unsigned i = 0; i < 3; i++) {
		size_t n = sizes[i];
		unsigned it = (unsigned)((((uint64_t)o->mib << 20) / (n + 4096)) + 1);
		double v[3] = {mac_ns(NULL, buf, n, it), mac_ns(EVP_aes_256_gcm(), buf, n, it),
			       mac_ns(EVP_chacha20_poly1305(), buf, n, it)};
		if (v[0] < 0 || v[1] < 0 || v[2] < 0)
			return -EIO;
		printf("mac over %7zu + 40 B:", n);
		static const char *name[] = {"HMAC-SHA256", "AES-256-GMAC", "ChaCha20-Poly1305"};
		for (unsigned j = 0; j < 3; j++)
			printf("  %s %8.0f ns %6.2f GB/s", name[j], v[j], (double)(n + 40) / v[j]);
		printf("\n");
	}
	return 0;
}

static unsigned
arg_num(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "node_stream: '%s' is not a number in %u..%u\n", s, lo, hi);
		exit(2);
	}
	return (unsigned)v;
}

int
main(int argc, char **argv)
{
	struct opts o = {.mode = "plane", .mib = 1024, .frame_kib = 1024, .window_kib = 8192};
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mode"))
			o.mode = argv[i + 1];
		else if (!strcmp(argv[i], "--mib"))
			o.mib = arg_num(argv[i + 1], 1, 1u << 20);
		else if (!strcmp(argv[i], "--frame-kib"))
			o.frame_kib = arg_num(argv[i + 1], 1, 16384);
		else if (!strcmp(argv[i], "--window-kib"))
			o.window_kib = arg_num(argv[i + 1], 64, 1u << 20);
		else
			break;
	}
	if ((argc % 2) != 1 ||
	    (strcmp(o.mode, "plane") && strcmp(o.mode, "plane-enc") && strcmp(o.mode, "ucx") &&
	     strcmp(o.mode, "tcp") && strcmp(o.mode, "mac")) ||
	    (uint64_t)o.window_kib << 10 < ((uint64_t)o.frame_kib << 10) + 128 ||
	    ((uint64_t)o.mib << 10) % o.frame_kib) {
		fprintf(stderr, "usage: node_stream_bench [--mode plane|plane-enc|ucx|tcp|mac] "
				"[--mib N] "
				"[--frame-kib K] [--window-kib W > K]\n"
				"(N MiB a whole number of K KiB frames)\n");
		return 2;
	}
	uint8_t *buf = malloc((size_t)o.frame_kib << 10);
	if (!buf)
		return 2;
	for (size_t i = 0; i < (size_t)o.frame_kib << 10; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	double secs = 0, cpu = 0;
	ol_node_encrypt(!strcmp(o.mode, "plane-enc"));
	int rc = !strcmp(o.mode, "mac")	 ? run_mac(&o, buf)
		 : strcmp(o.mode, "tcp") ? run_plane(&o, buf, &secs, &cpu)
					 : run_tcp(&o, buf, &secs, &cpu);
	free(buf);
	if (!rc && !strcmp(o.mode, "mac"))
		return 0;
	if (rc) {
		fprintf(stderr, "node_stream: %s: %s\n", o.mode, strerror(-rc));
		return 1;
	}
	printf("%s stream %u MiB in frames of %u KiB: %.3f s  %.0f MiB/s  %.3f CPU s/GiB\n", o.mode,
	       o.mib, o.frame_kib, secs, o.mib / secs, cpu / (o.mib / 1024.0));
	return 0;
}
