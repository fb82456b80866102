"""SSE-KMS (x-amz-server-side-encryption: aws:kms) with the daemon's local KMS on the real
openlaked: the key ids of [s3] sse_kms_keys, each key derived from the SSE-S3 master key.
boto3, awscli and a browser POST form; the AWS answers for a key id the KMS does not hold
(400 KMS.NotFoundException), a key id without aws:kms (400 InvalidArgument) and aws:kms on a
GET (400); multipart, copies into and out of SSE-KMS, a bucket default with a key id, a byte
scan of the drives for the plaintext, and a restart whose config dropped a key id (its objects
still read, new writes under it refused) or the master key (the daemon refuses to start)."""

import os
import shutil
import subprocess

import pytest
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, Daemon, aws_env, boto3_client
from test_s3_sse import code_of, pattern, scan, sse_extra, status_of

MiB = 1 << 20
B = "kms"
KEYS = '["testkey-1", "testkey-2"]'


def kms_extra(key, keys=KEYS):
    return sse_extra(key) + f"sse_kms_keys = {keys}\n"


def kms_of(resp):
    return resp["ServerSideEncryption"], resp.get("SSEKMSKeyId")


@pytest.fixture
def kms(openlaked, tmp_path):
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=kms_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=B)
    return d, s3, key


def test_put_get_head_copy_multipart_and_errors(kms):
    d, s3, _ = kms
    body = pattern(3 * MiB + 17, b"KMS-PLAINTEXT-01")
    r = s3.put_object(Bucket=B, Key="k2", Body=body, ServerSideEncryption="aws:kms",
                      SSEKMSKeyId="testkey-2")
    assert kms_of(r) == ("aws:kms", "testkey-2")
    g = s3.get_object(Bucket=B, Key="k2")
    assert kms_of(g) == ("aws:kms", "testkey-2") and g["Body"].read() == body
    g = s3.get_object(Bucket=B, Key="k2", Range="bytes=65530-65545")
    assert g["Body"].read() == body[65530:65546]
    assert kms_of(s3.head_object(Bucket=B, Key="k2")) == ("aws:kms", "testkey-2")
    # no key id: the first of sse_kms_keys; small (inline) objects too
    r = s3.put_object(Bucket=B, Key="dflt", Body=b"tiny", ServerSideEncryption="aws:kms")
    assert kms_of(r) == ("aws:kms", "testkey-1")
    assert s3.get_object(Bucket=B, Key="dflt")["Body"].read() == b"tiny"

    # a key id the KMS does not hold; a key id without aws:kms; aws:kms on a GET
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=B, Key="bad", Body=b"x", ServerSideEncryption="aws:kms",
                      SSEKMSKeyId="nokey")
    assert status_of(e) == 400 and code_of(e) == "KMS.NotFoundException"
    assert "nokey" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=B, Key="bad", Body=b"x", SSEKMSKeyId="testkey-1")
    assert status_of(e) == 400 and code_of(e) == "InvalidArgument"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=B, Key="bad")
    assert status_of(e) == 404, "nothing stored by either"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=B, Key="bad", Body=b"x", ServerSideEncryption="aws:kms",
                      SSECustomerAlgorithm="AES256", SSECustomerKey="k" * 32)
    assert status_of(e) == 400 and code_of(e) == "InvalidArgument"

    # multipart: the upload's key serves every part, the answers name it
    parts = [os.urandom(5 * MiB + 3), os.urandom(70_001)]
    up = s3.create_multipart_upload(Bucket=B, Key="mp", ServerSideEncryption="aws:kms",
                                    SSEKMSKeyId="testkey-2")
    assert kms_of(up) == ("aws:kms", "testkey-2")
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=B, Key="mp", UploadId=up["UploadId"], PartNumber=i, Body=p)
        assert kms_of(r) == ("aws:kms", "testkey-2")
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    r = s3.complete_multipart_upload(Bucket=B, Key="mp", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": done})
    assert kms_of(r) == ("aws:kms", "testkey-2")
    g = s3.get_object(Bucket=B, Key="mp")
    assert g["Body"].read() == b"".join(parts) and kms_of(g) == ("aws:kms", "testkey-2")

    # copies: SSE-KMS -> SSE-S3, plain -> SSE-KMS (another key)
    s3.copy_object(Bucket=B, Key="to-s3", CopySource=f"{B}/k2", ServerSideEncryption="AES256")
    g = s3.get_object(Bucket=B, Key="to-s3")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == body
    s3.put_object(Bucket=B, Key="plain", Body=body)
    r = s3.copy_object(Bucket=B, Key="to-kms", CopySource=f"{B}/plain",
                       ServerSideEncryption="aws:kms", SSEKMSKeyId="testkey-1")
    assert kms_of(r) == ("aws:kms", "testkey-1")
    assert s3.get_object(Bucket=B, Key="to-kms")["Body"].read() == body

    # a GET that names aws:kms is refused, as AWS does (boto3 will not send it: raw)
    from test_s3_common import raw
    st, _, resp = raw(d.s3_url, "GET", f"/{B}/k2", body=None,
                      headers={"x-amz-server-side-encryption": "aws:kms"})
    assert st == 400 and b"InvalidArgument" in resp, resp


def test_bucket_default_and_no_plaintext_on_disk(kms):
    d, s3, _ = kms
    b = "kms-default"
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                    "KMSMasterKeyID": "nokey"}}]})
    assert status_of(e) == 400 and code_of(e) == "KMS.NotFoundException"
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                "KMSMasterKeyID": "testkey-2"}}]})
    rule = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms",
                                                          "KMSMasterKeyID": "testkey-2"}
    secret = pattern(2 * MiB, b"KMS-SECRET-TEXT!")
    r = s3.put_object(Bucket=b, Key="o", Body=secret)  # no header: the bucket's default
    assert kms_of(r) == ("aws:kms", "testkey-2")
    r = s3.put_object(Bucket=b, Key="o1", Body=secret, SSEKMSKeyId="testkey-1",
                      ServerSideEncryption="aws:kms")  # the request's key wins
    assert kms_of(r) == ("aws:kms", "testkey-1")
    d.stop()
    found = scan(d, [secret[i:i + 32] for i in range(0, len(secret), 256 * 1024)] +
                 [b"KMS-SECRET-TEXT!"])
    assert not any(found.values()), {n[:16]: f for n, f in found.items() if f}
    d.start()
    s3 = boto3_client(d.s3_url)
    assert s3.get_object(Bucket=b, Key="o")["Body"].read() == secret
    assert s3.get_object(Bucket=b, Key="o1")["Body"].read() == secret


def test_a_key_id_dropped_from_the_config(openlaked, tmp_path):
    """Objects stay readable after their key id leaves sse_kms_keys (the key is derived from
    the master key); new writes under it are refused. KMS keys without a master key, or a key
    id that is not one, stop the daemon at its start, saying why."""
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=kms_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=B)
    s3.put_object(Bucket=B, Key="o", Body=b"under key 2", ServerSideEncryption="aws:kms",
                  SSEKMSKeyId="testkey-2")
    d.stop()
    d.config.write_text(d.config.read_text().replace(KEYS, '["testkey-1"]'))
    d.start()
    s3 = boto3_client(d.s3_url)
    g = s3.get_object(Bucket=B, Key="o")
    assert g["Body"].read() == b"under key 2" and kms_of(g) == ("aws:kms", "testkey-2")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=B, Key="o2", Body=b"x", ServerSideEncryption="aws:kms",
                      SSEKMSKeyId="testkey-2")
    assert code_of(e) == "KMS.NotFoundException"
    d.stop()

    root = tmp_path / "bad"
    root.mkdir()
    for extra, what in (("[s3]\nsse_kms_keys = [\"k\"]\n", "needs [s3] sse_master_key_file"),
                        (kms_extra(key, '["a b"]'), "is not a key id")):
        bad = Daemon(root, extra=extra)
        with pytest.raises(RuntimeError):
            bad.start(timeout=10)
        assert bad.proc.poll() is not None and bad.proc.returncode != 0
        assert what in bad.log(), bad.log()[-2000:]
        bad.cleanup()
        bad.log_path.unlink()


def test_awscli_and_post_form(kms, tmp_path):
    d, s3, _ = kms
    if shutil.which("aws"):
        src = tmp_path / "f"
        src.write_bytes(pattern(MiB + 5))
        out = subprocess.run(["aws", "s3", "cp", str(src), f"s3://{B}/cli", "--sse", "aws:kms",
                              "--sse-kms-key-id", "testkey-2", "--endpoint-url", d.s3_url],
                             env=aws_env(), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert kms_of(s3.head_object(Bucket=B, Key="cli")) == ("aws:kms", "testkey-2")
        back = tmp_path / "back"
        out = subprocess.run(["aws", "s3", "cp", f"s3://{B}/cli", str(back), "--endpoint-url",
                              d.s3_url], env=aws_env(), capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0 and back.read_bytes() == src.read_bytes(), out.stderr
    if shutil.which("curl"):
        from test_s3_post import post, signed_fields
        base = [{"bucket": B}, ["starts-with", "$key", ""]]
        enc = {"x-amz-server-side-encryption": "aws:kms",
               "x-amz-server-side-encryption-aws-kms-key-id": "testkey-2"}
        f = signed_fields(ACCESS_KEY, SECRET_KEY, base + [{k: v} for k, v in enc.items()])
        st, h, body = post(d, B, dict(key="posted", **enc, **f), b"posted under kms")
        assert st == 204, body
        assert h.get("x-amz-server-side-encryption") == "aws:kms"
        assert h.get("x-amz-server-side-encryption-aws-kms-key-id") == "testkey-2"
        g = s3.get_object(Bucket=B, Key="posted")
        assert kms_of(g) == ("aws:kms", "testkey-2") and g["Body"].read() == b"posted under kms"
