"""openlake_client.dcp: torch.distributed.checkpoint (DCP) storage over any S3 endpoint, through
libopenlake's native S3 client (openlake_client.s3.Client).

    import torch.distributed.checkpoint as dcp
    from openlake_client.dcp import S3StorageWriter, S3StorageReader
    dcp.save(state_dict, storage_writer=S3StorageWriter("s3://bucket/ckpt/step-100"))
    dcp.load(state_dict, storage_reader=S3StorageReader("s3://bucket/ckpt/step-100"))

Layout under the checkpoint id (a prefix): one object per rank, "__<rank>_<token>.distcp",
holding that rank's write items back to back (tensors as their raw bytes in row-major order,
BYTE_IO items as the bytes the planner serialised), then ".metadata", DCP's Metadata pickled
(as torch's FileSystemWriter does) with each item's (object, offset, length) in its
storage_data, written LAST by one PUT: a save that stops before it never looks complete, and
a save into an id that already holds a checkpoint writes objects of other names (the token is
drawn anew by each save's prepare_global_plan), so the
previous checkpoint stays readable until the new ".metadata" replaces it. Loading unpickles
".metadata": read only checkpoints you trust.

Where torch has torch.distributed.checkpoint (torch >= 2.2) the classes subclass its
StorageWriter / StorageReader and use its WriteResult, MetadataIndex and item types. Where it
does not (Debian 12's torch 1.13), minimal stand-ins with the same field names are defined
here, so the module imports and its layer can be driven by a stand-in of DCP's call sequence
(tests/integration/test_dcp.py). See docs/training.md.
"""

import dataclasses
import enum
import io
import os
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import torch
from torch.futures import Future

from . import s3

METADATA_NAME = ".metadata"
SUFFIX = ".distcp"

try:
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
    from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult

    HAVE_DCP = True
except ImportError:
    HAVE_DCP = False

    class StorageWriter:  # the stand-in base: DCP's is an abc with the same methods
        pass

    class StorageReader:
        pass

    class WriteItemType(enum.Enum):
        TENSOR = 1
        SHARD = 2
        BYTE_IO = 3

    class LoadItemType(enum.Enum):
        TENSOR = 1
        BYTE_IO = 2

    @dataclasses.dataclass(frozen=True)
    class MetadataIndex:
        """Which item of the state dict: fqn, the chunk's offset in the tensor (a tuple), and
        an optional position hint that takes no part in equality."""

        fqn: str
        offset: Optional[tuple] = None
        index: Optional[int] = dataclasses.field(hash=False, compare=False, default=None)

        def __post_init__(self):
            if self.offset is not None:
                object.__setattr__(self, "offset", torch.Size(self.offset))

    @dataclasses.dataclass(frozen=True)
    class WriteResult:
        index: MetadataIndex
        size_in_bytes: int
        storage_data: Any


try:
    from torch.distributed.checkpoint.metadata import StorageMeta
except ImportError:
    if HAVE_DCP:
        StorageMeta = None  # torch 2.2-2.3: DCP without storage_meta
    else:

        @dataclasses.dataclass
        class StorageMeta:
            checkpoint_id: Any = None
            save_id: Optional[str] = None
            load_id: Optional[str] = None


@dataclasses.dataclass
class S3StorageInfo:
    """Where one item lies: the object (relative to the checkpoint prefix), offset, length."""

    relative_path: str
    offset: int
    length: int


@dataclasses.dataclass
class S3StoragePrefix:
    """The coordinator's choice of a rank's object name prefix (a SavePlan's storage_data)."""

    prefix: str


def _split_id(checkpoint_id):
    """"s3://bucket/a/b" -> ("bucket", "a/b/"): the checkpoint is the prefix a/b/."""
    if not S3StorageWriter.validate_checkpoint_id(checkpoint_id):
        raise ValueError("not an S3 checkpoint id (s3://BUCKET/PREFIX): %r" % (checkpoint_id,))
    bucket, key = s3.parse_uri(str(checkpoint_id))
    if key and not key.endswith("/"):
        key += "/"
    return bucket, key


def _valid_id(checkpoint_id):
    if not isinstance(checkpoint_id, (str, os.PathLike)):
        return False
    cid = str(checkpoint_id)
    return cid.startswith("s3://") and len(cid) > 5 and not cid[5:].startswith("/")


def _tensor_bytes(t):
    """A contiguous host tensor holding exactly t's elements (t itself when it already is)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    return t.contiguous()


class S3StorageWriter(StorageWriter):
    """DCP StorageWriter: each rank PUTs one object of its items (parallel multipart from the
    tensors' memory, no copy for contiguous CPU tensors); the coordinator PUTs ".metadata"
    last. client: an s3.Client (default: configured from AWS_* and the AWS files)."""

    def __init__(self, checkpoint_id=None, client=None, delete_previous=True):
        super().__init__()
        self.checkpoint_id = checkpoint_id
        self.client = client
        self.delete_previous = delete_previous
        self.is_coordinator = False
        self.rank = None
        self.save_id = uuid.uuid4().hex

    def _client(self):
        if self.client is None:
            self.client = s3.default_client()
        return self.client

    def reset(self, checkpoint_id=None):
        if checkpoint_id:
            self.checkpoint_id = checkpoint_id
        self.save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        if kwargs.get("use_collectives", True) is False:
            raise ValueError("S3StorageWriter writes one .metadata for all ranks: "
                             "use_collectives=False (per-rank metadata) is not supported")
        if self.checkpoint_id is None:
            raise ValueError("S3StorageWriter has no checkpoint id: pass "
                             "S3StorageWriter('s3://BUCKET/PREFIX') or checkpoint_id=")
        _split_id(self.checkpoint_id)
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank")

    def storage_meta(self):
        if StorageMeta is None:
            return None
        return StorageMeta(checkpoint_id=self.checkpoint_id, save_id=self.save_id)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        """Each rank's object carries its rank and a token drawn for this global plan, so a
        save never writes over the objects a previous checkpoint at the same id names (not
        even with a writer reused without reset())."""
        tag = uuid.uuid4().hex
        return [dataclasses.replace(p, storage_data=S3StoragePrefix("__%d_%s" % (i, tag)))
                for i, p in enumerate(plans)]

    def write_data(self, plan, planner):
        """One PUT of every item of plan, back to back; the returned future holds one
        WriteResult per item (its storage_data an S3StorageInfo)."""
        if not isinstance(plan.storage_data, S3StoragePrefix):
            raise ValueError("plan has no S3StoragePrefix: prepare_global_plan of an "
                             "S3StorageWriter did not plan it")
        bucket, prefix = _split_id(self.checkpoint_id)
        name = plan.storage_data.prefix + SUFFIX
        bufs, results, off = [], [], 0
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                b = data.getbuffer() if isinstance(data, io.BytesIO) else memoryview(data)
                n = b.nbytes
            else:
                b = _tensor_bytes(data)
                n = b.numel() * b.element_size()
            if n:
                bufs.append(b)
            results.append(WriteResult(index=item.index, size_in_bytes=n,
                                       storage_data=S3StorageInfo(name, off, n)))
            off += n
        if plan.items:  # a rank with nothing to write leaves no object
            self._client().put(bucket, prefix + name, bufs)
        del bufs
        fut = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata, results):
        """Check that every object the results name holds their bytes (a HEAD each), then
        PUT ".metadata": the checkpoint exists from then on. With delete_previous, objects of
        earlier saves into the same id ("*.distcp" named by no item now) are deleted after."""
        bucket, prefix = _split_id(self.checkpoint_id)
        c = self._client()
        storage = {}
        ends = {}
        for rank_results in results:
            for wr in rank_results:
                storage[wr.index] = wr.storage_data
                sd = wr.storage_data
                ends[sd.relative_path] = max(ends.get(sd.relative_path, 0),
                                             sd.offset + sd.length)

        def check(item):
            path, end = item
            try:
                size, _ = c.head(bucket, prefix + path)
            except s3.S3Error as e:
                if not e.not_found:
                    raise
                size = None
            if size is None or size < end:
                raise ValueError("checkpoint %s not finished: s3://%s/%s%s %s, its items "
                                 "need %d bytes (a rank's write failed or was removed)" %
                                 (self.checkpoint_id, bucket, prefix, path, "is missing"
                                  if size is None else "holds %d bytes" % size, end))

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(ends)))) as ex:
            list(ex.map(check, ends.items()))
        metadata.storage_data = storage
        if hasattr(metadata, "storage_meta") and StorageMeta is not None:
            metadata.storage_meta = self.storage_meta()
        c.put(bucket, prefix + METADATA_NAME, pickle.dumps(metadata))
        if self.delete_previous:
            for key, _ in c.list(bucket, prefix):
                rel = key[len(prefix):]
                if rel.endswith(SUFFIX) and "/" not in rel and rel not in ends:
                    try:
                        c.delete(bucket, key)
                    except s3.S3Error:
                        pass

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return _valid_id(checkpoint_id)


class S3StorageReader(StorageReader):
    """DCP StorageReader: reads ".metadata", then each rank's planned items with ranged GETs
    straight into the target tensors (a contiguous CPU target that takes a whole stored chunk
    receives the bytes directly; others are read beside and copied in)."""

    def __init__(self, checkpoint_id=None, client=None, max_workers=4):
        super().__init__()
        self.checkpoint_id = checkpoint_id
        self.client = client
        self.max_workers = max(1, max_workers)
        self.metadata = None
        self.storage_data = {}
        self.load_id = uuid.uuid4().hex

    def _client(self):
        if self.client is None:
            self.client = s3.default_client()
        return self.client

    def reset(self, checkpoint_id=None):
        self.storage_data = {}
        self.metadata = None
        if checkpoint_id:
            self.checkpoint_id = checkpoint_id
        self.load_id = uuid.uuid4().hex

    def read_metadata(self, *args, **kwargs):
        """The checkpoint's Metadata; FileNotFoundError when ".metadata" is absent (no save
        finished there)."""
        if self.checkpoint_id is None:
            raise ValueError("S3StorageReader has no checkpoint id: pass "
                             "S3StorageReader('s3://BUCKET/PREFIX') or checkpoint_id=")
        bucket, prefix = _split_id(self.checkpoint_id)
        try:
            raw = self._client().get(bucket, prefix + METADATA_NAME)
        except s3.S3Error as e:
            if e.not_found:
                raise FileNotFoundError(
                    "no complete checkpoint at %s: %s is missing (a save that did not "
                    "finish, or a wrong id)" % (self.checkpoint_id, METADATA_NAME)) from None
            raise
        md = pickle.loads(bytes(raw))
        if getattr(md, "storage_meta", None) is not None and hasattr(md.storage_meta,
                                                                      "load_id"):
            md.storage_meta.load_id = self.load_id
        return md

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.metadata = metadata
        self.storage_data = metadata.storage_data or {}

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def _chunk(self, index):
        """(dtype, sizes) of the stored chunk index names."""
        md = self.metadata.state_dict_metadata.get(index.fqn)
        chunks = getattr(md, "chunks", None)
        if not chunks:
            raise ValueError("checkpoint %s: %r is not a tensor in its metadata" %
                             (self.checkpoint_id, index.fqn))
        hint = index.index
        if hint is not None and 0 <= hint < len(chunks) and (
                index.offset is None or list(chunks[hint].offsets) == list(index.offset)):
            return md.properties.dtype, chunks[hint].sizes
        for ch in chunks:
            if index.offset is None or list(ch.offsets) == list(index.offset):
                return md.properties.dtype, ch.sizes
        raise ValueError("checkpoint %s: %r has no chunk at offset %s" %
                         (self.checkpoint_id, index.fqn, list(index.offset)))

    def _plan_item(self, req, planner):
        """(info, buffer to GET into, finish callback) for one ReadItem."""
        info = self.storage_data.get(req.storage_index)
        if info is None:
            raise ValueError("checkpoint %s: no stored item for %r" %
                             (self.checkpoint_id, req.storage_index))
        if req.type == LoadItemType.BYTE_IO:
            buf = bytearray(info.length)
            return info, buf, lambda: planner.load_bytes(req, io.BytesIO(bytes(buf)))
        dtype, sizes = self._chunk(req.storage_index)
        n = 1
        for d in sizes:
            n *= d
        if n * torch.empty((), dtype=dtype).element_size() != info.length:
            raise ValueError("checkpoint %s: %r: %d stored bytes do not hold %s %s" %
                             (self.checkpoint_id, req.storage_index.fqn, info.length, dtype,
                              list(sizes)))
        target = planner.resolve_tensor(req).detach()  # shaped as req.lengths
        if (list(target.shape) == list(sizes) and target.device.type == "cpu" and
                target.is_contiguous() and target.dtype == dtype):  # the whole chunk
            return info, target, lambda: planner.commit_tensor(req, target)
        tmp = torch.empty(list(sizes), dtype=dtype)

        def done():
            src = tmp
            for dim, (o, ln) in enumerate(zip(req.storage_offsets, req.lengths)):
                src = src.narrow(dim, o, ln)
            if list(target.shape) != list(src.shape):
                raise ValueError("checkpoint %s: %r: target %s, read item %s" %
                                 (self.checkpoint_id, req.storage_index.fqn,
                                  list(target.shape), list(src.shape)))
            target.copy_(src)
            planner.commit_tensor(req, target)

        return info, tmp, done

    def read_data(self, plan, planner):
        """Ranged GETs of plan's items, grouped per object into runs of adjacent ranges (one
        scatter-list GET per run, runs in parallel); then load_bytes / commit_tensor per item
        in plan order."""
        bucket, prefix = _split_id(self.checkpoint_id)
        c = self._client()
        planned = [self._plan_item(req, planner) for req in plan.items]
        runs = []
        for info, buf, _ in sorted(planned, key=lambda p: (p[0].relative_path, p[0].offset)):
            if info.length == 0:
                continue
            last = runs[-1] if runs else None
            if last and last[0] == info.relative_path and last[2] == info.offset:
                last[2] += info.length
                last[3].append(buf)
            else:
                runs.append([info.relative_path, info.offset, info.offset + info.length,
                             [buf]])

        def get(run):
            path, off, _, bufs = run
            c.get_into(bucket, prefix + path, bufs, offset=off)

        if runs:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(runs))) as ex:
                list(ex.map(get, runs))
        for _, _, done in planned:
            done()
        fut = Future()
        fut.set_result(None)
        return fut

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return _valid_id(checkpoint_id)
