"""S3 object lock (issue 12) against the real openlaked with boto3 and awscli: buckets created
with lock (versioned for good), default retention, ?retention (GOVERNANCE, COMPLIANCE),
?legal-hold, the x-amz-object-lock-* headers of PUT, copy and CreateMultipartUpload, and every
path that could remove or weaken a locked version refused: delete by version, DeleteObjects
with versions, retention shortened or dropped, GOVERNANCE without the bypass header or without
s3:BypassGovernanceRetention (bob, a non-owner), a legal hold even with the bypass. A PUT makes
a new version: the locked one stays, byte for byte."""

import base64
import datetime
import hashlib
import json
import subprocess

import pytest

from conftest import aws_env
from s3_users import alice, bob, err, users_daemon  # noqa: F401 (fixtures)
from test_s3_common import err_code, raw
from test_s3_post import post, signed_fields

UTC = datetime.timezone.utc


@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-lock-")


def md5(b):
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def later(days=1):
    return datetime.datetime.now(UTC).replace(microsecond=0) + datetime.timedelta(days=days)


def lock_bucket(c, name, rule=None):
    c.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    if rule:
        c.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": rule}})


def put_locked(c, b, k, body, **lock):
    return c.put_object(Bucket=b, Key=k, Body=body, ContentMD5=md5(body), **lock)["VersionId"]


def versions(c, b, k):
    out = c.list_object_versions(Bucket=b, Prefix=k)
    return sorted(v["VersionId"] for v in out.get("Versions", []) if v["Key"] == k)


def test_lock_bucket_configuration(alice):
    b = "lock-cfg"
    lock_bucket(alice, b)
    assert alice.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    cfg = alice.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]
    assert cfg == {"ObjectLockEnabled": "Enabled"}
    # versioning of a lock bucket cannot be suspended
    assert err(alice.put_bucket_versioning, Bucket=b,
               VersioningConfiguration={"Status": "Suspended"}) == (409, "InvalidBucketState")
    assert alice.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    rule = {"Mode": "GOVERNANCE", "Days": 3}
    lock_bucket(alice, b + "-2", rule)
    cfg = alice.get_object_lock_configuration(Bucket=b + "-2")["ObjectLockConfiguration"]
    assert cfg["Rule"]["DefaultRetention"] == rule
    # bad documents: both Days and Years, an unknown mode, Days 0
    for bad, want in (({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, "MalformedXML"),
                      ({"Mode": "FOREVER", "Days": 1}, "MalformedXML"),
                      ({"Mode": "COMPLIANCE", "Days": 0}, "InvalidArgument")):
        assert err(alice.put_object_lock_configuration, Bucket=b, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": bad}}) == (400, want)
    assert alice.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled"}
    # a plain bucket: no configuration, none until versioning is on, then it may be given
    p = "lock-plain"
    alice.create_bucket(Bucket=p)
    assert err(alice.get_object_lock_configuration, Bucket=p) == (
        404, "ObjectLockConfigurationNotFoundError")
    on = {"ObjectLockEnabled": "Enabled"}
    assert err(alice.put_object_lock_configuration, Bucket=p,
               ObjectLockConfiguration=on) == (409, "InvalidBucketState")
    alice.put_object(Bucket=p, Key="k", Body=b"x")
    assert err(alice.get_object_retention, Bucket=p, Key="k") == (400, "InvalidRequest")
    assert err(alice.put_object, Bucket=p, Key="k2", Body=b"x", ContentMD5=md5(b"x"),
               ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later()) == (
        400, "InvalidRequest")
    alice.put_bucket_versioning(Bucket=p, VersioningConfiguration={"Status": "Enabled"})
    alice.put_object_lock_configuration(Bucket=p, ObjectLockConfiguration=on)
    assert alice.get_object_lock_configuration(Bucket=p)["ObjectLockConfiguration"] == on


def test_compliance_version_cannot_be_removed_or_weakened(alice):
    b = "lock-comp"
    lock_bucket(alice, b)
    until = later(2)
    body = b"checkpoint-7 " * 1000
    vid = put_locked(alice, b, "ckpt", body, ObjectLockMode="COMPLIANCE",
                     ObjectLockRetainUntilDate=until)
    h = alice.head_object(Bucket=b, Key="ckpt", VersionId=vid)
    assert h["ObjectLockMode"] == "COMPLIANCE" and h["ObjectLockRetainUntilDate"] == until
    r = alice.get_object_retention(Bucket=b, Key="ckpt", VersionId=vid)["Retention"]
    assert r == {"Mode": "COMPLIANCE", "RetainUntilDate": until}
    assert err(alice.get_object_legal_hold, Bucket=b, Key="ckpt") == (
        404, "NoSuchObjectLockConfiguration")
    # delete by version, with and without the bypass header: refused
    assert err(alice.delete_object, Bucket=b, Key="ckpt", VersionId=vid) == (403, "AccessDenied")
    assert err(alice.delete_object, Bucket=b, Key="ckpt", VersionId=vid,
               BypassGovernanceRetention=True) == (403, "AccessDenied")
    out = alice.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "ckpt", "VersionId": vid}]})
    assert [e["Code"] for e in out["Errors"]] == ["AccessDenied"] and not out.get("Deleted")
    # the refused entry names the version it asked for, as AWS's <Error> does
    assert [(e["Key"], e["VersionId"]) for e in out["Errors"]] == [("ckpt", vid)]
    # shortened, dropped to GOVERNANCE: refused; extended: taken
    for mode, when in (("COMPLIANCE", until - datetime.timedelta(hours=1)),
                       ("GOVERNANCE", until + datetime.timedelta(days=1))):
        assert err(alice.put_object_retention, Bucket=b, Key="ckpt", VersionId=vid,
                   BypassGovernanceRetention=True,
                   Retention={"Mode": mode, "RetainUntilDate": when}) == (403, "AccessDenied")
    longer = until + datetime.timedelta(days=5)
    alice.put_object_retention(Bucket=b, Key="ckpt", VersionId=vid,
                               Retention={"Mode": "COMPLIANCE", "RetainUntilDate": longer})
    assert alice.get_object_retention(Bucket=b, Key="ckpt", VersionId=vid)["Retention"][
        "RetainUntilDate"] == longer
    # a PUT makes a new version; a plain DELETE a marker: the locked version stays whole
    alice.put_object(Bucket=b, Key="ckpt", Body=b"overwritten")
    dm = alice.delete_object(Bucket=b, Key="ckpt")
    assert dm["DeleteMarker"] is True
    assert vid in versions(alice, b, "ckpt")
    got = alice.get_object(Bucket=b, Key="ckpt", VersionId=vid)
    assert got["Body"].read() == body and got["ObjectLockMode"] == "COMPLIANCE"
    # the marker and the unlocked version go as usual
    alice.delete_object(Bucket=b, Key="ckpt", VersionId=dm["VersionId"])
    assert alice.get_object(Bucket=b, Key="ckpt")["Body"].read() == b"overwritten"


def test_governance_needs_bypass_header_and_permission(d, alice, bob):
    b = "lock-gov"
    lock_bucket(alice, b)
    until = later(1)
    vids = [put_locked(alice, b, "k%d" % i, b"v%d" % i, ObjectLockMode="GOVERNANCE",
                       ObjectLockRetainUntilDate=until) for i in range(3)]
    # bob may delete versions by policy, but not bypass governance
    arn = "arn:aws:s3:::" + b + "/*"
    pol = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "bob"},
         "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectRetention"],
         "Resource": arn}]}
    alice.put_bucket_policy(Bucket=b, Policy=json.dumps(pol))
    for c in (alice, bob):
        assert err(c.delete_object, Bucket=b, Key="k0", VersionId=vids[0]) == (
            403, "AccessDenied")
        assert err(c.put_object_retention, Bucket=b, Key="k0", VersionId=vids[0],
                   Retention={"Mode": "GOVERNANCE",
                              "RetainUntilDate": later(0) + datetime.timedelta(hours=1)}) == (
            403, "AccessDenied")
    assert err(bob.delete_object, Bucket=b, Key="k0", VersionId=vids[0],
               BypassGovernanceRetention=True) == (403, "AccessDenied")
    out = bob.delete_objects(Bucket=b, BypassGovernanceRetention=True,
                             Delete={"Objects": [{"Key": "k1", "VersionId": vids[1]}]})
    assert [e["Code"] for e in out["Errors"]] == ["AccessDenied"]
    assert versions(alice, b, "k0") == [vids[0]] and versions(alice, b, "k1") == [vids[1]]
    # the owner with the header may; bob once the policy grants the bypass
    alice.delete_object(Bucket=b, Key="k0", VersionId=vids[0], BypassGovernanceRetention=True)
    assert versions(alice, b, "k0") == []
    pol["Statement"][0]["Action"].append("s3:BypassGovernanceRetention")
    alice.put_bucket_policy(Bucket=b, Policy=json.dumps(pol))
    assert err(bob.delete_object, Bucket=b, Key="k1", VersionId=vids[1]) == (403, "AccessDenied")
    out = bob.delete_objects(Bucket=b, BypassGovernanceRetention=True,
                             Delete={"Objects": [{"Key": "k1", "VersionId": vids[1]}]})
    assert not out.get("Errors") and out["Deleted"][0]["VersionId"] == vids[1]
    # shortening a GOVERNANCE retention with the bypass
    short = later(0) + datetime.timedelta(hours=2)
    bob.put_object_retention(Bucket=b, Key="k2", VersionId=vids[2], BypassGovernanceRetention=True,
                             Retention={"Mode": "GOVERNANCE", "RetainUntilDate": short})
    assert alice.head_object(Bucket=b, Key="k2", VersionId=vids[2])[
        "ObjectLockRetainUntilDate"] == short


def test_legal_hold_holds_against_everyone(alice):
    b = "lock-hold"
    lock_bucket(alice, b)
    vid = put_locked(alice, b, "h", b"held", ObjectLockLegalHoldStatus="ON")
    assert alice.head_object(Bucket=b, Key="h")["ObjectLockLegalHoldStatus"] == "ON"
    assert alice.get_object_legal_hold(Bucket=b, Key="h", VersionId=vid)["LegalHold"] == {
        "Status": "ON"}
    assert err(alice.get_object_retention, Bucket=b, Key="h") == (
        404, "NoSuchObjectLockConfiguration")
    assert err(alice.delete_object, Bucket=b, Key="h", VersionId=vid,
               BypassGovernanceRetention=True) == (403, "AccessDenied")
    alice.put_object_legal_hold(Bucket=b, Key="h", VersionId=vid, LegalHold={"Status": "OFF"})
    assert alice.get_object_legal_hold(Bucket=b, Key="h")["LegalHold"] == {"Status": "OFF"}
    alice.delete_object(Bucket=b, Key="h", VersionId=vid)
    assert versions(alice, b, "h") == []
    # the hold is set on an existing version too, and its data and ETag stay
    v2 = alice.put_object(Bucket=b, Key="h2", Body=b"later")["VersionId"]
    etag = alice.head_object(Bucket=b, Key="h2")["ETag"]
    alice.put_object_legal_hold(Bucket=b, Key="h2", VersionId=v2, LegalHold={"Status": "ON"})
    assert err(alice.delete_object, Bucket=b, Key="h2", VersionId=v2) == (403, "AccessDenied")
    h = alice.head_object(Bucket=b, Key="h2", VersionId=v2)
    assert h["ETag"] == etag and h["VersionId"] == v2
    with pytest.raises(Exception):
        alice.put_object_legal_hold(Bucket=b, Key="h2", LegalHold={"Status": "MAYBE"})


def test_default_retention_applies_to_new_versions(d, alice):
    b = "lock-default"
    lock_bucket(alice, b, {"Mode": "COMPLIANCE", "Days": 2})
    before = datetime.datetime.now(UTC)
    vid = alice.put_object(Bucket=b, Key="a", Body=b"a")["VersionId"]
    h = alice.head_object(Bucket=b, Key="a")
    assert h["ObjectLockMode"] == "COMPLIANCE"
    want = before + datetime.timedelta(days=2)
    assert abs((h["ObjectLockRetainUntilDate"] - want).total_seconds()) < 120
    assert err(alice.delete_object, Bucket=b, Key="a", VersionId=vid) == (403, "AccessDenied")
    # explicit headers win over the default; a copy and a multipart upload get the default
    g = later(5)
    put_locked(alice, b, "b", b"b", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=g)
    h = alice.head_object(Bucket=b, Key="b")
    assert h["ObjectLockMode"] == "GOVERNANCE" and h["ObjectLockRetainUntilDate"] == g
    alice.copy_object(Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "b"})
    assert alice.head_object(Bucket=b, Key="c")["ObjectLockMode"] == "COMPLIANCE"
    up = alice.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    e = alice.upload_part(Bucket=b, Key="m", UploadId=up, PartNumber=1, Body=b"m" * 100)["ETag"]
    mv = alice.complete_multipart_upload(Bucket=b, Key="m", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e}]})["VersionId"]
    assert alice.head_object(Bucket=b, Key="m")["ObjectLockMode"] == "COMPLIANCE"
    assert err(alice.delete_object, Bucket=b, Key="m", VersionId=mv) == (403, "AccessDenied")
    # and a browser POST upload
    fields = {"key": "f/${filename}"}
    fields.update(signed_fields("alicekey", "alicesecret",
                                [{"bucket": b}, ["starts-with", "$key", "f/"]]))
    st, _, resp = post(d, b, fields)
    assert st == 204, resp
    assert alice.head_object(Bucket=b, Key="f/hello.txt")["ObjectLockMode"] == "COMPLIANCE"
    # awscli sees the same lock
    out = subprocess.run(["aws", "s3api", "get-object-retention", "--bucket", b, "--key", "m",
                          "--endpoint-url", d.s3_url], env=aws_env_for(d), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["Retention"]["Mode"] == "COMPLIANCE"
    out = subprocess.run(["aws", "s3api", "delete-object", "--bucket", b, "--key", "m",
                          "--version-id", mv, "--endpoint-url", d.s3_url], env=aws_env_for(d),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "AccessDenied" in out.stderr


def aws_env_for(d):
    env = aws_env()
    env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "alicekey", "alicesecret"
    return env


def test_lock_header_and_document_errors(d, alice):
    b = "lock-errs"
    lock_bucket(alice, b)
    x = b"x"
    cases = [
        (dict(ObjectLockMode="GOVERNANCE"), "InvalidArgument"),  # no date
        (dict(ObjectLockRetainUntilDate=later()), "InvalidArgument"),  # no mode
        (dict(ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later(-1)),
         "InvalidArgument"),  # in the past
        (dict(ObjectLockMode="WORM", ObjectLockRetainUntilDate=later()), "InvalidArgument"),
        (dict(ObjectLockLegalHoldStatus="MAYBE"), "InvalidArgument"),
    ]
    for kw, want in cases:
        assert err(alice.put_object, Bucket=b, Key="e", Body=x, ContentMD5=md5(x), **kw) == (
            400, want), kw
    # lock headers without Content-MD5 or a checksum (boto3 always adds one: a raw request)
    st, _, body = raw(d.s3_url, "PUT", "/%s/e" % b, body=x, headers={
        "x-amz-object-lock-mode": "GOVERNANCE",
        "x-amz-object-lock-retain-until-date": later().strftime("%Y-%m-%dT%H:%M:%SZ")})
    assert (st, err_code(body)) == (400, "InvalidRequest"), body
    st, _, body = raw(d.s3_url, "PUT", "/%s?object-lock" % b, body=(
        b"<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled>"
        b"</ObjectLockConfiguration>"))
    assert (st, err_code(body)) == (400, "InvalidRequest"), body
    assert "Versions" not in alice.list_object_versions(Bucket=b)
    vid = alice.put_object(Bucket=b, Key="e", Body=x)["VersionId"]
    assert err(alice.get_object_retention, Bucket=b, Key="e") == (
        404, "NoSuchObjectLockConfiguration")
    assert err(alice.put_object_retention, Bucket=b, Key="e", VersionId=vid, Retention={
        "Mode": "GOVERNANCE", "RetainUntilDate": later(-1)}) == (400, "InvalidArgument")
    assert err(alice.put_object_retention, Bucket=b, Key="missing", Retention={
        "Mode": "GOVERNANCE", "RetainUntilDate": later()}) == (404, "NoSuchKey")
    # an unlocked version is still free to go
    alice.delete_object(Bucket=b, Key="e", VersionId=vid)
    assert versions(alice, b, "e") == []
