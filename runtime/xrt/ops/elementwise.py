"""Binary elementwise ops and concatenation: ``Add``, ``Mul``, ``Concat`` and the int8
``QAdd``, ``QSub``, ``QMul``, ``QConcat``.

Broadcasting follows numpy (= ONNX multidirectional broadcasting). ``Concat`` is
dtype-generic; on int8 its inputs must share one scale, otherwise the quantizer emits
``QConcat``, which requantizes each input to the output scale.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops import intmath
from xrt.ops._common import fail, need_dtype, need_float, norm_axis
from xrt.ops._qcommon import SAT_ATTRS, check_sat, check_scalar_requant
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = [
    "add_forward",
    "concat_forward",
    "mul_forward",
    "qadd_forward",
    "qconcat_forward",
    "qmul_forward",
    "qsub_forward",
]


def _broadcast(op: OpLike, a: TensorType, b: TensorType) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise fail(op, f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None


def _infer_binary(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    a, b = ins
    if a.dtype is DataType.BOOL or b.dtype is DataType.BOOL:
        raise fail(op, "inputs must be numeric, got Bool", ErrorCode.WRONG_TYPE)
    if a.quant is not None or b.quant is not None:
        need_float(op, a if a.quant is not None else b, "a quantized input")
    if a.dtype is not b.dtype:
        raise fail(
            op,
            f"input dtypes differ: {a.dtype.manual_name} vs {b.dtype.manual_name}",
            ErrorCode.WRONG_TYPE,
        )
    shape = _broadcast(op, a, b)
    layout = a.layout if shape == a.shape else b.layout if shape == b.shape else "*"
    return [TensorType(a.dtype, shape, layout)]


def add_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``a + b`` with broadcasting (integers wrap as in C)."""
    return [np.asarray(np.add(inputs[0], inputs[1]))]


def mul_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``a * b`` with broadcasting (integers wrap as in C)."""
    return [np.asarray(np.multiply(inputs[0], inputs[1]))]


def _infer_qbinary(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    a, b = ins
    need_dtype(op, a, DataType.SINT8, "input 0")
    need_dtype(op, b, DataType.SINT8, "input 1")
    if op.op_type in ("QAdd", "QSub"):
        check_scalar_requant(op, ("mult_a", "shift"), ("mult_b", "shift"))
    else:
        check_scalar_requant(op, ("multiplier", "shift"))
    shape = _broadcast(op, a, b)
    return [TensorType(DataType.SINT8, shape, a.layout if shape == a.shape else "*", check_sat(op))]


def qadd_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QAdd``: ``clamp((a * M_a + b * M_b + 2**(S-1)) >> S, lo, hi)``, one rounding."""
    at = op.attrs
    a = inputs[0].astype(np.int64)
    b = inputs[1].astype(np.int64)
    total = a * at["mult_a"] + b * at["mult_b"]
    return [
        np.clip(intmath.rounding_shift_right(total, at["shift"]), at["lo"], at["hi"]).astype(
            np.int8
        )
    ]


def qsub_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QSub``: ``clamp((a * M_a - b * M_b + 2**(S-1)) >> S, lo, hi)``, one rounding."""
    at = op.attrs
    a = inputs[0].astype(np.int64)
    b = inputs[1].astype(np.int64)
    total = a * at["mult_a"] - b * at["mult_b"]
    return [
        np.clip(intmath.rounding_shift_right(total, at["shift"]), at["lo"], at["hi"]).astype(
            np.int8
        )
    ]


def qmul_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QMul``: ``requantize(a * b, M, S, lo, hi)`` with ``M * 2**-S ~= s_a * s_b / s_out``."""
    at = op.attrs
    prod = inputs[0].astype(np.int64) * inputs[1].astype(np.int64)
    return [intmath.requantize(prod, at["multiplier"], at["shift"], at["lo"], at["hi"])]


def _concat_shape(op: OpLike, ins: list[TensorType]) -> tuple[int, tuple[int, ...]]:
    first = ins[0]
    axis = norm_axis(op, op.attrs["axis"], first.ndim)
    total = 0
    for i, t in enumerate(ins):
        if t.ndim != first.ndim or any(
            d != e for k, (d, e) in enumerate(zip(t.shape, first.shape, strict=True)) if k != axis
        ):
            raise fail(
                op,
                f"input {i} shape {list(t.shape)} does not match {list(first.shape)} "
                f"off axis {axis}",
            )
        total += t.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return axis, tuple(shape)


def _infer_concat(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    first = ins[0]
    for i, t in enumerate(ins):
        if t.dtype is not first.dtype:
            raise fail(
                op,
                f"input {i} is {t.dtype.manual_name}, input 0 is {first.dtype.manual_name}",
                ErrorCode.WRONG_TYPE,
            )
        if t.quant != first.quant:
            raise fail(
                op,
                f"input {i} has other quantization than input 0 (use QConcat)",
                ErrorCode.WRONG_TYPE,
            )
    _, shape = _concat_shape(op, ins)
    return [TensorType(first.dtype, shape, first.layout, first.quant)]


def concat_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Join the inputs along ``axis``."""
    return [np.concatenate(inputs, axis=op.attrs["axis"])]


def _infer_qconcat(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    for i, t in enumerate(ins):
        need_dtype(op, t, DataType.SINT8, f"input {i}")
    mults, shifts = op.attrs["multipliers"], op.attrs["shifts"]
    if len(mults) != len(ins) or len(shifts) != len(ins):
        raise fail(op, f"needs one multiplier and shift per input ({len(ins)})")
    for m, s in zip(mults, shifts, strict=True):
        intmath.check_multiplier(m, s, f"op {op.op_id} (QConcat)")
    _, shape = _concat_shape(op, ins)
    return [TensorType(DataType.SINT8, shape, ins[0].layout, check_sat(op))]


def qconcat_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QConcat``: each input ``requantize(q_i, M_i, S_i, lo, hi)``, then join along ``axis``."""
    at = op.attrs
    parts = [
        intmath.requantize(x, m, s, at["lo"], at["hi"])
        for x, m, s in zip(inputs, at["multipliers"], at["shifts"], strict=True)
    ]
    return [np.concatenate(parts, axis=at["axis"])]


register_op(OpDef("Add", (2, 2), 1, {}, _infer_binary, add_forward, doc="a + b (broadcasting)"))
register_op(OpDef("Mul", (2, 2), 1, {}, _infer_binary, mul_forward, doc="a * b (broadcasting)"))
register_op(
    OpDef(
        "Concat",
        (1, None),
        1,
        {"axis": AttrSpec("int", doc="axis to join along (negative counts from the end)")},
        _infer_concat,
        concat_forward,
        doc="join along axis; any dtype, int8 inputs must share their scale",
    )
)
register_op(
    OpDef(
        "QAdd",
        (2, 2),
        1,
        {
            **SAT_ATTRS,
            "mult_a": AttrSpec("int", doc="M_a ~= s_a / s_out * 2**S"),
            "mult_b": AttrSpec("int", doc="M_b ~= s_b / s_out * 2**S"),
            "shift": AttrSpec("int", doc="common right shift S"),
        },
        _infer_qbinary,
        qadd_forward,
        quantized=True,
        doc="int8 add with two multipliers, one shift, saturation (ReLU folds in)",
    )
)
register_op(
    OpDef(
        "QSub",
        (2, 2),
        1,
        {
            **SAT_ATTRS,
            "mult_a": AttrSpec("int", doc="M_a ~= s_a / s_out * 2**S"),
            "mult_b": AttrSpec("int", doc="M_b ~= s_b / s_out * 2**S"),
            "shift": AttrSpec("int", doc="common right shift S"),
        },
        _infer_qbinary,
        qsub_forward,
        quantized=True,
        doc="int8 subtract (a - b) with two multipliers, one shift, saturation",
    )
)
register_op(
    OpDef(
        "QMul",
        (2, 2),
        1,
        {
            **SAT_ATTRS,
            "multiplier": AttrSpec("int", doc="M ~= s_a * s_b / s_out * 2**S"),
            "shift": AttrSpec("int", doc="right shift S"),
        },
        _infer_qbinary,
        qmul_forward,
        quantized=True,
        doc="int8 multiply, requantized",
    )
)
register_op(
    OpDef(
        "QConcat",
        (1, None),
        1,
        {
            **SAT_ATTRS,
            "axis": AttrSpec("int"),
            "multipliers": AttrSpec("ints", doc="M_i per input"),
            "shifts": AttrSpec("ints", doc="S_i per input"),
        },
        _infer_qconcat,
        qconcat_forward,
        quantized=True,
        doc="int8 concat, each input requantized to the output scale",
    )
)
