"""Operate it like a package (issue 15): `meson install --destdir` puts the daemon, the CLI,
libopenlake with its header and pkg-config file, the systemd unit and the example configs in
the standard places, and what landed works from there; the Python package, pip-installed into
a venv, finds libopenlake the documented ways."""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import BUILD, REPO, free_port, wait_port

pytestmark = pytest.mark.skipif(not (BUILD / "meson-private").is_dir(),
                                reason=f"{BUILD} is not a meson build directory")

PREFIX = "usr/local"


def _sanitized():
    """True when the build under test is ASan/UBSan-instrumented: its libopenlake cannot be
    loaded by an uninstrumented program (cc's a.out, the venv's python)."""
    import json

    r = subprocess.run(["meson", "introspect", "--buildoptions", str(BUILD)],
                       capture_output=True, text=True, timeout=120)
    opts = {o["name"]: o["value"] for o in json.loads(r.stdout or "[]")}
    return opts.get("b_sanitize", "none") != "none"


needs_plain_lib = pytest.mark.skipif(
    (BUILD / "meson-private").is_dir() and _sanitized(),
    reason="a sanitizer build's libopenlake cannot be loaded by an uninstrumented program; "
    "the install layout is checked on the plain build")


def run(cmd, timeout=300, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       **kw)
    assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
    return r


@pytest.fixture(scope="module")
def dest(tmp_path_factory):
    """meson install of the build under test into a temp DESTDIR (default prefix /usr/local)."""
    d = tmp_path_factory.mktemp("destdir")
    run(["meson", "install", "-C", BUILD, "--destdir", d, "--no-rebuild", "--quiet"])
    return d


def libdir(dest):
    found = sorted((dest / PREFIX).glob("lib*/**/libopenlake.so.0"))
    assert found, sorted(str(p) for p in (dest / PREFIX).rglob("*"))
    return found[0].parent


def test_meson_install_lays_out_a_package(dest):
    root = dest / PREFIX
    for rel in ["bin/openlaked", "bin/openlake", "include/openlake/openlake.h",
                "lib/systemd/system/openlaked.service",
                "share/openlake/examples/openlake.toml",
                "share/openlake/examples/storage-tcp-local.toml",
                "share/openlake/examples/kv_local.toml",
                "share/doc/openlake/README.md", "share/doc/openlake/LICENSE"]:
        assert (root / rel).is_file(), rel
    lib = libdir(dest)
    assert (lib / "libopenlake.so").is_symlink() and (lib / "pkgconfig" / "openlake.pc").is_file()
    assert "Apache License" in (root / "share/doc/openlake/LICENSE").read_text()
    # the binaries run from there
    r = run([root / "bin/openlaked", "--help"])
    assert "--config FILE" in r.stdout and "console_addr" in r.stdout
    assert "openlaked" in run([root / "bin/openlaked", "--version"]).stdout
    assert run([root / "bin/openlake", "--help"]).returncode == 0
    # the unit starts the installed daemon on the installed config path, and reloads with HUP
    unit = (root / "lib/systemd/system/openlaked.service").read_text()
    m = re.search(r"^ExecStart=(\S+) --config (\S+)$", unit, re.M)
    assert m and m.group(1) == "/usr/local/bin/openlaked", unit
    assert m.group(2) == "/usr/local/etc/openlake/openlake.toml"
    assert re.search(r"^ExecReload=/bin/kill -HUP \$MAINPID$", unit, re.M), unit
    assert "@" not in "".join(l for l in unit.splitlines() if not l.startswith("#"))
    # every example config is accepted as installed
    for cfg in sorted((root / "share/openlake/examples").glob("*.toml")):
        r = subprocess.run([root / "bin/openlaked", "--config", cfg, "--check-config"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (cfg, r.stderr)


@needs_plain_lib
def test_header_and_pkg_config_build_a_client(dest, tmp_path):
    lib = libdir(dest)
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(dest),
               PKG_CONFIG_PATH=str(lib / "pkgconfig"), PKG_CONFIG_LIBDIR="")
    flags = run(["pkg-config", "--cflags", "--libs", "openlake"], env=env).stdout.split()
    assert f"-I{dest}/{PREFIX}/include" in flags and "-lopenlake" in flags, flags
    assert run(["pkg-config", "--modversion", "openlake"], env=env).stdout.strip() == \
        subprocess.run(["meson", "introspect", "--projectinfo", BUILD], capture_output=True,
                       text=True).stdout.split('"version": "')[1].split('"')[0]
    src = tmp_path / "hello.c"
    src.write_text('#include <openlake/openlake.h>\n#include <stdio.h>\n'
                   'int main(void) { struct ol_client *c = NULL;\n'
                   '  struct ol_client_opts o = {.size = sizeof(o)};\n'
                   '  int rc = ol_client_new(&o, &c); /* no nodes: refused */\n'
                   '  printf("%s %d\\n", ol_version(), rc < 0); return c != NULL; }\n')
    exe = tmp_path / "hello"
    run(["cc", "-std=c17", "-Wall", "-Werror", src, "-o", exe, *flags])
    out = run([exe], env=dict(os.environ, LD_LIBRARY_PATH=str(lib))).stdout.split()
    assert re.fullmatch(r"\d+\.\d+\.\d+", out[0]) and out[1] == "1", out


def python_copy(tmp_path):
    """./python copied (pip must not write build files into the checkout)."""
    src = tmp_path / "python"
    shutil.copytree(REPO / "python", src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                        "*.egg-info"))
    return src


@pytest.fixture(scope="module")
def venv_py(tmp_path_factory):
    """A venv that sees Debian's packages (torch, numpy), with ./python pip-installed offline."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    run([venv / "bin/python", "-m", "pip", "install", "-q", "--no-build-isolation",
         "--no-index", python_copy(tmp)])
    return venv / "bin/python"


def clean_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("OPENLAKE_LIBRARY", "OPENLAKE_BUILD", "LD_LIBRARY_PATH", "PYTHONPATH",
                         "OPENLAKE_BUNDLE_LIBRARY")}


PROBE = ("import openlake_client._lib as L, numpy; "
         "print(L.load()._path)")


def probe(py, env, cwd):
    return subprocess.run([py, "-c", PROBE], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


@needs_plain_lib
def test_venv_package_finds_libopenlake(dest, venv_py, tmp_path):
    py = venv_py
    lib = libdir(dest)
    base = clean_env()
    site = pathlib.Path(run([py, "-c", "import openlake_client, os; "
                             "print(os.path.dirname(openlake_client.__file__))"],
                            env=base, cwd=tmp_path).stdout.strip())
    assert "site-packages" in str(site) and not str(site).startswith(str(REPO)), site
    # OPENLAKE_LIBRARY names it
    r = probe(py, dict(base, OPENLAKE_LIBRARY=str(lib / "libopenlake.so.0")), tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == str(lib / "libopenlake.so.0"), r.stderr
    # the system library path (LD_LIBRARY_PATH stands in for an installed prefix + ldconfig)
    r = probe(py, dict(base, LD_LIBRARY_PATH=str(lib)), tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "libopenlake.so.0", r.stderr
    # a copy bundled in the package's own directory (what a wheel ships)
    shutil.copy(lib / "libopenlake.so.0", site / "libopenlake.so.0")
    r = probe(py, base, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == str(site / "libopenlake.so.0"), r.stderr
    os.unlink(site / "libopenlake.so.0")
    # nowhere (unless this host has it installed): the error says how to fix it
    r = probe(py, base, tmp_path)
    if r.returncode != 0:
        assert "OPENLAKE_LIBRARY" in r.stderr and "meson install" in r.stderr, r.stderr


@needs_plain_lib
def test_wheel_bundles_libopenlake(dest, venv_py, tmp_path):
    """OPENLAKE_BUNDLE_LIBRARY=... pip wheel: a platform wheel holding the library, which the
    installed package then loads from its own directory with nothing set; with
    OPENLAKE_BUNDLE_BIN / OPENLAKE_BUNDLE_CONFIGS also the daemon, the CLI and the example
    configs, run by the console scripts `openlaked` and `openlake` of the venv."""
    lib = libdir(dest) / "libopenlake.so.0"
    bindir = dest / PREFIX / "bin"
    src = python_copy(tmp_path)
    run([venv_py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-index", "--no-deps",
         "-w", tmp_path / "wheels", src],
        env=dict(clean_env(), OPENLAKE_BUNDLE_LIBRARY=str(lib), OPENLAKE_BUNDLE_BIN=str(bindir),
                 OPENLAKE_BUNDLE_CONFIGS=str(REPO / "configs")))
    wheels = list((tmp_path / "wheels").glob("openlake_vllm-*.whl"))
    assert len(wheels) == 1 and "linux" in wheels[0].name and "none-any" not in wheels[0].name
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "openlake_client/libopenlake.so.0" in names
    for p in ("openlake_client/bin/openlaked", "openlake_client/bin/openlake",
              "openlake_client/configs/kv_local.toml"):
        assert p in names, names
    assert not (REPO / "python" / "openlake_client" / "bin").exists()
    assert not (REPO / "python" / "openlake_client" / "libopenlake.so.0").exists()
    run([venv_py, "-m", "pip", "install", "-q", "--no-index", "--force-reinstall", "--no-deps",
         wheels[0]], env=clean_env())
    site = pathlib.Path(run([venv_py, "-c", "import openlake_client, os; "
                             "print(os.path.dirname(openlake_client.__file__))"],
                            env=clean_env(), cwd=tmp_path).stdout.strip())
    r = probe(venv_py, clean_env(), tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == str(site / "libopenlake.so.0"), r.stderr
    # the console scripts run the bundled programs: `pip install openlake-vllm` then `openlaked`
    vbin = pathlib.Path(venv_py).parent
    r = run([vbin / "openlaked", "--version"], env=clean_env(), cwd=tmp_path)
    want = run([bindir / "openlaked", "--version"], env=clean_env()).stdout
    assert r.stdout == want and want.startswith("openlaked "), (r.stdout, want)
    r = run([vbin / "openlake", "--version"], env=clean_env(), cwd=tmp_path)
    assert r.stdout.startswith("openlake ") and r.stdout.split()[1] == want.split()[1]
    conf = site / "configs" / "kv_local.toml"
    r = run([vbin / "openlaked", "--check-config", "--config", conf], env=clean_env(),
            cwd=tmp_path)
    assert "OK" in r.stdout + r.stderr
    # ... and serves: the KV quick-start config (free ports, a temp data dir, a small DRAM
    # tier), a block put and got back by the wheel's own client library over TCP
    rpc, s3p, admin = free_port(), free_port(), free_port()
    logf = open(tmp_path / "openlaked.log", "wb")
    daemon = subprocess.Popen(
        [str(vbin / "openlaked"), "--config", str(conf), "--rpc-addr", "127.0.0.1:%d" % rpc,
         "--s3-addr", "127.0.0.1:%d" % s3p, "--console-addr", "127.0.0.1:%d" % admin,
         "--data-dirs", str(tmp_path / "kvdata"), "--kv.dram_bytes", "64MiB"],
        env=clean_env(), cwd=tmp_path, stdout=logf, stderr=subprocess.STDOUT)
    try:
        assert wait_port(rpc, 60, daemon), (tmp_path / "openlaked.log").read_text()
        code = ("import os, openlake_client as ol; c = ol.connect(['127.0.0.1:%d'], device='tcp',"
                " timeout_ms=10000); k = bytes(range(32)); v = os.urandom(8192);"
                " assert c.put([k], [v]) == [ol.Status.OK]; assert c.get([k]) == [v];"
                " print('roundtrip ok', ol.__file__)" % rpc)
        r = run([venv_py, "-c", code], env=clean_env(), cwd=tmp_path)
        assert "roundtrip ok" in r.stdout and str(site) in r.stdout, r.stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            assert daemon.wait(60) == 0, (tmp_path / "openlaked.log").read_text()
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait(10)
            logf.close()
