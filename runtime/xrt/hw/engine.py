"""The compute engine's launch sequence (docs/isa.md "Launching a program"), as register
operations: the one description of it that the runtime's driver (`xrt.backend.npu`) and the
emulator's harness both run, on a board or in the simulation alike.

A launch is three batches, each a pure function of its arguments:

1. `launch_ops`: wait for ``CORE_STATUS.BUSY = 0``; write ``PROG_ADDR_LO/HI``,
   ``PROG_INSNS`` and the base registers the program uses; clear the engine's events in
   ``INT_STATUS`` and enable them in ``INT_ENABLE``; ``CORE_CTRL.START`` (which clears
   the counters);
2. wait for the interrupt (the transport's ``wait_irq``);
3. `readout_ops`: read ``CORE_STATUS``, the error registers and the counters, acknowledge
   in ``INT_STATUS``; `decode_readout` turns the values read into an `EngineOutcome`.

`abort_ops` stops a program that never ends and leaves the engine idle; `wipe_ops` zeroes
the engine's buffers (as reset does). Every offset and field comes from the generated
register map (`xrt.hw.regs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from xrt.hw.isa import ERROR_TEXT, EngineError
from xrt.hw.regops import RegOp, RegPoll, RegRead, RegWrite
from xrt.hw.regs import NPU, PERF_COUNTERS

__all__ = [
    "CORE_EVENTS",
    "IDLE_WAIT_S",
    "UNIT_NAMES",
    "EngineOutcome",
    "abort_ops",
    "decode_readout",
    "launch_ops",
    "readout_ops",
    "wipe_ops",
]

IDLE_WAIT_S = 5.0
"""Seconds to wait for the engine to be idle (a previous program draining, a wipe)."""

_CTRL = NPU.register("CORE_CTRL")
_STATUS = NPU.register("CORE_STATUS")
_START = _CTRL.field("START").mask
_ABORT = _CTRL.field("ABORT").mask
_WIPE = _CTRL.field("WIPE").mask
_BUSY = _STATUS.field("BUSY").mask
_DONE = _STATUS.field("DONE")
_ERR_CODE = _STATUS.field("ERR_CODE")
_ERR_UNIT = _STATUS.field("ERR_UNIT")
_INT = NPU.register("INT_STATUS")
CORE_EVENTS = _INT.field("CORE_DONE").mask | _INT.field("CORE_ERROR").mask
"""The engine's bits of ``INT_STATUS`` and ``INT_ENABLE``."""
UNIT_NAMES = {0: "load", 1: "compute", 2: "store", 3: "fetch"}
"""``CORE_STATUS.ERR_UNIT`` values."""
_READ_FIRST = ("CORE_STATUS", "CORE_ERR_PC", "CORE_ERR_ADDR_LO", "CORE_ERR_ADDR_HI")


def _at(npu_base: int, name: str) -> int:
    return npu_base + NPU.offset(name)


def launch_ops(
    npu_base: int, prog_addr: int, n_insns: int, bases: Mapping[int, int]
) -> list[RegOp]:
    """The batch that starts the program at `prog_addr` (`n_insns` instructions, base
    registers `bases`: index -> physical address) once the engine is idle."""
    ops: list[RegOp] = [
        RegPoll(_at(npu_base, "CORE_STATUS"), _BUSY, 0, timeout_s=IDLE_WAIT_S),
        RegWrite(_at(npu_base, "PROG_ADDR_LO"), prog_addr & 0xFFFF_FFFF),
        RegWrite(_at(npu_base, "PROG_ADDR_HI"), prog_addr >> 32),
        RegWrite(_at(npu_base, "PROG_INSNS"), n_insns),
    ]
    for index, addr in sorted(bases.items()):
        ops += [
            RegWrite(_at(npu_base, f"BASE{index}_LO"), addr & 0xFFFF_FFFF),
            RegWrite(_at(npu_base, f"BASE{index}_HI"), addr >> 32),
        ]
    ops += [
        RegWrite(_at(npu_base, "INT_STATUS"), CORE_EVENTS),
        RegWrite(_at(npu_base, "INT_ENABLE"), CORE_EVENTS),
        RegWrite(_at(npu_base, "CORE_CTRL"), _START),
    ]
    return ops


def status_ops(npu_base: int) -> list[RegOp]:
    """Reads of the status and error registers (`decode_status`): a look at a running
    engine that changes nothing (no counter read, no acknowledgement)."""
    return [RegRead(_at(npu_base, name)) for name in _READ_FIRST]


def is_busy(status: int | None) -> bool:
    """``CORE_STATUS.BUSY`` of a status read."""
    return bool((status or 0) & _BUSY)


def readout_ops(npu_base: int) -> list[RegOp]:
    """The batch after the interrupt: status, error registers, counters (LO before HI: the
    LO read latches HI), then the acknowledge. `decode_readout` reads its results."""
    ops = status_ops(npu_base)
    for name in PERF_COUNTERS:
        ops += [
            RegRead(_at(npu_base, f"PERF_{name}_LO")),
            RegRead(_at(npu_base, f"PERF_{name}_HI")),
        ]
    ops.append(RegWrite(_at(npu_base, "INT_STATUS"), CORE_EVENTS))
    return ops


def abort_ops(npu_base: int) -> list[RegOp]:
    """Stop a program that did not finish, wait until the engine is idle, acknowledge."""
    return [
        RegWrite(_at(npu_base, "CORE_CTRL"), _ABORT),
        RegPoll(_at(npu_base, "CORE_STATUS"), _BUSY, 0, timeout_s=IDLE_WAIT_S),
        RegWrite(_at(npu_base, "INT_STATUS"), CORE_EVENTS),
    ]


def wipe_ops(npu_base: int) -> list[RegOp]:
    """Zero every row of the engine's buffers and wait until it is done (while idle)."""
    return [
        RegPoll(_at(npu_base, "CORE_STATUS"), _BUSY, 0, timeout_s=IDLE_WAIT_S),
        RegWrite(_at(npu_base, "CORE_CTRL"), _WIPE),
        RegPoll(_at(npu_base, "CORE_STATUS"), _BUSY, 0, timeout_s=IDLE_WAIT_S),
    ]


@dataclass(frozen=True)
class EngineOutcome:
    """How a program ended, from the `readout_ops` values.

    Attributes:
        status: ``CORE_STATUS``.
        err_code: Its ``ERR_CODE`` (0: none).
        err_unit: Its ``ERR_UNIT`` (`UNIT_NAMES`).
        err_pc: ``CORE_ERR_PC``: index of the failing instruction.
        err_addr: ``CORE_ERR_ADDR``: the memory address involved.
        counters: Counter name (`xrt.hw.regs.PERF_COUNTERS`) -> its 64-bit value; START
            cleared them, so they count this launch alone.
    """

    status: int
    err_code: int
    err_unit: int
    err_pc: int
    err_addr: int
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """``CORE_STATUS.DONE``: the program reached FINISH."""
        return bool(_DONE.extract(self.status))

    @property
    def ok(self) -> bool:
        """FINISH reached without an error."""
        return self.done and self.err_code == 0

    def describe(self) -> str:
        """The error in words: code name, instruction, unit, address and what it means."""
        if self.err_code == 0:
            return "no error" if self.done else f"not done (status {self.status:#x})"
        try:
            err = EngineError(self.err_code)
            name, text = err.name, ERROR_TEXT[err]
        except ValueError:
            name, text = f"code {self.err_code}", "unknown error code"
        unit = UNIT_NAMES.get(self.err_unit, "?")
        return (
            f"NPU error {name} at instruction {self.err_pc} ({unit} unit), "
            f"address {self.err_addr:#x}: {text}"
        )


def decode_status(values: Sequence[int | None]) -> EngineOutcome:
    """The `EngineOutcome` (without counters) in the results of `status_ops`."""
    status, pc, lo, hi = (int(v or 0) for v in values[:4])
    return EngineOutcome(
        status=status,
        err_code=_ERR_CODE.extract(status),
        err_unit=_ERR_UNIT.extract(status),
        err_pc=pc,
        err_addr=(hi << 32) | lo,
    )


def decode_readout(values: Sequence[int | None]) -> EngineOutcome:
    """The `EngineOutcome` in the results of a `readout_ops` batch (`status_ops`' reads
    first, then the counters)."""
    counters = {}
    for i, name in enumerate(PERF_COUNTERS):
        c_lo, c_hi = values[4 + 2 * i], values[5 + 2 * i]
        counters[name] = (int(c_hi or 0) << 32) | int(c_lo or 0)
    return replace(decode_status(values), counters=counters)
