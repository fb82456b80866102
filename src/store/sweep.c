/* store/sweep.c - at open, remove shard files that no record references:
 * leftovers of writes interrupted before their metadata commit, and old versions whose
 * reclaim was cut short by a crash. Runs before any other call, so nothing is in flight. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "store/store_int.h"

struct uuid_set {
	uint8_t (*u)[OL_UUID];
	size_t n, cap;
};

static void
set_add_rec(struct uuid_set *s, const struct ol_rec *r)
{
	struct ol_rpart p;

	if (r->flags & OL_REC_INLINE)
		return;
	for (uint32_t i = 0; i < r->n_parts; i++) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 256;
			s->u = ol_xrealloc(s->u, s->cap * OL_UUID);
		}
		ol_rec_part(r, i, &p);
		memcpy(s->u[s->n++], p.uuid, OL_UUID);
	}
}

static int
collect_db(struct ol_meta_txn *t, enum ol_meta_db db, struct uuid_set *s)
{
	struct ol_meta_cursor *c;
	const void *k, *v;
	size_t kl, vl;
	struct ol_rec r, pr;
	int rc = ol_meta_cursor_open(t, db, &c);

	if (rc)
		return rc;
	for (rc = ol_meta_cursor_seek(c, "", 0, &k, &kl, &v, &vl); rc == 1;
	     rc = ol_meta_cursor_next(c, &k, &kl, &v, &vl)) {
		if (ol_rec_decode(v, vl, &r))
			continue;
		set_add_rec(s, &r);
		if (r.prev_len && !ol_rec_decode(r.prev, r.prev_len, &pr))
			set_add_rec(s, &pr);
	}
	ol_meta_cursor_close(c);
	return rc;
}

static int
cmp_uuid(const void *a, const void *b)
{
	return memcmp(a, b, OL_UUID);
}

static int
unhex(const char *s, uint8_t *out)
{
	for (int i = 0; i < 2 * OL_UUID; i++) {
		int c = s[i], v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return -1;
		if (i & 1)
			out[i / 2] |= (uint8_t)v;
		else
			out[i / 2] = (uint8_t)(v << 4);
	}
	return s[2 * OL_UUID] ? -1 : 0;
}

static void
sweep_dir(const char *dir, const struct uuid_set *s, size_t *removed)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[OL_PATH_MAX + 80];
	uint8_t u[OL_UUID];

	if (!dh)
		return;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		if (unhex(e->d_name, u) == 0 && s->n && bsearch(u, s->u, s->n, OL_UUID, cmp_uuid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) == 0)
			(*removed)++;
	}
	closedir(dh);
}

static void
sweep_drive(struct ol_store *st, int d, const struct uuid_set *s)
{
	DIR *dh = opendir(st->d[d].data);
	struct dirent *e;
	size_t removed = 0;
	char sub[OL_PATH_MAX + 8];

	if (!dh) {
		ol_warn("store: drive %s: cannot sweep %s: %s", st->d[d].root, st->d[d].data,
			strerror(errno));
		return;
	}
	while ((e = readdir(dh))) {
		if (strlen(e->d_name) != 2 || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", st->d[d].data, e->d_name);
		sweep_dir(sub, s, &removed);
	}
	closedir(dh);
	if (removed)
		ol_info("store: drive %s: swept %zu unreferenced shard file(s)", st->d[d].root,
			removed);
}

/* A file is kept when a record on ANY drive references it, so a drive whose index was lost
 * keeps its shards (heal on read gives the records back). */
int
ol_sweep(struct ol_store *st)
{
	struct uuid_set s = {0};
	int rc = 0;

	for (int d = 0; d < st->n && !rc; d++) {
		struct ol_meta_txn *t;

		if (!st->d[d].meta)
			continue;
		rc = ol_meta_begin(st->d[d].meta, false, &t);
		if (rc)
			break;
		rc = collect_db(t, OL_META_OBJECTS, &s);
		if (!rc)
			rc = collect_db(t, OL_META_PARTS, &s);
		ol_meta_abort(t);
	}
	if (!rc && s.n)
		qsort(s.u, s.n, OL_UUID, cmp_uuid);
	for (int d = 0; d < st->n && !rc; d++)
		if (st->d[d].meta)
			sweep_drive(st, d, &s);
	if (rc)
		ol_warn("store: sweep skipped: %s", strerror(-rc));
	free(s.u);
	return rc;
}
