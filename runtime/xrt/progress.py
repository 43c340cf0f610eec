"""Progress of long steps on the terminal (tqdm), silent when stderr is not a terminal.

    with progress("building the buyi model"):
        slow_step()

shows ``building the buyi model  12s`` on stderr, updated twice a second, while the step
runs; in a pipe, a CI log or a test, nothing is printed (tqdm's ``disable=None``).
`step_progress` is a counting bar for loops with a known number of steps.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from tqdm import tqdm

__all__ = ["progress", "step_progress"]


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """Show `description` and the elapsed time while the block runs (terminal only)."""
    bar = tqdm(
        total=None,
        desc=description,
        bar_format="{desc}  {elapsed}",
        disable=None,  # None: off unless stderr is a terminal
        leave=False,
    )
    if bar.disable:
        yield
        return
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.5):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()


def step_progress(total: int, description: str) -> tqdm:
    """A counting bar for `total` steps (call ``.update()``; close it or use ``with``)."""
    return tqdm(total=total, desc=description, disable=None, leave=False, unit="step")
