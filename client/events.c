/* client/events.c - ol_kv_events: a node's removal events for this client's namespace (op
 * EVENTS, docs/kv-protocol.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "kv/net.h"

#define OL_API __attribute__((visibility("default")))

/* One EVENTS on node nd. Keys count or -errno; *stale: it failed on a pooled connection the
 * server had closed (a restart), worth one more try. */
static int
events_once(struct ol_client *c, struct olc_node *nd, uint64_t from, uint8_t (*keys)[32],
	    uint32_t max, uint64_t *next, uint32_t *flags, bool *stale)
{
	struct olc_conn cn;
	*stale = false;
	int r = olc_conn_get(c, nd, &cn);
	if (r < 0)
		return r;
	if (!cn.has_events) { /* an older server would close the connection on the op */
		olc_conn_put(c, nd, &cn, true);
		return -ENOTSUP;
	}
	struct ol_kvp_req_ent e = {.len = max, .seq = from};
	uint8_t ent[OL_KVP_REQ_ENT];
	ol_kvp_req_ent_encode(ent, &e);
	struct iovec iov[2] = {{NULL, 0}, {ent, sizeof(ent)}}; /* [0]: the header (one write) */
	struct ol_kvp_hdr h = {.op = OL_KVP_EVENTS, .count = 1, .body_len = sizeof(ent)}, rp;
	size_t cap = OL_KVP_EVENTS_HDR + (size_t)OL_KVP_MAX_EVENTS * OL_KVP_KEY;
	uint8_t *buf = NULL;
	r = olc_send(c, &cn, &h, iov, 2);
	if (r == 0 && (r = olc_recv_hdr(&cn, &h, &rp)) == 0 && rp.body_len > cap)
		r = -EPROTO;
	if (r == 0 && !(buf = malloc(rp.body_len ? rp.body_len : 1)))
		r = -ENOMEM;
	if (r == 0)
		r = olc_read(&cn, buf, rp.body_len);
	*stale = cn.reused && (r == -ECONNRESET || r == -EPIPE);
	olc_conn_put(c, nd, &cn, r == 0);
	if (*stale)
		olc_node_drop_idle(nd);
	else if (r < 0 && r != -ENOMEM && r != -EPROTO)
		olc_node_down(c, nd, r);
	struct ol_kvp_events ev;
	if (r == 0 && ol_kvp_events_decode(buf, rp.body_len, max, &ev) < 0)
		r = -EPROTO;
	if (r == 0) {
		if (ev.n) /* keys may be NULL with max 0 */
			memcpy(keys, ev.keys, (size_t)ev.n * OL_KVP_KEY);
		*next = ev.next;
		*flags = ev.flags & OL_KVP_EVENTS_LOST ? OL_KV_EVENTS_LOST : 0;
		r = (int)ev.n;
	}
	free(buf);
	return r;
}

OL_API int
ol_kv_events(struct ol_client *c, size_t node, uint64_t from, uint8_t (*keys)[32], size_t max,
	     uint64_t *next, uint32_t *flags)
{
	if (!c || !next || !flags || (max && !keys))
		return -EINVAL;
	olc_view_maybe_refresh(c); /* the members of a cluster, when it is one */
	if (node >= atomic_load(&c->n_nodes))
		return -ERANGE;
	uint32_t m = max < OL_KVP_MAX_EVENTS ? (uint32_t)max : OL_KVP_MAX_EVENTS;
	bool stale;
	int r = events_once(c, &c->nodes[node], from, keys, m, next, flags, &stale);
	if (stale)
		r = events_once(c, &c->nodes[node], from, keys, m, next, flags, &stale);
	return r;
}
