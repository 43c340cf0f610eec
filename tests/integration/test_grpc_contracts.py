"""The data model's contract suites (`xrt.testing.contracts`) against the gRPC transport and
the device classes, on a real server:

- `GrpcMemRegion` over ``udma``, streaming and on the local fast path (windows of ``udma``,
  so the regions a check asks for are distinct memory);
- `GrpcRegRegion` over the ``dma`` block (SCRATCH as the scratch register, MAGIC as the
  constant: the RTL refuses writes to it with SLVERR, see `check_reg_constant`);
- `DmaMemRegion` over ``plddr`` (windows of it, on one device's DMA engine);
- the device itself (``Device.open("grpc://...")``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

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

WINDOW = 4 << 20


@pytest.fixture(params=["streaming", "local"])
def transport(
    request: pytest.FixtureRequest, buyi_server: ServerProcess
) -> Iterator[GrpcTransport]:
    t = GrpcTransport(buyi_server.address, local=request.param == "local")
    assert t.local_fast_path == (request.param == "local"), t.local_note
    yield t
    t.close()


@pytest.fixture
def make_udma(transport: GrpcTransport) -> Callable[[], MemRegion]:
    udma = transport.info.memory("udma")
    bases = itertools.cycle(range(udma.base, udma.end, WINDOW))

    def make() -> MemRegion:
        region = transport.host_region("udma", base=next(bases), size=WINDOW)
        assert isinstance(region, GrpcMemRegion)
        return region

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_udma_contract(check: Callable, make_udma: Callable[[], MemRegion]) -> None:
    check(make_udma)


@pytest.fixture
def make_dma_target(buyi_server: ServerProcess) -> Iterator[Callable[[], RegTarget]]:
    t = GrpcTransport(buyi_server.address)

    def make() -> RegTarget:
        region = t.reg_region("dma", DMA)
        assert isinstance(region, GrpcRegRegion) and region.size == 0x1000
        magic = DMA.register("MAGIC")
        return RegTarget(region, DMA.register("SCRATCH").offset, (magic.offset, magic.reset))

    yield make
    t.close()


@pytest.mark.parametrize("check", REG_REGION_CHECKS, ids=check_id)
def test_dma_registers_contract(check: Callable, make_dma_target: Callable[[], RegTarget]) -> None:
    check(make_dma_target)


@pytest.fixture
def make_plddr(buyi: NpuDevice) -> Callable[[], MemRegion]:
    plddr = buyi.get_mem_region("plddr")
    bases = itertools.count(plddr.base, 16 << 20)

    def make() -> MemRegion:
        base = next(bases)
        return DmaMemRegion(f"plddr@{base:#x}", base, 16 << 20, buyi.dma_engine)

    return make


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_plddr_contract(check: Callable, make_plddr: Callable[[], MemRegion]) -> None:
    check(make_plddr)


@pytest.mark.parametrize("check", DEVICE_CHECKS, ids=check_id)
@pytest.mark.parametrize("query", ["", "local=0"])
def test_device_contract(check: Callable, query: str, buyi_url: str) -> None:
    check(lambda: Device.open(f"{buyi_url}?{query}"))
