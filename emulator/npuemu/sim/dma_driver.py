"""The DMA programming sequence, run through the harness (tests, benches, the worker).

This is the sequence docs/hardware.md describes for a driver; the runtime's `plddr` region
runs the same one through its RegRegion. Register offsets come from the generated map.
"""

from __future__ import annotations

from dataclasses import dataclass

from npuemu.sim.harness import NpuHarness, RegOp, RegOpKind, WaitOutcome
from xrt._generated.regmap_dma import DMA

__all__ = ["DmaResult", "DmaTransfer", "run_dma"]

_R = {reg.name: reg.offset for reg in DMA.registers}
_ERR_CODE = DMA.register("STATUS").field("ERR_CODE")
_DONE_ERROR = 0x3  # INT_STATUS / INT_ENABLE bits DONE | ERROR


@dataclass(frozen=True)
class DmaTransfer:
    """A transfer as a driver programs it (addresses are physical)."""

    src: int
    dst: int
    row_bytes: int
    rows: int = 1
    src_stride: int = 0
    dst_stride: int = 0


@dataclass(frozen=True)
class DmaResult:
    """What the driver sees when the transfer ends."""

    status: int  # STATUS register
    err_code: int  # STATUS.ERR_CODE
    err_addr: int  # ERR_ADDR_HI:LO
    cycles: int  # simulated cycles from START to the interrupt
    outcome: WaitOutcome

    @property
    def ok(self) -> bool:
        return self.outcome is WaitOutcome.IRQ and self.err_code == 0


def program_ops(dma_base: int, t: DmaTransfer) -> list[RegOp]:
    """Register writes that set up `t` and start it (one batch)."""

    def w(name: str, value: int) -> RegOp:
        return RegOp(RegOpKind.WRITE, dma_base + _R[name], value & 0xFFFF_FFFF)

    return [
        w("SRC_LO", t.src),
        w("SRC_HI", t.src >> 32),
        w("DST_LO", t.dst),
        w("DST_HI", t.dst >> 32),
        w("ROW_BYTES", t.row_bytes),
        w("ROWS", t.rows),
        w("SRC_STRIDE", t.src_stride),
        w("DST_STRIDE", t.dst_stride),
        w("INT_STATUS", _DONE_ERROR),  # write-1-to-clear earlier events
        w("INT_ENABLE", _DONE_ERROR),
        w("CTRL", 1),  # START
    ]


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
    status, err_lo, err_hi = await h.run_batch(
        [
            RegOp(RegOpKind.READ, dma_base + _R["STATUS"]),
            RegOp(RegOpKind.READ, dma_base + _R["ERR_ADDR_LO"]),
            RegOp(RegOpKind.READ, dma_base + _R["ERR_ADDR_HI"]),
        ]
    )
    await h.write_reg(dma_base + _R["INT_STATUS"], _DONE_ERROR)
    assert status is not None and err_lo is not None and err_hi is not None
    return DmaResult(
        status=status,
        err_code=_ERR_CODE.extract(status),
        err_addr=(err_hi << 32) | err_lo,
        cycles=cycles,
        outcome=wait.outcome,
    )
