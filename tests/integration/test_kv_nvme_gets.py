"""Many NVMe-tier gets outstanding at once against a real openlaked, while the same keys are
deleted and put again and the NVMe tier drops its oldest segments (eviction): the KV loops
read NVMe-only blocks on their own rings (docs/ARCHITECTURE.md, "Threads and I/O"), each
read holding its extent until the loop has checked the record. Every value returned must be
exactly a value some put of that key stored (self-describing: the key's id and the put's
generation in a header, the rest derived from both), every get must be answered (no hang),
and afterwards nothing is pinned and nothing was corrupt. Raw protocol over TCP, one get
per frame (the path that used to go to the two helper threads one read at a time); again
over TLS ([kv_tls]: the same loop states over a memory-BIO session); and with frames of 8
gets, which the loops read as batches of NVMe-only entries on their rings."""

import hashlib
import os
import random
import shutil
import socket
import ssl
import struct
import threading
import time

import pytest
from test_kv_security import ENT, GET, PUT, REP, hdr, ent, raw_hello, read_hdr, recv_exact, ready
from test_tls import make_ca, make_cert

DELETE = 5
OK, MISS = 0, 2
KiB = 1024
KEYS = 64  # the keys readers ask for, deleted and put again meanwhile
READERS = 32  # connections, each with one get outstanding at a time
LIMIT_S = 300.0  # generous: a loaded 2-core machine


def key(i):
    return hashlib.sha256(b"nvme-gets-%d" % i).digest()


def value(i, gen):
    """Key i's value of generation gen: 16-byte header (i, gen), then bytes of both."""
    n = 48 * KiB + (i * 7919 + gen * 104729) % (96 * KiB)
    seed = hashlib.sha256(b"v-%d-%d" % (i, gen)).digest()
    return struct.pack("<QQ", i, gen) + (seed * (n // len(seed) + 1))[: n - 16]


def kv_daemon(openlaked, tmp_path, extra, tls, serial):
    """A KV-only daemon on one drive with extra config, over TLS (its certificate's serial,
    d.ca the CA a client trusts) when tls, ready for connect() and stats()."""
    ca = None
    if tls:
        if not shutil.which("openssl"):
            pytest.skip("no openssl CLI")
        (tmp_path / "certs").mkdir()
        ca = make_ca(tmp_path / "certs")
        pem, key_path = make_cert(tmp_path / "certs", "kv", serial)
        extra += f'\n[kv_tls]\ncert_path = "{pem}"\nkey_path = "{key_path}"\n'
    d = openlaked(drives=1, mode="kv", extra=extra)
    d.ca = ca
    return ready(d)


def connect(d):
    s = socket.create_connection(("127.0.0.1", int(d.kv_addr.rsplit(":", 1)[1])), timeout=120)
    if getattr(d, "ca", None):
        s = ssl.create_default_context(cafile=str(d.ca)).wrap_socket(
            s, server_hostname="127.0.0.1")
    h, _ = raw_hello(s, local=False)
    assert h["status"] >= 0, h
    return s


def frame(s, op, ents, body=b""):
    s.sendall(hdr(op, len(ents), ENT * len(ents) + len(body)) + b"".join(ents) + body)
    h = read_hdr(s)
    assert h["status"] == 0 and h["count"] == len(ents), h


def put(s, k, data):
    frame(s, PUT, [ent(k, len(data))], data)
    return struct.unpack("<iIQQQ", recv_exact(s, REP))[0]


def delete(s, k):
    frame(s, DELETE, [ent(k)])
    return struct.unpack("<iIQQQ", recv_exact(s, REP))[0]


def get(s, k, cap=1 << 20):
    frame(s, GET, [ent(k, cap)])
    st, _, n, _, _ = struct.unpack("<iIQQQ", recv_exact(s, REP))
    return st, (recv_exact(s, n) if st == OK else None)


def stats(d):
    import openlake_client as ol

    tls = {"tls": True, "ca_file": str(d.ca)} if getattr(d, "ca", None) else {}
    c = ol.connect([d.kv_addr], device="tcp", timeout_ms=60000, **tls)
    try:
        st = c.stats()
        assert st["nodes"][0]["up"], st
        return st["nodes"][0]["stats"]
    finally:
        c.close()


def oldest_segment(d):
    """The id of the oldest NVMe segment file left (the tier drops segments oldest first)."""
    ids = [int(p.name[4:14]) for p in (d.root / "kv").rglob("seg-*.olkv")]
    return min(ids) if ids else 0


class Shared:
    def __init__(self):
        self.mu = threading.Lock()
        self.max_gen = [0] * KEYS  # the newest generation a put of key i was sent for
        self.stop = threading.Event()
        self.errors = []
        self.hits = self.misses = self.puts = self.deletes = self.filler = 0

    def fail(self, what):
        with self.mu:
            self.errors.append(what)
        self.stop.set()


def check(sh, i, data):
    """data must be exactly a value of key i that a put was sent for."""
    if data is None or len(data) < 16:
        return "key %d: %s bytes" % (i, None if data is None else len(data))
    i2, gen = struct.unpack("<QQ", data[:16])
    with sh.mu:
        newest = sh.max_gen[i]
    if i2 != i or gen > newest or data != value(i, gen):
        return "key %d: wrong bytes (header says key %d gen %d, newest put %d, %d bytes)" % (
            i, i2, gen, newest, len(data))
    return None


def get_many(s, ks, cap=1 << 20):
    """One GET frame of keys ks (ids): [(status, bytes or None)] in entry order."""
    frame(s, GET, [ent(key(i), cap) for i in ks])
    out = []
    for _ in ks:
        st, _, n, _, _ = struct.unpack("<iIQQQ", recv_exact(s, REP))
        out.append((st, recv_exact(s, n) if st == OK else None))
    return out


def reader(d, sh, seed, per_frame=1):
    rng = random.Random(seed)
    try:
        s = connect(d)
        try:
            while not sh.stop.is_set():
                ks = [rng.randrange(KEYS) for _ in range(per_frame)]
                got = [get(s, key(ks[0]))] if per_frame == 1 else get_many(s, ks)
                for i, (st, data) in zip(ks, got):
                    if st == OK:
                        why = check(sh, i, data)
                        if why:
                            sh.fail(why)
                        with sh.mu:
                            sh.hits += 1
                    elif st == MISS:
                        with sh.mu:
                            sh.misses += 1
                    else:
                        sh.fail("key %d: status %d" % (i, st))
        finally:
            s.close()
    except Exception as e:  # a timeout here is a hang
        sh.fail("reader %d: %r" % (seed, e))


FULL = 4


def churn(d, sh, seed, full_ok=False):
    """Delete a reader key and put its next generation; in between, filler puts that push
    DRAM out to NVMe and the NVMe tier past its cap (its oldest segments dropped). full_ok:
    a put may be refused FULL (readers' frames of many keys pin their DRAM hits and
    promotions until the frame's replies are sent: with 8 MiB of DRAM every eviction
    candidate of a size may be pinned)."""
    ok_puts = (OK, 1, FULL) if full_ok else (OK, 1)
    rng = random.Random(seed)
    filler = 0
    try:
        s = connect(d)
        try:
            while not sh.stop.is_set():
                i = rng.randrange(KEYS)
                if delete(s, key(i)) == OK:
                    with sh.mu:
                        sh.deletes += 1
                with sh.mu:
                    sh.max_gen[i] += 1
                    gen = sh.max_gen[i]
                st = put(s, key(i), value(i, gen))
                if st not in ok_puts:  # 1 = EXISTS: the other churner put it first
                    sh.fail("put key %d: status %d" % (i, st))
                with sh.mu:
                    sh.puts += 1
                for _ in range(4):
                    filler += 1
                    data = hashlib.sha256(b"f-%d-%d" % (seed, filler)).digest() * 4096
                    if put(s, hashlib.sha256(b"filler-%d-%d" % (seed, filler)).digest(),
                           data) not in ok_puts:
                        sh.fail("filler put failed")
                    with sh.mu:
                        sh.filler += 1
        finally:
            s.close()
    except Exception as e:
        sh.fail("churn %d: %r" % (seed, e))


@pytest.mark.parametrize("tls,per_frame", [(False, 1), (True, 1), (False, 8)],
                         ids=["tcp", "tls", "tcp-frames-of-8"])
def test_many_nvme_gets_outstanding_with_churn_are_exact(openlaked, tmp_path, tls, per_frame):
    # 8 MiB of DRAM, 32 MiB of NVMe in 4 MiB segments, write-behind within 50 ms: the reader
    # keys live mostly on NVMe only, and the filler puts make the tier drop segments. With
    # frames of 8 keys the loops read each frame's NVMe-only entries as one batch, whose
    # records are deleted, put again and dropped with their segments while it is read
    extra = 'dram_bytes = "8MiB"\nspill_bytes = "32MiB"\nwriteback_ms = 50\n'
    d = kv_daemon(openlaked, tmp_path, extra, tls, 0x7001)
    sh = Shared()
    s = connect(d)
    try:
        for i in range(KEYS):
            sh.max_gen[i] = 1
            assert put(s, key(i), value(i, 1)) == OK
    finally:
        s.close()
    before = stats(d)
    readers = READERS // per_frame  # the same gets outstanding
    threads = [threading.Thread(target=reader, args=(d, sh, r, per_frame))
               for r in range(readers)]
    threads += [threading.Thread(target=churn, args=(d, sh, 1000 + w, per_frame > 1))
                for w in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + LIMIT_S
    seen = None
    try:
        while not sh.stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.5)
            now = stats(d)
            nv = now["hits_nvme"] - before["hits_nvme"]
            # enough of each: NVMe hits, deletes and puts of reader keys, and whole
            # segments dropped by the tier (the oldest segment left is a later one)
            seen = (nv, sh.deletes, sh.puts, oldest_segment(d))
            if nv >= 3000 and sh.deletes >= 200 and seen[3] > 4:
                break
    finally:
        sh.stop.set()
        for t in threads:
            t.join(LIMIT_S)
    assert not any(t.is_alive() for t in threads), "a client thread hangs"
    assert not sh.errors, sh.errors[:5]
    assert seen and seen[0] >= 3000 and seen[1] >= 200 and seen[3] > 4, (
        "not enough gets, deletes or dropped segments before the time limit", seen)
    # the write-behind of the last puts holds its blocks until they are on NVMe: wait for it
    # (a loaded machine, a sanitized daemon), then nothing may be left pinned
    deadline = time.monotonic() + 120
    after = stats(d)
    while after["backlog_blocks"] and time.monotonic() < deadline:
        time.sleep(0.2)
        after = stats(d)
    assert after["backlog_blocks"] == 0, after
    assert after["corrupt"] == 0 and after["pinned"] == 0, after
    assert after["nvme_used"] <= 32 << 20, after


CORRUPT = 7


def test_corrupt_record_read_on_the_loop_ring_is_corrupt(openlaked):
    """A lone GET of an NVMe-only block is read on the KV loop's ring (into the connection's
    buffer, registered with the ring as a fixed buffer): a record with one flipped value byte
    on disk must answer CORRUPT (never bytes), be dropped (a miss next), and the other NVMe-only
    blocks read the same way stay exact."""
    extra = 'dram_bytes = "8MiB"\nwriteback = "strict"\nwriteback_ms = 200\n'
    d = ready(openlaked(drives=1, mode="kv", extra=extra))
    n = 200  # x 64 KiB = 12.5 MiB into 8 MiB of DRAM: the first ones are on NVMe only
    vals = [value(i, 1)[:16] + hashlib.sha256(b"c-%d" % i).digest() * 2048 for i in range(n)]
    vals = [v[:64 * KiB] for v in vals]
    s = connect(d)
    try:
        for i in range(n):
            assert put(s, key(i), vals[i]) == OK
        # flip one byte in the middle of key 0's value where the tier holds it
        needle = vals[0][32 * KiB:32 * KiB + 64]
        hit = None
        for seg in sorted((d.root / "kv").rglob("seg-*.olkv")):
            at = seg.read_bytes().find(needle)
            if at >= 0:
                hit = (seg, at)
                break
        assert hit, "key 0's record is not in any segment file"
        with open(hit[0], "r+b") as f:
            f.seek(hit[1])
            b = f.read(1)
            f.seek(hit[1])
            f.write(bytes([b[0] ^ 0x40]))
            f.flush()
            os.fsync(f.fileno())
        before = stats(d)
        st, data = get(s, key(0))
        assert st == CORRUPT and data is None, (st, None if data is None else len(data))
        assert get(s, key(0))[0] == MISS  # dropped from the index
        for i in range(1, 9):  # NVMe-only too, read on the ring: exact
            st, data = get(s, key(i))
            assert st == OK and data == vals[i], (i, st, None if data is None else len(data))
        after = stats(d)
        assert after["corrupt"] - before["corrupt"] == 1, (before, after)
        assert after["hits_nvme"] - before["hits_nvme"] >= 8, (before, after)
        assert after["pinned"] == 0, after
    finally:
        s.close()
