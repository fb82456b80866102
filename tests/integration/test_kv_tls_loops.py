"""TLS KV connections ([kv_tls]) on the per-core io_uring loops, against a real openlaked:
hundreds of idle TLS connections, handshakes stalled half-way and a TLS frame stalled
half-way add no daemon thread (the server used to start one per TLS connection); every idle
connection still serves; the stalled ones are closed at the frame timeout while a TLS client
(the python package over libopenlake, and raw frames over Python's ssl) round-trips blocks of
4 KiB, 256 KiB and 2 MiB bit-exact, one per frame and several in one frame."""
import hashlib
import resource
import socket
import ssl
import struct
import time

from test_kv_loops import raw_get, raw_put, threads
from test_kv_security import ENT, GET, PUT, REP, ent, hdr, raw_hello, read_hdr, recv_exact, start
from test_kv_tls import certs, kv_tls, ol  # noqa: F401 (fixtures)

OK = 0
N_IDLE = 300
N_HALF_RECORD = 4   # a ClientHello cut in the middle of its record
N_NO_FINISH = 4     # a whole ClientHello, then nothing (the server's flight unanswered)
N_STALLED_FRAME = 2  # handshake done, a PUT promising 1 MiB that sends 1000 bytes
FRAME_TIMEOUT_S = 10  # KVL_FRAME_TIMEOUT_NS in src/kv/serve_loop.c
SIZES = (4096, 256 << 10, 2 << 20)


def key(*parts):
    return hashlib.sha256(repr(parts).encode()).digest()


def val(tag, n):
    seed = hashlib.sha256(repr(tag).encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def tls_conn(ctx, port):
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def client_hello(ctx):
    """The bytes of a ClientHello for this context (made in memory, never finished)."""
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def closed_by_peer(s):
    """Whether the server closes s (what it sent first, e.g. its handshake flight, is read
    and dropped)."""
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except (ConnectionResetError, socket.timeout):
        return False


def test_idle_and_half_done_tls_connections_add_no_threads(openlaked, ol, certs):  # noqa: F811
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    _, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path))
    ctx = ssl.create_default_context(cafile=str(ca))
    first = tls_conn(ctx, d.kv_port)
    raw_hello(first, local=False)
    assert raw_put(first, key("warm"), b"w" * 4096) == OK  # every loop and helper exists now
    base = threads(d.proc.pid)
    idle, half = [], []
    try:
        for i in range(N_IDLE):
            s = tls_conn(ctx, d.kv_port)  # a whole handshake, a HELLO, then idle
            raw_hello(s, local=False)
            idle.append(s)
        hello = client_hello(ctx)
        assert hello[0] == 0x16 and len(hello) > 100
        for i in range(N_HALF_RECORD + N_NO_FINISH):
            s = socket.create_connection(("127.0.0.1", d.kv_port), timeout=60)
            s.sendall(hello[:len(hello) // 2] if i < N_HALF_RECORD else hello)
            half.append(s)
        for i in range(N_STALLED_FRAME):
            s = tls_conn(ctx, d.kv_port)
            raw_hello(s, local=False)
            s.sendall(hdr(PUT, 1, ENT + (1 << 20)) + ent(key("stall", i), 1 << 20) +
                      b"s" * 1000)
            half.append(s)
        t0 = time.monotonic()
        now = threads(d.proc.pid)
        assert len(now) <= len(base), (len(base), len(now), sorted(set(now) - set(base)))

        # a TLS client through libopenlake: blocks of each size, one frame for all
        c = ol.connect([d.kv_addr], device="tcp", namespace="tls-loops", tls=True,
                       ca_file=str(ca), timeout_ms=60000)
        ks = [key("lib", n) for n in SIZES]
        vs = [val("lib", n) for n in SIZES]
        assert c.put(ks, vs) == [ol.Status.OK] * len(SIZES)
        assert c.get(ks) == vs
        c.close()
        # raw frames over Python's ssl: one block per frame, then all in one PUT and one GET
        for n in SIZES:
            assert raw_put(first, key("raw", n), val("raw", n)) == OK
            assert raw_get(first, key("raw", n), n) == (OK, val("raw", n)), n
        body = b"".join(ent(key("many", n), n) + val("many", n) for n in SIZES)
        first.sendall(hdr(PUT, len(SIZES), len(body)) + body)
        h = read_hdr(first)
        assert h["status"] == 0 and h["count"] == len(SIZES), h
        reps = recv_exact(first, REP * len(SIZES))
        assert [struct.unpack_from("<i", reps, i * REP)[0] for i in range(3)] == [OK] * 3
        first.sendall(hdr(GET, len(SIZES), ENT * len(SIZES)) +
                      b"".join(ent(key("many", n), n) for n in SIZES))
        h = read_hdr(first)
        assert h["status"] == 0 and h["count"] == len(SIZES), h
        for n in SIZES:
            st, _, ln, _, _ = struct.unpack("<iIQQQ", recv_exact(first, REP))
            assert (st, ln) == (OK, n)
            assert recv_exact(first, n) == val("many", n), n

        for i, s in enumerate(idle):  # each idle TLS connection still serves
            assert raw_put(s, key("idle", i), val("idle", 4096 + i)) == OK
        for i, s in enumerate(idle):
            assert raw_get(s, key("idle", i), 1 << 16) == (OK, val("idle", 4096 + i)), i
        assert raw_get(first, key("stall", 0), 1 << 20)[0] == 2  # never committed: a miss
        assert len(threads(d.proc.pid)) <= len(base)

        # the half-done handshakes and the stalled frames end at the frame timeout
        deadline = t0 + FRAME_TIMEOUT_S + 60
        for s in half:
            s.settimeout(max(1.0, deadline - time.monotonic()))
            assert closed_by_peer(s)
        log = d.log()
        assert "TLS handshake failed: not done within the frame timeout" in log, log[-3000:]
        assert "timed out" in log
        for i in range(0, N_IDLE, 30):  # the idle ones are kept
            assert raw_get(idle[i], key("idle", i), 1 << 16) == (OK, val("idle", 4096 + i))
    finally:
        for s in idle + half:
            s.close()
    assert raw_get(first, key("warm"), 4096) == (OK, b"w" * 4096)
    first.close()
