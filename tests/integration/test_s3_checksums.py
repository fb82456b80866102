"""Flexible checksums (x-amz-checksum-*) on the real openlaked with boto3: PUT with each
algorithm (values computed here independently: zlib, crc32c from a table, hashlib), returned on
GET/HEAD with x-amz-checksum-mode: ENABLED and by GetObjectAttributes, BadDigest on a wrong
value (nothing stored), and multipart: ChecksumAlgorithm on create, per-part checksums (sent or
computed), ListParts, part checksums checked at complete, the composite "BASE64-N"."""

import base64
import hashlib
import http.client
import os
import zlib

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, SECRET_KEY

BUCKET = "cksum"
MiB = 1 << 20


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def raw_checksum(alg, data):
    if alg == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    if alg == "CRC32C":
        return crc32c(data).to_bytes(4, "big")
    return hashlib.new(alg.lower(), data).digest()


def b64(raw):
    return base64.b64encode(raw).decode()


@pytest.fixture(scope="module")
def s3(s3_client):
    s3_client.create_bucket(Bucket=BUCKET)
    return s3_client


def status_of(e):
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def code_of(e):
    return e.value.response["Error"]["Code"]


ALGS = ["CRC32", "CRC32C", "SHA1", "SHA256"]


@pytest.mark.parametrize("alg", ALGS)
def test_put_checksum_round_trip(s3, alg):
    data = os.urandom(70_001 if alg != "CRC32C" else 9_001)  # crc32c in Python is slow
    want = b64(raw_checksum(alg, data))
    key = "ck-" + alg
    r = s3.put_object(Bucket=BUCKET, Key=key, Body=data, ChecksumAlgorithm=alg)
    assert r["Checksum" + alg] == want
    g = s3.get_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert g["Checksum" + alg] == want and g["Body"].read() == data
    h = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert h["Checksum" + alg] == want
    assert "Checksum" + alg not in s3.head_object(Bucket=BUCKET, Key=key)  # only when asked
    a = s3.get_object_attributes(Bucket=BUCKET, Key=key, ObjectAttributes=["Checksum"])
    assert a["Checksum"]["Checksum" + alg] == want


def signed_put(d, key, body, headers):
    url = "%s/%s/%s" % (d.s3_url, BUCKET, key)
    req = AWSRequest(method="PUT", url=url, data=body, headers=headers)
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=60)
    try:
        c.request("PUT", "/%s/%s" % (BUCKET, key), body=body, headers=dict(req.headers.items()))
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.mark.parametrize("alg", ALGS)
def test_bad_digest_stores_nothing(s3_daemon, s3, alg):
    data = b"the body" * 1000
    wrong = b64(raw_checksum(alg, data + b"!"))
    st, body = signed_put(s3_daemon, "bad-" + alg, data,
                          {"x-amz-checksum-" + alg.lower(): wrong})
    assert st == 400 and b"<Code>BadDigest</Code>" in body, body
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=BUCKET, Key="bad-" + alg)
    assert status_of(e) == 404
    # a value of the wrong length is InvalidRequest, two checksum headers too
    st, body = signed_put(s3_daemon, "bad-" + alg, data, {"x-amz-checksum-" + alg.lower():
                                                          b64(b"xy")})
    assert st == 400, body
    st, body = signed_put(s3_daemon, "bad-" + alg, data, {
        "x-amz-checksum-crc32": b64(raw_checksum("CRC32", data)),
        "x-amz-checksum-sha256": b64(raw_checksum("SHA256", data))})
    assert st == 400 and b"InvalidRequest" in body, body


@pytest.mark.parametrize("alg", ["SHA256", "CRC32"])
def test_multipart_composite(s3, alg):
    key = "mp-" + alg
    parts = [os.urandom(5 * MiB), os.urandom(5 * MiB + 1), os.urandom(1234)]
    up = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm=alg)
    assert up["ChecksumAlgorithm"] == alg
    done = []
    for n, p in enumerate(parts, 1):
        kw = {"ChecksumAlgorithm": alg} if n != 2 else {}  # part 2: the server computes it
        r = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up["UploadId"], PartNumber=n,
                           Body=p, **kw)
        assert r["Checksum" + alg] == b64(raw_checksum(alg, p))
        done.append({"PartNumber": n, "ETag": r["ETag"], "Checksum" + alg: r["Checksum" + alg]})
    listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=up["UploadId"])["Parts"]
    assert [p["Checksum" + alg] for p in listed] == [d["Checksum" + alg] for d in done]
    assert [p["ETag"] for p in listed] == [d["ETag"] for d in done]
    # a wrong part checksum at complete: InvalidPart, the upload stays
    bad = [dict(d) for d in done]
    bad[0]["Checksum" + alg] = b64(raw_checksum(alg, b"other"))
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": bad})
    assert code_of(e) == "InvalidPart"
    r = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": done})
    comp = hashlib.sha256 if alg == "SHA256" else None
    raws = b"".join(raw_checksum(alg, p) for p in parts)
    want = b64(comp(raws).digest() if comp else raw_checksum(alg, raws)) + "-3"
    assert r["Checksum" + alg] == want
    h = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert h["Checksum" + alg] == want
    a = s3.get_object_attributes(Bucket=BUCKET, Key=key,
                                 ObjectAttributes=["Checksum", "ObjectParts"])
    assert a["Checksum"]["Checksum" + alg] == want
    assert [p["Checksum" + alg] for p in a["ObjectParts"]["Parts"]] == \
        [b64(raw_checksum(alg, p)) for p in parts]
    a = s3.get_object_attributes(Bucket=BUCKET, Key=key, ObjectAttributes=["ObjectParts"],
                                 PartNumberMarker=1, MaxParts=1)
    assert [(p["PartNumber"], p["Checksum" + alg]) for p in a["ObjectParts"]["Parts"]] == \
        [(2, b64(raw_checksum(alg, parts[1])))]
    g = s3.get_object(Bucket=BUCKET, Key=key)
    assert g["Body"].read() == b"".join(parts)


def test_part_checksum_type_mismatch(s3):
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="mm", ChecksumAlgorithm="SHA256")
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=BUCKET, Key="mm", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"x" * 100, ChecksumAlgorithm="CRC32")
    assert status_of(e) == 400 and code_of(e) == "InvalidRequest"
    assert s3.list_parts(Bucket=BUCKET, Key="mm", UploadId=up["UploadId"]).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=BUCKET, Key="mm", UploadId=up["UploadId"])


def test_multipart_without_algorithm_has_no_composite(s3):
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="plainmp")
    r = s3.upload_part(Bucket=BUCKET, Key="plainmp", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"y" * 1000)
    done = s3.complete_multipart_upload(Bucket=BUCKET, Key="plainmp", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": [
                                            {"PartNumber": 1, "ETag": r["ETag"]}]})
    assert not [k for k in done if k.startswith("Checksum")]
    h = s3.head_object(Bucket=BUCKET, Key="plainmp", ChecksumMode="ENABLED")
    assert not [k for k in h if k.startswith("Checksum")]


def test_upload_part_copy_gets_the_upload_checksum(s3):
    src = os.urandom(6 * MiB + 5)
    s3.put_object(Bucket=BUCKET, Key="copysrc", Body=src)
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="mpcopy", ChecksumAlgorithm="SHA256")
    r1 = s3.upload_part_copy(Bucket=BUCKET, Key="mpcopy", UploadId=up["UploadId"],
                             PartNumber=1, CopySource=f"{BUCKET}/copysrc",
                             CopySourceRange="bytes=0-%d" % (5 * MiB - 1))["CopyPartResult"]
    assert r1["ChecksumSHA256"] == b64(hashlib.sha256(src[:5 * MiB]).digest())
    tail = b"tail of the object"
    r2 = s3.upload_part(Bucket=BUCKET, Key="mpcopy", UploadId=up["UploadId"], PartNumber=2,
                        Body=tail, ChecksumAlgorithm="SHA256")
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key="mpcopy", UploadId=up["UploadId"], MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": r1["ETag"], "ChecksumSHA256": r1["ChecksumSHA256"]},
            {"PartNumber": 2, "ETag": r2["ETag"], "ChecksumSHA256": r2["ChecksumSHA256"]}]})
    want = b64(hashlib.sha256(hashlib.sha256(src[:5 * MiB]).digest() +
                              hashlib.sha256(tail).digest()).digest()) + "-2"
    assert done["ChecksumSHA256"] == want
    assert s3.get_object(Bucket=BUCKET, Key="mpcopy")["Body"].read() == src[:5 * MiB] + tail


def test_checksum_of_an_encrypted_object_is_of_its_plaintext(openlaked, tmp_path):
    """SSE-S3 and a checksum on one PUT: the checksum is the plaintext's (what the client
    sent), stored and returned; a wrong one is BadDigest and nothing is stored."""
    from conftest import boto3_client
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra='[s3]\nsse_master_key_file = "%s"\n' % key)
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket=BUCKET)
    data = os.urandom(300_000)
    r = c.put_object(Bucket=BUCKET, Key="enc", Body=data, ChecksumAlgorithm="SHA256",
                     ServerSideEncryption="AES256")
    assert r["ChecksumSHA256"] == b64(hashlib.sha256(data).digest())
    g = c.get_object(Bucket=BUCKET, Key="enc", ChecksumMode="ENABLED")
    assert g["ChecksumSHA256"] == r["ChecksumSHA256"] and g["Body"].read() == data
    st, body = signed_put(d, "enc2", data, {"x-amz-server-side-encryption": "AES256",
                                            "x-amz-checksum-sha256":
                                            b64(hashlib.sha256(b"x").digest())})
    assert st == 400 and b"BadDigest" in body, body
    with pytest.raises(ClientError) as e:
        c.head_object(Bucket=BUCKET, Key="enc2")
    assert status_of(e) == 404
