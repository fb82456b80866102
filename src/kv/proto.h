/* kv/proto.h - the KV pool wire protocol (docs/kv-protocol.md): pure encoders and decoders
 * over byte buffers, shared by the server and libopenlake. No sockets, no logging, no malloc.
 *
 * A frame = 32-byte header + body. Body = count fixed-size entries; in PUT requests each
 * entry is followed by its value; in GET replies each OK entry is followed by its value and
 * the header's body_len is 0 (streamed: the server pins, sends, unpins one entry at a time).
 * HELLO and STATS carry an op-specific blob. All integers little-endian. */
#ifndef OL_KV_PROTO_H
#define OL_KV_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define OL_KVP_MAGIC	 0x564b4c4fu /* "OLKV" as bytes on the wire */
#define OL_KVP_VERSION	 1
#define OL_KVP_HDR	 32
#define OL_KVP_REQ_ENT	 56 /* key[32] len off seq */
#define OL_KVP_REP_ENT	 32 /* status rsv len off seq */
#define OL_KVP_KEY	 32
#define OL_KVP_MAX_BATCH 1024
#define OL_KVP_MAX_NS	 1024
#define OL_KVP_MAX_HOST	 256
#define OL_KVP_MAX_BLOB	 (1u << 20) /* HELLO/STATS bodies */

enum ol_kvp_op {
	OL_KVP_HELLO = 1,
	OL_KVP_PUT = 2,
	OL_KVP_GET = 3,
	OL_KVP_EXISTS = 4,
	OL_KVP_DELETE = 5,
	OL_KVP_STATS = 6,
	OL_KVP_ALLOC = 7,
	OL_KVP_COMMIT = 8,
	OL_KVP_LOOKUP = 9,
	OL_KVP_RELEASE = 10,
	OL_KVP_AUTH = 11,   /* HELLO version 2: body = mac[32] (see ol_kvp_auth_msg) */
	OL_KVP_VIEW = 12,   /* the pool's live members (WELCOME flag OL_KVP_WELCOME_VIEW) */
	OL_KVP_LEASE = 13,  /* entry len = ttl ms (0: end the lease); WELCOME flag LEASE */
	OL_KVP_EVENTS = 14, /* the namespace's removed keys since a sequence; WELCOME flag EVENTS */
	OL_KVP_COMMIT_ALLOC = 15, /* COMMIT entries (off != 0, under any key) and reservations of
				     the next slots (off = seq = 0), in one frame; WELCOME flag
				     COMMIT_ALLOC */
	OL_KVP_OP_MAX = 15
};

#define OL_KVP_F_NOREPLY 0x01 /* request: send no reply (RELEASE only) */
#define OL_KVP_F_REPLY	 0x80 /* set on every reply */

#define OL_KVP_HELLO_LOCAL    0x1 /* request: wants the shm path; reply: granted */
#define OL_KVP_HELLO_TOKEN    0x2 /* request: has a token and will AUTH */
#define OL_KVP_HELLO_V2	      2	  /* HELLO body version with access control (WELCOME v2) */
#define OL_KVP_WELCOME_VIEW   0x2 /* reply: the server answers VIEW and tags reply entries */
#define OL_KVP_WELCOME_LEASE  0x4 /* reply: the server answers LEASE (older ones close on it) */
#define OL_KVP_WELCOME_EVENTS 0x8 /* reply: the server answers EVENTS (older ones close on it) */
#define OL_KVP_WELCOME_COMMIT_ALLOC                                                                \
	0x10 /* reply: the server answers COMMIT_ALLOC (older ones close on it) */
#define OL_KVP_NONCE	32
#define OL_KVP_MAC	32 /* HMAC-SHA256 */
#define OL_KVP_AUTH_MSG (16 + OL_KVP_NONCE + OL_KVP_MAX_NS)

struct ol_kvp_hdr {
	uint32_t magic;
	uint16_t version;
	uint8_t op;
	uint8_t flags;
	uint32_t count;	 /* entries */
	int32_t status;	 /* reply: 0 or -errno for the whole frame; request: 0 */
	uint64_t req_id; /* echoed in the reply */
	uint64_t body_len;
};

struct ol_kvp_req_ent {
	uint8_t key[OL_KVP_KEY];
	uint64_t len; /* PUT/ALLOC: value size; GET: receive capacity; COMMIT: value size;
			 LEASE: the lease's ttl in ms (0 = end it); EVENTS: max keys */
	uint64_t off; /* COMMIT/RELEASE: slot offset in the shm; COMMIT_ALLOC: 0 = reserve */
	uint64_t seq; /* COMMIT/RELEASE: slot sequence; EVENTS: the sequence to start from */
};

struct ol_kvp_rep_ent {
	int32_t status; /* enum ol_kv_status */
	uint32_t rsv;
	uint64_t len; /* value size; COMMIT_ALLOC reservation: how long (ms) it is kept */
	uint64_t off; /* ALLOC/LOOKUP: slot offset in the shm */
	uint64_t seq; /* ALLOC/LOOKUP: slot sequence to check after the copy */
};

struct ol_kvp_hello {
	uint32_t version;
	uint32_t flags;
	const char *ns; /* not NUL-terminated */
	uint16_t ns_len;
	const char *host; /* host identity (boot id): same string = same machine */
	uint16_t host_len;
};

struct ol_kvp_welcome {
	uint32_t flags;
	uint32_t max_batch;
	uint64_t max_block;
	uint64_t shm_size;
	uint64_t epoch;	  /* changes at each server start: remap the shm when it does */
	uint64_t seq_off; /* offset of the u64 slot-sequence table in the shm */
	uint64_t unit;	  /* the table has one u64 per unit bytes of the shm */
	const char *shm_name;
	uint16_t name_len;
	/* version 2 (sent to HELLO version >= 2 only; decode sets them 0 for a version 1 blob) */
	uint32_t auth;		     /* 1: AUTH required before any other op */
	uint8_t nonce[OL_KVP_NONCE]; /* this connection's AUTH challenge */
	const char *unix_path;	     /* the Unix socket that grants the shm path, or NULL */
	uint16_t path_len;
	uint8_t v2; /* encode: append the version 2 fields */
};

/* VIEW reply body: u64 epoch, u32 tag, u32 n, then n members of
 * u64 id, u64 capacity, u32 weight, u16 addr_len, u16 0, addr (not NUL-terminated).
 * tag = ol_kvp_view_tag of the members: the same list gives the same tag on every node; every
 * reply entry of the server carries it in rsv (0 = no view), so a client sees a change. */
#define OL_KVP_MAX_VIEW	     256
#define OL_KVP_VIEW_HDR	     16
#define OL_KVP_VIEW_ENT	     24
#define OL_KVP_MAX_VIEW_ADDR 255
struct ol_kvp_view_member {
	uint64_t id;
	uint64_t capacity;
	uint32_t weight;
	uint16_t addr_len;
	char addr[OL_KVP_MAX_VIEW_ADDR + 1]; /* NUL-terminated after decode */
};
struct ol_kvp_view {
	uint64_t epoch; /* the cluster's epoch (etcd revision); 0 = a node without a cluster */
	uint32_t tag;
	uint32_t n;
	struct ol_kvp_view_member m[OL_KVP_MAX_VIEW];
};
/* Encode v (n <= OL_KVP_MAX_VIEW): bytes written or -ENOSPC / -EINVAL. */
int ol_kvp_view_encode(uint8_t *out, size_t cap, const struct ol_kvp_view *v);
/* Decode: 0 or -EINVAL (lengths inconsistent, too many members, an empty or long address). */
int ol_kvp_view_decode(const uint8_t *buf, size_t len, struct ol_kvp_view *v);
/* A 32-bit tag of the members (ids, weights, addresses; order-independent), never 0. */
uint32_t ol_kvp_view_tag(const struct ol_kvp_view *v);

/* EVENTS (request: exactly one entry, key unused, len = max keys, seq = the sequence to start
 * from, OL_KVP_EVENTS_NOW = none, only the next sequence). Reply body: u64 next, u32 flags,
 * u32 n, then n removed keys of 32 bytes, oldest first (the reply header's count is 0). */
#define OL_KVP_MAX_EVENTS  1023 /* keys in one reply: the body stays within 32 KiB */
#define OL_KVP_EVENTS_HDR  16
#define OL_KVP_EVENTS_NOW  UINT64_MAX
#define OL_KVP_EVENTS_LOST 0x1 /* flags: the server dropped events past the asked sequence */
struct ol_kvp_events {
	uint64_t next; /* ask from here next time */
	uint32_t flags;
	uint32_t n;
	const uint8_t *keys; /* n * 32 bytes (decode: into the buffer) */
};
/* Encode the reply (n <= OL_KVP_MAX_EVENTS): bytes written or -ENOSPC / -EINVAL. */
int ol_kvp_events_encode(uint8_t *out, size_t cap, const struct ol_kvp_events *ev);
/* Decode a reply of len bytes: 0 or -EINVAL (n past max or OL_KVP_MAX_EVENTS, len != 16 +
 * n * 32, unknown flags). */
int ol_kvp_events_decode(const uint8_t *buf, size_t len, uint32_t max, struct ol_kvp_events *ev);

/* Limits a receiver enforces on a request header. */
struct ol_kvp_limits {
	uint32_t max_batch;
	uint64_t max_block;
};

void ol_kvp_hdr_encode(uint8_t out[OL_KVP_HDR], const struct ol_kvp_hdr *h);
/* Decode a header: returns OL_KVP_HDR, 0 if len < OL_KVP_HDR, -EBADMSG (magic),
 * -EPROTONOSUPPORT (version). Fields are not range-checked: use ol_kvp_check_req. */
int ol_kvp_hdr_decode(const uint8_t *buf, size_t len, struct ol_kvp_hdr *h);
/* Check a request header: known op, no reply flag, count <= limits (EVENTS: exactly 1),
 * body_len consistent with count for ops without payload (PUT: within
 * [entries, entries + count * max_block]). 0 or -EINVAL / -EMSGSIZE. */
int ol_kvp_check_req(const struct ol_kvp_hdr *h, const struct ol_kvp_limits *lim);
/* PUT bodies interleave entries and values: ent, value, ent, value... Check one entry whose
 * value must fit in the left bytes of the body. 0 or -EMSGSIZE. */
int ol_kvp_check_put_ent(const struct ol_kvp_req_ent *e, uint64_t left,
			 const struct ol_kvp_limits *lim);

void ol_kvp_req_ent_encode(uint8_t out[OL_KVP_REQ_ENT], const struct ol_kvp_req_ent *e);
void ol_kvp_req_ent_decode(const uint8_t in[OL_KVP_REQ_ENT], struct ol_kvp_req_ent *e);
void ol_kvp_rep_ent_encode(uint8_t out[OL_KVP_REP_ENT], const struct ol_kvp_rep_ent *e);
void ol_kvp_rep_ent_decode(const uint8_t in[OL_KVP_REP_ENT], struct ol_kvp_rep_ent *e);

/* HELLO body: encode returns bytes written or -ENOSPC; decode returns 0 or -EINVAL (ns and host
 * point into buf). */
int ol_kvp_hello_encode(uint8_t *out, size_t cap, const struct ol_kvp_hello *h);
int ol_kvp_hello_decode(const uint8_t *buf, size_t len, struct ol_kvp_hello *h);
int ol_kvp_welcome_encode(uint8_t *out, size_t cap, const struct ol_kvp_welcome *w);
int ol_kvp_welcome_decode(const uint8_t *buf, size_t len, struct ol_kvp_welcome *w);

/* The bytes an AUTH mac signs: "OLKV-AUTH-v2" NUL*4, nonce, namespace. The client sends
 * HMAC-SHA256(key = its token, these bytes). Returns the length (<= OL_KVP_AUTH_MSG). */
size_t ol_kvp_auth_msg(uint8_t out[OL_KVP_AUTH_MSG], const uint8_t nonce[OL_KVP_NONCE],
		       const char *ns, uint16_t ns_len);

/* Parse one complete request frame held in buf (the fuzz target's entry): header, checks,
 * entries, payload lengths. Returns bytes consumed, 0 = need more, -errno = malformed. */
int ol_kvp_parse_request(const uint8_t *buf, size_t len, const struct ol_kvp_limits *lim);

/* ---- the UCX transport (docs/kv-protocol.md, "UCX transport") ----
 * A frame travels as one active message. Request (AM id OL_KVP_UCX_AM_REQ): the AM header is
 * the 32-byte frame header followed by its count request entries; the AM data is the rest of
 * the body (PUT: the values back to back in entry order; HELLO, AUTH: their body). Reply (AM id
 * OL_KVP_UCX_AM_REP): the AM header is the reply header, followed for a GET by its count reply
 * entries; the AM data is the reply body (GET: the values of the entries whose status is ok,
 * back to back; the header's body_len is their total). Pure code, no UCX here. */
#define OL_KVP_UCX_AM_REQ 1
#define OL_KVP_UCX_AM_REP 2
/* Check a request message (hlen header bytes, dlen data bytes) and decode its header into h:
 * the header as ol_kvp_check_req checks it, hlen == 32 + count * 56, and dlen consistent with
 * body_len (PUT: every entry's len within max_block and their sum == dlen). 0, -EBADMSG,
 * -EPROTONOSUPPORT, -EINVAL or -EMSGSIZE (as the TCP checks answer). */
int ol_kvp_ucx_req_check(const uint8_t *am_hdr, size_t hlen, uint64_t dlen,
			 const struct ol_kvp_limits *lim, struct ol_kvp_hdr *h);
/* Check a GET reply message against the request's count entries of capacities cap[i]: hlen ==
 * 32 + count * 32, every ok entry's len <= cap[i], their sum == dlen == body_len. Reply entries
 * decoded into re[count]. 0 or -EPROTO. */
int ol_kvp_ucx_get_reply(const uint8_t *am_hdr, size_t hlen, uint64_t dlen, uint32_t count,
			 const uint64_t *cap, struct ol_kvp_rep_ent *re);

#endif
