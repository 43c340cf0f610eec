"""``npu-emu replay REC [--target T] [--check]``: run a recorded lease again, in-process.

A recording (``npu-emu serve --record DIR``; the format: `npuemu.server.recording`) holds
every request a lease holder made and the device's responses. The replay starts a fresh
simulated device the way the server does (a `SimDevice`: its memory files and its worker
process, no gRPC server), resets it as at a lease start, and issues the recorded requests
in order: memory writes into host-visible memory, register requests, waits and resets
through the worker, memory reads from host-visible memory.

**Time.** A server's worker runs busy engines on while it waits for the next request, so
a request starts when its client happened to send it. The replay's worker does not
(``WorkerConfig.frozen_idle``): simulated time moves only when asked. Before each request the
replay runs the clock to the instant the recording says it started
(`xrt.hw.port.Advance`), so the request meets the device exactly as it did.
A wait that ended on its wall-clock deadline is replayed as a wait of the cycles it waited
(no wall clock in a replay); its outcome matches a cycle limit.

**Checking.** With ``check``, every response is compared: register values and statuses,
wait outcomes and waited cycles, the instant each request started and its cycle count
relative to the lease's first request, memory read back. The first difference stops the
replay and is reported with its request index, op, expected and actual value.

**Extending.** `Replayer` dispatches on each record's kind (`Replayer.handlers`); a new
record kind (a checkpoint, say) is one more handler, and anything that must happen around
a request (a waveform window over a range of requests) belongs in `Replayer.before_request`.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack

from npuemu.replay_checks import (
    REQUEST_KINDS,
    Budget,
    RecordChecker,
    ReplayError,
    Summary,
    scan,
    wait_budget,
)
from npuemu.replay_report import (
    Divergence,
    ReplayReport,
    kind_name,
    outcome_name,
    result_text,
    status_name,
)
from npuemu.server import checkpoint_device
from npuemu.server.checkpoint import Checkpoint, CheckpointError, Limits
from npuemu.server.devices import SimDevice
from npuemu.server.shm import new_server_dir
from npuemu.server.worker_process import WorkerError, WorkerProcess, WorkerUnavailableError
from npuemu.sim.build import BuiltModel, ModelBuildError, build_npu_sim
from npuemu.worker.config import WorkerConfig
from npuemu.worker.protocol import STATE_SLACK_BYTES
from xrt import exitcodes
from xrt.hw.config import TargetConfig
from xrt.hw.port import Advance, Reply, Request
from xrt.hw.regops import RegKind
from xrt.hw.targets import CLOCK_PERIOD_PS, MIN_SIM_CYCLES_PER_S, TARGETS, target
from xrt.hw.wire import CheckpointScope, WaitOutcome
from xrt.recording import REPLY_FIELDS, Kind, Record, Recording
from xrt.recording_port import recorded_reply, request_of
from xrt.recording_schema import show
from xrt.regtrace import RegisterNamer

__all__ = [
    "REQUEST_KINDS",
    "Budget",
    "Divergence",
    "ReplayError",
    "ReplayReport",
    "Replayer",
    "choose_model",
    "replay",
    "run_replayer",
]

WATCHDOG_S = 60.0  # per worker request, beyond the time the request itself may take
# Time runs only when a request asks (Advance), never while the worker waits for one, so
# every request starts where the recording says; everything goes over the pipe.
REPLAY_CONFIG = WorkerConfig(server_ring=False, frozen_idle=True)


class _StopError(Exception):
    """The recording goes no further (truncated, a worker restart, an unfinished request)."""


class Replayer:
    """Replays one recording on one fresh device (`start`, `run`, `stop`).

    Args:
        rec: The recording (a list of records, or a stream read as it is replayed).
        cfg: The target to replay on.
        model: Its verilated model.
        check: Compare every response (else only run the requests).
        budget: The simulated cycles and wall time the replay may spend.
        summary: What `npuemu.replay_checks.scan` found in `rec` (scanned here if None).

    Raises:
        RecordingError: a record the replay does not allow (`npuemu.replay_checks`).
    """

    wall_clock = False
    """True for a replayer of a board's (wall-clock) recording (`npuemu.replay_board`)."""

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
        if rec.wall_clock and not self.wall_clock:
            raise ReplayError(
                f"{rec.path} is a board's recording (wall-clock times): "
                "npuemu.replay_board.BoardReplayer replays it",
                exitcodes.BAD_INPUT,
            )
        self.rec = rec
        self.cfg = cfg
        self.model = model
        self.check = check
        self.budget = budget or Budget()
        self.summary = summary or scan(rec, cfg, self.budget)
        self.period_ps = CLOCK_PERIOD_PS  # the recording's, when simulated (checked)
        self.namer = RegisterNamer.for_target(cfg.name)
        self.report = ReplayReport(rec.path, cfg.name, model.digest, check)
        self.device: SimDevice | None = None
        self.base_ps = 0  # the instant the replayed lease's first request starts at
        self.worker_config = REPLAY_CONFIG
        self.skip_through = 0  # records up to this index are not replayed (a later start)
        self.deadline = 0.0  # of the wall-time budget (monotonic), from `start`
        self._last_t = 0
        self._record: Record | None = None  # the one being replayed (for messages)
        self._responses = hashlib.sha256()
        self._folder: Path | None = None
        self._logs: Path | None = None
        self.handlers: dict[str, Callable[[int, Record], Awaitable[Divergence | None]]] = {
            Kind.REQUEST: self._request,
            Kind.MEMORY_WRITE: self._memory_write,
            Kind.MEMORY_READ: self._memory_read,
            Kind.CHECKPOINT_SAVE: self._checkpoint,
            Kind.CHECKPOINT_RESTORE: self._checkpoint,
        }

    @property
    def worker(self) -> WorkerProcess:
        assert self.device is not None and self.device.worker is not None
        return self.device.worker

    # ---------------------------------------------------------------- the device
    async def start(self) -> None:
        """Start the device as the server does, and reset it as at a lease start."""
        self.deadline = time.monotonic() + self.budget.max_wall_s
        self._folder = new_server_dir()
        self._logs = Path(tempfile.mkdtemp(prefix="npu-emu-replay-"))
        name = str(self.rec.header.get("device") or "npu0")  # a plain name (checked)
        self.device = SimDevice(
            name,
            self.cfg,
            self.model,
            self._folder,
            WATCHDOG_S,
            log_dir=self._logs,
            worker_config=self.worker_config,
        )
        try:
            await self.device.start()
        except WorkerUnavailableError as exc:
            raise ReplayError(f"the simulation worker did not start: {exc}") from None
        self.worker.on_exit = None  # no restarts: a worker that dies ends the replay
        # A new worker is in its pristine state: where every lease on a server starts.
        self.base_ps = int((await self._call(Advance(None), 0.0)).start_ps or 0)

    async def stop(self) -> None:
        if self.device is not None:
            with contextlib.suppress(Exception):
                await self.device.stop()
        for folder in (self._folder, self._logs):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def parse_checkpoint(self, data: bytes) -> Checkpoint:
        """A recorded checkpoint file, checked against this target and model (sizes
        bounded before anything is inflated). Replay runs in the user's own process: the
        model state is restored whatever its seal, after the worker checked its layout."""
        bound = self.worker.state_bytes + STATE_SLACK_BYTES if self.worker.state_bytes else None
        limits = Limits.for_target(self.cfg, *(() if bound is None else (bound,)))
        return Checkpoint.parse(data, limits)

    async def worker_call(self, request: Request) -> Reply:
        """A worker request with no time budget of its own (checkpoints)."""
        return await self._call(request, 0.0)

    def _where(self) -> str:
        r = self._record
        return "" if r is None else f" at record {r.index} (byte offset {r.offset})"

    async def _call(self, request: Request, extra_s: float, *, read_only: bool = False) -> Reply:
        """A worker request, within its watchdog and what is left of the wall-time budget
        (past it the worker is stopped and the replay ends, naming --max-wall-s)."""
        left = self.deadline - time.monotonic()
        spent = (
            f"the replay's wall-time budget of {self.budget.max_wall_s:g} s ran out"
            f"{self._where()} (--max-wall-s raises it)"
        )
        if left <= 0:
            raise ReplayError(spent)
        try:
            return await self.worker.call(
                request, min(WATCHDOG_S + extra_s, left), read_only=read_only
            )
        except WorkerUnavailableError as exc:
            if time.monotonic() >= self.deadline:
                raise ReplayError(spent) from None
            raise ReplayError(f"{exc}\n{self.worker.log_tail()}") from None

    def cycles_left(self) -> int:
        """Simulated cycles left of the budget (at least 1: a request always runs)."""
        return max(1, self.budget.max_cycles - self.report.cycles)

    def budget_spent(self, index: int, op: str) -> ReplayError:
        return ReplayError(
            f"{self.rec.path}: request #{index} ({op}){self._where()} ran into the end of the "
            f"replay's simulated-time budget of {self.budget.max_cycles:,} cycles "
            "(--max-cycles raises it)",
            exitcodes.BAD_INPUT,
        )

    # ---------------------------------------------------------------- the loop
    async def run(self, progress: Callable[[int], None] | None = None) -> ReplayReport:
        """Replay every record (each checked again as it is read: `RecordChecker`); stop
        at the first divergence (with check), at a cut, or at a record this replay cannot
        follow."""
        r = self.report
        r.total = self.summary.total
        r.recorded_cycles = self.summary.recorded_cycles
        end = self.summary.end
        if end is not None and "ended" in end and "started" in self.rec.header:
            r.lease_s = float(end["ended"]) - float(self.rec.header["started"])
        checker = RecordChecker(self.rec, self.cfg, self.budget)
        t0 = time.monotonic()
        index = 0
        try:
            for rec in self.rec.records:
                checker.check(rec)
                self._record = rec
                if rec.index <= self.skip_through and rec.kind != Kind.END:
                    index += rec.kind in REQUEST_KINDS  # a later start: not run
                    continue
                if rec.kind == Kind.END:
                    r.complete = True
                    break
                handler = self.handlers.get(rec.kind)
                if handler is None:
                    self._control(rec)
                    continue
                if await self.before_request(index, rec):
                    break
                try:
                    divergence = await handler(index, rec)
                except (KeyError, TypeError, ValueError) as exc:  # what the checks missed
                    raise ReplayError(
                        f"{self.rec.path}: record {rec.index} at byte offset {rec.offset} is "
                        f"malformed ({type(exc).__name__}: {show(str(exc))})",
                        exitcodes.BAD_INPUT,
                    ) from None
                r.requests += 1
                if rec.kind not in (Kind.MEMORY_WRITE, Kind.MEMORY_READ):
                    r.register_requests += 1
                else:
                    r.memory_requests += 1
                index += 1
                if progress is not None:
                    progress(index)
                if divergence is not None and self.check:
                    r.divergence = divergence
                    break
        except _StopError as stop:
            r.notes.append(str(stop))
        if end is None and not r.notes:
            r.notes.append(
                "the recording has no end record (the server stopped while recording?)"
                + (f"; {self.rec.cut}" if self.rec.cut else "")
                + ": replayed what it holds"
            )
        r.wall_s = time.monotonic() - t0
        r.responses = self._responses.hexdigest()
        return r

    async def before_request(self, index: int, rec: Record) -> bool:
        """Called before each request is replayed (the place for per-range actions, such
        as a waveform window: `npuemu.replay_waves`); True ends the replay there."""
        return False

    def _control(self, rec: Record) -> None:
        b = rec.body
        if rec.kind == Kind.TRUNCATED:
            raise _StopError(
                f"the recording was truncated at its cap of {b['limit'] / (1 << 20):.0f} MiB "
                f"after {b['requests']} request(s): replayed up to the cut"
            )
        if rec.kind == Kind.WORKER_RESTART:
            raise _StopError(
                f"the recorded device's worker restarted here ({show(b['why'])}): "
                "replayed up to the restart"
            )
        raise ReplayError(f"record {rec.index}: kind {show(rec.kind)}", exitcodes.BAD_INPUT)

    # ---------------------------------------------------------------- requests
    async def _request(self, index: int, rec: Record) -> Divergence | None:
        b = rec.body  # checked: `xrt.recording_schema`, `npuemu.replay_checks`
        op = b["op"]
        if b.get("unfinished"):
            raise _StopError(
                f"request #{index} ({op}) did not finish in the recording (its caller went "
                "away or the worker failed): replayed up to it"
            )
        args = dict(b["args"])
        recorded = b["reply"]
        extra_s = 0.0
        left = self.cycles_left()
        clamped = False
        if op == "batch":
            # A poll's limit is the recorded one: the register bus master keeps it (a
            # checkpoint's state would differ); only what is left of the budget cuts it.
            rows = [tuple(row) for row in args["ops"]]
            for i, row in enumerate(rows):
                if row[0] == RegKind.POLL and row[5] > left:
                    rows[i], clamped = (*row[:5], left), True
            args["ops"] = rows
            polls = sum(row[5] for row in rows if row[0] == RegKind.POLL)
            extra_s = len(rows) * 0.01 + polls / MIN_SIM_CYCLES_PER_S
        elif op == "wait_irq":
            cycles = wait_budget(args["max_cycles"], recorded["outcome"], recorded["waited"])
            args["max_cycles"] = min(cycles, left)
            clamped = args["max_cycles"] < cycles
            extra_s = args["max_cycles"] / MIN_SIM_CYCLES_PER_S
            args["wall_s"] = extra_s + WATCHDOG_S  # the cycles decide, not the wall clock
        t = b.get("t")
        try:
            if t is not None:
                await self.advance_to(t)
            got = await self._call(request_of(op, args), extra_s, read_only=bool(b.get("observer")))
        except WorkerError as exc:
            return Divergence(index, rec, op, "the request", "a response", f"refused: {exc}")
        reply = recorded_reply(op, got)
        c = got.cycles - self.base_ps // self.period_ps
        self.report.cycles = c
        if clamped and c >= self.budget.max_cycles:
            raise self.budget_spent(index, op)
        start = int(got.start_ps or 0) - self.base_ps
        fields = [reply[name] for name in REPLY_FIELDS[op]]
        self._responses.update(msgpack.packb([op, start, c, fields]))
        if not self.check:
            return None
        what = self._compare(op, b["args"], recorded, reply)
        if what is not None:
            return Divergence(index, rec, op, *what)
        return self._timing(index, rec, op, start, c)

    async def advance_to(self, t: int | None) -> Reply:
        """Run the clock to the instant `t` (ps after the lease's first request; None:
        stay), as the recorded device ran between requests; the worker's reply."""
        if t is None:
            return await self._call(Advance(None), 0.0)
        gap_s = max(0, int(t) - self._last_t) / self.period_ps / MIN_SIM_CYCLES_PER_S
        reply = await self._call(Advance(self.base_ps + int(t)), gap_s)
        self._last_t = int(t)
        return reply

    def _timing(self, index: int, rec: Record, op: str, start: int, c: int) -> Divergence | None:
        """A request that started at another instant or ended at another cycle count."""
        b = rec.body
        t = b.get("t")
        if t is not None and start != int(t):
            return Divergence(
                index,
                rec,
                op,
                "start instant (ps after the lease's first)",
                f"{int(t):,}",
                f"{start:,}",
            )
        if c != int(b["c"]):
            return Divergence(
                index,
                rec,
                op,
                "cycle count (relative to the lease's first)",
                f"{int(b['c']):,}",
                f"{c:,}",
            )
        return None

    async def _checkpoint(self, index: int, rec: Record) -> Divergence | None:
        """A checkpoint the holder took (taken again here; with check, its state must be
        the recorded one) or restored (the recorded file is put in)."""
        b = rec.body
        saved = rec.kind == Kind.CHECKPOINT_SAVE
        op = str(rec.kind)
        try:
            recorded = self.parse_checkpoint(b["file"])
        except CheckpointError as exc:
            raise ReplayError(
                f"{self.rec.path}: record {rec.index} (byte offset {rec.offset}): its "
                f"checkpoint file cannot be read: {exc}",
                exitcodes.BAD_INPUT,
            ) from None
        if b.get("t") is not None:
            await self.advance_to(b["t"])
        assert self.device is not None
        try:
            if saved:
                taken, reply = await checkpoint_device.take(self.device, self.worker_call)
            else:
                scope = CheckpointScope(b.get("scope") or CheckpointScope.WHOLE)
                reply = await checkpoint_device.apply(
                    self.device, recorded, self.worker_call, scope
                )
        except (CheckpointError, WorkerError) as exc:
            return Divergence(index, rec, op, "the checkpoint", "as recorded", f"refused: {exc}")
        c = reply.cycles - self.base_ps // self.period_ps
        start = int(reply.start_ps or 0) - self.base_ps
        self.report.cycles = c
        self._responses.update(msgpack.packb([op, start, c, hashlib.sha256(b["file"]).digest()]))
        if not self.check:
            return None
        if saved:
            differs = recorded.same_state(taken)
            if differs is not None:
                what = f"{differs} differs"
                return Divergence(index, rec, op, "the state taken", "as recorded", what)
        return self._timing(index, rec, op, start, c)

    def _compare(
        self, op: str, args: dict[str, Any], recorded: dict[str, Any], reply: dict[str, Any]
    ) -> tuple[str, str, str] | None:
        """(what, expected, actual) of the first difference, or None."""
        if op == "read_reg":
            exp, got = (recorded["status"], recorded["value"]), (reply["status"], reply["value"])
            if exp != got:
                return f"read {self._reg(args['addr'])}", result_text(*exp), result_text(*got)
        elif op == "write_reg":
            if recorded["status"] != reply["status"]:
                what = f"write {self._reg(args['addr'])}"
                return what, status_name(recorded["status"]), status_name(reply["status"])
        elif op == "batch":
            exp_rows = [tuple(x) for x in recorded["results"]]
            got_rows = [tuple(x) for x in reply["results"]]
            rows = args["ops"]
            for i, (e, g) in enumerate(zip(exp_rows, got_rows, strict=False)):
                if e != g:
                    kind, addr = rows[i][0], rows[i][1]
                    what = f"op {i} of {len(rows)}, {kind_name(kind)} {self._reg(addr)}"
                    return what, result_text(*e), result_text(*g)
            if len(exp_rows) != len(got_rows):
                return "ops run", f"{len(exp_rows)}", f"{len(got_rows)}"
        elif op == "wait_irq":
            exp_out, got_out = int(recorded["outcome"]), int(reply["outcome"])
            if exp_out == WaitOutcome.DEADLINE:
                exp_out = WaitOutcome.CYCLE_LIMIT  # replayed as a wait of the cycles it took
            if exp_out != got_out:
                return "outcome", outcome_name(recorded["outcome"]), outcome_name(got_out)
            if int(recorded["waited"]) != int(reply["waited"]):
                return "waited cycles", f"{recorded['waited']:,}", f"{reply['waited']:,}"
        return None

    def _reg(self, addr: int) -> str:
        return f"{self.namer.name(addr)} @ {addr:#010x}"

    # ---------------------------------------------------------------- memory
    def _udma_offset(self, address: int, n: int) -> int:
        """Where [address, address + n) is in host-visible memory (`RecordChecker` made
        sure it is inside)."""
        udma = self.cfg.memory("udma")
        if not udma.contains(address, n):
            raise ReplayError(f"{n} bytes at {address:#x}: outside udma", exitcodes.BAD_INPUT)
        return address - udma.base

    async def _memory_write(self, index: int, rec: Record) -> Divergence | None:
        address, data = rec.body["address"], rec.body["data"]
        offset = self._udma_offset(address, len(data))
        assert self.device is not None
        self.device.memory.udma_view[offset : offset + len(data)] = data
        return None

    async def _memory_read(self, index: int, rec: Record) -> Divergence | None:
        b = rec.body
        address, n = b["address"], b["n"]
        offset = self._udma_offset(address, n)
        assert self.device is not None
        got = bytes(self.device.memory.udma_view[offset : offset + n])
        self._responses.update(hashlib.sha256(got).digest())
        if not self.check:
            return None
        if "data" in b:
            want = bytes(b["data"])
            if want != got:
                i = next((i for i in range(n) if want[i] != got[i]), 0)  # equal lengths
                what = f"byte {i} of {n} read at {address:#x} (address {address + i:#x})"
                return Divergence(
                    index, rec, "memory_read", what, f"{want[i]:#04x}", f"{got[i]:#04x}"
                )
        else:
            digest = hashlib.sha256(got).hexdigest()
            if digest != b["sha256"]:
                what = f"sha256 of {n} bytes read at {address:#x}"
                return Divergence(index, rec, "memory_read", what, b["sha256"], digest)
        return None


def choose_model(
    rec: Recording, target_name: str | None, *, waves: bool = False
) -> tuple[TargetConfig, BuiltModel]:
    """The target and model to replay `rec` on: the recording's own, which must be the
    model this checkout builds, unless `target_name` says which (then anything goes, and
    a divergence is reported as such). A board's recording has no model: this checkout's
    model of its target replays it.

    Raises:
        ReplayError: another model or an unknown target, without `target_name`; a build
            that failed.
    """
    h = rec.header
    recorded = str(h.get("target", ""))
    name = target_name or recorded
    if name not in TARGETS:
        raise ReplayError(
            f"{rec.path} was recorded on target {recorded!r}, which this npu-emu does not "
            f"know ({', '.join(sorted(TARGETS))}): pass --target",
            exitcodes.BAD_INPUT,
        )
    try:
        traced = waves or (bool(h.get("waves")) and target_name is None)
        model = build_npu_sim(name, waves=traced)
    except ModelBuildError as exc:
        raise ReplayError(str(exc)) from None
    if target_name is None and not rec.wall_clock and model.digest != h.get("model"):
        raise ReplayError(
            f"{rec.path} was recorded with the {recorded} model {h.get('model')}, and this "
            f"checkout builds {model.digest} (the RTL or its build changed): pass --target "
            f"{recorded} to replay it on this model anyway (differences are then reported)",
            exitcodes.BAD_INPUT,
        )
    return target(name), model


async def replay(
    rec: Recording,
    cfg: TargetConfig,
    model: BuiltModel,
    *,
    check: bool,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Replay `rec` on a fresh device of `cfg`; the report (its divergence, with check)."""
    return await run_replayer(Replayer(rec, cfg, model, check=check), progress)


async def run_replayer(
    replayer: Replayer, progress: Callable[[int], None] | None = None
) -> ReplayReport:
    """Start `replayer`'s device, replay, stop the device; the report."""
    try:
        await replayer.start()
        return await replayer.run(progress)
    finally:
        await replayer.stop()
