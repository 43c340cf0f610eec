"""Tuning the NPU compiler's tilings: measure candidates, record the best, reuse it.

`plan_conv` picks a convolution's tiling by an analytic estimate. With tuning, the
`NpuTuner` measures the estimate's best few candidates (`conv_candidates`, the wide set)
on a better measure, the layer compiled alone and either scheduled by the golden model's
cost model (`CostModelMeasure`) or launched on a device (the NPU backend's RTL measure),
and records the fastest. Later compiles with the records pass the recorded tilings to the
compiler (`compile_run(plans=...)`), which validates them.

A layer alone is not the layer in its program: the program overlaps a layer's first
loads with the previous one's last stores. So after tuning the layers of a run, the run is
measured whole with and without the new tilings; when the tuned run is slower, the new
records get the default tiling instead: a compile with records is never slower than one
without, on the run that was tuned.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkView, Operator
from xrt.npu.compiler import (
    ConvGeom,
    NpuProgram,
    PlanChoice,
    Plans,
    compile_run,
    conv_candidates,
    plan_conv,
    simulated_cycles,
    tiled_geoms,
)
from xrt.tuning._records import (
    TuningKey,
    TuningRecord,
    TuningRecords,
    choice_tilings,
    code_fingerprint,
    hardware_hash,
)

__all__ = ["CostModelMeasure", "Measure", "NpuTuner", "TuneReport", "npu_code_fingerprint"]


class Measure(Protocol):
    """Something that gives the cycles of one launch of a program."""

    name: str  # "cost-model" or "rtl" (`xrt.tuning.MEASURES`)

    def __call__(self, prog: NpuProgram) -> int: ...


@dataclass
class CostModelMeasure:
    """The golden model's cycles of one launch, scheduled only (`simulated_cycles`).

    Attributes:
        target: ``buyi`` or ``zg330``.
        config: The compute engine's sizes.
        on_chip: Lay a program that fits the OCM out in it (ZG330).
    """

    target: str = "buyi"
    config: NpuConfig = NPU
    on_chip: bool = False
    name: str = "cost-model"

    def __call__(self, prog: NpuProgram) -> int:
        return simulated_cycles(prog, self.target, self.config, self.on_chip)


_fingerprint: str | None = None


def npu_code_fingerprint() -> str:
    """The fingerprint of the code that makes a tiling a program and a cycle count: the
    tiler, the convolution emitter, the emitter, the token pass, the driver with its op
    table, lowerings and stem fold, and the golden model's cost model and executor."""
    global _fingerprint
    if _fingerprint is None:
        from xrt.npu.compiler import (
            _compile,
            _conv,
            _emit,
            _lowering,
            _op_table,
            _stem_fold,
            _tiler,
            _tokens,
        )
        from xrt.npu.golden import cost, executor

        modules = [_tiler, _conv, _emit, _tokens, _compile, _op_table, _lowering, _stem_fold]
        _fingerprint = code_fingerprint([*modules, cost, executor])
    return _fingerprint


@dataclass
class TuneReport:
    """What a `NpuTuner` did (benchmarks, ``xrt run --tune``).

    Attributes:
        tuned: Operators measured this time.
        changed: Of those, how many got a tiling other than the default.
        reused: Operators whose trusted record was used.
        measurements: Programs measured.
        seconds: Wall time spent tuning.
        reverted: Runs whose tuned program was slower whole, so their new records got the
            default tilings.
    """

    tuned: int = 0
    changed: int = 0
    reused: int = 0
    measurements: int = 0
    seconds: float = 0.0
    reverted: int = 0


class NpuTuner:
    """Tilings from records, measured when missing and `tune` is on (PerfEngine's loop).

    Args:
        records: Where records are read and new ones put.
        config: The compute engine's sizes.
        target: ``buyi`` or ``zg330`` (part of the hardware hash).
        tune: Measure operators that have no trusted record (else they get the default).
        measure: How to measure (default: the cost model on `target`).
        top_k: Candidates measured per operator, the estimate's best (plus the default).
        ocm_bytes: On-chip bytes the programs are compiled with (ZG330).
    """

    def __init__(
        self,
        records: TuningRecords,
        config: NpuConfig = NPU,
        target: str = "buyi",
        *,
        tune: bool = False,
        measure: Measure | None = None,
        top_k: int = 6,
        ocm_bytes: int = 0,
    ) -> None:
        self.records = records
        self.config = config
        self.target = target
        self.tune = tune
        self.measure: Measure = measure or CostModelMeasure(target, config, ocm_bytes > 0)
        self.top_k = top_k
        self.ocm_bytes = ocm_bytes
        self.hardware = hardware_hash(config, target)
        self.report = TuneReport()

    def key(self, op: Operator, graph: Network | NetworkView) -> TuningKey:
        """The record key of `op` on this tuner's hardware."""
        return TuningKey.of(op, graph, self.hardware)

    def plans_for(
        self, graph: Network | NetworkView, compile_fn: Callable[..., NpuProgram] | None = None
    ) -> dict[int, tuple[PlanChoice, ...]]:
        """Op id -> recorded tilings for the operators of `graph` (a run) that have a trusted
        record; with `tune`, operators without one are measured first.

        Only tilings that differ from the default appear (an empty result compiles the same
        program as no tuning). `compile_fn` compiles a run with ``plans=`` (default
        `compile_run` with this tuner's config and ``ocm_bytes``).
        """
        compile_ = compile_fn or self._compile
        code = npu_code_fingerprint()
        net = graph.network if isinstance(graph, NetworkView) else graph
        plans: dict[int, tuple[PlanChoice, ...]] = {}
        fresh: list[TuningRecord] = []
        for op in graph.ops:
            geoms = tiled_geoms(op, graph, self.config)
            if not geoms:
                continue
            key = self.key(op, graph)
            rec = self.records.get(key, code)
            choice = self._choice_of(rec, key) if rec is not None else None
            if choice is not None:
                self.report.reused += 1
            elif self.tune:
                t0 = time.perf_counter()
                rec = self._tune_op(op, net, geoms, key, code, compile_)
                self.report.seconds += time.perf_counter() - t0
                self.records.put(rec)
                fresh.append(rec)
                choice = self._choice_of(rec, key)
            if choice is not None and list(choice) != self._defaults(geoms):
                plans[op.op_id] = choice
        if any(r.cost < r.default_cost for r in fresh):
            t0 = time.perf_counter()
            plans = self._check_run(graph, plans, fresh, compile_)
            self.report.seconds += time.perf_counter() - t0
        return plans

    # -- helpers ----------------------------------------------------------------------------

    def _compile(self, graph: Network | NetworkView, plans: Plans, notes: list[str]) -> NpuProgram:
        return compile_run(graph, self.config, ocm_bytes=self.ocm_bytes, plans=plans, notes=notes)

    def _defaults(self, geoms: Sequence[ConvGeom]) -> list[PlanChoice]:
        out = []
        for g in geoms:
            p = plan_conv(g, self.config)
            assert not isinstance(p, str)
            out.append(p.choice)
        return out

    def _choice_of(self, rec: TuningRecord, key: TuningKey) -> tuple[PlanChoice, ...] | None:
        try:
            return tuple(PlanChoice.from_list(t) for t in choice_tilings(rec))
        except ValueError as exc:
            self.records.note(f"{key.describe()}: record ignored, {exc}")
            return None

    def _tune_op(
        self,
        op: Operator,
        net: Network,
        geoms: Sequence[ConvGeom],
        key: TuningKey,
        code: str,
        compile_: Callable[..., NpuProgram],
    ) -> TuningRecord:
        """Measure the best `top_k` candidates of `op` compiled alone; the record of the
        fastest (the default wins ties)."""
        default = tuple(self._defaults(geoms))
        per_geom = []
        k = self.top_k if len(geoms) == 1 else max(2, round(self.top_k**0.5) + 1)
        for g in geoms:
            cands = conv_candidates(g, self.config)
            assert not isinstance(cands, str)
            per_geom.append(cands[:k])
        combos = sorted(itertools.product(*per_geom), key=lambda c: sum(p.estimate for p in c))[
            : self.top_k
        ]
        choices = [default] + [
            tuple(p.choice for p in c) for c in combos if tuple(p.choice for p in c) != default
        ]
        alone = NetworkView(net, [op])
        costs: list[int] = []
        for choice in choices:
            notes: list[str] = []
            prog = compile_(alone, {op.op_id: choice}, notes)
            assert not notes, notes  # every candidate comes from the tiler's own list
            costs.append(self.measure(prog))
            self.report.measurements += 1
        best = min(range(len(choices)), key=lambda i: (costs[i], i))
        self.report.tuned += 1
        if best:
            self.report.changed += 1
        return TuningRecord(
            key,
            {"tilings": [c.to_list() for c in choices[best]]},
            float(costs[best]),
            float(costs[0]),
            self.measure.name,
            len(choices),
            code,
        )

    def _check_run(
        self,
        graph: Network | NetworkView,
        plans: dict[int, tuple[PlanChoice, ...]],
        fresh: list[TuningRecord],
        compile_: Callable[..., NpuProgram],
    ) -> dict[int, tuple[PlanChoice, ...]]:
        """Measure the run whole with `plans` and without; while the tuned run is slower,
        give the records made now their default tilings back, those that saved least
        first, a quarter at a time (older records are kept)."""
        untuned = self.measure(compile_(graph, {}, []))
        tuned = self.measure(compile_(graph, plans, []))
        self.report.measurements += 2
        first = tuned
        changed = sorted((r for r in fresh if r.cost < r.default_cost), key=lambda r: r.saved)
        ops = {self.key(op, graph): op for op in graph.ops}
        step = max(1, -(-len(changed) // 4))
        while tuned > untuned and changed:
            for r in changed[:step]:
                op = ops[r.key]
                default = self._defaults(tiled_geoms(op, graph, self.config))
                self.records.put(
                    dataclasses.replace(
                        r, choice={"tilings": [c.to_list() for c in default]}, cost=r.default_cost
                    )
                )
                for o in graph.ops:
                    if self.key(o, graph) == r.key:
                        plans.pop(o.op_id, None)
                self.report.changed -= 1
            changed = changed[step:]
            tuned = self.measure(compile_(graph, plans, []))
            self.report.measurements += 1
        if first > untuned:
            self.report.reverted += 1
            self.records.note(
                f"{getattr(graph, 'name', 'run')}: tuned tilings made the run slower whole "
                f"({first} vs {untuned} cycles): layers that saved least got their default "
                f"tilings back ({tuned} cycles)"
            )
        return plans
