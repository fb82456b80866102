"""End to end with a real trained model: stories260K (llama2.c) in torch, attention reading
K/V from paged blocks, driven by the stand-in engine and the real connector and pool.
Greedy generation after loading the prefix's KV from the pool gives exactly the same tokens
and logits as recomputing it, and the prefill compute of the loaded prefix is skipped."""

import json

import pytest

torch = pytest.importorskip("torch")

import tinymodel  # noqa: E402
from conftest import KV_DATA_MISSING  # noqa: E402
from vllm_standin import Engine, Request, make_vllm_config  # noqa: E402
from vllm_standin.pool import dead_addr, kv_pools, pool  # noqa: E402,F401

DATA = tinymodel.data_dir()
pytestmark = pytest.mark.skipif(DATA is None, reason=KV_DATA_MISSING)
BS, NB, CHUNK = 16, 64, 64


def seq(i):
    meta = json.loads((DATA / "stories260K" / "meta.json").read_text())
    return meta["sequences"][i]["tokens"]


def model_engine(addr, layout="fa", model_id="karpathy/stories260K", kv_dtype=torch.bfloat16,
                 layerwise=False, cudagraph="none", cross_layer=False, **extra):
    m = tinymodel.load(layout, kv_dtype)
    ex = {"openlake_nodes": [addr], "chunk_size": CHUNK, "timeout_ms": 5000,
          "log_interval_s": 0.0, "layerwise": layerwise}
    ex.update(extra)
    cfg = make_vllm_config(model=model_id, dtype=str(kv_dtype).replace("torch.", ""),
                           block_size=BS, num_gpu_blocks=NB, num_layers=m.L, kv_heads=m.nkv,
                           head_size=m.hd, extra=ex, max_num_batched_tokens=512)
    e = Engine(cfg, lambda r: (m.make_kv_caches(NB, BS, layout), m), NB, cudagraph=cudagraph,
               cross_layer=cross_layer)
    e.model = m
    return e


def generate(e, prompt, n=8, rid="R"):
    e.add(Request(rid, prompt, max_tokens=n))
    e.run()
    e.scheduler.assert_empty()
    return e.scheduler.finished[rid].output_token_ids, e.workers[0].logits[rid]


def test_model_is_the_real_one():
    """Greedy from BOS with an fp32 cache reproduces the README's seq00 (greedy, fp32)."""
    e = model_engine(dead_addr(), kv_dtype=torch.float32)
    toks, _ = generate(e, [1], n=40)
    assert [1] + toks == seq(0)[:41]


@pytest.mark.parametrize("layerwise", [False, True], ids=["whole", "layerwise"])
@pytest.mark.parametrize("layout", ["fa", "flashinfer", "bhnc"])
def test_loaded_prefix_gives_identical_generation(pool, layout, layerwise):
    """Bitwise equal with whole-chunk objects and with layer-wise ones (loads pipelined
    under the forward, saves per layer); bhnc is a staged (copied) layout."""
    prompt = seq(1)[:180]
    e1 = model_engine(pool.kv_addr, layout, layerwise=layerwise)
    generate(e1, prompt)
    assert e1.merged_stats()["blocks_saved"] == 128 // BS

    ref = model_engine(dead_addr(), layout)
    ref_toks, ref_logits = generate(ref, prompt)

    e2 = model_engine(pool.kv_addr, layout, layerwise=layerwise)
    toks, logits = generate(e2, prompt)
    assert e2.scheduler.finished["R"].num_external_computed_tokens == 128
    assert toks == ref_toks
    assert len(logits) == len(ref_logits) == 8
    for a, b in zip(logits, ref_logits):
        assert torch.equal(a, b)  # bitwise
    # the loaded prefix was not computed: 128 positions fewer
    assert ref.model.positions_computed - e2.model.positions_computed == 128
    assert e2.merged_stats()["hit_tokens"] == 128


def test_shared_prefix_new_suffix_and_corruption(pool):
    import openlake_client as ol
    from openlake_client import keys as olkeys

    e1 = model_engine(pool.kv_addr)
    generate(e1, seq(2)[:200], n=2)
    prompt = seq(2)[:128] + seq(3)[5:60]
    ref_toks, ref_logits = generate(model_engine(dead_addr()), prompt)
    e2 = model_engine(pool.kv_addr)
    toks, logits = generate(e2, prompt)
    assert e2.scheduler.finished["R"].num_external_computed_tokens == 128
    assert toks == ref_toks and all(torch.equal(a, b) for a, b in zip(logits, ref_logits))
    # flip one bit of chunk 1 in the pool: detected, recomputed, same output
    ident = e1.sched_conn.ol_identity
    h = olkeys.chain_hashes(olkeys.seed_hash(ident, ""), seq(2)[:128], CHUNK)
    key = olkeys.rank_key(h[1], 0)
    c = ol.connect([pool.kv_addr], namespace="vllm")
    v = bytearray(c.get([key])[0])
    v[777] ^= 1
    c.delete([key])
    c.put([key], [bytes(v)])
    c.close()
    e3 = model_engine(pool.kv_addr)
    toks3, _ = generate(e3, prompt)
    assert toks3 == ref_toks
    assert e3.merged_stats()["corrupt_blocks"] == 1
