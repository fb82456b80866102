"""The connector's view of the pool: a client that may be missing, slow or down.

Every call either returns per-entry statuses or raises StoreDown; the connector turns both
into misses / skipped saves, so vLLM keeps serving (recomputing) while the pool is away.
Blocks carry a 32-byte trailer (magic, payload length, key prefix, CRC-32 of the payload):
a value that does not match is treated as a failed load and recomputed."""

import ctypes
import struct
import time
import zlib

TRAILER = struct.Struct("<4sHHQ8sII")
TRAILER_LEN = TRAILER.size  # 32
MAGIC = b"OLK1"
FLAG_CRC = 1


class StoreDown(Exception):
    pass


class Store:
    def __init__(self, cfg, warn):
        self.cfg = cfg
        self.warn = warn  # RateLimitedLog
        self._client = None
        self._next_try = 0.0

    def client(self):
        if self._client is not None:
            return self._client
        now = time.monotonic()
        if now < self._next_try:
            raise StoreDown("store not connected (retrying)")
        try:
            from .client import connect

            self._client = connect(self.cfg.nodes, device=self.cfg.device,
                                   namespace=self.cfg.namespace, timeout_ms=self.cfg.timeout_ms)
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


def make_trailer(key, ranges, payload_len, verify):
    crc = crc_ranges(ranges) if verify else 0
    return TRAILER.pack(MAGIC, FLAG_CRC if verify else 0, 0, payload_len, key[:8], crc, 0)


def check_trailer(raw, key, ranges, payload_len):
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
    if flags & FLAG_CRC and crc_ranges(ranges) != crc:
        return "checksum mismatch"
    return ""
