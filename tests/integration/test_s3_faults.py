"""Faults on the running server, through S3: a corrupted shard file or a wiped drive still
gives the exact bytes; with more than P drives' shards gone the GET is a 5xx S3 error, never
wrong bytes; kill -9 during a stream of PUTs loses no acknowledged PUT and shows no half
object; a 200 MiB streamed PUT/GET keeps the daemon's memory far below the object size."""

import concurrent.futures
import hashlib
import http.client
import os
import pathlib
import random
import shutil
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import boto3_client
from test_s3_common import sign

MiB = 1 << 20
LMDB_NAMES = ("data.mdb", "lock.mdb")


def all_files(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            try:
                out[p] = os.path.getsize(p)
            except OSError:
                pass
    return out


def new_shard_files(daemon, before):
    """Files created since `before` (per drive), larger than 64 KiB and not LMDB: shards."""
    shards = {}
    for i, d in enumerate(daemon.data_dirs):
        now = all_files(d)
        shards[i] = [p for p, sz in now.items() if p not in before[i] and sz > 64 * 1024
                     and os.path.basename(p) not in LMDB_NAMES]
    return shards


def snapshot(daemon):
    return [all_files(d) for d in daemon.data_dirs]


def put_large(c, bucket, key, size, seed):
    body = random.Random(seed).randbytes(size)
    c.put_object(Bucket=bucket, Key=key, Body=body)
    return body


def test_corrupt_one_shard_file(openlaked):
    d = openlaked()
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="fault")
    before = snapshot(d)
    body = put_large(c, "fault", "big", 9 * MiB + 12345, 1)
    shards = new_shard_files(d, before)
    assert sum(len(v) for v in shards.values()) >= 4, shards
    drive = next(i for i in shards if shards[i])
    path = shards[drive][0]
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for off in (0, size // 2, size - 4096):
            f.seek(off)
            f.write(os.urandom(4096))
    assert c.get_object(Bucket="fault", Key="big")["Body"].read() == body
    g = c.get_object(Bucket="fault", Key="big", Range="bytes=%d-%d" % (4 * MiB, 6 * MiB))
    assert g["Body"].read() == body[4 * MiB:6 * MiB + 1]


def test_wipe_one_drive(openlaked):
    d = openlaked()
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="wipe")
    objs = {"small": b"tiny object", "mid": os.urandom(200_000),
            "big": random.Random(2).randbytes(5 * MiB + 7)}
    for k, v in objs.items():
        c.put_object(Bucket="wipe", Key=k, Body=v)
    victim = pathlib.Path(d.data_dirs[1])
    for p in victim.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    for k, v in objs.items():
        assert c.get_object(Bucket="wipe", Key=k)["Body"].read() == v, k
    d.kill9()
    d.start()
    c = boto3_client(d.s3_url)
    for k, v in objs.items():
        assert c.get_object(Bucket="wipe", Key=k)["Body"].read() == v, k


def test_too_many_shards_lost_is_5xx(openlaked):
    d = openlaked()  # N=4, P=1
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="lost")
    before = snapshot(d)
    put_large(c, "lost", "big", 8 * MiB, 3)
    shards = new_shard_files(d, before)
    drives = [i for i in shards if shards[i]][:2]  # P + 1 drives
    assert len(drives) == 2, shards
    for i in drives:
        for p in shards[i]:
            os.unlink(p)
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="lost", Key="big")["Body"].read()
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
    assert e.value.response["Error"]["Code"] in ("ServiceUnavailable", "InternalError")


def streamed_put(url, path, size, seed):
    """PUT size bytes generated on the fly (never held whole), UNSIGNED-PAYLOAD."""
    host = url.split("//")[1]
    hdrs = sign("PUT", url + path, {"Content-Length": str(size)}, b"",
                payload_hash="UNSIGNED-PAYLOAD")
    conn = http.client.HTTPConnection(*host.split(":"), timeout=120)
    conn.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", host)
    for k, v in hdrs.items():
        conn.putheader(k, v)
    conn.endheaders()
    md5 = hashlib.md5()
    rnd = random.Random(seed)
    sent = 0
    while sent < size:
        n = min(MiB, size - sent)
        chunk = rnd.randbytes(n)
        md5.update(chunk)
        conn.send(chunk)
        sent += n
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status, r.getheader("ETag"), md5.hexdigest()


def test_200mib_stream_memory_flat(openlaked):
    d = openlaked()
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="stream")
    size = 200 * MiB
    status, etag, md5 = streamed_put(d.s3_url, "/stream/huge", size, 4)
    assert status == 200 and etag == '"%s"' % md5
    g = c.get_object(Bucket="stream", Key="huge")
    h = hashlib.md5()
    n = 0
    for chunk in g["Body"].iter_chunks(MiB):
        h.update(chunk)
        n += len(chunk)
    assert n == size and h.hexdigest() == md5
    with open(f"/proc/{d.proc.pid}/status") as f:
        hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    assert hwm * 1024 < size // 3, "peak RSS %d KiB for a %d MiB object" % (hwm, size >> 20)


def test_kill9_during_puts(openlaked):
    d = openlaked()
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="crash")
    attempted = {}  # key -> md5s sent, in order
    acked = {}  # key -> index in attempted[key] of the last acknowledged PUT
    lock = threading.Lock()
    stop = threading.Event()

    def writer(tid):
        cl = boto3_client(d.s3_url)
        rnd = random.Random(tid)
        i = 0
        while not stop.is_set():
            key = "t%d/%05d" % (tid, i) if i % 5 else "t%d/overwritten" % tid
            size = rnd.choice([100, 5000, 140_000, 700_000, 2 * MiB + 3])
            body = rnd.randbytes(size)
            m = hashlib.md5(body).hexdigest()
            with lock:
                attempted.setdefault(key, []).append(m)
                idx = len(attempted[key]) - 1
            try:
                cl.put_object(Bucket="crash", Key=key, Body=body)
            except Exception:
                return
            with lock:
                acked[key] = idx
            i += 1

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(writer, t) for t in range(4)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(acked) < 40:
            time.sleep(0.05)
        d.kill9()
        stop.set()
        for f in futs:
            f.result()
    assert len(acked) >= 10
    d.start()
    c = boto3_client(d.s3_url)
    for key, idx in acked.items():
        got = hashlib.md5(c.get_object(Bucket="crash", Key=key)["Body"].read()).hexdigest()
        # the last acked version, or the later one that was in flight at the crash
        assert got in attempted[key][idx:], key
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="crash"):
        for o in page.get("Contents", []):
            got = hashlib.md5(c.get_object(Bucket="crash", Key=o["Key"])["Body"].read())
            assert got.hexdigest() in attempted[o["Key"]], o["Key"]
            assert o["ETag"] == '"%s"' % got.hexdigest()


def test_multipart_with_other_uploads_open(openlaked):
    """Complete and abort succeed while other uploads with parts sort after this one (an
    abandoned upload in bucket "mpu-zz" and concurrent ones in the same bucket); a zero-byte part
    uploads, completes and reads back; the bucket of an aborted upload can be deleted."""
    d = openlaked()
    c = boto3_client(d.s3_url)
    for b in ("mpu-aa", "mpu-zz"):
        c.create_bucket(Bucket=b)
    # an upload that stays open, with a part, in a bucket that sorts after "mpu-aa"
    stale = c.create_multipart_upload(Bucket="mpu-zz", Key="left-open")["UploadId"]
    c.upload_part(Bucket="mpu-zz", Key="left-open", UploadId=stale, PartNumber=1, Body=b"x" * 1000)
    rnd = random.Random(3)
    part1 = rnd.randbytes(5 * MiB)

    def one(i):
        cl = boto3_client(d.s3_url)
        key = "obj-%02d" % i
        up = cl.create_multipart_upload(Bucket="mpu-aa", Key=key)["UploadId"]
        e1 = cl.upload_part(Bucket="mpu-aa", Key=key, UploadId=up, PartNumber=1, Body=part1)
        e2 = cl.upload_part(Bucket="mpu-aa", Key=key, UploadId=up, PartNumber=2,
                            Body=bytes([i]) * 777)
        if i % 3 == 2:
            cl.abort_multipart_upload(Bucket="mpu-aa", Key=key, UploadId=up)
            return key, None
        cl.complete_multipart_upload(
            Bucket="mpu-aa", Key=key, UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1["ETag"]},
                                       {"PartNumber": 2, "ETag": e2["ETag"]}]})
        return key, part1 + bytes([i]) * 777

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        done = list(ex.map(one, range(12)))
    for key, body in done:
        if body is None:
            with pytest.raises(ClientError):
                c.head_object(Bucket="mpu-aa", Key=key)
        else:
            assert c.get_object(Bucket="mpu-aa", Key=key)["Body"].read() == body, key
    assert c.list_multipart_uploads(Bucket="mpu-aa").get("Uploads", []) == []

    # a zero-byte part
    up = c.create_multipart_upload(Bucket="mpu-aa", Key="empty-part")["UploadId"]
    e0 = c.upload_part(Bucket="mpu-aa", Key="empty-part", UploadId=up, PartNumber=1, Body=b"")
    c.complete_multipart_upload(Bucket="mpu-aa", Key="empty-part", UploadId=up,
                                MultipartUpload={"Parts": [{"PartNumber": 1,
                                                            "ETag": e0["ETag"]}]})
    assert c.get_object(Bucket="mpu-aa", Key="empty-part")["Body"].read() == b""

    # abort the stale upload, then its bucket can go
    c.abort_multipart_upload(Bucket="mpu-zz", Key="left-open", UploadId=stale)
    c.delete_bucket(Bucket="mpu-zz")
