"""The connector's device layer: a reusable host staging pool and a copy engine.

StagingPool: fixed-size host slabs (pinned when the KV tensors are CUDA, plain memory
otherwise), allocated at most once each, handed out per transfer and given back after it.
The pool is bounded in total bytes; when every slab is out, acquire() waits for one to come
back (it never allocates past the bound). A slab given back with a pending copy event (a
non_blocking H2D still reading it) is reused only once that event completed.

CopyEngine: host <-> device copies on a dedicated CUDA stream, each followed by a recorded
CUDA event; copies from and to pinned slabs are non_blocking. Completion is polled with
event.query(); the compute stream is ordered after a load with wait_event (no host sync).
On CPU tensors the engine is its CPU twin: the same calls, the copy done at once and a
completed event returned, so every code path above it (staging, events, deferred release,
layer-wise pipelining) runs on machines without a GPU.
"""

import threading


class DoneEvent:
    """The CPU twin's event: the copy is done when the call returns."""

    __slots__ = ()

    def query(self):
        return True

    def synchronize(self):
        pass


DONE = DoneEvent()
CURRENT = object()  # run(after=CURRENT): after the calling thread's current stream


class CopyEngine:
    """Copies between host slabs and the KV tensors' device on one stream of its own."""

    def __init__(self, device):
        import torch

        self.device = device
        self.cuda = device.type == "cuda" and torch.cuda.is_available()
        self.stream = torch.cuda.Stream(device=device) if self.cuda else None
        self.copies = 0  # copies issued (for tests and benches)

    def run(self, fn, after=CURRENT):
        """Run fn() (torch ops: packing, index_copy_, copy_) on the copy stream; returns
        (fn's result, event recorded after). after: CURRENT, after what the calling thread's
        current stream has queued so far (a save's gather, on the thread that computed the
        KV); an event (a mark()), after it; None, only after the copy stream's own work (a
        loader thread must not wait for the forward it runs beside)."""
        self.copies += 1
        if not self.cuda:
            return fn(), DONE
        import torch

        if after is CURRENT:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        elif after is not None and after is not DONE:
            self.stream.wait_event(after)
        with torch.cuda.stream(self.stream):
            out = fn()
            ev = torch.cuda.Event()
            ev.record(self.stream)
        return out, ev

    def empty(self, n):
        """n bytes of device memory owned by the copy stream (the caching allocator reuses
        them only after that stream's work on them: copies may still read them)."""
        import torch

        if not self.cuda:
            return torch.empty(n, dtype=torch.uint8, device=self.device)
        with torch.cuda.stream(self.stream):
            return torch.empty(n, dtype=torch.uint8, device=self.device)

    def copy(self, dst, src, after=None):
        """dst.copy_(src) on the copy stream (non_blocking: a pinned side does not wait);
        returns its event."""
        return self.run(lambda: dst.copy_(src, non_blocking=self.cuda), after)[1]

    def mark(self):
        """An event after what the calling thread's current stream has queued so far."""
        if not self.cuda:
            return DONE
        import torch

        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(self.device))
        return ev

    def order_compute(self, ev):
        """Make the compute stream wait for ev (a load's last copy) without blocking the
        host: what wait_for_layer_load and a synchronous load end with."""
        if self.cuda and ev is not None and ev is not DONE:
            import torch

            torch.cuda.current_stream(self.device).wait_event(ev)


class Slab:
    """buf: the host memory; dev: a device buffer its user may keep with it (the GPU codec's
    plain image: allocated once per slab, reused as the slab is)."""

    __slots__ = ("buf", "event", "index", "dev")

    def __init__(self, buf, index):
        self.buf, self.index, self.event, self.dev = buf, index, None, None


class StagingPool:
    """At most max_bytes // slab_bytes slabs (at least 2) of slab_bytes each."""

    def __init__(self, slab_bytes, max_bytes, pinned):
        self.slab_bytes = int(slab_bytes)
        self.nmax = max(2, int(max_bytes) // max(1, self.slab_bytes))
        self.pinned = pinned
        self.allocations = 0  # host buffers ever allocated (stays <= nmax)
        self.waits = 0  # acquires that found every slab out and waited
        self.acquired = 0  # slabs handed out, in all
        self.peak = 0  # most slabs out at once (allocations never exceed it: reuse first)
        self._free = []  # slabs given back (maybe with a pending event)
        self._out = 0
        self._cv = threading.Condition()

    def _alloc(self):
        import torch

        buf = torch.empty(self.slab_bytes, dtype=torch.uint8)
        if self.pinned:
            try:
                buf = buf.pin_memory()
            except (RuntimeError, NotImplementedError):
                self.pinned = False
        self.allocations += 1
        return Slab(buf, self.allocations - 1)

    def acquire(self, nbytes, count=1, timeout=None):
        """count slabs of at least nbytes each (their .buf: uint8 tensors), all at once: free
        ones (after their pending events), new ones while under the bound, else wait for
        releases. Raises ValueError for nbytes over the slab size or count over the bound,
        TimeoutError after timeout seconds (None: wait as long as it takes)."""
        if nbytes > self.slab_bytes or count > self.nmax:
            raise ValueError("staging: %d x %d bytes, the pool has %d x %d" %
                             (count, nbytes, self.nmax, self.slab_bytes))
        with self._cv:
            waited = False
            while len(self._free) + self.nmax - self.allocations < count:
                if not waited:
                    self.waits += 1
                    waited = True
                if not self._cv.wait(timeout):
                    raise TimeoutError("staging pool: no slab came back in %ss" % timeout)
            out = [self._take() if self._free else self._alloc() for _ in range(count)]
            self._out += count
            self.acquired += count
            self.peak = max(self.peak, self._out)
        for s in out:
            if s.event is not None:  # a copy may still read it (non_blocking H2D)
                s.event.synchronize()
                s.event = None
        return out

    def _take(self):
        for i, s in enumerate(self._free):  # a slab whose copy is done, else the oldest
            if s.event is None or s.event.query():
                return self._free.pop(i)
        return self._free.pop(0)

    def release(self, slab, event=None):
        """Give slab back; event: a copy still reading it (reuse waits for it)."""
        slab.event = None if event is None or event is DONE else event
        with self._cv:
            self._out -= 1
            self._free.append(slab)
            self._cv.notify_all()

    def outstanding(self):
        with self._cv:
            return self._out
