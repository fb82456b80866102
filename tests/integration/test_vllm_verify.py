"""The connector's verified load with the hash taken during the copy (libopenlake's
ol_kv_get_xxh3) against the two passes it replaces (get, then ol_iov_xxh3 over the ranges),
on a real openlaked, over shared memory and TCP.

A block corrupted in the pool (a payload bit at either end, the trailer's checksum) must be
rejected by the fused path exactly as by the old one: same failed chunk, same reason, same
counters, same recomputed output; a good block must pass both."""

import ctypes
import logging

import pytest

torch = pytest.importorskip("torch")

from test_vllm_connector import A, SUFFIX, blocks_of, cfg, engine, reference  # noqa: E402
from vllm_standin import Request  # noqa: E402
from vllm_standin.pool import kv_pools, pool  # noqa: E402,F401

import openlake_client as ol  # noqa: E402
from openlake_client import _lib, store  # noqa: E402
from openlake_client import keys as olkeys  # noqa: E402
from openlake_client.client import Client  # noqa: E402


def _old_library(m):
    """The path of a libopenlake without ol_kv_get_xxh3 (before OPENLAKE_0.4): what the
    connector does when the probe says the symbol is absent."""
    m.setattr(Client, "has_get_xxh3", lambda self: False)


def _no_second_pass(m):
    """Take away every way to hash the ranges after the get (ol_iov_xxh3, libxxhash): a
    block then verifies only if the get hashed it on its way in."""
    m.setattr(store, "_iov_fn", False)
    m.setattr(store, "_xxh", None)
    m.setattr(store, "_xxh_tried", True)


def _corrupt(cl, key, where):
    """Store key's value again with one bit flipped at where."""
    v = bytearray(cl.get([key])[0])
    payload = len(v) - store.TRAILER_LEN
    at = {"first": 0, "last": payload - 1,
          # the trailer's checksum field: magic(4) flags(2) rsv(2) len(8) key(8) crc(4)
          "checksum": payload + 24}[where]
    v[at] ^= 0x10
    assert cl.delete([key]) == [ol.Status.OK]
    assert cl.put([key], [bytes(v)]) == [ol.Status.OK]


def _load_once(addr, device, model, where, mode, caplog):
    """Engine 1 saves A under model; chunk 2's block is corrupted at where (None: left
    good); engine 2 loads A[:96] + SUFFIX with the hash taken by mode. What it saw."""
    c = cfg(addr, model=model, openlake_device=device, verify=True)
    e1 = engine(c)
    e1.add(Request("A", A, max_tokens=3))
    e1.run()
    h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
    e1.shutdown()
    if where:
        cl = ol.connect([addr], namespace="vllm")
        _corrupt(cl, olkeys.rank_key(h[2], 0), where)
        cl.close()
    e2 = engine(cfg(addr, model=model, openlake_device=device, verify=True))
    B = A[:96] + SUFFIX
    caplog.clear()
    with pytest.MonkeyPatch.context() as m:
        (_no_second_pass if mode == "fused" else _old_library)(m)
        e2.add(Request("B", B, max_tokens=3))
        so = e2.step()
    b_ids = blocks_of(e2, so, "B")
    external = e2.scheduler.requests["B"].num_external_computed_tokens
    e2.run()
    st = e2.merged_stats()
    why = sorted(r.getMessage().split(" chunk failed ")[1] for r in caplog.records
                 if "chunk failed" in r.getMessage())
    out = dict(external=external, invalid=sorted(b_ids.index(b) for b in e2.invalid_seen if b in b_ids),
               load_failures=st["load_failures"], corrupt_blocks=st["corrupt_blocks"],
               why=why, tokens=e2.scheduler.finished["B"].output_token_ids)
    e2.shutdown()
    return out


@pytest.mark.parametrize("device", ["local", "tcp"])
@pytest.mark.parametrize("where", [None, "first", "last", "checksum"])
def test_fused_check_rejects_what_two_passes_reject(pool, caplog, device, where):
    caplog.set_level(logging.WARNING, "openlake_client.connector")
    got = {mode: _load_once(pool.kv_addr, device, "verify/%s/%s/%s" % (device, where, mode),
                            where, mode, caplog)
           for mode in ("fused", "two-pass")}
    assert got["fused"] == got["two-pass"], got
    g = got["fused"]
    assert g["tokens"] == reference(A[:96] + SUFFIX)
    if where is None:
        assert g["load_failures"] == 0 and g["corrupt_blocks"] == 0 and not g["why"]
        assert not g["invalid"]
    else:
        assert g["load_failures"] == 1 and g["corrupt_blocks"] == 1
        assert g["why"] == ["(bad block: checksum mismatch): recomputing"], g["why"]
        assert g["invalid"] and min(g["invalid"]) == 2  # chunk 2 on: recomputed


@pytest.mark.parametrize("device", ["local", "tcp"])
def test_get_ops_hash_is_iov_xxh3_of_the_ranges(pool, device):
    """Client.get_ops(hash_iovcnt=k): per op, ol_iov_xxh3 of its first k ranges after the get;
    0 for a miss; None from a library without the call (the get still done)."""
    cl = ol.connect([pool.kv_addr], device=device, namespace="verify-ops")
    vals = [bytes((i * 7 + j) & 0xFF for j in range(100000 + 977 * i)) for i in range(5)]
    keys = [bytes([i]) * 32 for i in range(6)]  # the last one is never put: a miss
    assert cl.put(keys[:5], vals) == [ol.Status.OK] * 5
    bufs = [ctypes.create_string_buffer(len(v)) for v in vals] + [ctypes.create_string_buffer(8)]
    iovs = []
    for b in bufs:  # three ranges each: payload in two, a 32-byte "trailer"
        a, n = ctypes.addressof(b), len(b.raw)
        cut = [(a, (n - 32) // 3), (a + (n - 32) // 3, n - 32 - (n - 32) // 3),
               (a + n - 32, 32)] if n > 64 else [(a, n), (a, 0), (a, 0)]
        iovs.append((_lib.Iov * 3)(*[_lib.Iov(x, y) for x, y in cut]))
    kbuf = ctypes.create_string_buffer(b"".join(keys), 32 * 6)
    ops = (_lib.Op * 6)()
    for i in range(6):
        ops[i].key = ctypes.addressof(kbuf) + 32 * i
        ops[i].iov = ctypes.cast(iovs[i], ctypes.POINTER(_lib.Iov))
        ops[i].iovcnt = 3
    hashes = cl.get_ops(ctypes.addressof(ops), 6, 2)
    assert [ops[i].status for i in range(6)] == [0] * 5 + [int(ol.Status.MISS)]
    for i in range(5):
        assert bufs[i].raw == vals[i]
        # the trailer keeps the low 32 bits: what store._iov_xxh3 gives
        assert hashes[i] & 0xFFFFFFFF == store._iov_xxh3(
            store.IovArray(ctypes.addressof(iovs[i]), 2))
        want = ctypes.c_uint64()
        assert _lib.load().ol_iov_xxh3(ctypes.addressof(iovs[i]), 2, ctypes.byref(want)) == 0
        assert hashes[i] == want.value
    assert hashes[5] == 0
    with pytest.MonkeyPatch.context() as m:
        _old_library(m)
        for b in bufs:
            ctypes.memset(b, 0, len(b.raw))
        assert cl.get_ops(ctypes.addressof(ops), 6, 2) is None
        assert all(bufs[i].raw == vals[i] for i in range(5))
    cl.close()
