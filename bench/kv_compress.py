#!/usr/bin/python3
"""KV pool with ExANS: ratio and put/get GB/s of libopenlake with and without
opts.compress on real BF16 KV blocks (../shared/data/kv-bf16), through a real openlaked
(mode = "kv", DRAM tier, started on an ephemeral loopback port, stopped at the end).

    OPENLAKE_BUILD=build /usr/bin/python3 bench/kv_compress.py [--seconds 3] [--block 2MiB]

One thread, batches of 16 blocks; a block is the real K/V files concatenated (each file is one
sequence's 5 layers x 512 tokens x 4 heads x 8 dims, token-major), repeated with distinct
keys. GB/s count the original (uncompressed) bytes. Puts store new keys every round; gets
read the last round put (not evicted yet). Benchmarks never fail: they print figures."""

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "tests" / "integration"))


def blocks(block_bytes, n):
    d = REPO.parent / "shared" / "data" / "kv-bf16" / "stories260K"
    raw = b"".join(f.read_bytes() for f in sorted(d.glob("seq*.bf16")))
    if not raw:
        sys.exit("no real KV data under %s" % d)
    out = []
    for i in range(n):
        off = (i * block_bytes // 3) % len(raw) // 64 * 64  # whole token rows
        b = (raw[off:] + raw) * (block_bytes // len(raw) + 2)
        out.append(b[:block_bytes])
    return out


def run(c, vals, secs, ns):
    import ctypes

    bufs = [ctypes.create_string_buffer(v, len(v)) for v in vals]
    outs = [ctypes.create_string_buffer(len(v)) for v in vals]
    iv = [[(ctypes.addressof(b), len(v))] for b, v in zip(bufs, vals)]
    ov = [[(ctypes.addressof(b), len(v))] for b, v in zip(outs, vals)]
    B = 16
    nbytes = sum(len(v) for v in vals)
    t0, done, rnd = time.perf_counter(), 0, 0
    while time.perf_counter() - t0 < secs or done == 0:  # put: fresh keys every round
        for i in range(0, len(vals), B):
            keys = [hashlib.sha256(b"%s/%d/%d" % (ns, rnd, j)).digest()
                    for j in range(i, min(i + B, len(vals)))]
            st = c.put_iov(keys, iv[i:i + B])
            assert all(s == 0 for s in st), st
        done += nbytes
        rnd += 1
    put = done / (time.perf_counter() - t0) / 1e9
    t0, done = time.perf_counter(), 0
    while time.perf_counter() - t0 < secs or done == 0:
        for i in range(0, len(vals), B):
            keys = [hashlib.sha256(b"%s/%d/%d" % (ns, rnd - 1, j)).digest()  # newest
                    for j in range(i, min(i + B, len(vals)))]
            st, _ = c.get_iov(keys, ov[i:i + B])
            assert all(s == 0 for s in st), st
        done += nbytes
    get = done / (time.perf_counter() - t0) / 1e9
    assert all(o.raw == v for o, v in zip(outs, vals))
    return put, get


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--block", default="2MiB")
    ap.add_argument("--blocks", type=int, default=32)
    a = ap.parse_args()
    units = {"KiB": 1 << 10, "MiB": 1 << 20}
    bb = next((int(a.block[:-3]) * m for u, m in units.items() if a.block.endswith(u)), None)
    bb = bb or int(a.block)
    from conftest import Daemon

    import openlake_client as ol

    vals = blocks(bb, a.blocks)
    with tempfile.TemporaryDirectory(prefix="olzbench-") as tmp:
        d = Daemon(tmp, drives=1, mode="kv", extra='dram_bytes = "2GiB"\nshm_name = '
                   '"/olzbench-%d"\nspill_bytes = 0\n' % os.getpid())
        d.start()
        try:
            print("| path | compress | rows | block | stored/orig | put GB/s | get GB/s |")
            print("|---|---|---|---|---|---|---|")
            for dev in ("local", "tcp"):
                for comp, rows in (("off", 0), ("exans", 0), ("exans", 64)):
                    c = ol.connect([d.kv_addr], device=dev, timeout_ms=20000, compress=comp,
                                   compress_row_bytes=rows)
                    ns = ("%s-%s-%d" % (dev, comp, rows)).encode()
                    put, get = run(c, vals, a.seconds, ns)
                    st = c.client_stats()
                    ratio = (st["compress_out_bytes"] / st["compress_in_bytes"]
                             if comp == "exans" else 1.0)
                    print("| %s | %s | %s | %s | %.3f | %.2f | %.2f |"
                          % (dev, comp, rows or "-", a.block, ratio, put, get), flush=True)
                    c.close()
        finally:
            d.stop()


if __name__ == "__main__":
    main()
