"""Hostile S3 requests against the real openlaked: x-amz-* headers slipped past the signature
(header-signed and presigned), conditional writes that must not happen (and must be atomic),
server-side-encryption headers that must not be silently ignored, bad listing counts and
oversized user metadata. Every refusal is checked for the exact S3 status and code, and for
leaving the stored data as it was."""

import http.client
import re
import threading
import time
import urllib.parse

import pytest
from botocore.exceptions import ClientError

from conftest import boto3_client
from test_s3_common import err_code, raw

BUCKET = "hostile"


@pytest.fixture(scope="module")
def url(s3_daemon):
    return s3_daemon.s3_url


@pytest.fixture(scope="module")
def s3(s3_client):
    s3_client.create_bucket(Bucket=BUCKET)
    return s3_client


@pytest.fixture(scope="module")
def presigner(url, s3):
    return boto3_client(url, signature_version="s3v4")


def code_of(e):
    return e.value.response["Error"]["Code"]


def status_of(e):
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def body_of(s3, key):
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def absent(s3, key):
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=BUCKET, Key=key)
    return status_of(e) == 404


def xml_elem(body, name):
    m = re.search(rb"<%s>([^<]*)</%s>" % (name.encode(), name.encode()), body)
    return m.group(1).decode() if m else None


def send(base_url, method, path_query, headers, body=b""):
    """One request exactly as given (no signing): (status, body)."""
    u = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest(method, path_query, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", u.netloc)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            conn.send(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def client_adding_after_signing(url, headers):
    """A boto3 client whose requests get `headers` added after SigV4 signed them."""
    c = boto3_client(url)

    def add(request, **kw):
        for k, v in headers.items():
            request.headers[k] = v

    c.meta.events.register("before-send.s3", add)
    return c


# ------------------------------------------------ x-amz-* headers outside the signature

UNSIGNED_SETS = [
    {"x-amz-copy-source": f"/{BUCKET}/secret"},
    {"x-amz-meta-owner": "mallory", "x-amz-acl": "public-read"},
    {"x-amz-tagging": "a=b"},
]


@pytest.mark.parametrize("extra", UNSIGNED_SETS, ids=lambda h: ",".join(h))
def test_signed_put_with_unsigned_amz_headers_refused(s3, url, extra):
    s3.put_object(Bucket=BUCKET, Key="secret", Body=b"top secret")
    s3.put_object(Bucket=BUCKET, Key="victim", Body=b"original")
    evil = client_adding_after_signing(url, extra)
    for key in ("victim", "fresh-" + "-".join(extra)):
        with pytest.raises(ClientError) as e:
            evil.put_object(Bucket=BUCKET, Key=key, Body=b"overwritten")
        assert status_of(e) == 403 and code_of(e) == "AccessDenied"
        assert e.value.response["Error"]["Message"] == \
            "There were headers present in the request which were not signed"
        listed = e.value.response["Error"].get("HeadersNotSigned", "")
        assert sorted(listed.split(", ")) == sorted(extra)
    assert body_of(s3, "victim") == b"original"
    assert absent(s3, "fresh-" + "-".join(extra))
    h = s3.head_object(Bucket=BUCKET, Key="victim")
    assert "owner" not in h.get("Metadata", {})


@pytest.mark.parametrize("extra", UNSIGNED_SETS, ids=lambda h: ",".join(h))
def test_presigned_put_with_unsigned_amz_headers_refused(s3, presigner, url, extra):
    s3.put_object(Bucket=BUCKET, Key="secret", Body=b"top secret")
    key = "pre-" + "-".join(extra)
    purl = presigner.generate_presigned_url("put_object",
                                            Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=600)
    pq = purl[len(url):]
    st, body = send(url, "PUT", pq, extra, b"via presigned")
    assert st == 403 and err_code(body) == "AccessDenied"
    assert b"There were headers present in the request which were not signed" in body
    assert sorted(xml_elem(body, "HeadersNotSigned").split(", ")) == sorted(extra)
    assert absent(s3, key)
    # the URL itself is good: without the extra headers it stores the body
    st, body = send(url, "PUT", pq, {}, b"via presigned")
    assert st == 200, body
    assert body_of(s3, key) == b"via presigned"


def test_signed_copy_and_signed_metadata_still_work(s3, presigner, url):
    s3.put_object(Bucket=BUCKET, Key="copy-src", Body=b"copy me")
    s3.copy_object(Bucket=BUCKET, Key="copy-dst", CopySource=f"{BUCKET}/copy-src",
                   Metadata={"k": "v"}, MetadataDirective="REPLACE")
    assert body_of(s3, "copy-dst") == b"copy me"
    assert s3.head_object(Bucket=BUCKET, Key="copy-dst")["Metadata"] == {"k": "v"}
    # a copy signed by hand (raw signs every header it sends) works too
    st, _, body = raw(url, "PUT", f"/{BUCKET}/copy-raw",
                      {"x-amz-copy-source": f"/{BUCKET}/copy-src"}, b"")
    assert st == 200, body
    assert body_of(s3, "copy-raw") == b"copy me"
    # presigned with metadata: botocore signs x-amz-meta-*, the client sends it
    purl = presigner.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "pre-meta", "Metadata": {"a": "1"}},
        ExpiresIn=600)
    st, body = send(url, "PUT", purl[len(url):], {"x-amz-meta-a": "1"}, b"with meta")
    assert st == 200, body
    h = s3.head_object(Bucket=BUCKET, Key="pre-meta")
    assert h["Metadata"] == {"a": "1"}


# ------------------------------------------------ conditional writes


def put_cond(url, key, headers, data):
    st, _, body = raw(url, "PUT", f"/{BUCKET}/{key}", headers, data)
    return st, err_code(body)


def test_put_if_none_match(s3, url):
    s3.put_object(Bucket=BUCKET, Key="inm", Body=b"v1")
    etag = s3.head_object(Bucket=BUCKET, Key="inm")["ETag"]
    assert put_cond(url, "inm", {"If-None-Match": "*"}, b"v2") == (412, "PreconditionFailed")
    assert body_of(s3, "inm") == b"v1"
    for v in (etag, '"00000000000000000000000000000000"'):
        assert put_cond(url, "inm", {"If-None-Match": v}, b"v3") == (501, "NotImplemented")
        assert body_of(s3, "inm") == b"v1"
    assert put_cond(url, "inm-etag-new", {"If-None-Match": etag}, b"x") == \
        (501, "NotImplemented")
    assert absent(s3, "inm-etag-new")
    assert put_cond(url, "inm-new", {"If-None-Match": "*"}, b"new") == (200, None)
    assert body_of(s3, "inm-new") == b"new"


def test_put_if_match(s3, url):
    s3.put_object(Bucket=BUCKET, Key="im", Body=b"v1")
    etag = s3.head_object(Bucket=BUCKET, Key="im")["ETag"]
    assert put_cond(url, "im", {"If-Match": '"0123456789abcdef0123456789abcdef"'}, b"bad") == \
        (412, "PreconditionFailed")
    assert body_of(s3, "im") == b"v1"
    assert put_cond(url, "im-missing", {"If-Match": etag}, b"x") == (404, "NoSuchKey")
    assert absent(s3, "im-missing")
    assert put_cond(url, "im", {"If-Match": etag}, b"v2") == (200, None)
    assert body_of(s3, "im") == b"v2"
    # the old ETag no longer matches
    assert put_cond(url, "im", {"If-Match": etag}, b"v3") == (412, "PreconditionFailed")
    assert body_of(s3, "im") == b"v2"


def test_copy_object_destination_conditions(s3, url):
    s3.put_object(Bucket=BUCKET, Key="cc-src", Body=b"source")
    s3.put_object(Bucket=BUCKET, Key="cc-dst", Body=b"dest v1")
    etag = s3.head_object(Bucket=BUCKET, Key="cc-dst")["ETag"]
    cs = {"x-amz-copy-source": f"/{BUCKET}/cc-src"}
    assert put_cond(url, "cc-dst", {**cs, "If-None-Match": "*"}, b"") == \
        (412, "PreconditionFailed")
    assert put_cond(url, "cc-dst", {**cs, "If-Match": '"0000"'}, b"") == \
        (412, "PreconditionFailed")
    assert put_cond(url, "cc-none", {**cs, "If-Match": etag}, b"") == (404, "NoSuchKey")
    assert body_of(s3, "cc-dst") == b"dest v1" and absent(s3, "cc-none")
    assert put_cond(url, "cc-dst", {**cs, "If-Match": etag}, b"") == (200, None)
    assert body_of(s3, "cc-dst") == b"source"


def start_mpu(s3, key, data):
    up = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    e = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=1, Body=data)["ETag"]
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
           "</CompleteMultipartUpload>" % e).encode()
    return up, xml


def complete_cond(url, key, up, xml, headers):
    st, _, body = raw(url, "POST", f"/{BUCKET}/{key}?uploadId={up}", headers, xml)
    return st, err_code(body)


def upload_alive(s3, key, up):
    return s3.list_parts(Bucket=BUCKET, Key=key, UploadId=up)["Parts"] != []


def test_complete_multipart_conditions(s3, url):
    s3.put_object(Bucket=BUCKET, Key="mpu", Body=b"v1")
    etag = s3.head_object(Bucket=BUCKET, Key="mpu")["ETag"]
    up, xml = start_mpu(s3, "mpu", b"multipart body")
    refusals = [({"If-None-Match": "*"}, (412, "PreconditionFailed")),
                ({"If-None-Match": etag}, (501, "NotImplemented")),
                ({"If-Match": '"0123456789abcdef0123456789abcdef"'},
                 (412, "PreconditionFailed"))]
    for hdrs, want in refusals:
        assert complete_cond(url, "mpu", up, xml, hdrs) == want, hdrs
        assert body_of(s3, "mpu") == b"v1"
        assert upload_alive(s3, "mpu", up)
    assert complete_cond(url, "mpu", up, xml, {"If-Match": etag}) == (200, None)
    assert body_of(s3, "mpu") == b"multipart body"
    # If-Match on a key that does not exist: 404, nothing created
    up, xml = start_mpu(s3, "mpu-missing", b"nope")
    assert complete_cond(url, "mpu-missing", up, xml, {"If-Match": etag}) == (404, "NoSuchKey")
    assert absent(s3, "mpu-missing") and upload_alive(s3, "mpu-missing", up)
    assert complete_cond(url, "mpu-missing", up, xml, {"If-None-Match": "*"}) == (200, None)
    assert body_of(s3, "mpu-missing") == b"nope"


def test_complete_with_other_uploads_pending(s3, url):
    """Completing an upload while others (with parts stored after its own) are in progress
    stores it; the store once failed such a commit with 503."""
    ups = sorted((start_mpu(s3, f"pend-{i}", bytes([48 + i]) * 100) + (f"pend-{i}",)
                  for i in range(3)), key=lambda u: u[0])
    for up, xml, key in ups:
        assert complete_cond(url, key, up, xml, {}) == (200, None), key
    for up, xml, key in ups:
        assert body_of(s3, key) == bytes([48 + int(key[-1])]) * 100


def race(n, fn):
    """Run fn(i) in n threads released together; returns the results by i."""
    out = [None] * n
    gate = threading.Barrier(n, timeout=60)

    def run(i):
        gate.wait()
        out[i] = fn(i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
        assert not t.is_alive()
    return out


def test_racing_if_none_match_puts_one_wins(s3, url):
    n, size = 6, 256 * 1024
    deadline = time.monotonic() + 90
    for rnd in range(4):
        assert time.monotonic() < deadline
        key = f"race-{rnd}"
        datas = [bytes([65 + i]) * size for i in range(n)]
        res = race(n, lambda i: put_cond(url, key, {"If-None-Match": "*"}, datas[i]))
        wins = [i for i, r in enumerate(res) if r == (200, None)]
        assert len(wins) == 1, res
        assert all(r == (412, "PreconditionFailed") for i, r in enumerate(res) if i != wins[0])
        assert body_of(s3, key) == datas[wins[0]]


def test_racing_conditional_completes_one_wins(s3, url):
    n = 4
    ups = [start_mpu(s3, "race-mpu", bytes([97 + i]) * 1000) for i in range(n)]
    res = race(n, lambda i: complete_cond(url, "race-mpu", ups[i][0], ups[i][1],
                                          {"If-None-Match": "*"}))
    wins = [i for i, r in enumerate(res) if r == (200, None)]
    assert len(wins) == 1, res
    assert body_of(s3, "race-mpu") == bytes([97 + wins[0]]) * 1000
    for i, r in enumerate(res):
        if i != wins[0]:
            assert r == (412, "PreconditionFailed")
            s3.abort_multipart_upload(Bucket=BUCKET, Key="race-mpu", UploadId=ups[i][0])


# ------------------------------------------------ server-side encryption that cannot be honoured
# This daemon has no [s3] sse_master_key_file and keeps sse_c_allow_http = false (the
# default): SSE-S3 and SSE-KMS are refused with 501 naming the header, SSE-C over plain HTTP
# with AWS's 400 InvalidRequest; nothing is stored. test_s3_sse.py covers the working modes.

SSEC = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}
SSE_PUT_ARGS = [
    {"ServerSideEncryption": "AES256"},
    {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/x"},
    {"ServerSideEncryption": "aws:kms", "SSEKMSEncryptionContext": "e30="},
]


def assert_not_implemented(e, header_prefix):
    assert status_of(e) == 501 and code_of(e) == "NotImplemented"
    assert header_prefix in e.value.response["Error"].get("Header", "")
    assert header_prefix in e.value.response["Error"]["Message"]


def assert_ssec_needs_tls(e):
    assert status_of(e) == 400 and code_of(e) == "InvalidRequest"
    assert "secure connection" in e.value.response["Error"]["Message"]


@pytest.mark.parametrize("args", SSE_PUT_ARGS + [SSEC], ids=lambda a: "-".join(a))
def test_sse_put_and_create_multipart_refused(s3, args):
    key = "sse-" + "-".join(args)
    check = assert_ssec_needs_tls if args is SSEC else (
        lambda e: assert_not_implemented(e, "x-amz-server-side-encryption"))
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"plaintext", **args)
    check(e)
    assert absent(s3, key)
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=BUCKET, Key=key, **args)
    check(e)
    ups = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    assert key not in [u["Key"] for u in ups]


def test_sse_upload_part_copy_get_head_refused(s3):
    s3.put_object(Bucket=BUCKET, Key="sse-src", Body=b"plain")
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="sse-mpu")["UploadId"]
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=BUCKET, Key="sse-mpu", UploadId=up, PartNumber=1, Body=b"p",
                       **SSEC)
    assert_ssec_needs_tls(e)
    assert s3.list_parts(Bucket=BUCKET, Key="sse-mpu", UploadId=up).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=BUCKET, Key="sse-mpu", UploadId=up)
    for args, st in (({"ServerSideEncryption": "AES256"}, 501), (SSEC, 400),
                     ({"CopySourceSSECustomerAlgorithm": "AES256",
                       "CopySourceSSECustomerKey": "k" * 32}, 400)):
        with pytest.raises(ClientError) as e:
            s3.copy_object(Bucket=BUCKET, Key="sse-dst", CopySource=f"{BUCKET}/sse-src",
                           **args)
        assert status_of(e) == st
        if st == 501:
            assert "server-side-encryption" in e.value.response["Error"]["Header"]
        else:
            assert_ssec_needs_tls(e)
        assert absent(s3, "sse-dst")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="sse-src", **SSEC)
    assert_ssec_needs_tls(e)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=BUCKET, Key="sse-src", **SSEC)
    assert status_of(e) == 400
    assert body_of(s3, "sse-src") == b"plain"


def test_put_bucket_encryption_refused(s3):
    """No master key: a bucket default of AES256 could not be honoured."""
    with pytest.raises(ClientError) as e:
        s3.put_bucket_encryption(
            Bucket=BUCKET,
            ServerSideEncryptionConfiguration={"Rules": [{
                "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    assert status_of(e) == 501 and code_of(e) == "NotImplemented"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_encryption(Bucket=BUCKET)
    assert status_of(e) == 404
    assert code_of(e) == "ServerSideEncryptionConfigurationNotFoundError"


# ------------------------------------------------ listing counts and metadata size

BAD_COUNTS = [
    "?uploads&max-uploads=-5", "?uploads&max-uploads=abc", "?uploads&max-uploads=99999999999",
    "?list-type=3", "?list-type=x", "?max-keys=-1", "?list-type=2&max-keys=ten",
    "?list-type=2&max-keys=2147483648", "?versions&max-keys=-3",
]


@pytest.mark.parametrize("query", BAD_COUNTS)
def test_bad_listing_arguments(s3, url, query):
    st, _, body = raw(url, "GET", f"/{BUCKET}{query}", body=None)
    assert st == 400 and err_code(body) == "InvalidArgument", body


@pytest.mark.parametrize("param", ["max-parts=-5", "max-parts=x", "part-number-marker=-1",
                                   "part-number-marker=1.5"])
def test_bad_list_parts_arguments(s3, url, param):
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="lp")["UploadId"]
    try:
        st, _, body = raw(url, "GET", f"/{BUCKET}/lp?uploadId={up}&{param}", body=None)
        assert st == 400 and err_code(body) == "InvalidArgument", body
        st, _, body = raw(url, "GET", f"/{BUCKET}/lp?uploadId={up}&max-parts=5", body=None)
        assert st == 200, body
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key="lp", UploadId=up)


def test_good_listing_arguments_still_work(s3, url):
    for q in ("?uploads&max-uploads=0", "?uploads&max-uploads=5000", "?list-type=2&max-keys=0",
              "?max-keys=2147483647", "?list-type=1"):
        st, _, body = raw(url, "GET", f"/{BUCKET}{q}", body=None)
        assert st == 200, (q, body)


def test_user_metadata_over_2k_refused(s3):
    big = {"a": "x" * 1000, "b": "y" * 1100}  # 2102 bytes of names and values
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=BUCKET, Key="meta-big", Body=b"data", Metadata=big)
    assert status_of(e) == 400 and code_of(e) == "MetadataTooLarge"
    assert absent(s3, "meta-big")
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=BUCKET, Key="meta-big", Metadata=big)
    assert code_of(e) == "MetadataTooLarge"
    s3.put_object(Bucket=BUCKET, Key="meta-src", Body=b"data")
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=BUCKET, Key="meta-big", CopySource=f"{BUCKET}/meta-src",
                       Metadata=big, MetadataDirective="REPLACE")
    assert code_of(e) == "MetadataTooLarge"
    assert absent(s3, "meta-big")
    # exactly 2 KB is fine
    ok = {"a": "x" * 1000, "b": "y" * 1046}
    s3.put_object(Bucket=BUCKET, Key="meta-ok", Body=b"data", Metadata=ok)
    assert s3.head_object(Bucket=BUCKET, Key="meta-ok")["Metadata"] == ok
