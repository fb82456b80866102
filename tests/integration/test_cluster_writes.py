"""Every node of a cluster writes the data of PUTs itself (issue 10, `[cluster] write_any`): a
node that does not serve the store runs a plain PutObject's (and an UploadPart's) data path on
its shard-writing view (erasure coding, checksums, shard files over the node planes) and sends
only the commit to the serving leader, as one node-plane call; everything else stays forwarded.
4 nodes, one set N=4 P=1, etcd as in test_cluster_store.py (its cluster fixture, reused).

- PUTs of 0 B, an inline size, 1 MiB and 40 MiB (several stripes) through every follower read
  back bit-exact through every node; the follower counts them as local writes and the leader's
  S3 server counts no PutObject (it ran only their commits); a CopyObject and a tagging PUT
  through a follower are forwarded (the leader counts them);
- multipart: create and complete forwarded, the parts written on the follower, read back;
- If-None-Match: * on one key through two followers at once: exactly one 200, one 412 (the
  leader checks the condition under the key's lock at commit);
- versioning enabled through the leader and a PUT through a follower at once: the leader's
  versioning mode rules, both versions are kept;
- the leader killed (-9) during a loop of PUTs through the followers: every PUT acknowledged
  reads back with its bytes, every failure is a 503, and writes through followers work once a
  new leader serves, and are written on the followers once the killed node is back;
- a follower's commit held (the node plane's fault hook) while the leader is killed: 200
  (committed by the next leader) or 503 SlowDown with nothing visible, never a 500; the
  retry is written and read back;
- a node killed: once the leader tells that it lacks the node's drive too, the followers
  write their PUTs without it (the misses recorded); the node back and healed of them, the
  objects survive the loss of another node;
- kill -9 of the leader: the followers find its S3 port refusing connections and revoke its
  lease, and the next leader serves without waiting for the lease's end;
- kill -9 of the leader and its restart at once: the new process revokes its predecessor's
  lease, and a leader serves at a higher epoch without waiting for the lease's end;
- with write_any = false a follower forwards its PUTs, as before.
"""

import os
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import wait_for
from test_cluster_reads import metric, s3_extra, scrape, settled, status
from test_cluster_reads import ready as views_ready
from test_cluster_store import TTL, body, etcd, others, pytestmark, start_cluster  # noqa: F401


@pytest.fixture
def cluster(tmp_path, etcd):
    yield from start_cluster(tmp_path, etcd, extra=s3_extra(tmp_path))


@pytest.fixture
def cluster_faults(tmp_path, etcd, monkeypatch):
    """as cluster, every node with the node plane's test fault hook on one file (a `hold OP MS`
    line there holds the node's calls of OP before they go on the wire)"""
    faults = tmp_path / "faults"
    monkeypatch.setenv("OPENLAKE_FAULTS", "1")
    monkeypatch.setenv("OPENLAKE_FAULT_FILE", str(faults))
    for c in start_cluster(tmp_path, etcd, extra=s3_extra(tmp_path)):
        c.faults = faults
        yield c


@pytest.fixture
def cluster_write_any_off(tmp_path, etcd):
    yield from start_cluster(tmp_path, etcd, extra=s3_extra(tmp_path, "write_any = false"))


@pytest.fixture
def cluster_no_revoke(tmp_path, etcd):
    yield from start_cluster(tmp_path, etcd,
                             extra=s3_extra(tmp_path, "revoke_dead_leader = false"))


@pytest.fixture
def cluster_sweep(tmp_path, etcd):
    """as cluster, a replaced version's reclaim held 10 minutes and an orphan sweep every 2 s
    (of files older than the default 900 s)"""
    yield from start_cluster(tmp_path, etcd, extra=s3_extra(
        tmp_path, "reclaim_delay_ms = 600000") + "[storage]\norphan_sweep_secs = 2\n")


def view_whole(node):
    """the node's view has every drive of the set online (openlake_drive_online, its store's
    gauges): a view opened before a drive had its identity record keeps it offline for a
    second or so, and a PUT written meanwhile would miss that drive (recorded, healed), which
    a test that then kills another node cannot afford"""
    vals = [ln.split()[-1] for ln in scrape(node).splitlines()
            if ln.startswith("openlake_drive_online{")]
    return len(vals) == 4 and all(v == "1" for v in vals)


def ready(c):
    lid = views_ready(c)
    wait_for(lambda: all(view_whole(c.nodes[i]) for i in others(c, lid)), 60,
             "every drive online in the followers' views")
    return lid


def local_writes(node):
    return metric(node, "openlake_cluster_local_writes_total")


def leader_puts(node):
    """PutObject and UploadPart requests the node's own S3 server answered"""
    return sum(metric(node, "openlake_s3_requests_total", f'op="{op}"')
               for op in ("PutObject", "UploadPart"))


def commits_served(node):
    return metric(node, "openlake_cluster_commits_served_total")


def code_of(fn, **kw):
    try:
        fn(**kw)
        return 200, ""
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]


def with_header(s3, op, name, value):
    """s3 sends the header name: value on every op request (botocore's PutObject of this
    Debian version has no IfNoneMatch parameter)"""
    def add(request, **_):
        request.headers[name] = value
    s3.meta.events.register(f"before-sign.s3.{op}", add)
    return s3


def test_puts_through_every_follower_read_back_through_every_node(cluster):
    c = cluster
    lid = ready(c)
    c.client(lid, retries=4).create_bucket(Bucket="wany")
    sizes = {"empty": 0, "inline": 3000, "mib": 2**20, "big": 40 * 2**20 + 17}
    lead0, served0 = leader_puts(c.nodes[lid]), commits_served(c.nodes[lid])
    written = {}
    for f in others(c, lid):
        n0 = local_writes(c.nodes[f])
        s3 = c.client(f)
        for name, size in sizes.items():
            key = f"{name}-via-{f}"
            written[key] = body(key, size)
            etag = s3.put_object(Bucket="wany", Key=key, Body=written[key])["ETag"]
            assert s3.head_object(Bucket="wany", Key=key)["ETag"] == etag, key
        # written there: its counter counts them, and the leader's S3 server saw none
        assert local_writes(c.nodes[f]) == n0 + len(sizes), f
    assert leader_puts(c.nodes[lid]) == lead0
    assert commits_served(c.nodes[lid]) == served0 + len(written)
    for i in range(4):
        s3 = c.client(i)
        for key, data in written.items():
            got = s3.get_object(Bucket="wany", Key=key)["Body"].read()
            assert got == data, (i, key, len(got), len(data))
    keys = [o["Key"] for o in c.client(lid).list_objects_v2(Bucket="wany")["Contents"]]
    assert keys == sorted(written)
    rs = status(c.nodes[others(c, lid)[0]])["cluster"]["read_store"]
    assert rs["write_any"] and rs["local_writes"] >= len(sizes), rs
    # a copy and a sub-resource PUT stay with the leader (forwarded, never written there)
    f = others(c, lid)[0]
    n0 = local_writes(c.nodes[f])
    ops0 = {op: metric(c.nodes[lid], "openlake_s3_requests_total", f'op="{op}"')
            for op in ("CopyObject", "Other")}  # tagging counts as Other
    s3 = c.client(f)
    s3.copy_object(Bucket="wany", Key="copied",
                   CopySource={"Bucket": "wany", "Key": f"mib-via-{f}"})
    s3.put_object_tagging(Bucket="wany", Key="copied",
                          Tagging={"TagSet": [{"Key": "t", "Value": "v"}]})
    # the leader counts a request after its answer went out: a scrape may come first
    for op, n in ops0.items():
        def count(op=op):
            return metric(c.nodes[lid], "openlake_s3_requests_total", f'op="{op}"')
        assert settled(count, n + 1, f"the leader counting the forwarded {op}") == n + 1, op
    assert local_writes(c.nodes[f]) == n0
    assert s3.get_object(Bucket="wany", Key="copied")["Body"].read() == written[f"mib-via-{f}"]


def test_multipart_parts_are_written_on_the_follower(cluster):
    c = cluster
    lid = ready(c)
    f = others(c, lid)[1]
    s3 = c.client(f, retries=4)
    s3.create_bucket(Bucket="wmpu")
    parts = [body("wp1", 5 * 2**20), body("wp2", 5 * 2**20 + 3), body("wp3", 777)]
    n0, lead0 = local_writes(c.nodes[f]), leader_puts(c.nodes[lid])
    up = s3.create_multipart_upload(Bucket="wmpu", Key="m")["UploadId"]  # forwarded
    done = [{"PartNumber": i + 1,
             "ETag": s3.upload_part(Bucket="wmpu", Key="m", UploadId=up, PartNumber=i + 1,
                                    Body=p)["ETag"]}
            for i, p in enumerate(parts)]
    assert local_writes(c.nodes[f]) == n0 + len(parts)
    assert leader_puts(c.nodes[lid]) == lead0
    s3.complete_multipart_upload(Bucket="wmpu", Key="m", UploadId=up,
                                 MultipartUpload={"Parts": done})  # forwarded
    whole = b"".join(parts)
    for i in range(4):
        g = c.client(i).get_object(Bucket="wmpu", Key="m")
        assert g["Body"].read() == whole, i
    assert c.client(f).get_object(Bucket="wmpu", Key="m", PartNumber=2)["Body"].read() == parts[1]
    # a part of an upload completed meanwhile: NoSuchUpload
    assert code_of(s3.upload_part, Bucket="wmpu", Key="m", UploadId=up, PartNumber=1,
                   Body=b"late")[0] == 404


def test_if_none_match_races_through_two_followers(cluster):
    c = cluster
    lid = ready(c)
    a, b = others(c, lid)[:2]
    c.client(lid, retries=4).create_bucket(Bucket="wcond")
    n0 = {f: local_writes(c.nodes[f]) for f in (a, b)}
    clients = {f: with_header(c.client(f), "PutObject", "If-None-Match", "*") for f in (a, b)}
    for round_ in range(3):  # bounded
        key = f"once-{round_}"
        bodies = {f: body(f"{key}-{f}", 2**20 + f) for f in (a, b)}
        go = threading.Barrier(2)
        res = {}

        def put(f):
            go.wait(30)
            res[f] = code_of(clients[f].put_object, Bucket="wcond", Key=key, Body=bodies[f])

        ts = [threading.Thread(target=put, args=(f,)) for f in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        codes = sorted(r[0] for r in res.values())
        assert codes == [200, 412], res
        won = next(f for f, r in res.items() if r[0] == 200)
        for i in range(4):
            got = c.client(i).get_object(Bucket="wcond", Key=key)["Body"].read()
            assert got == bodies[won], (round_, i)
    # both followers wrote their data themselves (one commit refused by the condition, or
    # the early check on the follower's own view)
    assert all(local_writes(c.nodes[f]) >= n0[f] + 3 for f in (a, b)), n0


def test_versioning_set_through_the_leader_rules_a_followers_put(cluster):
    c = cluster
    lid = ready(c)
    f = others(c, lid)[2]
    lead, s3 = c.client(lid, retries=4), c.client(f)
    lead.create_bucket(Bucket="wver")
    s3.put_object(Bucket="wver", Key="k", Body=b"before versioning")  # the follower reads
    assert s3.get_object(Bucket="wver", Key="k")["Body"].read() == b"before versioning"
    n0 = local_writes(c.nodes[f])
    lead.put_bucket_versioning(Bucket="wver", VersioningConfiguration={"Status": "Enabled"})
    # at once: the follower may still hold the bucket unversioned; the leader's mode rules
    vid = s3.put_object(Bucket="wver", Key="k", Body=b"after versioning").get("VersionId")
    assert vid and vid != "null", vid
    assert local_writes(c.nodes[f]) == n0 + 1
    vs = lead.list_object_versions(Bucket="wver")["Versions"]
    assert sorted(v["VersionId"] for v in vs) == sorted(["null", vid]), vs
    assert lead.get_object(Bucket="wver", Key="k", VersionId="null")["Body"].read() == \
        b"before versioning"
    assert c.client(f).get_object(Bucket="wver", Key="k")["Body"].read() == b"after versioning"


def test_leader_killed_during_follower_puts(cluster):
    c = cluster
    lid, epoch = c.leader()
    ready(c)
    fs = others(c, lid)
    c.client(fs[0], retries=4).create_bucket(Bucket="wkill")
    acked, failed, lock = {}, [], threading.Lock()
    after = {f: 0 for f in fs}  # PUTs acknowledged after a new leader served, per node
    new_leader = []

    def writer(f):
        s3 = c.client(f)  # no retries: every answer is seen
        for i in range(2000):  # bounded (a PUT waits up to the TTL + 2 s for a leader)
            key = f"k{f}-{i}"
            data = body(key, 200000 + 4096 * (i % 7))
            try:
                r = code_of(s3.put_object, Bucket="wkill", Key=key, Body=data)
            except Exception as e:  # no answer at all: reported below, never acknowledged
                r = (0, repr(e)[:300])
            with lock:
                if r[0] == 200:
                    acked[key] = data
                    if new_leader:
                        after[f] += 1
                else:
                    failed.append((f, key, r))
                if new_leader and after[f] >= 3:
                    return

    n0 = {f: local_writes(c.nodes[f]) for f in fs}
    ts = [threading.Thread(target=writer, args=(f,)) for f in fs]
    for t in ts:
        t.start()
    wait_for(lambda: len(acked) >= 6, 120, "PUTs through the followers before the kill")
    c.nodes[lid].kill9()  # PUTs in flight: their data written, their commits in flight
    t0 = time.monotonic()
    new = wait_for(lambda: (x := c.leader()) and x[0] != lid and x, TTL + 60, "a new leader")
    assert new[1] > epoch
    with lock:
        new_leader.append(new)
    for t in ts:
        t.join(300)
    assert not any(t.is_alive() for t in ts)
    print(f"{len(acked)} PUTs acknowledged, {len(failed)} refused, new leader {new} "
          f"{time.monotonic() - t0:.1f} s after the kill: {failed[:3]}")
    # every failure was a 503 (SlowDown: no leader took the commit in time, or its answer was
    # lost; ServiceUnavailable: the drives fenced a commit of the old leader)
    assert all(r[0] == 503 and r[1] in ("SlowDown", "ServiceUnavailable")
               for _, _, r in failed), failed
    # writes through the followers work again once the new leader serves (forwarded to it
    # while a view lacks the killed node's drive and the new leader has not told yet that it
    # lacks it too: test_a_follower_writes_without_a_drive_only_the_leader_lacks_too), and
    # are written on the followers once the node is back
    for f in fs:
        if f != new[0]:
            assert after[f] >= 3, (f, after)
    c.nodes[lid].start()
    for f in fs:
        if f != new[0]:
            wait_for(lambda: view_whole(c.nodes[f]), 90, f"every drive back in {f}'s view")
            n1 = local_writes(c.nodes[f])
            key, data = f"back-{f}", body(f"back-{f}", 300000)
            c.client(f, retries=4).put_object(Bucket="wkill", Key=key, Body=data)
            acked[key] = data
            assert local_writes(c.nodes[f]) == n1 + 1, f
    assert all(local_writes(c.nodes[f]) > n0[f] for f in fs), "written on the followers"
    # every acknowledged PUT is there, bit-exact, through every node
    for i in range(4):
        s3 = c.client(i, retries=4)
        for key, data in acked.items():
            assert s3.get_object(Bucket="wkill", Key=key)["Body"].read() == data, (i, key)


def test_a_dead_leaders_lease_is_revoked(cluster):
    """kill -9 of the serving leader: its S3 port refuses connections, so the other nodes
    revoke its lease ([cluster] revoke_dead_leader) instead of waiting for the lease's end:
    a follower counts the revoke (only a revoke of a lease still alive counts) and says so,
    the next leader serves at a higher epoch, PUTs through the followers work again and read
    back through every live node"""
    c = cluster
    lid, epoch = c.leader()
    ready(c)
    fs = others(c, lid)
    c.client(fs[0], retries=4).create_bucket(Bucket="wdead")
    revokes = "openlake_cluster_dead_leader_revokes_total"
    r0 = sum(metric(c.nodes[f], revokes) for f in fs)
    c.nodes[lid].kill9()
    t0 = time.monotonic()
    wait_for(lambda: sum(metric(c.nodes[f], revokes) for f in fs) > r0, TTL + 60,
             "a follower revoking the dead leader's lease")
    assert any("its process is gone; its lease" in c.nodes[f].log() for f in fs)
    new = wait_for(lambda: (x := c.leader()) and x[0] != lid and x, TTL + 60, "a new leader")
    assert new[1] > epoch
    print(f"new leader {new} {time.monotonic() - t0:.1f} s after the kill (lease TTL {TTL} s)")
    data = body("after-dead", 300000)
    for f in fs:
        c.client(f, retries=8).put_object(Bucket="wdead", Key=f"k{f}", Body=data)
    for f in fs:
        for g in fs:
            got = c.client(g, retries=4).get_object(Bucket="wdead", Key=f"k{f}")
            assert got["Body"].read() == data, (f, g)


def shard_files(node):
    """the shard files on node's drives"""
    return sum(1 for d in node.drives for _ in (d / ".openlake" / "data").glob("*/*"))


def test_a_dead_leaders_lost_reclaims_are_swept(cluster_sweep):
    """The leader unlinks a replaced version's shard files only after reclaim_delay_ms (reads
    through the followers' views may still be reading them), from a queue in its memory: a
    kill -9 loses it, and no record names those files any more. The next leader's periodic
    orphan sweep ([storage] orphan_sweep_secs) removes them once every drive is back: each
    drive keeps the shard files of each object's version and of the one it replaced (its
    record's prev names them: a drive that missed the overwrite still reads them, until the
    next overwrite), and every object reads back."""
    c = cluster_sweep
    lid = ready(c)
    s3 = c.client(lid, retries=4)
    s3.create_bucket(Bucket="wsweep")
    keys = [f"k{i}" for i in range(4)]
    for r in range(4):  # 600 KiB: not inline, one shard file per drive per version
        for k in keys:
            s3.put_object(Bucket="wsweep", Key=k, Body=body(f"{k}-{r}", 600 << 10))
    before = [shard_files(n) for n in c.nodes]
    assert all(b == 16 for b in before), f"4 versions of 4 keys on every drive: {before}"
    c.nodes[lid].kill9()  # the 12 reclaims it queued are lost with it
    new = wait_for(lambda: (x := c.leader()) and x[0] != lid and x, TTL + 60, "a new leader")
    hour_ago = time.time() - 3600  # older than the sweep's grace (a follower's PUT would not be)
    for n in c.nodes:
        for d in n.drives:
            for f in (d / ".openlake" / "data").glob("*/*"):
                os.utime(f, (hour_ago, hour_ago))
    c.nodes[lid].start()
    wait_for(lambda: all(shard_files(n) == 8 for n in c.nodes), 180,
             "each drive down to two versions' shard files per object (the others swept): "
             f"{[shard_files(n) for n in c.nodes]}")
    assert metric(c.nodes[new[0]], "openlake_store_orphans_removed_total") >= 32
    for i in range(4):
        for k in keys:
            got = c.client(i, retries=8).get_object(Bucket="wsweep", Key=k)["Body"].read()
            assert got == body(f"{k}-3", 600 << 10), (i, k)


def test_a_restarted_leader_revokes_its_previous_lease(cluster_no_revoke):
    """kill -9 of the serving leader and its restart at once (the followers' revoke off, so
    only the restarted process can end the old lease): the new process finds its node's
    member key under its predecessor's lease, revokes it, and a leader serves at a higher
    epoch without waiting for the lease's end; PUTs through every node work and read back"""
    c = cluster_no_revoke
    lid, epoch = c.leader()
    ready(c)
    c.client(others(c, lid)[0], retries=4).create_bucket(Bucket="wrestart")
    c.nodes[lid].kill9()
    c.nodes[lid].start()
    wait_for(lambda: "a previous process of this node held lease" in c.nodes[lid].log(), 60,
             "the restarted leader revoking its previous process's lease")
    new = wait_for(lambda: (x := c.leader()) and x[1] > epoch and x, TTL + 60,
                   "a leader at a higher epoch")
    print(f"leader {new} after the restart of node {lid}")
    data = body("after-restart", 300000)
    for i in range(4):
        c.client(i, retries=8).put_object(Bucket="wrestart", Key=f"k{i}", Body=data)
    for i in range(4):
        for j in range(4):
            got = c.client(j, retries=4).get_object(Bucket="wrestart", Key=f"k{i}")
            assert got["Body"].read() == data, (i, j)


def one_try(c, i):
    """boto3 through node i that sends each request once (no retry at all)"""
    import boto3
    from botocore.config import Config
    from conftest import ACCESS_KEY, REGION, SECRET_KEY
    return boto3.client("s3", endpoint_url=c.nodes[i].url, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name=REGION,
                        config=Config(s3={"addressing_style": "path"}, read_timeout=120,
                                      retries={"total_max_attempts": 1, "mode": "standard"}))


def test_a_commit_held_while_the_leader_is_killed(cluster_faults):
    """a leader change between a PUT's data and its commit: the follower's commit is held
    (the node plane's fault hook, after the follower's ping of the leader, before the send)
    while the leader is killed. Released, the call meets the dead leader's connection: refused
    (nothing went out: the commit goes to the next leader, 200) or reset (the client cannot
    tell whether it went out: 503 SlowDown, never a 500). Either way the object is whole or
    absent, and the client's retry through the follower is written there and committed by
    the next leader."""
    c = cluster_faults
    lid = ready(c)
    f = others(c, lid)[0]
    c.client(lid, retries=4).create_bucket(Bucket="wheld")
    data = body("held", 2**20 + 5)
    n0 = local_writes(c.nodes[f])
    c.faults.write_text("hold COMMIT 120000\n")
    res = []
    t = threading.Thread(target=lambda: res.append(
        code_of(one_try(c, f).put_object, Bucket="wheld", Key="k", Body=data)))
    t.start()
    hits = c.faults.parent / (c.faults.name + ".hits")
    wait_for(lambda: hits.exists() and "held COMMIT" in hits.read_text(), 60,
             "the follower's commit held")
    c.nodes[lid].kill9()
    new = wait_for(lambda: (x := c.leader()) and x[0] != lid and x, TTL + 60, "a new leader")
    c.faults.write_text("")
    t.join(120)
    print(f"new leader {new}; the held PUT answered {res}")
    assert res and res[0] in ((200, ""), (503, "SlowDown")), res
    assert local_writes(c.nodes[f]) == n0 + 1
    g = next(i for i in others(c, lid) if i != new[0])
    if res[0][0] == 503:  # it never reached a leader (held before the wire): nothing of it
        assert code_of(c.client(g, retries=4).get_object, Bucket="wheld", Key="k") == \
            (404, "NoSuchKey")
        c.client(f, retries=4).put_object(Bucket="wheld", Key="k", Body=data)
    for i in others(c, lid):
        assert c.client(i, retries=4).get_object(Bucket="wheld", Key="k")["Body"].read() == data


def drives_online(node):
    """how many drives the node's view has online (openlake_drive_online)"""
    return sum(ln.split()[-1] == "1" for ln in scrape(node).splitlines()
               if ln.startswith("openlake_drive_online{"))


def leader_offline(node):
    """drives the serving leader holds offline as it last told this node (-1: not told)"""
    return metric(node, "openlake_cluster_leader_drives_offline")


def test_a_follower_writes_without_a_drive_only_the_leader_lacks_too(cluster_faults):
    """A view that does not reach every drive would write fewer shards than the leader
    writes, unless the leader lacks that drive too (write_degraded, the default). A node
    killed: once the leader has told (<prefix>offline) that it lacks the node's drive, the
    followers write their PUTs without it themselves, as the leader would (the misses
    recorded on the drives that took them). A PUT written so whose commit is held (the node
    plane's fault hook) until the leader has the node back is refused by the leader (503
    SlowDown, nothing visible): the leader's word the follower went by was stale by then.
    The node back, its drive is healed of the misses and the objects survive the loss of
    another node (k = 3 of 4: the returned drive's shards were written)."""
    c = cluster_faults
    lid = ready(c)
    a, d, e = others(c, lid)
    c.client(lid, retries=4).create_bucket(Bucket="wlack")
    wait_for(lambda: leader_offline(c.nodes[a]) == 0, 60, "the leader's offline drives told")
    n0, p0 = local_writes(c.nodes[a]), leader_puts(c.nodes[lid])
    g0 = metric(c.nodes[a], "openlake_cluster_local_writes_degraded_total")
    c.nodes[d].kill9()
    wait_for(lambda: drives_online(c.nodes[a]) == 3 and leader_offline(c.nodes[a]) == 1, 90,
             f"node {d}'s drive offline in {a}'s view and in the leader's store, as told")
    objs = {"k": body("lack", 2 << 20), "small": body("small", 3000)}
    for k, v in objs.items():
        c.client(a, retries=4).put_object(Bucket="wlack", Key=k, Body=v)
    assert local_writes(c.nodes[a]) == n0 + 2, "written by the follower"
    assert metric(c.nodes[a], "openlake_cluster_local_writes_degraded_total") == g0 + 2
    assert leader_puts(c.nodes[lid]) == p0, "not by the leader"
    assert metric(c.nodes[lid], "openlake_heal_missed_pending") >= 2, "the misses recorded"
    c.faults.write_text("hold COMMIT 120000\n")
    res = []
    late = body("late", 2 << 20)
    t = threading.Thread(target=lambda: res.append(
        code_of(one_try(c, a).put_object, Bucket="wlack", Key="late", Body=late)))
    t.start()
    hits = c.faults.parent / (c.faults.name + ".hits")
    wait_for(lambda: hits.exists() and "held COMMIT" in hits.read_text(), 60,
             f"node {a}'s commit of a PUT without node {d}'s drive held")
    c.nodes[d].start()
    wait_for(lambda: leader_offline(c.nodes[a]) == 0, 90,
             f"the leader holding node {d}'s drive online again, as told")
    c.faults.write_text("")
    t.join(120)
    assert res == [(503, "SlowDown")], res
    assert code_of(c.client(lid, retries=4).get_object, Bucket="wlack", Key="late") == \
        (404, "NoSuchKey"), "the refused PUT left nothing visible"
    wait_for(lambda: view_whole(c.nodes[a]), 90, f"node {d}'s drive back in {a}'s view")
    c.client(a, retries=4).put_object(Bucket="wlack", Key="late", Body=late)
    objs["late"] = late
    wait_for(lambda: metric(c.nodes[lid], "openlake_heal_missed_pending") == 0, 120,
             "the returned drive healed of its missed writes")
    objs["k2"] = body("back", 2 << 20)
    c.client(a, retries=4).put_object(Bucket="wlack", Key="k2", Body=objs["k2"])
    assert local_writes(c.nodes[a]) == n0 + 5, "the view has every drive: written there"
    c.nodes[e].kill9()  # the objects now need the returned drive's shards
    wait_for(lambda: drives_online(c.nodes[a]) == 3, 90, f"node {e}'s drive offline in {a}'s view")
    for k, v in objs.items():
        assert c.client(a, retries=4).get_object(Bucket="wlack", Key=k)["Body"].read() == v, k


def test_write_any_off_forwards_puts_to_the_leader(cluster_write_any_off):
    c = cluster_write_any_off
    lid = ready(c)
    f = others(c, lid)[0]
    s3 = c.client(f, retries=4)
    s3.create_bucket(Bucket="woff")
    lead0 = leader_puts(c.nodes[lid])
    s3.put_object(Bucket="woff", Key="o", Body=body("off", 300000))
    # the leader counts a request after its answer went out (src/s3/server.c, handle)
    assert settled(lambda: leader_puts(c.nodes[lid]), lead0 + 1,
                   "the leader's PUT counted") == lead0 + 1
    assert local_writes(c.nodes[f]) == 0
    assert s3.get_object(Bucket="woff", Key="o")["Body"].read() == body("off", 300000)
    rs = status(c.nodes[f])["cluster"]["read_store"]
    assert not rs["write_any"] and rs["local_writes"] == 0, rs
