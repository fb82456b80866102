"""A cut that splits the etcd members themselves, and nodes cut from some etcd members but not
others (issue 10), in network namespaces (netns.py).

The world of test_cluster_partition.py: three etcd members e0, e1, e2 and four openlaked
nodes, each in its own namespace on a private bridge, one erasure set N=4 P=1 (write quorum 3)
with one drive per node; the test and its real clients (boto3, the openlake CLI) in the root
namespace. Every node lists the members in the order e0, e1, e2, so each starts on e0.

One cut, three rules at once, while a key is overwritten through the serving leader's node and
through a node of the majority, and read through every node after each write:

- etcd member e0 is cut from e1 and e2: e0 is alive, reachable by every node, but has no
  quorum (it answers nothing that needs its leader, or hangs; it is a follower at the cut:
  the test moves etcd's leadership to e1 first when e0 holds it);
- the serving leader is cut from e1 and e2 (it still reaches e0, and every node and drive):
  its keepalives go only to the minority member, so its lease cannot be renewed. It must stop
  leading (and acknowledging writes) within the lease TTL plus a bound; a node of the majority
  side wins the set at a newer epoch;
- a follower f is cut from e0 and e1: it reaches only e2, a member of the majority. Its etcd
  client must fail over to e2 (past two silent members) in time to keep its lease: its member
  key is never dropped, not for a moment (its create revision never changes).

Throughout: no GET through any node returns a version older than the last acknowledged one;
every request ends within a bound (503 or an answer, never a hang). The cut ends: etcd is
whole again, the old leader follows the new one (forwards to it, reads the newest version),
every acknowledged object reads back through every node and lists, `openlake heal` exits 0.

Runs as root only (skips with the reason otherwise). Everything it starts it stops by pid.
"""

import os
import subprocess
import threading
import time

import pytest

from test_cluster_partition import (ETCD_CLI, ETCDCTL, NODES, TTL, _why, body,  # noqa: F401
                                    error_of, others, started, store_whole, world)

pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

# A request through any node ends within this (the wait for a leader, TTL + 2 s; a forward to
# a leader that went away; a margin for a loaded 2-core machine, ASan included). A hang fails.
REQ_BOUND_S = 30
# The old leader admits a write only while its lease surely lives (its last answered
# keepalive was sent before the cut, so that is before cut + TTL, less a margin): it refuses a
# write within cut + TTL + this.
STOP_BOUND_S = 10
# The majority writes again within this of the cut: the old lease's TTL, the campaign, the
# new leader's store opening and the serving key its predecessor releases, plus the margin.
RECOVER_BOUND_S = TTL + 60


def version_body(i):
    return f"version {i:06d}\n".encode() + body(f"v{i}", 64 << 10)


class Versions:
    """Versions of one key written by one thread through chosen nodes and read by any thread
    through any node: a GET answers the newest version acknowledged before it began or a
    newer one (an unacknowledged PUT may have landed), or 503; never an older one, and every
    call ends within REQ_BOUND_S (never a hang)."""

    def __init__(self, c, bucket, key, t0):
        self.c, self.bucket, self.key, self.t0 = c, bucket, key, t0
        self.clients = {i: c.client(i) for i in range(len(c.nodes))}  # no retries: each answer
        self.n = 0
        self.floor = 0  # the newest acknowledged version (0: none yet)
        self.acked = {}  # version id: body, of every acknowledged PUT
        self.log = []  # (start, end: seconds since t0, node, version, error or None)

    def put(self, i):
        from botocore.exceptions import ClientError
        self.n += 1
        v, start = self.n, time.monotonic()
        try:
            r = self.clients[i].put_object(Bucket=self.bucket, Key=self.key,
                                           Body=version_body(v))
            self.acked[r["VersionId"]] = version_body(v)
            self.floor, err = v, None
        except ClientError as e:
            err = error_of(e)
            assert err[0] == 503, (i, v, e.response)
        end = time.monotonic()
        assert end - start < REQ_BOUND_S, (i, v, end - start)
        self.log.append((start - self.t0, end - self.t0, i, v, err))
        return err is None

    def read(self, nodes):
        from botocore.exceptions import ClientError
        for i in nodes:
            floor, start = self.floor, time.monotonic()
            try:
                got = self.clients[i].get_object(Bucket=self.bucket, Key=self.key)["Body"].read()
                seen = int(got[8:14])
                assert got == version_body(seen), (i, self.key, len(got))
                assert seen >= floor, \
                    f"node {i} served {self.key} version {seen} after version {floor} was " \
                    "acknowledged"
            except ClientError as e:
                assert error_of(e)[0] == 503, (i, e.response)
            took = time.monotonic() - start
            assert took < REQ_BOUND_S, (i, took)

    def all_read_back(self, nodes):
        """no acknowledged write lost: every acknowledged version reads back by its id through
        each of nodes (the bucket is versioned)"""
        for i in nodes:
            s3 = self.c.client(i, retries=4)
            for vid, data in self.acked.items():
                got = s3.get_object(Bucket=self.bucket, Key=self.key, VersionId=vid)["Body"]
                assert got.read() == data, (i, self.key, vid)

    def show(self):
        for start, end, i, v, err in self.log:
            print(f"{start:6.1f} .. {end:6.1f} s  PUT {self.key} via node {i} version {v}: "
                  f"{err or 'acknowledged'}")


def etcd_status(c):
    """{member name: (member id, the id of the leader it knows)} of the three etcd members"""
    import json
    out = {}
    for h in ("e0", "e1", "e2"):
        r = subprocess.run([ETCDCTL, f"--endpoints={c.w.etcd_url(h)}", "--command-timeout=5s",
                            "endpoint", "status", "--write-out=json"], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, ETCDCTL_API="3"))
        if r.returncode == 0:
            st = json.loads(r.stdout)[0]["Status"]
            out[h] = (st["header"]["member_id"], st["leader"])
    return out


def etcd_leader_off_e0(c):
    """Leadership of the etcd cluster moved to e1 when e0 holds it. The cut below leaves e0
    without a quorum; were it the etcd leader then, it would go on answering the old serving
    leader's keepalives until it steps down (its election timeout, longer on a loaded machine),
    so that node's lease would be renewed after the cut, and the write bound below (acknowledged
    writes begin before cut + TTL) would not hold for a reason outside the code under test."""
    from conftest import wait_for

    def settled():
        st = etcd_status(c)
        if len(st) < 3 or len({v[1] for v in st.values()}) != 1:
            return None  # a member did not answer, or they disagree on the leader
        return st

    st = wait_for(settled, 60, "the etcd members to agree on their leader")
    if st["e0"][1] != st["e0"][0]:
        print("etcd leader before the cut: not e0")
        return
    print("etcd leader before the cut: e0; moving it to e1")
    r = subprocess.run([ETCDCTL, f"--endpoints={c.w.etcd_url('e0')}", "--command-timeout=10s",
                        "move-leader", format(st["e1"][0], "x")], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, ETCDCTL_API="3"))
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: (s := settled()) and s["e0"][1] != s["e0"][0], 60,
             "etcd leadership to leave e0")


def member_rev(c, i):
    """create revision of node i's member key, read through the etcd majority; None: absent"""
    eps = ",".join(c.w.etcd_url(e) for e in c.w.etcd_hosts if e not in c.etcd_cut)
    r = subprocess.run([str(ETCD_CLI), eps, "get", c.prefix + f"members/{i}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()[:-1]
    return int(lines[0].rsplit(" ", 2)[1]) if lines else None


def e0_healthy(c):
    return subprocess.run(
        [ETCDCTL, f"--endpoints={c.w.etcd_url('e0')}", "--command-timeout=5s", "endpoint",
         "health"], capture_output=True, timeout=60).returncode == 0


def test_an_etcd_split_deposes_the_leader_and_keeps_a_follower_on_the_majority(world,  # noqa: F811
                                                                             tmp_path):
    from conftest import wait_for
    with started(world, tmp_path) as c:
        lid, epoch = c.leader()
        f, g, h = others(lid)
        s3 = c.client(g, retries=8)
        s3.create_bucket(Bucket="split")
        s3.put_bucket_versioning(Bucket="split", VersioningConfiguration={"Status": "Enabled"})
        t0 = time.monotonic()
        # "k" is written through g (then f), "o" through the old leader's node by a thread
        k, o = Versions(c, "split", "k", t0), Versions(c, "split", "o", t0)
        assert k.put(g) and o.put(lid)
        for vs in (k, o):
            vs.read(range(NODES))
        f_rev = member_rev(c, f)
        assert f_rev is not None

        etcd_leader_off_e0(c)
        net = c.w.net
        c.etcd_cut = {"e0"}
        net.cut("e0", only=["e1", "e2"])
        net.cut(c.nodes[lid].host, only=["e1", "e2"])
        net.cut(c.nodes[f].host, only=["e0", "e1"])
        t0 = k.t0 = o.t0 = time.monotonic()
        stop, failed = threading.Event(), []

        def old_writer():
            """writes through the old leader's node until it refuses one (its own thread:
            reads through that node may each wait the TTL for a leader, and would put off
            the write that shows the refusal)"""
            try:
                while not stop.is_set():
                    if not o.put(lid):
                        return
                    time.sleep(0.2)
            except BaseException as e:  # noqa: BLE001 - re-raised by the test's thread
                failed.append(e)

        def old_reader():
            """reads of both keys through the old leader's node while its writer runs, then
            one more of the key the majority writes (a read that waits for a leader it
            cannot learn answers 503, never what its closed store held)"""
            try:
                while not stop.is_set() and t.is_alive():
                    for vs in (o, k):
                        vs.read([lid])
                    time.sleep(0.2)
                k.read([lid])
            except BaseException as e:  # noqa: BLE001 - re-raised by the test's thread
                failed.append(e)

        t = threading.Thread(target=old_writer)
        t.start()
        tr = threading.Thread(target=old_reader)
        tr.start()
        new, first_ok = None, None
        try:
            # writes through g and reads of both keys through the other nodes, until the
            # majority has a newer leader that acknowledges g's writes and the old leader
            # has refused
            while time.monotonic() - t0 < RECOVER_BOUND_S and not failed:
                ld = c.leader()
                if new is None and ld and ld[0] != lid:
                    new = ld
                    print(f"{time.monotonic() - t0:.1f} s: node {new[0]} leads at epoch "
                          f"{new[1]} > {epoch}")
                start = time.monotonic() - t0
                if k.put(g) and new is not None and first_ok is None:
                    first_ok = start
                for vs in (k, o):
                    vs.read([f, g, h])
                assert member_rev(c, f) == f_rev, (
                    "f's member key was dropped (or anew); its log's cluster lines:\n" +
                    "\n".join(ln for ln in c.nodes[f].log().splitlines()[-400:]
                              if "cluster" in ln or "etcd" in ln)[-6000:])
                if first_ok is not None and any(e[4] for e in o.log):
                    break
                time.sleep(0.2)
            # f, on e2 only, serves: its writes are acknowledged, its member key is the one
            # it registered before the cut (the old leader's reader makes its last read)
            wait_for(lambda: k.put(f), 60, "a write through f")
            k.read([f, g, h])
            assert member_rev(c, f) == f_rev
            assert "lapsed" not in c.nodes[f].log(), c.nodes[f].log()[-3000:]
        finally:
            stop.set()
            t.join(REQ_BOUND_S + 30)
            tr.join(2 * REQ_BOUND_S + 30)
        assert not t.is_alive() and not tr.is_alive()
        if failed:
            raise failed[0]
        k.show()
        o.show()
        old_acks = [e[0] for e in o.log if not e[4]]
        refusals = [e[0] for e in o.log if e[4]]
        gaps = [b[1] - a[1] for a, b in zip(k.log, k.log[1:])]
        print(f"old leader: last write acknowledged (begun) {max(old_acks, default=None)} s "
              f"after the cut, refused from {min(refusals, default=None)} s; writes through "
              f"node {g}: longest time between two answers {max(gaps, default=0):.1f} s, "
              f"the new leader seen {first_ok} s after the cut")
        assert new is not None and first_ok is not None, c.nodes[lid].log()[-3000:]
        assert new[1] > epoch, (new, epoch)
        # the old leader refused within TTL + the bound, and acknowledged no write it began
        # after its lease bound (its last answered keepalive was sent before the cut)
        assert refusals and min(refusals) < TTL + STOP_BOUND_S, refusals
        assert all(a < TTL for a in old_acks), old_acks
        assert "no longer leading set 0.0" in c.nodes[lid].log(), c.nodes[lid].log()[-3000:]

        # the cut ends: etcd whole again, the old leader follows the new one
        for host in ("e0", c.nodes[lid].host, c.nodes[f].host):
            net.join(host)
        c.etcd_cut = set()
        wait_for(lambda: e0_healthy(c), 90, "etcd member e0 back in its cluster's quorum")
        wait_for(lambda: c.serving(lid), 90, "S3 through the old leader again")
        print(f"{time.monotonic() - t0:.1f} s: the cut ended, S3 through the old leader")
        assert c.leader() == new
        wait_for(lambda: o.put(lid), 60, "a write through the old leader's node")
        for vs in (k, o):
            vs.read(range(NODES))
            got = c.client(lid, retries=4).get_object(Bucket="split", Key=vs.key)["Body"]
            assert got.read() == version_body(vs.floor), (vs.key, vs.floor)
        assert member_rev(c, f) == f_rev
        # no acknowledged write is lost: through the old leader (forwarded) and f
        for vs in (k, o):
            vs.all_read_back((lid, f))
        print(f"{time.monotonic() - t0:.1f} s: every acknowledged version read back")
        store_whole(c, "split", {vs.key: version_body(vs.floor) for vs in (k, o)}, lid, new[0])
        print(f"{time.monotonic() - t0:.1f} s: heal done")
