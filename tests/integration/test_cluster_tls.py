"""A cluster whose nodes serve S3 over TLS ([s3_tls] on every node, issue 10): the hop that
forwards a request to the leader speaks TLS to the leader's S3 port, checks the leader's
certificate, and shows its own when the leader asks for client certificates. Four nodes and
a 3-member etcd, certificates made with the openssl CLI, boto3 over https through every node.
The shared certificate is rotated (a new CA) and every node sent SIGHUP, then the leader is
killed: the nodes reach the new leader with the reloaded files. A node told to trust another
CA refuses the leader's certificate: its clients get 503 SlowDown and its log says why.

Real things only: Debian's etcd, real daemons, boto3.
"""

import os
import shutil
import signal

from botocore.exceptions import ClientError
from conftest import wait_for
from test_cluster_store import body, etcd, list_all, start_cluster  # noqa: F401
from test_cluster_store import pytestmark as cluster_mark
from test_tls import install, make_ca, make_cert, tls_conf

import pytest

pytestmark = [cluster_mark,
              pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl CLI")]


@pytest.fixture
def tls_cluster(tmp_path, etcd):  # noqa: F811
    d = tmp_path / "certs"
    d.mkdir()
    ca = make_ca(d)
    pem, key = make_cert(d, "node", 0x5001)  # one certificate for every node: 127.0.0.1
    cpem, ckey = make_cert(d, "client", 0x5002, server=False)
    # client certificates required: a forwarding node has to show its own
    extra = tls_conf(pem, key, ca=ca)
    for c in start_cluster(tmp_path, etcd, extra=extra, ca=ca, client_cert=(str(cpem),
                                                                            str(ckey))):
        yield c, d, pem, key


def get_or_none(c, i, key):
    try:
        return c.client(i).get_object(Bucket="tls", Key=key)["Body"].read()
    except Exception:  # noqa: BLE001 - a 503 while the next leader takes over
        return None


def test_forwarding_to_the_leader_over_tls(tls_cluster):
    c, d, pem, key = tls_cluster
    lead, epoch = c.leader()
    others = [i for i in range(4) if i != lead]
    s3 = c.client(others[0])
    s3.create_bucket(Bucket="tls")
    objs = {f"k/{n}": body(f"tls{n}", (n + 1) * (300 << 10)) for n in range(4)}
    for n, (k, v) in enumerate(objs.items()):  # written through each node, leader included
        c.client(n).put_object(Bucket="tls", Key=k, Body=v)
    for i in range(4):
        s = c.client(i)
        assert list_all(s, "tls", page=3) == sorted(objs), i
        for k, v in objs.items():
            assert s.get_object(Bucket="tls", Key=k)["Body"].read() == v, (i, k)

    # the certificate rotated (another CA), SIGHUP everywhere, the leader killed: every node
    # dials the next leader with the reloaded files (its old trust would refuse it)
    d2 = d / "rotated"
    d2.mkdir()
    ca2 = make_ca(d2)
    pem2, key2 = make_cert(d2, "node", 0x6001)
    install(pem2, key2, pem, key)
    bundle = d2 / "cas.pem"  # client certificates of both CAs taken while they change
    bundle.write_bytes((d / "ca.pem").read_bytes() + ca2.read_bytes())
    os.replace(bundle, d / "ca.pem")
    for n in c.nodes:
        n.proc.send_signal(signal.SIGHUP)
    for n in c.nodes:
        wait_for(lambda: "uses the reloaded TLS files" in n.log(), 60, f"node {n.i} reloading")
    c.ca = ca2
    c.nodes[lead].kill9()
    lead, _ = wait_for(lambda: (lambda ld: ld if ld and ld[1] > epoch else None)(c.leader()),
                       60, "a newer leader of set 0.0")
    others = [i for i in range(4) if i != lead and c.nodes[i].alive()]
    for i in others:
        got = wait_for(lambda: (lambda r: r)(get_or_none(c, i, "k/1")), 60,
                       f"a GET through node {i} after the rotation")
        assert got == objs["k/1"], i

    # a node that trusts another CA refuses the leader's certificate: 503, and it says why (a
    # write: a GET it may serve itself from its read-only view, [cluster] read_any; and with
    # write_any off: a plain PUT it would write itself, its commit sent over the node plane,
    # which does not use the S3 port's certificates)
    bad = c.nodes[others[1]]
    other_ca = d / "other"
    other_ca.mkdir()
    make_ca(other_ca)
    assert bad.stop()
    bad.config.write_text(bad.config.read_text().replace(
        "[cluster]\n", f'[cluster]\ntls_ca = "{other_ca / "ca.pem"}"\nwrite_any = false\n'))
    bad.start()
    with pytest.raises(ClientError) as e:
        c.client(bad.i).delete_object(Bucket="tls", Key="k/0")
    assert e.value.response["Error"]["Code"] == "SlowDown", e.value.response
    # a PUT with a body too: boto3 sends it with Expect: 100-continue, gives up waiting for
    # the 100 after a second while the node waits for a leader, and must still read the 503
    # (it dropped the connection while TLS session tickets came right after the handshake)
    with pytest.raises(ClientError) as e:
        c.client(bad.i).put_object(Bucket="tls", Key="k/9", Body=b"x" * (1 << 20))
    assert e.value.response["Error"]["Code"] == "SlowDown", e.value.response
    wait_for(lambda: "does not verify against [cluster] tls_ca" in bad.log(), 60,
             "the node saying the leader's certificate does not verify")
    assert c.client(others[0]).get_object(Bucket="tls", Key="k/0")["Body"].read() == \
        objs["k/0"]
