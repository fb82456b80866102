"""GET frames of blocks on the NVMe tier only, against a real openlaked on the per-core loops:
the loop that reads the first such entry reads the NVMe-only entries after it in the same
submission on its own ring and sends their replies together. Every reply must
come in entry order with exactly its block's bytes, a miss in the middle stays a miss, a
reply never longer than the entry's capacity, and the second frame (which promotes what the
first read) must return the same bytes. The replies of a batch go out gathered into one
send. Raw protocol (docs/kv-protocol.md) over
TCP, and over TLS ([kv_tls]: the same gathered replies encrypted from where they lie)."""

import hashlib
import struct

import pytest
from test_kv_nvme_gets import connect, kv_daemon, stats
from test_kv_security import ENT, GET, PUT, REP, hdr, ent, read_hdr, recv_exact

OK, MISS = 0, 2
KiB = 1024
N = 80


def key(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def val(i):
    n = 150 * KiB + (i * 7919) % (150 * KiB)
    seed = hashlib.sha256(b"ra-%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def put(s, k, data):
    s.sendall(hdr(PUT, 1, ENT + len(data)) + ent(k, len(data)) + data)
    h = read_hdr(s)
    assert h["status"] == 0 and h["count"] == 1, h
    return struct.unpack("<iIQQQ", recv_exact(s, REP))[0]


def get_frame(s, keys, cap):
    """One GET frame of all keys; the replies in order as (status, bytes or None)."""
    s.sendall(hdr(GET, len(keys), ENT * len(keys)) + b"".join(ent(k, cap) for k in keys))
    h = read_hdr(s)
    assert h["status"] == 0 and h["count"] == len(keys), h
    out = []
    for _ in keys:
        st, _, n, _, _ = struct.unpack("<iIQQQ", recv_exact(s, REP))
        out.append((st, recv_exact(s, n) if st == OK else None))
    return out


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_get_frame_of_nvme_only_blocks_is_read_ahead_and_exact(openlaked, tmp_path, tls):
    # strict: every put is on NVMe when it returns, so DRAM evictions demote, never drop
    extra = 'dram_bytes = "8MiB"\nwriteback = "strict"\nwriteback_ms = 200\n'
    d = kv_daemon(openlaked, tmp_path, extra, tls, 0x7002)
    s = connect(d)
    try:
        for i in range(N):  # ~18 MiB into 8 MiB of DRAM
            assert put(s, key("ra", i), val(i)) == OK
        before = stats(d)
        assert before["nvme_entries"] >= N // 2, before
        keys = [key("ra", i) for i in range(N)]
        keys.insert(N // 2, key("ra", "never put"))
        want = [val(i) for i in range(N)]
        want.insert(N // 2, None)
        for round_ in range(2):  # the second frame promotes what the first read
            got = get_frame(s, keys, 1 << 20)
            for j, (st, data) in enumerate(got):
                if want[j] is None:
                    assert st == MISS, (round_, j, st)
                else:
                    assert st == OK and data == want[j], (round_, j, st,
                                                          None if data is None else len(data))
        after = stats(d)
        # most entries came from NVMe: the read-ahead path, not DRAM hits
        assert after["hits_nvme"] - before["hits_nvme"] >= N // 2, (before, after)
        assert after["corrupt"] == 0 and after["pinned"] == 0, after
        # a small capacity: the entry's reply says so, the next entries still come right
        got = get_frame(s, keys[:3], 4 * KiB)
        assert all(st != OK or len(data) <= 4 * KiB for st, data in got), got
        got = get_frame(s, keys[:3], 1 << 20)
        assert [data for _, data in got] == want[:3]
    finally:
        s.close()
