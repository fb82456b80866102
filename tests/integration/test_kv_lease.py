"""LEASE (a block kept in DRAM between a lookup and its load) and `exists` refreshing recency,
against a real openlaked with a small DRAM tier and no NVMe tier (an evicted block is gone).

Each test shows both sides: the same flood of puts evicts the block that is not leased (or
not looked up), and leaves the leased (looked-up) one, so the test fails if either side
breaks."""

import hashlib
import time

import pytest

from test_kv_security import ready
from vllm_standin.pool import require_pool_binaries

BLOCK = 256 << 10


def K(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def val(*parts):
    return (K(*parts) * (BLOCK // 32))[:BLOCK]


@pytest.fixture
def small_pool(openlaked):
    require_pool_binaries()
    return ready(openlaked(mode="kv", extra='dram_bytes = "16MiB"\nspill_bytes = 0\n'))


def client(d, **kw):
    from openlake_client import connect

    return connect([d.kv_addr], device="tcp", timeout_ms=30000, **kw)


def flood(c, tag, mib=64):
    """Puts of mib MiB of other blocks: several times the DRAM tier."""
    n = (mib << 20) // BLOCK
    for i in range(0, n, 16):
        keys = [K(tag, j) for j in range(i, min(n, i + 16))]
        st = c.put(keys, [val(tag, j) for j in range(i, min(n, i + 16))])
        assert all(int(s) in (0, 1) for s in st), st


def evictions(c):
    return sum(n["stats"]["evictions"] for n in c.stats()["nodes"])


def test_lease_keeps_a_block_through_a_flood(small_pool):
    c = client(small_pool)
    leased, plain = K("leased"), K("plain")
    assert [int(s) for s in c.put([leased, plain], [val("leased"), val("plain")])] == [0, 0]
    assert [int(s) for s in c.lease([leased], 60000)] == [0]
    # another client (another connection) floods the pool
    other = client(small_pool)
    flood(other, "flood1")
    assert evictions(c) > 0
    got = c.get([leased, plain], size_hint=BLOCK)
    assert got[0] == val("leased"), "the leased block was evicted"
    assert got[1] is None, "the flood did not evict the block without a lease"
    # a lease of a missing key is a miss; ttl 0 ends a lease (from any client of the namespace)
    assert [int(s) for s in c.lease([K("never stored")], 60000)] == [2]
    assert [int(s) for s in other.lease([leased], 0)] == [0]
    assert [int(s) for s in other.lease([leased], 0)] == [2]  # no lease left to end
    flood(other, "flood2")
    assert c.get([leased], size_hint=BLOCK)[0] is None, "the ended lease still held the block"
    c.close()
    other.close()


def test_lease_expires(small_pool):
    c = client(small_pool)
    k = K("short")
    c.put([k], [val("short")])
    assert [int(s) for s in c.lease([k], 1500)] == [0]
    # the reaper ends it within about a second of its ttl: poll until a flood evicts it
    deadline = time.monotonic() + 120
    rounds = 0
    while c.exists_len([k])[0][0] == 0:
        assert time.monotonic() < deadline, "the lease never expired"
        flood(c, "exp%d" % rounds, mib=32)
        rounds += 1
    c.close()


def test_leases_are_per_namespace_and_capped(openlaked):
    require_pool_binaries()
    d = ready(openlaked(mode="kv", extra='dram_bytes = "64MiB"\nspill_bytes = 0\n'
                        'max_pins_per_connection = 8\n'))
    a = client(d, namespace="tenant-a")
    b = client(d, namespace="tenant-b")
    keys = [K("cap", i) for i in range(10)]
    a.put(keys, [b"x" * 4096] * 10)
    b.put(keys, [b"y" * 4096] * 10)
    st = [int(s) for s in a.lease(keys, 60000)]
    assert st == [0] * 8 + [4] * 2  # FULL past the namespace's cap
    assert [int(s) for s in a.lease(keys[:8], 60000)] == [0] * 8  # extending is no new lease
    # another namespace has a cap of its own, and cannot end tenant-a's leases
    assert [int(s) for s in b.lease(keys, 60000)] == [0] * 8 + [4] * 2
    assert [int(s) for s in b.lease(keys, 0)] == [0] * 8 + [2] * 2
    assert [int(s) for s in a.lease(keys[:1], 0)] == [0]
    assert [int(s) for s in a.lease(keys[8:9], 60000)] == [0]  # room again
    a.close()
    b.close()


def test_exists_refreshes_recency(openlaked):
    """In a fresh pool, blocks x then y are stored; x is looked up with exists; then puts one
    at a time until the pool's first eviction: its victim is y (x became the newer). Without
    the lookup (a second fresh pool) the victim is x, the older."""
    require_pool_binaries()
    for touch in (True, False):
        d = ready(openlaked(mode="kv", extra='dram_bytes = "16MiB"\nspill_bytes = 0\n'))
        c = client(d)
        x, y = K("x"), K("y")
        c.put([x], [val("x")])
        c.put([y], [val("y")])
        if touch:
            assert c.exists([x]) == [True]
        i = 0
        while evictions(c) == 0:
            c.put([K("fill", i)], [val("fill", i)])
            i += 1
            assert i < 10000, "no eviction after %d puts" % i
        assert evictions(c) == 1
        gone = [s != 0 for s in c.exists_len([x, y])[0]]
        assert gone == ([False, True] if touch else [True, False]), (touch, gone)
        c.close()
        d.stop()
