"""The KV put policy against the real openlaked: the pool is a cache.

async (default): a put never waits for the disk; a block evicted before its write-behind is
dropped and counted (`writeback_dropped`, /metrics, `openlake kv stats`), later a miss, never
wrong bytes; a block whose write-behind completed survives kill -9.
strict: a put returns once its block is on NVMe, so every acknowledged block survives kill -9.
"""

import hashlib
import os
import re
import subprocess
import time
import urllib.request

import pytest

from conftest import OPENLAKE_CLI
from vllm_standin.pool import require_pool_binaries

KiB = 1024


def K(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def val(i, n):
    """Distinct, checkable bytes for block i (n bytes)."""
    seed = hashlib.sha256(b"wb-%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def pool(openlaked, writeback, dram="16MiB", writeback_ms=60000, bps=None):
    require_pool_binaries()
    extra = 'dram_bytes = "%s"\nwriteback_ms = %d\nwriteback = "%s"\n' % (
        dram, writeback_ms, writeback)
    if bps:
        extra += 'writeback_bytes_per_sec = "%s"\n' % bps
    return openlaked(drives=1, extra=extra)


def connect(d, device="tcp"):
    import openlake_client as ol

    return ol.connect([d.kv_addr], device=device, timeout_ms=30000)


def node_stats(c):
    st = c.stats()
    assert st["nodes"][0]["up"], st
    return st["nodes"][0]["stats"]


def wait_for(what, cond, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def metric(d, name):
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=30) as r:
        body = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), body, re.M)
    assert m, "%s not on /metrics" % name
    return float(m.group(1))


def test_async_puts_never_wait_and_count_dropped_blocks(openlaked):
    """16 MiB of DRAM, 48 MiB put at once, a write-behind capped at 1 MiB/s and ticking every
    15 s: the disk cannot keep up. Every put succeeds without waiting; the blocks evicted
    before their write-behind are counted as dropped and are misses; none is served wrong."""
    d = pool(openlaked, "async", bps="1MiB")
    c = connect(d)
    try:
        n, size = 192, 256 * KiB
        for b in range(0, n, 8):
            ks = [K("a", i) for i in range(b, b + 8)]
            st = c.put(ks, [val(i, size) for i in range(b, b + 8)])
            assert all(s == 0 for s in st), (b, st)
        s = node_stats(c)
        assert s["writeback"] == "async" and "never served wrong" in s["promise"], s
        assert s["writeback_waits"] == 0, s
        dropped = s["writeback_dropped"]
        assert dropped > 0 and s["evictions"] == dropped, s
        assert s["backlog_blocks"] > 0 and s["backlog_bytes"] >= s["backlog_blocks"], s
        assert s["backlog_oldest_ms"] >= 0
        got = c.get([K("a", i) for i in range(n)], size_hint=size)
        wrong = [i for i, v in enumerate(got) if v is not None and v != val(i, size)]
        assert wrong == [], wrong
        misses = sum(v is None for v in got)
        assert misses == dropped, (misses, dropped)
        assert got[n - 1] == val(n - 1, size)  # the newest stays in DRAM
        assert metric(d, "openlake_kv_writeback_dropped_total") == dropped
        assert metric(d, "openlake_kv_writeback_backlog_blocks") >= 0
        r = subprocess.run([str(OPENLAKE_CLI), "kv", "stats", "--nodes", d.kv_addr],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "write-behind async" in r.stdout and "dropped unwritten %d" % dropped in r.stdout
        assert "promise: a block is never served wrong" in r.stdout, r.stdout
    finally:
        c.close()


@pytest.mark.parametrize("device", ["tcp", "local"])
def test_strict_every_acknowledged_block_survives_kill9(openlaked, device):
    """writeback = "strict" with a 15 s tick: each put returns only once its block is on NVMe,
    so a kill -9 right after the last put loses none, also when puts evict each other."""
    d = pool(openlaked, "strict", dram="8MiB")
    c = connect(d, device)
    sizes = [4 * KiB + (i * 7919) % (600 * KiB) for i in range(40)]
    try:
        for i, n in enumerate(sizes):
            assert c.put([K("s", i)], [val(i, n)]) == [0], i
        s = node_stats(c)
        assert s["writeback"] == "strict" and s["backlog_blocks"] == 0, s
        assert s["writeback_dropped"] == 0 and s["evictions"] == 0, s
    finally:
        c.close()
    d.kill9()
    d.start()
    c = connect(d)
    try:
        got = c.get([K("s", i) for i in range(len(sizes))], size_hint=600 * KiB + 4 * KiB)
        bad = [i for i, n in enumerate(sizes) if got[i] != val(i, n)]
        assert bad == [], bad
    finally:
        c.close()


def test_async_written_behind_blocks_survive_kill9(openlaked):
    """async with a 200 ms write-behind: once `kv stats` shows the backlog empty, every block
    put so far is on NVMe and comes back exactly after kill -9."""
    d = pool(openlaked, "async", dram="64MiB", writeback_ms=200)
    c = connect(d)
    sizes = [4 * KiB + (i * 7919) % (300 * KiB) for i in range(60)]
    try:
        for b in range(0, len(sizes), 10):
            st = c.put([K("c", i) for i in range(b, b + 10)],
                       [val(i, sizes[i]) for i in range(b, b + 10)])
            assert st == [0] * 10, st
        s = wait_for("the backlog to drain",
                     lambda: (lambda s: s if s["backlog_blocks"] == 0 and
                              s["writebacks"] >= len(sizes) else None)(node_stats(c)))
        assert s["backlog_bytes"] == 0 and s["backlog_oldest_ms"] == 0, s
        assert s["writeback_dropped"] == 0, s
    finally:
        c.close()
    d.kill9()
    d.start()
    c = connect(d)
    try:
        got = c.get([K("c", i) for i in range(len(sizes))], size_hint=304 * KiB)
        bad = [i for i, n in enumerate(sizes) if got[i] != val(i, n)]
        assert bad == [], bad
    finally:
        c.close()


def test_kill9_mid_write_behind_of_slot_written_blocks(openlaked):
    """Power-of-two blocks are written to NVMe straight from their DRAM slots (record version
    2: the header in a 4 KiB block of its own, the value behind it). A kill -9 while the
    write-behind is still writing (paced at 512 KiB/s in batches of at most 4 MiB, a segment's
    size with a 64 MiB tier: the next batch waits 0.5-8 s, the backlog not empty): after a
    restart every block written before comes back exact (also those of the second puts that
    `writebacks` counted), each of the others exact or a miss, none wrong, none corrupt, and
    the segments hold version 2 records."""
    require_pool_binaries()
    d = openlaked(drives=1, extra='dram_bytes = "64MiB"\nwriteback_ms = 200\n'
                  'writeback = "async"\nwriteback_bytes_per_sec = "512KiB"\n'
                  'spill_bytes = "64MiB"\n')
    c = connect(d)
    sizes = [256 * KiB] * 6 + [2048 * KiB]  # 3.5 MiB, on NVMe before the kill
    more = [256 * KiB] * 32  # 8 MiB: one batch, then the writer paces: killed meanwhile
    try:
        st = c.put([K("z", i) for i in range(len(sizes))],
                   [val(i, n) for i, n in enumerate(sizes)])
        assert st == [0] * len(sizes), st
        wait_for("the first blocks on NVMe",
                 lambda: (lambda s: s["backlog_blocks"] == 0 and
                          s["writebacks"] >= len(sizes))(node_stats(c)))
        n0 = len(sizes)
        st = c.put([K("z", n0 + i) for i in range(len(more))],
                   [val(n0 + i, n) for i, n in enumerate(more)])
        assert st == [0] * len(more), st
        # the first batch of these is on NVMe, the writer waits for its pace: kill now
        s = wait_for("a first batch of the second puts on NVMe",
                     lambda: (lambda s: s if s["writebacks"] > n0 else None)(node_stats(c)))
        assert s["backlog_blocks"] > 0 and s["writeback_dropped"] == 0, s
        written = s["writebacks"] - n0
    finally:
        c.close()
    d.kill9()
    segs = sorted(p for p in (d.root / "kv").iterdir() if p.name.endswith(".olkv"))
    with open(segs[0], "rb") as f:
        head = f.read(8)
    assert head[:4] == b"OLKR" and int.from_bytes(head[4:6], "little") == 2, head
    d.start()
    allsz = sizes + more
    c = connect(d)
    try:
        got = c.get([K("z", i) for i in range(len(allsz))], size_hint=2048 * KiB)
        assert [i for i in range(n0) if got[i] != val(i, allsz[i])] == []
        wrong = [i for i in range(n0, len(allsz)) if got[i] is not None and
                 got[i] != val(i, allsz[i])]
        assert wrong == [], wrong
        warm = sum(1 for i in range(n0, len(allsz)) if got[i] is not None)
        assert warm >= written, (warm, written)
        assert node_stats(c)["corrupt"] == 0
    finally:
        c.close()
