"""A drive is a failure domain: fault injection on one drive of four (N=4, P=1: k=3 of 4 still
serve everything) on the real daemon, driven with boto3 and the `openlake heal` CLI.

Each case: a few dozen objects of mixed sizes (inline <= 128 KiB and shard-file ones > 128 KiB),
one drive damaged (meta.mdb truncated / pages overwritten while stopped or while running, a
read-only mount, a full tmpfs, the drive's directory removed, shards corrupted), then: every
object still reads back exactly, PUTs still succeed, and after the drive is restored `openlake
heal` exits 0, a second heal finds nothing to do, and the drive really holds its records and
shards again (proved by removing a *different* drive afterwards: with P=1 everything must still
read, which needs the healed drive). Mounts need root (the tests skip, saying why, without)."""

import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import OPENLAKE_CLI, admin_request, boto3_client

KiB = 1 << 10
MiB = 1 << 20
BUCKET = "faults"
SIZES = [3, 1000, 4 * KiB, 60 * KiB, 128 * KiB, 128 * KiB + 1, 200 * KiB, 700 * KiB,
         1 * MiB + 7, 3 * MiB + 5]


def wait_until(cond, what, timeout=45.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def fill(c, n=24, seed=1, prefix="o"):
    rnd = random.Random(seed)
    objs = {}
    for i in range(n):
        key = "%s/%02d" % (prefix, i)
        objs[key] = rnd.randbytes(SIZES[i % len(SIZES)])
        c.put_object(Bucket=BUCKET, Key=key, Body=objs[key])
    return objs


def populate(d, n=24):
    c = boto3_client(d.s3_url)
    c.create_bucket(Bucket=BUCKET)
    return c, fill(c, n)


def check_all(c, objs):
    for key, body in objs.items():
        got = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert hashlib.sha256(got).digest() == hashlib.sha256(body).digest(), key


def put_more(c, objs, seed):
    """PUTs still succeed (write quorum: 3 of 4) and read back."""
    more = fill(c, n=8, seed=seed, prefix="more%d" % seed)
    check_all(c, more)
    objs.update(more)


def heal(d):
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    j = json.loads(r.stdout)
    assert j["state"] == "done" and j["shards_healed"] == 0 and j["records_restored"] == 0, j
    assert j["unrecoverable"] == 0, j


def overwrite_and_delete(c, objs, seed, n_over, n_del):
    """Overwrite n_over shard-file objects with new bytes and delete the next n_del (the old
    versions' shards become orphans on a drive that missed it), then read all back."""
    rnd = random.Random(seed)
    big = [k for k, v in objs.items() if len(v) > 128 * KiB and k.startswith("o/")]
    for k in big[:n_over]:
        objs[k] = rnd.randbytes(len(objs[k]) + 3)
        c.put_object(Bucket=BUCKET, Key=k, Body=objs[k])
    for k in big[n_over:n_over + n_del]:
        c.delete_object(Bucket=BUCKET, Key=k)
        del objs[k]
    check_all(c, objs)


def shard_names(drive):
    out = set()
    for root, _, names in os.walk(os.path.join(drive, ".openlake", "data")):
        out.update(names)
    return out


def metric(d, name, drive):
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    want = '%s{drive="%s"} ' % (name, drive)
    for line in text.splitlines():
        if line.startswith(want):
            return int(line.split()[-1])
    raise AssertionError("no %s for %s in /metrics" % (name, drive))


def online(d, i):
    return metric(d, "openlake_drive_online", d.data_dirs[i])


def wipe_dir(path):
    for n in os.listdir(path):
        p = os.path.join(path, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def explain_mismatch(d, healed, extra, missing):
    """What a failed shard-set comparison needs to be understood afterwards: the extra files'
    mtimes (against now: the sweep leaves files younger than 2 s) and what the daemon said
    about drives, heals and sweeps."""
    now = time.time()
    lines = ["healed drive %s: %d extra, %d missing shard file(s); now %.3f" %
             (d.data_dirs[healed], len(extra), len(missing), now)]
    for name in sorted(extra):
        p = os.path.join(d.data_dirs[healed], ".openlake", "data", name[:2], name)
        try:
            st = os.stat(p)
            lines.append("  extra %s mtime %.3f (%.1f s ago) size %d" %
                         (name, st.st_mtime, now - st.st_mtime, st.st_size))
        except OSError as e:
            lines.append("  extra %s: %s" % (name, e))
    for name in sorted(missing):
        lines.append("  missing %s" % name)
    lines.append("daemon log (drives, heals, sweeps):")
    lines += [ln for ln in d.log().splitlines()
              if any(w in ln for w in ("heal", "sweep", "orphan", "offline", "online",
                                       "metadata"))]
    return "\n".join(lines)


def prove_restored(d, c, objs, healed, other):
    """The healed drive holds what it should: its shard files are the same set as a peer's,
    and with another drive wiped (P=1) every object still reads exactly."""
    mine, peer = shard_names(d.data_dirs[healed]), shard_names(d.data_dirs[other])
    assert mine == peer, explain_mismatch(d, healed, mine - peer, peer - mine)
    d.stop()
    wipe_dir(d.data_dirs[other])
    d.start()
    check_all(c, objs)


def meta_path(d, i):
    return os.path.join(d.data_dirs[i], ".openlake", "meta.mdb")


def overwrite_pages(path, seed, first=2):
    rnd = random.Random(seed)
    size = os.path.getsize(path)
    pages = size // 4096
    assert pages > first + 2, "meta.mdb too small (%d bytes)" % size
    with open(path, "r+b") as f:
        for pg in range(first, pages):
            f.seek(pg * 4096)
            f.write(rnd.randbytes(4096))
        f.flush()
        os.fsync(f.fileno())


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True)


def mount_or_skip(*args):
    r = run("mount", *args)
    if r.returncode != 0:
        pytest.skip("cannot mount (%s): these cases need root and mount(8): %s" %
                    (" ".join(args), r.stderr.strip()))


def umount(path):
    run("umount", "-l", path)


# ---- damaged meta.mdb ----

@pytest.mark.parametrize("damage", ["truncated", "pages_overwritten"])
def test_meta_damaged_while_stopped(openlaked, damage):
    d = openlaked()
    c, objs = populate(d)
    d.stop()
    p = meta_path(d, 1)
    if damage == "truncated":
        os.truncate(p, (os.path.getsize(p) // 4096 // 2) * 4096)
    else:
        overwrite_pages(p, seed=5)
    d.start()
    assert "moved aside" in d.log(), d.log()[-3000:]
    assert any(n.startswith("meta.mdb.damaged-")
               for n in os.listdir(os.path.dirname(p))), "the damaged file is kept"
    check_all(c, objs)
    put_more(c, objs, 2)
    heal(d)
    check_all(c, objs)
    prove_restored(d, c, objs, healed=1, other=2)


def test_meta_damaged_while_running(openlaked):
    d = openlaked()
    c, objs = populate(d)
    before = metric(d, "openlake_drive_faults_total", d.data_dirs[1])
    overwrite_pages(meta_path(d, 1), seed=9)
    check_all(c, objs)  # every GET reads drive 1's record: the damage is found here
    assert d.proc.poll() is None, d.log()[-3000:]
    wait_until(lambda: metric(d, "openlake_drive_faults_total", d.data_dirs[1]) > before,
               "drive 1 taken offline")
    assert "is offline" in d.log()
    put_more(c, objs, 3)
    # the monitor moves the damaged file aside and brings the drive back with a fresh one
    wait_until(lambda: online(d, 1) == 1, "drive 1 back online")
    heal(d)
    check_all(c, objs)
    prove_restored(d, c, objs, healed=1, other=3)
    # and the node restarts cleanly (no SIGBUS/abort on the kept file)
    d.restart()
    check_all(c, objs)


# ---- a drive removed while running ----

def vanish(path):
    """the drive at path gone at once, as an unmounted disk: renamed away in one step (an
    rmtree under the running daemon races its writes into .openlake: 'Directory not
    empty'), then removed, what the daemon still writes through open descriptors aside"""
    gone = path + ".vanished"
    os.rename(path, gone)
    shutil.rmtree(gone, ignore_errors=True)


def test_vanished_drive(openlaked):
    d = openlaked()
    c, objs = populate(d)
    vanish(d.data_dirs[1])
    wait_until(lambda: online(d, 1) == 0, "drive 1 offline after rm -rf")
    assert "is offline" in d.log()
    check_all(c, objs)
    put_more(c, objs, 4)
    assert not os.path.exists(d.data_dirs[1]), "a missing drive is not recreated on its own"
    os.mkdir(d.data_dirs[1])
    wait_until(lambda: online(d, 1) == 1, "drive 1 back online")
    heal(d)
    check_all(c, objs)
    prove_restored(d, c, objs, healed=1, other=0)


# ---- drive identity records (.openlake/format) ----

def test_swapped_data_dirs_are_taken_by_their_records(openlaked):
    """Two data_dirs lines swapped (a config edited, disks mounted in another order): each
    dir is used at the position its identity record names (before records, shards were
    read at the wrong positions: GETs answered wrong bytes; then the daemon refused to
    start), with a warning naming the dir, its position and the entry to list it at; no
    record is written again, nothing is healed, and everything reads back, also with the
    other dirs of the set down to k (so the swapped ones serve their own shards)."""
    d = openlaked()
    c, objs = populate(d, n=10)
    d.stop()
    cfg = d.config.read_text()
    a, b = d.data_dirs[1], d.data_dirs[2]
    swapped = cfg.replace('"%s", "%s"' % (a, b), '"%s", "%s"' % (b, a))
    assert swapped != cfg
    d.config.write_text(swapped)
    recs = [open(os.path.join(x, ".openlake", "format")).read() for x in (a, b)]
    d.start()
    log = d.log()
    assert "data dir %s is drive 2 of erasure set 0" % b in log, log[-3000:]
    assert "data dir %s is drive 1 of erasure set 0" % a in log, log[-3000:]
    assert "list it as entry 2" in log and "list it as entry 3" in log, log[-3000:]
    check_all(c, objs)
    put_more(c, objs, 4)
    assert [open(os.path.join(x, ".openlake", "format")).read() for x in (a, b)] == recs
    # k = 3 of 4: with drive 0 gone, drives 1 and 2 (the swapped lines) must serve their own
    vanish(d.data_dirs[0])
    wait_until(lambda: online(d, 0) == 0, "drive 0 offline after rm -rf")
    check_all(c, objs)
    # the lines back in their first order, drive 0 (emptied) back: healed, all whole
    d.stop()
    os.mkdir(d.data_dirs[0])
    d.config.write_text(cfg)
    d.start()
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["unrecoverable"] == 0, r.stdout + r.stderr
    check_all(c, objs)


def test_drive_swapped_while_running(openlaked):
    """Another drive's contents put under drive 3's path while the daemon runs (a disk
    swapped): drive 3 goes offline, never written to, the store keeps serving reads and
    writes; with the right disk back it returns and is healed."""
    d = openlaked()
    c, objs = populate(d, n=10)
    d3 = d.data_dirs[3]
    shutil.copytree(d.data_dirs[0], d3 + ".other", symlinks=True)
    os.rename(d3, d3 + ".orig")
    os.rename(d3 + ".other", d3)
    wait_until(lambda: online(d, 3) == 0, "drive 3 offline after the swap")
    wait_until(lambda: "another drive of this store is there" in d.log(),
               "the monitor naming the wrong drive")
    check_all(c, objs)
    put_more(c, objs, 11)
    assert online(d, 3) == 0, "the wrong disk stays offline"
    assert not shard_names(d3) - shard_names(d.data_dirs[0]), "nothing written to it"
    os.rename(d3, d3 + ".wrong")
    os.rename(d3 + ".orig", d3)
    wait_until(lambda: online(d, 3) == 1, "drive 3 back online with its own disk")
    heal(d)
    check_all(c, objs)
    shutil.rmtree(d3 + ".wrong")


# ---- writes missed by an absent drive, across a crash ----

def heal_status(d):
    status, _, body = admin_request(d, "GET", "/openlake/admin/v1/heal")
    assert status == 200, body
    return json.loads(body)


def test_missed_writes_healed_first_after_crash(openlaked):
    """Writes while drive 1 is away are recorded on the drives that took them (the metric
    counts them); kill -9, drive 1 back, restart: the start heals exactly those (heal status:
    missed_only, pending down to 0, no scan ran) and drive 1 holds every record and shard."""
    d = openlaked()
    c, objs = populate(d, n=10)
    away = d.data_dirs[1] + ".away"
    os.rename(d.data_dirs[1], away)
    wait_until(lambda: online(d, 1) == 0, "drive 1 offline once its directory is gone")
    overwrite_and_delete(c, objs, seed=11, n_over=2, n_del=1)
    put_more(c, objs, 12)
    up = c.create_multipart_upload(Bucket=BUCKET, Key="mp")["UploadId"]
    body = random.Random(13).randbytes(300 * KiB)
    etag = c.upload_part(Bucket=BUCKET, Key="mp", UploadId=up, PartNumber=1, Body=body)["ETag"]
    c.complete_multipart_upload(Bucket=BUCKET, Key="mp", UploadId=up,
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    objs["mp"] = body
    # 2 overwritten + 1 deleted + 8 new + mp + its upload + its part
    assert heal_gauge(d, "openlake_heal_missed_pending") == 14
    d.kill9()
    os.rename(away, d.data_dirs[1])
    d.start()
    j = wait_until(lambda: (lambda j: j["state"] == "done" and j)(heal_status(d)),
                   "the start's heal of the missed writes to finish")
    assert j["missed_only"] is True and j["missed_healed"] == 14, j
    assert j["missed_pending"] == 0 and j["objects_total"] == 0, j  # no whole-store scan
    assert heal_gauge(d, "openlake_heal_missed_pending") == 0
    assert "missed writes pending: healing them" in d.log()
    check_all(c, objs)
    heal(d)  # a whole heal after it: the second finds nothing to restore
    prove_restored(d, c, objs, healed=1, other=0)


def test_whole_heal_replaces_the_start_missed_heal(openlaked):
    """The start's missed-writes heal, slowed by heal_bytes_per_sec, gives way to an
    `openlake heal`, which heals the same missed writes first and then scans."""
    d = openlaked(extra="[storage]\nheal_bytes_per_sec = 65536\n")
    c, objs = populate(d, n=2)
    os.rename(d.data_dirs[1], d.data_dirs[1] + ".away")
    wait_until(lambda: online(d, 1) == 0, "drive 1 offline once its directory is gone")
    objs.update(fill(c, n=10, seed=21, prefix="slow"))  # ~5 MiB of shards: 80 s at 64 KiB/s
    d.kill9()
    os.rename(d.data_dirs[1] + ".away", d.data_dirs[1])
    d.start()
    wait_until(lambda: heal_status(d)["missed_only"], "the start's heal of missed writes")
    r = subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    j = json.loads(r.stdout)
    assert j["missed_only"] is False and j["missed_pending"] == 0, j
    assert j["objects_total"] == 12, j  # the scan ran too
    assert "gives way to a whole heal" in d.log()
    check_all(c, objs)


# ---- read-only drive ----

def test_read_only_drive(openlaked):
    """A read-only drive at start: the node starts degraded and serves; objects overwritten and
    deleted meanwhile leave their old shards on it (it took no writes); once it is writable
    again the monitor brings it back and heal restores it and removes those orphans. (A
    read-only remount while the daemon runs is refused by the kernel: its files are open
    for writing.)"""
    d = openlaked()
    c, objs = populate(d)
    d.stop()
    drive = d.data_dirs[2]
    mount_or_skip("--bind", drive, drive)
    try:
        r = run("mount", "-o", "remount,ro,bind", drive)
        assert r.returncode == 0, r.stderr
        d.start()
        assert "DEGRADED" in d.log(), d.log()[-3000:]
        assert online(d, 2) == 0
        check_all(c, objs)
        put_more(c, objs, 5)
        overwrite_and_delete(c, objs, seed=11, n_over=4, n_del=2)
        stale = shard_names(drive) - shard_names(d.data_dirs[0])
        assert stale, "old shards stayed on the read-only drive"
        r = run("mount", "-o", "remount,rw,bind", drive)
        assert r.returncode == 0, r.stderr
        wait_until(lambda: online(d, 2) == 1, "drive 2 back online")
        heal(d)
        assert not (shard_names(drive) & stale), "heal removed the orphan shards"
        check_all(c, objs)
    finally:
        d.stop()
        umount(drive)
    d.start()
    prove_restored(d, c, objs, healed=2, other=1)


def heal_gauge(d, name):
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[-1])
    raise AssertionError("no %s in /metrics" % name)


def test_fs_fails_read_only_while_running(openlaked, tmp_path):
    """One drive's file system fails while the daemon runs: ext4 mounted with
    errors=remount-ro, an error raised through /sys/fs/ext4/<dev>/trigger_fs_error, so the
    kernel turns it read-only under the daemon's open files. The drive goes offline, the node
    keeps serving and taking writes (overwrites and deletes too). The operator unmounts,
    repairs (e2fsck) and mounts it again: the monitor brings the drive back and a heal starts
    by itself ([storage] heal_on_return, delay 1 s here): nobody runs `openlake heal`, and
    a heal run afterwards finds nothing left to do."""
    d = openlaked(extra="[storage]\nheal_delay_secs = 1\n")
    d.stop()
    drive = d.data_dirs[1]
    wipe_dir(drive)
    img = str(tmp_path / "drive1.img")
    with open(img, "wb") as f:
        f.truncate(160 * MiB)
    r = run("mkfs.ext4", "-q", "-F", img)
    if r.returncode != 0:
        pytest.skip("mkfs.ext4 failed: %s" % r.stderr.strip())
    mount_or_skip("-o", "loop,errors=remount-ro", img, drive)
    try:
        dev = run("findmnt", "-n", "-o", "SOURCE", drive).stdout.strip()
        trigger = "/sys/fs/ext4/%s/trigger_fs_error" % os.path.basename(dev)
        if not os.path.exists(trigger):
            pytest.skip("this kernel has no %s to fail a file system on demand" % trigger)
        d.start()
        c, objs = populate(d)
        with open(trigger, "w") as f:
            f.write("openlake test: fail this drive\n")
        wait_until(lambda: online(d, 1) == 0, "drive 1 offline once its fs is read-only")
        assert "probe write failed" in d.log(), d.log()[-3000:]
        check_all(c, objs)
        put_more(c, objs, 7)
        overwrite_and_delete(c, objs, seed=13, n_over=3, n_del=2)
        # the operator's repair: the daemon still holds files of the failed mount, so a lazy
        # unmount; that mount is read-only for good, so checking the image now is safe
        assert run("umount", "-l", drive).returncode == 0
        r = run("e2fsck", "-f", "-y", img)
        assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: errors fixed
        # a new loop device: `mount -o loop` would reuse the old one, still attached to the
        # failed mount, and so get that read-only file system back
        r = run("losetup", "--find", "--show", img)
        assert r.returncode == 0, r.stderr
        loop = r.stdout.strip()
        r = run("mount", "-o", "errors=remount-ro", loop, drive)
        run("losetup", "-d", loop)  # detached once unmounted
        assert r.returncode == 0, r.stderr
        wait_until(lambda: online(d, 1) == 1, "drive 1 back online after the repair")
        wait_until(lambda: heal_gauge(d, "openlake_heal_on_return_total") >= 1 and
                   heal_gauge(d, "openlake_heal_running") == 0,
                   "the heal started by the drive's return to finish", timeout=120)
        assert "a drive's return" in d.log(), d.log()[-3000:]
        r = subprocess.run([str(OPENLAKE_CLI), "heal", "--endpoint", d.s3_url, "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        j = json.loads(r.stdout)
        assert j["shards_healed"] == 0 and j["records_restored"] == 0, j
        assert j["unrecoverable"] == 0, j
        check_all(c, objs)
        prove_restored(d, c, objs, healed=1, other=3)
    finally:
        d.stop()
        umount(drive)


def test_unmounted_drive_stays_offline(openlaked):
    """A drive's file system unmounted while the daemon runs (an operator's repair, between
    `umount` and `mount`): the directory left is the mount point on the file system beneath,
    not the drive. The monitor keeps the drive offline, saying why, and writes nothing there
    (before, it brought the drive back on that directory with an empty index, the heal its
    return started ran on the wrong file system, and once the real one was mounted over it
    the drive went offline again and that heal's orphan sweep was skipped). Mounted again, it
    comes back, a heal restores it and the drive holds exactly its peers' shards."""
    d = openlaked(extra="[storage]\nheal_delay_secs = 1\n")
    d.stop()
    drive = d.data_dirs[1]
    wipe_dir(drive)
    mount_or_skip("-t", "tmpfs", "-o", "size=64m", "tmpfs", drive)
    try:
        d.start()
        c, objs = populate(d)
        assert run("umount", "-l", drive).returncode == 0
        wait_until(lambda: online(d, 1) == 0, "drive 1 offline once its file system is gone")
        wait_until(lambda: "its file system is not mounted" in d.log(),
                   "the monitor to say why drive 1 stays offline")
        put_more(c, objs, 5)
        overwrite_and_delete(c, objs, seed=17, n_over=2, n_del=2)
        assert online(d, 1) == 0
        assert os.listdir(drive) == [], "the monitor wrote under the unmounted drive: %s" % (
            os.listdir(drive),)
        # a new, empty disk mounted in its place: back online, healed by its return
        mount_or_skip("-t", "tmpfs", "-o", "size=64m", "tmpfs", drive)
        wait_until(lambda: online(d, 1) == 1, "drive 1 back online once mounted")
        wait_until(lambda: heal_gauge(d, "openlake_heal_on_return_total") >= 1 and
                   heal_gauge(d, "openlake_heal_running") == 0,
                   "the heal started by the drive's return to finish", timeout=120)
        heal(d)
        check_all(c, objs)
        prove_restored(d, c, objs, healed=1, other=3)
    finally:
        d.stop()
        umount(drive)


# ---- full drive ----

def test_full_drive(openlaked):
    d = openlaked()
    d.stop()
    drive = d.data_dirs[1]
    wipe_dir(drive)
    mount_or_skip("-t", "tmpfs", "-o", "size=48m", "tmpfs", drive)
    try:
        d.start()
        c, objs = populate(d)
        filler = os.path.join(drive, "filler")
        with open(filler, "wb") as f:
            try:
                for _ in range(64):
                    f.write(b"\0" * MiB)
                    f.flush()
            except OSError:
                pass
        wait_until(lambda: online(d, 1) == 0, "drive 1 offline when full")
        check_all(c, objs)
        put_more(c, objs, 6)
        os.unlink(filler)
        wait_until(lambda: online(d, 1) == 1, "drive 1 back online")
        heal(d)
        check_all(c, objs)
        prove_restored(d, c, objs, healed=1, other=2)
    finally:
        d.stop()
        umount(drive)


# ---- corrupted shards ----

def test_corrupt_shards(openlaked):
    """One drive's shards corrupted: exact bytes, heal rewrites them. Two drives' shards of one
    object corrupted (P=1): a clear 500 InternalError, never wrong bytes, never 503."""
    d = openlaked()
    c, objs = populate(d)
    for name in shard_names(d.data_dirs[2]):
        p = os.path.join(d.data_dirs[2], ".openlake", "data", name[:2], name)
        with open(p, "r+b") as f:
            f.seek(0)
            f.write(os.urandom(64))
    check_all(c, objs)
    heal(d)

    body = random.Random(4).randbytes(2 * MiB)
    before = {i: shard_names(d.data_dirs[i]) for i in range(4)}
    c.put_object(Bucket=BUCKET, Key="doomed", Body=body)
    new = shard_names(d.data_dirs[0]) - before[0]
    assert len(new) == 1
    name = new.pop()
    for i in (0, 1):
        p = os.path.join(d.data_dirs[i], ".openlake", "data", name[:2], name)
        with open(p, "r+b") as f:
            f.seek(100)
            f.write(os.urandom(64))
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket=BUCKET, Key="doomed")["Body"].read()
    err = e.value.response["Error"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500, e.value.response
    assert err["Code"] == "InternalError" and "checksums" in err["Message"], err
    check_all(c, objs)


# ---- permissions ----

def test_files_are_private(openlaked):
    d = openlaked()
    c, objs = populate(d, n=12)
    seen = 0
    for drive in d.data_dirs:
        for root, dirs, names in os.walk(drive):
            for n in dirs:
                mode = stat.S_IMODE(os.stat(os.path.join(root, n)).st_mode)
                assert mode & 0o077 == 0, (os.path.join(root, n), oct(mode))
            for n in names:
                mode = stat.S_IMODE(os.stat(os.path.join(root, n)).st_mode)
                assert mode & 0o077 == 0, (os.path.join(root, n), oct(mode))
                seen += 1
    assert seen > 12
