#!/usr/bin/python3
"""A normal client's latency on the S3 port while another client floods it, beside the same
client on the quiet daemon in the same run.

    OPENLAKE_BUILD=build /usr/bin/python3 bench/http_flood.py [--requests 300] [--idle 4600]
        [--half 500]

Starts openlaked (ephemeral loopback port, temp drives, header timeout 10 min so half-sent
heads stay open), then measures GET /openlake/health, each on a new connection from
127.0.0.1 (connect + request + response): quiet; with --idle idle connections open from
127.0.0.2-9; with --half half-sent request heads open from 127.0.0.2-9. Prints p50 / p99 / max
per case, the answers that were not 200, and the daemon's thread count. Benchmarks never fail: they print figures."""

import argparse
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from conftest import Daemon  # noqa: E402

FLOOD = [f"127.0.0.{i}" for i in range(2, 10)]


def one_get(port):
    """(seconds, answered 200)"""
    t0 = time.perf_counter()
    resp = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(b"GET /openlake/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while True:
                b = s.recv(65536)
                if not b:
                    break
                resp += b
    except OSError:
        pass
    return time.perf_counter() - t0, resp.startswith(b"HTTP/1.1 200 ")


def measure(port, n):
    res = [one_get(port) for _ in range(n)]
    lat = sorted(r[0] for r in res)
    bad = sum(1 for r in res if not r[1])
    return (lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99) - 1] * 1e3, lat[-1] * 1e3, bad)


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def flood(port, n, payload):
    socks = []
    for i in range(n):
        s = socket.socket()
        s.bind((FLOOD[i % len(FLOOD)], 0))
        s.connect(("127.0.0.1", port))
        if payload:
            s.sendall(payload)
        socks.append(s)
    time.sleep(1)  # let the daemon accept and read them all
    return socks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--idle", type=int, default=4600)
    ap.add_argument("--half", type=int, default=500)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    root = tempfile.mkdtemp(prefix="openlake-flood-")
    d = Daemon(root, kv=False, args=("--http_header_timeout_ms", "600000")).start()
    try:
        port, pid = d.s3_port, d.proc.pid
        ref = measure(port, a.requests)
        fmt = "p50 %.2f ms  p99 %.2f ms  max %.2f ms  not-200 %d"
        print(f"quiet (reference):             {fmt % ref}  threads {threads(pid)}")
        socks = flood(port, a.idle, b"")
        r = measure(port, a.requests)
        print(f"{a.idle} idle conns open:       {fmt % r}  threads {threads(pid)}"
              f"  (quiet p50 {ref[0]:.2f} ms)")
        for s in socks:
            s.close()
        socks = flood(port, a.half, b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        r = measure(port, a.requests)
        print(f"{a.half} half-sent heads open:   {fmt % r}  threads {threads(pid)}"
              f"  (quiet p50 {ref[0]:.2f} ms)")
        for s in socks:
            s.close()
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
