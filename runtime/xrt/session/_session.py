"""`Session`: binds a network's operators to backends and runs it (the manual's ``Session``)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xrt.backend._arrays import read_array, write_array
from xrt.backend._base import Backend, Subgraph
from xrt.device import Device, HostDevice
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemChunk, MemRegion
from xrt.network import Network, NetworkView, Operator
from xrt.session._binding import bind_by_priority, check_bindings
from xrt.session._io_checks import InputLike, check_inputs, check_outputs
from xrt.session._options import SessionOptions
from xrt.session.planner import DEFAULT_ALIGNMENT, Lifetime, MemoryPlan, plan_memory
from xrt.session.profile import OpTime
from xrt.tensor import Tensor
from xrt.timeline import TraceRecorder

__all__ = ["Callback", "InputLike", "Session", "Unit"]

_LOG = logging.getLogger("xrt.session")

Unit = Operator | Subgraph
"""What the session runs in one backend call: an operator, or a merged `Subgraph`."""

Callback = Callable[["Session", Unit, Backend, list[Tensor]], Any]
"""``callback(session, op, backend, tensors)``, as the manual's ``preFunc``/``postFunc``:
the unit (an operator, or a merged `Subgraph`), the backend running it, and its inputs
(pre) or outputs (post)."""


@dataclass(frozen=True, eq=False)
class _Piece:
    """Operators run by one backend call: a whole unit or, under step_to, part of one."""

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
        if self.merged:
            return Subgraph(self.backend, self.ops, self.inputs, self.outputs).describe()
        return f"{self.ops[0].describe()} on {type(self.backend).__name__}"


@dataclass(eq=False)
class _Run:
    """Progress of one run through the network (forward, or a series of step_to calls)."""

    inputs: Sequence[InputLike] | Mapping[str, InputLike]
    env: dict[str, Tensor] = field(default_factory=dict)
    unit: int = 0
    offset: int = 0
    temps: set[str] = field(default_factory=set)
    done: bool = False
    placed: dict[str, Tensor] = field(default_factory=dict)  # caller-placed outputs

    def same_inputs(self, inputs: object) -> bool:
        old = self.inputs
        if isinstance(old, Mapping) and isinstance(inputs, Mapping):
            return old.keys() == inputs.keys() and all(old[k] is inputs[k] for k in old)
        if isinstance(old, list | tuple) and isinstance(inputs, list | tuple):
            return len(old) == len(inputs) and all(a is b for a, b in zip(old, inputs, strict=True))
        return False


def _summary(name: str, t: Tensor) -> str:
    arr = read_array(t)
    head = f"{name}:{t.dtype.manual_name}{list(t.shape)}"
    if arr.size == 0:
        return head + " (empty)"
    if arr.dtype == np.bool_:
        return f"{head} true={int(arr.sum())}"
    a = arr.astype(np.float64)
    return f"{head} min={a.min():.6g} max={a.max():.6g} mean={a.mean():.6g}"


class Session(SessionOptions):
    """A network bound to backends, ready to run (the manual's ``Session``).

    Make one with `create` (bind by backend priority), `create_by_order` (the same with
    backend objects) or `create_with_backends` (backends already bound); then `apply`,
    then `forward` or `step_to`. docs/session.md describes the binding, the subgraphs,
    the memory plan and the debugging options.

    Attributes:
        network_view: The operators the session runs (a view of the whole network when
            created from a `Network`).
        inputs: Names of the values `forward` takes: the network's inputs (in their
            declared order) when the view holds every operator, else the view's inputs.
        outputs: Names of the values `forward` returns: the network's outputs when the
            view holds every operator, else the view's outputs.
        backends: The backends, in the order given (unused ones included, not initialised).
    """

    def __init__(
        self, graph: NetworkView, backends: Sequence[Backend], bindings: Mapping[int, Backend]
    ) -> None:
        self.network_view = graph
        self.backends: list[Backend] = list(backends)
        self._bindings: dict[int, Backend] = dict(bindings)
        self._applied = False
        self._closed = False
        self._lock = threading.Lock()
        self._readers: dict[str, list[int]] = {}
        for op in graph.ops:
            for v in dict.fromkeys(op.inputs):
                self._readers.setdefault(v, []).append(op.op_id)
        self._producer: dict[str, Operator] = {v: op for op in graph.ops for v in op.outputs}
        # A view of every operator behaves as the network itself: its inputs and outputs
        # are the network's (a view orders inputs by first use, omits unused ones, and
        # lists values nothing reads as outputs).
        full = graph.op_ids == graph.network.op_ids
        self.inputs: tuple[str, ...] = tuple(graph.network.inputs if full else graph.inputs)
        self.outputs: tuple[str, ...] = tuple(graph.network.outputs if full else graph.outputs)
        self._graph_outputs = frozenset(self.outputs)
        self._values = graph.network.values  # every value's type (unused inputs too)
        # Prepared by apply():
        self._units: list[_Piece] = []
        self._position: dict[int, tuple[int, int]] = {}
        self._plan: MemoryPlan | None = None
        self._arena: MemChunk | None = None
        self._slots: dict[str, Tensor] = {}
        self._dies_at: dict[int, list[str]] = {}
        self._host_region: MemRegion = HostDevice.default_region()
        # Options:
        self._log_io = False
        self._log_time = False
        self._dump: tuple[str, str] | None = None
        self._output_paths: dict[str, str] = {}
        self._pre: Callback | None = None
        self._post: Callback | None = None
        self._profile = False
        self._tracing = False
        # Results:
        self._trace: TraceRecorder | None = None
        self._run: _Run | None = None
        self._times: dict[int, OpTime] = {}
        self._io_s = 0.0
        self._total_s = 0.0

    # -- creation -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        backend_types: Sequence[type[Backend]],
        network: Network | NetworkView,
        devices: Sequence[Device | None] | None = None,
    ) -> Session:
        """Bind each operator to the first backend type that supports it (by priority).

        The manual's ``Session::Create<BackendA, BackendB>(network, {dev_a, dev_b})``: one
        backend object is made per type; each operator, in network order, goes to the
        first backend whose registry has its op type and whose constraint accepts it.

        Args:
            backend_types: Backend classes, highest priority first.
            network: The network, or a view of it, to run.
            devices: One device per backend (None: the backend's default device); default:
                all defaults.

        Raises:
            XrtError: 11010 for wrong types, an unsuitable device, or an operator no
                backend takes; 11003 for an empty backend list or a device count that
                differs from the backend count; 11012 for a closed device.
        """
        if isinstance(backend_types, type) or not isinstance(backend_types, Sequence):
            raise XrtError(ErrorCode.WRONG_TYPE, "Session.create takes a list of Backend classes")
        for t in backend_types:
            if not (isinstance(t, type) and issubclass(t, Backend)) or t is Backend:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"Session.create: {t!r} is not a Backend subclass"
                )
        return cls._bind(network, [t() for t in backend_types], devices, "Session.create")

    @classmethod
    def create_by_order(
        cls,
        network: Network | NetworkView,
        backends: Sequence[Backend],
        devices: Sequence[Device | None] | None = None,
    ) -> Session:
        """Like `create`, with backend objects made by the caller (not yet initialised).

        Raises:
            XrtError: as `create`; 11012 for a backend that is already initialised.
        """
        if not isinstance(backends, Sequence):
            raise XrtError(ErrorCode.WRONG_TYPE, "create_by_order takes a list of backends")
        for b in backends:
            if not isinstance(b, Backend):
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"create_by_order: {b!r} is not a Backend object"
                )
            if b.initialized:
                raise XrtError(
                    ErrorCode.WRONG_ORDER,
                    f"create_by_order: {b!r} is already bound; use create_with_backends",
                )
        if len({id(b) for b in backends}) != len(backends):
            raise XrtError(ErrorCode.OUT_OF_RANGE, "create_by_order: a backend is listed twice")
        return cls._bind(network, list(backends), devices, "Session.create_by_order")

    @classmethod
    def _bind(
        cls,
        network: Network | NetworkView,
        backends: list[Backend],
        devices: Sequence[Device | None] | None,
        what: str,
    ) -> Session:
        graph, bindings = bind_by_priority(network, backends, devices, what)
        return cls(graph, backends, bindings)

    @classmethod
    def create_with_backends(
        cls, network: Network | NetworkView, backends: Sequence[Backend]
    ) -> Session:
        """A session from backends already bound to views of the network (``Backend.create``).

        Every operator of `network` must be bound to exactly one of the backends, and be
        accepted by its constraint given those bindings.

        Raises:
            XrtError: 11012 for a backend not initialised; 11010 for a backend bound to
                another network or an operator its backend does not accept; 11003 for an
                operator bound twice, not bound, or bound but outside `network`.
        """
        graph, bindings = check_bindings(network, backends)
        return cls(graph, backends, bindings)

    @classmethod
    def create_with_snapshot(
        cls,
        path: str | os.PathLike[str],
        backends: Sequence[type[Backend] | Backend],
        devices: Sequence[Device | None] | None = None,
    ) -> Session:
        """A ready (applied) session from a file written by `dump_snapshot`, without
        preparing again what the snapshot holds (the manual's ``CreateWithSnapshot``).

        Args:
            path: The snapshot file.
            backends: The backend classes (or fresh objects) the snapshot was made with, in
                the same order.
            devices: One device per backend (None: defaults).

        Raises:
            XrtError: 11002 for a missing file; 11011 naming the reason for a corrupt
                snapshot or one made with other backends, another target or hardware.
        """
        from xrt.session.snapshot import load_snapshot

        return load_snapshot(cls, path, backends, devices)

    def dump_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the session (network, bindings, backend options and prepared artefacts)
        to one file for `create_with_snapshot` (the manual's ``dumpSnapshot``).

        Raises:
            XrtError: 11012 before `apply`; 11002 when the file cannot be written.
        """
        from xrt.session.snapshot import write_snapshot

        self._check_ready("dump_snapshot")
        write_snapshot(self, path)

    # -- introspection ------------------------------------------------------------------------

    def backend_bindings(self) -> dict[int, Backend]:
        """Op id -> the backend it is bound to (the manual's ``backendBindings``)."""
        return dict(self._bindings)

    def execution_units(self) -> list[Unit]:
        """What one forward runs, in order: operators, and merged `Subgraph` objects.

        Raises:
            XrtError: 11012 before `apply`.
        """
        self._check_ready("execution_units")
        return [u.handle for u in self._units]

    @property
    def memory_plan(self) -> MemoryPlan:
        """The arena plan of the session's tensors (11012 before `apply`)."""
        self._check_ready("memory_plan")
        assert self._plan is not None
        return self._plan

    @property
    def arena(self) -> MemChunk:
        """The host chunk the planned tensors live in (11012 before `apply`)."""
        self._check_ready("arena")
        assert self._arena is not None
        return self._arena

    @property
    def applied(self) -> bool:
        """True after `apply` (until `close`)."""
        return self._applied

    # -- apply ----------------------------------------------------------------------------------

    def apply(self) -> Session:
        """Prepare the backends, group operators into units, plan and allocate memory.

        May be called again after changing options (e.g. a backend's `auto_merge`).

        Returns:
            The session.

        Raises:
            XrtError: 11012 after `close`; whatever a backend's apply raises.
        """
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, "the session is closed")
        with self._busy():
            self._applied = False
            self._run = None
            for b in self._used_backends():
                b.apply()
            host = next((b for b in self._used_backends() if b.is_host), None)
            region = host.device.default_mem_region() if host and host.device else None
            self._host_region = (
                region if isinstance(region, HostMemRegion) else HostDevice.default_region()
            )
            self._build_units()
            self._build_plan()
            self._applied = True
        return self

    def _used_backends(self) -> list[Backend]:
        used = {id(b) for b in self._bindings.values()}
        return [b for b in self.backends if id(b) in used]

    def _io(self, ops: Sequence[Operator]) -> tuple[tuple[str, ...], tuple[str, ...]]:
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
            if v in self._graph_outputs
            or not self._readers.get(v)
            or any(r not in inside for r in self._readers[v])
        ]
        return tuple(inputs), tuple(outputs)

    def _build_units(self) -> None:
        ops = self.network_view.ops
        units: list[_Piece] = []
        i = 0
        while i < len(ops):
            b = self._bindings[ops[i].op_id]
            j = i + 1
            while j < len(ops) and self._bindings[ops[j].op_id] is b:
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
                ins, outs = self._io(g)
                units.append(_Piece(b, tuple(g), merged, ins, outs, len(units) + 1))
            i = j
        self._units = units
        self._position = {
            op.op_id: (k, n) for k, u in enumerate(units) for n, op in enumerate(u.ops)
        }

    def _build_plan(self) -> None:
        end = len(self._units) + 1
        step_of_op = {op_id: self._units[k].step for op_id, (k, _) in self._position.items()}

        def last_use(v: str, first: int) -> int:
            if v in self._graph_outputs:
                return end
            return max([first, *(step_of_op[r] for r in self._readers.get(v, ()))])

        lifetimes = [Lifetime(v, self._values[v].bytes(), 0, last_use(v, 0)) for v in self.inputs]
        for u in self._units:
            lifetimes += [
                Lifetime(v, self._values[v].bytes(), u.step, last_use(v, u.step)) for v in u.outputs
            ]
        plan = plan_memory(lifetimes, DEFAULT_ALIGNMENT)
        arena = self._host_region.malloc(plan.peak_bytes, True, DEFAULT_ALIGNMENT)
        self._slots = {
            name: Tensor(self._values[name], arena, p.offset) for name, p in plan.placements.items()
        }
        dies: dict[int, list[str]] = {}
        for p in plan.placements.values():
            dies.setdefault(p.last, []).append(p.name)
        self._dies_at = dies
        self._plan = plan
        self._arena = arena

    # -- running ------------------------------------------------------------------------------

    def _check_ready(self, what: str) -> None:
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: the session is closed")
        if not self._applied:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: call apply() first")

    @contextmanager
    def _busy(self) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                "the session is already running (another thread, or a callback): fork() it "
                "for concurrent use",
            )
        try:
            yield
        finally:
            self._lock.release()

    def _check_inputs(
        self, inputs: Sequence[InputLike] | Mapping[str, InputLike]
    ) -> dict[str, InputLike]:
        return check_inputs(self.network_view.name, self.inputs, self._values, inputs)

    def _check_outputs(self, outputs: Sequence[Tensor]) -> list[Tensor]:
        return check_outputs(self.network_view.name, self.outputs, self._values, outputs)

    def _start(self, inputs: Sequence[InputLike] | Mapping[str, InputLike]) -> _Run:
        feed = self._check_inputs(inputs)
        run = _Run(inputs)
        self._times = {}
        self._trace = TraceRecorder() if self._tracing else None
        t0 = time.perf_counter()
        for name, x in feed.items():
            slot = self._slots[name]
            if isinstance(x, Tensor):
                write_array(slot, read_array(x))
            else:
                np.copyto(slot.numpy(copy=False), x, casting="no")
            run.env[name] = slot
        self._io_s = time.perf_counter() - t0
        if self._trace is not None:
            self._trace.add("inputs in", "session", t0, self._io_s, "io")
        for v in self._dies_at.get(0, ()):
            run.env.pop(v, None)
        return run

    def _tensor_for(self, value: str, run: _Run, backend: Backend | None = None) -> Tensor:
        placed = run.placed.get(value)
        if placed is not None and getattr(backend, "DIRECT_OUTPUTS", False):
            return placed  # the backend may have its engine store straight into it
        slot = self._slots.get(value)
        if slot is not None:
            return slot
        run.temps.add(value)
        return Tensor(self._values[value]).malloc_on(self._host_region)

    def _call(self, cb: Callback, which: str, piece: _Piece, tensors: list[Tensor]) -> None:
        try:
            cb(self, piece.handle, piece.backend, tensors)
        except Exception as exc:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{which} callback failed at {piece.describe()}: {exc!r}",
            ) from exc

    def _exec(self, piece: _Piece, run: _Run) -> list[tuple[str, Tensor]]:
        env = run.env
        backend = piece.backend
        if piece.merged:
            in_names, out_names = piece.inputs, piece.outputs
        else:
            in_names, out_names = piece.ops[0].inputs, piece.ops[0].outputs
        ins = [env[v] for v in in_names]
        outs = [self._tensor_for(v, run, backend) for v in out_names]
        if self._pre is not None:
            self._call(self._pre, "pre", piece, ins)
        timing = self._profile or self._log_time
        backend.time_profile = timing
        backend.tracer = self._trace
        backend.take_times()
        t0 = time.perf_counter()
        if piece.merged:
            sub = Subgraph(backend, piece.ops, piece.inputs, piece.outputs)
            backend.forward_subgraph(
                sub, dict(zip(in_names, ins, strict=True)), dict(zip(out_names, outs, strict=True))
            )
        else:
            backend.forward_op(piece.ops[0], ins, outs)
        wall = time.perf_counter() - t0
        backend.tracer = None
        memory, hardware = backend.take_times()
        if self._trace is not None:
            lane = "host" if backend.is_host else type(backend).__name__
            self._trace.add(piece.describe(), lane, t0, wall, "subgraph" if piece.merged else "op")
        produced = list(zip(out_names, outs, strict=True))
        env.update(produced)
        handle_id = piece.ops[0].op_id
        if timing:
            first = piece.ops[0]
            name = first.name if not piece.merged else f"{first.op_id}..{piece.ops[-1].op_id}"
            self._times[handle_id] = OpTime(
                tuple(op.op_id for op in piece.ops),
                "Subgraph" if piece.merged else first.op_type,
                name,
                type(backend).__name__,
                wall * 1e3,
                memory * 1e3,
                hardware * 1e3,
            )
        if self._log_io:
            _LOG.info(
                "%s: inputs %s -> outputs %s",
                piece.describe(),
                "; ".join(_summary(n, t) for n, t in zip(in_names, ins, strict=True)) or "-",
                "; ".join(_summary(n, t) for n, t in produced),
            )
        if self._log_time:
            t = self._times[handle_id]
            _LOG.info(
                "%s: wall %.3f ms (memory %.3f, hardware %.3f, other %.3f)",
                piece.describe(),
                t.wall,
                t.memory,
                t.hardware,
                t.other,
            )
        if self._dump is not None:
            self._dump_values(produced)
            if piece.merged and hasattr(backend, "intermediate_values"):
                inside = backend.intermediate_values(piece.ops)
                self._dump_values([(v, self._host_tensor(v, a)) for v, a in inside])
        if self._post is not None:
            self._call(self._post, "post", piece, outs)
        return produced

    def _host_tensor(self, value: str, array: np.ndarray) -> Tensor:
        t = Tensor(self._values[value]).malloc_on(self._host_region)
        write_array(t, array.reshape(t.shape))
        return t

    def _advance(self, run: _Run, stop: tuple[int, int], capture: Operator | None) -> list[Tensor]:
        """Run from the run's position up to and including the op at `stop`."""
        captured: list[Tensor] = []
        while (run.unit, run.offset) <= stop:
            unit = self._units[run.unit]
            last = stop[1] if run.unit == stop[0] else len(unit.ops) - 1
            if run.offset == 0 and last == len(unit.ops) - 1:
                piece = unit
            else:
                ops = unit.ops[run.offset : last + 1]
                ins, outs = self._io(ops)
                piece = _Piece(unit.backend, ops, unit.merged, ins, outs, unit.step)
            self._exec(piece, run)
            if capture is not None and capture in piece.ops:
                for v in capture.outputs:
                    src = run.env[v]
                    copy = Tensor(src.tensor_type).malloc_on(self._host_region)
                    write_array(copy, read_array(src))
                    captured.append(copy)
            if last == len(unit.ops) - 1:
                for v in self._dies_at.get(unit.step, ()):
                    run.env.pop(v, None)
                for v in run.temps:
                    run.env.pop(v, None)
                run.temps.clear()
                run.unit += 1
                run.offset = 0
                if run.unit == len(self._units):
                    run.done = True
                    break
            else:
                run.offset = last + 1
        return captured

    def _last_position(self) -> tuple[int, int]:
        return (len(self._units) - 1, len(self._units[-1].ops) - 1)

    def forward(
        self,
        inputs: Sequence[InputLike] | Mapping[str, InputLike],
        outputs: Sequence[Tensor] | None = None,
    ) -> list[Tensor]:
        """Run the whole view once and return its outputs.

        Args:
            inputs: One per input (`inputs` order, or a dict by name): Tensors (any
                region; copied in) or numpy arrays of the exact dtype and shape.
            outputs: Tensors with memory to write the outputs into (the manual's
                ``forward(inputs, outputs)``); default: new tensors on the host.

        Returns:
            The output tensors, in `outputs` order (host memory of their own: later runs
            do not change them).

        Raises:
            XrtError: 11012 before `apply` or after `close`, or while another call runs;
                11003 for a wrong input count or shape; 11010 for a wrong type or dtype;
                11013 when a backend or a callback fails (naming the op).
        """
        self._check_ready("forward")
        if outputs is not None:
            for b in self._used_backends():
                if not b.supports_output_placement:
                    raise XrtError(
                        ErrorCode.WRONG_ORDER,
                        f"forward(inputs, outputs): {type(b).__name__} does not support "
                        "caller-placed output tensors (manual 1.3.2: ZG330 only); call "
                        "forward(inputs)",
                    )
        out_tensors = None if outputs is None else self._check_outputs(outputs)
        with self._busy():
            t0 = time.perf_counter()
            self._run = None
            run = self._start(inputs)
            if out_tensors is not None:
                run.placed = dict(zip(self.outputs, out_tensors, strict=True))
            for b in self._used_backends():
                if hasattr(b, "output_paths"):
                    b.output_paths = {}
            self._advance(run, self._last_position(), None)
            self._run = run  # finished: step_to restarts from its inputs
            t1 = time.perf_counter()
            results: list[Tensor] = []
            paths: dict[str, str] = {}
            for i, name in enumerate(self.outputs):
                src = run.env[name]
                if out_tensors is not None:
                    dst = out_tensors[i]
                else:
                    dst = Tensor(src.tensor_type).malloc_on(self._host_region)
                op = self._producer.get(name)
                producer = self._bindings.get(op.op_id) if op is not None else None
                told = getattr(producer, "output_paths", {}).get(name)
                if src is dst:  # the backend filled the caller's tensor itself
                    paths[name] = told or f"copied by {type(producer).__name__}"
                else:
                    write_array(dst, read_array(src))
                    paths[name] = "copied by the session"
                results.append(dst)
            self._output_paths = paths
            t2 = time.perf_counter()
            self._io_s += t2 - t1
            self._total_s = t2 - t0
            if self._trace is not None:
                self._trace.add("outputs out", "session", t1, t2 - t1, "io")
            return results

    def step_to(
        self, op_id: int, inputs: Sequence[InputLike] | Mapping[str, InputLike] | None = None
    ) -> list[Tensor]:
        """Run up to and including op `op_id` and return copies of its outputs.

        A run continues from where the previous `step_to` stopped: the operators before
        `op_id` that already ran are not run again. A new run starts (from the first
        operator, inputs copied in again) when there is none, when the last one reached
        the end, when `inputs` are given and are not the very objects the current run
        started with, or when `op_id` has already run in the current run (going back
        restarts). `inputs` may be omitted to continue, or to restart with the inputs of
        the previous run (of `forward` too). `forward` ends any run in progress; a call
        that fails ends its run.

        Stepping to an operator inside a merged subgraph runs the subgraph's operators up
        to it as one smaller subgraph, and the rest later.

        Raises:
            XrtError: 11003 for an op id not in the view; 11010 for a non-int id; 11012
                before `apply`, or without inputs when there is nothing to continue; and as
                `forward`.
        """
        self._check_ready("step_to")
        if isinstance(op_id, bool) or not isinstance(op_id, int | np.integer):
            raise XrtError(ErrorCode.WRONG_TYPE, f"step_to takes an op id, got {op_id!r}")
        target = self._position.get(int(op_id))
        if target is None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"step_to: op {op_id} is not in {self.network_view.name} "
                f"(ops {self.network_view.op_ids[0]}..{self.network_view.op_ids[-1]})",
            )
        with self._busy():
            t0 = time.perf_counter()
            run = self._run
            restart = (
                run is None
                or run.done
                or (inputs is not None and not run.same_inputs(inputs))
                or target < (run.unit, run.offset)
            )
            if restart:
                if inputs is None:
                    if run is None:
                        raise XrtError(
                            ErrorCode.WRONG_ORDER,
                            "step_to: no run to continue; pass the inputs to start one",
                        )
                    inputs = run.inputs
                self._run = None
                run = self._start(inputs)
                self._run = run
            assert run is not None
            op = self.network_view.ops[self.network_view.op_ids.index(int(op_id))]
            try:
                captured = self._advance(run, target, op)
            except BaseException:
                self._run = None  # a failed run cannot be continued
                raise
            self._total_s = time.perf_counter() - t0
            return captured

    # -- lifetime -----------------------------------------------------------------------------

    def fork(self) -> Session:
        """A session for another thread: forked backends (sharing their prepared state),
        the same bindings, units and plan, its own arena and options.

        Raises:
            XrtError: 11012 after `close`.
        """
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, "fork: the session is closed")
        mapping: dict[int, Backend] = {}
        backends = []
        for b in self.backends:
            twin = b.fork() if b.initialized else type(b)()
            mapping[id(b)] = twin
            backends.append(twin)
        bindings = {k: mapping[id(b)] for k, b in self._bindings.items()}
        twin_session = Session(self.network_view, backends, bindings)
        for key in ("_log_io", "_log_time", "_dump", "_pre", "_post", "_profile"):
            setattr(twin_session, key, getattr(self, key))
        if self._applied:
            assert self._plan is not None
            twin_session._host_region = self._host_region
            twin_session._units = [
                _Piece(mapping[id(u.backend)], u.ops, u.merged, u.inputs, u.outputs, u.step)
                for u in self._units
            ]
            twin_session._position = dict(self._position)
            twin_session._plan = self._plan
            twin_session._dies_at = self._dies_at
            arena = self._host_region.malloc(self._plan.peak_bytes, True, DEFAULT_ALIGNMENT)
            twin_session._arena = arena
            twin_session._slots = {
                n: Tensor(t.tensor_type, arena, t.offset) for n, t in self._slots.items()
            }
            twin_session._applied = True
        return twin_session

    def close(self) -> None:
        """Deinit the backends and release the arena (idempotent). The manual's deinit."""
        if self._closed:
            return
        with self._busy():
            for b in self._used_backends():
                b.deinit()
            self._closed = True
            self._applied = False
            self._run = None
            self._slots = {}
            self._arena = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(type(b).__name__ for b in self.backends)
        state = "closed" if self._closed else "applied" if self._applied else "created"
        return f"<Session {self.network_view.name!r} [{names}] {state}>"
