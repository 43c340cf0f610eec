"""`Session`: a network bound to backends, prepared and run (the manual's ``Session``).

The session is the public face: creation and binding (`xrt.session._binding`), `apply`
(the units and arena of `xrt.session._units`), `forward` and `step_to` (run by
`xrt.session._executor`), its debugging options (a `SessionOptions` record) and the
results of the last call, `fork` and `close`. It checks its state and holds its lock around
every call; the modules named do the work.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, overload

from xrt._checks import as_bool
from xrt.backend import Backend
from xrt.device import Device, HostDevice
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemChunk
from xrt.network import Network, NetworkView
from xrt.session._binding import bind_by_priority, check_bindings
from xrt.session._executor import Executor
from xrt.session._io_checks import InputLike, check_outputs
from xrt.session._options import SessionOptions, as_callback, dump_target, time_scale
from xrt.session._run import SessionRun
from xrt.session._units import ExecutionPlan, Unit, ValueFlow, prepare
from xrt.session.placement import PlacementReport, placement_report
from xrt.session.planner import MemoryPlan
from xrt.session.profile import OpTime, format_op_type_summary, format_profile_table
from xrt.session.snapshot import load_snapshot, write_snapshot
from xrt.tensor import Tensor
from xrt.timeline import TraceEvent
from xrt.tuning import TuningRecords

__all__ = ["Callback", "Session"]

Callback = Callable[["Session", Unit, Backend, list[Tensor]], Any]
"""``callback(session, op, backend, tensors)``, as the manual's ``preFunc``/``postFunc``:
the unit (an operator, or a merged `Subgraph`), the backend running it, and its inputs
(pre) or outputs (post)."""


class Session:
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
        # Bindings and the value flow are fixed at creation; apply() gives the executor its
        # plan; the options are read by the executor at every unit.
        self._bindings: dict[int, Backend] = dict(bindings)
        self._flow = ValueFlow(graph)
        self.inputs: tuple[str, ...] = self._flow.inputs
        self.outputs: tuple[str, ...] = self._flow.outputs
        self._options = SessionOptions()
        self._executor = Executor(self, self._flow, self._bindings, self._options)
        self._applied = False
        self._closed = False
        self._lock = threading.Lock()
        self._pending: SessionRun | None = None  # a forward with block_until_done=False

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
        accepted by its constraint given those bindings. The Input and Output ops may be
        in a backend's view (the manual binds them to the host: ``view([0, 1, 2, 5, 6,
        7])``); when none holds them they go to the host backend, else the first.

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
        path: str | os.PathLike[str] | bytes,
        backends: Sequence[type[Backend] | Backend],
        devices: Sequence[Device | None] | None = None,
        *,
        verify: bool = False,
    ) -> Session:
        """A ready (applied) session from a file written by `dump_snapshot`, without
        preparing again what the snapshot holds (the manual's ``CreateWithSnapshot``).

        A snapshot's prepared artefacts (compiled NPU programs) serve only the session
        made from it. A snapshot from someone else is untrusted input: `verify` prepares
        everything again and refuses the snapshot unless its artefacts are the same (then
        they are shared like any prepared artefact); it costs what the snapshot saves.

        A program container (``xrt compile``, `xrt.session.container`) is a snapshot
        compiled without a device: it loads the same way (`xrt.aic.Qpc.create_session`
        picks its backends).

        Args:
            path: The snapshot file, or its bytes.
            backends: The backend classes (or fresh objects) the snapshot was made with, in
                any order (matched to the snapshot's by class).
            devices: One device per backend, in the order of `backends` (None: defaults).
            verify: Check the artefacts against the network before using them.

        Raises:
            XrtError: 11002 for a missing file; 11011 naming the reason for a corrupt
                snapshot or one made with other backends, another target (a device of
                another target: both named) or hardware, or (with `verify`) one whose
                artefacts differ from what this runtime prepares.
        """
        restored = load_snapshot(path, backends, devices, verify=verify)
        return cls(restored.graph, restored.backends, restored.bindings).apply()

    def dump_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the session (network, bindings, backend options and prepared artefacts)
        to one file for `create_with_snapshot` (the manual's ``dumpSnapshot``).

        Raises:
            XrtError: 11012 before `apply`; 11002 when the file cannot be written.
        """
        self._ready("dump_snapshot")
        write_snapshot(self, path)

    # -- introspection ------------------------------------------------------------------------

    def backend_bindings(self) -> dict[int, Backend]:
        """Op id -> the backend it is bound to (the manual's ``backendBindings``), the
        Input and Output ops included (the host backend, else the first)."""
        return dict(self._bindings)

    def placement(self) -> PlacementReport:
        """Where each operator runs, and for each one on a host backend why the session's
        accelerator backends refused it (`xrt.session.PlacementReport`)."""
        return placement_report(self.network_view, self.backends, self._bindings)

    def execution_units(self) -> list[Unit]:
        """What one forward runs, in order: operators, and merged `Subgraph` objects.

        Raises:
            XrtError: 11012 before `apply`.
        """
        return [u.handle for u in self._ready("execution_units").units]

    @property
    def memory_plan(self) -> MemoryPlan:
        """The arena plan of the session's tensors (11012 before `apply`)."""
        return self._ready("memory_plan").memory

    @property
    def arena(self) -> MemChunk:
        """The host chunk the planned tensors live in (11012 before `apply`)."""
        return self._ready("arena").arena

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
            self._executor.end_run()
            for b in self._used_backends():
                b.apply()
            host = next((b for b in self._used_backends() if b.is_host), None)
            region = host.device.default_mem_region() if host and host.device else None
            if not isinstance(region, HostMemRegion):
                region = HostDevice.default_region()
            self._executor.plan = prepare(self._flow, self._bindings, region)
            self._applied = True
        return self

    def _used_backends(self) -> list[Backend]:
        used = {id(b) for b in self._bindings.values()}
        return [b for b in self.backends if id(b) in used]

    def _ready(self, what: str) -> ExecutionPlan:
        """The prepared plan, once a run under way has ended (`SessionRun`: runs are in
        order); 11012 naming `what` when closed or not applied."""
        self._drain()
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: the session is closed")
        if not self._applied or self._executor.plan is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: call apply() first")
        return self._executor.plan

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

    def _drain(self) -> None:
        """Wait for the run started with ``block_until_done=False``, if any (its outcome
        is its `SessionRun`'s)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.wait()

    # -- running ------------------------------------------------------------------------------

    @overload
    def forward(
        self,
        inputs: Sequence[InputLike] | Mapping[str, InputLike],
        outputs: Sequence[Tensor] | None = None,
        *,
        block_until_done: Literal[True] = True,
    ) -> list[Tensor]: ...
    @overload
    def forward(
        self,
        inputs: Sequence[InputLike] | Mapping[str, InputLike],
        outputs: Sequence[Tensor] | None = None,
        *,
        block_until_done: Literal[False],
    ) -> SessionRun: ...
    def forward(
        self,
        inputs: Sequence[InputLike] | Mapping[str, InputLike],
        outputs: Sequence[Tensor] | None = None,
        *,
        block_until_done: bool = True,
    ) -> list[Tensor] | SessionRun:
        """Run the whole view once and return its outputs.

        Args:
            inputs: One per input (`inputs` order, or a dict by name): Tensors (any
                region; copied in) or numpy arrays of the exact dtype and shape.
            outputs: Tensors with memory to write the outputs into (the manual's
                ``forward(inputs, outputs)``); default: new tensors on the host.
            block_until_done: False: return a `SessionRun` at once, the run going on
                meanwhile (OneFlow XRT's ``Run(..., block_until_done=false)``; the inputs
                must not change until it is done); its ``result()`` gives the outputs.

        Returns:
            The output tensors, in `outputs` order (host memory of their own: later runs
            do not change them); a `SessionRun` without `block_until_done`.

        Raises:
            XrtError: 11012 before `apply` or after `close`, or while another call runs;
                11003 for a wrong input count or shape; 11010 for a wrong type or dtype;
                11013 when a backend or a callback fails (naming the op). Without
                `block_until_done`, all but the first from the run's ``result()``.
        """
        self._ready("forward")
        placed = None
        if outputs is not None:
            for b in self._used_backends():
                if not b.supports_output_placement:
                    raise XrtError(
                        ErrorCode.WRONG_ORDER,
                        f"forward(inputs, outputs): {type(b).__name__} does not support "
                        "caller-placed output tensors (manual 1.3.2: ZG330 only); call "
                        "forward(inputs)",
                    )
            placed = check_outputs(self.network_view.name, self.outputs, self._flow.values, outputs)

        def run() -> list[Tensor]:
            with self._busy():
                return self._executor.forward(inputs, placed)

        if as_bool(block_until_done, "block_until_done"):
            return run()
        self._pending = SessionRun(run, f"forward of {self.network_view.name}")
        return self._pending

    def step_to(
        self, op_id: int, inputs: Sequence[InputLike] | Mapping[str, InputLike] | None = None
    ) -> list[Tensor]:
        """Run up to and including op `op_id` and return copies of its outputs: for the
        Input op (id 0) the input tensors, for the Output op (the last id) the network's
        outputs (the manual's stepTo loop visits both).

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
        self._ready("step_to")
        checked = self._executor.check_op_id(op_id)
        with self._busy():
            return self._executor.step_to(checked, inputs)

    # -- debugging options (docs/session.md) ---------------------------------------------------

    def set_log_io(self, enabled: bool) -> None:
        """Log each unit's inputs and outputs (logger ``xrt.session``, level INFO)."""
        self._options.log_io = as_bool(enabled, "enabled")

    def set_log_time(self, enabled: bool) -> None:
        """Log each unit's times (logger ``xrt.session``, level INFO); implies timing."""
        self._options.log_time = as_bool(enabled, "enabled")

    def set_dump_outputs(
        self, enabled: bool, folder: str | os.PathLike[str] = ".", format: str = "SFB"
    ) -> None:
        """Write every unit's outputs into `folder`, one file per value.

        Files are named ``<op id>_<value name>.<format>`` (the value name with characters
        other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``; the format in
        lower case) and written with `Tensor.dump` in `format`, falling back from H to S
        and from Q to F where a tensor cannot give them (the file name shows the format
        written). In an ``H`` format, values an NPU backend computed are written as its
        engine stored them (`Backend.stored_values`: channel tiles over NCHW, padding
        included); the host's values have no hardware layout and fall back to S. The
        folder is created if needed.

        A merged subgraph (a HardOp) has one unit's outputs; its intermediates are dumped
        too where the backend can read them back (manual 1.4.3: the NPU backends compile
        their programs again so that every intermediate keeps its own bytes, and read each
        from where it lives, the ZG330's OCM included). Turning merging off
        (``auto_merge``) gives every operator its own unit instead.

        Raises:
            XrtError: 11010 for a bad format or types; 11002 when the folder cannot be made.
        """
        on = as_bool(enabled, "enabled")
        for b in self.backends:
            b.keep_intermediates = on
        self._options.dump = dump_target(on, folder, format)

    def set_pre_callback(self, callback: Callback | None) -> None:
        """Call ``callback(session, op, backend, inputs)`` before each unit (None: none)."""
        self._options.pre = as_callback(callback)

    def set_post_callback(self, callback: Callback | None) -> None:
        """Call ``callback(session, op, backend, outputs)`` after each unit (None: none)."""
        self._options.post = as_callback(callback)

    def enable_time_profile(self, enabled: bool = True) -> None:
        """Record per-unit wall, memory, hardware and other time (`time_profile_results`)."""
        self._options.profile = as_bool(enabled, "enabled")

    def enable_trace(self, enabled: bool = True) -> None:
        """Record a timeline of each run: units, and what backends add (DMA, NPU units)."""
        self._options.tracing = as_bool(enabled, "enabled")

    # -- results of the last call -------------------------------------------------------------

    def trace_events(self) -> list[TraceEvent]:
        """The timeline of the current (or last) run while tracing was enabled."""
        trace = self._executor.record.trace
        return list(trace.events) if trace is not None else []

    def write_trace(self, path: str | os.PathLike[str]) -> str:
        """Write the last run's timeline as Chrome trace JSON (opens in ui.perfetto.dev);
        returns what the file holds (`xrt.timeline.Timeline.write`).

        Raises:
            XrtError: 11012 when no traced run happened; 11002 when the file cannot be
                written.
        """
        trace = self._executor.record.trace
        if trace is None:
            raise XrtError(ErrorCode.WRONG_ORDER, "no traced run: enable_trace(True), then forward")
        return trace.write(path)

    def time_profile_results(self) -> dict[int, OpTime]:
        """Op id -> `OpTime` for each unit run by the current (or last) run, in order.

        Filled while profiling is enabled (or `set_log_time` is on); a merged subgraph is
        filed under its first op id.
        """
        return dict(self._executor.record.times)

    def total_time(self, unit: str = "s") -> float:
        """Wall time of the last `forward` or `step_to` call (always measured).

        Args:
            unit: ``"s"`` (default), ``"ms"`` or ``"us"``: the manual's
                ``totalTime<seconds>()`` / ``<milliseconds>`` / ``<microseconds>``.
        """
        return self._executor.record.total_s * time_scale(unit)

    def profile_table(self) -> str:
        """`time_profile_results` as a text table (milliseconds), with totals."""
        record = self._executor.record
        graph = self.network_view
        full = graph.op_ids == graph.network.op_ids
        title = f"network {graph.network.name!r}" if full else f"view {graph.name!r}"
        return format_profile_table(
            record.times, record.total_s, record.io_s, f"time profile of {title}"
        )

    def profile_summary(self) -> str:
        """`time_profile_results` folded per op type: count, total ms, share, mean ms
        (InfiniTensor's per-op-type profile)."""
        return format_op_type_summary(
            self._executor.record.times, "time per op type (units; merged programs: Subgraph)"
        )

    def set_tuning(self, records: TuningRecords | None, tune: bool = False) -> None:
        """Use tuning `records` (`xrt.tuning`) in every backend (`Backend.tuning`: the NPU
        backends' tilings, the host's kernel variants; a backend without variants ignores
        them); with `tune`, what has no trusted record is measured and recorded at `apply`.
        Call before `apply`; save the records after it (``records.save()``). None turns
        tuning off.
        """
        tune = as_bool(tune, "tune")
        for b in self.backends:
            b.tuning = records
            b.tune = tune

    def output_paths(self) -> dict[str, str]:
        """How each output of the last `forward` reached its tensor: ``"written by the
        engine at ADDR (REGION)"`` (a ZG330 program stored it into the caller-placed tensor,
        manual 1.3.2), ``"copied: WHY"`` (the backend copied it in, and why it could not
        store it directly) or ``"copied by the session"``."""
        return dict(self._executor.record.output_paths)

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
            copy = b.fork() if b.initialized else type(b)()
            mapping[id(b)] = copy
            backends.append(copy)
        bindings = {k: mapping[id(b)] for k, b in self._bindings.items()}
        twin = Session(self.network_view, backends, bindings)
        # The options carry over, tracing aside (a twin records a timeline when asked to);
        # its executor is made again to read the copied record.
        twin._options = dataclasses.replace(self._options, tracing=False)
        twin._executor = Executor(twin, twin._flow, twin._bindings, twin._options)
        if self._applied:
            twin._executor.plan = self._ready("fork").forked(mapping)
            twin._applied = True
        return twin

    def close(self) -> None:
        """Deinit the backends and release the arena (idempotent). The manual's deinit."""
        self._drain()
        if self._closed:
            return
        with self._busy():
            for b in self._used_backends():
                b.deinit()
            self._closed = True
            self._applied = False
            self._executor.end_run()
            self._executor.plan = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(type(b).__name__ for b in self.backends)
        state = "closed" if self._closed else "applied" if self._applied else "created"
        return f"<Session {self.network_view.name!r} [{names}] {state}>"
