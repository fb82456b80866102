"""Worker stand-in: the GPU model runner's connector mixin around a model forward.

Per step (reference §1.6 4-6): metadata crosses a pickle boundary; bind -> start_load_kv ->
per layer wait_for_layer_load / (model writes K/V at slot_mapping) / save_kv_layer ->
wait_for_save -> get_finished -> get_block_ids_with_load_errors -> stats -> clear. A step
with no scheduled tokens takes the no-forward path. The worker keeps its own copy of each
request's tokens and block ids, as vLLM's input batch does."""

import hashlib
import pickle
import time
from types import SimpleNamespace

import torch

from .scheduler import KVConnectorOutput

LAYOUTS = ("fa", "fa_hnd", "flashinfer", "bhnc", "mla")


def make_kv_caches(layout, num_layers, num_blocks, block_size, heads, head_size,
                   dtype=torch.bfloat16, latent=None):
    """Zeroed per-layer KV tensors in a vLLM backend's logical shape."""
    out = {}
    for i in range(num_layers):
        nb, bs, h, d = num_blocks, block_size, heads, head_size
        if layout == "fa":
            t = torch.zeros(2, nb, bs, h, d, dtype=dtype)
        elif layout == "fa_hnd":  # HND physical order, NHD logical shape (strided)
            t = torch.zeros(2, nb, h, bs, d, dtype=dtype).permute(0, 1, 3, 2, 4)
        elif layout == "flashinfer":
            t = torch.zeros(nb, 2, bs, h, d, dtype=dtype)
        elif layout == "bhnc":
            t = torch.zeros(nb, h, bs, 2 * d, dtype=dtype)
        elif layout == "mla":
            t = torch.zeros(nb, bs, latent or h * d, dtype=dtype)
        else:
            raise ValueError(layout)
        out["model.layers.%d.self_attn.attn" % i] = t
    return out


# get_kv_cache_stride_order(include_num_layers_dimension=True) of vLLM's backends for each
# stand-in layout: the physical order of (layers, *per-layer logical shape)
CROSS_ORDER = {"fa": (2, 0, 1, 3, 4, 5), "fa_hnd": (2, 4, 0, 1, 3, 5),
               "flashinfer": (1, 0, 2, 3, 4, 5), "bhnc": (1, 0, 3, 2, 4), "mla": (1, 0, 2, 3)}


class CrossBackend:
    """The attention backend vLLM passes with a cross-layer cache (its stride order)."""

    def __init__(self, layout):
        self.layout = layout

    def get_kv_cache_stride_order(self, include_num_layers_dimension=False):
        if not include_num_layers_dimension:
            raise NotImplementedError
        return CROSS_ORDER[self.layout]


def cross_layer_views(kv_caches, layout):
    """vLLM's cross-layer allocation (a connector with prefer_cross_layer_blocks): one tensor
    for every layer in the backend's physical order, each layer's tensor a view of it in the
    backend's logical shape (the permutation undone, then [i]). Returns (the one tensor, its
    backend, {name: view}); the views start as copies of kv_caches' contents."""
    names = list(kv_caches)
    t0 = kv_caches[names[0]]
    logical = (len(names),) + tuple(t0.shape)
    order = CROSS_ORDER[layout]
    cross = torch.zeros(tuple(logical[i] for i in order), dtype=t0.dtype)
    perm = cross.permute(*[order.index(i) for i in range(len(order))])
    views = {}
    for i, n in enumerate(names):
        views[n] = perm[i]
        views[n].copy_(kv_caches[n])
    return cross, CrossBackend(layout), views


def write_kv(t, layout, blocks, offs, k, v=None):
    """k, v: [n, heads, head]; MLA: k = [n, latent]."""
    if layout in ("fa", "fa_hnd"):
        t[0][blocks, offs] = k
        t[1][blocks, offs] = v
    elif layout == "flashinfer":
        t[:, 0][blocks, offs] = k
        t[:, 1][blocks, offs] = v
    elif layout == "bhnc":
        d = k.shape[-1]
        t[blocks, :, offs, :d] = k
        t[blocks, :, offs, d:] = v
    else:
        t[blocks, offs] = k


def read_kv(t, layout, blocks, offs):
    if layout in ("fa", "fa_hnd"):
        return t[0][blocks, offs], t[1][blocks, offs]
    if layout == "flashinfer":
        return t[:, 0][blocks, offs], t[:, 1][blocks, offs]
    if layout == "bhnc":
        x = t[blocks, :, offs]
        d = x.shape[-1] // 2
        return x[..., :d], x[..., d:]
    return t[blocks, offs], None


def slots(block_ids, start, end, bs):
    pos = torch.arange(start, end)
    ids = torch.tensor(block_ids, dtype=torch.long)
    return ids[pos // bs], pos % bs


class FakeModel:
    """Deterministic 'model': K/V of position p = f(layer, rank, hash(tokens[:p+1])); the next
    token is a function of every K/V read back from the paged cache, so a wrong block changes
    the output."""

    vocab = 97

    def __init__(self, num_layers, heads, head_size, layout, rank=0, latent=None):
        self.L, self.H, self.D, self.layout, self.rank = num_layers, heads, head_size, layout, rank
        self.latent = latent or heads * head_size
        self.positions_computed = 0

    def _prefix_vals(self, tokens, start, end):
        h, out = 0, []
        for p, tok in enumerate(tokens[:end]):
            h = (h * 1000003 + tok + 1) % (1 << 31)
            if p >= start:
                out.append(h)
        return torch.tensor(out, dtype=torch.long)

    def kv_values(self, tokens, start, end, layer):
        base = self._prefix_vals(tokens, start, end)
        if self.layout == "mla":
            idx = torch.arange(self.latent).view(1, -1)
            x = (base.view(-1, 1) * (layer + 3) + idx * 31 + self.rank * 7) % 1009
            return (x.float() / 1009 - 0.5), None
        idx = torch.arange(self.H * self.D).view(1, self.H, self.D)
        x = (base.view(-1, 1, 1) * (layer + 3) + idx * (self.rank + 1) * 31 + layer * 7) % 1009
        k = x.float() / 1009 - 0.5
        return k, 0.1 - 0.5 * k

    def forward(self, kv_caches, reqs, hooks):
        names = list(kv_caches)
        for li, name in enumerate(names):
            hooks.before_layer(name)
            t = kv_caches[name]
            for r in reqs:
                b, o = slots(r.block_ids, r.start, r.end, r.bs)
                k, v = self.kv_values(r.tokens, r.start, r.end, li)
                write_kv(t, self.layout, b, o, k.to(t.dtype), None if v is None else v.to(t.dtype))
            hooks.after_layer(name, t)
        out = {}
        for r in reqs:
            self.positions_computed += r.end - r.start
            if r.end < len(r.tokens):
                continue
            acc = hashlib.sha256()
            for name in names:
                b, o = slots(r.block_ids, 0, r.end, r.bs)
                k, v = read_kv(kv_caches[name], self.layout, b, o)
                acc.update(k.contiguous().view(torch.int16 if k.dtype == torch.bfloat16 else
                                               torch.uint8).numpy().tobytes())
                if v is not None:
                    acc.update(v.contiguous().view(torch.int16).numpy().tobytes())
            out[r.req_id] = (int.from_bytes(acc.digest()[:4], "little") % self.vocab, None)
        return out


class _Hooks:
    """The attention layer wrapper's connector calls (vLLM's unified attention): before each
    layer wait_for_layer_load, after it wrote its K/V save_kv_layer. Each call is logged
    with its perf_counter time in log: (step, event, layer name, time), events "wait" (the
    call), "compute" (it returned: the layer's compute starts), "computed" (the layer wrote
    its K/V), "saved" (save_kv_layer returned). on_compute(name), if set, runs as a layer's
    compute starts. hooks=False: a full CUDA graph replay, which calls neither."""

    def __init__(self, connector, attn_meta, log, step, hooks=True, on_compute=None):
        self.c, self.meta, self.log, self.step = connector, attn_meta, log, step
        self.hooks, self.on_compute = hooks, on_compute

    def before_layer(self, name):
        if self.hooks:
            self.log.append((self.step, "wait", name, time.perf_counter()))
            self.c.wait_for_layer_load(name)
        self.log.append((self.step, "compute", name, time.perf_counter()))
        if self.on_compute is not None:
            self.on_compute(name)

    def after_layer(self, name, t):
        self.log.append((self.step, "computed", name, time.perf_counter()))
        if self.hooks:
            self.c.save_kv_layer(name, t, self.meta)
            self.log.append((self.step, "saved", name, time.perf_counter()))


class Worker:
    """api: "newest" = vLLM's newest mixin (handle_preemptions(metadata); start_load_kv before
    the forward only with sync loads, else right after it is launched; get_transfer_results;
    get_kv_connector_kv_cache_events); "classic" = the older one (handle_preemptions(set),
    start_load_kv first, get_finished).

    cudagraph: "none" (eager: every layer calls the connector's hooks) or "full" (vLLM's
    FULL_AND_PIECEWISE mode: a batch of decode tokens only replays a full CUDA graph, which
    calls no hook, unless the connector's requires_piecewise_for_cudagraph(extra config) is
    true, as vLLM then captures piecewise graphs that keep the attention calls eager), or
    "forced_full" (a deployment forcing full graphs for every batch whatever the connector
    asks: no step calls the hooks)."""

    def __init__(self, vllm_config, connector, kv_caches, model, block_size, api="newest",
                 cudagraph="none", cross_layer=False):
        self.cfg, self.c, self.kv, self.model, self.bs = (vllm_config, connector, kv_caches,
                                                         model, block_size)
        self.api = api
        extra = vllm_config.kv_transfer_config.kv_connector_extra_config
        req = getattr(type(connector), "requires_piecewise_for_cudagraph", None)
        self.piecewise = cudagraph == "none" or (cudagraph == "full" and
                                                 bool(req is not None and req(extra)))
        self.full_always = cudagraph == "forced_full"
        self.hook_log = []  # see _Hooks
        self.on_compute = None
        self.nsteps = 0
        self.reqs = {}
        self.logits = {}  # req_id -> [logits of each sampled step] (models that give them)
        self.cross = None  # cross_layer: the one KV tensor of every layer
        if cross_layer and getattr(connector, "prefer_cross_layer_blocks", False):
            layout = getattr(model, "layout", None) or cross_layer
            self.cross, backend, self.kv = cross_layer_views(kv_caches, layout)
            connector.register_cross_layers_kv_cache(self.cross, backend)
        else:
            connector.register_kv_caches(kv_caches)

    def _update_state(self, so):
        for rid in so.finished_req_ids:
            self.reqs.pop(rid, None)
        for rid in so.preempted_req_ids:
            self.reqs.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            self.reqs[nr.req_id] = SimpleNamespace(tokens=list(nr.prompt_token_ids),
                                                   block_ids=list(nr.block_ids[0]),
                                                   num_computed=nr.num_computed_tokens)
        cr = so.scheduled_cached_reqs
        for i, rid in enumerate(cr.req_ids):
            nb = cr.new_block_ids[i]
            if rid in cr.resumed_req_ids:
                self.reqs[rid] = SimpleNamespace(tokens=list(cr.all_token_ids[rid]),
                                                 block_ids=list(nb[0]),
                                                 num_computed=cr.num_computed_tokens[i])
            else:
                st = self.reqs[rid]
                if nb:
                    st.block_ids.extend(nb[0])
                st.num_computed = cr.num_computed_tokens[i]

    def execute_model(self, so_bytes):
        so = pickle.loads(so_bytes)  # nothing shared with the scheduler process
        self._update_state(so)
        c = self.c
        newest = self.api == "newest"
        if newest:
            c.handle_preemptions(so.kv_connector_metadata)
        elif so.preempted_req_ids:
            c.handle_preemptions(set(so.preempted_req_ids))
        c.bind_connector_metadata(so.kv_connector_metadata)
        sampled = {}
        load_first = not newest or so.has_sync_kv_loads
        try:
            if so.total_num_scheduled_tokens == 0:
                c.start_load_kv(SimpleNamespace(attn_metadata=None))
            else:
                if load_first:
                    c.start_load_kv(SimpleNamespace(attn_metadata={}))
                batch = []
                for rid, n in so.num_scheduled_tokens.items():
                    st = self.reqs[rid]
                    batch.append(SimpleNamespace(req_id=rid, tokens=st.tokens,
                                                 start=st.num_computed, end=st.num_computed + n,
                                                 block_ids=st.block_ids, bs=self.bs))
                decode = all(b.end - b.start == 1 and b.start > 0 for b in batch)
                hooks = _Hooks(c, SimpleNamespace(), self.hook_log, self.nsteps,
                               hooks=self.piecewise or not (decode or self.full_always),
                               on_compute=self.on_compute)
                res = self.model.forward(self.kv, batch, hooks)
                if not load_first:  # async loads only: started once the forward is launched
                    c.start_load_kv(SimpleNamespace(attn_metadata={}))
                sampled = {rid: tok for rid, (tok, _) in res.items()}
                for rid, (_, lg) in res.items():
                    if lg is not None:
                        self.logits.setdefault(rid, []).append(lg)
        finally:
            c.wait_for_save()
        failed = None
        if newest:
            tr = c.get_transfer_results(so.finished_req_ids)
            fs, fr, failed = tr.finished_sending, tr.finished_recving, tr.failed_recving
        else:
            fs, fr = c.get_finished(so.finished_req_ids)
        out = KVConnectorOutput(finished_sending=fs or None, finished_recving=fr or None,
                                failed_recving=failed or None,
                                invalid_block_ids=c.get_block_ids_with_load_errors(),
                                kv_connector_stats=c.get_kv_connector_stats())
        if newest:
            out.kv_cache_events = c.get_kv_connector_kv_cache_events()
        c.clear_connector_metadata()
        self.nsteps += 1
        return sampled, out

    def note_sampled(self, rid, tok):
        st = self.reqs.get(rid)
        if st is not None:
            st.tokens.append(tok)
