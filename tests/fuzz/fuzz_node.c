/* tests/fuzz/fuzz_node.c - libFuzzer target for the node plane's wire format
 * (src/node/frame.c): frames back to back, their MACs (and, for encrypted frames, their
 * decryption in place), payload readers, shard names, and the
 * metadata entries of META_COMMIT batches and META_SCAN pages (ol_node_mentry_get). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* A META_COMMIT payload (drive, epoch, flags, n, entries) and a META_SCAN page (n, entries). */
static void
mentries(const uint8_t *p, size_t n)
{
	struct ol_node_rd r = {p, n, false};
	struct ol_node_mentry e;
	(void)ol_node_get16(&r);
	(void)ol_node_get64(&r);
	(void)ol_node_getbytes(&r, 1);
	uint32_t cnt = ol_node_get32(&r);
	for (uint32_t i = 0; i < cnt && !r.err; i++)
		if (!ol_node_mentry_get(&r, false, &e) &&
		    (e.klen == 0 || e.klen > OL_NODE_META_KEY || !OL_NODE_META_DB_OK(e.db) ||
		     e.key < p || e.key + e.klen > p + n || (e.vlen && e.val + e.vlen > p + n)))
			__builtin_trap(); /* an accepted entry lies inside the payload, in range */
	r = (struct ol_node_rd){p, n, false};
	cnt = ol_node_get32(&r);
	for (uint32_t i = 0; i < cnt && !r.err; i++)
		if (!ol_node_mentry_get(&r, true, &e) && e.key + e.klen > p + n)
			__builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[OL_NODE_KEY] = {1, 2, 3};
	static struct ol_node_mac *mac; /* made once, kept for the process's life */
	if (!mac && (ol_node_mac_new(&mac) || ol_node_mac_key(mac, key, OL_NODE_C2S)))
		__builtin_trap();
	size_t off = 0;
	ssize_t n;
	struct ol_node_hdr h;
	while (off < size && (n = ol_node_frame_parse(data + off, size - off, 1u << 20, &h)) > 0) {
		(void)ol_node_mac_check(mac, data + off, &h);
		if (h.flags & OL_NODE_F_ENC) { /* opened in place: on a copy */
			uint8_t *cp = malloc((size_t)n);
			if (!cp)
				__builtin_trap();
			memcpy(cp, data + off, (size_t)n);
			(void)ol_node_frame_open(mac, cp, &h);
			free(cp);
		}
		payload(data + off + OL_NODE_HDR, h.len);
		mentries(data + off + OL_NODE_HDR, h.len);
		uint8_t again[OL_NODE_HDR];
		ol_node_hdr_encode(&h, again);
		if (memcmp(again, data + off, OL_NODE_HDR))
			__builtin_trap(); /* a parsed header encodes back to the same bytes */
		off += (size_t)n;
	}
	(void)ol_node_name_ok((const char *)data, size);
	payload(data, size);
	mentries(data, size);
	return 0;
}
