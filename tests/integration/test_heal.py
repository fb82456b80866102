"""Whole-store heal on the real daemon: objects put with boto3, one drive's contents wiped,
`openlake heal` rebuilds the exact shard files and records on it (progress on stderr, summary
on stdout); then a second drive is wiped and every GET is still exact, which needs the data the
heal wrote. Also: POST/GET/DELETE of the admin endpoint (409 while one runs, cancel), the heal
block of the status JSON, and exit 1 when more than P shards of an object are gone."""

import hashlib
import http.client
import json
import os
import random
import shutil
import subprocess
import time

from conftest import OPENLAKE_CLI, admin_request, boto3_client

MiB = 1 << 20


def shard_files(drive):
    """{relative path: sha256} of the shard files of one drive."""
    out = {}
    base = os.path.join(drive, ".openlake", "data")
    for root, _, names in os.walk(base):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, base)] = hashlib.sha256(f.read()).hexdigest()
    return out


def wipe(drive):
    for n in os.listdir(drive):
        p = os.path.join(drive, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def heal_cli(d, *args, timeout=60):
    return subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, *args],
                          capture_output=True, text=True, timeout=timeout)


def admin(d, method, path="/openlake/admin/v1/heal"):
    status, _, body = admin_request(d, method, path)  # signed by the admin key
    return status, json.loads(body) if body else None


def fill(d):
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket="heal-b")
    rnd = random.Random(7)
    objs = {}
    for key, size in (("big/a", 3 * MiB + 5), ("big/b", 5 * MiB + 1), ("mid", 200 * 1024),
                      ("small/1", 1000), ("small/2", 1)):
        objs[key] = rnd.randbytes(size)
        c.put_object(Bucket="heal-b", Key=key, Body=objs[key])
    up = c.create_multipart_upload(Bucket="heal-b", Key="mp")
    part = rnd.randbytes(5 * MiB)
    c.upload_part(Bucket="heal-b", Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=part)
    return c, objs, up["UploadId"], part


def check_all(c, objs):
    for key, body in objs.items():
        got = c.get_object(Bucket="heal-b", Key=key)["Body"].read()
        assert got == body, key


def test_heal_rebuilds_a_wiped_drive(openlaked):
    d = openlaked()
    c, objs, upload_id, part = fill(d)
    before = shard_files(d.data_dirs[1])
    assert len(before) == 4  # big/a, big/b, mid, the part

    d.stop()
    wipe(d.data_dirs[1])
    d.start()
    r = heal_cli(d)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "objects 6/6" in r.stderr, r.stderr
    assert "MB scanned" in r.stderr and "ETA" in r.stderr
    assert r.stdout.startswith("heal done: 6 of 6 objects"), r.stdout
    assert "4 shards healed" in r.stdout and "0 unrecoverable" in r.stdout, r.stdout
    assert shard_files(d.data_dirs[1]) == before, "the wiped drive's shard files are exact"

    r = heal_cli(d, "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["state"] == "done" and j["shards_healed"] == 0 and j["records_restored"] == 0
    assert j["objects_scanned"] == 6 and j["bytes_scanned"] == j["bytes_total"]
    r = heal_cli(d, "--status")
    assert r.returncode == 0 and "done: objects 6/6" in r.stderr, r.stderr

    status, st = admin(d, "GET", "/openlake/admin/v1/status")
    assert status == 200 and st["heal"]["state"] == "done"

    # shards that cannot be written on an online drive (their directory replaced by a file):
    # the heal does not claim success; with the directory back it heals and exits 0
    top = os.path.join(d.data_dirs[1], ".openlake", "data", sorted(before)[0].split("/")[0])
    lost = [n for n in before if n.startswith(os.path.basename(top) + "/")]
    os.rename(top, top + ".away")
    open(top, "wb").close()
    r = heal_cli(d)
    assert r.returncode == 1, r.stderr + r.stdout
    assert r.stdout.startswith("heal failed:") and "could not be written" in r.stdout, r.stdout
    os.unlink(top)
    shutil.rmtree(top + ".away")
    r = heal_cli(d, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["shards_healed"] == len(lost), r.stdout
    assert shard_files(d.data_dirs[1]) == before

    # a second drive gone: with P = 1 this reads only because drive 1 was really rebuilt
    d.stop()
    wipe(d.data_dirs[2])
    d.start()
    check_all(c, objs)
    parts = c.list_parts(Bucket="heal-b", Key="mp", UploadId=upload_id)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1]
    done = c.complete_multipart_upload(
        Bucket="heal-b", Key="mp", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": parts[0]["ETag"]}]})
    assert done["ETag"]
    assert c.get_object(Bucket="heal-b", Key="mp")["Body"].read() == part


def test_heal_endpoint_busy_cancel_and_unrecoverable(openlaked):
    d = openlaked()
    c, objs, _, _ = fill(d)
    status, j = admin(d, "GET")
    assert status == 200 and j["state"] == "idle"
    r = heal_cli(d, "--no-wait", "--rate", "200000")  # ~75 s for this data: still running
    assert r.returncode == 0, r.stderr
    status, j = admin(d, "POST")
    assert status == 409 and j["state"] == "running"
    status, j = admin(d, "DELETE")
    assert status == 202
    # a new heal may start only once the cancelled one has stopped: the CLI waits for that one
    # (its result is not this call's) and runs its own
    r = heal_cli(d)
    assert r.returncode == 0, r.stderr + r.stdout
    assert r.stdout.startswith("heal done: 6 of 6 objects"), r.stdout
    if "already running" in r.stderr:
        assert "then starting a new one" in r.stderr, r.stderr
    for _ in range(50):
        status, j = admin(d, "GET")
        if j["state"] != "running":
            break
        time.sleep(0.1)
    assert j["state"] in ("done", "cancelled")
    assert admin(d, "PUT")[0] == 405
    con = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=10)
    con.request("GET", "/openlake/console")
    page = con.getresponse().read().decode()
    con.close()
    assert "<h2>Heal</h2>" in page and "/openlake/admin/v1/heal" in page

    # more than P shards of big/b gone: unrecoverable, exit 1, nothing else hurt
    paths = [os.path.join(dd, ".openlake", "data") for dd in d.data_dirs]
    sizes = {rel: os.path.getsize(os.path.join(paths[0], rel))
             for rel in shard_files(d.data_dirs[0])}
    big_b = max(sizes, key=sizes.get)  # big/b's or the part's (same size): either is lost
    for i in (0, 1):
        os.unlink(os.path.join(paths[i], big_b))
    r = heal_cli(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 unrecoverable" in r.stdout, r.stdout
    for key in ("big/a", "mid", "small/1", "small/2"):
        assert c.get_object(Bucket="heal-b", Key=key)["Body"].read() == objs[key]


def test_stop_during_heal(openlaked):
    d = openlaked()
    fill(d)
    r = heal_cli(d, "--no-wait", "--rate", "100000")
    assert r.returncode == 0, r.stderr
    assert admin(d, "GET")[1]["state"] == "running"
    assert d.stop() == 0, d.log()
    assert "stopping the running heal" in d.log()


def test_unreadable_with_a_drive_offline_is_not_unrecoverable(openlaked):
    """An object with one shard lost and another drive offline cannot be rebuilt now, but is
    not lost: the offline drive holds a shard of it. The heal counts it apart
    (`unreadable_offline`, exit 1, a message to heal again once the drive is back), never as
    unrecoverable (the cluster torture counted such objects "unrecoverable" while a node was
    down); with the drive back the heal rebuilds it and exits 0."""
    from test_drive_faults import online
    d = openlaked()
    c, objs, _, _ = fill(d)
    paths = [os.path.join(dd, ".openlake", "data") for dd in d.data_dirs]
    sizes = {rel: os.path.getsize(os.path.join(paths[0], rel))
             for rel in shard_files(d.data_dirs[0])}
    lost = max(sizes, key=sizes.get)  # big/b's shard on drive 0, or the part's (same size)
    os.unlink(os.path.join(paths[0], lost))
    drive1 = d.data_dirs[1]
    os.rename(drive1, drive1 + ".away")  # a missing drive is not recreated on its own
    try:
        deadline = time.monotonic() + 60
        while online(d, 1) != 0:
            assert time.monotonic() < deadline, "drive 1 offline within 60 s"
            time.sleep(0.1)
        r = heal_cli(d)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "0 unrecoverable, 1 unreadable with drives offline" in r.stdout, r.stdout
        assert "run the heal again once it is back" in r.stdout, r.stdout
        status, j = admin(d, "GET")
        assert j["unrecoverable"] == 0 and j["unreadable_offline"] == 1, j
        assert j["result"] == -5, j  # a reader of the document does not take it for success
    finally:
        os.rename(drive1 + ".away", drive1)
    deadline = time.monotonic() + 60
    while online(d, 1) != 1:
        assert time.monotonic() < deadline, "drive 1 back online within 60 s"
        time.sleep(0.1)
    r = heal_cli(d, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["unrecoverable"] == 0 and j["unreadable_offline"] == 0, j
    assert os.path.exists(os.path.join(paths[0], lost)), "the lost shard rebuilt"
    check_all(c, objs)
