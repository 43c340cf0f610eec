"""``Cast``: element type conversion, including quantize and dequantize.

* float -> int8 with ``scale``: quantize, ``q = clamp(rint(x / scale) + zero_point)`` in
  float64, ties to even (`xrt.ops.intmath.quantize`).
* int8 -> float with ``scale``: dequantize, ``float32(q - zero_point) * float32(scale)``.
* without ``scale``: float -> float converts; float -> int rounds half to even
  (``rounding="truncate"``: towards zero, as ONNX Cast) and saturates; int -> int
  saturates; int -> float converts; Bool -> number gives 0 / 1, number -> Bool is ``x != 0``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["cast_forward"]


def _target(op: OpLike) -> DataType:
    try:
        return DataType.parse(op.attrs["to"])
    except XrtError:
        raise fail(op, f"unknown target type {op.attrs['to']!r}", ErrorCode.WRONG_TYPE) from None


def _scale(op: OpLike) -> float | None:
    scale = op.attrs["scale"]
    if scale is None:
        return None
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not (0 < scale < float("inf"))
    ):
        raise fail(
            op, f"scale must be a positive number or null, got {scale!r}", ErrorCode.WRONG_TYPE
        )
    return float(scale)


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    to = _target(op)
    scale = _scale(op)
    zp = op.attrs["zero_point"]
    if op.attrs["rounding"] not in ("nearest_even", "truncate"):
        raise fail(op, f"rounding must be nearest_even or truncate, got {op.attrs['rounding']!r}")
    if (to is DataType.BOOL or x.dtype is DataType.BOOL) and (scale is not None or x.quant):
        raise fail(op, "a quantizing Cast does not handle Bool", ErrorCode.WRONG_TYPE)
    if scale is None:
        if x.quant is not None:
            raise fail(
                op, "casting a quantized tensor needs its scale (dequantize)", ErrorCode.WRONG_TYPE
            )
        return [TensorType(to, x.shape, x.layout)]
    if x.dtype.is_float and to.is_integer:
        info = np.iinfo(to.numpy)
        if not info.min <= zp <= info.max:
            raise fail(op, f"zero point {zp} is outside {to.manual_name}")
        return [TensorType(to, x.shape, x.layout, QuantParams(scale, zp))]
    if x.dtype.is_integer and to.is_float:
        if x.quant is not None and (
            x.quant.per_channel or x.quant.scale[0] != scale or x.quant.zero_point[0] != zp
        ):
            raise fail(
                op,
                f"dequantize scale {scale} / zero point {zp} differ from the input's "
                f"{x.quant.scale} / {x.quant.zero_point}",
            )
        return [TensorType(to, x.shape, x.layout)]
    raise fail(
        op, f"a scale needs a float <-> integer cast, not {x.dtype.manual_name} -> {to.manual_name}"
    )


def cast_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Convert as described in the module docstring."""
    x = inputs[0]
    to = _target(op)
    scale = _scale(op)
    zp = op.attrs["zero_point"]
    if to is DataType.BOOL:
        return [np.asarray(x != 0)]
    if x.dtype == np.bool_:
        return [x.astype(to.numpy)]
    if to.is_integer:
        info = np.iinfo(to.numpy)
        if x.dtype.kind == "f":
            q = np.asarray(x, dtype=np.float64)
            if scale is not None:
                q = q / scale
            rounded = np.trunc(q) if op.attrs["rounding"] == "truncate" else np.rint(q)
            q = np.nan_to_num(rounded, nan=0.0, posinf=info.max, neginf=info.min)
            if scale is not None:
                q = q + zp
            return [np.clip(q, info.min, info.max).astype(to.numpy)]
        return [np.clip(x.astype(np.int64), info.min, info.max).astype(to.numpy)]
    if scale is not None:
        return [((x.astype(np.int64) - zp).astype(np.float32) * np.float32(scale)).astype(to.numpy)]
    return [x.astype(to.numpy)]


register_op(
    OpDef(
        "Cast",
        (1, 1),
        1,
        {
            "to": AttrSpec("str", doc="target DataType name (FP32, SInt8...)"),
            "scale": AttrSpec("json", None, None, "quantization scale, or null for a plain cast"),
            "zero_point": AttrSpec("int", 0, None, "quantization zero point"),
            "rounding": AttrSpec(
                "str", "nearest_even", None, "float -> int without scale: or 'truncate'"
            ),
        },
        _infer,
        cast_forward,
        doc="type conversion; with a scale: quantize (float -> int) or dequantize (int -> float)",
    )
)
