/* tests/fuzz/fuzz_kvproto.c - libFuzzer target for the KV wire protocol decoders
 * (src/kv/proto.c): request frames back to back, HELLO, WELCOME, VIEW and EVENTS bodies,
 * entries, the UCX transport's request and GET reply messages (the input as the AM header, its
 * last 8 bytes as the data length). */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>

#include "kv/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct ol_kvp_limits lims[2] = {{OL_KVP_MAX_BATCH, 64u << 20}, {4, 4096}};
	for (int l = 0; l < 2; l++) {
		size_t off = 0;
		int r;
		while (off < size &&
		       (r = ol_kvp_parse_request(data + off, size - off, &lims[l])) > 0)
			off += (size_t)r;
	}
	struct ol_kvp_hello h;
	struct ol_kvp_welcome w;
	if (ol_kvp_hello_decode(data, size, &h) == 0) {
		uint8_t out[OL_KVP_MAX_NS + OL_KVP_MAX_HOST + 16];
		(void)ol_kvp_hello_encode(out, sizeof(out), &h);
	}
	if (ol_kvp_welcome_decode(data, size, &w) == 0) {
		uint8_t out[1024]; /* a v2 WELCOME: up to 50 + 256 + 38 + 256 bytes */
		(void)ol_kvp_welcome_encode(out, sizeof(out), &w);
	}
	if (size >= OL_KVP_NONCE) { /* the AUTH message over a nonce and a namespace */
		uint8_t msg[OL_KVP_AUTH_MSG];
		size_t nl = size - OL_KVP_NONCE;
		(void)ol_kvp_auth_msg(msg, data, (const char *)data + OL_KVP_NONCE,
				      (uint16_t)(nl > 0xffff ? 0xffff : nl));
	}
	static struct ol_kvp_view v; /* ~70 KiB: not on the stack */
	if (ol_kvp_view_decode(data, size, &v) == 0) {
		static uint8_t out[OL_KVP_MAX_VIEW * (OL_KVP_VIEW_ENT + OL_KVP_MAX_VIEW_ADDR) + 16];
		(void)ol_kvp_view_encode(out, sizeof(out), &v);
		(void)ol_kvp_view_tag(&v);
	}
	struct ol_kvp_events ev;
	for (uint32_t max = 0; max <= OL_KVP_MAX_EVENTS; max += OL_KVP_MAX_EVENTS / 3) {
		if (ol_kvp_events_decode(data, size, max, &ev) == 0) {
			static uint8_t out[OL_KVP_EVENTS_HDR + OL_KVP_MAX_EVENTS * OL_KVP_KEY];
			(void)ol_kvp_events_encode(out, sizeof(out), &ev);
		}
	}
	if (size >= OL_KVP_REP_ENT) {
		struct ol_kvp_rep_ent e;
		ol_kvp_rep_ent_decode(data, &e);
	}
	if (size >= 8) {
		uint64_t dlen = 0;
		for (int i = 0; i < 8; i++)
			dlen = dlen << 8 | data[size - 8 + i];
		struct ol_kvp_hdr uh;
		(void)ol_kvp_ucx_req_check(data, size - 8, dlen, &lims[0], &uh);
		(void)ol_kvp_ucx_req_check(data, size - 8, dlen, &lims[1], &uh);
		static uint64_t cap[OL_KVP_MAX_BATCH];
		static struct ol_kvp_rep_ent re[OL_KVP_MAX_BATCH];
		uint32_t n = (uint32_t)((size - 8) / OL_KVP_REP_ENT);
		for (uint32_t i = 0; i < n && i < OL_KVP_MAX_BATCH; i++)
			cap[i] = (uint64_t)1 << (i % 24);
		if (n <= OL_KVP_MAX_BATCH)
			(void)ol_kvp_ucx_get_reply(data, size - 8, dlen, n ? n - 1 : 0, cap, re);
	}
	return 0;
}
