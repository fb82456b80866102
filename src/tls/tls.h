/* tls/tls.h - server TLS contexts made from PEM files (OpenSSL), shared by the S3 port
 * (http/tls.c) and the KV port (kv/server.c, whose sessions run over memory: tls/mem.c).
 *
 * Every context is kept in a process-wide list; ol_tls_reload_all() builds each one again from
 * its files (SIGHUP): new connections get the new certificate, open ones keep theirs (each SSL
 * holds a reference on the context it was made from). Files that do not load leave the old
 * context in place and the log says why. Thread-safe. */
#ifndef OL_TLS_TLS_H
#define OL_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_tls;

/* Called on each new SSL_CTX (first load and reloads) after the common settings (TLS >= 1.2,
 * no renegotiation, released buffers) to add what the protocol needs (e.g. ALPN). */
typedef void (*ol_tls_setup_fn)(void *ssl_ctx);

/* Load cert (PEM chain), key and, when ca is non-empty, a client CA (then clients must show a
 * certificate it signed). who prefixes log lines ("http", "kv"). 0 and *out, -EINVAL (a file
 * that does not load: logged, naming it), -ENOENT/-EACCES (missing file), -ENOMEM. */
int ol_tls_new(const char *who, const char *cert, const char *key, const char *ca,
	       ol_tls_setup_fn setup, struct ol_tls **out);
void ol_tls_free(struct ol_tls *t); /* NULL is a no-op; no SSL made from it may be in use */

/* A new server-side SSL * on fd (accept state) from the current context; NULL on failure. The
 * caller frees it with SSL_free. fd < 0: no socket (the caller gives it BIOs). */
void *ol_tls_ssl_new(struct ol_tls *t, int fd);

/* A server TLS session over memory (tls/mem.c): the SSL * of the current context (so a reload
 * reaches new sessions) over a pair of memory BIOs, with no socket and no I/O of its own. The
 * caller moves ciphertext between its transport and the session: received bytes go straight
 * into the session's input buffer (ol_tls_mem_in_room / _in_commit), ciphertext to send is
 * taken from its output buffer where it lies (ol_tls_mem_out / _out_done). Plaintext is
 * decrypted straight into the caller's buffer (ol_tls_mem_read) and encrypted straight from it
 * (ol_tls_mem_write). One thread at a time per session; the caller owns the struct. */
struct ol_tls_mem {
	void *ssl; /* SSL *; NULL: no session */
	void *net; /* BIO *: the transport's end of the pair */
};

/* Make a session whose input buffer holds in_cap bytes of ciphertext and output buffer out_cap
 * (allocated at first use). 0, or -ENOMEM (m left empty). */
int ol_tls_mem_new(struct ol_tls *t, size_t in_cap, size_t out_cap, struct ol_tls_mem *m);
/* Free the session (a no-op on an empty one); m is empty afterwards. */
void ol_tls_mem_free(struct ol_tls_mem *m);

/* Where received ciphertext goes: *p and the contiguous room there (0: full; the session has
 * not read what it holds yet). commit: n bytes (<= that room) were written at *p. */
size_t ol_tls_mem_in_room(struct ol_tls_mem *m, uint8_t **p);
void ol_tls_mem_in_commit(struct ol_tls_mem *m, size_t n);
/* The first received byte the session has not read yet, or -1 when none (tells a plaintext
 * client from a TLS ClientHello before the handshake reads it). */
int ol_tls_mem_peek(struct ol_tls_mem *m);
/* Ciphertext waiting to be sent: *p and its contiguous length (0: none). out_done: the first n
 * bytes (<= that length) went out. */
size_t ol_tls_mem_out(struct ol_tls_mem *m, const uint8_t **p);
void ol_tls_mem_out_done(struct ol_tls_mem *m, size_t n);

/* Run the handshake as far as the buffered input allows: 1 done, 0 it needs I/O (send what
 * ol_tls_mem_out holds, then receive), -EPROTO failed (why: OpenSSL's reason, "peer closed"
 * or the like; an alert for the peer may wait in ol_tls_mem_out). */
int ol_tls_mem_handshake(struct ol_tls_mem *m, char *why, size_t cap);
/* Decrypt up to n bytes into dst: > 0 bytes, 0 it needs I/O (as above), -ECONNRESET the peer
 * ended the session (close_notify), -EPROTO a TLS error. */
long ol_tls_mem_read(struct ol_tls_mem *m, void *dst, size_t n);
/* Encrypt up to n bytes from src into the output buffer: > 0 bytes taken (src may be reused
 * then), 0 the output buffer is full (send it, then call again with the same src and n),
 * -EPROTO a TLS error. */
long ol_tls_mem_write(struct ol_tls_mem *m, const void *src, size_t n);
/* Whether the session holds input it has not given out yet: a record half-received, or
 * decrypted bytes not read (a frame has started, even if no plaintext came out yet). */
bool ol_tls_mem_busy(struct ol_tls_mem *m);

/* Reload every context from its files. 0, or the first error (the others still reloaded). */
int ol_tls_reload_all(void);

#endif
