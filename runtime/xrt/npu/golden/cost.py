"""The analytic cost model (docs/isa.md, "The cost model of the golden model").

Each instruction gets a duration; the executor places it in a list schedule (each unit in
program order, a pop waiting for the completion of its matching push, the fetch unit
dispatching one instruction per `fetch_cycles` into per-unit queues of
``insn_queue_depth``). Durations:

* LOAD / STORE: ``issue + max(beats, ceil(bursts / outstanding) * latency) + latency``
  (+ one cycle per padding row a LOAD writes), where a burst is a contiguous run of
  at most ``min(max_burst_beats * bus_bytes, 4096)`` bytes;
* GEMM: ``issue + n0*n1*n2``; VEC: ``issue + n0*n1``; SYNC: ``issue``.

With ``ddr_shared_bus`` (`npu.toml`) a DDR memory moves one beat per cycle for reads and
writes together: the executor books each LOAD/STORE's beats (`CostModel.bus_beats`) on its
memory's `DataBus`, in the first free cycles from the transfer's start, and ends the
transfer no earlier than its last beat; the OCM has no such limit (a read and a write beat
per cycle).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from xrt.hw.config import NpuConfig
from xrt.hw.isa import Finish, Gemm, Instruction, Load, Store, Sync, Unit, Vec
from xrt.hw.targets import DMA

from . import footprint as fp

__all__ = ["CostModel", "CycleEstimate", "DataBus", "transfer_shape"]


def transfer_shape(
    sizes: tuple[int, int, int], strides: tuple[int, int, int], elem: int
) -> tuple[int, int]:
    """(contiguous runs, bytes per run) of a (z, y, x) tile of ``elem``-byte elements."""
    (zn, yn, xn), (zs, ys, xs) = sizes, strides
    run, runs = elem, zn * yn * xn
    for n, s in ((xn, xs), (yn, ys), (zn, zs)):
        if n == 1:
            continue
        if s != run:
            break
        run *= n
        runs //= n
    return runs, run


@dataclass(frozen=True)
class CostModel:
    """Parameters of the cost model (cycles of the engine's clock)."""

    bus_bytes: int = DMA.bus_bytes
    max_burst_beats: int = DMA.max_burst_beats
    max_outstanding: int = DMA.max_outstanding
    burst_latency: int = 32
    """Cycles from a read burst's address to its first beat (or a write's last beat to its
    response)."""
    issue_cycles: int = 2
    """Fixed overhead of every instruction (decode, loop setup, pipeline fill)."""
    fetch_cycles: int = 2
    """Cycles to fetch one 256-bit instruction over the bus."""

    def _transfer(self, runs: int, run_bytes: int) -> tuple[int, int]:
        burst_bytes = min(self.max_burst_beats * self.bus_bytes, 4096)
        bursts = runs * -(-run_bytes // burst_bytes)
        beats = runs * -(-run_bytes // self.bus_bytes)
        waves = -(-bursts // self.max_outstanding)
        return beats, max(beats, waves * self.burst_latency) + self.burst_latency

    def bus_beats(self, insn: Instruction, config: NpuConfig) -> int:
        """Data beats a LOAD or STORE moves on the bus (0 for other instructions)."""
        if isinstance(insn, Load):
            e = fp.elem_bytes(insn.buffer, config.block)
        elif isinstance(insn, Store):
            e = fp.store_elem_bytes(insn, config.block)
        else:
            return 0
        sizes = (insn.z_size, insn.y_size, insn.x_size)
        runs, run = transfer_shape(sizes, (insn.z_stride, insn.y_stride, insn.x_stride), e)
        return self._transfer(runs, run)[0]

    def duration(self, insn: Instruction, config: NpuConfig) -> int:
        """Cycles ``insn`` keeps its unit busy."""
        if isinstance(insn, Load):
            e = fp.elem_bytes(insn.buffer, config.block)
            sizes = (insn.z_size, insn.y_size, insn.x_size)
            runs, run = transfer_shape(sizes, (insn.z_stride, insn.y_stride, insn.x_stride), e)
            _, cycles = self._transfer(runs, run)
            _, _, rows = fp.load_geometry(insn)
            return self.issue_cycles + cycles + rows - insn.z_size * insn.y_size * insn.x_size
        if isinstance(insn, Store):
            e = fp.store_elem_bytes(insn, config.block)
            sizes = (insn.z_size, insn.y_size, insn.x_size)
            runs, run = transfer_shape(sizes, (insn.z_stride, insn.y_stride, insn.x_stride), e)
            return self.issue_cycles + self._transfer(runs, run)[1]
        if isinstance(insn, Gemm):
            return self.issue_cycles + insn.n0 * insn.n1 * insn.n2
        if isinstance(insn, Vec):
            return self.issue_cycles + insn.n0 * insn.n1
        if isinstance(insn, Sync):
            return self.issue_cycles
        if isinstance(insn, Finish):
            return 0
        raise TypeError(f"not an instruction: {insn!r}")


class DataBus:
    """The cycles one memory's data bus is booked, as sorted disjoint [start, end) runs.

    Instructions are booked in program order, which is not time order (a LOAD of the next
    tile may run before the STORE of this one): a booking fills the first free cycles from
    its start, gaps between earlier bookings included.
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def book(self, t: int, beats: int) -> int:
        """Book ``beats`` free cycles from cycle ``t`` on; return the end of the last one."""
        starts, ends = self._starts, self._ends
        first = i = bisect_right(ends, t)  # the first run ending after t
        pieces: list[tuple[int, int]] = []
        while beats > 0:
            nxt = starts[i] if i < len(starts) else None
            if nxt is None or nxt > t:
                take = beats if nxt is None else min(beats, nxt - t)
                pieces.append((t, t + take))
                t += take
                beats -= take
            if beats > 0:
                t = max(t, ends[i])
                i += 1
        # Merge the pieces with runs first-1 .. i (touching ones join).
        lo, hi = max(first - 1, 0), min(i + 1, len(starts))
        runs = sorted([*zip(starts[lo:hi], ends[lo:hi], strict=True), *pieces])
        merged: list[list[int]] = []
        for a, b in runs:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        starts[lo:hi] = [a for a, _ in merged]
        ends[lo:hi] = [b for _, b in merged]
        return t


@dataclass
class CycleEstimate:
    """The cost model's verdict on one run.

    Attributes:
        total: Cycles from START to the completion of FINISH (or of the last instruction
            before an error).
        busy: Cycles each unit spent executing instructions.
        gemm_cycles: Compute-unit cycles spent in GEMM instructions (issue overhead included).
        macs: Multiply-accumulates of every GEMM (B*B per iteration).
        block: The array block B.
    """

    total: int = 0
    busy: dict[Unit, int] = field(default_factory=lambda: {u: 0 for u in Unit})
    gemm_cycles: int = 0
    macs: int = 0
    block: int = 16

    @property
    def mac_utilisation_gemm(self) -> float:
        """MACs / (B*B * GEMM cycles): how well the GEMMs themselves use the array."""
        return self.macs / (self.block**2 * self.gemm_cycles) if self.gemm_cycles else 0.0

    @property
    def mac_utilisation(self) -> float:
        """MACs / (B*B * total cycles): how well the whole program uses the array."""
        return self.macs / (self.block**2 * self.total) if self.total else 0.0
