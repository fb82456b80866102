"""vLLM's connector base classes when vLLM is installed, else local stand-ins with the same
names and base semantics (vllm/distributed/kv_transfer/kv_connector/v1/base.py, metrics.py).
Nothing here imports vLLM at package import time; `load()` does, once."""

import enum
import inspect
from dataclasses import dataclass, field


class _LocalRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class _LocalMetadata:
    """Marker base of the per-step metadata (must be picklable)."""


class _LocalBase:
    """Same constructor and default methods as vLLM's KVConnectorBase_V1."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._connector_metadata = None
        self._vllm_config = vllm_config
        if getattr(vllm_config, "kv_transfer_config", None) is None:
            raise ValueError("kv_transfer_config must be set for a KV connector")
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._kv_cache_config = kv_cache_config
        self._role = role

    @property
    def role(self):
        return self._role

    @property
    def prefer_cross_layer_blocks(self):
        return False

    def bind_connector_metadata(self, connector_metadata):
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self):
        self._connector_metadata = None

    def _get_connector_metadata(self):
        assert self._connector_metadata is not None
        return self._connector_metadata

    def has_connector_metadata(self):
        return self._connector_metadata is not None

    def register_kv_caches(self, kv_caches):
        return None

    def handle_preemptions(self, *args, **kwargs):
        return None

    def get_finished(self, finished_req_ids):
        return None, None

    def get_block_ids_with_load_errors(self):
        return set()

    def update_connector_output(self, connector_output):
        return None

    def request_finished(self, request, block_ids):
        return False, None

    def take_events(self):
        return ()

    def get_kv_connector_stats(self):
        return None

    def shutdown(self):
        return None

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config):
        return None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config):
        return False


@dataclass
class _LocalStats:
    """Same surface as vllm.distributed.kv_transfer.kv_connector.v1.metrics.KVConnectorStats."""

    data: dict = field(default_factory=dict)


_cache = None


def load():
    """(Base, Metadata, Role, StatsBase, have_vllm)"""
    global _cache
    if _cache is not None:
        return _cache
    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                                      KVConnectorMetadata,
                                                                      KVConnectorRole)
        try:
            from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorStats
        except ImportError:
            KVConnectorStats = _LocalStats
        _cache = (KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole, KVConnectorStats,
                  True)
    except Exception:  # not installed, or an incompatible build: stay importable
        _cache = (_LocalBase, _LocalMetadata, _LocalRole, _LocalStats, False)
    return _cache


def base_takes_kv_cache_config(base):
    try:
        return "kv_cache_config" in inspect.signature(base.__init__).parameters
    except (TypeError, ValueError):
        return False


def is_scheduler(role):
    name = getattr(role, "name", None)
    if name is not None:
        return name == "SCHEDULER"
    return role == 0


def prom_metrics(vllm_config, metric_types, labelnames, per_engine_labelvalues):
    """The connector's KVConnectorPromMetrics for `build_prom_metrics`: a subclass of vLLM's
    base where it has one (newer vLLM), else a plain object with the same `observe`. None
    when `metric_types` holds no Counter and Histogram classes."""
    from .metrics import PromAdapter

    by_name = {getattr(k, "__name__", str(k)): v for k, v in metric_types.items()}
    counter, histogram = by_name.get("Counter"), by_name.get("Histogram")
    if counter is None or histogram is None:
        return None
    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.metrics import \
            KVConnectorPromMetrics as base
    except Exception:
        base = object

    class OpenLakePromMetrics(base):
        def __init__(self):
            if base is not object:
                base.__init__(self, vllm_config, metric_types, labelnames,
                              per_engine_labelvalues)
            self._adapter = PromAdapter(counter, histogram, labelnames, per_engine_labelvalues)

        def observe(self, transfer_stats_data, engine_idx=0):
            self._adapter.observe(transfer_stats_data or {}, engine_idx)

    return OpenLakePromMetrics()


# ---- newer API pieces, each vLLM's class when it has one, else a local one with its fields

@dataclass
class _LocalTransferResults:
    """vLLM's KVConnectorTransferResults: a failed receive is also in finished_recving (the
    request must leave WAITING_FOR_REMOTE_KVS); failed_recving says which failed."""

    finished_sending: set = field(default_factory=set)
    finished_recving: set = field(default_factory=set)
    failed_recving: set = field(default_factory=set)


class _LocalSupportsHMA:
    """vLLM's SupportsHMA marker: the connector handles several KV cache groups."""

    def request_finished_all_groups(self, request, block_ids):
        raise NotImplementedError


@dataclass
class _LocalBlockStored:  # vllm.distributed.kv_events.BlockStored
    block_hashes: list
    parent_block_hash: object
    token_ids: list
    block_size: int
    lora_id: object = None
    medium: object = None
    lora_name: object = None


@dataclass
class _LocalBlockRemoved:  # vllm.distributed.kv_events.BlockRemoved
    block_hashes: list
    medium: object = None


@dataclass
class _LocalAllBlocksCleared:  # vllm.distributed.kv_events.AllBlocksCleared
    pass


def _from_vllm(module, name, local):
    try:
        mod = __import__(module, fromlist=[name])
        return getattr(mod, name)
    except Exception:
        return local


def transfer_results_class():
    return _from_vllm("vllm.distributed.kv_transfer.kv_connector.v1.base",
                      "KVConnectorTransferResults", _LocalTransferResults)


def supports_hma_class():
    return _from_vllm("vllm.distributed.kv_transfer.kv_connector.v1.base", "SupportsHMA",
                      _LocalSupportsHMA)


def make_transfer_results(sending, recving, failed):
    cls = transfer_results_class()
    return cls(finished_sending=set(sending or ()), finished_recving=set(recving or ()),
               failed_recving=set(failed or ()))


def kv_event(kind, **fields):
    """A BlockStored / BlockRemoved / AllBlocksCleared of vLLM (msgspec structs) or ours;
    fields a given vLLM version does not have are left out."""
    local = {"BlockStored": _LocalBlockStored, "BlockRemoved": _LocalBlockRemoved,
             "AllBlocksCleared": _LocalAllBlocksCleared}[kind]
    cls = _from_vllm("vllm.distributed.kv_events", kind, local)
    names = getattr(cls, "__struct_fields__", None)
    if names is None:
        names = getattr(cls, "__dataclass_fields__", {}).keys()
    return cls(**{k: v for k, v in fields.items() if k in names})
