"""The KV server on the per-core io_uring loops, against a real openlaked: connections are
state machines on a few loop threads, not a thread each. Hundreds of idle connections and
connections stalled half-way through a frame add no thread and hold no loop: every one of them
still works, and a stalled frame is closed at the frame timeout while the others go on.

Raw-protocol clients speak docs/kv-protocol.md directly (hundreds of them, some hostile); the
NVMe-tier gets of this file go through the loops' helper threads and back."""

import hashlib
import os
import resource
import socket
import struct
import time

from test_kv_security import (ENT, GET, PUT, REP, hdr, ent, raw_hello, read_hdr, recv_exact,
                              ready)

OK, MISS = 0, 2
N_IDLE = 320
N_STALLED = 8
FRAME_TIMEOUT_S = 10  # OL_KV_FRAME_TIMEOUT_MS in src/kv/server.c


def key(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def val(i, n):
    seed = hashlib.sha256(b"loop-%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def threads(pid):
    """The daemon's threads, without the kernel's io_uring workers (iou-wrk-*, made per ring
    for ops it punts, e.g. blocking recvs on some kernels)."""
    names = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # a thread that just ended
    return sorted(n for n in names if not n.startswith("iou-wrk"))


def raw_put(s, k, data):
    s.sendall(hdr(PUT, 1, ENT + len(data)) + ent(k, len(data)) + data)
    h = read_hdr(s)
    assert h["status"] == 0 and h["count"] == 1, h
    return struct.unpack("<iIQQQ", recv_exact(s, REP))[0]


def raw_get(s, k, cap):
    s.sendall(hdr(GET, 1, ENT) + ent(k, cap))
    h = read_hdr(s)
    assert h["status"] == 0 and h["count"] == 1, h
    st, _, n, _, _ = struct.unpack("<iIQQQ", recv_exact(s, REP))
    return st, recv_exact(s, n) if st == OK else None


def closed_by_peer(s):
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        return False


def test_idle_and_stalled_connections_add_no_threads_and_all_still_work(openlaked):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    d = ready(openlaked(mode="kv", extra='dram_bytes = "64MiB"\nspill_bytes = 0\n'))
    port = d.kv_port
    first = socket.create_connection(("127.0.0.1", port), timeout=30)
    raw_hello(first, local=False)
    assert raw_put(first, key("warm"), b"w" * 4096) == OK  # every loop and helper exists now
    base = threads(d.proc.pid)
    idle, stalled = [], []
    try:
        for i in range(N_IDLE):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            raw_hello(s, local=False)  # served, then idle between frames
            idle.append(s)
        for i in range(N_STALLED):  # a PUT promising 1 MiB that sends 1000 bytes and stops
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            raw_hello(s, local=False)
            s.sendall(hdr(PUT, 1, ENT + (1 << 20)) + ent(key("stall", i), 1 << 20) +
                      b"s" * 1000)
            stalled.append(s)
        t0 = time.monotonic()
        now = threads(d.proc.pid)
        assert len(now) <= len(base), (len(base), len(now), sorted(set(now) - set(base)))
        for i, s in enumerate(idle):  # each idle connection still serves, on its own loop
            data = val(i, 4096 + i)
            assert raw_put(s, key("idle", i), data) == OK
        for i, s in enumerate(idle):
            st, got = raw_get(s, key("idle", i), 1 << 16)
            assert st == OK and got == val(i, 4096 + i), i
        assert raw_get(first, key("stall", 0), 1 << 20)[0] == MISS  # never committed
        assert len(threads(d.proc.pid)) <= len(base)
        # the stalled frames are closed at the frame timeout, the idle connections are not
        deadline = t0 + FRAME_TIMEOUT_S + 50
        for s in stalled:
            s.settimeout(max(1.0, deadline - time.monotonic()))
            assert closed_by_peer(s)
        assert "timed out" in d.log()
        for i in range(0, N_IDLE, 40):
            st, got = raw_get(idle[i], key("idle", i), 1 << 16)
            assert st == OK and got == val(i, 4096 + i), i
    finally:
        for s in idle + stalled:
            s.close()
    assert raw_get(first, key("warm"), 4096) == (OK, b"w" * 4096)
    first.close()
