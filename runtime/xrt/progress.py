"""Progress of long steps: a live line on a terminal, heartbeat lines in a CI log.

    with progress("building the buyi model"):
        slow_step()

On a terminal it shows ``building the buyi model  12s`` on stderr, updated twice a second
(tqdm). Off a terminal (a pipe, a CI log) a step that lasts longer than `HEARTBEAT_S`
prints ``building the buyi model: 5 s ...`` every `HEARTBEAT_S` seconds and
``building the buyi model: done in 12.3 s`` at its end, so a log never goes quiet for a
minute; a short step prints nothing. ``XRT_PROGRESS=0`` silences both, ``XRT_PROGRESS=1``
forces the heartbeat even on a terminal. `step_progress` is a counting bar for loops with a
known number of steps (terminal only).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from tqdm import tqdm

__all__ = ["HEARTBEAT_S", "progress", "step_progress"]

HEARTBEAT_S = 5.0
"""Seconds between heartbeat lines off a terminal (and before the first one)."""


def _mode() -> str:
    """One of ``off``, ``heartbeat``, ``bar`` (see the module docstring)."""
    setting = os.environ.get("XRT_PROGRESS", "").strip().lower()
    if setting in ("0", "off", "no", "false"):
        return "off"
    if setting in ("1", "on", "yes", "true"):
        return "heartbeat"
    try:
        return "bar" if sys.stderr.isatty() else "heartbeat"
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return "off"


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _every(period_s: float, action: Callable[[], None]) -> Iterator[None]:
    """Call `action` every `period_s` seconds (from a thread) while the block runs."""
    done = threading.Event()

    def loop() -> None:
        while not done.wait(period_s):
            action()

    ticker = threading.Thread(target=loop, name="xrt-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """Show `description` and the elapsed time while the block runs (see the module
    docstring for terminals, logs and ``XRT_PROGRESS``)."""
    mode = _mode()
    if mode == "off":
        yield
        return
    if mode == "bar":
        bar = tqdm(total=None, desc=description, bar_format="{desc}  {elapsed}", leave=False)
        try:
            with _every(0.5, bar.refresh):
                yield
        finally:
            bar.close()
        return
    start = time.monotonic()
    beats = 0

    def beat() -> None:
        nonlocal beats
        beats += 1
        _say(f"{description}: {time.monotonic() - start:.0f} s ...")

    with _every(HEARTBEAT_S, beat):
        yield
    if beats:
        _say(f"{description}: done in {time.monotonic() - start:.1f} s")


def step_progress(total: int, description: str) -> tqdm:
    """A counting bar for `total` steps (call ``.update()``; close it or use ``with``)."""
    return tqdm(total=total, desc=description, disable=None, leave=False, unit="step")
