"""`openlake bench` paced runs (--rate) and the pieces bench/kv_bench.sh builds its latency and
NVMe-tier figures from: a paced run reports its rate and send lag, a stall of the target
counts in every operation it delays (no coordinated omission), --warmup, and gets of a key set
larger than a small DRAM tier that are served from the NVMe tier (the daemon's counters).
No assertion here is about speed: only about what the run counted."""

import json
import socket
import threading
import time

import pytest

from conftest import OPENLAKE_CLI, OPENLAKED
from test_cli import ENV, cli

pytestmark = pytest.mark.skipif(not OPENLAKE_CLI.exists(),
                                reason=f"{OPENLAKE_CLI} is not built")
needs_daemon = pytest.mark.skipif(not OPENLAKED.exists(), reason=f"{OPENLAKED} is not built")


@pytest.mark.parametrize("value", ["0", "-5", "fast", "1e9", "10/s"])
def test_bad_rate_exits_2_and_names_the_flag(value):
    r = cli("bench", "tcp", "--rate", value, "-d", "1")
    assert r.returncode == 2
    assert "--rate" in r.stderr and value in r.stderr


def test_help_documents_the_open_loop():
    r = cli("bench", "kv", "--help")
    assert r.returncode == 0
    assert "--rate OPS" in r.stdout and "coordinated omission" in r.stdout
    assert "--warmup" in r.stdout


def test_paced_run_reports_rate_and_send_lag():
    rate, conc = 200, 2
    r = cli("bench", "tcp", "-w", "get", "-s", "4KiB", "-c", conc, "-d", "1", "--rate", rate,
            "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rate"] == rate and out["errors"] == 0 and out["ops"] > 0
    for k in ("send_lag_us", "service_us"):
        q = out[k]
        assert set(q) >= {"mean", "p50", "p99", "p99_9", "max"}
        assert 0 <= q["p50"] <= q["p99"] <= q["max"]
    # counted from the scheduled send, latency is never below the service time alone
    assert out["latency_us"]["max"] >= out["service_us"]["max"]
    # never ahead of the schedule: at most one operation per thread per period
    assert out["ops"] <= rate * out["elapsed_s"] + conc
    text = cli("bench", "memcpy", "-s", "4KiB", "-c", "1", "-d", "0.5", "--rate", "100", "-q")
    assert text.returncode == 0, text.stderr
    assert "paced at 100.0 ops/s" in text.stdout and "send lag" in text.stdout
    assert "from the actual send" in text.stdout


def test_closed_loop_reports_no_rate():
    r = cli("bench", "memcpy", "-s", "4KiB", "-c", "1", "--ops", "10", "-d", "0", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "rate" not in out and "send_lag_us" not in out and "service_us" not in out


class StallingServer:
    """The plain-TCP reference's server side (16-byte request {op, len}; a get is answered
    with len bytes) that holds its first reply for `stall` seconds."""

    def __init__(self, stall):
        self.stall = stall
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.first = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            while True:
                hdr = b""
                while len(hdr) < 16:
                    b = c.recv(16 - len(hdr))
                    if not b:
                        return
                    hdr += b
                op = int.from_bytes(hdr[:8], "little")
                n = int.from_bytes(hdr[8:], "little")
                if self.first:
                    self.first = False
                    time.sleep(self.stall)
                if op != 1:
                    return
                c.sendall(b"\0" * n)

    def close(self):
        self.lsock.close()


def over(out, us):
    """Successful operations whose latency bucket lies above `us` microseconds."""
    return sum(n for edge, n in out["histogram_us"] if edge > us)


def test_a_stall_counts_in_every_operation_it_delays():
    # one connection due every 10 ms; the server sits on the first reply for 0.4 s. The
    # operations due meanwhile are sent late, and their latency counts from when they were
    # due: about 40 of them lie above 100 ms (a closed loop would show just the one).
    srv = StallingServer(0.4)
    try:
        r = cli("bench", "tcp", "--addr", f"127.0.0.1:{srv.port}", "-w", "get", "-s", "1KiB",
                "-c", "1", "-d", "1.5", "--rate", "100", "--json", "-q")
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["latency_us"]["max"] >= 400000
    assert over(out, 100000) >= 20
    assert out["send_lag_us"]["max"] >= 300000


def test_warmup_is_reported_apart():
    r = cli("bench", "memcpy", "-s", "4KiB", "-c", "1", "--warmup", "0.2", "--ops", "50", "-d",
            "0", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ops"] == 50 and out["warmup"]["ops"] > 0 and out["warmup"]["errors"] == 0


@needs_daemon
def test_paced_kv_gets_against_daemon(s3_daemon):
    r = cli("bench", "kv", "--nodes", s3_daemon.kv_addr, "-w", "get", "-s", "64KiB", "-n", "32",
            "-c", "2", "-d", "1", "--rate", "100", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rate"] == 100 and out["errors"] == 0 and out["prefill"]["ops"] == 32
    assert out["ops"] <= 100 * out["elapsed_s"] + 2


@needs_daemon
def test_gets_of_a_key_set_larger_than_dram_come_from_nvme(openlaked):
    # 16 MiB DRAM tier, 2048 x 64 KiB = 128 MiB of keys, random gets: most must be NVMe hits
    # (strict: the fill outruns the disk; async would drop blocks, as a cache may)
    d = openlaked(drives=1, mode="kv", extra='dram_bytes = "16MiB"\nspill_bytes = "1GiB"\n'
                  'writeback = "strict"\n')
    r = cli("bench", "kv", "--nodes", d.kv_addr, "-w", "get", "-s", "64KiB", "-n", "2048",
            "-c", "4", "--ops", "400", "-d", "0", "--warmup", "0.2", "--json", "-q", timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["errors"] == 0 and out["ops"] == 400 and out["prefill"]["ops"] == 2048
    st = cli("kv", "stats", "--nodes", d.kv_addr, "--json")
    assert st.returncode == 0, st.stderr
    s = json.loads(st.stdout)["nodes"][0]["stats"]
    assert s["misses"] == 0 and s["hits"] == 400 + out["warmup"]["ops"]
    assert s["hits_nvme"] + s["hits_dram"] == s["hits"]
    assert s["hits_nvme"] > s["hits"] // 2
