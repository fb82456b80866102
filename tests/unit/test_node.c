/* test_node.c - the node plane (src/node/) over real loopback sockets and temp drives (TAP):
 * the frame codec and MACs, name rules, a real server on its loops with the real client
 * (HELLO, shard write / stat / read / rename / unlink, refusals), a wrong secret, a deadline
 * against a peer that never answers, the credit window counted at a slow receiver, and the
 * test-only fault hook. */
#include "io/io.h"
#include "node/node.h"
#include "node_pat.h"
#include "tap.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SECRET "node-plane-test-secret"

/* a MAC context of one direction keyed from a session key; NULL when OpenSSL fails */
static struct ol_node_mac *
mac_for(const uint8_t *key, uint32_t dir)
{
	struct ol_node_mac *m;
	if (ol_node_mac_new(&m))
		return NULL;
	if (ol_node_mac_key(m, key, dir)) {
		ol_node_mac_free(m);
		return NULL;
	}
	return m;
}

/* seal the frame at f (header encoded, len payload bytes after it): its tag after them */
static int
seal(struct ol_node_mac *m, uint8_t *f, size_t len)
{
	struct iovec iov = {f + OL_NODE_HDR, len};
	return ol_node_mac_seal(m, f, &iov, 1, f + OL_NODE_HDR + len);
}

/* A fresh ChaCha20-Poly1305 context keyed as docs/node-protocol.md says, from scratch: the
 * direction's key by HMAC of the session key, the nonce of frame f's seq. NULL on failure. */
static EVP_CIPHER_CTX *
ref_ctx(const uint8_t *skey, uint32_t dir, const uint8_t *f)
{
	uint8_t msg[64], dk[32], iv[12];
	size_t ln = strlen("openlake-node-v2 frame mac");
	unsigned dl = 0;
	memcpy(msg, "openlake-node-v2 frame mac", ln);
	for (int i = 0; i < 4; i++)
		msg[ln + i] = iv[i] = (uint8_t)(dir >> (8 * i));
	memcpy(iv + 4, f + 16, 8); /* seq, little-endian */
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	if (c && HMAC(EVP_sha256(), skey, 32, msg, ln + 4, dk, &dl) && dl == 32 &&
	    EVP_EncryptInit_ex(c, EVP_chacha20_poly1305(), NULL, dk, iv))
		return c;
	EVP_CIPHER_CTX_free(c);
	return NULL;
}

/* The tag as docs/node-protocol.md defines it, from scratch: the direction's key by HMAC, a
 * fresh ChaCha20-Poly1305 context, the nonce, payload || header in one piece. */
static int
ref_tag(const uint8_t *skey, uint32_t dir, const uint8_t *f, size_t len, uint8_t *tag)
{
	uint8_t fin[16], *aad = malloc(len + OL_NODE_HDR);
	int outl, rc = -1;
	EVP_CIPHER_CTX *c = ref_ctx(skey, dir, f);
	if (aad && c &&
	    (memcpy(aad, f + OL_NODE_HDR, len), memcpy(aad + len, f, OL_NODE_HDR),
	     EVP_EncryptUpdate(c, NULL, &outl, aad, (int)(len + OL_NODE_HDR))) &&
	    EVP_EncryptFinal_ex(c, fin, &outl) &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag))
		rc = 0;
	EVP_CIPHER_CTX_free(c);
	free(aad);
	return rc;
}

/* One context seals frame after frame (sizes 0 to 300 KiB, payloads split over iovecs at
 * odd places): each tag equals the reference's. */
static void
test_mac_reference(void)
{
	uint8_t skey[OL_NODE_KEY], cn[16] = {7}, sn[16] = {8}, tag[16], ref[16];
	ol_node_kdf(SECRET, cn, sn, skey);
	size_t cap = OL_NODE_HDR + (300u << 10) + OL_NODE_MAC;
	uint8_t *f = malloc(cap);
	struct ol_node_mac *m = mac_for(skey, OL_NODE_S2C);
	static const size_t lens[] = {0, 1, 15, 16, 17, 40, 4096, 65537, 300u << 10};
	int same = m && f ? 1 : 0;
	for (unsigned i = 0; same && i < 3 * sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i % (sizeof(lens) / sizeof(lens[0]))];
		struct ol_node_hdr h = {
		    .op = OL_NODE_PING, .call_id = i, .seq = 1000 + i, .len = (uint32_t)len};
		ol_node_hdr_encode(&h, f);
		for (size_t j = 0; j < len; j++)
			f[OL_NODE_HDR + j] = (uint8_t)(j * 7 + i);
		size_t cut = len / 3, cut2 = len - len / 5;
		struct iovec iov[3] = {{f + OL_NODE_HDR, cut},
				       {f + OL_NODE_HDR + cut, cut2 - cut},
				       {f + OL_NODE_HDR + cut2, len - cut2}};
		same &= ol_node_mac_seal(m, f, iov, 3, tag) == 0 &&
			ref_tag(skey, OL_NODE_S2C, f, len, ref) == 0 && !memcmp(tag, ref, 16);
	}
	ok(same, "frame tags equal ChaCha20-Poly1305 of the documented key, nonce and AAD");
	ol_node_mac_free(m);
	free(f);
}

static void
test_frames(void)
{
	uint8_t key[OL_NODE_KEY], key2[OL_NODE_KEY], cn[16] = {1}, sn[16] = {2}, zero[16] = {0};
	ok(ol_node_kdf(SECRET, cn, sn, key) == 0 && ol_node_kdf(SECRET, cn, zero, key2) == 0 &&
	       memcmp(key, key2, sizeof(key)),
	   "session keys differ with the server nonce");
	uint8_t f[OL_NODE_HDR + 5 + OL_NODE_MAC];
	struct ol_node_hdr h = {.op = OL_NODE_SHARD_WRITE,
				.flags = OL_NODE_F_FIRST | OL_NODE_F_MORE,
				.call_id = 0x1122334455667788ull,
				.seq = 9,
				.deadline_ms = 1234,
				.status = -5,
				.credit = 77,
				.len = 5};
	ol_node_hdr_encode(&h, f);
	memcpy(f + OL_NODE_HDR, "hello", 5);
	struct ol_node_mac *tx = mac_for(key, OL_NODE_C2S), *rx = mac_for(key, OL_NODE_C2S),
			   *other = mac_for(key2, OL_NODE_C2S), *back = mac_for(key, OL_NODE_S2C);
	ok(tx && rx && other && back && seal(tx, f, 5) == 0, "mac");
	struct ol_node_hdr g;
	ok(ol_node_frame_parse(f, sizeof(f), 4096, &g) == (ssize_t)sizeof(f) &&
	       g.call_id == h.call_id && g.seq == 9 && g.deadline_ms == 1234 && g.status == -5 &&
	       g.credit == 77 && g.len == 5 && g.flags == h.flags && g.op == h.op,
	   "encode -> parse round trip");
	int short_ok = 1;
	for (size_t i = 0; i < sizeof(f); i++)
		short_ok &= ol_node_frame_parse(f, i, 4096, &g) == 0;
	ok(short_ok, "every prefix of a frame: need more");
	ok(ol_node_mac_check(rx, f, &g) == 0, "MAC verifies");
	f[OL_NODE_HDR + 2] ^= 1;
	ok(ol_node_mac_check(rx, f, &g) == -EBADMSG, "a flipped payload bit fails the MAC");
	f[OL_NODE_HDR + 2] ^= 1;
	f[32] ^= 1;
	ok(ol_node_mac_check(rx, f, &g) == -EBADMSG, "a flipped header bit fails the MAC");
	f[32] ^= 1;
	f[OL_NODE_HDR + 5] ^= 0x80;
	ok(ol_node_mac_check(rx, f, &g) == -EBADMSG, "a flipped tag bit fails the MAC");
	f[OL_NODE_HDR + 5] ^= 0x80;
	ok(ol_node_mac_check(other, f, &g) == -EBADMSG, "another session key fails the MAC");
	ok(ol_node_mac_check(back, f, &g) == -EBADMSG,
	   "the other direction's key fails the MAC (a frame reflected to its sender)");
	ok(ol_node_mac_check(rx, f, &g) == 0, "and the frame as sent still verifies");
	ol_node_mac_free(tx);
	ol_node_mac_free(rx);
	ol_node_mac_free(other);
	ol_node_mac_free(back);
	struct ol_node_mac *bare;
	uint8_t t16[OL_NODE_MAC];
	struct iovec none = {NULL, 0};
	ok(ol_node_mac_new(&bare) == 0 && ol_node_mac_seal(bare, f, &none, 1, t16) == -EIO &&
	       ol_node_mac_key(bare, key, 3) == -EIO,
	   "a context without a key or with an unknown direction refuses to seal");
	ol_node_mac_free(bare);
	ok(ol_node_frame_parse(f, sizeof(f), 4, &g) == -EMSGSIZE, "payload over the cap");
	ok(ol_node_frame_parse((const uint8_t *)"GET / HTTP/1.1", 14, 4096, &g) == -EPROTO &&
	       ol_node_frame_parse((const uint8_t *)"X", 1, 4096, &g) == -EPROTO,
	   "not a frame: refused at the first byte");
	uint8_t b[OL_NODE_HDR];
	memcpy(b, f, sizeof(b));
	b[4] = 1;
	g.version = 0;
	ok(ol_node_frame_parse(b, sizeof(b), 4096, &g) == -EPROTONOSUPPORT && g.version == 1,
	   "a version 1 frame: -EPROTONOSUPPORT, naming its version");
	ok(ol_node_frame_parse(b, 5, 4096, &g) == -EPROTONOSUPPORT &&
	       ol_node_frame_parse(b, 4, 4096, &g) == 0,
	   "seen at its fifth byte");
	b[4] = 3;
	ok(ol_node_frame_parse(b, sizeof(b), 4096, &g) == -EPROTONOSUPPORT && g.version == 3,
	   "a later version too");
	memcpy(b, f, sizeof(b));
	b[5] = 0;
	int bad_op = ol_node_frame_parse(b, sizeof(b), 4096, &g) == -EPROTO;
	b[5] = OL_NODE_OP_MAX + 1;
	ok(bad_op && ol_node_frame_parse(b, sizeof(b), 4096, &g) == -EPROTO, "unknown op");
	memcpy(b, f, sizeof(b));
	b[7] = 0x80;
	ok(ol_node_frame_parse(b, sizeof(b), 4096, &g) == -EPROTO, "unknown flag");

	uint8_t pbuf[8];
	struct ol_node_wr w = {pbuf, 0, sizeof(pbuf), false};
	ol_node_put64(&w, 1);
	ol_node_put16(&w, 1);
	ok(w.err && w.n == 8, "writer overflow is an error, not a write past the end");
	struct ol_node_rd r = {(const uint8_t *)"\x05\x00"
						"ab",
			       4, false};
	char s[8];
	ol_node_getstr(&r, s, sizeof(s));
	ok(r.err && s[0] == 0, "a string longer than the payload is an error");
}

static void
test_names(void)
{
	const char *good[] = {"a", "x.tmp", "ab/0123456789abcdef", "a/b/c/d", "A-Z_0.9"};
	const char *bad[] = {"",     ".",	  "..",	     "../x",   "/abs",
			     "a//b", "a/",	  ".hidden", "a/../b", "a/./b",
			     "a b",  "a/b/c/d/e", "a\\b",    "a\nb",   "x/.."};
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		ok(ol_node_name_ok(good[i], strlen(good[i])), "name '%s' accepted", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok(!ol_node_name_ok(bad[i], strlen(bad[i])), "name '%s' refused",
		   strchr(bad[i], '\n') ? "a<LF>b" : bad[i]);
	char longc[200];
	memset(longc, 'a', 129);
	longc[129] = 0;
	ok(!ol_node_name_ok(longc, 129), "a 129-byte component refused");
	ok(!ol_node_name_ok("a\0b", 3), "a NUL inside refused");
}

/* ---- a real server ---- */

static int
xread(int fd, void *b, size_t n)
{
	return ol_io_read(fd, b, n, 20000) == (ssize_t)n ? 0 : -1;
}

static unsigned
free_port(void)
{
	int fd = ol_io_listen("127.0.0.1:0", false, 1);
	unsigned p = ol_io_sock_port(fd);
	close(fd);
	return p;
}

static void test_write_deadline(const char *addr, struct ol_node_server *s);
static void test_replay(const char *addr, struct ol_node_server *s);
static void test_old_version(const char *addr, struct ol_node_server *s);
static void test_payload_iovs(const char *addr);
static void test_encrypt_server(const char *addr, const char *drive, struct ol_node_server *s);

static void
test_server(const char *tmp)
{
	char d0[256], d1[256], addr[64];
	snprintf(d0, sizeof(d0), "%s/d0", tmp);
	snprintf(d1, sizeof(d1), "%s/d1", tmp);
	const char *drives[] = {d0, d1};
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", free_port());
	struct ol_node_server_opts o = {.addr = addr,
					.secret = SECRET,
					.self_id = 7,
					.threads = 2,
					.window = 1u << 20,
					.max_payload = 256u << 10,
					.n_drives = 2,
					.drives = drives,
					.hello_timeout_ms = 500};
	struct ol_node_server *s;
	int rc = ol_node_server_start(&o, &s);
	ok(rc == 0, "server on %s (%d)", addr, rc);
	if (rc)
		return;
	struct ol_node_client *c;
	ok(ol_node_client_new(addr, SECRET, 3, &c) == 0, "client");
	struct ol_node_peer_info pi;
	rc = ol_node_hello(c, 10000, &pi);
	ok(rc == 0 && pi.node_id == 7 && pi.n_drives == 2 && !strcmp(pi.drives[1].path, d1) &&
	       pi.window == o.window && pi.max_payload == o.max_payload,
	   "HELLO: node 7, 2 drives, window and frame cap (%d)", rc);
	uint64_t rtt = 0;
	ok(ol_node_ping(c, 10000, &rtt) == 0 && rtt > 0, "ping (%llu ns)", (unsigned long long)rtt);

	node_shard_round_trip(c, 1, d1);
	struct ol_node_server_stats ss;
	ol_node_server_stats(s, &ss);
	ok(ss.max_held <= o.window, "receiver never held more than the window (%llu <= %u)",
	   (unsigned long long)ss.max_held, o.window);

	const uint64_t big = 5u * 1024 * 1024 + 12345;
	uint64_t size = 0;
	struct pat p;
	const char *evil[] = {"../../../etc/passwd", "/etc/passwd", "..", "a/../../b", ".openlake"};
	for (size_t i = 0; i < sizeof(evil) / sizeof(*evil); i++) {
		p = (struct pat){0, 100, 0};
		ok(ol_node_shard_write(c, 0, evil[i], pat_src, &p, 10000, NULL) == -EINVAL &&
		       ol_node_stat(c, 0, evil[i], 10000, &size) == -EINVAL,
		   "name '%s' refused by the server", evil[i]);
	}
	p = (struct pat){0, 100, 0};
	ok(ol_node_shard_write(c, 2, "x", pat_src, &p, 10000, NULL) == -EINVAL,
	   "drive out of range: -EINVAL");
	p = (struct pat){0, big, 700000};
	rc = ol_node_shard_write(c, 0, "gone.tmp", pat_src, &p, 30000, NULL);
	ok(rc == -EIO && ol_node_stat(c, 0, "gone.tmp", 10000, &size) == -ENOENT,
	   "a source that fails mid-stream: its error, and no file left (%d)", rc);
	ok(ol_node_ping(c, 10000, NULL) == 0, "the connection still serves after the refusals");
	struct ol_node_client_stats cs;
	ol_node_client_stats(c, &cs);
	ok(cs.connects == 1, "one connection for all those calls (%llu)",
	   (unsigned long long)cs.connects);
	ol_node_client_free(c);

	ok(ol_node_client_new(addr, "not-the-secret", 3, &c) == 0, "client with a wrong secret");
	ok(ol_node_ping(c, 10000, NULL) == -EACCES, "wrong secret: -EACCES");
	ol_node_server_stats(s, &ss);
	ok(ss.auth_failures == 1, "the server counted the failed HELLO");
	ol_node_client_free(c);

	test_write_deadline(addr, s);
	test_replay(addr, s);
	test_old_version(addr, s);
	test_payload_iovs(addr);
	test_encrypt_server(addr, d1, s);

	/* a connection that never says HELLO is closed by the server's timer */
	int fd = ol_io_connect(addr, 5000);
	char b;
	ok(fd >= 0 && ol_io_read(fd, &b, 1, 30000) == 0, "silent connection closed by the server");
	ol_node_server_stats(s, &ss);
	ok(ss.hello_timeouts == 1, "counted as a HELLO timeout (%llu)",
	   (unsigned long long)ss.hello_timeouts);
	if (fd >= 0)
		close(fd);
	ol_node_server_stop(s);
}

/* A hand-made client: HELLO, then frames as the test wants them. */
struct raw {
	int fd;
	struct ol_node_mac *tx, *rx;
	uint64_t seq;
};

static void
raw_close(struct raw *r)
{
	if (r->fd >= 0)
		close(r->fd);
	ol_node_mac_free(r->tx);
	ol_node_mac_free(r->rx);
}

static int
raw_send(struct raw *r, uint8_t op, uint16_t flags, uint64_t call, uint32_t dl, const void *p,
	 size_t len)
{
	uint8_t f[OL_NODE_HDR + 256 + OL_NODE_MAC];
	struct ol_node_hdr h = {.op = op,
				.flags = flags,
				.call_id = call,
				.seq = r->seq++,
				.deadline_ms = dl,
				.len = (uint32_t)len};
	ol_node_hdr_encode(&h, f);
	if (len)
		memcpy(f + OL_NODE_HDR, p, len);
	seal(r->tx, f, len);
	return ol_io_write_all(r->fd, f, OL_NODE_HDR + len + OL_NODE_MAC, 10000);
}

/* the next frame that is not a CREDIT */
static int
raw_recv(struct raw *r, struct ol_node_hdr *h, uint8_t *buf, size_t cap)
{
	for (;;) {
		if (xread(r->fd, buf, OL_NODE_HDR) ||
		    ol_node_frame_parse(buf, OL_NODE_HDR,
					(uint32_t)(cap - OL_NODE_HDR - OL_NODE_MAC), h) < 0 ||
		    xread(r->fd, buf + OL_NODE_HDR, h->len + OL_NODE_MAC))
			return -1;
		if (h->op != OL_NODE_CREDIT)
			return 0;
	}
}

static int
raw_hello(struct raw *r, const char *addr)
{
	uint8_t cn[16], zero[16] = {0}, p[20], buf[4096], key[OL_NODE_KEY];
	struct ol_node_hdr h;
	RAND_bytes(cn, sizeof(cn));
	memcpy(p, cn, 16);
	memset(p + 16, 0, 4);
	r->fd = ol_io_connect(addr, 5000);
	r->seq = 0;
	r->rx = NULL;
	if (ol_node_kdf(SECRET, cn, zero, key) || !(r->tx = mac_for(key, OL_NODE_C2S)) ||
	    r->fd < 0 || raw_send(r, OL_NODE_HELLO, 0, 0, 1000, p, sizeof(p)) ||
	    raw_recv(r, &h, buf, sizeof(buf)) || h.status ||
	    ol_node_kdf(SECRET, cn, buf + OL_NODE_HDR, key) ||
	    ol_node_mac_key(r->tx, key, OL_NODE_C2S) || !(r->rx = mac_for(key, OL_NODE_S2C)))
		return -1;
	return ol_node_mac_check(r->rx, buf, &h) ? -1 : 0;
}

/* a write stream left unfinished: the server's timer drops it at the call's deadline */
static void
test_write_deadline(const char *addr, struct ol_node_server *s)
{
	struct raw r;
	uint8_t buf[4096];
	struct ol_node_hdr h;
	ok(raw_hello(&r, addr) == 0, "hand-made HELLO");
	uint8_t p[64];
	struct ol_node_wr w = {p, 0, sizeof(p), false};
	ol_node_put16(&w, 0);
	ol_node_putstr(&w, "stalled.tmp");
	ol_node_putbytes(&w, "some bytes", 10);
	raw_send(&r, OL_NODE_SHARD_WRITE, OL_NODE_F_FIRST | OL_NODE_F_MORE, 5, 300, p, w.n);
	int rc = raw_recv(&r, &h, buf, sizeof(buf));
	ok(rc == 0 && h.call_id == 5 && h.status == -ETIMEDOUT,
	   "a stalled shard write fails with -ETIMEDOUT at its deadline (status %d)", h.status);
	struct ol_node_client *c;
	uint64_t size;
	ol_node_client_new(addr, SECRET, 3, &c);
	ok(ol_node_stat(c, 0, "stalled.tmp", 10000, &size) == -ENOENT, "its file is gone");
	ol_node_client_free(c);
	raw_send(&r, OL_NODE_SHARD_WRITE, 0, 5, 300, "late", 4); /* the late last frame */
	raw_send(&r, OL_NODE_PING, 0, 6, 1000, NULL, 0);
	rc = raw_recv(&r, &h, buf, sizeof(buf));
	ok(rc == 0 && h.call_id == 6 && h.op == OL_NODE_PING && h.status == 0,
	   "the late frame is dropped and the connection goes on (call %llu op %u)",
	   (unsigned long long)h.call_id, h.op);
	(void)s;
	raw_close(&r);
}

/* Replays: a frame sent again on its connection fails its sequence number; a frame taken from
 * one connection into another fails its MAC (other nonces, other key). Both cut the
 * connection off. */
static void
test_replay(const char *addr, struct ol_node_server *s)
{
	struct raw a, b;
	uint8_t buf[4096], frame[OL_NODE_HDR + OL_NODE_MAC];
	struct ol_node_hdr h;
	struct ol_node_server_stats before, after;
	ol_node_server_stats(s, &before);
	ok(raw_hello(&a, addr) == 0 && raw_hello(&b, addr) == 0, "two hand-made connections");
	/* a's PING, kept as sent */
	struct ol_node_hdr ph = {
	    .op = OL_NODE_PING, .call_id = 1, .seq = a.seq, .deadline_ms = 1000};
	ol_node_hdr_encode(&ph, frame);
	seal(a.tx, frame, 0);
	a.seq++;
	ol_io_write_all(a.fd, frame, sizeof(frame), 10000);
	ok(raw_recv(&a, &h, buf, sizeof(buf)) == 0 && h.call_id == 1 && h.status == 0,
	   "the PING is answered");
	ol_io_write_all(a.fd, frame, sizeof(frame), 10000); /* the same bytes again */
	ok(raw_recv(&a, &h, buf, sizeof(buf)) == -1, "replayed on its connection: cut off");
	ol_io_write_all(b.fd, frame, sizeof(frame), 10000); /* seq 1 is b's next, but a's key */
	ok(raw_recv(&b, &h, buf, sizeof(buf)) == -1, "replayed into another connection: cut off");
	ol_node_server_stats(s, &after);
	ok(after.auth_failures == before.auth_failures + 2, "both counted as failed frames (%llu)",
	   (unsigned long long)(after.auth_failures - before.auth_failures));
	raw_close(&a);
	raw_close(&b);
}

/* A node of protocol version 1 (HMAC-SHA256, 32-byte MACs): its HELLO is refused as a
 * protocol error (the log names the version), never read as a frame of ours. */
static void
test_old_version(const char *addr, struct ol_node_server *s)
{
	struct ol_node_server_stats before, after;
	ol_node_server_stats(s, &before);
	uint8_t f[OL_NODE_HDR + 20 + 32] = {0}, buf[64];
	struct ol_node_hdr h = {.op = OL_NODE_HELLO, .len = 20};
	ol_node_hdr_encode(&h, f);
	f[4] = 1;
	int fd = ol_io_connect(addr, 5000);
	ok(fd >= 0 && ol_io_write_all(fd, f, sizeof(f), 10000) == 0 &&
	       ol_io_read(fd, buf, sizeof(buf), 20000) <= 0,
	   "a version 1 HELLO: the connection is closed without an answer");
	ol_node_server_stats(s, &after);
	ok(after.protocol_errors == before.protocol_errors + 1 &&
	       after.auth_failures == before.auth_failures,
	   "counted as a protocol error, not as an authentication failure");
	if (fd >= 0)
		close(fd);
}

/* ol_node_call's payload from many buffers: MACed where they lie (up to 14), copied beyond;
 * one over the peer's max_payload is refused before anything is sent. */
static void
test_payload_iovs(const char *addr)
{
	struct ol_node_client *c;
	static uint8_t big[200u << 10];
	struct iovec iov[20];
	const uint8_t *rep;
	size_t rlen;
	ol_node_client_new(addr, SECRET, 3, &c);
	for (unsigned i = 0; i < 20; i++)
		iov[i] = (struct iovec){big + i * 10000, 10000};
	int a = ol_node_call(c, OL_NODE_PING, iov, 3, 10000, &rep, &rlen);
	int b = ol_node_call(c, OL_NODE_PING, iov, 20, 10000, &rep, &rlen);
	iov[0].iov_len = 100u << 10;
	iov[1] = (struct iovec){big, 200u << 10};
	int e = ol_node_call(c, OL_NODE_PING, iov, 2, 10000, &rep, &rlen);
	int d = ol_node_ping(c, 10000, NULL);
	ok(a == 0 && b == 0 && e == -EMSGSIZE && d == 0,
	   "PING payloads of 3 and 20 buffers answered, one over max_payload refused (%d %d %d "
	   "%d)",
	   a, b, e, d);
	ol_node_client_free(c);
}

/* a peer that accepts TCP (the kernel's backlog) but never answers */
static void
test_deadline(void)
{
	int lfd = ol_io_listen("127.0.0.1:0", false, 16);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(lfd));
	struct ol_node_client *c;
	ol_node_client_new(addr, SECRET, 1, &c);
	uint64_t t0 = ol_io_now_ms();
	int rc = ol_node_ping(c, 300, NULL);
	uint64_t took = ol_io_now_ms() - t0;
	ok(rc == -ETIMEDOUT && took >= 300,
	   "a silent peer: -ETIMEDOUT, not before the deadline "
	   "(%d after %llu ms)",
	   rc, (unsigned long long)took);
	ol_node_client_free(c);
	close(lfd);
}

/* ---- ol_node_client_abort: a call blocked on a silent peer, cut from another thread ---- */

struct abort_call {
	struct ol_node_client *c;
	int rc;
};

static void *
abort_caller(void *arg)
{
	struct abort_call *a = arg;

	a->rc = ol_node_ping(a->c, 100000, NULL); /* far past the test's own timeout */
	return NULL;
}

static void
test_abort(void)
{
	int lfd = ol_io_listen("127.0.0.1:0", false, 16), fd;
	char addr[64], b[64];
	struct abort_call a = {0};
	pthread_t th;
	struct pollfd p;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(lfd));
	ol_node_client_new(addr, SECRET, 1, &a.c);
	pthread_create(&th, NULL, abort_caller, &a);
	/* the call is under way once its HELLO arrives; the peer never answers */
	fd = accept(lfd, NULL, NULL);
	p = (struct pollfd){fd, POLLIN, 0};
	ok(fd >= 0 && poll(&p, 1, 60000) == 1 && recv(fd, b, sizeof(b), 0) > 0,
	   "abort: the call reached the silent peer");
	ol_node_client_abort(a.c);
	pthread_join(th, NULL); /* without the abort: 100 s, past the test's timeout */
	ok(a.rc == -ECONNRESET || a.rc == -EPIPE || a.rc == -ECANCELED,
	   "abort: the blocked call returns at once with a broken connection (%d)", a.rc);
	ok(ol_node_ping(a.c, 100000, NULL) == -ECANCELED,
	   "abort: a later call fails at once, without connecting again");
	ol_node_client_free(a.c);
	close(fd);
	close(lfd);
}

/* ---- the credit window, counted at a slow receiver ---- */

struct slow {
	int lfd;
	uint32_t window, maxp;
	uint64_t held, max_held, frames, bytes;
	int err;
};

static void *
slow_receiver(void *arg)
{
	struct slow *sr = arg;
	int fd = accept(sr->lfd, NULL, NULL);
	size_t cap = 8u << 20;
	uint8_t *in = malloc(cap), out[OL_NODE_HDR + 128 + OL_NODE_MAC];
	uint8_t key[OL_NODE_KEY], zero[16] = {0}, snonce[16];
	struct ol_node_mac *tx = NULL, *rx = NULL;
	struct ol_node_hdr h;
	uint64_t wseq = 0, rseq = 1;
	size_t have = 0;
	/* HELLO, by hand, with this window */
	if (fd < 0 || xread(fd, in, OL_NODE_HDR) ||
	    ol_node_frame_parse(in, OL_NODE_HDR, 4096, &h) != 0 ||
	    xread(fd, in + OL_NODE_HDR, h.len + OL_NODE_MAC) ||
	    ol_node_kdf(SECRET, in + OL_NODE_HDR, zero, key) || !(rx = mac_for(key, OL_NODE_C2S)) ||
	    ol_node_mac_check(rx, in, &h)) {
		sr->err = 1;
		goto out;
	}
	RAND_bytes(snonce, 16);
	ol_node_kdf(SECRET, in + OL_NODE_HDR, snonce, key);
	ol_node_mac_key(rx, key, OL_NODE_C2S);
	if (!(tx = mac_for(key, OL_NODE_S2C))) {
		sr->err = 1;
		goto out;
	}
	struct ol_node_wr w = {out + OL_NODE_HDR, 0, 128, false};
	ol_node_putbytes(&w, snonce, 16);
	ol_node_put32(&w, 9);
	ol_node_put32(&w, sr->window);
	ol_node_put32(&w, sr->maxp);
	ol_node_put16(&w, 0);
	struct ol_node_hdr rh = {
	    .op = OL_NODE_HELLO, .flags = OL_NODE_F_REPLY, .len = (uint32_t)w.n};
	ol_node_hdr_encode(&rh, out);
	seal(tx, out, w.n);
	ol_io_write_all(fd, out, OL_NODE_HDR + w.n + OL_NODE_MAC, 10000);
	wseq = 1;
	for (bool done = false; !done;) {
		/* take everything the socket has: what the sender has out lands here */
		for (;;) {
			ssize_t n = recv(fd, in + have, cap - have, MSG_DONTWAIT);
			if (n <= 0)
				break;
			have += (size_t)n;
			sr->held += (uint64_t)n;
		}
		if (sr->held > sr->max_held)
			sr->max_held = sr->held;
		ssize_t n = ol_node_frame_parse(in, have, sr->maxp, &h);
		if (n < 0 || have == cap) {
			sr->err = 2;
			break;
		}
		if (n == 0) {
			if (ol_io_wait(fd, POLLIN, 20000)) {
				sr->err = 3;
				break;
			}
			continue;
		}
		if (h.seq != rseq++ || ol_node_mac_check(rx, in, &h)) {
			sr->err = 4;
			break;
		}
		sr->frames++;
		/* data bytes: the first frame starts with drive (2) and name ("fast", 2 + 4) */
		sr->bytes += h.len - ((h.flags & OL_NODE_F_FIRST) ? 8 : 0);
		usleep(300); /* the slow consumer */
		memmove(in, in + n, have - (size_t)n);
		have -= (size_t)n;
		bool last = h.op == OL_NODE_SHARD_WRITE && !(h.flags & OL_NODE_F_MORE);
		struct ol_node_hdr gh = {.op = last ? OL_NODE_SHARD_WRITE : OL_NODE_CREDIT,
					 .flags = OL_NODE_F_REPLY,
					 .call_id = last ? h.call_id : 0,
					 .seq = wseq++,
					 .credit = (uint32_t)n};
		uint8_t reply[OL_NODE_HDR + 8 + OL_NODE_MAC];
		struct ol_node_wr rw = {reply + OL_NODE_HDR, 0, 8, false};
		if (last)
			ol_node_put64(&rw, sr->bytes);
		gh.len = (uint32_t)rw.n;
		ol_node_hdr_encode(&gh, reply);
		seal(tx, reply, rw.n);
		sr->held -= (uint64_t)n;
		if (ol_io_write_all(fd, reply, OL_NODE_HDR + rw.n + OL_NODE_MAC, 10000)) {
			sr->err = 5;
			break;
		}
		done = last;
	}
out:
	ol_node_mac_free(tx);
	ol_node_mac_free(rx);
	free(in);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void
test_credit(void)
{
	struct slow sr = {.window = 64u << 10, .maxp = 4096};
	sr.lfd = ol_io_listen("127.0.0.1:0", false, 4);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_io_sock_port(sr.lfd));
	pthread_t th;
	pthread_create(&th, NULL, slow_receiver, &sr);
	struct ol_node_client *c;
	ol_node_client_new(addr, SECRET, 1, &c);
	struct pat p = {0, 2u << 20, 0};
	uint64_t wrote = 0;
	int rc = ol_node_shard_write(c, 0, "fast", pat_src, &p, 60000, &wrote);
	pthread_join(th, NULL);
	struct ol_node_client_stats cs;
	ol_node_client_stats(c, &cs);
	ok(rc == 0 && sr.err == 0 && wrote == p.len, "2 MiB to a slow receiver (%d, err %d)", rc,
	   sr.err);
	ok(sr.max_held <= sr.window,
	   "the receiver never held more than its window: %llu <= %u bytes over %llu frames",
	   (unsigned long long)sr.max_held, sr.window, (unsigned long long)sr.frames);
	ok(cs.credit_waits > 0 && cs.max_outstanding <= sr.window,
	   "the sender waited for credit (%llu times), at most %llu bytes out",
	   (unsigned long long)cs.credit_waits, (unsigned long long)cs.max_outstanding);
	ol_node_client_free(c);
	close(sr.lfd);
}

/* ---- the test-only fault hook (OPENLAKE_FAULTS=1, OPENLAKE_FAULT_FILE) ---- */

struct held_ping {
	const char *addr;
	int rc;
	_Atomic int done;
};

static void *
held_ping_main(void *arg)
{
	struct held_ping *h = arg;
	struct ol_node_client *c;
	h->rc = ol_node_client_new(h->addr, SECRET, 5, &c);
	if (!h->rc) {
		h->rc = ol_node_ping(c, 10000, NULL);
		ol_node_client_free(c);
	}
	atomic_store(&h->done, 1);
	return NULL;
}

static int
file_has(const char *path, const char *what)
{
	char buf[4096] = "";
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, what) != NULL;
}

static void
put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ok(f && fputs(text, f) >= 0 && fclose(f) == 0, "rules: '%.*s'", (int)strcspn(text, "\n"),
	   text);
}

/* ---- encrypted frames ---- */

/* Frame f (header encoded with OL_NODE_F_ENC, len plaintext bytes after it) as the
 * documentation defines an encrypted frame, from scratch: ciphertext into ct, tag into tag. */
static int
ref_enc(const uint8_t *skey, uint32_t dir, const uint8_t *f, size_t len, uint8_t *ct, uint8_t *tag)
{
	uint8_t fin[16];
	int outl, rc = -1;
	EVP_CIPHER_CTX *c = ref_ctx(skey, dir, f);
	if (c && EVP_EncryptUpdate(c, NULL, &outl, f, OL_NODE_HDR) &&
	    (len == 0 || EVP_EncryptUpdate(c, ct, &outl, f + OL_NODE_HDR, (int)len)) &&
	    EVP_EncryptFinal_ex(c, fin, &outl) &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag))
		rc = 0;
	EVP_CIPHER_CTX_free(c);
	return rc;
}

static void
test_encrypt_frames(void)
{
	uint8_t skey[OL_NODE_KEY], cn[16] = {3}, sn[16] = {4}, tag[16], rtag[16];
	ol_node_kdf(SECRET, cn, sn, skey);
	size_t cap = OL_NODE_HDR + (300u << 10) + OL_NODE_MAC;
	uint8_t *f = malloc(cap), *ct = malloc(cap), *rct = malloc(cap);
	struct ol_node_mac *tx = mac_for(skey, OL_NODE_C2S), *rx = mac_for(skey, OL_NODE_C2S);
	static const size_t lens[] = {0, 1, 17, 4096, 65537, 300u << 10};
	int same = tx && rx && f && ct && rct, opened = same, bad = same;
	for (unsigned i = 0; same && i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		struct ol_node_hdr h = {.op = OL_NODE_SHARD_READ,
					.flags = OL_NODE_F_ENC,
					.call_id = i,
					.seq = 5 + i,
					.len = (uint32_t)len};
		ol_node_hdr_encode(&h, f);
		for (size_t j = 0; j < len; j++)
			f[OL_NODE_HDR + j] = pat_byte(j + i);
		size_t cut = len / 3;
		struct iovec iov[2] = {{f + OL_NODE_HDR, cut}, {f + OL_NODE_HDR + cut, len - cut}};
		same &= ol_node_mac_seal_enc(tx, f, iov, 2, ct, tag) == 0 &&
			ref_enc(skey, OL_NODE_C2S, f, len, rct, rtag) == 0 &&
			!memcmp(ct, rct, len) && !memcmp(tag, rtag, 16) &&
			(len < 64 || memcmp(ct, f + OL_NODE_HDR, 64));
		/* the frame as it goes out: header, ciphertext, tag; the receiver opens it */
		memcpy(f + OL_NODE_HDR, ct, len);
		memcpy(f + OL_NODE_HDR + len, tag, 16);
		struct ol_node_hdr g;
		opened &= ol_node_frame_parse(f, OL_NODE_HDR + len + 16, 1u << 20, &g) > 0 &&
			  ol_node_frame_open(rx, f, &g) == 0;
		for (size_t j = 0; j < len && opened; j++)
			opened &= f[OL_NODE_HDR + j] == pat_byte(j + i);
		if (len) { /* a flipped ciphertext bit, then a flipped header bit: refused */
			memcpy(f + OL_NODE_HDR, ct, len);
			f[OL_NODE_HDR + len / 2] ^= 1;
			bad &= ol_node_mac_open(rx, f, &g) == -EBADMSG;
			memcpy(f + OL_NODE_HDR, ct, len);
			f[24] ^= 1; /* the deadline */
			bad &= ol_node_mac_open(rx, f, &g) == -EBADMSG;
		}
	}
	ok(same, "encrypted frames: ChaCha20-Poly1305 of the documented key and nonce, header as "
		 "AAD, the ciphertext unlike the payload");
	ok(opened, "the receiver opens them back to the payload");
	ok(bad, "a flipped bit of ciphertext or header: -EBADMSG");

	/* an encrypted HELLO keeps its leading nonce in the clear, authenticated with the
	 * header: AAD = header || nonce, plaintext = the rest */
	{
		struct ol_node_hdr hh = {.op = OL_NODE_HELLO,
					 .flags = OL_NODE_F_ENC,
					 .seq = 0,
					 .len = 20},
				   hg;
		uint8_t hf[OL_NODE_HDR + 20 + OL_NODE_MAC], hct[20], htag[16], rtag2[16], fin[16];
		int outl = 0;
		ol_node_hdr_encode(&hh, hf);
		for (int j = 0; j < 20; j++)
			hf[OL_NODE_HDR + j] = (uint8_t)(0x40 + j);
		struct iovec hv[2] = {{hf + OL_NODE_HDR, 9}, {hf + OL_NODE_HDR + 9, 11}};
		EVP_CIPHER_CTX *rc2 = ref_ctx(skey, OL_NODE_C2S, hf);
		uint8_t rct2[4];
		int hsame = ol_node_mac_seal_enc(tx, hf, hv, 2, hct, htag) == 0 && rc2 &&
			    EVP_EncryptUpdate(rc2, NULL, &outl, hf, OL_NODE_HDR) &&
			    EVP_EncryptUpdate(rc2, NULL, &outl, hf + OL_NODE_HDR, 16) &&
			    EVP_EncryptUpdate(rc2, rct2, &outl, hf + OL_NODE_HDR + 16, 4) &&
			    EVP_EncryptFinal_ex(rc2, fin, &outl) &&
			    EVP_CIPHER_CTX_ctrl(rc2, EVP_CTRL_AEAD_GET_TAG, 16, rtag2) &&
			    !memcmp(hct, hf + OL_NODE_HDR, 16) && !memcmp(hct + 16, rct2, 4) &&
			    memcmp(hct + 16, hf + OL_NODE_HDR + 16, 4) && !memcmp(htag, rtag2, 16);
		EVP_CIPHER_CTX_free(rc2);
		ok(hsame, "an encrypted HELLO: its nonce in the clear and in the AAD, the rest "
			  "encrypted, as documented");
		memcpy(hf + OL_NODE_HDR, hct, 20);
		memcpy(hf + OL_NODE_HDR + 20, htag, 16);
		ol_node_frame_parse(hf, sizeof(hf), 1u << 20, &hg);
		hf[OL_NODE_HDR + 3] ^= 1; /* the clear nonce is authenticated */
		int hbad = ol_node_mac_open(rx, hf, &hg) == -EBADMSG;
		memcpy(hf + OL_NODE_HDR, hct,
		       20); /* as sent (a failed open may leave it changed) */
		ok(hbad && ol_node_mac_open(rx, hf, &hg) == 0 && hf[OL_NODE_HDR + 19] == 0x40 + 19,
		   "its receiver opens it; a flipped bit of its clear nonce: -EBADMSG");
	}

	/* a plain frame while this process encrypts: refused (-EPERM), HELLO excepted */
	struct ol_node_hdr h = {.op = OL_NODE_PING, .seq = 9, .len = 10}, g;
	ol_node_hdr_encode(&h, f);
	memset(f + OL_NODE_HDR, 1, 10);
	seal(tx, f, 10);
	ol_node_frame_parse(f, cap, 1u << 20, &g);
	ok(ol_node_frame_open(rx, f, &g) == 0, "encryption off: a plain frame passes");
	ol_node_encrypt(true);
	ok(ol_node_frame_open(rx, f, &g) == -EPERM, "encryption on: a plain frame is refused");
	h.op = OL_NODE_HELLO;
	ol_node_hdr_encode(&h, f);
	seal(tx, f, 10);
	ol_node_frame_parse(f, cap, 1u << 20, &g);
	ok(ol_node_frame_open(rx, f, &g) == 0, "encryption on: a plain HELLO passes");
	ol_node_encrypt(false);
	ol_node_mac_free(tx);
	ol_node_mac_free(rx);
	free(f);
	free(ct);
	free(rct);
}

/* A relay between a client and the server that keeps what the client sent (the first cap
 * bytes), so a test can look at the wire. */
struct relay {
	int lfd;
	char up[64];
	uint8_t *seen, *back; /* client -> server, server -> client */
	size_t cap, n, nb;
};

static void *
relay_main(void *arg)
{
	struct relay *r = arg;
	int a = accept(r->lfd, NULL, NULL);
	int b = ol_io_connect(r->up, 10000);
	static uint8_t buf[65536];
	struct pollfd pf[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
	while (a >= 0 && b >= 0 && poll(pf, 2, 30000) > 0) {
		int from = (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 0 : 1;
		ssize_t n = read(pf[from].fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		uint8_t *keep = from == 0 ? r->seen : r->back;
		size_t *kept = from == 0 ? &r->n : &r->nb;
		size_t k = r->cap - *kept < (size_t)n ? r->cap - *kept : (size_t)n;
		memcpy(keep + *kept, buf, k);
		*kept += k;
		if (ol_io_write_all(pf[1 - from].fd, buf, (size_t)n, 20000))
			break;
	}
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return NULL;
}

/* Through the relay: a 1 MiB shard written and read back with this process encrypting or
 * not. *good: the round trip was right; *hello_enc: both HELLOs carried OL_NODE_F_ENC;
 * *path_seen: the server's drive path (in its HELLO reply) went over the wire as it is.
 * Returns whether a 64-byte run of the shard's bytes went over the wire as they are. */
static bool
relayed_round_trip(const char *addr, const char *drive, bool enc, int *good, bool *hello_enc,
		   bool *path_seen)
{
	struct relay r = {.cap = 4u << 20};
	r.seen = malloc(r.cap);
	r.back = malloc(r.cap);
	snprintf(r.up, sizeof(r.up), "%s", addr);
	r.lfd = ol_io_listen("127.0.0.1:0", false, 4);
	char via[64];
	snprintf(via, sizeof(via), "127.0.0.1:%u", ol_io_sock_port(r.lfd));
	pthread_t t;
	pthread_create(&t, NULL, relay_main, &r);
	ol_node_encrypt(enc);
	struct ol_node_client *c;
	struct pat p = {0, 1u << 20, 0};
	uint64_t wrote = 0, got = 0;
	struct chk k = {0, 0};
	*good = ol_node_client_new(via, SECRET, 3, &c) == 0 &&
		ol_node_shard_write(c, 0, "enc/obj", pat_src, &p, 30000, &wrote) == 0 &&
		wrote == 1u << 20 &&
		ol_node_shard_read(c, 0, "enc/obj", 0, 1u << 20, chk_sink, &k, 30000, &got) == 0 &&
		got == 1u << 20 && k.bad == 0 && ol_node_shard_unlink(c, 0, "enc/obj", 10000) == 0;
	ol_node_client_free(c);
	pthread_join(t, NULL);
	close(r.lfd);
	ol_node_encrypt(false);
	uint8_t run[64];
	for (size_t i = 0; i < sizeof(run); i++)
		run[i] = pat_byte(100000 + i);
	bool seen = memmem(r.seen, r.n, run, sizeof(run)) != NULL;
	struct ol_node_hdr hq, hr;
	*hello_enc = r.n >= OL_NODE_HDR && r.nb >= OL_NODE_HDR &&
		     ol_node_frame_parse(r.seen, r.n, 1u << 20, &hq) > 0 &&
		     ol_node_frame_parse(r.back, r.nb, 1u << 20, &hr) > 0 &&
		     hq.op == OL_NODE_HELLO && hr.op == OL_NODE_HELLO &&
		     (hq.flags & OL_NODE_F_ENC) && (hr.flags & OL_NODE_F_ENC);
	*path_seen = memmem(r.back, r.nb, drive, strlen(drive)) != NULL;
	free(r.seen);
	free(r.back);
	return seen;
}

static void
test_encrypt_server(const char *addr, const char *drive, struct ol_node_server *s)
{
	int rc;
	int good;
	bool henc, path;
	bool seen = relayed_round_trip(addr, drive, false, &good, &henc, &path);
	ok(good && seen && path && !henc,
	   "plain: the shard round trip works, its bytes and the drive paths are on the wire");
	seen = relayed_round_trip(addr, drive, true, &good, &henc, &path);
	ok(good && !seen, "encrypted: the same round trip works and none of its bytes are on the "
			  "wire");
	ok(henc && !path, "encrypted: both HELLOs are encrypted, no drive path is on the wire");

	/* a server that does not encrypt answers an encrypted HELLO encrypted */
	{
		uint8_t cn[16], zero[16] = {0}, key[OL_NODE_KEY],
				hf[OL_NODE_HDR + 20 + OL_NODE_MAC], rb[4096];
		struct ol_node_hdr hh = {.op = OL_NODE_HELLO,
					 .flags = OL_NODE_F_ENC,
					 .deadline_ms = 10000,
					 .len = 20},
				   hg;
		RAND_bytes(cn, sizeof(cn));
		ol_node_hdr_encode(&hh, hf);
		memcpy(hf + OL_NODE_HDR, cn, 16);
		memset(hf + OL_NODE_HDR + 16, 0, 4);
		struct iovec hv = {hf + OL_NODE_HDR, 20};
		struct ol_node_mac *htx = NULL, *hrx = NULL;
		int fd = ol_io_connect(addr, 5000);
		int hok = fd >= 0 && ol_node_kdf(SECRET, cn, zero, key) == 0 &&
			  (htx = mac_for(key, OL_NODE_C2S)) &&
			  ol_node_mac_seal_enc(htx, hf, &hv, 1, hf + OL_NODE_HDR,
					       hf + OL_NODE_HDR + 20) == 0 &&
			  ol_io_write_all(fd, hf, sizeof(hf), 10000) == 0 &&
			  xread(fd, rb, OL_NODE_HDR) == 0 &&
			  ol_node_frame_parse(rb, OL_NODE_HDR, 4000, &hg) == 0 &&
			  xread(fd, rb + OL_NODE_HDR, hg.len + OL_NODE_MAC) == 0 &&
			  hg.status == 0 && (hg.flags & OL_NODE_F_ENC) && hg.len >= 30 &&
			  ol_node_kdf(SECRET, cn, rb + OL_NODE_HDR, key) == 0 &&
			  !memmem(rb, OL_NODE_HDR + hg.len, "/d0", 3) &&
			  (hrx = mac_for(key, OL_NODE_S2C)) &&
			  ol_node_mac_open(hrx, rb, &hg) == 0 && rb[OL_NODE_HDR + 16] == 7 &&
			  memmem(rb, OL_NODE_HDR + hg.len, "/d0", 3);
		ok(hok, "encryption off here: an encrypted HELLO is answered encrypted (node 7 and "
			"the drive paths inside, not on the wire)");
		if (fd >= 0)
			close(fd);
		ol_node_mac_free(htx);
		ol_node_mac_free(hrx);
	}

	/* a server that does not encrypt answers an encrypting client encrypted */
	struct raw r;
	uint8_t f[OL_NODE_HDR + 64 + OL_NODE_MAC], buf[4096];
	ok(raw_hello(&r, addr) == 0, "a hand-made client's HELLO");
	struct ol_node_hdr h = {.op = OL_NODE_PING,
				.flags = OL_NODE_F_ENC,
				.call_id = 1,
				.seq = r.seq++,
				.deadline_ms = 10000,
				.len = 8},
			   g;
	ol_node_hdr_encode(&h, f);
	memcpy(f + OL_NODE_HDR, "pingping", 8);
	struct iovec iov = {f + OL_NODE_HDR, 8};
	rc = ol_node_mac_seal_enc(r.tx, f, &iov, 1, f + OL_NODE_HDR, f + OL_NODE_HDR + 8);
	ok(rc == 0 && ol_io_write_all(r.fd, f, OL_NODE_HDR + 8 + OL_NODE_MAC, 10000) == 0 &&
	       raw_recv(&r, &g, buf, sizeof(buf)) == 0 && (g.flags & OL_NODE_F_ENC) &&
	       ol_node_mac_open(r.rx, buf, &g) == 0 && g.status == 0,
	   "encryption off here: an encrypted PING is answered, encrypted");
	raw_close(&r);

	/* a plain peer while this process encrypts: its first frame after HELLO closes it */
	struct ol_node_server_stats before, after;
	ol_node_encrypt(true);
	ok(raw_hello(&r, addr) == 0, "encryption on: a plain HELLO is still answered");
	ol_node_server_stats(s, &before);
	ok(raw_send(&r, OL_NODE_PING, 0, 2, 10000, NULL, 0) == 0 &&
	       ol_io_read(r.fd, buf, sizeof(buf), 20000) <= 0,
	   "encryption on: a plain PING closes the connection unanswered");
	ol_node_server_stats(s, &after);
	ok(after.protocol_errors == before.protocol_errors + 1 &&
	       after.auth_failures == before.auth_failures,
	   "counted as a protocol error, not as an authentication failure");
	raw_close(&r);
	ol_node_encrypt(false);
}

/* main set OPENLAKE_FAULTS=1 and OPENLAKE_FAULT_FILE=rules before any client call */
static void
test_fault_hook(const char *rules)
{
	char addr[64], hits[600];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", free_port());
	snprintf(hits, sizeof(hits), "%s.hits", rules);
	struct ol_node_server_opts o = {.addr = addr,
					.secret = SECRET,
					.self_id = 9,
					.threads = 1,
					.window = 1u << 20,
					.max_payload = 64u << 10};
	struct ol_node_server *s;
	if (ol_node_server_start(&o, &s)) {
		ok(0, "server for the fault hook");
		return;
	}
	put_file(rules, "hold META_COMMIT 60000\nhold PING 60000\n");
	struct held_ping h = {.addr = addr};
	pthread_t th;
	pthread_create(&th, NULL, held_ping_main, &h);
	int held = 0;
	for (int i = 0; i < 1500 && !held; i++, usleep(20000))
		held = file_has(hits, "held PING");
	ok(held && !atomic_load(&h.done), "a PING is held while its rule stands");
	put_file(rules, "hold META_COMMIT 60000\n");
	pthread_join(th, NULL);
	ok(h.rc == 0 && file_has(hits, "released PING"),
	   "the rule gone: it goes out and is answered within its own deadline (%d)", h.rc);
	put_file(rules, "hold PING 50\n");
	h = (struct held_ping){.addr = addr};
	held_ping_main(&h);
	ok(h.rc == 0, "a hold of 50 ms ends by itself (%d)", h.rc);
	put_file(rules, "");
	ol_node_server_stop(s);
}

/* the rules' grammar, pure: kinds, ops, peers, the last match, the cap */
static void
test_fault_rules(void)
{
	const char *r = "hold META_COMMIT 100\n"
			"delay SHARD_WRITE 200 10.0.0.2:9001\n"
			"delay * 300 10.0.0.3:9001\n"
			"delay PING 50 *\n"
			"delay STAT 70\n"
			"delayPING 999 *\n"
			"hold PING 0\n"
			"delay META_GET 900000 10.0.0.2:9001";
	ok(ol_node_fault_rule_ms(r, "hold", OL_NODE_META_COMMIT, NULL) == 100, "a hold by op");
	ok(ol_node_fault_rule_ms(r, "hold", OL_NODE_PING, NULL) == 0, "a hold of 0 ms is none");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_META_COMMIT, NULL) == 0 &&
	       ol_node_fault_rule_ms(r, "delay", OL_NODE_META_COMMIT, "10.0.0.2:9001") == 0,
	   "a hold is not a delay");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_SHARD_WRITE, "10.0.0.2:9001") == 200 &&
	       ol_node_fault_rule_ms(r, "delay", OL_NODE_SHARD_WRITE, "10.0.0.4:9001") == 0,
	   "a delay by op and peer, only to that peer");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_SHARD_READ, "10.0.0.3:9001") == 300 &&
	       ol_node_fault_rule_ms(r, "delay", OL_NODE_DRIVE_ID, "10.0.0.3:9001") == 300,
	   "op * is every op to its peer");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_PING, "10.0.0.3:9001") == 50 &&
	       ol_node_fault_rule_ms(r, "delay", OL_NODE_PING, "10.9.9.9:1") == 50,
	   "peer * is every peer; the last matching line wins");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_STAT, "10.0.0.5:9001") == 0,
	   "a delay without a peer is not a rule (nor a kind glued to its op)");
	ok(ol_node_fault_rule_ms(r, "delay", OL_NODE_META_GET, "10.0.0.2:9001") == 600000,
	   "capped at 10 minutes");
	const char *cr = "hold COMMIT 150\ndelay COMMIT 250 10.0.0.2:9001\n";
	ok(ol_node_fault_rule_ms(cr, "hold", OL_NODE_COMMIT, NULL) == 150 &&
	       ol_node_fault_rule_ms(cr, "delay", OL_NODE_COMMIT, "10.0.0.2:9001") == 250 &&
	       ol_node_fault_rule_ms(cr, "hold", OL_NODE_META_COMMIT, NULL) == 0,
	   "COMMIT (op 16) is named by its own rules, not by META_COMMIT's");
	ok(ol_node_fault_rule_ms("", "delay", OL_NODE_PING, "x") == 0 &&
	       ol_node_fault_rule_ms(r, "delay", 200, "x") == 0,
	   "no rules, or no such op: none");
}

/* a delay to one peer: within the deadline the call waits and succeeds; past it, it times out
 * at its deadline; another peer is not delayed */
static void
test_fault_delay(const char *rules)
{
	char a1[64], a2[64], text[256];
	snprintf(a1, sizeof(a1), "127.0.0.1:%u", free_port());
	snprintf(a2, sizeof(a2), "127.0.0.1:%u", free_port());
	struct ol_node_server_opts o = {.secret = SECRET,
					.self_id = 9,
					.threads = 1,
					.window = 1u << 20,
					.max_payload = 64u << 10};
	struct ol_node_server *s1 = NULL, *s2 = NULL;
	struct ol_node_client *c1 = NULL, *c2 = NULL;
	o.addr = a1;
	int rc = ol_node_server_start(&o, &s1);
	o.addr = a2;
	if (!rc)
		rc = ol_node_server_start(&o, &s2);
	if (!rc)
		rc = ol_node_client_new(a1, SECRET, 5, &c1);
	if (!rc)
		rc = ol_node_client_new(a2, SECRET, 5, &c2);
	ok(rc == 0, "two servers and their clients (%d)", rc);
	if (rc)
		goto out;
	ok(ol_node_ping(c1, 2000, NULL) == 0 && ol_node_ping(c2, 2000, NULL) == 0, "connected");
	snprintf(text, sizeof(text), "delay PING 300 %s\n", a1);
	put_file(rules, text);
	uint64_t t = ol_io_now_ms();
	rc = ol_node_ping(c1, 2000, NULL);
	uint64_t took = ol_io_now_ms() - t;
	ok(rc == 0 && took >= 300, "delayed 300 ms within a 2 s deadline: answered in %llu ms (%d)",
	   (unsigned long long)took, rc);
	t = ol_io_now_ms();
	rc = ol_node_ping(c2, 2000, NULL);
	ok(rc == 0, "the other peer is not delayed (%llu ms)",
	   (unsigned long long)(ol_io_now_ms() - t));
	snprintf(text, sizeof(text), "delay * 5000 %s\n", a1);
	put_file(rules, text);
	t = ol_io_now_ms();
	rc = ol_node_ping(c1, 400, NULL);
	took = ol_io_now_ms() - t;
	ok(rc == -ETIMEDOUT && took >= 400 && took < 4000,
	   "a delay past the deadline times out at the deadline (%d, %llu ms)", rc,
	   (unsigned long long)took);
	put_file(rules, "");
	ok(ol_node_ping(c1, 2000, NULL) == 0, "the rule gone: the peer answers again");
out:
	ol_node_client_free(c1);
	ol_node_client_free(c2);
	if (s1)
		ol_node_server_stop(s1);
	if (s2)
		ol_node_server_stop(s2);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	char tmp[] = "/tmp/ol-test-node-XXXXXX";
	if (!mkdtemp(tmp))
		tap_skip_all("no temp dir");
	char rules[600];
	snprintf(rules, sizeof(rules), "%s/faults", tmp);
	setenv("OPENLAKE_FAULTS", "1", 1); /* read once, at the first client call */
	setenv("OPENLAKE_FAULT_FILE", rules, 1);
	test_frames();
	test_mac_reference();
	test_names();
	test_deadline();
	test_abort();
	test_credit();
	test_server(tmp);
	test_encrypt_frames();
	test_fault_hook(rules);
	test_fault_rules();
	test_fault_delay(rules);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd))
		ok(0, "cleanup");
	tap_done();
}
