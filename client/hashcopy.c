/* client/hashcopy.c - ol_kv_get_xxh3's copies: the value moved into the caller's iovs one
 * cache-sized piece at a time, each piece hashed (XXH3-64, libxxhash) right after it landed,
 * so verifying a value costs no second pass over memory. */
#include <errno.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#ifdef OLC_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* libxxhash's runtime choice of SSE2 / AVX2 / AVX-512 */
#define xxh3_update XXH3_64bits_update_dispatch
#else
#define xxh3_update XXH3_64bits_update
#endif

#include "client_int.h"
#include "kv/net.h"

/* A copy from shared memory goes in pieces that stay in L1/L2 until hashed; a socket read in
 * larger ones (one readv each: fewer system calls), still within L2. */
#define OLC_HASH_COPY_PIECE (64u << 10)
#define OLC_HASH_READ_PIECE (256u << 10)
#define OLC_HASH_READ_IOVS  16

static size_t
op_index(const struct olc_hash *hx, const struct ol_kv_op *op)
{
	return (size_t)(op - hx->base);
}

/* How many of a len-byte value's bytes are hashed: those landing in the first iovcnt iovs. */
static uint64_t
hash_bytes(const struct olc_hash *hx, const struct ol_kv_op *op, uint64_t len)
{
	size_t k = hx->iovcnt ? hx->iovcnt[op_index(hx, op)] : op->iovcnt;
	uint64_t n = 0;
	for (size_t i = 0; i < k && i < op->iovcnt && n < len; i++)
		n += op->iov[i].len;
	return n < len ? n : len;
}

static void
done(const struct olc_hash *hx, const struct ol_kv_op *op, XXH3_state_t *st)
{
	size_t i = op_index(hx, op);
	hx->out[i] = XXH3_64bits_digest(st);
	hx->done[i] = true;
}

void
olc_hash_begin(const struct olc_hash *hx, const struct ol_kv_op *op)
{
	size_t i = op_index(hx, op);
	hx->done[i] = false;
	hx->out[i] = 0;
}

/* Hash the first *h bytes of [p, p + n) and count them off *h. */
static void
hash_part(XXH3_state_t *st, const void *p, size_t n, uint64_t *h)
{
	size_t k = n < *h ? n : (size_t)*h;
	if (k)
		(void)xxh3_update(st, p, k); /* XXH_OK: p is not NULL */
	*h -= k;
}

void
olc_hash_copy(const struct olc_hash *hx, struct ol_kv_op *op, const uint8_t *src, uint64_t len)
{
	XXH3_state_t st;
	uint64_t h = hash_bytes(hx, op, len);
	XXH3_64bits_reset(&st);
	for (size_t k = 0; k < op->iovcnt && len > 0; k++) {
		uint8_t *dst = op->iov[k].base;
		size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
		for (size_t at = 0; at < l;) {
			size_t p = l - at < OLC_HASH_COPY_PIECE ? l - at : OLC_HASH_COPY_PIECE;
			memcpy(dst + at, src, p);
			hash_part(&st, dst + at, p, &h);
			src += p;
			at += p;
		}
		len -= l;
	}
	done(hx, op, &st);
}

/* Receive the ranges v[0..n) (a copy of them is kept: the read advances v), then hash them. */
static int
read_piece(struct olc_conn *cn, struct iovec *v, int n, XXH3_state_t *st, uint64_t *h)
{
	struct iovec keep[OLC_HASH_READ_IOVS];
	memcpy(keep, v, (size_t)n * sizeof(*v));
	int r = kvnet_sreadv_full(cn->fd, cn->ssl, v, n);
	for (int i = 0; r == 0 && i < n && *h; i++)
		hash_part(st, keep[i].iov_base, keep[i].iov_len, h);
	return r;
}

int
olc_hash_read(const struct olc_hash *hx, struct olc_conn *cn, struct ol_kv_op *op, uint64_t len)
{
	XXH3_state_t st;
	struct iovec v[OLC_HASH_READ_IOVS];
	uint64_t h = hash_bytes(hx, op, len);
	int nv = 0, r = 0;
	size_t got = 0; /* bytes in v */
	XXH3_64bits_reset(&st);
	for (size_t k = 0; r == 0 && k < op->iovcnt && len > 0; k++) {
		uint8_t *dst = op->iov[k].base;
		size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
		len -= l;
		for (size_t at = 0; r == 0 && at < l;) {
			size_t p =
			    l - at < OLC_HASH_READ_PIECE - got ? l - at : OLC_HASH_READ_PIECE - got;
			v[nv++] = (struct iovec){dst + at, p};
			got += p;
			at += p;
			bool last = len == 0 && at == l;
			if (got == OLC_HASH_READ_PIECE || nv == OLC_HASH_READ_IOVS || last) {
				r = read_piece(cn, v, nv, &st, &h);
				nv = 0;
				got = 0;
			}
		}
	}
	if (r == 0 && nv) /* op's iovs ended before len: the caller checked they hold it */
		r = read_piece(cn, v, nv, &st, &h);
	if (r == 0)
		done(hx, op, &st);
	return r;
}

int
olc_xxh3_iov(const struct ol_iov *iov, size_t n, uint64_t limit, uint64_t *out)
{
	XXH3_state_t st;
	if (XXH3_64bits_reset(&st) != XXH_OK)
		return -EINVAL;
	for (size_t i = 0; i < n && limit; i++) {
		if (!iov[i].len)
			continue;
		if (!iov[i].base)
			return -EINVAL;
		hash_part(&st, iov[i].base, iov[i].len, &limit);
	}
	*out = XXH3_64bits_digest(&st);
	return 0;
}

void
olc_hash_after(const struct olc_hash *hx, struct ol_kv_op *op)
{
	size_t i = op_index(hx, op);
	uint64_t h = hash_bytes(hx, op, op->value_len);
	if (olc_xxh3_iov(op->iov, op->iovcnt, h, &hx->out[i]) < 0)
		hx->out[i] = 0; /* a NULL base with a length: the get itself refused it */
	hx->done[i] = true;
}
