"""The object store over a cluster whose node plane encrypts its frames ([cluster]
plane_encrypt = true, issue 10): etcd + 4 openlaked nodes on loopback as in
test_cluster_store.py, every shard and metadata call between the nodes encrypted
(ChaCha20-Poly1305 under each connection's keys; tests/unit/test_node.c shows that no payload
byte crosses the wire in the clear). Real daemons, boto3 through every node; `openlake cluster
status` pings every plane with the config's setting, and a peer that does not encrypt is
refused."""

import hashlib
import json
import os
import subprocess

from conftest import OPENLAKE_CLI
from test_cluster_store import body, etcd, others, start_cluster  # noqa: F401

import pytest


@pytest.fixture
def enc_cluster(tmp_path, etcd):  # noqa: F811
    yield from start_cluster(tmp_path, etcd, extra="plane_encrypt = true\n")


def status(config):
    r = subprocess.run([str(OPENLAKE_CLI), "cluster", "status", "--config", str(config),
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return [m["plane"] for m in json.loads(r.stdout)["members"]]


def test_put_get_through_every_node_over_an_encrypted_plane(enc_cluster):
    c = enc_cluster
    for n in c.nodes:
        assert "frames encrypted" in n.log(), n.log()[-2000:]
    planes = status(c.nodes[0].config)
    assert len(planes) == 4 and all(p["ok"] for p in planes), planes
    lid, _ = c.leader()
    s3 = c.client(others(c, lid)[0])
    s3.create_bucket(Bucket="enc")
    objs = {f"k{i}": body(f"enc{i}", (100 << 10) * (i + 1)) for i in range(4)}
    for i in range(4):
        c.client(i).put_object(Bucket="enc", Key=f"k{i}", Body=objs[f"k{i}"])
    objs["big"] = body("enc-big", 20 << 20)
    s3.put_object(Bucket="enc", Key="big", Body=objs["big"])
    for i in range(4):
        for k, v in objs.items():
            got = c.client(i).get_object(Bucket="enc", Key=k)["Body"].read()
            assert hashlib.sha256(got).digest() == hashlib.sha256(v).digest(), (i, k)
    # each node's drive holds a shard of the 20 MiB object (k = 3): it crossed the plane
    for n in c.nodes:
        sizes = [os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(n.drive)
                 for f in fs]
        assert any(sz >= (20 << 20) // 3 for sz in sizes), (n.i, sorted(sizes)[-5:])
    for n in c.nodes:
        assert "sends unencrypted frames" not in n.log()

    # a peer without plane_encrypt (the CLI with such a config) is refused by every node,
    # which says why
    plain = c.nodes[0].config.parent / "plain.toml"
    plain.write_text(c.nodes[0].config.read_text().replace("plane_encrypt = true\n", ""))
    planes = status(plain)
    assert len(planes) == 4 and not any(p["ok"] for p in planes), planes
    for n in c.nodes:
        assert "sends unencrypted frames while [cluster] plane_encrypt = true" in n.log()
