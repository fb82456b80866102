"""Training I/O through openlake_client.s3 against the real daemon: a torch module's state_dict
saved and loaded bit-exact (several safetensors shards, multipart), the files read back by an
independent reader written here from the safetensors spec, async_save while optimizer steps
run, kill -9 of a writer mid-save, and datasets under a DataLoader with 2 workers."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ACCESS_KEY, REGION, SECRET_KEY, REPO, native_client, wait_for

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
sys.path.insert(0, str(REPO / "python"))
from openlake_client import s3  # noqa: E402

BUCKET = "training"


@pytest.fixture(scope="module")
def c(s3_daemon):
    return native_client(s3_daemon, BUCKET)


class Net(torch.nn.Module):
    def __init__(self, wide=1536):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)  # int64 num_batches_tracked, a 0-dim tensor
        self.big = torch.nn.Linear(2048, wide)  # 12 MiB: a multipart upload
        self.head = torch.nn.Linear(wide, 10).to(torch.bfloat16)
        self.emb = torch.nn.Embedding(50, 16).half()
        self.register_buffer("mask", torch.rand(7, 5) > 0.5)
        self.register_buffer("empty", torch.zeros(0, 4))


def raw(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def assert_bit_exact(got, want):
    assert list(got) == list(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert torch.equal(raw(got[k]), raw(v)), k


def test_state_dict_saved_and_loaded_bit_exact(c, s3_client):
    torch.manual_seed(1)
    m = Net()
    with torch.no_grad():
        m.big.weight[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
    sd = m.state_dict()
    index = s3.save(sd, "s3://%s/run1/step-1/" % BUCKET, client=c, max_shard_bytes=4 << 20)
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 3  # conv+bn..., big alone, the rest
    got = s3.load("s3://%s/run1/step-1" % BUCKET, client=c)
    assert_bit_exact(got, sd)
    # one shard alone, as model loading reads it
    one = s3.load_safetensors("s3://%s/run1/step-1/%s" % (BUCKET, index["weight_map"]
                                                          ["big.weight"]), client=c)
    assert torch.equal(raw(one["big.weight"]), raw(sd["big.weight"]))
    # the loaded model runs
    m2 = Net()
    m2.load_state_dict(got)
    x = torch.randn(2, 2048)
    assert torch.equal(raw(m2.big(x)), raw(m.big(x)))


def test_loaded_in_place_into_the_jobs_tensors(c):
    """Resuming a job: load(out=model.state_dict()) fills the model's own tensors (no new
    memory for them, as torch.distributed.checkpoint loads), bit-exact; a tensor that is not
    contiguous takes its bytes through a copy; a shape that differs is an error naming it."""
    torch.manual_seed(3)
    m = Net()
    sd = m.state_dict()
    uri = "s3://%s/run1/inplace/" % BUCKET
    s3.save(sd, uri, client=c, max_shard_bytes=4 << 20)
    torch.manual_seed(4)
    job = Net()  # another init: every tensor differs
    mine = job.state_dict()
    strided = torch.empty(1536, 10, dtype=torch.bfloat16).t()  # head.weight, not contiguous
    mine["head.weight"] = strided
    ptrs = {k: v.data_ptr() for k, v in mine.items()}
    got = s3.load(uri, client=c, out=mine)
    assert_bit_exact(got, sd)
    assert all(got[k] is mine[k] and got[k].data_ptr() == ptrs[k] for k in mine)
    assert torch.equal(raw(job.big.weight), raw(sd["big.weight"]))  # the module's own
    assert torch.equal(strided, sd["head.weight"])
    # tensors absent from out come back fresh
    part = {"big.weight": torch.empty(1536, 2048)}
    got = s3.load(uri, client=c, out=part)
    assert got["big.weight"] is part["big.weight"] and len(got) == len(sd)
    assert_bit_exact(got, sd)
    with pytest.raises(ValueError, match="big.weight"):
        s3.load(uri, client=c, out={"big.weight": torch.empty(1536, 2047)})


def independent_read(body):
    """A reader written from the safetensors format description: u64 little-endian header
    size N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, __metadata__},
    then the data; offsets are relative to the byte after the header."""
    n = int.from_bytes(body[:8], "little")
    header = json.loads(body[8:8 + n])
    data = body[8 + n:]
    np_types = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?", "BF16": "<u2"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            assert all(isinstance(v, str) for v in e.values())
            continue
        b, en = e["data_offsets"]
        a = np.frombuffer(data[b:en], dtype=np_types[e["dtype"]]).reshape(e["shape"])
        out[name] = (e["dtype"], a)
    return out, n


def test_files_read_by_an_independent_reader(c, s3_client):
    torch.manual_seed(2)
    sd = Net(wide=64).state_dict()
    index = s3.save(sd, "s3://%s/run1/indep/" % BUCKET, client=c, max_shard_bytes=1 << 20)
    idx = json.loads(s3_client.get_object(Bucket=BUCKET, Key="run1/indep/" + s3.INDEX_NAME)
                     ["Body"].read())
    assert idx == json.loads(json.dumps(index))
    assert idx["metadata"]["total_size"] == sum(v.numel() * v.element_size()
                                                for v in sd.values())
    seen = {}
    for f in sorted(set(idx["weight_map"].values())):
        body = s3_client.get_object(Bucket=BUCKET, Key="run1/indep/" + f)["Body"].read()
        tensors, n = independent_read(body)
        assert (8 + n) % 8 == 0  # data 8-byte aligned
        for name, (dt, a) in tensors.items():
            assert idx["weight_map"][name] == f
            seen[name] = (dt, a)
    assert sorted(seen) == sorted(sd)
    for name, t in sd.items():
        dt, a = seen[name]
        if dt == "BF16":
            assert a.tobytes() == raw(t).numpy().tobytes(), name
        else:
            assert np.array_equal(a, t.numpy()) and a.dtype == t.numpy().dtype, name


def test_async_save_while_training(s3_daemon, c):
    slow = s3.Client(endpoint=s3_daemon.s3_url, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                     max_bytes_per_sec=4 << 20)  # ~3 s for this model: steps overlap it
    torch.manual_seed(3)
    m = Net(wide=1024)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    want = {k: v.clone() for k, v in m.state_dict().items()}
    h = s3.async_save(m.state_dict(), "s3://%s/run1/async/" % BUCKET, client=slow)
    steps, overlapped = 0, 0
    deadline = time.monotonic() + 60
    while steps < 20 and time.monotonic() < deadline:
        loss = m.big(torch.randn(4, 2048)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()  # changes the parameters in place while the upload runs
        steps += 1
        overlapped += not h.done()
    assert overlapped >= 1, "the upload finished before the first step"
    h.wait(timeout=60)
    assert not torch.equal(m.big.weight, want["big.weight"])
    got = s3.load("s3://%s/run1/async/" % BUCKET, client=c)
    assert_bit_exact(got, want)  # the snapshot, not the trained parameters


WRITER = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
from openlake_client import s3
uri = sys.argv[2]
torch.manual_seed(10)
a = {"w": torch.randn(256, 256), "b": torch.arange(10)}
s3.save(a, uri)                      # complete: configured from AWS_* variables
print("A saved", flush=True)
slow = s3.Client(max_bytes_per_sec=2 << 20)
b = {"w": torch.randn(2048, 2048), "v": torch.randn(1024, 1024), "b": torch.arange(20)}
print("B started", flush=True)
s3.save(b, uri, client=slow, max_shard_bytes=8 << 20)  # ~10 s: killed before it ends
print("B saved", flush=True)
"""


def test_kill9_mid_save_leaves_the_previous_checkpoint(s3_daemon, c, s3_client, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    uri = "s3://%s/run2/latest/" % BUCKET
    env = dict(os.environ, AWS_ENDPOINT_URL=s3_daemon.s3_url, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION,
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    p = subprocess.Popen([sys.executable, str(script), str(REPO / "python"), uri],
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "A saved"
        assert p.stdout.readline().strip() == "B started"
        wait_for(lambda: s3_client.list_multipart_uploads(Bucket=BUCKET, Prefix="run2/")
                 .get("Uploads"), 60, "B's upload in flight")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    torch.manual_seed(10)
    a = {"w": torch.randn(256, 256), "b": torch.arange(10)}
    assert_bit_exact(s3.load(uri, client=c), a)  # B is invisible, A intact
    # a crashed first save of a new prefix is no checkpoint at all
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        s3.load("s3://%s/run2/never/" % BUCKET, client=c)
    # the next save replaces A and removes A's files (a killed save's finished shards stay:
    # no index names them)
    files_a = set(json.loads(c.get(BUCKET, "run2/latest/" + s3.INDEX_NAME))["weight_map"]
                  .values())
    idx = s3.save({"x": torch.ones(3)}, uri, client=c)
    assert torch.equal(s3.load(uri, client=c)["x"], torch.ones(3))
    left = {k[len("run2/latest/"):] for k, _ in c.list(BUCKET, "run2/latest/")}
    assert not files_a & left and set(idx["weight_map"].values()) <= left


def test_datasets_with_two_workers(c):
    from torch.utils.data import DataLoader

    keys = ["ds/shard-%03d.bin" % i for i in range(23)]
    for i, k in enumerate(keys):
        c.put(BUCKET, k, bytes([i]) * (100 + i))
    c.put(BUCKET, "ds-other/x", b"not under the prefix")

    def check(obj):
        return obj.key, bytes(obj.data)

    it = s3.S3IterableDataset("s3://%s/ds/" % BUCKET, client=c, transform=check, shuffle=True,
                              rank=0, world_size=1, prefetch=3)
    orders = []
    for epoch in range(2):
        it.set_epoch(epoch)
        got = list(DataLoader(it, batch_size=None, num_workers=2))
        assert sorted(k for k, _ in got) == keys  # every object exactly once
        for k, data in got:
            i = keys.index(k)
            assert data == bytes([i]) * (100 + i)
        orders.append([k for k, _ in got])
    assert orders[0] != orders[1]  # reshuffled per epoch
    # two ranks split the objects between them
    parts = [list(DataLoader(s3.S3IterableDataset("s3://%s/ds/" % BUCKET, client=c, rank=r,
                                                  world_size=2, transform=check),
                             batch_size=None, num_workers=2)) for r in (0, 1)]
    a, b = ({k for k, _ in p} for p in parts)
    assert not a & b and sorted(a | b) == keys
    mp = s3.S3MapDataset("s3://%s/ds/" % BUCKET, client=c, transform=check)
    assert len(mp) == 23
    got = list(DataLoader(mp, batch_size=None, num_workers=2, shuffle=True))
    assert sorted(k for k, _ in got) == keys
