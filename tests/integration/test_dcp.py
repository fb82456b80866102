"""openlake_client.dcp (torch.distributed.checkpoint storage over the S3 client) against the real
daemon. Debian 12's torch (1.13) has no torch.distributed.checkpoint, so DCP's save/load call
sequence is played by tests/integration/dcp_standin.py (two ranks in this process, plans and
results through pickle); test_real_dcp runs the real thing where torch has it (skipped here).
Every tensor is checked bit-exact, and each stored item's bytes are read back with boto3 at the
offset the plug-in recorded."""

import io
import os
import pickle
import signal
import subprocess
import sys

import pytest

from conftest import ACCESS_KEY, REGION, SECRET_KEY, REPO, native_client, wait_for

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "python"))
from openlake_client import dcp  # noqa: E402

import dcp_standin as standin  # noqa: E402
from dcp_standin import Shard  # noqa: E402

BUCKET = "dcp"


@pytest.fixture(scope="module")
def c(s3_daemon):
    return native_client(s3_daemon, BUCKET)


def raw(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def rank_dicts(seed):
    """Two ranks' state dicts: tensors of several dtypes and shapes (a 12 MiB one: a multipart
    upload), a non-contiguous view, a 0-dim and an empty tensor, a tensor sharded by rows
    between the ranks, and non-tensor objects (BYTE_IO)."""
    g = torch.Generator().manual_seed(seed)
    big = torch.randn(1536, 2048, generator=g)
    big[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
    emb = torch.randn(16, 6, generator=g).to(torch.bfloat16)
    r0 = {
        "big.weight": big,
        "head.weight": torch.randn(10, 33, generator=g).to(torch.bfloat16),
        "emb.half": torch.randn(7, 3, generator=g).half(),
        "steps": torch.tensor(12345, dtype=torch.int64),
        "mask": torch.rand(5, 7, generator=g) > 0.5,
        "ids": torch.randint(-2**31, 2**31 - 1, (100,), generator=g, dtype=torch.int32),
        "proj.t": torch.randn(20, 30, generator=g).t(),  # a non-contiguous view
        "empty": torch.zeros(0, 4),
        "emb": Shard(emb[:8], 0, (16, 6)),
        "extra": {"step": 100, "lr": 0.1, "name": "run-1"},
    }
    r1 = {
        "r1.weight": torch.randn(64, 9, generator=g).double(),
        "r1.bytes": torch.randint(0, 256, (300,), generator=g, dtype=torch.uint8),
        "emb": Shard(emb[8:], 8, (16, 6)),
        "r1.opt": {"momentum": [1, 2, 3], "state": "x" * 5000},
    }
    return [r0, r1], emb


def blank_like(sds, emb_rows):
    """The ranks of a restarted job: every tensor another value, "proj.t" a non-contiguous
    target, rank 0 holding rows emb_rows of "emb" (a resharded load: the rows cross the two
    stored chunks), rank 1 the whole of it."""
    out = []
    for sd in sds:
        b = {}
        for k, v in sd.items():
            if isinstance(v, Shard):
                continue
            if isinstance(v, torch.Tensor):
                b[k] = torch.full_like(v.contiguous(), 7) if v.dtype != torch.bool else \
                    torch.zeros_like(v)
            else:
                b[k] = None
        out.append(b)
    out[0]["proj.t"] = torch.zeros(20, 30).t()
    lo, hi = emb_rows
    out[0]["emb"] = Shard(torch.zeros(hi - lo, 6, dtype=torch.bfloat16), lo, (16, 6))
    out[1]["emb"] = Shard(torch.zeros(16, 6, dtype=torch.bfloat16), 0, (16, 6))
    return out


def writers(c, n=2):
    return [dcp.S3StorageWriter(client=c) for _ in range(n)]


def readers(c, n=2):
    return [dcp.S3StorageReader(client=c) for _ in range(n)]


def keys(c, prefix):
    return sorted(k[len(prefix):] for k, _ in c.list(BUCKET, prefix))


def check_loaded(got, sds, emb, emb_rows):
    for r, sd in enumerate(sds):
        for k, v in sd.items():
            if isinstance(v, Shard):
                continue
            if isinstance(v, torch.Tensor):
                assert got[r][k].dtype == v.dtype and got[r][k].shape == v.shape, k
                assert torch.equal(raw(got[r][k]), raw(v)), k
            else:
                assert got[r][k] == v, k
    lo, hi = emb_rows
    assert torch.equal(raw(got[0]["emb"].local), raw(emb[lo:hi]))
    assert torch.equal(raw(got[1]["emb"].local), raw(emb))


def test_two_ranks_saved_and_loaded_bit_exact(c, s3_client):
    sds, emb = rank_dicts(1)
    cid = "s3://%s/run/step-100" % BUCKET
    md, results = standin.save(sds, writers(c), cid)
    # one object per rank, .metadata beside them
    names = keys(c, "run/step-100/")
    assert names[0] == dcp.METADATA_NAME and len(names) == 3
    assert all(n.endswith(dcp.SUFFIX) for n in names[1:])
    assert [n.split("_")[2] for n in names[1:]] == ["0", "1"]  # "__<rank>_<token>.distcp"
    # every item's bytes lie where its WriteResult says, read by another client
    for r, res in enumerate(results):
        assert len(res) == len(sds[r])
        for wr in res:
            info = wr.storage_data
            assert info.relative_path == names[1 + r]
            v = sds[r][wr.index.fqn]
            if isinstance(v, Shard):
                v = v.local
            if isinstance(v, torch.Tensor):
                want = raw(v).numpy().tobytes()
            else:
                want = None
            assert wr.size_in_bytes == info.length
            if info.length == 0:
                assert want == b""
                continue
            body = s3_client.get_object(
                Bucket=BUCKET, Key="run/step-100/" + info.relative_path,
                Range="bytes=%d-%d" % (info.offset, info.offset + info.length - 1))["Body"].read()
            if want is None:
                assert torch.load(io.BytesIO(body)) == v, wr.index.fqn
            else:
                assert body == want, wr.index.fqn
    # .metadata is the pickled Metadata with every item's place (what a reader trusts)
    stored = pickle.loads(s3_client.get_object(Bucket=BUCKET, Key="run/step-100/.metadata")
                          ["Body"].read())
    assert len(stored.storage_data) == sum(len(r) for r in results)
    assert [ch.offsets[0] for ch in stored.state_dict_metadata["emb"].chunks] == [0, 8]
    if stored.storage_meta is not None:
        assert stored.storage_meta.checkpoint_id == cid

    got = blank_like(sds, (4, 12))
    ptrs = {k: v.data_ptr() for k, v in got[0].items() if isinstance(v, torch.Tensor)}
    planners = standin.load(got, readers(c), cid)
    check_loaded(got, sds, emb, (4, 12))
    # filled in place: the job's own tensors, not new ones
    assert all(got[0][k].data_ptr() == p for k, p in ptrs.items())
    assert not got[0]["proj.t"].is_contiguous()
    assert "big.weight" in planners[0].committed and "emb" in planners[1].committed


def test_stored_chunk_read_in_parts(c):
    """Reads of a part of a stored chunk (storage_offsets, lengths): each target row range
    of the sharded tensor and of a plain 2-D one comes from the right bytes."""
    sds, emb = rank_dicts(2)
    cid = "s3://%s/run/parts" % BUCKET
    standin.save(sds, writers(c), cid)
    for rows in [(0, 16), (3, 5), (7, 9), (15, 16)]:
        got = blank_like(sds, rows)
        standin.load(got, readers(c), cid)
        check_loaded(got, sds, emb, rows)


def test_save_without_finish_is_no_checkpoint(c):
    """A save that stops before finish (a crash after the writes): its id has no .metadata,
    read_metadata says so; a checkpoint under another id, and the one finished earlier at the
    same id, stay readable and unchanged; the next finished save replaces that one and
    removes the objects no item names."""
    sds_a, emb_a = rank_dicts(3)
    standin.save(sds_a, writers(c), "s3://%s/job/step-1" % BUCKET)
    # the job's writers, given the id once and reused (DCP calls reset() only when save()
    # is given a checkpoint_id)
    latest = [dcp.S3StorageWriter("s3://%s/job/latest" % BUCKET, client=c) for _ in range(2)]
    standin.save(sds_a, latest, None)
    before = keys(c, "job/latest/")
    sds_b, emb_b = rank_dicts(4)

    standin.save(sds_b, writers(c), "s3://%s/job/step-2" % BUCKET, finish=False)
    assert keys(c, "job/step-2/") and dcp.METADATA_NAME not in keys(c, "job/step-2/")
    with pytest.raises(FileNotFoundError, match="no complete checkpoint.*step-2"):
        dcp.S3StorageReader("s3://%s/job/step-2" % BUCKET, client=c).read_metadata()
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        standin.load(blank_like(sds_b, (0, 16)), readers(c), "s3://%s/job/step-2" % BUCKET)

    standin.save(sds_b, latest, None, finish=False)
    assert len(keys(c, "job/latest/")) == len(before) + 2  # B's objects beside A's
    for cid in ("job/step-1", "job/latest"):
        got = blank_like(sds_a, (2, 14))
        standin.load(got, readers(c), "s3://%s/%s" % (BUCKET, cid))
        check_loaded(got, sds_a, emb_a, (2, 14))

    standin.save(sds_b, latest, None)
    got = blank_like(sds_b, (2, 14))
    standin.load(got, readers(c), "s3://%s/job/latest" % BUCKET)
    check_loaded(got, sds_b, emb_b, (2, 14))
    after = keys(c, "job/latest/")
    assert len(after) == 3 and not set(before[1:]) & set(after)


def test_finish_refuses_missing_rank_objects(c):
    """finish() checks that every object the results name holds their bytes before it
    writes .metadata: a rank object cut short or gone leaves no checkpoint."""
    sds, _ = rank_dicts(7)
    cid = "s3://%s/run/cut" % BUCKET
    ws = writers(c)
    md, results = standin.save(sds, ws, cid, finish=False)
    path = "run/cut/" + results[1][0].storage_data.relative_path
    body = c.get(BUCKET, path)
    c.put(BUCKET, path, bytes(body[:-1]))
    with pytest.raises(ValueError, match="not finished.*holds %d bytes" % (len(body) - 1)):
        ws[0].finish(md, results)
    c.delete(BUCKET, path)
    with pytest.raises(ValueError, match="not finished.*is missing"):
        ws[0].finish(md, results)
    assert dcp.METADATA_NAME not in keys(c, "run/cut/")
    c.put(BUCKET, path, body)
    ws[0].finish(md, results)  # all there: the checkpoint exists
    got = blank_like(sds, (0, 16))
    standin.load(got, readers(c), cid)


WRITER = r"""
import sys
sys.path[:0] = sys.argv[1:3]
from openlake_client import dcp, s3
import dcp_standin as standin
import test_dcp
cid = sys.argv[3]
sds, _ = test_dcp.rank_dicts(int(sys.argv[4]))
standin.save(sds, [dcp.S3StorageWriter(), dcp.S3StorageWriter()], cid)  # AWS_* settings
print("A saved", flush=True)
slow = s3.Client(max_bytes_per_sec=2 << 20)  # 12 MiB of rank 0: ~6 s, killed before the end
sds, _ = test_dcp.rank_dicts(int(sys.argv[4]) + 1)
print("B started", flush=True)
standin.save(sds, [dcp.S3StorageWriter(client=slow), dcp.S3StorageWriter(client=slow)], cid)
print("B saved", flush=True)
"""


def test_kill9_mid_save_leaves_the_previous_checkpoint(s3_daemon, c, s3_client, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    cid = "s3://%s/killed/latest" % BUCKET
    env = dict(os.environ, AWS_ENDPOINT_URL=s3_daemon.s3_url, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION,
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    p = subprocess.Popen([sys.executable, str(script), str(REPO / "python"),
                          str(REPO / "tests" / "integration"), cid, "20"],
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "A saved"
        assert p.stdout.readline().strip() == "B started"
        wait_for(lambda: s3_client.list_multipart_uploads(Bucket=BUCKET, Prefix="killed/")
                 .get("Uploads"), 60, "B's upload in flight")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    sds_a, emb_a = rank_dicts(20)
    got = blank_like(sds_a, (5, 11))
    standin.load(got, readers(c), cid)  # B is invisible, A intact
    check_loaded(got, sds_a, emb_a, (5, 11))
    # A's .metadata names A's objects; what B finished before the kill (its small rank 1
    # object, written beside rank 0's upload) lies beside them, named by nothing
    named = {i.relative_path for i in pickle.loads(c.get(BUCKET, "killed/latest/.metadata"))
             .storage_data.values()}
    left = set(keys(c, "killed/latest/")) - {dcp.METADATA_NAME}
    assert len(named) == 2 and named <= left and len(left - named) <= 1


def test_checkpoint_ids_and_errors(c):
    W, R = dcp.S3StorageWriter, dcp.S3StorageReader
    assert W.validate_checkpoint_id("s3://b/x") and R.validate_checkpoint_id("s3://b")
    assert not W.validate_checkpoint_id("/tmp/ckpt") and not R.validate_checkpoint_id("s3:///x")
    with pytest.raises(ValueError, match="no checkpoint id"):
        W(client=c).set_up_storage_writer(True)
    with pytest.raises(ValueError, match="not an S3 checkpoint id"):
        W("/tmp/x", client=c).set_up_storage_writer(True)
    with pytest.raises(ValueError, match="use_collectives=False"):
        W("s3://%s/x" % BUCKET, client=c).set_up_storage_writer(True, use_collectives=False)
    # a .metadata whose item lengths do not hold the tensor is refused, naming it
    sds, _ = rank_dicts(5)
    cid = "s3://%s/run/bad" % BUCKET
    md, _ = standin.save(sds, writers(c), cid)
    stored = pickle.loads(c.get(BUCKET, "run/bad/.metadata"))
    for k, info in stored.storage_data.items():
        if k.fqn == "head.weight":
            info.length -= 2
    c.put(BUCKET, "run/bad/.metadata", pickle.dumps(stored))
    with pytest.raises(ValueError, match="head.weight"):
        standin.load(blank_like(sds, (0, 16)), readers(c), cid)


def test_real_dcp(c):
    """torch.distributed.checkpoint itself (torch >= 2.2), one process, no process group."""
    if not dcp.HAVE_DCP:
        pytest.skip("torch %s has no torch.distributed.checkpoint (Debian 12: 1.13); the "
                    "stand-in tests above play its call sequence" % torch.__version__)
    import torch.distributed.checkpoint as tdcp

    torch.manual_seed(6)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    sd = {"model": m.state_dict(), "step": 7}
    cid = "s3://%s/real/step-7" % BUCKET
    tdcp.save(sd, storage_writer=dcp.S3StorageWriter(cid, client=c))
    m2 = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    out = {"model": m2.state_dict(), "step": 0}
    tdcp.load(out, storage_reader=dcp.S3StorageReader(cid, client=c))
    for k, v in m.state_dict().items():
        assert torch.equal(raw(out["model"][k]), raw(v)), k
    assert out["step"] == 7
