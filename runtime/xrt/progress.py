"""Progress of long steps: a live line on a terminal, heartbeat lines in a CI log.

    with progress("building the buyi model"):
        slow_step()

On a terminal it shows ``building the buyi model  12s`` on stderr, updated twice a second
(tqdm). Off a terminal (a pipe, a CI log) a step that lasts longer than `HEARTBEAT_S`
prints ``building the buyi model: 5 s ...`` after `HEARTBEAT_S` seconds, then at growing
intervals up to `HEARTBEAT_MAX_S` (a log never goes quiet for a minute, and a long step
does not fill it), and ``building the buyi model: done in 12.3 s`` at its end; a short
step prints nothing. A step that knows its expected duration (``expected_s``: a model's
last build) is announced at once with it, and each line says how long is left::

    building the verilated model buyi: expected to take about 110 s (its last build here)
    building the verilated model buyi: 35 s, about 75 s left

``XRT_PROGRESS=0`` silences all of it, ``XRT_PROGRESS=1`` forces the heartbeat even on a
terminal. `step_progress` is a counting bar for loops with a known number of steps
(terminal only).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from tqdm import tqdm

__all__ = ["HEARTBEAT_MAX_S", "HEARTBEAT_S", "eta_text", "progress", "step_progress"]

HEARTBEAT_S = 5.0
"""Seconds before the first heartbeat line off a terminal; each next gap doubles..."""
HEARTBEAT_MAX_S = 30.0
"""... up to this many seconds."""


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
def _every(period_s: Callable[[], float], action: Callable[[], None]) -> Iterator[None]:
    """Call `action` from a thread while the block runs, `period_s()` seconds apart."""
    done = threading.Event()

    def loop() -> None:
        while not done.wait(period_s()):
            action()

    ticker = threading.Thread(target=loop, name="xrt-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


def eta_text(elapsed_s: float, expected_s: float | None) -> str:
    """``35 s, about 75 s left`` (or ``past the expected 110 s``) for a step expected to
    take `expected_s`; ``35 s ...`` without an expectation."""
    if expected_s is None:
        return f"{elapsed_s:.0f} s ..."
    left = expected_s - elapsed_s
    if left >= 1:
        return f"{elapsed_s:.0f} s, about {left:.0f} s left"
    return f"{elapsed_s:.0f} s, past the expected {expected_s:.0f} s"


@contextlib.contextmanager
def progress(
    description: str,
    *,
    expected_s: float | None = None,
    basis: str = "",
    detail: str = "",
) -> Iterator[None]:
    """Show `description` and the elapsed time while the block runs (see the module
    docstring for terminals, logs and ``XRT_PROGRESS``).

    Args:
        description: What runs (``building the verilated model buyi``).
        expected_s: How long it should take: then announced at once, with an ETA.
        basis: Where `expected_s` comes from (``its last build here``).
        detail: Said once in the announcement (a log file's path).
    """
    mode = _mode()
    if mode == "off":
        yield
        return
    if expected_s is not None:
        why = f" ({basis})" if basis else ""
        more = f"; {detail}" if detail else ""
        _say(f"{description}: expected to take about {expected_s:.0f} s{why}{more}")
    start = time.monotonic()
    if mode == "bar":
        bar = tqdm(total=None, desc=description, bar_format="{desc}  {postfix}", leave=False)

        def refresh() -> None:
            bar.set_postfix_str(eta_text(time.monotonic() - start, expected_s), refresh=True)

        try:
            with _every(lambda: 0.5, refresh):
                yield
        finally:
            bar.close()
        return
    beats = 0
    gap = HEARTBEAT_S / 2  # doubled before each wait: the first wait is HEARTBEAT_S

    def next_gap() -> float:
        nonlocal gap
        gap = min(gap * 2, max(HEARTBEAT_MAX_S, HEARTBEAT_S))
        return gap

    def beat() -> None:
        nonlocal beats
        beats += 1
        _say(f"{description}: {eta_text(time.monotonic() - start, expected_s)}")

    with _every(next_gap, beat):
        yield
    if beats:
        _say(f"{description}: done in {time.monotonic() - start:.1f} s")


def step_progress(total: int, description: str) -> tqdm:
    """A counting bar for `total` steps (call ``.update()``; close it or use ``with``)."""
    return tqdm(total=total, desc=description, disable=None, leave=False, unit="step")
