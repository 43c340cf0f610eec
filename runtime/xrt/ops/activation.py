"""Activations: ``Relu``, ``Clip`` (ReLU6 is ``Clip(0, 6)``), ``LeakyRelu``, ``Sigmoid``,
``HardSwish``, ``HardSigmoid``, and the int8 ``QClip`` and ``QLut``.

``Relu`` is dtype-generic (on int8 with zero point 0 it is exact and keeps the scale). In a
quantized network a ReLU/Clip that follows a convolution, Gemm or Add is folded into that
op's saturation bounds; a standalone one becomes ``QClip``; the other activations become
``QLut``, a 256-entry table indexed by the int8 input (docs/quantization.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail, need_dtype, need_float
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = [
    "FLOAT32_MAX",
    "clip_forward",
    "hard_sigmoid_forward",
    "hard_swish_forward",
    "leaky_relu_forward",
    "qclip_forward",
    "qlut_forward",
    "relu_forward",
    "sigmoid_forward",
]

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Default Clip bound (ONNX's numeric limits of float)."""


def _same_float(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_float(op, ins[0])
    return [ins[0]]


def _infer_relu(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if not (x.dtype.is_float or x.dtype.is_signed):
        raise fail(
            op,
            f"input must be float or signed integer, got {x.dtype.manual_name}",
            ErrorCode.WRONG_TYPE,
        )
    if x.quant is not None and any(x.quant.zero_point):
        raise fail(op, "Relu on a quantized tensor needs zero point 0")
    return [x]


def relu_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``max(x, 0)`` in the input's dtype."""
    x = inputs[0]
    return [np.maximum(x, x.dtype.type(0))]


def _infer_clip(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if not x.dtype.is_float and (x.dtype is DataType.BOOL or x.quant is not None):
        raise fail(
            op,
            f"input must be float or plain integer, got {x.dtype.manual_name}",
            ErrorCode.WRONG_TYPE,
        )
    return [x]


def clip_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``min(max(x, min), max)``: with min > max every output is max, as ONNX defines."""
    x = inputs[0]
    lo, hi = op.attrs["min"], op.attrs["max"]
    if x.dtype.kind in "iu":  # integer input: bounds saturate to its range
        info = np.iinfo(x.dtype)
        lo = int(min(max(lo, info.min), info.max))
        hi = int(min(max(hi, info.min), info.max))
    t = x.dtype.type
    return [np.minimum(np.maximum(x, t(lo)), t(hi))]


def leaky_relu_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x`` where ``x >= 0`` else ``alpha * x``."""
    x = inputs[0]
    return [np.where(x >= 0, x, x * x.dtype.type(op.attrs["alpha"]))]


def sigmoid_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``1 / (1 + exp(-x))`` computed without overflow (``exp(-|x|)``)."""
    x = inputs[0]
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    return [np.where(x >= 0, one / (one + e), e / (one + e)).astype(x.dtype, copy=False)]


def hard_sigmoid_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``max(0, min(1, alpha * x + beta))``."""
    x = inputs[0]
    t = x.dtype.type
    y = x * t(op.attrs["alpha"]) + t(op.attrs["beta"])
    return [np.clip(y, t(0), t(1))]


def hard_swish_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x * max(0, min(1, x / 6 + 1 / 2))`` (ONNX HardSwish)."""
    x = inputs[0]
    t = x.dtype.type
    return [x * np.clip(x * t(1 / 6) + t(0.5), t(0), t(1))]


def _infer_qclip(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_dtype(op, ins[0], DataType.SINT8)
    lo, hi = op.attrs["lo"], op.attrs["hi"]
    if not -128 <= lo <= hi <= 127:
        raise fail(op, f"bounds must satisfy -128 <= lo <= hi <= 127, got [{lo}, {hi}]")
    return [ins[0]]


def qclip_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``clamp(q, lo, hi)`` on int8: a standalone ReLU/ReLU6/Clip at the input's scale."""
    return [np.clip(inputs[0], op.attrs["lo"], op.attrs["hi"]).astype(np.int8)]


def _infer_qlut(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_dtype(op, ins[0], DataType.SINT8)
    table = params["table"]
    if table.dtype != np.int8 or table.shape != (256,):
        raise fail(op, f"table must be int8 of shape [256], got {table.dtype} {list(table.shape)}")
    scale = op.attrs["out_scale"]
    if not (scale > 0 and np.isfinite(scale)):
        raise fail(op, f"out_scale must be > 0, got {scale}")
    return [TensorType(DataType.SINT8, ins[0].shape, ins[0].layout, QuantParams(scale))]


def qlut_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``table[q + 128]``: any elementwise function of one int8 input."""
    return [params["table"][inputs[0].astype(np.int16) + 128]]


_UNARY: list[tuple[str, dict[str, AttrSpec], Callable[..., list[np.ndarray]], str]] = [
    (
        "LeakyRelu",
        {"alpha": AttrSpec("float", 0.01, None, "slope for x < 0")},
        leaky_relu_forward,
        "x if x >= 0 else alpha * x",
    ),
    ("Sigmoid", {}, sigmoid_forward, "logistic function"),
    ("HardSwish", {}, hard_swish_forward, "x * relu6(x + 3) / 6"),
    (
        "HardSigmoid",
        {"alpha": AttrSpec("float", 0.2), "beta": AttrSpec("float", 0.5)},
        hard_sigmoid_forward,
        "max(0, min(1, alpha * x + beta))",
    ),
]

register_op(
    OpDef("Relu", (1, 1), 1, {}, _infer_relu, relu_forward, doc="max(x, 0), any signed dtype")
)
register_op(
    OpDef(
        "Clip",
        (1, 1),
        1,
        {
            "min": AttrSpec("float", -FLOAT32_MAX, None, "lower bound"),
            "max": AttrSpec("float", FLOAT32_MAX, None, "upper bound"),
        },
        _infer_clip,
        clip_forward,
        fed_roles=("min", "max"),
        doc="min(max(x, min), max); ReLU6 is Clip(0, 6)",
    )
)
for _name, _attrs, _fwd, _doc in _UNARY:
    register_op(OpDef(_name, (1, 1), 1, _attrs, _same_float, _fwd, doc=_doc))
register_op(
    OpDef(
        "QClip",
        (1, 1),
        1,
        {"lo": AttrSpec("int", -128), "hi": AttrSpec("int", 127)},
        _infer_qclip,
        qclip_forward,
        quantized=True,
        doc="int8 clamp to [lo, hi] at the input's scale (standalone ReLU/ReLU6/Clip)",
    )
)
register_op(
    OpDef(
        "QLut",
        (1, 1),
        1,
        {"out_scale": AttrSpec("float", doc="scale of the int8 output")},
        _infer_qlut,
        qlut_forward,
        params=("table",),
        quantized=True,
        doc="int8 -> int8 lookup table (Sigmoid, HardSwish, HardSigmoid, LeakyRelu)",
    )
)
