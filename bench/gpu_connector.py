#!/usr/bin/python3
"""The vLLM connector's device path, each figure beside its reference in the same run:

1. load (H2D) and save (D2H) GB/s of the connector's staged path: PagedKV.pack / unpack of
   chunks of paged KV blocks through StagingPool slabs on the CopyEngine stream (events,
   non_blocking from pinned slabs), beside a plain torch copy of a pinned tensor of the same
   bytes (cudaMemcpy of pinned memory). The pool itself is not in it (no daemon).
2. ExANS encode and decode GB/s of libol_exans_gpu (GpuCodec: whole stored values, framing
   included) on real BF16 KV, and its XXH3 (the trailer checksum), beside a device-to-device
   copy of the same bytes, with their ratios; the XXH3 of --sum-values values one launch
   each beside all of them in one batched launch (ol_exans_gpu_xxh3_batch).
3. The connector's GPU codec path (compress = "exans" on the device), per batch as the worker
   runs it: save = pack + trailer + one XXH3 launch + encodes with one wait for their lengths
   + D2H of the stored forms, load = H2D of the stored forms + decodes + one XXH3 launch and
   one copy of the checks (the load's one wait) + scatter, in GB/s of KV moved, beside the
   per-chunk sequence it replaced (a launch, an encode or decode wait and a check copy per
   chunk) and pinned cudaMemcpy of the same (uncompressed) bytes.

    /usr/bin/python3 bench/gpu_connector.py [--twin] [--layers 32 --heads 8 --head-dim 128]
        [--blocks 16 --chunks 32 --reps 5]

Exits 77 without a CUDA device, unless --twin: then the same code runs on CPU tensors with
the CPU twins (CopyEngine's twin, libol_exans_twin), which checks the bench runs; its figures
are host memcpy and host codec speeds, not GPU ones."""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO / "tests" / "integration")]


def timed(fn, sync, reps):
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def kv_bytes(n, device):
    """n bytes of BF16 KV: the stories260K dump repeated when it is here, else N(0, 0.05)."""
    import torch

    try:
        import tinymodel

        d = tinymodel.data_dir()
        f = sorted((d / "stories260K").glob("*.bf16")) if d else []
    except Exception:
        f = []
    if f:
        raw = b"".join(p.read_bytes() for p in f[:8])
        src = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        src = src.repeat(n // src.numel() + 1)[:n]
    else:
        src = (torch.randn(n // 2) * 0.05).to(torch.bfloat16).view(torch.uint8)
    return src.to(device)


def copy_path(a, dev, sync):
    import torch

    from openlake_client.layouts import PagedKV
    from openlake_client.staging import CopyEngine, StagingPool

    nb = a.blocks * a.chunks + 1
    kv = {"l%d" % i: torch.zeros(2, nb, 16, a.heads, a.head_dim, dtype=torch.bfloat16,
                                 device=dev) for i in range(a.layers)}
    for t in kv.values():
        t.normal_()
    p = PagedKV(kv, nb, 16, stage_all=True)
    eng = CopyEngine(dev)
    chunk = p.image_bytes(a.blocks)
    pool = StagingPool(chunk, chunk * a.chunks, eng.cuda)
    ids = [list(range(1 + c * a.blocks, 1 + (c + 1) * a.blocks)) for c in range(a.chunks)]
    slabs = pool.acquire(chunk, a.chunks)

    def save():
        evs = [eng.run(lambda: p.pack(b, s.buf, non_blocking=eng.cuda))[1]
               for b, s in zip(ids, slabs)]
        for e in evs:
            e.synchronize()

    def load():
        ev = None
        for b, s in zip(ids, slabs):
            ev = eng.run(lambda: p.unpack(b, s.buf, non_blocking=eng.cuda))[1]
        ev.synchronize()

    total = chunk * a.chunks
    host = torch.empty(total, dtype=torch.uint8)
    if eng.cuda:
        host = host.pin_memory()
    devbuf = torch.empty(total, dtype=torch.uint8, device=dev)
    t_save = timed(save, sync, a.reps)
    t_load = timed(load, sync, a.reps)
    t_d2h = timed(lambda: host.copy_(devbuf, non_blocking=True), sync, a.reps)
    t_h2d = timed(lambda: devbuf.copy_(host, non_blocking=True), sync, a.reps)
    gb = lambda t: total / t / 1e9  # noqa: E731
    print("connector staged path, %d chunks x %d blocks x %d KiB (%d layers), %s:"
          % (a.chunks, a.blocks, p.block_bytes // 1024, a.layers, dev))
    print("  save (pack + D2H): %.2f GB/s   pinned D2H copy %.2f GB/s   ratio %.2fx"
          % (gb(t_save), gb(t_d2h), t_d2h / t_save))
    print("  load (H2D + scatter): %.2f GB/s   pinned H2D copy %.2f GB/s   ratio %.2fx"
          % (gb(t_load), gb(t_h2d), t_h2d / t_load))
    for s in slabs:
        pool.release(s)


def codec(a, dev, sync):
    import torch

    from openlake_client.gpu_codec import GpuCodec

    c = GpuCodec.open(dev)
    if c is None:
        print("ExANS: libol_exans_%s not found (OPENLAKE_EXANS_GPU_LIBRARY)"
              % ("gpu" if dev.type == "cuda" else "twin"))
        return
    n = a.codec_mib << 20
    src = kv_bytes(n, dev)
    out = torch.empty(c.bound(n), dtype=torch.uint8, device=dev)
    dst = torch.empty(n, dtype=torch.uint8, device=dev)
    m = c.encode(src, out)
    host = out[:m].cpu()
    t_enc = timed(lambda: c.encode(src, out), sync, a.reps)
    t_dec = timed(lambda: c.decode(host, out, m, dst), sync, a.reps)
    assert torch.equal(dst, src), "decode != input"
    t_cp = timed(lambda: dst.copy_(src), sync, a.reps)
    gb = lambda t: n / t / 1e9  # noqa: E731
    sums = torch.zeros(8, dtype=torch.uint8, device=dev)
    t_sum = timed(lambda: c.xxh3(src, n, sums.data_ptr()), sync, a.reps)
    k = a.sum_values  # the same bytes as k values: one launch each, then all in one launch
    part = n // k
    sums = torch.zeros(4 * k, dtype=torch.uint8, device=dev)
    tab = [(src.data_ptr() + i * part, part, sums.data_ptr() + 4 * i) for i in range(k)]
    vals = [src[i * part:(i + 1) * part] for i in range(k)]
    t_each = timed(lambda: [c.xxh3(v, part, o) for v, (_, _, o) in zip(vals, tab)], sync,
                   a.reps)
    t_batch = timed(lambda: c.xxh3_batch(tab), sync, a.reps)
    print("ExANS %s, %d MiB of BF16 KV (ratio %.3f), %s:"
          % ("libol_exans_gpu" if c.cuda else "CPU twin", a.codec_mib, n / m, dev))
    print("  encode %.2f GB/s   decode %.2f GB/s   D2D copy %.2f GB/s   "
          "encode/copy %.2fx   decode/copy %.2fx"
          % (gb(t_enc), gb(t_dec), gb(t_cp), t_cp / t_enc, t_cp / t_dec))
    print("  xxh3 (one value) %.2f GB/s   xxh3/copy %.2fx" % (gb(t_sum), t_cp / t_sum))
    gbk = lambda t: part * k / t / 1e9  # noqa: E731
    print("  xxh3 of %d values of %d KiB: one launch per value %.2f GB/s   batch (one launch) "
          "%.2f GB/s   batch/per-value %.2fx" % (k, part >> 10, gbk(t_each), gbk(t_batch),
                                                t_each / t_batch))


def codec_path(a, dev, sync):
    """The worker's GPU codec sequence for a batch of chunks (connector_worker._codec_ranges,
    _codec_sums, _encode_out, _decode_in, _check_decoded: one XXH3 launch per batch, encodes
    with one wait for all lengths, decodes and the load's checks with one launch and one copy
    back, the batch's one wait), beside the per-chunk sequence it replaced (a launch, an
    encode wait, a decode wait and a check copy per chunk),
    slabs and device buffers reused as the worker reuses them."""
    import torch

    from openlake_client.gpu_codec import GpuCodec
    from openlake_client.layouts import PagedKV
    from openlake_client.staging import CopyEngine, StagingPool
    from openlake_client.store import CHECKSUM_AT, TRAILER_LEN, device_trailer

    nb = a.blocks * a.chunks + 1
    kv = {"l%d" % i: torch.zeros(2, nb, 16, a.heads, a.head_dim, dtype=torch.bfloat16,
                                 device=dev) for i in range(a.layers)}
    data = kv_bytes(2 * nb * 16 * a.heads * a.head_dim * 2, dev).view(torch.bfloat16)
    for t in kv.values():
        t.view(-1).copy_(data)  # real KV bytes, so the codec compresses as it would
    p = PagedKV(kv, nb, 16, stage_all=True)
    eng = CopyEngine(dev)
    c = GpuCodec.open(dev, eng.stream, eng.empty)
    if c is None:
        return
    chunk = p.image_bytes(a.blocks)
    pool = StagingPool(c.bound(chunk + TRAILER_LEN), c.bound(chunk + TRAILER_LEN) * a.chunks,
                       eng.cuda)
    ids = [list(range(1 + i * a.blocks, 1 + (i + 1) * a.blocks)) for i in range(a.chunks)]
    slabs = pool.acquire(chunk, a.chunks)
    for s_ in slabs:
        s_.dev = eng.empty(chunk + TRAILER_LEN + 8)  # (+ 8: the per-chunk check's sum)
    trs = [torch.frombuffer(bytearray(device_trailer(bytes([i]) * 32, chunk, True)),
                            dtype=torch.uint8) for i in range(a.chunks)]
    lens = [0] * a.chunks

    def save_batched():
        devs = [s_.dev[:chunk + TRAILER_LEN] for s_ in slabs]

        def fn():
            for b, d, tr in zip(ids, devs, trs):
                p.pack(b, d, non_blocking=eng.cuda)
                d[chunk:].copy_(tr)
            c.xxh3_batch([(d.data_ptr(), chunk, d.data_ptr() + chunk + CHECKSUM_AT)
                          for d in devs])
        eng.run(fn)
        evs = []

        def emit(i, stored):
            lens[i] = stored.numel()
            evs.append(eng.copy(slabs[i].buf[:lens[i]], stored))
        eng.run(lambda: c.encode_batch(devs, emit), None)
        for e in evs:
            e.synchronize()

    def load_batched():
        devs = [s_.dev[:chunk + TRAILER_LEN] for s_ in slabs]
        states = c.decode_states(len(devs), chunk + TRAILER_LEN)
        for i, (s_, d) in enumerate(zip(slabs, devs)):
            n = lens[i]
            val = c.buffer("val", n)[:n]
            eng.copy(val, s_.buf[:n])
            eng.run(lambda: c.decode_start(s_.buf, val, n, d, states[i]), None)
        row = TRAILER_LEN + 4
        tab = c.buffer("checks", row * len(devs))

        def check():
            for i, d in enumerate(devs):
                tab[i * row:i * row + TRAILER_LEN].copy_(d[chunk:])
            c.xxh3_batch([(d.data_ptr(), chunk, tab.data_ptr() + i * row + TRAILER_LEN)
                          for i, d in enumerate(devs)])
            return bytes(tab[:row * len(devs)].cpu().numpy())
        got = eng.run(check, None)[0]  # the one wait: the decodes' statuses too
        for i in range(len(devs)):
            c.decode_finish(states[i])
            g = got[i * row:(i + 1) * row]
            assert g[24:28] == g[32:36], "checksum mismatch"
        ev = None
        for b, d in zip(ids, devs):
            ev = eng.run(lambda: p.unpack(b, d[:chunk], non_blocking=eng.cuda), None)[1]
        ev.synchronize()

    def save():
        evs = []
        for i, (b, s_) in enumerate(zip(ids, slabs)):
            d = s_.dev[:chunk + TRAILER_LEN]

            def fn():
                p.pack(b, d, non_blocking=eng.cuda)
                d[chunk:].copy_(trs[i])
                c.xxh3(d, chunk, d.data_ptr() + chunk + CHECKSUM_AT)
            eng.run(fn)
            out = c.buffer("out", c.bound(d.numel()))
            n = eng.run(lambda: c.encode(d, out), None)[0]
            lens[i] = n
            evs.append(eng.copy(s_.buf[:n], out[:n]))
        for e in evs:
            e.synchronize()

    def load():
        ev = None
        for i, (b, s_) in enumerate(zip(ids, slabs)):
            n, d = lens[i], s_.dev[:chunk + TRAILER_LEN]
            val = c.buffer("val", n)[:n]
            eng.copy(val, s_.buf[:n])
            eng.run(lambda: c.decode(s_.buf, val, n, d), None)

            def check():
                c.xxh3(d, chunk, d.data_ptr() + chunk + TRAILER_LEN)
                return bytes(s_.dev[chunk:chunk + TRAILER_LEN + 4].cpu().numpy())
            got = eng.run(check, None)[0]
            assert got[24:28] == got[32:36], "checksum mismatch"
            ev = eng.run(lambda: p.unpack(b, d[:chunk], non_blocking=eng.cuda), None)[1]
        ev.synchronize()

    save()
    per_chunk = lens[:]
    save_batched()
    assert lens == per_chunk, "batched encode stored other lengths"
    total = chunk * a.chunks
    host = torch.empty(total, dtype=torch.uint8)
    if eng.cuda:
        host = host.pin_memory()
    devbuf = torch.empty(total, dtype=torch.uint8, device=dev)
    ts = {f: [] for f in (save, save_batched, load, load_batched)}
    for _ in range(2):  # per chunk and batched alternated twice; the better median of each
        for f in ts:
            ts[f].append(timed(f, sync, a.reps))
    t_save, t_bsave, t_load, t_bload = (min(ts[f]) for f in ts)
    t_d2h = timed(lambda: host.copy_(devbuf, non_blocking=True), sync, a.reps)
    t_h2d = timed(lambda: devbuf.copy_(host, non_blocking=True), sync, a.reps)
    gb = lambda t: total / t / 1e9  # noqa: E731
    print("connector GPU codec path, %d chunks x %d blocks (stored %.3f of plain), %s:"
          % (a.chunks, a.blocks, sum(lens) / total, dev))
    print("  save (pack + xxh3 + encode + D2H), batched: %.2f GB/s   per chunk: %.2f GB/s   "
          "pinned D2H copy %.2f GB/s   ratio %.2fx"
          % (gb(t_bsave), gb(t_save), gb(t_d2h), t_d2h / t_bsave))
    print("  load (H2D + decode + xxh3 + scatter), batched: %.2f GB/s   per chunk: %.2f GB/s   "
          "pinned H2D copy %.2f GB/s   ratio %.2fx"
          % (gb(t_bload), gb(t_load), gb(t_h2d), t_h2d / t_bload))
    for s_ in slabs:
        pool.release(s_)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--twin", action="store_true", help="CPU tensors, CPU twins")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=16, help="blocks per chunk")
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--codec-mib", type=int, default=1024)
    ap.add_argument("--sum-values", type=int, default=256,
                    help="values the batched XXH3 figure splits --codec-mib into")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import torch

    if a.twin:
        dev, sync = torch.device("cpu"), (lambda: None)
    elif torch.cuda.is_available():
        dev, sync = torch.device("cuda"), torch.cuda.synchronize
        print("GPU: %s" % torch.cuda.get_device_name(0))
    else:
        print("bench/gpu_connector.py: no CUDA device (--twin runs the CPU twin)")
        sys.exit(77)
    print("load avg: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    copy_path(a, dev, sync)
    codec(a, dev, sync)
    codec_path(a, dev, sync)


if __name__ == "__main__":
    main()
