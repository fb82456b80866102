/* codec/cuda/exans_gpu.c - whole stored values on the GPU (exans_gpu.h). Built twice: with
 * OL_EXANS_GPU_CUDA over the kernels of exans.cu and the CUDA runtime, and without it as the
 * CPU twin, whose block coders are the CPU's (same bytes: docs/exans-format.md). Everything
 * above the four backend calls (framing, header CRC, raw-wrap, checks) is the same code. */
#include <errno.h>
#include <string.h>

#ifndef OL_EXANS_NO_XXHASH	/* (bench/gpu_check.sh on a machine without libxxhash-dev) */
#define XXH_STATIC_LINKING_ONLY /* XXH3_generateSecret_fromSeed */
#include <xxhash.h>
#endif

#include "codec/cuda/exans_gpu.h"
#include "codec/exans.h"
#include "codec/exans_fmt.h"

#define OLZ_HDR 16
#define SLOT	(OL_EXANS_GPU_BLOCK + OL_EXANS_BHDR_BYTES)
#define NB_MAX	OL_EXANS_GPU_MAX_BLOCKS

static const uint8_t olz_magic[4] = {'O', 'L', 'Z', '1'};

#ifdef OL_EXANS_GPU_CUDA
#include <cuda_runtime.h>

#include "codec/cuda/exans_cuda.h"

static int
be_encode(const uint8_t *d_src, uint64_t n, uint8_t *d_slots, uint32_t *d_lens, void *stream)
{
	return ol_exans_cuda_encode(d_src, n, OL_EXANS_GPU_BLOCK, d_slots, d_lens, stream);
}

static int
be_decode(const uint8_t *d_src, const uint64_t *d_off, const uint32_t *d_len, uint32_t nb,
	  uint8_t *d_dst, int32_t *d_status, void *stream)
{
	return ol_exans_cuda_decode(d_src, d_off, d_len, nb, d_dst, OL_EXANS_GPU_BLOCK, d_status,
				    stream);
}

static int
be_copy(void *dst, const void *src, uint64_t n, void *stream)
{
	if (!n)
		return 0;
	return cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)stream) == cudaSuccess
		   ? 0
		   : -EIO;
}

static int
be_sync(void *stream)
{
	return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -EIO;
}

static int
be_gather(const uint8_t *d_slots, const uint32_t *d_lens, uint32_t nb, uint8_t *d_out,
	  uint64_t base, void *stream)
{
	return ol_exans_cuda_gather(d_slots, d_lens, nb, OL_EXANS_GPU_BLOCK, d_out, base, stream);
}

/* Short inputs take XXH3's other formulas: hashed on the host (through a copy, synchronous). */
#ifdef OL_EXANS_NO_XXHASH
static int
be_xxh3(const uint8_t *d_src, uint64_t n, uint8_t *d_out, void *stream)
{
	(void)d_src, (void)n, (void)d_out, (void)stream;
	return -ENOTSUP;
}
#else
static int
be_xxh3(const uint8_t *d_src, uint64_t n, uint8_t *d_out, void *stream)
{
	static _Thread_local uint8_t sh[OL_EXANS_CUDA_XXH3_MIN], h[4];
	if (n > OL_EXANS_CUDA_XXH3_MIN) {
		struct ol_exans_cuda_secret sec;
		XXH3_generateSecret_fromSeed(sec.b, 0); /* seed 0: the default secret */
		return ol_exans_cuda_xxh3(d_src, n, &sec, d_out, stream);
	}
	int r = be_copy(sh, d_src, n, stream);
	if (r == 0)
		r = be_sync(stream);
	if (r < 0)
		return r;
	ol_exans_st32(h, (uint32_t)XXH3_64bits(sh, (size_t)n));
	return be_copy(d_out, h, 4, stream); /* from pageable memory: staged before it returns */
}
#endif

_Static_assert(sizeof(struct ol_exans_cuda_sum) == sizeof(struct ol_exans_gpu_sum),
	       "the kernel reads the caller's table as is");

/* The table goes up from pageable memory (staged before cudaMemcpyAsync returns), then one
 * launch. */
static int
be_xxh3_batch(const struct ol_exans_gpu_sum *tab, uint32_t count, void *d_work, void *stream)
{
#ifdef OL_EXANS_NO_XXHASH
	(void)tab, (void)count, (void)d_work, (void)stream;
	return -ENOTSUP;
#else
	struct ol_exans_cuda_secret sec;
	XXH3_generateSecret_fromSeed(sec.b, 0);
	int r = be_copy(d_work, tab, (uint64_t)count * sizeof(*tab), stream);
	return r < 0 ? r : ol_exans_cuda_xxh3_batch(d_work, count, &sec, stream);
#endif
}

int
ol_exans_gpu_is_cuda(void)
{
	return 1;
}
#else
static int
be_encode(const uint8_t *src, uint64_t n, uint8_t *slots, uint32_t *lens, void *stream)
{
	(void)stream;
	for (uint64_t i = 0; i * OL_EXANS_GPU_BLOCK < n; i++) {
		uint64_t off = i * OL_EXANS_GPU_BLOCK, len = n - off;
		if (len > OL_EXANS_GPU_BLOCK)
			len = OL_EXANS_GPU_BLOCK;
		ssize_t r = ol_exans_block_encode(src + off, (size_t)len, slots + i * SLOT, SLOT);
		if (r < 0)
			return -EIO;
		lens[i] = (uint32_t)r;
	}
	return 0;
}

static int
be_decode(const uint8_t *src, const uint64_t *off, const uint32_t *len, uint32_t nb, uint8_t *dst,
	  int32_t *status, void *stream)
{
	(void)stream;
	for (uint32_t i = 0; i < nb; i++)
		status[i] = (int32_t)ol_exans_block_decode(src + off[i], len[i],
							   dst + (uint64_t)i * OL_EXANS_GPU_BLOCK,
							   OL_EXANS_GPU_BLOCK, OL_EXANS_AUTO);
	return 0;
}

static int
be_copy(void *dst, const void *src, uint64_t n, void *stream)
{
	(void)stream;
	if (n)
		memmove(dst, src, (size_t)n);
	return 0;
}

static int
be_sync(void *stream)
{
	(void)stream;
	return 0;
}

static int
be_gather(const uint8_t *slots, const uint32_t *lens, uint32_t nb, uint8_t *out, uint64_t base,
	  void *stream)
{
	(void)stream;
	for (uint32_t i = 0; i < nb; i++) {
		memmove(out + base, slots + (uint64_t)i * SLOT, lens[i]);
		base += lens[i];
	}
	return 0;
}

static int
be_xxh3(const uint8_t *src, uint64_t n, uint8_t *out, void *stream)
{
	(void)stream;
	ol_exans_st32(out, (uint32_t)XXH3_64bits(src, (size_t)n));
	return 0;
}

static int
be_xxh3_batch(const struct ol_exans_gpu_sum *tab, uint32_t count, void *d_work, void *stream)
{
	(void)d_work, (void)stream;
	for (uint32_t i = 0; i < count; i++)
		ol_exans_st32(
		    (uint8_t *)(uintptr_t)tab[i].out,
		    (uint32_t)XXH3_64bits((const void *)(uintptr_t)tab[i].src, (size_t)tab[i].n));
	return 0;
}

int
ol_exans_gpu_is_cuda(void)
{
	return 0;
}
#endif

/* Host-side tables of one call (per thread: no allocation, no big stack frame). */
static _Thread_local struct {
	uint8_t hdr[OLZ_HDR + OL_EXANS_HDR_BYTES + 4 * NB_MAX];
	uint64_t off[NB_MAX];
	uint32_t len[NB_MAX];
	uint32_t state[2 + NB_MAX]; /* ol_exans_gpu_encode's and _decode's */
} g_h;

static uint64_t
nblocks(uint64_t n)
{
	return (n + OL_EXANS_GPU_BLOCK - 1) / OL_EXANS_GPU_BLOCK;
}

/* Work layout: block slots (encode) / the last block's decode area, then the tables. */
struct work {
	uint8_t *slots;
	uint32_t *lens;
	uint64_t *off;
	int32_t *status;
};

static struct work
work_of(void *d_work, uint64_t nb)
{
	uint8_t *p = d_work;
	struct work w = {.slots = p};
	/* SLOT is not a multiple of 8: the tables start on the next 16-byte boundary (a
	 * misaligned 64-bit load faults on the GPU), within ol_exans_gpu_work_bytes' 16 spare */
	p += ((nb ? nb : 1) * SLOT + 15) & ~(uint64_t)15;
	w.off = (uint64_t *)p;
	p += nb * 8;
	w.lens = (uint32_t *)p;
	p += nb * 4;
	w.status = (int32_t *)p;
	return w;
}

uint64_t
ol_exans_gpu_work_bytes(uint64_t n)
{
	uint64_t nb = nblocks(n);
	return (nb ? nb : 1) * SLOT + nb * 16 + 16; /* + 16: the tables' alignment */
}

uint64_t
ol_exans_gpu_bound(uint64_t n)
{
	uint64_t nb = nblocks(n);
	uint64_t c = OLZ_HDR + OL_EXANS_HDR_BYTES + nb * (4 + OL_EXANS_BHDR_BYTES) + n;
	return c > n + OLZ_HDR ? c : n + OLZ_HDR;
}

static void
st64(uint8_t *p, uint64_t v)
{
	ol_exans_st32(p, (uint32_t)v);
	ol_exans_st32(p + 4, (uint32_t)(v >> 32));
}

/* OLZ1 header, container header and index of nb blocks of lens[] into g_h.hdr; its size. */
static uint64_t
frame(uint64_t n, uint32_t nb, const uint32_t *lens)
{
	uint8_t *h = g_h.hdr, *c = h + OLZ_HDR;
	uint32_t tab[256];
	memcpy(h, olz_magic, 4);
	h[4] = 1; /* codec ExANS */
	h[5] = h[6] = h[7] = 0;
	st64(h + 8, n);
	ol_exans_st32(c, OL_EXANS_MAGIC);
	c[4] = OL_EXANS_VERSION;
	c[5] = 0;
	c[6] = 16; /* log2 of 64 KiB */
	c[7] = 0;
	st64(c + 8, n);
	ol_exans_st32(c + 16, nb);
	for (uint32_t i = 0; i < nb; i++)
		ol_exans_st32(c + OL_EXANS_HDR_BYTES + 4 * i, lens[i]);
	ol_exans_crc_table(tab);
	uint32_t t = ol_exans_crc_sw(0, c, 20, tab);
	uint32_t x = ol_exans_crc_sw(0, c + OL_EXANS_HDR_BYTES, (size_t)nb * 4, tab);
	ol_exans_st32(c + 20, ol_exans_crc_combine(t, x, (uint64_t)nb * 4));
	return OLZ_HDR + OL_EXANS_HDR_BYTES + 4 * (uint64_t)nb;
}

/* The plain form: as is, or raw-wrapped when it starts with the magic (head: its first
 * bytes, on the host). Queued, not synchronised. */
static int64_t
store_plain(const uint8_t *d_src, uint64_t n, const uint8_t *head, uint8_t *d_out, uint64_t cap,
	    void *stream)
{
	uint64_t pre = n >= 4 && memcmp(head, olz_magic, 4) == 0 ? OLZ_HDR : 0;
	int r = 0;
	if (cap < n + pre)
		return -ENOSPC;
	if (pre) {
		memcpy(g_h.hdr, olz_magic, 4);
		memset(g_h.hdr + 4, 0, 4); /* codec raw */
		st64(g_h.hdr + 8, n);
		r = be_copy(d_out, g_h.hdr, OLZ_HDR, stream);
	}
	if (r == 0)
		r = be_copy(d_out + pre, d_src, n, stream);
	return r < 0 ? r : (int64_t)(n + pre);
}

uint64_t
ol_exans_gpu_state_bytes(uint64_t n)
{
	return 8 + 4 * nblocks(n);
}

/* Host state of an encode: the value's first 4 bytes, then the blocks' encoded lengths. */
int
ol_exans_gpu_encode_start(const void *d_src, uint64_t n, void *d_work, void *h_state, void *stream)
{
	uint64_t nb = nblocks(n);
	uint8_t *st = h_state;
	if (nb > NB_MAX)
		return -E2BIG;
	if ((n && (!d_src || !d_work)) || !st || ((uintptr_t)st & 3))
		return -EINVAL;
	memset(st, 0, 4);
	int r = n >= 4 ? be_copy(st, d_src, 4, stream) : 0;
	if (r == 0 && n >= 4 * OLZ_HDR) {
		struct work w = work_of(d_work, nb);
		r = be_encode(d_src, n, w.slots, w.lens, stream);
		if (r == 0)
			r = be_copy(st + 4, w.lens, nb * 4, stream);
	}
	return r;
}

int64_t
ol_exans_gpu_encode_finish(const void *d_src, uint64_t n, void *d_out, uint64_t cap, void *d_work,
			   const void *h_state, void *stream)
{
	uint64_t nb = nblocks(n), total = 0;
	const uint8_t *st = h_state;
	if (nb > NB_MAX)
		return -E2BIG;
	if ((n && (!d_src || !d_out || !d_work)) || !st || ((uintptr_t)st & 3))
		return -EINVAL;
	const uint32_t *lens = (const uint32_t *)(st + 4);
	for (uint64_t i = 0; n >= 4 * OLZ_HDR && i < nb; i++)
		total += lens[i];
	uint64_t hdr = OLZ_HDR + OL_EXANS_HDR_BYTES + 4 * nb;
	if (n < 4 * OLZ_HDR || total + hdr >= n) /* does not shrink: plain, as libopenlake */
		return store_plain(d_src, n, st, d_out, cap, stream);
	if (cap < total + hdr)
		return -ENOSPC;
	struct work w = work_of(d_work, nb);
	frame(n, (uint32_t)nb, lens);
	int r = be_copy(d_out, g_h.hdr, hdr, stream);
	if (r == 0) /* every block's bytes in one launch, not one copy per block */
		r = be_gather(w.slots, w.lens, (uint32_t)nb, d_out, hdr, stream);
	return r < 0 ? r : (int64_t)(hdr + total);
}

int64_t
ol_exans_gpu_encode(const void *d_src, uint64_t n, void *d_out, uint64_t cap, void *d_work,
		    void *stream)
{
	if (n && !d_out)
		return -EINVAL;
	int r = ol_exans_gpu_encode_start(d_src, n, d_work, g_h.state, stream);
	if (r == 0)
		r = be_sync(stream); /* the host needs the lengths (and the head) */
	if (r < 0)
		return r;
	return ol_exans_gpu_encode_finish(d_src, n, d_out, cap, d_work, g_h.state, stream);
}

int
ol_exans_gpu_xxh3(const void *d_src, uint64_t n, void *d_out, void *stream)
{
	if ((n && !d_src) || !d_out)
		return -EINVAL;
	return be_xxh3(d_src, n, d_out, stream);
}

uint64_t
ol_exans_gpu_xxh3_work_bytes(uint32_t count)
{
	return (uint64_t)count * sizeof(struct ol_exans_gpu_sum);
}

int
ol_exans_gpu_xxh3_batch(const struct ol_exans_gpu_sum *h_tab, uint32_t count, void *d_work,
			void *stream)
{
	if (count > OL_EXANS_GPU_MAX_SUMS)
		return -E2BIG;
	if (count && (!h_tab || !d_work))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if ((h_tab[i].n && !h_tab[i].src) || !h_tab[i].out)
			return -EINVAL;
	return count ? be_xxh3_batch(h_tab, count, d_work, stream) : 0;
}

/* Parse the container at c[0..n) (host) into g_h.off / g_h.len; its decoded size. */
static int64_t
parse(const uint8_t *c, uint64_t n, uint32_t *nb_out)
{
	uint32_t nb;
	if (ol_exans_block_count(c, (size_t)n, &nb) < 0)
		return -EBADMSG; /* validates the header, its CRC and the index */
	if (nb > NB_MAX)
		return -E2BIG;
	uint64_t dec = 0;
	for (uint32_t i = 0; i < nb; i++) {
		struct ol_exans_block_ref ref;
		if (ol_exans_block_locate(c, (size_t)n, i, &ref) < 0)
			return -EBADMSG;
		if (ref.len > SLOT || (i + 1 < nb && ref.dec_len != OL_EXANS_GPU_BLOCK))
			return -EBADMSG; /* not libopenlake's 64 KiB blocks */
		g_h.off[i] = ref.off;
		g_h.len[i] = (uint32_t)ref.len;
		dec += ref.dec_len;
	}
	*nb_out = nb;
	return (int64_t)dec;
}

/* Queues the blocks' decode; st: the block count, the last block's length, then (copied
 * there once the stream gets to it) the blocks' statuses. */
static int64_t
decode_exans(const uint8_t *h_c, const uint8_t *d_c, uint64_t n, uint64_t orig, uint8_t *d_dst,
	     uint64_t cap, void *d_work, uint32_t *st, void *stream)
{
	uint32_t nb;
	int64_t dec = parse(h_c, n, &nb);
	if (dec < 0)
		return dec;
	if ((uint64_t)dec != orig || 8 + 4 * (uint64_t)nb > ol_exans_gpu_state_bytes(orig))
		return -EBADMSG;
	if (cap < orig)
		return -ENOSPC;
	if (!nb)
		return 0;
	struct work w = work_of(d_work, nb);
	/* every block but the last decodes in place; the last into the work area, then is
	 * copied (a hostile block cannot write past d_dst + orig). Nothing waits: the next
	 * value's tables and blocks come after these on the stream. */
	uint64_t last = (uint64_t)(nb - 1) * OL_EXANS_GPU_BLOCK;
	st[0] = nb;
	st[1] = (uint32_t)(orig - last);
	int r = be_copy(w.off, g_h.off, (uint64_t)nb * 8, stream);
	if (r == 0)
		r = be_copy(w.lens, g_h.len, (uint64_t)nb * 4, stream);
	if (r == 0 && nb > 1)
		r = be_decode(d_c, w.off, w.lens, nb - 1, d_dst, w.status, stream);
	if (r == 0)
		r = be_decode(d_c, w.off + nb - 1, w.lens + nb - 1, 1, w.slots, w.status + nb - 1,
			      stream);
	if (r == 0)
		r = be_copy(d_dst + last, w.slots, orig - last, stream);
	if (r == 0)
		r = be_copy(st + 2, w.status, (uint64_t)nb * 4, stream);
	return r < 0 ? r : (int64_t)orig;
}

int64_t
ol_exans_gpu_decode_start(const void *h_val, const void *d_val, uint64_t len, void *d_dst,
			  uint64_t cap, void *d_work, void *h_state, void *stream)
{
	const uint8_t *h = h_val, *d = d_val;
	uint32_t *st = h_state;
	if ((len && (!h || !d || !d_dst)) || !st || ((uintptr_t)st & 3))
		return -EINVAL;
	st[0] = 0;				       /* no blocks: nothing for _finish to check */
	if (len < 4 || memcmp(h, olz_magic, 4) != 0) { /* plain */
		if (cap < len)
			return -ENOSPC;
		int r = be_copy(d_dst, d, len, stream);
		return r < 0 ? r : (int64_t)len;
	}
	if (len < OLZ_HDR || h[4] > 1 || h[5] || h[6] || h[7])
		return -EBADMSG;
	uint64_t orig = ol_exans_ld32(h + 8) | (uint64_t)ol_exans_ld32(h + 12) << 32;
	if (h[4] == 0) { /* raw-wrapped */
		if (orig != len - OLZ_HDR)
			return -EBADMSG;
		if (cap < orig)
			return -ENOSPC;
		int r = be_copy(d_dst, d + OLZ_HDR, orig, stream);
		return r < 0 ? r : (int64_t)orig;
	}
	if (!d_work)
		return -EINVAL;
	return decode_exans(h + OLZ_HDR, d + OLZ_HDR, len - OLZ_HDR, orig, d_dst, cap, d_work, st,
			    stream);
}

int
ol_exans_gpu_decode_finish(const void *h_state)
{
	const uint32_t *st = h_state;
	if (!st || ((uintptr_t)st & 3))
		return -EINVAL;
	for (uint32_t i = 0; i < st[0]; i++)
		if ((int32_t)st[2 + i] != (int32_t)(i + 1 < st[0] ? OL_EXANS_GPU_BLOCK : st[1]))
			return -EBADMSG;
	return 0;
}

int64_t
ol_exans_gpu_decode(const void *h_val, const void *d_val, uint64_t len, void *d_dst, uint64_t cap,
		    void *d_work, void *stream)
{
	int64_t n =
	    ol_exans_gpu_decode_start(h_val, d_val, len, d_dst, cap, d_work, g_h.state, stream);
	int r = n < 0 ? (int)n : be_sync(stream); /* the host needs the blocks' statuses */
	if (r == 0)
		r = ol_exans_gpu_decode_finish(g_h.state);
	return r < 0 ? r : n;
}
