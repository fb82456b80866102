"""aws-chunked uploads in all streaming forms, built here byte by byte (SigV4 seed signature
from botocore, chunk and trailer signatures computed as the AWS spec says), so each form is
checked even when no installed client happens to send it: good uploads commit and read back,
a tampered chunk or a wrong trailing checksum fails and commits nothing."""

import base64
import hashlib
import hmac
import zlib

import pytest

from conftest import REGION, SECRET_KEY
from test_s3_common import err_code, raw, sign

EMPTY = hashlib.sha256(b"").hexdigest()


def _hmac(k, m):
    return hmac.new(k, m.encode() if isinstance(m, str) else m, hashlib.sha256).digest()


def signing_key(date8):
    k = _hmac(("AWS4" + SECRET_KEY).encode(), date8)
    for part in (REGION, "s3", "aws4_request"):
        k = _hmac(k, part)
    return k


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def base_headers(chunks, trailer):
    hdrs = {"Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(sum(len(c) for c in chunks))}
    if trailer:
        hdrs["x-amz-trailer"] = trailer[0]
    return hdrs


def send_encoded(url, path, mode, chunks, trailer, tamper, h):
    """Encode the body for the signed head h (its seed signature chains the chunks) and send."""
    seed = h["Authorization"].rsplit("Signature=", 1)[1]
    amz_date = h["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = signing_key(amz_date[:8])
    prev = seed
    chunk_signed = mode.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    enc = b""
    for i, c in enumerate(list(chunks) + [b""]):
        if chunk_signed:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY,
                             hashlib.sha256(c).hexdigest()])
            sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            prev = sig
            data = bytes([c[0] ^ 1]) + c[1:] if tamper and i == 0 else c
            enc += b"%x;chunk-signature=%s\r\n" % (len(c), sig.encode()) + data
        else:
            enc += b"%x\r\n" % len(c) + c
        if c or not trailer:
            enc += b"\r\n"
    if trailer:
        tline = f"{trailer[0]}:{trailer[1]}"
        enc += tline.encode() + b"\r\n"
        if chunk_signed:
            sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev,
                             hashlib.sha256((tline + "\n").encode()).hexdigest()])
            tsig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            enc += f"x-amz-trailer-signature:{tsig}\r\n".encode()
        enc += b"\r\n"
    assert int(h["Content-Length"]) == len(enc)
    return raw(url, "PUT", path, h, enc, signed=False)


def encoded_len(mode, chunks, trailer):
    """Length of the encoded body (to sign Content-Length before encoding)."""
    chunk_signed = mode.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    n = 0
    for c in list(chunks) + [b""]:
        n += len(b"%x" % len(c)) + (len(";chunk-signature=") + 64 if chunk_signed else 0) + 2
        n += len(c)
        if c or not trailer:
            n += 2
    if trailer:
        n += len(f"{trailer[0]}:{trailer[1]}") + 2
        if chunk_signed:
            n += len("x-amz-trailer-signature:") + 64 + 2
        n += 2
    return n


def put(url, path, mode, chunks, trailer=None, tamper=False):
    hdrs = base_headers(chunks, trailer)
    hdrs["Content-Length"] = str(encoded_len(mode, chunks, trailer))
    h = sign("PUT", url + path, hdrs, b"", payload_hash=mode)
    return send_encoded(url, path, mode, chunks, trailer, tamper, h)


CHUNKS = [b"a" * 65536, bytes(range(256)) * 100, b"tail"]
BODY = b"".join(CHUNKS)


@pytest.fixture(scope="module")
def bucket(s3_client):
    s3_client.create_bucket(Bucket="chunked")
    return "chunked"


def test_signed_chunks(s3_daemon, bucket):
    url = s3_daemon.s3_url
    st, h, body = put(url, "/chunked/signed", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", CHUNKS)
    assert st == 200, body
    assert h["etag"] == '"%s"' % hashlib.md5(BODY).hexdigest()
    assert raw(url, "GET", "/chunked/signed", body=None)[2] == BODY


def test_signed_chunk_tampered_not_committed(s3_daemon, bucket):
    url = s3_daemon.s3_url
    st, _, body = put(url, "/chunked/tampered", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", CHUNKS,
                      tamper=True)
    assert st == 403 and err_code(body) == "SignatureDoesNotMatch"
    assert raw(url, "HEAD", "/chunked/tampered", body=None)[0] == 404


@pytest.mark.parametrize("mode", ["STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                                  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"])
def test_trailer_checksum(s3_daemon, bucket, mode):
    url = s3_daemon.s3_url
    key = "/chunked/" + mode.lower()
    st, h, body = put(url, key, mode, CHUNKS, trailer=("x-amz-checksum-crc32", crc32_b64(BODY)))
    assert st == 200, body
    st, h, got = raw(url, "GET", key, {"x-amz-checksum-mode": "ENABLED"}, body=None)
    assert got == BODY and h["x-amz-checksum-crc32"] == crc32_b64(BODY)
    st, _, body = put(url, key + "-bad", mode, CHUNKS,
                      trailer=("x-amz-checksum-crc32", crc32_b64(b"other")))
    assert st == 400 and err_code(body) == "BadDigest"
    assert raw(url, "HEAD", key + "-bad", body=None)[0] == 404


def test_decoded_length_mismatch(s3_daemon, bucket):
    url = s3_daemon.s3_url
    hdrs = {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "5"}
    enc = b"3\r\nabc\r\n0\r\n\r\n"
    hdrs["Content-Length"] = str(len(enc))
    h = sign("PUT", url + "/chunked/short", hdrs, b"",
             payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    st, _, body = raw(url, "PUT", "/chunked/short", h, enc, signed=False)
    assert st == 400
    assert raw(url, "HEAD", "/chunked/short", body=None)[0] == 404


def test_content_encoding_kept_as_sent_less_aws_chunked(s3_client, bucket):
    # aws-chunked is a transfer framing, never stored; every other coding is returned as the
    # client sent it (", " and all), as AWS returns it.
    for sent, kept in [("gzip", "gzip"), ("deflate, gzip", "deflate, gzip"),
                       ("gzip, aws-chunked", "gzip"), ("aws-chunked, gzip", "gzip"),
                       ("aws-chunked, br, gzip", "br, gzip"), ("aws-chunked", None),
                       ("aws-chunked, aws-chunked", None)]:
        s3_client.put_object(Bucket=bucket, Key="ce", Body=b"", ContentEncoding=sent)
        assert s3_client.head_object(Bucket=bucket, Key="ce").get("ContentEncoding") == kept
