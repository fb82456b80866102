/* store/list.c - listings: an ordered merge of LMDB cursor range scans over the drives,
 * with the quorum rule applied per key, so a wiped or lagging drive changes nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "store/store_int.h"

int
ol_merge_open(struct ol_store *st, enum ol_meta_db db, const void *prefix, size_t plen,
	      struct ol_merge *m)
{
	int online = 0;

	memset(m, 0, sizeof(*m));
	m->st = st;
	m->db = db;
	if (plen > sizeof(m->prefix))
		return -EINVAL;
	memcpy(m->prefix, prefix, plen);
	m->plen = plen;
	for (int d = 0; d < st->n; d++) {
		if (!st->d[d].meta || ol_meta_begin(st->d[d].meta, false, &m->t[d]))
			continue;
		if (ol_meta_cursor_open(m->t[d], db, &m->c[d])) {
			ol_meta_abort(m->t[d]);
			m->t[d] = NULL;
			continue;
		}
		online++;
	}
	if (online < st->k) {
		ol_merge_close(m);
		return -EIO;
	}
	ol_merge_seek(m, "", 0);
	return 0;
}

static void
check_prefix(struct ol_merge *m, int d, int rc)
{
	m->have[d] = rc == 1 && m->kl[d] >= m->plen && !memcmp(m->k[d], m->prefix, m->plen);
}

void
ol_merge_seek(struct ol_merge *m, const void *rest, size_t rlen)
{
	char key[OL_KEYBUF + OL_STORE_MAX_KEY];

	memcpy(key, m->prefix, m->plen);
	if (rlen > OL_STORE_MAX_KEY + 80)
		rlen = OL_STORE_MAX_KEY + 80;
	memcpy(key + m->plen, rest, rlen);
	for (int d = 0; d < m->st->n; d++) {
		int rc;

		if (!m->c[d])
			continue;
		rc = ol_meta_cursor_seek(m->c[d], key, m->plen + rlen, &m->k[d], &m->kl[d],
					 &m->v[d], &m->vl[d]);
		check_prefix(m, d, rc);
	}
}

static int
keycmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

int
ol_merge_next(struct ol_merge *m, const void **key, size_t *klen, const void **vals, size_t *lens)
{
	int min = -1;

	for (int d = 0; d < m->st->n; d++)
		if (m->have[d] && (min < 0 || keycmp(m->k[d], m->kl[d], m->k[min], m->kl[min]) < 0))
			min = d;
	if (min < 0)
		return 0;
	*key = (const char *)m->k[min] + m->plen;
	*klen = m->kl[min] - m->plen;
	for (int d = m->st->n - 1; d >= 0; d--) {
		vals[d] = NULL;
		lens[d] = 0;
		if (!m->have[d] || keycmp(m->k[d], m->kl[d], m->k[min], m->kl[min]))
			continue;
		vals[d] = m->v[d];
		lens[d] = m->vl[d];
		if (d != min)
			check_prefix(
			    m, d,
			    ol_meta_cursor_next(m->c[d], &m->k[d], &m->kl[d], &m->v[d], &m->vl[d]));
	}
	/* the min drive's key is still the one returned: advance it last */
	{
		const void *k = m->k[min];
		size_t kl = m->kl[min];

		check_prefix(m, min,
			     ol_meta_cursor_next(m->c[min], &m->k[min], &m->kl[min], &m->v[min],
						 &m->vl[min]));
		*key = (const char *)k + m->plen;
		*klen = kl - m->plen;
	}
	return 1;
}

void
ol_merge_close(struct ol_merge *m)
{
	for (int d = 0; d < OL_MAX_DRIVES; d++) {
		ol_meta_cursor_close(m->c[d]);
		ol_meta_abort(m->t[d]);
		m->c[d] = NULL;
		m->t[d] = NULL;
	}
}

void
ol_rec_info(const struct ol_rec *r, struct ol_obj_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = r->size;
	info->mtime_ns = r->mtime;
	memcpy(info->etag, r->etag, r->etag_len);
	info->etag[r->etag_len] = 0;
	info->meta = r->meta;
	info->meta_len = r->meta_len;
	info->n_parts = (r->flags & OL_REC_MULTIPART) ? r->n_parts : 0;
}

struct ol_iter {
	struct ol_merge m;
	char key[OL_STORE_MAX_KEY];
};

int
ol_store_iter_open(struct ol_store *st, const char *bucket, struct ol_iter **out)
{
	struct ol_iter *it;
	char pre[OL_KEYBUF];
	int rc;

	if (!ol_bucket_ok(st, bucket))
		return -ENOENT;
	it = ol_xmalloc(sizeof(*it));
	rc = ol_merge_open(st, OL_META_OBJECTS, pre, ol_okey(pre, bucket, "", 0), &it->m);
	if (rc) {
		free(it);
		return rc;
	}
	*out = it;
	return 0;
}

int
ol_store_iter_seek(struct ol_iter *it, const char *key, size_t key_len)
{
	if (key_len > OL_STORE_MAX_KEY)
		return -EINVAL;
	ol_merge_seek(&it->m, key, key_len);
	return 0;
}

int
ol_store_iter_next(struct ol_iter *it, const char **key, size_t *key_len, struct ol_obj_info *info)
{
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];

	while (ol_merge_next(&it->m, &k, &kl, vals, lens) == 1) {
		if (!ol_rec_resolve(it->m.st, vals, lens, win, valid))
			continue;
		for (int d = 0; d < it->m.st->n; d++)
			if (valid[d]) {
				ol_rec_info(&win[d], info);
				break;
			}
		memcpy(it->key, k, kl);
		*key = it->key;
		*key_len = kl;
		return 1;
	}
	return 0;
}

void
ol_store_iter_close(struct ol_iter *it)
{
	if (!it)
		return;
	ol_merge_close(&it->m);
	free(it);
}
