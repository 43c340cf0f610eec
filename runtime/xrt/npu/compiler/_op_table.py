"""The operators the NPU runs: one table, op type -> legality check + lowering.

Which op types the NPU takes, and with which check and lowering, is said here and nowhere
else: `NPU_OP_TYPES` (what the NPU backends bind) is the table's keys, `refusal` (legalize) runs
the operand checks every operator gets and then the row's `check`, the driver lowers an
operator with the row's `lower`, and `is_alias` asks the row whether the op type may only
relabel bytes. Adding an operator is adding one row (and its check and lowering functions
in `_legalize` and `_lowering`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from xrt.dtypes import TensorType
from xrt.hw.config import NpuConfig
from xrt.network import Operator
from xrt.npu.compiler._legalize import (
    Check,
    check_binary,
    check_concat,
    check_conv,
    check_gemm,
    check_pad,
    check_reshape,
    check_resize,
    check_transpose,
    check_window,
    operand_refusal,
    reshape_kind,
)
from xrt.npu.compiler._lowering import (
    Lower,
    OpLowering,
    lower_avg_pool,
    lower_binary,
    lower_clip,
    lower_concat,
    lower_conv,
    lower_gemm,
    lower_global_avg_pool,
    lower_lut,
    lower_max_pool,
    lower_pad,
    lower_relu,
    lower_reshape,
    lower_resize,
    lower_transpose,
)
from xrt.npu.compiler._program import LayerReport

__all__ = [
    "NPU_OP_RULES",
    "NPU_OP_TYPES",
    "RELABELLING_OP_TYPES",
    "NpuOpRule",
    "is_alias",
    "lower_op",
    "refusal",
]


@dataclass(frozen=True)
class NpuOpRule:
    """What the compiler knows about one op type.

    Attributes:
        op_type: The operator type (`Operator.op_type`).
        check: Why an operator of this type cannot run exactly, beyond the operand checks
            every operator gets (`operand_refusal`); None when those are all it needs.
        lower: Emits an operator's steps (`xrt.npu.compiler._lowering`).
        rank5: Takes ``(N, G, C/G, H, W)`` tensors too (it only moves channels: a channel
            shuffle's reshapes and transpose).
        relabels: May compile to no instructions when `reshape_kind` says its output is
            the same channel-tiled bytes as its input (`is_alias`).
    """

    op_type: str
    check: Check | None
    lower: Lower
    rank5: bool = False
    relabels: bool = False


def _by_op_type(rules: Iterable[NpuOpRule]) -> Mapping[str, NpuOpRule]:
    table: dict[str, NpuOpRule] = {}
    for rule in rules:
        if rule.op_type in table:
            raise ValueError(f"two NPU rules for op type {rule.op_type}")
        table[rule.op_type] = rule
    return MappingProxyType(table)  # read-only: NPU_OP_TYPES cannot drift from it


NPU_OP_RULES: Mapping[str, NpuOpRule] = _by_op_type([
    #         op type           check            lowering               flags
    NpuOpRule("QConv2d",        check_conv,      lower_conv),
    NpuOpRule("QGemm",          check_gemm,      lower_gemm),
    NpuOpRule("QAdd",           check_binary,    lower_binary),
    NpuOpRule("QMul",           check_binary,    lower_binary),
    NpuOpRule("MaxPool2d",      check_window,    lower_max_pool),
    NpuOpRule("QAvgPool2d",     check_window,    lower_avg_pool),
    NpuOpRule("QGlobalAvgPool", None,            lower_global_avg_pool),
    NpuOpRule("QClip",          None,            lower_clip),
    NpuOpRule("Relu",           None,            lower_relu),
    NpuOpRule("QLut",           None,            lower_lut),
    NpuOpRule("Concat",         check_concat,    lower_concat),
    NpuOpRule("QConcat",        check_concat,    lower_concat),
    NpuOpRule("Pad",            check_pad,       lower_pad),
    NpuOpRule("Resize",         check_resize,    lower_resize),
    NpuOpRule("Transpose",      check_transpose, lower_transpose,       rank5=True),
    NpuOpRule("Reshape",        check_reshape,   lower_reshape,         rank5=True, relabels=True),
    NpuOpRule("Flatten",        check_reshape,   lower_reshape,         rank5=True, relabels=True),
    NpuOpRule("Identity",       check_reshape,   lower_reshape,         rank5=True, relabels=True),
])  # fmt: skip
"""Op type -> its rule: the operators the compiler lowers (each still subject to `refusal`)."""

NPU_OP_TYPES = frozenset(NPU_OP_RULES)
"""Operator types with a lowering (each still subject to `refusal`)."""

RELABELLING_OP_TYPES = frozenset(t for t, rule in NPU_OP_RULES.items() if rule.relabels)
"""Operator types that may only rename bytes (when `refusal` accepts them)."""


def refusal(
    op: Operator,
    types: Mapping[str, TensorType],
    params: Mapping[str, np.ndarray],
    cfg: NpuConfig,
) -> str | None:
    """None if the compiler lowers `op` exactly, else why not (see `xrt.npu.compiler._legalize`)."""
    rule = NPU_OP_RULES.get(op.op_type)
    if rule is None:
        return f"op type {op.op_type} has no NPU lowering"
    ins = [types[v] for v in op.inputs]
    outs = [types[v] for v in op.outputs]
    why = operand_refusal(op.op_type, ins, outs, cfg, rule.rank5)
    if why is None and rule.check is not None:
        why = rule.check(op, ins, outs, params, cfg)
    return why


def is_alias(op: Operator, types: Mapping[str, TensorType]) -> bool:
    """Whether `op` only renames its input's bytes (a reshape that keeps the layout)."""
    rule = NPU_OP_RULES.get(op.op_type)
    return (
        rule is not None
        and rule.relabels
        and reshape_kind(types[op.inputs[0]].shape, types[op.outputs[0]].shape) == "alias"
    )


def lower_op(lowering: OpLowering) -> LayerReport:
    """Emit one operator (which passed `refusal`) with its rule's lowering."""
    return NPU_OP_RULES[lowering.op.op_type].lower(lowering)
