"""The `Backend` base class, its life cycle, and `Subgraph`.

A backend is one kind of compute resource (the host CPU, an NPU). A backend *object* is
bound to a network view and a device (`Backend.init`), prepares its operators
(`Backend.apply`) and runs them (`Backend.forward_op`, `Backend.forward_subgraph`). What a
backend *class* can run is its operator registry (`xrt.backend._registry.OpRegistry`, which
`Backend` derives from); backend classes by name are in `xrt.backend._names`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

import numpy as np

from xrt.backend._arrays import write_array
from xrt.backend._registry import OpRegistry
from xrt.backend._views import select_ops
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView, Operator, as_view
from xrt.ops import is_boundary, passed_values
from xrt.tensor import Tensor
from xrt.timeline import TraceRecorder
from xrt.tuning import TuningRecords

__all__ = ["Backend", "Subgraph"]

B = TypeVar("B", bound="Backend")


@dataclass(frozen=True, eq=False)
class Subgraph:
    """Consecutive operators bound to one backend, run by one `Backend.forward_subgraph` call.

    The session makes one for each run of consecutive operators bound to the same non-host
    backend whose `Backend.auto_merge` is on (the delegate pattern: the backend replaces the
    run with one kernel, e.g. one NPU program). Values produced and consumed only inside
    are the backend's business; only `inputs` and `outputs` cross the boundary.

    Attributes:
        backend: The backend running it.
        ops: The operators, in network order.
        inputs: Values the operators read but do not produce, in order of first use.
        outputs: Values produced inside that something outside reads, that are outputs of
            the session's graph, or that nothing reads; in production order.
    """

    backend: Backend
    ops: tuple[Operator, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def op_ids(self) -> list[int]:
        """Ids of the operators."""
        return [op.op_id for op in self.ops]

    @property
    def op_id(self) -> int:
        """Id of the first operator (profiles and dumps file a subgraph under it)."""
        return self.ops[0].op_id

    @property
    def op_type(self) -> str:
        """``"Subgraph"``: logs and profiles use it where an operator would show its type."""
        return "Subgraph"

    @property
    def name(self) -> str:
        """``"3..4"``: the range of op ids."""
        return f"{self.ops[0].op_id}..{self.ops[-1].op_id}"

    def describe(self) -> str:
        """``"subgraph [3, 4] (HardOp, Cast) on TinyNpuBackend"``; an NPU backend's runs
        read ``"HardOp (Merged) [3, 4] (QConv2d, Relu) on BuyiBackend"`` (the manual's
        annotation of merged operators in logs)."""
        types = ", ".join(op.op_type for op in self.ops)
        label = self.backend.subgraph_label(self.ops)
        return f"{label} {self.op_ids} ({types}) on {type(self.backend).__name__}"


class Backend(OpRegistry["Backend"]):
    """A compute resource that runs operators (the manual's ``Backend``).

    Life cycle (the manual's): ``Backend()`` (``Init``) makes an unbound backend;
    `init` binds it to a network view and a device; `apply` prepares every bound operator
    (runs the init functions); `forward_op` / `forward_subgraph` run operators; `fork`
    makes another object sharing the prepared state, for another thread; `view` one bound
    to a subset of the operators; `deinit` releases everything. ``create(view, device)``
    is ``Backend()`` + `init` (the manual's ``Backend::Create<T>(view, device)``).

    Subclasses set `is_host` (False for accelerators), may override the hooks `_init`,
    `_apply`, `_deinit`, `_fork`, `default_device`, `check_device`, `partition` and
    `forward_subgraph`, and register operators with `op` / `add_op`. Registries are per
    class: a subclass starts with its parent's entries and may add or override entries
    without changing the parent.

    Capabilities. What the session, snapshots and tools may ask of any backend is declared
    here with a default that suits a backend without the capability, and overridden by the
    backends that have it: the class attributes `is_host`, `merged_label`,
    `supports_output_placement`, `TARGET`, `DIRECT_OUTPUTS` and `runtime_params`, the
    attributes `tuning`, `tune`, `keep_intermediates` and `output_paths`, and the methods
    `intermediate_values`, `stored_values` and `unsupported`. Nobody probes a backend for
    an attribute.

    Attributes:
        is_host: True for backends computing on the host CPU: their operators are never
            grouped into subgraphs.
        auto_merge: Group consecutive operators bound to this (non-host) backend into one
            `Subgraph` (default True). Turn off to see every operator's outputs (dumps,
            callbacks, step_to into the run).
        time_profile: Set by the session while profiling: forward functions then report
            memory and hardware time with `add_time`.
        tuning: Tuning records (`xrt.tuning.TuningRecords`) choosing this backend's
            kernels: the NPU backends' tilings, the host's kernel variants (None: none).
            `Session.set_tuning` sets it on every backend; a backend whose kernels have no
            variants ignores it.
        tune: With `tuning`, measure at `apply` what has no trusted record, and record it.
        keep_intermediates: Set by the session while it dumps outputs: a backend that runs
            merged subgraphs as one program then keeps every intermediate readable for
            `intermediate_values` (the others ignore it).
        output_paths: For each output of a merged run that the backend itself stored into
            its tensor, how it got there (``"written by the engine at ADDR (REGION)"``,
            ``"copied: WHY"``); the session empties it before each forward and reports it
            (`Session.output_paths`). Backends that only fill the tensors they are given
            leave it empty.
        not_supported: Why a session left this backend out (`unsupported`), else None.
    """

    is_host: ClassVar[bool] = False
    merged_label: ClassVar[str] = "subgraph"
    """How logs name a merged run (`Subgraph.describe`)."""
    supports_output_placement: ClassVar[bool] = True
    """False when ``Session.forward(inputs, outputs)`` must be refused (Buyi, per the manual)."""
    TARGET: ClassVar[str] = ""
    """The NPU target the backend compiles for (``"buyi"``, ``"zg330"``); empty for a
    backend of no particular target (the host). Snapshots and containers name it."""
    DIRECT_OUTPUTS: ClassVar[bool] = False
    """True when the backend may store outputs straight into tensors the caller placed
    (``Session.forward(inputs, outputs)``, ZG330): the session then hands it those tensors
    instead of its own, and the backend decides per tensor (`output_paths` says how)."""

    def __init__(self) -> None:
        self.network_view: NetworkView | None = None
        self.device: Device | None = None
        self.auto_merge: bool = True
        self.time_profile: bool = False
        self.tracer: TraceRecorder | None = None
        self.tuning: TuningRecords | None = None
        self.tune = False
        self.keep_intermediates = False
        self.output_paths: dict[str, str] = {}
        self.not_supported: str | None = None
        self._states: Mapping[int, Any] = MappingProxyType({})
        self._applied = False
        self._memory_s = 0.0
        self._hardware_s = 0.0

    def is_type(self, cls: type[Backend]) -> bool:
        """``isinstance(self, cls)`` (the manual's ``is_type``)."""
        return isinstance(self, cls)

    # -- life cycle -------------------------------------------------------------------------

    @classmethod
    def create(
        cls: type[B],
        network_view: Network | NetworkView | None = None,
        device: Device | None = None,
    ) -> B:
        """A new backend bound to `network_view` and `device` (the manual's
        ``Backend::Create<T>(view, device)``); without a view, a backend bound to nothing
        yet, ``T()`` (the manual's ``T::Init()``).

        Raises:
            XrtError: as `init`; 11010 for a device given without a view.
        """
        backend = cls()
        if network_view is None:
            if device is not None:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"{cls.__name__}.create: device {device!r} given without a network view",
                )
            return backend
        backend.init(network_view, device)
        return backend

    @property
    def initialized(self) -> bool:
        """True between `init` and `deinit`."""
        return self.network_view is not None

    @property
    def applied(self) -> bool:
        """True once `apply` has prepared the operators (until `deinit`)."""
        return self._applied

    def default_device(self) -> Device:
        """The device `init` uses when given None; the base class has none (11010)."""
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"{type(self).__name__} needs a device: pass one to init"
        )

    def check_device(self, device: Device) -> None:
        """Raise XrtError 11010 when this backend cannot run on `device` (hook)."""

    def device_refusal(self, device: Device) -> str | None:
        """Why `check_device` refuses `device`, None when it accepts it (sessions pair
        devices with backends by it)."""
        try:
            self.check_device(device)
        except XrtError as exc:
            return exc.message
        return None

    def unsupported(self, device: Device) -> str | None:
        """Why this backend cannot run on `device` although it takes devices of its kind
        (MindSpore Lite's delegate ``Init`` answering ``RET_NOT_SUPPORT``: the hardware is
        not what it runs on); None when it can (the default). A session binding by
        priority then leaves this backend out and its operators go to the backends after
        it, with a warning saying why; `init` refuses such a device (11010)."""
        return None

    def init(self, network_view: Network | NetworkView, device: Device | None = None) -> Backend:
        """Bind the backend to the operators of `network_view` and to `device`.

        Args:
            network_view: The operators this backend runs (a `Network` means all of them).
            device: Where it runs; None: `default_device`.

        Returns:
            The backend.

        Raises:
            XrtError: 11012 when already initialised or the device is closed; 11010 for
                wrong types, an unsuitable device, or an op type the registry lacks.
        """
        if self.initialized:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"{type(self).__name__} is already initialised (deinit first, or make another)",
            )
        view = as_view(network_view, f"{type(self).__name__}.init")
        if device is None:
            device = self.default_device()
        if not isinstance(device, Device):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__}.init needs a Device, got {type(device).__name__}",
            )
        if device.closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{type(self).__name__}: {device!r} is closed")
        self.check_device(device)
        why = self.unsupported(device)
        if why is not None:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"{type(self).__name__} cannot run on {device!r}: {why}"
            )
        missing = [op.describe() for op in view.ops if not self.supports(op.op_type)]
        if missing:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__} has no kernel for {', '.join(missing[:5])}",
            )
        self.network_view = view
        self.device = device
        self._init()
        return self

    def _init(self) -> None:
        """Hook: after `init` has bound the view and the device."""

    def _check_initialized(self, what: str) -> NetworkView:
        if self.network_view is None:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"{type(self).__name__}.{what}: init the backend first"
            )
        return self.network_view

    def apply(self) -> None:
        """Prepare every bound operator: run its init function (e.g. place constants).

        Calling it again prepares again (after changing options).

        Raises:
            XrtError: 11012 before `init`; whatever an init function raises (an init
                function failing with another exception becomes 11013 naming the op).
        """
        view = self._check_initialized("apply")
        states: dict[int, Any] = {}
        for op in view.ops:
            entry = self.lookup(op.op_type)
            assert entry is not None  # init checked the registry
            if entry.init is None:
                states[op.op_id] = None
                continue
            try:
                states[op.op_id] = entry.init(op, self)
            except XrtError:
                raise
            except Exception as exc:
                raise XrtError(
                    ErrorCode.BACKEND_INTERNAL,
                    f"{type(self).__name__}: init of {op.describe()} failed: {exc!r}",
                ) from exc
        self._states = MappingProxyType(states)
        self._apply()
        self._applied = True

    def _apply(self) -> None:
        """Hook: after the operators' init functions ran."""

    def deinit(self) -> None:
        """Release the backend: unbind view and device, drop prepared state (idempotent)."""
        if self.network_view is None:
            return
        self._deinit()
        self.network_view = None
        self.device = None
        self._states = MappingProxyType({})
        self._applied = False

    def _deinit(self) -> None:
        """Hook: before `deinit` drops the view, device and state."""

    def fork(self) -> Backend:
        """Another backend object for another thread, sharing the prepared state.

        The fork has the same view, device, options and (read-only) operator states; its
        time accounting is its own. Forward functions must not mutate operator states.

        Raises:
            XrtError: 11012 before `init`.
        """
        self._check_initialized("fork")
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._memory_s = 0.0
        twin._hardware_s = 0.0
        twin._fork_from(self)
        return twin

    def _fork_from(self, parent: Backend) -> None:
        """Hook: called on a fork (`self`) right after it copied `parent`'s attributes."""

    def view(self, ids: int | Sequence[int], end: int | None = None) -> Backend:
        """A fork bound to a subset of this backend's operators (the manual's ``view``).

        ``view([3, 5])`` takes exactly these ops; ``view(start, end)`` the ops with
        ``start <= id < end``; ``view(start)`` those from `start` on.

        Raises:
            XrtError: 11012 before `init`; 11003 for ids that are not this backend's or an
                empty selection; 11010 for wrong types.
        """
        own = self._check_initialized("view")
        chosen = select_ops(type(self).__name__, own.op_ids, ids, end)
        twin = self.fork()
        twin.network_view = own.network.view(chosen)
        keep = set(chosen)
        twin._states = MappingProxyType({k: v for k, v in self._states.items() if k in keep})
        return twin

    # -- running ------------------------------------------------------------------------------

    def op_state(self, op_id: int) -> Any:
        """The state the init function returned for op `op_id` (None without one).

        Raises:
            XrtError: 11012 before `apply`.
        """
        if not self._applied:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{type(self).__name__}: apply() first")
        return self._states.get(op_id)

    def partition(self, ops: Sequence[Operator]) -> list[tuple[Operator, ...]]:
        """Cut a run of consecutive operators bound here into subgraphs (hook).

        Called by the session for non-host backends with `auto_merge` on. The default
        keeps the whole run together; an NPU backend may cut where its compiler cannot
        fuse. The result must list every op once, in order.
        """
        return [tuple(ops)]

    def forward_op(self, op: Operator, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        """Run one operator: call its forward function and store what it returns.

        The Input and Output ops compute nothing (`BOUNDARY_ENTRY`): hand them the tensors
        they yield (the feeds, the network's outputs) as `inputs` and as `outputs`.

        Raises:
            XrtError: 11012 before `apply`; 11013 naming the op when the forward function
                fails or returns the wrong number, types or shapes of results.
        """
        if not self._applied:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{type(self).__name__}: apply() before forward")
        entry = self.lookup(op.op_type)
        if entry is None:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL, f"{type(self).__name__} cannot run {op.describe()}"
            )
        try:
            result = entry.forward(op, inputs, outputs, self)
        except XrtError:
            raise
        except Exception as exc:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{type(self).__name__}: forward of {op.describe()} failed: {exc!r}",
            ) from exc
        if result is not None:
            self.store_results(op, result, outputs)

    def store_results(
        self, op: Operator, results: Sequence[np.ndarray | Tensor], outputs: list[Tensor]
    ) -> None:
        """Check `results` against `outputs`' types and copy them in (memory time).

        Raises:
            XrtError: 11013 naming the op for a wrong count, dtype or shape.
        """
        t0 = time.perf_counter() if self.time_profile else 0.0
        if not isinstance(results, list | tuple) or len(results) != len(outputs):
            n = len(results) if isinstance(results, list | tuple) else type(results).__name__
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL,
                f"{type(self).__name__}: {op.describe()} returned {n} results for "
                f"{len(outputs)} outputs",
            )
        for name, res, out in zip(op.outputs, results, outputs, strict=True):
            arr = res.numpy() if isinstance(res, Tensor) else res
            if isinstance(arr, np.generic):  # numpy turns 0-d results into scalars
                arr = np.asarray(arr)
            want = out.tensor_type
            if (
                not isinstance(arr, np.ndarray)
                or arr.dtype != want.dtype.numpy
                or arr.shape != want.shape
            ):
                got = (
                    f"{arr.dtype}{list(arr.shape)}"
                    if isinstance(arr, np.ndarray)
                    else type(arr).__name__
                )
                raise XrtError(
                    ErrorCode.BACKEND_INTERNAL,
                    f"{type(self).__name__}: {op.describe()} produced {got} for {name!r}, "
                    f"declared {want}",
                )
            write_array(out, arr)
        if self.time_profile:
            self._memory_s += time.perf_counter() - t0

    def forward_subgraph(
        self, subgraph: Subgraph, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor]
    ) -> None:
        """Run a `Subgraph` as one unit: read `inputs`, fill `outputs` (by value name).

        This is the hook NPU backends override to run one compiled program. The default
        runs the operators one by one with `forward_op`, keeping values that stay inside
        in temporary tensors on the device's default memory region.

        Raises:
            XrtError: as `forward_op`.
        """
        device = self.device
        if device is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{type(self).__name__}: init first")
        graph = self.network_view
        assert graph is not None
        env: dict[str, Tensor] = dict(inputs)
        for op in subgraph.ops:
            if is_boundary(op):  # Input, Output: what they yield is in env already
                passed = [env[v] for v in passed_values(op)]
                self.forward_op(op, passed, passed)
                continue
            ins = [env[v] for v in op.inputs]
            outs = []
            for v in op.outputs:
                t = outputs.get(v)
                if t is None:
                    t = Tensor(graph.values[v]).malloc_on(device.default_mem_region())
                outs.append(t)
            self.forward_op(op, ins, outs)
            env.update(zip(op.outputs, outs, strict=True))

    def subgraph_label(self, ops: Sequence[Operator]) -> str:
        """How logs name a merged run of `ops` (`Subgraph.describe`): `merged_label`."""
        return self.merged_label

    def intermediate_values(self, ops: Sequence[Operator]) -> list[tuple[str, np.ndarray]]:
        """The values produced and consumed inside the last run of the merged subgraph of
        `ops` that this backend can still read back, as (value name, logical array), for
        the session's dumps (manual 1.4.3). The default has none: a backend running a
        subgraph op by op keeps its intermediates in temporary tensors it drops."""
        return []

    def stored_values(self, ops: Sequence[Operator]) -> list[tuple[str, Tensor]]:
        """The values of the last run of `ops` as the hardware stores them (tensors with
        their `Tensor.hw_layout`), read back from where they live: what dumps in an ``H``
        format write (manual 1.4.3). The default has none: values in their logical layout."""
        return []

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_options(self) -> dict[str, Any]:
        """JSON-able options a session snapshot records (subclasses add theirs).

        A session made from the snapshot runs with these, whatever the backend object it
        is given says (the manual: merging and memory options come from the snapshot).
        """
        return {"auto_merge": self.auto_merge}

    def snapshot_state(self) -> dict[str, bytes]:
        """Prepared artefacts a snapshot stores so that a session made from it does not
        prepare them again (an NPU backend: its compiled programs). Called after `apply`.
        """
        return {}

    def restore_snapshot(
        self, options: Mapping[str, Any], state: Mapping[str, bytes], *, verify: bool = False
    ) -> None:
        """Take back what `snapshot_options` and `snapshot_state` gave (after `init`,
        before `apply`). Artefacts stay private to this backend's session unless `verify`
        checked that they are what this runtime would prepare itself.

        Raises:
            XrtError: 11011 when the options or the state do not fit this backend (or its
                device: another target or hardware version).
        """
        merge = options.get("auto_merge", True)
        if not isinstance(merge, bool):
            raise XrtError(
                ErrorCode.LOAD_FAILED,
                f"{type(self).__name__}: auto_merge {merge!r} in the snapshot",
            )
        self.auto_merge = merge
        if state:
            raise XrtError(
                ErrorCode.LOAD_FAILED,
                f"{type(self).__name__} keeps no prepared state, but the snapshot holds "
                f"{sorted(state)}",
            )

    # -- time accounting ----------------------------------------------------------------------

    def add_time(self, *, memory: float = 0.0, hardware: float = 0.0) -> None:
        """Report seconds spent on memory traffic and on the hardware (while profiling)."""
        self._memory_s += float(memory)
        self._hardware_s += float(hardware)

    def trace(
        self,
        name: str,
        start: float,
        duration: float,
        lane: str | None = None,
        category: str = "device",
        **args: Any,
    ) -> None:
        """Add a span to the session's timeline while it traces (a no-op otherwise).

        Args:
            name: What happened ("dma udma->plddr 4096 B", "GEMM", ...).
            start: Its start, a ``time.perf_counter()`` value (wall time).
            duration: Seconds.
            lane: The timeline row (default: the backend's class name), e.g. ``"npu.dma"``.
            category: Chrome trace category.
            **args: Shown with the event (simulated cycles, bytes, ...).
        """
        if self.tracer is not None:
            self.tracer.add(name, lane or type(self).__name__, start, duration, category, args)

    def take_times(self) -> tuple[float, float]:
        """``(memory, hardware)`` seconds reported since the last call; resets them."""
        out = (self._memory_s, self._hardware_s)
        self._memory_s = 0.0
        self._hardware_s = 0.0
        return out

    def __repr__(self) -> str:
        if self.network_view is None:
            return f"<{type(self).__name__} (not initialised)>"
        state = "applied" if self._applied else "initialised"
        return f"<{type(self).__name__} ops={self.network_view.op_ids} {state}>"
