"""The serving set moves with one server at a time (issue 10, docs/cluster.md "Leaving pool 0:
the serving set moves"). 4 nodes (pool 0) and 4 joined as pool 1; `openlake cluster leave
--pool 0` moves the serving set to 1.0, `--cancel` moves it back to 0.0. While the set moves
back and forth, loops PUT a key's next version through one node and GET it through another
(the old server's node, nodes of each pool): no GET may return a version older than the last
acknowledged PUT. The old server stops admitting requests when it sees the layout change
(a watch of the layout key), deletes its serving key once its requests ended, and the new
server serves only once that key is gone. Then the old server is frozen (SIGSTOP) before a
move: the new server waits for the frozen server's lease to lapse (the TTL), never serving
beside it, and the old server, resumed, serves nothing.

Real things only: Debian's etcd, real daemons, boto3, SIGSTOP.
"""

import datetime
import json
import os
import re
import signal
import subprocess
import threading
import time

from conftest import wait_for
from test_cluster_pool0 import join_pool_1, serving_at
from test_cluster_pools import leave, status
from test_cluster_store import ETCD_CLI, TTL, etcd, pytestmark, start_cluster  # noqa: F401

import pytest


@pytest.fixture
def cluster(tmp_path, etcd):  # noqa: F811
    yield from start_cluster(tmp_path, etcd)


class ReadAfterWrite:
    """PUT raw/<key> = "<key> <i>" through vias[i % n], then GET it through vias[(i + 1) % n]:
    a GET must read a version at least the last acknowledged one (and at most the one just
    tried). Bounded in count and time."""

    def __init__(self, c, key, vias, max_n=20000, seconds=600):
        self.key, self.vias = key, vias
        self.s3 = {i: c.client(i, retries=10) for i in set(vias)}
        self.stale, self.errors, self.n = [], [], 0
        self.stop, self.deadline, self.max_n = threading.Event(), time.monotonic() + seconds, \
            max_n
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        acked, i = 0, 0
        while not self.stop.is_set() and i < self.max_n and time.monotonic() < self.deadline:
            i += 1
            put, get = self.vias[i % len(self.vias)], self.vias[(i + 1) % len(self.vias)]
            try:
                self.s3[put].put_object(Bucket="raw", Key=self.key,
                                        Body=f"{self.key} {i}".encode())
                acked = i
            except Exception as e:  # noqa: BLE001 - not acknowledged: may or may not land
                self.errors.append(("put", i, put, repr(e)))
                continue
            try:
                got = int(self.s3[get].get_object(Bucket="raw", Key=self.key)["Body"]
                          .read().split()[1])
            except Exception as e:  # noqa: BLE001 - recorded, the test fails on it
                self.errors.append(("get", i, get, repr(e)))
                continue
            if got < acked or got > i:
                self.stale.append({"put": i, "via": put, "read": got, "through": get})
            self.n += 1

    def finish(self):
        self.stop.set()
        self.t.join(120)
        assert not self.t.is_alive(), f"the loop on {self.key} did not end"


def hold_upload(s3):
    """an upload open in pool 0 (its id names its set: "00..."), so a drain of pool 0 waits
    for it and the leave can be cancelled: (key, id)"""
    other, held = [], None
    for i in range(64):
        uid = s3.create_multipart_upload(Bucket="raw", Key=f"hold/{i}")["UploadId"]
        if uid.startswith("00"):
            held = (f"hold/{i}", uid)
            break
        other.append((f"hold/{i}", uid))
    for k, uid in other:
        s3.abort_multipart_upload(Bucket="raw", Key=k, UploadId=uid)
    assert held, "no upload landed in pool 0 in 64 tries"
    return held


def serving_key(c):
    """the serving key's record in etcd ({"node", "pool", "set", "epoch"}), or None"""
    r = subprocess.run([str(ETCD_CLI), c.eps, "get", c.prefix + "serving"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()[:-1] if r.returncode == 0 else []
    return json.loads(lines[0].split(" ", 1)[1].rsplit(" ", 2)[0]) if lines else None


def progress(loops, n=5):
    """every loop has done n more rounds than now"""
    want = [lp.n + n for lp in loops]
    wait_for(lambda: all(lp.n >= w or not lp.t.is_alive() for lp, w in zip(loops, want)), 120,
             "the read-after-write loops going on")


def move(c, cfg, to, above, *args):
    """leave --pool 0 (args: --cancel): the serving set goes to set `to` ("1.0"), served at an
    epoch above `above`; (node, epoch) of its server"""
    r = leave(cfg, "--pool", "0", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    srv = wait_for(lambda: serving_at(c, to, above), 90, f"set {to} serving at a newer epoch")
    wait_for(lambda: (serving_key(c) or {}).get("node") == srv[0], 60,
             f"the serving key held by node {srv[0]}")
    return srv


def stamp(line):
    """a log line's time (its leading ISO stamp, ms), as a float of seconds"""
    t = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
    return t.timestamp()


def served(c, node, ps, epoch):
    """(start, end) times of node's serving of set ps at epoch, from its log: its "serving
    set ps ... at epoch E" line and its "set ps at epoch E is served no more here" line, logged
    when it released the serving key (None when not found)"""
    start = end = None
    for line in c.nodes[node].log().splitlines():
        if re.search(rf"cluster: serving set {re.escape(ps)} and the other \d+ set\(s\) of "
                     rf"\d+ pool\(s\) at epoch {epoch}$", line):
            start = stamp(line)
        elif f"cluster: set {ps} at epoch {epoch} is served no more here" in line:
            end = stamp(line)
    return start, end


def test_read_after_write_across_serving_moves(cluster, tmp_path):
    c = cluster
    cfg = c.nodes[0].config
    s3 = c.client(1, retries=6)
    s3.create_bucket(Bucket="raw")
    join_pool_1(c, tmp_path)
    lid, epoch = c.leader()
    wait_for(lambda: "cluster: serving 2 pools" in c.nodes[lid].log(), 60,
             "the leader of set 0.0 serving the new pool")
    assert (serving_key(c) or {}).get("node") == lid, serving_key(c)
    held = hold_upload(s3)
    others = [i for i in range(4) if i != lid]
    loops = [ReadAfterWrite(c, "a", [lid, 4]), ReadAfterWrite(c, "b", [5, others[0], lid]),
             ReadAfterWrite(c, "c", [others[1], 6, 7, lid])]
    servers = [(lid, "0.0", epoch)]
    try:
        progress(loops)
        for k in range(2):  # four moves: 0.0 -> 1.0 -> 0.0 -> 1.0 -> 0.0
            srv, epoch = move(c, cfg, "1.0", epoch)
            servers.append((srv, "1.0", epoch))
            progress(loops)
            srv, epoch = move(c, cfg, "0.0", epoch, "--cancel")
            servers.append((srv, "0.0", epoch))
            progress(loops)
    finally:
        for lp in loops:
            lp.finish()
    for lp in loops:
        assert not lp.stale, (lp.key, lp.stale[:5])
        assert not lp.errors, (lp.key, lp.errors[:5])
    # each old server stopped serving at the layout change (its watch of the layout key
    # halts it at once, before its poller acts, unless the poller read the change first)
    halted = 0
    for old, ps, e in servers[:-1]:
        log = c.nodes[old].log()
        assert "this node stops serving" in log, old
        halted += bool(re.search(r"the layout \(revision \d+\) moves the serving set to "
                                 r"\d\.0: this node admits no more requests", log))
    assert halted, "no old server was halted by its watch of the layout"
    # one server at a time: each server began serving after the one before released the
    # serving key (the logs' stamps are the same clock, in ms)
    for (old, ops, oe), (new, nps, ne) in zip(servers, servers[1:]):
        (_, closed), (began, _) = served(c, old, ops, oe), served(c, new, nps, ne)
        assert closed is not None and began is not None, (old, ops, oe, new, nps, ne)
        assert closed <= began, f"node {new} served set {nps} at epoch {ne} from {began}, " \
            f"node {old} served set {ops} at epoch {oe} until {closed}"
    assert status(cfg)["serving"] == {"pool": 0, "set": 0}
    s3.abort_multipart_upload(Bucket="raw", Key=held[0], UploadId=held[1])


def test_a_frozen_server_cannot_serve_beside_the_next(cluster, tmp_path):
    c = cluster
    cfg = c.nodes[0].config
    s3 = c.client(4 if len(c.nodes) > 4 else 1, retries=6)
    s3.create_bucket(Bucket="raw")
    join_pool_1(c, tmp_path)
    lid, epoch = c.leader()
    wait_for(lambda: "cluster: serving 2 pools" in c.nodes[lid].log(), 60,
             "the leader of set 0.0 serving the new pool")
    s3 = c.client(5, retries=10)
    s3.put_object(Bucket="raw", Key="f", Body=b"f 0")
    hold_upload(s3)
    os.kill(c.nodes[lid].proc.pid, signal.SIGSTOP)  # frozen: it cannot see the move
    try:
        t0 = time.monotonic()
        r = leave(cfg, "--pool", "0")
        assert r.returncode == 0, r.stdout + r.stderr
        others = [i for i in range(4) if i != lid]
        loop = ReadAfterWrite(c, "f", [4, others[0], 6, others[1]], seconds=300)
        try:
            srv, epoch1 = wait_for(lambda: serving_at(c, "1.0", epoch), 90,
                                   "set 1.0 serving while the old server is frozen")
            served_after = time.monotonic() - t0
            progress([loop])
        finally:
            loop.finish()
        log = c.nodes[srv].log()
        m = re.search(rf"waiting for node {lid} to stop serving.*\n(?:.*\n)*?.*node {lid} "
                      r"stopped serving after (\d+) ms", log)
        # the frozen server's key goes only with its lease: the new server waited for it
        assert m, log[-3000:]
        assert served_after >= TTL / 2, served_after
    finally:
        os.kill(c.nodes[lid].proc.pid, signal.SIGCONT)
    assert not loop.stale, loop.stale[:5]
    assert not loop.errors, loop.errors[:5]
    # resumed, the old server serves nothing: requests through it reach the new server
    old = c.client(lid, retries=10)
    new = c.client(srv, retries=10)
    for i in range(1, 30):
        new.put_object(Bucket="raw", Key="f", Body=f"f x{i}".encode())
        assert old.get_object(Bucket="raw", Key="f")["Body"].read() == f"f x{i}".encode(), i
    wait_for(lambda: "closed the store of set 0.0" in c.nodes[lid].log(), 60,
             "the old server to close its store once resumed")
    assert (serving_key(c) or {}).get("node") == srv
