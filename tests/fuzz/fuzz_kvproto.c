/* tests/fuzz/fuzz_kvproto.c - libFuzzer target for the KV wire protocol decoders
 * (src/kv/proto.c): request frames back to back, HELLO, WELCOME and VIEW bodies, entries. */
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
	if (size >= OL_KVP_REP_ENT) {
		struct ol_kvp_rep_ent e;
		ol_kvp_rep_ent_decode(data, &e);
	}
	return 0;
}
