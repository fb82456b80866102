"""The connector's GPU data path, run through its CPU twin (this machine and CI have no GPU):
the staging pool (slabs allocated once, bounded, a wait when exhausted), the copy engine's
staged loads and saves (staging = "always" stages even zero-copy layouts, the path CUDA
tensors take), layer-wise pipelining over it, and cross-layer KV caches
(register_cross_layers_kv_cache) storing and loading the same bytes as per-layer tensors.
The stand-in engine, the real connector and a real openlaked."""

import threading
import time

import pytest

torch = pytest.importorskip("torch")

import tinymodel  # noqa: E402
from conftest import KV_DATA_MISSING  # noqa: E402
from vllm_standin import Engine, FakeModel, Request, make_kv_caches, make_vllm_config  # noqa
from vllm_standin.pool import dead_addr, kv_pools, pool  # noqa: E402,F401

from openlake_client.staging import DONE, CopyEngine, StagingPool  # noqa: E402

L, H, D, BS, NB = 4, 2, 8, 16, 64
A = [(i * 37 + 11) % 500 for i in range(100)]


def cfg(addr, layout="fa", chunk=16, prefix_caching=True, **extra):
    ex = {"openlake_nodes": [addr], "chunk_size": chunk, "timeout_ms": 30000,
          "log_interval_s": 0.0, "lookup_inline_ms": 60000}
    ex.update(extra)
    return make_vllm_config(model="standin/gpupath", block_size=BS, num_gpu_blocks=NB,
                            num_layers=L, kv_heads=H, head_size=D, use_mla=(layout == "mla"),
                            extra=ex, prefix_caching=prefix_caching)


def engine(c, layout="fa", cross_layer=False):
    return Engine(c, lambda r: (make_kv_caches(layout, L, NB, BS, H, D),
                                FakeModel(L, H, D, layout, r)),
                  NB, cross_layer=cross_layer)


def serve(e, rid, prompt, max_tokens=3):
    e.add(Request(rid, prompt, max_tokens=max_tokens))
    e.run()
    e.scheduler.assert_empty()
    return e.scheduler.finished[rid].output_token_ids


def wside(e):
    return e.workers[0].c._worker


def test_pool_waits_when_exhausted_and_never_grows():
    p = StagingPool(4096, 3 * 4096, pinned=False)
    assert p.nmax == 3
    a = p.acquire(4096, 2)
    b = p.acquire(100)[0]
    assert p.allocations == 3 and p.outstanding() == 3
    got, started = [], threading.Event()

    def taker():
        started.set()
        got.append(p.acquire(4096, 2))

    t = threading.Thread(target=taker)
    t.start()
    started.wait(30)
    deadline = time.monotonic() + 60
    while p.waits == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.waits == 1 and not got  # waiting, not allocating
    p.release(b)
    assert not got or len(got[0]) == 2
    p.release(a[0], DONE)  # a completed event: reusable at once
    t.join(60)
    assert len(got) == 1 and len(got[0]) == 2
    assert p.allocations == 3  # the slabs it got are ones given back
    assert {s.index for s in got[0]} <= {a[0].index, b.index}
    with pytest.raises(ValueError):
        p.acquire(4097)
    with pytest.raises(ValueError):
        p.acquire(1, 4)
    with pytest.raises(TimeoutError):
        p.acquire(1, 2, timeout=0.05)


def test_copy_engine_cpu_twin():
    eng = CopyEngine(torch.device("cpu"))
    assert not eng.cuda and eng.stream is None
    src = torch.arange(64, dtype=torch.uint8)
    dst = torch.zeros(64, dtype=torch.uint8)
    ev = eng.copy(dst, src)
    assert ev.query() and torch.equal(dst, src) and eng.copies == 1
    eng.order_compute(ev)  # no stream to order: a no-op


@pytest.mark.parametrize("layerwise", [False, True], ids=["whole", "layerwise"])
@pytest.mark.parametrize("layout", ["fa", "bhnc"])
def test_staged_loads_and_saves_allocate_nothing_after_warmup(pool, layout, layerwise):
    """Many staged saves and loads (two per request, eight requests) take their slabs from
    the pool: a host buffer is allocated only while every slab is out (whole chunks: none
    after the first request; layer-wise, the save thread may lag the forward by any number
    of layers, so the most slabs out at once varies from run to run); answers are right."""
    ref = serve(engine(cfg(dead_addr(), layout), layout), "ref", A)
    c = cfg(pool.kv_addr, layout, staging="always", staging_mb=1, layerwise=layerwise,
            async_save=False, prefix_caching=False)  # every prefix comes from the pool
    e = engine(c, layout)
    ws = wside(e)
    assert ws.staging is not None and not ws.kv.zero_copy
    assert serve(e, "warm", A) == ref
    after_warmup, acquired = ws.staging.allocations, ws.staging.acquired
    assert 0 < after_warmup <= ws.staging.nmax
    for i in range(8):  # each: a hit on A's 96 tokens (loads) and its own suffix (saves)
        p = A[:96] + [(i * 31 + k) % 500 for k in range(20)]
        e.add(Request("R%d" % i, p, max_tokens=2))
        e.run()
        assert e.scheduler.finished["R%d" % i].num_external_computed_tokens == 96
    st = e.merged_stats()
    assert st["blocks_loaded"] >= 8 * 6 and st["blocks_saved"] >= 6 + 8
    staged = 8 * (6 + 1) * (L if layerwise else 1)  # 6 loaded chunks, 1 saved, per request
    assert ws.staging.acquired - acquired >= staged
    # reuse first: a slab is allocated only when none is free, so never more than were out
    assert ws.staging.allocations == ws.staging.peak <= ws.staging.nmax
    if not layerwise:  # loads, then saves, on the forward's thread: the first request's peak
        assert ws.staging.allocations == after_warmup  # no new host buffers
    assert ws.staging.outstanding() == 0
    assert ws.engine.copies > 0
    e.shutdown()


def test_exhausted_pool_waits_and_proceeds(pool):
    """A pool of two slabs, loads of six chunks and async saves: batches wait for slabs
    to come back (waits counted) and every block still loads and saves."""
    c = cfg(pool.kv_addr, staging="always", staging_mb=1, chunk=16, async_save=True)
    e = engine(c)
    serve(e, "A", A)
    ws = wside(e)
    ws.staging.nmax = 2  # force exhaustion: six chunks per request through two slabs
    e2 = engine(c)
    ws2 = wside(e2)
    ws2.staging.nmax = 2
    e2.add(Request("B", A[:96] + [7] * 20, max_tokens=2))
    e2.run()
    assert e2.scheduler.finished["B"].num_external_computed_tokens == 96
    assert ws2.staging.allocations <= 2 and ws2.staging.outstanding() == 0
    assert e2.merged_stats()["blocks_loaded"] == 6
    e.shutdown()
    e2.shutdown()


@pytest.mark.parametrize("staging", ["auto", "always"])
@pytest.mark.parametrize("layout", ["fa", "fa_hnd", "flashinfer", "bhnc", "mla"])
def test_cross_layer_loads_the_same_bytes_as_per_layer(pool, layout, staging):
    """A cross-layer engine (one KV tensor for all layers, in the physical order vLLM's
    backend gives) and a per-layer one load the same tokens' KV from chunks the other saved:
    the same bytes land in their blocks. Block-major orders (FA and FlashInfer NHD, MLA) take
    the one-gather path, the others (HND, the newest FA layout) go layer by layer."""
    c = cfg(pool.kv_addr, layout, staging=staging, cross_layer_blocks=True,
            prefix_caching=False)  # every prefix comes from the pool
    per = engine(c, layout)
    assert wside(per).cross is False
    serve(per, "A", A)  # per-layer saves
    cross = engine(c, layout, cross_layer=True)
    ws = wside(cross)
    assert ws.cross and not ws.disabled
    assert (ws.kv.cross is not None) == (layout in ("fa", "flashinfer", "mla"))
    a, na = loaded_image(cross, "X", A[:96] + [3] * 20)
    b, nb = loaded_image(per, "Y", A[:96] + [4] * 20)
    assert na == nb == 96
    assert a.numel() == b.numel() and torch.equal(a, b)
    assert a.any()  # real KV, not zeros
    # and the other way round: what the cross-layer engine saves, a per-layer one loads
    serve(cross, "Z", [5] * 64 + A[:40])
    per2 = engine(c, layout)
    per2.add(Request("W", [5] * 64 + A[:40], max_tokens=3))
    per2.run()
    assert per2.scheduler.finished["W"].num_external_computed_tokens == 96
    assert per2.scheduler.finished["W"].output_token_ids == \
        cross.scheduler.finished["Z"].output_token_ids
    for x in (per, cross, per2):
        x.shutdown()


def loaded_image(e, rid, prompt):
    """Step e until rid's first step ran (its external prefix loaded); the image of its
    first six blocks then, and how many tokens were loaded. Runs rid to the end."""
    e.add(Request(rid, prompt, max_tokens=2))
    deadline = time.monotonic() + 120
    while not e.scheduler.requests[rid].num_computed_tokens:
        assert time.monotonic() < deadline
        e.step()
    img = wside(e).kv.pack(list(e.scheduler.kv.get_block_ids(rid))[:6])
    n = e.scheduler.requests[rid].num_external_computed_tokens
    e.run()
    return img, n


def test_cross_layer_preference_follows_config_and_groups():
    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector

    c = OpenLakeConnector(cfg(dead_addr()), KVConnectorRole.WORKER, None)
    assert c.prefer_cross_layer_blocks is True
    c.shutdown()
    c = OpenLakeConnector(cfg(dead_addr(), cross_layer_blocks=False), KVConnectorRole.WORKER,
                          None)
    assert c.prefer_cross_layer_blocks is False
    c.shutdown()


@pytest.mark.skipif(tinymodel.data_dir() is None, reason=KV_DATA_MISSING)
@pytest.mark.parametrize("mode", ["staged", "staged-layerwise", "cross", "cross-layerwise",
                                  "codec", "codec-layerwise"])
def test_model_bitwise_equal_through_the_device_path(pool, mode):
    """stories260K: a prefix loaded through staging slabs and the copy engine (and from a
    cross-layer cache) gives the same tokens and bitwise the same logits as recomputing."""
    from test_vllm_model import model_engine

    layerwise = mode.endswith("layerwise")
    cross = mode.startswith("cross")
    extra = {"compress": "exans", "gpu_codec": "always"} if mode.startswith("codec") else {}
    prompt = _seq(1)[:180]
    e1 = model_engine(pool.kv_addr, "fa", layerwise=layerwise, staging="always", **extra)
    _gen(e1, prompt)
    ref = model_engine(dead_addr(), "fa")
    ref_toks, ref_logits = _gen(ref, prompt)
    e2 = model_engine(pool.kv_addr, "fa", layerwise=layerwise, staging="always",
                      cross_layer=cross, **extra)
    assert wside(e2).cross is cross
    assert (wside(e2).codec is not None) == bool(extra)
    toks, logits = _gen(e2, prompt)
    assert e2.scheduler.finished["R"].num_external_computed_tokens == 128
    assert toks == ref_toks and len(logits) == len(ref_logits)
    for a, b in zip(logits, ref_logits):
        assert torch.equal(a, b)
    assert wside(e2).staging.outstanding() == 0


def _seq(i):
    import json

    meta = json.loads((tinymodel.data_dir() / "stories260K" / "meta.json").read_text())
    return meta["sequences"][i]["tokens"]


def _gen(e, prompt):
    e.add(Request("R", prompt, max_tokens=8))
    e.run()
    e.scheduler.assert_empty()
    return e.scheduler.finished["R"].output_token_ids, e.workers[0].logits["R"]


def _values():
    """Values of every kind the stored form distinguishes: empty, under the codec's minimum,
    BF16 KV of several blocks (compressible, a partial last block), random bytes (stored
    plain), a plain value starting with the magic (raw-wrapped)."""
    g = torch.Generator().manual_seed(7)
    kv = (torch.randn(5 * 32768 + 777, generator=g) * 0.05).to(torch.bfloat16)
    out = [b"", b"x" * 10, b"OLZ1 short", bytes(kv.view(torch.uint8).numpy())]
    out.append(bytes(torch.randint(0, 256, (200000,), generator=g, dtype=torch.uint8).numpy()))
    out.append(b"OLZ1" + bytes(torch.randint(0, 256, (70000,), generator=g,
                                             dtype=torch.uint8).numpy()))
    data = tinymodel.data_dir()
    if data is not None:  # real KV blocks of stories260K, when the dump is here
        f = sorted((data / "stories260K").glob("*.k.bf16"))
        if f:
            out.append(f[0].read_bytes()[:3 * 65536 + 4096])
    return out


def test_gpu_codec_twin_stores_what_libopenlake_stores(pool):
    """The twin's stored form of each value is byte for byte what libopenlake with
    compress=exans stores (read back raw by a client without compression), and decoding
    either gives the value: a GPU-saved block loads on a CPU node and back."""
    from openlake_client import connect
    from openlake_client.gpu_codec import GpuCodec

    codec = GpuCodec.open(torch.device("cpu"))
    assert codec is not None and not codec.cuda
    zc = connect([pool.kv_addr], namespace="gpucodec", compress="exans", timeout_ms=30000)
    raw = connect([pool.kv_addr], namespace="gpucodec", timeout_ms=30000)
    vals = _values()
    keys = [bytes([i]) * 32 for i in range(len(vals))]
    assert all(s.name in ("OK", "EXISTS") for s in zc.put(keys, vals))
    stored = raw.get(keys, size_hint=1 << 20)
    compressed = 0
    for v, s in zip(vals, stored):
        src = torch.frombuffer(bytearray(v), dtype=torch.uint8) if v else \
            torch.empty(0, dtype=torch.uint8)
        out = torch.empty(codec.bound(len(v)), dtype=torch.uint8)
        n = codec.encode(src, out)
        assert bytes(out[:n].numpy()) == s, len(v)
        compressed += n < len(v)
        dst = torch.empty(len(v), dtype=torch.uint8)
        assert codec.decode(out, out, n, dst) == len(v)
        assert bytes(dst.numpy()) == v
    assert compressed >= 1  # the KV values really went through the codec
    # what the twin stores, libopenlake reads
    k2 = [b"\xee" * 31 + bytes([i]) for i in range(len(vals))]
    forms = []
    for v in vals:
        src = torch.frombuffer(bytearray(v), dtype=torch.uint8) if v else \
            torch.empty(0, dtype=torch.uint8)
        out = torch.empty(codec.bound(len(v)), dtype=torch.uint8)
        forms.append(bytes(out[:codec.encode(src, out)].numpy()))
    raw.put(k2, forms)
    assert zc.get(k2, size_hint=1 << 20) == vals
    # the whole list as one batch (one wait for every encoded length): the same forms
    got = {}
    codec.encode_batch([torch.frombuffer(bytearray(v), dtype=torch.uint8) if v else
                        torch.empty(0, dtype=torch.uint8) for v in vals],
                       lambda i, out: got.__setitem__(i, bytes(out.numpy())))
    assert [got.get(i) for i in range(len(vals))] == stored
    zc.close()
    raw.close()


def test_gpu_codec_rejects_corrupt_values():
    from openlake_client.gpu_codec import GpuCodec

    codec = GpuCodec.open(torch.device("cpu"))
    v = (torch.randn(3 * 32768) * 0.1).to(torch.bfloat16).view(torch.uint8)
    out = torch.empty(codec.bound(v.numel()), dtype=torch.uint8)
    n = codec.encode(v, out)
    assert n < v.numel()
    dst = torch.empty(v.numel(), dtype=torch.uint8)
    for pos in (2, 20, 16 + 20, 16 + 24 + 12, n - 5):  # magic, length, header CRC, index, data
        bad = out[:n].clone()
        bad[pos] ^= 0x40
        with pytest.raises(OSError) as ei:
            codec.decode(bad, bad, n, dst) if pos != 2 else _plain_mismatch(codec, bad, n, dst)
        assert ei.value.errno in (74, 28)  # EBADMSG, or ENOSPC for a length now too big
    with pytest.raises(OSError):
        codec.decode(out, out, n, torch.empty(v.numel() - 1, dtype=torch.uint8))


def _plain_mismatch(codec, bad, n, dst):
    """A value whose magic was hit reads as plain: n bytes that do not fit dst."""
    codec.decode(bad, bad, n, dst[:n - 1])


@pytest.mark.parametrize("layerwise", [False, True], ids=["whole", "layerwise"])
def test_codec_path_chunks_load_on_the_host_path_and_back(pool, layerwise):
    """compress=exans: chunks a worker saves through the device codec (its CPU twin here)
    load on a worker that compresses on the host (libopenlake), and the other way round,
    with the same answers; the device path really compressed them."""
    ref = serve(engine(cfg(dead_addr())), "ref", A)
    dev = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
              layerwise=layerwise, prefix_caching=False)
    host = cfg(pool.kv_addr, compress="exans", layerwise=layerwise, prefix_caching=False)
    e1 = engine(dev)
    assert wside(e1).codec is not None and wside(e1).raw_store is not None
    assert serve(e1, "A", A) == ref
    plain, stored = wside(e1).codec_bytes
    assert plain > 0 and stored < plain
    e2 = engine(host)
    assert wside(e2).codec is None
    e2.add(Request("B", A[:96] + [9] * 4, max_tokens=3))
    e2.run()
    assert e2.scheduler.finished["B"].num_external_computed_tokens == 96
    assert e2.merged_stats()["load_failures"] == 0
    # host-saved (summed trailer, libopenlake's codec) chunks load on the device path
    C = [(i * 13 + 5) % 500 for i in range(100)]
    refc = serve(engine(cfg(dead_addr())), "refc", C)
    assert serve(e2, "C", C) == refc
    e3 = engine(dev)
    e3.add(Request("D", C, max_tokens=3))
    e3.run()
    assert e3.scheduler.finished["D"].num_external_computed_tokens == 96
    assert e3.scheduler.finished["D"].output_token_ids == refc
    assert e3.merged_stats()["load_failures"] == 0
    assert wside(e3).staging.outstanding() == 0
    for x in (e1, e2, e3):
        x.shutdown()


def test_codec_path_detects_a_corrupt_stored_chunk(pool):
    """A bit flipped in a stored (compressed) chunk is caught by the device decode (block
    CRC-32C): that chunk and the ones after it are recomputed, with the right answer."""
    import openlake_client as ol
    from openlake_client import keys as olkeys

    c = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
            prefix_caching=False)
    ref = serve(engine(cfg(dead_addr())), "ref", A)
    e1 = engine(c)
    serve(e1, "A", A)
    h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
    key = olkeys.rank_key(h[2], 0)
    raw = ol.connect([pool.kv_addr], namespace="vllm", timeout_ms=30000)
    v = bytearray(raw.get([key], size_hint=1 << 20)[0])
    assert v[:5] == b"OLZ1\x01"  # stored compressed, by the device path
    v[len(v) // 2] ^= 0x10
    assert raw.delete([key]) == [ol.Status.OK]
    assert raw.put([key], [bytes(v)]) == [ol.Status.OK]
    raw.close()
    e2 = engine(c)
    e2.add(Request("B", A, max_tokens=3))
    e2.run()
    st = e2.merged_stats()
    assert st["load_failures"] == 1 and st["corrupt_blocks"] == 1
    assert e2.scheduler.finished["B"].output_token_ids == ref
    for x in (e1, e2):
        x.shutdown()


def _stored(addr, ns, keys, compress="off"):
    import openlake_client as ol

    c = ol.connect([addr], namespace=ns, compress=compress, timeout_ms=30000)
    try:
        return c.get(keys, size_hint=1 << 20)
    finally:
        c.close()


def _chunk_keys(e, prompt):
    from openlake_client import keys as olkeys

    h = olkeys.chain_hashes(olkeys.seed_hash(e.sched_conn.ol_identity, ""), prompt, 16)
    return [olkeys.rank_key(x, 0) for x in h]


def test_codec_path_stores_the_host_paths_bytes_and_checksum(pool):
    """A chunk saved through the device codec (CPU twin) is byte for byte what a host save
    (libopenlake's codec) stores: the same ExANS container around the same plain value,
    whose trailer carries the XXH3 of the KV image, as every host-saved chunk's does."""
    from openlake_client.store import FLAG_XXH3, TRAILER, xxh3

    dev = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
              prefix_caching=False, openlake_namespace="gpu-saved")
    host = cfg(pool.kv_addr, compress="exans", prefix_caching=False,
               openlake_namespace="host-saved")
    e1, e2 = engine(dev), engine(host)
    assert wside(e1).codec is not None and wside(e2).codec is None
    assert serve(e1, "A", A) == serve(e2, "A", A)
    keys = _chunk_keys(e1, A)[:6]
    gpu, cpu = _stored(pool.kv_addr, "gpu-saved", keys), _stored(pool.kv_addr, "host-saved", keys)
    assert all(v is not None for v in gpu) and gpu == cpu
    assert sum(v[:5] == b"OLZ1\x01" for v in gpu) >= 1  # compressed ones among them
    payload = wside(e1).payload
    for k, v in zip(keys, _stored(pool.kv_addr, "gpu-saved", keys, "exans")):
        magic, flags, _, plen, kp, crc, _ = TRAILER.unpack(v[payload:])
        img = bytearray(v[:payload])
        assert (magic, plen, kp) == (b"OLK1", payload, k[:8])
        assert flags == FLAG_XXH3 and crc == xxh3()([(_addr(img), payload)])
    for x in (e1, e2):
        x.shutdown()


def test_codec_path_sums_and_encodes_a_batch_in_one_call(pool):
    """The device path takes the trailers' XXH3 of a whole batch of chunks in one call (one
    launch on a GPU): a save batch of six chunks is one call of six sums, their load one
    call again, never a call per chunk; what the call wrote is each image's XXH3. The save
    batch's encodes are one call too (one wait for all six chunks' encoded lengths), and the
    load's decodes are only queued (their statuses come with the checks' one copy)."""
    from openlake_client.store import xxh3

    c = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
            prefix_caching=False, async_save=False, openlake_namespace="batched-sums")
    calls, encodes, decodes = [], [], []

    def spy(e):
        codec = wside(e).codec
        real_batch, real_one = codec.xxh3_batch, codec.xxh3

        def batch(sums):
            real_batch(sums)
            calls.append([(n, xxh3()([(src, n)]) & 0xffffffff,
                           int.from_bytes(ctypes_at(out, 4), "little")) for src, n, out in sums])

        def one(*a):
            calls.append(None)
            real_one(*a)

        def encode_batch(srcs, emit):
            encodes.append(len(srcs))
            codec.__class__.encode_batch(codec, srcs, emit)

        def encode(*a):
            encodes.append(None)
            return codec.__class__.encode(codec, *a)
        def decode(*a):
            decodes.append("wait")
            return codec.__class__.decode(codec, *a)

        def decode_start(*a):
            decodes.append("start")
            return codec.__class__.decode_start(codec, *a)
        codec.xxh3_batch, codec.xxh3 = batch, one
        codec.encode_batch, codec.encode = encode_batch, encode
        codec.decode, codec.decode_start = decode, decode_start

    e1 = engine(c)
    spy(e1)
    serve(e1, "A", A)
    assert [len(x) for x in calls] == [6], calls
    assert all(want == got for _, want, got in calls[0])
    assert encodes == [6]  # the save batch encoded with one wait for its lengths
    calls.clear()
    e2 = engine(c)
    spy(e2)
    e2.add(Request("B", A, max_tokens=3))
    e2.run()
    assert e2.scheduler.finished["B"].num_external_computed_tokens == 96
    assert [len(x) for x in calls] == [6], calls
    assert decodes == ["start"] * 6  # queued, no wait each: the check's copy is the one
    assert all(want == got for _, want, got in calls[0])
    for x in (e1, e2):
        x.shutdown()


def ctypes_at(addr, n):
    import ctypes

    return ctypes.string_at(addr, n)


def _addr(buf):
    import ctypes

    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


@pytest.mark.parametrize("saved_by", ["device", "host"])
def test_codec_path_catches_a_corrupt_plain_stored_chunk(pool, saved_by):
    """A chunk whose stored form is plain (no ExANS blocks, so no block CRC) with one KV bit
    flipped: the device path's load checks the trailer's XXH3 on the device and recomputes
    that chunk and the ones after it, the right answer; so does a host load of it (the
    device path's sum is the host's). Before, a device-saved chunk had no sum: wrong KV."""
    import openlake_client as ol

    dev = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
              prefix_caching=False, openlake_namespace="plain-" + saved_by)
    host = cfg(pool.kv_addr, compress="exans", prefix_caching=False,
               openlake_namespace="plain-" + saved_by)
    ref = serve(engine(cfg(dead_addr())), "ref", A)
    e1 = engine(dev if saved_by == "device" else host)
    serve(e1, "A", A)
    key = _chunk_keys(e1, A)[2]
    v = bytearray(_stored(pool.kv_addr, "plain-" + saved_by, [key], "exans")[0])
    v[100] ^= 0x10  # in the KV image
    raw = ol.connect([pool.kv_addr], namespace="plain-" + saved_by, timeout_ms=30000)
    assert raw.delete([key]) == [ol.Status.OK]
    assert raw.put([key], [bytes(v)]) == [ol.Status.OK]  # stored plain: no ExANS CRC
    raw.close()
    for c in (dev, host):
        e2 = engine(c)
        e2.add(Request("B", A, max_tokens=3))
        e2.run()
        st = e2.merged_stats()
        assert st["load_failures"] == 1 and st["corrupt_blocks"] == 1, st
        assert e2.scheduler.finished["B"].output_token_ids == ref
        e2.shutdown()
    e1.shutdown()


def test_codec_path_device_buffers_are_reused(pool):
    """The GPU codec's device buffers (work, stored form, loaded value, and one image per
    slab) are made during the first requests and reused after: none per chunk."""
    c = cfg(pool.kv_addr, compress="exans", staging="always", gpu_codec="always",
            staging_mb=1, async_save=False, prefix_caching=False)
    e = engine(c)
    ws = wside(e)
    serve(e, "warm", A)
    serve(e, "warm2", A)
    made = ws.codec.allocations
    assert 0 < made
    for i in range(6):
        p = A[:96] + [(i * 31 + k) % 500 for k in range(20)]
        e.add(Request("R%d" % i, p, max_tokens=2))
        e.run()
        assert e.scheduler.finished["R%d" % i].num_external_computed_tokens == 96
    assert ws.codec.allocations == made
    assert 0 < sum(s.dev is not None for s in ws.staging._free) <= ws.staging.nmax
    e.shutdown()


@pytest.mark.parametrize("layout", ["fa", "fa_hnd", "flashinfer", "bhnc", "mla"])
def test_block_runs_pack_and_unpack_what_index_ops_do(monkeypatch, layout):
    """pack / unpack move runs of consecutive blocks with strided copies (all layers at once
    where the layers are alike) and other ids with index ops: the same images and the same
    tensors afterwards, for every layout, whole chunks and one layer."""
    from openlake_client import layouts
    from openlake_client.layouts import PagedKV

    kv = make_kv_caches(layout, 3, 40, BS, H, D)
    for t in kv.values():
        t.copy_(torch.randn(t.shape).to(t.dtype))
    img, tensors = {}, {}
    for runs_max in (layouts._RUNS_MAX, 0):  # 0: index ops for every id list
        monkeypatch.setattr(layouts, "_RUNS_MAX", runs_max)
        for ids in ([5], [3, 4, 5, 6], [9, 10, 2, 3], [1, 3, 5, 7, 9, 11], [7, 6, 5]):
            for layer in (None, 1):
                p = PagedKV(kv, 40, BS, stage_all=True)
                img[runs_max, tuple(ids), layer] = p.pack(ids, layer=layer)
                kv2 = {k: v.clone() for k, v in kv.items()}
                src = torch.arange(p.image_bytes(len(ids), layer), dtype=torch.int64) % 251
                PagedKV(kv2, 40, BS, stage_all=True).unpack(ids, src.to(torch.uint8), layer)
                tensors[runs_max, tuple(ids), layer] = kv2
    for (r, ids, layer), v in img.items():
        if r:
            assert torch.equal(v, img[0, ids, layer]), (ids, layer)
            a, b = tensors[r, ids, layer], tensors[0, ids, layer]
            assert all(torch.equal(a[k], b[k]) for k in a), (ids, layer)
            if layer is None:  # really moved: the unpacked blocks hold the image
                assert not all(torch.equal(a[k], kv[k]) for k in a)


def test_cuda_library_is_built_and_fails_cleanly_without_a_gpu():
    """Where nvcc and cudart are (meson builds libol_exans_gpu from exans.cu): it loads, says
    it is the CUDA one, and on a machine without a GPU its calls fail with -EIO, no crash.
    Its kernels' logic is checked on the CPU by the codec_cuda_emu unit test."""
    from openlake_client.gpu_codec import load_library

    lib = load_library(True)
    if lib is None:
        pytest.skip("libol_exans_gpu not built here (no nvcc or cudart)")
    assert lib.ol_exans_gpu_is_cuda() == 1
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: bench/gpu_check.sh checks it")
    n = 100000
    src = torch.zeros(n, dtype=torch.uint8)
    out = torch.empty(lib.ol_exans_gpu_bound(n), dtype=torch.uint8)
    work = torch.empty(lib.ol_exans_gpu_work_bytes(n), dtype=torch.uint8)
    assert lib.ol_exans_gpu_encode(src.data_ptr(), n, out.data_ptr(), out.numel(),
                                   work.data_ptr(), None) == -5
    assert lib.ol_exans_gpu_decode(out.data_ptr(), out.data_ptr(), 10, src.data_ptr(), n,
                                   work.data_ptr(), None) == -5
    for m in (n, 100):  # the kernel; a short value hashed through the host
        assert lib.ol_exans_gpu_xxh3(src.data_ptr(), m, out.data_ptr(), None) == -5
    import numpy as np

    tab = np.array([[src.data_ptr(), m, out.data_ptr()] for m in (n, 100, 0)], np.uint64)
    assert lib.ol_exans_gpu_xxh3_batch(tab.ctypes.data, 3, work.data_ptr(), None) == -5
    state = torch.empty(lib.ol_exans_gpu_state_bytes(n), dtype=torch.uint8)
    assert lib.ol_exans_gpu_encode_start(src.data_ptr(), n, work.data_ptr(), state.data_ptr(),
                                         None) == -5
    assert lib.ol_exans_gpu_decode_start(out.data_ptr(), out.data_ptr(), 10, src.data_ptr(),
                                         n, work.data_ptr(), state.data_ptr(), None) == -5


def test_cross_layer_names_follow_kv_cache_config():
    """vLLM fills index i of the cross-layer tensor from kv_cache_config.kv_cache_tensors[i]:
    the layer-wise hooks' names map to that index, whatever integer the name holds."""
    from types import SimpleNamespace

    from openlake_client.openlake_connector import KVConnectorRole, OpenLakeConnector
    from vllm_standin.worker import cross_layer_views

    names = ["model.layers.%d.self_attn.attn" % i for i in (2, 0, 3, 1)]
    kcc = SimpleNamespace(num_blocks=NB, kv_cache_groups=[], kv_cache_tensors=[
        SimpleNamespace(shared_by=[n]) for n in names])
    c = OpenLakeConnector(cfg(dead_addr(), layerwise=True), KVConnectorRole.WORKER, kcc)
    kv = make_kv_caches("fa", L, NB, BS, H, D)
    cross, backend, _ = cross_layer_views(kv, "fa")
    c.register_cross_layers_kv_cache(cross, backend)
    w = c._worker
    assert not w.disabled and w.cross
    assert [w._layer_of(n) for n in names] == [0, 1, 2, 3]
    assert w._layer_of("model.layers.9.self_attn.attn") is None
    c.shutdown()
