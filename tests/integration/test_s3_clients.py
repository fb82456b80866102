"""Real S3 clients against the real openlaked: awscli 2.9 (/usr/bin/aws) and the awscli 1.45
first on PATH (trailers + CRC32 by default), curl --aws-sigv4, s3cmd, rclone, presigned URLs,
and the newer boto3 on the PATH python run as a subprocess. Clients that are not installed
are skipped."""

import filecmp
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ACCESS_KEY, REGION, SECRET_KEY, aws_env

MiB = 1 << 20


def run(cmd, env=None, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, env=env or aws_env(), capture_output=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s failed (%d):\nstdout: %s\nstderr: %s" % (
            " ".join(map(str, cmd)), r.returncode, r.stdout.decode(errors="replace"),
            r.stderr.decode(errors="replace")))
    return r


def path_aws():
    """The awscli first on PATH when it is not Debian's (e.g. awscli 1.45), else None."""
    a = shutil.which("aws")
    if not a or os.path.realpath(a) == "/usr/bin/aws":
        return None
    r = subprocess.run([a, "--version"], capture_output=True, timeout=60)
    if r.returncode != 0:
        return None
    return a


AWS_CLIS = [pytest.param("/usr/bin/aws", id="awscli-debian")]
AWS_CLIS.append(pytest.param("PATH", id="awscli-path"))


def resolve_aws(which):
    if which == "PATH":
        a = path_aws()
        if not a:
            pytest.skip("no non-Debian awscli on PATH")
        return a
    if not os.path.exists(which):
        pytest.skip(which + " not installed")
    return which


@pytest.fixture
def files(tmp_path):
    small = tmp_path / "small.txt"
    small.write_bytes(b"hello openlake\n" * 100)
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for i in range(24):
            f.write(hashlib.sha256(b"%d" % i).digest() * (MiB // 32))
    return small, big


@pytest.mark.parametrize("which", AWS_CLIS)
def test_awscli(s3_daemon, s3_client, tmp_path, files, which):
    """The README quick-start word for word (mb s3://demo, cp ./file s3://demo/, ls, cp back:
    same bytes), then a 24 MiB multipart upload (aws s3 cp uses 8 MiB parts above 8 MiB),
    sync both ways and a recursive rm. One bucket, a prefix per CLI: the CLIs start slowly."""
    aws = resolve_aws(which)
    _, big = files
    ep = s3_daemon.s3_url
    p = "deb" if which.startswith("/") else "path"
    env = aws_env({"AWS_ACCESS_KEY_ID": "openlakeadmin", "AWS_SECRET_ACCESS_KEY": "openlakeadmin",
                   "AWS_DEFAULT_REGION": "us-east-1"})
    f = tmp_path / "file"
    f.write_bytes(os.urandom(300_000))

    def aws_(*args, check=True):
        return run([aws, "--endpoint-url", ep, "s3", *args], env=env, cwd=tmp_path,
                   check=check, timeout=180)

    r = aws_("mb", "s3://demo", check=False)
    assert r.returncode == 0 or b"BucketAlreadyOwnedByYou" in r.stderr, r.stderr
    aws_("cp", "./file", "s3://demo/")
    aws_("cp", str(big), f"s3://demo/{p}/big.bin")
    out = aws_("ls", "s3://demo/").stdout.decode()
    assert "file" in out and f"PRE {p}/" in out
    aws_("cp", "s3://demo/file", "./file.back")
    assert (tmp_path / "file.back").read_bytes() == f.read_bytes()
    aws_("cp", f"s3://demo/{p}/big.bin", "./big.back")
    assert filecmp.cmp(big, tmp_path / "big.back", shallow=False)
    etag = s3_client.head_object(Bucket="demo", Key=f"{p}/big.bin")["ETag"]
    assert etag.endswith('-3"'), etag  # 24 MiB in 8 MiB parts
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    for i in range(5):
        (src / ("f%d" % i)).write_bytes(os.urandom(1000 + i))
    (src / "sub" / "x y+z%").write_bytes(b"odd name")
    aws_("sync", str(src), f"s3://demo/{p}/tree")
    dst = tmp_path / "tree2"
    aws_("sync", f"s3://demo/{p}/tree", str(dst))
    assert sorted(x.name for x in dst.rglob("*")) == sorted(x.name for x in src.rglob("*"))
    assert (dst / "sub" / "x y+z%").read_bytes() == b"odd name"
    aws_("rm", "--recursive", f"s3://demo/{p}/")
    left = s3_client.list_objects_v2(Bucket="demo", Prefix=p + "/")
    assert left["KeyCount"] == 0


def curl(*args, check=True):
    return run(["curl", "-sS", "--aws-sigv4", "aws:amz:%s:s3" % REGION, "--user",
                f"{ACCESS_KEY}:{SECRET_KEY}", *args], check=check)


# curl 7.88 signs an upload with the empty-payload hash unless told otherwise; S3 then needs
# the payload declared unsigned (GET/HEAD/DELETE work without it).
UNSIGNED = ["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]


def test_curl_sigv4(s3_daemon, s3_client, tmp_path):
    if not shutil.which("curl"):
        pytest.skip("no curl")
    s3_client.create_bucket(Bucket="curl-bkt")
    u = s3_daemon.s3_url + "/curl-bkt/obj%20one"
    f = tmp_path / "up"
    f.write_bytes(os.urandom(200_000))
    out = curl("-o", "/dev/null", "-w", "%{http_code}", *UNSIGNED, "-T", str(f), u).stdout
    assert out == b"200"
    # without the header the empty-payload hash is signed: the body does not match it
    assert b"XAmzContentSHA256Mismatch" in curl("-T", str(f), u + "x").stdout
    assert curl(u).stdout == f.read_bytes()
    head = curl("-I", u).stdout.decode().lower()
    assert head.startswith("http/1.1 200") and "content-length: 200000" in head
    assert '"%s"' % hashlib.md5(f.read_bytes()).hexdigest() in head
    assert curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", u).stdout == b"204"
    assert curl("-o", "/dev/null", "-w", "%{http_code}", u).stdout == b"404"
    bad = run(["curl", "-sS", "--aws-sigv4", "aws:amz:%s:s3" % REGION, "--user",
               f"{ACCESS_KEY}:wrong", u]).stdout
    assert b"SignatureDoesNotMatch" in bad


def test_presigned(s3_daemon, s3_client, tmp_path):
    from conftest import boto3_client
    s3_client.create_bucket(Bucket="presign-bkt")
    s3_client = boto3_client(s3_daemon.s3_url, signature_version="s3v4")
    body = os.urandom(50_000)
    put_url = s3_client.generate_presigned_url(
        "put_object", Params={"Bucket": "presign-bkt", "Key": "p/obj"}, ExpiresIn=300)
    f = tmp_path / "pre"
    f.write_bytes(body)
    r = run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", str(f), put_url])
    assert r.stdout == b"200"
    get_url = s3_client.generate_presigned_url(
        "get_object", Params={"Bucket": "presign-bkt", "Key": "p/obj"}, ExpiresIn=300)
    assert run(["curl", "-sS", get_url]).stdout == body
    tampered = get_url.replace("p/obj", "p/other")
    assert b"SignatureDoesNotMatch" in run(["curl", "-sS", tampered]).stdout
    expired = s3_client.generate_presigned_url(
        "get_object", Params={"Bucket": "presign-bkt", "Key": "p/obj"}, ExpiresIn=1)
    import time
    time.sleep(2.1)
    r = run(["curl", "-sS", "-w", "%{http_code}", expired]).stdout
    assert r.endswith(b"403") and b"AccessDenied" in r


def test_signature_v2(s3_daemon, s3_client, tmp_path):
    """boto3 signing with Signature Version 2 ("s3"), and the V2 presigned URLs boto3 makes by
    default for a custom endpoint: PUT with metadata and a key to encode, GET, HEAD, DELETE, a
    listing; a wrong secret, tampered and expired URLs refused with S3's errors."""
    from botocore.exceptions import ClientError
    from conftest import boto3_client
    v2 = boto3_client(s3_daemon.s3_url, signature_version="s3")
    v2.create_bucket(Bucket="v2-bkt")
    body = os.urandom(70_000)
    v2.put_object(Bucket="v2-bkt", Key="a b+c", Body=body, Metadata={"who": "v2"},
                  ContentType="application/x-test")
    got = v2.get_object(Bucket="v2-bkt", Key="a b+c")
    assert got["Body"].read() == body and got["Metadata"] == {"who": "v2"}
    assert [o["Key"] for o in v2.list_objects(Bucket="v2-bkt")["Contents"]] == ["a b+c"]
    # (botocore's V2 signer puts an operation's own query, "?uploads", "?acl", twice in what
    # it signs for sub-resource operations, which AWS's V2 rules do not: those are left to V4)
    v2.put_object(Bucket="v2-bkt", Key="mpu", Body=b"x" * 1000)
    assert v2.head_object(Bucket="v2-bkt", Key="mpu")["ContentLength"] == 1000
    v2.delete_object(Bucket="v2-bkt", Key="mpu")
    assert [o["Key"] for o in s3_client.list_objects_v2(Bucket="v2-bkt")["Contents"]] == \
        ["a b+c"]
    v2.put_object(Bucket="v2-bkt", Key="mpu", Body=b"y")
    # a wrong secret: SignatureDoesNotMatch, as S3 answers
    import boto3
    from botocore.config import Config
    bad = boto3.client("s3", endpoint_url=s3_daemon.s3_url, aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key="wrong", region_name=REGION,
                       config=Config(s3={"addressing_style": "path"}, signature_version="s3",
                                     retries={"max_attempts": 1}))
    with pytest.raises(ClientError) as e:
        bad.get_object(Bucket="v2-bkt", Key="mpu")
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    # boto3's default presigned URL here is V2 (AWSAccessKeyId, Signature, Expires)
    url = boto3_client(s3_daemon.s3_url).generate_presigned_url(
        "get_object", Params={"Bucket": "v2-bkt", "Key": "a b+c"}, ExpiresIn=300)
    assert "AWSAccessKeyId=" in url and "Signature=" in url, url
    assert run(["curl", "-sS", url]).stdout == body
    r = run(["curl", "-sS", url.replace("a%20b", "a%20x")]).stdout
    assert b"SignatureDoesNotMatch" in r, r
    expired = boto3_client(s3_daemon.s3_url).generate_presigned_url(
        "get_object", Params={"Bucket": "v2-bkt", "Key": "a b+c"}, ExpiresIn=-10)
    r = run(["curl", "-sS", "-w", "%{http_code}", expired]).stdout
    assert r.endswith(b"403") and b"AccessDenied" in r, r


def test_s3cmd(s3_daemon, tmp_path):
    if not shutil.which("s3cmd"):
        pytest.skip("no s3cmd")
    hostport = s3_daemon.s3_url.split("//")[1]
    cfg = tmp_path / "s3cfg"
    cfg.write_text(textwrap.dedent(f"""\
        [default]
        access_key = {ACCESS_KEY}
        secret_key = {SECRET_KEY}
        host_base = {hostport}
        host_bucket = {hostport}
        use_https = False
        signature_v2 = False
        bucket_location = {REGION}
        """))
    s = ["s3cmd", "-c", str(cfg)]
    f = tmp_path / "s3cmd.bin"
    f.write_bytes(os.urandom(123_456))
    run(s + ["mb", "s3://s3cmd-bkt"])
    run(s + ["put", str(f), "s3://s3cmd-bkt/a/b.bin"])
    assert b"s3://s3cmd-bkt/a/b.bin" in run(s + ["ls", "--recursive", "s3://s3cmd-bkt"]).stdout
    run(s + ["get", "s3://s3cmd-bkt/a/b.bin", str(tmp_path / "got")])
    assert (tmp_path / "got").read_bytes() == f.read_bytes()
    run(s + ["del", "s3://s3cmd-bkt/a/b.bin"])
    run(s + ["rb", "s3://s3cmd-bkt"])


def test_rclone(s3_daemon, tmp_path):
    if not shutil.which("rclone"):
        pytest.skip("no rclone")
    cfg = tmp_path / "rclone.conf"
    cfg.write_text(textwrap.dedent(f"""\
        [ol]
        type = s3
        provider = Other
        access_key_id = {ACCESS_KEY}
        secret_access_key = {SECRET_KEY}
        endpoint = {s3_daemon.s3_url}
        region = {REGION}
        force_path_style = true
        """))
    rc = ["rclone", "--config", str(cfg), "--low-level-retries", "1", "--retries", "1"]
    env = {k: v for k, v in aws_env().items() if k != "AWS_CA_BUNDLE"}
    src = tmp_path / "rsrc"
    (src / "d").mkdir(parents=True)
    for i in range(4):
        (src / "d" / ("f%d" % i)).write_bytes(os.urandom(10_000 * (i + 1)))
    (src / "big").write_bytes(os.urandom(9 * MiB))
    run(rc + ["mkdir", "ol:rclone-bkt"], env=env)
    run(rc + ["copy", str(src), "ol:rclone-bkt/x"], env=env, timeout=180)
    run(rc + ["check", str(src), "ol:rclone-bkt/x"], env=env, timeout=180)
    out = run(rc + ["ls", "ol:rclone-bkt"], env=env).stdout.decode()
    assert "x/d/f3" in out and "x/big" in out
    assert run(rc + ["cat", "ol:rclone-bkt/x/d/f0"], env=env).stdout == \
        (src / "d" / "f0").read_bytes()
    run(rc + ["purge", "ol:rclone-bkt"], env=env)


NEW_BOTO = r'''
import hashlib, io, os, sys
import boto3
from botocore.config import Config
url = sys.argv[1]
c = boto3.client("s3", endpoint_url=url, aws_access_key_id="%s",
                 aws_secret_access_key="%s", region_name="%s",
                 config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
c.create_bucket(Bucket="newboto")
body = os.urandom(300000)
r = c.put_object(Bucket="newboto", Key="k", Body=body)
assert r["ETag"] == '"%%s"' %% hashlib.md5(body).hexdigest(), r
g = c.get_object(Bucket="newboto", Key="k", ChecksumMode="ENABLED")
assert g["Body"].read() == body
assert g.get("ChecksumCRC32"), g
c.put_object(Bucket="newboto", Key="sha", Body=b"x" * 1000, ChecksumAlgorithm="SHA256")
big = os.urandom(12 << 20)
c.upload_fileobj(io.BytesIO(big), "newboto", "big")
out = io.BytesIO()
c.download_fileobj("newboto", "big", out)
assert out.getvalue() == big
r = c.delete_objects(Bucket="newboto", Delete={"Objects": [{"Key": "k"}, {"Key": "big"},
                                                           {"Key": "sha"}]})
assert len(r["Deleted"]) == 3, r
c.delete_bucket(Bucket="newboto")
print("NEWBOTO-OK", boto3.__version__)
''' % (ACCESS_KEY, SECRET_KEY, REGION)


def test_new_boto3_subprocess(s3_daemon, tmp_path):
    py = shutil.which("python3")
    if not py or os.path.realpath(py).startswith("/usr/bin"):
        pytest.skip("no non-Debian python3 on PATH")
    if subprocess.run([py, "-c", "import boto3"], capture_output=True).returncode != 0:
        pytest.skip(py + " has no boto3")
    script = tmp_path / "newboto.py"
    script.write_text(NEW_BOTO)
    r = run([py, str(script), s3_daemon.s3_url], timeout=180)
    assert b"NEWBOTO-OK" in r.stdout
