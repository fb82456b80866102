"""The cluster's coordination over a real etcd (3 members on loopback, temp data dirs).

The C etcd client (src/cluster/etcd.c) is driven through build/src/cluster/etcd_cli; the
daemon's membership through a real openlaked with [cluster] etcd set; `scripts/cluster.sh`
end to end. A small TCP relay (real sockets) stands in front of one etcd member where a test
needs to break a watch stream at a chosen moment.
"""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, OPENLAKED, OPENLAKE_CLI, REPO, free_port, wait_for

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
ETCD_CLI = BUILD / "src" / "cluster" / "etcd_cli"

pytestmark = pytest.mark.skipif(not ETCD or not ETCDCTL,
                                reason="etcd-server / etcd-client not installed")


class Etcd:
    """n etcd members on free loopback ports, each its own process and data dir."""

    def __init__(self, root, n=3):
        self.root = pathlib.Path(root)
        self.names = [f"m{i}" for i in range(n)]
        self.client = {m: free_port() for m in self.names}
        self.peer = {m: free_port() for m in self.names}
        self.procs = {}
        self.logs = {}
        for m in self.names:
            self.logs[m] = open(self.root / f"{m}.log", "ab")
            self._start(m)
        try:
            wait_for(lambda: self.ctl("endpoint", "health", check=False).returncode == 0, 60,
                     "etcd to become healthy")
        except BaseException:
            self.stop()
            raise

    def _start(self, m):
        init = ",".join(f"{n}=http://127.0.0.1:{self.peer[n]}" for n in self.names)
        self.procs[m] = subprocess.Popen(
            [ETCD, "--name", m, "--data-dir", str(self.root / m),
             "--listen-client-urls", self.url(m), "--advertise-client-urls", self.url(m),
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer[m]}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer[m]}",
             "--initial-cluster", init, "--initial-cluster-state", "new",
             "--initial-cluster-token", f"t{os.getpid()}-{self.client[self.names[0]]}"],
            stdout=self.logs[m], stderr=subprocess.STDOUT)

    def restart(self, m):
        """start member m again (after kill9) on its data dir: it rejoins the cluster"""
        assert self.procs[m].poll() is not None
        self._start(m)
        wait_for(lambda: self.ctl("endpoint", "health", check=False,
                                  endpoints=self.url(m)).returncode == 0, 60,
                 f"etcd member {m} healthy again")

    def url(self, m):
        return f"http://127.0.0.1:{self.client[m]}"

    @property
    def endpoints(self):
        return ",".join(self.url(m) for m in self.names if self.procs[m].poll() is None)

    def ctl(self, *args, check=True, endpoints=None):
        r = subprocess.run([ETCDCTL, f"--endpoints={endpoints or self.endpoints}", *args],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, ETCDCTL_API="3"))
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def leader(self):
        r = self.ctl("endpoint", "status", "-w", "json", check=False)
        if r.returncode != 0:
            return None  # a member still starting or electing
        for s in json.loads(r.stdout):
            st = s["Status"]  # fields at zero (no leader yet) are left out
            if st.get("leader") and st.get("leader") == st["header"].get("member_id"):
                ep = s["Endpoint"]
                return next(m for m in self.names if self.url(m) == ep)
        return None

    def kill9(self, m):
        self.procs[m].send_signal(signal.SIGKILL)
        self.procs[m].wait(30)

    def stop(self):
        # SIGKILL: the data dirs are thrown away, and a 3-member etcd given SIGTERM spends ~7 s
        # handing leadership around while every member stops (once per module, both passes)
        for m, p in self.procs.items():
            if p.poll() is None:
                p.kill()
        for m, p in self.procs.items():
            p.wait(30)
            self.logs[m].close()


@pytest.fixture(scope="module")
def etcd():
    root = tempfile.mkdtemp(prefix="openlake-etcd-")
    e = Etcd(root)
    yield e
    e.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_etcd(tmp_path):
    """A private cluster for a test that kills members."""
    e = Etcd(tmp_path)
    yield e
    e.stop()


def cli(eps, *args, timeout=60):
    assert ETCD_CLI.exists(), f"{ETCD_CLI} is not built"
    return subprocess.run([str(ETCD_CLI), eps, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def revision(eps):
    r = cli(eps, "get", "/nothing-here")
    assert r.returncode == 0, r.stdout + r.stderr
    return int(r.stdout.split()[-1])


class Relay:
    """Forwards loopback connections to a target port; cut() breaks every open one."""

    def __init__(self, target):
        self.target = target
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.conns += [c, u]
                self.accepted += 1
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self):
        self.sock.close()
        self.cut()


def test_txn_create_if_absent_has_one_winner(etcd):
    """Racing processes each try to create the same key: exactly one wins, the others are
    told the winner's value."""
    key = f"/race/{time.monotonic_ns()}"
    eps = etcd.endpoints
    procs = [subprocess.Popen([str(ETCD_CLI), eps, "create", key, f"v{i}"],
                              stdout=subprocess.PIPE, text=True) for i in range(8)]
    outs = [(p.communicate(timeout=60)[0].strip(), p.returncode) for p in procs]
    won = [i for i, (o, rc) in enumerate(outs) if rc == 0 and o.startswith("won ")]
    assert len(won) == 1, outs
    lost = [o for o, rc in outs if rc == 3]
    assert lost == [f"lost v{won[0]}"] * 7, outs
    got = cli(eps, "get", key)
    assert got.stdout.split()[1] == f"v{won[0]}"
    # compare-and-swap on the value: only from the value it holds
    assert cli(eps, "cas", key, "nope", "x").returncode == 3
    assert cli(eps, "cas", key, f"v{won[0]}", "x").returncode == 0
    assert cli(eps, "get", key).stdout.split()[1] == "x"


def test_range_at_revision_then_prefix_delete(etcd):
    eps = etcd.endpoints
    p = f"/rng/{time.monotonic_ns()}/"
    r1 = int(cli(eps, "put", p + "a", "1").stdout)
    cli(eps, "put", p + "b", "2")
    cli(eps, "put", p + "a", "3")
    old = cli(eps, "get", p, "prefix", r1).stdout.splitlines()
    assert old[0].split()[:2] == [p + "a", "1"] and len(old) == 2, old
    now = cli(eps, "get", p, "prefix").stdout.splitlines()
    assert [l.split()[:2] for l in now[:-1]] == [[p + "a", "3"], [p + "b", "2"]]
    assert cli(eps, "del", p, "prefix").stdout.strip() == "2"
    assert cli(eps, "get", p, "prefix").stdout.splitlines()[:-1] == []


def test_watch_delivers_every_event_across_a_broken_stream(etcd):
    """A watch from a revision sees every event exactly once, in order, although its stream
    is cut in the middle (it reopens from the last revision + 1)."""
    m = etcd.names[0]
    relay = Relay(etcd.client[m])
    p = f"/watch/{time.monotonic_ns()}/"
    eps = etcd.endpoints
    start = revision(eps) + 1
    w = subprocess.Popen([str(ETCD_CLI), f"http://127.0.0.1:{relay.port}", "watch", p,
                          str(start), "10"], stdout=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(w.stdout), daemon=True)
    reader.start()
    try:
        revs = [int(cli(eps, "put", f"{p}{i}", f"v{i}").stdout) for i in range(5)]
        wait_for(lambda: len(lines) >= 5, 30, "the first 5 events")
        relay.cut()
        # written while the watch has no stream: it must still see them
        revs += [int(cli(eps, "put", f"{p}{i}", f"v{i}").stdout) for i in range(5, 9)]
        cli(eps, "del", f"{p}0")
        w.wait(60)
        reader.join(10)
    finally:
        if w.poll() is None:
            w.kill()
        relay.close()
    assert w.returncode == 0, lines
    assert relay.accepted >= 2, "the watch did not reconnect"
    want = [f"PUT {p}{i} v{i} {revs[i]}\n" for i in range(9)]
    assert lines[:9] == want
    assert lines[9].startswith(f"DELETE {p}0 - ")


def test_watch_from_a_compacted_revision_says_so(etcd):
    eps = etcd.endpoints
    p = f"/compact/{time.monotonic_ns()}/"
    r1 = int(cli(eps, "put", p + "a", "1").stdout)
    r2 = int(cli(eps, "put", p + "a", "2").stdout)
    etcd.ctl("compaction", str(r2))
    r = cli(eps, "watch", p, r1, 1, timeout=60)
    assert r.returncode == 1 and "compacted" in r.stdout, r.stdout


def test_lease_grant_keepalive_revoke(etcd):
    eps = etcd.endpoints
    lease = int(cli(eps, "grant", 30).stdout)
    # the 64-bit id came as a JSON string: etcdctl lists the same lease (in hex)
    listed = etcd.ctl("lease", "list").stdout.splitlines()[1:]
    assert lease in [int(x, 16) for x in listed], (lease, listed)
    k = f"/lease/{time.monotonic_ns()}"
    assert cli(eps, "put", k, "x", lease).returncode == 0
    assert 0 < int(cli(eps, "keepalive", lease).stdout) <= 30
    assert cli(eps, "revoke", lease).returncode == 0
    assert cli(eps, "get", k).stdout.startswith("revision ")  # the key went with its lease
    r = cli(eps, "keepalive", lease)
    assert r.returncode == 1 and "No such file" in r.stdout  # -ENOENT: the lease is gone


def member_keys(eps, prefix="/openlake/"):
    r = cli(eps, "get", prefix + "members/", "prefix")
    assert r.returncode == 0, r.stdout
    return {l.split()[0]: l for l in r.stdout.splitlines()[:-1]}


def cluster_daemon(openlaked, eps, ttl=3, prefix=None, advertise=None, **kw):
    extra = f'\n[cluster]\netcd = [{", ".join(json.dumps(e) for e in eps.split(","))}]\n' \
            f"lease_ttl_s = {ttl}\n"
    if prefix:
        extra += f'prefix = "{prefix}"\n'
    if advertise:
        extra += f'advertise = "{advertise}"\n'
    return openlaked(drives=2, extra=extra, **kw)


def test_member_registers_and_vanishes_after_kill9(etcd, openlaked):
    prefix = f"/ka{time.monotonic_ns()}/"
    ttl = 3
    # S3 on every interface: the record carries [cluster] advertise in place of 0.0.0.0
    d = cluster_daemon(openlaked, etcd.endpoints, ttl, prefix, advertise="127.0.0.3",
                       bind="0.0.0.0")
    key = prefix + "members/0"
    line = wait_for(lambda: member_keys(etcd.endpoints, prefix).get(key), 30, "registration")
    doc = json.loads(line.split(" ", 1)[1].rsplit(" ", 2)[0])
    assert doc["id"] == 0 and doc["s3"] == f"127.0.0.3:{d.s3_port}", doc
    assert doc["kv"] == d.kv_addr and len(doc["drives"]) == 2 and doc["capacity"] > 0
    held(key, etcd.endpoints, 2 * ttl, d, prefix)  # the keepalive holds it past the TTL
    # deleted by someone else while its lease lives: the node's watch sees it and writes it
    # again (a delete at or before the node's own last write of the key would not count)
    assert d.log().count("is gone while its lease lives") == 0, d.log()
    assert cli(etcd.endpoints, "del", key).stdout.strip() == "1"
    wait_for(lambda: key in member_keys(etcd.endpoints, prefix), 30, "the key written again")
    assert d.log().count("is gone while its lease lives") == 1, d.log()
    d.kill9()
    wait_for(lambda: key not in member_keys(etcd.endpoints, prefix), 3 * ttl + 20,
             "the member key to vanish after kill -9")


def test_member_registers_again_after_a_lapse(etcd, openlaked):
    """Frozen past its TTL (SIGSTOP), the node loses its lease; thawed, it registers again.
    (Bound to every interface without [cluster] advertise: it says so at start.)"""
    prefix = f"/lapse{time.monotonic_ns()}/"
    d = cluster_daemon(openlaked, etcd.endpoints, 2, prefix, bind="0.0.0.0")
    wait_for(lambda: "[cluster] advertise is not set" in d.log(), 30, "the advertise warning")
    key = prefix + "members/0"
    wait_for(lambda: key in member_keys(etcd.endpoints, prefix), 30, "registration")
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: key not in member_keys(etcd.endpoints, prefix), 30,
                 "the lease to expire while the node is stopped")
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    wait_for(lambda: key in member_keys(etcd.endpoints, prefix), 30, "registration again")
    assert d.log().count("cluster: registered as") >= 2, d.log()


def test_member_view_follows_joins_and_leaves(etcd, openlaked, tmp_path):
    """ol_cluster_members() (read at a revision, then watched): another node joining and
    dying shows up in the view, with an epoch that only grows."""
    prefix = f"/view{time.monotonic_ns()}/"
    cfg = tmp_path / "view.toml"
    eps = ", ".join(json.dumps(e) for e in etcd.endpoints.split(","))
    cfg.write_text(f"""self_id = 9
data_dirs = ["{tmp_path}/v0"]
set_drive_count = 1
default_parity_count = 0
[[nodes]]
id = 9
rpc_addr = "127.0.0.1:{free_port()}"
[cluster]
etcd = [{eps}]
lease_ttl_s = 2
prefix = "{prefix}"
""")
    v = subprocess.Popen([str(BUILD / "src" / "cluster" / "cluster_view"), str(cfg), "100"],
                         stdout=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(v.stdout), daemon=True).start()
    try:
        wait_for(lambda: any(l.endswith("members 9\n") for l in lines), 30, "itself in view")
        d = cluster_daemon(openlaked, etcd.endpoints, 2, prefix)
        wait_for(lambda: lines[-1].endswith("members 0,9\n"), 30, "node 0 joining")
        d.kill9()
        wait_for(lambda: lines[-1].endswith("members 9\n"), 30, "node 0 leaving")
    finally:
        v.kill()
        v.wait(10)
    epochs = [int(l.split()[1]) for l in lines if l.startswith("epoch ")]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), lines


def test_clean_stop_revokes_the_lease(etcd, openlaked):
    prefix = f"/stop{time.monotonic_ns()}/"
    d = cluster_daemon(openlaked, etcd.endpoints, 30, prefix)
    key = prefix + "members/0"
    wait_for(lambda: key in member_keys(etcd.endpoints, prefix), 30, "registration")
    assert d.stop() == 0
    # revoked on the way out: gone at once, not after the 30 s TTL
    assert key not in member_keys(etcd.endpoints, prefix)


def held(key, eps, seconds, d, prefix="/openlake/"):
    """The member key stays through `seconds` (several TTLs: the keepalive is doing it)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert key in member_keys(eps, prefix), d.log()
        time.sleep(0.5)


def test_registration_survives_a_hung_then_killed_etcd_leader(own_etcd, openlaked):
    e = own_etcd
    leader = wait_for(e.leader, 30, "an etcd leader")
    # the leader first: the node talks to it until it hangs, then must fail over
    all_eps = ",".join([e.url(leader)] + [e.url(m) for m in e.names if m != leader])
    live = ",".join(e.url(m) for m in e.names if m != leader)
    # 5 s, not 3: on a loaded 2-core machine an etcd election after the hang plus the
    # node's failover to another member came close to 3 s and the key lapsed once (the
    # default is 10 s); the claim is the same: the key never goes, for 2 TTLs at a time
    ttl = 5
    d = cluster_daemon(openlaked, all_eps, ttl)
    key = "/openlake/members/0"
    wait_for(lambda: key in member_keys(all_eps), 30, "registration")
    assert f"via {e.url(leader)}" in d.log()
    # hung: its sockets stay open and never answer
    os.kill(e.procs[leader].pid, signal.SIGSTOP)
    try:
        wait_for(lambda: key in member_keys(live), 60, "the others to serve the key")
        held(key, live, 2 * ttl, d)
    finally:
        e.kill9(leader)
    wait_for(lambda: e.leader(), 60, "a leader among the two left")
    # kept (or registered again) through the failover, and held well past the TTL
    wait_for(lambda: key in member_keys(live), 30, "the member key after failover")
    held(key, live, 2 * ttl, d)
    assert d.proc.poll() is None


def test_several_nodes_without_etcd_refuse_to_start(tmp_path):
    cfg = tmp_path / "two.toml"
    cfg.write_text(f"""data_dirs = ["{tmp_path}/d0"]
set_drive_count = 1
default_parity_count = 0
s3_addr = "127.0.0.1:{free_port()}"
kv_addr = ""
[[nodes]]
id = 0
rpc_addr = "127.0.0.1:9100"
[[nodes]]
id = 1
rpc_addr = "127.0.0.2:9100"
""")
    r = subprocess.run([str(OPENLAKED), "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert "[cluster] etcd" in r.stderr and "openlake cluster init" in r.stderr, r.stderr
    assert not (tmp_path / "d0").exists()  # refused before touching the drives
    r = subprocess.run([str(OPENLAKED), "--config", str(cfg), "--cluster.etcd",
                        "http://127.0.0.1:1", "--check-config"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_cluster_sh_up_init_status_down(tmp_path):
    """scripts/cluster.sh up 3 DIR: etcd and 3 nodes, registered, one layout; down leaves no
    process behind."""
    d = tmp_path / "c"
    env = dict(os.environ, OPENLAKE_BUILD=str(BUILD))
    r = subprocess.run([str(REPO / "scripts" / "cluster.sh"), "up", "3", str(d)],
                       capture_output=True, text=True, timeout=300, env=env)
    pids = []
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == 3, lines
        for i, l in enumerate(lines):
            f = l.split()
            assert f[0] == "node" and f[1] == str(i) and f[2].startswith("s3=http://127.0.0.1:")
            assert f[3].startswith("kv=127.0.0.1:") and f[4].startswith("pid=")
            pids.append(int(f[4][4:]))
        pids += [int(p.read_text()) for p in (d / "pids").glob("etcd-*.pid")]
        assert len(pids) == 6
        cfg = d / "node-2" / "openlake.toml"

        def members():
            s = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config", str(cfg),
                                "--json"], capture_output=True, text=True, timeout=60)
            assert s.returncode == 0, s.stderr
            doc = json.loads(s.stdout)
            return doc if len(doc["members"]) == 3 else None

        doc = wait_for(members, 60, "3 members")
        assert sorted(m["id"] for m in doc["members"]) == [0, 1, 2]
        lay = doc["layout"]
        # one set over the 3 nodes' drives (one each), served by its leader
        assert lay["set_drive_count"] == 3 and lay["parity"] == 1
        sets = lay["pools"][0]["sets"]
        assert len(sets) == 1 and len({s["node"] for s in sets[0]}) == 3
        assert all(s["health"] == "ok" for s in doc["sets"])
        assert doc["sets"][0]["leader"]["node"] in (0, 1, 2)
        # init again: nothing changes, the same deployment is reported
        again = subprocess.run([str(OPENLAKE_CLI), "cluster", "init", "--config", str(cfg),
                                "--json"], capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
        a = json.loads(again.stdout)
        assert a["created"] is False and a["matches_config"] is True
        assert a["layout"]["deployment_id"] == lay["deployment_id"]
    finally:
        down = subprocess.run([str(REPO / "scripts" / "cluster.sh"), "down", str(d)],
                              capture_output=True, text=True, timeout=120, env=env)
    assert down.returncode == 0, down.stderr

    def gone(p):
        try:
            with open(f"/proc/{p}/stat") as f:
                return f.read().split(") ")[1][0] in "ZX"
        except FileNotFoundError:
            return True

    assert all(gone(p) for p in pids)
    assert not list((d / "pids").glob("*.pid"))
