"""ctypes binding of include/openlake/openlake.h (libopenlake). Loaded on first use."""

import ctypes
import ctypes.util
import errno
import glob
import logging
import os
import sysconfig
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)
from pathlib import Path

KEY_BYTES = 32
LOG = logging.getLogger("openlake_client.lib")

LOGFN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class Opts(Structure):
    _fields_ = [("size", c_size_t), ("nodes", POINTER(c_char_p)), ("n_nodes", c_size_t),
                ("device", c_char_p), ("ns", c_char_p), ("timeout_ms", c_uint),
                ("log", LOGFN), ("log_arg", c_void_p),
                # appended in 0.1 with the codec: 0 = off, 1 = ExANS; rows-mode row size
                ("compress", c_uint), ("compress_row_bytes", c_uint),
                # appended with access control: the KV pool token (NULL = none)
                ("token", c_char_p),
                # appended with TLS on the KV port: 1 = TLS, CA bundle, expected name
                ("tls", c_uint), ("ca_file", c_char_p), ("server_name", c_char_p),
                # appended with the cluster view: copies per key, grace window, refresh
                ("replicas", c_uint), ("grace_ms", c_uint), ("view_refresh_ms", c_uint),
                # appended with client certificates (a pool with [kv_tls] client_ca)
                ("cert_file", c_char_p), ("key_file", c_char_p)]


class Iov(Structure):
    _fields_ = [("base", c_void_p), ("len", c_size_t)]


class Op(Structure):
    _fields_ = [("key", c_void_p), ("iov", POINTER(Iov)), ("iovcnt", c_size_t),
                ("value_len", c_uint64), ("status", c_int32), ("reserved", c_uint32)]


class LibraryNotFound(ImportError):
    pass


def repo_root():
    return Path(__file__).resolve().parents[2]


def _in_checkout():
    """True when this package runs from a source checkout (python/openlake_client)."""
    root = repo_root()
    return (root / "meson.build").is_file() and (root / "client" / "openlake.map").is_file()


def _multiarch():
    try:
        return sysconfig.get_config_var("MULTIARCH") or ""
    except Exception:  # pragma: no cover - odd interpreters
        return ""


def candidates():
    """Where libopenlake is looked for, in order: $OPENLAKE_LIBRARY; the package's own
    directory (a wheel that bundles the library); a source checkout's build directories; the
    system library path (ld.so.cache, LD_LIBRARY_PATH: what `meson install` + `ldconfig` give);
    ctypes.util.find_library; meson's default prefix /usr/local before `ldconfig` ran."""
    out = []
    env = os.environ.get("OPENLAKE_LIBRARY")
    if env:
        out.append(env)
    here = Path(__file__).resolve().parent
    out.extend(sorted(str(p) for p in here.glob("libopenlake.so*")))
    if _in_checkout():
        root = repo_root()
        build = os.environ.get("OPENLAKE_BUILD", "build")
        bpath = Path(build) if os.path.isabs(build) else root / build
        out.append(str(bpath / "client" / "libopenlake.so"))
        found = glob.glob(str(root / "build*" / "client" / "libopenlake.so"))
        found.sort(key=_mtime, reverse=True)
        out.extend(found)
    out.append("libopenlake.so.0")
    found = ctypes.util.find_library("openlake")
    if found:
        out.append(found)
    ma = _multiarch()
    for d in (["/usr/local/lib/" + ma] if ma else []) + ["/usr/local/lib", "/usr/lib"]:
        out.append(d + "/libopenlake.so.0")
    seen = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def _mtime(p):
    try:
        return os.path.getmtime(p)
    except OSError:
        return 0.0


_lock = threading.Lock()
_lib = None


def _declare(lib):
    lib.ol_client_new.argtypes = [POINTER(Opts), POINTER(c_void_p)]
    lib.ol_client_new.restype = c_int
    lib.ol_client_free.argtypes = [c_void_p]
    lib.ol_client_free.restype = None
    for fn in ("ol_kv_put", "ol_kv_get", "ol_kv_exists", "ol_kv_delete"):
        f = getattr(lib, fn)
        f.argtypes = [c_void_p, POINTER(Op), c_size_t]
        f.restype = c_int
    if hasattr(lib, "ol_kv_lease"):  # absent from libraries older than the LEASE op
        lib.ol_kv_lease.argtypes = [c_void_p, POINTER(Op), c_size_t, c_uint]
        lib.ol_kv_lease.restype = c_int
    if hasattr(lib, "ol_iov_xxh3"):  # absent from libraries older than OPENLAKE_0.3
        lib.ol_iov_xxh3.argtypes = [c_void_p, c_size_t, POINTER(c_uint64)]
        lib.ol_iov_xxh3.restype = c_int
    if hasattr(lib, "ol_kv_get_xxh3"):  # absent from libraries older than OPENLAKE_0.4
        lib.ol_kv_get_xxh3.argtypes = [c_void_p, POINTER(Op), c_size_t, c_void_p, c_void_p]
        lib.ol_kv_get_xxh3.restype = c_int
    if hasattr(lib, "ol_kv_events"):  # absent from libraries older than OPENLAKE_0.5
        lib.ol_kv_events.argtypes = [c_void_p, c_size_t, c_uint64, c_void_p, c_size_t,
                                     POINTER(c_uint64), POINTER(ctypes.c_uint32)]
        lib.ol_kv_events.restype = c_int
    lib.ol_kv_stats.argtypes = [c_void_p, c_char_p, c_size_t]
    lib.ol_kv_stats.restype = c_int
    lib.ol_kv_status_str.argtypes = [c_int]
    lib.ol_kv_status_str.restype = c_char_p
    lib.ol_version.argtypes = []
    lib.ol_version.restype = c_char_p
    return lib


def load():
    """The loaded library (cached). Raises LibraryNotFound naming every place tried."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for c in candidates():
            if os.sep in c and not os.path.exists(c):
                tried.append(c + " (absent)")
                continue
            try:
                _lib = _declare(ctypes.CDLL(c))
                _lib._path = c
                return _lib
            except (OSError, AttributeError) as e:
                tried.append("%s (%s)" % (c, e))
        raise LibraryNotFound(
            "libopenlake not found. Install it (meson setup build && ninja -C build && "
            "meson install -C build && ldconfig), or point OPENLAKE_LIBRARY at "
            "libopenlake.so. Tried: " + "; ".join(tried))


_codec = None
_ucx = None


def has_ucx():
    """True when the loaded libopenlake was built with UCX (device "ucx", "rdma" or an RDMA
    NIC's name). Probed without a server or a UCX context: a library without UCX refuses the
    device before it looks at the other options (-EPROTONOSUPPORT), one with it refuses the
    bad compress value (-EINVAL) first."""
    global _ucx
    if _ucx is None:
        try:
            lib = load()
        except LibraryNotFound:
            return False
        nodes = (c_char_p * 1)(b"127.0.0.1:1")
        o = Opts(size=ctypes.sizeof(Opts), nodes=nodes, n_nodes=1, device=b"ucx", compress=2)
        h = c_void_p()
        rc = lib.ol_client_new(ctypes.byref(o), ctypes.byref(h))
        if rc == 0:
            lib.ol_client_free(h)
        _ucx = rc != -errno.EPROTONOSUPPORT
    return _ucx


def has_codec():
    """True when the loaded libopenlake knows opts.compress (a library without it ignores the
    field; this one rejects compress=2, which lets us tell them apart without a server)."""
    global _codec
    if _codec is None:
        try:
            lib = load()
        except LibraryNotFound:
            return False
        nodes = (c_char_p * 1)(b"127.0.0.1:1")
        o = Opts(size=ctypes.sizeof(Opts), nodes=nodes, n_nodes=1, compress=2)
        h = c_void_p()
        rc = lib.ol_client_new(ctypes.byref(o), ctypes.byref(h))
        if rc == 0:
            lib.ol_client_free(h)
        _codec = rc == -22  # EINVAL: the field is read
    return _codec


def available():
    try:
        load()
        return True
    except LibraryNotFound:
        return False


_LEVELS = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)


def _log_cb(level, msg, arg):
    lvl = _LEVELS[level] if 0 <= level < len(_LEVELS) else logging.INFO
    LOG.log(lvl, "%s", msg.decode("utf-8", "replace") if msg else "")


LOG_CB = LOGFN(_log_cb)
