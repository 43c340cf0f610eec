"""Run-time parameters: operator roles bound to values fed at run time.

A parameter role of an operator (a Conv2d's ``weight``) or one of its attributes (a
Reshape's ``shape``) may be bound to a *value* instead of a constant: ``Operator.fed`` maps
the role to the value, which is also one of the operator's inputs (its last ``len(fed)``
inputs, in ``fed`` order). Views, liveness, pruning and the file format therefore see an
ordinary edge. The op type says which roles may be fed (`OpDef.fed_roles`) and which of
them decide output shapes (`OpDef.shape_roles`). Kernels get arrays either way: a fed
parameter as ``params[role]``, a fed attribute converted by `AttrSpec.from_array` into
``op.attrs[role]`` (`bind_fed`).

Types. A fed parameter has the static shape of its value, so an operator that feeds only
parameters (or attributes that are not shape roles) keeps static output types, inferred
at build time like any other (`build_types`, with placeholder arrays). An operator that
feeds a shape role, or reads a value whose shape is known only at run time, is *dynamic*:
its output types are declared (the ONNX importer takes them from ONNX shape inference), a
dimension known only at run time is -1, and at each forward `FedResolver` infers them
again from the fed data and the concrete input shapes, and checks them against the
declaration (XrtError 11003 naming the value and the contradiction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._operator import Operator

__all__ = [
    "FedResolver",
    "bind_fed",
    "build_types",
    "check_fed",
    "concrete",
    "contradiction",
    "is_dynamic_op",
    "needs_resolution",
    "placeholder",
    "runtime_note",
]


def check_fed(what: str, op: Operator) -> None:
    """The fed roles of `op` are named, and their values are its last inputs."""
    fed = op.fed
    if not fed:
        return
    if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in fed.items()):
        raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: fed must map roles to value names")
    if fed and op.inputs[-len(fed) :] != tuple(fed.values()):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: the fed values {list(fed.values())} must be its last inputs "
            f"(inputs {list(op.inputs)})",
        )


def concrete(t: TensorType, shape: Sequence[int]) -> TensorType:
    """Declared type `t` with the shape a value has at run time."""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    return TensorType(t.dtype, shape, t.layout if len(shape) == t.ndim else "*", t.quant)


def placeholder(t: TensorType) -> np.ndarray:
    """An array of type `t` that holds no memory (zeros), for build-time inference."""
    return np.broadcast_to(np.zeros((), t.dtype.numpy), t.shape)


def shape_fed(op: Operator) -> list[str]:
    """The roles `op` feeds that decide its output shapes."""
    roles = op.op_def.shape_roles
    return [r for r in op.fed if r in roles]


def is_dynamic_op(op: Operator, values: Mapping[str, TensorType]) -> bool:
    """True when `op`'s output types are resolved at each forward: it feeds a shape role,
    or one of its values has a dimension known only at run time."""
    if shape_fed(op):
        return True
    return any(not values[v].is_static for v in (*op.inputs, *op.outputs))


def needs_resolution(op: Operator, values: Mapping[str, TensorType]) -> bool:
    """True when `op` goes through `FedResolver` at forward: it is dynamic, or feeds an
    attribute (whose value is checked by inference). An operator feeding only parameters
    (a Conv2d's weight) needs no inference: its parameters' shapes are static."""
    op_def = op.op_def
    return is_dynamic_op(op, values) or any(op_def.fed_attr(r) is not None for r in op.fed)


def _with_placeholders(
    op: Operator, params: Mapping[str, np.ndarray], fed_types: Mapping[str, TensorType]
) -> tuple[Operator, dict[str, np.ndarray]]:
    """`op` with each fed attribute at its default and each fed parameter a placeholder."""
    op_def = op.op_def
    attrs = dict(op.attrs)
    full = dict(params)
    for role in op.fed:
        spec = op_def.fed_attr(role)
        if spec is None:
            full[role] = placeholder(fed_types[role])
        elif role not in op_def.shape_roles:
            attrs[role] = spec.default
    return op.replace(attrs=attrs), full


def build_types(
    op: Operator,
    data_types: Sequence[TensorType],
    params: Mapping[str, np.ndarray],
    fed_types: Mapping[str, TensorType],
    declared: Sequence[TensorType] | None,
) -> list[TensorType]:
    """The output types of `op` when it is built or validated.

    A static operator's are inferred (fed parameters as placeholders of their values'
    shapes). A dynamic one's are `declared` (-1 for a dimension known only at run time);
    without a declaration, an operator that only reads dynamic values gets the rank and
    element type inference gives and every dimension -1.

    Raises:
        XrtError: 11003 naming the op when a dynamic op feeding a shape role has no
            declared types, or inference fails on dynamic inputs without them.
    """
    if not op.fed:  # the common case: as before, unless an input has a run-time shape
        for t in data_types:
            if -1 in t.shape:
                break
        else:
            return op.op_def.infer(op, list(data_types), params)
    dynamic_inputs = [t for t in data_types if not t.is_static]
    fed_shapes = shape_fed(op)
    if not dynamic_inputs and not fed_shapes:
        probe, full = _with_placeholders(op, params, fed_types)
        return op.op_def.infer(probe, list(data_types), full)
    if declared is not None:
        declared = list(declared)
        if len(declared) != len(op.outputs) or not all(isinstance(t, TensorType) for t in declared):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{op.describe()}: declare one TensorType per output ({len(op.outputs)})",
            )
        return declared
    if fed_shapes:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{op.describe()}: {fed_shapes} fed at run time decide its output shapes: "
            "declare its output types (types=[...], -1 for a dimension known only at run time)",
        )
    probe, full = _with_placeholders(op, params, fed_types)
    try:
        types = op.op_def.infer(probe, list(data_types), full)
    except XrtError as exc:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{op.describe()} reads a value whose shape is known only at run time and cannot "
            f"infer its outputs from that ({exc.message}): declare its output types",
        ) from None
    return [t.with_shape([-1] * t.ndim) for t in types]


def bind_fed(
    op: Operator, arrays: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray]
) -> tuple[Operator, dict[str, np.ndarray]]:
    """`op` with its fed attributes set from `arrays` (role -> fed array), and its
    parameters: the constant `params` plus the fed ones.

    Raises:
        XrtError: 11003/11010 naming the op and the role for an array that does not fit
            the attribute (`AttrSpec.from_array`).
    """
    op_def = op.op_def
    attrs: dict[str, Any] | None = None
    full = dict(params)
    for role, arr in arrays.items():
        spec = op_def.fed_attr(role)
        if spec is None:
            full[role] = arr
            continue
        if attrs is None:
            attrs = dict(op.attrs)
        attrs[role] = spec.from_array(op.describe(), role, arr)
    return (op if attrs is None else op.replace(attrs=attrs)), full


def _short(arr: np.ndarray) -> str:
    flat = np.asarray(arr).reshape(-1)
    items = [v.item() for v in flat[:8]]
    text = str(items if np.ndim(arr) else items[0] if items else [])
    return text[:-1] + ", ...]" if flat.size > 8 else text


def fed_text(op: Operator, arrays: Mapping[str, np.ndarray]) -> str:
    """``"op 2 (Reshape) with shape = [4, 3] fed by 's'"``: how errors name the data."""
    parts = [
        f"{role} = {_short(arrays[role])} fed by {op.fed[role]!r}"
        for role in op.fed
        if role in arrays and op.op_def.fed_attr(role) is not None
    ]
    return op.describe() + (" with " + ", ".join(parts) if parts else "")


def contradiction(got: TensorType, declared: TensorType) -> str | None:
    """Why resolved type `got` contradicts `declared` (-1 dimensions match any), or None."""
    if got.dtype is not declared.dtype:
        return f"is {got.dtype.manual_name}, the network declares {declared.dtype.manual_name}"
    if len(got.shape) != len(declared.shape) or any(
        d >= 0 and d != g for g, d in zip(got.shape, declared.shape, strict=False)
    ):
        return f"would have shape {list(got.shape)}, the network declares {list(declared.shape)}"
    if got.quant != declared.quant:
        return "would have other quantization parameters than the network declares"
    return None


class FedResolver:
    """Resolves the operators of one network at forward: fed attributes set, output types
    inferred from the fed data and the concrete input types and checked against the
    network's. The result is kept per operator and reused while the data that decides it
    (input types, fed attribute arrays) stays the same: inference runs again only when a
    fed value changes.

    Args:
        values: The network's value types (the declarations).
        params: The network's constant parameters.
        ops: The network's operators, in order: errors then name the fed values a
            contradicting value's shape follows.
    """

    def __init__(
        self,
        values: Mapping[str, TensorType],
        params: Mapping[str, np.ndarray],
        ops: Sequence[Operator] = (),
    ) -> None:
        self._values = values
        self._params = params
        self._memo: dict[int, tuple[Any, Operator, list[TensorType]]] = {}
        # Value -> the fed values (of shape roles) its shape follows.
        self._sources: dict[str, tuple[str, ...]] = {}
        for op in ops:
            found = {s: None for v in op.data_inputs for s in self._sources.get(v, ())}
            found.update({op.fed[r]: None for r in shape_fed(op)})
            for v in op.outputs:
                if found:
                    self._sources[v] = tuple(found)

    def resolve(
        self, op: Operator, data_types: Sequence[TensorType], arrays: Mapping[str, np.ndarray]
    ) -> tuple[Operator, list[TensorType]]:
        """(`op` with its fed attributes set, its output types) for fed arrays `arrays`.

        Raises:
            XrtError: 11003 naming the fed data when inference fails on it (a fed shape
                that does not fit the input), or naming the value and the contradiction
                when a resolved type contradicts the network's declaration.
        """
        op_def = op.op_def
        attr_arrays = [(role, arrays[role]) for role in op.fed if op_def.fed_attr(role) is not None]
        key = (
            tuple(data_types),
            tuple((r, a.dtype.str, a.shape, a.tobytes()) for r, a in attr_arrays),
        )
        memo = self._memo.get(op.op_id)
        if memo is not None and memo[0] == key:
            return memo[1], memo[2]
        params = {role: self._params[name] for role, name in op.params.items()}
        bound, full = bind_fed(op, arrays, params)
        try:
            types = op_def.infer(bound, list(data_types), full)
        except XrtError as exc:
            text = exc.message.removeprefix(f"{op.describe()}: ")
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{fed_text(op, arrays)}: {text}") from None
        for v, got in zip(op.outputs, types, strict=True):
            why = contradiction(got, self._values[v])
            if why:
                srcs = self._sources.get(v)
                follows = f"; its shape follows {list(srcs)}, fed at run time" if srcs else ""
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"value {v!r} {why}{follows} ({fed_text(op, arrays)})",
                )
        self._memo[op.op_id] = (key, bound, types)
        return bound, types


def runtime_note(op: Operator, values: Mapping[str, TensorType] | None) -> str | None:
    """Why `op` needs a backend that takes run-time parameters, or None when it does not:
    ``"weight 'W' is fed at run time"``, ``"input 'y' has a shape known only at run
    time"`` (shapes are checked only when `values` are given)."""
    if op.fed:
        role, value = next(iter(op.fed.items()))
        return f"{role} {value!r} is fed at run time"
    if values is None:
        return None
    for v in (*op.inputs, *op.outputs):
        if not values[v].is_static:
            kind = "input" if v in op.inputs else "output"
            return f"{kind} {v!r} has a shape known only at run time"
    return None
