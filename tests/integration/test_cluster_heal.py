"""The heal job outlives its leader (issue 10: long-running job state lives in etcd; docs/cluster.md
"Heal jobs"). One cluster (etcd x3 + 4 nodes, one set N=4 P=1) with 24 MiB of objects and a heal
slowed by its rate: (a) the leader is killed (-9) mid-heal: the next leader resumes the job from
the cursor in its record (its log says where, and its run scans only what was left), the
`openlake heal` that waits through another node follows the job to "done" and exits 0, `heal
--status` shows it running then done, and with the killed node back the store is whole (`openlake
heal` exits 0); (b) a heal cancelled by an admin is recorded cancelled and not resumed by the
next leader; (c) a cancel sent through another node while the job is between two leaders (the
leader killed, the next not serving yet) is recorded by that node and never resumed; (d) a leader
whose record was cancelled under its run stops it, and a record that cannot be resumed is
recorded failed with its reason; (e) a node killed while the heal writes repaired shards to it
does not fail the heal (exit 0, the summary counts what it could not write), and the heal at the
node's return writes them.

Real things only: Debian's etcd, real daemons, boto3, the CLI, kill -9.
"""

import json
import os
import re
import subprocess
import time

import pytest

from conftest import OPENLAKE_CLI, admin_request, wait_for
from test_cluster_store import (ETCD_CLI, body, etcd, heal_exits_0, others,  # noqa: F401
                                pytestmark, start_cluster, view_drives_online)

N_OBJ = 24
MiB = 1 << 20
RETURNED = "returned: a heal starts in"  # the leader's log once it took a drive's return


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, etcd):  # noqa: F811
    """the cluster, every node with the node plane's test fault hook on c.faults (a `hold OP
    MS` line there holds the node's calls of OP before they go on the wire)"""
    root = tmp_path_factory.mktemp("cheal")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENLAKE_FAULTS", "1")
        mp.setenv("OPENLAKE_FAULT_FILE", str(root / "faults"))
        for c in start_cluster(root, etcd):
            c.faults = root / "faults"
            yield c


def record(c):
    """the heal job's record in etcd as a dict, or None"""
    r = subprocess.run([str(ETCD_CLI), c.eps, "get", c.prefix + "jobs/heal"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()[:-1] if r.returncode == 0 else []
    if not lines:
        return None
    _key, rest = lines[0].split(" ", 1)
    value, _create, _mod = rest.rsplit(" ", 2)
    return json.loads(value)


def status(node):
    """`openlake heal --status --json` through node: the heal document, or None"""
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--status", "--json", "--config",
                        str(node.config)], capture_output=True, text=True, timeout=60)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def start_heal(c, via):
    """`openlake heal --rate 1MiB --no-wait` through node via: exits 0"""
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--config", str(c.nodes[via].config),
                        "--rate", str(MiB), "--no-wait"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def fill(c, via):
    s3 = c.client(via, retries=4)
    s3.create_bucket(Bucket="hjob")
    for n in range(N_OBJ):
        s3.put_object(Bucket="hjob", Key=f"k{n:02d}", Body=body(f"hj{n}", MiB))


def test_a_killed_leaders_heal_is_resumed_from_its_cursor(cluster):
    c = cluster
    lid, _ = c.leader()
    via = others(c, lid)[0]
    fill(c, via)
    # about 32 MiB read (4 shards of a third each) at 3 MiB/s: some 10 s
    heal = subprocess.Popen([str(OPENLAKE_CLI), "heal", "--config", str(c.nodes[via].config),
                             "--rate", str(3 * MiB), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # a quarter scanned, and recorded in etcd with a cursor past the first keys
        def quarter():
            r = record(c)
            return (r and r["state"] == "running" and r["node"] == lid and "cursor" in r
                    and r["bytes_scanned"] >= N_OBJ * MiB // 4 and r)
        before = wait_for(quarter, 120, "a quarter of the heal recorded in etcd")
        job = before["job"]
        assert before["cursor"]["bucket"] == "hjob" and before["cursor"]["key"], before
        c.nodes[lid].kill9()

        def resumed():
            r = record(c)
            return r and r["job"] == job and r["node"] != lid and r["resumed"] >= 1 and r
        after = wait_for(resumed, 120, "the heal job resumed by the next leader")
        new = after["node"]
        assert new in others(c, lid)
        # the next leader's scan began after the cursor, not at the start
        m = wait_for(lambda: re.search(r"heal resumes its scan after set 0, bucket 'hjob', "
                                       r"objects, (\d+)-byte key", c.nodes[new].log()),
                     60, "the resumed scan's start in the new leader's log")
        assert int(m.group(1)) == 3, m.group(0)  # "kNN"
        # --status through a node that serves nothing shows the job running, then done
        watcher = [i for i in others(c, lid) if i != new][0]
        seen = []

        def ended():
            d = status(c.nodes[watcher])
            if d:
                seen.append(d["state"])
            return d and d["state"] != "running" and d
        final = wait_for(ended, 180, "the resumed heal to end")
        assert "running" in seen and final["state"] == "done", seen
        assert final["job"] == job and final["resumed"] >= 1, final
        assert final["objects_scanned"] >= N_OBJ and final["unrecoverable"] == 0, final
        out, err = heal.communicate(timeout=180)
        assert heal.returncode == 0, out + err
        doc = json.loads(out)
        assert doc["state"] == "done" and doc["job"] == job, out
        # the new leader's own run scanned only what the killed one had not done
        runs = re.findall(r"store: heal done: (\d+) objects", c.nodes[new].log())
        assert runs and int(runs[-1]) < N_OBJ, runs
        assert record(c)["state"] == "done"
    finally:
        if heal.poll() is None:
            heal.kill()
            heal.communicate()
    # the killed node back: the store is whole
    returns = c.nodes[new].log().count("back online")
    c.nodes[lid].start()
    wait_for(lambda: c.nodes[new].log().count("back online") > returns, 90,
             "the killed node's drive back in the leader's store")
    heal_exits_0(c.nodes[via])


def test_b_an_admin_cancel_is_not_resumed(cluster):
    c = cluster
    lid, _ = c.leader()
    via = others(c, lid)[0]
    start_heal(c, via)

    def started():
        d = status(c.nodes[via])
        return d and d["state"] == "running" and d["bytes_scanned"] > 0 and d
    job = wait_for(started, 120, "the heal running")["job"]
    st, _, reply = admin_request(c.nodes[via], "DELETE", "/openlake/admin/v1/heal")
    assert st == 202, reply
    rec = record(c)
    assert rec["job"] == job and rec["state"] == "cancelled", rec  # written before the 202
    c.nodes[lid].kill9()
    wait_for(lambda: (c.leader() or (lid,))[0] != lid, 120, "a new leader")
    new = c.leader()[0]
    wait_for(lambda: f"heal job {job} is cancelled: nothing to resume" in c.nodes[new].log(),
             120, "the new leader's look at the heal record")
    assert f"heal job {job} was left running" not in c.nodes[new].log()
    rec = record(c)
    assert rec["job"] == job and rec["state"] == "cancelled", rec
    d = status(c.nodes[via])
    assert d["job"] == job and d["state"] == "cancelled", d


def test_c_a_cancel_between_two_leaders_is_never_resumed(cluster):
    """kill -9 of the leader mid-heal, then an admin's DELETE through another node before the
    next leader serves: that node (it runs no heal, the leader does not answer) writes the
    record cancelled (202); the next leader leaves it so, and every node shows it cancelled"""
    c = cluster
    lid, _ = c.leader()
    # the node test b killed back first: with it the store still serves after this kill (its
    # return is recorded before this line: a heal started after it is the only one, no heal on
    # return starts beside it)
    returns = c.nodes[lid].log().count(RETURNED)
    dead = [n for n in c.nodes if not n.alive()]
    for n in dead:
        n.start()
    wait_for(lambda: c.nodes[lid].log().count(RETURNED) >= returns + len(dead), 90,
             "test b's killed node's drive back in the leader's store")
    via = others(c, lid)[0]
    start_heal(c, via)

    def scanning():
        r = record(c)
        return (r and r["state"] == "running" and r["node"] == lid and r["bytes_scanned"] > 0
                and r)
    before = wait_for(scanning, 120, "the heal's progress recorded by the leader")
    job = before["job"]
    c.nodes[lid].kill9()
    # its leader key lives on for the lease's TTL: nobody serves, nobody resumes the job
    st, _, reply = admin_request(c.nodes[via], "DELETE", "/openlake/admin/v1/heal")
    assert st == 202, reply
    doc = json.loads(reply)
    assert doc["job"] == job and doc["state"] == "cancelled" and not doc["running"], doc
    rec = record(c)
    assert rec["job"] == job and rec["state"] == "cancelled", rec
    # cancelled where it stood: no node had resumed it
    assert rec["node"] == lid and rec["resumed"] == before["resumed"], rec
    assert f"cancelled it through node {via}, which did not run it" in rec["reason"], rec
    new = wait_for(lambda: (l := c.leader()) and l[0] != lid and l, 120, "a new leader")[0]
    wait_for(lambda: f"heal job {job} is cancelled: nothing to resume" in c.nodes[new].log(),
             120, "the new leader's look at the heal record")
    for n in others(c, lid):
        assert f"heal job {job} was left running" not in c.nodes[n].log(), n
    assert record(c) == rec
    watcher = [i for i in others(c, lid) if i != new][0]
    d = wait_for(lambda: (d := status(c.nodes[watcher])) and d["job"] == job and d, 60,
                 "the record's copy on a node that does not serve")
    assert d["state"] == "cancelled" and "which did not run it" in d["reason"], d
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--status", "--config",
                        str(c.nodes[new].config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "heal: cancelled:" in r.stderr, r.stdout + r.stderr
    assert f"cancelled it through node {via}" in r.stderr, r.stderr
    returns = c.nodes[new].log().count(RETURNED)
    c.nodes[lid].start()
    wait_for(lambda: c.nodes[new].log().count(RETURNED) > returns, 90,
             "the killed node's drive back in the leader's store")


def put_record(c, rec):
    r = subprocess.run([str(ETCD_CLI), c.eps, "put", c.prefix + "jobs/heal", json.dumps(rec)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_d_a_run_finds_its_job_cancelled_and_an_unresumable_job_fails(cluster):
    """(1) the other order of test c: the record is cancelled while a leader runs the job (its
    resume won the race with a cancel through a node that did not run it): the record is
    written as that node writes it, the leader's next progress write fails on the revision, it
    reads the record, stops its run and writes nothing more; (2) a job left running whose
    record is not understood is recorded failed, with the reason, by the next leader"""
    c = cluster
    lid, _ = c.leader()
    via = others(c, lid)[0]
    # started after test c's killed node came back: no heal on return starts beside it
    st, _, reply = admin_request(c.nodes[via], "POST", f"/openlake/admin/v1/heal?rate={MiB}")
    assert st == 202, reply
    job = json.loads(reply)["job"]

    def scanning():
        r = record(c)
        return (r and r["job"] == job and r["state"] == "running" and r["bytes_scanned"] > 0
                and r)
    rec = wait_for(scanning, 120, "the heal's progress recorded by the leader")
    rec.update(state="cancelled", running=False, result=-125,
               reason="an admin at 127.0.0.1:1 cancelled it through node 9, which did not run it")
    put_record(c, rec)
    wait_for(lambda: f"heal job {job} was cancelled in its record (an admin's cancel through "
             "another node): stopping its run here" in c.nodes[lid].log(), 60,
             "the leader's next progress write to find the job cancelled")
    d = wait_for(lambda: (d := status(c.nodes[lid])) and not d["running"] and d, 60,
                 "the leader's run to stop")
    assert d["job"] == job and d["state"] == "cancelled", d
    assert record(c) == rec  # nothing more written over the cancel

    # (2): a record left running that no leader can take up (a cursor's phase out of range)
    bad = dict(rec, job="00000000000000b2", state="running", running=True, node=lid,
               cursor={"set": 0, "bucket": "hjob", "phase": 9, "key": ""})
    del bad["reason"]
    put_record(c, bad)
    c.nodes[lid].kill9()
    new = wait_for(lambda: (l := c.leader()) and l[0] != lid and l, 120, "a new leader")[0]

    def failed():
        r = record(c)
        return r and r["job"] == bad["job"] and r["state"] != "running" and r
    out = wait_for(failed, 120, "the unresumable job recorded by the next leader")
    assert out["state"] == "failed" and "not understood" in out["reason"], out
    assert "heal job 00000000000000b2 cannot be resumed" in c.nodes[new].log()
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--status", "--config",
                        str(c.nodes[new].config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "heal: failed: its record in etcd is not understood" in r.stderr, \
        r.stdout + r.stderr


def shard_names(node):
    base = os.path.join(node.drive, ".openlake", "data")
    return {os.path.relpath(os.path.join(dp, f), base) for dp, _, fs in os.walk(base) for f in fs}


def test_e_a_node_killed_under_the_heals_writes(cluster):
    """The heal rewrites a follower's lost shard files over the node plane; that node is killed
    while the heal's first write to it is held (the fault hook, in the leader): before, the heal
    ended "failed" (exit 1) for shards "that could not be written on drives that are online",
    as found by the cluster torture. Now a drive gone by the heal's end is left to the heal at
    its return: `openlake heal` exits 0 and says what was not written; the node back, the heal
    its return starts writes every lost file, and with another node killed everything reads."""
    c = cluster
    dead = [n for n in c.nodes if not n.alive()]  # test d left its leader killed
    t0 = time.time_ns()
    for n in dead:
        n.start()
    lid = wait_for(c.leader, 120, "a leader")[0]
    wait_for(lambda: view_drives_online(c.nodes[lid], 4), 90, "the leader's store with all 4")
    if dead:  # the heal its return starts ends before this test's own
        wait_for(lambda: (d := status(c.nodes[lid])) and d["started_ns"] > t0 and
                 d["state"] != "running", 300, "the heal at the restarted node's return")
    x, y, via = others(c, lid)
    if "hjob" not in [b["Name"] for b in c.client(via, retries=4).list_buckets()["Buckets"]]:
        fill(c, via)  # run alone: test a's objects
    lost = shard_names(c.nodes[x])
    assert len(lost) >= N_OBJ, lost
    for name in lost:
        os.unlink(os.path.join(c.nodes[x].drive, ".openlake", "data", name))
    hits = c.faults.parent / (c.faults.name + ".hits")
    c.faults.write_text("hold SHARD_PWRITE 120000\n")
    heal = subprocess.Popen([str(OPENLAKE_CLI), "heal", "--config", str(c.nodes[via].config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: hits.exists() and "held SHARD_PWRITE" in hits.read_text(), 120,
                 f"the heal's first write to node {x} held")
        c.nodes[x].kill9()
        c.faults.write_text("")
        out, err = heal.communicate(timeout=300)
    finally:
        c.faults.write_text("")
        if heal.poll() is None:
            heal.kill()
            heal.communicate()
    assert heal.returncode == 0, out + err
    assert out.startswith("heal done:") and " 0 unrecoverable" in out, out
    assert "were not written on drives that went offline or unreachable during the heal" in out
    assert "is offline or unreachable now and" in c.nodes[lid].log()
    # the node back: the heal its return starts writes every file it lost
    c.nodes[x].start()
    wait_for(lambda: lost <= shard_names(c.nodes[x]), 180,
             f"the heal at node {x}'s return to write its {len(lost)} lost shard files")
    heal_exits_0(c.nodes[via])
    c.nodes[y].kill9()
    s3 = c.client(lid, retries=4)
    for n in range(N_OBJ):
        got = s3.get_object(Bucket="hjob", Key=f"k{n:02d}")["Body"].read()
        assert got == body(f"hj{n}", MiB), n
    c.nodes[y].start()
