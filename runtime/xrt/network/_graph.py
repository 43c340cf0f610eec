"""The network model: `Network` and `NetworkView` over `Operator` (`xrt.network._operator`);
`NetworkBuilder` (`xrt.network._builder`) makes networks op by op.

A network is a list of operators in topological order. Each operator has a stable integer
id (strictly increasing along the list), an op type from `xrt.ops`, input and output value
names, attributes and parameter references (role -> parameter name). Values are named
tensors with a `TensorType`; parameters are named numpy arrays. Every value is produced
exactly once, so names identify data unambiguously.

The list starts with the ``Input`` operator (id 0, no inputs, outputs: the network's
inputs) and ends with the ``Output`` operator (the largest id, inputs: the network's
outputs, no outputs), as the Icraft manual numbers them (`xrt.ops.boundary`): they
compute nothing, and no other operator may have those types.

A parameter role or attribute may instead be *fed at run time*: bound to a value (an input
edge) whose data the operator reads at each forward (``Operator.fed``; see
`xrt.network._fed`). Values whose shapes depend on such data have -1 dimensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from math import prod
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._fed import build_types, check_fed, is_dynamic_op
from xrt.network._operator import Operator
from xrt.network.framework import Framework
from xrt.ops import get_op_def, is_boundary
from xrt.ops.boundary import INPUT_OP, OUTPUT_OP

if TYPE_CHECKING:
    from os import PathLike

    import onnx

__all__ = [
    "MAX_DIM",
    "MAX_ELEMENTS",
    "Network",
    "NetworkView",
    "as_view",
    "check_param",
    "check_value_type",
]

MAX_DIM = 2**31 - 1
"""Largest dimension a value may have."""
MAX_ELEMENTS = 2**40
"""Largest element count a value may have (a guard against corrupt files)."""


def check_value_type(name: str, t: object, *, dynamic: bool = False) -> TensorType:
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


def check_param(name: object, arr: object) -> np.ndarray:
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
    value is produced once, that ids increase, that the ``Input`` op (id 0) comes first and
    the ``Output`` op last and no other op has their types, and that every declared value
    type matches what the op's type inference computes). Use `NetworkBuilder` to build one
    step by step (it adds the Input and Output ops), `Network.load` to read the file format,
    `Network.from_onnx` to import ONNX.

    Args:
        ops: Operators in topological order with strictly increasing ids: first
            ``Operator(0, "Input", (), inputs)``, last ``Operator(n, "Output", outputs, ())``.
        values: Every value's type (network inputs and every op output).
        inputs: Names of the network inputs.
        outputs: Names of the network outputs.
        params: Parameter arrays by name.
        name: Network name.

    Attributes:
        framework: The framework the network came from, a label (`Framework`; None when
            unknown): ONNX import records ``Framework.ONNX``. Not stored in network files.
        framework_version: That framework's version as its source gave it (``"opset 13"``,
            ``"v1.9"``; empty when unknown).

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
        self.framework: Framework | None = None
        self.framework_version = ""
        self._values = {
            str(k): check_value_type(k, v, dynamic=True) for k, v in dict(values).items()
        }
        self.values = MappingProxyType(self._values)
        self._params = {k: check_param(k, v) for k, v in dict(params or {}).items()}
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
            check_value_type(name, self._values[name])
            defined.add(name)
        if len(ops) < 2:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"network {self.name!r}: {len(ops)} op(s); a network has at least its Input "
                "and Output ops (NetworkBuilder adds them)",
            )
        checked: list[Operator] = []
        last_id = -1
        for i, op in enumerate(ops):
            if not isinstance(op, Operator):
                raise XrtError(ErrorCode.WRONG_TYPE, f"ops must be Operator objects, got {op!r}")
            if i == 0 or i == len(ops) - 1 or is_boundary(op):
                self._check_boundary(op, i, len(ops), last_id)
            if not is_boundary(op):
                checked.append(self._validate_op(op, defined, last_id))
            elif op.op_type == OUTPUT_OP:
                checked.append(self._validate_output(op, last_id))
            else:
                checked.append(op)
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

    def _check_boundary(self, op: Operator, index: int, count: int, last_id: int) -> None:
        """The Input op first with id 0, the Output op last, no other op of their types."""
        where = "first" if index == 0 else "last"
        want = INPUT_OP if index == 0 else OUTPUT_OP if index == count - 1 else None
        if want is None or op.op_type != want:
            if want is None:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"network {self.name!r}: {op.describe()} is an {op.op_type} op in the "
                    f"middle; a network has one Input op (first, id 0) and one Output op (last)",
                )
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"network {self.name!r}: the {where} op must be the {want} op, got "
                f"{op.describe()} (NetworkBuilder adds Input and Output)",
            )
        if op.attrs or op.params or op.fed:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"network {self.name!r}: {op.describe()} takes no attributes or parameters",
            )
        if want == INPUT_OP:
            if not isinstance(op.name, str):
                raise XrtError(ErrorCode.WRONG_TYPE, f"op {op.op_id}: name must be a string")
            if op.op_id != 0 or isinstance(op.op_id, bool):
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"network {self.name!r}: the Input op has id 0, not {op.op_id!r}",
                )
            if op.inputs or op.outputs != self.inputs:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"network {self.name!r}: the Input op reads nothing and yields the network "
                    f"inputs {list(self.inputs)}; it has inputs {list(op.inputs)}, outputs "
                    f"{list(op.outputs)}",
                )

    def _validate_output(self, op: Operator, last_id: int) -> Operator:
        if isinstance(op.op_id, bool) or not isinstance(op.op_id, int):
            raise XrtError(ErrorCode.WRONG_TYPE, f"op ids must be ints >= 0, got {op.op_id!r}")
        if op.op_id <= last_id:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"op ids must increase along the network: {op.op_id} follows {last_id}",
            )
        if not isinstance(op.name, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"op {op.op_id}: name must be a string")
        if op.outputs or op.inputs != self.outputs:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"network {self.name!r}: the Output op reads the network outputs "
                f"{list(self.outputs)} and yields nothing; it has inputs {list(op.inputs)}, "
                f"outputs {list(op.outputs)}",
            )
        return op

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

    def input_op(self) -> Operator:
        """The ``Input`` operator (id 0): its outputs are the network's inputs, in order."""
        return self.ops[0]

    def output_op(self) -> Operator:
        """The ``Output`` operator (the last id): its inputs are the network's outputs."""
        return self.ops[-1]

    def producer(self, value: str) -> Operator | None:
        """The op producing `value` (the Input op for a network input)."""
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
    produced by ops outside the view), in order of first use; the Input op counts as
    reading the network inputs it yields (they are fed to it). Its outputs are the values
    its ops produce that are network outputs, that ops outside the view read, or that
    nothing in the view reads, in production order (the Input op produces the network
    inputs); with the Output op, the network outputs it yields, last. Parameters are
    shared with the network.
    """

    def __init__(self, network: Network, ops: Sequence[Operator]) -> None:
        self.network = network
        self.name = f"{network.name}[{ops[0].op_id}..{ops[-1].op_id}]"
        self.ops = tuple(ops)
        self.params = network.params
        inside = {op.op_id for op in ops}
        produced: dict[str, None] = {}
        read: dict[str, None] = {}
        yielded: list[str] = []
        fed: dict[str, None] = {}
        for op in ops:
            if op.op_type == INPUT_OP:  # the feeds come from outside, through it
                read.update(dict.fromkeys(op.outputs))
                fed.update(dict.fromkeys(op.outputs))
                continue
            for v in op.inputs:
                if v not in produced:
                    read.setdefault(v, None)
            if op.op_type == OUTPUT_OP:
                yielded = list(op.inputs)
            for v in op.outputs:
                produced[v] = None
        consumed_inside = {v for op in ops if op.op_type != OUTPUT_OP for v in op.inputs}
        net_outputs = set(network.outputs)
        outs = [
            v
            for v in (*fed, *produced)
            if v not in yielded
            and (
                v in net_outputs
                or v not in consumed_inside
                or any(c.op_id not in inside for c in network.consumers(v))
            )
        ]
        outs += dict.fromkeys(yielded)
        self.inputs = tuple(read)
        self.outputs = tuple(outs)
        self.values = MappingProxyType({v: network.values[v] for v in (*read, *produced)})

    def __repr__(self) -> str:
        return (
            f"NetworkView({self.name!r}, ops={self.op_ids}, inputs={list(self.inputs)}, "
            f"outputs={list(self.outputs)})"
        )


def as_view(graph: object, what: str) -> NetworkView:
    """`graph` as a view: a view as it is, a network as the view of all its ops; XrtError
    11010 naming `what` for anything else, 11003 for a network without ops."""
    if isinstance(graph, NetworkView):
        return graph
    if isinstance(graph, Network):
        if not graph.ops:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: network {graph.name!r} has no ops")
        return graph.view(graph.ops[0].op_id)
    raise XrtError(
        ErrorCode.WRONG_TYPE, f"{what} needs a Network or NetworkView, got {type(graph).__name__}"
    )
