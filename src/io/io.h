/* io/io.h - small reusable I/O helpers: address parsing, listening sockets with SO_REUSEPORT,
 * socket options, poll-based timed reads/writes, named threads, monotonic clock, buffer pool.
 *
 * Design note: the request handlers above us (S3 -> store) do blocking disk I/O, so the HTTP
 * and KV servers use blocking sockets with poll() timeouts, one thread per connection, and one
 * SO_REUSEPORT listener + acceptor thread per core. These helpers are what they share.
 * Everything here is thread-safe unless noted. Return 0 (or a value >= 0) or -errno. */
#ifndef OL_IO_IO_H
#define OL_IO_IO_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- addresses ---- */

/* Parse "host:port", "[v6addr]:port", ":port" (= 0.0.0.0) or "*:port". host is a numeric IPv4 /
 * IPv6 address or "localhost" (= 127.0.0.1). port 0..65535. No DNS. 0 or -EINVAL. */
int ol_io_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* One resolved address. */
struct ol_io_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* Every address "host:port" names, in the resolver's order, up to max (>= 1): a numeric or
 * "localhost" / wildcard address as ol_io_parse_addr takes it (one entry), else a host name
 * looked up with getaddrinfo (blocking: /etc/hosts, DNS) for TCP, IPv4 and IPv6. Returns the
 * count (>= 1), -EINVAL (malformed: no port, a bad port, an empty host), -ENXIO (the name does
 * not resolve), -EAGAIN (the resolver failed for now: retry). */
int ol_io_resolve(const char *addr, struct ol_io_addr *out, unsigned max);

/* Format an address as "1.2.3.4:80" or "[::1]:80" into buf (always NUL-terminated).
 * Returns 0 or -ENOSPC. */
int ol_io_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t cap);

/* Port of a bound socket (host order), 0 on error. */
unsigned ol_io_sock_port(int fd);

/* ---- sockets ---- */

/* Create a TCP listening socket bound to addr ("host:port" as above, or a host name: its first
 * address) with SO_REUSEADDR and,
 * when reuseport, SO_REUSEPORT; CLOEXEC, blocking. backlog <= 0 means SOMAXCONN.
 * Returns the fd (>= 0) or -errno (-EADDRINUSE, -EINVAL, ...). */
int ol_io_listen(const char *addr, bool reuseport, int backlog);
/* Same from a parsed address. */
int ol_io_listen_sa(const struct sockaddr *sa, socklen_t len, bool reuseport, int backlog);

/* Set TCP_NODELAY. 0 or -errno. */
int ol_io_set_nodelay(int fd);

/* Connect a blocking TCP socket to addr ("host:port", a host name tried address by address
 * within the one timeout), with TCP_NODELAY. fd or -errno (ol_io_resolve's errors too). */
int ol_io_connect(const char *addr, int timeout_ms);

/* Wait until fd is ready for events (POLLIN / POLLOUT). timeout_ms < 0 waits forever.
 * Returns 0 when ready (or on POLLHUP/POLLERR, so the next read/write reports it),
 * -ETIMEDOUT, -EINTR-safe (retried), or -errno. */
int ol_io_wait(int fd, short events, int timeout_ms);

/* Read up to len bytes, waiting at most timeout_ms (< 0: forever) for the first byte.
 * Returns bytes read (> 0), 0 at EOF, -ETIMEDOUT, -ECONNRESET or -errno. */
ssize_t ol_io_read(int fd, void *buf, size_t len, int timeout_ms);

/* Blocking recv with the timeout set through SO_RCVTIMEO: one syscall per read (ol_io_read
 * needs up to three when no data is waiting). fd must be a blocking socket used by one thread;
 * *cur_timeo caches the timeout last set on it (start with -2). timeout_ms 0 gives -ETIMEDOUT
 * at once, < 0 waits forever. Same returns as ol_io_read. */
ssize_t ol_io_recv_timeo(int fd, void *buf, size_t len, int timeout_ms, int *cur_timeo);

/* Write all of iov[0..n), waiting at most timeout_ms for each progress step (< 0: forever).
 * iov is modified. MSG_NOSIGNAL: a closed peer gives -EPIPE, never SIGPIPE.
 * Returns 0, -ETIMEDOUT or -errno. */
int ol_io_writev_all(int fd, struct iovec *iov, int n, int timeout_ms);
int ol_io_write_all(int fd, const void *buf, size_t len, int timeout_ms);

/* ---- threads and time ---- */

/* Start a joinable thread named name (truncated to 15 chars). 0 or -errno. */
int ol_io_thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg);
/* Start a detached thread. 0 or -errno. */
int ol_io_thread_start_detached(const char *name, void *(*fn)(void *), void *arg);
/* Name the calling thread. */
void ol_io_thread_name(const char *name);
/* Number of online CPUs (>= 1). */
unsigned ol_io_ncpu(void);

/* Monotonic clock. */
uint64_t ol_io_now_ns(void);
uint64_t ol_io_now_ms(void);

/* ---- file I/O through io_uring ---- */

/* The process's one io_uring batch for file I/O (the object engine's shard reads, writes and
 * fsyncs go through it; kv/spill.c keeps its own O_DIRECT ring, see docs/ARCHITECTURE.md). */
enum ol_io_opcode { OL_IO_READ, OL_IO_WRITE, OL_IO_FSYNC, OL_IO_FDATASYNC };

#define OL_IO_MAX_IOV 2

struct ol_io_op {
	int fd;	    /* < 0: the op is not run, res = -EBADF */
	int opcode; /* enum ol_io_opcode */
	void *buf;  /* READ / WRITE when niov == 0 */
	size_t len;
	uint64_t off;
	ssize_t res; /* out: bytes transferred (short only at EOF for reads) or -errno */
	/* READ / WRITE when niov > 0: vectored (readv / writev) over iov[0..niov); buf and len
	 * are then unused. The iovecs are not modified. */
	struct iovec iov[OL_IO_MAX_IOV];
	int niov;
};

/* Run ops[0..n) concurrently and wait for all of them: one io_uring submission on the calling
 * thread's own ring (created on first use, freed at thread exit, made again in a forked
 * child), so reads of the shards of a stripe on several drives overlap. Falls back to
 * pread/pwrite/fsync when io_uring cannot be set up (old kernel, seccomp, OL_IO_NO_URING set).
 * Partial transfers are completed (reads stop short only at EOF). Each op's res is set, also
 * when the ring fails (then -errno of the failure for the ops it did not complete); returns 0,
 * -EINVAL (an op over 1 GiB or more than OL_IO_MAX_IOV iovecs: no op run) or -errno if the
 * ring itself failed. Any thread may call it. */
int ol_io_batch(struct ol_io_op *ops, unsigned n);

/* ---- buffer pool ---- */

/* A pool of fixed-size buffers (e.g. 64 KiB). get() returns a cached buffer or a fresh one
 * (aborts via ol_die on out-of-memory); put() caches up to max_cached buffers and frees the
 * rest. Thread-safe (one mutex; buffers are only taken at connection start/end, not per byte). */
struct ol_bufpool;
struct ol_bufpool *ol_bufpool_new(size_t buf_size, unsigned max_cached);
void *ol_bufpool_get(struct ol_bufpool *p);
void ol_bufpool_put(struct ol_bufpool *p, void *buf);
size_t ol_bufpool_buf_size(const struct ol_bufpool *p);
void ol_bufpool_free(struct ol_bufpool *p); /* all buffers must have been put back */

/* Large I/O buffers by size (a PUT body of whole stripes, a stripe, a shard block), cached
 * process-wide: a busy PUT or GET path takes back the same few megabytes instead of mapping,
 * faulting in and unmapping them per request (in a VM the page faults cost more CPU than the
 * bytes copied into the pages). Sizes under OL_IOBUF_MIN, and sizes beyond the first
 * OL_IOBUF_CLASSES seen, are plain malloc/free. The idle buffers of all sizes together are at
 * most the limit's total bytes (OL_IOBUF_CACHE_BYTES unless ol_iobuf_limit said otherwise),
 * and at most per_size of one size; put() frees what is beyond. get() aborts via ol_die on
 * out-of-memory. put(NULL, n) is a no-op; a buffer goes back with the size it was got with.
 * Thread-safe; cached buffers live until the process ends. */
#define OL_IOBUF_MIN	     (64u << 10)
#define OL_IOBUF_CLASSES     8
#define OL_IOBUF_CACHE_BYTES (1ull << 30)
void *ol_iobuf_get(size_t size);
void ol_iobuf_put(void *buf, size_t size);
/* The cache's limits ([memory_pool] size_bytes and bucket_capacity in the daemon): total_bytes
 * of idle buffers in all (0: cache nothing), per_size idle buffers of one size. Call it before
 * the first get (a size's count cap is fixed when the size is first seen); the total applies
 * to every later put. */
void ol_iobuf_limit(size_t total_bytes, unsigned per_size);
/* Bytes of idle buffers the cache holds now (what a burst left behind; at most the total). */
size_t ol_iobuf_cached_bytes(void);

#endif
