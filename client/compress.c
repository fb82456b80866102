/* client/compress.c - ExANS compression of values in libopenlake (see compress.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "codec/exans.h"
#include "compress.h"

/* ---- per-thread scratch ---- */

struct scratch {
	uint8_t *p, *g; /* p: the stored forms of one chunk's values; g: one gathered value */
	size_t cap, gcap;
};

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void
scratch_free(void *arg)
{
	struct scratch *s = arg;
	free(s->p);
	free(s->g);
	free(s);
}

static void
scratch_key_init(void)
{
	if (pthread_key_create(&g_key, scratch_free) != 0)
		g_key = (pthread_key_t)-1;
}

static struct scratch *
scratch_get(void)
{
	pthread_once(&g_once, scratch_key_init);
	if (g_key == (pthread_key_t)-1)
		return NULL;
	struct scratch *s = pthread_getspecific(g_key);
	if (!s && (s = calloc(1, sizeof(*s))) != NULL && pthread_setspecific(g_key, s) != 0) {
		free(s);
		s = NULL;
	}
	return s;
}

/* Make *p hold at least need bytes (old contents are not kept). 0 or -ENOMEM. */
static int
reserve(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t ncap = need + need / 4 + 4096;
	uint8_t *q = malloc(ncap);
	if (!q)
		return -ENOMEM;
	free(*p);
	*p = q;
	*cap = ncap;
	return 0;
}

/* ---- header ---- */

static void
hdr_write(uint8_t *p, unsigned codec, uint64_t orig)
{
	memcpy(p, OLZ_MAGIC, 4);
	p[4] = (uint8_t)codec;
	p[5] = p[6] = p[7] = 0;
	for (int i = 0; i < 8; i++)
		p[8 + i] = (uint8_t)(orig >> (8 * i));
}

int
olz_hdr_parse(const uint8_t *v, uint64_t len, unsigned *codec, uint64_t *orig)
{
	if (len < 4 || memcmp(v, OLZ_MAGIC, 4) != 0)
		return 0;
	if (len < OLZ_HDR || v[4] > OLZ_CODEC_EXANS || v[5] || v[6] || v[7])
		return -EBADMSG;
	uint64_t o = 0;
	for (int i = 0; i < 8; i++)
		o |= (uint64_t)v[8 + i] << (8 * i);
	*codec = v[4];
	*orig = o;
	return 1;
}

static void
count(_Atomic uint64_t *ctr, uint64_t n)
{
	atomic_fetch_add_explicit(ctr, n, memory_order_relaxed);
}

/* ---- put ---- */

static size_t
put_need(uint64_t len)
{
	size_t b = ol_exans_bound((size_t)len, 0);
	return OLZ_HDR + (b > len ? b : (size_t)len);
}

/* The value of op as one contiguous range (gathered into s->g when it has several iovs). */
static const uint8_t *
gather(struct scratch *s, const struct ol_kv_op *op, uint64_t len)
{
	if (op->iovcnt == 1)
		return op->iov[0].base;
	if (reserve(&s->g, &s->gcap, (size_t)len + 1) < 0)
		return NULL;
	uint8_t *d = s->g;
	for (size_t k = 0; k < op->iovcnt; k++) {
		if (op->iov[k].len)
			memcpy(d, op->iov[k].base, op->iov[k].len);
		d += op->iov[k].len;
	}
	return s->g;
}

/* Set sh (and *v) to what is stored for op: its compressed form in dst[0..cap), a raw-wrapped
 * copy (a plain value that starts with the magic), or op's own iovs (zero copy). */
static int
pack_one(struct ol_client *c, struct scratch *s, const struct ol_kv_op *op, struct ol_kv_op *sh,
	 struct ol_iov *v, uint8_t *dst, size_t cap)
{
	uint64_t len = olc_iov_len(op);
	*sh = *op;
	const uint8_t *src = len ? gather(s, op, len) : NULL;
	if (len && !src)
		return -ENOMEM;
	uint64_t stored = len;
	if (len >= 4 * OLZ_HDR) {
		struct ol_exans_opts eo = {.row_bytes = c->compress_row_bytes};
		ssize_t r = ol_exans_compress(src, (size_t)len, dst + OLZ_HDR, cap - OLZ_HDR, &eo);
		if (r == -ENOMEM)
			return -ENOMEM;
		if (r > 0 && (uint64_t)r + OLZ_HDR < len) {
			hdr_write(dst, OLZ_CODEC_EXANS, len);
			stored = (uint64_t)r + OLZ_HDR;
		}
	}
	if (stored == len && len >= 4 && memcmp(src, OLZ_MAGIC, 4) == 0) {
		hdr_write(dst, OLZ_CODEC_RAW, len);
		memcpy(dst + OLZ_HDR, src, (size_t)len);
		stored = len + OLZ_HDR;
	}
	if (stored != len) {
		v->base = dst;
		v->len = (size_t)stored;
		sh->iov = v;
		sh->iovcnt = 1;
	}
	count(&c->zst.put_in, len);
	count(&c->zst.put_out, stored);
	count(stored < len ? &c->zst.put_compressed : &c->zst.put_plain, 1);
	return 0;
}

/* How many ops from ops[0..n) make one chunk (at least one), and the scratch it needs. */
static size_t
chunk_of(struct ol_kv_op *ops, size_t n, bool put, size_t *need)
{
	size_t m = 0;
	*need = 0;
	for (; m < n; m++) {
		uint64_t len = olc_iov_len(&ops[m]);
		size_t one = put ? put_need(len) : (size_t)len + OLZ_HDR;
		if (m > 0 && *need + one > OLZ_SCRATCH_CAP)
			break;
		*need += one;
	}
	return m;
}

struct shadow {
	struct ol_kv_op *ops;
	struct ol_iov *iov;
};

static int
shadow_alloc(struct shadow *sh, size_t n)
{
	sh->ops = malloc((n ? n : 1) * sizeof(*sh->ops));
	sh->iov = malloc((n ? n : 1) * sizeof(*sh->iov));
	if (!sh->ops || !sh->iov) {
		free(sh->ops);
		free(sh->iov);
		return -ENOMEM;
	}
	return 0;
}

static int
check_ops(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	if (!c || (!ops && n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!ops[i].key || (ops[i].iovcnt && !ops[i].iov))
			return -EINVAL;
	return 0;
}

static int
put_chunk(struct ol_client *c, struct scratch *s, struct ol_kv_op *ops, size_t m, size_t need,
	  struct shadow *sh)
{
	int r = reserve(&s->p, &s->cap, need);
	size_t off = 0;
	for (size_t i = 0; r == 0 && i < m; i++) {
		size_t one = put_need(olc_iov_len(&ops[i]));
		r = pack_one(c, s, &ops[i], &sh->ops[i], &sh->iov[i], s->p + off, one);
		off += one;
	}
	if (r == 0)
		r = olc_run_plain(c, true, sh->ops, m);
	for (size_t i = 0; r == 0 && i < m; i++)
		ops[i].status = sh->ops[i].status;
	return r;
}

/* ---- get ---- */

static void
scatter(struct ol_kv_op *op, const uint8_t *src, uint64_t len)
{
	for (size_t k = 0; k < op->iovcnt && len > 0; k++) {
		size_t l = op->iov[k].len < len ? op->iov[k].len : (size_t)len;
		memcpy(op->iov[k].base, src, l);
		src += l;
		len -= l;
	}
}

/* Decode an ExANS payload of orig bytes into op's iovs. 0, -EBADMSG or -ENOMEM. */
static int
decode_into(struct scratch *s, struct ol_kv_op *op, const uint8_t *p, uint64_t n, uint64_t orig)
{
	uint8_t *dst = op->iovcnt == 1 ? op->iov[0].base : NULL;
	if (!dst && reserve(&s->g, &s->gcap, (size_t)orig + 1) < 0)
		return -ENOMEM;
	if (!dst)
		dst = s->g;
	ssize_t r = ol_exans_decompress(p, (size_t)n, dst, (size_t)orig);
	if (r < 0 || (uint64_t)r != orig)
		return -EBADMSG;
	if (dst == s->g)
		scatter(op, dst, orig);
	return 0;
}

/* The header's original length agrees with the payload (before trusting it as a size). 1 or
 * -EBADMSG. */
static int
hdr_check(const uint8_t *v, uint64_t l, unsigned codec, uint64_t orig)
{
	uint64_t ds = 0;
	if (codec == OLZ_CODEC_RAW)
		return l - OLZ_HDR == orig ? 1 : -EBADMSG;
	if (ol_exans_decoded_size(v + OLZ_HDR, (size_t)(l - OLZ_HDR), &ds) < 0 || ds != orig)
		return -EBADMSG;
	return 1;
}

/* Turn a fetched stored value (sh) into op's result. */
static void
unpack_one(struct ol_client *c, struct scratch *s, struct ol_kv_op *op, const struct ol_kv_op *sh)
{
	op->status = sh->status;
	op->value_len = sh->value_len;
	if (sh->status != OL_KV_OK)
		return;
	const uint8_t *v = sh->iov[0].base;
	uint64_t l = sh->value_len, orig = l;
	unsigned codec = 0;
	int h = olz_hdr_parse(v, l, &codec, &orig), e = 0;
	count(&c->zst.get_in, l);
	op->value_len = orig;
	if (h > 0)
		h = hdr_check(v, l, codec, orig);
	if (h == 0) {
		scatter(op, v, l);
	} else if (h < 0) {
		e = -EBADMSG;
	} else if (orig > olc_iov_len(op)) {
		op->status = OL_KV_TRUNCATED;
		return;
	} else if (codec == OLZ_CODEC_RAW) {
		scatter(op, v + OLZ_HDR, orig);
	} else {
		e = decode_into(s, op, v + OLZ_HDR, l - OLZ_HDR, orig);
	}
	if (e < 0) {
		op->status = e == -ENOMEM ? OL_KV_ERROR : OL_KV_CORRUPT;
		op->value_len = 0;
		if (e == -EBADMSG)
			count(&c->zst.get_corrupt, 1);
		return;
	}
	count(&c->zst.get_out, orig);
}

/* A value too big for the caller's buffer even stored: fetch its header to report the
 * original length (rare: a caller error). The stored length when that fails. */
static uint64_t
original_len(struct ol_client *c, const struct ol_kv_op *sh)
{
	uint64_t orig = sh->value_len;
	unsigned codec = 0;
	uint8_t *b = malloc(sh->value_len ? (size_t)sh->value_len : 1);
	struct ol_iov v = {b, (size_t)sh->value_len};
	struct ol_kv_op op = {.key = sh->key, .iov = &v, .iovcnt = 1};
	if (b && olc_run_plain(c, false, &op, 1) == 0 && op.status == OL_KV_OK &&
	    (olz_hdr_parse(b, op.value_len, &codec, &orig) <= 0 ||
	     hdr_check(b, op.value_len, codec, orig) < 0))
		orig = op.value_len;
	free(b);
	return orig;
}

static int
get_chunk(struct ol_client *c, struct scratch *s, struct ol_kv_op *ops, size_t m, size_t need,
	  struct shadow *sh)
{
	int r = reserve(&s->p, &s->cap, need);
	size_t off = 0;
	for (size_t i = 0; r == 0 && i < m; i++) {
		size_t one = (size_t)olc_iov_len(&ops[i]) + OLZ_HDR;
		sh->ops[i] = ops[i];
		sh->iov[i] = (struct ol_iov){s->p + off, one};
		sh->ops[i].iov = &sh->iov[i];
		sh->ops[i].iovcnt = 1;
		off += one;
	}
	if (r == 0)
		r = olc_run_plain(c, false, sh->ops, m);
	for (size_t i = 0; r == 0 && i < m; i++) {
		unpack_one(c, s, &ops[i], &sh->ops[i]);
		if (sh->ops[i].status == OL_KV_TRUNCATED)
			ops[i].value_len = original_len(c, &sh->ops[i]);
	}
	return r;
}

/* Run a batch in chunks that fit the thread's scratch (put: compress then send; get:
 * receive then decode). */
static int
run_chunked(struct ol_client *c, struct ol_kv_op *ops, size_t n, bool put)
{
	struct scratch *s = scratch_get();
	struct shadow sh;
	int r = check_ops(c, ops, n);
	if (r < 0)
		return r;
	if (!s || shadow_alloc(&sh, n) < 0)
		return -ENOMEM;
	for (size_t i = 0; r == 0 && i < n;) {
		size_t need, m = chunk_of(ops + i, n - i, put, &need);
		r = put ? put_chunk(c, s, ops + i, m, need, &sh)
			: get_chunk(c, s, ops + i, m, need, &sh);
		i += m;
	}
	free(sh.ops);
	free(sh.iov);
	return r;
}

int
olz_put(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return run_chunked(c, ops, n, true);
}

int
olz_get(struct ol_client *c, struct ol_kv_op *ops, size_t n)
{
	return run_chunked(c, ops, n, false);
}

/* ---- stats ---- */

static unsigned long long
ld(_Atomic uint64_t *v)
{
	return (unsigned long long)atomic_load_explicit(v, memory_order_relaxed);
}

int
olz_stats_json(struct ol_client *c, char *buf, size_t cap)
{
	struct olz_stats *z = &c->zst;
	int n = snprintf(buf, cap,
			 "{\"compress\":\"%s\",\"compress_in_bytes\":%llu,"
			 "\"compress_out_bytes\":%llu,\"decompress_in_bytes\":%llu,"
			 "\"decompress_out_bytes\":%llu,\"blocks_compressed\":%llu,"
			 "\"blocks_plain\":%llu,\"blocks_corrupt\":%llu}",
			 c->compress ? "exans" : "off", ld(&z->put_in), ld(&z->put_out),
			 ld(&z->get_in), ld(&z->get_out), ld(&z->put_compressed), ld(&z->put_plain),
			 ld(&z->get_corrupt));
	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}
