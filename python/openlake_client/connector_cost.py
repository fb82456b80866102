"""The break-even external hit of the connector (adaptive_min_hit_tokens): below how many
tokens loading from the pool costs more than computing them.

A load of n tokens is modelled as a + b*n ms (a: the fixed cost of a round of loads, b: per
token), fitted by least squares on the loads the workers completed (their (tokens, ms) pairs
cross to the scheduler in the step's connector stats), older loads weighing less (each new
one multiplies the old weights by DECAY). Recompute costs r ms per token: the scheduler's
measured step time per scheduled token of steps that loaded nothing (a moving average), or
the configured recompute_us_per_token. A hit of n tokens pays when a + b*n < r*n, that is
n > a / (r - b); when r <= b no hit pays. Until MIN_SAMPLES loads were measured and r is
known, nothing is ignored beyond min_hit_tokens. A hit ignored because no hit pays is still
taken once in every PROBE_EVERY, so that the estimate follows the pool and the machine.
"""

import math

DECAY = 0.95  # weight of the older loads at each new one
MIN_SAMPLES = 4  # loads measured before the estimate is used
PROBE_EVERY = 16  # when no hit pays, one in this many is still loaded (keeps measuring)
STEP_ALPHA = 0.2  # moving average of the recompute cost per token
MIN_STEP_TOKENS = 16  # steps scheduling fewer tokens say little about prefill


class BreakEven:
    def __init__(self, recompute_us_per_token=0.0):
        self.fixed_r = recompute_us_per_token / 1e3 if recompute_us_per_token > 0 else None
        self.step_r = None  # ms per token, measured
        self.w = self.sn = self.st = self.snn = self.snt = 0.0
        self.samples = 0
        self.skipped = 0

    # -- measurements
    def add_load(self, tokens, ms):
        """A completed load of tokens in ms (one worker's batch)."""
        if tokens <= 0 or ms < 0 or not math.isfinite(ms):
            return
        n, t = float(tokens), float(ms)
        self.w = self.w * DECAY + 1
        self.sn = self.sn * DECAY + n
        self.st = self.st * DECAY + t
        self.snn = self.snn * DECAY + n * n
        self.snt = self.snt * DECAY + n * t
        self.samples += 1

    def add_step(self, tokens, ms):
        """A step that computed tokens (and loaded nothing) in ms."""
        if tokens < MIN_STEP_TOKENS or ms <= 0 or not math.isfinite(ms):
            return
        r = ms / tokens
        self.step_r = r if self.step_r is None else self.step_r + STEP_ALPHA * (r - self.step_r)

    # -- estimates
    def recompute_ms_per_token(self):
        return self.fixed_r if self.fixed_r is not None else self.step_r

    def load_model(self):
        """(a ms, b ms per token) or None before MIN_SAMPLES loads."""
        if self.samples < MIN_SAMPLES or self.w <= 0:
            return None
        mn, mt = self.sn / self.w, self.st / self.w
        var = self.snn / self.w - mn * mn
        if var <= 1e-9 * max(1.0, mn * mn):  # every load the same size: all per token
            return 0.0, mt / mn if mn > 0 else 0.0
        b = (self.snt / self.w - mn * mt) / var
        a = mt - b * mn
        if b < 0:  # bigger loads were faster: noise; call it all fixed cost
            return mt, 0.0
        if a < 0:
            return 0.0, mt / mn
        return a, b

    def threshold(self):
        """The break-even hit in tokens: 0 (every hit pays, or not known yet), a number, or
        math.inf (no hit pays)."""
        m, r = self.load_model(), self.recompute_ms_per_token()
        if m is None or r is None:
            return 0
        a, b = m
        if r <= b:
            return math.inf
        return a / (r - b)

    def keep(self, ext):
        """Whether an external hit of ext tokens is worth loading."""
        th = self.threshold()
        if ext > th:
            return True
        if th == math.inf:  # probe now and then, or the estimate never changes again
            self.skipped += 1
            if self.skipped >= PROBE_EVERY:
                self.skipped = 0
                return True
        return False

    def snapshot(self):
        m = self.load_model()
        return {"load_fixed_ms": m[0] if m else None, "load_ms_per_token": m[1] if m else None,
                "recompute_ms_per_token": self.recompute_ms_per_token(),
                "break_even_tokens": self.threshold(), "load_samples": self.samples}
