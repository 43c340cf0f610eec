"""The per-class operator registry of backends: which op types a backend class runs, how.

Each backend *class* keeps a registry of the operator types it can run: for each op type a
forward function, an optional init function (run once per operator by `Backend.apply`) and
an optional constraint (the manual's ``ICRAFT_ADD_OP_TO_BACKEND(Op, Backend).set_init(...)
.set_forward(...).set_constraint(...)``). `OpRegistry` is the part of `Backend` that keeps
it, apart from the life cycle in `xrt.backend._base`; `BindContext` is what a constraint
may ask about the bindings made so far.

The registry is generic over the backend type `B` its functions are given: `Backend`
derives from ``OpRegistry["Backend"]``, so this module, below it, never names it.

The boundary ops ``Input`` and ``Output`` (`xrt.ops.boundary`) are in every registry with
one entry, `BOUNDARY_ENTRY`, which passes the tensors through; no class registers its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from xrt.backend._arrays import read_array, write_array
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView, Operator, runtime_note
from xrt.ops import BOUNDARY_OP_TYPES, get_op_def, refuse_boundary
from xrt.tensor import Tensor

__all__ = [
    "BOUNDARY_ENTRY",
    "BackendOp",
    "BindContext",
    "OpConstraintFn",
    "OpForwardFn",
    "OpInitFn",
    "OpRegistry",
]

B = TypeVar("B")
"""The backend objects a registry's functions are given (`xrt.backend.Backend`)."""

OpInitFn = Callable[[Operator, B], Any]
"""``init(op, backend) -> state``: prepares one operator; the state is `Backend.op_state`."""

OpForwardFn = Callable[
    [Operator, list[Tensor], list[Tensor], B], "Sequence[np.ndarray | Tensor] | None"
]
"""``forward(op, inputs, outputs, backend)``.

`inputs` are the operator's input tensors in ``op.inputs`` order, `outputs` tensors with
memory for each of ``op.outputs``. The function either fills `outputs` and returns None,
or returns one array (or tensor) per output, which the backend checks against the declared
types and copies into `outputs`.
"""

OpConstraintFn = Callable[[Operator, B, "BindContext[B]"], bool]
"""``constraint(op, backend, ctx) -> bool``: may this backend run `op` here?"""


@dataclass(frozen=True)
class BackendOp(Generic[B]):
    """One registry entry: how a backend class runs one op type.

    Attributes:
        op_type: The op type (`xrt.ops.op_types`).
        forward: The forward function (`OpForwardFn`).
        init: Called once per bound operator by `Backend.apply`; its result is the
            operator's state (`Backend.op_state`). None: the state is None.
        constraint: Decides per operator whether the backend takes it (`OpConstraintFn`);
            None: always.
    """

    op_type: str
    forward: OpForwardFn[B]
    init: OpInitFn[B] | None = None
    constraint: OpConstraintFn[B] | None = None


def _pass_through(op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Any) -> None:
    """An Input or Output op: it is handed the tensors it yields (the feeds, the network's
    outputs) as inputs and as the outputs to fill, and copies only where the two are not
    the same tensor. An Output op given no outputs (its own ``op.outputs``) does nothing."""
    if op.op_type == "Output" and not outputs:
        return
    if len(inputs) != len(outputs):
        raise XrtError(
            ErrorCode.BACKEND_INTERNAL,
            f"{op.describe()} computes nothing: hand it the tensors it yields (the feeds for "
            f"Input, the outputs for Output) as inputs and outputs; got {len(inputs)} in, "
            f"{len(outputs)} out",
        )
    for src, dst in zip(inputs, outputs, strict=True):
        if src is not dst:
            write_array(dst, read_array(src))


BOUNDARY_ENTRY: BackendOp[Any] = BackendOp("Input", _pass_through)
"""Every backend's entry for the boundary ops (`xrt.ops.boundary`): no init, no constraint,
a forward that passes the tensors through."""


class BindContext(Generic[B]):
    """What a constraint may ask about the network and the bindings made so far.

    `Session.create` binds operators in network order, so when an operator's constraint
    runs, every operator before it is bound: `producer_backend` answers for each of its
    inputs (the manual's constraints ask where an input lives; here a value lives on the
    backend that produces it).

    Args:
        graph: The network or view being bound; None when a backend is asked outside a
            session before it is bound (`Backend.is_op_supported` without a context).
        bindings: Op id -> backend, for the operators bound so far.
    """

    def __init__(self, graph: Network | NetworkView | None, bindings: Mapping[int, B]) -> None:
        self.graph = graph
        self._bindings = bindings
        ops = graph.ops if graph is not None else ()
        # A network input has no producer here, though the Input op yields it.
        self._producer = {v: op for op in ops if op.op_type not in BOUNDARY_OP_TYPES
                          for v in op.outputs}  # fmt: skip

    def backend_of(self, op_id: int) -> B | None:
        """The backend op `op_id` is bound to, or None (not bound yet)."""
        return self._bindings.get(op_id)

    def producer(self, value: str) -> Operator | None:
        """The operator of the graph producing `value` (None for the graph's inputs)."""
        return self._producer.get(value)

    def producer_backend(self, value: str) -> B | None:
        """The backend producing `value`; None for graph inputs and unbound producers."""
        op = self._producer.get(value)
        return None if op is None else self._bindings.get(op.op_id)


class OpRegistry(Generic[B]):
    """The operator registry a backend class carries (`Backend` derives from it).

    Registries are per class: a subclass starts with its parent's entries and may add or
    override entries without changing the parent. The root class (`Backend` itself) takes
    no entries.

    Attributes:
        network_view: The operators the backend object is bound to (None before `init`);
            `is_op_supported` asks constraints about this view by default.
    """

    network_view: NetworkView | None
    _own_ops: ClassVar[dict[str, BackendOp[Any]]] = {}
    runtime_params: ClassVar[bool] = False
    """True when the backend takes operators with parameters fed at run time
    (``Operator.fed``) and values whose shapes are known only at run time (the host);
    others never get them bound (`runtime_refusal`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._own_ops = {}

    @classmethod
    def add_op(
        cls,
        op_type: str,
        forward: OpForwardFn[B],
        *,
        init: OpInitFn[B] | None = None,
        constraint: OpConstraintFn[B] | None = None,
        replace: bool = False,
    ) -> BackendOp[B]:
        """Register how this backend class runs `op_type` (``ICRAFT_ADD_OP_TO_BACKEND``).

        Args:
            op_type: A registered op type.
            forward: The forward function (`OpForwardFn`).
            init: Per-operator preparation (`OpInitFn`), run by `apply`.
            constraint: Per-operator admission test (`OpConstraintFn`).
            replace: Allow replacing this class's own entry for `op_type`.

        Returns:
            The new entry.

        Raises:
            XrtError: 11010 for an unknown op type, a non-callable function, registering
                on `Backend` itself, or a second entry for the same class without `replace`.
        """
        if OpRegistry in cls.__bases__:  # the root class: entries go on its subclasses
            raise XrtError(ErrorCode.WRONG_TYPE, f"register operators on a {cls.__name__} subclass")
        get_op_def(op_type)
        refuse_boundary(op_type, f"{cls.__name__}.add_op")
        for what, fn in (("forward", forward), ("init", init), ("constraint", constraint)):
            if fn is not None and not callable(fn):
                raise XrtError(ErrorCode.WRONG_TYPE, f"{op_type}: {what} must be callable")
        if forward is None:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{op_type}: a forward function is required")
        if op_type in cls._own_ops and not replace:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{cls.__name__} already registers {op_type} (pass replace=True to change it)",
            )
        entry = BackendOp(op_type, forward, init, constraint)
        cls._own_ops[op_type] = entry
        return entry

    @classmethod
    def op(
        cls,
        op_type: str,
        *,
        init: OpInitFn[B] | None = None,
        constraint: OpConstraintFn[B] | None = None,
        replace: bool = False,
    ) -> Callable[[OpForwardFn[B]], OpForwardFn[B]]:
        """Decorator form of `add_op`: ``@MyBackend.op("Conv2d", constraint=...)`` on the
        forward function (which is returned unchanged)."""

        def decorate(forward: OpForwardFn[B]) -> OpForwardFn[B]:
            cls.add_op(op_type, forward, init=init, constraint=constraint, replace=replace)
            return forward

        return decorate

    @classmethod
    def op_registry(cls) -> Mapping[str, BackendOp[B]]:
        """Every entry of this class, its own over its parents' (read-only)."""
        merged: dict[str, BackendOp[B]] = {}
        for klass in reversed(cls.__mro__):
            own = klass.__dict__.get("_own_ops")
            if own:
                merged.update(own)
        return MappingProxyType(merged)

    @classmethod
    def lookup(cls, op_type: str) -> BackendOp[B] | None:
        """This class's entry for `op_type` (searching its parents), or None;
        `BOUNDARY_ENTRY` for ``Input`` and ``Output``."""
        if op_type in BOUNDARY_OP_TYPES:
            return BOUNDARY_ENTRY
        for klass in cls.__mro__:
            own = klass.__dict__.get("_own_ops")
            if own and op_type in own:
                return own[op_type]  # type: ignore[no-any-return]
        return None

    @classmethod
    def supports(cls, op_type: str) -> bool:
        """True when the registry has `op_type` (constraints are not consulted)."""
        return cls.lookup(op_type) is not None

    def is_op_supported(self, op: Operator, ctx: BindContext[B] | None = None) -> bool:
        """True when the registry has ``op.op_type`` and its constraint accepts `op`.

        Args:
            op: The operator.
            ctx: Bindings so far; default: a context over this backend's view (None
                before `init`) with nothing bound.

        Raises:
            XrtError: 11013 naming the operator when the constraint raises or returns
                something other than a bool.
        """
        entry = self.lookup(op.op_type)
        if entry is None:
            return False
        if entry is BOUNDARY_ENTRY:
            return True
        if not self.runtime_params and self.runtime_refusal(op, ctx) is not None:
            return False
        if entry.constraint is None:
            return True
        if ctx is None:
            ctx = BindContext(self.network_view, {})
        try:
            ok = entry.constraint(op, self, ctx)  # type: ignore[arg-type]  # self is a Backend
        except XrtError:
            raise
        except Exception as exc:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{type(self).__name__}: constraint for {op.describe()} failed: {exc!r}",
            ) from exc
        if not isinstance(ok, bool | np.bool_):
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{type(self).__name__}: constraint for {op.describe()} returned {ok!r}, "
                f"not a bool",
            )
        return bool(ok)

    def runtime_refusal(self, op: Operator, ctx: BindContext[B] | None = None) -> str | None:
        """Why this backend does not take `op` because of run-time parameters (a role
        fed at run time, a shape known only at run time), or None; always None when the
        backend has `runtime_params`."""
        if self.runtime_params:
            return None
        graph = ctx.graph if ctx is not None else self.network_view
        note = runtime_note(op, graph.values if graph is not None else None)
        if note is None:
            return None
        need = "constants" if op.fed else "static shapes"
        return f"{note}; {type(self).__name__} needs {need}"

    def refusal(self, op: Operator, ctx: BindContext[B] | None = None) -> str | None:
        """None when this backend takes `op` (`is_op_supported`), else one sentence saying
        why not, for placement reports. Backends with richer reasons override it (the NPU
        backends give the compiler's legality verdict).

        Args:
            op: The operator.
            ctx: Bindings so far (as for `is_op_supported`).
        """
        if self.lookup(op.op_type) is None:
            return f"{type(self).__name__} has no {op.op_type} operator"
        why = self.runtime_refusal(op, ctx)
        if why is not None:
            return why
        if self.is_op_supported(op, ctx):
            return None
        return f"{type(self).__name__}'s constraint for {op.op_type} refuses this operator"
