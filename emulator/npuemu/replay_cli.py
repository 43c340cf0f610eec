"""``npu-emu replay``'s command: read the recording, choose the model, replay with progress,
print the report (`npuemu.replay`, `npuemu.replay_waves`)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from npuemu.replay import (
    REQUEST_KINDS,
    Replayer,
    ReplayError,
    choose_model,
    run_replayer,
)
from npuemu.replay_board import replayer_for
from xrt import exitcodes
from xrt.progress import HEARTBEAT_S, step_progress
from xrt.recording import Kind, Recording, RecordingError, read_recording
from xrt.regtrace import RegisterNamer

__all__ = ["list_requests", "main"]


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
    namer = RegisterNamer.for_target(str(rec.header.get("target", "buyi")))
    period = int(rec.header.get("period_ps", 1)) or 1
    lines, index = [], 0
    for r in rec.records:
        b = r.body
        if r.kind not in REQUEST_KINDS:
            if r.kind != Kind.END:
                lines.append(
                    f"      -- {r.kind} {', '.join(f'{k}={v}' for k, v in b.items() if k != 'k')}"
                )
            continue
        when = ""
        if b.get("t") is not None:
            when = f"cycles {int(b['t']) // period:>12,} .. {int(b['c']):>12,}  "
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
        lines.append(f"{index:>5}  {when}{what}")
        index += 1
    return lines


def main(
    path: Path,
    target_name: str | None,
    *,
    check: bool,
    waves: str | None = None,
    out: Path | None = None,
    listing: bool = False,
) -> int:
    """``npu-emu replay``: the exit status (0; 4 for a divergence; 2 for a recording that
    cannot be read or replayed here; 1 when the device fails)."""
    if listing:
        try:
            rec = read_recording(path)
        except (RecordingError, OSError) as exc:
            print(f"npu-emu replay: {exc}", file=sys.stderr)
            return exitcodes.BAD_INPUT
        print("\n".join(list_requests(rec)))
        return exitcodes.OK
    window = None
    if waves is not None:
        from npuemu.replay_waves import parse_window

        try:
            window = parse_window(waves)
        except ValueError as exc:
            print(f"npu-emu replay: {exc}", file=sys.stderr)
            return exitcodes.BAD_INPUT
        out = out or Path(path.stem + ".fst")
        if out.is_dir():
            print(f"npu-emu replay: --out {out} is a folder", file=sys.stderr)
            return exitcodes.BAD_INPUT
    try:
        rec = read_recording(path)
        cfg, model = choose_model(rec, target_name, waves=window is not None)
    except (RecordingError, OSError) as exc:
        print(f"npu-emu replay: {exc}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except ReplayError as exc:
        print(f"npu-emu replay: {exc}", file=sys.stderr)
        return exc.status
    if window is not None and rec.wall_clock:
        print(
            f"npu-emu replay: {path} is a board's recording (wall-clock times): --waves "
            "takes a window of recorded cycles, which it has none of",
            file=sys.stderr,
        )
        return exitcodes.BAD_INPUT
    recorded = rec.header.get("target")
    if target_name is not None and target_name != recorded:
        print(f"npu-emu replay: replaying a {recorded} recording on {target_name}", file=sys.stderr)
    total = sum(r.kind in REQUEST_KINDS for r in rec.records)
    update, close = _progress_printer(total, path.name)
    try:
        if window is not None:
            from npuemu.replay_waves import WavesReplayer

            assert out is not None
            replayer: Replayer = WavesReplayer(rec, cfg, model, window=window, out=out, check=check)
        else:
            replayer = replayer_for(rec, cfg, model, check=check)
        report = asyncio.run(run_replayer(replayer, update))
    except ReplayError as exc:
        print(f"npu-emu replay: {exc}", file=sys.stderr)
        return exc.status
    finally:
        close()
    for line in report.lines():
        print(line)
    return exitcodes.MISMATCH if report.divergence is not None else exitcodes.OK
