"""The values a tensor is given from numpy: `as_array` turns what the caller passed into an
array, `exact_values` casts numbers to a tensor's element type only when no value changes
(`Tensor.fill`: no wrap-around, no rounding, no overflow to infinity)."""

from __future__ import annotations

import numpy as np

from xrt.dtypes import DataType
from xrt.errors import ErrorCode, XrtError

__all__ = ["as_array", "exact_values"]


def as_array(obj: object, what: str) -> np.ndarray:
    """np.asarray that reports ragged or odd input as XrtError 11010."""
    try:
        return np.asarray(obj)
    except (ValueError, TypeError) as exc:
        raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: not an array ({exc})") from None


def exact_values(values: np.ndarray, dtype: DataType, what: str) -> np.ndarray:
    """Cast `values` to `dtype` only when no value changes (no wrap, no rounding)."""
    target = dtype.numpy
    if values.dtype == target:
        return values
    if values.dtype.kind not in "biuf":
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"{what}: values of type {values.dtype} are not numbers"
        )
    if dtype is DataType.BOOL:
        if not np.all((values == 0) | (values == 1)):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: Bool values must be 0 or 1")
        return values.astype(target)
    if dtype.is_float:
        with np.errstate(over="ignore", invalid="ignore"):
            out = values.astype(target)
        bad = np.isinf(out) & np.isfinite(values)
        if np.any(bad):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what}: {values[bad].flat[0]!r} overflows {dtype.manual_name}",
            )
        return out
    info = np.iinfo(target)
    if values.dtype.kind == "f" and (
        not np.all(np.isfinite(values)) or np.any(values != np.round(values))
    ):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: {dtype.manual_name} takes whole numbers, got fractions or non-finite",
        )
    if values.size and (values.min() < info.min or values.max() > info.max):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: values in [{values.min()}, {values.max()}] do not fit "
            f"{dtype.manual_name} [{info.min}, {info.max}]",
        )
    return values.astype(target)
