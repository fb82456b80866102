"""Hybrid-model stand-in: vLLM's hybrid memory allocator (HMA) around a SupportsHMA connector.

A model with several KV cache groups (kv_cache_config.kv_cache_groups): full attention, sliding
window, Mamba. Each group has its own block ids from one shared pool (block 0 is the null
block). Reduced from vLLM's KVCacheCoordinator / SlidingWindowManager / MambaManager:
  full     one block per block_size tokens;
  window   the same, but blocks whose tokens all lie before the window of the next token to
           compute are null (freed at each allocation, and padded null for a prefix that was
           loaded or computed before the request got blocks);
  mamba    one state block per request.
Call order as in Scheduler.schedule / the newest model-runner mixin: lookup ->
allocate -> update_state_after_alloc -> build_connector_meta; worker: handle_preemptions ->
bind -> start_load_kv -> per layer wait_for_layer_load / write / save_kv_layer ->
wait_for_save -> get_transfer_results -> errors -> events -> clear; update_connector_output,
request_finished_all_groups (once per finished request), take_events. No preemption, no local
prefix cache, whole prompts in one step (the budget is the prompt)."""

import hashlib
import pickle
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from .scheduler import KVConnectorOutput, NewRequestData, CachedRequestData, SchedulerOutput
from .worker import read_kv, slots, write_kv


@dataclass
class FullAttentionSpec:
    block_size: int


@dataclass
class SlidingWindowSpec:
    block_size: int
    sliding_window: int


@dataclass
class MambaSpec:
    block_size: int


@dataclass
class KVCacheGroupSpec:
    layer_names: list
    kv_cache_spec: object


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_groups: list
    kv_cache_tensors: list = field(default_factory=list)


def kind(spec):
    return {"FullAttentionSpec": "full", "SlidingWindowSpec": "window",
            "MambaSpec": "mamba"}[type(spec).__name__]


class HybridBlocks:  # KVCacheBlocks of several groups
    def __init__(self, ids):
        self.ids = ids

    def get_block_ids(self):
        return tuple(list(x) for x in self.ids)


class HybridKV:
    def __init__(self, cfg, bs):
        self.specs = [g.kv_cache_spec for g in cfg.kv_cache_groups]
        self.bs = bs
        self.free = list(range(1, cfg.num_blocks))
        self.req = {}  # rid -> [ids per group]

    def _skipped(self, spec, num_computed):
        """Blocks of a window group wholly before the window of token num_computed."""
        if kind(spec) != "window":
            return 0
        return max(0, num_computed - spec.sliding_window + 1) // self.bs

    def allocate(self, rid, num_computed, num_new):
        """New blocks per group for tokens up to num_computed + num_new; window blocks that
        left the window are freed (null in the table)."""
        tables = self.req.setdefault(rid, [[] for _ in self.specs])
        out = []
        for spec, t in zip(self.specs, tables):
            new = []
            if kind(spec) == "mamba":
                if not t:
                    t.append(self.free.pop(0))
                    new.append(t[-1])
                out.append(new)
                continue
            skip = self._skipped(spec, num_computed)
            for i in range(min(skip, len(t))):
                if t[i]:
                    self.free.append(t[i])
                    t[i] = 0
            need = -(-(num_computed + num_new) // self.bs)
            while len(t) < need:
                b = 0 if len(t) < skip else self.free.pop(0)
                t.append(b)
                new.append(b)
            out.append(new)
        return out

    def release(self, rid):
        for t in self.req.pop(rid, []):
            self.free.extend(b for b in t if b)


class HybridRequest(SimpleNamespace):
    @property
    def all_token_ids(self):
        return self._all

    @property
    def num_tokens(self):
        return len(self._all)

    @property
    def num_prompt_tokens(self):
        return len(self.prompt_token_ids)


def make_request(rid, prompt, max_tokens=2):
    return HybridRequest(request_id=rid, prompt_token_ids=list(prompt), _all=list(prompt),
                         output_token_ids=[], max_tokens=max_tokens, num_computed_tokens=0,
                         num_external_computed_tokens=0, cache_salt=None, lora_request=None,
                         mm_features=[], prompt_embeds=None, skip_reading_prefix_cache=False,
                         kv_transfer_params=None)


class HybridModel:
    """Layer i belongs to group group_of[i]. Full layers: K/V of position p = f(prefix); the
    next token reads every position. Window layers: the same values, but the next token reads
    only the last `window` positions. Mamba layers: a state of the whole prefix, written into
    slot 0 of the request's state block and read back from there."""

    vocab = 97

    def __init__(self, specs, group_of, H, D):
        self.specs, self.group_of, self.H, self.D = specs, group_of, H, D
        self.positions_computed = 0

    def _vals(self, tokens, start, end, layer):
        h, base = 0, []
        for p, tok in enumerate(tokens[:end]):
            h = (h * 1000003 + tok + 1) % (1 << 31)
            if p >= start:
                base.append(h)
        base = torch.tensor(base, dtype=torch.long)
        idx = torch.arange(self.H * self.D).view(1, self.H, self.D)
        k = ((base.view(-1, 1, 1) * (layer + 3) + idx * 31 + layer * 7) % 1009).float() / 1009
        return k - 0.5, 0.1 - 0.5 * k

    def forward(self, kv, reqs, conn):
        names = list(kv)
        for li, name in enumerate(names):
            conn.wait_for_layer_load(name)
            t, g = kv[name], self.group_of[li]
            for r in reqs:
                ids = r.block_ids[g]
                if kind(self.specs[g]) == "mamba":
                    k, v = self._vals(r.tokens, r.end - 1, r.end, li)
                    write_kv(t, "fa", torch.tensor([ids[0]]), torch.tensor([0]), k.to(t.dtype),
                             v.to(t.dtype))
                    continue
                b, o = slots(ids, r.start, r.end, r.bs)
                k, v = self._vals(r.tokens, r.start, r.end, li)
                write_kv(t, "fa", b, o, k.to(t.dtype), v.to(t.dtype))
            conn.save_kv_layer(name, t, SimpleNamespace())
        out = {}
        for r in reqs:
            self.positions_computed += r.end - r.start
            if r.end < len(r.tokens):
                continue
            acc = hashlib.sha256()
            for li, name in enumerate(names):
                g = self.group_of[li]
                spec, ids = self.specs[g], r.block_ids[g]
                if kind(spec) == "mamba":
                    b, o = torch.tensor([ids[0]]), torch.tensor([0])
                else:
                    lo = max(0, r.end - spec.sliding_window) if kind(spec) == "window" else 0
                    b, o = slots(ids, lo, r.end, r.bs)
                k, v = read_kv(kv[name], "fa", b, o)
                acc.update(k.contiguous().view(torch.int16).numpy().tobytes())
                acc.update(v.contiguous().view(torch.int16).numpy().tobytes())
            out[r.req_id] = int.from_bytes(acc.digest()[:4], "little") % self.vocab
        return out


class HybridEngine:
    """groups: list of (spec, number of layers). One worker (TP 1)."""

    def __init__(self, vllm_config, groups, num_blocks, H, D, connector_cls=None):
        if connector_cls is None:
            from openlake_client.openlake_connector import OpenLakeConnector as connector_cls
        from openlake_client.openlake_connector import KVConnectorRole

        bs = vllm_config.cache_config.block_size
        names, group_of, kgs = [], [], []
        for g, (spec, n) in enumerate(groups):
            lay = ["model.layers.%d.attn" % (len(names) + i) for i in range(n)]
            names += lay
            group_of += [g] * n
            kgs.append(KVCacheGroupSpec(lay, spec))
        self.kv_cache_config = KVCacheConfig(num_blocks, kgs)
        vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
        self.sched_conn = connector_cls(vllm_config, KVConnectorRole.SCHEDULER,
                                        self.kv_cache_config)
        self.worker_conn = connector_cls(vllm_config, KVConnectorRole.WORKER,
                                         self.kv_cache_config)
        self.kv = {n: torch.zeros(2, num_blocks, bs, H, D, dtype=torch.bfloat16) for n in names}
        self.worker_conn.register_kv_caches(self.kv)
        self.model = HybridModel([g.kv_cache_spec for g in kgs], group_of, H, D)
        self.mgr = HybridKV(self.kv_cache_config, bs)
        self.bs = bs
        self.waiting, self.running, self.finished = [], [], {}
        self.finished_ids = set()
        self.schedule_log, self.invalid_seen, self.events = [], set(), []
        self.wreqs = {}  # the worker's copy of each request's tokens and block tables

    def add(self, req):
        self.waiting.append(req)

    def step(self):
        nst, new_reqs, cached = {}, [], CachedRequestData()
        for r in self.running:
            n = len(r._all) - r.num_computed_tokens
            new = self.mgr.allocate(r.request_id, r.num_computed_tokens, n)
            cached.req_ids.append(r.request_id)
            cached.new_block_ids.append(tuple(new))
            cached.num_computed_tokens.append(r.num_computed_tokens)
            cached.num_output_tokens.append(len(r.output_token_ids))
            nst[r.request_id] = n
        still = []
        for r in self.waiting:
            ext, is_async = self.sched_conn.get_num_new_matched_tokens(r, 0)
            if ext is None:
                still.append(r)
                continue
            assert not is_async and len(r._all) - ext > 0
            self.mgr.allocate(r.request_id, ext, len(r._all) - ext)
            tables = self.mgr.req[r.request_id]
            self.sched_conn.update_state_after_alloc(r, HybridBlocks(tables), ext)
            r.num_external_computed_tokens = r.num_computed_tokens = ext
            new_reqs.append(NewRequestData(r.request_id, list(r.prompt_token_ids),
                                           tuple(list(t) for t in tables), ext))
            nst[r.request_id] = len(r._all) - ext
            self.running.append(r)
        self.waiting = still
        so = SchedulerOutput(new_reqs, cached, nst, sum(nst.values()), set(self.finished_ids),
                             set())
        so.has_sync_kv_loads = any(nr.num_computed_tokens for nr in new_reqs)
        so.kv_connector_metadata = self.sched_conn.build_connector_meta(so)
        self.finished_ids = set()
        for r in self.running:
            r.num_computed_tokens += nst.get(r.request_id, 0)
        self.schedule_log.append(so)
        sampled, kvo = self._execute(pickle.dumps(so))
        self.invalid_seen |= kvo.invalid_block_ids
        assert not kvo.invalid_block_ids, "a load failed: %s" % kvo.invalid_block_ids
        for r in list(self.running):
            if r.request_id in sampled:
                r.output_token_ids.append(sampled[r.request_id])
                r._all.append(sampled[r.request_id])
                w = self.wreqs[r.request_id]
                w.tokens.append(sampled[r.request_id])
                if len(r.output_token_ids) >= r.max_tokens:
                    self.running.remove(r)
                    tables = tuple(list(t) for t in self.mgr.req[r.request_id])
                    delay, _ = self.sched_conn.request_finished_all_groups(r, tables)
                    assert not delay  # the test engines save synchronously
                    self.mgr.release(r.request_id)
                    self.finished_ids.add(r.request_id)
                    self.finished[r.request_id] = r
        self.sched_conn.update_connector_output(kvo)
        self.events += list(self.sched_conn.take_events() or ())
        return so

    def _execute(self, blob):
        so = pickle.loads(blob)
        for rid in so.finished_req_ids:
            self.wreqs.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            self.wreqs[nr.req_id] = SimpleNamespace(tokens=list(nr.prompt_token_ids),
                                                    tables=[list(t) for t in nr.block_ids],
                                                    num_computed=nr.num_computed_tokens)
        cr = so.scheduled_cached_reqs
        for i, rid in enumerate(cr.req_ids):
            w = self.wreqs[rid]
            for t, add in zip(w.tables, cr.new_block_ids[i]):
                t.extend(add)
            w.num_computed = cr.num_computed_tokens[i]
        c = self.worker_conn
        c.handle_preemptions(so.kv_connector_metadata)
        c.bind_connector_metadata(so.kv_connector_metadata)
        try:
            c.start_load_kv(SimpleNamespace(attn_metadata={}))
            batch = [SimpleNamespace(req_id=rid, tokens=self.wreqs[rid].tokens,
                                     start=self.wreqs[rid].num_computed,
                                     end=self.wreqs[rid].num_computed + n,
                                     block_ids=self.wreqs[rid].tables, bs=self.bs)
                     for rid, n in so.num_scheduled_tokens.items()]
            sampled = self.model.forward(self.kv, batch, c) if batch else {}
        finally:
            c.wait_for_save()
        tr = c.get_transfer_results(so.finished_req_ids)
        kvo = KVConnectorOutput(finished_sending=tr.finished_sending or None,
                                finished_recving=tr.finished_recving or None,
                                failed_recving=tr.failed_recving or None,
                                invalid_block_ids=c.get_block_ids_with_load_errors())
        kvo.kv_cache_events = c.get_kv_connector_kv_cache_events()
        c.clear_connector_metadata()
        return sampled, kvo

    def run(self, max_steps=1000):
        for _ in range(max_steps):
            if not (self.waiting or self.running):
                break
            self.step()
        self.step()  # delivers finished_req_ids
        assert not self.waiting and not self.running
        return self

    def shutdown(self):
        self.sched_conn.shutdown()
        self.worker_conn.shutdown()
