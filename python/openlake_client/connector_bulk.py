"""One batch of whole-chunk loads as flat arrays: the connector's fast load path.

A load of J chunks into zero-copy paged blocks (every chunk the same number of blocks, none
skipped) is one ol_kv_get / ol_kv_get_xxh3 call over arrays built with a few numpy
operations: struct ol_kv_op [J], struct ol_iov [J, n + 1] (n payload ranges straight into
the KV blocks, then the chunk's trailer), the J keys and the J trailers. The trailers are
then checked for the whole batch at once, with exactly the rules of store.check_trailer
(magic, payload length, key prefix, and when verifying the checksum the trailer names: XXH3
against the hash the get took while it copied). Nothing here is per block or per iovec in
Python; a 32-layer block is 64 iovecs. A batch where any chunk is not plainly good (a miss,
a wrong size, a bad or CRC-32 trailer) is handed back as per-chunk objects (`BulkGet.rows`)
to the per-chunk checks, which name the reason and the request it fails.

Needs numpy (every vLLM install has it); without it the connector takes its per-chunk path."""

import ctypes

import numpy as np

from ._lib import Iov, Op
from .store import FLAG_CRC, FLAG_XXH3, MAGIC, TRAILER_LEN, IovArray, iov_xxh3

# struct trailer (store.TRAILER) as four little-endian u64 words: magic | flags << 32 (|
# reserved << 48), payload length, key prefix, checksum (| reserved << 32)
_MAGIC = int.from_bytes(MAGIC, "little")
_LOW32 = np.uint64(0xFFFFFFFF)
_OPW = ctypes.sizeof(Op) // 8  # struct ol_kv_op as int64 words
assert TRAILER_LEN == 32 and ctypes.sizeof(Op) % 8 == 0 and ctypes.sizeof(Iov) == 16


class BulkGet:
    """The arrays of one batch get; they live as long as this object (and the IovArrays that
    rows() hands out keep it)."""

    __slots__ = ("nj", "n", "keys", "ops", "iov", "trailers", "hashes", "done")

    def __init__(self, kv, ids, keys, layer=None):
        """kv: the group's PagedKV (zero_copy); ids: int64 array [J, k] of block ids; keys:
        the J 32-byte keys; layer: the one layer of a layer-wise object, or None."""
        nj = len(keys)
        addr, lens = kv.iov_arrays(ids, layer)
        n = addr.shape[1]
        iov = np.empty((nj, n + 1, 2), np.int64)
        iov[:, :n, 0] = addr
        iov[:, :n, 1] = lens
        self.trailers = np.zeros((nj, 4), np.uint64)
        rows = np.arange(nj, dtype=np.int64)
        iov[:, n, 0] = self.trailers.ctypes.data + rows * TRAILER_LEN
        iov[:, n, 1] = TRAILER_LEN
        self.keys = np.frombuffer(b"".join(keys), np.uint8)
        ops = np.zeros((nj, _OPW), np.int64)
        ops[:, Op.key.offset // 8] = self.keys.ctypes.data + rows * 32
        ops[:, Op.iov.offset // 8] = iov.ctypes.data + rows * ((n + 1) * 16)
        ops[:, Op.iovcnt.offset // 8] = n + 1
        self.nj, self.n, self.ops, self.iov = nj, n, ops, iov
        self.hashes, self.done = None, False

    def get(self, call, verify):
        """Run the get through call (Store.call: raises StoreDown). verify: hash each chunk's
        n payload ranges during the copy (a library older than ol_kv_get_xxh3: after it, with
        ol_iov_xxh3; with neither, the per-chunk check hashes them)."""
        h = call("get_ops", self.ops.ctypes.data, self.nj, self.n if verify else None)
        self.done = True
        if verify and h is None:
            h = [iov_xxh3(self._range(i)) for i in range(self.nj)]
            h = None if None in h else h
        if h is not None:
            self.hashes = np.array(h, dtype=np.uint64)

    def status(self):
        return self.ops.view(np.int32)[:, Op.status.offset // 4]

    def value_len(self):
        return self.ops[:, Op.value_len.offset // 8]

    def all_good(self, payload, verify):
        """True when every chunk came back whole with a trailer that check_trailer passes."""
        tr = self.trailers
        ok = (self.status() == 0) & (self.value_len() == payload + TRAILER_LEN)
        ok &= ((tr[:, 0] & _LOW32) == _MAGIC) & (tr[:, 1] == payload)
        ok &= tr[:, 2] == self.keys.view("<u8")[::4]  # the key prefix
        if verify:
            flags = tr[:, 0] >> np.uint64(32)
            if self.hashes is None:  # nothing to compare with: the per-chunk check decides
                ok &= (flags & np.uint64(FLAG_CRC | FLAG_XXH3)) == 0
            else:  # unsummed, or XXH3 and the sum matches (CRC-32: the per-chunk check)
                unsummed = (flags & np.uint64(FLAG_CRC | FLAG_XXH3)) == 0
                xxh3 = (flags & np.uint64(FLAG_XXH3)) != 0
                ok &= unsummed | (xxh3 & ((tr[:, 3] & _LOW32) == (self.hashes & _LOW32)))
        return bool(ok.all())

    def _range(self, i):
        h = None if self.hashes is None else int(self.hashes[i])
        return IovArray(self.iov.ctypes.data + i * (self.n + 1) * 16, self.n, h)

    def rows(self):
        """Per chunk (status or None when the get never ran, value length, trailer bytes,
        payload ranges) for the per-chunk checks."""
        st = self.status().tolist() if self.done else [None] * self.nj
        lens = self.value_len().tolist() if self.done else [0] * self.nj
        raw = self.trailers.tobytes()
        return [(st[i], lens[i], raw[i * TRAILER_LEN:(i + 1) * TRAILER_LEN], self._range(i))
                for i in range(self.nj)]
