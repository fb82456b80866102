/* kv/net.h - small blocking-socket helpers shared by the KV server and libopenlake (which must
 * not depend on the daemon's io/ and base/ layers: no logging, no aborts). Return 0 / fd or
 * -errno. Peer close in the middle of a message is -ECONNRESET. Timeouts come from
 * SO_RCVTIMEO / SO_SNDTIMEO set by kvnet_set_timeout (-EAGAIN is reported as -ETIMEDOUT). */
#ifndef OL_KV_NET_H
#define OL_KV_NET_H

#include <stddef.h>
#include <signal.h>
#include <sys/uio.h>

/* Listen on "host:port" (numeric host, "localhost" or "*"), SO_REUSEADDR (not SO_REUSEPORT: a port
 * held by another process is -EADDRINUSE).
 * *port = the bound port. */
int kvnet_listen(const char *addr, unsigned *port);
/* Connect to "host:port" within timeout_ms; TCP_NODELAY, CLOEXEC, blocking afterwards. */
int kvnet_connect(const char *addr, unsigned timeout_ms);
/* Connect to the Unix stream socket at path; CLOEXEC. fd or -errno. */
int kvnet_connect_unix(const char *path);
int kvnet_set_timeout(int fd, unsigned timeout_ms); /* 0 = none */
int kvnet_read_full(int fd, void *buf, size_t len);
/* iov is modified. */
int kvnet_readv_full(int fd, struct iovec *iov, int n);
int kvnet_writev_full(int fd, struct iovec *iov, int n);
int kvnet_write_full(int fd, const void *buf, size_t len);
/* Read and throw away len bytes. */
int kvnet_skip(int fd, size_t len);

/* A connection that may speak TLS (kv/sock.c, linked into libopenlake only): ssl is an OpenSSL SSL
 * * on fd after its handshake, or NULL for plain TCP / Unix. Same contracts as the fd functions
 * above; over TLS a read or write that does not progress within the socket timeout is -ETIMEDOUT, a
 * peer's close_notify or EOF -ECONNRESET, a TLS error -EPROTO. */
int kvnet_sreadv_full(int fd, void *ssl, struct iovec *iov, int n);
int kvnet_swritev_full(int fd, void *ssl, struct iovec *iov, int n);
int kvnet_sread_full(int fd, void *ssl, void *buf, size_t len);
int kvnet_swrite_full(int fd, void *ssl, const void *buf, size_t len);
int kvnet_sskip(int fd, void *ssl, size_t len);
/* SIGPIPE blocked on this thread between the two calls (for OpenSSL's writes), and one it
 * raised meanwhile taken back. */
struct kvnet_sigpipe {
	sigset_t old;
	int was_pending;
};
void kvnet_sigpipe_block(struct kvnet_sigpipe *sp);
void kvnet_sigpipe_unblock(struct kvnet_sigpipe *sp);
/* One read of up to len bytes: > 0 bytes, -ECONNRESET at EOF, -EAGAIN when the socket timeout
 * passed with nothing read, -errno. */
long kvnet_srecv(int fd, void *ssl, void *buf, size_t len);

#endif
