"""Block keys: chained SHA-256 over token ids and everything that changes the bytes.

A key never depends on PYTHONHASHSEED, the process or the host: it is a pure function of the
model identity (model id, revision, dtype, KV layout, block size, chunk size, TP size), the
optional cache salt, the token ids of the prefix up to and including the chunk, and the TP rank.

    seed     = SHA256("openlake-kv/1" || canonical identity || salt)
    chain[0] = SHA256(seed || le32(n) || le32 tokens of chunk 0)
    chain[i] = SHA256(chain[i-1] || le32(n) || le32 tokens of chunk i)
    key(i, rank) = SHA256(chain[i] || "rank" || le32(rank))

Only whole chunks are hashed; the same prefix gives the same chain on every host.

Everything else that changes the bytes or the meaning of a block goes in too, so two requests
that differ in it never share a key:
- per request, into the seed: the LoRA adapter's name and the reset epoch (see
  connector_sched: reset_cache), each only when set, so plain keys are unchanged;
- per chunk, after its tokens: what `request_extras()` finds inside the chunk (multimodal
  inputs: identifier, offset in the chunk and length of each placeholder that overlaps it;
  prompt embeddings: SHA-256 of the chunk's rows), only when there is any.
A request that carries something that cannot be keyed safely (a multimodal input without an
identifier, prompt embeddings that are not a tensor or array) is never looked up or saved.
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


def seed_hash(identity, salt=None, lora=None, epoch=0):
    """The root of the chain: identity digest plus an optional tenant salt, LoRA adapter name
    and reset epoch."""
    h = hashlib.sha256(_DOMAIN + b"seed\0")
    h.update(identity.digest())
    if salt:
        h.update(b"salt\0")
        h.update(_enc_str(salt))
    if lora:
        h.update(b"lora\0")
        h.update(_enc_str(lora))
    if epoch:
        h.update(b"epoch\0")
        h.update(struct.pack("<Q", int(epoch)))
    return h.digest()


class Unkeyable(Exception):
    """The request carries something the keys cannot cover: no hit, no save."""


def lora_name(request):
    """The LoRA adapter a request runs with ("" for none), as vLLM's own block hashes use."""
    lr = getattr(request, "lora_request", None)
    if lr is None:
        return ""
    for attr in ("lora_name", "name"):
        v = getattr(lr, attr, None)
        if v:
            return str(v)
    v = getattr(lr, "lora_int_id", None)
    if v is not None:
        return "id:%d" % int(v)
    raise Unkeyable("LoRA request without a name")


def _mm_items(request):
    """[(identifier, offset, length)] of a request's multimodal placeholders."""
    out = []
    feats = getattr(request, "mm_features", None)
    if feats:
        for f in feats:
            ident = getattr(f, "identifier", None) or getattr(f, "mm_hash", None)
            pos = getattr(f, "mm_position", None)
            if not ident or pos is None:
                raise Unkeyable("multimodal input without an identifier or position")
            out.append((str(ident), int(pos.offset), int(pos.length)))
        return out
    hashes = getattr(request, "mm_hashes", None)
    positions = getattr(request, "mm_positions", None)
    if hashes or positions:
        if not hashes or not positions or len(hashes) != len(positions):
            raise Unkeyable("multimodal inputs without matching hashes")
        for hsh, pos in zip(hashes, positions):
            out.append((str(hsh), int(pos.offset), int(pos.length)))
    return out


def _rows_bytes(t, start, end):
    """The bytes of rows [start, end) of a tensor or array (any dtype, on any device)."""
    if hasattr(t, "detach") and hasattr(t, "view"):  # torch.Tensor
        import torch

        r = t[start:end].detach().to("cpu").contiguous()
        return r.reshape(-1).view(torch.uint8).numpy().tobytes()
    if hasattr(t, "tobytes") and hasattr(t, "__getitem__"):  # numpy
        return t[start:end].tobytes()
    raise Unkeyable("prompt embeddings of type %s" % type(t).__name__)


def request_extras(request, chunk_size):
    """A function chunk index -> bytes (b"" when the chunk has nothing but tokens) for a
    request, or None when it has no extras at all. Raises Unkeyable."""
    mm = _mm_items(request)
    embeds = getattr(request, "prompt_embeds", None)
    if not mm and embeds is None:
        return None
    if embeds is not None:
        _rows_bytes(embeds, 0, 0)  # unkeyable types fail now, not in the middle of a step

    def extra(i):
        start, end = i * chunk_size, (i + 1) * chunk_size
        parts = []
        for ident, off, length in mm:
            if off < end and off + length > start:
                parts.append(b"mm\0" + _enc_str(ident) +
                             struct.pack("<qI", off - start, length))
        if embeds is not None and start < len(embeds):
            parts.append(b"embeds\0" + hashlib.sha256(
                _rows_bytes(embeds, start, min(end, len(embeds)))).digest())
        return b"".join(parts)

    return extra


def _tokens_bytes(tokens):
    try:
        return struct.pack("<%dI" % len(tokens), *tokens)
    except struct.error as e:
        raise ValueError("token ids must be integers in [0, 2^32): %s" % e) from None


def chain_hashes(seed, token_ids, chunk_size, start=0, prev=None, extra=None):
    """Chained hashes of the whole chunks of token_ids, from chunk `start` on.

    prev is chain[start-1] (or None with start == 0); extra (see request_extras) gives the
    bytes of chunk i beside its tokens. Returns a list of 32-byte digests."""
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
        x = extra(i) if extra is not None else b""
        if x:
            h.update(b"extra\0" + struct.pack("<I", len(x)) + x)
        h_prev = h.digest()
        out.append(h_prev)
    return out


def rank_key(chain_hash, rank):
    """The store key of one chunk for one TP rank."""
    return hashlib.sha256(chain_hash + b"rank" + struct.pack("<I", int(rank))).digest()


def rank_keys(chain_hashes, rank):
    """[rank_key(h, rank) for h in chain_hashes], for a batch (one suffix, no calls per key)."""
    tail, sha = b"rank" + struct.pack("<I", int(rank)), hashlib.sha256
    return [sha(h + tail).digest() for h in chain_hashes]


def group_hash(chain_hash, group):
    """The chain hash of a chunk in KV cache group `group` (hybrid models keep one block
    image per group; group 0 keeps the plain hash, so single-group keys never change)."""
    if not group:
        return chain_hash
    return hashlib.sha256(b"openlake-kv/1\0group\0" + chain_hash +
                          struct.pack("<I", int(group))).digest()[:len(chain_hash)]


def layer_hash(chain_hash, layer):
    """The chain hash of one layer of a chunk: layer-wise saves store one pool object per
    (chunk, layer), so that a load can hand layer i to the model before layer i+1 arrives."""
    return hashlib.sha256(b"openlake-kv/1\0layer\0" + chain_hash +
                          struct.pack("<I", int(layer))).digest()[:len(chain_hash)]


class ChainCache:
    """Incremental chain hashes for one request (tokens only grow, chunks never change)."""

    __slots__ = ("seed", "chunk_size", "hashes", "extra")

    def __init__(self, seed, chunk_size, extra=None):
        self.seed = seed
        self.chunk_size = chunk_size
        self.hashes = []
        self.extra = extra

    def upto(self, token_ids, n_chunks):
        """chain hashes of the first n_chunks chunks (n_chunks*chunk_size <= len(token_ids))."""
        have = len(self.hashes)
        if n_chunks > have:
            prev = self.hashes[-1] if have else None
            need = token_ids[: n_chunks * self.chunk_size]
            self.hashes.extend(chain_hashes(self.seed, need, self.chunk_size, have, prev,
                                            self.extra))
        return self.hashes[:n_chunks]
