"""A faithful stand-in for vLLM's V1 engine around a KV connector (no vLLM needed).

Reproduces the scheduler/worker call sequence of vllm/v1/core/sched/scheduler.py and the
model runner's connector mixin (see shared/reference/vllm_connector.md §1.6, §5): a block pool
with a null block and a prefix cache, a token budget with chunked prefill, preemption,
delayed frees, async loads, invalid-block recompute, TP ranks, and metadata that crosses a
pickle boundary between the scheduler and each worker."""

from .config import make_vllm_config  # noqa: F401
from .engine import Engine  # noqa: F401
from .scheduler import (LoRARequest, MultiModalFeatureSpec, PlaceholderRange, Request,  # noqa: F401
                        RequestStatus, Scheduler)
from .worker import FakeModel, Worker, make_kv_caches  # noqa: F401
