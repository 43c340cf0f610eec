"""The compiled-program cache (OneFlow XRT's executable cache): one per process.

A program is keyed by a SHA-256 of everything that determines it: the target, the compute
engine's sizes, and for each operator its type, attributes, the types and names of the
values it reads and writes, and the bytes of its parameters. A second session on the same
network (or a session made from a snapshot, which fills the cache) finds its programs here
instead of compiling again. Tilings chosen by tuning records are part of the key.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.network import NetworkView
from xrt.npu.compiler import NpuProgram, Plans

__all__ = ["PROGRAM_CACHE", "ProgramCache", "program_key"]


def program_key(
    view: NetworkView,
    config: NpuConfig,
    target: str,
    ocm_bytes: int = 0,
    share: bool = True,
    plans: Plans | None = None,
) -> str:
    """The cache key of compiling `view` for `target` with `config`, `ocm_bytes` on chip,
    intermediates sharing memory or not (`share`) and the tilings of tuning records
    (`plans`, op id -> tilings: a tuned program and an untuned one never share a key; no
    plans keeps the key an untuned compile always had)."""
    h = hashlib.sha256()
    h.update(json.dumps([target, sorted(vars(config).items()), ocm_bytes, share]).encode())
    if plans:
        chosen = sorted((i, [c.to_list() for c in cs]) for i, cs in plans.items())
        h.update(json.dumps(["plans", chosen]).encode())
    for op in view.ops:
        h.update(json.dumps([op.op_type, op.inputs, op.outputs], sort_keys=True).encode())
        h.update(json.dumps(op.attrs, sort_keys=True, default=repr).encode())
        for v in (*op.inputs, *op.outputs):
            h.update(repr(view.values[v]).encode())
        for role, name in sorted(op.params.items()):
            arr = np.ascontiguousarray(view.params[name])
            h.update(f"{role}:{arr.dtype}:{arr.shape}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


class ProgramCache:
    """A bounded, thread-safe LRU map from `program_key` to `NpuProgram`."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, NpuProgram] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> NpuProgram | None:
        with self._lock:
            prog = self._items.get(key)
            if prog is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return prog

    def put(self, key: str, prog: NpuProgram) -> None:
        with self._lock:
            self._items[key] = prog
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0


PROGRAM_CACHE = ProgramCache()
"""The process-wide cache the NPU backends use."""
