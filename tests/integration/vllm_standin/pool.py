"""Test helpers: the real openlaked KV pool and libopenlake from the build, or a clear skip."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))

# connectors made by the tests publish their metrics here, not in the user's /tmp dir
if "OPENLAKE_METRICS_DIR" not in os.environ:
    _mdir = tempfile.mkdtemp(prefix="openlake-test-metrics-")
    os.environ["OPENLAKE_METRICS_DIR"] = _mdir
    atexit.register(shutil.rmtree, _mdir, True)


def build_dir():
    b = Path(os.environ.get("OPENLAKE_BUILD", REPO / "build"))
    return b if b.is_absolute() else REPO / b


def library_path():
    return build_dir() / "client" / "libopenlake.so"


def require_pool_binaries():
    lib = Path(os.environ.get("OPENLAKE_LIBRARY") or library_path())
    daemon = build_dir() / "cmd" / "openlaked" / "openlaked"
    if not lib.exists():
        pytest.skip("libopenlake is not built yet (%s missing): the KV client library has not "
                    "landed in this build" % lib)
    if not daemon.exists():
        pytest.skip("openlaked is not built (%s missing)" % daemon)
    os.environ.setdefault("OPENLAKE_LIBRARY", str(lib))


def start_pool(openlaked, dram="256MiB"):
    """A real KV-mode openlaked on ephemeral loopback ports with a temp spill dir."""
    require_pool_binaries()
    return openlaked(mode="kv", drives=1, extra='dram_bytes = "%s"\n' % dram)


def dead_addr():
    """A loopback address where nothing listens (a pool that is down)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "127.0.0.1:%d" % port
