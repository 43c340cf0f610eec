"""Argument checks shared by the data model: every one raises `XrtError` with the right code.

Wrong Python types raise 11010 (`ErrorCode.WRONG_TYPE`); values of the right type that are
out of range (negative sizes, misaligned addresses) raise 11003 (`ErrorCode.OUT_OF_RANGE`).
"""

from __future__ import annotations

import mmap
from array import array
from typing import TypeAlias

import numpy as np

from xrt.errors import ErrorCode, XrtError

BufferLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray | mmap.mmap | array
"""What the runtime accepts wherever host bytes go in or come out."""

ADDR_LIMIT = 1 << 64
"""Physical addresses are 64-bit."""


def as_int(value: object, what: str) -> int:
    """Return `value` as an int; XrtError 11010 for bools, floats, strings and the like."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"{what} must be an int, got {type(value).__name__} {value!r}"
        )
    return int(value)


def as_size(value: object, what: str) -> int:
    """Return `value` as an int >= 0 (11010 for a non-int, 11003 for a negative one)."""
    n = as_int(value, what)
    if n < 0:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} must be >= 0, got {n}")
    return n


def as_bool(value: object, what: str) -> bool:
    """Return `value` if it is a bool (numpy bools too); XrtError 11010 otherwise."""
    if not isinstance(value, bool | np.bool_):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"{what} must be a bool, got {type(value).__name__} {value!r}"
        )
    return bool(value)


def as_alignment(value: object, what: str = "alignment") -> int:
    """Return `value` if it is a power of two >= 1; XrtError 11003 otherwise."""
    n = as_int(value, what)
    if n < 1 or n & (n - 1):
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} must be a power of two >= 1, got {n}")
    return n


def as_seconds(value: object, what: str) -> float:
    """Accept seconds as int/float or a `datetime.timedelta`; must be finite and >= 0."""
    from datetime import timedelta

    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{what} must be seconds (int, float or timedelta), got {type(value).__name__}",
        )
    if not np.isfinite(seconds) or seconds < 0:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} must be finite and >= 0, got {seconds}")
    return seconds


def byte_view(obj: object, *, writable: bool, what: str, copy_ok: bool | None = None) -> memoryview:
    """Return a flat unsigned-byte memoryview over `obj`'s memory (no copy when possible).

    Args:
        obj: bytes, bytearray, memoryview, numpy array, mmap, array.array, ...
        writable: True for a destination: the view must be writable and contiguous (a copy
            would lose the data written into it).
        what: Names the argument in error messages.
        copy_ok: Whether a non-contiguous source may be copied into a contiguous one;
            defaults to ``not writable``.

    Raises:
        XrtError: 11010 when `obj` is no buffer, is read-only while `writable`, or is
            non-contiguous where a copy is not acceptable.
    """
    if copy_ok is None:
        copy_ok = not writable
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            if not copy_ok:
                raise XrtError(ErrorCode.WRONG_TYPE, f"{what} must be a C-contiguous numpy array")
            obj = np.ascontiguousarray(obj)
        if writable and not obj.flags.writeable:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what} is a read-only numpy array")
        return memoryview(obj.reshape(-1).view(np.uint8))
    try:
        mv = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{what} must be a bytes-like object (bytes, bytearray, memoryview, numpy array), "
            f"got {type(obj).__name__}",
        ) from None
    if writable and mv.readonly:
        raise XrtError(ErrorCode.WRONG_TYPE, f"{what} is read-only ({type(obj).__name__})")
    if not mv.c_contiguous:
        if not copy_ok:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what} must be a contiguous buffer")
        mv = memoryview(mv.tobytes())
    if mv.ndim != 1 or mv.format != "B":
        try:
            mv = mv.cast("B")
        except TypeError:
            mv = memoryview(np.frombuffer(mv, dtype=np.uint8))  # exotic formats
    return mv


def hex_range(begin: int, nbytes: int) -> str:
    """Format ``[begin, begin + nbytes)`` in hex for messages."""
    return f"[{begin:#x}, {begin + nbytes:#x})"
