"""S3 lifecycle rules (issue 12) against the real openlaked, under the test clock
([s3] lifecycle_day_secs = 1: a lifecycle day is a second; the scanner runs every second):
PUT/GET/DELETE ?lifecycle and their errors as AWS, expiration by days (a delete in an
unversioned bucket, a delete marker in a versioned one), prefix / tag / size filters taking
exactly what they name, noncurrent versions expired past NewerNoncurrentVersions, expired
delete markers removed, incomplete multipart uploads aborted, a locked version skipped and
counted; the scanner's metrics move. Every wait is on a condition with a deadline."""

import base64
import datetime
import hashlib
import http.client
import re
import shutil
import tempfile

import pytest

from conftest import Daemon, boto3_client, wait_for
from s3_users import err

LC = "[s3]\nlifecycle_day_secs = 1\nlifecycle_interval_secs = 1\nlifecycle_ops_per_sec = 2000\n"


@pytest.fixture(scope="module")
def d():
    root = tempfile.mkdtemp(prefix="openlake-lc-")
    dm = Daemon(root, extra=LC).start()
    yield dm
    dm.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def s3(d):
    return boto3_client(d.s3_url)


def metrics(d):
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30)
    try:
        c.request("GET", "/metrics")
        return c.getresponse().read().decode()
    finally:
        c.close()


def metric(d, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), metrics(d), re.M)
    return float(m.group(1)) if m else None


def scans(d):
    return metric(d, "openlake_lifecycle_scans_total")


def two_more_scans(d):
    """Wait until two whole scans ran after this call (so one started after it)."""
    start = scans(d)
    wait_for(lambda: scans(d) >= start + 2, 60, "two lifecycle scans")


def rules(*r):
    return {"Rules": list(r)}


def keys(s3, b):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", []))


def versions(s3, b, prefix=""):
    out = s3.list_object_versions(Bucket=b, Prefix=prefix)
    return ([(v["Key"], v["VersionId"]) for v in out.get("Versions", [])],
            [(m["Key"], m["VersionId"]) for m in out.get("DeleteMarkers", [])])


def test_configuration_roundtrip_and_errors(d, s3):
    b = "lc-cfg"
    s3.create_bucket(Bucket=b)
    assert err(s3.get_bucket_lifecycle_configuration, Bucket=b) == (
        404, "NoSuchLifecycleConfiguration")
    cfg = rules({"ID": "logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
                 "Expiration": {"Days": 30}},
                {"ID": "tmp", "Status": "Disabled",
                 "Filter": {"And": {"Prefix": "t/", "Tags": [{"Key": "k", "Value": "v"}],
                                    "ObjectSizeGreaterThan": 10}},
                 "NoncurrentVersionExpiration": {"NoncurrentDays": 3,
                                                 "NewerNoncurrentVersions": 2}},
                {"ID": "mpu", "Status": "Enabled", "Filter": {},
                 "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}})
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=cfg)
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert [r["ID"] for r in got] == ["logs", "tmp", "mpu"]
    assert got[0]["Expiration"] == {"Days": 30} and got[0]["Filter"] == {"Prefix": "logs/"}
    assert got[1]["Filter"]["And"]["Tags"] == [{"Key": "k", "Value": "v"}]
    assert got[1]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 3,
                                                     "NewerNoncurrentVersions": 2}
    assert got[2]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    bad = [
        ({"ID": "a", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 0}},
         (400, "InvalidArgument")),
        ({"ID": "a", "Status": "Enabled", "Filter": {}}, (400, "InvalidRequest")),
        ({"ID": "a", "Status": "On", "Filter": {}, "Expiration": {"Days": 1}},
         (400, "MalformedXML")),
        ({"ID": "a", "Status": "Enabled", "Filter": {},
          "Expiration": {"Date": datetime.datetime(2030, 1, 1, 12, 0, 0)}},
         (400, "InvalidArgument")),
        ({"ID": "a", "Status": "Enabled", "Filter": {},
          "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}, (501, "NotImplemented")),
        ({"ID": "a", "Status": "Enabled", "Filter": {"Tag": {"Key": "k", "Value": "v"}},
          "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
         (400, "InvalidRequest")),
    ]
    for rule, want in bad:
        assert err(s3.put_bucket_lifecycle_configuration, Bucket=b,
                   LifecycleConfiguration=rules(rule)) == want, rule
    # x-amz-expiration on PUT, HEAD and GET of what an Expiration rule takes (30 test days)
    put = s3.put_object(Bucket=b, Key="logs/x", Body=b"x")
    head = s3.head_object(Bucket=b, Key="logs/x")
    get = s3.get_object(Bucket=b, Key="logs/x")
    for r in (put, head, get):
        assert re.fullmatch(r'expiry-date="[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} '
                            r'\d\d:\d\d:\d\d GMT", rule-id="logs"', r["Expiration"]), r
    s3.put_object(Bucket=b, Key="other", Body=b"y")
    assert "Expiration" not in s3.head_object(Bucket=b, Key="other")
    dup = {"ID": "same", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}}
    assert err(s3.put_bucket_lifecycle_configuration, Bucket=b,
               LifecycleConfiguration=rules(dup, dict(dup))) == (400, "InvalidArgument")
    # the refused documents left the stored one as it was
    assert [r["ID"] for r in s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]] == [
        "logs", "tmp", "mpu"]
    s3.delete_bucket_lifecycle(Bucket=b)
    assert err(s3.get_bucket_lifecycle_configuration, Bucket=b) == (
        404, "NoSuchLifecycleConfiguration")


def test_expiration_takes_exactly_what_the_filters_name(d, s3):
    u, v = "lc-exp-plain", "lc-exp-ver"
    s3.create_bucket(Bucket=u)
    s3.create_bucket(Bucket=v)
    s3.put_bucket_versioning(Bucket=v, VersioningConfiguration={"Status": "Enabled"})
    exp0 = metric(d, "openlake_lifecycle_actions_total", '{action="expiration"}')
    s3.put_bucket_lifecycle_configuration(Bucket=u, LifecycleConfiguration=rules(
        {"ID": "logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
         "Expiration": {"Days": 1}},
        {"ID": "big", "Status": "Enabled",
         "Filter": {"And": {"Prefix": "big/", "ObjectSizeGreaterThan": 100}},
         "Expiration": {"Days": 1}}))
    s3.put_bucket_lifecycle_configuration(Bucket=v, LifecycleConfiguration=rules(
        {"ID": "tmp", "Status": "Enabled", "Filter": {"Tag": {"Key": "tmp", "Value": "yes"}},
         "Expiration": {"Days": 1}}))
    r = s3.put_object(Bucket=u, Key="logs/a", Body=b"a")
    assert 'rule-id="logs"' in r["Expiration"]
    s3.put_object(Bucket=u, Key="logs/b", Body=b"b")
    s3.put_object(Bucket=u, Key="logsx", Body=b"not under logs/")
    s3.put_object(Bucket=u, Key="data/c", Body=b"c")
    s3.put_object(Bucket=u, Key="big/small", Body=b"s" * 10)
    s3.put_object(Bucket=u, Key="big/large", Body=b"l" * 1000)
    s3.put_object(Bucket=v, Key="t1", Body=b"1", Tagging="tmp=yes")
    s3.put_object(Bucket=v, Key="t2", Body=b"2", Tagging="tmp=no")
    s3.put_object(Bucket=v, Key="t3", Body=b"3")
    wait_for(lambda: keys(s3, u) == ["big/small", "data/c", "logsx"], 60,
             "logs/* and big/large expired")
    wait_for(lambda: keys(s3, v) == ["t2", "t3"], 60, "t1 expired")
    # versioned: t1's data is still there, under a delete marker
    vs, dms = versions(s3, v, "t1")
    assert len(vs) == 1 and len(dms) == 1
    assert s3.get_object(Bucket=v, Key="t1", VersionId=vs[0][1])["Body"].read() == b"1"
    two_more_scans(d)
    assert keys(s3, u) == ["big/small", "data/c", "logsx"]
    assert keys(s3, v) == ["t2", "t3"]
    assert metric(d, "openlake_lifecycle_actions_total", '{action="expiration"}') >= exp0 + 4
    assert metric(d, "openlake_lifecycle_last_scan_duration_seconds") is not None
    assert "# TYPE openlake_lifecycle_actions_total counter" in metrics(d)


def test_noncurrent_versions_and_expired_delete_markers(d, s3):
    b = "lc-nc"
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    vids = [s3.put_object(Bucket=b, Key="n/k", Body=b"v%d" % i)["VersionId"] for i in range(5)]
    s3.put_object(Bucket=b, Key="m/x", Body=b"x")
    s3.delete_object(Bucket=b, Key="m/x")  # a marker over one version
    s3.put_object(Bucket=b, Key="keep/y", Body=b"y1")
    s3.put_object(Bucket=b, Key="keep/y", Body=b"y2")
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=rules(
        {"ID": "n", "Status": "Enabled", "Filter": {"Prefix": "n/"},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 2}},
        {"ID": "m", "Status": "Enabled", "Filter": {"Prefix": "m/"},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
         "Expiration": {"ExpiredObjectDeleteMarker": True}}))
    # the current version and the two newest noncurrent ones stay
    wait_for(lambda: sorted(x[1] for x in versions(s3, b, "n/")[0]) == sorted(vids[2:]), 60,
             "n/k down to 3 versions")
    # m/x: its noncurrent version goes, then the marker left alone
    wait_for(lambda: versions(s3, b, "m/") == ([], []), 60, "m/x gone with its marker")
    two_more_scans(d)
    assert sorted(x[1] for x in versions(s3, b, "n/")[0]) == sorted(vids[2:])
    assert s3.get_object(Bucket=b, Key="n/k")["Body"].read() == b"v4"
    assert len(versions(s3, b, "keep/")[0]) == 2
    assert metric(d, "openlake_lifecycle_actions_total",
                  '{action="expired_delete_marker"}') >= 1
    assert metric(d, "openlake_lifecycle_actions_total",
                  '{action="noncurrent_expiration"}') >= 3


def test_locked_version_is_skipped_and_counted(d, s3):
    b = "lc-lock"
    s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    body = b"locked"
    locked = s3.put_object(Bucket=b, Key="L", Body=body, ObjectLockMode="GOVERNANCE",
                           ObjectLockRetainUntilDate=until,
                           ContentMD5=base64.b64encode(hashlib.md5(body).digest()).decode()
                           )["VersionId"]
    s3.put_object(Bucket=b, Key="L", Body=b"newer")
    free = s3.put_object(Bucket=b, Key="F", Body=b"free")["VersionId"]
    s3.put_object(Bucket=b, Key="F", Body=b"newer")
    skipped0 = metric(d, "openlake_lifecycle_skipped_locked_total")
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=rules(
        {"ID": "all", "Status": "Enabled", "Filter": {"Prefix": ""},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}))
    wait_for(lambda: free not in [x[1] for x in versions(s3, b, "F")[0]], 60,
             "F's noncurrent version expired")
    wait_for(lambda: metric(d, "openlake_lifecycle_skipped_locked_total") > skipped0, 60,
             "the locked version counted as skipped")
    assert locked in [x[1] for x in versions(s3, b, "L")[0]]
    assert s3.get_object(Bucket=b, Key="L", VersionId=locked)["Body"].read() == body


def test_incomplete_uploads_aborted(d, s3):
    b = "lc-mpu"
    s3.create_bucket(Bucket=b)
    gone = s3.create_multipart_upload(Bucket=b, Key="up/a")["UploadId"]
    s3.upload_part(Bucket=b, Key="up/a", UploadId=gone, PartNumber=1, Body=b"p" * 1000)
    kept = s3.create_multipart_upload(Bucket=b, Key="keep/b")["UploadId"]
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=rules(
        {"ID": "mpu", "Status": "Enabled", "Filter": {"Prefix": "up/"},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}))

    def uploads():
        return sorted(u["UploadId"] for u in s3.list_multipart_uploads(Bucket=b).get(
            "Uploads", []))

    wait_for(lambda: uploads() == [kept], 60, "up/a aborted")
    two_more_scans(d)
    assert uploads() == [kept]
    assert metric(d, "openlake_lifecycle_actions_total",
                  '{action="abort_multipart_upload"}') >= 1


def test_rules_without_an_id_are_given_one(s3):
    # AWS gives a rule sent without an ID a random one and keeps it: GET returns the same ID
    # each time; rules sent with an ID keep theirs.
    s3.create_bucket(Bucket="lc-noid")
    s3.put_bucket_lifecycle_configuration(Bucket="lc-noid", LifecycleConfiguration={"Rules": [
        {"Expiration": {"Days": 31}, "Prefix": "a/", "Status": "Enabled"},
        {"ID": "mine", "Expiration": {"Days": 7}, "Filter": {"Prefix": "b/"},
         "Status": "Enabled"},
        {"Expiration": {"Days": 120}, "Filter": {}, "Status": "Disabled"}]})
    got = s3.get_bucket_lifecycle_configuration(Bucket="lc-noid")["Rules"]
    ids = [r["ID"] for r in got]
    assert ids[1] == "mine" and re.fullmatch(r"[0-9a-f]{32}", ids[0]) and \
        re.fullmatch(r"[0-9a-f]{32}", ids[2]) and ids[0] != ids[2]
    assert [(r.get("Prefix", r.get("Filter", {}).get("Prefix")), r["Expiration"]["Days"],
             r["Status"]) for r in got] == [("a/", 31, "Enabled"), ("b/", 7, "Enabled"),
                                           ("", 120, "Disabled")]
    assert [r["ID"] for r in s3.get_bucket_lifecycle_configuration(Bucket="lc-noid")["Rules"]] \
        == ids
