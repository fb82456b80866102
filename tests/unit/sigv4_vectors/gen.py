#!/usr/bin/python3
"""Print SigV4 test vectors for tests/unit/test_sigv4.c.

Signatures come from botocore (Debian's python3-botocore: SigV4Auth, S3SigV4Auth,
S3SigV4QueryAuth) at a fixed time with fixed credentials. aws-chunked bodies with trailers,
which botocore 1.29 cannot produce, are built here with hmac/hashlib following the AWS
documentation (an implementation independent of the C code under test).

Usage: /usr/bin/python3 gen.py > vectors.txt
"""
import base64
import datetime
import hashlib
import hmac
import unittest.mock
import zlib
from urllib.parse import urlsplit

import botocore.auth
import botocore.config
import botocore.credentials
from botocore.awsrequest import AWSRequest

ACCESS = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
HOST = "127.0.0.1:9000"
T0 = datetime.datetime(2026, 12, 1, 18, 30, 0)
EPOCH0 = int(T0.replace(tzinfo=datetime.timezone.utc).timestamp())
UNSIGNED_CFG = botocore.config.Config(s3={"payload_signing_enabled": False})


class StreamingS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """botocore 1.29 knows no streaming modes: only the payload literal is overridden,
    canonical request and signature stay botocore's."""

    def __init__(self, creds, service, region, literal):
        super().__init__(creds, service, region)
        self._literal = literal

    def payload(self, request):
        return self._literal


class FixedDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return T0


def sign(method, url, headers=None, body=b"", unsigned=False, region=REGION,
         access=ACCESS, presign_expires=None, streaming=None):
    """Returns the prepared request botocore would send."""
    creds = botocore.credentials.Credentials(access, SECRET)
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    if unsigned:
        req.context["client_config"] = UNSIGNED_CFG
    if streaming is not None:
        auth = StreamingS3SigV4Auth(creds, "s3", region, streaming)
    elif presign_expires is not None:
        auth = botocore.auth.S3SigV4QueryAuth(creds, "s3", region, expires=presign_expires)
    else:
        auth = botocore.auth.S3SigV4Auth(creds, "s3", region)
    with unittest.mock.patch.object(botocore.auth.datetime, "datetime", FixedDatetime):
        auth.add_auth(req)
    return req


def emit(name, req, now=EPOCH0, expect="ok", wire_query=None, extra=()):
    p = urlsplit(req.url)
    print(f"test {name}")
    print(f"now {now}")
    print(f"method {req.method}")
    print(f"path {p.path}")
    print(f"query {p.query if wire_query is None else wire_query}")
    for k, v in req.headers.items():
        v = v.decode() if isinstance(v, bytes) else v
        print(f"header {k}:{v}")
    if "Host" not in req.headers and "host" not in req.headers:
        print(f"header host:{p.netloc}")
    for line in extra:
        print(line)
    print(f"expect {expect}")
    print("end")
    print()


def seed_of(req):
    a = req.headers["Authorization"]
    return a.rsplit("Signature=", 1)[1]


def header_cases():
    r = sign("GET", f"http://{HOST}/bucket/key")
    emit("get-simple", r, extra=["payload SHA256", f"seed {seed_of(r)}"])
    # query params the way botocore's serializer encodes them: spaces %20, '+' %2B, '%' %25,
    # unicode, empty values, a bare name, repeated names
    q = ("prefix=a%20b%2Bc&delimiter=%2F&max-keys=10&empty=&bare&r=2&r=1"
         "&%E2%82%ACuro=%C3%A9t%C3%A9&pct=100%25")
    r = sign("GET", f"http://{HOST}/bucket?{q}")
    emit("get-query-mixed", r, extra=[f"seed {seed_of(r)}"])
    # same signature when the wire has lowercase escapes and a literal '+' (re-encoded as %2B)
    emit("get-query-literal-plus-lowercase-hex", r,
         wire_query=q.replace("%2B", "+").replace("%E2%82%AC", "%e2%82%ac"))
    r = sign("GET", f"http://{HOST}/bucket/dir/a%20b%2Bc%25d%E2%82%AC//x")
    emit("get-path-encoded", r)
    r = sign("GET", f"http://{HOST}/bucket/k", headers={"Range": "bytes=0-9",
                                                        "X-Amz-Meta-Note": "  two   spaces  "})
    emit("get-range-meta-header-spaces", r)
    r = sign("PUT", f"http://{HOST}/bucket/obj", body=b"hello world\n",
             headers={"Content-Type": "text/plain"})
    emit("put-signed-payload", r, extra=["payload SHA256",
         "sha256 " + hashlib.sha256(b"hello world\n").hexdigest()])
    r = sign("PUT", f"http://{HOST}/bucket/obj", body=b"hello world\n", unsigned=True)
    emit("put-unsigned-payload", r, extra=["payload UNSIGNED"])
    r = sign("GET", f"http://{HOST}/")
    emit("list-buckets", r)
    return r


def negative_cases():
    r = sign("GET", f"http://{HOST}/bucket/key?list-type=2")
    bad = dict(r.headers)
    a = bad["Authorization"]
    bad["Authorization"] = a[:-1] + ("0" if a[-1] != "0" else "1")
    r2 = AWSRequest(method="GET", url=r.url, headers=bad)
    emit("tampered-signature", r2, expect="SIGNATURE_MISMATCH")
    emit("tampered-query", r, wire_query="list-type=1", expect="SIGNATURE_MISMATCH")
    emit("wrong-region", sign("GET", f"http://{HOST}/bucket/key", region="us-west-2"),
         expect="WRONG_REGION")
    emit("skewed-late", r, now=EPOCH0 + 16 * 60, expect="SKEWED")
    emit("skewed-early", r, now=EPOCH0 - 16 * 60, expect="SKEWED")
    emit("within-skew", r, now=EPOCH0 + 14 * 60)
    emit("unknown-key", sign("GET", f"http://{HOST}/bucket/key", access="NOSUCHKEY"),
         expect="INVALID_ACCESS_KEY")
    nohost = dict(r.headers)
    nohost["Authorization"] = nohost["Authorization"].replace("SignedHeaders=host;",
                                                              "SignedHeaders=")
    emit("host-not-signed", AWSRequest(method="GET", url=r.url, headers=nohost),
         expect="MALFORMED")
    badsha = dict(r.headers)
    badsha["X-Amz-Content-SHA256"] = "not-a-hash"
    emit("bad-content-sha256", AWSRequest(method="GET", url=r.url, headers=badsha),
         expect="BAD_CONTENT_SHA256")
    nosha = {k: v for k, v in r.headers.items() if k.lower() != "x-amz-content-sha256"}
    emit("content-sha256-signed-but-absent", AWSRequest(method="GET", url=r.url, headers=nosha),
         expect="SIGNATURE_MISMATCH")
    v2 = {"Authorization": "AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
          "Date": "Tue, 01 Dec 2026 18:30:00 GMT"}
    emit("sigv2-unsupported", AWSRequest(method="GET", url=r.url, headers=v2),
         expect="UNSUPPORTED_ALG")
    emit("anonymous", AWSRequest(method="GET", url=f"http://{HOST}/bucket/key"),
         expect="MISSING")


class PlainSigV4Auth(botocore.auth.SigV4Auth):
    """Plain SigV4 (no x-amz-content-sha256, body hash signed), as curl --aws-sigv4 sends."""


class CurlStyleAuth(PlainSigV4Auth):
    """curl 7.88 signs the path and query exactly as on the wire (unsorted, not
    re-encoded); only that canonicalization is overridden, the rest is botocore's."""

    def canonical_query_string(self, request):
        return urlsplit(request.url).query

    def _normalize_url_path(self, path):
        return path


def sign_plain(method, url, body=b"", cls=PlainSigV4Auth):
    creds = botocore.credentials.Credentials(ACCESS, SECRET)
    req = AWSRequest(method=method, url=url, data=body)
    with unittest.mock.patch.object(botocore.auth.datetime, "datetime", FixedDatetime):
        cls(creds, "s3", REGION).add_auth(req)
    return req


def plain_cases():
    r = sign_plain("GET", f"http://{HOST}/bucket/key")
    emit("plain-sigv4-get-no-body", r)
    body = b"curl style body\n"
    r = sign_plain("PUT", f"http://{HOST}/bucket/obj", body=body)
    cl = f"header Content-Length:{len(body)}"
    emit("plain-sigv4-put-body", r, expect="NEED_BODY_HASH",
         extra=[cl, f"rawbody {body.hex()}"])
    emit("plain-sigv4-put-tampered-body", r, expect="NEED_BODY_HASH",
         extra=[cl, f"rawbody {(body + b'x').hex()}", "bodyexpect SIGNATURE_MISMATCH"])
    r = sign_plain("GET", f"http://{HOST}/bucket?list-type=2&prefix=a+b&delimiter=/&uploads",
                   cls=CurlStyleAuth)
    emit("curl-style-raw-unsorted-query", r)
    r = sign_plain("GET", f"http://{HOST}/bucket/a%20b+c%7e", cls=CurlStyleAuth)
    emit("curl-style-raw-path", r)


def presigned_cases():
    r = sign("GET", f"http://{HOST}/bucket/a%20b%2Bc", presign_expires=3600)
    emit("presigned-get", r, extra=["payload UNSIGNED"])
    emit("presigned-get-late-ok", r, now=EPOCH0 + 3600)
    emit("presigned-get-expired", r, now=EPOCH0 + 3601, expect="EXPIRED")
    emit("presigned-get-not-yet-valid", r, now=EPOCH0 - 16 * 60, expect="EXPIRED")
    q = urlsplit(r.url).query
    emit("presigned-get-tampered", r, wire_query=q.replace("X-Amz-Expires=3600",
                                                           "X-Amz-Expires=3601"),
         expect="SIGNATURE_MISMATCH")
    r = sign("PUT", f"http://{HOST}/bucket/up?partNumber=1&uploadId=xyz",
             presign_expires=604800)
    emit("presigned-put", r, extra=["payload UNSIGNED"])
    q = urlsplit(r.url).query
    emit("presigned-expires-too-long", r,
         wire_query=q.replace("X-Amz-Expires=604800", "X-Amz-Expires=604801"),
         expect="MALFORMED")
    r = sign("GET", f"http://{HOST}/bucket/k", presign_expires=60, region="eu-west-1")
    emit("presigned-wrong-region", r, expect="WRONG_REGION")


# ---- aws-chunked bodies (independent implementation of the AWS documented algorithm) ----

def hm(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256)


def signing_key(date8):
    k = ("AWS4" + SECRET).encode()
    for part in (date8, REGION, "s3", "aws4_request"):
        k = hm(k, part).digest()
    return k


EMPTY = hashlib.sha256(b"").hexdigest()


def chunked_body(mode, seed, amz_date, chunks, trailers):
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = signing_key(amz_date[:8])
    prev = seed
    out = b""
    for data in chunks + [b""]:
        if mode == "unsigned":
            out += f"{len(data):x}\r\n".encode()
        else:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY,
                             hashlib.sha256(data).hexdigest()])
            prev = hm(key, sts).hexdigest()
            out += f"{len(data):x};chunk-signature={prev}\r\n".encode()
        if data or mode == "signed":
            out += data + b"\r\n"
    if mode == "unsigned":
        for k, v in trailers:
            out += f"{k}:{v}\r\n".encode()
        out += b"\r\n"
    elif mode == "signed-trailer":
        canon = "".join(f"{k}:{v}\n" for k, v in trailers)
        sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev,
                         hashlib.sha256(canon.encode()).hexdigest()])
        for k, v in trailers:
            out += f"{k}:{v}\r\n".encode()
        out += f"x-amz-trailer-signature:{hm(key, sts).hexdigest()}\r\n\r\n".encode()
    return out


def streaming_cases():
    chunks = [bytes((i * 7 + j) % 251 for j in range(n)) for i, n in enumerate((100, 60, 7))]
    payload = b"".join(chunks)
    crc = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
    for mode, sha in (("signed", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
                      ("signed-trailer", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"),
                      ("unsigned", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")):
        hdrs = {"Content-Encoding": "aws-chunked",
                "X-Amz-Decoded-Content-Length": str(len(payload))}
        trailers = []
        if mode != "signed":
            hdrs["X-Amz-Trailer"] = "x-amz-checksum-crc32"
            trailers = [("x-amz-checksum-crc32", crc)]
        r = sign("PUT", f"http://{HOST}/bucket/streamed", headers=hdrs, streaming=sha)
        body = chunked_body(mode, seed_of(r), r.context["timestamp"], chunks, trailers)
        extra = [f"seed {seed_of(r)}", f"body {body.hex()}", f"decoded {payload.hex()}"]
        extra += [f"trailer {k}:{v}" for k, v in trailers]
        emit(f"streaming-{mode}", r, extra=extra)


def unsigned_header_cases():
    """x-amz-* headers added after botocore signed the request (what a proxy or a hostile
    client can do): refused with the names listed; the same headers signed are fine."""
    body = b"copy me"
    r = sign("PUT", f"http://{HOST}/bucket/dst", body=body)
    h = dict(r.headers)
    h["x-amz-copy-source"] = "/bucket/secret"
    h["X-Amz-Meta-Owner"] = "mallory"
    h["x-amz-acl"] = "public-read"
    emit("unsigned-amz-headers-added", AWSRequest(method="PUT", url=r.url, headers=h),
         expect="UNSIGNED_HEADERS",
         extra=["unsigned x-amz-copy-source, x-amz-meta-owner, x-amz-acl"])
    r = sign("PUT", f"http://{HOST}/bucket/dst",
             headers={"x-amz-copy-source": "/bucket/src", "x-amz-meta-owner": "alice"})
    emit("signed-copy-source-and-meta", r)
    h = dict(r.headers)
    h["x-amz-tagging"] = "a=b"
    emit("unsigned-tagging-beside-signed", AWSRequest(method="PUT", url=r.url, headers=h),
         expect="UNSIGNED_HEADERS", extra=["unsigned x-amz-tagging"])
    r = sign("PUT", f"http://{HOST}/bucket/obj", presign_expires=3600)
    h = dict(r.headers)
    h["x-amz-copy-source"] = "/bucket/secret"
    emit("presigned-put-unsigned-copy-source",
         AWSRequest(method="PUT", url=r.url, headers=h), expect="UNSIGNED_HEADERS",
         extra=["unsigned x-amz-copy-source"])
    h = dict(r.headers)
    h["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    emit("presigned-put-unsigned-content-sha256",
         AWSRequest(method="PUT", url=r.url, headers=h), expect="UNSIGNED_HEADERS",
         extra=["unsigned x-amz-content-sha256"])
    r = sign("PUT", f"http://{HOST}/bucket/obj", presign_expires=3600,
             headers={"x-amz-meta-owner": "alice", "x-amz-acl": "private"})
    emit("presigned-put-signed-meta", r)
    h = dict(r.headers)
    h["x-amz-meta-other"] = "mallory"
    emit("presigned-put-extra-meta", AWSRequest(method="PUT", url=r.url, headers=h),
         expect="UNSIGNED_HEADERS", extra=["unsigned x-amz-meta-other"])


def main():
    print("# SigV4 vectors generated by gen.py with botocore; do not edit by hand.")
    print(f"access {ACCESS}")
    print(f"secret {SECRET}")
    print(f"region {REGION}")
    print()
    header_cases()
    negative_cases()
    presigned_cases()
    plain_cases()
    streaming_cases()
    unsigned_header_cases()


if __name__ == "__main__":
    main()
