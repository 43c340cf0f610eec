"""One table of exit codes for the ``xrt`` and ``npu-emu`` commands (docs/debugging.md).

A CI script can tell a bad invocation from a device failure, a placement failure from a
numeric one, and a Ctrl-C from all of them, whichever subcommand it ran.
"""

from __future__ import annotations

import contextlib
import os
import sys

from xrt.errors import ErrorCode, XrtError

__all__ = [
    "BAD_INPUT",
    "BROKEN_PIPE",
    "CODES",
    "FAILED",
    "INPUT_ERRORS",
    "INTERRUPTED",
    "MISMATCH",
    "OK",
    "PLACEMENT",
    "TIMED_OUT",
    "for_error",
    "name_of",
    "quiet_broken_pipe",
]

OK = 0
FAILED = 1
"""The operation failed: the device, the server or the backend (XrtError 11012..11015)."""
BAD_INPUT = 2
"""Bad arguments or input: usage, a missing or malformed file (XrtError 11002, 11003, 11010,
11011)."""
PLACEMENT = 3
"""``xrt run --require-npu`` / ``xrt compile --require-npu``: quantized operators stayed on
the host."""
MISMATCH = 4
"""``xrt run --compare``: the outputs differ from the reference."""
TIMED_OUT = 5
"""``npu-emu wait``: no device could be leased within ``--timeout``."""
INTERRUPTED = 130
"""Ctrl-C (SIGINT), as a shell reports it; the lease was released."""
BROKEN_PIPE = 141
"""The reader of the output went away (``... | head``), as a shell reports SIGPIPE."""

CODES = {
    "ok": OK,
    "failed": FAILED,
    "bad_input": BAD_INPUT,
    "placement": PLACEMENT,
    "mismatch": MISMATCH,
    "timed_out": TIMED_OUT,
    "interrupted": INTERRUPTED,
    "broken_pipe": BROKEN_PIPE,
}
"""Every exit status the commands define, by name (docs/debugging.md lists each)."""

INPUT_ERRORS = frozenset(
    {ErrorCode.FILE_NOT_FOUND, ErrorCode.OUT_OF_RANGE, ErrorCode.WRONG_TYPE, ErrorCode.LOAD_FAILED}
)


def name_of(code: int) -> str:
    """The name of exit status `code` in lower case (``"bad_input"``), as ``--json`` errors
    give it; ``"exit_N"`` for a status of no name (a program's, under ``npu-emu attach``)."""
    return next((name for name, value in CODES.items() if value == code), f"exit_{code}")


def for_error(exc: XrtError) -> int:
    """`BAD_INPUT` for an error in what the user gave, else `FAILED`."""
    return BAD_INPUT if exc.code in INPUT_ERRORS else FAILED


def quiet_broken_pipe() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null (so that the
    interpreter's final flush does not fail again, as the Python docs advise) and return
    `BROKEN_PIPE`."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return BROKEN_PIPE
