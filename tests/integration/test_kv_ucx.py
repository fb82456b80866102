"""The KV pool over UCX (transport = "rdma"): a daemon started from a copy of
configs/kv_rdma.toml (ports and paths adjusted) serves libopenlake's device "ucx" with
UCX_TLS=tcp (and tcp,sm: shared memory between processes of this host) - real bytes from 1 KiB
to several MiB, batches larger than one UCX header holds, exists / delete / misses /
truncation, the same pool seen over TCP, concurrent clients, a client killed with kill -9 in
the middle of its transfers, a pool with a token. Skipped when libopenlake or openlaked was
built without UCX. No RDMA NIC here: the verbs / DC / GPUDirect paths are not run
(docs/kv-protocol.md, "UCX transport")."""

import hashlib
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import OPENLAKED, Daemon, free_port, wait_for
from vllm_standin.pool import REPO, library_path, require_pool_binaries  # noqa: F401

PY = "/usr/bin/python3"
MiB = 1 << 20


def K(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def V(n, seed):
    """n reproducible bytes (a SHA-256 stream), different for every seed."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"%s:%d" % (repr(seed).encode(), i)).digest() * 64
        i += 1
    return bytes(out[:n])


def _lib():
    require_pool_binaries()
    os.environ.setdefault("OPENLAKE_LIBRARY", str(library_path()))
    sys.path.insert(0, str(REPO / "python"))
    import openlake_client._lib as lib

    if not lib.has_ucx():
        pytest.skip("libopenlake was built without UCX (libucx-dev): no UCX transport")
    return lib


def _port_pair():
    """A KV port whose next port is free too (the UCX listener's default: KV port + 1)."""
    for _ in range(50):
        p = free_port()
        try:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise AssertionError("no two free consecutive ports")


def rdma_config(root, kv_port, extra_top="", extra="", max_clients=512):
    """configs/kv_rdma.toml as shipped, its addresses, paths and DRAM size made local."""
    text = (REPO / "configs" / "kv_rdma.toml").read_text()
    assert "max_clients = 512" in text
    text = text.replace("max_clients = 512", "max_clients = %d" % max_clients)
    text = text.replace("0.0.0.0:9400", "127.0.0.1:%d" % kv_port)
    text = text.replace('s3_addr = "0.0.0.0:9000"', 's3_addr = "127.0.0.1:%d"' % free_port())
    text = text.replace('data_dirs = "data/kv"', 'data_dirs = "%s"\nconsole_addr = '
                        '"127.0.0.1:%d"\n%s' % (root / "kv", free_port(), extra_top))
    assert 'transport = "rdma"' in text and 'backend = "dct"' in text
    text += '\n[kv]\ndram_bytes = "192MiB"\nspill_dir = "%s"\n%s' % (root / "spill", extra)
    return text


class UcxPool:
    def __init__(self, root, extra_top="", extra="", ucx_tls="tcp,sm", max_clients=512):
        _lib()  # skips without UCX
        root.mkdir(parents=True, exist_ok=True)
        self.d = Daemon(root, drives=1, mode="kv")
        self.d.kv_port = _port_pair()
        self.d.config.write_text(rdma_config(root, self.d.kv_port, extra_top, extra,
                                             max_clients))
        old = os.environ.get("UCX_TLS")
        os.environ["UCX_TLS"] = ucx_tls  # the daemon's fabrics (the Popen inherits them)
        try:
            self.d.start()
        finally:
            if old is None:
                os.environ.pop("UCX_TLS")
            else:
                os.environ["UCX_TLS"] = old
        m = wait_for(lambda: re.search(r"kv: UCX listening on port (\d+)", self.d.log()),
                     60, "the UCX listener")
        self.ucx_port = int(m.group(1))
        self.kv_addr = self.d.kv_addr

    def stop(self):
        self.d.cleanup()


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    _lib()
    p = UcxPool(tmp_path_factory.mktemp("ucx"))
    yield p
    p.stop()


@pytest.fixture(autouse=True)
def ucx_on_lo(monkeypatch):
    """This process's UCX contexts (created by connect) and the clients it starts use the
    loopback device only: the network-namespace tests (run beside this module by
    scripts/test.sh) add and delete veth and bridge interfaces, and a tcp interface of the
    pool's that vanished or changed hands under UCX refuses connections (seen: a client
    retrying a 10.x address of another test's bridge). The daemon keeps its environment: its
    start checks the shipped config's dev_name against the devices here."""
    monkeypatch.setenv("UCX_NET_DEVICES", "lo")


@pytest.fixture
def ucx_tcp(monkeypatch):
    """This process's UCX contexts (created by connect) use tcp only."""
    monkeypatch.setenv("UCX_TLS", "tcp")


def connect(pool, device="ucx", **kw):
    from openlake_client import connect as c

    return c([pool.kv_addr], device=device, timeout_ms=kw.pop("timeout_ms", 10000), **kw)


def test_rdma_toml_serves_over_ucx(pool):
    """The shipped kv_rdma.toml: UCX on the KV port + 1, backend dct mapped to UCX without
    forcing its transports, the absent NIC (mlx5_0) named and left to UCX."""
    log = pool.d.log()
    assert pool.ucx_port == pool.d.kv_port + 1
    assert 'backend = "dct"' in log and "UCX_TLS tcp,sm" in log
    assert "dev_name mlx5_0: no such RDMA device here" in log
    assert "built without UCX" not in log


@pytest.mark.parametrize("rndv", ["auto", "inf", "1k"])
def test_round_trip_sizes(pool, ucx_tcp, monkeypatch, rndv):
    """put / get / exists / delete of real bytes, 1 KiB to 6 MiB; the client's puts eager and
    rendezvous as UCX chooses, all eager (threshold inf), or rendezvous from 1 KiB."""
    monkeypatch.setenv("UCX_RNDV_THRESH", rndv)
    sizes = [1 << 10, 64 << 10, 256 << 10, 1 * MiB, 2 * MiB + 17, 6 * MiB]
    with connect(pool) as c:
        c.delete([K("size", n) for n in sizes])
        keys = [K("size", n) for n in sizes]
        vals = [V(n, ("size", n)) for n in sizes]
        assert [int(s) for s in c.put(keys, vals)] == [0] * len(sizes)
        assert [int(s) for s in c.put(keys[:1], vals[:1])] == [1]  # EXISTS
        got = c.get(keys, size_hint=8 * MiB)
        for n, g, v in zip(sizes, got, vals):
            assert g is not None and len(g) == n and g == v, n
        assert c.exists(keys) == [True] * len(sizes)
        assert c.exists_len(keys)[1] == sizes
        assert [int(s) for s in c.delete(keys[1:3])] == [0, 0]
        assert c.get(keys[1:3]) == [None, None]
        assert [int(s) for s in c.delete(keys[1:2])] == [2]  # MISS
        # a buffer smaller than the value: TRUNCATED, then the exact size (python retries)
        assert c.get(keys[3:4], size_hint=4096) == [vals[3]]


def test_large_batches_split_to_fit_the_header(pool, ucx_tcp):
    """500 entries in one call: more than one UCX AM header holds, so the client splits."""
    keys = [K("batch", i) for i in range(500)]
    vals = [V(4096 + i, ("batch", i)) for i in range(500)]
    with connect(pool) as c:
        assert set(int(s) for s in c.put(keys, vals)) == {0}
        got = c.get(keys + [K("nope")], size_hint=8192)
        assert got[:500] == vals and got[500] is None
        assert c.exists(keys[::50]) == [True] * 10
        assert set(int(s) for s in c.delete(keys)) == {0}
        assert c.exists(keys[::50]) == [False] * 10


def test_same_pool_over_tcp_and_ucx(pool, ucx_tcp):
    """One engine behind both transports: what UCX put, TCP reads, and back."""
    a, b = K("x", "ucx->tcp"), K("x", "tcp->ucx")
    va, vb = V(3 * MiB, "a"), V(300 << 10, "b")
    with connect(pool) as u, connect(pool, device="tcp") as t:
        assert int(u.put([a], [va])[0]) == 0
        assert t.get([a], size_hint=4 * MiB) == [va]
        assert int(t.put([b], [vb])[0]) == 0
        assert u.get([b], size_hint=MiB) == [vb]
        st = u.stats()
        assert st["total"]["entries"] >= 2, st


def test_node_address_written_ucx(pool, ucx_tcp):
    """A node written ucx://host:port is the UCX listener itself, whatever the device."""
    from openlake_client import connect as c

    with c(["ucx://127.0.0.1:%d" % pool.ucx_port], device="tcp", timeout_ms=10000) as cl:
        k = K("ucx-url")
        assert int(cl.put([k], [b"u" * 5000])[0]) == 0
        assert cl.get([k]) == [b"u" * 5000]


def test_concurrent_clients(pool, ucx_tcp):
    """Six clients in threads, each its own connection, 256 KiB - 2 MiB values."""
    errors = []

    def work(t):
        try:
            with connect(pool) as c:
                for i in range(12):
                    n = (256 << 10) * (1 + (i + t) % 8)
                    k, v = K("conc", t, i), V(n, ("conc", t, i))
                    assert int(c.put([k], [v])[0]) == 0
                    assert c.get([k], size_hint=2 * MiB) == [v]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((t, repr(e)))

    th = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in th:
        t.start()
    for t in th:
        t.join(180)
    assert not any(t.is_alive() for t in th)
    assert not errors, errors


CLIENT = r"""
import hashlib, os, sys
sys.path.insert(0, sys.argv[1])
from openlake_client import connect
c = connect([sys.argv[2]], device="ucx", timeout_ms=10000)
v = os.urandom(8 << 20)
i = 0
while True:
    k = hashlib.sha256(b"victim%d" % i).digest()
    c.put([k], [v])
    c.get([k], size_hint=8 << 20)
    i += 1
    if i == 2:
        print("running", flush=True)
"""


@pytest.mark.parametrize("tls", ["tcp", "tcp,sm"])
def test_client_killed_mid_transfer(pool, tls):
    """kill -9 of a client in the middle of 8 MiB puts and gets: the pool drops its
    connection (reservations and pins released) and goes on serving everyone else."""
    env = dict(os.environ, UCX_TLS=tls,
               OPENLAKE_LIBRARY=os.environ.get("OPENLAKE_LIBRARY") or str(library_path()))
    p = subprocess.Popen([PY, "-c", CLIENT, str(REPO / "python"), pool.kv_addr], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = b""
    try:
        # its stdout carries UCX's own log lines too: wait for "running" among them, bounded
        deadline = time.monotonic() + 120
        while b"running\n" not in out and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(p.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
        running = b"running\n" in out
        if running:
            time.sleep(0.3)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    assert running, (out + p.stderr.read()).decode(errors="replace")  # read once it is dead
    assert pool.d.proc.poll() is None
    os.environ["UCX_TLS"] = tls
    try:
        with connect(pool) as c:
            # the pool stays usable: room for many 8 MiB blocks (nothing left reserved)
            for i in range(24):
                k, v = K("after-kill", tls, i), V(8 * MiB if i % 6 == 0 else 100 << 10, i)
                assert int(c.put([k], [v])[0]) == 0, i
                assert c.get([k], size_hint=8 * MiB) == [v]
            # no block left pinned by the dead connection's reservations or gets
            wait_for(lambda: c.stats()["nodes"][0]["stats"]["pinned"] == 0, 60,
                     "the killed client's pins released")
    finally:
        os.environ.pop("UCX_TLS", None)


def test_token_required_over_ucx(tmp_path, ucx_tcp):
    """Access control is the same over UCX: no token, a wrong one: unreachable; the right one
    works."""
    p = UcxPool(tmp_path / "tok", extra='secret = "s3cret-ucx"\n', ucx_tls="tcp")
    try:
        from openlake_client import connect as c

        k = K("tok")
        for tok in (None, "wrong"):
            with c([p.kv_addr], device="ucx", timeout_ms=5000, token=tok) as cl:
                assert int(cl.put([k], [b"x"])[0]) == 5  # UNREACHABLE
        with c([p.kv_addr], device="ucx", timeout_ms=10000, token="s3cret-ucx") as cl:
            assert int(cl.put([k], [b"x" * 70000])[0]) == 0
            assert cl.get([k]) == [b"x" * 70000]
        assert "kv: refused" in p.d.log() or "token" in p.d.log()
    finally:
        p.stop()



def test_ucx_port_taken_is_named(tmp_path):
    """kv_rdma.toml's UCX listener (the KV port + 1 when [rdma] port is unset) on a port another
    program holds: openlaked exits 1 naming that port, the key that sets it and the fix; its
    last line no longer blames the free KV port alone ('cannot serve the KV pool on
    127.0.0.1:P: Address already in use')."""
    import socket

    _lib()
    kv_port = _port_pair()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", kv_port + 1))
        holder.listen(1)
        cfg = tmp_path / "kv_rdma.toml"
        cfg.write_text(rdma_config(tmp_path, kv_port))
        env = dict(os.environ, UCX_TLS="tcp")
        r = subprocess.run([str(OPENLAKED), "--config", str(cfg)], capture_output=True,
                           text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr[-2000:]
    line = "kv: UCX cannot listen on port %d (the KV port + 1: [rdma] port is unset)" % (
        kv_port + 1)
    assert line in r.stderr and "set [rdma] port to a free port" in r.stderr, r.stderr[-2000:]
    assert ("cannot serve the KV pool on 127.0.0.1:%d or its UCX port (see above)" % kv_port
            in r.stderr), r.stderr[-2000:]

def test_connector_device_passes_through():
    """vLLM's openlake_device: ucx, rdma or a NIC name stays (UCX) when libopenlake has UCX;
    without it the connector falls back to tcp with a warning (test_vllm_connector)."""
    _lib()
    from openlake_client.connector_config import ConnectorConfig

    for dev in ("ucx", "rdma", "mlx5_ib0"):
        c = ConnectorConfig.from_extra({"openlake_device": dev}, 16, library_has_ucx=True)
        assert c.device == dev
    c = ConnectorConfig.from_extra({"openlake_device": "mlx5_ib0"}, 16, library_has_ucx=False)
    assert c.device == "tcp"


def test_nic_name_device(pool, ucx_tcp):
    """device = an RDMA NIC's name (the seeds' mlx5_ib0): UCX; absent here, UCX chooses."""
    from openlake_client import connect as c

    with c([pool.kv_addr], device="mlx5_ib0", timeout_ms=10000) as cl:
        k = K("nic")
        assert int(cl.put([k], [b"n" * 9000])[0]) == 0
        assert cl.get([k]) == [b"n" * 9000]


def test_max_clients_refuses_past_the_limit(tmp_path, ucx_tcp):
    """[rdma] max_clients = 1: a second UCX client is refused (unreachable, logged) while the
    first holds its connection; TCP clients are not counted."""
    p = UcxPool(tmp_path / "cap", ucx_tls="tcp", max_clients=1)
    try:
        from openlake_client import connect as c

        with c([p.kv_addr], device="ucx", timeout_ms=10000) as first:
            assert int(first.put([K("cap1")], [b"1" * 100])[0]) == 0
            with c([p.kv_addr], device="ucx", timeout_ms=5000) as second:
                assert int(second.put([K("cap2")], [b"2"])[0]) == 5  # UNREACHABLE
            with c([p.kv_addr], device="tcp", timeout_ms=5000) as tcp:
                assert tcp.get([K("cap1")]) == [b"1" * 100]
        wait_for(lambda: "too many UCX KV clients" in p.d.log(), 30, "the refusal logged")
    finally:
        p.stop()
