"""The admin plane behind SigV4 of an admin user: status and heal control refuse unsigned
requests, bad signatures and non-admin users with S3 XML errors; metrics and health are open
by default and closed by [admin] keys; the CLI signs its admin calls and explains a refusal;
`openlake heal --json` reports unrecoverable objects in "result"; the console's JavaScript
signer agrees with botocore and its signatures open the real daemon."""

import hashlib
import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timezone

import pytest
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import (ACCESS_KEY, OPENLAKE_CLI, OPENLAKED, REGION, REPO, SECRET_KEY, admin_get,
                      admin_request, boto3_client)

STATUS = "/openlake/admin/v1/status"
HEAL = "/openlake/admin/v1/heal"
# a second S3 user who is not an admin, and a named user marked admin
USERS = """
[[credentials]]
user = "bob"
access_key = "bobkey"
secret_key = "bobsecret"

[[credentials]]
user = "carol"
admin = true
access_key = "carolkey"
secret_key = "carolsecret"
"""
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def xml_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def cli(*args, env=None, timeout=60):
    return subprocess.run([str(OPENLAKE_CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env or ENV)


@pytest.fixture
def users_daemon(openlaked):
    return openlaked(extra=USERS)


def test_status_needs_an_admin_signature(users_daemon):
    d = users_daemon
    status, body = admin_get(d, STATUS, signed=False)
    assert status == 403 and xml_code(body) == "AccessDenied", body
    assert d.data_dirs[0].encode() not in body

    status, body = admin_get(d, STATUS)
    assert status == 200, body
    assert [x["path"] for x in json.loads(body)["drives"]] == d.data_dirs
    status, body = admin_get(d, STATUS, access_key="carolkey", secret_key="carolsecret")
    assert status == 200, body  # a named user with admin = true

    status, body = admin_get(d, STATUS, access_key="bobkey", secret_key="bobsecret")
    assert status == 403 and xml_code(body) == "AccessDenied", body
    assert b"not an admin" in body
    status, body = admin_get(d, STATUS, secret_key="wrong")
    assert status == 403 and xml_code(body) == "SignatureDoesNotMatch", body
    status, body = admin_get(d, STATUS, access_key="nosuchkey", secret_key="x")
    assert status == 403 and xml_code(body) == "InvalidAccessKeyId", body
    # a presigned URL works too, and is checked the same way
    for secret, want in ((SECRET_KEY, 200), ("wrong", 403)):
        req = AWSRequest(method="GET", url=d.s3_url + STATUS)
        S3SigV4QueryAuth(Credentials(ACCESS_KEY, secret), "s3", REGION, expires=60).add_auth(req)
        target = req.url[len(d.s3_url):]
        assert "X-Amz-Signature=" in target
        status, body = admin_get(d, target, signed=False)
        assert status == want, body
    # bob is still an S3 user: the admin flag gates the admin plane only (his own buckets)
    import boto3
    bob = boto3.client("s3", endpoint_url=d.s3_url, aws_access_key_id="bobkey",
                       aws_secret_access_key="bobsecret", region_name=REGION)
    bob.create_bucket(Bucket="bobs")
    assert "Contents" not in bob.list_objects_v2(Bucket="bobs")


def test_status_with_curl_aws_sigv4(users_daemon):
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is not installed")
    d = users_daemon
    url = d.s3_url + STATUS

    def run(user):
        r = subprocess.run([curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "--aws-sigv4",
                            f"aws:amz:{REGION}:s3", "--user", user, url],
                           capture_output=True, timeout=30)
        body, _, code = r.stdout.rpartition(b"\n")
        return int(code), body

    code, body = run(f"{ACCESS_KEY}:{SECRET_KEY}")
    assert code == 200 and json.loads(body)["mode"] == "storage", body
    code, body = run("bobkey:bobsecret")
    assert code == 403 and xml_code(body) == "AccessDenied", body


def test_heal_control_needs_an_admin(users_daemon):
    d = users_daemon
    for method in ("POST", "DELETE", "GET"):
        status, _, body = admin_request(d, method, HEAL, signed=False)
        assert status == 403 and xml_code(body) == "AccessDenied", (method, body)
        status, _, body = admin_request(d, method, HEAL, access_key="bobkey",
                                        secret_key="bobsecret")
        assert status == 403 and xml_code(body) == "AccessDenied", (method, body)
    status, _, body = admin_request(d, "POST", HEAL + "?rate=1000", secret_key="wrong")
    assert status == 403 and xml_code(body) == "SignatureDoesNotMatch", body
    # nothing was started by the refused calls
    status, _, body = admin_request(d, "GET", HEAL)
    assert status == 200 and json.loads(body)["state"] == "idle", body
    status, _, body = admin_request(d, "POST", HEAL)
    assert status == 202, body
    assert f"POST {HEAL} by access key {ACCESS_KEY} from 127.0.0.1" in d.log(), d.log()


def test_metrics_and_health_open_by_default(users_daemon):
    d = users_daemon
    status, body = admin_get(d, "/metrics", signed=False)
    assert status == 200 and b"openlake_s3_requests_total" in body
    assert admin_get(d, "/openlake/health", signed=False) == (200, b"ok\n")
    # the signed forms answer an admin (they are not S3 keys of a bucket "openlake")
    assert admin_get(d, "/openlake/admin/v1/health") == (200, b"ok\n")
    status, body = admin_get(d, "/openlake/admin/v1/metrics")
    assert status == 200 and b"openlake_s3_requests_total" in body, body
    # a signature, when given, is checked even on an open endpoint
    status, body = admin_get(d, "/openlake/admin/v1/metrics", secret_key="wrong")
    assert status == 403 and xml_code(body) == "SignatureDoesNotMatch"


def test_config_keys_close_metrics_and_health_and_open_status(openlaked):
    d = openlaked(extra="[admin]\nmetrics_auth = true\nhealth_auth = true\nstatus_auth = false\n"
                  + USERS)
    for path in ("/metrics", "/openlake/admin/v1/metrics", "/openlake/health",
                 "/openlake/admin/v1/health"):
        status, body = admin_get(d, path, signed=False)
        assert status == 403 and xml_code(body) == "AccessDenied", (path, body)
    status, body = admin_get(d, "/openlake/admin/v1/metrics")
    assert status == 200 and b"openlake_s3_requests_total" in body
    assert admin_get(d, "/openlake/admin/v1/health") == (200, b"ok\n")
    status, body = admin_get(d, "/openlake/admin/v1/health", access_key="bobkey",
                             secret_key="bobsecret")
    assert status == 403 and xml_code(body) == "AccessDenied"
    # status_auth = false: status and heal progress are open, starting a heal is not
    status, body = admin_get(d, STATUS, signed=False)
    assert status == 200 and json.loads(body)["mode"] == "storage"
    status, _, body = admin_request(d, "POST", HEAL, signed=False)
    assert status == 403 and xml_code(body) == "AccessDenied"
    # (detect_leaks=0: an ASan build's --print-config exits without freeing its config)
    r = subprocess.run([str(OPENLAKED), "--config", str(d.config), "--print-config"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\[admin\]\nstatus_auth = false", r.stdout, re.M), r.stdout
    assert 'user = "bob"' in r.stdout and "admin = true" in r.stdout


def test_cli_signs_its_admin_calls(users_daemon, tmp_path):
    d = users_daemon
    r = cli("node", "info", "--endpoint", d.s3_url, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["daemon"]["up"] is True and out["daemon"]["version"]
    assert [x["path"] for x in out["drives"]] == d.data_dirs  # from the signed status
    r = cli("heal", "--endpoint", d.s3_url, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "done"
    # keys from the environment
    env = dict(ENV, AWS_ACCESS_KEY_ID="carolkey", AWS_SECRET_ACCESS_KEY="carolsecret")
    r = cli("heal", "--endpoint", d.s3_url, "--status", env=env)
    assert r.returncode == 0, r.stderr
    # keys from --config: the first admin entry, after a non-admin one
    cfg = tmp_path / "client.toml"
    cfg.write_text(f's3_addr = "127.0.0.1:{d.s3_port}"\n' + USERS)
    r = cli("heal", "--config", cfg, "--status")
    assert r.returncode == 0, r.stderr


def test_cli_explains_refused_keys(users_daemon):
    d = users_daemon
    r = cli("heal", "--endpoint", d.s3_url, "--access-key", ACCESS_KEY, "--secret-key", "wrong")
    assert r.returncode == 1
    assert "SignatureDoesNotMatch" in r.stderr and "secret key is wrong" in r.stderr, r.stderr
    assert "--secret-key" in r.stderr and "AWS_SECRET_ACCESS_KEY" in r.stderr, r.stderr
    r = cli("node", "info", "--endpoint", d.s3_url, "--access-key", "bobkey",
            "--secret-key", "bobsecret")
    assert r.returncode == 1
    assert "AccessDenied" in r.stderr and "not an admin" in r.stderr, r.stderr
    assert "admin = true" in r.stderr and "bobkey" in r.stderr, r.stderr
    r = cli("disk", "info", "--endpoint", d.s3_url, "--access-key", "nosuch", "--secret-key", "x")
    assert r.returncode == 1 and "InvalidAccessKeyId" in r.stderr, r.stderr
    r = cli("heal", "--endpoint", d.s3_url, "--access-key", "only-one")
    assert r.returncode == 2 and "--secret-key" in r.stderr, r.stderr
    # nothing was started by the refused heal
    status, _, body = admin_request(d, "GET", HEAL)
    assert json.loads(body)["state"] == "idle", body


def test_heal_json_result_reflects_unrecoverable(openlaked):
    d = openlaked()
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket="lost")
    s3.put_object(Bucket="lost", Key="obj", Body=os.urandom(1 << 20))  # not inline: shards
    s3.put_object(Bucket="lost", Key="small", Body=b"kept")
    shards = []
    for drive in d.data_dirs[:2]:  # two shards gone, parity is 1
        for root, _, names in os.walk(os.path.join(drive, ".openlake", "data")):
            shards += [os.path.join(root, n) for n in names]
    assert len(shards) == 2, shards
    for p in shards:
        os.unlink(p)
    r = cli("heal", "--endpoint", d.s3_url, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["unrecoverable"] == 1 and j["result"] != 0, j
    r = cli("heal", "--endpoint", d.s3_url, "--status", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["result"] != 0, r.stdout
    assert s3.get_object(Bucket="lost", Key="small")["Body"].read() == b"kept"


# ---- the console's JavaScript signer ----

def console_signer():
    html = (REPO / "src" / "admin" / "console.html").read_text()
    m = re.search(r"// ---- sigv4 begin.*?\n(.*)// ---- sigv4 end", html, re.S)
    assert m, "console.html has no delimited SigV4 signer"
    return m.group(1)


def js_sign(tmp_path, req):
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    js = tmp_path / "sign.js"
    js.write_text(console_signer() + """
const req = JSON.parse(process.argv[2]);
req.date = new Date(req.date);
SigV4.sign(req).then((h) => console.log(JSON.stringify(h)));
""")
    r = subprocess.run([node, str(js), json.dumps(req)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("method,target", [("GET", STATUS), ("POST", HEAL + "?rate=1048576"),
                                           ("GET", "/openlake/admin/v1/x%20y?b=2&a=1&a=0")])
def test_console_signer_matches_botocore(tmp_path, method, target):
    path, _, query = target.partition("?")
    host, amz = "127.0.0.1:9000", "20261203T101112Z"
    h = js_sign(tmp_path, dict(method=method, host=host, path=path, query=query,
                               accessKey="AKID", secretKey="s3cr3t/+=", region="eu-west-3",
                               date="2026-12-03T10:11:12.345Z"))
    assert h["x-amz-date"] == amz
    req = AWSRequest(method=method, url=f"http://{host}{target}", data=b"", headers={
        "host": host, "x-amz-date": amz, "x-amz-content-sha256": h["x-amz-content-sha256"]})
    req.context["timestamp"] = amz
    auth = S3SigV4Auth(Credentials("AKID", "s3cr3t/+="), "s3", "eu-west-3")
    sig = auth.signature(auth.string_to_sign(req, auth.canonical_request(req)), req)
    assert h["x-amz-content-sha256"] == hashlib.sha256(b"").hexdigest()
    assert h["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKID/20261203/eu-west-3/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={sig}")


def test_console_signatures_open_the_daemon(users_daemon, tmp_path):
    d = users_daemon
    status, body = admin_get(d, "/openlake/console", signed=False)
    assert status == 200 and b"crypto.subtle" in body
    assert b"sessionStorage" not in body and b"localStorage" not in body  # memory only
    host = f"127.0.0.1:{d.s3_port}"
    now = datetime.now(timezone.utc).isoformat()

    def call(method, target, secret):
        path, _, query = target.partition("?")
        h = js_sign(tmp_path, dict(method=method, host=host, path=path, query=query,
                                   accessKey=ACCESS_KEY, secretKey=secret, region=REGION,
                                   date=now))
        return admin_request(d, method, target, signed=False, headers=h)

    status, _, body = call("GET", STATUS, SECRET_KEY)
    assert status == 200 and json.loads(body)["mode"] == "storage", body
    status, _, body = call("GET", "/openlake/admin/v1/metrics", SECRET_KEY)
    assert status == 200 and b"openlake_heal_running" in body
    status, _, body = call("POST", HEAL + "?rate=100000000", SECRET_KEY)
    assert status == 202, body
    status, _, body = call("GET", STATUS, "wrong")
    assert status == 403 and xml_code(body) == "SignatureDoesNotMatch", body
