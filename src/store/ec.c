/* store/ec.c - ISA-L Reed-Solomon: encode with the Cauchy matrix, decode by inverting the
 * k x k matrix of the surviving rows. */
#include "store/ec.h"

#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

int
ol_ec_init(struct ol_ec *ec, int k, int p)
{
	int n = k + p;

	if (k < 1 || p < 0 || n > OL_EC_MAX_SHARDS)
		return -EINVAL;
	ec->k = k;
	ec->p = p;
	ec->matrix = ol_xmalloc((size_t)n * k);
	ec->tbls = ol_xmalloc((size_t)32 * k * (p ? p : 1));
	gf_gen_cauchy1_matrix(ec->matrix, n, k);
	if (p)
		ec_init_tables(k, p, ec->matrix + (size_t)k * k, ec->tbls);
	return 0;
}

void
ol_ec_fini(struct ol_ec *ec)
{
	free(ec->matrix);
	free(ec->tbls);
	ec->matrix = ec->tbls = NULL;
}

void
ol_ec_encode(const struct ol_ec *ec, size_t len, uint8_t *const *data, uint8_t *const *parity)
{
	if (ec->p == 0 || len == 0)
		return;
	ec_encode_data((int)len, ec->k, ec->p, ec->tbls, (unsigned char **)data,
		       (unsigned char **)parity);
}

/* Pick k present rows; invert them; the rows of the missing shards are matrix[miss] x inv. */
int
ol_ec_decode(const struct ol_ec *ec, size_t len, uint8_t *const *shards, const bool *present,
	     const bool *want)
{
	int k = ec->k, n = ec->k + ec->p, nsrc = 0, nout = 0, rc = 0;
	uint8_t sub[OL_EC_MAX_SHARDS * OL_EC_MAX_SHARDS], inv[OL_EC_MAX_SHARDS * OL_EC_MAX_SHARDS];
	uint8_t dec[OL_EC_MAX_SHARDS * OL_EC_MAX_SHARDS];
	uint8_t *src[OL_EC_MAX_SHARDS], *out[OL_EC_MAX_SHARDS];
	uint8_t *tbls;

	for (int i = 0; i < n && nsrc < k; i++) {
		if (!present[i])
			continue;
		memcpy(sub + (size_t)nsrc * k, ec->matrix + (size_t)i * k, (size_t)k);
		src[nsrc++] = shards[i];
	}
	if (nsrc < k)
		return -EIO;
	for (int i = 0; i < n && !nout; i++)
		nout = !present[i] && (!want || want[i]);
	if (!nout || len == 0)
		return 0; /* nothing to rebuild: no inversion (a whole stripe or record read) */
	nout = 0;
	if (gf_invert_matrix(sub, inv, k) < 0)
		return -EIO;
	for (int i = 0; i < n; i++) {
		if (present[i] || (want && !want[i]))
			continue;
		/* row i of (matrix x inv) maps the chosen sources to shard i */
		for (int j = 0; j < k; j++) {
			uint8_t s = 0;

			for (int l = 0; l < k; l++)
				s ^= gf_mul(ec->matrix[(size_t)i * k + l], inv[(size_t)l * k + j]);
			dec[(size_t)nout * k + j] = s;
		}
		out[nout++] = shards[i];
	}
	tbls = ol_xmalloc((size_t)32 * k * nout);
	ec_init_tables(k, nout, dec, tbls);
	ec_encode_data((int)len, k, nout, tbls, src, out);
	free(tbls);
	return rc;
}
