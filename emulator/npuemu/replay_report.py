"""What ``npu-emu replay`` reports: the first divergence and the summary it prints
(`npuemu.replay`), and the names it gives register statuses, wait outcomes and op kinds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xrt.hw.regops import RegKind
from xrt.hw.wire import RegisterStatus, WaitOutcome
from xrt.recording import Record

__all__ = [
    "Divergence",
    "ReplayReport",
    "kind_name",
    "outcome_name",
    "result_text",
    "status_name",
]


@dataclass(frozen=True)
class Divergence:
    """The first response of a replay that differs from the recorded one."""

    index: int  # the request's index (records of `REQUEST_KINDS`, from 0)
    record: Record
    op: str
    what: str
    expected: str
    actual: str

    def describe(self) -> str:
        return (
            f"request #{self.index} ({self.op}; record {self.record.index} at byte offset "
            f"{self.record.offset}): {self.what}: expected {self.expected}, actual {self.actual}"
        )


@dataclass
class ReplayReport:
    """What a replay did."""

    path: Path
    target: str
    model: str
    check: bool
    requests: int = 0  # replayed (and, with check, compared)
    register_requests: int = 0
    memory_requests: int = 0
    total: int = 0  # requests in the recording
    cycles: int = 0  # the last worker request's cycle count, relative to the lease's first
    recorded_cycles: int = 0
    wall_s: float = 0.0
    lease_s: float | None = None  # how long the recorded lease lasted
    notes: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    complete: bool = False  # replayed to the end record
    responses: str = ""  # SHA-256 of every replayed response (equal replays: equal digests)
    wall_clock: bool = False  # a board's recording: no instants or cycles to compare

    def to_dict(self) -> dict[str, object]:
        """The summary as ``npu-emu replay --json`` prints it."""
        doc: dict[str, object] = {
            "recording": str(self.path),
            "target": self.target,
            "model": self.model,
            "requests": self.requests,
            "total": self.total,
            "register_requests": self.register_requests,
            "memory_requests": self.memory_requests,
            "cycles": None if self.wall_clock else self.cycles,
            "recorded_cycles": None if self.wall_clock else self.recorded_cycles,
            "board_recording": self.wall_clock,
            "responses_sha256": self.responses,
            "wall_s": round(self.wall_s, 3),
            "lease_s": self.lease_s,
            "notes": self.notes,
            "complete": self.complete,
        }
        if self.check:
            doc["bit_exact"] = self.divergence is None
            if self.divergence is not None:
                d = self.divergence
                doc["divergence"] = {
                    "request": d.index,
                    "op": d.op,
                    "record": d.record.index,
                    "offset": d.record.offset,
                    "what": d.what,
                    "expected": d.expected,
                    "actual": d.actual,
                }
        return doc

    def lines(self) -> list[str]:
        """The summary ``npu-emu replay`` prints."""
        recorded = (
            "a board recording: wall-clock times, no cycles recorded or compared"
            if self.wall_clock
            else f"recorded {self.recorded_cycles:,}"
        )
        session = "session" if self.wall_clock else "lease"
        took = f", the recorded {session} {self.lease_s:.2f} s" if self.lease_s is not None else ""
        out = [
            f"replayed {self.path.name} on {self.target} (model {self.model}): "
            f"{self.requests:,} of {self.total:,} request(s) ({self.register_requests:,} to "
            f"the device, {self.memory_requests:,} of memory)",
            f"  simulated cycles {self.cycles:,} ({recorded}); "
            f"responses sha256 {self.responses[:16]}; replay {self.wall_s:.2f} s wall" + took,
        ]
        out += [f"note: {n}" for n in self.notes]
        if not self.check:
            return out
        if self.divergence is not None:
            out.append(f"DIVERGED at {self.divergence.describe()}")
        else:
            cut = "" if self.complete else " (up to where the recording stops)"
            what = (
                "every register value, poll result, interrupt wait outcome and memory read "
                "back as recorded on the board (instants, cycle counts and poll read counts "
                "are not compared: the board counted no cycles)"
                if self.wall_clock
                else "every response, start instant and cycle count as recorded"
            )
            out.append(f"bit-exact: {self.requests:,} request(s) compared{cut}: {what}")
        return out


def status_name(s: int) -> str:
    return RegisterStatus(s).name if s in RegisterStatus._value2member_map_ else str(s)


def result_text(status: int, value: int) -> str:
    return f"{status_name(status)} {int(value):#010x}"


def outcome_name(o: int) -> str:
    return WaitOutcome(o).name if o in WaitOutcome._value2member_map_ else str(o)


def kind_name(kind: int) -> str:
    return RegKind(kind).name.lower() if kind in RegKind._value2member_map_ else str(kind)
