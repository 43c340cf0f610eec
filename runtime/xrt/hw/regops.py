"""Register operations: the records a driver batches, and the form the device runs them in.

A driver (the runtime's `RegRegion.execute`, the engine launch sequence in
`xrt.hw.engine`, the emulator's harness) describes register work as `RegRead`, `RegWrite`,
`RegMaskedWrite` and `RegPoll` records. Where they cross to a device that counts simulated
cycles (the device server's ``RegisterBatch``, the simulator's register bus master) each
becomes a `RegRow`: the op's kind and fields, a poll's limit in cycles (`poll_max_cycles`),
and gives a `RegResult`. On the server <-> worker hop rows and results travel as plain
arrays in these records' field order (building a record per op of a 4096-op batch would
cost the hot path more than the hop itself).

Poll limits: the device counts simulated cycles, the data model counts reads and seconds.
A `RegPoll` becomes a row whose ``max_cycles`` is the smaller of (a) the cycles the
device's back-off (reads `POLL_FIRST_INTERVAL`, then twice as far apart up to
`POLL_MAX_INTERVAL` cycles: ``rtl/config/npu.toml``) takes to make `max_polls` reads, and
(b) `timeout_s` at `POLL_CYCLES_PER_S` simulated cycles per second (1,000,000: about what
the simulator runs per wall-clock second here). So ``timeout_s=1.0`` is a budget of a
million cycles: a deterministic limit, which a slow or loaded machine cannot turn into a
spurious timeout.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

from xrt.hw.targets import POLL_FIRST_INTERVAL, POLL_MAX_INTERVAL
from xrt.hw.wire import RegisterStatus

__all__ = [
    "DEFAULT_POLL_CYCLES",
    "MASK32",
    "MAX_POLL_CYCLES",
    "POLL_CYCLES_PER_S",
    "RegKind",
    "RegMaskedWrite",
    "RegOp",
    "RegPoll",
    "RegRead",
    "RegResult",
    "RegRow",
    "RegWrite",
    "poll_max_cycles",
    "to_row",
]

MASK32 = 0xFFFF_FFFF
POLL_CYCLES_PER_S = 1_000_000
"""Simulated cycles per second of a poll's `timeout_s` (see the module docstring)."""
MAX_POLL_CYCLES = 1 << 40
DEFAULT_POLL_CYCLES = 1_000_000
"""A poll row's ``max_cycles`` of 0 means this many (the server's RegisterBatch and the
register ring alike)."""
"""The longest poll a device accepts, in cycles."""


@dataclass(frozen=True, slots=True)
class RegRead:
    """Read the register at `addr`; the result is the value read."""

    addr: int


@dataclass(frozen=True, slots=True)
class RegWrite:
    """Write `value` to the register at `addr`; the result is None."""

    addr: int
    value: int


@dataclass(frozen=True, slots=True)
class RegMaskedWrite:
    """Read-modify-write: ``new = (old & ~mask) | (value & mask)``; the result is None."""

    addr: int
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class RegPoll:
    """Read `addr` until ``value & mask == expected``; the result is the matching value.

    Fails with XrtError 11015 after `max_polls` reads or `timeout_s` seconds, whichever
    comes first (at least one read is always made). With neither given, the limit is the
    region's default (`xrt.registers.DEFAULT_POLL_TIMEOUT_S`).
    """

    addr: int
    mask: int
    expected: int
    max_polls: int | None = None
    timeout_s: float | None = None
    interval_s: float = 0.0


RegOp: TypeAlias = RegRead | RegWrite | RegMaskedWrite | RegPoll


class RegKind(enum.IntEnum):
    """A row's kind, numbered as the simulation's register bus master takes them
    (``regbus_op_e`` in ``rtl/sim/npu_regbus_dpi_pkg.sv``)."""

    READ = 0
    WRITE = 1
    MASKED_WRITE = 2
    POLL = 3


class RegRow(NamedTuple):
    """One register operation as a device that counts cycles runs it.

    Attributes:
        kind: What to do.
        addr: Physical address of the register.
        value: The value to write (WRITE, MASKED_WRITE); 0 otherwise.
        mask: The bits a MASKED_WRITE changes or a POLL compares; all ones otherwise.
        expected: The value the masked bits of a POLL wait for; 0 otherwise.
        max_cycles: A POLL's limit in simulated cycles; 0 otherwise.
    """

    kind: RegKind
    addr: int
    value: int = 0
    mask: int = MASK32
    expected: int = 0
    max_cycles: int = 0


class RegResult(NamedTuple):
    """What one row gave: its status, the value (read, polled, or written by a masked
    write; 0 otherwise) and the simulated cycles it took."""

    status: RegisterStatus
    value: int
    cycles: int = 0

    @property
    def ok(self) -> bool:
        return self.status == RegisterStatus.OK


def _cycles_for_polls(polls: int) -> int:
    """Cycles after which the device has made `polls` reads (and stops)."""
    waits = polls - 1
    doublings = int(math.log2(POLL_MAX_INTERVAL // POLL_FIRST_INTERVAL))
    if waits <= doublings:
        total = POLL_FIRST_INTERVAL * ((1 << waits) - 1)
    else:
        total = POLL_FIRST_INTERVAL * ((1 << doublings) - 1) + POLL_MAX_INTERVAL * (
            waits - doublings
        )
    return total + 1


def poll_max_cycles(op: RegPoll) -> int:
    """The ``max_cycles`` of the row a `RegPoll` becomes (see the module docstring)."""
    limits = []
    if op.max_polls is not None:
        limits.append(_cycles_for_polls(op.max_polls))
    if op.timeout_s is not None:
        limits.append(max(1, math.ceil(op.timeout_s * POLL_CYCLES_PER_S)))
    if not limits:  # checked ops always carry one; stay safe anyway
        limits.append(POLL_CYCLES_PER_S)
    return max(1, min(min(limits), MAX_POLL_CYCLES))


def to_row(op: RegOp) -> RegRow:
    """The row `op` runs as on a device that counts cycles."""
    if isinstance(op, RegRead):
        return RegRow(RegKind.READ, op.addr)
    if isinstance(op, RegWrite):
        return RegRow(RegKind.WRITE, op.addr, op.value)
    if isinstance(op, RegMaskedWrite):
        return RegRow(RegKind.MASKED_WRITE, op.addr, op.value, op.mask)
    if isinstance(op, RegPoll):
        return RegRow(RegKind.POLL, op.addr, 0, op.mask, op.expected, poll_max_cycles(op))
    raise TypeError(f"not a register operation: {op!r}")
