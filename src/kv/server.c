/* kv/server.c - the KV protocol server: one acceptor thread, one thread per connection. */
#include "kv/kv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "kv/kv_metrics.h"
#include "kv/engine.h"
#include "kv/net.h"
#include "kv/proto.h"
#include "openlake/openlake.h"

/* Once a frame has started, each read or write must progress within this (slow or stuck
 * peers are closed; idle connections between frames are kept). */
#define OL_KV_FRAME_TIMEOUT_MS 10000
/* One thread per connection: past this many, new connections are refused (closed). */
#define OL_KV_MAX_CONNS 4096

struct conn;

struct ol_kv_server {
	struct ol_kve *eng;
	int lfd;
	unsigned port;
	pthread_t acc;
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct conn *conns;
	unsigned n_conns;
	char host_id[64];
	struct ol_kvp_limits lim;
};

struct pinref {
	uint64_t off, seq;
};

struct conn {
	struct ol_kv_server *s;
	struct conn *prev, *next;
	int fd;
	char peer[64];
	uint8_t ns[16];
	bool local;
	struct pinref *pins; /* LOOKUP pins and ALLOC reservations held by this connection */
	size_t n_pins, cap_pins;
	uint8_t *ents;	  /* request entries */
	uint8_t *reps;	  /* reply entries */
	uint8_t rb[8192]; /* bytes received ahead (a header and its entries come in one recv) */
	size_t rb_off, rb_len;
	uint8_t pend[OL_KVP_HDR]; /* a GET reply header, sent with the first entry */
	bool has_pend;
};

/* ---- buffered reads ---- */

static int
conn_read(struct conn *c, void *dst, size_t n)
{
	size_t take = c->rb_len - c->rb_off < n ? c->rb_len - c->rb_off : n;
	memcpy(dst, c->rb + c->rb_off, take);
	c->rb_off += take;
	return take == n ? 0 : kvnet_read_full(c->fd, (uint8_t *)dst + take, n - take);
}

static int
conn_skip(struct conn *c, size_t n)
{
	size_t take = c->rb_len - c->rb_off < n ? c->rb_len - c->rb_off : n;
	c->rb_off += take;
	return take == n ? 0 : kvnet_skip(c->fd, n - take);
}

/* The next frame header. Waits idle as long as the client likes (the frame timeout fires
 * only once a header has started). 0 or -errno (-ECONNRESET at EOF). */
static int
conn_read_hdr(struct conn *c, uint8_t hb[OL_KVP_HDR])
{
	memmove(c->rb, c->rb + c->rb_off, c->rb_len - c->rb_off);
	c->rb_len -= c->rb_off;
	c->rb_off = 0;
	while (c->rb_len < OL_KVP_HDR) {
		ssize_t r = recv(c->fd, c->rb + c->rb_len, sizeof(c->rb) - c->rb_len, 0);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && c->rb_len == 0)
			continue; /* idle between frames */
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		c->rb_len += (size_t)r;
	}
	memcpy(hb, c->rb, OL_KVP_HDR);
	c->rb_off = OL_KVP_HDR;
	return 0;
}

/* ---- per-connection pin list ---- */

static void
pin_add(struct conn *c, uint64_t off, uint64_t seq)
{
	if (c->n_pins == c->cap_pins) {
		c->cap_pins = c->cap_pins ? c->cap_pins * 2 : 64;
		c->pins = ol_xrealloc(c->pins, c->cap_pins * sizeof(*c->pins));
	}
	c->pins[c->n_pins++] = (struct pinref){off, seq};
}

static bool
pin_take(struct conn *c, uint64_t off, uint64_t seq)
{
	for (size_t i = c->n_pins; i-- > 0;) {
		if (c->pins[i].off == off && c->pins[i].seq == seq) {
			c->pins[i] = c->pins[--c->n_pins];
			return true;
		}
	}
	return false;
}

/* ---- replies ---- */

static int
send_reply(struct conn *c, const struct ol_kvp_hdr *rq, int32_t status, uint32_t count,
	   const void *body, size_t body_len)
{
	struct ol_kvp_hdr h = {OL_KVP_MAGIC, OL_KVP_VERSION, rq->op,	 OL_KVP_F_REPLY,
			       count,	     status,	     rq->req_id, body_len};
	uint8_t hb[OL_KVP_HDR];
	ol_kvp_hdr_encode(hb, &h);
	struct iovec v[2] = {{hb, sizeof(hb)}, {(void *)body, body_len}};
	return kvnet_writev_full(c->fd, v, body_len ? 2 : 1);
}

static void
rep_put(struct conn *c, uint32_t i, int32_t status, uint64_t len, uint64_t off, uint64_t seq)
{
	struct ol_kvp_rep_ent r = {status, 0, len, off, seq};
	ol_kvp_rep_ent_encode(c->reps + (size_t)i * OL_KVP_REP_ENT, &r);
}

static void
ent_key(struct conn *c, const struct ol_kvp_req_ent *e, struct ol_kvk *k)
{
	ol_kve_key(k, e->key, c->ns);
}

/* ---- handlers: return 0, or -errno to close the connection ---- */

static int
read_host_id(char *buf, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		n = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return (int)n;
}

static int
do_hello(struct conn *c, const struct ol_kvp_hdr *h)
{
	uint8_t body[OL_KVP_MAX_NS + OL_KVP_MAX_HOST + 16], out[512];
	struct ol_kvp_hello hi;
	if (h->body_len > sizeof(body))
		return -EMSGSIZE;
	int r = conn_read(c, body, h->body_len);
	if (r < 0)
		return r;
	if (ol_kvp_hello_decode(body, h->body_len, &hi) < 0)
		return -EBADMSG;
	ol_kve_ns_hash(hi.ns, hi.ns_len, c->ns);
	const char *name = ol_kve_shm_name(c->s->eng);
	size_t hl = strlen(c->s->host_id);
	c->local = (hi.flags & OL_KVP_HELLO_LOCAL) && name[0] && hl > 0 && hi.host_len == hl &&
		   memcmp(hi.host, c->s->host_id, hl) == 0;
	struct ol_kvp_welcome w = {c->local ? OL_KVP_HELLO_LOCAL : 0,
				   c->s->lim.max_batch,
				   ol_kve_max_block(c->s->eng),
				   ol_kve_shm_size(c->s->eng),
				   ol_kve_epoch(c->s->eng),
				   0,
				   OL_KVE_UNIT,
				   name,
				   (uint16_t)strlen(name)};
	int n = ol_kvp_welcome_encode(out, sizeof(out), &w);
	if (n < 0)
		return n;
	return send_reply(c, h, 0, 0, out, (size_t)n);
}

static int
put_one(struct conn *c, const struct ol_kvp_req_ent *e, int32_t *status)
{
	struct ol_kvk k;
	struct ol_kve_slot sl;
	ent_key(c, e, &k);
	*status = ol_kve_alloc(c->s->eng, &k, e->len, &sl);
	if (*status != OL_KV_OK)
		return conn_skip(c, e->len);
	int r = conn_read(c, sl.ptr, e->len);
	if (r < 0) {
		ol_kve_release(c->s->eng, sl.off, sl.seq);
		return r;
	}
	*status = ol_kve_commit(c->s->eng, &k, sl.off, sl.seq, e->len);
	return 0;
}

static int
do_put(struct conn *c, const struct ol_kvp_hdr *h)
{
	uint64_t left = h->body_len;
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		int32_t st;
		int r;
		if (left < OL_KVP_REQ_ENT)
			return -EMSGSIZE;
		if ((r = conn_read(c, c->ents, OL_KVP_REQ_ENT)) < 0)
			return r;
		left -= OL_KVP_REQ_ENT;
		ol_kvp_req_ent_decode(c->ents, &e);
		if (ol_kvp_check_put_ent(&e, left, &c->s->lim) < 0)
			return -EMSGSIZE;
		left -= e.len;
		if ((r = put_one(c, &e, &st)) < 0)
			return r;
		rep_put(c, i, st, e.len, 0, 0);
	}
	if (left != 0)
		return -EMSGSIZE;
	return send_reply(c, h, 0, h->count, c->reps, (size_t)h->count * OL_KVP_REP_ENT);
}

static int
read_ents(struct conn *c, const struct ol_kvp_hdr *h)
{
	return conn_read(c, c->ents, (size_t)h->count * OL_KVP_REQ_ENT);
}

static int
get_one(struct conn *c, const struct ol_kvp_req_ent *e)
{
	struct ol_kvk k;
	struct ol_kve_slot sl;
	uint8_t rb[OL_KVP_REP_ENT];
	ent_key(c, e, &k);
	int st = ol_kve_pin(c->s->eng, &k, false, &sl);
	bool pinned = st == OL_KV_OK && sl.off != OL_KVE_NOOFF;
	if (st == OL_KV_OK && sl.len > e->len)
		st = OL_KV_TRUNCATED;
	struct ol_kvp_rep_ent re = {st, 0, st == OL_KV_MISS || st == OL_KV_CORRUPT ? 0 : sl.len, 0,
				    0};
	ol_kvp_rep_ent_encode(rb, &re);
	struct iovec v[3] = {{c->pend, c->has_pend ? OL_KVP_HDR : 0},
			     {rb, sizeof(rb)},
			     {sl.ptr, st == OL_KV_OK ? sl.len : 0}};
	int r = kvnet_writev_full(c->fd, v, st == OL_KV_OK ? 3 : 2);
	c->has_pend = false;
	if (pinned)
		ol_kve_release(c->s->eng, sl.off, sl.seq);
	return r;
}

static int
do_get(struct conn *c, const struct ol_kvp_hdr *h)
{
	int r = read_ents(c, h);
	if (r < 0)
		return r;
	if (h->count == 0)
		return send_reply(c, h, 0, 0, NULL, 0);
	struct ol_kvp_hdr rh = {
	    OL_KVP_MAGIC, OL_KVP_VERSION, h->op, OL_KVP_F_REPLY, h->count, 0, h->req_id, 0};
	ol_kvp_hdr_encode(c->pend, &rh); /* sent in one writev with the first entry */
	c->has_pend = true;
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		ol_kvp_req_ent_decode(c->ents + (size_t)i * OL_KVP_REQ_ENT, &e);
		if ((r = get_one(c, &e)) < 0)
			return r;
	}
	return 0;
}

static int
do_simple(struct conn *c, const struct ol_kvp_hdr *h)
{
	int r = read_ents(c, h);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		struct ol_kvk k;
		struct ol_kve_slot sl = {0};
		uint64_t len = 0;
		int32_t st;
		ol_kvp_req_ent_decode(c->ents + (size_t)i * OL_KVP_REQ_ENT, &e);
		ent_key(c, &e, &k);
		switch (h->op) {
		case OL_KVP_EXISTS:
			st = ol_kve_exists(c->s->eng, &k, &len);
			break;
		case OL_KVP_DELETE:
			st = ol_kve_delete(c->s->eng, &k);
			break;
		case OL_KVP_ALLOC:
			st = ol_kve_alloc(c->s->eng, &k, e.len, &sl);
			if (st == OL_KV_OK)
				pin_add(c, sl.off, sl.seq);
			len = e.len;
			break;
		case OL_KVP_LOOKUP:
			st = ol_kve_pin(c->s->eng, &k, true, &sl);
			if (st == OL_KV_OK)
				pin_add(c, sl.off, sl.seq);
			len = sl.len;
			break;
		default: /* COMMIT */
			st = pin_take(c, e.off, e.seq)
				 ? ol_kve_commit(c->s->eng, &k, e.off, e.seq, e.len)
				 : OL_KV_ERROR;
			len = e.len;
			break;
		}
		rep_put(c, i, st, len, sl.off, sl.seq);
	}
	return send_reply(c, h, 0, h->count, c->reps, (size_t)h->count * OL_KVP_REP_ENT);
}

static int
do_release(struct conn *c, const struct ol_kvp_hdr *h)
{
	int r = read_ents(c, h);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		ol_kvp_req_ent_decode(c->ents + (size_t)i * OL_KVP_REQ_ENT, &e);
		bool ok = pin_take(c, e.off, e.seq);
		if (ok)
			ol_kve_release(c->s->eng, e.off, e.seq);
		rep_put(c, i, ok ? OL_KV_OK : OL_KV_MISS, 0, 0, 0);
	}
	if (h->flags & OL_KVP_F_NOREPLY)
		return 0;
	return send_reply(c, h, 0, h->count, c->reps, (size_t)h->count * OL_KVP_REP_ENT);
}

static int
do_stats(struct conn *c, const struct ol_kvp_hdr *h)
{
	char buf[4096];
	int r = h->body_len ? conn_skip(c, h->body_len) : 0;
	if (r < 0)
		return r;
	int n = ol_kve_stats_json(c->s->eng, buf, sizeof(buf) - 64);
	if (n < 0)
		return n;
	pthread_mutex_lock(&c->s->mu);
	unsigned nc = c->s->n_conns;
	pthread_mutex_unlock(&c->s->mu);
	n--; /* reopen the object to add server fields */
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, ",\"connections\":%u,\"port\":%u}", nc,
		      c->s->port);
	return send_reply(c, h, 0, 0, buf, (size_t)n);
}

static int
dispatch(struct conn *c, const struct ol_kvp_hdr *h)
{
	switch (h->op) {
	case OL_KVP_HELLO:
		return do_hello(c, h);
	case OL_KVP_PUT:
		return do_put(c, h);
	case OL_KVP_GET:
		return do_get(c, h);
	case OL_KVP_STATS:
		return do_stats(c, h);
	case OL_KVP_RELEASE:
		return do_release(c, h);
	case OL_KVP_ALLOC:
	case OL_KVP_COMMIT:
	case OL_KVP_LOOKUP:
		if (!c->local)
			return -EPERM;
		return do_simple(c, h);
	default:
		return do_simple(c, h);
	}
}

/* ---- connection threads ---- */

static void
conn_close(struct conn *c)
{
	struct ol_kv_server *s = c->s;
	for (size_t i = 0; i < c->n_pins; i++)
		ol_kve_release(s->eng, c->pins[i].off, c->pins[i].seq);
	close(c->fd);
	pthread_mutex_lock(&s->mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	free(c->pins);
	free(c->ents);
	free(c->reps);
	free(c);
}

static const char *
why(int r)
{
	switch (r) {
	case -EBADMSG:
		return "bad magic or malformed body";
	case -EPROTONOSUPPORT:
		return "unsupported protocol version";
	case -EMSGSIZE:
		return "frame or entry too large / lengths inconsistent";
	case -EINVAL:
		return "bad opcode, flags or count";
	case -EPERM:
		return "shared-memory op without a granted local HELLO";
	default:
		return strerror(-r);
	}
}

static void *
conn_main(void *arg)
{
	struct conn *c = arg;
	uint8_t hb[OL_KVP_HDR];
	kvnet_set_timeout(c->fd, OL_KV_FRAME_TIMEOUT_MS);
	for (;;) {
		struct ol_kvp_hdr h;
		int r = conn_read_hdr(c, hb);
		if (r < 0)
			break; /* peer closed or server stopping */
		if ((r = ol_kvp_hdr_decode(hb, sizeof(hb), &h)) > 0)
			r = ol_kvp_check_req(&h, &c->s->lim);
		if (r == 0)
			r = dispatch(c, &h);
		if (r < 0) {
			if (r != -ECONNRESET && r != -EPIPE && !atomic_load(&c->s->stop))
				ol_warn("kv: closing connection from %s: %s", c->peer, why(r));
			break;
		}
	}
	conn_close(c);
	return NULL;
}

static void
conn_start(struct ol_kv_server *s, int fd)
{
	struct conn *c = ol_xcalloc(1, sizeof(*c));
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->s = s;
	c->fd = fd;
	c->ents = ol_xmalloc((size_t)OL_KVP_MAX_BATCH * OL_KVP_REQ_ENT);
	c->reps = ol_xmalloc((size_t)OL_KVP_MAX_BATCH * OL_KVP_REP_ENT);
	ol_kve_ns_hash("", 0, c->ns);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	snprintf(c->peer, sizeof(c->peer), "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
		const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)&ss)->sin_addr;
		snprintf(c->peer, sizeof(c->peer), "%u.%u.%u.%u:%u", a[0], a[1], a[2], a[3],
			 ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	pthread_mutex_lock(&s->mu);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	pthread_mutex_unlock(&s->mu);
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, conn_main, c) != 0) {
		ol_warn("kv: cannot start a connection thread");
		conn_close(c);
	}
	pthread_attr_destroy(&at);
}

static void *
accept_main(void *arg)
{
	struct ol_kv_server *s = arg;
	while (!atomic_load(&s->stop)) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (atomic_load(&s->stop))
				break;
			ol_warn("kv: accept: %s", strerror(errno));
			usleep(10000);
			continue;
		}
		if (atomic_load(&s->stop)) {
			close(fd);
			break;
		}
		pthread_mutex_lock(&s->mu);
		bool full = s->n_conns >= OL_KV_MAX_CONNS;
		pthread_mutex_unlock(&s->mu);
		if (full) {
			ol_warn("kv: %u connections open: refusing a new one", OL_KV_MAX_CONNS);
			close(fd);
			continue;
		}
		conn_start(s, fd);
	}
	return NULL;
}

/* ---- start / stop ---- */

static uint64_t
mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	uint64_t kb = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "MemTotal:", 9) == 0) {
			kb = strtoull(line + 9, NULL, 10);
			break;
		}
	}
	if (f)
		fclose(f);
	return kb * 1024;
}

static uint64_t
dram_bytes(const struct ol_config *cfg)
{
	const uint64_t gib = 1ull << 30;
	if (cfg->kv_dram_bytes)
		return cfg->kv_dram_bytes;
	if (cfg->kv_cpu_ram_frac > 0) {
		uint64_t g = (uint64_t)((double)mem_total() * cfg->kv_cpu_ram_frac) / gib;
		return (g ? g : 1) * gib; /* upstream floors to whole GiB */
	}
	if (cfg->kv_capacity_gb)
		return (uint64_t)cfg->kv_capacity_gb * gib;
	return gib;
}

static int
mkdir_p(const char *path)
{
	char tmp[OL_CFG_STR + 8];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(tmp, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

static void
spill_dir(const struct ol_config *cfg, char *buf, size_t cap)
{
	if (cfg->kv_spill_dir[0])
		snprintf(buf, cap, "%s", cfg->kv_spill_dir);
	else if (cfg->n_data_dirs > 0)
		snprintf(buf, cap, "%s/kv", cfg->data_dirs[0]);
	else
		snprintf(buf, cap, "./data/kv");
}

/* Unlink the default-named DRAM tiers ("/openlake-kv-PORT-PID") of daemons that died
 * without cleaning up (kill -9): their pages would stay in /dev/shm for good. */
static void
gc_stale_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	unsigned n = 0;
	while (d && (de = readdir(d)) != NULL) {
		char *end;
		if (strncmp(de->d_name, "openlake-kv-", 12) != 0)
			continue;
		strtoul(de->d_name + 12, &end, 10);
		if (*end != '-')
			continue;
		long pid = strtol(end + 1, &end, 10);
		if (*end != '\0' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char name[300];
		snprintf(name, sizeof(name), "/%s", de->d_name);
		n += shm_unlink(name) == 0;
	}
	if (d)
		closedir(d);
	if (n)
		ol_info("kv: removed %u stale DRAM tier(s) of dead daemons from /dev/shm", n);
}

static int
open_engine(struct ol_kv_server *s, const struct ol_config *cfg)
{
	char dir[OL_CFG_STR + 8], shm[OL_CFG_STR];
	spill_dir(cfg, dir, sizeof(dir));
	if (cfg->kv_shm_name[0])
		snprintf(shm, sizeof(shm), "%s%s", cfg->kv_shm_name[0] == '/' ? "" : "/",
			 cfg->kv_shm_name);
	else
		snprintf(shm, sizeof(shm), "/openlake-kv-%u-%d", s->port, (int)getpid());
	gc_stale_shm();
	bool spill = cfg->kv_spill_bytes > 0;
	if (spill) {
		int r = mkdir_p(dir);
		if (r < 0) {
			ol_err("kv: cannot create the spill directory %s: %s", dir, strerror(-r));
			return r;
		}
	}
	struct ol_kve_opts o = {.dram_bytes = dram_bytes(cfg),
				.shm_name = shm,
				.spill_dir = spill ? dir : NULL,
				.spill_bytes = cfg->kv_spill_bytes,
				.max_block = cfg->kv_max_block_bytes,
				.writeback_ms = cfg->kv_writeback_ms,
				.prefault = ol_config_kv_prefault(cfg)};
	int r = ol_kve_open(&o, &s->eng);
	if (r == 0)
		ol_info(
		    "kv: pool on port %u: DRAM %llu MiB in shm %s, NVMe %s (%llu MiB), max block "
		    "%llu KiB, write-behind %u ms",
		    s->port, (unsigned long long)(o.dram_bytes >> 20), shm, spill ? dir : "off",
		    (unsigned long long)(o.spill_bytes >> 20),
		    (unsigned long long)(ol_kve_max_block(s->eng) >> 10), o.writeback_ms);
	return r;
}

int
ol_kv_server_start(const struct ol_config *cfg, struct ol_kv_server **out)
{
	const char *addr = ol_config_kv_listen(cfg);
	if (!addr || !addr[0])
		return -EINVAL;
	struct ol_kv_server *s = ol_xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->lim.max_batch = OL_KVP_MAX_BATCH;
	s->lim.max_block = cfg->kv_max_block_bytes ? cfg->kv_max_block_bytes : (64u << 20);
	read_host_id(s->host_id, sizeof(s->host_id));
	s->lfd = kvnet_listen(addr, &s->port);
	int r = s->lfd;
	if (r < 0) {
		ol_err("kv: cannot listen on %s: %s", addr, strerror(-r));
		goto fail;
	}
	if ((r = open_engine(s, cfg)) < 0)
		goto fail;
	if ((r = -pthread_create(&s->acc, NULL, accept_main, s)) < 0)
		goto fail;
	ol_metrics_register(ol_kv_metrics_render, s->eng);
	*out = s;
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	ol_kve_close(s->eng);
	free(s);
	return r;
}

unsigned
ol_kv_server_port(const struct ol_kv_server *s)
{
	return s->port;
}

void
ol_kv_server_stop(struct ol_kv_server *s)
{
	if (!s)
		return;
	ol_metrics_unregister(ol_kv_metrics_render, s->eng);
	atomic_store(&s->stop, true);
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->acc, NULL);
	close(s->lfd);
	pthread_mutex_lock(&s->mu);
	for (struct conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	while (s->n_conns > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	ol_kve_close(s->eng);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
