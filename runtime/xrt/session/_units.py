"""What `Session.apply` prepares from the bindings: the execution units and their arena.

Consecutive operators bound to one backend form a run; a non-host backend with
`auto_merge` on cuts its runs into merged units (`Backend.partition`), every other operator
is a unit of its own. The boundary ops (``Input``, ``Output``: `xrt.ops.boundary`) are
always units of their own, never merged: they pass the session's feeds and outputs through
and materialise nothing. Every value the session materialises (its inputs, the values units
hand over) gets a slot in one host arena, placed by the liveness plan of
`xrt.session.planner`. `ValueFlow` says who produces and reads each value of the session's
view; `ExecutionPlan` is what the executor (`xrt.session._executor`) runs.

A value whose shape is known only at run time (it depends on data fed at run time, see
`xrt.network.FedResolver`) has no slot: the executor allocates it at each forward, with
the shape resolved then, and drops it after its last reader (`ExecutionPlan.dies_at`).
Networks without such values plan everything, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xrt.backend import Backend, Subgraph
from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.memory import MemChunk, MemRegion
from xrt.network import NetworkView, Operator, needs_resolution
from xrt.ops import is_boundary, passed_values
from xrt.session.planner import DEFAULT_ALIGNMENT, Lifetime, MemoryPlan, plan_memory
from xrt.tensor import Tensor

__all__ = [
    "BackendCall",
    "ExecutionPlan",
    "Position",
    "Unit",
    "ValueFlow",
    "build_units",
    "prepare",
]

Unit = Operator | Subgraph
"""What the session runs in one backend call: an operator, or a merged `Subgraph`."""

Position = tuple[int, int]
"""Where an operator sits in a plan: (index of its unit, index inside the unit)."""


@dataclass(frozen=True, eq=False)
class BackendCall:
    """Operators run by one backend call: a whole unit or, under step_to, part of one.

    Attributes:
        backend: The backend running them.
        ops: The operators, in network order.
        merged: Run as one `Subgraph` (`Backend.forward_subgraph`), else one operator.
        inputs: Values read from outside the call, in order of first use.
        outputs: Values produced inside that something outside reads, that the session
            returns, or that nothing reads.
        step: The unit's 1-based place in the run: its time step in the memory plan.
    """

    backend: Backend
    ops: tuple[Operator, ...]
    merged: bool
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    step: int

    @property
    def handle(self) -> Unit:
        """What callbacks and logs see: the operator, or the `Subgraph`."""
        if not self.merged:
            return self.ops[0]
        return Subgraph(self.backend, self.ops, self.inputs, self.outputs)

    def describe(self) -> str:
        """The unit as logs and errors name it (`Subgraph.describe`, `Operator.describe`)."""
        if self.merged:
            return Subgraph(self.backend, self.ops, self.inputs, self.outputs).describe()
        return f"{self.ops[0].describe()} on {type(self.backend).__name__}"


class ValueFlow:
    """Who produces and who reads each value of a session's view.

    A view of every operator behaves as the network itself: its inputs and outputs are the
    network's (a view orders inputs by first use, omits unused ones, and lists values
    nothing reads as outputs).

    Attributes:
        view: The operators the session runs.
        inputs: Names of the values the session takes, in order.
        outputs: Names of the values the session returns, in order.
        values: Every value's type (unused network inputs too).
        producer: Value -> the operator of the view producing it.
        readers: Value -> ids of the operators of the view reading it.
        dynamic: Values whose shape is known only at run time (allocated per forward).
        resolve: Ids of the operators resolved at each forward (`FedResolver`).
    """

    def __init__(self, view: NetworkView) -> None:
        self.view = view
        full = view.op_ids == view.network.op_ids
        self.inputs: tuple[str, ...] = tuple(view.network.inputs if full else view.inputs)
        self.outputs: tuple[str, ...] = tuple(view.network.outputs if full else view.outputs)
        self.values: Mapping[str, TensorType] = view.network.values
        self.producer: dict[str, Operator] = {v: op for op in view.ops for v in op.outputs}
        self.readers: dict[str, list[int]] = {}
        for op in view.ops:
            # The Input op reads the feeds it passes on: they live until it has run.
            read = passed_values(op) if is_boundary(op) else op.inputs
            for v in dict.fromkeys(read):
                self.readers.setdefault(v, []).append(op.op_id)
        self._returned = frozenset(self.outputs)
        self.dynamic = frozenset(v for v, t in self.values.items() if not t.is_static)
        self.resolve = frozenset(
            op.op_id for op in view.ops if needs_resolution(op, view.network.values)
        )

    def boundary(self, ops: Sequence[Operator]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The values crossing the boundary of `ops` run together: (inputs, outputs)."""
        inside = {op.op_id for op in ops}
        produced: set[str] = set()
        inputs: dict[str, None] = {}
        for op in ops:
            for v in op.inputs:
                if v not in produced:
                    inputs.setdefault(v, None)
            produced.update(op.outputs)
        outputs = [
            v
            for op in ops
            for v in op.outputs
            if v in self._returned
            or not self.readers.get(v)
            or any(r not in inside for r in self.readers[v])
        ]
        return tuple(inputs), tuple(outputs)

    def last_use(self, value: str, first: int, step_of_op: Mapping[int, int], end: int) -> int:
        """The last time step reading `value` (made at step `first`); `end` if returned."""
        if value in self._returned:
            return end
        return max([first, *(step_of_op[r] for r in self.readers.get(value, ()))])


@dataclass(eq=False)
class ExecutionPlan:
    """What `Session.apply` prepared: the units in run order and the arena they share.

    Attributes:
        units: The units, in run order.
        position: Op id -> where it sits (`Position`).
        memory: The arena plan (`Session.memory_plan`).
        arena: The host chunk the planned values live in.
        slots: Value -> its tensor in the arena.
        dies_at: Time step -> values no unit reads after it (0: unused inputs).
        host_region: Where the arena, temporaries and returned tensors are allocated.
    """

    units: list[BackendCall]
    position: dict[int, Position]
    memory: MemoryPlan
    arena: MemChunk
    slots: dict[str, Tensor]
    dies_at: dict[int, list[str]]
    host_region: MemRegion

    @property
    def end(self) -> Position:
        """The position of the last operator."""
        return (len(self.units) - 1, len(self.units[-1].ops) - 1)

    def forked(self, twin_of: Mapping[int, Backend]) -> ExecutionPlan:
        """The same units and memory plan on the twin backends (by ``id`` of the original),
        with an arena of its own."""
        arena = self.host_region.malloc(self.memory.peak_bytes, True, DEFAULT_ALIGNMENT)
        units = [
            BackendCall(twin_of[id(u.backend)], u.ops, u.merged, u.inputs, u.outputs, u.step)
            for u in self.units
        ]
        slots = {n: Tensor(t.tensor_type, arena, t.offset) for n, t in self.slots.items()}
        return ExecutionPlan(
            units, dict(self.position), self.memory, arena, slots, self.dies_at, self.host_region
        )


def build_units(flow: ValueFlow, bindings: Mapping[int, Backend]) -> list[BackendCall]:
    """Cut the view into units (see the module docstring).

    Raises:
        XrtError: 11013 when a backend's `partition` does not return every op once, in order.
    """
    ops = flow.view.ops
    units: list[BackendCall] = []
    i = 0
    while i < len(ops):
        b = bindings[ops[i].op_id]
        if is_boundary(ops[i]):  # passes values through: reads them, makes none
            units.append(
                BackendCall(b, (ops[i],), False, passed_values(ops[i]), (), len(units) + 1)
            )
            i += 1
            continue
        j = i + 1
        while j < len(ops) and bindings[ops[j].op_id] is b and not is_boundary(ops[j]):
            j += 1
        run = ops[i:j]
        merged = not b.is_host and b.auto_merge
        groups = b.partition(run) if merged else [(op,) for op in run]
        flat = [op for g in groups for op in g]
        if [op.op_id for op in flat] != [op.op_id for op in run] or not all(groups):
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{type(b).__name__}.partition did not return every op of "
                f"{[op.op_id for op in run]} once, in order",
            )
        for g in groups:
            ins, outs = flow.boundary(g)
            units.append(BackendCall(b, tuple(g), merged, ins, outs, len(units) + 1))
        i = j
    return units


def prepare(
    flow: ValueFlow, bindings: Mapping[int, Backend], host_region: MemRegion
) -> ExecutionPlan:
    """Build the units, plan the arena by liveness and allocate it on `host_region`.

    The session's inputs live from step 0, each unit's outputs from its step; a value lives
    until the last unit reading it, a returned value to the end.
    """
    units = build_units(flow, bindings)
    position = {op.op_id: (k, n) for k, u in enumerate(units) for n, op in enumerate(u.ops)}
    step_of_op = {op_id: units[k].step for op_id, (k, _) in position.items()}
    end = len(units) + 1

    def lifetime(value: str, first: int) -> Lifetime:
        last = flow.last_use(value, first, step_of_op, end)
        return Lifetime(value, flow.values[value].bytes(), first, last)

    lifetimes = [lifetime(v, 0) for v in flow.inputs]
    produced = [(v, u.step) for u in units for v in u.outputs]
    lifetimes += [lifetime(v, step) for v, step in produced if v not in flow.dynamic]
    memory = plan_memory(lifetimes, DEFAULT_ALIGNMENT)
    arena = host_region.malloc(memory.peak_bytes, True, DEFAULT_ALIGNMENT)
    slots = {
        name: Tensor(flow.values[name], arena, p.offset) for name, p in memory.placements.items()
    }
    dies_at: dict[int, list[str]] = {}
    for p in memory.placements.values():
        dies_at.setdefault(p.last, []).append(p.name)
    for v, step in produced:
        if v in flow.dynamic:  # allocated per forward: dropped after its last reader
            dies_at.setdefault(flow.last_use(v, step, step_of_op, end), []).append(v)
    return ExecutionPlan(units, position, memory, arena, slots, dies_at, host_region)
