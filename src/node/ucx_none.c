/* node/ucx_none.c - the node plane built without UCX (no libucx-dev): plane_transport = "ucx"
 * and ucx:// peers are refused with -EPROTONOSUPPORT; nothing else here runs. */
#include "node/ucx_int.h"

#include <errno.h>

bool
ol_node_ucx_built(void)
{
	return false;
}

int
ol_node_ucx_device(const char *dev)
{
	(void)dev;
	return -EPROTONOSUPPORT;
}

int
ol_node_ucx_connect(const char *addr, struct ol_node_ucx **out)
{
	(void)addr;
	*out = NULL;
	return -EPROTONOSUPPORT;
}

ssize_t
ol_node_ucx_read(struct ol_node_ucx *x, void *buf, size_t len, int timeout_ms)
{
	(void)x, (void)buf, (void)len, (void)timeout_ms;
	return -EPROTONOSUPPORT;
}

int
ol_node_ucx_writev(struct ol_node_ucx *x, const struct iovec *iov, int n, int timeout_ms)
{
	(void)x, (void)iov, (void)n, (void)timeout_ms;
	return -EPROTONOSUPPORT;
}

void
ol_node_ucx_close(struct ol_node_ucx *x)
{
	(void)x;
}

void
ol_node_ucx_abort(struct ol_node_ucx *x)
{
	(void)x;
}

int
ol_node_ucx_listen(struct ol_node_server *s, struct nloop *nl, struct ol_loop *l, const char *addr,
		   struct ol_node_ucx_srv **out, unsigned *port)
{
	(void)s, (void)nl, (void)l, (void)addr, (void)port;
	*out = NULL;
	return -EPROTONOSUPPORT;
}

void
ol_node_ucx_srv_start(struct ol_node_ucx_srv *u)
{
	(void)u;
}

void
ol_node_ucx_srv_stop(struct ol_node_ucx_srv *u)
{
	(void)u;
}

int
ol_node_ucx_recv(struct nconn *c, void *buf, size_t len, bool all)
{
	(void)c, (void)buf, (void)len, (void)all;
	return -EPROTONOSUPPORT;
}

int
ol_node_ucx_send(struct nconn *c, const void *buf, size_t len)
{
	(void)c, (void)buf, (void)len;
	return -EPROTONOSUPPORT;
}

void
ol_node_ucx_shut(struct nconn *c)
{
	(void)c;
}

void
ol_node_ucx_linger(struct nconn *c, unsigned ms)
{
	(void)c, (void)ms;
}

void
ol_node_ucx_quiet(struct nconn *c)
{
	(void)c;
}

void
ol_node_ucx_conn_fini(struct nconn *c)
{
	(void)c;
}
