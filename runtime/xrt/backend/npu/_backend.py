"""`NpuBackend`: quantized operators on the NPU's compute engine, compiled at apply.

How it runs a network (docs/session.md, "NPU backends"):

* **Binding.** Every op type the compiler lowers is registered with a constraint that asks
  the compiler (`xrt.npu.compiler.refusal`): an operator it cannot prove exact (the int32
  accumulator bound, a shape the tiler cannot fit) stays on the host. A ``HardOp`` whose
  ``target`` is this backend's runs its precompiled program; a dequantizing ``Cast`` whose
  input this backend produces runs here too (the manual's example), on the host CPU as the
  driver's output conversion. A relabelling reshape alone between host operators stays on
  the host (`xrt.backend.npu._binding`): it would be a launch of its own for no work.
* **Compile at apply.** With `auto_merge` on, the session hands each run of consecutive
  operators bound here to `partition`, which cuts it into segments (one program per run of
  compiled operators, one per HardOp, one per Cast) and compiles and uploads each program
  once: instructions and constants (weights, biases, requantization and lookup rows) go to
  device memory, the input/output/scratch buffers are allocated there
  (`xrt.backend.npu._loader`). Programs are cached
  by a hash of the operators and the hardware configuration (`ProgramCache`), so a second
  session on the same network does not compile again. With `auto_merge` off every operator
  is its own program (step_to and per-layer dumps work on NPU layers).
* **Launch at forward.** Inputs are converted to the channel-tiled layout and written to
  their device buffers (through ``udma`` and the DMA engine for ``plddr``); the program is
  launched with register writes and one interrupt wait (`EngineDriver`); outputs come back
  the same way. The profile splits the time into memory (transfers) and hardware (the
  engine's busy cycles at the configured clock); the timeline shows the transfers and the
  engine's run with its counters.
* **Without a device.** `bind_compile_only` (`xrt.backend.npu._offline`, ``xrt compile``)
  binds the backend to no device: apply and partition compile the same programs and
  record them unuploaded, for a program container.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from xrt.backend._arrays import read_array, write_array
from xrt.backend._base import Backend, Subgraph
from xrt.backend._registry import BindContext
from xrt.backend.npu._binding import LONE_ALIAS, lone_alias
from xrt.backend.npu._cache import PROGRAM_CACHE, program_key
from xrt.backend.npu._device_measure import DeviceMeasure
from xrt.backend.npu._driver import EngineDriver, LaunchStats
from xrt.backend.npu._loader import PROGRAM_ALIGN, LoadedProgram, ProgramLoader
from xrt.backend.npu._offline import HW_VERSION_TEXT, check_options, compile_only_refusal
from xrt.backend.npu._serialize import program_from_bytes, program_to_bytes
from xrt.backend.npu._switches import NpuSwitches
from xrt.backend.npu._timeline import launch_schedule, trace_launch, trace_transfer
from xrt.backend.npu.hardop_builder import ocm_bytes
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import NetworkView, Operator, is_float_op
from xrt.npu.compiler import (
    NPU_OP_TYPES,
    NpuProgram,
    Plans,
    compile_run,
    from_tiled,
    refusal,
    to_tiled,
)
from xrt.npu_device.npu import NpuDevice
from xrt.ops import get_op_def, is_boundary
from xrt.tensor import Tensor
from xrt.tuning import CostModelMeasure, Measure, NpuTuner, TuneReport

__all__ = ["NpuBackend", "Segment"]


@dataclass(frozen=True)
class Segment:
    """A piece of a run bound to an NPU backend: one program, a HardOp, or a Cast."""

    kind: str  # "program" | "hardop" | "cast"
    ops: tuple[Operator, ...]


def _dequantize_ok(op: Operator, backend: Backend, ctx: BindContext) -> bool:
    t_in = ctx.graph.values[op.inputs[0]]
    return (
        op.attrs.get("scale") is not None
        and t_in.dtype.manual_name == "SInt8"
        and ctx.graph.values[op.outputs[0]].dtype.manual_name == "FP32"
        and ctx.producer_backend(op.inputs[0]) is backend
    )


class NpuBackend(NpuSwitches, Backend):
    """The shared code of `BuyiBackend` and `ZG330Backend` (see the module docstring).

    Attributes:
        config: The compute engine's sizes the programs are compiled for.
        timeout_s: Wall seconds a launch may take before it is aborted (11015).
        launches: Op-id tuples of every program launched (tests, benches).
        launch_stats: The engine's counters of every launch, beside `launches`.
        launch_labels: What each launch ran (the unit's description), beside `launches`.
        last_stats: The engine's counters of the last launch.
        keep_intermediates: Compile programs whose intermediates all keep their own bytes,
            so that `intermediate_values` can read every one back after a launch (the
            session sets it with ``set_dump_outputs``); programs are compiled again (once)
            for it.
        output_paths: For each program output launched, how it reached its tensor:
            "written by the engine at ADDR (REGION)" or "copied: WHY".
        tuning: Tuning records (`xrt.tuning.TuningRecords`) whose tilings programs are
            compiled with (None: the tiler's estimate); `tune` measures what has no
            trusted record at apply, on the device's RTL cycles (``tune_measure = "rtl"``)
            or the golden model's cost model (``"cost-model"``); `tune_report` counts it.
    """

    DEVICE_CLASS: ClassVar[type[NpuDevice]] = NpuDevice
    merged_label = "HardOp (Merged)"

    def __init__(self) -> None:
        super().__init__()
        self.config: NpuConfig = NPU
        self.timeout_s = 600.0
        self.launches: list[tuple[int, ...]] = []
        self.launch_stats: list[LaunchStats] = []
        self.launch_labels: list[str] = []
        self.last_stats: LaunchStats | None = None
        self._loaded: dict[tuple[tuple[int, ...], bool], LoadedProgram] = {}
        # Programs a snapshot gave this session, unverified: used here, never shared.
        self._restored: dict[str, NpuProgram] = {}
        self._driver: EngineDriver | None = None
        self._loader: ProgramLoader | None = None  # None without a device (compile-only)
        self.tune_measure = "rtl"
        self.tune_report = TuneReport()
        self._plans_memo: dict[tuple[int, bool, tuple[int, ...], int], Plans] = {}
        self._ocm_optimize = self.OCM_REGION is not None  # `ocm_optimize` (ZG330: on)

    # -- devices ------------------------------------------------------------------------------

    def default_device(self) -> Device:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{type(self).__name__} needs a {self.TARGET} device: pass "
            f"Device.open('sim://{self.TARGET}') (a simulated one of this process), "
            "Device.open('grpc://HOST:PORT') (the emulator's server) or Device.open('axi://...')",
        )

    def check_device(self, device: Device) -> None:
        if not isinstance(device, self.DEVICE_CLASS):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__} runs on a {self.DEVICE_CLASS.__name__}, not {device!r}",
            )

    def _init(self) -> None:
        assert isinstance(self.device, NpuDevice)
        self._driver = EngineDriver(self.device)
        self._loader = ProgramLoader(self.device, self.ocm_region)

    def _deinit(self) -> None:
        self._release()
        self._driver = None
        self._loader = None

    def _fork_from(self, parent: Backend) -> None:
        self.launches, self.launch_stats, self.launch_labels = [], [], []

    def _release(self) -> None:
        for loaded in self._loaded.values():
            loaded.free()
        self._loaded = {}
        if self._loader is not None:
            self._loader.release()

    # -- compile and upload -------------------------------------------------------------------

    def segments(self, ops: Sequence[Operator]) -> list[Segment]:
        """Cut consecutive operators into programs, HardOps and Casts (in order)."""
        out: list[Segment] = []
        for op in ops:
            kind = {"HardOp": "hardop", "Cast": "cast"}.get(op.op_type, "program")
            if kind == "program" and out and out[-1].kind == "program" and self.auto_merge:
                out[-1] = Segment("program", (*out[-1].ops, op))
            else:
                out.append(Segment(kind, (op,)))
        return out

    def subgraph_label(self, ops: Sequence[Operator]) -> str:
        """``HardOp (Merged)`` for a program; a Cast the backend converts is a plain subgraph."""
        return "subgraph" if all(op.op_type == "Cast" for op in ops) else self.merged_label

    def partition(self, ops: Sequence[Operator]) -> list[tuple[Operator, ...]]:
        """The session's run -> one subgraph per segment; compiles and uploads each program."""
        segs = self.segments(ops)
        self._prepare_all([seg for seg in segs if seg.kind != "cast"])
        return [seg.ops for seg in segs]

    def _prepare_all(self, segs: Sequence[Segment]) -> None:
        """Compile and upload `segs`; their on-chip scratch shares one arena sized for all."""
        progs = [self._program_for(seg) for seg in segs]
        if self._loader is not None:
            self._loader.reserve_ocm(max((p.ocm_bytes for p in progs), default=0))
        for seg in segs:
            self._prepare(seg)

    def _apply(self) -> None:
        self._release()
        if self._loader is not None:  # `ocm_optimize` may have changed since init
            self._loader = ProgramLoader(self._loader.device, self.ocm_region)
        if not self.auto_merge:
            view = self.network_view
            assert view is not None
            self._prepare_all(
                [
                    Segment("hardop" if op.op_type == "HardOp" else "program", (op,))
                    for op in view.ops
                    if op.op_type != "Cast" and not is_boundary(op)
                ]
            )

    def _program_for(self, seg: Segment) -> NpuProgram:
        view = self.network_view
        assert view is not None
        if seg.kind == "hardop":
            (op,) = seg.ops
            blob = view.params[op.params["program"]]
            return program_from_bytes(np.asarray(blob, np.uint8).tobytes(), op.describe())
        sub = NetworkView(view.network, list(seg.ops))
        prog = self._compiled(sub, share=True)
        if self.keep_intermediates and not all(p.readable_after for p in prog.intermediates):
            prog = self._compiled(sub, share=False)
        return prog

    def _compiled(self, sub: NetworkView, share: bool) -> NpuProgram:
        """The program of `sub`, from the cache or compiled. With an OCM, the code has the
        first claim on it (the engine fetches it all through the run): when code and
        intermediates do not fit together, the intermediates get what the code leaves."""
        capacity = self.ocm_capacity()
        prog = self._compiled_for(sub, share, capacity)
        code = -(-prog.program_bytes // PROGRAM_ALIGN) * PROGRAM_ALIGN
        if prog.ocm_bytes and prog.ocm_bytes + code + PROGRAM_ALIGN > capacity:
            prog = self._compiled_for(sub, share, max(capacity - code - PROGRAM_ALIGN, 0))
        return prog

    def _compiled_for(self, sub: NetworkView, share: bool, ocm_bytes: int) -> NpuProgram:
        plans = self._tuned_plans(sub, ocm_bytes)
        key = program_key(sub, self.config, self.TARGET, ocm_bytes, share, plans)
        prog = self._restored.get(key) or PROGRAM_CACHE.get(key)
        if prog is None:
            notes: list[str] = []
            prog = compile_run(sub, self.config, ocm_bytes=ocm_bytes, share=share, plans=plans,
                               notes=notes)  # fmt: skip
            for line in notes:
                assert self.tuning is not None
                self.tuning.note(line)
            PROGRAM_CACHE.put(key, prog)
        return prog

    def _tuned_plans(self, sub: NetworkView, ocm_bytes: int) -> Plans:
        """The recorded tilings for `sub` (empty without `tuning`); with `tune`, operators
        without a trusted record are measured first (`tune_measure`: ``rtl`` on the device,
        or ``cost-model``) and recorded (`xrt.tuning.NpuTuner`)."""
        records = self.tuning
        if records is None:
            return {}
        # A run is looked up more than once per apply (sizing the OCM arena, then preparing).
        memo = (id(records), self.tune, tuple(op.op_id for op in sub.ops), ocm_bytes)
        known = self._plans_memo.get(memo)
        if known is not None:
            return known
        measure: Measure
        if self.tune and self.tune_measure == "rtl" and self._driver is not None:
            assert isinstance(self.device, NpuDevice)
            measure = DeviceMeasure(self.device, self._driver, self.ocm_region, self.timeout_s)
        else:
            measure = CostModelMeasure(self.TARGET, self.config, ocm_bytes > 0)
        tuner = NpuTuner(
            records, self.config, self.TARGET, tune=self.tune, measure=measure, ocm_bytes=ocm_bytes
        )
        tuner.report = self.tune_report
        plans = tuner.plans_for(sub)
        self._plans_memo[memo] = plans
        return plans

    def ocm_capacity(self) -> int:
        """On-chip memory a program may keep intermediates in (0: none, as on Buyi): the
        device's, or the target's hardware config's when compiling without a device."""
        if self.ocm_region is None:
            return 0
        if self.device is None:
            return ocm_bytes(self.TARGET)
        return self.device.get_mem_region(self.ocm_region).size

    def _key(self, op_ids: Sequence[int]) -> tuple[tuple[int, ...], bool]:
        return tuple(op_ids), self.keep_intermediates

    def _prepare(self, seg: Segment) -> LoadedProgram:
        ids = self._key(op.op_id for op in seg.ops)
        loaded = self._loaded.get(ids)
        if loaded is None:
            prog = self._program_for(seg)
            if self._loader is None:  # compile-only (xrt compile): recorded, not uploaded
                loaded = LoadedProgram.unloaded(prog)
            else:
                loaded = self._loader.load(prog)
            self._loaded[ids] = loaded
        return loaded

    def program(self, op_ids: Sequence[int]) -> NpuProgram:
        """The compiled program of the segment with these op ids (after `apply`)."""
        loaded = self._loaded.get(self._key(op_ids))
        if loaded is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"no program for ops {list(op_ids)}: apply first")
        return loaded.program

    def placement(self, op_ids: Sequence[int]) -> dict[str, str]:
        """Where the segment's pieces live (region names).

        Keys: ``constants``, ``input:NAME``, ``output:NAME``, ``scratch`` (the external
        scratch region, when the program has one), ``ocm`` (where its on-chip scratch is:
        ``ocm``, or ``plddr`` when the OCM was taken) and ``intermediate:NAME`` for every
        intermediate tensor (`NpuProgram.intermediates` has its offset, shape and lifetime).
        """
        loaded = self._loaded.get(self._key(op_ids))
        if loaded is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"no program for ops {list(op_ids)}: apply first")
        return dict(loaded.placement)

    def intermediate_values(self, ops: Sequence[Operator]) -> list[tuple[str, np.ndarray]]:
        """The intermediates of the last launch of the program of `ops`, read back from the
        device where they live (manual 1.4.3: on ZG330 the OCM, through its MemRegion, as
        a driver on the board reads it; in ``plddr`` otherwise).

        Only tensors whose bytes still hold them at the end of the program are returned
        (`TensorPlacement.readable_after`): all of them when `keep_intermediates` was set
        before the launch, else those no later tensor overwrote.
        """
        loaded = self._loaded.get(self._key(op.op_id for op in ops))
        if loaded is None or not self.launches or self.launches[-1] != tuple(loaded.program.op_ids):
            return []
        assert self.device is not None
        return loaded.read_intermediates(self.device)

    def stored_values(self, ops: Sequence[Operator]) -> list[tuple[str, Tensor]]:
        """The last launch's outputs and readable intermediates of the program of `ops` as
        the engine stored them: channel tiles of `config.block` over NCHW (an ``H`` dump);
        outputs the engine wrote into the caller's tensors are theirs already."""
        loaded = self._loaded.get(self._key(op.op_id for op in ops))
        if loaded is None or not self.launches or self.launches[-1] != tuple(loaded.program.op_ids):
            return []
        assert self.device is not None and self.network_view is not None
        direct = [n for n, how in self.output_paths.items() if how.startswith("written by")]
        return loaded.read_stored(self.device, self.network_view.network.values, direct)

    def unsupported(self, device: Device) -> str | None:
        """MindSpore Lite's NPU delegate asks at ``Init`` whether the device can run it:
        an NPU whose RTL is not the hardware version this runtime compiles for, or that
        has no compute engine, cannot (the session then leaves this backend out)."""
        assert isinstance(device, NpuDevice)  # check_device ran first
        rtl = device.version()["rtl"]
        if rtl != HW_VERSION_TEXT:
            return f"its RTL is version {rtl}; this runtime compiles for {HW_VERSION_TEXT}"
        if not device.get_reg_region("npu").regs.CAPS.HAS_COMPUTE.read():
            return "it has no compute engine (NPU.CAPS.HAS_COMPUTE = 0)"
        return None

    # -- run ------------------------------------------------------------------------------------

    def forward_subgraph(
        self, subgraph: Subgraph, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor]
    ) -> None:
        segs = self.segments(subgraph.ops)
        if len(segs) != 1 or segs[0].kind == "cast":
            super().forward_subgraph(subgraph, inputs, outputs)  # op by op
            return
        self._run(segs[0], inputs, outputs, subgraph.describe())

    def _run(
        self, seg: Segment, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor], what: str
    ) -> None:
        """One program, its inputs in and its outputs out, as one turn of the device (other
        sessions on it wait: `NpuDevice.run_lock`)."""
        device = self.device
        with device.run_lock if isinstance(device, NpuDevice) else contextlib.nullcontext():
            self._run_locked(seg, inputs, outputs, what)

    def _run_locked(
        self, seg: Segment, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor], what: str
    ) -> None:
        if not self._applied:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{type(self).__name__}: apply() before forward")
        if self._driver is None or self._loader is None:
            raise compile_only_refusal(self)
        loaded = self._prepare(seg)
        prog = loaded.program
        tracing = self.tracer is not None
        dev_cycles = [self.device.cycles] if tracing else []  # type: ignore[union-attr]
        t0 = time.perf_counter()
        for b in prog.inputs:
            arr = read_array(inputs[b.name])
            loaded.buffers[b.name].write(to_tiled(np.asarray(arr).reshape(b.shape), prog.block))
        bases = dict(loaded.bases)
        paths: dict[str, str] = {}
        for b in prog.outputs:
            t = outputs[b.name]
            why = (
                self._loader.direct_refusal(t, b.nbytes, prog.block)
                if self.DIRECT_OUTPUTS
                else f"{type(self).__name__} stores outputs in its own buffers"
            )
            if why is None:
                assert t.chunk is not None
                bases[b.base] = t.chunk.begin.addr + t.offset
                paths[b.name] = f"written by the engine at {bases[b.base]:#x} ({t.region.name})"
            else:
                paths[b.name] = f"copied: {why}"
        t1 = time.perf_counter()
        if tracing:
            dev_cycles.append(self.device.cycles)  # type: ignore[union-attr]
        stats = self._driver.launch(
            loaded.prog_addr,
            len(prog.instructions),
            bases,
            what=what,
            timeout_s=self.timeout_s,
        )
        t2 = time.perf_counter()
        if tracing:
            dev_cycles.append(self.device.cycles)  # type: ignore[union-attr]
        for b in prog.outputs:
            if bases[b.base] != loaded.bases[b.base]:
                continue  # the engine wrote the caller's tensor
            raw = loaded.buffers[b.name].tobytes(0, b.nbytes)
            out = from_tiled(raw, b.shape, prog.block)
            write_array(outputs[b.name], out.reshape(outputs[b.name].shape))
        t3 = time.perf_counter()
        self.output_paths.update(paths)
        self.launches.append(tuple(prog.op_ids))
        self.launch_stats.append(stats)
        self.launch_labels.append(what)
        self.last_stats = stats
        if self.time_profile:
            self.add_time(memory=(t1 - t0) + (t3 - t2), hardware=stats.seconds)
        if tracing:
            self._trace_launch(loaded, what, stats, (t0, t1, t2, t3), dev_cycles)

    def _trace_launch(
        self,
        loaded: LoadedProgram,
        what: str,
        stats: LaunchStats,
        wall: tuple[float, float, float, float],
        cycles: list[int | None],
    ) -> None:
        """The launch on the session's timeline: transfers, the engine's run, its layers
        and units (`xrt.backend.npu._timeline`)."""
        assert self.tracer is not None and isinstance(self.device, NpuDevice)
        t0, t1, t2, t3 = wall
        cycles.append(self.device.cycles)
        if loaded.schedule is None:
            loaded.schedule = launch_schedule(
                loaded.program, loaded.bases, self.TARGET or self.device.target, self.config
            )
        name = self.device.name
        self.trace("inputs to device", t0, t1 - t0, lane="npu.dma", category="dma")
        trace_transfer(self.tracer, "inputs to device", (cycles[0], cycles[1]), name)
        trace_launch(
            self.tracer, loaded.schedule, what, stats, (t1, t2), (cycles[1], cycles[2]), name
        )
        self.trace("outputs from device", t2, t3 - t2, lane="npu.dma", category="dma")
        trace_transfer(self.tracer, "outputs from device", (cycles[2], cycles[3]), name)

    # -- snapshots ------------------------------------------------------------------------------

    def refusal(self, op: Operator, ctx: BindContext | None = None) -> str | None:
        """Why this backend does not take `op` (None when it does): the compiler's legality
        verdict for the operator types it lowers, else what kind of operator it is."""
        if self.not_supported is not None:  # left out of the session: not this device
            return self.not_supported
        if ctx is None:
            if self.network_view is None:
                raise XrtError(
                    ErrorCode.WRONG_ORDER, f"{type(self).__name__}.refusal needs a BindContext"
                )
            ctx = BindContext(self.network_view, {})
        if self.is_op_supported(op, ctx):
            return None
        if (why := self.runtime_refusal(op, ctx)) is not None:
            return why  # a parameter fed at run time, or a shape known only then
        name, values = type(self).__name__, ctx.graph.values
        if op.op_type in NPU_OP_TYPES:
            why = refusal(op, values, ctx.graph.op_params(op), self.config)
            if why is not None:
                return why
            if lone_alias(op, self, self.config, ctx):
                return LONE_ALIAS
        if op.op_type == "HardOp":
            return f"a HardOp for {op.attrs.get('target')!r}; {name} runs {self.TARGET!r} ones"
        if op.op_type == "Cast":
            return "an edge cast (the NPU fuses only the dequantization of its own outputs)"
        if self.lookup(op.op_type) is None and is_float_op(op, values):
            return (
                f"{op.op_type} computes in floating point; the NPU runs quantized (int8) "
                "operators only (quantize the network: xrt run --quantize)"
            )
        if self.lookup(op.op_type) is None:
            return f"the NPU compiler has no lowering for {op.op_type}"
        return super().refusal(op, ctx)

    def snapshot_options(self) -> dict[str, Any]:
        out = super().snapshot_options()
        out["target"] = self.TARGET
        out["block"] = self.config.block
        out["config"] = {k: getattr(self.config, k) for k in self.config.__dataclass_fields__}
        out["hw_version"] = HW_VERSION_TEXT
        out["ocm_bytes"] = self.ocm_capacity()  # programs are compiled for this much OCM
        out.update(self.switch_options())
        return out

    def snapshot_state(self) -> dict[str, bytes]:
        return {
            "program_" + "_".join(map(str, ids)): program_to_bytes(loaded.program)
            for (ids, keep), loaded in self._loaded.items()
            if not keep
        }

    def restore_snapshot(
        self, options: Mapping[str, Any], state: Mapping[str, bytes], *, verify: bool = False
    ) -> None:
        """The snapshot's compiled programs. A snapshot is the user's own file, but it can
        be edited (its checksums recomputed): its programs serve only this session, never
        the process-wide `PROGRAM_CACHE` that other sessions of the same network read.
        With `verify`, each program is compiled again from the network it claims to
        implement (a compilation, which the snapshot otherwise saves) and must be the same
        bytes; verified programs are shared."""
        super().restore_snapshot({"auto_merge": options.get("auto_merge", True)}, {})
        self.restore_switches(options)  # manual 1.1.3: the snapshot's, not this object's
        check_options(self, options, self.config, self.ocm_capacity())
        view = self.network_view
        assert view is not None
        for name, blob in state.items():
            prog = program_from_bytes(blob, name)
            sub = NetworkView(view.network, [view.network.op(i) for i in prog.op_ids])
            key = program_key(sub, self.config, self.TARGET, self.ocm_capacity())
            if not verify:
                self._restored[key] = prog
                continue
            ours = {program_to_bytes(self._compiled(sub, share)) for share in (True, False)}
            if program_to_bytes(prog) not in ours:
                raise XrtError(
                    ErrorCode.LOAD_FAILED,
                    f"snapshot program {name} (ops {list(prog.op_ids)}) is not what this "
                    "runtime compiles for those operators: an edited or foreign snapshot, "
                    "refused",
                )


def _npu_constraint(op: Operator, backend: Backend, ctx: BindContext) -> bool:
    assert isinstance(backend, NpuBackend)
    if refusal(op, ctx.graph.values, ctx.graph.op_params(op), backend.config) is not None:
        return False
    return not lone_alias(op, backend, backend.config, ctx)


def _hardop_constraint(op: Operator, backend: Backend, ctx: BindContext) -> bool:
    assert isinstance(backend, NpuBackend)
    return op.attrs.get("target") == backend.TARGET


def _forward_one(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> None:
    assert isinstance(backend, NpuBackend)
    kind = "hardop" if op.op_type == "HardOp" else "program"
    backend._run(
        Segment(kind, (op,)),
        dict(zip(op.inputs, inputs, strict=True)),
        dict(zip(op.outputs, outputs, strict=True)),
        f"{op.describe()} on {type(backend).__name__}",
    )


def _dequantize(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> Sequence[np.ndarray]:
    """The driver's output conversion: the host's Cast kernel, so the result is bit-exact."""
    view = backend.network_view
    assert view is not None
    return get_op_def("Cast").forward(op, [read_array(inputs[0])], view.op_params(op))


for _t in sorted(NPU_OP_TYPES):
    NpuBackend.add_op(_t, _forward_one, constraint=_npu_constraint)
NpuBackend.add_op("HardOp", _forward_one, constraint=_hardop_constraint)
NpuBackend.add_op("Cast", _dequantize, constraint=_dequantize_ok)
