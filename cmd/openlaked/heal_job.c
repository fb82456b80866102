/* cmd/openlaked/heal_job.c - the heal job's record in etcd: see heal_job.h. */
#include "heal_job.h"

#include "admin/admin.h"
#include "base/clock.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_NAME "heal"
/* an admin's cancel of a job no node runs: reads and writes of the record before it gives up
 * (each lost to another write: the job's progress every HEAL_JOB_WRITE_MS, its resume) */
#define CANCEL_TRIES 8

struct heal_job {
	const struct ol_config *cfg;
	struct ol_cluster *c;
	/* under mu: the serving state, and the writer's view of the record */
	pthread_mutex_t mu;
	bool serving, check_due; /* check_due: the record not read since serving began */
	unsigned pool;
	uint64_t epoch;
	int64_t rev;	    /* the record's mod revision as last read or written (0: absent) */
	char mine[33];	    /* the job this node runs while it serves ("": none yet) */
	char final_id[33];  /* the job whose end was written */
	int64_t next_write; /* CLOCK_MONOTONIC ms of the next progress write */
	int64_t next_read;  /* ... and of the next read of the copy */
	bool warned;	    /* a failed write was logged (once until one succeeds) */
	pthread_mutex_t cache_mu; /* under it: the record as last read or written */
	char *cache;
};

static void
cache_set(struct heal_job *hj, const char *js)
{
	char *copy = js ? ol_xstrdup(js) : NULL;

	pthread_mutex_lock(&hj->cache_mu);
	free(hj->cache);
	hj->cache = copy;
	pthread_mutex_unlock(&hj->cache_mu);
}

/* The record v (as just read) says this node's job id was cancelled: an admin's DELETE went
 * to a node that did not run it (this node's leader key was still expiring, or it could not
 * be reached). The run here stops as for an admin's cancel and writes nothing more: the
 * record, cancelled, is the job's end. Caller holds mu. */
static bool
cancelled_in_record(struct heal_job *hj, const char *id, const char *v, size_t len)
{
	struct ol_cluster_job_head h;

	if (ol_cluster_job_head_parse(v, len, &h) || strcmp(h.job, id) ||
	    strcmp(h.state, "cancelled"))
		return false;
	snprintf(hj->final_id, sizeof(hj->final_id), "%s", id);
	cache_set(hj, v);
	ol_info("cluster: heal job %s was cancelled in its record (an admin's cancel through "
		"another node): %s",
		id,
		ol_admin_heal_cancel_job(id) ? "stopping its run here" : "its run here had ended");
	return true;
}

/* Write the record of this node's job (caller holds mu, serving, record read). */
static void
write_locked(struct heal_job *hj)
{
	char id[33];
	bool final = false;
	char *js =
	    ol_admin_heal_record(hj->cfg->self_id, (unsigned long long)hj->epoch, id, &final);
	int64_t rev = 0;
	int rc;

	if (!js || strcmp(id, hj->mine) || (final && strcmp(id, hj->final_id) == 0)) {
		free(js);
		return;
	}
	rc = ol_cluster_job_put(hj->c, JOB_NAME, js, hj->pool, 0, hj->epoch, hj->rev, &rev);
	if (rc == -ECANCELED) { /* written meanwhile: a write of ours that timed out and landed,
				 * or an admin's cancel through a node that did not run the job */
		char *v = NULL;
		size_t len;
		int g = ol_cluster_job_get(hj->c, JOB_NAME, &v, &len, &hj->rev);

		if (g == 0 && cancelled_in_record(hj, id, v, len))
			rc = 1;
		else if (g == 0 || hj->rev == 0)
			rc = ol_cluster_job_put(hj->c, JOB_NAME, js, hj->pool, 0, hj->epoch,
						hj->rev, &rev);
		free(v);
	}
	if (rc == 1) {
		/* the record is the job's end: nothing more of this run is written */
	} else if (rc == 0) {
		hj->rev = rev;
		hj->warned = false;
		if (final)
			snprintf(hj->final_id, sizeof(hj->final_id), "%s", id);
		cache_set(hj, js);
	} else if (rc == -ESTALE) {
		ol_info("cluster: the record of heal job %s is not written: this node does not "
			"lead set %u.0 at epoch %llu any more",
			id, hj->pool, (unsigned long long)hj->epoch);
		hj->serving = false;
	} else if (!hj->warned) {
		ol_warn("cluster: the record of heal job %s could not be written to etcd (%s): "
			"trying again",
			id, strerror(rc < 0 && rc > -4096 ? -rc : EIO));
		hj->warned = true;
	}
	hj->next_write = (int64_t)ol_clock_ms() + HEAL_JOB_WRITE_MS;
	free(js);
}

static void
on_event(void *arg, enum ol_admin_heal_event ev)
{
	struct heal_job *hj = arg;

	pthread_mutex_lock(&hj->mu);
	if (hj->serving && ev == OL_ADMIN_HEAL_STARTED) {
		char id[33];
		bool final;
		char *js = ol_admin_heal_record(0, 0, id, &final);

		if (js)
			snprintf(hj->mine, sizeof(hj->mine), "%s", id);
		free(js);
	}
	if (hj->serving && !hj->check_due)
		write_locked(hj);
	pthread_mutex_unlock(&hj->mu);
}

/* The heal document shown while this node runs no heal: the record, unless it speaks of this
 * node's own last job and says less than this node knows (its write failed) */
static char *
on_doc(void *arg, const char *local_job, const char *local_state)
{
	struct heal_job *hj = arg;
	struct ol_cluster_job_head h;
	char *d = NULL;

	pthread_mutex_lock(&hj->cache_mu);
	if (hj->cache && ol_cluster_job_head_parse(hj->cache, strlen(hj->cache), &h) == 0 &&
	    (strcmp(h.job, local_job) || strcmp(h.state, "running") ||
	     (local_state && strcmp(local_state, "running") == 0)))
		d = ol_xstrdup(hj->cache);
	pthread_mutex_unlock(&hj->cache_mu);
	return d;
}

/* An admin's DELETE on a node that runs no heal (a follower the leader could not be reached
 * from, or a leader that has not resumed the job yet): the record, while "running", is written
 * "cancelled" over the revision read (a node that starts serving then leaves it; one that
 * resumed it meanwhile finds it so at its next write and stops). A write that lost to another
 * (the job's progress, its resume) reads again. */
static int
on_cancel(void *arg, const char *who, char **doc)
{
	struct heal_job *hj = arg;
	struct ol_cluster_job_head h;
	char why[200];

	*doc = NULL;
	snprintf(why, sizeof(why), "%s cancelled it through node %u, which did not run it", who,
		 hj->cfg->self_id);
	for (int i = 0; i < CANCEL_TRIES; i++) {
		char *v = NULL, *js = NULL;
		size_t len = 0;
		int64_t rev = 0;
		int rc = ol_cluster_job_get(hj->c, JOB_NAME, &v, &len, &rev);

		if (rc)
			return rc == -ENOENT ? 404 : 503;
		if (ol_cluster_job_head_parse(v, len, &h) == 0 && strcmp(h.state, "running") == 0)
			js = ol_admin_heal_rec_end(v, len, "cancelled", -ECANCELED, why,
						   ol_clock_wall_ns());
		free(v);
		if (!js)
			return 404; /* not running (or not a record: nothing to cancel) */
		rc = ol_cluster_job_swap(hj->c, JOB_NAME, js, rev, NULL);
		if (rc == 0) {
			ol_info("cluster: heal job %s (left running by node %u) cancelled in its "
				"record: %s",
				h.job, h.node, why);
			cache_set(hj, js);
			*doc = js;
			return 202;
		}
		free(js);
		if (rc != -ECANCELED)
			return 503;
	}
	return 503;
}

struct heal_job *
heal_job_new(const struct ol_config *cfg, struct ol_cluster *c)
{
	struct heal_job *hj = ol_xcalloc(1, sizeof(*hj));
	struct ol_admin_heal_hooks h = {
	    .event = on_event, .doc = on_doc, .cancel = on_cancel, .arg = hj};

	hj->cfg = cfg;
	hj->c = c;
	pthread_mutex_init(&hj->mu, NULL);
	pthread_mutex_init(&hj->cache_mu, NULL);
	ol_admin_set_heal_hooks(&h);
	return hj;
}

void
heal_job_free(struct heal_job *hj)
{
	if (!hj)
		return;
	ol_admin_set_heal_hooks(NULL);
	pthread_mutex_destroy(&hj->mu);
	pthread_mutex_destroy(&hj->cache_mu);
	free(hj->cache);
	free(hj);
}

void
heal_job_serving(struct heal_job *hj, unsigned pool, uint64_t epoch)
{
	pthread_mutex_lock(&hj->mu);
	hj->serving = true;
	hj->check_due = true;
	hj->pool = pool;
	hj->epoch = epoch;
	hj->rev = 0;
	hj->mine[0] = 0;
	hj->final_id[0] = 0;
	pthread_mutex_unlock(&hj->mu);
}

void
heal_job_stopped(struct heal_job *hj)
{
	pthread_mutex_lock(&hj->mu);
	hj->serving = false;
	pthread_mutex_unlock(&hj->mu);
}

/* A job left running that cannot be resumed here (rc: -EPROTO its record is not understood,
 * 500 no heal thread starts): its record is written "failed" with the reason, over the
 * revision read (rev) and fenced as every write of the leader; a record changed meanwhile, or
 * etcd not answering, is read again at the next tick. */
static void
fail_unresumable(struct heal_job *hj, const char *v, size_t len, int64_t rev, int rc)
{
	struct ol_cluster_job_head h;
	const char *why = rc == -EPROTO ? "its record in etcd is not understood (a field of the "
					  "wrong type or out of range): run `openlake heal`"
					: "no heal thread could start on the node that was to "
					  "resume it: run `openlake heal`";
	char *js = ol_admin_heal_rec_end(v, len, "failed", rc == -EPROTO ? -EPROTO : -EAGAIN, why,
					 ol_clock_wall_ns());
	int64_t nrev = 0;
	int w = js ? 1 : -ENOMEM; /* 1: not written (a job of this node's own wrote over it) */

	if (ol_cluster_job_head_parse(v, len, &h))
		snprintf(h.job, sizeof(h.job), "?");
	pthread_mutex_lock(&hj->mu);
	if (js && hj->serving && !hj->check_due && hj->rev == rev) {
		w = ol_cluster_job_put(hj->c, JOB_NAME, js, hj->pool, 0, hj->epoch, rev, &nrev);
		if (w == 0) {
			hj->rev = nrev;
			snprintf(hj->final_id, sizeof(hj->final_id), "%s", h.job);
		} else if (w == -ESTALE) {
			hj->serving = false;
		} else {
			hj->check_due = true; /* changed meanwhile, or etcd: read again */
		}
	}
	pthread_mutex_unlock(&hj->mu);
	if (w == 0) {
		cache_set(hj, js);
		ol_warn("cluster: heal job %s cannot be resumed: %s; recorded failed", h.job, why);
	} else if (w < 0 && w != -ESTALE) {
		ol_warn("cluster: heal job %s cannot be resumed (%s): %s", h.job, why,
			js ? "its record is read again to record it failed" : "out of memory");
	}
	free(js);
}

/* The record read once this node serves: a job left running is resumed here. */
static void
resume_check(struct heal_job *hj)
{
	struct ol_cluster_job_head h;
	char *v = NULL;
	size_t len = 0;
	int64_t rev = 0;
	int rc = ol_cluster_job_get(hj->c, JOB_NAME, &v, &len, &rev);
	bool resume;

	if (rc && rc != -ENOENT)
		return; /* etcd does not answer: the next tick tries again */
	resume = v && ol_cluster_job_head_parse(v, len, &h) == 0 && strcmp(h.state, "running") == 0;
	pthread_mutex_lock(&hj->mu);
	if (!hj->serving) {
		pthread_mutex_unlock(&hj->mu);
		free(v);
		return;
	}
	hj->rev = rev;
	hj->check_due = false;
	if (resume) /* a missed-writes heal that gives way to it writes no record */
		snprintf(hj->mine, sizeof(hj->mine), "%s", h.job);
	else
		write_locked(hj); /* the job started here meanwhile, if any */
	pthread_mutex_unlock(&hj->mu);
	if (v)
		cache_set(hj, v);
	if (!resume) {
		if (v && ol_cluster_job_head_parse(v, len, &h) == 0)
			ol_info("cluster: heal job %s is %s: nothing to resume", h.job, h.state);
		free(v);
		return;
	}
	ol_info("cluster: heal job %s was left running by node %u (epoch %llu): resuming it here",
		h.job, h.node, (unsigned long long)h.epoch);
	rc = ol_admin_heal_resume(v, len);
	if (rc == 409)
		ol_info("cluster: heal job %s is not resumed: a heal runs here already (it heals "
			"the whole store too)",
			h.job);
	else if (rc == -EPROTO || rc == 500)
		fail_unresumable(hj, v, len, rev, rc);
	else if (rc != 202) /* the store went meanwhile: the next node to serve resumes it */
		ol_info("cluster: heal job %s is not resumed here: this node serves no store now",
			h.job);
	free(v);
}

void
heal_job_tick(struct heal_job *hj)
{
	int64_t t = (int64_t)ol_clock_ms();

	pthread_mutex_lock(&hj->mu);
	bool check = hj->serving && hj->check_due;
	bool progress = hj->serving && !hj->check_due && t >= hj->next_write && hj->mine[0] &&
			strcmp(hj->final_id, hj->mine);
	bool read = !hj->serving && t >= hj->next_read;
	if (read)
		hj->next_read = t + HEAL_JOB_READ_MS;
	if (progress)
		write_locked(hj);
	pthread_mutex_unlock(&hj->mu);
	if (check)
		resume_check(hj);
	if (read) { /* a node that does not serve: the copy its heal document shows */
		char *v = NULL;
		size_t len;
		int64_t rev;
		int rc = ol_cluster_job_get(hj->c, JOB_NAME, &v, &len, &rev);

		if (rc == 0 || rc == -ENOENT)
			cache_set(hj, v);
		free(v);
	}
}
