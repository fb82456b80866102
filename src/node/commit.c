/* node/commit.c - the COMMIT op (node.h, ol_node_server_set_commit): a shard writer's commit,
 * run by the handler the daemon sets, on a bounded pool of helper threads ("ol-node-commit"),
 * never on a loop: the handler calls node planes itself (this node's own included, maybe on
 * the very loop the request came in on) and blocks for milliseconds to seconds.
 *
 * The loop thread copies the request into a job, pauses the connection (it reads nothing more
 * until the answer) and marks it pending (not freed while the job refers to it), and queues
 * the job. A helper takes jobs in FIFO order, runs the handler, and posts the job back to the
 * connection's loop (ol_loop_post), where the reply goes out and the connection resumes, or,
 * when the connection died meanwhile, the reply is dropped and the connection freed.
 *
 * Threads start on demand, up to OL_NODE_COMMIT_THREADS: one more whenever the jobs queued
 * outnumber the idle helpers. A job that waited in the queue past its request's deadline is
 * answered -ETIMEDOUT without running (its caller gave up and may count it failed: a commit
 * run then would publish what the caller's cleanup removes); one already running finishes.
 * Stop (ol_node_commit_stop, before the loops shut down) refuses new calls with -ESHUTDOWN,
 * answers the queued ones -ESHUTDOWN at once without running them, waits for the running
 * ones and joins the helpers; all those answers run on the loops, which still serve (a
 * handler's calls to this node's plane go on working until it returns), and server.c lets
 * the loops send them before it closes the connections. */
#include "node/node_int.h"

#include "base/log.h"
#include "io/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ncommit {
	struct ncommit *next;
	struct nconn *c;
	struct ol_loop_msg done; /* to c's loop when the handler returned */
	ol_node_commit_fn fn;
	void *arg;
	uint64_t call_id;
	uint64_t deadline_ns; /* ol_io_now_ns when the caller gives up (its deadline_ms) */
	uint32_t frame;	      /* the request frame's bytes: granted back with the reply */
	int status;
	size_t len, cap, rlen;
	uint8_t *reply; /* cap bytes, after the request */
	uint8_t req[];
};

void
ol_node_commit_init(struct ol_node_server *s)
{
	pthread_mutex_init(&s->cmu, NULL);
	pthread_cond_init(&s->ccv, NULL);
}

void
ol_node_server_set_commit(struct ol_node_server *s, ol_node_commit_fn fn, void *arg)
{
	pthread_mutex_lock(&s->cmu);
	s->commit_fn = fn;
	s->commit_arg = arg;
	pthread_mutex_unlock(&s->cmu);
}

/* Loop thread: the handler returned (or never ran: stop). */
static void
on_done(struct ol_loop *l, void *arg, int res)
{
	(void)l;
	(void)res;
	struct ncommit *j = arg;
	struct nconn *c = j->c;
	c->cpending = false;
	if (c->dead) { /* the peer left or the connection broke: the answer has nowhere to go */
		free(j);
		ol_node_release(c);
		return;
	}
	c->depth++;
	c->grant += j->frame;
	struct ol_node_hdr h = {.op = OL_NODE_COMMIT, .call_id = j->call_id};
	ol_node_reply(c, &h, 0, j->status, j->reply, j->rlen);
	free(j);
	ol_node_resume(c);
	c->depth--;
	ol_node_release(c);
}

/* the deadline of the call the calling helper runs (ol_node_commit_left_ms), 0 = none */
static _Thread_local uint64_t cur_deadline_ns;

int64_t
ol_node_commit_left_ms(void)
{
	if (!cur_deadline_ns)
		return -1;
	uint64_t now = ol_io_now_ns();
	return now >= cur_deadline_ns ? 0 : (int64_t)((cur_deadline_ns - now) / 1000000u);
}

/* Run the handler (a helper thread, no lock held). */
static void
call_handler(struct ncommit *j)
{
	j->rlen = 0;
	cur_deadline_ns = j->deadline_ns;
	j->status = j->fn(j->arg, j->req, j->len, j->reply, j->cap, &j->rlen);
	if (j->status > 0 || j->rlen > j->cap) {
		ol_err("node plane: the COMMIT handler answered %d with %zu of %zu reply bytes (a "
		       "bug); the call fails with an I/O error",
		       j->status, j->rlen, j->cap);
		j->status = -EIO;
		if (j->rlen > j->cap)
			j->rlen = 0;
	}
	cur_deadline_ns = 0;
}

/* Hand the answer to the connection's loop. */
static void
post_done(struct ncommit *j)
{
	j->done = (struct ol_loop_msg){.fn = on_done, .arg = j};
	int rc = ol_loop_post(j->c->loop, &j->done);
	if (rc) /* queued all the same: the loop runs it at its next wakeup */
		ol_warn("node plane: waking a loop for a COMMIT answer failed (%s)", strerror(-rc));
}

static void *
helper(void *arg)
{
	struct ol_node_server *s = arg;
	pthread_mutex_lock(&s->cmu);
	for (;;) {
		while (!s->cq_head && !s->c_stopping) {
			s->c_idle++;
			pthread_cond_wait(&s->ccv, &s->cmu);
			s->c_idle--;
		}
		struct ncommit *j = s->cq_head;
		if (!j)
			break; /* stopping: the queue was answered by stop */
		s->cq_head = j->next;
		if (!s->cq_head)
			s->cq_tail = NULL;
		s->cq_len--;
		s->c_running++;
		pthread_mutex_unlock(&s->cmu);
		if (ol_io_now_ns() < j->deadline_ns) {
			call_handler(j);
		} else { /* its caller gave up: run late, it could commit what it undid */
			j->status = -ETIMEDOUT;
			j->rlen = 0;
		}
		pthread_mutex_lock(&s->cmu);
		s->c_running--; /* before the answer can reach anyone */
		post_done(j);
	}
	pthread_mutex_unlock(&s->cmu);
	return NULL;
}

/* Under cmu, j queued: wake an idle helper, or start one more when the queue outnumbers the
 * idle ones. 0, or -EAGAIN when no helper runs and none could be started. */
static int
wake_helper(struct ol_node_server *s)
{
	if (s->cq_len > s->c_idle && s->c_threads < OL_NODE_COMMIT_THREADS) {
		int rc = pthread_create(&s->c_thr[s->c_threads], NULL, helper, s);
		if (!rc) {
			(void)pthread_setname_np(s->c_thr[s->c_threads], "ol-node-commit");
			s->c_threads++;
		} else if (!s->c_threads) {
			ol_err("node plane: cannot start a COMMIT helper thread (%s)",
			       strerror(rc));
			return -EAGAIN;
		}
	}
	pthread_cond_signal(&s->ccv);
	return 0;
}

/* Queue j for a helper. 0, -ESHUTDOWN (the server stops), -EAGAIN (no helper). */
static int
enqueue(struct ol_node_server *s, struct ncommit *j)
{
	pthread_mutex_lock(&s->cmu);
	int rc = s->c_stopping ? -ESHUTDOWN : 0;
	if (!rc) {
		if (s->cq_tail)
			s->cq_tail->next = j;
		else
			s->cq_head = j;
		s->cq_tail = j;
		s->cq_len++;
		rc = wake_helper(s);
		if (rc) { /* no helper at all: take it back */
			s->cq_head = s->cq_tail = NULL;
			s->cq_len = 0;
		} else {
			s->c_calls++;
		}
	}
	pthread_mutex_unlock(&s->cmu);
	return rc;
}

int
ol_node_op_commit(struct nconn *c, const struct ol_node_hdr *h, struct ol_node_rd *r)
{
	struct ol_node_server *s = c->s;
	size_t cap = s->max_payload < OL_NODE_COMMIT_REPLY ? s->max_payload : OL_NODE_COMMIT_REPLY;
	pthread_mutex_lock(&s->cmu);
	ol_node_commit_fn fn = s->commit_fn;
	void *arg = s->commit_arg;
	pthread_mutex_unlock(&s->cmu);
	if (!fn)
		return -EOPNOTSUPP;
	uint32_t frame = OL_NODE_HDR + h->len + OL_NODE_MAC;
	struct ncommit *j = ol_xmalloc(sizeof(*j) + r->n + cap);
	*j = (struct ncommit){.c = c,
			      .fn = fn,
			      .arg = arg,
			      .call_id = h->call_id,
			      .deadline_ns = ol_io_now_ns() + ol_node_req_deadline_ns(h),
			      .frame = frame,
			      .len = r->n,
			      .cap = cap};
	memcpy(j->req, r->p, r->n);
	j->reply = j->req + r->n;
	int rc = enqueue(s, j);
	if (rc) {
		free(j);
		return rc;
	}
	c->grant -= frame; /* with the answer, as a small call's bytes are */
	c->cpending = true;
	c->paused = true; /* the next request waits for this answer */
	return 0;
}

bool
ol_node_commit_stop(struct ol_node_server *s)
{
	pthread_mutex_lock(&s->cmu);
	s->c_stopping = true;
	struct ncommit *q = s->cq_head; /* not started: answered now, never run */
	s->cq_head = s->cq_tail = NULL;
	s->cq_len = 0;
	pthread_cond_broadcast(&s->ccv);
	pthread_mutex_unlock(&s->cmu);
	while (q) {
		struct ncommit *next = q->next;
		q->status = -ESHUTDOWN;
		q->rlen = 0;
		post_done(q);
		q = next;
	}
	for (unsigned i = 0; i < s->c_threads; i++)
		pthread_join(s->c_thr[i], NULL);
	s->c_threads = 0;
	return s->c_calls > 0; /* no lock: the helpers are gone, the loops refuse new calls */
}

void
ol_node_commit_stats(struct ol_node_server *s, struct ol_node_server_stats *out)
{
	pthread_mutex_lock(&s->cmu);
	out->commits = s->c_calls;
	out->commits_queued = s->cq_len;
	out->commits_running = s->c_running;
	pthread_mutex_unlock(&s->cmu);
}

void
ol_node_commit_fini(struct ol_node_server *s)
{
	pthread_cond_destroy(&s->ccv);
	pthread_mutex_destroy(&s->cmu);
}
