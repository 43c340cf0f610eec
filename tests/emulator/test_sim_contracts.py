"""The data model's contract suites (`xrt.testing.contracts`) against ``sim://buyi``: the
same checks the ``grpc://`` and ``axi://`` devices pass (tests/integration/
test_grpc_contracts.py), on a simulated NPU of this process.

- ``udma`` windows (the mapped memory file: `GrpcMemRegion` with a host map);
- the ``dma`` register block (SCRATCH as the scratch register, MAGIC as the constant the
  RTL refuses to overwrite), on the register ring;
- ``plddr`` windows (`DmaMemRegion` on the device's DMA engine);
- the device itself (each check opens its own ``sim://buyi``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from npuemu.embedded import SimTransport
from xrt import Device, MemRegion
from xrt.hw.regs import DMA
from xrt.npu_device import DmaMemRegion, NpuDevice
from xrt.testing.contracts import (
    DEVICE_CHECKS,
    MEM_REGION_CHECKS,
    REG_REGION_CHECKS,
    RegTarget,
    check_id,
)
from xrt.transport.grpc import GrpcMemRegion, GrpcRegRegion

pytestmark = pytest.mark.sim

WINDOW = 4 << 20


@pytest.fixture(scope="module")
def sim() -> Iterator[NpuDevice]:
    dev = Device.open("sim://buyi")
    assert isinstance(dev, NpuDevice) and isinstance(dev.transport, SimTransport)
    yield dev
    dev.close()


@pytest.fixture
def make_udma(sim: NpuDevice) -> Callable[[], MemRegion]:
    t = sim.transport
    udma = t.info.memory("udma")
    # Windows below the DMA bounce buffer (the top of udma), one per region asked for.
    bases = itertools.cycle(range(udma.base, udma.end - (8 << 20), WINDOW))

    def make() -> MemRegion:
        region = t.host_region("udma", base=next(bases), size=WINDOW)
        assert isinstance(region, GrpcMemRegion) and region.host_map is not None
        return region

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_udma_contract(check: Callable, make_udma: Callable[[], MemRegion]) -> None:
    check(make_udma)


@pytest.fixture
def make_dma_target(sim: NpuDevice) -> Callable[[], RegTarget]:
    def make() -> RegTarget:
        region = sim.transport.reg_region("dma", DMA)
        assert isinstance(region, GrpcRegRegion) and region.size == 0x1000
        magic = DMA.register("MAGIC")
        return RegTarget(region, DMA.register("SCRATCH").offset, (magic.offset, magic.reset))

    return make


@pytest.mark.parametrize("check", REG_REGION_CHECKS, ids=check_id)
def test_dma_registers_contract(check: Callable, make_dma_target: Callable[[], RegTarget]) -> None:
    check(make_dma_target)


@pytest.fixture
def make_plddr(sim: NpuDevice) -> Callable[[], MemRegion]:
    plddr = sim.get_mem_region("plddr")
    bases = itertools.count(plddr.base, 16 << 20)

    def make() -> MemRegion:
        base = next(bases)
        return DmaMemRegion(f"plddr@{base:#x}", base, 16 << 20, sim.dma_engine)

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_plddr_contract(check: Callable, make_plddr: Callable[[], MemRegion]) -> None:
    check(make_plddr)


@pytest.mark.parametrize("check", DEVICE_CHECKS, ids=check_id)
def test_device_contract(check: Callable) -> None:
    check(lambda: Device.open("sim://buyi"))
