"""Shared fixtures: start the real openlaked on ephemeral loopback ports with temp drives.

    def test_x(openlaked):
        d = openlaked()                       # defaults: 4 drives, N=4, P=1, S3 + KV
        d.s3_url, d.kv_addr, d.data_dirs      # "http://127.0.0.1:PORT", "127.0.0.1:PORT", [...]
        d.kill9(); d.start()                  # crash and restart on the same dirs and ports
        # parity defaults to 1 (0 with a single drive)
        d.stop()                              # SIGTERM, wait

    d = openlaked(drives=6, parity=2, extra="[kv]\\ndram_bytes = \\"64MiB\\"\\n", mode="kv")

Fixtures: `openlaked` (factory, everything stopped at test end), `daemon` (one default daemon
for the test), `s3_daemon` (module-scoped default daemon shared by a test file),
`s3_client` (boto3 client for s3_daemon). Binaries come from $OPENLAKE_BUILD (default
<repo>/build). The sample KV data (kv-bf16/) comes from $OPENLAKE_TEST_DATA (the directory
holding kv-bf16/), else ../shared/data beside the checkout: `kv_data_dir()`; tests that need
it and do not find it skip with KV_DATA_MISSING as the reason, and the run ends with a
warning line saying so.
"""

import glob
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("OPENLAKE_BUILD", REPO / "build"))
if not BUILD.is_absolute():
    BUILD = REPO / BUILD
OPENLAKED = BUILD / "cmd" / "openlaked" / "openlaked"
OPENLAKE_CLI = BUILD / "cmd" / "openlake" / "openlake"
SHARED = REPO.parent / "shared"


def _kv_data_candidates():
    env = os.environ.get("OPENLAKE_TEST_DATA")
    if env:
        p = pathlib.Path(env)
        return [p / "kv-bf16", p]  # the data dir, or kv-bf16 itself
    return [SHARED / "data" / "kv-bf16"]


def kv_data_dir():
    """The sample KV data (kv-bf16/: stories260K's model and BF16 KV blocks), or None."""
    for d in _kv_data_candidates():
        if (d / "stories260K").is_dir() or (d / "model" / "stories260K.bin").exists():
            return d
    return None


KV_DATA_MISSING = ("sample KV data (kv-bf16/) not found at %s: set OPENLAKE_TEST_DATA to the "
                   "directory holding kv-bf16/" % " or ".join(str(d) for d in
                                                         _kv_data_candidates()))
_kv_data_skips = []


def skip_without_kv_data():
    """pytest.skip (counted for the end-of-run warning) when the sample KV data is absent."""
    if kv_data_dir() is None:
        pytest.skip(KV_DATA_MISSING)
    return kv_data_dir()


def pytest_report_header(config):
    d = kv_data_dir()
    return "openlake: sample KV data: " + (str(d) if d else "ABSENT (" + KV_DATA_MISSING + ")")


def pytest_runtest_logreport(report):
    if report.skipped and "sample KV data (kv-bf16/) not found" in str(report.longrepr):
        _kv_data_skips.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _kv_data_skips:
        n = len(set(_kv_data_skips))
        terminalreporter.write_sep("!", "%d test(s) SKIPPED: %s" % (n, KV_DATA_MISSING), red=True)
ACCESS_KEY = "openlakeadmin"
SECRET_KEY = "openlakeadmin"
REGION = "us-east-1"


def _ephemeral_low():
    try:
        return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_HANDED_OUT = set()


def free_port():
    """A port that was free a moment ago (the daemon binds it right after).

    Chosen *below* the kernel's ephemeral range: a port taken from that range (bind to 0) can
    be handed by the kernel to any client's outgoing connection before the daemon binds it,
    and the daemon then fails with "address in use" (seen under the full suite). A port below
    the range is only ever taken by an explicit bind, which the check here sees; a port is
    never handed out twice in one test session.

    OPENLAKE_TEST_PORTS="LO-HI" narrows the range: scripts/test.sh runs the plain and the
    sanitized integration passes at the same time, each in its own half, so the two never
    pick the same port; under xdist each worker of a pass takes its own slice of that."""
    lo, hi = 10000, _ephemeral_low() - 1
    if hi - lo < 1000:
        lo, hi = 1024, hi
    span = os.environ.get("OPENLAKE_TEST_PORTS")
    if span:
        a, b = (int(x) for x in span.split("-"))
        lo, hi = max(lo, a), min(hi, b)
    # pytest -n N (xdist, as scripts/test.sh runs the suite): N processes pick ports at once,
    # and a port one of them checked free may not be bound yet when another checks it; each
    # worker keeps to its own slice of the range
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        i = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
        w = (hi - lo + 1) // workers
        lo, hi = lo + i * w, lo + (i + 1) * w - 1
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(hi - lo + 1):
        p = rng.randint(lo, hi)
        if p in _HANDED_OUT:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("0.0.0.0", p))
        except OSError:
            continue
        _HANDED_OUT.add(p)
        return p
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout=60, what="condition"):
    """Poll cond() every 0.1 s until it returns something true (returned) or timeout seconds
    pass (AssertionError naming what)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_port(port, timeout=15.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def wait_port_closed(port, timeout=30.0):
    """Wait until nothing accepts on port. After `kill -9` a listening socket can outlive its
    process for a moment: an accept armed on an io_uring holds a reference to it until the
    kernel has torn the ring down, asynchronously, and until then connections are accepted
    into a backlog nobody reads. A restart that waited only for the port to accept could
    take the dead daemon's socket for the new one's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            return True
        time.sleep(0.02)
    return False


class Daemon:
    def __init__(self, root, drives=4, parity=None, mode="storage", extra="", kv=True,
                 set_drive_count=None, args=(), bind="127.0.0.1"):
        self.root = pathlib.Path(root)
        self.mode = mode
        self.data_dirs = [str(self.root / f"d{i}") for i in range(drives)]
        self.s3_port = free_port()
        self.rpc_port = free_port()
        self.kv_port = free_port() if kv else None
        # every daemon gets its own admin listener port: the default (9001) would collide
        self.admin_port = free_port()
        self.config = self.root / "openlake.toml"
        self.log_path = self.root / "openlaked.log"
        self.args = list(args)
        n = set_drive_count or drives
        if parity is None:
            parity = 1 if n > 1 else 0
        dirs = ", ".join(f'"{d}"' for d in self.data_dirs)
        kv_line = f'kv_addr = "127.0.0.1:{self.kv_port}"' if kv else 'kv_addr = ""'
        self.config.write_text(
            f"""self_id = 0
mode = "{mode}"
data_dirs = [{dirs}]
s3_addr = "{bind}:{self.s3_port}"
console_addr = "127.0.0.1:{self.admin_port}"
rpc_addr = "127.0.0.1:{self.rpc_port}"
{kv_line}
set_drive_count = {n}
default_parity_count = {parity}
region = "{REGION}"

[[credentials]]
access_key = "{ACCESS_KEY}"
secret_key = "{SECRET_KEY}"

[[nodes]]
id = 0
rpc_addr = "127.0.0.1:{self.rpc_port}"
disk_count = {drives}

[kv]
spill_dir = "{self.root / 'kv'}"
{extra}
"""
        )
        self.proc = None
        self._log = None

    @property
    def s3_url(self):
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def admin_url(self):
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def kv_addr(self):
        return f"127.0.0.1:{self.kv_port}"

    def start(self, timeout=20.0):
        assert OPENLAKED.exists(), f"{OPENLAKED} is not built (run: meson setup build && ninja -C build)"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(OPENLAKED), "--config", str(self.config), *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=self.root)
        ports = []
        if self.mode != "kv":
            ports.append(self.s3_port)
        if self.kv_port:
            ports.append(self.kv_port)
        for p in ports:
            if not wait_port(p, timeout, self.proc):
                self.kill9()
                raise RuntimeError(f"openlaked did not listen on {p}:\n{self.log()}")
        return self

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            for p in ([self.s3_port] if self.mode != "kv" else []) + (
                    [self.kv_port] if self.kv_port else []):
                assert wait_port_closed(p), f"port {p} still accepts 30 s after kill -9"
        self._close_log()

    def stop(self, timeout=20.0):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise RuntimeError("openlaked did not stop on SIGTERM within %ss" % timeout)
        self._close_log()
        return self.proc.returncode if self.proc else None

    def restart(self):
        self.stop()
        return self.start()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cleanup(self):
        """End of test: stop cleanly (the daemon unlinks its shm DRAM tier), else kill -9, and
        remove a shm object that a killed daemon left behind."""
        try:
            self.stop(timeout=10)
        except Exception:
            self.kill9()
        if self.kv_port:
            for f in glob.glob(f"/dev/shm/openlake-kv-{self.kv_port}-*"):
                try:
                    os.unlink(f)
                except OSError:
                    pass

    def _close_log(self):
        if self._log:
            self._log.close()
            self._log = None


@pytest.fixture
def openlaked(tmp_path):
    started = []

    def make(**kw):
        root = tmp_path / f"node{len(started)}"
        root.mkdir()
        d = Daemon(root, **kw)
        started.append(d)
        return d.start()

    yield make
    for d in started:
        d.cleanup()


@pytest.fixture
def daemon(openlaked):
    return openlaked()


@pytest.fixture(scope="module")
def s3_daemon():
    root = tempfile.mkdtemp(prefix="openlake-test-")
    d = Daemon(root).start()
    yield d
    d.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def boto3_client(url, **kw):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=url, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      connect_timeout=5, read_timeout=60, **kw))


@pytest.fixture(scope="module")
def s3_client(s3_daemon):
    return boto3_client(s3_daemon.s3_url)


def native_client(d, bucket, conns=4):
    """openlake_client.s3.Client (libopenlake's native S3 client) on daemon d, with bucket
    created"""
    sys.path.insert(0, str(REPO / "python"))
    from openlake_client import s3
    cl = s3.Client(endpoint=d.s3_url, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                   region=REGION, conns=conns)
    cl.create_bucket(bucket)
    return cl


def aws_env(extra=None):
    env = dict(os.environ)
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    if extra:
        env.update(extra)
    return env


def admin_request(d, method, path, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                  signed=True, headers=None, timeout=30, port=None):
    """One call to the admin plane of daemon d (status, heal, metrics...): SigV4-signed with
    botocore's SigV4Auth (service "s3", as an admin client signs it) unless signed=False.
    path may carry a query; port: the admin listener's (d.admin_port) instead of the S3 port.
    Returns (status, headers, body bytes)."""
    import http.client

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    hdrs = dict(headers or {})
    if signed:
        port = port or d.s3_port
        req = AWSRequest(method=method, url="http://127.0.0.1:%d%s" % (port, path), data=b"",
                         headers=hdrs)
        SigV4Auth(Credentials(access_key, secret_key), "s3", region).add_auth(req)
        hdrs = dict(req.headers.items())
    c = http.client.HTTPConnection("127.0.0.1", port or d.s3_port, timeout=timeout)
    try:
        c.request(method, path, headers=hdrs)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def admin_get(d, path, **kw):
    """admin_request(d, "GET", path, ...) -> (status, body bytes)."""
    status, _, body = admin_request(d, "GET", path, **kw)
    return status, body
