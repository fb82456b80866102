"""One engine = a scheduler-role connector + one worker-role connector per TP rank, each with
its own KV tensors, like a vLLM instance with tensor parallelism."""

import functools
import pickle
import time

from .config import with_rank
from .scheduler import KVConnectorOutput, ModelRunnerOutput, Scheduler
from .worker import Worker


def _connector_class():
    from openlake_client.openlake_connector import OpenLakeConnector

    return OpenLakeConnector


def _prom(cls, vllm_config):
    """vLLM's KVConnectorProm: the connector class's build_prom_metrics with prometheus_client's
    classes, bound here to a registry of the engine's own. (None, None) without the library."""
    try:
        import prometheus_client as pc
    except ImportError:
        return None, None
    reg = pc.CollectorRegistry()
    types = {c: functools.partial(c, registry=reg) for c in (pc.Gauge, pc.Counter, pc.Histogram)}
    for c, f in types.items():
        f.__name__ = c.__name__
    labels = {0: [vllm_config.model_config.model, "0"]}
    return cls.build_prom_metrics(vllm_config, types, ["model_name", "engine"], labels), reg


class Engine:
    def __init__(self, vllm_config, make_worker_parts, num_blocks, connector_cls=None,
                 api="newest", cudagraph="none", cross_layer=False):
        """make_worker_parts(rank) -> (kv_caches, model); api: the worker's call order
        ("newest" or "classic"), cudagraph: "none" or "full" (see Worker); cross_layer:
        one KV tensor for every layer when the connector prefers it."""
        from openlake_client.openlake_connector import KVConnectorRole

        cls = connector_cls or _connector_class()
        self.cfg = vllm_config
        self.bs = vllm_config.cache_config.block_size
        self.sched_conn = cls(vllm_config, KVConnectorRole.SCHEDULER, None)
        self.scheduler = Scheduler(vllm_config, self.sched_conn, num_blocks)
        self.workers = []
        for rank in range(vllm_config.parallel_config.tensor_parallel_size):
            wcfg = with_rank(vllm_config, rank)
            conn = cls(wcfg, KVConnectorRole.WORKER, None)
            kv, model = make_worker_parts(rank)
            self.workers.append(Worker(wcfg, conn, kv, model, self.bs, api, cudagraph,
                                       cross_layer))
        self.steps = 0
        self.stats = []
        self.prom, self.prom_registry = _prom(cls, vllm_config)
        self.invalid_seen = set()
        self.schedule_log = []

    def add(self, req):
        self.scheduler.add_request(req)

    def step(self, before_execute=None):
        so = self.scheduler.schedule()
        if before_execute is not None:
            before_execute(so)
        self.schedule_log.append(so)
        blob = pickle.dumps(so)  # the worker processes get a copy
        outs = [w.execute_model(blob) for w in self.workers]
        sampled = outs[0][0]
        kvo = self._aggregate([o[1] for o in outs])
        self.invalid_seen |= kvo.invalid_block_ids
        before = {rid: len(r.output_token_ids) for rid, r in self.scheduler.requests.items()}
        self.scheduler.update_from_output(so, ModelRunnerOutput(sampled, kvo))
        for rid, tok in sampled.items():
            r = self.scheduler.requests[rid]
            if len(r.output_token_ids) > before.get(rid, 0):
                for w in self.workers:
                    w.note_sampled(rid, tok)
        self.steps += 1
        return so

    def _aggregate(self, kvos):
        """KVOutputAggregator: finished when every rank reported it; errors are unioned."""
        out = KVConnectorOutput(invalid_block_ids=set())
        n = len(kvos)
        fails = set()
        for k in kvos:  # a receive failed if it failed on any rank
            fails |= set(k.failed_recving or ())
        out.failed_recving = fails or None
        for field in ("finished_sending", "finished_recving"):
            counts = {}
            for k in kvos:
                for rid in getattr(k, field) or ():
                    counts[rid] = counts.get(rid, 0) + 1
            self._pending = getattr(self, "_pending", {})
            done = set()
            for rid, c in counts.items():
                key = (field, rid)
                self._pending[key] = self._pending.get(key, 0) + c
                if self._pending[key] >= n:
                    done.add(rid)
                    del self._pending[key]
            setattr(out, field, done or None)
        evs = [k.kv_cache_events for k in kvos if k.kv_cache_events is not None]
        if evs:  # KVOutputAggregator: one container for the step
            out.kv_cache_events = evs[0]
            for e in evs[1:]:
                out.kv_cache_events.aggregate(e)
        step = []
        for k in kvos:
            out.invalid_block_ids |= set(k.invalid_block_ids or ())
            if k.kv_connector_stats is not None:
                step.append(k.kv_connector_stats)
        if step:  # KVOutputAggregator: the workers' stats, aggregated, reach the scheduler
            out.kv_connector_stats = type(step[0])(None)
            for x in step:
                out.kv_connector_stats.aggregate(x)
        s = self.sched_conn.get_kv_connector_stats()
        if s is not None:
            step.append(s)
        self.stats += step
        if step and self.prom is not None:  # the logger observes the step's aggregate data
            agg = type(step[0])(None)
            for x in step:
                agg.aggregate(x)
            self.prom.observe(agg.data, 0)
        return out

    def run(self, timeout=300.0):
        """Step until no request is left, bounded in time (not in steps: a step that waits on
        the pool or on transfers schedules nothing, and how many of them pass depends on the
        machine's load). Such an idle step sleeps a moment, as vLLM's loop blocks on its
        queues instead of spinning."""
        deadline = time.monotonic() + timeout
        while self.scheduler.has_work():
            so = self.step()
            if not so.total_num_scheduled_tokens:
                time.sleep(0.002)
            assert time.monotonic() < deadline, "engine did not finish in %.0f s" % timeout
        # one more step delivers finished_req_ids to the connectors (cleanup)
        self.step()
        return self

    def merged_stats(self):
        from openlake_client.openlake_connector import OpenLakeStats

        s = OpenLakeStats()
        for x in self.stats:
            s.aggregate(x)
        return s.reduce()

    def shutdown(self):
        self.sched_conn.shutdown()
        for w in self.workers:
            w.c.shutdown()
