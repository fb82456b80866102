#include "adminint.h"

#include "base/hex.h"
#include "base/log.h"
#include "base/metrics.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static const struct ol_config *admin_cfg;
static uint64_t admin_start_us;

extern const char ol_console_html[]; /* console.c */

/* Whole-store heal, run on one detached thread at a time. */
static struct ol_store *admin_store;
static ol_admin_forward_fn admin_forward; /* ol_admin_set_forward */
static void *admin_forward_arg;
static struct ol_heal_progress heal_prog;
static struct ol_heal_opts heal_opts;
/* 1 from POST until the run has finished, 2 while its end is reported (OL_ADMIN_HEAL_ENDED),
 * 0 idle */
static _Atomic int heal_thread;
/* The heal job (admin.h "heal jobs"): id, by, resumed, job start, the counters of its earlier
 * runs (counts: added to heal_prog's) and the cursor it resumed after (heal_opts.from points
 * at heal_from); written while no heal runs, under job_mu. */
static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ol_admin_heal_rec heal_job;
static struct ol_heal_cursor heal_from;
static _Atomic int heal_admin_cancel; /* an admin cancelled the job (DELETE) */
static pthread_rwlock_t hooks_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct ol_admin_heal_hooks heal_hooks;
/* Heal on a drive's return ([storage] heal_on_return): the store's monitor calls
 * drive_returned(), a detached thread (auto_main) waits and starts the heal. */
static _Atomic int64_t returned_ns; /* CLOCK_REALTIME of the latest return */
static _Atomic int auto_thread, auto_stop;
static _Atomic uint64_t auto_heals;
static int heal_start_rate(uint64_t rate, bool missed_only, const char *who);
static int heal_start_job(const struct ol_admin_heal_rec *resume, uint64_t rate, bool missed_only,
			  const char *who);
static void *auto_main(void *arg);

/* What runs (ol_admin_set_services) and whether all of it is up (ol_admin_set_ready). */
static pthread_mutex_t svc_lock = PTHREAD_MUTEX_INITIALIZER;
static char svc_s3[OL_CFG_STR], svc_kv[OL_CFG_STR], svc_admin[OL_CFG_STR];
static _Atomic bool admin_ready;
static char *locality_json; /* ol_admin_set_locality, under svc_lock */
/* ol_admin_set_cluster: the daemon's view of the etcd cluster for the status document. */
static pthread_rwlock_t cluster_lock = PTHREAD_RWLOCK_INITIALIZER; /* held while fn runs */
static ol_admin_cluster_fn cluster_fn;
static void *cluster_arg;

struct ol_admin_server {
	struct ol_http_server *http;
};

void
ol_admin_init(const struct ol_config *cfg)
{
	admin_cfg = cfg;
	admin_start_us = ol_now_us();
}

void
ol_admin_set_services(const char *s3_addr, const char *kv_addr, const char *admin_addr)
{
	pthread_mutex_lock(&svc_lock);
	snprintf(svc_s3, sizeof(svc_s3), "%s", s3_addr ? s3_addr : "");
	snprintf(svc_kv, sizeof(svc_kv), "%s", kv_addr ? kv_addr : "");
	snprintf(svc_admin, sizeof(svc_admin), "%s", admin_addr ? admin_addr : "");
	pthread_mutex_unlock(&svc_lock);
}

void
ol_admin_set_locality(const char *json)
{
	char *copy = json ? ol_xstrdup(json) : NULL;
	pthread_mutex_lock(&svc_lock);
	free(locality_json);
	locality_json = copy;
	pthread_mutex_unlock(&svc_lock);
}

void
ol_admin_set_cluster(ol_admin_cluster_fn fn, void *arg)
{
	pthread_rwlock_wrlock(&cluster_lock); /* waits out a status request inside the old fn */
	cluster_arg = arg;
	cluster_fn = fn;
	pthread_rwlock_unlock(&cluster_lock);
}

void
ol_admin_set_ready(bool ready)
{
	atomic_store(&admin_ready, ready);
}

void
ol_admin_json_str(struct ol_strbuf *b, const char *s)
{
	ol_strbuf_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			ol_strbuf_printf(b, "\\%c", c);
		else if (c < 0x20)
			ol_strbuf_printf(b, "\\u%04x", c);
		else
			ol_strbuf_printf(b, "%c", c);
	}
	ol_strbuf_printf(b, "\"");
}

static void
status_drives(struct ol_strbuf *b, const struct ol_config *c)
{
	ol_strbuf_printf(b, "\"drives\":[");
	for (unsigned i = 0; i < c->n_data_dirs; i++) {
		struct statvfs vs;
		int ok = statvfs(c->data_dirs[i], &vs) == 0;
		int writable = ok && access(c->data_dirs[i], W_OK) == 0;
		unsigned long long total = ok ? (unsigned long long)vs.f_blocks * vs.f_frsize : 0;
		unsigned long long avail = ok ? (unsigned long long)vs.f_bavail * vs.f_frsize : 0;
		unsigned long long fr = ok ? (unsigned long long)vs.f_bfree * vs.f_frsize : 0;
		ol_strbuf_printf(b, "%s{\"index\":%u,\"path\":", i ? "," : "", i);
		ol_admin_json_str(b, c->data_dirs[i]);
		ol_strbuf_printf(b,
				 ",\"online\":%s,\"writable\":%s,\"total_bytes\":%llu,"
				 "\"used_bytes\":%llu,\"free_bytes\":%llu}",
				 ok ? "true" : "false", writable ? "true" : "false", total,
				 total - fr, avail);
	}
	ol_strbuf_printf(b, "]");
}

/* "store_drives": the drives of the store this node serves (in a cluster: the set leader's
 * view of every drive of its sets; none on a node that does not lead), each online or not
 * and why, and a remote drive's call time and slow ejections (docs/cluster.md, "A slow
 * drive"). The store is read as the heal's missed counts are (ol_admin_set_store). */
static void
status_store_drives(struct ol_strbuf *b)
{
	struct ol_store *st = admin_store;
	struct ol_store_drive_state ds;

	ol_strbuf_printf(b, ",\"store_drives\":[");
	for (int i = 0; st && !ol_store_drive_state(st, i, &ds); i++) {
		ol_strbuf_printf(b, "%s{\"drive\":", i ? "," : "");
		ol_admin_json_str(b, ds.path);
		ol_strbuf_printf(b, ",\"online\":%s,\"why\":", ds.online ? "true" : "false");
		ol_admin_json_str(b, ds.why);
		ol_strbuf_printf(b, ",\"slow\":%s,\"faults\":%llu,\"slow_ejections\":%llu",
				 ds.slow ? "true" : "false", (unsigned long long)ds.faults,
				 (unsigned long long)ds.slow_ejections);
		if (ds.remote)
			ol_strbuf_printf(b, ",\"call_latency_us\":%llu,\"hedged\":%llu",
					 (unsigned long long)ds.latency_us,
					 (unsigned long long)ds.hedged);
		ol_strbuf_printf(b, "}");
	}
	ol_strbuf_printf(b, "]");
}

static void json_addr(struct ol_strbuf *b, const char *name, const char *addr, bool comma);

/* "members": the [[nodes]] of the config (the console's topology; live members of an etcd
 * cluster are `openlake cluster status`'s), "cluster_etcd": whether etcd holds the shape,
 * "kv_namespaces": the namespace patterns of the KV tokens (never the tokens). */
static void
status_topology(struct ol_strbuf *b, const struct ol_config *c)
{
	ol_strbuf_printf(b, ",\"members\":[");
	for (unsigned i = 0; i < c->n_nodes; i++) {
		ol_strbuf_printf(b, "%s{\"id\":%u,\"rpc_addr\":", i ? "," : "", c->nodes[i].id);
		ol_admin_json_str(b, c->nodes[i].rpc_addr);
		ol_strbuf_printf(b, ",\"disk_count\":%u,\"self\":%s}", c->nodes[i].disk_count,
				 c->nodes[i].id == c->self_id ? "true" : "false");
	}
	ol_strbuf_printf(b, "],\"cluster_etcd\":%s,\"kv_namespaces\":[",
			 c->cluster_etcd[0] ? "true" : "false");
	for (unsigned i = 0; i < c->n_kv_tokens; i++) {
		ol_strbuf_printf(b, "%s", i ? "," : "");
		ol_admin_json_str(b, c->kv_tokens[i].namespaces);
	}
	ol_strbuf_printf(b, "]");
}

/* "services": the address of each service that runs, null for one that does not. */
static void
status_services(struct ol_strbuf *b)
{
	pthread_mutex_lock(&svc_lock);
	ol_strbuf_printf(b, ",\"services\":{");
	json_addr(b, "s3", svc_s3, false);
	json_addr(b, "kv", svc_kv, true);
	json_addr(b, "admin", svc_admin, true);
	pthread_mutex_unlock(&svc_lock);
	ol_strbuf_printf(b, "},\"ready\":%s", atomic_load(&admin_ready) ? "true" : "false");
}

static void
json_addr(struct ol_strbuf *b, const char *name, const char *addr, bool comma)
{
	ol_strbuf_printf(b, "%s\"%s\":", comma ? "," : "", name);
	if (addr[0])
		ol_admin_json_str(b, addr);
	else
		ol_strbuf_printf(b, "null");
}

char *
ol_admin_status_json(void)
{
	struct ol_strbuf b = {0};
	const struct ol_config *c = admin_cfg;
	char host[256];
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	ol_strbuf_printf(&b, "{\"version\":\"%s\",\"host\":", OL_VERSION);
	ol_admin_json_str(&b, host);
	ol_strbuf_printf(&b, ",\"uptime_seconds\":%.3f",
			 (double)(ol_now_us() - admin_start_us) / 1e6);
	if (c) {
		ol_strbuf_printf(&b, ",\"self_id\":%u,\"mode\":", c->self_id);
		ol_admin_json_str(&b, c->mode);
		ol_strbuf_printf(&b, ",\"s3_addr\":");
		ol_admin_json_str(&b, c->s3_addr);
		ol_strbuf_printf(&b, ",\"kv_addr\":");
		ol_admin_json_str(&b, ol_config_kv_listen(c));
		ol_strbuf_printf(&b, ",\"region\":");
		ol_admin_json_str(&b, c->region);
		ol_strbuf_printf(&b,
				 ",\"erasure\":{\"set_drive_count\":%u,\"data\":%u,\"parity\":%u},"
				 "\"nodes\":%u,",
				 c->set_drive_count, c->set_drive_count - c->default_parity_count,
				 c->default_parity_count, c->n_nodes);
		status_drives(&b, c);
		status_topology(&b, c);
	}
	status_store_drives(&b);
	status_services(&b);
	ol_strbuf_printf(&b, ",\"cluster\":");
	pthread_rwlock_rdlock(&cluster_lock);
	if (cluster_fn)
		cluster_fn(cluster_arg, &b);
	else
		ol_strbuf_printf(&b, "null");
	pthread_rwlock_unlock(&cluster_lock);
	pthread_mutex_lock(&svc_lock);
	ol_strbuf_printf(&b, ",\"locality\":%s", locality_json ? locality_json : "null");
	pthread_mutex_unlock(&svc_lock);
	{
		char *h = ol_admin_heal_json();
		ol_strbuf_printf(&b, ",\"heal\":%s", h);
		free(h);
	}
	ol_strbuf_printf(&b, "}\n");
	return b.p;
}

static int64_t
real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *
heal_state(const struct ol_heal_progress *p)
{
	int rc = atomic_load(&p->result);
	if (atomic_load(&p->running) || atomic_load(&heal_thread) == 1)
		return "running";
	if (!atomic_load(&p->started_ns))
		return "idle";
	return rc == -ECANCELED ? "cancelled" : rc ? "failed" : "done";
}

/* The job's state as its record says it: a run stopped by anything but an admin's cancel is
 * still to be done ("running"); NULL: no job ran here. */
static const char *
record_state(const struct ol_heal_progress *p)
{
	const char *st = heal_state(p);

	if (strcmp(st, "idle") == 0)
		return NULL;
	if (atomic_load(&heal_admin_cancel) && strcmp(st, "done") && strcmp(st, "failed"))
		return "cancelled";
	return strcmp(st, "cancelled") == 0 ? "running" : st;
}

static void
cursor_json(struct ol_strbuf *b)
{
	struct ol_heal_cursor c;
	char *hex;

	if (ol_store_heal_cursor(&heal_prog, &c))
		return;
	hex = ol_xmalloc(2 * c.key_len + 1);
	ol_hex_encode(c.key, c.key_len, hex);
	ol_strbuf_printf(b, ",\"cursor\":{\"set\":%u,", c.set);
	if (c.pool != OL_HEAL_SET_UNKNOWN) /* the set's own position: checked at the resume */
		ol_strbuf_printf(b, "\"pool\":%u,\"pset\":%u,", c.pool, c.pset);
	ol_strbuf_printf(b, "\"bucket\":");
	ol_admin_json_str(b, c.bucket);
	ol_strbuf_printf(b, ",\"phase\":%u,\"key\":\"%s\"}", c.phase, hex);
	free(hex);
}

/* The heal document (state: this daemon's view, or the record's with rec). Counters count
 * the job's earlier runs too. "result": the store answers 0 for a finished heal that counted
 * unrecoverable objects; the document says -EIO then, so that a client that only reads it (or
 * `openlake heal --json`) does not take it for a success; a record still running says 0. */
static char *
heal_doc(const char *state, bool rec, unsigned node, unsigned long long epoch)
{
	struct ol_strbuf b = {0};
	const struct ol_heal_progress *p = &heal_prog;
	int64_t t0 = atomic_load(&p->started_ns), t1 = atomic_load(&p->finished_ns);
	double el = t0 ? (double)((t1 ? t1 : real_ns()) - t0) / 1e9 : 0;
	uint64_t bs = atomic_load(&p->bytes_scanned), bt = atomic_load(&p->bytes_total);
	double rate = el > 0 ? (double)bs / el : 0;
	bool running = strcmp(state, "running") == 0;
	struct ol_admin_heal_rec job;

	pthread_mutex_lock(&job_mu);
	job = heal_job;
	pthread_mutex_unlock(&job_mu);
	uint64_t c[OL_ADMIN_HEAL_NCOUNTS] = {
	    atomic_load(&p->objects_scanned),  bs,
	    atomic_load(&p->shards_healed),    atomic_load(&p->blocks_healed),
	    atomic_load(&p->records_restored), atomic_load(&p->unrecoverable),
	    atomic_load(&p->missed_healed)};
	for (int i = 0; i < OL_ADMIN_HEAL_NCOUNTS; i++)
		c[i] += job.counts[i];
	double eta = running && rate > 0 && bt > c[1] ? (double)(bt - c[1]) / rate : 0;
	ol_strbuf_printf(&b,
			 "{\"state\":\"%s\",\"running\":%s,\"objects_scanned\":%llu,"
			 "\"objects_total\":%llu,\"bytes_scanned\":%llu,\"bytes_total\":%llu,",
			 state, running ? "true" : "false", (unsigned long long)c[0],
			 (unsigned long long)atomic_load(&p->objects_total),
			 (unsigned long long)c[1], (unsigned long long)bt);
	ol_strbuf_printf(&b,
			 "\"shards_healed\":%llu,\"blocks_healed\":%llu,\"records_restored\":%llu,"
			 "\"unrecoverable\":%llu,\"result\":%d,\"started_ns\":%lld,"
			 "\"finished_ns\":%lld,\"elapsed_seconds\":%.3f,"
			 "\"bytes_per_second\":%.0f,\"eta_seconds\":%.1f,\"rate_limit\":%llu,",
			 (unsigned long long)c[2], (unsigned long long)c[3],
			 (unsigned long long)c[4], (unsigned long long)c[5],
			 rec && running ? 0
			 : (c[5] || atomic_load(&p->unreadable_offline)) && t1 &&
				 !atomic_load(&p->result)
			     ? -EIO
			     : atomic_load(&p->result),
			 (long long)t0, (long long)(rec && running ? 0 : t1), el, rate, eta,
			 (unsigned long long)heal_opts.rate_bytes);
	{
		uint64_t pend = 0, drop = 0;

		if (admin_store)
			ol_store_missed_stats(admin_store, &pend, &drop);
		ol_strbuf_printf(
		    &b,
		    "\"missed_pending\":%llu,\"missed_healed\":%llu,"
		    "\"missed_dropped\":%llu,\"missed_only\":%s,\"unwritten_gone\":%llu,"
		    "\"unreadable_offline\":%llu,\"job\":\"%s\",\"by\":",
		    (unsigned long long)pend, (unsigned long long)c[6], (unsigned long long)drop,
		    atomic_load(&p->missed_only) ? "true" : "false",
		    (unsigned long long)atomic_load(&p->unwritten_gone),
		    (unsigned long long)atomic_load(&p->unreadable_offline), job.job);
		ol_admin_json_str(&b, job.by);
		ol_strbuf_printf(&b, ",\"resumed\":%u,\"job_started_ns\":%lld", job.resumed,
				 (long long)job.started_ns);
	}
	if (rec) {
		ol_strbuf_printf(&b, ",\"node\":%u,\"epoch\":%llu,\"updated_ns\":%lld", node, epoch,
				 (long long)real_ns());
		cursor_json(&b);
	}
	ol_strbuf_printf(&b, "}");
	return b.p;
}

char *
ol_admin_heal_json(void)
{
	const struct ol_heal_progress *p = &heal_prog;
	char *d = NULL;

	if (!atomic_load(&p->running) && atomic_load(&heal_thread) != 1) {
		char job[33];

		pthread_mutex_lock(&job_mu);
		memcpy(job, heal_job.job, sizeof(job));
		pthread_mutex_unlock(&job_mu);
		pthread_rwlock_rdlock(&hooks_lock);
		if (heal_hooks.doc)
			d = heal_hooks.doc(heal_hooks.arg, job, record_state(p));
		pthread_rwlock_unlock(&hooks_lock);
	}
	return d ? d : heal_doc(heal_state(p), false, 0, 0);
}

char *
ol_admin_heal_record(unsigned node, unsigned long long epoch, char job[33], bool *final)
{
	const char *st = record_state(&heal_prog);

	if (!st)
		return NULL;
	pthread_mutex_lock(&job_mu);
	memcpy(job, heal_job.job, 33);
	pthread_mutex_unlock(&job_mu);
	*final = strcmp(st, "running") != 0;
	return heal_doc(st, true, node, epoch);
}

void
ol_admin_set_heal_hooks(const struct ol_admin_heal_hooks *h)
{
	pthread_rwlock_wrlock(&hooks_lock);
	if (h)
		heal_hooks = *h;
	else
		memset(&heal_hooks, 0, sizeof(heal_hooks));
	pthread_rwlock_unlock(&hooks_lock);
}

static void
heal_event(enum ol_admin_heal_event ev)
{
	pthread_rwlock_rdlock(&hooks_lock);
	if (heal_hooks.event)
		heal_hooks.event(heal_hooks.arg, ev);
	pthread_rwlock_unlock(&hooks_lock);
}

int
ol_admin_heal_resume(const char *rec, size_t len)
{
	struct ol_admin_heal_rec r;

	if (!admin_store)
		return 503;
	if (ol_admin_heal_rec_parse(rec, len, &r))
		return -EPROTO;
	if (strcmp(r.state, "running"))
		return 0;
	return heal_start_job(&r, r.rate, r.missed_only, NULL);
}

static void
heal_metrics(struct ol_strbuf *out, void *arg)
{
	const struct ol_heal_progress *p = &heal_prog;
	(void)arg;
	ol_strbuf_printf(
	    out,
	    "# HELP openlake_heal_running 1 while a whole-store heal runs.\n"
	    "# TYPE openlake_heal_running gauge\nopenlake_heal_running %d\n"
	    "# HELP openlake_heal_objects_scanned Objects the running or last heal has scanned.\n"
	    "# TYPE openlake_heal_objects_scanned gauge\nopenlake_heal_objects_scanned "
	    "%llu\n# HELP openlake_heal_shards_healed Shards the running or last heal rewrote.\n"
	    "# TYPE openlake_heal_shards_healed gauge\n"
	    "openlake_heal_shards_healed %llu\n"
	    "# HELP openlake_heal_records_restored Metadata records the running or last heal "
	    "wrote back to a drive.\n"
	    "# TYPE openlake_heal_records_restored gauge\n"
	    "openlake_heal_records_restored %llu\n"
	    "# HELP openlake_heal_unrecoverable Objects the running or last heal found with more "
	    "than parity-count shards lost, every drive of their set online.\n"
	    "# TYPE openlake_heal_unrecoverable gauge\nopenlake_heal_unrecoverable %llu\n"
	    "# HELP openlake_heal_unreadable_offline Objects the running or last heal could not "
	    "rebuild while a drive of their set was offline (heal again once it is back).\n"
	    "# TYPE openlake_heal_unreadable_offline gauge\n"
	    "openlake_heal_unreadable_offline %llu\n",
	    atomic_load(&heal_thread) == 1, (unsigned long long)atomic_load(&p->objects_scanned),
	    (unsigned long long)atomic_load(&p->shards_healed),
	    (unsigned long long)atomic_load(&p->records_restored),
	    (unsigned long long)atomic_load(&p->unrecoverable),
	    (unsigned long long)atomic_load(&p->unreadable_offline));
	ol_strbuf_printf(out,
			 "# HELP openlake_heal_on_return_total heals started because a drive came "
			 "back online\n# TYPE openlake_heal_on_return_total counter\n"
			 "openlake_heal_on_return_total %llu\n",
			 (unsigned long long)atomic_load(&auto_heals));
	if (admin_store) {
		uint64_t pend, drop;

		ol_store_missed_stats(admin_store, &pend, &drop);
		ol_strbuf_printf(
		    out,
		    "# HELP openlake_heal_missed_pending Missed-write records (record, drive) a "
		    "heal has not restored yet.\n"
		    "# TYPE openlake_heal_missed_pending gauge\nopenlake_heal_missed_pending %llu\n"
		    "# HELP openlake_heal_missed_dropped_total Missed writes not recorded because "
		    "too many were pending (the whole-store heal finds them).\n"
		    "# TYPE openlake_heal_missed_dropped_total counter\n"
		    "openlake_heal_missed_dropped_total %llu\n",
		    (unsigned long long)pend, (unsigned long long)drop);
	}
}

static void
drive_returned(void *arg, const char *drive)
{
	(void)arg;
	atomic_store(&returned_ns, real_ns());
	int idle = 0;
	pthread_t t;
	pthread_attr_t a;
	ol_info("admin: drive %s returned: a heal starts in %u s unless one starts before "
		"([storage] heal_on_return)",
		drive, admin_cfg->heal_delay_secs);
	if (!atomic_compare_exchange_strong(&auto_thread, &idle, 1))
		return; /* the waiting thread sees the new return time */
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, auto_main, NULL)) {
		atomic_store(&auto_thread, 0);
		ol_warn("admin: cannot start the heal for drive %s; run `openlake heal`", drive);
	}
	pthread_attr_destroy(&a);
}

/* Missed writes recorded before this start (a crash, a restart while a drive was away):
 * healed in the background, without the scan, at the return heal's rate. */
static void
heal_missed_at_start(struct ol_store *st)
{
	uint64_t pend, drop;

	ol_store_missed_stats(st, &pend, &drop);
	if (!pend)
		return;
	ol_info("admin: %llu missed writes pending: healing them ([storage] heal_on_return)",
		(unsigned long long)pend);
	if (heal_start_rate(admin_cfg->heal_bytes_per_sec, true, "the daemon's start") != 202)
		ol_warn("admin: cannot start the heal of missed writes; run `openlake heal`");
}

void
ol_admin_set_store(struct ol_store *st)
{
	static int registered;
	if (!st) {
		if (admin_store)
			ol_store_on_drive_return(admin_store, NULL, NULL);
		atomic_store(&auto_stop, 1);
		while (atomic_load(&auto_thread))
			usleep(10000);
		atomic_store(&auto_stop, 0);
		if (atomic_load(&heal_thread))
			ol_info("admin: stopping the running heal");
		while (atomic_load(&heal_thread)) {
			ol_store_heal_cancel(&heal_prog);
			usleep(10000);
		}
	}
	admin_store = st;
	if (st)
		ol_admin_keys_load(st, admin_cfg);
	if (st && admin_cfg && admin_cfg->heal_on_return)
		ol_store_on_drive_return(st, drive_returned, NULL);
	if (!registered++)
		ol_metrics_register(heal_metrics, NULL);
	if (st && admin_cfg && admin_cfg->heal_on_return)
		heal_missed_at_start(st);
}

static void *
heal_main(void *arg)
{
	(void)arg;
	int rc = ol_store_heal_all(admin_store, &heal_opts, &heal_prog);
	if (rc == -EBUSY) {
		atomic_store(&heal_prog.result, rc);
		atomic_store(&heal_prog.finished_ns, real_ns());
	}
	atomic_store(&heal_thread, 2);
	heal_event(OL_ADMIN_HEAL_ENDED);
	atomic_store(&heal_thread, 0);
	return NULL;
}

static int
heal_start(const char *query, const char *peer)
{
	const char *q = strstr(query, "rate=");
	uint64_t rate = 0;
	char who[96];
	if (q && (q == query || q[-1] == '&')) {
		char *end;
		errno = 0;
		rate = strtoull(q + 5, &end, 10);
		if (errno || end == q + 5 || (*end && *end != '&'))
			return 400;
	}
	snprintf(who, sizeof(who), "an admin at %s", peer ? peer : "?");
	return heal_start_rate(rate, false, who);
}

/* Start the whole-store heal thread: 202, or 409 when one runs, 500. A whole heal asked
 * while the start's missed-writes-only heal runs replaces it (it begins with the same pass):
 * that one is cancelled and waited for (it stops between two keys) for up to 10 s. */
static int
heal_start_rate(uint64_t rate, bool missed_only, const char *who)
{
	return heal_start_job(NULL, rate, missed_only, who);
}

/* The job of a new heal (by who), or the resumed one */
static void
job_begin(const struct ol_admin_heal_rec *resume, bool missed_only, const char *who)
{
	uint8_t id[8] = {0};

	pthread_mutex_lock(&job_mu);
	if (resume) {
		heal_job = *resume;
		heal_job.resumed++;
	} else {
		memset(&heal_job, 0, sizeof(heal_job));
		if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
			uint64_t t = (uint64_t)real_ns();
			memcpy(id, &t, sizeof(id));
		}
		ol_hex_encode(id, sizeof(id), heal_job.job);
		snprintf(heal_job.by, sizeof(heal_job.by), "%s", who);
		heal_job.started_ns = real_ns();
		heal_job.missed_only = missed_only;
	}
	heal_from = heal_job.cursor;
	heal_opts.from = heal_job.has_cursor ? &heal_from : NULL;
	pthread_mutex_unlock(&job_mu);
}

static int
heal_start_job(const struct ol_admin_heal_rec *resume, uint64_t rate, bool missed_only,
	       const char *who)
{
	int idle = 0;
	pthread_t t;
	pthread_attr_t a;

	if (!missed_only && atomic_load(&heal_thread) && atomic_load(&heal_prog.missed_only)) {
		ol_info("admin: the heal of missed writes gives way to a whole heal");
		ol_store_heal_cancel(&heal_prog);
		for (int i = 0; i < 1000 && atomic_load(&heal_thread); i++)
			usleep(10000);
	}
	if (!atomic_compare_exchange_strong(&heal_thread, &idle, 1))
		return 409;
	job_begin(resume, missed_only, who);
	atomic_store(&heal_admin_cancel, 0);
	heal_opts.rate_bytes = rate;
	heal_opts.missed_only = missed_only;
	atomic_store(&heal_prog.missed_only, missed_only);
	atomic_store(&heal_prog.cancel, 0);
	atomic_store(&heal_prog.result, 0);
	atomic_store(&heal_prog.finished_ns, 0);
	atomic_store(&heal_prog.started_ns, real_ns());
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, heal_main, NULL)) {
		atomic_store(&heal_thread, 0);
		pthread_attr_destroy(&a);
		return 500;
	}
	pthread_attr_destroy(&a);
	if (resume)
		ol_info("admin: heal job %s (started by %s) resumed here, run %u%s%s", heal_job.job,
			heal_job.by, heal_job.resumed + 1,
			heal_job.has_cursor ? ", its scan after the cursor recorded" : "",
			rate ? " (rate limited)" : "");
	else
		ol_info("admin: heal job %s started by %s%s%s", heal_job.job, who,
			missed_only ? " (missed writes only)" : "", rate ? " (rate limited)" : "");
	heal_event(OL_ADMIN_HEAL_STARTED);
	return 202;
}

/* Waits until the latest drive return is heal_delay_secs old, then starts a heal unless one
 * started after that return (an admin's, or this thread's for an earlier return). */
static void *
auto_main(void *arg)
{
	(void)arg;
	for (;;) {
		int64_t ret = atomic_load(&returned_ns);
		int64_t due = ret + (int64_t)admin_cfg->heal_delay_secs * 1000000000LL;
		if (atomic_load(&auto_stop))
			break;
		if (real_ns() < due ||
		    (atomic_load(&heal_thread) && atomic_load(&heal_prog.started_ns) < ret)) {
			usleep(100000); /* not yet, or a heal older than the return still runs */
			continue;
		}
		if (atomic_load(&heal_prog.started_ns) < ret) {
			int rc = heal_start_rate(admin_cfg->heal_bytes_per_sec, false,
						 "a drive's return ([storage] heal_on_return)");
			if (rc == 409)
				continue; /* an admin's heal started this instant: look again */
			if (rc == 202)
				atomic_fetch_add(&auto_heals, 1);
			else
				ol_warn("admin: cannot start the heal for the returned drive; run "
					"`openlake heal`");
		}
		atomic_store(&auto_thread, 0);
		/* a return that came while deciding: take the thread back if nobody has */
		int idle = 0;
		if (atomic_load(&returned_ns) == ret || atomic_load(&auto_stop) ||
		    !atomic_compare_exchange_strong(&auto_thread, &idle, 1))
			return NULL;
	}
	atomic_store(&auto_thread, 0);
	return NULL;
}

void
ol_admin_set_forward(ol_admin_forward_fn fn, void *arg)
{
	admin_forward_arg = arg;
	admin_forward = fn;
}

static void
send_json_status(struct ol_http_req *r, int status, const char *body)
{
	struct ol_http_header h[] = {{"Content-Type", "application/json"},
				     {"Cache-Control", "no-store"}};
	size_t len = strlen(body);
	if (ol_http_respond(r, status, h, 2, (int64_t)len) == 0)
		ol_http_write(r, body, len);
	ol_http_finish(r);
}

/* DELETE while no heal runs here: the job recorded running that no node runs now is cancelled
 * in its record (heal hooks' cancel); 202 with it as the body, 404, 503 */
static void
heal_cancel_recorded(struct ol_http_req *r)
{
	char who[96], *doc = NULL;
	int st = admin_store ? 404 : 0; /* 0: no store and no record to ask */

	snprintf(who, sizeof(who), "an admin at %s", r->peer ? r->peer : "?");
	pthread_rwlock_rdlock(&hooks_lock);
	if (heal_hooks.cancel)
		st = heal_hooks.cancel(heal_hooks.arg, who, &doc);
	pthread_rwlock_unlock(&hooks_lock);
	if (st == 202 && doc) {
		struct ol_strbuf b = {0};

		ol_strbuf_printf(&b, "%s\n", doc);
		send_json_status(r, 202, b.p);
		ol_strbuf_free(&b);
	} else if (st == 503) {
		send_json_status(r, 503,
				 "{\"error\":\"the heal job's record in etcd cannot be "
				 "read or written now; retry shortly\"}\n");
	} else if (st == 0) {
		send_json_status(r, 503, "{\"error\":\"no object store in this daemon\"}\n");
	} else {
		char *j = ol_admin_heal_json();
		struct ol_strbuf b = {0};

		ol_strbuf_printf(&b, "%s\n", j);
		send_json_status(r, 404, b.p);
		ol_strbuf_free(&b);
		free(j);
	}
	free(doc);
}

bool
ol_admin_heal_cancel_job(const char *job)
{
	bool hit;

	pthread_mutex_lock(&job_mu);
	hit = atomic_load(&heal_thread) == 1 && strcmp(heal_job.job, job) == 0;
	pthread_mutex_unlock(&job_mu);
	if (hit) {
		atomic_store(&heal_admin_cancel, 1);
		ol_store_heal_cancel(&heal_prog);
	}
	return hit;
}

static void
heal_handle(struct ol_http_req *r)
{
	int status = 200;
	char err[160];
	bool del = strcmp(r->method, "DELETE") == 0;

	if (del && !atomic_load(&heal_thread)) {
		heal_cancel_recorded(r);
		return;
	}
	if (!admin_store) {
		/* a storage node without its store now is a cluster node between two servings
		 * (a leader change): worth asking again, unlike a KV pool */
		if (admin_cfg && strcmp(admin_cfg->mode, "kv") != 0)
			send_json_status(
			    r, 503,
			    "{\"error\":\"this node serves no object store right now "
			    "(the cluster's serving node is changing); retry shortly\","
			    "\"retry\":true}\n");
		else
			send_json_status(r, 503,
					 "{\"error\":\"no object store in this daemon\"}\n");
		return;
	}
	if (strcmp(r->method, "POST") == 0) {
		status = heal_start(r->query, r->peer);
	} else if (del) {
		status = atomic_load(&heal_thread) ? 202 : 404;
		if (status == 202) {
			atomic_store(&heal_admin_cancel, 1);
			ol_store_heal_cancel(&heal_prog);
			heal_event(OL_ADMIN_HEAL_CANCELLED); /* nobody resumes it */
		}
	} else if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
		send_json_status(r, 405, "{\"error\":\"use GET, POST or DELETE\"}\n");
		return;
	}
	if (status >= 400 && status != 409 && status != 404) {
		snprintf(err, sizeof(err), "{\"error\":\"%s\"}\n",
			 status == 400 ? "bad rate" : "cannot start the heal thread");
		send_json_status(r, status, err);
		return;
	}
	char *j = ol_admin_heal_json();
	struct ol_strbuf b = {0};
	ol_strbuf_printf(&b, "%s\n", j);
	send_json_status(r, status, b.p);
	ol_strbuf_free(&b);
	free(j);
}

static void
send_text(struct ol_http_req *r, const char *type, const char *body, size_t len)
{
	struct ol_http_header h[] = {{"Content-Type", type}, {"Cache-Control", "no-store"}};
	if (ol_http_respond(r, 200, h, 2, (int64_t)len) == 0)
		ol_http_write(r, body, len);
	ol_http_finish(r);
}

static void
metrics_handle(struct ol_http_req *r)
{
	struct ol_strbuf b = {0};
	ol_metrics_render(&b);
	send_text(r, "text/plain; version=0.0.4; charset=utf-8", b.p ? b.p : "", b.len);
	ol_strbuf_free(&b);
}

static void
status_handle(struct ol_http_req *r)
{
	char *j = ol_admin_status_json();
	send_text(r, "application/json", j, strlen(j));
	free(j);
}

static void
health_handle(struct ol_http_req *r)
{
	send_text(r, "text/plain", "ok\n", 3);
}

static void
ready_handle(struct ol_http_req *r)
{
	if (atomic_load(&admin_ready)) {
		send_text(r, "text/plain", "ready\n", 6);
		return;
	}
	static const char msg[] = "starting\n";
	struct ol_http_header h[] = {{"Content-Type", "text/plain"}, {"Cache-Control", "no-store"}};
	if (ol_http_respond(r, 503, h, 2, (int64_t)strlen(msg)) == 0)
		ol_http_write(r, msg, strlen(msg));
	ol_http_finish(r);
}

static void
console_handle(struct ol_http_req *r)
{
	send_text(r, "text/html; charset=utf-8", ol_console_html, strlen(ol_console_html));
}

/* Which signature a route asks of a GET/HEAD; other methods always need an admin's. */
enum admin_gate {
	GATE_OPEN,    /* nobody's (the console page: its calls are signed) */
	GATE_ADMIN,   /* always an admin's */
	GATE_STATUS,  /* an admin's unless [admin] status_auth = false */
	GATE_METRICS, /* an admin's when [admin] metrics_auth = true */
	GATE_HEALTH,  /* an admin's when [admin] health_auth = true */
	GATE_SELF,    /* the handler checks (an admin's, with the body: keys.c) */
};

struct admin_route {
	const char *path;
	enum admin_gate gate;
	bool writes; /* POST and DELETE are served (heal) */
	void (*fn)(struct ol_http_req *r);
	bool prefix; /* path is a prefix ("/.../keys/" + an access key) */
	bool store;  /* acts on the store: forwarded when this daemon holds none */
};

static void
keys_handle(struct ol_http_req *r)
{
	ol_admin_keys_handle(r, admin_cfg, admin_store);
}

/* Under ADMIN_PREFIX, signed or not: the admin API (path-style keys "admin/..." of a bucket
 * named "openlake" are therefore not reachable; virtual-host style they are). */
#define ADMIN_PREFIX "/openlake/admin/"
static const struct admin_route api_routes[] = {
    {"/openlake/admin/v1/status", GATE_STATUS, false, status_handle, false, false},
    {"/openlake/admin/v1/heal", GATE_STATUS, true, heal_handle, false, true},
    {"/openlake/admin/v1/metrics", GATE_METRICS, false, metrics_handle, false, false},
    {"/openlake/admin/v1/health", GATE_HEALTH, false, health_handle, false, false},
    {"/openlake/admin/v1/keys", GATE_SELF, true, keys_handle, false, true},
    {"/openlake/admin/v1/keys/", GATE_SELF, true, keys_handle, true, true},
};

/* Unsigned GETs only: a signed request for these paths is S3 (bucket "metrics", ...). */
static const struct admin_route open_routes[] = {
    {"/metrics", GATE_METRICS, false, metrics_handle, false, false},
    {"/openlake/health", GATE_HEALTH, false, health_handle, false, false},
    {"/openlake/ready", GATE_HEALTH, false, ready_handle, false, false},
    {"/openlake/console", GATE_OPEN, false, console_handle, false, false},
    {"/openlake/console/", GATE_OPEN, false, console_handle, false, false},
};

static bool
gate_required(enum admin_gate g)
{
	const struct ol_config *c = admin_cfg;
	switch (g) {
	case GATE_OPEN:
		return false;
	case GATE_STATUS:
		return c ? c->admin_status_auth : true;
	case GATE_METRICS:
		return c ? c->admin_metrics_auth : false;
	case GATE_HEALTH:
		return c ? c->admin_health_auth : false;
	case GATE_SELF:
	default:
		return true;
	}
}

static const struct admin_route *
route_find(const struct admin_route *t, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].prefix ? strncmp(t[i].path, path, strlen(t[i].path)) == 0 &&
				      path[strlen(t[i].path)]
				: strcmp(t[i].path, path) == 0)
			return &t[i];
	return NULL;
}

static void
api_handle(struct ol_http_req *r)
{
	const struct admin_route *rt =
	    route_find(api_routes, sizeof(api_routes) / sizeof(api_routes[0]), r->path);
	bool read = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
	bool write = strcmp(r->method, "POST") == 0 || strcmp(r->method, "DELETE") == 0;
	bool required = !rt || !read || gate_required(rt->gate);
	if (rt && rt->store && !admin_store && admin_forward && admin_forward(admin_forward_arg, r))
		return;
	if (rt && rt->gate == GATE_SELF) {
		rt->fn(r);
		return;
	}
	if (ol_admin_authorize(r, admin_cfg, required))
		return;
	if (!rt)
		send_json_status(r, 404, "{\"error\":\"no such admin endpoint\"}\n");
	else if (read || (write && rt->writes))
		rt->fn(r);
	else
		send_json_status(r, 405,
				 rt->writes ? "{\"error\":\"use GET, POST or DELETE\"}\n"
					    : "{\"error\":\"use GET\"}\n");
}

static bool
browser_root(struct ol_http_req *r)
{
	const char *accept = ol_http_header(r, "accept");
	if (strcmp(r->path, "/") || !accept || !strstr(accept, "text/html"))
		return false;
	struct ol_http_header h[] = {{"Location", "/openlake/console"}};
	ol_http_respond(r, 302, h, 1, 0);
	ol_http_finish(r);
	return true;
}

int
ol_admin_handle(struct ol_http_req *r)
{
	if (strncmp(r->path, ADMIN_PREFIX, strlen(ADMIN_PREFIX)) == 0) {
		api_handle(r);
		return 1;
	}
	if (ol_admin_request_signed(r))
		return 0;
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
		return 0;
	const struct admin_route *rt =
	    route_find(open_routes, sizeof(open_routes) / sizeof(open_routes[0]), r->path);
	if (rt) {
		if (ol_admin_authorize(r, admin_cfg, gate_required(rt->gate)) == 0)
			rt->fn(r);
		return 1;
	}
	return browser_root(r) ? 1 : 0;
}

/* ---- the admin listener (console_addr): no S3 here, so a signed GET of /metrics is ours */

static void
admin_port_handler(struct ol_http_req *r, void *arg)
{
	(void)arg;
	if (strncmp(r->path, ADMIN_PREFIX, strlen(ADMIN_PREFIX)) == 0) {
		api_handle(r);
		return;
	}
	const struct admin_route *rt =
	    route_find(open_routes, sizeof(open_routes) / sizeof(open_routes[0]), r->path);
	bool read = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
	if (rt && read) {
		if (ol_admin_authorize(r, admin_cfg, gate_required(rt->gate)) == 0)
			rt->fn(r);
		return;
	}
	if (rt) {
		send_json_status(r, 405, "{\"error\":\"use GET\"}\n");
		return;
	}
	if (read && browser_root(r))
		return;
	send_json_status(r, 404,
			 "{\"error\":\"not found: this is the OpenLake admin port (/metrics, "
			 "/openlake/health, /openlake/ready, /openlake/admin/v1/status, "
			 "/openlake/console); S3 is served on s3_addr\"}\n");
}

int
ol_admin_server_start(const struct ol_config *cfg, const char *addr, struct ol_admin_server **out)
{
	struct ol_admin_server *s = ol_xcalloc(1, sizeof(*s));
	struct ol_http_server_opts o = {
	    .size = sizeof(o),
	    .addr = addr,
	    .threads = 1,
	    .handler = admin_port_handler,
	    .idle_timeout_ms = cfg->http_idle_timeout_ms,
	    .header_timeout_ms = cfg->http_header_timeout_ms,
	    .max_body_bytes = 1 << 20,
	    .max_conns = 256,
	    .max_inflight = 16,
	};
	int rc = ol_http_server_start(&o, &s->http);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

unsigned
ol_admin_server_port(const struct ol_admin_server *s)
{
	return s ? ol_http_server_port(s->http) : 0;
}

void
ol_admin_server_stop(struct ol_admin_server *s)
{
	if (!s)
		return;
	ol_http_server_stop(s->http);
	free(s);
}
