"""The operator registry: one `OpDef` per op type.

An `OpDef` holds what the runtime needs to know about an op type without running a network:
its attribute schema (with defaults), how many inputs and which parameters it takes, its
type inference and its host kernel. Every op type of `xrt.network` has exactly one entry.

Kernels are plain functions ``forward(op, inputs, params) -> outputs`` over numpy arrays, so
a backend (the later HostBackend) can register them directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError

__all__ = [
    "REQUIRED",
    "AttrSpec",
    "ForwardFn",
    "InferFn",
    "OpDef",
    "OpLike",
    "get_op_def",
    "op_types",
    "register_op",
]


class OpLike(Protocol):
    """What kernels and inference functions read from an operator (`xrt.network.Operator`)."""

    op_id: int
    op_type: str
    name: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    attrs: Mapping[str, Any]


InferFn = Callable[[OpLike, list[TensorType], Mapping[str, np.ndarray]], list[TensorType]]
"""``infer(op, input_types, params) -> output_types``; raises XrtError on inconsistent input."""

ForwardFn = Callable[[OpLike, list[np.ndarray], Mapping[str, np.ndarray]], list[np.ndarray]]
"""``forward(op, inputs, params) -> outputs``; params maps a parameter role to its array."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Marks an attribute without a default."""

_KINDS = ("int", "float", "bool", "str", "ints", "floats", "json")


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its kind, default and an optional fixed length for list kinds.

    Attributes:
        kind: ``int``, ``float``, ``bool``, ``str``, ``ints``, ``floats`` or ``json`` (any
            JSON value: lists of lists, objects...).
        default: The value used when the attribute is absent, or `REQUIRED`.
        length: For ``ints``/``floats``: the exact length the list must have, or None.
        doc: One line saying what the attribute means.
    """

    kind: str
    default: Any = REQUIRED
    length: int | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown attribute kind {self.kind!r}")

    def normalize(self, op_desc: str, key: str, value: Any) -> Any:
        """Return `value` converted to this kind; XrtError 11010 when it does not fit."""

        def bad(what: str) -> XrtError:
            return XrtError(ErrorCode.WRONG_TYPE, f"{op_desc}: attribute {key!r} {what}: {value!r}")

        kind = self.kind
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise bad("must be an int")
            return int(value)
        if kind == "float":
            if isinstance(value, bool) or not isinstance(
                value, (int, float, np.integer, np.floating)
            ):
                raise bad("must be a number")
            out = float(value)
            if math.isnan(out):
                raise bad("must not be NaN")
            return out
        if kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
                return bool(value)
            raise bad("must be a bool")
        if kind == "str":
            if not isinstance(value, str):
                raise bad("must be a string")
            return value
        if kind in ("ints", "floats"):
            if not isinstance(value, (list, tuple)):
                raise bad("must be a list")
            item = AttrSpec("int" if kind == "ints" else "float")
            out_list = [item.normalize(op_desc, key, v) for v in value]
            if self.length is not None and len(out_list) != self.length:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{op_desc}: attribute {key!r} needs {self.length} values, got {len(out_list)}",
                )
            return out_list
        return _check_json(op_desc, key, value)

    def from_array(self, op_desc: str, key: str, array: np.ndarray) -> Any:
        """The attribute value an array fed at run time stands for (then `normalize`d):
        a list for ``ints``/``floats``, the single element for ``int``/``float``/``bool``.

        Raises:
            XrtError: 11003 naming the attribute for a scalar kind fed more or less than one
                element, or a kind that cannot be fed (``str``, ``json``); 11010 for
                elements of the wrong kind (a float fed for an int).
        """
        arr = np.asarray(array)
        flat = arr.reshape(-1)
        kind = self.kind
        if kind in ("ints", "int") and flat.dtype.kind not in "iub":
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{op_desc}: {key!r} fed at run time must hold integers, got {arr.dtype}",
            )
        if kind in ("ints", "floats"):
            items: Any = [int(v) for v in flat] if kind == "ints" else [float(v) for v in flat]
            if kind == "ints":  # INT64_MAX / INT64_MIN mean "to the end": keep them in range
                items = [max(min(v, _BIG), -_BIG) for v in items]
        elif kind in ("int", "float", "bool"):
            if flat.size != 1:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{op_desc}: {key!r} fed at run time must hold one value, got shape "
                    f"{list(arr.shape)}",
                )
            v = flat[0]
            items = int(v) if kind == "int" else bool(v) if kind == "bool" else float(v)
        else:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{op_desc}: attribute {key!r} ({kind}) cannot be fed"
            )
        return self.normalize(op_desc, key, items)


_BIG = 2**62
"""Fed ``ints`` are clamped to +-2**62 (ONNX's INT64 extremes mean "to the end")."""


def _check_json(op_desc: str, key: str, value: Any, depth: int = 0) -> Any:
    if depth > 32:
        raise XrtError(ErrorCode.WRONG_TYPE, f"{op_desc}: attribute {key!r} is nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{op_desc}: attribute {key!r} holds {value!r}")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_check_json(op_desc, key, v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"{op_desc}: attribute {key!r} has non-string keys"
            )
        return {k: _check_json(op_desc, key, v, depth + 1) for k, v in value.items()}
    raise XrtError(
        ErrorCode.WRONG_TYPE, f"{op_desc}: attribute {key!r} is not JSON data: {value!r}"
    )


@dataclass(frozen=True)
class OpDef:
    """Everything the runtime knows about one op type.

    Attributes:
        op_type: The type name used in networks and files (``"Conv2d"``).
        num_inputs: ``(min, max)`` number of value inputs; max None means unbounded.
        num_outputs: Number of output values; None for "one or more" (HardOp).
        attrs: Attribute schema by name.
        params: Parameter roles the op requires (``("weight",)``).
        optional_params: Parameter roles the op accepts but does not require.
        infer: Type inference.
        forward: Host kernel.
        quantized: True for the integer-only kernels of `xrt.quant` (``QConv2d``...).
        doc: One paragraph saying what the op computes.
        fed_roles: Parameter roles and attribute names that an operator may bind to a value
            fed at run time instead of a constant (``Operator.fed``); the kernel receives
            the array as the parameter, or the attribute converted by
            `AttrSpec.from_array`, either way.
        shape_roles: Those of `fed_roles` whose data decides output shapes (a Reshape's
            ``shape``): an operator feeding one has outputs resolved at each forward.
    """

    op_type: str
    num_inputs: tuple[int, int | None]
    num_outputs: int | None
    attrs: Mapping[str, AttrSpec]
    infer: InferFn
    forward: ForwardFn
    params: tuple[str, ...] = ()
    optional_params: tuple[str, ...] = ()
    quantized: bool = False
    doc: str = ""
    fed_roles: tuple[str, ...] = ()
    shape_roles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        roles = (*self.params, *self.optional_params)
        for role in self.fed_roles:
            spec = self.attrs.get(role)
            if role not in roles and (spec is None or spec.kind in ("str", "json")):
                raise ValueError(f"{self.op_type}: fed role {role!r} is no parameter or attribute")
            if (
                spec is not None
                and role not in self.shape_roles
                and spec.kind in ("int", "float", "bool")
                and spec.default is REQUIRED
            ):
                raise ValueError(f"{self.op_type}: fed attribute {role!r} needs a default")
        if not set(self.shape_roles) <= set(self.fed_roles):
            raise ValueError(f"{self.op_type}: shape_roles must be fed_roles")

    def fed_attr(self, role: str) -> AttrSpec | None:
        """The attribute spec when fed role `role` is an attribute, None for a parameter."""
        if role in self.params or role in self.optional_params:
            return None
        return self.attrs.get(role)

    def normalize_attrs(
        self, op_desc: str, attrs: Mapping[str, Any], fed: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Return `attrs` checked against the schema, with defaults filled in.

        Attributes named in `fed` (bound to values fed at run time) are left out: they
        must not be given, and get no default.

        Raises:
            XrtError: 11010 for an unknown attribute or a value of the wrong kind, 11003 for a
                missing required attribute or a list of the wrong length.
        """
        if not isinstance(attrs, Mapping):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{op_desc}: attributes must be a mapping")
        unknown = sorted(set(attrs) - set(self.attrs))
        if unknown:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{op_desc}: unknown attribute(s) {unknown} (known: {sorted(self.attrs)})",
            )
        given = sorted(set(attrs) & set(fed)) if fed else None
        if given:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{op_desc}: attribute(s) {given} are fed at run time and also given",
            )
        out: dict[str, Any] = {}
        for key, spec in self.attrs.items():
            if key in fed:
                continue
            if key in attrs:
                out[key] = spec.normalize(op_desc, key, attrs[key])
            elif spec.default is REQUIRED:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"{op_desc}: attribute {key!r} is required")
            else:
                out[key] = _copy_default(spec.default)
        return out

    def check_arity(
        self,
        op_desc: str,
        n_inputs: int,
        n_outputs: int,
        param_roles: Sequence[str],
        fed_roles: Sequence[str] = (),
    ) -> None:
        """Check input/output counts, parameter roles and fed roles (`n_inputs` counts the
        data inputs, not the fed values); XrtError 11003 when they do not fit."""
        bad = [r for r in fed_roles if r not in self.fed_roles] if fed_roles else None
        if bad:
            can = f" (it can: {list(self.fed_roles)})" if self.fed_roles else ""
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{op_desc}: {self.op_type} cannot take {bad} fed at run time{can}",
            )
        both = [r for r in fed_roles if r in param_roles] if fed_roles else None
        if both:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{op_desc}: role(s) {both} are both a parameter and fed"
            )
        lo, hi = self.num_inputs
        if n_inputs < lo or (hi is not None and n_inputs > hi):
            want = f"{lo}" if hi == lo else f"{lo}..{'' if hi is None else hi}"
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{op_desc}: takes {want} inputs, got {n_inputs}"
            )
        if (self.num_outputs is None and n_outputs < 1) or (
            self.num_outputs is not None and n_outputs != self.num_outputs
        ):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{op_desc}: produces {self.num_outputs or 'one or more'} outputs, got {n_outputs}",
            )
        missing = [r for r in self.params if r not in param_roles and r not in fed_roles]
        if missing:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{op_desc}: missing parameter(s) {missing}")
        extra = [r for r in param_roles if r not in self.params and r not in self.optional_params]
        if extra:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{op_desc}: unknown parameter role(s) {extra}")


def _copy_default(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy_default(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy_default(v) for k, v in value.items()}
    return value


_REGISTRY: dict[str, OpDef] = {}


def register_op(op_def: OpDef) -> OpDef:
    """Add `op_def` to the registry (an op type is registered once) and return it."""
    if op_def.op_type in _REGISTRY:
        raise ValueError(f"op type {op_def.op_type!r} is already registered")
    _REGISTRY[op_def.op_type] = op_def
    return op_def


def get_op_def(op_type: str) -> OpDef:
    """Return the `OpDef` of `op_type`; XrtError 11010 naming the type when it is unknown."""
    try:
        return _REGISTRY[op_type]
    except (KeyError, TypeError):
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"unknown op type {op_type!r} (known: {', '.join(sorted(_REGISTRY))})",
        ) from None


def op_types() -> list[str]:
    """Names of every registered op type, sorted."""
    return sorted(_REGISTRY)
