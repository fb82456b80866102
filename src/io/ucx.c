/* io/ucx.c - UCX helpers the KV pool's and the node plane's transports share (io/ucx.h). */
#include "io/ucx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int
ol_ucx_errno(ucs_status_t st)
{
	switch (st) {
	case UCS_OK:
		return 0;
	case UCS_ERR_TIMED_OUT:
	case UCS_ERR_ENDPOINT_TIMEOUT:
		return -ETIMEDOUT;
	case UCS_ERR_REJECTED:
		return -ECONNREFUSED;
	case UCS_ERR_UNREACHABLE:
		return -EHOSTUNREACH;
	case UCS_ERR_NO_MEMORY:
		return -ENOMEM;
	case UCS_ERR_INVALID_PARAM:
		return -EPROTO;
	default:
		return -ECONNRESET;
	}
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int
ol_ucx_wait(ucp_worker_h w, int efd, bool (*done)(void *arg), void *arg, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		while (ucp_worker_progress(w))
			;
		if (done(arg))
			return 0;
		ucs_status_t st = ucp_worker_arm(w);
		if (st == UCS_ERR_BUSY)
			continue;
		if (st != UCS_OK)
			return ol_ucx_errno(st);
		uint64_t now = now_ms();
		if (now >= end)
			return -ETIMEDOUT;
		struct pollfd pf = {efd, POLLIN, 0};
		poll(&pf, 1, (int)(end - now));
	}
}

ucs_status_t
ol_ucx_listen(ucp_worker_h w, const struct sockaddr *sa, socklen_t len,
	      ucp_listener_conn_callback_t cb, void *arg, ucp_listener_h *out, unsigned *port)
{
	ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
						  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
				    .sockaddr = {sa, len},
				    .conn_handler = {cb, arg}};
	ucs_status_t st = ucp_listener_create(w, &lp, out);
	for (int i = 0; st == UCS_ERR_BUSY && i < 40; i++) {
		usleep(50 * 1000);
		st = ucp_listener_create(w, &lp, out);
	}
	if (st != UCS_OK)
		return st;
	ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
	if (ucp_listener_query(*out, &la) == UCS_OK)
		*port = ntohs(la.sockaddr.ss_family == AF_INET6
				  ? ((const struct sockaddr_in6 *)&la.sockaddr)->sin6_port
				  : ((const struct sockaddr_in *)&la.sockaddr)->sin_port);
	return UCS_OK;
}

static ucs_status_t
ep_create(ucp_worker_h w, ucp_ep_params_t *ep, ucp_err_handler_cb_t err, void *arg, ucp_ep_h *out)
{
	ep->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
	ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
	ep->err_handler = (ucp_err_handler_t){err, arg};
	ucs_status_t st = ucp_ep_create(w, ep, out);
	if (st != UCS_OK)
		*out = NULL;
	return st;
}

ucs_status_t
ol_ucx_connect(ucp_worker_h w, const struct sockaddr *sa, socklen_t len, ucp_err_handler_cb_t err,
	       void *arg, ucp_ep_h *out)
{
	ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
			      .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
			      .sockaddr = {sa, len}};
	return ep_create(w, &ep, err, arg, out);
}

ucs_status_t
ol_ucx_accept(ucp_worker_h w, ucp_conn_request_h req, ucp_err_handler_cb_t err, void *arg,
	      ucp_ep_h *out)
{
	ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req};
	return ep_create(w, &ep, err, arg, out);
}

int
ol_ucx_config_device(ucp_config_t *conf, const char *dev)
{
	char path[160], v[96];
	struct stat st;

	if (!dev || !dev[0] || getenv("UCX_NET_DEVICES"))
		return 0;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%.64s", dev);
	char *colon = strchr(path + strlen("/sys/class/infiniband/"), ':');
	if (colon)
		*colon = '\0'; /* "mlx5_0:1": the device is mlx5_0 */
	if (stat(path, &st) != 0)
		return -ENODEV;
	snprintf(v, sizeof(v), strchr(dev, ':') ? "%.64s" : "%.64s:1", dev);
	return ucp_config_modify(conf, "NET_DEVICES", v) == UCS_OK ? 0 : -EINVAL;
}
