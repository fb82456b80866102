"""ExANS on the KV tensors' device: the connector's ctypes binding of libol_exans_gpu
(src/codec/cuda/exans_gpu.h, built when nvcc and cudart are found) and of its CPU twin
libol_exans_twin (always built; host memory, the CPU's block coders).

Both produce and read exactly the values libopenlake stores with compress = "exans" (an
"OLZ1" header and an ExANS container of 64 KiB blocks, or the plain value when that does not
shrink), so a chunk saved compressed on a GPU loads on a CPU node and back. Calls are queued
on the copy engine's stream; encode and decode synchronise it once inside (the host needs the
encoded length, the blocks' statuses), so the host reads what they wrote only after an event
recorded after them. xxh3_batch() puts the trailers' checksums (libopenlake's XXH3) of a
whole batch of chunks in place on the device in one launch (one warp per chunk, no wait);
xxh3() does one value. encode_batch() and decode_start() / decode_finish() let a batch wait
once (for every encoded length; for every block status, with the checks' copy). Device
buffers (work memory, the stored form, a loaded value) are per thread, kept and grown only
when a larger value comes (allocated on the copy stream); the host state buffers too (pinned
with CUDA)."""

import ctypes
import glob
import os
import threading
from pathlib import Path

from . import _lib

_c_u64, _c_i64, _vp = ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p


def candidates(cuda):
    """Where the library is looked for: $OPENLAKE_EXANS_GPU_LIBRARY; beside the loaded
    libopenlake's build tree or install; a source checkout's build directories; the
    installed libopenlake's private directory <libdir>/openlake."""
    name = "libol_exans_gpu.so" if cuda else "libol_exans_twin.so"
    out = []
    env = os.environ.get("OPENLAKE_EXANS_GPU_LIBRARY" if cuda else "OPENLAKE_EXANS_TWIN_LIBRARY")
    if env:
        out.append(env)
    for lib in [p for p in _lib.candidates() if os.path.isabs(p)]:
        d = Path(lib).parent
        out += [str(d.parent / "src" / "codec" / "cuda" / name), str(d / name),
                str(d / "openlake" / name)]
    if _lib._in_checkout():
        root = _lib.repo_root()
        b = os.environ.get("OPENLAKE_BUILD", "build")
        out.append(str((Path(b) if os.path.isabs(b) else root / b) / "src/codec/cuda" / name))
        out += sorted(glob.glob(str(root / "build*" / "src/codec/cuda" / name)))
    # installed: in libopenlake's private directory, <libdir>/openlake (meson install, the
    # Debian package libopenlake0)
    ma = _lib._multiarch()
    for d in ([f"/usr/lib/{ma}", f"/usr/local/lib/{ma}"] if ma else []) + ["/usr/local/lib",
                                                                          "/usr/lib"]:
        out.append(f"{d}/openlake/{name}")
    out += ["/usr/local/lib/" + name, "/usr/lib/" + name, name]
    seen = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def load_library(cuda):
    """The CUDA library (cuda) or the twin, or None when not found."""
    for c in candidates(cuda):
        if os.path.isabs(c) and not os.path.exists(c):
            continue
        try:
            lib = ctypes.CDLL(c)
        except OSError:
            continue
        lib.ol_exans_gpu_work_bytes.restype = _c_u64
        lib.ol_exans_gpu_work_bytes.argtypes = [_c_u64]
        lib.ol_exans_gpu_bound.restype = _c_u64
        lib.ol_exans_gpu_bound.argtypes = [_c_u64]
        lib.ol_exans_gpu_encode.restype = _c_i64
        lib.ol_exans_gpu_encode.argtypes = [_vp, _c_u64, _vp, _c_u64, _vp, _vp]
        lib.ol_exans_gpu_decode.restype = _c_i64
        lib.ol_exans_gpu_decode.argtypes = [_vp, _vp, _c_u64, _vp, _c_u64, _vp, _vp]
        lib.ol_exans_gpu_xxh3.restype = ctypes.c_int
        lib.ol_exans_gpu_xxh3.argtypes = [_vp, _c_u64, _vp, _vp]
        lib.ol_exans_gpu_state_bytes.restype = _c_u64
        lib.ol_exans_gpu_state_bytes.argtypes = [_c_u64]
        lib.ol_exans_gpu_encode_start.restype = ctypes.c_int
        lib.ol_exans_gpu_encode_start.argtypes = [_vp, _c_u64, _vp, _vp, _vp]
        lib.ol_exans_gpu_encode_finish.restype = _c_i64
        lib.ol_exans_gpu_encode_finish.argtypes = [_vp, _c_u64, _vp, _c_u64, _vp, _vp, _vp]
        lib.ol_exans_gpu_decode_start.restype = _c_i64
        lib.ol_exans_gpu_decode_start.argtypes = [_vp, _vp, _c_u64, _vp, _c_u64, _vp, _vp, _vp]
        lib.ol_exans_gpu_decode_finish.restype = ctypes.c_int
        lib.ol_exans_gpu_decode_finish.argtypes = [_vp]
        lib.ol_exans_gpu_xxh3_batch.restype = ctypes.c_int
        lib.ol_exans_gpu_xxh3_batch.argtypes = [_vp, ctypes.c_uint32, _vp, _vp]
        lib.ol_exans_gpu_xxh3_work_bytes.restype = _c_u64
        lib.ol_exans_gpu_xxh3_work_bytes.argtypes = [ctypes.c_uint32]
        if bool(lib.ol_exans_gpu_is_cuda()) == cuda:
            lib._path = c
            return lib
    return None


class GpuCodec:
    """Encode / decode whole values in the memory of `device` (torch). Device buffers are per
    thread (the save thread and the load threads call it at once); `alloc(n)` makes one (the
    copy engine's empty(): owned by its stream), torch.empty on the device by default."""

    def __init__(self, lib, device, stream=None, alloc=None):
        self.lib, self.device, self.stream = lib, device, stream
        self.cuda = bool(lib.ol_exans_gpu_is_cuda())
        self.alloc = alloc or self._empty
        self.allocations = 0  # device buffers ever made (tests: none after warm-up)
        self._tls = threading.local()

    @classmethod
    def open(cls, device, stream=None, alloc=None):
        """A codec for tensors on device (CUDA: libol_exans_gpu; CPU: the twin), or None."""
        lib = load_library(device.type == "cuda")
        return cls(lib, device, stream, alloc) if lib is not None else None

    def bound(self, n):
        return int(self.lib.ol_exans_gpu_bound(n))

    def _empty(self, n):
        import torch

        return torch.empty(n, dtype=torch.uint8, device=self.device)

    def _kept(self, attr, n, alloc):
        """This thread's buffer kept under attr, of at least n bytes: made by alloc(size), grown
        by half again when too small (a few sizes over a run, then none)."""
        b = getattr(self._tls, attr, None)
        if b is None or b.numel() < n:
            size = n if b is None else max(n, b.numel() + b.numel() // 2)
            b = alloc(size)
            setattr(self._tls, attr, b)
            self.allocations += 1
        return b

    def buffer(self, name, n):
        """This thread's device buffer `name` of at least n bytes (kept and grown, _kept)."""
        return self._kept(name, n, self.alloc)

    def host_buffer(self, name, n):
        """This thread's host buffer `name` of at least n bytes (pinned with CUDA, so the
        device's copies into it do not synchronise), kept and grown as buffer()."""
        import torch

        return self._kept("h_" + name, n,
                          lambda size: torch.empty(size, dtype=torch.uint8, pin_memory=self.cuda))

    def _work(self, n):
        return self.buffer("work", int(self.lib.ol_exans_gpu_work_bytes(n)))

    def _stream(self):
        return None if self.stream is None else self.stream.cuda_stream

    def encode(self, src, out):
        """The stored form of src (a contiguous uint8 tensor on the device) into out (uint8,
        on the device, >= bound(src.numel()) bytes). Returns its length."""
        n = src.numel()
        r = self.lib.ol_exans_gpu_encode(src.data_ptr(), n, out.data_ptr(), out.numel(),
                                         self._work(n).data_ptr(), self._stream())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_encode: %s" % os.strerror(-r))
        return r

    def encode_batch(self, srcs, emit):
        """The stored form of every tensor of srcs (contiguous uint8 on the device) with one
        wait for all their encoded lengths: every block encode queued, the stream
        synchronised once, then each stored form written to one device buffer in turn and
        emit(i, stored) called, which must queue its copy out on the stream (the next one
        overwrites the buffer after it). Call it on the stream's thread of work (the copy
        engine's run): the wait is the stream's."""
        work_n = -(-int(self.lib.ol_exans_gpu_work_bytes(max(s.numel() for s in srcs))) // 256)
        state_n = -(-int(self.lib.ol_exans_gpu_state_bytes(max(s.numel() for s in srcs))) // 16)
        work_n, state_n = work_n * 256, state_n * 16
        work = self.buffer("enc_work", work_n * len(srcs))
        state = self.host_buffer("enc_state", state_n * len(srcs))
        st = self._stream()
        for i, s in enumerate(srcs):
            r = self.lib.ol_exans_gpu_encode_start(s.data_ptr(), s.numel(),
                                                   work.data_ptr() + i * work_n,
                                                   state.data_ptr() + i * state_n, st)
            if r < 0:
                raise OSError(-r, "ol_exans_gpu_encode_start: %s" % os.strerror(-r))
        if self.stream is not None:
            self.stream.synchronize()  # the one wait: every value's lengths
        out = self.buffer("out", self.bound(max(s.numel() for s in srcs)))
        for i, s in enumerate(srcs):
            r = self.lib.ol_exans_gpu_encode_finish(s.data_ptr(), s.numel(), out.data_ptr(),
                                                    out.numel(), work.data_ptr() + i * work_n,
                                                    state.data_ptr() + i * state_n, st)
            if r < 0:
                raise OSError(-r, "ol_exans_gpu_encode_finish: %s" % os.strerror(-r))
            emit(i, out[:r])

    def decode(self, h_val, d_val, n, dst):
        """Decode the stored value of n bytes (h_val: on the host, d_val: its copy on the
        device) into dst (uint8 on the device). Returns the plain length; raises OSError
        (EBADMSG: corrupt)."""
        r = self.lib.ol_exans_gpu_decode(h_val.data_ptr(), d_val.data_ptr(), n,
                                         dst.data_ptr(), dst.numel(),
                                         self._work(dst.numel()).data_ptr(), self._stream())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_decode: %s" % os.strerror(-r))
        return r

    def decode_states(self, count, cap):
        """count host state buffers (this thread's, pinned with CUDA) for decode_start of
        values of up to cap plain bytes."""
        per = -(-int(self.lib.ol_exans_gpu_state_bytes(cap)) // 16) * 16
        h = self.host_buffer("dec_state", per * count)
        return [h[i * per:(i + 1) * per] for i in range(count)]

    def decode_start(self, h_val, d_val, n, dst, state):
        """decode() without its wait: the blocks' decode queued, their statuses copied to
        state (decode_states) when the stream gets there. Returns the plain length; raises
        OSError (a bad header or index). decode_finish(state) after the stream is
        synchronised says whether every block decoded; values of a batch share the work
        buffer (the stream orders them)."""
        r = self.lib.ol_exans_gpu_decode_start(h_val.data_ptr(), d_val.data_ptr(), n,
                                               dst.data_ptr(), dst.numel(),
                                               self._work(dst.numel()).data_ptr(),
                                               state.data_ptr(), self._stream())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_decode_start: %s" % os.strerror(-r))
        return r

    def decode_finish(self, state):
        """Raises OSError (EBADMSG) when a block of the value decode_start queued failed."""
        r = self.lib.ol_exans_gpu_decode_finish(state.data_ptr())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_decode: %s" % os.strerror(-r))

    def xxh3(self, src, n, out_addr):
        """The low 32 bits of XXH3-64 of src[:n] (on the device), little-endian at the device
        address out_addr (a trailer's checksum field). Queued on the stream."""
        r = self.lib.ol_exans_gpu_xxh3(src.data_ptr(), n, out_addr, self._stream())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_xxh3: %s" % os.strerror(-r))

    def xxh3_batch(self, sums):
        """For each (src address, n, out address) of sums (device addresses): the low 32 bits
        of XXH3-64 of the n bytes, little-endian at out. One launch for the batch, queued on
        the stream (the table goes up from host memory before the call returns)."""
        import numpy as np

        if not sums:
            return
        tab = np.array(sums, dtype=np.uint64).reshape(len(sums), 3)
        work = self.buffer("sums", int(self.lib.ol_exans_gpu_xxh3_work_bytes(len(sums))))
        r = self.lib.ol_exans_gpu_xxh3_batch(tab.ctypes.data, len(sums), work.data_ptr(),
                                             self._stream())
        if r < 0:
            raise OSError(-r, "ol_exans_gpu_xxh3_batch: %s" % os.strerror(-r))
