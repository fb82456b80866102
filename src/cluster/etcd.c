/* cluster/etcd.c - etcd v3 JSON gateway client: calls with deadlines and endpoint failover,
 * and a watch that reconnects from the last revision it delivered. See etcd.h. */
#include "cluster/etcd.h"
#include "cluster/etcd_json.h"
#include "cluster/httpc.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct endpoint {
	char url[160];
	char host[128];
	char port[8];
};

struct ol_etcd {
	struct endpoint ep[OL_ETCD_MAX_ENDPOINTS];
	unsigned n_ep;
	unsigned timeout_ms;
	atomic_uint cur; /* endpoint that answered last: tried first */
	/* until when endpoint i is suspect: a try of it ran out of its time (hung or cut off);
	 * calls try it after the others (ol_etcd_order) */
	_Atomic int64_t hung_until[OL_ETCD_MAX_ENDPOINTS];
	_Atomic int64_t cutoff; /* ol_etcd_cutoff: no call runs past it (0: none) */
};

int
ol_etcd_new(const char *const *endpoints, unsigned n, unsigned timeout_ms, struct ol_etcd **out)
{
	if (n == 0 || n > OL_ETCD_MAX_ENDPOINTS || timeout_ms == 0)
		return -EINVAL;
	struct ol_etcd *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct endpoint *e = &c->ep[i];
		int rc = strlen(endpoints[i]) < sizeof(e->url) ? 0 : -EINVAL;
		if (!rc)
			rc = ol_httpc_parse_url(endpoints[i], e->host, sizeof(e->host), e->port,
						sizeof(e->port));
		if (rc) {
			free(c);
			return rc;
		}
		memcpy(e->url, endpoints[i], strlen(endpoints[i]) + 1);
	}
	c->n_ep = n;
	c->timeout_ms = timeout_ms;
	*out = c;
	return 0;
}

void
ol_etcd_free(struct ol_etcd *c)
{
	free(c);
}

const char *
ol_etcd_endpoint(struct ol_etcd *c)
{
	return c->ep[atomic_load(&c->cur) % c->n_ep].url;
}

void
ol_etcd_cutoff(struct ol_etcd *c, int64_t ms)
{
	atomic_store(&c->cutoff, ol_httpc_now_ms() + (ms > 0 ? ms : 0));
}

/* the cutoff has passed */
static bool
cut_off(struct ol_etcd *c)
{
	return ol_httpc_cut_off(&c->cutoff, ol_httpc_now_ms());
}

/* how long "lease not found" after a grant can mean a member not caught up yet */
#define LEASE_APPLY_MS 3000

/* sleep ms, no longer than to the cutoff */
static void
sleep_ms(struct ol_etcd *c, int64_t ms)
{
	int64_t at = atomic_load(&c->cutoff);
	if (at && at - ol_httpc_now_ms() < ms)
		ms = at - ol_httpc_now_ms();
	if (ms <= 0)
		return;
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* an error worth trying on another endpoint */
static bool
retryable(int rc)
{
	return rc == -EAGAIN || rc == -ETIMEDOUT || rc == -ECONNREFUSED || rc == -ECONNRESET ||
	       rc == -EPIPE || rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -EPROTO ||
	       rc == -ECONNABORTED;
}

/* etcd's JSON gateway hands Grpc-Metadata-* headers on as gRPC metadata, and "hasleader" is
 * what etcd's own client sends (WithRequireLeader): a member without a raft leader (one cut
 * off in a minority) then refuses at once ("no leader", Unavailable: the call moves to the
 * next endpoint) rather than holding a linearizable call until its own request timeout (7 s),
 * and it cancels a watch stream when it loses its leader rather than keeping it open, silent. */
#define REQUIRE_LEADER "Grpc-Metadata-Hasleader: true\r\n"

int64_t
ol_etcd_try_ms(int64_t left_ms, unsigned untried)
{
	int64_t per = untried > 1 ? left_ms / untried : left_ms;
	if (per < OL_ETCD_MIN_TRY_MS)
		per = OL_ETCD_MIN_TRY_MS;
	return per < left_ms ? per : left_ms;
}

/* endpoint i failed: the next call starts at the one after it, unless another call moved the
 * start meanwhile (to one that answered) */
static void
pass_over(struct ol_etcd *c, unsigned i)
{
	unsigned expect = i;
	atomic_compare_exchange_strong(&c->cur, &expect, (i + 1) % c->n_ep);
}

unsigned
ol_etcd_order(unsigned n, unsigned start, const bool *suspect, unsigned *order)
{
	unsigned m = 0, ok = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned k = 0; k < n; k++) {
			unsigned i = (start + k) % n;
			if (suspect[i] == (pass == 1))
				order[m++] = i;
		}
		if (pass == 0)
			ok = m; /* the first pass placed the members not suspect */
	}
	return ok;
}

/* POST body to path on the endpoints until one answers or the deadline passes: each endpoint
 * in turn, from the one that answered last, those whose try ran out of time lately after the
 * others (ol_etcd_order), each try with its share of the time left (ol_etcd_try_ms: while a
 * member not suspect is still to try, the suspect ones count as one, so members known to hang
 * do not take the time of one known to answer), a short backoff after every round. *resp receives
 * the answer of a 200, or the error of an etcd error object (mapped to -errno). */
static int
call(struct ol_etcd *c, const char *path, const char *body, int64_t deadline, char **resp,
     size_t *resp_len)
{
	if (!body)
		return -ENOMEM;
	int rc = -ETIMEDOUT;
	unsigned order[OL_ETCD_MAX_ENDPOINTS];
	bool suspect[OL_ETCD_MAX_ENDPOINTS];
	int64_t t0 = ol_httpc_now_ms();
	for (unsigned i = 0; i < c->n_ep; i++)
		suspect[i] = atomic_load(&c->hung_until[i]) > t0;
	unsigned n_ok = ol_etcd_order(c->n_ep, atomic_load(&c->cur), suspect, order);
	for (unsigned t = 0;; t++) {
		unsigned k = t % c->n_ep, i = order[k];
		int64_t now = ol_httpc_now_ms(), left = deadline - now;
		if (cut_off(c))
			return -ECANCELED;
		if (left <= 0)
			break;
		int status = 0;
		char *r = NULL;
		size_t rl = 0;
		/* the members not suspect share the time, less one share kept for the suspect
		 * ones (one that hangs now costs half the call, not all of it) */
		unsigned untried = k < n_ok ? n_ok - k + (n_ok < c->n_ep) : c->n_ep - k;
		rc = ol_httpc_post(c->ep[i].host, c->ep[i].port, path, REQUIRE_LEADER, body,
				   now + ol_etcd_try_ms(left, untried), &c->cutoff, &status, &r,
				   &rl);
		if (rc == -ECANCELED) /* cut off: says nothing of this endpoint */
			return rc;
		if (rc != -ETIMEDOUT) /* it answered (or refused at once): not hung */
			atomic_store(&c->hung_until[i], 0);
		if (!rc && status != 200) {
			rc = ol_etcd_json_error(r, rl, NULL, NULL, 0);
			if (!rc)
				rc = status >= 500 ? -EAGAIN : -EPROTO;
		}
		if (!rc) {
			atomic_store(&c->cur, i);
			*resp = r;
			*resp_len = rl;
			return 0;
		}
		free(r);
		if (rc == -ETIMEDOUT)
			atomic_store(&c->hung_until[i], ol_httpc_now_ms() + OL_ETCD_SUSPECT_MS);
		if (!retryable(rc))
			return rc;
		pass_over(c, i);
		if ((t + 1) % c->n_ep == 0) {
			/* every endpoint failed: back off a little before the next round */
			unsigned round = (t + 1) / c->n_ep - 1;
			int64_t back = 50 << (round < 4 ? round : 4);
			left = deadline - ol_httpc_now_ms();
			sleep_ms(c, back < left ? back : left);
		}
	}
	return rc;
}

static int64_t
deadline_of(struct ol_etcd *c)
{
	return ol_httpc_now_ms() + c->timeout_ms;
}

int
ol_etcd_range(struct ol_etcd *c, const char *key, unsigned flags, int64_t rev, int64_t limit,
	      struct ol_etcd_range_result *out)
{
	char *body = ol_etcd_enc_range(key, flags, rev, limit), *r = NULL;
	size_t rl;
	memset(out, 0, sizeof(*out));
	int rc = call(c, "/v3/kv/range", body, deadline_of(c), &r, &rl);
	if (!rc)
		rc = ol_etcd_dec_range(r, rl, out);
	free(body);
	free(r);
	return rc;
}

int
ol_etcd_put(struct ol_etcd *c, const char *key, const void *value, size_t value_len, int64_t lease,
	    int64_t *revision)
{
	char *body = ol_etcd_enc_put(key, value, value_len, lease), *r = NULL;
	size_t rl;
	int64_t deadline = deadline_of(c), back = 20;
	int64_t apply_end = ol_httpc_now_ms() + LEASE_APPLY_MS;
	int rc;
	for (;;) {
		rc = call(c, "/v3/kv/put", body, deadline, &r, &rl);
		/* a member that has not applied a fresh grant yet says "lease not found"; a lease
		 * that lapsed (its holder stalled past the TTL) says it for good: give up after
		 * the window a grant takes to apply, not at the call's deadline */
		int64_t end = deadline < apply_end ? deadline : apply_end;
		if (rc != -ENOENT || !lease || ol_httpc_now_ms() + back >= end)
			break;
		sleep_ms(c, back);
		back = back < 400 ? back * 2 : back;
	}
	if (!rc)
		rc = ol_etcd_dec_write(r, rl, revision, NULL);
	free(body);
	free(r);
	return rc;
}

int
ol_etcd_delete(struct ol_etcd *c, const char *key, unsigned flags, int64_t *deleted)
{
	char *body = ol_etcd_enc_delete(key, flags), *r = NULL;
	size_t rl;
	int rc = call(c, "/v3/kv/deleterange", body, deadline_of(c), &r, &rl);
	if (!rc)
		rc = ol_etcd_dec_write(r, rl, NULL, deleted);
	free(body);
	free(r);
	return rc;
}

int
ol_etcd_txn(struct ol_etcd *c, const struct ol_etcd_cmp *cmp, size_t n_cmp,
	    const struct ol_etcd_op *success, size_t n_success, const struct ol_etcd_op *failure,
	    size_t n_failure, struct ol_etcd_txn_result *out)
{
	char *body = ol_etcd_enc_txn(cmp, n_cmp, success, n_success, failure, n_failure);
	char *r = NULL;
	size_t rl;
	memset(out, 0, sizeof(*out));
	int rc = call(c, "/v3/kv/txn", body, deadline_of(c), &r, &rl);
	if (!rc)
		rc = ol_etcd_dec_txn(r, rl, out);
	free(body);
	free(r);
	return rc;
}

static int
lease_call(struct ol_etcd *c, const char *path, const char *field, int64_t v, int64_t *id,
	   int64_t *ttl)
{
	char *body = ol_etcd_enc_lease(field, v), *r = NULL;
	size_t rl;
	int rc = call(c, path, body, deadline_of(c), &r, &rl);
	if (!rc)
		rc = ol_etcd_dec_lease(r, rl, id, ttl);
	free(body);
	free(r);
	return rc;
}

int
ol_etcd_lease_grant(struct ol_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl)
{
	if (ttl_s <= 0)
		return -EINVAL;
	int64_t i = 0;
	int rc = lease_call(c, "/v3/lease/grant", "TTL", ttl_s, &i, granted_ttl);
	if (!rc && i == 0)
		rc = -EPROTO;
	if (!rc)
		*id = i;
	return rc;
}

int
ol_etcd_lease_keepalive(struct ol_etcd *c, int64_t id, int64_t *ttl)
{
	return lease_call(c, "/v3/lease/keepalive", "ID", id, NULL, ttl);
}

int
ol_etcd_lease_revoke(struct ol_etcd *c, int64_t id)
{
	char *body = ol_etcd_enc_lease("ID", id), *r = NULL;
	size_t rl;
	int rc = call(c, "/v3/lease/revoke", body, deadline_of(c), &r, &rl);
	if (!rc)
		rc = ol_etcd_dec_write(r, rl, NULL, NULL);
	free(body);
	free(r);
	return rc;
}

int
ol_etcd_lease_ttl(struct ol_etcd *c, int64_t id, int64_t *ttl)
{
	return lease_call(c, "/v3/lease/timetolive", "ID", id, NULL, ttl);
}

/* ---- watch ---- */

#define W_AGAIN INT_MIN /* the stream broke (or never opened): open another */
/* A silent stream is reopened (from the next revision, on the next endpoint) after this long,
 * so a member that hangs without closing the connection stalls a watch for at most that. */
#define WATCH_IDLE_MS 30000

struct watch {
	struct ol_etcd *c;
	const char *key;
	unsigned flags;
	ol_etcd_watch_cb cb;
	void *arg;
	const atomic_int *stop;
	int64_t next_rev; /* the first revision not delivered yet (0: from now) */
	int64_t compact_rev;
	char *lines;
	size_t len, cap;
};

static bool
stopped(const struct watch *w)
{
	return (w->stop && atomic_load(w->stop)) || cut_off(w->c);
}

/* hand the complete lines in w->lines to the callback. 1 = go on, else the result */
static int
deliver(struct watch *w, int *result)
{
	size_t pos = 0;
	int rc = 1;
	while (rc == 1) {
		struct ol_etcd_watch_msg m;
		long n = ol_etcd_watch_parse(w->lines + pos, w->len - pos, &m);
		if (n == 0)
			break;
		if (n < 0) {
			/* -EAGAIN: the member lost its leader ("no leader"), or is stopping: open
			 * the stream again on another member, from the next revision */
			*result = n == -EAGAIN ? W_AGAIN : (int)n;
			rc = 0;
			break;
		}
		pos += (size_t)n;
		if (m.canceled) {
			w->compact_rev = m.compact_revision;
			*result = m.compact_revision ? OL_ETCD_ECOMPACTED : -ECANCELED;
			rc = 0;
		} else if (m.created && !w->next_rev) {
			w->next_rev = m.revision + 1;
		} else if (m.n_events) {
			int64_t rev = m.events[m.n_events - 1].kv.mod_revision;
			int r = w->cb(w->arg, m.events, m.n_events, rev);
			if (rev >= w->next_rev)
				w->next_rev = rev + 1;
			if (r) {
				*result = r;
				rc = 0;
			}
		}
		ol_etcd_watch_msg_fini(&m);
	}
	if (pos) {
		memmove(w->lines, w->lines + pos, w->len - pos);
		w->len -= pos;
	}
	return rc;
}

/* one stream on endpoint i: W_AGAIN = broken (reconnect), else the watch's result */
static int
watch_once(struct watch *w, unsigned i)
{
	const struct endpoint *e = &w->c->ep[i];
	char *body = ol_etcd_enc_watch(w->key, w->flags, w->next_rev);
	if (!body)
		return -ENOMEM;
	struct ol_httpc_conn conn;
	int rc = ol_httpc_open(&conn, e->host, e->port, "/v3/watch", REQUIRE_LEADER, body,
			       ol_httpc_now_ms() + w->c->timeout_ms, &w->c->cutoff);
	free(body);
	if (rc)
		return W_AGAIN;
	int result = W_AGAIN;
	if (conn.status != 200 || !conn.chunked) {
		ol_httpc_close(&conn);
		return W_AGAIN;
	}
	w->len = 0;
	int64_t heard = ol_httpc_now_ms();
	while (result == W_AGAIN && !stopped(w)) {
		size_t before = w->len;
		rc = ol_httpc_read_stream(&conn, 250, &w->lines, &w->len, &w->cap);
		if (w->len != before)
			heard = ol_httpc_now_ms();
		else if (!rc && ol_httpc_now_ms() - heard > WATCH_IDLE_MS)
			break; /* silent a long time: a hung member looks like this, reopen */
		if (rc == -ENOMEM || rc == -EMSGSIZE) {
			result = rc;
			break;
		}
		if (w->len && !deliver(w, &result))
			break;
		if (rc)
			break; /* stream ended or broke: reconnect */
	}
	ol_httpc_close(&conn);
	if (result == W_AGAIN && stopped(w))
		result = 0;
	return result;
}

int
ol_etcd_watch(struct ol_etcd *c, const char *key, unsigned flags, int64_t start_rev,
	      ol_etcd_watch_cb cb, void *arg, const atomic_int *stop, int64_t *compact_rev)
{
	struct watch w = {.c = c,
			  .key = key,
			  .flags = flags,
			  .cb = cb,
			  .arg = arg,
			  .stop = stop,
			  .next_rev = start_rev};
	unsigned i = atomic_load(&c->cur), fails = 0;
	int rc = W_AGAIN;
	while (rc == W_AGAIN && !stopped(&w)) {
		int64_t t0 = ol_httpc_now_ms();
		rc = watch_once(&w, i % c->n_ep);
		if (rc != W_AGAIN)
			break;
		i++;
		/* a stream that lived a while was fine: start the backoff again */
		fails = ol_httpc_now_ms() - t0 > 5000 ? 0 : fails + 1;
		unsigned sh = fails < c->n_ep ? 0 : fails - c->n_ep;
		int64_t back = fails < c->n_ep ? 0 : (int64_t)50 << (sh < 5 ? sh : 5);
		for (int64_t end = ol_httpc_now_ms() + back;
		     !stopped(&w) && ol_httpc_now_ms() < end;)
			sleep_ms(c, back < 100 ? back : 100);
	}
	if (rc == OL_ETCD_ECOMPACTED && compact_rev)
		*compact_rev = w.compact_rev;
	free(w.lines);
	if ((rc == W_AGAIN || !rc) && cut_off(c) && !(stop && atomic_load(stop)))
		return -ECANCELED; /* cut off, not stopped by its caller */
	return rc == W_AGAIN ? 0 : rc;
}
