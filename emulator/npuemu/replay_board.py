"""Replaying a board's recording (``axi://...?record=FILE``, `xrt.transport.recorder`) on a
fresh simulated device of the recorded target: `BoardReplayer`.

A board counts no simulated cycles, so its recording has no instants to pin requests to
(``clock: "wall"``, `xrt.recording`). The replay issues the requests in order, with
simulated time moving only while a request runs (as every replay: frozen idle), and lets
the simulated hardware take the time it takes where the board's driver waited:

- a recorded poll (one record for the loop of reads the board made) runs as a server-side
  poll of the same address, mask and expected value, with a cycle budget from its limits
  (`xrt.hw.regops.poll_max_cycles`); compared: whether it matched and the value it ended on
  (not how many reads it took: the board's and the simulator's clocks differ);
- an interrupt wait runs with the cycle budget the driver gave it (else its wall-clock
  timeout at `xrt.hw.regops.POLL_CYCLES_PER_S` cycles per second); compared: the interrupt
  came (INTERRUPT) or not (a board's DEADLINE is the simulator's CYCLE_LIMIT);
- reads, writes, batches and host-visible memory as in a server recording's replay:
  compared value by value, byte by byte.

Never compared: instants, cycle counts, durations. A driver that reads a status register
while an engine works (rather than polling or waiting for it) raced the board's engine, and
replays only as well as that race allows: the simulated engine has made the progress of
the cycles the replay ran, not of the board's microseconds.

Register addresses are rebased when the board's register blocks sit elsewhere than the
target's (the header records the board's map); memory must sit where the target has it
(DMA programs carry physical addresses in register values, which cannot be rebased).
"""

from __future__ import annotations

import msgpack

from npuemu.replay import WATCHDOG_S, Replayer
from npuemu.replay_checks import (
    Budget,
    ReplayError,
    Summary,
    board_poll_cycles,
    board_rebase,
    board_wait_cycles,
)
from npuemu.replay_report import Divergence, outcome_name, result_text
from npuemu.server.worker_process import WorkerError
from npuemu.sim.build import BuiltModel
from xrt import exitcodes
from xrt.hw.config import TargetConfig
from xrt.hw.port import RegBatch, RegResults, Reply
from xrt.hw.regops import RegKind
from xrt.hw.targets import CLOCK_PERIOD_PS, MIN_SIM_CYCLES_PER_S
from xrt.hw.wire import RegisterStatus, WaitOutcome
from xrt.recording import REPLY_FIELDS, Kind, Record, Recording
from xrt.recording_port import recorded_reply, request_of

__all__ = ["BoardReplayer", "replayer_for"]


class BoardReplayer(Replayer):
    """Replays a client-side (wall-clock) recording; see the module docstring.

    Raises:
        ReplayError: the board's memories sit elsewhere than the target's.
    """

    wall_clock = True

    def __init__(
        self,
        rec: Recording,
        cfg: TargetConfig,
        model: BuiltModel,
        *,
        check: bool,
        budget: Budget | None = None,
        summary: Summary | None = None,
    ) -> None:
        super().__init__(rec, cfg, model, check=check, budget=budget, summary=summary)
        self.period_ps = CLOCK_PERIOD_PS  # the replay's own cycles (the board counted none)
        self.report.wall_clock = True
        self.handlers[Kind.REQUEST] = self._board_request
        self.handlers[Kind.POLL] = self._poll
        self._blocks = board_rebase(rec.header, cfg)  # (board base, size, simulated base)
        for base, _, at in self._blocks:
            self.report.notes.append(f"the board's registers at {base:#x} are replayed at {at:#x}")
        for name, (base, size) in dict(rec.header.get("memories") or {}).items():
            mem = next((m for m in cfg.memories if m.name == name), None)
            if mem is None or int(base) != mem.base or int(base) + int(size) > mem.base + mem.size:
                where = "no such memory" if mem is None else f"[{mem.base:#x}, {mem.end:#x})"
                raise ReplayError(
                    f"{rec.path}: the board's {name} at [{int(base):#x}, "
                    f"{int(base) + int(size):#x}) is not where {cfg.name} has it ({where}): "
                    "DMA programs hold physical addresses, so this session cannot replay here",
                    exitcodes.BAD_INPUT,
                )

    def _addr(self, addr: int) -> int:
        for base, size, sim in self._blocks:
            if base <= addr < base + size:
                return sim + addr - base
        return addr

    def _cycles(self, reply: Reply) -> None:
        self.report.cycles = reply.cycles - self.base_ps // self.period_ps

    async def _board_request(self, index: int, rec: Record) -> Divergence | None:
        b = rec.body  # checked: `xrt.recording_schema`, `npuemu.replay_checks`
        op = b["op"]
        args = dict(b["args"])
        recorded = b["reply"]
        extra_s = 0.0
        clamped = False
        if "addr" in args:
            args["addr"] = self._addr(args["addr"])
        if op == "batch":
            args["ops"] = [(r[0], self._addr(r[1]), *r[2:]) for r in args["ops"]]
            extra_s = len(args["ops"]) * 0.01  # no polls (they are poll records)
        elif op == "wait_irq":
            own = board_wait_cycles(args.get("max_cycles"), args.get("timeout_s") or 0.0)
            budget = min(own, self.cycles_left())
            clamped = budget < own
            extra_s = budget / MIN_SIM_CYCLES_PER_S
            args = {"max_cycles": budget, "wall_s": extra_s + WATCHDOG_S}
        try:
            got = await self._call(request_of(op, args), extra_s)
        except WorkerError as exc:
            return Divergence(index, rec, op, "the request", "a response", f"refused: {exc}")
        self._cycles(got)
        reply = recorded_reply(op, got)
        if clamped and reply.get("outcome") == WaitOutcome.CYCLE_LIMIT:
            raise self.budget_spent(index, op)
        fields = [reply[name] for name in REPLY_FIELDS[op] if name != "waited"]
        self._responses.update(msgpack.packb([op, fields]))
        if not self.check:
            return None
        if op == "wait_irq":
            exp, out = int(recorded["outcome"]), int(reply["outcome"])
            came = (exp == WaitOutcome.INTERRUPT, out == WaitOutcome.INTERRUPT)
            if came[0] != came[1]:
                what = "the interrupt (the board's wall-clock timeout: a cycle limit here)"
                return Divergence(index, rec, op, what, outcome_name(exp), outcome_name(out))
            return None
        what = self._compare(op, args, recorded, reply)
        return Divergence(index, rec, op, *what) if what is not None else None

    async def _poll(self, index: int, rec: Record) -> Divergence | None:
        """A poll the board ran as reads: a server-side poll here, compared by outcome and
        final value (not by its number of reads)."""
        b = rec.body
        addr, mask, expected = b["addr"], b["mask"], b["expected"]
        own = board_poll_cycles(b)
        max_cycles = min(own, self.cycles_left())
        row = (RegKind.POLL, self._addr(addr), 0, mask, expected, max_cycles)
        try:
            reply = await self._call(RegBatch.of_rows([row]), max_cycles / MIN_SIM_CYCLES_PER_S)
        except WorkerError as exc:
            return Divergence(index, rec, "poll", "the poll", "a response", f"refused: {exc}")
        self._cycles(reply)
        ((status, value, _),) = reply.body_as(RegResults)
        if max_cycles < own and status == RegisterStatus.POLL_TIMEOUT:
            raise self.budget_spent(index, "poll")
        self._responses.update(msgpack.packb(["poll", status, value]))
        if not self.check:
            return None
        matched = status == RegisterStatus.OK
        want = (bool(b["matched"]), int(b["value"]))
        if (matched, value) == want:
            return None
        what = (
            f"poll of {self._reg(self._addr(addr))} until value & {mask:#x} == {expected:#x} "
            f"(the board read it {int(b['reads']):,} time(s))"
        )
        return Divergence(
            index, rec, "poll", what, _poll_result(*want), _poll_result(matched, value, status)
        )


def _poll_result(matched: bool, value: int, status: int | None = None) -> str:
    if matched:
        return f"matched, {value:#010x}"
    if status is not None and status != RegisterStatus.POLL_TIMEOUT:
        return result_text(status, value)
    return f"gave up, last value {value:#010x}"


def replayer_for(
    rec: Recording,
    cfg: TargetConfig,
    model: BuiltModel,
    *,
    check: bool,
    budget: Budget | None = None,
    summary: Summary | None = None,
) -> Replayer:
    """The replayer of `rec`: a `BoardReplayer` for a board's (wall-clock) recording, else
    the server recordings' `Replayer`."""
    cls = BoardReplayer if rec.wall_clock else Replayer
    return cls(rec, cfg, model, check=check, budget=budget, summary=summary)
