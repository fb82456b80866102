"""One node, 8 drives, set_drive_count = 4: two erasure sets of 4 (store/sets.c, issue 10).

Through boto3 against the real daemon: objects land on both sets (shard files under both
groups of drives), a listing of 1000+ keys is complete and ordered page after page, versions
and multipart uploads work across the sets, a bucket deletes only when every set is empty,
and after kill -9 and a restart everything reads back, also with data_dirs listed in reverse. Opening the store with another set
count is refused with a message naming the fix.
"""

import concurrent.futures
import hashlib
import os
import pathlib
import subprocess
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import OPENLAKED, boto3_client

NKEYS = 1100


def shard_files(dirs):
    n = 0
    for d in dirs:
        for _, _, files in os.walk(pathlib.Path(d) / ".openlake" / "data"):
            n += len(files)
    return n


def body(i, size=300 * 1024):
    seed = hashlib.sha256(b"obj%d" % i).digest()
    return (seed * (size // len(seed) + 1))[:size]


def list_keys(s3, bucket, page, **kw):
    keys, token = [], None
    while True:
        args = dict(Bucket=bucket, MaxKeys=page, **kw)
        if token:
            args["ContinuationToken"] = token
        r = s3.list_objects_v2(**args)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        token = r["NextContinuationToken"]


def test_two_sets_on_one_node(openlaked):
    d = openlaked(drives=8, set_drive_count=4, kv=False)
    assert "2 erasure sets of 4 drives" in d.log(), d.log()
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket="big")
    s3.create_bucket(Bucket="many")

    # objects past the inline threshold: shard files on the drives of both sets
    for i in range(24):
        s3.put_object(Bucket="big", Key=f"obj/{i:03d}", Body=body(i))
    g0, g1 = shard_files(d.data_dirs[:4]), shard_files(d.data_dirs[4:])
    assert g0 > 0 and g1 > 0, f"shard files: set 0 {g0}, set 1 {g1}"
    for i, dd in enumerate(d.data_dirs):
        fmt = (pathlib.Path(dd) / ".openlake" / "format").read_text()
        assert "sets 2" in fmt and f"set {i // 4}" in fmt and "drives 4" in fmt, fmt
    # /metrics: one family over the 8 drives of both sets
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    assert text.count("# TYPE openlake_drive_online gauge") == 1, text
    online = [l for l in text.splitlines() if l.startswith("openlake_drive_online{")]
    assert len(online) == 8 and all(l.endswith(" 1") for l in online), online

    keys = [f"k/{(i * 7919) % NKEYS:05d}" for i in range(NKEYS)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket="many", Key=k, Body=k.encode()), keys))
    want = sorted(keys)
    assert list_keys(s3, "many", 1000) == want
    assert list_keys(s3, "many", 137) == want
    assert list_keys(s3, "many", 100, StartAfter="k/00500") == want[501:]
    # delimiter listing: one common prefix
    r = s3.list_objects_v2(Bucket="many", Delimiter="/")
    assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["k/"]

    # versions: keys in both sets, each with 3 versions
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    vkeys = [f"v{i}" for i in range(12)]
    for _ in range(3):
        for k in vkeys:
            s3.put_object(Bucket="ver", Key=k, Body=b"x")
    s3.delete_object(Bucket="ver", Key="v3")  # a delete marker
    versions, markers, kw = [], [], {}
    while True:
        r = s3.list_object_versions(Bucket="ver", MaxKeys=7, **kw)
        versions += [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])]
        markers += [m["Key"] for m in r.get("DeleteMarkers", [])]
        if not r.get("IsTruncated"):
            break
        kw = {"KeyMarker": r["NextKeyMarker"], "VersionIdMarker": r["NextVersionIdMarker"]}
    assert len(versions) == 36 and markers == ["v3"], (len(versions), markers)
    assert [k for k, _, _ in versions] == sorted(k for k, _, _ in versions)
    assert sum(1 for _, _, latest in versions if latest) == 11

    # multipart uploads of several keys (so both sets), listed, completed, read back
    part = os.urandom(5 * 1024 * 1024)
    ups = {}
    # placement is keyed by the store's random id: keys go on until both sets hold an upload
    # (6 keys miss one set 1 time in 32; 64 miss it 1 time in 2^63)
    for i in range(64):
        k = f"mp/{i}"
        ups[k] = s3.create_multipart_upload(Bucket="big", Key=k)["UploadId"]
        if i >= 5 and len({u[:2] for u in ups.values()}) == 2:
            break
    listed = s3.list_multipart_uploads(Bucket="big")["Uploads"]
    assert sorted((u["Key"], u["UploadId"]) for u in listed) == sorted(ups.items())
    assert {u[:2] for u in ups.values()} == {"00", "01"}, ups  # ids name both sets
    for k, uid in ups.items():
        e1 = s3.upload_part(Bucket="big", Key=k, UploadId=uid, PartNumber=1, Body=part)["ETag"]
        e2 = s3.upload_part(Bucket="big", Key=k, UploadId=uid, PartNumber=2,
                            Body=k.encode())["ETag"]
        assert len(s3.list_parts(Bucket="big", Key=k, UploadId=uid)["Parts"]) == 2
        s3.complete_multipart_upload(
            Bucket="big", Key=k, UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                       {"PartNumber": 2, "ETag": e2}]})
    for k in ups:
        assert s3.get_object(Bucket="big", Key=k)["Body"].read() == part + k.encode()
    assert "Uploads" not in s3.list_multipart_uploads(Bucket="big")

    # a bucket deletes only when every set is empty
    s3.create_bucket(Bucket="del")
    dkeys = [f"d{i}" for i in range(16)]
    for k in dkeys:
        s3.put_object(Bucket="del", Key=k, Body=b"1")
    for k in dkeys[:-1]:
        s3.delete_object(Bucket="del", Key=k)
        with pytest.raises(ClientError) as e:
            s3.delete_bucket(Bucket="del")
        assert e.value.response["Error"]["Code"] == "BucketNotEmpty"
    s3.delete_object(Bucket="del", Key=dkeys[-1])
    s3.delete_bucket(Bucket="del")
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="del")
    assert e.value.response["Error"]["Code"] in ("404", "NoSuchBucket")

    # kill -9 and restart: everything is there
    d.kill9()
    d.start()
    s3 = boto3_client(d.s3_url)
    assert sorted(b["Name"] for b in s3.list_buckets()["Buckets"]) == ["big", "many", "ver"]
    assert list_keys(s3, "many", 1000) == want
    for i in range(24):
        assert s3.get_object(Bucket="big", Key=f"obj/{i:03d}")["Body"].read() == body(i)
    for k in ups:
        assert s3.get_object(Bucket="big", Key=k)["Body"].read() == part + k.encode()
    r = s3.list_object_versions(Bucket="ver")
    assert len(r["Versions"]) == 36 and len(r["DeleteMarkers"]) == 1

    # data_dirs listed in reverse (disks mounted in another order): each dir is used at the
    # position its identity record names, across the sets too; everything reads back
    d.stop()
    cfg = d.config.read_text()
    dirs = ", ".join(f'"{x}"' for x in d.data_dirs)
    assert dirs in cfg, cfg
    d.config.write_text(cfg.replace(dirs, ", ".join(f'"{x}"' for x in reversed(d.data_dirs))))
    d.start()
    assert "list it as entry 8" in d.log() and "list it as entry 1 " in d.log(), d.log()
    s3 = boto3_client(d.s3_url)
    assert list_keys(s3, "many", 1000) == want
    for i in range(24):
        assert s3.get_object(Bucket="big", Key=f"obj/{i:03d}")["Body"].read() == body(i)
    d.stop()
    d.config.write_text(cfg)
    d.start()

    # the set count is fixed: the same 8 drives as one set of 8 do not open
    d.stop()
    cfg = d.config.read_text().replace("set_drive_count = 4", "set_drive_count = 8") \
        .replace("default_parity_count = 1", "default_parity_count = 2")
    bad = d.root / "as-one-set.toml"
    bad.write_text(cfg)
    out = subprocess.run([str(OPENLAKED), "--config", str(bad)], capture_output=True,
                         text=True, timeout=60, cwd=d.root)
    assert out.returncode != 0
    err = out.stdout + out.stderr
    assert "2 erasure set(s) of 4" in err and "set_drive_count = 4" in err, err
