"""``Input`` and ``Output``: the boundary operators every network has (the manual's ids).

The Icraft manual numbers a network's operators from its ``Input`` (id 0) to its
``Output`` (the last id): ``network.view([0, 1, 2, 5, 6, 7])`` binds both to the host.
They compute nothing. ``Input`` has no inputs; its outputs are the network's input values,
which it yields as the caller fed them. ``Output`` reads the network's output values and
has no outputs; what it yields are those values. Every backend passes them through
(`xrt.backend` has one entry for them, no backend registers its own), the NPU compiler
never sees them, and only `xrt.network` makes them: `NetworkBuilder` and the file loader
add them, and anything else asking for one is refused (`refuse_boundary`).

Their kernels follow the pass-through convention: they are handed the values they yield
(the feeds, the outputs) and return them unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.ops._common import desc
from xrt.ops._registry import OpDef, OpLike, register_op

__all__ = [
    "BOUNDARY_OP_TYPES",
    "INPUT_OP",
    "OUTPUT_OP",
    "is_boundary",
    "passed_values",
    "refuse_boundary",
]

INPUT_OP = "Input"
OUTPUT_OP = "Output"
BOUNDARY_OP_TYPES = frozenset({INPUT_OP, OUTPUT_OP})
"""The op types that compute nothing and mark a network's ends."""


def is_boundary(op: OpLike) -> bool:
    """True for an ``Input`` or ``Output`` operator."""
    return op.op_type in BOUNDARY_OP_TYPES


def passed_values(op: OpLike) -> tuple[str, ...]:
    """The values a boundary op yields: an Input's outputs (the feeds), an Output's inputs
    (the network's outputs)."""
    return tuple(op.outputs if op.op_type == INPUT_OP else op.inputs)


def refuse_boundary(op_type: str, what: str) -> None:
    """XrtError 11003 when `what` (e.g. ``"NetworkBuilder.add"``) asks for a boundary op:
    only the network itself makes them, at its two ends."""
    if op_type in BOUNDARY_OP_TYPES:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: an {op_type!r} op is made by the network itself (Input has id 0, "
            "Output the last id); it cannot be added, moved or registered",
        )


def _pass_types(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    return list(ins)


def _pass_arrays(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    if params:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{desc(op)} takes no parameters")
    return list(inputs)


register_op(
    OpDef(
        INPUT_OP,
        (0, 0),
        None,
        {},
        _pass_types,
        _pass_arrays,
        doc="the network's inputs (id 0): yields the tensors fed to forward / step_to",
    )
)
register_op(
    OpDef(
        OUTPUT_OP,
        (0, None),
        0,
        {},
        _pass_types,
        _pass_arrays,
        doc="the network's outputs (the last id): yields them unchanged, computes nothing",
    )
)
