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


_serial = [0]


def start_pool(openlaked, dram="256MiB"):
    """A real KV-mode openlaked on ephemeral loopback ports with a temp spill dir and a shm
    object of its own (removed by the kv_pools fixture, even after kill -9)."""
    require_pool_binaries()
    _serial[0] += 1
    name = "/olpy-test-%d-%d" % (os.getpid(), _serial[0])
    d = openlaked(mode="kv", drives=1,
                  extra='dram_bytes = "%s"\nshm_name = "%s"\n' % (dram, name))
    d.ol_shm_name = name
    return d


def _cleanup(d):
    try:
        d.stop()  # SIGTERM: the daemon unlinks its shm object
    except Exception:
        pass
    try:
        os.unlink("/dev/shm" + d.ol_shm_name)  # after kill -9 nobody did
    except OSError:
        pass


@pytest.fixture
def kv_pools(openlaked):
    """Factory of KV pools, all stopped and their shared memory removed at the end."""
    made = []

    def make(dram="256MiB"):
        d = start_pool(openlaked, dram)
        made.append(d)
        return d

    yield make
    for d in made:
        _cleanup(d)


@pytest.fixture
def pool(kv_pools):
    return kv_pools()


def dead_addr():
    """A loopback address where nothing listens (a pool that is down)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "127.0.0.1:%d" % port
