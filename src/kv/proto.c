/* kv/proto.c - pure encoders/decoders of the KV wire protocol. */
#include "kv/proto.h"

#include <errno.h>
#include <string.h>

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t
get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void
ol_kvp_hdr_encode(uint8_t out[OL_KVP_HDR], const struct ol_kvp_hdr *h)
{
	put32(out, h->magic);
	put16(out + 4, h->version);
	out[6] = h->op;
	out[7] = h->flags;
	put32(out + 8, h->count);
	put32(out + 12, (uint32_t)h->status);
	put64(out + 16, h->req_id);
	put64(out + 24, h->body_len);
}

int
ol_kvp_hdr_decode(const uint8_t *buf, size_t len, struct ol_kvp_hdr *h)
{
	if (len < OL_KVP_HDR)
		return 0;
	h->magic = get32(buf);
	if (h->magic != OL_KVP_MAGIC)
		return -EBADMSG;
	h->version = get16(buf + 4);
	if (h->version != OL_KVP_VERSION)
		return -EPROTONOSUPPORT;
	h->op = buf[6];
	h->flags = buf[7];
	h->count = get32(buf + 8);
	h->status = (int32_t)get32(buf + 12);
	h->req_id = get64(buf + 16);
	h->body_len = get64(buf + 24);
	return OL_KVP_HDR;
}

static int
op_has_entries(uint8_t op)
{
	return op != OL_KVP_HELLO && op != OL_KVP_STATS && op != OL_KVP_AUTH && op != OL_KVP_VIEW;
}

int
ol_kvp_check_req(const struct ol_kvp_hdr *h, const struct ol_kvp_limits *lim)
{
	if (h->op < 1 || h->op > OL_KVP_OP_MAX || (h->flags & OL_KVP_F_REPLY))
		return -EINVAL;
	if ((h->flags & OL_KVP_F_NOREPLY) && h->op != OL_KVP_RELEASE)
		return -EINVAL;
	if (!op_has_entries(h->op)) {
		if (h->count != 0)
			return -EINVAL;
		return h->body_len <= OL_KVP_MAX_BLOB ? 0 : -EMSGSIZE;
	}
	if (h->count > lim->max_batch || h->count > OL_KVP_MAX_BATCH)
		return -EMSGSIZE;
	if (h->op == OL_KVP_EVENTS && h->count != 1)
		return -EINVAL;
	uint64_t ents = (uint64_t)h->count * OL_KVP_REQ_ENT;
	if (h->op == OL_KVP_PUT) {
		uint64_t max = ents + (uint64_t)h->count * lim->max_block;
		return h->body_len >= ents && h->body_len <= max ? 0 : -EMSGSIZE;
	}
	return h->body_len == ents ? 0 : -EMSGSIZE;
}

int
ol_kvp_check_put_ent(const struct ol_kvp_req_ent *e, uint64_t left, const struct ol_kvp_limits *lim)
{
	return e->len <= lim->max_block && e->len <= left ? 0 : -EMSGSIZE;
}

void
ol_kvp_req_ent_encode(uint8_t out[OL_KVP_REQ_ENT], const struct ol_kvp_req_ent *e)
{
	memcpy(out, e->key, OL_KVP_KEY);
	put64(out + 32, e->len);
	put64(out + 40, e->off);
	put64(out + 48, e->seq);
}

void
ol_kvp_req_ent_decode(const uint8_t in[OL_KVP_REQ_ENT], struct ol_kvp_req_ent *e)
{
	memcpy(e->key, in, OL_KVP_KEY);
	e->len = get64(in + 32);
	e->off = get64(in + 40);
	e->seq = get64(in + 48);
}

void
ol_kvp_rep_ent_encode(uint8_t out[OL_KVP_REP_ENT], const struct ol_kvp_rep_ent *e)
{
	put32(out, (uint32_t)e->status);
	put32(out + 4, e->rsv);
	put64(out + 8, e->len);
	put64(out + 16, e->off);
	put64(out + 24, e->seq);
}

void
ol_kvp_rep_ent_decode(const uint8_t in[OL_KVP_REP_ENT], struct ol_kvp_rep_ent *e)
{
	e->status = (int32_t)get32(in);
	e->rsv = get32(in + 4);
	e->len = get64(in + 8);
	e->off = get64(in + 16);
	e->seq = get64(in + 24);
}

/* HELLO: u32 version, u32 flags, u16 ns_len, u16 host_len, ns, host */
int
ol_kvp_hello_encode(uint8_t *out, size_t cap, const struct ol_kvp_hello *h)
{
	size_t need = 12 + (size_t)h->ns_len + h->host_len;
	if (need > cap || h->ns_len > OL_KVP_MAX_NS || h->host_len > OL_KVP_MAX_HOST)
		return -ENOSPC;
	put32(out, h->version);
	put32(out + 4, h->flags);
	put16(out + 8, h->ns_len);
	put16(out + 10, h->host_len);
	if (h->ns_len)
		memcpy(out + 12, h->ns, h->ns_len);
	if (h->host_len)
		memcpy(out + 12 + h->ns_len, h->host, h->host_len);
	return (int)need;
}

int
ol_kvp_hello_decode(const uint8_t *buf, size_t len, struct ol_kvp_hello *h)
{
	if (len < 12)
		return -EINVAL;
	h->version = get32(buf);
	h->flags = get32(buf + 4);
	h->ns_len = get16(buf + 8);
	h->host_len = get16(buf + 10);
	if (h->ns_len > OL_KVP_MAX_NS || h->host_len > OL_KVP_MAX_HOST)
		return -EINVAL;
	if (len != 12 + (size_t)h->ns_len + h->host_len)
		return -EINVAL;
	h->ns = (const char *)buf + 12;
	h->host = (const char *)buf + 12 + h->ns_len;
	return 0;
}

/* WELCOME: u32 flags, u32 max_batch, u64 max_block, shm_size, epoch, seq_off, unit,
 * u16 name_len, name; version 2 adds u32 auth, nonce[32], u16 path_len, path */
int
ol_kvp_welcome_encode(uint8_t *out, size_t cap, const struct ol_kvp_welcome *w)
{
	size_t v1 = 50 + (size_t)w->name_len;
	size_t need = v1 + (w->v2 ? 38 + (size_t)w->path_len : 0);
	if (need > cap || w->name_len > OL_KVP_MAX_HOST || w->path_len > OL_KVP_MAX_HOST)
		return -ENOSPC;
	if (w->v2) {
		put32(out + v1, w->auth);
		memcpy(out + v1 + 4, w->nonce, OL_KVP_NONCE);
		put16(out + v1 + 36, w->path_len);
		if (w->path_len)
			memcpy(out + v1 + 38, w->unix_path, w->path_len);
	}
	put32(out, w->flags);
	put32(out + 4, w->max_batch);
	put64(out + 8, w->max_block);
	put64(out + 16, w->shm_size);
	put64(out + 24, w->epoch);
	put64(out + 32, w->seq_off);
	put64(out + 40, w->unit);
	put16(out + 48, w->name_len);
	if (w->name_len)
		memcpy(out + 50, w->shm_name, w->name_len);
	return (int)need;
}

int
ol_kvp_welcome_decode(const uint8_t *buf, size_t len, struct ol_kvp_welcome *w)
{
	if (len < 50)
		return -EINVAL;
	w->flags = get32(buf);
	w->max_batch = get32(buf + 4);
	w->max_block = get64(buf + 8);
	w->shm_size = get64(buf + 16);
	w->epoch = get64(buf + 24);
	w->seq_off = get64(buf + 32);
	w->unit = get64(buf + 40);
	w->name_len = get16(buf + 48);
	size_t v1 = 50 + (size_t)w->name_len;
	if (w->name_len > OL_KVP_MAX_HOST || len < v1)
		return -EINVAL;
	if (w->max_batch == 0 || w->max_batch > OL_KVP_MAX_BATCH || w->unit == 0)
		return -EINVAL;
	w->shm_name = (const char *)buf + 50;
	w->auth = 0;
	memset(w->nonce, 0, sizeof(w->nonce));
	w->unix_path = NULL;
	w->path_len = 0;
	w->v2 = len > v1;
	if (!w->v2)
		return 0;
	if (len < v1 + 38)
		return -EINVAL;
	w->auth = get32(buf + v1);
	memcpy(w->nonce, buf + v1 + 4, OL_KVP_NONCE);
	w->path_len = get16(buf + v1 + 36);
	if (w->path_len > OL_KVP_MAX_HOST || len != v1 + 38 + (size_t)w->path_len)
		return -EINVAL;
	w->unix_path = w->path_len ? (const char *)buf + v1 + 38 : NULL;
	return 0;
}

size_t
ol_kvp_auth_msg(uint8_t out[OL_KVP_AUTH_MSG], const uint8_t nonce[OL_KVP_NONCE], const char *ns,
		uint16_t ns_len)
{
	static const char tag[16] = "OLKV-AUTH-v2";
	if (ns_len > OL_KVP_MAX_NS)
		ns_len = OL_KVP_MAX_NS;
	memcpy(out, tag, sizeof(tag));
	memcpy(out + 16, nonce, OL_KVP_NONCE);
	if (ns_len)
		memcpy(out + 16 + OL_KVP_NONCE, ns, ns_len);
	return 16 + OL_KVP_NONCE + (size_t)ns_len;
}

int
ol_kvp_parse_request(const uint8_t *buf, size_t len, const struct ol_kvp_limits *lim)
{
	struct ol_kvp_hdr h;
	int r = ol_kvp_hdr_decode(buf, len, &h);
	if (r <= 0)
		return r;
	if ((r = ol_kvp_check_req(&h, lim)) < 0)
		return r;
	if (h.body_len > INT32_MAX - OL_KVP_HDR)
		return -EMSGSIZE;
	if (h.body_len > len - OL_KVP_HDR)
		return 0;
	const uint8_t *body = buf + OL_KVP_HDR;
	if (h.op == OL_KVP_HELLO) {
		struct ol_kvp_hello hello;
		r = ol_kvp_hello_decode(body, h.body_len, &hello);
		return r < 0 ? r : (int)(OL_KVP_HDR + h.body_len);
	}
	if (h.op == OL_KVP_AUTH)
		return h.body_len == OL_KVP_MAC ? (int)(OL_KVP_HDR + h.body_len) : -EMSGSIZE;
	uint64_t pos = 0;
	for (uint32_t i = 0; i < h.count; i++) {
		struct ol_kvp_req_ent e;
		if (h.body_len - pos < OL_KVP_REQ_ENT)
			return -EMSGSIZE;
		ol_kvp_req_ent_decode(body + pos, &e);
		pos += OL_KVP_REQ_ENT;
		if (h.op == OL_KVP_PUT) {
			if ((r = ol_kvp_check_put_ent(&e, h.body_len - pos, lim)) < 0)
				return r;
			pos += e.len;
		}
	}
	if (pos != h.body_len)
		return -EMSGSIZE;
	return (int)(OL_KVP_HDR + h.body_len);
}

int
ol_kvp_view_encode(uint8_t *out, size_t cap, const struct ol_kvp_view *v)
{
	if (v->n > OL_KVP_MAX_VIEW)
		return -EINVAL;
	size_t need = OL_KVP_VIEW_HDR;
	for (uint32_t i = 0; i < v->n; i++)
		need += OL_KVP_VIEW_ENT + v->m[i].addr_len;
	if (need > cap)
		return -ENOSPC;
	put64(out, v->epoch);
	put32(out + 8, v->tag);
	put32(out + 12, v->n);
	uint8_t *p = out + OL_KVP_VIEW_HDR;
	for (uint32_t i = 0; i < v->n; i++) {
		const struct ol_kvp_view_member *m = &v->m[i];
		if (m->addr_len == 0 || m->addr_len > OL_KVP_MAX_VIEW_ADDR)
			return -EINVAL;
		put64(p, m->id);
		put64(p + 8, m->capacity);
		put32(p + 16, m->weight);
		put16(p + 20, m->addr_len);
		put16(p + 22, 0);
		memcpy(p + OL_KVP_VIEW_ENT, m->addr, m->addr_len);
		p += OL_KVP_VIEW_ENT + m->addr_len;
	}
	return (int)need;
}

int
ol_kvp_view_decode(const uint8_t *buf, size_t len, struct ol_kvp_view *v)
{
	if (len < OL_KVP_VIEW_HDR)
		return -EINVAL;
	v->epoch = get64(buf);
	v->tag = get32(buf + 8);
	v->n = get32(buf + 12);
	if (v->n > OL_KVP_MAX_VIEW)
		return -EINVAL;
	size_t off = OL_KVP_VIEW_HDR;
	for (uint32_t i = 0; i < v->n; i++) {
		struct ol_kvp_view_member *m = &v->m[i];
		if (len - off < OL_KVP_VIEW_ENT)
			return -EINVAL;
		const uint8_t *p = buf + off;
		m->id = get64(p);
		m->capacity = get64(p + 8);
		m->weight = get32(p + 16);
		m->addr_len = get16(p + 20);
		off += OL_KVP_VIEW_ENT;
		if (m->addr_len == 0 || m->addr_len > OL_KVP_MAX_VIEW_ADDR ||
		    len - off < m->addr_len)
			return -EINVAL;
		memcpy(m->addr, buf + off, m->addr_len);
		m->addr[m->addr_len] = '\0';
		if (memchr(m->addr, '\0', m->addr_len))
			return -EINVAL;
		off += m->addr_len;
	}
	return off == len ? 0 : -EINVAL;
}

/* FNV-1a over each member, summed (order-independent), then mixed. */
uint32_t
ol_kvp_view_tag(const struct ol_kvp_view *v)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < v->n; i++) {
		const struct ol_kvp_view_member *m = &v->m[i];
		uint64_t h = 0xcbf29ce484222325ull;
		uint8_t b[12];
		put64(b, m->id);
		put32(b + 8, m->weight);
		for (size_t j = 0; j < sizeof(b); j++)
			h = (h ^ b[j]) * 0x100000001b3ull;
		for (size_t j = 0; j < m->addr_len; j++)
			h = (h ^ (uint8_t)m->addr[j]) * 0x100000001b3ull;
		sum += h;
	}
	sum ^= sum >> 29;
	sum *= 0xbf58476d1ce4e5b9ull;
	sum ^= sum >> 32;
	uint32_t t = (uint32_t)sum;
	return t ? t : 1;
}

int
ol_kvp_ucx_req_check(const uint8_t *am_hdr, size_t hlen, uint64_t dlen,
		     const struct ol_kvp_limits *lim, struct ol_kvp_hdr *h)
{
	int r = ol_kvp_hdr_decode(am_hdr, hlen, h);
	if (r <= 0)
		return r == 0 ? -EBADMSG : r;
	if ((r = ol_kvp_check_req(h, lim)) < 0)
		return r;
	uint64_t ents = (uint64_t)h->count * OL_KVP_REQ_ENT;
	if (hlen != OL_KVP_HDR + ents || h->body_len < ents || h->body_len - ents != dlen)
		return -EMSGSIZE;
	if (h->op != OL_KVP_PUT)
		return 0;
	uint64_t left = dlen;
	for (uint32_t i = 0; i < h->count; i++) {
		struct ol_kvp_req_ent e;
		ol_kvp_req_ent_decode(am_hdr + OL_KVP_HDR + (size_t)i * OL_KVP_REQ_ENT, &e);
		if (ol_kvp_check_put_ent(&e, left, lim) < 0)
			return -EMSGSIZE;
		left -= e.len;
	}
	return left == 0 ? 0 : -EMSGSIZE;
}

int
ol_kvp_ucx_get_reply(const uint8_t *am_hdr, size_t hlen, uint64_t dlen, uint32_t count,
		     const uint64_t *cap, struct ol_kvp_rep_ent *re)
{
	struct ol_kvp_hdr h;
	if (ol_kvp_hdr_decode(am_hdr, hlen, &h) <= 0 || h.count != count || h.body_len != dlen ||
	    hlen != OL_KVP_HDR + (size_t)count * OL_KVP_REP_ENT)
		return -EPROTO;
	uint64_t sum = 0;
	for (uint32_t i = 0; i < count; i++) {
		ol_kvp_rep_ent_decode(am_hdr + OL_KVP_HDR + (size_t)i * OL_KVP_REP_ENT, &re[i]);
		if (re[i].status != 0)
			continue;
		if (re[i].len > cap[i] || re[i].len > dlen - sum)
			return -EPROTO;
		sum += re[i].len;
	}
	return sum == dlen ? 0 : -EPROTO;
}

int
ol_kvp_events_encode(uint8_t *out, size_t cap, const struct ol_kvp_events *ev)
{
	if (ev->n > OL_KVP_MAX_EVENTS || (ev->n && !ev->keys))
		return -EINVAL;
	size_t need = OL_KVP_EVENTS_HDR + (size_t)ev->n * OL_KVP_KEY;
	if (cap < need)
		return -ENOSPC;
	put64(out, ev->next);
	put32(out + 8, ev->flags);
	put32(out + 12, ev->n);
	if (ev->n)
		memmove(out + OL_KVP_EVENTS_HDR, ev->keys, (size_t)ev->n * OL_KVP_KEY);
	return (int)need;
}

int
ol_kvp_events_decode(const uint8_t *buf, size_t len, uint32_t max, struct ol_kvp_events *ev)
{
	if (len < OL_KVP_EVENTS_HDR)
		return -EINVAL;
	ev->next = get64(buf);
	ev->flags = get32(buf + 8);
	ev->n = get32(buf + 12);
	ev->keys = buf + OL_KVP_EVENTS_HDR;
	if (ev->n > max || ev->n > OL_KVP_MAX_EVENTS || (ev->flags & ~OL_KVP_EVENTS_LOST))
		return -EINVAL;
	return len == OL_KVP_EVENTS_HDR + (size_t)ev->n * OL_KVP_KEY ? 0 : -EINVAL;
}
