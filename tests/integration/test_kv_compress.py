"""libopenlake's ExANS compression (opts.compress) seen from Python: connect(compress="exans")
round trips of torch bf16 tensors and real KV data, plain and compressed clients on the same
keys, and the vLLM connector with compress = "exans" in the stand-in engine: bitwise-equal
loads, fewer bytes sent (client stats)."""

import hashlib
import os
from pathlib import Path

import pytest

from conftest import skip_without_kv_data
from vllm_standin.pool import REPO, kv_pools, pool  # noqa: F401


def K(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


@pytest.fixture(params=["local", "tcp"])
def pair(request, kv_pools):
    """(compressing client, plain client) on one real pool."""
    import openlake_client as ol

    d = kv_pools()
    z = ol.connect([d.kv_addr], device=request.param, timeout_ms=5000, compress="exans")
    p = ol.connect([d.kv_addr], device=request.param, timeout_ms=5000)
    yield z, p
    z.close()
    p.close()


def test_torch_bf16_roundtrip(pair):
    torch = pytest.importorskip("torch")
    z, p = pair
    g = torch.Generator().manual_seed(7)
    ts = [(torch.randn(n, generator=g) * s).to(torch.bfloat16)
          for n, s in ((32768, 1.0), (524288, 0.05), (100000, 3.0))]
    keys = [K("t", i) for i in range(len(ts))]
    assert z.put(keys, ts) == [0] * len(ts)
    outs = [torch.zeros_like(t) for t in ts]
    assert z.get(keys, out=outs) == [True] * len(ts)
    for a, b in zip(ts, outs):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    raw = p.get(keys)  # what the server holds: OLZ1 header + ExANS stream, smaller
    for t, r in zip(ts, raw):
        assert r[:4] == b"OLZ1" and len(r) < 0.9 * t.numel() * 2
    st = z.client_stats()
    total = sum(t.numel() * 2 for t in ts)
    assert st["compress"] == "exans" and st["compress_in_bytes"] == total
    assert st["compress_out_bytes"] == sum(len(r) for r in raw) < 0.9 * total
    assert st["decompress_out_bytes"] == total
    assert p.client_stats()["compress"] == "off"


def test_mixed_clients_and_random_bytes(pair):
    z, p = pair
    plain = bytes(range(256)) * 512
    rnd = os.urandom(200_000)
    assert p.put([K("p", 1)], [plain]) == [0]
    assert z.get([K("p", 1)]) == [plain]  # a plain client's value, returned as is
    assert z.put([K("r", 1)], [rnd]) == [0]
    assert p.get([K("r", 1)]) == [rnd]  # incompressible: stored plain, no header
    assert z.get([K("r", 1)]) == [rnd]
    st, ln = p.exists_len([K("r", 1)])
    assert st == [0] and ln == [len(rnd)]
    bad = bytearray(b"OLZ1\x01\x00\x00\x00" + (1000).to_bytes(8, "little") + os.urandom(500))
    assert p.put([K("bad", 1)], [bytes(bad)]) == [0]
    assert z.get([K("bad", 1)]) == [None]  # corrupt -> never wrong bytes
    assert z.client_stats()["blocks_corrupt"] == 1


def test_real_kv_blocks(pair):
    KVDATA = skip_without_kv_data() / "stories260K"
    z, p = pair
    files = sorted(KVDATA.glob("seq*.bf16"))[:16]
    vals = [f.read_bytes() for f in files]
    keys = [K("real", f.name) for f in files]
    assert z.put(keys, vals) == [0] * len(vals)
    assert z.get(keys) == vals
    st = z.client_stats()
    assert st["compress_out_bytes"] < 0.8 * st["compress_in_bytes"]


def test_connect_rejects_bad_mode():
    import openlake_client as ol

    with pytest.raises(ValueError):
        ol.connect(["127.0.0.1:1"], compress="zstd")


# ---------------------------------------------------------------- the vLLM connector

def test_connector_with_compression(pool):
    torch = pytest.importorskip("torch")
    from test_vllm_connector import A, SUFFIX, block_bytes, blocks_of, cfg, engine, reference

    e1 = engine(cfg(pool.kv_addr, compress="exans"))
    assert e1.workers[0].c.ol_config.compress == "exans"
    e1.add(__import__("vllm_standin").Request("A", A, max_tokens=3))
    e1.run()
    a_ids = blocks_of(e1, e1.schedule_log[0], "A")
    assert e1.merged_stats()["blocks_saved"] == 6
    st1 = e1.workers[0].c._store.client().client_stats()
    assert st1["compress"] == "exans" and st1["compress_in_bytes"] > 0
    assert st1["compress_out_bytes"] < st1["compress_in_bytes"]  # fewer bytes on the wire
    e2 = engine(cfg(pool.kv_addr, compress="exans"))
    B = A[:96] + SUFFIX
    e2.add(__import__("vllm_standin").Request("B", B, max_tokens=3))
    so = e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 96
    b_ids = blocks_of(e2, so, "B")
    for x, y in zip(block_bytes(e1, 0, a_ids[:6]), block_bytes(e2, 0, b_ids[:6])):
        assert torch.equal(x, y)
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    st = e2.merged_stats()
    assert st["blocks_loaded"] == 6 and st["load_failures"] == 0
    st2 = e2.workers[0].c._store.client().client_stats()
    assert st2["decompress_out_bytes"] > st2["decompress_in_bytes"] > 0
    e1.shutdown()
    e2.shutdown()
