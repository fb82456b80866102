/* node/client.c - one blocking connection to one peer's node plane (node.h). Library grade:
 * no logging, no abort, -errno results. */
#include "node/node.h"
#include "node/ucx_int.h"

#include "io/io.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct ol_node_client {
	char addr[256];
	char secret[256];
	unsigned self_id;
	bool ucx;		     /* addr is "ucx://host:port": the peer's plane is on UCX */
	int fd;			     /* the TCP connection, or -1 */
	struct ol_node_ucx *ux;	     /* the UCX one, or NULL */
	struct ol_node_mac *tx, *rx; /* our frames' MAC (client to server), the peer's */
	uint64_t wseq, rseq, next_call, credit;
	struct ol_node_peer_info info;
	uint8_t *rbuf, *sbuf; /* one frame each: OL_NODE_HDR + max_payload + OL_NODE_MAC (a frame
				 we build goes out from sbuf + OL_NODE_HDR, its header beside it) */
	uint8_t *ebuf;	      /* an encrypted payload (ol_node_encrypt), max_payload; lazy */
	size_t cap;
	uint64_t end_ms;  /* the current call's deadline */
	unsigned pending; /* calls sent with ol_node_send and not yet answered */
	struct ol_node_client_stats st;
	/* ol_node_client_abort: set once from any thread; fd_mu orders its shutdown of fd (or
	 * abort of ux) against this client's own close of it (a closed number may be reused at
	 * once; a closed endpoint is freed) */
	_Atomic bool aborted;
	pthread_mutex_t fd_mu;
};

int
ol_node_client_new(const char *addr, const char *secret, unsigned self_id,
		   struct ol_node_client **out)
{
	*out = NULL;
	if (!secret[0] || strlen(addr) >= 256 || strlen(secret) >= 256)
		return -EINVAL;
	bool ucx = strncmp(addr, OL_NODE_UCX_SCHEME, strlen(OL_NODE_UCX_SCHEME)) == 0;
	if (ucx && !ol_node_ucx_built())
		return -EPROTONOSUPPORT;
	struct ol_node_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->fd_mu, NULL);
	if (ol_node_mac_new(&c->tx) || ol_node_mac_new(&c->rx)) {
		ol_node_client_free(c);
		return -ENOMEM;
	}
	memcpy(c->addr, addr, strlen(addr) + 1);
	memcpy(c->secret, secret, strlen(secret) + 1);
	c->self_id = self_id;
	c->ucx = ucx;
	c->fd = -1;
	*out = c;
	return 0;
}

static void
drop(struct ol_node_client *c)
{
	pthread_mutex_lock(&c->fd_mu);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	struct ol_node_ucx *ux = c->ux; /* out of the abort's reach before it is closed */
	c->ux = NULL;
	pthread_mutex_unlock(&c->fd_mu);
	ol_node_ucx_close(ux); /* before the buffers: a cancelled request may point there */
	free(c->rbuf);
	free(c->sbuf);
	free(c->ebuf);
	c->rbuf = c->sbuf = c->ebuf = NULL;
	c->pending = 0;
}

void
ol_node_client_free(struct ol_node_client *c)
{
	if (!c)
		return;
	drop(c);
	ol_node_mac_free(c->tx);
	ol_node_mac_free(c->rx);
	pthread_mutex_destroy(&c->fd_mu);
	free(c);
}

void
ol_node_client_abort(struct ol_node_client *c)
{
	atomic_store(&c->aborted, true);
	pthread_mutex_lock(&c->fd_mu);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR); /* a blocked send or recv of the call returns now */
	if (c->ux)
		ol_node_ucx_abort(c->ux); /* the same for a UCX endpoint */
	pthread_mutex_unlock(&c->fd_mu);
}

void
ol_node_client_stats(const struct ol_node_client *c, struct ol_node_client_stats *out)
{
	*out = c->st;
}

static int
left_ms(const struct ol_node_client *c)
{
	uint64_t now = ol_io_now_ms();
	return now >= c->end_ms ? 0 : (int)(c->end_ms - now);
}

static int
read_exact(struct ol_node_client *c, uint8_t *p, size_t n)
{
	while (n) {
		int t = left_ms(c);
		if (!t)
			return -ETIMEDOUT;
		ssize_t r = c->ux ? ol_node_ucx_read(c->ux, p, n, t) : ol_io_read(c->fd, p, n, t);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return (int)r;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Send one frame whose payload is the niov (at most SEND_IOV) buffers of iov, h->len bytes
 * in all, read where they lie: header, payload and MAC go out in one writev. */
#define SEND_IOV 14
static int
send_frame(struct ol_node_client *c, struct ol_node_hdr *h, const struct iovec *iov, int niov)
{
	int t = left_ms(c);
	if (!t)
		return -ETIMEDOUT;
	uint8_t hdr[OL_NODE_HDR], tag[OL_NODE_MAC];
	h->seq = c->wseq++;
	h->deadline_ms = (uint32_t)t;
	if (ol_node_encrypting()) { /* a HELLO too, but for its nonce (ol_node_mac_seal_enc) */
		h->flags |= OL_NODE_F_ENC;
		ol_node_hdr_encode(h, hdr);
		if (!c->ebuf && !(c->ebuf = malloc(c->cap - OL_NODE_HDR - OL_NODE_MAC)))
			return -ENOMEM;
		if (niov > SEND_IOV || ol_node_mac_seal_enc(c->tx, hdr, iov, niov, c->ebuf, tag))
			return -EIO;
		struct iovec v[3] = {{hdr, sizeof(hdr)}, {c->ebuf, h->len}, {tag, sizeof(tag)}};
		return c->ux ? ol_node_ucx_writev(c->ux, v, 3, t)
			     : ol_io_writev_all(c->fd, v, 3, t);
	}
	ol_node_hdr_encode(h, hdr);
	if (niov > SEND_IOV || ol_node_mac_seal(c->tx, hdr, iov, niov, tag))
		return -EIO;
	struct iovec v[SEND_IOV + 2];
	v[0] = (struct iovec){hdr, sizeof(hdr)};
	for (int i = 0; i < niov; i++)
		v[i + 1] = iov[i];
	v[niov + 1] = (struct iovec){tag, sizeof(tag)};
	return c->ux ? ol_node_ucx_writev(c->ux, v, niov + 2, t)
		     : ol_io_writev_all(c->fd, v, niov + 2, t);
}

/* Send the frame whose payload (h->len bytes) was built at sbuf + OL_NODE_HDR. */
static int
send_built(struct ol_node_client *c, struct ol_node_hdr *h)
{
	struct iovec iov = {c->sbuf + OL_NODE_HDR, h->len};
	return send_frame(c, h, &iov, 1);
}

/* Read the next frame from the peer into rbuf; check MAC and sequence; take its credit. */
static int
recv_frame(struct ol_node_client *c, struct ol_node_hdr *h)
{
	int rc = read_exact(c, c->rbuf, OL_NODE_HDR);
	if (rc)
		return rc;
	ssize_t n = ol_node_frame_parse(c->rbuf, OL_NODE_HDR,
					(uint32_t)(c->cap - OL_NODE_HDR - OL_NODE_MAC), h);
	if (n < 0 || !(h->flags & OL_NODE_F_REPLY))
		return n == -EPROTONOSUPPORT ? -EPROTONOSUPPORT : -EPROTO;
	rc = read_exact(c, c->rbuf + OL_NODE_HDR, h->len + OL_NODE_MAC);
	if (rc)
		return rc;
	if (h->seq != c->rseq || ol_node_frame_open(c->rx, c->rbuf, h))
		return -EBADMSG;
	c->rseq++;
	c->credit += h->credit;
	return 0;
}

/* Wait for the reply of call_id, taking credit frames on the way. */
static int
recv_reply(struct ol_node_client *c, uint64_t call_id, struct ol_node_hdr *h)
{
	for (;;) {
		int rc = recv_frame(c, h);
		if (rc)
			return rc;
		if (h->op == OL_NODE_CREDIT)
			continue;
		return h->call_id == call_id ? 0 : -EPROTO;
	}
}

static int
parse_hello(struct ol_node_client *c, const struct ol_node_hdr *h, const uint8_t *cnonce, bool enc)
{
	struct ol_node_rd r = {c->rbuf + OL_NODE_HDR, h->len, false};
	const uint8_t *snonce = ol_node_getbytes(&r, OL_NODE_NONCE);
	uint8_t key[OL_NODE_KEY];
	int rc = !snonce || ol_node_kdf(c->secret, cnonce, snonce, key) ||
			 ol_node_mac_key(c->rx, key, OL_NODE_S2C) ||
			 ol_node_mac_key(c->tx, key, OL_NODE_C2S)
		     ? -EPROTO
		     : 0;
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	/* encrypted as our HELLO was: the flag is under the tag, so no one strips it */
	if (((h->flags & OL_NODE_F_ENC) != 0) != enc ||
	    (enc ? ol_node_mac_open(c->rx, c->rbuf, h) : ol_node_mac_check(c->rx, c->rbuf, h)))
		return -EBADMSG;
	struct ol_node_peer_info *in = &c->info;
	in->node_id = ol_node_get32(&r);
	in->window = ol_node_get32(&r);
	in->max_payload = ol_node_get32(&r);
	in->n_drives = ol_node_get16(&r);
	if (in->n_drives > OL_NODE_MAX_DRIVES)
		return -EPROTO;
	for (unsigned i = 0; i < in->n_drives; i++) {
		ol_node_getstr(&r, in->drives[i].path, sizeof(in->drives[i].path));
		ol_node_getstr(&r, in->drives[i].uuid, sizeof(in->drives[i].uuid));
	}
	if (r.err || in->max_payload < 4096 || in->max_payload > (64u << 20) ||
	    in->window < in->max_payload + OL_NODE_HDR + OL_NODE_MAC)
		return -EPROTO;
	return 0;
}

static int
do_hello(struct ol_node_client *c)
{
	uint8_t cnonce[OL_NODE_NONCE], zero[OL_NODE_NONCE] = {0}, hkey[OL_NODE_KEY];
	int rc = RAND_bytes(cnonce, sizeof(cnonce)) != 1 ||
			 ol_node_kdf(c->secret, cnonce, zero, hkey) ||
			 ol_node_mac_key(c->tx, hkey, OL_NODE_C2S)
		     ? -EIO
		     : 0;
	OPENSSL_cleanse(hkey, sizeof(hkey));
	if (rc)
		return rc;
	struct ol_node_wr w = {c->sbuf + OL_NODE_HDR, 0, 64, false};
	ol_node_putbytes(&w, cnonce, sizeof(cnonce));
	ol_node_put32(&w, c->self_id);
	bool enc = ol_node_encrypting();
	struct ol_node_hdr h = {.op = OL_NODE_HELLO, .call_id = 0, .len = (uint32_t)w.n};
	rc = send_built(c, &h); /* with OL_NODE_F_ENC when enc */
	if (rc)
		return rc;
	rc = read_exact(c, c->rbuf, OL_NODE_HDR);
	if (rc)
		return rc;
	/* the reply may be large (drive list) but never over the 64 KiB this buffer has now */
	ssize_t n =
	    ol_node_frame_parse(c->rbuf, OL_NODE_HDR, 65536 - OL_NODE_HDR - OL_NODE_MAC, &h);
	if (n == -EPROTONOSUPPORT)
		return -EPROTONOSUPPORT;
	if (n < 0 || h.op != OL_NODE_HELLO || !(h.flags & OL_NODE_F_REPLY) || h.seq != 0)
		return -EPROTO;
	rc = read_exact(c, c->rbuf + OL_NODE_HDR, h.len + OL_NODE_MAC);
	if (rc)
		return rc;
	if (h.status < 0) /* a refusal cannot be authenticated: we share no key with the peer */
		return h.status == -EACCES ? -EACCES : -EPROTO;
	rc = parse_hello(c, &h, cnonce, enc);
	if (rc)
		return rc;
	c->rseq = 1;
	c->credit = c->info.window;
	return 0;
}

static bool
live(const struct ol_node_client *c)
{
	return c->fd >= 0 || c->ux;
}

/* The byte stream to the peer: a TCP connection, or a UCX endpoint. */
static int
open_stream(struct ol_node_client *c, int t)
{
	if (c->ucx) {
		struct ol_node_ucx *ux;
		int rc = ol_node_ucx_connect(c->addr + strlen(OL_NODE_UCX_SCHEME), &ux);
		if (rc)
			return rc;
		pthread_mutex_lock(&c->fd_mu);
		if (!atomic_load(&c->aborted))
			c->ux = ux;
		pthread_mutex_unlock(&c->fd_mu);
		if (c->ux)
			return 0;
		ol_node_ucx_close(ux); /* aborted while it connected */
		return -ECANCELED;
	}
	int fd = ol_io_connect(c->addr, t), rc = 0;
	if (fd < 0)
		return fd == -EINPROGRESS ? -ETIMEDOUT : fd;
	pthread_mutex_lock(&c->fd_mu);
	if (atomic_load(&c->aborted)) { /* too late to shut down by the abort: not used */
		close(fd);
		rc = -ECANCELED;
	} else {
		c->fd = fd;
	}
	pthread_mutex_unlock(&c->fd_mu);
	return rc;
}

static int
ensure_conn(struct ol_node_client *c)
{
	if (live(c))
		return 0;
	int t = left_ms(c);
	if (!t)
		return -ETIMEDOUT;
	c->cap = 65536;
	c->rbuf = malloc(c->cap);
	c->sbuf = malloc(c->cap);
	if (!c->rbuf || !c->sbuf) {
		drop(c);
		return -ENOMEM;
	}
	int rc = open_stream(c, t);
	if (rc) {
		drop(c);
		return rc;
	}
	c->wseq = 0;
	c->st.connects++;
	rc = do_hello(c);
	size_t cap = OL_NODE_HDR + (size_t)c->info.max_payload + OL_NODE_MAC;
	uint8_t *r2 = rc ? NULL : realloc(c->rbuf, cap);
	if (r2)
		c->rbuf = r2;
	uint8_t *s2 = r2 ? realloc(c->sbuf, cap) : NULL;
	if (s2)
		c->sbuf = s2;
	if (!rc && (!r2 || !s2))
		rc = -ENOMEM;
	if (rc) {
		drop(c);
		return rc;
	}
	c->cap = cap;
	free(c->ebuf); /* sized for the HELLO's 64 KiB: made again at the peer's frame size */
	c->ebuf = NULL;
	return 0;
}

/* Start a call: deadline, connection. */
static int
begin(struct ol_node_client *c, int deadline_ms)
{
	if (deadline_ms <= 0)
		return -EINVAL;
	if (atomic_load(&c->aborted))
		return -ECANCELED;
	c->end_ms = ol_io_now_ms() + (uint64_t)deadline_ms;
	return ensure_conn(c);
}

/* Start a call of op: the fault hook's hold (before the deadline runs), the deadline and the
 * connection, then the hook's delay (within the deadline: a delay past it times the call out). */
static int
start(struct ol_node_client *c, uint8_t op, int deadline_ms)
{
	ol_node_fault_hold(op);
	int rc = begin(c, deadline_ms);
	int64_t ms = rc ? 0 : ol_node_fault_delay(c->addr, op);
	if (ms > 0) {
		uint64_t now = ol_io_now_ms();
		int64_t left = c->end_ms > now ? (int64_t)(c->end_ms - now) : 0;
		int64_t nap = ms < left ? ms : left, end = (int64_t)now + nap;
		/* in slices, so that an abort ends the delay as it ends a blocked recv */
		while (!atomic_load(&c->aborted) && (int64_t)ol_io_now_ms() < end) {
			struct timespec ts = {0, 10 * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (atomic_load(&c->aborted))
			rc = -ECANCELED;
		else if (ms >= left)
			rc = -ETIMEDOUT;
	}
	return rc;
}

/* A failure that leaves the stream in an unknown state closes the connection. */
static int
end_call(struct ol_node_client *c, int rc)
{
	if (rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EPIPE || rc == -EPROTO ||
	    rc == -EBADMSG || rc == -ENOMEM || rc == -ECANCELED)
		drop(c);
	return rc;
}

/* Take credit for a frame of `total` bytes, reading grants while short. A reply to call_id
 * that arrives meanwhile (the peer failed the call early) ends the wait with its status. */
static int
take_credit(struct ol_node_client *c, size_t total, uint64_t call_id, bool *answered,
	    struct ol_node_hdr *rh)
{
	if (c->credit < total)
		c->st.credit_waits++;
	while (c->credit < total) {
		int rc = recv_frame(c, rh);
		if (rc)
			return rc;
		if (rh->op == OL_NODE_CREDIT)
			continue;
		if (rh->call_id != call_id)
			return -EPROTO;
		*answered = true;
		return 0;
	}
	c->credit -= total;
	uint64_t out = c->info.window - c->credit;
	if (out > c->st.max_outstanding)
		c->st.max_outstanding = out;
	return 0;
}

/* Send a request (payload: the iov buffers, len bytes) and wait for its one reply; *replied
 * (may be NULL) says whether the result is the peer's status, its reply frame in rh. */
static int
call_iov(struct ol_node_client *c, uint8_t op, const struct iovec *iov, int niov, size_t len,
	 struct ol_node_hdr *rh, bool *replied)
{
	struct ol_node_hdr h = {.op = op, .call_id = ++c->next_call, .len = (uint32_t)len};
	bool answered = false;
	int rc = take_credit(c, OL_NODE_HDR + len + OL_NODE_MAC, h.call_id, &answered, rh);
	if (!rc && answered)
		rc = -EPROTO;
	if (!rc)
		rc = send_frame(c, &h, iov, niov);
	if (!rc)
		rc = recv_reply(c, h.call_id, rh);
	if (!rc && (rh->op != op || (rh->flags & OL_NODE_F_MORE)))
		rc = -EPROTO;
	if (replied)
		*replied = !rc;
	if (!rc)
		rc = rh->status;
	return rc;
}

/* The same with the payload built in sbuf. */
static int
simple_call(struct ol_node_client *c, uint8_t op, size_t len, struct ol_node_hdr *rh)
{
	struct iovec iov = {c->sbuf + OL_NODE_HDR, len};
	return call_iov(c, op, &iov, 1, len, rh, NULL);
}

/* The payload of ol_node_call / ol_node_send: the caller's buffers where they lie (copied
 * into sbuf, *one, only when there are more than SEND_IOV of them). 0 or -EMSGSIZE (over the
 * peer's max_payload). */
static int
req_payload(struct ol_node_client *c, const struct iovec *iov, int niov, struct iovec *one,
	    const struct iovec **out, int *nout, size_t *len)
{
	size_t maxp = c->cap - OL_NODE_HDR - OL_NODE_MAC, n = 0;
	for (int i = 0; i < niov; i++) {
		if (iov[i].iov_len > maxp - n)
			return -EMSGSIZE;
		n += iov[i].iov_len;
	}
	*len = n;
	*out = iov;
	*nout = niov;
	if (niov <= SEND_IOV)
		return 0;
	struct ol_node_wr w = {c->sbuf + OL_NODE_HDR, 0, maxp, false};
	for (int i = 0; i < niov; i++)
		ol_node_putbytes(&w, iov[i].iov_base, iov[i].iov_len);
	*one = (struct iovec){c->sbuf + OL_NODE_HDR, n};
	*out = one;
	*nout = 1;
	return 0;
}

int
ol_node_hello(struct ol_node_client *c, int deadline_ms, struct ol_node_peer_info *out)
{
	int rc = begin(c, deadline_ms);
	if (!rc && out)
		*out = c->info;
	return end_call(c, rc);
}

int
ol_node_ping(struct ol_node_client *c, int deadline_ms, uint64_t *rtt_ns)
{
	int rc = start(c, OL_NODE_PING, deadline_ms);
	uint64_t t0 = ol_io_now_ns();
	struct ol_node_hdr rh;
	if (!rc)
		rc = simple_call(c, OL_NODE_PING, 0, &rh);
	if (!rc && rtt_ns)
		*rtt_ns = ol_io_now_ns() - t0;
	return end_call(c, rc);
}

static struct ol_node_wr
req_wr(struct ol_node_client *c, unsigned drive, const char *name)
{
	struct ol_node_wr w = {c->sbuf + OL_NODE_HDR, 0, c->cap - OL_NODE_HDR - OL_NODE_MAC, false};
	if (drive > 0xffff)
		w.err = true;
	ol_node_put16(&w, (uint16_t)drive);
	ol_node_putstr(&w, name);
	return w;
}

int
ol_node_stat(struct ol_node_client *c, unsigned drive, const char *name, int deadline_ms,
	     uint64_t *size)
{
	int rc = start(c, OL_NODE_STAT, deadline_ms);
	struct ol_node_hdr rh;
	if (rc)
		return end_call(c, rc);
	struct ol_node_wr w = req_wr(c, drive, name);
	rc = w.err ? -EINVAL : simple_call(c, OL_NODE_STAT, w.n, &rh);
	if (!rc) {
		struct ol_node_rd r = {c->rbuf + OL_NODE_HDR, rh.len, false};
		uint64_t sz = ol_node_get64(&r);
		rc = r.err ? -EPROTO : 0;
		if (size)
			*size = sz;
	}
	return end_call(c, rc);
}

int
ol_node_shard_rename(struct ol_node_client *c, unsigned drive, const char *from, const char *to,
		     int deadline_ms)
{
	int rc = start(c, OL_NODE_SHARD_RENAME, deadline_ms);
	struct ol_node_hdr rh;
	if (rc)
		return end_call(c, rc);
	struct ol_node_wr w = req_wr(c, drive, from);
	ol_node_putstr(&w, to);
	rc = w.err ? -EINVAL : simple_call(c, OL_NODE_SHARD_RENAME, w.n, &rh);
	return end_call(c, rc);
}

int
ol_node_shard_unlink(struct ol_node_client *c, unsigned drive, const char *name, int deadline_ms)
{
	int rc = start(c, OL_NODE_SHARD_UNLINK, deadline_ms);
	struct ol_node_hdr rh;
	if (rc)
		return end_call(c, rc);
	struct ol_node_wr w = req_wr(c, drive, name);
	rc = w.err ? -EINVAL : simple_call(c, OL_NODE_SHARD_UNLINK, w.n, &rh);
	return end_call(c, rc);
}

/* One SHARD_WRITE frame: the first carries drive and name before its data. Returns 1 when the
 * source is done (this was the last frame), 0 to go on, or -errno. */
static int
write_one(struct ol_node_client *c, uint64_t call_id, unsigned drive, const char *name,
	  ol_node_src_fn src, void *arg, bool first, uint64_t *sent, bool *answered,
	  struct ol_node_hdr *rh)
{
	size_t maxp = c->cap - OL_NODE_HDR - OL_NODE_MAC;
	struct ol_node_wr w = {c->sbuf + OL_NODE_HDR, 0, maxp, false};
	if (first)
		w = req_wr(c, drive, name);
	if (w.err)
		return -EINVAL;
	int rc = take_credit(c, c->cap, call_id, answered, rh); /* room for a full frame */
	if (rc || *answered)
		return rc;
	ssize_t n = src(arg, w.p + w.n, maxp - w.n);
	struct ol_node_hdr h = {.op = OL_NODE_SHARD_WRITE, .call_id = call_id};
	h.flags = (uint16_t)((first ? OL_NODE_F_FIRST : 0) | (n > 0 ? OL_NODE_F_MORE : 0));
	if (n < 0) /* tell the peer to drop the file; then report the source's error */
		h.status = (int32_t)n;
	h.len = (uint32_t)(w.n + (n > 0 ? (size_t)n : 0));
	/* give back the credit a short frame did not use */
	c->credit += c->cap - (OL_NODE_HDR + h.len + OL_NODE_MAC);
	rc = send_built(c, &h);
	if (rc)
		return rc;
	if (n > 0)
		*sent += (uint64_t)n;
	return n > 0 ? 0 : 1;
}

int
ol_node_shard_write(struct ol_node_client *c, unsigned drive, const char *name, ol_node_src_fn src,
		    void *arg, int deadline_ms, uint64_t *written)
{
	int rc = start(c, OL_NODE_SHARD_WRITE, deadline_ms);
	if (rc)
		return end_call(c, rc);
	uint64_t call_id = ++c->next_call, sent = 0;
	struct ol_node_hdr rh;
	bool answered = false, first = true;
	while (!rc) {
		rc = write_one(c, call_id, drive, name, src, arg, first, &sent, &answered, &rh);
		first = false;
		if (answered)
			break;
	}
	if (rc == 1)
		rc = recv_reply(c, call_id, &rh);
	if (!rc && (rh.op != OL_NODE_SHARD_WRITE || (rh.flags & OL_NODE_F_MORE)))
		rc = -EPROTO;
	if (!rc)
		rc = rh.status;
	if (!rc && written) {
		struct ol_node_rd r = {c->rbuf + OL_NODE_HDR, rh.len, false};
		*written = ol_node_get64(&r);
		rc = r.err ? -EPROTO : 0;
	}
	(void)sent;
	return end_call(c, rc);
}

int
ol_node_shard_read(struct ol_node_client *c, unsigned drive, const char *name, uint64_t off,
		   uint64_t len, ol_node_sink_fn sink, void *arg, int deadline_ms, uint64_t *got)
{
	uint64_t total = 0;
	int rc = start(c, OL_NODE_SHARD_READ, deadline_ms);
	if (rc)
		return end_call(c, rc);
	struct ol_node_wr w = req_wr(c, drive, name);
	ol_node_put64(&w, off);
	ol_node_put64(&w, len);
	if (w.err)
		return -EINVAL;
	struct ol_node_hdr h = {
	    .op = OL_NODE_SHARD_READ, .call_id = ++c->next_call, .len = (uint32_t)w.n};
	struct ol_node_hdr rh;
	bool answered = false;
	rc = take_credit(c, OL_NODE_HDR + w.n + OL_NODE_MAC, h.call_id, &answered, &rh);
	if (!rc && answered)
		rc = -EPROTO;
	if (!rc)
		rc = send_built(c, &h);
	for (bool more = true; !rc && more;) {
		rc = recv_reply(c, h.call_id, &rh);
		if (!rc && rh.op != OL_NODE_SHARD_READ)
			rc = -EPROTO;
		if (!rc)
			rc = rh.status;
		if (rc)
			break;
		int s = rh.len ? sink(arg, c->rbuf + OL_NODE_HDR, rh.len) : 0;
		if (s) { /* the rest of the stream would still come: drop the connection */
			drop(c);
			rc = s < 0 ? s : -EIO;
			break;
		}
		total += rh.len;
		more = rh.flags & OL_NODE_F_MORE;
	}
	if (got)
		*got = total;
	return end_call(c, rc);
}

uint32_t
ol_node_client_max_payload(const struct ol_node_client *c)
{
	return live(c) ? c->info.max_payload : 0;
}

int
ol_node_call(struct ol_node_client *c, uint8_t op, const struct iovec *iov, int niov,
	     int deadline_ms, const uint8_t **reply, size_t *rlen)
{
	struct ol_node_hdr rh;
	struct iovec one;
	const struct iovec *pv;
	int pn;
	size_t len;
	bool replied = false;
	*reply = NULL;
	*rlen = 0;
	int rc = start(c, op, deadline_ms);
	if (!rc)
		rc = req_payload(c, iov, niov, &one, &pv, &pn, &len);
	if (!rc)
		rc = call_iov(c, op, pv, pn, len, &rh, &replied);
	if (!replied) /* a local failure; the peer's status leaves the stream as it should be */
		return end_call(c, rc);
	*reply = c->rbuf + OL_NODE_HDR;
	*rlen = rh.len;
	return rc;
}

int
ol_node_send(struct ol_node_client *c, uint8_t op, const struct iovec *iov, int niov,
	     int deadline_ms, uint64_t *call_id)
{
	/* the first call of a pipeline sets the deadline of all of them (and only it may be held
	 * by the fault hook: the others' deadline already runs) */
	int rc = c->pending ? 0 : start(c, op, deadline_ms);
	if (rc)
		return end_call(c, rc);
	struct iovec one;
	const struct iovec *pv;
	int pn;
	size_t len;
	if (req_payload(c, iov, niov, &one, &pv, &pn, &len))
		return -EMSGSIZE; /* nothing sent: the stream is as it was */
	size_t total = OL_NODE_HDR + len + OL_NODE_MAC;
	if (c->credit < total && c->pending)
		return -EAGAIN; /* reading grants now could read an answer: collect first */
	struct ol_node_hdr h = {.op = op, .call_id = ++c->next_call, .len = (uint32_t)len}, rh;
	bool answered = false;
	rc = take_credit(c, total, h.call_id, &answered, &rh);
	if (!rc && answered)
		rc = -EPROTO;
	if (!rc)
		rc = send_frame(c, &h, pv, pn);
	if (rc)
		return end_call(c, rc == -EAGAIN ? -EPROTO : rc);
	c->pending++;
	*call_id = h.call_id;
	return 0;
}

int
ol_node_recv(struct ol_node_client *c, uint64_t call_id, const uint8_t **reply, size_t *rlen)
{
	struct ol_node_hdr rh;
	if (!c->pending || !live(c))
		return -EINVAL;
	int rc = recv_reply(c, call_id, &rh);
	if (!rc && (rh.flags & OL_NODE_F_MORE))
		rc = -EPROTO;
	if (rc)
		return end_call(c, rc);
	c->pending--;
	if (rh.status)
		return rh.status;
	if (reply) {
		*reply = c->rbuf + OL_NODE_HDR;
		*rlen = rh.len;
	}
	return 0;
}

unsigned
ol_node_client_pending(const struct ol_node_client *c)
{
	return c->pending;
}
