"""Local puts with COMMIT_ALLOC (docs/kv-protocol.md, op 15) against a real openlaked: the
python package over the real libopenlake on the shm path commits each put and reserves the
next slot in one round trip; the values read back bit-exact (local and TCP readers), the
reservations a client holds are bounded and the daemon takes them back when the client is
kill -9'd; a raw client bounded by max_pins_per_connection; old-style clients (raw ALLOC then
COMMIT, and libopenlake told not to use the op) still work."""

import ctypes
import os
import random
import signal
import subprocess
import sys

from conftest import OPENLAKED, wait_for  # noqa: F401
from vllm_standin.pool import REPO, library_path

sys.path.insert(0, os.path.dirname(__file__))
from test_kv_security import (ALLOC, COMMIT, FULL, OK, ent, ol, raw_frame, shm_conn,  # noqa: E402,F401
                               start)
from test_kv_security import key as K  # noqa: E402

COMMIT_ALLOC = 15
MIB2 = 2 << 20


def node_stats(c):
    return c.stats()["nodes"][0]["stats"]


def values(n, size, seed):
    rnd = random.Random(seed)
    return [rnd.randbytes(size) for _ in range(n)]


def test_local_puts_read_back_and_hold_bounded_reservations(openlaked, ol):
    d = start(openlaked, 'dram_bytes = "256MiB"\n')
    c = ol.connect([d.kv_addr], device="local", timeout_ms=30000)
    tcp = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    assert node_stats(tcp)["conn_pins"] == 0
    keys = [K("a", i) for i in range(40)]
    vals = values(40, MIB2, 1)
    for k, v in zip(keys, vals):  # one put per call: the steady state of the new path
        assert c.put([k], [v]) == [ol.Status.OK]
    # mixed sizes in batches: sizes that do not repeat ALLOC, and hold nothing ahead
    bkeys = [K("b", i) for i in range(30)]
    bvals = [os.urandom(1 + (i * 7919) % 300000) for i in range(30)]
    for i in range(0, 30, 6):
        assert c.put(bkeys[i:i + 6], bvals[i:i + 6]) == [ol.Status.OK] * 6
    # values in several pieces of odd sizes (pieces from 256 KiB on are streamed into the slot
    # with non-temporal stores, here from unaligned slot offsets), and the same without them
    pieces = [os.urandom(n) for n in (3, 300001, 17, 400000, 1)]
    bufs = [ctypes.create_string_buffer(p, len(p)) for p in pieces]
    iovs = [(ctypes.addressof(b), len(p)) for b, p in zip(bufs, pieces)]
    for i in range(3):  # the size repeats from the second put: the third goes to a held slot
        assert c.put_iov([K("iov", i)], [iovs]) == [ol.Status.OK]
    assert tcp.get([K("iov", i) for i in range(3)], size_hint=1 << 20) == [b"".join(pieces)] * 3
    assert c.get(keys, size_hint=MIB2) == vals, "local reader"
    assert tcp.get(keys, size_hint=MIB2) == vals, "TCP reader"
    assert c.get(bkeys, size_hint=300000) == bvals
    assert tcp.get(bkeys, size_hint=300000) == bvals
    # the client holds slots for its next puts of a repeated size (the new path ran), at most 8
    # (the gets' pins go with their RELEASE, which sends no reply: wait for it to be handled)
    wait_for(lambda: 1 <= node_stats(tcp)["conn_pins"] <= 8, 60,
             "held reservations: %s" % node_stats(tcp)["conn_pins"])
    # a put of a stored key into a held slot: exists, the old value stays
    other = [(ctypes.addressof(b), len(p)) for b, p in zip(bufs[::-1], pieces[::-1])]
    assert c.put_iov([K("iov", 0)], [other]) == [ol.Status.EXISTS]
    assert tcp.get([K("iov", 0)], size_hint=1 << 20) == [b"".join(pieces)]
    # held slots of a size no longer put are released at the next put (of another size)
    assert c.put([K("c", 0)], [b"c" * 1000]) == [ol.Status.OK]
    wait_for(lambda: node_stats(tcp)["conn_pins"] == 0, 60,
             "a slot held for a size no longer put: %s" % node_stats(tcp)["conn_pins"])
    c.close()
    wait_for(lambda: node_stats(tcp)["conn_pins"] == 0, 60,
             "the reservations of a closed client were not released")
    assert tcp.get(keys, size_hint=MIB2) == vals
    tcp.close()


CHILD = r"""
import os, sys
sys.path.insert(0, os.environ["PYPATH"])
import openlake_client as ol
c = ol.connect([sys.argv[1]], device="local", timeout_ms=30000)
import threading
def work(t):
    for i in range(10):
        assert c.put([bytes([t, i]) * 16], [bytes([i]) * (2 << 20)]) == [ol.Status.OK]
ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
[t.start() for t in ths]
[t.join() for t in ths]
print("ready", flush=True)
sys.stdin.read()
"""


def test_kill9_client_leaks_no_reservation(openlaked, ol):
    d = start(openlaked, 'dram_bytes = "128MiB"\n')
    tcp = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    used0 = node_stats(tcp)["dram_used"]
    env = dict(os.environ, PYPATH=str(REPO / "python"),
               OPENLAKE_LIBRARY=str(os.environ.get("OPENLAKE_LIBRARY") or library_path()))
    p = subprocess.Popen([sys.executable, "-c", CHILD, d.kv_addr], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    try:
        assert p.stdout.readline().strip() == b"ready"
        held = node_stats(tcp)["conn_pins"]
        assert held >= 1, "the client holds no reservation ahead"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_for(lambda: node_stats(tcp)["conn_pins"] == 0, 60,
             "a kill -9'd client's reservations were not released")
    st = node_stats(tcp)
    assert st["dram_used"] - used0 == 40 * MIB2, "slots leaked: %d" % (st["dram_used"] - used0)
    got = tcp.get([bytes([t, i]) * 16 for t in range(4) for i in range(10)], size_hint=MIB2)
    assert got == [bytes([i]) * MIB2 for t in range(4) for i in range(10)]
    tcp.close()


def test_raw_commit_alloc_bounded_and_old_style_alloc_commit(openlaked, ol):
    d = start(openlaked, "max_pins_per_connection = 20\n")
    s = shm_conn(d)
    # a hostile client asking for 100 reservations ahead is given at most its pin cap
    _, reps = raw_frame(s, COMMIT_ALLOC, [ent(b"\0" * 32, 4096) for _ in range(100)])
    assert [r[0] for r in reps] == [OK] * 20 + [FULL] * 80
    assert all(r[2] > 0 for r in reps[:20]), "a reservation's reply carries the TTL"
    tcp = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    assert node_stats(tcp)["conn_pins"] == 20
    # commit two of them under real keys (no write: zeroed bytes) in one frame with nothing
    # else; a commit of a slot never reserved is an error entry, not a close
    _, reps2 = raw_frame(s, COMMIT_ALLOC, [ent(K("r", 0), 100, reps[0][3], reps[0][4]),
                                          ent(K("r", 1), 4096, reps[1][3], reps[1][4]),
                                          ent(K("r", 2), 10, reps[1][3] + 4096, 7)])
    assert [r[0] for r in reps2] == [OK, OK, 8]
    assert tcp.get([K("r", 0), K("r", 1)], size_hint=4096) == [b"\0" * 100, b"\0" * 4096]
    # an old-style client on the same daemon: ALLOC, then COMMIT (a fresh tier's slot is
    # zeroed; the python client of the next test writes real bytes the old way)
    s2 = shm_conn(d)
    _, ar = raw_frame(s2, ALLOC, [ent(K("old", 0), 5)])
    assert ar[0][0] == OK
    _, cr = raw_frame(s2, COMMIT, [ent(K("old", 0), 5, ar[0][3], ar[0][4])])
    assert cr[0][0] == OK
    assert tcp.get([K("old", 0)], size_hint=64) == [b"\0" * 5]
    s2.close()
    s.close()
    wait_for(lambda: node_stats(tcp)["conn_pins"] == 0, 60, "closed connections keep pins")
    tcp.close()


def test_library_without_commit_alloc_still_puts(openlaked, ol, monkeypatch):
    """$OPENLAKE_KV_COMMIT_ALLOC=0: libopenlake puts as an older client (ALLOC then COMMIT);
    nothing is held ahead, and the values read back."""
    d = start(openlaked, 'dram_bytes = "128MiB"\n')
    monkeypatch.setenv("OPENLAKE_KV_COMMIT_ALLOC", "0")
    old = ol.connect([d.kv_addr], device="local", timeout_ms=30000)
    monkeypatch.delenv("OPENLAKE_KV_COMMIT_ALLOC")
    tcp = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    vals = values(10, MIB2, 3)
    for i, v in enumerate(vals):
        assert old.put([K("o", i)], [v]) == [ol.Status.OK]
    assert node_stats(tcp)["conn_pins"] == 0, "the old path held a reservation"
    assert old.get([K("o", i) for i in range(10)], size_hint=MIB2) == vals
    assert tcp.get([K("o", i) for i in range(10)], size_hint=MIB2) == vals
    old.close()
    tcp.close()


def test_held_slot_past_its_time_is_not_written(openlaked, ol):
    """A slot held ahead is used only within half the TTL the node answered: once the node's
    reaper took it back (reserve_ttl_secs = 2), the next put releases it unused, ALLOCs a fresh
    slot, and reads back exactly; other clients' blocks put meanwhile stay intact."""
    d = start(openlaked, 'dram_bytes = "64MiB"\n[kv_slab]\nreserve_ttl_secs = 2\n')
    c = ol.connect([d.kv_addr], device="local", timeout_ms=30000)
    tcp = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    vals = values(4, 1 << 20, 5)
    for i in range(2):
        assert c.put([K("t", i)], [vals[i]]) == [ol.Status.OK]
    # one slot held ahead (0 when this machine stalled us past the TTL: the reaper was first)
    assert node_stats(tcp)["conn_pins"] <= 1
    wait_for(lambda: node_stats(tcp)["conn_pins"] == 0, 60, "the reaper kept the held slot")
    # the reaped slot goes to another client's put of the same size
    other = ol.connect([d.kv_addr], device="local", timeout_ms=30000)
    assert other.put([K("x", 0)], [vals[3]]) == [ol.Status.OK]
    assert c.put([K("t", 2)], [vals[2]]) == [ol.Status.OK]
    assert tcp.get([K("t", i) for i in range(3)] + [K("x", 0)], size_hint=1 << 20) == \
        vals[:3] + [vals[3]]
    other.close()
    c.close()
    tcp.close()
