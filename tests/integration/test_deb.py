"""The Debian packages of debian/ (issue 15), built with dpkg-buildpackage and installed for
real on this machine with apt-get: openlake, libopenlake0, libopenlake-dev and
python3-openlake-client. The service is started with systemctl where systemd is PID 1, else
as the packaged unit says (its ExecStart, as its User, in its StateDirectory and
RuntimeDirectory, with its UMask); the README's S3 (awscli, the packaged config's
credentials) and KV (the packaged openlake_client over the system libopenlake0, no
OPENLAKE_LIBRARY; the connector's ExANS codec twin found in libopenlake0's private directory)
quick-starts run against it, and a C program builds against libopenlake-dev
with pkg-config. Then remove keeps the config, purge drops it and keeps the drives' data and the
openlake user; the test then deletes what it created (data, user) itself.

The packages: $OPENLAKE_DEB_DIR (a folder of .debs from scripts/deb.sh) when set; else, with
OPENLAKE_LONG=1 (`scripts/test.sh --long`), `scripts/deb.sh` builds them in a copy of the
tree (DEB_BUILD_OPTIONS=nocheck: the unit tests run in the suite already; a few minutes on a
2-core machine, which is why the default suite leaves it out), after `scripts/deps.sh deb`.
Needs root; skips, saying so, where an openlake package or an openlake user is already there
(this test would replace and purge a real installation)."""

import os
import pathlib
import pwd
import re
import shutil
import signal
import subprocess
import time
import tomllib

import pytest

from conftest import REPO, aws_env, free_port, wait_port

PACKAGES = ("openlake", "libopenlake0", "libopenlake-dev", "python3-openlake-client")
CONFIG = pathlib.Path("/etc/openlake/openlake.toml")
STATE = pathlib.Path("/var/lib/openlake")
UNIT = pathlib.Path("/lib/systemd/system/openlaked.service")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installing the Debian packages "
                                "(apt-get install, purge) needs root")


def run(cmd, timeout=600, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        assert r.returncode == 0, f"{cmd}: rc {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return r


def installed(pkg):
    r = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return r.returncode == 0 and "install ok installed" in r.stdout


def project_version():
    m = re.search(r"^\s*version\s*:\s*'([^']+)'", (REPO / "meson.build").read_text(), re.M)
    assert m, "no version in meson.build"
    return m.group(1)


@pytest.fixture(scope="module", autouse=True)
def one_at_a_time():
    """`scripts/test.sh --long` runs this module in both integration passes at once: they
    would install and purge the same packages under each other. One holds the machine's lock
    at a time; the other waits (bounded), then runs on a clean machine."""
    import fcntl

    with open("/tmp/openlake-test-deb.lock", "w") as fh:
        end = time.monotonic() + 3600
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < end, "another run held the Debian packages' test " \
                    "for an hour"
                time.sleep(2)
        yield
        fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    env = os.environ.get("OPENLAKE_DEB_DIR")
    if env:
        found = sorted(pathlib.Path(env).glob("*.deb"))
        assert found, f"OPENLAKE_DEB_DIR={env}: no .deb in it"
        return found
    if os.environ.get("OPENLAKE_LONG") != "1":
        pytest.skip("building the Debian packages takes minutes: run `scripts/test.sh --long`, "
                    "or set OPENLAKE_DEB_DIR to a folder of .debs built by scripts/deb.sh")
    run([str(REPO / "scripts" / "deps.sh"), "deb"], timeout=1800)
    out = tmp_path_factory.mktemp("debs")
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck")
    r = run([str(REPO / "scripts" / "deb.sh"), str(out)], timeout=3000, env=env, cwd=REPO)
    found = sorted(pathlib.Path(p) for p in r.stdout.split())
    names = [p.name.split("_")[0] for p in found]
    assert sorted(n for n in names if not n.endswith("-dbgsym")) == sorted(PACKAGES), r.stdout
    return found


def test_lintian(debs):
    """lintian finds no error in the packages (its warnings are printed, not failed on)."""
    if not shutil.which("lintian"):
        pytest.skip("lintian is not installed (scripts/deps.sh deb installs it)")
    r = run(["lintian", "--no-tag-display-limit", *map(str, debs)], check=False, timeout=900)
    print(r.stdout)
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("E:")]
    assert not errors and r.returncode in (0, 1), r.stdout + r.stderr


@pytest.fixture
def host_clean():
    """The machine holds no openlake package and no openlake user before; after the test, none
    of what it installed or created is left (packages purged, data, user, runtime dir)."""
    there = [p for p in PACKAGES if installed(p)]
    if there:
        pytest.skip(f"already installed here: {' '.join(there)} (this test would purge them)")
    for what, exists in (("the user openlake", _user_exists()), (str(STATE), STATE.exists()),
                         ("/etc/openlake", os.path.exists("/etc/openlake")),
                         ("/usr/bin/openlaked", os.path.exists("/usr/bin/openlaked"))):
        if exists:
            pytest.skip(f"{what} already exists here: not a machine to install the packages on")
    yield
    leftover = [p for p in PACKAGES if installed(p) or
                run(["dpkg-query", "-W", p], check=False).returncode == 0]
    if leftover:
        run(["apt-get", "purge", "-y", "-q", *leftover], check=False, env=_apt_env())
    shutil.rmtree(STATE, ignore_errors=True)
    shutil.rmtree("/etc/openlake", ignore_errors=True)
    if _user_exists():
        run(["deluser", "--system", "openlake"], check=False)
    if run(["getent", "group", "openlake"], check=False).returncode == 0:
        run(["delgroup", "--system", "openlake"], check=False)


def _user_exists():
    try:
        pwd.getpwnam("openlake")
        return True
    except KeyError:
        return False


def _apt_env():
    return dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def test_deb_install_serve_purge(debs, host_clean, tmp_path):
    version = project_version()
    ours = [str(p) for p in debs if p.name.split("_")[0] in PACKAGES]  # not the -dbgsym ones
    assert len(ours) == len(PACKAGES), debs
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *ours], env=_apt_env())
    for p in PACKAGES:
        v = run(["dpkg-query", "-W", "-f=${Status} ${Version}", p]).stdout
        assert v == f"install ok installed {version}", (p, v, version)

    # the system user, the state directory and the config, as postinst leaves them
    pw = pwd.getpwnam("openlake")
    assert pw.pw_uid < 1000 and pw.pw_dir == str(STATE) and pw.pw_shell == "/usr/sbin/nologin"
    assert run(["stat", "-c", "%U:%G %a", str(STATE)]).stdout.strip() == "openlake:openlake 750"
    assert run(["stat", "-c", "%U:%G %a", str(CONFIG)]).stdout.strip() == "root:openlake 640"
    assert str(CONFIG) in run(["dpkg-query", "-W", "-f=${Conffiles}", "openlake"]).stdout
    libs = run(["ldconfig", "-p"]).stdout
    assert re.search(r"libopenlake\.so\.0 .*=> (/usr)?/lib/[^/]+/libopenlake\.so\.0$", libs, re.M), \
        libs
    # the unit is installed, not enabled (the config has test credentials: edit it first)
    unit = dict(re.findall(r"^(\w+)=(.*)$", UNIT.read_text(), re.M))
    assert unit["User"] == "openlake" and unit["StateDirectory"] == "openlake"
    assert unit["ExecStart"] == f"/usr/bin/openlaked --config {CONFIG}", unit["ExecStart"]
    assert not os.path.exists("/etc/systemd/system/multi-user.target.wants/openlaked.service")
    assert run(["/usr/bin/openlaked", "--check-config", "--config", str(CONFIG)]).returncode == 0

    # start the service: ports moved off the defaults, which this host's other daemons may hold
    s3p, kvp, adp = free_port(), free_port(), free_port()
    cmd = unit["ExecStart"].split() + [f"--s3_addr=127.0.0.1:{s3p}", f"--kv_addr=127.0.0.1:{kvp}",
                                       f"--console_addr=127.0.0.1:{adp}"]
    stop = (start_systemd if os.path.isdir("/run/systemd/system") else start_as_unit)(
        cmd, tmp_path)
    try:
        assert wait_port(s3p, 120) and wait_port(kvp, 120), stop(False)
        s3_quickstart(s3p, tmp_path)
        kv_quickstart(kvp, tmp_path)
        c_program(kvp, version, tmp_path)
    finally:
        log = stop(True)
    # the drives were created by the daemon, as the openlake user, under its state directory
    assert run(["stat", "-c", "%U", str(STATE / "d0")]).stdout.strip() == "openlake", log

    # remove: the programs go, the config (a conffile) stays
    run(["apt-get", "remove", "-y", "-q", "openlake"], env=_apt_env())
    assert not os.path.exists("/usr/bin/openlaked") and CONFIG.exists()
    # purge: the config and its directory go; the drives' data and the user stay
    run(["apt-get", "purge", "-y", "-q", *PACKAGES], env=_apt_env())
    assert not any(installed(p) for p in PACKAGES)
    assert not os.path.exists("/etc/openlake")
    assert not os.path.exists("/usr/lib/python3/dist-packages/openlake_client")
    assert (STATE / "d0").is_dir() and _user_exists()
    assert run(["dpkg-statoverride", "--list", str(CONFIG)], check=False).returncode != 0


def start_systemd(cmd, tmp_path):
    """systemctl start, with a runtime drop-in that moves the ports; returns stop()."""
    drop = pathlib.Path("/run/systemd/system/openlaked.service.d")
    drop.mkdir(parents=True, exist_ok=True)
    (drop / "test-ports.conf").write_text("[Service]\nExecStart=\nExecStart=" + " ".join(cmd) +
                                          "\n")
    run(["systemctl", "daemon-reload"])
    run(["systemctl", "start", "openlaked"])

    def stop(stopping):
        log = run(["journalctl", "-u", "openlaked", "--no-pager", "-n", "200"],
                  check=False).stdout
        if stopping:
            run(["systemctl", "stop", "openlaked"], check=False)
            state = run(["systemctl", "show", "-P", "Result", "openlaked"], check=False)
            shutil.rmtree(drop, ignore_errors=True)
            run(["systemctl", "daemon-reload"], check=False)
            assert state.stdout.strip() == "success", log
        return log

    return stop


def start_as_unit(cmd, tmp_path):
    """No systemd: what the unit does by hand (RuntimeDirectory, User/Group, UMask,
    WorkingDirectory, ExecStart); returns stop(), which SIGTERMs and checks the exit.
    /run/openlake is only made (and removed) when absent: on a shared test machine other
    daemons, run as root, may keep their sockets there (ours then falls back, as it says)."""
    pw = pwd.getpwnam("openlake")
    run_dir = pathlib.Path("/run/openlake")
    made = not run_dir.exists()
    if made:
        run(["install", "-d", "-o", "openlake", "-g", "openlake", "-m", "0755", str(run_dir)])
    logf = tmp_path / "openlaked.log"
    with open(logf, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=STATE,
                                user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], umask=0o077)

    def stop(stopping):
        if stopping:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
            if made:
                try:
                    run_dir.rmdir()  # only when empty: never another daemon's socket
                except OSError:
                    pass
            assert proc.returncode == 0, logf.read_text()
        return logf.read_text()

    return stop


def s3_quickstart(s3p, tmp_path):
    """The README's S3 quick-start with awscli and the packaged config's credentials."""
    cred = tomllib.loads(CONFIG.read_text())["credentials"][0]
    env = aws_env({"AWS_ACCESS_KEY_ID": cred["access_key"],
                   "AWS_SECRET_ACCESS_KEY": cred["secret_key"]})
    ep = ["aws", "--endpoint-url", f"http://127.0.0.1:{s3p}"]
    src = tmp_path / "checkpoint.bin"
    src.write_bytes(os.urandom(3 << 20))
    run([*ep, "s3", "mb", "s3://demo"], env=env, timeout=120)
    run([*ep, "s3", "cp", str(src), "s3://demo/"], env=env, timeout=120)
    run([*ep, "s3", "cp", "s3://demo/checkpoint.bin", str(tmp_path / "back.bin")], env=env,
        timeout=120)
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()


def kv_quickstart(kvp, tmp_path):
    """The README's KV quick-start with the packaged openlake_client (not the checkout's) over
    the system libopenlake0: no PYTHONPATH, no OPENLAKE_LIBRARY, run from a temp dir."""
    py = """
import json, os, openlake_client as ol
c = ol.connect(["127.0.0.1:%d"], namespace="llama3-8b/bf16/tp0")
key = os.urandom(32)
c.put([key], [b"kv-block" * 4096])
from openlake_client import gpu_codec
twin = gpu_codec.load_library(False)  # the connector's ExANS codec, CPU twin
maps = open("/proc/self/maps").read().split()
print(json.dumps({"got": c.get([key])[0] == b"kv-block" * 4096, "exists": c.exists([key]),
                  "module": ol.__file__,
                  "lib": sorted({p for p in maps if "libopenlake" in p}),
                  "twin": sorted({p for p in maps if "libol_exans_twin" in p}),
                  "twin_bound": twin is not None and twin.ol_exans_gpu_bound(65536) >= 65536}))
""" % kvp
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "OPENLAKE_LIBRARY", "OPENLAKE_BUILD")}
    r = run(["/usr/bin/python3", "-c", py], env=env, cwd=tmp_path, timeout=120)
    import json

    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["got"] and doc["exists"] in (True, [True]), doc
    assert doc["module"].startswith("/usr/lib/python3/dist-packages/openlake_client/"), doc
    assert len(doc["lib"]) == 1 and re.fullmatch(r"(/usr)?/lib/[^/]+/libopenlake\.so\.0\.1\.0",
                                                 doc["lib"][0]), doc
    # libopenlake0 carries the ExANS codec's CPU twin in its private directory
    assert doc["twin_bound"] and len(doc["twin"]) == 1 and re.fullmatch(
        r"(/usr)?/lib/[^/]+/openlake/libol_exans_twin\.so", doc["twin"][0]), doc


C_PROGRAM = r"""#include <openlake/openlake.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* argv[1] = "host:port" of the KV pool: put one block over TCP, get it back */
int main(int argc, char **argv)
{
	const char *nodes[] = {argc > 1 ? argv[1] : ""};
	struct ol_client_opts o = {.size = sizeof(o), .nodes = nodes, .n_nodes = 1,
				   .device = "tcp", .ns = "tiny"};
	struct ol_client *c;
	if (ol_client_new(&o, &c) != 0)
		return 1;
	uint8_t key[OL_KV_KEY_BYTES] = {7}, in[4096], out[4096];
	memset(in, 0x5a, sizeof(in));
	struct ol_iov vi = {in, sizeof(in)}, vo = {out, sizeof(out)};
	struct ol_kv_op put = {.key = key, .iov = &vi, .iovcnt = 1};
	struct ol_kv_op get = {.key = key, .iov = &vo, .iovcnt = 1};
	int ok = ol_kv_put(c, &put, 1) == 0 && put.status == OL_KV_OK &&
		 ol_kv_get(c, &get, 1) == 0 && get.status == OL_KV_OK &&
		 get.value_len == sizeof(in) && memcmp(in, out, sizeof(in)) == 0;
	ol_client_free(c);
	printf("%s %s\n", ol_version(), ok ? "put-get-ok" : ol_kv_status_str(get.status));
	return ok ? 0 : 1;
}
"""


def c_program(kvp, version, tmp_path):
    """A tiny C program built against libopenlake-dev (pkg-config, the header, the shared
    library) puts a block into the installed daemon and gets it back."""
    (tmp_path / "tiny.c").write_text(C_PROGRAM)
    flags = run(["pkg-config", "--cflags", "--libs", "openlake"]).stdout.split()
    assert "-lopenlake" in flags, flags
    run(["cc", "-o", str(tmp_path / "tiny"), str(tmp_path / "tiny.c"), *flags])
    ldd = run(["ldd", str(tmp_path / "tiny")]).stdout
    assert re.search(r"libopenlake\.so\.0 => (/usr)?/lib/[^/]+/libopenlake\.so\.0 ", ldd), ldd
    assert run([str(tmp_path / "tiny"), f"127.0.0.1:{kvp}"]).stdout.split() == [version,
                                                                                 "put-get-ok"]
