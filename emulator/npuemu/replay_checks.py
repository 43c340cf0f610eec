"""What ``npu-emu replay`` accepts of a recording, checked before anything runs.

A recording is a file users carry: hostile input. The reader (`xrt.recording_reader`)
bounds every frame by its kind and checks each record's fields against the format's schema
(`xrt.recording_schema`); this module checks them against the target the replay runs on
and against the replay's budget, record by record (`RecordChecker`), in one pass over the
file before the simulator starts (`scan`) and again as each record is replayed:

- **the header**: a simulated-clock recording's ``period_ps`` is the model's clock period;
  its device name is a plain name (it names a folder and waveform files);
- **times**: a request's start ``t`` (ps) and end ``c`` (cycles) never go back, a request
  ends no earlier than it starts, and both lie within the simulated-time budget;
- **waits**: a server recording's wait runs at most the cycles it waited in the recording
  (+1 when it saw the interrupt), never more than its own ``max_cycles``
  (`wait_budget`); a batch's poll that gave up keeps a limit within the cycles the batch
  took (one that matched runs with its recorded limit: the register bus master keeps the
  limit in its state, so changing it would change a later checkpoint's state; what is
  left of the budget cuts it);
- **a board's recording** (no recorded cycles): each wait and poll runs with the budget its
  limits give (`board_wait_cycles`); those that ran to their limit on the board (no
  interrupt, no match) must fit the budget together; the others are cut at what is left
  of the budget, and a replay that needs more stops there, saying so;
- **addresses**: registers inside the target's register blocks (after rebasing a board's),
  4-byte aligned; memory inside its host-visible memory.

The budget (`Budget`): ``--max-cycles`` simulated cycles (`DEFAULT_MAX_CYCLES`) and
``--max-wall-s`` seconds of wall time (`DEFAULT_MAX_WALL_S`) for the whole replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from npuemu.server.checkpoint import max_file_bytes
from xrt import exitcodes
from xrt.hw.config import TargetConfig
from xrt.hw.regops import MAX_POLL_CYCLES, POLL_CYCLES_PER_S, RegKind, RegPoll, poll_max_cycles
from xrt.hw.targets import CLOCK_PERIOD_PS, TARGETS, target
from xrt.hw.wire import RegisterStatus, WaitOutcome
from xrt.recording import Kind, Limits, Record, Recording, RecordingError
from xrt.recording_schema import show

__all__ = [
    "CHECKPOINT_KINDS",
    "DEFAULT_MAX_CYCLES",
    "DEFAULT_MAX_WALL_S",
    "REQUEST_KINDS",
    "Budget",
    "RecordChecker",
    "ReplayError",
    "Summary",
    "board_poll_cycles",
    "board_rebase",
    "board_wait_cycles",
    "limits_for",
    "listing_limits",
    "scan",
    "wait_budget",
]

REQUEST_KINDS = frozenset(
    {
        Kind.REQUEST,
        Kind.MEMORY_WRITE,
        Kind.MEMORY_READ,
        Kind.POLL,
        Kind.CHECKPOINT_SAVE,
        Kind.CHECKPOINT_RESTORE,
    }
)
"""The records a replay counts as requests (its request indices count these)."""
DEFAULT_MAX_CYCLES = 1 << 30
"""Simulated cycles a replay may run (10.7 simulated seconds at 100 MHz; about 6 to 18
minutes of simulation at 1 to 3 Mcycles/s, docs/performance.md)."""
DEFAULT_MAX_WALL_S = 3600.0
"""Wall-clock seconds a replay may take."""
_STOPS = (Kind.TRUNCATED, Kind.WORKER_RESTART)  # the replay goes no further
CHECKPOINT_KINDS = (Kind.CHECKPOINT_SAVE, Kind.CHECKPOINT_RESTORE)


@dataclass(frozen=True)
class Budget:
    """What one replay may spend: simulated cycles and wall-clock seconds."""

    max_cycles: int = DEFAULT_MAX_CYCLES
    max_wall_s: float = DEFAULT_MAX_WALL_S


class ReplayError(Exception):
    """The replay cannot run (another target or model, a device that failed, a budget
    spent); `status` is the exit status ``npu-emu replay`` gives it."""

    def __init__(self, message: str, status: int = exitcodes.FAILED) -> None:
        self.status = status
        super().__init__(message)


def limits_for(cfg: TargetConfig) -> Limits:
    """A replay's bounds on `cfg`'s records: a memory write's data by the host-visible
    memory, a checkpoint's file by the largest checkpoint of the target."""
    return Limits(memory_bytes=cfg.memory("udma").size, checkpoint_bytes=max_file_bytes(cfg))


def listing_limits(header: dict[str, Any]) -> Limits:
    """Bounds for reading a recording without replaying it: its target's, or the largest
    of all targets' when it names none this npu-emu knows."""
    name = header.get("target")
    cfgs = [target(name)] if name in TARGETS else list(TARGETS.values())
    each = [limits_for(c) for c in cfgs]
    return Limits(
        memory_bytes=max(x.memory_bytes for x in each),
        checkpoint_bytes=max(x.checkpoint_bytes for x in each),
    )


def wait_budget(max_cycles: int, outcome: int, waited: int) -> int:
    """The cycle budget of a replayed wait of a server's recording: a wait that saw the
    interrupt after W cycles gets W + 1 (a replay that diverges does not wait for ever),
    one that ended on its cycle limit or wall deadline exactly the W it waited; never
    more than its own `max_cycles`."""
    if outcome == WaitOutcome.INTERRUPT:
        return max(1, min(max_cycles, waited + 1))
    return max(1, min(max_cycles, waited))


def board_wait_cycles(max_cycles: int | None, timeout_s: float) -> int:
    """The cycle budget of a replayed board wait: the driver's, else its wall-clock timeout
    at `POLL_CYCLES_PER_S` (at least one cycle: a wait of 0 s just looks)."""
    if max_cycles:
        return max(1, min(int(max_cycles), MAX_POLL_CYCLES))
    return max(1, min(math.ceil(timeout_s * POLL_CYCLES_PER_S), MAX_POLL_CYCLES))


def board_poll_cycles(b: dict[str, Any]) -> int:
    """The cycle budget of a replayed board poll (its limits)."""
    limits = RegPoll(b["addr"], b["mask"], b["expected"], b.get("max_polls"), b.get("timeout_s"))
    return poll_max_cycles(limits)


def board_rebase(header: dict[str, Any], cfg: TargetConfig) -> list[tuple[int, int, int]]:
    """(board base, size, simulated base) of each register block a board has elsewhere."""
    sim_blocks = {"npu": cfg.npu_base, "dma": cfg.dma_base}
    return [
        (int(base), int(size), sim_blocks[name])
        for name, (base, size) in dict(header.get("blocks") or {}).items()
        if name in sim_blocks and int(base) != sim_blocks[name]
    ]


@dataclass
class Summary:
    """What a pass over a recording found (its records all passed `RecordChecker`)."""

    total: int = 0  # requests (records of `REQUEST_KINDS`)
    recorded_cycles: int = 0  # the last request's cycle count (a server's recording)
    end: dict[str, Any] | None = None
    states: list[tuple[int, int]] = field(default_factory=list)  # (record index, state_t)
    # of the checkpoints before anything that stops the replay


class RecordChecker:
    """Checks a recording's records, in order, against the target `cfg` and `budget` (see
    the module docstring); one checker per pass (times must not go back).

    Raises (from `check`):
        RecordingError: the record and field that is out of what the replay allows.
    """

    def __init__(self, rec: Recording, cfg: TargetConfig, budget: Budget) -> None:
        self.path = rec.path
        self.cfg = cfg
        self.budget = budget
        self.wall_clock = rec.wall_clock
        self.period = CLOCK_PERIOD_PS
        self.rebase = board_rebase(rec.header, cfg) if rec.wall_clock else []
        self.udma = cfg.memory("udma")
        self.stopped = False  # past a record the replay stops at
        self.last_t = 0
        self.last_c = 0
        self.committed = 0  # a board's cycles of waits and polls that run their whole budget
        h = rec.header
        if not rec.wall_clock and h.get("period_ps") != CLOCK_PERIOD_PS:
            self._fail_header(
                "period_ps",
                h.get("period_ps"),
                f"the {cfg.name} model's clock period is {CLOCK_PERIOD_PS} ps",
            )

    def _fail_header(self, name: str, value: Any, why: str) -> None:
        where = "record 0 at byte offset 8 (the header)"
        raise RecordingError(self.path, f"{where}: {name} = {show(value)}: {why}", 8, 0)

    def fail(self, rec: Record, name: str, value: Any, why: str) -> None:
        raise RecordingError(
            self.path,
            f"record {rec.index} at byte offset {rec.offset}: {name} = {show(value)}: {why}",
            rec.offset,
            rec.index,
        )

    def _past_budget(self, rec: Record, name: str, value: int, cycles: int) -> None:
        if cycles > self.budget.max_cycles:
            why = (
                f"past the replay's simulated-time budget of {self.budget.max_cycles:,} cycles "
                "(--max-cycles raises it)"
            )
            self.fail(rec, name, value, why)

    # ---------------------------------------------------------------- records
    def check(self, rec: Record) -> None:
        k, b = rec.kind, rec.body
        if k == Kind.END or self.stopped:
            return  # nothing after a stop is replayed (the reader checked its fields)
        if k in _STOPS:
            self.stopped = True
            return
        if k not in REQUEST_KINDS or (k == Kind.POLL and not self.wall_clock):
            raise RecordingError(
                self.path,
                f"record {rec.index} at byte offset {rec.offset} is of kind {show(k)}, which "
                "this replay does not know here (written by a newer npu-emu?)",
                rec.offset,
                rec.index,
            )
        if k == Kind.REQUEST:
            if b.get("unfinished"):
                self.stopped = True
                return
            self._request(rec, b["op"], b["args"], b["reply"])
        elif k == Kind.POLL:
            self._register(rec, "addr", b["addr"])
            if not b["matched"]:  # it ran to its limit on the board: so will the replay
                name = "timeout_s" if b.get("timeout_s") is not None else "max_polls"
                self._commit(rec, name, b.get(name), board_poll_cycles(b))
        elif k in (Kind.MEMORY_WRITE, Kind.MEMORY_READ):
            n = len(b["data"]) if k == Kind.MEMORY_WRITE else b["n"]
            if not self.udma.contains(b["address"], n):
                where = f"[{self.udma.base:#x}, {self.udma.end:#x})"
                why = f"{n:,} bytes there are outside {self.cfg.name}'s host-visible memory {where}"
                self.fail(rec, "address", b["address"], why)
        if k in (*CHECKPOINT_KINDS, Kind.REQUEST):
            self._times(rec, b)

    def _request(self, rec: Record, op: str, args: dict[str, Any], reply: dict[str, Any]) -> None:
        if "addr" in args:
            self._register(rec, "args.addr", args["addr"])
        if op == "batch":
            for i, row in enumerate(args["ops"]):
                self._register(rec, f"args.ops[{i}][1]", row[1])
                if row[0] == RegKind.POLL and self.wall_clock:
                    self.fail(rec, f"args.ops[{i}][0]", row[0], "a board's polls are poll records")
                if row[0] == RegKind.POLL and row[5] < 1:
                    self.fail(rec, f"args.ops[{i}][5]", row[5], "a poll's max_cycles is 1 or more")
            if len(reply["results"]) > len(args["ops"]):
                self.fail(rec, "reply.results", reply["results"], "more results than ops")
            t, c = rec.body.get("t"), rec.body.get("c")
            if not self.wall_clock and t is not None and c is not None:
                took = c - t // self.period + 1
                for i, (status, _) in enumerate(reply["results"]):
                    row = args["ops"][i]
                    if status == RegisterStatus.POLL_TIMEOUT and row[5] > took:
                        why = f"the poll gave up after that many, yet its batch took {took:,}"
                        self.fail(rec, f"args.ops[{i}][5]", row[5], why)
        elif op == "wait_irq" and self.wall_clock:
            budget = board_wait_cycles(args.get("max_cycles"), args.get("timeout_s") or 0.0)
            if reply["outcome"] != WaitOutcome.INTERRUPT:  # it ran to its limit on the board
                name = "max_cycles" if args.get("max_cycles") else "timeout_s"
                self._commit(rec, f"args.{name}", args.get(name), budget)
        elif op == "wait_irq":
            waited, most = reply["waited"], args["max_cycles"]
            if waited is None or most is None:
                name = "reply.waited" if waited is None else "args.max_cycles"
                self.fail(rec, name, None, "a server's wait records its cycles")
            if waited > most:
                self.fail(rec, "reply.waited", waited, f"more than its args.max_cycles {most:,}")
            self._past_budget(rec, "reply.waited", waited, waited)

    def _register(self, rec: Record, name: str, addr: int) -> None:
        sim = addr
        for base, size, at in self.rebase:
            if base <= addr < base + size:
                sim = at + addr - base
        c = self.cfg
        blocks = c.sim_register_blocks  # a recorded lease's faults are fault-block writes
        inside = any(b <= sim < b + c.reg_block_size for _, b in blocks)
        if not inside or sim % 4:
            where = ", ".join(f"{n} [{b:#x}, +{c.reg_block_size:#x})" for n, b in blocks)
            self.fail(rec, name, addr, f"not a 4-byte aligned register of {c.name} ({where})")

    def _commit(self, rec: Record, name: str, value: Any, cycles: int) -> None:
        """A board request that runs its whole budget of `cycles`: all such must fit."""
        self.committed += cycles
        if self.committed > self.budget.max_cycles:
            why = (
                f"its limit of {cycles:,} cycles (and those before it that ran to theirs) is "
                f"past the replay's simulated-time budget of {self.budget.max_cycles:,} cycles "
                "(--max-cycles raises it)"
            )
            self.fail(rec, name, value, why)

    def _times(self, rec: Record, b: dict[str, Any]) -> None:
        """A server recording's instants: forward only, within the budget."""
        if self.wall_clock:
            return  # a board's: wall seconds, not replayed
        t, c = b.get("t"), b.get("c")
        if t is None or c is None:
            name = "t" if t is None else "c"
            self.fail(rec, name, None, "a server's requests record when they started and ended")
        if t < self.last_t:
            self.fail(rec, "t", t, f"before the previous request's start ({self.last_t:,} ps)")
        self._past_budget(rec, "t", t, t // self.period)
        if c < self.last_c or c < t // self.period:
            self.fail(rec, "c", c, f"before the request's start (t = {t:,} ps) or the previous end")
        self._past_budget(rec, "c", c, c)
        state_t = b.get("state_t")
        if state_t is not None and not t <= state_t <= (c + 1) * self.period:
            self.fail(rec, "state_t", state_t, f"outside its request [t = {t:,}, c = {c:,}]")
        self.last_t, self.last_c = t, c


def scan(rec: Recording, cfg: TargetConfig, budget: Budget) -> Summary:
    """Check every record of `rec` (read one at a time when it is a stream) before the
    replay starts; what was found.

    Raises:
        RecordingError: a corrupt or malformed record, or one the replay does not allow
            here (the message names it, its byte offset, the field and its value).
    """
    checker = RecordChecker(rec, cfg, budget)
    s = Summary()
    for r in rec.records:
        checker.check(r)
        s.total += r.kind in REQUEST_KINDS
        if r.kind == Kind.REQUEST and r.body.get("c") is not None and not checker.stopped:
            s.recorded_cycles = max(s.recorded_cycles, int(r.body["c"]))
        state_t = r.body.get("state_t") if r.kind in CHECKPOINT_KINDS else None
        if state_t is not None and not checker.stopped:
            s.states.append((r.index, int(state_t)))
        s.end = r.body if r.kind == Kind.END else None
    cut = getattr(rec.records, "cut", "")
    if cut:
        rec.cut = cut
    return s
