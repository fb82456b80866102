/* kv/view.c - the member view the KV server answers VIEW with (see view.h). */
#include "kv/view.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static void
self_view(const struct kvv *v, struct ol_kvp_view *out)
{
	out->epoch = 0;
	out->n = 1;
	out->m[0] = v->self;
}

void
kvv_init(struct kvv *v, const struct ol_kvp_view_member *self)
{
	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->mu, NULL);
	pthread_mutex_init(&v->fn_mu, NULL);
	v->self = *self;
	v->view = ol_xcalloc(1, sizeof(*v->view));
	self_view(v, v->view);
	v->view->tag = ol_kvp_view_tag(v->view);
	atomic_store(&v->tag, v->view->tag);
}

void
kvv_fini(struct kvv *v)
{
	free(v->view);
	pthread_mutex_destroy(&v->mu);
	pthread_mutex_destroy(&v->fn_mu);
}

void
kvv_set_source(struct kvv *v, ol_kv_view_fn fn, void *arg)
{
	pthread_mutex_lock(&v->fn_mu);
	v->fn = fn;
	v->arg = arg;
	pthread_mutex_unlock(&v->fn_mu);
	if (fn)
		kvv_refresh(v);
}

void
kvv_refresh(struct kvv *v)
{
	struct ol_kvp_view *nv = ol_xcalloc(1, sizeof(*nv));
	pthread_mutex_lock(&v->fn_mu);
	int r = v->fn ? v->fn(v->arg, nv) : -ENOENT;
	pthread_mutex_unlock(&v->fn_mu);
	if (r < 0 || nv->n == 0 || nv->n > OL_KVP_MAX_VIEW)
		self_view(v, nv);
	nv->tag = ol_kvp_view_tag(nv);
	pthread_mutex_lock(&v->mu);
	bool same = nv->tag == v->view->tag && nv->epoch == v->view->epoch && nv->n == v->view->n;
	if (!same) {
		struct ol_kvp_view *old = v->view;
		v->view = nv;
		nv = old;
		atomic_store(&v->tag, v->view->tag);
		ol_info("kv: view epoch %llu, %u members, tag %08x",
			(unsigned long long)v->view->epoch, v->view->n, v->view->tag);
	}
	pthread_mutex_unlock(&v->mu);
	free(nv);
}

int
kvv_encode(struct kvv *v, uint8_t **out)
{
	size_t cap =
	    OL_KVP_VIEW_HDR + (size_t)OL_KVP_MAX_VIEW * (OL_KVP_VIEW_ENT + OL_KVP_MAX_VIEW_ADDR);
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	pthread_mutex_lock(&v->mu);
	int n = ol_kvp_view_encode(buf, cap, v->view);
	pthread_mutex_unlock(&v->mu);
	if (n < 0)
		free(buf);
	else
		*out = buf;
	return n;
}
