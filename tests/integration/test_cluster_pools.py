"""Growing a cluster by a pool (issue 10): 4 nodes (one set N=4 P=1) with objects, then 4 new
nodes joined with `openlake cluster join` as pool 1, taken by the running leader without a
restart. One bring-up checks it all: old objects read back bit-exact through every node, old
and new; new objects land in both pools (shard files on the new nodes' drives and more on the
old ones'); an overwrite of an old key stays in pool 0; listings hold every key of both pools,
also through a follower still holding its view of pool 0 alone (the test fault hook keeps the
old followers from taking the join meanwhile); delete and multipart work through a new node; `cluster status --json` shows 2 pools; join
refuses when nothing is new and when the new drives do not make whole sets; after kill -9 of
the leader the next one serves both pools. Then `openlake cluster leave --pool 1` (after its
refusals, and a leave cancelled while its drain runs): objects of every kind (versions and delete markers in a versioned bucket, tags,
multipart) move to pool 0 while PUT/GET/DELETE go on, the leader is killed while it drains and
the next one finishes the drain, the pool is removed from the layout,
its nodes are stopped, and every acknowledged object and version reads back through every
remaining node.

Real things only: Debian's etcd, real daemons, boto3.
"""

import json
import os
import re
import subprocess
import threading
import time

from conftest import OPENLAKE_CLI, free_port, wait_for
from test_cluster_reads import metric
from test_cluster_store import (ETCD_CLI, Node, body, drive_record, etcd,  # noqa: F401
                                heal_exits_0, list_all, pytestmark, shard_files, start_cluster)

import pytest


@pytest.fixture
def cluster(tmp_path, etcd):  # noqa: F811
    """the nodes run with the test fault hook on c.faults (absent: no effect)"""
    faults = tmp_path / "faults"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENLAKE_FAULTS", "1")
        mp.setenv("OPENLAKE_FAULT_FILE", str(faults))
        gen = start_cluster(tmp_path, etcd)
        c = next(gen)
        c.faults = faults
        try:
            yield c
        finally:
            faults.unlink(missing_ok=True)  # no thread of a node stays held at its stop
            gen.close()


def join(config):
    return subprocess.run([str(OPENLAKE_CLI), "cluster", "join", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)


def leave(config, *args):
    return subprocess.run([str(OPENLAKE_CLI), "cluster", "leave", "--config", str(config),
                           *args], capture_output=True, text=True, timeout=60)


def status(config):
    s = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config", str(config),
                        "--json"], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    return json.loads(s.stdout)


def versions(s3, bucket):
    """every version and marker: (key, id) -> (etag, size, latest, marker)"""
    out, kw = {}, {}
    while True:
        r = s3.list_object_versions(Bucket=bucket, **kw)
        for v in r.get("Versions", []):
            out[(v["Key"], v["VersionId"])] = (v["ETag"], v["Size"], v["IsLatest"], False,
                                               v["LastModified"])
        for m in r.get("DeleteMarkers", []):
            out[(m["Key"], m["VersionId"])] = (None, 0, m["IsLatest"], True, m["LastModified"])
        if not r.get("IsTruncated"):
            return out
        kw = {"KeyMarker": r["NextKeyMarker"], "VersionIdMarker": r["NextVersionIdMarker"]}


class Churn:
    """PUT / GET / DELETE of grow/new/* through one node while the drain runs: the last
    acknowledged state of each key it touched (bytes, or None: deleted)"""

    def __init__(self, s3, fresh, tag):
        self.s3, self.fresh, self.done, self.tag = s3, fresh, {}, tag
        self.stop, self.errors, self.n = threading.Event(), [], 0
        # bounded in count and time; a daemon, so a test that fails before finish() does
        # not leave pytest waiting for it at exit
        self.deadline = time.monotonic() + 600
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        keys = sorted(k for k in self.fresh if k != "new/00")
        while not self.stop.is_set() and self.n < 2000 and time.monotonic() < self.deadline:
            k = keys[self.n % len(keys)]
            try:
                if self.n % 7 == 3:
                    self.s3.delete_object(Bucket="grow", Key=k)
                    self.done[k] = None
                else:
                    want = self.done.get(k, self.fresh[k])
                    got = self.s3.get_object(Bucket="grow", Key=k)["Body"].read() \
                        if want is not None else None
                    if got != want:
                        self.errors.append((k, "read a wrong version"))
                    v = body(f"churn{self.tag}.{self.n}", 70 << 10)
                    self.s3.put_object(Bucket="grow", Key=k, Body=v)
                    self.done[k] = v
            except Exception as e:  # noqa: BLE001 - recorded, the test fails on it
                self.errors.append((k, repr(e)))
            self.n += 1

    def finish(self):
        self.stop.set()
        self.t.join(120)
        assert not self.errors, self.errors[:5]
        for k, v in self.done.items():
            if v is None:
                del self.fresh[k]
            else:
                self.fresh[k] = v


def leave_pool_1(c, new, old, fresh, mpu, lead):
    cfg = c.nodes[0].config
    s3 = c.client(1, retries=6)
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    vdata, tagged = {}, {}
    for n in range(10):
        k = f"v/{n}"
        for j in range(2):
            v = body(f"v{n}.{j}", 1 << 20)
            vid = s3.put_object(Bucket="ver", Key=k, Body=v)["VersionId"]
            vdata[(k, vid)] = v
        s3.put_object_tagging(Bucket="ver", Key=k, VersionId=vid,
                              Tagging={"TagSet": [{"Key": "n", "Value": str(n)}]})
        tagged[k] = vid
        if n % 3 == 0:
            s3.delete_object(Bucket="ver", Key=k)  # a delete marker on top
    vers = versions(s3, "ver")
    assert len(vers) == 24 and new_files(new) > 0

    r = leave(cfg)
    assert r.returncode == 2 and "--pool P is needed" in r.stderr, r.stderr
    r = leave(cfg, "--pool", "5")
    assert r.returncode == 1 and "no pool 5" in r.stderr, r.stderr

    cancel_a_leave(c, cfg, s3, lead, vers)

    via = next(i for i in range(4) if i != lead)
    churn = Churn(c.client(via, retries=6), fresh, 1)
    r = leave(cfg, "--pool", "1")
    assert r.returncode == 0 and "pool 1 is draining" in r.stdout, r.stdout + r.stderr
    r = leave(cfg, "--pool", "1")
    # refused: draining, or (a drain that finished between the two commands) removed already
    assert r.returncode == 1 and ("draining already" in r.stderr or
                                  "it was removed already" in r.stderr), r.stderr
    wait_for(lambda: "cluster: draining pool 1" in c.nodes[lead].log(), 60,
             "the leader draining pool 1")
    # kill -9 of the leader while it drains (likely in the middle of a key's move): the next
    # leader drains the rest from a rescan
    churn.finish()
    _, epoch = c.leader()
    drained_first = status(cfg)["pools"][1]["state"] == "removed"
    c.nodes[lead].kill9()
    lead, _ = wait_for(lambda: (lambda ld: ld if ld and ld[1] > epoch else None)(c.leader()),
                       60, "a newer leader of set 0.0")
    churn = Churn(c.client(via, retries=6), fresh, 2)
    log = c.nodes[lead].log
    wait_for(lambda: status(cfg)["pools"][1]["state"] == "removed", 240,
             "pool 1 drained and removed from the layout")
    churn.finish()
    wait_for(lambda: "of 1 pool(s) at epoch" in log(), 60, "the leader serving pool 0 alone")
    if not drained_first:
        assert "cluster: draining pool 1" in log(), "the new leader did not resume the drain"
    st = status(cfg)
    assert st["leave"]["pool"] == 1 and st["leave"]["state"] in ("empty", "removed"), st
    assert st["leave"]["failed"] == 0, st["leave"]
    assert [p["state"] for p in st["pools"]] == ["active", "removed"], st["pools"]
    r = leave(cfg, "--pool", "1")
    assert r.returncode == 1 and "removed already" in r.stderr, r.stderr
    r = leave(cfg, "--pool", "0")
    assert r.returncode == 1 and "the only pool" in r.stderr, r.stderr

    for n in new:  # the drained nodes go; the store stays whole
        assert n.stop()
    c.nodes = c.nodes[:4]
    assert {s["health"] for s in status(cfg)["sets"] if s["pool"] == 1} == {"removed"}
    killed = next(i for i in range(4) if not c.nodes[i].alive())
    c.nodes[killed].start()
    wait_for(lambda: c.serving(killed), 60, f"S3 through node {killed} again")
    old["after"] = b"x" * 1000  # written after the leader's kill
    want = sorted([*old, *fresh, "mpu"])
    for i in range(4):
        s = c.client(i, retries=6)
        got = list_all(s, "grow", page=13)
        assert got == want, (i, sorted(set(got) - set(want)), sorted(set(want) - set(got)))
        for k, v in [*old.items(), *fresh.items(), ("mpu", mpu)]:
            assert s.get_object(Bucket="grow", Key=k)["Body"].read() == v, (i, k)
        assert versions(s, "ver") == vers, i
        for (k, vid), v in vdata.items():
            assert s.get_object(Bucket="ver", Key=k, VersionId=vid)["Body"].read() == v
        for k, vid in tagged.items():
            assert s.get_object_tagging(Bucket="ver", Key=k, VersionId=vid)["TagSet"] == \
                [{"Key": "n", "Value": k[2:]}], (i, k)
    for k in ("new/00", "old/00"):  # writes after the leave land in pool 0
        s3.put_object(Bucket="grow", Key=k + "x", Body=b"after")
        assert c.client(3).get_object(Bucket="grow", Key=k + "x")["Body"].read() == b"after"


def upload_in_pool_1(s3, bucket, prefix="hold/"):
    """(key, upload id) of a multipart upload open in pool 1: while it is open a drain of pool
    1 never ends. The uploads that landed in pool 0 meanwhile are aborted."""
    held, other = None, []
    for i in range(64):  # an upload id names its set: "01..." is pool 1's (pool 0: set 0)
        uid = s3.create_multipart_upload(Bucket=bucket, Key=f"{prefix}{i}")["UploadId"]
        if uid.startswith("01"):
            held = (f"{prefix}{i}", uid)
            break
        other.append((f"{prefix}{i}", uid))
    for k, uid in other:
        s3.abort_multipart_upload(Bucket=bucket, Key=k, UploadId=uid)
    assert held, "no upload landed in pool 1 in 64 tries"
    return held


def cancel_a_leave(c, cfg, s3, lead, vers):
    """`leave --pool 1 --cancel` while the drain runs: an upload open in pool 1 keeps the drain
    from ever ending, so the cancel always finds it running. The pool is active again, the
    record says cancelled, every version still reads back."""
    held = upload_in_pool_1(s3, "ver")
    r = leave(cfg, "--pool", "1", "--cancel")
    assert r.returncode == 1 and "not draining" in r.stderr, r.stderr
    r = leave(cfg, "--pool", "1")
    assert r.returncode == 0, r.stderr
    log = c.nodes[lead].log
    wait_for(lambda: "cluster: draining pool 1" in log(), 60, "the leader draining pool 1")
    wait_for(lambda: (status(cfg).get("leave") or {}).get("uploads", 0) >= 1, 60,
             "the drain waiting for the upload open in pool 1")
    r = leave(cfg, "--pool", "1", "--cancel")
    assert r.returncode == 0 and "cancelled" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: "the drain of pool 1 stops" in log(), 60, "the leader stopping the drain")
    st = wait_for(lambda: (lambda s: s if s["leave"]["state"] == "cancelled" else None)(
        status(cfg)), 60, "the leave record saying cancelled")
    assert [p["state"] for p in st["pools"]] == ["active", "active"], st["pools"]
    r = leave(cfg, "--pool", "1", "--cancel")
    assert r.returncode == 1 and "not draining (it is active)" in r.stderr, r.stderr
    s3.abort_multipart_upload(Bucket="ver", Key=held[0], UploadId=held[1])
    assert versions(s3, "ver") == vers  # what moved before the cancel reads back from pool 0


def pool_1_nodes(c, tmp_path):
    """4 new nodes (ids 4-7), their configs listing all 8 with sets of 4: pool 1 once
    `cluster join` takes one of their configs"""
    ports = [(n.s3_port, n.rpc_port, n.kv_port) for n in c.nodes]
    ports += [(free_port(), free_port(), free_port()) for _ in range(4)]
    new = [Node(tmp_path, i, ports, c.eps, c.prefix, extra=c.extra) for i in range(4, 8)]
    for n in new:
        n.config.write_text(n.config.read_text().replace("set_drive_count = 8",
                                                         "set_drive_count = 4"))
    return new


def start_new_nodes(c, new):
    """start the joined nodes (stopped with the cluster) and wait for S3 through each"""
    c.nodes += new
    for n in new:
        n.start()
    for n in new:
        wait_for(lambda: c.serving(n.i), 60, f"S3 through new node {n.i}")


def free_records(c):
    """<prefix>free/<id> of every node: id -> {"free", "capacity"}"""
    r = subprocess.run([str(ETCD_CLI), c.eps, "get", c.prefix + "free/", "prefix"],
                       capture_output=True, text=True, timeout=60)
    out = {}
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        f = line.split(" ")
        if len(f) == 4 and f[0].startswith(c.prefix + "free/"):
            out[int(f[0].rsplit("/", 1)[1])] = json.loads(f[1])
    return out


def free_space_follows(c, new):
    """each node keeps its drives' free space current in etcd (the pools' weights for new
    keys): a 1 GiB file on the drives' file system shows in the record within seconds"""
    recs = wait_for(lambda: (lambda f: f if len(f) == 8 else None)(free_records(c)), 60,
                    "a free-space record from each of the 8 nodes")
    st = os.statvfs(new[0].drive)
    assert {f["capacity"] for f in recs.values()} == {st.f_blocks * st.f_frsize}, recs
    before = recs[4]["free"]

    def follows():  # a record written since, within 256 MiB of the free space now
        r = free_records(c).get(4)
        st = os.statvfs(new[0].drive)
        return r and r["free"] != before and abs(r["free"] - st.f_bavail * st.f_frsize) < 256 << 20

    junk = new[0].drive.parent / "junk"  # the same file system as every node's drive
    with open(junk, "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, 1 << 30)
    try:
        # (not "before - 1 GiB": tests beside this one write and delete on the same file
        # system, and one that freed 256 MiB meanwhile kept the record above that for good)
        wait_for(follows, 60, "node 4's free-space record following a 1 GiB file")
    finally:
        junk.unlink()


def new_files(nodes):
    return sum(shard_files(n.drive) for n in nodes)


def test_join_a_pool_of_4_nodes_to_a_running_cluster(cluster, tmp_path):
    c = cluster
    lid, _ = c.leader()
    s3 = c.client(0)
    s3.create_bucket(Bucket="grow")
    old = {f"old/{n:02d}": body(f"old{n}", 300 << 10) for n in range(12)}  # shard files
    for n, (k, v) in enumerate(old.items()):
        c.client(n % 4).put_object(Bucket="grow", Key=k, Body=v)

    new = pool_1_nodes(c, tmp_path)
    bad = tmp_path / "bad.toml"  # one more node of 1 drive: not a whole set of 4
    bad.write_text(new[0].config.read_text().replace(
        "\n[cluster]", '\n[[nodes]]\nid = 8\nrpc_addr = "127.0.0.1:1"\ndisk_count = 1\n'
        "\n[cluster]"))
    r = join(bad)
    assert r.returncode == 1 and "must divide the drives" in r.stderr, r.stderr
    # the old followers keep their read-only views of pool 0 open after they take the new
    # layout (the fault hook holds each where it would close it): the window in which a node
    # has not taken a join yet, drawn out, while the leader writes to both pools
    c.faults.write_text("hold VIEW_SWAP 300000\n")
    r = join(new[0].config)
    assert r.returncode == 0 and "pool 1 added" in r.stdout, r.stdout + r.stderr
    r = join(new[0].config)
    assert r.returncode == 1 and "nothing to join" in r.stderr, r.stderr
    hits = c.faults.parent / (c.faults.name + ".hits")
    wait_for(lambda: hits.exists() and hits.read_text().count("held VIEW_SWAP") == 3, 60,
             "the 3 old followers held with their views of pool 0")
    start_new_nodes(c, new)
    wait_for(lambda: "cluster: serving 2 pools" in c.nodes[lid].log(), 60,
             "the leader serving the new pool")
    free_space_follows(c, new)

    for i in range(8):  # every old object through every node, old and new
        r = c.client(i)
        for k, v in old.items():
            assert r.get_object(Bucket="grow", Key=k)["Body"].read() == v, (i, k)

    before_old, before_new = new_files(c.nodes[:4]), new_files(new)
    assert before_new == 0
    fresh = {f"new/{n:02d}": body(f"new{n}", 300 << 10) for n in range(24)}
    for n, (k, v) in enumerate(fresh.items()):
        c.client(n % 8).put_object(Bucket="grow", Key=k, Body=v)
    mid_old, mid_new = new_files(c.nodes[:4]), new_files(new)
    assert mid_new > 0 and mid_old > before_old, (before_old, mid_old, mid_new)
    # a listing through a held follower holds the keys in pool 1 too: its view lacks the pool
    # that etcd's layout has, so the listing goes to the leader
    f = (lid + 1) % 4
    behind = metric(c.nodes[f], "openlake_cluster_bucket_reads_behind_total")
    assert list_all(c.client(f), "grow", page=9) == sorted([*old, *fresh]), f
    assert metric(c.nodes[f], "openlake_cluster_bucket_reads_behind_total") > behind
    assert hits.read_text().count("released VIEW_SWAP") == 0  # still held meanwhile
    c.faults.unlink()
    wait_for(lambda: hits.read_text().count("released VIEW_SWAP") == 3, 60,
             "the old followers' views released")
    # each drive's identity record names the deployment and its own pool and slot
    recs = {(p, n.i): drive_record(n.drive) for p, ns in ((0, c.nodes[:4]), (1, new)) for n in ns}
    assert len({r["store"] for r in recs.values()}) == 1, recs
    for (pool, i), r in recs.items():
        assert r["pool"] == str(pool), (pool, i, r)
    for pool in (0, 1):
        assert sorted(int(r["index"]) for (p, _), r in recs.items() if p == pool) == \
            [0, 1, 2, 3], recs

    # an overwrite of an old key stays in pool 0: nothing new on the new nodes
    old["old/00"] = body("again", 400 << 10)
    c.client(5).put_object(Bucket="grow", Key="old/00", Body=old["old/00"])
    assert new_files(new) == mid_new
    assert c.client(2).get_object(Bucket="grow", Key="old/00")["Body"].read() == old["old/00"]

    # delete (one of each pool's keys may be either: delete an old and a new one)
    via = c.client(6)
    via.delete_object(Bucket="grow", Key="old/01")
    via.delete_object(Bucket="grow", Key="new/01")
    del old["old/01"], fresh["new/01"]
    # multipart through a new node
    up = via.create_multipart_upload(Bucket="grow", Key="mpu")["UploadId"]
    parts = [body("p0", 5 << 20), body("p1", 1 << 20)]
    etags = [via.upload_part(Bucket="grow", Key="mpu", UploadId=up, PartNumber=i + 1,
                             Body=p)["ETag"] for i, p in enumerate(parts)]
    via.complete_multipart_upload(Bucket="grow", Key="mpu", UploadId=up, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
    assert c.client(1).get_object(Bucket="grow", Key="mpu")["Body"].read() == b"".join(parts)

    want = sorted([*old, *fresh, "mpu"])
    for i in (0, 3, 4, 7):
        r = c.client(i)
        assert list_all(r, "grow", page=9) == want, i
        for k, v in fresh.items():
            assert r.get_object(Bucket="grow", Key=k)["Body"].read() == v, (i, k)

    s = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config",
                        str(c.nodes[0].config), "--json"], capture_output=True, text=True,
                       timeout=60)
    assert s.returncode == 0, s.stderr
    pools = json.loads(s.stdout)["pools"]
    assert [p["nodes"] for p in pools] == [[0, 1, 2, 3], [4, 5, 6, 7]], pools

    # kill -9 of the leader: the next one (an old node, newer epoch) opens both pools
    lid, epoch = c.leader()
    c.nodes[lid].kill9()
    nxt = wait_for(lambda: (lambda ld: ld if ld and ld[1] > epoch else None)(c.leader()), 60,
                   "a newer leader of set 0.0")
    wait_for(lambda: "of 2 pool(s) at epoch" in c.nodes[nxt[0]].log(), 60,
             "the new leader serving both pools")
    r = c.client(7, retries=6)
    for k in ("old/00", "new/00", "new/02", "mpu"):
        want_v = old.get(k) or fresh.get(k) or b"".join(parts)
        assert r.get_object(Bucket="grow", Key=k)["Body"].read() == want_v, k
    r.put_object(Bucket="grow", Key="after", Body=b"x" * 1000)
    assert list_all(r, "grow") == sorted([*want, "after"])

    # back, and healed: pool 0 whole again before the leave kills another node
    c.nodes[lid].start()
    wait_for(lambda: c.serving(lid), 60, f"S3 through node {lid} again")
    wait_for(lambda: re.search(rf"drive node {lid} \S+ drive 0 is back online",
                               c.nodes[nxt[0]].log()), 60, f"node {lid}'s drive back online")
    heal_exits_0(c.nodes[lid])
    leave_pool_1(c, new, old, fresh, b"".join(parts), nxt[0])
