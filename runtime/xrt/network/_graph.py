"""The network model: `Operator`, `Network`, `NetworkView` and `NetworkBuilder`.

A network is a list of operators in topological order. Each operator has a stable integer
id (strictly increasing along the list), an op type from `xrt.ops`, input and output value
names, attributes and parameter references (role -> parameter name). Values are named
tensors with a `TensorType`; parameters are named numpy arrays. Every value is produced
exactly once (by an op, or as a network input), so names identify data unambiguously.

A parameter role or attribute may instead be *fed at run time*: bound to a value (an input
edge) whose data the operator reads at each forward (``Operator.fed``; see
`xrt.network._fed`). Values whose shapes depend on such data have -1 dimensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._fed import build_types, check_fed, is_dynamic_op
from xrt.ops import OpDef, get_op_def

if TYPE_CHECKING:
    from os import PathLike

    import onnx

__all__ = ["Network", "NetworkBuilder", "NetworkView", "Operator"]

MAX_DIM = 2**31 - 1
"""Largest dimension a value may have."""
MAX_ELEMENTS = 2**40
"""Largest element count a value may have (a guard against corrupt files)."""


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


def _check_value_type(name: str, t: object, *, dynamic: bool = False) -> TensorType:
    """`t` checked as the type of value `name`; -1 dimensions only when `dynamic`."""
    if not isinstance(t, TensorType):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"value {name!r}: type must be a TensorType, got {t!r}"
        )
    if not dynamic and not t.is_static:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"value {name!r}: shape {list(t.shape)} is not static"
        )
    known = t.shape if dynamic is False or -1 not in t.shape else [d for d in t.shape if d >= 0]
    if any(d > MAX_DIM for d in t.shape) or prod(known) > MAX_ELEMENTS:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"value {name!r}: shape {list(t.shape)} is too large"
        )
    return t


def _check_param(name: object, arr: object) -> np.ndarray:
    if not isinstance(name, str) or not name:
        raise XrtError(ErrorCode.WRONG_TYPE, f"parameter names must be non-empty strings: {name!r}")
    if not isinstance(arr, np.ndarray):
        raise XrtError(ErrorCode.WRONG_TYPE, f"parameter {name!r} must be a numpy array")
    DataType.from_numpy(arr.dtype)
    return arr


def _same_type(a: TensorType, b: TensorType) -> bool:
    return a.dtype is b.dtype and a.shape == b.shape and a.quant == b.quant


class _Graph:
    """What `Network` and `NetworkView` share: ops, values, inputs, outputs, params."""

    name: str
    ops: tuple[Operator, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    values: Mapping[str, TensorType]
    params: Mapping[str, np.ndarray]

    @property
    def op_ids(self) -> list[int]:
        """Ids of the operators, in order."""
        return [op.op_id for op in self.ops]

    def input_types(self) -> list[TensorType]:
        """Types of the inputs, in order."""
        return [self.values[n] for n in self.inputs]

    def output_types(self) -> list[TensorType]:
        """Types of the outputs, in order."""
        return [self.values[n] for n in self.outputs]

    def op_params(self, op: Operator) -> dict[str, np.ndarray]:
        """The parameter arrays of `op`, by role."""
        return {role: self.params[pname] for role, pname in op.params.items()}

    def is_dynamic(self, op: Operator) -> bool:
        """True when `op`'s output types are resolved at each forward (it feeds a shape
        role, or reads or makes a value whose shape is known only at run time)."""
        return is_dynamic_op(op, self.values)

    def __iter__(self) -> Iterator[Operator]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def summary(self) -> str:
        """One line per operator: id, type, name, inputs -> outputs with shapes."""

        def fmt(names: Sequence[str]) -> str:
            return ", ".join(
                f"{n}:{self.values[n].dtype.manual_name}{list(self.values[n].shape)}" for n in names
            )

        lines = [f"{type(self).__name__} {self.name!r}: {len(self.ops)} ops"]
        lines.append(f"  inputs: {fmt(self.inputs)}")
        for op in self.ops:
            name = f" {op.name}" if op.name else ""
            lines.append(
                f"  [{op.op_id}] {op.op_type}{name}: {', '.join(op.inputs)} -> {fmt(op.outputs)}"
            )
        lines.append(f"  outputs: {fmt(self.outputs)}")
        return "\n".join(lines)


class Network(_Graph):
    """A validated network: operators in topological order, values, inputs, outputs, params.

    Construction checks everything (known op types, attributes against their schema,
    arities, parameter references, that every input of an op is produced earlier, that each
    value is produced once, that ids increase, and that every declared value type matches
    what the op's type inference computes). Use `NetworkBuilder` to build one step by step,
    `Network.load` to read the file format, `Network.from_onnx` to import ONNX.

    Args:
        ops: Operators in topological order with strictly increasing ids.
        values: Every value's type (network inputs and every op output).
        inputs: Names of the network inputs.
        outputs: Names of the network outputs.
        params: Parameter arrays by name.
        name: Network name.

    Raises:
        XrtError: 11003 or 11010 naming the first inconsistency.
    """

    def __init__(
        self,
        ops: Iterable[Operator],
        values: Mapping[str, TensorType],
        inputs: Sequence[str],
        outputs: Sequence[str],
        params: Mapping[str, np.ndarray] | None = None,
        name: str = "network",
    ) -> None:
        if not isinstance(name, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"network name must be a string: {name!r}")
        self.name = name
        self._values = {
            str(k): _check_value_type(k, v, dynamic=True) for k, v in dict(values).items()
        }
        self.values = MappingProxyType(self._values)
        self._params = {k: _check_param(k, v) for k, v in dict(params or {}).items()}
        self.params = MappingProxyType(self._params)
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.ops = tuple(self._validate_ops(list(ops)))
        self._by_id = {op.op_id: op for op in self.ops}
        self._index = {op.op_id: i for i, op in enumerate(self.ops)}
        self._producer: dict[str, Operator] = {v: op for op in self.ops for v in op.outputs}
        self._consumers: dict[str, list[Operator]] = {}
        for op in self.ops:
            for v in dict.fromkeys(op.inputs):
                self._consumers.setdefault(v, []).append(op)

    # -- validation -------------------------------------------------------------------

    def _validate_ops(self, ops: list[Operator]) -> list[Operator]:
        if len(set(self.inputs)) != len(self.inputs):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"network inputs repeat a name: {list(self.inputs)}"
            )
        defined: set[str] = set()
        for name in self.inputs:
            if not isinstance(name, str) or name not in self._values:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"network input {name!r} has no declared type"
                )
            _check_value_type(name, self._values[name])
            defined.add(name)
        checked: list[Operator] = []
        last_id = -1
        for op in ops:
            if not isinstance(op, Operator):
                raise XrtError(ErrorCode.WRONG_TYPE, f"ops must be Operator objects, got {op!r}")
            checked.append(self._validate_op(op, defined, last_id))
            last_id = op.op_id
        for name in self.outputs:
            if not isinstance(name, str) or name not in defined:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"network output {name!r} is never produced")
        undeclared = sorted(set(self._values) - defined)
        if undeclared:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"value(s) {undeclared[:5]} are declared but never produced"
            )
        return checked

    def _validate_op(self, op: Operator, defined: set[str], last_id: int) -> Operator:
        if isinstance(op.op_id, bool) or not isinstance(op.op_id, int) or op.op_id < 0:
            raise XrtError(ErrorCode.WRONG_TYPE, f"op ids must be ints >= 0, got {op.op_id!r}")
        if op.op_id <= last_id:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"op ids must increase along the network: {op.op_id} follows {last_id}",
            )
        if not isinstance(op.name, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"op {op.op_id}: name must be a string")
        op_def = get_op_def(op.op_type)
        what = op.describe()
        check_fed(what, op)
        op_def.check_arity(
            what, len(op.data_inputs), len(op.outputs), list(op.params), list(op.fed)
        )
        attrs = op_def.normalize_attrs(what, op.attrs, list(op.fed))
        for v in op.inputs:
            if not isinstance(v, str):
                raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: value names must be strings: {v!r}")
            if v not in defined:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{what}: input {v!r} is not produced before this op (not topological, "
                    f"or unknown)",
                )
        for role, pname in op.params.items():
            if not isinstance(pname, str) or pname not in self._params:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{what}: parameter {role!r} -> {pname!r} does not exist",
                )
        if len(set(op.outputs)) != len(op.outputs):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: outputs repeat a name")
        for v in op.outputs:
            if not isinstance(v, str) or not v:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"{what}: value names must be non-empty strings"
                )
            if v in defined:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: value {v!r} is produced twice")
            if v not in self._values:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: output {v!r} has no declared type")
        op = op.replace(attrs=attrs)
        inferred = build_types(
            op,
            [self._values[v] for v in op.data_inputs],
            self.op_params(op),
            {role: self._values[v] for role, v in op.fed.items()},
            [self._values[v] for v in op.outputs],
        )
        for v, t in zip(op.outputs, inferred, strict=True):
            if not _same_type(self._values[v], t):
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{what}: output {v!r} is declared {self._values[v]} but the op computes {t}",
                )
        defined.update(op.outputs)
        return op

    # -- queries ----------------------------------------------------------------------

    def op(self, op_id: int) -> Operator:
        """The operator with id `op_id`; XrtError 11003 naming the id when there is none."""
        try:
            return self._by_id[op_id]
        except (KeyError, TypeError):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"network {self.name!r} has no op id {op_id!r}"
            ) from None

    def producer(self, value: str) -> Operator | None:
        """The op producing `value` (None for a network input)."""
        if value not in self._values:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"network {self.name!r} has no value {value!r}")
        return self._producer.get(value)

    def consumers(self, value: str) -> list[Operator]:
        """Ops reading `value`, in network order."""
        if value not in self._values:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"network {self.name!r} has no value {value!r}")
        return list(self._consumers.get(value, []))

    def view(self, ids: int | Sequence[int], end: int | None = None) -> NetworkView:
        """A sub-network of some operators (the manual's ``Network::view``).

        * ``view([3, 5, 6])``: exactly these ops (any order; they run in network order);
        * ``view(3)``: op 3 and every op after it;
        * ``view(3, 8)``: ops with ``3 <= op_id < 8`` (half-open, like `range`).

        Raises:
            XrtError: 11003 naming an unknown id, a repeated id, an empty selection or a bad
                range; 11010 when ids are not ints.
        """
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
            start = int(ids)
            if start not in self._by_id:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"view start: network {self.name!r} has no op id {start}",
                )
            if end is None:
                chosen = [op for op in self.ops if op.op_id >= start]
            else:
                if isinstance(end, bool) or not isinstance(end, (int, np.integer)):
                    raise XrtError(ErrorCode.WRONG_TYPE, f"view end must be an int, got {end!r}")
                last = self.ops[-1].op_id
                if not start < end <= last + 1:
                    raise XrtError(
                        ErrorCode.OUT_OF_RANGE,
                        f"view end {end} must be in ({start}, {last + 1}] (half-open range)",
                    )
                chosen = [op for op in self.ops if start <= op.op_id < end]
            return NetworkView(self, chosen)
        if end is not None:
            raise XrtError(ErrorCode.WRONG_TYPE, "view(ids_list) takes no end id")
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"view takes an op id or a list of op ids, got {ids!r}"
            )
        wanted: list[int] = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise XrtError(ErrorCode.WRONG_TYPE, f"op ids must be ints, got {i!r}")
            if int(i) not in self._by_id:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"view: network {self.name!r} has no op id {int(i)}"
                )
            wanted.append(int(i))
        if not wanted:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "view: the id list is empty")
        if len(set(wanted)) != len(wanted):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"view: repeated op ids in {wanted}")
        chosen = sorted((self._by_id[i] for i in wanted), key=lambda op: self._index[op.op_id])
        return NetworkView(self, chosen)

    # -- files and ONNX ---------------------------------------------------------------
    # `save` and `load` are attached by xrt.network._format, `from_onnx` by
    # xrt.network.onnx_import: thin facades over `save_network`, `load_network` and
    # `import_onnx`. Those modules build Networks, so methods defined here that called them
    # would close an import circle. Their signatures, for type checkers and readers:
    if TYPE_CHECKING:

        def save(
            self, json_path: str | PathLike[str], raw_path: str | PathLike[str] | None = None
        ) -> None: ...

        @classmethod
        def load(
            cls,
            json_path: str | PathLike[str],
            raw_path: str | PathLike[str] | None = None,
            *,
            verify_checksum: bool = True,
        ) -> Network: ...

        @classmethod
        def from_onnx(
            cls,
            model: str | PathLike[str] | bytes | onnx.ModelProto,
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            *,
            name: str | None = None,
            fold_batchnorm: bool = True,
            input_values: Mapping[str, np.ndarray] | None = None,
        ) -> Network: ...

    def __repr__(self) -> str:
        return (
            f"Network({self.name!r}, {len(self.ops)} ops, inputs={list(self.inputs)}, "
            f"outputs={list(self.outputs)})"
        )


class NetworkView(_Graph):
    """Some operators of a network, with their own inputs and outputs.

    Its inputs are the values its ops read but do not produce (network inputs or values
    produced by ops outside the view), in order of first use. Its outputs are the values its
    ops produce that are network outputs, that ops outside the view read, or that nothing in
    the view reads, in production order. Parameters are shared with the network.
    """

    def __init__(self, network: Network, ops: Sequence[Operator]) -> None:
        self.network = network
        self.name = f"{network.name}[{ops[0].op_id}..{ops[-1].op_id}]"
        self.ops = tuple(ops)
        self.params = network.params
        inside = {op.op_id for op in ops}
        produced: dict[str, None] = {}
        read: dict[str, None] = {}
        for op in ops:
            for v in op.inputs:
                if v not in produced:
                    read.setdefault(v, None)
            for v in op.outputs:
                produced[v] = None
        consumed_inside = {v for op in ops for v in op.inputs}
        net_outputs = set(network.outputs)
        outs = [
            v
            for v in produced
            if v in net_outputs
            or v not in consumed_inside
            or any(c.op_id not in inside for c in network.consumers(v))
        ]
        self.inputs = tuple(read)
        self.outputs = tuple(outs)
        self.values = MappingProxyType({v: network.values[v] for v in (*read, *produced)})

    def __repr__(self) -> str:
        return (
            f"NetworkView({self.name!r}, ops={self.op_ids}, inputs={list(self.inputs)}, "
            f"outputs={list(self.outputs)})"
        )


class NetworkBuilder:
    """Builds a `Network` op by op, inferring every output type as it goes.

    Example:
        >>> b = NetworkBuilder("tiny")
        >>> x = b.input("x", TensorType("FP32", [1, 3, 8, 8]))
        >>> w = b.param("w", np.ones((4, 3, 3, 3), np.float32))
        >>> (y,) = b.add("Conv2d", [x], params={"weight": w}, attrs={"pads": [1, 1, 1, 1]})
        >>> net = b.build([y])

    Errors surface at the op that causes them (XrtError 11003/11010 naming it).
    """

    def __init__(self, name: str = "network", first_id: int = 0) -> None:
        self.name = name
        self.ops: list[Operator] = []
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
        self.values[name] = _check_value_type(name, ttype)
        self.inputs.append(name)
        return name

    def param(self, name: str, array: np.ndarray, *, unique: bool = False) -> str:
        """Add a parameter array; with ``unique``, rename it on a clash. Returns its name."""
        if unique:
            name = self.unique(name)
        elif name in self.params:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"parameter {name!r} already exists")
        # np.asarray(order="C") keeps a 0-d array 0-d (np.ascontiguousarray makes it [1]).
        self.params[name] = _check_param(name, np.asarray(array, order="C"))
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
        count = len(outputs) if outputs is not None else (n_outputs or op_def.num_outputs or 1)
        oid = self._next_id if op_id is None else op_id
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
            self.values[v] = _check_value_type(v, t, dynamic=True)
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
        for op in reversed(self.ops):
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
            self.values[v] = _check_value_type(v, t, dynamic=True)
        self.ops[index] = new
        return list(new.outputs)

    def build(self, outputs: Sequence[str], *, prune: bool = True) -> Network:
        """The finished `Network` with `outputs`.

        Args:
            outputs: Network output names.
            prune: Drop ops (and their values and parameters) that no output depends on.
        """
        ops, values, params = self.ops, self.values, self.params
        if prune:
            needed = set(outputs)
            keep: list[Operator] = []
            for op in reversed(self.ops):
                if needed.intersection(op.outputs):
                    keep.append(op)
                    needed.update(op.inputs)
            ops = keep[::-1]
            live = set(self.inputs) | {v for op in ops for v in op.outputs}
            values = {k: t for k, t in self.values.items() if k in live}
            used = {p for op in ops for p in op.params.values()}
            params = {k: a for k, a in self.params.items() if k in used}
        return Network(ops, values, self.inputs, outputs, params, self.name)
