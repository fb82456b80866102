"""The vLLM connector driven by the stand-in engine (vllm_standin) against a real openlaked,
with real KV tensors in every supported layout.

Scenario (reference §5.3): engine 1 serves prompt A (100 tokens) and saves its whole chunks;
a fresh engine 2 with zeroed tensors gets A's first 96 tokens plus a new suffix: the loaded
blocks are bitwise equal, the external hit is exactly what vLLM accepts, only the suffix is
computed, and the generated tokens equal a recompute."""

import logging
import os
import pickle
import subprocess

import pytest

torch = pytest.importorskip("torch")

from vllm_standin import Engine, FakeModel, Request, make_kv_caches, make_vllm_config  # noqa
from vllm_standin.pool import REPO, dead_addr, kv_pools, pool  # noqa: E402,F401

from openlake_client import keys as olkeys  # noqa: E402
from openlake_client.layouts import detect_layout  # noqa: E402

L, H, D, BS, NB = 2, 2, 8, 16, 64
A = [(i * 37 + 11) % 500 for i in range(100)]
SUFFIX = [(i * 53 + 7) % 500 for i in range(34)]
LAYOUTS = ["fa", "fa_hnd", "flashinfer", "bhnc", "mla"]


def cfg(addr, layout="fa", chunk=16, model="standin/m1", tp=1, nb=NB, budget=256,
        prefix_caching=True, **extra):
    # lookup_inline_ms: the scheduler waits for its lookups, so a test knows the hit after
    # one step (test_lookups_never_stall_the_scheduler runs the default, asynchronous way)
    ex = {"openlake_nodes": [addr], "openlake_device": "local", "chunk_size": chunk,
          "timeout_ms": 5000, "log_interval_s": 0.0, "lookup_inline_ms": 60000}
    ex.update(extra)
    return make_vllm_config(model=model, block_size=BS, num_gpu_blocks=nb, tp=tp,
                            num_layers=L, kv_heads=H * tp, head_size=D,
                            use_mla=(layout == "mla"), extra=ex,
                            max_num_batched_tokens=budget, prefix_caching=prefix_caching)


def engine(c, layout="fa", nb=NB, api="newest"):
    return Engine(c, lambda r: (make_kv_caches(layout, L, nb, BS, H, D),
                                FakeModel(L, H, D, layout, r)), nb, api=api)


def serve(e, rid, prompt, max_tokens=3):
    e.add(Request(rid, prompt, max_tokens=max_tokens))
    e.run()
    e.scheduler.assert_empty()
    return e.scheduler.finished[rid].output_token_ids


def blocks_of(e, so, rid):
    for nr in so.scheduled_new_reqs:
        if nr.req_id == rid:
            return list(nr.block_ids[0])
    raise KeyError(rid)


def block_bytes(e, rank, ids):
    """Logical byte image of blocks ids in every layer of one rank."""
    out = []
    kv = e.workers[rank].c._worker.kv
    for t, lay in zip(kv.tensors, kv.layouts):
        for b in ids:
            out.append(t.select(lay.block_dim, b).contiguous().view(torch.uint8).clone())
    return out


def reference(prompt, layout="fa", tp=1, max_tokens=3):
    """The same engine with the pool down: everything recomputed."""
    e = engine(cfg(dead_addr(), layout, tp=tp), layout)
    out = serve(e, "ref", prompt, max_tokens)
    e.shutdown()
    return out


# ---------------------------------------------------------------- no pool needed

def test_keys_are_stable_across_processes():
    ident = olkeys.ModelIdentity(model="m", dtype="bfloat16", layout="kv", block_size=16,
                                 chunk_size=16, tp_size=2)
    seed = olkeys.seed_hash(ident, "salt")
    h = olkeys.chain_hashes(seed, list(range(40)), 16)
    assert len(h) == 2
    k = olkeys.rank_key(h[1], 1).hex()
    code = ("from openlake_client import keys as k;"
            "i=k.ModelIdentity(model='m',dtype='bfloat16',layout='kv',block_size=16,"
            "chunk_size=16,tp_size=2);h=k.chain_hashes(k.seed_hash(i,'salt'),"
            "list(range(40)),16);print(k.rank_key(h[1],1).hex())")
    for seed_env in ("0", "12345", "random"):
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONHASHSEED=seed_env)
        r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.stdout.strip() == k, r.stderr
    # everything that changes the bytes changes the key
    base = olkeys.rank_key(h[1], 1)
    assert olkeys.rank_key(h[1], 0) != base
    for change in ({"model": "m2"}, {"dtype": "float16"}, {"layout": "mla"},
                   {"block_size": 32}, {"tp_size": 4}, {"revision": "r2"}):
        i2 = olkeys.ModelIdentity(**{**ident.__dict__, **change})
        h2 = olkeys.chain_hashes(olkeys.seed_hash(i2, "salt"), list(range(40)), 16)
        assert olkeys.rank_key(h2[1], 1) != base, change
    h3 = olkeys.chain_hashes(olkeys.seed_hash(ident, "other"), list(range(40)), 16)
    assert h3[1] != h[1]
    # a chunk's key depends on the whole prefix
    h4 = olkeys.chain_hashes(seed, [7] + list(range(1, 40)), 16)
    assert h4[1] != h[1] and h4[0] != h[0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_detection(layout):
    kv = make_kv_caches(layout, 1, 10, BS, H, D)
    t = next(iter(kv.values()))
    lay = detect_layout(t, 10, BS)
    assert lay.name == {"fa_hnd": "fa"}.get(layout, layout)
    assert lay.block_dim == (1 if layout in ("fa", "fa_hnd") else 0)
    assert lay.num_blocks == 10 and lay.block_size == BS


def test_config_warnings(caplog):
    from openlake_client.connector_config import ConnectorConfig

    with caplog.at_level(logging.WARNING, "openlake_client.connector"):
        c = ConnectorConfig.from_extra({"openlake_device": "mlx5_0", "chunk_size": 100,
                                        "compress": "exans", "bogus_key": 1, "typo_nodes": 2},
                                       16)
    text = caplog.text
    assert "bogus_key" in text and "typo_nodes" in text
    assert c.device == "tcp" and "RDMA" in text
    assert c.chunk_size == 112 and c.compress == "off" and "exans" in text


def test_block_checksum_is_thread_safe():
    """Loads and saves of several ranks hash blocks in parallel threads."""
    import ctypes
    import threading

    from openlake_client import store

    bufs = [ctypes.create_string_buffer(os.urandom(1 << 18)) for _ in range(4)]
    ranges = [[(ctypes.addressof(b) + o, 1 << 16) for o in range(0, 1 << 18, 1 << 16)]
              for b in bufs]
    keys = [bytes([i]) * 32 for i in range(4)]
    trailers = [store.make_trailer(k, r, 1 << 18, True) for k, r in zip(keys, ranges)]
    bad = []

    def run(i):
        for _ in range(100):
            why = store.check_trailer(trailers[i], keys[i], ranges[i], 1 << 18)
            if why:
                bad.append(why)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad[:3]
    flipped = bytearray(bufs[0].raw)
    ctypes.memmove(bufs[0], bytes([flipped[0] ^ 1]), 1)
    assert store.check_trailer(trailers[0], keys[0], ranges[0], 1 << 18) == "checksum mismatch"
    assert store.check_trailer(trailers[1], keys[0], ranges[1], 1 << 18) != ""


def test_metadata_pickles_and_no_pool_startup():
    """Start-up with the pool down works; lookups miss; the metadata crosses processes."""
    e = engine(cfg(dead_addr()))
    out = serve(e, "A", A)
    assert len(out) == 3
    so = e.schedule_log[0]
    meta = pickle.loads(pickle.dumps(so.kv_connector_metadata))
    assert len(meta.saves) == 1 and len(meta.saves[0].chunks) == 6
    st = e.merged_stats()
    assert st["hit_tokens"] == 0 and st["lookup_failures"] + st["save_failures"] >= 1
    e.shutdown()


def test_with_vllm_installed():
    """With vLLM importable (a stub of its base classes here) the connector subclasses
    KVConnectorBase_V1 (3-argument constructor, every abstract method implemented) and its
    stats subclass vLLM's KVConnectorStats; the stand-in engine runs on it."""
    stub = REPO / "tests" / "integration" / "vllm_standin" / "stub_vllm"
    code = """
import sys
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorStats
import openlake_client.openlake_connector as oc
assert oc.HAVE_VLLM and issubclass(oc.OpenLakeConnector, KVConnectorBase_V1)
assert issubclass(oc.OpenLakeStats, KVConnectorStats)
from vllm.distributed.kv_transfer.kv_connector.v1.base import supports_hma
assert supports_hma(oc.OpenLakeConnector)  # vLLM accepts it with the hybrid manager on
from vllm_standin import Engine, FakeModel, Request, make_kv_caches, make_vllm_config
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); dead = "127.0.0.1:%d" % s.getsockname()[1]
s.close()
c = make_vllm_config(extra={"openlake_nodes": [dead], "chunk_size": 16, "timeout_ms": 200})
e = Engine(c, lambda r: (make_kv_caches("fa", 2, 64, 16, 2, 8), FakeModel(2, 2, 8, "fa", r)), 64)
assert e.sched_conn.stub_base and e.sched_conn.role.name == "SCHEDULER"
e.add(Request("A", list(range(100)), max_tokens=2))
e.run()
e.scheduler.assert_empty()
st = oc.OpenLakeConnector.build_kv_connector_stats({"hit_tokens": 5})
assert isinstance(st, KVConnectorStats) and st.reduce()["hit_tokens"] == 5
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorPromMetrics
assert isinstance(e.prom, KVConnectorPromMetrics)
lab = {"model_name": c.model_config.model, "engine": "0"}
fails = [e.prom_registry.get_sample_value("vllm:openlake_%s_failures_total" % k, lab) or 0
         for k in ("lookup", "save")]
st = e.merged_stats()
assert fails == [st["lookup_failures"], st["save_failures"]] and sum(fails) >= 1, fails
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(stub), str(REPO / "python"), str(REPO / "tests" / "integration")]))
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("layout", LAYOUTS)
def test_iov_table_matches_iovs(layout):
    """The bulk iovec builder of loads (numpy) gives the ranges of iovs() (Python)."""
    from openlake_client.layouts import PagedKV

    p = PagedKV(make_kv_caches(layout, 3, 10, BS, H, D), 10, BS)
    if not p.zero_copy:  # staged layouts load through a staging buffer, not iovecs
        return
    ids = [[3, 0, 9], [9, 1, 2]]
    for layer in (None, 1):
        addr, lens = p.iov_arrays(ids, layer)
        assert [list(zip(a, lens.tolist())) for a in addr.tolist()] == \
            [p.iovs(row, layer) for row in ids]
    assert sum(n for _, n in p.iovs(ids[0])) == 3 * p.block_bytes


# ---------------------------------------------------------------- against the pool

@pytest.mark.parametrize("layout", LAYOUTS)
def test_prefix_reuse_each_layout(pool, layout):
    e1 = engine(cfg(pool.kv_addr, layout), layout)
    serve(e1, "A", A)
    a_ids = blocks_of(e1, e1.schedule_log[0], "A")
    assert e1.merged_stats()["blocks_saved"] == 6
    e2 = engine(cfg(pool.kv_addr, layout), layout)
    w = e2.workers[0].c._worker
    bulk = []
    real = w._get_bulk
    w._get_bulk = lambda kv, ids, keys, layer: bulk.append(len(keys)) or real(kv, ids, keys, layer)
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    so = e2.step()
    # zero-copy layouts load through the bulk op/iovec arrays (one batch: every 16-token
    # chunk), staged ones (HND strides, bhnc) through a staging buffer
    assert w.kv.zero_copy == (layout in ("fa", "flashinfer", "mla"))
    assert bulk == ([96 // 16] if w.kv.zero_copy else [])
    req = e2.scheduler.requests["B"]
    assert req.num_external_computed_tokens == 96
    assert so.num_scheduled_tokens["B"] == len(B) - 96
    assert e2.workers[0].model.positions_computed == len(B) - 96
    b_ids = blocks_of(e2, so, "B")
    for x, y in zip(block_bytes(e1, 0, a_ids[:6]), block_bytes(e2, 0, b_ids[:6])):
        assert torch.equal(x, y)
    e2.run()
    e2.scheduler.assert_empty()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, layout)
    st = e2.merged_stats()
    assert st["hit_tokens"] == 96 and st["blocks_loaded"] == 6 and st["load_failures"] == 0
    e1.shutdown()
    e2.shutdown()



@pytest.mark.parametrize("doc", ["README.md", "docs/vllm.md"])
def test_documented_kv_transfer_config(pool, doc):
    """The quick start's `vllm serve --kv-transfer-config '...'` JSON, read from the document
    itself: vLLM's factory imports kv_connector_module_path and takes kv_connector from it,
    every kv_connector_extra_config key is one the connector knows, and with only
    openlake_nodes pointed at this pool (its defaults otherwise: chunk_size 256, async lookups
    and saves) a second engine is served the first one's prefix."""
    import importlib
    import json
    import re

    from openlake_client.connector_config import DEFAULTS

    text = (REPO / doc).read_text()
    m = re.search(r"--kv-transfer-config '(\{.*?\})'", text, re.S)
    assert m, "%s shows no --kv-transfer-config" % doc
    j = json.loads(m.group(1))
    cls = getattr(importlib.import_module(j["kv_connector_module_path"]), j["kv_connector"])
    extra = j["kv_connector_extra_config"]
    assert set(extra) <= set(DEFAULTS), set(extra) - set(DEFAULTS)
    assert j["kv_role"] == "kv_both"
    extra = dict(extra, openlake_nodes=[pool.kv_addr])
    prompt = [(i * 41 + 3) % 500 for i in range(600)]
    hits = []
    for rid in ("first", "second"):
        c = make_vllm_config(model="doc/" + doc, block_size=BS, num_gpu_blocks=NB,
                             num_layers=L, kv_heads=H, head_size=D, extra=extra,
                             kv_role=j["kv_role"])
        c.kv_transfer_config.kv_connector = j["kv_connector"]
        c.kv_transfer_config.kv_connector_module_path = j["kv_connector_module_path"]
        e = Engine(c, lambda r: (make_kv_caches("fa", L, NB, BS, H, D),
                                 FakeModel(L, H, D, "fa", r)), NB, connector_cls=cls)
        serve(e, rid, prompt, max_tokens=2)
        hits.append(e.scheduler.finished[rid].num_external_computed_tokens)
        e.shutdown()
    assert hits == [0, 512], hits  # two whole 256-token chunks

def test_full_prompt_hit_leaves_one_block(pool):
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr))
    e2.add(Request("B", A[:96], max_tokens=2))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 80
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(A[:96], max_tokens=2)


def test_partial_and_no_hit(pool):
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr))
    P = A[:40] + SUFFIX  # shares 2 whole chunks (32 tokens)
    N = SUFFIX + A  # shares nothing at the start
    e2.add(Request("P", P, max_tokens=2))
    e2.add(Request("N", N, max_tokens=2))
    e2.step()
    assert e2.scheduler.requests["P"].num_external_computed_tokens == 32
    assert e2.scheduler.requests["N"].num_external_computed_tokens == 0
    e2.run()
    assert e2.scheduler.finished["P"].output_token_ids == reference(P, max_tokens=2)
    assert e2.scheduler.finished["N"].output_token_ids == reference(N, max_tokens=2)


def test_local_prefix_hit_is_never_overwritten(pool):
    """Local cache has blocks 0..2; the pool gives the rest of the chunk and more; the
    connector loads only beyond the local hit (chunk 64 = 4 blocks, one partially local)."""
    long_a = [(i * 29 + 3) % 500 for i in range(200)]
    e1 = engine(cfg(pool.kv_addr, chunk=64))
    serve(e1, "A", long_a)
    a_ids = blocks_of(e1, e1.schedule_log[0], "A")
    e2 = engine(cfg(pool.kv_addr, chunk=64))
    serve(e2, "C", long_a[:48] + SUFFIX, max_tokens=1)
    c_ids = blocks_of(e2, e2.schedule_log[0], "C")[:3]
    for t in e2.workers[0].kv.values():  # mark the local blocks: a write would show
        t[0, c_ids] = 0
        t[1, c_ids] = 0
    B = long_a[:192] + SUFFIX
    e2.add(Request("B", B, max_tokens=1))
    so = e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 192 - 48
    b_ids = blocks_of(e2, so, "B")
    assert b_ids[:3] == c_ids
    for x in block_bytes(e2, 0, c_ids):
        assert not x.any()
    for x, y in zip(block_bytes(e1, 0, a_ids[3:12]), block_bytes(e2, 0, b_ids[3:12])):
        assert torch.equal(x, y)
    e2.run()


def test_chunked_prefill_saves_each_chunk_once(pool):
    e1 = engine(cfg(pool.kv_addr, budget=40))
    serve(e1, "A", A)
    saved = [h for so in e1.schedule_log for ss in so.kv_connector_metadata.saves
             for h, _ in ss.chunks]
    assert len(saved) == 6 and len(set(saved)) == 6
    steps_with_saves = sum(1 for so in e1.schedule_log if so.kv_connector_metadata.saves)
    assert steps_with_saves == 3  # 40 + 40 + 20 tokens -> chunks 0-1, 2-4, 5
    e2 = engine(cfg(pool.kv_addr, budget=40))
    B = A[:96] + SUFFIX
    assert serve(e2, "B", B) == reference(B)
    assert e2.merged_stats()["hit_tokens"] == 96


@pytest.mark.parametrize("async_save", [False, True])
def test_request_aborted_mid_prefill(pool, async_save):
    """A request that finishes early (aborted after 40 of 100 prompt tokens) keeps what it
    saved, leaks nothing, and its saved chunks serve the next engine."""
    e1 = engine(cfg(pool.kv_addr, budget=40, async_save=async_save))
    e1.add(Request("A", A, max_tokens=3))
    e1.step()
    e1.scheduler.abort("A")
    e1.run()
    e1.scheduler.assert_empty()
    assert ("A" in e1.scheduler.delayed_ever) == async_save
    assert not e1.sched_conn._sched._reqs  # the connector dropped its state
    e2 = engine(cfg(pool.kv_addr))
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 32
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)


@pytest.mark.parametrize("api", ["newest", "classic"])
@pytest.mark.parametrize("async_save", [False, True])
def test_preemption_and_resume(pool, async_save, api):
    """12 blocks force a preemption; the preempted request resumes from the pool (local
    prefix caching off, so every resumed token comes from the pool or is recomputed)."""
    X = [(i * 13 + 5) % 500 for i in range(80)]
    Y = [(i * 17 + 9) % 500 for i in range(80)]
    e = engine(cfg(pool.kv_addr, nb=12, prefix_caching=False, async_save=async_save), nb=12,
               api=api)
    e.add(Request("X", X, max_tokens=40))
    e.add(Request("Y", Y, max_tokens=40))
    e.run()
    e.scheduler.assert_empty()
    fin = e.scheduler.finished
    assert fin["X"].num_preemptions == 0 and fin["Y"].num_preemptions == 1
    resumed = [so for so in e.schedule_log if "Y" in so.scheduled_cached_reqs.resumed_req_ids]
    assert len(resumed) == 1
    so = resumed[0]
    loads = [ls for ls in so.kv_connector_metadata.loads if ls.req_id == "Y"]
    assert len(loads) == 1 and len(loads[0].chunks) == 5  # the whole prompt from the pool
    i = so.scheduled_cached_reqs.req_ids.index("Y")
    assert so.scheduled_cached_reqs.num_computed_tokens[i] == 80
    assert e.merged_stats()["hit_tokens"] == 80
    assert fin["X"].output_token_ids == reference(X, max_tokens=40)
    assert fin["Y"].output_token_ids == reference(Y, max_tokens=40)


def test_async_save_delays_free(pool):
    """async_save: request_finished keeps the blocks until every rank reported the request
    in finished_sending; nothing leaks; the saved chunks serve the next engine."""
    e1 = engine(cfg(pool.kv_addr, tp=2, async_save=True))
    serve(e1, "A", A)  # assert_empty: the delayed blocks came back
    assert "A" in e1.scheduler.delayed_ever
    e1.shutdown()
    e2 = engine(cfg(pool.kv_addr, tp=2))
    B = A[:96] + SUFFIX
    assert serve(e2, "B", B) == reference(B, tp=2)
    assert e2.merged_stats()["hit_tokens"] == 96
    e3 = engine(cfg(pool.kv_addr, async_save=False))  # sync saves never delay a free
    serve(e3, "C", SUFFIX + A)
    assert not e3.scheduler.delayed_ever


@pytest.mark.parametrize("api", ["newest", "classic"])
@pytest.mark.parametrize("corrupt", [False, True])
def test_async_load(pool, corrupt, api):
    """load_async: (n, True); the request waits in WAITING_FOR_REMOTE_KVS until every rank
    reports it in finished_recving, then computes only the rest; a bad chunk caps it. Under
    the newest call order (get_transfer_results) a bad chunk also reports the request in
    failed_recving; under the classic one (get_finished) the invalid blocks alone do."""
    import openlake_client as ol
    from vllm_standin.scheduler import RequestStatus

    e1 = engine(cfg(pool.kv_addr, tp=2))
    serve(e1, "A", A)
    a_ids = blocks_of(e1, e1.schedule_log[0], "A")
    if corrupt:
        h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
        cl = ol.connect([pool.kv_addr], namespace="vllm")
        k = olkeys.rank_key(h[4], 1)
        v = bytearray(cl.get([k])[0])
        v[5] ^= 0xFF
        cl.delete([k])
        cl.put([k], [bytes(v)])
        cl.close()
    e2 = engine(cfg(pool.kv_addr, tp=2, load_async=True), api=api)
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    so = e2.step()
    req = e2.scheduler.requests["B"]
    assert so.total_num_scheduled_tokens == 0 and req.num_external_computed_tokens == 96
    assert req.status in (RequestStatus.WAITING_FOR_REMOTE_KVS, RequestStatus.WAITING)
    while "B" not in {nr.req_id for s in e2.schedule_log for nr in s.scheduled_new_reqs}:
        so = e2.step()
    nr = [x for x in so.scheduled_new_reqs if x.req_id == "B"][0]
    assert nr.num_computed_tokens == (64 if corrupt else 96)
    assert so.num_scheduled_tokens["B"] == len(B) - nr.num_computed_tokens
    b_ids = list(nr.block_ids[0])
    good = 4 if corrupt else 6
    for rank in (0, 1):
        for x, y in zip(block_bytes(e1, rank, a_ids[:good]), block_bytes(e2, rank, b_ids[:good])):
            assert torch.equal(x, y)
    e2.run()
    e2.scheduler.assert_empty()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, tp=2)
    assert e2.merged_stats()["corrupt_blocks"] == (1 if corrupt else 0)
    assert e2.scheduler.failed_recving == ({"B"} if corrupt and api == "newest" else set())


def test_tp2_hit_needs_every_rank(pool):
    import openlake_client as ol

    c1 = cfg(pool.kv_addr, tp=2)
    e1 = engine(c1)
    serve(e1, "A", A)
    a_ids = blocks_of(e1, e1.schedule_log[0], "A")
    # rank 1 loses chunk 3
    ident = e1.sched_conn.ol_identity
    h = olkeys.chain_hashes(olkeys.seed_hash(ident, ""), A, 16)
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    assert cl.delete([olkeys.rank_key(h[3], 1)]) == [ol.Status.OK]
    assert cl.exists([olkeys.rank_key(h[3], 0)]) == [True]
    cl.close()
    e2 = engine(cfg(pool.kv_addr, tp=2))
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    so = e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 48
    b_ids = blocks_of(e2, so, "B")
    for rank in (0, 1):  # each rank got its own shard
        for x, y in zip(block_bytes(e1, rank, a_ids[:3]), block_bytes(e2, rank, b_ids[:3])):
            assert torch.equal(x, y)
    assert not torch.equal(block_bytes(e2, 0, b_ids[:1])[0], block_bytes(e2, 1, b_ids[:1])[0])
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, tp=2)


@pytest.mark.parametrize("how", ["garbage", "short"])
def test_corrupt_block_is_recomputed(pool, how):
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    ident = e1.sched_conn.ol_identity
    h = olkeys.chain_hashes(olkeys.seed_hash(ident, ""), A, 16)
    key = olkeys.rank_key(h[2], 0)
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    good = cl.get([key])[0]
    bad = bytearray(good)
    if how == "garbage":
        bad[100] ^= 0x40  # one flipped bit in the payload
    else:
        bad = bad[:-64]
    assert cl.delete([key]) == [ol.Status.OK]
    assert cl.put([key], [bytes(bad)]) == [ol.Status.OK]
    cl.close()
    e2 = engine(cfg(pool.kv_addr))
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    so = e2.step()
    b_ids = blocks_of(e2, so, "B")
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 96
    assert b_ids[2] in e2.invalid_seen and b_ids[1] not in e2.invalid_seen
    assert e2.scheduler.requests["B"].num_computed_tokens == 32  # truncated, recomputed
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    st = e2.merged_stats()
    assert st["load_failures"] == 1 and st["corrupt_blocks"] == (1 if how == "garbage" else 0)


def test_store_killed_mid_run(pool):
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr))
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    e2.step(before_execute=lambda so: pool.kill9())  # after the lookup, before the load
    assert e2.scheduler.requests["B"].num_computed_tokens == 0
    assert e2.invalid_seen
    e2.add(Request("B2", SUFFIX + A, max_tokens=3))  # new work while the pool is down
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    assert e2.scheduler.finished["B2"].output_token_ids == reference(SUFFIX + A)
    st = e2.merged_stats()
    assert st["load_failures"] >= 1
    pool.start()  # the pool comes back: the connector uses it again
    e3 = engine(cfg(pool.kv_addr))
    serve(e3, "C", A)
    assert e3.merged_stats()["blocks_saved"] + e3.merged_stats()["hit_tokens"] > 0


def test_two_nodes_one_killed(kv_pools):
    """Chunks spread over two nodes; with one node gone the hit stops at its first chunk."""
    import openlake_client as ol

    # Placement hashes each node's address (random ports here), so a pair can put all six
    # chunks on one node (p = 2/64); such a pair cannot show the cut, so start another one.
    for attempt in range(10):
        n1, n2 = kv_pools(), kv_pools()
        nodes = [n1.kv_addr, n2.kv_addr]
        e1 = engine(cfg(nodes[0], openlake_nodes=nodes))
        serve(e1, "A", A)
        ident = e1.sched_conn.ol_identity
        keys = [olkeys.rank_key(h, 0)
                for h in olkeys.chain_hashes(olkeys.seed_hash(ident, ""), A, 16)]
        on1 = []
        for addr in nodes:
            c = ol.connect([addr], namespace="vllm")
            on1.append(c.exists(keys))
            c.close()
        assert all(a != b for a, b in zip(*on1)), on1  # every chunk on exactly one node
        if any(on1[0]) and any(on1[1]):
            break
        n1.stop()
        n2.stop()
    assert any(on1[0]) and any(on1[1]), "ten node pairs all placed every chunk on one node"
    n2.kill9()
    first_missing = on1[0].index(False)
    e2 = engine(cfg(nodes[0], openlake_nodes=nodes))
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 16 * first_missing
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)


def test_prometheus_metrics(pool):
    """build_prom_metrics: vLLM's /metrics gets the same counts as the stats object, and one
    latency observation per load and save."""
    pytest.importorskip("prometheus_client")
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr))
    serve(e2, "B", A[:96] + SUFFIX)
    for e in (e1, e2):
        st = e.merged_stats()
        lab = {"model_name": "standin/m1", "engine": "0"}
        val = lambda n: e.prom_registry.get_sample_value(n, lab)  # noqa: E731
        for c in ("hit_tokens", "miss_tokens", "bytes_loaded", "bytes_saved", "blocks_saved",
                  "load_failures"):
            assert (val("vllm:openlake_%s_total" % c) or 0) == st[c], c
        assert (val("vllm:openlake_load_seconds_count") or 0) == st["load_ms_count"]
        assert (val("vllm:openlake_save_seconds_count") or 0) == st["save_ms_count"]
    assert st["hit_tokens"] == 96 and st["load_ms_count"] >= 1
    assert val("vllm:openlake_load_seconds_sum") > 0


def test_only_publishable_blocks_are_saved(pool):
    """Newest vLLM marks how many block hashes of a request may be shared; none past them."""
    e1 = engine(cfg(pool.kv_addr))
    r = Request("A", A, max_tokens=3)
    r.num_publishable_block_hashes = 3
    e1.add(r)
    e1.run()
    assert e1.merged_stats()["blocks_saved"] == 3
    e2 = engine(cfg(pool.kv_addr))
    e2.add(Request("B", A[:96] + SUFFIX, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 48
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(A[:96] + SUFFIX)


def test_two_models_and_salts_never_cross_hit(pool):
    e1 = engine(cfg(pool.kv_addr, model="org/model-one"))
    serve(e1, "A", A)
    B = A[:96] + SUFFIX
    for c in (cfg(pool.kv_addr, model="org/model-two"),
              cfg(pool.kv_addr, model="org/model-one", cache_salt="tenant-b"),
              cfg(pool.kv_addr, model="org/model-one", model_revision="v2")):
        e2 = engine(c)
        e2.add(Request("B", B, max_tokens=1))
        e2.step()
        assert e2.scheduler.requests["B"].num_external_computed_tokens == 0
        e2.run()
    e3 = engine(cfg(pool.kv_addr, model="org/model-one"))
    e3.add(Request("B", B, max_tokens=1))
    e3.step()
    assert e3.scheduler.requests["B"].num_external_computed_tokens == 96


def test_layouts_share_bytes(pool):
    """FlashAttention and FlashInfer tensors of the same model store the same bytes."""
    e1 = engine(cfg(pool.kv_addr, "fa"), "fa")
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr, "flashinfer"), "flashinfer")
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 96
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, "flashinfer")


def test_connector_metrics_in_cli(pool, tmp_path):
    e1 = engine(cfg(pool.kv_addr, metrics_dir=str(tmp_path), metrics_interval_s=0))
    serve(e1, "A", A)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    r = subprocess.run(["/usr/bin/python3", "-m", "openlake_client", "stats", "--nodes",
                        pool.kv_addr, "--metrics-dir", str(tmp_path), "--timeout-ms", "15000"],
                       env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "connector scheduler" in r.stdout and "connector worker0" in r.stdout
    e1.shutdown()


def test_token_from_extra_config_and_env(openlaked, monkeypatch):
    """A pool with [[kv.tokens]]: the connector passes "openlake_token" (or
    $OPENLAKE_KV_TOKEN); without it the pool refuses the connector, which recomputes."""
    from vllm_standin.pool import require_pool_binaries

    require_pool_binaries()
    shm = "/olpy-test-tok-%d" % os.getpid()
    d = openlaked(mode="kv", drives=1,
                  extra='dram_bytes = "256MiB"\nshm_name = "%s"\n'
                        '[[kv.tokens]]\ntoken = "tok-vllm"\nnamespaces = ["vllm"]\n' % shm)
    monkeypatch.delenv("OPENLAKE_KV_TOKEN", raising=False)
    e1 = engine(cfg(d.kv_addr, openlake_token="tok-vllm"))
    serve(e1, "A", A)
    assert e1.merged_stats()["blocks_saved"] == 6
    B = A[:96] + SUFFIX
    e2 = engine(cfg(d.kv_addr))  # no token
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 0
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    monkeypatch.setenv("OPENLAKE_KV_TOKEN", "tok-vllm")
    e3 = engine(cfg(d.kv_addr))
    e3.add(Request("C", B, max_tokens=3))
    e3.step()
    assert e3.scheduler.requests["C"].num_external_computed_tokens == 96
    e3.run()
    assert e3.scheduler.finished["C"].output_token_ids == reference(B)
    for e in (e1, e2, e3):
        e.shutdown()


# ---------------------------------------------------------------- what the keys must cover

def _req(rid, prompt, lora=None, mm=(), embeds=None, **kw):
    from vllm_standin import LoRARequest, MultiModalFeatureSpec, PlaceholderRange
    return Request(rid, prompt, max_tokens=1,
                   lora_request=LoRARequest(lora) if lora else None,
                   mm_features=[MultiModalFeatureSpec(i, PlaceholderRange(o, n))
                                for i, o, n in mm],
                   prompt_embeds=embeds, **kw)


def _ext(e, req):
    e.add(req)
    e.step()
    ext = e.scheduler.requests[req.request_id].num_external_computed_tokens
    e.run()
    return ext


def test_adapters_images_embeddings_never_share_kv(pool):
    """Two requests with the same tokens share KV only up to the first chunk where their
    adapter, images (identifier, place) or prompt embeddings differ; what cannot be keyed is
    never looked up nor saved."""
    g = torch.Generator().manual_seed(5)
    emb_a = torch.randn(100, 8, generator=g, dtype=torch.bfloat16)
    B = A[:96] + SUFFIX
    emb_b = torch.cat([emb_a[:96], torch.randn(34, 8, generator=g, dtype=torch.bfloat16)])
    base = dict(lora="adapter-1", mm=[("img-x", 20, 8)], embeds=emb_a)
    serve_b = dict(base, embeds=emb_b)
    emb_changed = emb_b.clone()
    emb_changed[3, 0] += 1
    cases = [
        ({"lora": "adapter-2"}, 0),
        ({"lora": None}, 0),
        ({"mm": [("img-y", 20, 8)]}, 16),   # the image is in chunk 1: chunk 0 is shared
        ({"mm": [("img-x", 40, 8)]}, 16),   # same image, another place
        ({"mm": []}, 16),
        ({"embeds": emb_changed}, 0),        # row 3 is in chunk 0
        ({"embeds": None}, 0),
    ]
    for i, (change, want) in enumerate(cases + [({}, 96)]):  # the same inputs do share
        salt = "case-%d" % i  # each case alone: a variant saves blocks too
        e1 = engine(cfg(pool.kv_addr, cache_salt=salt))
        e1.add(_req("A", A, **base))
        e1.run()
        e2 = engine(cfg(pool.kv_addr, cache_salt=salt))
        got = _ext(e2, _req("B%d" % i, B, **dict(serve_b, **change)))
        assert got == want, (change, got)
        e1.shutdown()
        e2.shutdown()
    # an image with no identifier cannot be keyed: no lookup, no save
    e4 = engine(cfg(pool.kv_addr))
    from vllm_standin import MultiModalFeatureSpec, PlaceholderRange
    bad = _req("C", A[:64] + SUFFIX)
    bad.mm_features = [MultiModalFeatureSpec("", PlaceholderRange(4, 4))]
    assert _ext(e4, bad) == 0
    assert e4.sched_conn.metrics_totals()["unkeyable"] == 1
    assert e4.workers[0].c.metrics_totals()["blocks_saved"] == 0
    # skip_reading_prefix_cache (prompt logprobs): no load, but the blocks are saved
    e5 = engine(cfg(pool.kv_addr))
    e1 = engine(cfg(pool.kv_addr))
    e1.add(_req("A", A, **base))
    e1.run()
    assert _ext(e5, _req("D", B, skip_reading_prefix_cache=True, **serve_b)) == 0
    assert e5.workers[0].c.metrics_totals()["blocks_saved"] > 0
    for e in (e1, e4, e5):
        e.shutdown()


def test_reset_cache_invalidates_for_every_engine(pool):
    """reset_cache (after a weight update) makes every block stored before it a miss, for
    this engine at once, for an engine started later, and for one already running within
    its refresh interval; blocks stored after it hit again."""
    from conftest import wait_for
    P = [(i * 29 + 3) % 500 for i in range(70)]
    old = engine(cfg(pool.kv_addr))  # runs across the reset without resetting itself
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "P", P)
    serve(e1, "A", A)
    assert _ext(old, Request("P1", P, max_tokens=1)) == 64
    assert e1.scheduler.reset_prefix_cache(reset_connector=True) is True
    assert _ext(e1, Request("P2", P, max_tokens=1)) == 0
    B = A[:96] + SUFFIX
    late = engine(cfg(pool.kv_addr))  # started after the reset
    assert _ext(late, Request("B1", B, max_tokens=1)) == 0  # A's blocks are from before
    assert _ext(late, Request("P4", P, max_tokens=1)) == 64  # P2 saved them again
    n = iter(range(1000000))
    wait_for(lambda: _ext(old, Request("B-old-%d" % next(n), B, max_tokens=1)) == 0
             or None, timeout=60, what="the running engine to adopt the new epoch")
    for e in (old, e1, late):
        e.shutdown()


def test_lookups_never_stall_the_scheduler(pool):
    """Lookups run in the background (the default): while the pool does not answer at all
    (SIGSTOP), a scheduler step still returns at once and the request waits ("ask later");
    when the pool answers it gets its hit. A request whose lookup takes longer than
    lookup_wait_ms is computed without the pool."""
    import signal
    import threading

    from conftest import wait_for
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    B = A[:96] + SUFFIX
    e2 = engine(cfg(pool.kv_addr, lookup_inline_ms=0, timeout_ms=120000))
    e3 = engine(cfg(pool.kv_addr, lookup_inline_ms=0, lookup_wait_ms=300, timeout_ms=120000))
    os.kill(pool.proc.pid, signal.SIGSTOP)
    try:
        e2.add(Request("B", B, max_tokens=1))
        t = threading.Thread(target=e2.step)
        t.start()
        t.join(timeout=60)  # a blocking lookup would wait the whole 120 s timeout
        assert not t.is_alive(), "the scheduler step waited on a frozen pool"
        assert e2.scheduler.requests["B"].num_computed_tokens == 0
        assert "B" in {r.request_id for r in e2.scheduler.waiting}
        # lookup_wait_ms: e3's request gives up on the frozen pool and is computed
        C = [(i * 41 + 5) % 500 for i in range(60)]  # not B: its saves must not change B's hit
        e3.add(Request("C", C, max_tokens=1))
        wait_for(lambda: e3.step() and e3.scheduler.requests["C"].num_computed_tokens > 0,
                 timeout=60, what="the request to be computed without the pool")
        assert e3.scheduler.requests["C"].num_external_computed_tokens == 0
    finally:
        os.kill(pool.proc.pid, signal.SIGCONT)
    e2.run()
    assert e2.scheduler.finished["B"].num_external_computed_tokens == 96
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, max_tokens=1)
    for e in (e1, e2, e3):
        e.shutdown()


def test_tls_from_extra_config(openlaked, tmp_path):
    """A pool whose KV port speaks TLS ([kv_tls]): the connector with "openlake_tls" and
    "openlake_ca_file" saves and loads blocks; one without TLS cannot reach it and recomputes,
    with the same output."""
    import shutil as _shutil

    from test_tls import install, make_ca, make_cert
    from vllm_standin.pool import require_pool_binaries

    require_pool_binaries()
    if not _shutil.which("openssl"):
        pytest.skip("no openssl CLI")
    ca = make_ca(tmp_path)
    pem, key = make_cert(tmp_path, "kvtls", 0x4004)
    install(pem, key, tmp_path / "live.pem", tmp_path / "live.key")
    shm = "/olpy-test-tls-%d" % os.getpid()
    d = openlaked(mode="kv", drives=1,
                  extra='dram_bytes = "256MiB"\nshm_name = "%s"\n[kv_tls]\ncert_path = "%s"\n'
                        'key_path = "%s"\n' % (shm, tmp_path / "live.pem", tmp_path / "live.key"))
    tls = dict(openlake_tls=True, openlake_ca_file=str(ca), openlake_device="tcp")
    e1 = engine(cfg(d.kv_addr, **tls))
    serve(e1, "A", A)
    assert e1.merged_stats()["blocks_saved"] == 6
    B = A[:96] + SUFFIX
    e2 = engine(cfg(d.kv_addr, openlake_device="tcp"))  # plaintext: refused, recomputes
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 0
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    e3 = engine(cfg(d.kv_addr, **tls))
    e3.add(Request("C", B, max_tokens=3))
    e3.step()
    assert e3.scheduler.requests["C"].num_external_computed_tokens == 96
    e3.run()
    assert e3.scheduler.finished["C"].output_token_ids == reference(B)
    for e in (e1, e2, e3):
        e.shutdown()


def test_eviction_between_lookup_and_load_cannot_fail_a_request(openlaked):
    """A pool with a small DRAM tier and no NVMe tier; engine 1 stores A's chunks. Engine 2's
    scheduler reports a hit for B (it leases the chunks); before its worker loads them, another
    client floods the pool with several times its DRAM. With the lease the load still gets every
    chunk (no invalid block, nothing recomputed); with lease_ms=0 the same flood evicts them
    and the load fails (recomputed under the stand-in's recompute policy; vLLM's default
    policy would abort the request)."""
    import hashlib

    import openlake_client as ol
    from test_kv_security import ready

    from vllm_standin.pool import require_pool_binaries

    require_pool_binaries()
    d = ready(openlaked(mode="kv", drives=1, extra='dram_bytes = "16MiB"\nspill_bytes = 0\n'))
    e1 = engine(cfg(d.kv_addr))
    serve(e1, "A", A)
    ident = e1.sched_conn.ol_identity
    keys = [olkeys.rank_key(h, 0) for h in olkeys.chain_hashes(olkeys.seed_hash(ident, ""),
                                                                A, 16)]
    cl = ol.connect([d.kv_addr], namespace="vllm", timeout_ms=30000)
    st, lens = cl.exists_len(keys)
    assert all(s == ol.Status.OK for s in st)
    size = lens[0]
    for rnd, lease_ms in enumerate((30000, 0)):
        B = A[:96] + [(i * 61 + 13 * rnd + 5) % 500 for i in range(34)]
        def flood(so, rnd=rnd):
            if not so.kv_connector_metadata.loads:
                return
            n = (64 << 20) // 4096  # blocks of the chunks' size class: 64 MiB of them
            for i in range(0, n, 512):
                cl.put([hashlib.sha256(b"flood %d %d" % (rnd, j)).digest()
                        for j in range(i, i + 512)], [b"f" * size] * 512)

        e2 = engine(cfg(d.kv_addr, lease_ms=lease_ms))
        e2.add(Request("B%d" % rnd, B, max_tokens=3))
        so = e2.step(before_execute=flood)
        assert so.kv_connector_metadata.loads, "no hit reported"
        assert e2.scheduler.requests["B%d" % rnd].num_external_computed_tokens == 96
        first = e2.workers[0].model.positions_computed
        e2.run()
        st = e2.merged_stats()
        if lease_ms:
            assert not e2.invalid_seen and st["load_failures"] == 0
            assert first == len(B) - 96
            # the load ended the leases: the next flood may evict the chunks again
            assert [int(s) for s in cl.lease(keys[:6], 0)] == [2] * 6
            e2.shutdown()
        else:
            assert e2.invalid_seen and st["load_failures"] >= 1
            assert e2.workers[0].model.positions_computed > len(B) - 96 + 2  # recomputed
            e2.shutdown()
        assert e2.scheduler.finished["B%d" % rnd].output_token_ids == reference(B)
    cl.close()
    e1.shutdown()


@pytest.mark.parametrize("api", ["newest", "classic"])
def test_kv_events_for_every_store_and_removal(pool, api):
    """kv_events on: take_events gives a BlockStored for every chunk stored (hash, parent,
    token ids), a BlockRemoved for a chunk a load found gone, AllBlocksCleared on reset_cache.
    Events come from the workers (what the pool really holds) through the newest mixin's
    get_kv_connector_kv_cache_events; the classic mixin does not carry them: none arrive."""
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr, kv_events=True), api=api)
    serve(e1, "A", A)
    h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
    stored = [ev for ev in e1.scheduler.events if _kind(ev) == "BlockStored"]
    if api == "classic":
        assert e1.scheduler.events == []
        e1.shutdown()
        return
    assert len(stored) == 6 == len(h)
    for c, ev in enumerate(stored):
        assert ev.block_hashes == [h[c]]
        assert ev.parent_block_hash == (h[c - 1] if c else None)
        assert ev.token_ids == A[c * 16:(c + 1) * 16] and ev.block_size == 16
        assert ev.medium == "STORAGE"
    # a chunk the pool lost: the load misses it and says so
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    assert cl.delete([olkeys.rank_key(h[3], 0)]) == [ol.Status.OK]
    cl.close()
    e2 = engine(cfg(pool.kv_addr, kv_events=True), api=api)
    B = A[:96] + SUFFIX
    e2.add(Request("B", B, max_tokens=2))
    e2.step(before_execute=lambda so: _drop_chunk(pool, h[2]))
    e2.run()
    removed = [ev for ev in e2.scheduler.events if _kind(ev) == "BlockRemoved"]
    assert [ev.block_hashes for ev in removed] == [[h[2]]]
    # the chunks recomputed after the failed load are stored again (and announced); no
    # BlockStored names a chunk the pool does not hold
    stored2 = [ev.block_hashes[0] for ev in e2.scheduler.events
               if _kind(ev) == "BlockStored"]
    assert h[2] in stored2 and h[3] in stored2
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    held = cl.exists([olkeys.rank_key(x, 0) for x in stored2 + h])
    cl.close()
    assert all(held)
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, max_tokens=2)
    n = len(e2.scheduler.events)
    assert e2.scheduler.reset_prefix_cache(reset_connector=True)
    e2.step()
    assert [_kind(ev) for ev in e2.scheduler.events[n:]] == ["AllBlocksCleared"]
    e1.shutdown()
    e2.shutdown()


def _kind(ev):
    """vLLM's event class name (ours, without vLLM, is _Local<name>)."""
    return type(ev).__name__.replace("_Local", "")


def _drop_chunk(pool, h):
    import openlake_client as ol

    cl = ol.connect([pool.kv_addr], namespace="vllm")
    cl.lease([olkeys.rank_key(h, 0)], 0)  # the scheduler's lease would keep it
    cl.delete([olkeys.rank_key(h, 0)])
    cl.close()


# ---------------------------------------------------------------- hybrid models (SupportsHMA)

def _hybrid(addr, groups, **extra):
    from vllm_standin.hybrid import HybridEngine

    c = cfg(addr, prefix_caching=False, budget=4096, async_save=False, **extra)
    return HybridEngine(c, groups, NB, H, D)


def _hybrid_ref(groups, prompt, max_tokens=2):
    e = _hybrid(dead_addr(), groups)
    from vllm_standin.hybrid import make_request

    e.add(make_request("ref", prompt, max_tokens))
    e.run()
    e.shutdown()
    return e.finished["ref"].output_token_ids


def _window_groups(w=48):
    from vllm_standin.hybrid import FullAttentionSpec, SlidingWindowSpec

    return [(FullAttentionSpec(BS), 1), (SlidingWindowSpec(BS, w), 1)]


def test_hybrid_window_loads_exactly_the_window(pool):
    """Full attention + a 48-token sliding window: the hit covers every full-attention chunk
    of the prefix and only the window's chunks (3..5 of a 96-token prefix); the window's
    older blocks stay null, nothing else is written; the output equals a recompute."""
    from vllm_standin.hybrid import make_request
    groups = _window_groups()
    e1 = _hybrid(pool.kv_addr, groups)
    e1.add(make_request("A", A))
    e1.run()
    e2 = _hybrid(pool.kv_addr, groups)
    B = A[:96] + SUFFIX
    e2.add(make_request("B", B))
    so = e2.step()
    assert so.scheduled_new_reqs[0].num_computed_tokens == 96
    loads = so.kv_connector_metadata.loads
    assert len(loads) == 1
    got = [(g, ids) for _h, ids, _skip, g in loads[0].chunks]
    tables = so.scheduled_new_reqs[0].block_ids
    want = [(0, tuple(tables[0][c:c + 1])) for c in range(6)]
    want += [(1, tuple(tables[1][c:c + 1])) for c in range(3, 6)]
    assert sorted(got) == sorted(want)
    assert tables[1][:3] == [0, 0, 0]  # out of the window: null blocks, never loaded
    a_tab = e1.schedule_log[0].scheduled_new_reqs[0].block_ids
    names = list(e1.kv)
    for g, name in enumerate(names):
        first = 0 if g == 0 else 3
        for c in range(first, 6):
            assert torch.equal(e1.kv[name][:, a_tab[g][c]], e2.kv[name][:, tables[g][c]])
    assert torch.count_nonzero(e2.kv[names[1]][:, 0]) == 0  # the null block is untouched
    e2.run()
    assert e2.finished["B"].output_token_ids == _hybrid_ref(groups, B)
    assert e2.model.positions_computed == len(B) - 96 + 1
    e1.shutdown()
    e2.shutdown()


def test_hybrid_window_hit_needs_only_the_window(pool):
    """A window chunk missing before the window does not shorten the hit; one missing inside
    the window of the longest prefix shortens it to the longest prefix whose window is whole."""
    import openlake_client as ol
    from openlake_client.keys import group_hash
    from vllm_standin.hybrid import make_request

    groups = _window_groups()
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    for r, (missing, hit) in enumerate(((1, 96), (4, 64))):
        P = [(i * 37 + 11 + 101 * r) % 500 for i in range(100)]  # a prompt of its own
        e1 = _hybrid(pool.kv_addr, groups)
        e1.add(make_request("A", P))
        e1.run()
        e1.shutdown()
        h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), P, 16)
        assert cl.delete([olkeys.rank_key(group_hash(h[missing], 1), 0)]) == [ol.Status.OK]
        e2 = _hybrid(pool.kv_addr, groups)
        B = P[:96] + SUFFIX
        e2.add(make_request("B", B))
        so = e2.step()
        assert so.scheduled_new_reqs[0].num_computed_tokens == hit, missing
        e2.run()
        assert e2.finished["B"].output_token_ids == _hybrid_ref(groups, B)
        e2.shutdown()
    cl.close()


def test_hybrid_with_mamba_gets_no_hit(pool):
    """A Mamba group's state cannot be rebuilt from stored blocks: no external hit, nothing
    saved, the output equals a recompute."""
    import openlake_client as ol
    from openlake_client.keys import group_hash
    from vllm_standin.hybrid import FullAttentionSpec, MambaSpec, make_request

    groups = [(FullAttentionSpec(BS), 1), (MambaSpec(BS), 1)]
    e1 = _hybrid(pool.kv_addr, groups)
    e1.add(make_request("A", A))
    e1.run()
    h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    assert not any(cl.exists([olkeys.rank_key(group_hash(x, g), 0) for x in h for g in (0, 1)]))
    cl.close()
    assert all(not so.kv_connector_metadata.saves for so in e1.schedule_log)
    e2 = _hybrid(pool.kv_addr, groups)
    B = A[:96] + SUFFIX
    e2.add(make_request("B", B))
    so = e2.step()
    assert so.scheduled_new_reqs[0].num_computed_tokens == 0
    e2.run()
    assert e2.finished["B"].output_token_ids == _hybrid_ref(groups, B)
    e1.shutdown()
    e2.shutdown()
