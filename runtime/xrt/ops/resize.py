"""``Resize`` with nearest-neighbour interpolation (covers ONNX Resize and old Upsample).

Dtype-generic: on int8 it copies values and keeps the scale. The source index of output
position ``o`` along an axis of input length ``n`` and scale ``r`` follows the ONNX
coordinate transformation and nearest rounding modes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["COORD_MODES", "NEAREST_MODES", "nearest_indices", "resize_forward"]

COORD_MODES = (
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
)
"""Supported ``coordinate_transformation_mode`` values."""
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
"""Supported ``nearest_mode`` values."""


def nearest_indices(
    n_in: int, n_out: int, scale: float, coord_mode: str, nearest_mode: str
) -> np.ndarray:
    """Source index of each output position along one axis (int64, clamped to the input)."""
    o = np.arange(n_out, dtype=np.float64)
    if coord_mode == "half_pixel":
        x = (o + 0.5) / scale - 0.5
    elif coord_mode == "pytorch_half_pixel":
        x = (o + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(o)
    elif coord_mode == "asymmetric":
        x = o / scale
    elif coord_mode == "tf_half_pixel_for_nn":
        x = (o + 0.5) / scale
    elif coord_mode == "align_corners":
        x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(o)
    else:
        raise ValueError(coord_mode)
    if nearest_mode == "round_prefer_floor":
        idx = np.where(x == np.floor(x) + 0.5, np.floor(x), np.round(x))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(x == np.floor(x) + 0.5, np.ceil(x), np.round(x))
    elif nearest_mode == "floor":
        idx = np.floor(x)
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(nearest_mode)
    return np.clip(idx, 0, n_in - 1).astype(np.int64)


def _check(op: OpLike, x: TensorType) -> tuple[int, ...]:
    a = op.attrs
    sizes, scales = a["sizes"], a["scales"]
    if len(sizes) != x.ndim or len(scales) != x.ndim:
        raise fail(op, f"sizes {sizes} and scales {scales} need one entry per axis ({x.ndim})")
    if any(s <= 0 for s in sizes) or any(not (r > 0 and math.isfinite(r)) for r in scales):
        raise fail(op, f"sizes {sizes} and scales {scales} must be > 0")
    if a["coordinate_transformation_mode"] not in COORD_MODES:
        raise fail(op, f"coordinate_transformation_mode must be one of {COORD_MODES}")
    if a["nearest_mode"] not in NEAREST_MODES:
        raise fail(op, f"nearest_mode must be one of {NEAREST_MODES}")
    return tuple(sizes)


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    return [TensorType(x.dtype, _check(op, x), x.layout, x.quant)]


def resize_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Nearest resize: one ``take`` per resized axis."""
    a = op.attrs
    x = inputs[0]
    for axis, (n_out, r) in enumerate(zip(a["sizes"], a["scales"], strict=True)):
        n_in = x.shape[axis]
        if n_out == n_in and r == 1.0:
            continue
        idx = nearest_indices(
            n_in, n_out, r, a["coordinate_transformation_mode"], a["nearest_mode"]
        )
        x = np.take(x, idx, axis=axis)
    return [x]


register_op(
    OpDef(
        "Resize",
        (1, 1),
        1,
        {
            "sizes": AttrSpec("ints", doc="output shape"),
            "scales": AttrSpec("floats", doc="scale per axis used by the coordinate transform"),
            "coordinate_transformation_mode": AttrSpec("str", "half_pixel"),
            "nearest_mode": AttrSpec("str", "round_prefer_floor"),
        },
        _infer,
        resize_forward,
        doc="nearest-neighbour resize (ONNX Resize mode=nearest, Upsample)",
    )
)
