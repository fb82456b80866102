/* store/drive.c - a drive is a failure domain: taking a drive offline (one log line with the
 * reason, a fault counter, /metrics), opening its metadata (a damaged meta.mdb is moved aside
 * and a fresh env created), and the monitor thread that probes drives while the node runs:
 * online ones for a broken env, a metadata file removed or replaced, a read-only or full
 * file system; offline ones until they are usable again, when they come back online. A remote
 * drive whose calls are many times slower than its peers' is taken offline as slow, and comes
 * back only once its probes have been fast for a hold-down time (slow.c holds the rules). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "store/store_int.h"

#define MONITOR_MS 1000

static void
meta_path(const struct ol_store *st, int d, const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/.openlake/%s", st->d[d].root, name);
}

void
ol_drive_offline(struct ol_store *st, int d, struct ol_meta *m, bool damaged, const char *why)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_meta *cur = atomic_load(&dr->meta);

	if (!cur || (m && cur != m))
		return;
	/* under drv_mu, so that who sees the drive offline and then takes drv_mu reads this
	 * why, not the last one (ol_drive_why) */
	pthread_mutex_lock(&st->drv_mu);
	if (!atomic_compare_exchange_strong(&dr->meta, &cur, NULL)) {
		pthread_mutex_unlock(&st->drv_mu);
		return;
	}
	if (!damaged && !ol_meta_broken(cur, NULL))
		dr->parked = cur;
	dr->damaged |= damaged || ol_meta_broken(cur, NULL);
	snprintf(dr->why, sizeof(dr->why), "%s", why);
	pthread_mutex_unlock(&st->drv_mu);
	atomic_fetch_add(&dr->faults, 1);
	ol_err("store: drive %s is offline: %s (%d of %d drives online)", dr->root, why,
	       ol_set_drives_online(st), st->n);
}

void
ol_drive_why(struct ol_store *st, int d, char *out, size_t cap)
{
	pthread_mutex_lock(&st->drv_mu);
	snprintf(out, cap, "%s", st->d[d].why);
	pthread_mutex_unlock(&st->drv_mu);
}

int
ol_store_drive_state(struct ol_store *st, int i, struct ol_store_drive_state *out)
{
	for (int s = 0; i >= 0 && s < st->n_sets; s++) {
		struct ol_store *set = st->sets[s];
		struct ol_drive *dr;

		if (i >= set->n) {
			i -= set->n;
			continue;
		}
		dr = &set->d[i];
		*out = (struct ol_store_drive_state){0};
		snprintf(out->path, sizeof(out->path), "%s", dr->root);
		pthread_mutex_lock(&set->drv_mu);
		out->online = atomic_load(&dr->meta) != NULL;
		if (!out->online)
			snprintf(out->why, sizeof(out->why), "%s", dr->why);
		pthread_mutex_unlock(&set->drv_mu);
		out->remote = dr->rd != NULL;
		out->slow = atomic_load(&dr->slow);
		out->faults = atomic_load(&dr->faults);
		out->slow_ejections = atomic_load(&dr->slow_ejections);
		if (dr->rd) {
			out->latency_us = out->slow ? atomic_load(&dr->slow_probe_us)
						    : ol_rd_latency(dr->rd, NULL);
			out->hedged = ol_rd_hedged(dr->rd);
		}
		return 0;
	}
	return -ENOENT;
}

void
ol_drive_check(struct ol_store *st, int d, struct ol_meta *m)
{
	const char *why;
	char buf[160];

	if (!m || !ol_meta_broken(m, &why))
		return;
	if (ol_drive_remote(st, d)) /* its node did not answer: nothing is known damaged */
		snprintf(buf, sizeof(buf), "%s", why);
	else
		snprintf(buf, sizeof(buf), "metadata damaged: %s", why);
	ol_drive_offline(st, d, m, true, buf);
}

/* meta.mdb (and its lock file) renamed aside, never deleted: an operator may want it. */
static int
move_aside(const struct ol_store *st, int d)
{
	char from[OL_PATH_MAX + 64], to[OL_PATH_MAX + 96];
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	meta_path(st, d, "meta.mdb", from, sizeof(from));
	snprintf(to, sizeof(to), "%s.damaged-%s-%d", from, stamp, (int)getpid());
	if (rename(from, to) && errno != ENOENT) {
		ol_err("store: drive %s: cannot move damaged %s aside: %s", st->d[d].root, from,
		       strerror(errno));
		return -errno;
	}
	ol_warn("store: drive %s: damaged metadata moved aside to %s; a fresh one is created "
		"(run `openlake heal` to restore its records)",
		st->d[d].root, to);
	meta_path(st, d, "meta.mdb-lock", from, sizeof(from));
	unlink(from); /* only reader slots: rebuilt by LMDB */
	return 0;
}

int
ol_drive_open_meta(struct ol_store *st, int d, struct ol_meta **out)
{
	char p[OL_PATH_MAX + 64];
	int rc;

	meta_path(st, d, "meta.mdb", p, sizeof(p));
	rc = ol_meta_open(p, 0, false, out);
	if (rc != -EUCLEAN)
		return rc;
	rc = move_aside(st, d);
	if (!rc)
		rc = ol_meta_open(p, 0, false, out);
	return rc;
}

bool
ol_is_mount_point(const char *path)
{
	char up[OL_PATH_MAX + 4];
	struct stat a, b;

	snprintf(up, sizeof(up), "%s/..", path);
	return !stat(path, &a) && !stat(up, &b) && a.st_dev != b.st_dev;
}

/* Can the drive take writes? A small file created, written, removed. */
static int
probe(const struct ol_store *st, int d)
{
	char p[OL_PATH_MAX + 64], buf[4096] = {0};
	int fd, rc = 0;

	meta_path(st, d, "probe", p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		rc = errno ? -errno : -ENOSPC;
	close(fd);
	unlink(p);
	return rc;
}

/* Is meta.mdb under the drive's path still the file the env has open? */
static int
same_file(const struct ol_store *st, int d, struct ol_meta *m)
{
	char p[OL_PATH_MAX + 64];
	struct stat a, b;
	int fd = ol_meta_fd(m);

	meta_path(st, d, "meta.mdb", p, sizeof(p));
	if (fd < 0 || fstat(fd, &b))
		return -EBADF;
	if (stat(p, &a))
		return -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? 0 : -ESTALE;
}

/* An online remote drive's record, read only: one that vanished (a wipe, maybe still under
 * way) is claimed again after three ticks in a row without one, so the claim (which makes
 * the drive's directories again) does not race the operator's rm -rf. */
static int
remote_ident(struct ol_store *st, int d, char *why, size_t cap)
{
	struct ol_drive *dr = &st->d[d];
	int rc = ol_rd_ident(st, d, dr->id_miss >= 2, why, cap);

	if (rc == 1 && st->readonly) { /* never claimed by a view: offline until it is back */
		snprintf(why, cap,
			 "its identity record is gone (a read-only view never writes "
			 "one: its leader does)");
		return -EXDEV;
	}
	dr->id_miss = rc == 1 ? dr->id_miss + 1 : 0;
	return rc == 1 ? 0 : rc;
}

static void
check_online(struct ol_store *st, int d)
{
	struct ol_meta *m = atomic_load(&st->d[d].meta);
	char why[OL_WHY_MAX];
	int rc, j;

	if (!m)
		return;
	ol_drive_check(st, d, m);
	if (atomic_load(&st->d[d].meta) != m)
		return;
	if (ol_drive_remote(st, d)) {
		if ((rc = ol_rd_ping(st->d[d].rd)))
			snprintf(why, sizeof(why), "node plane ping failed: %s", strerror(-rc));
		else /* another disk at its node's path (swapped, moved): never written to */
			rc = remote_ident(st, d, why, sizeof(why));
		if (rc == -EXDEV && (j = ol_rd_find(st, d, false)) >= 0)
			snprintf(why, sizeof(why),
				 "its disk is now at data_dirs index %d of its node (the node's "
				 "disks were reordered): it returns there at the next check",
				 j);
		if (rc)
			ol_drive_offline(st, d, m, false, why);
		return;
	}
	rc = same_file(st, d, m);
	if (rc) {
		snprintf(why, sizeof(why), "metadata file %s (%s)",
			 rc == -ESTALE ? "replaced" : "gone", strerror(-rc));
		ol_drive_offline(st, d, m, false, why);
		return;
	}
	/* another disk's record under its path (a disk swapped in, its metadata file kept):
	 * never written to; a record removed from our own drive is written again */
	rc = ol_format_verify(st, d, true, why, sizeof(why));
	if (rc == 1) {
		(void)ol_format_claim(st, d); /* logged; tried again at the next tick */
	} else if (rc) {
		ol_drive_offline(st, d, m, false, why);
		return;
	}
	rc = probe(st, d);
	if (rc) {
		snprintf(why, sizeof(why), "probe write failed: %s", strerror(-rc));
		ol_drive_offline(st, d, m, false, why);
	}
}

static int
mkdir_in(const char *path)
{
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* The drive's lock, taken again when its file is not the one we hold (drive replaced). */
static int
relock(struct ol_store *st, int d)
{
	char p[OL_PATH_MAX + 64];
	struct stat a, b;
	int fd;

	meta_path(st, d, "lock", p, sizeof(p));
	if (st->d[d].lock_fd >= 0 && !fstat(st->d[d].lock_fd, &b) && !stat(p, &a) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 0;
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		return -EBUSY;
	}
	if (st->d[d].lock_fd >= 0)
		close(st->d[d].lock_fd);
	st->d[d].lock_fd = fd;
	return 0;
}

/* A remote drive judged afresh from now (slow.c's ol_slow_judge): its average reset, its
 * time online and its run of slow ticks started again. The monitor's, or the open's before
 * the monitor starts. */
static void
judge_afresh(struct ol_store *st, int d)
{
	struct ol_drive *dr = &st->d[d];

	if (!dr->rd)
		return;
	ol_rd_latency_reset(dr->rd);
	dr->judge = (struct ol_slow_judge){.since_ms = ol_io_now_ms()};
}

/* The drive's back online with m: on_return called (see ol_set_on_drive_return). */
static void
back_online(struct ol_store *st, int d, struct ol_meta *m)
{
	struct ol_drive *dr = &st->d[d];

	pthread_mutex_lock(&st->drv_mu);
	dr->parked = NULL;
	dr->damaged = false;
	dr->why[0] = 0;
	pthread_mutex_unlock(&st->drv_mu);
	judge_afresh(st, d); /* the calls of before its return say nothing now */
	if (atomic_exchange(&dr->slow, false))
		dr->slow_back_ms = ol_io_now_ms();
	atomic_store(&dr->meta, m);
	pthread_mutex_lock(&st->drv_mu); /* cb runs under it: see ol_set_on_drive_return */
	ol_warn("store: drive %s is back online (%d of %d drives online)%s", dr->root,
		ol_set_drives_online(st), st->n,
		st->on_return || st->readonly ? ""
					      : "; run `openlake heal` to restore what it missed");
	if (st->on_return && !st->readonly) /* a read-only view heals nothing */
		st->on_return(st->on_return_arg, dr->root);
	pthread_mutex_unlock(&st->drv_mu);
}

/* A remote drive answers again: a fresh env (the old one, broken or parked, is dropped). */
static int
revive_remote(struct ol_store *st, int d, char *why, size_t cap)
{
	struct ol_meta *m = NULL;
	int rc = ol_rd_open_meta(st, d, &m, why, cap);

	if (rc)
		return rc;
	ol_meta_close(st->d[d].parked);
	back_online(st, d, m);
	return 0;
}

/* The drive's metadata opened from its file for a return, every record checked first as at
 * start: a file system repaired after a failure (e2fsck) can hand back an index with pages
 * from before and after the failure, records failing their checksums among them. Such a drive
 * brought online would go offline again at the first read of one (ol_rec_resolve), in the
 * middle of the heal its return started, which then skips its orphan sweep; so the damaged
 * file is moved aside here and the drive returns with a fresh one, which that heal fills. */
static int
open_checked(struct ol_store *st, int d, struct ol_meta **out)
{
	int rc = ol_drive_open_meta(st, d, out);

	if (rc)
		return rc;
	rc = ol_verify_records(*out);
	if (!rc)
		return 0;
	ol_meta_close(*out);
	*out = NULL;
	if (rc != -EUCLEAN)
		return rc; /* not readable now: the monitor tries again */
	ol_warn("store: drive %s: a metadata record failed its checksum: its index is not "
		"trusted again",
		st->d[d].root);
	if ((rc = move_aside(st, d)))
		return rc;
	return ol_drive_open_meta(st, d, out);
}

static int
revive(struct ol_store *st, int d, char *why, size_t cap)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_meta *m = dr->parked;
	char p[OL_PATH_MAX + 64];
	struct stat sb;
	int rc, blank;

	if (ol_drive_remote(st, d))
		return revive_remote(st, d, why, cap);
	if (stat(dr->root, &sb) || !S_ISDIR(sb.st_mode)) {
		snprintf(why, cap, "data dir missing");
		return -ENOENT;
	}
	/* Its file system unmounted (an operator's repair between `umount` and `mount`): the
	 * directory beneath is not the drive. Brought back there, it would come online with an
	 * empty index on the wrong file system, go offline again once the real one is mounted
	 * over it, and the heal its return started would run without it. */
	if (dr->mounted && !ol_is_mount_point(dr->root)) {
		snprintf(why, cap, "its file system is not mounted");
		return -ENODEV;
	}
	/* the disk there is this drive, or a blank one (which is given a record and healed):
	 * checked before anything is written to it */
	blank = ol_format_verify(st, d, false, why, cap);
	if (blank < 0)
		return blank;
	meta_path(st, d, "", p, sizeof(p));
	rc = mkdir_in(p);
	if (!rc)
		rc = mkdir_in(dr->data);
	if (!rc)
		rc = probe(st, d);
	if (!rc)
		rc = relock(st, d);
	if (!rc && blank == 1)
		rc = ol_format_claim(st, d);
	if (rc) {
		snprintf(why, cap, "%s", strerror(-rc));
		return rc;
	}
	if (m && (ol_meta_broken(m, NULL) || same_file(st, d, m)))
		m = NULL; /* the old env is abandoned: its file is gone or replaced */
	/* a file that faulted or held a record failing its checksum is not trusted again,
	 * even when its pages now read back clean */
	if (!m && dr->damaged && (rc = move_aside(st, d))) {
		snprintf(why, cap, "cannot move damaged metadata aside: %s", strerror(-rc));
		return rc;
	}
	if (!m && (rc = open_checked(st, d, &m))) {
		snprintf(why, cap, "cannot open metadata: %s", strerror(-rc));
		return rc;
	}
	back_online(st, d, m);
	return 0;
}

/* ---- slow drives ---- */

uint64_t
ol_drive_peers_us(struct ol_store *st, int d, uint64_t min_calls, int *np)
{
	uint64_t v[OL_MAX_DRIVES], calls, lat;
	int n = 0;

	for (int i = 0; i < st->n; i++) {
		if (i == d || !st->d[i].rd || !atomic_load(&st->d[i].meta))
			continue;
		lat = ol_rd_latency(st->d[i].rd, &calls);
		if (calls >= min_calls)
			v[n++] = lat;
	}
	*np = n;
	return ol_slow_median(v, n);
}

/* The median of drive d's peers whose time is judged (OL_SLOW_MIN_CALLS calls). */
static uint64_t
peers_us(struct ol_store *st, int d, int *np)
{
	return ol_drive_peers_us(st, d, OL_SLOW_MIN_CALLS, np);
}

/* us as milliseconds for a log line: "312", or "0.4" under 10 ms */
static void
ms_text(uint64_t us, char *out, size_t cap)
{
	if (us < 10000)
		snprintf(out, cap, "%.1f", (double)us / 1000.0);
	else
		snprintf(out, cap, "%llu", (unsigned long long)(us / 1000));
}

static void
eject_slow(struct ol_store *st, int d, uint64_t lat, uint64_t peers)
{
	struct ol_drive *dr = &st->d[d];
	struct ol_meta *m = atomic_load(&dr->meta);
	char why[OL_WHY_MAX], a[24], b[24];

	dr->slow_hold_ms =
	    ol_slow_next_hold(&st->slow, dr->slow_hold_ms, dr->slow_back_ms, ol_io_now_ms());
	dr->slow_good_ms = 0;
	dr->slow_kept = false;
	ms_text(lat, a, sizeof(a));
	ms_text(peers, b, sizeof(b));
	snprintf(why, sizeof(why),
		 "slow: %s ms per call, peers %s ms (back once its probes are fast for %llu s)", a,
		 b, (unsigned long long)(dr->slow_hold_ms / 1000));
	atomic_store(&dr->slow_probe_us, lat); /* what it was ejected for, until a probe */
	atomic_store(&dr->slow, true);
	atomic_fetch_add(&dr->slow_ejections, 1);
	ol_drive_offline(st, d, m, false, why);
}

/* Once a tick: the slowest online remote drive that has been slow beside its peers for long
 * enough (ol_slow_judge: min_s online, OL_SLOW_MIN_CALLS calls, OL_SLOW_TICKS ticks in a row)
 * goes offline, when the set can spare it (never below its write quorum, nor k); at most one
 * a tick. */
static void
slow_check(struct ol_store *st)
{
	uint64_t calls, lat, peers, worst_lat = 0, worst_peers = 0, now = ol_io_now_ms();
	int worst = -1, np;

	if (!st->slow.floor_ms)
		return;
	for (int d = 0; d < st->n; d++) {
		if (!st->d[d].rd || !atomic_load(&st->d[d].meta))
			continue;
		lat = ol_rd_latency(st->d[d].rd, &calls);
		peers = peers_us(st, d, &np);
		if (!ol_slow_judge(&st->slow, &st->d[d].judge, now, calls, lat, np, peers))
			st->d[d].slow_kept = false;
		else if (lat > worst_lat)
			worst = d, worst_lat = lat, worst_peers = peers;
	}
	if (worst < 0)
		return;
	if (ol_slow_may_eject(ol_set_drives_online(st), st->w, st->k)) {
		eject_slow(st, worst, worst_lat, worst_peers);
	} else if (!st->d[worst].slow_kept) { /* one line per slow spell, not one a tick */
		char a[24], b[24];

		ms_text(worst_lat, a, sizeof(a));
		ms_text(worst_peers, b, sizeof(b));
		ol_warn("store: drive %s is slow (%s ms per call, peers %s ms) but stays online: "
			"the set has no drive to spare above its write quorum of %d",
			st->d[worst].root, a, b, st->w);
		st->d[worst].slow_kept = true;
	}
}

/* A drive offline as slow: may it return now? One timed probe a tick; fast ones in a row
 * for its hold (a slow or failed probe starts the count again). */
static bool
slow_over(struct ol_store *st, int d)
{
	struct ol_drive *dr = &st->d[d];
	uint64_t us = 0, now, peers;
	int np, rc = ol_rd_probe(dr->rd, &us);

	now = ol_io_now_ms();
	peers = peers_us(st, d, &np);
	atomic_store(&dr->slow_probe_us, us);
	if (rc || ol_slow_is(&st->slow, us, peers)) {
		dr->slow_good_ms = 0;
		return false;
	}
	if (!dr->slow_good_ms)
		dr->slow_good_ms = now;
	if (!ol_slow_may_return(dr->slow_good_ms, now, dr->slow_hold_ms))
		return false;
	ol_info("store: drive %s answers fast again (probe %llu us, peers %llu us, for %llu s)",
		dr->root, (unsigned long long)us, (unsigned long long)peers,
		(unsigned long long)((now - dr->slow_good_ms) / 1000));
	return true;
}

static void
check_offline(struct ol_store *st, int d, char *last, size_t cap)
{
	char why[OL_WHY_MAX] = "";

	if (atomic_load(&st->d[d].meta))
		return;
	if (atomic_load(&st->d[d].slow) && st->d[d].rd && !slow_over(st, d))
		return;
	if (!revive(st, d, why, sizeof(why)))
		return;
	if (strcmp(why, last)) { /* one line per new reason, not one per second */
		ol_info("store: drive %s still offline: %s", st->d[d].root, why);
		snprintf(last, cap, "%s", why);
	}
}

static void *
monitor(void *arg)
{
	struct ol_store *st = arg;
	char last[OL_MAX_DRIVES][OL_WHY_MAX] = {{0}};
	struct timespec ts;

	pthread_mutex_lock(&st->drv_mu);
	while (!st->mon_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += MONITOR_MS % 1000 * 1000000L;
		ts.tv_sec += MONITOR_MS / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&st->drv_cv, &st->drv_mu, &ts);
		if (st->mon_stop)
			break;
		pthread_mutex_unlock(&st->drv_mu);
		for (int d = 0; d < st->n; d++) {
			if (atomic_load(&st->d[d].meta))
				check_online(st, d);
			else
				check_offline(st, d, last[d], sizeof(last[d]));
		}
		slow_check(st);
		pthread_mutex_lock(&st->drv_mu);
	}
	pthread_mutex_unlock(&st->drv_mu);
	return NULL;
}

/* the slow-drive figures of remote drives (a store of local drives has none), as
 * ol_store_drive_state reports them */
static void
render_slow(struct ol_strbuf *b, struct ol_store *top)
{
	static const char *const fam[4][3] = {
	    {"openlake_drive_slow_ejections_total", "counter",
	     "times the drive was taken offline as slow beside its set's other drives"},
	    {"openlake_drive_slow", "gauge",
	     "1 while the drive is kept offline as slow (until its probes are fast for the hold)"},
	    {"openlake_drive_call_latency_us", "gauge",
	     "moving average of the drive's node-plane call times, microseconds (while slow: "
	     "its last probe)"},
	    {"openlake_drive_hedged_total", "counter",
	     "calls of the drive abandoned because the rest were done long before (a stripe's "
	     "shard reads and writes, a metadata read already decided, a commit already on its "
	     "write quorum)"}};
	struct ol_store_drive_state ds;

	for (int f = 0; f < 4; f++) {
		bool any = false;

		for (int i = 0; !ol_store_drive_state(top, i, &ds); i++) {
			unsigned long long v = f == 0	? ds.slow_ejections
					       : f == 1 ? ds.slow
					       : f == 2 ? ds.latency_us
							: ds.hedged;

			if (!ds.remote)
				continue;
			if (!any)
				ol_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fam[f][0],
						 fam[f][2], fam[f][0], fam[f][1]);
			any = true;
			ol_strbuf_printf(b, "%s{drive=\"%s\"} %llu\n", fam[f][0], ds.path, v);
		}
	}
}

/* arg: a one-set store, or the shell of several (sets.c): one family per metric either way */
static void
render(struct ol_strbuf *b, void *arg)
{
	struct ol_store *top = arg;

	ol_strbuf_printf(b, "# HELP openlake_drive_online 1 when the drive serves reads and "
			    "writes, 0 when it is offline\n# TYPE openlake_drive_online gauge\n");
	for (int s = 0; s < top->n_sets; s++) {
		struct ol_store *st = top->sets[s];

		for (int d = 0; d < st->n; d++)
			ol_strbuf_printf(b, "openlake_drive_online{drive=\"%s\"} %d\n",
					 st->d[d].root, atomic_load(&st->d[d].meta) != NULL);
	}
	ol_strbuf_printf(b, "# HELP openlake_drive_faults_total times the drive was taken "
			    "offline\n# TYPE openlake_drive_faults_total counter\n");
	for (int s = 0; s < top->n_sets; s++) {
		struct ol_store *st = top->sets[s];

		for (int d = 0; d < st->n; d++)
			ol_strbuf_printf(b, "openlake_drive_faults_total{drive=\"%s\"} %llu\n",
					 st->d[d].root,
					 (unsigned long long)atomic_load(&st->d[d].faults));
	}
	render_slow(b, top);
}

void
ol_drive_metrics_shell(struct ol_store *shell, bool on)
{
	for (int s = 0; on && s < shell->n_sets; s++)
		ol_metrics_unregister(render, shell->sets[s]);
	if (on)
		ol_metrics_register(render, shell);
	else
		ol_metrics_unregister(render, shell);
}

void
ol_drive_monitor_start(struct ol_store *st)
{
	/* the calls of the store's opening (identity reads, metadata opens, the missed-writes
	 * count), made while the whole machine may be busy opening, say nothing of how the
	 * drive serves: each drive is judged from here */
	for (int d = 0; d < st->n; d++)
		judge_afresh(st, d);
	if (pthread_create(&st->mon, NULL, monitor, st)) {
		ol_warn("store: cannot start the drive monitor: drives are checked only at start");
		return;
	}
	st->mon_started = true;
	ol_metrics_register(render, st);
}

void
ol_drive_monitor_stop(struct ol_store *st)
{
	if (!st->mon_started)
		return;
	ol_metrics_unregister(render, st);
	pthread_mutex_lock(&st->drv_mu);
	st->mon_stop = true;
	pthread_cond_broadcast(&st->drv_cv);
	pthread_mutex_unlock(&st->drv_mu);
	pthread_join(st->mon, NULL);
	st->mon_started = false;
}

void
ol_flight_add(struct ol_store *st, const uint8_t *uuid)
{
	pthread_mutex_lock(&st->fl_mu);
	if (st->n_flight == st->cap_flight) {
		st->cap_flight = st->cap_flight ? 2 * st->cap_flight : 64;
		st->flight = ol_xrealloc(st->flight, st->cap_flight * OL_UUID);
	}
	memcpy(st->flight[st->n_flight++], uuid, OL_UUID);
	pthread_mutex_unlock(&st->fl_mu);
}

void
ol_flight_del(struct ol_store *st, const uint8_t *uuid)
{
	pthread_mutex_lock(&st->fl_mu);
	for (size_t i = 0; i < st->n_flight; i++)
		if (!memcmp(st->flight[i], uuid, OL_UUID)) {
			memcpy(st->flight[i], st->flight[--st->n_flight], OL_UUID);
			break;
		}
	pthread_mutex_unlock(&st->fl_mu);
}

bool
ol_flight_has(struct ol_store *st, const uint8_t *uuid)
{
	bool found = false;

	pthread_mutex_lock(&st->fl_mu);
	for (size_t i = 0; i < st->n_flight && !found; i++)
		found = !memcmp(st->flight[i], uuid, OL_UUID);
	pthread_mutex_unlock(&st->fl_mu);
	return found;
}

void
ol_set_on_drive_return(struct ol_store *st, void (*cb)(void *arg, const char *drive), void *arg)
{
	pthread_mutex_lock(&st->drv_mu);
	st->on_return = cb;
	st->on_return_arg = arg;
	pthread_mutex_unlock(&st->drv_mu);
}
