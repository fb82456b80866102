"""Worker side of the OpenLake connector: moves whole chunks of paged KV blocks.

One instance per TP/PP rank. By default loads run in start_load_kv (all layers, before the
forward), saves in wait_for_save (all layers, after it): nothing depends on per-layer hooks,
so CUDA graphs and any attention backend work. With `layerwise`, each chunk is one pool
object per layer: start_load_kv hands the step's loads to a thread that fetches layer 0, 1,
... in order, wait_for_layer_load(i) waits for layer i only, and save_kv_layer(i) queues
layer i's objects as soon as the layer is computed. Contiguous CPU blocks go straight from
the paged tensors to the pool (one iovec per block half, no copy); other tensors (CUDA,
strided, bhnc) are staged through the reusable slabs of a StagingPool, copied on the copy
engine's own CUDA stream (staging.py): a load is done once its copy's event completed, a save
reads its slab once its device-to-host copy's event completed. On CPU tensors the same code
runs with the engine's CPU twin (staging = "always" forces it for zero-copy layouts)."""

import ctypes
import queue
import re
import threading
import time

from .connector_config import worker_rank
from .keys import layer_hash, rank_key, rank_keys
from .layouts import PagedKV
from .staging import CopyEngine, StagingPool
from .store import (CHECKSUM_AT, FLAG_CRC, TRAILER, TRAILER_LEN, Hashed, StoreDown,
                    check_trailer, device_trailer, make_trailer)

_np = False  # numpy, imported at the first load: importing the connector imports none


def _numpy():
    """numpy for the fast load path's arrays (connector_bulk; vLLM always has numpy), or
    None: then every load takes the per-chunk path."""
    global _np
    if _np is False:
        try:
            import numpy
            _np = numpy
        except ImportError:  # pragma: no cover
            _np = None
    return _np


class _Job:
    """One chunk of one request: its key, memory ranges and what to do after."""

    __slots__ = ("req_id", "key", "ids", "skip", "ranges", "trailer", "keep", "stage", "h",
                 "ev", "g", "layer", "slab", "copy_ev", "why", "dev", "state")

    def __init__(self, req_id, key, ids, skip=0, h=None, ev=None, g=0, layer=None):
        self.req_id, self.key, self.ids, self.skip = req_id, key, ids, skip
        self.g = g  # KV cache group (hybrid models): its layers and block ids
        self.layer = layer  # layerwise: the one layer this object holds (None: all)
        self.h, self.ev = h, ev  # chain hash; KV event data (parent hash, token ids)
        self.ranges, self.keep, self.stage = [], [], None
        self.slab, self.copy_ev = None, None  # staged: its StagingPool slab, D2H event
        self.why = None  # staged loads: the check's verdict, taken before the slab went back
        self.dev = None  # GPU codec: the image + trailer on the device (the value's plain form)
        self.state = None  # GPU codec load: the decode's host state (its blocks' statuses)
        self.trailer = ctypes.create_string_buffer(TRAILER_LEN)

    def iovs(self):
        if self.dev is not None:  # the GPU codec's stored form: trailer inside
            return self.ranges
        return self.ranges + [(ctypes.addressof(self.trailer), TRAILER_LEN)]


class _Pipe:
    """One step's synchronous loads, moved layer by layer on the layer thread. done[i] is set
    once layer i is in the paged tensors (or failed); invalid / failed gather the failures
    (under lock); waited holds the layers the forward waited for."""

    def __init__(self, loads, nl):
        self.loads, self.nl = loads, nl
        self.done = [threading.Event() for _ in range(nl)]
        self.done_t = [None] * nl  # perf_counter when each layer was done
        self.ev = [None] * nl  # each layer's last copy event (staged loads)
        self.t0 = time.perf_counter()
        self.lock = threading.Lock()
        self.invalid, self.failed = set(), set()
        self.waited = set()


class WorkerSide:
    def __init__(self, cfg, ident, geo, vllm_config, num_blocks, store, rec, warn, groups=None):
        self.cfg, self.ident, self.geo = cfg, ident, geo
        self.store, self.rec, self.warn = store, rec, warn
        self.num_blocks = num_blocks
        self.tp_rank, self.pp_rank = worker_rank(vllm_config, geo)
        tp = 1 if geo.use_mla else geo.tp_size
        self.key_rank = self.pp_rank * tp + (0 if geo.use_mla else self.tp_rank)
        self.saves_enabled = not (geo.use_mla and self.tp_rank != 0)
        self.kv = None
        self.groups = groups  # connector_groups.Group list of a hybrid model, else None
        self.kvs, self.payloads = [], []  # per group
        self.disabled = "no KV caches registered"
        self._invalid = set()
        self._failed_reqs = set()  # requests whose load failed in this step: no saves
        self._seen_save = set()  # requests that had saves (they are reported when finished)
        self._done_wait = set()  # finished requests whose saves may still be running
        self._pending = {}
        self._lock = threading.Lock()
        self._saver = None
        self._loader = None
        self._recv_done = {}
        self._loaded_keys = []  # their leases end after this step's forward
        self.layerwise = cfg.layerwise  # (off for hybrid models: the connector decides)
        self._pipe = None  # this step's layer-wise load
        self.last_pipe = None  # the latest one (its per-layer times, for tests and benches)
        self._lq = None  # the layer thread's queue
        self._saved_layers = set()  # layers save_kv_layer queued in this step
        self._layer_index = {}
        self.engine = None  # CopyEngine and StagingPool of staged tensors (register)
        self.staging = None
        self.cross = False  # registered through register_cross_layers_kv_cache
        self.codec = None  # GpuCodec: compress=exans on the KV device (staged tensors only)
        self.raw_store = None  # its puts and gets: the stored form as is (compression off)
        self.codec_bytes = [0, 0]  # GPU codec saves: plain bytes in, stored bytes out
        self._load_after = None  # staged loads' copies wait for this mark (start_load_kv)
        self._save_gather = None  # the step's last save gather: the next forward waits for it
        # KV events: one rank speaks for all (a chunk is there when every rank stored it)
        self.events_on = cfg.kv_events and self.tp_rank == 0
        self._events = []
        # the pool's own removals of what we stored or loaded: BlockRemoved (polled)
        self.removals = None
        if self.events_on and cfg.events_poll_ms > 0:
            from .connector_removals import RemovalWatch

            self.removals = RemovalWatch(store, cfg.events_poll_ms, self._removed, rec, warn,
                                         cfg.events_map_keys, self._other_ranks_keys())
        if cfg.async_save or cfg.layerwise:  # layer saves overlap the forward
            self._saver = queue.Queue()
            self._thread = threading.Thread(target=self._save_loop, name="openlake-save",
                                            daemon=True)
            self._thread.start()

    # -- register_kv_caches
    def register(self, kv_caches):
        if self.groups:  # hybrid: one PagedKV per group (groups may differ in shape)
            from .connector_groups import unsupported

            why = unsupported(self.groups, self.geo.block_size)
            if why:  # the scheduler side neither loads nor saves: nothing to register
                self.disabled = why
                return
            try:
                kvs = [PagedKV({n: kv_caches[n] for n in g.layer_names}, self.num_blocks,
                               self.geo.block_size, self._stage_all()) for g in self.groups]
            except (KeyError, ValueError) as e:
                self.disabled = "KV cache groups do not match the KV caches: %s" % e
                self.warn("register", "openlake: connector disabled: %s", self.disabled)
                return
        else:
            try:
                kvs = [PagedKV(kv_caches, self.num_blocks, self.geo.block_size,
                               self._stage_all())]
            except ValueError as e:
                self.disabled = "unsupported KV cache: %s" % e
                self.warn("register", "openlake: connector disabled: %s", self.disabled)
                return
        self._use(kvs)

    def _stage_all(self):
        return self.cfg.staging == "always"

    def register_cross(self, kv_cache, attn_backend=None, shared_by=None):
        """register_cross_layers_kv_cache: one tensor for every layer (vLLM allocates it
        when prefer_cross_layer_blocks is True), in the physical order attn_backend gives
        (PagedKV.cross_layer). shared_by: kv_cache_config's layer names of each index (vLLM
        fills index i from kv_cache_tensors[i]); without it a layer name maps to the first
        integer in it (vLLM's extract_layer_index), so the hooks of layerwise find their
        layer either way."""
        if self.groups:
            self.disabled = "cross-layer KV cache with several KV cache groups"
            self.warn("register", "openlake: connector disabled: %s", self.disabled)
            return
        try:
            kv = PagedKV.cross_layer(kv_cache, attn_backend, self.num_blocks,
                                     self.geo.block_size, self._stage_all())
        except ValueError as e:
            self.disabled = "unsupported cross-layer KV cache: %s" % e
            self.warn("register", "openlake: connector disabled: %s", self.disabled)
            return
        self.cross = True
        self._use([kv])
        if shared_by and len(shared_by) == len(kv.tensors):
            for i, names in enumerate(shared_by):
                self._layer_index.update((n, i) for n in names)

    def _use(self, kvs):
        kv = kvs[0]
        if any((k.family == "mla") != self.geo.use_mla for k in kvs):
            self.disabled = "KV layout %s does not match use_mla=%s" % (kv.layout,
                                                                        self.geo.use_mla)
            self.warn("register", "openlake: connector disabled: %s", self.disabled)
            return
        if self.layerwise and len(kv.tensors) != self.geo.num_layers:
            self.disabled = "layerwise: %d KV caches registered, the model has %s layers" % (
                len(kv.tensors), self.geo.num_layers)
            self.warn("register", "openlake: connector disabled: %s", self.disabled)
            return
        self._layer_index = {n: i for i, n in enumerate(kv.names)}
        self.chunk_blocks = self.cfg.chunk_size // self.geo.block_size
        self.kv = kv
        self.kvs = kvs
        self.payloads = [k.block_bytes * self.chunk_blocks for k in kvs]
        self.payload = self.payloads[0]
        if not all(k.zero_copy for k in kvs):  # staged: slabs of one whole chunk each
            self.engine = CopyEngine(kv.device)
            self._open_codec(kv.device)
            slab = max(self.payloads)
            if self.codec is not None:  # a slab holds a chunk's stored form
                slab = self.codec.bound(slab + TRAILER_LEN)
            self.staging = StagingPool(slab, self.cfg.staging_mb << 20, self.engine.cuda)
        self.disabled = ""

    def _open_codec(self, device):
        """compress=exans with staged tensors: ExANS on their device (gpu_codec auto: CUDA
        tensors and libol_exans_gpu found; always: the CPU twin on CPU tensors too)."""
        mode = self.cfg.gpu_codec
        if self.cfg.compress != "exans" or mode == "off" or \
                (mode == "auto" and not self.engine.cuda):
            return
        import dataclasses

        from .gpu_codec import GpuCodec
        from .store import Store

        self.codec = GpuCodec.open(device, self.engine.stream, self.engine.empty)
        if self.codec is None:
            self.warn("gpu-codec", "openlake: gpu_codec: libol_exans_%s not found: blocks are "
                      "compressed on the host", "gpu" if self.engine.cuda else "twin")
            return
        self.raw_store = Store(dataclasses.replace(self.cfg, compress="off"), self.warn)

    def _layer_of(self, name):
        """Index of layer `name` (a cross-layer cache: the first integer in the name)."""
        i = self._layer_index.get(name)
        if i is None and self.cross:
            m = re.search(r"\d+", name)
            i = int(m.group()) if m and int(m.group()) < len(self.kv.tensors) else None
        return i

    # -- memory of one chunk
    def _payload(self, job):
        return self._payload_of(job.g, job.layer)

    def _payload_of(self, g, layer):
        if layer is None:
            return self.payloads[g]
        return self.kvs[g].image_bytes(self.chunk_blocks, layer)

    def _key(self, h, layer):
        return rank_key(h if layer is None else layer_hash(h, layer), self.key_rank)

    def _ranges(self, job, for_load):
        kv, payload, lay = self.kvs[job.g], self._payload(job), job.layer
        if kv.zero_copy:
            if for_load and job.skip:
                # blocks already local must not be written: send them to a scratch area
                scratch = ctypes.create_string_buffer(kv.image_bytes(job.skip, lay))
                job.keep.append(scratch)
                base = ctypes.addressof(scratch)
                per = {b: i for i, b in enumerate(job.ids[:job.skip])}
                out = []
                for (addr, n), b in zip(kv.iovs(job.ids, lay),
                                        self._iov_blocks(kv, job.ids, lay)):
                    if b in per:
                        out.append((base, n))
                        base += n
                    else:
                        out.append((addr, n))
                job.ranges = out
            else:
                job.ranges = kv.iovs(job.ids, lay)
            return
        slab = job.slab
        if slab is None:  # (a batch's slabs are taken at once: _take_slabs)
            slab = job.slab = self.staging.acquire(payload)[0]
        if self.codec is not None:
            self._codec_ranges(job, kv, slab, payload, for_load)
            return
        if not for_load:  # gather on the device, then D2H into the slab: _put waits for it
            if not self.engine.cuda:
                job.copy_ev = self.engine.run(lambda: kv.pack(job.ids, slab.buf, lay))[1]
                self._save_gather = job.copy_ev
            else:
                img = self.engine.empty(payload)
                self._save_gather = self.engine.run(lambda: kv.pack(job.ids, img, lay))[1]
                job.copy_ev = self.engine.copy(slab.buf[:payload], img)
        job.stage = slab.buf
        job.ranges = [(slab.buf.data_ptr(), payload)]

    def _codec_ranges(self, job, kv, slab, payload, for_load):
        """GPU codec: a load gets the stored form into the slab; a save packs the image and
        its trailer on the device now (the trailer's XXH3 taken there for the whole batch by
        _codec_sums: the sum a host save writes), encoded and copied out by _encode_out
        before its put. The device image lives in the slab's device buffer (one per slab,
        made once)."""
        import torch

        if slab.dev is None:  # image + trailer
            slab.dev = self.engine.empty(max(self.payloads) + TRAILER_LEN)
        job.stage = slab.buf
        job.dev = slab.dev[:payload + TRAILER_LEN]
        job.ranges = [(slab.buf.data_ptr(), self.staging.slab_bytes)]
        if for_load:
            return
        # the trailer goes up from the (pinned) slab's last bytes: no pageable copy, no wait;
        # the stored form copied down later lands there only after (one stream)
        tr = slab.buf[self.staging.slab_bytes - TRAILER_LEN:]
        tr.copy_(torch.frombuffer(bytearray(device_trailer(job.key, payload, self.cfg.verify)),
                                  dtype=torch.uint8))
        cuda = self.engine.cuda

        def fn():
            kv.pack(job.ids, job.dev, job.layer, non_blocking=cuda)
            job.dev[payload:].copy_(tr, non_blocking=cuda)
        job.copy_ev = self._save_gather = self.engine.run(fn)[1]

    def _codec_sums(self, jobs):
        """GPU codec save of a batch: every image's XXH3 into its trailer's checksum field,
        all in one launch queued after their gathers (same stream); the jobs' events become
        the one recorded after it."""
        jobs = [j for j in jobs if j.dev is not None]
        if not jobs or not self.cfg.verify:
            return
        sums = []
        for j in jobs:
            payload = self._payload(j)
            sums.append((j.dev.data_ptr(), payload, j.dev.data_ptr() + payload + CHECKSUM_AT))
        ev = self.engine.run(lambda: self.codec.xxh3_batch(sums), None)[1]
        self._save_gather = ev
        for j in jobs:
            j.copy_ev = ev

    def _encode_out(self, jobs):
        """GPU codec save of a batch: encode the device images (after their gathers: same
        stream) with one wait for all their lengths, and queue each stored form's copy to
        its slab; job.copy_ev is that copy."""
        def emit(i, stored):
            j, n = jobs[i], stored.numel()
            j.copy_ev = self.engine.copy(j.stage[:n], stored)
            j.ranges = [(j.stage.data_ptr(), n)]
            with self._lock:
                self.codec_bytes[0] += j.dev.numel()
                self.codec_bytes[1] += n
        self.engine.run(lambda: self.codec.encode_batch([j.dev for j in jobs], emit), None)

    def _decode_in(self, job, status, n, state):
        """GPU codec load: the stored form (n bytes in the slab) to the device, its decode
        into job.dev (image + trailer) queued on the copy stream, the blocks' statuses to
        state. '' or why the chunk is bad; its blocks' statuses and its trailer are checked
        with the batch's by _check_decoded (one wait)."""
        from .client import Status

        if status is None:
            return "pool unreachable"
        if status != Status.OK:
            return str(status)
        payload = self._payload(job)
        d_val = self.codec.buffer("val", n)[:n]
        self.engine.copy(d_val, job.stage[:n], self._load_after)  # decode: same stream
        try:
            m = self.engine.run(
                lambda: self.codec.decode_start(job.stage, d_val, n, job.dev, state), None)[0]
        except OSError as e:
            return "corrupt: %s" % e.strerror
        if m != payload + TRAILER_LEN:
            return "size %d, expected %d" % (m, payload + TRAILER_LEN)
        job.state = state
        return ""

    def _check_decoded(self, jobs):
        """The blocks' statuses and the trailers of a batch's decoded chunks, checked against
        the XXH3 of their images taken on the device, as a host load checks them: every sum in
        one launch, then every trailer and sum to the host in one copy, which is the batch's
        one wait (the statuses have come by then). Sets each job's why."""
        verify, row = self.cfg.verify, TRAILER_LEN + 4
        tab = self.codec.buffer("checks", len(jobs) * row)

        def fn():
            sums = []
            for i, j in enumerate(jobs):
                payload = self._payload(j)
                tab[i * row:i * row + TRAILER_LEN].copy_(j.dev[payload:payload + TRAILER_LEN])
                sums.append((j.dev.data_ptr(), payload, tab.data_ptr() + i * row + TRAILER_LEN))
            if verify:
                self.codec.xxh3_batch(sums)
            return bytes(tab[:len(jobs) * row].cpu().numpy())
        got = self.engine.run(fn, None)[0]  # the one wait: the decodes' statuses too
        for i, j in enumerate(jobs):
            payload, g = self._payload(j), got[i * row:(i + 1) * row]
            try:
                self.codec.decode_finish(j.state)
            except OSError as e:
                j.why = "corrupt: %s" % e.strerror
                continue
            tr, rng = g[:TRAILER_LEN], Hashed([], int.from_bytes(g[TRAILER_LEN:], "little"))
            if verify and TRAILER.unpack(tr)[1] & FLAG_CRC:  # CRC-32 (no libxxhash where saved)
                self.engine.run(lambda: j.stage[:payload].copy_(j.dev[:payload]), None)
                rng = [(j.stage.data_ptr(), payload)]
            why = check_trailer(tr, j.key, rng, payload, verify)
            j.why = ("bad block: " + why) if why else ""
            if not why:
                j.stage = j.dev  # what _slice and unpack read from now

    def _take_slabs(self, jobs):
        """Give every staged job of a batch its slab, all at once (a thread holds a whole
        batch's slabs or none: two threads never wait on each other's half)."""
        staged = [j for j in jobs if not self.kvs[j.g].zero_copy]
        if staged:
            for j, s in zip(staged, self.staging.acquire(self.staging.slab_bytes,
                                                         len(staged))):
                j.slab = s

    def _release(self, jobs, event=None):
        """Slabs of jobs go back (event: a copy still reading them)."""
        for j in jobs:
            if j.slab is not None:
                self.staging.release(j.slab, event)
                j.slab, j.stage, j.dev = None, None, None

    def _batches(self, jobs):
        """jobs cut so that one batch never needs more slabs than the pool has."""
        if self.staging is None:
            return [jobs] if jobs else []
        n = self.staging.nmax
        return [jobs[i:i + n] for i in range(0, len(jobs), n)]

    @staticmethod
    def _iov_blocks(kv, ids, layer=None):
        """The block id of each iovec kv.iovs(ids, layer) returns, in order."""
        out = []
        for i in kv._sel(layer):
            t, lay = kv.tensors[i], kv.layouts[i]
            segs = 1 if lay.block_dim == 0 else t.shape[0]
            for b in ids:
                out.extend([b] * segs)
        return out

    # -- start_load_kv
    def load(self, plan):
        if getattr(plan, "flush", False):
            self.flush()
        if self.engine is not None:  # loads write blocks only after what ran before them
            self._load_after = self.engine.mark()
        sync = [ls for ls in plan.loads if not ls.is_async]
        for ls in plan.loads:
            if ls.is_async:
                self._start_async_load(ls)
        if not sync:
            return
        if self.layerwise and not self.disabled:
            self._start_pipe(sync)
            return
        ev = self._load(sync, self._invalid, self._failed_reqs)
        if self.engine is not None:  # the forward reads the blocks after their copies
            self.engine.order_compute(ev)

    def _load(self, loads, invalid, failed, layer=None, timed=True):
        """Load every chunk of loads in one batch; bad blocks go to invalid. layerwise: the
        objects of one layer (layer), or of every layer (None: async loads). Returns the
        event of the last staged copy into the paged tensors (None: nothing staged)."""
        if self.disabled:
            for ls in loads:
                self._fail_request(ls.chunks, 0, invalid)
            return
        lays = [None] if not self.layerwise else \
            [layer] if layer is not None else list(range(len(self.kv.tensors)))
        if len(lays) == 1 and self._bulk_ok(loads):
            self._load_bulk(loads, invalid, failed, lays[0], timed)
            return None
        jobs = [_Job(ls.req_id, self._key(h, la), ids, skip, h, None, g[0] if g else 0, la)
                for ls in loads for h, ids, skip, *g in ls.chunks for la in lays]
        t0 = time.perf_counter()
        st, lens, ev = [], [], None
        for b in self._batches(jobs):  # staged: no more slabs at once than the pool has
            if self.staging is not None:
                self._take_slabs(b)
            try:
                for j in b:
                    self._ranges(j, True)
                s, n = self._get_iov(b)
                st += s
                lens += n
                if self.staging is not None:
                    ev = self._unpack_staged(b, s, n) or ev
            finally:
                if self.staging is not None:
                    self._release(b, ev)  # (normally done by _unpack_staged)
        if timed:
            self._timed(t0, sum(len(j.ids) - j.skip for j in jobs) // len(lays))
        self._finish_loads(loads, jobs, st, lens, invalid, failed, len(lays))
        self._leased([j.key for j in jobs])
        return ev

    def _get_iov(self, jobs):
        """The batch get. Staged chunks (one slab range, then the trailer) checked on the
        host have their image hashed by the get while it copies (no second pass over the
        slab): their ranges carry that XXH3."""
        store = self.raw_store if self.codec is not None else self.store
        keys, iovs = [j.key for j in jobs], [j.iovs() for j in jobs]
        hashed = self.cfg.verify and self.codec is None and jobs and \
            all(j.slab is not None for j in jobs)
        try:
            if not hashed:
                return store.call("get_iov", keys, iovs)
            st, lens, hs = store.call("get_iov", keys, iovs, 1)
        except StoreDown:
            return [None] * len(jobs), [0] * len(jobs)
        for j, h in zip(jobs, hs or ()):
            j.ranges = Hashed(j.ranges, h)
        return st, lens

    def _unpack_staged(self, jobs, st, lens):
        """Check each staged job of a batch and copy the good ones from their slabs into
        the paged tensors on the copy stream; the slabs go back with the last copy's event
        (one stream: it completes after every copy before it). Returns that event."""
        ev, decoded = None, []
        coded = [k for k, j in enumerate(jobs) if j.slab is not None and j.dev is not None]
        states = self.codec.decode_states(len(coded), max(jobs[k].dev.numel() for k in coded)) \
            if coded else []
        for k, state in zip(coded, states):  # GPU codec: decodes queued, then checked
            j = jobs[k]
            j.why = self._decode_in(j, st[k], lens[k], state)
            if not j.why:
                decoded.append(j)
        if decoded:
            self._check_decoded(decoded)
        for j, status, n in zip(jobs, st, lens):
            if j.slab is None:
                continue
            if j.dev is None:
                j.why = self._check_load(j, status, n)
            if not j.why:
                kv, ids = self.kvs[j.g], j.ids[j.skip:]
                ev = self.engine.run(lambda: kv.unpack(ids, self._slice(j), j.layer,
                                                       non_blocking=self.engine.cuda),
                                     self._load_after)[1]
        self._release(jobs, ev)
        return ev

    def _timed(self, t0, blocks):
        ms = (time.perf_counter() - t0) * 1e3
        self.rec.observe("load_ms", ms)
        self.rec.sample("load_cost_obs", [blocks * self.geo.block_size, ms])  # break-even

    def _leased(self, keys):
        if self.cfg.lease_ms:
            with self._lock:
                self._loaded_keys += keys

    def _bulk_ok(self, loads):
        """True when every chunk goes straight into its blocks (zero copy, nothing skipped)
        and all have the same group and length: then the batch is flat arrays
        (connector_bulk: one numpy op builds every iovec, one checks every trailer)."""
        if _numpy() is None:
            return False
        first = None
        for ls in loads:
            for h, ids, skip, *g in ls.chunks:
                shape = (len(ids), g[0] if g else 0)
                if skip or shape != (first or shape):
                    return False
                first = shape
        return first is not None and self.kvs[first[1]].zero_copy

    def _load_bulk(self, loads, invalid, failed, layer, timed):
        """_load of a batch _bulk_ok accepts. When every chunk comes back good (the usual
        case) nothing is done per chunk but its key; otherwise the per-chunk checks of
        _finish_loads decide, on the same bytes."""
        chunks = [(ls.req_id, c) for ls in loads for c in ls.chunks]
        g = chunks[0][1][3] if len(chunks[0][1]) > 3 else 0
        hs = [c[0] for _, c in chunks]
        keys = rank_keys(hs if layer is None else [layer_hash(h, layer) for h in hs],
                         self.key_rank)
        ids = _np.array([c[1] for _, c in chunks], dtype=_np.int64)
        t0 = time.perf_counter()
        b = self._get_bulk(self.kvs[g], ids, keys, layer)
        if timed:
            self._timed(t0, ids.size)
        payload = self._payload_of(g, layer)
        if b.done and b.all_good(payload, self.cfg.verify):
            self._loaded_bulk(chunks, keys, g, layer, ids.size)
        else:
            from .client import Status

            jobs, st, lens = [], [], []
            for (req, c), key, (status, n, trailer, ranges) in zip(chunks, keys, b.rows()):
                j = _Job(req, key, c[1], 0, c[0], None, g, layer)
                j.trailer, j.ranges = trailer, ranges
                j.keep.append(b)  # ranges point into its arrays
                jobs.append(j)
                st.append(None if status is None else Status.of(status))
                lens.append(n)
            self._finish_loads(loads, jobs, st, lens, invalid, failed)
        self._leased(keys)

    def _get_bulk(self, kv, ids, keys, layer):
        """The batch get of _load_bulk (its arrays, statuses, trailers and hashes in the
        BulkGet returned; done is False when the pool was down)."""
        from .connector_bulk import BulkGet

        b = BulkGet(kv, ids, keys, layer)
        try:
            b.get(self.store.call, self.cfg.verify)
        except StoreDown:
            pass
        return b

    def _loaded_bulk(self, chunks, keys, g, layer, blocks):
        """What _loaded does for each of a good batch's chunks, once for the batch."""
        if g == 0:
            self._note_keys(keys, [c[0] for _, c in chunks], layer)
        first = layer in (None, 0)  # a chunk's blocks and a load count once, not per layer
        self.rec.add(blocks_loaded=blocks if first else 0, loads=int(first),
                     bytes_loaded=self.kvs[g].image_bytes(blocks, layer))

    # -- layerwise loads: one thread moves layer 0, 1, ... of the step's loads in order
    def _start_pipe(self, loads):
        if self._lq is None:
            self._lq = queue.Queue()
            self._pthread = threading.Thread(target=self._pipe_loop, name="openlake-layers",
                                             daemon=True)
            self._pthread.start()
        self._pipe = self.last_pipe = _Pipe(loads, len(self.kv.tensors))
        self._lq.put(self._pipe)

    def _pipe_loop(self):
        while True:
            p = self._lq.get()
            if p is None:
                return
            for i in range(p.nl):
                with p.lock:
                    live = [x for x in (_good_part(ls, p.invalid) for ls in p.loads) if x]
                invalid, failed = set(), set()
                try:
                    if live:  # after a failure, only the chunks before the bad one load
                        p.ev[i] = self._load(live, invalid, failed, i, timed=False)
                except Exception as e:  # never let the thread die: the load failed
                    self.warn("load-thread", "openlake: layer load failed: %s", e)
                    for ls in live:
                        self._fail_request(ls.chunks, 0, invalid)
                        failed.add(ls.req_id)
                with p.lock:
                    p.invalid |= invalid
                    p.failed |= failed
                p.done_t[i] = time.perf_counter()
                p.done[i].set()
            ms = (p.done_t[-1] - p.t0) * 1e3
            self.rec.observe("load_ms", ms)
            tokens = sum(len(ids) - skip for ls in p.loads for _, ids, skip, *_ in ls.chunks)
            self.rec.sample("load_cost_obs", [tokens * self.geo.block_size, ms])

    def wait_layer(self, name):
        """wait_for_layer_load: block until layer `name` of this step's loads is in place."""
        p = self._pipe
        i = self._layer_of(name)
        if p is None or i is None:
            return
        p.waited.add(i)
        p.done[i].wait()  # layer i's copies are queued (layer i+1's may still be fetched)
        if self.engine is not None:  # the compute stream waits for them, the host does not
            self.engine.order_compute(p.ev[i])

    def _end_pipe(self):
        """Wait for every layer of this step's loads and take their failures. A layer the
        forward never waited for (a CUDA graph replay skips the hooks) may have been read
        before it was loaded: every block of the step's loads is then reported bad."""
        p, self._pipe = self._pipe, None
        if p is None:
            return
        for e in p.done:
            e.wait()
        if self.engine is not None:
            self.engine.order_compute(next((e for e in reversed(p.ev) if e), None))
        self._invalid |= p.invalid
        self._failed_reqs |= p.failed
        if len(p.waited) < p.nl:
            self.warn("layer-wait", "openlake: layerwise load of %d layer(s) not waited for "
                      "(wait_for_layer_load not called): recomputing", p.nl - len(p.waited))
            for ls in p.loads:
                self._fail_request(ls.chunks, 0, self._invalid)
                self._failed_reqs.add(ls.req_id)

    def _finish_loads(self, loads, jobs, st, lens, invalid, failed, nl=1):
        """jobs: per request, per chunk, nl objects (its layers, or the whole chunk)."""
        i = 0
        for ls in loads:
            bad_from = None
            for c in range(len(ls.chunks)):
                for j in jobs[i:i + nl]:
                    i += 1
                    why = j.why if j.why is not None else \
                        self._check_load(j, st[i - 1], lens[i - 1])
                    if why == "miss" and self.events_on and j.g == 0:  # the pool lost it
                        self._event("BlockRemoved", block_hashes=[j.h])
                    if why and bad_from is None:
                        bad_from = c
                        self.warn("load", "openlake: load of request %s chunk failed (%s): "
                                  "recomputing", ls.req_id, why)
                        bad = why.startswith(("bad", "corrupt"))  # ours or the pool's sum
                        self.rec.add(load_failures=1, corrupt_blocks=int(bad))
                    if bad_from is None:
                        self._loaded(j)
            if bad_from is not None:
                self._fail_request(ls.chunks, bad_from, invalid)
                failed.add(ls.req_id)
        if not jobs or jobs[0].layer in (None, 0):
            self.rec.add(loads=1)

    def _loaded(self, j):
        self._note([j])
        kv = self.kvs[j.g]
        if j.stage is not None:
            kv.unpack(j.ids[j.skip:], self._slice(j), j.layer)
        n = len(j.ids) - j.skip
        if j.layer in (None, 0):
            self.rec.add(blocks_loaded=n)
        self.rec.add(bytes_loaded=kv.image_bytes(n, j.layer))

    def _slice(self, j):
        if not j.skip:
            return j.stage[:self._payload(j)]
        return _skip_image(self.kvs[j.g], j.stage, j.skip, len(j.ids), j.layer)

    def _check_load(self, j, status, n):
        from .client import Status

        if status is None:
            return "pool unreachable"
        if status != Status.OK:
            return str(status)
        payload = self._payload(j)
        if n != payload + TRAILER_LEN:
            return "size %d, expected %d" % (n, payload + TRAILER_LEN)
        raw = j.trailer if isinstance(j.trailer, bytes) else j.trailer.raw
        why = check_trailer(raw, j.key, j.ranges, payload, self.cfg.verify)
        return ("bad block: " + why) if why else ""

    @staticmethod
    def _fail_request(chunks, first, invalid):
        for h, ids, skip, *g in chunks[first:]:
            invalid.update(ids[skip:])

    # -- async loads: one thread; a request is reported in finished_recving with its errors
    def _start_async_load(self, ls):
        if self._loader is None:
            self._loader = queue.Queue()
            self._lthread = threading.Thread(target=self._load_loop, name="openlake-load",
                                             daemon=True)
            self._lthread.start()
        self._loader.put(ls)

    def _load_loop(self):
        while True:
            ls = self._loader.get()
            if ls is None:
                return
            invalid, ev = set(), None
            try:
                ev = self._load([ls], invalid, set())
            except Exception as e:  # never let the thread die: the load failed
                self.warn("load-thread", "openlake: async load failed: %s", e)
                self._fail_request(ls.chunks, 0, invalid)
            with self._lock:
                self._recv_done[ls.req_id] = (invalid, ev)

    def _take_recv(self):
        """Async loads that are done: fetched, and their last copy's event completed."""
        with self._lock:
            done = {r: v for r, v in self._recv_done.items() if v[1] is None or v[1].query()}
            for r in done:
                del self._recv_done[r]
        for bad, _ in done.values():
            self._invalid.update(bad)
        return set(done) or None

    def take_invalid(self):
        out, self._invalid = self._invalid, set()
        return out

    # -- wait_for_save
    def end_leases(self):
        """The scheduler leased the blocks it reported; once loaded they may go (after the
        forward: off the load's critical path). A lease not ended here expires."""
        with self._lock:
            keys, self._loaded_keys = self._loaded_keys, []
        if keys:
            try:
                self.store.call("lease", keys, 0)
            except StoreDown:
                pass

    def save(self, plan):
        """wait_for_save. Staged blocks are gathered on the copy stream by then; the next
        forward's kernels wait for the last gather on the GPU (they may overwrite blocks),
        not for the copies to the host."""
        self._save(plan)
        ev, self._save_gather = self._save_gather, None
        if self.engine is not None:
            self.engine.order_compute(ev)

    def _save(self, plan):
        self._end_pipe()
        self.end_leases()
        failed, self._failed_reqs = self._failed_reqs, set()
        done, self._saved_layers = self._saved_layers, set()
        for ss in plan.saves:
            self._seen_save.add(ss.req_id)
        if not plan.saves or self.disabled or not self.saves_enabled:
            return
        # K/V computed on top of a failed load is not saved (it is recomputed next step)
        if not self.layerwise:
            self._queue(self._save_jobs(plan, None, failed))
            return
        # layers save_kv_layer did not get (hooks skipped): saved now
        for i in range(len(self.kv.tensors)):
            if i not in done:
                self._queue(self._save_jobs(plan, i, failed))
        if not self.cfg.async_save:
            self.flush()

    def save_layer(self, plan, name):
        """save_kv_layer (layerwise): queue layer `name`'s objects of the step's chunks. Its
        K/V depends on the loads of the layers before it only, all waited for by now; a
        request whose load failed so far saves no more layers."""
        i = self._layer_of(name)
        if (not self.layerwise or i is None or i in self._saved_layers or not plan.saves or
                self.disabled or not self.saves_enabled):
            return
        self._saved_layers.add(i)
        failed = set(self._failed_reqs)
        p = self._pipe
        if p is not None:
            with p.lock:
                failed |= p.failed
        self._queue(self._save_jobs(plan, i, failed))

    def _save_jobs(self, plan, layer, failed):
        """Jobs of the plan's chunks (one layer, or whole chunks), their memory set up.
        KV events ride on a chunk's last object."""
        last = layer is None or layer == len(self.kv.tensors) - 1
        jobs = [_Job(ss.req_id, self._key(h, layer), ids, 0, h,
                     ss.events[i] if last and self.events_on and ss.events else None,
                     g[0] if g else 0, layer)
                for ss in plan.saves if ss.req_id not in failed
                for i, (h, ids, *g) in enumerate(ss.chunks)]
        return jobs

    def _queue(self, jobs):
        """Save jobs, in batches no bigger than the staging pool: staged tensors are copied
        out now (the next forward's kernels wait for those copies; the put waits for them
        on the host), zero-copy ranges are addresses."""
        for b in self._batches(jobs):
            if self.staging is not None:
                self._take_slabs(b)
            try:
                for j in b:
                    self._ranges(j, False)
                if self.codec is not None:
                    self._codec_sums(b)
            except BaseException:
                self._release(b)
                raise
            self._queue_batch(b)

    def _queue_batch(self, jobs):
        if self._saver is None:
            self._put(jobs)
            return
        reqs = {j.req_id for j in jobs}
        with self._lock:
            for r in reqs:
                self._pending[r] = self._pending.get(r, 0) + 1
        self._saver.put((jobs, reqs))

    def _put(self, jobs):
        try:
            self._put_staged(jobs)
        finally:
            self._release(jobs)  # the D2H events completed: _put_staged waited for them

    def _put_staged(self, jobs):
        coded = [j for j in jobs if j.dev is not None]
        if coded:  # GPU codec: the batch's encodes queued, one wait for their lengths
            self._encode_out(coded)
        for j in jobs:  # the slab holds the image once its device-to-host copy completed
            if j.copy_ev is not None:
                j.copy_ev.synchronize()
        t0 = time.perf_counter()
        try:
            if self.cfg.save_check_exists and jobs:
                have = self.store.call("exists", [j.key for j in jobs])
                self._stored_events([j for j, h in zip(jobs, have) if h])
                self._note([j for j, h in zip(jobs, have) if h])
                jobs = [j for j, h in zip(jobs, have) if not h]
            for j in jobs:
                if j.dev is None:
                    j.trailer.raw = make_trailer(j.key, j.ranges, self._payload(j),
                                                 self.cfg.verify)
            store = self.raw_store if self.codec is not None else self.store
            st = store.call("put_iov", [j.key for j in jobs], [j.iovs() for j in jobs]) \
                if jobs else []
        except StoreDown:
            self.rec.add(save_failures=len(jobs))
            return
        self.rec.observe("save_ms", (time.perf_counter() - t0) * 1e3)
        self._count_saves(st, jobs)
        from .client import Status

        self._stored_events([j for j, s in zip(jobs, st) if s in (Status.OK, Status.EXISTS)])
        self._note([j for j, s in zip(jobs, st) if s in (Status.OK, Status.EXISTS)])

    # -- KV events (BlockStored for what the pool holds, BlockRemoved for what it lost)
    def _event(self, kind, **fields):
        from ._vllm_compat import kv_event
        from .connector_sched import EVENT_MEDIUM

        with self._lock:
            self._events.append(kv_event(kind, medium=EVENT_MEDIUM, **fields))

    def _stored_events(self, jobs):
        for j in jobs:
            if j.ev is not None:
                parent, toks = j.ev
                self._event("BlockStored", block_hashes=[j.h], parent_block_hash=parent,
                            token_ids=toks, block_size=len(toks), lora_id=None)

    def _note(self, jobs):
        """Remember which block hash each key of these jobs (group 0: the events' group)
        holds, so a removal the pool reports maps back to it."""
        if self.removals is not None:
            js = [j for j in jobs if j.g == 0 and j.h is not None]
            self.removals.note_many([j.key for j in js], [j.h for j in js],
                                    [j.layer for j in js])

    def _note_keys(self, keys, hashes, layer):
        if self.removals is not None:
            self.removals.note_many(keys, hashes, [layer] * len(keys))

    def _other_ranks_keys(self):
        """derive() for the removal watch: the keys the other TP ranks of this PP stage store
        a block (or a layer of it) under; None with one key per stage (TP 1, MLA)."""
        tp = 1 if self.geo.use_mla else self.geo.tp_size
        others = [self.pp_rank * tp + t for t in range(tp) if t != self.tp_rank]
        if not others:
            return None

        def derive(h, layer):
            base = h if layer is None else layer_hash(h, layer)
            return [rank_key(base, r) for r in others]

        return derive

    def _removed(self, hashes):
        """The pool removed these blocks (RemovalWatch's thread)."""
        self._event("BlockRemoved", block_hashes=list(hashes))

    def take_events(self):
        """This step's events (get_kv_connector_kv_cache_events), or None."""
        with self._lock:
            out, self._events = self._events, []
        return out or None

    # -- async saves: one thread; requests keep their blocks until their saves are done
    def _save_loop(self):
        while True:
            item = self._saver.get()
            try:
                if item is None:
                    return
                jobs, reqs = item
                try:
                    self._put(jobs)
                except Exception as e:  # never let the thread die
                    self.warn("save-thread", "openlake: async save failed: %s", e)
                    self.rec.add(save_failures=len(jobs))
                with self._lock:
                    for r in reqs:
                        self._pending[r] -= 1
                        if not self._pending[r]:
                            del self._pending[r]
            finally:
                self._saver.task_done()

    def flush(self):
        """Wait for every queued save (blocks about to be reused must be read first)."""
        if self._saver is not None:
            self._saver.join()

    def transfer_results(self, finished_req_ids):
        """(finished_sending, finished_recving, failed_recving): a failed async load is in
        both of the last two (the request leaves WAITING_FOR_REMOTE_KVS and recomputes from
        its first bad block, reported by get_block_ids_with_load_errors)."""
        with self._lock:
            failed = {r for r, (bad, _) in self._recv_done.items() if bad}
        send, recv = self.finished(finished_req_ids)
        return send, recv, failed & set(recv or ())

    def finished(self, finished_req_ids):
        """(finished_sending, None): finished requests whose saves are all done."""
        recv = self._take_recv()
        if not self.cfg.async_save:  # saves are done when wait_for_save returns
            self._seen_save.difference_update(finished_req_ids or ())
            return None, recv
        for r in finished_req_ids or ():
            if r in self._seen_save:
                self._seen_save.discard(r)
                self._done_wait.add(r)
        with self._lock:
            done = {r for r in self._done_wait if r not in self._pending}
        self._done_wait -= done
        return (done or None), recv

    def close(self):
        if self.raw_store is not None:
            self.raw_store.close()
        if self.removals is not None:
            self.removals.close()
            self.removals = None
        if self._lq is not None:
            self._lq.put(None)
            self._pthread.join(10)
            self._lq = None
        if self._loader is not None:
            self._loader.put(None)
            self._lthread.join(10)
            self._loader = None
        if self._saver is not None:
            self.flush()
            self._saver.put(None)
            self._thread.join(10)
            self._saver = None

    def _count_saves(self, st, jobs):
        from .client import Status

        okj = [j for j, s in zip(jobs, st) if s in (Status.OK, Status.EXISTS)]
        ok = sum(1 for j in okj if j.layer in (None, 0))  # a chunk's blocks count once
        bad = [s for s in st if s not in (Status.OK, Status.EXISTS)]
        self.rec.add(saves=int(not jobs or jobs[0].layer in (None, 0)),
                     blocks_saved=ok * self.chunk_blocks,
                     bytes_saved=sum(self._payload(j) for j in okj), save_failures=len(bad))
        if bad:
            self.warn("save", "openlake: %d chunk save(s) not stored (%s)", len(bad),
                      ", ".join(sorted({str(s) for s in bad})))


def _good_part(ls, invalid):
    """ls up to its first chunk with a block in invalid (None when that is the first): the
    blocks a failed layer leaves good still need every other layer."""
    from .connector_sched import LoadSpec

    for c, (h, ids, skip, *g) in enumerate(ls.chunks):
        if not invalid.isdisjoint(ids[skip:]):
            return LoadSpec(ls.req_id, ls.chunks[:c]) if c else None
    return ls


def _skip_image(kv, stage, skip, k, layer=None):
    """A staged chunk image holds layer-major [k blocks]; keep blocks skip..k of each layer."""
    import torch

    parts, off = [], 0
    for i in kv._sel(layer):
        n = kv.layouts[i].slab_bytes
        parts.append(stage[off + skip * n:off + k * n])
        off += k * n
    return torch.cat(parts)
