"""Contract checks every transport must pass: the behaviour of `MemRegion`, `RegRegion` and
`Device` that the runtime relies on, whatever carries the bytes (memory, gRPC, mmap).

Each check is a plain function taking a *factory* and raising AssertionError (or an
unexpected exception) on failure; it needs no test framework. Run a suite with pytest by
parametrizing over it::

    from xrt.testing.contracts import MEM_REGION_CHECKS, check_id

    @pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
    def test_mem_region(check, make_region):
        check(make_region)

Factories:

- `MEM_REGION_CHECKS` take ``make_region() -> MemRegion``: a fresh, open, empty region
  (no live chunks) of at least 64 KiB, with min_alignment <= 64 and a base that is a
  multiple of it. Several calls may be made per check and must return distinct regions
  (cross-region copies are tested between two).
- `REG_REGION_CHECKS` take ``make_target() -> RegTarget``: an open register region plus the
  offset of a side-effect-free read/write 32-bit register (e.g. the NPU's ``SCRATCH``) and,
  optionally, a constant read-only register.
- `DEVICE_CHECKS` take ``make_device() -> Device``: a freshly opened device the check
  closes itself.

Cleaning up what factories opened (connections, leases) is the caller's business.
"""

from xrt.testing._check_tools import RegTarget, check_id, expect_error, run_checks
from xrt.testing._device_checks import DEVICE_CHECKS, REG_REGION_CHECKS
from xrt.testing._memory_checks import MEM_REGION_CHECKS

__all__ = [
    "DEVICE_CHECKS",
    "MEM_REGION_CHECKS",
    "REG_REGION_CHECKS",
    "RegTarget",
    "check_id",
    "expect_error",
    "run_checks",
]
