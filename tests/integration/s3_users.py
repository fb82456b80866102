"""Shared by the S3 access tests (test_s3_access, _policy, _bucket_settings, _post): a daemon
with two users besides the administrator (alice owns the buckets, bob is the other), their
boto3 clients, and helpers for refused calls and raw (anonymous) HTTP."""

import http.client
import re
import shutil
import tempfile

import pytest
from botocore.exceptions import ClientError

from conftest import REGION, Daemon

USERS = """
[[credentials]]
user = "alice"
access_key = "alicekey"
secret_key = "alicesecret"

[[credentials]]
user = "bob"
access_key = "bobkey"
secret_key = "bobsecret"
"""


def client(url, ak, sk):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
        region_name=REGION, config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}, connect_timeout=5,
                                          read_timeout=60))


def users_daemon(prefix):
    """Body of a module fixture: `yield from users_daemon("openlake-x-")`."""
    root = tempfile.mkdtemp(prefix=prefix)
    dm = Daemon(root, extra=USERS).start()
    yield dm
    dm.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def alice(d):
    return client(d.s3_url, "alicekey", "alicesecret")


@pytest.fixture(scope="module")
def bob(d):
    return client(d.s3_url, "bobkey", "bobsecret")


def err(fn, *a, **kw):
    """(HTTP status, S3 error code) of a call that must fail."""
    with pytest.raises(ClientError) as e:
        fn(*a, **kw)
    r = e.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


def raw(d, method, path, headers=None, body=None):
    """An unsigned (anonymous) request, as a browser or curl sends it: (status, headers with
    lower-case names, body)."""
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None
