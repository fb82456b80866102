"""The .deb that scripts/deb.sh builds, installed with dpkg -i into a throwaway root: an overlay
over / (writes go to a temp dir, the host is untouched) in a private mount namespace, chrooted.
The package's postinst runs there (system user, config group, ldconfig); there is no systemd in
it, so the daemon is started as the packaged unit says (its ExecStart, as its User, in its
StateDirectory), and the README's S3 (awscli) and KV (openlake_client over the packaged
libopenlake) quick-starts run against it. Then dpkg -r removes it.

The .deb: $OPENLAKE_DEB when set; else, with OPENLAKE_LONG=1 (`scripts/test.sh --long`),
`scripts/deb.sh` builds it (a release build in build-deb/: about five minutes on a 2-core
machine, which is why the default suite leaves it out). Needs root and overlayfs (skips, saying
so, without them)."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import REPO, aws_env, free_port, wait_for, wait_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installing a .deb (dpkg -i into an "
                                "overlay root in a mount namespace) needs root")

MOUNT = """set -e
T={t}
mount --make-rprivate /
mount -t overlay overlay -o lowerdir=/,upperdir=$T/upper,workdir=$T/work $T/root
mount -t proc proc $T/root/proc
mount --rbind /dev $T/root/dev
mount -t tmpfs tmpfs $T/root/run
"""


def sh(t, script, timeout=300):
    """script in a private mount namespace with the overlay root mounted at t/root."""
    return subprocess.run(["unshare", "-m", "bash", "-c", MOUNT.format(t=t) + script],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def deb():
    env = os.environ.get("OPENLAKE_DEB")
    if env:
        yield pathlib.Path(env)
        return
    if os.environ.get("OPENLAKE_LONG") != "1":
        pytest.skip("building the .deb takes minutes: run `scripts/test.sh --long`, or set "
                    "OPENLAKE_DEB to a .deb built by scripts/deb.sh")
    if not shutil.which("dpkg-deb") or not shutil.which("dpkg-shlibdeps"):
        pytest.skip("dpkg-dev is not installed: scripts/deb.sh needs dpkg-deb and dpkg-shlibdeps")
    out = pathlib.Path(tempfile.mkdtemp(prefix="openlake-deb-"))
    r = subprocess.run([str(REPO / "scripts" / "deb.sh"), str(out)], capture_output=True,
                       text=True, timeout=3000, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = list(out.glob("openlake_*.deb"))
    assert len(debs) == 1, debs
    yield debs[0]
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def troot(tmp_path):
    t = tmp_path / "ovl"
    for d in ("upper", "work", "root"):
        (t / d).mkdir(parents=True)
    r = sh(t, "true")
    if r.returncode != 0:
        pytest.skip("cannot mount an overlay over / here: " + r.stderr.strip()[-300:])
    return t


def test_deb_installs_and_serves(deb, troot, tmp_path):
    t = troot
    host_before = [os.path.exists(p) for p in ("/usr/bin/openlaked", "/etc/openlake")]
    shutil.copy(deb, t / "upper" / "openlake.deb")
    # install: dpkg -i in the chroot (postinst: user, config group, ldconfig)
    r = sh(t, r"""chroot $T/root dpkg -i /openlake.deb
chroot $T/root dpkg-query -W -f='${Status} ${Version}\n' openlake
chroot $T/root getent passwd openlake
chroot $T/root stat -c '%U:%G %a' /etc/openlake/openlake.toml
chroot $T/root ldconfig -p | sed -n 's/^.*libopenlake\.so\.0 .*=> //p'
chroot $T/root sh -c 'command -v openlaked; command -v openlake'
chroot $T/root grep -E '^(ExecStart|User|StateDirectory|RuntimeDirectory)=' /lib/systemd/system/openlaked.service
""")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "install ok installed" in out, out
    pw = re.search(r"^openlake:x:(\d+):(\d+):.*:/var/lib/openlake:/usr/sbin/nologin$", out, re.M)
    assert pw, out
    uid, gid = pw.group(1), pw.group(2)
    assert "root:openlake 640" in out, out
    assert "/usr/bin/openlaked" in out and "/usr/bin/openlake\n" in out, out
    unit = dict(re.findall(r"^(\w+)=(.*)$", out, re.M))
    assert unit["User"] == "openlake" and unit["ExecStart"].startswith("/usr/bin/openlaked")
    # the host is untouched: the files are in the overlay's upper dir only
    assert [os.path.exists(p) for p in ("/usr/bin/openlaked", "/etc/openlake")] == host_before
    assert (t / "upper" / "usr" / "bin" / "openlaked").exists()
    lib = re.search(r"^(/\S+/libopenlake\.so\.0)$", out, re.M)
    assert lib, out

    # start it as the unit does (no systemd here): its User, StateDirectory, RuntimeDirectory,
    # ExecStart; ports moved off the defaults, which this host's other daemons may hold
    s3p, kvp, adp = free_port(), free_port(), free_port()
    cmd = (unit["ExecStart"] + f" --s3_addr 127.0.0.1:{s3p} --kv_addr 127.0.0.1:{kvp}"
           f" --console_addr 127.0.0.1:{adp}")
    log = open(tmp_path / "openlaked.log", "wb")
    proc = subprocess.Popen(["unshare", "-m", "bash", "-c", MOUNT.format(t=t) + f"""
chroot $T/root install -d -o openlake -g openlake -m 0755 /var/lib/openlake /run/openlake
exec chroot --userspec={uid}:{gid} $T/root sh -c 'cd /var/lib/openlake && umask 077 && exec {cmd}'
"""], stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_port(s3p, 60, proc) and wait_port(kvp, 60, proc), \
            (tmp_path / "openlaked.log").read_text()
        run_quickstarts(t, proc, s3p, kvp, lib.group(1), tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "openlaked.log").read_text()
    # the data is the openlake user's, under its state directory
    r = sh(t, "chroot $T/root stat -c '%U %a' /var/lib/openlake/d0")
    assert r.returncode == 0 and r.stdout.split()[0] == "openlake", r.stdout + r.stderr

    # remove: the binaries go, the config (a conffile) stays until purge
    r = sh(t, """chroot $T/root dpkg -r openlake
chroot $T/root sh -c 'test ! -e /usr/bin/openlaked && test -e /etc/openlake/openlake.toml'
""")
    assert r.returncode == 0, r.stdout + r.stderr


def run_quickstarts(t, proc, s3p, kvp, lib, tmp_path):
    ep = f"http://127.0.0.1:{s3p}"
    env = aws_env()
    src = tmp_path / "checkpoint.bin"
    src.write_bytes(os.urandom(3 << 20))
    for args in (["s3", "mb", "s3://demo"], ["s3", "cp", str(src), "s3://demo/"]):
        r = subprocess.run(["aws", "--endpoint-url", ep, *args], capture_output=True, text=True,
                           env=env, timeout=120)
        assert r.returncode == 0, r.stderr
    r = subprocess.run(["aws", "--endpoint-url", ep, "s3", "cp", "s3://demo/checkpoint.bin",
                        str(tmp_path / "back.bin")], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    # the KV quick-start with the packaged libopenlake, in the installed root (the daemon's
    # mount namespace), as the README shows it
    py = """
import json, os, openlake_client as ol
c = ol.connect(["127.0.0.1:%d"], namespace="llama3-8b/bf16/tp0")
key = os.urandom(32)
c.put([key], [b"kv-block" * 4096])
print(json.dumps({"got": c.get([key])[0] == b"kv-block" * 4096,
                  "exists": c.exists([key])}))
""" % kvp
    r = subprocess.run(["nsenter", "-t", str(proc.pid), "-m", "chroot", str(t / "root"),
                        "env", "PYTHONPATH=" + str(REPO / "python"), "OPENLAKE_LIBRARY=" + lib,
                        "/usr/bin/python3", "-c",
                        py], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["got"] and doc["exists"] in (True, [True]), doc
