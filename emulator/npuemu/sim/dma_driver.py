"""The DMA programming sequence (`xrt.hw.dma`), run through the harness (tests, benches).

The sequence itself is the contract's, the one the runtime's DMA-only memories run through
their register region; this module only runs it on an `NpuHarness` and waits for the
interrupt under a simulated-cycle and a wall-clock limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from npuemu.sim.harness import NpuHarness
from xrt.hw.dma import DmaTransfer, decode_readout, program_ops, readout_ops
from xrt.hw.wire import WaitOutcome

__all__ = ["DmaResult", "DmaTransfer", "program_ops", "run_dma"]


@dataclass(frozen=True)
class DmaResult:
    """What the driver sees when the transfer ends."""

    status: int  # STATUS register
    err_code: int  # STATUS.ERR_CODE
    err_addr: int  # ERR_ADDR_HI:LO
    cycles: int  # simulated cycles from START to the interrupt
    wait: WaitOutcome  # how the wait for the interrupt ended

    @property
    def ok(self) -> bool:
        return self.wait is WaitOutcome.INTERRUPT and self.err_code == 0


async def run_dma(
    h: NpuHarness,
    dma_base: int,
    t: DmaTransfer,
    *,
    max_cycles: int = 50_000_000,
    timeout_s: float | None = 120.0,
) -> DmaResult:
    """Program `t`, start it, wait for the interrupt, read the outcome and acknowledge."""
    await h.run_batch(program_ops(dma_base, t))
    start = h.cycles
    wait = await h.wait_irq(max_cycles, timeout_s)
    cycles = h.cycles - start
    out = decode_readout(await h.run_batch(readout_ops(dma_base)))
    return DmaResult(out.status, out.err_code, out.err_addr, cycles, wait.outcome)
