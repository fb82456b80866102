"""Stub of vllm/distributed/kv_transfer/kv_connector/v1/metrics.py."""
from dataclasses import dataclass, field
from typing import Any


@dataclass
class KVConnectorStats:
    data: dict[str, Any] = field(default_factory=dict)

    def reset(self):
        raise NotImplementedError

    def aggregate(self, other):
        raise NotImplementedError

    def reduce(self):
        raise NotImplementedError

    def is_empty(self):
        raise NotImplementedError
