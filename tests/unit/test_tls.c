/* tests/unit/test_tls.c - tls/: server sessions over memory BIOs (mem.c) against a real
 * OpenSSL client session, the bytes shuttled by hand between the two in small, uneven pieces
 * (as a socket would deliver them): the handshake, a plaintext first byte told apart from a
 * ClientHello, values of 4 KiB, 256 KiB and 2 MiB both ways bit-exact through bounded buffers,
 * client certificates required by client_ca, a reload reaching new sessions only, and the
 * peer's close_notify. Certificates are made here (P-256, one CA signing the rest). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tap.h"
#include "tls/tls.h"

#define BUF (64u * 1024) /* the server's ciphertext buffers, as the KV loops use */

static char dir[64];

/* ---- certificates ---- */

struct cert {
	EVP_PKEY *key;
	X509 *x;
};

static void
ext(X509 *x, X509 *issuer, int nid, const char *v)
{
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, v);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

/* A certificate for cn signed by ca (NULL: self-signed CA). */
static struct cert
make_cert(const char *cn, long serial, const struct cert *ca, bool server)
{
	struct cert c = {EVP_EC_gen("P-256"), X509_new()};
	X509_set_version(c.x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c.x), serial);
	X509_gmtime_adj(X509_getm_notBefore(c.x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(c.x), 86400);
	X509_NAME *n = X509_get_subject_name(c.x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(c.x, ca ? X509_get_subject_name(ca->x) : n);
	X509_set_pubkey(c.x, c.key);
	X509 *issuer = ca ? ca->x : c.x;
	if (!ca)
		ext(c.x, issuer, NID_basic_constraints, "critical,CA:TRUE");
	else if (server)
		ext(c.x, issuer, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
	X509_sign(c.x, ca ? ca->key : c.key, EVP_sha256());
	return c;
}

static void
cert_free(struct cert *c)
{
	EVP_PKEY_free(c->key);
	X509_free(c->x);
}

/* Write c's certificate (and key) as PEM files dir/name.pem, dir/name.key; path in out. */
static void
write_cert(const struct cert *c, const char *name, char *pem, char *key)
{
	snprintf(pem, 256, "%s/%s.pem", dir, name);
	snprintf(key, 256, "%s/%s.key", dir, name);
	FILE *f = fopen(pem, "w");
	PEM_write_X509(f, c->x);
	fclose(f);
	f = fopen(key, "w");
	PEM_write_PrivateKey(f, c->key, NULL, NULL, 0, NULL, NULL);
	fclose(f);
}

/* ---- a client session over its own memory BIO pair ---- */

struct client {
	SSL *ssl;
	BIO *net; /* the client's transport end */
};

static struct client
client_new(SSL_CTX *ctx)
{
	struct client c = {SSL_new(ctx), NULL};
	BIO *ours;
	BIO_new_bio_pair(&ours, 17 * 1024, &c.net, 17 * 1024);
	SSL_set_bio(c.ssl, ours, ours);
	SSL_set_mode(c.ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
	SSL_set_tlsext_host_name(c.ssl, "localhost");
	SSL_set1_host(c.ssl, "localhost");
	SSL_set_connect_state(c.ssl);
	return c;
}

static void
client_free(struct client *c)
{
	SSL_free(c->ssl);
	BIO_free(c->net);
}

static size_t step_bytes = 1; /* the most bytes one move carries: varied per test */

/* Move ciphertext both ways, at most step_bytes per direction (the server's side through the
 * ol_tls_mem calls under test). Returns the bytes moved. */
static size_t
shuttle(struct client *c, struct ol_tls_mem *s)
{
	size_t moved = 0;
	char *p;
	int n = BIO_nread0(c->net, &p); /* client -> server */
	if (n > 0) {
		uint8_t *room;
		size_t r = ol_tls_mem_in_room(s, &room), k = (size_t)n;
		k = k < r ? k : r;
		k = k < step_bytes ? k : step_bytes;
		memcpy(room, p, k);
		ol_tls_mem_in_commit(s, k);
		BIO_nread(c->net, &p, (int)k);
		moved += k;
	}
	const uint8_t *o;
	size_t len = ol_tls_mem_out(s, &o); /* server -> client */
	if (len > 0) {
		char *w;
		int room = BIO_nwrite0(c->net, &w);
		size_t k = room > 0 ? (size_t)room : 0;
		k = k < len ? k : len;
		k = k < step_bytes ? k : step_bytes;
		memcpy(w, o, k);
		BIO_nwrite(c->net, &w, (int)k);
		ol_tls_mem_out_done(s, k);
		moved += k;
	}
	return moved;
}

/* Both handshakes to their end: 1, or the server's result (-EPROTO, why set) / 0 when stuck. */
static int
handshake(struct client *c, struct ol_tls_mem *s, char *why, size_t cap)
{
	int sr = 0, cr = 0;
	for (int i = 0; i < 1000000; i++) {
		if (cr != 1) {
			cr = SSL_do_handshake(c->ssl);
			ERR_clear_error();
		}
		if (sr == 0)
			sr = ol_tls_mem_handshake(s, why, cap);
		if (sr < 0)
			return sr;
		size_t moved = shuttle(c, s);
		if (sr == 1 && cr == 1 && moved == 0)
			return 1;
	}
	return 0;
}

static SSL_CTX *
client_ctx(const char *ca_pem, const char *cert, const char *key)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, ca_pem, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (cert) {
		SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM);
	}
	return ctx;
}

/* n bytes client -> server: the server decrypts into dst in reads of at most rd bytes. */
static bool
to_server(struct client *c, struct ol_tls_mem *s, const uint8_t *src, uint8_t *dst, size_t n,
	  size_t rd)
{
	size_t sent = 0, got = 0;
	for (long spins = 0; got < n && spins < 100000000; spins++) {
		if (sent < n) {
			int w = SSL_write(c->ssl, src + sent, (int)(n - sent));
			if (w > 0)
				sent += (size_t)w;
			ERR_clear_error();
		}
		long r = ol_tls_mem_read(s, dst + got, n - got < rd ? n - got : rd);
		if (r < 0)
			return false;
		got += (size_t)r;
		shuttle(c, s);
	}
	return got == n && memcmp(src, dst, n) == 0;
}

/* n bytes server -> client, encrypted from src; counts the server's full-buffer stops. */
static bool
to_client(struct client *c, struct ol_tls_mem *s, const uint8_t *src, uint8_t *dst, size_t n,
	  unsigned *full)
{
	size_t sent = 0, got = 0;
	for (long spins = 0; got < n && spins < 100000000; spins++) {
		if (sent < n) {
			long w = ol_tls_mem_write(s, src + sent, n - sent);
			if (w < 0)
				return false;
			*full += w == 0;
			sent += (size_t)w;
		}
		int r = SSL_read(c->ssl, dst + got, (int)(n - got));
		if (r > 0)
			got += (size_t)r;
		ERR_clear_error();
		shuttle(c, s);
	}
	return got == n && memcmp(src, dst, n) == 0;
}

/* ---- tests ---- */

static char ca_pem[256], ca_key[256], s_pem[256], s_key[256], c_pem[256], c_key[256];

static void
test_handshake_and_values(struct ol_tls *t)
{
	SSL_CTX *cctx = client_ctx(ca_pem, NULL, NULL);
	struct client c = client_new(cctx);
	struct ol_tls_mem s;
	char why[256] = "";
	ok(ol_tls_mem_new(t, BUF, BUF, &s) == 0, "a session over memory BIOs");
	ok(ol_tls_mem_peek(&s) == -1 && !ol_tls_mem_busy(&s), "nothing received yet");
	(void)SSL_do_handshake(c.ssl);
	ERR_clear_error();
	step_bytes = 1; /* the ClientHello's first byte alone */
	shuttle(&c, &s);
	ok(ol_tls_mem_peek(&s) == 0x16, "the first byte is a TLS handshake record (0x16)");
	ok(ol_tls_mem_busy(&s), "a record half-received is busy");
	step_bytes = 777; /* uneven pieces from here on */
	ok(handshake(&c, &s, why, sizeof(why)) == 1, "handshake done (%s)", why);
	X509 *peer = SSL_get1_peer_certificate(c.ssl);
	char cn[64] = "";
	if (peer)
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn,
					  sizeof(cn));
	X509_free(peer);
	ok(strcmp(cn, "srv1") == 0 && SSL_get_verify_result(c.ssl) == X509_V_OK,
	   "the client verified the server's certificate (CN %s)", cn);
	static const size_t sizes[] = {4096, 256 << 10, 2 << 20};
	uint8_t *src = malloc(2 << 20), *dst = malloc(2 << 20);
	for (size_t i = 0; i < 3; i++) {
		size_t n = sizes[i];
		tap_fill(src, n, 7 + i);
		memset(dst, 0, n);
		step_bytes = 5000 + 3000 * i;
		ok(to_server(&c, &s, src, dst, n, 100000), "%zu bytes client -> server, bit-exact",
		   n);
		tap_fill(src, n, 70 + i);
		memset(dst, 0, n);
		unsigned full = 0;
		ok(to_client(&c, &s, src, dst, n, &full), "%zu bytes server -> client, bit-exact",
		   n);
		if (n > 2 * BUF)
			ok(full > 0, "the output buffer filled and was sent %u times, then resumed",
			   full);
	}
	uint8_t *room;
	const uint8_t *out;
	ok(ol_tls_mem_in_room(&s, &room) == BUF && ol_tls_mem_out(&s, &out) == 0,
	   "drained: the whole input buffer is room from its start again (idle connections touch "
	   "no more of it than their largest burst)");
	/* a frame header alone: the reader asks for exactly 32 bytes of a larger record */
	tap_fill(src, 1000, 99);
	step_bytes = 1 << 20;
	ok(SSL_write(c.ssl, src, 1000) == 1000, "a 1000-byte record from the client");
	shuttle(&c, &s);
	long r = ol_tls_mem_read(&s, dst, 32);
	ok(r == 32 && memcmp(dst, src, 32) == 0, "32 bytes read of it");
	ok(ol_tls_mem_busy(&s), "the rest of the record is still pending (busy)");
	r = ol_tls_mem_read(&s, dst + 32, 2000);
	ok(r == 968 && memcmp(dst, src, 1000) == 0 && !ol_tls_mem_busy(&s),
	   "the rest of it, then nothing pending");
	ok(ol_tls_mem_read(&s, dst, 10) == 0, "no more input: 0 (needs I/O)");
	SSL_shutdown(c.ssl);
	shuttle(&c, &s);
	ok(ol_tls_mem_read(&s, dst, 10) == -ECONNRESET, "the client's close_notify: -ECONNRESET");
	free(src);
	free(dst);
	ol_tls_mem_free(&s);
	ok(s.ssl == NULL, "freed: the session is empty");
	ol_tls_mem_free(&s); /* a no-op */
	client_free(&c);
	SSL_CTX_free(cctx);
}

static void
test_plaintext_first_byte(struct ol_tls *t)
{
	struct ol_tls_mem s;
	char why[256] = "";
	ol_tls_mem_new(t, BUF, BUF, &s);
	uint8_t *room;
	size_t n = ol_tls_mem_in_room(&s, &room);
	static const uint8_t hello[8] = {0x4f, 0x4c, 0x4b, 0x56, 1, 0, 1, 0};
	ok(n >= sizeof(hello), "room for input (%zu bytes)", n);
	memcpy(room, hello, sizeof(hello));
	ol_tls_mem_in_commit(&s, sizeof(hello));
	ok(ol_tls_mem_peek(&s) == 0x4f, "a plaintext frame's first byte is seen before TLS reads");
	ok(ol_tls_mem_handshake(&s, why, sizeof(why)) == -EPROTO && why[0],
	   "handshaking over it fails: %s", why);
	ol_tls_mem_free(&s);
}

static void
test_client_ca(void)
{
	struct ol_tls *t;
	char why[256] = "";
	ok(ol_tls_new("test", s_pem, s_key, ca_pem, NULL, &t) == 0, "a context with client_ca");
	SSL_CTX *anon = client_ctx(ca_pem, NULL, NULL), *with = client_ctx(ca_pem, c_pem, c_key);
	struct client c = client_new(anon);
	struct ol_tls_mem s;
	ol_tls_mem_new(t, BUF, BUF, &s);
	step_bytes = 4096;
	int r = handshake(&c, &s, why, sizeof(why));
	ok(r == -EPROTO && strstr(why, "certificate"), "no client certificate: refused (%s)", why);
	ok(ol_tls_mem_out(&s, &(const uint8_t *){0}) > 0, "an alert waits for the client");
	ol_tls_mem_free(&s);
	client_free(&c);
	c = client_new(with);
	ol_tls_mem_new(t, BUF, BUF, &s);
	why[0] = '\0';
	ok(handshake(&c, &s, why, sizeof(why)) == 1, "a certificate the CA signed: accepted (%s)",
	   why);
	X509 *peer = SSL_get1_peer_certificate(s.ssl);
	ok(peer != NULL, "the server holds the client's certificate");
	X509_free(peer);
	ol_tls_mem_free(&s);
	client_free(&c);
	SSL_CTX_free(anon);
	SSL_CTX_free(with);
	ol_tls_free(t);
}

static void
test_reload(struct ol_tls *t, const struct cert *ca)
{
	SSL_CTX *cctx = client_ctx(ca_pem, NULL, NULL);
	struct client old = client_new(cctx);
	struct ol_tls_mem so, sn;
	char why[256] = "", p2[256], k2[256], cn[64] = "";
	step_bytes = 4096;
	ol_tls_mem_new(t, BUF, BUF, &so);
	ok(handshake(&old, &so, why, sizeof(why)) == 1, "a session before the reload");
	struct cert s2 = make_cert("srv2", 3, ca, true);
	write_cert(&s2, "srv2", p2, k2);
	ok(rename(p2, s_pem) == 0 && rename(k2, s_key) == 0, "new files in place");
	ok(ol_tls_reload_all() == 0, "reloaded");
	struct client nw = client_new(cctx);
	ol_tls_mem_new(t, BUF, BUF, &sn);
	ok(handshake(&nw, &sn, why, sizeof(why)) == 1, "a session after the reload");
	X509 *peer = SSL_get1_peer_certificate(nw.ssl);
	X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
	X509_free(peer);
	ok(strcmp(cn, "srv2") == 0, "the new session shows the new certificate (CN %s)", cn);
	uint8_t a[5000], b[5000];
	tap_fill(a, sizeof(a), 5);
	ok(to_server(&old, &so, a, b, sizeof(a), 1024), "the old session still carries data");
	ol_tls_mem_free(&so);
	ol_tls_mem_free(&sn);
	client_free(&old);
	client_free(&nw);
	SSL_CTX_free(cctx);
	cert_free(&s2);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ol-test-tls.XXXXXX");
	if (!mkdtemp(dir))
		tap_skip_all("no temporary directory");
	struct cert ca = make_cert("test-ca", 1, NULL, false);
	struct cert srv = make_cert("srv1", 2, &ca, true);
	struct cert cli = make_cert("client1", 4, &ca, false);
	write_cert(&ca, "ca", ca_pem, ca_key);
	write_cert(&srv, "srv", s_pem, s_key);
	write_cert(&cli, "client", c_pem, c_key);
	struct ol_tls *t;
	ok(ol_tls_new("test", s_pem, s_key, NULL, NULL, &t) == 0, "a server context");
	test_handshake_and_values(t);
	test_plaintext_first_byte(t);
	test_client_ca();
	test_reload(t, &ca);
	ol_tls_free(t);
	cert_free(&ca);
	cert_free(&srv);
	cert_free(&cli);
	const char *names[] = {"ca", "srv", "client", "srv2"};
	char path[256];
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s.pem", dir, names[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s.key", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	tap_done();
}
