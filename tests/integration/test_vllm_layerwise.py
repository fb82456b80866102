"""The connector's layer-wise mode (`layerwise`) driven by the stand-in engine against a real
openlaked: one pool object per (chunk, layer), loads fetched layer by layer on a thread while
the model computes the layers already there, saves started per layer.

The stand-in calls wait_for_layer_load before and save_kv_layer after each attention layer,
as vLLM's attention wrapper does, and logs each call with its time; with cudagraph="full" a
decode-only step replays a full CUDA graph (no hook) unless the connector asks for piecewise
graphs, which it does when layerwise is on."""

import os
import signal
import socket
import struct
import threading

import pytest

torch = pytest.importorskip("torch")

from vllm_standin import Engine, FakeModel, Request, make_kv_caches, make_vllm_config  # noqa
from vllm_standin.pool import dead_addr, kv_pools, pool  # noqa: E402,F401

from openlake_client import keys as olkeys  # noqa: E402

L, H, D, BS, NB = 4, 2, 8, 16, 64
A = [(i * 37 + 11) % 500 for i in range(100)]
SUFFIX = [(i * 53 + 7) % 500 for i in range(34)]
B = A[:96] + SUFFIX


def cfg(addr, layerwise=True, device="local", layout="fa", tp=1, chunk=16, **extra):
    ex = {"openlake_nodes": [addr], "openlake_device": device, "chunk_size": chunk,
          "timeout_ms": 30000, "log_interval_s": 0.0, "lookup_inline_ms": 60000,
          "layerwise": layerwise}
    ex.update(extra)
    return make_vllm_config(model="standin/layerwise", block_size=BS, num_gpu_blocks=NB,
                            num_layers=L, kv_heads=H * tp, head_size=D, tp=tp,
                            use_mla=(layout == "mla"), extra=ex)


def engine(c, cudagraph="none", api="newest", layout="fa"):
    return Engine(c, lambda r: (make_kv_caches(layout, L, NB, BS, H, D),
                                FakeModel(L, H, D, layout, r)),
                  NB, api=api, cudagraph=cudagraph)


def serve(e, rid, prompt, max_tokens=3):
    e.add(Request(rid, prompt, max_tokens=max_tokens))
    e.run()
    e.scheduler.assert_empty()
    return e.scheduler.finished[rid].output_token_ids


def reference(prompt, max_tokens=3, layout="fa", tp=1):
    e = engine(cfg(dead_addr(), layerwise=False, layout=layout, tp=tp), layout=layout)
    out = serve(e, "ref", prompt, max_tokens)
    e.shutdown()
    return out


def chain(e, prompt):
    return olkeys.chain_hashes(olkeys.seed_hash(e.sched_conn.ol_identity, ""), prompt, 16)


def layer_key(h, layer, rank=0):
    return olkeys.rank_key(olkeys.layer_hash(h, layer), rank)


def names(e):
    return list(e.workers[0].kv)


def first_blocks(e, rid):
    for so in e.schedule_log:
        for nr in so.scheduled_new_reqs:
            if nr.req_id == rid:
                return list(nr.block_ids[0])
    raise KeyError(rid)


def block_bytes(e, ids, rank=0):
    kv = e.workers[rank].c._worker.kv
    return [t.select(lay.block_dim, b).contiguous().view(torch.uint8).clone()
            for t, lay in zip(kv.tensors, kv.layouts) for b in ids]


def corrupt(addr, key):
    import openlake_client as ol

    cl = ol.connect([addr], namespace="vllm")
    v = bytearray(cl.get([key])[0])
    v[40] ^= 0x10  # one bit of the payload
    assert cl.delete([key]) == [ol.Status.OK]
    assert cl.put([key], [bytes(v)]) == [ol.Status.OK]
    cl.close()


# ---------------------------------------------------------------- call order and objects

@pytest.mark.parametrize("layerwise", [False, True])
def test_hooks_in_vllm_order(pool, layerwise):
    """Every step that computes calls, per attention layer in model order, wait_for_layer_load
    then the layer's compute then save_kv_layer. Under full CUDA graphs, decode steps skip the
    hooks unless the connector asks for piecewise graphs: it does exactly when layerwise."""
    e = engine(cfg(pool.kv_addr, layerwise=layerwise), cudagraph="full")
    from openlake_client.openlake_connector import OpenLakeConnector

    assert OpenLakeConnector.requires_piecewise_for_cudagraph({"layerwise": layerwise}) == \
        layerwise
    serve(e, "A", A, max_tokens=4)
    log = e.workers[0].hook_log
    steps = sorted({s for s, *_ in log})
    assert len(steps) >= 4  # the prefill and three decode steps
    for s in steps:
        ev = [(what, name) for st, what, name, _ in log if st == s]
        hooked = any(what == "wait" for what, _ in ev)
        if layerwise or s == steps[0]:  # the prefill is never a full graph replay
            assert hooked
        else:
            assert not hooked and not any(what == "saved" for what, _ in ev)
        if hooked:
            want = [(w, n) for n in names(e) for w in ("wait", "compute", "computed", "saved")]
            assert ev == want
        ts = [t for st, *_, t in log if st == s]
        assert ts == sorted(ts)
    e.shutdown()


@pytest.mark.parametrize("async_save", [True, False])
def test_one_object_per_chunk_and_layer(pool, async_save):
    """Layer-wise saves write one object per (chunk, layer, rank), under keys of their own;
    no whole-chunk object. The objects' bytes are the blocks' bytes of that layer. With
    async_save off they are all stored when wait_for_save returns (no delayed free)."""
    import openlake_client as ol

    e = engine(cfg(pool.kv_addr, async_save=async_save))
    serve(e, "A", A)
    assert ("A" in e.scheduler.delayed_ever) == async_save
    h = chain(e, A)
    assert len(h) == 6
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    assert cl.exists([layer_key(x, i) for x in h for i in range(L)]) == [True] * (6 * L)
    assert cl.exists([olkeys.rank_key(x, 0) for x in h]) == [False] * 6
    kv = e.workers[0].c._worker.kv
    ids = first_blocks(e, "A")
    v = cl.get([layer_key(h[1], 2)])[0]
    t, lay = kv.tensors[2], kv.layouts[2]
    want = b"".join(t.select(lay.block_dim, b).contiguous().view(torch.uint8).numpy().tobytes()
                    for b in ids[1:2])
    assert v[:len(want)] == want and len(v) == len(want) + 32  # + the trailer
    cl.close()
    st = e.merged_stats()
    assert st["blocks_saved"] == 6 and st["bytes_saved"] == 6 * kv.block_bytes
    e.shutdown()


def test_hit_needs_every_layer(pool):
    """A chunk is a hit only when every layer of it is stored."""
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    a_ids = first_blocks(e1, "A")
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    assert cl.delete([layer_key(chain(e1, A)[3], L - 1)]) == [ol.Status.OK]
    cl.close()
    e2 = engine(cfg(pool.kv_addr))
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 48
    b_ids = first_blocks(e2, "B")
    for x, y in zip(block_bytes(e1, a_ids[:3]), block_bytes(e2, b_ids[:3])):
        assert torch.equal(x, y)
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    assert e2.merged_stats()["load_failures"] == 0
    # the modes keep apart: a whole-chunk engine finds nothing a layer-wise one stored
    e3 = engine(cfg(pool.kv_addr, layerwise=False))
    e3.add(Request("C", B, max_tokens=1))
    e3.step()
    assert e3.scheduler.requests["C"].num_external_computed_tokens == 0
    for e in (e1, e2, e3):
        e.shutdown()


@pytest.mark.parametrize("layout,tp", [("fa_hnd", 1), ("bhnc", 1), ("mla", 1), ("fa", 2)])
def test_prefix_reuse_layouts_and_ranks(pool, layout, tp):
    """Staged layouts (HND strides, bhnc), MLA and two TP ranks: each layer's objects load
    back bitwise, and a chunk is a hit only if every rank stored every layer."""
    e1 = engine(cfg(pool.kv_addr, layout=layout, tp=tp), layout=layout)
    serve(e1, "A", A)
    a_ids = first_blocks(e1, "A")
    e2 = engine(cfg(pool.kv_addr, layout=layout, tp=tp), layout=layout)
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 96
    assert not e2.invalid_seen
    b_ids = first_blocks(e2, "B")
    for rank in range(tp):
        for x, y in zip(block_bytes(e1, a_ids[:6], rank), block_bytes(e2, b_ids[:6], rank)):
            assert torch.equal(x, y)
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B, layout=layout, tp=tp)
    st = e2.merged_stats()
    assert st["blocks_loaded"] == 6 * (1 if layout == "mla" else tp)
    for e in (e1, e2):
        e.shutdown()


def test_local_prefix_blocks_are_never_written(pool):
    """A chunk partly in the local prefix cache: every layer's object loads only the blocks
    beyond the local hit (the local ones go to scratch memory)."""
    long_a = [(i * 29 + 3) % 500 for i in range(200)]
    e1 = engine(cfg(pool.kv_addr, chunk=64))
    serve(e1, "A", long_a)
    a_ids = first_blocks(e1, "A")
    e2 = engine(cfg(pool.kv_addr, chunk=64))
    serve(e2, "C", long_a[:48] + SUFFIX, max_tokens=1)
    c_ids = first_blocks(e2, "C")[:3]
    for t in e2.workers[0].kv.values():  # mark the local blocks: a write would show
        t[:, c_ids] = 0
    e2.add(Request("B", long_a[:192] + SUFFIX, max_tokens=1))
    so = e2.step()
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 192 - 48
    b_ids = [nr for nr in so.scheduled_new_reqs if nr.req_id == "B"][0].block_ids[0]
    assert list(b_ids[:3]) == c_ids
    for x in block_bytes(e2, c_ids):
        assert not x.any()
    for x, y in zip(block_bytes(e1, a_ids[3:12]), block_bytes(e2, b_ids[3:12])):
        assert torch.equal(x, y)
    e2.run()
    for e in (e1, e2):
        e.shutdown()


# ---------------------------------------------------------------- pipelining

class GetGate:
    """A TCP proxy in front of the pool's KV port that holds every GET frame asking for one
    of `hold` keys until release() (the pool then answers that load as slowly as the test
    wants, and only that one). Frames are forwarded whole; replies are piped as they come."""

    def __init__(self, target, hold):
        self.target = target.rsplit(":", 1)
        self.hold = set(hold)
        self.opened = threading.Event()
        self.held = threading.Event()  # a held frame is waiting
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self.socks = [self.ls]
        threading.Thread(target=self._accept, daemon=True).start()

    def release(self):
        self.opened.set()

    def close(self):
        self.opened.set()
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            s = socket.create_connection((self.target[0], int(self.target[1])))
            self.socks += [c, s]
            threading.Thread(target=self._requests, args=(c, s), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c), daemon=True).start()

    @staticmethod
    def _read(s, n):
        out = b""
        while len(out) < n:
            x = s.recv(n - len(out))
            if not x:
                raise OSError("closed")
            out += x
        return out

    def _requests(self, c, s):
        try:
            while True:
                hdr = self._read(c, 32)
                op, count = hdr[6], struct.unpack_from("<I", hdr, 8)[0]
                body = self._read(c, struct.unpack_from("<Q", hdr, 24)[0])
                keys = {body[i * 56:i * 56 + 32] for i in range(count)} if op == 3 else ()
                if self.hold & set(keys):
                    self.held.set()
                    self.opened.wait(300)
                s.sendall(hdr + body)
        except OSError:
            pass

    def _pipe(self, a, b):
        try:
            while True:
                x = a.recv(1 << 16)
                if not x:
                    return
                b.sendall(x)
        except OSError:
            pass


@pytest.mark.parametrize("staging", ["auto", "always"])
def test_slow_pool_layer0_computes_before_last_layer_loads(pool, staging):
    """The pool answers the last layer's load only once layer 0's compute has started (a
    proxy holds that GET): the step finishes with every layer loaded and correct, so the
    model's layer 0 ran while the last layer was still on its way. A connector that waited
    for every layer before the first (or in start_load_kv) would time out here instead.
    staging = always: the same through staging slabs and the copy engine (the GPU path)."""
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    a_ids = first_blocks(e1, "A")
    gate = GetGate(pool.kv_addr, [layer_key(chain(e1, A)[0], L - 1)])
    try:
        e2 = engine(cfg(gate.addr, device="tcp", staging=staging))
        assert (e2.workers[0].c._worker.staging is not None) == (staging == "always")
        first = names(e2)[0]
        w = e2.workers[0]

        def on_compute(name):
            if name == first:
                gate.release()
        w.on_compute = on_compute
        e2.add(Request("B", B, max_tokens=3))
        e2.step()
        req = e2.scheduler.requests["B"]
        assert req.num_external_computed_tokens == 96 and not e2.invalid_seen
        pipe = w.c._worker.last_pipe
        t_compute0 = [t for s, what, n, t in w.hook_log if what == "compute" and n == first][0]
        assert t_compute0 < pipe.done_t[L - 1]
        assert pipe.done_t == sorted(pipe.done_t)
        assert gate.held.is_set()  # the last layer's GET did wait at the gate
        b_ids = first_blocks(e2, "B")
        for x, y in zip(block_bytes(e1, a_ids[:6]), block_bytes(e2, b_ids[:6])):
            assert torch.equal(x, y)
        e2.run()
        assert e2.scheduler.finished["B"].output_token_ids == reference(B)
        e2.shutdown()
    finally:
        gate.close()
    e1.shutdown()


# ---------------------------------------------------------------- load errors

def test_forward_that_never_waits_recomputes(pool):
    """A deployment that replays full CUDA graphs whatever the connector asks calls no hook:
    the forward may read layers before they arrive, so the step's loaded blocks are reported
    bad and recomputed (never a wrong tensor); the whole-layer saves still happen in
    wait_for_save."""
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr), cudagraph="forced_full")
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    assert not [x for x in e2.workers[0].hook_log if x[1] == "wait"]
    assert set(first_blocks(e2, "B")[:6]) <= e2.invalid_seen
    assert e2.scheduler.requests["B"].num_computed_tokens == 0
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    h2 = chain(e2, B)
    assert cl.exists([layer_key(h2[6], i) for i in range(L)]) == [True] * L
    cl.close()
    for e in (e1, e2):
        e.shutdown()


@pytest.mark.parametrize("layer", [0, L - 1])
def test_corrupt_layer_is_recomputed(pool, layer):
    """One flipped bit in one layer of chunk 2: the request's blocks from chunk 2 on are
    reported bad (whichever layer it was), vLLM recomputes them, the output is unchanged,
    and the recomputed chunks are stored whole again."""
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    h = chain(e1, A)
    corrupt(pool.kv_addr, layer_key(h[2], layer))
    e2 = engine(cfg(pool.kv_addr))
    e2.add(Request("B", B, max_tokens=3))
    e2.step()
    b_ids = first_blocks(e2, "B")
    assert e2.scheduler.requests["B"].num_external_computed_tokens == 96
    assert b_ids[2] in e2.invalid_seen and b_ids[1] not in e2.invalid_seen
    assert e2.scheduler.requests["B"].num_computed_tokens == 32  # truncated, recomputed
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    st = e2.merged_stats()
    assert st["load_failures"] == 1 and st["corrupt_blocks"] == 1
    # the recompute saved chunk 2 again (the bad object stays: put never replaces), and
    # every layer of the suffix's chunk 6 computed on top of the failed load is now there
    cl = ol.connect([pool.kv_addr], namespace="vllm")
    h2 = chain(e2, B)
    assert cl.exists([layer_key(h2[6], i) for i in range(L)]) == [True] * L
    cl.close()
    for e in (e1, e2):
        e.shutdown()


def test_layer_missing_at_load_time(pool):
    """A layer object that goes away between the lookup and the load (deleted here, as an
    eviction would): blocks from its chunk on are reported bad and recomputed."""
    import openlake_client as ol

    e1 = engine(cfg(pool.kv_addr, lease_ms=0))
    serve(e1, "A", A)
    key = layer_key(chain(e1, A)[4], 2)
    e2 = engine(cfg(pool.kv_addr, lease_ms=0))
    e2.add(Request("B", B, max_tokens=3))

    def drop(so):
        cl = ol.connect([pool.kv_addr], namespace="vllm")
        assert cl.delete([key]) == [ol.Status.OK]
        cl.close()
    e2.step(before_execute=drop)
    b_ids = first_blocks(e2, "B")
    assert b_ids[4] in e2.invalid_seen and b_ids[3] not in e2.invalid_seen
    assert e2.scheduler.requests["B"].num_computed_tokens == 64
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    for e in (e1, e2):
        e.shutdown()


def test_pool_killed_before_the_load(pool):
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr, timeout_ms=5000))
    e2.add(Request("B", B, max_tokens=3))
    e2.step(before_execute=lambda so: pool.kill9())  # after the lookup, before the load
    assert e2.scheduler.requests["B"].num_computed_tokens == 0
    assert set(first_blocks(e2, "B")[:6]) <= e2.invalid_seen
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    assert e2.merged_stats()["load_failures"] >= 1
    for e in (e1, e2):
        e.shutdown()


def test_pool_frozen_mid_load(pool):
    """The pool stops answering (SIGSTOP) after layer 0 arrived: the later layers time out,
    the request's loaded blocks are reported bad, and it is recomputed."""
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    e2 = engine(cfg(pool.kv_addr, timeout_ms=1500))
    first = names(e2)[0]
    frozen = []

    def on_compute(name):
        if name == first and not frozen:
            os.kill(pool.proc.pid, signal.SIGSTOP)
            frozen.append(1)
    e2.workers[0].on_compute = on_compute
    e2.add(Request("B", B, max_tokens=3))
    try:
        e2.step()
    finally:
        os.kill(pool.proc.pid, signal.SIGCONT)
    e2.workers[0].on_compute = None
    pipe = e2.workers[0].c._worker.last_pipe
    if e2.invalid_seen:  # the later layers had not arrived when the pool froze
        assert e2.scheduler.requests["B"].num_computed_tokens == 0
    else:  # the loads were all in before the freeze (a fast pool): nothing to recompute
        assert pipe.done_t[L - 1] is not None
    e2.run()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    for e in (e1, e2):
        e.shutdown()


@pytest.mark.parametrize("api", ["newest", "classic"])
def test_async_load_layerwise(pool, api):
    """load_async with layer-wise objects: the background load fetches every layer; a bad
    layer caps the hit at its chunk."""
    e1 = engine(cfg(pool.kv_addr))
    serve(e1, "A", A)
    corrupt(pool.kv_addr, layer_key(chain(e1, A)[4], 1))
    e2 = engine(cfg(pool.kv_addr, load_async=True), api=api)
    e2.add(Request("B", B, max_tokens=3))
    while "B" not in {nr.req_id for s in e2.schedule_log for nr in s.scheduled_new_reqs}:
        e2.step()
    nr = [x for s in e2.schedule_log for x in s.scheduled_new_reqs if x.req_id == "B"][0]
    assert nr.num_computed_tokens == 64
    e2.run()
    e2.scheduler.assert_empty()
    assert e2.scheduler.finished["B"].output_token_ids == reference(B)
    assert e2.merged_stats()["corrupt_blocks"] == 1
    for e in (e1, e2):
        e.shutdown()
