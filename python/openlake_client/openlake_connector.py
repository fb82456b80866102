"""OpenLakeConnector: vLLM V1 KV connector that offloads and reuses KV cache through the pool.

    vllm serve <model> --kv-transfer-config '{"kv_connector":"OpenLakeConnector",
      "kv_connector_module_path":"openlake_client.openlake_connector","kv_role":"kv_both",
      "kv_connector_extra_config":{"openlake_nodes":["127.0.0.1:9400"],
                                   "openlake_device":"local"}}'

The base class is vLLM's KVConnectorBase_V1 when vLLM is importable, else a local class with
the same methods (so this module, its tests and its stand-in engine run without vLLM).
Keys are our own chained SHA-256 (see keys.py): no PYTHONHASHSEED needed. A store that is
down or slow never stops vLLM: lookups miss, saves are skipped, failed loads are reported
through get_block_ids_with_load_errors and recomputed."""

import logging

from . import _lib, _vllm_compat
from .connector_config import ConnectorConfig, geometry, identity
from .connector_groups import kv_groups
from .connector_sched import LoadSpec, SaveSpec, SchedulerSide, StepPlan  # noqa: F401
from .connector_worker import WorkerSide
from .metrics import Publisher, RateLimitedLog, Recorder, empty_data, merge_into, reduce_data
from .store import Store

LOG = logging.getLogger("openlake_client.connector")

_Base, _Meta, KVConnectorRole, _StatsBase, HAVE_VLLM = _vllm_compat.load()
KVConnectorBase_V1 = _Base
_SupportsHMA = _vllm_compat.supports_hma_class()


class OpenLakeConnectorMetadata(_Meta):
    """Per-step plan from the scheduler to every worker (picklable, no scheduler objects)."""

    def __init__(self, plan):
        self.loads = plan.loads
        self.saves = plan.saves
        self.finished = plan.finished
        self.preempted = plan.preempted
        self.flush = plan.flush

    def __repr__(self):
        return "OpenLakeConnectorMetadata(loads=%d, saves=%d)" % (len(self.loads),
                                                                  len(self.saves))


class OpenLakeStats(_StatsBase):
    """Connector stats for vLLM's logging (`reduce`) and aggregation across workers."""

    def __init__(self, data=None):
        try:
            super().__init__(data=data if data is not None else empty_data())
        except TypeError:
            super().__init__()
            self.data = data if data is not None else empty_data()

    def reset(self):
        self.data = empty_data()

    def aggregate(self, other):
        if other is not None and getattr(other, "data", None):
            merge_into(self.data, other.data)
        return self

    def reduce(self):
        return reduce_data(self.data)

    def is_empty(self):
        return not any(v for k, v in self.data.items() if not isinstance(v, list)) and \
            not any(sum(v) for v in self.data.values() if isinstance(v, list))


class OpenLakeKVEvents:
    """The workers' KV events of one step (get_kv_connector_kv_cache_events), the same surface
    as vLLM's KVConnectorKVEvents: aggregated across workers, read by the scheduler-side
    connector in update_connector_output and published through take_events. Picklable."""

    def __init__(self, events=None, num_workers=1):
        self.events = list(events or [])
        self.num_workers = num_workers

    def add_events(self, events):
        self.events.extend(events)

    def aggregate(self, other):
        if other is not None:
            self.events.extend(other.get_all_events())
            self.num_workers += other.get_number_of_workers()
        return self

    def increment_workers(self, count=1):
        self.num_workers += count

    def get_number_of_workers(self):
        return self.num_workers

    def get_all_events(self):
        return list(self.events)

    def clear_events(self):
        self.events = []

    def __repr__(self):
        return "OpenLakeKVEvents(%d events)" % len(self.events)


def _extra_config(vllm_config):
    ktc = vllm_config.kv_transfer_config
    extra = getattr(ktc, "kv_connector_extra_config", None)
    return dict(extra or {})


def _num_blocks(vllm_config, kv_cache_config):
    n = getattr(kv_cache_config, "num_blocks", None)
    if n:
        return int(n)
    n = getattr(vllm_config.cache_config, "num_gpu_blocks", None)
    return int(n) if n else None


class OpenLakeConnector(_Base, _SupportsHMA):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        if _vllm_compat.base_takes_kv_cache_config(_Base):
            super().__init__(vllm_config, role, kv_cache_config)
        else:
            super().__init__(vllm_config, role)
        self._kv_cache_config_ol = kv_cache_config
        geo = geometry(vllm_config)
        cfg = ConnectorConfig.from_extra(_extra_config(vllm_config), geo.block_size,
                                         library_has_codec=_lib.has_codec(),
                                         library_has_ucx=_lib.has_ucx())
        if _extra_config(vllm_config).get("kv_events") is None:  # follow vLLM's setting
            kec = getattr(vllm_config, "kv_events_config", None)
            cfg.kv_events = bool(getattr(kec, "enable_kv_cache_events", False))
        self.ol_config, self.ol_geometry = cfg, geo
        self.ol_identity = identity(vllm_config, cfg, geo)
        self._warn = RateLimitedLog(LOG, cfg.log_interval_s)
        self._rec = Recorder()
        self._store = Store(cfg, self._warn)
        groups = kv_groups(kv_cache_config)  # hybrid models: several KV cache groups
        self._groups_ol = groups
        if cfg.layerwise and (groups or not geo.num_layers):
            LOG.warning("openlake: layerwise off: %s", "a hybrid model (several KV cache "
                        "groups)" if groups else "the model config gives no layer count")
            cfg.layerwise = False
        is_sched = _vllm_compat.is_scheduler(role)
        ktc = vllm_config.kv_transfer_config
        save = getattr(ktc, "kv_role", "kv_both") != "kv_consumer"
        if is_sched:
            self._sched = SchedulerSide(cfg, self.ol_identity, geo, self._store, self._rec,
                                        self._warn, save_enabled=save, groups=groups)
            self._worker = None
            tag = "scheduler"
        else:
            self._sched = None
            self._worker = WorkerSide(cfg, self.ol_identity, geo, vllm_config,
                                      _num_blocks(vllm_config, kv_cache_config), self._store,
                                      self._rec, self._warn, groups)
            tag = "worker%d" % self._worker.tp_rank
        self._pub = Publisher(tag, cfg.metrics_interval_s, cfg.metrics_dir or None)

    @property
    def prefer_cross_layer_blocks(self):
        """One KV tensor for all layers (register_cross_layers_kv_cache): a staged chunk is
        then one gather and one copy for every layer. Not for hybrid models (KV cache groups
        of different shapes); cross_layer_blocks = false turns it off."""
        return bool(self.ol_config.cross_layer_blocks and not self._groups_ol)

    @property
    def requires_kv_delivery(self):
        return False  # best effort: a dropped save is a future miss, never an error

    # ------------------------------------------------------------ scheduler side
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._sched.lookup(request, num_computed_tokens)

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._sched.after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output):
        meta = OpenLakeConnectorMetadata(self._sched.build(scheduler_output))
        self._pub.maybe_write(self._rec.total)
        return meta

    def request_finished(self, request, block_ids):
        return self._sched.finished(request, block_ids)

    def request_finished_all_groups(self, request, block_ids):
        """SupportsHMA: block_ids has one list per KV cache group."""
        return self._sched.finished(request, block_ids)

    def update_connector_output(self, connector_output):
        self._sched.connector_output(connector_output)

    def take_events(self):
        """BlockStored for every chunk the workers stored (or found stored), BlockRemoved
        for every chunk a load found gone and for every chunk the workers stored or loaded
        that the pool removed itself since (evicted with no NVMe copy, NVMe space reclaimed,
        the namespace quota, a DELETE: the pool's EVENTS op, polled every events_poll_ms by
        the rank 0 worker, connector_removals; any TP rank's copy removed removes the chunk),
        AllBlocksCleared after reset_cache. A pool too
        old for EVENTS is not polled (its removals go unreported), nor with events_poll_ms 0;
        removals the pool's ring dropped before they were read are counted (events_lost)."""
        return self._sched.take_events() if self._sched is not None else ()

    def reset_cache(self):
        """Invalidate everything this model's engines stored (O(1): a new key epoch)."""
        return self._sched.reset() if self._sched is not None else None

    # ------------------------------------------------------------ worker side
    def register_kv_caches(self, kv_caches):
        self._worker.register(kv_caches)

    def register_cross_layers_kv_cache(self, kv_cache, attn_backend=None):
        """vLLM's cross-layer cache (prefer_cross_layer_blocks): one tensor
        [num_blocks, layers, ...]; stored chunks are the same bytes under the same keys as
        with per-layer tensors."""
        tensors = getattr(self._kv_cache_config_ol, "kv_cache_tensors", None) or ()
        shared = [list(getattr(t, "shared_by", ()) or ()) for t in tensors]
        self._worker.register_cross(kv_cache, attn_backend, shared if all(shared) else None)

    def start_load_kv(self, forward_context, **kwargs):
        if self.has_connector_metadata():
            self._worker.load(self._get_connector_metadata())

    def wait_for_layer_load(self, layer_name):
        """layerwise: returns once this layer's blocks are loaded (the later layers are still
        on their way); else a no-op (start_load_kv loaded every layer)."""
        if self._worker is not None:
            self._worker.wait_layer(layer_name)

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        """layerwise: start saving this layer's part of the step's chunks now (the model goes
        on with the next layer); else a no-op (wait_for_save saves every layer)."""
        if self._worker is not None and self.has_connector_metadata():
            self._worker.save_layer(self._get_connector_metadata(), layer_name)

    def wait_for_save(self):
        if self.has_connector_metadata():
            self._worker.save(self._get_connector_metadata())
        self._pub.maybe_write(self._rec.total)

    def get_finished(self, finished_req_ids):
        return self._worker.finished(finished_req_ids)

    def get_transfer_results(self, finished_req_ids):
        """Newest mixin: get_finished plus failed_recving (failed async loads, which are also
        in finished_recving so that they leave WAITING_FOR_REMOTE_KVS)."""
        send, recv, failed = self._worker.transfer_results(finished_req_ids)
        return _vllm_compat.make_transfer_results(send, recv, failed)

    def get_kv_connector_kv_cache_events(self):
        evs = self._worker.take_events() if self._worker is not None else None
        return OpenLakeKVEvents(evs) if evs else None

    def get_block_ids_with_load_errors(self):
        return self._worker.take_invalid() if self._worker is not None else set()

    def handle_preemptions(self, preempted=None, *args, **kwargs):
        """Preempted requests' blocks may be reused in this step: finish queued saves. The
        argument is the preempted ids (middle era) or this step's metadata (newest mixin, which
        calls it every step)."""
        if self._worker is None:
            return
        if isinstance(preempted, OpenLakeConnectorMetadata):
            if not (preempted.preempted or preempted.flush):
                return
        elif preempted is not None and not preempted:
            return
        self._worker.flush()

    # ------------------------------------------------------------ both
    def get_kv_connector_stats(self):
        d = self._rec.take()
        s = OpenLakeStats(d)
        return None if s.is_empty() else s

    @classmethod
    def build_kv_connector_stats(cls, data=None):
        return OpenLakeStats(data)

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        """Prometheus counters and latency histograms (`vllm:openlake_*`) on vLLM's /metrics."""
        return _vllm_compat.prom_metrics(vllm_config, metric_types, labelnames,
                                         per_engine_labelvalues)

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config):
        return None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config):
        """layerwise needs wait_for_layer_load / save_kv_layer called for every layer of
        every step, which full CUDA graphs skip."""
        from .connector_config import DEFAULTS, _bool

        v = (extra_config or {}).get("layerwise", DEFAULTS["layerwise"])
        return _bool(v)

    def metrics_totals(self):
        return reduce_data(self._rec.total)

    def shutdown(self):
        if self._sched is not None:
            self._sched.close()
        if self._worker is not None:
            self._worker.close()
        self._pub.maybe_write(self._rec.total, force=True)
        self._pub.remove()
        self._store.close()
