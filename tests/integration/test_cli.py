"""The `openlake` CLI: help and flag errors, `openlake bench s3` (its SigV4 signatures checked
against botocore on a capturing server; error replies counted as errors; a real run against
openlaked, right and wrong secret), `openlake bench kv` against the daemon's pool, and
`openlake node info` / `disk info` / `cluster status` against the daemon's config."""

import json
import os
import socket
import subprocess
import threading

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, OPENLAKE_CLI, OPENLAKED, REGION, SECRET_KEY, free_port

pytestmark = pytest.mark.skipif(not OPENLAKE_CLI.exists(),
                                reason=f"{OPENLAKE_CLI} is not built")
needs_daemon = pytest.mark.skipif(not OPENLAKED.exists(), reason=f"{OPENLAKED} is not built")

ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def cli(*args, timeout=30):
    return subprocess.run([str(OPENLAKE_CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


# ---- help and usage errors (no daemon) ----

def test_help_lists_commands():
    r = cli("--help")
    assert r.returncode == 0
    for word in ("bench", "node", "disk", "cluster"):
        assert word in r.stdout
    r = cli("bench", "--help")
    assert r.returncode == 0 and "s3" in r.stdout and "kv" in r.stdout
    r = cli("bench", "s3", "--help")
    assert r.returncode == 0
    for flag in ("--endpoint", "--access-key", "--secret-key", "--concurrency", "--json"):
        assert flag in r.stdout
    r = cli("node", "info", "--help")
    assert r.returncode == 0 and "--config" in r.stdout



# README: "`openlake COMMAND --help` describes each": every command and verb it lists, the flag
# anywhere after it (`kv stats --help` and `codec stats --help` were usage errors, exit 2 and
# "codec: --help: No such file", and `cluster status --help` without etcd showed node info's
# usage, which lacks the README's --etcd)
@pytest.mark.parametrize("args,words", [
    (["cp"], ["--resume"]), (["bench"], ["s3", "kv"]), (["bench", "kv"], ["--device"]),
    (["kv"], ["--nodes"]), (["kv", "stats"], ["--nodes", "--config"]),
    (["kv", "stats", "--json"], ["--nodes"]), (["node", "info"], ["--config"]),
    (["disk", "info"], ["--config"]), (["cluster"], ["init", "join", "leave", "status"]),
    (["cluster", "init"], ["--etcd"]), (["cluster", "leave"], ["--pool"]),
    (["cluster", "status"], ["--etcd", "--json"]), (["heal"], ["--status", "--no-wait"]),
    (["keys"], ["add", "list", "rm"]), (["keys", "list"], ["add", "rm"]),
    (["codec"], ["compress", "stats"]), (["codec", "compress"], ["--block"]),
    (["codec", "decompress"], ["decompress"]), (["codec", "stats"], ["--rows"]),
])
def test_every_command_and_verb_has_help(args, words):
    for flag in ("--help", "-h"):
        r = cli(*args, flag)
        assert r.returncode == 0, (args, flag, r.stdout, r.stderr)
        assert r.stdout.lower().startswith("usage:"), (args, flag, r.stdout)
        for w in words:
            assert w in r.stdout, (args, w, r.stdout)
        assert r.stderr == "", (args, flag, r.stderr)

@pytest.mark.parametrize("args,names", [
    (["bench", "s3", "--bogus"], "--bogus"),
    (["bench", "s3", "--size", "4XB"], "--size"),
    (["bench", "s3", "--concurrency", "0"], "--concurrency"),
    (["bench", "s3", "--workload", "delete"], "--workload"),
    (["bench", "s3", "--endpoint", "https://127.0.0.1:1"], "http://"),
    (["bench", "s3", "-c"], "-c"),
    (["bench", "kv", "--device", "rdma0"], "--device"),
    (["bench", "redis"], "--addr"),
    (["bench", "frobnicate"], "frobnicate"),
    (["node", "info", "--frobnicate"], "--frobnicate"),
    (["disk", "list"], "disk info"),
    (["cluster", "status", "--config"], "--config"),
])
def test_bad_flags_exit_2_and_name_the_flag(args, names):
    r = cli(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert names in r.stderr, r.stderr
    assert r.stdout == ""


def test_unreachable_endpoint_is_an_error_not_a_result():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    r = cli("bench", "s3", "--endpoint", f"http://127.0.0.1:{port}", "-d", "1", "--json")
    assert r.returncode == 1
    assert "--endpoint" in r.stderr


# ---- signatures and status accounting, on a capturing HTTP server ----

class Capture:
    """A keep-alive HTTP/1.1 server that records requests and answers each with `status`."""

    def __init__(self, status=200):
        self.status = status
        self.requests = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                method, target, _ = line.decode().split(" ", 2)
                headers = {}
                while True:
                    h = f.readline().decode()
                    if h in ("\r\n", ""):
                        break
                    k, v = h.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
                body = f.read(int(headers.get("content-length", 0)))
                self.requests.append((method, target, headers, body))
                err = b"" if self.status < 300 else b"<Error><Code>AccessDenied</Code></Error>"
                c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s"
                          % (self.status, len(err), err))
        except (OSError, ValueError):
            pass
        finally:
            c.close()

    def close(self):
        self.sock.close()


def botocore_signature(method, target, headers, secret):
    """The signature botocore computes for this request at its own x-amz-date."""
    req = AWSRequest(method=method, url=f"http://{headers['host']}{target}", headers={
        "host": headers["host"],
        "x-amz-date": headers["x-amz-date"],
        "x-amz-content-sha256": headers["x-amz-content-sha256"]})
    auth = S3SigV4Auth(Credentials(ACCESS_KEY, secret), "s3", REGION)
    req.context["timestamp"] = headers["x-amz-date"]
    creq = auth.canonical_request(req)
    return auth.signature(auth.string_to_sign(req, creq), req)


@pytest.mark.parametrize("payload", ["unsigned", "signed"])
def test_sigv4_signatures_match_botocore(payload):
    srv = Capture(200)
    try:
        r = cli("bench", "s3", "--endpoint", f"http://127.0.0.1:{srv.port}", "-w", "put",
                "-s", "1000", "-c", "2", "--ops", "6", "-d", "0", "--payload", payload,
                "--prefix", "dir/a b+c~", "--json", "-q")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["ops"] == 6 and out["errors"] == 0
        assert sum(c for _, c in out["histogram_us"]) == 6
        assert len(srv.requests) == 7  # the bucket, then 6 objects
        for method, target, headers, body in srv.requests:
            assert method == "PUT"
            auth = headers["authorization"]
            assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
            sig = auth.rsplit("Signature=", 1)[1]
            assert sig == botocore_signature(method, target, headers, SECRET_KEY)
            if payload == "signed":
                import hashlib
                assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
            else:
                assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
        targets = [t for _, t, _, _ in srv.requests[1:]]
        assert targets[0].startswith("/openlake-bench/dir/a%20b%2Bc~0000000")
        assert len(srv.requests[1][3]) == 1000
    finally:
        srv.close()


def test_error_replies_count_as_errors_never_successes():
    srv = Capture(403)
    try:
        r = cli("bench", "s3", "--endpoint", f"http://127.0.0.1:{srv.port}", "-w", "put",
                "-c", "2", "--ops", "10", "-d", "0", "--json", "-q")
        assert r.returncode == 1
        out = json.loads(r.stdout)
        assert out["ops"] == 0 and out["errors"] == 10
        assert out["error_codes"] == {"http_403": 10}
        assert "AccessDenied" in r.stderr  # the bucket creation failure is explained
    finally:
        srv.close()


# ---- against the real daemon ----

@needs_daemon
def test_bench_s3_against_daemon(s3_daemon):
    url = s3_daemon.s3_url
    r = cli("bench", "s3", "--endpoint", url, "-w", "get", "-s", "4KiB", "-n", "8", "-c", "4",
            "-d", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ops"] > 0 and out["errors"] == 0
    assert out["prefill"] == {"ops": 8, "errors": 0, "elapsed_s": out["prefill"]["elapsed_s"]}
    assert out["bytes"] == out["ops"] * 4096
    lat = out["latency_us"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
    assert sum(c for _, c in out["histogram_us"]) == out["ops"]

    r = cli("bench", "s3", "--endpoint", url, "-w", "mixed", "-s", "1KiB", "-n", "4", "-c",
            "2", "--ops", "40", "-d", "0", "--payload", "signed", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ops"] == 40 and out["errors"] == 0


@needs_daemon
def test_bench_s3_wrong_secret_reports_errors(s3_daemon):
    r = cli("bench", "s3", "--endpoint", s3_daemon.s3_url, "--secret-key", "not-the-secret",
            "-w", "put", "-c", "2", "-d", "1", "--json", "-q")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["ops"] == 0 and out["errors"] > 0
    assert out["error_codes"].get("http_403") == out["errors"]
    assert "--secret-key" in r.stderr


@needs_daemon
def test_bench_kv_against_daemon(s3_daemon):
    r = cli("bench", "kv", "--nodes", s3_daemon.kv_addr, "-w", "get", "-s", "64KiB", "-n",
            "16", "-c", "2", "-d", "1", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ops"] > 0 and out["errors"] == 0 and out["prefill"]["ops"] == 16


@needs_daemon
def test_node_and_disk_info(s3_daemon):
    d = s3_daemon
    r = cli("node", "info", "--config", d.config, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["daemon"]["up"] is True and out["daemon"]["version"]
    assert out["s3_addr"] == f"127.0.0.1:{d.s3_port}"
    assert out["erasure"] == {"set_drive_count": 4, "data": 3, "parity": 1}
    assert [x["path"] for x in out["drives"]] == d.data_dirs
    assert all(x["online"] and x["writable"] and x["total_bytes"] > 0 for x in out["drives"])
    uuids = [x["uuid"] for x in out["drives"]]  # from each drive's identity record
    assert len(set(uuids)) == 4 and all(len(u) == 32 for u in uuids), uuids

    r = cli("node", "info", "--config", d.config)
    assert r.returncode == 0 and "3 data + 1 parity" in r.stdout

    r = cli("disk", "info", "--config", d.config)
    assert r.returncode == 0, r.stderr
    for p in d.data_dirs:
        assert p in r.stdout

    # without the config, from the daemon's status document
    r = cli("disk", "info", "--endpoint", d.s3_url, "--json")
    assert r.returncode == 0, r.stderr
    assert [x["path"] for x in json.loads(r.stdout)["drives"]] == d.data_dirs


@needs_daemon
def test_cluster_status(s3_daemon):
    d = s3_daemon
    r = cli("cluster", "status", "--config", d.config, "--json")
    out = json.loads(r.stdout)
    assert out["s3"]["reachable"] is True
    assert out["kv"] == {"addr": d.kv_addr, "reachable": True}
    assert [n["rpc_addr"] for n in out["nodes"]] == [f"127.0.0.1:{d.rpc_port}"]
    # the rpc plane may not listen yet; the exit code must agree with what is reported
    assert r.returncode == (0 if out["nodes"][0]["reachable"] else 1)


def test_node_info_without_daemon(tmp_path):
    # both ports free and named: the default admin port 9001 may be another daemon's
    port, admin = free_port(), free_port()
    addrs = f's3_addr = "127.0.0.1:{port}"\nconsole_addr = "127.0.0.1:{admin}"\n'
    cfg = tmp_path / "openlake.toml"
    (tmp_path / "d0").mkdir()
    cfg.write_text(f'data_dirs = ["{tmp_path}/d0"]\n' + addrs)
    r = cli("node", "info", "--config", cfg, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["daemon"]["up"] is False
    assert out["drives"][0]["path"] == f"{tmp_path}/d0" and out["drives"][0]["writable"]
    # a drive that is gone is reported, and the exit status says so
    cfg.write_text(f'data_dirs = ["{tmp_path}/d0", "{tmp_path}/gone"]\n' + addrs)
    r = cli("disk", "info", "--config", cfg, "--json")
    assert r.returncode == 1
    drives = json.loads(r.stdout)["drives"]
    assert [(x["online"], x["writable"]) for x in drives] == [(True, True), (False, False)]
    r = cli("disk", "info", "--config", cfg)
    assert r.returncode == 1 and "OFFLINE" in r.stdout
    r = cli("node", "info", "--endpoint", f"http://127.0.0.1:{port}")
    assert r.returncode == 1 and "--config" in r.stderr
    r = cli("node", "info", "--config", tmp_path / "missing.toml")
    assert r.returncode == 2 and "missing.toml" in r.stderr
