"""Paged KV-cache layouts: find the block dimension and move whole blocks in and out.

Supported per-layer tensors (vLLM `get_kv_cache_shape`):
  fa         FlashAttention (legacy)  [2, num_blocks, block_size, heads, head_dim]  block dim 1
  flashinfer FlashInfer / Triton      [num_blocks, 2, block_size, heads, head_dim]  block dim 0
  bhnc       FlashAttention (newest)  [num_blocks, heads, block_size, 2*head_dim]   block dim 0
  mla        MLA                      [num_blocks, block_size, latent]              block dim 0
The byte image of one block of one layer is `t.select(block_dim, b)` in logical order, so an
HND-strided tensor gives the same bytes as an NHD one; bhnc blocks are permuted to the
[2, block_size, heads, head_dim] order of fa/flashinfer, so every non-MLA backend stores the
same bytes and can share the same keys. Contiguous CPU blocks move without a
copy (one iovec per K/V half); anything else (strided, CUDA) is staged.
"""

from dataclasses import dataclass

LAYOUTS = ("fa", "flashinfer", "bhnc", "mla")


@dataclass(frozen=True)
class LayerLayout:
    name: str
    block_dim: int
    num_blocks: int
    block_size: int
    slab_shape: tuple  # shape of t.select(block_dim, b)
    slab_bytes: int


def detect_layout(t, num_blocks=None, block_size=None):
    """LayerLayout of one registered KV tensor, or raise ValueError.

    num_blocks (from kv_cache_config) disambiguates; without it the shape decides."""
    shape = tuple(t.shape)
    nd = len(shape)
    if nd == 5:
        fa = shape[0] == 2 and (shape[1] == num_blocks if num_blocks else shape[1] != 2)
        fi = shape[1] == 2 and (shape[0] == num_blocks if num_blocks else shape[0] != 2)
        if fa == fi:
            raise ValueError("ambiguous or unknown 5-d KV shape %s (num_blocks=%s)"
                             % (shape, num_blocks))
        name, bd, bs = ("fa", 1, shape[2]) if fa else ("flashinfer", 0, shape[2])
    elif nd == 4:
        name, bd, bs = "bhnc", 0, shape[2]
    elif nd == 3:
        name, bd, bs = "mla", 0, shape[1]
    else:
        raise ValueError("unsupported KV tensor rank %d, shape %s" % (nd, shape))
    if num_blocks is not None and shape[bd] != num_blocks:
        raise ValueError("KV shape %s has no block dim of size %d" % (shape, num_blocks))
    if block_size is not None and bs != block_size:
        raise ValueError("KV shape %s: block size %d, config says %d" % (shape, bs, block_size))
    slab = shape[:bd] + shape[bd + 1:]
    n = 1
    for s in slab:
        n *= s
    return LayerLayout(name, bd, shape[bd], bs, slab, n * t.element_size())


def _segments(t, lay, b):
    """Views of block b of layer tensor t, in image order."""
    if lay.block_dim == 0:
        return [t[b]]
    return [t[i, b] for i in range(t.shape[0])]


class PagedKV:
    """All layers of one worker's KV cache; block images are layer-major, then block."""

    def __init__(self, kv_caches, num_blocks=None, block_size=None, stage_all=False,
                 cross=None):
        """kv_caches: layer name -> tensor; stage_all: stage even blocks that could move
        without a copy (the GPU path's CPU twin); cross: the one tensor of every layer
        [num_blocks, layers, ...] the per-layer views come from (see cross_layer())."""
        self.cross = cross
        if not kv_caches:
            raise ValueError("no KV caches registered")
        self.names = list(kv_caches.keys())
        self.tensors = [kv_caches[n] for n in self.names]
        seen = {}
        self.layouts = []
        for t in self.tensors:
            lay = detect_layout(t, num_blocks, block_size)
            self.layouts.append(lay)
            seen[lay.name] = lay
        if len(seen) != 1:
            raise ValueError("mixed KV layouts %s" % sorted(seen))
        first = self.layouts[0]
        self.layout = first.name
        self.block_size = first.block_size
        self.num_blocks = first.num_blocks
        self.dtype = str(self.tensors[0].dtype).replace("torch.", "")
        self.block_bytes = sum(lay.slab_bytes for lay in self.layouts)
        self.device = self.tensors[0].device
        self.zero_copy = not stage_all and self.layout != "bhnc" and all(
            self._zc_ok(t, lay) for t, lay in zip(self.tensors, self.layouts))
        self.family = "mla" if self.layout == "mla" else "kv"
        # every layer the same dtype, block shape and block dimension (and not bhnc, whose
        # image order is not the tensor's): pack / unpack view a chunk's image as
        # [layers, blocks, block...] at once instead of layer by layer
        self._uniform = self.layout != "bhnc" and len(
            {(t.dtype, lay.slab_shape, lay.block_dim)
             for t, lay in zip(self.tensors, self.layouts)}) == 1
        self._geo = [self._seg_geometry(t, lay) for t, lay in zip(self.tensors, self.layouts)] \
            if self.zero_copy else None
        if self._geo is not None and None in self._geo:
            self.zero_copy, self._geo = False, None
        self._tab = None  # iov_arrays' per-layer arrays, built on first use

    @classmethod
    def cross_layer(cls, kv_cache, attn_backend=None, num_blocks=None, block_size=None,
                    stage_all=False):
        """A PagedKV over vLLM's cross-layer cache: one tensor for every layer, allocated in
        the physical order the backend's get_kv_cache_stride_order(include_num_layers_
        dimension=True) gives for the logical shape (layers, *per-layer shape) (identity, or a
        backend without it: layers first). Layer i is that permuted back, [i]: the same view
        vLLM hands the attention layers, so blocks have the same images (same stored bytes and
        keys) as with per-layer tensors. When the physical order is [num_blocks, layers,
        per-layer block in logical order] (FA and FlashInfer NHD, MLA), staged copies gather
        every layer of a chunk in one index_select; other orders go layer by layer."""
        order = None
        fn = getattr(attn_backend, "get_kv_cache_stride_order", None)
        if fn is not None:
            try:
                order = tuple(fn(include_num_layers_dimension=True))
            except (NotImplementedError, TypeError):
                order = None
        if order is None or len(order) != kv_cache.dim() or sorted(order) != \
                list(range(kv_cache.dim())):
            order = tuple(range(kv_cache.dim()))
        logical = kv_cache.permute(*[order.index(i) for i in range(len(order))])
        n = logical.shape[0]
        views = {"layer.%d" % i: logical[i] for i in range(n)}
        kv = cls(views, num_blocks, block_size, stage_all)
        if kv.layout != "bhnc" and _block_major(kv_cache, kv):
            kv.cross = kv_cache
        return kv

    @staticmethod
    def _seg_geometry(t, lay):
        """(base, block stride, [segment offsets], segment bytes) in bytes: the addresses of
        block b's segments are base + b*bstride + off (checked against real views)."""
        es = t.element_size()
        bstride = t.stride(lay.block_dim) * es
        segs = _segments(t, lay, 0)
        base = t.data_ptr()
        offs = [v.data_ptr() - base for v in segs]
        n = segs[0].numel() * es
        last = _segments(t, lay, lay.num_blocks - 1)
        if [v.data_ptr() - base for v in last] != [o + (lay.num_blocks - 1) * bstride
                                                    for o in offs]:
            return None
        return base, bstride, offs, n

    @staticmethod
    def _zc_ok(t, lay):
        if t.device.type != "cpu":
            return False
        return all(v.is_contiguous() for v in _segments(t, lay, 0))

    def shape_fingerprint(self):
        """Identity of the bytes: layout, dtype and per-layer slab shapes."""
        shapes = ";".join("x".join(map(str, lay.slab_shape)) for lay in self.layouts)
        return "%s/%s/%d/%s" % (self.layout, self.dtype, len(self.layouts), shapes)

    def _sel(self, layer):
        """Indices of the layers an image holds: every layer, or the one layer-wise saves and
        loads move (one pool object per chunk and layer)."""
        return range(len(self.tensors)) if layer is None else (layer,)

    def image_bytes(self, k, layer=None):
        """Bytes of the image of k blocks (of every layer, or of one)."""
        if layer is None:
            return k * self.block_bytes
        return k * self.layouts[layer].slab_bytes

    def iovs(self, block_ids, layer=None):
        """[(addr, len)] covering the image of block_ids (every layer, or one), without
        copying (zero_copy only)."""
        out = []
        for i in self._sel(layer):
            base, bstride, offs, n = self._geo[i]
            for b in block_ids:
                a = base + b * bstride
                out.extend((a + o, n) for o in offs)
        return out

    def iov_arrays(self, ids, layer=None):
        """The iovecs of kv.iovs(row, layer) for every row of ids (int64 array [J, k]) at
        once: (addresses, int64 [J, n]; lengths, int64 [n], the same for every row), n =
        iovecs per chunk; zero_copy only. A few numpy operations instead of Python loops: a
        32-layer chunk has 64 iovecs per block."""
        import numpy as np

        if self._tab is None:
            self._tab = (np.array([[g[0] + o for o in g[2]] for g in self._geo], np.int64),
                         np.array([g[1] for g in self._geo], np.int64),
                         np.array([g[3] for g in self._geo], np.int64))
        base, stride, seglen = self._tab
        if layer is not None:
            base, stride, seglen = base[layer:layer + 1], stride[layer:layer + 1], \
                seglen[layer:layer + 1]
        nl, ns = base.shape
        ids = np.asarray(ids, np.int64)
        J, k = ids.shape
        # [J, layer, block, segment], the order of iovs(): layer-major, then block, then segment
        addr = base[None, :, None, :] + ids[:, None, :, None] * stride[None, :, None, None]
        lens = np.broadcast_to(seglen[:, None, None], (nl, k, ns))
        return addr.reshape(J, nl * k * ns), lens.reshape(nl * k * ns)

    def pack(self, block_ids, out=None, layer=None, non_blocking=False):
        """The image of block_ids (every layer, or one) as a uint8 tensor: written into out
        (a host slab, or a buffer on the tensors' device) or into a new CPU tensor. Each layer's
        blocks are gathered straight into their place in the image on the tensors' device; a
        CUDA image then goes to a host out in one copy (non_blocking into pinned memory)."""
        import torch

        sel = _Sel(block_ids, self.device)
        n = self.image_bytes(sel.k, layer)
        if out is None:
            out = torch.empty(n, dtype=torch.uint8)
        if out.device == self.device:
            self._gather(sel, out[:n], layer)
            return out
        img = torch.empty(n, dtype=torch.uint8, device=self.device)
        self._gather(sel, img, layer)
        out[:n].copy_(img, non_blocking=non_blocking)
        return out

    def _gather(self, sel, dst, layer):
        """Write the image of the blocks of sel (every layer, or one) into the uint8 tensor
        dst. Runs of consecutive blocks are plain strided copies (a few times cheaper than
        index_select on a CPU; no index tensor to move to a GPU); scattered ids index."""
        k = sel.k
        if self.cross is not None and layer is None and self.layout != "bhnc":
            d = _from_bytes(dst, self.cross.dtype).view(
                (len(self.tensors), k) + tuple(self.cross.shape[2:]))
            sel.take(self.cross, 0, d.movedim(1, 0))
            return
        if self._uniform and sel.runs is not None:
            sel.take_layers(self._layers(layer), self.layouts[0], self._image(dst, k, layer))
            return
        off = 0
        for i in self._sel(layer):
            t, lay = self.tensors[i], self.layouts[i]
            nb = lay.slab_bytes * k
            d = _from_bytes(dst[off:off + nb], t.dtype)
            off += nb
            if lay.name == "bhnc":
                h, bs, c2 = lay.slab_shape
                sel.take(t, 0, d.view(k, 2, bs, h, c2 // 2),
                         lambda x: x.reshape(-1, h, bs, 2, c2 // 2).permute(0, 3, 2, 1, 4))
            else:
                sel.take(t, lay.block_dim, d.view((k,) + lay.slab_shape))

    def unpack(self, block_ids, img, layer=None, non_blocking=False):
        """Scatter a staged image (uint8 CPU tensor; pinned when non_blocking) into block_ids
        of every layer (or of the one layer the image holds): one host-to-device copy, then
        the scatter on the device (one copy per run of consecutive blocks per layer, or one
        index_copy_; one for all layers of a cross-layer cache)."""
        sel = _Sel(block_ids, self.device)
        k = sel.k
        dev = img[:self.image_bytes(k, layer)].to(self.device, non_blocking=non_blocking)
        if self.cross is not None and layer is None and self.layout != "bhnc":
            x = _from_bytes(dev, self.cross.dtype)
            x = x.reshape((len(self.tensors), k) + self.layouts[0].slab_shape)
            sel.put(self.cross, 0, x.movedim(0, 1))
            return
        if self._uniform and sel.runs is not None:
            sel.put_layers(self._layers(layer), self.layouts[0], self._image(dev, k, layer))
            return
        off = 0
        for i in self._sel(layer):
            t, lay = self.tensors[i], self.layouts[i]
            n = lay.slab_bytes * k
            part = dev[off:off + n]
            off += n
            x = _from_bytes(part, t.dtype)
            if lay.name == "bhnc":
                h, bs, c2 = lay.slab_shape
                x = x.reshape(k, 2, bs, h, c2 // 2).permute(0, 3, 2, 1, 4)
            sel.put(t, lay.block_dim, x.reshape((k,) + lay.slab_shape))


    def _layers(self, layer):
        return self.tensors if layer is None else [self.tensors[layer]]

    def _image(self, img, k, layer):
        """A uniform cache's image of k blocks as [layers, k, block...] (a view of img)."""
        lay, n = self.layouts[0], len(self._sel(layer))
        return _from_bytes(img[:lay.slab_bytes * k * n], self.tensors[0].dtype).view(
            (n, k) + lay.slab_shape)


_RUNS_MAX = 4  # more runs of consecutive block ids than this: one indexed op instead


class _Sel:
    """Block ids of one pack / unpack: as up to _RUNS_MAX runs of consecutive ids (strided
    copies), else as an index tensor on the device (made once for every layer)."""

    __slots__ = ("ids", "k", "runs", "_idx", "device")

    def __init__(self, block_ids, device):
        self.ids, self.device, self._idx = list(block_ids), device, None
        self.k = len(self.ids)
        runs = []
        for pos, b in enumerate(self.ids):
            if runs and b == runs[-1][0] + runs[-1][1]:
                runs[-1][1] += 1
            elif len(runs) == _RUNS_MAX:
                runs = None
                break
            else:
                runs.append([b, 1, pos])
        self.runs = runs

    def idx(self):
        if self._idx is None:
            import torch

            self._idx = torch.tensor(self.ids, dtype=torch.long, device=self.device)
        return self._idx

    def take(self, t, dim, out, shape=None):
        """out[j] = block ids[j] of t along dim (out: [k, ...], block-major); shape: what to
        apply to the blocks (block-major) before they land in out."""
        if self.runs is None and dim == 0 and shape is None:
            import torch

            torch.index_select(t, 0, self.idx(), out=out)
            return
        shape = shape or (lambda x: x)
        if self.runs is None:
            out.copy_(shape(t.index_select(dim, self.idx()).movedim(dim, 0)))
            return
        for first, cnt, pos in self.runs:
            out[pos:pos + cnt].copy_(shape(t.narrow(dim, first, cnt).movedim(dim, 0)))

    def take_layers(self, tensors, lay, img):
        """img[i, j] = block ids[j] of tensors[i] (runs only; img: [layers, k, block...])."""
        d = lay.block_dim
        for first, cnt, pos in self.runs:
            for t, o in zip(tensors, img[:, pos:pos + cnt].unbind(0)):
                o.copy_(t.narrow(d, first, cnt).movedim(d, 0))

    def put_layers(self, tensors, lay, img):
        """Block ids[j] of tensors[i] = img[i, j] (runs only; img: [layers, k, block...])."""
        d = lay.block_dim
        for first, cnt, pos in self.runs:
            for t, x in zip(tensors, img[:, pos:pos + cnt].movedim(1, 1 + d).unbind(0)):
                t.narrow(d, first, cnt).copy_(x)

    def put(self, t, dim, x):
        """Block ids[j] of t along dim = x[j] (x: [k, ...], block-major)."""
        if self.runs is None:
            t.index_copy_(dim, self.idx(), x.movedim(0, dim))
            return
        for first, cnt, pos in self.runs:
            t.narrow(dim, first, cnt).copy_(x[pos:pos + cnt].movedim(0, dim))


def _block_major(phys, kv):
    """True when phys[b, i] is exactly block b of layer i (same elements, same order): the
    physical tensor is [num_blocks, layers, block in logical order]."""
    if phys.dim() < 3 or phys.shape[0] != kv.num_blocks or phys.shape[1] != len(kv.tensors):
        return False
    for i in (0, len(kv.tensors) - 1):
        t, lay = kv.tensors[i], kv.layouts[i]
        v = t.movedim(lay.block_dim, 0)
        p = phys[:, i]
        if tuple(v.shape) != tuple(p.shape) or v.stride() != p.stride() or \
                v.data_ptr() != p.data_ptr():
            return False
    return True


def _as_bytes(x):
    import torch

    x = x.reshape(-1)
    if x.dtype == torch.uint8:
        return x
    return x.view(torch.uint8)


def _from_bytes(b, dtype):
    import torch

    if dtype == torch.uint8:
        return b
    return b.view(dtype)
