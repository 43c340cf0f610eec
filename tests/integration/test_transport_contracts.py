"""The data model's contract suites (`xrt.testing.contracts`) on every route to a device:
a real server over gRPC (streaming, and the local fast path) and the embedded
``sim://buyi`` (a simulation worker of this process). One suite, one fixture per route, so
a route cannot drift from the others.

- ``udma`` windows (`GrpcMemRegion`; distinct windows, so the regions a check asks for are
  distinct memory);
- the ``dma`` register block (SCRATCH as the scratch register, MAGIC as the constant the
  RTL refuses to overwrite with SLVERR, see `check_reg_constant`);
- ``plddr`` windows (`DmaMemRegion` on the device's DMA engine);
- the device itself (each check opens its own device by URL).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from npuemu.embedded import SimTransport
from npuemu.server.launch import ServerProcess
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
from xrt.transport.grpc import GrpcMemRegion, GrpcRegRegion, GrpcTransport

pytestmark = pytest.mark.sim

WINDOW = 4 << 20
ROUTES = ["grpc", "grpc-local", "sim"]


@dataclass
class Route:
    """One way to the device: the URL that opens it, and an opened device on it."""

    url: str
    device: NpuDevice

    @property
    def transport(self) -> GrpcTransport | SimTransport:
        t = self.device.transport
        assert isinstance(t, GrpcTransport | SimTransport)
        return t


@pytest.fixture(scope="module")
def sim_device() -> Iterator[NpuDevice]:
    dev = Device.open("sim://buyi")
    assert isinstance(dev, NpuDevice) and isinstance(dev.transport, SimTransport)
    yield dev
    dev.close()


@pytest.fixture(params=ROUTES)
def route(request: pytest.FixtureRequest) -> Iterator[Route]:
    if request.param == "sim":
        yield Route("sim://buyi", request.getfixturevalue("sim_device"))
        return
    server: ServerProcess = request.getfixturevalue("buyi_server")
    local = request.param == "grpc-local"
    url = f"{server.url}?local={int(local)}"
    dev = Device.open(url)
    assert isinstance(dev, NpuDevice)
    t = dev.transport
    assert isinstance(t, GrpcTransport) and t.local_fast_path == local, t.local_note
    yield Route(url, dev)
    dev.close()


@pytest.fixture
def make_udma(route: Route) -> Callable[[], MemRegion]:
    t = route.transport
    udma = t.info.memory("udma")
    # Windows below the DMA bounce buffer (the top of udma), one per region asked for.
    bases = itertools.cycle(range(udma.base, udma.end - (8 << 20), WINDOW))

    def make() -> MemRegion:
        region = t.host_region("udma", base=next(bases), size=WINDOW)
        assert isinstance(region, GrpcMemRegion)
        return region

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_udma_contract(check: Callable, make_udma: Callable[[], MemRegion]) -> None:
    check(make_udma)


@pytest.fixture
def make_dma_target(route: Route) -> Callable[[], RegTarget]:
    def make() -> RegTarget:
        region = route.transport.reg_region("dma", DMA)
        assert isinstance(region, GrpcRegRegion) and region.size == 0x1000
        magic = DMA.register("MAGIC")
        return RegTarget(region, DMA.register("SCRATCH").offset, (magic.offset, magic.reset))

    return make


@pytest.mark.parametrize("check", REG_REGION_CHECKS, ids=check_id)
def test_dma_registers_contract(check: Callable, make_dma_target: Callable[[], RegTarget]) -> None:
    check(make_dma_target)


@pytest.fixture
def make_plddr(route: Route) -> Callable[[], MemRegion]:
    plddr = route.device.get_mem_region("plddr")
    bases = itertools.count(plddr.base, 16 << 20)

    def make() -> MemRegion:
        base = next(bases)
        return DmaMemRegion(f"plddr@{base:#x}", base, 16 << 20, route.device.dma_engine)

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_plddr_contract(check: Callable, make_plddr: Callable[[], MemRegion]) -> None:
    check(make_plddr)


@pytest.mark.parametrize("check", DEVICE_CHECKS, ids=check_id)
def test_device_contract(check: Callable, route: Route) -> None:
    check(lambda: Device.open(route.url))
