/* client/ucx_none.c - libopenlake built without UCX: opts.device "ucx" / "rdma" / a NIC and
 * ucx:// nodes are refused by ol_client_new (-EPROTONOSUPPORT, logged); nothing here runs. */
#include <errno.h>

#include "client_int.h"

bool
olc_ucx_built(void)
{
	return false;
}

int
olc_ucx_init(struct ol_client *c, const char *dev)
{
	(void)c;
	(void)dev;
	return -EPROTONOSUPPORT;
}

void
olc_ucx_fini(struct ol_client *c)
{
	(void)c;
}

int
olc_ucx_connect(struct ol_client *c, struct olc_node *nd, struct olc_conn *cn)
{
	(void)c;
	(void)nd;
	(void)cn;
	return -EPROTONOSUPPORT;
}

uint32_t
olc_ucx_max_batch(const struct olc_conn *cn)
{
	(void)cn;
	return 1;
}

void
olc_ucx_close(struct olc_conn *cn)
{
	(void)cn;
}

int
olc_ucx_send(struct ol_client *c, struct olc_conn *cn, struct ol_kvp_hdr *h, struct iovec *iov,
	     int n)
{
	(void)c;
	(void)cn;
	(void)h;
	(void)iov;
	(void)n;
	return -EPROTONOSUPPORT;
}

int
olc_ucx_send_call(struct ol_client *c, struct olc_conn *cn, struct olc_call *call,
		  const uint8_t *ents, const size_t *idx)
{
	(void)c;
	(void)cn;
	(void)call;
	(void)ents;
	(void)idx;
	return -EPROTONOSUPPORT;
}

int
olc_ucx_recv_hdr_ex(struct olc_conn *cn, const struct ol_kvp_hdr *rq, struct ol_kvp_hdr *rp,
		    void *extra, size_t extra_len, unsigned timeout_ms)
{
	(void)cn;
	(void)rq;
	(void)rp;
	(void)extra;
	(void)extra_len;
	(void)timeout_ms;
	return -EPROTONOSUPPORT;
}

int
olc_ucx_recv_get(struct ol_client *c, struct olc_conn *cn, struct olc_call *call)
{
	(void)c;
	(void)cn;
	(void)call;
	return -EPROTONOSUPPORT;
}

int
olc_ucx_read(struct olc_conn *cn, void *buf, size_t len)
{
	(void)cn;
	(void)buf;
	(void)len;
	return -EPROTONOSUPPORT;
}
