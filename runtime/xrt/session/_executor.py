"""Running a prepared session: `forward`, `step_to`, and what each backend call records.

The executor walks an `ExecutionPlan` unit by unit: it copies the inputs into their arena
slots, hands each unit its input tensors and a tensor for each output (its slot, a tensor
the caller placed, or a temporary; a value whose shape is known only at run time gets a
tensor of the shape `FedResolver` resolves for it at this forward), calls the backend, and
around the call does what the session's options ask (callbacks, logs, time profile, trace,
dumps). `step_to` stops inside the walk and continues from there later. The session checks
its state and holds its lock around every call into the executor.

The boundary ops (`xrt.ops.boundary`) run as units too, computing nothing: the backend
is handed what they yield (the feeds already in their slots, the outputs) and passes it
through; callbacks, logs and dumps see their inputs and outputs as of any operator (the
Input op's outputs are the feeds, the Output op has none); stepping to either returns
what it yields.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from xrt.backend import Backend, Subgraph, read_array, write_array
from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import FedResolver, Operator
from xrt.ops import is_boundary, passed_values
from xrt.session._io_checks import InputLike, check_inputs
from xrt.session._options import DumpTarget, SessionOptions, UnitCallback
from xrt.session._units import BackendCall, ExecutionPlan, Position, ValueFlow
from xrt.session.profile import OpTime
from xrt.tensor import Tensor
from xrt.timeline import TraceRecorder

__all__ = ["Executor", "RunRecord"]

_LOG = logging.getLogger("xrt.session")

Inputs = Sequence[InputLike] | Mapping[str, InputLike]


@dataclass(eq=False)
class _Run:
    """Progress of one run through the network (forward, or a series of step_to calls)."""

    inputs: Inputs
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


@dataclass(eq=False)
class RunRecord:
    """What the current (or last) call measured, for the session's result methods.

    Attributes:
        times: Op id -> `OpTime` of each unit run, in order (while timing).
        trace: The timeline (while tracing), else None.
        io_s: Seconds spent copying inputs in and outputs out.
        total_s: Wall time of the last `forward` or `step_to` call.
        output_paths: Output name -> how it reached its tensor (last `forward`).
    """

    times: dict[int, OpTime] = field(default_factory=dict)
    trace: TraceRecorder | None = None
    io_s: float = 0.0
    total_s: float = 0.0
    output_paths: dict[str, str] = field(default_factory=dict)


def _summary(name: str, t: Tensor) -> str:
    arr = read_array(t)
    head = f"{name}:{t.dtype.manual_name}{list(t.shape)}"
    if arr.size == 0:
        return head + " (empty)"
    if arr.dtype == np.bool_:
        return f"{head} true={int(arr.sum())}"
    a = arr.astype(np.float64)
    return f"{head} min={a.min():.6g} max={a.max():.6g} mean={a.mean():.6g}"


class Executor:
    """Runs one session's `ExecutionPlan` (set by `Session.apply`) with its options.

    Args:
        session: What callbacks receive as their session (the `Session` running it).
        flow: The values of the session's view.
        bindings: Op id -> backend.
        options: The session's options (read at every unit, so changes apply at once).

    Attributes:
        plan: What `Session.apply` prepared (None before, and after `Session.close`).
        record: What the current (or last) call measured.
    """

    def __init__(
        self,
        session: object,
        flow: ValueFlow,
        bindings: Mapping[int, Backend],
        options: SessionOptions,
    ) -> None:
        self._session = session
        self._flow = flow
        self._bindings = bindings
        self._options = options
        self.plan: ExecutionPlan | None = None
        self._run: _Run | None = None
        self.record = RunRecord()
        network = flow.view.network
        self._resolver = (
            FedResolver(network.values, network.params, network.ops) if flow.resolve else None
        )

    def end_run(self) -> None:
        """Forget the run in progress: the next `step_to` starts a new one."""
        self._run = None

    def _plan(self) -> ExecutionPlan:
        assert self.plan is not None  # the session checks that it was applied
        return self.plan

    # -- the two calls ----------------------------------------------------------------------

    def forward(self, inputs: Inputs, placed: list[Tensor] | None) -> list[Tensor]:
        """`Session.forward`: run every unit, return the outputs (into `placed` if given)."""
        plan = self._plan()
        t0 = time.perf_counter()
        self._run = None
        run = self._start(inputs)
        if placed is not None:
            run.placed = dict(zip(self._flow.outputs, placed, strict=True))
        for b in {id(b): b for b in self._bindings.values()}.values():
            b.output_paths = {}
        self._advance(run, plan.end, None)
        self._run = run  # finished: step_to restarts from its inputs
        t1 = time.perf_counter()
        results: list[Tensor] = []
        paths: dict[str, str] = {}
        for i, name in enumerate(self._flow.outputs):
            src = run.env[name]
            if placed is not None:
                dst = placed[i]
            else:
                dst = Tensor(src.tensor_type).malloc_on(plan.host_region)
            op = self._flow.producer.get(name)
            producer = self._bindings.get(op.op_id) if op is not None else None
            told = producer.output_paths.get(name) if producer is not None else None
            if src is dst:  # the backend filled the caller's tensor itself
                paths[name] = told or f"copied by {type(producer).__name__}"
            else:
                write_array(dst, read_array(src))
                paths[name] = "copied by the session"
            results.append(dst)
        record = self.record
        record.output_paths = paths
        t2 = time.perf_counter()
        record.io_s += t2 - t1
        record.total_s = t2 - t0
        if record.trace is not None:
            record.trace.add("outputs out", "session", t1, t2 - t1, "io")
        return results

    def check_op_id(self, op_id: object) -> int:
        """`op_id` as an int, when it is the id of an op of the view.

        Raises:
            XrtError: 11010 for a non-int id; 11003 for an op not in the view.
        """
        if isinstance(op_id, bool) or not isinstance(op_id, int | np.integer):
            raise XrtError(ErrorCode.WRONG_TYPE, f"step_to takes an op id, got {op_id!r}")
        if int(op_id) not in self._plan().position:
            view = self._flow.view
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"step_to: op {op_id} is not in {view.name} "
                f"(ops {view.op_ids[0]}..{view.op_ids[-1]})",
            )
        return int(op_id)

    def step_to(self, op_id: int, inputs: Inputs | None) -> list[Tensor]:
        """`Session.step_to` for an id `check_op_id` accepted: continue the run, or restart."""
        t0 = time.perf_counter()
        target = self._plan().position[op_id]
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
        view = self._flow.view
        op = view.ops[view.op_ids.index(op_id)]
        try:
            captured = self._advance(run, target, op)
        except BaseException:
            self._run = None  # a failed run cannot be continued
            raise
        self.record.total_s = time.perf_counter() - t0
        return captured

    # -- the walk ---------------------------------------------------------------------------

    def _start(self, inputs: Inputs) -> _Run:
        flow, plan, record = self._flow, self._plan(), self.record
        feed = check_inputs(flow.view.name, flow.inputs, flow.values, inputs)
        run = _Run(inputs)
        record.times = {}
        record.trace = TraceRecorder() if self._options.tracing else None
        t0 = time.perf_counter()
        for name, x in feed.items():
            slot = plan.slots[name]
            if isinstance(x, Tensor):
                write_array(slot, read_array(x))
            else:
                np.copyto(slot.numpy(copy=False), x, casting="no")
            run.env[name] = slot
        record.io_s = time.perf_counter() - t0
        if record.trace is not None:
            record.trace.add("inputs in", "session", t0, record.io_s, "io")
        for v in plan.dies_at.get(0, ()):
            run.env.pop(v, None)
        return run

    def _advance(self, run: _Run, stop: Position, capture: Operator | None) -> list[Tensor]:
        """Run from the run's position up to and including the op at `stop`; return copies
        of `capture`'s outputs."""
        plan = self._plan()
        captured: list[Tensor] = []
        while (run.unit, run.offset) <= stop:
            unit = plan.units[run.unit]
            last = stop[1] if run.unit == stop[0] else len(unit.ops) - 1
            if run.offset == 0 and last == len(unit.ops) - 1:
                call = unit
            else:
                ops = unit.ops[run.offset : last + 1]
                ins, outs = self._flow.boundary(ops)
                call = BackendCall(unit.backend, ops, unit.merged, ins, outs, unit.step)
            self._exec(call, run)
            if capture is not None and capture in call.ops:
                yields = passed_values(capture) if is_boundary(capture) else capture.outputs
                for v in yields:
                    src = run.env[v]
                    copy = Tensor(src.tensor_type).malloc_on(plan.host_region)
                    write_array(copy, read_array(src))
                    captured.append(copy)
            if last == len(unit.ops) - 1:
                for v in plan.dies_at.get(unit.step, ()):
                    run.env.pop(v, None)
                for v in run.temps:
                    run.env.pop(v, None)
                run.temps.clear()
                run.unit += 1
                run.offset = 0
                if run.unit == len(plan.units):
                    run.done = True
                    break
            else:
                run.offset = last + 1
        return captured

    def _tensor_for(
        self, value: str, run: _Run, backend: Backend, resolved: TensorType | None = None
    ) -> Tensor:
        if value in self._flow.dynamic:
            if resolved is None:
                raise XrtError(
                    ErrorCode.BACKEND_INTERNAL,
                    f"value {value!r} has a shape known only at run time and no resolution",
                )
            # Allocated per forward at the resolved shape; dropped after its last reader.
            return Tensor(resolved).malloc_on(self._plan().host_region)
        placed = run.placed.get(value)
        if placed is not None and backend.DIRECT_OUTPUTS:
            return placed  # the backend may have its engine store straight into it
        plan = self._plan()
        slot = plan.slots.get(value)
        if slot is not None:
            return slot
        run.temps.add(value)
        return Tensor(self._flow.values[value]).malloc_on(plan.host_region)

    def _exec(self, call: BackendCall, run: _Run) -> None:
        """Run one backend call with what the options ask around it."""
        if call.merged:
            in_names, out_names = call.inputs, call.outputs
        else:
            in_names, out_names = call.ops[0].inputs, call.ops[0].outputs
        ins = [run.env[v] for v in in_names]
        passed: list[Tensor] | None = None
        if is_boundary(call.ops[0]):  # its values are in env: the feeds, or the outputs
            passed = [run.env[v] for v in passed_values(call.ops[0])]
            outs = [run.env[v] for v in out_names]
        elif (
            self._resolver is not None
            and not call.merged
            and call.ops[0].op_id in self._flow.resolve
        ):  # run-time parameters: outputs at the shapes resolved for this forward
            types = self._resolve(call.ops[0], run)
            outs = [
                self._tensor_for(v, run, call.backend, t)
                for v, t in zip(out_names, types, strict=True)
            ]
        else:
            outs = [self._tensor_for(v, run, call.backend) for v in out_names]
        options = self._options
        if options.pre is not None:
            self._callback(options.pre, "pre", call, ins)
        if passed is not None:  # handed what it yields, as inputs and as outputs
            self._call_backend(call, in_names, passed, out_names, passed)
        else:
            self._call_backend(call, in_names, ins, out_names, outs)
        produced = list(zip(out_names, outs, strict=True))
        run.env.update(produced)
        if options.log_io:
            _LOG.info(
                "%s: inputs %s -> outputs %s",
                call.describe(),
                "; ".join(_summary(n, t) for n, t in zip(in_names, ins, strict=True)) or "-",
                "; ".join(_summary(n, t) for n, t in produced) or "-",
            )
        if options.log_time:
            t = self.record.times[call.ops[0].op_id]
            _LOG.info(
                "%s: wall %.3f ms (memory %.3f, hardware %.3f, other %.3f)",
                call.describe(),
                t.wall,
                t.memory,
                t.hardware,
                t.other,
            )
        if options.dump is not None:
            self._dump(options.dump, call, produced)
        if options.post is not None:
            self._callback(options.post, "post", call, outs)

    def _resolve(self, op: Operator, run: _Run) -> list[TensorType]:
        """The output types of `op` at this forward (run-time parameters, dynamic shapes)."""
        assert self._resolver is not None
        data = [run.env[v].tensor_type for v in op.data_inputs]
        arrays = {role: read_array(run.env[v]) for role, v in op.fed.items()}
        return self._resolver.resolve(op, data, arrays)[1]

    def _call_backend(
        self,
        call: BackendCall,
        in_names: Sequence[str],
        ins: list[Tensor],
        out_names: Sequence[str],
        outs: list[Tensor],
    ) -> None:
        """The backend call itself, timed and traced as the options ask."""
        backend, record = call.backend, self.record
        timing = self._options.timing
        backend.time_profile = timing
        backend.tracer = record.trace
        backend.take_times()
        t0 = time.perf_counter()
        if call.merged:
            sub = Subgraph(backend, call.ops, call.inputs, call.outputs)
            backend.forward_subgraph(
                sub, dict(zip(in_names, ins, strict=True)), dict(zip(out_names, outs, strict=True))
            )
        else:
            backend.forward_op(call.ops[0], ins, outs)
        wall = time.perf_counter() - t0
        backend.tracer = None
        memory, hardware = backend.take_times()
        if record.trace is not None:
            lane = "host" if backend.is_host else type(backend).__name__
            record.trace.add(call.describe(), lane, t0, wall, "subgraph" if call.merged else "op")
        if timing:
            first = call.ops[0]
            name = first.name if not call.merged else f"{first.op_id}..{call.ops[-1].op_id}"
            record.times[first.op_id] = OpTime(
                tuple(op.op_id for op in call.ops),
                "Subgraph" if call.merged else first.op_type,
                name,
                type(backend).__name__,
                wall * 1e3,
                memory * 1e3,
                hardware * 1e3,
            )

    def _dump(
        self, dump: DumpTarget, call: BackendCall, produced: list[tuple[str, Tensor]]
    ) -> None:
        stored = dict(call.backend.stored_values(call.ops)) if dump.hardware else {}
        dump.write(produced, self._flow.producer, stored)
        if call.merged:
            inside = call.backend.intermediate_values(call.ops)
            dump.write(
                [(v, self._host_tensor(v, a)) for v, a in inside], self._flow.producer, stored
            )

    def _host_tensor(self, value: str, array: np.ndarray) -> Tensor:
        t = Tensor(self._flow.values[value]).malloc_on(self._plan().host_region)
        write_array(t, array.reshape(t.shape))
        return t

    def _callback(
        self, callback: UnitCallback, which: str, call: BackendCall, tensors: list[Tensor]
    ) -> None:
        try:
            callback(self._session, call.handle, call.backend, tensors)
        except Exception as exc:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{which} callback failed at {call.describe()}: {exc!r}",
            ) from exc
