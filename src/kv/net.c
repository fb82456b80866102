/* kv/net.c - blocking socket helpers (no logging: also linked into libopenlake). */
#include "kv/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int
split(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || colon[1] == '\0')
		return -EINVAL;
	size_t hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl >= hcap || strlen(colon + 1) >= pcap)
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	snprintf(port, pcap, "%s", colon + 1);
	if (strcmp(host, "localhost") == 0)
		snprintf(host, hcap, "127.0.0.1");
	return 0;
}

static int
resolve(const char *addr, bool passive, struct addrinfo **res)
{
	char host[256], port[16];
	if (split(addr, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE | AI_NUMERICHOST : 0);
	bool any = host[0] == '\0' || strcmp(host, "*") == 0;
	int r = getaddrinfo(any ? NULL : host, port, &hints, res);
	return r == 0 ? 0 : -EINVAL;
}

int
kvnet_listen(const char *addr, unsigned *port)
{
	struct addrinfo *ai;
	int r = resolve(addr, true, &ai);
	if (r < 0)
		return r;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	/* SO_REUSEADDR only: the pool has one listener, and SO_REUSEPORT would let a second
	 * daemon bind the same port and split the clients between two pools */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
		r = -errno;
		close(fd);
		goto out;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					       : ((struct sockaddr_in *)&ss)->sin_port);
	r = fd;
out:
	freeaddrinfo(ai);
	return r;
}

int
kvnet_connect_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t l = strlen(path);
	if (l == 0 || l >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, l + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int
connect_one(const struct addrinfo *a, unsigned timeout_ms)
{
	int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0)
		return -errno;
	int r = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : -errno;
	if (r == -EINPROGRESS) {
		struct pollfd p = {fd, POLLOUT, 0};
		int n = poll(&p, 1, (int)timeout_ms);
		int err = 0;
		socklen_t el = sizeof(err);
		if (n == 0)
			r = -ETIMEDOUT;
		else if (n < 0)
			r = -errno;
		else
			r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 ? -err : -errno;
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int
kvnet_connect(const char *addr, unsigned timeout_ms)
{
	struct addrinfo *ai;
	int r = resolve(addr, false, &ai);
	if (r < 0)
		return r;
	r = -EHOSTUNREACH;
	for (struct addrinfo *a = ai; a; a = a->ai_next)
		if ((r = connect_one(a, timeout_ms)) >= 0)
			break;
	freeaddrinfo(ai);
	return r;
}

int
kvnet_set_timeout(int fd, unsigned timeout_ms)
{
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return -errno;
	return 0;
}

static int
io_err(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
}

/* consume done bytes from the front of an iovec array */
static void
iov_advance(struct iovec **iovp, int *np, size_t done)
{
	struct iovec *iov = *iovp;
	int n = *np;
	while (done > 0 && n > 0) {
		size_t k = done < iov->iov_len ? done : iov->iov_len;
		iov->iov_base = (char *)iov->iov_base + k;
		iov->iov_len -= k;
		done -= k;
		if (iov->iov_len == 0)
			iov++, n--;
	}
	*iovp = iov;
	*np = n;
}

int
kvnet_readv_full(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		if (iov->iov_len == 0) {
			iov++, n--;
			continue;
		}
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)(n > 1024 ? 1024 : n)};
		ssize_t r = recvmsg(fd, &m, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return io_err();
		if (r == 0)
			return -ECONNRESET;
		iov_advance(&iov, &n, (size_t)r);
	}
	return 0;
}

int
kvnet_read_full(int fd, void *buf, size_t len)
{
	struct iovec v = {buf, len};
	return kvnet_readv_full(fd, &v, 1);
}

int
kvnet_writev_full(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		if (iov->iov_len == 0) {
			iov++, n--;
			continue;
		}
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)(n > 1024 ? 1024 : n)};
		ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return io_err();
		iov_advance(&iov, &n, (size_t)r);
	}
	return 0;
}

int
kvnet_write_full(int fd, const void *buf, size_t len)
{
	struct iovec v = {(void *)buf, len};
	return kvnet_writev_full(fd, &v, 1);
}

int
kvnet_skip(int fd, size_t len)
{
	char buf[16384];
	while (len > 0) {
		size_t k = len < sizeof(buf) ? len : sizeof(buf);
		int r = kvnet_read_full(fd, buf, k);
		if (r < 0)
			return r;
		len -= k;
	}
	return 0;
}
