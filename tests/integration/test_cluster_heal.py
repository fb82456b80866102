"""The heal job outlives its leader (issue 10: long-running job state lives in etcd; docs/cluster.md
"Heal jobs"). One cluster (etcd x3 + 4 nodes, one set N=4 P=1) with 24 MiB of objects and a heal
slowed by its rate: (a) the leader is killed (-9) mid-heal: the next leader resumes the job from
the cursor in its record (its log says where, and its run scans only what was left), the
`openlake heal` that waits through another node follows the job to "done" and exits 0, `heal
--status` shows it running then done, and with the killed node back the store is whole (`openlake
heal` exits 0); (b) a heal cancelled by an admin is recorded cancelled and not resumed by the
next leader.

Real things only: Debian's etcd, real daemons, boto3, the CLI, kill -9.
"""

import json
import re
import subprocess

import pytest

from conftest import OPENLAKE_CLI, admin_request, wait_for
from test_cluster_store import (ETCD_CLI, body, etcd, heal_exits_0, others,  # noqa: F401
                                pytestmark, start_cluster)

N_OBJ = 24
MiB = 1 << 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, etcd):  # noqa: F811
    yield from start_cluster(tmp_path_factory.mktemp("cheal"), etcd)


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
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--config", str(c.nodes[via].config),
                        "--rate", str(MiB), "--no-wait"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

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
