/* tls/tls.h - server TLS contexts made from PEM files (OpenSSL), shared by the S3 port
 * (http/tls.c) and the KV port (kv/server.c).
 *
 * Every context is kept in a process-wide list; ol_tls_reload_all() builds each one again from
 * its files (SIGHUP): new connections get the new certificate, open ones keep theirs (each SSL
 * holds a reference on the context it was made from). Files that do not load leave the old
 * context in place and the log says why. Thread-safe. */
#ifndef OL_TLS_TLS_H
#define OL_TLS_TLS_H

#include <stdbool.h>

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
 * caller frees it with SSL_free. */
void *ol_tls_ssl_new(struct ol_tls *t, int fd);

/* Reload every context from its files. 0, or the first error (the others still reloaded). */
int ol_tls_reload_all(void);

#endif
