"""The connector's view of the pool: a client that may be missing, slow or down.

Every call either returns per-entry statuses or raises StoreDown; the connector turns both
into misses / skipped saves, so vLLM keeps serving (recomputing) while the pool is away.
Blocks carry a 32-byte trailer (magic, payload length, key prefix, CRC-32 of the payload):
a value that does not match is treated as a failed load and recomputed."""

import ctypes
import ctypes.util
import struct
import threading
import time
import zlib

TRAILER = struct.Struct("<4sHHQ8sII")
TRAILER_LEN = TRAILER.size  # 32
MAGIC = b"OLK1"
FLAG_CRC = 1   # checksum = CRC-32 (zlib)
FLAG_XXH3 = 2  # checksum = low 32 bits of XXH3-64 (libxxhash, ~10x faster than CRC-32)


class StoreDown(Exception):
    pass


class Store:
    def __init__(self, cfg, warn):
        self.cfg = cfg
        self.warn = warn  # RateLimitedLog
        self._client = None
        self._next_try = 0.0
        self._lock = threading.Lock()

    def client(self):
        if self._client is not None:
            return self._client
        with self._lock:
            return self._connect()

    def _connect(self):
        if self._client is not None:
            return self._client
        now = time.monotonic()
        if now < self._next_try:
            raise StoreDown("store not connected (retrying)")
        try:
            from .client import connect

            self._client = connect(self.cfg.nodes, device=self.cfg.device,
                                   namespace=self.cfg.namespace, timeout_ms=self.cfg.timeout_ms,
                                   compress=self.cfg.compress, token=self.cfg.token or None,
                                   tls=self.cfg.tls, ca_file=self.cfg.ca_file or None,
                                   server_name=self.cfg.server_name or None,
                                   replicas=self.cfg.replicas, grace_ms=self.cfg.grace_ms,
                                   cert_file=self.cfg.cert_file or None,
                                   key_file=self.cfg.key_file or None)
        except Exception as e:  # library missing, bad options...
            self._next_try = now + self.cfg.retry_interval_s
            self.warn("connect", "openlake: cannot open the pool client (%s); serving without "
                      "the pool until it works", e)
            raise StoreDown(str(e)) from None
        return self._client

    def call(self, name, *args):
        c = self.client()
        try:
            return getattr(c, name)(*args)
        except OSError as e:
            self.warn(name, "openlake: %s failed: %s", name, e)
            raise StoreDown(str(e)) from None

    def close(self):
        c, self._client = self._client, None
        if c is not None:
            c.close()


def _mv(addr, n):
    return memoryview((ctypes.c_char * n).from_address(addr)).cast("B") if n else b""


def crc_ranges(ranges):
    crc = 0
    for addr, n in ranges:
        if n:
            crc = zlib.crc32(_mv(addr, n), crc)
    return crc & 0xFFFFFFFF


class _Xxh3:
    """XXH3-64 streaming over raw memory ranges through libxxhash (no Python copies).
    One hash state per thread: loads and saves run in several threads at once."""

    def __init__(self):
        name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
        lib = ctypes.CDLL(name)
        lib.XXH3_createState.restype = ctypes.c_void_p
        lib.XXH3_freeState.argtypes = [ctypes.c_void_p]
        lib.XXH3_64bits_reset.argtypes = [ctypes.c_void_p]
        lib.XXH3_64bits_update.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        lib.XXH3_64bits_digest.argtypes = [ctypes.c_void_p]
        lib.XXH3_64bits_digest.restype = ctypes.c_uint64
        self.lib = lib
        self._tls = threading.local()
        self._state()

    def _state(self):
        st = getattr(self._tls, "state", None)
        if st is None:
            st = self.lib.XXH3_createState()
            if not st:
                raise OSError("XXH3_createState failed")
            self._tls.state = st
        return st

    def __call__(self, ranges):
        lib, st = self.lib, self._state()
        lib.XXH3_64bits_reset(st)
        up = lib.XXH3_64bits_update
        for addr, n in ranges:
            if n:
                up(st, addr, n)
        return lib.XXH3_64bits_digest(st) & 0xFFFFFFFF


class IovArray:
    """n struct ol_iov at addr (the caller keeps them alive): a scatter list that
    libopenlake's ol_iov_xxh3 hashes in one call; iterates as (addr, len) pairs otherwise.
    xxh3: the XXH3-64 of these ranges that the get which filled them computed on its way in
    (Client.get_ops with hash_iovcnt=n: ol_kv_get_xxh3), or None (hashed again when checked)."""

    __slots__ = ("addr", "n", "xxh3")

    def __init__(self, addr, n, xxh3=None):
        self.addr, self.n, self.xxh3 = addr, n, xxh3

    def __iter__(self):
        a = (ctypes.c_uint64 * (2 * self.n)).from_address(self.addr)
        return iter([(a[2 * i], a[2 * i + 1]) for i in range(self.n)])


_iov_fn = None


def iov_xxh3(ranges):
    """Low 32 bits of XXH3-64 of an IovArray in one libopenlake call, or None when the
    library has no ol_iov_xxh3 (older than OPENLAKE_0.3)."""
    global _iov_fn
    if _iov_fn is None:
        from . import _lib

        try:
            _iov_fn = getattr(_lib.load(), "ol_iov_xxh3", False)
        except _lib.LibraryNotFound:
            _iov_fn = False
    if not _iov_fn:
        return None
    out = ctypes.c_uint64()
    if _iov_fn(ranges.addr, ranges.n, ctypes.byref(out)) < 0:
        return None
    return out.value & 0xFFFFFFFF


_xxh = None
_xxh_tried = False


def xxh3():
    """The XXH3 hasher, or None when libxxhash cannot be loaded (then CRC-32 is used)."""
    global _xxh, _xxh_tried
    if not _xxh_tried:
        _xxh_tried = True
        try:
            _xxh = _Xxh3()
        except (OSError, AttributeError):
            _xxh = None
    return _xxh


class Hashed(list):
    """[(addr, len)] ranges with their XXH3-64 already taken (by the get that filled them,
    or on the device), or None: then they are hashed when checked."""

    __slots__ = ("xxh3",)

    def __init__(self, ranges, xxh3=None):
        super().__init__(ranges)
        self.xxh3 = xxh3


def _checksum(flags, ranges):
    if flags & FLAG_XXH3:
        pre = getattr(ranges, "xxh3", None)
        if pre is not None:  # hashed by the get, while the bytes were in cache
            return pre & 0xFFFFFFFF
        if isinstance(ranges, IovArray):
            got = iov_xxh3(ranges)
            if got is not None:
                return got
        h = xxh3()
        return None if h is None else h(ranges)
    if flags & FLAG_CRC:
        return crc_ranges(ranges)
    return 0


def make_trailer(key, ranges, payload_len, verify):
    flags = 0
    if verify:
        flags = FLAG_XXH3 if xxh3() is not None else FLAG_CRC
    crc = _checksum(flags, ranges)
    return TRAILER.pack(MAGIC, flags, 0, payload_len, key[:8], crc, 0)


CHECKSUM_AT = 24  # offset of the checksum in a trailer


def device_trailer(key, payload_len, verify):
    """The trailer make_trailer writes, its checksum (XXH3 when verify) left 0 for the device
    to fill in at CHECKSUM_AT (GpuCodec.xxh3): the same bytes once it has."""
    return TRAILER.pack(MAGIC, FLAG_XXH3 if verify else 0, 0, payload_len, key[:8], 0, 0)


def check_trailer(raw, key, ranges, payload_len, verify=True):
    """'' if the value is the one put under key, else the reason."""
    try:
        magic, flags, _, plen, kp, crc, _ = TRAILER.unpack(bytes(raw))
    except struct.error:
        return "short trailer"
    if magic != MAGIC:
        return "bad magic"
    if plen != payload_len:
        return "payload length %d, expected %d" % (plen, payload_len)
    if kp != key[:8]:
        return "stored under another key"
    if verify and flags & (FLAG_CRC | FLAG_XXH3):
        got = _checksum(flags, ranges)
        if got is None:
            return "checksum (xxh3) cannot be verified here"
        if got != crc:
            return "checksum mismatch"
    return ""
