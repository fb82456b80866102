"""kv_connector_extra_config of the OpenLake connector, and the model identity of the keys."""

import logging
import os
from dataclasses import dataclass, field

from .keys import ModelIdentity

LOG = logging.getLogger("openlake_client.connector")

DEFAULTS = {
    "openlake_nodes": ["127.0.0.1:9400"],  # same order on every host
    "openlake_device": "local",            # local | tcp | ucx | rdma | <RDMA NIC name> (UCX)
    "openlake_namespace": "",              # "" = "vllm"
    "openlake_token": "",                  # KV pool token ("" = $OPENLAKE_KV_TOKEN or none)
    "openlake_tls": False,                 # TLS to the pool's KV port ([kv_tls])
    "openlake_ca_file": "",                # PEM CA of the pool's certificates ("" = system)
    "openlake_server_name": "",            # name the certificates carry ("" = node host)
    "openlake_cert_file": "",              # client certificate (pool with [kv_tls] client_ca)
    "openlake_key_file": "",               # its key ("" = in openlake_cert_file)
    "openlake_replicas": 1,                # copies of each block on the top-R pool nodes
    "openlake_grace_ms": 30000,            # after a member joins, misses retried on the old owner
    "chunk_size": 256,                     # tokens per stored unit (multiple of block_size)
    "compress": "off",                     # off | exans
    "cache_salt": "",                      # tenant isolation, mixed into every key
    "model_id": "",                        # overrides model_config.model in the keys
    "model_revision": "",                  # overrides model_config.revision
    "timeout_ms": 2000,                    # every store call
    "retry_interval_s": 5.0,               # after the library fails to load / connect
    "log_interval_s": 10.0,                # failures logged once per interval
    "verify": True,                        # checksum trailer on every block (detect corruption)
    "save_decode": False,                  # also save chunks completed during decode
    "save_check_exists": True,             # skip puts of chunks already in the pool
    "load_async": False,                   # loads in the background (WAITING_FOR_REMOTE_KVS)
    "async_save": True,                    # save after the step in a thread (delayed frees)
    "layerwise": False,                    # one object per (chunk, layer); loads pipelined
    "staging": "auto",                     # auto: stage what cannot move in place | always
    "staging_mb": 256,                     # host staging slabs (pinned with CUDA), in total
    "cross_layer_blocks": True,            # prefer_cross_layer_blocks (not for hybrid models)
    "gpu_codec": "auto",                   # compress=exans on the KV device: auto | always | off
    "min_hit_tokens": 0,                   # smaller external hits are ignored
    "adaptive_min_hit_tokens": False,      # also ignore hits below the measured break-even
    "recompute_us_per_token": 0.0,         # its recompute cost (0: measured from steps)
    "lookup_async": True,                  # lookups in the background: "ask later" (None)
    "lookup_inline_ms": 2.0,               # scheduler waits at most this per step for them
    "lookup_wait_ms": 0,                   # a request waits this for its lookup (0: timeout_ms)
    "lease_ms": 30000,                     # a reported hit is leased until loaded (0: off)
    "kv_events": None,                     # BlockStored/Removed events (None: vLLM's setting)
    "events_poll_ms": 1000,                # pool's removals polled this often (0: not reported)
    "events_map_keys": 131072,             # keys remembered to map a removal to its block hash
    "metrics_interval_s": 1.0,             # publishing for `python3 -m openlake_client stats`
    "metrics_dir": "",                     # "" = $OPENLAKE_METRICS_DIR or a /tmp dir
}


@dataclass
class ConnectorConfig:
    nodes: list = field(default_factory=lambda: list(DEFAULTS["openlake_nodes"]))
    device: str = "local"
    namespace: str = "vllm"
    token: str = field(default="", repr=False)  # a secret: never in logs
    tls: bool = False
    ca_file: str = ""
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    replicas: int = 1
    grace_ms: int = 30000
    chunk_size: int = 256
    compress: str = "off"
    cache_salt: str = ""
    model_id: str = ""
    model_revision: str = ""
    timeout_ms: int = 2000
    retry_interval_s: float = 5.0
    log_interval_s: float = 10.0
    verify: bool = True
    save_decode: bool = False
    save_check_exists: bool = True
    async_save: bool = False
    layerwise: bool = False
    staging: str = "auto"
    staging_mb: int = 256
    cross_layer_blocks: bool = True
    gpu_codec: str = "auto"
    load_async: bool = False
    min_hit_tokens: int = 0
    adaptive_min_hit_tokens: bool = False
    recompute_us_per_token: float = 0.0
    lookup_async: bool = True
    lookup_inline_ms: float = 2.0
    lookup_wait_ms: int = 0
    lease_ms: int = 30000
    kv_events: bool = False
    events_poll_ms: int = 1000
    events_map_keys: int = 131072
    metrics_interval_s: float = 1.0
    metrics_dir: str = ""
    unknown: tuple = ()

    @classmethod
    def from_extra(cls, extra, block_size, library_has_codec=False, library_has_ucx=False):
        extra = dict(extra or {})
        unknown = sorted(k for k in extra if k not in DEFAULTS)
        if unknown:
            LOG.warning("openlake: unknown kv_connector_extra_config keys ignored: %s",
                        ", ".join(unknown))
        g = lambda k: extra.get(k, DEFAULTS[k])  # noqa: E731
        nodes = g("openlake_nodes")
        if isinstance(nodes, str):
            nodes = [n.strip() for n in nodes.split(",") if n.strip()]
        # ucx, rdma or an RDMA NIC's name (the seeds' "mlx5_ib0"): UCX to pools serving
        # transport = "rdma" (their [rdma] port); a libopenlake without UCX: tcp
        device = str(g("openlake_device") or "local")
        if device not in ("local", "tcp") and not library_has_ucx:
            LOG.warning("openlake: openlake_device %r (RDMA over UCX): this libopenlake was "
                        "built without UCX (libucx-dev), using tcp", device)
            device = "tcp"
        chunk = int(g("chunk_size"))
        if chunk <= 0:
            raise ValueError("chunk_size must be > 0")
        if chunk % block_size:
            new = (chunk + block_size - 1) // block_size * block_size
            LOG.warning("openlake: chunk_size %d is not a multiple of block_size %d, using %d",
                        chunk, block_size, new)
            chunk = new
        compress = str(g("compress") or "off").lower()
        if compress not in ("off", "none", "exans"):
            raise ValueError("compress must be off or exans, not %r" % compress)
        if compress == "exans" and not library_has_codec:
            LOG.warning("openlake: compress=exans: the codec is not in this libopenlake, "
                        "storing blocks uncompressed")
            compress = "off"
        if compress == "none":
            compress = "off"
        return cls(nodes=list(nodes), device=device,
                   namespace=str(g("openlake_namespace") or "vllm"), chunk_size=chunk,
                   token=str(g("openlake_token") or os.environ.get("OPENLAKE_KV_TOKEN", "")),
                   tls=_bool(g("openlake_tls")), ca_file=str(g("openlake_ca_file") or ""),
                   server_name=str(g("openlake_server_name") or ""),
                   cert_file=str(g("openlake_cert_file") or ""),
                   key_file=str(g("openlake_key_file") or ""),
                   replicas=int(g("openlake_replicas")), grace_ms=int(g("openlake_grace_ms")),
                   compress=compress, cache_salt=str(g("cache_salt") or ""),
                   model_id=str(g("model_id") or ""),
                   model_revision=str(g("model_revision") or ""),
                   timeout_ms=int(g("timeout_ms")),
                   retry_interval_s=float(g("retry_interval_s")),
                   log_interval_s=float(g("log_interval_s")), verify=_bool(g("verify")),
                   save_decode=_bool(g("save_decode")),
                   save_check_exists=_bool(g("save_check_exists")),
                   async_save=_bool(g("async_save")),
                   layerwise=_bool(g("layerwise")),
                   staging=_staging(g("staging")), staging_mb=max(1, int(g("staging_mb"))),
                   cross_layer_blocks=_bool(g("cross_layer_blocks")),
                   gpu_codec=_choice("gpu_codec", g("gpu_codec"), ("auto", "always", "off")),
                   load_async=_bool(g("load_async")),
                   min_hit_tokens=int(g("min_hit_tokens")),
                   adaptive_min_hit_tokens=_bool(g("adaptive_min_hit_tokens")),
                   recompute_us_per_token=max(0.0, float(g("recompute_us_per_token"))),
                   lookup_async=_bool(g("lookup_async")),
                   lookup_inline_ms=max(0.0, float(g("lookup_inline_ms"))),
                   lookup_wait_ms=int(g("lookup_wait_ms")) or int(g("timeout_ms")),
                   lease_ms=max(0, int(g("lease_ms"))),
                   kv_events=_bool(g("kv_events")) if g("kv_events") is not None else False,
                   events_poll_ms=max(0, int(g("events_poll_ms"))),
                   events_map_keys=max(1, int(g("events_map_keys"))),
                   metrics_interval_s=float(g("metrics_interval_s")),
                   metrics_dir=str(g("metrics_dir") or ""), unknown=tuple(unknown))


def _choice(name, v, allowed):
    v = str(v or allowed[0]).lower()
    if v in ("false", "0", "no"):
        v = "off"
    if v not in allowed:
        raise ValueError("%s must be one of %s, not %r" % (name, " | ".join(allowed), v))
    return v


def _staging(v):
    v = str(v or "auto").lower()
    if v not in ("auto", "always"):
        raise ValueError("staging must be auto or always, not %r" % v)
    return v


def _bool(v):
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _dtype_name(d):
    return str(d).replace("torch.", "")


def _try(fn, *a, default=None):
    try:
        return fn(*a)
    except Exception:
        return default


@dataclass(frozen=True)
class Geometry:
    block_size: int
    tp_size: int
    pp_size: int
    use_mla: bool
    num_layers: object
    kv_heads: object
    head_size: object
    dtype: str


def geometry(vllm_config):
    """What the scheduler and every worker agree on, read from the config only."""
    mc = vllm_config.model_config
    cc = vllm_config.cache_config
    pc = vllm_config.parallel_config
    cdt = getattr(cc, "cache_dtype", "auto") or "auto"
    dtype = _dtype_name(getattr(mc, "dtype", "auto")) if cdt == "auto" else _dtype_name(cdt)
    return Geometry(block_size=int(cc.block_size),
                    tp_size=int(getattr(pc, "tensor_parallel_size", 1) or 1),
                    pp_size=int(getattr(pc, "pipeline_parallel_size", 1) or 1),
                    use_mla=bool(getattr(mc, "use_mla", False)),
                    num_layers=_try(getattr(mc, "get_num_layers", lambda p: None), pc),
                    kv_heads=_try(getattr(mc, "get_num_kv_heads", lambda p: None), pc),
                    head_size=_try(getattr(mc, "get_head_size", lambda: None)),
                    dtype=dtype)


def identity(vllm_config, cfg, geo):
    mc = vllm_config.model_config
    model = cfg.model_id or str(getattr(mc, "model", "") or "")
    rev = cfg.model_revision or str(getattr(mc, "revision", "") or "")
    extra = (("kv_heads", geo.kv_heads), ("head_size", geo.head_size),
             ("num_layers", geo.num_layers), ("pp_size", geo.pp_size),
             ("compress", cfg.compress), ("format", "olk1"))
    return ModelIdentity(model=model, revision=rev, dtype=geo.dtype,
                         layout="mla" if geo.use_mla else "kv", block_size=geo.block_size,
                         chunk_size=cfg.chunk_size, tp_size=geo.tp_size, extra=extra)


def key_ranks(geo):
    """Rank indices whose keys must all exist for a hit (MLA: one copy per PP stage)."""
    tp = 1 if geo.use_mla else geo.tp_size
    return [pp * tp + r for pp in range(geo.pp_size) for r in range(tp)]


def worker_rank(vllm_config, geo):
    """(tp_rank, pp_rank) of this worker process."""
    tp = pp = None
    try:
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank

        tp = get_tensor_model_parallel_rank()
        pp = get_pp_group().rank_in_group
    except Exception:
        pc = vllm_config.parallel_config
        rank = int(getattr(pc, "rank", 0) or 0)
        tp, pp = rank % geo.tp_size, rank // geo.tp_size
    return int(tp), int(pp)
