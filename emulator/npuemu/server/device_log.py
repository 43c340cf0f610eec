"""Device log capture: the server's log lines about a device, streamed to its lease holder.

The AIC100 runtime's ``Context`` can collect device logs (its devices stream log lines to
the host). Ours are the server's own log records about a device: its lease opened and
released, worker starts, crashes and restarts, checkpoints, faults. `DeviceLogHub` is a
`logging.Handler` on the ``npuemu`` logger that hands every record naming a device (the
device's name as a whole word in the message) to that device's subscribers: the
``FollowDeviceLog`` streams of its lease holder. A subscriber's queue is bounded: a reader
too slow for it loses the oldest records, and the next record it gets says how many.

A record reaches only streams opened by the device's current holder, and the stream checks
the lease is still live before each record it sends, so the next holder's lines (its
client name opening the device) never reach the previous holder.

Device-side lines: the simulated device's own events (an interrupt raised, an engine or DMA
error, a reset: `npuemu.worker.device_watch`) come from the device (`device_event`), not
through logging (errors and resets are also written on the ``npuemu.device`` logger, for
the server's log). They go to that device's streams with their source
(`LogSource.DEVICE`) and cycle, and the last `BACKLOG_LINES` of the current lease are kept:
a stream opened later gets them first (as the AIC100 runtime buffers host lines to merge
them with the device's). `forget` drops them when a lease begins or ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass

from xrt.hw.port import DeviceEvent

__all__ = ["BACKLOG_LINES", "DeviceLogHub", "LogLine", "LogSource", "Subscription", "device_logger"]

QUEUE_LINES = 1000
"""Records a subscriber may have waiting before the oldest are dropped."""
BACKLOG_LINES = 256
"""Device-side lines of the current lease kept for a stream opened later."""

device_logger = logging.getLogger("npuemu.device")
"""The logger of the devices' own errors and resets, in the server's log."""


class LogSource(enum.IntEnum):
    """Where a line comes from (the wire's ``DeviceLogSource``)."""

    SERVER = 1  # the server's own lines about the device
    DEVICE = 2  # the simulated device's events


@dataclass(frozen=True)
class LogLine:
    """One record, as the wire carries it."""

    unix_time_ns: int
    level: int
    device: str
    message: str
    dropped: int = 0  # records dropped before this one
    source: LogSource = LogSource.SERVER
    cycle: int = 0  # a device-side line's device cycle


class Subscription:
    """One stream's queue of a device's records."""

    def __init__(self, device: str, loop: asyncio.AbstractEventLoop) -> None:
        self.device = device
        self.loop = loop
        self.queue: asyncio.Queue[LogLine] = asyncio.Queue()
        self.dropped = 0

    def put(self, line: LogLine) -> None:
        """Queue `line` (in the event loop's thread), dropping the oldest when full."""
        while self.queue.qsize() >= QUEUE_LINES:
            self.queue.get_nowait()
            self.dropped += 1
        if self.dropped:
            line = LogLine(line.unix_time_ns, line.level, line.device, line.message,
                           self.dropped, line.source, line.cycle)  # fmt: skip
            self.dropped = 0
        self.queue.put_nowait(line)


class DeviceLogHub(logging.Handler):
    """Routes the ``npuemu`` loggers' records to the subscribers of the devices they name.

    Args:
        devices: The server's device names.
    """

    def __init__(self, devices: list[str]) -> None:
        super().__init__(level=logging.DEBUG)
        self._patterns = [(d, re.compile(rf"(?<![\w-]){re.escape(d)}(?![\w-])")) for d in devices]
        self._subs: dict[str, list[Subscription]] = {d: [] for d in devices}
        self._backlog: dict[str, deque[LogLine]] = {d: deque(maxlen=BACKLOG_LINES) for d in devices}
        self._lock = threading.Lock()  # records come from any thread

    def attach(self) -> None:
        logging.getLogger("npuemu").addHandler(self)

    def detach(self) -> None:
        logging.getLogger("npuemu").removeHandler(self)

    def subscribe(self, device: str) -> Subscription:
        """A new queue of `device`'s records: the current lease's device-side lines so far,
        then every record from now on."""
        sub = Subscription(device, asyncio.get_running_loop())
        with self._lock:
            for line in self._backlog[device]:
                sub.put(line)
            self._subs[device].append(sub)
        return sub

    def forget(self, device: str) -> None:
        """A lease begins or ends: its device-side lines are no one else's."""
        with self._lock:
            self._backlog[device].clear()

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs.get(sub.device, []):
                self._subs[sub.device].remove(sub)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == device_logger.name:
            return  # a device's own line: `device_event` delivered it
        with self._lock:
            if not any(self._subs.values()):
                return  # nobody follows: no formatting cost
            targets = {d: list(s) for d, s in self._subs.items() if s}
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the logging call
            return
        for device, pattern in self._patterns:
            subs = targets.get(device)
            if not subs or not pattern.search(message):
                continue
            line = LogLine(int(record.created * 1e9) or time.time_ns(), record.levelno, device,
                           message)  # fmt: skip
            for sub in subs:
                # RuntimeError: the loop is closing (the server is stopping)
                with contextlib.suppress(RuntimeError):
                    sub.loop.call_soon_threadsafe(sub.put, line)

    def device_event(self, device: str, event: DeviceEvent) -> None:
        """A device-side line: to the device's streams and its lease's backlog."""
        line = LogLine(time.time_ns(), event.level, device, event.message, 0, LogSource.DEVICE,
                       event.cycle)  # fmt: skip
        with self._lock:
            if device not in self._backlog:
                return
            self._backlog[device].append(line)
            subs = list(self._subs[device])
        for sub in subs:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                sub.loop.call_soon_threadsafe(sub.put, line)
