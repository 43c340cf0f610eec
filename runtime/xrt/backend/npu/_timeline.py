"""What a launch looks like inside, on the session's timeline: its layers and its units.

The engine counts whole programs (PERF_* counters): it does not say when each layer ran.
The compiler knows each layer's instructions (`LayerReport.first_insn`/`last_insn`), and the
golden cost model places every instruction on its unit (`xrt.npu.golden.run` with
``execute=False``: scheduling only, no data moved). `launch_schedule` computes that
schedule once per uploaded program; `trace_launch` draws it, scaled so that its length is
the engine's measured RUN_CYCLES:

* on the wall-time track: the launch on ``npu.engine``, its layers on ``npu.layers`` and the
  busy spans of its units on ``npu.load``, ``npu.compute``, ``npu.store``, spread over the
  launch's wall time;
* on the simulated-time track (devices that count cycles): the input and output transfers
  on ``npu.dma``, the launch, its layers and units at the device's cycle counts.

Layer and unit spans are the model's schedule (their args say ``"estimated": true`` and the
scale applied); the launch's length and its counters are the engine's own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from xrt.backend.npu._driver import LaunchStats
from xrt.hw.config import NpuConfig
from xrt.hw.isa import Unit
from xrt.hw.targets import CLOCK_PERIOD_PS
from xrt.npu.compiler import NpuProgram
from xrt.timeline import TraceRecorder

__all__ = ["LaunchSchedule", "launch_schedule", "trace_launch", "trace_transfer"]

MAX_SPANS_PER_UNIT = 400
"""Busy spans of one unit closer than 1/MAX_SPANS_PER_UNIT of the program are drawn as one."""

_UNIT_LANES = {Unit.LOAD: "npu.load", Unit.COMPUTE: "npu.compute", Unit.STORE: "npu.store"}


@dataclass(frozen=True)
class LaunchSchedule:
    """A program's schedule in the cost model's cycles.

    Attributes:
        total: Modelled cycles from START to FINISH.
        layers: (label, first cycle, end cycle) of every layer that has instructions.
        units: Timeline lane -> merged busy spans (start, end) of that unit.
    """

    total: int
    layers: tuple[tuple[str, int, int], ...]
    units: Mapping[str, tuple[tuple[int, int], ...]]


def _merge(spans: list[tuple[int, int]], gap: int) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= gap:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


def launch_schedule(
    prog: NpuProgram, bases: Mapping[int, int], target: str, cfg: NpuConfig
) -> LaunchSchedule:
    """The cost model's schedule of `prog` launched with `bases` on `target`."""
    from xrt.npu import golden

    placed: list[tuple[int, Unit, int, int]] = []
    result = golden.run(
        prog.instructions,
        golden.Memory.for_target(target),
        dict(bases),
        config=cfg,
        schedule=placed,
        execute=False,
    )
    at = {pc: (start, end) for pc, _, start, end in placed}
    layers = []
    for layer in prog.layers:
        times = [at[pc] for pc in range(layer.first_insn, layer.last_insn) if pc in at]
        if times:
            label = f"{layer.op_type} {layer.name or ''} (op {layer.op_id})".replace("  ", " ")
            layers.append((label, min(s for s, _ in times), max(e for _, e in times)))
    busy: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _, unit, start, end in placed:
        busy[_UNIT_LANES[unit]].append((start, end))
    total = max(result.cycles.total, 1)
    gap = total // MAX_SPANS_PER_UNIT
    return LaunchSchedule(
        total, tuple(layers), {lane: _merge(spans, gap) for lane, spans in busy.items()}
    )


def trace_launch(
    tracer: TraceRecorder,
    schedule: LaunchSchedule,
    label: str,
    stats: LaunchStats,
    wall: tuple[float, float],
    cycles: tuple[int | None, int | None],
    device: str,
) -> None:
    """Draw one launch: `wall` is its (start, end) in ``time.perf_counter()`` seconds,
    `cycles` the device's cycle counts at those moments (None on a board)."""
    measured = stats.busy_cycles or schedule.total
    scale = measured / schedule.total
    t0, t1 = wall
    per_cycle = (t1 - t0) / measured
    counters = {k.lower(): v for k, v in stats.counters.items()}
    tracer.add(
        label, "npu.engine", t0, t1 - t0, "device", {**counters, "simulated_cycles": stats.cycles}
    )
    estimated = {"estimated": True, "scale": round(scale, 4)}
    spans = [(name, "npu.layers", s, e) for name, s, e in schedule.layers]
    spans += [
        (lane.split(".")[1], lane, s, e) for lane, runs in schedule.units.items() for s, e in runs
    ]
    for name, lane, s, e in spans:
        tracer.add(
            name, lane, t0 + s * scale * per_cycle, (e - s) * scale * per_cycle, "device", estimated
        )
    start_cycle = cycles[0]
    if start_cycle is None:
        return
    origin = tracer.cycle_origin.setdefault(device, start_cycle)
    base = start_cycle - origin
    tracer.add_cycles(label, "npu.engine", base, measured, CLOCK_PERIOD_PS, args=counters)
    for name, lane, s, e in spans:
        tracer.add_cycles(
            name, lane, base + s * scale, (e - s) * scale, CLOCK_PERIOD_PS, args=estimated
        )


def trace_transfer(
    tracer: TraceRecorder, name: str, cycles: tuple[int | None, int | None], device: str
) -> None:
    """Draw a DMA transfer on the simulated track from the device's cycle counts around it."""
    first, last = cycles
    if first is None or last is None or last <= first:
        return
    origin = tracer.cycle_origin.setdefault(device, first)
    tracer.add_cycles(name, "npu.dma", first - origin, last - first, CLOCK_PERIOD_PS, "dma")
