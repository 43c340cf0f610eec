"""Tuning the host backend's kernel variants: time them once, record the fastest.

Only ``QConv2d`` has more than one host kernel (`xrt.ops.conv.QCONV2D_KERNELS`: im2col +
matmul, and per-tap accumulation), bit-exact with each other; every other op type has one
kernel and nothing to tune. The variants are timed on seeded random int8 input of the
operator's shape (median of a few runs, after a warm-up) and checked equal before a
faster one is recorded.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import numpy as np

from xrt.network import Network, NetworkView, Operator
from xrt.tuning._records import (
    TuningKey,
    TuningRecord,
    TuningRecords,
    code_fingerprint,
    host_hardware_hash,
)

__all__ = ["HostTuner", "host_code_fingerprint"]

Kernel = Callable[..., list[np.ndarray]]


def _variants() -> dict[str, Mapping[str, Kernel]]:
    from xrt.ops.conv import QCONV2D_KERNELS

    return {"QConv2d": QCONV2D_KERNELS}


def host_code_fingerprint() -> str:
    """The fingerprint of the host kernels' code (`xrt.ops.conv`, `xrt.ops._window`)."""
    from xrt.ops import _window, conv

    return code_fingerprint([conv, _window])


class HostTuner:
    """Kernel variants of the host backend from records, timed when missing and `tune`.

    Args:
        records: Where records are read and new ones put.
        tune: Time operators without a trusted record (else they get the default kernel).
        repeats: Timed runs per variant (their median counts).
    """

    def __init__(self, records: TuningRecords, *, tune: bool = False, repeats: int = 3) -> None:
        self.records = records
        self.tune = tune
        self.repeats = repeats
        self.hardware = host_hardware_hash()
        self.tuned = 0

    def kernel_for(self, op: Operator, graph: Network | NetworkView) -> Kernel | None:
        """The kernel to run `op` with, or None when its op type has no variants."""
        variants = _variants().get(op.op_type)
        if variants is None or op.fed:
            return None
        key = TuningKey.of(op, graph, self.hardware)
        code = host_code_fingerprint()
        rec = self.records.get(key, code)
        if rec is None and self.tune:
            rec = self._time(op, graph, key, code, variants)
            self.records.put(rec)
        if rec is None:
            return next(iter(variants.values()))
        name = rec.choice.get("kernel")
        if name not in variants:
            self.records.note(f"{key.describe()}: record ignored, no host kernel {name!r}")
            return next(iter(variants.values()))
        return variants[name]

    def _time(
        self,
        op: Operator,
        graph: Network | NetworkView,
        key: TuningKey,
        code: str,
        variants: Mapping[str, Kernel],
    ) -> TuningRecord:
        t = graph.values[op.inputs[0]]
        x = np.random.default_rng(0).integers(-128, 128, t.shape, dtype=np.int8)
        params = graph.op_params(op)
        costs: dict[str, float] = {}
        outs: dict[str, np.ndarray] = {}
        for name, kernel in variants.items():
            outs[name] = kernel(op, [x], params)[0]  # warm-up, and the result to compare
            runs = []
            for _ in range(self.repeats):
                t0 = time.perf_counter()
                kernel(op, [x], params)
                runs.append(time.perf_counter() - t0)
            costs[name] = statistics.median(runs)
        default = next(iter(variants))
        exact = [n for n in variants if np.array_equal(outs[n], outs[default])]
        best = min(exact, key=lambda n: (costs[n], n != default))
        self.tuned += 1
        return TuningRecord(
            key,
            {"kernel": best},
            costs[best],
            costs[default],
            "host-timer",
            len(variants),
            code,
        )
