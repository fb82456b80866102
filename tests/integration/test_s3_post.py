"""Browser POST uploads (issue 11): multipart/form-data bodies sent by curl -F as a browser
form sends them, with a SigV4-signed POST policy; good and bad policies, two users
(alice owns the bucket, bob does not) and anonymous forms."""

import base64
import datetime
import hashlib
import hmac
import json
import subprocess
import tempfile

import pytest
from botocore.exceptions import ClientError

from conftest import REGION
from s3_users import client, code, users_daemon


@pytest.fixture(scope="module")
def d():
    yield from users_daemon("openlake-post-")


@pytest.fixture(scope="module")
def alice(d):
    c = client(d.s3_url, "alicekey", "alicesecret")
    c.create_bucket(Bucket="forms")
    c.create_bucket(Bucket="dropbox", ACL="public-read-write")
    return c


def signed_fields(ak, sk, conditions, expires_in=600, now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    date8 = now.strftime("%Y%m%d")
    cred = f"{ak}/{date8}/{REGION}/s3/aws4_request"
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    exp = (now + datetime.timedelta(seconds=expires_in)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    conds = list(conditions) + [{"x-amz-algorithm": "AWS4-HMAC-SHA256"},
                                {"x-amz-credential": cred}, {"x-amz-date": amz_date}]
    policy = base64.b64encode(json.dumps({"expiration": exp, "conditions": conds}).encode())
    key = ("AWS4" + sk).encode()
    for part in (date8, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(key, policy, hashlib.sha256).hexdigest()
    return {"policy": policy.decode(), "x-amz-algorithm": "AWS4-HMAC-SHA256",
            "x-amz-credential": cred, "x-amz-date": amz_date, "x-amz-signature": sig}


def post(d, bucket, fields, content=b"hello from a form", filename="hello.txt"):
    """curl -F, fields in order, the file last (as browsers and S3 want it)."""
    tmp = tempfile.NamedTemporaryFile(suffix="-" + filename, delete=False)
    tmp.write(content)
    tmp.close()
    args = ["curl", "-sS", "-i", "--max-time", "60"]
    for k, v in fields.items():
        args += ["--form-string", f"{k}={v}"]
    args += ["-F", f"file=@{tmp.name};filename={filename};type=text/plain",
             f"{d.s3_url}/{bucket}"]
    out = subprocess.run(args, capture_output=True, timeout=90).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 100"):
        head, _, body = body.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        headers[k.decode().lower()] = v.strip().decode()
    return status, headers, body


def absent(c, bucket, key):
    with pytest.raises(ClientError) as e:
        c.head_object(Bucket=bucket, Key=key)
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


BASE = [{"bucket": "forms"}, ["starts-with", "$key", "uploads/"], {"acl": "private"},
        ["starts-with", "$Content-Type", "text/"], {"success_action_status": "201"},
        ["content-length-range", 1, 1000]]


def form(ak="alicekey", sk="alicesecret", conditions=BASE, **kw):
    f = {"key": "uploads/${filename}", "acl": "private", "Content-Type": "text/plain",
         "success_action_status": "201"}
    f.update(signed_fields(ak, sk, conditions, **kw))
    return f


def test_post_upload_with_good_policy(d, alice):
    st, h, body = post(d, "forms", form())
    assert st == 201, body
    assert b"<Key>uploads/hello.txt</Key>" in body and b"<Bucket>forms</Bucket>" in body
    # AWS's PostResponse has no namespace: clients find <Key> unqualified
    import xml.etree.ElementTree as ET
    assert ET.fromstring(body).find("Key").text == "uploads/hello.txt"
    assert h["etag"] == '"%s"' % hashlib.md5(b"hello from a form").hexdigest()
    g = alice.get_object(Bucket="forms", Key="uploads/hello.txt")
    assert g["Body"].read() == b"hello from a form" and g["ContentType"] == "text/plain"
    assert alice.get_object_acl(Bucket="forms", Key="uploads/hello.txt")["Owner"]["ID"] == \
        "alice"


def test_post_redirect_and_default_status(d, alice):
    conds = [{"bucket": "forms"}, ["starts-with", "$key", "r/"],
             {"success_action_redirect": "http://app.example/done"}]
    f = {"key": "r/one", "success_action_redirect": "http://app.example/done"}
    f.update(signed_fields("alicekey", "alicesecret", conds))
    st, h, _ = post(d, "forms", f)
    assert st == 303
    from urllib.parse import parse_qs, urlsplit
    u = urlsplit(h["location"])
    assert (u.scheme, u.netloc, u.path) == ("http", "app.example", "/done")
    q = parse_qs(u.query)
    assert q["bucket"] == ["forms"] and q["key"] == ["r/one"]
    assert q["etag"] == ['"%s"' % hashlib.md5(b"hello from a form").hexdigest()]
    conds = [{"bucket": "forms"}, {"key": "r/two"}]
    f = {"key": "r/two"}
    f.update(signed_fields("alicekey", "alicesecret", conds))
    assert post(d, "forms", f)[0] == 204
    assert alice.get_object(Bucket="forms", Key="r/two")["Body"].read() == b"hello from a form"


@pytest.mark.parametrize("case", ["key-prefix", "expired", "too-large", "bad-signature",
                                  "extra-field", "wrong-bucket", "unknown-key", "no-key"])
def test_post_bad_policies_are_refused(d, alice, case):
    f = form()
    want = (403, "AccessDenied")
    content = b"hello from a form"
    if case == "key-prefix":
        f["key"] = "elsewhere/${filename}"
    elif case == "expired":
        f = form(now=datetime.datetime.now(datetime.timezone.utc) -
                 datetime.timedelta(hours=2), expires_in=60)
    elif case == "too-large":
        content = b"x" * 5000
        want = (400, "EntityTooLarge")
    elif case == "bad-signature":
        f["x-amz-signature"] = "0" * 64
        want = (403, "SignatureDoesNotMatch")
    elif case == "extra-field":
        f["x-amz-meta-sneaky"] = "1"
    elif case == "wrong-bucket":
        f = form(conditions=[{"bucket": "other"}] + BASE[1:])
    elif case == "unknown-key":
        f = form(ak="nosuchkey")
        want = (403, "InvalidAccessKeyId")
    elif case == "no-key":
        del f["key"]
        want = (400, "InvalidArgument")
    st, _, body = post(d, "forms", f, content=content, filename=f"bad-{case}.txt")
    assert (st, code(body)) == want, body
    why = {"expired": b"Policy expired", "key-prefix": b"Policy Condition failed: $key",
           "extra-field": b"Extra input fields: x-amz-meta-sneaky",
           "wrong-bucket": b"Policy Condition failed"}
    if case in why:
        assert why[case] in body, body
    assert absent(alice, "forms", f"uploads/bad-{case}.txt")


def test_post_by_another_user_or_anonymous(d, alice):
    # bob signs a perfect policy, but the bucket is alice's and grants him nothing
    st, _, body = post(d, "forms", form(ak="bobkey", sk="bobsecret"), filename="bob.txt")
    assert (st, code(body)) == (403, "AccessDenied")
    assert absent(alice, "forms", "uploads/bob.txt")
    # an anonymous form (no policy) only where the bucket takes anonymous writes
    st, _, body = post(d, "forms", {"key": "anon.txt"})
    assert (st, code(body)) == (403, "AccessDenied")
    st, _, body = post(d, "dropbox", {"key": "anon.txt"})
    assert st == 204, body
    assert alice.get_object(Bucket="dropbox", Key="anon.txt")["Body"].read() == \
        b"hello from a form"


def test_post_malformed_form(d):
    out = subprocess.run(["curl", "-sS", "-i", "-H",
                          "Content-Type: multipart/form-data; boundary=XyZ",
                          "--data-binary", "--XyZ\r\ngarbage", f"{d.s3_url}/forms"],
                         capture_output=True, timeout=60).stdout
    assert b" 400 " in out.split(b"\r\n")[0] and b"MalformedPOSTRequest" in out


def test_post_with_sigv2_policy_signature(d, alice):
    """The form older SDKs and the s3-tests suite send: AWSAccessKeyId + base64 HMAC-SHA1."""
    exp = (datetime.datetime.now(datetime.timezone.utc) +
           datetime.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pol = base64.b64encode(json.dumps({"expiration": exp, "conditions": [
        {"bucket": "forms"}, ["starts-with", "$key", "v2/"], {"acl": "private"},
        ["starts-with", "$Content-Type", "text/"], ["content-length-range", 0, 1024]]}).encode())
    sig = base64.b64encode(hmac.new(b"alicesecret", pol, hashlib.sha1).digest()).decode()
    f = {"key": "v2/${filename}", "AWSAccessKeyId": "alicekey", "acl": "private",
         "signature": sig, "policy": pol.decode(), "Content-Type": "text/plain"}
    st, _, body = post(d, "forms", f, filename="v2.txt")
    assert st == 204, body
    assert alice.get_object(Bucket="forms", Key="v2/v2.txt")["Body"].read() == \
        b"hello from a form"
    f["signature"] = base64.b64encode(b"x" * 20).decode()
    st, _, body = post(d, "forms", f, filename="v2-bad.txt")
    assert (st, code(body)) == (403, "SignatureDoesNotMatch")
    assert absent(alice, "forms", "v2/v2-bad.txt")


def test_post_tagging_field_sets_the_object_tags(d, alice):
    # The "tagging" form field (a Tagging XML document) gives the object its tags, as AWS's
    # POST does; a bad document is refused and nothing is stored.
    xml = ("<Tagging><TagSet><Tag><Key>team</Key><Value>ml</Value></Tag>"
           "<Tag><Key>stage</Key><Value>raw</Value></Tag></TagSet></Tagging>")
    conds = [{"bucket": "forms"}, ["starts-with", "$key", "t/"], ["starts-with", "$tagging", ""]]
    f = {"key": "t/one", "tagging": xml}
    f.update(signed_fields("alicekey", "alicesecret", conds))
    st, _, body = post(d, "forms", f)
    assert st == 204, body
    got = alice.get_object_tagging(Bucket="forms", Key="t/one")["TagSet"]
    assert {(t["Key"], t["Value"]) for t in got} == {("team", "ml"), ("stage", "raw")}
    assert alice.head_object(Bucket="forms", Key="t/one")["ResponseMetadata"][
        "HTTPHeaders"]["x-amz-tagging-count"] == "2"
    for bad, want in [("<Tagging><TagSet>", "MalformedXML"),
                      ("<Tagging><TagSet><Tag><Key>aws:x</Key><Value>v</Value></Tag>"
                       "</TagSet></Tagging>", "InvalidTag")]:
        f = {"key": "t/bad", "tagging": bad}
        f.update(signed_fields("alicekey", "alicesecret", conds))
        st, _, body = post(d, "forms", f)
        assert st == 400 and want.encode() in body, body
        absent(alice, "forms", "t/bad")
