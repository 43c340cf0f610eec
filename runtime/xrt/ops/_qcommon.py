"""Shared pieces of the integer kernels: saturation attributes, requantisation checks and
the int32 accumulator."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import QuantParams
from xrt.ops import intmath
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpLike

SAT_ATTRS: dict[str, AttrSpec] = {
    "lo": AttrSpec("int", intmath.INT8_MIN, None, "lower saturation bound (ReLU folds in here)"),
    "hi": AttrSpec("int", intmath.INT8_MAX, None, "upper saturation bound (ReLU6/Clip)"),
    "out_scale": AttrSpec("float", doc="scale of the int8 output"),
}


def check_sat(op: OpLike) -> QuantParams:
    lo, hi = op.attrs["lo"], op.attrs["hi"]
    if not intmath.INT8_MIN <= lo <= hi <= intmath.INT8_MAX:
        raise fail(op, f"saturation bounds must satisfy -128 <= lo <= hi <= 127, got [{lo}, {hi}]")
    scale = op.attrs["out_scale"]
    if not scale > 0 or not np.isfinite(scale):
        raise fail(op, f"out_scale must be > 0, got {scale}")
    return QuantParams(scale)


def check_requant_params(op: OpLike, params: Mapping[str, np.ndarray], channels: int) -> None:
    """Check per-channel ``multiplier``/``shift`` params (int32, shape ``[channels]``, in range)."""
    for role in ("multiplier", "shift"):
        arr = params[role]
        if arr.dtype != np.int32 or arr.shape != (channels,):
            raise fail(
                op, f"{role} must be int32 of shape [{channels}], got {arr.dtype} {list(arr.shape)}"
            )
    m, s = params["multiplier"], params["shift"]
    if channels and (
        m.min() < 0
        or m.max() > intmath.MULTIPLIER_MAX
        or s.min() < 0
        or s.max() > intmath.SHIFT_MAX
    ):
        raise fail(op, "multiplier/shift outside [0, 32767] / [0, 46]")


def int_accumulate(
    acc_f64: np.ndarray, bias: np.ndarray, axis_shape: tuple[int, ...]
) -> np.ndarray:
    """Exact float64 sums -> int64, add the int32 bias, wrap to int32 (docs/quantization.md,
    "The accumulator"): what the engine's 32-bit adders compute.

    A network the quantizer made keeps `intmath.accumulator_bound` (``xrt.quant``), so its
    sums never wrap; a hand-made layer beyond the bound wraps on every backend alike.
    """
    acc = acc_f64.astype(np.int64) + bias.astype(np.int64).reshape(axis_shape)
    return intmath.wrap_int32(acc)


def check_scalar_requant(op: OpLike, *pairs: tuple[str, str]) -> None:
    """Check per-tensor multiplier/shift attributes given as ``(multiplier_key, shift_key)``."""
    for mkey, skey in pairs:
        m, s = op.attrs[mkey], op.attrs[skey]
        if not (0 <= m <= intmath.MULTIPLIER_MAX and 0 <= s <= intmath.SHIFT_MAX):
            raise fail(op, f"{mkey}/{skey} = {m}/{s} outside [0, 32767] / [0, 46]")
