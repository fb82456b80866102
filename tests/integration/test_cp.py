"""`openlake cp` against the real daemon, checked with boto3: files up and down, --recursive
both ways, resume of a multipart upload after kill -9 of the CLI, and its error messages."""

import hashlib
import os
import signal
import subprocess

import pytest

from conftest import OPENLAKE_CLI, aws_env, wait_for

MiB = 1 << 20
BUCKET = "cpbucket"


def cp(d, *args, env=None, timeout=120):
    e = aws_env(env)
    return subprocess.run([str(OPENLAKE_CLI), "cp", *args, "--endpoint-url", d.s3_url],
                          capture_output=True, text=True, env=e, timeout=timeout)


@pytest.fixture(scope="module")
def bucket(s3_client):
    s3_client.create_bucket(Bucket=BUCKET)
    return BUCKET


def sha(b):
    return hashlib.sha256(b).hexdigest()


def test_cp_up_and_down(s3_daemon, s3_client, bucket, tmp_path):
    src = tmp_path / "model.bin"
    data = os.urandom(21 * MiB + 3)
    src.write_bytes(data)
    r = cp(s3_daemon, str(src), "s3://%s/up/" % bucket, "--jobs", "4")
    assert r.returncode == 0, r.stderr
    assert "upload: %s to s3://%s/up/model.bin" % (src, bucket) in r.stdout
    got = s3_client.get_object(Bucket=bucket, Key="up/model.bin")
    assert got["ETag"].endswith('-3"') and sha(got["Body"].read()) == sha(data)
    out = tmp_path / "down"
    out.mkdir()
    r = cp(s3_daemon, "s3://%s/up/model.bin" % bucket, str(out))
    assert r.returncode == 0, r.stderr
    assert sha((out / "model.bin").read_bytes()) == sha(data)
    assert not list(out.glob("*.openlake-tmp"))
    # an explicit file name, an empty file
    (tmp_path / "empty").write_bytes(b"")
    r = cp(s3_daemon, str(tmp_path / "empty"), "s3://%s/up/e" % bucket)
    assert r.returncode == 0, r.stderr
    r = cp(s3_daemon, "s3://%s/up/e" % bucket, str(tmp_path / "e2"))
    assert r.returncode == 0 and (tmp_path / "e2").read_bytes() == b""


def test_cp_recursive(s3_daemon, s3_client, bucket, tmp_path):
    tree = tmp_path / "tree"
    files = {"a.txt": b"alpha", "sub/b.bin": os.urandom(9 * MiB), "sub/deeper/c": b"",
             "sub/deeper/d d.txt": b"space in name"}
    for rel, body in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(body)
    r = cp(s3_daemon, str(tree), "s3://%s/tree" % bucket, "--recursive")
    assert r.returncode == 0, r.stderr
    assert "4 file(s) copied, 0 failed" in r.stdout
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="tree/")
                  ["Contents"])
    assert keys == sorted("tree/" + k for k in files)
    # a key that would escape the destination is refused, the others land
    s3_client.put_object(Bucket=bucket, Key="tree/../escape", Body=b"x")
    out = tmp_path / "out" / "copy"
    r = cp(s3_daemon, "s3://%s/tree/" % bucket, str(out), "-r")
    assert "does not map to a file below" in r.stderr
    for rel, body in files.items():
        assert (out / rel).read_bytes() == body, rel
    assert not (tmp_path / "out" / "escape").exists()
    # DST with a trailing slash (the README's `openlake cp -r s3://.../ ./step-100/`): the
    # files are named without a doubled slash
    r = cp(s3_daemon, "s3://%s/tree/" % bucket, str(tmp_path / "out2") + "/", "-r")
    assert "to %s/a.txt " % (tmp_path / "out2") in r.stdout and "out2//" not in r.stdout, r.stdout
    assert (tmp_path / "out2" / "sub" / "b.bin").read_bytes() == files["sub/b.bin"]
    # a directory without --recursive
    r = cp(s3_daemon, str(tree), "s3://%s/x/" % bucket)
    assert r.returncode == 2 and "is a directory: add --recursive" in r.stderr


def parts_done(s3_client, key):
    ups = [u for u in s3_client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
           if u["Key"] == key]
    if not ups:
        return 0
    parts = s3_client.list_parts(Bucket=BUCKET, Key=key, UploadId=ups[-1]["UploadId"])
    return len(parts.get("Parts", []))


def test_cp_resume_after_kill9(s3_daemon, s3_client, bucket, tmp_path):
    src = tmp_path / "big.bin"
    data = os.urandom(48 * MiB)
    src.write_bytes(data)
    args = [str(OPENLAKE_CLI), "cp", str(src), "s3://%s/resume/big.bin" % bucket,
            "--endpoint-url", s3_daemon.s3_url, "--part-size", "8MiB", "--jobs", "1"]
    p = subprocess.Popen(args + ["--resume", "--max-bandwidth", "6MiB"], env=aws_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: parts_done(s3_client, "resume/big.bin") >= 2 or p.poll() is not None,
                 60, "two parts uploaded")
        assert p.poll() is None, "the upload ended before the kill"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    before = parts_done(s3_client, "resume/big.bin")
    assert 2 <= before < 6
    r = subprocess.run(args + ["--resume"], env=aws_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "resumed: %d part(s) were already uploaded" % before in r.stdout
    got = s3_client.get_object(Bucket=bucket, Key="resume/big.bin")["Body"].read()
    assert sha(got) == sha(data)
    assert parts_done(s3_client, "resume/big.bin") == 0  # completed: no upload left


def test_cp_errors_name_the_fix(s3_daemon, bucket, tmp_path):
    h = subprocess.run([str(OPENLAKE_CLI), "cp", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--endpoint-url" in h.stdout and "--resume" in h.stdout
    r = subprocess.run([str(OPENLAKE_CLI), "cp", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and "give SRC and DST" in r.stderr
    r = subprocess.run([str(OPENLAKE_CLI), "cp", str(tmp_path), "s3://%s/" % bucket],
                       capture_output=True, text=True, env=aws_env())
    assert r.returncode == 2 and "no S3 endpoint" in r.stderr and "--endpoint-url" in r.stderr
    r = cp(s3_daemon, "s3://%s/absent" % bucket, str(tmp_path / "f"))
    assert r.returncode == 1 and "HTTP 404" in r.stderr and not (tmp_path / "f").exists()
    r = cp(s3_daemon, str(tmp_path / "nope"), "s3://%s/k" % bucket)
    assert r.returncode == 1 and "No such file" in r.stderr
    r = cp(s3_daemon, "a", "b")
    assert r.returncode == 2 and "must be s3://BUCKET/KEY" in r.stderr
    r = cp(s3_daemon, str(tmp_path), "s3://%s/" % bucket, "-r", "--part-size", "1MiB")
    assert r.returncode == 2 and "below S3's 5MiB minimum" in r.stderr
    (tmp_path / "g").write_bytes(b"g")
    r = cp(s3_daemon, str(tmp_path / "g"), "s3://%s/" % bucket,
           env={"AWS_SECRET_ACCESS_KEY": "wrong"})
    assert r.returncode == 1 and "HTTP 403 SignatureDoesNotMatch" in r.stderr
