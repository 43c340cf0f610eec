"""The compute engine's launch sequence (`xrt.hw.engine`), run through the harness.

The sequence itself is the contract's, the one the runtime's driver runs over its register
region; `run_program` only runs it on an `NpuHarness`: the launch batch, the wait for the
interrupt under a simulated-cycle and a wall-clock limit, the readout batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from npuemu.sim.harness import NpuHarness
from xrt.hw.engine import EngineOutcome, decode_readout, launch_ops, readout_ops
from xrt.hw.wire import WaitOutcome

__all__ = ["CoreResult", "run_program"]


@dataclass(frozen=True)
class CoreResult:
    """Outcome of one program run: the engine's readout, the cycles from START to the
    interrupt, and how the wait for it ended."""

    engine: EngineOutcome
    cycles: int
    wait: WaitOutcome

    @property
    def ok(self) -> bool:
        return self.wait is WaitOutcome.INTERRUPT and self.engine.ok

    @property
    def status(self) -> int:
        return self.engine.status

    @property
    def err_code(self) -> int:
        return self.engine.err_code

    @property
    def err_unit(self) -> int:
        return self.engine.err_unit

    @property
    def err_pc(self) -> int:
        return self.engine.err_pc

    @property
    def err_addr(self) -> int:
        return self.engine.err_addr

    @property
    def perf(self) -> dict[str, int]:
        """The PERF_* counters of this run, by name (`xrt.hw.regs.PERF_COUNTERS`)."""
        return self.engine.counters


async def run_program(
    h: NpuHarness,
    npu_base: int,
    prog_addr: int,
    prog_insns: int,
    bases: Mapping[int, int],
    *,
    max_cycles: int = 50_000_000,
    timeout_s: float | None = 300.0,
) -> CoreResult:
    """Launch, wait for the interrupt, read status, error registers and counters, ack."""
    await h.run_batch(launch_ops(npu_base, prog_addr, prog_insns, bases))
    start = h.cycles
    wait = await h.wait_irq(max_cycles, timeout_s)
    cycles = h.cycles - start
    engine = decode_readout(await h.run_batch(readout_ops(npu_base)))
    return CoreResult(engine, cycles, wait.outcome)
