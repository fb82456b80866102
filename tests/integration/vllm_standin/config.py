"""SimpleNamespace versions of the VllmConfig parts a connector reads."""

from types import SimpleNamespace


class KVTransferConfig(SimpleNamespace):
    def get_from_extra_config(self, key, default):
        return self.kv_connector_extra_config.get(key, default)

    @property
    def is_kv_producer(self):
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self):
        return self.kv_role in ("kv_consumer", "kv_both")


class ModelConfig(SimpleNamespace):
    def get_num_layers(self, parallel_config):
        return self.num_layers // parallel_config.pipeline_parallel_size

    def get_num_kv_heads(self, parallel_config):
        return max(1, self.total_kv_heads // parallel_config.tensor_parallel_size)

    def get_head_size(self):
        return self.head_size


def make_vllm_config(model="standin/fake-model", dtype="bfloat16", block_size=16,
                     num_gpu_blocks=64, tp=1, rank=0, num_layers=2, kv_heads=2, head_size=8,
                     use_mla=False, extra=None, kv_role="kv_both",
                     max_num_batched_tokens=256, revision=None, prefix_caching=True):
    return SimpleNamespace(
        model_config=ModelConfig(model=model, revision=revision, dtype=dtype,
                                 max_model_len=4096, num_layers=num_layers,
                                 total_kv_heads=kv_heads, head_size=head_size, use_mla=use_mla),
        cache_config=SimpleNamespace(block_size=block_size, num_gpu_blocks=num_gpu_blocks,
                                     enable_prefix_caching=prefix_caching, cache_dtype="auto",
                                     prefix_caching_hash_algo="sha256"),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp, pipeline_parallel_size=1,
                                        rank=rank, world_size=tp, data_parallel_rank=0),
        scheduler_config=SimpleNamespace(max_num_batched_tokens=max_num_batched_tokens,
                                         max_num_seqs=64, async_scheduling=False,
                                         disable_hybrid_kv_cache_manager=True,
                                         chunked_prefill_enabled=True),
        device_config=SimpleNamespace(device="cpu"),
        kv_transfer_config=KVTransferConfig(
            kv_connector="OpenLakeConnector",
            kv_connector_module_path="openlake_client.openlake_connector",
            kv_role=kv_role, kv_connector_extra_config=dict(extra or {}),
            kv_load_failure_policy="recompute", engine_id="standin"),
    )


def with_rank(cfg, rank):
    import copy

    c = copy.copy(cfg)
    c.parallel_config = SimpleNamespace(**vars(cfg.parallel_config))
    c.parallel_config.rank = rank
    return c
