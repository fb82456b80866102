"""S3 versioning against the real openlaked: PUT/GET ?versioning, version ids on PUT, copy,
multipart complete and delete, versionId on GET/HEAD/DELETE/copy source, delete markers, the
"null" version of a suspended bucket, ListObjectVersions (markers, prefix, delimiter,
pagination) and DeleteObjects with versions, each checked against a model kept here; kill -9
in the middle of versioned PUT/DELETE (no acknowledged version lost, none half written);
awscli and rclone (--s3-versions) on a versioned bucket."""

import hashlib
import random
import shutil
import subprocess
import textwrap
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

import botocore
import pytest

from conftest import ACCESS_KEY, REGION, SECRET_KEY, aws_env, boto3_client
from test_s3_common import err_code, raw

KiB = 1 << 10
NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def body_for(tag, size):
    """Self-describing bytes: a reader can tell a whole body from a torn one."""
    head = ("%s:%d:" % (tag, size)).encode()
    seed = hashlib.sha256(head).digest()
    out = bytearray(head)
    while len(out) < size:
        out += seed
    return bytes(out[:size]) if size >= len(head) else head


def enable(c, bucket, status="Enabled"):
    c.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def code(e):
    return e.value.response["Error"]["Code"]


class Model:
    """key -> versions newest first: dicts {vid, data (None: delete marker)}."""

    def __init__(self):
        self.keys = {}

    def put(self, key, vid, data):
        vs = self.keys.setdefault(key, [])
        if vid == "null":
            vs[:] = [v for v in vs if v["vid"] != "null"]
        vs.insert(0, {"vid": vid, "data": data})

    def remove(self, key, vid):
        vs = self.keys.get(key, [])
        vs[:] = [v for v in vs if v["vid"] != vid]
        if not vs:
            self.keys.pop(key, None)

    def listing(self, prefix="", delimiter=""):
        out, cps = [], []
        for k in sorted(self.keys, key=lambda s: s.encode()):
            if not k.startswith(prefix):
                continue
            if delimiter and delimiter in k[len(prefix):]:
                cp = k[:len(prefix) + k[len(prefix):].index(delimiter) + len(delimiter)]
                if cp not in cps:
                    cps.append(cp)
                continue
            for i, v in enumerate(self.keys[k]):
                out.append((k, v["vid"], i == 0, v["data"] is None))
        return out, cps


def list_all(c, bucket, page=None, **kw):
    """Every version and marker in the order the server lists them (raw XML: boto3 splits
    Version and DeleteMarker apart), following NextKeyMarker / NextVersionIdMarker, and the
    common prefixes."""
    names = {"Prefix": "prefix", "Delimiter": "delimiter", "KeyMarker": "key-marker",
             "VersionIdMarker": "version-id-marker"}
    args = {names[k]: v for k, v in kw.items()}
    if page:
        args["max-keys"] = str(page)
    got, cps = [], []
    for _ in range(10000):
        q = "&".join("%s=%s" % (k, urllib.parse.quote(v, safe=""))
                     for k, v in sorted(args.items()))
        st, _, body = raw(c.meta.endpoint_url, "GET", "/%s?versions%s" % (
            bucket, "&" + q if q else ""))
        assert st == 200, body
        root = ET.fromstring(body)
        for e in root:
            tag = e.tag.split("}")[-1]
            if tag in ("Version", "DeleteMarker"):
                got.append((e.find(NS + "Key").text, e.find(NS + "VersionId").text,
                            e.find(NS + "IsLatest").text == "true", tag == "DeleteMarker"))
            elif tag == "CommonPrefixes":
                cps.append(e.find(NS + "Prefix").text)
        if root.find(NS + "IsTruncated").text != "true":
            return got, cps
        args["key-marker"] = root.find(NS + "NextKeyMarker").text or ""
        nv = root.find(NS + "NextVersionIdMarker")
        args.pop("version-id-marker", None)
        if nv is not None and nv.text:
            args["version-id-marker"] = nv.text
    raise AssertionError("listing did not end")


def check_against(c, bucket, m, page=None):
    got, _ = list_all(c, bucket, page=page)
    want, _ = m.listing()
    assert got == want
    for k, vs in m.keys.items():
        cur = vs[0]
        if cur["data"] is None:
            with pytest.raises(botocore.exceptions.ClientError) as e:
                c.get_object(Bucket=bucket, Key=k)
            assert code(e) == "NoSuchKey"
            hdrs = e.value.response["ResponseMetadata"]["HTTPHeaders"]
            assert hdrs.get("x-amz-delete-marker") == "true"
            assert hdrs.get("x-amz-version-id") == cur["vid"]
        else:
            r = c.get_object(Bucket=bucket, Key=k)
            assert r["Body"].read() == cur["data"]
            assert r["VersionId"] == cur["vid"]
        for v in vs:
            if v["data"] is None:
                continue
            r = c.get_object(Bucket=bucket, Key=k, VersionId=v["vid"])
            assert r["Body"].read() == v["data"], (k, v["vid"])


def test_versioning_configuration(s3_client):
    c = s3_client
    c.create_bucket(Bucket="vcfg")
    r = c.get_bucket_versioning(Bucket="vcfg")
    assert "Status" not in r  # never versioned: an empty VersioningConfiguration
    for bad in ("Disabled", "enabled", ""):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.put_bucket_versioning(Bucket="vcfg", VersioningConfiguration={"Status": bad})
        assert code(e) in ("IllegalVersioningConfigurationException", "MalformedXML")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Status" not in c.get_bucket_versioning(Bucket="vcfg")
    enable(c, "vcfg")
    assert c.get_bucket_versioning(Bucket="vcfg")["Status"] == "Enabled"
    enable(c, "vcfg", "Suspended")
    assert c.get_bucket_versioning(Bucket="vcfg")["Status"] == "Suspended"
    with pytest.raises(botocore.exceptions.ClientError) as e:  # no way back to unversioned
        c.put_bucket_versioning(Bucket="vcfg", VersioningConfiguration={"Status": "Off"})
    assert c.get_bucket_versioning(Bucket="vcfg")["Status"] == "Suspended"
    st, _, body = raw(c.meta.endpoint_url, "PUT", "/vcfg?versioning", body=b"<not xml")
    assert st == 400 and err_code(body) == "MalformedXML"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.put_bucket_versioning(Bucket="no-such-vbucket",
                                VersioningConfiguration={"Status": "Enabled"})
    assert code(e) == "NoSuchBucket"


def test_round_trips_against_model(s3_client):
    """Random PUT (inline and shard-file sizes), overwrite, delete (markers), delete of one
    version, Enabled <-> Suspended, a pre-versioning object; after each phase the listing
    (paged), every current GET and every version's bytes match the model."""
    c, b, m = s3_client, "vmodel", Model()
    rnd = random.Random(12)
    c.create_bucket(Bucket=b)
    pre = body_for("pre", 300)
    c.put_object(Bucket=b, Key="a/pre", Body=pre)
    m.put("a/pre", "null", pre)
    enable(c, b)
    keys = ["a/1", "a/2", "a/pre", "b", "c/d/e", "c/d/f", "z"]
    status = "Enabled"
    for phase in range(4):
        for i in range(50):
            k = rnd.choice(keys)
            op = rnd.random()
            if op < 0.55:
                size = rnd.choice([0, 10, 3000, 200 * KiB]) if rnd.random() < 0.9 else 700 * KiB
                data = body_for("%s-%d-%d" % (k, phase, i), size)
                r = c.put_object(Bucket=b, Key=k, Body=data)
                # suspended: the null version, not named in the answer (AWS)
                assert ("VersionId" in r) == (status == "Enabled")
                vid = r.get("VersionId", "null")
                assert vid != "null" or status == "Suspended"
                m.put(k, vid, data)
            elif op < 0.75:
                r = c.delete_object(Bucket=b, Key=k)
                assert r["DeleteMarker"] is True
                assert (r["VersionId"] == "null") == (status == "Suspended")
                m.put(k, r["VersionId"], None)
            elif op < 0.9 and m.keys.get(k):
                v = rnd.choice(m.keys[k])
                r = c.delete_object(Bucket=b, Key=k, VersionId=v["vid"])
                assert r["VersionId"] == v["vid"]
                assert r.get("DeleteMarker", False) == (v["data"] is None)
                m.remove(k, v["vid"])
            else:  # DeleteObjects: one version by id and one key without (a marker)
                k2 = rnd.choice(keys)
                objs = [{"Key": k2}]
                if m.keys.get(k):
                    objs.append({"Key": k, "VersionId": rnd.choice(m.keys[k])["vid"]})
                r = c.delete_objects(Bucket=b, Delete={"Objects": objs})
                assert len(r["Deleted"]) == len(objs) and not r.get("Errors")
                for dd in r["Deleted"]:
                    if "VersionId" in dd and dd["Key"] == k and len(objs) == 2 and \
                            dd["VersionId"] == objs[1]["VersionId"]:
                        m.remove(k, dd["VersionId"])
                    else:
                        assert dd["DeleteMarker"] is True
                        m.put(dd["Key"], dd["DeleteMarkerVersionId"], None)
        check_against(c, b, m, page=rnd.choice([1, 2, 3, 1000]))
        status = "Suspended" if status == "Enabled" else "Enabled"
        enable(c, b, status)
    # prefix and delimiter
    for prefix, delim in (("a/", ""), ("", "/"), ("c/", "/"), ("c/d/", "/"), ("zz", "")):
        got, cps = list_all(c, b, Prefix=prefix, Delimiter=delim)
        want, wcps = m.listing(prefix, delim)
        assert got == want and sorted(cps) == sorted(wcps), (prefix, delim)
    # ListObjectsV2 shows the current non-marker versions only
    cur = sorted((k for k, vs in m.keys.items() if vs[0]["data"] is not None),
                 key=lambda s: s.encode())
    r = c.list_objects_v2(Bucket=b)
    assert [o["Key"] for o in r.get("Contents", [])] == cur


def test_writes_to_a_suspended_bucket_name_no_version(s3_client):
    """AWS's PutObject in a versioning-suspended bucket answers without x-amz-version-id (the
    API reference's "versioning suspended" example); so do CopyObject and
    CompleteMultipartUpload. The object is the null version: HEAD, GET and the version listing
    say "null". With versioning enabled each write names its new version."""
    c, b = s3_client, "vsusp"
    c.create_bucket(Bucket=b)
    enable(c, b, "Suspended")
    for status in ("Suspended", "Enabled"):
        enable(c, b, status)
        answers = {"put": c.put_object(Bucket=b, Key="p", Body=b"put")}
        answers["copy"] = c.copy_object(Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "p"})
        up = c.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
        e = c.upload_part(Bucket=b, Key="m", UploadId=up, PartNumber=1, Body=b"part")
        answers["complete"] = c.complete_multipart_upload(
            Bucket=b, Key="m", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e["ETag"]}]})
        for op, r in answers.items():
            assert ("VersionId" in r) == (status == "Enabled"), (status, op, r)
            assert r.get("VersionId") != "null", (status, op)
        for k in ("p", "c", "m"):
            want = answers[{"p": "put", "c": "copy", "m": "complete"}[k]].get("VersionId",
                                                                               "null")
            assert c.head_object(Bucket=b, Key=k)["VersionId"] == want, (status, k)
            assert c.get_object(Bucket=b, Key=k)["VersionId"] == want, (status, k)
    vs = c.list_object_versions(Bucket=b)["Versions"]
    assert sorted(v["VersionId"] == "null" for v in vs) == [False] * 3 + [True] * 3, vs


def test_markers_and_errors(s3_client):
    c, b = s3_client, "vmark"
    c.create_bucket(Bucket=b)
    enable(c, b)
    v1 = c.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
    dm = c.delete_object(Bucket=b, Key="k")
    assert dm["DeleteMarker"] and dm["VersionId"] != v1
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.head_object(Bucket=b, Key="k")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:  # GET of a marker by id: 405
        c.get_object(Bucket=b, Key="k", VersionId=dm["VersionId"])
    assert code(e) == "MethodNotAllowed"
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object(Bucket=b, Key="k", VersionId="0" * 48)
    assert code(e) == "NoSuchVersion"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c.get_object(Bucket=b, Key="k", VersionId="not-a-version")
    assert code(e) == "InvalidArgument"
    assert c.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read() == b"one"
    assert c.head_object(Bucket=b, Key="k", VersionId=v1)["VersionId"] == v1
    # If-None-Match: * treats a current marker as no object
    st, _, _ = raw(c.meta.endpoint_url, "PUT", "/vmark/k", headers={"If-None-Match": "*"},
                   body=b"two")
    assert st == 200
    # copy from an old version; multipart complete gets a version id
    r = c.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k", "VersionId": v1})
    assert r["CopySourceVersionId"] == v1 and r["VersionId"] not in ("null", v1)
    assert c.get_object(Bucket=b, Key="copy")["Body"].read() == b"one"
    up = c.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    p1 = c.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"x" * (5 << 20))
    r = c.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]})
    assert r["VersionId"] not in ("", "null")
    c.put_object(Bucket=b, Key="mp", Body=b"small")
    assert len(c.get_object(Bucket=b, Key="mp", VersionId=r["VersionId"])["Body"].read()) == \
        5 << 20
    # a versioned bucket is not empty while any version or marker is left
    objs = [{"Key": e[0], "VersionId": e[1]} for e in list_all(c, b)[0]]
    for keep in (["k"], []):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.delete_bucket(Bucket=b)
        assert code(e) == "BucketNotEmpty"
        gone = [o for o in objs if o["Key"] not in keep]
        r = c.delete_objects(Bucket=b, Delete={"Objects": gone})
        assert sorted((d["Key"], d["VersionId"]) for d in r["Deleted"]) == \
            sorted((o["Key"], o["VersionId"]) for o in gone)
        objs = [o for o in objs if o not in gone]
    assert list_all(c, b) == ([], [])
    c.delete_bucket(Bucket=b)


def test_kill9_during_versioned_writes(openlaked):
    """Writers PUT and DELETE (markers, and single versions) in an Enabled bucket while the
    daemon is killed with -9 three times; after each restart every acknowledged version is
    there with its exact bytes, every acknowledged delete is, and every listed version reads
    whole (a write cut short is either all there or absent)."""
    d = openlaked()
    c = boto3_client(d.s3_url)
    b = "vcrash"
    c.create_bucket(Bucket=b)
    enable(c, b)
    acked = {}     # (key, vid) -> data (None: marker)
    removed = set()  # versions a permanent delete was sent for (acknowledged or not)
    lock = threading.Lock()
    for rnd_i in range(3):
        stop = threading.Event()

        def writer(w):
            rnd = random.Random(w * 100 + rnd_i)
            cl = boto3_client(d.s3_url)
            for i in range(10000):
                if stop.is_set():
                    return
                k = "k%d" % rnd.randint(0, 5)
                try:
                    if rnd.random() < 0.7:
                        data = body_for("%d-%d-%d" % (rnd_i, w, i),
                                        rnd.choice([100, 5000, 300 * KiB]))
                        vid = cl.put_object(Bucket=b, Key=k, Body=data)["VersionId"]
                        with lock:
                            acked[(k, vid)] = data
                    elif rnd.random() < 0.7:
                        vid = cl.delete_object(Bucket=b, Key=k)["VersionId"]
                        with lock:
                            acked[(k, vid)] = None
                    else:
                        with lock:
                            mine = [kv for kv in acked if kv[0] == k and kv not in removed]
                        if mine:
                            kv = rnd.choice(mine)
                            with lock:  # cut short, it may or may not have happened
                                removed.add(kv)
                            cl.delete_object(Bucket=b, Key=k, VersionId=kv[1])
                except Exception:
                    return  # the daemon died under us: this op is not acknowledged

        ts = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
        for t in ts:
            t.start()
        deadline = time.time() + 30
        start = len(acked)
        while len(acked) < start + 15 + rnd_i * 10 and time.time() < deadline:
            time.sleep(0.05)
        d.kill9()
        stop.set()
        for t in ts:
            t.join(60)
        d.start()
        got, _ = list_all(c, b)
        listed = {(k, v): mk for k, v, _, mk in got}
        with lock:
            for kv, data in acked.items():
                if kv in removed:
                    continue
                assert kv in listed, "acknowledged version %s lost" % (kv,)
                assert listed[kv] == (data is None)
        for (k, v), mk in listed.items():
            if mk:
                continue
            data = c.get_object(Bucket=b, Key=k, VersionId=v)["Body"].read()
            tag, size = data.split(b":")[0:2]
            assert data == body_for(tag.decode(), int(size)), "torn version %s %s" % (k, v)
            if (k, v) in acked:
                assert data == acked[(k, v)]
    assert len(acked) >= 30


def test_awscli_and_rclone(s3_daemon, tmp_path):
    c = boto3_client(s3_daemon.s3_url)
    b = "vclients"
    c.create_bucket(Bucket=b)
    env = aws_env()
    aws = ["/usr/bin/aws", "--endpoint-url", s3_daemon.s3_url]
    if not shutil.which("/usr/bin/aws"):
        pytest.skip("no awscli")

    def run(cmd, **kw):
        r = subprocess.run(cmd, env=kw.get("env", env), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r.stdout.decode()

    import json
    run(aws + ["s3api", "put-bucket-versioning", "--bucket", b,
               "--versioning-configuration", "Status=Enabled"])
    assert json.loads(run(aws + ["s3api", "get-bucket-versioning", "--bucket", b]))["Status"] \
        == "Enabled"
    f1, f2 = tmp_path / "f1", tmp_path / "f2"
    f1.write_bytes(b"first")
    f2.write_bytes(b"second!")
    v1 = json.loads(run(aws + ["s3api", "put-object", "--bucket", b, "--key", "doc",
                               "--body", str(f1)]))["VersionId"]
    t1 = c.head_object(Bucket=b, Key="doc")["LastModified"].timestamp()
    deadline = time.time() + 30  # the second version must be stamped at a later second
    while time.time() < t1 + 1.05 and time.time() < deadline:
        time.sleep(0.05)
    run(aws + ["s3", "cp", str(f2), "s3://%s/doc" % b])
    lv = json.loads(run(aws + ["s3api", "list-object-versions", "--bucket", b]))
    assert [(v["Key"], v["IsLatest"]) for v in lv["Versions"]] == [("doc", True), ("doc", False)]
    assert lv["Versions"][1]["VersionId"] == v1
    out = tmp_path / "got"
    run(aws + ["s3api", "get-object", "--bucket", b, "--key", "doc", "--version-id", v1,
               str(out)])
    assert out.read_bytes() == b"first"
    if not shutil.which("rclone"):
        pytest.skip("no rclone")
    cfg = tmp_path / "rclone.conf"
    cfg.write_text(textwrap.dedent(f"""\
        [ol]
        type = s3
        provider = Other
        access_key_id = {ACCESS_KEY}
        secret_access_key = {SECRET_KEY}
        endpoint = {s3_daemon.s3_url}
        region = {REGION}
        force_path_style = true
        """))
    rc = ["rclone", "--config", str(cfg), "--low-level-retries", "1", "--retries", "1"]
    renv = {k: v for k, v in env.items() if k != "AWS_CA_BUNDLE"}
    ls = run(rc + ["ls", "--s3-versions", "ol:" + b], env=renv)
    names = sorted(line.split()[-1] for line in ls.splitlines())
    assert len(names) == 2 and names[0] == "doc" and names[1].startswith("doc-v"), ls
    old = run(rc + ["cat", "--s3-versions", "ol:%s/%s" % (b, names[1])], env=renv)
    assert old == "first"
    assert run(rc + ["cat", "ol:%s/doc" % b], env=renv) == "second!"
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t1) + 1))
    assert run(rc + ["cat", "--s3-version-at", at, "ol:%s/doc" % b], env=renv) == "first"
    # awscli: a delete adds a marker; the listing shows it, the old versions stay
    run(aws + ["s3", "rm", "s3://%s/doc" % b])
    assert "doc" not in run(aws + ["s3", "ls", "s3://%s/" % b])
    lv = json.loads(run(aws + ["s3api", "list-object-versions", "--bucket", b]))
    assert [m["IsLatest"] for m in lv["DeleteMarkers"]] == [True] and len(lv["Versions"]) == 2
    run(aws + ["s3api", "delete-object", "--bucket", b, "--key", "doc", "--version-id",
               lv["DeleteMarkers"][0]["VersionId"]])
    assert run(rc + ["cat", "ol:%s/doc" % b], env=renv) == "second!"


def test_concurrent_writers_one_key(s3_client):
    """Four writers put versions of one key at once (their commits grouped): every
    acknowledged version is listed once, newest first, one of them latest, each with its
    own bytes."""
    c, b = s3_client, "vconc"
    c.create_bucket(Bucket=b)
    enable(c, b)
    acked, lock = {}, threading.Lock()

    def writer(w):
        cl = boto3_client(c.meta.endpoint_url)
        for i in range(20):
            data = body_for("w%d-%d" % (w, i), 2000 if i % 2 else 200 * KiB)
            vid = cl.put_object(Bucket=b, Key="hot", Body=data)["VersionId"]
            with lock:
                acked[vid] = data

    ts = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert len(acked) == 80
    got, _ = list_all(c, b, page=7)
    assert sorted(v for _, v, _, _ in got) == sorted(acked)
    assert [latest for _, _, latest, _ in got] == [True] + [False] * 79
    cur = c.get_object(Bucket=b, Key="hot")
    assert cur["VersionId"] == got[0][1] and cur["Body"].read() == acked[got[0][1]]
    for vid, data in acked.items():
        assert c.get_object(Bucket=b, Key="hot", VersionId=vid)["Body"].read() == data
