"""The transport contract suite (`xrt.testing.contracts`) run against the in-memory
transport, in both of the base class's paths: host-visible (zero-copy map) and not (the
`_read`/`_write` hooks). `tests/emulator` runs the same suite against gRPC."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from xrt import Device, HostDevice, MemRegion
from xrt.testing.contracts import (
    DEVICE_CHECKS,
    MEM_REGION_CHECKS,
    REG_REGION_CHECKS,
    RegTarget,
    check_id,
    run_checks,
)
from xrt.testing.memory_transport import MemoryMemRegion, MemoryRegRegion

_bases = itertools.count(0x1000_0000, 0x100_0000)


@pytest.fixture(params=["host-visible", "hooks-only", "aligned-64"])
def make_region(request: pytest.FixtureRequest) -> Callable[[], MemRegion]:
    def make() -> MemRegion:
        base = next(_bases)
        if request.param == "aligned-64":
            return MemoryMemRegion("mem", base, 1 << 20, host_visible=False, min_alignment=64)
        return MemoryMemRegion("mem", base, 1 << 20, host_visible=request.param == "host-visible")

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_mem_region_contract(check: Callable, make_region: Callable[[], MemRegion]) -> None:
    check(make_region)


@pytest.fixture(params=["npu-map", "no-map"])
def make_target(request: pytest.FixtureRequest) -> Callable[[], RegTarget]:
    from xrt.hw.regs import NPU

    def make() -> RegTarget:
        if request.param == "npu-map":
            region = MemoryRegRegion("npu", 0x4000_0000, regmap=NPU)
            scratch = NPU.register("SCRATCH").offset
            magic = NPU.register("MAGIC")
            return RegTarget(region, scratch, (magic.offset, magic.reset))
        return RegTarget(MemoryRegRegion("raw", 0x8000_0000, 0x100), 0x40)

    return make


@pytest.mark.parametrize("check", REG_REGION_CHECKS, ids=check_id)
def test_reg_region_contract(check: Callable, make_target: Callable[[], RegTarget]) -> None:
    check(make_target)


@pytest.fixture(params=["mem://board", "host://"])
def make_device(request: pytest.FixtureRequest) -> Callable[[], Device]:
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    return lambda: Device.open(request.param)


@pytest.mark.parametrize("check", DEVICE_CHECKS, ids=check_id)
def test_device_contract(check: Callable, make_device: Callable[[], Device]) -> None:
    check(make_device)


def test_host_region_passes_the_memory_checks_that_apply_to_host_memory() -> None:
    # The host region has no physical addresses, so only the allocator checks apply.
    region = HostDevice().default_mem_region()
    assert region.mem_manager.chunk_count == 0
    c = region.malloc(100, True, 256)
    assert c.begin.host_address % 256 == 0
    c.free()


def test_a_broken_transport_fails_the_contract() -> None:
    """The suite is not vacuous: a transport that drops every 4th byte on write fails."""

    class Lossy(MemoryMemRegion):
        def _write(self, addr: int, data: memoryview) -> None:
            data = bytearray(data)
            data[3::4] = bytes(len(data[3::4]))
            super()._write(addr, memoryview(data))

    failures = run_checks(MEM_REGION_CHECKS, lambda: Lossy("lossy", 0, 1 << 20, host_visible=False))
    assert "write_read_roundtrip" in failures and "large_transfer" in failures
    assert "geometry" not in failures
