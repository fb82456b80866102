"""The pool's own removals as KV events: BlockRemoved for the blocks this connector told vLLM
about (BlockStored) that the pool evicted, dropped or deleted since.

The pool numbers every removal of a block per node and keeps the last ones (op EVENTS,
docs/kv-protocol.md "Removal events"); Client.events reads a node's removed keys of our
namespace from a sequence on. A thread polls every node of the client's view at most every
events_poll_ms, maps each removed key back to the block hash it was saved or loaded under (a
bounded map: keys we never knew, or forgot, are skipped), drops the hashes whose block is
stored again by now (one exists call per poll) and hands BlockRemoved events to publish.

With tensor parallelism every rank stores its own shard of a block under its own key, and a
block is loadable only while all of them are there: the removal of any rank's key removes
the block. Only TP rank 0 publishes events (vLLM keeps one stream per engine), so its watch
maps every rank's keys: keys are a pure function of the chain hash and the rank (keys.py), so
for each block it notes, the watch derives the other ranks' keys itself (`derive`), on its
own thread at the next poll, before it maps what it read. Each block is still reported once:
its first removed key publishes it and forgets all of its keys. A
"lost" answer (the node's ring dropped events we had not read) publishes what it can and is
counted (events_lost) and logged. Nothing here raises into vLLM's step: errors are logged and
the node is asked again at the next poll. A node or library too old for EVENTS is skipped.
"""

import collections
import errno
import threading


class RemovalWatch:
    """derive(h, layer): the other ranks' keys of block h (of one layer of it, layerwise), or
    None when this rank's keys are all there are. max_keys bounds the map over every rank's
    keys (TP ranks share it: with tp ranks it remembers max_keys / tp blocks)."""

    def __init__(self, store, interval_ms, publish, rec, warn, max_keys=131072, derive=None):
        self.store, self.publish, self.rec, self.warn = store, publish, rec, warn
        self.interval = max(1, int(interval_ms)) / 1e3
        self.max_keys = max(1, int(max_keys))
        self.derive = derive
        self._lock = threading.Lock()
        self._hash = collections.OrderedDict()  # key -> block hash, oldest first
        self._keys = {}  # block hash -> set of its keys in _hash
        self._pending = []  # (block hash, layer) whose other ranks' keys are not derived yet
        self._cursor = {}  # node number -> the sequence to ask from
        self._stop = threading.Event()
        self.polls = 0  # completed polls (tests wait on it)
        self._thread = threading.Thread(target=self._run, name="openlake-removals",
                                        daemon=True)
        self._thread.start()

    def note(self, key, h, layer=None):
        """key holds (part of) block h in the pool now (layerwise: of its layer `layer`): its
        removal, or that of another rank's key of the same part, is h's."""
        self.note_many([key], [h], [layer])

    def note_many(self, keys, hashes, layers):
        with self._lock:
            for key, h in zip(keys, hashes):
                self._put(key, h)
            if self.derive is not None:  # bounded as the map is (a poll far away)
                self._pending.extend(zip(hashes, layers))
                del self._pending[:-self.max_keys]

    def _put(self, key, h):  # under _lock
        old = self._hash.pop(key, None)
        if old is not None and old != h:
            self._forget(key, old)
        self._hash[key] = h
        self._keys.setdefault(h, set()).add(key)
        while len(self._hash) > self.max_keys:
            k, oh = self._hash.popitem(last=False)
            self._forget(k, oh)

    def _expand(self):
        """Note the other ranks' keys of the blocks noted since the last poll (the hashing is
        done here, on the watch's thread, not in vLLM's step)."""
        with self._lock:
            todo, self._pending = self._pending, []
        if not todo:
            return
        derived = [(k, h) for h, layer in dict.fromkeys(todo) for k in self.derive(h, layer)]
        with self._lock:
            for k, h in derived:
                self._put(k, h)

    def _forget(self, key, h):
        ks = self._keys.get(h)
        if ks is not None:
            ks.discard(key)
            if not ks:
                del self._keys[h]

    def _known(self, keys):
        """(key, hash) of the removed keys we know."""
        with self._lock:
            return [(k, self._hash[k]) for k in keys if k in self._hash]

    def _drop(self, hashes):
        """Forget every key of these blocks (one stored again is noted again)."""
        with self._lock:
            for h in hashes:
                for k in self._keys.pop(h, ()):
                    self._hash.pop(k, None)

    def _node(self, c, node):
        """Read node's new removals (every answer until a short one). Returns the removed
        keys, or raises IndexError past the last node."""
        since = self._cursor.get(node)
        if since is None:  # a new reader starts at the node's present
            _, nxt, _ = c.events(node, c.EVENTS_NOW, 0)
            self._cursor[node] = nxt
            return []
        out = []
        while True:
            keys, nxt, lost = c.events(node, since, c.EVENTS_MAX)
            if lost:
                self.rec.add(events_lost=1)
                self.warn("events-lost", "openlake: the pool dropped removal events of node %d "
                          "before they were read: some BlockRemoved are missing", node)
            out.extend(keys)
            since = self._cursor[node] = nxt
            if len(keys) < c.EVENTS_MAX:
                return out

    def poll(self):
        """One round over every node; returns the BlockRemoved hashes published."""
        try:
            c = self.store.client()
        except Exception:  # not connected yet: the next poll tries again
            return []
        if not c.has_events():
            return []
        removed, node = [], 0
        while True:
            try:
                removed.extend(self._node(c, node))
            except IndexError:
                break
            except OSError as e:
                if e.errno != errno.ENOTSUP:  # a node down: asked again next time
                    self.warn("events", "openlake: removal events of node %d: %s", node, e)
            node += 1
        if self.derive is not None:  # after the read: a block noted meanwhile is mapped
            self._expand()
        known = self._known(removed)
        if not known:
            return []
        try:  # a block stored again since its removal is not gone
            st = c.exists([k for k, _ in known])
        except Exception:
            st = [False] * len(known)
        hashes = list(dict.fromkeys(h for (_, h), there in zip(known, st) if not there))
        if hashes:
            self._drop(hashes)
            self.rec.add(blocks_removed=len(hashes))
            self.publish(hashes)
        return hashes

    def _run(self):
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as e:  # never let the thread die
                self.warn("events", "openlake: removal events: %s", e)
            self.polls += 1
            self._stop.wait(self.interval)

    def close(self):
        self._stop.set()
        self._thread.join(10)
