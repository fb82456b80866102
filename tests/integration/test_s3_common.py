"""Helpers shared by the S3 integration tests (no tests here): raw signed requests (botocore's SigV4 signer
over http.client, so a test can send exactly the headers and body it wants)."""

import hashlib
import http.client
import urllib.parse

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, REGION, SECRET_KEY


def sign(method, url, headers=None, body=b"", access=ACCESS_KEY, secret=SECRET_KEY,
         payload_hash=None):
    """Return the headers of a SigV4-signed request (botocore's signer)."""
    headers = dict(headers or {})
    if payload_hash is None:
        payload_hash = hashlib.sha256(body or b"").hexdigest()
    headers["x-amz-content-sha256"] = payload_hash
    req = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    SigV4Auth(Credentials(access, secret), "s3", REGION).add_auth(req)
    return dict(req.headers.items())


def raw(base_url, method, path, headers=None, body=b"", signed=True, host=None, **kw):
    """Send one request; returns (status, headers dict lowercased, body bytes)."""
    u = urllib.parse.urlsplit(base_url)
    url = base_url + path
    hdrs = dict(headers or {})
    if host:
        hdrs["Host"] = host
    if signed:
        hdrs = sign(method, url if not host else f"http://{host}{path}", hdrs, body, **kw)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if not any(k.lower() == "host" for k in hdrs):
            conn.putheader("Host", u.netloc)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        if body is not None and not any(k.lower() in ("content-length", "transfer-encoding")
                                        for k in hdrs):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            conn.send(body)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def err_code(body):
    import re
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None
