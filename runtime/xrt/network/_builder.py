"""`NetworkBuilder`: makes a `Network` op by op, inferring each output type as it goes
(the ONNX importer and the tests build networks with it). It starts with the ``Input`` op
(id 0), whose outputs are the inputs declared so far, and ends the network with the
``Output`` op in `NetworkBuilder.build` (`xrt.ops.boundary`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._fed import build_types, check_fed
from xrt.network._graph import Network, check_param, check_value_type
from xrt.network._operator import Operator
from xrt.ops import get_op_def, refuse_boundary
from xrt.ops.boundary import INPUT_OP, OUTPUT_OP

__all__ = ["NetworkBuilder"]


class NetworkBuilder:
    """Builds a `Network` op by op, inferring every output type as it goes.

    Example:
        >>> b = NetworkBuilder("tiny")
        >>> x = b.input("x", TensorType("FP32", [1, 3, 8, 8]))
        >>> w = b.param("w", np.ones((4, 3, 3, 3), np.float32))
        >>> (y,) = b.add("Conv2d", [x], params={"weight": w}, attrs={"pads": [1, 1, 1, 1]})
        >>> net = b.build([y])

    The network's ``Input`` op is ``ops[0]`` from the start (id 0; its outputs grow with
    each `input`); operators added get ids from `first_id` on; `build` appends the
    ``Output`` op with the next id.

    Errors surface at the op that causes them (XrtError 11003/11010 naming it).
    """

    def __init__(self, name: str = "network", first_id: int = 1) -> None:
        if isinstance(first_id, bool) or not isinstance(first_id, int) or first_id < 1:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"first_id must be an int >= 1 (id 0 is the Input op), got {first_id!r}",
            )
        self.name = name
        self.ops: list[Operator] = [Operator(0, INPUT_OP, (), ())]
        self.values: dict[str, TensorType] = {}
        self.inputs: list[str] = []
        self.params: dict[str, np.ndarray] = {}
        self._next_id = first_id

    def unique(self, base: str) -> str:
        """`base`, or `base` with a numeric suffix, such that no value or parameter has it."""
        name, i = base, 1
        while name in self.values or name in self.params:
            name = f"{base}_{i}"
            i += 1
        return name

    def input(self, name: str, ttype: TensorType) -> str:
        """Declare a network input and return its name."""
        if name in self.values:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"value {name!r} already exists")
        self.values[name] = check_value_type(name, ttype)
        self.inputs.append(name)
        self.ops[0] = self.ops[0].replace(outputs=tuple(self.inputs))
        return name

    def param(self, name: str, array: np.ndarray, *, unique: bool = False) -> str:
        """Add a parameter array; with ``unique``, rename it on a clash. Returns its name."""
        if unique:
            name = self.unique(name)
        elif name in self.params:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"parameter {name!r} already exists")
        # np.asarray(order="C") keeps a 0-d array 0-d (np.ascontiguousarray makes it [1]).
        self.params[name] = check_param(name, np.asarray(array, order="C"))
        return name

    def add(
        self,
        op_type: str,
        inputs: Sequence[str],
        attrs: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        *,
        outputs: Sequence[str] | None = None,
        name: str = "",
        n_outputs: int | None = None,
        op_id: int | None = None,
        fed: Mapping[str, str] | None = None,
        types: Sequence[TensorType] | None = None,
    ) -> list[str]:
        """Append an operator, infer its output types and return its output names.

        Args:
            op_type: A registered op type.
            inputs: Input value names (already defined).
            attrs: Attributes (defaults are filled in).
            params: Parameter role -> parameter name (added with `param`).
            outputs: Output names; default: derived from `name` or the op type, made unique.
            name: Operator name.
            n_outputs: Number of outputs when the op type allows several (HardOp).
            op_id: Id to use (must exceed the previous one); default: the next id.
            fed: Role -> value fed at run time for it (`OpDef.fed_roles`); the values are
                appended to `inputs`.
            types: Output types of a dynamic operator (one feeding a shape role, or reading
                a value with -1 dimensions), -1 for a dimension known only at run time;
                ignored for others, whose types are inferred.
        """
        op_def = get_op_def(op_type)
        refuse_boundary(op_type, "NetworkBuilder.add")
        count = len(outputs) if outputs is not None else (n_outputs or op_def.num_outputs or 1)
        oid = self._next_id if op_id is None else op_id
        if isinstance(oid, bool) or not isinstance(oid, int) or oid <= self.ops[-1].op_id:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"NetworkBuilder.add: op id {oid!r} must exceed the last id {self.ops[-1].op_id}",
            )
        if outputs is None:
            base = name or f"{op_type.lower()}{oid}"
            outputs = [self.unique(base if count == 1 else f"{base}:{k}") for k in range(count)]
        fed = dict(fed or {})
        op = Operator(
            oid,
            op_type,
            (*inputs, *fed.values()),
            tuple(outputs),
            dict(attrs or {}),
            dict(params or {}),
            name,
            fed,
        )
        what = op.describe()
        check_fed(what, op)
        op_def.check_arity(what, len(op.data_inputs), len(op.outputs), list(op.params), list(fed))
        op = op.replace(attrs=op_def.normalize_attrs(what, op.attrs, list(fed)))
        for v in op.inputs:
            if v not in self.values:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: input {v!r} does not exist yet")
        for role, pname in op.params.items():
            if pname not in self.params:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{what}: parameter {role!r} -> {pname!r} does not exist",
                )
        for v in op.outputs:
            if v in self.values:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: value {v!r} already exists")
        types = self._types(op, types)
        for v, t in zip(op.outputs, types, strict=True):
            self.values[v] = check_value_type(v, t, dynamic=True)
        self.ops.append(op)
        self._next_id = oid + 1
        return list(op.outputs)

    def _types(self, op: Operator, declared: Sequence[TensorType] | None) -> list[TensorType]:
        return build_types(
            op,
            [self.values[v] for v in op.data_inputs],
            {r: self.params[p] for r, p in op.params.items()},
            {r: self.values[v] for r, v in op.fed.items()},
            declared,
        )

    def producer(self, value: str) -> Operator | None:
        """The op added so far that produces `value` (None for inputs and unknown names)."""
        for op in reversed(self.ops[1:]):
            if value in op.outputs:
                return op
        return None

    def rewrite(self, op_id: int, **changes: Any) -> list[str]:
        """Replace fields of an op already added (its outputs must be unused so far).

        Output types are inferred again (a dynamic op keeps its declared types). Used by
        graph rewrites such as folding a BatchNormalization into the convolution before it.
        Returns the new output names.
        """
        index = next((i for i, op in enumerate(self.ops) if op.op_id == op_id), None)
        if index is None:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"no op id {op_id} to rewrite")
        old = self.ops[index]
        refuse_boundary(old.op_type, f"NetworkBuilder.rewrite of op {op_id}")
        refuse_boundary(changes.get("op_type", ""), f"NetworkBuilder.rewrite of op {op_id}")
        if changes.get("op_id", op_id) != op_id:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"rewrite cannot change op {op_id}'s id")
        used = {v for op in self.ops[index + 1 :] for v in op.inputs}
        if used.intersection(old.outputs):
            raise XrtError(ErrorCode.WRONG_ORDER, f"{old.describe()}: outputs are already in use")
        new = old.replace(**changes)
        saved = {v: self.values.pop(v) for v in old.outputs}
        try:
            op_def, what, fed = new.op_def, new.describe(), list(new.fed)
            check_fed(what, new)
            op_def.check_arity(what, len(new.data_inputs), len(new.outputs), list(new.params), fed)
            new = new.replace(attrs=op_def.normalize_attrs(what, new.attrs, fed))
            types = self._types(new, list(saved.values()))
            clash = [v for v in new.outputs if v in self.values]
            if clash:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"value(s) {clash} already exist")
        except XrtError:
            self.values.update(saved)
            raise
        for v, t in zip(new.outputs, types, strict=True):
            self.values[v] = check_value_type(v, t, dynamic=True)
        self.ops[index] = new
        return list(new.outputs)

    def build(self, outputs: Sequence[str], *, prune: bool = True) -> Network:
        """The finished `Network` with `outputs`, ended by the ``Output`` op (the id after
        the last op kept).

        Args:
            outputs: Network output names.
            prune: Drop ops (and their values and parameters) that no output depends on
                (never the Input op: every declared input stays).
        """
        ops, values, params = self.ops, self.values, self.params
        if prune:
            needed = set(outputs)
            keep: list[Operator] = []
            for op in reversed(self.ops[1:]):
                if needed.intersection(op.outputs):
                    keep.append(op)
                    needed.update(op.inputs)
            ops = [self.ops[0], *keep[::-1]]
            live = set(self.inputs) | {v for op in ops for v in op.outputs}
            values = {k: t for k, t in self.values.items() if k in live}
            used = {p for op in ops for p in op.params.values()}
            params = {k: a for k, a in self.params.items() if k in used}
        end = Operator(ops[-1].op_id + 1, OUTPUT_OP, tuple(outputs), ())
        return Network([*ops, end], values, self.inputs, outputs, params, self.name)
