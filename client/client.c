/* client/client.c - libopenlake: options, node pool, connections, rendezvous, batching. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "client_int.h"
#include "kv/net.h"

#define OL_API __attribute__((visibility("default")))

void
olc_log(struct ol_client *c, int level, const char *fmt, ...)
{
	if (!c->log)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	c->log(level, buf, c->log_arg);
}

uint64_t
olc_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
read_host_id(char *buf, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
}

OL_API int
ol_client_new(const struct ol_client_opts *o, struct ol_client **out)
{
	if (!o || !out || o->size < offsetof(struct ol_client_opts, log) || !o->nodes ||
	    o->n_nodes == 0 || o->n_nodes > 64)
		return -EINVAL;
	const char *dev = o->device ? o->device : "local";
	/* "ucx", "rdma", or the name of an RDMA NIC (the seeds' "mlx5_ib0"): every node over UCX */
	bool ucx = strcmp(dev, "local") != 0 && strcmp(dev, "tcp") != 0;
	if (ucx && (!dev[0] || strlen(dev) > 64))
		return -EINVAL;
	bool ucx_seed = false;
	for (size_t i = 0; i < o->n_nodes; i++)
		if (!o->nodes[i] || !strchr(o->nodes[i], ':') || strlen(o->nodes[i]) >= 256)
			return -EINVAL;
		else
			ucx_seed |= strncmp(o->nodes[i], "ucx://", 6) == 0;
	if ((ucx || ucx_seed) && !olc_ucx_built()) { /* before the other checks: a probe */
		if (o->size >= offsetof(struct ol_client_opts, log_arg) + sizeof(void *) && o->log)
			o->log(
			    OL_CLIENT_LOG_ERROR,
			    "openlake: device ucx / rdma / an RDMA NIC, or ucx:// nodes, need UCX, "
			    "and this libopenlake was built without it (libucx-dev): use device "
			    "tcp or local",
			    o->log_arg);
		return -EPROTONOSUPPORT;
	}
	const char *ns = o->ns ? o->ns : "";
	if (strlen(ns) > OL_KVP_MAX_NS)
		return -EINVAL;
	struct ol_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->nodes = calloc(OLC_MAX_NODES, sizeof(*c->nodes));
	c->ns = strdup(ns);
	if (!c->nodes || !c->ns) {
		free(c->nodes);
		free(c->ns);
		free(c);
		return -ENOMEM;
	}
	c->n_seeds = o->n_nodes;
	c->ns_seed = XXH3_64bits(ns, strlen(ns));
	c->want_local = strcmp(dev, "local") == 0;
	/* $OPENLAKE_KV_COMMIT_ALLOC=0: local puts as an older client makes them (ALLOC, then
	 * COMMIT), to compare the two or to rule the look-ahead reservations out */
	const char *cav = getenv("OPENLAKE_KV_COMMIT_ALLOC");
	c->no_ahead = cav && strcmp(cav, "0") == 0;
	/* $OPENLAKE_KV_NT_COPY=0: large local put values copied with memcpy, not streamed */
	const char *ntv = getenv("OPENLAKE_KV_NT_COPY");
	c->no_nt = ntv && strcmp(ntv, "0") == 0;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : 2000;
	if (o->size >= offsetof(struct ol_client_opts, log_arg) + sizeof(void *)) {
		c->log = o->log;
		c->log_arg = o->log_arg;
	}
	if (o->size >= offsetof(struct ol_client_opts, compress) + sizeof(unsigned))
		c->compress = o->compress;
	if (o->size >= offsetof(struct ol_client_opts, compress_row_bytes) + sizeof(unsigned))
		c->compress_row_bytes = o->compress_row_bytes;
	const char *tok = NULL;
	if (o->size >= offsetof(struct ol_client_opts, token) + sizeof(const char *))
		tok = o->token;
	bool tls = o->size >= offsetof(struct ol_client_opts, tls) + sizeof(unsigned) && o->tls;
	const char *ca = NULL, *sni = NULL;
	if (o->size >= offsetof(struct ol_client_opts, server_name) + sizeof(const char *)) {
		ca = o->ca_file;
		sni = o->server_name;
	}
	if (o->size >= offsetof(struct ol_client_opts, view_refresh_ms) + sizeof(unsigned)) {
		c->replicas = o->replicas;
		c->grace_ms = o->grace_ms;
		c->refresh_ms = o->view_refresh_ms;
	}
	const char *cert = NULL, *ckey = NULL;
	if (o->size >= offsetof(struct ol_client_opts, key_file) + sizeof(const char *)) {
		cert = o->cert_file;
		ckey = o->key_file;
	}
	c->replicas = c->replicas ? c->replicas : 1;
	c->grace_ms = c->grace_ms ? c->grace_ms : 30000;
	c->refresh_ms = c->refresh_ms ? c->refresh_ms : 5000;
	if (tok && tok[0] && !(c->token = strdup(tok))) {
		free(c->nodes);
		free(c->ns);
		free(c);
		return -ENOMEM;
	}
	int r = c->compress > 1 || c->compress_row_bytes % 2 || (tok && strlen(tok) > 4096) ||
			(tls && o->tls > 1) || c->replicas > OLC_MAX_REPLICAS
		    ? -EINVAL
		    : 0;
	if (r == 0 && tls)
		r = olc_tls_init(c, ca, sni, cert, ckey);
	c->ucx = ucx;
	if (r == 0 && (ucx || ucx_seed))
		r = olc_ucx_init(c, ucx && strcmp(dev, "ucx") && strcmp(dev, "rdma") ? dev : NULL);
	if (r < 0) {
		olc_tls_fini(c);
		free(c->token);
		free(c->nodes);
		free(c->ns);
		free(c);
		return r;
	}
	read_host_id(c->host_id, sizeof(c->host_id));
	for (size_t i = 0; i < o->n_nodes; i++) {
		struct olc_node *nd = &c->nodes[i];
		snprintf(nd->addr, sizeof(nd->addr), "%s", o->nodes[i]);
		nd->seed = XXH3_64bits(nd->addr, strlen(nd->addr));
		pthread_mutex_init(&nd->mu, NULL);
	}
	c->n_nodes = o->n_nodes; /* a seed listed twice is two slots: harmless */
	olc_view_init(c);
	*out = c;
	return 0;
}

static void map_release(struct olc_map *m);

OL_API void
ol_client_free(struct ol_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_nodes; i++) {
		struct olc_node *nd = &c->nodes[i];
		for (unsigned j = 0; j < nd->n_idle; j++)
			olc_conn_close(&nd->idle[j]);
		for (unsigned j = 0; j < nd->n_maps; j++)
			map_release(nd->maps[j]);
		pthread_mutex_destroy(&nd->mu);
	}
	free(c->nodes);
	free(c->ns);
	free(c->token);
	olc_tls_fini(c);
	olc_ucx_fini(c);
	pthread_mutex_destroy(&c->vmu);
	free(c);
}

/* ---- connections ---- */

void
olc_node_down(struct ol_client *c, struct olc_node *nd, int err)
{
	pthread_mutex_lock(&nd->mu);
	/* first backoff: at least one timeout, so a hung node costs at most about half of the
	 * calls one timeout each; then doubling up to max(5 s, 4 timeouts) */
	unsigned first = c->timeout_ms > 250 ? c->timeout_ms : 250;
	unsigned cap = c->timeout_ms * 4 > 5000 ? c->timeout_ms * 4 : 5000;
	nd->backoff_ms = nd->backoff_ms ? nd->backoff_ms * 2 : first;
	if (nd->backoff_ms > cap)
		nd->backoff_ms = cap;
	nd->down_until_ms = olc_now_ms() + nd->backoff_ms;
	for (unsigned j = 0; j < nd->n_idle; j++)
		olc_conn_close(&nd->idle[j]);
	nd->n_idle = 0;
	unsigned b = nd->backoff_ms;
	pthread_mutex_unlock(&nd->mu);
	atomic_store(&c->stale, true); /* a member may have left: ask for the view again */
	olc_log(c, OL_CLIENT_LOG_WARN, "openlake: node %s unreachable (%s); retry in %u ms",
		nd->addr, strerror(-err), b);
}

#define OLC_CHUNK (2u << 20)

void
olc_map_prefault(struct olc_map *m, uint64_t off, uint64_t len)
{
	for (uint64_t ch = off / OLC_CHUNK; len && ch <= (off + len - 1) / OLC_CHUNK; ch++) {
		uint64_t bit = 1ull << (ch % 64);
		if (atomic_load_explicit(&m->faulted[ch / 64], memory_order_relaxed) & bit)
			continue;
		uint64_t start = ch * OLC_CHUNK;
		uint64_t n = m->size - start < OLC_CHUNK ? m->size - start : OLC_CHUNK;
		if (madvise(m->base + start, n, MADV_POPULATE_WRITE) != 0) {
			for (uint64_t i = 0; i < n; i += 4096) /* older kernels: touch each page */
				(void)*(volatile uint8_t *)(m->base + start + i);
		}
		atomic_fetch_or(&m->faulted[ch / 64], bit);
	}
}

static pthread_mutex_t g_maps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct olc_map *g_maps;

static struct olc_map *
map_find(struct olc_node *nd, uint64_t epoch)
{
	for (unsigned j = 0; j < nd->n_maps; j++)
		if (nd->maps[j]->epoch == epoch)
			return nd->maps[j];
	return NULL;
}

static struct olc_map *
map_new(const struct ol_kvp_welcome *w, const char *name)
{
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	void *p = fd >= 0 ? mmap(NULL, w->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
			  : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED)
		return NULL;
	struct olc_map *m = calloc(1, sizeof(*m));
	if (m)
		m->faulted = calloc((w->shm_size / OLC_CHUNK + 64) / 64, sizeof(uint64_t));
	/* same name but another server's object (its epoch is in the first u64): not ours */
	if (!m || !m->faulted || atomic_load((_Atomic uint64_t *)p) != w->epoch) {
		if (m)
			free((void *)m->faulted);
		free(m);
		munmap(p, w->shm_size);
		return NULL;
	}
	m->base = p;
	m->size = w->shm_size;
	m->epoch = w->epoch;
	m->seq_off = w->seq_off;
	m->unit = w->unit;
	return m;
}

/* The process-wide mapping of a server epoch, with a new reference. */
static struct olc_map *
map_get(const struct ol_kvp_welcome *w, const char *name)
{
	pthread_mutex_lock(&g_maps_mu);
	struct olc_map *m = g_maps;
	while (m && !(m->epoch == w->epoch && m->size == w->shm_size))
		m = m->next;
	if (!m && (m = map_new(w, name)) != NULL) {
		m->next = g_maps;
		g_maps = m;
	}
	if (m)
		m->refs++;
	pthread_mutex_unlock(&g_maps_mu);
	return m;
}

static void
map_release(struct olc_map *m)
{
	pthread_mutex_lock(&g_maps_mu);
	if (--m->refs == 0) {
		struct olc_map **pp = &g_maps;
		while (*pp != m)
			pp = &(*pp)->next;
		*pp = m->next;
		munmap(m->base, m->size);
		free((void *)m->faulted);
		free(m);
	}
	pthread_mutex_unlock(&g_maps_mu);
}

/* Map the node's shm (once per server epoch). Node lock held. NULL: use TCP. */
static struct olc_map *
map_shm(struct ol_client *c, struct olc_node *nd, const struct ol_kvp_welcome *w)
{
	struct olc_map *m = map_find(nd, w->epoch);
	if (m || nd->local_failed)
		return m;
	char name[OL_KVP_MAX_HOST + 1];
	memcpy(name, w->shm_name, w->name_len);
	name[w->name_len] = '\0';
	if (nd->n_maps < sizeof(nd->maps) / sizeof(nd->maps[0]))
		m = map_get(w, name);
	if (!m) {
		nd->local_failed = true;
		olc_log(c, OL_CLIENT_LOG_INFO, "openlake: node %s: shm %s not usable, using TCP",
			nd->addr, name);
		return NULL;
	}
	nd->maps[nd->n_maps++] = m;
	return m;
}

/* Prove the token: HMAC-SHA256(token, ol_kvp_auth_msg(nonce, ns)). */
static int
auth(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn, const struct ol_kvp_welcome *w)
{
	if (!c->token) {
		olc_log(
		    c, OL_CLIENT_LOG_ERROR,
		    "openlake: node %s requires a token: set it (C: opts.token, python: token=, "
		    "vLLM: openlake_token; the CLI and python read $OPENLAKE_KV_TOKEN)",
		    nd->addr);
		return -EACCES;
	}
	uint8_t msg[OL_KVP_AUTH_MSG], mac[EVP_MAX_MD_SIZE];
	unsigned ml = 0;
	size_t n = ol_kvp_auth_msg(msg, w->nonce, c->ns, (uint16_t)strlen(c->ns));
	if (!HMAC(EVP_sha256(), c->token, (int)strlen(c->token), msg, n, mac, &ml) ||
	    ml != OL_KVP_MAC)
		return -ENOMEM;
	struct ol_kvp_hdr h = {.op = OL_KVP_AUTH, .body_len = OL_KVP_MAC}, rp;
	struct iovec v = {mac, OL_KVP_MAC};
	int r = olc_send(c, cn, &h, &v, 1);
	if (r == 0)
		r = olc_recv_hdr(cn, &h, &rp);
	if (r == -EKEYREJECTED || r == -EACCES)
		olc_log(c, OL_CLIENT_LOG_ERROR, "openlake: node %s: %s", nd->addr,
			r == -EACCES
			    ? "this token may not use this namespace"
			    : "token refused (not the pool's secret or a [[kv.tokens]] token)");
	return r;
}

static int
hello(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn)
{
	uint8_t body[OL_KVP_MAX_NS + OL_KVP_MAX_HOST + 16], rb[1024];
	struct ol_kvp_hello hi = {
	    OL_KVP_HELLO_V2,
	    (c->want_local ? OL_KVP_HELLO_LOCAL : 0) | (c->token ? OL_KVP_HELLO_TOKEN : 0),
	    c->ns,
	    (uint16_t)strlen(c->ns),
	    c->host_id,
	    (uint16_t)strlen(c->host_id)};
	int n = ol_kvp_hello_encode(body, sizeof(body), &hi);
	if (n < 0)
		return n;
	struct ol_kvp_hdr h = {.op = OL_KVP_HELLO, .body_len = (uint64_t)n}, rp;
	struct iovec v = {body, (size_t)n};
	int r = olc_send(c, cn, &h, &v, 1);
	if (r == 0)
		r = olc_recv_hdr(cn, &h, &rp);
	if (r == -EACCES)
		olc_log(
		    c, OL_CLIENT_LOG_ERROR,
		    "openlake: node %s requires a token: set it (C: opts.token, python: token=, "
		    "vLLM: openlake_token; the CLI and python read $OPENLAKE_KV_TOKEN)",
		    nd->addr);
	if (r < 0)
		return r;
	struct ol_kvp_welcome w;
	if (rp.body_len > sizeof(rb))
		return -EPROTO;
	if ((r = olc_read(cn, rb, rp.body_len)) < 0)
		return r;
	if (ol_kvp_welcome_decode(rb, rp.body_len, &w) < 0)
		return -EPROTO;
	cn->max_batch = w.max_batch;
	cn->has_view = (w.flags & OL_KVP_WELCOME_VIEW) != 0;
	cn->has_lease = (w.flags & OL_KVP_WELCOME_LEASE) != 0;
	cn->has_events = (w.flags & OL_KVP_WELCOME_EVENTS) != 0;
	cn->has_calloc = (w.flags & OL_KVP_WELCOME_COMMIT_ALLOC) != 0 && !c->no_ahead;
	cn->n_ahead = 0;
	cn->last_len = UINT64_MAX;
	cn->max_block = w.max_block;
	cn->local = false;
	if (w.auth && (r = auth(c, nd, cn, &w)) < 0)
		return r;
	if (w.path_len && c->want_local) { /* the node is on this host: its shm-grant socket */
		pthread_mutex_lock(&nd->mu);
		memcpy(nd->unix_path, w.unix_path, w.path_len);
		nd->unix_path[w.path_len] = '\0';
		pthread_mutex_unlock(&nd->mu);
	}
	if (w.flags & OL_KVP_HELLO_LOCAL) {
		pthread_mutex_lock(&nd->mu);
		cn->map = map_shm(c, nd, &w);
		pthread_mutex_unlock(&nd->mu);
		cn->local = cn->map != NULL;
	}
	return 0;
}

/* The shm path: a connection on the node's Unix socket, where the server checks our uid.
 * 0 with a local connection in *cn, or -errno (and the node stays on TCP from now on). */
static int
conn_unix(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn)
{
	char path[sizeof(nd->unix_path)];
	pthread_mutex_lock(&nd->mu);
	memcpy(path, nd->unix_path, sizeof(path));
	bool skip = nd->unix_failed || !path[0];
	pthread_mutex_unlock(&nd->mu);
	if (skip)
		return -ENOENT;
	memset(cn, 0, sizeof(*cn));
	int fd = kvnet_connect_unix(path), r = fd;
	if (fd >= 0) {
		cn->fd = fd;
		r = kvnet_set_timeout(fd, c->timeout_ms);
		if (r == 0)
			r = hello(c, nd, cn);
		if (r == 0 && !cn->local)
			r = -EPERM;
		if (r < 0)
			close(fd);
	}
	if (r < 0) {
		pthread_mutex_lock(&nd->mu);
		nd->unix_failed = true;
		pthread_mutex_unlock(&nd->mu);
		olc_log(c, OL_CLIENT_LOG_WARN,
			"openlake: node %s: no shared-memory grant on %s (%s), using TCP", nd->addr,
			path, strerror(-r));
	}
	return r;
}

/* A UCX connection (HELLO over it; never the shm path: UCX has its own for this host). */
static int
conn_ucx(struct ol_client *c, struct olc_node *nd, struct olc_conn *out)
{
	out->fd = -1;
	int r = olc_ucx_connect(c, nd, out);
	if (r == 0)
		r = hello(c, nd, out);
	if (r == 0 && out->max_batch > olc_ucx_max_batch(out)) /* sub-batches fit an AM header */
		out->max_batch = olc_ucx_max_batch(out);
	if (r < 0) {
		olc_conn_close(out);
		olc_node_down(c, nd, r);
		return r;
	}
	pthread_mutex_lock(&nd->mu);
	nd->backoff_ms = 0;
	nd->down_until_ms = 0;
	pthread_mutex_unlock(&nd->mu);
	return 0;
}

int
olc_conn_get(struct ol_client *c, struct olc_node *nd, struct olc_conn *out)
{
	pthread_mutex_lock(&nd->mu);
	if (nd->down_until_ms && olc_now_ms() < nd->down_until_ms) {
		pthread_mutex_unlock(&nd->mu);
		return -EHOSTDOWN;
	}
	if (nd->n_idle) {
		*out = nd->idle[--nd->n_idle];
		out->reused = true;
		pthread_mutex_unlock(&nd->mu);
		return 0;
	}
	pthread_mutex_unlock(&nd->mu);
	if (c->want_local && conn_unix(c, nd, out) == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	if (c->ucx || strncmp(nd->addr, "ucx://", 6) == 0)
		return conn_ucx(c, nd, out);
	int fd = kvnet_connect(nd->addr, c->timeout_ms);
	if (fd < 0) {
		olc_node_down(c, nd, fd);
		return fd;
	}
	out->fd = fd;
	int r = kvnet_set_timeout(fd, c->timeout_ms);
	if (r == 0 && c->ssl_ctx)
		r = olc_tls_connect(c, nd, out);
	if (r == 0)
		r = hello(c, nd, out);
	if (r == -EPROTONOSUPPORT && !out->ssl)
		olc_log(c, OL_CLIENT_LOG_ERROR,
			"openlake: node %s speaks TLS on its KV port ([kv_tls]): connect with TLS "
			"(C: opts.tls, python: tls=True, vLLM: openlake_tls; ca_file for its CA)",
			nd->addr);
	if (r < 0) {
		olc_conn_close(out);
		olc_node_down(c, nd, r);
		return r;
	}
	struct olc_conn u;
	if (c->want_local && !out->local && conn_unix(c, nd, &u) == 0) {
		olc_conn_close(out); /* this HELLO told us the socket: switch to it */
		*out = u;
	}
	pthread_mutex_lock(&nd->mu);
	nd->backoff_ms = 0;
	nd->down_until_ms = 0;
	pthread_mutex_unlock(&nd->mu);
	return 0;
}

void
olc_conn_put(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn, bool ok)
{
	pthread_mutex_lock(&nd->mu);
	if (ok && nd->n_idle < OLC_POOL_MAX) {
		cn->reused = false;
		nd->idle[nd->n_idle++] = *cn;
		cn = NULL;
	}
	pthread_mutex_unlock(&nd->mu);
	if (cn)
		olc_conn_close(cn);
}

int
olc_send(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, struct iovec *iov, int n)
{
	uint8_t hb[OL_KVP_HDR];
	if (cn->ucx)
		return olc_ucx_send(c, cn, h, iov, n);
	h->magic = OL_KVP_MAGIC;
	h->version = OL_KVP_VERSION;
	h->req_id = atomic_fetch_add(&c->req_id, 1) + 1;
	ol_kvp_hdr_encode(hb, h);
	if (n == 0 || iov[0].iov_base != NULL) {
		struct iovec v = {hb, sizeof(hb)};
		int r = kvnet_swritev_full(cn->fd, cn->ssl, &v, 1);
		return r < 0 ? r : kvnet_swritev_full(cn->fd, cn->ssl, iov, n);
	}
	iov[0].iov_base = hb; /* caller reserved iov[0] for the header */
	iov[0].iov_len = sizeof(hb);
	return kvnet_swritev_full(cn->fd, cn->ssl, iov, n);
}

int
olc_recv_hdr_ex(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
		void *extra, size_t extra_len)
{
	uint8_t hb[OL_KVP_HDR];
	if (cn->ucx)
		return olc_ucx_recv_hdr_ex(cn, rq, rp, extra, extra_len, 0);
	struct iovec v[2] = {{hb, sizeof(hb)}, {extra, extra_len}};
	int r = kvnet_sreadv_full(cn->fd, cn->ssl, v, extra_len ? 2 : 1);
	if (r < 0)
		return r;
	if (ol_kvp_hdr_decode(hb, sizeof(hb), rp) <= 0 || !(rp->flags & OL_KVP_F_REPLY))
		return -EPROTO;
	if (rp->req_id == 0 && rp->status < 0) /* refused at accept (a limit): no request */
		return rp->status;
	if (rp->op != rq->op || rp->req_id != rq->req_id)
		return -EPROTO;
	if (rp->status < 0)
		return rp->status;
	return 0;
}

int
olc_read(struct olc_conn *cn, void *buf, size_t len)
{
	return cn->ucx ? olc_ucx_read(cn, buf, len) : kvnet_sread_full(cn->fd, cn->ssl, buf, len);
}

int
olc_recv_hdr(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp)
{
	return olc_recv_hdr_ex(cn, rq, rp, NULL, 0);
}

/* ---- batching ---- */

uint64_t
olc_iov_len(const struct ol_kv_op *op)
{
	uint64_t n = 0;
	for (size_t i = 0; i < op->iovcnt; i++)
		n += op->iov[i].len;
	return n;
}

void
olc_node_drop_idle(struct olc_node *nd)
{
	pthread_mutex_lock(&nd->mu);
	for (unsigned j = 0; j < nd->n_idle; j++)
		olc_conn_close(&nd->idle[j]);
	nd->n_idle = 0;
	pthread_mutex_unlock(&nd->mu);
}

enum kind { K_PUT, K_GET, K_EXISTS, K_DELETE, K_LEASE };

static const uint8_t kind_op[] = {OL_KVP_PUT, OL_KVP_GET, OL_KVP_EXISTS, OL_KVP_DELETE,
				  OL_KVP_LEASE};

/* One node's share of a call. */
struct nrun {
	struct olc_node *nd;
	struct ol_kv_op **ops;
	size_t n, done, m;
	struct olc_conn cn;
	bool have, finished, retried, sent;
	uint64_t deadline_ms; /* of the sub-batch in flight: nodes' timeouts run in parallel */
	struct olc_call call;
	const struct olc_hash *hx; /* a GET from ol_kv_get_xxh3, else NULL */
};

static void
nrun_finish(struct ol_client *c, struct nrun *r, int err)
{
	if (r->have) {
		bool reused = r->cn.reused;
		olc_conn_put(c, r->nd, &r->cn, err == 0);
		r->have = false;
		if (err < 0 && reused)
			olc_node_drop_idle(
			    r->nd); /* the server went away: its pooled sockets are stale */
	}
	if (err < 0 && err != -EHOSTDOWN)
		olc_node_down(c, r->nd, err);
	for (size_t i = r->done; i < r->n; i++)
		r->ops[i]->status = OL_KV_UNREACHABLE;
	r->finished = true;
}

/* A failure on a pooled connection that the server closed is retried once on a fresh one
 * (every op is idempotent); anything else ends this node's share. */
static void
nrun_fail(struct ol_client *c, struct nrun *r, int err)
{
	bool stale = r->cn.reused && (err == -ECONNRESET || err == -EPIPE) && !r->retried;
	if (!stale) {
		nrun_finish(c, r, err);
		return;
	}
	olc_conn_put(c, r->nd, &r->cn, false);
	olc_node_drop_idle(r->nd);
	r->retried = true;
	int e = olc_conn_get(c, r->nd, &r->cn);
	r->have = e == 0;
	if (e < 0)
		nrun_finish(c, r, -EHOSTDOWN); /* olc_conn_get marked it down */
}

static void
nrun_send(struct ol_client *c, struct nrun *r, enum kind k)
{
	r->m = r->n - r->done < r->cn.max_batch ? r->n - r->done : r->cn.max_batch;
	r->sent = false;
	for (size_t i = 0; r->hx && i < r->m; i++) /* a new attempt: an old hash is stale */
		olc_hash_begin(r->hx, r->ops[r->done + i]);
	if (r->cn.local && (k == K_PUT || k == K_GET)) {
		int e = k == K_PUT ? olc_shm_put(c, &r->cn, r->ops + r->done, r->m)
				   : olc_shm_get(c, &r->cn, r->ops + r->done, r->m, r->hx);
		if (e == 0)
			r->done += r->m;
		else
			nrun_fail(c, r, e);
		return;
	}
	r->call =
	    (struct olc_call){.op = kind_op[k], .ops = r->ops + r->done, .n = r->m, .hx = r->hx};
	int e = olc_tcp_send(c, &r->cn, &r->call);
	if (e < 0) {
		olc_call_fini(&r->call);
		nrun_fail(c, r, e);
		return;
	}
	/* the reply is due within timeout_ms of the end of the send (a big PUT's send itself
	 * may take long; each of its writes has its own timeout) */
	r->deadline_ms = olc_now_ms() + c->timeout_ms;
	r->sent = true;
}

static void
nrun_recv(struct ol_client *c, struct nrun *r)
{
	uint64_t now = olc_now_ms();
	r->call.hdr_timeout_ms = now + 1 < r->deadline_ms ? (unsigned)(r->deadline_ms - now) : 1;
	int e = olc_tcp_recv(c, &r->cn, &r->call);
	olc_call_fini(&r->call);
	r->sent = false;
	if (e == 0)
		r->done += r->m;
	else
		nrun_fail(c, r, e);
}

/* Run every node's share: each round sends one sub-batch to every node, then reads the
 * replies, so nodes work in parallel and a slow node costs one timeout, not one per node. */
static void
run_nodes(struct ol_client *c, enum kind k, struct nrun *runs, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		int e = olc_conn_get(c, runs[i].nd, &runs[i].cn);
		runs[i].have = e == 0;
		if (e < 0)
			nrun_finish(c, &runs[i], -EHOSTDOWN);
	}
	for (bool busy = true; busy;) {
		busy = false;
		for (size_t i = 0; i < nr; i++)
			if (!runs[i].finished && runs[i].done < runs[i].n)
				nrun_send(c, &runs[i], k);
		for (size_t i = 0; i < nr; i++)
			if (!runs[i].finished && runs[i].sent)
				nrun_recv(c, &runs[i]);
		for (size_t i = 0; i < nr; i++) {
			if (!runs[i].finished && runs[i].done == runs[i].n)
				nrun_finish(c, &runs[i], 0);
			busy |= !runs[i].finished;
		}
	}
}

/* Run ops[i] on node[i] (UINT32_MAX: not this pass): every node's share in parallel. Statuses
 * of the ops not in this pass are left alone. hx: a GET's hashes (ol_kv_get_xxh3), or NULL. */
static int
dispatch(struct ol_client *c, enum kind k, struct ol_kv_op *ops, size_t n, const uint32_t *node,
	 const struct olc_hash *hx)
{
	size_t nn = c->n_nodes;
	struct ol_kv_op **byn = malloc((n ? n : 1) * sizeof(*byn));
	struct nrun *runs = calloc(nn, sizeof(*runs));
	if (!byn || !runs) {
		free(byn);
		free(runs);
		return -ENOMEM;
	}
	size_t nr = 0, m = 0;
	for (size_t nd = 0; nd < nn; nd++) {
		size_t first = m;
		for (size_t i = 0; i < n; i++)
			if (node[i] == nd)
				byn[m++] = &ops[i];
		if (m > first)
			runs[nr++] = (struct nrun){
			    .nd = &c->nodes[nd], .ops = byn + first, .n = m - first, .hx = hx};
	}
	run_nodes(c, k, runs, nr);
	free(runs);
	free(byn);
	return 0;
}

static bool
stored(int32_t st)
{
	return st == OL_KV_OK || st == OL_KV_EXISTS;
}

/* Replica r (>= 1) of a put or delete: the op's outcome is the better of the copies. */
static int
extra_copy(struct ol_client *c, enum kind k, struct ol_kv_op *ops, size_t n, const uint32_t *pl,
	   const unsigned *np, unsigned r, uint32_t *node, int32_t *st0)
{
	size_t any = 0;
	for (size_t i = 0; i < n; i++) {
		st0[i] = ops[i].status;
		node[i] = np[i] > r ? pl[i * OLC_MAX_REPLICAS + r] : UINT32_MAX;
		any += node[i] != UINT32_MAX;
	}
	int e = any ? dispatch(c, k, ops, n, node, NULL) : 0;
	for (size_t i = 0; i < n && any; i++)
		if (node[i] != UINT32_MAX && stored(st0[i]) && !stored(ops[i].status))
			ops[i].status = st0[i];
	return e;
}

/* A get or exists that missed (or whose node is down) tries the next replica, then, within
 * the grace window after a view change, the key's owner in the previous view. */
static bool
retry_miss(const struct ol_kv_op *op)
{
	return op->status == OL_KV_MISS || op->status == OL_KV_UNREACHABLE;
}

static int
read_more(struct ol_client *c, enum kind k, struct ol_kv_op *ops, size_t n, const uint32_t *pl,
	  const unsigned *np, const struct olc_view *prev, bool has_prev, uint32_t *node,
	  const struct olc_hash *hx)
{
	int e = 0;
	for (unsigned r = 1; r < c->replicas && e == 0; r++) {
		size_t any = 0;
		for (size_t i = 0; i < n; i++) {
			node[i] = retry_miss(&ops[i]) && np[i] > r ? pl[i * OLC_MAX_REPLICAS + r]
								   : UINT32_MAX;
			any += node[i] != UINT32_MAX;
		}
		e = any ? dispatch(c, k, ops, n, node, hx) : 0;
	}
	if (!has_prev || e)
		return e;
	size_t any = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t p[OLC_MAX_REPLICAS];
		node[i] = UINT32_MAX;
		if (!retry_miss(&ops[i]) || olc_place(c, prev, ops[i].key, p, 1) != 1)
			continue;
		bool tried = false;
		for (unsigned r = 0; r < np[i]; r++)
			tried |= pl[i * OLC_MAX_REPLICAS + r] == p[0];
		if (!tried) {
			node[i] = p[0];
			any++;
		}
	}
	e = any ? dispatch(c, k, ops, n, node, hx) : 0;
	for (size_t i = 0; i < n && any; i++)
		if (node[i] != UINT32_MAX && ops[i].status == OL_KV_OK)
			atomic_fetch_add(&c->grace_hits, 1);
	return e;
}

struct placed {
	struct olc_view cur, prev;
	bool has_prev;
	uint32_t *pl, *node; /* n * OLC_MAX_REPLICAS best nodes; one node per op for a pass */
	unsigned *np;
	int32_t *st0;
};

static int
placed_init(struct ol_client *c, struct placed *p, struct ol_kv_op *ops, size_t n)
{
	size_t m = n ? n : 1;
	p->pl = malloc(m * OLC_MAX_REPLICAS * sizeof(*p->pl));
	p->node = malloc(m * sizeof(*p->node));
	p->np = malloc(m * sizeof(*p->np));
	p->st0 = malloc(m * sizeof(*p->st0));
	if (!p->pl || !p->node || !p->np || !p->st0)
		return -ENOMEM;
	olc_view_maybe_refresh(c);
	olc_view_snapshot(c, &p->cur, &p->prev, &p->has_prev);
	for (size_t i = 0; i < n; i++) {
		p->np[i] =
		    olc_place(c, &p->cur, ops[i].key, p->pl + i * OLC_MAX_REPLICAS, c->replicas);
		p->node[i] = p->np[i] ? p->pl[i * OLC_MAX_REPLICAS] : UINT32_MAX;
		if (!p->np[i])
			ops[i].status = OL_KV_UNREACHABLE;
	}
	return 0;
}

static void
placed_fini(struct placed *p)
{
	free(p->pl);
	free(p->node);
	free(p->np);
	free(p->st0);
	free(p);
}

/* hx: a GET's hashes (ol_kv_get_xxh3), else NULL. */
static int
run(struct ol_client *c, enum kind k, struct ol_kv_op *ops, size_t n, const struct olc_hash *hx)
{
	if (!c || (!ops && n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!ops[i].key || (ops[i].iovcnt && !ops[i].iov))
			return -EINVAL;
		ops[i].status = OL_KV_ERROR;
	}
	struct placed *p = calloc(1, sizeof(*p)); /* two views: ~4 KiB, off the stack */
	int e = p ? placed_init(c, p, ops, n) : -ENOMEM;
	if (e == 0)
		e = dispatch(c, k, ops, n, p->node, hx);
	if (e == 0 && (k == K_PUT || k == K_DELETE))
		for (unsigned r = 1; r < c->replicas && e == 0; r++)
			e = extra_copy(c, k, ops, n, p->pl, p->np, r, p->node, p->st0);
	if (e == 0 && (k == K_GET || k == K_EXISTS))
		e = read_more(c, k, ops, n, p->pl, p->np, &p->prev, p->has_prev, p->node, hx);
	if (e == 0 && k == K_PUT) {
		uint64_t failed = 0;
		for (size_t i = 0; i < n; i++)
			failed += ops[i].status == OL_KV_UNREACHABLE;
		if (failed)
			atomic_fetch_add(&c->put_failed, failed);
	}
	if (p)
		placed_fini(p);
	return e;
}

int
olc_run_plain(struct ol_client *c, bool put, struct ol_kv_op *ops, size_t n)
{
	return run(c, put ? K_PUT : K_GET, ops, n, NULL);
}

OL_API int
ol_kv_put(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return c && c->compress ? olz_put(c, ops, n) : run(c, K_PUT, ops, n, NULL);
}

OL_API int
ol_kv_get(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return c && c->compress ? olz_get(c, ops, n) : run(c, K_GET, ops, n, NULL);
}

OL_API int
ol_kv_get_xxh3(struct ol_client *c, struct ol_kv_op *ops, size_t n, const size_t *hash_iovcnt,
	       uint64_t *hash)
{
	if (!c || (!ops && n) || (!hash && n))
		return -EINVAL;
	bool *done = calloc(n ? n : 1, sizeof(*done));
	if (!done)
		return -ENOMEM;
	struct olc_hash hx = {.base = ops, .iovcnt = hash_iovcnt, .out = hash, .done = done};
	/* compressed values are decoded into the iovs: hashed after (olc_hash_after) */
	int e = c->compress ? olz_get(c, ops, n) : run(c, K_GET, ops, n, &hx);
	for (size_t i = 0; e == 0 && i < n; i++) {
		if (ops[i].status != OL_KV_OK)
			hash[i] = 0;
		else if (!done[i]) /* UCX, compression, or a path that could not hash */
			olc_hash_after(&hx, &ops[i]);
	}
	free(done);
	return e;
}

OL_API int
ol_kv_exists(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return run(c, K_EXISTS, ops, n, NULL);
}

OL_API int
ol_kv_delete(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return run(c, K_DELETE, ops, n, NULL);
}

/* The ttl rides in value_len to the entry encoder (tcp_build); the reply overwrites it. */
OL_API int
ol_kv_lease(struct ol_client *c, struct ol_kv_op *ops, size_t n, unsigned ttl_ms)
{
	if (!ops && n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		ops[i].value_len = ttl_ms;
	return run(c, K_LEASE, ops, n, NULL);
}

OL_API const char *
ol_kv_status_str(int status)
{
	static const char *const names[OL_KV_STATUS_COUNT] = {"ok",	   "exists",  "miss",
							      "too_large", "full",    "unreachable",
							      "truncated", "corrupt", "error"};
	return status >= 0 && status < OL_KV_STATUS_COUNT ? names[status] : "unknown";
}

OL_API int
ol_iov_xxh3(const struct ol_iov *iov, size_t n, uint64_t *out)
{
	if ((!iov && n) || !out)
		return -EINVAL;
	return olc_xxh3_iov(iov, n, UINT64_MAX, out);
}

OL_API const char *
ol_version(void)
{
	return OL_VERSION;
}
