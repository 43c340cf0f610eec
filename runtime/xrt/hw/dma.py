"""The DMA engine's programming sequence (docs/hardware.md, "Programming sequence"), as
register operations: the one description of it that the runtime's DMA-only memories
(`xrt.npu_device.dma_region`) and the emulator (its harness) run.

A transfer is two batches around a wait for the interrupt:

1. `program_ops`: wait for ``STATUS.BUSY = 0``; write ``SRC``, ``DST``, ``ROW_BYTES``,
   ``ROWS``, the strides; clear old events in ``INT_STATUS`` and enable them in
   ``INT_ENABLE``; ``CTRL.START``;
2. wait for the interrupt;
3. `readout_ops`: wait for ``STATUS.BUSY = 0`` (it already is when the DMA raised the line;
   it waits when another source did), read ``ERR_ADDR_LO/HI``, acknowledge;
   `decode_readout` gives a `DmaOutcome`.

`abort_ops` stops a transfer that never ends. Offsets and fields come from the generated
register map (`xrt.hw.regs.DMA`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xrt.hw.regops import RegOp, RegPoll, RegRead, RegWrite
from xrt.hw.regs import DMA

__all__ = [
    "DMA_ERRORS",
    "DMA_EVENTS",
    "IDLE_WAIT_S",
    "DmaOutcome",
    "DmaTransfer",
    "abort_ops",
    "decode_readout",
    "program_ops",
    "readout_ops",
]

DMA_ERRORS = {
    1: "ZERO_LENGTH",
    2: "SRC_RANGE",
    3: "DST_RANGE",
    4: "READ_SLVERR",
    5: "READ_DECERR",
    6: "WRITE_SLVERR",
    7: "WRITE_DECERR",
    8: "ABORTED",
}
"""``STATUS.ERR_CODE`` values (docs/hardware.md, "The DMA engine")."""

IDLE_WAIT_S = 1.0
"""Seconds to wait for ``STATUS.BUSY = 0`` before programming (an earlier transfer)."""

_STATUS = DMA.register("STATUS")
_BUSY = _STATUS.field("BUSY").mask
_ERR_CODE = _STATUS.field("ERR_CODE")
_CTRL = DMA.register("CTRL")
_START = _CTRL.field("START").mask
_ABORT = _CTRL.field("ABORT").mask
_INT = DMA.register("INT_STATUS")
DMA_EVENTS = _INT.field("DONE").mask | _INT.field("ERROR").mask
"""The DMA's bits of ``INT_STATUS`` and ``INT_ENABLE``."""


@dataclass(frozen=True)
class DmaTransfer:
    """A transfer as a driver programs it (addresses are physical): `rows` rows of
    `row_bytes` bytes, each row `src_stride` / `dst_stride` bytes after the last."""

    src: int
    dst: int
    row_bytes: int
    rows: int = 1
    src_stride: int = 0
    dst_stride: int = 0


def _at(dma_base: int, name: str) -> int:
    return dma_base + DMA.offset(name)


def program_ops(dma_base: int, t: DmaTransfer, idle_wait_s: float = IDLE_WAIT_S) -> list[RegOp]:
    """The batch that programs `t` and starts it once the engine is idle."""

    def w(name: str, value: int) -> RegOp:
        return RegWrite(_at(dma_base, name), value & 0xFFFF_FFFF)

    return [
        RegPoll(_at(dma_base, "STATUS"), _BUSY, 0, timeout_s=idle_wait_s),
        w("SRC_LO", t.src),
        w("SRC_HI", t.src >> 32),
        w("DST_LO", t.dst),
        w("DST_HI", t.dst >> 32),
        w("ROW_BYTES", t.row_bytes),
        w("ROWS", t.rows),
        w("SRC_STRIDE", t.src_stride),
        w("DST_STRIDE", t.dst_stride),
        w("INT_STATUS", DMA_EVENTS),  # write-1-to-clear earlier events
        w("INT_ENABLE", DMA_EVENTS),
        w("CTRL", _START),
    ]


def readout_ops(dma_base: int, busy_wait_s: float = IDLE_WAIT_S) -> list[RegOp]:
    """The batch after the interrupt: ``STATUS`` once the engine is idle, ``ERR_ADDR``,
    then the acknowledge. `decode_readout` reads its results."""
    return [
        RegPoll(_at(dma_base, "STATUS"), _BUSY, 0, timeout_s=busy_wait_s),
        RegRead(_at(dma_base, "ERR_ADDR_LO")),
        RegRead(_at(dma_base, "ERR_ADDR_HI")),
        RegWrite(_at(dma_base, "INT_STATUS"), DMA_EVENTS),
    ]


def abort_ops(dma_base: int) -> list[RegOp]:
    """Stop a transfer that did not finish, wait until the engine is idle, acknowledge."""
    return [
        RegWrite(_at(dma_base, "CTRL"), _ABORT),
        RegPoll(_at(dma_base, "STATUS"), _BUSY, 0, timeout_s=IDLE_WAIT_S),
        RegWrite(_at(dma_base, "INT_STATUS"), DMA_EVENTS),
    ]


@dataclass(frozen=True)
class DmaOutcome:
    """How a transfer ended: ``STATUS``, its ``ERR_CODE`` and ``ERR_ADDR``."""

    status: int
    err_code: int
    err_addr: int

    @property
    def ok(self) -> bool:
        return self.err_code == 0

    def describe(self) -> str:
        """The error in words (its name and address), or "no error"."""
        if not self.err_code:
            return "no error"
        name = DMA_ERRORS.get(self.err_code, f"code {self.err_code}")
        return f"{name} at {self.err_addr:#x} (STATUS {self.status:#x})"


def decode_readout(values: Sequence[int | None]) -> DmaOutcome:
    """The `DmaOutcome` in the results of a `readout_ops` batch."""
    status, lo, hi = (int(v or 0) for v in values[:3])
    return DmaOutcome(status, _ERR_CODE.extract(status), (hi << 32) | lo)
