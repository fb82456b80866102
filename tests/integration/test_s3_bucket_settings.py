"""Bucket settings (issue 11): public access block, object ownership controls and CORS, with
two users (alice owns the buckets, bob is the other) and anonymous requests."""

import json

import pytest

from s3_users import alice, bob, code, err, raw, users_daemon  # noqa: F401 (fixtures)

ARN = "arn:aws:s3:::"


@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-settings-")


PAB_ALL = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
           "RestrictPublicBuckets": True}


def test_public_access_block(d, alice, bob):
    b = "set-pab"
    alice.create_bucket(Bucket=b)
    alice.put_object(Bucket=b, Key="pub", Body=b"public bytes", ACL="public-read")
    assert raw(d, "GET", f"/{b}/pub")[0] == 200
    assert err(alice.get_public_access_block, Bucket=b) == \
        (404, "NoSuchPublicAccessBlockConfiguration")
    assert err(bob.put_public_access_block, Bucket=b,
               PublicAccessBlockConfiguration=PAB_ALL) == (403, "AccessDenied")
    alice.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=PAB_ALL)
    assert alice.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"] == PAB_ALL
    # IgnorePublicAcls: the object's public grant no longer opens it
    st, _, body = raw(d, "GET", f"/{b}/pub")
    assert st == 403 and code(body) == "AccessDenied"
    assert err(bob.get_object, Bucket=b, Key="pub") == (403, "AccessDenied")
    # BlockPublicAcls: public ACLs are refused, private ones still go
    assert err(alice.put_object, Bucket=b, Key="k", Body=b"x", ACL="public-read") == \
        (403, "AccessDenied")
    assert err(alice.put_bucket_acl, Bucket=b, ACL="public-read") == (403, "AccessDenied")
    alice.put_object(Bucket=b, Key="k", Body=b"x", ACL="private")
    # BlockPublicPolicy: a public policy is refused, one naming bob is not
    pub = json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*",
                                     "Action": "s3:GetObject", "Resource": ARN + b + "/*"}]})
    assert err(alice.put_bucket_policy, Bucket=b, Policy=pub) == (403, "AccessDenied")
    alice.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:GetObject",
         "Resource": ARN + b + "/*"}]}))
    assert bob.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    alice.delete_public_access_block(Bucket=b)
    assert raw(d, "GET", f"/{b}/pub")[0] == 200


def test_restrict_public_buckets(d, alice):
    b = "set-restrict"
    alice.create_bucket(Bucket=b)
    alice.put_object(Bucket=b, Key="k", Body=b"data")
    alice.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": ARN + b + "/*"}]}))
    assert raw(d, "GET", f"/{b}/k")[0] == 200
    alice.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={
        "RestrictPublicBuckets": True})
    assert raw(d, "GET", f"/{b}/k")[0] == 403
    assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"data"


def test_ownership_controls(alice, bob):
    b = "set-owner"
    alice.create_bucket(Bucket=b)
    assert err(alice.get_bucket_ownership_controls, Bucket=b) == \
        (404, "OwnershipControlsNotFoundError")
    alice.put_bucket_acl(Bucket=b, GrantWrite='id="bob"', GrantFullControl='id="alice"')
    enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    # a bucket whose ACL grants others cannot switch ACLs off
    assert err(alice.put_bucket_ownership_controls, Bucket=b, OwnershipControls=enforced) == \
        (400, "InvalidBucketAclWithObjectOwnership")
    alice.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]})
    bob.put_object(Bucket=b, Key="preferred", Body=b"p", ACL="bucket-owner-full-control")
    bob.put_object(Bucket=b, Key="writer", Body=b"w")
    assert alice.get_object_acl(Bucket=b, Key="preferred")["Owner"]["ID"] == "alice"
    assert bob.get_object_acl(Bucket=b, Key="writer")["Owner"]["ID"] == "bob"
    alice.put_bucket_acl(Bucket=b, ACL="private")
    alice.put_bucket_ownership_controls(Bucket=b, OwnershipControls=enforced)
    assert alice.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"] == enforced
    # ACLs are off: the bucket owner owns and reads everything, ACL writes are refused
    assert alice.get_object(Bucket=b, Key="writer")["Body"].read() == b"w"
    assert err(alice.put_object, Bucket=b, Key="x", Body=b"x", ACL="public-read") == \
        (400, "AccessControlListNotSupported")
    alice.put_bucket_acl(Bucket=b, ACL="private")  # owner-only ACLs are still taken
    assert err(bob.get_object, Bucket=b, Key="preferred") == (403, "AccessDenied")
    assert err(alice.put_bucket_ownership_controls, Bucket=b, OwnershipControls={
        "Rules": [{"ObjectOwnership": "Nobody"}]})[0] == 400


CORS = {"CORSRules": [
    {"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT"],
     "AllowedHeaders": ["x-amz-*", "content-type"], "ExposeHeaders": ["ETag"],
     "MaxAgeSeconds": 600},
    {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}


def test_cors_configuration_and_preflight(d, alice, bob):
    b = "set-cors"
    alice.create_bucket(Bucket=b)
    alice.put_object(Bucket=b, Key="k", Body=b"cors body", ACL="public-read")
    pre = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
           "Access-Control-Request-Headers": "content-type, x-amz-meta-a"}
    # no rules: a preflight is refused as S3 refuses it
    st, _, body = raw(d, "OPTIONS", f"/{b}/k", pre)
    assert st == 403 and code(body) == "AccessDenied"
    assert err(alice.get_bucket_cors, Bucket=b) == (404, "NoSuchCORSConfiguration")
    assert err(bob.put_bucket_cors, Bucket=b, CORSConfiguration=CORS) == (403, "AccessDenied")
    assert err(alice.put_bucket_cors, Bucket=b, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}) == (400, "InvalidRequest")
    alice.put_bucket_cors(Bucket=b, CORSConfiguration=CORS)
    got = alice.get_bucket_cors(Bucket=b)["CORSRules"]
    assert got[0]["AllowedOrigins"] == ["https://app.example.com"] and len(got) == 2
    st, h, _ = raw(d, "OPTIONS", f"/{b}/k", pre)
    assert st == 200
    assert h["access-control-allow-origin"] == "https://app.example.com"
    assert "PUT" in h["access-control-allow-methods"]
    assert h["access-control-max-age"] == "600"
    assert h["access-control-allow-headers"] == "content-type, x-amz-meta-a"
    # what no rule allows: another origin for PUT, a header not listed
    for hdrs in [dict(pre, Origin="https://evil.example.com"),
                 dict(pre, **{"Access-Control-Request-Headers": "authorization-x"}),
                 dict(pre, **{"Access-Control-Request-Method": "DELETE"})]:
        st, h, body = raw(d, "OPTIONS", f"/{b}/k", hdrs)
        assert st == 403 and code(body) == "AccessDenied", hdrs
        assert "access-control-allow-origin" not in h
    # the wildcard rule: any origin may GET
    st, h, _ = raw(d, "OPTIONS", f"/{b}/k", {"Origin": "https://x.test",
                                            "Access-Control-Request-Method": "GET"})
    assert st == 200 and h["access-control-allow-origin"] == "*"
    # actual requests carry the headers of the matching rule
    st, h, body = raw(d, "GET", f"/{b}/k", {"Origin": "https://app.example.com"})
    assert st == 200 and body == b"cors body"
    assert h["access-control-allow-origin"] == "https://app.example.com"
    assert h["access-control-expose-headers"] == "ETag"
    st, h, _ = raw(d, "GET", f"/{b}/k")
    assert "access-control-allow-origin" not in h
    alice.delete_bucket_cors(Bucket=b)
    assert raw(d, "OPTIONS", f"/{b}/k", pre)[0] == 403


def test_preflight_of_a_presigned_url_needs_no_signature(d, alice):
    # A browser's preflight carries the presigned URL's query, whose signature covers the
    # URL's own method: S3 answers the preflight from the CORS rules alone.
    import urllib.parse
    b = "cors-presigned"
    alice.create_bucket(Bucket=b)
    alice.put_object(Bucket=b, Key="foo", Body=b"x")
    url = alice.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "foo"},
                                       ExpiresIn=600)
    u = urllib.parse.urlsplit(url)
    path = u.path + "?" + u.query
    st, _, body = raw(d, "OPTIONS", path)
    assert st == 400 and code(body) == "InvalidRequest"  # no Origin: not a preflight
    alice.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["https://example"], "AllowedMethods": ["GET"]}]})
    st, h, _ = raw(d, "OPTIONS", path, {"Origin": "https://example",
                                        "Access-Control-Request-Method": "GET"})
    assert st == 200 and h["access-control-allow-origin"] == "https://example"
    st, _, body = raw(d, "GET", path)
    assert st == 200 and body == b"x"
