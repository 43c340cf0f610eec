"""`Operator`: one operator of a network (`xrt.network._graph`), a frozen record of its op
type, its input and output values, attributes, parameter references and the roles fed at
run time (`xrt.network._fed`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xrt.ops import OpDef, get_op_def

__all__ = ["Operator"]


@dataclass(frozen=True)
class Operator:
    """One operator of a network.

    Attributes:
        op_id: Stable id; ids increase along the network's operator list.
        op_type: A registered op type (`xrt.ops.op_types`).
        inputs: Names of the values it reads, in the op type's order.
        outputs: Names of the values it produces.
        attrs: Attribute values (JSON data), complete with defaults once in a network.
            Treat as read-only; use `replace` to change an operator.
        params: Parameter role (``"weight"``) -> parameter name in the network.
        name: Free-form name (the ONNX node name), "" when there is none.
        fed: Role (a parameter role or attribute of `OpDef.fed_roles`) -> the value fed at
            run time for it. These values are also the last ``len(fed)`` `inputs`, in this
            order; `data_inputs` are the others.
    """

    op_id: int
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    name: str = ""
    fed: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", dict(self.attrs))
        object.__setattr__(self, "params", dict(self.params))
        object.__setattr__(self, "fed", dict(self.fed))

    @property
    def data_inputs(self) -> tuple[str, ...]:
        """The inputs the kernel reads as data: all but the fed values at the end."""
        return self.inputs[: len(self.inputs) - len(self.fed)] if self.fed else self.inputs

    def __hash__(self) -> int:
        # attrs and params are dicts; equal operators still hash equal.
        return hash((self.op_id, self.op_type, self.inputs, self.outputs, self.name))

    @property
    def op_def(self) -> OpDef:
        """The registry entry of this op's type."""
        return get_op_def(self.op_type)

    def describe(self) -> str:
        """``"op 3 (Conv2d 'conv1')"``."""
        name = f" {self.name!r}" if self.name else ""
        return f"op {self.op_id} ({self.op_type}{name})"

    def replace(self, **changes: Any) -> Operator:
        """A copy with some fields changed."""
        fields = {
            "op_id": self.op_id,
            "op_type": self.op_type,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "attrs": self.attrs,
            "params": self.params,
            "name": self.name,
            "fed": self.fed,
        }
        fields.update(changes)
        return Operator(**fields)
