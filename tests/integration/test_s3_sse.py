"""Server-side encryption at rest on the real openlaked: SSE-S3 (x-amz-server-side-encryption:
AES256, a master key from [s3] sse_master_key_file) and SSE-C (the customer's key in headers),
with boto3, awscli and rclone. Round trips of sizes around the 64 KiB encryption block, ranged
GETs across block and part edges, multipart, copies between modes, bucket default encryption,
the AWS errors for missing/wrong keys and aws:kms, a byte scan of every drive proving no
plaintext (nor the customer key) lands on disk, a restart with another master key, kill -9
during encrypted PUTs, and heal of encrypted objects after a wiped drive."""

import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import textwrap
import threading

import pytest
from botocore.exceptions import ClientError

from conftest import (OPENLAKE_CLI, Daemon, aws_env, boto3_client, wait_for)

MiB = 1 << 20
BLOCK = 64 * 1024
BUCKET = "sse"


def sse_extra(key_path, allow_http=True):
    return textwrap.dedent(f"""\
        [s3]
        sse_master_key_file = "{key_path}"
        sse_c_allow_http = {"true" if allow_http else "false"}
        """)


@pytest.fixture(scope="module")
def sse_daemon():
    root = tempfile.mkdtemp(prefix="openlake-sse-")
    key = os.path.join(root, "master.key")
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    node = os.path.join(root, "node")
    os.mkdir(node)
    d = Daemon(node, extra=sse_extra(key)).start()
    yield d
    d.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def s3(sse_daemon):
    c = boto3_client(sse_daemon.s3_url)
    c.create_bucket(Bucket=BUCKET)
    return c


def code_of(e):
    return e.value.response["Error"]["Code"]


def status_of(e):
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def ssec(key):
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def ssec_src(key):
    return {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": key}


def key_md5(key):
    return base64.b64encode(hashlib.md5(key).digest()).decode()


def pattern(n, tag=b"PLAINTEXT-MARK"):
    """n bytes of a distinctive text, a counter in every 32 bytes (no two lines alike)."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += tag[:16].ljust(16, b"-") + b"-%014d\n" % i
        i += 1
    return bytes(out[:n])


SIZES = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 3 * MiB + 17]


def ranges_for(n):
    out = [(0, 0), (BLOCK - 1, BLOCK), (BLOCK - 10, 2 * BLOCK + 10), (1, n - 2), (n - 1, n - 1),
           (2 * BLOCK, 2 * BLOCK + BLOCK - 1), (100_000, 2_000_000)]
    return [(a, min(b, n - 1)) for a, b in out if 0 <= a <= min(b, n - 1)]


@pytest.mark.parametrize("size", SIZES)
def test_sse_s3_round_trip_and_ranges(s3, size):
    data = os.urandom(size)
    key = "s3-%d" % size
    r = s3.put_object(Bucket=BUCKET, Key=key, Body=data, ServerSideEncryption="AES256")
    assert r["ServerSideEncryption"] == "AES256"
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()  # AWS: MD5 for SSE-S3 PUT
    g = s3.get_object(Bucket=BUCKET, Key=key)
    assert g["ServerSideEncryption"] == "AES256"
    assert g["ContentLength"] == size and g["Body"].read() == data
    h = s3.head_object(Bucket=BUCKET, Key=key)
    assert h["ContentLength"] == size and h["ServerSideEncryption"] == "AES256"
    for a, b in ranges_for(size):
        g = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=%d-%d" % (a, b))
        assert g["ContentRange"] == "bytes %d-%d/%d" % (a, b, size)
        assert g["Body"].read() == data[a:b + 1], (a, b)
    if size:
        g = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=-%d" % min(size, 70000))
        assert g["Body"].read() == data[-min(size, 70000):]
    listed = {o["Key"]: o["Size"] for o in
              s3.list_objects_v2(Bucket=BUCKET, Prefix=key)["Contents"]}
    assert listed[key] == size  # the plaintext size, not the stored one
    attrs = s3.get_object_attributes(Bucket=BUCKET, Key=key, ObjectAttributes=["ObjectSize"])
    assert attrs["ObjectSize"] == size


def test_sse_c_round_trip_and_key_errors(s3):
    k1, k2 = os.urandom(32), os.urandom(32)
    data = os.urandom(5 * BLOCK + 123)
    r = s3.put_object(Bucket=BUCKET, Key="c1", Body=data, **ssec(k1))
    assert r["SSECustomerAlgorithm"] == "AES256" and r["SSECustomerKeyMD5"] == key_md5(k1)
    assert r["ETag"] != '"%s"' % hashlib.md5(data).hexdigest()  # AWS: not the MD5 for SSE-C
    g = s3.get_object(Bucket=BUCKET, Key="c1", **ssec(k1))
    assert g["Body"].read() == data and g["SSECustomerKeyMD5"] == key_md5(k1)
    g = s3.get_object(Bucket=BUCKET, Key="c1", Range="bytes=65530-200000", **ssec(k1))
    assert g["Body"].read() == data[65530:200001]
    assert s3.head_object(Bucket=BUCKET, Key="c1", **ssec(k1))["ContentLength"] == len(data)
    # missing key: 400 InvalidRequest; wrong key: 403; both on GET, ranged GET and HEAD
    for call in (lambda **kw: s3.get_object(Bucket=BUCKET, Key="c1", **kw),
                 lambda **kw: s3.get_object(Bucket=BUCKET, Key="c1", Range="bytes=0-9", **kw),
                 lambda **kw: s3.head_object(Bucket=BUCKET, Key="c1", **kw)):
        with pytest.raises(ClientError) as e:
            call()
        assert status_of(e) == 400
        with pytest.raises(ClientError) as e:
            call(**ssec(k2))
        assert status_of(e) == 403
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="c1")
    assert code_of(e) == "InvalidRequest"
    etag = s3.head_object(Bucket=BUCKET, Key="c1", **ssec(k1))["ETag"]
    with pytest.raises(ClientError) as e:  # no 304 without the key either
        s3.get_object(Bucket=BUCKET, Key="c1", IfNoneMatch=etag)
    assert status_of(e) == 400
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="c1", IfNoneMatch=etag, **ssec(k1))
    assert status_of(e) == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="c1", **ssec(k2))
    assert code_of(e) == "AccessDenied"
    # an SSE-C key for an object that has none: 400
    s3.put_object(Bucket=BUCKET, Key="plain1", Body=b"plain")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="plain1", **ssec(k1))
    assert status_of(e) == 400 and code_of(e) == "InvalidRequest"
    # the listing shows the plaintext size without any key
    listed = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=BUCKET,
                                                               Prefix="c1")["Contents"]}
    assert listed["c1"] == len(data)


def test_sse_c_bad_headers(sse_daemon, s3):
    # boto3 computes the key MD5 itself: bad headers are sent by hand, signed by botocore
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    import http.client

    from conftest import ACCESS_KEY, REGION, SECRET_KEY

    def put(headers):
        url = "%s/%s/badhdr" % (sse_daemon.s3_url, BUCKET)
        req = AWSRequest(method="PUT", url=url, data=b"x", headers=headers)
        S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
        c = http.client.HTTPConnection("127.0.0.1", sse_daemon.s3_port, timeout=30)
        c.request("PUT", "/%s/badhdr" % BUCKET, body=b"x", headers=dict(req.headers.items()))
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body

    k = os.urandom(32)
    good = {"x-amz-server-side-encryption-customer-algorithm": "AES256",
            "x-amz-server-side-encryption-customer-key": base64.b64encode(k).decode(),
            "x-amz-server-side-encryption-customer-key-MD5": key_md5(k)}
    cases = [
        (dict(good, **{"x-amz-server-side-encryption-customer-key-MD5": key_md5(b"y" * 32)}),
         400, b"InvalidArgument"),
        (dict(good, **{"x-amz-server-side-encryption-customer-key":
                       base64.b64encode(b"short").decode(),
                       "x-amz-server-side-encryption-customer-key-MD5": key_md5(b"short")}),
         400, b"InvalidArgument"),
        (dict(good, **{"x-amz-server-side-encryption-customer-algorithm": "AES128"}),
         400, b"InvalidEncryptionAlgorithmError"),
        ({k_: v for k_, v in good.items() if not k_.endswith("MD5")}, 400, b"InvalidArgument"),
        (dict(good, **{"x-amz-server-side-encryption": "AES256"}), 400, b"InvalidArgument"),
        ({"x-amz-server-side-encryption": "AES512"}, 400, b"InvalidArgument"),
        ({"x-amz-server-side-encryption": "aws:kms"}, 501, b"NotImplemented"),
        ({"x-amz-server-side-encryption": "aws:kms:dsse"}, 501, b"NotImplemented"),
        ({"x-amz-server-side-encryption": "AES256",
          "x-amz-server-side-encryption-bucket-key-enabled": "true"}, 501, b"NotImplemented"),
        ({"x-amz-server-side-encryption-aws-kms-key-id": "k"}, 400, b"InvalidArgument"),
    ]
    for hdrs, st, code in cases:
        status, body = put(hdrs)
        assert status == st and b"<Code>" + code + b"</Code>" in body, (hdrs, body)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=BUCKET, Key="badhdr")
    assert status_of(e) == 404  # nothing was stored by any of them
    # BucketKeyEnabled false (tools send it) is no KMS request
    status, body = put({"x-amz-server-side-encryption": "AES256",
                        "x-amz-server-side-encryption-bucket-key-enabled": "false"})
    assert status == 200, body
    assert s3.head_object(Bucket=BUCKET, Key="badhdr")["ServerSideEncryption"] == "AES256"


def test_kms_refused_with_boto3(s3):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=BUCKET, Key="kms", Body=b"x", ServerSideEncryption="aws:kms",
                      SSEKMSKeyId="alias/k")
    assert status_of(e) == 501 and code_of(e) == "NotImplemented"
    assert "aws:kms" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.put_bucket_encryption(Bucket=BUCKET, ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]})
    assert status_of(e) == 501


def test_bucket_default_encryption(s3):
    b = "sse-default"
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_encryption(Bucket=b)
    assert code_of(e) == "ServerSideEncryptionConfigurationNotFoundError"
    s3.put_object(Bucket=b, Key="before", Body=b"plain before")
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    rules = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    r = s3.put_object(Bucket=b, Key="after", Body=b"encrypted by default")
    assert r["ServerSideEncryption"] == "AES256"
    assert s3.head_object(Bucket=b, Key="after")["ServerSideEncryption"] == "AES256"
    assert "ServerSideEncryption" not in s3.head_object(Bucket=b, Key="before")
    up = s3.create_multipart_upload(Bucket=b, Key="mp")
    assert up["ServerSideEncryption"] == "AES256"
    s3.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"])
    # an explicit SSE-C request wins over the default
    k = os.urandom(32)
    s3.put_object(Bucket=b, Key="ssec", Body=b"customer", **ssec(k))
    assert s3.get_object(Bucket=b, Key="ssec", **ssec(k))["Body"].read() == b"customer"
    s3.delete_bucket_encryption(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_encryption(Bucket=b)
    assert status_of(e) == 404
    r = s3.put_object(Bucket=b, Key="later", Body=b"plain again")
    assert "ServerSideEncryption" not in r
    assert s3.get_object(Bucket=b, Key="after")["Body"].read() == b"encrypted by default"


def mpu(s3, key, parts, create_kw=None, part_kw=None, complete_kw=None):
    up = s3.create_multipart_upload(Bucket=BUCKET, Key=key, **(create_kw or {}))
    etags = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up["UploadId"], PartNumber=i,
                           Body=p, **(part_kw or {}))
        etags.append({"PartNumber": i, "ETag": r["ETag"]})
    listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=up["UploadId"])["Parts"]
    assert [p["Size"] for p in listed] == [len(p) for p in parts]
    return up, s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up["UploadId"],
                                            MultipartUpload={"Parts": etags},
                                            **(complete_kw or {}))


@pytest.mark.parametrize("mode", ["sse-s3", "sse-c"])
def test_multipart(s3, mode):
    k = os.urandom(16).hex()  # boto3 takes a str key for UploadPart (32 ASCII chars)
    parts = [os.urandom(5 * MiB + 3), os.urandom(5 * MiB), os.urandom(70_001)]
    whole = b"".join(parts)
    kw = {"ServerSideEncryption": "AES256"} if mode == "sse-s3" else ssec(k)
    part_kw = {} if mode == "sse-s3" else ssec(k)
    read_kw = {} if mode == "sse-s3" else ssec(k)
    up, done = mpu(s3, "mp-" + mode, parts, kw, part_kw, part_kw)
    assert done["ETag"].endswith('-3"')
    if mode == "sse-s3":
        assert done["ServerSideEncryption"] == "AES256"
    g = s3.get_object(Bucket=BUCKET, Key="mp-" + mode, **read_kw)
    assert g["ContentLength"] == len(whole) and g["Body"].read() == whole
    edge = len(parts[0])
    for a, b in ((edge - 100, edge + 100), (edge - 1, edge), (edge, 2 * edge - 1),
                 (edge - BLOCK, 2 * edge + 5), (len(whole) - 5, len(whole) - 1)):
        got = s3.get_object(Bucket=BUCKET, Key="mp-" + mode, Range="bytes=%d-%d" % (a, b),
                            **read_kw)["Body"].read()
        assert got == whole[a:b + 1], (a, b)
    for n, p in enumerate(parts, 1):
        g = s3.get_object(Bucket=BUCKET, Key="mp-" + mode, PartNumber=n, **read_kw)
        assert g["Body"].read() == p and g["PartsCount"] == 3
    # botocore 1.29 neither base64-encodes the key nor adds its MD5 for GetObjectAttributes:
    # give both as AWS wants them
    attr_kw = {} if mode == "sse-s3" else {
        "SSECustomerAlgorithm": "AES256", "SSECustomerKey": base64.b64encode(k.encode()).decode(),
        "SSECustomerKeyMD5": key_md5(k.encode())}
    a = s3.get_object_attributes(Bucket=BUCKET, Key="mp-" + mode,
                                 ObjectAttributes=["ObjectSize", "ObjectParts"], **attr_kw)
    assert a["ObjectSize"] == len(whole)
    assert [p["Size"] for p in a["ObjectParts"]["Parts"]] == [len(p) for p in parts]
    if mode == "sse-c":
        with pytest.raises(ClientError) as e:  # GetObjectAttributes needs the key too
            s3.get_object_attributes(Bucket=BUCKET, Key="mp-" + mode,
                                     ObjectAttributes=["ObjectSize"])
        assert status_of(e) == 400
        with pytest.raises(ClientError) as e:  # a part without the upload's key
            s3.upload_part(Bucket=BUCKET, Key="mp-" + mode, UploadId="0" * 32, PartNumber=1,
                           Body=b"x")
        up2 = s3.create_multipart_upload(Bucket=BUCKET, Key="mp-nokey", **ssec(k))
        with pytest.raises(ClientError) as e:
            s3.upload_part(Bucket=BUCKET, Key="mp-nokey", UploadId=up2["UploadId"],
                           PartNumber=1, Body=b"x")
        assert status_of(e) == 400
        with pytest.raises(ClientError) as e:
            s3.upload_part(Bucket=BUCKET, Key="mp-nokey", UploadId=up2["UploadId"],
                           PartNumber=1, Body=b"x", **ssec(os.urandom(16).hex()))
        assert status_of(e) == 403
        s3.abort_multipart_upload(Bucket=BUCKET, Key="mp-nokey", UploadId=up2["UploadId"])
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=BUCKET, Key="mp-" + mode)
        assert status_of(e) == 400


def test_copy_between_modes(s3):
    k1, k2 = os.urandom(32), os.urandom(32)
    data = os.urandom(3 * BLOCK + 11)
    s3.put_object(Bucket=BUCKET, Key="cp-plain", Body=data)
    # plain -> SSE-S3
    r = s3.copy_object(Bucket=BUCKET, Key="cp-s3", CopySource=f"{BUCKET}/cp-plain",
                       ServerSideEncryption="AES256")
    assert r["ServerSideEncryption"] == "AES256"
    assert s3.head_object(Bucket=BUCKET, Key="cp-s3")["ServerSideEncryption"] == "AES256"
    # SSE-S3 -> SSE-C
    r = s3.copy_object(Bucket=BUCKET, Key="cp-c", CopySource=f"{BUCKET}/cp-s3", **ssec(k1))
    assert r["SSECustomerKeyMD5"] == key_md5(k1)
    assert s3.get_object(Bucket=BUCKET, Key="cp-c", **ssec(k1))["Body"].read() == data
    # SSE-C source without its key: refused
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=BUCKET, Key="cp-x", CopySource=f"{BUCKET}/cp-c")
    assert status_of(e) == 400
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=BUCKET, Key="cp-x", CopySource=f"{BUCKET}/cp-c",
                       **ssec_src(k2))
    assert status_of(e) == 403
    # SSE-C -> SSE-C under another key, onto itself (a key rotation)
    s3.copy_object(Bucket=BUCKET, Key="cp-c", CopySource=f"{BUCKET}/cp-c", **ssec_src(k1),
                   **ssec(k2))
    assert s3.get_object(Bucket=BUCKET, Key="cp-c", **ssec(k2))["Body"].read() == data
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="cp-c", **ssec(k1))
    assert status_of(e) == 403
    # SSE-C -> plain: the copy is not encrypted unless asked (AWS does not inherit)
    r = s3.copy_object(Bucket=BUCKET, Key="cp-back", CopySource=f"{BUCKET}/cp-c",
                       **ssec_src(k2))
    assert "ServerSideEncryption" not in r and "SSECustomerAlgorithm" not in r
    g = s3.get_object(Bucket=BUCKET, Key="cp-back")
    assert g["Body"].read() == data and g["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    # UploadPartCopy from an SSE-C source (a range across a block edge) into an SSE-S3 upload
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="cp-mp", ServerSideEncryption="AES256")
    r = s3.upload_part_copy(Bucket=BUCKET, Key="cp-mp", UploadId=up["UploadId"], PartNumber=1,
                            CopySource=f"{BUCKET}/cp-c", CopySourceRange="bytes=100-140000",
                            **ssec_src(k2))
    s3.complete_multipart_upload(Bucket=BUCKET, Key="cp-mp", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}]})
    g = s3.get_object(Bucket=BUCKET, Key="cp-mp")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == data[100:140001]


def test_tagging_versioning_attributes_keep_working(s3):
    b = "sse-ver"
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    k = os.urandom(32)
    v1 = s3.put_object(Bucket=b, Key="o", Body=b"one" * 30000, ServerSideEncryption="AES256",
                       Tagging="a=1")["VersionId"]
    v2 = s3.put_object(Bucket=b, Key="o", Body=b"two" * 30000, **ssec(k))["VersionId"]
    s3.put_object_tagging(Bucket=b, Key="o", VersionId=v1,
                          Tagging={"TagSet": [{"Key": "t", "Value": "x"}]})
    assert s3.get_object(Bucket=b, Key="o", VersionId=v1)["Body"].read() == b"one" * 30000
    assert s3.get_object(Bucket=b, Key="o", VersionId=v2, **ssec(k))["Body"].read() == \
        b"two" * 30000
    vs = {v["VersionId"]: v["Size"] for v in s3.list_object_versions(Bucket=b)["Versions"]}
    assert vs == {v1: 90000, v2: 90000}
    s3.put_object_acl(Bucket=b, Key="o", ACL="private")  # rewrites the ciphertext as is
    assert s3.get_object(Bucket=b, Key="o", **ssec(k))["Body"].read() == b"two" * 30000


# ------------------------------------------------ what lands on disk


def drive_files(d):
    """Every file the daemon has: its drives, and its root (log, KV spill, config)."""
    for root, _, names in os.walk(d.root):
        for n in names:
            yield os.path.join(root, n)


def scan(d, needles):
    """{needle: [files holding it]} over every file of the daemon (LMDB included)."""
    found = {n: [] for n in needles}
    for p in drive_files(d):
        try:
            with open(p, "rb") as f:
                blob = f.read()
        except OSError:
            continue
        for n in needles:
            if n in blob:
                found[n].append(p)
    return found


def test_no_plaintext_on_disk(openlaked, tmp_path):
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=sse_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    secret = pattern(6 * MiB, b"SECRET-PLAINTEXT")
    ck = os.urandom(32)
    s3.put_object(Bucket=BUCKET, Key="s3-big", Body=secret, ServerSideEncryption="AES256")
    s3.put_object(Bucket=BUCKET, Key="s3-inline", Body=secret[:4000],
                  ServerSideEncryption="AES256")
    s3.put_object(Bucket=BUCKET, Key="c-big", Body=secret, **ssec(ck))
    mpu(s3, "mp", [secret[:5 * MiB], secret[5 * MiB:]], {"ServerSideEncryption": "AES256"})
    s3.copy_object(Bucket=BUCKET, Key="copied", CopySource=f"{BUCKET}/s3-big",
                   ServerSideEncryption="AES256")
    # the control: the same scan finds a pattern stored in plaintext
    control = pattern(2 * MiB, b"CONTROL-PLAINTXT")
    s3.put_object(Bucket=BUCKET, Key="control", Body=control)
    d.stop()  # everything flushed and closed
    needles = [secret[i:i + 32] for i in range(0, len(secret), 512 * 1024)]
    needles += [b"SECRET-PLAINTEXT", ck, base64.b64encode(ck), key.read_bytes(),
                control[MiB:MiB + 32]]
    found = scan(d, needles)
    assert found[control[MiB:MiB + 32]], "the scan must find plaintext that was stored plain"
    leaks = {n[:20]: f for n, f in found.items() if f and n != control[MiB:MiB + 32]}
    assert not leaks, leaks
    d.start()
    s3 = boto3_client(d.s3_url)
    assert s3.get_object(Bucket=BUCKET, Key="s3-big")["Body"].read() == secret
    assert s3.get_object(Bucket=BUCKET, Key="c-big", **ssec(ck))["Body"].read() == secret
    assert s3.get_object(Bucket=BUCKET, Key="mp")["Body"].read() == secret
    assert s3.get_object(Bucket=BUCKET, Key="copied")["Body"].read() == secret


# ------------------------------------------------ the master key


def test_master_key_file_checked_at_start(tmp_path):
    root = tmp_path / "n"
    root.mkdir()
    for content, what in ((None, "cannot be read"), (b"x" * 31, "is not a key"),
                          (b"z" * 64, "is not a key")):
        key = tmp_path / "bad.key"
        if content is None:
            key.unlink(missing_ok=True)
        else:
            key.write_bytes(content)
        d = Daemon(root, extra=sse_extra(key))
        with pytest.raises(RuntimeError):
            d.start(timeout=10)
        assert d.proc.poll() is not None and d.proc.returncode != 0
        log = d.log()
        assert "sse_master_key_file" in log and what in log, log[-2000:]
        d.cleanup()
        d.log_path.unlink()
    # hex and base64 forms are keys too, and the same key whatever its form
    raw = os.urandom(32)
    for i, text in enumerate((raw.hex().encode() + b"\n", base64.b64encode(raw) + b"\n", raw)):
        key = tmp_path / "good.key"
        key.write_bytes(text)
        d = Daemon(root, extra=sse_extra(key)).start()
        try:
            s3 = boto3_client(d.s3_url)
            if i == 0:
                s3.create_bucket(Bucket="forms")
                s3.put_object(Bucket="forms", Key="o", Body=b"v", ServerSideEncryption="AES256")
            assert s3.get_object(Bucket="forms", Key="o")["Body"].read() == b"v"
            assert raw.hex() not in d.log() and base64.b64encode(raw).decode() not in d.log()
        finally:
            d.cleanup()


def test_restart_with_another_master_key(openlaked, tmp_path):
    key = tmp_path / "master.key"
    good = os.urandom(32)
    key.write_bytes(good)
    d = openlaked(extra=sse_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="enc", Body=b"secret" * 1000, ServerSideEncryption="AES256")
    s3.put_object(Bucket=BUCKET, Key="plain", Body=b"plain")
    d.stop()
    key.write_bytes(os.urandom(32))
    d.start()
    s3 = boto3_client(d.s3_url)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="enc")
    assert status_of(e) == 500 and code_of(e) == "InternalError"
    assert "master key" in e.value.response["Error"]["Message"]
    assert s3.get_object(Bucket=BUCKET, Key="plain")["Body"].read() == b"plain"
    assert s3.head_object(Bucket=BUCKET, Key="plain")["ContentLength"] == 5
    d.stop()
    key.write_bytes(good)
    d.start()
    s3 = boto3_client(d.s3_url)
    assert s3.get_object(Bucket=BUCKET, Key="enc")["Body"].read() == b"secret" * 1000


def test_ssec_over_http_refused_by_default(openlaked, tmp_path):
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=sse_extra(key, allow_http=False))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=BUCKET, Key="c", Body=b"x", **ssec(os.urandom(32)))
    assert status_of(e) == 400 and code_of(e) == "InvalidRequest"
    assert "secure connection" in e.value.response["Error"]["Message"]
    # SSE-S3 needs no key on the wire
    s3.put_object(Bucket=BUCKET, Key="s", Body=b"x", ServerSideEncryption="AES256")


# ------------------------------------------------ crashes and heal


def body_for(key, gen, size):
    head = b"%s:%08d:" % (key.encode(), gen)
    return (head + hashlib.sha256(head).digest() * (size // 32 + 1))[:size]


def check_body(key, body, size):
    assert len(body) == size, (key, len(body))
    gen = int(body.split(b":")[1])
    assert body == body_for(key, gen, size), key
    return gen


def test_kill9_during_encrypted_puts(openlaked, tmp_path):
    """Writers PUT encrypted versions of their keys until the daemon is killed -9; after the
    restart every key reads back whole (a version no older than the last acknowledged one)."""
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=sse_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    ck = os.urandom(32)
    size = 300_000 + 7
    acked = {}
    stop = threading.Event()
    lock = threading.Lock()

    def writer(w):
        c = boto3_client(d.s3_url)
        gen = 0
        while not stop.is_set() and gen < 500:
            k = "w%d-%d" % (w, gen % 3)
            kw = ssec(ck) if w % 2 else {"ServerSideEncryption": "AES256"}
            try:
                c.put_object(Bucket=BUCKET, Key=k, Body=body_for(k, gen, size), **kw)
            except Exception:
                return
            with lock:
                acked[k] = gen
            gen += 1

    ts = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in ts:
        t.start()
    wait_for(lambda: len(acked) >= 12 and sum(acked.values()) >= 40, 120, "acknowledged PUTs")
    d.kill9()
    stop.set()
    for t in ts:
        t.join(60)
    d.start()
    s3 = boto3_client(d.s3_url)
    for k, g in acked.items():
        kw = ssec(ck) if int(k[1]) % 2 else {}
        got = s3.get_object(Bucket=BUCKET, Key=k, **kw)["Body"].read()
        assert check_body(k, got, size) >= g


def heal_cli(d, *args, timeout=120):
    return subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, *args],
                          capture_output=True, text=True, timeout=timeout)


def test_heal_encrypted_objects_after_wiped_drive(openlaked, tmp_path):
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=sse_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    ck = os.urandom(32)
    objs = {"a": os.urandom(3 * MiB + 5), "b": os.urandom(200_000), "c": os.urandom(100)}
    for k, v in objs.items():
        s3.put_object(Bucket=BUCKET, Key=k, Body=v, ServerSideEncryption="AES256")
    s3.put_object(Bucket=BUCKET, Key="ssec", Body=objs["a"], **ssec(ck))
    d.stop()
    wiped = d.data_dirs[1]
    for n in os.listdir(wiped):
        p = os.path.join(wiped, n)
        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    d.start()
    s3 = boto3_client(d.s3_url)
    for k, v in objs.items():  # degraded reads decrypt the rebuilt ciphertext
        assert s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() == v
    r = heal_cli(d)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "0 unrecoverable" in r.stdout, r.stdout
    d.stop()
    d.start()
    s3 = boto3_client(d.s3_url)
    for k, v in objs.items():
        assert s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() == v
        g = s3.get_object(Bucket=BUCKET, Key=k, Range="bytes=1-%d" % (len(v) - 2))
        assert g["Body"].read() == v[1:-1]
    assert s3.get_object(Bucket=BUCKET, Key="ssec", **ssec(ck))["Body"].read() == objs["a"]


# ------------------------------------------------ other clients


def run(cmd, env=None, timeout=180, **kw):
    r = subprocess.run(cmd, env=env or aws_env(), capture_output=True, timeout=timeout, **kw)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (
        " ".join(map(str, cmd)), r.returncode, r.stdout.decode(errors="replace"),
        r.stderr.decode(errors="replace"))
    return r


@pytest.mark.parametrize("which", ["/usr/bin/aws", "PATH"], ids=["awscli-debian", "awscli-path"])
def test_awscli_sse(sse_daemon, s3, tmp_path, which):
    """Debian's awscli 2.9 and the one first on PATH (1.45: CRC32 trailers by default, so the
    checksum and the encryption of one upload meet)."""
    from test_s3_clients import resolve_aws
    aws = resolve_aws(which)
    src = tmp_path / "f"
    data = os.urandom(9 * MiB + 3)  # above awscli's 8 MiB multipart threshold
    src.write_bytes(data)
    ck = os.urandom(32)
    kf = tmp_path / "ck"
    kf.write_bytes(ck)
    ep = ["--endpoint-url", sse_daemon.s3_url]
    ks, kc = "cli-s3-" + which[-4:], "cli-c-" + which[-4:]
    run([aws, *ep, "s3", "cp", str(src), f"s3://{BUCKET}/{ks}", "--sse", "AES256"])
    assert s3.head_object(Bucket=BUCKET, Key=ks)["ServerSideEncryption"] == "AES256"
    run([aws, *ep, "s3", "cp", f"s3://{BUCKET}/{ks}", str(tmp_path / "back1")])
    assert (tmp_path / "back1").read_bytes() == data
    run([aws, *ep, "s3", "cp", str(src), f"s3://{BUCKET}/{kc}", "--sse-c", "AES256",
         "--sse-c-key", f"fileb://{kf}"])
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key=kc)
    assert s3.get_object(Bucket=BUCKET, Key=kc, **ssec(ck))["Body"].read() == data
    run([aws, *ep, "s3", "cp", f"s3://{BUCKET}/{kc}", str(tmp_path / "back2"), "--sse-c",
         "AES256", "--sse-c-key", f"fileb://{kf}"])
    assert (tmp_path / "back2").read_bytes() == data


def rclone_conf(path, url, extra):
    from conftest import ACCESS_KEY, REGION, SECRET_KEY
    path.write_text(textwrap.dedent(f"""\
        [ol]
        type = s3
        provider = Other
        access_key_id = {ACCESS_KEY}
        secret_access_key = {SECRET_KEY}
        endpoint = {url}
        region = {REGION}
        force_path_style = true
        """) + extra)


def test_rclone_sse_s3(sse_daemon, s3, tmp_path):
    if not shutil.which("rclone"):
        pytest.skip("no rclone")
    cfg = tmp_path / "rclone.conf"
    rclone_conf(cfg, sse_daemon.s3_url, "server_side_encryption = AES256\n")
    src = tmp_path / "src"
    src.mkdir()
    files = {"a": os.urandom(100_000), "b": os.urandom(2 * MiB + 1)}
    for n, v in files.items():
        (src / n).write_bytes(v)
    rc = ["rclone", "--config", str(cfg), "--low-level-retries", "1", "--retries", "1"]
    env = {k: v for k, v in aws_env().items() if k != "AWS_CA_BUNDLE"}
    run(rc + ["copy", str(src), f"ol:{BUCKET}/rc-s3"], env=env)
    run(rc + ["check", str(src), f"ol:{BUCKET}/rc-s3"], env=env)
    for n, v in files.items():
        h = s3.head_object(Bucket=BUCKET, Key=f"rc-s3/{n}")
        assert h["ServerSideEncryption"] == "AES256"
        assert run(rc + ["cat", f"ol:{BUCKET}/rc-s3/{n}"], env=env).stdout == v


def test_ssec_over_tls_boto3_and_rclone(openlaked, tmp_path):
    """With the default sse_c_allow_http = false, SSE-C works over https (rclone refuses to
    send SSE-C keys over plain http itself)."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl CLI")
    import boto3
    from botocore.config import Config

    from conftest import ACCESS_KEY, REGION, SECRET_KEY
    from test_tls import make_ca, make_cert, tls_conf
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_ca(certs)
    pem, pkey = make_cert(certs, "server", 0x2001)
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(kv=False, extra=tls_conf(pem, pkey) + sse_extra(key, allow_http=False))
    url = f"https://127.0.0.1:{d.s3_port}"
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY, region_name=REGION, verify=str(ca),
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 1}))
    s3.create_bucket(Bucket=BUCKET)
    ck = os.urandom(16).hex()
    data = os.urandom(300_001)
    s3.put_object(Bucket=BUCKET, Key="tls-c", Body=data, **ssec(ck))
    assert s3.get_object(Bucket=BUCKET, Key="tls-c", **ssec(ck))["Body"].read() == data
    if not shutil.which("rclone"):
        return
    cfg = tmp_path / "rclone.conf"
    rclone_conf(cfg, url, "sse_customer_algorithm = AES256\nsse_customer_key = %s\n" % ck)
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(data)
    rc = ["rclone", "--config", str(cfg), "--ca-cert", str(ca), "--low-level-retries", "1",
          "--retries", "1"]
    env = {k: v for k, v in aws_env().items() if k != "AWS_CA_BUNDLE"}
    run(rc + ["copy", str(src), f"ol:{BUCKET}/rc"], env=env)
    assert s3.get_object(Bucket=BUCKET, Key="rc/f", **ssec(ck))["Body"].read() == data
    assert run(rc + ["cat", f"ol:{BUCKET}/rc/f"], env=env).stdout == data
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="rc/f")
    assert status_of(e) == 400


def test_browser_post_upload_encrypted(sse_daemon, s3):
    """A POST form with x-amz-server-side-encryption = AES256, and one into a bucket whose
    default is AES256, are stored encrypted; an SSE-C field is refused (501), not ignored."""
    if not shutil.which("curl"):
        pytest.skip("no curl")
    from conftest import ACCESS_KEY, SECRET_KEY
    from test_s3_post import post, signed_fields
    b = "sse-post"
    s3.create_bucket(Bucket=b)
    base = [{"bucket": b}, ["starts-with", "$key", ""]]
    f = signed_fields(ACCESS_KEY, SECRET_KEY,
                      base + [{"x-amz-server-side-encryption": "AES256"}])
    st, h, body = post(sse_daemon, b, dict(key="field", **{"x-amz-server-side-encryption":
                                                           "AES256"}, **f), b"posted 1")
    assert st == 204, body
    assert h.get("x-amz-server-side-encryption") == "AES256"
    g = s3.get_object(Bucket=b, Key="field")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == b"posted 1"
    f = signed_fields(ACCESS_KEY, SECRET_KEY, base + [
        {"x-amz-server-side-encryption-customer-algorithm": "AES256"}])
    st, _, body = post(sse_daemon, b, dict(
        key="ssec", **{"x-amz-server-side-encryption-customer-algorithm": "AES256"}, **f))
    assert st == 501 and b"NotImplemented" in body, body
    with pytest.raises(ClientError):
        s3.head_object(Bucket=b, Key="ssec")
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    f = signed_fields(ACCESS_KEY, SECRET_KEY, base)
    st, h, body = post(sse_daemon, b, dict(key="default", **f), b"posted 2")
    assert st == 204, body
    g = s3.get_object(Bucket=b, Key="default")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == b"posted 2"


def test_lifecycle_size_filter_sees_the_plaintext_size(s3):
    """ObjectSizeLessThan 100000 and an SSE-S3 object of 99,990 bytes (stored as 100,030:
    prefix and tags): the rule takes it, on the PUT's and on the HEAD's x-amz-expiration."""
    b = "sse-lc"
    s3.create_bucket(Bucket=b)
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [{
        "ID": "small", "Status": "Enabled", "Expiration": {"Days": 30},
        "Filter": {"ObjectSizeLessThan": 100000}}]})
    r = s3.put_object(Bucket=b, Key="o", Body=os.urandom(99_990), ServerSideEncryption="AES256")
    assert 'rule-id="small"' in r["Expiration"]
    assert 'rule-id="small"' in s3.head_object(Bucket=b, Key="o")["Expiration"]
    r = s3.put_object(Bucket=b, Key="big", Body=os.urandom(100_001),
                      ServerSideEncryption="AES256")
    assert "Expiration" not in r


def test_policy_denies_unencrypted_puts(openlaked, tmp_path):
    """The usual AWS bucket policy: Deny s3:PutObject unless s3:x-amz-server-side-encryption
    is AES256. alice (the owner, not the administrator) may PUT only with the header."""
    import json

    from s3_users import USERS, client
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(extra=USERS + sse_extra(key))
    alice = client(d.s3_url, "alicekey", "alicesecret")
    alice.create_bucket(Bucket=BUCKET)
    alice.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Sid": "deny-unencrypted", "Effect": "Deny", "Principal": "*",
            "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/*",
            "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}}]}))
    with pytest.raises(ClientError) as e:
        alice.put_object(Bucket=BUCKET, Key="plain", Body=b"x")
    assert status_of(e) == 403
    r = alice.put_object(Bucket=BUCKET, Key="enc", Body=b"x", ServerSideEncryption="AES256")
    assert r["ServerSideEncryption"] == "AES256"
    assert alice.get_object(Bucket=BUCKET, Key="enc")["Body"].read() == b"x"


def test_multipart_sse_and_checksum_over_two_sets(openlaked, tmp_path):
    """A store of two erasure sets (8 drives, 4 per set): encrypted multipart uploads and
    their composite checksums land in whichever set each upload's key maps to."""
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    d = openlaked(drives=8, set_drive_count=4, kv=False, extra=sse_extra(key))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket=BUCKET)
    parts = [os.urandom(5 * MiB + 1), os.urandom(4321)]
    for i in range(6):  # several keys: both sets get some
        k = "two-sets-%d" % i
        up = s3.create_multipart_upload(Bucket=BUCKET, Key=k, ServerSideEncryption="AES256",
                                        ChecksumAlgorithm="SHA256")
        done = []
        for n, p in enumerate(parts, 1):
            r = s3.upload_part(Bucket=BUCKET, Key=k, UploadId=up["UploadId"], PartNumber=n,
                               Body=p, ChecksumAlgorithm="SHA256")
            done.append({"PartNumber": n, "ETag": r["ETag"],
                         "ChecksumSHA256": r["ChecksumSHA256"]})
        r = s3.complete_multipart_upload(Bucket=BUCKET, Key=k, UploadId=up["UploadId"],
                                         MultipartUpload={"Parts": done})
        assert r["ChecksumSHA256"].endswith("-2")
        g = s3.get_object(Bucket=BUCKET, Key=k, Range="bytes=%d-%d" % (5 * MiB - 3, 5 * MiB + 9))
        assert g["Body"].read() == (parts[0] + parts[1])[5 * MiB - 3:5 * MiB + 10]
        h = s3.head_object(Bucket=BUCKET, Key=k, ChecksumMode="ENABLED")
        assert h["ContentLength"] == len(parts[0]) + len(parts[1])
        assert h["ServerSideEncryption"] == "AES256" and h["ChecksumSHA256"] == r["ChecksumSHA256"]


def test_sse_header_on_get_or_head_is_400(s3):
    # x-amz-server-side-encryption belongs to writes: AWS answers a GET or HEAD carrying it
    # with 400, for an SSE-S3 object as for a plain one; without it the object reads back.
    s3.put_object(Bucket=BUCKET, Key="sse-get-hdr", Body=b"secret", ServerSideEncryption="AES256")
    s3.put_object(Bucket=BUCKET, Key="plain-get-hdr", Body=b"plain")

    def add(**kw):
        kw["params"]["headers"]["x-amz-server-side-encryption"] = "AES256"

    c = boto3_client(s3.meta.endpoint_url)
    c.meta.events.register("before-call.s3.HeadObject", add)
    c.meta.events.register("before-call.s3.GetObject", add)
    for key in ("sse-get-hdr", "plain-get-hdr"):
        with pytest.raises(ClientError) as e:
            c.head_object(Bucket=BUCKET, Key=key)
        assert status_of(e) == 400
        with pytest.raises(ClientError) as e:
            c.get_object(Bucket=BUCKET, Key=key)
        assert (status_of(e), code_of(e)) == (400, "InvalidArgument")
    assert s3.get_object(Bucket=BUCKET, Key="sse-get-hdr")["Body"].read() == b"secret"
    assert s3.head_object(Bucket=BUCKET, Key="sse-get-hdr")["ServerSideEncryption"] == "AES256"
