"""Ctrl-C that is never lost by the ``xrt`` command.

Python raises KeyboardInterrupt wherever the main thread is when SIGINT arrives. If it is
inside a finalizer (a freed chunk's deleter, a gRPC call's ``__del__``), the exception is
"ignored" and the command runs on: `xrt run --runs 100000` outlived a Ctrl-C that way.
`sigint_caught` remembers every SIGINT, so `check_interrupt` (called between runs) raises
again what a finalizer swallowed, and keeps the swallowed one off stderr.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["check_interrupt", "sigint_caught", "sigint_deferred"]

_pending = threading.Event()
_raise_at_once = True  # False inside `sigint_deferred`


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _pending.set()
    if _raise_at_once:
        raise KeyboardInterrupt


def check_interrupt() -> None:
    """Raise KeyboardInterrupt if a SIGINT came (and was swallowed where it landed)."""
    if _pending.is_set():
        raise KeyboardInterrupt


@contextmanager
def sigint_caught() -> Iterator[None]:
    """While the block runs (in the main thread), every SIGINT is remembered for
    `check_interrupt`; outside the main thread, or where SIGINT is ignored (a shell's
    background job), this does nothing."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a background job's: keep it
    ):
        yield
        return
    previous_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _pending.is_set():
            return  # raised again by check_interrupt
        previous_hook(unraisable)

    previous = signal.signal(signal.SIGINT, _on_sigint)
    sys.unraisablehook = hook
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
        _pending.clear()


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Inside `sigint_caught`: a SIGINT during the block is raised when the block ends,
    not inside it. For native code that must not be interrupted half way: a
    KeyboardInterrupt inside a C extension's module init (``import onnx``) crashed the
    process."""
    global _raise_at_once
    before, _raise_at_once = _raise_at_once, False
    try:
        yield
    finally:
        _raise_at_once = before
    check_interrupt()
