/* store/rset.c - an erasure set whose drives are served by node planes (issue 10): the engine
 * of store.c with every drive remote (rdrive.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "store/store_int.h"

static int
check_opts(const struct ol_store_set_opts *o)
{
	if (!o || !o->n || o->n > OL_MAX_DRIVES || !o->drives || !o->secret || !o->secret[0] ||
	    strlen(o->secret) >= 256 || (!o->epoch && !o->readonly) || o->deadline_ms < 0)
		return -EINVAL;
	for (unsigned i = 0; i < o->n; i++)
		if (!o->drives[i].peer || !o->drives[i].peer[0] ||
		    strlen(o->drives[i].peer) >= 128 || o->drives[i].peer_drive > 0xffff)
			return -EINVAL;
	if (o->store_id && (!o->store_id[0] || strlen(o->store_id) >= OL_DRIVEID_STORE ||
			    o->set >= (o->sets ? o->sets : 1) || o->pool > 0xffff))
		return -EINVAL;
	return 0;
}

/* What drive i's identity record must say (its UUID learnt from the drive). */
static void
ident(struct ol_driveid *e, const struct ol_store_set_opts *o, unsigned i, unsigned parity)
{
	*e = (struct ol_driveid){.version = 2,
				 .pool = o->pool,
				 .sets = o->sets ? o->sets : 1,
				 .set = o->set,
				 .index = i,
				 .drives = o->n,
				 .parity = parity};
	snprintf(e->store, sizeof(e->store), "%s", o->store_id);
}

int
ol_set_open_set(const struct ol_config *cfg, const struct ol_store_set_opts *o,
		struct ol_store **out)
{
	struct ol_config *c;
	struct ol_store *st;
	char why[OL_WHY_MAX];
	int online = 0, rc = check_opts(o);

	*out = NULL;
	if (rc)
		return rc;
	c = ol_xmalloc(sizeof(*c)); /* the geometry from cfg, with N drives */
	memcpy(c, cfg, sizeof(*c));
	c->set_drive_count = o->n;
	c->n_data_dirs = o->n;
	rc = ol_store_new(c, &st);
	free(c);
	if (rc)
		return rc;
	st->remote = true;
	st->readonly = o->readonly;
	st->shards = o->readonly && o->shards;
	atomic_store(&st->epoch, o->epoch);
	memcpy(st->secret, o->secret, strlen(o->secret) + 1);
	st->self_id = o->self_id;
	st->deadline_ms = o->deadline_ms ? o->deadline_ms : 5000;
	st->slow =
	    (struct ol_slow_cfg){cfg->cluster_slow_drive_ms, cfg->cluster_slow_drive_ratio,
				 cfg->cluster_slow_drive_hold_s, cfg->cluster_slow_drive_hold_max_s,
				 cfg->cluster_slow_drive_min_s};
	st->hedge = (struct ol_hedge_cfg){cfg->cluster_hedge_ms, cfg->cluster_hedge_ratio};
	for (int i = 0; i < st->n; i++) {
		struct ol_drive *d = &st->d[i];
		struct ol_meta *m = NULL;

		snprintf(d->root, sizeof(d->root), "node %u %s drive %u", o->drives[i].node_id,
			 o->drives[i].peer, o->drives[i].peer_drive);
		d->rd = ol_rd_new(st, &o->drives[i]);
		if (o->store_id)
			ident(&d->id, o, (unsigned)i, cfg->default_parity_count);
		rc = ol_rd_open_meta(st, i, &m, why, sizeof(why));
		if (!rc) {
			atomic_store(&d->meta, m);
			online++;
			continue;
		}
		snprintf(d->why, sizeof(d->why), "%s at start: %s",
			 rc == -EXDEV ? "refused" : "did not answer", why);
		if (rc == -EXDEV)
			ol_err("store: drive %s is kept offline: %s", d->root, why);
		else
			ol_warn("store: drive %s: %s", d->root, d->why);
	}
	/* a read-only view reads with a read quorum: k drives that answer */
	if (online < (st->readonly ? st->k : st->w)) {
		ol_err("store: only %d of %d remote drives answer, need %d", online, st->n,
		       st->readonly ? st->k : st->w);
		ol_set_close(st);
		return -EIO;
	}
	if (st->readonly) {
		ol_info("store: read-only view of a remote set of %d drives (%d online), %d data + "
			"%d parity%s",
			st->n, online, st->k, st->p,
			st->shards ? "; writes shard files, its commits go to the leader" : "");
	} else {
		ol_info("store: remote set of %d drives (%d online), %d data + %d parity, write "
			"quorum %d, epoch %llu",
			st->n, online, st->k, st->p, st->w, (unsigned long long)o->epoch);
		ol_missed_count(st);
	}
	ol_drive_monitor_start(st);
	*out = st;
	return 0;
}

void
ol_set_set_epoch(struct ol_store *st, uint64_t epoch)
{
	uint64_t cur = atomic_load(&st->epoch);

	while (epoch > cur && !atomic_compare_exchange_weak(&st->epoch, &cur, epoch))
		;
}
