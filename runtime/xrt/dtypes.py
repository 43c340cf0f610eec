"""Element types and tensor types (the manual's ``TensorType``).

`DataType` names the element types the runtime knows and maps each to numpy.
`QuantParams` holds a quantized tensor's scale(s) and zero point(s).
`TensorType` is element type + shape + layout (+ quantization), with `bytes()`.

These are plain immutable values shared by the data model (`xrt.tensor`) and the network
model (`xrt.network`): both import from here, never from each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from math import prod

import ml_dtypes
import numpy as np

from xrt.errors import ErrorCode, XrtError

__all__ = ["DataType", "QuantParams", "TensorType"]


class DataType(Enum):
    """Element types. The value is ``(manual name, numpy dtype string)``.

    The manual spells them FP32, FP16, BF16, SInt8, UInt8, ...; members here use PEP 8
    upper case (``DataType.SINT8``) and `DataType.parse` accepts either spelling.
    """

    FP32 = ("FP32", "float32")
    FP16 = ("FP16", "float16")
    BF16 = ("BF16", "bfloat16")
    SINT8 = ("SInt8", "int8")
    UINT8 = ("UInt8", "uint8")
    SINT16 = ("SInt16", "int16")
    UINT16 = ("UInt16", "uint16")
    SINT32 = ("SInt32", "int32")
    UINT32 = ("UInt32", "uint32")
    SINT64 = ("SInt64", "int64")
    BOOL = ("Bool", "bool")
    # Host-only types (ONNX DOUBLE and UINT64): the host kernels compute in them, the NPU
    # legalizer refuses them as it refuses every type but int8.
    FP64 = ("FP64", "float64")
    UINT64 = ("UInt64", "uint64")

    @property
    def manual_name(self) -> str:
        """The spelling the Icraft manual uses (``"SInt8"``)."""
        return self.value[0]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that stores this type (bfloat16 comes from ml_dtypes)."""
        if self is DataType.BF16:
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.value[1])

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.numpy.itemsize

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    @property
    def is_float(self) -> bool:
        return self in (DataType.FP32, DataType.FP16, DataType.BF16, DataType.FP64)

    @property
    def is_integer(self) -> bool:
        return not self.is_float and self is not DataType.BOOL

    @property
    def is_signed(self) -> bool:
        return self.is_float or self.name.startswith("SINT")

    @classmethod
    def from_numpy(cls, dtype: object) -> DataType:
        """Return the DataType stored as numpy `dtype`; XrtError 11010 when there is none."""
        try:
            want = np.dtype(dtype)  # type: ignore[call-overload]
        except TypeError as exc:
            raise XrtError(ErrorCode.WRONG_TYPE, f"not a numpy dtype: {dtype!r}") from exc
        for member in cls:
            if member.numpy == want:
                return member
        raise XrtError(ErrorCode.WRONG_TYPE, f"numpy dtype {want} has no xrt DataType")

    @classmethod
    def parse(cls, name: str | DataType) -> DataType:
        """Accept a DataType, a member name (``"SINT8"``) or the manual's name (``"SInt8"``)."""
        if isinstance(name, DataType):
            return name
        if isinstance(name, str):
            for member in cls:
                if name.upper() == member.name or name == member.manual_name:
                    return member
        known = ", ".join(m.manual_name for m in cls)
        raise XrtError(ErrorCode.WRONG_TYPE, f"unknown data type {name!r} (known: {known})")

    def __call__(self) -> DataType:
        """The type itself: the manual's ``FloatType::FP32()`` reads ``FloatType.FP32()``
        (``xir.FloatType`` and ``xir.IntegerType`` are this class)."""
        return self

    def __repr__(self) -> str:
        return f"DataType.{self.name}"


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization: ``real = scale * (q - zero_point)``.

    Attributes:
        scale: One scale per tensor (length 1) or one per channel along `axis`.
        zero_point: Same length as `scale`.
        axis: None for per-tensor parameters, else the channel axis of per-channel ones.
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    def __init__(
        self,
        scale: float | Iterable[float],
        zero_point: int | Iterable[int] = 0,
        axis: int | None = None,
    ) -> None:
        scales = (float(scale),) if np.isscalar(scale) else tuple(float(s) for s in scale)  # type: ignore[arg-type, union-attr]
        if np.isscalar(zero_point):
            zps = (int(zero_point),) * len(scales)  # type: ignore[arg-type]
        else:
            zps = tuple(int(z) for z in zero_point)  # type: ignore[union-attr]
        if not scales or len(zps) != len(scales):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"quantization needs as many zero points as scales, got {len(scales)} scales "
                f"and {len(zps)} zero points",
            )
        if any(not np.isfinite(s) or s <= 0 for s in scales):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"quantization scales must be > 0: {scales}")
        if axis is None and len(scales) != 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "per-channel scales need an axis")
        object.__setattr__(self, "scale", scales)
        object.__setattr__(self, "zero_point", zps)
        object.__setattr__(self, "axis", axis)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def _broadcast(self, values: tuple[float, ...] | tuple[int, ...], ndim: int) -> np.ndarray:
        arr = np.asarray(values)
        if self.axis is None:
            return arr.reshape(())
        shape = [1] * ndim
        shape[self.axis] = arr.size
        return arr.reshape(shape)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """Return ``scale * (q - zero_point)`` as float32, broadcasting per-channel values."""
        q = np.asarray(q)
        if self.axis is not None and not (
            -q.ndim <= self.axis < q.ndim and q.shape[self.axis] == len(self.scale)
        ):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"per-channel axis {self.axis} with {len(self.scale)} scales does not fit "
                f"shape {q.shape}",
            )
        scale = self._broadcast(self.scale, q.ndim).astype(np.float32)
        zp = self._broadcast(self.zero_point, q.ndim).astype(np.int64)
        return ((q.astype(np.int64) - zp).astype(np.float32) * scale).astype(np.float32)


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError) as exc:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"shape must be a sequence of ints: {shape!r}"
        ) from exc
    if any(d < -1 for d in dims):
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"shape dimensions must be >= 0 (or -1): {dims}")
    return dims


def _check_layout(layout: object, ndim: int) -> str:
    if not isinstance(layout, str):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"layout must be a string such as 'NHWC' or '*': {layout!r}"
        )
    if layout == "*":
        return layout
    if not layout.isalpha():
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"layout must be '*' or letters such as 'NHWC': {layout!r}"
        )
    if len(layout) != ndim:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"layout {layout!r} names {len(layout)} axes, shape has {ndim}"
        )
    if len(set(layout)) != len(layout):
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"layout {layout!r} repeats an axis letter")
    return layout


@dataclass(frozen=True)
class TensorType:
    """Element type, shape and layout of a tensor (the manual's ``TensorType``).

    Attributes:
        dtype: Element type.
        shape: Dimensions; -1 marks a dimension not known yet (e.g. a dynamic batch).
        layout: ``"*"`` (unspecified) or one letter per axis such as ``"NHWC"``.
        quant: Quantization parameters of a quantized tensor, else None.
    """

    dtype: DataType
    shape: tuple[int, ...]
    layout: str = "*"
    quant: QuantParams | None = None

    def __init__(
        self,
        dtype: DataType | str,
        shape: Sequence[int],
        layout: str = "*",
        quant: QuantParams | None = None,
    ) -> None:
        dt = DataType.parse(dtype)
        dims = _check_shape(shape)
        if quant is not None and not isinstance(quant, QuantParams):
            raise XrtError(ErrorCode.WRONG_TYPE, f"quant must be QuantParams or None: {quant!r}")
        object.__setattr__(self, "dtype", dt)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "layout", _check_layout(layout, len(dims)))
        object.__setattr__(self, "quant", quant)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is known."""
        return all(d >= 0 for d in self.shape)

    def numel(self) -> int:
        """Number of elements; XrtError 11003 when a dimension is unknown."""
        if not self.is_static:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"shape {self.shape} has an unknown dimension")
        return prod(self.shape)

    def bytes(self) -> int:
        """Bytes the tensor's data occupies."""
        return self.numel() * self.dtype.itemsize

    def with_shape(self, shape: Sequence[int]) -> TensorType:
        layout = self.layout if len(shape) == self.ndim else "*"
        return TensorType(self.dtype, shape, layout, self.quant)

    def with_dtype(self, dtype: DataType | str, quant: QuantParams | None = None) -> TensorType:
        return TensorType(dtype, self.shape, self.layout, quant)

    def __repr__(self) -> str:
        q = "" if self.quant is None else ", quantized"
        return f"TensorType({self.dtype.manual_name}, {list(self.shape)}, {self.layout!r}{q})"
