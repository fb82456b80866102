#!/usr/bin/python3
"""vLLM connector benchmarks (CPU, small model), each beside its reference in the same run.

1. Time to first token for a long shared prefix with the stories260K model in the vLLM
   stand-in: a fresh engine loading the prefix from the pool (hit) beside the same engine
   recomputing it (pool down).
2. The connector's own overhead per block: its load/save path (keys, iovecs, trailer,
   CRC) beside a raw libopenlake get/put of the same bytes in the same batch.
   --verify-ab: the load alone, verify off / on with the hash taken during the copy
   (ol_kv_get_xxh3) / on with the hash after it (two passes, as before OPENLAKE_0.4) / a raw
   get, interleaved batch by batch in one process (a loaded machine moves all four alike).
3. A lookup as the scheduler makes it (LEASE of a request's chunk keys, the lease ended
   later by the worker) beside a plain `exists` of the same keys.

    /usr/bin/python3 bench/vllm_ttft.py [--nodes 127.0.0.1:9400] [--device local|tcp]
        [--reps N] [--only-lookup | --only-overhead | --verify-ab]

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

    def engine(a, model_id):
        m = tinymodel.load("fa")
        c = make_vllm_config(model=model_id, block_size=16, num_gpu_blocks=64,
                             num_layers=m.L, kv_heads=m.nkv, head_size=m.hd,
                             extra={"openlake_nodes": [a], "openlake_device": device,
                                    "chunk_size": 64, "timeout_ms": 1000,
                                    "log_interval_s": 3600},
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

    hit, miss, skipped = [], [], []
    for i in range(reps):
        model_id = "bench/ttft-%d-%d" % (os.getpid(), i)
        e1, _ = engine(addr, model_id)
        first_token(e1, prefix + toks[400:400 + suffix_len])  # fills the pool
        e2, m2 = engine(addr, model_id)
        prompt = prefix + toks[prefix_len:prefix_len + suffix_len]
        hit.append(first_token(e2, prompt))
        skipped.append(e2.scheduler.finished["q"].num_external_computed_tokens)
        e3, _ = engine(dead_addr(), model_id)
        miss.append(first_token(e3, prompt))
        for e in (e1, e2, e3):
            e.shutdown()
    h, r = statistics.median(hit), statistics.median(miss)
    print("ttft prefix=%d suffix=%d tokens: hit %.1f ms (%d tokens loaded)  recompute %.1f ms"
          "  ratio recompute/hit %.2fx" % (prefix_len, suffix_len, h * 1e3, skipped[0],
                                           r * 1e3, r / h))


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
    for _ in range(reps):
        for m in modes:
            w.cfg.verify = m != "off"
            if fused:
                Client.has_get_xxh3 = has if m != "two-pass" else (lambda self: False)
            t0 = time.perf_counter()
            w.load(plan)
            t[m].append(time.perf_counter() - t0)
            assert not w.take_invalid(), "connector load failed (%s)" % m
        if fused:
            Client.has_get_xxh3 = has
        t0 = time.perf_counter()
        st, _ = cl.get_iov(rk, iovs)
        t["raw"].append(time.perf_counter() - t0)
        assert all(s == ol.Status.OK for s in st)
    cl.delete(rk)
    cl.delete([rank_key_of(h) for h in hs])
    cl.close()
    conn.shutdown()
    per = {m: statistics.median(v) / len(ids) * 1e6 for m, v in t.items()}
    print("verified load A/B, %d x %d KiB blocks (%d iovecs each), %d interleaved batches, %s:"
          % (len(ids), w.payload // 1024, 2 * layers, reps, device))
    for m in modes:
        print("  load verify=%-8s %7.1f us/block  raw get %7.1f us/block  speed vs raw %.2fx"
              % (m, per[m], per["raw"], per["raw"] / per[m]))


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
    ap.add_argument("--verify-ab", action="store_true",
                    help="only the load with verify off / fused / two passes / raw get, "
                         "interleaved (2.)")
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
