"""Connections spread over the KV loops. The kernel hands a burst of connects mostly to one
loop (whichever loop is awake drains the listen backlog); the loop that accepted a connection
passes it on to the loop serving the fewest, so 16 connections opened at once are served 8 and
8 by two loops (before: most of them by one loop, which then bounded a 16-connection put run
by one core while the other loop idled: bench/RESULTS.md, "KV TCP puts: connections dealt
evenly over the loops"). Counted by openlake_kv_loop_connections on /metrics."""

import os
import re
import socket
import time
import urllib.request

import pytest

from test_kv_security import raw_hello, ready

N_CONNS = 16


def loop_conns(d):
    """{loop name: connections} from /metrics (empty until the pool's figures are there)."""
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=30) as r:
        body = r.read().decode()
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^openlake_kv_loop_connections\{loop="([^"]+)"\} (\d+)$', body, re.M)}


def wait_for(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_burst_of_connections_is_dealt_evenly_over_the_loops(openlaked):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the pool runs one loop, nothing to balance")
    d = ready(openlaked(drives=1, extra='dram_bytes = "16MiB"\n'))
    loops = wait_for("the loop gauges on /metrics", lambda: loop_conns(d))
    assert len(loops) >= 2, loops
    socks = []
    try:
        # all connects first (the kernel completes them into the backlog), then the HELLOs
        for _ in range(N_CONNS):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", d.kv_port))
            socks.append(s)
        for s in socks:
            s.setblocking(True)
            s.settimeout(30)
            h, _ = raw_hello(s, local=False)
            assert h["status"] == 0, h
        got = wait_for(f"{N_CONNS} connections on the loop gauges",
                       lambda: (lambda m: m if sum(m.values()) == N_CONNS else None)(
                           loop_conns(d)))
        assert max(got.values()) - min(got.values()) <= 1, got
    finally:
        for s in socks:
            s.close()
    # closed connections leave the counts
    wait_for("the loop gauges back to 0", lambda: sum(loop_conns(d).values()) == 0)
