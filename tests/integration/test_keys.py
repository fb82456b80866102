"""S3 keys added at run time (issue 11): the admin creates a key for a user through the CLI and
the admin API, the user's boto3 works with it at once and sees only its own buckets, the key
survives a kill -9 and a restart, removing it stops it at once; only an admin may call the keys
API; the secret is never in the daemon's log (at debug level), in a listing, or in plain text on
the drives; the reserved bucket that holds the keys is invisible to S3; bad requests get clear
errors."""

import json
import os
import pathlib
import subprocess

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, OPENLAKE_CLI, REGION, SECRET_KEY, boto3_client, wait_port
from s3_users import client, err

KEYS = "/openlake/admin/v1/keys"
USERS = """
[[credentials]]
user = "alice"
access_key = "alicekey"
secret_key = "alicesecret"
"""
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def cli(d, *args, stdin=None):
    return subprocess.run([str(OPENLAKE_CLI), "keys", *args, "--config", str(d.config)],
                          capture_output=True, text=True, timeout=60, env=ENV, input=stdin)


def call(d, method, path, body=b"", ak=ACCESS_KEY, sk=SECRET_KEY, signed=True, headers=None):
    """A keys API call signed by botocore (payload hash in x-amz-content-sha256)."""
    import http.client

    hdrs = dict(headers or {})
    if signed:
        req = AWSRequest(method=method, url="http://127.0.0.1:%d%s" % (d.s3_port, path),
                         data=body, headers=hdrs)
        SigV4Auth(Credentials(ak, sk), "s3", REGION).add_auth(req)
        hdrs = dict(req.headers.items())
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30)
    try:
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def drive_bytes(d):
    """Every byte under the daemon's drives (small test data)."""
    out = b""
    for root in d.data_dirs:
        for p in pathlib.Path(root).rglob("*"):
            if p.is_file():
                out += p.read_bytes()
    return out


@pytest.fixture
def d(openlaked):
    return openlaked(extra=USERS, args=("--log_level", "debug"))


def test_runtime_key_lifecycle(d):
    admin = boto3_client(d.s3_url)
    alice = client(d.s3_url, "alicekey", "alicesecret")
    alice.create_bucket(Bucket="alice-b")
    alice.put_object(Bucket="alice-b", Key="a.txt", Body=b"alice's")

    # the admin adds a key for bob (generated pair), printed once
    r = cli(d, "add", "bob", "--json")
    assert r.returncode == 0, r.stderr
    k = json.loads(r.stdout)
    assert k["user"] == "bob" and k["source"] == "runtime" and not k["admin"]
    ak, sk = k["access_key"], k["secret_key"]
    assert len(ak) == 20 and len(sk) == 40

    # bob's boto3 works at once and sees only what bob may
    bob = client(d.s3_url, ak, sk)
    bob.create_bucket(Bucket="bob-b")
    bob.put_object(Bucket="bob-b", Key="b.txt", Body=b"bob's")
    assert [b["Name"] for b in bob.list_buckets()["Buckets"]] == ["bob-b"]
    assert err(bob.get_object, Bucket="alice-b", Key="a.txt") == (403, "AccessDenied")
    assert err(alice.get_object, Bucket="bob-b", Key="b.txt") == (403, "AccessDenied")
    assert "alice-b" not in [b["Name"] for b in bob.list_buckets()["Buckets"]]

    # a given pair (secret from stdin) for a second user
    r = cli(d, "add", "carol", "--key", "CAROLKEY01", "--secret-stdin", stdin="carol-secret-1\n")
    assert r.returncode == 0 and "CAROLKEY01" in r.stdout, r.stderr
    assert "carol-secret-1" not in r.stdout  # a secret given on stdin is not echoed
    carol = client(d.s3_url, "CAROLKEY01", "carol-secret-1")
    assert carol.list_buckets()["Buckets"] == []

    # listings show access keys and users, never a secret
    r = cli(d, "list", "--json")
    assert r.returncode == 0, r.stderr
    listed = {x["access_key"]: x for x in json.loads(r.stdout)["keys"]}
    assert listed[ak]["user"] == "bob" and listed["CAROLKEY01"]["user"] == "carol"
    assert listed[ACCESS_KEY]["source"] == "config" and listed[ACCESS_KEY]["admin"]
    text = cli(d, "list").stdout
    status, body = call(d, "GET", KEYS)
    assert status == 200
    for out in (r.stdout, text, body.decode()):
        assert sk not in out and "carol-secret-1" not in out
        assert "alicesecret" not in out

    # the reserved bucket that holds the records: not listed, not creatable, not readable
    assert "openlake_sys" not in [b["Name"] for b in admin.list_buckets()["Buckets"]]
    assert err(admin.create_bucket, Bucket="openlake_sys") == (400, "InvalidBucketName")
    assert err(admin.get_object, Bucket="openlake_sys", Key="keys/" + ak)[1] in (
        "InvalidBucketName", "NoSuchBucket")
    assert err(admin.list_objects_v2, Bucket="openlake_sys")[1] in (
        "InvalidBucketName", "NoSuchBucket")

    # survives a crash right after: kill -9, start on the same drives
    d.kill9()
    d.start()
    assert bob.get_object(Bucket="bob-b", Key="b.txt")["Body"].read() == b"bob's"
    assert [b["Name"] for b in bob.list_buckets()["Buckets"]] == ["bob-b"]
    assert carol.list_buckets()["Buckets"] == []
    assert "2 run-time S3 keys loaded" in d.log()

    # removal stops the key at once, and it stays removed across a restart
    r = cli(d, "rm", ak)
    assert r.returncode == 0, r.stderr
    assert err(bob.list_buckets) == (403, "InvalidAccessKeyId")
    d.restart()
    assert err(bob.list_buckets) == (403, "InvalidAccessKeyId")
    assert carol.list_buckets()["Buckets"] == []
    # bob's data is still bob's (the admin sees the bucket; nothing was lost)
    assert admin.get_object(Bucket="bob-b", Key="b.txt")["Body"].read() == b"bob's"

    # the secrets are in no log line (debug level) and not in plain text on the drives
    log = d.log()
    assert "created" in log and ak in log
    for secret in (sk, "carol-secret-1"):
        assert secret not in log
    on_disk = drive_bytes(d)
    assert b"carol-secret-1" not in on_disk and b"CAROLKEY01" in on_disk


def test_keys_api_is_for_admins_only(d):
    r = cli(d, "add", "bob", "--json")
    bob_ak, bob_sk = json.loads(r.stdout)["access_key"], json.loads(r.stdout)["secret_key"]
    for ak, sk in (("alicekey", "alicesecret"), (bob_ak, bob_sk)):
        for method, path, body in (("GET", KEYS, b""),
                                   ("POST", KEYS, b'{"user":"mallory"}'),
                                   ("DELETE", KEYS + "/" + bob_ak, b"")):
            status, out = call(d, method, path, body, ak=ak, sk=sk)
            assert status == 403 and b"<Code>AccessDenied</Code>" in out, (method, ak, out)
            assert b"not an admin" in out
    for method in ("GET", "POST"):
        status, out = call(d, method, KEYS, signed=False)
        assert status == 403 and b"AccessDenied" in out
    # a wrong secret for the admin key
    status, out = call(d, "GET", KEYS, sk="wrong-secret")
    assert status == 403 and b"SignatureDoesNotMatch" in out
    # the CLI with a non-admin key says so and how to fix it
    r = subprocess.run([str(OPENLAKE_CLI), "keys", "list", "--endpoint", d.s3_url,
                        "--access-key", "alicekey", "--secret-key", "alicesecret"],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 1 and "AccessDenied" in r.stderr and "--access-key" in r.stderr
    # nothing was created by the refused calls: mallory has no key
    users = [k["user"] for k in json.loads(cli(d, "list", "--json").stdout)["keys"]]
    assert "mallory" not in users and users.count("bob") == 1
    # and bob's key still works
    assert client(d.s3_url, bob_ak, bob_sk).list_buckets()["Buckets"] == []


@pytest.mark.parametrize("body,status,words", [
    (b"not json", 400, "not JSON"),
    (b"[1]", 400, "not a JSON object"),
    (b'{"user":"bob","role":"root"}', 400, 'unknown field "role"'),
    (b'{"user":"admin"}', 400, "administrator"),
    (b'{"user":"b o b"}', 400, '"user" must be'),
    (b'{}', 400, '"user" must be'),
    (b'{"user":"bob","access_key":"BOBKEY1"}', 400, "both"),
    (b'{"user":"bob","access_key":"a/b","secret_key":"12345678"}', 400, '"access_key" must'),
    (b'{"user":"bob","access_key":"BOBKEY1","secret_key":"short"}', 400, '"secret_key" must'),
    (b'{"user":"bob","access_key":"alicekey","secret_key":"12345678"}', 409,
     "config"),
])
def test_bad_create_requests(d, body, status, words):
    got, out = call(d, "POST", KEYS, body)
    assert got == status, out
    doc = json.loads(out)
    assert words in doc["error"] and doc["code"], doc
    assert b"12345678" not in out  # a secret is never echoed


def test_bad_delete_and_method_requests(d):
    # config keys cannot be removed through the API
    status, out = call(d, "DELETE", KEYS + "/alicekey")
    assert status == 409 and b"remove its entry from the config" in out
    r = cli(d, "rm", ACCESS_KEY)
    assert r.returncode == 1 and "[[credentials]]" in r.stderr
    assert boto3_client(d.s3_url).list_buckets() is not None
    # unknown key, bad key, wrong methods
    status, out = call(d, "DELETE", KEYS + "/NOSUCHKEY")
    assert status == 404 and b"NOSUCHKEY" in out
    status, out = call(d, "DELETE", KEYS + "/bad~key")
    assert status == 400 and b"not an access key" in out
    status, out = call(d, "PUT", KEYS)
    assert status == 405 and b"POST" in out
    status, out = call(d, "DELETE", KEYS)
    assert status == 405
    # a body that is not the one signed
    body = b'{"user":"bob"}'
    req = AWSRequest(method="POST", url="http://127.0.0.1:%d%s" % (d.s3_port, KEYS), data=body)
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30)
    c.request("POST", KEYS, body=b'{"user":"eve"}', headers=dict(req.headers.items()))
    r = c.getresponse()
    out = r.read()
    c.close()
    assert r.status in (400, 403) and (b"XAmzContentSHA256Mismatch" in out or
                                       b"SignatureDoesNotMatch" in out), out
    users = [k["user"] for k in json.loads(cli(d, "list", "--json").stdout)["keys"]]
    assert "eve" not in users
    # a body over the cap
    status, out = call(d, "POST", KEYS, b'{"user":"' + b"x" * 8000 + b'"}')
    assert status == 400 and b"EntityTooLarge" in out
    # usage errors of the CLI
    r = cli(d, "add")
    assert r.returncode == 2 and "add takes one USER" in r.stderr
    r = cli(d, "add", "bob", "--key", "BOBKEY1")
    assert r.returncode == 2 and "--secret-stdin" in r.stderr


def test_kv_only_daemon_answers_clearly(openlaked):
    d = openlaked(mode="kv")
    import http.client
    assert wait_port(d.admin_port, 30)
    req = AWSRequest(method="GET", url="http://127.0.0.1:%d%s" % (d.admin_port, KEYS), data=b"")
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    c = http.client.HTTPConnection("127.0.0.1", d.admin_port, timeout=30)
    c.request("GET", KEYS, headers=dict(req.headers.items()))
    r = c.getresponse()
    out = r.read()
    c.close()
    assert r.status == 503 and b"object store" in out
