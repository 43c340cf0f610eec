"""``Pad`` (ONNX modes constant, reflect, edge, wrap). Dtype-generic.

On int8 the constant ``value`` is already quantized (the quantizer writes
``quantize(value, s)``), so the op keeps its input's scale.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["MODES", "pad_forward"]

MODES = ("constant", "reflect", "edge", "wrap")
"""Supported padding modes."""


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    pads, mode = op.attrs["pads"], op.attrs["mode"]
    if len(pads) != 2 * x.ndim:
        raise fail(op, f"pads {pads} need 2 entries per axis ({2 * x.ndim})")
    if mode not in MODES:
        raise fail(op, f"mode {mode!r} is not one of {MODES}", ErrorCode.WRONG_TYPE)
    if any(p < 0 for p in pads):
        raise fail(op, f"negative pads (cropping) are not supported: {pads}")
    shape = tuple(d + pads[i] + pads[i + x.ndim] for i, d in enumerate(x.shape))
    if mode == "reflect" and any(
        (pads[i] or pads[i + x.ndim]) and max(pads[i], pads[i + x.ndim]) >= d
        for i, d in enumerate(x.shape)
    ):
        raise fail(
            op, f"reflect pads {pads} must be smaller than the input dimensions {list(x.shape)}"
        )
    if mode in ("edge", "wrap") and any(
        (pads[i] or pads[i + x.ndim]) and d == 0 for i, d in enumerate(x.shape)
    ):
        raise fail(op, f"{mode} padding of an empty axis")
    if x.dtype.is_integer:
        info = np.iinfo(x.dtype.numpy)
        if not (info.min <= op.attrs["value"] <= info.max) or op.attrs["value"] != int(
            op.attrs["value"]
        ):
            raise fail(op, f"pad value {op.attrs['value']} is not a {x.dtype.manual_name} value")
    return [TensorType(x.dtype, shape, x.layout, x.quant)]


def pad_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``numpy.pad`` with ONNX's pads order ``[begin_0, ..., begin_n, end_0, ..., end_n]``
    (wrap: the axis repeated periodically, as ``numpy.pad(mode="wrap")`` and ONNX's
    reference)."""
    x = inputs[0]
    pads, mode = op.attrs["pads"], op.attrs["mode"]
    n = x.ndim
    width = [(pads[i], pads[i + n]) for i in range(n)]
    if mode == "constant":
        return [np.pad(x, width, mode="constant", constant_values=x.dtype.type(op.attrs["value"]))]
    return [np.pad(x, width, mode=mode)]


register_op(
    OpDef(
        "Pad",
        (1, 1),
        1,
        {
            "pads": AttrSpec("ints", doc="[begin per axis..., end per axis...] (ONNX order)"),
            "mode": AttrSpec("str", "constant", None, "constant, reflect, edge or wrap"),
            "value": AttrSpec("float", 0.0, None, "constant fill (quantized on int8)"),
        },
        _infer,
        pad_forward,
        fed_roles=("pads", "value"),
        shape_roles=("pads",),
        doc="pad (ONNX Pad, modes constant/reflect/edge/wrap)",
    )
)
