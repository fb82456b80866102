/* store/slow.c - the pure decisions of slow-drive ejection (issue 10): a remote drive's call
 * latency as an EWMA, whether it is slow against its peers, whether that has lasted (time
 * online, calls, ticks in a row), whether the set can spare it, and the hold-down that keeps
 * an ejected drive out until its probes have been fast for a while.
 * No clock, no lock, no I/O here: drive.c's monitor calls these with its figures. */
#include <stdint.h>
#include <stdlib.h>

#include "store/store_int.h"

uint64_t
ol_slow_ewma(uint64_t cur, uint64_t sample, uint64_t n)
{
	if (n == 0)
		return sample;
	if (sample >= cur)
		return cur + (sample - cur) / OL_SLOW_EWMA_DIV;
	return cur - (cur - sample) / OL_SLOW_EWMA_DIV;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t
ol_slow_median(uint64_t *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return v[n / 2]; /* the upper of two middles: a higher bar for calling a drive slow */
}

bool
ol_slow_is(const struct ol_slow_cfg *c, uint64_t lat_us, uint64_t peers_us)
{
	if (!c->floor_ms)
		return false;
	if (peers_us < 1)
		peers_us = 1;
	return lat_us >= (uint64_t)c->floor_ms * 1000 && lat_us >= peers_us * c->ratio;
}

bool
ol_slow_judge(const struct ol_slow_cfg *c, struct ol_slow_judge *j, uint64_t now_ms, uint64_t calls,
	      uint64_t lat_us, int npeers, uint64_t peers_us)
{
	bool young = !j->since_ms || now_ms < j->since_ms ||
		     now_ms - j->since_ms < (uint64_t)c->min_s * 1000;

	if (young || calls < OL_SLOW_MIN_CALLS || npeers < 1 || !ol_slow_is(c, lat_us, peers_us)) {
		j->streak = 0;
		return false;
	}
	/* the same average a tick later, with no call between, is no new evidence */
	if (!j->streak || calls > j->calls) {
		if (j->streak < OL_SLOW_TICKS)
			j->streak++;
		j->calls = calls;
	}
	return j->streak >= OL_SLOW_TICKS;
}

bool
ol_slow_may_eject(int online, int w, int k)
{
	return online - 1 >= (w > k ? w : k);
}

uint64_t
ol_slow_next_hold(const struct ol_slow_cfg *c, uint64_t prev_ms, uint64_t back_ms, uint64_t now_ms)
{
	uint64_t base = (uint64_t)c->hold_s * 1000, cap = (uint64_t)c->hold_max_s * 1000;

	if (cap < base)
		cap = base;
	/* the first ejection, or one after a long good stretch online: the base again */
	if (!prev_ms || now_ms - back_ms >= cap * OL_SLOW_CALM_HOLDS)
		return base;
	return prev_ms * 2 < cap ? prev_ms * 2 : cap;
}

bool
ol_slow_may_return(uint64_t good_since_ms, uint64_t now_ms, uint64_t hold_ms)
{
	return good_since_ms && now_ms >= good_since_ms && now_ms - good_since_ms >= hold_ms;
}

uint64_t
ol_hedge_after_us(const struct ol_hedge_cfg *c, uint64_t *done_us, int ndone, int n, int spare)
{
	uint64_t floor_us, m;

	if (!c->floor_ms || spare <= 0 || ndone <= 0 || ndone >= n || n - ndone > spare)
		return UINT64_MAX;
	floor_us = (uint64_t)c->floor_ms * 1000;
	m = ol_slow_median(done_us, ndone) * c->ratio;
	return m > floor_us ? m : floor_us;
}

bool
ol_hedge_lagging(const struct ol_hedge_cfg *c, uint64_t lat_us, uint64_t peers_us)
{
	struct ol_slow_cfg s = {.floor_ms = c->floor_ms, .ratio = c->ratio};

	return ol_slow_is(&s, lat_us, peers_us);
}

int
ol_presence_decide(int votes, int unanswered, int k)
{
	if (votes >= k)
		return OL_DECIDE_FOUND;
	return votes + unanswered < k ? OL_DECIDE_ABSENT : OL_DECIDE_WAIT;
}
