"""The RTL's failed assertions, as the simulator process sees them.

Every assertion of the RTL (rtl/include/npu_assert.svh) reports a failure through DPI-C to
rtl/sim/npu_assert_dpi.cpp, which keeps the first 64 in full and counts them all. This
module reads those records through ctypes from inside the simulator process (cocotb runs
there): the device worker turns a failure into a device error (11014 naming the assertion
and its cycle), the harness clears them at a device reset, and tests see which assertion
fired.

A model built before assertions existed has no records: `available()` is False and every
function answers as if nothing fired.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

__all__ = [
    "AssertionFailure",
    "available",
    "clear",
    "count",
    "failures",
    "mark_reported",
    "unreported",
]


@dataclass(frozen=True, slots=True)
class AssertionFailure:
    """One failed assertion: its name (the SVA label), where (the instance path), the
    simulated time (ps) and its message."""

    name: str
    scope: str
    time_ps: int
    message: str

    def cycle(self, period_ps: int) -> int:
        """The clock cycle of the failure, with clock period `period_ps`."""
        return self.time_ps // period_ps

    def describe(self, period_ps: int) -> str:
        """One line: name, cycle, instance and message."""
        return (
            f"assertion {self.name} failed at cycle {self.cycle(period_ps)} "
            f"({self.scope}): {self.message}"
        )


@cache
def _lib() -> ctypes.CDLL | None:
    lib = ctypes.CDLL(None)  # the simulator executable itself
    if not hasattr(lib, "npu_worker_assert_count"):
        return None
    lib.npu_worker_assert_count.restype = ctypes.c_uint64
    lib.npu_worker_assert_count.argtypes = []
    lib.npu_worker_assert_record.restype = ctypes.c_char_p
    lib.npu_worker_assert_record.argtypes = [ctypes.c_uint64]
    lib.npu_worker_assert_clear.restype = None
    lib.npu_worker_assert_clear.argtypes = []
    lib.npu_worker_assert_unreported.restype = ctypes.c_uint64
    lib.npu_worker_assert_unreported.argtypes = []
    lib.npu_worker_assert_mark_reported.restype = None
    lib.npu_worker_assert_mark_reported.argtypes = []
    return lib


def available() -> bool:
    """Whether this process is a simulator with assertion records."""
    return _lib() is not None


def count() -> int:
    """Failures since the last `clear` (recorded in full or not)."""
    lib = _lib()
    return 0 if lib is None else int(lib.npu_worker_assert_count())


def failures() -> list[AssertionFailure]:
    """The recorded failures since the last `clear`, first first (at most 64)."""
    lib = _lib()
    if lib is None:
        return []
    out = []
    i = 0
    while (raw := lib.npu_worker_assert_record(i)) is not None:
        time_ps, name, scope, message = raw.decode(errors="replace").split("\t", 3)
        out.append(AssertionFailure(name, scope, int(time_ps), message))
        i += 1
    return out


def unreported() -> list[AssertionFailure]:
    """The recorded failures no reply has named yet (the register rings' service names
    the first in the reply of the ring request during which it failed)."""
    lib = _lib()
    if lib is None:
        return []
    n = int(lib.npu_worker_assert_unreported())
    if n == 0:
        return []
    fired = failures()
    return fired[max(0, len(fired) - n) :] or fired[-1:]


def mark_reported() -> None:
    """Every failure so far has been named in a reply."""
    lib = _lib()
    if lib is not None:
        lib.npu_worker_assert_mark_reported()


def clear() -> None:
    """Forget every failure (a device reset starts clean)."""
    lib = _lib()
    if lib is not None:
        lib.npu_worker_assert_clear()
