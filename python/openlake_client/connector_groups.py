"""KV cache groups of a hybrid model (vLLM's hybrid memory allocator, SupportsHMA).

vLLM gives a hybrid model one KV cache group per kind of layer (kv_cache_config.
kv_cache_groups: layer names + a spec), each with its own block ids. What the pool can give
back per kind:
  full     full attention (FullAttentionSpec, MLAAttentionSpec): every block of the prefix.
  window   sliding window (SlidingWindowSpec): only the blocks of the last `window` tokens
           of the prefix matter; older ones are null blocks in vLLM's table, never saved or
           loaded.
  state    Mamba / linear attention (MambaSpec...) or a kind we do not know: a running state,
           not blocks of tokens; it cannot be rebuilt from stored blocks, so a model with such
           a group gets no external hit (and nothing is saved for it) until it can."""

from dataclasses import dataclass

FULL, WINDOW, STATE = "full", "window", "state"


@dataclass
class Group:
    kind: str
    layer_names: tuple
    block_size: int
    window: int = 0  # tokens, WINDOW only


def _kind(spec):
    name = type(spec).__name__
    if "Mamba" in name or "Linear" in name or "State" in name:
        return STATE, 0
    w = getattr(spec, "sliding_window", None)
    if w:
        return WINDOW, int(w)
    if "ChunkedLocal" in name or "Cross" in name:
        return STATE, 0  # attention over other than the prefix: not restorable as blocks
    if "FullAttention" in name or "MLAAttention" in name or name.endswith("AttentionSpec"):
        return FULL, 0
    return STATE, 0


def kv_groups(kv_cache_config):
    """The groups of kv_cache_config when it has more than one, else None (the single-group
    path, where keys and plans are as before)."""
    groups = getattr(kv_cache_config, "kv_cache_groups", None) or []
    if len(groups) <= 1:
        return None
    out = []
    for g in groups:
        spec = g.kv_cache_spec
        kind, w = _kind(spec)
        out.append(Group(kind, tuple(g.layer_names), int(getattr(spec, "block_size", 0)), w))
    return out


def unsupported(groups, block_size):
    """Why the pool cannot serve this hybrid model ("" = it can)."""
    if any(g.kind == STATE for g in groups):
        return ("a KV cache group holds a state (Mamba / linear attention) that stored blocks "
                "cannot restore")
    if any(g.block_size and g.block_size != block_size for g in groups):
        return "KV cache groups with different block sizes"
    return ""


def window_first_chunk(g, prefix_tokens, chunk_size):
    """The first chunk of group g a prefix of prefix_tokens needs (0 for full attention)."""
    if g.kind != WINDOW:
        return 0
    return max(0, prefix_tokens - g.window) // chunk_size
