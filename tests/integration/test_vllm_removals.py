"""The pool's own removals reach vLLM as BlockRemoved (the EVENTS op, connector_removals):
the vLLM stand-in stores a prompt's chunks in a real openlaked, then the pool evicts them
under a flood of other namespaces' puts (no NVMe tier: nothing to demote to), a client
DELETEs some, or the namespace's DRAM quota drops them; the engine receives BlockRemoved for
exactly those chunks' hashes and never for chunks still stored. With TP 2 the removal of
rank 1's copy alone (rank 0 publishes the events) is the block's removal, reported once. A
pool that does not keep removal events (no WELCOME flag, as an older server) is never sent
the op."""

import os
import time

import pytest

pytest.importorskip("torch")

from vllm_standin import Engine, FakeModel, Request, make_kv_caches, make_vllm_config  # noqa
from vllm_standin.pool import _cleanup, require_pool_binaries  # noqa: E402

from openlake_client import keys as olkeys  # noqa: E402

L, H, D, BS, NB = 2, 2, 8, 16, 64
A = [(i * 37 + 11) % 500 for i in range(96)]
C = [(i * 41 + 5) % 500 for i in range(96)]
WAIT_S = 120  # generous: a loaded 2-core machine


@pytest.fixture
def pools(openlaked):
    made = []

    def make(extra=""):
        require_pool_binaries()
        name = "/olpy-rm-%d-%d" % (os.getpid(), len(made))
        d = openlaked(mode="kv", drives=1,
                      extra='dram_bytes = "16MiB"\nspill_bytes = 0\nshm_name = "%s"\n%s'
                      % (name, extra))
        d.ol_shm_name = name
        made.append(d)
        return d

    yield make
    for d in made:
        _cleanup(d)


def engine(addr, tp=1, **extra):
    ex = {"openlake_nodes": [addr], "openlake_device": "local", "chunk_size": 16,
          "timeout_ms": 5000, "log_interval_s": 0.0, "lookup_inline_ms": 60000,
          "kv_events": True, "events_poll_ms": 50}
    ex.update(extra)
    c = make_vllm_config(model="standin/rm", block_size=BS, num_gpu_blocks=NB, tp=tp,
                         num_layers=L, kv_heads=H, head_size=D, use_mla=False, extra=ex,
                         max_num_batched_tokens=256, prefix_caching=True)
    return Engine(c, lambda r: (make_kv_caches("fa", L, NB, BS, H, D),
                                FakeModel(L, H, D, "fa", r)), NB)


def serve(e, rid, prompt):
    e.add(Request(rid, prompt, max_tokens=2))
    e.run()
    e.scheduler.assert_empty()


def hashes(e, prompt):
    return olkeys.chain_hashes(olkeys.seed_hash(e.sched_conn.ol_identity, ""), prompt, 16)


def kind(ev):
    return type(ev).__name__.replace("_Local", "")


def removed(e):
    return [h for ev in e.scheduler.events if kind(ev) == "BlockRemoved"
            for h in ev.block_hashes]


def stored(e):
    return [h for ev in e.scheduler.events if kind(ev) == "BlockStored"
            for h in ev.block_hashes]


def step_until(e, cond, what):
    """Idle engine steps (each carries the workers' events to the scheduler) until cond."""
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, "no %s within %d s: %r" % (what, WAIT_S,
                                                                       removed(e))
        e.step()
        time.sleep(0.02)


def watch(e):
    return e.workers[0].c._worker.removals


def wait_polls(e, n):
    """Let the worker's watch finish n more polls (so an event would have arrived)."""
    w = watch(e)
    target = w.polls + n
    step_until(e, lambda: w.polls >= target, "%d polls" % n)
    e.step()


def client(addr, ns="vllm"):
    import openlake_client as ol

    return ol.connect([addr], namespace=ns)


def flood(addr, ns, n, size=4096):
    cl = client(addr, ns)
    val = b"\x5a" * size
    for base in range(0, n, 512):
        keys = [(b"flood-%08d" % i).ljust(32, b"\0") for i in range(base, min(n, base + 512))]
        cl.put(keys, [val] * len(keys))
    cl.close()


def held(addr, hs, rank=0):
    cl = client(addr)
    out = cl.exists([olkeys.rank_key(h, rank) for h in hs])
    cl.close()
    return out


def test_evicted_and_deleted_blocks_are_removed(pools):
    p = pools()
    e = engine(p.kv_addr)
    serve(e, "A", A)
    ha = hashes(e, A)
    assert sorted(stored(e)) == sorted(ha) and all(held(p.kv_addr, ha))
    step_until(e, lambda: watch(e).polls >= 1, "first poll")
    # a flood of another namespace's blocks (24 MiB of 4 KiB into 16 MiB, no NVMe tier)
    flood(p.kv_addr, "other-tenant", 6144)
    gone = [h for h, there in zip(ha, held(p.kv_addr, ha)) if not there]
    assert gone == ha, "the flood evicted every chunk of A"
    step_until(e, lambda: sorted(set(removed(e))) == sorted(ha), "BlockRemoved for A")
    assert sorted(removed(e)) == sorted(ha), "one BlockRemoved per chunk"
    # chunks stored after: two are deleted, the others stay and are never reported
    serve(e, "C", C)
    hc = hashes(e, C)
    assert all(held(p.kv_addr, hc))
    cl = client(p.kv_addr)
    from openlake_client import Status

    assert cl.delete([olkeys.rank_key(hc[1], 0), olkeys.rank_key(hc[4], 0)]) == [Status.OK] * 2
    cl.close()
    step_until(e, lambda: hc[1] in removed(e) and hc[4] in removed(e), "BlockRemoved for C")
    wait_polls(e, 3)
    assert sorted(removed(e)) == sorted(ha + [hc[1], hc[4]])
    st = e.merged_stats()
    assert st.get("blocks_removed", 0) == len(ha) + 2 and st.get("events_lost", 0) == 0
    e.shutdown()


def test_namespace_quota_drops_are_removed(pools):
    # quota 0.25 of 16 MiB = 4 MiB for the namespace: its own newer blocks push A out
    p = pools("namespace_quota_frac = 0.25\n")
    e = engine(p.kv_addr)
    serve(e, "A", A)
    ha = hashes(e, A)
    step_until(e, lambda: watch(e).polls >= 1, "first poll")
    flood(p.kv_addr, "vllm", 1536)  # 6 MiB of the same namespace
    assert not any(held(p.kv_addr, ha)), "the quota moved A's chunks out"
    cl = client(p.kv_addr, "vllm")
    import json

    stats = json.dumps(cl.stats())
    cl.close()
    assert '"quota_evictions"' in stats
    step_until(e, lambda: sorted(set(removed(e))) == sorted(ha), "BlockRemoved for A")
    wait_polls(e, 3)
    assert sorted(removed(e)) == sorted(ha)
    e.shutdown()


def test_old_server_is_never_asked(pools):
    # removal_events = 0: the pool does not advertise EVENTS, as one older than the op; it
    # would close the connection (and log it) if it were sent the op
    p = pools("removal_events = 0\n")
    e = engine(p.kv_addr)
    serve(e, "A", A)
    ha = hashes(e, A)
    cl = client(p.kv_addr)
    cl.delete([olkeys.rank_key(h, 0) for h in ha])
    cl.close()
    wait_polls(e, 5)
    assert removed(e) == []
    assert "EVENTS with [kv] removal_events = 0" not in p.log()
    e.shutdown()


def test_lost_events_publish_what_is_left(pools):
    # a ring of 64 events in all (16 per stripe at least); the watch polls once at start, then
    # the test polls it by hand after a burst of more removals than the ring holds
    p = pools("removal_events = 64\n")
    e = engine(p.kv_addr, events_poll_ms=3600000)
    serve(e, "A", A)
    ha = hashes(e, A)
    w = watch(e)
    step_until(e, lambda: w.polls >= 1, "first poll")
    cl = client(p.kv_addr)
    burst = [(b"burst-%08d" % i).ljust(32, b"\0") for i in range(4096)]
    for i in range(0, len(burst), 512):
        cl.put(burst[i:i + 512], [b"x" * 100] * 512)
        cl.delete(burst[i:i + 512])
    cl.delete([olkeys.rank_key(h, 0) for h in ha])  # the newest: kept by every ring
    keys, nxt, lost = cl.events(0, 0)
    assert lost and nxt >= 4096 + len(ha), "the pool's own answer says lost"
    with pytest.raises(IndexError):
        cl.events(1, 0)
    assert cl.events(0, cl.EVENTS_NOW, 0) == ([], nxt, False)
    cl.close()
    assert sorted(w.poll()) == sorted(ha)
    e.step()
    assert sorted(removed(e)) == sorted(ha)
    st = e.merged_stats()
    assert st.get("events_lost", 0) == 1 and st.get("blocks_removed", 0) == len(ha)
    e.shutdown()


@pytest.mark.parametrize("layerwise", [False, True])
def test_another_ranks_copy_removed(pools, layerwise):
    """TP 2: each rank stores its shard of a chunk under its own key (per layer, layerwise);
    only rank 0's worker publishes events. Rank 1's copy evicted (its keys pushed out of
    DRAM by the pool, rank 0's kept recent by reads) or deleted, rank 0's still there: the
    chunk cannot be loaded, BlockRemoved for it, once; its rank 0 copy going later adds none."""
    p = pools()
    e = engine(p.kv_addr, tp=2, layerwise=layerwise)
    serve(e, "A", A)
    ha = hashes(e, A)
    assert sorted(set(stored(e))) == sorted(ha)

    def keys(h, rank):  # the pool objects of chunk h of one rank
        if not layerwise:
            return [olkeys.rank_key(h, rank)]
        return [olkeys.rank_key(olkeys.layer_hash(h, la), rank) for la in range(L)]

    cl = client(p.kv_addr)
    assert all(cl.exists([k for h in ha for r in (0, 1) for k in keys(h, r)]))
    step_until(e, lambda: watch(e).polls >= 1, "first poll")
    # chunk 1: rank 1's copy deleted; chunk 3: one of rank 1's objects deleted
    cl.delete(keys(ha[1], 1) + keys(ha[3], 1)[-1:])
    step_until(e, lambda: ha[1] in removed(e) and ha[3] in removed(e), "BlockRemoved (rank 1)")
    wait_polls(e, 3)
    assert sorted(removed(e)) == sorted([ha[1], ha[3]]), "once each, no other chunk"
    assert all(cl.exists(keys(ha[1], 0) + keys(ha[3], 0))), "rank 0's copies are still there"
    # rank 0's copy of a chunk already reported: nothing more
    cl.delete(keys(ha[1], 0))
    wait_polls(e, 3)
    assert sorted(removed(e)) == sorted([ha[1], ha[3]])
    # the rest of rank 1's objects evicted by a flood of another namespace while rank 0's
    # are read all along (a get refreshes recency): every chunk left is reported, once
    left = [h for h in ha if h not in (ha[1], ha[3])]
    r0 = [k for h in left for k in keys(h, 0)]
    other = client(p.kv_addr, "other-tenant")
    val = b"\x5a" * 4096
    for base in range(0, 6144, 256):
        other.put([(b"flood-%08d" % i).ljust(32, b"\0") for i in range(base, base + 256)],
                  [val] * 256)
        assert None not in cl.get(r0), "rank 0's copies are read"
    other.close()
    r1 = [k for h in left for k in keys(h, 1)]
    assert not any(cl.exists(r1)), "the flood evicted rank 1's copies"
    assert all(cl.exists(r0)), "rank 0's copies stayed (recently read)"
    cl.close()
    step_until(e, lambda: set(left) <= set(removed(e)), "BlockRemoved (rank 1 evicted)")
    wait_polls(e, 3)
    assert sorted(removed(e)) == sorted(ha), "every chunk once"
    assert e.merged_stats().get("blocks_removed", 0) == len(ha)
    e.shutdown()
