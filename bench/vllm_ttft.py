#!/usr/bin/python3
"""vLLM connector benchmarks (CPU, small model), each beside its reference in the same run.

1. Time to first token for a long shared prefix with the stories260K model in the vLLM
   stand-in: a fresh engine loading the prefix from the pool (hit), with whole-chunk
   objects and with `layerwise` (one object per chunk and layer, loads pipelined under the
   forward), beside the same engine recomputing it (pool down).
2. The connector's own overhead per block: its load/save path (keys, iovecs, trailer,
   CRC) beside a raw libopenlake get/put of the same bytes in the same batch.
   --verify-ab: the load alone, verify off / on with the hash taken during the copy
   (ol_kv_get_xxh3) / on with the hash after it (two passes, as before OPENLAKE_0.4) / a raw
   get, interleaved batch by batch in one process (a loaded machine moves all four alike);
   wall time, and beside it the calling thread's CPU time (which the load of a shared machine
   moves less: the wait for the CPU is not in it).
   --staging-ab: the same load and save through the staged path (staging = "always", what
   CUDA tensors take; here its CPU twin): slabs from the StagingPool beside a slab allocated
   per chunk (the connector before the pool), and the zero-copy path, interleaved rep by rep.
   --staged-cuts: the staged load as it is (strided copies for runs of consecutive blocks,
   the image hashed by the get while it copies) beside the same with both undone (an
   index_copy_ per layer, the slab hashed after the get) and the zero-copy load; wall and
   thread CPU time, interleaved batch by batch (--profile: where the staged loads' time
   went, cProfile).
3. A lookup as the scheduler makes it (LEASE of a request's chunk keys, the lease ended
   later by the worker) beside a plain `exists` of the same keys.

    /usr/bin/python3 bench/vllm_ttft.py [--nodes 127.0.0.1:9400] [--device local|tcp]
        [--reps N] [--only-lookup | --only-overhead | --only-ttft | --verify-ab |
         --staging-ab | --staged-cuts [--profile]]

Without --nodes it starts openlaked (mode kv) from $OPENLAKE_BUILD (default build/) on an
ephemeral loopback port with a temp spill dir, and stops it at the end."""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO / "tests" / "integration")]


def build_dir():
    b = Path(os.environ.get("OPENLAKE_BUILD", "build"))
    return b if b.is_absolute() else REPO / b


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon():
    exe = build_dir() / "cmd" / "openlaked" / "openlaked"
    if not exe.exists():
        sys.exit("openlaked not built: %s (or pass --nodes)" % exe)
    root = Path(tempfile.mkdtemp(prefix="ol-bench-ttft-"))
    port = free_port()
    (root / "d0").mkdir()
    cfg = root / "openlake.toml"
    cfg.write_text('mode = "kv"\ndata_dirs = ["%s"]\nset_drive_count = 1\ndefault_parity_count = 0\nkv_addr = "127.0.0.1:%d"\n'
                   's3_addr = "127.0.0.1:%d"\nrpc_addr = "127.0.0.1:%d"\n'
                   '[kv]\nspill_dir = "%s"\ndram_bytes = "1GiB"\n'
                   % (root / "d0", port, free_port(), free_port(), root / "kv"))
    log = open(root / "log", "wb")
    p = subprocess.Popen([str(exe), "--config", str(cfg)], stdout=log, stderr=log, cwd=root)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p, root, "127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit("openlaked did not start: %s" % (root / "log").read_text())


def dead_addr():
    return "127.0.0.1:%d" % free_port()


# ---------------------------------------------------------------- 1. TTFT

def ttft(addr, device, prefix_len, suffix_len, reps):
    import torch  # noqa: F401

    import tinymodel
    from vllm_standin import Engine, Request, make_vllm_config

    if tinymodel.data_dir() is None:
        print("ttft: skipped (shared/data/kv-bf16 not found)")
        return
    import json

    meta = json.loads((tinymodel.data_dir() / "stories260K" / "meta.json").read_text())
    toks = meta["sequences"][5]["tokens"]
    prefix = toks[:prefix_len]

    def engine(a, model_id, layerwise=False):
        m = tinymodel.load("fa")
        c = make_vllm_config(model=model_id, block_size=16, num_gpu_blocks=64,
                             num_layers=m.L, kv_heads=m.nkv, head_size=m.hd,
                             extra={"openlake_nodes": [a], "openlake_device": device,
                                    "chunk_size": 64, "timeout_ms": 1000,
                                    "log_interval_s": 3600, "layerwise": layerwise},
                             max_num_batched_tokens=1024)
        return Engine(c, lambda r: (m.make_kv_caches(64, 16), m), 64), m

    def first_token(e, prompt):
        e.add(Request("q", prompt, max_tokens=1))
        t0 = time.perf_counter()
        while not e.scheduler.requests["q"].output_token_ids:
            e.step()
        dt = time.perf_counter() - t0
        e.run()
        return dt

    hit, lw, miss, skipped = [], [], [], []
    prompt = prefix + toks[prefix_len:prefix_len + suffix_len]
    for i in range(reps):  # the three kinds interleaved, each rep on fresh keys
        for layerwise, out in ((False, hit), (True, lw)):
            model_id = "bench/ttft-%d-%d-%d" % (os.getpid(), i, layerwise)
            e1, _ = engine(addr, model_id, layerwise)
            first_token(e1, prefix + toks[400:400 + suffix_len])  # fills the pool
            e2, m2 = engine(addr, model_id, layerwise)
            out.append(first_token(e2, prompt))
            skipped.append(e2.scheduler.finished["q"].num_external_computed_tokens)
            for e in (e1, e2):
                e.shutdown()
        e3, _ = engine(dead_addr(), "bench/ttft-miss")
        miss.append(first_token(e3, prompt))
        e3.shutdown()
    h, w, r = statistics.median(hit), statistics.median(lw), statistics.median(miss)
    print("ttft prefix=%d suffix=%d tokens: hit %.1f ms (%s tokens loaded)  hit layerwise %.1f"
          " ms  recompute %.1f ms  ratio recompute/hit %.2fx  layerwise/whole %.2fx"
          % (prefix_len, suffix_len, h * 1e3, "/".join(map(str, sorted(set(skipped)))),
             w * 1e3, r * 1e3, r / h, w / h))


class SynthModel:
    """A stand-in model with a real KV size and a tunable compute: `layers` layers of
    heads x head_dim KV (bf16, FlashAttention layout); each layer of each scheduled token
    costs `mm` products of a [tokens, hidden] by [hidden, hidden] matrix, then reads back the
    whole prefix's K/V of that layer from the paged cache (attention reads every loaded
    block) and writes the new tokens' K/V. The sampled token is constant: only time counts."""

    def __init__(self, layers, heads, head_dim, hidden, mm):
        import torch

        g = torch.Generator().manual_seed(1)
        self.L, self.H, self.D, self.mm = layers, heads, head_dim, mm
        self.hidden = max(hidden, heads * head_dim)
        self.w = torch.randn(self.hidden, self.hidden, generator=g) / self.hidden ** 0.5

    def make_kv_caches(self, nb, bs):
        from vllm_standin import make_kv_caches

        return make_kv_caches("fa", self.L, nb, bs, self.H, self.D)

    def forward(self, kv_caches, reqs, hooks):
        import torch

        from vllm_standin.worker import read_kv, slots, write_kv

        n_kv = self.H * self.D
        for name in kv_caches:
            hooks.before_layer(name)
            t = kv_caches[name]
            for r in reqs:
                x = torch.ones(r.end - r.start, self.hidden)
                for _ in range(self.mm):
                    x = torch.tanh(x @ self.w)
                k = x[:, :n_kv].reshape(-1, self.H, self.D).to(t.dtype)
                b, o = slots(r.block_ids, r.start, r.end, r.bs)
                write_kv(t, "fa", b, o, k, k)
                b, o = slots(r.block_ids, 0, r.end, r.bs)
                K, V = read_kv(t, "fa", b, o)
                float(K.float().sum() + V.float().sum())
            hooks.after_layer(name, t)
        return {r.req_id: (0, None) for r in reqs if r.end == len(r.tokens)}


def ttft_synthetic(addr, device, layers, heads, head_dim, prefix_len, suffix_len, hidden, mm,
                   reps):
    """TTFT of a prefix hit with a model of real KV size (see SynthModel), whole-chunk loads
    beside layer-wise ones, and a load-only figure (mm = 0) to tell the load from compute."""
    from vllm_standin import Engine, Request, make_vllm_config

    bs, chunk = 16, 256
    nb = (prefix_len + suffix_len) // bs + 2
    prompt = [(i * 7919 + 13) % 32000 for i in range(prefix_len + suffix_len)]
    other = prompt[:prefix_len] + [(i * 31 + 5) % 32000 for i in range(suffix_len)]

    def engine(model_id, layerwise, m):
        c = make_vllm_config(model=model_id, block_size=bs, num_gpu_blocks=nb,
                             num_layers=layers, kv_heads=heads, head_size=head_dim,
                             extra={"openlake_nodes": [addr], "openlake_device": device,
                                    "chunk_size": chunk, "timeout_ms": 10000,
                                    "log_interval_s": 3600, "layerwise": layerwise},
                             max_num_batched_tokens=prefix_len + suffix_len + 16)
        return Engine(c, lambda r: (m.make_kv_caches(nb, bs), m), nb)

    def first_token(e, p):
        e.add(Request("q", p, max_tokens=1))
        t0 = time.perf_counter()
        while not e.scheduler.requests["q"].output_token_ids:
            e.step()
        dt = time.perf_counter() - t0
        e.run()
        return dt

    res = {}
    for mmx in (0, mm):
        m = SynthModel(layers, heads, head_dim, hidden, mmx)
        t = {False: [], True: []}
        loaded = set()
        for i in range(reps):
            for layerwise in (False, True):
                model_id = "bench/synth-%d-%d-%d-%d" % (os.getpid(), mmx, i, layerwise)
                e1 = engine(model_id, layerwise, m)
                first_token(e1, other)  # fills the pool
                e1.shutdown()
                e2 = engine(model_id, layerwise, m)
                t[layerwise].append(first_token(e2, prompt))
                loaded.add(e2.scheduler.finished["q"].num_external_computed_tokens)
                e2.shutdown()
        res[mmx] = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        kv_mib = prefix_len * layers * 2 * heads * head_dim * 2 / 2 ** 20
        print("ttft synthetic %d layers x %dx%d KV, prefix %d (%.0f MiB, %s loaded) + %d, "
              "compute %d mm of %d/layer: whole %.1f ms  layerwise %.1f ms  "
              "layerwise/whole %.2fx" % (layers, heads, head_dim, prefix_len, kv_mib,
                                         "/".join(map(str, sorted(loaded))), suffix_len,
                                         mmx, m.hidden, res[mmx][False], res[mmx][True],
                                         res[mmx][True] / res[mmx][False]))


# ---------------------------------------------------------------- 2. overhead per block

def overhead(addr, device, layers, heads, head_dim, nblocks, reps, verify):
    import torch

    import openlake_client as ol
    from openlake_client.connector_sched import LoadSpec, SaveSpec, StepPlan
    from openlake_client.keys import rank_key
    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector
    from vllm_standin import make_kv_caches, make_vllm_config

    nb = nblocks + 1
    c = make_vllm_config(model="bench/overhead-%d-%d" % (os.getpid(), verify), block_size=16,
                         num_gpu_blocks=nb, num_layers=layers, kv_heads=heads,
                         head_size=head_dim,
                         extra={"openlake_nodes": [addr], "openlake_device": device,
                                "chunk_size": 16, "verify": verify, "timeout_ms": 5000,
                                "save_check_exists": False, "async_save": False,
                                "log_interval_s": 3600})
    conn = OpenLakeConnector(c, KVConnectorRole.WORKER, None)
    kv = make_kv_caches("fa", layers, nb, 16, heads, head_dim)
    for t in kv.values():
        t.copy_(torch.randn(t.shape).to(t.dtype))
    conn.register_kv_caches(kv)
    w = conn._worker
    ids = list(range(1, nb))
    hashes = [os.urandom(32) for _ in ids]
    block = w.payload
    save_t, load_t, rawput_t, rawget_t = [], [], [], []
    cl = ol.connect([addr], device=device, namespace="bench-raw")
    bufs = [torch.empty(block, dtype=torch.uint8) for _ in ids]
    for rep in range(reps):
        hs = [os.urandom(32) for _ in ids] if rep else hashes
        plan = StepPlan(saves=[SaveSpec("r", [(h, (b,)) for h, b in zip(hs, ids)])])
        t0 = time.perf_counter()
        w.save(plan)
        save_t.append(time.perf_counter() - t0)
        plan = StepPlan(loads=[LoadSpec("r", [(h, (b,), 0) for h, b in zip(hs, ids)])])
        t0 = time.perf_counter()
        w.load(plan)
        load_t.append(time.perf_counter() - t0)
        assert not w.take_invalid(), "connector load failed"
        rk = [os.urandom(32) for _ in ids]
        iovs = [[(b.data_ptr(), block)] for b in bufs]
        t0 = time.perf_counter()
        st = cl.put_iov(rk, iovs)
        rawput_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        st, _ = cl.get_iov(rk, iovs)
        rawget_t.append(time.perf_counter() - t0)
        assert all(s == ol.Status.OK for s in st)
        cl.delete(rk)
        cl.delete([rank_key(h, 0) for h in hs])
    cl.close()
    conn.shutdown()
    per = lambda ts: statistics.median(ts) / len(ids) * 1e6  # noqa: E731
    gb = lambda ts: block * len(ids) / statistics.median(ts) / 1e9  # noqa: E731
    print("overhead block=%d KiB (%d layers x K,V, %d iovecs/block) x %d, verify=%s, %s:"
          % (block // 1024, layers, 2 * layers, len(ids), verify, device))
    print("  load: connector %.1f us/block (%.2f GB/s)  raw get %.1f us/block (%.2f GB/s)"
          "  ratio connector/raw %.2fx" % (per(load_t), gb(load_t), per(rawget_t),
                                            gb(rawget_t), per(load_t) / per(rawget_t)))
    print("  save: connector %.1f us/block (%.2f GB/s)  raw put %.1f us/block (%.2f GB/s)"
          "  ratio connector/raw %.2fx" % (per(save_t), gb(save_t), per(rawput_t),
                                            gb(rawput_t), per(save_t) / per(rawput_t)))


class _FreshPool:
    """The staging before StagingPool: a new host buffer per chunk, dropped after it."""

    def __init__(self, slab_bytes, nmax):
        self.slab_bytes, self.nmax, self.allocations = slab_bytes, nmax, 0

    def acquire(self, nbytes, count=1, timeout=None):
        import torch

        from openlake_client.staging import Slab

        self.allocations += count
        return [Slab(torch.empty(self.slab_bytes, dtype=torch.uint8), 0) for _ in range(count)]

    def release(self, slab, event=None):
        pass

    def outstanding(self):
        return 0


def staging_ab(addr, device, layers, heads, head_dim, nblocks, reps):
    """Staged load / save with the pool, with a buffer per chunk, and zero copy; verify on and
    off; interleaved rep by rep, medians per block."""
    import torch

    from openlake_client.connector_sched import LoadSpec, SaveSpec, StepPlan
    from openlake_client.keys import rank_key
    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector
    from vllm_standin import make_kv_caches, make_vllm_config

    import openlake_client as ol

    nb = nblocks + 1
    ids = list(range(1, nb))
    kinds = [(v, m) for v in (True, False) for m in ("pool", "fresh", "zero-copy")]
    conns = {}
    for v, m in kinds:
        c = make_vllm_config(model="bench/staging-%d-%s-%s" % (os.getpid(), v, m),
                             block_size=16, num_gpu_blocks=nb, num_layers=layers,
                             kv_heads=heads, head_size=head_dim,
                             extra={"openlake_nodes": [addr], "openlake_device": device,
                                    "chunk_size": 16, "verify": v, "timeout_ms": 5000,
                                    "save_check_exists": False, "async_save": False,
                                    "log_interval_s": 3600,
                                    "staging": "auto" if m == "zero-copy" else "always"})
        conn = OpenLakeConnector(c, KVConnectorRole.WORKER, None)
        kv = make_kv_caches("fa", layers, nb, 16, heads, head_dim)
        for t in kv.values():
            t.copy_(torch.randn(t.shape).to(t.dtype))
        conn.register_kv_caches(kv)
        if m == "fresh":
            conn._worker.staging = _FreshPool(conn._worker.staging.slab_bytes,
                                              conn._worker.staging.nmax)
        conns[(v, m)] = conn
    times = {k: ([], []) for k in kinds}
    cl = ol.connect([addr], device=device, namespace="vllm")
    for rep in range(reps + 1):  # the first rep warms up (slabs, pool slots)
        for k in kinds:
            w = conns[k]._worker
            hs = [os.urandom(32) for _ in ids]
            plan = StepPlan(saves=[SaveSpec("r", [(h, (b,)) for h, b in zip(hs, ids)])])
            t0 = time.perf_counter()
            w.save(plan)
            t1 = time.perf_counter()
            w.load(StepPlan(loads=[LoadSpec("r", [(h, (b,), 0) for h, b in zip(hs, ids)])]))
            t2 = time.perf_counter()
            assert not w.take_invalid(), "connector load failed"
            if rep:
                times[k][0].append(t1 - t0)
                times[k][1].append(t2 - t1)
            cl.delete([rank_key(h, 0) for h in hs])
    cl.close()
    block = conns[kinds[0]]._worker.payload
    per = lambda ts: statistics.median(ts) / len(ids) * 1e6  # noqa: E731
    print("staging A/B, block=%d KiB (%d layers) x %d per batch, %s, reps %d, load avg %s:"
          % (block // 1024, layers, len(ids), device, reps,
             " ".join("%.2f" % x for x in os.getloadavg())))
    for v, m in kinds:
        st = conns[(v, m)]._worker.staging
        print("  verify=%-5s %-9s load %7.1f us/block  save %7.1f us/block  host buffers "
              "allocated %s" % (v, m, per(times[(v, m)][1]), per(times[(v, m)][0]),
                                "-" if st is None else st.allocations))
    for c in conns.values():
        c.shutdown()


def staged_cuts(addr, device, layers, heads, head_dim, nblocks, reps, profile=False):
    """Median us/block of a batch load: staged now, staged with its cuts undone, zero copy.
    profile: cProfile the staged loads (as they are) and print where their time went."""
    import cProfile
    import pstats

    import torch

    from openlake_client import layouts
    from openlake_client.client import Client
    from openlake_client.connector_sched import LoadSpec, SaveSpec, StepPlan
    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector
    from vllm_standin import make_kv_caches, make_vllm_config

    nb = nblocks + 1
    ids = list(range(1, nb))
    kinds = ("staged", "staged, cuts undone", "zero-copy")
    ws, plans, conns = {}, {}, []
    for k in kinds:
        c = make_vllm_config(model="bench/cuts-%d-%s" % (os.getpid(), k[:9]), block_size=16,
                             num_gpu_blocks=nb, num_layers=layers, kv_heads=heads,
                             head_size=head_dim,
                             extra={"openlake_nodes": [addr], "openlake_device": device,
                                    "chunk_size": 16, "verify": True, "timeout_ms": 5000,
                                    "save_check_exists": False, "async_save": False,
                                    "log_interval_s": 3600,
                                    "staging": "auto" if k == "zero-copy" else "always"})
        conn = OpenLakeConnector(c, KVConnectorRole.WORKER, None)
        kv = make_kv_caches("fa", layers, nb, 16, heads, head_dim)
        for t in kv.values():
            t.copy_(torch.randn(t.shape).to(t.dtype))
        conn.register_kv_caches(kv)
        hs = [os.urandom(32) for _ in ids]
        conn._worker.save(StepPlan(saves=[SaveSpec("r", [(h, (b,)) for h, b in zip(hs, ids)])]))
        plans[k] = StepPlan(loads=[LoadSpec("r", [(h, (b,), 0) for h, b in zip(hs, ids)])])
        ws[k] = conn._worker
        conns.append(conn)
    wall = {k: [] for k in kinds}
    cpu = {k: [] for k in kinds}
    runs_max, has = layouts._RUNS_MAX, Client.has_get_xxh3
    prof = cProfile.Profile() if profile else None
    for rep in range(reps + 1):
        for k in kinds:
            undo = k == "staged, cuts undone"
            layouts._RUNS_MAX = 0 if undo else runs_max  # 0: index ops for every layer
            Client.has_get_xxh3 = (lambda self: False) if undo else has
            on = prof is not None and k == "staged" and rep
            if on:
                prof.enable()
            t0, c0 = time.perf_counter(), time.thread_time()
            ws[k].load(plans[k])
            t1, c1 = time.perf_counter(), time.thread_time()
            if on:
                prof.disable()
            layouts._RUNS_MAX, Client.has_get_xxh3 = runs_max, has
            assert not ws[k].take_invalid(), "connector load failed"
            if rep:
                wall[k].append(t1 - t0)
                cpu[k].append(c1 - c0)
    per = lambda ts: statistics.median(ts) / len(ids) * 1e6  # noqa: E731
    print("staged load cuts, block=%d KiB (%d layers) x %d per batch, verify on, %s, reps %d, "
          "load avg %s:" % (ws[kinds[0]].payload // 1024, layers, len(ids), device, reps,
                            " ".join("%.2f" % x for x in os.getloadavg())))
    for k in kinds:
        print("  %-20s load %7.1f us/block wall  %7.1f us/block thread CPU  (%.2fx zero copy)"
              % (k, per(wall[k]), per(cpu[k]), per(wall[k]) / per(wall["zero-copy"])))
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    for c in conns:
        c.shutdown()


def verify_ab(addr, device, layers, heads, head_dim, nblocks, reps):
    """Median us/block of a batch load of nblocks 2 MiB blocks for each way of verifying,
    interleaved with a raw get of the same bytes, reps batches each."""
    import torch

    import openlake_client as ol
    from openlake_client.client import Client
    from openlake_client.connector_sched import LoadSpec, SaveSpec, StepPlan
    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector
    from vllm_standin import make_kv_caches, make_vllm_config

    nb = nblocks + 1
    c = make_vllm_config(model="bench/verify-ab-%d" % os.getpid(), block_size=16,
                         num_gpu_blocks=nb, num_layers=layers, kv_heads=heads,
                         head_size=head_dim,
                         extra={"openlake_nodes": [addr], "openlake_device": device,
                                "chunk_size": 16, "verify": True, "timeout_ms": 5000,
                                "save_check_exists": False, "async_save": False,
                                "log_interval_s": 3600})
    conn = OpenLakeConnector(c, KVConnectorRole.WORKER, None)
    kv = make_kv_caches("fa", layers, nb, 16, heads, head_dim)
    for t in kv.values():
        t.copy_(torch.randn(t.shape).to(t.dtype))
    conn.register_kv_caches(kv)
    w = conn._worker
    ids = list(range(1, nb))
    hs = [os.urandom(32) for _ in ids]
    w.save(StepPlan(saves=[SaveSpec("r", [(h, (b,)) for h, b in zip(hs, ids)])]))
    plan = StepPlan(loads=[LoadSpec("r", [(h, (b,), 0) for h, b in zip(hs, ids)])])
    cl = ol.connect([addr], device=device, namespace="bench-raw")
    bufs = [torch.empty(w.payload, dtype=torch.uint8) for _ in ids]
    rk = [os.urandom(32) for _ in ids]
    iovs = [[(b.data_ptr(), w.payload)] for b in bufs]
    assert all(s == ol.Status.OK for s in cl.put_iov(rk, iovs))
    # an older package (no ol_kv_get_xxh3 in it or its library): off and two passes only
    fused = getattr(cl, "has_get_xxh3", lambda: False)()
    has = getattr(Client, "has_get_xxh3", None)
    modes = ["off", "fused", "two-pass"] if fused else ["off", "two-pass"]
    t = {m: [] for m in modes + ["raw"]}
    cpu = {m: [] for m in modes + ["raw"]}  # this thread's CPU time: what load moves less
    ways = modes + ["raw"]
    for rep in range(reps):  # each way in each place of the order equally often (caches)
        for m in ways[rep % len(ways):] + ways[:rep % len(ways)]:
            w.cfg.verify = m != "off"
            if fused:
                Client.has_get_xxh3 = has if m != "two-pass" else (lambda self: False)
            c0, t0 = time.thread_time(), time.perf_counter()
            if m == "raw":
                st, _ = cl.get_iov(rk, iovs)
                assert all(s == ol.Status.OK for s in st)
            else:
                w.load(plan)
            t[m].append(time.perf_counter() - t0)
            cpu[m].append(time.thread_time() - c0)
            assert not w.take_invalid(), "connector load failed (%s)" % m
        if fused:
            Client.has_get_xxh3 = has
    cl.delete(rk)
    cl.delete([rank_key_of(h) for h in hs])
    cl.close()
    conn.shutdown()
    per = {m: statistics.median(v) / len(ids) * 1e6 for m, v in t.items()}
    pc = {m: statistics.median(v) / len(ids) * 1e6 for m, v in cpu.items()}
    print("verified load A/B, %d x %d KiB blocks (%d iovecs each), %d interleaved batches, %s,"
          " load average %.1f:" % (len(ids), w.payload // 1024, 2 * layers, reps, device,
                                   os.getloadavg()[0]))
    for m in modes:
        print("  load verify=%-8s %7.1f us/block  raw get %7.1f us/block  speed vs raw %.2fx"
              "   (CPU time: %6.1f vs %6.1f us/block, %.2fx)"
              % (m, per[m], per["raw"], per["raw"] / per[m], pc[m], pc["raw"],
                 pc["raw"] / pc[m]))


def rank_key_of(h):
    from openlake_client.keys import rank_key

    return rank_key(h, 0)


def lookup(addr, device, nkeys, reps):
    """Median us of one batched lookup of nkeys present keys: LEASE (ttl 30 s), the LEASE
    that ends it (ttl 0), and EXISTS; each repeated reps*20 times, interleaved."""
    import hashlib

    import openlake_client as ol

    cl = ol.connect([addr], device=device, namespace="bench-lease", timeout_ms=30000)
    keys = [hashlib.sha256(b"lease %d %d" % (os.getpid(), i)).digest() for i in range(nkeys)]
    cl.put(keys, [b"x" * 65536] * nkeys)
    t = {"lease": [], "end": [], "exists": []}
    for _ in range(reps * 20):
        for name, fn in (("exists", lambda: cl.exists(keys)),
                         ("lease", lambda: cl.lease(keys, 30000)),
                         ("end", lambda: cl.lease(keys, 0))):
            t0 = time.perf_counter()
            st = fn()
            t[name].append((time.perf_counter() - t0) * 1e6)
            assert all(int(x) == 0 for x in st) if name != "exists" else all(st), (name, st)
    cl.close()
    med = {k: statistics.median(v) for k, v in t.items()}
    print("lookup of %d keys (device %s): lease %.0f us, end lease %.0f us; "
          "reference exists %.0f us (lease/exists %.2fx)"
          % (nkeys, device, med["lease"], med["end"], med["exists"],
             med["lease"] / med["exists"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default=None)
    ap.add_argument("--device", default="local", choices=("local", "tcp"))
    ap.add_argument("--prefix", type=int, default=448)
    ap.add_argument("--suffix", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--lookup-keys", type=int, default=64)
    ap.add_argument("--only-lookup", action="store_true")
    ap.add_argument("--only-overhead", action="store_true",
                    help="only the per-block load/save figures (2.), e.g. with many --reps")
    ap.add_argument("--only-ttft", action="store_true",
                    help="only the TTFT figures (1.): whole-chunk, layerwise, recompute")
    ap.add_argument("--synthetic", action="store_true",
                    help="with --only-ttft: also TTFT of a model with --layers x --heads x "
                    "--head-dim KV and a tunable compute (--synth-*)")
    ap.add_argument("--synth-prefix", type=int, default=1024)
    ap.add_argument("--synth-hidden", type=int, default=1024)
    ap.add_argument("--synth-mm", type=int, default=2, help="matrix products per layer")
    ap.add_argument("--verify-ab", action="store_true",
                    help="only the load with verify off / fused / two passes / raw get, "
                         "interleaved (2.)")
    ap.add_argument("--staged-cuts", action="store_true",
                    help="only the staged load: now vs its cuts undone vs zero copy")
    ap.add_argument("--profile", action="store_true",
                    help="with --staged-cuts: cProfile the staged loads")
    ap.add_argument("--staging-ab", action="store_true",
                    help="only staged load/save: pool vs a buffer per chunk vs zero copy")
    a = ap.parse_args()
    if a.nodes is None and not os.environ.get("OPENLAKE_LIBRARY"):
        os.environ["OPENLAKE_LIBRARY"] = str(build_dir() / "client" / "libopenlake.so")
    proc = root = None
    addr = a.nodes
    if addr is None:
        proc, root, addr = start_daemon()
    try:
        if a.verify_ab:
            verify_ab(addr, a.device, a.layers, a.heads, a.head_dim, a.blocks, a.reps)
            return
        if a.staging_ab:
            staging_ab(addr, a.device, a.layers, a.heads, a.head_dim, a.blocks, a.reps)
            return
        if a.staged_cuts:
            staged_cuts(addr, a.device, a.layers, a.heads, a.head_dim, a.blocks, a.reps,
                        a.profile)
            return
        if a.only_ttft:
            ttft(addr, a.device, a.prefix, a.suffix, a.reps)
            if a.synthetic:
                ttft_synthetic(addr, a.device, a.layers, a.heads, a.head_dim, a.synth_prefix,
                               a.suffix, a.synth_hidden, a.synth_mm, a.reps)
            return
        if not a.only_overhead:
            lookup(addr, a.device, a.lookup_keys, a.reps)
            if a.only_lookup:
                return
            ttft(addr, a.device, a.prefix, a.suffix, a.reps)
        for verify in (True, False):
            overhead(addr, a.device, a.layers, a.heads, a.head_dim, a.blocks, a.reps, verify)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(20)
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
