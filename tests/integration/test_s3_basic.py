"""S3 operations through boto3 (Debian's 1.26) against the real openlaked, including the
error cases and their codes. Raw signed requests (test_s3_common.raw) cover what boto3 will
not send (bad payload hashes, missing lengths, virtual-host Host headers, skewed clocks)."""

import base64
import datetime
import hashlib
import os
import time

import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import boto3_client
from test_s3_common import err_code, raw


def code_of(exc_info):
    return exc_info.value.response["Error"]["Code"]


def status_of(exc_info):
    return exc_info.value.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def url(s3_daemon):
    return s3_daemon.s3_url


@pytest.fixture
def bucket(s3_client, request):
    import re
    name = "t-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    s3_client.create_bucket(Bucket=name)
    yield name
    # best-effort cleanup so the bucket list stays small
    try:
        for o in s3_client.list_objects_v2(Bucket=name).get("Contents", []):
            s3_client.delete_object(Bucket=name, Key=o["Key"])
        for u in s3_client.list_multipart_uploads(Bucket=name).get("Uploads", []):
            s3_client.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        s3_client.delete_bucket(Bucket=name)
    except ClientError:
        pass


# ---------------------------------------------------------------- buckets

def test_bucket_lifecycle(s3_client):
    b = "life-cycle-bucket"
    r = s3_client.create_bucket(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    # us-east-1 (the tests' region): S3's legacy answer to re-creating one's own bucket is 200
    r = s3_client.create_bucket(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert b in [x["Name"] for x in s3_client.list_buckets()["Buckets"]]
    s3_client.head_bucket(Bucket=b)
    assert s3_client.get_bucket_location(Bucket=b)["LocationConstraint"] is None
    s3_client.put_object(Bucket=b, Key="k", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3_client.delete_bucket(Bucket=b)
    assert code_of(e) == "BucketNotEmpty" and status_of(e) == 409
    s3_client.delete_object(Bucket=b, Key="k")
    r = s3_client.delete_bucket(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3_client.head_bucket(Bucket=b)
    assert status_of(e) == 404
    with pytest.raises(ClientError) as e:
        s3_client.delete_bucket(Bucket=b)
    assert code_of(e) == "NoSuchBucket"
    assert b not in [x["Name"] for x in s3_client.list_buckets()["Buckets"]]


def test_create_bucket_configuration(s3_client):
    s3_client.create_bucket(Bucket="cfg-bucket",
                            CreateBucketConfiguration={"LocationConstraint": "us-east-1"})
    s3_client.head_bucket(Bucket="cfg-bucket")
    with pytest.raises(ClientError) as e:
        s3_client.create_bucket(Bucket="cfg-bucket-2",
                                CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    assert code_of(e) == "IllegalLocationConstraintException"
    s3_client.delete_bucket(Bucket="cfg-bucket")


@pytest.mark.parametrize("name", ["ab", "UPPERCASE", "a..b", "192.168.1.1", "-leading",
                                  "trailing-", "a" * 64, "under_score"])
def test_invalid_bucket_names(s3_client, name):
    with pytest.raises(ClientError) as e:
        s3_client.create_bucket(Bucket=name)
    assert code_of(e) == "InvalidBucketName" and status_of(e) == 400


def test_missing_bucket_errors(s3_client):
    with pytest.raises(ClientError) as e:
        s3_client.put_object(Bucket="no-such-bucket-x", Key="k", Body=b"1")
    assert code_of(e) == "NoSuchBucket" and status_of(e) == 404
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket="no-such-bucket-x", Key="k")
    assert code_of(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3_client.list_objects_v2(Bucket="no-such-bucket-x")
    assert code_of(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3_client.create_multipart_upload(Bucket="no-such-bucket-x", Key="k")
    assert code_of(e) == "NoSuchBucket"


def test_subresources(s3_client, bucket):
    v = s3_client.get_bucket_versioning(Bucket=bucket)
    assert "Status" not in v
    acl = s3_client.get_bucket_acl(Bucket=bucket)
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert acl["Owner"]["ID"]
    s3_client.put_object(Bucket=bucket, Key="o", Body=b"1")
    assert s3_client.get_object_acl(Bucket=bucket, Key="o")["Grants"][0]["Permission"] == \
        "FULL_CONTROL"
    # policy and CORS are built now (test_s3_policy.py, test_s3_bucket_settings.py): none set
    for call, code in ((lambda: s3_client.get_bucket_policy(Bucket=bucket), "NoSuchBucketPolicy"),
                       (lambda: s3_client.get_bucket_cors(Bucket=bucket),
                        "NoSuchCORSConfiguration")):
        with pytest.raises(ClientError) as e:
            call()
        assert code_of(e) == code and status_of(e) == 404
    with pytest.raises(ClientError) as e:  # lifecycle is built (test_s3_lifecycle.py): none set
        s3_client.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code_of(e) == "NoSuchLifecycleConfiguration" and status_of(e) == 404


# ---------------------------------------------------------------- objects

def test_put_get_metadata_and_headers(s3_client, bucket):
    body = os.urandom(3000)
    r = s3_client.put_object(
        Bucket=bucket, Key="doc.bin", Body=body, Metadata={"Color": "blue", "n": "1"},
        ContentType="application/x-test", CacheControl="max-age=60",
        ContentDisposition='attachment; filename="x.bin"', ContentEncoding="identity",
        ContentLanguage="en", Expires=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc))
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    g = s3_client.get_object(Bucket=bucket, Key="doc.bin")
    assert g["Body"].read() == body
    assert g["ETag"] == r["ETag"]
    assert g["ContentLength"] == 3000
    assert g["Metadata"] == {"color": "blue", "n": "1"}
    assert g["ContentType"] == "application/x-test"
    assert g["CacheControl"] == "max-age=60"
    assert g["ContentDisposition"] == 'attachment; filename="x.bin"'
    assert g["ContentEncoding"] == "identity"
    assert g["ContentLanguage"] == "en"
    assert g["Expires"].year == 2030
    lm = g["ResponseMetadata"]["HTTPHeaders"]["last-modified"]
    assert lm.endswith(" GMT") and len(lm) == 29
    h = s3_client.head_object(Bucket=bucket, Key="doc.bin")
    assert h["ContentLength"] == 3000 and h["Metadata"]["color"] == "blue"
    s3_client.put_object(Bucket=bucket, Key="plain", Body=b"")
    g = s3_client.get_object(Bucket=bucket, Key="plain")
    assert g["ContentType"] == "binary/octet-stream" and g["Body"].read() == b""
    assert g["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'


def test_overwrite(s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key="k", Body=b"first")
    s3_client.put_object(Bucket=bucket, Key="k", Body=b"second version")
    assert s3_client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second version"


KEYS = ["a//b", "p/", "p", "../x", "./y", "with space", "100%", "a+b", "a b+c%20d",
        "uni/\u00e9\u4e2d\U0001f600", "q?x=1&y=2", "#hash", "back\\slash", "/leading",
        "tab\tin"]


def test_special_keys_are_distinct(s3_client, bucket):
    for i, k in enumerate(KEYS):
        s3_client.put_object(Bucket=bucket, Key=k, Body=("v%d" % i).encode())
    for i, k in enumerate(KEYS):
        assert s3_client.get_object(Bucket=bucket, Key=k)["Body"].read() == ("v%d" % i).encode(), k
    listed = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed += [o["Key"] for o in page.get("Contents", [])]
    assert listed == sorted(KEYS, key=lambda s: s.encode())


def test_max_length_key(s3_client, bucket):
    for n in (511, 1024):
        k = "L" * (n - 4) + "/end"
        s3_client.put_object(Bucket=bucket, Key=k, Body=b"%d" % n)
        assert s3_client.get_object(Bucket=bucket, Key=k)["Body"].read() == b"%d" % n
        assert k in [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]]


def test_key_too_long(s3_client, bucket):
    with pytest.raises(ClientError) as e:
        s3_client.put_object(Bucket=bucket, Key="k" * 1025, Body=b"1")
    assert code_of(e) == "KeyTooLongError" and status_of(e) == 400


def test_no_such_key_and_idempotent_delete(s3_client, bucket):
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket=bucket, Key="missing")
    assert code_of(e) == "NoSuchKey" and status_of(e) == 404
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    with pytest.raises(ClientError) as e:
        s3_client.head_object(Bucket=bucket, Key="missing")
    assert status_of(e) == 404
    for _ in range(2):
        r = s3_client.delete_object(Bucket=bucket, Key="missing")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3_client.put_object(Bucket=bucket, Key="there", Body=b"1")
    s3_client.delete_object(Bucket=bucket, Key="there")
    with pytest.raises(ClientError):
        s3_client.head_object(Bucket=bucket, Key="there")


def test_error_document(url, bucket):
    st, h, body = raw(url, "GET", f"/{bucket}/nokey")
    assert st == 404 and h["content-type"] == "application/xml"
    assert err_code(body) == "NoSuchKey"
    assert b"<Resource>/%s/nokey</Resource>" % bucket.encode() in body
    assert b"<RequestId>" + h["x-amz-request-id"].encode() + b"</RequestId>" in body


def test_ranges(s3_client, bucket):
    data = bytes(range(256)) * 40  # 10240 bytes
    s3_client.put_object(Bucket=bucket, Key="r", Body=data)

    def rng(spec):
        return s3_client.get_object(Bucket=bucket, Key="r", Range=spec)

    g = rng("bytes=10-19")
    assert g["Body"].read() == data[10:20]
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert g["ContentRange"] == "bytes 10-19/10240"
    assert rng("bytes=10000-")["Body"].read() == data[10000:]
    assert rng("bytes=-100")["Body"].read() == data[-100:]
    assert rng("bytes=10000-999999")["Body"].read() == data[10000:]
    g = rng("bytes=0-1,5-6")  # multi-range: ignored, whole object
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 200 and g["Body"].read() == data
    with pytest.raises(ClientError) as e:
        rng("bytes=10240-")
    assert code_of(e) == "InvalidRange" and status_of(e) == 416
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == \
        "bytes */10240"
    h = s3_client.head_object(Bucket=bucket, Key="r", Range="bytes=0-9")
    assert h["ResponseMetadata"]["HTTPStatusCode"] == 206 and h["ContentLength"] == 10


def test_conditionals(s3_client, bucket):
    r = s3_client.put_object(Bucket=bucket, Key="c", Body=b"cond")
    etag = r["ETag"]
    assert s3_client.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"cond"
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert code_of(e) == "PreconditionFailed" and status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert status_of(e) == 304
    assert s3_client.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)["Body"].read()
    with pytest.raises(ClientError) as e:
        s3_client.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3_client.head_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304


def test_content_md5(s3_client, bucket):
    body = b"md5 checked body"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3_client.put_object(Bucket=bucket, Key="m", Body=body, ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3_client.put_object(Bucket=bucket, Key="m2", Body=body, ContentMD5=bad)
    assert code_of(e) == "BadDigest" and status_of(e) == 400
    with pytest.raises(ClientError) as e:
        s3_client.put_object(Bucket=bucket, Key="m2", Body=body, ContentMD5="notbase64!")
    assert code_of(e) == "InvalidDigest"
    with pytest.raises(ClientError):
        s3_client.head_object(Bucket=bucket, Key="m2")


@pytest.mark.parametrize("alg", ["CRC32", "CRC32C", "SHA1", "SHA256"])
def test_flexible_checksums(s3_client, bucket, alg):
    body = os.urandom(5000)
    r = s3_client.put_object(Bucket=bucket, Key="ck-" + alg, Body=body, ChecksumAlgorithm=alg)
    sent = r.get("Checksum" + alg)
    g = s3_client.get_object(Bucket=bucket, Key="ck-" + alg, ChecksumMode="ENABLED")
    assert g["Body"].read() == body
    assert g.get("Checksum" + alg) and (sent is None or g["Checksum" + alg] == sent)
    if alg == "SHA256":
        assert g["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()
    if alg == "SHA1":
        assert g["ChecksumSHA1"] == base64.b64encode(hashlib.sha1(body).digest()).decode()
    h = s3_client.head_object(Bucket=bucket, Key="ck-" + alg, ChecksumMode="ENABLED")
    assert h.get("Checksum" + alg) == g["Checksum" + alg]
    plain = s3_client.get_object(Bucket=bucket, Key="ck-" + alg)
    assert "Checksum" + alg not in plain


def test_checksum_mismatch_not_committed(url, bucket):
    body = b"checksummed payload"
    wrong = base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    st, _, resp = raw(url, "PUT", f"/{bucket}/bad-ck", {"x-amz-checksum-sha256": wrong}, body)
    assert st == 400 and err_code(resp) == "BadDigest"
    st, _, resp = raw(url, "PUT", f"/{bucket}/bad-ck", {"x-amz-checksum-crc32": "AAAAAA=="},
                      body)
    assert st == 400 and err_code(resp) == "BadDigest"
    st, _, _ = raw(url, "HEAD", f"/{bucket}/bad-ck", body=None)
    assert st == 404
    good = base64.b64encode(hashlib.sha1(body).digest()).decode()
    st, h, _ = raw(url, "PUT", f"/{bucket}/good-ck", {"x-amz-checksum-sha1": good}, body)
    assert st == 200
    st, h, _ = raw(url, "GET", f"/{bucket}/good-ck", {"x-amz-checksum-mode": "ENABLED"},
                   body=None)
    assert h["x-amz-checksum-sha1"] == good


def test_payload_hash_mismatch_not_committed(url, bucket):
    st, _, resp = raw(url, "PUT", f"/{bucket}/shabad", {}, b"actual body",
                      payload_hash=hashlib.sha256(b"claimed body").hexdigest())
    assert st == 400 and err_code(resp) == "XAmzContentSHA256Mismatch"
    st, _, _ = raw(url, "HEAD", f"/{bucket}/shabad", body=None)
    assert st == 404
    st, _, _ = raw(url, "PUT", f"/{bucket}/unsigned", {}, b"unsigned body",
                   payload_hash="UNSIGNED-PAYLOAD")
    assert st == 200


def test_auth_errors(url, s3_daemon, bucket):
    bad = boto3_client(url)
    bad._request_signer._credentials.secret_key = "wrong-secret"
    with pytest.raises(ClientError) as e:
        bad.list_buckets()
    assert code_of(e) == "SignatureDoesNotMatch" and status_of(e) == 403
    st, _, body = raw(url, "GET", "/", access="AKIDUNKNOWN", secret="x")
    assert st == 403 and err_code(body) == "InvalidAccessKeyId"
    anon = boto3_client(url, signature_version=UNSIGNED)
    with pytest.raises(ClientError) as e:
        anon.get_object(Bucket=bucket, Key="x")
    assert code_of(e) == "AccessDenied" and status_of(e) == 403
    st, _, body = raw(url, "GET", "/", {"Authorization": "AWS4-HMAC-SHA256 garbage"},
                      signed=False, body=None)
    assert st == 400 and err_code(body) == "AuthorizationHeaderMalformed"
    old = time.time() - 3600
    from unittest import mock
    with mock.patch("botocore.auth.datetime") as dt:
        dt.datetime.utcnow.return_value = datetime.datetime.utcfromtimestamp(old)
        dt.datetime.now.return_value = datetime.datetime.fromtimestamp(
            old, datetime.timezone.utc)
        st, _, body = raw(url, "GET", "/", body=None)
    assert st == 403 and err_code(body) == "RequestTimeTooSkewed"


def test_virtual_host_style(url, s3_daemon, bucket):
    host = f"{bucket}.localhost:{s3_daemon.s3_port}"
    st, _, _ = raw(url, "PUT", "/vh/key", {}, b"virtual", host=host)
    assert st == 200
    st, _, body = raw(url, "GET", "/vh/key", body=None, host=host)
    assert st == 200 and body == b"virtual"
    st, _, body = raw(url, "GET", f"/{bucket}/vh/key", body=None)
    assert st == 200 and body == b"virtual"
    st, _, body = raw(url, "GET", "/?list-type=2", body=None, host=host)
    assert st == 200 and b"<Key>vh/key</Key>" in body


def test_length_errors(url, bucket):
    st, _, body = raw(url, "PUT", f"/{bucket}/nolen", {}, body=None,
                      payload_hash="UNSIGNED-PAYLOAD")
    assert st == 411 and err_code(body) == "MissingContentLength"
    st, _, body = raw(url, "PUT", f"/{bucket}/huge", {"Content-Length": str(6 << 30)},
                      body=None, payload_hash="UNSIGNED-PAYLOAD")
    assert st == 400 and err_code(body) == "EntityTooLarge"


def test_method_not_allowed(url, bucket):
    st, _, body = raw(url, "POST", f"/{bucket}/k", {}, b"")
    assert st == 405 and err_code(body) == "MethodNotAllowed"


def test_copy_object(s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key="src", Body=b"copy me", Metadata={"a": "1"},
                         ContentType="text/x-src")
    r = s3_client.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket,
                                                                     "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(b"copy me").hexdigest()
    g = s3_client.get_object(Bucket=bucket, Key="dst")
    assert g["Body"].read() == b"copy me" and g["Metadata"] == {"a": "1"}
    assert g["ContentType"] == "text/x-src"
    s3_client.copy_object(Bucket=bucket, Key="dst2", CopySource=f"{bucket}/src",
                          MetadataDirective="REPLACE", Metadata={"b": "2"},
                          ContentType="text/x-new")
    g = s3_client.get_object(Bucket=bucket, Key="dst2")
    assert g["Metadata"] == {"b": "2"} and g["ContentType"] == "text/x-new"
    with pytest.raises(ClientError) as e:
        s3_client.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src")
    assert code_of(e) == "InvalidRequest"
    s3_client.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src",
                          MetadataDirective="REPLACE", Metadata={"c": "3"})
    assert s3_client.head_object(Bucket=bucket, Key="src")["Metadata"] == {"c": "3"}
    with pytest.raises(ClientError) as e:
        s3_client.copy_object(Bucket=bucket, Key="x", CopySource=f"{bucket}/nope")
    assert code_of(e) == "NoSuchKey"
    s3_client.put_object(Bucket=bucket, Key="sp ace+%", Body=b"odd")
    s3_client.copy_object(Bucket=bucket, Key="odd2", CopySource={"Bucket": bucket,
                                                                  "Key": "sp ace+%"})
    assert s3_client.get_object(Bucket=bucket, Key="odd2")["Body"].read() == b"odd"


def test_delete_objects(s3_client, url, bucket):
    keys = ["d1", "d/2", "d 3", "&<>"]
    for k in keys:
        s3_client.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3_client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]
                                                        + [{"Key": "never-there"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(keys + ["never-there"])
    assert not r.get("Errors")
    assert s3_client.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    s3_client.put_object(Bucket=bucket, Key="q", Body=b"x")
    r = s3_client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "q"}],
                                                        "Quiet": True})
    assert not r.get("Deleted")
    body = b"<Delete><Object><Key>q</Key></Object></Delete>"
    st, _, resp = raw(url, "POST", f"/{bucket}?delete", {}, body)
    assert st == 400 and err_code(resp) == "InvalidRequest"
    md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    st, _, resp = raw(url, "POST", f"/{bucket}?delete", {"Content-MD5": md5}, body)
    assert st == 400 and err_code(resp) == "BadDigest"
    bad = b"<Delete><Object></Object>"
    md5 = base64.b64encode(hashlib.md5(bad).digest()).decode()
    st, _, resp = raw(url, "POST", f"/{bucket}?delete", {"Content-MD5": md5}, bad)
    assert st == 400 and err_code(resp) == "MalformedXML"


# ---------------------------------------------------------------- multipart

MiB = 1 << 20


def test_multipart_complete(s3_client, bucket):
    key = "mp/obj"
    up = s3_client.create_multipart_upload(Bucket=bucket, Key=key, ContentType="text/mp",
                                           Metadata={"m": "p"})
    uid = up["UploadId"]
    parts_data = [os.urandom(5 * MiB), os.urandom(5 * MiB + 17), os.urandom(1234)]
    etags = []
    for i, d in enumerate(parts_data, 1):
        r = s3_client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i, Body=d)
        assert r["ETag"] == '"%s"' % hashlib.md5(d).hexdigest()
        etags.append(r["ETag"])
    lp = s3_client.list_parts(Bucket=bucket, Key=key, UploadId=uid)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3]
    assert [p["Size"] for p in lp["Parts"]] == [len(d) for d in parts_data]
    ups = s3_client.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [(key, uid)]
    r = s3_client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": i, "ETag": e}
                                   for i, e in enumerate(etags, 1)]})
    want = hashlib.md5(b"".join(hashlib.md5(d).digest() for d in parts_data)).hexdigest()
    assert r["ETag"] == '"%s-3"' % want
    g = s3_client.get_object(Bucket=bucket, Key=key)
    assert g["Body"].read() == b"".join(parts_data)
    assert g["ETag"] == r["ETag"] and g["ContentType"] == "text/mp"
    assert g["Metadata"] == {"m": "p"}
    g = s3_client.get_object(Bucket=bucket, Key=key, Range="bytes=%d-%d" % (5 * MiB - 5,
                                                                            5 * MiB + 5))
    assert g["Body"].read() == b"".join(parts_data)[5 * MiB - 5:5 * MiB + 6]
    assert not s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    with pytest.raises(ClientError) as e:
        s3_client.list_parts(Bucket=bucket, Key=key, UploadId=uid)
    assert code_of(e) == "NoSuchUpload"


def test_multipart_errors(s3_client, bucket):
    key = "mp/err"
    uid = s3_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    e1 = s3_client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1,
                               Body=b"a" * 100)["ETag"]
    e2 = s3_client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2,
                               Body=b"b" * 100)["ETag"]

    def complete(parts):
        return s3_client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                                   MultipartUpload={"Parts": parts})

    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}])
    assert code_of(e) == "InvalidPart" and status_of(e) == 400
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 3, "ETag": e1}])
    assert code_of(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}])
    assert code_of(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}])
    assert code_of(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3_client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=10001,
                              Body=b"x")
    assert code_of(e) == "InvalidArgument"
    with pytest.raises(ClientError) as e:
        s3_client.upload_part(Bucket=bucket, Key=key, UploadId="0" * 32, PartNumber=1,
                              Body=b"x")
    assert code_of(e) == "NoSuchUpload" and status_of(e) == 404
    # a single small part is fine (the last part may be small)
    r = complete([{"PartNumber": 2, "ETag": e2}])
    assert r["ETag"].endswith('-1"')
    assert s3_client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"b" * 100


def test_multipart_abort_keeps_object(s3_client, bucket):
    key = "keep-me"
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"existing")
    uid = s3_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    s3_client.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=b"p")
    r = s3_client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3_client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"existing"
    with pytest.raises(ClientError) as e:
        s3_client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)
    assert code_of(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3_client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                            MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                        "ETag": '"x"'}]})
    assert code_of(e) == "NoSuchUpload"


def test_upload_part_copy(s3_client, bucket):
    src = os.urandom(6 * MiB)
    s3_client.put_object(Bucket=bucket, Key="pc-src", Body=src)
    uid = s3_client.create_multipart_upload(Bucket=bucket, Key="pc-dst")["UploadId"]
    r1 = s3_client.upload_part_copy(Bucket=bucket, Key="pc-dst", UploadId=uid, PartNumber=1,
                                    CopySource=f"{bucket}/pc-src",
                                    CopySourceRange="bytes=0-%d" % (5 * MiB - 1))
    r2 = s3_client.upload_part_copy(Bucket=bucket, Key="pc-dst", UploadId=uid, PartNumber=2,
                                    CopySource=f"{bucket}/pc-src",
                                    CopySourceRange="bytes=%d-%d" % (5 * MiB, 6 * MiB - 1))
    s3_client.complete_multipart_upload(
        Bucket=bucket, Key="pc-dst", UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
                                   {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]})
    assert s3_client.get_object(Bucket=bucket, Key="pc-dst")["Body"].read() == src


def test_response_overrides(s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key="ov", Body=b"o", ContentType="text/plain")
    g = s3_client.get_object(Bucket=bucket, Key="ov", ResponseContentType="image/png",
                             ResponseContentDisposition="inline", ResponseCacheControl="no-cache")
    assert g["ContentType"] == "image/png" and g["ContentDisposition"] == "inline"
    assert g["CacheControl"] == "no-cache"


def test_metrics_count_s3_ops(url, s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key="m", Body=b"1")
    with pytest.raises(ClientError):
        s3_client.get_object(Bucket=bucket, Key="absent")
    st, _, body = raw(url, "GET", "/metrics", signed=False, body=None)
    assert st == 200
    text = body.decode()
    assert 'openlake_s3_requests_total{op="PutObject"}' in text
    import re
    m = re.search(r'openlake_s3_errors_total\{op="GetObject"\} (\d+)', text)
    assert m and int(m.group(1)) >= 1
    assert 'openlake_s3_request_duration_seconds_count{op="PutObject"}' in text


def test_copy_source_conditions_and_conditional_put(s3_client, url, bucket):
    r = s3_client.put_object(Bucket=bucket, Key="cs", Body=b"source")
    s3_client.copy_object(Bucket=bucket, Key="cs2", CopySource=f"{bucket}/cs",
                          CopySourceIfMatch=r["ETag"])
    with pytest.raises(ClientError) as e:
        s3_client.copy_object(Bucket=bucket, Key="cs3", CopySource=f"{bucket}/cs",
                              CopySourceIfMatch='"0000"')
    assert code_of(e) == "PreconditionFailed" and status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3_client.copy_object(Bucket=bucket, Key="cs3", CopySource=f"{bucket}/cs",
                              CopySourceIfNoneMatch=r["ETag"])
    assert status_of(e) == 412
    st, _, body = raw(url, "PUT", f"/{bucket}/cs", {"If-None-Match": "*"}, b"again")
    assert st == 412 and err_code(body) == "PreconditionFailed"
    st, _, _ = raw(url, "PUT", f"/{bucket}/cs-new", {"If-None-Match": "*"}, b"new")
    assert st == 200
    assert s3_client.get_object(Bucket=bucket, Key="cs")["Body"].read() == b"source"


def test_list_object_versions(s3_client, bucket):
    for k in ("v/a", "v/b", "v/c/d"):
        s3_client.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3_client.list_object_versions(Bucket=bucket, Prefix="v/", Delimiter="/")
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r["Versions"]] == \
        [("v/a", "null", True), ("v/b", "null", True)]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["v/c/"]
    r = s3_client.list_object_versions(Bucket=bucket, Prefix="v/", MaxKeys=1)
    assert r["IsTruncated"] and r["NextKeyMarker"] == "v/a"
    r = s3_client.list_object_versions(Bucket=bucket, Prefix="v/", KeyMarker="v/a")
    assert [v["Key"] for v in r["Versions"]] == ["v/b", "v/c/d"]


def test_empty_put_then_put_on_one_connection(url, bucket):
    """A zero-byte PUT carries Expect: 100-continue; answered with the final status alone,
    botocore (1.29 here) kept that status line for the connection and read the next response's
    head as headers, so the next PUT on the connection hung until its read timeout (and a PUT
    never answered could look acknowledged). The daemon sends 100 Continue first, as S3 does."""
    import boto3
    c = boto3.client("s3", endpoint_url=url, aws_access_key_id="openlakeadmin",
                     aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                     config=Config(s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=20,
                                   retries={"mode": "standard", "total_max_attempts": 1},
                                   max_pool_connections=1))
    for i in range(3):
        c.put_object(Bucket=bucket, Key=f"empty-{i}", Body=b"")
        c.put_object(Bucket=bucket, Key=f"small-{i}", Body=b"ab")
        assert c.get_object(Bucket=bucket, Key=f"small-{i}")["Body"].read() == b"ab"
        assert c.get_object(Bucket=bucket, Key=f"empty-{i}")["Body"].read() == b""
