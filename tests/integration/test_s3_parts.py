"""GET/HEAD ?partNumber=N and GetObjectAttributes (issue 12) against the real openlaked with
boto3 and awscli: each part of a multipart object read back byte-exact with its Content-Range,
x-amz-mp-parts-count and the whole object's ETag; a plain object is one part; a part past the
last one is 400 InvalidPart; attributes (ETag, Checksum, ObjectParts paged, StorageClass,
ObjectSize) of the current object and of an older version."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from conftest import aws_env
from test_s3_common import err_code, raw

MiB = 1 << 20


def code(fn, **kw):
    with pytest.raises(ClientError) as e:
        fn(**kw)
    r = e.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


@pytest.fixture(scope="module")
def mpu(s3_client):
    """A bucket with a three-part object (sizes 5 MiB, 5 MiB + 3, 1234): (bucket, parts)."""
    b = "parts-bucket"
    s3_client.create_bucket(Bucket=b)
    parts = [os.urandom(5 * MiB), os.urandom(5 * MiB + 3), os.urandom(1234)]
    up = s3_client.create_multipart_upload(Bucket=b, Key="big")["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        e = s3_client.upload_part(Bucket=b, Key="big", UploadId=up, PartNumber=i, Body=p)
        done.append({"PartNumber": i, "ETag": e["ETag"]})
    s3_client.complete_multipart_upload(Bucket=b, Key="big", UploadId=up,
                                        MultipartUpload={"Parts": done})
    return b, parts


def test_part_number_reads_each_part(s3_client, mpu):
    b, parts = mpu
    etag = s3_client.head_object(Bucket=b, Key="big")["ETag"]
    total = sum(len(p) for p in parts)
    off = 0
    for i, p in enumerate(parts, 1):
        h = s3_client.head_object(Bucket=b, Key="big", PartNumber=i)
        assert h["PartsCount"] == 3 and h["ContentLength"] == len(p) and h["ETag"] == etag
        g = s3_client.get_object(Bucket=b, Key="big", PartNumber=i)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["ContentRange"] == "bytes %d-%d/%d" % (off, off + len(p) - 1, total)
        assert g["PartsCount"] == 3 and g["ETag"] == etag
        assert g["Body"].read() == p
        off += len(p)
    assert code(s3_client.get_object, Bucket=b, Key="big", PartNumber=4) == (400, "InvalidPart")
    with pytest.raises(ClientError) as e:
        s3_client.head_object(Bucket=b, Key="big", PartNumber=4)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    for bad in ("0", "10001", "x"):
        st, _, body = raw(s3_client.meta.endpoint_url, "GET", "/%s/big?partNumber=%s" % (b, bad))
        assert (st, err_code(body)) == (400, "InvalidArgument"), bad
    st, _, body = raw(s3_client.meta.endpoint_url, "GET", "/%s/big?partNumber=1" % b,
                      headers={"Range": "bytes=0-9"})
    assert (st, err_code(body)) == (400, "InvalidRequest")


def test_part_number_of_plain_objects_and_versions(s3_client):
    b = "parts-plain"
    s3_client.create_bucket(Bucket=b)
    s3_client.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3_client.put_object(Bucket=b, Key="k", Body=b"first body")["VersionId"]
    s3_client.put_object(Bucket=b, Key="k", Body=b"second")
    g = s3_client.get_object(Bucket=b, Key="k", PartNumber=1)
    assert g["Body"].read() == b"second"
    g = s3_client.get_object(Bucket=b, Key="k", PartNumber=1, VersionId=v1)
    assert g["Body"].read() == b"first body" and g["ContentLength"] == 10
    assert code(s3_client.get_object, Bucket=b, Key="k", PartNumber=2) == (400, "InvalidPart")
    a = s3_client.get_object_attributes(Bucket=b, Key="k", VersionId=v1,
                                        ObjectAttributes=["ObjectSize"])
    assert a["ObjectSize"] == 10 and a["VersionId"] == v1
    assert code(s3_client.get_object, Bucket=b, Key="nope", PartNumber=1) == (404, "NoSuchKey")


def test_get_object_attributes(s3_client, mpu):
    b, parts = mpu
    all_attrs = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
    a = s3_client.get_object_attributes(Bucket=b, Key="big", ObjectAttributes=all_attrs)
    assert '"%s"' % a["ETag"] == s3_client.head_object(Bucket=b, Key="big")["ETag"]
    assert a["ObjectSize"] == sum(len(p) for p in parts) and a["StorageClass"] == "STANDARD"
    op = a["ObjectParts"]
    assert op["TotalPartsCount"] == 3 and not op["IsTruncated"]
    assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [
        (i, len(p)) for i, p in enumerate(parts, 1)]
    page = s3_client.get_object_attributes(Bucket=b, Key="big", ObjectAttributes=["ObjectParts"],
                                           MaxParts=2)["ObjectParts"]
    assert page["IsTruncated"] and page["NextPartNumberMarker"] == 2
    assert [p["PartNumber"] for p in page["Parts"]] == [1, 2]
    page = s3_client.get_object_attributes(Bucket=b, Key="big", ObjectAttributes=["ObjectParts"],
                                           PartNumberMarker=2)["ObjectParts"]
    assert [p["PartNumber"] for p in page["Parts"]] == [3] and not page["IsTruncated"]
    # a plain object with a checksum: no parts, its checksum; only what was asked for
    r = s3_client.put_object(Bucket=b, Key="small", Body=b"hello", ChecksumAlgorithm="CRC32")
    a = s3_client.get_object_attributes(Bucket=b, Key="small",
                                        ObjectAttributes=["Checksum", "ObjectParts"])
    assert a["Checksum"]["ChecksumCRC32"] == r["ChecksumCRC32"]
    assert "ObjectParts" not in a and "ETag" not in a and "ObjectSize" not in a
    assert code(s3_client.get_object_attributes, Bucket=b, Key="small",
                ObjectAttributes=["Bogus"]) == (400, "InvalidArgument")
    assert code(s3_client.get_object_attributes, Bucket=b, Key="missing",
                ObjectAttributes=["ETag"]) == (404, "NoSuchKey")


def test_get_object_attributes_awscli(s3_daemon, s3_client):
    b = "parts-cli"
    s3_client.create_bucket(Bucket=b)
    s3_client.put_object(Bucket=b, Key="o", Body=b"x" * 321)
    out = subprocess.run(["aws", "s3api", "get-object-attributes", "--bucket", b, "--key", "o",
                          "--object-attributes", "ObjectSize", "ETag",
                          "--endpoint-url", s3_daemon.s3_url], env=aws_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ObjectSize"] == 321 and len(doc["ETag"]) == 32


def test_delete_bucket_takes_its_in_progress_uploads(s3_client):
    # AWS deletes a bucket whose only content is incomplete multipart uploads; one that holds
    # an object keeps its uploads and answers BucketNotEmpty.
    c = s3_client
    c.create_bucket(Bucket="mpu-only")
    up = c.create_multipart_upload(Bucket="mpu-only", Key="big")["UploadId"]
    c.upload_part(Bucket="mpu-only", Key="big", UploadId=up, PartNumber=1, Body=b"p" * 100)
    c.create_multipart_upload(Bucket="mpu-only", Key="other")
    c.delete_bucket(Bucket="mpu-only")
    assert code(c.head_bucket, Bucket="mpu-only")[0] == 404
    c.create_bucket(Bucket="mpu-and-object")
    up = c.create_multipart_upload(Bucket="mpu-and-object", Key="big")["UploadId"]
    c.put_object(Bucket="mpu-and-object", Key="keep", Body=b"k")
    assert code(c.delete_bucket, Bucket="mpu-and-object") == (409, "BucketNotEmpty")
    ups = c.list_multipart_uploads(Bucket="mpu-and-object")["Uploads"]
    assert [u["UploadId"] for u in ups] == [up]


def test_complete_sent_again_answers_as_the_first(s3_client):
    """An SDK sends CompleteMultipartUpload again when the first answer was lost; S3 answers it
    as the first (200, same ETag, version id and checksum), where NoSuchUpload would fail an
    upload that landed. Only the same parts of the same upload into the key's current object:
    another part list, a key the object was copied to, or a key overwritten since is
    NoSuchUpload."""
    c = s3_client
    for b, versioned in (("mpu-again-v", True), ("mpu-again", False)):
        c.create_bucket(Bucket=b)
        if versioned:
            c.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        body = [os.urandom(5 * MiB), os.urandom(777)]
        up = c.create_multipart_upload(Bucket=b, Key="obj", ChecksumAlgorithm="CRC32C")
        up = up["UploadId"]
        parts = []
        for i, p in enumerate(body, 1):
            e = c.upload_part(Bucket=b, Key="obj", UploadId=up, PartNumber=i, Body=p,
                              ChecksumAlgorithm="CRC32C")
            parts.append({"PartNumber": i, "ETag": e["ETag"],
                          "ChecksumCRC32C": e["ChecksumCRC32C"]})
        kw = dict(Bucket=b, Key="obj", UploadId=up, MultipartUpload={"Parts": parts})
        first = c.complete_multipart_upload(**kw)
        again = c.complete_multipart_upload(**kw)
        assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
        for f in ("ETag", "Bucket", "Key", "ChecksumCRC32C", "VersionId"):
            assert again.get(f) == first.get(f), (b, f, first.get(f), again.get(f))
        assert first["ETag"].endswith('-2"') and first["ChecksumCRC32C"]
        assert ("VersionId" in first) == versioned
        if versioned:
            vs = c.list_object_versions(Bucket=b, Prefix="obj")["Versions"]
            assert [v["VersionId"] for v in vs] == [first["VersionId"]]
        assert c.get_object(Bucket=b, Key="obj")["Body"].read() == b"".join(body)
        # not the same parts: no answer from the first call
        other = dict(kw, MultipartUpload={"Parts": parts[:1]})
        assert code(c.complete_multipart_upload, **other) == (404, "NoSuchUpload")
        # a copy is no upload's result
        c.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "obj"})
        assert code(c.complete_multipart_upload, **dict(kw, Key="copy")) == \
            (404, "NoSuchUpload")
        # the key written since: the upload's object is no longer the current one
        c.put_object(Bucket=b, Key="obj", Body=b"newer")
        assert code(c.complete_multipart_upload, **kw) == (404, "NoSuchUpload")
        assert c.get_object(Bucket=b, Key="obj")["Body"].read() == b"newer"
        # sent four times at once: each call is answered as the one that completed it (the
        # versioned bucket: one new version for all of them)
        up = c.create_multipart_upload(Bucket=b, Key="race")["UploadId"]
        e = c.upload_part(Bucket=b, Key="race", UploadId=up, PartNumber=1, Body=b"r" * 1000)
        kw = dict(Bucket=b, Key="race", UploadId=up,
                  MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e["ETag"]}]})
        with ThreadPoolExecutor(4) as ex:
            answers = list(ex.map(lambda _: c.complete_multipart_upload(**kw), range(4)))
        assert len({(a["ETag"], a.get("VersionId")) for a in answers}) == 1, answers
        if versioned:
            vs = c.list_object_versions(Bucket=b, Prefix="race")["Versions"]
            assert [v["VersionId"] for v in vs] == [answers[0]["VersionId"]]


def test_upload_part_copy_range_past_the_source_is_416(s3_client):
    c = s3_client
    c.create_bucket(Bucket="copy-range")
    c.put_object(Bucket="copy-range", Key="src", Body=b"12345")
    up = c.create_multipart_upload(Bucket="copy-range", Key="dst")["UploadId"]
    kw = dict(Bucket="copy-range", Key="dst", UploadId=up, PartNumber=1,
              CopySource={"Bucket": "copy-range", "Key": "src"})
    assert code(c.upload_part_copy, CopySourceRange="bytes=0-21", **kw) == (416, "InvalidRange")
    assert code(c.upload_part_copy, CopySourceRange="bytes=5-5", **kw) == (416, "InvalidRange")
    assert code(c.upload_part_copy, CopySourceRange="bytes=3-1", **kw) == (400, "InvalidArgument")
    assert code(c.upload_part_copy, CopySourceRange="0-2", **kw) == (400, "InvalidArgument")
    etag = c.upload_part_copy(CopySourceRange="bytes=1-3", **kw)["CopyPartResult"]["ETag"]
    c.complete_multipart_upload(Bucket="copy-range", Key="dst", UploadId=up,
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert c.get_object(Bucket="copy-range", Key="dst")["Body"].read() == b"234"


def test_list_multipart_uploads_pages_markers_and_delimiter(s3_daemon, s3_client):
    """ListMultipartUploads pages by (key, upload id): boto3's paginator and the awscli,
    which follow NextKeyMarker / NextUploadIdMarker, see every upload once and in order
    (before, a truncated page named no next marker and the markers sent were ignored);
    key-marker alone skips that key's uploads, with upload-id-marker only those up to the id;
    a delimiter rolls keys into CommonPrefixes, counted against max-uploads and not repeated
    on the next page; encoding-type=url encodes keys and prefixes."""
    c, b = s3_client, "uploads-pages"
    c.create_bucket(Bucket=b)
    keys = ["a", "a", "a", "b", "d/1", "d/2", "d/3", "e", "f/x", "g k"]
    ups = sorted((k, c.create_multipart_upload(Bucket=b, Key=k)["UploadId"]) for k in keys)
    try:
        seen = []
        for page in c.get_paginator("list_multipart_uploads").paginate(
                Bucket=b, PaginationConfig={"PageSize": 2}):
            assert len(page.get("Uploads", [])) <= 2
            seen += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        assert seen == ups

        r = c.list_multipart_uploads(Bucket=b, MaxUploads=4)
        assert r["IsTruncated"] and [u["Key"] for u in r["Uploads"]] == ["a", "a", "a", "b"]
        assert (r["NextKeyMarker"], r["NextUploadIdMarker"]) == ups[3]
        r = c.list_multipart_uploads(Bucket=b, KeyMarker="a")
        assert [(u["Key"], u["UploadId"]) for u in r["Uploads"]] == ups[3:]
        assert not r["IsTruncated"]
        r = c.list_multipart_uploads(Bucket=b, KeyMarker="a", UploadIdMarker=ups[0][1])
        assert [(u["Key"], u["UploadId"]) for u in r["Uploads"]] == ups[1:]

        # delimiter: d/ and f/ are one entry each, counted in the page
        got, cps, kw = [], [], {}
        while True:
            r = c.list_multipart_uploads(Bucket=b, Delimiter="/", MaxUploads=3, **kw)
            got += [u["Key"] for u in r.get("Uploads", [])]
            cps += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
            assert len(r.get("Uploads", [])) + len(r.get("CommonPrefixes", [])) <= 3
            if not r["IsTruncated"]:
                break
            kw = {"KeyMarker": r["NextKeyMarker"],
                  "UploadIdMarker": r.get("NextUploadIdMarker", "")}
        assert got == ["a", "a", "a", "b", "e", "g k"] and cps == ["d/", "f/"], (got, cps)
        r = c.list_multipart_uploads(Bucket=b, Delimiter="/", Prefix="d/")
        assert [u["Key"] for u in r["Uploads"]] == ["d/1", "d/2", "d/3"]
        assert "CommonPrefixes" not in r

        # encoding-type=url, raw (boto3 decodes it): the space is %20
        st, _, body = raw(s3_daemon.s3_url, "GET", f"/{b}?uploads&encoding-type=url&prefix=g",
                          body=None)
        assert st == 200 and b"<Key>g%20k</Key>" in body and \
            b"<EncodingType>url</EncodingType>" in body, body
        st, _, body = raw(s3_daemon.s3_url, "GET", f"/{b}?uploads&encoding-type=zip", body=None)
        assert st == 400 and err_code(body) == "InvalidArgument", body

        # the awscli pages on its own (--page-size): every upload once
        out = subprocess.run(["aws", "s3api", "list-multipart-uploads", "--bucket", b,
                              "--page-size", "3", "--endpoint-url", s3_daemon.s3_url],
                             env=aws_env(), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert [(u["Key"], u["UploadId"]) for u in json.loads(out.stdout)["Uploads"]] == ups
    finally:
        for k, up in ups:
            c.abort_multipart_upload(Bucket=b, Key=k, UploadId=up)
    assert "Uploads" not in c.list_multipart_uploads(Bucket=b)
