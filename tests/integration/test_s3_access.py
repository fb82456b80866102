"""S3 identity and access (issue 11): two users (alice, bob) beside the administrator, each
with its own keys; buckets and objects have owners; isolation by default; canned ACLs and
explicit grants on buckets and objects, stored and enforced, anonymous requests included."""

import re

import pytest
from botocore import UNSIGNED

from conftest import boto3_client
from s3_users import alice, bob, code, err, raw, users_daemon  # noqa: F401 (fixtures)

@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-access-")


@pytest.fixture(scope="module")
def admin(d):
    return boto3_client(d.s3_url)


@pytest.fixture(scope="module")
def anon(d):
    return boto3_client(d.s3_url, signature_version=UNSIGNED)


def grants(acl):
    out = set()
    for g in acl["Grants"]:
        ge = g["Grantee"]
        out.add((ge.get("ID") or ge.get("URI").rsplit("/", 1)[-1], g["Permission"]))
    return out


# ---------------------------------------------------------------- users and ownership

def test_isolation_by_default(admin, alice, bob, anon):
    alice.create_bucket(Bucket="alice-private")
    alice.put_object(Bucket="alice-private", Key="secret.txt", Body=b"alice's secret")
    for fn, kw in [(bob.list_objects_v2, {}), (bob.list_objects, {}),
                   (bob.head_bucket, {}), (bob.get_bucket_acl, {}),
                   (bob.get_object, {"Key": "secret.txt"}),
                   (bob.head_object, {"Key": "secret.txt"}),
                   (bob.get_object, {"Key": "no-such-key"}),  # 403, not 404: no leak
                   (bob.put_object, {"Key": "secret.txt", "Body": b"overwritten"}),
                   (bob.delete_object, {"Key": "secret.txt"}),
                   (bob.create_multipart_upload, {"Key": "mpu"}),
                   (bob.copy_object, {"Key": "copy", "CopySource": "alice-private/secret.txt"}),
                   (bob.delete_bucket, {}),
                   (anon.get_object, {"Key": "secret.txt"}),
                   (anon.list_objects_v2, {})]:
        st, c = err(fn, Bucket="alice-private", **kw)
        assert (st, c) in [(403, "AccessDenied"), (403, "403")], (fn, kw, st, c)
    # DeleteObjects answers per key, as S3 does
    r = bob.delete_objects(Bucket="alice-private", Delete={"Objects": [{"Key": "secret.txt"}]})
    assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("secret.txt", "AccessDenied")]
    assert not r.get("Deleted")
    # bob cannot copy alice's object into his own bucket either
    bob.create_bucket(Bucket="bob-bucket")
    st, c = err(bob.copy_object, Bucket="bob-bucket", Key="stolen",
                CopySource="alice-private/secret.txt")
    assert (st, c) == (403, "AccessDenied")
    # nothing changed, alice still reads her object, a missing key is a 404 for her
    assert alice.get_object(Bucket="alice-private", Key="secret.txt")["Body"].read() == \
        b"alice's secret"
    assert err(alice.get_object, Bucket="alice-private", Key="no-such-key") == \
        (404, "NoSuchKey")
    # the administrator may do everything
    assert admin.get_object(Bucket="alice-private", Key="secret.txt")["Body"].read() == \
        b"alice's secret"
    assert [o["Key"] for o in admin.list_objects_v2(Bucket="alice-private")["Contents"]] == \
        ["secret.txt"]


def test_list_buckets_per_owner(admin, alice, bob, anon):
    alice.create_bucket(Bucket="alice-list-1")
    bob.create_bucket(Bucket="bob-list-1")
    admin.create_bucket(Bucket="admin-list-1")
    a = alice.list_buckets()
    names = [b["Name"] for b in a["Buckets"]]
    assert "alice-list-1" in names and "bob-list-1" not in names and "admin-list-1" not in names
    assert a["Owner"]["ID"] == "alice"
    names = [b["Name"] for b in bob.list_buckets()["Buckets"]]
    assert "bob-list-1" in names and "alice-list-1" not in names
    names = [b["Name"] for b in admin.list_buckets()["Buckets"]]
    assert "admin-list-1" in names and "alice-list-1" not in names
    assert err(anon.list_buckets)[0] == 403


def test_create_existing_bucket(alice, bob):
    alice.create_bucket(Bucket="alice-owned")
    assert err(bob.create_bucket, Bucket="alice-owned") == (409, "BucketAlreadyExists")
    # us-east-1: re-creating one's own bucket is 200 (S3's legacy behaviour)
    r = alice.create_bucket(Bucket="alice-owned")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert alice.get_bucket_acl(Bucket="alice-owned")["Owner"]["ID"] == "alice"


# ---------------------------------------------------------------- ACLs

def test_default_acls_name_the_owner(alice):
    alice.create_bucket(Bucket="alice-acl-default")
    alice.put_object(Bucket="alice-acl-default", Key="k", Body=b"x")
    for acl in (alice.get_bucket_acl(Bucket="alice-acl-default"),
                alice.get_object_acl(Bucket="alice-acl-default", Key="k")):
        assert acl["Owner"]["ID"] == "alice"
        assert grants(acl) == {("alice", "FULL_CONTROL")}


def test_public_read_object_serves_anonymous_and_nothing_else(d, alice, bob, anon):
    alice.create_bucket(Bucket="alice-pub")
    alice.put_object(Bucket="alice-pub", Key="public.txt", Body=b"hello world",
                     ACL="public-read")
    alice.put_object(Bucket="alice-pub", Key="private.txt", Body=b"not for you")
    acl = alice.get_object_acl(Bucket="alice-pub", Key="public.txt")
    assert grants(acl) == {("alice", "FULL_CONTROL"), ("AllUsers", "READ")}
    st, _, body = raw(d, "GET", "/alice-pub/public.txt")
    assert st == 200 and body == b"hello world"
    assert anon.get_object(Bucket="alice-pub", Key="public.txt")["Body"].read() == b"hello world"
    assert bob.get_object(Bucket="alice-pub", Key="public.txt")["Body"].read() == b"hello world"
    for method, path in [("GET", "/alice-pub/private.txt"), ("GET", "/alice-pub/nokey"),
                         ("GET", "/alice-pub"), ("GET", "/alice-pub/public.txt?acl"),
                         ("PUT", "/alice-pub/public.txt"), ("DELETE", "/alice-pub/public.txt")]:
        st, _, body = raw(d, method, path, body=b"x" if method == "PUT" else None)
        assert st == 403 and code(body) == "AccessDenied", (method, path, body)
    assert err(bob.get_object, Bucket="alice-pub", Key="private.txt") == (403, "AccessDenied")
    assert err(bob.put_object, Bucket="alice-pub", Key="public.txt", Body=b"y") == \
        (403, "AccessDenied")
    assert alice.get_object(Bucket="alice-pub", Key="public.txt")["Body"].read() == b"hello world"


def test_authenticated_read(d, alice, bob):
    alice.create_bucket(Bucket="alice-authread")
    alice.put_object(Bucket="alice-authread", Key="k", Body=b"members only",
                     ACL="authenticated-read")
    alice.put_object(Bucket="alice-authread", Key="private", Body=b"alice only")
    assert bob.get_object(Bucket="alice-authread", Key="k")["Body"].read() == b"members only"
    st, _, body = raw(d, "GET", "/alice-authread/k")
    assert st == 403 and code(body) == "AccessDenied"
    # the grant opens that object to signed users, not its neighbours
    assert err(bob.get_object, Bucket="alice-authread", Key="private") == (403, "AccessDenied")


def test_bucket_grant_read_opens_listing_only(alice, bob):
    alice.create_bucket(Bucket="alice-grant-read")
    alice.put_object(Bucket="alice-grant-read", Key="obj", Body=b"data")
    assert err(bob.list_objects_v2, Bucket="alice-grant-read") == (403, "AccessDenied")
    alice.put_bucket_acl(Bucket="alice-grant-read", GrantRead='id="bob"',
                         GrantFullControl='id="alice"')
    assert grants(alice.get_bucket_acl(Bucket="alice-grant-read")) == \
        {("alice", "FULL_CONTROL"), ("bob", "READ")}
    keys = [o["Key"] for o in bob.list_objects_v2(Bucket="alice-grant-read")["Contents"]]
    assert keys == ["obj"]
    bob.head_bucket(Bucket="alice-grant-read")
    # READ on the bucket is listing, not the objects' bytes, writes or the ACL
    assert err(bob.get_object, Bucket="alice-grant-read", Key="obj") == (403, "AccessDenied")
    # ... and now that bob may list, a missing key is a 404 for him
    assert err(bob.get_object, Bucket="alice-grant-read", Key="nokey") == (404, "NoSuchKey")
    assert err(bob.put_object, Bucket="alice-grant-read", Key="new", Body=b"x") == \
        (403, "AccessDenied")
    assert err(bob.get_bucket_acl, Bucket="alice-grant-read") == (403, "AccessDenied")
    assert err(bob.put_bucket_acl, Bucket="alice-grant-read", ACL="public-read-write") == \
        (403, "AccessDenied")


def test_bucket_grant_write_lets_another_user_own_objects(alice, bob):
    alice.create_bucket(Bucket="alice-grant-write")
    alice.put_bucket_acl(Bucket="alice-grant-write", GrantWrite='id="bob"',
                         GrantFullControl='id="alice"')
    bob.put_object(Bucket="alice-grant-write", Key="from-bob", Body=b"bob wrote this")
    acl = bob.get_object_acl(Bucket="alice-grant-write", Key="from-bob")
    assert acl["Owner"]["ID"] == "bob"
    # S3: the writer owns the object; the bucket owner may list and delete it, not read it
    assert err(alice.get_object, Bucket="alice-grant-write", Key="from-bob") == \
        (403, "AccessDenied")
    bob.put_object(Bucket="alice-grant-write", Key="shared", Body=b"for alice",
                   ACL="bucket-owner-full-control")
    assert alice.get_object(Bucket="alice-grant-write", Key="shared")["Body"].read() == \
        b"for alice"
    assert err(bob.list_objects_v2, Bucket="alice-grant-write") == (403, "AccessDenied")
    alice.delete_object(Bucket="alice-grant-write", Key="from-bob")


def test_object_acl_document_roundtrip_and_enforced(alice, bob):
    alice.create_bucket(Bucket="alice-objacl")
    alice.put_object(Bucket="alice-objacl", Key="doc", Body=b"shared doc",
                     Metadata={"colour": "blue"}, ContentType="text/plain")
    assert err(bob.get_object, Bucket="alice-objacl", Key="doc") == (403, "AccessDenied")
    acl = alice.get_object_acl(Bucket="alice-objacl", Key="doc")
    acl["Grants"].append({"Grantee": {"Type": "CanonicalUser", "ID": "bob"},
                          "Permission": "READ"})
    alice.put_object_acl(Bucket="alice-objacl", Key="doc",
                         AccessControlPolicy={"Grants": acl["Grants"], "Owner": acl["Owner"]})
    assert grants(alice.get_object_acl(Bucket="alice-objacl", Key="doc")) == \
        {("alice", "FULL_CONTROL"), ("bob", "READ")}
    r = bob.get_object(Bucket="alice-objacl", Key="doc")
    assert r["Body"].read() == b"shared doc"
    assert r["Metadata"] == {"colour": "blue"} and r["ContentType"] == "text/plain"
    # READ is not READ_ACP / WRITE_ACP / WRITE
    assert err(bob.get_object_acl, Bucket="alice-objacl", Key="doc") == (403, "AccessDenied")
    assert err(bob.put_object_acl, Bucket="alice-objacl", Key="doc", ACL="public-read") == \
        (403, "AccessDenied")
    assert err(bob.delete_object, Bucket="alice-objacl", Key="doc") == (403, "AccessDenied")
    # another user's key in the object's ACL only by its owner
    alice.put_object_acl(Bucket="alice-objacl", Key="doc", GrantReadACP='id="bob"',
                         GrantFullControl='id="alice"')
    assert grants(bob.get_object_acl(Bucket="alice-objacl", Key="doc")) == \
        {("alice", "FULL_CONTROL"), ("bob", "READ_ACP")}
    assert err(bob.get_object, Bucket="alice-objacl", Key="doc") == (403, "AccessDenied")


def test_invalid_grants_are_400(alice):
    alice.create_bucket(Bucket="alice-badacl")
    alice.put_object(Bucket="alice-badacl", Key="k", Body=b"x")
    assert err(alice.put_bucket_acl, Bucket="alice-badacl", GrantRead='id="nosuchuser"') == \
        (400, "InvalidArgument")
    assert err(alice.put_object_acl, Bucket="alice-badacl", Key="k",
               GrantRead='emailAddress="x@example.com"') == \
        (400, "UnresolvableGrantByEmailAddress")
    assert err(alice.put_object_acl, Bucket="alice-badacl", Key="k",
               GrantRead='uri="http://example.com/nogroup"') == (400, "InvalidArgument")
    st, c = err(alice.put_object, Bucket="alice-badacl", Key="k2", Body=b"x",
                ACL="not-a-canned-acl")
    assert (st, c) == (400, "InvalidArgument")
    assert err(alice.get_object, Bucket="alice-badacl", Key="k2") == (404, "NoSuchKey")
    bad = {"Owner": {"ID": "alice"},
           "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": "alice"},
                       "Permission": "EVERYTHING"}]}
    assert err(alice.put_bucket_acl, Bucket="alice-badacl", AccessControlPolicy=bad)[0] == 400
    # the ACLs are as they were
    assert grants(alice.get_bucket_acl(Bucket="alice-badacl")) == {("alice", "FULL_CONTROL")}


def test_public_read_write_bucket_takes_anonymous_writes(d, alice, bob):
    alice.create_bucket(Bucket="alice-dropbox", ACL="public-read-write")
    st, _, body = raw(d, "PUT", "/alice-dropbox/anon.txt", body=b"from nobody")
    assert st == 200, body
    st, _, body = raw(d, "GET", "/alice-dropbox")
    assert st == 200 and b"<Key>anon.txt</Key>" in body
    bob.put_object(Bucket="alice-dropbox", Key="bob.txt", Body=b"from bob")
    # the bucket's ACL opens the bucket, not other people's objects
    assert err(bob.get_object, Bucket="alice-dropbox", Key="anon.txt") == (403, "AccessDenied")
    assert alice.get_object(Bucket="alice-dropbox", Key="anon.txt")["Body"].read() == \
        b"from nobody"


def test_access_decisions_are_counted(d, bob):
    st, _, body = raw(d, "GET", "/metrics")
    assert st == 200
    m = re.search(rb'openlake_s3_access_decisions_total\{decision="deny",reason="no_grant"\} '
                  rb'(\d+)', body)
    assert m and int(m.group(1)) > 0


def test_acl_headers_on_copy_and_multipart(d, alice, bob):
    alice.create_bucket(Bucket="alice-acl-writes")
    alice.put_object(Bucket="alice-acl-writes", Key="src", Body=b"source bytes")
    alice.copy_object(Bucket="alice-acl-writes", Key="copied", ACL="public-read",
                      CopySource="alice-acl-writes/src")
    up = alice.create_multipart_upload(Bucket="alice-acl-writes", Key="mpu",
                                       GrantRead='id="bob"')
    part = alice.upload_part(Bucket="alice-acl-writes", Key="mpu", UploadId=up["UploadId"],
                             PartNumber=1, Body=b"multipart bytes")
    alice.complete_multipart_upload(
        Bucket="alice-acl-writes", Key="mpu", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    st, _, body = raw(d, "GET", "/alice-acl-writes/copied")
    assert st == 200 and body == b"source bytes"
    assert raw(d, "GET", "/alice-acl-writes/src")[0] == 403  # the source kept its own ACL
    assert bob.get_object(Bucket="alice-acl-writes", Key="mpu")["Body"].read() == \
        b"multipart bytes"
    assert raw(d, "GET", "/alice-acl-writes/mpu")[0] == 403
    # bob may not start an upload in alice's bucket, nor copy her private object out
    assert err(bob.create_multipart_upload, Bucket="alice-acl-writes", Key="x") == \
        (403, "AccessDenied")
    bob.create_bucket(Bucket="bob-copies")
    bob.copy_object(Bucket="bob-copies", Key="ok", CopySource="alice-acl-writes/copied")
    assert err(bob.copy_object, Bucket="bob-copies", Key="no",
               CopySource="alice-acl-writes/src") == (403, "AccessDenied")


def test_bucket_acl_binds_its_owner_too(alice):
    """S3: the bucket's ACL decides reads and writes for its owner as well; the owner keeps
    READ_ACP and WRITE_ACP, so it can always give itself access back."""
    alice.create_bucket(Bucket="alice-no-grants")
    alice.put_object(Bucket="alice-no-grants", Key="foo", Body=b"x")
    alice.put_bucket_acl(Bucket="alice-no-grants", AccessControlPolicy={
        "Owner": {"ID": "alice"}, "Grants": []})
    assert alice.get_object(Bucket="alice-no-grants", Key="foo")["Body"].read() == b"x"
    assert err(alice.put_object, Bucket="alice-no-grants", Key="baz", Body=b"a") == \
        (403, "AccessDenied")
    assert err(alice.list_objects_v2, Bucket="alice-no-grants") == (403, "AccessDenied")
    assert alice.get_bucket_acl(Bucket="alice-no-grants")["Grants"] == []
    alice.put_bucket_acl(Bucket="alice-no-grants", ACL="private")
    alice.put_object(Bucket="alice-no-grants", Key="baz", Body=b"a")


def test_grant_headers_listed_one_per_permission(alice, bob):
    alice.create_bucket(Bucket="alice-hdr-grants")
    alice.put_object(Bucket="alice-hdr-grants", Key="k", Body=b"x", GrantFullControl='id="bob"',
                     GrantRead='id="bob"', GrantReadACP='id="bob"', GrantWriteACP='id="bob"')
    acl = alice.get_object_acl(Bucket="alice-hdr-grants", Key="k")
    assert acl["Owner"]["ID"] == "alice"
    assert sorted(g["Permission"] for g in acl["Grants"]) == \
        ["FULL_CONTROL", "READ", "READ_ACP", "WRITE_ACP"]
    assert {g["Grantee"]["ID"] for g in acl["Grants"]} == {"bob"}
    assert bob.get_object(Bucket="alice-hdr-grants", Key="k")["Body"].read() == b"x"


def test_canned_acl_lists_groups_before_the_owner(alice):
    # AWS documents no grant order; clients index the list (a public-read-write bucket's
    # owner grant read as Grants[2]), so the canned groups come first, then the users.
    alice.create_bucket(Bucket="order-prw", ACL="public-read-write")
    got = [(g["Grantee"].get("URI", g["Grantee"].get("ID")), g["Permission"])
           for g in alice.get_bucket_acl(Bucket="order-prw")["Grants"]]
    assert got == [("http://acs.amazonaws.com/groups/global/AllUsers", "READ"),
                   ("http://acs.amazonaws.com/groups/global/AllUsers", "WRITE"),
                   ("alice", "FULL_CONTROL")]
    alice.put_object(Bucket="order-prw", Key="o", Body=b"x", ACL="authenticated-read")
    got = [g["Grantee"].get("URI", g["Grantee"].get("ID"))
           for g in alice.get_object_acl(Bucket="order-prw", Key="o")["Grants"]]
    assert got == ["http://acs.amazonaws.com/groups/global/AuthenticatedUsers", "alice"]


def test_expected_bucket_owner(alice, bob):
    alice.create_bucket(Bucket="expect-owner", ACL="public-read-write")
    alice.put_object(Bucket="expect-owner", Key="k", Body=b"v", ExpectedBucketOwner="alice")
    assert alice.list_objects_v2(Bucket="expect-owner",
                                 ExpectedBucketOwner="alice")["KeyCount"] == 1
    for c in (alice, bob):
        assert err(c.list_objects_v2, Bucket="expect-owner",
                   ExpectedBucketOwner="bob") == (403, "AccessDenied")
        assert err(c.put_object, Bucket="expect-owner", Key="k2", Body=b"v",
                   ExpectedBucketOwner="mallory") == (403, "AccessDenied")
    assert [o["Key"] for o in alice.list_objects_v2(Bucket="expect-owner")["Contents"]] == ["k"]


def test_listings_name_each_object_owner(alice, bob):
    # ListObjects (V1 always, V2 with fetch-owner) and ListObjectVersions name the user who
    # wrote each object, not a fixed server name.
    alice.create_bucket(Bucket="owners", ACL="public-read-write")
    alice.put_object(Bucket="owners", Key="a", Body=b"1")
    bob.put_object(Bucket="owners", Key="b", Body=b"2")
    want = {"a": "alice", "b": "bob"}
    got = {o["Key"]: (o["Owner"]["ID"], o["Owner"]["DisplayName"])
           for o in alice.list_objects(Bucket="owners")["Contents"]}
    assert got == {k: (v, v) for k, v in want.items()}
    got = {o["Key"]: o["Owner"]["ID"]
           for o in alice.list_objects_v2(Bucket="owners", FetchOwner=True)["Contents"]}
    assert got == want
    assert all("Owner" not in o for o in alice.list_objects_v2(Bucket="owners")["Contents"])
    got = {v["Key"]: v["Owner"]["ID"]
           for v in alice.list_object_versions(Bucket="owners")["Versions"]}
    assert got == want


def test_put_object_acl_changes_one_version_in_place(alice, bob):
    # AWS changes an ACL without writing the object again: no new version, the same
    # Last-Modified and ETag; ?versionId= picks the version whose ACL changes.
    b = "acl-in-place"
    alice.create_bucket(Bucket=b)
    alice.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = alice.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
    v2 = alice.put_object(Bucket=b, Key="k", Body=b"two")["VersionId"]
    before = alice.head_object(Bucket=b, Key="k")
    r = alice.put_object_acl(Bucket=b, Key="k", ACL="public-read")
    assert r["ResponseMetadata"]["HTTPHeaders"].get("x-amz-version-id") == v2
    after = alice.head_object(Bucket=b, Key="k")
    assert (after["VersionId"], after["ETag"], after["LastModified"]) == \
        (v2, before["ETag"], before["LastModified"])
    assert [v["VersionId"] for v in alice.list_object_versions(Bucket=b)["Versions"]] == [v2, v1]
    assert bob.get_object(Bucket=b, Key="k")["Body"].read() == b"two"
    # the older version: its own ACL, the current one untouched
    alice.put_object_acl(Bucket=b, Key="k", VersionId=v1, ACL="authenticated-read")
    ids = [g["Grantee"].get("URI", "").rsplit("/", 1)[-1]
           for g in alice.get_object_acl(Bucket=b, Key="k", VersionId=v1)["Grants"]]
    assert ids[0] == "AuthenticatedUsers"
    assert bob.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read() == b"one"
    ids = [g["Grantee"].get("URI", "").rsplit("/", 1)[-1]
           for g in alice.get_object_acl(Bucket=b, Key="k")["Grants"]]
    assert ids[0] == "AllUsers"
    assert len(alice.list_object_versions(Bucket=b)["Versions"]) == 2
    # an unversioned object: same data, ETag and Last-Modified
    alice.put_object(Bucket="order-prw", Key="plain", Body=b"p")
    h0 = alice.head_object(Bucket="order-prw", Key="plain")
    alice.put_object_acl(Bucket="order-prw", Key="plain", ACL="private")
    h1 = alice.head_object(Bucket="order-prw", Key="plain")
    assert (h1["ETag"], h1["LastModified"]) == (h0["ETag"], h0["LastModified"])


def test_list_buckets_pages(d, bob):
    # ListBuckets takes max-buckets, continuation-token and prefix, as AWS's does: pages in
    # name order, a ContinuationToken only while more buckets follow. (Raw signed requests:
    # the packaged botocore knows no ListBuckets parameters.)
    import urllib.parse
    import xml.etree.ElementTree as ET
    from test_s3_common import raw as signed_raw
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"

    def page(**q):
        st, _, body = signed_raw(d.s3_url, "GET", "/?" + urllib.parse.urlencode(q),
                                 access="bobkey", secret="bobsecret")
        if st != 200:
            return st, code(body), None
        x = ET.fromstring(body)
        names = [b.findtext(ns + "Name") for b in x.iter(ns + "Bucket")]
        return st, names, x.findtext(ns + "ContinuationToken")

    names = ["pg-a", "pg-b", "pg-c"]
    for n in names:
        bob.create_bucket(Bucket=n)
    assert [n for n in page()[1] if n.startswith("pg-")] == names
    st, got, token = page(**{"max-buckets": 2, "prefix": "pg-"})
    assert (st, got) == (200, names[:2]) and token == "pg-b"
    st, got, token = page(**{"max-buckets": 2, "prefix": "pg-", "continuation-token": token})
    assert (st, got, token) == (200, names[2:], None)
    assert page(**{"max-buckets": 3, "prefix": "pg-"})[1:] == (names, None)
    assert page(prefix="pg-z")[1] == []
    assert page(**{"max-buckets": 0})[:2] == (400, "InvalidArgument")
    assert page(**{"continuation-token": "NOT/A/NAME"})[:2] == (400, "InvalidArgument")


def test_uploads_name_their_initiator(alice, bob):
    # ListMultipartUploads and ListParts name who started each upload (they said "openlake";
    # ceph s3-tests test_list_multipart_upload_owner)
    b = "alice-mpu-owners"
    alice.create_bucket(Bucket=b, ACL="public-read-write")
    ua = alice.create_multipart_upload(Bucket=b, Key="a")["UploadId"]
    ub = bob.create_multipart_upload(Bucket=b, Key="b")["UploadId"]
    for c in (alice, bob):
        ups = c.list_multipart_uploads(Bucket=b)["Uploads"]
        assert [(u["Key"], u["UploadId"], u["Initiator"]["ID"], u["Owner"]["DisplayName"])
                for u in ups] == [("a", ua, "alice", "alice"), ("b", ub, "bob", "bob")]
    parts = bob.list_parts(Bucket=b, Key="b", UploadId=ub)
    assert parts["Initiator"]["ID"] == "bob" and parts["Owner"]["ID"] == "bob"
    assert alice.list_parts(Bucket=b, Key="a", UploadId=ua)["Initiator"]["ID"] == "alice"
    for c, k, u in ((alice, "a", ua), (bob, "b", ub)):
        c.abort_multipart_upload(Bucket=b, Key=k, UploadId=u)
