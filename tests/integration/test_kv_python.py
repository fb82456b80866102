"""The Python package against a real openlaked KV pool: round trips of bytes, memoryview,
numpy arrays, torch tensors and lists of tensors; misses; namespaces; exists / delete /
stats; the `python3 -m openlake_client stats` CLI; a pool that is down."""

import hashlib
import json
import os
import subprocess
import time

import pytest

from vllm_standin.pool import REPO, dead_addr, kv_pools, require_pool_binaries  # noqa: F401

PY = "/usr/bin/python3"


def K(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def test_import_without_library_torch_numpy():
    """From a checkout: no torch, numpy or vLLM imported, no library needed to import."""
    code = ("import sys, openlake_client, openlake_client.openlake_connector as oc;"
            "bad=[m for m in ('torch','numpy','vllm') if m in sys.modules];"
            "assert not bad, bad; print(oc.OpenLakeConnector.__name__)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), OPENLAKE_LIBRARY="/nonexistent.so")
    r = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OpenLakeConnector"


def test_pip_install_offline(tmp_path):
    """`pip install ./python` works offline with Debian's setuptools (no build deps)."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(REPO / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                        "__pycache__"))
    tgt = tmp_path / "site"
    r = subprocess.run([PY, "-m", "pip", "install", "--no-index", "--no-build-isolation", "-q",
                        "--target", str(tgt), str(src)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # the seeds' `pip install openlake-vllm` names this distribution
    assert [p.name for p in tgt.glob("*.dist-info")] == ["openlake_vllm-0.1.0.dist-info"]
    env = dict(os.environ, PYTHONPATH=str(tgt))
    code = "import openlake_client as ol, openlake_client.openlake_connector; print(ol.__file__)"
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=env)
    assert r.returncode == 0 and str(tgt) in r.stdout, r.stderr
    r = subprocess.run([PY, "-m", "openlake_client", "stats", "--help"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "--nodes" in r.stdout


def test_missing_library_is_a_clear_error(monkeypatch):
    import openlake_client._lib as lib

    monkeypatch.setattr(lib, "_lib", None)
    monkeypatch.setattr(lib, "candidates", lambda: ["/nonexistent/libopenlake.so"])
    with pytest.raises(ImportError, match="libopenlake not found"):
        lib.load()


@pytest.fixture(params=["local", "tcp"])
def client(request, kv_pools):
    d = kv_pools()
    import openlake_client as ol

    c = ol.connect([d.kv_addr], device=request.param, timeout_ms=5000)
    c.daemon = d
    yield c
    c.close()


def test_bytes_memoryview_roundtrip(client):
    import openlake_client as ol

    vals = [b"x", os.urandom(4096), os.urandom(100_000), bytes(range(256)) * 1000]
    keys = [K("b", i) for i in range(len(vals))]
    assert client.put(keys, vals) == [ol.Status.STORED] * len(vals)
    assert str(ol.Status.EXISTS) == "exists" and ol.Status.HIT == ol.Status.OK == 0
    assert client.put(keys[:1], [b"other"]) == [ol.Status.EXISTS]
    assert client.get(keys) == vals
    big = bytearray(os.urandom(300_000))
    mv = memoryview(big)[1000:201000]  # a slice: read-only views and offsets
    k2 = [K("mv", 1), K("mv", 2)]
    assert client.put(k2, [mv, memoryview(bytes(mv)).toreadonly()]) == [ol.Status.OK] * 2
    got = client.get(k2)
    assert got[0] == bytes(mv) and got[1] == bytes(mv)
    out = bytearray(len(mv))
    assert client.get(k2[:1], out=[out]) == [True]
    assert bytes(out) == bytes(mv)


def test_miss_exists_delete(client):
    import openlake_client as ol

    k = [K("d", i) for i in range(3)]
    assert client.get(k) == [None, None, None]
    assert client.exists(k) == [False] * 3
    client.put(k[:2], [b"a" * 10, b"b" * 20])
    assert client.exists(k) == [True, True, False]
    st, lens = client.exists_len(k)
    assert lens[:2] == [10, 20] and st[2] == ol.Status.MISS
    assert client.delete(k) == [ol.Status.OK, ol.Status.OK, ol.Status.MISS]
    assert client.get(k) == [None] * 3


def test_numpy_roundtrip(client):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal((64, 128)).astype(np.float32),
            rng.integers(0, 1 << 15, (3, 1000), dtype=np.int16),
            rng.standard_normal((32, 32))[:, ::2]]  # non-contiguous: staged on put
    keys = [K("np", i) for i in range(3)]
    assert all(s == 0 for s in client.put(keys, arrs))
    outs = [np.zeros_like(a) for a in arrs]
    assert client.get(keys, out=outs) == [True, True, True]
    for a, o in zip(arrs, outs):
        assert np.array_equal(a, o)
    small = np.zeros(10, np.float32)
    assert client.get(keys[:1], out=[small]) == [False]  # value does not fit: no hit


def test_torch_tensors_and_lists(client):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    a = torch.randn(16, 4, 8, generator=g).to(torch.bfloat16)
    b = torch.randn(1000, generator=g)
    strided = torch.randn(8, 16, generator=g).t()  # non-contiguous
    parts = [torch.randn(2, 16, 4, 8, generator=g).to(torch.bfloat16) for _ in range(3)]
    keys = [K("t", i) for i in range(4)]
    st = client.put(keys, [a, b, strided, parts])
    assert [int(s) for s in st] == [0, 0, 0, 0]
    oa, ob, os_ = torch.zeros_like(a), torch.zeros_like(b), torch.zeros(8, 16).t()
    oparts = [torch.zeros_like(p) for p in parts]
    assert client.get(keys, out=[oa, ob, os_, oparts]) == [True] * 4
    assert torch.equal(oa.view(torch.int16), a.view(torch.int16))
    assert torch.equal(ob, b) and torch.equal(os_, strided)
    for p, o in zip(parts, oparts):
        assert torch.equal(p.view(torch.int16), o.view(torch.int16))
    # the list is stored as the concatenation of its parts
    flat = client.get(keys[3:])[0]
    assert flat == b"".join(p.contiguous().view(torch.int16).numpy().tobytes() for p in parts)


def test_many_blocks_sizes(client):
    import openlake_client as ol

    sizes = [4096] * 400 + [65536] * 50 + [1 << 20] * 4 + [4 << 20]
    vals = [hashlib.sha256(b"%d" % i).digest() * (n // 32) for i, n in enumerate(sizes)]
    keys = [K("many", i) for i in range(len(vals))]
    st = client.put(keys, vals)
    assert st.count(ol.Status.OK) == len(vals), set(map(str, st))
    got = client.get(keys)
    bad = [i for i, (g, v) in enumerate(zip(got, vals)) if g != v]
    assert not bad, bad[:10]


def test_namespaces_are_apart(client):
    import openlake_client as ol

    d = client.daemon
    a = ol.connect([d.kv_addr], device=client.device, namespace="model-a")
    b = ol.connect([d.kv_addr], device=client.device, namespace="model-b")
    try:
        k = [K("ns")]
        assert a.put(k, [b"from a"]) == [ol.Status.OK]
        assert b.get(k) == [None] and b.exists(k) == [False]
        assert b.put(k, [b"from b"]) == [ol.Status.OK]
        assert a.get(k) == [b"from a"] and b.get(k) == [b"from b"]
        assert client.get(k) == [None]  # the default namespace is a third one
    finally:
        a.close()
        b.close()


def test_stats_and_cli(client, tmp_path):
    client.put([K("s", 1)], [b"z" * 5000])
    client.get([K("s", 1), K("s", 2)])
    st = client.stats()
    assert len(st["nodes"]) == 1 and st["nodes"][0]["up"] is True
    for f in ("dram_capacity", "dram_used", "entries", "hits", "misses", "evictions"):
        assert f in st["total"], f
    assert st["total"]["entries"] >= 1 and st["total"]["hits"] >= 1
    assert st["total"]["misses"] >= 1
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    cmd = [PY, "-m", "openlake_client", "stats", "--nodes", client.daemon.kv_addr,
           "--metrics-dir", str(tmp_path), "--timeout-ms", "15000"]
    r = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["pool"]["nodes"][0]["up"] is True, doc
    assert doc["pool"]["total"]["entries"] == st["total"]["entries"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "pool: 1 node(s)" in r.stdout and "hits" in r.stdout


def test_pool_down_is_unreachable_quickly():
    require_pool_binaries()
    import openlake_client as ol

    c = ol.connect([dead_addr()], device="tcp", timeout_ms=500)
    try:
        t0 = time.monotonic()
        assert c.put([K("down")], [b"v"]) == [ol.Status.UNREACHABLE]
        assert c.get([K("down")]) == [None]
        assert c.exists([K("down")]) == [False]
        assert time.monotonic() - t0 < 10  # 3 calls of at most 500 ms, on a loaded machine
    finally:
        c.close()


def test_torch_cuda_staging_when_available(client):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    x = torch.randn(1 << 20, device="cuda")
    assert client.put([K("cuda")], [x]) == [0]
    y = torch.zeros_like(x)
    assert client.get([K("cuda")], out=[y]) == [True]
    assert torch.equal(x, y)
