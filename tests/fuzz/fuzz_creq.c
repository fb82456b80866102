/* Fuzz target: a shard writer's commit request as the leader's node plane receives it
 * (store/put.c, ol_creq_decode) and a commit's answer as the follower receives it
 * (ol_store_info_decode), over arbitrary bytes. An accepted request has every field in bounds
 * and every pointer inside the input; an accepted answer encodes back to the same bytes. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
inside(const uint8_t *data, size_t size, const uint8_t *p, size_t n)
{
	return !n || (p && p >= data && n <= size && (size_t)(p - data) <= size - n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ol_creq q;
	struct ol_obj_info in;
	uint8_t back[OL_STORE_INFO_WIRE];

	if (ol_creq_decode(data, size, &q) == 0 &&
	    (!q.n || q.n > OL_MAX_DRIVES || !q.k || q.k > q.n || !q.klen || q.klen > OL_KEYBUF ||
	     q.meta_len > OL_STORE_MAX_META || strlen(q.bucket) >= sizeof(q.bucket) ||
	     !q.bucket[0] || strlen(q.etag) >= sizeof(q.etag) ||
	     strlen(q.if_match) >= sizeof(q.if_match) || !inside(data, size, q.key, q.klen) ||
	     !inside(data, size, q.meta, q.meta_len) || !inside(data, size, q.uuid, OL_UUID) ||
	     !inside(data, size, q.store, q.store_len) ||
	     ((q.flags & OL_CREQ_INLINE) && !inside(data, size, q.inl, (size_t)q.n * q.bl)) ||
	     ((q.flags & OL_CREQ_PART) && (!q.part_no || !q.upload_id[0])) || (q.absent & ~q.bad) ||
	     !(q.flags & OL_CREQ_ABSENT) != !q.absent))
		abort();
	if (ol_store_info_decode(data, size, &in) == 0 &&
	    (ol_store_info_encode(&in, back) != size || memcmp(back, data, size)))
		abort();
	return 0;
}
