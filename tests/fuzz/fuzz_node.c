/* tests/fuzz/fuzz_node.c - libFuzzer target for the node plane's wire format
 * (src/node/frame.c): frames back to back, their MACs, payload readers, shard names. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "node/node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
payload(const uint8_t *p, size_t n)
{
	struct ol_node_rd r = {p, n, false};
	char name[OL_NODE_NAME_MAX + 1];
	(void)ol_node_get16(&r);
	size_t l = ol_node_getstr(&r, name, sizeof(name));
	if (!r.err)
		(void)ol_node_name_ok(name, l);
	(void)ol_node_get64(&r);
	(void)ol_node_get32(&r);
	(void)ol_node_getbytes(&r, 16);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[OL_NODE_KEY] = {1, 2, 3};
	size_t off = 0;
	ssize_t n;
	struct ol_node_hdr h;
	while (off < size && (n = ol_node_frame_parse(data + off, size - off, 1u << 20, &h)) > 0) {
		(void)ol_node_frame_verify(key, data + off, &h);
		payload(data + off + OL_NODE_HDR, h.len);
		uint8_t again[OL_NODE_HDR];
		ol_node_hdr_encode(&h, again);
		if (memcmp(again, data + off, OL_NODE_HDR))
			__builtin_trap(); /* a parsed header encodes back to the same bytes */
		off += (size_t)n;
	}
	(void)ol_node_name_ok((const char *)data, size);
	payload(data, size);
	return 0;
}
