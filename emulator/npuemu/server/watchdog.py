"""A request's watchdog in the server: a wall-clock limit on the worker's answer that waits
on while the debugger holds the device stopped (the model stands still on purpose then; it
is not hung). `npuemu.server.worker_process` arms one per request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["Watchdog"]


class Watchdog:
    """Fails `fut` with TimeoutError after `timeout_s`, unless `stopped()` says the device is
    stopped then: it waits another `timeout_s` (and so on)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float,
                 fut: asyncio.Future[Any], stopped: Callable[[], bool]) -> None:  # fmt: skip
        self._loop, self._timeout_s, self._fut, self._stopped = loop, timeout_s, fut, stopped
        self._handle = loop.call_later(timeout_s, self._fire)

    def _fire(self) -> None:
        if self._fut.done():
            return
        if self._stopped():
            self._handle = self._loop.call_later(self._timeout_s, self._fire)
            return
        self._fut.set_exception(TimeoutError())

    def cancel(self) -> None:
        self._handle.cancel()
