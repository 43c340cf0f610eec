"""The mmap transport (``axi://``) against a file laid out like /dev/mem: a sparse temporary
file in which each block sits at its physical address.

A file is not hardware: read-only registers take writes, write-1-to-clear bits do not clear
and nothing raises an interrupt or moves DMA data. So these tests check what the transport
itself does (offsets, widths, mappings, waiting, URL checks); the device classes' DMA
sequence runs against the RTL in tests/integration.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from xrt import Device, ErrorCode, MemRegion, XrtError
from xrt.hw.regs import DMA, NPU
from xrt.hw.targets import target
from xrt.npu_device import BuyiDevice, NpuDevice, ZG330Device
from xrt.testing.contracts import (
    DEVICE_CHECKS,
    MEM_REGION_CHECKS,
    REG_REGION_CHECKS,
    RegTarget,
    check_id,
)
from xrt.transport.mmap import MmapMemRegion, MmapRegRegion, MmapTransport

NPU_BASE, DMA_BASE = 0x4000_0000, 0x8000_0000
UDMA = target("buyi").memory("udma")


def raises(code: ErrorCode) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


def put32(path: Path, addr: int, value: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, value.to_bytes(4, "little"), addr)
    finally:
        os.close(fd)


def get32(path: Path, addr: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return int.from_bytes(os.pread(fd, 4, addr), "little")
    finally:
        os.close(fd)


def board_file(path: Path, target_id: int = 1) -> Path:
    """A sparse file as large as the highest mapped address, holding the ID registers a
    driver probes (MAGIC of both blocks, NPU TARGET), as the hardware would."""
    with path.open("wb") as f:
        f.truncate(DMA_BASE + 0x1000)
    put32(path, NPU_BASE + NPU.register("MAGIC").offset, NPU.register("MAGIC").reset)
    put32(path, NPU_BASE + NPU.register("TARGET").offset, target_id)
    put32(path, DMA_BASE + DMA.register("MAGIC").offset, DMA.register("MAGIC").reset)
    return path


@pytest.fixture
def board(tmp_path: Path) -> Path:
    return board_file(tmp_path / "mem.bin")


@pytest.fixture
def transport(board: Path) -> Iterator[MmapTransport]:
    t = MmapTransport(str(board))
    yield t
    t.close()


def test_axi_url_builds_the_buyi_device(board: Path) -> None:
    url = f"axi://ql100aiu?npu=0x40000000&dma=0x80000000&target=buyi&file={board}"
    with Device.open(url) as dev:
        assert isinstance(dev, BuyiDevice) and dev.name == "ql100aiu"
        assert set(dev.reg_regions) == {"npu", "dma"}
        assert set(dev.mem_regions) == {"udma", "plddr"}
        assert dev.default_mem_region().name == "plddr"
        udma = dev.get_mem_region("udma")
        assert isinstance(udma, MmapMemRegion) and udma.host_visible
        assert dev.cycles is None and dev.has_irq
        npu = dev.get_reg_region("npu")
        assert isinstance(npu, MmapRegRegion) and npu.regs.MAGIC.read() == 0x4E50_5530


def test_zg330_over_mmap_has_ocm(tmp_path: Path) -> None:
    path = board_file(tmp_path / "zg.bin", target_id=2)
    with Device.open(f"axi://zg?target=zg330&file={path}") as dev:
        assert isinstance(dev, ZG330Device) and "ocm" in dev.mem_regions
    with raises(ErrorCode.DEVICE_INTERNAL) as e:  # the hardware says it is a ZG330
        Device.open(f"axi://zg?target=buyi&file={path}")
    assert "NPU_TARGET.ID is 2, expected 1" in e.value.message


def test_registers_sit_at_their_physical_offsets(board: Path) -> None:
    with Device.open(f"axi://b?file={board}") as dev:
        npu, dma = dev.get_reg_region("npu"), dev.get_reg_region("dma")
        npu.regs.SCRATCH.write(0xDEAD_BEEF)
        dma.regs.ROW_BYTES.write(0x0102_0304)
        assert get32(board, NPU_BASE + 0x40) == 0xDEAD_BEEF
        assert get32(board, DMA_BASE + 0x50) == 0x0102_0304
        put32(board, DMA_BASE + 0x14, 0x0000_0302)  # the "hardware" sets STATUS
        assert dma.regs.STATUS.read_fields() == {"BUSY": 0, "DONE": 1, "ERROR": 0, "ERR_CODE": 3}
        npu.write_masked(NPU_BASE + 0x40, 0x0000_1100, 0x0000_FF00)
        assert get32(board, NPU_BASE + 0x40) == 0xDEAD_11EF
        udma = dev.get_mem_region("udma")
        udma.write(udma.base + 5, b"over the file")
        fd = os.open(board, os.O_RDONLY)
        try:
            assert os.pread(fd, 13, UDMA.base + 5) == b"over the file"
        finally:
            os.close(fd)


def test_probe_refuses_a_file_without_an_npu(tmp_path: Path) -> None:
    path = tmp_path / "blank.bin"
    with path.open("wb") as f:
        f.truncate(DMA_BASE + 0x1000)
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        Device.open(f"axi://b?file={path}")
    assert "npu MAGIC at 0x40000000 reads 0x0" in e.value.message
    with Device.open(f"axi://b?file={path}&probe=0") as dev:
        assert dev.read_reg(NPU_BASE) == 0


@pytest.fixture
def make_udma(transport: MmapTransport) -> Callable[[], MemRegion]:
    window = 4 << 20
    bases = itertools.cycle(range(UDMA.base, UDMA.end, window))
    return lambda: transport.host_region("udma", base=next(bases), size=window)


@pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
def test_udma_contract(check: Callable, make_udma: Callable[[], MemRegion]) -> None:
    check(make_udma)


@pytest.fixture
def make_reg_target(transport: MmapTransport) -> Callable[[], RegTarget]:
    # No constant register: a file keeps whatever is written to a read-only one.
    return lambda: RegTarget(transport.reg_region("npu", NPU), NPU.register("SCRATCH").offset)


@pytest.mark.parametrize("check", REG_REGION_CHECKS, ids=check_id)
def test_register_contract(check: Callable, make_reg_target: Callable[[], RegTarget]) -> None:
    check(make_reg_target)


@pytest.mark.parametrize("check", DEVICE_CHECKS, ids=check_id)
def test_device_contract(check: Callable, board: Path) -> None:
    check(lambda: Device.open(f"axi://b?file={board}"))


def test_wait_irq_polls_the_interrupt_registers(board: Path) -> None:
    with Device.open(f"axi://b?file={board}") as dev:
        assert isinstance(dev, NpuDevice)
        assert dev.wait_irq(0.0) is False
        assert dev.wait_irq(0.05) is False  # nothing raises an interrupt on a file
        # The DMA's DONE latched and enabled: the line is high.
        put32(board, DMA_BASE + DMA.register("INT_STATUS").offset, 1)
        assert dev.wait_irq(0.0) is False  # not enabled
        put32(board, DMA_BASE + DMA.register("INT_ENABLE").offset, 1)
        assert dev.wait_irq(0.0) is True
        put32(board, DMA_BASE + DMA.register("INT_STATUS").offset, 0)
        # An interrupt that arrives while waiting (a thread plays the hardware).
        put32(board, NPU_BASE + NPU.register("INT_ENABLE").offset, 1)
        raised = threading.Event()

        def hardware() -> None:
            time.sleep(0.05)
            # Set before the write: the waiter may see the write before this thread runs on.
            raised.set()
            put32(board, NPU_BASE + NPU.register("INT_STATUS").offset, 1)

        thread = threading.Thread(target=hardware)
        thread.start()
        try:
            assert dev.wait_irq(30.0) is True
            assert raised.is_set()
        finally:
            thread.join()


def test_reset_is_not_available_on_a_board(board: Path) -> None:
    with Device.open(f"axi://b?file={board}") as dev:
        assert isinstance(dev, NpuDevice)
        with raises(ErrorCode.WRONG_ORDER) as e:
            dev.reset()
        assert "reset" in e.value.message


def test_bad_urls(board: Path, tmp_path: Path) -> None:
    f = f"file={board}"
    cases = [
        (f"axi://b?npu=0x40000004&{f}", ErrorCode.OUT_OF_RANGE),  # not page-aligned
        (f"axi://b?npu=big&{f}", ErrorCode.WRONG_TYPE),
        (f"axi://b?npu=-4096&{f}", ErrorCode.OUT_OF_RANGE),
        (f"axi://b?target=tpu&{f}", ErrorCode.WRONG_TYPE),
        (f"axi://b?target=7&{f}", ErrorCode.WRONG_TYPE),
        (f"axi://b?udma_size=0&{f}", ErrorCode.OUT_OF_RANGE),
        (f"axi://b?dam=0x80000000&{f}", ErrorCode.WRONG_TYPE),  # a typo is not ignored
        (f"axi://b?{f}&probe=2", ErrorCode.WRONG_TYPE),
        (f"axi://b?dma=0x90000000&{f}", ErrorCode.OUT_OF_RANGE),  # past the file's end
        (f"axi://b?file={tmp_path / 'missing.bin'}", ErrorCode.FILE_NOT_FOUND),
        (f"axi://b?{f}&uio={tmp_path / 'uio9'}", ErrorCode.FILE_NOT_FOUND),
        (f"axi://b?{f}&bounce={64 << 20}", ErrorCode.OUT_OF_RANGE),  # more than half of udma
    ]
    for url, code in cases:
        with raises(code):
            Device.open(url)
    with raises(ErrorCode.FILE_NOT_FOUND):
        MmapTransport(str(tmp_path / "nope"))
    with raises(ErrorCode.WRONG_TYPE):
        MmapTransport(str(board), npu_base="0x40000000")  # type: ignore[arg-type]


def test_closed_transport_refuses(board: Path) -> None:
    t = MmapTransport(str(board))
    regs = t.reg_region("npu", NPU)
    t.close()
    t.close()
    with raises(ErrorCode.WRONG_ORDER):
        regs.read(NPU_BASE)
    with raises(ErrorCode.WRONG_ORDER):
        t.host_region()
    with raises(ErrorCode.WRONG_ORDER):
        t.wait_irq(0.0)
