"""A faithful stand-in for torch.distributed.checkpoint's save and load around a storage plug-in
(no torch >= 2.2 needed: Debian 12's torch 1.13 has no DCP).

Reproduces the call sequence of DCP's state_dict_saver / state_dict_loader for N ranks in this
process (planning one rank after the other, write_data / read_data of all ranks at once in
threads, as ranks run them), with everything that crosses ranks in DCP (local plans to the
coordinator, global plans back, write results to the coordinator, the metadata) sent through
pickle as all_gather_object / scatter_object do:

  save: reset(id) when save() is given one, storage_meta, planner.set_up_planner,
        set_up_storage_writer(is_coordinator, rank=, use_collectives=), create_local_plan,
        prepare_local_plan | coordinator: create_global_plan -> (plans, metadata),
        prepare_global_plan | finish_plan, write_data -> future.wait() | coordinator:
        finish(metadata, results)
  load: reset(id) when given one, read_metadata, planner.set_up_planner,
        set_up_storage_reader(metadata, is_coordinator, rank=, use_collectives=),
        create_local_plan, prepare_local_plan | coordinator: create_global_plan,
        prepare_global_plan | finish_plan, read_data -> future.wait()

The planners do what DefaultSavePlanner / DefaultLoadPlanner do for plain tensors, row shards
(ShardedTensor / DTensor stand-in: `Shard`) and other objects (BYTE_IO via torch.save /
torch.load): a tensor is written as the chunk of the global tensor its rank holds, and a load
asks for the overlap of each stored chunk with each destination region (resharding). The
types are torch's where it has DCP, else stand-ins with the same field names."""

import dataclasses
import io
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional

import torch

from openlake_client import dcp

MetadataIndex, WriteItemType, LoadItemType = dcp.MetadataIndex, dcp.WriteItemType, dcp.LoadItemType

if dcp.HAVE_DCP:
    from torch.distributed.checkpoint.metadata import (  # noqa: F401
        BytesStorageMetadata, ChunkStorageMetadata, Metadata, TensorProperties,
        TensorStorageMetadata)
    from torch.distributed.checkpoint.planner import (BytesIOWriteData, LoadPlan,  # noqa: F401
                                                      ReadItem, SavePlan, TensorWriteData,
                                                      WriteItem)
else:

    @dataclasses.dataclass
    class ChunkStorageMetadata:
        offsets: torch.Size
        sizes: torch.Size

    @dataclasses.dataclass
    class TensorProperties:
        dtype: torch.dtype = torch.float32
        layout: Any = torch.strided
        requires_grad: bool = False
        memory_format: Any = None
        pin_memory: bool = False

    @dataclasses.dataclass
    class TensorStorageMetadata:
        properties: TensorProperties
        size: torch.Size
        chunks: List[ChunkStorageMetadata]

    @dataclasses.dataclass
    class BytesStorageMetadata:
        pass

    @dataclasses.dataclass
    class Metadata:
        state_dict_metadata: dict
        planner_data: Any = None
        storage_data: Any = None
        storage_meta: Any = None
        version: Optional[str] = None

    @dataclasses.dataclass(frozen=True)
    class BytesIOWriteData:
        nbytes: int

    @dataclasses.dataclass(frozen=True)
    class TensorWriteData:
        chunk: ChunkStorageMetadata
        properties: TensorProperties
        size: torch.Size

    @dataclasses.dataclass(frozen=True)
    class WriteItem:
        index: MetadataIndex
        type: WriteItemType
        bytes_io_data: Optional[BytesIOWriteData] = None
        tensor_data: Optional[TensorWriteData] = None

    @dataclasses.dataclass(frozen=True)
    class ReadItem:
        type: LoadItemType
        dest_index: MetadataIndex
        dest_offsets: torch.Size
        storage_index: MetadataIndex
        storage_offsets: torch.Size
        lengths: torch.Size

    @dataclasses.dataclass(frozen=True)
    class SavePlan:
        items: list
        storage_data: Any = None
        planner_data: Any = None

    @dataclasses.dataclass
    class LoadPlan:
        items: list
        storage_data: Any = None
        planner_data: Any = None


@dataclasses.dataclass
class Shard:
    """A rank's part of a tensor sharded along dim 0: `local` holds rows offset..offset+len of
    a global tensor of shape `global_size` (what a ShardedTensor / DTensor carries)."""

    local: torch.Tensor
    offset: int
    global_size: tuple

    def offsets(self):
        return torch.Size([self.offset] + [0] * (len(self.global_size) - 1))


def _wire(obj):
    """What the other side of all_gather_object / scatter_object receives."""
    return pickle.loads(pickle.dumps(obj))


class SavePlanner:
    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False):
        self.state_dict = state_dict
        self.storage_meta = storage_meta
        self.is_coordinator = is_coordinator

    def create_local_plan(self):
        items = []
        for fqn, v in self.state_dict.items():
            if isinstance(v, (torch.Tensor, Shard)):
                t, off = (v.local, v.offsets()) if isinstance(v, Shard) else (
                    v, torch.Size([0] * v.dim()))
                size = torch.Size(v.global_size) if isinstance(v, Shard) else t.shape
                items.append(WriteItem(
                    index=MetadataIndex(fqn, off),
                    type=WriteItemType.SHARD if isinstance(v, Shard) else WriteItemType.TENSOR,
                    tensor_data=TensorWriteData(
                        chunk=ChunkStorageMetadata(offsets=off, sizes=t.shape),
                        properties=TensorProperties(dtype=t.dtype), size=size)))
            else:
                items.append(WriteItem(index=MetadataIndex(fqn), type=WriteItemType.BYTE_IO))
        return SavePlan(items)

    def create_global_plan(self, all_plans):
        md = {}
        for plan in all_plans:
            for it in plan.items:
                if it.type == WriteItemType.BYTE_IO:
                    md[it.index.fqn] = BytesStorageMetadata()
                    continue
                td = it.tensor_data
                e = md.setdefault(it.index.fqn, TensorStorageMetadata(
                    properties=td.properties, size=td.size, chunks=[]))
                e.chunks.append(td.chunk)
        return all_plans, Metadata(state_dict_metadata=md)

    def finish_plan(self, new_plan):
        return new_plan

    def resolve_data(self, item):
        """The tensor as the state dict holds it (possibly a non-contiguous view: the storage
        layer makes it contiguous), or the object torch.save'd into a BytesIO."""
        v = self.state_dict[item.index.fqn]
        if item.type == WriteItemType.BYTE_IO:
            b = io.BytesIO()
            torch.save(v, b)
            b.seek(0)
            return b
        return v.local if isinstance(v, Shard) else v


class LoadPlanner:
    def set_up_planner(self, state_dict, metadata=None, is_coordinator=False):
        self.state_dict = state_dict
        self.metadata = metadata
        self.is_coordinator = is_coordinator
        self.committed = []

    def create_local_plan(self):
        items = []
        for fqn, v in self.state_dict.items():
            md = self.metadata.state_dict_metadata[fqn]
            if not isinstance(v, (torch.Tensor, Shard)):
                items.append(ReadItem(type=LoadItemType.BYTE_IO, dest_index=MetadataIndex(fqn),
                                      dest_offsets=torch.Size([]),
                                      storage_index=MetadataIndex(fqn),
                                      storage_offsets=torch.Size([]), lengths=torch.Size([])))
                continue
            t, off = (v.local, v.offsets()) if isinstance(v, Shard) else (
                v, torch.Size([0] * v.dim()))
            for i, ch in enumerate(md.chunks):
                ov = _overlap(off, t.shape, ch.offsets, ch.sizes)
                if ov is None:
                    continue
                dst_o, src_o, lengths = ov
                items.append(ReadItem(type=LoadItemType.TENSOR,
                                      dest_index=MetadataIndex(fqn, off),
                                      dest_offsets=dst_o,
                                      storage_index=MetadataIndex(fqn, ch.offsets, i),
                                      storage_offsets=src_o, lengths=lengths))
        return LoadPlan(items)

    def create_global_plan(self, global_plan):
        return global_plan

    def finish_plan(self, central_plan):
        return central_plan

    def load_bytes(self, read_item, value):
        self.state_dict[read_item.dest_index.fqn] = torch.load(value)

    def resolve_tensor(self, read_item):
        v = self.state_dict[read_item.dest_index.fqn]
        t = v.local if isinstance(v, Shard) else v
        for dim, (o, n) in enumerate(zip(read_item.dest_offsets, read_item.lengths)):
            t = t.narrow(dim, o, n)
        return t

    def commit_tensor(self, read_item, tensor):
        self.committed.append(read_item.dest_index.fqn)


def _overlap(dst_off, dst_size, ch_off, ch_size):
    """(dest offsets, storage offsets, lengths) of the overlap of two boxes, or None."""
    d, s, n = [], [], []
    for do, dz, co, cz in zip(dst_off, dst_size, ch_off, ch_size):
        lo, hi = max(do, co), min(do + dz, co + cz)
        if hi <= lo:
            return None
        d.append(lo - do)
        s.append(lo - co)
        n.append(hi - lo)
    return torch.Size(d), torch.Size(s), torch.Size(n)


def save(state_dicts, writers, checkpoint_id, finish=True):
    """DCP's save for len(state_dicts) ranks (rank 0 coordinates); writers[r] is rank r's
    storage writer, reset to checkpoint_id unless it is None. Returns (metadata, results) as
    the coordinator holds them; finish=False stops where a crash after the writes and before
    finish() would."""
    ranks = range(len(state_dicts))
    planners = [SavePlanner() for _ in ranks]
    local = []
    for r in ranks:
        w = writers[r]
        if checkpoint_id is not None:  # as DCP: else the writer holds its id
            w.reset(checkpoint_id)
        meta = w.storage_meta() if hasattr(w, "storage_meta") else None
        planners[r].set_up_planner(state_dicts[r], meta, r == 0)
        w.set_up_storage_writer(r == 0, rank=r, use_collectives=True)
        local.append(_wire(w.prepare_local_plan(planners[r].create_local_plan())))
    plans, metadata = planners[0].create_global_plan(local)
    plans = writers[0].prepare_global_plan(plans)

    def write(r):
        final = planners[r].finish_plan(_wire(plans[r]))
        fut = writers[r].write_data(final, planners[r])
        fut.wait()
        return _wire(fut.value())

    with ThreadPoolExecutor(max_workers=len(ranks)) as ex:  # the ranks write at once
        results = list(ex.map(write, ranks))
    if finish:
        writers[0].finish(metadata, results)
    return metadata, results


def load(state_dicts, readers, checkpoint_id):
    """DCP's load into len(state_dicts) ranks' state dicts (filled in place; BYTE_IO entries
    replaced). Returns the planners (their .committed lists)."""
    ranks = range(len(state_dicts))
    planners = [LoadPlanner() for _ in ranks]
    local = []
    for r in ranks:
        rd = readers[r]
        if checkpoint_id is not None:
            rd.reset(checkpoint_id)
        md = rd.read_metadata()
        planners[r].set_up_planner(state_dicts[r], md, r == 0)
        rd.set_up_storage_reader(md, r == 0, rank=r, use_collectives=True)
        local.append(_wire(rd.prepare_local_plan(planners[r].create_local_plan())))
    plans = readers[0].prepare_global_plan(planners[0].create_global_plan(local))

    def read(r):
        final = planners[r].finish_plan(_wire(plans[r]))
        readers[r].read_data(final, planners[r]).wait()

    with ThreadPoolExecutor(max_workers=len(ranks)) as ex:  # the ranks read at once
        list(ex.map(read, ranks))
    return planners
