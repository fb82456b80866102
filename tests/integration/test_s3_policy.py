"""Bucket policies (issue 11): PUT/GET/DELETE ?policy and ?policyStatus, evaluated for every
request with two users (alice owns the buckets, bob is the other) and anonymous requests:
principals, actions, resources with wildcards, explicit deny winning, condition keys."""

import http.client
import json

import pytest
from botocore.exceptions import ClientError

from conftest import boto3_client
from s3_users import alice, bob, code, err, raw, users_daemon  # noqa: F401 (fixtures)

ARN = "arn:aws:s3:::"


@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-policy-")


@pytest.fixture(scope="module")
def admin(d):
    return boto3_client(d.s3_url)


def policy(*stmts):
    return json.dumps({"Version": "2012-10-17", "Statement": list(stmts)})


def stmt(effect, principal, action, resource, condition=None):
    s = {"Effect": effect, "Principal": principal, "Action": action, "Resource": resource}
    if condition:
        s["Condition"] = condition
    return s


def setup_bucket(alice, b, keys):
    alice.create_bucket(Bucket=b)
    for k in keys:
        alice.put_object(Bucket=b, Key=k, Body=b"body of " + k.encode())


def test_policy_crud_and_who_may_touch_it(alice, bob):
    b = "pol-crud"
    alice.create_bucket(Bucket=b)
    assert err(alice.get_bucket_policy, Bucket=b) == (404, "NoSuchBucketPolicy")
    assert alice.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False
    alice.put_bucket_acl(Bucket=b, ACL="public-read")  # a public ACL makes the bucket public
    assert alice.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    alice.put_bucket_acl(Bucket=b, ACL="private")
    doc = policy(stmt("Allow", {"AWS": "bob"}, "s3:GetObject", ARN + b + "/*"))
    alice.put_bucket_policy(Bucket=b, Policy=doc)
    assert json.loads(alice.get_bucket_policy(Bucket=b)["Policy"]) == json.loads(doc)
    assert alice.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False
    # the policy is the owner's: bob may not read, replace or delete it
    assert err(bob.get_bucket_policy, Bucket=b) == (403, "AccessDenied")
    assert err(bob.put_bucket_policy, Bucket=b, Policy=doc) == (403, "AccessDenied")
    assert err(bob.delete_bucket_policy, Bucket=b) == (403, "AccessDenied")
    alice.delete_bucket_policy(Bucket=b)
    assert err(alice.get_bucket_policy, Bucket=b) == (404, "NoSuchBucketPolicy")


@pytest.mark.parametrize("doc", [
    "not json",
    '["Statement"]',
    policy(stmt("Maybe", "*", "s3:GetObject", ARN + "pol-bad/*")),
    policy(stmt("Allow", "*", "s3:GetObject", ARN + "some-other-bucket/*")),
    policy(stmt("Allow", {"AWS": "nosuchuser"}, "s3:GetObject", ARN + "pol-bad/*")),
    policy(stmt("Allow", "*", "ec2:RunInstances", ARN + "pol-bad/*")),
    policy(stmt("Allow", "*", "s3:GetObject", ARN + "pol-bad/*", {"Sometimes": {"a:b": "c"}})),
    json.dumps({"Version": "2012-10-17"}),
], ids=["not-json", "array", "effect", "foreign-resource", "unknown-principal", "action",
        "condition-op", "no-statement"])
def test_malformed_policies_are_400(alice, doc):
    try:
        alice.create_bucket(Bucket="pol-bad")
    except ClientError:
        pass
    assert err(alice.put_bucket_policy, Bucket="pol-bad", Policy=doc) == (400, "MalformedPolicy")
    assert err(alice.get_bucket_policy, Bucket="pol-bad") == (404, "NoSuchBucketPolicy")


def test_public_read_prefix_opens_that_prefix_to_anonymous_only(d, alice, bob):
    b = "pol-public"
    setup_bucket(alice, b, ["pub/a.txt", "priv/b.txt"])
    st, _, body = raw(d, "GET", f"/{b}/pub/a.txt")
    assert st == 403 and code(body) == "AccessDenied"
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Allow", "*", "s3:GetObject", ARN + b + "/pub/*")))
    assert alice.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    st, _, body = raw(d, "GET", f"/{b}/pub/a.txt")
    assert st == 200 and body == b"body of pub/a.txt"
    assert bob.get_object(Bucket=b, Key="pub/a.txt")["Body"].read() == b"body of pub/a.txt"
    for method, path in [("GET", f"/{b}/priv/b.txt"), ("GET", f"/{b}"),
                         ("GET", f"/{b}/pub/missing"),  # no s3:ListBucket: 403, not 404
                         ("PUT", f"/{b}/pub/new"), ("DELETE", f"/{b}/pub/a.txt"),
                         ("GET", f"/{b}?policy")]:
        st, _, body = raw(d, method, path, body=b"x" if method == "PUT" else None)
        assert st == 403 and code(body) == "AccessDenied", (method, path, body)
    assert err(bob.get_object, Bucket=b, Key="priv/b.txt") == (403, "AccessDenied")
    alice.delete_bucket_policy(Bucket=b)
    st, _, body = raw(d, "GET", f"/{b}/pub/a.txt")
    assert st == 403


def test_user_grant_with_explicit_deny_winning(alice, bob):
    b = "pol-user"
    setup_bucket(alice, b, ["shared/a", "shared/secret-1", "other/x", "keep/y"])
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Allow", {"AWS": "arn:aws:iam:::user/bob"}, ["s3:GetObject", "s3:PutObject"],
             ARN + b + "/shared/*"),
        stmt("Deny", {"AWS": ["bob"]}, "s3:GetObject", ARN + b + "/shared/secret*"),
        stmt("Deny", "*", ["s3:DeleteObject"], ARN + b + "/keep/*")))
    assert bob.get_object(Bucket=b, Key="shared/a")["Body"].read() == b"body of shared/a"
    bob.put_object(Bucket=b, Key="shared/from-bob", Body=b"hi")
    assert err(bob.get_object, Bucket=b, Key="shared/secret-1") == (403, "AccessDenied")
    assert err(bob.get_object, Bucket=b, Key="other/x") == (403, "AccessDenied")
    assert err(bob.put_object, Bucket=b, Key="other/new", Body=b"x") == (403, "AccessDenied")
    assert err(bob.list_objects_v2, Bucket=b) == (403, "AccessDenied")
    assert err(bob.delete_object, Bucket=b, Key="shared/a") == (403, "AccessDenied")
    # an explicit deny binds the owner too, per key in DeleteObjects
    assert err(alice.delete_object, Bucket=b, Key="keep/y") == (403, "AccessDenied")
    r = alice.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "keep/y"},
                                                            {"Key": "other/x"}]})
    assert [e["Key"] for e in r["Errors"]] == ["keep/y"]
    assert [x["Key"] for x in r["Deleted"]] == ["other/x"]
    assert alice.get_object(Bucket=b, Key="keep/y")["Body"].read() == b"body of keep/y"


def test_condition_keys(alice, bob):
    b = "pol-cond"
    setup_bucket(alice, b, ["bob/1", "alice/1", "ipkey"])
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Allow", {"AWS": "bob"}, "s3:ListBucket", ARN + b,
             {"StringEquals": {"s3:prefix": "bob/"},
              "NumericLessThanEquals": {"s3:max-keys": "100"}}),
        stmt("Allow", {"AWS": "bob"}, "s3:GetObject", ARN + b + "/ipkey",
             {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}),
        stmt("Allow", {"AWS": "bob"}, "s3:GetObject", ARN + b + "/bob/*",
             {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}),
        stmt("Allow", {"AWS": "bob"}, "s3:PutObject", ARN + b + "/drop/*",
             {"StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}})))
    r = bob.list_objects_v2(Bucket=b, Prefix="bob/", MaxKeys=50)
    assert [o["Key"] for o in r["Contents"]] == ["bob/1"]
    assert err(bob.list_objects_v2, Bucket=b) == (403, "AccessDenied")
    assert err(bob.list_objects_v2, Bucket=b, Prefix="alice/") == (403, "AccessDenied")
    assert err(bob.list_objects_v2, Bucket=b, Prefix="bob/", MaxKeys=500) == \
        (403, "AccessDenied")
    assert err(bob.get_object, Bucket=b, Key="ipkey") == (403, "AccessDenied")  # not 10/8
    assert bob.get_object(Bucket=b, Key="bob/1")["Body"].read() == b"body of bob/1"
    assert err(bob.put_object, Bucket=b, Key="drop/x", Body=b"x") == (403, "AccessDenied")
    bob.put_object(Bucket=b, Key="drop/x", Body=b"for alice", ACL="bucket-owner-full-control")
    assert alice.get_object(Bucket=b, Key="drop/x")["Body"].read() == b"for alice"


def test_secure_transport_deny(d, alice, admin):
    b = "pol-tls"
    setup_bucket(alice, b, ["k"])
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Deny", "*", "s3:GetObject", ARN + b + "/*",
             {"Bool": {"aws:SecureTransport": "false"}})))
    # this endpoint is plain HTTP: the deny applies, to the owner as to everyone
    assert err(alice.get_object, Bucket=b, Key="k") == (403, "AccessDenied")
    st, _, body = raw(d, "GET", f"/{b}/k")
    assert st == 403
    # the administrator is above bucket policies (it can always repair them)
    assert admin.get_object(Bucket=b, Key="k")["Body"].read() == b"body of k"
    alice.delete_bucket_policy(Bucket=b)
    assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"body of k"


def test_policy_changes_apply_at_once_on_every_connection(d, alice):
    """Bucket attrs are cached per request thread: a change must reach every thread at once."""
    b = "pol-fresh"
    setup_bucket(alice, b, ["k"])
    conns = [http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30) for _ in range(8)]

    def statuses():
        out = []
        for c in conns:  # keep-alive connections, served by several worker threads
            c.request("GET", f"/{b}/k")
            r = c.getresponse()
            r.read()
            out.append(r.status)
        return out

    try:
        for _ in range(3):
            assert statuses() == [403] * 8
        alice.put_bucket_policy(Bucket=b, Policy=policy(
            stmt("Allow", "*", "s3:GetObject", ARN + b + "/*")))
        assert statuses() == [200] * 8
        alice.delete_bucket_policy(Bucket=b)
        assert statuses() == [403] * 8
        alice.put_bucket_acl(Bucket=b, ACL="public-read")
        alice.put_object_acl(Bucket=b, Key="k", ACL="public-read")
        assert statuses() == [200] * 8
        alice.delete_object(Bucket=b, Key="k")
        alice.delete_bucket(Bucket=b)
        assert statuses() == [404] * 8
    finally:
        for c in conns:
            c.close()


def test_existing_object_tag_condition(alice, bob):
    # s3:ExistingObjectTag/<key>: judged on the object's tags once it is read, for reads,
    # ACL reads and tagging writes (ceph s3-tests test_bucket_policy_*_existing_tag)
    b = "pol-objtag"
    setup_bucket(alice, b, ["pub", "priv", "none"])
    alice.put_object_tagging(Bucket=b, Key="pub",
                             Tagging={"TagSet": [{"Key": "security", "Value": "public"}]})
    alice.put_object_tagging(Bucket=b, Key="priv",
                             Tagging={"TagSet": [{"Key": "security", "Value": "private"}]})
    cond = {"StringEquals": {"s3:ExistingObjectTag/security": "public"}}
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Allow", {"AWS": "bob"},
             ["s3:GetObject", "s3:GetObjectAcl", "s3:PutObjectTagging"],
             ARN + b + "/*", cond)))
    assert bob.get_object(Bucket=b, Key="pub")["Body"].read() == b"body of pub"
    assert bob.get_object_acl(Bucket=b, Key="pub")["Owner"]["ID"] == "alice"
    for k in ("priv", "none"):
        assert err(bob.get_object, Bucket=b, Key=k) == (403, "AccessDenied")
        assert err(bob.get_object_acl, Bucket=b, Key=k) == (403, "AccessDenied")
    tags = {"TagSet": [{"Key": "security", "Value": "public"}, {"Key": "x", "Value": "y"}]}
    bob.put_object_tagging(Bucket=b, Key="pub", Tagging=tags)
    assert err(bob.put_object_tagging, Bucket=b, Key="priv", Tagging=tags) == (403, "AccessDenied")
    # bob drops the tag: the condition no longer holds for his next write or read
    bob.put_object_tagging(Bucket=b, Key="pub", Tagging={"TagSet": []})
    assert err(bob.put_object_tagging, Bucket=b, Key="pub", Tagging=tags) == (403, "AccessDenied")
    assert err(bob.get_object, Bucket=b, Key="pub") == (403, "AccessDenied")
    # the owner is untouched by the condition; a Deny on the tag wins over her ACL
    alice.put_bucket_policy(Bucket=b, Policy=policy(
        stmt("Deny", "*", "s3:GetObject", ARN + b + "/*",
             {"StringEquals": {"s3:ExistingObjectTag/security": "private"}})))
    assert alice.get_object(Bucket=b, Key="pub")["Body"].read() == b"body of pub"
    assert err(alice.get_object, Bucket=b, Key="priv") == (403, "AccessDenied")
