"""libopenlake's S3 client and `openlake cp` against other S3 implementations: moto's server
(moto_server, from the pyenv Python that awscli runs on here) and s3rver (Node.js, from the npm
registry: scripts/deps.sh test puts it into .deps/s3rver). Each is skipped, saying why, when it
is absent. Multipart PUT, whole and ranged scatter GETs (CRC32C checked where the server keeps
a full-object one), listing, delete, cp up and down."""

import hashlib
import os
import shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from conftest import OPENLAKE_CLI, REPO, free_port, wait_port

sys.path.insert(0, str(REPO / "python"))
from openlake_client import s3  # noqa: E402

MiB = 1 << 20

Other = namedtuple("Other", "name url access_key secret_key")


def moto_server_path():
    return shutil.which("moto_server") or next(
        (p for p in [os.path.expanduser("~/.pyenv/shims/moto_server")] if os.path.exists(p)),
        None)


def s3rver_path():
    return next((p for p in [str(REPO / ".deps" / "s3rver" / "node_modules" / ".bin" / "s3rver"),
                             shutil.which("s3rver")] if p and os.path.exists(p)), None)


# name: (where its program is, its command line, its credentials, why it may be missing)
SERVERS = {
    "moto": (moto_server_path, lambda exe, port, d: [exe, "-H", "127.0.0.1", "-p", str(port)],
             ("testing", "testing"), "moto_server (pip's moto[server]) is not installed"),
    "s3rver": (s3rver_path,
               lambda exe, port, d: [exe, "-d", d, "-a", "127.0.0.1", "-p", str(port), "-s"],
               ("S3RVER", "S3RVER"),
               "s3rver is not installed (scripts/deps.sh test installs it from the npm registry "
               "into .deps/s3rver)"),
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def other(request, tmp_path_factory):
    find, argv, (ak, sk), why = SERVERS[request.param]
    exe = find()
    if not exe:
        pytest.skip(why + ": no second S3 server of this kind")
    port = free_port()
    data = tmp_path_factory.mktemp(request.param)
    p = subprocess.Popen(argv(exe, port, str(data)), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, 60, p):
            pytest.skip("%s did not start" % request.param)
        yield Other(request.param, "http://127.0.0.1:%d" % port, ak, sk)
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def test_client_against_another_server(other):
    c = s3.Client(endpoint=other.url, access_key=other.access_key, secret_key=other.secret_key,
                  conns=4)
    c.create_bucket("other")
    data = os.urandom(19 * MiB + 5)
    etag, _ = c.put("other", "m/big", [data[:7], data[7:]])
    if other.name == "s3rver":  # its completed multipart upload's ETag: the whole object's MD5
        assert etag == '"%s"' % hashlib.md5(data).hexdigest()
    else:  # S3's: the MD5 of the parts' MD5s, "-" and the part count (3 parts of 8 MiB max)
        assert etag.endswith('-3"')
    assert c.get("other", "m/big") == data
    bufs = [bytearray(11), bytearray(9 * MiB)]
    c.get_into("other", "m/big", bufs, offset=8 * MiB - 5)
    assert bytes(bufs[0]) + bytes(bufs[1]) == data[8 * MiB - 5:8 * MiB + 6 + 9 * MiB]
    c.put("other", "m/small", b"hello world")
    assert c.get("other", "m/small") == b"hello world"  # CRC32C checked where it is kept
    assert c.list("other", "m/") == [("m/big", len(data)), ("m/small", 11)]
    c.delete("other", "m/small")
    assert not c.exists("other", "m/small")


def test_cp_against_another_server(other, tmp_path):
    src = tmp_path / "f.bin"
    data = os.urandom(17 * MiB)
    src.write_bytes(data)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=other.access_key,
               AWS_SECRET_ACCESS_KEY=other.secret_key, AWS_ENDPOINT_URL=other.url,
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    s3.Client(endpoint=other.url, access_key=other.access_key,
              secret_key=other.secret_key).create_bucket("cpo")
    r = subprocess.run([str(OPENLAKE_CLI), "cp", str(src), "s3://cpo/x/"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(OPENLAKE_CLI), "cp", "-r", "s3://cpo/x/", str(tmp_path / "back")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back" / "f.bin").read_bytes() == data


def test_checkpoints_and_datasets_against_another_server(other):
    """The Python API over the same client: a torch module's state dict saved (safetensors
    files + index, the manifest last) and loaded bit-exact, one file loaded by ranged GETs
    into tensors, an async save, and a dataset over a prefix read once per epoch across
    ranks"""
    torch = pytest.importorskip("torch")
    c = s3.Client(endpoint=other.url, access_key=other.access_key, secret_key=other.secret_key,
                  conns=4)
    c.create_bucket("ckpt")
    torch.manual_seed(7)
    m = torch.nn.Sequential(torch.nn.Linear(300, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10))
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    sd["emb"] = torch.randn(3 << 20)  # 12 MiB: several ranged GETs
    s3.save(sd, "s3://ckpt/run/step-1/", client=c, max_shard_bytes=8 * MiB)
    out = s3.load("s3://ckpt/run/step-1/", client=c)
    assert set(out) == set(sd) and all(torch.equal(out[k], sd[k]) for k in sd)
    files = sorted(set(s3._read_index(c, "ckpt", "run/step-1/")["weight_map"].values()))
    assert len(files) >= 2  # the 8 MiB shard bound split it
    got = {}
    for f in files:
        got.update(s3.load_safetensors("s3://ckpt/run/step-1/" + f, client=c))
    assert set(got) == set(sd) and all(torch.equal(got[k], sd[k]) for k in sd)
    s3.async_save(sd, "s3://ckpt/run/step-2/", client=c).wait()
    assert all(torch.equal(v, sd[k]) for k, v in s3.load("s3://ckpt/run/step-2/", client=c).items())

    keys = ["data/shard-%03d" % i for i in range(10)]
    for i, k in enumerate(keys):
        c.put("ckpt", k, bytes([i]) * (1000 + i))
    seen = []
    for rank in (0, 1):
        ds = s3.S3IterableDataset("s3://ckpt/data/", client=c, shuffle=True, seed=3, rank=rank,
                                  world_size=2)
        seen += [(o.key, bytes(o.data)) for o in ds]
    assert sorted(seen) == [(k, bytes([i]) * (1000 + i)) for i, k in enumerate(keys)]
