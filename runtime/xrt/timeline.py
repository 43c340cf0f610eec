"""A timeline of a session run in the Chrome trace event format (opens in ui.perfetto.dev).

While `Session.enable_trace` is on, every execution unit of a `forward` / `step_to` becomes
one complete event ("X") on the lane of its backend, and backends add their own events
inside it with `Backend.trace` (an NPU backend: DMA transfers, the launch, its layers and
its load, compute and store units, on lanes such as ``"npu.dma"``). Devices that count
simulated cycles also draw on a second track, in simulated time (`add_cycles`): the same
launches, layers and units where the device's clock puts them, apart from the wall time the
simulation took. `Session.write_trace(path)` writes the JSON object format:
``{"traceEvents": [...], "displayTimeUnit": "ms"}``, timestamps in microseconds (from the
start of the run for wall time; of simulated time at the device's clock for the second
track), one process per track, one thread (``tid``) per lane, named by metadata events.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from xrt.errors import ErrorCode, XrtError

__all__ = ["TraceEvent", "TraceRecorder"]


@dataclass(frozen=True)
class TraceEvent:
    """One span of the timeline.

    Attributes:
        name: What ran (an operator's description, "dma plddr->udma", ...).
        lane: The row it is drawn on (a backend, or a unit of a device).
        start_us: Start, microseconds from the beginning of the run.
        dur_us: Duration in microseconds.
        category: A comma-separated category list (Chrome's ``cat``).
        args: Extra key/values shown with the event.
    """

    name: str
    lane: str
    start_us: float
    dur_us: float
    category: str = "op"
    args: dict[str, Any] = field(default_factory=dict)


WALL_PID = 1
SIMULATED_PID = 2


class TraceRecorder:
    """Collects `TraceEvent` objects of one run, in wall time from its `origin`, and
    simulated-time events (`add_cycles`) on a track of their own.

    Attributes:
        cycle_origin: Per device, its cycle count when the run first drew it: the simulated
            track's zero (`xrt.backend.npu._timeline` sets it).
    """

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.events: list[TraceEvent] = []
        self.sim_events: list[TraceEvent] = []
        self.cycle_origin: dict[str, int] = {}

    def add(
        self,
        name: str,
        lane: str,
        start: float,
        duration: float,
        category: str = "op",
        args: dict[str, Any] | None = None,
    ) -> None:
        """Record a span that began at `start` (a ``time.perf_counter()`` value) and lasted
        `duration` seconds."""
        self.events.append(
            TraceEvent(
                str(name),
                str(lane),
                (start - self.origin) * 1e6,
                max(0.0, duration) * 1e6,
                category,
                dict(args or {}),
            )
        )

    def add_cycles(
        self,
        name: str,
        lane: str,
        start_cycle: float,
        cycles: float,
        period_ps: int,
        category: str = "device",
        args: dict[str, Any] | None = None,
    ) -> None:
        """Record a span of the simulated track: from `start_cycle` for `cycles` cycles of
        a clock of `period_ps` picoseconds."""
        us = period_ps / 1e6
        self.sim_events.append(
            TraceEvent(
                str(name),
                str(lane),
                start_cycle * us,
                max(0.0, cycles) * us,
                category,
                {"cycles": round(cycles), **(args or {})},
            )
        )

    def to_chrome(self) -> dict[str, Any]:
        """The events as a Chrome trace JSON object."""
        out: list[dict[str, Any]] = []
        tracks = [(WALL_PID, "xrt (wall time)", self.events)]
        if self.sim_events:
            tracks.append((SIMULATED_PID, "device (simulated time)", self.sim_events))
        for pid, title, events in tracks:
            out.append(
                {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": title}}
            )
            lanes: dict[str, int] = {}
            for e in events:
                lanes.setdefault(e.lane, len(lanes) + 1)
            for lane, tid in lanes.items():
                name = {"name": lane}
                out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": name})
                sort = {"sort_index": tid}
                out.append(
                    {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": sort}
                )
            out.extend(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": lanes[e.lane],
                    "name": e.name,
                    "cat": e.category,
                    "ts": round(e.start_us, 3),
                    "dur": round(e.dur_us, 3),
                    "args": e.args,
                }
                for e in events
            )
        return {"traceEvents": out, "displayTimeUnit": "ms"}

    def write(self, path: str | os.PathLike[str]) -> str:
        """Write `to_chrome` as JSON to `path`; returns what the file holds, counted as a
        reader of its ``traceEvents`` counts them (``"135 trace events: 54 wall-time, 60
        simulated, 21 track and lane names"``).

        Raises:
            XrtError: 11002 when the file cannot be written.
        """
        doc = self.to_chrome()
        events = doc["traceEvents"]
        named = sum(1 for e in events if e["ph"] == "M")
        summary = (
            f"{len(events)} trace events: {len(self.events)} wall-time, "
            f"{len(self.sim_events)} simulated, {named} track and lane names"
        )
        try:
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"cannot write trace {str(path)!r}: {exc}"
            ) from None
        return summary
