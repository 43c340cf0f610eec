"""The 32-bit value check that register ops and named access share."""

from __future__ import annotations

from xrt._checks import as_int
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regops import MASK32


def as_u32(value: object, what: str) -> int:
    """Return `value` as an int in ``[0, 2**32)``; XrtError 11010 for a non-int, 11003 for
    a value that does not fit 32 bits."""
    v = as_int(value, what)
    if not 0 <= v <= MASK32:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} {v:#x} does not fit 32 bits")
    return v
