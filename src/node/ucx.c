/* node/ucx.c - the node plane over UCX stream endpoints (ucx_int.h; plane_transport = "ucx"):
 * the shared context and the client side (library grade; the server is ucx_srv.c).
 *
 * The plane's frames are a byte stream, so UCP's stream API carries them as they are: the
 * same HELLO, MACs, sequence numbers, deadlines and credit window as on TCP, with UCX choosing
 * the wire (RC / DC verbs on an RDMA NIC, tcp, shm; UCX_TLS says). One UCP context per process
 * (refcounted), shared by the server's worker and every client's. */
#include "node/ucx_int.h"

#include "io/io.h"
#include "io/ucx.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

bool
ol_node_ucx_built(void)
{
	return true;
}

/* ---- the process's UCP context ---- */

static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h ctx;
static unsigned ctx_refs;
static char ctx_dev[72]; /* ol_node_ucx_device */

int
ol_node_ucx_device(const char *dev)
{
	ucp_config_t *conf;
	int rc = 0;

	pthread_mutex_lock(&ctx_mu);
	snprintf(ctx_dev, sizeof(ctx_dev), "%s", dev ? dev : "");
	if (ctx_dev[0] && ucp_config_read(NULL, NULL, &conf) == UCS_OK) {
		rc = ol_ucx_config_device(conf, ctx_dev); /* only to say whether it is here */
		ucp_config_release(conf);
	}
	pthread_mutex_unlock(&ctx_mu);
	return rc;
}

static int
ctx_get(ucp_context_h *out)
{
	int rc = 0;
	pthread_mutex_lock(&ctx_mu);
	if (!ctx) {
		ucp_config_t *conf;
		ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES |
						 UCP_PARAM_FIELD_MT_WORKERS_SHARED |
						 UCP_PARAM_FIELD_NAME,
				   .features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP,
				   .mt_workers_shared = 1,
				   .name = "openlake-node"};
		if (ucp_config_read(NULL, NULL, &conf) != UCS_OK) {
			rc = -ENOMEM;
		} else {
			(void)!ol_ucx_config_device(conf, ctx_dev); /* -ENODEV: UCX chooses */
			rc = ucp_init(&pp, conf, &ctx) == UCS_OK ? 0 : -EIO;
			ucp_config_release(conf);
		}
	}
	if (!rc) {
		ctx_refs++;
		*out = ctx;
	}
	pthread_mutex_unlock(&ctx_mu);
	return rc;
}

static void
ctx_put(void)
{
	pthread_mutex_lock(&ctx_mu);
	if (ctx_refs && --ctx_refs == 0) {
		ucp_cleanup(ctx);
		ctx = NULL;
	}
	pthread_mutex_unlock(&ctx_mu);
}

int
ol_node_ucx_worker_new(ucp_worker_h *w, int *efd)
{
	ucp_context_h c;
	int rc = ctx_get(&c);
	if (rc)
		return rc;
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	if (ucp_worker_create(c, &wp, w) != UCS_OK) {
		ctx_put();
		return -EIO;
	}
	if (ucp_worker_get_efd(*w, efd) != UCS_OK) {
		ucp_worker_destroy(*w);
		ctx_put();
		return -EIO;
	}
	return 0;
}

void
ol_node_ucx_worker_free(ucp_worker_h w)
{
	ucp_worker_destroy(w);
	ctx_put();
}

/* ---- client: one blocking connection ---- */

struct ol_node_ucx {
	ucp_worker_h w;
	ucp_ep_h ep;
	int efd;
	ucs_status_t err;     /* the endpoint failed */
	void *req;	      /* the request being waited for */
	void *stuck;	      /* one that timed out: cancelled by the close */
	_Atomic bool aborted; /* ol_node_ucx_abort (any thread) */
	ucp_dt_iov_t iov[16];
};

static void
cl_ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	struct ol_node_ucx *x = arg;
	(void)ep;
	x->err = st;
}

int
ol_node_ucx_connect(const char *addr, struct ol_node_ucx **out)
{
	*out = NULL;
	struct ol_io_addr a;
	int rc = ol_io_resolve(addr, &a, 1);
	if (rc < 0)
		return rc;
	struct ol_node_ucx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	rc = ol_node_ucx_worker_new(&x->w, &x->efd);
	if (rc) {
		free(x);
		return rc;
	}
	ucs_status_t st =
	    ol_ucx_connect(x->w, (const struct sockaddr *)&a.ss, a.len, cl_ep_err, x, &x->ep);
	if (st != UCS_OK) {
		ol_node_ucx_close(x);
		return ol_ucx_errno(st);
	}
	*out = x;
	return 0;
}

/* A failed endpoint: nobody listens there (UCX's connection manager says "not connected"),
 * or the connection broke (closed, reset, timed out by UCX's keepalive: the caller's
 * deadline is the plane's only timeout). */
static int
ep_errno(ucs_status_t st)
{
	return st == UCS_ERR_NOT_CONNECTED || st == UCS_ERR_UNREACHABLE || st == UCS_ERR_REJECTED
		   ? -ECONNREFUSED
		   : -ECONNRESET;
}

static bool
req_done(void *arg)
{
	struct ol_node_ucx *x = arg;
	return x->err != UCS_OK || atomic_load(&x->aborted) ||
	       ucp_request_check_status(x->req) != UCS_INPROGRESS;
}

/* Wait for x->req; on a timeout or a failed endpoint it is left for the close to cancel. */
static int
cl_wait(struct ol_node_ucx *x, void *req, int timeout_ms, size_t *len)
{
	if (UCS_PTR_IS_ERR(req))
		return ol_ucx_errno(UCS_PTR_STATUS(req));
	x->req = req;
	int rc = ol_ucx_wait(x->w, x->efd, req_done, x, timeout_ms);
	ucs_status_t st =
	    len ? ucp_stream_recv_request_test(req, len) : ucp_request_check_status(req);
	x->req = NULL;
	if (st == UCS_INPROGRESS) {
		x->stuck = req;
		return atomic_load(&x->aborted) ? -ECANCELED : rc ? rc : ep_errno(x->err);
	}
	ucp_request_free(req);
	if (st != UCS_OK) /* the endpoint's error says more than the request's cancel */
		return x->err != UCS_OK ? ep_errno(x->err) : ol_ucx_errno(st);
	return 0;
}

ssize_t
ol_node_ucx_read(struct ol_node_ucx *x, void *buf, size_t len, int timeout_ms)
{
	if (atomic_load(&x->aborted))
		return -ECANCELED;
	if (x->stuck)
		return -ECONNRESET;
	size_t n = 0; /* bytes that came before the endpoint failed are still read (a refusal) */
	ucp_request_param_t p = {.op_attr_mask = 0};
	void *req = ucp_stream_recv_nbx(x->ep, buf, len, &n, &p);
	if (req == NULL)
		return (ssize_t)n;
	if (UCS_PTR_IS_ERR(req) && x->err != UCS_OK)
		return ep_errno(x->err);
	int rc = cl_wait(x, req, timeout_ms, &n);
	return rc ? rc : (ssize_t)n;
}

int
ol_node_ucx_writev(struct ol_node_ucx *x, const struct iovec *iov, int n, int timeout_ms)
{
	if (atomic_load(&x->aborted))
		return -ECANCELED;
	if (x->err != UCS_OK || x->stuck)
		return x->err != UCS_OK ? ep_errno(x->err) : -ECONNRESET;
	if (n < 1 || n > 16)
		return -EINVAL;
	for (int i = 0; i < n; i++) /* kept in x: a send that times out may still read them */
		x->iov[i] = (ucp_dt_iov_t){iov[i].iov_base, iov[i].iov_len};
	ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
				 .datatype = ucp_dt_make_iov()};
	void *req = ucp_stream_send_nbx(x->ep, x->iov, (size_t)n, &p);
	return req == NULL ? 0 : cl_wait(x, req, timeout_ms, NULL);
}

void
ol_node_ucx_abort(struct ol_node_ucx *x)
{
	atomic_store(&x->aborted, true);
	(void)ucp_worker_signal(x->w); /* any thread: the wait on the worker's fd returns */
}

static bool
close_done(void *arg)
{
	return ucp_request_check_status(arg) != UCS_INPROGRESS;
}

void
ol_node_ucx_close(struct ol_node_ucx *x)
{
	if (!x)
		return;
	if (x->ep) {
		ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					 .flags = UCP_EP_CLOSE_FLAG_FORCE};
		void *req = ucp_ep_close_nbx(x->ep, &p);
		if (req && !UCS_PTR_IS_ERR(req)) {
			(void)!ol_ucx_wait(x->w, x->efd, close_done, req, 2000);
			ucp_request_free(req);
		}
	}
	if (x->stuck) { /* cancelled by the close; freed when it completes */
		while (ucp_worker_progress(x->w))
			;
		ucp_request_free(x->stuck);
	}
	ol_node_ucx_worker_free(x->w);
	free(x);
}
