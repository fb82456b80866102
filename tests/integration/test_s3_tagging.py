"""S3 tagging against the real openlaked: bucket and object ?tagging (PUT/GET/DELETE, with
versionId), x-amz-tagging on PutObject, CopyObject (x-amz-tagging-directive) and
CreateMultipartUpload, x-amz-tagging-count, AWS's limits (InvalidTag), and who may change
versioning and tags (the bucket's owner, not another user)."""

import botocore
import pytest

from conftest import boto3_client
from s3_users import alice, bob, err, users_daemon  # noqa: F401 (fixtures)
from test_s3_common import err_code, raw


def tags(ts):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in ts]}


def got(c, **kw):
    return [(t["Key"], t["Value"]) for t in c.get_object_tagging(**kw)["TagSet"]]


def code(e):
    return e.value.response["Error"]["Code"]


def test_bucket_tagging(s3_client):
    c = s3_client
    c.create_bucket(Bucket="tagbkt")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_bucket_tagging(Bucket="tagbkt")
    assert code(e) == "NoSuchTagSet"
    want = [("team", "ml"), ("cost center", "a&b=c/\u00e9")]
    c.put_bucket_tagging(Bucket="tagbkt", Tagging=tags(want))
    assert [(t["Key"], t["Value"]) for t in c.get_bucket_tagging(Bucket="tagbkt")["TagSet"]] \
        == want
    c.put_bucket_tagging(Bucket="tagbkt", Tagging=tags(("k%d" % i, "v") for i in range(50)))
    for bad in ([("k%d" % i, "v") for i in range(51)], [("a", "1"), ("a", "2")],
                [("x" * 129, "v")], [("k", "v" * 257)], [("aws:cost", "1")]):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.put_bucket_tagging(Bucket="tagbkt", Tagging=tags(bad))
        assert code(e) == "InvalidTag"
    assert len(c.get_bucket_tagging(Bucket="tagbkt")["TagSet"]) == 50  # unchanged
    st, _, body = raw(c.meta.endpoint_url, "PUT", "/tagbkt?tagging", body=b"<Tagging><TagSet>")
    assert st == 400 and err_code(body) == "MalformedXML"
    c.delete_bucket_tagging(Bucket="tagbkt")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_bucket_tagging(Bucket="tagbkt")
    assert code(e) == "NoSuchTagSet"


def test_object_tagging(s3_client):
    c, b = s3_client, "tagobj"
    c.create_bucket(Bucket=b)
    body = b"x" * (300 << 10)  # shard files: tags change in place, the data stays
    c.put_object(Bucket=b, Key="o", Body=body, Tagging="k1=v1&k2=v%202")
    assert got(c, Bucket=b, Key="o") == [("k1", "v1"), ("k2", "v 2")]
    r = c.get_object(Bucket=b, Key="o")
    assert r["TagCount"] == 2
    etag = r["ETag"]
    assert r["Body"].read() == body
    c.put_object_tagging(Bucket=b, Key="o", Tagging=tags([("new", "1")]))
    r = c.get_object(Bucket=b, Key="o")
    assert got(c, Bucket=b, Key="o") == [("new", "1")]
    assert r["ETag"] == etag and r["Body"].read() == body
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_object_tagging(Bucket=b, Key="o", Tagging=tags(("k%d" % i, "v") for i in range(11)))
    assert code(e) == "InvalidTag"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_object(Bucket=b, Key="bad", Body=b"1", Tagging="a=1&a=2")
    assert code(e) == "InvalidTag"
    with pytest.raises(botocore.exceptions.ClientError):
        c.head_object(Bucket=b, Key="bad")  # refused before anything was stored
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object_tagging(Bucket=b, Key="missing")
    assert code(e) == "NoSuchKey"
    # copy: tags follow by default, REPLACE takes the header's (none: none)
    c.copy_object(Bucket=b, Key="c1", CopySource={"Bucket": b, "Key": "o"})
    assert got(c, Bucket=b, Key="c1") == [("new", "1")]
    c.copy_object(Bucket=b, Key="c2", CopySource={"Bucket": b, "Key": "o"},
                  MetadataDirective="REPLACE")
    assert got(c, Bucket=b, Key="c2") == [("new", "1")]
    c.copy_object(Bucket=b, Key="c3", CopySource={"Bucket": b, "Key": "o"},
                  TaggingDirective="REPLACE", Tagging="z=9")
    assert got(c, Bucket=b, Key="c3") == [("z", "9")]
    c.copy_object(Bucket=b, Key="c4", CopySource={"Bucket": b, "Key": "o"},
                  TaggingDirective="REPLACE")
    assert got(c, Bucket=b, Key="c4") == []
    up = c.create_multipart_upload(Bucket=b, Key="mp", Tagging="m=p")["UploadId"]
    p = c.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"part")
    c.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]})
    assert got(c, Bucket=b, Key="mp") == [("m", "p")]
    c.delete_object_tagging(Bucket=b, Key="o")
    assert got(c, Bucket=b, Key="o") == []
    assert "TagCount" not in c.get_object(Bucket=b, Key="o")


def test_tags_of_versions(s3_client):
    c, b = s3_client, "tagver"
    c.create_bucket(Bucket=b)
    c.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket=b, Key="k", Body=b"one", Tagging="gen=1")["VersionId"]
    v2 = c.put_object(Bucket=b, Key="k", Body=b"two", Tagging="gen=2")["VersionId"]
    r = c.put_object_tagging(Bucket=b, Key="k", VersionId=v1, Tagging=tags([("old", "yes")]))
    assert r["VersionId"] == v1
    assert got(c, Bucket=b, Key="k", VersionId=v1) == [("old", "yes")]
    assert got(c, Bucket=b, Key="k") == [("gen", "2")]
    c.put_object_tagging(Bucket=b, Key="k", Tagging=tags([("cur", "1")]))
    assert got(c, Bucket=b, Key="k", VersionId=v2) == [("cur", "1")]
    # tagging makes no new version
    vs = c.list_object_versions(Bucket=b)["Versions"]
    assert [v["VersionId"] for v in vs] == [v2, v1]
    assert c.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read() == b"one"
    dm = c.delete_object(Bucket=b, Key="k")["VersionId"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object_tagging(Bucket=b, Key="k", VersionId=dm)
    assert code(e) == "MethodNotAllowed"


@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-tagging-")


def test_only_the_owner_changes_versioning_and_tags(d, alice, bob):  # noqa: F811
    alice.create_bucket(Bucket="alice-ver")
    alice.put_object(Bucket="alice-ver", Key="o", Body=b"1")
    assert err(bob.put_bucket_versioning, Bucket="alice-ver",
               VersioningConfiguration={"Status": "Enabled"}) == (403, "AccessDenied")
    assert err(bob.get_bucket_versioning, Bucket="alice-ver") == (403, "AccessDenied")
    assert err(bob.put_bucket_tagging, Bucket="alice-ver",
               Tagging=tags([("a", "b")])) == (403, "AccessDenied")
    assert err(bob.put_object_tagging, Bucket="alice-ver", Key="o",
               Tagging=tags([("a", "b")])) == (403, "AccessDenied")
    assert err(bob.list_object_versions, Bucket="alice-ver") == (403, "AccessDenied")
    alice.put_bucket_versioning(Bucket="alice-ver", VersioningConfiguration={"Status": "Enabled"})
    # the bucket's other settings (owner, ACL) survive: bob is still refused, alice is not
    assert err(bob.get_object, Bucket="alice-ver", Key="o") == (403, "AccessDenied")
    assert alice.get_bucket_acl(Bucket="alice-ver")["Owner"]["ID"] == "alice"
    assert alice.get_bucket_versioning(Bucket="alice-ver")["Status"] == "Enabled"
    alice.put_object_tagging(Bucket="alice-ver", Key="o", Tagging=tags([("a", "b")]))
    assert got(alice, Bucket="alice-ver", Key="o") == [("a", "b")]


def test_policy_names_version_actions_apart(d, alice, bob):  # noqa: F811
    """s3:GetObject lets bob read the current object, not an old version by id (that is
    s3:GetObjectVersion, as in AWS)."""
    import json
    b = "alice-vpol"
    alice.create_bucket(Bucket=b)
    alice.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = alice.put_object(Bucket=b, Key="o", Body=b"one")["VersionId"]
    alice.put_object(Bucket=b, Key="o", Body=b"two")

    def allow(actions):
        alice.put_bucket_policy(Bucket=b, Policy=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": actions,
                "Resource": "arn:aws:s3:::%s/*" % b}]}))

    allow(["s3:GetObject"])
    assert bob.get_object(Bucket=b, Key="o")["Body"].read() == b"two"
    assert err(bob.get_object, Bucket=b, Key="o", VersionId=v1) == (403, "AccessDenied")
    allow(["s3:GetObject", "s3:GetObjectVersion"])
    assert bob.get_object(Bucket=b, Key="o", VersionId=v1)["Body"].read() == b"one"
    assert err(bob.delete_object, Bucket=b, Key="o", VersionId=v1) == (403, "AccessDenied")
