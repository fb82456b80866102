"""adaptive_min_hit_tokens: the connector ignores external hits smaller than the measured
break-even of loading against recomputing (openlake_client/connector_cost.py), driven by the
stand-in engine against a real openlaked, and the estimate itself on known costs."""

import math

import pytest

pytest.importorskip("torch")

from test_vllm_connector import SUFFIX, cfg, engine, reference  # noqa: E402
from vllm_standin import Request  # noqa: E402
from vllm_standin.pool import kv_pools, pool  # noqa: E402,F401

from openlake_client.connector_cost import MIN_SAMPLES, PROBE_EVERY, BreakEven  # noqa: E402

PROMPTS = [[(i * 31 + j * 17 + 5) % 500 for j in range(64)] for i in range(10)]


def test_break_even_of_known_costs():
    """Loads cost 2 ms + 1 us per token, recompute 5 us per token: loading pays from 500
    tokens on. Recompute cheaper than loading: no hit pays, but one in PROBE_EVERY is still
    loaded so that the estimate keeps measuring."""
    be = BreakEven(recompute_us_per_token=5.0)
    sizes = [16, 64, 256, 1024, 48, 512]
    for i, n in enumerate(sizes[:MIN_SAMPLES - 1]):
        be.add_load(n, 2.0 + 0.001 * n)
    assert be.threshold() == 0 and be.keep(16), "too few loads: nothing ignored yet"
    for n in sizes[MIN_SAMPLES - 1:] * 3:
        be.add_load(n, 2.0 + 0.001 * n)
    a, b = be.load_model()
    assert a == pytest.approx(2.0, rel=1e-6) and b == pytest.approx(0.001, rel=1e-6)
    assert be.threshold() == pytest.approx(500, rel=1e-6)
    assert not be.keep(496) and be.keep(512)

    slow = BreakEven(recompute_us_per_token=0.5)
    for n in sizes:
        slow.add_load(n, 2.0 + 0.001 * n)
    assert slow.threshold() == math.inf
    kept = [slow.keep(4096) for _ in range(2 * PROBE_EVERY)]
    assert kept.count(True) == 2 and kept[PROBE_EVERY - 1] and kept[-1], kept

    # recompute measured from steps (no configured value): a moving average per token
    m = BreakEven()
    assert m.recompute_ms_per_token() is None
    m.add_step(8, 100.0)  # too few tokens to say anything about prefill
    assert m.recompute_ms_per_token() is None
    for _ in range(50):
        m.add_step(256, 256 * 0.02)
    assert m.recompute_ms_per_token() == pytest.approx(0.02, rel=1e-3)


def _hit(e, rid, prompt):
    e.add(Request(rid, prompt, max_tokens=1))
    e.step()
    ext = e.scheduler.requests[rid].num_external_computed_tokens
    e.run()
    return ext


def test_adaptive_threshold_follows_measured_costs(pool):
    """Engine 1 saves 10 prompts. Engine 2 with recompute said to be nearly free: its first
    MIN_SAMPLES hits are loaded (and measured), after that every hit is below the break-even
    and computed instead (counted in hits_ignored), with the same tokens as a recompute.
    Engine 3 with recompute said to be dear loads every hit; engine 4 measures recompute
    from its own steps."""
    e1 = engine(cfg(pool.kv_addr))
    for i, p in enumerate(PROMPTS):
        e1.add(Request("s%d" % i, p, max_tokens=1))
    e1.run()
    e1.shutdown()

    cheap = engine(cfg(pool.kv_addr, adaptive_min_hit_tokens=True, recompute_us_per_token=1e-6))
    hits = [_hit(cheap, "c%d" % i, p[:48] + SUFFIX) for i, p in enumerate(PROMPTS)]
    assert hits == [48] * MIN_SAMPLES + [0] * (len(PROMPTS) - MIN_SAMPLES), hits
    sched = cheap.sched_conn._sched
    assert sched.cost.threshold() == math.inf and sched.cost.samples == MIN_SAMPLES
    assert cheap.sched_conn._rec.total["hits_ignored"] == len(PROMPTS) - MIN_SAMPLES
    last = PROMPTS[-1][:48] + SUFFIX
    assert cheap.scheduler.finished["c%d" % (len(PROMPTS) - 1)].output_token_ids == reference(
        last, max_tokens=1)
    cheap.shutdown()

    dear = engine(cfg(pool.kv_addr, adaptive_min_hit_tokens=True, recompute_us_per_token=1e9))
    other = [(t + 1) % 500 for t in SUFFIX]  # not what the cheap engine saved after the hit
    hits = [_hit(dear, "d%d" % i, p[:48] + other) for i, p in enumerate(PROMPTS)]
    assert hits == [48] * len(PROMPTS), hits
    assert dear.sched_conn._sched.cost.threshold() < 16
    assert dear.sched_conn._rec.total["hits_ignored"] == 0
    dear.shutdown()

    measured = engine(cfg(pool.kv_addr, adaptive_min_hit_tokens=True))
    for i, p in enumerate(PROMPTS[:3]):
        _hit(measured, "m%d" % i, SUFFIX + p)  # no hit: computed, so the steps are timed
    r = measured.sched_conn._sched.cost.recompute_ms_per_token()
    assert r is not None and r > 0, r
    measured.shutdown()
