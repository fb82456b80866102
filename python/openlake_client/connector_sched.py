"""Scheduler side of the OpenLake connector: lookups, load plans, save plans.

Runs in vLLM's scheduler process. It sees token ids and block ids, never tensors; what the
workers must do each step goes into a small picklable metadata object (chain hashes + block
ids), and each worker derives its own rank's keys from the chain hashes."""

import hashlib
import struct
import threading
import time
from dataclasses import dataclass, field

from .connector_config import key_ranks
from .connector_cost import BreakEven
from .connector_groups import FULL, WINDOW, unsupported, window_first_chunk
from .keys import (ChainCache, Unkeyable, group_hash, layer_hash, lora_name, rank_key,
                   request_extras, seed_hash)
from .store import StoreDown

EPOCH_REFRESH_S = 1.0  # how often a scheduler looks for a reset made by another engine
EVENT_MEDIUM = "STORAGE"  # the medium of our KV events (vLLM's are "GPU", "CPU", "STORAGE")


@dataclass
class LoadSpec:
    req_id: str
    chunks: list  # [(chain_hash, (block ids...), skip)]: skip leading blocks already local
    is_async: bool = False  # load in the background, report in finished_recving


@dataclass
class SaveSpec:
    req_id: str
    chunks: list  # [(chain_hash, (block ids...))]
    events: list = None  # KV events on: per chunk (parent chain hash or None, token ids)


@dataclass
class StepPlan:
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)
    finished: set = field(default_factory=set)
    preempted: set = field(default_factory=set)
    flush: bool = False  # async saves: wait for queued saves before this step's forward


@dataclass
class _Lookup:
    num_computed: int
    num_tokens: int
    ext: int
    present: list  # per chunk from 0: all ranks have it


class _Pending:
    """One request's lookup in flight on the lookup thread."""

    __slots__ = ("keys", "epoch", "t0", "result", "done", "nr", "c0")

    def __init__(self, keys, epoch, nr=1, c0=0):
        self.keys, self.epoch, self.t0 = keys, epoch, time.monotonic()
        self.nr, self.c0 = nr, c0  # keys per chunk; the first chunk that may be loaded
        self.result = None  # list of bool, or None when the pool could not answer
        self.done = threading.Event()


def lease_lookup(store, reqs, ttl_ms):
    """The lookups of several requests, reqs = [(keys, nr, c0)] (nr keys per chunk, c0 the
    first chunk that may load), as one LEASE: one round trip answers like exists and keeps
    what it found in the pool until the worker's load ends the lease (or ttl_ms). Leases past
    a request's first chunk that cannot load (and before c0: already local) end at once, in
    one more call. A pool too old to lease gets a plain exists. A list of bools per request;
    raises StoreDown."""
    from .client import Status

    keys = [k for ks, _, _ in reqs for k in ks]
    if ttl_ms <= 0 or not keys:
        ok = [bool(x) for x in store.call("exists", keys)] if keys else []
    else:
        st = store.call("lease", keys, ttl_ms)
        if any(s == Status.ERROR for s in st):
            ok = [bool(x) for x in store.call("exists", keys)]
            ttl_ms = 0
        else:
            ok = [s == Status.OK for s in st]
            down = [i for i, s in enumerate(st) if s == Status.UNREACHABLE]
            if down:  # a lease asks a key's first replica only: exists tries the others
                for i, x in zip(down, store.call("exists", [keys[i] for i in down])):
                    ok[i] = bool(x)
    out, end, i = [], [], 0
    for ks, nr, c0 in reqs:
        o = ok[i:i + len(ks)]
        i += len(ks)
        out.append(o)
        if ttl_ms <= 0:
            continue
        c = c0
        while (c + 1) * nr <= len(o) and all(o[c * nr:(c + 1) * nr]):
            c += 1
        end += [k for k, x in zip(ks[c * nr:], o[c * nr:]) if x]
        end += [k for k, x in zip(ks[:c0 * nr], o[:c0 * nr]) if x]
    if end:
        try:
            store.call("lease", end, 0)
        except StoreDown:
            pass
    return out


class _LookupThread:
    """Runs the lookups of every request that asked since its last round as one batched
    `exists` call, and looks for a newer reset epoch every EPOCH_REFRESH_S, so the scheduler
    never waits on the pool."""

    def __init__(self, store, probe_epoch, lease_ms=0):
        self.store, self.lease_ms = store, lease_ms
        self.probe_epoch = probe_epoch  # epoch -> newest epoch (raises StoreDown)
        self.epoch_seen = 0
        self.epoch_known = threading.Event()  # set after the first probe (even a failed one)
        self._cv = threading.Condition()
        self._q = []
        self._stop = False
        self._t = threading.Thread(target=self._run, name="openlake-lookup", daemon=True)
        self._t.start()

    def submit(self, p):
        with self._cv:
            self._q.append(p)
            self._cv.notify()

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._t.join(timeout=30)

    def _run(self):
        probed = float("-inf")
        while True:
            with self._cv:
                while not self._q and not self._stop:
                    left = probed + EPOCH_REFRESH_S - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                if self._stop:
                    return
                batch, self._q = self._q, []
            if time.monotonic() - probed >= EPOCH_REFRESH_S:
                probed = time.monotonic()
                try:
                    self.epoch_seen = self.probe_epoch(self.epoch_seen)
                except StoreDown:
                    pass
                self.epoch_known.set()
            if not batch:
                continue
            try:
                res = lease_lookup(self.store, [(p.keys, p.nr, p.c0) for p in batch],
                                   self.lease_ms)
            except StoreDown:
                res = [None] * len(batch)
            for p, r in zip(batch, res):
                p.result = r
                p.done.set()


class _Req:
    __slots__ = ("req_id", "request", "chains", "block_ids", "next_save", "early", "load",
                 "saved_any", "done", "keyable", "block_ids_g")

    def __init__(self, req_id, request, chains):
        self.req_id, self.request, self.chains = req_id, request, chains
        self.keyable = chains is not None  # False: never looked up nor saved
        self.block_ids = []
        self.block_ids_g = [[]]  # per KV cache group (hybrid models); [0] is block_ids
        self.next_save = 0
        self.early = []
        self.load = None
        self.saved_any = False
        self.done = False


def all_tokens(request):
    t = getattr(request, "all_token_ids", None)
    if t is None:
        t = request.prompt_token_ids
    return t


def _groups(block_ids, n):
    """block_ids (a tuple with one list per group, or a flat list) as n lists."""
    if block_ids is None:
        return [[] for _ in range(n)]
    if isinstance(block_ids, tuple) or (block_ids and isinstance(block_ids[0], (list, tuple))):
        out = [list(x) for x in block_ids]
        return out + [[] for _ in range(n - len(out))]
    return [list(block_ids)] + [[] for _ in range(n - 1)]


def _group0(block_ids):
    if block_ids is None:
        return []
    if isinstance(block_ids, tuple) or (block_ids and isinstance(block_ids[0], (list, tuple))):
        return list(block_ids[0]) if block_ids else []
    return list(block_ids)


class SchedulerSide:
    def __init__(self, cfg, ident, geo, store, rec, warn, save_enabled=True, groups=None):
        self.cfg, self.ident, self.geo = cfg, ident, geo
        self.store, self.rec, self.warn = store, rec, warn
        self.cs = cfg.chunk_size
        self.bs = geo.block_size
        self.k = self.cs // self.bs
        self.ranks = key_ranks(geo)
        # layer-wise: one object per (chunk, layer, rank); a chunk is there when all are
        self.nl = int(geo.num_layers) if cfg.layerwise else 0
        self.kpc = len(self.ranks) * (self.nl or 1)  # keys per chunk (and group)
        self.save_enabled = save_enabled
        self._seeds = {}
        self._reqs = {}
        self._lookups = {}
        self.async_save = cfg.async_save
        self._async_loads = []  # planned async loads: sent with the next metadata
        self._async_done = set()  # requests whose async load was planned
        self.epoch = 0  # reset_cache generation, mixed into every seed
        self._epoch_checked = float("-inf")
        self._pending = {}  # req_id -> _Pending (lookup_async)
        self._inline_left = cfg.lookup_inline_ms / 1e3  # this step's waiting budget
        self._lt = None
        self.events_on = cfg.kv_events
        # hybrid models: one block image per KV cache group (see connector_groups)
        self.groups = groups
        self.ng = len(groups) if groups else 1
        self.kinds = [g.kind for g in groups] if groups else [FULL]
        self.hma_off = unsupported(groups, self.bs) if groups else ""
        if self.hma_off:
            warn("hma", "openlake: hybrid model served without the pool (no hits, no saves): "
                 "%s", self.hma_off)
            self.save_enabled = False
        self._events = []  # for take_events: the workers' (update_connector_output) and ours
        # adaptive_min_hit_tokens: the break-even hit, from the workers' loads and our steps
        self.cost = BreakEven(cfg.recompute_us_per_token) if cfg.adaptive_min_hit_tokens else None
        self._step_t0, self._step_tokens = None, 0

    def _lookup_thread(self):
        if self._lt is None:
            self._lt_t0 = time.monotonic()
            self._lt = _LookupThread(self.store, self._probe_epoch, self.cfg.lease_ms)
        return self._lt

    def close(self):
        if self._lt is not None:
            self._lt.close()
            self._lt = None

    def _seed(self, salt, lora):
        s = self._seeds.get((salt, lora))
        if s is None:
            s = self._seeds[(salt, lora)] = seed_hash(self.ident, salt, lora, self.epoch)
        return s

    def _req(self, request):
        rid = request.request_id
        r = self._reqs.get(rid)
        if r is None:
            salt = self.cfg.cache_salt
            rs = getattr(request, "cache_salt", None)
            if rs:
                salt = "%s\0%s" % (salt, rs)
            try:
                chains = ChainCache(self._seed(salt, lora_name(request)), self.cs,
                                    request_extras(request, self.cs))
            except Unkeyable as e:
                self.warn("unkeyable", "openlake: request %s is served without the pool: %s",
                          rid, e)
                self.rec.add(unkeyable=1)
                chains = None
            r = self._reqs[rid] = _Req(rid, request, chains)
        r.request = request
        return r

    # -- reset_cache: an epoch in every seed, so a reset is O(1) and nothing is deleted
    def _epoch_key(self, n):
        h = hashlib.sha256(b"openlake-kv/1\0epoch\0")
        h.update(self.ident.digest())
        h.update(self.cfg.cache_salt.encode() + b"\0")
        return h.digest()[:24] + struct.pack("<Q", n)

    def _probe_epoch(self, cur):
        """The newest epoch marker in the pool at or after cur (raises StoreDown). Reading
        the current marker with a get keeps it recent in the pool's LRU while engines run."""
        while True:
            want = [self._epoch_key(cur + 1)] + ([self._epoch_key(cur)] if cur else [])
            if self.store.call("get", want, None, 64)[0] is None:
                return cur
            cur += 1

    def _refresh_epoch(self, force=False):
        """Adopt a newer epoch written by another engine of the same model: from the lookup
        thread's last probe (lookup_async), else by a probe here at most once a second. The
        pool down keeps the current one."""
        if self._lt is not None:
            seen = self._lt.epoch_seen
        else:
            now = time.monotonic()
            if not force and now - self._epoch_checked < EPOCH_REFRESH_S:
                return
            self._epoch_checked = now
            try:
                seen = self._probe_epoch(self.epoch)
            except StoreDown:
                return
        if seen > self.epoch:
            self._new_epoch(seen)

    def _new_epoch(self, n):
        self.epoch = n
        self._seeds.clear()
        for r in self._reqs.values():  # their chains hash the old epoch: no load, no save
            r.keyable = False

    def reset(self):
        """vLLM's reset_cache (after a weight update): every key this engine uses from now on
        is new, and engines of the same model see the new epoch within EPOCH_REFRESH_S."""
        try:
            seen = self._probe_epoch(max(self.epoch, self._lt.epoch_seen if self._lt else 0))
        except StoreDown:
            seen = self.epoch
        n = max(seen, self.epoch) + 1
        self._new_epoch(n)
        if self.events_on:  # every key this engine announced is unreachable now
            from ._vllm_compat import kv_event

            self._events.append(kv_event("AllBlocksCleared", medium=EVENT_MEDIUM))
        try:
            st = self.store.call("put", [self._epoch_key(n)], [struct.pack("<Qd", n, time.time())])
            ok = st and int(st[0]) == 0
        except StoreDown:
            ok = False
        if not ok:
            self.warn("reset", "openlake: reset_cache could not record epoch %d in the pool: "
                      "this engine uses new keys, other engines learn of it only by their "
                      "own reset", n)
        self.rec.add(resets=1)
        return True

    # -- get_num_new_matched_tokens
    def lookup(self, request, num_computed):
        tokens = all_tokens(request)
        n = len(tokens)
        max_chunks = (n - 1) // self.cs  # leave at least one token to compute
        if self.cfg.lookup_async:
            lt = self._lookup_thread()
            if not lt.epoch_known.is_set():
                # the first probe decides which keys are current: wait for it like a lookup
                if self._inline_left > 0:
                    t0 = time.perf_counter()
                    lt.epoch_known.wait(self._inline_left)
                    self._inline_left -= time.perf_counter() - t0
                if not lt.epoch_known.is_set():
                    if (time.monotonic() - self._lt_t0) * 1e3 < self.cfg.lookup_wait_ms:
                        return None, False
                    self.rec.add(lookup_failures=1)
                    return 0, False
        self._refresh_epoch()
        r = self._req(request)
        if (max_chunks <= 0 or num_computed >= max_chunks * self.cs or not r.keyable or
                self.hma_off or getattr(request, "skip_reading_prefix_cache", False)):
            self._lookups[r.req_id] = _Lookup(num_computed, n, 0, [])
            return 0, False
        hashes = r.chains.upto(tokens, max_chunks)
        keys = self._keys(hashes)
        nr = self.kpc * self.ng
        c0 = num_computed // self.cs
        if self.cfg.lookup_async:
            st = self._async_exists(r.req_id, keys, nr, c0)
            if st is None:
                return None, False  # vLLM asks again at a later step
        else:
            t0 = time.perf_counter()
            try:
                st = lease_lookup(self.store, [(keys, nr, c0)], self.cfg.lease_ms)[0]
            except StoreDown:
                st = False
            else:
                self.rec.observe("lookup_ms", (time.perf_counter() - t0) * 1e3)
        if st is False:
            self.rec.add(lookup_failures=1)
            self._lookups[r.req_id] = _Lookup(num_computed, n, 0, [])
            return 0, False
        self.rec.add(lookups=1)
        present = [all(st[c * nr:(c + 1) * nr]) for c in range(max_chunks)]
        c = self._best_prefix(st, c0, max_chunks)
        ext = max(0, c * self.cs - num_computed)
        if ext < max(self.cfg.min_hit_tokens, 1):
            ext = 0
        elif self.cost is not None and not self.cost.keep(ext):
            ext = 0  # loading it would cost more than computing it
            self.rec.add(hits_ignored=1)
        self._lookups[r.req_id] = _Lookup(num_computed, n, ext, present)
        return ext, bool(ext and self.cfg.load_async)

    def _keys(self, hashes):
        """The keys a lookup asks for: per chunk, per group, (per layer,) per rank."""
        if self.nl:
            return [rank_key(layer_hash(h, i), rk) for h in hashes for i in range(self.nl)
                    for rk in self.ranks]
        return [rank_key(group_hash(h, g), rk) for h in hashes for g in range(self.ng)
                for rk in self.ranks]

    def _best_prefix(self, st, c0, max_chunks):
        """The most chunks a prefix may load: every full-attention group's chunks from c0,
        and each sliding-window group's chunks of the window before the prefix's end."""
        R, G = self.kpc, self.ng

        def has(c, g):
            i = (c * G + g) * R
            return all(st[i:i + R])

        c = c0
        while c < max_chunks and all(has(c, g) for g in range(G) if self.kinds[g] != WINDOW):
            c += 1
        while c > c0:
            P = c * self.cs
            if all(has(x, g) for g in range(G) if self.kinds[g] == WINDOW
                   for x in range(max(c0, window_first_chunk(self.groups[g], P, self.cs)), c)):
                break
            c -= 1
        return c

    def _async_exists(self, rid, keys, nr=1, c0=0):
        """Statuses of keys, None while the lookup runs, False when it failed or a request
        waited lookup_wait_ms for it (then it is computed without the pool)."""
        p = self._pending.get(rid)
        if p is None or p.keys != keys or p.epoch != self.epoch or p.c0 != c0:
            p = self._pending[rid] = _Pending(keys, self.epoch, nr, c0)
            self._lookup_thread().submit(p)
        if not p.done.is_set() and self._inline_left > 0:
            t0 = time.perf_counter()
            p.done.wait(self._inline_left)
            self._inline_left -= time.perf_counter() - t0
        if not p.done.is_set():
            if (time.monotonic() - p.t0) * 1e3 < self.cfg.lookup_wait_ms:
                return None
            del self._pending[rid]  # the thread still finishes it; nobody reads it
            self.warn("lookup_wait", "openlake: the pool did not answer a lookup within "
                      "lookup_wait_ms=%d; computing without it", self.cfg.lookup_wait_ms)
            return False
        del self._pending[rid]
        if p.result is None:
            return False
        self.rec.observe("lookup_ms", (time.monotonic() - p.t0) * 1e3)
        return p.result

    # -- update_state_after_alloc
    def after_alloc(self, request, blocks, num_external):
        r = self._req(request)
        lk = self._lookups.pop(r.req_id, None)
        ids = blocks.get_block_ids() if hasattr(blocks, "get_block_ids") else blocks
        r.block_ids_g = _groups(ids, self.ng)
        r.block_ids = r.block_ids_g[0]
        local = lk.num_computed if lk else int(getattr(request, "num_computed_tokens", 0))
        n = len(all_tokens(request))
        r.load = None
        if lk is None and num_external == 0 and r.req_id in self._async_done:
            # second call after an async load: vLLM set num_computed from the loaded blocks
            self._async_done.discard(r.req_id)
            r.next_save = local // self.cs
            r.early = []
            return
        if num_external > 0 and lk is not None and lk.ext >= num_external:
            r.load = self._plan_load(r, local, num_external)
            if self.cfg.load_async:
                r.load.is_async = True
                self._async_loads.append(r.load)
                self._async_done.add(r.req_id)
                r.load = None
        else:
            num_external = 0
        start = local + num_external
        r.next_save = start // self.cs
        present = lk.present if lk else []
        r.early = [c for c in range(min(local // self.cs, len(present))) if not present[c]]
        self.rec.add(hit_tokens=num_external, miss_tokens=max(0, n - start))

    def _plan_load(self, r, local, ext):
        first, end = local // self.cs, (local + ext) // self.cs
        hashes = r.chains.hashes
        lb = local // self.bs
        chunks = []
        for c in range(first, end):
            skip = max(0, lb - c * self.k)
            if not self.groups:
                ids = tuple(r.block_ids[c * self.k:(c + 1) * self.k])
                chunks.append((hashes[c], ids, skip))
                continue
            for g in range(self.ng):  # chunk-major: a failed chunk fails what follows
                if c < window_first_chunk(self.groups[g], local + ext, self.cs):
                    continue  # out of the window: vLLM holds null blocks there
                ids = tuple(r.block_ids_g[g][c * self.k:(c + 1) * self.k])
                if len(ids) == self.k and 0 not in ids[skip:]:
                    chunks.append((group_hash(hashes[c], g), ids, skip, g))
        return LoadSpec(r.req_id, chunks)

    # -- build_connector_meta
    def build(self, so):
        self._inline_left = self.cfg.lookup_inline_ms / 1e3  # a new step, a new budget
        plan = StepPlan()
        plan.loads, self._async_loads = self._async_loads, []
        nst = so.num_scheduled_tokens
        for nr in so.scheduled_new_reqs:
            r = self._reqs.get(nr.req_id)
            if r is None:
                continue
            r.block_ids_g = _groups(nr.block_ids, self.ng)
            r.block_ids = r.block_ids_g[0]
            self._step(r, nr.num_computed_tokens + nst.get(nr.req_id, 0), plan)
        cached = so.scheduled_cached_reqs
        resumed = self._resumed(cached)
        for i, rid in enumerate(cached.req_ids):
            r = self._reqs.get(rid)
            if r is None:
                continue
            nb = cached.new_block_ids[i] if cached.new_block_ids else None
            if rid in resumed:
                r.block_ids_g = _groups(nb, self.ng)
            elif nb:
                for g, add in enumerate(_groups(nb, self.ng)):
                    r.block_ids_g[g].extend(add)
            r.block_ids = r.block_ids_g[0]
            self._step(r, cached.num_computed_tokens[i] + nst.get(rid, 0), plan)
        for rid in so.finished_req_ids:
            self._reqs.pop(rid, None)
            self._pending.pop(rid, None)
            self._lookups.pop(rid, None)
            self._async_done.discard(rid)
        plan.finished = set(so.finished_req_ids)
        plan.preempted = set(getattr(so, "preempted_req_ids", None) or ())
        if self.async_save:
            # a request that saved and is not scheduled now may have been preempted: its
            # blocks can be reused in this step, so the workers finish queued saves first;
            # a sliding-window group frees blocks that leave the window at every step
            plan.flush = bool(plan.preempted) or WINDOW in self.kinds or any(
                r.saved_any and not r.done and rid not in nst
                for rid, r in self._reqs.items())
        if self.cost is not None:  # time the step's compute: until connector_output
            self._step_t0 = time.perf_counter()
            self._step_tokens = 0 if plan.loads else sum(nst.values())
        return plan

    @staticmethod
    def _resumed(cached):
        s = getattr(cached, "resumed_req_ids", None)
        if s is not None:
            return set(s)
        flags = getattr(cached, "resumed_from_preemption", None) or []
        return {rid for rid, f in zip(cached.req_ids, flags) if f}

    def _step(self, r, end, plan):
        if r.load is not None:
            plan.loads.append(r.load)
            r.load = None
        if not self.save_enabled or not r.keyable:
            return
        req = r.request
        limit = end if self.cfg.save_decode else min(end, int(req.num_prompt_tokens))
        pub = getattr(req, "num_publishable_block_hashes", None)
        if pub is not None:  # newest vLLM: blocks past this may not be shared (yet)
            limit = min(limit, int(pub) * self.bs)
        done = min(limit, len(all_tokens(req))) // self.cs
        chunks = [c for c in r.early if c < done] + list(range(r.next_save, done))
        r.early = [c for c in r.early if c >= done]
        r.next_save = max(r.next_save, done)
        chunks = [c for c in chunks if (c + 1) * self.k <= len(r.block_ids)]
        if not chunks:
            return
        toks = all_tokens(req)
        hashes = r.chains.upto(toks, max(chunks) + 1)
        ents, evs = [], []
        for c in chunks:
            for g in range(self.ng):
                ids = tuple(r.block_ids_g[g][c * self.k:(c + 1) * self.k])
                if self.groups:
                    if len(ids) < self.k or 0 in ids:
                        continue  # a sliding window's null blocks: nothing to save
                    ents.append((group_hash(hashes[c], g), ids, g))
                else:
                    ents.append((hashes[c], ids))
                evs.append((hashes[c - 1] if c else None,
                            list(toks[c * self.cs:(c + 1) * self.cs])) if g == 0 else None)
        if not ents:
            return
        ss = SaveSpec(r.req_id, ents)
        if self.events_on:
            ss.events = evs
        plan.saves.append(ss)
        r.saved_any = True

    # -- request_finished
    def finished(self, request, block_ids):
        r = self._reqs.get(request.request_id)
        if r is not None:
            r.done = True
        if self.async_save and r is not None and r.saved_any:
            return True, None
        return False, None

    # -- update_connector_output / take_events
    def connector_output(self, out):
        if self.cost is not None:
            self._measure(out)
        bad = getattr(out, "invalid_block_ids", None)
        if bad:
            # a failed load: vLLM recomputes from the first bad block, and the workers did
            # not save on top of it; save those chunks again once they are recomputed
            for r in self._reqs.values():
                for i, b in enumerate(r.block_ids):
                    if b in bad:
                        r.next_save = min(r.next_save, i // self.k)
                        break
        evs = getattr(out, "kv_cache_events", None)
        if evs is not None and self.events_on:
            get = getattr(evs, "get_all_events", None)
            self._events.extend(get() if get is not None else evs)

    def take_events(self):
        out, self._events = self._events, []
        return out

    def _measure(self, out):
        """Feed the break-even estimate: the step just run (if it loaded nothing) and the
        loads the workers completed (their stats, aggregated into out by vLLM)."""
        if self._step_t0 is not None and self._step_tokens:
            self.cost.add_step(self._step_tokens, (time.perf_counter() - self._step_t0) * 1e3)
        self._step_t0 = None
        data = getattr(getattr(out, "kv_connector_stats", None), "data", None) or {}
        for tokens, ms in data.get("load_cost_obs", ()):
            self.cost.add_load(tokens, ms)

