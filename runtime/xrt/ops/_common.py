"""Helpers shared by the op modules: error text, type checks and window arithmetic."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.ops._registry import OpLike


def desc(op: OpLike) -> str:
    """``"op 3 (Conv2d 'conv1')"``: how errors name an operator."""
    name = f" {op.name!r}" if getattr(op, "name", "") else ""
    return f"op {op.op_id} ({op.op_type}{name})"


def fail(op: OpLike, message: str, code: ErrorCode = ErrorCode.OUT_OF_RANGE) -> XrtError:
    """An XrtError naming `op`."""
    return XrtError(code, f"{desc(op)}: {message}")


def need_rank(op: OpLike, t: TensorType, rank: int, what: str = "input") -> None:
    if t.ndim != rank:
        raise fail(op, f"{what} must have rank {rank}, got shape {list(t.shape)}")


def need_float(op: OpLike, t: TensorType, what: str = "input") -> None:
    if not t.dtype.is_float:
        raise fail(
            op, f"{what} must be a float tensor, got {t.dtype.manual_name}", ErrorCode.WRONG_TYPE
        )


def need_dtype(op: OpLike, t: TensorType, dtype: DataType, what: str = "input") -> None:
    if t.dtype is not dtype:
        raise fail(
            op,
            f"{what} must be {dtype.manual_name}, got {t.dtype.manual_name}",
            ErrorCode.WRONG_TYPE,
        )


def need_param(op: OpLike, params: dict[str, np.ndarray] | object, role: str) -> np.ndarray:
    arr = params.get(role) if isinstance(params, dict) else params[role]  # type: ignore[index]
    if arr is None:
        raise fail(op, f"missing parameter {role!r}")
    return np.asarray(arr)


def norm_axis(op: OpLike, axis: int, ndim: int, *, allow_end: bool = False) -> int:
    """Normalise a possibly negative axis; XrtError 11003 when it is outside the rank."""
    hi = ndim + 1 if allow_end else ndim
    if not -ndim <= axis < hi:
        raise fail(op, f"axis {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def check_positive(op: OpLike, key: str, values: Sequence[int]) -> None:
    if any(v <= 0 for v in values):
        raise fail(op, f"{key} must be > 0, got {list(values)}")


def check_nonneg(op: OpLike, key: str, values: Sequence[int]) -> None:
    if any(v < 0 for v in values):
        raise fail(op, f"{key} must be >= 0, got {list(values)}")


def pool_out_size(
    size: int,
    kernel: int,
    stride: int,
    pad_begin: int,
    pad_end: int,
    dilation: int,
    ceil_mode: bool,
) -> int:
    """Output length of a sliding window (ONNX / PyTorch rule).

    With ``ceil_mode`` the last window may run past the end padding, but a window that would
    start inside the end padding is dropped (the rule onnxruntime and PyTorch apply).
    """
    span = dilation * (kernel - 1) + 1
    total = size + pad_begin + pad_end - span
    if total < 0:
        return 0
    if ceil_mode:
        out = -(-total // stride) + 1
        if (out - 1) * stride >= size + pad_begin:
            out -= 1
        return out
    return total // stride + 1


def prod(values: Sequence[int]) -> int:
    return math.prod(values)
