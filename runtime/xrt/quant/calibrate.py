"""Calibration: observe the range of every value of a float network on sample inputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, Operator, check_inputs, run_network_reference
from xrt.ops.intmath import symmetric_scale

__all__ = ["Samples", "ValueRange", "calibrate"]

Samples = Iterable[Sequence[np.ndarray] | Mapping[str, np.ndarray]]
"""Calibration inputs: an iterable of input sets, each a list (network input order) or dict."""


@dataclass(frozen=True)
class ValueRange:
    """Observed ``[lo, hi]`` of a value over all calibration samples.

    Attributes:
        lo: Smallest element seen.
        hi: Largest element seen.
    """

    lo: float
    hi: float

    @property
    def amax(self) -> float:
        """``max(|lo|, |hi|)``: what the symmetric int8 scale covers."""
        return max(abs(self.lo), abs(self.hi))

    @property
    def scale(self) -> float:
        """Symmetric int8 scale ``amax / 127`` (1.0 for an all-zero value)."""
        return symmetric_scale(self.amax)

    def merge(self, other: ValueRange) -> ValueRange:
        return ValueRange(min(self.lo, other.lo), max(self.hi, other.hi))


def _range_of(arr: np.ndarray) -> ValueRange:
    if arr.size == 0:
        return ValueRange(0.0, 0.0)
    a = arr.astype(np.float64, copy=False)
    finite = a[np.isfinite(a)] if not np.all(np.isfinite(a)) else a
    if finite.size == 0:
        return ValueRange(0.0, 0.0)
    return ValueRange(float(finite.min()), float(finite.max()))


def calibrate(network: Network, samples: Samples) -> dict[str, ValueRange]:
    """Run `network` (float) on every sample and record each value's min and max.

    Args:
        network: A float network.
        samples: At least one input set.

    Returns:
        Value name -> `ValueRange`, for every value (inputs included).

    Raises:
        XrtError: 11003 when `samples` is empty; 11003/11010 for a malformed sample.
    """
    ranges: dict[str, ValueRange] = {}

    def note(name: str, arr: np.ndarray) -> None:
        r = _range_of(arr)
        ranges[name] = ranges[name].merge(r) if name in ranges else r

    def observer(op: Operator, outputs: list[np.ndarray]) -> None:
        for name, arr in zip(op.outputs, outputs, strict=True):
            if arr.dtype.kind == "f":
                note(name, arr)

    count = 0
    for sample in samples:
        feed = check_inputs(network, sample)
        for name, arr in feed.items():
            note(name, arr)
        run_network_reference(network, feed, observer=observer)
        count += 1
    if count == 0:
        raise XrtError(ErrorCode.OUT_OF_RANGE, "calibration needs at least one sample")
    return ranges
