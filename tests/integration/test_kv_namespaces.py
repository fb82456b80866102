"""Per-namespace figures and quota of the KV pool against the real openlaked (issues 13, 15).

Two clients in two namespaces write to a pool with [kv] namespace_quota_frac = 0.25: what each
namespace holds now, per tier, on /metrics (openlake_kv_ns_blocks, openlake_kv_ns_bytes) and
in `openlake kv stats` (text and --json) equals what the clients wrote, after deletes and
after a restart (the NVMe tier's blocks count again once reloaded). The namespace that floods
past its quota moves only its own blocks out of DRAM: the other keeps every block in DRAM."""

import hashlib
import json
import re
import subprocess
import time
import urllib.request

from conftest import OPENLAKE_CLI, wait_for
from vllm_standin.pool import require_pool_binaries

KiB = 1024
MiB = 1024 * KiB
BLK = 64 * KiB


def K(ns, i):
    return hashlib.sha256(b"%s-%d" % (ns.encode(), i)).digest()


def val(ns, i):
    seed = hashlib.sha256(b"v-%s-%d" % (ns.encode(), i)).digest()
    return (seed * (BLK // len(seed)))[:BLK]


def metrics(d):
    """{(name, frozenset(labels)): value} of /metrics."""
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=30) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r'^(\w+)(?:\{([^}]*)\})?\s+(\S+)$', line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def held(m, ns):
    """What /metrics says ns holds: (dram blocks, dram bytes, nvme blocks, nvme bytes)."""
    def g(name, tier):
        return m.get((name, frozenset({("namespace", ns), ("tier", tier)})))
    return (g("openlake_kv_ns_blocks", "dram"), g("openlake_kv_ns_bytes", "dram"),
            g("openlake_kv_ns_blocks", "nvme"), g("openlake_kv_ns_bytes", "nvme"))


def cli_stats(d, *args):
    r = subprocess.run([str(OPENLAKE_CLI), "kv", "stats", "--nodes", d.kv_addr, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def rows(d):
    st = json.loads(cli_stats(d, "--json"))["nodes"][0]["stats"]
    return {r["namespace"]: (r["dram_blocks"], r["dram_bytes"], r["nvme_blocks"],
                             r["nvme_bytes"], r["quota_evictions"]) for r in st["namespaces"]}, st


def test_namespace_residency_and_quota(openlaked):
    require_pool_binaries()
    import openlake_client as ol

    # strict write-behind: every acknowledged block is on NVMe, so the counts are exact now
    d = openlaked(drives=1, extra='dram_bytes = "16MiB"\nwriteback = "strict"\n'
                                  'namespace_quota_frac = 0.25\n')
    a = ol.connect([d.kv_addr], device="tcp", namespace="tenant-a", timeout_ms=30000)
    b = ol.connect([d.kv_addr], device="tcp", namespace="tenant-b", timeout_ms=30000)
    try:
        assert b.put([K("b", i) for i in range(8)], [val("b", i) for i in range(8)]) == [0] * 8
        for s in range(0, 100, 10):  # 6.25 MiB into a 4 MiB quota
            ks = [K("a", i) for i in range(s, s + 10)]
            assert a.put(ks, [val("a", i) for i in range(s, s + 10)]) == [0] * 10, s
        m = metrics(d)
        assert m[("openlake_kv_namespace_quota_bytes", frozenset())] == 4 * MiB
        assert held(m, "tenant-a") == (64, 64 * BLK, 100, 100 * BLK), held(m, "tenant-a")
        assert held(m, "tenant-b") == (8, 8 * BLK, 8, 8 * BLK), held(m, "tenant-b")
        qe = ("openlake_kv_ns_quota_evictions_total", frozenset({("namespace", "tenant-a")}))
        assert m[qe] == 36
        assert m[("openlake_kv_ns_quota_evictions_total",
                  frozenset({("namespace", "tenant-b")}))] == 0
        # tenant-b's blocks all stayed in DRAM: its gets read no disk
        hits_nvme = a.stats()["nodes"][0]["stats"]["hits_nvme"]
        assert b.get([K("b", i) for i in range(8)], size_hint=BLK) == [
            val("b", i) for i in range(8)]
        assert a.stats()["nodes"][0]["stats"]["hits_nvme"] == hits_nvme
        # tenant-a's every block is still served (36 from NVMe)
        got = a.get([K("a", i) for i in range(100)], size_hint=BLK)
        assert [i for i in range(100) if got[i] != val("a", i)] == []

        # deletes: 5 NVMe-only blocks (the oldest) and 5 in DRAM (the newest)
        gone = list(range(5)) + list(range(95, 100))
        assert a.delete([K("a", i) for i in gone]) == [0] * 10
        r, st = rows(d)
        assert r["tenant-a"] == (59, 59 * BLK, 90, 90 * BLK, 36), r
        assert r["tenant-b"] == (8, 8 * BLK, 8, 8 * BLK, 0), r
        assert st["namespace_quota_bytes"] == 4 * MiB and st["namespaces_left_off"] == 0
        assert held(metrics(d), "tenant-a") == (59, 59 * BLK, 90, 90 * BLK)
        text = cli_stats(d)
        assert "namespace quota 4.0 MiB" in text, text
        line = [ln for ln in text.splitlines() if ln.strip().startswith("tenant-a ")]
        assert len(line) == 1 and line[0].split()[1:] == [
            "59", "3.7", "MiB", "90", "5.6", "MiB", "36"], text
    finally:
        a.close()
        b.close()

    # a restart: DRAM starts empty, the NVMe tier's blocks are reloaded and count again under
    # their namespace once a client of it says HELLO
    d.restart()

    def reloaded():  # the pool's figures join /metrics a moment after its port listens
        m = metrics(d)
        return m if any(k[0] == "openlake_kv_ns_blocks" for k in m) else None
    m = wait_for(reloaded, 60, "the KV pool's figures on /metrics")
    unnamed = {dict(k[1]).get("namespace") for k in m if k[0] == "openlake_kv_ns_blocks"}
    assert len(unnamed) == 2 and all(n.startswith("(unnamed ") for n in unnamed), unnamed
    assert sorted(held(m, n)[2] for n in unnamed) == [8, 90]
    a = ol.connect([d.kv_addr], device="tcp", namespace="tenant-a", timeout_ms=30000)
    b = ol.connect([d.kv_addr], device="tcp", namespace="tenant-b", timeout_ms=30000)
    try:
        assert a.exists([K("a", 50)]) == [True] and b.exists([K("b", 0)]) == [True]
        m = wait_for(lambda: (lambda m: m if held(
            m, "tenant-a")[0] is not None and held(m, "tenant-b")[0] is not None else None)(
                metrics(d)), 60, "both namespaces named")
        assert held(m, "tenant-a") == (0, 0, 90, 90 * BLK), held(m, "tenant-a")
        assert held(m, "tenant-b") == (0, 0, 8, 8 * BLK), held(m, "tenant-b")
        r, _ = rows(d)
        assert r["tenant-a"][:4] == (0, 0, 90, 90 * BLK) and r["tenant-b"][:4] == (
            0, 0, 8, 8 * BLK), r
        # a local client (shm ALLOC/COMMIT) of tenant-b is counted under it too
        loc = ol.connect([d.kv_addr], device="local", namespace="tenant-b", timeout_ms=30000)
        try:
            assert loc.put([K("b", 100)], [val("b", 100)]) == [0]
        finally:
            loc.close()
        assert held(metrics(d), "tenant-b") == (1, BLK, 9, 9 * BLK)
    finally:
        a.close()
        b.close()
