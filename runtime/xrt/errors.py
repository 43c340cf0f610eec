"""The runtime's one exception type, carrying the Icraft XRT manual's error codes."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "XrtError"]


class ErrorCode(IntEnum):
    """Error codes from the manual (section "errors"); the value is what `XrtError.code` holds."""

    FILE_NOT_FOUND = 11002
    """A file or path does not exist."""
    OUT_OF_RANGE = 11003
    """An argument is out of range or malformed (sizes, addresses, indices)."""
    WRONG_TYPE = 11010
    """An argument has the wrong type or an unsupported value."""
    LOAD_FAILED = 11011
    """Loading a file (network, parameters) failed: corrupt, truncated or inconsistent."""
    WRONG_ORDER = 11012
    """An API was called in the wrong order (forward before apply, use after free...)."""
    BACKEND_INTERNAL = 11013
    """A backend failed internally."""
    DEVICE_INTERNAL = 11014
    """The device (or its transport) failed."""
    TIMEOUT = 11015
    """An operation did not finish in time."""


class XrtError(Exception):
    """Every error the runtime raises on purpose.

    Args:
        code: One of `ErrorCode` (an int is accepted and converted).
        message: What was wrong, naming the offending value.

    The string form is ``"[11003] message"`` so logs show the code without extra work.
    """

    def __init__(self, code: ErrorCode | int, message: str) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"[{int(self.code)}] {message}")

    def __reduce__(self) -> tuple[type[XrtError], tuple[int, str]]:
        # Keep the code when the error crosses a process boundary (pickling).
        return (type(self), (int(self.code), self.message))
