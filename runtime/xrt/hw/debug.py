"""The debugger's records: what a holder asks of a simulated device's stop unit and what it
answers (docs/debugging.md, "Debugger").

The stop unit is in the simulator (rtl/sim/npu_debug.h): breakpoints are compared in its
C++ main loop, once a cycle, and a hit stops the model where it is; the worker's Python then
serves `DebugRequest` records on its pipe until one resumes the device. These records cross
the worker's pipe beside the device port's (`xrt.hw.port`), but they are not requests of
the port: a debugger looks at the device and steers its clock, it changes nothing a driver
or a recording sees, so no tap sees them and recordings leave them out.

The numbers of `BreakKind`, `StopReason` and `StepKind` are the C++ unit's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = [
    "INSN_BYTES",
    "BreakKind",
    "Breakpoint",
    "DebugOp",
    "DebugReply",
    "DebugRequest",
    "EngineState",
    "RegAccess",
    "StepKind",
    "StopReason",
    "decode_debug_reply",
    "decode_debug_request",
    "encode_debug_reply",
    "encode_debug_request",
]

INSN_BYTES = 32  # one instruction (docs/isa.md)


class BreakKind(enum.IntEnum):
    """What a breakpoint watches."""

    CYCLE = 1  # value: the simulated cycle
    REGISTER = 2  # value: the register's bus address; arg: a `RegAccess`
    IRQ = 3  # the interrupt line rises
    INSN = 4  # value: an instruction's index in the program, as it enters decode
    DMA = 5  # value: a DMA transfer's index, counted from the breakpoint's arming
    DMA_ADDR = 6  # value: a DMA transfer's source or destination address


class RegAccess(enum.IntFlag):
    """Which accesses of a register breakpoint stop."""

    READ = 1
    WRITE = 2
    EITHER = 3


class StopReason(enum.IntEnum):
    """Why the device is stopped (RUNNING: it is not)."""

    RUNNING = 0
    BREAKPOINT = 1
    STEP = 2


class StepKind(enum.IntEnum):
    """How the device resumes."""

    CONTINUE = 0
    CYCLES = 1
    INSNS = 2


class DebugOp(enum.Enum):
    """What a `DebugRequest` asks."""

    BREAK = "break"  # arm (kind, value, arg); the reply's `created` is its id
    DELETE = "delete"  # value: a breakpoint's id, 0 for all
    STATE = "state"  # nothing changes: the state and the breakpoints
    RESUME = "resume"  # kind: a `StepKind`; value: cycles or instructions to step
    CLEAR = "clear"  # every breakpoint gone, the device running (a lease's end)
    WAVES_ON = "waves_on"  # a waveform window open from now (unless one is): a traced model
    WAVES_OFF = "waves_off"  # close it; the reply's `wave` is its file


@dataclass(frozen=True)
class DebugRequest:
    """One request of the debugger (see `DebugOp` for what the fields mean per op)."""

    TAG: ClassVar[str] = "debug"
    op: str
    kind: int = 0
    value: int = 0
    arg: int = 0

    def __post_init__(self) -> None:
        DebugOp(self.op)  # ValueError for an op nobody knows
        for name in ("kind", "value", "arg"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 64:
                raise ValueError(f"debug request {self.op}: {name} {v!r} is not a u64")


@dataclass(frozen=True)
class Breakpoint:
    """A breakpoint armed, with how often it hit."""

    id: int
    kind: BreakKind
    value: int
    arg: int
    hits: int

    def describe(self) -> str:
        """One line, as ``info breakpoints`` shows it."""
        k = self.kind
        what = {
            BreakKind.CYCLE: f"cycle {self.value}",
            BreakKind.REGISTER: f"register {self.value:#x} "
            + {1: "read", 2: "write", 3: "read or write"}.get(self.arg, "?"),
            BreakKind.IRQ: "interrupt line rises",
            BreakKind.INSN: f"instruction {self.value}",
            BreakKind.DMA: f"DMA transfer {self.value}",
            BreakKind.DMA_ADDR: f"DMA transfer from or to {self.value:#x}",
        }[k]
        return f"{self.id}: {what} (hit {self.hits} time{'s' if self.hits != 1 else ''})"


@dataclass(frozen=True)
class EngineState:
    """The device as the stop unit sees it, read without advancing time.

    `cycle` is the cycle of the stop while stopped (else of the last cycle looked at);
    `decoding` says whether decode holds an instruction, `pc` its index and `insn` its 32
    bytes; `units_busy` and `queues` are bit masks over (LOAD, COMPUTE, STORE): the units
    running and the instruction queues not empty; `dma_state` is the DMA core's (0 idle, 1
    checking, 2 running, 3 finishing) with the transfer's `dma_src` and `dma_dst`.
    """

    stopped: bool
    reason: StopReason
    hit: int
    cycle: int
    decoding: bool
    pc: int
    insn: bytes
    units_busy: int
    queues: int
    dma_state: int
    dma_src: int
    dma_dst: int
    irq: bool
    busy: bool
    paused_ms: int
    step_left: int

    def describe(self) -> str:
        """Lines, as ``info engine`` shows them."""
        units = ",".join(
            n for i, n in enumerate(("load", "compute", "store")) if self.units_busy >> i & 1
        )
        queues = ",".join(
            n for i, n in enumerate(("load", "compute", "store")) if self.queues >> i & 1
        )
        dma = ("idle", "checking", "running", "finishing")[self.dma_state & 3]
        state = f"stopped ({self.reason.name.lower()}" + (f" {self.hit})" if self.hit else ")")
        lines = [
            f"state      {state if self.stopped else 'running'}",
            f"cycle      {self.cycle}",
            f"decode     instruction {self.pc}" if self.decoding else "decode     empty",
            f"insn       {self.insn[::-1].hex()}" if self.decoding else "",
            f"units busy {units or 'none'}",
            f"queues     {queues or 'all empty'}",
            f"dma        {dma} src {self.dma_src:#x} dst {self.dma_dst:#x}",
            f"irq {int(self.irq)}  busy {int(self.busy)}",
        ]
        return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class DebugReply:
    """The answer to every `DebugRequest`: the state after it, the breakpoints, the id of
    the breakpoint a BREAK created (0 otherwise), and how often the device has stopped (its
    worker counts: a waiter for the next stop compares with the count of the same reply)."""

    TAG: ClassVar[str] = "debug_state"
    state: EngineState
    breakpoints: tuple[Breakpoint, ...]
    created: int = 0
    stops: int = 0
    wave: tuple[str, int, int] | None = None  # WAVES_OFF: (file, first cycle, last cycle)


def encode_debug_request(req_id: int, request: DebugRequest) -> dict[str, Any]:
    """A pipe frame's map for `request`."""
    return {"id": req_id, "t": DebugRequest.TAG, "op": request.op, "kind": request.kind,
            "value": request.value, "arg": request.arg}  # fmt: skip


def decode_debug_request(msg: Mapping[str, Any]) -> tuple[int, DebugRequest]:
    """(id, request) of a frame's map (its ``t`` is `DebugRequest.TAG`).

    Raises:
        ValueError: a field missing or of the wrong type (named).
    """
    req_id = msg.get("id")
    if not isinstance(req_id, int):
        raise ValueError(f"debug request: id {req_id!r} is not an integer")
    op = msg.get("op")
    if not isinstance(op, str):
        raise ValueError(f"debug request: op {op!r} is not a string")
    return req_id, DebugRequest(op, msg.get("kind", 0), msg.get("value", 0), msg.get("arg", 0))


def encode_debug_reply(req_id: int, reply: DebugReply) -> dict[str, Any]:
    """A pipe frame's map for `reply` (answering request `req_id`)."""
    state = {f.name: getattr(reply.state, f.name) for f in fields(EngineState)}
    state["reason"] = int(reply.state.reason)
    points = [[b.id, int(b.kind), b.value, b.arg, b.hits] for b in reply.breakpoints]
    return {"id": req_id, "t": DebugReply.TAG, "state": state, "breakpoints": points,
            "created": reply.created, "stops": reply.stops,
            "wave": list(reply.wave) if reply.wave else None}  # fmt: skip


def decode_debug_reply(msg: Mapping[str, Any]) -> DebugReply:
    """The reply in a frame's map.

    Raises:
        ValueError: not a debugger's reply.
    """
    if msg.get("t") != DebugReply.TAG:
        raise ValueError(f"not a debugger's reply: {msg.get('t')!r}")
    s = dict(msg["state"])
    s["reason"] = StopReason(s["reason"])
    s["insn"] = bytes(s["insn"])
    state = EngineState(**s)
    points = tuple(
        Breakpoint(int(i), BreakKind(k), int(v), int(a), int(h))
        for i, k, v, a, h in msg["breakpoints"]
    )
    wave = msg.get("wave")
    file = (str(wave[0]), int(wave[1]), int(wave[2])) if wave else None
    return DebugReply(state, points, int(msg.get("created", 0)), int(msg.get("stops", 0)), file)
