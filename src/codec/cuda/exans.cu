/* codec/cuda/exans.cu - ExANS encode/decode kernels: one warp per ExANS block, thread l of
 * the warp is rANS lane l. Words are shared by the lanes exactly as on the CPU: the lanes of
 * a group that need (or emit) a word take consecutive words in lane order, found with a
 * ballot and a prefix popcount. Table quantisation, table bytes and CRC come from
 * exans_fmt.h, the same code the CPU runs, so both write identical bytes. */
#include <errno.h>

#ifndef OL_EXANS_CUDA_EMU /* exans_emu.cpp runs these kernels on CPU threads as a test */
#include <cuda_runtime.h>
#endif

#include "codec/exans_fmt.h"
#include "codec/cuda/exans_cuda.h"

#define FULL 0xffffffffu

struct smem {
	uint8_t sym[OL_EXANS_PROB_SCALE]; /* slot -> symbol */
	uint32_t f[256];
	uint32_t cum[256];
	uint32_t crc[256]; /* CRC-32C table */
};

__device__ static void
crc_table_init(uint32_t *t, unsigned lane)
{
	for (uint32_t i = lane; i < 256; i += 32) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (OL_EXANS_CRC_POLY & (0u - (c & 1)));
		t[i] = c;
	}
	__syncwarp();
}

/* CRC-32C of p[0..n) by the whole warp: each lane takes a chunk (a multiple of 4 bytes),
 * then the chunk CRCs are folded together; every lane returns the result. */
__device__ static uint32_t
crc_warp(const uint8_t *p, uint32_t n, const uint32_t *t, unsigned lane)
{
	uint32_t cs = ((n + 31) / 32 + 3) & ~3u;
	uint32_t b = min(n, lane * cs), e = min(n, b + cs);
	uint32_t c = ~0u, i = b;
	for (; i + 4 <= e; i += 4) {
		uint32_t w = *(const uint32_t *)(p + i); /* p is 4-byte aligned, b too */
		for (int k = 0; k < 4; k++, w >>= 8)
			c = t[(c ^ w) & 0xff] ^ (c >> 8);
	}
	for (; i < e; i++)
		c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
	c = ~c;
	uint32_t xp = ol_exans_crc_xpow(cs), acc = 0;
	for (unsigned k = 0; k < 32; k++) {
		uint32_t ck = __shfl_sync(FULL, c, k);
		uint32_t lk = min(n, k * cs + cs) - min(n, k * cs);
		if (lk == cs)
			acc = ol_exans_crc_mulmod(xp, acc) ^ ck;
		else if (lk)
			acc = ol_exans_crc_combine(acc, ck, lk);
	}
	return acc;
}

/* Build the slot -> symbol map; lane 0 has parsed f. */
__device__ static void
dec_tables(struct smem *sm, unsigned lane)
{
	if (lane == 0) {
		uint32_t c = 0;
		for (int s = 0; s < 256; s++) {
			sm->cum[s] = c;
			c += sm->f[s];
		}
	}
	__syncwarp();
	for (uint32_t slot = lane; slot < OL_EXANS_PROB_SCALE; slot += 32) {
		int lo = 0, hi = 255; /* last s with cum[s] <= slot */
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;
			if (sm->cum[mid] <= slot)
				lo = mid;
			else
				hi = mid - 1;
		}
		sm->sym[slot] = (uint8_t)lo;
	}
	__syncwarp();
}

/* rANS payload of one block; 0 or -EBADMSG. */
__device__ static int
dec_rans(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t dlen, struct smem *sm,
	 unsigned lane)
{
	uint32_t tlen = 0, nv = dlen / 2;
	if (lane == 0)
		tlen = (uint32_t)ol_exans_table_read(p + OL_EXANS_BHDR_BYTES,
						     n - OL_EXANS_BHDR_BYTES, sm->f);
	tlen = __shfl_sync(FULL, tlen, 0);
	uint32_t st_off = OL_EXANS_BHDR_BYTES + tlen, sm_off = st_off + 4 * OL_EXANS_LANES;
	uint32_t w_off = sm_off + nv + (dlen & 1);
	if (!tlen || nv == 0 || w_off > n || ((n - w_off) & 1))
		return -EBADMSG;
	dec_tables(sm, lane);
	uint32_t x = ol_exans_ld32(p + st_off + 4 * lane), wpos = w_off;
	int bad = x < OL_EXANS_RANS_L || x >= (1u << 31);
	if (__any_sync(FULL, bad))
		return -EBADMSG;
	uint16_t *o16 = (uint16_t *)out;
	for (uint32_t g = 0; g < (nv + 31) / 32; g++) {
		uint32_t i = g * 32 + lane, s = 0;
		int act = i < nv;
		if (act) {
			uint32_t slot = x & (OL_EXANS_PROB_SCALE - 1);
			s = sm->sym[slot];
			x = sm->f[s] * (x >> OL_EXANS_PROB_BITS) + slot - sm->cum[s];
		}
		int need = act && x < OL_EXANS_RANS_L;
		uint32_t m = __ballot_sync(FULL, need);
		if (need) {
			uint32_t pos = wpos + 2 * __popc(m & ((1u << lane) - 1));
			if (pos + 2 > n)
				bad = 1;
			else
				x = x << 16 | p[pos] | (uint32_t)p[pos + 1] << 8;
		}
		wpos += 2 * __popc(m);
		if (act)
			o16[i] = ol_exans_join((uint8_t)s, p[sm_off + i]);
	}
	bad |= wpos != n || x != OL_EXANS_RANS_L;
	if (__any_sync(FULL, bad))
		return -EBADMSG;
	if ((dlen & 1) && lane == 0)
		out[dlen - 1] = p[sm_off + nv];
	return 0;
}

/* A mode 0/1 block into out (at most cap bytes), CRC checked: its length or -EBADMSG. */
__device__ static int
dec_plain(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t cap, struct smem *sm,
	  unsigned lane)
{
	if (n < OL_EXANS_BHDR_BYTES || p[9] || p[10] || p[11])
		return -EBADMSG;
	uint32_t crc = ol_exans_ld32(p), dlen = ol_exans_ld32(p + 4);
	if (dlen > cap)
		return -EBADMSG;
	if (p[8] == OL_EXANS_MODE_RAW) {
		if (n != dlen + OL_EXANS_BHDR_BYTES)
			return -EBADMSG;
		for (uint32_t i = lane; i < dlen; i += 32)
			out[i] = p[OL_EXANS_BHDR_BYTES + i];
	} else if (p[8] != OL_EXANS_MODE_RANS || dec_rans(p, n, out, dlen, sm, lane) != 0) {
		return -EBADMSG;
	}
	__syncwarp();
	return crc_warp(out, dlen, sm->crc, lane) == crc ? (int)dlen : -EBADMSG;
}

/* Mode 2: the inner block holds the unique rows; repeats are copied back in, from the
 * last row down (every source lies below every row already written). */
__device__ static int
dec_rows(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t dlen, struct smem *sm,
	 unsigned lane)
{
	struct ol_exans_rows r;
	if (ol_exans_rows_parse(p, n, dlen, &r) != 0) /* every lane: same bytes, same answer */
		return -EBADMSG;
	const uint8_t *in = p + r.inner_off, *bm = p + r.bitmap_off, *refs = p + r.refs_off;
	uint32_t ilen = n - r.inner_off, R = r.R, rem = dlen - r.nrows * R;
	uint32_t m = r.U * R + rem;
	if (ilen < OL_EXANS_BHDR_BYTES || in[8] == OL_EXANS_MODE_ROWS ||
	    dec_plain(in, ilen, out, m, sm, lane) != (int)m)
		return -EBADMSG;
	__syncwarp();
	for (uint32_t i = lane; i < rem; i += 32) /* the tail: no overlap, nrep >= 1 */
		out[r.nrows * R + i] = out[r.U * R + i];
	__syncwarp();
	uint32_t u = r.U, k = r.nrep;
	for (uint32_t row = r.nrows; row-- > 0;) {
		uint32_t from;
		if ((bm[row >> 3] >> (row & 7)) & 1) {
			k--;
			from = (uint32_t)refs[2 * k] | (uint32_t)refs[2 * k + 1] << 8;
		} else {
			from = --u;
		}
		if (from != row)
			for (uint32_t i = lane; i < R; i += 32)
				out[row * R + i] = out[from * R + i];
		__syncwarp();
	}
	return 0;
}

__device__ static int
dec_block(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t cap, struct smem *sm,
	  unsigned lane)
{
	if (n < OL_EXANS_BHDR_BYTES || p[8] != OL_EXANS_MODE_ROWS)
		return dec_plain(p, n, out, cap, sm, lane);
	if (p[9] || p[10] || p[11])
		return -EBADMSG;
	uint32_t crc = ol_exans_ld32(p), dlen = ol_exans_ld32(p + 4);
	if (dlen > cap || dec_rows(p, n, out, dlen, sm, lane) != 0)
		return -EBADMSG;
	__syncwarp();
	return crc_warp(out, dlen, sm->crc, lane) == crc ? (int)dlen : -EBADMSG;
}

__global__ static void
dec_kernel(const uint8_t *src, const uint64_t *off, const uint32_t *len, uint32_t nblk,
	   uint8_t *dst, uint32_t blk, int32_t *status)
{
	__shared__ struct smem sm;
	unsigned lane = threadIdx.x;
	if (blockIdx.x >= nblk)
		return;
	crc_table_init(sm.crc, lane);
	int r = dec_block(src + off[blockIdx.x], len[blockIdx.x], dst + (size_t)blockIdx.x * blk,
			  blk, &sm, lane);
	if (lane == 0)
		status[blockIdx.x] = r;
}

/* Move [from, from+len) down to [to, ...), to <= from, with the warp. */
__device__ static void
move_down(uint8_t *b, uint32_t to, uint32_t from, uint32_t len, unsigned lane)
{
	for (uint32_t r = 0; r < len; r += 32) {
		uint32_t j = r + lane;
		uint8_t c = j < len ? b[from + j] : 0;
		__syncwarp();
		if (j < len)
			b[to + j] = c;
		__syncwarp();
	}
}

/* Encode the groups from last to first; returns the lowest stack offset or 0 when the
 * block does not fit below limit (then it is stored raw, as on the CPU). */
__device__ static uint32_t
enc_groups(const uint8_t *in, uint32_t nv, uint8_t *o, uint32_t sm_off, uint32_t w_off,
	   uint32_t limit, struct smem *sm, unsigned lane, uint32_t *xs)
{
	uint32_t x = OL_EXANS_RANS_L, wp = limit;
	const uint16_t *i16 = (const uint16_t *)in;
	for (int g = (int)((nv - 1) / 32); g >= 0; g--) {
		if (wp < w_off + 2 * OL_EXANS_LANES)
			return 0;
		uint32_t i = (uint32_t)g * 32 + lane, s = 0, fr = 1;
		int act = i < nv, emit = 0;
		if (act) {
			uint16_t v = i16[i];
			o[sm_off + i] = ol_exans_sm(v);
			s = ol_exans_exp(v);
			fr = sm->f[s];
			emit = x >= fr << 19;
		}
		uint32_t m = __ballot_sync(FULL, emit);
		uint32_t base = wp - 2 * __popc(m);
		if (emit) {
			uint32_t pos = base + 2 * __popc(m & ((1u << lane) - 1));
			o[pos] = (uint8_t)x;
			o[pos + 1] = (uint8_t)(x >> 8);
			x >>= 16;
		}
		wp = base;
		if (act)
			x = (x / fr) * OL_EXANS_PROB_SCALE + x % fr + sm->cum[s];
	}
	*xs = x;
	return wp;
}

__device__ static uint32_t
enc_rans(const uint8_t *in, uint32_t n, uint8_t *o, struct smem *sm, unsigned lane)
{
	uint32_t nv = n / 2, tlen = 0, x;
	uint32_t *cnt = sm->cum; /* counts first, then cumulative frequencies */
	for (uint32_t s = lane; s < 256; s += 32)
		cnt[s] = 0;
	__syncwarp();
	for (uint32_t i = lane; i < nv; i += 32)
		atomicAdd(&cnt[ol_exans_exp(((const uint16_t *)in)[i])], 1u);
	__syncwarp();
	if (lane == 0) {
		ol_exans_quantise(cnt, nv, sm->f);
		tlen = (uint32_t)ol_exans_table_write(sm->f, o + OL_EXANS_BHDR_BYTES);
		uint32_t c = 0;
		for (int s = 0; s < 256; s++) {
			cnt[s] = c;
			c += sm->f[s];
		}
	}
	tlen = __shfl_sync(FULL, tlen, 0);
	__syncwarp();
	uint32_t st_off = OL_EXANS_BHDR_BYTES + tlen, sm_off = st_off + 4 * OL_EXANS_LANES;
	uint32_t w_off = sm_off + nv + (n & 1), limit = n + OL_EXANS_BHDR_BYTES - 1;
	if (w_off + 2 * OL_EXANS_LANES > limit)
		return 0;
	uint32_t wp = enc_groups(in, nv, o, sm_off, w_off, limit, sm, lane, &x);
	if (!wp)
		return 0;
	__syncwarp();
	move_down(o, w_off, wp, limit - wp, lane);
	ol_exans_st32(o + st_off + 4 * lane, x);
	if ((n & 1) && lane == 0)
		o[sm_off + nv] = in[n - 1];
	return w_off + (limit - wp);
}

__global__ static void
enc_kernel(const uint8_t *src, uint64_t total, uint32_t blk, uint8_t *out, uint32_t *lens)
{
	__shared__ struct smem sm;
	unsigned lane = threadIdx.x;
	uint64_t start = (uint64_t)blockIdx.x * blk;
	uint32_t n = (uint32_t)min((uint64_t)blk, total - start);
	const uint8_t *in = src + start;
	uint8_t *o = out + (size_t)blockIdx.x * (blk + OL_EXANS_BHDR_BYTES);
	crc_table_init(sm.crc, lane);
	uint32_t crc = crc_warp(in, n, sm.crc, lane);
	uint32_t r = n / 2 >= 32 ? enc_rans(in, n, o, &sm, lane) : 0;
	int mode = r ? OL_EXANS_MODE_RANS : OL_EXANS_MODE_RAW;
	if (!r) {
		__syncwarp(); /* a failed rANS attempt may still be writing its last words */
		for (uint32_t i = lane; i < n; i += 32)
			o[OL_EXANS_BHDR_BYTES + i] = in[i];
		r = n + OL_EXANS_BHDR_BYTES;
	}
	if (lane == 0) {
		ol_exans_st32(o, crc);
		ol_exans_st32(o + 4, n);
		o[8] = (uint8_t)mode;
		o[9] = o[10] = o[11] = 0;
		lens[blockIdx.x] = r;
	}
}

#ifndef OL_EXANS_CUDA_EMU
extern "C" int
ol_exans_cuda_decode(const uint8_t *d_src, const uint64_t *d_off, const uint32_t *d_len,
		     uint32_t nblk, uint8_t *d_dst, uint32_t blk_bytes, int32_t *d_status,
		     void *stream)
{
	if (nblk == 0)
		return 0;
	if (blk_bytes < 4 || blk_bytes & 3 || blk_bytes > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EINVAL; /* the CRC pass reads 4-byte words */
	dec_kernel<<<nblk, 32, 0, (cudaStream_t)stream>>>(d_src, d_off, d_len, nblk, d_dst,
							   blk_bytes, d_status);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}

extern "C" int
ol_exans_cuda_encode(const uint8_t *d_src, uint64_t n, uint32_t blk_bytes, uint8_t *d_out,
		     uint32_t *d_len, void *stream)
{
	if (blk_bytes < 2 || blk_bytes & 3 || blk_bytes > (1u << OL_EXANS_MAX_LOG2_BLK))
		return -EINVAL;
	uint64_t nblk = (n + blk_bytes - 1) / blk_bytes;
	if (nblk == 0)
		return 0;
	if (nblk > 0x7fffffffu)
		return -EINVAL;
	enc_kernel<<<(unsigned)nblk, 32, 0, (cudaStream_t)stream>>>(d_src, n, blk_bytes, d_out,
								     d_len);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}
#endif
