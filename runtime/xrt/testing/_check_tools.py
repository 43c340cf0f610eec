"""What the contract checks share (`xrt.testing.contracts`): the factories they take, the
`RegTarget` the register checks are given, `expect_error`, and running checks by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.memory import MemRegion
from xrt.registers import RegRegion

__all__ = [
    "DeviceFactory",
    "MemRegionFactory",
    "RegTarget",
    "RegTargetFactory",
    "check_id",
    "expect_error",
    "run_checks",
]


@dataclass
class RegTarget:
    """What the register checks need to know about a register region.

    Attributes:
        region: The region under test (open).
        scratch: Offset of a plain 32-bit read/write register without side effects.
        constant: ``(offset, value)`` of a read-only register with a fixed value, if any.
    """

    region: RegRegion
    scratch: int
    constant: tuple[int, int] | None = None


MemRegionFactory = Callable[[], MemRegion]
RegTargetFactory = Callable[[], RegTarget]
DeviceFactory = Callable[[], Device]


@contextmanager
def expect_error(code: ErrorCode) -> Iterator[None]:
    """Assert that the block raises XrtError with `code`."""
    try:
        yield
    except XrtError as exc:
        assert exc.code == code, f"expected XrtError {int(code)}, got {exc}"
        assert exc.message, "an XrtError must say what was wrong"
    else:
        raise AssertionError(f"expected XrtError {int(code)} ({code.name}), nothing raised")


def check_id(check: Callable[..., object]) -> str:
    """A readable test id for a check (``write_read_roundtrip``)."""
    return check.__name__.removeprefix("check_")


def run_checks(checks: tuple[Callable[..., None], ...], factory: Callable[[], object]) -> dict:
    """Run checks outside pytest; returns ``{check name: exception}`` for the failures."""
    failures = {}
    for check in checks:
        try:
            check(factory)
        except Exception as exc:
            failures[check_id(check)] = exc
    return failures
