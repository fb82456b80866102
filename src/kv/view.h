/* kv/view.h - the pool's member view that the KV server answers VIEW with
 * (docs/kv-protocol.md, "Cluster view"): a cached copy of what a source (cluster membership,
 * set by the daemon's wiring) returns, refreshed about once a second by the server's reaper
 * thread, and its tag, which every reply entry carries. Without a source, or while it has no
 * member with a KV address, the view is this node alone with epoch 0. Thread-safe. */
#ifndef OL_KV_VIEW_H
#define OL_KV_VIEW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv.h"
#include "kv/proto.h"

struct kvv {
	pthread_mutex_t mu;    /* view */
	pthread_mutex_t fn_mu; /* fn, arg: held while the source runs */
	ol_kv_view_fn fn;
	void *arg;
	struct ol_kvp_view *view; /* current; replaced whole by kvv_refresh */
	struct ol_kvp_view_member self;
	_Atomic uint32_t tag; /* of view, for reply entries */
};

/* self: this node (id, weight, capacity, KV address). Aborts on out-of-memory (daemon). */
void kvv_init(struct kvv *v, const struct ol_kvp_view_member *self);
void kvv_fini(struct kvv *v);
void kvv_set_source(struct kvv *v, ol_kv_view_fn fn, void *arg);
/* Ask the source again and swap the cached view if it changed. */
void kvv_refresh(struct kvv *v);
/* The cached view as a VIEW reply body into a malloc'd buffer: its length, or -ENOMEM. */
int kvv_encode(struct kvv *v, uint8_t **out);

#endif
