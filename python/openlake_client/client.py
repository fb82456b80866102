"""The Python client: batched put / get / exists / delete of KV blocks over libopenlake.

Values may be bytes, bytearray, memoryview, numpy arrays, torch tensors (CPU; CUDA tensors
are staged through pinned host memory) or a list/tuple of those per key (scatter/gather:
the parts are concatenated in order). numpy and torch are imported only when used.
"""

import ctypes
import enum
import json
import os
import sys

from . import _lib
from ._lib import KEY_BYTES, Iov, Op


class Status(enum.IntEnum):
    """Per-entry result (enum ol_kv_status). STORED and HIT are other names of OK."""

    OK = 0  # stored / hit / exists / deleted
    STORED = 0
    HIT = 0
    EXISTS = 1
    MISS = 2
    TOO_LARGE = 3
    FULL = 4
    UNREACHABLE = 5
    TRUNCATED = 6
    CORRUPT = 7
    ERROR = 8

    def __str__(self):
        return self.name.lower()

    @classmethod
    def of(cls, v):
        try:
            return cls(v)
        except ValueError:
            return cls.ERROR




class OpenLakeError(OSError):
    pass


def _errname(e):
    import os

    return os.strerror(e)


# ---------------------------------------------------------------- buffers -> iovecs

class _Part:
    """One contiguous memory range, plus what keeps it alive and how to copy back."""

    __slots__ = ("addr", "nbytes", "keep", "back")

    def __init__(self, addr, nbytes, keep, back=None):
        self.addr, self.nbytes, self.keep, self.back = addr, nbytes, keep, back


def _is_torch(v):
    m = sys.modules.get("torch")
    return m is not None and isinstance(v, m.Tensor)


def _is_numpy(v):
    m = sys.modules.get("numpy")
    return m is not None and isinstance(v, m.ndarray)


def _torch_part(t, writable):
    import torch

    nbytes = t.numel() * t.element_size()
    if t.device.type == "cpu" and t.is_contiguous():
        return _Part(t.data_ptr(), nbytes, t)
    stage = torch.empty(t.shape, dtype=t.dtype)
    if t.device.type == "cuda":
        try:
            stage = stage.pin_memory()
        except (RuntimeError, NotImplementedError):
            pass
    back = None
    if writable:
        def back(stage=stage, t=t):
            t.copy_(stage)
    else:
        stage.copy_(t)
    return _Part(stage.data_ptr(), nbytes, stage, back)


def _numpy_part(a, writable):
    import numpy as np

    if a.flags.c_contiguous:
        if writable and not a.flags.writeable:
            raise ValueError("get into a read-only numpy array")
        return _Part(a.ctypes.data, a.nbytes, a)
    if writable:
        stage = np.empty(a.shape, a.dtype)

        def back(stage=stage, a=a):
            a[...] = stage
        return _Part(stage.ctypes.data, stage.nbytes, stage, back)
    stage = np.ascontiguousarray(a)
    return _Part(stage.ctypes.data, stage.nbytes, stage)


def _buffer_part(v, writable):
    if isinstance(v, bytes):
        if writable:
            raise ValueError("get into immutable bytes")
        p = ctypes.c_char_p(v)
        return _Part(ctypes.cast(p, ctypes.c_void_p).value or 0, len(v), (v, p))
    mv = memoryview(v)
    if not mv.c_contiguous:
        if writable:
            raise ValueError("get into a non-contiguous buffer")
        b = mv.tobytes()
        return _buffer_part(b, False)
    n = mv.nbytes
    if n == 0:
        return _Part(0, 0, mv)
    if not mv.readonly:
        arr = (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.format != "B" else mv)
        return _Part(ctypes.addressof(arr), n, (mv, arr))
    if writable:
        raise ValueError("get into a read-only buffer")
    try:
        import numpy as np

        a = np.frombuffer(mv, dtype=np.uint8)
        return _Part(a.ctypes.data, n, (mv, a))
    except ImportError:
        return _buffer_part(mv.tobytes(), False)


def _parts(v, writable):
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out.extend(_parts(x, writable))
        return out
    if _is_torch(v):
        return [_torch_part(v, writable)]
    if _is_numpy(v):
        return [_numpy_part(v, writable)]
    return [_buffer_part(v, writable)]


class _Batch:
    """ctypes arrays for n ops: keys, iovecs, ops; holds every buffer alive."""

    def __init__(self, keys, parts_per_key=None, raw_iovs=None):
        n = len(keys)
        for k in keys:
            if not isinstance(k, (bytes, bytearray)) or len(k) != KEY_BYTES:
                raise ValueError("a key is %d bytes (got %r)" % (KEY_BYTES, type(k)))
        self.keybuf = ctypes.create_string_buffer(b"".join(bytes(k) for k in keys), n * 32 or 1)
        self.ops = (Op * max(n, 1))()
        self.parts = parts_per_key
        self.iovs = []
        base = ctypes.addressof(self.keybuf)
        for i in range(n):
            op = self.ops[i]
            op.key = base + i * KEY_BYTES
            ranges = raw_iovs[i] if raw_iovs is not None else (
                [(p.addr, p.nbytes) for p in parts_per_key[i]] if parts_per_key else [])
            if ranges:
                flat = [x for r in ranges for x in r]
                arr = (ctypes.c_uint64 * len(flat))(*flat)  # == struct ol_iov[len(ranges)]
                self.iovs.append(arr)
                op.iov = ctypes.cast(arr, ctypes.POINTER(Iov))
                op.iovcnt = len(ranges)
        self.n = n

    def statuses(self):
        return [Status.of(self.ops[i].status) for i in range(self.n)]

    def lengths(self):
        return [int(self.ops[i].value_len) for i in range(self.n)]


# ---------------------------------------------------------------- the client

class Client:
    """A connection to a pool of nodes. Thread-safe; close() (or `with`) when done."""

    def __init__(self, nodes, device="local", namespace="", timeout_ms=2000, compress="off",
                 compress_row_bytes=0, token=None, tls=False, ca_file=None, server_name=None,
                 replicas=1, grace_ms=30000, view_refresh_ms=5000, cert_file=None,
                 key_file=None):
        if isinstance(nodes, str):
            nodes = [n for n in nodes.split(",") if n]
        if not nodes:
            raise ValueError("no nodes")
        self._lib = _lib.load()
        self.nodes = list(nodes)
        self.device = device
        self.namespace = namespace or ""
        self.timeout_ms = int(timeout_ms)
        self.compress = _compress_mode(compress)
        if self.compress == "exans" and not _lib.has_codec():
            raise ValueError("compress='exans': this libopenlake (%s) has no codec"
                             % getattr(self._lib, "_path", "?"))
        self._nodes_c = (ctypes.c_char_p * len(nodes))(*[n.encode() for n in nodes])
        o = _lib.Opts()
        o.size = ctypes.sizeof(_lib.Opts)
        o.nodes = self._nodes_c
        o.n_nodes = len(nodes)
        self._dev_c = device.encode() if device else None
        self._ns_c = self.namespace.encode()
        o.device = self._dev_c
        o.ns = self._ns_c
        o.timeout_ms = self.timeout_ms
        o.log = _lib.LOG_CB
        o.compress = 1 if self.compress == "exans" else 0
        o.compress_row_bytes = int(compress_row_bytes)
        if token is None:
            token = os.environ.get("OPENLAKE_KV_TOKEN") or None
        self._token_c = token.encode() if token else None
        o.token = self._token_c
        self.tls = bool(tls)
        if self.tls and ca_file and not os.access(ca_file, os.R_OK):
            raise ValueError("ca_file %r is not a readable file (PEM CA of the pool's "
                             "certificates)" % (ca_file,))
        self._ca_c = ca_file.encode() if (self.tls and ca_file) else None
        self._sni_c = server_name.encode() if (self.tls and server_name) else None
        o.tls = 1 if self.tls else 0
        o.ca_file = self._ca_c
        o.server_name = self._sni_c
        self._cert_c = cert_file.encode() if (self.tls and cert_file) else None
        self._key_c = key_file.encode() if (self.tls and key_file) else None
        o.cert_file = self._cert_c
        o.key_file = self._key_c
        o.replicas = int(replicas)
        o.grace_ms = int(grace_ms)
        o.view_refresh_ms = int(view_refresh_ms)
        h = ctypes.c_void_p()
        rc = self._lib.ol_client_new(ctypes.byref(o), ctypes.byref(h))
        if rc < 0:
            raise OpenLakeError(-rc, "ol_client_new: " + _errname(-rc))
        self._h = h

    # -- lifetime
    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            self._lib.ol_client_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _call(self, fn, batch, what):
        if not self._h:
            raise OpenLakeError(9, "client is closed")
        if batch.n == 0:
            return
        rc = fn(self._h, batch.ops, batch.n)
        if rc < 0:
            raise OpenLakeError(-rc, "%s: %s" % (what, _errname(-rc)))

    # -- high level
    def put(self, keys, values):
        """Store values[i] under keys[i]. Returns a list of Status (OK, EXISTS, ...)."""
        keys = list(keys)
        values = list(values)
        if len(keys) != len(values):
            raise ValueError("%d keys, %d values" % (len(keys), len(values)))
        b = _Batch(keys, [_parts(v, False) for v in values])
        self._call(self._lib.ol_kv_put, b, "put")
        return b.statuses()

    def get(self, keys, out=None, size_hint=65536):
        """Without out: list of bytes, None for a miss. With out (one buffer, tensor or list of
        them per key, filled in place): list of bool, True when the value filled it exactly."""
        keys = list(keys)
        if out is not None:
            return self._get_into(keys, list(out))
        bufs = [bytearray(size_hint) for _ in keys]
        st, ln = self.get_iov(keys, [[_buf_range(b)] for b in bufs])
        res = [None] * len(keys)
        retry = []
        for i, (s, n) in enumerate(zip(st, ln)):
            if s == Status.OK:
                res[i] = bytes(memoryview(bufs[i])[:n])
            elif s == Status.TRUNCATED:
                retry.append(i)
        if retry:
            bufs2 = [bytearray(ln[i]) for i in retry]
            st2, ln2 = self.get_iov([keys[i] for i in retry], [[_buf_range(b)] for b in bufs2])
            for j, i in enumerate(retry):
                if st2[j] == Status.OK:
                    res[i] = bytes(memoryview(bufs2[j])[:ln2[j]])
        return res

    def _get_into(self, keys, out):
        if len(out) != len(keys):
            raise ValueError("%d keys, %d outputs" % (len(keys), len(out)))
        parts = [_parts(v, True) for v in out]
        b = _Batch(keys, parts)
        self._call(self._lib.ol_kv_get, b, "get")
        hits = []
        for i, (s, n) in enumerate(zip(b.statuses(), b.lengths())):
            cap = sum(p.nbytes for p in parts[i])
            ok = s == Status.OK and n == cap
            if ok:
                for p in parts[i]:
                    if p.back:
                        p.back()
            hits.append(ok)
        self.last_statuses = b.statuses()
        return hits

    def exists(self, keys):
        st, _ = self.exists_len(keys)
        return [s == Status.OK for s in st]

    def exists_len(self, keys):
        """(statuses, value lengths) without moving values."""
        b = _Batch(list(keys))
        self._call(self._lib.ol_kv_exists, b, "exists")
        return b.statuses(), b.lengths()

    def lease(self, keys, ttl_ms):
        """Keep keys' blocks in the pool's DRAM, safe from eviction, for ttl_ms (capped by the
        node's reserve_ttl_secs); ttl_ms=0 ends their leases (any client of the namespace may).
        Returns a list of Status: OK (leased / ended), MISS (not stored / not leased), FULL
        (the namespace holds too many leases), ERROR (a node or library too old to lease)."""
        keys = list(keys)
        if not hasattr(self._lib, "ol_kv_lease"):
            return [Status.ERROR] * len(keys)
        if not 0 <= int(ttl_ms) < 2**32:
            raise ValueError("ttl_ms out of range: %r" % (ttl_ms,))
        b = _Batch(keys)
        if not self._h:
            raise OpenLakeError(9, "client is closed")
        if b.n:
            rc = self._lib.ol_kv_lease(self._h, b.ops, b.n, int(ttl_ms))
            if rc < 0:
                raise OpenLakeError(-rc, "lease: %s" % _errname(-rc))
        return b.statuses()

    EVENTS_NOW = 2**64 - 1  # events(since=EVENTS_NOW): no keys, only where to start
    EVENTS_MAX = 1023  # keys in one answer

    def has_events(self):
        """True when the library can ask for removal events (ol_kv_events, OPENLAKE_0.5)."""
        return hasattr(self._lib, "ol_kv_events")

    def events(self, node, since, max_keys=EVENTS_MAX):
        """The keys of this client's namespace that node number node (0.., in the order the
        client met its nodes) removed from the pool with a sequence >= since, oldest first
        (ol_kv_events). Returns (keys, next, lost): next is the since of the next call; lost
        is True when the node dropped events past since (some removed keys are missing).
        Raises IndexError past the last node, OpenLakeError(ENOTSUP) when the node or this
        library is too old to keep events, OpenLakeError for a node down or unreachable."""
        if not self.has_events():
            raise OpenLakeError(95, "events: library older than OPENLAKE_0.5")
        if not self._h:
            raise OpenLakeError(9, "client is closed")
        m = max(0, min(int(max_keys), self.EVENTS_MAX))
        buf = ctypes.create_string_buffer(max(1, m * KEY_BYTES))
        nxt, flags = ctypes.c_uint64(0), ctypes.c_uint32(0)
        rc = self._lib.ol_kv_events(self._h, int(node), int(since), buf, m, ctypes.byref(nxt),
                                    ctypes.byref(flags))
        if rc == -34:  # ERANGE
            raise IndexError("no node %d" % node)
        if rc < 0:
            raise OpenLakeError(-rc, "events: %s" % _errname(-rc))
        raw = buf.raw
        keys = [raw[i * KEY_BYTES:(i + 1) * KEY_BYTES] for i in range(rc)]
        return keys, nxt.value, bool(flags.value & 1)

    def delete(self, keys):
        b = _Batch(list(keys))
        self._call(self._lib.ol_kv_delete, b, "delete")
        return b.statuses()

    def stats(self):
        """The pool's state as a dict (see ol_kv_stats)."""
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            rc = self._lib.ol_kv_stats(self._h, buf, cap)
            if rc == -28 and cap < (1 << 26):  # ENOSPC
                cap <<= 2
                continue
            if rc < 0:
                raise OpenLakeError(-rc, "stats: " + _errname(-rc))
            return json.loads(buf.value.decode("utf-8"))

    def client_stats(self):
        """This client's own counters (compression: compress_in_bytes = value bytes put,
        compress_out_bytes = bytes sent for them, decompress_in/out for gets...)."""
        return self.stats().get("client", {})

    # -- low level (raw memory ranges; the caller keeps them alive)
    def put_iov(self, keys, iovs):
        """iovs[i] = [(addr, len), ...]. Returns statuses."""
        b = _Batch(list(keys), raw_iovs=iovs)
        self._call(self._lib.ol_kv_put, b, "put")
        return b.statuses()

    def get_ops(self, ops_addr, n, hash_iovcnt=None):
        """ol_kv_get on n struct ol_kv_op the caller laid out at ops_addr (keys, iovecs and
        ops kept alive by the caller, which reads status and value_len back from them). For
        callers that build their op and iovec arrays in bulk (the vLLM connector's loads):
        no per-op Python work here.
        hash_iovcnt=k: also hash, while copying, what lands in each op's first k iovs
        (ol_kv_get_xxh3): returns the n XXH3-64 values (0 where the status is not OK), or
        None when this libopenlake is older than OPENLAKE_0.4 (the get is done, unhashed).
        Without hash_iovcnt: None."""
        if not self._h:
            raise OpenLakeError(9, "client is closed")
        if n == 0:
            return [] if hash_iovcnt is not None and self.has_get_xxh3() else None
        ops = ctypes.cast(ops_addr, ctypes.POINTER(Op))
        if hash_iovcnt is None or not self.has_get_xxh3():
            rc, out = self._lib.ol_kv_get(self._h, ops, n), None
        else:
            k = (ctypes.c_size_t * n)(*([int(hash_iovcnt)] * n))
            out = (ctypes.c_uint64 * n)()
            rc = self._lib.ol_kv_get_xxh3(self._h, ops, n, k, out)
        if rc < 0:
            raise OpenLakeError(-rc, "get: %s" % _errname(-rc))
        return None if out is None else list(out)

    def has_get_xxh3(self):
        """True when the library hashes during a get (ol_kv_get_xxh3, OPENLAKE_0.4)."""
        return hasattr(self._lib, "ol_kv_get_xxh3")

    def get_iov(self, keys, iovs, hash_iovcnt=None):
        """Fill the ranges iovs[i] with keys[i]. Returns (statuses, value lengths).
        hash_iovcnt=k: also the XXH3-64 of what lands in each one's first k ranges, taken
        while copying (ol_kv_get_xxh3; get_ops): (statuses, lengths, hashes or None)."""
        b = _Batch(list(keys), raw_iovs=iovs)
        if hash_iovcnt is None:
            self._call(self._lib.ol_kv_get, b, "get")
            return b.statuses(), b.lengths()
        h = self.get_ops(ctypes.addressof(b.ops), b.n, hash_iovcnt)
        return b.statuses(), b.lengths(), h


def _buf_range(ba):
    arr = (ctypes.c_char * len(ba)).from_buffer(ba)
    return (ctypes.addressof(arr), len(ba))


def _compress_mode(v):
    if v in (None, False, 0) or str(v).lower() in ("off", "none", "0", "false", ""):
        return "off"
    if v is True or v == 1 or str(v).lower() == "exans":
        return "exans"
    raise ValueError("compress must be 'off' or 'exans', not %r" % (v,))


def connect(nodes=("127.0.0.1:9400",), device="local", namespace="", timeout_ms=2000,
            compress="off", compress_row_bytes=0, token=None, tls=False, ca_file=None,
            server_name=None, replicas=1, grace_ms=30000, view_refresh_ms=5000, cert_file=None,
            key_file=None):
    """A Client for the pool at nodes (list of "host:port", or a comma-separated string).
    compress="exans": values are compressed (lossless, for BF16 KV blocks) before they leave
    this process and decoded on the way back; plain and compressed values coexist.
    token: the pool's secret or a [[kv.tokens]] token allowed for namespace (None =
    $OPENLAKE_KV_TOKEN, else none). A pool that refuses it answers every entry "unreachable".
    tls=True: TCP connections speak TLS (a pool with [kv_tls]); the nodes' certificates are
    verified against ca_file (PEM; None = the system's CAs) for their host or server_name;
    cert_file / key_file: this client's certificate for a pool with [kv_tls] client_ca.
    nodes are seeds: in a cluster any of them gives the live members (VIEW), keys go to them by
    weighted rendezvous on node ids; replicas = copies per key (1-4); for grace_ms after a
    member change a miss is retried on the key's previous owner; the view is asked for at
    least every view_refresh_ms (and whenever a reply says it changed)."""
    return Client(nodes, device=device, namespace=namespace, timeout_ms=timeout_ms,
                  compress=compress, compress_row_bytes=compress_row_bytes, token=token,
                  tls=tls, ca_file=ca_file, server_name=server_name, replicas=replicas,
                  grace_ms=grace_ms, view_refresh_ms=view_refresh_ms, cert_file=cert_file,
                  key_file=key_file)


def version():
    return _lib.load().ol_version().decode()
