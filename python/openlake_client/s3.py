"""openlake_client.s3: training I/O over any S3 endpoint through libopenlake's native S3 client.

    from openlake_client import s3
    s3.save(model.state_dict(), "s3://ckpt/run1/step-100/")      # safetensors + index, atomic
    h = s3.async_save(model.state_dict(), "s3://ckpt/run1/step-200/")  # returns after a snapshot
    ...training steps...; h.wait()
    sd = s3.load("s3://ckpt/run1/step-200/")                        # dict name -> tensor
    w = s3.load_safetensors("s3://models/m/model.safetensors", device="cpu")
    ds = s3.S3IterableDataset("s3://data/train/", shuffle=True)     # or S3MapDataset
    c = s3.Client(endpoint="http://127.0.0.1:9000")                 # explicit configuration

Endpoint, region and keys come from arguments, else AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY, AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE and ~/.aws/config +
~/.aws/credentials, as for the AWS tools. Transfers run in C with the GIL released: parallel
multipart PUTs from tensor memory, parallel ranged GETs straight into tensor memory, CRC32C,
retries. torch and numpy are imported only by the functions that need them. See
docs/training.md.
"""

import ctypes
import json
import mmap
import os
import random
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_char_p, c_int, c_size_t, c_uint,
                    c_uint64, c_void_p)

from . import _lib

INDEX_NAME = "model.safetensors.index.json"
DEFAULT_SHARD_BYTES = 1 << 30
_HEADER_PROBE = 1 << 18  # first GET of a safetensors file: its header is usually inside
_HEADER_MAX = 100 << 20  # as the safetensors reference reader

ENOTFOUND, EDENIED, ECLIENT, ESERVER, ECHECKSUM, EPROTO, ECONFIG = range(-4097, -4104, -1)

PROGRESS = CFUNCTYPE(c_int, c_uint64, c_uint64, c_void_p)
LISTFN = CFUNCTYPE(c_int, c_char_p, c_uint64, c_void_p)


class _Opts(Structure):
    _fields_ = [("size", c_size_t), ("endpoint", c_char_p), ("region", c_char_p),
                ("access_key", c_char_p), ("secret_key", c_char_p),
                ("session_token", c_char_p), ("profile", c_char_p), ("conns", c_uint),
                ("retries", c_uint), ("timeout_ms", c_uint), ("backoff_ms", c_uint),
                ("part_size", c_uint64), ("max_bytes_per_sec", c_uint64),
                ("log", _lib.LOGFN), ("log_arg", c_void_p),
                # appended with https endpoints: the PEM CA bundle (None = AWS_CA_BUNDLE...)
                ("ca_file", c_char_p)]


class _Iov(Structure):
    _fields_ = [("base", c_void_p), ("len", c_size_t)]


class S3Error(OSError):
    """A failed S3 call: .rc (negative errno or OL_S3_E* code), .status_text, and the library's
    message (S3 error code and message, attempts)."""

    def __init__(self, rc, msg):
        super().__init__(msg)
        self.rc = rc

    @property
    def not_found(self):
        return self.rc == ENOTFOUND


_declared = set()


def _lib_s3():
    lib = _lib.load()
    if id(lib) in _declared:
        return lib
    lib.ol_s3_new.argtypes = [POINTER(_Opts), POINTER(c_void_p)]
    lib.ol_s3_free.argtypes = [c_void_p]
    lib.ol_s3_free.restype = None
    for fn in ("ol_s3_endpoint", "ol_s3_region", "ol_s3_access_key"):
        getattr(lib, fn).argtypes = [c_void_p]
        getattr(lib, fn).restype = c_char_p
    lib.ol_s3_put.argtypes = [c_void_p, c_char_p, c_char_p, POINTER(_Iov), c_size_t, c_uint,
                              PROGRESS, c_void_p, c_char_p, c_size_t, POINTER(c_uint)]
    lib.ol_s3_get.argtypes = [c_void_p, c_char_p, c_char_p, c_uint64, POINTER(_Iov), c_size_t,
                              c_uint, PROGRESS, c_void_p]
    lib.ol_s3_head.argtypes = [c_void_p, c_char_p, c_char_p, POINTER(c_uint64), c_char_p,
                               c_size_t]
    lib.ol_s3_delete.argtypes = [c_void_p, c_char_p, c_char_p]
    lib.ol_s3_create_bucket.argtypes = [c_void_p, c_char_p]
    lib.ol_s3_list.argtypes = [c_void_p, c_char_p, c_char_p, LISTFN, c_void_p]
    lib.ol_s3_part_size.argtypes = [c_void_p, c_uint64]
    lib.ol_s3_part_size.restype = c_uint64
    lib.ol_s3_last_error.argtypes = []
    lib.ol_s3_last_error.restype = c_char_p
    lib.ol_s3_strerror.argtypes = [c_int]
    lib.ol_s3_strerror.restype = c_char_p
    for fn in ("ol_s3_new", "ol_s3_put", "ol_s3_get", "ol_s3_head", "ol_s3_delete",
               "ol_s3_create_bucket", "ol_s3_list"):
        getattr(lib, fn).restype = c_int
    _declared.add(id(lib))
    return lib


def _b(s):
    return None if s is None else (s.encode() if isinstance(s, str) else bytes(s))


def parse_uri(uri):
    """"s3://bucket/key" -> ("bucket", "key")."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise ValueError("not an S3 URI (s3://BUCKET/KEY): %r" % (uri,))
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise ValueError("no bucket in %r" % uri)
    return bucket, key


def _buffer(obj, writable):
    """(address, nbytes, keepalive) of a bytes-like object, numpy array or torch tensor."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch.Tensor
        if not obj.is_contiguous() or obj.device.type != "cpu":
            raise ValueError("tensor must be contiguous and in host memory")
        return obj.data_ptr(), obj.numel() * obj.element_size(), obj
    if isinstance(obj, bytes):
        if writable:
            raise TypeError("bytes is read-only: pass a bytearray, memoryview or array")
        p = ctypes.cast(ctypes.c_char_p(obj), c_void_p).value if obj else None
        return p, len(obj), obj
    mv = memoryview(obj).cast("B")
    if writable and mv.readonly:
        raise TypeError("read-only buffer given to receive data")
    if not mv.contiguous:
        raise ValueError("buffer must be contiguous")
    if mv.nbytes == 0:
        return None, 0, mv
    if not mv.readonly:
        arr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
        return ctypes.addressof(arr), mv.nbytes, (mv, arr)
    import numpy as np  # read-only buffers other than bytes

    a = np.frombuffer(mv, dtype=np.uint8)
    return a.ctypes.data, a.nbytes, (mv, a)


def _iovs(objs, writable):
    objs = list(objs)
    arr = (_Iov * max(1, len(objs)))()
    keep = []
    total = 0
    for i, o in enumerate(objs):
        p, n, k = _buffer(o, writable)
        arr[i].base = p
        arr[i].len = n
        keep.append(k)
        total += n
    return arr, len(objs), keep, total


class Client:
    """A handle on libopenlake's S3 client. Thread-safe; picklable (a copy re-creates its
    handle in the process that uses it, e.g. a DataLoader worker)."""

    def __init__(self, endpoint=None, region=None, access_key=None, secret_key=None,
                 session_token=None, profile=None, conns=0, retries=0, timeout_ms=0,
                 backoff_ms=0, part_size=0, max_bytes_per_sec=0, ca_file=None):
        self._kw = dict(endpoint=endpoint, region=region, access_key=access_key,
                        secret_key=secret_key, session_token=session_token, profile=profile,
                        conns=conns, retries=retries, timeout_ms=timeout_ms,
                        backoff_ms=backoff_ms, part_size=part_size,
                        max_bytes_per_sec=max_bytes_per_sec, ca_file=ca_file)
        self._h = None
        self._pid = None
        self._lock = threading.Lock()
        self._handle()  # configuration errors surface here

    def __getstate__(self):
        return {"_kw": self._kw}

    def __setstate__(self, st):
        self._kw = st["_kw"]
        self._h = None
        self._pid = None
        self._lock = threading.Lock()

    def _handle(self):
        if self._h is not None and self._pid == os.getpid():
            return self._h
        with self._lock:
            if self._h is None or self._pid != os.getpid():
                lib = _lib_s3()
                k = self._kw
                o = _Opts(size=ctypes.sizeof(_Opts), endpoint=_b(k["endpoint"]),
                          region=_b(k["region"]), access_key=_b(k["access_key"]),
                          secret_key=_b(k["secret_key"]),
                          session_token=_b(k["session_token"]), profile=_b(k["profile"]),
                          conns=k["conns"], retries=k["retries"], timeout_ms=k["timeout_ms"],
                          backoff_ms=k["backoff_ms"], part_size=k["part_size"],
                          max_bytes_per_sec=k["max_bytes_per_sec"],
                          ca_file=_b(None if k["ca_file"] is None else str(k["ca_file"])))
                h = c_void_p()
                rc = lib.ol_s3_new(byref(o), byref(h))
                if rc:
                    raise _error(lib, rc)
                self._h = h  # a handle inherited over fork() is left alone, never freed
                self._pid = os.getpid()
        return self._h

    def close(self):
        if self._h is not None and self._pid == os.getpid():
            _lib_s3().ol_s3_free(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def endpoint(self):
        return _lib_s3().ol_s3_endpoint(self._handle()).decode()

    @property
    def region(self):
        return _lib_s3().ol_s3_region(self._handle()).decode()

    @property
    def access_key(self):
        return _lib_s3().ol_s3_access_key(self._handle()).decode()

    def part_size(self, total):
        return _lib_s3().ol_s3_part_size(self._handle(), total)

    def put(self, bucket, key, data, progress=None, resume=False):
        """Store data (a bytes-like object, array or tensor, or a list of them: written in
        order, no copy) as bucket/key. Returns (etag, parts kept by resume)."""
        lib = _lib_s3()
        objs = data if isinstance(data, (list, tuple)) else [data]
        arr, n, keep, _ = _iovs(objs, False)
        etag = ctypes.create_string_buffer(128)
        resumed = c_uint(0)
        cb = _progress_cb(progress)
        flags = 3 if resume else 0
        rc = lib.ol_s3_put(self._handle(), _b(bucket), _b(key), arr, n, flags, cb, None, etag,
                           128, byref(resumed))
        del keep
        if rc:
            raise _error(lib, rc)
        return etag.value.decode(), resumed.value

    def get_into(self, bucket, key, buffers, offset=0, progress=None, whole=False):
        """Fill buffers (one writable buffer/array/tensor or a list: a scatter list) with the
        object's bytes from offset on, with parallel ranged GETs straight into them.
        whole=True: the buffers hold exactly the whole object (checked, with its CRC32C)."""
        lib = _lib_s3()
        objs = buffers if isinstance(buffers, (list, tuple)) else [buffers]
        arr, n, keep, total = _iovs(objs, True)
        cb = _progress_cb(progress)
        rc = lib.ol_s3_get(self._handle(), _b(bucket), _b(key), offset, arr, n,
                           1 if whole else 0, cb, None)
        del keep
        if rc:
            raise _error(lib, rc)
        return total

    def get(self, bucket, key, size=None, offset=0, whole=None):
        """The object's bytes (from offset; size None = to the end) as a bytearray. whole:
        size is the object's size (None: true when size was not given and offset is 0)."""
        if size is None:
            total = self.head(bucket, key)[0]
            size = total - offset
            whole = offset == 0 if whole is None else whole
        buf = bytearray(size)
        if size:
            self.get_into(bucket, key, buf, offset, whole=bool(whole))
        return buf

    def head(self, bucket, key):
        """(size, etag); S3Error with .not_found when absent."""
        lib = _lib_s3()
        size = c_uint64(0)
        etag = ctypes.create_string_buffer(128)
        rc = lib.ol_s3_head(self._handle(), _b(bucket), _b(key), byref(size), etag, 128)
        if rc:
            raise _error(lib, rc)
        return size.value, etag.value.decode()

    def exists(self, bucket, key):
        try:
            self.head(bucket, key)
            return True
        except S3Error as e:
            if e.not_found:
                return False
            raise

    def delete(self, bucket, key):
        lib = _lib_s3()
        rc = lib.ol_s3_delete(self._handle(), _b(bucket), _b(key))
        if rc:
            raise _error(lib, rc)

    def create_bucket(self, bucket):
        lib = _lib_s3()
        rc = lib.ol_s3_create_bucket(self._handle(), _b(bucket))
        if rc:
            raise _error(lib, rc)

    def list(self, bucket, prefix=""):
        """[(key, size)] of every key under prefix, in key order."""
        lib = _lib_s3()
        out = []

        def fn(k, size, arg):
            out.append((k.decode("utf-8", "surrogateescape"), size))
            return 0

        cb = LISTFN(fn)
        rc = lib.ol_s3_list(self._handle(), _b(bucket), _b(prefix), cb, None)
        if rc:
            raise _error(lib, rc)
        return out


def _progress_cb(progress):
    if progress is None:
        return PROGRESS(0)  # NULL

    def fn(done, total, arg):
        try:
            return 1 if progress(done, total) is False else 0
        except Exception:
            return 1

    return PROGRESS(fn)


def _error(lib, rc):
    msg = (lib.ol_s3_last_error() or b"").decode("utf-8", "replace")
    if not msg:
        msg = lib.ol_s3_strerror(rc).decode()
    return S3Error(rc, msg)


_default = None
_default_lock = threading.Lock()


def default_client():
    """The Client configured from the environment and the AWS files (created once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


# ---- safetensors ------------------------------------------------------------------------

_DTYPES = None


def _dtypes():
    global _DTYPES
    if _DTYPES is None:
        import torch

        _DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
                   torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
                   torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
    return _DTYPES


def _header(tensors):
    """(header bytes incl. the 8-byte length, data size) for [(name, contiguous cpu tensor)]"""
    dt = _dtypes()
    h = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, t in tensors:
        if t.dtype not in dt:
            raise TypeError("tensor %r: dtype %s has no safetensors name" % (name, t.dtype))
        n = t.numel() * t.element_size()
        h[name] = {"dtype": dt[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    js = json.dumps(h, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(js)) + js, off


def _flat_tensors(state_dict):
    import torch

    out = []
    for name, t in state_dict.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError("state_dict[%r] is a %s: only tensors are stored (keep other "
                            "values in metadata=)" % (name, type(t).__name__))
        if not isinstance(name, str):
            raise TypeError("state_dict key %r is not a string" % (name,))
        out.append((name, t.detach()))
    return out


def _host_contiguous(t):
    if t.device.type != "cpu":
        t = t.to("cpu")
    return t.contiguous()


def _shards(tensors, max_bytes):
    shards, cur, size = [], [], 0
    for name, t in tensors:
        n = t.numel() * t.element_size()
        if cur and size + n > max_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, t))
        size += n
    if cur or not shards:
        shards.append(cur)
    return shards


def _prefix(uri):
    bucket, key = parse_uri(uri)
    if key and not key.endswith("/"):
        key += "/"
    return bucket, key


def _read_index(client, bucket, prefix):
    try:
        return json.loads(bytes(client.get(bucket, prefix + INDEX_NAME)).decode())
    except S3Error as e:
        if e.not_found:
            return None
        raise


def save(state_dict, uri, client=None, max_shard_bytes=DEFAULT_SHARD_BYTES, metadata=None,
         delete_previous=True):
    """Write state_dict (name -> tensor) under the prefix uri ("s3://bucket/run/step-100/") as
    safetensors files (at most max_shard_bytes of tensor data each) plus
    model.safetensors.index.json (Hugging Face's index layout) written LAST: until it is
    there, the new checkpoint does not exist, and a previous one at the same prefix stays
    loadable (files of a save carry that save's id in their names). With delete_previous,
    the files of the checkpoint it replaces are deleted after the index is written.
    Returns the index (a dict)."""
    return _save_tensors([(n, _host_contiguous(t)) for n, t in _flat_tensors(state_dict)], uri,
                         client, max_shard_bytes, metadata, delete_previous)


def _save_tensors(tensors, uri, client, max_shard_bytes, metadata, delete_previous):
    client = client or default_client()
    bucket, prefix = _prefix(uri)
    old = _read_index(client, bucket, prefix) if delete_previous else None
    sid = "%x%04x" % (time.time_ns() // 1000, random.getrandbits(16))
    shards = _shards(tensors, max_shard_bytes)
    names = ["model-%s-%05d-of-%05d.safetensors" % (sid, i + 1, len(shards))
             for i in range(len(shards))]
    sizes = {}

    def put_shard(i):
        head, size = _header(shards[i])
        data = [head] + [t for _, t in shards[i] if t.numel()]
        client.put(bucket, prefix + names[i], data)
        sizes[names[i]] = len(head) + size

    with ThreadPoolExecutor(max_workers=min(4, len(shards))) as ex:
        list(ex.map(put_shard, range(len(shards))))
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for _, t in tensors),
                          "format": "openlake-checkpoint-1", "save_id": sid,
                          "files": sizes, "user": metadata or {}},
             "weight_map": {n: names[i] for i, s in enumerate(shards) for n, _ in s}}
    client.put(bucket, prefix + INDEX_NAME, json.dumps(index, indent=1).encode())
    if old:
        keep = set(names)
        for f in set(old.get("weight_map", {}).values()) - keep:
            try:
                client.delete(bucket, prefix + f)
            except S3Error:
                pass
    return index


class SaveHandle:
    """The background upload of async_save: wait() blocks until it is complete (the index
    written) and returns the index, or raises what the upload raised."""

    def __init__(self):
        self._ev = threading.Event()
        self._res = None
        self._exc = None

    def done(self):
        return self._ev.is_set()

    def wait(self, timeout=None):
        if not self._ev.wait(timeout):
            raise TimeoutError("checkpoint upload still running after %ss" % timeout)
        if self._exc is not None:
            raise self._exc
        return self._res

    result = wait


def _snapshot(tensors):
    """Copies in host memory (pinned when CUDA is available and the source is on a GPU)."""
    import torch

    out, cuda = [], False
    for name, t in tensors:
        pin = t.device.type == "cuda"
        cuda |= pin
        dst = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin)
        if not pin:
            _advise_huge(dst)  # faulted in 512x fewer times, and sent from as cheaply
        dst.copy_(t, non_blocking=pin)
        out.append((name, dst))
    if cuda:
        torch.cuda.synchronize()
    return out


def async_save(state_dict, uri, client=None, max_shard_bytes=DEFAULT_SHARD_BYTES, metadata=None,
               delete_previous=True):
    """Snapshot every tensor into host memory, start the upload in a background thread and
    return a SaveHandle: training may change the tensors as soon as this returns."""
    snap = _snapshot(_flat_tensors(state_dict))
    h = SaveHandle()

    def run():
        try:
            h._res = _save_tensors(snap, uri, client, max_shard_bytes, metadata,
                                   delete_previous)
        except BaseException as e:  # handed to wait()
            h._exc = e
        finally:
            h._ev.set()

    threading.Thread(target=run, name="openlake-async-save", daemon=True).start()
    return h


_HUGE = 2 << 20
_libc = None


def _advise_huge(t):
    """Ask for transparent huge pages over the 2 MiB-aligned inside of a fresh, large tensor
    (Linux, THP "madvise" mode): the GETs that fill it then fault in one page per 2 MiB
    instead of per 4 KiB. Measured here: 4 KiB pages cost ~4 s of CPU per GB landed (VM page
    faults), huge pages ~0.2 s. Advisory: nothing happens where the kernel says no."""
    global _libc
    adv = getattr(mmap, "MADV_HUGEPAGE", None)
    n = t.numel() * t.element_size()
    if adv is None or n < 2 * _HUGE:
        return
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.madvise.argtypes = [c_void_p, c_size_t, c_int]
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return
    a = (t.data_ptr() + _HUGE - 1) & ~(_HUGE - 1)
    e = (t.data_ptr() + n) & ~(_HUGE - 1)
    if e > a:
        _libc.madvise(a, e - a, adv)  # an error (not anonymous memory) changes nothing


def _parse_header(raw, size, uri):
    """The validated tensor table of a safetensors file: [(name, dtype, shape, begin, end)]
    in data order, and where the data starts."""
    import torch

    if len(raw) < 8:
        raise ValueError("%s: not a safetensors file (shorter than 8 bytes)" % uri)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > _HEADER_MAX or 8 + n > size:
        raise ValueError("%s: not a safetensors file (header length %d)" % (uri, n))
    try:
        h = json.loads(bytes(raw[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: safetensors header is not JSON: %s" % (uri, e)) from None
    if not isinstance(h, dict):
        raise ValueError("%s: safetensors header is not an object" % uri)
    rev = {v: k for k, v in _dtypes().items()}
    out = []
    for name, e in h.items():
        if name == "__metadata__":
            continue
        try:
            dt = rev[e["dtype"]]
            shape = [int(x) for x in e["shape"]]
            b, en = (int(x) for x in e["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("%s: tensor %r: bad or unsupported entry %r" % (uri, name, e))
        nel = 1
        for d in shape:
            if d < 0:
                raise ValueError("%s: tensor %r: negative dimension" % (uri, name))
            nel *= d
        if en - b != nel * torch.empty((), dtype=dt).element_size() or b < 0:
            raise ValueError("%s: tensor %r: offsets %d..%d do not hold shape %s" %
                             (uri, name, b, en, shape))
        out.append((name, dt, shape, b, en))
    out.sort(key=lambda x: x[3])
    pos = 0
    for name, _, _, b, en in out:
        if b != pos:
            raise ValueError("%s: tensor %r: data overlaps or leaves a hole at %d" %
                             (uri, name, b))
        pos = en
    if 8 + n + pos != size:
        raise ValueError("%s: data is %d bytes, the header says %d" % (uri, size - 8 - n, pos))
    return out, 8 + n


def _into(name, dt, shape, out, uri):
    """out[name] when it can take the tensor's bytes in place (same dtype and shape), else
    None (not in out) or ValueError (there, but another dtype or shape)."""
    t = out.get(name) if out is not None else None
    if t is None:
        return None
    if t.dtype != dt or list(t.shape) != list(shape):
        raise ValueError("%s: tensor %r is %s %s in the file, %s %s in out" %
                         (uri, name, dt, list(shape), t.dtype, list(t.shape)))
    return t


def load_safetensors(uri, device="cpu", client=None, pin_memory=None, out=None):
    """Read one safetensors file into a dict name -> tensor, in one pass of parallel ranged
    GETs straight into the tensors' memory (no temporary file, no intermediate buffer; large
    tensors are advised transparent huge pages first, so filling them costs few page faults).
    device != "cpu": tensors are read into (pinned) host memory, then moved.
    out: a dict name -> tensor (a model's state_dict()) whose tensors of the same names are
    filled in place, as torch.distributed.checkpoint loads: no new memory for them (contiguous
    CPU tensors take the GETs directly; others are filled with copy_). Their dtype and shape
    must match the file's; the returned dict holds them."""
    import torch

    client = client or default_client()
    bucket, key = parse_uri(uri)
    size, _ = client.head(bucket, key)
    raw = client.get(bucket, key, size=min(size, _HEADER_PROBE), whole=size <= _HEADER_PROBE)
    if len(raw) >= 8:
        (n,) = struct.unpack("<Q", raw[:8])
        if 8 + n > len(raw) and 8 + n <= min(size, _HEADER_MAX + 8):
            raw += client.get(bucket, key, size=8 + n - len(raw), offset=len(raw))
    table, data_off = _parse_header(raw, size, uri)
    dev = torch.device(device)
    pin = (dev.type == "cuda") if pin_memory is None else pin_memory
    tensors, bufs, later = {}, [], []
    for name, dt, shape, b, en in table:
        dst = _into(name, dt, shape, out, uri)
        if dst is not None and dst.device.type == "cpu" and dst.is_contiguous():
            t = dst  # the GETs land in it
        else:
            t = torch.empty(shape, dtype=dt, device="cpu", pin_memory=pin)
            if not pin and en > b:
                _advise_huge(t)
            if dst is not None:
                later.append((dst, t))  # read beside it, then copied in
        tensors[name] = t if dst is None else dst
        if en > b:
            bufs.append(t)
    if bufs:
        client.get_into(bucket, key, bufs, offset=data_off)
    for dst, t in later:
        dst.copy_(t)
    if dev.type != "cpu":
        mine = {id(v) for v in (out or {}).values()}
        tensors = {k: v if id(v) in mine else v.to(dev, non_blocking=pin)
                   for k, v in tensors.items()}
    return tensors


def load(uri, device="cpu", client=None, out=None):
    """The checkpoint under the prefix uri (as written by save: the index names its files),
    a prefix holding a single model.safetensors, or one *.safetensors object. Raises
    FileNotFoundError when no complete checkpoint is there. out: a dict name -> tensor (the
    job's model.state_dict()) filled in place, as load_safetensors says: resuming a job this
    way takes no new memory for its tensors."""
    client = client or default_client()
    if uri.endswith(".safetensors"):
        return load_safetensors(uri, device, client, out=out)
    bucket, prefix = _prefix(uri)
    index = _read_index(client, bucket, prefix)
    if index is None:
        if client.exists(bucket, prefix + "model.safetensors"):
            return load_safetensors("s3://%s/%smodel.safetensors" % (bucket, prefix), device,
                                    client, out=out)
        raise FileNotFoundError("no complete checkpoint at %s: %s is missing (a save that "
                                "did not finish, or a wrong prefix)" % (uri, INDEX_NAME))
    files = sorted(set(index.get("weight_map", {}).values()))
    got = {}
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(files)))) as ex:
        for part in ex.map(lambda f: load_safetensors("s3://%s/%s%s" % (bucket, prefix, f),
                                                      device, client, out=out), files):
            got.update(part)
    missing = set(index.get("weight_map", {})) - set(got)
    if missing:
        raise ValueError("%s: tensors named in the index are missing from its files: %s" %
                         (uri, sorted(missing)[:5]))
    return {k: got[k] for k in index["weight_map"]}


# ---- datasets ---------------------------------------------------------------------------

def _rank_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class S3Object:
    """One object read by a dataset: .key, .data (bytearray)."""

    __slots__ = ("bucket", "key", "data")

    def __init__(self, bucket, key, data):
        self.bucket, self.key, self.data = bucket, key, data

    def __repr__(self):
        return "S3Object(s3://%s/%s, %d bytes)" % (self.bucket, self.key, len(self.data))


def _list_objects(client, uri):
    bucket, prefix = parse_uri(uri)
    return bucket, [(k, s) for k, s in client.list(bucket, prefix) if not k.endswith("/")]


class S3MapDataset:
    """Map-style dataset over every object under a prefix (listed once, in key order):
    ds[i] = transform(S3Object) (default: the S3Object). Usable with DataLoader and any
    sampler; each worker process opens its own connections."""

    def __init__(self, uri, client=None, transform=None):
        self.client = client or default_client()
        self.bucket, self.objects = _list_objects(self.client, uri)
        self.transform = transform

    def __len__(self):
        return len(self.objects)

    def __getitem__(self, i):
        key, size = self.objects[i]
        obj = S3Object(self.bucket, key, self.client.get(self.bucket, key, size=size,
                                                         whole=True))
        return self.transform(obj) if self.transform else obj


def _iterable_base():
    try:
        from torch.utils.data import IterableDataset

        return IterableDataset
    except ImportError:  # pragma: no cover - without torch the class still iterates
        return object


class S3IterableDataset(_iterable_base()):
    """Iterable dataset over every object under a prefix. Each epoch the object list (the
    shards) is split between ranks (rank/world_size, else torch.distributed, else RANK and
    WORLD_SIZE) and then between DataLoader workers, so every object is read exactly once
    per epoch. shuffle=True permutes the object order with seed + epoch (set_epoch) before
    the split. prefetch objects are read ahead by a thread pool."""

    def __init__(self, uri, client=None, transform=None, shuffle=False, seed=0, rank=None,
                 world_size=None, prefetch=4):
        self.client = client or default_client()
        self.bucket, self.objects = _list_objects(self.client, uri)
        self.transform = transform
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.rank, self.world_size = rank, world_size
        self.prefetch = max(1, prefetch)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _mine(self):
        objs = list(self.objects)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(objs)
        rank, world = _rank_world(self.rank, self.world_size)
        objs = objs[rank::world]
        try:
            from torch.utils.data import get_worker_info

            wi = get_worker_info()
        except ImportError:
            wi = None
        if wi is not None:
            objs = objs[wi.id::wi.num_workers]
        return objs

    def __iter__(self):
        objs = self._mine()
        get = lambda o: S3Object(self.bucket, o[0], self.client.get(self.bucket, o[0],
                                                                    size=o[1], whole=True))
        with ThreadPoolExecutor(max_workers=self.prefetch) as ex:
            pending = [ex.submit(get, o) for o in objs[:self.prefetch]]
            nxt = len(pending)
            while pending:
                obj = pending.pop(0).result()
                if nxt < len(objs):
                    pending.append(ex.submit(get, objs[nxt]))
                    nxt += 1
                yield self.transform(obj) if self.transform else obj
