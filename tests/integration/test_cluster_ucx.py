"""The object store over a cluster whose node planes run on UCX ([cluster] plane_transport =
"ucx", issue 10): etcd + 4 openlaked nodes on loopback as in test_cluster_store.py, every
node-to-node shard and metadata call on UCX stream endpoints with UCX_TLS=tcp (no RDMA NIC
here: the verbs paths are not run; shared memory cannot carry UCX streams, see
docs/node-protocol.md). Each node registers its plane address as
"ucx://host:port" in etcd, which is how the others learn to reach it over UCX. Real daemons,
boto3 through every node. A build without UCX refuses plane_transport = "ucx" at start."""

import hashlib
import json
import os
import subprocess

import pytest

from conftest import OPENLAKE_CLI, OPENLAKED, free_port, wait_for
from test_cluster_store import ETCD_CLI, body, cluster, etcd, others, start_cluster  # noqa: F401
from test_cluster_store import \
    test_sigstop_of_a_non_leader_during_concurrent_puts as sigstop_during_puts


def built_with_ucx():
    r = subprocess.run(["ldd", str(OPENLAKED)], capture_output=True, text=True, timeout=60)
    return "libucp" in r.stdout


@pytest.fixture
def ucx_cluster(tmp_path, etcd, monkeypatch):  # noqa: F811
    if not built_with_ucx():
        pytest.skip("openlaked was built without UCX (libucx-dev)")
    # the daemons inherit these: tcp on loopback (UCX would also open lanes on every other
    # interface, some of them other tests' network namespaces' and short-lived)
    monkeypatch.setenv("UCX_TLS", "tcp")
    monkeypatch.setenv("UCX_NET_DEVICES", "lo")
    yield from start_cluster(tmp_path, etcd, extra='plane_transport = "ucx"\n')


def test_put_get_through_every_node_over_a_ucx_plane(ucx_cluster):
    c = ucx_cluster
    for n in c.nodes:
        assert "over UCX" in n.log(), n.log()[-2000:]
    # the member records carry the transport with the address
    r = subprocess.run([str(ETCD_CLI), c.eps, "get", c.prefix + "members/", "prefix"],
                       capture_output=True, text=True, timeout=60)
    recs = [json.loads(ln.split(" ", 1)[1].rsplit(" ", 2)[0])
            for ln in r.stdout.splitlines()[:-1]]
    assert len(recs) == 4 and all(m["rpc_addr"].startswith("ucx://127.0.0.1:") for m in recs), \
        r.stdout
    # `openlake cluster status` pings every member's plane at its registered ucx:// address
    st = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config",
                         str(c.nodes[0].config), "--json"], capture_output=True, text=True,
                        timeout=120)
    assert st.returncode == 0, st.stdout + st.stderr
    planes = [m["plane"] for m in json.loads(st.stdout)["members"]]
    assert len(planes) == 4 and all(p["ok"] for p in planes), planes
    lid, _ = c.leader()
    na = others(c, lid)[0]
    s3 = c.client(na)
    s3.create_bucket(Bucket="ucx")
    objs = {}
    for i in range(4):  # a PUT through every node, read back through every node
        objs[f"k{i}"] = body(f"ucx{i}", (100 << 10) * (i + 1))
        c.client(i).put_object(Bucket="ucx", Key=f"k{i}", Body=objs[f"k{i}"])
    big = body("ucx-big", 20 << 20)
    s3.put_object(Bucket="ucx", Key="big", Body=big)
    objs["big"] = big
    for i in range(4):
        for k, v in objs.items():
            got = c.client(i).get_object(Bucket="ucx", Key=k)["Body"].read()
            assert hashlib.sha256(got).digest() == hashlib.sha256(v).digest(), (i, k)
    keys = [o["Key"] for o in c.client(others(c, lid)[-1]).list_objects_v2(
        Bucket="ucx")["Contents"]]
    assert keys == sorted(objs), keys
    # each node's drive holds a shard of the 20 MiB object (k = 3): it went over UCX
    for n in c.nodes:
        sizes = [os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(n.drive)
                 for f in fs]
        assert any(sz >= (20 << 20) // 3 for sz in sizes), (n.i, sorted(sizes)[-5:])
    s3.delete_object(Bucket="ucx", Key="big")
    wait_for(lambda: "big" not in [o["Key"] for o in c.client(lid).list_objects_v2(
        Bucket="ucx").get("Contents", [])], 30, "the DELETE seen through the leader")


def test_sigstop_of_a_non_leader_over_a_ucx_plane(ucx_cluster):
    """test_cluster_store's SIGSTOP test as it is, the planes on UCX: a node frozen while
    three clients PUT through the others misses the plane's deadline (a UCX endpoint stays
    open and silent, as a socket does), the writes go on with 3 of 4 drives, it comes back
    and is healed, every acknowledged PUT reads back through every node; then a drive wiped
    under a running node is made again and healed."""
    sigstop_during_puts(ucx_cluster)


def test_without_ucx_the_daemon_refuses_a_ucx_plane(tmp_path):
    if built_with_ucx():
        pytest.skip("openlaked has UCX: nothing to refuse")
    cfg = tmp_path / "openlake.toml"
    cfg.write_text(f"""data_dirs = ["{tmp_path / 'd0'}"]
s3_addr = "127.0.0.1:{free_port()}"
rpc_addr = "127.0.0.1:{free_port()}"
kv_addr = ""
console_addr = ""
set_drive_count = 1
default_parity_count = 0
[cluster]
secret = "s"
plane_transport = "ucx"
""")
    r = subprocess.run([str(OPENLAKED), "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode != 0 and "built without UCX" in r.stdout + r.stderr, r.stdout + r.stderr



def test_a_node_on_the_other_plane_transport_refuses_to_start(cluster):
    """a node of a TCP-plane cluster restarted with plane_transport = "ucx" refuses to start,
    naming the nodes on the other transport and the fix; back on TCP it rejoins"""
    if not built_with_ucx():
        pytest.skip("openlaked was built without UCX (libucx-dev)")
    c = cluster
    n = c.nodes[1]
    assert n.stop()
    tcp = n.config.read_text()
    assert "\n[cluster]\n" in tcp
    n.config.write_text(tcp.replace("\n[cluster]\n", '\n[cluster]\nplane_transport = "ucx"\n'))
    env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
    r = subprocess.run([str(OPENLAKED), "--config", str(n.config)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode != 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "node(s) 0, 2, 3 run their node plane on TCP, this node on UCX" in out, out
    assert "set plane_transport the same on every node" in out, out
    n.config.write_text(tcp)
    n.start()
    wait_for(lambda: c.serving(1), 60, "S3 through node 1 back on TCP")
    s3 = c.client(1, retries=6)
    s3.create_bucket(Bucket="back")
    s3.put_object(Bucket="back", Key="k", Body=b"tcp again")
    assert c.client(3, retries=6).get_object(Bucket="back", Key="k")["Body"].read() == \
        b"tcp again"
