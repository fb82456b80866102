"""Connector metrics: counters and latency histograms, picklable, mergeable.

`ConnectorMetrics.data` is a dict of primitives (so it crosses processes inside vLLM's
KVConnectorOutput); `reduce()` gives the one-line summary vLLM logs.
"""

import json
import os
import threading
import time

# upper bounds in milliseconds; the last bucket is +inf
BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
COUNTERS = ("hit_tokens", "miss_tokens", "bytes_loaded", "bytes_saved", "blocks_loaded",
            "blocks_saved", "load_failures", "save_failures", "lookup_failures",
            "corrupt_blocks", "loads", "saves", "lookups", "unkeyable", "resets",
            "hits_ignored", "blocks_removed", "events_lost")
HISTOGRAMS = ("load_ms", "save_ms", "lookup_ms")


OBS_CAP = 4096  # raw observations kept per step and histogram, for Prometheus


def empty_data():
    d = {k: 0 for k in COUNTERS}
    for h in HISTOGRAMS:
        d[h] = [0] * (len(BUCKETS_MS) + 1)
        d[h + "_sum"] = 0.0
        d[h + "_obs"] = []  # this step's raw values (ms); Prometheus records each one
    d["load_cost_obs"] = []  # this step's loads as [tokens, ms] (adaptive_min_hit_tokens)
    return d


def bucket_of(ms):
    for i, b in enumerate(BUCKETS_MS):
        if ms <= b:
            return i
    return len(BUCKETS_MS)


def quantile(hist, q):
    """Upper bound (ms) of the bucket holding quantile q; None when empty."""
    total = sum(hist)
    if total == 0:
        return None
    want = q * total
    acc = 0
    for i, n in enumerate(hist):
        acc += n
        if acc >= want and n:
            return BUCKETS_MS[i] if i < len(BUCKETS_MS) else float("inf")
    return float("inf")


def merge_into(dst, src):
    for k, v in src.items():
        if k.endswith("_obs"):
            cur = dst.setdefault(k, [])
            cur.extend(v[:max(0, OBS_CAP - len(cur))])
        elif isinstance(v, list):
            cur = dst.setdefault(k, [0] * len(v))
            for i, x in enumerate(v):
                cur[i] += x
        elif isinstance(v, (int, float)):
            dst[k] = dst.get(k, 0) + v
    return dst


def reduce_data(d):
    out = {k: d.get(k, 0) for k in COUNTERS}
    for h in HISTOGRAMS:
        hist = d.get(h) or []
        n = sum(hist)
        out[h + "_count"] = n
        out[h + "_avg"] = round(d.get(h + "_sum", 0.0) / n, 3) if n else 0.0
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            v = quantile(hist, q)
            out["%s_%s" % (h, name)] = v if v is not None else 0.0
    looked = out["hit_tokens"] + out["miss_tokens"]
    out["hit_rate"] = round(out["hit_tokens"] / looked, 4) if looked else 0.0
    return out


class Recorder:
    """Thread-safe accumulator; `take()` returns and resets the step's delta."""

    def __init__(self):
        self._lock = threading.Lock()
        self._delta = empty_data()
        self.total = empty_data()

    def add(self, **counts):
        with self._lock:
            for k, v in counts.items():
                self._delta[k] += v
                self.total[k] += v

    def observe(self, hist, ms):
        i = bucket_of(ms)
        with self._lock:
            for d in (self._delta, self.total):
                d[hist][i] += 1
                d[hist + "_sum"] += ms
            obs = self._delta[hist + "_obs"]
            if len(obs) < OBS_CAP:
                obs.append(ms)

    def sample(self, name, value):
        """Append value to this step's list name (an "_obs" list; not kept in total)."""
        with self._lock:
            obs = self._delta[name]
            if len(obs) < OBS_CAP:
                obs.append(value)

    def take(self):
        with self._lock:
            d, self._delta = self._delta, empty_data()
        return d


class RateLimitedLog:
    """Log a failure kind at most once per interval, with the count suppressed since."""

    def __init__(self, logger, interval_s=10.0):
        self.logger = logger
        self.interval = interval_s
        self._last = {}
        self._count = {}

    def __call__(self, kind, msg, *args):
        now = time.monotonic()
        self._count[kind] = self._count.get(kind, 0) + 1
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            return False
        n = self._count.pop(kind)
        self._last[kind] = now
        suffix = " (%d times since last report)" % n if n > 1 else ""
        self.logger.warning(msg + suffix, *args)
        return True


def metrics_dir():
    base = os.environ.get("OPENLAKE_METRICS_DIR")
    if base:
        return base
    run = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(run, "openlake_client-%d" % os.getuid())


class Publisher:
    """Writes the running totals to <metrics_dir>/connector-<tag>-<pid>.json (atomic rename),
    at most once per interval, so `python3 -m openlake_client stats` can show them."""

    def __init__(self, tag, interval_s=1.0, directory=None):
        self.dir = directory or metrics_dir()
        self.path = os.path.join(self.dir, "connector-%s-%d.json" % (tag, os.getpid()))
        self.interval = interval_s
        self._last = 0.0
        self.tag = tag

    def maybe_write(self, total, force=False):
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"tag": self.tag, "pid": os.getpid(), "time": time.time(),
                           "metrics": reduce_data(total)}, f)
            os.replace(tmp, self.path)
        except OSError:
            pass

    def remove(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


def read_published(directory=None):
    """Published connector metrics of live processes: list of dicts."""
    d = directory or metrics_dir()
    out = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for n in names:
        if not (n.startswith("connector-") and n.endswith(".json")):
            continue
        try:
            with open(os.path.join(d, n)) as f:
                rec = json.load(f)
            os.kill(int(rec["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        out.append(rec)
    return out


class PromAdapter:
    """Feeds a step's stats data into Prometheus metrics made from the classes vLLM hands to
    `build_prom_metrics` (prometheus_client's, or its multiprocess/Ray wrappers): one counter
    per COUNTERS entry (`vllm:openlake_<name>`, `_total` added by the client library) and one
    histogram per HISTOGRAMS entry in seconds, each labelled per engine."""

    def __init__(self, counter_cls, histogram_cls, labelnames, per_engine_labelvalues):
        self.counters = {}
        self.hists = {}
        buckets = [b / 1e3 for b in BUCKETS_MS]
        for name in COUNTERS:
            m = counter_cls(name="vllm:openlake_" + name,
                            documentation="OpenLake connector: " + name.replace("_", " "),
                            labelnames=labelnames)
            self.counters[name] = {e: m.labels(*v) for e, v in per_engine_labelvalues.items()}
        for name in HISTOGRAMS:
            m = histogram_cls(name="vllm:openlake_%s_seconds" % name[:-3],
                              documentation="OpenLake connector: %s latency" % name[:-3],
                              labelnames=labelnames, buckets=buckets)
            self.hists[name] = {e: m.labels(*v) for e, v in per_engine_labelvalues.items()}

    def observe(self, data, engine_idx=0):
        for name, per in self.counters.items():
            v = data.get(name, 0)
            if v and engine_idx in per:
                per[engine_idx].inc(v)
        for name, per in self.hists.items():
            if engine_idx in per:
                for ms in data.get(name + "_obs", ()):
                    per[engine_idx].observe(ms / 1e3)
