"""Pool 0 leaves (issue 10): 4 nodes (pool 0, one set N=4 P=1) hold objects of every kind,
4 new nodes join as pool 1, then `openlake cluster leave --pool 0` while PUT/GET/DELETE go on
through a node of each pool. The serving set moves from 0.0 to 1.0 (set 0 of the first active
pool): its leader takes a fresh key (an epoch above the old server's), so a PUT the old server
had in flight is refused at its commit; it serves and drains pool 0 (killed -9 meanwhile:
the next leader of 1.0 resumes), gives every bucket to pool 1's set, the pool is removed,
pool 0's nodes are stopped, and every object, version, delete marker, tag, multipart object,
bucket setting and the run-time S3 key reads back and works through pool 1's nodes. Before that, a leave of pool 0 cancelled while its drain waits
moves the serving set to 1.0 and back to 0.0, each at a renewed epoch.

Real things only: Debian's etcd, real daemons, boto3, a hand-sent PUT over a raw socket.
"""

import json
import re
import subprocess

from conftest import OPENLAKE_CLI, REGION, wait_for
from test_cluster_pools import (Churn, join, leave, pool_1_nodes, start_new_nodes, status,
                                versions)
from test_cluster_store import (ETCD_CLI, body, etcd, in_handler,  # noqa: F401
                                list_all, pytestmark, raw_put_start, read_answer,
                                start_cluster)

import pytest


@pytest.fixture
def cluster(tmp_path, etcd):  # noqa: F811
    yield from start_cluster(tmp_path, etcd)


def leader_of(c, ps):
    """(node, epoch) of set ps's ("1.0") leader key in etcd, or None"""
    r = subprocess.run([str(ETCD_CLI), c.eps, "get", f"{c.prefix}sets/{ps}/leader"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()[:-1] if r.returncode == 0 else []
    if not lines:
        return None
    _key, rest = lines[0].split(" ", 1)
    value, create, _mod = rest.rsplit(" ", 2)
    return json.loads(value)["node"], int(create)


def key_client(c, i, k):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=c.nodes[i].url, aws_access_key_id=k["access_key"],
                        aws_secret_access_key=k["secret_key"], region_name=REGION,
                        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                      retries={"max_attempts": 6, "mode": "standard"}))


POLICY = {"Version": "2012-10-17", "Statement": [{
    "Sid": "pub", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
    "Resource": "arn:aws:s3:::grow/pub/*"}]}


def fill_pool_0(c):
    """objects of every kind while pool 0 is the only pool: what must survive its leave"""
    s3 = c.client(1, retries=6)
    s3.create_bucket(Bucket="grow")
    s3.create_bucket(Bucket="cst")
    s3.put_bucket_policy(Bucket="grow", Policy=json.dumps(POLICY))
    s3.put_bucket_tagging(Bucket="grow", Tagging={"TagSet": [{"Key": "team", "Value": "a"}]})
    plain = {f"old/{n:02d}": body(f"old{n}", 200 << 10) for n in range(10)}
    for n, (k, v) in enumerate(plain.items()):
        c.client(n % 4).put_object(Bucket="grow", Key=k, Body=v)
    s3.put_object(Bucket="grow", Key="pub/readme", Body=b"public")
    plain["pub/readme"] = b"public"
    up = s3.create_multipart_upload(Bucket="grow", Key="mpu")["UploadId"]
    parts = [body("p0", 5 << 20), body("p1", 1 << 20)]
    etags = [s3.upload_part(Bucket="grow", Key="mpu", UploadId=up, PartNumber=i + 1,
                            Body=p)["ETag"] for i, p in enumerate(parts)]
    s3.complete_multipart_upload(Bucket="grow", Key="mpu", UploadId=up, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
    plain["mpu"] = b"".join(parts)
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    vdata, tagged = {}, {}
    for n in range(8):
        k = f"v/{n}"
        for j in range(2):
            v = body(f"v{n}.{j}", 300 << 10)
            vid = s3.put_object(Bucket="ver", Key=k, Body=v)["VersionId"]
            vdata[(k, vid)] = v
        s3.put_object_tagging(Bucket="ver", Key=k, VersionId=vid,
                              Tagging={"TagSet": [{"Key": "n", "Value": str(n)}]})
        tagged[k] = vid
        if n % 3 == 0:
            s3.delete_object(Bucket="ver", Key=k)  # a delete marker on top
    k = subprocess.run([str(OPENLAKE_CLI), "keys", "add", "alice", "--json", "--config",
                        str(c.nodes[2].config)], capture_output=True, text=True, timeout=60)
    assert k.returncode == 0, k.stdout + k.stderr
    key = json.loads(k.stdout)
    alice = key_client(c, 3, key)
    alice.create_bucket(Bucket="alice")
    alice.put_object(Bucket="alice", Key="a", Body=b"alice's")
    return plain, vdata, tagged, versions(s3, "ver"), key


def join_pool_1(c, tmp_path):
    new = pool_1_nodes(c, tmp_path)
    r = join(new[0].config)
    assert r.returncode == 0 and "pool 1 added" in r.stdout, r.stdout + r.stderr
    start_new_nodes(c, new)
    return new


def serving_at(c, ps, above):
    """(node, epoch) of set ps's leader once it serves the cluster at an epoch above `above`
    (its log says so), else None"""
    ld = leader_of(c, ps)
    if not ld or ld[1] <= above or not c.nodes[ld[0]].alive():
        return None
    return ld if re.search(rf"serving set {ps} and the other \d+ set\(s\) of \d+ pool\(s\) "
                           rf"at epoch {ld[1]}\n", c.nodes[ld[0]].log()) else None


def cancel_a_pool_0_leave(c, cfg, s3, epoch0):
    """leave --pool 0, then --cancel while its drain waits for an upload open in pool 0: the
    serving set goes to 1.0 and back to 0.0, each time at an epoch above the last server's"""
    held, other = None, []
    for i in range(64):  # an upload id names its set: "00..." is pool 0's
        uid = s3.create_multipart_upload(Bucket="ver", Key=f"hold/{i}")["UploadId"]
        if uid.startswith("00"):
            held = (f"hold/{i}", uid)
            break
        other.append((f"hold/{i}", uid))
    for k, uid in other:
        s3.abort_multipart_upload(Bucket="ver", Key=k, UploadId=uid)
    assert held, "no upload landed in pool 0 in 64 tries"
    r = leave(cfg, "--pool", "0")
    assert r.returncode == 0 and "pool 0 is draining" in r.stdout, r.stdout + r.stderr
    _, epoch1 = wait_for(lambda: serving_at(c, "1.0", epoch0), 90,
                         "the leader of set 1.0 serving at a newer epoch")
    wait_for(lambda: (status(cfg).get("leave") or {}).get("uploads", 0) >= 1, 60,
             "the drain waiting for the upload open in pool 0")
    r = leave(cfg, "--pool", "0", "--cancel")
    assert r.returncode == 0 and "cancelled" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: serving_at(c, "0.0", epoch1), 90,
             "the leader of set 0.0 serving again at an epoch above set 1.0's")
    assert status(cfg)["serving"] == {"pool": 0, "set": 0}
    # the drain stopped on the former server (its last record names it; the CLI's has no
    # leader): a key it was moving is finished or taken back, so listings are settled
    wait_for(lambda: (lambda lv: lv.get("state") == "cancelled" and "leader" in lv)(
        status(cfg).get("leave") or {}), 60, "the former server's drain stopping")
    s3.abort_multipart_upload(Bucket="ver", Key=held[0], UploadId=held[1])


def test_pool_0_leaves_and_pool_1_serves(cluster, tmp_path):
    c = cluster
    cfg = c.nodes[0].config
    plain, vdata, tagged, vers, key = fill_pool_0(c)
    new = join_pool_1(c, tmp_path)
    lid, epoch0 = c.leader()
    wait_for(lambda: "cluster: serving 2 pools" in c.nodes[lid].log(), 60,
             "the leader of set 0.0 serving the new pool")
    assert status(cfg)["serving"] == {"pool": 0, "set": 0}
    cancel_a_pool_0_leave(c, cfg, c.client(2, retries=6), epoch0)
    lid, epoch0 = c.leader()
    assert vers == versions(c.client(4, retries=6), "ver")  # moved or not, all there

    # the old server has a PUT in flight (its first MiB in the handler) across the move
    late = body("late", 4 << 20)
    url = c.client(lid).generate_presigned_url("put_object", Params={"Bucket": "cst",
                                                                     "Key": "k"},
                                               ExpiresIn=600)
    sock = raw_put_start(url, c.nodes[lid].s3_port, len(late), late[:1 << 20])
    wait_for(lambda: in_handler(c.nodes[lid].s3_port, sock), 30,
             "the old server to take the first MiB of the PUT")

    via0 = next(i for i in range(4) if i != lid)  # a pool 0 node that does not serve
    fa = {f"a/{n:02d}": body(f"a{n}", 70 << 10) for n in range(12)}
    fb = {f"b/{n:02d}": body(f"b{n}", 70 << 10) for n in range(12)}
    s3 = c.client(5, retries=6)
    for k, v in [*fa.items(), *fb.items()]:
        s3.put_object(Bucket="grow", Key=k, Body=v)
    churn = [Churn(c.client(via0, retries=8), fa, 1)]
    try:
        r = leave(cfg, "--pool", "0")
        assert r.returncode == 0 and "pool 0 is draining" in r.stdout and \
            "set 1.0 serves the cluster from now on" in r.stdout, r.stdout + r.stderr

        # the serving set moves to 1.0, at an epoch above the old server's
        srv, epoch1 = wait_for(lambda: serving_at(c, "1.0", epoch0), 90,
                               "the leader of set 1.0 serving at a newer epoch")
        # the second churn goes through a pool 1 node that is not the one killed below (a
        # client of the killed node gets connection errors until it is started again)
        churn.append(Churn(c.client(next(i for i in range(4, 8) if i != srv), retries=8), fb,
                           2))
        st = status(cfg)
        assert st["serving"] == {"pool": 1, "set": 0}, st["serving"]
        s10 = next(s for s in st["sets"] if s["pool"] == 1 and s["set"] == 0)
        assert s10["serves"] and s10["leader"]["node"] == srv, s10
        assert not next(s for s in st["sets"] if s["pool"] == 0)["serves"]
        s = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60)
        assert f"pool 1 set 0: ok (4 of 4 nodes' drives live), leader node {srv}, epoch " \
            f"{epoch1}; serves the cluster" in s.stdout, s.stdout

        # the same key through the new server; then the old server's late commit is refused
        newer = body("newer", 3 << 20)
        s3.put_object(Bucket="cst", Key="k", Body=newer)
        sock.sendall(late[1 << 20:])
        code, answer = read_answer(sock)
        assert code >= 500 or code == 0, answer  # not acknowledged: fenced
    finally:
        sock.close()
    wait_for(lambda: "this node stops serving" in c.nodes[lid].log(), 60,
             "the old server to stop serving")
    assert "cluster: draining pool 0" in c.nodes[srv].log() or \
        status(cfg)["pools"][0]["state"] == "removed"
    # kill -9 of the new server (likely while it drains): the next leader of 1.0, at a newer
    # epoch, serves and drains what is left from a rescan
    c.nodes[srv].kill9()
    srv2, _ = wait_for(lambda: serving_at(c, "1.0", epoch1), 90,
                       "a newer leader of set 1.0 serving")
    wait_for(lambda: status(cfg)["pools"][0]["state"] == "removed", 300,
             "pool 0 drained and removed from the layout")
    for ch in churn:
        ch.finish()
    logs = "".join(c.nodes[i].log() for i in (srv, srv2))
    assert "store: drain of pool 0: its 5 bucket(s), with their attrs, are on every set" in logs
    wait_for(lambda: re.search(r"serving set 1.0 and the other 0 set\(s\) of 1 pool\(s\)",
                               c.nodes[srv2].log()), 60, "the server serving pool 1 alone")
    st = status(cfg)
    assert [p["state"] for p in st["pools"]] == ["removed", "active"], st["pools"]
    assert st["leave"]["pool"] == 0 and st["leave"]["state"] in ("empty", "removed"), st
    assert st["leave"]["failed"] == 0 and st["leave"]["leader"] in (srv, srv2), st["leave"]
    r = leave(cfg, "--pool", "1")
    assert r.returncode == 1 and "the only pool" in r.stderr, r.stderr

    for n in c.nodes[:4]:  # pool 0's nodes go; the store stays whole on pool 1
        assert n.stop()
    assert {s["health"] for s in status(cfg)["sets"] if s["pool"] == 0} == {"removed"}
    c.nodes[srv].start()
    wait_for(lambda: c.serving(srv), 60, f"S3 through node {srv} again")
    want = sorted([*plain, *fa, *fb])
    for i in range(4, 8):
        s = c.client(i, retries=6)
        assert {"cst", "grow", "ver"} <= {b["Name"] for b in s.list_buckets()["Buckets"]}, i
        assert list_all(s, "grow", page=7) == want, i
        for k, v in [*plain.items(), *fa.items(), *fb.items()]:
            assert s.get_object(Bucket="grow", Key=k)["Body"].read() == v, (i, k)
        assert s.get_object(Bucket="cst", Key="k")["Body"].read() == newer, i
        assert versions(s, "ver") == vers, i
        for (k, vid), v in vdata.items():
            assert s.get_object(Bucket="ver", Key=k, VersionId=vid)["Body"].read() == v
        for k, vid in tagged.items():
            assert s.get_object_tagging(Bucket="ver", Key=k, VersionId=vid)["TagSet"] == \
                [{"Key": "n", "Value": k[2:]}], (i, k)
        assert s.get_bucket_versioning(Bucket="ver")["Status"] == "Enabled", i
        assert json.loads(s.get_bucket_policy(Bucket="grow")["Policy"]) == POLICY, i
        assert s.get_bucket_tagging(Bucket="grow")["TagSet"] == \
            [{"Key": "team", "Value": "a"}], i
        alice = key_client(c, i, key)  # the run-time key (bucket openlake_sys) still works
        assert alice.get_object(Bucket="alice", Key="a")["Body"].read() == b"alice's", i
        assert [b["Name"] for b in alice.list_buckets()["Buckets"]] == ["alice"], i
    # writes go on in pool 1 alone
    s3.put_object(Bucket="ver", Key="v/after", Body=b"after")
    assert c.client(7).get_object(Bucket="ver", Key="v/after")["Body"].read() == b"after"
    assert len(versions(c.client(4), "ver")) == len(vers) + 1
    assert new  # pool 1's nodes stop with the cluster
