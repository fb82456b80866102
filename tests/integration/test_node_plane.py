"""The node plane between real daemons (src/node/): etcd for membership, openlaked nodes with
[cluster] secret serving rpc_addr, and the plane's client driven through
build/src/node/node_cli (the C client library, as a node's store will call it).

A shard of several MiB goes to a drive of another node and back bit-exact; a wrong secret is
refused and logged; a frozen node times out within the call's deadline and a killed one fails
at once, neither hangs.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, Daemon, wait_for, wait_port

ETCD = shutil.which("etcd")
NODE_CLI = BUILD / "src" / "node" / "node_cli"
ETCD_CLI = BUILD / "src" / "cluster" / "etcd_cli"
SECRET = "plane-test-secret-0123456789"

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd-server not installed")


def node_cli(addr, *args, secret=SECRET, self_id=1, deadline_ms=30000, timeout=60):
    assert NODE_CLI.exists(), f"{NODE_CLI} is not built"
    return subprocess.run([str(NODE_CLI), addr, secret, str(self_id), str(deadline_ms),
                           *map(str, args)], capture_output=True, text=True, timeout=timeout)


class OneEtcd:
    def __init__(self, root):
        from conftest import free_port
        self.port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(root, "etcd.log"), "ab")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "m0", "--data-dir", os.path.join(root, "etcd"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_port(self.port, 60, self.proc):
            self.stop()
            raise RuntimeError("etcd did not start")

    def members(self, prefix):
        r = subprocess.run([str(ETCD_CLI), self.url, "get", prefix + "members/", "prefix"],
                           capture_output=True, text=True, timeout=60)
        out = {}
        for line in r.stdout.splitlines()[:-1]:
            key, rest = line.split(" ", 1)
            out[key.rsplit("/", 1)[1]] = json.loads(rest.rsplit(" ", 2)[0])
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def plane_node(root, node_id, etcd_url, prefix, secret=SECRET):
    os.makedirs(root)
    d = Daemon(root, drives=2, kv=False, extra=f'\n[cluster]\netcd = ["{etcd_url}"]\n'
               f'prefix = "{prefix}"\nsecret = "{secret}"\nlease_ttl_s = 3\n')
    text = d.config.read_text().replace("self_id = 0", f"self_id = {node_id}")
    d.config.write_text(text.replace("\nid = 0\n", f"\nid = {node_id}\n"))
    d.start()
    assert wait_port(d.rpc_port, 30, d.proc), d.log()
    return d


@pytest.fixture(scope="module")
def cluster():
    root = tempfile.mkdtemp(prefix="openlake-plane-")
    etcd = OneEtcd(root)
    prefix = f"/plane{time.monotonic_ns()}/"
    nodes = []
    try:
        nodes.append(plane_node(os.path.join(root, "a"), 1, etcd.url, prefix))
        nodes.append(plane_node(os.path.join(root, "b"), 2, etcd.url, prefix))
        members = wait_for(lambda: (m := etcd.members(prefix)) and len(m) == 2 and m, 30,
                           "both nodes registered")
        yield {"etcd": etcd, "prefix": prefix, "a": nodes[0], "b": nodes[1],
               "members": members, "root": root}
    finally:
        for d in nodes:
            d.cleanup()
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_hello_answers_with_the_node_and_its_drives(cluster):
    b = cluster["b"]
    addr = cluster["members"]["2"]["rpc_addr"]  # as membership publishes it
    assert addr == f"127.0.0.1:{b.rpc_port}"
    r = node_cli(addr, "hello")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("node 2 ") and "drives 2" in lines[0], r.stdout
    assert lines[1].split()[2] == b.data_dirs[0] and lines[2].split()[2] == b.data_dirs[1]
    assert "node plane on" in b.log()


def test_shard_of_several_mib_to_another_nodes_drive_and_back(cluster, tmp_path):
    b = cluster["b"]
    addr = cluster["members"]["2"]["rpc_addr"]
    data = os.urandom(6 * 1024 * 1024 + 4321)
    src = tmp_path / "shard"
    src.write_bytes(data)
    r = node_cli(addr, "put", 1, "c3/part1.tmp", src)
    assert r.returncode == 0 and r.stdout.split() == ["wrote", str(len(data))], r.stderr
    r = node_cli(addr, "rename", 1, "c3/part1.tmp", "c3/part1")
    assert r.returncode == 0, r.stderr
    on_disk = os.path.join(b.data_dirs[1], ".openlake", "data", "c3", "part1")
    assert hashlib.sha256(open(on_disk, "rb").read()).digest() == hashlib.sha256(data).digest()
    back = tmp_path / "back"
    r = node_cli(addr, "get", 1, "c3/part1", back)
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == data  # bit-exact over the plane
    r = node_cli(addr, "get", 1, "c3/part1", back, 3_000_000, 1_500_000)
    assert r.returncode == 0 and back.read_bytes() == data[3_000_000:4_500_000], r.stderr
    assert node_cli(addr, "stat", 1, "c3/part1").stdout.split() == ["size", str(len(data))]
    r = node_cli(addr, "rm", 1, "c3/part1")
    assert r.returncode == 0 and not os.path.exists(on_disk)
    r = node_cli(addr, "stat", 1, "c3/part1")
    assert r.returncode == 1 and "ENOENT" in r.stderr


def test_names_that_escape_the_drive_are_refused(cluster, tmp_path):
    addr = cluster["members"]["2"]["rpc_addr"]
    src = tmp_path / "x"
    src.write_bytes(b"x" * 1000)
    victim = os.path.join(cluster["root"], "escaped")
    for name in ["../../../escaped", "/tmp/escaped", "..", ".openlake/meta.mdb"]:
        r = node_cli(addr, "put", 0, name, src)
        assert r.returncode == 1 and "EINVAL" in r.stderr, (name, r.stdout, r.stderr)
    r = node_cli(addr, "put", 5, "fine", src)
    assert r.returncode == 1 and "EINVAL" in r.stderr  # no drive 5
    assert not os.path.exists(victim)
    assert node_cli(addr, "ping").returncode == 0


def test_wrong_secret_is_refused_and_logged(cluster, tmp_path):
    b = cluster["b"]
    addr = cluster["members"]["2"]["rpc_addr"]
    src = tmp_path / "x"
    src.write_bytes(b"y" * 100000)
    r = node_cli(addr, "put", 0, "intruder", src, secret="guessed-secret")
    assert r.returncode == 1 and "EACCES" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(b.data_dirs[0], ".openlake", "data", "intruder"))
    wait_for(lambda: "failed authentication" in b.log(), 30, "the refusal in the log")
    assert node_cli(addr, "ping").returncode == 0  # the right secret still gets in
    import urllib.request
    with urllib.request.urlopen(b.s3_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    fails = [l for l in text.splitlines() if l.startswith("openlake_node_plane_auth_failures_total")]
    assert fails and int(fails[0].split()[1]) >= 1, text[-2000:]


def test_commit_op_is_answered_and_the_node_serves_on(cluster):
    """Op 16 (COMMIT) reaches a real daemon's plane: it is answered with a status, the
    connection intact (a node without a commit handler says EOPNOTSUPP; one whose store takes
    commits refuses this payload, which is no commit request), and the node serves on. Before
    the op was served, its frame found an empty slot of the ops table and killed the node."""
    for name in ("a", "b"):
        d = cluster[name]
        addr = f"127.0.0.1:{d.rpc_port}"
        r = node_cli(addr, "commit", "not a commit request")
        assert r.returncode == 1 and "error: E" in r.stderr, (r.stdout, r.stderr)
        for broken in ("ECONNRESET", "EPIPE", "EPROTO", "ETIMEDOUT", "ECONNREFUSED"):
            assert broken not in r.stderr, r.stderr
        assert node_cli(addr, "ping").returncode == 0
        assert d.proc.poll() is None, d.log()


def test_frozen_or_killed_node_fails_within_the_deadline(cluster):
    """A node that stops answering (SIGSTOP) fails the call with ETIMEDOUT at its deadline; a
    kill -9'd one fails at once. Neither hangs (the subprocess timeout would catch it)."""
    c = plane_node(os.path.join(cluster["root"], "c"), 3, cluster["etcd"].url,
                   cluster["prefix"])
    addr = f"127.0.0.1:{c.rpc_port}"
    try:
        assert node_cli(addr, "ping").returncode == 0
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            r = node_cli(addr, "ping", deadline_ms=1500, timeout=30)
            assert r.returncode == 1 and "ETIMEDOUT" in r.stderr, r.stderr
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        assert node_cli(addr, "ping").returncode == 0
        c.kill9()
        # refused once the listener is gone; reset while the kernel still tears down the dead
        # process's io_uring (its pending accepts hold the listening socket for a moment)
        r = node_cli(addr, "ping", deadline_ms=1500, timeout=30)
        assert r.returncode == 1 and any(e in r.stderr for e in
                                         ("ECONNREFUSED", "ECONNRESET", "ETIMEDOUT")), r.stderr
    finally:
        c.cleanup()


def test_cluster_status_pings_each_members_plane(cluster, tmp_path):
    from conftest import OPENLAKE_CLI
    etcd, prefix = cluster["etcd"], cluster["prefix"]

    def status(secret, *extra):
        cfg = tmp_path / f"cli-{secret}.toml"
        cfg.write_text(f'[cluster]\netcd = ["{etcd.url}"]\nprefix = "{prefix}"\n'
                       f'secret = "{secret}"\n')
        r = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config", str(cfg),
                            *extra], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    wait_for(lambda: len(etcd.members(prefix)) == 2, 30, "two members")
    lines = [l for l in status(SECRET).splitlines() if l.strip().startswith("node ")]
    assert len(lines) == 2 and all(" plane=ok rtt=" in l for l in lines), lines
    doc = json.loads(status(SECRET, "--json"))
    assert [m["plane"]["ok"] for m in doc["members"]] == [True, True]
    assert all(m["plane"]["rtt_us"] > 0 for m in doc["members"])
    out = status("not-the-secret")
    assert out.count("plane=refused") == 2, out


def test_node_killed_mid_stream_fails_the_reader(cluster, tmp_path):
    """A 32 MiB read from a node that is kill -9'd while the stream is under way: the reader
    fails (connection reset), it neither hangs nor reports success."""
    c = plane_node(os.path.join(cluster["root"], "c2"), 4, cluster["etcd"].url,
                   cluster["prefix"])
    addr = f"127.0.0.1:{c.rpc_port}"
    try:
        src = tmp_path / "big"
        src.write_bytes(os.urandom(32 << 20))
        assert node_cli(addr, "put", 0, "big", src).returncode == 0
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        reader = subprocess.Popen([str(NODE_CLI), addr, SECRET, "1", "60000", "get", "0", "big",
                                   str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        got = 0
        with open(fifo, "rb") as f:
            got += len(f.read(256 << 10))  # the stream is flowing (the reader blocks on us)
            c.kill9()
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 1 and "ECONNRESET" in err, (reader.returncode, out, err)
        assert got < 32 << 20
    finally:
        c.cleanup()
