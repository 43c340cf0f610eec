"""What kind of arithmetic an operator does, from the types of its values.

Placement reports and ``xrt run --require-npu`` ask which operators the quantizer made
integer: those are the ones an NPU backend is expected to run, and the ones a silent host
fallback would hide.
"""

from __future__ import annotations

from collections.abc import Mapping

from xrt.dtypes import TensorType
from xrt.network._operator import Operator
from xrt.ops import BOUNDARY_OP_TYPES

__all__ = ["EDGE_CAST_OPS", "is_float_op", "is_quantized_op"]

EDGE_CAST_OPS = frozenset({"Cast"})
"""Operators that only convert between the float edges and the int8 inside."""


def _types(op: Operator, values: Mapping[str, TensorType]) -> list[TensorType]:
    return [values[n] for n in (*op.inputs, *op.outputs) if n in values]


def is_float_op(op: Operator, values: Mapping[str, TensorType]) -> bool:
    """True when any value `op` reads or writes is floating point (never for the Input and
    Output ops: they do no arithmetic)."""
    if op.op_type in BOUNDARY_OP_TYPES:
        return False
    return any(t.dtype.is_float for t in _types(op, values))


def is_quantized_op(op: Operator, values: Mapping[str, TensorType]) -> bool:
    """True for an integer operator of a quantized network: it reads or writes an 8-bit
    integer value and no float one, and it is not an edge cast. Shape arithmetic on int64
    values (ONNX's Shape/Gather/Concat chains) is not counted, nor are the Input and Output
    ops (no arithmetic)."""
    if op.op_type in EDGE_CAST_OPS or op.op_type in BOUNDARY_OP_TYPES:
        return False
    types = _types(op, values)
    return not any(t.dtype.is_float for t in types) and any(
        t.dtype.is_integer and t.dtype.bits == 8 for t in types
    )
