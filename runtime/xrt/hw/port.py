"""The device port: everything a simulated device does, as typed request and reply records.

Every request a simulator serves is one of the records below, whatever route brings it
(docs/architecture.md, "The device port"):

- the worker pipe (the server's hop to the simulator process: `xrt.hw.port_pipe` makes a
  frame's map of a record and back);
- the register rings (the holder's and the server's, served by the simulator's C++ main
  loop: a `RegBatch` is the ring's own records, `RegBatch.records`, and a `WaitIrq` its
  wait request);
- the wire (`xrt.hw.port_wire`: the gRPC messages of a register batch, both ways).

A register batch is one encoding on every route: the `REGBUS_OP` records the register bus
master takes (`xrt.hw.ring`), and its results the `REGBUS_RESULT` records it gives. A single
read or write is a batch of one.

Replies are records too; a request that failed has a `PortError` with a `PortErrorCode`,
never a message to be matched by its text. Taps (the recorder, the register trace,
lockstep) see every request with its reply as a `Served` record, whatever the route.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, TypeAlias, TypeVar

from xrt.hw.regops import (
    DEFAULT_POLL_CYCLES,
    MASK32,
    RegKind,
    RegMaskedWrite,
    RegOp,
    RegPoll,
    RegRead,
    RegRow,
    RegWrite,
    poll_max_cycles,
)
from xrt.hw.ring import REGBUS_OP, REGBUS_RESULT, RingSlot
from xrt.hw.wire import RegisterStatus, WaitOutcome

__all__ = [
    "READ_ONLY_REQUESTS",
    "Advance",
    "Cancel",
    "DeviceEvent",
    "Done",
    "ModelRestore",
    "ModelSave",
    "PortError",
    "PortErrorCode",
    "PristineRestore",
    "PristineSave",
    "Quit",
    "RegBatch",
    "RegResults",
    "Remap",
    "Reply",
    "ReplyBody",
    "Request",
    "Reset",
    "RingAttach",
    "RingDetach",
    "Route",
    "Served",
    "StateSaved",
    "StateTime",
    "TapFlush",
    "WaitIrq",
    "WaitResult",
    "WatchRings",
    "WavesForget",
    "WavesStart",
    "WavesState",
    "WavesStatus",
    "WavesStop",
    "WavesWindow",
    "read_only_refusal",
]

_PACK_OP = REGBUS_OP.format.pack
_OP_SIZE = REGBUS_OP.size
_RESULT_SIZE = REGBUS_RESULT.size


class Route(enum.IntEnum):
    """How a request reached the simulator (taps may tell them apart; nothing else does)."""

    PIPE = 0  # the worker's request loop (the server's hop, a replay)
    SERVER_RING = 1  # the server's register ring (a holder's gRPC register requests)
    LEASE_RING = 2  # the holder's own register ring (a client on the server's machine)


# ------------------------------------------------------------------------ requests
@dataclass(frozen=True, slots=True)
class RegBatch:
    """Register operations run in order, stopping at the first that is not OK: `records`
    holds `n` `REGBUS_OP` records (kind, addr, value, mask, expected, 0, max_cycles)."""

    records: bytes
    n: int

    TAG: ClassVar[str] = "batch"

    @classmethod
    def of_rows(cls, rows: Sequence[RegRow | tuple[int, int, int, int, int, int]]) -> RegBatch:
        """From rows (`xrt.hw.regops.RegRow` fields); values, masks and expected values are
        taken modulo 2**32.

        Raises:
            ValueError: an unknown kind, an address outside 32 bits, a negative limit.
        """
        try:
            try:  # rows holding 32-bit values already need no masking (40% faster)
                data = b"".join([_PACK_OP(k, a, v, m, e, 0, c) for k, a, v, m, e, c in rows])
            except struct.error:
                data = b"".join(
                    [_PACK_OP(k, a, v & MASK32, m & MASK32, e & MASK32, 0, c)
                     for k, a, v, m, e, c in rows]
                )  # fmt: skip
        except struct.error as exc:
            raise ValueError(f"register operation out of range: {exc}") from None
        batch = cls(data, len(rows))
        batch.check_kinds()
        return batch

    @classmethod
    def of_ops(cls, ops: Sequence[RegOp]) -> RegBatch:
        """From the data model's records (`RegRegion.execute` checked them); a poll's limit
        is its `poll_max_cycles`."""
        parts: list[bytes] = []
        append = parts.append
        for op in ops:
            kind = type(op)
            # (`type(op) is` first: the common case at a fifth of isinstance's cost; the
            # isinstance after it narrows the type for the checker and costs nothing more)
            if kind is RegRead:
                append(_read_record(op.addr))
            elif kind is RegWrite and isinstance(op, RegWrite):
                append(_PACK_OP(RegKind.WRITE, op.addr, op.value & MASK32, MASK32, 0, 0, 0))
            elif kind is RegMaskedWrite and isinstance(op, RegMaskedWrite):
                append(_PACK_OP(RegKind.MASKED_WRITE, op.addr, op.value & MASK32,
                                op.mask & MASK32, 0, 0, 0))  # fmt: skip
            elif isinstance(op, RegPoll):
                append(_PACK_OP(RegKind.POLL, op.addr, 0, op.mask & MASK32,
                                op.expected & MASK32, 0, poll_max_cycles(op)))  # fmt: skip
            else:
                raise TypeError(f"not a register operation: {op!r}")
        return cls(b"".join(parts), len(ops))

    @classmethod
    def read(cls, addr: int) -> RegBatch:
        return cls(_read_record(addr), 1)

    @classmethod
    def write(cls, addr: int, value: int) -> RegBatch:
        return cls(_PACK_OP(RegKind.WRITE, addr, value & MASK32, MASK32, 0, 0, 0), 1)

    def rows(self) -> list[RegRow]:
        """The operations as rows."""
        return [
            RegRow(RegKind(k), a, v, m, e, c)
            for k, a, v, m, e, _, c in REGBUS_OP.format.iter_unpack(self.records)
        ]

    def check_kinds(self) -> None:
        """Raises ValueError for an operation of no known kind (or a size that is not `n`
        records)."""
        if len(self.records) != self.n * _OP_SIZE:
            raise ValueError(f"{len(self.records)} bytes are not {self.n} register operations")
        for i, (kind, *_) in enumerate(REGBUS_OP.format.iter_unpack(self.records)):
            if kind not in _KINDS:
                raise ValueError(f"op {i}: unknown register operation kind {kind}")

    def polls(self) -> list[tuple[int, int]]:
        """(index, max_cycles) of each poll (0 means `DEFAULT_POLL_CYCLES`)."""
        return [
            (i, c or DEFAULT_POLL_CYCLES)
            for i, (k, _, _, _, _, _, c) in enumerate(REGBUS_OP.format.iter_unpack(self.records))
            if k == RegKind.POLL
        ]

    def poll_cycles(self) -> int:
        """Simulated cycles its polls may take in all."""
        return sum(c for _, c in self.polls())

    @property
    def has_poll(self) -> bool:
        return any(r[0] == RegKind.POLL for r in REGBUS_OP.format.iter_unpack(self.records))


_KINDS = frozenset(int(k) for k in RegKind)


@lru_cache(maxsize=1024)
def _read_record(addr: int) -> bytes:  # polls reread the same few registers
    return _PACK_OP(RegKind.READ, addr, 0, MASK32, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class WaitIrq:
    """Run the clock until the interrupt line is high: at most `max_cycles` simulated
    cycles and `wall_s` wall-clock seconds."""

    max_cycles: int
    wall_s: float
    TAG: ClassVar[str] = "wait_irq"


@dataclass(frozen=True, slots=True)
class Reset:
    """Pulse the device's reset (registers to their reset values; memories kept)."""

    TAG: ClassVar[str] = "reset"


@dataclass(frozen=True, slots=True)
class ModelSave:
    """Save the model's state into the file `path` (engines idle, or waiting up to
    `max_cycles` for them); then read the registers at `read` and put the saved state back
    (a checkpoint's configuration registers)."""

    path: str
    max_cycles: int = 0
    read: tuple[int, ...] = ()
    TAG: ClassVar[str] = "model_save"


@dataclass(frozen=True, slots=True)
class ModelRestore:
    """Restore the model's state from the file `path` (checked against the model's own
    layout first: rtl/sim/npu_model_state.h)."""

    path: str
    TAG: ClassVar[str] = "model_restore"


@dataclass(frozen=True, slots=True)
class PristineSave:
    """The state now becomes the one every lease starts from (a warm start)."""

    TAG: ClassVar[str] = "pristine_save"


@dataclass(frozen=True, slots=True)
class PristineRestore:
    """Back to the state every lease starts from (a lease has ended)."""

    TAG: ClassVar[str] = "pristine_restore"


@dataclass(frozen=True, slots=True)
class Remap:
    """Map the memory file that comes over the descriptor channel over the one mapped from
    (device, inode) `old`."""

    old: tuple[int, int]
    TAG: ClassVar[str] = "remap"


@dataclass(frozen=True, slots=True)
class RingAttach:
    """Serve the register ring whose file and eventfds come over the descriptor channel."""

    slot: RingSlot = RingSlot.LEASE
    TAG: ClassVar[str] = "ring_attach"


@dataclass(frozen=True, slots=True)
class RingDetach:
    """Forget the ring of `slot`."""

    slot: RingSlot = RingSlot.LEASE
    TAG: ClassVar[str] = "ring_detach"


@dataclass(frozen=True, slots=True)
class WavesStart:
    """Open a waveform window: `cycles` long, or until `WavesStop` (0); of the signals under
    the comma-separated hierarchical names of `signals` ("": every signal)."""

    cycles: int = 0
    signals: str = ""
    TAG: ClassVar[str] = "waves_start"


@dataclass(frozen=True, slots=True)
class WavesStop:
    """Close the open window; name the file of the last one."""

    TAG: ClassVar[str] = "waves_stop"


@dataclass(frozen=True, slots=True)
class WavesStatus:
    """The observer's window: its state and first cycle (read-only requests only)."""

    TAG: ClassVar[str] = "waves_status"


@dataclass(frozen=True, slots=True)
class WavesForget:
    """This lease's window is not the next lease's."""

    TAG: ClassVar[str] = "waves_forget"


@dataclass(frozen=True, slots=True)
class Advance:
    """Replay: run the clock to the instant `to_ps` (None: stay)."""

    to_ps: int | None = None
    TAG: ClassVar[str] = "advance"


@dataclass(frozen=True, slots=True)
class TapFlush:
    """Hand the taps every request served so far (ring requests included) before this
    one is answered: a sync point for what the server records itself (memory accesses)."""

    TAG: ClassVar[str] = "tap_flush"


@dataclass(frozen=True, slots=True)
class WatchRings:
    """Hand every register ring's request to the port while `on` (someone follows the
    device's log: its device-side lines must see every request); off: only while taps are
    on, as before."""

    on: bool
    TAG: ClassVar[str] = "watch_rings"


@dataclass(frozen=True, slots=True)
class Cancel:
    """Stop the request of id `of` (its caller went away). A control message: no reply."""

    of: int
    TAG: ClassVar[str] = "cancel"


@dataclass(frozen=True, slots=True)
class Quit:
    """Stop the worker (it closes a waveform window left open first)."""

    TAG: ClassVar[str] = "quit"


Request: TypeAlias = (
    RegBatch | WaitIrq | Reset | ModelSave | ModelRestore | PristineSave | PristineRestore
    | Remap | RingAttach | RingDetach | WavesStart | WavesStop | WavesStatus | WavesForget
    | Advance | TapFlush | WatchRings | Cancel | Quit
)  # fmt: skip

READ_ONLY_REQUESTS = (RegBatch, WavesStart, WavesStatus, WavesStop)
"""What an observer's read-only request may be (`read_only_refusal` says more)."""


# ------------------------------------------------------------------------ replies
@dataclass(frozen=True, slots=True)
class Done:
    """A request that answers nothing but that it was done."""

    TAG: ClassVar[str] = "done"


@dataclass(frozen=True, slots=True)
class RegResults:
    """One `REGBUS_RESULT` record (status, value, cycles) per operation run (a batch stops
    after the first that is not OK)."""

    records: bytes
    TAG: ClassVar[str] = "results"

    @classmethod
    def of(cls, results: Iterable[tuple[int, int, int]]) -> RegResults:
        pack = REGBUS_RESULT.format.pack
        return cls(b"".join([pack(s, v, c) for s, v, c in results]))

    def __len__(self) -> int:
        return len(self.records) // _RESULT_SIZE

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return REGBUS_RESULT.format.iter_unpack(self.records)

    def pairs(self) -> list[tuple[int, int]]:
        """(status, value) per operation run."""
        return [(s, v) for s, v, _ in self]

    @property
    def all_ok(self) -> bool:
        return all(s == RegisterStatus.OK for s, _, _ in self)


@dataclass(frozen=True, slots=True)
class WaitResult:
    """How a `WaitIrq` ended (`xrt.hw.wire.WaitOutcome`) and the cycles it waited."""

    outcome: int
    waited: int
    TAG: ClassVar[str] = "waited"

    @property
    def interrupted(self) -> bool:
        return self.outcome == WaitOutcome.INTERRUPT


@dataclass(frozen=True, slots=True)
class StateTime:
    """A state saved, restored or made pristine: the simulated instant (ps) it is of."""

    time_ps: int
    TAG: ClassVar[str] = "state_time"


@dataclass(frozen=True, slots=True)
class StateSaved:
    """A `ModelSave` done: the instant the state is of, and (status, value) per address
    read after it."""

    time_ps: int
    registers: tuple[tuple[int, int], ...] = ()
    TAG: ClassVar[str] = "state_saved"


@dataclass(frozen=True, slots=True)
class WavesWindow:
    """A window's file (path, first cycle, last cycle) or None; for an observer also the
    state of its window (`state`) and its first cycle."""

    file: tuple[str, int, int] | None = None
    state: str = ""
    first: int = 0
    TAG: ClassVar[str] = "waves_window"


@dataclass(frozen=True, slots=True)
class WavesState:
    """The observer's window (`WavesStatus`)."""

    state: str
    first: int
    TAG: ClassVar[str] = "waves_state"


ReplyBody: TypeAlias = (
    Done | RegResults | WaitResult | StateTime | StateSaved | WavesWindow | WavesState
)
_Body = TypeVar("_Body", Done, RegResults, WaitResult, StateTime, StateSaved, WavesWindow,
                WavesState)  # fmt: skip


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    """Something the simulated device did that its log reports, as a device's own log
    does (the AIC100 runtime's device log): not a reply, an event the worker sends on its
    own (``interrupt``, ``engine_error``, ``dma_error``, ``reset``).

    Attributes:
        kind: What happened (the names above).
        cycle: The device's cycle when the worker saw it: at the end of the request that
            showed it.
        level: A `logging` level (errors are ERROR, the rest INFO).
        message: The event in words (``compute engine error ADDR_RANGE at instruction 3
            (load unit), address 0x...``).
    """

    kind: str
    cycle: int
    level: int
    message: str
    TAG: ClassVar[str] = "device_event"


class PortErrorCode(enum.StrEnum):
    """Why a request failed: the caller's to fix (the first five), or the worker's own."""

    BUSY = "busy"  # a state save or restore while an engine runs
    BAD_STATE = "bad_state"  # a model state that is not this model's
    BAD_REQUEST = "bad_request"  # a request out of range (the simulator checked it)
    READ_ONLY = "read_only"  # an observer's request that is not a pure read
    WAVES_UNAVAILABLE = "waves_unavailable"  # no waveforms on this server or model
    UNSUPPORTED = "unsupported"  # the model cannot do it (a coverage build, no ring)
    INTERNAL = "internal"  # a failure of the worker itself


@dataclass(frozen=True, slots=True)
class PortError:
    code: PortErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to request `id`: its body or its error (or that it was cancelled), the
    device's cycles after it, and the simulated instant it started at (ps)."""

    id: int
    cycles: int
    start_ps: int | None = None
    body: ReplyBody | None = None
    error: PortError | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled

    def body_as(self, kind: type[_Body]) -> _Body:
        """The body, which the request's type says is a `kind` (TypeError otherwise: a bug
        of the worker's, not an answer)."""
        if not isinstance(self.body, kind):
            raise TypeError(f"reply {self.id}: {type(self.body).__name__}, not {kind.__name__}")
        return self.body


@dataclass(frozen=True, slots=True)
class Served:
    """What a tap sees: one request with its reply, the route it came by, whether it was
    an observer's (read-only), and the simulated instant it started at."""

    request: Request
    reply: Reply
    route: Route = Route.PIPE
    read_only: bool = False


# ------------------------------------------------------------------------ read-only requests
def read_only_refusal(request: Request, side_effects: Mapping[int, str]) -> str:
    """Why the read-only (an observer's) `request` must not run (``""``: it may): only
    `READ_ONLY_REQUESTS`, and a register batch only of reads of registers whose read has no
    side effect (`side_effects`: address -> why reading it changes the device,
    `xrt.hw.regs.read_side_effects`)."""
    if not isinstance(request, READ_ONLY_REQUESTS):
        return f"{request.TAG!r} is not a read-only request"
    if not isinstance(request, RegBatch):
        return ""
    for i, (kind, addr, *_) in enumerate(REGBUS_OP.format.iter_unpack(request.records)):
        if kind != RegKind.READ:
            name = RegKind(kind).name.lower() if kind in _KINDS else repr(kind)
            return f"op {i} is a {name}, not a read"
        why = side_effects.get(addr)
        if why:
            return why
    return ""


assert _OP_SIZE == 32 and _RESULT_SIZE == 16, "the ring's records (xrt.hw.ring)"
