"""``Softmax`` and ``LogSoftmax`` along one axis (ONNX opset 13 semantics; the importer
rewrites the older "coerce to 2-D" form as Reshape + Softmax + Reshape). Quantized
networks run them in float between a dequantize and (if needed) a quantize Cast.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.ops._common import need_float, norm_axis
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["log_softmax_forward", "softmax_forward"]


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    need_float(op, ins[0])
    norm_axis(op, op.attrs["axis"], ins[0].ndim)
    return [ins[0]]


def softmax_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    x = inputs[0]
    axis = op.attrs["axis"]
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype, copy=False)]


register_op(
    OpDef(
        "Softmax",
        (1, 1),
        1,
        {"axis": AttrSpec("int", -1, None, "axis to normalise over")},
        _infer,
        softmax_forward,
        doc="softmax along axis",
    )
)


def log_softmax_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (no log of a tiny softmax)."""
    x = inputs[0]
    axis = op.attrs["axis"]
    shifted = x - x.max(axis=axis, keepdims=True)
    y = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return [y.astype(x.dtype, copy=False)]


register_op(
    OpDef(
        "LogSoftmax",
        (1, 1),
        1,
        {"axis": AttrSpec("int", -1, None, "axis to normalise over")},
        _infer,
        log_softmax_forward,
        doc="log of softmax along axis",
    )
)
