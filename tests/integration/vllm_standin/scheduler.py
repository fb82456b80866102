"""Scheduler stand-in: vllm/v1/core/sched/scheduler.py + kv_cache_manager.py, reduced.

Call order per step (reference §1.6): running requests first (allocate, preempt on failure),
then waiting requests (only when nothing was preempted): local prefix-cache lookup ->
connector.get_num_new_matched_tokens -> allocate_slots -> connector.update_state_after_alloc
-> build SchedulerOutput -> connector.build_connector_meta -> advance num_computed_tokens.
update_from_output: invalid blocks (recompute policy) -> sampled tokens / stop -> request_finished
(delayed free) -> finished_recving / finished_sending."""

import enum
import hashlib
import struct
from collections import deque
from dataclasses import dataclass, field


def torch_uint8():
    import torch

    return torch.uint8


@dataclass
class PlaceholderRange:  # vllm.multimodal.inputs.PlaceholderRange
    offset: int
    length: int


@dataclass
class MultiModalFeatureSpec:  # vllm.multimodal.inputs.MultiModalFeatureSpec, reduced
    identifier: str
    mm_position: PlaceholderRange
    modality: str = "image"


@dataclass
class LoRARequest:  # vllm.lora.request.LoRARequest, reduced
    lora_name: str
    lora_int_id: int = 1
    lora_path: str = ""


class RequestStatus(enum.Enum):
    WAITING = 1
    WAITING_FOR_REMOTE_KVS = 2
    RUNNING = 3
    PREEMPTED = 4
    FINISHED = 5


class Request:
    def __init__(self, request_id, prompt_token_ids, max_tokens=4, cache_salt=None,
                 block_size=16, lora_request=None, mm_features=None, prompt_embeds=None,
                 skip_reading_prefix_cache=False):
        self.request_id = request_id
        self.lora_request = lora_request  # .lora_name, .lora_int_id
        self.mm_features = list(mm_features or [])  # .identifier, .mm_position.offset/length
        self.prompt_embeds = prompt_embeds  # tensor [num_prompt_tokens, hidden] or None
        self.skip_reading_prefix_cache = skip_reading_prefix_cache
        self.prompt_token_ids = list(prompt_token_ids)
        self._all = list(prompt_token_ids)
        self.output_token_ids = []
        self.max_tokens = max_tokens
        self.cache_salt = cache_salt
        self.num_computed_tokens = 0
        self.num_external_computed_tokens = 0
        self.num_preemptions = 0
        self.status = RequestStatus.WAITING
        self.block_size = block_size
        self.block_hashes = []
        self.kv_transfer_params = None
        self._hash_blocks()

    @property
    def all_token_ids(self):
        return self._all

    @property
    def num_tokens(self):
        return len(self._all)

    @property
    def num_prompt_tokens(self):
        return len(self.prompt_token_ids)

    def append_output(self, tok):
        self.output_token_ids.append(tok)
        self._all.append(tok)
        self._hash_blocks()

    def _hash_blocks(self):
        """vLLM's per-request block hasher (full blocks, chained; extra keys as vLLM's
        generate_block_hash_extra_keys: LoRA name, overlapping multimodal identifiers, the
        block's prompt embeddings, the salt in the first block)."""
        bs = self.block_size
        while (len(self.block_hashes) + 1) * bs <= len(self._all):
            i = len(self.block_hashes)
            parent = self.block_hashes[-1] if i else b"none"
            toks = self._all[i * bs:(i + 1) * bs]
            h = hashlib.sha256(parent + struct.pack("<%dI" % bs, *toks))
            if self.lora_request is not None:
                h.update(b"lora:" + self.lora_request.lora_name.encode())
            for f in self.mm_features:
                p = f.mm_position
                if p.offset < (i + 1) * bs and p.offset + p.length > i * bs:
                    h.update(b"mm:" + f.identifier.encode())
            if self.prompt_embeds is not None and i * bs < len(self.prompt_embeds):
                rows = self.prompt_embeds[i * bs:(i + 1) * bs].contiguous()
                h.update(rows.reshape(-1).view(torch_uint8()).numpy().tobytes())
            if i == 0 and self.cache_salt:
                h.update(self.cache_salt.encode())
            self.block_hashes.append(h.digest())


class KVCacheBlock:
    __slots__ = ("block_id", "ref_cnt", "block_hash", "is_null")

    def __init__(self, block_id):
        self.block_id, self.ref_cnt, self.block_hash = block_id, 0, None
        self.is_null = block_id == 0


class KVCacheBlocks:
    def __init__(self, blocks):
        self.blocks = (list(blocks),)

    def get_block_ids(self):
        return ([b.block_id for b in self.blocks[0]],)


class BlockPool:
    """Block 0 is the null block (never handed out). Freed blocks keep their hash (prefix
    cache) until reused; allocation takes the least recently freed block."""

    def __init__(self, num_blocks, enable_caching=True):
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free = deque(self.blocks[1:])
        self.cached = {}
        self.enable_caching = enable_caching

    def num_free(self):
        return len(self.free)

    def get_new_blocks(self, n):
        assert n <= len(self.free)
        out = []
        for _ in range(n):
            b = self.free.popleft()
            if b.block_hash is not None and self.cached.get(b.block_hash) is b:
                del self.cached[b.block_hash]
            b.block_hash = None
            b.ref_cnt = 1
            out.append(b)
        return out

    def touch(self, blocks):
        for b in blocks:
            if b.ref_cnt == 0:
                self.free.remove(b)
            b.ref_cnt += 1

    def free_blocks(self, blocks):
        for b in blocks:
            b.ref_cnt -= 1
            assert b.ref_cnt >= 0
            if b.ref_cnt == 0:
                self.free.append(b)

    def cache_full_blocks(self, blocks, hashes, n_full):
        if not self.enable_caching:
            return
        for i in range(min(n_full, len(hashes), len(blocks))):
            b = blocks[i]
            if b.block_hash is None and hashes[i] not in self.cached:
                b.block_hash = hashes[i]
                self.cached[hashes[i]] = b

    def uncache(self, block_ids):
        for i in block_ids:
            b = self.blocks[i]
            if b.block_hash is not None and self.cached.get(b.block_hash) is b:
                del self.cached[b.block_hash]
            b.block_hash = None


class KVCacheManager:
    def __init__(self, num_blocks, block_size, enable_caching=True):
        self.pool = BlockPool(num_blocks, enable_caching)
        self.bs = block_size
        self.req_blocks = {}
        self.enable_caching = enable_caching

    def get_computed_blocks(self, req):
        if not self.enable_caching or req.skip_reading_prefix_cache:
            return [], 0
        out = []
        max_blocks = (req.num_tokens - 1) // self.bs  # at least one token to compute
        for h in req.block_hashes[:max_blocks]:
            b = self.pool.cached.get(h)
            if b is None:
                break
            out.append(b)
        return out, len(out) * self.bs

    def allocate_slots(self, req, num_new, num_local=0, local_blocks=(), num_external=0,
                       delay_cache_blocks=False):
        blocks = self.req_blocks.get(req.request_id, [])
        computed = req.num_computed_tokens + num_local + num_external
        need_tokens = computed + num_new
        n_need = -(-need_tokens // self.bs) - len(blocks) - len(local_blocks)
        if n_need > self.pool.num_free() - sum(1 for b in local_blocks if b.ref_cnt == 0):
            return None
        if local_blocks:
            self.pool.touch(local_blocks)
            blocks = list(local_blocks) + blocks
        new = self.pool.get_new_blocks(max(0, n_need))
        blocks = blocks + new
        self.req_blocks[req.request_id] = blocks
        if not delay_cache_blocks:
            n_full = min(need_tokens, req.num_tokens) // self.bs
            self.pool.cache_full_blocks(blocks, req.block_hashes, n_full)
        return KVCacheBlocks(new)

    def get_blocks(self, req_id):
        return KVCacheBlocks(self.req_blocks.get(req_id, []))

    def get_block_ids(self, req_id):
        return [b.block_id for b in self.req_blocks.get(req_id, [])]

    def free(self, req):
        blocks = self.req_blocks.pop(req.request_id, [])
        self.pool.free_blocks(list(reversed(blocks)))


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list
    block_ids: tuple
    num_computed_tokens: int
    cache_salt: object = None


@dataclass
class CachedRequestData:
    req_ids: list = field(default_factory=list)
    resumed_req_ids: set = field(default_factory=set)
    new_token_ids: list = field(default_factory=list)
    all_token_ids: dict = field(default_factory=dict)
    new_block_ids: list = field(default_factory=list)
    num_computed_tokens: list = field(default_factory=list)
    num_output_tokens: list = field(default_factory=list)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    finished_req_ids: set
    preempted_req_ids: set
    kv_connector_metadata: object = None
    has_sync_kv_loads: bool = False  # newest: a request loads synchronously in this step
    scheduled_spec_decode_tokens: dict = field(default_factory=dict)


@dataclass
class KVConnectorOutput:
    finished_sending: set = None
    finished_recving: set = None
    invalid_block_ids: set = field(default_factory=set)
    kv_connector_stats: object = None
    failed_recving: set = None  # newest: failed receives (also in finished_recving)
    kv_cache_events: object = None  # newest: the workers' KV events, aggregated


@dataclass
class ModelRunnerOutput:
    sampled: dict  # req_id -> token id (only requests whose prefill reached the end)
    kv_connector_output: KVConnectorOutput = None
    logits: dict = field(default_factory=dict)


class Scheduler:
    def __init__(self, vllm_config, connector, num_blocks):
        sc = vllm_config.scheduler_config
        self.bs = vllm_config.cache_config.block_size
        self.max_tokens = sc.max_num_batched_tokens
        self.max_seqs = sc.max_num_seqs
        self.connector = connector
        self.kv = KVCacheManager(num_blocks, self.bs, vllm_config.cache_config.enable_prefix_caching)
        self.waiting = deque()
        self.running = []
        self.requests = {}
        self.finished_req_ids = set()
        self.finished_recving = set()
        self.delayed_free = {}
        self.delayed_ever = set()
        self.finished = {}
        self.ext_tokens = {}  # req_id -> num_external_computed_tokens granted (last time)
        self.policy = vllm_config.kv_transfer_config.kv_load_failure_policy
        self.events = []  # what connector.take_events() gave (published by vLLM)
        self.failed_recving = set()  # every request reported in failed_recving
        self._sync_loads = False

    def reset_prefix_cache(self, reset_connector=False):
        """vLLM's Scheduler.reset_prefix_cache (after a weight update): refused while blocks
        are in use; clears the local prefix cache, and with reset_connector the connector's
        (reset_connector_cache -> connector.reset_cache())."""
        if any(b.ref_cnt for b in self.kv.pool.blocks[1:]):
            return False
        for b in self.kv.pool.blocks:
            b.block_hash = None
        self.kv.pool.cached.clear()
        if reset_connector:
            return self.connector.reset_cache() is not False
        return True

    def add_request(self, req):
        req.block_size = self.bs
        self.requests[req.request_id] = req
        self.waiting.append(req)

    def has_work(self):
        return bool(self.waiting or self.running or self.delayed_free)

    # ------------------------------------------------------------ schedule
    def schedule(self):
        budget = self.max_tokens
        nst, new_reqs, cached = {}, [], CachedRequestData()
        preempted = set()
        scheduled_running = []
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if n <= 0:
                i += 1
                continue
            while True:
                new = self.kv.allocate_slots(req, n)
                if new is not None:
                    break
                victim = self.running.pop()
                self._preempt(victim)
                preempted.add(victim.request_id)
                if victim is req:
                    break
            if req.request_id in preempted:
                break
            nst[req.request_id] = n
            budget -= n
            scheduled_running.append((req, new))
            i += 1
        for req, new in scheduled_running:
            cached.req_ids.append(req.request_id)
            cached.new_block_ids.append(new.get_block_ids() if new.blocks[0] else None)
            cached.num_computed_tokens.append(req.num_computed_tokens)
            cached.num_output_tokens.append(len(req.output_token_ids))
        if not preempted:
            budget = self._schedule_waiting(budget, nst, new_reqs, cached)
        so = SchedulerOutput(new_reqs, cached, nst, sum(nst.values()),
                             set(self.finished_req_ids), preempted)
        so.has_sync_kv_loads, self._sync_loads = self._sync_loads, False
        so.kv_connector_metadata = self.connector.build_connector_meta(so)
        for rid, n in nst.items():
            self.requests[rid].num_computed_tokens += n
        self.finished_req_ids = set()
        return so

    def _preempt(self, req):
        self.kv.free(req)
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(req)

    def _schedule_waiting(self, budget, nst, new_reqs, cached):
        skipped = deque()
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            req = self.waiting[0]
            if req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                if req.request_id not in self.finished_recving:
                    skipped.append(self.waiting.popleft())
                    continue
                self._promote_remote(req)
            local_blocks, local, ext, is_async = [], req.num_computed_tokens, 0, False
            if req.num_computed_tokens == 0:
                local_blocks, local = self.kv.get_computed_blocks(req)
                ext, is_async = self.connector.get_num_new_matched_tokens(req, local)
                if ext is None:
                    skipped.append(self.waiting.popleft())
                    continue
                assert ext >= 0 and (ext > 0 or not is_async)
            num_computed = local + ext
            if is_async:
                n = 0
            else:
                n = min(req.num_tokens - num_computed, budget)
                assert n > 0, "connector left no token to compute (num_new_tokens > 0)"
            new = self.kv.allocate_slots(req, n, local if req.num_computed_tokens == 0 else 0,
                                         local_blocks, ext, delay_cache_blocks=is_async)
            if new is None:
                break
            self.connector.update_state_after_alloc(req, self.kv.get_blocks(req.request_id), ext)
            self.waiting.popleft()
            req.num_external_computed_tokens = ext
            self.ext_tokens[req.request_id] = ext
            if is_async:
                req.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                req.num_computed_tokens = 0
                skipped.append(req)
                continue
            resumed = req.status == RequestStatus.PREEMPTED
            self._sync_loads |= ext > 0
            req.status = RequestStatus.RUNNING
            req.num_computed_tokens = num_computed
            self.running.append(req)
            nst[req.request_id] = n
            budget -= n
            ids = self.kv.get_block_ids(req.request_id)
            if resumed:
                cached.req_ids.append(req.request_id)
                cached.resumed_req_ids.add(req.request_id)
                cached.new_block_ids.append((ids,))
                cached.num_computed_tokens.append(num_computed)
                cached.num_output_tokens.append(len(req.output_token_ids))
                cached.all_token_ids[req.request_id] = list(req.all_token_ids)
            else:
                new_reqs.append(NewRequestData(req.request_id, list(req.prompt_token_ids),
                                               (ids,), num_computed, req.cache_salt))
        self.waiting.extendleft(reversed(skipped))
        return budget

    def _promote_remote(self, req):
        self.finished_recving.discard(req.request_id)
        n = len(self.kv.get_block_ids(req.request_id)) * self.bs
        n = min(n, req.num_tokens)
        if n == req.num_tokens:
            n -= 1
        cap = getattr(req, "remote_cap", None)
        if cap is not None:
            n = min(n, cap)
            del req.remote_cap
        req.num_computed_tokens = n
        blocks = self.kv.req_blocks.get(req.request_id, [])
        self.kv.pool.cache_full_blocks(blocks, req.block_hashes, n // self.bs)
        req.status = RequestStatus.WAITING

    # ------------------------------------------------------------ update_from_output
    def update_from_output(self, so, out):
        kvo = out.kv_connector_output or KVConnectorOutput()
        failed = self._handle_invalid(kvo.invalid_block_ids or set(), so)
        for rid in list(so.num_scheduled_tokens):
            req = self.requests.get(rid)
            if req is None or req.status != RequestStatus.RUNNING or rid in failed:
                continue
            if rid in out.sampled and req.num_computed_tokens >= req.num_tokens:
                req.append_output(out.sampled[rid])
                if len(req.output_token_ids) >= req.max_tokens:
                    self._finish(req)
        self.connector.update_connector_output(kvo)
        for rid in kvo.finished_recving or ():
            self.finished_recving.add(rid)
        self.failed_recving |= set(kvo.failed_recving or ())
        for rid in kvo.finished_sending or ():
            req = self.delayed_free.pop(rid, None)
            if req is not None:
                self.kv.free(req)
        self.events.extend(self.connector.take_events() or ())

    def _handle_invalid(self, invalid, so):
        """kv_load_failure_policy=recompute: truncate to the first bad block, drop the token."""
        if not invalid:
            return set()
        self.kv.pool.uncache(invalid)
        affected = set()
        for req in self.running:
            ids = self.kv.get_block_ids(req.request_id)
            for idx, b in enumerate(ids):
                if b in invalid and idx * self.bs < req.num_computed_tokens:
                    req.num_computed_tokens = idx * self.bs
                    affected.add(req.request_id)
                    break
        for req in self.waiting:  # async loads: promote only up to the first bad block
            if req.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                continue
            for idx, b in enumerate(self.kv.get_block_ids(req.request_id)):
                if b in invalid:
                    req.remote_cap = min(getattr(req, "remote_cap", idx * self.bs),
                                         idx * self.bs)
                    affected.add(req.request_id)
                    break
        if affected and self.policy == "fail":
            raise RuntimeError("KV load failed for %s" % sorted(affected))
        return affected

    def abort(self, req_id):
        """The client went away (vLLM finish_requests with FINISHED_ABORTED)."""
        req = self.requests[req_id]
        if req in self.waiting:
            self.waiting.remove(req)
            self.running.append(req)  # _finish removes it
        if req.status != RequestStatus.FINISHED:
            self._finish(req)

    def _finish(self, req):
        req.status = RequestStatus.FINISHED
        self.running.remove(req)
        delay, _ = self.connector.request_finished(req, self.kv.get_block_ids(req.request_id))
        if delay:
            self.delayed_free[req.request_id] = req
            self.delayed_ever.add(req.request_id)
        else:
            self.kv.free(req)
        self.finished_req_ids.add(req.request_id)
        self.finished[req.request_id] = req

    def assert_empty(self):
        assert not self.waiting and not self.running and not self.delayed_free
        assert not self.kv.req_blocks, self.kv.req_blocks
        pool = self.kv.pool
        assert len(pool.free) == len(pool.blocks) - 1, "leaked blocks"
        assert all(b.ref_cnt == 0 for b in pool.blocks)
