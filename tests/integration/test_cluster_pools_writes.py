"""Writes through followers on a cluster of two pools (issue 10, `[cluster] write_any` with
`cluster join`): 4 nodes (pool 0, one set N=4 P=1) hold two keys, then 4 new nodes join as
pool 1 with `openlake cluster join` (test_cluster_pools.py's helpers). One bring-up for the
module; every node that does not lead set 0.0 is a follower (7 of them):

- PUTs of 0 B, an inline size, 1 MiB and a multipart upload of 2 parts through every
  follower: each wrote them itself (openlake_cluster_local_writes_total moved by each PUT and
  part, the leader's S3 server answered no PutObject or UploadPart: it ran their commits),
  each key is in exactly one pool and both pools took keys (its index record in the metadata
  of that pool's drives, shard files there), and every object reads back bit-exact through
  every node, listed once;
- keys written to pool 0 before the join, overwritten through a follower of each pool after
  it: the overwrite lands in pool 0 where the key is (no record or shard file of it in pool
  1), reads back new through every node, listed once; a key of pool 1 overwritten through a
  follower of pool 0 stays in pool 1 the same way;
- a node of pool 1 killed: once the leader has told it lacks that drive, followers of both
  pools write their PUTs without it (counted as degraded local writes, pool 1's misses
  recorded), the node back is healed, and the objects survive another pool-1 node's loss;
- (last: it removes pool 1) a follower's PUT of a key of pool 1 whose commit is held (the node
  plane's fault hook) while `cluster leave --pool 1` begins: the leader refuses a commit into
  the draining pool, the client is answered 503 SlowDown, nothing of it is visible; while the
  pool drains (kept from ending by an upload open in pool 1) PUTs and a part through
  followers are forwarded to the leader (counted in
  openlake_cluster_local_writes_forwarded_total, no local write) and read back through every
  node; once the drain removed the pool, the followers write their PUTs again.

Real things only: Debian's etcd, real daemons, boto3; where a key is is read from the drives.
"""

import os
import threading

import pytest
from botocore.exceptions import ClientError

from conftest import wait_for
from test_cluster_pools import (join, leave, pool_1_nodes, start_new_nodes,
                                upload_in_pool_1)
from test_cluster_pools import status as cluster_status
from test_cluster_reads import metric
from test_cluster_store import (body, etcd, pytestmark, shard_files,  # noqa: F401
                                start_cluster, view_drives_online)
from test_cluster_writes import (code_of, commits_served, drives_online, leader_offline,
                                 leader_puts, local_writes, one_try)

BUCKET = "twopools"
SIZES = {"empty": 0, "inline": 3000, "mib": (1 << 20) + 17}
PARTS = (5 << 20, 1000)  # every part but the last is at least 5 MiB
OLD = {"old/big": 300 << 10, "old/small": 1000}  # written while pool 0 is the only pool


@pytest.fixture(scope="module")
def grown(tmp_path_factory, etcd):  # noqa: F811
    """4 nodes with OLD written, then pool 1 (nodes 4-7) joined; ready once every node's
    store or view has all 8 drives online (a follower writes only then). Every node runs with
    the node plane's test fault hook on c.faults (empty: no effect)"""
    root = tmp_path_factory.mktemp("twopools")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENLAKE_FAULTS", "1")
        mp.setenv("OPENLAKE_FAULT_FILE", str(root / "faults"))
        yield from two_pools(root, etcd)


def two_pools(root, etcd):  # noqa: F811
    gen = start_cluster(root, etcd, extra="write_degraded = true\n")
    c = next(gen)
    c.faults = root / "faults"
    try:
        lid = c.leader()[0]
        s3 = c.client(lid, retries=4)
        s3.create_bucket(Bucket=BUCKET)
        c.old = {k: body(k, n) for k, n in OLD.items()}
        for k, v in c.old.items():
            s3.put_object(Bucket=BUCKET, Key=k, Body=v)
        new = pool_1_nodes(c, root)
        r = join(new[0].config)
        assert r.returncode == 0 and "pool 1 added" in r.stdout, r.stdout + r.stderr
        start_new_nodes(c, new)
        wait_for(lambda: "cluster: serving 2 pools" in c.nodes[lid].log(), 60,
                 "the leader serving the new pool")
        for n in c.nodes:
            wait_for(lambda: view_drives_online(n, 8), 90, f"8 drives online on node {n.i}")
        yield c
    finally:
        gen.close()


def followers(c):
    lid = c.leader()[0]
    return lid, [n.i for n in c.nodes if n.i != lid and n.alive()]


def forwarded(node):
    return metric(node, "openlake_cluster_local_writes_forwarded_total")


def meta_bytes(drive):
    """the data of a drive's metadata file (LMDB: sparse, its holes skipped)"""
    out = bytearray()
    with open(os.path.join(drive, ".openlake", "meta.mdb"), "rb") as f:
        fd, off = f.fileno(), 0
        end = os.fstat(fd).st_size
        while off < end:
            try:
                off = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after off
                break
            hole = os.lseek(fd, off, os.SEEK_HOLE)
            out += os.pread(fd, hole - off, off)
            off = hole
    return bytes(out)


def pools_of(c, keys):
    """key -> the pools whose drives hold its index record (`bucket \\0 key`, every drive of
    the pool's set has one): the pool a key went to, read from the drives"""
    metas = {0: meta_bytes(c.nodes[0].drive), 1: meta_bytes(c.nodes[4].drive)}
    return {k: {p for p, m in metas.items() if BUCKET.encode() + b"\0" + k.encode() in m}
            for k in keys}


def pool_files(c):
    """shard files on a drive of each pool (every drive of a set has one per part written
    to files)"""
    return {0: shard_files(c.nodes[0].drive), 1: shard_files(c.nodes[4].drive)}


def reads_back(c, objects):
    """every object bit-exact through every node that runs"""
    for i in (n.i for n in c.nodes if n.alive()):
        s3 = c.client(i, retries=4)
        for k, v in objects.items():
            try:
                got = s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()
            except ClientError as e:
                raise AssertionError(f"GET {k} through node {i}: {e}") from e
            assert got == v, (i, k, len(got), len(v))


def listed(c, i, prefix):
    r = c.client(i, retries=4).list_objects_v2(Bucket=BUCKET, Prefix=prefix, MaxKeys=1000)
    assert not r.get("IsTruncated"), r
    return [o["Key"] for o in r.get("Contents", [])]


def key_in_pool_1(c, f, pre, prefix):
    """a key written through follower f that landed in pool 1 (new keys go to either: at most
    64 written, each kept in pre)"""
    for i in range(64):
        k = f"{prefix}{i}"
        pre[k] = body(k, 100 << 10)
        c.client(f).put_object(Bucket=BUCKET, Key=k, Body=pre[k])
        if pools_of(c, [k])[k] == {1}:
            return k
    raise AssertionError("no key landed in pool 1 in 64 tries")


def test_puts_through_every_follower_land_in_both_pools(grown):
    c = grown
    lid, fs = followers(c)
    lead0, served0, files0 = leader_puts(c.nodes[lid]), commits_served(c.nodes[lid]), \
        pool_files(c)
    written, to_files = {}, set()
    for f in fs:
        n0 = local_writes(c.nodes[f])
        s3 = c.client(f)
        for name, size in SIZES.items():
            key = f"w/{name}-via-{f}"
            written[key] = body(key, size)
            s3.put_object(Bucket=BUCKET, Key=key, Body=written[key])
        key = f"w/mpu-via-{f}"
        parts = [body(f"{key}.{i}", n) for i, n in enumerate(PARTS)]
        up = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]  # forwarded
        done = [{"PartNumber": i + 1,
                 "ETag": s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=i + 1,
                                        Body=p)["ETag"]} for i, p in enumerate(parts)]
        s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up,
                                     MultipartUpload={"Parts": done})  # forwarded
        written[key] = b"".join(parts)
        to_files |= {f"w/mib-via-{f}", key}
        # written there: every PUT and part counted, none forwarded
        assert local_writes(c.nodes[f]) == n0 + len(SIZES) + len(PARTS), f
    assert leader_puts(c.nodes[lid]) == lead0, "the leader answered PUTs of the followers"
    assert commits_served(c.nodes[lid]) == served0 + len(fs) * (len(SIZES) + len(PARTS))
    where = pools_of(c, written)
    print({p: sorted(k for k, w in where.items() if w == {p}) for p in (0, 1)})
    assert all(len(w) == 1 for w in where.values()), where
    assert {p for w in where.values() for p in w} == {0, 1}, "keys in one pool only"
    files = pool_files(c)
    for p in (0, 1):  # a pool that took an object of shard files has new files
        n = sum(1 for k in to_files if where[k] == {p})
        assert files[p] - files0[p] >= n, (p, files0, files, n)
    reads_back(c, written)
    for i in range(len(c.nodes)):
        assert listed(c, i, "w/") == sorted(written), i


def test_an_overwrite_through_a_follower_stays_in_the_old_pool(grown):
    """and, the other way, a key of pool 1 overwritten through a follower of pool 0 stays in
    pool 1"""
    c = grown
    lid, fs = followers(c)
    assert pools_of(c, c.old) == {k: {0} for k in c.old}
    p0, p1 = next(f for f in fs if f < 4), next(f for f in fs if f >= 4)
    new = {}
    k1 = key_in_pool_1(c, p1, new, "old/p1-")
    via = {"old/big": (p1, 0), "old/small": (p0, 0), k1: (p0, 1)}  # key: (through, its pool)
    for k, (f, pool) in via.items():
        n0, other = local_writes(c.nodes[f]), pool_files(c)[1 - pool]
        new[k] = body(f"{k} again", len(c.old[k] if k in c.old else new[k]) + 4096)
        c.client(f).put_object(Bucket=BUCKET, Key=k, Body=new[k])
        assert local_writes(c.nodes[f]) == n0 + 1, (k, f)
        # no shard file in the other pool (fewer: a replaced version's files reclaimed)
        assert pool_files(c)[1 - pool] <= other, (k, f)
    assert pools_of(c, via) == {k: {pool} for k, (_, pool) in via.items()}
    reads_back(c, new)
    for i in range(len(c.nodes)):
        assert listed(c, i, "old/") == sorted(new), i


def test_followers_write_without_a_drive_of_pool_1_the_leader_lacks_too(grown):
    """A node of pool 1 killed: once the leader has told that it lacks the node's drive, the
    followers of both pools write their PUTs without it (keys of either pool; the misses of
    pool 1's recorded), as test_cluster_writes.py checks on one pool; the node back, its drive
    is healed, and pool 1's objects survive the loss of another of its nodes"""
    c = grown
    lid, fs = followers(c)
    a, b, d, e = fs[0], 7, 6, 5  # a of pool 0, b of pool 1; d, then e, of pool 1 go down
    deg = "openlake_cluster_local_writes_degraded_total"
    wait_for(lambda: all(leader_offline(c.nodes[f]) == 0 for f in (a, b)), 60,
             "the leader's offline drives told")
    n0 = {f: (local_writes(c.nodes[f]), metric(c.nodes[f], deg)) for f in (a, b)}
    p0 = leader_puts(c.nodes[lid])
    c.nodes[d].kill9()
    for f in (a, b):
        wait_for(lambda: drives_online(c.nodes[f]) == 7 and leader_offline(c.nodes[f]) == 1,
                 90, f"node {d}'s drive offline in {f}'s view and in the leader's store")
    objs = {}
    key_in_pool_1(c, a, objs, "deg/p1-")  # at least one key of pool 1, written without d
    n = {a: len(objs), b: 0}
    for f in (a, b):
        for name, size in SIZES.items():
            k = f"deg/{name}-{f}"
            objs[k] = body(k, size)
            c.client(f, retries=4).put_object(Bucket=BUCKET, Key=k, Body=objs[k])
            n[f] += 1
    for f in (a, b):
        assert local_writes(c.nodes[f]) == n0[f][0] + n[f], f
        assert metric(c.nodes[f], deg) == n0[f][1] + n[f], f
    assert leader_puts(c.nodes[lid]) == p0, "the leader wrote PUTs of the followers"
    assert metric(c.nodes[lid], "openlake_heal_missed_pending") >= 1, "pool 1's misses"
    reads_back(c, objs)
    c.nodes[d].start()
    for f in (a, b):
        wait_for(lambda: drives_online(c.nodes[f]) == 8 and leader_offline(c.nodes[f]) == 0, 90,
                 f"node {d}'s drive back in {f}'s view and in the leader's")
    wait_for(lambda: metric(c.nodes[lid], "openlake_heal_missed_pending") == 0, 120,
             "the returned drive healed of its missed writes")
    c.nodes[e].kill9()  # pool 1's objects now need the returned drive's shards (k = 3 of 4)
    wait_for(lambda: drives_online(c.nodes[a]) == 7, 90, f"node {e}'s drive offline")
    reads_back(c, objs)
    c.nodes[e].start()  # whole again for the next test
    for node in c.nodes:
        wait_for(lambda: view_drives_online(node, 8), 90, f"8 drives online on node {node.i}")


def test_puts_through_followers_while_a_pool_drains_are_forwarded(grown):
    """Also the commit of a follower's PUT of a key of pool 1, held (the node plane's fault
    hook, after the follower wrote the data) while the leave begins: the leader refuses a
    commit into the draining pool, the follower (which took the drain) answers 503 SlowDown
    and nothing of it is visible."""
    c = grown
    lid, fs = followers(c)
    a, b = fs[0], fs[-1]  # a node of pool 0 and one of pool 1
    cfg = c.nodes[0].config
    pre = {}
    for f in fs:  # keys in both pools, the drain moves those of pool 1
        k = f"d/pre-{f}"
        pre[k] = body(k, 200 << 10)
        c.client(f).put_object(Bucket=BUCKET, Key=k, Body=pre[k])
    k1 = key_in_pool_1(c, b, pre, "d/p1-")
    held = upload_in_pool_1(c.client(a, retries=4), BUCKET, "d/hold-")
    c.faults.write_text("hold COMMIT 120000\n")
    res = []
    t = threading.Thread(target=lambda: res.append(code_of(
        one_try(c, a).put_object, Bucket=BUCKET, Key=k1, Body=body("refused", 150 << 10))))
    t.start()
    hits = c.faults.parent / (c.faults.name + ".hits")
    wait_for(lambda: hits.exists() and "held COMMIT" in hits.read_text(), 60,
             f"node {a}'s commit held")
    r = leave(cfg, "--pool", "1")
    assert r.returncode == 0 and "pool 1 is draining" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: "cluster: draining pool 1" in c.nodes[lid].log(), 60,
             "the leader draining pool 1")
    for f in (a, b):
        wait_for(lambda: "pool 1 drains: PUTs through this node go whole to the serving leader"
                 in c.nodes[f].log(), 60, f"node {f} taking the drain")
    c.faults.write_text("")
    t.join(120)
    assert res == [(503, "SlowDown")], res
    reads_back(c, {k1: pre[k1]})  # the refused PUT left nothing visible
    n0 = {f: (local_writes(c.nodes[f]), forwarded(c.nodes[f])) for f in (a, b)}
    p0 = leader_puts(c.nodes[lid])
    during = {}
    for f in (a, b):  # a new key, and an overwrite of a key the drain may be moving
        for k in (f"d/new-{f}", f"d/pre-{f}"):
            during[k] = body(f"{k} during", 300 << 10)
            c.client(f).put_object(Bucket=BUCKET, Key=k, Body=during[k])
    part = body("held part", 1000)  # a part of the upload held open in pool 1
    etag = c.client(b).upload_part(Bucket=BUCKET, Key=held[0], UploadId=held[1], PartNumber=1,
                                   Body=part)["ETag"]
    for f, n in ((a, 2), (b, 3)):
        assert local_writes(c.nodes[f]) == n0[f][0], f"node {f} wrote during the drain"
        assert forwarded(c.nodes[f]) == n0[f][1] + n, f
    assert leader_puts(c.nodes[lid]) == p0 + 5, "the leader wrote them"
    pre.update(during)
    reads_back(c, pre)
    # the upload completed (forwarded): its object is moved by the drain's next pass
    c.client(b, retries=4).complete_multipart_upload(
        Bucket=BUCKET, Key=held[0], UploadId=held[1],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    pre[held[0]] = part
    wait_for(lambda: cluster_status(cfg)["pools"][1]["state"] == "removed", 240,
             "pool 1 drained and removed from the layout")
    # the followers' views reopen with pool 0 alone, and they write their PUTs again
    for f in (a, b):
        wait_for(lambda: "this node writes the data of PUTs again" in c.nodes[f].log(), 60,
                 f"node {f} taking the end of the drain")
        wait_for(lambda: view_drives_online(c.nodes[f], 4), 90, f"node {f}'s view of pool 0")
        n1 = local_writes(c.nodes[f])
        k = f"d/after-{f}"
        pre[k] = body(k, 300 << 10)
        c.client(f, retries=4).put_object(Bucket=BUCKET, Key=k, Body=pre[k])
        assert local_writes(c.nodes[f]) == n1 + 1, f
    reads_back(c, pre)
    for i in range(len(c.nodes)):
        assert listed(c, i, "d/") == sorted(pre), i
