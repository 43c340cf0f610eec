"""``npu-emu replay``'s command: read the recording, choose the model, replay with progress,
print the report (`npuemu.replay`, `npuemu.replay_waves`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from npuemu.replay import REQUEST_KINDS, Replayer, ReplayError, choose_model, run_replayer
from npuemu.replay_board import replayer_for
from npuemu.replay_checks import Budget, limits_for, listing_limits, scan
from npuemu.replay_report import ReplayReport
from xrt import exitcodes
from xrt.cli_output import report_error
from xrt.hw.targets import TARGETS, target
from xrt.progress import HEARTBEAT_S, step_progress
from xrt.recording import Kind, Limits, Recording, RecordingError, open_recording
from xrt.recording_schema import show
from xrt.regtrace import RegisterNamer

__all__ = ["iter_requests", "list_requests", "main"]


def _progress_printer(total: int, name: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """(update, close): a counting bar on a terminal, else a line every few seconds."""
    if os.environ.get("XRT_PROGRESS", "").strip().lower() in ("0", "off", "no", "false"):
        return (lambda done: None), (lambda: None)
    if sys.stderr.isatty():
        bar = step_progress(total, f"replaying {name}")
        return (lambda done: bar.update(done - bar.n)), bar.close
    last = [time.monotonic()]

    def update(done: int) -> None:
        now = time.monotonic()
        if now - last[0] >= HEARTBEAT_S:
            last[0] = now
            pct = 100 * done / total if total else 100
            print(f"replaying {name}: {done:,}/{total:,} requests ({pct:.0f}%)", file=sys.stderr)

    return update, (lambda: None)


def list_requests(rec: Recording) -> list[str]:
    """One line per request of `rec`: its index, kind, what it asked, and when it started
    and ended in cycles from the lease's first request (what ``--waves`` takes)."""
    return list(iter_requests(rec))


def iter_requests(rec: Recording) -> Iterator[str]:
    """`list_requests`, a line at a time (a long recording's listing is not held)."""
    name = rec.header.get("target")
    namer = RegisterNamer.for_target(name if name in TARGETS else "buyi")
    period = rec.header.get("period_ps") or 1  # checked: 1 or more
    index = 0
    for r in rec.records:  # each checked by the reader (`xrt.recording_schema`)
        b = r.body
        if r.kind not in REQUEST_KINDS:
            if r.kind != Kind.END:
                fields = ", ".join(f"{k}={show(v)}" for k, v in b.items() if k != "k")
                yield f"      -- {show(r.kind)} {fields}"
            continue
        when = ""
        if b.get("t") is not None:
            end = "?" if b.get("c") is None else f"{b['c']:,}"
            when = f"cycles {b['t'] // period:>12,} .. {end:>12}  "
        elif b.get("w") is not None:  # a board's recording: wall-clock seconds
            when = f"wall {float(b['w']):>12.6f} s  "
        what = str(b.get("op", r.kind))
        args = b.get("args", {})
        if "addr" in args:
            what += f" {namer.name(int(args['addr']))}"
        elif "ops" in args:
            what += f" of {len(args['ops'])} op(s)"
        elif r.kind == Kind.POLL:
            what += (
                f" {namer.name(int(b['addr']))} until & {int(b['mask']):#x} == "
                f"{int(b['expected']):#x}: {int(b['reads']):,} read(s), "
                f"{'matched' if b.get('matched') else 'gave up'} at {int(b['value']):#010x}"
            )
        elif r.kind in (Kind.MEMORY_WRITE, Kind.MEMORY_READ):
            n = len(b["data"]) if "data" in b else int(b.get("n", 0))
            what += f" {n:,} B at {int(b['address']):#x}"
        if b.get("unfinished"):
            what += " (unfinished)"
        yield f"{index:>5}  {when}{what}"
        index += 1


def _limits(target_name: str | None) -> Callable[[dict[str, Any]], Limits]:
    """The reader's bounds: the target replayed on (`--target`, else the recording's)."""

    def limits(header: dict[str, Any]) -> Limits:
        name = target_name or header.get("target")
        return limits_for(target(name)) if name in TARGETS else listing_limits(header)

    return limits


class _ReplayRefusedError(Exception):
    """A replay that cannot start or finish: its exit status and the sentence to say."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def main(
    path: Path,
    target_name: str | None,
    *,
    check: bool,
    waves: str | None = None,
    out: Path | None = None,
    listing: bool = False,
    budget: Budget | None = None,
    as_json: bool = False,
) -> int:
    """``npu-emu replay``: the exit status (0; 4 for a divergence; 2 for a recording that
    cannot be read or replayed here, or that needs more than `budget`; 1 when the device
    fails). The recording is read one record at a time, and every record is checked
    (`npuemu.replay_checks`) before the model is built or the simulator starts. With
    `as_json`, the result (or the error) is one JSON document on stdout."""
    try:
        if listing:
            lines = _listing(path)
            if as_json:
                print(json.dumps({"recording": str(path), "requests": lines}, indent=1))
            else:
                print("\n".join(lines))
            return exitcodes.OK
        report = _replay(path, target_name, check, waves, out, budget or Budget())
    except _ReplayRefusedError as exc:
        return report_error("npu-emu replay", exc.status, str(exc), as_json=as_json)
    if as_json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print("\n".join(report.lines()))
    return exitcodes.MISMATCH if report.divergence is not None else exitcodes.OK


def _listing(path: Path) -> list[str]:
    try:
        rec = open_recording(path, listing_limits)
        for _ in rec.records:  # every record is checked before a line is printed
            pass
        return list(iter_requests(rec))
    except (RecordingError, OSError) as exc:
        raise _ReplayRefusedError(exitcodes.BAD_INPUT, str(exc)) from None


def _replay(
    path: Path,
    target_name: str | None,
    check: bool,
    waves: str | None,
    out: Path | None,
    budget: Budget,
) -> ReplayReport:
    window = None
    if waves is not None:
        from npuemu.replay_waves import parse_window

        try:
            window = parse_window(waves)
        except ValueError as exc:
            raise _ReplayRefusedError(exitcodes.BAD_INPUT, str(exc)) from None
        out = out or Path(path.stem + ".fst")
        if out.is_dir():
            raise _ReplayRefusedError(exitcodes.BAD_INPUT, f"--out {out} is a folder")
    try:
        rec = open_recording(path, _limits(target_name))
        name = target_name or rec.header["target"]
        summary = scan(rec, target(name), budget) if name in TARGETS else None
        cfg, model = choose_model(rec, target_name, waves=window is not None)
    except (RecordingError, OSError) as exc:
        raise _ReplayRefusedError(exitcodes.BAD_INPUT, str(exc)) from None
    except ReplayError as exc:
        raise _ReplayRefusedError(exc.status, str(exc)) from None
    if window is not None and rec.wall_clock:
        raise _ReplayRefusedError(
            exitcodes.BAD_INPUT,
            f"{path} is a board's recording (wall-clock times): --waves takes a window of "
            "recorded cycles, which it has none of",
        )
    recorded = rec.header.get("target")
    if target_name is not None and target_name != recorded:
        print(f"npu-emu replay: replaying a {recorded} recording on {target_name}", file=sys.stderr)
    assert summary is not None  # choose_model refused an unknown target
    update, close = _progress_printer(summary.total, path.name)
    opts = {"check": check, "budget": budget, "summary": summary}
    try:
        if window is not None:
            from npuemu.replay_waves import WavesReplayer

            assert out is not None
            replayer: Replayer = WavesReplayer(rec, cfg, model, window=window, out=out, **opts)
        else:
            replayer = replayer_for(rec, cfg, model, **opts)
        return asyncio.run(run_replayer(replayer, update))
    except ReplayError as exc:
        raise _ReplayRefusedError(exc.status, str(exc)) from None
    except (RecordingError, OSError) as exc:  # the file changed under the replay
        raise _ReplayRefusedError(exitcodes.BAD_INPUT, str(exc)) from None
    finally:
        close()
