"""Block keys: chained SHA-256 over token ids and everything that changes the bytes.

A key never depends on PYTHONHASHSEED, the process or the host: it is a pure function of the
model identity (model id, revision, dtype, KV layout, block size, chunk size, TP size), the
optional cache salt, the token ids of the prefix up to and including the chunk, and the TP rank.

    seed     = SHA256("openlake-kv/1" || canonical identity || salt)
    chain[0] = SHA256(seed || le32(n) || le32 tokens of chunk 0)
    chain[i] = SHA256(chain[i-1] || le32(n) || le32 tokens of chunk i)
    key(i, rank) = SHA256(chain[i] || "rank" || le32(rank))

Only whole chunks are hashed; the same prefix gives the same chain on every host.
"""

import hashlib
import struct
from dataclasses import dataclass, field

KEY_LEN = 32
_DOMAIN = b"openlake-kv/1\0"


def _enc_str(s):
    b = str(s).encode("utf-8")
    return struct.pack("<I", len(b)) + b


@dataclass(frozen=True)
class ModelIdentity:
    """Everything about a deployment that changes the bytes of a KV block."""

    model: str
    revision: str = ""
    dtype: str = "auto"
    layout: str = "fa"
    block_size: int = 16
    chunk_size: int = 256
    tp_size: int = 1
    extra: tuple = field(default_factory=tuple)  # (name, value) pairs, e.g. kv shape

    def digest(self):
        parts = [
            ("model", self.model),
            ("revision", self.revision),
            ("dtype", self.dtype),
            ("layout", self.layout),
            ("block_size", int(self.block_size)),
            ("chunk_size", int(self.chunk_size)),
            ("tp_size", int(self.tp_size)),
        ] + sorted((str(k), v) for k, v in self.extra)
        h = hashlib.sha256(_DOMAIN)
        for k, v in parts:
            h.update(_enc_str(k))
            h.update(_enc_str(v))
        return h.digest()


def seed_hash(identity, salt=None):
    """The root of the chain: identity digest plus an optional tenant salt."""
    h = hashlib.sha256(_DOMAIN + b"seed\0")
    h.update(identity.digest())
    if salt:
        h.update(b"salt\0")
        h.update(_enc_str(salt))
    return h.digest()


def _tokens_bytes(tokens):
    try:
        return struct.pack("<%dI" % len(tokens), *tokens)
    except struct.error as e:
        raise ValueError("token ids must be integers in [0, 2^32): %s" % e) from None


def chain_hashes(seed, token_ids, chunk_size, start=0, prev=None):
    """Chained hashes of the whole chunks of token_ids, from chunk `start` on.

    prev is chain[start-1] (or None with start == 0). Returns a list of 32-byte digests."""
    out = []
    h_prev = seed if start == 0 else prev
    if h_prev is None:
        raise ValueError("prev hash required when start > 0")
    n_full = len(token_ids) // chunk_size
    for i in range(start, n_full):
        chunk = token_ids[i * chunk_size:(i + 1) * chunk_size]
        h = hashlib.sha256(h_prev)
        h.update(struct.pack("<I", chunk_size))
        h.update(_tokens_bytes(chunk))
        h_prev = h.digest()
        out.append(h_prev)
    return out


def rank_key(chain_hash, rank):
    """The store key of one chunk for one TP rank."""
    return hashlib.sha256(chain_hash + b"rank" + struct.pack("<I", int(rank))).digest()


class ChainCache:
    """Incremental chain hashes for one request (tokens only grow, chunks never change)."""

    __slots__ = ("seed", "chunk_size", "hashes")

    def __init__(self, seed, chunk_size):
        self.seed = seed
        self.chunk_size = chunk_size
        self.hashes = []

    def upto(self, token_ids, n_chunks):
        """chain hashes of the first n_chunks chunks (n_chunks*chunk_size <= len(token_ids))."""
        have = len(self.hashes)
        if n_chunks > have:
            prev = self.hashes[-1] if have else None
            need = token_ids[: n_chunks * self.chunk_size]
            self.hashes.extend(chain_hashes(self.seed, need, self.chunk_size, have, prev))
        return self.hashes[:n_chunks]
