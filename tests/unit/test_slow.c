/* tests/unit/test_slow.c - the pure rules of slow-drive ejection (store/slow.c): the call-time
 * EWMA, the median of the peers, when a drive is slow, when that has lasted long enough to act
 * on (time online, calls, ticks in a row), when a set can spare one, and the
 * hold-down arithmetic (base, doubling on relapses, the cap, back to base after a calm); and
 * hedging's: when a batch may abandon its stragglers, when a read skips a lagging drive, and
 * when a metadata read's answers so far decide what waiting for every drive would. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"
#include "tap.h"

static const struct ol_slow_cfg cfg = {
    .floor_ms = 200, .ratio = 8, .hold_s = 10, .hold_max_s = 160, .min_s = 5};

static void
ewma(void)
{
	uint64_t v = ol_slow_ewma(12345, 300000, 0);
	int n;

	ok(v == 300000, "the first call is the average (%llu)", (unsigned long long)v);
	v = 4000;
	for (n = 1; n <= 40 && v < 200000; n++)
		v = ol_slow_ewma(v, 300000, (uint64_t)n);
	ok(n > 5 && n < 12, "4 ms to 300 ms calls: above 200 ms after %d calls", n);
	for (int i = 0; i < 200; i++)
		v = ol_slow_ewma(v, 300000, 100);
	ok(v > 299000 && v <= 300000, "steady 300 ms calls: the average settles there (%llu)",
	   (unsigned long long)v);
	for (int i = 0; i < 200; i++)
		v = ol_slow_ewma(v, 3000, 100);
	ok(v >= 3000 && v < 4000, "and falls back to 3 ms calls (%llu)", (unsigned long long)v);
	ok(ol_slow_ewma(0, 0, 5) == 0 && ol_slow_ewma(UINT64_MAX / 2, 0, 5) < UINT64_MAX / 2,
	   "no wrap at the edges");
}

static void
median(void)
{
	uint64_t none[1] = {0}, one[] = {7}, two[] = {9, 3}, three[] = {500, 4, 6},
		 four[] = {5, 1000, 4, 3};

	ok(ol_slow_median(none, 0) == 0, "no peers: 0");
	ok(ol_slow_median(one, 1) == 7, "one peer: its time");
	ok(ol_slow_median(two, 2) == 9, "two peers: the higher (a higher bar for slow)");
	ok(ol_slow_median(three, 3) == 6, "three: the middle one, one slow peer ignored");
	ok(ol_slow_median(four, 4) == 5, "four: the upper middle");
}

static void
slow(void)
{
	struct ol_slow_cfg off = cfg;

	off.floor_ms = 0;
	ok(ol_slow_is(&cfg, 312000, 4000), "312 ms beside 4 ms peers: slow");
	ok(!ol_slow_is(&cfg, 150000, 1000), "150 ms: under the 200 ms floor, never slow");
	ok(!ol_slow_is(&cfg, 300000, 40000), "300 ms beside 40 ms peers: under 8x, not slow");
	ok(ol_slow_is(&cfg, 320000, 40000), "320 ms beside 40 ms peers: 8x, slow");
	ok(ol_slow_is(&cfg, 200000, 0), "peers of 0 us: the floor decides");
	ok(!ol_slow_is(&cfg, 199999, 0), "just under the floor: not slow");
	ok(!ol_slow_is(&off, 5000000, 1000), "floor 0: ejection off");
	ok(!ol_slow_is(&cfg, 900000, 900000),
	   "every drive as slow: none is slow beside the others");
}

/* A drive's calls as drive.c sees them: the EWMA of its samples and their count. */
struct calls {
	uint64_t lat, n;
};

static void
calls_add(struct calls *c, int n, uint64_t us)
{
	for (int i = 0; i < n; i++, c->n++)
		c->lat = ol_slow_ewma(c->lat, us, c->n);
}

/* The monitor's ticks at t0 + 1 s .. t0 + ticks s, each after `per` calls of us: how many
 * found the drive slow, and at the first such tick (*first, s; 0 none). */
static int
ticks_slow(const struct ol_slow_cfg *c, struct ol_slow_judge *j, struct calls *d, uint64_t t0,
	   int ticks, int per, uint64_t us, uint64_t peers, int *first)
{
	int slow = 0;

	*first = 0;
	for (int i = 1; i <= ticks; i++) {
		calls_add(d, per, us);
		if (ol_slow_judge(c, j, t0 + (uint64_t)i * 1000, d->n, d->lat, 3, peers)) {
			slow++;
			if (!*first)
				*first = i;
		}
	}
	return slow;
}

/* When a drive's slowness has lasted enough to act on (issue 10: a healthy drive was taken
 * out 1.4 s after the store opened, on its first 8 calls made while the machine was busy) */
static void
judge(void)
{
	struct ol_slow_cfg c4 = cfg; /* test_cluster_slow.py's ratio */
	struct ol_slow_judge j;
	struct calls d;
	uint64_t t = 1000000;
	int first;

	c4.ratio = 4;
	/* the drive of that run: 8 calls of 207 ms at open, peers 29 ms, then healthy (20 ms,
	 * two calls a tick: the monitor's ping and identity read) */
	j = (struct ol_slow_judge){.since_ms = t};
	d = (struct calls){0, 0};
	calls_add(&d, 8, 207000);
	ok(!ol_slow_judge(&c4, &j, t + 1000, d.n, d.lat, 3, 29000),
	   "8 calls of 207 ms beside 29 ms at open, first tick: not slow");
	ok(ticks_slow(&c4, &j, &d, t + 1000, 30, 2, 20000, 29000, &first) == 0,
	   "that burst, then healthy calls: never slow (first at %d s)", first);
	/* the same burst, a long one: slow on every tick of its first 4 s, then healthy */
	j = (struct ol_slow_judge){.since_ms = t};
	d = (struct calls){0, 0};
	ok(ticks_slow(&c4, &j, &d, t, 4, 8, 400000, 29000, &first) == 0,
	   "slow calls, 8 a tick, for 4 s from its start: not slow before 5 s online");
	ok(ticks_slow(&c4, &j, &d, t + 4000, 30, 8, 20000, 29000, &first) == 0,
	   "then healthy: never slow (first at %d s)", first);

	/* sustained: online and healthy for 20 s, then 500 ms a call (8 a tick) beside 4 ms */
	j = (struct ol_slow_judge){.since_ms = t};
	d = (struct calls){0, 0};
	ok(ticks_slow(&cfg, &j, &d, t, 20, 4, 3000, 4000, &first) == 0, "healthy: not slow");
	calls_add(&d, 8, 500000);
	ok(ol_slow_is(&cfg, d.lat, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 21000, d.n, d.lat, 3, 4000),
	   "slow calls, the first tick its average is slow: not yet (%llu us)",
	   (unsigned long long)d.lat);
	calls_add(&d, 8, 500000);
	ok(ol_slow_judge(&cfg, &j, t + 22000, d.n, d.lat, 3, 4000),
	   "slow again at the next tick: slow");
	ok(ticks_slow(&cfg, &j, &d, t + 22000, 5, 8, 500000, 4000, &first) == 5,
	   "and at each tick after it while it lasts (kept online: still slow)");
	/* from its start: judged within a few ticks of the drive turning slow */
	j = (struct ol_slow_judge){.since_ms = t};
	d = (struct calls){0, 0};
	ticks_slow(&cfg, &j, &d, t, 10, 4, 3000, 4000, &first);
	ticks_slow(&cfg, &j, &d, t + 10000, 10, 4, 500000, 4000, &first);
	ok(first >= 2 && first <= 4, "500 ms calls from a healthy start: slow at tick %d", first);

	/* slow on one tick, then fast: not slow; then slow on one tick again: not yet */
	j = (struct ol_slow_judge){.since_ms = t};
	ok(!ol_slow_judge(&cfg, &j, t + 10000, 40, 312000, 3, 4000), "one slow tick: not slow");
	ok(!ol_slow_judge(&cfg, &j, t + 11000, 44, 150000, 3, 4000),
	   "then under the floor: not slow");
	ok(!ol_slow_judge(&cfg, &j, t + 12000, 48, 312000, 3, 4000),
	   "slow again: the run starts over, not slow yet");
	ok(ol_slow_judge(&cfg, &j, t + 13000, 52, 312000, 3, 4000), "and the next: slow");
	j = (struct ol_slow_judge){.since_ms = t};
	ok(!ol_slow_judge(&cfg, &j, t + 10000, 40, 312000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 11000, 44, 312000, 0, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 12000, 48, 312000, 3, 4000),
	   "a tick with no judged peer breaks the run");

	/* evidence: new calls between the ticks, enough calls, time online */
	j = (struct ol_slow_judge){.since_ms = t};
	ok(!ol_slow_judge(&cfg, &j, t + 10000, 40, 312000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 11000, 40, 312000, 3, 4000),
	   "two slow ticks on the same calls: not slow");
	ok(ol_slow_judge(&cfg, &j, t + 12000, 41, 312000, 3, 4000),
	   "a third with a new call: slow");
	j = (struct ol_slow_judge){.since_ms = t};
	d = (struct calls){0, 0};
	calls_add(&d, OL_SLOW_MIN_CALLS - 1, 900000);
	ok(ticks_slow(&cfg, &j, &d, t + 60000, 30, 0, 0, 4000, &first) == 0,
	   "15 calls of 900 ms, online a minute and more: too few calls, not slow");
	j = (struct ol_slow_judge){.since_ms = t};
	ok(!ol_slow_judge(&cfg, &j, t + 4000, 100, 900000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 4999, 200, 900000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 5000, 300, 900000, 3, 4000) &&
	       ol_slow_judge(&cfg, &j, t + 6000, 400, 900000, 3, 4000),
	   "many slow calls: judged from 5 s online, slow on the second tick after");
	j = (struct ol_slow_judge){.since_ms = t + 5000};
	ok(!ol_slow_judge(&cfg, &j, t, 100, 900000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 1000, 200, 900000, 3, 4000),
	   "a clock behind its start: not slow");
	j = (struct ol_slow_judge){0};
	ok(!ol_slow_judge(&cfg, &j, t, 100, 900000, 3, 4000) &&
	       !ol_slow_judge(&cfg, &j, t + 1000, 200, 900000, 3, 4000),
	   "never judged afresh (since 0): not slow");
	struct ol_slow_cfg now = cfg;
	now.min_s = 0;
	j = (struct ol_slow_judge){.since_ms = t};
	ok(!ol_slow_judge(&now, &j, t, 16, 900000, 3, 4000) &&
	       ol_slow_judge(&now, &j, t + 1000, 17, 900000, 3, 4000),
	   "min_s 0: judged at once, still on two ticks");
}

static void
spare(void)
{
	/* N=4 P=1: k 3, write quorum 3 */
	ok(ol_slow_may_eject(4, 3, 3), "4 of 4 online, quorum 3: one may go");
	ok(!ol_slow_may_eject(3, 3, 3), "3 of 4 online, quorum 3: none may go");
	/* N=6 P=2: k 4, write quorum 4 */
	ok(ol_slow_may_eject(5, 4, 4), "N=6 P=2, 5 online: one more may go");
	ok(!ol_slow_may_eject(4, 4, 4), "N=6 P=2, 4 online: none");
	/* N=4 P=2: k 2, write quorum 3 (w > k) */
	ok(!ol_slow_may_eject(3, 3, 2), "w above k: w decides");
	ok(!ol_slow_may_eject(2, 1, 2), "k above w: k decides");
}

static void
hold(void)
{
	uint64_t h, t = 1000000;

	h = ol_slow_next_hold(&cfg, 0, 0, t);
	ok(h == 10000, "first ejection: the base hold, 10 s (%llu)", (unsigned long long)h);
	h = ol_slow_next_hold(&cfg, h, t + 15000, t + 20000);
	ok(h == 20000, "a relapse 5 s after its return: doubled (%llu)", (unsigned long long)h);
	h = ol_slow_next_hold(&cfg, h, t + 50000, t + 60000);
	ok(h == 40000, "again: 40 s");
	h = ol_slow_next_hold(&cfg, 80000, t, t + 1000);
	ok(h == 160000, "80 s doubled: 160 s");
	h = ol_slow_next_hold(&cfg, h, t, t + 1000);
	ok(h == 160000, "at the cap it stays (%llu)", (unsigned long long)h);
	h = ol_slow_next_hold(&cfg, 160000, t, t + 319999);
	ok(h == 160000, "online just under twice the cap: still a relapse");
	h = ol_slow_next_hold(&cfg, 160000, t, t + 320000);
	ok(h == 10000, "online twice the cap without a relapse: back to the base");
	struct ol_slow_cfg small = cfg;
	small.hold_max_s = 5;
	ok(ol_slow_next_hold(&small, 0, 0, t) == 10000 &&
	       ol_slow_next_hold(&small, 10000, t, t + 1) == 10000,
	   "a cap under the base: the base");

	ok(!ol_slow_may_return(0, t, 10000), "no fast probe yet: stays out");
	ok(!ol_slow_may_return(t, t + 9999, 10000), "fast for 9.999 s of 10: stays out");
	ok(ol_slow_may_return(t, t + 10000, 10000), "fast for the hold: returns");
	ok(!ol_slow_may_return(t + 5, t, 10000), "a clock behind the start: stays out");
}

static void
hedge(void)
{
	const struct ol_hedge_cfg h = {.floor_ms = 200, .ratio = 4}, off = {0, 4};
	uint64_t d3[] = {5000, 7000, 6000}, d2[] = {5000, 7000}, slow3[] = {90000, 80000, 100000},
		 d1[] = {1000};

	ok(ol_hedge_after_us(&h, d3, 3, 4, 1) == 200000,
	   "3 of 4 done in ~6 ms, one spare: the rest may go after the 200 ms floor");
	ok(ol_hedge_after_us(&h, slow3, 3, 4, 1) == 360000,
	   "3 of 4 done in ~90 ms: after 4x their median (%llu)",
	   (unsigned long long)ol_hedge_after_us(&h, slow3, 3, 4, 1));
	ok(ol_hedge_after_us(&h, d2, 2, 4, 1) == UINT64_MAX,
	   "2 of 4 done, one spare: two unfinished is one too many, wait");
	ok(ol_hedge_after_us(&h, d2, 2, 4, 2) == 200000, "2 of 4 done, two spare: may go");
	ok(ol_hedge_after_us(&h, d3, 3, 4, 0) == UINT64_MAX, "nothing spare: always wait");
	ok(ol_hedge_after_us(&h, d3, 3, 4, -1) == UINT64_MAX, "below the quorum already: wait");
	ok(ol_hedge_after_us(&h, d3, 0, 4, 9) == UINT64_MAX,
	   "none done: no time to compare with, wait (even with all spare)");
	ok(ol_hedge_after_us(&h, d3, 3, 3, 1) == UINT64_MAX, "all done: nothing to abandon");
	ok(ol_hedge_after_us(&h, d1, 1, 2, 1) == 200000, "1 of 2 done, one spare: may go");
	ok(ol_hedge_after_us(&off, d3, 3, 4, 1) == UINT64_MAX, "hedge_ms 0: off");

	ok(ol_hedge_lagging(&h, 1000000, 5000), "1 s beside peers at 5 ms: lagging");
	ok(!ol_hedge_lagging(&h, 150000, 5000), "150 ms: under the 200 ms floor");
	ok(!ol_hedge_lagging(&h, 300000, 100000), "300 ms beside 100 ms: under 4x");
	ok(ol_hedge_lagging(&h, 400000, 100000), "400 ms beside 100 ms: 4x");
	ok(!ol_hedge_lagging(&off, 1000000, 5000), "off: never");
}

static void
presence(void)
{
	ok(ol_presence_decide(2, 2, 2) == OL_DECIDE_FOUND, "on k of the answers: found");
	ok(ol_presence_decide(1, 1, 2) == OL_DECIDE_WAIT, "on 1, one unanswered: wait");
	ok(ol_presence_decide(1, 0, 2) == OL_DECIDE_ABSENT, "on 1, all answered: absent");
	ok(ol_presence_decide(0, 1, 2) == OL_DECIDE_ABSENT,
	   "on none, one unanswered: it could hold it on 1 < k at most: absent");
	ok(ol_presence_decide(0, 2, 2) == OL_DECIDE_WAIT, "on none, k unanswered: wait");
}

/* Records of a key for a set of 4 drives with k = 2: version v (1..4) at mtime v, its prev
 * version v - 1 (none for 1). */
static struct ol_store rst = {.n = 4, .k = 2, .p = 2, .bs = 1 << 20};

static uint8_t *
rec(int v, size_t *len)
{
	uint8_t vid[OL_UUID] = {0}, *prev = NULL, *o;
	size_t pl = 0;
	struct ol_rec_build b = {.st = &rst, .mtime = v, .vid = vid, .etag = "e"};

	vid[0] = (uint8_t)v;
	if (v > 1)
		prev = rec(v - 1, &pl);
	b.prev = prev;
	b.prev_len = (uint32_t)pl;
	o = ol_rec_encode(&b, len);
	free(prev);
	return o;
}

/* The winning version of ol_rec_resolve over raw[] (0: none). */
static int
resolved(void *const *raw, const size_t *len)
{
	struct ol_rec win[OL_MAX_DRIVES];
	bool valid[OL_MAX_DRIVES];

	if (!ol_rec_resolve(&rst, (const void *const *)raw, len, win, valid))
		return 0;
	for (int d = 0; d < rst.n; d++)
		if (valid[d])
			return win[d].vid[0];
	return -1;
}

/* Every state of 3 answering drives (no record, or version 1..3) with the 4th pending: when
 * ol_rec_decide says FOUND or ABSENT, the full read resolves the same for whatever the 4th
 * holds (nothing, an older, the same or a newer version). */
static void
decide_matches_resolve(void)
{
	int found = 0, absent = 0, wait = 0, wrong = 0;

	for (int s = 0; s < 4 * 4 * 4; s++) {
		void *raw[OL_MAX_DRIVES] = {NULL};
		size_t len[OL_MAX_DRIVES] = {0};
		int st[3] = {s % 4, s / 4 % 4, s / 16}, dec, part;

		for (int d = 0; d < 3; d++)
			raw[d] = st[d] ? rec(st[d], &len[d]) : NULL;
		dec = ol_rec_decide(4, 2, (const void *const *)raw, len, 1, 1);
		part = resolved(raw, len);
		found += dec == OL_DECIDE_FOUND;
		absent += dec == OL_DECIDE_ABSENT;
		wait += dec == OL_DECIDE_WAIT;
		for (int v = 0; v <= 4 && dec != OL_DECIDE_WAIT; v++) {
			int full;

			raw[3] = v ? rec(v, &len[3]) : NULL;
			full = resolved(raw, len);
			if (full != (dec == OL_DECIDE_FOUND ? part : 0) ||
			    (dec == OL_DECIDE_FOUND && !part))
				wrong++;
			free(raw[3]);
			raw[3] = NULL;
		}
		for (int d = 0; d < 3; d++)
			free(raw[d]);
	}
	ok(wrong == 0 && found && absent && wait,
	   "decided early (%d found, %d absent; %d wait) = what the full read resolves (%d wrong)",
	   found, absent, wait, wrong);
}

static void
decide(void)
{
	void *raw[OL_MAX_DRIVES] = {NULL};
	size_t len[OL_MAX_DRIVES] = {0};
	const void *const *r = (const void *const *)raw;

	raw[0] = rec(2, &len[0]);
	raw[1] = rec(2, &len[1]);
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_FOUND,
	   "the newest on 2 answers (k), one answered without, one pending: found");
	ok(ol_rec_decide(4, 2, r, len, 2, 2) == OL_DECIDE_WAIT,
	   "the same with 2 (k) pending: they could hold a newer one on k: wait");
	free(raw[1]);
	raw[1] = rec(1, &len[1]);
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_WAIT,
	   "the newest on 1 answer (the other holds its prev): wait");
	raw[2] = rec(3, &len[2]);
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_WAIT,
	   "a newer one on 1 answer only: wait (the pending drive may hold it too)");
	free(raw[2]);
	raw[2] = rec(2, &len[2]);
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_FOUND,
	   "version 2 on 2 drives, version 1 (its prev) on the third: found");
	memset(raw[0], 0, 8); /* garbled */
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_WAIT,
	   "a record that does not decode: wait (the full read takes its drive out)");
	for (int d = 0; d < 3; d++) {
		free(raw[d]);
		raw[d] = NULL;
	}
	ok(ol_rec_decide(4, 2, r, len, 1, 1) == OL_DECIDE_ABSENT,
	   "3 answered without it, one pending: absent");
	ok(ol_rec_decide(4, 2, r, len, 1, 2) == OL_DECIDE_WAIT,
	   "2 answered without it, one failed, one pending: could be on 2: wait");
	decide_matches_resolve();
}

int
main(void)
{
	ewma();
	median();
	slow();
	judge();
	spare();
	hold();
	hedge();
	presence();
	decide();
	tap_done();
}
