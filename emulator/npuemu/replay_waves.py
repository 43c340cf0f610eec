"""``npu-emu replay REC --waves START:END --out F.fst``: a waveform window of a replay.

The replay runs the traced model (a recording server runs it too: its recordings say so in
their header, `npuemu.server.recording`). When the recording holds a checkpoint (one the
holder took or restored) whose state is from at or before cycle START, the replay starts
from the latest such one instead of from the lease's beginning: the checkpoint's state is
put into the fresh device and the requests after it are replayed, so a window late in a long
run does not replay everything before it. The window opens at START (or, when START falls
inside a request, when that request starts: a request is not cut), closes itself after the
window's cycles, and the replay stops once the device is past END. Cycles are counted from
the lease's first request, as ``replay`` prints them.

Tracing costs nothing while no window is open (docs/performance.md, "Waveforms"); a window
costs about 3.7x on the cycles it covers.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from npuemu.replay import Replayer, ReplayError, ReplayReport
from npuemu.replay_checks import Budget, Summary
from npuemu.server import checkpoint_device
from npuemu.server.checkpoint import CheckpointError
from npuemu.server.storage import place_private_file
from npuemu.server.worker_process import WorkerError
from npuemu.sim.build import BuiltModel
from xrt import exitcodes
from xrt.hw.config import TargetConfig
from xrt.hw.port import StateTime, WavesStart, WavesStop, WavesWindow
from xrt.hw.wire import CheckpointScope
from xrt.recording import Kind, Record, Recording

__all__ = ["WavesReplayer", "parse_window"]


def parse_window(text: str) -> tuple[int, int]:
    """``START:END`` (cycles from the lease's first request; END after START).

    Raises:
        ValueError: another form, or END not after START (the message says which).
    """
    start, sep, end = text.partition(":")
    try:
        first, last = int(start.replace("_", ""), 0), int(end.replace("_", ""), 0)
    except ValueError:
        raise ValueError(f"--waves wants START:END in cycles, not {text!r}") from None
    if not sep or first < 0 or last <= first:
        raise ValueError(f"--waves {text}: END must be after START, both 0 or more")
    return first, last


class WavesReplayer(Replayer):
    """A replay that records the waveform window [`window`] into `out`.

    Args:
        rec, cfg, model, check: as `Replayer` (the model must be the traced one).
        window: (START, END) in cycles from the lease's first request.
        out: The FST file to write.
    """

    def __init__(
        self,
        rec: Recording,
        cfg: TargetConfig,
        model: BuiltModel,
        *,
        window: tuple[int, int],
        out: Path,
        check: bool,
        budget: Budget | None = None,
        summary: Summary | None = None,
    ) -> None:
        super().__init__(rec, cfg, model, check=check, budget=budget, summary=summary)
        if not model.waves:
            raise ReplayError("--waves needs the traced model (npu-emu build --waves)")
        self.first, self.last = window
        self.out = out
        self._waves_dir = Path(tempfile.mkdtemp(prefix="npu-emu-replay-waves-"))
        self.worker_config = replace(self.worker_config, waves_dir=str(self._waves_dir))
        self._open = False
        self._done = False

    # ---------------------------------------------------------------- the start
    async def start(self) -> None:
        await super().start()
        nearest = self._nearest_state()
        if nearest is None:
            return
        rec = next(r for r in self.rec.records if r.index == nearest)  # read it again
        try:
            state = self.parse_checkpoint(rec.body["file"])
            assert self.device is not None
            scope = CheckpointScope(rec.body.get("scope") or CheckpointScope.WHOLE)
            reply = await checkpoint_device.apply(self.device, state, self.worker_call, scope)
        except (CheckpointError, WorkerError) as exc:
            self.report.notes.append(
                f"the checkpoint of record {rec.index} does not fit this model ({exc}): "
                "replayed from the lease's start"
            )
            return
        # The recorded state was taken at state_t after the lease's first request; the
        # device holds it from now on: the requests after it keep their distances.
        state_t = int(rec.body["state_t"])
        self.base_ps = reply.body_as(StateTime).time_ps - state_t
        self._last_t = state_t
        self.skip_through = rec.index
        self.report.notes.append(
            f"started from the checkpoint of record {rec.index} (cycle "
            f"{state_t // self.period_ps:,} of the lease): the requests before it were not run"
        )

    def _nearest_state(self) -> int | None:
        """The index of the latest checkpoint record whose state is from at or before
        START (from the scan: before anything that stops the replay)."""
        best = None
        for index, state_t in self.summary.states:
            if state_t // self.period_ps <= self.first:
                best = index
        return best

    # ---------------------------------------------------------------- the window
    async def before_request(self, index: int, rec: Record) -> bool:
        if self._done:
            return True
        t = rec.body.get("t")
        if rec.kind == Kind.END or t is None:
            return False
        if self._open:
            if self.report.cycles >= self.last:
                await self._finish()
                return True
            return False
        start_ps = self.first * self.period_ps
        if int(rec.body.get("c", 0)) >= self.first or int(t) >= start_ps:
            reply = await self.advance_to(min(start_ps, int(t)))
            now = reply.cycles - self.base_ps // self.period_ps
            try:
                await self._call(WavesStart(max(1, self.last - now)), 0.0)
            except WorkerError as exc:
                raise ReplayError(f"cannot open the waveform window: {exc.detail}") from None
            self._open = True
        return False

    async def _finish(self) -> None:
        """Close the window, move its file to `out`, say where it is."""
        self._done = True
        reply = await self._call(WavesStop(), 0.0)
        window = reply.body.file if isinstance(reply.body, WavesWindow) else None
        if not window:
            self.report.notes.append("no waveform window was recorded (the replay ended first)")
            return
        path, first, last = window
        try:  # 0600, in folders made 0700, never through a symlink (npuemu.server.storage)
            place_private_file(Path(path), self.out)
        except OSError as exc:
            raise ReplayError(f"cannot write {self.out}: {exc}", exitcodes.BAD_INPUT) from None
        base = self.base_ps // self.period_ps
        self.report.notes.append(
            f"waveform window: cycles {int(first) - base:,}..{int(last) - base:,} of the lease in "
            f"{self.out} ({self.out.stat().st_size:,} B)"
        )

    async def run(self, progress: Callable[[int], None] | None = None) -> ReplayReport:
        report = await super().run(progress)
        if self._open and not self._done:
            await self._finish()
        elif not self._open:
            report.notes.append(
                f"the recording ends before cycle {self.first:,}: no waveform window"
            )
        return report

    async def stop(self) -> None:
        await super().stop()
        shutil.rmtree(self._waves_dir, ignore_errors=True)
