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


def _load_once(addr, device, model, where, mode, caplog, **extra):
    """Engine 1 saves A under model; chunk 2's block is corrupted at where (None: left
    good); engine 2 loads A[:96] + SUFFIX with the hash taken by mode. What it saw."""
    c = cfg(addr, model=model, openlake_device=device, verify=True, **extra)
    e1 = engine(c)
    e1.add(Request("A", A, max_tokens=3))
    e1.run()
    h = olkeys.chain_hashes(olkeys.seed_hash(e1.sched_conn.ol_identity, ""), A, 16)
    e1.shutdown()
    if where:
        cl = ol.connect([addr], namespace="vllm")
        _corrupt(cl, olkeys.rank_key(h[2], 0), where)
        cl.close()
    e2 = engine(cfg(addr, model=model, openlake_device=device, verify=True, **extra))
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


@pytest.mark.parametrize("where", [None, "first", "last", "checksum"])
def test_staged_loads_check_the_hash_the_get_took(pool, caplog, where):
    """Staged loads (staging = "always": the path CUDA tensors take, CPU twin) hash each
    slab's image during the get (ol_kv_get_xxh3 over the slab range): the same verdicts as
    hashing the slab after the get."""
    caplog.set_level(logging.WARNING, "openlake_client.connector")
    got = {mode: _load_once(pool.kv_addr, "local", "verify/staged/%s/%s" % (where, mode),
                            where, mode, caplog, staging="always")
           for mode in ("fused", "two-pass")}
    assert got["fused"] == got["two-pass"], got
    g = got["fused"]
    assert g["tokens"] == reference(A[:96] + SUFFIX)
    if where is None:
        assert g["load_failures"] == 0 and not g["why"] and not g["invalid"]
    else:
        assert g["load_failures"] == 1 and g["corrupt_blocks"] == 1
        assert g["why"] == ["(bad block: checksum mismatch): recomputing"], g["why"]


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
        # the trailer keeps the low 32 bits: what store.iov_xxh3 gives
        assert hashes[i] & 0xFFFFFFFF == store.iov_xxh3(
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


def _stored_value(kv, b, key, how):
    """The pool value of block b of kv under key (payload + trailer), spoilt as `how` says."""
    ranges = kv.iovs([b])
    payload = bytearray(b"".join(ctypes.string_at(a, n) for a, n in ranges))
    plen, flags, sum_ = len(payload), store.FLAG_XXH3, store.xxh3()(ranges)
    kp = key[:8]
    if how == "crc":  # a trailer written with CRC-32 (no libxxhash where it was saved)
        flags, sum_ = store.FLAG_CRC, store.crc_ranges(ranges)
    elif how == "unsummed":  # saved with verify off: nothing to compare
        flags, sum_ = 0, 0
    elif how == "payload":
        payload[len(payload) // 2] ^= 1
    elif how == "sum":
        sum_ ^= 1 << 31
    elif how == "length":
        plen += 1
    elif how == "key":
        kp = bytes([kp[0] ^ 1]) + kp[1:]
    tr = bytearray(store.TRAILER.pack(store.MAGIC, flags, 0, plen, kp, sum_, 0))
    if how == "magic":
        tr[0] ^= 1
    return bytes(payload) + bytes(tr) + (b"x" if how == "size" else b"")


@pytest.mark.parametrize("device", ["local", "tcp"])
def test_batch_check_is_the_per_chunk_check(pool, device):
    """The fast load path checks a batch's trailers with array operations (connector_bulk);
    a batch it passes must be one every chunk of which store.check_trailer passes, and every
    chunk the per-chunk check rejects must fail the batch (which then goes to that check).
    Each way a stored value can be wrong, in one chunk of four, against the real pool."""
    from openlake_client.connector_bulk import BulkGet
    from openlake_client.layouts import PagedKV
    from vllm_standin import make_kv_caches

    np = pytest.importorskip("numpy")
    kv = PagedKV(make_kv_caches("fa", 3, 8, 16, 2, 8), 8, 16)
    for t in kv.tensors:
        t.copy_(torch.randn(t.shape).to(t.dtype))
    payload = kv.block_bytes
    cl = ol.connect([pool.kv_addr], device=device, namespace="verify-batch")
    # (how chunk 2 is stored, verify, whether the batch may pass)
    cases = [("good", True, True), ("unsummed", True, True), ("crc", True, False),
             ("payload", True, False), ("sum", True, False), ("length", True, False),
             ("key", True, False), ("magic", True, False), ("size", True, False),
             ("missing", True, False), ("payload", False, True), ("sum", False, True),
             ("key", False, False)]
    for n, (how, verify, passes) in enumerate(cases):
        keys = [bytes([n, i]) * 16 for i in range(4)]
        vals = [_stored_value(kv, 1 + i, k, how if i == 2 else "good")
                for i, k in enumerate(keys)]
        put = [(k, v) for i, (k, v) in enumerate(zip(keys, vals))
               if not (i == 2 and how == "missing")]
        assert cl.put([k for k, _ in put], [v for _, v in put]) == [ol.Status.OK] * len(put)
        b = BulkGet(kv, np.array([[1], [2], [3], [4]], dtype=np.int64), keys)
        b.get(lambda name, *a: getattr(cl, name)(*a), verify)
        rows = [st == 0 and n_ == payload + store.TRAILER_LEN and
                store.check_trailer(tr, k, r, payload, verify) == ""
                for (st, n_, tr, r), k in zip(b.rows(), keys)]
        assert b.all_good(payload, verify) == passes, (how, verify)
        # the per-chunk check: only chunk 2 can differ; CRC-32 trailers are good, but checked
        # there, not in the batch
        assert rows == [True, True, how in ("good", "unsummed", "crc") or
                        (not verify and how in ("payload", "sum")), True], (how, verify)
        if passes:
            assert all(rows)
        cl.delete(keys)
    cl.close()
