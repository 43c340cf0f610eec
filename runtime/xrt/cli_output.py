"""How the ``xrt`` and ``npu-emu`` commands end on an error, with or without ``--json``.

Without ``--json`` an error is one line on stderr, ``PROG: error: MESSAGE``. With ``--json``
it is one JSON document on stdout, so a script that parses the output on success parses it
on failure too::

    {"error": {"code": "bad_input", "exit_status": 2, "xrt_error": 11003, "message": "..."}}

``code`` is the name of the exit status (`xrt.exitcodes.name_of`: every error has one,
usage errors and Ctrl-C included); ``xrt_error`` is the runtime's error number
(`xrt.errors.ErrorCode`) when an `XrtError` caused it, else absent. The exit status is the
documented one (docs/debugging.md, "Exit status") either way.

`CliParser` turns argparse's usage errors into `UsageError` so that they take the same
road (argparse itself would print usage and exit 2 before ``--json`` could be honoured).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from xrt import exitcodes
from xrt.errors import XrtError

__all__ = [
    "CliParser",
    "UsageError",
    "error_document",
    "json_asked",
    "parse_or_report",
    "report_error",
]


class UsageError(Exception):
    """A command line argparse refused: exit status 2."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise `UsageError` (its sub-parsers too)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def json_asked(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (also when it failed to parse)."""
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def error_document(code: int, message: str, xrt_error: int | None = None) -> dict[str, object]:
    """The ``{"error": {...}}`` document of an error ending with exit status `code`."""
    body: dict[str, object] = {
        "code": exitcodes.name_of(code),
        "exit_status": code,
        "message": message,
    }
    if xrt_error is not None:
        body["xrt_error"] = xrt_error
    return {"error": body}


def report_error(
    prog: str, code: int, error: XrtError | str, *, as_json: bool, usage: str = ""
) -> int:
    """Say `error` (stderr, or the JSON document on stdout) and return `code`."""
    message = error.message if isinstance(error, XrtError) else error
    if as_json:
        xrt_error = int(error.code) if isinstance(error, XrtError) else None
        print(json.dumps(error_document(code, message, xrt_error)), flush=True)
        return code
    if usage:
        print(usage.rstrip(), file=sys.stderr)
    text = str(error)  # an XrtError shows its number: "[11003] ..."
    label = "" if code == exitcodes.INTERRUPTED else "error: "  # Ctrl-C is no error
    print(f"{prog}: {label}{text}", file=sys.stderr, flush=True)
    return code


def parse_or_report(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> argparse.Namespace | int:
    """`argv` parsed, or the exit code after a usage error was reported (or --help/--version
    printed)."""
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        return report_error(
            exc.parser.prog,
            exitcodes.BAD_INPUT,
            exc.message,
            as_json=json_asked(argv),
            usage=exc.parser.format_usage(),
        )
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0) if isinstance(exc.code, int | None) else exitcodes.BAD_INPUT
