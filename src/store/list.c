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
		struct ol_meta *mm = atomic_load(&st->d[d].meta);

		if (!mm)
			continue;
		if (ol_meta_begin(mm, false, &m->t[d])) {
			m->t[d] = NULL;
			ol_drive_check(st, d, mm);
			continue;
		}
		if (ol_meta_cursor_open(m->t[d], db, &m->c[d])) {
			ol_meta_abort(m->t[d]);
			m->t[d] = NULL;
			m->c[d] = NULL;
			ol_drive_check(st, d, mm);
			continue;
		}
		m->mm[d] = mm;
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
	if (rc < 0)
		ol_drive_check(m->st, d, m->mm[d]);
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
	info->delete_marker = (r->flags & OL_REC_DELMARK) != 0;
	ol_ver_id(r, info->version_id);
}

/* Keys longer than OL_KEY_HEAD that share their first OL_KEY_HEAD bytes sit together in
 * the index, ordered by hash: the iterator gathers such a group and sorts it by full key. */
struct grp_ent {
	char *key;
	size_t kl;
	struct ol_obj_info info;
};

struct ol_iter {
	struct ol_kmerge *km; /* an iterator over several sets (sets.c): only this is used */
	struct ol_merge m;
	char key[OL_STORE_MAX_KEY];
	char from[OL_STORE_MAX_KEY]; /* seek target: skip keys below it */
	size_t from_len;
	struct grp_ent *g;
	size_t gn, gi;
	bool la; /* a lookahead entry read past the end of a group */
	const void *la_k, *la_v[OL_MAX_DRIVES];
	size_t la_kl, la_l[OL_MAX_DRIVES];
	bool markers; /* return delete markers too (the version iterator) */
};

struct ol_iter *
ol_iter_shell(struct ol_kmerge *km)
{
	struct ol_iter *it = ol_xcalloc(1, sizeof(*it));

	it->km = km;
	return it;
}

struct ol_kmerge *
ol_iter_km(const struct ol_iter *it)
{
	return it->km;
}

void
ol_iter_markers(struct ol_iter *it)
{
	it->markers = true;
}

int
ol_set_iter_open(struct ol_store *st, const char *bucket, struct ol_iter **out)
{
	struct ol_iter *it;
	char pre[OL_KEYBUF];
	int rc;

	rc = ol_bucket_check(st, bucket); /* -EIO undecided: not NoSuchBucket */
	if (rc)
		return rc;
	it = ol_xcalloc(1, sizeof(*it));
	rc = ol_merge_open(st, OL_META_OBJECTS, pre, ol_okey(pre, bucket, "", 0), &it->m);
	if (rc) {
		free(it);
		return rc;
	}
	*out = it;
	return 0;
}

static void
grp_clear(struct ol_iter *it)
{
	for (size_t i = 0; i < it->gn; i++)
		free(it->g[i].key);
	free(it->g);
	it->g = NULL;
	it->gn = it->gi = 0;
}

int
ol_set_iter_seek(struct ol_iter *it, const char *key, size_t key_len)
{
	if (key_len > OL_STORE_MAX_KEY)
		return -EINVAL;
	grp_clear(it);
	it->la = false;
	memcpy(it->from, key, key_len);
	it->from_len = key_len;
	ol_merge_seek(&it->m, key, key_len < OL_KEY_HEAD ? key_len : OL_KEY_HEAD);
	return 0;
}

static int
fetch(struct ol_iter *it, const void **k, size_t *kl, const void **vals, size_t *lens)
{
	if (!it->la)
		return ol_merge_next(&it->m, k, kl, vals, lens);
	it->la = false;
	*k = it->la_k;
	*kl = it->la_kl;
	memcpy(vals, it->la_v, sizeof(it->la_v));
	memcpy(lens, it->la_l, sizeof(it->la_l));
	return 1;
}

/* The full key and info of one index entry; 0 when no version is visible. */
static int
entry(struct ol_iter *it, const void *k, size_t kl, const void **vals, size_t *lens, char *key,
      size_t *klen, struct ol_obj_info *info)
{
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];

	if (!ol_rec_resolve(it->m.st, vals, lens, win, valid))
		return 0;
	for (int d = 0; d < it->m.st->n; d++)
		if (valid[d]) {
			if ((win[d].flags & OL_REC_DELMARK) && !it->markers)
				return 0;
			ol_rec_info(&win[d], info);
			if (kl > OL_KEY_HEAD) {
				memcpy(key, k, OL_KEY_HEAD);
				memcpy(key + OL_KEY_HEAD, win[d].tail, win[d].tail_len);
				*klen = OL_KEY_HEAD + win[d].tail_len;
			} else {
				memcpy(key, k, kl);
				*klen = kl;
			}
			return 1;
		}
	return 0;
}

static int
ent_cmp(const void *a, const void *b)
{
	const struct grp_ent *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->kl < y->kl ? x->kl : y->kl);

	return c ? c : (x->kl > y->kl) - (x->kl < y->kl);
}

/* Gather every long entry with the head of k (k itself first), sorted. */
static void
gather(struct ol_iter *it, const void *k, size_t kl, const void **vals, size_t *lens)
{
	char head[OL_KEY_HEAD], key[OL_STORE_MAX_KEY];
	size_t klen;
	struct ol_obj_info info;

	memcpy(head, k, OL_KEY_HEAD);
	for (;;) {
		if (entry(it, k, kl, vals, lens, key, &klen, &info)) {
			struct grp_ent *e;

			it->g = ol_xrealloc(it->g, (it->gn + 1) * sizeof(*it->g));
			e = &it->g[it->gn++];
			e->key = ol_xmalloc(klen);
			memcpy(e->key, key, klen);
			e->kl = klen;
			e->info = info;
		}
		if (ol_merge_next(&it->m, &k, &kl, vals, lens) != 1)
			break;
		if (kl <= OL_KEY_HEAD || memcmp(k, head, OL_KEY_HEAD)) {
			it->la = true;
			it->la_k = k;
			it->la_kl = kl;
			memcpy(it->la_v, vals, sizeof(it->la_v));
			memcpy(it->la_l, lens, sizeof(it->la_l));
			break;
		}
	}
	if (it->gn > 1)
		qsort(it->g, it->gn, sizeof(*it->g), ent_cmp);
}

static int
below_from(const struct ol_iter *it, const char *k, size_t kl)
{
	int c = memcmp(k, it->from, kl < it->from_len ? kl : it->from_len);

	return c < 0 || (c == 0 && kl < it->from_len);
}

int
ol_set_iter_next(struct ol_iter *it, const char **key, size_t *key_len, struct ol_obj_info *info)
{
	const void *vals[OL_MAX_DRIVES], *k;
	size_t lens[OL_MAX_DRIVES], kl;

	for (;;) {
		while (it->gi < it->gn) {
			struct grp_ent *e = &it->g[it->gi++];

			if (below_from(it, e->key, e->kl))
				continue;
			memcpy(it->key, e->key, e->kl);
			*key = it->key;
			*key_len = e->kl;
			*info = e->info;
			return 1;
		}
		grp_clear(it);
		if (fetch(it, &k, &kl, vals, lens) != 1)
			return 0;
		if (kl > OL_KEY_HEAD) {
			gather(it, k, kl, vals, lens);
			continue;
		}
		if (!entry(it, k, kl, vals, lens, it->key, key_len, info) ||
		    below_from(it, it->key, *key_len))
			continue;
		*key = it->key;
		return 1;
	}
}

void
ol_set_iter_close(struct ol_iter *it)
{
	if (!it)
		return;
	grp_clear(it);
	ol_merge_close(&it->m);
	free(it);
}
